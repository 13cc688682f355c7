/* Where the tests put their scratch: see scratch.h. */
#include "scratch.h"

#include "mount_helper.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

/* Room left below it for the suites' own names (struct test_mount's root is 256 bytes). */
#define SCRATCH_DIR_MAX 160
#define NOBODY 65534
#define DIRECT_BYTES 4096
/* How long a process waits for another one choosing (a killed chooser is taken over). */
#define CHOOSING_WAIT_MS 30000

enum { SCRATCH_UNSET, SCRATCH_CHOOSING, SCRATCH_READY, SCRATCH_NONE };

struct scratch_state {
	int state;
	pid_t owner; /* the process that started the program: it removes the directory */
	char dir[SCRATCH_DIR_MAX];
	char why[1024]; /* SCRATCH_NONE: what every candidate lacks, a line each */
};

static struct scratch_state fallback_state;
static struct scratch_state *shared = &fallback_state;

static void scratch_remove(void)
{
	if (__atomic_load_n(&shared->state, __ATOMIC_ACQUIRE) != SCRATCH_READY || getpid() != shared->owner)
		return;
	/* Never through a mount a killed test left in it: its backing may be someone else's. */
	test_sh("rm -rf --one-file-system '%s' 2>/dev/null", shared->dir);
	struct stat st;
	if (lstat(shared->dir, &st) == 0)
		fprintf(stderr, "scratch: %s left behind (something still mounted in it?)\n", shared->dir);
}

/* Mapped before any test forks, so a choice made in a test process is the runner's too. */
__attribute__((constructor)) static void scratch_map(void)
{
	void *p = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		perror("scratch: mmap (the directory is then chosen per test process)");
	else
		shared = p;
	shared->owner = getpid();
	atexit(scratch_remove);
}

/* 0 when a user with no privileges can reach DIR (search it and every directory above), else errno. */
static int reachable_by_others(const char *dir)
{
	pid_t pid = fork();
	if (pid < 0)
		return 0; /* unchecked: the tests that switch users will say so */
	if (pid == 0) {
		if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
		    setresuid(NOBODY, NOBODY, NOBODY) < 0)
			_exit(0); /* not root, or no such uid here: unchecked */
		_exit(access(dir, X_OK) == 0 ? 0 : (errno & 0xff) ? errno & 0xff : EACCES);
	}
	int status;
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status))
		return 0;
	return WEXITSTATUS(status);
}

/* NULL when DIR fits the tests, else what it lacks (the errno in *err). */
static const char *probe(const char *dir, int *err)
{
	char file[SCRATCH_DIR_MAX + 16];
	snprintf(file, sizeof(file), "%s/probe", dir);
	const char *lacks = NULL;
	if ((*err = reachable_by_others(dir)) != 0)
		return "not reachable by an unprivileged user (uid 65534)";
	int fd = open(file, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0644);
	if (fd < 0) {
		*err = errno;
		return "cannot create a file";
	}
	if (fsetxattr(fd, "user.fusesched-probe", "1", 1, 0) < 0)
		lacks = "no user xattrs";
	else if (fgetxattr(fd, "system.posix_acl_access", NULL, 0) < 0 && errno != ENODATA)
		lacks = "no POSIX ACLs";
	*err = errno;
	close(fd);
	if (!lacks) {
		void *buf = NULL;
		fd = open(file, O_RDWR | O_DIRECT | O_CLOEXEC);
		if (fd < 0 || posix_memalign(&buf, DIRECT_BYTES, DIRECT_BYTES) != 0) {
			*err = fd < 0 ? errno : ENOMEM;
			lacks = "no O_DIRECT";
		} else {
			memset(buf, 0, DIRECT_BYTES);
			ssize_t n = pwrite(fd, buf, DIRECT_BYTES, 0);
			*err = n < 0 ? errno : EIO;
			if (n != DIRECT_BYTES)
				lacks = "no O_DIRECT writes";
		}
		free(buf);
		if (fd >= 0)
			close(fd);
	}
	unlink(file);
	return lacks;
}

/* Makes BASE/fusesched-PROGRAM-XXXXXX in shared->dir and probes it; else appends why not to shared->why. */
static bool try_base(const char *base, bool make_base)
{
	char *why = shared->why + strlen(shared->why);
	size_t why_bytes = sizeof(shared->why) - (size_t)(why - shared->why);
	const char *lacks = NULL;
	int err = 0;
	if (strchr(base, '\'')) {
		lacks = "a quote in the path (the tests pass paths through sh)";
	} else {
		if (make_base)
			mkdir(base, 0755);
		if (snprintf(shared->dir, sizeof(shared->dir), "%s/fusesched-%s-XXXXXX", base,
			     program_invocation_short_name) >= (int)sizeof(shared->dir)) {
			lacks = "path too long";
			err = ENAMETOOLONG;
		} else if (!mkdtemp(shared->dir)) {
			lacks = "cannot make a directory in it";
			err = errno;
		} else if (chmod(shared->dir, 0755) < 0) {
			lacks = "cannot chmod a directory in it";
			err = errno;
			rmdir(shared->dir);
		} else if ((lacks = probe(shared->dir, &err)) != NULL) {
			rmdir(shared->dir);
		}
	}
	if (!lacks)
		return true;
	snprintf(why, why_bytes, "  %s: %s%s%s%s\n", base, lacks, err ? " (" : "", err ? strerror(err) : "",
		 err ? ")" : "");
	shared->dir[0] = '\0';
	return false;
}

static void choose(void)
{
	shared->why[0] = '\0';
	const char *env = getenv("FUSESCHED_TEST_SCRATCH");
	bool found;
	if (env && *env) {
		found = try_base(env, true);
	} else {
		found = try_base("/var/tmp", false) || try_base("/tmp", false) ||
			try_base(TEST_BUILD_DIR "/test-scratch", true);
	}
	__atomic_store_n(&shared->state, found ? SCRATCH_READY : SCRATCH_NONE, __ATOMIC_RELEASE);
}

const char *test_scratch_dir(void)
{
	for (int waited_ms = 0;; waited_ms += 10) {
		int state = __atomic_load_n(&shared->state, __ATOMIC_ACQUIRE);
		if (state == SCRATCH_READY)
			return shared->dir;
		if (state == SCRATCH_NONE) {
			fprintf(stderr,
				"scratch: no place for the tests' mounts and files: every test user must reach it, "
				"and its filesystem must have user xattrs, POSIX ACLs and O_DIRECT.\n%s"
				"Set FUSESCHED_TEST_SCRATCH to a directory on such a filesystem (one every user "
				"can search).\n",
				shared->why);
			exit(99);
		}
		int unset = SCRATCH_UNSET;
		if (state == SCRATCH_UNSET || waited_ms >= CHOOSING_WAIT_MS) {
			if (state == SCRATCH_UNSET &&
			    !__atomic_compare_exchange_n(&shared->state, &unset, SCRATCH_CHOOSING, false,
							 __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
				continue;
			choose();
			continue;
		}
		nanosleep(&(struct timespec){.tv_nsec = 10 * 1000 * 1000}, NULL);
	}
}
