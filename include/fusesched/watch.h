/*
 * Changes made beside the mount, seen as they happen. The kernel trusts the
 * names and attributes it was given for a timeout; changes made through the
 * mount update its caches at once, but a change made in the backing
 * directory itself (by another process on the host, another container's
 * bind mount, an administrator) is seen only when the timeout runs out. On
 * a local backing filesystem the daemon watches the whole filesystem
 * (fanotify) and tells the kernel at once which names and attributes
 * changed, so the timeouts there can be long and a stat of a known file
 * costs no round trip. Network and FUSE backings, whose other clients'
 * changes raise no event here, keep the short timeouts.
 */
#ifndef FUSESCHED_WATCH_H
#define FUSESCHED_WATCH_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct fs;
struct backing_watch;

/*
 * Starts watching the filesystem of fs's backing directory, on a thread of
 * its own, ignoring the calling process's own changes (call it in the
 * process that serves the mount, after daemonizing). 0 and *out, or -errno
 * with a message saying why the backing is not watched (its filesystem
 * type, or what fanotify refused).
 */
int backing_watch_start(struct fs *fs, struct backing_watch **out, char *err, size_t err_bytes);

/* The device whose changes are watched (the backing directory's st_dev). */
dev_t backing_watch_dev(const struct backing_watch *w);

/* Stops the thread (before the session goes) and frees; NULL is fine. */
void backing_watch_stop(struct backing_watch *w);

#endif
