/* Faults underneath and around the daemon: crashes, descriptor limits, broken backing stores. */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void write_all(const char *path, const char *data, bool do_fsync)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, data, strlen(data)), (ssize_t)strlen(data));
	if (do_fsync)
		ck_assert_int_eq(fsync(fd), 0);
	ck_assert_int_eq(close(fd), 0);
}

START_TEST(kill9_gives_enotconn_and_keeps_fsynced_data)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	write_all(test_mnt_path(&m, "durable"), "fsynced before the crash", true);
	ck_assert_int_eq(kill(m.daemon_pid, SIGKILL), 0);
	ck_assert_int_eq(waitpid(m.daemon_pid, NULL, 0), m.daemon_pid);
	m.daemon_pid = 0;
	/* The mount is still there but dead: callers get ENOTCONN at once, not a hang. */
	struct stat st;
	ck_assert_int_eq(stat(test_mnt_path(&m, "durable"), &st), -1);
	ck_assert_int_eq(errno, ENOTCONN);
	char buf[64] = {0};
	int fd = open(test_backing_path(&m, "durable"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_gt(read(fd, buf, sizeof(buf) - 1), 0);
	close(fd);
	ck_assert_str_eq(buf, "fsynced before the crash");
	/* The documented recovery: unmount the dead mount, mount again. */
	ck_assert_int_eq(test_sh("fusermount3 -u '%s'", m.mnt), 0);
	struct test_mount again = m;
	pid_t pid = fork();
	if (pid == 0) {
		execl(FUSESCHED_BIN, FUSESCHED_BIN, "mount", m.backing, m.mnt, "-f", (char *)NULL);
		_exit(127);
	}
	again.daemon_pid = pid;
	for (int i = 0; i < 500 && !test_is_fuse_mount(m.mnt); i++)
		usleep(10000);
	ck_assert(test_is_fuse_mount(m.mnt));
	fd = open(test_mnt_path(&again, "durable"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	close(fd);
	test_mount_require_clean_exit(test_mount_stop(&again));
}
END_TEST

START_TEST(descriptor_exhaustion_is_emfile_and_recovers)
{
	/* A daemon whose hard limit is low. */
	struct test_mount m;
	char limit_env[] = "FUSESCHED_TEST_NOFILE=200";
	putenv(limit_env);
	test_mount_start(&m, NULL);
	unsetenv("FUSESCHED_TEST_NOFILE");
	ck_assert_int_eq(mkdir(test_backing_path(&m, "tree"), 0755), 0);
	char rel[64];
	enum { FILES = 600 };
	for (int i = 0; i < FILES; i++) {
		snprintf(rel, sizeof(rel), "tree/f%d", i);
		int fd = open(test_backing_path(&m, rel), O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	/* Walking a tree three times the limit is fine: cached inodes hold no descriptor each. */
	for (int i = 0; i < FILES; i++) {
		snprintf(rel, sizeof(rel), "tree/f%d", i);
		struct stat st;
		ck_assert_msg(stat(test_mnt_path(&m, rel), &st) == 0, "stat %s: %s", rel, strerror(errno));
	}
	/* Open files do hold descriptors: past the limit callers get EMFILE/ENFILE. */
	int fds[FILES];
	int opened = 0, emfile = 0, other = 0;
	for (int i = 0; i < FILES; i++) {
		snprintf(rel, sizeof(rel), "tree/f%d", i);
		fds[i] = open(test_mnt_path(&m, rel), O_RDONLY);
		if (fds[i] >= 0)
			opened++;
		else if (errno == EMFILE || errno == ENFILE)
			emfile++;
		else
			other++;
	}
	ck_assert_int_gt(opened, 0);
	ck_assert_int_gt(emfile, 0);
	ck_assert_int_eq(other, 0);
	/* The daemon still serves what it can... */
	ck_assert(test_is_fuse_mount(m.mnt));
	for (int i = 0; i < FILES; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	/*
	 * ...and once the files are closed, the rest works again. The kernel
	 * sends RELEASE after close returns, so the descriptors come back shortly.
	 */
	int reopened = 0;
	for (int tries = 0; tries < 500 && reopened < 50; tries++) {
		snprintf(rel, sizeof(rel), "tree/f%d", FILES - 1 - reopened);
		int fd = open(test_mnt_path(&m, rel), O_RDONLY);
		if (fd >= 0) {
			close(fd);
			reopened++;
		} else {
			ck_assert_msg(errno == EMFILE || errno == ENFILE, "open %s: %s", rel, strerror(errno));
			usleep(10000);
		}
	}
	ck_assert_int_eq(reopened, 50);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* The daemon's descriptor limit in the next test, and what it keeps for nodes (half: src/fs/fs.c). */
#define PRUNE_NOFILE 1024
#define PRUNE_NODE_FDS (PRUNE_NOFILE / 2)
#define PRUNE_FILES 3000
#define WALKER_UID 2001
#define OTHER_UID 2002

struct files_job {
	const char *dir;
	int first, count;
};

/* Creates files first..first+count-1 in job->dir; the errno of the first failure, or 0. */
static int create_files(void *arg)
{
	const struct files_job *job = arg;
	char path[512];
	for (int i = job->first; i < job->first + job->count; i++) {
		snprintf(path, sizeof(path), "%s/f%d", job->dir, i);
		int fd = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
		if (fd < 0)
			return errno;
		char text[16];
		int len = snprintf(text, sizeof(text), "%d", i);
		bool ok = write(fd, text, (size_t)len) == len;
		close(fd);
		if (!ok)
			return EIO;
	}
	return 0;
}

/* Reads every file back; the errno of the first failure, EILSEQ for wrong content, or 0. */
static int read_files(void *arg)
{
	const struct files_job *job = arg;
	char path[512], text[16], want[16];
	for (int i = job->first; i < job->first + job->count; i++) {
		snprintf(path, sizeof(path), "%s/f%d", job->dir, i);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			return errno;
		ssize_t n = read(fd, text, sizeof(text) - 1);
		close(fd);
		if (n < 0)
			return EIO;
		text[n] = 0;
		snprintf(want, sizeof(want), "%d", i);
		if (strcmp(text, want) != 0)
			return EILSEQ;
	}
	return 0;
}

/*
 * A backing filesystem without file handles (here overlayfs, as FUSE ones
 * such as GlusterFS's client) costs the daemon a descriptor for every inode
 * the kernel caches. A user creating files past the daemon's descriptor
 * limit would leave every other user's lookups and creates with EMFILE
 * until the kernel forgot inodes (memory pressure); the daemon asks it to
 * forget the least recently used past half the limit instead, so the walk
 * and everyone else's work go on, and what was forgotten is found again.
 */
START_TEST(a_backing_without_handles_cannot_take_every_descriptor)
{
	if (!test_kernel_at_least(6, 18)) {
		fprintf(stderr, "note: kernel before 6.18 has no FUSE_NOTIFY_PRUNE; not tested\n");
		return;
	}
	/* The limit from the start (the daemon sizes its node bound then), not raised past it. */
	struct test_mount m;
	test_mount_start_nofile(&m, NULL, PRUNE_NOFILE);
	char ovl[400], overlay[400];
	snprintf(ovl, sizeof(ovl), "%s/ovl", m.root);
	snprintf(overlay, sizeof(overlay), "%s", test_backing_path(&m, "ov"));
	ck_assert_int_eq(test_sh("mkdir -p '%s/lower' '%s/upper' '%s/work' '%s'", ovl, ovl, ovl, overlay), 0);
	leftovers_add_mount(overlay);
	ck_assert_int_eq(test_sh("mount -t overlay overlay -o lowerdir='%s/lower',upperdir='%s/upper',"
				 "workdir='%s/work' '%s' && chmod 1777 '%s'",
				 ovl, ovl, ovl, overlay, overlay), 0);
	char dir[400];
	snprintf(dir, sizeof(dir), "%s", test_mnt_path(&m, "ov"));
	struct files_job walk = {.dir = dir, .first = 0, .count = PRUNE_FILES};
	int err = test_run_as(WALKER_UID, WALKER_UID, create_files, &walk);
	ck_assert_msg(err == 0, "creating %d files: %s", PRUNE_FILES, strerror(err));
	/* Its own descriptors, open files' and requests' apart, stay near the bound. */
	int fds = test_count_fds(m.daemon_pid);
	ck_assert_msg(fds <= PRUNE_NODE_FDS + 200, "daemon holds %d descriptors", fds);
	/* Another user creates and reads at once; the first user's files are all found again. */
	struct files_job other = {.dir = dir, .first = PRUNE_FILES, .count = 100};
	err = test_run_as(OTHER_UID, OTHER_UID, create_files, &other);
	ck_assert_msg(err == 0, "another user's creates: %s", strerror(err));
	ck_assert_int_eq(test_run_as(OTHER_UID, OTHER_UID, read_files, &other), 0);
	err = test_run_as(WALKER_UID, WALKER_UID, read_files, &walk);
	ck_assert_msg(err == 0, "reading the %d files back: %s", PRUNE_FILES, strerror(err));
	test_sh("umount -l '%s'", overlay);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

START_TEST(read_only_backing_gives_erofs)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	ck_assert_int_eq(mkdir(test_backing_path(&m, "ro"), 0755), 0);
	write_all(test_backing_path(&m, "ro/existing"), "old", false);
	leftovers_add_mount(test_backing_path(&m, "ro")); /* unmounted first if the test fails */
	ck_assert_int_eq(test_sh("mount --bind '%s' '%s' && mount -o remount,bind,ro '%s'",
				 test_backing_path(&m, "ro"), test_backing_path(&m, "ro"),
				 test_backing_path(&m, "ro")), 0);
	int fd = open(test_mnt_path(&m, "ro/new"), O_CREAT | O_WRONLY, 0644);
	int create_errno = fd < 0 ? errno : 0;
	fd = open(test_mnt_path(&m, "ro/existing"), O_WRONLY);
	int write_errno = fd < 0 ? errno : 0;
	char buf[8] = {0};
	fd = open(test_mnt_path(&m, "ro/existing"), O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
	if (fd >= 0)
		close(fd);
	test_sh("umount -l '%s'", test_backing_path(&m, "ro"));
	ck_assert_int_eq(create_errno, EROFS);
	ck_assert_int_eq(write_errno, EROFS);
	ck_assert_int_eq(n, 3);
	ck_assert_str_eq(buf, "old");
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

START_TEST(backing_directory_removed_underneath)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	ck_assert_int_eq(mkdir(test_mnt_path(&m, "gone"), 0755), 0);
	write_all(test_mnt_path(&m, "gone/f"), "x", false);
	int dfd = open(test_mnt_path(&m, "gone"), O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	/* Someone removes the directory on the backing side, behind the daemon's back. */
	ck_assert_int_eq(test_sh("rm -rf '%s'", test_backing_path(&m, "gone")), 0);
	ck_assert_int_eq(openat(dfd, "new", O_CREAT | O_WRONLY, 0644), -1);
	ck_assert_int_eq(errno, ENOENT);
	close(dfd);
	/* Once the kernel's entry cache (1 s) expires, the name is gone for callers too. */
	struct stat st;
	int r = 0;
	for (int i = 0; i < 100 && (r = stat(test_mnt_path(&m, "gone/f"), &st)) == 0; i++)
		usleep(50000);
	ck_assert_int_eq(r, -1);
	ck_assert_int_eq(errno, ENOENT);
	/* Renaming the backing root itself: the daemon keeps serving through its descriptor. */
	char moved[600];
	snprintf(moved, sizeof(moved), "%s/moved", m.root);
	ck_assert_int_eq(rename(m.backing, moved), 0);
	write_all(test_mnt_path(&m, "after-rename"), "still served", false);
	snprintf(moved, sizeof(moved), "%s/moved/after-rename", m.root);
	ck_assert_int_eq(access(moved, F_OK), 0);
	snprintf(moved, sizeof(moved), "%s/moved", m.root);
	ck_assert_int_eq(rename(moved, m.backing), 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

static Suite *faults_suite(void)
{
	Suite *s = suite_create("faults");
	TCase *tc = tcase_create("faults");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, kill9_gives_enotconn_and_keeps_fsynced_data);
	tcase_add_test(tc, descriptor_exhaustion_is_emfile_and_recovers);
	tcase_add_test(tc, a_backing_without_handles_cannot_take_every_descriptor);
	tcase_add_test(tc, read_only_backing_gives_erofs);
	tcase_add_test(tc, backing_directory_removed_underneath);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("faults", "FUSE mounts");
	SRunner *sr = srunner_create(faults_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
