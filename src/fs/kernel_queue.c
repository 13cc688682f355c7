/* The kernel's async request limit and queue of our FUSE connection, and its abort, through fusectl. */
#include "fusesched/kernel_queue.h"
#include "fusesched/mountinfo.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <unistd.h>

#define FUSECTL_DIR "/sys/fs/fuse/connections"

/* The connection number (the device minor) of the FUSE mount on path: >= 0, or -errno. */
static long connection_of(const char *path)
{
	char real[PATH_MAX];
	if (!realpath(path, real))
		return -errno;
	struct mountinfo_entry e;
	int r = mountinfo_find(real, &e);
	if (r)
		return r;
	return e.major == 0 && strncmp(e.fstype, "fuse", 4) == 0 ? (long)e.minor : -ENOENT;
}

static int open_in(const char *dir, long conn, struct kernel_queue *q)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/%ld", dir, conn);
	q->dir_fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (q->dir_fd < 0)
		return -errno;
	q->limit_fd = openat(q->dir_fd, "max_background", O_RDWR | O_CLOEXEC);
	if (q->limit_fd >= 0)
		q->threshold_fd = openat(q->dir_fd, "congestion_threshold", O_RDWR | O_CLOEXEC);
	if (q->threshold_fd >= 0)
		return 0;
	int r = -errno;
	kernel_queue_close(q);
	return r;
}

int kernel_queue_open(const char *mountpoint, struct kernel_queue *q, char *err, size_t err_bytes)
{
	q->dir_fd = q->limit_fd = q->threshold_fd = -1;
	long conn = connection_of(mountpoint);
	if (conn < 0) {
		snprintf(err, err_bytes, "no FUSE mount found on '%s' in /proc/self/mountinfo", mountpoint);
		return (int)conn;
	}
	int r = open_in(FUSECTL_DIR, conn, q);
	if (r != -ENOENT)
		goto out;
	/* fusectl is not mounted (no systemd): a private instance, detached once opened. */
	char dir[] = "/tmp/fusesched-fusectl.XXXXXX";
	if (!mkdtemp(dir)) {
		r = -errno;
		goto out;
	}
	if (mount("fusectl", dir, "fusectl", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		r = -errno;
	} else {
		r = open_in(dir, conn, q); /* the open files keep the detached instance */
		(void)umount2(dir, MNT_DETACH);
	}
	(void)rmdir(dir);
out:
	if (r < 0)
		snprintf(err, err_bytes, "cannot open the fuse control file of connection %ld (fusectl, "
			 FUSECTL_DIR "): %s", conn, strerror(-r));
	return r;
}

/* fusectl files cannot seek: each write is parsed whole, from position 0, which it never moves. */
static int write_number(int fd, uint32_t value)
{
	char text[16];
	int n = snprintf(text, sizeof(text), "%u\n", value);
	return write(fd, text, (size_t)n) == n ? 0 : -errno;
}

/*
 * The threshold first: the limit's write wakes a caller waiting for room,
 * which should find readahead allowed as the new limit has it.
 */
int kernel_queue_set(const struct kernel_queue *q, uint32_t limit)
{
	uint32_t threshold = limit * 3u / 4u;
	int r = write_number(q->threshold_fd, threshold ? threshold : 1);
	return r ? r : write_number(q->limit_fd, limit);
}

/* A read moves the position for good (no seek, no pread): each count is a fresh open. */
int64_t kernel_queue_waiting(const struct kernel_queue *q)
{
	int fd = openat(q->dir_fd, "waiting", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	char text[24];
	ssize_t n = read(fd, text, sizeof(text) - 1);
	int r = n < 0 ? -errno : 0;
	close(fd);
	if (r)
		return r;
	text[n] = '\0';
	char *end = NULL;
	long long waiting = strtoll(text, &end, 10);
	return end == text || waiting < 0 ? -EINVAL : waiting;
}

int kernel_queue_abort(const struct kernel_queue *q)
{
	int fd = openat(q->dir_fd, "abort", O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	int r = write(fd, "1\n", 2) == 2 ? 0 : -errno;
	close(fd);
	return r;
}

void kernel_queue_close(struct kernel_queue *q)
{
	if (q->threshold_fd >= 0)
		close(q->threshold_fd);
	if (q->limit_fd >= 0)
		close(q->limit_fd);
	if (q->dir_fd >= 0)
		close(q->dir_fd);
	q->dir_fd = q->limit_fd = q->threshold_fd = -1;
}
