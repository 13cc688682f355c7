/*
 * Tenant churn: many short-lived cgroups and processes (pids recycled) come,
 * do I/O and vanish. Once idle they are retired: the tenant count and the
 * daemon's memory return to where they were.
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

#define CHURN_ROUNDS 4
#define CGROUPS_PER_ROUND 150
/* ASan holds up to 256 MiB of freed memory in quarantine: growth there says nothing. */
#ifdef FUSESCHED_SANITIZED
#define RSS_GROWTH_LIMIT_KIB (320 * 1024)
#else
#define RSS_GROWTH_LIMIT_KIB 4096
#endif

static int live_tenants(const char *mnt)
{
	struct json_object *mount = NULL;
	struct json_object *doc = ctl_test_stat(mnt, &mount);
	struct json_object *tenants = NULL;
	int n = json_object_object_get_ex(mount, "tenants", &tenants) ?
			(int)json_object_array_length(tenants) : -1;
	json_object_put(doc);
	return n;
}

/* One round: CGROUPS_PER_ROUND cgroups, each with a child that writes once and exits. */
static void churn_round(const struct test_mount *m, int round)
{
	for (int i = 0; i < CGROUPS_PER_ROUND; i++) {
		char name[64], path[128];
		snprintf(name, sizeof(name), "fs-churn-%d-%d-%d", getpid(), round, i);
		snprintf(path, sizeof(path), CG_V2 "/%s", name);
		leftovers_add_cgroup(path); /* the record forgets those removed below */
		ck_assert_int_eq(mkdir(path, 0755), 0);
		int go[2];
		ck_assert_int_eq(pipe(go), 0);
		pid_t pid = fork();
		if (pid == 0) {
			char c;
			close(go[1]);
			if (read(go[0], &c, 1) != 1)
				_exit(3);
			char rel[64];
			snprintf(rel, sizeof(rel), "churn-%d", i);
			int fd = open(test_mnt_path(m, rel), O_CREAT | O_WRONLY | O_TRUNC, 0644);
			_exit(fd >= 0 && write(fd, "x", 1) == 1 && close(fd) == 0 ? 0 : 1);
		}
		close(go[0]);
		char procs[160];
		snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
		char pidtext[32];
		snprintf(pidtext, sizeof(pidtext), "%d\n", pid);
		test_write_file(procs, pidtext);
		ck_assert_int_eq(write(go[1], "g", 1), 1);
		close(go[1]);
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0);
		ck_assert_int_eq(rmdir(path), 0);
	}
}

START_TEST(short_lived_cgroups_are_retired)
{
	char conf[512];
	snprintf(conf, sizeof(conf), "%s/churn-%d.conf", TEST_SCRATCH_DIR, getpid());
	leftovers_add_dir(conf); /* taken down by the runner if the test fails (leftovers.h) */
	test_write_file(conf, "[tenants]\ncache_ttl_ms = 50\nretire_idle_ms = 1000\n");
	const char *args[] = {"-c", conf, NULL};
	struct test_mount m;
	test_mount_start(&m, args);
	churn_round(&m, 0);
	/* Everything of round 0 retires once idle (checked every second). */
	int n = -1;
	CTL_TEST_POLL((n = live_tenants(m.mnt)) <= 1);
	ck_assert_int_le(n, 1);
	long rss_after_first = test_proc_number(m.daemon_pid, "status", "VmRSS: %ld kB");
	for (int round = 1; round < CHURN_ROUNDS; round++) {
		churn_round(&m, round);
		CTL_TEST_POLL((n = live_tenants(m.mnt)) <= 1);
		ck_assert_int_le(n, 1);
	}
	long rss_end = test_proc_number(m.daemon_pid, "status", "VmRSS: %ld kB");
	fprintf(stderr, "test_churn: %d cgroups; daemon RSS %ld KiB after the first %d, %ld KiB at the end\n",
		CHURN_ROUNDS * CGROUPS_PER_ROUND, rss_after_first, CGROUPS_PER_ROUND, rss_end);
	/* Three more rounds of churn may not grow memory by more than a few pages per tenant seen. */
	ck_assert_int_gt(rss_after_first, 0);
	ck_assert_int_lt(rss_end - rss_after_first, RSS_GROWTH_LIMIT_KIB);
	test_mount_require_clean_exit(test_mount_stop(&m));
	unlink(conf);
}
END_TEST

static Suite *churn_suite(void)
{
	Suite *s = suite_create("churn");
	TCase *tc = tcase_create("churn");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_set_timeout(tc, 300);
	tcase_add_test(tc, short_lived_cgroups_are_retired);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("churn", "FUSE mounts, cgroups");
	SRunner *sr = srunner_create(churn_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
