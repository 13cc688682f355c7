/* fusesched scheduler: per-tenant proportional share of one backing store.
 *
 * Pure code: no threads, no syscalls, no clock. The one clock is the
 * caller's: every function that needs the time takes it as now_ns (any
 * monotonic origin, never going back), and the scheduler never reads a clock
 * of its own, so it can be driven by the engine's io_uring loop or by a
 * simulator's virtual clock, with the same decisions for the same inputs.
 *
 * Intended use, from exactly one thread:
 *   on a request:      sched_enqueue(), then sched_dispatch() until NULL
 *   on a completion:   sched_complete(), then sched_dispatch() until NULL
 *   wait until:        sched_next_deadline(); then sched_timer() and dispatch.
 * sched_dispatch() returning NULL while requests are pending is deliberate:
 * the scheduler is idling for a tenant or the dispatch depth is full.
 */
#ifndef FUSESCHED_SCHED_H
#define FUSESCHED_SCHED_H

#include <stdbool.h>
#include <stdint.h>

#define SCHED_WEIGHT_MIN 1u
#define SCHED_WEIGHT_MAX 1000u
#define SCHED_WEIGHT_DEFAULT 100u
#define SCHED_DEADLINE_NONE UINT64_MAX

enum sched_policy {
	SCHED_POLICY_BFQ,	/* the product */
	SCHED_POLICY_FIFO,	/* arrival order, only max_inflight: the baseline */
};

enum sched_op {
	SCHED_OP_READ,
	SCHED_OP_WRITE,
	SCHED_OP_FSYNC,
	SCHED_OP_FDATASYNC,
	SCHED_OP_OTHER,		/* fallocate, copy_file_range, ...: charged by time */
};

/* Why a tenant lost the store; drives the budget feedback. */
enum sched_expire {
	SCHED_EXPIRE_EXHAUSTED,	/* used its whole budget: grow it */
	SCHED_EXPIRE_TIMEOUT,	/* held the store for budget_timeout_ns */
	SCHED_EXPIRE_EMPTIED,	/* ran out of requests, not worth idling for */
	SCHED_EXPIRE_TOO_IDLE,	/* the idle window passed without a request */
	SCHED_EXPIRE_PREEMPTED,	/* a heavier tenant owed service arrived */
	SCHED_EXPIRE_NR,
};

/* Which rule let another tenant's request in while one was being idled for. */
enum sched_inject {
	SCHED_INJECT_WAKER,	/* the idled tenant's detected waker */
	SCHED_INJECT_SYNC,	/* fsync, fdatasync, small sync write of anyone */
	SCHED_INJECT_GENERAL,	/* within the learned injection limit */
	SCHED_INJECT_NR,
};

/* hold_depth_pct: a sync tenant in service whose queue runs empty while it still
 * has at least this percentage of its share of max_inflight at the store
 * keeps the store: its callers are busy with completions and will be back
 * (a FUSE round trip, a caller thread waiting for a CPU). Meanwhile others
 * are let in only as far as virtual time says they are owed, so the gap is
 * not handed to them. 0: never hold. hold_min_inflight keeps a tenant of a
 * few requests (a depth-1 reader among many tenants, whose share of the
 * depth is 1) out of this: it is idled for or expired as before.
 *
 * away_window_ns: such a deep tenant whose requests have all come back
 * (replied to; its callers have not sent the next ones yet, or wait for a
 * CPU) is "away", not idle, for this long: it keeps its weight in the sum
 * and its place in virtual time. Others may run ahead of it by one slice
 * of their own meanwhile (charged for it: it gets that back when it
 * returns), then the store waits for it until it is back or the window
 * ends. Through FUSE on a loaded host the CPU, not the store, is what the
 * tenants share: what the others would get in the gap is CPU its callers
 * need to come back. 0: an emptied queue is idle at once (plain WF2Q+).
 *
 * inject_slowdown_pct: while a tenant is idled for, others are injected as
 * long as its requests' service time stays within this much of what it is
 * alone; past it the limit shrinks. inject_cycle_slowdown_pct: the same for
 * the whole cycle (think time plus service) of a tenant of one request at a
 * time, judged on the mean of a batch of cycles against the mean alone (a
 * slowed batch halves the limit, bounds it until a batch is not slowed, and
 * drops a waker injected in it). 125: the cycles of a tenant that keeps 0.8
 * of its rate, the least a shallow tenant is promised. The cycle alone is
 * measured every quiet_every_ns in a few quiet cycles with nobody
 * injected: through FUSE the others' requests cost a depth-1 tenant's
 * callers CPU, which service time does not show. */

/* The holding door (idle.c, inject_holding): whether the slots a deep
 * tenant in service leaves unused go to whoever waits first (OPEN: work
 * conservation), never to one already a slice ahead of its share (SHUT),
 * or as short probes find it each few seconds: shut for a holder that
 * moved clearly less with it open (LEARN, door.c). */
enum sched_door { SCHED_DOOR_OPEN, SCHED_DOOR_SHUT, SCHED_DOOR_LEARN };

/* The kinds of request the store's cost model prices: reads, plain
 * writes, and O_DSYNC writes (each a write and a flush of the device's
 * cache). Barriers and other operations are billed by their time in
 * flight: an fsync's cost is the dirty data it finds, which no rate
 * of the store prices. */
enum sched_cost_kind { SCHED_COST_READ, SCHED_COST_WRITE, SCHED_COST_DSYNC, SCHED_COST_KINDS };

/* Every tunable. Defaults (sched_params_default) suit a daemon in front of a
 * fast parallel store where FUSE think times are tens of microseconds. */
struct sched_params {
	enum sched_policy policy;		/* SCHED_POLICY_BFQ */
	uint32_t max_inflight;			/* 32: requests at the store at once */
	bool learn_depth;			/* false: at most max_inflight at the store; true: at most
					 * 1.5x the depth it was seen to serve (learn.c) */
	enum sched_door work_conserving;	/* LEARN: the door below as its probes find it */
	uint32_t default_weight;		/* 100, for sched_queue_get(weight 0) */
	uint64_t budget_timeout_ns;		/* 20 ms: longest a tenant holds the store */
	uint64_t budget_min_bytes;		/* 16 KiB: smallest budget */
	uint64_t budget_initial_bytes;		/* 16 KiB: budget of a new tenant */
	uint64_t budget_max_bytes;		/* 64 KiB: largest budget (see DESIGN 9) */
	uint64_t peak_window_ns;		/* 2 ms: window to measure the peak rate */
	bool idle_enable;			/* true: idle for service guarantees */
	uint64_t idle_fixed_ns;			/* 0: learn the window; else always this */
	uint64_t idle_min_ns;			/* 20 us: shortest idle window */
	uint64_t idle_max_ns;			/* 1 ms: longer think time is not idled for */
	uint32_t idle_think_pct;		/* 200: window = return time * pct / 100;
						 * idled for if think time * pct / 100
						 * is within idle_max_ns */
	bool inject_enable;			/* true: inject while idling */
	uint64_t small_sync_write_bytes;	/* 16 KiB: "small" sync writes inject */
	uint32_t inject_slowdown_pct;		/* 150: back off past 1.5x baseline */
	uint32_t inject_cycle_slowdown_pct;	/* 125: the same for a batch of cycles */
	uint64_t inject_reprobe_ns;		/* 100 ms: retry a zero injection limit */
	uint64_t quiet_every_ns;		/* 1 s: measure a tenant's cycle alone; 0: never */
	uint64_t waker_gap_ns;			/* 1 ms, and at most half the think time */
	uint32_t waker_hits;			/* 3: repeats that make a waker */
	uint64_t waker_window_ns;		/* 1 s: hits must fall within this */
	bool charge_by_time;			/* true: reads and writes pay for store time held */
	uint32_t hold_depth_pct;		/* 50: see above */
	uint32_t hold_min_inflight;		/* 4: ... and at least this many */
	uint64_t away_window_ns;		/* 20 ms: see above */
	uint32_t async_depth_pct;		/* 90: async share of max_inflight ... */
	uint64_t async_sync_window_ns;		/* 100 ms: ... if sync I/O arrived this recently */
	uint64_t reserve_window_ns;		/* 1 s: slots kept for a shallow tenant gone idle; 0: none */
	uint32_t reserve_max_pct;		/* 12: of max_inflight kept at most, for all of them */
	/* The store's cost model, io.cost's linear one, per kind
	 * (SCHED_COST_*; 0: none, that kind is billed by its time in
	 * flight): a request needs 1 / model_iops of the store's time (a
	 * 4 KiB random request among many), and its bytes past 4 KiB at
	 * model_bytes_per_s more (a large sequential one). Each of the
	 * max_inflight slots is that share of the store (bfq.c). */
	uint32_t model_iops[SCHED_COST_KINDS];
	uint64_t model_bytes_per_s[SCHED_COST_KINDS];
};

/* A link of the scheduler's intrusive lists (src/sched/list.h); here only
 * because struct sched_req embeds one. */
struct sched_link {
	struct sched_link *next, *prev;
};

/* Caller-owned request record, embedded in the caller's own request
 * (container_of to get back). The caller fills the first block before
 * sched_enqueue and must not touch the record until sched_complete. */
struct sched_queue;
struct sched_req {
	struct sched_queue *queue;	/* the tenant's queue */
	enum sched_op op;
	uint64_t bytes;			/* may be 0 */
	bool sync;			/* the caller waits for it (direct, dsync, read) */
	bool dsync;			/* a write that reaches stable storage before it is
					 * done (O_DSYNC, O_SYNC): the cost model has no
					 * price for it, its time in flight is billed */
	uint64_t arrival_ns;		/* when it reached the daemon, on the scheduler's clock;
					 * 0: at sched_enqueue. Think times run from a
					 * completion to the next arrival, so a wait in the
					 * daemon before the scheduler saw it is not counted
					 * as the caller's thinking. */
	uint64_t need_ns;		/* the store time it needs, where the caller knows it
					 * (the simulator's own store, sim.h oracle_billing);
					 * 0: from the cost model if there is one, else
					 * billed by its time in flight (bfq.c) */

	/* private to the scheduler; enqueue_ns may be read after completion */
	struct sched_link link;		/* in its queue's (fifo: the scheduler's) request list;
					 * once dispatched, in the scheduler's at the store */
	bool hung;			/* at the store past the hung bound (sched.c) */
	uint64_t enqueue_ns, dispatch_ns, charge_bytes;
	uint64_t store_share_start;	/* the scheduler's store share sum at dispatch */
	uint32_t others_inflight;	/* other tenants' requests at the store at dispatch */
	bool probed;			/* dispatched during a depth probe (learn.c) */
};

/* Tenants form a tree, as cgroups do: a queue or a group is a child of a
 * group or of the root, and a group's share of the store is divided among
 * its children that have requests (or are deep and away), in proportion to
 * their weights. Children at the root share by weight alone, so a flat set
 * of queues is plain B-WF2Q+. The tree is flattened, as the kernel's
 * io.cost does: each active queue is scheduled with its share of the
 * whole store as its weight, recomputed whenever a sibling on its path goes
 * active or idle, so slices, budgets, idling, injection and caps work on
 * queues as before and a group's children can divide its share but never
 * add to it. */
#define SCHED_GROUP_NONE UINT64_MAX
struct sched_group;

/* Read-only per-tenant counters, for `fusesched stat`. */
struct sched_queue_stats {
	uint64_t tenant_id;
	uint64_t parent_id;			/* its group's id, SCHED_GROUP_NONE: the root */
	uint32_t weight;			/* among its siblings */
	uint32_t pending, inflight;
	uint64_t served_ops, served_bytes;
	uint64_t charged_bytes;			/* what the share was computed on */
	uint64_t idle_windows, idle_ns;		/* idled for this tenant */
	uint64_t injected_ops[SCHED_INJECT_NR];	/* this tenant's requests let in */
	uint64_t expirations[SCHED_EXPIRE_NR];
	uint64_t budget_bytes;
	uint64_t think_ns;			/* learned think time, 0 if unknown */
	uint64_t cycle_alone_ns;		/* think + service with the store to itself, 0 if unseen */
	uint32_t inject_limit;
	bool door_shut;				/* its holding door, as the last probe left it (door.c) */
	bool has_waker;
	uint64_t waker_id;
};

struct sched;

void sched_params_default(struct sched_params *p);

/* -EINVAL for inconsistent params, -ENOMEM. */
int sched_new(const struct sched_params *p, struct sched **out);
/* A reload's params, for what comes from now on: the store's cost model
 * (requests completing next are billed by it), max_inflight (requests
 * already at the store beyond a lower one finish; the caller keeps it
 * within what it sized for), learn_depth (either changed, the depth is
 * learned afresh), work_conserving, budget_timeout_ns, reserve_window_ns,
 * the idling (idle_enable, idle_fixed_ns) and the policy: the requests at
 * the store complete under the policy that sent them and nothing is
 * dispatched meanwhile (sched_next_deadline is then due at once, so that
 * the caller's timer makes the change as soon as none is in flight); then
 * the queued ones pass to the new policy in arrival order. The rest are
 * kept: default_weight (tenants' weights come from their table) and the
 * tuning constants. -EINVAL, every setting kept, for inconsistent params. */
int sched_reload(struct sched *s, const struct sched_params *p);
/* "bfq" or "fifo". */
const char *sched_policy_name(enum sched_policy policy);
/* The params in force. */
const struct sched_params *sched_params_of(const struct sched *s);
/* Requests still queued or in flight are forgotten, never completed:
 * drain first for a clean stop. */
void sched_free(struct sched *s);

/* Finds the tenant's queue or creates it with weight (0: default weight).
 * An existing queue keeps its weight. -EINVAL bad weight, -ENOMEM. */
int sched_queue_get(struct sched *s, uint64_t tenant_id, uint32_t weight,
		    struct sched_queue **out);
struct sched_queue *sched_queue_find(const struct sched *s, uint64_t tenant_id);
/* Keeps the queue's place in virtual time; -EINVAL outside 1..1000. */
int sched_queue_set_weight(struct sched *s, struct sched_queue *q, uint32_t weight);
/* Detaches the tenant. Its queued and in-flight requests are still
 * dispatched and completed normally; the queue is freed after the last one.
 * The caller must not use q afterwards, except through those requests. */
void sched_queue_remove(struct sched *s, struct sched_queue *q);
void sched_queue_stats(const struct sched_queue *q, struct sched_queue_stats *st);
/* Moves q under parent (NULL: the root), keeping its place in virtual time. */
void sched_queue_set_parent(struct sched *s, struct sched_queue *q, struct sched_group *parent);

/* Finds group group_id or creates it under parent (NULL: the root) with
 * weight (0: default weight). An existing group keeps its weight and
 * parent. A group lives while a queue or group is beneath it, or until
 * sched_group_remove. -EINVAL bad weight or id, -ENOMEM. */
int sched_group_get(struct sched *s, uint64_t group_id, struct sched_group *parent,
		    uint32_t weight, struct sched_group **out);
struct sched_group *sched_group_find(const struct sched *s, uint64_t group_id);
/* -EINVAL outside 1..1000. */
int sched_group_set_weight(struct sched *s, struct sched_group *g, uint32_t weight);
/* -EINVAL if parent is g or beneath it. */
int sched_group_set_parent(struct sched *s, struct sched_group *g, struct sched_group *parent);
/* Frees group_id's name for a new group; g lives on while anything is
 * beneath it. The caller must not use g afterwards. */
void sched_group_remove(struct sched *s, struct sched_group *g);

/*
 * The most requests the scheduler held queued while a deep queue with none
 * queued waited for its next ones (idled or held for, or away), since the
 * last call; resets it. Those requests are outstanding in the kernel's
 * queue of async requests, first come first served, and when they fill it
 * the deep queue's next requests wait behind them in the kernel, where the
 * scheduler cannot see them (engine.c sizes that queue).
 */
uint32_t sched_take_held_beside_deep(struct sched *s);

void sched_enqueue(struct sched *s, struct sched_req *r, uint64_t now_ns);
/* Next request to submit, or NULL: nothing to do now. */
struct sched_req *sched_dispatch(struct sched *s, uint64_t now_ns);
/* r is returned to the caller. */
void sched_complete(struct sched *s, struct sched_req *r, uint64_t now_ns);
/*
 * A request that ran without passing through the scheduler, while it had
 * nothing queued, in flight or timed (it would have dispatched it at once:
 * the engine's solo requests): counted as served, so the scheduler's view
 * of each tenant covers all its requests. It takes no slice and charges no
 * virtual time (a tenant alone is owed nothing and owes nothing), and
 * only its time at the store (store_ns, ended by now_ns on the
 * scheduler's clock) is learned from it, by the hung bound (sched.c).
 * Learning the store's rate or the tenant's think time from requests
 * timed outside the scheduler moved 8:1 weights off target on the real
 * mount (HISTORY.md).
 * The caller fills r's first block as for sched_enqueue; r is not kept.
 */
void sched_account(struct sched *s, struct sched_req *r, uint64_t store_ns, uint64_t now_ns);
/*
 * Work at the store that is no request of the scheduler's (metadata run at
 * once in a worker) took store_ns, ended by now_ns: learned by the hung
 * bound only, so that a daemon whose first scheduled requests hang takes
 * them for hung by what its store has shown, not after the 5 s kept for a
 * store it knows nothing of.
 */
void sched_note_store_time(struct sched *s, uint64_t store_ns, uint64_t now_ns);
/* When sched_timer must run next, or SCHED_DEADLINE_NONE. */
uint64_t sched_next_deadline(const struct sched *s);
void sched_timer(struct sched *s, uint64_t now_ns);

/* Learned store peak rate (bytes/s over peak_window_ns), 0 while unknown. */
uint64_t sched_peak_rate(const struct sched *s);
/* Of sched_inflight, the requests at the store so long that they are taken
 * to be hung (sched.c): they leave the depth to the others. */
uint32_t sched_hung(const struct sched *s);
/* r, just dispatched, cannot start before requests of its own that hang
 * return (the executors' line holds it back): hung now, as they are. */
void sched_hang(struct sched *s, struct sched_req *r);
/* Requests queued or at the store of the tenants that have requests hung
 * there: outstanding in the kernel's queue of async requests, they will
 * not leave it before the store answers (engine.c sizes that queue). The
 * hung requests' mean size in *hung_mean_bytes (0 when none). */
uint32_t sched_held_by_hung(struct sched *s, uint64_t *hung_mean_bytes);
uint32_t sched_inflight(const struct sched *s);
uint32_t sched_pending(const struct sched *s);
/* Dispatch slots kept free now for tenants that went idle within
 * reserve_window_ns (bfq; 0 under fifo). */
uint32_t sched_reserved_slots(const struct sched *s, uint64_t now_ns);
/* Tenants with requests queued or in flight. */
uint32_t sched_busy_queues(const struct sched *s);
/* The most requests it lets be at the store: max_inflight, or with
 * learn_depth the limit learned so far. */
uint32_t sched_max_inflight(const struct sched *s);

#endif
