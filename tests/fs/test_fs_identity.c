/*
 * Node identity through a real mount when the backing filesystem reuses
 * inode numbers. One user keeps deleted files alive in the kernel (O_PATH
 * opens through the mount) while the daemon's descriptor cache lets go of
 * them, so the backing filesystem frees their inode numbers and hands them
 * to another user's new files. Those files must be nodes of their own:
 * created, written and read back without ESTALE.
 */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#define HOLDER_UID 2001
#define WRITER_UID 2002
/* The daemon's descriptor limit: its cache lets go of nodes after about a hundred. */
#define DAEMON_NOFILE 128
/* ...and once the held files' numbers are free: the writer's files need no eviction. */
#define DAEMON_NOFILE_LIFTED 8192
#define HELD_FILES 150
#define LOOKUP_FILES 400
/*
 * The writer writes until this many of its files got a held file's number.
 * Other processes on the filesystem free and take numbers too, so how many
 * files that takes varies; bounded by WRITTEN_FILES_MAX.
 */
#define REUSES_WANTED 50
#define WRITTEN_FILES_MAX 3000

static struct test_mount M;

/*
 * Sets the running daemon's soft descriptor limit. Only the soft one
 * (unlike FUSESCHED_TEST_NOFILE), so that the test can lift it again
 * without CAP_SYS_RESOURCE.
 */
static void daemon_fd_limit(rlim_t soft)
{
	struct rlimit limit;
	ck_assert_int_eq(prlimit(M.daemon_pid, RLIMIT_NOFILE, NULL, &limit), 0);
	ck_assert_uint_ge(limit.rlim_max, DAEMON_NOFILE_LIFTED);
	limit.rlim_cur = soft;
	ck_assert_int_eq(prlimit(M.daemon_pid, RLIMIT_NOFILE, &limit, NULL), 0);
}

static void mount_up(void)
{
	test_mount_start(&M, NULL);
	daemon_fd_limit(DAEMON_NOFILE);
}

static void mount_down(void)
{
	test_mount_require_clean_exit(test_mount_stop(&M));
}

/* Shared between the test and the users' processes (test_run_as forks). */
struct identity_run {
	int ready[2];               /* the holder writes a byte once its files are evicted */
	int release[2];             /* closed by the test when the holder may let go */
	ino_t held_ino[HELD_FILES];
	int held;                   /* held_ino entries filled */
	int holder_errno;           /* test_run_as's result for the holder */
	int written;                /* files the writer tried */
	int writer_estale;
	int writer_other;           /* failures other than ESTALE */
	char first_other[160];
	int reused;                 /* written files that got a held file's inode number */
};

static struct identity_run *run;

static void record_failure(const char *what, int err)
{
	if (err == ESTALE) {
		run->writer_estale++;
		return;
	}
	if (run->writer_other++ == 0)
		snprintf(run->first_other, sizeof(run->first_other), "%s: %s", what, strerror(err));
}

/*
 * Holder: creates files and keeps them with O_PATH opens (the kernel keeps
 * their nodes), deletes them, then looks up enough other files that the
 * daemon evicts the deleted files' descriptors, which frees their inode
 * numbers. Lookups rather than creates, so that the freed numbers are left
 * for the writer. Holds on until released.
 */
static int hold_deleted_files(void *arg)
{
	(void)arg;
	close(run->release[1]); /* so that the test's close is the end of the pipe */
	int held_fds[HELD_FILES];
	char rel[64];
	for (int i = 0; i < HELD_FILES; i++) {
		snprintf(rel, sizeof(rel), "held%d", i);
		int fd = open(test_mnt_path(&M, rel), O_CREAT | O_EXCL | O_WRONLY, 0644);
		if (fd < 0)
			return errno;
		close(fd); /* its FLUSH may meet the daemon at its limit; the file is there anyway */
		held_fds[i] = open(test_mnt_path(&M, rel), O_PATH);
		struct stat st;
		if (held_fds[i] < 0 || fstat(held_fds[i], &st) < 0)
			return errno;
		run->held_ino[run->held++] = st.st_ino;
	}
	for (int i = 0; i < HELD_FILES; i++) {
		snprintf(rel, sizeof(rel), "held%d", i);
		if (unlink(test_mnt_path(&M, rel)) < 0)
			return errno;
	}
	for (int i = 0; i < LOOKUP_FILES; i++) {
		snprintf(rel, sizeof(rel), "lookup/f%d", i);
		struct stat st;
		if (stat(test_mnt_path(&M, rel), &st) < 0)
			return errno;
	}
	char byte = 1;
	if (write(run->ready[1], &byte, 1) != 1)
		return errno;
	if (read(run->release[0], &byte, 1) < 0) /* EOF: released */
		return errno;
	return 0;
}

static void *holder_thread(void *arg)
{
	(void)arg;
	run->holder_errno = test_run_as(HOLDER_UID, HOLDER_UID, hold_deleted_files, NULL);
	close(run->ready[1]); /* wakes the test even if the holder failed early */
	return NULL;
}

static bool was_held(ino_t ino)
{
	for (int i = 0; i < run->held; i++)
		if (run->held_ino[i] == ino)
			return true;
	return false;
}

/* Creates, writes and reads back one file as a shell's `>` would; false with the failure recorded. */
static bool write_and_read_back(const char *rel, const char *text)
{
	int fd = open(test_mnt_path(&M, rel), O_CREAT | O_TRUNC | O_WRONLY, 0644);
	int open_errno = errno;
	/* Counted whether or not the create worked: the backing file exists either way. */
	struct stat st;
	if (stat(test_backing_path(&M, rel), &st) == 0 && was_held(st.st_ino))
		run->reused++;
	if (fd < 0) {
		record_failure("create", open_errno);
		return false;
	}
	bool ok = write(fd, text, strlen(text)) == (ssize_t)strlen(text);
	if (!ok)
		record_failure("write", errno);
	if (close(fd) < 0 && ok) {
		record_failure("close", errno);
		ok = false;
	}
	if (!ok)
		return false;
	char buf[64] = {0};
	fd = open(test_mnt_path(&M, rel), O_RDONLY);
	if (fd < 0 || read(fd, buf, sizeof(buf) - 1) < 0) {
		record_failure("read back", errno);
		if (fd >= 0)
			close(fd);
		return false;
	}
	close(fd);
	if (strcmp(buf, text) != 0) {
		record_failure("read back: other content", EIO);
		return false;
	}
	return true;
}

static int write_new_files(void *arg)
{
	(void)arg;
	char rel[64], text[64];
	while (run->reused < REUSES_WANTED && run->written < WRITTEN_FILES_MAX) {
		int i = run->written++;
		snprintf(rel, sizeof(rel), "written%d", i);
		snprintf(text, sizeof(text), "file %d of user %d", i, WRITER_UID);
		write_and_read_back(rel, text);
	}
	return 0;
}

/* The daemon's descriptors on held files, which are all deleted by now. */
static int daemon_fds_on_held_files(void)
{
	char dir[64];
	snprintf(dir, sizeof(dir), "/proc/%d/fd", (int)M.daemon_pid);
	DIR *d = opendir(dir);
	ck_assert_ptr_nonnull(d);
	int n = 0;
	for (struct dirent *e; (e = readdir(d));) {
		char link[600] = {0};
		if (readlinkat(dirfd(d), e->d_name, link, sizeof(link) - 1) > 0 &&
		    strstr(link, "/held") && strstr(link, " (deleted)"))
			n++;
	}
	closedir(d);
	return n;
}

/* Files the holder looks up: made on the backing side, before the held ones get numbers. */
static void make_lookup_files(void)
{
	ck_assert_int_eq(mkdir(test_backing_path(&M, "lookup"), 0755), 0);
	char rel[64];
	for (int i = 0; i < LOOKUP_FILES; i++) {
		snprintf(rel, sizeof(rel), "lookup/f%d", i);
		int fd = open(test_backing_path(&M, rel), O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
}

START_TEST(reused_inode_numbers_do_not_break_other_users_files)
{
	run = mmap(NULL, sizeof(*run), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(run, MAP_FAILED);
	memset(run, 0, sizeof(*run));
	ck_assert_int_eq(pipe2(run->ready, O_CLOEXEC), 0);
	ck_assert_int_eq(pipe2(run->release, O_CLOEXEC), 0);
	make_lookup_files();

	pthread_t holder;
	ck_assert_int_eq(pthread_create(&holder, NULL, holder_thread, NULL), 0);
	char byte;
	bool holding = read(run->ready[0], &byte, 1) == 1;
	int evicted_but = holding ? daemon_fds_on_held_files() : 0;
	/*
	 * The writer's files need no eviction, and every close needs a
	 * descriptor to spare (FLUSH dups one), which a daemon kept at its
	 * limit by the cache may not have.
	 */
	if (holding && evicted_but == 0) {
		daemon_fd_limit(DAEMON_NOFILE_LIFTED);
		ck_assert_int_eq(test_run_as(WRITER_UID, WRITER_UID, write_new_files, NULL), 0);
	}
	close(run->release[1]);
	pthread_join(holder, NULL);
	ck_assert_msg(holding && run->holder_errno == 0, "holder failed: %s",
		      strerror(run->holder_errno));
	/* Our side of the scenario: the deleted files' inodes are free to be reused. */
	ck_assert_msg(evicted_but == 0, "the daemon still holds %d deleted held files",
		      evicted_but);

	ck_assert_msg(run->writer_estale == 0,
		      "%d of %d new files of user %d failed with ESTALE (%d got a deleted "
		      "file's inode number)",
		      run->writer_estale, run->written, WRITER_UID, run->reused);
	ck_assert_msg(run->writer_other == 0, "%d of %d new files failed, the first: %s",
		      run->writer_other, run->written, run->first_other);
	/* The filesystem's side: it decides whether a freed number comes back. */
	if (run->reused == 0)
		fprintf(stderr, "reused_inode_numbers_do_not_break_other_users_files: SKIPPED: "
			"the backing filesystem of %s gave none of %d new files a freed "
			"inode number\n", M.backing, run->written);
	munmap(run, sizeof(*run));
}
END_TEST

static Suite *identity_suite(void)
{
	Suite *s = suite_create("fs_identity");
	TCase *tc = tcase_create("mount");
	/* First: its teardown runs last, after mount_down. */
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(tc, mount_up, mount_down);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, reused_inode_numbers_do_not_break_other_users_files);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("fs_identity", "FUSE mounts, other users' credentials");
	SRunner *sr = srunner_create(identity_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
