/*
 * Attacks by one tenant on what the daemon shares around the scheduler,
 * each made by an unprivileged user in its own cgroup, with a victim user
 * in another. Behaviour is asserted, not speed: the victim's requests
 * complete while the attacker's are still queued, and the memory a flood
 * took goes back. bench/flood measures the latencies.
 */
#include "ctl_test_util.h"
#include "leftovers.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ATTACKER_UID 2001
#define VICTIM_UID 2002
/* Further users beside the attacker: these and the next few. */
#define OTHER_USERS_UID 3001
/* The victim's probes: each a stat of a missing name and a read of a 4 KiB file. */
#define VICTIM_PROBES 40
/*
 * The flood runs this long at most. Before the daemon stopped blocking its
 * workers for write room, a victim next to this flood completed 2 probes in
 * 10 s, so it could not finish its probes within this time.
 */
#define FLOOD_S 90
/*
 * How far above its baseline the daemon's RSS may stay after a flood: a
 * worker holds 1 MiB or more while it reads large writes (its spare and
 * libfuse's buffer), and 64 of them held that after the flood until idle
 * workers gave it back. ASan's quarantine keeps up to 256 MiB of freed
 * memory (request records) resident.
 */
#ifdef FUSESCHED_SANITIZED
#define RSS_AFTER_FLOOD_SLACK_KIB ((32 + 256) * 1024)
#define RSS_BUSY_SLACK_KIB ((8 + 256) * 1024)
#else
#define RSS_AFTER_FLOOD_SLACK_KIB (32 * 1024)
/* While small requests keep the workers busy after a flood: each held 2 MiB
 * (about ten of libfuse's workers stay), given back it is under 2 MiB in all. */
#define RSS_BUSY_SLACK_KIB (8 * 1024)
#endif

/* More child cgroups than the tenant table has ids (4096). */
#define SPRAY_CGROUPS 4100

static char group_attacker[64], group_victim[64], group_configured[64];
static char config_path[512];

/* Named by the runner's pid and the test's: the runner sweeps what a failed test left. */
static void setup(void)
{
	int runner = (int)getppid(), me = (int)getpid();
	snprintf(group_attacker, sizeof(group_attacker), "/isolation-%d-%d-attacker", runner, me);
	snprintf(group_victim, sizeof(group_victim), "/isolation-%d-%d-victim", runner, me);
	snprintf(group_configured, sizeof(group_configured), "/isolation-%d-%d-configured", runner, me);
	snprintf(config_path, sizeof(config_path), "%s/isolation-%d.conf", TEST_SCRATCH_DIR, me);
	mkdir(TEST_SCRATCH_DIR, 0755);
	leftovers_add_dir(config_path);
	ctl_test_cgroup_make(CG_V2, group_attacker);
	ctl_test_cgroup_make(CG_V2, group_victim);
}

/* Ends an attacker cgroup's processes and removes it with the children a spray made. */
static void remove_attacker_tree(const char *dir)
{
	char path[600];
	snprintf(path, sizeof(path), "%s/cgroup.kill", dir);
	FILE *f = fopen(path, "w");
	if (f) {
		fputs("1\n", f);
		fclose(f);
	}
	for (int i = 0; i < SPRAY_CGROUPS; i++) {
		snprintf(path, sizeof(path), "%s/c%d", dir, i);
		for (int tries = 0; rmdir(path) < 0 && errno == EBUSY && tries < 100; tries++)
			usleep(10000);
	}
	for (int tries = 0; rmdir(dir) < 0 && errno == EBUSY && tries < 100; tries++)
		usleep(10000);
}

static void teardown(void)
{
	char dir[300];
	snprintf(dir, sizeof(dir), "%s%s", CG_V2, group_attacker);
	remove_attacker_tree(dir);
	ctl_test_cgroups_cleanup();
	unlink(config_path);
}

/*
 * In the runner, after every test: a test that failed ran no teardown, and
 * its attacker cgroup may hold thousands of sprayed children, which the
 * runner's leftovers cleanup (one directory each) cannot remove.
 */
static void sweep_attacker_trees(void)
{
	char prefix[64];
	snprintf(prefix, sizeof(prefix), "isolation-%d-", (int)getpid());
	DIR *d = opendir(CG_V2);
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		size_t len = strlen(e->d_name);
		if (strncmp(e->d_name, prefix, strlen(prefix)) != 0 || len < 9 ||
		    strcmp(e->d_name + len - 9, "-attacker") != 0)
			continue;
		char dir[600];
		snprintf(dir, sizeof(dir), "%s/%s", CG_V2, e->d_name);
		remove_attacker_tree(dir);
	}
	closedir(d);
}

/*
 * The attacker at weight 10, the victim at 100, a third cgroup at 500; no
 * pid cache. options: more mount options, or NULL.
 */
static void attacker_and_victim_config(char *text, size_t text_bytes, const char *scheduler)
{
	snprintf(text, text_bytes,
		 "[scheduler]\n%s\n[tenants]\ncache_ttl_ms = 0\n\n[group \"%s\"]\nweight = 10\n\n"
		 "[group \"%s\"]\nweight = 100\n\n[group \"%s\"]\nweight = 500\n",
		 scheduler ? scheduler : "", group_attacker, group_victim, group_configured);
}

static void mount_attacker_and_victim_with(struct test_mount *m, const char *options,
					   const char *scheduler)
{
	char text[1024];
	attacker_and_victim_config(text, sizeof(text), scheduler);
	test_write_file(config_path, text);
	char opts[256];
	snprintf(opts, sizeof(opts), "allow_other%s%s", options ? "," : "", options ? options : "");
	const char *args[] = {"-c", config_path, "-o", opts, NULL};
	test_mount_start(m, args);
}

static void mount_attacker_and_victim(struct test_mount *m, const char *options)
{
	mount_attacker_and_victim_with(m, options, NULL);
}

/* The attacker's own directory on the mount; its path in dir. */
static void make_attacker_dir(const struct test_mount *m, char *dir, size_t dir_bytes)
{
	snprintf(dir, dir_bytes, "%s", test_mnt_path(m, "attacker"));
	ck_assert_int_eq(mkdir(dir, 0755), 0);
	ck_assert_int_eq(chown(dir, ATTACKER_UID, ATTACKER_UID), 0);
}

/* The 4 KiB file the victim reads and the sprayer opens, readable by all. */
static void make_small_file(const struct test_mount *m)
{
	ck_assert_int_eq(test_sh("head -c 4096 /dev/urandom >'%s' && chmod 644 '%s'",
				 test_mnt_path(m, "small"), test_mnt_path(m, "small")), 0);
}

/*
 * The victim: VICTIM_PROBES times, 20 ms apart, a stat of a missing name
 * and a read of the small file, as its own user in its own cgroup; counts
 * them in *done (when not NULL). Exits 0 when all succeeded. The reads are
 * direct: the kernel keeps its page cache of an unchanged file across
 * opens, and a read answered from it would not reach the daemon at all.
 */
/* One direct read of the 4 KiB file "small" by uid in group; true if it succeeded. */
static bool read_small_as(const struct test_mount *m, const char *group, uid_t uid)
{
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		ctl_test_become(group, uid);
		static char buf[4096] __attribute__((aligned(4096)));
		int fd = open(test_mnt_path(m, "small"), O_RDONLY | O_DIRECT);
		_exit(fd >= 0 && read(fd, buf, sizeof(buf)) == 4096 && close(fd) == 0 ? 0 : 1);
	}
	int status = -1;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

static pid_t spawn_prober(const struct test_mount *m, atomic_int *done)
{
	pid_t victim = fork();
	ck_assert_int_ge(victim, 0);
	if (victim == 0) {
		ctl_test_become(group_victim, VICTIM_UID);
		char missing[400], small[400];
		static char buf[8192] __attribute__((aligned(4096)));
		snprintf(missing, sizeof(missing), "%s", test_mnt_path(m, "missing"));
		snprintf(small, sizeof(small), "%s", test_mnt_path(m, "small"));
		for (int i = 0; i < VICTIM_PROBES; i++) {
			struct stat st;
			if (stat(missing, &st) == 0 || errno != ENOENT)
				_exit(1);
			int fd = open(small, O_RDONLY | O_DIRECT);
			if (fd < 0 || read(fd, buf, sizeof(buf)) != 4096 || close(fd) < 0)
				_exit(2);
			if (done)
				atomic_store(done, i + 1);
			usleep(20000);
		}
		_exit(0);
	}
	return victim;
}

static long daemon_rss_kib(const struct test_mount *m)
{
	return test_proc_number(m->daemon_pid, "status", "VmRSS: %ld kB");
}

/*
 * A mount for a 1 MiB write flood, with the largest backlog the kernel lets
 * in (1024 writes of 1 MiB), the attacker's directory (its path in dir) and
 * the victim's small file; returns the daemon's RSS before the flood.
 */
static long mount_for_write_flood(struct test_mount *m, char *dir, size_t dir_bytes)
{
	mount_attacker_and_victim(m, "max_background=1024");
	make_attacker_dir(m, dir, dir_bytes);
	make_small_file(m);
	return daemon_rss_kib(m);
}

/* The flood is on: hundreds of the attacker's writes are queued in the daemon. */
static void wait_for_flood_queued(const struct test_mount *m)
{
	int64_t queued = 0;
	CTL_TEST_POLL((queued = ctl_test_tenant_u64(m->mnt, group_attacker, "queued")) > 100);
	ck_assert_msg(queued > 100, "the flood never queued (queued %lld)", (long long)queued);
}

/*
 * Direct 1 MiB writes from aio at depth 1024 by a weight-10 tenant: the
 * daemon holds its backlog as queued requests and keeps reading
 * /dev/fuse, so a weight-100 tenant's lookups and reads are served while
 * the flood is still queued; and the flood's buffers go back to the
 * system once it ends.
 */
START_TEST(write_flood_does_not_stall_another_tenant_and_its_memory_returns)
{
	struct test_mount m;
	char attacker_dir[400];
	long rss_before_kib = mount_for_write_flood(&m, attacker_dir, sizeof(attacker_dir));
	ck_assert_int_gt(rss_before_kib, 0);

	pid_t fio = fork();
	ck_assert_int_ge(fio, 0);
	if (fio == 0) {
		ctl_test_become(group_attacker, ATTACKER_UID);
		char dir[500], runtime[32];
		snprintf(dir, sizeof(dir), "--directory=%s", attacker_dir);
		snprintf(runtime, sizeof(runtime), "--runtime=%d", FLOOD_S);
		execlp("fio", "fio", "--name=flood", dir, "--rw=write", "--bs=1M", "--direct=1",
		       "--ioengine=libaio", "--iodepth=512", "--numjobs=2", "--size=1G",
		       "--time_based", runtime, "--output=/dev/null", (char *)NULL);
		_exit(127);
	}
	wait_for_flood_queued(&m);

	atomic_int *probes_done = mmap(NULL, sizeof(*probes_done), PROT_READ | PROT_WRITE,
				       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(probes_done, MAP_FAILED);
	pid_t victim = spawn_prober(&m, probes_done);
	int vstatus = -1;
	ck_assert_int_eq(waitpid(victim, &vstatus, 0), victim);
	/* Right after: the attacker is still flooding, its writes still queued. */
	bool flooding = waitpid(fio, NULL, WNOHANG) == 0;
	int64_t queued_after = ctl_test_tenant_u64(m.mnt, group_attacker, "queued");
	long peak_kib = test_proc_number(m.daemon_pid, "status", "VmHWM: %ld kB");
	fprintf(stderr, "isolation: victim %d probes; attacker queued %lld after; daemon RSS %ld KiB before, "
		"peak %ld KiB\n", atomic_load(probes_done), (long long)queued_after, rss_before_kib,
		peak_kib);
	ck_assert(WIFEXITED(vstatus) && WEXITSTATUS(vstatus) == 0);
	ck_assert_int_eq(atomic_load(probes_done), VICTIM_PROBES);
	ck_assert_msg(flooding && queued_after > 0,
		      "the flood was over before the victim's probes were done");

	kill(fio, SIGTERM);
	ck_assert_int_eq(waitpid(fio, NULL, 0), fio);
	/*
	 * The flood's payloads held far more than the daemon's baseline; within
	 * seconds of its end the daemon is back near that baseline (its buffers
	 * are unmapped once unused, bufpool_trim, and the workers that wait for
	 * requests give theirs back after a second).
	 */
	ck_assert_int_gt(peak_kib, rss_before_kib + RSS_AFTER_FLOOD_SLACK_KIB + 128 * 1024);
	long rss_kib = daemon_rss_kib(&m);
	for (int i = 0; i < 150 && rss_kib > rss_before_kib + RSS_AFTER_FLOOD_SLACK_KIB; i++) {
		usleep(100000);
		rss_kib = daemon_rss_kib(&m);
	}
	fprintf(stderr, "isolation: daemon RSS %ld KiB after the flood\n", rss_kib);
	ck_assert_int_le(rss_kib, rss_before_kib + RSS_AFTER_FLOOD_SLACK_KIB);
	munmap(probes_done, sizeof(*probes_done));
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* fio as the tenant of cgroup name, as uid, on dir, with more arguments; returns its pid. */
static pid_t spawn_fio_as(const char *name, uid_t uid, const char *dir, const char *const *more)
{
	pid_t fio = fork();
	ck_assert_int_ge(fio, 0);
	if (fio == 0) {
		ctl_test_become(name, uid);
		char directory[500];
		snprintf(directory, sizeof(directory), "--directory=%s", dir);
		const char *argv[24] = {"fio", "--name=attack", directory, "--direct=1", "--ioengine=libaio",
					"--time_based", "--runtime=60", "--output=/dev/null"};
		int n = 8;
		for (; *more && n < 23; more++)
			argv[n++] = *more;
		execvp("fio", (char *const *)argv);
		_exit(127);
	}
	return fio;
}

static pid_t spawn_attacker_fio(const char *dir, const char *const *more)
{
	return spawn_fio_as(group_attacker, ATTACKER_UID, dir, more);
}

static void stop_fio(pid_t fio)
{
	kill(fio, SIGTERM);
	ck_assert_int_eq(waitpid(fio, NULL, 0), fio);
}

/*
 * A small read in a loop: pread of the 4 KiB file, direct, as the victim
 * until killed; counts reads in *done.
 */
static pid_t spawn_small_reader(const struct test_mount *m, atomic_long *done)
{
	pid_t reader = fork();
	ck_assert_int_ge(reader, 0);
	if (reader == 0) {
		ctl_test_become(group_victim, VICTIM_UID);
		static char buf[4096] __attribute__((aligned(4096)));
		int fd = open(test_mnt_path(m, "small"), O_RDONLY | O_DIRECT);
		if (fd < 0)
			_exit(1);
		for (;;) {
			if (pread(fd, buf, sizeof(buf), 0) != 4096)
				_exit(2);
			atomic_fetch_add(done, 1);
		}
	}
	return reader;
}

/*
 * The workers that read a write flood's 1 MiB payloads each keep a spare
 * buffer and pages of libfuse's; a worker waiting a whole second gives them
 * back. Small requests that keep coming wake every waiting worker in turn,
 * so none waits a second: each gives back what it held for writes once a
 * second passed without one, while it serves them.
 */
START_TEST(workers_busy_with_small_requests_give_back_their_write_buffers)
{
	struct test_mount m;
	char attacker_dir[400];
	long rss_before_kib = mount_for_write_flood(&m, attacker_dir, sizeof(attacker_dir));
	const char *flood[] = {"--rw=write", "--bs=1M", "--iodepth=512", "--numjobs=2", "--size=1G", NULL};
	pid_t fio = spawn_attacker_fio(attacker_dir, flood);
	wait_for_flood_queued(&m);
	sleep(2);
	stop_fio(fio);
	long flood_kib = daemon_rss_kib(&m);

	atomic_long *reads = mmap(NULL, sizeof(*reads), PROT_READ | PROT_WRITE,
				  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(reads, MAP_FAILED);
	pid_t readers[2] = {spawn_small_reader(&m, reads), spawn_small_reader(&m, reads)};
	long rss_kib = daemon_rss_kib(&m), reads_at_check = 0;
	for (int i = 0; i < 100 && rss_kib > rss_before_kib + RSS_BUSY_SLACK_KIB; i++) {
		usleep(100000);
		rss_kib = daemon_rss_kib(&m);
	}
	reads_at_check = atomic_load(reads);
	usleep(200000);
	long reads_after = atomic_load(reads);
	fprintf(stderr, "isolation: daemon RSS %ld KiB before, %ld after the flood, %ld with small reads "
		"(%ld reads)\n", rss_before_kib, flood_kib, rss_kib, reads_after);
	/* The readers were still at it: the workers were kept busy, not idle. */
	for (int i = 0; i < 2; i++)
		ck_assert_int_eq(waitpid(readers[i], NULL, WNOHANG), 0);
	ck_assert_int_gt(reads_after, reads_at_check);
	ck_assert_int_gt(flood_kib, rss_before_kib + RSS_BUSY_SLACK_KIB);
	ck_assert_int_le(rss_kib, rss_before_kib + RSS_BUSY_SLACK_KIB);
	for (int i = 0; i < 2; i++) {
		kill(readers[i], SIGKILL);
		ck_assert_int_eq(waitpid(readers[i], NULL, 0), readers[i]);
	}
	munmap(reads, sizeof(*reads));
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * The fuse control directory of m's connection, opened through a private
 * fusectl instance that is detached at once (the host may have none
 * mounted, and a failed test must not leave one behind).
 */
static int open_connection_dir(const struct test_mount *m)
{
	struct stat st;
	ck_assert_int_eq(stat(m->mnt, &st), 0);
	char ctl[512], dir[600];
	snprintf(ctl, sizeof(ctl), "%s/fusectl-%d", TEST_SCRATCH_DIR, (int)getpid());
	ck_assert_int_eq(mkdir(ctl, 0700), 0);
	ck_assert_int_eq(mount("fusectl", ctl, "fusectl", 0, NULL), 0);
	snprintf(dir, sizeof(dir), "%s/%u", ctl, minor(st.st_dev));
	int fd = open(dir, O_RDONLY | O_DIRECTORY);
	int open_errno = errno;
	ck_assert_int_eq(umount2(ctl, MNT_DETACH), 0);
	ck_assert_int_eq(rmdir(ctl), 0);
	ck_assert_msg(fd >= 0, "%s: %s", dir, strerror(open_errno));
	return fd;
}

/* The number in one of the connection's fusectl files. */
static long connection_number(int connection_dir, const char *name)
{
	int fd = openat(connection_dir, name, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	char text[32] = "";
	ck_assert_int_gt(read(fd, text, sizeof(text) - 1), 0);
	close(fd);
	return strtol(text, NULL, 10);
}

/* The kernel's async request limit, from the connection's fusectl directory. */
static long kernel_limit(int connection_dir)
{
	return connection_number(connection_dir, "max_background");
}

/* A number fusesched stat reports for the mount (max_background, hung, ...); -1 when missing. */
static int64_t stat_mount_number(const struct test_mount *m, const char *name)
{
	struct json_object *mount = NULL, *field = NULL;
	struct json_object *doc = ctl_test_stat(m->mnt, &mount);
	int64_t n = json_object_object_get_ex(mount, name, &field) ? json_object_get_int64(field) : -1;
	json_object_put(doc);
	return n;
}

/* The limit fusesched stat reports (max_background). */
static long stat_max_background(const struct test_mount *m)
{
	return (long)stat_mount_number(m, "max_background");
}

/*
 * The kernel's queue of async requests is one FIFO for every tenant, and
 * each request in it is read whole: by default the daemon sizes it in
 * bytes (engine.h). A 1 MiB direct-write flood at depth 1024 gets 32
 * requests into the daemon, not 1024 (a 32 MiB burst ahead of anyone
 * else's request, not 1 GiB), still max_inflight; a deep 4 KiB aio reader
 * that fills that limit has it raised past its depth, so the scheduler
 * sees all of it; and large requests bring it back down.
 */
START_TEST(kernel_queue_is_sized_in_bytes)
{
	struct test_mount m;
	mount_attacker_and_victim(&m, NULL);
	char attacker_dir[400];
	make_attacker_dir(&m, attacker_dir, sizeof(attacker_dir));
	int ctl = open_connection_dir(&m);
	ck_assert_int_eq(kernel_limit(ctl), 32);
	ck_assert_int_eq(stat_max_background(&m), 32);

	const char *flood[] = {"--rw=write", "--bs=1M", "--iodepth=512", "--numjobs=2", "--size=256M",
			       NULL};
	pid_t fio = spawn_attacker_fio(attacker_dir, flood);
	int64_t held = 0, most = 0;
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_attacker, "queued") +
			      ctl_test_tenant_u64(m.mnt, group_attacker, "inflight") > 16);
	for (int i = 0; i < 100; i++) {
		held = ctl_test_tenant_u64(m.mnt, group_attacker, "queued") +
		       ctl_test_tenant_u64(m.mnt, group_attacker, "inflight");
		most = held > most ? held : most;
		usleep(20000);
	}
	long during_flood = kernel_limit(ctl);
	stop_fio(fio);
	fprintf(stderr, "isolation: 1 MiB flood: at most %lld of the attacker's requests held, limit %ld\n",
		(long long)most, during_flood);
	ck_assert_int_gt(most, 16);
	/*
	 * Well under the 1024 a fixed limit lets in. Requests answered but not
	 * yet released by the reactor count for a moment too, and the stats
	 * are a snapshot, so the bound has room above 32.
	 */
	ck_assert_int_le(most, 96);
	ck_assert_int_eq(during_flood, 32);

	const char *deep_reads[] = {"--rw=randread", "--bs=4k", "--iodepth=512", "--size=64M", NULL};
	fio = spawn_attacker_fio(attacker_dir, deep_reads);
	/* Raised past its depth of 512 (to 1024, or short of it if a second
	 * mixed in fio's larger layout writes: then the limit no longer fills). */
	long raised = 0;
	CTL_TEST_POLL((raised = kernel_limit(ctl)) >= 512);
	/* The reactor gives the kernel its limit, then publishes it: stat may be
	 * a moment behind the fusectl file, never for long. */
	long reported = 0;
	CTL_TEST_POLL((reported = stat_max_background(&m)) >= 512); /* or moved on to 1024 */
	/* The congestion threshold, past which the kernel reads ahead for no
	 * one, follows at three quarters (kernel_queue.h); it was left at 48. */
	long threshold = 0;
	CTL_TEST_POLL((threshold = connection_number(ctl, "congestion_threshold")) == kernel_limit(ctl) * 3 / 4);
	stop_fio(fio);
	ck_assert_int_ge(raised, 512);
	ck_assert_int_ge(reported, 512);
	ck_assert_int_ge(threshold, 384);

	fio = spawn_attacker_fio(attacker_dir, flood);
	long lowered = 0;
	CTL_TEST_POLL((lowered = kernel_limit(ctl)) == 32);
	CTL_TEST_POLL((reported = stat_max_background(&m)) == 32);
	stop_fio(fio);
	ck_assert_int_eq(lowered, 32);
	ck_assert_int_eq(reported, 32);

	close(ctl);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * Two deep writers of 1 MiB direct writes, the victim (w100) and the
 * attacker (w10), together deeper than the 32 requests the kernel's queue
 * takes of that size: what the scheduler holds back of the attacker stays
 * outstanding in it, and the victim's next requests would wait behind it
 * in the kernel while the scheduler waits for them (they got 1:1). The
 * daemon makes room for what it holds beside the waiting deep tenant: the
 * limit rises past 32 while both write, and the victim is served more.
 * The room is the attacker's to fill, so it must stay bounded: an attacker
 * of depth 512 beside the victim leaves the limit at 256 of 1 MiB at most
 * (the room is what the daemon already holds, which the limit bounds, and
 * never more than ENGINE_KERNEL_QUEUE_HELD_BYTES).
 */
START_TEST(kernel_queue_makes_room_for_a_deep_tenant_behind_held_requests)
{
	struct test_mount m;
	mount_attacker_and_victim(&m, NULL);
	char attacker_dir[400], victim_dir[400];
	make_attacker_dir(&m, attacker_dir, sizeof(attacker_dir));
	snprintf(victim_dir, sizeof(victim_dir), "%s", test_mnt_path(&m, "victim"));
	ck_assert_int_eq(mkdir(victim_dir, 0755), 0);
	ck_assert_int_eq(chown(victim_dir, VICTIM_UID, VICTIM_UID), 0);
	int ctl = open_connection_dir(&m);
	ck_assert_int_eq(kernel_limit(ctl), 32);

	const char *deep[] = {"--rw=write", "--bs=1M", "--iodepth=64", "--size=256M", NULL};
	pid_t light = spawn_attacker_fio(attacker_dir, deep);
	pid_t heavy = spawn_fio_as(group_victim, VICTIM_UID, victim_dir, deep);
	long raised = 0;
	CTL_TEST_POLL((raised = kernel_limit(ctl)) > 32);
	int64_t light_bytes = ctl_test_tenant_u64(m.mnt, group_attacker, "bytes.write");
	int64_t heavy_bytes = ctl_test_tenant_u64(m.mnt, group_victim, "bytes.write");
	stop_fio(light);
	stop_fio(heavy);
	fprintf(stderr, "isolation: two deep 1 MiB writers: limit %ld; served %lld (w100) and %lld (w10) bytes\n",
		raised, (long long)heavy_bytes, (long long)light_bytes);
	ck_assert_int_gt(raised, 32);
	ck_assert_int_le(raised, 1024);

	const char *deeper[] = {"--rw=write", "--bs=1M", "--iodepth=512", "--size=256M", NULL};
	CTL_TEST_POLL(kernel_limit(ctl) == 32); /* the room given back */
	light = spawn_attacker_fio(attacker_dir, deeper);
	heavy = spawn_fio_as(group_victim, VICTIM_UID, victim_dir, deep);
	long most = 0;
	CTL_TEST_POLL((most = kernel_limit(ctl)) > 32);
	for (int i = 0; i < 40; i++) {
		long now = kernel_limit(ctl);
		most = now > most ? now : most;
		usleep(100000);
	}
	stop_fio(light);
	stop_fio(heavy);
	fprintf(stderr, "isolation: an attacker of depth 512 beside them: limit at most %ld\n", most);
	ck_assert_int_gt(most, 32);
	ck_assert_int_le(most, 256);
	close(ctl);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* One 4 KiB direct read of path by Linux aio (an async request of the kernel's queue); true if it read 4 KiB. */
static bool aio_read_4k(const char *path)
{
	static char buf[4096] __attribute__((aligned(4096)));
	int fd = open(path, O_RDONLY | O_DIRECT);
	aio_context_t ctx = 0;
	if (fd < 0 || syscall(SYS_io_setup, 1, &ctx) < 0)
		return false;
	struct iocb cb = {.aio_fildes = (uint32_t)fd, .aio_lio_opcode = IOCB_CMD_PREAD,
			  .aio_buf = (uint64_t)(uintptr_t)buf, .aio_nbytes = sizeof(buf)};
	struct iocb *cbs[1] = {&cb};
	struct io_event ev;
	bool ok = syscall(SYS_io_submit, ctx, 1, cbs) == 1 && syscall(SYS_io_getevents, ctx, 1, 1, &ev, NULL) == 1 &&
		  ev.res == (int64_t)sizeof(buf);
	syscall(SYS_io_destroy, ctx);
	close(fd);
	return ok;
}

/* How long the victim is given beside the hung store: without room made it never finished. */
#define HUNG_VICTIM_WAIT_S 30

/*
 * A stalling store (eiofs) at the backing directory's slow/, holding a
 * 4 MiB file big whose reads wait while *marker exists (created here);
 * returns eiofs's pid for test_stalling_store_down.
 */
static pid_t hung_store_up(const struct test_mount *m, char source[400], char stalling[400], char marker[450])
{
	snprintf(source, 400, "%s/eiofs-source", m->root);
	snprintf(stalling, 400, "%s", test_backing_path(m, "slow"));
	pid_t eiofs = test_stalling_store_up(source, stalling);
	ck_assert_int_eq(test_sh("head -c 4M /dev/urandom >'%s/big' && chmod 644 '%s/big'", source, source), 0);
	snprintf(marker, 450, "%s/big.stall", source);
	test_write_file(marker, "");
	return eiofs;
}

/* The victim reaped within HUNG_VICTIM_WAIT_S (its pid, status in *status), or 0: then
 * killed, and reaped by reap_killed_victim once the store is released (a request the
 * daemon holds keeps its caller until it is answered, killed or not). */
static pid_t wait_for_victim(pid_t victim, int *status)
{
	pid_t reaped = 0;
	for (int waited_ms = 0; waited_ms < HUNG_VICTIM_WAIT_S * 1000 && (reaped = waitpid(victim, status, WNOHANG)) == 0;
	     waited_ms += 20)
		usleep(20000);
	if (reaped == 0)
		kill(victim, SIGKILL);
	return reaped;
}

static void reap_killed_victim(pid_t victim, pid_t reaped)
{
	if (reaped != victim)
		waitpid(victim, NULL, 0);
}

/*
 * A tenant whose store hangs (its reads of one file wait at eiofs, a FUSE
 * store mounted inside the backing directory) keeps its requests
 * outstanding in the kernel's one queue of async requests for as long as
 * it hangs. A deep aio reader of that file filled it, and every other
 * tenant's readahead and aio waited in the kernel behind it: the victim's
 * buffered read of another file never finished. The daemon makes room past
 * what the hung tenant holds (engine.c, size_kernel_queue), and hung
 * requests leave the store's depth (sched.c): the victim's buffered read,
 * aio reads and synchronous direct reads complete while the attacker's
 * reads still hang in every slot.
 */
START_TEST(a_store_hung_for_one_tenant_leaves_the_others_the_kernels_queue)
{
	struct test_mount m;
	mount_attacker_and_victim(&m, NULL);
	char source[400], stalling[400], marker[450], victim_file[400], small[400];
	pid_t eiofs = hung_store_up(&m, source, stalling, marker);
	/* Written in the backing directory: the mount's page cache has none of it. */
	snprintf(victim_file, sizeof(victim_file), "%s", test_mnt_path(&m, "victim-file"));
	ck_assert_int_eq(test_sh("head -c 1M /dev/urandom >'%s' && chmod 644 '%s'",
				 test_backing_path(&m, "victim-file"), test_backing_path(&m, "victim-file")), 0);
	make_small_file(&m);
	snprintf(small, sizeof(small), "%s", test_mnt_path(&m, "small"));

	char slow_dir[400];
	snprintf(slow_dir, sizeof(slow_dir), "%s", test_mnt_path(&m, "slow"));
	const char *hung_reads[] = {"--filename=big", "--rw=randread", "--bs=4k", "--iodepth=1024", "--numjobs=2",
				    NULL};
	pid_t fio = spawn_attacker_fio(slow_dir, hung_reads);
	int64_t hung = 0, held = 0;
	/* The kernel's queue (32 of the attacker's 4 KiB reads at first, as
	 * sized for the largest requests) grows by the room made for them. */
	CTL_TEST_POLL((hung = stat_mount_number(&m, "hung")) > 0 &&
		      (held = ctl_test_tenant_u64(m.mnt, group_attacker, "queued") +
			      ctl_test_tenant_u64(m.mnt, group_attacker, "inflight")) > 32);
	fprintf(stderr, "isolation: the attacker's store hangs: %lld hung, %lld of its requests held\n",
		(long long)hung, (long long)held);
	ck_assert_int_gt(hung, 0);
	ck_assert_int_gt(held, 32); /* more than the store's slots: the kernel's queue filled */

	pid_t victim = fork();
	ck_assert_int_ge(victim, 0);
	if (victim == 0) {
		ctl_test_become(group_victim, VICTIM_UID);
		/* Buffered: the kernel reads ahead with async requests. */
		static char buf[1 << 20] __attribute__((aligned(4096)));
		int fd = open(victim_file, O_RDONLY);
		size_t got = 0;
		for (ssize_t n; fd >= 0 && (n = read(fd, buf, sizeof(buf))) > 0;)
			got += (size_t)n;
		if (fd < 0 || got != sizeof(buf))
			_exit(1);
		for (int i = 0; i < 8; i++)
			if (!aio_read_4k(small))
				_exit(2);
		/* Synchronous: every slot of the store is the attacker's, hung. */
		int direct = open(small, O_RDONLY | O_DIRECT);
		for (int i = 0; i < 8; i++)
			if (direct < 0 || pread(direct, buf, 4096, 0) != 4096)
				_exit(3);
		_exit(0);
	}
	int status = -1;
	pid_t reaped = wait_for_victim(victim, &status);
	int64_t hung_after = stat_mount_number(&m, "hung");
	unlink(marker);
	reap_killed_victim(victim, reaped);
	stop_fio(fio);
	test_stalling_store_down(stalling, eiofs);
	fprintf(stderr, "isolation: beside it the victim %s, %lld still hung\n",
		reaped ? "finished" : "did not finish", (long long)hung_after);
	ck_assert_msg(reaped == victim, "the victim's reads did not complete in %d s beside the hung store",
		      HUNG_VICTIM_WAIT_S);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the victim failed (status %d)", status);
	ck_assert_int_gt(hung_after, 0); /* it finished while the attacker's reads still hung */
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* Processes blocked in a stat of the hung store, more than the daemon has workers. */
#define HUNG_STATS 80
/* Of them and the attacker's 16 hung reads, at least this many wait as requests
 * (HUNG_STATS less the 32 that may run at once in workers, and some slack). */
#define HUNG_HELD 40

/* How many of pids have not exited (the children below exit once their stat returns). */
static int not_exited(const pid_t *pids, int n)
{
	int running = 0;
	for (int i = 0; i < n; i++) {
		char path[64], line[512];
		snprintf(path, sizeof(path), "/proc/%d/stat", (int)pids[i]);
		FILE *f = fopen(path, "r");
		if (!f)
			continue;
		const char *state = fgets(line, sizeof(line), f) ? strrchr(line, ')') : NULL;
		running += state && state[1] == ' ' && state[2] != 'Z';
		fclose(f);
	}
	return running;
}

/*
 * hung_store_up, and the attacker's 16 synchronous readers of its stalled
 * file (*fio), more than eiofs has threads: then it answers nothing. The
 * hung store's directory on the mount in slow_dir, the victim's 4 KiB
 * file in small; returns eiofs's pid.
 */
static pid_t store_hung_by_readers(const struct test_mount *m, char source[400], char stalling[400],
				   char marker[450], char slow_dir[400], char small[400], pid_t *fio)
{
	pid_t eiofs = hung_store_up(m, source, stalling, marker);
	make_small_file(m);
	snprintf(small, 400, "%s", test_mnt_path(m, "small"));
	snprintf(slow_dir, 400, "%s", test_mnt_path(m, "slow"));
	const char *hung_reads[] = {"--filename=big", "--rw=randread", "--bs=4k", "--ioengine=psync",
				    "--numjobs=16", NULL};
	*fio = spawn_attacker_fio(slow_dir, hung_reads);
	CTL_TEST_POLL(stat_mount_number(m, "hung") >= 10);
	return eiofs;
}

/* In a forked child, as the victim: 8 opens, direct reads and stats of a
 * missing name beside small; exits 0 if all went as on any filesystem. */
static void victim_opens_reads_and_stats(const char *small)
{
	ctl_test_become(group_victim, VICTIM_UID);
	static char buf[4096] __attribute__((aligned(4096)));
	for (int i = 0; i < 8; i++) {
		struct stat st;
		char missing[500];
		snprintf(missing, sizeof(missing), "%s-missing-%d", small, i);
		int fd = open(small, O_RDONLY | O_DIRECT);
		if (fd < 0 || pread(fd, buf, sizeof(buf), 0) != 4096 || close(fd) != 0)
			_exit(1);
		if (stat(missing, &st) == 0 || errno != ENOENT)
			_exit(2);
	}
	_exit(0);
}

/* The victim's opens, reads and stats (victim_opens_reads_and_stats) in a
 * forked child: whether they completed within HUNG_VICTIM_WAIT_S, all as
 * on any filesystem. A victim that did not is killed and reaped later. */
static bool victim_served(const char *small, pid_t *unreaped)
{
	pid_t victim = fork();
	ck_assert_int_ge(victim, 0);
	if (victim == 0)
		victim_opens_reads_and_stats(small);
	int status = -1;
	pid_t reaped = wait_for_victim(victim, &status);
	if (reaped != victim)
		*unreaped = victim;
	return reaped == victim && WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * A reload that changes the policy is taken once nothing is at the store
 * but hung requests (sched.c, switch_due). It waited for every request
 * there, so while one tenant's store hung a reload stopped every tenant's
 * dispatch until that store came back. With the attacker's 16 readers
 * hung at eiofs, the policy goes to fifo, back to bfq, and then the depth
 * down to 8, fewer than the attacker has hung; after each, the victim's
 * opens, reads and stats complete while the attacker's reads still hang.
 */
START_TEST(a_reload_during_a_hang_leaves_the_others_served)
{
	enum { RELOADS = 3 };
	struct test_mount m;
	mount_attacker_and_victim(&m, NULL);
	char source[400], stalling[400], marker[450], slow_dir[400], small[400];
	pid_t fio = 0, eiofs = store_hung_by_readers(&m, source, stalling, marker, slow_dir, small, &fio);
	bool served[RELOADS] = {false};
	int64_t hung_after[RELOADS] = {0};
	pid_t unreaped[RELOADS] = {0};
	const char *settings[RELOADS] = {"policy = fifo", "policy = bfq", "max_inflight = 8"};
	int done = 0;
	for (; done < RELOADS; done++) {
		char text[1024], *out = NULL;
		attacker_and_victim_config(text, sizeof(text), settings[done]);
		int rc = ctl_test_reload(m.mnt, config_path, text, &out);
		ck_assert_msg(rc == 0, "reload to %s: %s", settings[done], out ? out : "");
		free(out);
		served[done] = victim_served(small, &unreaped[done]);
		hung_after[done] = stat_mount_number(&m, "hung");
		fprintf(stderr, "isolation: after a reload to %s during the hang the victim %s, %lld hung\n",
			settings[done], served[done] ? "was served" : "was not served", (long long)hung_after[done]);
		if (!served[done]) {
			done++;
			break;
		}
	}
	unlink(marker);
	for (int i = 0; i < done; i++)
		if (unreaped[i])
			waitpid(unreaped[i], NULL, 0);
	stop_fio(fio);
	test_stalling_store_down(stalling, eiofs);
	for (int i = 0; i < done; i++) {
		ck_assert_msg(served[i], "after a reload to %s the victim was not served in %d s beside the hung store",
			      settings[i], HUNG_VICTIM_WAIT_S);
		ck_assert_int_gt(hung_after[i], 0); /* served while the attacker's reads still hung */
	}
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* The victim's write, acknowledged: 64 KiB of a pattern at the mount's
 * path, written and fsynced in a forked child as the victim. */
#define VICTIM_WRITE_BYTES (64 * 1024)
static void victim_pattern(unsigned char *buf)
{
	for (int i = 0; i < VICTIM_WRITE_BYTES; i++)
		buf[i] = (unsigned char)(i * 7 + i / 4096);
}

static bool victim_writes(const char *path)
{
	pid_t child = fork();
	ck_assert_int_ge(child, 0);
	if (child == 0) {
		ctl_test_become(group_victim, VICTIM_UID);
		static unsigned char buf[VICTIM_WRITE_BYTES];
		victim_pattern(buf);
		int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		_exit(fd >= 0 && write(fd, buf, sizeof(buf)) == (ssize_t)sizeof(buf) && fsync(fd) == 0 &&
			      close(fd) == 0 ? 0 : 1);
	}
	int status = -1;
	ck_assert_int_eq(waitpid(child, &status, 0), child);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

/*
 * A stop completes every request the daemon has taken, and one hung at the
 * store never completes: the stop waited for it, every caller of the volume
 * with it, until the store answered. With `stop_timeout=1`, once no request
 * has finished for a second the daemon gives up what is left
 * (stop_guard.h): the attacker's 16 hung readers are let go with an error,
 * the mount goes, and the victim's write, acknowledged before the stop, is
 * in the backing directory whole. The daemon's threads in the hung store
 * end only as it answers, so the process is reaped after, with status 1.
 */
START_TEST(a_stop_during_a_hang_gives_up_only_what_hung)
{
	struct test_mount m;
	mount_attacker_and_victim(&m, "stop_timeout=1");
	char source[400], stalling[400], marker[450], slow_dir[400], small[400];
	pid_t fio = 0, eiofs = store_hung_by_readers(&m, source, stalling, marker, slow_dir, small, &fio);
	char victim_dir[400], victim_file[450], backing_file[450];
	snprintf(victim_dir, sizeof(victim_dir), "%s", test_mnt_path(&m, "victim"));
	ck_assert_int_eq(mkdir(victim_dir, 0755), 0);
	ck_assert_int_eq(chown(victim_dir, VICTIM_UID, VICTIM_UID), 0);
	snprintf(victim_file, sizeof(victim_file), "%s/acknowledged", victim_dir);
	snprintf(backing_file, sizeof(backing_file), "%s", test_backing_path(&m, "victim/acknowledged"));
	ck_assert_msg(victim_writes(victim_file), "the victim's write beside the hang failed");
	int64_t hung = stat_mount_number(&m, "hung");

	ck_assert_int_eq(kill(m.daemon_pid, SIGTERM), 0);
	pid_t fio_reaped = 0;
	int waited_ms = 0;
	for (; waited_ms < HUNG_VICTIM_WAIT_S * 1000; waited_ms += 20) {
		if (!fio_reaped)
			fio_reaped = waitpid(fio, NULL, WNOHANG);
		if (fio_reaped == fio && !test_in_mountinfo(m.mnt))
			break;
		usleep(20000);
	}
	bool unmounted = !test_in_mountinfo(m.mnt);
	fprintf(stderr, "isolation: a stop with %lld requests hung: readers let go %s, %s after %d ms\n",
		(long long)hung, fio_reaped == fio ? "yes" : "no",
		unmounted ? "unmounted" : "still mounted", waited_ms);
	unlink(marker);
	if (fio_reaped != fio)
		stop_fio(fio);
	test_stalling_store_down(stalling, eiofs);
	int status = -1;
	ck_assert_int_eq(waitpid(m.daemon_pid, &status, 0), m.daemon_pid);
	m.daemon_pid = 0;
	static unsigned char want[VICTIM_WRITE_BYTES], got[VICTIM_WRITE_BYTES + 1];
	victim_pattern(want);
	int fd = open(backing_file, O_RDONLY);
	ssize_t n = fd >= 0 ? read(fd, got, sizeof(got)) : -1;
	if (fd >= 0)
		close(fd);
	test_mount_stop(&m);
	ck_assert_msg(fio_reaped == fio, "the attacker's hung readers were not let go within %d s of the stop",
		      HUNG_VICTIM_WAIT_S);
	ck_assert_msg(unmounted, "the mount was still there %d s after the stop", HUNG_VICTIM_WAIT_S);
	ck_assert_int_eq(n, VICTIM_WRITE_BYTES);
	ck_assert_msg(memcmp(got, want, sizeof(want)) == 0, "the victim's acknowledged write is not whole");
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1,
		      "the daemon that gave up hung requests ended with status %d, not exit 1", status);
}
END_TEST

/* The victim (victim_opens_reads_and_stats) run while the n processes in
 * stats are blocked on the hung store: whether it was reaped within
 * HUNG_VICTIM_WAIT_S (its status in *status), and how many of them were
 * still blocked then. The store is released after (marker removed), and
 * they and a killed victim are reaped. */
static bool victim_beside_blocked_stats(const char *small, const char *marker, const pid_t *stats, int n,
					int *status, int *still_blocked)
{
	struct timespec start, end;
	clock_gettime(CLOCK_MONOTONIC, &start);
	pid_t victim = fork();
	ck_assert_int_ge(victim, 0);
	if (victim == 0)
		victim_opens_reads_and_stats(small);
	pid_t reaped = wait_for_victim(victim, status);
	*still_blocked = not_exited(stats, n);
	clock_gettime(CLOCK_MONOTONIC, &end);
	fprintf(stderr, "isolation: the victim ran %.3f s beside %d blocked stat calls\n",
		(double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9, n);
	unlink(marker);
	reap_killed_victim(victim, reaped);
	for (int i = 0; i < n; i++)
		ck_assert_int_eq(waitpid(stats[i], NULL, 0), stats[i]);
	return reaped == victim;
}

/*
 * Metadata on a store that hangs blocks the worker that runs it. A tenant
 * alone ran all its metadata at once in workers, so with 80 of its
 * processes stat-ing names on a hung FUSE store (eiofs, every one of its
 * threads in a stalled read) it held every worker the daemon has, and
 * nobody else's request was read from /dev/fuse again: the victim's read
 * of a file on the healthy part never returned. Now at most
 * max_inline_meta run at once (engine.c) and the rest wait as requests,
 * counted for the attacker; the victim's lookups, opens and reads complete
 * while all 80 of the attacker's stat calls are still blocked. (Without
 * parallel lookups (channel.c) the kernel let one of the 80 through at a
 * time, holding the directory's lock, and no more reached the daemon.)
 */
START_TEST(metadata_hung_for_one_tenant_leaves_the_others_workers)
{
	struct test_mount m;
	mount_attacker_and_victim(&m, NULL);
	char source[400], stalling[400], marker[450], slow_dir[400], small[400];
	pid_t fio = 0, eiofs = store_hung_by_readers(&m, source, stalling, marker, slow_dir, small, &fio);
	pid_t stats[HUNG_STATS];
	for (int i = 0; i < HUNG_STATS; i++) {
		ck_assert_int_ge(stats[i] = fork(), 0);
		if (stats[i] == 0) {
			ctl_test_become(group_attacker, ATTACKER_UID);
			char name[500];
			struct stat st;
			snprintf(name, sizeof(name), "%s/missing-%d", slow_dir, i);
			_exit(stat(name, &st) == 0 || errno == ENOENT ? 0 : 1);
		}
	}
	/* Past the workers' share, the rest wait as the attacker's requests. */
	int64_t held = 0;
	CTL_TEST_POLL((held = ctl_test_tenant_u64(m.mnt, group_attacker, "queued") +
			      ctl_test_tenant_u64(m.mnt, group_attacker, "inflight")) >= HUNG_HELD);
	fprintf(stderr, "isolation: %d stat calls on the hung store: %lld of the attacker's requests held\n",
		HUNG_STATS, (long long)held);

	int status = -1, still_blocked = 0;
	bool reaped = victim_beside_blocked_stats(small, marker, stats, HUNG_STATS, &status, &still_blocked);
	stop_fio(fio);
	test_stalling_store_down(stalling, eiofs);
	fprintf(stderr, "isolation: beside %d stat calls blocked on the hung store the victim %s, %d still blocked\n",
		HUNG_STATS, reaped ? "finished" : "did not finish", still_blocked);
	ck_assert_msg(reaped, "the victim's requests did not complete in %d s beside the hung metadata",
		      HUNG_VICTIM_WAIT_S);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the victim failed (status %d)", status);
	ck_assert_int_eq(still_blocked, HUNG_STATS); /* it finished while the attacker's still waited */
	ck_assert_msg(held >= HUNG_HELD, "only %lld of the attacker's requests reached the daemon", (long long)held);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST


/* The scheduler's slots now, from one stat snapshot: in flight, the limit, kept. */
static void stat_slots(const struct test_mount *m, int64_t *inflight, int64_t *max_inflight,
		       int64_t *kept)
{
	struct json_object *mount = NULL, *field = NULL;
	struct json_object *doc = ctl_test_stat(m->mnt, &mount);
	ck_assert(json_object_object_get_ex(mount, "inflight", &field));
	*inflight = json_object_get_int64(field);
	ck_assert(json_object_object_get_ex(mount, "max_inflight", &field));
	*max_inflight = json_object_get_int64(field);
	ck_assert(json_object_object_get_ex(mount, "reserved_slots", &field));
	*kept = json_object_get_int64(field);
	json_object_put(doc);
}

/*
 * A tenant that reads now and then keeps a slot (the scheduler's reserve):
 * while a weight-10 direct-write flood fills the store, the victim's one
 * read makes the daemon keep a slot free for its next one, and the flood,
 * past its share of the depth, stays out of it; a reserve window later
 * the slot is the flood's again. The window is 5 s here, not the default
 * second: under the sanitizers, with the flood on two cores, the first
 * stat snapshot after the read came more than a second later.
 */
START_TEST(a_slot_is_kept_for_a_tenant_that_comes_and_goes)
{
	struct test_mount m;
	mount_attacker_and_victim_with(&m, NULL, "reserve_ms = 5000");
	char attacker_dir[400];
	make_attacker_dir(&m, attacker_dir, sizeof(attacker_dir));
	make_small_file(&m);
	const char *flood[] = {"--rw=write", "--bs=1M", "--iodepth=512", "--numjobs=2", "--size=256M",
			       NULL};
	pid_t fio = spawn_attacker_fio(attacker_dir, flood);
	int64_t inflight = 0, limit = 0, kept = 0;
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_attacker, "queued") > 16);
	/* Nobody else is about: the setup's own write (make_small_file) is
	 * remembered for the reserve's window, then kept no more. */
	CTL_TEST_POLL((stat_slots(&m, &inflight, &limit, &kept), kept == 0));
	ck_assert_int_eq(kept, 0);

	ck_assert_msg(read_small_as(&m, group_victim, VICTIM_UID), "the victim's read failed");

	int samples = 0;
	CTL_TEST_POLL((stat_slots(&m, &inflight, &limit, &kept), kept > 0));
	for (; kept > 0 && samples < 200; samples++) {
		ck_assert_msg(inflight + kept <= limit, "%lld in flight and %lld kept of %lld",
			      (long long)inflight, (long long)kept, (long long)limit);
		usleep(2000);
		stat_slots(&m, &inflight, &limit, &kept);
	}
	fprintf(stderr, "isolation: a slot kept for the victim in %d snapshots of the flood\n",
		samples);
	ck_assert_int_gt(samples, 0);
	CTL_TEST_POLL((stat_slots(&m, &inflight, &limit, &kept), kept == 0));
	ck_assert_int_eq(kept, 0);
	stop_fio(fio);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* Processes of the metadata storm, each in a directory of its own. */
#define STORM_PROCS 16

/*
 * In a child, forever: create, statx and unlink 16 names in a directory of
 * its own. The statx asks for the birth time, which the kernel never has
 * cached after a create: each is a FUSE_STATX, which the channel serves
 * itself, so the storm's handed-over ones go that way too.
 */
static void metadata_storm(const char *dir)
{
	char path[600];
	for (long n = 0;; n++) {
		snprintf(path, sizeof(path), "%s/f%ld", dir, n % 16);
		int fd = open(path, O_CREAT | O_WRONLY, 0644);
		if (fd < 0 || close(fd) < 0)
			_exit(1);
		struct statx stx;
		if (statx(AT_FDCWD, path, 0, STATX_BASIC_STATS | STATX_BTIME, &stx) < 0 ||
		    (stx.stx_mask & STATX_BASIC_STATS) != STATX_BASIC_STATS || !S_ISREG(stx.stx_mode))
			_exit(2);
		if (unlink(path) < 0)
			_exit(4);
	}
}

/*
 * A weight-10 tenant's processes create, stat and unlink as fast as they
 * can: while it runs alone its metadata runs at once in the workers (the
 * kernel's releases after each close, from pid 0, count as nobody's); once
 * another tenant has requests, its metadata waits in its tenant's queue
 * like any request (seen as queued in stat, though it has no data
 * requests), and the other tenant's lookups and reads complete meanwhile.
 */
START_TEST(metadata_storm_is_queued_while_another_tenant_is_served)
{
	struct test_mount m;
	mount_attacker_and_victim(&m, NULL);
	char storm_dir[400];
	snprintf(storm_dir, sizeof(storm_dir), "%s", test_mnt_path(&m, "storm"));
	ck_assert_int_eq(mkdir(storm_dir, 0755), 0);
	ck_assert_int_eq(chown(storm_dir, ATTACKER_UID, ATTACKER_UID), 0);
	make_small_file(&m);
	pid_t storm[STORM_PROCS];
	for (int i = 0; i < STORM_PROCS; i++) {
		ck_assert_int_ge(storm[i] = fork(), 0);
		if (storm[i] == 0) {
			ctl_test_become(group_attacker, ATTACKER_UID);
			char dir[500];
			snprintf(dir, sizeof(dir), "%s/p%d", storm_dir, i);
			if (mkdir(dir, 0755) < 0)
				_exit(3);
			metadata_storm(dir);
		}
	}
	/*
	 * Alone, the storm's metadata runs in the workers: nothing of it is
	 * queued (after the setup's own requests, this process's, are 100 ms
	 * past and no longer count as another tenant about).
	 */
	usleep(500000);
	int64_t alone_queued_max = 0;
	for (int i = 0; i < 50; i++) {
		int64_t q = ctl_test_tenant_u64(m.mnt, group_attacker, "queued");
		if (q > alone_queued_max)
			alone_queued_max = q;
		usleep(20000);
	}
	/*
	 * While the victim probes: the storm's metadata waits in its queue.
	 * The queue is sampled, and it holds requests only while a probe of
	 * the victim's is being served (under ASan a round of probes can pass
	 * between samples): up to three rounds of probes until one is seen.
	 */
	int64_t storm_queued_max = 0;
	int vstatus = -1;
	for (int round = 0; round < 3 && storm_queued_max == 0; round++) {
		pid_t victim = spawn_prober(&m, NULL);
		while (waitpid(victim, &vstatus, WNOHANG) == 0) {
			int64_t q = ctl_test_tenant_u64(m.mnt, group_attacker, "queued");
			if (q > storm_queued_max)
				storm_queued_max = q;
			usleep(2000);
		}
		if (!WIFEXITED(vstatus) || WEXITSTATUS(vstatus) != 0)
			break;
	}
	int storm_alive = 0;
	for (int i = 0; i < STORM_PROCS; i++)
		storm_alive += waitpid(storm[i], NULL, WNOHANG) == 0;
	/* -1: no row for it any more (nothing counted in the stats' data columns). */
	int64_t storm_data_ops = ctl_test_tenant_u64(m.mnt, group_attacker, "ops.read");
	if (storm_data_ops <= 0)
		storm_data_ops = ctl_test_tenant_u64(m.mnt, group_attacker, "ops.write");
	fprintf(stderr, "isolation: storm queued up to %lld metadata requests alone, %lld while the "
		"victim probed; %d of %d storm processes still running\n", (long long)alone_queued_max,
		(long long)storm_queued_max, storm_alive, STORM_PROCS);
	for (int i = 0; i < STORM_PROCS; i++) {
		kill(storm[i], SIGKILL);
		waitpid(storm[i], NULL, 0);
	}
	ck_assert(WIFEXITED(vstatus) && WEXITSTATUS(vstatus) == 0);
	ck_assert_int_eq(storm_alive, STORM_PROCS);
	ck_assert_int_le(storm_data_ops, 0);
	ck_assert_int_le(alone_queued_max, 0);
	ck_assert_int_gt(storm_queued_max, 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* Delegation of the attacker's cgroup to its user, as systemd does it:
 * the subtree's directory and its process list. */
static void delegate_attacker_cgroup(void)
{
	char path[256];
	snprintf(path, sizeof(path), "%s%s", CG_V2, group_attacker);
	ck_assert_int_eq(chown(path, ATTACKER_UID, ATTACKER_UID), 0);
	snprintf(path, sizeof(path), "%s%s/cgroup.procs", CG_V2, group_attacker);
	ck_assert_int_eq(chown(path, ATTACKER_UID, ATTACKER_UID), 0);
}

/* The tenant rows whose cgroup lies below PREFIX/; their requests queued
 * and in flight, summed, in *held (if not NULL). */
static int tenants_below(const char *mnt, const char *prefix, int64_t *held)
{
	struct json_object *mount, *doc = ctl_test_stat(mnt, &mount), *tenants;
	int n = 0;
	size_t len = strlen(prefix);
	if (held)
		*held = 0;
	if (json_object_object_get_ex(mount, "tenants", &tenants))
		for (size_t i = 0; i < json_object_array_length(tenants); i++) {
			struct json_object *row = json_object_array_get_idx(tenants, i), *cg, *v;
			const char *path = json_object_object_get_ex(row, "cgroup", &cg) ? json_object_get_string(cg) : "";
			if (strncmp(path, prefix, len) != 0 || path[len] != '/')
				continue;
			n++;
			if (held && json_object_object_get_ex(row, "queued", &v))
				*held += json_object_get_int64(v);
			if (held && json_object_object_get_ex(row, "inflight", &v))
				*held += json_object_get_int64(v);
		}
	json_object_put(doc);
	return n;
}

/*
 * A user given a delegated cgroup subtree creates more child cgroups than
 * the tenant table has ids and touches the mount from each: a cgroup the
 * config names, created afterwards, still gets its own row and weight.
 */
START_TEST(cgroup_spray_leaves_a_configured_cgroup_its_weight)
{
	struct test_mount m;
	mount_attacker_and_victim(&m, NULL);
	delegate_attacker_cgroup();
	make_small_file(&m);

	pid_t sprayer = fork();
	ck_assert_int_ge(sprayer, 0);
	if (sprayer == 0) {
		ctl_test_become(group_attacker, ATTACKER_UID);
		char me[32], child[128], procs[160];
		snprintf(me, sizeof(me), "%d\n", (int)getpid());
		for (int i = 0; i < SPRAY_CGROUPS; i++) {
			snprintf(child, sizeof(child), "%s%s/c%d", CG_V2, group_attacker, i);
			snprintf(procs, sizeof(procs), "%s/cgroup.procs", child);
			if (mkdir(child, 0755) < 0)
				_exit(1);
			int fd = open(procs, O_WRONLY);
			if (fd < 0 || write(fd, me, strlen(me)) < 0)
				_exit(2);
			close(fd);
			/* direct: a read from the kernel's page cache would reach nobody */
			static char buf[4096] __attribute__((aligned(4096)));
			fd = open(test_mnt_path(&m, "small"), O_RDONLY | O_DIRECT);
			if (fd < 0 || read(fd, buf, sizeof(buf)) != 4096 || close(fd) < 0)
				_exit(3);
		}
		_exit(0);
	}
	int status = -1;
	ck_assert_int_eq(waitpid(sprayer, &status, 0), sprayer);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the sprayer failed (%d)", status);

	ctl_test_cgroup_make(CG_V2, group_configured);
	ck_assert(read_small_as(&m, group_configured, VICTIM_UID));
	int64_t weight = ctl_test_tenant_u64(m.mnt, group_configured, "weight");
	int sprayed = tenants_below(m.mnt, group_attacker, NULL);
	fprintf(stderr, "isolation: %d sprayed cgroups have tenants of their own; the configured one "
		"has weight %lld\n", sprayed, (long long)weight);
	ck_assert_int_eq(weight, 500);
	ck_assert_int_le(sprayed, 4096 / 8);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* Child cgroups of the attacker's delegated one, each a tenant of its own,
 * and the processes in each blocked in a stat of the hung store. */
#define HUNG_CHILDREN 16
#define HUNG_CHILD_STATS 20
/* Root's: many cgroups, each a tenant, with two stats each. */
#define HUNG_ROOT_CHILDREN 200
#define HUNG_ROOT_CHILD_STATS 2
/* Of the stats, at least this many wait in the daemon as requests (past
 * the 32 that may run at once in workers): more than the daemon's 256
 * executors. */
#define HUNG_CHILDREN_HELD 260
/* The daemon's max_inline_meta: stats that may run, and hang, in workers;
 * a child all of whose stats do has no row. */
#define HUNG_INLINE 32

/*
 * children child cgroups of the attacker's cgroup, each a tenant, with
 * per_child processes each stat-ing a name on the hung store (eiofs)
 * beside 16 hung reads; the victim's opens, reads and stats must complete
 * while every one of the stats is still blocked. One user: uid makes the
 * children in its delegated cgroup; several: child c is made by root and
 * its processes are of uid + c % users.
 */
static void hung_stats_in_child_tenants(int children, int per_child, uid_t uid, int users)
{
	struct test_mount m;
	mount_attacker_and_victim(&m, NULL);
	if (uid && users == 1)
		delegate_attacker_cgroup();
	char source[400], stalling[400], marker[450], slow_dir[400], small[400];
	pid_t fio = 0, eiofs = store_hung_by_readers(&m, source, stalling, marker, slow_dir, small, &fio);
	int n = children * per_child;
	pid_t *stats = calloc((size_t)n, sizeof(*stats));
	ck_assert_ptr_nonnull(stats);
	for (int i = 0; i < n; i++) {
		ck_assert_int_ge(stats[i] = fork(), 0);
		if (stats[i] == 0) {
			char child[128], procs[160], me[32], name[500];
			snprintf(child, sizeof(child), "%s%s/c%d", CG_V2, group_attacker, i / per_child);
			if (users > 1) {
				if (mkdir(child, 0755) < 0 && errno != EEXIST)
					_exit(2);
				ctl_test_become(child + strlen(CG_V2), uid + (uid_t)(i / per_child % users));
				struct stat st;
				snprintf(name, sizeof(name), "%s/missing-%d", slow_dir, i);
				_exit(stat(name, &st) == 0 || errno == ENOENT ? 0 : 1);
			}
			ctl_test_become(group_attacker, uid);
			snprintf(procs, sizeof(procs), "%s/cgroup.procs", child);
			snprintf(me, sizeof(me), "%d\n", (int)getpid());
			if (mkdir(child, 0755) < 0 && errno != EEXIST)
				_exit(2);
			int fd = open(procs, O_WRONLY);
			if (fd < 0 || write(fd, me, strlen(me)) < 0)
				_exit(3);
			close(fd);
			struct stat st;
			snprintf(name, sizeof(name), "%s/missing-%d", slow_dir, i);
			_exit(stat(name, &st) == 0 || errno == ENOENT ? 0 : 1);
		}
	}
	int64_t held = 0, hung = 0;
	int tenants = 0;
	int rowless = HUNG_INLINE / per_child;
	/* and taken for hung, so that they hold their executors (or wait for one) */
	CTL_TEST_POLL((tenants = tenants_below(m.mnt, group_attacker, &held)) >= children - rowless &&
		      held >= HUNG_CHILDREN_HELD && (hung = stat_mount_number(&m, "hung")) >= HUNG_CHILDREN_HELD);
	fprintf(stderr, "isolation: %d stat calls from %d child tenants of %d uid(s) from %d on the hung store: %lld held, %lld hung\n",
		n, tenants, users, (int)uid, (long long)held, (long long)hung);

	int status = -1, still_blocked = 0;
	int64_t executors = stat_mount_number(&m, "executors");
	bool reaped = victim_beside_blocked_stats(small, marker, stats, n, &status, &still_blocked);
	free(stats);
	stop_fio(fio);
	test_stalling_store_down(stalling, eiofs);
	fprintf(stderr, "isolation: beside them (%lld executors) the victim %s, %d still blocked\n",
		(long long)executors, reaped ? "finished" : "did not finish", still_blocked);
	ck_assert_int_ge(tenants, children - rowless);
	ck_assert_int_ge(held, HUNG_CHILDREN_HELD);
	ck_assert_int_ge(hung, HUNG_CHILDREN_HELD);
	ck_assert_msg(reaped, "the victim's requests did not complete in %d s beside the hung child tenants",
		      HUNG_VICTIM_WAIT_S);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the victim failed (status %d)", status);
	ck_assert_int_eq(still_blocked, n); /* it finished while the attacker's still waited */
	test_mount_require_clean_exit(test_mount_stop(&m));
}

/*
 * A user with a delegated cgroup spreads its processes over child cgroups,
 * each a tenant, and stats names on a store that hangs (eiofs): 320 hung
 * lookups beside its 16 hung reads. Four things stopped the victim's
 * open: the scheduler's slot reserve still counted hung requests in the
 * depth, so with more hung than max_inflight no tenant fitted and the
 * victim never got its turn (39 executors idle); a child in service whose
 * requests were all hung was held for, its slice never ending; and the
 * hung lookups handed to executors took every one there was (64, then
 * 256), so the victim's, dispatched, waited behind them, until one user
 * could hold at most a quarter of them. The victim's opens, reads and
 * stats complete while all 320 of the attacker's stats are still blocked.
 */
START_TEST(metadata_hung_for_many_child_tenants_leaves_the_others_threads)
{
	hung_stats_in_child_tenants(HUNG_CHILDREN, HUNG_CHILD_STATS, ATTACKER_UID, 1);
}
END_TEST

/*
 * Root's cgroups are tenants apart and not bounded together, as many
 * containers on one network store that hangs: 160 cgroups of 2 hung
 * lookups each, every one under the bound per tenant. 48 cgroups of 7
 * took all 256 executors until, past 224 held in all, only tenants
 * holding none got one; 160 of 2 took them again, the 224 and then a
 * first each for the cgroups still holding none, until the executors past
 * the 256 were started for such newcomers (at most 1024). The victim,
 * holding none, gets its thread.
 */
START_TEST(metadata_hung_for_many_root_tenants_leaves_the_others_threads)
{
	hung_stats_in_child_tenants(HUNG_ROOT_CHILDREN, HUNG_ROOT_CHILD_STATS, 0, 1);
}
END_TEST

/*
 * A network store hung for several users at once, each with its jobs in
 * cgroups of their own: 8 users, 2 child cgroups each, 20 hung lookups in
 * each cgroup. Every user is under its bound of 64, so they take
 * executors until 224 are held; then only a tenant and user holding none
 * gets one, and the victim's user holds none. With neither the room nor
 * executors past 256 the users took all 256 and the victim's lookup never
 * got one (not finished at 30 s); with them, 237-239 are running.
 */
START_TEST(metadata_hung_for_many_users_leaves_the_others_threads)
{
	hung_stats_in_child_tenants(HUNG_CHILDREN, HUNG_CHILD_STATS, OTHER_USERS_UID, 8);
}
END_TEST

int main(void)
{
	test_require_root("isolation", "FUSE mounts, cgroups, other users");
	if (access("/dev/fuse", R_OK | W_OK) != 0 || access(CG_V2 "/cgroup.procs", W_OK) != 0) {
		fprintf(stderr, "SKIP: isolation: needs /dev/fuse and cgroup v2 at %s\n", CG_V2);
		return 77;
	}
	if (system("command -v fio >/dev/null") != 0) {
		fprintf(stderr, "SKIP: isolation: needs fio for its floods\n");
		return 77;
	}
	Suite *s = suite_create("isolation");
	TCase *tc = tcase_create("attacks");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	/* Added after: its teardown runs first, before leftovers_cleanup takes the mount. */
	tcase_add_unchecked_fixture(tc, NULL, sweep_attacker_trees);
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 600);
	tcase_add_test(tc, write_flood_does_not_stall_another_tenant_and_its_memory_returns);
	tcase_add_test(tc, workers_busy_with_small_requests_give_back_their_write_buffers);
	tcase_add_test(tc, kernel_queue_is_sized_in_bytes);
	tcase_add_test(tc, kernel_queue_makes_room_for_a_deep_tenant_behind_held_requests);
	tcase_add_test(tc, a_slot_is_kept_for_a_tenant_that_comes_and_goes);
	tcase_add_test(tc, cgroup_spray_leaves_a_configured_cgroup_its_weight);
	tcase_add_test(tc, a_store_hung_for_one_tenant_leaves_the_others_the_kernels_queue);
	tcase_add_test(tc, metadata_hung_for_one_tenant_leaves_the_others_workers);
	tcase_add_test(tc, a_reload_during_a_hang_leaves_the_others_served);
	tcase_add_test(tc, a_stop_during_a_hang_gives_up_only_what_hung);
	tcase_add_test(tc, metadata_hung_for_many_child_tenants_leaves_the_others_threads);
	tcase_add_test(tc, metadata_hung_for_many_root_tenants_leaves_the_others_threads);
	tcase_add_test(tc, metadata_hung_for_many_users_leaves_the_others_threads);
	tcase_add_test(tc, metadata_storm_is_queued_while_another_tenant_is_served);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
