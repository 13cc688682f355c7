/* Attribution with real cgroups (needs root and the hybrid mounts of
 * these hosts: v2 at /sys/fs/cgroup/unified, v1 blkio at
 * /sys/fs/cgroup/blkio).  Exits 77 (skipped) where they are missing. */
#include "fusesched/clock.h"
#include "fusesched/tenant.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define V2 "/sys/fs/cgroup/unified"
#define BLKIO "/sys/fs/cgroup/blkio"
#define MS 1000000ull

/* Set up in the runner process, so teardown can clean up after a failure. */
static char group_a[128], group_b[128], group_blk[128];

static void move_pid(const char *root, const char *group, pid_t pid)
{
	char path[256], text[32];

	snprintf(path, sizeof(path), "%s%s/cgroup.procs", root, group);
	snprintf(text, sizeof(text), "%d\n", (int)pid);
	test_write_file(path, text);
}

static void remove_group(const char *root, const char *group)
{
	char path[256];

	snprintf(path, sizeof(path), "%s%s", root, group);
	/* an exiting child leaves its cgroup a moment after it dies */
	for (int i = 0; i < 100 && rmdir(path) && errno == EBUSY; i++)
		usleep(10000);
}

static void setup(void)
{
	snprintf(group_a, sizeof(group_a), "/fs-test-%d-a", (int)getpid());
	snprintf(group_b, sizeof(group_b), "/fs-test-%d-b", (int)getpid());
	snprintf(group_blk, sizeof(group_blk), "/fs-test-%d-blk", (int)getpid());
}

static void teardown(void)
{
	char child[160];

	for (int i = 0; i < 2; i++) {
		snprintf(child, sizeof(child), "%s/k%d", group_a, i);
		remove_group(V2, child);
	}
	remove_group(V2, group_a);
	remove_group(V2, group_b);
	remove_group(BLKIO, group_blk);
}

static void make_group(const char *root, const char *group)
{
	char path[256];

	snprintf(path, sizeof(path), "%s%s", root, group);
	ck_assert_msg(mkdir(path, 0755) == 0 || errno == EEXIST, "mkdir %s: %s",
		      path, strerror(errno));
}

/* A child that sleeps until its pipe closes. */
static pid_t spawn_sleeper(int *pipe_w)
{
	int fds[2];
	pid_t pid;
	char c;

	ck_assert_int_eq(pipe(fds), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(fds[1]);
		while (read(fds[0], &c, 1) > 0)
			;
		_exit(0);
	}
	close(fds[0]);
	*pipe_w = fds[1];
	return pid;
}

static void reap(pid_t pid, int pipe_w)
{
	close(pipe_w);
	ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
}

static struct tenant_table *open_table(const char *cfg_text)
{
	char err[256];
	struct config *cfg;
	struct tenant_table *table;
	FILE *in = fmemopen((void *)cfg_text, strlen(cfg_text), "r");

	ck_assert_msg(config_load_stream(in, "t", &cfg, err, sizeof(err)) == 0, "%s", err);
	fclose(in);
	ck_assert_msg(tenant_table_new(NULL, cfg, &table, err, sizeof(err)) == 0, "%s", err);
	config_free(cfg);
	return table;
}

static struct tenant_info info_of(struct tenant_table *table, uint32_t id)
{
	struct tenant_info info;

	ck_assert_int_eq(tenant_get_info(table, id, &info), 0);
	return info;
}

START_TEST(moved_process_is_reattributed)
{
	struct tenant_table *table =
		open_table("[tenants]\ncache_ttl_ms = 100\nretire_idle_ms = 1000\n"
			   "[group \"/fs-test-*-b\"]\nweight = 700\n");
	uint64_t t0 = clock_now_ns();
	uint32_t a, b, ids[4];
	int pipe_w;
	pid_t child;

	make_group(V2, group_a);
	make_group(V2, group_b);
	child = spawn_sleeper(&pipe_w);
	move_pid(V2, group_a, child);
	a = tenant_resolve(table, child, t0);
	ck_assert_str_eq(info_of(table, a).path, group_a);
	ck_assert_uint_eq(info_of(table, a).weight, 100);

	move_pid(V2, group_b, child);
	ck_assert_uint_eq(tenant_resolve(table, child, t0 + 50 * MS), a);
	b = tenant_resolve(table, child, t0 + 101 * MS);
	ck_assert_uint_ne(b, a);
	ck_assert_str_eq(info_of(table, b).path, group_b);
	ck_assert_uint_eq(info_of(table, b).weight, 700);
	ck_assert_int_eq(info_of(table, b).weight_source, TENANT_WEIGHT_FROM_RULE);

	/* our own thread is in the v2 root: "/" in auto falls back to blkio */
	ck_assert_str_eq(info_of(table, tenant_resolve(table, getpid(), t0)).path, "/");

	/* the child exits, the groups go: both tenants retire once idle */
	reap(child, pipe_w);
	ck_assert_uint_eq(tenant_resolve(table, child, t0 + 300 * MS),
			  TENANT_ID_DEFAULT);
	teardown();
	ck_assert_uint_eq(tenant_table_retire(table, t0 + 2000 * MS, ids, 4), 0);
	ck_assert_uint_eq(tenant_table_retire(table, t0 + 2100 * MS, ids, 4), 2);
	ck_assert_int_eq(tenant_get_info(table, a, &(struct tenant_info){ 0 }), -ENOENT);
	tenant_table_free(table);
}
END_TEST

START_TEST(blkio_weight_is_honoured)
{
	static const char *const files[] = { "blkio.bfq.weight", "blkio.weight" };
	struct tenant_table *table;
	char path[256];
	const char *file = NULL;
	struct tenant_info info;
	struct config *cfg;
	uint32_t id;
	int pipe_w;
	pid_t child;
	char err[256];
	FILE *in;

	make_group(BLKIO, group_blk);
	for (size_t i = 0; i < 2 && !file; i++) {
		snprintf(path, sizeof(path), "%s%s/%s", BLKIO, group_blk, files[i]);
		if (access(path, W_OK) == 0)
			file = files[i];
	}
	if (!file) {
		printf("SKIP: no blkio.bfq.weight or blkio.weight in %s%s\n", BLKIO,
		       group_blk);
		return;
	}
	test_write_file(path, "300\n");

	table = open_table("[group \"/unrelated\"]\nweight = 5\n");
	child = spawn_sleeper(&pipe_w);
	move_pid(BLKIO, group_blk, child);
	id = tenant_resolve(table, child, clock_now_ns());
	info = info_of(table, id);
	ck_assert_str_eq(info.path, group_blk);
	ck_assert_uint_eq(info.weight, 300);
	ck_assert_int_eq(info.weight_source, TENANT_WEIGHT_FROM_CGROUP);

	/* a reload with a matching rule wins over the cgroup's weight */
	static const char reload[] = "[group \"/fs-test-*\"]\nweight = 650\n";

	in = fmemopen((void *)reload, strlen(reload), "r");
	ck_assert_int_eq(config_load_stream(in, "t", &cfg, err, sizeof(err)), 0);
	fclose(in);
	ck_assert_int_eq(tenant_table_apply_config(table, cfg), 0);
	config_free(cfg);
	ck_assert_uint_eq(tenant_weight(table, id), 650);

	move_pid(BLKIO, "", child);
	reap(child, pipe_w);
	tenant_table_free(table);
}
END_TEST

/*
 * A cgroup delegated to a user (its directory and process list the user's,
 * as systemd's Delegate= makes them), and two cgroups the user made below
 * it: a process in one of them is a tenant under the delegated cgroup,
 * which is a level though nothing sets its weight, so the user's cgroups
 * divide its share instead of each taking one beside everyone's.
 */
START_TEST(a_delegated_subtree_divides_its_share)
{
	struct tenant_table *table = open_table("[tenants]\ncache_ttl_ms = 0\n");
	const uid_t user = 2001;
	char path[256], child_group[160];
	uint32_t id, parent;
	int pipe_w, status;
	pid_t maker, child;

	make_group(V2, group_a);
	snprintf(path, sizeof(path), "%s%s", V2, group_a);
	ck_assert_int_eq(chown(path, user, user), 0);
	snprintf(path, sizeof(path), "%s%s/cgroup.procs", V2, group_a);
	ck_assert_int_eq(chown(path, user, user), 0);
	/* the user makes its cgroups itself */
	maker = fork();
	ck_assert_int_ge(maker, 0);
	if (maker == 0) {
		if (setresgid(user, user, user) || setresuid(user, user, user))
			_exit(90);
		for (int i = 0; i < 2; i++) {
			snprintf(path, sizeof(path), "%s%s/k%d", V2, group_a, i);
			if (mkdir(path, 0755))
				_exit(91);
		}
		_exit(0);
	}
	ck_assert_int_eq(waitpid(maker, &status, 0), maker);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		      "the user could not make its cgroups (status %d)", status);

	child = spawn_sleeper(&pipe_w);
	snprintf(child_group, sizeof(child_group), "%s/k1", group_a);
	move_pid(V2, child_group, child);
	id = tenant_resolve(table, child, clock_now_ns());
	ck_assert_str_eq(info_of(table, id).path, child_group);
	parent = tenant_parent(table, id);
	ck_assert_uint_ne(parent, TENANT_ID_NONE);
	ck_assert_str_eq(info_of(table, parent).path, group_a);
	ck_assert_uint_eq(tenant_parent(table, parent), TENANT_ID_NONE);
	move_pid(V2, "", child);
	reap(child, pipe_w);
	tenant_table_free(table);
}
END_TEST

int main(void)
{
	Suite *s;
	TCase *tc;
	SRunner *sr;
	int failed;

	test_require_root("tenant_real_cgroups", "cgroups");
	if (access(V2 "/cgroup.procs", W_OK) != 0) {
		fprintf(stderr, "SKIP: tenant_real_cgroups: needs cgroup v2 at %s\n", V2);
		return 77;
	}
	s = suite_create("tenant_real_cgroups");
	tc = tcase_create("real");
	tcase_add_unchecked_fixture(tc, setup, teardown);
	tcase_add_test(tc, moved_process_is_reattributed);
	tcase_add_test(tc, blkio_weight_is_honoured);
	tcase_add_test(tc, a_delegated_subtree_divides_its_share);
	tcase_set_timeout(tc, 30);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
