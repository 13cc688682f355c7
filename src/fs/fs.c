/* The fs object, its operations table, and the helpers the operations share. */
#include "fs_internal.h"

#include "fusesched/clock.h"
#include "fusesched/watch.h"

#include <errno.h>
#include <linux/fuse.h>
#include <linux/magic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

void fs_options_default(struct fs_options *o)
{
	memset(o, 0, sizeof(*o));
	o->entry_timeout_s = 1.0;
	o->attr_timeout_s = 1.0;
	o->negative_timeout_s = 1.0;
	o->watch_timeout_s = 60.0;
	o->max_write_bytes = FS_READ_MAX_BYTES;
	o->max_background = 1024;
	o->posix_acl = true;
	o->keep_page_cache = true;
}

/*
 * Half the soft RLIMIT_NOFILE (the daemon has raised it by now) for cached
 * node descriptors: the other half is for open files, each of which holds a
 * backing descriptor plus its node's, and for the daemon's own (fuse device,
 * io_uring, sockets). When open files need more, EMFILE makes the cache
 * give descriptors back (fs_reclaim_fds). Capped: past 65536 a reopen from
 * the handle (a few microseconds) is cheaper than the kernel memory every
 * cached descriptor keeps from reclaim.
 */
#define CACHED_FDS_CAP 65536u
#define CACHED_FDS_FLOOR 16u

static uint32_t cached_fds_default(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return CACHED_FDS_CAP;
	rlim_t half = rl.rlim_cur / 2;
	if (half > CACHED_FDS_CAP)
		return CACHED_FDS_CAP;
	return half < CACHED_FDS_FLOOR ? CACHED_FDS_FLOOR : (uint32_t)half;
}

int fs_new(const struct fs_options *o, struct datapath *dp, struct fs **out,
	   char *err, size_t err_bytes)
{
	int root_fd = open(o->backing_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (root_fd < 0) {
		int e = errno;
		struct stat st;
		if (e == ENOTDIR || (stat(o->backing_path, &st) == 0 && !S_ISDIR(st.st_mode)))
			snprintf(err, err_bytes, "backing directory '%s' is not a directory",
				 o->backing_path);
		else
			snprintf(err, err_bytes, "cannot open backing directory '%s': %s",
				 o->backing_path, strerror(e));
		return -e;
	}
	struct fs *fs = calloc(1, sizeof(*fs));
	if (!fs) {
		close(root_fd);
		snprintf(err, err_bytes, "out of memory");
		return -ENOMEM;
	}
	fs->opts = *o;
	fs->datapath = dp;
	fs->selinux_active = access("/sys/fs/selinux/enforce", F_OK) == 0;
	pthread_mutex_init(&fs->handles_lock, NULL);
	fs->handles.prev = fs->handles.next = &fs->handles;
	int r = inode_table_new(root_fd, cached_fds_default(), &fs->inodes);
	if (r) {
		close(root_fd);
		free(fs);
		snprintf(err, err_bytes, "cannot set up inode table for '%s': %s",
			 o->backing_path, strerror(-r));
		return r;
	}
	*out = fs;
	return 0;
}

void fs_free(struct fs *fs)
{
	if (!fs)
		return;
	while (fs->handles.next != &fs->handles) {
		struct fs_handle *h = fs->handles.next;
		fs_handle_untrack(fs, h);
		h->close(fs, h);
	}
	fs_unwatch_backing(fs);
	pthread_mutex_destroy(&fs->handles_lock);
	inode_table_free(fs->inodes);
	free(fs);
}

void fs_set_max_background(struct fs *fs, unsigned int max_background)
{
	fs->opts.max_background = max_background;
}

void fs_handle_track(struct fs *fs, struct fs_handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	h->next = fs->handles.next;
	h->prev = &fs->handles;
	h->next->prev = h;
	fs->handles.next = h;
	pthread_mutex_unlock(&fs->handles_lock);
}

void fs_handle_untrack(struct fs *fs, struct fs_handle *h)
{
	pthread_mutex_lock(&fs->handles_lock);
	h->prev->next = h->next;
	h->next->prev = h->prev;
	h->prev = h->next = h;
	pthread_mutex_unlock(&fs->handles_lock);
}

void fs_invalidate_attr(struct fs *fs, fuse_ino_t ino)
{
	/* A negative offset: attributes only, no page-cache invalidation (which could wait on us). */
	if (fs->session)
		fuse_lowlevel_notify_inval_inode(fs->session, ino, -1, 0);
}

bool fs_fd_on_local_fs(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) != 0)
		return false;
	switch (sf.f_type) {
	case EXT4_SUPER_MAGIC:
	case XFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
		return true;
	default:
		return false;
	}
}

static double timeout_s(const struct fs *fs, dev_t dev, double set_s, bool given)
{
	return !given && fs->watch && dev == fs->watched_dev ? fs->opts.watch_timeout_s : set_s;
}

double fs_entry_timeout_s(const struct fs *fs, dev_t dev)
{
	return timeout_s(fs, dev, fs->opts.entry_timeout_s, fs->opts.entry_timeout_given);
}

double fs_attr_timeout_s(const struct fs *fs, dev_t dev)
{
	return timeout_s(fs, dev, fs->opts.attr_timeout_s, fs->opts.attr_timeout_given);
}

double fs_negative_timeout_s(const struct fs *fs, dev_t dev)
{
	return timeout_s(fs, dev, fs->opts.negative_timeout_s, fs->opts.negative_timeout_given);
}

int fs_watch_backing(struct fs *fs, char *err, size_t err_bytes)
{
	if (fs->opts.watch_timeout_s <= 0) {
		snprintf(err, err_bytes, "watch_timeout=0");
		return -ECANCELED;
	}
	int r = backing_watch_start(fs, &fs->watch, err, err_bytes);
	if (!r)
		fs->watched_dev = backing_watch_dev(fs->watch);
	return r;
}

void fs_unwatch_backing(struct fs *fs)
{
	backing_watch_stop(fs->watch);
	fs->watch = NULL;
}

uint64_t fs_inode_count(struct fs *fs)
{
	return inode_table_count(fs->inodes);
}

void fs_proc_path(int fd, char out[FS_PROC_PATH_BYTES])
{
	snprintf(out, FS_PROC_PATH_BYTES, "/proc/self/fd/%d", fd);
}

void fs_caller_creds(fuse_req_t req, bool with_groups, struct creds *out)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	out->uid = ctx->uid;
	out->gid = ctx->gid;
	out->group_count = 0;
	out->keep_fsetid = false;
	if (!with_groups || creds_are_root(out))
		return;
	int n = fuse_req_getgroups(req, CREDS_MAX_GROUPS, out->groups);
	out->group_count = n <= 0 ? 0 : (n > CREDS_MAX_GROUPS ? CREDS_MAX_GROUPS : n);
}

int fs_run_as(const struct creds *c, int (*op)(void *arg), void *arg)
{
	if (c->uid == 0 && c->gid == 0)
		return op(arg); /* the daemon's own: nothing to switch */
	int r = creds_enter(c);
	if (r)
		return r;
	r = op(arg);
	creds_leave();
	return r;
}

int fs_run_as_caller(fuse_req_t req, int (*op)(void *arg), void *arg)
{
	struct creds c;
	fs_caller_creds(req, false, &c);
	int r = fs_run_as(&c, op, arg);
	if ((r != -EACCES && r != -EPERM) || creds_are_root(&c))
		return r;
	/* Refused: maybe a supplementary group grants it. Nothing was changed, so retry. */
	fs_caller_creds(req, true, &c);
	return c.group_count ? fs_run_as(&c, op, arg) : r;
}

/* Capabilities count only in the daemon's user namespace, where the backing filesystem judges. */
static bool in_daemon_user_namespace(pid_t pid)
{
	char path[64], theirs[64] = "", ours[64] = "";
	snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
	ssize_t n = readlink(path, theirs, sizeof(theirs) - 1);
	ssize_t m = readlink("/proc/self/ns/user", ours, sizeof(ours) - 1);
	return n > 0 && m > 0 && strcmp(theirs, ours) == 0;
}

bool fs_caller_has_capability(fuse_req_t req, int capability)
{
	pid_t pid = fuse_req_ctx(req)->pid;
	if (!in_daemon_user_namespace(pid))
		return false;
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char line[256];
	unsigned long long effective = 0;
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = sscanf(line, "CapEff: %llx", &effective) == 1;
	fclose(f);
	return found && capability >= 0 && capability < 64 && (effective >> capability) & 1;
}

int fs_check_name(const char *name)
{
	if (name[0] == '\0' || strchr(name, '/'))
		return -EINVAL;
	return 0;
}

/* Once a minute at most: a burst of opens past the limit would otherwise flood the log. */
static void log_fd_exhausted(struct fs *fs, int err)
{
	uint64_t now_s = (uint64_t)time(NULL);
	uint64_t last = atomic_load_explicit(&fs->fd_exhausted_logged_s, memory_order_relaxed);
	if (now_s < last + 60 ||
	    !atomic_compare_exchange_strong(&fs->fd_exhausted_logged_s, &last, now_s))
		return;
	struct rlimit rl = {0};
	getrlimit(RLIMIT_NOFILE, &rl);
	fuse_log(FUSE_LOG_ERR,
		 "fusesched: out of file descriptors (%s, limit %llu): open files hold them all, "
		 "callers get %s until some are closed; raise the hard RLIMIT_NOFILE of the daemon\n",
		 strerror(-err), (unsigned long long)rl.rlim_cur, err == -EMFILE ? "EMFILE" : "ENFILE");
}

/* Cached node descriptors given back per EMFILE: enough for a burst of opens. */
#define RECLAIM_FDS 64u

bool fs_reclaim_fds(struct fs *fs, int err)
{
	if (err != -EMFILE && err != -ENFILE)
		return false;
	bool pipes = fs_channel_give_up_pipes() > 0; /* the first to go: only a saving */
	if (inode_table_fds_release(fs->inodes, RECLAIM_FDS) > 0 || pipes)
		return true;
	/* Nodes without handles give theirs back once the kernel forgets them: not in time for this open. */
	fs_prune_nodes(fs, true);
	log_fd_exhausted(fs, err);
	return false;
}

/* FUSE_NOTIFY_PRUNE (protocol 7.45, kernel 6.18), beyond libfuse 3.14's header. */
#define FS_FUSE_NOTIFY_PRUNE 9
struct fs_notify_prune_out {
	uint32_t count;
	uint32_t padding;
	uint64_t spare;
};
/* Node ids per notification (the kernel takes them 512 at a time). */
#define PRUNE_BATCH 256u

void fs_prune_nodes(struct fs *fs, bool short_of_fds)
{
	if (!fs->session || atomic_load_explicit(&fs->prune_refused, memory_order_relaxed))
		return;
	if (!short_of_fds && !inode_table_prune_due(fs->inodes))
		return;
	uint64_t now_ns = clock_now_ns();
	uint64_t last = atomic_load_explicit(&fs->pruned_ns, memory_order_relaxed);
	if (!short_of_fds && now_ns < last + FS_PRUNE_INTERVAL_MS * 1000000u)
		return;
	if (!atomic_compare_exchange_strong(&fs->pruned_ns, &last, now_ns) && !short_of_fds)
		return; /* another worker prunes this round */
	uint64_t ids[PRUNE_BATCH];
	uint32_t count = inode_table_prune_pick(fs->inodes, short_of_fds, ids, PRUNE_BATCH);
	if (!count)
		return;
	struct fs_notify_prune_out arg = {.count = count};
	struct fuse_out_header h = {
		.len = (uint32_t)(sizeof(h) + sizeof(arg) + count * sizeof(ids[0])),
		.error = FS_FUSE_NOTIFY_PRUNE,
	};
	struct iovec iov[] = {{&h, sizeof(h)}, {&arg, sizeof(arg)}, {ids, count * sizeof(ids[0])}};
	if (writev(fuse_session_fd(fs->session), iov, 3) >= 0 || (errno != EINVAL && errno != ENOSYS))
		return;
	if (!atomic_exchange(&fs->prune_refused, true))
		fuse_log(FUSE_LOG_WARNING,
			 "fusesched: the kernel cannot be asked to forget inodes (FUSE_NOTIFY_PRUNE, "
			 "Linux 6.18): on this backing filesystem without file handles the daemon "
			 "keeps a descriptor for every inode the kernel caches, until it forgets them\n");
}

static int open_path_at(struct fs *fs, int dir_fd, const char *name)
{
	int fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 && fs_reclaim_fds(fs, -errno))
		fd = openat(dir_fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* The entry of the inode fd (O_PATH, taken) stands for, with one kernel lookup reference. */
static int entry_of_path_fd(struct fs *fs, int fd, struct fuse_entry_param *e)
{
	int r;
	memset(e, 0, sizeof(*e));
	if (fstatat(fd, "", &e->attr, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	uint64_t id = 0, generation = 0;
	r = inode_table_insert(fs->inodes, fd, &e->attr, &id, &generation);
	if (r) {
		close(fd);
		return r;
	}
	e->ino = id;
	e->generation = generation;
	e->attr_timeout = fs_attr_timeout_s(fs, e->attr.st_dev);
	e->entry_timeout = fs_entry_timeout_s(fs, e->attr.st_dev);
	return 0;
}

int fs_lookup_entry(struct fs *fs, fuse_ino_t parent, const char *name,
		    struct fuse_entry_param *e)
{
	int r = fs_check_name(name);
	if (r)
		return r;
	/* ".." of the root is the root: nothing above the backing directory exists. */
	if (parent == FUSE_ROOT_ID && strcmp(name, "..") == 0)
		name = ".";
	int pfd = inode_table_fd_get(fs->inodes, parent);
	if (pfd < 0)
		return pfd;
	int fd = open_path_at(fs, pfd, name);
	inode_table_fd_put(fs->inodes, parent);
	return fd < 0 ? fd : entry_of_path_fd(fs, fd, e);
}

int fs_entry_of_open_file(struct fs *fs, int file_fd, struct fuse_entry_param *e)
{
	char path[FS_PROC_PATH_BYTES];
	fs_proc_path(file_fd, path);
	int fd = open(path, O_PATH | O_CLOEXEC);
	return fd < 0 ? -errno : entry_of_path_fd(fs, fd, e);
}

void fs_entry_given(struct fs *fs, const struct fuse_entry_param *e, uint64_t now_ns)
{
	double held_s = e->entry_timeout < e->attr_timeout ? e->entry_timeout : e->attr_timeout;
	inode_table_entry_given(fs->inodes, e->ino, &e->attr, now_ns, (uint64_t)(held_s * 0.75e9));
}

void fs_reply_entry(struct fs *fs, fuse_req_t req, const struct fuse_entry_param *e)
{
	/* An interrupted request never reaches the kernel: it holds no reference. */
	if (fuse_reply_entry(req, e) < 0)
		inode_table_forget(fs->inodes, e->ino, 1);
	else
		fs_entry_given(fs, e, clock_now_ns());
}

void fs_op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct fs *fs = userdata;
	/* Kernel-local flock and POSIX locks: we never ask for lock requests. */
	conn->want &= ~(FUSE_CAP_POSIX_LOCKS | FUSE_CAP_FLOCK_LOCKS);
	/* Off by default: the kernel's flusher, not the caller, would issue the writes. */
	if (fs->opts.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
		conn->want |= FUSE_CAP_WRITEBACK_CACHE;
	else
		conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
	/*
	 * POSIX ACLs: the kernel checks them with the mode (it fetches and
	 * caches system.posix_acl_access per inode), and sends modes unmasked
	 * with the caller's umask, which creation applies in its own thread
	 * only where no default ACL replaces it (creds_umask_for_creation).
	 */
	if (fs->opts.posix_acl && (conn->capable & FUSE_CAP_POSIX_ACL) &&
	    (conn->capable & FUSE_CAP_DONT_MASK))
		conn->want |= FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
	/* No export support: file handles would bypass name resolution. */
	conn->want &= ~FUSE_CAP_EXPORT_SUPPORT;
	/*
	 * No splice: replies come from engine buffers, not file descriptors, and
	 * a spliced write request costs a pipe plus the same copy. Measured: the
	 * daemon's CPU per GiB of 1 MiB direct reads and writes is the same
	 * either way, so the plain path stays.
	 */
	conn->want &= ~(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE);
	if (fs->opts.max_write_bytes)
		conn->max_write = fs->opts.max_write_bytes;
	conn->max_readahead = FS_READ_MAX_BYTES; /* max_pages too: see channel_writev */
	if (fs->opts.max_background) {
		conn->max_background = fs->opts.max_background;
		conn->congestion_threshold = fs->opts.max_background * 3 / 4;
	}
}

static const struct fuse_lowlevel_ops fs_ops = {
	.init = fs_op_init,
	.lookup = fs_op_lookup,
	.forget = fs_op_forget,
	.forget_multi = fs_op_forget_multi,
	.getattr = fs_op_getattr,
	.setattr = fs_op_setattr,
	.readlink = fs_op_readlink,
	.mknod = fs_op_mknod,
	.mkdir = fs_op_mkdir,
	.symlink = fs_op_symlink,
	.link = fs_op_link,
	.unlink = fs_op_unlink,
	.rmdir = fs_op_rmdir,
	.rename = fs_op_rename,
	.statfs = fs_op_statfs,
	.access = fs_op_access,
	.open = fs_op_open,
	.create = fs_op_create,
	.release = fs_op_release,
	.flush = fs_op_flush,
	.read = fs_op_read,
	.write = fs_op_write,
	.fsync = fs_op_fsync,
	.fallocate = fs_op_fallocate,
	.lseek = fs_op_lseek,
	.copy_file_range = fs_op_copy_file_range,
	.ioctl = fs_op_ioctl,
	.opendir = fs_op_opendir,
	.readdir = fs_op_readdir,
	.readdirplus = fs_op_readdirplus,
	.releasedir = fs_op_releasedir,
	.fsyncdir = fs_op_fsyncdir,
	.setxattr = fs_op_setxattr,
	.getxattr = fs_op_getxattr,
	.listxattr = fs_op_listxattr,
	.removexattr = fs_op_removexattr,
};

const struct fuse_lowlevel_ops *fs_lowlevel_ops(void)
{
	return &fs_ops;
}
