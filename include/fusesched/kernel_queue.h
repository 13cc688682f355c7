/*
 * The kernel's limit on async requests outstanding to one FUSE mount
 * (max_background), changed while it is mounted through the fuse control
 * filesystem (fusectl). The engine sizes it (engine.h); this room only
 * finds the connection's file and writes it.
 */
#ifndef FUSESCHED_KERNEL_QUEUE_H
#define FUSESCHED_KERNEL_QUEUE_H

#include <stddef.h>
#include <stdint.h>

/*
 * Opens the max_background file of the FUSE connection mounted on
 * mountpoint (found in /proc/self/mountinfo, so the mount is never
 * touched). Where fusectl is not mounted, a private instance is mounted
 * for the moment the file is opened, and detached again. Returns an fd or
 * -errno with a message naming the problem.
 */
int kernel_queue_open(const char *mountpoint, char *err, size_t err_bytes);

/* Sets the limit (1..65535); 0 or -errno. */
int kernel_queue_set(int fd, uint32_t limit);

#endif
