/* The kernel's async request limit of our FUSE connection, through fusectl. */
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

static int open_in(const char *dir, long conn)
{
	char file[PATH_MAX];
	snprintf(file, sizeof(file), "%s/%ld/max_background", dir, conn);
	int fd = open(file, O_RDWR | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

int kernel_queue_open(const char *mountpoint, char *err, size_t err_bytes)
{
	long conn = connection_of(mountpoint);
	if (conn < 0) {
		snprintf(err, err_bytes, "no FUSE mount found on '%s' in /proc/self/mountinfo", mountpoint);
		return (int)conn;
	}
	int fd = open_in(FUSECTL_DIR, conn);
	if (fd >= 0 || fd != -ENOENT)
		goto out;
	/* fusectl is not mounted (no systemd): a private instance, detached once opened. */
	char dir[] = "/tmp/fusesched-fusectl.XXXXXX";
	if (!mkdtemp(dir)) {
		fd = -errno;
		goto out;
	}
	if (mount("fusectl", dir, "fusectl", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL) < 0) {
		fd = -errno;
	} else {
		fd = open_in(dir, conn);
		(void)umount2(dir, MNT_DETACH);
	}
	(void)rmdir(dir);
out:
	if (fd < 0)
		snprintf(err, err_bytes, "cannot open the fuse control file of connection %ld (fusectl, "
			 FUSECTL_DIR "): %s", conn, strerror(-fd));
	return fd;
}

/* fusectl files cannot seek: each write is parsed whole, from position 0, which it never moves. */
int kernel_queue_set(int fd, uint32_t limit)
{
	char text[16];
	int n = snprintf(text, sizeof(text), "%u\n", limit);
	return write(fd, text, (size_t)n) == n ? 0 : -errno;
}
