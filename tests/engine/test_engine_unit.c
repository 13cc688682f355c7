/*
 * The engine without a mount: requests are handed to its datapath directly
 * and its answers go to a recording reply sink instead of FUSE, so every
 * path of the one request lifecycle is checked here: solo requests, held
 * and copied writes, ring transfers, short transfers, errors, copies in
 * pieces on the blocking executors, and the drain at stop.
 */
#include "fusesched/config.h"
#include "fusesched/engine.h"
#include "fusesched/stats.h"
#include "fusesched/tenant.h"
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_REQUESTS 4096
#define ANSWER_WAIT_MS 10000
#define MAX_TENANTS 64

/* ---- the recording reply sink ------------------------------------------ */

struct answer {
	bool done;
	enum datapath_op op;
	int err;
	uint64_t bytes;
	unsigned char *data; /* a read's bytes, copied */
	char thread[16];     /* the name of the thread that answered */
};

static struct answer answers[MAX_REQUESTS];
static uint32_t next_token;
static uint32_t answered_twice;
static pthread_mutex_t answers_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t answers_changed = PTHREAD_COND_INITIALIZER;

static void record_answer(fuse_req_t req, enum datapath_op op, int err, const void *data,
			  uint64_t bytes)
{
	uint32_t i = (uint32_t)(uintptr_t)req - 1;
	pthread_mutex_lock(&answers_lock);
	if (answers[i].done) {
		answered_twice++;
	} else {
		answers[i] = (struct answer){.done = true, .op = op, .err = err, .bytes = bytes};
		(void)pthread_getname_np(pthread_self(), answers[i].thread, sizeof(answers[i].thread));
		if (op == DATAPATH_READ && !err && bytes) {
			answers[i].data = malloc(bytes);
			memcpy(answers[i].data, data, bytes);
		}
	}
	pthread_cond_broadcast(&answers_changed);
	pthread_mutex_unlock(&answers_lock);
}

static fuse_req_t new_token(void)
{
	pthread_mutex_lock(&answers_lock);
	uint32_t i = next_token++;
	pthread_mutex_unlock(&answers_lock);
	ck_assert_uint_lt(i, MAX_REQUESTS);
	return (fuse_req_t)(uintptr_t)(i + 1);
}

static bool is_answered(fuse_req_t token)
{
	pthread_mutex_lock(&answers_lock);
	bool done = answers[(uintptr_t)token - 1].done;
	pthread_mutex_unlock(&answers_lock);
	return done;
}

static struct answer wait_answer(fuse_req_t token)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += ANSWER_WAIT_MS / 1000;
	pthread_mutex_lock(&answers_lock);
	struct answer *a = &answers[(uintptr_t)token - 1];
	while (!a->done && pthread_cond_timedwait(&answers_changed, &answers_lock, &until) == 0)
		;
	struct answer copy = *a;
	pthread_mutex_unlock(&answers_lock);
	ck_assert_msg(copy.done, "request %u not answered within %d ms", (unsigned)(uintptr_t)token,
		      ANSWER_WAIT_MS);
	return copy;
}

static void forget_answers(void)
{
	for (uint32_t i = 0; i < MAX_REQUESTS; i++) {
		free(answers[i].data);
		answers[i] = (struct answer){0};
	}
	next_token = 0;
	answered_twice = 0;
}

/* ---- an engine over the test process's tenant -------------------------- */

static struct config *cfg;
static struct tenant_table *tenants;
static struct stats *stats;
static struct engine *engine;
static struct datapath *dp;
static char scratch[256];

/* The kernel's queue as the engine sees it (engine_set_kernel_queue); NULL set: fixed. */
static _Atomic uint32_t kernel_limit;
static _Atomic int64_t kernel_waiting;

static void record_kernel_limit(void *arg, uint32_t limit)
{
	(void)arg;
	atomic_store(&kernel_limit, limit);
}

static int64_t report_kernel_waiting(void *arg)
{
	(void)arg;
	return atomic_load(&kernel_waiting);
}

/* Where set, the scheduler's cost model prices dsync writes at this many a
 * second (and nothing else). */
static uint32_t dsync_model_iops;
/* Where set, the engine is mounted with this max_inflight. */
static uint32_t mount_max_inflight;
/* 0: the default executor_idle_ns */
static uint64_t executor_idle_ns;

static void engine_up_sized(bool solo, uint32_t max_held_writes, bool kernel_queue_sized)
{
	forget_answers();
	ck_assert_int_eq(config_new_default(&cfg), 0);
	char err[256];
	const struct tenant_table_params tp = {.max_tenants = MAX_TENANTS};
	ck_assert_msg(tenant_table_new(&tp, cfg, &tenants, err, sizeof(err)) == 0, "%s", err);
	ck_assert_ptr_nonnull(stats = stats_new(MAX_TENANTS));
	struct engine_params p;
	engine_params_default(&p);
	p.reply = record_answer;
	p.solo_requests = solo;
	p.max_held_writes = max_held_writes;
	if (mount_max_inflight)
		p.sched.max_inflight = mount_max_inflight;
	if (executor_idle_ns)
		p.executor_idle_ns = executor_idle_ns;
	if (dsync_model_iops) {
		p.sched.model_iops[SCHED_COST_DSYNC] = dsync_model_iops;
		p.sched.model_bytes_per_s[SCHED_COST_DSYNC] = 1000000000ull;
	}
	ck_assert_msg(engine_new(&p, tenants, stats, &engine, err, sizeof(err)) == 0, "%s", err);
	atomic_store(&kernel_limit, 0);
	if (kernel_queue_sized)
		engine_set_kernel_queue(engine, record_kernel_limit, report_kernel_waiting, NULL, 1024);
	ck_assert_int_eq(engine_start(engine), 0);
	dp = engine_datapath(engine);
	snprintf(scratch, sizeof(scratch), "/tmp/engine-unit-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(scratch));
}

static void engine_up(bool solo, uint32_t max_held_writes)
{
	engine_up_sized(solo, max_held_writes, false);
}

static void engine_down(void)
{
	engine_free(engine); /* stops first: everything taken is answered */
	ck_assert_uint_eq(answered_twice, 0);
	for (uint32_t i = 0; i < next_token; i++)
		ck_assert_msg(answers[i].done, "request %u never answered", i + 1);
	stats_free(stats);
	tenant_table_free(tenants);
	config_free(cfg);
	test_sh("rm -rf '%s'", scratch);
}

static void open_file(const char *name, int flags, struct datapath_file *f)
{
	char path[400];
	snprintf(path, sizeof(path), "%s/%s", scratch, name);
	memset(f, 0, sizeof(*f));
	f->fd = open(path, flags | O_CREAT | O_CLOEXEC, 0644);
	ck_assert_int_ge(f->fd, 0);
	f->opener_pid = getpid();
	ck_assert_int_eq(dp->file_opened(dp, f), 0);
}

static void close_file(struct datapath_file *f)
{
	dp->file_released(dp, f);
	close(f->fd);
}

static fuse_req_t submit(struct datapath_file *f, enum datapath_op op, uint64_t offset,
			 uint64_t size, const void *data)
{
	fuse_req_t token = new_token();
	const struct datapath_req r = {.req = token, .op = op, .file = f, .offset_bytes = offset,
				       .size_bytes = size, .write_data = data, .pid = getpid()};
	dp->submit(dp, &r);
	return token;
}

static void fill(unsigned char *buf, size_t bytes, unsigned seed)
{
	for (size_t i = 0; i < bytes; i++)
		buf[i] = (unsigned char)(seed * 131 + i * 7 + (i >> 9));
}

static struct stats_tenant_snapshot tenant_stats(const struct datapath_file *f)
{
	struct stats_tenant_snapshot snap;
	stats_read_tenant(stats, f->opener_tenant, &snap);
	return snap;
}

/* ---- the paths ---------------------------------------------------------- */

/*
 * Alone, a request runs in the submitting thread and is counted as solo.
 * The reactor closes the token for a moment on each of its rounds (timers),
 * so not every one of them need be solo: most are.
 */
START_TEST(solo_requests_run_in_the_submitter)
{
	engine_up(true, 16);
	struct datapath_file f;
	open_file("solo", O_RDWR, &f);
	unsigned char data[8192], back[8192];
	fill(data, sizeof(data), 1);
	fuse_req_t w = submit(&f, DATAPATH_WRITE, 4096, sizeof(data), data);
	ck_assert(is_answered(w));
	ck_assert_int_eq(wait_answer(w).bytes, sizeof(data));
	fuse_req_t r = submit(&f, DATAPATH_READ, 4096, sizeof(data), NULL);
	struct answer a = wait_answer(r);
	ck_assert_int_eq(a.err, 0);
	ck_assert_int_eq(a.bytes, sizeof(data));
	ck_assert_int_eq(memcmp(a.data, data, sizeof(data)), 0);
	fuse_req_t s = submit(&f, DATAPATH_FSYNC, 0, 0, NULL);
	ck_assert_int_eq(wait_answer(s).err, 0);
	ck_assert_int_eq(pread(f.fd, back, sizeof(back), 4096), (ssize_t)sizeof(back));
	ck_assert_int_eq(memcmp(back, data, sizeof(data)), 0);
	struct stats_tenant_snapshot st = tenant_stats(&f);
	ck_assert_uint_eq(st.ops[STATS_OP_WRITE], 1);
	ck_assert_uint_eq(st.bytes[STATS_OP_READ], sizeof(data));
	/* The reactor opens the token once it has looked and found nothing to
	 * do; on a loaded machine (the suite in parallel) that can take a
	 * while, so the wait is as long as an answer's. */
	uint64_t solo = st.solo_ops;
	for (int tries = 0; solo == 0 && tries < ANSWER_WAIT_MS; tries++) {
		usleep(1000);
		wait_answer(submit(&f, DATAPATH_READ, 0, 512, NULL));
		solo = tenant_stats(&f).solo_ops;
	}
	ck_assert_uint_gt(solo, 0);
	/* The scheduler is told of them: its view (published every 100 ms) counts them. */
	uint64_t served = 0;
	for (int waited_ms = 0; served == 0 && waited_ms < ANSWER_WAIT_MS; waited_ms += 10) {
		usleep(10000);
		served = tenant_stats(&f).sched.served_ops;
	}
	ck_assert_uint_gt(served, 0);
	close_file(&f);
	engine_down();
}
END_TEST

/* The scheduler's charge for f's tenant once it has seen served requests. */
static uint64_t charged_once_served(const struct datapath_file *f, uint64_t served)
{
	struct stats_tenant_snapshot st = tenant_stats(f);
	for (int waited_ms = 0; st.sched.served_ops < served && waited_ms < ANSWER_WAIT_MS;
	     waited_ms += 10) {
		usleep(10000);
		st = tenant_stats(f);
	}
	ck_assert_uint_ge(st.sched.served_ops, served);
	return st.sched.charged_bytes;
}

/*
 * A write the caller asked to be durable by itself (pwritev2 or io_uring
 * with RWF_DSYNC, which the kernel passes in the write's flags) on a file
 * not opened O_DSYNC is one: billed as a dsync write (here the only kind
 * priced, at a second of the store each), and its data written.
 */
START_TEST(a_write_asked_durable_is_a_dsync_write)
{
	dsync_model_iops = 1;
	engine_up(false, 16);
	dsync_model_iops = 0;
	struct datapath_file f;
	open_file("rwf", O_RDWR, &f);
	unsigned char data[4096], back[4096];
	fill(data, sizeof(data), 7);
	ck_assert_int_eq(wait_answer(submit(&f, DATAPATH_WRITE, 0, sizeof(data), data)).err, 0);
	uint64_t plain = charged_once_served(&f, 1);
	fill(data, sizeof(data), 8);
	fuse_req_t token = new_token();
	const struct datapath_req r = {.req = token, .op = DATAPATH_WRITE, .file = &f,
				       .offset_bytes = 4096, .size_bytes = sizeof(data),
				       .write_data = data, .pid = getpid(), .write_rwf = RWF_DSYNC};
	dp->submit(dp, &r);
	struct answer a = wait_answer(token);
	ck_assert_int_eq(a.err, 0);
	ck_assert_int_eq(a.bytes, sizeof(data));
	uint64_t both = charged_once_served(&f, 2);
	ck_assert_msg(both - plain > 100 * plain, "plain write charged %lu, durable one %lu",
		      (unsigned long)plain, (unsigned long)(both - plain));
	ck_assert_int_eq(pread(f.fd, back, sizeof(back), 4096), (ssize_t)sizeof(back));
	ck_assert_int_eq(memcmp(back, data, sizeof(data)), 0);
	close_file(&f);
	engine_down();
}
END_TEST

struct writer_job {
	struct datapath_file *file;
	unsigned first, count;
	bool owned;  /* each payload in a buffer of the engine's (payload_get), as the channel reads large ones */
};

static void *write_blocks(void *arg)
{
	const struct writer_job *j = arg;
	unsigned char block[65536];
	for (unsigned b = j->first; b < j->first + j->count; b++) {
		if (!j->owned) {
			fill(block, sizeof(block), b);
			submit(j->file, DATAPATH_WRITE, (uint64_t)b * sizeof(block), sizeof(block), block);
			continue;
		}
		unsigned char *payload = dp->payload_get(dp, sizeof(block));
		ck_assert_ptr_nonnull(payload);
		fill(payload, sizeof(block), b);
		const struct datapath_req r = {.req = new_token(), .op = DATAPATH_WRITE, .file = j->file,
					       .offset_bytes = (uint64_t)b * sizeof(block),
					       .size_bytes = sizeof(block), .write_data = payload,
					       .write_owned = true, .pid = getpid()};
		dp->submit(dp, &r);
	}
	return NULL;
}

/*
 * Writers in parallel through the scheduler: held in their threads, or
 * copied to the ring; with owned payloads, kept rather than copied.
 */
static void scheduled_writes_and_reads(uint32_t max_held_writes, bool owned)
{
	engine_up(false, max_held_writes);
	struct datapath_file f;
	open_file("scheduled", O_RDWR, &f);
	enum { THREADS = 4, BLOCKS = 16 };
	pthread_t threads[THREADS];
	struct writer_job jobs[THREADS];
	for (unsigned t = 0; t < THREADS; t++) {
		jobs[t] = (struct writer_job){&f, t * BLOCKS, BLOCKS, owned};
		ck_assert_int_eq(pthread_create(&threads[t], NULL, write_blocks, &jobs[t]), 0);
	}
	for (unsigned t = 0; t < THREADS; t++)
		pthread_join(threads[t], NULL);
	for (uint32_t i = 0; i < THREADS * BLOCKS; i++) {
		struct answer a = wait_answer((fuse_req_t)(uintptr_t)(i + 1));
		ck_assert_int_eq(a.err, 0);
		ck_assert_int_eq(a.bytes, 65536);
	}
	ck_assert_int_eq(wait_answer(submit(&f, DATAPATH_FDATASYNC, 0, 0, NULL)).err, 0);
	for (unsigned b = 0; b < THREADS * BLOCKS; b++) {
		struct answer a = wait_answer(submit(&f, DATAPATH_READ, (uint64_t)b * 65536, 65536, NULL));
		unsigned char want[65536];
		fill(want, sizeof(want), b);
		ck_assert_int_eq(a.bytes, sizeof(want));
		ck_assert_msg(memcmp(a.data, want, sizeof(want)) == 0, "block %u differs", b);
	}
	struct stats_tenant_snapshot st = tenant_stats(&f);
	ck_assert_uint_eq(st.solo_ops, 0);
	ck_assert_uint_eq(st.ops[STATS_OP_WRITE], THREADS * BLOCKS);
	ck_assert_uint_eq(st.bytes[STATS_OP_WRITE], THREADS * BLOCKS * 65536ull);
	close_file(&f);
	engine_down();
}

START_TEST(held_writes_and_ring_reads)
{
	scheduled_writes_and_reads(16, false);
}
END_TEST

START_TEST(copied_writes_and_ring_reads)
{
	scheduled_writes_and_reads(0, false);
}
END_TEST

START_TEST(owned_payloads_held_and_through_the_ring)
{
	scheduled_writes_and_reads(16, true);
	scheduled_writes_and_reads(0, true);
}
END_TEST

/* A payload the engine owns, written by the submitter itself (solo), direct or not. */
START_TEST(owned_payloads_solo)
{
	engine_up(true, 16);
	struct datapath_file f;
	open_file("owned-solo", O_RDWR, &f);
	for (int direct = 0; direct < 2; direct++) {
		f.direct = direct; /* aligned buffers either way; the file itself is buffered */
		unsigned char *payload = dp->payload_get(dp, 8192);
		ck_assert_ptr_nonnull(payload);
		fill(payload, 8192, 40 + (unsigned)direct);
		fuse_req_t token = new_token();
		const struct datapath_req r = {.req = token, .op = DATAPATH_WRITE, .file = &f,
					       .offset_bytes = (uint64_t)direct * 8192, .size_bytes = 8192,
					       .write_data = payload, .write_owned = true, .pid = getpid()};
		dp->submit(dp, &r);
		ck_assert_int_eq(wait_answer(token).bytes, 8192);
		unsigned char want[8192], back[8192];
		fill(want, sizeof(want), 40 + (unsigned)direct);
		ck_assert_int_eq(pread(f.fd, back, sizeof(back), direct * 8192), (ssize_t)sizeof(back));
		ck_assert_int_eq(memcmp(back, want, sizeof(want)), 0);
	}
	close_file(&f);
	engine_down();
}
END_TEST

/* The kernel's queue limit: 32 MiB of the mean request, within min..max. */
START_TEST(kernel_queue_limit_in_bytes)
{
	ck_assert_uint_eq(engine_kernel_queue_limit(1u << 20, 0, 1024), 32);
	ck_assert_uint_eq(engine_kernel_queue_limit(256u << 10, 0, 1024), 128);
	ck_assert_uint_eq(engine_kernel_queue_limit(16u << 10, 0, 4096), 2048);
	ck_assert_uint_eq(engine_kernel_queue_limit(4096, 0, 1024), 1024);
	ck_assert_uint_eq(engine_kernel_queue_limit(0, 0, 1024), 1024);
	ck_assert_uint_eq(engine_kernel_queue_limit(4096, 0, 64), 64);
	ck_assert_uint_eq(engine_kernel_queue_limit(1ull << 40, 0, 1024), 1);
	/* Never fewer than min (max_inflight), unless max says so. */
	ck_assert_uint_eq(engine_kernel_queue_limit(1u << 20, 128, 1024), 128);
	ck_assert_uint_eq(engine_kernel_queue_limit(1ull << 40, 64, 1024), 64);
	ck_assert_uint_eq(engine_kernel_queue_limit(1u << 20, 128, 100), 100);
}
END_TEST

/* A transfer acknowledges what moved: a read across the end, a read past it. */
/* Reads of size bytes one at a time for about ms, each answered before the next. */
static void read_one_at_a_time(struct datapath_file *f, uint64_t size, int ms)
{
	struct timespec start, now;
	clock_gettime(CLOCK_MONOTONIC, &start);
	do {
		forget_answers();
		ck_assert_int_eq(wait_answer(submit(f, DATAPATH_READ, 0, size, NULL)).err, 0);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000 < ms);
}

/*
 * Small reads ask for a long kernel queue, but one at a time they never
 * fill the one they have: the limit stays while the kernel reports little
 * outstanding, and rises once it reports the queue nearly full, which is
 * all the daemon learns when callers outrun its reading of /dev/fuse (the
 * scheduler itself then holds little). Large reads bring it down again.
 */
START_TEST(kernel_queue_rises_only_when_full)
{
	engine_up_sized(false, 16, true);
	struct datapath_file f;
	open_file("queue", O_RDWR, &f);
	unsigned char data[1 << 20];
	fill(data, sizeof(data), 5);
	ck_assert_int_eq(pwrite(f.fd, data, sizeof(data), 0), (ssize_t)sizeof(data));

	atomic_store(&kernel_waiting, 2);
	read_one_at_a_time(&f, 4096, 2500);
	uint32_t kept = atomic_load(&kernel_limit);
	ck_assert_uint_eq(kept, 0); /* never written: still the 32 given at INIT */

	atomic_store(&kernel_waiting, 120);
	for (int i = 0; i < 5 && atomic_load(&kernel_limit) == 0; i++)
		read_one_at_a_time(&f, 4096, 500);
	uint32_t raised = atomic_load(&kernel_limit);
	ck_assert_uint_eq(raised, 1024);

	atomic_store(&kernel_waiting, 2);
	/* A second that began with 4 KiB reads sizes for their mix first (few
	 * 1 MiB reads fit in it on a loaded machine: 418 was seen); the next
	 * of 1 MiB reads alone brings it down. */
	for (int i = 0; i < 10 && atomic_load(&kernel_limit) > 64; i++)
		read_one_at_a_time(&f, 1 << 20, 500);
	uint32_t lowered = atomic_load(&kernel_limit);
	/* 32 for 1 MiB alone; sized for half a MiB at least. */
	ck_assert_uint_ge(lowered, 32);
	ck_assert_uint_le(lowered, 64);
	forget_answers();
	close_file(&f);
	engine_down();
}
END_TEST

static void short_reads(bool solo)
{
	engine_up(solo, 16);
	struct datapath_file f;
	open_file("short", O_RDWR, &f);
	unsigned char data[1000];
	fill(data, sizeof(data), 3);
	ck_assert_int_eq(pwrite(f.fd, data, sizeof(data), 0), (ssize_t)sizeof(data));
	struct answer across = wait_answer(submit(&f, DATAPATH_READ, 0, 4096, NULL));
	ck_assert_int_eq(across.err, 0);
	ck_assert_int_eq(across.bytes, sizeof(data));
	ck_assert_int_eq(memcmp(across.data, data, sizeof(data)), 0);
	struct answer past = wait_answer(submit(&f, DATAPATH_READ, 8192, 4096, NULL));
	ck_assert_int_eq(past.err, 0);
	ck_assert_int_eq(past.bytes, 0);
	close_file(&f);
	engine_down();
}

START_TEST(short_reads_solo)
{
	short_reads(true);
}
END_TEST

START_TEST(short_reads_through_the_ring)
{
	short_reads(false);
}
END_TEST

/*
 * Who answers a read through the ring: a small one the reactor, at once; a
 * large one an executor, so that one tenant's copies never hold up the
 * reactor that every tenant's requests pass through. Both answers carry
 * the file's bytes and are counted once.
 */
START_TEST(large_reads_are_answered_off_the_reactor)
{
	engine_up(false, 16);
	struct datapath_file f;
	open_file("large", O_RDWR, &f);
	enum { LARGE = 512 << 10, SMALL = 4096 };
	unsigned char *data = malloc(LARGE);
	ck_assert_ptr_nonnull(data);
	fill(data, LARGE, 5);
	ck_assert_int_eq(pwrite(f.fd, data, LARGE, 0), LARGE);
	fuse_req_t large = submit(&f, DATAPATH_READ, 0, LARGE, NULL);
	fuse_req_t small = submit(&f, DATAPATH_READ, LARGE - SMALL, SMALL, NULL);
	struct answer a = wait_answer(large), b = wait_answer(small);
	ck_assert_int_eq(a.err, 0);
	ck_assert_int_eq(a.bytes, LARGE);
	ck_assert_int_eq(memcmp(a.data, data, LARGE), 0);
	ck_assert_str_eq(a.thread, ENGINE_EXECUTOR_THREAD);
	ck_assert_int_eq(b.err, 0);
	ck_assert_int_eq(b.bytes, SMALL);
	ck_assert_int_eq(memcmp(b.data, data + LARGE - SMALL, SMALL), 0);
	ck_assert_str_eq(b.thread, ENGINE_REACTOR_THREAD);
	struct stats_tenant_snapshot st = tenant_stats(&f);
	ck_assert_uint_eq(st.ops[STATS_OP_READ], 2);
	ck_assert_uint_eq(st.bytes[STATS_OP_READ], LARGE + SMALL);
	free(data);
	close_file(&f);
	engine_down();
}
END_TEST

/* The backing store's errors reach the caller and are counted. */
static void errors_are_answered(bool solo)
{
	engine_up(solo, 16);
	struct datapath_file ro;
	open_file("readonly", O_RDONLY, &ro);
	unsigned char data[4096] = {0};
	ck_assert_int_eq(wait_answer(submit(&ro, DATAPATH_WRITE, 0, sizeof(data), data)).err, EBADF);
	fuse_req_t bad_mode = new_token();
	const struct datapath_req r = {.req = bad_mode, .op = DATAPATH_FALLOCATE, .file = &ro,
				       .size_bytes = 4096, .fallocate_mode = -1, .pid = getpid()};
	dp->submit(dp, &r);
	ck_assert_int_ne(wait_answer(bad_mode).err, 0);
	ck_assert_uint_eq(tenant_stats(&ro).errors, 2);
	close_file(&ro);
	engine_down();
}

START_TEST(errors_solo)
{
	errors_are_answered(true);
}
END_TEST

START_TEST(errors_through_the_ring)
{
	errors_are_answered(false);
}
END_TEST

/* A large copy is answered a piece at a time; the caller loops as on any filesystem. */
START_TEST(copy_file_range_in_pieces)
{
	engine_up(true, 16);
	struct datapath_file in, out;
	open_file("copy-in", O_RDWR, &in);
	open_file("copy-out", O_RDWR, &out);
	enum { COPY_BYTES = 10 << 20 };
	unsigned char *data = malloc(COPY_BYTES), *back = malloc(COPY_BYTES);
	fill(data, COPY_BYTES, 5);
	ck_assert_int_eq(pwrite(in.fd, data, COPY_BYTES, 0), COPY_BYTES);
	uint64_t copied = 0;
	int pieces = 0;
	while (copied < COPY_BYTES) {
		fuse_req_t token = new_token();
		const struct datapath_req r = {.req = token, .op = DATAPATH_COPY_RANGE, .file = &in,
					       .offset_bytes = copied, .size_bytes = COPY_BYTES - copied,
					       .file_out = &out, .offset_out_bytes = copied,
					       .pid = getpid()};
		dp->submit(dp, &r);
		struct answer a = wait_answer(token);
		ck_assert_int_eq(a.err, 0);
		ck_assert_uint_gt(a.bytes, 0);
		ck_assert_uint_lt(a.bytes, COPY_BYTES); /* never the whole copy at once */
		copied += a.bytes;
		pieces++;
	}
	ck_assert_int_ge(pieces, 3);
	ck_assert_int_eq(pread(out.fd, back, COPY_BYTES, 0), COPY_BYTES);
	ck_assert_int_eq(memcmp(back, data, COPY_BYTES), 0);
	ck_assert_uint_eq(tenant_stats(&out).bytes[STATS_OP_OTHER], COPY_BYTES);
	free(data);
	free(back);
	close_file(&in);
	close_file(&out);
	engine_down();
}
END_TEST

/* The first count 4 KiB blocks of f hold fill()'s bytes of seeds 0, 1, ... */
static void assert_blocks_filled(const struct datapath_file *f, unsigned count)
{
	for (unsigned i = 0; i < count; i++) {
		unsigned char want[4096], got[4096];
		fill(want, sizeof(want), i);
		ck_assert_int_eq(pread(f->fd, got, sizeof(got), (off_t)i * 4096), (ssize_t)sizeof(got));
		ck_assert_int_eq(memcmp(got, want, sizeof(want)), 0);
	}
}

/* Everything taken is answered, and written, by the time stop returns. */
START_TEST(stop_drains_every_request)
{
	engine_up(false, 0); /* copied writes: submit returns before they run */
	struct datapath_file f;
	open_file("drain", O_RDWR, &f);
	enum { WRITES = 400 };
	unsigned char block[4096];
	for (unsigned i = 0; i < WRITES; i++) {
		fill(block, sizeof(block), i);
		submit(&f, DATAPATH_WRITE, (uint64_t)i * sizeof(block), sizeof(block), block);
	}
	engine_stop(engine);
	for (uint32_t i = 0; i < WRITES; i++)
		ck_assert_msg(is_answered((fuse_req_t)(uintptr_t)(i + 1)), "write %u not answered", i);
	assert_blocks_filled(&f, WRITES);
	close_file(&f);
	engine_down();
}
END_TEST

/* eiofs serving scratch/source at scratch/stalling (test_stalling_store_up). */
static pid_t stalling_store_up(char *source, char *stalling, size_t bytes)
{
	snprintf(source, bytes, "%s/source", scratch);
	snprintf(stalling, bytes, "%s/stalling", scratch);
	return test_stalling_store_up(source, stalling);
}

/* A file at path opened (with flags besides O_RDWR) for the engine, as its opener. */
static void open_at_with(const char *path, int flags, struct datapath_file *f)
{
	memset(f, 0, sizeof(*f));
	f->opener_pid = getpid();
	f->fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | flags, 0644);
	ck_assert_int_ge(f->fd, 0);
	f->direct = (flags & O_DIRECT) != 0;
	ck_assert_int_eq(dp->file_opened(dp, f), 0);
}

static void open_at(const char *path, struct datapath_file *f)
{
	open_at_with(path, 0, f);
}

static fuse_req_t submit_copy(struct datapath_file *in, struct datapath_file *out, uint64_t bytes)
{
	fuse_req_t token = new_token();
	const struct datapath_req r = {.req = token, .op = DATAPATH_COPY_RANGE, .file = in,
				       .size_bytes = bytes, .file_out = out, .pid = getpid()};
	dp->submit(dp, &r);
	return token;
}

/*
 * A copy that blocks (its source on a FUSE filesystem that stalls reads)
 * leaves other requests flowing: it runs on a blocking executor, never on
 * the reactor, which keeps dispatching.
 */
START_TEST(a_blocked_copy_leaves_other_requests_flowing)
{
	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
		fprintf(stderr, "SKIP: a_blocked_copy_leaves_other_requests_flowing: needs root and /dev/fuse\n");
		return;
	}
	engine_up(false, 16);
	char source[300], stalling[300];
	pid_t eiofs = stalling_store_up(source, stalling, sizeof(source));
	char path[400], stall_marker[400];
	struct datapath_file in, out, other;
	snprintf(path, sizeof(path), "%s/in", stalling);
	open_at(path, &in);
	snprintf(path, sizeof(path), "%s/out", stalling);
	open_at(path, &out);
	snprintf(stall_marker, sizeof(stall_marker), "%s/in.stall", source);
	unsigned char data[65536];
	fill(data, sizeof(data), 9);
	ck_assert_int_eq(pwrite(in.fd, data, sizeof(data), 0), (ssize_t)sizeof(data));
	open_file("other", O_RDWR, &other);
	ck_assert_int_eq(pwrite(other.fd, data, sizeof(data), 0), (ssize_t)sizeof(data));

	test_write_file(stall_marker, "");
	fuse_req_t copy = submit_copy(&in, &out, sizeof(data));
	struct answer read = wait_answer(submit(&other, DATAPATH_READ, 0, sizeof(data), NULL));
	ck_assert_int_eq(read.bytes, sizeof(data));
	ck_assert_msg(!is_answered(copy), "the copy was not blocked: the test proves nothing");
	unlink(stall_marker);
	struct answer copied = wait_answer(copy);
	ck_assert_int_eq(copied.err, 0);
	ck_assert_int_eq(copied.bytes, sizeof(data));

	close_file(&other);
	dp->file_released(dp, &in);
	dp->file_released(dp, &out);
	close(in.fd);
	close(out.fd);
	test_stalling_store_down(stalling, eiofs);
	engine_down();
}
END_TEST

/*
 * Reads hung at a FUSE store (more than its connection lets wait in the
 * background, direct or not) leave the reactor free: a read of a file on
 * the local scratch filesystem is answered while they hang. Issued inline
 * they stopped the reactor in its submit (FUSE ignores IOCB_NOWAIT), and
 * every request of every tenant with it.
 */
static void hung_store_reads_leave_the_reactor_free(int flags)
{
	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
		fprintf(stderr, "SKIP: hung_store_reads_leave_the_reactor_free: needs root and /dev/fuse\n");
		return;
	}
	engine_up(false, 16);
	char source[300], stalling[300], path[400], stall_marker[400];
	pid_t eiofs = stalling_store_up(source, stalling, sizeof(source));
	struct datapath_file hung, other;
	snprintf(path, sizeof(path), "%s/hung", stalling);
	open_at_with(path, flags, &hung);
	unsigned char data[65536];
	fill(data, sizeof(data), 3);
	ck_assert_int_eq(pwrite(hung.fd, data, sizeof(data), 0), (ssize_t)sizeof(data));
	open_file("other", O_RDWR, &other);
	ck_assert_int_eq(pwrite(other.fd, data, sizeof(data), 0), (ssize_t)sizeof(data));
	snprintf(stall_marker, sizeof(stall_marker), "%s/hung.stall", source);
	test_write_file(stall_marker, "");

	/* libfuse's default background limit of eiofs's connection is 12. */
	enum { HUNG = 16 };
	fuse_req_t reads[HUNG];
	for (int i = 0; i < HUNG; i++)
		reads[i] = submit(&hung, DATAPATH_READ, (uint64_t)(i % 16) * 4096, 4096, NULL);
	usleep(100 * 1000);
	struct answer a = wait_answer(submit(&other, DATAPATH_READ, 0, sizeof(data), NULL));
	ck_assert_int_eq(a.bytes, sizeof(data));
	for (int i = 0; i < HUNG; i++)
		ck_assert_msg(!is_answered(reads[i]), "read %d did not hang: the test proves nothing", i);
	unlink(stall_marker);
	for (int i = 0; i < HUNG; i++) {
		struct answer r = wait_answer(reads[i]);
		ck_assert_int_eq(r.err, 0);
		ck_assert_int_eq(r.bytes, 4096);
	}
	close_file(&other);
	dp->file_released(dp, &hung);
	close(hung.fd);
	test_stalling_store_down(stalling, eiofs);
	engine_down();
}

START_TEST(hung_direct_reads_at_a_fuse_store_leave_the_reactor_free)
{
	hung_store_reads_leave_the_reactor_free(O_DIRECT);
}
END_TEST

START_TEST(hung_reads_at_a_fuse_store_leave_the_reactor_free)
{
	hung_store_reads_leave_the_reactor_free(0);
}
END_TEST

static void reload_max_inflight(uint32_t max_inflight)
{
	struct engine_params p;
	engine_params_default(&p);
	p.reply = record_answer;
	p.sched.max_inflight = max_inflight;
	engine_reload(engine, &p);
}

/*
 * A reload past the mounted max_inflight deepens the store live, with the
 * executors to run it: two copies whose source stalls hold both slots of a
 * mount of 2 and both of its executors; a third copy waits for a slot until
 * the reload to 4, and then runs on an executor started for it while the
 * first two still hang.
 */
START_TEST(a_reload_past_the_mounted_depth_takes_effect)
{
	if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0) {
		fprintf(stderr, "SKIP: a_reload_past_the_mounted_depth_takes_effect: needs root and /dev/fuse\n");
		return;
	}
	mount_max_inflight = 2;
	engine_up(false, 16);
	mount_max_inflight = 0;
	char source[300], stalling[300], path[400], stall_marker[400];
	pid_t eiofs = stalling_store_up(source, stalling, sizeof(source));
	unsigned char data[65536];
	fill(data, sizeof(data), 5);
	enum { IN_STALLED, IN_FREE, OUT_A, OUT_B, OUT_C, NFILES };
	static const char *const names[NFILES] = { "in", "free", "a", "b", "c" };
	struct datapath_file f[NFILES];
	for (int i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "%s/%s", stalling, names[i]);
		open_at(path, &f[i]);
	}
	ck_assert_int_eq(pwrite(f[IN_STALLED].fd, data, sizeof(data), 0), (ssize_t)sizeof(data));
	ck_assert_int_eq(pwrite(f[IN_FREE].fd, data, sizeof(data), 0), (ssize_t)sizeof(data));
	snprintf(stall_marker, sizeof(stall_marker), "%s/in.stall", source);
	test_write_file(stall_marker, "");

	fuse_req_t a = submit_copy(&f[IN_STALLED], &f[OUT_A], sizeof(data));
	fuse_req_t b = submit_copy(&f[IN_STALLED], &f[OUT_B], sizeof(data));
	fuse_req_t c = submit_copy(&f[IN_FREE], &f[OUT_C], sizeof(data));
	usleep(300 * 1000);
	ck_assert_msg(!is_answered(c), "a third copy ran with max_inflight 2");
	ck_assert_msg(!is_answered(a) && !is_answered(b), "the stalled copies did not stall");

	reload_max_inflight(4);
	struct answer copied = wait_answer(c);
	ck_assert_int_eq(copied.err, 0);
	ck_assert_int_eq(copied.bytes, sizeof(data));
	ck_assert_msg(!is_answered(a) && !is_answered(b), "the stalled copies did not stall");

	unlink(stall_marker);
	ck_assert_int_eq(wait_answer(a).bytes, sizeof(data));
	ck_assert_int_eq(wait_answer(b).bytes, sizeof(data));
	for (int i = 0; i < NFILES; i++) {
		dp->file_released(dp, &f[i]);
		close(f[i].fd);
	}
	test_stalling_store_down(stalling, eiofs);
	engine_down();
}
END_TEST

/*
 * The ring is sized for the mounted depth; deeper after a reload, the
 * completions past its completion queue wait in the kernel's overflow
 * list, and none is lost: a burst of many times the ring's size, each
 * write answered once and on disk.
 */
START_TEST(a_depth_past_the_ring_loses_nothing)
{
	mount_max_inflight = 2;
	engine_up(false, 0); /* copied writes: submit returns before they run */
	mount_max_inflight = 0;
	reload_max_inflight(1024);
	struct datapath_file f;
	open_file("deep", O_RDWR, &f);
	enum { WRITES = 2048 };
	unsigned char block[4096];
	/* A first write lets the reactor apply the reload before the burst. */
	fill(block, sizeof(block), 0);
	ck_assert_int_eq(wait_answer(submit(&f, DATAPATH_WRITE, 0, sizeof(block), block)).err, 0);
	for (unsigned i = 1; i < WRITES; i++) {
		fill(block, sizeof(block), i);
		submit(&f, DATAPATH_WRITE, (uint64_t)i * sizeof(block), sizeof(block), block);
	}
	for (uint32_t i = 0; i < WRITES; i++) {
		struct answer w = wait_answer((fuse_req_t)(uintptr_t)(i + 1));
		ck_assert_msg(w.err == 0 && w.bytes == sizeof(block), "write %u: %d, %llu bytes", i,
			      w.err, (unsigned long long)w.bytes);
	}
	assert_blocks_filled(&f, WRITES);
	close_file(&f);
	engine_down();
}
END_TEST

/* ---- metadata handed over ------------------------------------------------ */

static atomic_int meta_runs;
static atomic_int meta_off_submitter; /* runs on a thread other than the submitter's */
static pthread_t meta_submitter;

static void count_meta_run(void *arg)
{
	(void)arg;
	if (!pthread_equal(pthread_self(), meta_submitter))
		atomic_fetch_add(&meta_off_submitter, 1);
	atomic_fetch_add(&meta_runs, 1);
}

/*
 * With nobody else about, metadata may run at once in its worker; handed
 * over, each request runs exactly once, on an executor, at its turn, and
 * the engine answers none of them (each run answers its own). A stop
 * runs whatever is still queued.
 */
START_TEST(metadata_handed_over_runs_once_on_an_executor)
{
	engine_up(true, 16);
	struct datapath_meta_ticket ticket;
	/* The kernel's own requests (pid 0) run at once and make nobody else about. */
	for (int i = 0; i < 2; i++) {
		ck_assert(dp->meta_now(dp, 0, &ticket));
		dp->meta_ran(dp, &ticket);
		ck_assert(dp->meta_now(dp, getpid(), &ticket));
		dp->meta_ran(dp, &ticket);
	}
	atomic_store(&meta_runs, 0);
	atomic_store(&meta_off_submitter, 0);
	meta_submitter = pthread_self();
	enum { HANDED = 200 };
	for (int i = 0; i < HANDED; i++) {
		struct datapath_req r = {.op = DATAPATH_META, .meta_run = count_meta_run};
		dp->submit(dp, &r);
	}
	for (int i = 0; i < ANSWER_WAIT_MS && atomic_load(&meta_runs) < HANDED / 2; i++)
		usleep(1000);
	ck_assert_int_ge(atomic_load(&meta_runs), HANDED / 2);
	for (int i = 0; i < HANDED; i++) {
		struct datapath_req r = {.op = DATAPATH_META, .meta_run = count_meta_run};
		dp->submit(dp, &r);
	}
	engine_down();
	ck_assert_int_eq(atomic_load(&meta_runs), 2 * HANDED);
	ck_assert_int_eq(atomic_load(&meta_off_submitter), 2 * HANDED);
	ck_assert_uint_eq(next_token, 0);
	ck_assert(!answers[0].done); /* nothing was answered by the engine */
}
END_TEST

static sem_t meta_gate;
static atomic_int meta_gated;

static void gated_meta_run(void *arg)
{
	(void)arg;
	atomic_fetch_add(&meta_gated, 1);
	while (sem_wait(&meta_gate) != 0)
		;
}

/*
 * Metadata that hangs at its store holds its executor, and the engine
 * starts more for the others as the scheduler takes such requests for
 * hung; once the store comes back, the executors started for them end
 * when idle, down to what the depth wants, and new requests still run.
 */
START_TEST(executors_started_for_hung_metadata_end_when_idle)
{
	executor_idle_ns = 100000000u;
	engine_up(true, 16);
	executor_idle_ns = 0;
	ck_assert_int_eq(sem_init(&meta_gate, 0, 0), 0);
	atomic_store(&meta_runs, 0);
	atomic_store(&meta_gated, 0);
	meta_submitter = pthread_self();
	/* One that completes, so that the hung bound is learned (200 ms), not 5 s. */
	struct datapath_req quick = {.op = DATAPATH_META, .meta_run = count_meta_run};
	dp->submit(dp, &quick);
	for (int i = 0; i < ANSWER_WAIT_MS && atomic_load(&meta_runs) < 1; i++)
		usleep(1000);
	uint32_t depth = engine_executors(engine);
	ck_assert_uint_ge(depth, 2);
	/* More than the depth, fewer than one tenant's bound of executors (64). */
	enum { GATED = 56 };
	for (int i = 0; i < GATED; i++) {
		struct datapath_req r = {.op = DATAPATH_META, .meta_run = gated_meta_run};
		dp->submit(dp, &r);
	}
	for (int i = 0; i < ANSWER_WAIT_MS && atomic_load(&meta_gated) < GATED; i++)
		usleep(1000);
	uint32_t during = engine_executors(engine);
	fprintf(stderr, "engine_unit: %u executors for the depth, %u with %d requests hung\n", depth,
		during, atomic_load(&meta_gated));
	ck_assert_int_eq(atomic_load(&meta_gated), GATED);
	ck_assert_uint_ge(during, GATED);
	for (int i = 0; i < GATED; i++)
		sem_post(&meta_gate);
	for (int i = 0; i < ANSWER_WAIT_MS && engine_executors(engine) > depth; i++)
		usleep(1000);
	uint32_t after = engine_executors(engine);
	fprintf(stderr, "engine_unit: %u executors once the store came back\n", after);
	ck_assert_uint_eq(after, depth);
	/* Those kept wait again, past their idle time too, without spinning:
	 * 32 threads spinning would take both CPUs' 0.5 s. */
	struct timespec cpu0, cpu1;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu0);
	usleep(500000);
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu1);
	double idle_cpu_s = (double)(cpu1.tv_sec - cpu0.tv_sec) + (cpu1.tv_nsec - cpu0.tv_nsec) / 1e9;
	fprintf(stderr, "engine_unit: %.3f s of CPU in 0.5 s idle\n", idle_cpu_s);
	ck_assert_double_lt(idle_cpu_s, 0.1);
	atomic_store(&meta_runs, 0);
	for (int i = 0; i < GATED; i++) {
		struct datapath_req r = {.op = DATAPATH_META, .meta_run = count_meta_run};
		dp->submit(dp, &r);
	}
	for (int i = 0; i < ANSWER_WAIT_MS && atomic_load(&meta_runs) < GATED; i++)
		usleep(1000);
	ck_assert_int_eq(atomic_load(&meta_runs), GATED);
	engine_down();
	sem_destroy(&meta_gate);
}
END_TEST

/*
 * A daemon that has run only metadata at once in its workers, whose first
 * scheduled requests then hang at the store: the hung bound is learned
 * from that metadata's times (200 ms here), so the requests past the
 * depth get their executors within it, not after the 5 s kept for a
 * store nothing is known of.
 */
START_TEST(metadata_run_at_once_teaches_the_hung_bound)
{
	engine_up(true, 16);
	ck_assert_int_eq(sem_init(&meta_gate, 0, 0), 0);
	atomic_store(&meta_gated, 0);
	struct datapath_meta_ticket ticket;
	ck_assert(dp->meta_now(dp, getpid(), &ticket));
	dp->meta_ran(dp, &ticket);
	uint32_t depth = engine_executors(engine);
	uint32_t gated = depth + 8;
	struct timespec start, end;
	clock_gettime(CLOCK_MONOTONIC, &start);
	for (uint32_t i = 0; i < gated; i++) {
		struct datapath_req r = {.op = DATAPATH_META, .meta_run = gated_meta_run};
		dp->submit(dp, &r);
	}
	for (int i = 0; i < ANSWER_WAIT_MS && (uint32_t)atomic_load(&meta_gated) < gated; i++)
		usleep(1000);
	clock_gettime(CLOCK_MONOTONIC, &end);
	double took_s = (double)(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
	fprintf(stderr, "engine_unit: %u requests past the depth of %u ran %.3f s after the first hung\n",
		gated - depth, depth, took_s);
	ck_assert_uint_eq((uint32_t)atomic_load(&meta_gated), gated);
	ck_assert_double_lt(took_s, 4.0); /* the bound with nothing learned is 5 s */
	for (uint32_t i = 0; i < gated; i++)
		sem_post(&meta_gate);
	engine_down();
	sem_destroy(&meta_gate);
}
END_TEST

/*
 * However alone its tenant, no more metadata runs at once in workers than
 * max_inline_meta (32), the kernel's own included: past it, meta_now says
 * hand it over, so metadata blocked on a hung store cannot hold every
 * worker. One that ends makes room for the next.
 */
START_TEST(metadata_at_once_holds_at_most_max_inline_meta_workers)
{
	engine_up(true, 16);
	struct engine_params defaults;
	engine_params_default(&defaults);
	ck_assert_uint_eq(defaults.max_inline_meta, 32);
	struct datapath_meta_ticket tickets[32], over;
	for (int i = 0; i < 32; i++)
		ck_assert_msg(dp->meta_now(dp, getpid(), &tickets[i]), "metadata %d did not run at once", i);
	ck_assert(!dp->meta_now(dp, getpid(), &over));
	ck_assert(!dp->meta_now(dp, 0, &over));
	dp->meta_ran(dp, &tickets[31]);
	ck_assert(dp->meta_now(dp, 0, &tickets[31]));
	ck_assert(!dp->meta_now(dp, getpid(), &over));
	for (int i = 0; i < 32; i++)
		dp->meta_ran(dp, &tickets[i]);
	ck_assert(dp->meta_now(dp, getpid(), &over));
	dp->meta_ran(dp, &over);
	engine_down();
}
END_TEST

static Suite *engine_unit_suite(void)
{
	Suite *s = suite_create("engine_unit");
	TCase *tc = tcase_create("lifecycle");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, solo_requests_run_in_the_submitter);
	tcase_add_test(tc, metadata_at_once_holds_at_most_max_inline_meta_workers);
	tcase_add_test(tc, a_write_asked_durable_is_a_dsync_write);
	tcase_add_test(tc, held_writes_and_ring_reads);
	tcase_add_test(tc, copied_writes_and_ring_reads);
	tcase_add_test(tc, owned_payloads_held_and_through_the_ring);
	tcase_add_test(tc, owned_payloads_solo);
	tcase_add_test(tc, kernel_queue_limit_in_bytes);
	tcase_add_test(tc, kernel_queue_rises_only_when_full);
	tcase_add_test(tc, short_reads_solo);
	tcase_add_test(tc, short_reads_through_the_ring);
	tcase_add_test(tc, large_reads_are_answered_off_the_reactor);
	tcase_add_test(tc, errors_solo);
	tcase_add_test(tc, errors_through_the_ring);
	tcase_add_test(tc, copy_file_range_in_pieces);
	tcase_add_test(tc, stop_drains_every_request);
	tcase_add_test(tc, a_blocked_copy_leaves_other_requests_flowing);
	tcase_add_test(tc, hung_direct_reads_at_a_fuse_store_leave_the_reactor_free);
	tcase_add_test(tc, hung_reads_at_a_fuse_store_leave_the_reactor_free);
	tcase_add_test(tc, a_reload_past_the_mounted_depth_takes_effect);
	tcase_add_test(tc, a_depth_past_the_ring_loses_nothing);
	tcase_add_test(tc, metadata_handed_over_runs_once_on_an_executor);
	tcase_add_test(tc, executors_started_for_hung_metadata_end_when_idle);
	tcase_add_test(tc, metadata_run_at_once_teaches_the_hung_bound);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(engine_unit_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
