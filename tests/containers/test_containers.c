/*
 * Real Podman containers with a fusesched volume (`-v MOUNTPOINT:/data`):
 * two containers, weighted by container through the config in the two ways
 * the README shows, each write and read through the volume; `fusesched stat`
 * must show each container's I/O in a tenant of its own (the row's cgroup
 * path holds that container's id) with the configured weight, the table
 * must show the id cut to 12 digits, and what each container wrote must be
 * in the backing directory. Behaviour, not timing.
 *
 * - "class": started with --cgroup-parent CLASS, a rule on CLASS/libpod-*
 *   known before the container exists (every container of the class gets
 *   the weight).
 * - "pinned": created first (`podman create` prints its id), a rule on its
 *   own cgroup CGROUP_PARENT/libpod-ID appended and `fusesched reload`ed,
 *   then started.
 *
 * Podman as the issue found it working on Debian 12 (hybrid cgroups): runc
 * with the cgroupfs manager, explicit nofile/nproc limits, no network; the
 * image is imported from busybox-static (no registry), built here and
 * removed after. Needs root, /dev/fuse, podman, runc and a static
 * /bin/busybox; exits 77 naming what is missing.
 *
 * Cleanup: the mount, config and rootfs are recorded with leftovers.h. The
 * containers, the image and the cgroups runc and conmon leave under the
 * test's cgroup parent (in every hierarchy) are named from the runner's pid,
 * so the runner's unchecked teardown (containers_cleanup, run before
 * leftovers_cleanup unmounts) removes them after a failed test too.
 */
#include "ctl_test_util.h"
#include "leftovers.h"

#include <check.h>
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PODMAN "podman --runtime runc --cgroup-manager cgroupfs"
#define RUN_FLAGS                                                                                  \
	"--network none --pull never --ulimit nofile=1024:1024 --ulimit nproc=1024:1024"
#define CLASS_WEIGHT 300
#define PINNED_WEIGHT 40
#define BLOCKS 32 /* 64 KiB direct writes, then reads, per container */

static pid_t runner;
static char cg_parent[64];                 /* /fusesched-test-containers-PID */
static char class_parent[96];              /* CG_PARENT/class */
static char image[96];                     /* localhost/fusesched-test-busybox-PID */
static char name_class[96], name_pinned[96];
static char config_path[512], rootfs[512];

static void names(void)
{
	runner = getpid();
	snprintf(cg_parent, sizeof(cg_parent), "/fusesched-test-containers-%d", (int)runner);
	snprintf(class_parent, sizeof(class_parent), "%s/class", cg_parent);
	snprintf(image, sizeof(image), "localhost/fusesched-test-busybox-%d", (int)runner);
	snprintf(name_class, sizeof(name_class), "fusesched-test-%d-class", (int)runner);
	snprintf(name_pinned, sizeof(name_pinned), "fusesched-test-%d-pinned", (int)runner);
	snprintf(config_path, sizeof(config_path), "%s/containers-%d.conf", TEST_SCRATCH_DIR,
		 (int)runner);
	snprintf(rootfs, sizeof(rootfs), "%s/containers-%d-rootfs", TEST_SCRATCH_DIR, (int)runner);
}

/* Depth first below one hierarchy's copy of the test's cgroup parent: kill, then rmdir. */
static int remove_cgroup_dir(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (type != FTW_DP)
		return 0;
	char procs[PATH_MAX];
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", path);
	for (int tries = 0; tries < 500 && rmdir(path) < 0 && errno == EBUSY; tries++) {
		FILE *f = fopen(procs, "re");
		int pid;
		while (f && fscanf(f, "%d", &pid) == 1)
			kill(pid, SIGKILL);
		if (f)
			fclose(f);
		usleep(10000);
	}
	return 0;
}

/* runc makes the cgroup parent (and conmon its CLASS/conmon) in every hierarchy, and leaves them. */
static void remove_cgroup_trees(void)
{
	FILE *mi = fopen("/proc/self/mountinfo", "re");
	if (!mi)
		return;
	char line[4096];
	while (fgets(line, sizeof(line), mi)) {
		char mnt[2048], fstype[64];
		const char *sep = strstr(line, " - ");
		if (!sep || sscanf(line, "%*s %*s %*s %*s %2047s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s", fstype) != 1 ||
		    (strcmp(fstype, "cgroup") != 0 && strcmp(fstype, "cgroup2") != 0))
			continue;
		char top[PATH_MAX];
		snprintf(top, sizeof(top), "%s%s", mnt, cg_parent);
		if (access(top, F_OK) == 0)
			nftw(top, remove_cgroup_dir, 16, FTW_DEPTH | FTW_PHYS | FTW_MOUNT);
	}
	fclose(mi);
}

/* Idempotent: the test calls it at its end, the runner's unchecked teardown after a failure. */
static void containers_cleanup(void)
{
	if (!runner)
		return;
	test_sh(PODMAN " rm -f --time 0 %s %s >/dev/null 2>&1", name_class, name_pinned);
	test_sh(PODMAN " rmi -f %s >/dev/null 2>&1", image);
	remove_cgroup_trees();
}

static void containers_init(void)
{
	names();
	leftovers_add_dir(config_path);
	leftovers_add_dir(rootfs);
}

/* The image: a static busybox and the applets the containers run, imported without a registry. */
static void build_image(void)
{
	ck_assert_int_eq(test_sh("rm -rf '%s' && mkdir -p '%s/bin' && cp /bin/busybox '%s/bin/' && "
				 "for a in sh dd echo; do ln -s busybox '%s/bin/'$a; done",
				 rootfs, rootfs, rootfs, rootfs),
			 0);
	ck_assert_msg(test_sh("tar -C '%s' -c . | " PODMAN " import -q - %s >/dev/null", rootfs, image) == 0,
		      "podman import of %s failed", rootfs);
}

/* The workload of container NAME: direct writes and reads, then a line only it writes. */
static void marker(char *buf, size_t size, const char *name)
{
	snprintf(buf, size, "%s wrote this in its container", name);
}

/* `podman create`; the container's id (64 hex digits) into id. */
static void create(char id[65], const char *name, const char *parent, const char *mnt)
{
	char line[128];
	marker(line, sizeof(line), name);
	int status;
	char *out = ctl_test_capture(
		&status,
		PODMAN " create " RUN_FLAGS " --name %s --cgroup-parent %s -v '%s':/data %s "
		       "sh -c 'dd if=/dev/zero of=/data/%s.bin bs=64k count=%d oflag=direct && "
		       "dd if=/data/%s.bin of=/dev/null bs=64k iflag=direct && echo \"%s\" > /data/%s.txt'",
		name, parent, mnt, image, name, BLOCKS, name, line, name);
	ck_assert_msg(status == 0, "podman create %s exited %d: %s", name, status, out);
	/* The id is the last line (warnings, if any, came before it). */
	size_t len = strlen(out);
	while (len && out[len - 1] == '\n')
		out[--len] = '\0';
	const char *last = strrchr(out, '\n') ? strrchr(out, '\n') + 1 : out;
	ck_assert_msg(strlen(last) == 64 && strspn(last, "0123456789abcdef") == 64,
		      "podman create %s printed no id: %s", name, out);
	memcpy(id, last, 65);
	free(out);
}

static struct json_object *row_with_id(struct json_object *mount, const char *id)
{
	struct json_object *tenants, *found = NULL;
	ck_assert(json_object_object_get_ex(mount, "tenants", &tenants));
	for (size_t i = 0; i < json_object_array_length(tenants); i++) {
		struct json_object *t = json_object_array_get_idx(tenants, i), *cg;
		if (json_object_object_get_ex(t, "cgroup", &cg) &&
		    strstr(json_object_get_string(cg), id)) {
			ck_assert_msg(found == NULL, "two tenant rows hold container %s", id);
			found = t;
		}
	}
	ck_assert_msg(found != NULL, "no tenant row holds container %s", id);
	return found;
}

static int64_t at(struct json_object *t, const char *a, const char *b)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(t, a, &v), "no field %s", a);
	if (b)
		ck_assert_msg(json_object_object_get_ex(v, b, &v), "no field %s.%s", a, b);
	return json_object_get_int64(v);
}

static const char *text_at(struct json_object *t, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(t, key, &v), "no field %s", key);
	return json_object_get_string(v);
}

static void check_container_row(struct json_object *mount, const char *id, const char *parent,
				const char *name, int weight)
{
	struct json_object *t = row_with_id(mount, id);
	char expect[256], line[128];
	snprintf(expect, sizeof(expect), "%s/libpod-%s", parent, id);
	ck_assert_str_eq(text_at(t, "cgroup"), expect);
	ck_assert_int_eq(at(t, "weight", NULL), weight);
	ck_assert_str_eq(text_at(t, "weight_source"), "rule");
	marker(line, sizeof(line), name);
	/* Its own bytes only: BLOCKS direct writes and reads, and its line (with echo's newline). */
	ck_assert_int_eq(at(t, "bytes", "write"), BLOCKS * 65536 + (int64_t)strlen(line) + 1);
	ck_assert_int_eq(at(t, "bytes", "read"), BLOCKS * 65536);
	ck_assert_int_ge(at(t, "ops", "write"), BLOCKS + 1);
	ck_assert_int_ge(at(t, "ops", "read"), BLOCKS);
	ck_assert_int_eq(at(t, "errors", NULL), 0);
}

static void check_backing(const struct test_mount *m, const char *name)
{
	char rel[128], line[128], want[160], got[160] = "";
	struct stat st;
	snprintf(rel, sizeof(rel), "%s.bin", name);
	ck_assert_int_eq(stat(test_backing_path(m, rel), &st), 0);
	ck_assert_int_eq(st.st_size, BLOCKS * 65536);
	snprintf(rel, sizeof(rel), "%s.txt", name);
	FILE *f = fopen(test_backing_path(m, rel), "re");
	ck_assert_msg(f != NULL, "%s is not in the backing directory", rel);
	ck_assert_ptr_nonnull(fgets(got, sizeof(got), f));
	fclose(f);
	marker(line, sizeof(line), name);
	snprintf(want, sizeof(want), "%s\n", line);
	ck_assert_str_eq(got, want);
}

START_TEST(two_podman_containers_are_two_weighted_tenants)
{
	char config[1024];
	snprintf(config, sizeof(config),
		 "; Every container started with --cgroup-parent %s.\n"
		 "[group \"%s/libpod-*\"]\nweight = %d\n",
		 class_parent, class_parent, CLASS_WEIGHT);
	test_write_file(config_path, config);
	struct test_mount m;
	const char *args[] = {"-c", config_path, NULL};
	test_mount_start(&m, args);
	build_image();

	char id_class[65], id_pinned[65];
	create(id_class, name_class, class_parent, m.mnt);
	create(id_pinned, name_pinned, cg_parent, m.mnt);
	/* The pinned container's own rule, now that its id is known; live at reload. */
	char rule[512];
	snprintf(rule, sizeof(rule), "\n; Container %s.\n[group \"%s/libpod-%s\"]\nweight = %d\n",
		 name_pinned, cg_parent, id_pinned, PINNED_WEIGHT);
	strncat(config, rule, sizeof(config) - strlen(config) - 1);
	test_write_file(config_path, config);
	int status;
	char *out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, m.mnt);
	ck_assert_msg(status == 0, "reload exited %d: %s", status, out);
	free(out);

	/* Both at once, each in its own cgroup; each exits 0 when its I/O worked. */
	ck_assert_int_eq(test_sh(PODMAN " start %s %s >/dev/null", name_class, name_pinned), 0);
	out = ctl_test_capture(&status, PODMAN " wait %s %s", name_class, name_pinned);
	if (strcmp(out, "0\n0\n") != 0)
		test_sh(PODMAN " logs %s >&2; " PODMAN " logs %s >&2", name_class, name_pinned);
	ck_assert_msg(status == 0 && strcmp(out, "0\n0\n") == 0, "containers exited: %s", out);
	free(out);

	struct json_object *mount, *doc = ctl_test_stat_idle(m.mnt, &mount);
	check_container_row(mount, id_class, class_parent, name_class, CLASS_WEIGHT);
	check_container_row(mount, id_pinned, cg_parent, name_pinned, PINNED_WEIGHT);
	struct json_object *a = row_with_id(mount, id_class), *b = row_with_id(mount, id_pinned);
	ck_assert_int_ne(at(a, "id", NULL), at(b, "id", NULL));
	/* Both are top-level tenants (their unruled parents are transparent); idle, the targets are the weights'. */
	struct json_object *ta, *tb, *pa, *pb;
	ck_assert(json_object_object_get_ex(a, "target_share", &ta));
	ck_assert(json_object_object_get_ex(b, "target_share", &tb));
	ck_assert(json_object_object_get_ex(a, "parent", &pa) && pa == NULL);
	ck_assert(json_object_object_get_ex(b, "parent", &pb) && pb == NULL);
	double ratio = json_object_get_double(ta) / json_object_get_double(tb);
	ck_assert_msg(ratio > (double)CLASS_WEIGHT / PINNED_WEIGHT * 0.999 &&
			      ratio < (double)CLASS_WEIGHT / PINNED_WEIGHT * 1.001,
		      "target ratio %f, weights %d:%d", ratio, CLASS_WEIGHT, PINNED_WEIGHT);
	json_object_put(doc);

	/* The table: each container by its id's first 12 digits, never the whole id. */
	out = ctl_test_capture(&status, "%s stat '%s'", FUSESCHED_BIN, m.mnt);
	ck_assert_msg(status == 0, "stat exited %d: %s", status, out);
	for (int i = 0; i < 2; i++) {
		const char *id = i ? id_pinned : id_class;
		char shortened[96];
		snprintf(shortened, sizeof(shortened), "libpod-%.12s ", id);
		ck_assert_msg(strstr(out, shortened) != NULL, "no %s in the table:\n%s", shortened, out);
		ck_assert_msg(strstr(out, id) == NULL, "whole id %s in the table:\n%s", id, out);
	}
	free(out);

	check_backing(&m, name_class);
	check_backing(&m, name_pinned);

	containers_cleanup();
	test_mount_require_clean_exit(test_mount_stop(&m));
	unlink(config_path);
	test_sh("rm -rf '%s'", rootfs);
}
END_TEST

/* Skips (77) naming what is missing. */
static void require(void)
{
	test_require_root("containers", "FUSE mounts, Podman containers, cgroups");
	const char *missing = NULL;
	if (access("/dev/fuse", R_OK | W_OK) != 0)
		missing = "/dev/fuse";
	else if (test_sh("command -v podman >/dev/null") != 0)
		missing = "podman (apt-get install podman)";
	else if (test_sh("command -v runc >/dev/null") != 0)
		missing = "runc (apt-get install runc)";
	/* A dynamic busybox would find no libc in the image. */
	else if (access("/bin/busybox", X_OK) != 0 || test_sh("ldd /bin/busybox >/dev/null 2>&1") == 0)
		missing = "a static /bin/busybox (apt-get install busybox-static)";
	if (missing) {
		fprintf(stderr, "SKIP: containers: needs %s\n", missing);
		exit(77);
	}
}

int main(void)
{
	require();
	Suite *s = suite_create("containers");
	TCase *tc = tcase_create("podman");
	/* Teardowns run in reverse: the containers go before leftovers_cleanup unmounts their volume. */
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_unchecked_fixture(tc, containers_init, containers_cleanup);
	tcase_set_timeout(tc, 90);
	tcase_add_test(tc, two_podman_containers_are_two_weighted_tenants);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_VERBOSE);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
