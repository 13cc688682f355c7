/*
 * Hierarchical tenants in real nested cgroups shaped as Kubernetes, Docker
 * and Podman make them, seen through `fusesched stat --json`: who is whose
 * parent, where the scheduler put each queue (queue_group), the weights, and
 * the targets that follow from them; a delegated subtree whose owner, an
 * unprivileged user, spawns children; reload of a pod's weight; a pod made
 * one tenant; a level made by a weight file rather than a rule. Behaviour, not timing: the shares these targets produce are
 * proven in the simulator (tests/sched, H1-H6) and measured in bench/run.
 * Needs root, /dev/fuse and cgroup v2 at CG_V2; exits 77 without them.
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

#define DELEGATE_UID 2001

static char top[40];
static char config_path[512];

/* Container ids as the runtimes write them: 64 hex digits. */
#define HEX64(c) c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c \
		 c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c c
#define POD_A "kubepods-burstable-podaaaa1111_2222_3333.slice"
#define POD_B "kubepods-burstable-podbbbb1111_2222_3333.slice"
#define K8S "/kubepods.slice/kubepods-burstable.slice"

static char pod_a[160], pod_b[160], kid_a[320], kid_b[3][320];
static char docker[192], session[192], podman[2][192];

static void setup(void)
{
	snprintf(top, sizeof(top), "/ctl-tree-%d", (int)getpid());
	snprintf(config_path, sizeof(config_path), "%s/ctl-tree-%d.conf", TEST_SCRATCH_DIR,
		 (int)getpid());
	mkdir(TEST_SCRATCH_DIR, 0755);
	leftovers_add_dir(config_path);
	snprintf(pod_a, sizeof(pod_a), "%s" K8S "/" POD_A, top);
	snprintf(pod_b, sizeof(pod_b), "%s" K8S "/" POD_B, top);
	snprintf(kid_a, sizeof(kid_a), "%s/cri-containerd-" HEX64("a") ".scope", pod_a);
	static const char *const b_ids[3] = {HEX64("1"), HEX64("2"), HEX64("3")};
	for (int i = 0; i < 3; i++)
		snprintf(kid_b[i], sizeof(kid_b[i]), "%s/cri-containerd-%s.scope", pod_b, b_ids[i]);
	snprintf(docker, sizeof(docker), "%s/system.slice/docker-" HEX64("d") ".scope", top);
	snprintf(session, sizeof(session), "%s/user.slice/user-1000.slice/session-1.scope", top);
	snprintf(podman[0], sizeof(podman[0]), "%s/libpod_parent/libpod-" HEX64("e"), top);
	snprintf(podman[1], sizeof(podman[1]), "%s/libpod_parent/libpod-" HEX64("f"), top);
}

static void teardown(void)
{
	ctl_test_cgroups_cleanup();
	unlink(config_path);
}

/* Makes every missing level of PATH (below CG_V2), outermost first. */
static void cgroup_make_path(const char *path)
{
	char part[256];
	for (const char *slash = strchr(path + 1, '/');; slash = strchr(slash + 1, '/')) {
		size_t len = slash ? (size_t)(slash - path) : strlen(path);
		snprintf(part, sizeof(part), "%.*s", (int)len, path);
		char full[320];
		snprintf(full, sizeof(full), "%s%s", CG_V2, part);
		if (access(full, F_OK) != 0)
			ctl_test_cgroup_make(CG_V2, part);
		if (!slash)
			break;
	}
}

static void write_config(unsigned pod_a_weight, const char *pod_b_extra)
{
	char text[2048];
	snprintf(text, sizeof(text),
		 "[scheduler]\nhonor_cgroup_weights = no\n\n"
		 "[group \"%s/kubepods.slice/**/kubepods-burstable-podaaaa*.slice\"]\nweight = %u\n\n"
		 "[group \"%s/kubepods.slice/**/kubepods-burstable-podbbbb*.slice\"]\nweight = 100\n%s\n"
		 "[group \"%s/system.slice/docker-*.scope\"]\nweight = 200\n\n"
		 "[group \"%s/libpod_parent/libpod-*\"]\nweight = 50\n\n"
		 "[group \"%s/deleg\"]\nweight = 10\n",
		 top, pod_a_weight, top, pod_b_extra ? pod_b_extra : "", top, top, top);
	test_write_file(config_path, text);
}

static void mount_with_config(struct test_mount *m)
{
	const char *args[] = {"-c", config_path, NULL};
	test_mount_start(m, args);
}

/* A child that joins cgroup GROUP under ROOT (v2 as UID unless 0) and
 * writes BLOCKS 4 KiB direct blocks to PATH; exits 0 on success. */
static pid_t spawn_writer_in(const char *root, const char *group, uid_t uid, const char *path,
			     int blocks)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid)
		return pid;
	if (uid)
		ctl_test_become(group, uid);
	else
		ctl_test_cgroup_move(root, group, getpid());
	void *buf;
	if (posix_memalign(&buf, 4096, 4096))
		_exit(1);
	memset(buf, 'x', 4096);
	int fd = open(path, O_CREAT | O_WRONLY | O_DIRECT, 0644);
	if (fd < 0)
		_exit(2);
	for (int i = 0; i < blocks; i++)
		if (pwrite(fd, buf, 4096, (off_t)i * 4096) != 4096)
			_exit(3);
	_exit(close(fd) ? 4 : 0);
}

static void run_writer_in(const char *root, const char *group, uid_t uid, const char *path,
			  int blocks)
{
	int status;
	pid_t pid = spawn_writer_in(root, group, uid, path, blocks);
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "writer in %s: status %d", group,
		      status);
}

static void run_writer(const char *group, uid_t uid, const char *path, int blocks)
{
	run_writer_in(CG_V2, group, uid, path, blocks);
}

static struct json_object *row(struct json_object *mount, const char *cgroup)
{
	struct json_object *t = ctl_test_tenant(mount, cgroup);
	ck_assert_msg(t != NULL, "no tenant row for %s", cgroup);
	return t;
}

/* An integer field, or -1 for null. */
static int64_t field(struct json_object *t, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(t, key, &v), "no field %s", key);
	return v ? json_object_get_int64(v) : -1;
}

static double target(struct json_object *t)
{
	struct json_object *v;
	ck_assert(json_object_object_get_ex(t, "target_share", &v));
	return json_object_get_double(v);
}

/*
 * A rule on each pod (one `**` pattern per pod, at whatever depth the pod
 * slice sits) makes the pod a level: its containers, unruled, are its
 * children, the scheduler's queues of them sit in its group, and they
 * divide its target. The Docker scope and the Podman containers are ruled
 * leaves, at the top as before; the unruled slices above them are
 * transparent, so the Docker scope at 200 still gets twice the session's
 * target although they sit under different slices.
 */
START_TEST(kubernetes_docker_and_podman_shapes_form_the_tree)
{
	write_config(200, NULL);
	const char *leaves[] = {kid_a, kid_b[0], kid_b[1], kid_b[2], docker, session, podman[0],
				podman[1]};
	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++)
		cgroup_make_path(leaves[i]);
	struct test_mount m;
	mount_with_config(&m);
	for (size_t i = 0; i < sizeof(leaves) / sizeof(leaves[0]); i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%zu", i);
		run_writer(leaves[i], 0, test_mnt_path(&m, name), 4);
	}
	struct json_object *mount, *doc = ctl_test_stat_idle(m.mnt, &mount);
	struct json_object *pa = row(mount, pod_a), *pb = row(mount, pod_b);
	ck_assert_int_eq(field(pa, "weight"), 200);
	ck_assert_int_eq(field(pb, "weight"), 100);
	ck_assert_int_eq(field(pa, "parent"), -1);
	ck_assert_int_eq(field(pb, "parent"), -1);

	struct json_object *ka = row(mount, kid_a);
	ck_assert_int_eq(field(ka, "parent"), field(pa, "id"));
	ck_assert_int_eq(field(ka, "queue_group"), field(pa, "id"));
	ck_assert_double_eq_tol(target(ka), target(pa), 1e-9);
	for (int i = 0; i < 3; i++) {
		struct json_object *kb = row(mount, kid_b[i]);
		ck_assert_int_eq(field(kb, "parent"), field(pb, "id"));
		ck_assert_int_eq(field(kb, "queue_group"), field(pb, "id"));
		ck_assert_int_eq(field(kb, "weight"), 100);
		ck_assert_double_eq_tol(target(kb), target(pb) / 3, 1e-9);
	}
	/* Pods 2:1 whatever their container counts: pod A's one container
	 * has six times the target of each of pod B's three. */
	ck_assert_double_eq_tol(target(pa) / target(pb), 2.0, 1e-9);
	ck_assert_double_eq_tol(target(ka) / target(row(mount, kid_b[0])), 6.0, 1e-9);

	struct json_object *d = row(mount, docker), *s = row(mount, session);
	ck_assert_int_eq(field(d, "parent"), -1);
	ck_assert_int_eq(field(d, "queue_group"), -1);
	ck_assert_int_eq(field(s, "parent"), -1);
	ck_assert_double_eq_tol(target(d) / target(s), 2.0, 1e-9);
	for (int i = 0; i < 2; i++) {
		struct json_object *p = row(mount, podman[i]);
		ck_assert_int_eq(field(p, "weight"), 50);
		ck_assert_int_eq(field(p, "parent"), -1);
	}
	json_object_put(doc);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * A user given a subtree (SUBTREE below the test's top, of WEIGHT) makes
 * child cgroups and moves into them: each child is a tenant below the
 * subtree, in the subtree's group, and together they have the subtree's
 * target, never more; before the tree, each had weight 100 of its own at
 * the top.
 */
static void delegated_children_divide(const char *subtree, int weight)
{
	write_config(200, NULL);
	char deleg[64], other[64], kid[4][80];
	snprintf(deleg, sizeof(deleg), "%s/%s", top, subtree);
	snprintf(other, sizeof(other), "%s/other", top);
	cgroup_make_path(deleg);
	cgroup_make_path(other);
	/* Delegation as systemd does it: the subtree's directory and its
	 * procs file belong to the user. */
	char path[700];
	snprintf(path, sizeof(path), "%s%s", CG_V2, deleg);
	ck_assert_int_eq(chown(path, DELEGATE_UID, DELEGATE_UID), 0);
	snprintf(path, sizeof(path), "%s%s/cgroup.procs", CG_V2, deleg);
	ck_assert_int_eq(chown(path, DELEGATE_UID, DELEGATE_UID), 0);
	struct test_mount m;
	mount_with_config(&m);
	ck_assert_int_eq(chmod(m.mnt, 0777), 0);

	for (int i = 0; i < 4; i++) {
		snprintf(kid[i], sizeof(kid[i]), "%s/c%d", deleg, i);
		/* Made by the user, in the user's own subtree. */
		pid_t pid = fork();
		ck_assert_int_ge(pid, 0);
		if (pid == 0) {
			ctl_test_become(deleg, DELEGATE_UID);
			char dir[400];
			snprintf(dir, sizeof(dir), "%s%s", CG_V2, kid[i]);
			_exit(mkdir(dir, 0755) == 0 ? 0 : 1);
		}
		int status;
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "user could not mkdir %s",
			      kid[i]);
		ctl_test_cgroup_make(CG_V2, kid[i]); /* EEXIST: registered for cleanup */
		char name[32];
		snprintf(name, sizeof(name), "u%d", i);
		run_writer(kid[i], DELEGATE_UID, test_mnt_path(&m, name), 4);
	}
	run_writer(other, 0, test_mnt_path(&m, "o"), 4);
	struct json_object *mount, *doc = ctl_test_stat_idle(m.mnt, &mount);
	struct json_object *dr = row(mount, deleg);
	ck_assert_int_eq(field(dr, "weight"), weight);
	double kids_target = 0;
	for (int i = 0; i < 4; i++) {
		struct json_object *k = row(mount, kid[i]);
		ck_assert_int_eq(field(k, "parent"), field(dr, "id"));
		ck_assert_int_eq(field(k, "queue_group"), field(dr, "id"));
		kids_target += target(k);
	}
	ck_assert_double_eq_tol(kids_target, target(dr), 1e-9);
	ck_assert_double_eq_tol(target(dr) / target(row(mount, other)), weight / 100.0, 1e-9);
	json_object_put(doc);
	test_mount_require_clean_exit(test_mount_stop(&m));
}

/* With a rule of weight 10 on the subtree. */
START_TEST(delegated_subtree_children_divide_its_share)
{
	delegated_children_divide("deleg", 10);
}
END_TEST

/* The same without a rule: the delegated cgroup is a level of the default
 * weight (its directory the user's), so its user's cgroups share one
 * default share; before, each was a tenant of its own at the top. */
START_TEST(an_unconfigured_delegated_subtree_divides_one_share)
{
	delegated_children_divide("free", 100);
}
END_TEST

/* A reload that changes a pod's weight reaches the pod and, through it,
 * its containers' targets; their places in the tree stay. */
START_TEST(reload_of_a_pods_weight_reaches_its_containers)
{
	write_config(200, NULL);
	cgroup_make_path(kid_a);
	cgroup_make_path(kid_b[0]);
	struct test_mount m;
	mount_with_config(&m);
	run_writer(kid_a, 0, test_mnt_path(&m, "a"), 4);
	run_writer(kid_b[0], 0, test_mnt_path(&m, "b"), 4);
	struct json_object *mount, *doc = ctl_test_stat_idle(m.mnt, &mount);
	ck_assert_double_eq_tol(target(row(mount, kid_a)) / target(row(mount, kid_b[0])), 2.0, 1e-9);
	json_object_put(doc);

	write_config(600, NULL);
	int status;
	char *out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, m.mnt);
	ck_assert_msg(status == 0, "reload: %s", out);
	free(out);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, pod_a, "weight") == 600);
	doc = ctl_test_stat_idle(m.mnt, &mount);
	struct json_object *pa = row(mount, pod_a), *ka = row(mount, kid_a);
	ck_assert_int_eq(field(pa, "weight"), 600);
	ck_assert_int_eq(field(ka, "parent"), field(pa, "id"));
	ck_assert_int_eq(field(ka, "queue_group"), field(pa, "id"));
	ck_assert_double_eq_tol(target(ka) / target(row(mount, kid_b[0])), 6.0, 1e-9);
	json_object_put(doc);
	/* The pod's containers are still served after the move of weights. */
	run_writer(kid_a, 0, test_mnt_path(&m, "a2"), 2);
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, kid_a, "ops.write") == 6);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, kid_a, "ops.write"), 6);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * With honor_cgroup_weights, a cgroup whose own weight file is set is a
 * level as a ruled one is: here the v1 blkio hierarchy names the tenants
 * (this host's v2 has no io controller) and a pod's blkio.bfq.weight of
 * 300, with no rule anywhere, makes its two containers divide 300 next to
 * a sibling at the default.
 */
START_TEST(a_set_weight_file_makes_a_level)
{
	char wpod[64], kids[2][80], other[64], file[160];
	snprintf(wpod, sizeof(wpod), "%s/wpod", top);
	snprintf(other, sizeof(other), "%s/wother", top);
	ctl_test_cgroup_make(CG_BLKIO, top);
	ctl_test_cgroup_make(CG_BLKIO, wpod);
	ctl_test_cgroup_make(CG_BLKIO, other);
	for (int i = 0; i < 2; i++) {
		snprintf(kids[i], sizeof(kids[i]), "%s/c%d", wpod, i);
		ctl_test_cgroup_make(CG_BLKIO, kids[i]);
	}
	snprintf(file, sizeof(file), "%s%s/blkio.bfq.weight", CG_BLKIO, wpod);
	if (access(file, W_OK) != 0) {
		printf("SKIP: %s missing: this kernel's blkio has no BFQ weights\n", file);
		return;
	}
	test_write_file(file, "300\n");
	test_write_file(config_path, "[tenants]\nhierarchy = blkio\n");
	struct test_mount m;
	mount_with_config(&m);
	run_writer_in(CG_BLKIO, kids[0], 0, test_mnt_path(&m, "k0"), 4);
	run_writer_in(CG_BLKIO, kids[1], 0, test_mnt_path(&m, "k1"), 4);
	run_writer_in(CG_BLKIO, other, 0, test_mnt_path(&m, "o"), 4);
	struct json_object *mount, *doc = ctl_test_stat_idle(m.mnt, &mount);
	struct json_object *pod = row(mount, wpod), *o = row(mount, other);
	ck_assert_int_eq(field(pod, "weight"), 300);
	struct json_object *src;
	ck_assert(json_object_object_get_ex(pod, "weight_source", &src));
	ck_assert_str_eq(json_object_get_string(src), "cgroup");
	for (int i = 0; i < 2; i++) {
		struct json_object *k = row(mount, kids[i]);
		ck_assert_int_eq(field(k, "parent"), field(pod, "id"));
		ck_assert_int_eq(field(k, "queue_group"), field(pod, "id"));
		ck_assert_double_eq_tol(target(k), target(pod) / 2, 1e-9);
	}
	ck_assert_int_eq(field(o, "parent"), -1);
	ck_assert_double_eq_tol(target(pod) / target(o), 3.0, 1e-9);
	json_object_put(doc);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* account = subtree: the pod is one tenant, whichever container writes. */
START_TEST(account_subtree_makes_a_pod_one_tenant)
{
	write_config(200, "account = subtree\n");
	for (int i = 0; i < 3; i++)
		cgroup_make_path(kid_b[i]);
	struct test_mount m;
	mount_with_config(&m);
	for (int i = 0; i < 3; i++) {
		char name[32];
		snprintf(name, sizeof(name), "b%d", i);
		run_writer(kid_b[i], 0, test_mnt_path(&m, name), 3 + i);
	}
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, pod_b, "ops.write") == 3 + 4 + 5);
	struct json_object *mount, *doc = ctl_test_stat_idle(m.mnt, &mount);
	struct json_object *pb = row(mount, pod_b);
	ck_assert_int_eq(field(pb, "parent"), -1);
	ck_assert_int_eq(field(pb, "queue_group"), -1);
	for (int i = 0; i < 3; i++)
		ck_assert_ptr_null(ctl_test_tenant(mount, kid_b[i]));
	json_object_put(doc);
	ck_assert_int_eq(ctl_test_tenant_u64(m.mnt, pod_b, "ops.write"), 12);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

int main(void)
{
	test_require_root("ctl_tree", "FUSE mounts, cgroups, another user");
	if (access("/dev/fuse", R_OK | W_OK) != 0 || access(CG_V2 "/cgroup.procs", W_OK) != 0) {
		fprintf(stderr, "SKIP: ctl_tree: needs /dev/fuse and cgroup v2 at %s\n", CG_V2);
		return 77;
	}
	Suite *s = suite_create("ctl_tree");
	TCase *tc = tcase_create("nested cgroups");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, kubernetes_docker_and_podman_shapes_form_the_tree);
	tcase_add_test(tc, delegated_subtree_children_divide_its_share);
	tcase_add_test(tc, an_unconfigured_delegated_subtree_divides_one_share);
	tcase_add_test(tc, reload_of_a_pods_weight_reaches_its_containers);
	tcase_add_test(tc, account_subtree_makes_a_pod_one_tenant);
	tcase_add_test(tc, a_set_weight_file_makes_a_level);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
