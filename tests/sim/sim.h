/* Deterministic discrete-event simulator for the scheduler: a virtual clock,
 * a store with N parallel slots and per-operation service times, and tenants
 * that issue requests the way FUSE callers do. Shared by the Check tests and
 * the fusesched-sim command. */
#ifndef FUSESCHED_SIM_H
#define FUSESCHED_SIM_H

#include "fusesched/sched.h"

#include <stdbool.h>
#include <stdint.h>

#define SIM_MAX_TENANTS 32u
#define SIM_MAX_THREADS 64u

/* Service time of one request in a slot: base_ns + bytes * ps_per_byte/1000,
 * times a uniform jitter of +-jitter_pct. Requests beyond the slots wait in
 * the store's own FIFO, as in a device queue. */
enum sim_cost { SIM_COST_READ, SIM_COST_WRITE, SIM_COST_DSYNC_WRITE, SIM_COST_FLUSH,
		SIM_COST_NR };

struct sim_device {
	uint32_t slots;
	uint64_t base_ns[SIM_COST_NR];
	uint64_t ps_per_byte[SIM_COST_NR];
	uint32_t jitter_pct;
};

/* The daemon's host: FUSE's round trip (reply, the caller's next request,
 * the worker thread that reads it) costs CPU on a few cores shared by every
 * tenant. A completion's follow-up request reaches the scheduler only after
 * ns of work on one of slots servers (FIFO), then the job's think time.
 * slots = 0: no host, the store is the only shared resource. Held-back
 * requests cost the host nothing, so what one tenant is not given, another
 * can use: the real mount's situation when the store is faster than FUSE. */
struct sim_host {
	uint32_t slots;
	uint64_t ns;
	/* The daemon's reactor thread competes for the same cores: woken by a
	 * completion, it runs only reactor_wake_ns later (jittered), then
	 * completes everything the store finished meanwhile in one batch, with
	 * one timestamp, and dispatches after it. On the real mount under load
	 * the whole dispatch depth completes in such a batch, and the next one
	 * is dispatched at one instant. 0: every completion is seen at once. */
	uint64_t reactor_wake_ns;
};

struct sim_tenant {
	const char *name;
	uint32_t weight;
	uint32_t depth;			/* jobs, each with one request at a time; 0: journal only */
	uint64_t think_ns;		/* completion -> next request of the same job */
	enum sched_op op;
	uint64_t bytes;
	bool sync;			/* the caller waits: reads, direct writes */
	bool dsync;			/* writes pay the store's flush cost */
	bool sequential;
	uint64_t rate_bytes_per_s;	/* 0: unlimited */
	/* Caller threads (fio jobs), each driving depth / threads of the jobs
	 * (its iodepth). On a loaded host a thread is now and then descheduled
	 * for stall_ns: its completions wait and its requests come back together
	 * afterwards, so the tenant's queue in the daemon drains for a while
	 * although it has plenty of I/O outstanding. Each completion starts such
	 * a stall with probability stall_permille / 1000. 0: no stalls. */
	uint32_t threads;
	uint64_t stall_ns;
	uint32_t stall_permille;
	/* >= 0: each completed request triggers one request of that tenant and
	 * the job may go on only after that one completes (a journal pair). */
	int journal;
};

struct sim_scenario {
	const char *name;
	const char *about;
	struct sim_device dev;
	struct sim_host host;
	uint32_t max_inflight;
	uint32_t ntenants;
	struct sim_tenant t[SIM_MAX_TENANTS];
	uint64_t duration_ns, warmup_ns;
	uint64_t seed;
};

struct sim_tenant_result {
	uint64_t ops, bytes;
	double mb_per_s, share;
	uint64_t lat_p50_ns, lat_p99_ns, lat_max_ns;
	struct sched_queue_stats st;
};

struct sim_result {
	uint32_t ntenants;
	struct sim_tenant_result t[SIM_MAX_TENANTS];
	double total_mb_per_s;
	uint64_t peak_rate;
};

/* 0 or negative errno. */
int sim_run(const struct sim_scenario *sc, const struct sched_params *p, struct sim_result *out);

/* A fast parallel store: ~110k IOPS 4k random reads at depth 16, ~5 GB/s
 * large reads, dsync writes ~280 us. slots = 1 gives a serial store. */
void sim_device_fast(struct sim_device *d, uint32_t slots);

/* The scenarios, S1..S5 (bench/README runs the same cases on a real mount
 * as its "lessons" 1..4; S5 is its depth-1-vs-deep row):
 *   S1 a 512 B dsync writer whose every write waits on a journal tenant's
 *      write, next to a depth-1 reader;
 *   S2 two depth-1 writers, one rate-limited: its idle windows must not cap
 *      the other;
 *   S3 small sync readers next to a streaming writer: their latency;
 *   S4 saturating readers of weights 8:1 and 5:3:1: the received ratios;
 *   S5 a heavy depth-1 reader next to a light deep one.
 */
/* reader_weight 100: all equal, and nobody is idled for (every tenant has one
 * request at a time); 400: the reader outweighs the other two together and
 * is idled for, and the journal gets in by injection. */
void sim_scenario_s1_journal(struct sim_scenario *sc, uint32_t reader_weight);
void sim_scenario_s2_rate_limited(struct sim_scenario *sc, bool limited_present);
void sim_scenario_s3_streaming(struct sim_scenario *sc, bool readers_present);
void sim_scenario_s4_weights(struct sim_scenario *sc, uint32_t ntenants);
/* S4 as the real mount sees it: the caller's round trip drains queues. */
void sim_scenario_s4_fuse(struct sim_scenario *sc, uint32_t ntenants);
void sim_scenario_s5_sync_reader(struct sim_scenario *sc, uint32_t slots, bool deep_present);

/* Parameter sets compared in the table. */
void sim_params_bfq(struct sched_params *p);
void sim_params_fifo(struct sched_params *p);
void sim_params_bfq_noinject(struct sched_params *p);
void sim_params_bfq_noidle(struct sched_params *p);
/* No holding the store for a deep tenant whose queue ran dry. */
void sim_params_bfq_nohold(struct sched_params *p);
/* A deep tenant whose requests all came back is idle at once. */
void sim_params_bfq_noaway(struct sched_params *p);
/* BFQ before think-time learning: a fixed window, no injection. */
void sim_params_bfq_fixed_idle(struct sched_params *p);

#endif
