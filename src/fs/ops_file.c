/* Open files: open/create/release/flush, and the data operations handed to the datapath. */
#include "fs_internal.h"

#include "fusesched/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * O_CREAT and O_EXCL were handled by the kernel or by create; O_NOCTTY is
 * meaningless here; O_NOFOLLOW was the kernel's to apply to the caller's
 * path (an open reaches us only for what it resolved to), and the file is
 * reopened through /proc/self/fd, a link it would refuse with ELOOP.
 */
#define OPEN_FLAGS_DROPPED (O_CREAT | O_EXCL | O_NOCTTY | O_NOFOLLOW)

/*
 * A caller's write or truncation must drop setuid/setgid, and the daemon
 * acts with rights (or a root opener's identity) that may keep them: it
 * drops them itself, and tells the kernel its cached mode is stale, so the
 * next stat shows the change at once.
 */
static bool drop_privs(struct fs *fs, fuse_ino_t ino, int fd)
{
	struct stat st;
	if (fstat(fd, &st) < 0)
		return false;
	if (!fs_mode_has_privs(st.st_mode))
		return true;
	if (fchmod(fd, fs_mode_without_privs(st.st_mode)) < 0)
		return false;
	fs_invalidate_attr(fs, ino);
	return true;
}

/*
 * The kernel flags every write of a caller without CAP_FSETID: an open file
 * is looked at once, and again only after a setattr gave some file the bits,
 * not with a stat per write.
 */
static void drop_privs_of_file(struct fs *fs, struct fs_file *f)
{
	uint64_t epoch = atomic_load(&fs->privs_epoch) + 1;
	if (atomic_load_explicit(&f->privs_checked, memory_order_relaxed) != epoch &&
	    drop_privs(fs, f->node_id, f->data.fd))
		atomic_store_explicit(&f->privs_checked, epoch, memory_order_relaxed);
}

/* How durable a write is by these flags: 0 none, 1 O_DSYNC, 2 O_SYNC (which
 * includes the O_DSYNC bit). */
static uint8_t durability(int flags)
{
	return (flags & O_SYNC) == O_SYNC ? 2 : (flags & O_DSYNC) ? 1 : 0;
}

static struct fs_file *file_new(int fd, int flags, bool direct, fuse_req_t req,
			       const struct creds *opener, fuse_ino_t node_id)
{
	struct fs_file *f = calloc(1, sizeof(*f));
	if (!f)
		return NULL;
	f->node_id = node_id;
	f->data.fd = fd;
	f->data.direct = direct;
	f->open_durability = durability(flags);
	f->data.sync_writes = f->open_durability > 0;
	f->data.opener_pid = fuse_req_ctx(req)->pid;
	f->data.opener = *opener;
	f->data.buffered_fd = -1;
	return f;
}

/* The kernel sends RELEASE only after the file's last request was answered. */
static void file_close(struct fs *fs, struct fs_handle *h)
{
	struct fs_file *f = (struct fs_file *)h;
	fs->datapath->file_released(fs->datapath, &f->data);
	close(f->data.fd);
	if (f->data.buffered_fd >= 0)
		close(f->data.buffered_fd);
	inode_table_fd_drop(fs->inodes, f->node_id);
	free(f);
}

static void file_free(struct fs *fs, struct fs_file *f)
{
	fs_handle_untrack(fs, &f->handle);
	file_close(fs, &f->handle);
}

/* 0, or -errno: the datapath refused it and f is freed (fd closed, hold dropped). */
static int file_publish(struct fs *fs, struct fs_file *f)
{
	int r = fs->datapath->file_opened(fs->datapath, &f->data);
	if (r) {
		close(f->data.fd);
		inode_table_fd_drop(fs->inodes, f->node_id);
		free(f);
		return r;
	}
	f->handle.close = file_close;
	fs_handle_track(fs, &f->handle);
	return 0;
}

/*
 * An O_DIRECT caller gets FUSE direct I/O and an O_DIRECT backing file. Some
 * backing filesystems refuse O_DIRECT: then the backing file is buffered but
 * the caller still bypasses the page cache of the mount.
 */
static int open_backing(const char *path, int flags)
{
	int fd = open(path, flags | O_CLOEXEC);
	if (fd < 0 && errno == EINVAL && (flags & O_DIRECT))
		fd = open(path, (flags & ~O_DIRECT) | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

struct reopen_args {
	char path[FS_PROC_PATH_BYTES];
	int flags;
	int fd; /* out */
};

static int reopen_op(void *arg)
{
	struct reopen_args *a = arg;
	a->fd = open_backing(a->path, a->flags);
	return a->fd < 0 ? a->fd : 0;
}

/*
 * Opened as the caller, so that the backing file's own credentials are the
 * opener's: network filesystems (NFS) act with them, root squashing included.
 */
static int reopen_backing(struct fs *fs, const struct creds *opener, int node_fd, int flags)
{
	struct reopen_args a = {.flags = flags, .fd = -1};
	fs_proc_path(node_fd, a.path);
	int r = fs_run_as(opener, reopen_op, &a);
	if (fs_reclaim_fds(fs, r))
		r = fs_run_as(opener, reopen_op, &a);
	return r < 0 ? r : a.fd;
}

/*
 * The kernel drops its cached pages of a file at every open unless told to
 * keep them: close-to-open consistency, as NFS gives. They are kept when
 * the backing file is as it was at the previous open (mtime, ctime, size):
 * no change through the mount or beside it since the kernel last validated
 * them, so a file read again and again is read from the page cache, not
 * through a FUSE round trip per read. With the writeback cache the kernel's
 * pages are the truth and it manages them itself.
 */
static bool keep_page_cache(struct fs *fs, fuse_ino_t ino, int fd, bool direct)
{
	struct stat st;
	if (direct || !fs->opts.keep_page_cache || fs->opts.writeback_cache || fstat(fd, &st) != 0 ||
	    !S_ISREG(st.st_mode))
		return false;
	return inode_table_cache_valid(fs->inodes, ino, &st);
}

/*
 * Whether closing a duplicate of fd can fail (fs_op_flush): network and
 * FUSE filesystems (NFS, CephFS, GlusterFS) report write-back errors at
 * close; ext4, xfs and tmpfs have nothing to report there. Locks stay in
 * the kernel (the daemon never asks for lock requests), so where close
 * cannot fail, and for a read-only descriptor, which has written nothing,
 * the kernel is told not to flush: a close costs no round trip.
 */
static bool flush_needed(const struct fuse_file_info *fi, int fd)
{
	return (fi->flags & O_ACCMODE) != O_RDONLY && !fs_fd_on_local_fs(fd);
}

/* Takes over fd and the hold on ino's descriptor. */
static void reply_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi, int fd, int flags,
		       const struct creds *opener)
{
	struct fs *fs = fs_of(req);
	bool direct = flags & O_DIRECT;
	struct fs_file *f = file_new(fd, flags, direct, req, opener, ino);
	if (!f) {
		close(fd);
		inode_table_fd_drop(fs->inodes, ino);
		fuse_reply_err(req, ENOMEM);
		return;
	}
	int r = file_publish(fs, f);
	if (r) {
		fuse_reply_err(req, -r);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->direct_io = direct;
	fi->keep_cache = keep_page_cache(fs, ino, fd, direct);
	fi->noflush = !flush_needed(fi, fd);
	if (fuse_reply_open(req, fi) < 0)
		file_free(fs, f);
}

/*
 * With the writeback cache the kernel reads pages of write-only files to
 * fill partial writes, and applies O_APPEND itself from its cached size.
 */
static int backing_flags(const struct fs *fs, int flags)
{
	flags &= ~OPEN_FLAGS_DROPPED;
	if (fs->opts.writeback_cache) {
		if ((flags & O_ACCMODE) == O_WRONLY)
			flags = (flags & ~O_ACCMODE) | O_RDWR;
		flags &= ~O_APPEND;
	}
	return flags;
}

void fs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	int node_fd = inode_table_fd_hold(fs->inodes, ino);
	if (node_fd < 0) {
		fuse_reply_err(req, -node_fd);
		return;
	}
	int flags = backing_flags(fs, fi->flags);
	struct creds opener;
	fs_caller_creds(req, true, &opener);
	/* O_TRUNC by a caller without CAP_FSETID: the backing filesystem may drop the bits itself. */
	struct stat before;
	bool had_privs = fs_request_drops_privs() &&
			 fstatat(node_fd, "", &before, AT_EMPTY_PATH) == 0 &&
			 fs_mode_has_privs(before.st_mode);
	int fd = reopen_backing(fs, &opener, node_fd, flags);
	if (fd < 0) {
		inode_table_fd_drop(fs->inodes, ino);
		fuse_reply_err(req, -fd);
		return;
	}
	if (had_privs) {
		drop_privs(fs, ino, fd);
		fs_invalidate_attr(fs, ino); /* whoever dropped them, the kernel's mode is stale */
	}
	reply_open(req, ino, fi, fd, flags, &opener);
}

struct create_args {
	int parent_fd;
	const char *name;
	int flags;
	mode_t mode;
	int fd; /* out */
};

static int create_op(void *arg)
{
	struct create_args *a = arg;
	a->fd = openat(a->parent_fd, a->name, a->flags, a->mode);
	if (a->fd < 0 && errno == EINVAL && (a->flags & O_DIRECT))
		a->fd = openat(a->parent_fd, a->name, a->flags & ~O_DIRECT, a->mode);
	return a->fd < 0 ? -errno : 0;
}

/*
 * Also O_TMPFILE (fs_request_is_tmpfile): an unnamed file in parent, made
 * as the caller like any, that a later link through the mount names (not
 * when O_EXCL made it unlinkable, as on a local filesystem).
 */
void fs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
		  struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	bool tmpfile = fs_request_is_tmpfile();
	int r = tmpfile ? 0 : fs_check_name(name);
	int pfd = r ? r : inode_table_fd_get(fs->inodes, parent);
	if (pfd < 0) {
		fuse_reply_err(req, -pfd);
		return;
	}
	if (tmpfile)
		name = "."; /* the kernel's placeholder is not a name */
	int flags = backing_flags(fs, fi->flags) | (fi->flags & O_EXCL) | O_CLOEXEC |
		    (tmpfile ? O_TMPFILE : O_CREAT | O_NOFOLLOW);
	/* With groups: the opener's data needs them, and so does keeping S_ISGID. */
	struct creds opener;
	fs_caller_creds(req, true, &opener);
	struct create_args a = {pfd, name, flags,
				creds_umask_for_creation(mode, fuse_req_ctx(req)->umask), -1};
	r = fs_run_as(&opener, create_op, &a);
	if (fs_reclaim_fds(fs, r)) /* nothing was created: retrying is safe */
		r = fs_run_as(&opener, create_op, &a);
	inode_table_fd_put(fs->inodes, parent);
	int fd = a.fd;
	struct fuse_entry_param e;
	if (r == 0)
		r = tmpfile ? fs_entry_of_open_file(fs, fd, &e) : fs_lookup_entry(fs, parent, name, &e);
	if (r) {
		if (fd >= 0)
			close(fd);
		fuse_reply_err(req, -r);
		return;
	}
	/* Held like an opened file's, so the file stays reachable if it is unlinked while open. */
	int node_fd = inode_table_fd_hold(fs->inodes, e.ino);
	struct fs_file *f =
		node_fd < 0 ? NULL : file_new(fd, flags, flags & O_DIRECT, req, &opener, e.ino);
	if (!f) {
		close(fd);
		if (node_fd >= 0)
			inode_table_fd_drop(fs->inodes, e.ino);
		inode_table_forget(fs->inodes, e.ino, 1);
		fuse_reply_err(req, node_fd < 0 ? -node_fd : ENOMEM);
		return;
	}
	r = file_publish(fs, f);
	if (r) {
		inode_table_forget(fs->inodes, e.ino, 1);
		fuse_reply_err(req, -r);
		return;
	}
	fi->fh = (uintptr_t)f;
	fi->direct_io = (flags & O_DIRECT) != 0;
	fi->keep_cache = keep_page_cache(fs, e.ino, fd, fi->direct_io);
	fi->noflush = !flush_needed(fi, fd);
	if (fuse_reply_create(req, &e, fi) < 0) {
		file_free(fs, f); /* drops its hold before the node can go */
		inode_table_forget(fs->inodes, e.ino, 1);
	} else {
		fs_entry_given(fs, &e, clock_now_ns());
	}
}

void fs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	file_free(fs_of(req), fs_file_of(fi));
	fuse_reply_err(req, 0);
}

/*
 * close(2) of the caller: closing a duplicate makes network backing
 * filesystems (NFS) flush and report write-back errors here, as they would
 * to a local caller. Asked for only where that can happen (flush_needed).
 */
void fs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	(void)ino;
	struct fs *fs = fs_of(req);
	int fd = fs_file_of(fi)->data.fd;
	int dup_fd = dup(fd);
	int dup_errno = dup_fd < 0 ? errno : 0;
	if (dup_fd < 0 && fs_reclaim_fds(fs, -dup_errno)) {
		dup_fd = dup(fd);
		dup_errno = dup_fd < 0 ? errno : 0;
	}
	/* Still no descriptor: the caller's close has nothing to do with our limit, so it succeeds. */
	int r = dup_fd < 0 ? (dup_errno == EMFILE || dup_errno == ENFILE ? 0 : dup_errno)
			   : (close(dup_fd) < 0 ? errno : 0);
	fuse_reply_err(req, r);
}

static void submit(fuse_req_t req, struct datapath_req *r)
{
	const struct fuse_ctx *ctx = fuse_req_ctx(req);
	r->req = req;
	r->pid = ctx->pid;
	r->uid = ctx->uid;
	struct datapath *dp = fs_of(req)->datapath;
	dp->submit(dp, r);
}

void fs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off, struct fuse_file_info *fi)
{
	(void)ino;
	struct datapath_req r = {
		.op = DATAPATH_READ,
		.file = &fs_file_of(fi)->data,
		.offset_bytes = (uint64_t)off,
		.size_bytes = size,
	};
	submit(req, &r);
}

/*
 * The kernel writes back its page cache (the writeback cache, or a shared
 * mapping) through any writable open file of the inode, an O_DIRECT one
 * included, and the last page of a file ends where the file does: such a
 * write to an O_DIRECT backing descriptor fails (EINVAL), and the caller
 * whose open or fsync waited for the writeback sees EIO. They go to a twin
 * of the file without O_DIRECT, opened as the opener at the first one and
 * closed with the file. False where it cannot be had (the direct
 * descriptor is used, as before).
 */
static bool buffered_twin(struct fs *fs, struct fs_file *f)
{
	if (atomic_load(&f->data.buffered_fd) >= 0)
		return true;
	int flags = fcntl(f->data.fd, F_GETFL);
	if (flags < 0)
		return false;
	int fd = reopen_backing(fs, &f->data.opener, f->data.fd, flags & ~O_DIRECT);
	if (fd < 0)
		return false;
	int none = -1;
	if (!atomic_compare_exchange_strong(&f->data.buffered_fd, &none, fd))
		close(fd); /* another worker's came first */
	return true;
}

void fs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
		 struct fuse_file_info *fi)
{
	(void)ino;
	struct fs_file *f = fs_file_of(fi);
	if (fs_request_drops_privs())
		drop_privs_of_file(fs_of(req), f);
	const void *owned = fs_channel_take_payload(size);
	int piped = owned ? -1 : fs_channel_take_piped(size);
	/* The write's flags are its file's and its own (RWF_DSYNC, RWF_SYNC);
	 * only what the backing descriptor does not already do is asked. */
	uint8_t asked = durability(fi->flags);
	struct datapath_req r = {
		.op = DATAPATH_WRITE,
		.file = &f->data,
		.offset_bytes = (uint64_t)off,
		.size_bytes = size,
		.write_data = owned ? owned : piped >= 0 ? NULL : buf,
		.write_owned = owned != NULL,
		.write_piped = piped >= 0,
		.write_pipe_fd = piped,
		.write_rwf = asked <= f->open_durability ? 0 : asked == 2 ? RWF_SYNC : RWF_DSYNC,
		.write_keeps_privs = !fs_request_drops_privs(),
		.write_buffered = f->data.direct && fuse_req_ctx(req)->pid == 0 &&
				  buffered_twin(fs_of(req), f),
	};
	submit(req, &r);
}

void fs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
	(void)ino;
	struct datapath_req r = {
		.op = datasync ? DATAPATH_FDATASYNC : DATAPATH_FSYNC,
		.file = &fs_file_of(fi)->data,
	};
	submit(req, &r);
}

void fs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
		     struct fuse_file_info *fi)
{
	(void)ino;
	struct datapath_req r = {
		.op = DATAPATH_FALLOCATE,
		.file = &fs_file_of(fi)->data,
		.offset_bytes = (uint64_t)offset,
		.size_bytes = (uint64_t)length,
		.fallocate_mode = mode,
	};
	submit(req, &r);
}

void fs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence, struct fuse_file_info *fi)
{
	(void)ino;
	off_t r = lseek(fs_file_of(fi)->data.fd, off, whence);
	if (r < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_lseek(req, r);
}

/*
 * The inode flags (lsattr and chattr, xfs_io's fsxattr): the kernel asks
 * for and sets them with FUSE_IOCTL on a file or directory it opened for
 * the purpose, after checking the caller itself (the owner, and
 * CAP_LINUX_IMMUTABLE for the immutable and append-only flags), so they
 * are passed to the backing file as they come. No other ioctl is: they
 * would run as root on the backing filesystem.
 */
void fs_op_ioctl(fuse_req_t req, fuse_ino_t ino, unsigned int cmd, void *arg,
		 struct fuse_file_info *fi, unsigned flags, const void *in_buf, size_t in_bufsz,
		 size_t out_bufsz)
{
	(void)arg;
	if (flags & FUSE_IOCTL_COMPAT) {
		fuse_reply_err(req, ENOTTY);
		return;
	}
	int fd = flags & FUSE_IOCTL_DIR ? fs_dir_fd(fi) : fs_file_of(fi)->data.fd;
	union {
		int flags;
		struct fsxattr fsx;
	} v = {0};
	size_t size;
	bool out;
	switch (cmd) {
	case FS_IOC_GETFLAGS:
	case FS_IOC_SETFLAGS:
		size = sizeof(v.flags);
		out = cmd == FS_IOC_GETFLAGS;
		break;
	case FS_IOC_FSGETXATTR:
	case FS_IOC_FSSETXATTR:
		size = sizeof(v.fsx);
		out = cmd == FS_IOC_FSGETXATTR;
		break;
	default:
		fuse_reply_err(req, ENOTTY);
		return;
	}
	if (out ? out_bufsz < size : in_bufsz < size) {
		fuse_reply_err(req, EINVAL);
		return;
	}
	if (!out)
		memcpy(&v, in_buf, size);
	if (ioctl(fd, cmd, &v) < 0) {
		fuse_reply_err(req, errno);
		return;
	}
	if (!out)
		fs_invalidate_attr(fs_of(req), ino); /* setting them moved its ctime */
	fuse_reply_ioctl(req, 0, out ? &v : NULL, out ? size : 0);
}

void fs_op_copy_file_range(fuse_req_t req, fuse_ino_t ino_in, off_t off_in,
			   struct fuse_file_info *fi_in, fuse_ino_t ino_out, off_t off_out,
			   struct fuse_file_info *fi_out, size_t len, int flags)
{
	(void)ino_in;
	(void)ino_out;
	struct fs_file *out = fs_file_of(fi_out);
	/* The kernel flags no copy as dropping privileges: anyone but root does. */
	if (fuse_req_ctx(req)->uid != 0)
		drop_privs_of_file(fs_of(req), out);
	struct datapath_req r = {
		.op = DATAPATH_COPY_RANGE,
		.file = &fs_file_of(fi_in)->data,
		.offset_bytes = (uint64_t)off_in,
		.size_bytes = len,
		.file_out = &out->data,
		.offset_out_bytes = (uint64_t)off_out,
		.copy_flags = (unsigned int)flags,
	};
	submit(req, &r);
}
