/*
 * The mount against a directory of the same filesystem, as a model: one
 * seeded random sequence of POSIX calls (opens with assorted flags, reads
 * and writes at odd offsets, direct I/O beside them, stores through shared
 * mappings, truncation, holes, renames, links, unnamed files linked in,
 * modes, owners, xattrs, copies, fifos) is made on a directory through the
 * mount and on a reference directory beside the backing one, and every
 * call must give the same result on both: the same return value or errno,
 * the same bytes, the same type, mode, size, link count and owner; at the
 * end both trees must be the same. As root, as an unprivileged user and as
 * two users taking turns in the same directories, so permission checks and
 * privilege clearing are compared too; on a plain
 * mount, on one with the kernel's writeback cache, and on one that splices
 * large buffered writes (with payloads up to past 1 MiB drawn); and as four
 * tenants at once, so that requests go through the scheduler, not only a
 * lone tenant's path. A divergence names the seed and step, so it can be
 * replayed (FS_MODEL_TRACE=1 prints every step). FS_MODEL_SEED_OFFSET=N in
 * the environment shifts every test's seeds by N, to search past the ones
 * CI runs.
 */
#include "leftovers.h"
#include "ctl_test_util.h"
#include "mount_helper.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define USER_UID 2001
#define USER_GID 2001
#define STEPS 1500
#define SLOTS 4
#define DATA_MAX (70u << 10)
/* With large_payloads, the largest length is one of these instead: payloads
 * the channel splices (128 KiB and up, buffered), one past a page, and one
 * past the largest request (two requests, the first a whole 1 MiB). */
#define LARGE_MAX ((1u << 20) + 4097u)
static const size_t LARGE_LENS[] = {128u << 10, (700u << 10) + 1, LARGE_MAX};
static bool large_payloads;

static struct test_mount M;

/* FS_MODEL_OPTS=OPTS in the environment mounts the plain case with -o OPTS
 * (uring_only, noacl, max_write=4096, ...), to search other paths. */
static void mount_up(void)
{
	const char *opts = getenv("FS_MODEL_OPTS");
	const char *const args[] = {"-o", opts, NULL};
	test_mount_start(&M, opts && *opts ? args : NULL);
}

/* The kernel's writeback cache changes how writes, appends and sizes reach the daemon. */
static void mount_up_writeback_cache(void)
{
	static const char *const args[] = {"-o", "writeback_cache", NULL};
	test_mount_start(&M, args);
}

/* Large buffered writes spliced through pipes, with large payloads drawn. */
static void mount_up_spliced(void)
{
	ck_assert_msg(test_mount_start_spliced(&M, NULL) >= 2, "the daemon made no pipes to splice into");
	large_payloads = true;
}

static void mount_down(void)
{
	test_mount_require_clean_exit(test_mount_stop(&M));
}

/* The names a sequence works on: files, directories, names in them. */
static const char *const NAMES[] = {"n0", "n1", "n2", "n3", "n4", "d0/n0", "d0/n1", "d1/x", "d0/d2/y"};
static const char *const DIRS[] = {"d0", "d1", "d0/d2", "d3"};
#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t next_rand(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static uint32_t pick(uint64_t *s, uint32_t n)
{
	return (uint32_t)(next_rand(s) % n);
}

/* One call's outcome: a value or an errno, and what it gave back. */
struct outcome {
	long ret;
	int err;
	char detail[160];
	uint64_t digest; /* of the bytes read, names listed, xattr values */
};

static uint64_t digest(const void *p, size_t n)
{
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < n; i++)
		h = (h ^ ((const unsigned char *)p)[i]) * 1099511628211ull;
	return h;
}

static void note_stat(struct outcome *o, const struct stat *st)
{
	/* A directory's size is the filesystem's layout, not the calls'. */
	snprintf(o->detail, sizeof(o->detail), "type %o mode %04o size %lld nlink %lu uid %u gid %u",
		 st->st_mode & S_IFMT, st->st_mode & 07777,
		 S_ISDIR(st->st_mode) ? 0LL : (long long)st->st_size, (unsigned long)st->st_nlink,
		 st->st_uid, st->st_gid);
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names in sorted order, whatever order they came in. */
static uint64_t digest_names(char **names, size_t n)
{
	qsort(names, n, sizeof(names[0]), cmp_names);
	uint64_t h = n;
	for (size_t i = 0; i < n; i++)
		h = h * 31 + digest(names[i], strlen(names[i]));
	return h;
}

/*
 * A listxattr answer's names: the order is not specified, and XFS gives
 * its on-disk order to a buffer with room to spare and hash order to one
 * just large enough (as the daemon's is).
 */
static uint64_t digest_name_list(char *list, size_t bytes)
{
	char *names[64];
	size_t n = 0;
	for (size_t at = 0; at < bytes && n < COUNT(names); at += strlen(list + at) + 1)
		names[n++] = list + at;
	return digest_names(names, n);
}

static void note_listing(struct outcome *o, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d) {
		o->ret = -1;
		o->err = errno;
		return;
	}
	char *names[64];
	size_t n = 0;
	struct dirent *e;
	while ((e = readdir(d)) && n < COUNT(names))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			names[n++] = strdup(e->d_name);
	closedir(d);
	o->ret = (long)n;
	o->digest = digest_names(names, n);
	for (size_t i = 0; i < n; i++)
		free(names[i]);
}

/* What one step does, drawn once and made on both sides alike. */
struct step {
	uint32_t op;
	const char *p, *q, *d;
	uint32_t slot;
	int open_flags;
	mode_t mode;
	off_t off;
	size_t len;
	int whence;
	unsigned char fill;
};

enum {
	OP_OPEN, OP_CLOSE, OP_WRITE, OP_PWRITE, OP_PREAD, OP_FTRUNCATE, OP_TRUNCATE, OP_FSYNC,
	OP_FALLOCATE, OP_PUNCH, OP_SEEK, OP_UNLINK, OP_RENAME, OP_RENAME_NOREPLACE,
	OP_RENAME_EXCHANGE, OP_MKDIR, OP_RMDIR, OP_LINK, OP_SYMLINK, OP_STAT, OP_LSTAT, OP_FSTAT,
	OP_CHMOD, OP_READDIR, OP_SETXATTR, OP_GETXATTR, OP_LISTXATTR, OP_REMOVEXATTR, OP_UTIMENS,
	OP_COPY_RANGE, OP_MKFIFO, OP_READLINK, OP_ACCESS, OP_CHOWN, OP_MMAP_WRITE, OP_FCHMOD,
	OP_FCHOWN, OP_FDATASYNC, OP_DIRECT_RW, OP_TMPFILE_LINK, OP_CHMOD_DIR, OP_RENAME_DIR,
	OP_PWRITEV2, OP_ZERO_RANGE, OP_COUNT
};

static const char *const OP_NAMES[OP_COUNT] = {
	"open", "close", "write", "pwrite", "pread", "ftruncate", "truncate", "fsync",
	"fallocate", "punch", "lseek", "unlink", "rename", "rename_noreplace", "rename_exchange",
	"mkdir", "rmdir", "link", "symlink", "stat", "lstat", "fstat", "chmod", "readdir",
	"setxattr", "getxattr", "listxattr", "removexattr", "utimensat", "copy_file_range",
	"mkfifo", "readlink", "access", "chown", "mmap_write", "fchmod", "fchown", "fdatasync",
	"direct_rw", "tmpfile_link", "chmod_dir", "rename_dir", "pwritev2",
	"zero_range"};

static void draw(uint64_t *s, struct step *st)
{
	static const off_t offs[] = {0, 1, 4095, 4096, 8191, 65536, 1 << 20};
	static const size_t lens[] = {0, 1, 100, 4096, 5000, DATA_MAX};
	static const int opens[] = {O_RDONLY, O_WRONLY | O_CREAT, O_RDWR | O_CREAT,
				    O_WRONLY | O_APPEND | O_CREAT, O_RDWR};
	static const mode_t modes[] = {0600, 0644, 0755, 04755, 02755, 01777, 0400, 0};
	/* A third of the steps work on open files, the rest on names. */
	static const uint32_t on_files[] = {OP_OPEN, OP_OPEN, OP_WRITE, OP_PWRITE, OP_PREAD,
					    OP_PREAD, OP_FTRUNCATE, OP_FSTAT, OP_SEEK, OP_FALLOCATE,
					    OP_PUNCH, OP_FSYNC, OP_CLOSE, OP_MMAP_WRITE, OP_FCHMOD,
					    OP_FCHOWN, OP_FDATASYNC, OP_PWRITEV2, OP_ZERO_RANGE};
	st->op = pick(s, 3) ? pick(s, OP_COUNT) : on_files[pick(s, COUNT(on_files))];
	st->p = NAMES[pick(s, COUNT(NAMES))];
	st->q = NAMES[pick(s, COUNT(NAMES))];
	st->d = DIRS[pick(s, COUNT(DIRS))];
	st->slot = pick(s, SLOTS);
	/* O_NONBLOCK: a fifo opened for reading must not wait for a writer. */
	st->open_flags = opens[pick(s, COUNT(opens))] | O_NONBLOCK;
	if (pick(s, 5) == 0)
		st->open_flags |= O_TRUNC;
	if (pick(s, 10) == 0)
		st->open_flags |= O_CREAT | O_EXCL;
	st->mode = modes[pick(s, COUNT(modes))];
	st->off = pick(s, 4) ? offs[pick(s, COUNT(offs))] : (off_t)pick(s, 200000);
	st->len = lens[pick(s, COUNT(lens))];
	if (large_payloads && st->len == DATA_MAX)
		st->len = LARGE_LENS[pick(s, COUNT(LARGE_LENS))];
	static const int whences[] = {SEEK_SET, SEEK_CUR, SEEK_END, SEEK_DATA, SEEK_HOLE};
	st->whence = whences[pick(s, COUNT(whences))];
	st->fill = (unsigned char)pick(s, 256);
}

static bool on_xfs(const char *path)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && sf.f_type == XFS_SUPER_MAGIC;
}

/* One side: its root and its open descriptors. */
struct side {
	const char *root;
	bool backing_xfs; /* the reference's filesystem, for both sides */
	int fd[SLOTS];
};

static const char *at(const struct side *sd, const char *rel, char *buf, size_t n)
{
	snprintf(buf, n, "%s/%s", sd->root, rel);
	return buf;
}

static void run_step(struct side *sd, const struct step *st, struct outcome *o, char *data)
{
	char p[512], q[512], d[512];
	at(sd, st->p, p, sizeof(p));
	at(sd, st->q, q, sizeof(q));
	at(sd, st->d, d, sizeof(d));
	memset(o, 0, sizeof(*o));
	int fd = sd->fd[st->slot];
	struct stat sb;
	long r = 0;
	errno = 0;
	switch (st->op) {
	case OP_OPEN:
		if (fd >= 0)
			close(fd);
		r = sd->fd[st->slot] = open(p, st->open_flags, 0644);
		if (r >= 0)
			r = 0; /* descriptor numbers may differ */
		break;
	case OP_CLOSE:
		r = fd < 0 ? -2 : close(fd);
		sd->fd[st->slot] = -1;
		break;
	case OP_WRITE:
	case OP_PWRITE:
		memset(data, st->fill, st->len);
		r = fd < 0 ? -2
			   : (st->op == OP_WRITE ? write(fd, data, st->len)
						 : pwrite(fd, data, st->len, st->off));
		break;
	case OP_PWRITEV2: {
		/* The write's own flags: appended wherever the offset says, or durable. */
		static const int flags[] = {RWF_APPEND, RWF_DSYNC, RWF_SYNC, RWF_APPEND | RWF_DSYNC};
		memset(data, st->fill, st->len);
		struct iovec iov = {data, st->len};
		r = fd < 0 ? -2 : pwritev2(fd, &iov, 1, st->off, flags[st->slot]);
		break;
	}
	case OP_ZERO_RANGE:
		r = fd < 0 ? -2 : fallocate(fd, FALLOC_FL_ZERO_RANGE, st->off, (off_t)st->len + 1);
		break;
	case OP_PREAD:
		r = fd < 0 ? -2 : pread(fd, data, st->len, st->off);
		if (r > 0)
			o->digest = digest(data, (size_t)r);
		break;
	case OP_FTRUNCATE:
		r = fd < 0 ? -2 : ftruncate(fd, st->off);
		break;
	case OP_TRUNCATE:
		/* XFS skips a truncate of an empty file to 0 by path, setuid and
		 * setgid kept; through the mount they are cleared, as the kernel
		 * asks and ext4 does. Not compared there. */
		if (st->off == 0 && sd->backing_xfs && stat(p, &sb) == 0 && sb.st_size == 0) {
			r = -3;
			break;
		}
		r = truncate(p, st->off);
		break;
	case OP_FSYNC:
		r = fd < 0 ? -2 : fsync(fd);
		break;
	case OP_FALLOCATE:
		r = fd < 0 ? -2 : fallocate(fd, 0, st->off, (off_t)st->len + 1);
		break;
	case OP_PUNCH:
		r = fd < 0 ? -2
			   : fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, st->off,
				       (off_t)st->len + 1);
		break;
	case OP_SEEK:
		r = fd < 0 ? -2 : lseek(fd, st->off, st->whence);
		/* Within the file, where data and holes are reported depends on
		 * the backing page cache (a page read ahead in an unwritten extent
		 * reads as data), which the mount's own reads change, and a hole
		 * may always be reported as data. Only past the end is the answer
		 * fixed (ENXIO); the position is then set alike on both sides. */
		if (fd >= 0 && (st->whence == SEEK_DATA || st->whence == SEEK_HOLE)) {
			int e = errno;
			if (fstat(fd, &sb) == 0 && st->off < sb.st_size)
				r = 0;
			else if (r >= 0)
				r = 1; /* found something past the end */
			lseek(fd, st->off, SEEK_SET);
			errno = e;
		}
		break;
	case OP_UNLINK:
		r = unlink(p);
		break;
	case OP_RENAME:
		r = rename(p, q);
		break;
	case OP_RENAME_NOREPLACE:
		r = renameat2(AT_FDCWD, p, AT_FDCWD, q, RENAME_NOREPLACE);
		break;
	case OP_RENAME_EXCHANGE:
		r = renameat2(AT_FDCWD, p, AT_FDCWD, q, RENAME_EXCHANGE);
		break;
	case OP_MKDIR:
		r = mkdir(d, 0755);
		break;
	case OP_RMDIR:
		r = rmdir(d);
		break;
	case OP_LINK:
		r = link(p, q);
		break;
	case OP_SYMLINK:
		r = symlink(st->p, q);
		break;
	case OP_STAT:
	case OP_LSTAT:
	case OP_FSTAT:
		r = st->op == OP_STAT ? stat(p, &sb)
		    : st->op == OP_LSTAT ? lstat(p, &sb)
		    : fd < 0	      ? -2
					    : fstat(fd, &sb);
		if (r == 0)
			note_stat(o, &sb);
		break;
	case OP_CHMOD:
		r = chmod(p, st->mode);
		break;
	case OP_READDIR:
		note_listing(o, d);
		if (o->err)
			return;
		r = o->ret;
		break;
	case OP_SETXATTR:
		memset(data, st->fill, 100);
		r = setxattr(p, st->slot & 1 ? "user.a" : "user.b", data, st->len % 101, 0);
		break;
	case OP_GETXATTR:
		r = getxattr(p, st->slot & 1 ? "user.a" : "user.b", data, 200);
		if (r > 0)
			o->digest = digest(data, (size_t)r);
		break;
	case OP_LISTXATTR:
		r = listxattr(p, data, 4096);
		if (r > 0)
			o->digest = digest_name_list(data, (size_t)r);
		break;
	case OP_REMOVEXATTR:
		r = removexattr(p, st->slot & 1 ? "user.a" : "user.b");
		break;
	case OP_UTIMENS: {
		struct timespec ts[2] = {{.tv_sec = st->off}, {.tv_sec = st->off + 7, .tv_nsec = 5}};
		r = utimensat(AT_FDCWD, p, ts, 0);
		if (r == 0 && stat(p, &sb) == 0)
			snprintf(o->detail, sizeof(o->detail), "mtime %lld.%09ld",
				 (long long)sb.st_mtim.tv_sec, sb.st_mtim.tv_nsec);
		break;
	}
	case OP_COPY_RANGE: {
		int in = open(p, O_RDONLY | O_NONBLOCK);
		if (in < 0) {
			r = -1;
			break;
		}
		int out = open(q, O_WRONLY | O_CREAT | O_NONBLOCK, 0644);
		if (out < 0) {
			int e = errno;
			close(in);
			errno = e;
			r = -1;
			break;
		}
		loff_t off_out = st->off;
		r = copy_file_range(in, NULL, out, &off_out, st->len, 0);
		int e = errno;
		close(out);
		close(in);
		errno = e;
		break;
	}
	case OP_MKFIFO:
		r = mkfifo(p, 0644);
		break;
	case OP_READLINK:
		r = readlink(p, data, 200);
		if (r > 0)
			o->digest = digest(data, (size_t)r);
		break;
	case OP_ACCESS:
		r = access(p, R_OK | W_OK);
		break;
	case OP_CHOWN:
	case OP_FCHOWN: {
		/* To the caller's own group (a member may), and to others' ids
		 * (only root may): either way setuid and setgid bits go as on
		 * the backing filesystem. */
		static const struct {
			uid_t uid;
			gid_t gid;
		} to[] = {{(uid_t)-1, (gid_t)-1}, {USER_UID, USER_GID}, {0, 0}, {(uid_t)-1, 0}};
		uint32_t k = st->op == OP_CHOWN ? st->slot : st->fill % COUNT(to);
		uid_t uid = k == 0 ? (uid_t)-1 : to[k].uid;
		gid_t gid = k == 0 ? getegid() : to[k].gid;
		r = st->op == OP_CHOWN ? chown(p, uid, gid) : fd < 0 ? -2 : fchown(fd, uid, gid);
		break;
	}
	case OP_FCHMOD:
		r = fd < 0 ? -2 : fchmod(fd, st->mode);
		break;
	case OP_CHMOD_DIR:
		/* setgid directories hand their group down; sticky ones guard names */
		r = chmod(d, st->mode | 0700);
		break;
	case OP_RENAME_DIR: {
		/* over an empty directory, into itself, across levels */
		char d2[512];
		at(sd, DIRS[st->fill % COUNT(DIRS)], d2, sizeof(d2));
		r = rename(d, d2);
		break;
	}
	case OP_FDATASYNC:
		r = fd < 0 ? -2 : fdatasync(fd);
		break;
	case OP_DIRECT_RW: {
		/* Direct I/O of whole blocks beside the slots' buffered I/O: what
		 * one writes the other must read, page cache or not. */
		int dfd = open(p, O_RDWR | O_DIRECT | O_NONBLOCK);
		if (dfd < 0) {
			r = -1;
			break;
		}
		off_t at = st->off & ~(off_t)4095;
		size_t n = st->len <= 4096 ? 4096 : 8192;
		memset(data, st->fill, n);
		r = pwrite(dfd, data, n, at);
		if (r >= 0) {
			memset(data, 0, n);
			r = pread(dfd, data, n, at);
			if (r > 0)
				o->digest = digest(data, (size_t)r);
		}
		int e = errno;
		close(dfd);
		errno = e;
		break;
	}
	case OP_TMPFILE_LINK: {
		/* A file made unnamed in d, written, then given the name q. */
		int tfd = open(d, O_TMPFILE | O_RDWR, st->mode & 0777);
		if (tfd < 0) {
			r = -1;
			break;
		}
		memset(data, st->fill, st->len % 5001);
		r = write(tfd, data, st->len % 5001);
		if (r >= 0) {
			char proc[64];
			snprintf(proc, sizeof(proc), "/proc/self/fd/%d", tfd);
			r = linkat(AT_FDCWD, proc, AT_FDCWD, q, AT_SYMLINK_FOLLOW);
		}
		int e = errno;
		close(tfd);
		errno = e;
		break;
	}
	case OP_MMAP_WRITE: {
		/* Stores into a shared mapping of the open file's first pages,
		 * written back with msync: the kernel's writeback, not a write
		 * call, sends them. */
		if (fd < 0 || fstat(fd, &sb) < 0) {
			r = fd < 0 ? -2 : -1;
			break;
		}
		size_t bytes = sb.st_size < 8192 ? (size_t)sb.st_size : 8192;
		if (bytes == 0) {
			r = -3; /* nothing to map: mmap of 0 bytes is EINVAL on both */
			break;
		}
		void *map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (map == MAP_FAILED) {
			r = -1;
			break;
		}
		size_t at = (size_t)st->off % bytes;
		size_t n = st->len < bytes - at ? st->len : bytes - at;
		memset((char *)map + at, st->fill, n);
		r = msync(map, bytes, MS_SYNC);
		int e = errno;
		munmap(map, bytes);
		errno = e;
		if (r == 0)
			r = (long)n;
		break;
	}
	}
	o->ret = r;
	o->err = r == -1 ? errno : 0;
}

static bool same(const struct outcome *a, const struct outcome *b)
{
	return a->ret == b->ret && a->err == b->err && a->digest == b->digest &&
	       strcmp(a->detail, b->detail) == 0;
}

static void describe(char *buf, size_t n, const struct outcome *o)
{
	snprintf(buf, n, "ret %ld errno %d (%s) %s digest %016llx", o->ret, o->err,
		 o->err ? strerror(o->err) : "-", o->detail, (unsigned long long)o->digest);
}

/* Both trees, entry by entry (sorted walks). Returns false and says where on a difference. */
static bool trees_match(const char *a, const char *b, const char *rel, char *why, size_t n)
{
	char pa[1024], pb[1024];
	snprintf(pa, sizeof(pa), "%s%s%s", a, *rel ? "/" : "", rel);
	snprintf(pb, sizeof(pb), "%s%s%s", b, *rel ? "/" : "", rel);
	struct outcome la = {0}, lb = {0};
	note_listing(&la, pa);
	note_listing(&lb, pb);
	if (!same(&la, &lb)) {
		snprintf(why, n, "listing of '%s' differs (%ld against %ld names)", rel, la.ret, lb.ret);
		return false;
	}
	DIR *d = opendir(pa);
	if (!d)
		return true;
	struct dirent *e;
	bool ok = true;
	while (ok && (e = readdir(d))) {
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		char sub[512], fa[1100], fb[1100];
		snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", e->d_name);
		snprintf(fa, sizeof(fa), "%s/%s", a, sub);
		snprintf(fb, sizeof(fb), "%s/%s", b, sub);
		struct stat sa, sb;
		struct outcome oa = {0}, ob = {0};
		if (lstat(fa, &sa) == 0)
			note_stat(&oa, &sa);
		if (lstat(fb, &sb) == 0)
			note_stat(&ob, &sb);
		if (!same(&oa, &ob)) {
			snprintf(why, n, "'%s': %s against %s", sub, oa.detail, ob.detail);
			ok = false;
		} else if (S_ISREG(sa.st_mode)) {
			char *ca = malloc((size_t)sa.st_size + 1), *cb = malloc((size_t)sb.st_size + 1);
			int da = open(fa, O_RDONLY), db = open(fb, O_RDONLY);
			ssize_t ra = da < 0 ? -1 : pread(da, ca, (size_t)sa.st_size, 0);
			ssize_t rb = db < 0 ? -1 : pread(db, cb, (size_t)sb.st_size, 0);
			if (ra != rb || (ra > 0 && memcmp(ca, cb, (size_t)ra))) {
				snprintf(why, n, "'%s': contents differ (%zd and %zd bytes read)", sub, ra, rb);
				ok = false;
			}
			if (da >= 0)
				close(da);
			if (db >= 0)
				close(db);
			free(ca);
			free(cb);
		} else if (S_ISDIR(sa.st_mode)) {
			ok = trees_match(a, b, sub, why, n);
		}
	}
	closedir(d);
	return ok;
}

struct sequence {
	char through[512], reference[512];
	uint64_t seed;
	char why[1024];
	unsigned succeeded[OP_COUNT]; /* steps that succeeded, by operation, over every seed */
};

/*
 * Two users taking turns in one sequence (in this process: which one it is,
 * and the pipes the turns pass through). The step's user is drawn from a
 * stream of its own, so both processes agree on it; the other one waits.
 */
static struct turns {
	int me;      /* 0 or 1 */
	int wait_fd; /* the other's steps end here: 'k' done, 'x' it diverged */
	int tell_fd;
} *turns;

/* Whose step this is, in a sequence of two users. */
static bool my_turn(uint64_t *who, int *bad)
{
	if (!turns)
		return true;
	if ((int)pick(who, 2) == turns->me)
		return true;
	char c = 'x';
	if (read(turns->wait_fd, &c, 1) != 1 || c != 'k')
		*bad = 2; /* the other diverged (its why is the sequence's) or is gone */
	return false;
}

/* The whole sequence; 0 when every step and the trees matched, else 1 and why
 * (2: the other user's step diverged). */
static int run_sequence(void *arg)
{
	struct sequence *sq = arg;
	bool xfs = on_xfs(sq->reference);
	struct side a = {.root = sq->through, .backing_xfs = xfs},
		    b = {.root = sq->reference, .backing_xfs = xfs};
	for (int i = 0; i < SLOTS; i++)
		a.fd[i] = b.fd[i] = -1;
	/* A write to a fifo whose reader closed fails with EPIPE on both sides. */
	signal(SIGPIPE, SIG_IGN);
	/* Aligned for direct I/O. */
	char *data = aligned_alloc(4096, (LARGE_MAX + 4095) / 4096 * 4096);
	uint64_t s = sq->seed * 0x9e3779b97f4a7c15ull + 1, who = sq->seed * 31 + 7;
	int bad = 0;
	for (int i = 0; i < STEPS && !bad; i++) {
		struct step st;
		draw(&s, &st);
		if (!my_turn(&who, &bad))
			continue;
		struct outcome oa, ob;
		run_step(&a, &st, &oa, data);
		run_step(&b, &st, &ob, data);
		if (oa.ret >= 0)
			sq->succeeded[st.op]++;
		if (getenv("FS_MODEL_TRACE")) {
			char da[300];
			describe(da, sizeof(da), &oa);
			fprintf(stderr, "seed %llu step %d %s %s %s %s slot %u flags %#o off %lld len %zu whence %d: %s\n",
				(unsigned long long)sq->seed, i, OP_NAMES[st.op], st.p, st.q, st.d, st.slot, st.open_flags,
				(long long)st.off, st.len, st.whence, da);
		}
		if (!same(&oa, &ob)) {
			char da[300], db[300];
			describe(da, sizeof(da), &oa);
			describe(db, sizeof(db), &ob);
			snprintf(sq->why, sizeof(sq->why),
				 "seed %llu step %d: %s p=%s q=%s d=%s slot %u flags %#o mode %04o off %lld len %zu "
				 "whence %d: through the mount %s; reference %s",
				 (unsigned long long)sq->seed, i, OP_NAMES[st.op], st.p, st.q, st.d,
				 st.slot, st.open_flags, st.mode, (long long)st.off, st.len, st.whence, da,
				 db);
			bad = 1;
		}
		if (turns && write(turns->tell_fd, bad ? "x" : "k", 1) != 1)
			bad = 1;
	}
	for (int i = 0; i < SLOTS; i++) {
		if (a.fd[i] >= 0)
			close(a.fd[i]);
		if (b.fd[i] >= 0)
			close(b.fd[i]);
	}
	free(data);
	char why[900];
	/* Two users' trees are compared once both are done. */
	if (!bad && !turns && !trees_match(sq->through, sq->reference, "", why, sizeof(why))) {
		snprintf(sq->why, sizeof(sq->why), "seed %llu, after the sequence: %s",
			 (unsigned long long)sq->seed, why);
		bad = 1;
	}
	if (bad == 1)
		fprintf(stderr, "%s\n", sq->why);
	return bad;
}

/* Shared with the child that runs a sequence as another user. */
static struct sequence *sequence_new(void)
{
	struct sequence *sq = mmap(NULL, sizeof(*sq), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(sq, MAP_FAILED);
	memset(sq, 0, sizeof(*sq));
	return sq;
}

/* Every operation succeeded somewhere in the test's sequences: a test
 * whose calls all failed on both sides would compare errnos only. */
static void require_every_operation_exercised(struct sequence *sq)
{
	for (int op = 0; op < OP_COUNT; op++)
		ck_assert_msg(sq->succeeded[op] > 0, "no %s succeeded in the sequences", OP_NAMES[op]);
	munmap(sq, sizeof(*sq));
}

/* FS_MODEL_SEED_OFFSET, or 0. */
static uint64_t seed_offset(void)
{
	const char *v = getenv("FS_MODEL_SEED_OFFSET");
	return v ? strtoull(v, NULL, 10) : 0;
}

/* Seed's pair of directories: one through the mount, one beside the backing. */
static void pair_paths(struct sequence *sq, uint64_t seed)
{
	seed += seed_offset();
	char rel[32];
	snprintf(rel, sizeof(rel), "seq%llu", (unsigned long long)seed);
	sq->seed = seed;
	sq->why[0] = '\0';
	snprintf(sq->through, sizeof(sq->through), "%s", test_mnt_path(&M, rel));
	snprintf(sq->reference, sizeof(sq->reference), "%s/reference-%s", M.root, rel);
}

/* The pair made fresh and owned by uid. */
static void fresh_pair(struct sequence *sq, uint64_t seed, uid_t uid, gid_t gid)
{
	pair_paths(sq, seed);
	ck_assert_int_eq(mkdir(sq->through, 0755), 0);
	ck_assert_int_eq(mkdir(sq->reference, 0755), 0);
	ck_assert_int_eq(chown(sq->through, uid, gid), 0);
	ck_assert_int_eq(chown(sq->reference, uid, gid), 0);
}

START_TEST(random_sequences_as_root_match_the_backing_filesystem)
{
	struct sequence *sq = sequence_new();
	for (uint64_t seed = 1; seed <= 20; seed++) {
		fresh_pair(sq, seed, 0, 0);
		if (run_sequence(sq))
			ck_abort_msg("%s", sq->why);
	}
	require_every_operation_exercised(sq);
}
END_TEST

START_TEST(random_sequences_as_a_user_match_the_backing_filesystem)
{
	/* The reference directory's parent must be reachable by the user. */
	ck_assert_int_eq(chmod(M.root, 0755), 0);
	struct sequence *sq = sequence_new();
	for (uint64_t seed = 101; seed <= 120; seed++) {
		fresh_pair(sq, seed, USER_UID, USER_GID);
		int status = test_run_as(USER_UID, USER_GID, run_sequence, sq);
		ck_assert_msg(status == 0, "as uid %d (exit %d): %s", USER_UID, status,
			      sq->why[0] ? sq->why : "the sequence did not finish");
	}
	require_every_operation_exercised(sq);
}
END_TEST

/*
 * Four tenants at once, each a process in its own cgroup (two as root, two
 * as users) running its own sequences: their requests meet in the
 * scheduler and the reactor instead of running alone in the worker that
 * read them, and each tenant's calls must still come out as on the plain
 * directory.
 */
START_TEST(random_sequences_of_four_tenants_at_once_match)
{
	enum { TENANTS = 4, SEEDS_EACH = 4 };
	ck_assert_int_eq(chmod(M.root, 0755), 0);
	struct sequence *sq[TENANTS];
	char cgroup[TENANTS][64];
	pid_t pid[TENANTS];
	for (int t = 0; t < TENANTS; t++) {
		sq[t] = sequence_new();
		uid_t uid = t % 2 ? USER_UID + (uid_t)t : 0;
		for (int k = 0; k < SEEDS_EACH; k++)
			fresh_pair(sq[t], 1000u + 100u * (unsigned)t + (unsigned)k, uid, uid);
		snprintf(cgroup[t], sizeof(cgroup[t]), "/fs-model-%d-t%d", (int)getpid(), t);
		ctl_test_cgroup_make(CG_V2, cgroup[t]);
	}
	for (int t = 0; t < TENANTS; t++) {
		pid[t] = fork();
		ck_assert_int_ge(pid[t], 0);
		if (pid[t] == 0) {
			ctl_test_become(cgroup[t], t % 2 ? USER_UID + (uid_t)t : 0);
			int bad = 0;
			for (int k = 0; k < SEEDS_EACH && !bad; k++) {
				pair_paths(sq[t], 1000u + 100u * (unsigned)t + (unsigned)k);
				bad = run_sequence(sq[t]);
			}
			_exit(bad);
		}
	}
	for (int t = 0; t < TENANTS; t++) {
		int status;
		ck_assert_int_eq(waitpid(pid[t], &status, 0), pid[t]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			      "tenant %s (status %#x): %s", cgroup[t], status,
			      sq[t]->why[0] ? sq[t]->why : "the sequences did not finish");
	}
	/* Each was a tenant of its own, as the daemon counts them, and some
	 * of their requests were scheduled, not run alone. */
	int64_t scheduled = 0;
	for (int t = 0; t < TENANTS; t++) {
		int64_t ops = 0;
		static const char *const kinds[] = {"ops.read", "ops.write", "ops.sync", "ops.other"};
		for (size_t k = 0; k < COUNT(kinds); k++)
			ops += ctl_test_tenant_u64(M.mnt, cgroup[t], kinds[k]);
		int64_t solo = ctl_test_tenant_u64(M.mnt, cgroup[t], "solo_ops");
		ck_assert_msg(ops > 0 && solo >= 0, "tenant %s: %lld ops counted", cgroup[t], (long long)ops);
		scheduled += ops - solo;
	}
	ck_assert_msg(scheduled > 0, "every request of the four tenants ran alone");
	/* Every operation by one tenant or another (four seeds each are few). */
	for (int t = 1; t < TENANTS; t++) {
		for (int op = 0; op < OP_COUNT; op++)
			sq[0]->succeeded[op] += sq[t]->succeeded[op];
		munmap(sq[t], sizeof(*sq[t]));
	}
	require_every_operation_exercised(sq[0]);
}
END_TEST

/*
 * Two users taking turns in the same directories (sticky and writable by
 * all, as /tmp; each user has its own open files): what one made, the other
 * reads, renames, unlinks, chmods or is refused, as on the backing
 * filesystem. Both share a supplementary group, so group permissions,
 * setgid directories and chown to that group count too.
 */
START_TEST(random_sequences_of_two_users_taking_turns_match)
{
	enum { SHARED_GID = 2100, SEEDS = 10 };
	static const uid_t users[2] = {USER_UID, USER_UID + 1};
	const gid_t shared = SHARED_GID;
	ck_assert_int_eq(chmod(M.root, 0755), 0);
	struct sequence *sq = sequence_new();
	for (uint64_t seed = 2001; seed < 2001 + SEEDS; seed++) {
		fresh_pair(sq, seed, 0, SHARED_GID);
		ck_assert_int_eq(chmod(sq->through, 01777), 0);
		ck_assert_int_eq(chmod(sq->reference, 01777), 0);
		int to[2][2];
		ck_assert_int_eq(pipe(to[0]), 0);
		ck_assert_int_eq(pipe(to[1]), 0);
		pid_t pid[2];
		for (int k = 0; k < 2; k++) {
			pid[k] = fork();
			ck_assert_int_ge(pid[k], 0);
			if (pid[k] == 0) {
				struct turns mine = {.me = k, .wait_fd = to[k][0], .tell_fd = to[1 - k][1]};
				turns = &mine;
				_exit(test_run_as_groups(users[k], users[k], &shared, 1, -1, run_sequence, sq));
			}
		}
		for (int k = 0; k < 2; k++) {
			close(to[k][0]);
			close(to[k][1]);
		}
		int status[2];
		for (int k = 0; k < 2; k++)
			ck_assert_int_eq(waitpid(pid[k], &status[k], 0), pid[k]);
		for (int k = 0; k < 2; k++)
			ck_assert_msg(WIFEXITED(status[k]) && (WEXITSTATUS(status[k]) == 0 ||
							      WEXITSTATUS(status[k]) == 2),
				      "uid %u (status %#x): %s", (unsigned)users[k], status[k],
				      sq->why[0] ? sq->why : "the sequence did not finish");
		ck_assert_msg(sq->why[0] == '\0', "%s", sq->why);
		char why[900];
		ck_assert_msg(trees_match(sq->through, sq->reference, "", why, sizeof(why)),
			      "seed %llu, after the sequence: %s", (unsigned long long)seed, why);
	}
	require_every_operation_exercised(sq);
}
END_TEST

int main(void)
{
	test_require_root("fs_model", "mounts, and runs as another user");
	Suite *s = suite_create("fs_model");
	TCase *tc = tcase_create("model");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(tc, mount_up, mount_down);
	tcase_set_timeout(tc, 240);
	tcase_add_test(tc, random_sequences_as_root_match_the_backing_filesystem);
	tcase_add_test(tc, random_sequences_as_a_user_match_the_backing_filesystem);
	tcase_add_test(tc, random_sequences_of_four_tenants_at_once_match);
	tcase_add_test(tc, random_sequences_of_two_users_taking_turns_match);
	suite_add_tcase(s, tc);
	TCase *wb = tcase_create("writeback_cache");
	tcase_add_unchecked_fixture(wb, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(wb, mount_up_writeback_cache, mount_down);
	tcase_set_timeout(wb, 240);
	tcase_add_test(wb, random_sequences_as_root_match_the_backing_filesystem);
	tcase_add_test(wb, random_sequences_as_a_user_match_the_backing_filesystem);
	suite_add_tcase(s, wb);
	TCase *sp = tcase_create("spliced");
	tcase_add_unchecked_fixture(sp, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(sp, mount_up_spliced, mount_down);
	tcase_set_timeout(sp, 240);
	tcase_add_test(sp, random_sequences_as_root_match_the_backing_filesystem);
	tcase_add_test(sp, random_sequences_of_four_tenants_at_once_match);
	suite_add_tcase(s, sp);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
