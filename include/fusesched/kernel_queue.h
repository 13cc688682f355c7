/*
 * The kernel's limit on async requests outstanding to one FUSE mount
 * (max_background), changed while it is mounted through the fuse control
 * filesystem (fusectl), and the kernel's count of requests outstanding.
 * The engine sizes the limit (engine.h); this room only finds the
 * connection's files, writes the limit (and the congestion threshold with
 * it) and reads the count, and aborts the connection when a stop cannot
 * finish.
 */
#ifndef FUSESCHED_KERNEL_QUEUE_H
#define FUSESCHED_KERNEL_QUEUE_H

#include <stddef.h>
#include <stdint.h>

struct kernel_queue {
	int dir_fd;   /* the connection's fusectl directory */
	int limit_fd; /* its max_background file, open for writing */
	int threshold_fd; /* its congestion_threshold file, open for writing */
};

/*
 * Opens the fusectl directory of the FUSE connection mounted on mountpoint
 * (found in /proc/self/mountinfo, so the mount is never touched). Where
 * fusectl is not mounted, a private instance is mounted for the moment the
 * files are opened, and detached again. 0, or -errno with a message naming
 * the problem.
 */
int kernel_queue_open(const char *mountpoint, struct kernel_queue *q, char *err, size_t err_bytes);

/*
 * Sets the limit (1..65535), and the congestion threshold to three quarters
 * of it, as the kernel pairs them at the mount's start: at the threshold
 * the kernel stops reading ahead asynchronously for every caller, so one
 * tenant's deep aio that a raised limit lets in would otherwise cost every
 * other tenant's buffered reads their readahead. 0 or -errno.
 */
int kernel_queue_set(const struct kernel_queue *q, uint32_t limit);

/*
 * Requests the kernel has sent or queued for the daemon and not yet had
 * answered (fusectl's waiting: read by the daemon or not; a caller held at
 * the limit is not counted). -errno on failure.
 */
int64_t kernel_queue_waiting(const struct kernel_queue *q);

/*
 * Aborts the connection (fusectl's abort): every request the kernel has
 * sent or queued and not had answered fails, ECONNABORTED to its caller,
 * and the daemon's reads of the device end. For a stop that cannot finish
 * (stop_guard.h). 0 or -errno.
 */
int kernel_queue_abort(const struct kernel_queue *q);

void kernel_queue_close(struct kernel_queue *q);

#endif
