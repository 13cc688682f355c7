/*
 * eiofs: a passthrough FUSE filesystem that fails on demand, for tests only.
 *
 *   eiofs SOURCE MOUNTPOINT [FUSE options]
 *
 * Serves SOURCE at MOUNTPOINT. read, write, fsync and fdatasync of a file
 * fail with EIO when its name contains "eio", or while SOURCE/PATH.fault
 * exists next to it (touch it to break a file that is open, remove it to
 * heal it). Reads of a file wait while SOURCE/PATH.stall exists: a store
 * that hangs. Everything else passes through. Every file is opened with FUSE
 * direct I/O, so each read and write reaches eiofs: no page cache here can
 * hide a fault.
 */
#define FUSE_USE_VERSION 312

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fuse.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

static char source_root[PATH_MAX];

/* PATH (from the mount root, starting with '/') below SOURCE. */
static void source_path(const char *path, char *out, size_t out_bytes)
{
	snprintf(out, out_bytes, "%s%s", source_root, path);
}

static bool is_faulty(const char *path)
{
	if (!path)
		return false;
	const char *base = strrchr(path, '/');
	if (strstr(base ? base + 1 : path, "eio"))
		return true;
	char marker[PATH_MAX + 16];
	snprintf(marker, sizeof(marker), "%s%s.fault", source_root, path);
	return access(marker, F_OK) == 0;
}

static void *eio_init(struct fuse_conn_info *conn, struct fuse_config *cfg)
{
	(void)conn;
	/* No caching in this layer: a fault shows up on the very next request. */
	cfg->direct_io = 1;
	cfg->entry_timeout = 0;
	cfg->attr_timeout = 0;
	cfg->negative_timeout = 0;
	cfg->use_ino = 1;
	return NULL;
}

static int eio_getattr(const char *path, struct stat *st, struct fuse_file_info *fi)
{
	if (fi)
		return fstat((int)fi->fh, st) < 0 ? -errno : 0;
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return lstat(p, st) < 0 ? -errno : 0;
}

static int eio_readlink(const char *path, char *buf, size_t size)
{
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	ssize_t n = readlink(p, buf, size - 1);
	if (n < 0)
		return -errno;
	buf[n] = '\0';
	return 0;
}

static int eio_mkdir(const char *path, mode_t mode)
{
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return mkdir(p, mode) < 0 ? -errno : 0;
}

static int eio_unlink(const char *path)
{
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return unlink(p) < 0 ? -errno : 0;
}

static int eio_rmdir(const char *path)
{
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return rmdir(p) < 0 ? -errno : 0;
}

static int eio_rename(const char *from, const char *to, unsigned int flags)
{
	if (flags)
		return -EINVAL;
	char a[PATH_MAX], b[PATH_MAX];
	source_path(from, a, sizeof(a));
	source_path(to, b, sizeof(b));
	return rename(a, b) < 0 ? -errno : 0;
}

static int eio_chmod(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	if (fi)
		return fchmod((int)fi->fh, mode) < 0 ? -errno : 0;
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return chmod(p, mode) < 0 ? -errno : 0;
}

static int eio_chown(const char *path, uid_t uid, gid_t gid, struct fuse_file_info *fi)
{
	if (fi)
		return fchown((int)fi->fh, uid, gid) < 0 ? -errno : 0;
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return lchown(p, uid, gid) < 0 ? -errno : 0;
}

static int eio_truncate(const char *path, off_t size, struct fuse_file_info *fi)
{
	if (fi)
		return ftruncate((int)fi->fh, size) < 0 ? -errno : 0;
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return truncate(p, size) < 0 ? -errno : 0;
}

static int eio_utimens(const char *path, const struct timespec tv[2], struct fuse_file_info *fi)
{
	if (fi)
		return futimens((int)fi->fh, tv) < 0 ? -errno : 0;
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return utimensat(AT_FDCWD, p, tv, AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

static int eio_open(const char *path, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	/* Direct I/O is this layer's job (cfg->direct_io); the source is used buffered. */
	int fd = open(p, fi->flags & ~(O_DIRECT | O_NOFOLLOW));
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int eio_create(const char *path, mode_t mode, struct fuse_file_info *fi)
{
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	int fd = open(p, (fi->flags & ~O_DIRECT) | O_CREAT, mode);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static void wait_while_stalled(const char *path)
{
	char marker[PATH_MAX + 16];
	snprintf(marker, sizeof(marker), "%s%s.stall", source_root, path);
	while (access(marker, F_OK) == 0)
		usleep(10000);
}

static int eio_read(const char *path, char *buf, size_t size, off_t off, struct fuse_file_info *fi)
{
	wait_while_stalled(path);
	if (is_faulty(path))
		return -EIO;
	ssize_t n = pread((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int eio_write(const char *path, const char *buf, size_t size, off_t off,
		     struct fuse_file_info *fi)
{
	if (is_faulty(path))
		return -EIO;
	ssize_t n = pwrite((int)fi->fh, buf, size, off);
	return n < 0 ? -errno : (int)n;
}

static int eio_statfs(const char *path, struct statvfs *sv)
{
	(void)path;
	return statvfs(source_root, sv) < 0 ? -errno : 0;
}

static int eio_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static int eio_fsync(const char *path, int datasync, struct fuse_file_info *fi)
{
	if (is_faulty(path))
		return -EIO;
	int r = datasync ? fdatasync((int)fi->fh) : fsync((int)fi->fh);
	return r < 0 ? -errno : 0;
}

static int eio_readdir(const char *path, void *buf, fuse_fill_dir_t fill, off_t off,
		       struct fuse_file_info *fi, enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	DIR *d = opendir(p);
	if (!d)
		return -errno;
	for (struct dirent *e; (e = readdir(d));) {
		struct stat st = {.st_ino = e->d_ino, .st_mode = (mode_t)DTTOIF(e->d_type)};
		if (fill(buf, e->d_name, &st, 0, 0))
			break;
	}
	closedir(d);
	return 0;
}

static int eio_access(const char *path, int mask)
{
	char p[PATH_MAX];
	source_path(path, p, sizeof(p));
	return access(p, mask) < 0 ? -errno : 0;
}

static const struct fuse_operations eio_ops = {
	.init = eio_init,
	.getattr = eio_getattr,
	.readlink = eio_readlink,
	.mkdir = eio_mkdir,
	.unlink = eio_unlink,
	.rmdir = eio_rmdir,
	.rename = eio_rename,
	.chmod = eio_chmod,
	.chown = eio_chown,
	.truncate = eio_truncate,
	.utimens = eio_utimens,
	.open = eio_open,
	.create = eio_create,
	.read = eio_read,
	.write = eio_write,
	.statfs = eio_statfs,
	.release = eio_release,
	.fsync = eio_fsync,
	.readdir = eio_readdir,
	.access = eio_access,
};

int main(int argc, char *argv[])
{
	if (argc < 3 || !realpath(argv[1], source_root)) {
		fprintf(stderr, "usage: eiofs SOURCE MOUNTPOINT [FUSE options]\n");
		return 2;
	}
	/* fuse_main sees: eiofs MOUNTPOINT [options]. */
	argv[1] = argv[0];
	return fuse_main(argc - 1, argv + 1, &eio_ops, NULL);
}
