/*
 * Floods: one tenant with hundreds of outstanding direct reads plus a storm
 * of 100,000 small-file creates must not starve another tenant, and the
 * daemon's memory and descriptors must stay bounded (excess requests wait in
 * the kernel; inodes the kernel keeps cost a file handle, not a descriptor).
 * Progress, not speed, is asserted here; bench/ measures the latencies.
 */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CGROUP_ROOT "/sys/fs/cgroup/unified"
/*
 * Five times this machine's RLIMIT_NOFILE (20000, no CAP_SYS_RESOURCE to
 * raise it): the kernel keeps every created inode, the daemon must not keep
 * a descriptor for each.
 */
#define FLOOD_CREATES 100000
/*
 * The daemon caches node descriptors up to half its soft RLIMIT_NOFILE
 * (src/fs/fs.c); above that only its own descriptors, the three open files
 * here (each with its node's) and nodes pinned by requests in flight.
 */
#define FLOOD_FD_SLACK 64
#define FLOOD_DEPTH 256
#define VICTIM_READS 300
#ifdef FUSESCHED_SANITIZED
#define FLOOD_RSS_LIMIT_KIB (768 * 1024)
#else
#define FLOOD_RSS_LIMIT_KIB (256 * 1024)
#endif

static char cg_flood[256], cg_victim[256];

static void cgroups_up(void)
{
	snprintf(cg_flood, sizeof(cg_flood), CGROUP_ROOT "/fs-flood-%d", getpid());
	snprintf(cg_victim, sizeof(cg_victim), CGROUP_ROOT "/fs-victim-%d", getpid());
	if (mkdir(cg_flood, 0755) < 0 || mkdir(cg_victim, 0755) < 0) {
		fprintf(stderr, "test_flood: cannot create cgroups under %s: %s\n", CGROUP_ROOT,
			strerror(errno));
		exit(1);
	}
}

/* Kills what is left in a cgroup (fio's job processes outlive its main one) and removes it. */
static void cgroup_remove(const char *cg)
{
	char kill_path[300];
	snprintf(kill_path, sizeof(kill_path), "%s/cgroup.kill", cg);
	FILE *f = fopen(kill_path, "w");
	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
	for (int i = 0; i < 250 && rmdir(cg) < 0 && errno == EBUSY; i++)
		usleep(20000);
}

static void cgroups_down(void)
{
	cgroup_remove(cg_flood);
	cgroup_remove(cg_victim);
}

static void join_cgroup(const char *cg)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/cgroup.procs", cg);
	FILE *f = fopen(path, "w");
	if (!f || fprintf(f, "%d\n", getpid()) < 0 || fclose(f) != 0)
		_exit(90);
}

/* Every storm file, on the backing directory, with the content written through the mount. */
static int storm_files_intact(const struct test_mount *m)
{
	char rel[64], want[32], got[32];
	int intact = 0;
	for (int i = 0; i < FLOOD_CREATES; i++) {
		snprintf(rel, sizeof(rel), "storm/f%d", i);
		int fd = open(test_backing_path(m, rel), O_RDONLY);
		if (fd < 0)
			continue;
		int len = snprintf(want, sizeof(want), "file %d\n", i);
		ssize_t n = read(fd, got, sizeof(got));
		close(fd);
		if (n == len && memcmp(got, want, (size_t)len) == 0)
			intact++;
	}
	return intact;
}

START_TEST(flood_does_not_starve_another_tenant)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	/* A 64 MiB file for the deep reader, a small one for the victim. */
	ck_assert_int_eq(test_sh("dd if=/dev/urandom of='%s' bs=1M count=64 status=none",
				 test_backing_path(&m, "big")), 0);
	ck_assert_int_eq(test_sh("dd if=/dev/urandom of='%s' bs=1M count=4 status=none",
				 test_backing_path(&m, "small")), 0);
	ck_assert_int_eq(mkdir(test_mnt_path(&m, "storm"), 0755), 0);
	atomic_int *victim_done = mmap(NULL, sizeof(*victim_done), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(victim_done, MAP_FAILED);

	/* The flood: fio with FLOOD_DEPTH outstanding direct reads, and a create storm. */
	pid_t fio = fork();
	if (fio == 0) {
		join_cgroup(cg_flood);
		char file[600], depth[32];
		snprintf(file, sizeof(file), "--filename=%s", test_mnt_path(&m, "big"));
		snprintf(depth, sizeof(depth), "--iodepth=%d", FLOOD_DEPTH);
		execlp("fio", "fio", "--name=flood", file, "--rw=randread", "--bs=64k", "--direct=1",
		       "--ioengine=libaio", depth, "--time_based", "--runtime=600", "--output=/dev/null",
		       (char *)NULL);
		_exit(127);
	}
	pid_t storm = fork();
	if (storm == 0) {
		join_cgroup(cg_flood);
		char path[700], data[32];
		for (int i = 0; i < FLOOD_CREATES; i++) {
			snprintf(path, sizeof(path), "%s/f%d", test_mnt_path(&m, "storm"), i);
			int len = snprintf(data, sizeof(data), "file %d\n", i);
			int fd = open(path, O_CREAT | O_WRONLY, 0644);
			if (fd < 0)
				_exit(1);
			if (write(fd, data, (size_t)len) != len)
				_exit(2);
			if (close(fd) < 0)
				_exit(3);
		}
		_exit(0);
	}
	/* The victim: depth-1 reads in its own cgroup; it must keep completing them. */
	pid_t victim = fork();
	if (victim == 0) {
		join_cgroup(cg_victim);
		int fd = open(test_mnt_path(&m, "small"), O_RDONLY | O_DIRECT);
		void *buf;
		if (fd < 0 || posix_memalign(&buf, 4096, 4096))
			_exit(1);
		for (int i = 0; i < VICTIM_READS; i++) {
			if (pread(fd, buf, 4096, (off_t)(i % 1024) * 4096) != 4096)
				_exit(2);
			atomic_store(victim_done, i + 1);
		}
		_exit(0);
	}
	/*
	 * The victim's reads all run against the whole flood. Then fio stops:
	 * the storm's writes queue behind its own tenant's 256 deep reads (a
	 * few dozen creates a second), so the rest of the storm runs alone.
	 * The daemon's descriptors are sampled throughout, and once more at the end.
	 */
	int vstatus = -1, sstatus = -1, peak_fds = 0;
	bool victim_running = true, storm_running = true;
	while (victim_running || storm_running) {
		if (victim_running && waitpid(victim, &vstatus, WNOHANG) == victim) {
			victim_running = false;
			kill(fio, SIGTERM);
			waitpid(fio, NULL, 0);
		}
		if (storm_running && waitpid(storm, &sstatus, WNOHANG) == storm)
			storm_running = false;
		int fds = test_count_fds(m.daemon_pid);
		if (fds > peak_fds)
			peak_fds = fds;
		if (victim_running || storm_running)
			usleep(200000);
	}
	long peak_kib = test_proc_number(m.daemon_pid, "status", "VmHWM: %ld kB");
	ck_assert(WIFEXITED(vstatus) && WEXITSTATUS(vstatus) == 0);
	ck_assert_int_eq(atomic_load(victim_done), VICTIM_READS);
	ck_assert_int_eq(sstatus, 0);
	long soft = test_proc_number(m.daemon_pid, "limits", "Max open files %ld");
	long cached_max = soft / 2 < 65536 ? soft / 2 : 65536;
	fprintf(stderr, "test_flood: %d creates; daemon descriptors peak %d (cache bound %ld, limit %ld)\n",
		FLOOD_CREATES, peak_fds, cached_max, soft);
	ck_assert_int_gt(soft, 0);
	ck_assert_int_le(peak_fds, cached_max + FLOOD_FD_SLACK);
	ck_assert_int_eq(storm_files_intact(&m), FLOOD_CREATES);
	/*
	 * Bounded: the kernel keeps at most max_background async requests in the
	 * daemon (64 x 64 KiB here) plus one per blocked caller; 256 MiB is far
	 * above that and far below an unbounded queue of everything. ASan's
	 * quarantine alone holds up to 256 MiB of freed memory, hence its allowance.
	 */
	fprintf(stderr, "test_flood: daemon peak RSS %ld KiB\n", peak_kib);
	ck_assert_int_gt(peak_kib, 0);
	ck_assert_int_lt(peak_kib, FLOOD_RSS_LIMIT_KIB);
	munmap(victim_done, sizeof(*victim_done));
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

static Suite *flood_suite(void)
{
	Suite *s = suite_create("flood");
	TCase *tc = tcase_create("flood");
	/* First: its teardown (the mount) runs after cgroups_down has ended the cgroups' processes. */
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	/* Unchecked: the parent removes the cgroups even when the test fails. */
	tcase_add_unchecked_fixture(tc, cgroups_up, cgroups_down);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, flood_does_not_starve_another_tenant);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("flood", "FUSE mounts, cgroups");
	SRunner *sr = srunner_create(flood_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
