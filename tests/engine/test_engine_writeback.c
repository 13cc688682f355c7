/*
 * -o writeback_cache: the kernel caches writes and flushes them later with
 * pid 0. The data must arrive intact, and the flushed bytes must be charged
 * to the tenant that opened the file, not to the default tenant.
 */
#include "ctl_test_util.h"
#include "leftovers.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITE_BYTES (8u << 20)

START_TEST(flushed_writes_are_charged_to_the_opener)
{
	char name[64], cgroup[80];
	snprintf(name, sizeof(name), "wb-test-%d", (int)getpid());
	snprintf(cgroup, sizeof(cgroup), "/%s", name);
	ctl_test_cgroup_make(CG_V2, cgroup);
	const char *args[] = {"-o", "writeback_cache", NULL};
	struct test_mount m;
	test_mount_start(&m, args);
	int go[2];
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork();
	if (pid == 0) {
		char c;
		close(go[1]);
		if (read(go[0], &c, 1) != 1) /* opens only once it is in the cgroup */
			_exit(3);
		/* Buffered writes in small pieces: the kernel merges and flushes them itself. */
		int fd = open(test_mnt_path(&m, "wb"), O_CREAT | O_WRONLY | O_TRUNC, 0644);
		static char chunk[4096];
		for (unsigned i = 0; fd >= 0 && i < WRITE_BYTES / sizeof(chunk); i++) {
			memset(chunk, (int)('a' + i % 26), sizeof(chunk));
			if (write(fd, chunk, sizeof(chunk)) != (ssize_t)sizeof(chunk))
				_exit(1);
		}
		_exit(fd >= 0 && fsync(fd) == 0 && close(fd) == 0 ? 0 : 2);
	}
	close(go[0]);
	ctl_test_cgroup_move(CG_V2, cgroup, pid);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	close(go[1]);
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	int64_t written = -1;
	CTL_TEST_POLL((written = ctl_test_tenant_u64(m.mnt, cgroup, "bytes.write")) >= (int64_t)WRITE_BYTES);
	ck_assert_int_ge(written, (int64_t)WRITE_BYTES);
	/* Data check on the backing side. */
	int fd = open(test_backing_path(&m, "wb"), O_RDONLY);
	ck_assert_int_ge(fd, 0);
	static char back[4096];
	for (unsigned i = 0; i < WRITE_BYTES / sizeof(back); i++) {
		ck_assert_int_eq(read(fd, back, sizeof(back)), (ssize_t)sizeof(back));
		ck_assert_int_eq(back[0], 'a' + i % 26);
		ck_assert_int_eq(back[sizeof(back) - 1], 'a' + i % 26);
	}
	close(fd);
	test_mount_require_clean_exit(test_mount_stop(&m));
	ctl_test_cgroups_cleanup();
}
END_TEST

/*
 * The kernel writes its cached pages back through any writable open file
 * of the inode, one opened O_DIRECT included, and the last page ends where
 * the file does: opening the file O_DIRECT and writing through it (which
 * first writes back what is cached) must not fail on that unaligned tail,
 * and every byte of both must arrive.
 */
START_TEST(writeback_through_a_direct_open_file)
{
	const char *args[] = {"-o", "writeback_cache", NULL};
	struct test_mount m;
	test_mount_start(&m, args);
	enum { CACHED_AT = 111421, CACHED_BYTES = 71680 };
	static char cached[CACHED_BYTES];
	memset(cached, 'c', sizeof(cached));
	int fd = open(test_mnt_path(&m, "mixed"), O_CREAT | O_RDWR, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, cached, sizeof(cached), CACHED_AT), (ssize_t)sizeof(cached));
	int dfd = open(test_mnt_path(&m, "mixed"), O_RDWR | O_DIRECT);
	ck_assert_int_ge(dfd, 0);
	char *block;
	ck_assert_int_eq(posix_memalign((void **)&block, 4096, 4096), 0);
	memset(block, 'd', 4096);
	ck_assert_msg(pwrite(dfd, block, 4096, 0) == 4096, "direct write: %s", strerror(errno));
	ck_assert_int_eq(fsync(dfd), 0);
	close(dfd);
	close(fd);
	free(block);
	int bfd = open(test_backing_path(&m, "mixed"), O_RDONLY);
	ck_assert_int_ge(bfd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(bfd, &st), 0);
	ck_assert_int_eq(st.st_size, CACHED_AT + CACHED_BYTES);
	static char back[CACHED_AT + CACHED_BYTES];
	ck_assert_int_eq(read(bfd, back, sizeof(back)), (ssize_t)sizeof(back));
	close(bfd);
	size_t i = 0; /* the first byte out of place (not ck_assert per byte: each writes a pipe) */
	while (i < sizeof(back) && back[i] == (i < 4096 ? 'd' : i < CACHED_AT ? 0 : 'c'))
		i++;
	ck_assert_msg(i == sizeof(back), "byte %zu of %zu is %d", i, sizeof(back), i < sizeof(back) ? back[i] : 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

static Suite *writeback_suite(void)
{
	Suite *s = suite_create("engine_writeback");
	TCase *tc = tcase_create("writeback");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, flushed_writes_are_charged_to_the_opener);
	tcase_add_test(tc, writeback_through_a_direct_open_file);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("engine_writeback", "FUSE mounts, cgroups");
	SRunner *sr = srunner_create(writeback_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
