/* What the files of src/sched share; not for the rest of the tree.
 *
 *   sched.c   public entry points, queue lifecycle, the accounting every
 *             policy does per request, the store share sum
 *   table.c   the tenant table (tenant id -> queue)
 *   policy:   chosen at sched_new as a struct sched_policy_ops
 *     bfq.c   BFQ: slices, budgets, charging, the dispatch depth, dispatch
 *     idle.c  BFQ while the queue in service cannot use the store:
 *             idling for it, injecting others
 *     deep.c  BFQ for deep tenants: holding the store, the gap guard, away
 *     fifo.c  the baseline: arrival order, only max_inflight
 *   learn.c   what is learned from arrivals and completions: think time,
 *             wakers, the store's rate, cycles, injection limits
 *   tree.c    the tenant tree: groups, and each active queue's share of
 *             the store as its weight in virtual time
 *   wf2q.c    virtual time and the eligibility heaps (wf2q.h)
 *   reserve.c slots kept free for shallow tenants that come and go
 *   list.h    the intrusive list
 *
 * One clock. The scheduler is pure: no syscalls, no threads, and it never
 * reads a clock. The only time it knows is the now_ns its caller passes in;
 * anything timed (windows, deadlines, EWMAs) is computed from those values,
 * and a call without now_ns (sched_queue_remove) uses times it already has.
 *
 * Glossary
 *   queue          one tenant's requests and everything learned about it.
 *   busy           a queue with requests queued (pending) or at the store
 *                  (in flight).
 *   service        bytes charged to a queue: for each request the larger of
 *                  the bytes it read or wrote and the store time it held
 *                  at the slot rate (bfq.c, time_charge_extra).
 *   virtual time   V, in bytes * WF2Q_SCALE / weight: each queue has a start
 *                  and a finish tag in it and the eligible queue with the
 *                  smallest finish is served next (B-WF2Q+, wf2q.h). V moves
 *                  by service / sum of the busy queues' weights.
 *   slice          the time one queue is in service: its requests go first.
 *   budget         service a slice may use before it ends; learned per queue
 *                  from why its slices end (budget_feedback).
 *   cap            a queue's share of the dispatch depth (max_inflight) by
 *                  weight; past it the queue in service yields free slots.
 *   think time     from the completion that left a queue empty to its next
 *                  arrival at the daemon (sched_req.arrival_ns): how long its
 *                  callers take to come back. Its return time runs to the
 *                  scheduler seeing that request: the idle window's length.
 *   idle window    time the store is kept for the queue in service after it
 *                  ran empty, waiting for its next request instead of handing
 *                  the store to others (return time * idle_think_pct).
 *   injection      letting another queue's request in while the one in
 *                  service cannot use the store (idling or holding).
 *   injection limit  how many others' requests may be at the store while a
 *                  queue is idled for, learned from its service time.
 *   barrier        fsync, fdatasync or a small sync write: short, and what
 *                  journal-style writers wait on; injected first.
 *   waker          the tenant whose completions keep preceding a queue's
 *                  arrivals: a journal thread that a dsync writer waits on.
 *   cycle          a depth-1 queue's completion to its next completion
 *                  (think time plus service); "alone" when nobody else was
 *                  at the store meanwhile.
 *   quiet cycles   a few cycles with nobody injected, run every
 *                  quiet_every_ns to measure the cycle alone again.
 *   deep           a sync queue that has had hold_depth_pct of its cap in
 *                  flight since it went busy: its queue running dry means
 *                  its callers are busy with completions, not that it is done.
 *   holding        keeping the store for a deep queue in service whose queue
 *                  ran dry while its requests are at the store.
 *   gap            a deep queue out of service in that state; while deep
 *                  queues are in a gap, others get no more than they are owed.
 *   away           a deep queue all of whose requests came back: for
 *                  away_window_ns it keeps its weight and its place in V.
 *   store share    the store time a request had as its own: the time it was
 *                  in flight, in full up to the store's parallelism, past it
 *                  each moment divided among the requests in flight.
 */
#ifndef FUSESCHED_SCHED_INTERNAL_H
#define FUSESCHED_SCHED_INTERNAL_H

#include "fusesched/sched.h"
#include "list.h"
#include "wf2q.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Fraction bits of the store share sum: a 32-deep store's 1/32 of a
 * nanosecond is kept, and the sum wraps only after 2^48 ns (78 hours),
 * which unsigned differences survive anyway. */
#define STORE_SHARE_SHIFT 16
/* Completions remembered for waker detection. */
#define RECENT_COMPLETIONS 4u

/* ---- per queue ---- */

/* A queue's state as a deep one (deep.c, which keeps sched.gap_queues
 * along with it). SHALLOW is every queue that is not deep. */
enum queue_depth {
	QUEUE_SHALLOW,
	QUEUE_DEEP,	/* deep, neither in a gap nor away */
	QUEUE_IN_GAP,	/* deep, out of service, nothing queued, requests in flight */
	QUEUE_AWAY,	/* deep, nothing queued or in flight: on sched.away_queues */
};

/* The current or next slice. */
struct queue_slice {
	uint64_t budget_bytes;		/* service the next slice may use */
	uint64_t service_bytes;		/* service charged in the current slice */
};

/* Think time (learn.c), EWMA over 8 samples. */
struct queue_think {
	bool completed;			/* a completion was seen: last_complete_ns is valid */
	uint64_t last_complete_ns;
	/* To the next request's arrival at the daemon: its callers' own time,
	 * what says whether it is worth idling for. */
	uint64_t think_ns;
	uint32_t samples;
	/* To the scheduler seeing that request, the daemon's hand-over
	 * included: what an idle window must last to see it. */
	uint64_t return_ns;
	/* Only the think times after which nobody else had been dispatched:
	 * others' load stretches its callers' think time (a shared CPU). */
	uint64_t alone_ns;
	uint32_t alone_samples;
};

/* Cycles of a queue with one request at a time (learn.c). Through FUSE the
 * others' requests slow such a tenant mostly in the CPU its callers need
 * between requests, which service time alone does not show. */
struct queue_cycle {
	bool open;			/* its last completion emptied it: a cycle runs */
	bool shared;			/* others had requests in flight at that completion */
	/* The scheduler's counters at that completion: what happened since. */
	uint64_t dispatch_seq, inject_seq, waker_inject_seq, arrival_seq;
	uint64_t alone_ns;		/* mean cycle with the store to itself, 0: unknown */
	uint64_t batch_ns;		/* cycles with others injected, summed ... */
	uint32_t batch_n;		/* ... over this many */
	bool batch_waker;		/* its waker was injected in one of them */
	uint32_t quiet_left;		/* quiet cycles still to run, nobody injected */
	uint32_t quiet_alone;		/* alone cycles seen in them */
	uint64_t quiet_start_ns;	/* when the last quiet cycles began, 0: never */
};

/* Service time of its requests, for the injection limit (learn.c). */
#define INJECT_NO_CEILING UINT32_MAX
struct queue_inject {
	uint64_t svc_alone_ns;		/* with nothing else in flight, 0: unknown */
	uint64_t svc_min_ns;		/* fastest with others in flight ... */
	uint32_t svc_samples;		/* ... of this many */
	uint32_t limit;			/* others' requests that may be in flight */
	uint32_t ceiling;		/* the most its cycles allow, INJECT_NO_CEILING: no bound */
	uint64_t limit_zero_ns;		/* when the limit last dropped to 0 */
};

/* What a queue's requests of each kind and size need of the store: the
 * least time in flight seen in this window and the last (learn.c). 0: none
 * seen. Per queue, since the same size costs one tenant's random reads more
 * than another's sequential ones. */
#define COST_KINDS 3	/* read, write, barrier and other */
#define COST_SIZES 10	/* no bytes, up to 4 KiB, 8 KiB, ... 1 MiB and more */
struct queue_cost {
	uint32_t now_ns[COST_KINDS][COST_SIZES], last_ns[COST_KINDS][COST_SIZES];
	uint64_t window_start_ns;
};

/* The holding door as learned for it (door.c, work_conserving = auto): completed
 * bytes in this probe's open [0] and shut [1] phases. */
struct queue_door {
	uint64_t bytes[2];
	bool used;			/* the door let someone in for it while open */
	bool shut;			/* until the next probe */
};

/* Waker detection (learn.c). */
struct queue_waker {
	bool known;			/* id is its waker */
	uint64_t id;			/* tenant id */
	uint32_t misses;		/* arrivals since the waker last preceded one */
	uint64_t cand_id;		/* candidate: the latest recent completer */
	uint32_t cand_hits;		/* arrivals it preceded, 0: no candidate */
	uint64_t cand_first_ns;
	uint64_t spurned_id;		/* a waker dropped because, injected, it slowed q ... */
	uint64_t spurned_until_ns;	/* ... is not taken back before this */
};

/* For sched_queue_stats. */
struct queue_counters {
	uint64_t served_ops, served_bytes, charged_bytes;
	uint64_t idle_windows, idle_ns;
	uint64_t injected_ops[SCHED_INJECT_NR];
	uint64_t expirations[SCHED_EXPIRE_NR];
};

/* A place in the tenant tree (tree.c): a queue's or a group's. */
struct sched_node {
	struct sched_group *parent;	/* NULL: the root */
	uint32_t weight;		/* among its siblings, 1..1000 */
	bool is_group;
	bool active;			/* counted in its parent's active_wsum */
	struct sched_link active_link;	/* parent's active children, while active */
};

/* Share units: a child of the root with weight w has w * SHARE_ONE. */
#define SHARE_ONE (1u << 12)

struct sched_group {
	struct sched_node node;
	uint64_t group_id;
	struct sched_link all_link;	/* sched.all_groups */
	struct sched_link active;	/* its active children's nodes */
	uint64_t active_wsum;		/* their weights */
	uint64_t share;			/* while active: of the store, in SHARE_ONE units */
	uint32_t children;		/* queues and groups beneath it */
	bool detached;			/* sched_group_remove'd: freed when empty */
};

struct sched_queue {
	struct wf2q_entity ent;		/* place in virtual time; weight: its share
					 * of the store in SHARE_ONE units (tree.c) */
	struct sched_node node;		/* its place in the tenant tree */
	uint64_t tenant_id;
	struct sched_queue *table_next;	/* tenant table chain */
	struct sched_link all_link;	/* sched.all_queues */
	struct sched_link sync_link;	/* sched.sync_queues, while its head is a barrier */
	struct sched_link away_link;	/* sched.away_queues, while QUEUE_AWAY */
	struct sched_link reserve_link;	/* sched.reserve_queues, while reserved */
	struct sched_link gap_link;	/* sched.gap_queues, while QUEUE_IN_GAP */
	struct sched_link reqs;		/* queued requests, arrival order (bfq) */
	uint32_t pending, inflight;
	uint32_t hung;			/* of inflight, on sched.hung_reqs */
	uint64_t hung_tally;		/* sched.hung_tally when last counted (sched_held_by_hung) */
	/* Over its requests at the store: their store_share_start summed, and
	 * the bytes charged for them at dispatch (bfq.c, held_service). */
	uint64_t inflight_share_starts, inflight_charged;
	bool weighed;			/* its weight counts in wq.wsum */
	bool detached;			/* sched_queue_remove'd: freed when done */
	bool last_sync;			/* its latest arrival was sync */
	enum queue_depth depth;
	uint64_t away_until_ns;		/* while QUEUE_AWAY */
	uint32_t busy_depth_max;	/* most queued and in flight since it went busy */
	/* Most queued and in flight at once at a dispatch, in this window of
	 * DEPTH_WINDOW_NS and the last (deep.c). */
	uint32_t depth_max_now, depth_max_last;
	uint64_t depth_window_start_ns;
	/* Its part of sched.short_wsum and short_depth while it is short:
	 * weighed, and lately fewer at once than its weight's share (deep.c). */
	uint64_t short_weight;
	uint32_t short_depth;
	uint32_t reserved;		/* slots kept for it (reserve.c), 0: not on the list */
	uint64_t reserved_weight;	/* its weight when it joined, in reserved_wsum */
	uint64_t reserve_until_ns;

	struct queue_slice slice;
	struct queue_think think;
	struct queue_cycle cycle;
	struct queue_inject inject;
	struct queue_waker waker;
	struct queue_cost cost;
	struct queue_door door;
	struct queue_counters stats;
};

/* ---- the scheduler ---- */

/* What the in-service queue is doing with the store. */
enum slice_state {
	SLICE_SERVING,	/* dispatching its own requests (also: none in service) */
	SLICE_IDLING,	/* ran empty: the store waits for it until idle_deadline_ns */
	SLICE_HOLDING,	/* deep, ran empty with its requests at the store */
};

/* The in-service queue's slice. */
struct slice {
	enum slice_state state;
	uint64_t start_ns;			/* for budget_timeout_ns */
	uint64_t idle_start_ns, idle_deadline_ns;	/* while SLICE_IDLING */
};

/* The store's rate as learned from completions (learn.c). */
struct store_rate {
	uint64_t peak_bytes_per_s;	/* the whole store, over peak_window_ns */
	uint64_t slot_bytes_per_s;	/* one request: converts store time to bytes */
	uint64_t window_start_ns, window_bytes;
	uint64_t window_least_ns;	/* the window's requests' least times in flight */
	/* Requests the store has been seen serving at once, in 1/256: the most
	 * least-time-in-flight per unit of time over a peak window. */
	uint64_t parallelism_256;
	uint64_t max_budget_bytes;	/* what a slice can use in budget_timeout_ns */
};

/* The holding door's probes (door.c): the next or current one's start. */
struct door_probe {
	uint64_t start_ns;	/* the current probe's start, 0: none */
	uint64_t next_ns;	/* the earliest the next may start */
};

/* The depth the store serves (learn.c, learn_depth): requests in flight at
 * once beyond which they only queue in the store. */
struct store_depth {
	uint64_t window_start_ns, window_flight_ns;	/* the window's completions' unqueued times */
	uint64_t second_start_ns, most_now_256, most_last_256;	/* most per window, in 1/256 */
	uint64_t flight_ns[3][COST_SIZES];	/* mean time in flight of probed requests, by kind and size */
	uint64_t probe_next_ns, probe_end_ns;
	uint32_t limit;		/* what may be in flight: the depth it serves and a margin */
};

struct recent_completion {
	uint64_t tenant_id, at_ns;
};

struct tenant_table {
	struct sched_queue **buckets;
	size_t nbuckets, nqueues;
};

struct sched_policy_ops;

struct sched {
	struct sched_params p;
	const struct sched_policy_ops *ops;
	/* The policy a reload asked for, taken up once nothing is in flight
	 * (sched.c, policy_switch); NULL: none asked. */
	const struct sched_policy_ops *next_ops;
	struct tenant_table tenants;
	struct sched_link all_queues;	/* every queue, detached ones until freed */
	struct sched_link all_groups;	/* every group, detached ones until freed */
	size_t nqueues_alloc;		/* on all_queues: wq has room for them */
	uint64_t next_queue_id;

	uint32_t inflight, pending;
	struct sched_link flight;	/* requests at the store, not hung: oldest dispatch first */
	struct sched_link hung_reqs;	/* requests at the store past hung_after_ns */
	uint64_t hung_after_ns;		/* time at the store past which a request is hung (sched.c) */
	uint64_t flight_max_ns[2];	/* longest completed time at the store: this window, the last */
	uint64_t flight_window_ns;	/* when this window began */
	uint32_t hung;			/* on hung_reqs: in inflight, not against the depth */
	uint64_t hung_tally;		/* one per sched_held_by_hung, to count each queue once */
	uint32_t nbusy;			/* busy queues */
	uint32_t nmulti;		/* queues with 2+ requests queued or in flight */
	uint32_t async_inflight;	/* async requests at the store, not hung */
	uint64_t last_sync_ns;		/* last sync arrival, 0: none yet */
	uint64_t dispatch_seq, inject_seq;	/* requests dispatched, injected so far */
	uint64_t waker_inject_seq;	/* of those injected, as a waker */
	uint64_t arrival_seq;		/* requests enqueued so far */

	/* Sum over time of (time passed / requests in flight), in ns <<
	 * STORE_SHARE_SHIFT: a request's store share is its advance over the
	 * request's flight. */
	uint64_t store_share, store_share_last_ns;
	uint64_t last_complete_ns;	/* the store's last completion */
	/* Most requests queued for others while a deep queue waited for its
	 * next ones, since sched_take_held_beside_deep (sched_note_deep_waits). */
	uint32_t held_beside_deep;

	struct store_rate rate;
	struct store_depth depth;
	struct door_probe door;
	struct recent_completion recent[RECENT_COMPLETIONS];
	uint32_t recent_next;

	/* bfq */
	struct wf2q wq;			/* queues out of service: busy, or parked away */
	uint64_t max_finish_vt;		/* largest finish tag given out */
	struct sched_queue *in_service;	/* NULL: none */
	struct slice slice;
	struct sched_link sync_queues;	/* queues whose head request is a barrier */
	struct sched_link away_queues;	/* QUEUE_AWAY, by away_until_ns */
	struct sched_link gap_queues;	/* the QUEUE_IN_GAP queues */
	struct sched_link reserve_queues;	/* shallow queues gone idle, oldest first */
	uint32_t reserved_slots;	/* their reserved sum (capped where used) */
	uint64_t reserved_wsum;		/* their weights */
	uint64_t short_wsum;		/* weights of the short queues */
	uint32_t short_depth;		/* the most they lately had at once */

	/* fifo */
	struct sched_link fifo_reqs;	/* every queued request, arrival order */
};

/* ---- the policy ----
 *
 * The public entry points do what every policy does (counting, learning
 * think times and wakers) and leave the rest to the policy: */
struct sched_policy_ops {
	/* r joined q; q->pending and s->pending already count it. */
	void (*enqueue)(struct sched *s, struct sched_queue *q, struct sched_req *r,
			uint64_t now_ns);
	/* The next request for the store, which has a free slot; NULL: none now. */
	struct sched_req *(*dispatch)(struct sched *s, uint64_t now_ns);
	/* The store is done with r: all of the completion's bookkeeping, with
	 * sched_req_finish and sched_req_settle. */
	void (*complete)(struct sched *s, struct sched_req *r, uint64_t now_ns);
	uint64_t (*next_deadline)(const struct sched *s);
	void (*timer)(struct sched *s, uint64_t now_ns);
	/* q left the tenant table and is marked detached. */
	void (*detach)(struct sched *s, struct sched_queue *q);
	/* For a change of policy, with nothing in flight: every queued request
	 * onto handed in arrival order, and the policy's state let go, so that
	 * another policy can take the queues as sched_queue_get left them. */
	void (*leave)(struct sched *s, struct sched_link *handed);
};

/* Moves from's requests into into, both in arrival order (enqueue_ns),
 * keeping from's order among its own. */
void sched_merge_by_arrival(struct sched_link *into, struct sched_link *from);

extern const struct sched_policy_ops sched_bfq_ops;
extern const struct sched_policy_ops sched_fifo_ops;

static inline bool queue_busy(const struct sched_queue *q)
{
	return q->pending || q->inflight;
}

static inline bool queue_deep(const struct sched_queue *q)
{
	return q->depth != QUEUE_SHALLOW;
}

/* Requests that may be at the store at once: max_inflight, or the depth it
 * was seen to serve (learn.c). */
static inline uint32_t sched_depth_limit(const struct sched *s)
{
	return s->depth.limit ? s->depth.limit : s->p.max_inflight;
}

/* Requests at the store that hold the depth: hung ones have left it
 * (sched.c, mark_hung), though they still count against their own
 * tenant's cap. Every count of the depth in use is this one: a count
 * with the hung in it keeps the others out of slots the hung left them. */
static inline uint32_t sched_depth_held(const struct sched *s)
{
	return s->inflight - s->hung;
}

static inline uint32_t sched_free_slots(const struct sched *s)
{
	uint32_t limit = sched_depth_limit(s);
	uint32_t held = sched_depth_held(s);
	return held < limit ? limit - held : 0;
}

/* Windows of a fixed width for "this window and the last" estimates: where
 * now_ns stands against the window starting at *start_ns, which moves to
 * now_ns when it is not the same window any more. */
enum window_step {
	WINDOW_SAME,	/* still the current window */
	WINDOW_NEXT,	/* the next one: the current becomes the last */
	WINDOW_STALE,	/* later still: the current is too old to be the last */
};

static inline enum window_step window_step(uint64_t *start_ns, uint64_t now_ns, uint64_t width_ns)
{
	uint64_t since = now_ns - *start_ns;
	if (since < width_ns)
		return WINDOW_SAME;
	*start_ns = now_ns;
	return since < 2 * width_ns ? WINDOW_NEXT : WINDOW_STALE;
}

static inline bool req_is_rw(const struct sched_req *r)
{
	return r->op == SCHED_OP_READ || r->op == SCHED_OP_WRITE;
}

static inline struct sched_queue *queue_of_ent(struct wf2q_entity *e)
{
	return e ? (struct sched_queue *)((char *)e - offsetof(struct sched_queue, ent)) : NULL;
}

/* Its oldest queued request (bfq), NULL if none. */
static inline struct sched_req *queue_head(struct sched_queue *q)
{
	return sched_list_first_entry(&q->reqs, struct sched_req, link);
}

/* sched.c: per request, for every policy. */
/* q's request r goes to the store (no longer counted as pending). */
void sched_req_start(struct sched *s, struct sched_queue *q, struct sched_req *r, uint64_t now_ns);
/* The store gave r back: the counters. Returns r's store share in ns. */
uint64_t sched_req_finish(struct sched *s, struct sched_req *r, uint64_t now_ns);
/* The store time r needs where it is known beforehand (sched_req.need_ns,
 * or the store's cost model), in store-share ns; 0: not known. */
uint64_t sched_req_need_ns(const struct sched *s, const struct sched_req *r);
/* The store share sum brought up to now_ns. */
uint64_t sched_store_share_now(struct sched *s, uint64_t now_ns);
/* After the policy's own learning from the completion, which needs the
 * state before it: what every policy learns from it (q's completion time,
 * wakers, the rate) and q's busy count. Returns true when q is no longer
 * busy. */
bool sched_req_settle(struct sched *s, struct sched_queue *q, const struct sched_req *r,
		      uint64_t now_ns);
/* Frees a detached queue once nothing refers to it any more. */
void sched_queue_free_if_done(struct sched *s, struct sched_queue *q);

/* table.c */
int sched_table_init(struct tenant_table *t);
void sched_table_destroy(struct tenant_table *t);
struct sched_queue *sched_table_find(const struct tenant_table *t, uint64_t tenant_id);
/* Room for one more queue first: -ENOMEM. */
int sched_table_reserve(struct tenant_table *t);
void sched_table_insert(struct tenant_table *t, struct sched_queue *q);
void sched_table_remove(struct tenant_table *t, struct sched_queue *q);

/* tree.c */
/* A queue or group goes active (counts in its parent's sum) or idle; the
 * shares on its path are recomputed and pushed into wq. */
void sched_tree_activate(struct sched *s, struct sched_node *n);
void sched_tree_deactivate(struct sched *s, struct sched_node *n);
/* Its share of the store as its parent's children stand now. */
uint64_t sched_tree_share(const struct sched_node *n);
/* q is freed: its parent may be too. */
void sched_tree_queue_gone(struct sched_queue *q);
void sched_tree_free_all(struct sched *s);

/* learn.c */
/* A request arrives at q, not counted yet: if q was not busy, its think
 * time and its waker; if it was, it is not one request at a time. */
void sched_learn_arrival(struct sched *s, struct sched_queue *q, uint64_t arrival_ns,
			 uint64_t now_ns);
/* q's completion time (think time), tenant and time (wakers), bytes (rate). */
void sched_learn_completion(struct sched *s, struct sched_queue *q, const struct sched_req *r,
			    uint64_t now_ns);
/* Before q's completion time moves. Returns true when q's cycle was slowed
 * by injection. */
bool sched_learn_cycle(struct sched *s, struct sched_queue *q, const struct sched_req *r,
		       uint64_t now_ns);
void sched_learn_inject_limit(struct sched *s, struct sched_queue *q, const struct sched_req *r,
			      bool cycle_was_slowed, uint64_t now_ns);
/* At an arrival, and when a deep queue ran out of requests (idled or held
 * for, or away): while one waits so, the most requests queued for others
 * (sched_take_held_beside_deep). */
void sched_note_deep_waits(struct sched *s);
/* The limit on requests in flight now: during a depth probe, half. */
uint32_t sched_depth_now(struct sched *s, uint64_t now_ns);

/* door.c: whether g's holding door is shut now; the door let someone in
 * for g; a completion, counted for the door's probe. */
bool sched_door_shut(struct sched *s, struct sched_queue *g, uint64_t now_ns);
/* Forgets every probe and what it decided: work_conserving changed. */
void sched_door_forget(struct sched *s);
void sched_door_used(struct sched *s, struct sched_queue *g, uint64_t now_ns);
void sched_door_completion(struct sched *s, struct sched_queue *q, const struct sched_req *r,
			   uint64_t now_ns);
/* How many others' requests may be at the store while g is idled for. */
uint32_t sched_inject_limit(struct sched *s, struct sched_queue *g, uint64_t now_ns);

/* bfq.c, for deep.c, idle.c and reserve.c */
/* weight's share of max_inflight in a sum of weights wsum, rounded up, at least 1. */
uint32_t sched_depth_share(const struct sched *s, uint64_t weight, uint64_t wsum);
/* q's share of the depth, with what the short queues leave. */
uint32_t sched_bfq_cap(const struct sched *s, const struct sched_queue *q);
void sched_bfq_weight_drop(struct sched *s, struct sched_queue *q);
/* Whether q's head request may take a free slot (async depth). */
bool sched_bfq_head_fits(const struct sched *s, struct sched_queue *q, uint64_t now_ns);
/* Dispatches q's head request; kind < 0: served in its own right, else the
 * enum sched_inject rule that let it in. */
struct sched_req *sched_bfq_take(struct sched *s, struct sched_queue *q, int kind,
				 uint64_t now_ns);

/* reserve.c: slots kept free for shallow queues gone idle lately. */
/* q gets a request (counted already): it leaves the reserve. */
void sched_reserve_arrival(struct sched *s, struct sched_queue *q);
/* q is no longer busy: remembered, with the slots it used. */
void sched_reserve_join(struct sched *s, struct sched_queue *q, uint64_t now_ns);
void sched_reserve_leave(struct sched *s, struct sched_queue *q);
/* Forgets the queues remembered longer than reserve_window_ns. */
void sched_reserve_expire(struct sched *s, uint64_t now_ns);
/* Whether q's next request may take a free slot: one of the kept ones only
 * while q is within its share of the depth. */
bool sched_reserve_fits(const struct sched *s, const struct sched_queue *q);

/* idle.c */
/* After q's head changed: on sched.sync_queues while its head is a barrier. */
void sched_sync_list_update(struct sched *s, struct sched_queue *q);
/* Whether to idle for q, in service and with nothing queued. */
bool sched_idle_worthy(const struct sched *s, const struct sched_queue *q);
void sched_idle_begin(struct sched *s, struct sched_queue *q, uint64_t now_ns);
/* The in-service queue uses the store again, or loses it: no more idling
 * (counted in its idle_ns) or holding. */
void sched_slice_serve(struct sched *s, uint64_t now_ns);
/* g is in service with nothing queued: someone else's request, or NULL. */
struct sched_req *sched_inject(struct sched *s, struct sched_queue *g, uint64_t now_ns);

/* deep.c */
/* q just went to the store: deep from now on if it has enough in flight. */
void sched_deep_note(struct sched *s, struct sched_queue *q, uint64_t now_ns);
/* After q was weighed or dropped, or its most at once changed: short of its
 * share of the depth or not. */
void sched_depth_short_update(struct sched *s, struct sched_queue *q);
/* After q's counts or in-service status changed: in or out of a gap. */
void sched_gap_update(struct sched *s, struct sched_queue *q);
bool sched_gap_guarded(const struct sched *s, const struct sched_queue *q);
/* The slots deep q would take back now: up to the most it has had queued
 * and in flight at once lately, within its cap. */
uint32_t sched_deep_claim(const struct sched *s, const struct sched_queue *q);
/* Deep q has not had as many requests at once as its cap lately. */
bool sched_deep_under_share(const struct sched *s, const struct sched_queue *q);
/* q ran empty at a completion: away if deep, else shallow again. */
void sched_deep_emptied(struct sched *s, struct sched_queue *q, uint64_t now_ns);
/* The policy leaves (a reload's change): q shallow, out of the away and
 * gap lists, whatever it was. */
void sched_deep_forget(struct sched *s, struct sched_queue *q);
/* An away queue gets a request: it is back, still deep. */
void sched_away_return(struct sched *s, struct sched_queue *q);
/* The away windows that ended by now_ns. */
void sched_away_timer(struct sched *s, uint64_t now_ns);
uint64_t sched_away_deadline(const struct sched *s);
/* q is detached: an away queue is idle at once. */
void sched_away_detach(struct sched *s, struct sched_queue *q);

#endif
