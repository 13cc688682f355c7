/*
 * EIO from the backing store, for real: fusesched runs over eiofs, a FUSE
 * filesystem that fails reads, writes and fsyncs of chosen files (see
 * eiofs.c). Callers must get EIO, the daemon must log it and keep serving
 * every other file. fusesched over another FUSE filesystem is itself a
 * supported setup, so the passthrough part is checked too.
 */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define FILE_BYTES 4096
#define MOUNT_WAIT_MS 10000
#define EXIT_WAIT_MS 20000
/*
 * The daemon logs at most one backing error line a second (engine.c): wait
 * that long between failures, plus a second for a clock read before a wait.
 */
#define LOG_LIMIT_WAIT_MS 2000

/* SOURCE --eiofs--> LOWER --fusesched--> MNT; each process's stderr in a file under ROOT. */
struct stack {
	char root[256];
	char source[300];
	char lower[300];
	char mnt[300];
	char daemon_log[300];
	char eiofs_log[300];
	pid_t eiofs_pid;
	pid_t daemon_pid;
};

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static pid_t spawn_logged(const char *log_path, const char *const *argv)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		int fd = open(log_path, O_CREAT | O_WRONLY | O_APPEND, 0644);
		if (fd < 0 || dup2(fd, STDERR_FILENO) < 0)
			_exit(126);
		execv(argv[0], (char **)argv);
		_exit(127);
	}
	return pid;
}

static void wait_for_mount(const char *path, pid_t pid)
{
	for (int waited_ms = 0; waited_ms < MOUNT_WAIT_MS; waited_ms += 10) {
		if (test_is_fuse_mount(path))
			return;
		int status;
		ck_assert_msg(waitpid(pid, &status, WNOHANG) == 0, "mount of %s: process exited first (status %d)",
			      path, status);
		sleep_ms(10);
	}
	ck_abort_msg("%s did not appear within %d ms", path, MOUNT_WAIT_MS);
}

/* Unmounts PATH and reaps PID; the exit status, or 128+signal (killed after EXIT_WAIT_MS). */
static int unmount_and_reap(const char *path, pid_t *pid)
{
	if (*pid <= 0)
		return -1;
	test_sh("fusermount3 -u '%s' 2>/dev/null || umount -l '%s' 2>/dev/null", path, path);
	int status = 0;
	pid_t r = 0;
	for (int waited_ms = 0; waited_ms < EXIT_WAIT_MS && (r = waitpid(*pid, &status, WNOHANG)) == 0;
	     waited_ms += 10)
		sleep_ms(10);
	if (r == 0) {
		kill(*pid, SIGKILL);
		waitpid(*pid, &status, 0);
	}
	*pid = 0;
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* Returns fusesched's exit status; eiofs only has to go away. */
static int stack_down(struct stack *s)
{
	int status = unmount_and_reap(s->mnt, &s->daemon_pid);
	unmount_and_reap(s->lower, &s->eiofs_pid);
	if (s->root[0]) {
		test_sh("rm -rf '%s'", s->root);
		s->root[0] = '\0';
	}
	return status;
}

static void stack_up(struct stack *s)
{
	memset(s, 0, sizeof(*s));
	mkdir(TEST_SCRATCH_DIR, 0755);
	snprintf(s->root, sizeof(s->root), "%s/eio-XXXXXX", TEST_SCRATCH_DIR);
	ck_assert_ptr_nonnull(mkdtemp(s->root));
	/* Taken down by the runner if the test fails (see leftovers.h); mnt first, then lower. */
	leftovers_add_dir(s->root);
	snprintf(s->source, sizeof(s->source), "%s/source", s->root);
	snprintf(s->lower, sizeof(s->lower), "%s/lower", s->root);
	snprintf(s->mnt, sizeof(s->mnt), "%s/mnt", s->root);
	snprintf(s->daemon_log, sizeof(s->daemon_log), "%s/daemon.log", s->root);
	snprintf(s->eiofs_log, sizeof(s->eiofs_log), "%s/eiofs.log", s->root);
	ck_assert_int_eq(mkdir(s->source, 0755), 0);
	ck_assert_int_eq(mkdir(s->lower, 0755), 0);
	ck_assert_int_eq(mkdir(s->mnt, 0755), 0);
	leftovers_add_mount(s->lower);
	leftovers_add_mount(s->mnt);
	const char *eiofs_argv[] = {EIOFS_BIN, s->source, s->lower, "-f", NULL};
	s->eiofs_pid = spawn_logged(s->eiofs_log, eiofs_argv);
	wait_for_mount(s->lower, s->eiofs_pid);
	/* Foreground: the daemon's log lines go to its stderr, which is daemon.log. */
	const char *daemon_argv[] = {FUSESCHED_BIN, "mount", s->lower, s->mnt, "-f", NULL};
	s->daemon_pid = spawn_logged(s->daemon_log, daemon_argv);
	wait_for_mount(s->mnt, s->daemon_pid);
}

static const char *path_in(const char *dir, const char *rel)
{
	static __thread char buf[4][600];
	static __thread int next;
	char *p = buf[next++ % 4];
	snprintf(p, sizeof(buf[0]), "%s/%s", dir, rel);
	return p;
}

/* FILE_BYTES of a pattern that differs per seed and per offset. */
static void fill_pattern(char *buf, unsigned seed)
{
	for (unsigned i = 0; i < FILE_BYTES; i++)
		buf[i] = (char)('a' + (seed * 7 + i) % 26);
}

static void put_file(const char *path, unsigned seed)
{
	char data[FILE_BYTES];
	fill_pattern(data, seed);
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ck_assert_int_eq(write(fd, data, sizeof(data)), (ssize_t)sizeof(data));
	ck_assert_int_eq(close(fd), 0);
}

static void assert_file_is(const char *path, unsigned seed)
{
	char want[FILE_BYTES], got[FILE_BYTES + 1];
	fill_pattern(want, seed);
	int fd = open(path, O_RDONLY);
	ck_assert_msg(fd >= 0, "open %s: %s", path, strerror(errno));
	ssize_t n = read(fd, got, sizeof(got));
	ck_assert_msg(n == FILE_BYTES, "read %s: %zd (%s)", path, n, n < 0 ? strerror(errno) : "short");
	ck_assert_int_eq(close(fd), 0);
	ck_assert_msg(memcmp(want, got, FILE_BYTES) == 0, "%s: wrong content", path);
}

static void assert_daemon_alive(struct stack *s)
{
	int status;
	ck_assert_msg(waitpid(s->daemon_pid, &status, WNOHANG) == 0, "daemon exited (status %d)", status);
	ck_assert_int_eq(kill(s->daemon_pid, 0), 0);
	ck_assert(test_is_fuse_mount(s->mnt));
}

static bool log_has(const char *log_path, const char *needle)
{
	FILE *f = fopen(log_path, "re");
	if (!f)
		return false;
	char line[1024];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static void dump_log(const char *log_path)
{
	test_sh("sed 's/^/    daemon: /' '%s' >&2", log_path);
}

START_TEST(backing_eio_reaches_callers_logged_daemon_keeps_serving)
{
	struct stack s;
	stack_up(&s);
	put_file(path_in(s.source, "good"), 1);
	put_file(path_in(s.source, "bad-eio"), 2);
	/* Passthrough over a FUSE backing works before anything fails. */
	assert_file_is(path_in(s.mnt, "good"), 1);

	char buf[FILE_BYTES];
	int fd = open(path_in(s.mnt, "bad-eio"), O_RDONLY);
	ck_assert_msg(fd >= 0, "open bad-eio: %s", strerror(errno));
	errno = 0;
	ck_assert_int_eq(read(fd, buf, sizeof(buf)), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_int_eq(close(fd), 0);

	/* Past the log rate limit, so the write failure gets its own line. */
	sleep_ms(LOG_LIMIT_WAIT_MS);
	fd = open(path_in(s.mnt, "bad-eio"), O_WRONLY);
	ck_assert_msg(fd >= 0, "open bad-eio for writing: %s", strerror(errno));
	fill_pattern(buf, 3);
	errno = 0;
	ck_assert_int_eq(pwrite(fd, buf, sizeof(buf), 0), -1);
	ck_assert_int_eq(errno, EIO);

	sleep_ms(LOG_LIMIT_WAIT_MS);
	errno = 0;
	ck_assert_int_eq(fsync(fd), -1);
	ck_assert_int_eq(errno, EIO);
	ck_assert_int_eq(close(fd), 0);

	/* Nothing reached the backing file, and its neighbour is intact. */
	assert_file_is(path_in(s.source, "bad-eio"), 2);
	assert_daemon_alive(&s);
	assert_file_is(path_in(s.mnt, "good"), 1);

	/* A good file in the same mount still takes writes and fsyncs. */
	put_file(path_in(s.mnt, "after"), 4);
	fd = open(path_in(s.mnt, "after"), O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fsync(fd), 0);
	ck_assert_int_eq(close(fd), 0);
	assert_file_is(path_in(s.mnt, "after"), 4);
	assert_file_is(path_in(s.source, "after"), 4);
	assert_daemon_alive(&s);

	bool read_line = log_has(s.daemon_log, "fusesched: backing read failed: Input/output error (tenant ");
	bool write_line = log_has(s.daemon_log, "fusesched: backing write failed: Input/output error (tenant ");
	bool fsync_line = log_has(s.daemon_log, "fusesched: backing fsync failed: Input/output error (tenant ");
	if (!read_line || !write_line || !fsync_line)
		dump_log(s.daemon_log);
	ck_assert_msg(read_line, "no log line for the failed read");
	ck_assert_msg(write_line, "no log line for the failed write");
	ck_assert_msg(fsync_line, "no log line for the failed fsync");
	test_mount_require_clean_exit(stack_down(&s));
}
END_TEST

/*
 * A file that breaks while open and heals again, through an O_DIRECT
 * descriptor (no page cache on the fusesched mount can answer instead of
 * the backing store). The O_DIRECT open itself must work on a FUSE backing.
 */
START_TEST(open_file_fails_with_eio_then_recovers_on_same_descriptor)
{
	struct stack s;
	stack_up(&s);
	put_file(path_in(s.source, "flaky"), 5);
	char *buf = NULL;
	ck_assert_int_eq(posix_memalign((void **)&buf, FILE_BYTES, FILE_BYTES), 0);
	int fd = open(path_in(s.mnt, "flaky"), O_RDWR | O_DIRECT);
	ck_assert_msg(fd >= 0, "O_DIRECT open over a FUSE backing: %s", strerror(errno));
	ck_assert_int_eq(pread(fd, buf, FILE_BYTES, 0), FILE_BYTES);
	char want[FILE_BYTES];
	fill_pattern(want, 5);
	ck_assert(memcmp(buf, want, FILE_BYTES) == 0);

	const char *fault = path_in(s.source, "flaky.fault");
	put_file(fault, 0);
	fill_pattern(buf, 6);
	errno = 0;
	ck_assert_int_eq(pwrite(fd, buf, FILE_BYTES, 0), -1);
	ck_assert_int_eq(errno, EIO);
	errno = 0;
	ck_assert_int_eq(pread(fd, buf, FILE_BYTES, 0), -1);
	ck_assert_int_eq(errno, EIO);
	errno = 0;
	ck_assert_int_eq(fsync(fd), -1);
	ck_assert_int_eq(errno, EIO);
	errno = 0;
	ck_assert_int_eq(fdatasync(fd), -1);
	ck_assert_int_eq(errno, EIO);
	assert_daemon_alive(&s);

	/* Healed: the same descriptor works again, and the failed write left nothing behind. */
	ck_assert_int_eq(unlink(fault), 0);
	ck_assert_int_eq(pread(fd, buf, FILE_BYTES, 0), FILE_BYTES);
	ck_assert(memcmp(buf, want, FILE_BYTES) == 0);
	fill_pattern(buf, 7);
	ck_assert_int_eq(pwrite(fd, buf, FILE_BYTES, 0), FILE_BYTES);
	ck_assert_int_eq(fsync(fd), 0);
	ck_assert_int_eq(close(fd), 0);
	free(buf);
	assert_file_is(path_in(s.source, "flaky"), 7);
	assert_file_is(path_in(s.mnt, "flaky"), 7);
	assert_daemon_alive(&s);
	test_mount_require_clean_exit(stack_down(&s));
}
END_TEST

static Suite *backing_eio_suite(void)
{
	Suite *s = suite_create("backing_eio");
	TCase *tc = tcase_create("backing_eio");
	tcase_set_timeout(tc, 120);
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_test(tc, backing_eio_reaches_callers_logged_daemon_keeps_serving);
	tcase_add_test(tc, open_file_fails_with_eio_then_recovers_on_same_descriptor);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("faults_backing_eio", "FUSE mounts");
	SRunner *sr = srunner_create(backing_eio_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
