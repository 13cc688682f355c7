/*
 * Journal pair: a writer whose every request waits for another tenant's
 * write+fdatasync, as a database whose WAL writer lives in a sidecar cgroup
 * (DESIGN.md section 2, lesson 1).
 *
 *   journalpair DIR SECONDS BYTES WRITER_PROCS JOURNAL_PROCS
 *
 * Two child processes are forked. Each first moves itself into its cgroups by
 * writing its pid to every file in the comma-separated list (cgroup.procs
 * paths; "-" for none). The writer loops for SECONDS: pwrite(BYTES) to
 * DIR/jp-data.dat, then hands a token to the journal over a pipe and waits for
 * the answer; the journal pwrite(BYTES)s to DIR/jp-journal.dat, fdatasyncs and
 * answers. Prints one JSON object: the writer's KB/s (1000 bytes), operations,
 * p99 and max of one round trip in microseconds.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WRAP_BYTES (64L << 20) /* files are rewritten from the start past this */

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	const double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void die(const char *what)
{
	fprintf(stderr, "journalpair: %s: %s\n", what, strerror(errno));
	_exit(1);
}

/* Writes our pid to each cgroup.procs path in LIST (comma-separated). */
static void join_cgroups(const char *list)
{
	if (strcmp(list, "-") == 0)
		return;
	char *copy = strdup(list), *save = NULL;
	if (!copy)
		die("strdup");
	for (char *path = strtok_r(copy, ",", &save); path; path = strtok_r(NULL, ",", &save)) {
		FILE *f = fopen(path, "w");
		if (!f || fprintf(f, "%d\n", (int)getpid()) < 0 || fclose(f) != 0)
			die(path);
	}
	free(copy);
}

static int open_in(const char *dir, const char *name)
{
	char path[4096];
	if (snprintf(path, sizeof(path), "%s/%s", dir, name) >= (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		die(name);
	}
	const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		die(path);
	return fd;
}

static void journal_loop(int fd, int req_fd, int ack_fd, const char *buf, size_t bytes)
{
	off_t off = 0;
	char token;
	while (read(req_fd, &token, 1) == 1) {
		if (pwrite(fd, buf, bytes, off) != (ssize_t)bytes)
			die("journal pwrite");
		if (fdatasync(fd) != 0)
			die("journal fdatasync");
		off = (off + (off_t)bytes) % WRAP_BYTES;
		if (write(ack_fd, &token, 1) != 1)
			die("journal ack");
	}
}

static void writer_loop(int fd, int req_fd, int ack_fd, const char *buf, size_t bytes,
			double seconds)
{
	size_t cap = 1 << 16, n = 0;
	double *lat_us = malloc(cap * sizeof(*lat_us));
	if (!lat_us)
		die("malloc");
	off_t off = 0;
	const double start = now_us(), end = start + seconds * 1e6;
	double t = start;
	while (t < end) {
		char token = 'j';
		if (pwrite(fd, buf, bytes, off) != (ssize_t)bytes)
			die("writer pwrite");
		if (write(req_fd, &token, 1) != 1 || read(ack_fd, &token, 1) != 1)
			die("writer pipe");
		off = (off + (off_t)bytes) % WRAP_BYTES;
		const double done = now_us();
		if (n == cap) {
			cap *= 2;
			double *more = realloc(lat_us, cap * sizeof(*lat_us));
			if (!more)
				die("realloc");
			lat_us = more;
		}
		lat_us[n++] = done - t;
		t = done;
	}
	const double elapsed_s = (t - start) / 1e6;
	double p99 = 0, max = 0;
	if (n > 0) {
		qsort(lat_us, n, sizeof(*lat_us), cmp_double);
		p99 = lat_us[(size_t)((double)(n - 1) * 0.99)];
		max = lat_us[n - 1];
	}
	printf("{\"writer_kbps\": %.1f, \"ops\": %zu, \"seconds\": %.3f, \"p99_us\": %.0f, "
	       "\"max_us\": %.0f, \"bytes\": %zu}\n",
	       (double)n * (double)bytes / 1e3 / elapsed_s, n, elapsed_s, p99, max, bytes);
	fflush(stdout);
	free(lat_us);
}

int main(int argc, char **argv)
{
	if (argc != 6) {
		fprintf(stderr, "usage: %s DIR SECONDS BYTES WRITER_PROCS JOURNAL_PROCS\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	const double seconds = atof(argv[2]);
	const long bytes = atol(argv[3]);
	if (seconds <= 0 || bytes <= 0 || bytes > (1L << 20)) {
		fprintf(stderr, "journalpair: SECONDS > 0 and 0 < BYTES <= 1 MiB\n");
		return 2;
	}
	char *buf = malloc((size_t)bytes);
	if (!buf)
		die("malloc");
	memset(buf, 'w', (size_t)bytes);

	int req[2], ack[2];
	if (pipe(req) != 0 || pipe(ack) != 0)
		die("pipe");
	const pid_t journal = fork();
	if (journal < 0)
		die("fork");
	if (journal == 0) {
		close(req[1]);
		close(ack[0]);
		join_cgroups(argv[5]);
		journal_loop(open_in(dir, "jp-journal.dat"), req[0], ack[1], buf, (size_t)bytes);
		_exit(0);
	}
	const pid_t writer = fork();
	if (writer < 0)
		die("fork");
	if (writer == 0) {
		close(req[0]);
		close(ack[1]);
		join_cgroups(argv[4]);
		writer_loop(open_in(dir, "jp-data.dat"), req[1], ack[0], buf, (size_t)bytes, seconds);
		close(req[1]); /* the journal sees EOF and exits */
		_exit(0);
	}
	close(req[0]);
	close(req[1]);
	close(ack[0]);
	close(ack[1]);
	int status, failed = 0;
	for (int i = 0; i < 2; i++) {
		if (wait(&status) < 0)
			die("wait");
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			failed = 1;
			kill(writer, SIGTERM);
			kill(journal, SIGTERM);
		}
	}
	free(buf);
	return failed;
}
