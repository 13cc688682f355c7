/* Test helper: a real fusesched mount over a fresh temporary backing directory (or the test's own). */
#ifndef FUSESCHED_TEST_MOUNT_HELPER_H
#define FUSESCHED_TEST_MOUNT_HELPER_H

#include "scratch.h" /* TEST_SCRATCH_DIR: where the mounts and their backing directories go */

#include <stdbool.h>
#include <sys/types.h>

/*
 * The first thing in main() of a suite that needs root (mounts, cgroups,
 * loop devices, other users' credentials): run as another user it exits 77,
 * which CTest reports as skipped (SKIP_RETURN_CODE), after one line on
 * stderr: "SKIP: SUITE: needs root (WHY)".
 */
void test_require_root(const char *suite, const char *why);

struct test_mount {
	char root[256];       /* temporary directory holding both */
	char backing[300];
	char mnt[300];
	pid_t daemon_pid;
};

/*
 * Creates ROOT/backing and ROOT/mnt and mounts with `fusesched mount -f`
 * plus extra_args (NULL-terminated, may be NULL). Aborts the test run if the
 * mount does not appear. FUSESCHED_TEST_NOFILE=N in the environment gives
 * the daemon a hard descriptor limit of N. The mount and ROOT are recorded
 * for the runner's cleanup after a failed test (leftovers.h); a mount the
 * test makes inside them (under the backing directory) it records itself.
 */
void test_mount_start(struct test_mount *m, const char *const *extra_args);
/*
 * Only the directories (ROOT, its backing and mnt), recorded for the
 * runner's cleanup as test_mount_start does, for a test that mounts by
 * itself (daemonized, with its own redirections).
 */
void test_mount_dirs(struct test_mount *m);
/*
 * The same with fs.pipe-max-size raised for the moment of the daemon's
 * start, so that it can make the pipes it splices large buffered writes
 * through (channel.c) without CAP_SYS_RESOURCE, which a container's root
 * and this project's CI machine lack. Returns the pipes the daemon holds.
 */
int test_mount_start_spliced(struct test_mount *m, const char *const *extra_args);
/* The same with the daemon run under a wrapper command (argv prefix, e.g. valgrind). */
void test_mount_start_under(struct test_mount *m, const char *const *wrapper,
			    const char *const *extra_args);
/*
 * The same over a backing directory the test chose (e.g. one inside a
 * loop-mounted filesystem, loop_fs.h) instead of ROOT/backing: m->backing
 * is that path, and test_mount_stop leaves it and what is in it alone.
 */
void test_mount_start_with_backing(struct test_mount *m, const char *backing,
				   const char *const *extra_args);
/*
 * Over backing (NULL: ROOT/backing), the daemon started with a descriptor
 * limit of nofile that it cannot raise (CAP_SYS_RESOURCE out of its
 * bounding set): the limit it sizes its bounds by at start.
 */
void test_mount_start_nofile(struct test_mount *m, const char *backing, int nofile);

/*
 * eiofs (tests/reliability/eiofs.c) serving the directory source at
 * stalling, both made here: a FUSE store whose reads of a file wait while
 * source/NAME.stall exists, a store that hangs. stalling is recorded for
 * the runner's cleanup; returns eiofs's pid. Down: ended and reaped,
 * unmounted lazily where a fusesched mount above still holds its files
 * (remove the markers first: a read still waiting holds eiofs up).
 */
pid_t test_stalling_store_up(const char *source, const char *stalling);
void test_stalling_store_down(const char *stalling, pid_t eiofs);

/* Is the running kernel at least major.minor? */
bool test_kernel_at_least(int major, int minor);
/* Unmounts, reaps the daemon, removes the directories; returns its exit status. */
int test_mount_stop(struct test_mount *m);

/* Fails the run when the daemon did not exit 0 (sanitizer reports end up here). */
void test_mount_require_clean_exit(int status);

/* Paths below the mount and below the backing directory. */
const char *test_mnt_path(const struct test_mount *m, const char *rel);
const char *test_backing_path(const struct test_mount *m, const char *rel);

/* Is path the root of a FUSE mount right now? */
bool test_is_fuse_mount(const char *path);
/* Is anything mounted on path (a dead FUSE mount included)? From /proc/self/mountinfo. */
bool test_in_mountinfo(const char *path);

/* Runs fn(arg) in a child as uid/gid and returns fn's result (an errno or 0). */
int test_run_as(uid_t uid, gid_t gid, int (*fn)(void *), void *arg);
/* The same with supplementary groups, and a umask (umask_bits < 0: inherited). */
int test_run_as_groups(uid_t uid, gid_t gid, const gid_t *groups, int group_count,
		       int umask_bits, int (*fn)(void *), void *arg);

/* Writes TEXT to PATH (a config file, cgroup.procs, ...); exits 99 naming PATH on failure. */
void test_write_file(const char *path, const char *text);

/* Runs a command line through sh; returns its exit status. */
int test_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Open file descriptors of process pid. */
int test_count_fds(pid_t pid);

/*
 * The number in the first line of /proc/PID/FILE that matches format (one
 * %ld, e.g. "VmHWM: %ld kB" in status), or -1.
 */
long test_proc_number(pid_t pid, const char *file, const char *format);

#endif
