/*
 * A mount / workload / unmount cycle with the daemon under valgrind memcheck:
 * no invalid access, no use of uninitialised memory, no definite or indirect
 * leak. The workload touches every room: entries, files through the io_uring
 * engine (buffered and O_DIRECT), directories, xattrs, two tenants (real
 * cgroups), the control socket (stat) and a reload.
 */
#include "ctl_test_util.h"
#include "leftovers.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#define FILES 24
#define FILE_BYTES (96 * 1024)
#define DIRECT_BYTES (256 * 1024)

static void fill(unsigned char *b, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		b[i] = (unsigned char)(seed * 131u + i * 7u + (i >> 9));
}

/* Writes, fsyncs, reads back and checks FILES files under dir; returns the mismatches. */
static int file_round(const char *dir, unsigned seed)
{
	static unsigned char want[FILE_BYTES], got[FILE_BYTES];
	int bad = 0;
	for (int i = 0; i < FILES; i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/f%u-%d", dir, seed, i);
		fill(want, sizeof(want), seed + (unsigned)i);
		int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
		if (fd < 0 || pwrite(fd, want, sizeof(want), 0) != (ssize_t)sizeof(want) || fsync(fd) < 0)
			bad++;
		if (fd >= 0 && (pread(fd, got, sizeof(got), 0) != (ssize_t)sizeof(got) ||
				memcmp(got, want, sizeof(want)) != 0))
			bad++;
		if (fd >= 0)
			close(fd);
	}
	return bad;
}

static void tenant_child(const char *dir, unsigned seed)
{
	_exit(file_round(dir, seed) ? 1 : 0);
}

static void direct_round(const char *path)
{
	void *buf = NULL, *back = NULL;
	ck_assert_int_eq(posix_memalign(&buf, 4096, DIRECT_BYTES), 0);
	ck_assert_int_eq(posix_memalign(&back, 4096, DIRECT_BYTES), 0);
	fill(buf, DIRECT_BYTES, 77);
	int fd = open(path, O_CREAT | O_RDWR | O_DIRECT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, DIRECT_BYTES, 0), DIRECT_BYTES);
	ck_assert_int_eq(fdatasync(fd), 0);
	ck_assert_int_eq(pread(fd, back, DIRECT_BYTES, 0), DIRECT_BYTES);
	ck_assert_mem_eq(buf, back, DIRECT_BYTES);
	ck_assert_int_eq(pread(fd, back, DIRECT_BYTES, DIRECT_BYTES), 0); /* at EOF */
	ck_assert_int_eq(fallocate(fd, 0, DIRECT_BYTES, 4096), 0);
	close(fd);
	free(buf);
	free(back);
}

static void namespace_round(const struct test_mount *m)
{
	ck_assert_int_eq(mkdir(test_mnt_path(m, "d"), 0755), 0);
	ck_assert_int_eq(mkdir(test_mnt_path(m, "d/sub"), 0755), 0);
	ck_assert_int_eq(symlink("sub", test_mnt_path(m, "d/link")), 0);
	ck_assert_int_eq(rename(test_mnt_path(m, "d/sub"), test_mnt_path(m, "d/moved")), 0);
	ck_assert_int_eq(link(test_mnt_path(m, "direct.dat"), test_mnt_path(m, "d/hard")), 0);
	ck_assert_int_eq(setxattr(test_mnt_path(m, "d/hard"), "user.k", "v1", 2, 0), 0);
	char value[8] = {0};
	ck_assert_int_eq(getxattr(test_mnt_path(m, "d/hard"), "user.k", value, sizeof(value)), 2);
	ck_assert_str_eq(value, "v1");
	ck_assert_int_eq(truncate(test_mnt_path(m, "d/hard"), 100), 0);
	struct stat st;
	ck_assert_int_eq(stat(test_mnt_path(m, "direct.dat"), &st), 0);
	ck_assert_int_eq(st.st_size, 100);
	ck_assert_int_eq(test_sh("ls -laR '%s' >/dev/null", m->mnt), 0);
	ck_assert_int_eq(unlink(test_mnt_path(m, "d/hard")), 0);
	ck_assert_int_eq(test_sh("rm -rf '%s'", test_mnt_path(m, "d")), 0);
}

START_TEST(mount_workload_unmount_is_clean_under_memcheck)
{
	char log_path[256], conf_path[256];
	snprintf(log_path, sizeof(log_path), "%s/valgrind-%d.log", TEST_SCRATCH_DIR, (int)getpid());
	snprintf(conf_path, sizeof(conf_path), "%s/valgrind-%d.conf", TEST_SCRATCH_DIR, (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	/* Taken down by the runner if the test fails (leftovers.h). */
	leftovers_add_dir(log_path);
	leftovers_add_dir(conf_path);
	test_write_file(conf_path, "[group \"/fs-vg-gold\"]\nweight = 800\n");
	ck_assert_msg(test_sh("command -v valgrind >/dev/null") == 0,
		      "valgrind is not installed (scripts/install-deps installs it)");
	char log_arg[300];
	snprintf(log_arg, sizeof(log_arg), "--log-file=%s", log_path);
	const char *const wrapper[] = {"valgrind", "--quiet", "--leak-check=full",
				       "--errors-for-leak-kinds=definite,indirect",
				       "--show-leak-kinds=definite,indirect", "--error-exitcode=97",
				       log_arg, NULL};
	const char *const args[] = {"-c", conf_path, NULL};
	struct test_mount m;
	test_mount_start_under(&m, wrapper, args);

	ctl_test_cgroup_make(CG_V2, "/fs-vg-gold");
	ctl_test_cgroup_make(CG_V2, "/fs-vg-plain");
	pid_t kids[2];
	const char *groups[2] = {"/fs-vg-gold", "/fs-vg-plain"};
	for (int i = 0; i < 2; i++) {
		int go[2];
		ck_assert_int_eq(pipe(go), 0);
		kids[i] = fork();
		ck_assert_int_ge(kids[i], 0);
		if (kids[i] == 0) {
			char c;
			close(go[1]);
			if (read(go[0], &c, 1) != 1)
				_exit(2);
			tenant_child(m.mnt, 100u + (unsigned)i);
		}
		close(go[0]);
		ctl_test_cgroup_move(CG_V2, groups[i], kids[i]);
		ck_assert_int_eq(write(go[1], "g", 1), 1);
		close(go[1]);
	}
	ck_assert_int_eq(file_round(m.mnt, 1), 0);
	direct_round(test_mnt_path(&m, "direct.dat"));
	namespace_round(&m);
	for (int i = 0; i < 2; i++) {
		int status;
		ck_assert_int_eq(waitpid(kids[i], &status, 0), kids[i]);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "tenant %d failed", i);
	}
	/* The control socket and a reload (SIGHUP) run inside the daemon too. */
	ck_assert_int_ge(ctl_test_tenant_u64(m.mnt, "/fs-vg-gold", "ops.write"), FILES);
	ck_assert_int_eq(kill(m.daemon_pid, SIGHUP), 0);
	ck_assert_int_ge(ctl_test_tenant_u64(m.mnt, "/fs-vg-plain", "ops.write"), FILES);

	int status = test_mount_stop(&m);
	int log_status = test_sh("cat '%s' >&2", log_path);
	(void)log_status;
	ck_assert_msg(status == 0, "daemon under valgrind exited %d (97: memcheck errors, log above)",
		      status);
	ck_assert_int_eq(test_sh("! grep -q 'ERROR SUMMARY: [1-9]' '%s'", log_path), 0);
	unlink(log_path);
	unlink(conf_path);
	ctl_test_cgroups_cleanup();
}
END_TEST

static Suite *valgrind_suite(void)
{
	Suite *s = suite_create("valgrind");
	TCase *tc = tcase_create("memcheck");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, mount_workload_unmount_is_clean_under_memcheck);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("valgrind", "FUSE mounts, cgroups");
	SRunner *sr = srunner_create(valgrind_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
