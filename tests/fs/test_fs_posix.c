/* The POSIX surface through a real mount, checked against the backing directory. */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <dirent.h>
#include <linux/fs.h>
#include <unistd.h>

static struct test_mount M;

static void mount_up(void)
{
	test_mount_start(&M, NULL);
}

static void mount_down(void)
{
	test_mount_require_clean_exit(test_mount_stop(&M));
}

static char *read_file(const char *path)
{
	static char buf[4096];
	int fd = open(path, O_RDONLY);
	if (fd < 0)
		return NULL;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n < 0)
		return NULL;
	buf[n] = '\0';
	return buf;
}

START_TEST(files_and_directories)
{
	test_write_file(test_mnt_path(&M, "f1"), "hello");
	ck_assert_str_eq(read_file(test_backing_path(&M, "f1")), "hello");
	ck_assert_str_eq(read_file(test_mnt_path(&M, "f1")), "hello");
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "d1"), 0750), 0);
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&M, "d1"), &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_int_eq(st.st_mode & 07777, 0750);
	test_write_file(test_mnt_path(&M, "d1/inner"), "x");
	ck_assert_int_eq(rmdir(test_mnt_path(&M, "d1")), -1);
	ck_assert_int_eq(errno, ENOTEMPTY);
	ck_assert_int_eq(unlink(test_mnt_path(&M, "d1/inner")), 0);
	ck_assert_int_eq(rmdir(test_mnt_path(&M, "d1")), 0);
	ck_assert_int_eq(access(test_backing_path(&M, "d1"), F_OK), -1);
	ck_assert_int_eq(chmod(test_mnt_path(&M, "f1"), 0600), 0);
	ck_assert_int_eq(stat(test_backing_path(&M, "f1"), &st), 0);
	ck_assert_int_eq(st.st_mode & 07777, 0600);
	ck_assert_int_eq(chown(test_mnt_path(&M, "f1"), 1234, 5678), 0);
	ck_assert_int_eq(stat(test_backing_path(&M, "f1"), &st), 0);
	ck_assert_int_eq(st.st_uid, 1234);
	ck_assert_int_eq(st.st_gid, 5678);
}
END_TEST

START_TEST(times_now_and_omit)
{
	test_write_file(test_mnt_path(&M, "t1"), "x");
	struct timespec ts[2] = {{.tv_sec = 1000000, .tv_nsec = 5}, {.tv_nsec = UTIME_OMIT}};
	struct stat before, after;
	ck_assert_int_eq(stat(test_backing_path(&M, "t1"), &before), 0);
	ck_assert_int_eq(utimensat(AT_FDCWD, test_mnt_path(&M, "t1"), ts, 0), 0);
	ck_assert_int_eq(stat(test_backing_path(&M, "t1"), &after), 0);
	ck_assert_int_eq(after.st_atim.tv_sec, 1000000);
	ck_assert_int_eq(after.st_mtim.tv_sec, before.st_mtim.tv_sec); /* omitted */
	struct timespec now[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_NOW}};
	ts[1].tv_sec = 2000000;
	ts[1].tv_nsec = 0;
	ck_assert_int_eq(utimensat(AT_FDCWD, test_mnt_path(&M, "t1"), (struct timespec[]){{.tv_nsec = UTIME_OMIT}, {.tv_sec = 2000000}}, 0), 0);
	ck_assert_int_eq(stat(test_backing_path(&M, "t1"), &after), 0);
	ck_assert_int_eq(after.st_mtim.tv_sec, 2000000);
	ck_assert_int_eq(utimensat(AT_FDCWD, test_mnt_path(&M, "t1"), now, 0), 0);
	ck_assert_int_eq(stat(test_backing_path(&M, "t1"), &after), 0);
	ck_assert_int_gt(after.st_mtim.tv_sec, 2000000);
	ck_assert_int_eq(after.st_atim.tv_sec, 1000000);
}
END_TEST

START_TEST(symlinks_and_hard_links)
{
	test_write_file(test_mnt_path(&M, "target"), "data");
	ck_assert_int_eq(symlink("target", test_mnt_path(&M, "sl")), 0);
	char buf[64];
	ssize_t n = readlink(test_backing_path(&M, "sl"), buf, sizeof(buf));
	ck_assert_int_eq(n, 6);
	n = readlink(test_mnt_path(&M, "sl"), buf, sizeof(buf));
	ck_assert_int_eq(n, 6);
	ck_assert_int_eq(memcmp(buf, "target", 6), 0);
	ck_assert_str_eq(read_file(test_mnt_path(&M, "sl")), "data");
	struct stat st;
	ck_assert_int_eq(lstat(test_mnt_path(&M, "sl"), &st), 0);
	ck_assert(S_ISLNK(st.st_mode));
	ck_assert_int_eq(link(test_mnt_path(&M, "target"), test_mnt_path(&M, "hl")), 0);
	struct stat a, b;
	ck_assert_int_eq(stat(test_mnt_path(&M, "target"), &a), 0);
	ck_assert_int_eq(stat(test_mnt_path(&M, "hl"), &b), 0);
	ck_assert_int_eq(a.st_ino, b.st_ino);
	ck_assert_int_eq(b.st_nlink, 2);
	ck_assert_int_eq(stat(test_backing_path(&M, "hl"), &b), 0);
	ck_assert_int_eq(b.st_nlink, 2);
	ck_assert_int_eq(link(test_mnt_path(&M, "target"), test_mnt_path(&M, "hl")), -1);
	ck_assert_int_eq(errno, EEXIST);
}
END_TEST

START_TEST(rename_variants)
{
	test_write_file(test_mnt_path(&M, "r_a"), "A");
	test_write_file(test_mnt_path(&M, "r_b"), "B");
	/* NOREPLACE onto an existing name fails and changes nothing. */
	ck_assert_int_eq(renameat2(AT_FDCWD, test_mnt_path(&M, "r_a"), AT_FDCWD,
				   test_mnt_path(&M, "r_b"), RENAME_NOREPLACE), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_str_eq(read_file(test_backing_path(&M, "r_b")), "B");
	/* EXCHANGE swaps. */
	ck_assert_int_eq(renameat2(AT_FDCWD, test_mnt_path(&M, "r_a"), AT_FDCWD,
				   test_mnt_path(&M, "r_b"), RENAME_EXCHANGE), 0);
	ck_assert_str_eq(read_file(test_backing_path(&M, "r_a")), "B");
	ck_assert_str_eq(read_file(test_backing_path(&M, "r_b")), "A");
	/* Plain rename replaces. */
	ck_assert_int_eq(rename(test_mnt_path(&M, "r_a"), test_mnt_path(&M, "r_b")), 0);
	ck_assert_str_eq(read_file(test_mnt_path(&M, "r_b")), "B");
	ck_assert_int_eq(access(test_backing_path(&M, "r_a"), F_OK), -1);
	/* NOREPLACE to a free name works; across directories too. */
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "r_dir"), 0755), 0);
	ck_assert_int_eq(renameat2(AT_FDCWD, test_mnt_path(&M, "r_b"), AT_FDCWD,
				   test_mnt_path(&M, "r_dir/r_c"), RENAME_NOREPLACE), 0);
	ck_assert_str_eq(read_file(test_backing_path(&M, "r_dir/r_c")), "B");
	/* A directory over a non-empty directory. */
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "r_dir2"), 0755), 0);
	ck_assert_int_eq(rename(test_mnt_path(&M, "r_dir2"), test_mnt_path(&M, "r_dir")), -1);
	ck_assert_int_eq(errno, ENOTEMPTY);
	/* Directory rename keeps its contents reachable. */
	ck_assert_int_eq(rename(test_mnt_path(&M, "r_dir"), test_mnt_path(&M, "r_dir3")), 0);
	ck_assert_str_eq(read_file(test_mnt_path(&M, "r_dir3/r_c")), "B");
	/* Exchange a file with a directory. */
	test_write_file(test_mnt_path(&M, "r_f"), "F");
	ck_assert_int_eq(renameat2(AT_FDCWD, test_mnt_path(&M, "r_f"), AT_FDCWD,
				   test_mnt_path(&M, "r_dir3"), RENAME_EXCHANGE), 0);
	struct stat st;
	ck_assert_int_eq(stat(test_mnt_path(&M, "r_f"), &st), 0);
	ck_assert(S_ISDIR(st.st_mode));
	ck_assert_str_eq(read_file(test_mnt_path(&M, "r_dir3")), "F");
}
END_TEST

START_TEST(xattrs)
{
	test_write_file(test_mnt_path(&M, "x1"), "x");
	const char *p = test_mnt_path(&M, "x1");
	ck_assert_int_eq(setxattr(p, "user.color", "blue", 4, XATTR_CREATE), 0);
	ck_assert_int_eq(setxattr(p, "user.color", "red", 3, XATTR_CREATE), -1);
	ck_assert_int_eq(errno, EEXIST);
	char buf[64];
	ck_assert_int_eq(getxattr(test_backing_path(&M, "x1"), "user.color", buf, sizeof(buf)), 4);
	ck_assert_int_eq(getxattr(p, "user.color", NULL, 0), 4);
	ck_assert_int_eq(getxattr(p, "user.color", buf, sizeof(buf)), 4);
	ck_assert_int_eq(memcmp(buf, "blue", 4), 0);
	ck_assert_int_eq(getxattr(p, "user.color", buf, 2), -1);
	ck_assert_int_eq(errno, ERANGE);
	ssize_t n = listxattr(p, buf, sizeof(buf));
	ck_assert_int_gt(n, 0);
	ck_assert_ptr_nonnull(memmem(buf, (size_t)n, "user.color", 11));
	ck_assert_int_eq(removexattr(p, "user.color"), 0);
	ck_assert_int_eq(getxattr(p, "user.color", buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, ENODATA);
}
END_TEST

/* A symlink's attributes are its own (tar --xattrs and rsync -X list every
 * symlink's): trusted.* set through the mount lands on the link, not on its
 * target; user.* is refused as the backing filesystem refuses it. */
START_TEST(symlink_xattrs_are_the_links_own)
{
	test_write_file(test_mnt_path(&M, "xt"), "target");
	ck_assert_int_eq(symlink("xt", test_mnt_path(&M, "xl")), 0);
	char buf[64];
	ck_assert_int_eq(llistxattr(test_mnt_path(&M, "xl"), buf, sizeof(buf)),
			 llistxattr(test_backing_path(&M, "xl"), buf, sizeof(buf)));
	ck_assert_int_eq(lsetxattr(test_mnt_path(&M, "xl"), "trusted.mark", "link", 4, 0), 0);
	ck_assert_int_eq(lgetxattr(test_backing_path(&M, "xl"), "trusted.mark", buf, sizeof(buf)), 4);
	ck_assert_int_eq(memcmp(buf, "link", 4), 0);
	ck_assert_int_eq(getxattr(test_backing_path(&M, "xt"), "trusted.mark", buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, ENODATA);
	ck_assert_int_eq(lgetxattr(test_mnt_path(&M, "xl"), "trusted.mark", buf, sizeof(buf)), 4);
	ssize_t n = llistxattr(test_mnt_path(&M, "xl"), buf, sizeof(buf));
	ck_assert_ptr_nonnull(memmem(buf, n > 0 ? (size_t)n : 0, "trusted.mark", 13));
	int direct = lsetxattr(test_backing_path(&M, "xl"), "user.no", "1", 1, 0) == 0 ? 0 : errno;
	int through = lsetxattr(test_mnt_path(&M, "xl"), "user.no", "1", 1, 0) == 0 ? 0 : errno;
	ck_assert_int_eq(through, direct);
	ck_assert_int_eq(lremovexattr(test_mnt_path(&M, "xl"), "trusted.mark"), 0);
	ck_assert_int_eq(lgetxattr(test_backing_path(&M, "xl"), "trusted.mark", buf, sizeof(buf)), -1);
}
END_TEST

/* statx's birth time comes through (the kernel asks with FUSE_STATX) as the backing file has it. */
static void assert_statx_matches(const char *name, int fd)
{
	struct statx through, direct;
	unsigned int mask = STATX_BASIC_STATS | STATX_BTIME;
	if (fd >= 0)
		ck_assert_int_eq(statx(fd, "", AT_EMPTY_PATH, mask, &through), 0);
	else
		ck_assert_int_eq(statx(AT_FDCWD, test_mnt_path(&M, name), AT_SYMLINK_NOFOLLOW, mask, &through), 0);
	ck_assert_int_eq(statx(AT_FDCWD, test_backing_path(&M, name), AT_SYMLINK_NOFOLLOW, mask, &direct), 0);
	ck_assert_msg((through.stx_mask & STATX_BTIME) == (direct.stx_mask & STATX_BTIME),
		      "%s: birth time in the mask through the mount %d, in the backing file %d", name,
		      !!(through.stx_mask & STATX_BTIME), !!(direct.stx_mask & STATX_BTIME));
	if (direct.stx_mask & STATX_BTIME) {
		ck_assert_int_eq(through.stx_btime.tv_sec, direct.stx_btime.tv_sec);
		ck_assert_uint_eq(through.stx_btime.tv_nsec, direct.stx_btime.tv_nsec);
	}
	ck_assert_uint_eq(through.stx_ino, direct.stx_ino);
	ck_assert_uint_eq(through.stx_mode, direct.stx_mode);
	ck_assert_uint_eq(through.stx_size, direct.stx_size);
	ck_assert_uint_eq(through.stx_mask & STATX_BASIC_STATS, STATX_BASIC_STATS);
}

START_TEST(statx_shows_the_birth_time)
{
	test_write_file(test_mnt_path(&M, "bf"), "born");
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "bd"), 0755), 0);
	ck_assert_int_eq(symlink("bf", test_mnt_path(&M, "bl")), 0);
	const char *names[] = {"bf", "bd", "bl", "bf"}; /* bf again: from the kernel's cache */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		assert_statx_matches(names[i], -1);
	int fd = open(test_mnt_path(&M, "bf"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	assert_statx_matches("bf", fd);
	close(fd);
	struct statx gone;
	ck_assert_int_eq(statx(AT_FDCWD, test_mnt_path(&M, "none"), 0, STATX_BTIME, &gone), -1);
	ck_assert_int_eq(errno, ENOENT);
}
END_TEST

START_TEST(truncate_up_and_down)
{
	test_write_file(test_mnt_path(&M, "tr"), "0123456789");
	ck_assert_int_eq(truncate(test_mnt_path(&M, "tr"), 4), 0);
	ck_assert_str_eq(read_file(test_backing_path(&M, "tr")), "0123");
	ck_assert_int_eq(truncate(test_mnt_path(&M, "tr"), 100000), 0);
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&M, "tr"), &st), 0);
	ck_assert_int_eq(st.st_size, 100000);
	int fd = open(test_mnt_path(&M, "tr"), O_RDWR);
	ck_assert_int_ge(fd, 0);
	char c = 1;
	ck_assert_int_eq(pread(fd, &c, 1, 50000), 1);
	ck_assert_int_eq(c, 0);
	ck_assert_int_eq(ftruncate(fd, 2), 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, 2);
	close(fd);
}
END_TEST

START_TEST(sparse_seek_data_hole_and_4g_offsets)
{
	int fd = open(test_mnt_path(&M, "sparse"), O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	const off_t far = (off_t)5 << 30; /* beyond 4 GiB */
	char block[4096];
	memset(block, 'z', sizeof(block));
	ck_assert_int_eq(pwrite(fd, block, sizeof(block), far), (ssize_t)sizeof(block));
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_size, far + 4096);
	ck_assert_int_lt(st.st_blocks * 512, 1 << 20); /* still sparse */
	ck_assert_int_eq(lseek(fd, 0, SEEK_DATA), far);
	ck_assert_int_eq(lseek(fd, 0, SEEK_HOLE), 0);
	ck_assert_int_eq(lseek(fd, far, SEEK_HOLE), far + 4096);
	char back[4096];
	ck_assert_int_eq(pread(fd, back, sizeof(back), far), (ssize_t)sizeof(back));
	ck_assert_int_eq(memcmp(back, block, sizeof(block)), 0);
	ck_assert_int_eq(lseek(fd, far + 4096, SEEK_DATA), -1);
	ck_assert_int_eq(errno, ENXIO);
	close(fd);
	int bfd = open(test_backing_path(&M, "sparse"), O_RDONLY);
	ck_assert_int_eq(pread(bfd, back, sizeof(back), far), (ssize_t)sizeof(back));
	ck_assert_int_eq(memcmp(back, block, sizeof(block)), 0);
	close(bfd);
}
END_TEST

START_TEST(mmap_read_and_write)
{
	const size_t len = 3 * 4096;
	int fd = open(test_mnt_path(&M, "mm"), O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)len), 0);
	char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	for (size_t i = 0; i < len; i++)
		p[i] = (char)('a' + i % 26);
	ck_assert_int_eq(msync(p, len, MS_SYNC), 0);
	munmap(p, len);
	close(fd);
	int bfd = open(test_backing_path(&M, "mm"), O_RDONLY);
	char buf[3 * 4096];
	ck_assert_int_eq(read(bfd, buf, len), (ssize_t)len);
	close(bfd);
	for (size_t i = 0; i < len; i++)
		ck_assert_int_eq(buf[i], 'a' + i % 26);
	fd = open(test_mnt_path(&M, "mm"), O_RDONLY);
	p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
	ck_assert_ptr_ne(p, MAP_FAILED);
	ck_assert_int_eq(memcmp(p, buf, len), 0);
	munmap(p, len);
	close(fd);
}
END_TEST

START_TEST(o_direct_reads_and_writes)
{
	const size_t len = 1 << 20;
	char *buf = NULL, *back = NULL;
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, len), 0);
	ck_assert_int_eq(posix_memalign((void **)&back, 4096, len), 0);
	for (size_t i = 0; i < len; i++)
		buf[i] = (char)(i * 7 + 3);
	int fd = open(test_mnt_path(&M, "direct"), O_RDWR | O_CREAT | O_DIRECT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, len, 0), (ssize_t)len);
	ck_assert_int_eq(pwrite(fd, buf, 4096, 8192), 4096);
	ck_assert_int_eq(pread(fd, back, len, 0), (ssize_t)len);
	ck_assert_int_eq(memcmp(back, buf, 4096), 0);
	ck_assert_int_eq(memcmp(back + 8192, buf, 4096), 0);
	ck_assert_int_eq(memcmp(back + 12288, buf + 12288, len - 12288), 0);
	/* A read crossing EOF returns the bytes that exist. */
	ck_assert_int_eq(pread(fd, back, 8192, (off_t)len - 4096), 4096);
	close(fd);
	int bfd = open(test_backing_path(&M, "direct"), O_RDONLY);
	ck_assert_int_eq(pread(bfd, back, 4096, 12288), 4096);
	ck_assert_int_eq(memcmp(back, buf + 12288, 4096), 0);
	close(bfd);
	free(buf);
	free(back);
}
END_TEST

/* Writes asked to be durable by themselves (RWF_DSYNC, RWF_SYNC: the kernel
 * passes them in the write's flags) reach the backing file by every path
 * the daemon writes by: direct ones through its ring, large buffered ones
 * spliced, small ones copied. (That they are on the device when answered
 * no test here can see; engine_unit sees them billed as dsync writes.) */
START_TEST(writes_asked_durable_land)
{
	const size_t len = 1 << 20;
	char *buf = NULL, *back = NULL;
	ck_assert_int_eq(posix_memalign((void **)&buf, 4096, len), 0);
	ck_assert_int_eq(posix_memalign((void **)&back, 4096, len), 0);
	const char *names[2] = { "durable-direct", "durable-buffered" };
	for (int direct = 0; direct < 2; direct++) {
		const char *name = names[!direct];
		int fd = open(test_mnt_path(&M, name), O_RDWR | O_CREAT | (direct ? O_DIRECT : 0), 0644);
		ck_assert_int_ge(fd, 0);
		const int flags[2] = { RWF_DSYNC, RWF_SYNC };
		for (int k = 0; k < 2; k++) {
			for (size_t i = 0; i < len; i++)
				buf[i] = (char)(i * 13 + k * 5 + direct);
			struct iovec large = { .iov_base = buf, .iov_len = len };
			struct iovec small = { .iov_base = buf, .iov_len = 4096 };
			ck_assert_int_eq(pwritev2(fd, &large, 1, 0, flags[k]), (ssize_t)len);
			ck_assert_int_eq(pwritev2(fd, &small, 1, (off_t)len, flags[k]), 4096);
			int bfd = open(test_backing_path(&M, name), O_RDONLY);
			ck_assert_int_ge(bfd, 0);
			ck_assert_int_eq(pread(bfd, back, len, 0), (ssize_t)len);
			ck_assert_int_eq(memcmp(back, buf, len), 0);
			ck_assert_int_eq(pread(bfd, back, 4096, (off_t)len), 4096);
			ck_assert_int_eq(memcmp(back, buf, 4096), 0);
			close(bfd);
		}
		close(fd);
	}
	free(buf);
	free(back);
}
END_TEST

struct writer_arg {
	int fd;
	int id;
};

#define WRITERS 8
#define CHUNKS_PER_WRITER 64
#define CHUNK_BYTES 8192

static uint32_t chunk_pattern(int writer, int chunk, size_t i)
{
	return (uint32_t)(writer * 2654435761u + chunk * 40503u + i * 2246822519u);
}

static void *writer_thread(void *p)
{
	struct writer_arg *a = p;
	uint32_t buf[CHUNK_BYTES / 4];
	for (int c = 0; c < CHUNKS_PER_WRITER; c++) {
		for (size_t i = 0; i < CHUNK_BYTES / 4; i++)
			buf[i] = chunk_pattern(a->id, c, i);
		/* Interleave writers: chunk c of writer w lands at slot c*WRITERS+w. */
		off_t off = ((off_t)c * WRITERS + a->id) * CHUNK_BYTES;
		if (pwrite(a->fd, buf, CHUNK_BYTES, off) != CHUNK_BYTES)
			return (void *)1;
	}
	return NULL;
}

START_TEST(concurrent_writers_checksummed)
{
	int fd = open(test_mnt_path(&M, "concurrent"), O_RDWR | O_CREAT, 0644);
	ck_assert_int_ge(fd, 0);
	pthread_t t[WRITERS];
	struct writer_arg args[WRITERS];
	for (int w = 0; w < WRITERS; w++) {
		args[w] = (struct writer_arg){.fd = fd, .id = w};
		ck_assert_int_eq(pthread_create(&t[w], NULL, writer_thread, &args[w]), 0);
	}
	for (int w = 0; w < WRITERS; w++) {
		void *r;
		pthread_join(t[w], &r);
		ck_assert_ptr_null(r);
	}
	ck_assert_int_eq(fsync(fd), 0);
	close(fd);
	int bfd = open(test_backing_path(&M, "concurrent"), O_RDONLY);
	uint32_t buf[CHUNK_BYTES / 4];
	for (int c = 0; c < CHUNKS_PER_WRITER; c++)
		for (int w = 0; w < WRITERS; w++) {
			off_t off = ((off_t)c * WRITERS + w) * CHUNK_BYTES;
			ck_assert_int_eq(pread(bfd, buf, CHUNK_BYTES, off), CHUNK_BYTES);
			for (size_t i = 0; i < CHUNK_BYTES / 4; i++)
				ck_assert_uint_eq(buf[i], chunk_pattern(w, c, i));
		}
	close(bfd);
}
END_TEST

START_TEST(unlink_open_file)
{
	test_write_file(test_mnt_path(&M, "ul"), "still here");
	int fd = open(test_mnt_path(&M, "ul"), O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(unlink(test_mnt_path(&M, "ul")), 0);
	ck_assert_int_eq(access(test_backing_path(&M, "ul"), F_OK), -1);
	char buf[32] = {0};
	ck_assert_int_eq(pread(fd, buf, sizeof(buf), 0), 10);
	ck_assert_str_eq(buf, "still here");
	ck_assert_int_eq(pwrite(fd, "X", 1, 0), 1);
	ck_assert_int_eq(pread(fd, buf, 1, 0), 1);
	ck_assert_int_eq(buf[0], 'X');
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_nlink, 0);
	close(fd);
}
END_TEST

/*
 * O_TMPFILE makes an unnamed file in the directory (libfuse 3.14 leaves
 * FUSE_TMPFILE unanswered; the channel serves it as a CREATE); linking it
 * through /proc/self/fd names it, unless O_EXCL made it unlinkable.
 */
START_TEST(o_tmpfile_is_unnamed_until_linked)
{
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "tmpd"), 0755), 0);
	int fd = open(test_mnt_path(&M, "tmpd"), O_TMPFILE | O_RDWR, 0640);
	ck_assert_msg(fd >= 0, "O_TMPFILE: %s", strerror(errno));
	ck_assert_int_eq(write(fd, "unnamed", 7), 7);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_nlink, 0);
	ck_assert_int_eq(st.st_mode & 07777, 0640);
	ck_assert_int_eq(st.st_uid, getuid());
	DIR *d = opendir(test_backing_path(&M, "tmpd"));
	ck_assert_ptr_nonnull(d);
	int entries = 0;
	for (struct dirent *de; (de = readdir(d));)
		entries += strcmp(de->d_name, ".") && strcmp(de->d_name, "..");
	closedir(d);
	ck_assert_int_eq(entries, 0);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ck_assert_int_eq(linkat(AT_FDCWD, proc, AT_FDCWD, test_mnt_path(&M, "tmpd/named"),
				AT_SYMLINK_FOLLOW), 0);
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_int_eq(st.st_nlink, 1);
	close(fd);
	ck_assert_str_eq(read_file(test_backing_path(&M, "tmpd/named")), "unnamed");
	ck_assert_str_eq(read_file(test_mnt_path(&M, "tmpd/named")), "unnamed");

	fd = open(test_mnt_path(&M, "tmpd"), O_TMPFILE | O_RDWR | O_EXCL, 0600);
	ck_assert_int_ge(fd, 0);
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ck_assert_int_eq(linkat(AT_FDCWD, proc, AT_FDCWD, test_mnt_path(&M, "tmpd/never"),
				AT_SYMLINK_FOLLOW), -1);
	ck_assert_int_eq(errno, ENOENT);
	close(fd);
	ck_assert_int_eq(access(test_backing_path(&M, "tmpd/never"), F_OK), -1);
}
END_TEST

/* O_NOFOLLOW applies to the caller's path, which the kernel resolves: a
 * regular file opens, a symlink is ELOOP, as on the backing filesystem. */
START_TEST(o_nofollow_opens_files_not_symlinks)
{
	test_write_file(test_mnt_path(&M, "nf"), "plain");
	int fd = open(test_mnt_path(&M, "nf"), O_RDONLY | O_NOFOLLOW);
	ck_assert_msg(fd >= 0, "O_NOFOLLOW on a file: %s", strerror(errno));
	close(fd);
	fd = open(test_mnt_path(&M, "nf"), O_WRONLY | O_APPEND | O_NOFOLLOW);
	ck_assert_msg(fd >= 0, "O_NOFOLLOW for writing: %s", strerror(errno));
	ck_assert_int_eq(write(fd, "+", 1), 1);
	close(fd);
	ck_assert_str_eq(read_file(test_backing_path(&M, "nf")), "plain+");
	ck_assert_int_eq(symlink("nf", test_mnt_path(&M, "nf-link")), 0);
	ck_assert_int_eq(open(test_mnt_path(&M, "nf-link"), O_RDONLY | O_NOFOLLOW), -1);
	ck_assert_int_eq(errno, ELOOP);
}
END_TEST

static int inode_flags(const char *path, int *flags)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	int r = ioctl(fd, FS_IOC_GETFLAGS, flags) < 0 ? -errno : 0;
	close(fd);
	return r;
}

static int set_inode_flags(const char *path, int flags)
{
	int fd = open(path, O_RDONLY | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	int r = ioctl(fd, FS_IOC_SETFLAGS, &flags) < 0 ? -errno : 0;
	close(fd);
	return r;
}

/* lsattr and chattr through the mount read and set the backing file's
 * flags: no-atime set through the mount shows on the backing file, and an
 * immutable file refuses writes through the mount until it is cleared. */
START_TEST(inode_flags_pass_through)
{
	int backing, through;
	test_write_file(test_mnt_path(&M, "attr"), "data");
	if (inode_flags(test_backing_path(&M, "attr"), &backing) < 0) {
		fprintf(stderr, "skipped: the backing filesystem has no inode flags\n");
		return;
	}
	ck_assert_int_eq(inode_flags(test_mnt_path(&M, "attr"), &through), 0);
	ck_assert_int_eq(through, backing);
	ck_assert_int_eq(set_inode_flags(test_mnt_path(&M, "attr"), through | FS_NOATIME_FL), 0);
	ck_assert_int_eq(inode_flags(test_backing_path(&M, "attr"), &backing), 0);
	ck_assert(backing & FS_NOATIME_FL);
	ck_assert_int_eq(set_inode_flags(test_mnt_path(&M, "attr"), backing | FS_IMMUTABLE_FL), 0);
	ck_assert_int_eq(open(test_mnt_path(&M, "attr"), O_WRONLY | O_APPEND), -1);
	ck_assert_int_eq(errno, EPERM);
	ck_assert_int_eq(set_inode_flags(test_mnt_path(&M, "attr"), backing & ~FS_IMMUTABLE_FL), 0);
	int fd = open(test_mnt_path(&M, "attr"), O_WRONLY | O_APPEND);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "attr-dir"), 0755), 0);
	ck_assert_int_eq(inode_flags(test_backing_path(&M, "attr-dir"), &backing), 0);
	ck_assert_int_eq(inode_flags(test_mnt_path(&M, "attr-dir"), &through), 0);
	ck_assert_int_eq(through, backing);
}
END_TEST

START_TEST(errors_match_backing)
{
	struct { const char *rel; int flags; } cases[] = {
		{"missing/x", O_RDONLY}, {"missing", O_RDONLY},
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		errno = 0;
		ck_assert_int_eq(open(test_backing_path(&M, cases[i].rel), cases[i].flags), -1);
		int want = errno;
		errno = 0;
		ck_assert_int_eq(open(test_mnt_path(&M, cases[i].rel), cases[i].flags), -1);
		ck_assert_int_eq(errno, want);
	}
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "e_dir"), 0755), 0);
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "e_dir"), 0755), -1);
	ck_assert_int_eq(errno, EEXIST);
	test_write_file(test_mnt_path(&M, "e_dir/f"), "x");
	ck_assert_int_eq(rmdir(test_mnt_path(&M, "e_dir")), -1);
	ck_assert_int_eq(errno, ENOTEMPTY);
	ck_assert_int_eq(open(test_mnt_path(&M, "e_dir/f"), O_CREAT | O_EXCL | O_WRONLY, 0644), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(unlink(test_mnt_path(&M, "e_dir")), -1);
	ck_assert_int_eq(errno, EISDIR);
	ck_assert_int_eq(rmdir(test_mnt_path(&M, "e_dir/f")), -1);
	ck_assert_int_eq(errno, ENOTDIR);
	/* EXDEV: a rename out of the mount, and across a mount inside the backing directory. */
	ck_assert_int_eq(rename(test_mnt_path(&M, "e_dir/f"), test_backing_path(&M, "moved")), -1);
	ck_assert_int_eq(errno, EXDEV);
	ck_assert_int_eq(mkdir(test_backing_path(&M, "sub"), 0755), 0);
	ck_assert_int_eq(test_sh("mount -t tmpfs -o size=1m none '%s'", test_backing_path(&M, "sub")), 0);
	int rename_errno = rename(test_mnt_path(&M, "e_dir/f"), test_mnt_path(&M, "sub/f")) < 0 ? errno : 0;
	test_sh("umount -l '%s'", test_backing_path(&M, "sub"));
	ck_assert_int_eq(rename_errno, EXDEV);
}
END_TEST

START_TEST(special_files_and_devices)
{
	ck_assert_int_eq(mkfifo(test_mnt_path(&M, "fifo"), 0644), 0);
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&M, "fifo"), &st), 0);
	ck_assert(S_ISFIFO(st.st_mode));
	ck_assert_int_eq(mknod(test_mnt_path(&M, "sock"), S_IFSOCK | 0644, 0), 0);
	ck_assert_int_eq(lstat(test_backing_path(&M, "sock"), &st), 0);
	ck_assert(S_ISSOCK(st.st_mode));
	/* As on a nodev local filesystem: root (CAP_MKNOD) creates a device node, nobody opens it. */
	ck_assert_int_eq(mknod(test_mnt_path(&M, "null"), S_IFCHR | 0666, makedev(1, 3)), 0);
	ck_assert_int_eq(lstat(test_backing_path(&M, "null"), &st), 0);
	ck_assert(S_ISCHR(st.st_mode));
	ck_assert_uint_eq(st.st_rdev, makedev(1, 3));
	ck_assert_int_eq(open(test_mnt_path(&M, "null"), O_RDONLY), -1);
	ck_assert_int_eq(errno, EACCES);
}
END_TEST

START_TEST(readdir_large_and_forget)
{
	ck_assert_int_eq(mkdir(test_mnt_path(&M, "many"), 0755), 0);
	char name[64];
	for (int i = 0; i < 2000; i++) {
		snprintf(name, sizeof(name), "many/f%04d", i);
		int fd = open(test_mnt_path(&M, name), O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	DIR *d = opendir(test_mnt_path(&M, "many"));
	ck_assert_ptr_nonnull(d);
	int seen = 0, dots = 0;
	for (struct dirent *e; (e = readdir(d));) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			dots++;
		else
			seen++;
		if (seen == 1000) {
			/* telldir/seekdir round trip mid-stream. */
			long pos = telldir(d);
			seekdir(d, pos);
		}
	}
	closedir(d);
	ck_assert_int_eq(seen, 2000);
	ck_assert_int_eq(dots, 2);
	/* Every looked-up inode pins a descriptor; forgotten ones must close it. */
	int with_inodes = test_count_fds(M.daemon_pid);
	ck_assert_int_ge(with_inodes, 2000);
	sync();
	ck_assert_int_eq(test_sh("echo 2 > /proc/sys/vm/drop_caches"), 0);
	int after_forget = 0;
	for (int i = 0; i < 100; i++) {
		after_forget = test_count_fds(M.daemon_pid);
		if (after_forget < 1000)
			break;
		usleep(20000);
	}
	ck_assert_int_lt(after_forget, 1000);
}
END_TEST

START_TEST(locks_are_kernel_local)
{
	test_write_file(test_mnt_path(&M, "lk"), "x");
	int fd = open(test_mnt_path(&M, "lk"), O_RDWR);
	ck_assert_int_eq(flock(fd, LOCK_EX), 0);
	struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
	ck_assert_int_eq(fcntl(fd, F_SETLK, &fl), 0);
	pid_t pid = fork();
	if (pid == 0) {
		int fd2 = open(test_mnt_path(&M, "lk"), O_RDWR);
		int flock_blocked = flock(fd2, LOCK_EX | LOCK_NB) == -1 && errno == EWOULDBLOCK;
		struct flock fl2 = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 0, .l_len = 1};
		int posix_blocked = fcntl(fd2, F_SETLK, &fl2) == -1 && (errno == EAGAIN || errno == EACCES);
		_exit(flock_blocked && posix_blocked ? 0 : 1);
	}
	int status;
	waitpid(pid, &status, 0);
	ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	close(fd);
}
END_TEST

START_TEST(fallocate_copy_range_statfs)
{
	int fd = open(test_mnt_path(&M, "fa"), O_RDWR | O_CREAT, 0644);
	ck_assert_int_eq(fallocate(fd, 0, 0, 1 << 20), 0);
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&M, "fa"), &st), 0);
	ck_assert_int_eq(st.st_size, 1 << 20);
	ck_assert_int_ge(st.st_blocks * 512, 1 << 20);
	ck_assert_int_eq(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 1 << 19), 0);
	ck_assert_int_eq(lseek(fd, 0, SEEK_HOLE), 0);
	ck_assert_int_eq(pwrite(fd, "copyme", 6, 0), 6);
	int out = open(test_mnt_path(&M, "fa_copy"), O_RDWR | O_CREAT, 0644);
	loff_t in_off = 0, out_off = 10;
	ck_assert_int_eq(copy_file_range(fd, &in_off, out, &out_off, 6, 0), 6);
	char buf[16] = {0};
	ck_assert_int_eq(pread(out, buf, 6, 10), 6);
	ck_assert_str_eq(buf, "copyme");
	close(fd);
	close(out);
	struct statvfs a, b;
	ck_assert_int_eq(statvfs(M.mnt, &a), 0);
	ck_assert_int_eq(statvfs(M.backing, &b), 0);
	ck_assert_uint_eq(a.f_blocks * a.f_frsize, b.f_blocks * b.f_frsize);
}
END_TEST

static Suite *posix_suite(void)
{
	Suite *s = suite_create("fs_posix");
	TCase *tc = tcase_create("mount");
	/* First: its teardown runs last, after mount_down. */
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_unchecked_fixture(tc, mount_up, mount_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, files_and_directories);
	tcase_add_test(tc, writes_asked_durable_land);
	tcase_add_test(tc, times_now_and_omit);
	tcase_add_test(tc, symlinks_and_hard_links);
	tcase_add_test(tc, rename_variants);
	tcase_add_test(tc, xattrs);
	tcase_add_test(tc, truncate_up_and_down);
	tcase_add_test(tc, sparse_seek_data_hole_and_4g_offsets);
	tcase_add_test(tc, mmap_read_and_write);
	tcase_add_test(tc, o_direct_reads_and_writes);
	tcase_add_test(tc, concurrent_writers_checksummed);
	tcase_add_test(tc, unlink_open_file);
	tcase_add_test(tc, errors_match_backing);
	tcase_add_test(tc, special_files_and_devices);
	tcase_add_test(tc, readdir_large_and_forget);
	tcase_add_test(tc, locks_are_kernel_local);
	tcase_add_test(tc, o_tmpfile_is_unnamed_until_linked);
	tcase_add_test(tc, o_nofollow_opens_files_not_symlinks);
	tcase_add_test(tc, symlink_xattrs_are_the_links_own);
	tcase_add_test(tc, statx_shows_the_birth_time);
	tcase_add_test(tc, inode_flags_pass_through);
	tcase_add_test(tc, fallocate_copy_range_statfs);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("fs_posix", "FUSE mounts");
	SRunner *sr = srunner_create(posix_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
