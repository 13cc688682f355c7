/*
 * Tenants in real cgroups, seen through `fusesched stat` and changed by
 * `fusesched reload` and SIGHUP. Needs root, /dev/fuse and the hybrid cgroup
 * mounts (v2 at /sys/fs/cgroup/unified, v1 blkio); exits 77 without them.
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
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Unique per run, so parallel or leftover runs never share a cgroup. */
static char group_a[64], group_b[64];
static char config_path[512];

static void setup(void)
{
	snprintf(group_a, sizeof(group_a), "/ctl-test-%d-a", (int)getpid());
	snprintf(group_b, sizeof(group_b), "/ctl-test-%d-b", (int)getpid());
	snprintf(config_path, sizeof(config_path), "%s/ctl-tenants-%d.conf", TEST_SCRATCH_DIR,
		 (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	leftovers_add_dir(config_path); /* taken down by the runner if the test fails (leftovers.h) */
}

static void teardown(void)
{
	ctl_test_cgroups_cleanup();
	unlink(config_path);
}

/* Config with weights for A and B and a short tenant cache, so moves show quickly. */
static void write_config(unsigned weight_a, unsigned weight_b, const char *extra)
{
	char text[1024];
	snprintf(text, sizeof(text),
		 "%s\n[tenants]\ncache_ttl_ms = 20\n\n[group \"%s\"]\nweight = %u\n\n"
		 "[group \"%s\"]\nweight = %u\n",
		 extra ? extra : "", group_a, weight_a, group_b, weight_b);
	test_write_file(config_path, text);
}

static void mount_with_config(struct test_mount *m)
{
	const char *args[] = {"-c", config_path, NULL};
	test_mount_start(m, args);
}

/* A (weight 300) and B (weight 100) as real cgroups, and a mount that knows them. */
static void mount_two_tenants(struct test_mount *m)
{
	write_config(300, 100, NULL);
	ctl_test_cgroup_make(CG_V2, group_a);
	ctl_test_cgroup_make(CG_V2, group_b);
	mount_with_config(m);
}

/*
 * O_DIRECT: each call is exactly one FUSE request of exactly that size.
 * Buffered (open_flags 0), the writes are the FUSE worker's own once
 * dispatched (engine.h), a different path to the same accounting.
 */
static int do_io_flags(const char *path, int open_flags, int writes, size_t write_bytes,
		       int reads, size_t read_bytes)
{
	void *buf;
	if (posix_memalign(&buf, 4096, write_bytes > read_bytes ? write_bytes : read_bytes))
		return 1;
	memset(buf, 'w', write_bytes);
	int fd = open(path, O_CREAT | O_RDWR | open_flags, 0644);
	if (fd < 0)
		return 2;
	for (int i = 0; i < writes; i++)
		if (pwrite(fd, buf, write_bytes, (off_t)(i * write_bytes)) != (ssize_t)write_bytes)
			return 3;
	for (int i = 0; i < reads; i++)
		if (pread(fd, buf, read_bytes, (off_t)(i * read_bytes)) != (ssize_t)read_bytes)
			return 4;
	close(fd);
	free(buf);
	return 0;
}

static int do_io(const char *path, int writes, size_t write_bytes, int reads, size_t read_bytes)
{
	return do_io_flags(path, O_DIRECT, writes, write_bytes, reads, read_bytes);
}

struct io_job {
	const char *group;
	const char *path;
	int open_flags;            /* O_DIRECT, or 0 for buffered */
	int writes;
	size_t write_bytes;
	int reads;
	size_t read_bytes;
};

/* A child that joins the job's v2 cgroup, does the I/O, and exits with do_io's result. */
static pid_t spawn_io(const struct io_job *j)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char procs[256], me[32];
		snprintf(procs, sizeof(procs), "%s%s/cgroup.procs", CG_V2, j->group);
		snprintf(me, sizeof(me), "%d\n", (int)getpid());
		int fd = open(procs, O_WRONLY);
		if (fd < 0 || write(fd, me, strlen(me)) < 0)
			_exit(10);
		close(fd);
		_exit(do_io_flags(j->path, j->open_flags, j->writes, j->write_bytes, j->reads,
				  j->read_bytes));
	}
	return pid;
}

static int wait_exit(pid_t pid)
{
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* A writer that writes one 4 KiB block after another until killed. */
static pid_t spawn_writer_loop(const char *group, const char *path)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		if (group) {
			char procs[256], me[32];
			snprintf(procs, sizeof(procs), "%s%s/cgroup.procs", CG_V2, group);
			snprintf(me, sizeof(me), "%d\n", (int)getpid());
			int fd = open(procs, O_WRONLY);
			if (fd < 0 || write(fd, me, strlen(me)) < 0)
				_exit(10);
			close(fd);
		}
		for (;;) {
			if (do_io(path, 1, 4096, 0, 4096))
				_exit(11);
			usleep(2000);
		}
	}
	return pid;
}

static void stop_child(pid_t pid)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

START_TEST(two_cgroups_counts_weights_and_shares_are_exact)
{
	struct test_mount m;
	mount_two_tenants(&m);
	const struct io_job a = {group_a, test_mnt_path(&m, "a"), O_DIRECT, 37, 8192, 11, 4096};
	const struct io_job b = {group_b, test_mnt_path(&m, "b"), O_DIRECT, 5, 65536, 3, 16384};
	pid_t pa = spawn_io(&a), pb = spawn_io(&b);
	ck_assert_int_eq(wait_exit(pa), 0);
	ck_assert_int_eq(wait_exit(pb), 0);

	/* Every reply was sent after its stats were recorded; poll only to be safe across threads. */
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_b, "ops.read") == 3);
	/* Targets compare like with like once neither tenant is active any more. */
	struct json_object *mount, *doc = NULL;
	for (int i = 0; i < 1000; i++) {
		json_object_put(doc);
		doc = ctl_test_stat(m.mnt, &mount);
		struct json_object *ta = ctl_test_tenant(mount, group_a);
		struct json_object *tb = ctl_test_tenant(mount, group_b);
		struct json_object *aa, *ab;
		if (ta && tb && json_object_object_get_ex(ta, "active", &aa) &&
		    json_object_object_get_ex(tb, "active", &ab) && !json_object_get_boolean(aa) &&
		    !json_object_get_boolean(ab))
			break;
		usleep(20000);
	}
	struct json_object *ta = ctl_test_tenant(mount, group_a), *tb = ctl_test_tenant(mount, group_b);
	ck_assert_ptr_nonnull(ta);
	ck_assert_ptr_nonnull(tb);
	struct {
		struct json_object *t;
		const struct io_job *j;
		int weight;
	} rows[] = {{ta, &a, 300}, {tb, &b, 100}};
	for (int i = 0; i < 2; i++) {
		struct json_object *t = rows[i].t, *v, *ops, *bytes;
		const struct io_job *j = rows[i].j;
		ck_assert(json_object_object_get_ex(t, "ops", &ops));
		ck_assert(json_object_object_get_ex(t, "bytes", &bytes));
		ck_assert(json_object_object_get_ex(ops, "write", &v));
		ck_assert_int_eq(json_object_get_int64(v), j->writes);
		ck_assert(json_object_object_get_ex(ops, "read", &v));
		ck_assert_int_eq(json_object_get_int64(v), j->reads);
		ck_assert(json_object_object_get_ex(ops, "sync", &v));
		ck_assert_int_eq(json_object_get_int64(v), 0);
		ck_assert(json_object_object_get_ex(bytes, "write", &v));
		ck_assert_int_eq(json_object_get_int64(v), (int64_t)(j->writes * j->write_bytes));
		ck_assert(json_object_object_get_ex(bytes, "read", &v));
		ck_assert_int_eq(json_object_get_int64(v), (int64_t)(j->reads * j->read_bytes));
		ck_assert(json_object_object_get_ex(t, "weight", &v));
		ck_assert_int_eq(json_object_get_int(v), rows[i].weight);
		ck_assert(json_object_object_get_ex(t, "weight_source", &v));
		ck_assert_str_eq(json_object_get_string(v), "rule");
		/* Children of the root cgroup, which is no tenant: both top level. */
		ck_assert(json_object_object_get_ex(t, "parent", &v));
		ck_assert(json_object_is_type(v, json_type_null));
	}
	/* Idle: each target is its weight over the sum of every listed tenant's weight. */
	struct json_object *tenants, *v;
	ck_assert(json_object_object_get_ex(mount, "tenants", &tenants));
	int sum = 0;
	for (size_t i = 0; i < json_object_array_length(tenants); i++) {
		ck_assert(json_object_object_get_ex(json_object_array_get_idx(tenants, i), "weight", &v));
		sum += json_object_get_int(v);
	}
	for (int i = 0; i < 2; i++) {
		ck_assert(json_object_object_get_ex(rows[i].t, "target_share", &v));
		ck_assert_double_eq_tol(json_object_get_double(v), (double)rows[i].weight / sum, 1e-9);
	}
	/* Share received since start, by bytes: A's over A's and B's is exact. */
	double got_a, got_b;
	ck_assert(json_object_object_get_ex(ta, "share_total", &v));
	got_a = json_object_get_double(v);
	ck_assert(json_object_object_get_ex(tb, "share_total", &v));
	got_b = json_object_get_double(v);
	double bytes_a = 37 * 8192 + 11 * 4096, bytes_b = 5 * 65536 + 3 * 16384;
	ck_assert_double_eq_tol(got_a / (got_a + got_b), bytes_a / (bytes_a + bytes_b), 1e-9);
	json_object_put(doc);

	/* The table names both tenants with their weights. */
	int status;
	char *table = ctl_test_capture(&status, "%s stat '%s' --sort weight", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 0);
	ck_assert_ptr_nonnull(strstr(table, "TENANT"));
	char *pos_a = strstr(table, group_a), *pos_b = strstr(table, group_b);
	ck_assert_ptr_nonnull(pos_a);
	ck_assert_ptr_nonnull(pos_b);
	ck_assert(pos_a < pos_b); /* heavier first */
	free(table);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

static int64_t json_int(struct json_object *t, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(t, key, &v), "no %s", key);
	return json_object_get_int64(v);
}

static double json_num(struct json_object *t, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(t, key, &v), "no %s", key);
	return json_object_get_double(v);
}

/*
 * The child cgroups of a ruled cgroup are tenants below it: stat lists the
 * ruled one (no I/O of its own) as their parent, divides its target among
 * them and gives it their shares together; the table indents them under it
 * and Prometheus names it in their parent label.
 */
START_TEST(child_cgroups_of_a_ruled_cgroup_are_its_children_in_stat)
{
	write_config(300, 100, NULL);
	ctl_test_cgroup_make(CG_V2, group_a);
	ctl_test_cgroup_make(CG_V2, group_b);
	char kids[3][96];
	for (int i = 0; i < 3; i++) {
		snprintf(kids[i], sizeof(kids[i]), "%s/c%d", group_a, i + 1);
		ctl_test_cgroup_make(CG_V2, kids[i]);
	}
	struct test_mount m;
	mount_with_config(&m);
	pid_t pids[4];
	char files[4][16];
	for (int i = 0; i < 4; i++) {
		snprintf(files[i], sizeof(files[i]), "f%d", i);
		const struct io_job j = {i < 3 ? kids[i] : group_b, test_mnt_path(&m, files[i]), O_DIRECT,
					 i < 3 ? 4 * (i + 1) : 6, 4096, 0, 4096};
		pids[i] = spawn_io(&j);
	}
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(wait_exit(pids[i]), 0);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, kids[2], "ops.write") == 12);
	/* Idle, every listed tenant competes: targets do not depend on timing. */
	struct json_object *mount, *doc = NULL;
	for (int i = 0; i < 1000; i++) {
		json_object_put(doc);
		doc = ctl_test_stat(m.mnt, &mount);
		struct json_object *tenants, *v;
		ck_assert(json_object_object_get_ex(mount, "tenants", &tenants));
		bool busy = json_object_array_length(tenants) < 5;
		for (size_t t = 0; t < json_object_array_length(tenants); t++)
			busy |= json_object_object_get_ex(json_object_array_get_idx(tenants, t), "active", &v) &&
				json_object_get_boolean(v);
		if (!busy)
			break;
		usleep(20000);
	}
	struct json_object *pod = ctl_test_tenant(mount, group_a), *other = ctl_test_tenant(mount, group_b);
	ck_assert_ptr_nonnull(pod);
	ck_assert_ptr_nonnull(other);
	struct json_object *parent;
	ck_assert(json_object_object_get_ex(pod, "parent", &parent));
	ck_assert(json_object_is_type(parent, json_type_null));
	ck_assert_int_eq(json_int(json_object_object_get(pod, "bytes"), "write"), 0);
	ck_assert_double_eq_tol(json_num(pod, "target_share"), 0.75, 1e-9);
	ck_assert_double_eq_tol(json_num(other, "target_share"), 0.25, 1e-9);
	/* 4 + 8 + 12 blocks in the pod, 6 in the other. */
	ck_assert_double_eq_tol(json_num(pod, "share_total"), 24.0 / 30, 1e-9);
	double kid_weights = 0;
	for (int i = 0; i < 3; i++) {
		struct json_object *kid = ctl_test_tenant(mount, kids[i]);
		ck_assert_ptr_nonnull(kid);
		kid_weights += (double)json_int(kid, "weight");
	}
	for (int i = 0; i < 3; i++) {
		struct json_object *kid = ctl_test_tenant(mount, kids[i]);
		ck_assert_int_eq(json_int(kid, "parent"), json_int(pod, "id"));
		ck_assert_double_eq_tol(json_num(kid, "target_share"),
					0.75 * (double)json_int(kid, "weight") / kid_weights, 1e-9);
		ck_assert_double_eq_tol(json_num(kid, "share_total"), 4.0 * (i + 1) / 30, 1e-9);
	}
	json_object_put(doc);

	/* The table: the pod's full path, then its children by name, indented and relative. */
	int status;
	char *text = ctl_test_capture(&status, "%s stat '%s'", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 0);
	char want[256];
	snprintf(want, sizeof(want), "\n%s ", group_a);
	char *at = strstr(text, want);
	ck_assert_msg(at != NULL, "no row for %s: %s", group_a, text);
	for (int i = 0; i < 3; i++) {
		at = strchr(at + 1, '\n');
		snprintf(want, sizeof(want), "\n  c%d ", i + 1);
		ck_assert_msg(at && strncmp(at, want, strlen(want)) == 0, "c%d not next: %s", i + 1, text);
	}
	free(text);
	text = ctl_test_capture(&status, "%s stat '%s' --prometheus", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 0);
	snprintf(want, sizeof(want), "tenant=\"%s\",parent=\"%s\"}", kids[1], group_a);
	ck_assert_msg(strstr(text, want) != NULL, "no %s in: %s", want, text);
	free(text);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* Buffered writes, which the FUSE worker runs itself once dispatched, are counted for the writer's cgroup. */
START_TEST(buffered_writes_are_charged_to_the_writers_cgroup)
{
	struct test_mount m;
	mount_two_tenants(&m);
	const struct io_job a = {group_a, test_mnt_path(&m, "a"), 0, 23, 65536, 0, 4096};
	const struct io_job b = {group_b, test_mnt_path(&m, "b"), 0, 9, 4096, 0, 4096};
	pid_t pa = spawn_io(&a), pb = spawn_io(&b);
	ck_assert_int_eq(wait_exit(pa), 0);
	ck_assert_int_eq(wait_exit(pb), 0);
	const struct io_job *jobs[] = {&a, &b};
	for (int i = 0; i < 2; i++) {
		const struct io_job *j = jobs[i];
		int64_t want = (int64_t)j->writes * (int64_t)j->write_bytes;
		CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, j->group, "bytes.write") >= want);
		ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, j->group, "bytes.write"), want);
		/* A page-aligned buffered write up to max_write is one FUSE request. */
		ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, j->group, "ops.write"), j->writes);
		ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, j->group, "ops.read"), 0);
	}
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * One request at a time, the scheduler has nothing to do when each arrives:
 * the FUSE worker runs it itself (solo). Requests that overlap go through
 * the scheduler; with -o uring_only every one does.
 */
START_TEST(requests_alone_run_solo_overlapping_ones_are_scheduled)
{
	struct test_mount m;
	mount_two_tenants(&m);
	const struct io_job alone = {group_a, test_mnt_path(&m, "alone"), O_DIRECT, 40, 4096, 40, 4096};
	ck_assert_int_eq(wait_exit(spawn_io(&alone)), 0);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_a, "ops.read") == 40);
	int64_t solo_alone = ctl_test_tenant_u64(m.mnt, group_a, "solo_ops");
	ck_assert_msg(solo_alone >= 40 && solo_alone <= 80, "solo_ops %lld of 80 requests alone",
		      (long long)solo_alone);

	/* Four processes in B at once: some of their requests overlap. */
	char paths[4][64];
	pid_t pids[4];
	for (int i = 0; i < 4; i++) {
		snprintf(paths[i], sizeof(paths[i]), "busy%d", i);
		const struct io_job busy = {group_b, test_mnt_path(&m, paths[i]), O_DIRECT, 100, 4096,
					    100, 4096};
		pids[i] = spawn_io(&busy);
	}
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(wait_exit(pids[i]), 0);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_b, "ops.read") == 400);
	int64_t solo_busy = ctl_test_tenant_u64(m.mnt, group_b, "solo_ops");
	ck_assert_msg(solo_busy < 800, "all 800 overlapping requests ran solo");
	test_mount_require_clean_exit(test_mount_stop(&m));

	const char *uring_only[] = {"-c", config_path, "-o", "uring_only", NULL};
	test_mount_start(&m, uring_only);
	const struct io_job again = {group_a, test_mnt_path(&m, "again"), O_DIRECT, 40, 4096, 40, 4096};
	ck_assert_int_eq(wait_exit(spawn_io(&again)), 0);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_a, "ops.read") == 40);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_a, "ops.write"), 40);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_a, "solo_ops"), 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

START_TEST(moved_process_is_reattributed)
{
	struct test_mount m;
	mount_two_tenants(&m);
	pid_t w = spawn_writer_loop(group_a, test_mnt_path(&m, "moving"));
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_a, "ops.write") > 0);
	ck_assert_int_gt(ctl_test_tenant_u64(m.mnt, group_a, "ops.write"), 0);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_b, "ops.write"), -1);
	ctl_test_cgroup_move(CG_V2, group_b, w);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_b, "ops.write") > 0);
	ck_assert_int_gt(ctl_test_tenant_u64(m.mnt, group_b, "ops.write"), 0);
	/* And A stops growing: the cache entry expired rather than being kept. */
	int64_t a_then = ctl_test_tenant_u64(m.mnt, group_a, "ops.write");
	int64_t b_then = ctl_test_tenant_u64(m.mnt, group_b, "ops.write");
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_b, "ops.write") > b_then + 20);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_a, "ops.write"), a_then);
	stop_child(w);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* A cgroup's own weight file counts where no rule names it, and its
 * changes are followed. */
START_TEST(blkio_bfq_weight_is_honoured_without_a_rule)
{
	char v1_dir[256], weight_file[300];
	snprintf(v1_dir, sizeof(v1_dir), "%s%s", CG_BLKIO, group_a);
	write_config(300, 100, NULL);
	/* Rules name A and B; this tenant is C, matched by nothing. */
	char group_c[80];
	snprintf(group_c, sizeof(group_c), "%s-c", group_a);
	ctl_test_cgroup_make(CG_V2, group_c);
	ctl_test_cgroup_make(CG_BLKIO, group_c);
	snprintf(weight_file, sizeof(weight_file), "%s%s/blkio.bfq.weight", CG_BLKIO, group_c);
	if (access(weight_file, W_OK) != 0) {
		printf("SKIP: %s missing: this kernel's blkio has no BFQ weights\n", weight_file);
		return;
	}
	test_write_file(weight_file, "300\n");
	struct test_mount m;
	mount_with_config(&m);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char me[32];
		snprintf(me, sizeof(me), "%d\n", (int)getpid());
		char v2procs[256], v1procs[256];
		snprintf(v2procs, sizeof(v2procs), "%s%s/cgroup.procs", CG_V2, group_c);
		snprintf(v1procs, sizeof(v1procs), "%s%s/cgroup.procs", CG_BLKIO, group_c);
		int f2 = open(v2procs, O_WRONLY), f1 = open(v1procs, O_WRONLY);
		if (f1 < 0 || f2 < 0 || write(f2, me, strlen(me)) < 0 || write(f1, me, strlen(me)) < 0)
			_exit(10);
		_exit(do_io(test_mnt_path(&m, "c"), 2, 4096, 0, 4096));
	}
	ck_assert_int_eq(wait_exit(pid), 0);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_c, "ops.write") == 2);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_c, "weight"), 300);
	struct json_object *mount, *doc = ctl_test_stat(m.mnt, &mount), *src;
	ck_assert(json_object_object_get_ex(ctl_test_tenant(mount, group_c), "weight_source", &src));
	ck_assert_str_eq(json_object_get_string(src), "cgroup");
	json_object_put(doc);

	/* Its owner changes the weight (as `systemctl set-property
	 * IOWeight=` or a container runtime's update would): followed
	 * within seconds, without a reload. */
	test_write_file(weight_file, "600\n");
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_c, "weight") == 600);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_c, "weight"), 600);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* A field of stat's JSON as text ("null" where null). */
static char *stat_field(const char *mnt, const char *key)
{
	struct json_object *mount, *doc = ctl_test_stat(mnt, &mount), *v = NULL;
	ck_assert_msg(json_object_object_get_ex(mount, key, &v), "no %s in stat", key);
	char *text = strdup(v ? json_object_get_string(v) : "null");
	json_object_put(doc);
	return text;
}

static bool stat_field_is(const char *mnt, const char *key, const char *want)
{
	char *text = stat_field(mnt, key);
	bool same = strcmp(text, want) == 0;
	if (!same)
		fprintf(stderr, "stat %s: %s, waiting for %s\n", key, text, want);
	free(text);
	return same;
}

/* Waits for stat to show key as want (a reload is applied by the reactor's next round). */
static void await_stat_field(const char *mnt, const char *key, const char *want)
{
	CTL_TEST_POLL(stat_field_is(mnt, key, want));
	ck_assert_msg(stat_field_is(mnt, key, want), "stat %s never %s", key, want);
}

START_TEST(reload_and_sighup_change_weights_while_writing_bad_file_keeps_them)
{
	write_config(300, 100, NULL);
	ctl_test_cgroup_make(CG_V2, group_a);
	struct test_mount m;
	mount_with_config(&m);
	pid_t w = spawn_writer_loop(group_a, test_mnt_path(&m, "busy"));
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_a, "weight") == 300);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_a, "weight"), 300);

	int status;
	write_config(700, 100, NULL);
	char *out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, m.mnt);
	ck_assert_msg(status == 0, "reload: %s", out);
	ck_assert_ptr_nonnull(strstr(out, "reloaded"));
	free(out);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_a, "weight") == 700);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_a, "weight"), 700);

	/* Line 3 of this file is the bad one. */
	test_write_file(config_path, "[scheduler]\npolicy = bfq\nmax_inflight = 0\n");
	out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 2);
	char where[600];
	snprintf(where, sizeof(where), "%s:3:", config_path);
	ck_assert_msg(strstr(out, where) != NULL, "reload error does not name %s: %s", where, out);
	free(out);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_a, "weight"), 700);

	/* A file others could have written is not applied, however valid. */
	write_config(900, 100, NULL);
	ck_assert_int_eq(chmod(config_path, 0666), 0);
	out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 2);
	ck_assert_msg(strstr(out, "writable by group or others") != NULL, "%s", out);
	free(out);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_a, "weight"), 700);
	ck_assert_int_eq(chmod(config_path, 0644), 0);

	/* The policy changes live, under the writer's requests, and back. */
	static const char *const policies[] = { "fifo", "bfq" };
	for (size_t i = 0; i < 2; i++) {
		char text[64];
		snprintf(text, sizeof(text), "[scheduler]\npolicy = %s\n", policies[i]);
		write_config(500, 100, text);
		ck_assert_int_eq(kill(m.daemon_pid, SIGHUP), 0);
		await_stat_field(m.mnt, "policy", policies[i]);
		CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_a, "weight") == 500);
		ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_a, "weight"), 500);
		out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, m.mnt);
		ck_assert_msg(status == 0, "reload: %s", out);
		free(out);
		/* The writer was served throughout, and still is. */
		int64_t before = ctl_test_tenant_u64(m.mnt, group_a, "ops.write");
		CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_a, "ops.write") > before);
		ck_assert_int_gt(ctl_test_tenant_u64(m.mnt, group_a, "ops.write"), before);
	}
	stop_child(w);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* The iops and MB/s of the stat reply's KEY ("read_cost"), or -1 if null. */
static void cost_in_stat(const char *mnt, const char *key, int64_t *iops, int64_t *mb_per_s)
{
	struct json_object *mount, *doc = ctl_test_stat(mnt, &mount), *c = NULL, *v;
	ck_assert_msg(json_object_object_get_ex(mount, key, &c), "no %s in stat", key);
	*iops = *mb_per_s = -1;
	if (c) {
		ck_assert(json_object_object_get_ex(c, "iops", &v));
		*iops = json_object_get_int64(v);
		ck_assert(json_object_object_get_ex(c, "mb_per_s", &v));
		*mb_per_s = json_object_get_int64(v);
	}
	json_object_put(doc);
}

/* The store's cost model the daemon bills by is in stat: in the JSON as
 * the config keys say it, in the table's header as a line; a reload
 * changes it on the live mount (calibrated there, given without a new
 * mount). */
START_TEST(stat_names_the_cost_model_in_use)
{
	struct test_mount m;
	write_config(300, 100, "[scheduler]\nread_cost = 50000 3000\n");
	mount_with_config(&m);
	int64_t iops, mb;
	cost_in_stat(m.mnt, "read_cost", &iops, &mb);
	ck_assert_int_eq(iops, 50000);
	ck_assert_int_eq(mb, 3000);
	cost_in_stat(m.mnt, "write_cost", &iops, &mb);
	ck_assert_int_eq(iops, -1);
	int status;
	char *out = ctl_test_capture(&status, "%s stat '%s' 2>&1", FUSESCHED_BIN, m.mnt);
	ck_assert_int_eq(status, 0);
	ck_assert_msg(strstr(out, "\ncost model: read 50000/s 3000 MB/s, write off, dsync off\n"), "%s",
		      out);
	free(out);

	write_config(300, 100, "[scheduler]\nwrite_cost = 40000 2500\ndsync_cost = 9000 700\n");
	out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, m.mnt);
	ck_assert_msg(status == 0, "reload: %s", out);
	free(out);
	CTL_TEST_POLL((cost_in_stat(m.mnt, "write_cost", &iops, &mb), iops == 40000));
	ck_assert_int_eq(iops, 40000);
	ck_assert_int_eq(mb, 2500);
	cost_in_stat(m.mnt, "dsync_cost", &iops, &mb);
	ck_assert_int_eq(iops, 9000);
	ck_assert_int_eq(mb, 700);
	cost_in_stat(m.mnt, "read_cost", &iops, &mb);
	ck_assert_int_eq(iops, -1);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* Reloads the [scheduler] text, which must succeed. */
static void reload_scheduler(const char *mnt, const char *scheduler_text)
{
	char text[512];
	snprintf(text, sizeof(text), "[scheduler]\n%s", scheduler_text);
	write_config(300, 100, text);
	int status;
	char *out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, mnt);
	ck_assert_msg(status == 0, "reload: %s", out);
	free(out);
}

/* A reload changes the scheduler's settings on the live mount, every one of
 * them (max_inflight past the mount's too), and stat shows those in force. */
START_TEST(reload_applies_scheduler_settings_live)
{
	struct test_mount m;
	write_config(300, 100, "[scheduler]\nidle = off\n");
	mount_with_config(&m);
	static const char *const mounted[][2] = {
		{ "idle", "off" }, { "idle_fixed_us", "null" }, { "budget_timeout_ms", "20" },
		{ "busy_poll_us", "200" }, { "reserve_ms", "1000" }, { "work_conserving", "auto" },
		{ "learn_depth", "false" }, { "max_inflight", "32" },
	};
	static const char *const reloaded[][2] = {
		{ "max_inflight", "16" }, { "idle", "fixed" }, { "idle_fixed_us", "500" },
		{ "budget_timeout_ms", "7" }, { "busy_poll_us", "0" }, { "reserve_ms", "50" },
		{ "work_conserving", "no" },
	};
	for (size_t i = 0; i < sizeof(mounted) / sizeof(mounted[0]); i++)
		ck_assert(stat_field_is(m.mnt, mounted[i][0], mounted[i][1]));

	reload_scheduler(m.mnt, "idle = 500\nbudget_timeout_ms = 7\nbusy_poll_us = 0\n"
				"reserve_ms = 50\nwork_conserving = no\nmax_inflight = 16\n");
	for (size_t i = 0; i < sizeof(reloaded) / sizeof(reloaded[0]); i++)
		await_stat_field(m.mnt, reloaded[i][0], reloaded[i][1]);

	/* Past the mount's 32, and the policy with it. */
	reload_scheduler(m.mnt, "max_inflight = 64\npolicy = fifo\n");
	await_stat_field(m.mnt, "max_inflight", "64");
	ck_assert(stat_field_is(m.mnt, "idle", "auto"));
	await_stat_field(m.mnt, "policy", "fifo");

	reload_scheduler(m.mnt, "learn_depth = yes\n");
	await_stat_field(m.mnt, "learn_depth", "true");

	/* The mount still serves its data with the new settings. */
	char path[600];
	snprintf(path, sizeof(path), "%s/after-reload", m.mnt);
	int fd = open(path, O_CREAT | O_RDWR, 0600);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "live", 4, 0), 4);
	char back[4];
	ck_assert_int_eq(pread(fd, back, 4, 0), 4);
	ck_assert(memcmp(back, "live", 4) == 0);
	close(fd);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * A child in cgroup group as uid: opens files prefix-0, prefix-1, ... (up
 * to count, or until an open fails), or the directory prefix count times
 * (directory), writes how many it opened and the errno that stopped it to
 * fd out, then holds them until killed (hold) or exits.
 */
static pid_t spawn_opener_of(const char *group, uid_t uid, const char *prefix, bool directory,
			     int count, bool hold, int out)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		ctl_test_become(group, uid);
		int result[2] = {0, 0};
		for (; result[0] < count; result[0]++) {
			char path[700];
			snprintf(path, sizeof(path), "%s-%d", prefix, result[0]);
			int fd = directory ? open(prefix, O_RDONLY | O_DIRECTORY)
					   : open(path, O_CREAT | O_RDWR, 0600);
			if (fd < 0) {
				result[1] = errno;
				break;
			}
		}
		if (write(out, result, sizeof(result)) != (ssize_t)sizeof(result))
			_exit(11);
		if (hold)
			pause();
		_exit(0);
	}
	return pid;
}

static pid_t spawn_opener(const char *group, uid_t uid, const char *prefix, int count, bool hold,
			  int out)
{
	return spawn_opener_of(group, uid, prefix, false, count, hold, out);
}

static void read_opened(int in, int result[2])
{
	ck_assert_int_eq(read(in, result, 2 * sizeof(int)), (ssize_t)(2 * sizeof(int)));
}

/*
 * Descriptors are shared: a tenant (and a user) holding files, or
 * directories, open stops at its cap with EMFILE, and another tenant's user
 * still opens them. An open directory holds descriptors as a file does and
 * counts against the same cap (the user's files included).
 */
static void open_cap_fails_for_the_holder_only(bool directory)
{
	struct test_mount m;
	mount_two_tenants(&m);
	/* A small limit, so that the caps are reached quickly: 512 / 8 = 64 each. */
	struct rlimit limit;
	ck_assert_int_eq(prlimit(m.daemon_pid, RLIMIT_NOFILE, NULL, &limit), 0);
	limit.rlim_cur = 512;
	ck_assert_int_eq(prlimit(m.daemon_pid, RLIMIT_NOFILE, &limit, NULL), 0);
	enum { CAP = 512 / 8 };
	char dir[600];
	snprintf(dir, sizeof(dir), "%s", test_mnt_path(&m, "listed"));
	if (directory)
		ck_assert_int_eq(mkdir(dir, 0777), 0);
	int pipe_fds[2];
	ck_assert_int_eq(pipe(pipe_fds), 0);
	int result[2];

	pid_t holder = spawn_opener_of(group_a, 2001, directory ? dir : test_mnt_path(&m, "held"),
				       directory, 1000, true, pipe_fds[1]);
	read_opened(pipe_fds[0], result);
	ck_assert_int_eq(result[1], EMFILE);
	ck_assert_int_eq(result[0], CAP);

	/* Another tenant, another user: not affected. */
	pid_t other = spawn_opener_of(group_b, 2002, directory ? dir : test_mnt_path(&m, "other"),
				      directory, 40, false, pipe_fds[1]);
	read_opened(pipe_fds[0], result);
	ck_assert_msg(result[0] == 40, "the other tenant opened %d of 40 (errno %d)", result[0],
		      result[1]);
	ck_assert_int_eq(wait_exit(other), 0);

	/* The holder's user in another tenant: the user's cap, for files too. */
	pid_t same_user = spawn_opener(group_b, 2001, test_mnt_path(&m, "same-user"), 1, false,
				       pipe_fds[1]);
	read_opened(pipe_fds[0], result);
	ck_assert_int_eq(result[0], 0);
	ck_assert_int_eq(result[1], EMFILE);
	ck_assert_int_eq(wait_exit(same_user), 0);

	/* Closed, they count no more. */
	stop_child(holder);
	bool opened = false;
	for (int tries = 0; !opened && tries < 100; tries++) {
		pid_t again = spawn_opener_of(group_b, 2001, directory ? dir : test_mnt_path(&m, "again"),
					      directory, 1, false, pipe_fds[1]);
		read_opened(pipe_fds[0], result);
		wait_exit(again);
		opened = result[0] == 1;
		if (!opened)
			usleep(50000);
	}
	ck_assert(opened);
	close(pipe_fds[0]);
	close(pipe_fds[1]);
	test_mount_require_clean_exit(test_mount_stop(&m));
}

START_TEST(open_files_past_the_cap_fail_for_the_holder_only)
{
	open_cap_fails_for_the_holder_only(false);
}
END_TEST

START_TEST(open_directories_count_against_the_cap_too)
{
	open_cap_fails_for_the_holder_only(true);
}
END_TEST

START_TEST(process_in_its_own_pid_namespace_is_attributed_to_its_cgroup)
{
	write_config(300, 100, NULL);
	ctl_test_cgroup_make(CG_V2, group_b);
	struct test_mount m;
	mount_with_config(&m);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char procs[256], me[32], of[600];
		snprintf(procs, sizeof(procs), "%s%s/cgroup.procs", CG_V2, group_b);
		snprintf(me, sizeof(me), "%d\n", (int)getpid());
		int fd = open(procs, O_WRONLY);
		if (fd < 0 || write(fd, me, strlen(me)) < 0)
			_exit(10);
		close(fd);
		snprintf(of, sizeof(of), "of=%s", test_mnt_path(&m, "ns"));
		execlp("unshare", "unshare", "--pid", "--fork", "dd", "if=/dev/zero", of,
		       "bs=4096", "count=7", "oflag=direct", "status=none", (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(wait_exit(pid), 0);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_b, "ops.write") == 7);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_b, "ops.write"), 7);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_b, "bytes.write"), 7 * 4096);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, group_b, "weight"), 100);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

int main(void)
{
	test_require_root("ctl_tenants", "FUSE mounts, cgroups");
	if (access("/dev/fuse", R_OK | W_OK) != 0 || access(CG_V2 "/cgroup.procs", W_OK) != 0) {
		fprintf(stderr, "SKIP: ctl_tenants: needs /dev/fuse and cgroup v2 at %s\n", CG_V2);
		return 77;
	}
	Suite *s = suite_create("ctl_tenants");
	TCase *tc = tcase_create("real cgroups");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, two_cgroups_counts_weights_and_shares_are_exact);
	tcase_add_test(tc, child_cgroups_of_a_ruled_cgroup_are_its_children_in_stat);
	tcase_add_test(tc, buffered_writes_are_charged_to_the_writers_cgroup);
	tcase_add_test(tc, requests_alone_run_solo_overlapping_ones_are_scheduled);
	tcase_add_test(tc, moved_process_is_reattributed);
	tcase_add_test(tc, blkio_bfq_weight_is_honoured_without_a_rule);
	tcase_add_test(tc, reload_and_sighup_change_weights_while_writing_bad_file_keeps_them);
	tcase_add_test(tc, process_in_its_own_pid_namespace_is_attributed_to_its_cgroup);
	tcase_add_test(tc, open_files_past_the_cap_fail_for_the_holder_only);
	tcase_add_test(tc, open_directories_count_against_the_cap_too);
	tcase_add_test(tc, stat_names_the_cost_model_in_use);
	tcase_add_test(tc, reload_applies_scheduler_settings_live);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
