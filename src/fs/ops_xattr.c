/*
 * Extended attributes, through /proc/self/fd/N of the node's O_PATH
 * descriptor (the f*xattr calls refuse O_PATH descriptors). Following that
 * link lands on the node itself, a symlink too (its descriptor was opened
 * O_NOFOLLOW), and goes no further: a symlink's attributes are its own, as
 * on the backing filesystem (which allows no user.* ones on symlinks).
 *
 * The kernel checks who may read or write which namespace before a request
 * gets here; changes then run as the caller, so the backing filesystem
 * applies its own rules to them (setgid cleared by an ACL change from
 * outside the file's group). Two answers are shaped here: listing, which
 * the backing filesystem filters by capability (fs_op_listxattr), and
 * missing attributes that `ls -l` asks every file for (missing_xattr_errno).
 */
#include "fs_internal.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

/* From <linux/xattr.h> and <linux/posix_acl_xattr.h>, which clash with <sys/xattr.h>. */
#define XATTR_TRUSTED_PREFIX "trusted."
#define XATTR_TRUSTED_PREFIX_LEN (sizeof(XATTR_TRUSTED_PREFIX) - 1)
#define XATTR_NAME_POSIX_ACL_ACCESS "system.posix_acl_access"
#define XATTR_NAME_POSIX_ACL_DEFAULT "system.posix_acl_default"
#define XATTR_NAME_SELINUX "security.selinux"

/* Fills path for ino and gets its descriptor (the caller puts it), or returns a positive errno. */
static int xattr_path(struct inode_table *inodes, fuse_ino_t ino, char path[FS_PROC_PATH_BYTES])
{
	int fd = inode_table_fd_get(inodes, ino);
	if (fd < 0)
		return -fd;
	fs_proc_path(fd, path);
	return 0;
}

/*
 * Without SELinux on the host the kernel passes security.selinux queries
 * on, and `ls -l` asks one for every file: "not supported" for a file
 * without a label lets ls stop asking for the rest of the volume (coreutils
 * remembers it per device), where "no such attribute" would cost a round
 * trip per file. Labels that exist are returned as they are.
 */
static int missing_xattr_errno(const struct fs *fs, const char *name)
{
	return !fs->selinux_active && strcmp(name, XATTR_NAME_SELINUX) == 0 ? EOPNOTSUPP : ENODATA;
}

/* getxattr's size-probe protocol: size 0 asks for the length. */
static void reply_value(fuse_req_t req, size_t size, const char *path, const char *name)
{
	char *buf = size ? malloc(size) : NULL;
	if (size && !buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = getxattr(path, name, buf, size);
	if (n < 0)
		fuse_reply_err(req, errno == ENODATA ? missing_xattr_errno(fs_of(req), name) : errno);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static bool is_posix_acl(const char *name)
{
	return strcmp(name, XATTR_NAME_POSIX_ACL_ACCESS) == 0 ||
	       strcmp(name, XATTR_NAME_POSIX_ACL_DEFAULT) == 0;
}

/* -o noacl: the volume has no ACLs, so ls and the kernel stop asking (see fs_options). */
static bool hidden(const struct fs *fs, const char *name)
{
	return !fs->opts.posix_acl && is_posix_acl(name);
}

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct fs *fs = fs_of(req);
	if (hidden(fs, name)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	char path[FS_PROC_PATH_BYTES];
	int e = xattr_path(fs->inodes, ino, path);
	if (e) {
		fuse_reply_err(req, e);
		return;
	}
	reply_value(req, size, path, name);
	inode_table_fd_put(fs->inodes, ino);
}

/*
 * The names in list (NUL-separated, bytes long) without trusted.* (unless
 * keep_trusted) and without hidden ones; returns the new length.
 */
static size_t drop_names(const struct fs *fs, char *list, size_t bytes, bool keep_trusted)
{
	size_t kept = 0;
	for (size_t at = 0; at < bytes;) {
		size_t len = strnlen(list + at, bytes - at) + 1;
		bool trusted = strncmp(list + at, XATTR_TRUSTED_PREFIX, XATTR_TRUSTED_PREFIX_LEN) == 0;
		if ((keep_trusted || !trusted) && !hidden(fs, list + at)) {
			memmove(list + kept, list + at, len);
			kept += len;
		}
		at += len;
	}
	return kept;
}

/* The whole list of path's names in a fresh buffer, or -errno. */
static ssize_t list_all(const char *path, char **out)
{
	for (;;) {
		ssize_t n = listxattr(path, NULL, 0);
		if (n <= 0) {
			*out = NULL;
			return n < 0 ? -errno : 0;
		}
		char *buf = malloc((size_t)n);
		if (!buf)
			return -ENOMEM;
		ssize_t got = listxattr(path, buf, (size_t)n);
		if (got >= 0) {
			*out = buf;
			return got;
		}
		free(buf);
		if (errno != ERANGE) /* ERANGE: a name was added between the calls */
			return -errno;
	}
}

/*
 * ext4 lists trusted.* names only to CAP_SYS_ADMIN, judged in the lister:
 * here that is the daemon, so they are taken out for a caller without it.
 */
void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	char path[FS_PROC_PATH_BYTES];
	int e = xattr_path(inodes, ino, path);
	if (e) {
		fuse_reply_err(req, e);
		return;
	}
	char *list = NULL;
	ssize_t n = list_all(path, &list);
	inode_table_fd_put(inodes, ino);
	if (n > 0) {
		struct fs *fs = fs_of(req);
		bool keep_trusted = !memmem(list, (size_t)n, XATTR_TRUSTED_PREFIX,
					    XATTR_TRUSTED_PREFIX_LEN) ||
				    fs_caller_has_capability(req, CAP_SYS_ADMIN);
		if (!keep_trusted || !fs->opts.posix_acl)
			n = (ssize_t)drop_names(fs, list, (size_t)n, keep_trusted);
	}
	if (n < 0)
		fuse_reply_err(req, (int)-n);
	else if (size == 0)
		fuse_reply_xattr(req, (size_t)n);
	else if ((size_t)n > size)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, list, (size_t)n);
	free(list);
}

struct setxattr_args {
	char path[FS_PROC_PATH_BYTES];
	const char *name;
	const char *value; /* NULL: remove */
	size_t size;
	int flags;
};

static int setxattr_op(void *arg)
{
	const struct setxattr_args *a = arg;
	int r = a->value ? setxattr(a->path, a->name, a->value, a->size, a->flags)
			 : removexattr(a->path, a->name);
	return r < 0 ? -errno : 0;
}

/* An ACL change may clear setgid depending on the caller's groups: they are fetched first. */
static void change_xattr(fuse_req_t req, fuse_ino_t ino, struct setxattr_args *a)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	if (hidden(fs_of(req), a->name)) {
		fuse_reply_err(req, EOPNOTSUPP);
		return;
	}
	int e = xattr_path(inodes, ino, a->path);
	if (e) {
		fuse_reply_err(req, e);
		return;
	}
	int r;
	if (is_posix_acl(a->name)) {
		struct creds c;
		fs_caller_creds(req, true, &c);
		r = fs_run_as(&c, setxattr_op, a);
	} else {
		r = fs_run_as_caller(req, setxattr_op, a);
	}
	inode_table_fd_put(inodes, ino);
	fuse_reply_err(req, -r);
}

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags)
{
	struct setxattr_args a = {.name = name, .value = value ? value : "", .size = size,
				  .flags = flags};
	change_xattr(req, ino, &a);
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct setxattr_args a = {.name = name, .value = NULL};
	change_xattr(req, ino, &a);
}
