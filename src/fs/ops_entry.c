/* Name and attribute operations: lookup, getattr/setattr, create-by-name, remove, rename. */
#include "fs_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

/* The staging mount's one walk: the root's second node (fs.h), answered once. */
static bool root_alias_lookup(struct fs *fs, fuse_req_t req, fuse_ino_t parent, const char *name)
{
	if (parent != FUSE_ROOT_ID || !atomic_load(&fs->root_alias_armed) ||
	    strcmp(name, FS_ROOT_ALIAS_NAME) != 0 || !atomic_exchange(&fs->root_alias_armed, false))
		return false;
	struct fuse_entry_param e;
	int r = fs_lookup_entry(fs, FUSE_ROOT_ID, ".", &e);
	if (r) {
		fuse_reply_err(req, -r);
		return true;
	}
	/* The root's lookup count is not kept (it is never forgotten), nor is this one's. */
	e.ino = FS_ROOT_ALIAS_ID;
	e.generation = 0;
	fuse_reply_entry(req, &e);
	return true;
}

void fs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct fs *fs = fs_of(req);
	if (root_alias_lookup(fs, req, parent, name))
		return;
	struct fuse_entry_param e;
	int r = fs_lookup_entry(fs, parent, name, &e);
	double negative_s = r == -ENOENT ? fs_negative_timeout_s(fs, inode_table_dev(fs->inodes, parent)) : 0;
	if (negative_s > 0) {
		/* A negative entry: the kernel remembers the name is missing. */
		e = (struct fuse_entry_param){.entry_timeout = negative_s};
		fuse_reply_entry(req, &e);
	} else if (r) {
		fuse_reply_err(req, -r);
	} else {
		fs_reply_entry(fs, req, &e);
	}
}

void fs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
	inode_table_forget(fs_of(req)->inodes, ino, nlookup);
	fuse_reply_none(req);
}

void fs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
	struct fs *fs = fs_of(req);
	for (size_t i = 0; i < count; i++)
		inode_table_forget(fs->inodes, forgets[i].ino, forgets[i].nlookup);
	fuse_reply_none(req);
}

static int node_stat(struct fs *fs, fuse_ino_t ino, struct fuse_file_info *fi, struct stat *st)
{
	if (fi)
		return fstat(fs_file_of(fi)->data.fd, st) < 0 ? -errno : 0;
	int fd = inode_table_fd_get(fs->inodes, ino);
	if (fd < 0)
		return fd;
	int r = fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
	inode_table_fd_put(fs->inodes, ino);
	return r;
}

void fs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	struct stat st;
	int r = node_stat(fs, ino, fi, &st);
	if (r)
		fuse_reply_err(req, -r);
	else
		fuse_reply_attr(req, &st, fs_attr_timeout_s(fs, st.st_dev));
}

/* FUSE_STATX's argument and answer (linux/fuse.h from 6.6 on; this system's predates it). */
struct fs_statx_in {
	uint32_t getattr_flags;
	uint32_t reserved;
	uint64_t fh;
	uint32_t sx_flags;
	uint32_t sx_mask;
};

struct fs_sx_time {
	int64_t tv_sec;
	uint32_t tv_nsec;
	int32_t reserved;
};

struct fs_statx_out {
	uint64_t attr_valid;
	uint32_t attr_valid_nsec;
	uint32_t flags;
	uint64_t spare[2];
	struct {
		uint32_t mask, blksize;
		uint64_t attributes;
		uint32_t nlink, uid, gid;
		uint16_t mode, spare0;
		uint64_t ino, size, blocks, attributes_mask;
		struct fs_sx_time atime, btime, ctime, mtime;
		uint32_t rdev_major, rdev_minor, dev_major, dev_minor;
		uint64_t spare2[14];
	} stat;
};

/* The backing file's mount's, not the FUSE mount's: the kernel sets its own. */
#define STATX_ATTRS_OF_THE_MOUNT (STATX_ATTR_MOUNT_ROOT | STATX_ATTR_AUTOMOUNT | STATX_ATTR_DAX)

static struct fs_sx_time sx_time(struct statx_timestamp t)
{
	return (struct fs_sx_time){.tv_sec = t.tv_sec, .tv_nsec = t.tv_nsec};
}

/* The node's statx, as GETATTR's fstatat: the open file's when the kernel names it. */
static int node_statx(struct fs *fs, uint64_t node_id, const struct fs_statx_in *in,
		      struct statx *stx)
{
	/* The basic fields always: the kernel takes nothing less (and then never asks again). */
	unsigned int mask = in->sx_mask | STATX_BASIC_STATS;
	int flags = AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW | ((int)in->sx_flags & AT_STATX_SYNC_TYPE);
	if (in->getattr_flags & FUSE_GETATTR_FH) {
		struct fuse_file_info fi = {.fh = in->fh};
		return statx(fs_file_of(&fi)->data.fd, "", flags, mask, stx) < 0 ? -errno : 0;
	}
	int fd = inode_table_fd_get(fs->inodes, node_id);
	if (fd < 0)
		return fd;
	int r = statx(fd, "", flags, mask, stx) < 0 ? -errno : 0;
	inode_table_fd_put(fs->inodes, node_id);
	return r;
}

void fs_serve_statx(struct fs *fs, int fd, const void *request, size_t bytes)
{
	const struct fuse_in_header *h = request;
	struct fs_statx_out out;
	memset(&out, 0, sizeof(out));
	struct statx stx;
	int r = bytes >= sizeof(*h) + sizeof(struct fs_statx_in)
			? node_statx(fs, h->nodeid, (const struct fs_statx_in *)(h + 1), &stx)
			: -EINVAL;
	if (r == 0) {
		double valid_s = fs_attr_timeout_s(fs, makedev(stx.stx_dev_major, stx.stx_dev_minor));
		out.attr_valid = (uint64_t)valid_s;
		out.attr_valid_nsec = (uint32_t)((valid_s - (double)out.attr_valid) * 1e9);
		/* What this answer fills, no more: a kernel that asks for more
		 * fields reads them from the spare words, which stay zero. */
		out.stat.mask = (stx.stx_mask & STATX_BTIME) | STATX_BASIC_STATS;
		out.stat.blksize = stx.stx_blksize;
		out.stat.attributes = stx.stx_attributes & ~STATX_ATTRS_OF_THE_MOUNT;
		out.stat.nlink = stx.stx_nlink;
		out.stat.uid = stx.stx_uid;
		out.stat.gid = stx.stx_gid;
		out.stat.mode = stx.stx_mode;
		out.stat.ino = stx.stx_ino;
		out.stat.size = stx.stx_size;
		out.stat.blocks = stx.stx_blocks;
		out.stat.attributes_mask = stx.stx_attributes_mask & ~STATX_ATTRS_OF_THE_MOUNT;
		out.stat.atime = sx_time(stx.stx_atime);
		out.stat.btime = sx_time(stx.stx_btime);
		out.stat.ctime = sx_time(stx.stx_ctime);
		out.stat.mtime = sx_time(stx.stx_mtime);
		out.stat.rdev_major = stx.stx_rdev_major;
		out.stat.rdev_minor = stx.stx_rdev_minor;
		out.stat.dev_major = stx.stx_dev_major;
		out.stat.dev_minor = stx.stx_dev_minor;
	}
	struct fuse_out_header oh = {.unique = h->unique, .error = r,
				     .len = (uint32_t)(sizeof(oh) + (r ? 0 : sizeof(out)))};
	struct iovec iov[2] = {{.iov_base = &oh, .iov_len = sizeof(oh)},
			       {.iov_base = &out, .iov_len = sizeof(out)}};
	/* ENOENT: the caller was interrupted and is gone; nobody to tell. */
	(void)writev(fd, iov, r ? 1 : 2);
}

static int set_times(int fd, bool is_symlink, struct fuse_file_info *fi,
		     const struct stat *attr, int to_set)
{
	struct timespec ts[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
	if (to_set & FUSE_SET_ATTR_ATIME_NOW)
		ts[0].tv_nsec = UTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_ATIME)
		ts[0] = attr->st_atim;
	if (to_set & FUSE_SET_ATTR_MTIME_NOW)
		ts[1].tv_nsec = UTIME_NOW;
	else if (to_set & FUSE_SET_ATTR_MTIME)
		ts[1] = attr->st_mtim;
	if (fi)
		return futimens(fs_file_of(fi)->data.fd, ts);
	if (is_symlink)
		return utimensat(fd, "", ts, AT_EMPTY_PATH);
	char path[FS_PROC_PATH_BYTES];
	fs_proc_path(fd, path);
	return utimensat(AT_FDCWD, path, ts, 0);
}

/*
 * The kernel (default_permissions, with ACLs) has already checked that the
 * caller may make each change, and none of them allocates space, so it is
 * applied as root.
 */
void fs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
		   struct fuse_file_info *fi)
{
	struct fs *fs = fs_of(req);
	int fd = inode_table_fd_get(fs->inodes, ino);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	bool is_symlink = S_ISLNK(inode_table_type(fs->inodes, ino));
	char path[FS_PROC_PATH_BYTES];
	fs_proc_path(fd, path);
	int r = 0;
	if (to_set & FUSE_SET_ATTR_MODE) {
		if (is_symlink)
			r = (errno = EOPNOTSUPP, -1);
		else
			r = fi ? fchmod(fs_file_of(fi)->data.fd, attr->st_mode)
			       : chmod(path, attr->st_mode);
		if (r == 0 && fs_mode_has_privs(attr->st_mode))
			atomic_fetch_add(&fs->privs_epoch, 1); /* open files look again */
	}
	if (r == 0 && (to_set & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))) {
		uid_t uid = (to_set & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
		gid_t gid = (to_set & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
		r = fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW);
	}
	if (r == 0 && (to_set & FUSE_SET_ATTR_SIZE))
		r = fi ? ftruncate(fs_file_of(fi)->data.fd, attr->st_size)
		       : truncate(path, attr->st_size);
	/* A truncation (or chown) by a caller without CAP_FSETID, unless it sets the mode itself. */
	struct stat st;
	if (r == 0 && fs_request_drops_privs() && !(to_set & FUSE_SET_ATTR_MODE) && !is_symlink &&
	    fstat(fd, &st) == 0 && fs_mode_has_privs(st.st_mode))
		r = chmod(path, fs_mode_without_privs(st.st_mode));
	if (r == 0 && (to_set & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME |
				 FUSE_SET_ATTR_ATIME_NOW | FUSE_SET_ATTR_MTIME_NOW)))
		r = set_times(fd, is_symlink, fi, attr, to_set);
	int err = r < 0 ? errno : 0;
	inode_table_fd_put(fs->inodes, ino);
	if (err)
		fuse_reply_err(req, err);
	else
		fs_op_getattr(req, ino, fi);
}

void fs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	int fd = inode_table_fd_get(inodes, ino);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	char buf[PATH_MAX + 1];
	ssize_t n = readlinkat(fd, "", buf, sizeof(buf));
	if (n < 0)
		n = -errno;
	inode_table_fd_put(inodes, ino);
	if (n < 0) {
		fuse_reply_err(req, (int)-n);
		return;
	}
	if ((size_t)n >= sizeof(buf)) {
		fuse_reply_err(req, ENAMETOOLONG);
		return;
	}
	buf[n] = '\0';
	fuse_reply_readlink(req, buf);
}

enum make_kind { MAKE_NODE, MAKE_DIR, MAKE_SYMLINK };

struct make_args {
	enum make_kind kind;
	int parent_fd;
	const char *name;
	mode_t mode;
	dev_t rdev;
	const char *link;
};

static bool is_device(mode_t mode)
{
	return S_ISCHR(mode) || S_ISBLK(mode);
}

static int make_op(void *arg)
{
	const struct make_args *a = arg;
	int r = 0;
	switch (a->kind) {
	case MAKE_NODE:
		/* The kernel let the caller through only with CAP_MKNOD. */
		if (is_device(a->mode) && (r = creds_keep_mknod()) < 0)
			return r;
		r = mknodat(a->parent_fd, a->name, a->mode, a->rdev);
		break;
	case MAKE_DIR:
		r = mkdirat(a->parent_fd, a->name, a->mode);
		break;
	case MAKE_SYMLINK:
		r = symlinkat(a->link, a->parent_fd, a->name);
		break;
	}
	return r < 0 ? -errno : 0;
}

/*
 * Creates name below parent as the caller, then looks it up and replies.
 * A file asking for S_ISGID keeps it only if the backing filesystem sees
 * the caller in the file's group: its groups are fetched first.
 */
static void make_entry(fuse_req_t req, fuse_ino_t parent, const char *name,
		       enum make_kind kind, mode_t mode, dev_t rdev, const char *link)
{
	struct fs *fs = fs_of(req);
	int r = fs_check_name(name);
	int pfd = r ? r : inode_table_fd_get(fs->inodes, parent);
	if (pfd < 0) {
		fuse_reply_err(req, -pfd);
		return;
	}
	if (kind != MAKE_SYMLINK)
		mode = creds_umask_for_creation(mode, fuse_req_ctx(req)->umask);
	struct make_args a = {kind, pfd, name, mode, rdev, link};
	if (kind == MAKE_NODE && (mode & S_ISGID)) {
		struct creds c;
		fs_caller_creds(req, true, &c);
		r = fs_run_as(&c, make_op, &a);
	} else {
		r = fs_run_as_caller(req, make_op, &a);
	}
	inode_table_fd_put(fs->inodes, parent);
	struct fuse_entry_param e;
	if (r == 0)
		r = fs_lookup_entry(fs, parent, name, &e);
	if (r)
		fuse_reply_err(req, -r);
	else
		fs_reply_entry(fs, req, &e);
}

void fs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
	if (is_device(mode) && fs_of(req)->opts.refuse_device_nodes) {
		fuse_reply_err(req, EPERM);
		return;
	}
	make_entry(req, parent, name, MAKE_NODE, mode, rdev, NULL);
}

void fs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
	make_entry(req, parent, name, MAKE_DIR, mode | S_IFDIR, 0, NULL);
}

void fs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
	make_entry(req, parent, name, MAKE_SYMLINK, 0, 0, link);
}

struct link_args {
	char path[FS_PROC_PATH_BYTES];
	int parent_fd;
	const char *name;
};

/*
 * Through /proc/self/fd: linkat(fd, "", AT_EMPTY_PATH) needs
 * CAP_DAC_READ_SEARCH, which the caller's credentials do not carry.
 */
static int link_op(void *arg)
{
	const struct link_args *a = arg;
	return linkat(AT_FDCWD, a->path, a->parent_fd, a->name, AT_SYMLINK_FOLLOW) < 0 ? -errno : 0;
}

/* As the caller: a new entry may take a directory block, which the root reserve must not give. */
void fs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
	struct fs *fs = fs_of(req);
	int r = fs_check_name(newname);
	int fd = r ? r : inode_table_fd_get(fs->inodes, ino);
	int pfd = fd < 0 ? fd : inode_table_fd_get(fs->inodes, newparent);
	r = pfd < 0 ? pfd : 0;
	if (r == 0) {
		struct link_args a = {.parent_fd = pfd, .name = newname};
		fs_proc_path(fd, a.path);
		r = fs_run_as_caller(req, link_op, &a);
	}
	if (pfd >= 0)
		inode_table_fd_put(fs->inodes, newparent);
	if (fd >= 0)
		inode_table_fd_put(fs->inodes, ino);
	struct fuse_entry_param e;
	if (r == 0)
		r = fs_lookup_entry(fs, newparent, newname, &e);
	if (r)
		fuse_reply_err(req, -r);
	else
		fs_reply_entry(fs, req, &e);
}

static void remove_entry(fuse_req_t req, fuse_ino_t parent, const char *name, int flags)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	int r = fs_check_name(name);
	int pfd = r ? r : inode_table_fd_get(inodes, parent);
	if (pfd < 0) {
		fuse_reply_err(req, -pfd);
		return;
	}
	r = unlinkat(pfd, name, flags) < 0 ? -errno : 0;
	inode_table_fd_put(inodes, parent);
	fuse_reply_err(req, -r);
}

void fs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, 0);
}

void fs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	remove_entry(req, parent, name, AT_REMOVEDIR);
}

struct rename_args {
	int parent_fd;
	const char *name;
	int new_parent_fd;
	const char *new_name;
	unsigned int flags;
};

static int rename_op(void *arg)
{
	const struct rename_args *a = arg;
	return renameat2(a->parent_fd, a->name, a->new_parent_fd, a->new_name, a->flags) < 0
		       ? -errno : 0;
}

/* As the caller, like link. */
void fs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
		  const char *newname, unsigned int flags)
{
	struct fs *fs = fs_of(req);
	int r = fs_check_name(name);
	if (r == 0)
		r = fs_check_name(newname);
	int pfd = r ? r : inode_table_fd_get(fs->inodes, parent);
	int npfd = pfd < 0 ? pfd : inode_table_fd_get(fs->inodes, newparent);
	r = npfd < 0 ? npfd : 0;
	if (r == 0) {
		struct rename_args a = {pfd, name, npfd, newname, flags};
		r = fs_run_as_caller(req, rename_op, &a);
	}
	if (npfd >= 0)
		inode_table_fd_put(fs->inodes, newparent);
	if (pfd >= 0)
		inode_table_fd_put(fs->inodes, parent);
	fuse_reply_err(req, -r);
}

void fs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	int fd = inode_table_fd_get(inodes, ino);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	struct statvfs sv;
	int err = fstatvfs(fd, &sv) < 0 ? errno : 0;
	inode_table_fd_put(inodes, ino);
	if (err)
		fuse_reply_err(req, err);
	else
		fuse_reply_statfs(req, &sv);
}

struct access_args {
	char path[FS_PROC_PATH_BYTES];
	int mask;
};

static int access_op(void *arg)
{
	const struct access_args *a = arg;
	return faccessat(AT_FDCWD, a->path, a->mask, AT_EACCESS) < 0 ? -errno : 0;
}

/* Only reached without default_permissions; answers as the caller would be answered. */
void fs_op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	int fd = inode_table_fd_get(inodes, ino);
	if (fd < 0) {
		fuse_reply_err(req, -fd);
		return;
	}
	struct access_args a = {.mask = mask};
	fs_proc_path(fd, a.path);
	int r = fs_run_as_caller(req, access_op, &a);
	inode_table_fd_put(inodes, ino);
	fuse_reply_err(req, -r);
}
