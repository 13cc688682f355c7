/*
 * bench/flood's helper: the victim's prober and four of the attackers.
 *
 *   floodprobe victim DIR FILE SECONDS
 *     every 50 ms: stat DIR/.missing-N (a new name each time, so the kernel
 *     cannot answer from a cached negative dentry; ENOENT expected), then
 *     open FILE, read 4 KiB, drop the kernel's cached pages of it
 *     (POSIX_FADV_DONTNEED: it keeps them across opens of an unchanged
 *     file, and the next read would never reach the daemon), close. One
 *     line per probe on stdout:
 *     "<t_ms> <stat_us> <stat_errno> <read_us> <read_errno> <stat_cpu_wait_us>
 *     <read_cpu_wait_us>" (errno 0: as expected; a stat that found the name
 *     reports -1). The CPU waits are the prober's own time runnable but not
 *     running during each part (the run delay of /proc/thread-self/schedstat;
 *     -1 where the kernel keeps none): what no filesystem can give back.
 *   floodprobe meta DIR NPROC SECONDS
 *     NPROC processes, each in DIR/pN, loop create (O_CREAT + close), stat
 *     and unlink over 16 names; prints "ops <total> seconds <s> errors <n>".
 *   floodprobe list DIR NPROC SECONDS
 *     makes DIR/l with LIST_FILES files (once), then NPROC processes loop
 *     over it as `ls -l` does: read the directory, lstat each entry and
 *     read its ACL; prints "ops <entries listed> seconds <s> errors <n>".
 *   floodprobe openfiles DIR NPROC SECONDS
 *     NPROC processes raise their soft RLIMIT_NOFILE to the hard limit, each
 *     opens DIR/oN over and over until an open fails or SECONDS pass, then
 *     holds what it opened until SECONDS pass; prints "opened <total>
 *     seconds_to_error <s> errors <errno-name>:<procs>,...".
 *   floodprobe spray CGROUP MNT COUNT
 *     (root) COUNT child cgroups CGROUP/cN; for each, a process moved into
 *     it stats MNT/.spray-N once (ENOENT expected); prints "created <n>
 *     touched <n> seconds <s> errors <n>".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* This thread's total time waiting for a CPU while runnable, in us (-1: unknown). */
static double cpu_wait_us(int schedstat_fd)
{
	char buf[128];
	ssize_t n = schedstat_fd < 0 ? -1 : pread(schedstat_fd, buf, sizeof(buf) - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	unsigned long long run_delay_ns; /* the second field, after the time on a CPU */
	if (sscanf(buf, "%*u %llu", &run_delay_ns) != 1)
		return -1;
	return run_delay_ns / 1e3;
}

static double wait_between(double a, double b)
{
	return a < 0 || b < 0 ? -1 : b - a;
}

static const char *errname(int e)
{
	const char *n = strerrorname_np(e);
	return n ? n : "?";
}

static int victim(const char *dir, const char *file, double secs)
{
	char path[4096], buf[4096];
	struct timespec next;
	double start = now_s();
	clock_gettime(CLOCK_MONOTONIC, &next);
	setvbuf(stdout, NULL, _IOLBF, 0);
	int schedstat_fd = open("/proc/thread-self/schedstat", O_RDONLY | O_CLOEXEC);
	for (unsigned long n = 0; now_s() - start < secs; n++) {
		struct stat st;
		double w0 = cpu_wait_us(schedstat_fd);
		double t0 = now_s();
		snprintf(path, sizeof(path), "%s/.missing-%d-%lu", dir, (int)getpid(), n);
		int serr = stat(path, &st) == 0 ? -1 : (errno == ENOENT ? 0 : errno);
		double t1 = now_s();
		double w1 = cpu_wait_us(schedstat_fd);
		double t1r = now_s();
		int rerr = 0;
		int fd = open(file, O_RDONLY | O_CLOEXEC);
		if (fd < 0) {
			rerr = errno;
		} else {
			ssize_t got = read(fd, buf, sizeof(buf));
			if (got < 0)
				rerr = errno;
			else if (got != (ssize_t)sizeof(buf))
				rerr = EIO;
			(void)posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
			if (close(fd) < 0 && !rerr)
				rerr = errno;
		}
		double t2 = now_s();
		double w2 = cpu_wait_us(schedstat_fd);
		printf("%.1f %.1f %d %.1f %d %.1f %.1f\n", (t0 - start) * 1e3, (t1 - t0) * 1e6, serr,
		       (t2 - t1r) * 1e6, rerr, wait_between(w0, w1), wait_between(w1, w2));
		/* The next slot 50 ms on; slots a slow probe overran are skipped. */
		next.tv_nsec += 50 * 1000 * 1000;
		if (next.tv_nsec >= 1000000000) {
			next.tv_sec++;
			next.tv_nsec -= 1000000000;
		}
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		while (now.tv_sec > next.tv_sec || (now.tv_sec == next.tv_sec && now.tv_nsec > next.tv_nsec)) {
			next.tv_nsec += 50 * 1000 * 1000;
			if (next.tv_nsec >= 1000000000) {
				next.tv_sec++;
				next.tv_nsec -= 1000000000;
			}
		}
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
	}
	if (schedstat_fd >= 0)
		close(schedstat_fd);
	return 0;
}

/* Shared counters of the forked workers. */
struct worker_result {
	_Atomic unsigned long ops;
	_Atomic unsigned long errors;
	_Atomic int first_errno;
	double error_at;
};

static struct worker_result *shared_results(int nproc)
{
	void *p = mmap(NULL, sizeof(struct worker_result) * (size_t)nproc, PROT_READ | PROT_WRITE,
		       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		perror("mmap");
		exit(1);
	}
	return p;
}

static void wait_all(void)
{
	while (wait(NULL) > 0 || errno == EINTR)
		;
}

static void meta_worker(const char *dir, int id, double end, struct worker_result *r)
{
	char sub[4096], path[4200];
	snprintf(sub, sizeof(sub), "%s/p%d", dir, id);
	if (mkdir(sub, 0755) < 0 && errno != EEXIST) {
		r->first_errno = errno;
		r->errors++;
		return;
	}
	while (now_s() < end) {
		for (int i = 0; i < 16; i++) {
			struct stat st;
			snprintf(path, sizeof(path), "%s/f%d", sub, i);
			int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
			if (fd < 0 || close(fd) < 0 || stat(path, &st) < 0 || unlink(path) < 0) {
				if (!r->errors++)
					r->first_errno = errno;
				if (fd >= 0)
					unlink(path);
				continue;
			}
			r->ops += 3;
		}
	}
}

#define LIST_FILES 2000

static int list_prepare(const char *dir)
{
	char sub[4096], path[4200];
	snprintf(sub, sizeof(sub), "%s/l", dir);
	if (mkdir(sub, 0755) < 0 && errno != EEXIST)
		return -errno;
	for (int i = 0; i < LIST_FILES; i++) {
		snprintf(path, sizeof(path), "%s/f%05d", sub, i);
		int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
		if (fd < 0)
			return -errno;
		close(fd);
	}
	return 0;
}

static void list_worker(const char *dir, double end, struct worker_result *r)
{
	char sub[4096];
	snprintf(sub, sizeof(sub), "%s/l", dir);
	while (now_s() < end) {
		DIR *d = opendir(sub);
		if (!d) {
			if (!r->errors++)
				r->first_errno = errno;
			continue;
		}
		struct dirent *e;
		while ((e = readdir(d))) {
			struct stat st;
			char acl[256];
			if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
				if (!r->errors++)
					r->first_errno = errno;
				continue;
			}
			char path[4400];
			snprintf(path, sizeof(path), "%s/%s", sub, e->d_name);
			lgetxattr(path, "system.posix_acl_access", acl, sizeof(acl));
			r->ops++;
		}
		closedir(d);
	}
}

static void openfiles_worker(const char *dir, int id, double start, double end,
			     struct worker_result *r)
{
	char path[4200];
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	snprintf(path, sizeof(path), "%s/o%d", dir, id);
	int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0) {
		r->first_errno = errno;
		r->errors++;
		r->error_at = now_s() - start;
		return;
	}
	r->ops++;
	while (now_s() < end) {
		if (open(path, O_RDONLY | O_CLOEXEC) < 0) {
			r->first_errno = errno;
			r->errors++;
			r->error_at = now_s() - start;
			break;
		}
		r->ops++;
	}
	while (now_s() < end)
		usleep(100 * 1000);
}

static int workers(const char *what, const char *dir, int nproc, double secs)
{
	struct worker_result *res = shared_results(nproc);
	if (!strcmp(what, "list")) {
		int e = list_prepare(dir);
		if (e < 0) {
			printf("ops 0 seconds 0 errors 1 first_error %s\n", errname(-e));
			return 0;
		}
	}
	double start = now_s(), end = start + secs;
	for (int i = 0; i < nproc; i++) {
		pid_t pid = fork();
		if (pid < 0) {
			perror("fork");
			break;
		}
		if (pid == 0) {
			if (!strcmp(what, "meta"))
				meta_worker(dir, i, end, &res[i]);
			else if (!strcmp(what, "list"))
				list_worker(dir, end, &res[i]);
			else
				openfiles_worker(dir, i, start, end, &res[i]);
			_exit(0);
		}
	}
	wait_all();
	double took = now_s() - start;
	unsigned long ops = 0, errors = 0;
	for (int i = 0; i < nproc; i++) {
		ops += res[i].ops;
		errors += res[i].errors;
	}
	if (strcmp(what, "openfiles") != 0) {
		printf("ops %lu seconds %.2f errors %lu", ops, took, errors);
		for (int i = 0; i < nproc; i++)
			if (res[i].errors) {
				printf(" first_error %s", errname(res[i].first_errno));
				break;
			}
		printf("\n");
		return 0;
	}
	/* openfiles: which errors ended the opening, in how many processes. */
	double first_error_at = -1;
	printf("opened %lu seconds %.2f procs_stopped_by_error %lu errors", ops, took, errors);
	int seen[4096] = {0};
	for (int i = 0; i < nproc; i++) {
		int e = res[i].first_errno;
		if (!res[i].errors || e <= 0 || e >= 4096 || seen[e])
			continue;
		int count = 0;
		for (int j = i; j < nproc; j++)
			count += res[j].errors && res[j].first_errno == e;
		seen[e] = 1;
		printf(" %s:%d", errname(e), count);
	}
	for (int i = 0; i < nproc; i++)
		if (res[i].errors && (first_error_at < 0 || res[i].error_at < first_error_at))
			first_error_at = res[i].error_at;
	printf(" first_error_at %.2f\n", first_error_at);
	return 0;
}

static int spray(const char *cg, const char *mnt, int count)
{
	char dir[4096], path[4200];
	double start = now_s();
	int created = 0, touched = 0, errors = 0;
	for (int i = 0; i < count; i++) {
		snprintf(dir, sizeof(dir), "%s/c%04d", cg, i);
		if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
			if (!errors++)
				fprintf(stderr, "floodprobe spray: mkdir %s: %s\n", dir, strerror(errno));
			continue;
		}
		created++;
		pid_t pid = fork();
		if (pid < 0) {
			errors++;
			continue;
		}
		if (pid == 0) {
			snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
			int fd = open(path, O_WRONLY | O_CLOEXEC);
			if (fd < 0 || write(fd, "0\n", 2) != 2)
				_exit(2);
			close(fd);
			struct stat st;
			snprintf(path, sizeof(path), "%s/.spray-%d", mnt, i);
			_exit(stat(path, &st) < 0 && errno == ENOENT ? 0 : 1);
		}
		int status;
		while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
			;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
			touched++;
		else
			errors++;
	}
	printf("created %d touched %d seconds %.2f errors %d\n", created, touched, now_s() - start,
	       errors);
	return 0;
}

int main(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	if (argc == 5 && !strcmp(argv[1], "victim"))
		return victim(argv[2], argv[3], atof(argv[4]));
	if (argc == 5 &&
	    (!strcmp(argv[1], "meta") || !strcmp(argv[1], "list") || !strcmp(argv[1], "openfiles")) &&
	    atoi(argv[3]) > 0)
		return workers(argv[1], argv[2], atoi(argv[3]), atof(argv[4]));
	if (argc == 5 && !strcmp(argv[1], "spray"))
		return spray(argv[2], argv[3], atoi(argv[4]));
	fprintf(stderr, "usage: %s victim DIR FILE SECONDS | meta|list DIR NPROC SECONDS |\n"
			"       openfiles DIR NPROC SECONDS | spray CGROUP MNT COUNT\n",
		argv[0]);
	return 2;
}
