/* Deterministic discrete-event simulator for the scheduler: a virtual clock,
 * a store with N parallel slots and per-operation service times, and tenants
 * that issue requests the way FUSE callers do. Shared by the Check tests and
 * the fusesched-sim command. */
#ifndef FUSESCHED_SIM_H
#define FUSESCHED_SIM_H

#include "fusesched/sched.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SIM_MAX_TENANTS 32u
#define SIM_MAX_THREADS 64u
#define SIM_MAX_GROUPS 16u
#define SIM_MAX_REWEIGHTS 4u
#define SIM_MAX_WINDOWS 4u

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
/* The store's cost model bfq is given where the daemon is given
 * `read_cost`, `write_cost` and `dsync_cost` (sched_params.model_iops):
 * the simulated store's own reads, plain writes and dsync writes, 4 KiB
 * requests a second and bytes a second with every slot busy. Barriers are
 * not priced, as in the daemon. */
void sim_device_cost_model(const struct sim_device *d, struct sched_params *p);

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
	/* Its place in the tenant tree: 0 the root, n the group sc->g[n - 1]
	 * (1-based, so that the zero-initialized tenants of S1..S5 stay flat).
	 * weight is then its weight among the group's children. */
	int group;
	/* Its jobs send their first requests at start_ns and none after
	 * stop_ns (0: the whole run): containers spawned and stopped in a pod. */
	uint64_t start_ns, stop_ns;
};

/* A group of the tenant tree (sched_group_get): a pod, a delegated subtree.
 * parent as sim_tenant.group; it must come before its children in sc->g. */
struct sim_group {
	const char *name;
	uint32_t weight;
	int parent;
};

/* At at_ns the weight of group (as sim_tenant.group), or with group 0 of
 * tenant index tenant, becomes weight. */
struct sim_reweight {
	uint64_t at_ns;
	int group;
	uint32_t tenant;
	uint32_t weight;
};

/* A measurement window besides the whole run, e.g. one phase after a
 * change, leaving the moments of the change out. */
struct sim_window {
	uint64_t from_ns, to_ns;
};

struct sim_scenario {
	const char *name;
	const char *about;
	struct sim_device dev;
	struct sim_host host;
	uint32_t max_inflight;
	uint32_t ntenants;
	struct sim_tenant t[SIM_MAX_TENANTS];
	uint32_t ngroups;
	struct sim_group g[SIM_MAX_GROUPS];
	/* true: the groups are not given to the scheduler, every tenant is a
	 * child of the root with its own weight (the flat contrast); results
	 * are still summed per group. Reweights of groups are then skipped. */
	bool flat;
	/* true: each request is billed the store time it needs as this store
	 * serves it (sched_req.need_ns: the service time without jitter),
	 * not its measured time in flight: what the scheduler would do if
	 * its measure of store time were exact (fusesched-sim --oracle). */
	bool oracle_billing;
	uint32_t nreweights;
	struct sim_reweight rw[SIM_MAX_REWEIGHTS];
	uint32_t nwindows;
	struct sim_window w[SIM_MAX_WINDOWS];
	uint64_t duration_ns, warmup_ns;
	uint64_t seed;
};

struct sim_tenant_result {
	uint64_t ops, bytes;
	uint64_t store_ns;	/* the store's slot time its requests took */
	uint64_t charged_bytes;	/* what the scheduler charged it for them */
	double mb_per_s, share;
	uint64_t lat_p50_ns, lat_p99_ns, lat_max_ns;
	struct sched_queue_stats st;
};

/* A group's subtree: every tenant beneath it, however deep. */
struct sim_group_result {
	uint64_t ops, bytes;
	double mb_per_s, share;
};

/* Bytes completed within one of sc->w, and their shares of its total. */
struct sim_window_result {
	uint64_t t_bytes[SIM_MAX_TENANTS], g_bytes[SIM_MAX_GROUPS], total_bytes;
	uint64_t t_store_ns[SIM_MAX_TENANTS], total_store_ns;	/* slot time */
	double t_share[SIM_MAX_TENANTS], g_share[SIM_MAX_GROUPS];
	double total_mb_per_s;
};

struct sim_result {
	uint32_t ntenants, ngroups, nwindows;
	struct sim_tenant_result t[SIM_MAX_TENANTS];
	struct sim_group_result g[SIM_MAX_GROUPS];	/* as sc->g, 0-based */
	struct sim_window_result w[SIM_MAX_WINDOWS];
	double total_mb_per_s;
	/* Slot time used per second, the slots the store kept busy on average:
	 * work done, whichever tenants' requests it was. */
	double store_busy;
	uint64_t peak_rate;
};

/* 0 or negative errno; -EINVAL for a group whose parent does not come
 * before it, a tenant in no such group, a reweight or window out of range. */
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

/* The hierarchical scenarios, H1..H6: tenants in groups (pods, delegated
 * subtrees) as cgroups place them. A group's share of the store is divided
 * among its active children by weight; each expectation below is what that
 * rule gives, and what a flat placement (sc->flat) would miss.
 *   H1 pod A (w200) with 1 saturating container, pod B (w100) with 3:
 *      A 2/3, B 1/3, each of B's containers 1/9 (flat: 1/4 each).
 *   H2 pods 100:100, one with 1 container, one with 2: 1/2 each (flat:
 *      1/3 and 2/3).
 *   H3 a delegated subtree (w10) next to a root tenant (w100): first one
 *      child, from 400 ms on four more of weight 100: the subtree keeps
 *      10/110 in both phases (sc->w[0], sc->w[1]); flat it would take 1/2
 *      and then 5/6.
 *   H4 nested: A (w300) -> { A1 (w100) -> 2 leaves, A2 (w100) leaf }, B
 *      (w100) leaf: A 3/4 (A1 and A2 3/8 each, A1's leaves 3/16), B 1/4
 *      (flat: 1/4 each leaf, so A1 1/2 and A2 1/4).
 *   H5 idling and injection through the tree: S5's depth-1 reader in a pod
 *      of w800 next to a pod of w100 with the deep reader; and S1's heavy
 *      variant with writer, journal and reader each in a pod of its own.
 *   H6 pods 100:100 (1 and 2 containers) become 300:100 at 500 ms
 *      (sched_group_set_weight): 1/2 each before (sc->w[0]), 3/4 and 1/4
 *      after (sc->w[1]).
 * The *_fuse variants put the same tenants behind S4_fuse's loaded host. */
void sim_scenario_h1_pods(struct sim_scenario *sc);
void sim_scenario_h1_pods_fuse(struct sim_scenario *sc);
void sim_scenario_h2_equal_pods(struct sim_scenario *sc);
void sim_scenario_h2_equal_pods_fuse(struct sim_scenario *sc);
void sim_scenario_h3_delegated(struct sim_scenario *sc);
void sim_scenario_h4_nested(struct sim_scenario *sc);
void sim_scenario_h5_sync_reader(struct sim_scenario *sc, uint32_t slots, bool deep_present);
void sim_scenario_h5_journal(struct sim_scenario *sc);
void sim_scenario_h6_reweight(struct sim_scenario *sc);
/* Q1: two 4 KiB readers of 16 jobs each at 400:100 on a fast store of
 * slots slots behind 32 dispatch slots: together within max_inflight, so
 * only a limit learned from the store (learn_depth) holds them back; with
 * max_inflight alone the store's queue serves them 1:1. */
void sim_scenario_q1_queued_store(struct sim_scenario *sc, uint32_t slots);

/* Q3: three 4 KiB readers of 8 jobs each at 300:300:100 on a fast store
 * of slots slots behind 32 dispatch slots (bench/run's weights-3-3-1-d8):
 * together within max_inflight, so only the holding door divides them. */
void sim_scenario_q3_depth_fitting(struct sim_scenario *sc, uint32_t slots);
/* The share of the store the tree promises tenant (0-based) or group
 * (0-based) at at_ns, if every tenant running then is backlogged: the
 * tenants between their start_ns and stop_ns, with the reweights up to
 * at_ns applied (sc->flat: every tenant at the root). The expectations of
 * H1..H6, from the weights alone. */
double sim_tree_share(const struct sim_scenario *sc, uint64_t at_ns, int tenant);
double sim_tree_group_share(const struct sim_scenario *sc, uint64_t at_ns, int group);
/* Whether a tenant or group placed in group (as sim_tenant.group) is
 * beneath sc->g[k], at any depth; false for a group out of range. */
bool sim_in_group(const struct sim_scenario *sc, int group, uint32_t k);

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
/* At most 1.5x the depth the store was seen to serve (learn_depth). */
void sim_params_bfq_learn_depth(struct sched_params *p);
/* bfq with the holding door always open (work_conserving = yes). */
void sim_params_bfq_open_door(struct sched_params *p);
/* Unused slots never go to a tenant a slice ahead of its share (work_conserving = no). */
void sim_params_bfq_strict(struct sched_params *p);

/* ---- the shape matrix (matrix.c, issue 23) ----
 *
 * sim_matrix_shape draws a workload shape from a seed, the same on every
 * machine: 2..8 tenants, each a reader, direct writer, dsync writer,
 * buffered (async) writer or, now and then, an fsync committer; weights
 * 1..1000 and depths 1..64 log-uniform; requests of 4 KiB..1 MiB (powers of
 * two); think time 0, a FUSE round trip (10-30 us)
 * or up to 1 ms; some with caller threads that stall for a CPU; in a third
 * of the shapes 1..3 pods (sometimes nested) holding most tenants; in front
 * of the bare fast store (16 slots) or S4_fuse's loaded FUSE host (32
 * slots, batched reaping), in a quarter of the shapes with a store of 1 to
 * a quarter of those slots (the rest of the scheduler's depth waits in the
 * store's own queue). 1 s of warm-up, then SIM_MATRIX_WINDOWS windows
 * of 1 s (sc->w).
 *
 * The properties (sim_matrix_check), each window on its own (share,
 * shallow) or over the measured run (total), in the store's time: a
 * tenant's rate is the slot time its requests held per second (slots busy
 * for it on average), whatever their size. A weight is a share of the
 * store, and a 4 KiB request holds a slot for much longer per byte than a
 * 1 MiB one: in bytes, a heavy 4 KiB reader next to a light 1 MiB one
 * would be owed the store's time many times over its weight, and the
 * better that held, the fewer bytes the store would move. (Where all
 * tenants' requests are alike, as in S4 and bench/run's weights lessons,
 * time and bytes give the same shares.)
 *   solo     a tenant's solo rate: it alone in the same shape, under fifo.
 *   fair     the max-min fair division by weight of the slot time bfq used
 *            in the window (sim_matrix_waterfill), every tenant wanting its
 *            solo rate: level by level of the tree, a child gets the
 *            smaller of its want (a group: its subtree's) and its weight's
 *            part of what the children below the level leave, so what a
 *            tenant cannot use goes to the others by weight. fsync
 *            committers hold slots with their flushes and count like any.
 *   backlogged  solo rate at least 1.25x its fair part: it could clearly
 *            use more. Every other tenant is shallow.
 *   share    a backlogged tenant gets its target within 10% (or two
 *            requests, if more: a window holds whole requests, and a batch
 *            reaped at its edge lands on one side). Its target: the same
 *            division, but each shallow tenant wanting just what it got, so
 *            the backlogged divide what the others left by weight. (A
 *            shallow tenant's shortfall is no capacity anyone could have
 *            used; the shallow rule judges it. A lone backlogged tenant is
 *            owed what it got: the total rule judges waste.)
 *   shallow  a shallow tenant gets at least 80% of its fair part (its solo
 *            rate, or less if even that is more than its weight's part),
 *            less two requests.
 *   total    bfq keeps the store as busy as fifo: slot time used per
 *            second at least 90% of fifo's. The byte totals are kept for
 *            the record. */
#define SIM_MATRIX_WINDOWS 4u
#define SIM_MATRIX_WINDOW_NS 1000000000ull
#define SIM_MATRIX_WARMUP_NS 1000000000ull
#define SIM_MATRIX_SOLO_NS 2500000000ull
#define SIM_MATRIX_SOLO_WARMUP_NS 500000000ull
#define SIM_MATRIX_BACKLOG_MARGIN 1.25
#define SIM_MATRIX_SHARE_TOL 0.10
#define SIM_MATRIX_SHALLOW_MIN 0.80
#define SIM_MATRIX_TOTAL_MIN 0.90
#define SIM_MATRIX_MAX_VIOLATIONS 80u

enum sim_prop { SIM_PROP_SHARE, SIM_PROP_SHALLOW, SIM_PROP_TOTAL, SIM_PROP_NR };
enum sim_class { SIM_CLASS_NONE, SIM_CLASS_BACKLOGGED, SIM_CLASS_SHALLOW };

struct sim_violation {
	enum sim_prop prop;
	int tenant, window;	/* -1: the total, the whole run */
	double got, want;	/* slots busy */
	double off;		/* relative miss of the target, for the worst */
	char why[160];
};

/* A tenant alone in its shape, under fifo. */
struct sim_solo {
	double mb_per_s;
	double slots;		/* slot time its requests held per second */
	double slot_s_per_op;	/* per request */
};

struct sim_matrix_tenant {
	struct sim_solo solo;
	/* in slots; target: backlogged, the share rule's; shallow, its fair part */
	double target[SIM_MAX_WINDOWS], got[SIM_MAX_WINDOWS];
	enum sim_class cls[SIM_MAX_WINDOWS];
};

struct sim_matrix_outcome {
	struct sim_result bfq, fifo;	/* bfq: the policy judged (its set) */
	struct sim_matrix_tenant t[SIM_MAX_TENANTS];
	double bfq_busy, fifo_busy, bfq_mb, fifo_mb;	/* total: slots busy, MB/s */
	bool checked[SIM_PROP_NR];	/* the property applied somewhere */
	bool failed[SIM_PROP_NR];
	uint32_t nviol, worst;		/* worst: index into v, if nviol */
	struct sim_violation v[SIM_MATRIX_MAX_VIOLATIONS];
};

void sim_matrix_shape(uint64_t seed, struct sim_scenario *sc);
/* "fast|fuse [pK@W[/pP]...] | T...": per tenant its kind (Read, direct
 * Write, Dsync write, Buffered write, Fsync), request size, ":depth",
 * "@weight", "+tUS" think time (if not 10 us), "+sTHREADS/MSms/PERMILLE"
 * stalls, "/pK" its pod. */
void sim_matrix_describe(const struct sim_scenario *sc, char *buf, size_t n);
void sim_matrix_describe_tenant(const struct sim_scenario *sc, uint32_t i, char *buf, size_t n);
/* target[i]: tenant i's part of amount (see "fair" above); demand[i] <= 0
 * leaves tenant i out with target 0. */
void sim_matrix_waterfill(const struct sim_scenario *sc, double amount, const double *demand,
			  double *target);
/* Tenant i of sc alone under fifo. */
int sim_matrix_solo(const struct sim_scenario *sc, uint32_t i, struct sim_solo *solo);
/* The properties on a shape's runs, with the tenants' solo rates: fills
 * o's tenants, totals and violations. */
void sim_matrix_check(const struct sim_scenario *sc, const struct sim_solo *solo,
		      const struct sim_result *bfq, const struct sim_result *fifo,
		      struct sim_matrix_outcome *o);
/* Solo runs, set's run (bfq: sim_params_bfq), fifo's, then the check. */
int sim_matrix_run(const struct sim_scenario *sc, void (*set)(struct sched_params *p),
		   struct sim_matrix_outcome *o);
const char *sim_prop_name(enum sim_prop p);

/* splitmix64: tiny, seeded, the same sequence on every machine; the
 * simulator's jitter and the matrix's shapes both come from it. */
static inline uint64_t sim_splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

#endif
