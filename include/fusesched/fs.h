/*
 * The passthrough filesystem: FUSE low-level operations over a backing
 * directory. Metadata is served in the worker thread; data operations go
 * through a struct datapath (see datapath.h).
 */
#ifndef FUSESCHED_FS_H
#define FUSESCHED_FS_H

#include "fusesched/datapath.h"

#include <stdbool.h>
#include <stddef.h>

struct fs_options {
	const char *backing_path;
	/*
	 * -o nodevnodes: mknod of block and character devices fails with EPERM.
	 * By default a caller with CAP_MKNOD (the kernel checks it) creates
	 * them, as on a local filesystem; opening them is refused unless the
	 * volume is mounted with -o dev.
	 */
	bool refuse_device_nodes;
	/*
	 * The kernel checks POSIX ACLs (true). -o noacl: the volume reports
	 * that it has none (system.posix_acl_* are unsupported and unlisted;
	 * the kernel checks the mode bits only, and the backing filesystem
	 * still applies ACLs it has where the daemon acts as the caller:
	 * opening, creating), so `ls -l` asks nothing per file for them:
	 * fetching a file's ACL costs a round trip each time the kernel
	 * refreshes its attributes (readdirplus included), which is most of
	 * what `ls -l` costs through the mount.
	 */
	bool posix_acl;
	/*
	 * -o writeback_cache: the kernel caches writes and flushes them later
	 * with pid 0, so they are charged to the tenant that opened the file.
	 */
	bool writeback_cache;
	/*
	 * The kernel's cached pages of a file are kept across opens while the
	 * backing file is unchanged (true; close-to-open, ops_file.c).
	 * -o nokeep_cache: dropped at every open.
	 */
	bool keep_page_cache;
	/*
	 * How long the kernel keeps what it was told without asking again:
	 * names, attributes, and names found missing (0: ENOENT, not cached).
	 * Changes made through the mount update the kernel's caches at once;
	 * these bound how late changes made beside it (in the backing
	 * directory, or by another client of a shared backing store) are seen.
	 */
	double entry_timeout_s;
	double attr_timeout_s;
	double negative_timeout_s;
	/*
	 * Where the backing filesystem's changes are watched (watch.h: a local
	 * one, fs_watch_backing), the kernel is told at once of every change
	 * made beside the mount, so there names, attributes and missing names
	 * are trusted this long instead, unless set explicitly (the _given
	 * flags). 0: not watched.
	 */
	double watch_timeout_s;
	bool entry_timeout_given, attr_timeout_given, negative_timeout_given;
	/*
	 * The largest write request (default 1 MiB). The kernel keeps one
	 * first-come, first-served line of requests and each is read whole, so
	 * every synchronous writer puts up to this many bytes ahead of anyone
	 * else's next request, and its copies run without preemption on a
	 * kernel that has none. Reads stay at FS_READ_MAX_BYTES whatever it is:
	 * a read request carries no payload.
	 */
	unsigned int max_write_bytes;
	/*
	 * How many async requests (direct I/O from aio, readahead, writeback)
	 * the kernel lets into the daemon at once, given at INIT; the kernel's
	 * default is 12. The daemon sizes it while mounted (engine.h,
	 * engine_set_kernel_queue) unless -o max_background=N fixes it. It is
	 * also what bounds the write payloads the daemon holds for async
	 * requests (at most max_background x max_write_bytes): the daemon
	 * never stops reading /dev/fuse to save memory, since every tenant's
	 * requests share it.
	 */
	unsigned int max_background;
};

/* Readahead and direct reads: the most one read request asks for. */
#define FS_READ_MAX_BYTES (1u << 20)

void fs_options_default(struct fs_options *o);

struct fs;

/*
 * Opens the backing directory. The datapath is borrowed and must outlive the
 * fs. On failure returns -errno and writes a message naming the problem.
 */
int fs_new(const struct fs_options *o, struct datapath *dp, struct fs **out,
	   char *err, size_t err_bytes);
void fs_free(struct fs *fs);

/* The max_background to give at INIT, if set before the session's loop starts. */
void fs_set_max_background(struct fs *fs, unsigned int max_background);

/*
 * Watches the backing filesystem for changes made beside the mount
 * (watch.h), from the process that serves the mount, before its loop
 * starts. 0, or -errno with why not (the fs then keeps the options'
 * timeouts everywhere). Stopped by fs_unwatch_backing, or fs_free.
 */
int fs_watch_backing(struct fs *fs, char *err, size_t err_bytes);
void fs_unwatch_backing(struct fs *fs);

/* The operations table; the session's userdata must be the struct fs. */
const struct fuse_lowlevel_ops *fs_lowlevel_ops(void);

/*
 * Routes the mounted session's /dev/fuse traffic through the fs, which then
 * asks the kernel to leave dropping setuid/setgid on write and truncation to
 * it (FUSE_HANDLE_KILLPRIV_V2, Linux 5.11+; older kernels keep doing it
 * themselves): the kernel stops asking for security.capability before every
 * write. The fs also sends its notifications (stale attributes) through se.
 * Call after fuse_session_mount, before the loop. 0 or -errno.
 */
int fs_attach_channel(struct fs *fs, struct fuse_session *se);
/*
 * Makes the pipes the channel splices large buffered writes into, sized
 * past fs.pipe-max-size: call while the process still has CAP_SYS_RESOURCE.
 * Returns how many it made (none: writes are read, not spliced).
 */
unsigned fs_channel_make_pipes(void);

/*
 * The mount's root as a node of its own (DESIGN section 7). The kernel makes
 * a FUSE mount's root inode before INIT turns POSIX ACLs on, and never
 * caches that inode's ACL: every path walk through it by a caller who does
 * not own it would ask the daemon for its ACL. So the daemon mounts on a
 * private staging directory and binds a second node of the backing root,
 * made after INIT, at the mountpoint (mountroot.h); the first root is then
 * never walked. Armed, the next lookup of FS_ROOT_ALIAS_NAME in the first
 * root answers the second, FS_ROOT_ALIAS_ID (beyond any slot of the inode
 * table): requests naming it are served as the root's, and once in use
 * (fs_root_alias_use) the kernel is told of the root's changes under it.
 */
#define FS_ROOT_ALIAS_NAME ".fusesched-root"
#define FS_ROOT_ALIAS_ID ((UINT64_C(1) << 32) | 1)
void fs_root_alias_arm(struct fs *fs, bool armed);
void fs_root_alias_use(struct fs *fs);

/* Live inodes (root included), for tests and stats. */
uint64_t fs_inode_count(struct fs *fs);

#endif
