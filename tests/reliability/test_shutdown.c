/*
 * SIGTERM in the middle of a multi-tenant run. Three real cgroups each run
 * fio (load: buffered random writes with fsyncs, and deep O_DIRECT async
 * writes) and two journals that publish, in shared memory, what was
 * acknowledged: a sequential one (write + fsync every few records) and a
 * deep one (16 O_DIRECT io_uring writes in flight at all times, so the
 * daemon holds several requests of each tenant). The daemon gets SIGTERM
 * while all of them write. Required: it exits 0 and the mount is gone (not
 * left disconnected); every journal and fio ends with a clean error instead
 * of hanging; and every write acknowledged before the mount went is on the
 * backing directory with the right content. Run twice: default config, and
 * with the scheduler's queues kept full, where a daemon that acknowledged
 * queued writes and then dropped them at shutdown reliably fails. Both
 * with a stop timeout of 2 s: a drain that keeps finishing requests is not
 * given up.
 */
#include "ctl_test_util.h"
#include "leftovers.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <liburing.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TENANTS 3
#define RECORD_BYTES 4096
#define RECORDS_PER_FSYNC 4
/*
 * The deep journal: 16 files of 2 MiB rewritten pass after pass, 16 writes in
 * flight. Consecutive writes go to different files: FUSE serializes direct
 * writes to one inode, so one file would mean one request at the daemon.
 */
#define DEEP_SLOTS 8192
#define DEEP_FILES 16
#define DEEP_QUEUE_DEPTH 16
#define DEEP_JOURNAL_KEY(tenant) (100 + (tenant))
#define DEEP_ACKED_BEFORE_SIGTERM 512
/* Past this a writer only fsyncs: bounds disk use if the shutdown never comes. */
#define JOURNAL_CAP_BYTES (256LL << 20)
/* Each journal has this much acknowledged before SIGTERM: everyone is mid-run. */
#define ACKED_BEFORE_SIGTERM_BYTES (1LL << 20)
/* ...and each fio at least this many writes: its jobs are in their main loop. */
#define FIO_WRITES_BEFORE_SIGTERM 2000
/* Hang guards only: far above a healthy shutdown, even under ASan on a busy VM. */
#define DAEMON_EXIT_WAIT_MS 120000
#define CLIENT_EXIT_WAIT_MS 60000
#define START_WAIT_MS 60000

/* One per journal writer, in memory shared with the test process. */
struct journal_state {
	atomic_llong acked_bytes;   /* prefix of the journal acknowledged by write() */
	atomic_llong synced_bytes;  /* prefix acknowledged by fsync() */
	atomic_int error_errno;     /* what ended the writer; 0 while it runs */
	atomic_int error_op;        /* 'w' write, 's' fsync, 'o' open */
};

/* Written by the deep journal, read by the test once it has exited. */
struct deep_state {
	atomic_llong acked_writes;
	atomic_int error_errno;             /* the first failure; 0 while it runs */
	uint32_t acked_pass[DEEP_SLOTS];     /* 1 + pass of the slot's last acknowledged write; 0: none */
	uint32_t submitted_pass[DEEP_SLOTS]; /* 1 + pass of the slot's last submitted write */
};

/* A record is a function of journal, offset and pass: misplaced or stale bytes show. */
static void fill_record(unsigned char *rec, int journal, long long offset_bytes, uint32_t pass)
{
	for (int i = 0; i < RECORD_BYTES; i += 8) {
		uint64_t v = ((uint64_t)(journal + 1) * 0x9E3779B97F4A7C15u) ^ (uint64_t)(offset_bytes + i) ^
			     ((uint64_t)pass << 40);
		memcpy(rec + i, &v, 8);
	}
}

static void sleep_ms(long ms)
{
	struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

/* Child: appends records until an error ends it; never exits on its own otherwise. */
static void journal_writer(const char *path, int tenant, struct journal_state *st)
{
	int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0) {
		atomic_store(&st->error_op, 'o');
		atomic_store(&st->error_errno, errno);
		_exit(1);
	}
	unsigned char rec[RECORD_BYTES];
	long long offset_bytes = 0;
	for (unsigned long n = 1;; n++) {
		if (offset_bytes < JOURNAL_CAP_BYTES) {
			/* Records are aligned, so a short write resumes inside one: refill from its start. */
			long long rec_start = offset_bytes - offset_bytes % RECORD_BYTES;
			fill_record(rec, tenant, rec_start, 0);
			size_t skip = (size_t)(offset_bytes - rec_start);
			ssize_t w = pwrite(fd, rec + skip, RECORD_BYTES - skip, offset_bytes);
			if (w <= 0) {
				atomic_store(&st->error_op, 'w');
				atomic_store(&st->error_errno, w < 0 ? errno : EIO);
				_exit(0);
			}
			offset_bytes += w;
			atomic_store(&st->acked_bytes, offset_bytes);
		}
		if (n % RECORDS_PER_FSYNC == 0) {
			if (fsync(fd) < 0) {
				atomic_store(&st->error_op, 's');
				atomic_store(&st->error_errno, errno);
				_exit(0);
			}
			atomic_store(&st->synced_bytes, offset_bytes);
		}
		if (offset_bytes >= JOURNAL_CAP_BYTES)
			sleep_ms(10);
	}
}

/* Slot s lives in file s % DEEP_FILES at record s / DEEP_FILES. */
static void deep_slot_path(char *out, size_t out_bytes, const char *prefix, uint32_t slot)
{
	snprintf(out, out_bytes, "%s-%02u", prefix, slot % DEEP_FILES);
}

static long long deep_slot_offset_bytes(uint32_t slot)
{
	return (long long)(slot / DEEP_FILES) * RECORD_BYTES;
}

/*
 * Child: keeps DEEP_QUEUE_DEPTH O_DIRECT writes in flight until one fails,
 * then collects the rest and exits. Write number n goes to slot n % DEEP_SLOTS
 * as pass n / DEEP_SLOTS; a slot is rewritten only once its last write was
 * acknowledged, so per slot "last acknowledged pass" is exact.
 */
static void deep_writer(const char *prefix, int tenant, struct deep_state *st)
{
	int fds[DEEP_FILES];
	struct io_uring ring;
	unsigned char *bufs = NULL;
	int err = 0;
	for (uint32_t f = 0; f < DEEP_FILES && !err; f++) {
		char path[700];
		deep_slot_path(path, sizeof(path), prefix, f);
		fds[f] = open(path, O_CREAT | O_WRONLY | O_TRUNC | O_DIRECT | O_CLOEXEC, 0644);
		if (fds[f] < 0)
			err = errno;
	}
	if (!err && (err = -io_uring_queue_init(DEEP_QUEUE_DEPTH, &ring, 0)) == 0)
		err = posix_memalign((void **)&bufs, RECORD_BYTES, DEEP_QUEUE_DEPTH * RECORD_BYTES);
	if (err) {
		atomic_store(&st->error_errno, err);
		_exit(1);
	}
	int free_bufs[DEEP_QUEUE_DEPTH], free_count = 0;
	for (int b = 0; b < DEEP_QUEUE_DEPTH; b++)
		free_bufs[free_count++] = b;
	uint64_t next = 0;
	int outstanding = 0;
	for (;;) {
		while (!err && free_count > 0) {
			uint32_t slot = (uint32_t)(next % DEEP_SLOTS), pass = (uint32_t)(next / DEEP_SLOTS);
			if (st->submitted_pass[slot] != st->acked_pass[slot])
				break; /* its previous write is still in flight */
			int b = free_bufs[--free_count];
			unsigned char *buf = bufs + (size_t)b * RECORD_BYTES;
			fill_record(buf, DEEP_JOURNAL_KEY(tenant), (long long)slot * RECORD_BYTES, pass);
			st->submitted_pass[slot] = pass + 1;
			struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
			io_uring_prep_write(sqe, fds[slot % DEEP_FILES], buf, RECORD_BYTES,
					    (uint64_t)deep_slot_offset_bytes(slot));
			io_uring_sqe_set_data64(sqe, next << 8 | (uint64_t)b);
			next++;
			outstanding++;
		}
		if (outstanding == 0)
			break;
		int r = io_uring_submit_and_wait(&ring, 1);
		if (r < 0 && r != -EINTR && !err)
			err = -r;
		struct io_uring_cqe *cqe;
		unsigned head, seen = 0;
		io_uring_for_each_cqe(&ring, head, cqe) {
			seen++;
			uint64_t data = io_uring_cqe_get_data64(cqe);
			uint64_t n = data >> 8;
			if (cqe->res == RECORD_BYTES) {
				st->acked_pass[n % DEEP_SLOTS] = (uint32_t)(n / DEEP_SLOTS) + 1;
				atomic_fetch_add(&st->acked_writes, 1);
			} else if (!err) {
				err = cqe->res < 0 ? -cqe->res : EIO;
			}
			free_bufs[free_count++] = (int)(data & 0xff);
			outstanding--;
		}
		io_uring_cq_advance(&ring, seen);
		if (r < 0 && seen == 0 && err)
			break; /* the ring itself failed: nothing more will complete */
	}
	atomic_store(&st->error_errno, err);
	_exit(0);
}

/* Forks a child that waits until it is in its cgroup, then runs fn(arg) or execs argv. */
static pid_t spawn_in_cgroup(const char *cgroup_name, void (*fn)(void *), void *arg,
			     const char *const *argv, const char *log_path)
{
	int go[2];
	ck_assert_int_eq(pipe(go), 0);
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		close(go[1]);
		char c;
		if (read(go[0], &c, 1) != 1)
			_exit(3);
		close(go[0]);
		if (fn) {
			fn(arg);
			_exit(0);
		}
		int fd = open(log_path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
		if (fd < 0 || dup2(fd, STDOUT_FILENO) < 0 || dup2(fd, STDERR_FILENO) < 0)
			_exit(126);
		execvp(argv[0], (char **)argv);
		_exit(127);
	}
	close(go[0]);
	ctl_test_cgroup_move(CG_V2, cgroup_name, pid);
	ck_assert_int_eq(write(go[1], "g", 1), 1);
	close(go[1]);
	return pid;
}

struct journal_job {
	char path[600];
	char deep_path[600];
	int tenant;
	struct journal_state *state;
	struct deep_state *deep;
};

static void run_journal_job(void *arg)
{
	struct journal_job *j = arg;
	journal_writer(j->path, j->tenant, j->state);
}

static void run_deep_job(void *arg)
{
	struct journal_job *j = arg;
	deep_writer(j->deep_path, j->tenant, j->deep);
}

/* Reaps pid within wait_ms; SIGKILLs it and fails the test if it hangs. */
static int reap_within(pid_t pid, long wait_ms, const char *what)
{
	int status = 0;
	pid_t r = 0;
	for (long waited_ms = 0; waited_ms < wait_ms && (r = waitpid(pid, &status, WNOHANG)) == 0;
	     waited_ms += 10)
		sleep_ms(10);
	if (r == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	ck_assert_msg(r == pid, "%s (pid %d) still running after %ld ms: hung", what, (int)pid, wait_ms);
	return status;
}

/* The journal's acknowledged prefix on the backing directory, byte for byte. */
static void verify_journal(const char *backing_path, int tenant, long long acked_bytes)
{
	int fd = open(backing_path, O_RDONLY);
	ck_assert_msg(fd >= 0, "%s: %s", backing_path, strerror(errno));
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_msg(st.st_size >= acked_bytes,
		      "%s: %lld bytes acknowledged by write(), only %lld on the backing directory",
		      backing_path, acked_bytes, (long long)st.st_size);
	unsigned char want[RECORD_BYTES], got[RECORD_BYTES];
	for (long long off = 0; off < acked_bytes; off += RECORD_BYTES) {
		size_t len = (size_t)(acked_bytes - off < RECORD_BYTES ? acked_bytes - off : RECORD_BYTES);
		fill_record(want, tenant, off, 0);
		ck_assert_int_eq(pread(fd, got, len, off), (ssize_t)len);
		ck_assert_msg(memcmp(want, got, len) == 0,
			      "%s: acknowledged record at offset %lld has the wrong content", backing_path,
			      off);
	}
	close(fd);
}

/*
 * Each slot of the deep journal holds its last acknowledged pass, or the
 * pass submitted after it (unacknowledged: it may or may not have landed).
 */
static long long verify_deep_journal(const char *backing_prefix, int tenant, const struct deep_state *st)
{
	int fds[DEEP_FILES];
	for (uint32_t f = 0; f < DEEP_FILES; f++) {
		char path[700];
		deep_slot_path(path, sizeof(path), backing_prefix, f);
		fds[f] = open(path, O_RDONLY);
		ck_assert_msg(fds[f] >= 0, "%s: %s", path, strerror(errno));
	}
	unsigned char want[RECORD_BYTES], got[RECORD_BYTES];
	long long checked_slots = 0;
	for (uint32_t slot = 0; slot < DEEP_SLOTS; slot++) {
		uint32_t acked = st->acked_pass[slot], submitted = st->submitted_pass[slot];
		if (acked == 0)
			continue;
		long long off = (long long)slot * RECORD_BYTES;
		ck_assert_msg(pread(fds[slot % DEEP_FILES], got, RECORD_BYTES, deep_slot_offset_bytes(slot)) ==
				      RECORD_BYTES,
			      "%s-%02u: acknowledged slot %u (pass %u) is missing", backing_prefix,
			      slot % DEEP_FILES, slot, acked - 1);
		fill_record(want, DEEP_JOURNAL_KEY(tenant), off, acked - 1);
		bool ok = memcmp(want, got, RECORD_BYTES) == 0;
		if (!ok && submitted > acked) {
			fill_record(want, DEEP_JOURNAL_KEY(tenant), off, submitted - 1);
			ok = memcmp(want, got, RECORD_BYTES) == 0;
		}
		ck_assert_msg(ok, "%s-%02u: slot %u does not hold its acknowledged pass %u", backing_prefix,
			      slot % DEEP_FILES, slot, acked - 1);
		checked_slots++;
	}
	for (uint32_t f = 0; f < DEEP_FILES; f++)
		close(fds[f]);
	return checked_slots;
}

static bool file_has(const char *path, const char *needle)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	char line[1024];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strstr(line, needle) != NULL;
	fclose(f);
	return found;
}

static bool clean_disconnect_errno(int e)
{
	/* ENOTCONN: request after the connection ended; ECONNABORTED: queued when it was aborted. */
	return e == ENOTCONN || e == ECONNABORTED || e == EIO;
}

/* The whole run; config_text (may be NULL) is the daemon's config file. */
static void sigterm_mid_fio(const char *config_text)
{
	ck_assert_msg(test_sh("command -v fio >/dev/null") == 0, "fio is not installed (scripts/install-deps)");
	char conf[512];
	snprintf(conf, sizeof(conf), "%s/shutdown-%d.conf", TEST_SCRATCH_DIR, (int)getpid());
	/* A stop that goes on finishing requests is never cut short by the stop
	 * guard (stop_guard.h), however short its timeout: exit 0 is required. */
	const char *args[] = {"-o", "stop_timeout=2", config_text ? "-c" : NULL, conf, NULL};
	if (config_text) {
		mkdir(TEST_SCRATCH_DIR, 0755);
		test_write_file(conf, config_text);
		leftovers_add_dir(conf);
	}
	struct test_mount m;
	/* The mount and the cgroups below are recorded by their helpers for the runner (leftovers.h). */
	test_mount_start(&m, args);
	struct journal_state *states = mmap(NULL, sizeof(struct journal_state) * TENANTS,
					    PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct deep_state *deeps = mmap(NULL, sizeof(struct deep_state) * TENANTS, PROT_READ | PROT_WRITE,
					MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(states, MAP_FAILED);
	ck_assert_ptr_ne(deeps, MAP_FAILED);
	memset(states, 0, sizeof(struct journal_state) * TENANTS);
	memset(deeps, 0, sizeof(struct deep_state) * TENANTS);

	char cgroups[TENANTS][64], fio_logs[TENANTS][600];
	struct journal_job jobs[TENANTS];
	pid_t writers[TENANTS], deep_writers[TENANTS], fios[TENANTS];
	for (int i = 0; i < TENANTS; i++) {
		snprintf(cgroups[i], sizeof(cgroups[i]), "/fs-shutdown-%d-%d", (int)getpid(), i);
		ctl_test_cgroup_make(CG_V2, cgroups[i]);
		snprintf(jobs[i].path, sizeof(jobs[i].path), "%s/journal-%d", m.mnt, i);
		snprintf(jobs[i].deep_path, sizeof(jobs[i].deep_path), "%s/deep-%d", m.mnt, i);
		jobs[i].tenant = i;
		jobs[i].state = &states[i];
		jobs[i].deep = &deeps[i];
		writers[i] = spawn_in_cgroup(cgroups[i], run_journal_job, &jobs[i], NULL, NULL);
		deep_writers[i] = spawn_in_cgroup(cgroups[i], run_deep_job, &jobs[i], NULL, NULL);

		char rand_file[600], direct_file[600];
		snprintf(rand_file, sizeof(rand_file), "--filename=%s/fio-rand-%d", m.mnt, i);
		snprintf(direct_file, sizeof(direct_file), "--filename=%s/fio-direct-%d", m.mnt, i);
		snprintf(fio_logs[i], sizeof(fio_logs[i]), "%s/fio-%d.log", m.root, i);
		/* time_based far beyond the test: only the shutdown ends these jobs. */
		const char *fio_argv[] = {
			"fio", "--output-format=normal", "--time_based", "--runtime=600",
			"--name=rand", rand_file, "--size=16M", "--rw=randwrite", "--bs=4k",
			"--ioengine=psync", "--fsync=8",
			"--name=direct", direct_file, "--size=16M", "--rw=write", "--bs=128k",
			"--direct=1", "--ioengine=libaio", "--iodepth=8", NULL};
		fios[i] = spawn_in_cgroup(cgroups[i], NULL, NULL, fio_argv, fio_logs[i]);
	}

	/*
	 * Everyone is writing: each journal has acknowledged writes (the sequential
	 * one fsynced ones), and each tenant's fio has made writes of its own. The
	 * daemon publishes counters once a second; published writes minus the
	 * journals' writes now is a lower bound on fio's.
	 */
	for (int i = 0; i < TENANTS; i++) {
		int64_t fio_writes = 0;
		for (long waited_ms = 0; waited_ms < START_WAIT_MS; waited_ms += 50) {
			int e = atomic_load(&states[i].error_errno), de = atomic_load(&deeps[i].error_errno);
			ck_assert_msg(e == 0, "journal %d failed early: %s", i, strerror(e));
			ck_assert_msg(de == 0, "deep journal %d failed early: %s", i, strerror(de));
			int status;
			ck_assert_msg(waitpid(fios[i], &status, WNOHANG) == 0,
				      "fio %d ended before the shutdown (status %d)", i, status);
			long long acked = atomic_load(&states[i].acked_bytes);
			long long deep_acked = atomic_load(&deeps[i].acked_writes);
			int64_t tenant_writes = ctl_test_tenant_u64(m.mnt, cgroups[i], "ops.write");
			fio_writes = tenant_writes - acked / RECORD_BYTES - deep_acked;
			if (acked >= ACKED_BEFORE_SIGTERM_BYTES && atomic_load(&states[i].synced_bytes) > 0 &&
			    deep_acked >= DEEP_ACKED_BEFORE_SIGTERM && fio_writes >= FIO_WRITES_BEFORE_SIGTERM)
				break;
			sleep_ms(50);
		}
		ck_assert_msg(atomic_load(&states[i].acked_bytes) >= ACKED_BEFORE_SIGTERM_BYTES,
			      "journal %d did not get going", i);
		ck_assert_msg(atomic_load(&deeps[i].acked_writes) >= DEEP_ACKED_BEFORE_SIGTERM,
			      "deep journal %d did not get going", i);
		ck_assert_msg(fio_writes >= FIO_WRITES_BEFORE_SIGTERM, "fio %d did not get going (%" PRId64
			      " writes)", i, fio_writes);
	}

	long long acked_at_sigterm[TENANTS], deep_at_sigterm[TENANTS];
	for (int i = 0; i < TENANTS; i++) {
		acked_at_sigterm[i] = atomic_load(&states[i].acked_bytes);
		deep_at_sigterm[i] = atomic_load(&deeps[i].acked_writes);
	}
	ck_assert_int_eq(kill(m.daemon_pid, SIGTERM), 0);
	int status = reap_within(m.daemon_pid, DAEMON_EXIT_WAIT_MS, "daemon after SIGTERM");
	m.daemon_pid = 0;
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon exit status %d", status);

	/* Unmounted, not left behind as a disconnected mount that fails with ENOTCONN. */
	struct stat st;
	ck_assert_msg(stat(m.mnt, &st) == 0, "stat %s: %s", m.mnt, strerror(errno));
	ck_assert(!test_is_fuse_mount(m.mnt));
	ck_assert(!test_in_mountinfo(m.mnt));

	for (int i = 0; i < TENANTS; i++) {
		int ws = reap_within(writers[i], CLIENT_EXIT_WAIT_MS, "journal writer");
		ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "journal writer %d: status %d", i, ws);
		int e = atomic_load(&states[i].error_errno);
		ck_assert_msg(clean_disconnect_errno(e), "journal %d ended by %c: %s", i,
			      atomic_load(&states[i].error_op), strerror(e));
		ws = reap_within(deep_writers[i], CLIENT_EXIT_WAIT_MS, "deep journal writer");
		ck_assert_msg(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "deep journal writer %d: status %d", i, ws);
		e = atomic_load(&deeps[i].error_errno);
		ck_assert_msg(clean_disconnect_errno(e), "deep journal %d ended by %s", i, strerror(e));
		int fs = reap_within(fios[i], CLIENT_EXIT_WAIT_MS, "fio");
		bool clean = file_has(fio_logs[i], "Transport endpoint is not connected") ||
			     file_has(fio_logs[i], "Software caused connection abort") ||
			     file_has(fio_logs[i], "Input/output error");
		if (!clean || !(WIFEXITED(fs) && WEXITSTATUS(fs) != 0))
			test_sh("cat '%s' >&2", fio_logs[i]);
		ck_assert_msg(WIFEXITED(fs) && WEXITSTATUS(fs) != 0, "fio %d: status %d, expected an error exit",
			      i, fs);
		ck_assert_msg(clean, "fio %d did not report a disconnect error", i);
	}

	for (int i = 0; i < TENANTS; i++) {
		long long acked = atomic_load(&states[i].acked_bytes);
		char rel[32];
		snprintf(rel, sizeof(rel), "journal-%d", i);
		verify_journal(test_backing_path(&m, rel), i, acked);
		snprintf(rel, sizeof(rel), "deep-%d", i);
		long long slots = verify_deep_journal(test_backing_path(&m, rel), i, &deeps[i]);
		fprintf(stderr,
			"test_shutdown: tenant %d: journal %lld bytes acknowledged at SIGTERM, %lld in the end "
			"(%lld fsynced), ended by %s; deep journal %lld writes acknowledged at SIGTERM, %lld in "
			"the end (%lld slots checked), ended by %s\n",
			i, acked_at_sigterm[i], acked, (long long)atomic_load(&states[i].synced_bytes),
			strerror(atomic_load(&states[i].error_errno)), deep_at_sigterm[i],
			(long long)atomic_load(&deeps[i].acked_writes), slots,
			strerror(atomic_load(&deeps[i].error_errno)));
	}
	ctl_test_cgroups_cleanup();
	munmap(states, sizeof(struct journal_state) * TENANTS);
	munmap(deeps, sizeof(struct deep_state) * TENANTS);
	test_mount_stop(&m);
	if (config_text)
		unlink(conf);
}

START_TEST(sigterm_mid_fio_drains_unmounts_keeps_acknowledged_writes)
{
	sigterm_mid_fio(NULL);
}
END_TEST

/*
 * One request at the store at a time, and 20 ms idling for a tenant whose
 * queue ran dry: the scheduler's queues stay full, so SIGTERM finds queued
 * requests to drain. (A daemon changed to answer writes still queued at
 * shutdown without performing them failed this test in 10 of 10 runs; the
 * default-config test above caught it only now and then.)
 */
START_TEST(sigterm_with_full_queues_drains_them)
{
	sigterm_mid_fio("[scheduler]\nmax_inflight = 1\nidle = 20000\n");
}
END_TEST

static Suite *shutdown_suite(void)
{
	Suite *s = suite_create("shutdown");
	TCase *tc = tcase_create("shutdown");
	tcase_set_timeout(tc, 600);
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_test(tc, sigterm_mid_fio_drains_unmounts_keeps_acknowledged_writes);
	tcase_add_test(tc, sigterm_with_full_queues_drains_them);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("shutdown", "FUSE mounts, cgroups");
	SRunner *sr = srunner_create(shutdown_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
