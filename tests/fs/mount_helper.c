/* Test helper: a real fusesched mount over a fresh temporary backing directory (or the test's own). */
#include "mount_helper.h"

#include "leftovers.h"
#include "fusesched/mountinfo.h"

#include <errno.h>
#include <grp.h>
#include <dirent.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FUSE_SUPER_MAGIC 0x65735546

void test_require_root(const char *suite, const char *why)
{
	if (geteuid() == 0)
		return;
	fprintf(stderr, "SKIP: %s: needs root (%s)\n", suite, why);
	exit(77);
}

bool test_is_fuse_mount(const char *path)
{
	struct statfs sf;
	return statfs(path, &sf) == 0 && sf.f_type == FUSE_SUPER_MAGIC;
}

bool test_in_mountinfo(const char *path)
{
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return false;
	char line[4096], field[4096], mnt[4096];
	bool found = false;
	/* The kernel escapes a backslash in the path (as in systemd-escape's \x2d) as \134. */
	while (!found && fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%*s %*s %*s %*s %4095s", field) != 1)
			continue;
		mountinfo_unescape(mnt, sizeof(mnt), field, strlen(field));
		found = strcmp(mnt, path) == 0;
	}
	fclose(f);
	return found;
}

/* How long eiofs may take to mount (test_stalling_store_up). */
#define STALLING_STORE_WAIT_MS 10000

static void die(const char *what)
{
	fprintf(stderr, "test_mount: %s: %s\n", what, strerror(errno));
	exit(99);
}

/*
 * Mounts still up when the test process calls exit() (test_mount_start or
 * test_mount_require_clean_exit giving up) are taken down here at once.
 * A failed assertion ends a forked test with _exit, which skips this: the
 * runner's leftovers cleanup (leftovers.h) takes those down, in every
 * suite that adds its fixture.
 */
#define LIVE_MOUNTS_MAX 16
static struct test_mount live_mounts[LIVE_MOUNTS_MAX];
static pid_t live_mount_owner[LIVE_MOUNTS_MAX]; /* forked test children inherit the list */

static void live_mounts_cleanup(void)
{
	for (int i = 0; i < LIVE_MOUNTS_MAX; i++)
		if (live_mounts[i].daemon_pid > 0 && live_mount_owner[i] == getpid())
			test_mount_stop(&live_mounts[i]);
}

static void live_mounts_track(const struct test_mount *m, bool live)
{
	static bool registered;
	if (!registered) {
		atexit(live_mounts_cleanup);
		registered = true;
	}
	for (int i = 0; i < LIVE_MOUNTS_MAX; i++) {
		if (live && live_mounts[i].daemon_pid <= 0) {
			live_mounts[i] = *m;
			live_mount_owner[i] = getpid();
			return;
		}
		if (!live && strcmp(live_mounts[i].mnt, m->mnt) == 0) {
			live_mounts[i].daemon_pid = 0;
			return;
		}
	}
}

void test_mount_start(struct test_mount *m, const char *const *extra_args)
{
	test_mount_start_under(m, NULL, extra_args);
}

/* Pipes the daemon holds (fs_channel_make_pipes makes them at start). */
static int daemon_pipes(pid_t pid)
{
	char link[96], target[64];
	int n = 0;
	for (int fd = 0; fd < 4096; fd++) {
		snprintf(link, sizeof(link), "/proc/%d/fd/%d", (int)pid, fd);
		ssize_t len = readlink(link, target, sizeof(target) - 1);
		if (len > 5 && !strncmp(target, "pipe:", 5))
			n++;
	}
	return n;
}

int test_mount_start_spliced(struct test_mount *m, const char *const *extra_args)
{
	static const char sysctl[] = "/proc/sys/fs/pipe-max-size";
	char old_max[32] = "";
	FILE *f = fopen(sysctl, "r");
	if (!f || !fgets(old_max, sizeof(old_max), f))
		die("read /proc/sys/fs/pipe-max-size");
	fclose(f);
	test_write_file(sysctl, "4194304\n");
	test_mount_start(m, extra_args);
	test_write_file(sysctl, old_max);
	return daemon_pipes(m->daemon_pid);
}

/*
 * ROOT (recorded for the runner's cleanup) with mnt in it, and the backing
 * directory: BACKING when the test gives one (its own, left alone), else
 * ROOT/backing, made here.
 */
static void make_dirs(struct test_mount *m, const char *backing)
{
	memset(m, 0, sizeof(*m));
	if (backing && strlen(backing) >= sizeof(m->backing)) {
		errno = ENAMETOOLONG;
		die(backing);
	}
	/* Where every test user reaches it, on a filesystem with user xattrs, ACLs and O_DIRECT (scratch.h). */
	snprintf(m->root, sizeof(m->root), "%s/mnt-XXXXXX", TEST_SCRATCH_DIR);
	if (!mkdtemp(m->root))
		die("mkdtemp");
	/* Taken down by the runner if the test fails (leftovers.h): the mount first, then the directory. */
	leftovers_add_dir(m->root);
	chmod(m->root, 0755);
	snprintf(m->mnt, sizeof(m->mnt), "%s/mnt", m->root);
	if (mkdir(m->mnt, 0755) < 0)
		die("mkdir");
	if (backing) {
		snprintf(m->backing, sizeof(m->backing), "%s", backing);
	} else {
		snprintf(m->backing, sizeof(m->backing), "%s/backing", m->root);
		if (mkdir(m->backing, 0777) < 0)
			die("mkdir");
		chmod(m->backing, 01777); /* other users' tests create files in it */
	}
	leftovers_add_mount(m->mnt);
}

void test_mount_dirs(struct test_mount *m)
{
	make_dirs(m, NULL);
}

/* Runs the daemon (under wrapper, an argv prefix, if given) on m's directories; waits for the mount. */
static void start_daemon(struct test_mount *m, const char *const *wrapper, const char *const *extra_args)
{
	const char *argv[64];
	int argc = 0;
	for (int i = 0; wrapper && wrapper[i] && argc < 32; i++)
		argv[argc++] = wrapper[i];
	const char *mount_args[] = {FUSESCHED_BIN, "mount", m->backing, m->mnt, "-f"};
	for (size_t i = 0; i < sizeof(mount_args) / sizeof(mount_args[0]); i++)
		argv[argc++] = mount_args[i];
	for (int i = 0; extra_args && extra_args[i] && argc < 63; i++)
		argv[argc++] = extra_args[i];
	argv[argc] = NULL;
	/* A wrapper (valgrind) starts slowly: wait up to 60 s instead of 10. */
	int wait_polls = wrapper ? 6000 : 1000;
	m->daemon_pid = fork();
	if (m->daemon_pid < 0)
		die("fork");
	if (m->daemon_pid == 0) {
		execvp(argv[0], (char **)argv);
		_exit(127);
	}
	for (int i = 0; i < wait_polls; i++) {
		if (test_is_fuse_mount(m->mnt)) {
			live_mounts_track(m, true);
			/* Lowered once it runs: the daemon raises its own limit at start. */
			const char *nofile = getenv("FUSESCHED_TEST_NOFILE");
			if (nofile) {
				rlim_t n = (rlim_t)strtoul(nofile, NULL, 10);
				if (prlimit(m->daemon_pid, RLIMIT_NOFILE, &(struct rlimit){n, n}, NULL) < 0)
					die("prlimit");
			}
			return;
		}
		int status;
		if (waitpid(m->daemon_pid, &status, WNOHANG) == m->daemon_pid) {
			fprintf(stderr, "test_mount: daemon exited (status %d) before mounting\n", status);
			exit(99);
		}
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
	fprintf(stderr, "test_mount: %s did not appear within %d s\n", m->mnt, wait_polls / 100);
	exit(99);
}

void test_mount_start_under(struct test_mount *m, const char *const *wrapper,
			    const char *const *extra_args)
{
	make_dirs(m, NULL);
	start_daemon(m, wrapper, extra_args);
}

void test_mount_start_with_backing(struct test_mount *m, const char *backing,
				   const char *const *extra_args)
{
	make_dirs(m, backing);
	start_daemon(m, NULL, extra_args);
}

void test_mount_start_nofile(struct test_mount *m, const char *backing, int nofile)
{
	char limit[64];
	snprintf(limit, sizeof(limit), "--nofile=%d:%d", nofile, nofile);
	const char *const wrapper[] = {"setpriv", "--bounding-set=-sys_resource", "prlimit", limit,
				       NULL};
	make_dirs(m, backing);
	start_daemon(m, wrapper, NULL);
}

bool test_kernel_at_least(int major, int minor)
{
	struct utsname u;
	int have_major = 0, have_minor = 0;
	return uname(&u) == 0 && sscanf(u.release, "%d.%d", &have_major, &have_minor) == 2 &&
	       (have_major > major || (have_major == major && have_minor >= minor));
}

pid_t test_stalling_store_up(const char *source, const char *stalling)
{
	if (mkdir(source, 0755) < 0 || mkdir(stalling, 0755) < 0)
		die("mkdir");
	leftovers_add_mount(stalling);
	pid_t eiofs = fork();
	if (eiofs < 0)
		die("fork");
	if (eiofs == 0) {
		execl(EIOFS_BIN, EIOFS_BIN, source, stalling, "-f", (char *)NULL);
		_exit(127);
	}
	for (int waited_ms = 0; !test_is_fuse_mount(stalling); waited_ms += 10) {
		if (waited_ms >= STALLING_STORE_WAIT_MS || waitpid(eiofs, NULL, WNOHANG) != 0) {
			fprintf(stderr, "test_mount: eiofs did not mount %s\n", stalling);
			exit(99);
		}
		usleep(10000);
	}
	return eiofs;
}

void test_stalling_store_down(const char *stalling, pid_t eiofs)
{
	/* libfuse unmounts as it exits, lazily where a mount above holds its files. */
	kill(eiofs, SIGTERM);
	waitpid(eiofs, NULL, 0);
	if (test_in_mountinfo(stalling))
		test_sh("umount -l '%s'", stalling);
}

int test_mount_stop(struct test_mount *m)
{
	int status = -1;
	live_mounts_track(m, false);
	if (m->daemon_pid > 0) {
		test_sh("fusermount3 -u '%s' 2>/dev/null || umount -l '%s'", m->mnt, m->mnt);
		/* A hang guard only: valgrind's leak check at exit takes seconds. */
		for (int i = 0; i < 6000; i++) {
			pid_t r = waitpid(m->daemon_pid, &status, WNOHANG);
			if (r == m->daemon_pid)
				break;
			if (r < 0) /* not our child (any more): nothing to reap or kill */
				break;
			nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
			if (i == 5999) {
				kill(m->daemon_pid, SIGKILL);
				waitpid(m->daemon_pid, &status, 0);
			}
		}
		m->daemon_pid = 0;
	}
	test_sh("umount '%s/backing/sub' 2>/dev/null; rm -rf '%s'", m->root, m->root);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

void test_mount_require_clean_exit(int status)
{
	if (status != 0) {
		fprintf(stderr, "test_mount: daemon exited with status %d\n", status);
		exit(1);
	}
}

const char *test_mnt_path(const struct test_mount *m, const char *rel)
{
	static __thread char buf[4][512];
	static __thread int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", m->mnt, rel);
	return p;
}

const char *test_backing_path(const struct test_mount *m, const char *rel)
{
	static __thread char buf[4][512];
	static __thread int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", m->backing, rel);
	return p;
}

int test_run_as(uid_t uid, gid_t gid, int (*fn)(void *), void *arg)
{
	return test_run_as_groups(uid, gid, NULL, 0, -1, fn, arg);
}

int test_run_as_groups(uid_t uid, gid_t gid, const gid_t *groups, int group_count,
		       int umask_bits, int (*fn)(void *), void *arg)
{
	pid_t pid = fork();
	if (pid < 0)
		return errno;
	if (pid == 0) {
		if (setgroups((size_t)group_count, groups) < 0 || setresgid(gid, gid, gid) < 0 ||
		    setresuid(uid, uid, uid) < 0)
			_exit(200);
		if (umask_bits >= 0)
			umask((mode_t)umask_bits);
		_exit(fn(arg) & 0xff);
	}
	int status;
	waitpid(pid, &status, 0);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

void test_write_file(const char *path, const char *text)
{
	char what[320];
	snprintf(what, sizeof(what), "write %s", path);
	FILE *f = fopen(path, "w");
	if (!f)
		die(what);
	fputs(text, f);
	if (fclose(f) != 0)
		die(what);
}

int test_sh(const char *fmt, ...)
{
	char cmd[2048];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	int status = system(cmd);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 255;
}

long test_proc_number(pid_t pid, const char *file, const char *format)
{
	char path[64], line[256];
	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
	FILE *f = fopen(path, "r");
	long value = -1;
	while (f && fgets(line, sizeof(line), f))
		if (sscanf(line, format, &value) == 1)
			break;
	if (f)
		fclose(f);
	return value;
}

int test_count_fds(pid_t pid)
{
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/fd", pid);
	DIR *d = opendir(path);
	if (!d)
		return -1;
	int n = 0;
	for (struct dirent *e; (e = readdir(d));)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}
