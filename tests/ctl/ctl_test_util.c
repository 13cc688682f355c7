#include "ctl_test_util.h"

#include "leftovers.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

char *ctl_test_capture(int *status, const char *fmt, ...)
{
	char cmd[4096];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	FILE *p = popen(cmd, "r");
	ck_assert_msg(p != NULL, "popen %s: %s", cmd, strerror(errno));
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);
	char buf[65536];
	size_t n;
	while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
		fwrite(buf, 1, n, mem);
	fclose(mem);
	int st = pclose(p);
	*status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
	return text;
}

int ctl_test_reload(const char *mnt, const char *conf, const char *text, char **out)
{
	test_write_file(conf, text);
	int status;
	*out = ctl_test_capture(&status, "%s reload '%s' 2>&1", FUSESCHED_BIN, mnt);
	return status;
}

struct json_object *ctl_test_stat(const char *mnt, struct json_object **mount)
{
	int status;
	char *text = ctl_test_capture(&status, "%s stat '%s' --json", FUSESCHED_BIN, mnt);
	ck_assert_msg(status == 0, "stat exited %d: %s", status, text);
	struct json_object *doc = json_tokener_parse(text);
	ck_assert_msg(doc != NULL, "stat --json is not JSON: %s", text);
	free(text);
	struct json_object *mounts;
	ck_assert(json_object_object_get_ex(doc, "mounts", &mounts));
	ck_assert_int_eq(json_object_array_length(mounts), 1);
	*mount = json_object_array_get_idx(mounts, 0);
	return doc;
}

struct json_object *ctl_test_stat_idle(const char *mnt, struct json_object **mount)
{
	struct json_object *doc = NULL;
	for (int i = 0; i < 1000; i++) {
		json_object_put(doc);
		doc = ctl_test_stat(mnt, mount);
		struct json_object *tenants, *interval, *v;
		ck_assert(json_object_object_get_ex(*mount, "tenants", &tenants));
		ck_assert(json_object_object_get_ex(*mount, "interval_s", &interval));
		bool busy = json_object_get_double(interval) <= 0;
		for (size_t t = 0; t < json_object_array_length(tenants); t++)
			busy |= json_object_object_get_ex(json_object_array_get_idx(tenants, t), "active",
							  &v) &&
				json_object_get_boolean(v);
		if (!busy)
			break;
		usleep(20000);
	}
	return doc;
}

void ctl_test_write_direct(const struct test_mount *m, const char *rel, int blocks)
{
	int fd = open(test_mnt_path(m, rel), O_CREAT | O_WRONLY | O_DIRECT, 0644);
	ck_assert_int_ge(fd, 0);
	void *buf;
	ck_assert_int_eq(posix_memalign(&buf, 4096, 4096), 0);
	memset(buf, 'x', 4096);
	for (int i = 0; i < blocks; i++)
		ck_assert_int_eq(pwrite(fd, buf, 4096, (off_t)i * 4096), 4096);
	free(buf);
	close(fd);
}

struct json_object *ctl_test_tenant(struct json_object *mount, const char *cgroup)
{
	struct json_object *tenants;
	if (!json_object_object_get_ex(mount, "tenants", &tenants))
		return NULL;
	for (size_t i = 0; i < json_object_array_length(tenants); i++) {
		struct json_object *t = json_object_array_get_idx(tenants, i), *cg;
		if (json_object_object_get_ex(t, "cgroup", &cg) &&
		    strcmp(json_object_get_string(cg), cgroup) == 0)
			return t;
	}
	return NULL;
}

int64_t ctl_test_tenant_u64(const char *mnt, const char *cgroup, const char *path)
{
	struct json_object *mount;
	struct json_object *doc = ctl_test_stat(mnt, &mount);
	struct json_object *v = ctl_test_tenant(mount, cgroup);
	char key[64];
	while (v && *path) {
		size_t len = strcspn(path, ".");
		snprintf(key, sizeof(key), "%.*s", (int)len, path);
		struct json_object *next = NULL;
		v = json_object_object_get_ex(v, key, &next) ? next : NULL;
		path += len + (path[len] == '.');
	}
	int64_t r = v ? json_object_get_int64(v) : -1;
	json_object_put(doc);
	return r;
}

static char made[64][256];
static int made_count;

void ctl_test_cgroup_make(const char *root, const char *name)
{
	ck_assert_int_lt(made_count, 64);
	/* Also when the test calls exit(); after a failed assertion (_exit) the runner's leftovers cleanup. */
	if (made_count == 0)
		atexit(ctl_test_cgroups_cleanup);
	snprintf(made[made_count], sizeof(made[0]), "%s%s", root, name);
	leftovers_add_cgroup(made[made_count]);
	ck_assert_msg(mkdir(made[made_count], 0755) == 0 || errno == EEXIST, "mkdir %s: %s",
		      made[made_count], strerror(errno));
	made_count++;
}

void ctl_test_cgroup_move(const char *root, const char *name, pid_t pid)
{
	char path[512], text[32];
	snprintf(path, sizeof(path), "%s%s/cgroup.procs", root, name);
	snprintf(text, sizeof(text), "%d\n", (int)pid);
	test_write_file(path, text);
}

void ctl_test_become(const char *name, uid_t uid)
{
	char procs[256], me[32];
	snprintf(procs, sizeof(procs), "%s%s/cgroup.procs", CG_V2, name);
	snprintf(me, sizeof(me), "%d\n", (int)getpid());
	int fd = open(procs, O_WRONLY);
	if (fd < 0 || write(fd, me, strlen(me)) < 0 || setgroups(0, NULL) < 0 ||
	    setresgid(uid, uid, uid) < 0 || setresuid(uid, uid, uid) < 0)
		_exit(90);
	close(fd);
}

/* After a failed assertion writers may still run inside: end them first. */
static void cgroup_kill_members(const char *dir)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
	FILE *f = fopen(path, "re");
	if (!f)
		return;
	int pid;
	while (fscanf(f, "%d", &pid) == 1)
		kill(pid, SIGKILL);
	fclose(f);
}

void ctl_test_cgroups_cleanup(void)
{
	for (int i = made_count - 1; i >= 0; i--) {
		cgroup_kill_members(made[i]);
		/* A child that just exited leaves its cgroup a moment later. */
		for (int tries = 0; tries < 200 && rmdir(made[i]) < 0 && errno == EBUSY; tries++)
			usleep(10000);
	}
	made_count = 0;
}
