/*
 * Data operations run with the opener's credentials: the root reserve of
 * an ext4 backing stops an unprivileged user through the mount where it
 * stops the same user writing to the ext4 directly.
 *
 * Each test makes an ext4 image with 20% of its blocks reserved for root,
 * loop-mounts it, mounts fusesched over a directory in it, and fills the
 * disk as the user twice, from the same free space: directly, then through
 * the mount. A daemon whose data operations run as root (fsuid 0, ext4's
 * default resuid, or with CAP_SYS_RESOURCE) fills the reserve too, and the
 * two stops are the whole reserve apart.
 *
 * Within one block: both fills run as the same user, with the same
 * operation sizes, from the same free space, and ext4 decides at each
 * allocation whether the user may have it (free - dirty - reserved >=
 * wanted). Where the two can differ is an extent-tree block, allocated
 * when the written data is flushed, and the flushes come at other times
 * through the daemon: such a block takes free space from the user's side.
 */
#include "leftovers.h"
#include "loop_fs.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define USER_UID 2001
#define USER_GID 2001

/* Small enough that each fill takes well under a second, large enough that 20% is many blocks. */
#define IMAGE_MIB 64
#define RESERVED_PERCENT "20"
#define MKFS_OPTIONS "-m " RESERVED_PERCENT " -b 4096"
#define WRITE_BYTES (64 * 1024)
#define COPY_CHUNK_BYTES (1024 * 1024)
#define COPY_SOURCE_BYTES (8LL * 1024 * 1024)
/* A fill that got this far never ran out: more than the whole disk. */
#define FILL_LIMIT_BYTES (2LL * IMAGE_MIB * 1024 * 1024)
/* Freed space comes back once the daemon forgets the unlinked file (asynchronous) and syncfs commits. */
#define FREE_SPACE_BACK_WAIT_MS 10000

static struct loop_fs ext4;
static struct test_mount M;
static char backing_dir[400];
static unsigned long long block_bytes;
static unsigned long long free_blocks_at_start; /* root's view, before any fill */
static unsigned long long user_free_blocks_at_start;

static struct statvfs ext4_statvfs(void)
{
	struct statvfs sv;
	ck_assert_int_eq(statvfs(ext4.mnt, &sv), 0);
	return sv;
}

static void ext4_syncfs(void)
{
	int fd = open(ext4.mnt, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(syncfs(fd), 0);
	close(fd);
}

static void make_file(const char *path, long long size_bytes)
{
	static char chunk[COPY_CHUNK_BYTES];
	memset(chunk, 'c', sizeof(chunk));
	int fd = open(path, O_CREAT | O_WRONLY | O_EXCL, 0644);
	ck_assert_int_ge(fd, 0);
	for (long long done = 0; done < size_bytes; done += sizeof(chunk))
		ck_assert_int_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	close(fd);
}

/* The daemon's extra arguments: NULL, or every data request through the ring. */
static const char *const *mount_args;

static void setup(void)
{
	loop_fs_make_ext4(&ext4, IMAGE_MIB, MKFS_OPTIONS);
	/* The backing is a directory of the ext4, root's; the user writes in a directory of its own. */
	snprintf(backing_dir, sizeof(backing_dir), "%s/backing", ext4.mnt);
	ck_assert_int_eq(mkdir(backing_dir, 0755), 0);
	char user_dir[450];
	snprintf(user_dir, sizeof(user_dir), "%s/user", backing_dir);
	ck_assert_int_eq(mkdir(user_dir, 0755), 0);
	ck_assert_int_eq(chown(user_dir, USER_UID, USER_GID), 0);
	/* Root's, made before any fill: it takes the same space for every measurement. */
	char copy_source[450];
	snprintf(copy_source, sizeof(copy_source), "%s/source", backing_dir);
	make_file(copy_source, COPY_SOURCE_BYTES);
	test_mount_start_with_backing(&M, backing_dir, mount_args);
	ext4_syncfs();
	struct statvfs sv = ext4_statvfs();
	block_bytes = sv.f_frsize;
	free_blocks_at_start = sv.f_bfree;
	user_free_blocks_at_start = sv.f_bavail;
}

/* Writes through io_uring with the opener's ring personality, not by a worker. */
static void setup_uring_only(void)
{
	static const char *const uring_only[] = {"-o", "uring_only", NULL};
	mount_args = uring_only;
	setup();
}

static void teardown(void)
{
	test_mount_require_clean_exit(test_mount_stop(&M));
	ck_assert_msg(loop_fs_remove(&ext4) == 0, "the ext4 was still busy after the daemon exited");
}

/* A fill, run as the user in a child: it fills PATH until the disk refuses. */
struct fill_job;
/* Returns the errno the fill stopped with, 0 if it never did. */
typedef int fill_fn(const struct fill_job *job);
struct fill_job {
	fill_fn *fn;
	const char *path;   /* the file to fill, made by the fill */
	const char *source; /* copy_file_range's source */
};

static int write_until_full(int fd, const char *buf)
{
	for (long long done = 0; done < FILL_LIMIT_BYTES;) {
		ssize_t n = write(fd, buf, WRITE_BYTES);
		if (n < 0)
			return errno;
		done += n;
	}
	return 0;
}

static int fill_buffered(const struct fill_job *job)
{
	static char buf[WRITE_BYTES];
	memset(buf, 'b', sizeof(buf));
	int fd = open(job->path, O_CREAT | O_WRONLY | O_EXCL, 0644);
	if (fd < 0)
		return errno;
	int err = write_until_full(fd, buf);
	close(fd);
	return err;
}

static int fill_direct(const struct fill_job *job)
{
	void *buf;
	if (posix_memalign(&buf, 4096, WRITE_BYTES) != 0)
		return ENOMEM;
	memset(buf, 'd', WRITE_BYTES);
	int fd = open(job->path, O_CREAT | O_WRONLY | O_EXCL | O_DIRECT, 0644);
	if (fd < 0)
		return errno;
	int err = write_until_full(fd, buf);
	close(fd);
	free(buf);
	return err;
}

static int fill_fallocate(const struct fill_job *job)
{
	int fd = open(job->path, O_CREAT | O_WRONLY | O_EXCL, 0644);
	if (fd < 0)
		return errno;
	int err = fallocate(fd, 0, 0, FILL_LIMIT_BYTES) < 0 ? errno : 0;
	close(fd);
	return err;
}

static int fill_copy_range(const struct fill_job *job)
{
	int in = open(job->source, O_RDONLY);
	if (in < 0)
		return errno;
	int out = open(job->path, O_CREAT | O_WRONLY | O_EXCL, 0644);
	if (out < 0) {
		close(in);
		return errno;
	}
	int err = 0;
	loff_t in_offset_bytes = 0;
	for (long long done = 0; done < FILL_LIMIT_BYTES;) {
		ssize_t n = copy_file_range(in, &in_offset_bytes, out, NULL, COPY_CHUNK_BYTES, 0);
		if (n < 0) {
			err = errno;
			break;
		}
		if (n == 0) /* the source's end: again from its start */
			in_offset_bytes = 0;
		done += n;
	}
	close(out);
	close(in);
	return err;
}

static int run_fill(void *arg)
{
	const struct fill_job *job = arg;
	return job->fn(job);
}

enum measure { MEASURE_SIZE_BYTES, MEASURE_ALLOCATED_BYTES };

/*
 * Fills user/fill under ROOT (the backing directory, or the mount over it)
 * as the user, from the free space at the start, and returns how far it
 * got as the ext4 sees the file: its size, or the bytes allocated to it.
 * Then removes it through ROOT and waits for the free space to be back.
 */
static long long fill_as_user(const char *what, fill_fn *fn, enum measure measure, const char *root)
{
	char path[500], source[500], backing_path[500];
	snprintf(path, sizeof(path), "%s/user/fill", root);
	snprintf(source, sizeof(source), "%s/source", root);
	snprintf(backing_path, sizeof(backing_path), "%s/user/fill", backing_dir);
	ext4_syncfs();
	unsigned long long free_blocks = ext4_statvfs().f_bfree;
	ck_assert_msg(free_blocks == free_blocks_at_start,
		      "%s: the fill would start from %llu free blocks, not %llu", what, free_blocks,
		      free_blocks_at_start);

	struct fill_job job = {fn, path, source};
	int err = test_run_as(USER_UID, USER_GID, run_fill, &job);
	ck_assert_msg(err == ENOSPC, "%s stopped with %s, not ENOSPC", what, err ? strerror(err) : "no error");
	struct stat st;
	ck_assert_int_eq(stat(backing_path, &st), 0);
	ck_assert_int_eq(st.st_uid, USER_UID);
	long long reached =
		measure == MEASURE_SIZE_BYTES ? (long long)st.st_size : (long long)st.st_blocks * 512;

	ck_assert_int_eq(unlink(path), 0);
	for (int waited_ms = 0; waited_ms < FREE_SPACE_BACK_WAIT_MS; waited_ms += 10) {
		ext4_syncfs();
		free_blocks = ext4_statvfs().f_bfree;
		if (free_blocks == free_blocks_at_start)
			break;
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
	ck_assert_msg(free_blocks == free_blocks_at_start,
		      "%s: %llu blocks free after removing the file, %llu before the fill", what, free_blocks,
		      free_blocks_at_start);
	return reached;
}

static void user_stops_at_the_reserve_as_directly(const char *what, fill_fn *fn, enum measure measure)
{
	long long direct_bytes = fill_as_user(what, fn, measure, backing_dir);
	char through_what[200];
	snprintf(through_what, sizeof(through_what), "%s through the mount", what);
	long long through_bytes = fill_as_user(through_what, fn, measure, M.mnt);

	long long free_bytes = (long long)(free_blocks_at_start * block_bytes);
	long long user_free_bytes = (long long)(user_free_blocks_at_start * block_bytes);
	/* Root's 20% and ext4's own small reserve for metadata, which root cannot have either. */
	long long reserved_bytes = free_bytes - user_free_bytes;
	fprintf(stderr,
		"fs_creds: %s: the user got %lld bytes directly, %lld through the mount "
		"(free: %lld bytes for root, %lld for the user; block %llu bytes)\n",
		what, direct_bytes, through_bytes, free_bytes, user_free_bytes, block_bytes);
	/* The baseline must show a reserve, or the comparison below would prove nothing. */
	ck_assert_msg(direct_bytes >= user_free_bytes / 2,
		      "%s: the user stopped after %lld bytes directly, of %lld free to it", what, direct_bytes,
		      user_free_bytes);
	ck_assert_msg(direct_bytes + reserved_bytes / 2 <= free_bytes,
		      "%s: the user got %lld bytes directly of %lld free: the reserve (%lld bytes) did not keep it "
		      "out",
		      what, direct_bytes, free_bytes, reserved_bytes);
	ck_assert_msg(llabs(through_bytes - direct_bytes) <= (long long)block_bytes,
		      "%s: the user got %lld bytes through the mount, %lld directly: %lld bytes apart, "
		      "more than a block (%llu); %lld bytes are reserved",
		      what, through_bytes, direct_bytes, through_bytes - direct_bytes, block_bytes,
		      reserved_bytes);
}

START_TEST(buffered_writes_stop_at_the_root_reserve_as_directly)
{
	user_stops_at_the_reserve_as_directly("buffered 64 KiB writes", fill_buffered, MEASURE_SIZE_BYTES);
}
END_TEST

START_TEST(direct_writes_stop_at_the_root_reserve_as_directly)
{
	user_stops_at_the_reserve_as_directly("O_DIRECT 64 KiB writes", fill_direct, MEASURE_SIZE_BYTES);
}
END_TEST

START_TEST(fallocate_stops_at_the_root_reserve_as_directly)
{
	/* A failed fallocate keeps what it allocated: the blocks say how far it got. */
	user_stops_at_the_reserve_as_directly("fallocate of more than the disk", fill_fallocate,
					      MEASURE_ALLOCATED_BYTES);
}
END_TEST

START_TEST(copy_file_range_stops_at_the_root_reserve_as_directly)
{
	user_stops_at_the_reserve_as_directly("copy_file_range of 1 MiB chunks", fill_copy_range,
					      MEASURE_SIZE_BYTES);
}
END_TEST

int main(void)
{
	test_require_root("fs_creds", "a loop device, FUSE mounts, other users' credentials");
	char why[200];
	if (!loop_fs_available(why, sizeof(why))) {
		printf("SKIP: fs_creds: %s\n", why);
		return 77;
	}
	if (access("/dev/fuse", R_OK | W_OK) != 0) {
		printf("SKIP: fs_creds: needs /dev/fuse\n");
		return 77;
	}
	Suite *s = suite_create("fs_creds");
	TCase *tc = tcase_create("root_reserve");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, buffered_writes_stop_at_the_root_reserve_as_directly);
	tcase_add_test(tc, direct_writes_stop_at_the_root_reserve_as_directly);
	tcase_add_test(tc, fallocate_stops_at_the_root_reserve_as_directly);
	tcase_add_test(tc, copy_file_range_stops_at_the_root_reserve_as_directly);
	suite_add_tcase(s, tc);
	TCase *ring = tcase_create("root_reserve_uring_only");
	tcase_add_unchecked_fixture(ring, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(ring, setup_uring_only, teardown);
	tcase_set_timeout(ring, 60);
	tcase_add_test(ring, buffered_writes_stop_at_the_root_reserve_as_directly);
	tcase_add_test(ring, direct_writes_stop_at_the_root_reserve_as_directly);
	suite_add_tcase(s, ring);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
