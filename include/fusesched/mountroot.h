/*
 * Where the volume is mounted from: the mountpoint shows a second node of
 * the backing root, made after INIT (fs.h, FS_ROOT_ALIAS_ID), so that path
 * walks through it use the kernel's cached ACL (DESIGN section 7).
 *
 * As root, libfuse mounts on a staging directory beside the control
 * sockets (CTL_SOCKET_DIR/NAME.root.PID), a private bind of itself so that
 * nothing of it propagates; once the session serves, the staging mount's
 * FS_ROOT_ALIAS_NAME is bound at the mountpoint and the staging mount is
 * detached, leaving one mount of the volume, at the mountpoint: unmounting
 * it ends the daemon as before. Without root, libfuse mounts at the
 * mountpoint itself (the first root is walked, as it always was).
 */
#ifndef FUSESCHED_MOUNTROOT_H
#define FUSESCHED_MOUNTROOT_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>

struct fs;
struct fuse_session;

struct mountroot {
	char mountpoint[PATH_MAX];
	char stage[PATH_MAX];	/* "": libfuse mounts at the mountpoint */
	bool published;		/* the volume is at the mountpoint, nothing is left on stage */
};

/* Where libfuse is to mount (m->stage, or the mountpoint when it cannot stage). */
const char *mountroot_prepare(struct mountroot *m, const char *mountpoint);

/*
 * Puts the volume at the mountpoint: binds the second root there, or, if
 * that fails, moves the staging mount itself there. Runs beside the
 * session's loop, which answers the lookup the bind makes. Nothing to do
 * without a stage. 0, or -errno with why in err.
 */
int mountroot_publish(struct mountroot *m, struct fs *fs, char *err, size_t err_bytes);

/*
 * fuse_session_unmount, and the mountpoint if the volume was published
 * there (after the device is closed, as libfuse does, so that the kernel
 * does not wait on the daemon); the stage is removed. se NULL: the
 * session never mounted, only the stage goes.
 */
void mountroot_unmount(struct mountroot *m, struct fuse_session *se);

#endif
