/* Scheduler policy: the BFQ mechanisms (budgets, charging, dispatch depth,
 * idling, injection) on top of the B-WF2Q+ engine in wf2q.c, plus the fifo
 * baseline and the tenant table. */
#include "fusesched/sched.h"
#include "wf2q.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>

#define NS_PER_S 1000000000ull
/* Fraction bits of the store_share clock: a 32-deep store's 1/32 of a
 * nanosecond is kept, and the clock wraps only after 2^48 ns (78 hours),
 * which unsigned differences survive anyway. */
#define STORE_SHARE_SHIFT 16
#define RECENT_COMPLETIONS 4u

struct sched_queue {
	struct wf2q_entity ent;
	uint64_t tenant_id;
	struct sched_queue *hnext;		/* tenant table chain */
	struct sched_queue *anext, *aprev;	/* all queues, incl. removed ones */
	struct sched_queue *snext, *sprev;	/* sync-injection candidates */
	bool on_sync_list, active, removed, last_sync, has_completed;
	bool deep;				/* held hold_depth_pct of its share since it went busy */
	bool in_gap;				/* deep, out of service, queue dry, I/O at the store */
	bool away;				/* deep, every request back with its callers */
	uint64_t away_until_ns;
	struct sched_queue *wnext, *wprev;	/* away list, by away_until_ns; parked in wq */
	struct sched_req *head, *tail;
	uint32_t pending, inflight;

	uint64_t budget_bytes, slice_service_bytes;
	uint64_t last_complete_ns, think_ns;
	uint32_t think_samples;
	/*
	 * Its think time and cycle (think plus service) while it had the store
	 * to itself: through FUSE the others' requests slow a tenant mostly in
	 * the CPU its callers need between requests, which service time alone
	 * does not show (see cycle_learn).
	 */
	uint64_t think_alone_ns;
	uint32_t think_alone_samples;
	bool cycle_open;			/* emptied at its last completion */
	bool cycle_shared;			/* others were at the store then */
	uint64_t cycle_dispatch_seq, cycle_inject_seq, cycle_waker_seq; /* sched's counters then */
	uint64_t cycle_base_ns;			/* 0: never seen alone */
	uint32_t quiet_left;			/* cycles still to run with nobody injected */
	uint64_t quiet_start_ns;
	uint64_t last_end_offset;
	uint32_t seek_score;			/* 0..1024, EWMA of "was a seek" */
	uint64_t svc_base_ns;			/* service time with nothing else in flight */
	uint64_t svc_min_ns;
	uint32_t svc_samples;
	uint32_t inject_limit;
	uint64_t inject_zero_ns;		/* when the limit last dropped to 0 */
	uint64_t waker_cand;
	uint32_t waker_cand_hits;
	uint64_t waker_cand_first_ns;
	uint32_t waker_misses;
	bool has_waker;
	uint64_t waker_id;
	uint64_t waker_spurned_id;		/* injected as its waker, it slowed it down */
	uint64_t waker_spurned_until_ns;

	uint64_t served_ops, served_bytes, charged_bytes, idle_windows, idle_ns;
	uint64_t injected_ops[SCHED_INJECT_NR];
	uint64_t expirations[SCHED_EXPIRE_NR];
};

struct recent_completion {
	uint64_t tenant_id, at_ns;
};

struct sched {
	struct sched_params p;
	struct wf2q wq;
	struct sched_queue **buckets;
	size_t nbuckets, nqueues, nalloc;
	uint64_t next_id;
	struct sched_queue *all;
	struct sched_queue *sync_head, *sync_tail;
	struct sched_queue *away_head, *away_tail;
	struct sched_req *fifo_head, *fifo_tail;

	struct sched_queue *in_service;
	uint64_t slice_start_ns;
	bool idling;
	bool holding;				/* in service, empty, deep in flight */
	uint64_t idle_start_ns, idle_deadline_ns;
	uint64_t max_finish_vt;

	uint32_t inflight, pending, nbusy, async_inflight;
	uint64_t dispatch_seq, inject_seq;	/* requests dispatched, injected so far */
	uint64_t waker_inject_seq;		/* of those injected, as a waker */
	uint64_t gap_wsum;			/* weights of the queues in_gap */
	uint32_t nmulti;			/* queues with 2+ requests queued or in flight */
	uint64_t last_sync_ns;			/* last sync arrival, 0: none yet */
	struct recent_completion recent[RECENT_COMPLETIONS];
	uint32_t recent_next;

	uint64_t peak_rate, slot_rate;		/* bytes/s: whole store, one request */
	uint64_t peak_win_start_ns, peak_win_bytes;
	uint64_t max_budget_bytes;
	/* Sum over time of (time passed / requests in flight), in ns <<
	 * STORE_SHARE_SHIFT: the store time each request in flight had as its
	 * own share. A request's share is the clock's advance over its flight. */
	uint64_t store_share, store_share_last_ns;
};

void sched_params_default(struct sched_params *p)
{
	*p = (struct sched_params){
		.policy = SCHED_POLICY_BFQ,
		.max_inflight = 32,
		.default_weight = SCHED_WEIGHT_DEFAULT,
		.budget_timeout_ns = 20000000,
		.budget_min_bytes = 64 << 10,
		.budget_initial_bytes = 256 << 10,
		.budget_max_bytes = 64 << 20,
		.peak_window_ns = 2000000,
		.idle_enable = true,
		.idle_fixed_ns = 0,
		.idle_min_ns = 20000,
		.idle_max_ns = 1000000,
		.idle_think_pct = 200,
		.inject_enable = true,
		.small_sync_write_bytes = 16 << 10,
		.inject_slowdown_pct = 150,
		.inject_reprobe_ns = 100000000,
		.quiet_every_ns = 1000000000,
		.waker_gap_ns = 1000000,
		.waker_hits = 3,
		.waker_window_ns = 1000000000,
		.seek_distance_bytes = 128 << 10,
		.charge_seeky_by_time = true,
		.hold_depth_pct = 50,
		.hold_min_inflight = 4,
		.away_window_ns = 20000000,
		.async_depth_pct = 90,
		.async_sync_window_ns = 100000000,
	};
}

static bool weight_valid(uint32_t w)
{
	return w >= SCHED_WEIGHT_MIN && w <= SCHED_WEIGHT_MAX;
}

static int params_check(const struct sched_params *p)
{
	if (p->policy != SCHED_POLICY_BFQ && p->policy != SCHED_POLICY_FIFO)
		return -EINVAL;
	if (!p->max_inflight || !weight_valid(p->default_weight) || !p->budget_timeout_ns)
		return -EINVAL;
	if (!p->budget_min_bytes || p->budget_min_bytes > p->budget_initial_bytes ||
	    p->budget_initial_bytes > p->budget_max_bytes)
		return -EINVAL;
	if (!p->peak_window_ns || p->idle_min_ns > p->idle_max_ns || !p->idle_think_pct)
		return -EINVAL;
	if (p->inject_slowdown_pct < 100 || !p->waker_hits || !p->async_depth_pct ||
	    p->async_depth_pct > 100)
		return -EINVAL;
	return 0;
}

int sched_new(const struct sched_params *p, struct sched **out)
{
	int err = params_check(p);
	if (err)
		return err;
	struct sched *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->p = *p;
	sched_wf2q_init(&s->wq);
	s->nbuckets = 64;
	s->buckets = calloc(s->nbuckets, sizeof(*s->buckets));
	if (!s->buckets) {
		free(s);
		return -ENOMEM;
	}
	s->max_budget_bytes = p->budget_initial_bytes;
	*out = s;
	return 0;
}

void sched_free(struct sched *s)
{
	if (!s)
		return;
	while (s->all) {
		struct sched_queue *q = s->all;
		s->all = q->anext;
		free(q);
	}
	sched_wf2q_destroy(&s->wq);
	free(s->buckets);
	free(s);
}

/* ---- tenant table ---- */

static size_t bucket_of(uint64_t id, size_t n)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (size_t)(id & (n - 1));
}

static int table_grow(struct sched *s)
{
	size_t n = s->nbuckets * 2;
	struct sched_queue **b = calloc(n, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < s->nbuckets; i++) {
		struct sched_queue *q = s->buckets[i];
		while (q) {
			struct sched_queue *nx = q->hnext;
			size_t j = bucket_of(q->tenant_id, n);
			q->hnext = b[j];
			b[j] = q;
			q = nx;
		}
	}
	free(s->buckets);
	s->buckets = b;
	s->nbuckets = n;
	return 0;
}

struct sched_queue *sched_queue_find(const struct sched *s, uint64_t tenant_id)
{
	struct sched_queue *q = s->buckets[bucket_of(tenant_id, s->nbuckets)];
	while (q && q->tenant_id != tenant_id)
		q = q->hnext;
	return q;
}

int sched_queue_get(struct sched *s, uint64_t tenant_id, uint32_t weight,
		    struct sched_queue **out)
{
	if (!weight)
		weight = s->p.default_weight;
	if (!weight_valid(weight))
		return -EINVAL;
	struct sched_queue *q = sched_queue_find(s, tenant_id);
	if (q) {
		*out = q;
		return 0;
	}
	if (s->nqueues >= s->nbuckets && table_grow(s))
		return -ENOMEM;
	if (sched_wf2q_reserve(&s->wq, s->nalloc + 1))
		return -ENOMEM;
	q = calloc(1, sizeof(*q));
	if (!q)
		return -ENOMEM;
	q->tenant_id = tenant_id;
	q->ent.weight = weight;
	q->ent.id = s->next_id++;
	q->ent.heap_pos = -1;
	q->ent.start_vt = q->ent.finish_vt = s->wq.vtime;
	q->budget_bytes = s->p.budget_initial_bytes;
	q->inject_limit = 1;
	size_t b = bucket_of(tenant_id, s->nbuckets);
	q->hnext = s->buckets[b];
	s->buckets[b] = q;
	q->anext = s->all;
	if (s->all)
		s->all->aprev = q;
	s->all = q;
	s->nqueues++;
	s->nalloc++;
	*out = q;
	return 0;
}

static void table_unlink(struct sched *s, struct sched_queue *q)
{
	struct sched_queue **pp = &s->buckets[bucket_of(q->tenant_id, s->nbuckets)];
	while (*pp && *pp != q)
		pp = &(*pp)->hnext;
	if (*pp) {
		*pp = q->hnext;
		s->nqueues--;
	}
}

/* A removed queue lives on until its last request is done, so the engine
 * never holds a request whose queue is gone. */
static void queue_maybe_free(struct sched *s, struct sched_queue *q)
{
	if (!q->removed || q->pending || q->inflight || q->away || q == s->in_service)
		return;
	if (q->aprev)
		q->aprev->anext = q->anext;
	else
		s->all = q->anext;
	if (q->anext)
		q->anext->aprev = q->aprev;
	s->nalloc--;
	free(q);
}

/* ---- helpers ---- */

static bool queue_busy(const struct sched_queue *q)
{
	return q->pending || q->inflight;
}

static struct sched_queue *queue_of(struct wf2q_entity *e)
{
	return e ? (struct sched_queue *)((char *)e - offsetof(struct sched_queue, ent)) : NULL;
}

static bool req_is_sync_barrier(const struct sched *s, const struct sched_req *r)
{
	if (r->op == SCHED_OP_FSYNC || r->op == SCHED_OP_FDATASYNC)
		return true;
	return r->op == SCHED_OP_WRITE && r->sync && r->bytes <= s->p.small_sync_write_bytes;
}

static void sync_list_del(struct sched *s, struct sched_queue *q)
{
	if (!q->on_sync_list)
		return;
	if (q->sprev)
		q->sprev->snext = q->snext;
	else
		s->sync_head = q->snext;
	if (q->snext)
		q->snext->sprev = q->sprev;
	else
		s->sync_tail = q->sprev;
	q->snext = q->sprev = NULL;
	q->on_sync_list = false;
}

/* Only a queue whose head is a barrier is listed: injecting from the middle
 * would reorder a tenant's own requests (an fsync before its writes). */
static void sync_list_update(struct sched *s, struct sched_queue *q)
{
	bool want = q->head && req_is_sync_barrier(s, q->head);
	if (want == q->on_sync_list)
		return;
	if (!want) {
		sync_list_del(s, q);
		return;
	}
	q->sprev = s->sync_tail;
	q->snext = NULL;
	if (s->sync_tail)
		s->sync_tail->snext = q;
	else
		s->sync_head = q;
	s->sync_tail = q;
	q->on_sync_list = true;
}

static uint32_t queue_cap(const struct sched *s, const struct sched_queue *q)
{
	uint64_t wsum = s->wq.wsum ? s->wq.wsum : q->ent.weight;
	uint64_t cap = ((uint64_t)s->p.max_inflight * q->ent.weight + wsum - 1) / wsum;
	return cap ? (uint32_t)cap : 1;
}

/* A sync tenant that has used a good part of its share of the dispatch depth
 * since it went busy: when its queue runs dry while it still has I/O at the
 * store, its callers are busy with completions, it is not done. Like idling,
 * only for sync I/O: holding for writeback would make small readers wait
 * for a streaming writer's whole backlog at the store (lesson 3). */
static void deep_note(struct sched *s, struct sched_queue *q)
{
	if (!q->deep && q->last_sync && s->p.hold_depth_pct &&
	    q->inflight >= s->p.hold_min_inflight &&
	    (uint64_t)q->inflight * 100 >= (uint64_t)queue_cap(s, q) * s->p.hold_depth_pct)
		q->deep = true;
}

/* Deep tenants in such a gap while out of service, at least as heavy
 * together as the tenant that would use it: the in-service tenant's cap
 * stays hard and over-served tenants get nothing beyond their share, or the
 * gap would go to them. A lighter tenant's gap does not hold back a heavier
 * one: its share is kept by virtual time. */
static bool gap_guarded(const struct sched *s, const struct sched_queue *q)
{
	return s->gap_wsum && s->gap_wsum >= q->ent.weight;
}

static void gap_update(struct sched *s, struct sched_queue *q)
{
	bool want = q->deep && !q->pending && q->inflight && q != s->in_service;
	if (want != q->in_gap) {
		q->in_gap = want;
		if (want)
			s->gap_wsum += q->ent.weight;
		else
			s->gap_wsum -= q->ent.weight;
	}
}

static uint64_t idle_window_ns(const struct sched *s, const struct sched_queue *q)
{
	if (s->p.idle_fixed_ns)
		return s->p.idle_fixed_ns;
	uint64_t w = q->think_ns * s->p.idle_think_pct / 100;
	if (w < s->p.idle_min_ns)
		w = s->p.idle_min_ns;
	return w > s->p.idle_max_ns ? s->p.idle_max_ns : w;
}

/* Everyone else has at most one request outstanding (none deep between
 * batches or away), together weighing at least as much as q: q's next
 * request will find the store free, and the others cannot take its share,
 * so idling for it only makes them wait. Dsync writer next to a depth-1
 * reader on the real mount: idled for, the writer gained nothing and the
 * reader fell to 0.65 of its fifo rate (p99 4 ms against 0.26 ms). A q
 * heavier than them is still idled for: on a serial store that is what
 * earns its weight. */
static bool peers_one_at_a_time(const struct sched *s, const struct sched_queue *q)
{
	uint64_t others_wsum = s->wq.wsum - (q->active ? q->ent.weight : 0);
	uint32_t others_multi = s->nmulti - (q->pending + q->inflight >= 2 ? 1u : 0u);
	return !others_multi && !s->away_head && !s->gap_wsum && others_wsum >= q->ent.weight;
}

/* Idling costs the whole store's throughput for a while, so it is only
 * spent to keep a promise: a sync tenant that will be back soon, while
 * someone else is competing. A fixed window (idle_fixed_ns) skips the
 * think-time test, which is what starved the free tenant in lesson 2. */
static bool queue_idle_worthy(const struct sched *s, const struct sched_queue *q)
{
	if (!s->p.idle_enable || q->removed || !q->last_sync)
		return false;
	if (s->nbusy <= (queue_busy(q) ? 1u : 0u))
		return false;
	if (s->p.idle_fixed_ns)
		return true;
	if (peers_one_at_a_time(s, q))
		return false;
	if (!q->think_samples)
		return true;
	/* Judged by how soon it comes back when the others let it: their load
	 * stretching its think time must not cost it its idle window. */
	uint64_t think = q->think_alone_samples && q->think_alone_ns < q->think_ns
				 ? q->think_alone_ns : q->think_ns;
	return think * s->p.idle_think_pct / 100 <= s->p.idle_max_ns;
}

static void vt_note_finish(struct sched *s, const struct sched_queue *q)
{
	if (sched_wf2q_before(s->max_finish_vt, q->ent.finish_vt))
		s->max_finish_vt = q->ent.finish_vt;
}

/* Service moves virtual time; a queue served outside its own slice (injected,
 * or charged late at completion) has its tags pushed by the same amount, so
 * weights hold over time however the service was obtained. */
static void queue_charge(struct sched *s, struct sched_queue *q, uint64_t bytes)
{
	if (!bytes)
		return;
	q->charged_bytes += bytes;
	if (q == s->in_service) {
		q->slice_service_bytes += bytes;
	} else {
		uint64_t d = sched_wf2q_vt_len(bytes, q->ent.weight);
		q->ent.start_vt += d;
		q->ent.finish_vt += d;
		sched_wf2q_reposition(&s->wq, &q->ent);
		vt_note_finish(s, q);
	}
	sched_wf2q_advance(&s->wq, bytes);
}

/* A queue counts in the sum of weights while it has requests queued or at
 * the store, and a deep one while it is away: through FUSE a deep tenant's
 * queue drains for a moment whenever its callers are slow to send the next
 * batch, and if it stopped counting, virtual time would race ahead with the
 * others' service and it would come back having lost its place. */
static void queue_weight_add(struct sched *s, struct sched_queue *q)
{
	if (q->active)
		return;
	/* Everyone went idle: nobody carries old debt or credit forward. */
	if (!s->wq.wsum && sched_wf2q_before(s->wq.vtime, s->max_finish_vt))
		s->wq.vtime = s->max_finish_vt;
	q->active = true;
	s->wq.wsum += q->ent.weight;
}

static void queue_weight_drop(struct sched *s, struct sched_queue *q)
{
	if (!q->active || queue_busy(q) || q->away || q == s->in_service)
		return;
	q->active = false;
	s->wq.wsum -= q->ent.weight;
}

/* Away: a deep sync tenant whose every request is back with its callers
 * (the whole batch completed and was replied to; its callers have not sent
 * the next yet, or are waiting for a CPU on a loaded host). It is still
 * saturating, not idle: for away_window_ns it keeps its weight in the sum
 * and its place in virtual time (parked in wq), and V does not jump past
 * that place, so what others are served meanwhile is charged against their
 * share, not against its; none runs more than a slice ahead of it
 * (sched_wf2q_early_ok). On the real mount a light tenant took the heavy
 * one's share in every such gap, often several per millisecond under load,
 * and 8:1 came out 3:1 to 7:1; with the place kept but the others free to
 * run ahead without bound, one stall past the window still wiped out all
 * they were ahead (8:1 at 6.4-7.4 with two CPU hogs running, 7.7-8.7 with
 * the bound). */
static void away_begin(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	/* The in-service queue is parked when its slice ends (queue_expire):
	 * its finish is settled only then. */
	if (q != s->in_service)
		sched_wf2q_park(&s->wq, &q->ent);
	q->away = true;
	q->away_until_ns = now_ns + s->p.away_window_ns;
	q->wprev = s->away_tail;
	q->wnext = NULL;
	if (s->away_tail)
		s->away_tail->wnext = q;
	else
		s->away_head = q;
	s->away_tail = q;
}

static void away_unlink(struct sched *s, struct sched_queue *q)
{
	if (q->wprev)
		q->wprev->wnext = q->wnext;
	else
		s->away_head = q->wnext;
	if (q->wnext)
		q->wnext->wprev = q->wprev;
	else
		s->away_tail = q->wprev;
	q->wnext = q->wprev = NULL;
	q->away = false;
	sched_wf2q_remove(&s->wq, &q->ent);
}

/* The window passed: it is idle after all, and loses the place as any
 * emptied queue does. */
static void away_end(struct sched *s, struct sched_queue *q)
{
	away_unlink(s, q);
	q->deep = false;
	queue_weight_drop(s, q);
	queue_maybe_free(s, q);
}

/* back: the queue returns from being away, so it keeps its place even if V
 * passed it; the service it missed meanwhile is owed to it. */
static void queue_activate(struct sched *s, struct sched_queue *q, bool back)
{
	queue_weight_add(s, q);
	/* An emptied queue keeps its finish until V passes it: no gain from
	 * going idle and coming back. */
	if (!back && sched_wf2q_before(q->ent.finish_vt, s->wq.vtime))
		q->ent.start_vt = s->wq.vtime;
	else
		q->ent.start_vt = q->ent.finish_vt;
	q->ent.finish_vt = q->ent.start_vt + sched_wf2q_vt_len(q->budget_bytes, q->ent.weight);
	vt_note_finish(s, q);
	sched_wf2q_insert(&s->wq, &q->ent);
}

static void idle_stop(struct sched *s, uint64_t now_ns)
{
	if (!s->idling)
		return;
	s->idling = false;
	s->in_service->idle_ns += now_ns - s->idle_start_ns;
}

static void budget_feedback(struct sched *s, struct sched_queue *q, enum sched_expire why)
{
	uint64_t b = q->budget_bytes;
	switch (why) {
	case SCHED_EXPIRE_EXHAUSTED:	/* it had more to do: give it more */
		b *= 2;
		break;
	case SCHED_EXPIRE_TIMEOUT:	/* slow, not greedy: keep it */
	case SCHED_EXPIRE_PREEMPTED:
		break;
	default:			/* emptied, too idle: it needed what it used */
		b = q->slice_service_bytes;
		break;
	}
	if (b > s->max_budget_bytes)
		b = s->max_budget_bytes;
	if (b < s->p.budget_min_bytes)
		b = s->p.budget_min_bytes;
	q->budget_bytes = b;
}

static void queue_expire(struct sched *s, struct sched_queue *q, enum sched_expire why,
			 uint64_t now_ns)
{
	idle_stop(s, now_ns);
	s->holding = false;
	q->expirations[why]++;
	budget_feedback(s, q, why);
	q->ent.finish_vt = q->ent.start_vt + sched_wf2q_vt_len(q->slice_service_bytes, q->ent.weight);
	vt_note_finish(s, q);
	s->in_service = NULL;
	gap_update(s, q);
	if (q->pending) {
		q->ent.start_vt = q->ent.finish_vt;
		q->ent.finish_vt = q->ent.start_vt + sched_wf2q_vt_len(q->budget_bytes, q->ent.weight);
		vt_note_finish(s, q);
		sched_wf2q_insert(&s->wq, &q->ent);
	} else if (q->away) {
		sched_wf2q_park(&s->wq, &q->ent);
	} else {
		queue_weight_drop(s, q);
		queue_maybe_free(s, q);
	}
}

/* Budget and timeout are only judged while the tenant has requests: ending
 * a slice while it thinks would hand the store to whoever is queued, with
 * virtual time jumping to them, and the idle window would buy nothing. */
static bool slice_over(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	enum sched_expire why;
	if (g->pending && g->slice_service_bytes >= g->budget_bytes)
		why = SCHED_EXPIRE_EXHAUSTED;
	else if (g->pending && now_ns - s->slice_start_ns >= s->p.budget_timeout_ns)
		why = SCHED_EXPIRE_TIMEOUT;
	else if (s->idling && now_ns >= s->idle_deadline_ns)
		why = SCHED_EXPIRE_TOO_IDLE;
	else if (!g->pending && !g->inflight && !s->idling)
		why = SCHED_EXPIRE_EMPTIED;
	else
		return false;
	queue_expire(s, g, why, now_ns);
	return true;
}

static void slice_begin_with(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	sched_wf2q_remove(&s->wq, &q->ent);
	queue_weight_add(s, q);
	s->in_service = q;
	gap_update(s, q);
	s->slice_start_ns = now_ns;
	q->slice_service_bytes = 0;
}

/* Away queues are parked in wq: V does not jump past their places, so a
 * queue served while they are away is served ahead of its time (at most a
 * slice), and it is charged for that when they are back. */
static struct sched_queue *slice_begin(struct sched *s, uint64_t now_ns)
{
	struct sched_queue *q = queue_of(sched_wf2q_select(&s->wq));
	if (q)
		slice_begin_with(s, q, now_ns);
	return q;
}

static struct sched_req *queue_pop(struct sched *s, struct sched_queue *q)
{
	struct sched_req *r = q->head;
	q->head = r->next;
	if (q->head)
		q->head->prev = NULL;
	else
		q->tail = NULL;
	r->next = r->prev = NULL;
	q->pending--;
	s->pending--;
	return r;
}

/* Before the number in flight changes: the time since the last change was
 * shared by that many requests. */
static void store_share_advance(struct sched *s, uint64_t now_ns)
{
	if (s->inflight && now_ns > s->store_share_last_ns)
		s->store_share += ((now_ns - s->store_share_last_ns) << STORE_SHARE_SHIFT) / s->inflight;
	s->store_share_last_ns = now_ns;
}

static void req_start(struct sched *s, struct sched_queue *q, struct sched_req *r, uint64_t now_ns)
{
	store_share_advance(s, now_ns);
	r->store_share_start = s->store_share;
	r->dispatch_ns = now_ns;
	r->others_inflight = s->inflight - q->inflight;
	s->dispatch_seq++;
	q->inflight++;
	s->inflight++;
	s->async_inflight += !r->sync;
	if (s->p.policy == SCHED_POLICY_BFQ)
		deep_note(s, q);
	if (r->bytes && (r->op == SCHED_OP_READ || r->op == SCHED_OP_WRITE)) {
		uint64_t dist = r->offset > q->last_end_offset ? r->offset - q->last_end_offset
							       : q->last_end_offset - r->offset;
		uint32_t seek = dist > s->p.seek_distance_bytes ? 1024u : 0u;
		q->seek_score = (q->seek_score * 7 + seek) / 8;
		q->last_end_offset = r->offset + r->bytes;
	}
}

/* kind < 0: served in its own right (in service, or fifo). */
static struct sched_req *queue_take(struct sched *s, struct sched_queue *q, int kind,
				    uint64_t now_ns)
{
	struct sched_req *r = queue_pop(s, q);
	req_start(s, q, r, now_ns);
	r->charge_bytes = (r->op == SCHED_OP_READ || r->op == SCHED_OP_WRITE) ? r->bytes : 0;
	if (kind >= 0) {
		q->injected_ops[kind]++;
		s->inject_seq++;
		s->waker_inject_seq += kind == SCHED_INJECT_WAKER;
	}
	sync_list_update(s, q);
	queue_charge(s, q, r->charge_bytes);
	if (q == s->in_service) {
		if (q->pending)
			;
		else if (q->deep && q->last_sync)
			s->holding = true;
		else if (!queue_idle_worthy(s, q))
			queue_expire(s, q, SCHED_EXPIRE_EMPTIED, now_ns);
	} else if (!q->pending) {
		sched_wf2q_remove(&s->wq, &q->ent);	/* still counted: in flight */
	}
	gap_update(s, q);
	return r;
}

/* Writeback (async) may not take the last slots while someone has issued
 * sync requests recently: a small sync reader then finds a free slot instead
 * of waiting for a streaming writer's request to finish (lesson 3). */
static bool queue_head_fits(const struct sched *s, const struct sched_queue *q, uint64_t now_ns)
{
	if (q->head->sync || !s->last_sync_ns || now_ns - s->last_sync_ns > s->p.async_sync_window_ns)
		return true;
	uint32_t depth = s->p.max_inflight * s->p.async_depth_pct / 100;
	return s->async_inflight < (depth ? depth : 1);
}

/* While the in-service queue cannot use the store, others may, in order of
 * how little harm they do to it. */
static struct sched_req *inject(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	if (!s->p.inject_enable || g->quiet_left)
		return NULL;
	if (s->holding) {
		/* g still has the store busy: nothing of it waits on a waker, and
		 * its gap is not the others' to take. Barriers are short, and the
		 * others' service is what virtual time says they are owed. */
		if (s->sync_head && s->sync_head != g)
			return queue_take(s, s->sync_head, SCHED_INJECT_SYNC, now_ns);
		struct sched_queue *o = queue_of(sched_wf2q_peek(&s->wq, WF2Q_ELIGIBLE));
		if (!o || !queue_head_fits(s, o, now_ns))
			return NULL;
		return queue_take(s, o, SCHED_INJECT_GENERAL, now_ns);
	}
	/* (a) its waker: what the idled tenant is actually waiting for */
	if (g->has_waker) {
		struct sched_queue *w = sched_queue_find(s, g->waker_id);
		if (w && w != g && w->pending)
			return queue_take(s, w, SCHED_INJECT_WAKER, now_ns);
	}
	/* (b) short barriers that journal-style writers wait on (lesson 1) */
	if (s->sync_head && s->sync_head != g)
		return queue_take(s, s->sync_head, SCHED_INJECT_SYNC, now_ns);
	/* (c) anyone, while the idled tenant's own service time does not suffer */
	if (g->svc_base_ns && !g->inject_limit && now_ns - g->inject_zero_ns >= s->p.inject_reprobe_ns)
		g->inject_limit = 1;
	uint32_t limit = g->svc_base_ns ? g->inject_limit : 0;
	if (limit > s->p.max_inflight - 1)
		limit = s->p.max_inflight - 1;
	if (s->inflight - g->inflight >= limit)
		return NULL;
	struct wf2q_entity *e = sched_wf2q_peek(&s->wq, WF2Q_ELIGIBLE);
	if (!e) {	/* work conservation: over-served queues may use what nobody else can */
		e = sched_wf2q_peek(&s->wq, WF2Q_WAITING);
		/* ... but not far ahead of a deep tenant, idled for here or away:
		 * it would be owed more than its callers can take back (the CPU
		 * they need goes to the others' requests), and the window ends
		 * with everything it was owed forgiven. Two CPU hogs next to the
		 * real mount: the light tenant ran 58 MB ahead, 8:1 came out 6.4. */
		if (e && (gap_guarded(s, queue_of(e)) || !sched_wf2q_early_ok(&s->wq, e) ||
			  (g->deep && !sched_wf2q_ahead_ok(&s->wq, e))))
			return NULL;
	}
	if (!e || !queue_head_fits(s, queue_of(e), now_ns))
		return NULL;
	return queue_take(s, queue_of(e), SCHED_INJECT_GENERAL, now_ns);
}

static struct sched_req *fifo_dispatch(struct sched *s, uint64_t now_ns)
{
	struct sched_req *r = s->fifo_head;
	if (!r)
		return NULL;
	s->fifo_head = r->next;
	if (s->fifo_head)
		s->fifo_head->prev = NULL;
	else
		s->fifo_tail = NULL;
	r->next = NULL;
	struct sched_queue *q = r->queue;
	q->pending--;
	s->pending--;
	req_start(s, q, r, now_ns);
	r->charge_bytes = r->bytes;
	q->charged_bytes += r->bytes;
	return r;
}

struct sched_req *sched_dispatch(struct sched *s, uint64_t now_ns)
{
	if (s->inflight >= s->p.max_inflight)
		return NULL;
	if (s->p.policy == SCHED_POLICY_FIFO)
		return fifo_dispatch(s, now_ns);
	struct sched_queue *g = s->in_service;
	if (g && slice_over(s, g, now_ns))
		g = NULL;
	if (!g)
		g = slice_begin(s, now_ns);
	if (!g)
		return NULL;
	if (!g->pending)
		return inject(s, g, now_ns);
	/* Past its share of the dispatch depth, the in-service tenant yields
	 * free slots to tenants still owed service, so one deep tenant cannot
	 * fill the store ahead of everyone (lesson 3). The cap is soft: a store
	 * that nobody else is owed is not left idle. */
	bool fits = queue_head_fits(s, g, now_ns);
	if (!fits || g->inflight >= queue_cap(s, g)) {
		struct sched_queue *o = queue_of(sched_wf2q_peek(&s->wq, WF2Q_ELIGIBLE));
		if (o && queue_head_fits(s, o, now_ns)) {
			struct sched_req *r = queue_take(s, o, -1, now_ns);
			/* A heavier tenant is owed the store: the lighter one stops
			 * adding to the queue in front of it (S5 on a serial store). */
			if (o->ent.weight > g->ent.weight) {
				queue_expire(s, g, SCHED_EXPIRE_PREEMPTED, now_ns);
				slice_begin_with(s, o, now_ns);
			}
			return r;
		}
	}
	if (g->inflight >= queue_cap(s, g) && gap_guarded(s, g))
		return NULL;
	return fits ? queue_take(s, g, -1, now_ns) : NULL;
}

/* ---- arrivals ---- */

/* A waker is a tenant whose completion keeps preceding our arrival: the
 * journal thread that a dsync writer waits for (lesson 1). */
static void waker_detect(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	/* The gap scales with the tenant's own think time: a tenant that
	 * thinks 20 us is not woken by a completion 1 ms ago, and a busy
	 * neighbour that completes all the time must not look like a waker. */
	uint64_t gap = s->p.waker_gap_ns;
	if (q->think_samples && q->think_ns / 2 < gap)
		gap = q->think_ns / 2;
	const struct recent_completion *newest = NULL;
	bool cand_hit = false, waker_hit = false;
	for (uint32_t i = 0; i < RECENT_COMPLETIONS; i++) {
		const struct recent_completion *c = &s->recent[i];
		if (!c->at_ns || c->tenant_id == q->tenant_id || now_ns - c->at_ns > gap)
			continue;
		cand_hit |= q->waker_cand_hits && c->tenant_id == q->waker_cand;
		waker_hit |= q->has_waker && c->tenant_id == q->waker_id;
		if (!newest || newest->at_ns < c->at_ns)
			newest = c;
	}
	if (q->has_waker) {	/* a waker that stopped waking is forgotten */
		q->waker_misses = waker_hit ? 0 : q->waker_misses + 1;
		if (q->waker_misses >= s->p.waker_hits)
			q->has_waker = false;
	}
	if (cand_hit && now_ns - q->waker_cand_first_ns <= s->p.waker_window_ns) {
		q->waker_cand_hits++;
	} else if (newest) {
		q->waker_cand = newest->tenant_id;
		q->waker_cand_hits = 1;
		q->waker_cand_first_ns = now_ns;
	} else {
		q->waker_cand_hits = 0;
		return;
	}
	if (q->waker_cand_hits >= s->p.waker_hits &&
	    (q->waker_cand != q->waker_spurned_id || now_ns >= q->waker_spurned_until_ns)) {
		q->has_waker = true;
		q->waker_id = q->waker_cand;
		q->waker_misses = 0;
	}
}

void sched_enqueue(struct sched *s, struct sched_req *r, uint64_t now_ns)
{
	struct sched_queue *q = r->queue;
	r->enqueue_ns = now_ns;
	r->next = r->prev = NULL;
	bool back = q->away;
	if (back)
		away_unlink(s, q);
	if (!queue_busy(q)) {
		if (q->has_completed) {
			uint64_t think = now_ns - q->last_complete_ns;
			q->think_ns = q->think_samples ? (q->think_ns * 7 + think) / 8 : think;
			q->think_samples++;
			if (q->cycle_open && !q->cycle_shared && s->dispatch_seq == q->cycle_dispatch_seq) {
				q->think_alone_ns = q->think_alone_samples
							    ? (q->think_alone_ns * 7 + think) / 8 : think;
				q->think_alone_samples++;
			}
		}
		waker_detect(s, q, now_ns);
		s->nbusy++;
	} else {
		q->cycle_open = false;	/* more than one at a time: no think-time cycle */
	}
	q->last_sync = r->sync;
	if (r->sync)
		s->last_sync_ns = now_ns ? now_ns : 1;
	s->nmulti += q->pending + q->inflight == 1;
	q->pending++;
	s->pending++;
	if (s->p.policy == SCHED_POLICY_FIFO) {
		r->prev = s->fifo_tail;
		if (s->fifo_tail)
			s->fifo_tail->next = r;
		else
			s->fifo_head = r;
		s->fifo_tail = r;
		return;
	}
	r->prev = q->tail;
	if (q->tail)
		q->tail->next = r;
	else
		q->head = r;
	q->tail = r;
	if (q->pending > 1)
		return;
	gap_update(s, q);
	sync_list_update(s, q);
	if (q == s->in_service) {
		idle_stop(s, now_ns);
		s->holding = false;
		return;
	}
	queue_activate(s, q, back);
	/* A heavier tenant that is owed service does not wait for a lighter
	 * one's slice to end (BFQ's preemption on weight). */
	struct sched_queue *g = s->in_service;
	if (g && q->ent.weight > g->ent.weight && !sched_wf2q_before(s->wq.vtime, q->ent.start_vt))
		queue_expire(s, g, SCHED_EXPIRE_PREEMPTED, now_ns);
}

/* ---- completions ---- */

static void rate_learn(struct sched *s, const struct sched_req *r, uint64_t svc_ns, uint64_t now_ns)
{
	if (r->bytes && (r->op == SCHED_OP_READ || r->op == SCHED_OP_WRITE) && svc_ns) {
		uint64_t one = r->bytes * NS_PER_S / svc_ns;
		/* rise quickly, never fall: the store's capability, not its load */
		if (one > s->slot_rate)
			s->slot_rate += (one - s->slot_rate) / 8 + 1;
	}
	if (!s->peak_win_start_ns || now_ns < s->peak_win_start_ns) {
		s->peak_win_start_ns = now_ns;
		s->peak_win_bytes = 0;
	}
	s->peak_win_bytes += r->bytes;
	uint64_t span = now_ns - s->peak_win_start_ns;
	if (span < s->p.peak_window_ns)
		return;
	uint64_t rate = s->peak_win_bytes * NS_PER_S / span;
	if (rate > s->peak_rate) {
		s->peak_rate += (rate - s->peak_rate) / 2 + 1;
		uint64_t mb = s->peak_rate / 1000 * (s->p.budget_timeout_ns / 1000) / 1000;
		if (mb < s->p.budget_min_bytes)
			mb = s->p.budget_min_bytes;
		s->max_budget_bytes = mb > s->p.budget_max_bytes ? s->p.budget_max_bytes : mb;
	}
	s->peak_win_start_ns = now_ns;
	s->peak_win_bytes = 0;
}

/* Barriers move no bytes but hold the store; seeky queues hold it longer
 * than their bytes say. Both pay for the time they really held it, never
 * a minimum tick (lesson 2). */
static uint64_t time_charge_extra(const struct sched *s, const struct sched_queue *q,
				  const struct sched_req *r, uint64_t share_ns)
{
	bool by_time = r->op == SCHED_OP_FSYNC || r->op == SCHED_OP_FDATASYNC ||
		       r->op == SCHED_OP_OTHER ||
		       (s->p.charge_seeky_by_time && q->seek_score > 512);
	if (!by_time)
		return 0;
	/* With others in flight the store was shared: the request pays for
	 * its share of the time (share_ns, split evenly among everything in
	 * flight moment by moment), so waiting behind others is not billed as
	 * use. Dividing its whole service time by the number in flight when
	 * it was dispatched billed the first requests of a batch for the whole
	 * batch: the real mount dispatches 32 at one instant and reaps them
	 * together, and the first were always the tenant in service, so the
	 * heavier a tenant, the more it paid per byte (5:3:1 became 2.7:2.3:1). */
	uint64_t t = share_ns / 1000 * s->slot_rate / 1000000;
	return t > r->charge_bytes ? t - r->charge_bytes : 0;
}

/*
 * A tenant that issues one request at a time, waits, thinks and issues the
 * next, runs at one request per cycle. When the cycles in which others were
 * injected take longer than inject_slowdown_pct of its cycles alone, the
 * injection limit halves and a waker injected in them is forgotten, however
 * fast its requests were served: on a 2-core host a deep reader injected
 * next to a depth-1 one left the store's service time unchanged and cut the
 * depth-1 reader to a tenth of its solo rate, through the CPU its callers
 * waited for. A cycle alone needs the others' requests gone, so every
 * quiet_every_ns the tenant runs quiet cycles with nobody injected until
 * the store has drained and one cycle was alone (at most QUIET_CYCLES).
 * Returns true when slowed. Called for every completion, before
 * last_complete_ns moves.
 */
#define QUIET_CYCLES 8

static bool cycle_learn(struct sched *s, struct sched_queue *q, const struct sched_req *r,
			uint64_t now_ns)
{
	bool open = q->cycle_open && q->has_completed;
	uint64_t cycle = now_ns - q->last_complete_ns;
	bool alone = s->dispatch_seq == q->cycle_dispatch_seq + 1 && !r->others_inflight &&
		     !q->cycle_shared;
	bool injected = s->inject_seq != q->cycle_inject_seq;
	bool waker_injected = s->waker_inject_seq != q->cycle_waker_seq;
	q->cycle_open = !queue_busy(q);
	q->cycle_shared = s->inflight > q->inflight;
	q->cycle_dispatch_seq = s->dispatch_seq;
	q->cycle_inject_seq = s->inject_seq;
	q->cycle_waker_seq = s->waker_inject_seq;
	if (q->quiet_left)
		q->quiet_left = alone && open ? 0 : q->quiet_left - 1;
	if (!open || q != s->in_service)
		return false;
	if (q->cycle_open && !q->quiet_left && s->nbusy > 1 && s->p.quiet_every_ns &&
	    (!q->quiet_start_ns || now_ns - q->quiet_start_ns >= s->p.quiet_every_ns)) {
		q->quiet_left = QUIET_CYCLES;
		q->quiet_start_ns = now_ns ? now_ns : 1;
	}
	if (alone) {
		/* Down fast, up slowly: a cycle alone is stretched by whatever
		 * else the host runs, never shortened. */
		if (!q->cycle_base_ns || cycle < q->cycle_base_ns)
			q->cycle_base_ns = q->cycle_base_ns ? (q->cycle_base_ns + cycle) / 2 : cycle;
		else
			q->cycle_base_ns += (cycle - q->cycle_base_ns) / 16;
		return false;
	}
	if (!injected || !q->cycle_base_ns ||
	    cycle * 100 <= q->cycle_base_ns * s->p.inject_slowdown_pct)
		return false;
	/* A real waker brings the tenant back sooner: this one is a busy
	 * neighbour whose completions happen to precede its requests. */
	if (waker_injected && q->has_waker) {
		q->has_waker = false;
		q->waker_spurned_id = q->waker_id;
		q->waker_spurned_until_ns = now_ns + s->p.waker_window_ns;
	}
	if (q->inject_limit) {
		q->inject_limit /= 2;
		if (!q->inject_limit)
			q->inject_zero_ns = now_ns;
	}
	return true;
}

/* Injection is worth it while the idled tenant's requests do not take
 * longer than inject_slowdown_pct of their service time alone. */
static void inject_learn(struct sched *s, struct sched_queue *q, const struct sched_req *r,
			 uint64_t svc_ns, bool cycle_slowed, uint64_t now_ns)
{
	if (!r->others_inflight) {
		q->svc_base_ns = q->svc_base_ns ? (q->svc_base_ns * 3 + svc_ns) / 4 : svc_ns;
		return;
	}
	/* A tenant that never runs alone takes its fastest as the baseline. */
	if (!q->svc_samples++ || svc_ns < q->svc_min_ns)
		q->svc_min_ns = svc_ns;
	if (!q->svc_base_ns && q->svc_samples >= 16)
		q->svc_base_ns = q->svc_min_ns;
	if (!q->svc_base_ns)
		return;
	if (cycle_slowed)
		return;
	if (svc_ns * 100 <= q->svc_base_ns * s->p.inject_slowdown_pct) {
		if (r->others_inflight >= q->inject_limit)
			q->inject_limit = r->others_inflight + 1 < s->p.max_inflight
						  ? r->others_inflight + 1 : s->p.max_inflight - 1;
		return;
	}
	/* Slowed with k others in flight: at most k - 1 may be injected. More
	 * than the limit in flight means the others had the store in their own
	 * right, which says nothing about injection. */
	if (r->others_inflight > q->inject_limit)
		return;
	q->inject_limit = r->others_inflight - 1;
	if (!q->inject_limit)
		q->inject_zero_ns = now_ns;
}

void sched_complete(struct sched *s, struct sched_req *r, uint64_t now_ns)
{
	struct sched_queue *q = r->queue;
	uint64_t svc = now_ns - r->dispatch_ns;
	store_share_advance(s, now_ns);
	uint64_t share_ns = (s->store_share - r->store_share_start) >> STORE_SHARE_SHIFT;
	s->nmulti -= q->pending + q->inflight == 2;
	q->inflight--;
	s->inflight--;
	s->async_inflight -= !r->sync;
	q->served_ops++;
	q->served_bytes += r->bytes;
	bool cycle_slowed = s->p.policy == SCHED_POLICY_BFQ && cycle_learn(s, q, r, now_ns);
	q->last_complete_ns = now_ns;
	q->has_completed = true;
	if (!queue_busy(q)) {
		s->nbusy--;
		if (q->deep && s->p.away_window_ns && !q->removed)
			away_begin(s, q, now_ns);
		else
			q->deep = false;
	}
	gap_update(s, q);
	s->recent[s->recent_next] = (struct recent_completion){ q->tenant_id, now_ns };
	s->recent_next = (s->recent_next + 1) % RECENT_COMPLETIONS;
	rate_learn(s, r, svc, now_ns);
	if (s->p.policy == SCHED_POLICY_FIFO) {
		queue_maybe_free(s, q);
		return;
	}
	queue_charge(s, q, time_charge_extra(s, q, r, share_ns));
	inject_learn(s, q, r, svc, cycle_slowed, now_ns);
	queue_weight_drop(s, q);
	if (q == s->in_service && !queue_busy(q)) {
		s->holding = false;
		if (queue_idle_worthy(s, q)) {
			s->idling = true;
			s->idle_start_ns = now_ns;
			s->idle_deadline_ns = now_ns + idle_window_ns(s, q);
			q->idle_windows++;
		} else {
			queue_expire(s, q, SCHED_EXPIRE_EMPTIED, now_ns);
		}
		return;
	}
	queue_maybe_free(s, q);
}

/* ---- timers, weights, removal, stats ---- */

uint64_t sched_next_deadline(const struct sched *s)
{
	uint64_t d = s->away_head ? s->away_head->away_until_ns : SCHED_DEADLINE_NONE;
	const struct sched_queue *g = s->in_service;
	uint64_t g_ns = SCHED_DEADLINE_NONE;
	if (s->p.policy != SCHED_POLICY_BFQ || !g)
		return d;
	if (s->idling)
		g_ns = s->idle_deadline_ns;
	else if (g->pending)
		g_ns = s->slice_start_ns + s->p.budget_timeout_ns;
	return g_ns < d ? g_ns : d;
}

void sched_timer(struct sched *s, uint64_t now_ns)
{
	/* The list is in away_until_ns order: one window for everyone. */
	while (s->away_head && s->away_head->away_until_ns <= now_ns)
		away_end(s, s->away_head);
	if (s->p.policy == SCHED_POLICY_BFQ && s->in_service)
		slice_over(s, s->in_service, now_ns);
}

int sched_queue_set_weight(struct sched *s, struct sched_queue *q, uint32_t weight)
{
	if (!weight_valid(weight))
		return -EINVAL;
	uint32_t old = q->ent.weight;
	/* Keep the start tag (the place); rescale only what is left to run. */
	uint64_t len = q->ent.finish_vt - q->ent.start_vt;
	q->ent.finish_vt = q->ent.start_vt + len * old / weight;
	q->ent.weight = weight;
	if (q->in_gap)
		s->gap_wsum = s->gap_wsum - old + weight;
	if (q->active)
		s->wq.wsum = s->wq.wsum - old + weight;
	sched_wf2q_reposition(&s->wq, &q->ent);
	return 0;
}

void sched_queue_remove(struct sched *s, struct sched_queue *q)
{
	table_unlink(s, q);
	q->removed = true;
	if (q->away) {
		away_unlink(s, q);
		q->deep = false;
		queue_weight_drop(s, q);
	}
	/* No clock here: an idle window ends where it started, not counted. */
	if (q == s->in_service && !q->pending && !q->inflight)
		queue_expire(s, q, SCHED_EXPIRE_EMPTIED,
			     s->idling ? s->idle_start_ns : s->slice_start_ns);
	else
		queue_maybe_free(s, q);
}

void sched_queue_stats(const struct sched_queue *q, struct sched_queue_stats *st)
{
	*st = (struct sched_queue_stats){
		.tenant_id = q->tenant_id,
		.weight = q->ent.weight,
		.pending = q->pending,
		.inflight = q->inflight,
		.served_ops = q->served_ops,
		.served_bytes = q->served_bytes,
		.charged_bytes = q->charged_bytes,
		.idle_windows = q->idle_windows,
		.idle_ns = q->idle_ns,
		.budget_bytes = q->budget_bytes,
		.think_ns = q->think_ns,
		.cycle_alone_ns = q->cycle_base_ns,
		.inject_limit = q->inject_limit,
		.has_waker = q->has_waker,
		.waker_id = q->waker_id,
	};
	for (int i = 0; i < SCHED_INJECT_NR; i++)
		st->injected_ops[i] = q->injected_ops[i];
	for (int i = 0; i < SCHED_EXPIRE_NR; i++)
		st->expirations[i] = q->expirations[i];
}

uint64_t sched_peak_rate(const struct sched *s)
{
	return s->peak_rate;
}

uint32_t sched_inflight(const struct sched *s)
{
	return s->inflight;
}

uint32_t sched_pending(const struct sched *s)
{
	return s->pending;
}

uint32_t sched_busy_queues(const struct sched *s)
{
	return s->nbusy;
}
