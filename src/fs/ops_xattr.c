/*
 * Extended attributes, through /proc/self/fd/N of the node's O_PATH
 * descriptor (the f*xattr calls refuse O_PATH descriptors). Symlinks cannot
 * be reached that way without following them, so they report ENOTSUP; Linux
 * allows no user.* attributes on symlinks anyway.
 */
#include "fs_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>

/* Fills path for ino and gets its descriptor (the caller puts it), or returns a positive errno. */
static int xattr_path(struct inode_table *inodes, fuse_ino_t ino, char path[FS_PROC_PATH_BYTES])
{
	if (S_ISLNK(inode_table_type(inodes, ino)))
		return ENOTSUP;
	int fd = inode_table_fd_get(inodes, ino);
	if (fd < 0)
		return -fd;
	fs_proc_path(fd, path);
	return 0;
}

/* getxattr and listxattr share the size-probe protocol of the syscalls. */
static void reply_sized(fuse_req_t req, size_t size, ssize_t (*get)(const char *path, const char *name,
								     void *buf, size_t size),
			const char *path, const char *name)
{
	if (size == 0) {
		ssize_t n = get(path, name, NULL, 0);
		if (n < 0)
			fuse_reply_err(req, errno);
		else
			fuse_reply_xattr(req, (size_t)n);
		return;
	}
	char *buf = malloc(size);
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	ssize_t n = get(path, name, buf, size);
	if (n < 0)
		fuse_reply_err(req, errno);
	else
		fuse_reply_buf(req, buf, (size_t)n);
	free(buf);
}

static ssize_t get_one(const char *path, const char *name, void *buf, size_t size)
{
	return getxattr(path, name, buf, size);
}

static ssize_t get_list(const char *path, const char *name, void *buf, size_t size)
{
	(void)name;
	return listxattr(path, buf, size);
}

void fs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	char path[FS_PROC_PATH_BYTES];
	int e = xattr_path(inodes, ino, path);
	if (e) {
		fuse_reply_err(req, e);
		return;
	}
	reply_sized(req, size, get_one, path, name);
	inode_table_fd_put(inodes, ino);
}

void fs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	char path[FS_PROC_PATH_BYTES];
	int e = xattr_path(inodes, ino, path);
	if (e) {
		fuse_reply_err(req, e);
		return;
	}
	reply_sized(req, size, get_list, path, NULL);
	inode_table_fd_put(inodes, ino);
}

void fs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
		    size_t size, int flags)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	char path[FS_PROC_PATH_BYTES];
	int e = xattr_path(inodes, ino, path);
	if (e) {
		fuse_reply_err(req, e);
		return;
	}
	if (setxattr(path, name, value, size, flags) < 0)
		e = errno;
	inode_table_fd_put(inodes, ino);
	fuse_reply_err(req, e);
}

void fs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
	struct inode_table *inodes = fs_of(req)->inodes;
	char path[FS_PROC_PATH_BYTES];
	int e = xattr_path(inodes, ino, path);
	if (e) {
		fuse_reply_err(req, e);
		return;
	}
	if (removexattr(path, name) < 0)
		e = errno;
	inode_table_fd_put(inodes, ino);
	fuse_reply_err(req, e);
}
