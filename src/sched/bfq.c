/* The BFQ policy: slices and budgets on top of the B-WF2Q+ order of wf2q.c,
 * charging, the dispatch depth and dispatch. Idling and injection are
 * idle.c, deep queues (holding, gap, away) deep.c, what is learned from
 * requests learn.c. */
#include "sched_internal.h"

/* ---- dispatch depth ---- */

uint32_t sched_depth_share(const struct sched *s, uint64_t weight, uint64_t wsum)
{
	uint64_t share = ((uint64_t)sched_depth_limit(s) * weight + wsum - 1) / wsum;
	return share ? (uint32_t)share : 1;
}

/* q's cap: its weight's share of max_inflight among the weighed queues,
 * where the short ones (deep.c: lately fewer at once than their share) take
 * only the most they had, and leave the rest to the others by weight (one
 * step of max-min fair filling). A heavy tenant of a few requests at once
 * beside deep light ones otherwise kept most of the depth from them that it
 * never used, and the store stood partly idle while they were backlogged. */
uint32_t sched_bfq_cap(const struct sched *s, const struct sched_queue *q)
{
	uint64_t wsum = s->wq.wsum ? s->wq.wsum : q->ent.weight;
	uint32_t share = sched_depth_share(s, q->ent.weight, wsum);
	uint64_t short_wsum = s->short_wsum - q->short_weight;
	uint32_t short_depth = s->short_depth - q->short_depth;
	uint32_t depth = sched_depth_limit(s);
	if (!short_wsum || short_wsum >= wsum || short_depth >= depth)
		return share;
	uint64_t left = depth - short_depth, rest = wsum - short_wsum;
	uint64_t filled = (left * q->ent.weight + rest - 1) / rest;
	if (filled > depth)	/* others' parts not yet brought up to date */
		filled = depth;
	return filled > share ? (uint32_t)filled : share;
}

/* The last free slots are kept for lighter tenants: those remembered by the
 * reserve (reserve.c), and sync ones against writeback: async may not take
 * the last slots while someone has issued sync requests recently, so a
 * small sync reader next to a streaming buffered writer finds a free slot
 * instead of waiting for one of the writer's requests to finish. */
bool sched_bfq_head_fits(const struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	if (!sched_reserve_fits(s, q))
		return false;
	if (queue_head(q)->sync || !s->last_sync_ns ||
	    now_ns - s->last_sync_ns > s->p.async_sync_window_ns)
		return true;
	uint32_t depth = s->p.max_inflight * s->p.async_depth_pct / 100;
	return s->async_inflight < (depth ? depth : 1);
}

/* ---- virtual time and charging ---- */

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
	q->stats.charged_bytes += bytes;
	if (q == s->in_service) {
		q->slice.service_bytes += bytes;
	} else {
		uint64_t d = sched_wf2q_vt_len(bytes, q->ent.weight);
		q->ent.start_vt += d;
		q->ent.finish_vt += d;
		sched_wf2q_reposition(&s->wq, &q->ent);
		vt_note_finish(s, q);
	}
	sched_wf2q_advance(&s->wq, bytes);
}

/* A weight is a share of the store's time, and requests hold the store for
 * very different times per byte: a 4 KiB random read many times longer per
 * byte than a 1 MiB sequential one, a dsync write longer than a buffered
 * one, a barrier moves no bytes at all. So every request pays for the store
 * time it held, at the slot rate (the fastest one request has moved bytes:
 * the store's time in bytes), and never less than its bytes, which it is
 * charged at dispatch. Never a minimum per request, which would bill small
 * fast requests for store time they did not hold. */
static uint64_t time_charge_extra(const struct sched *s, const struct sched_req *r,
				  uint64_t share_ns)
{
	if (!s->p.charge_by_time && r->op != SCHED_OP_FSYNC && r->op != SCHED_OP_FDATASYNC &&
	    r->op != SCHED_OP_OTHER)
		return 0;
	/* With others in flight the store was shared: the request pays for its
	 * store share (its time in flight split evenly, moment by moment, among
	 * everything in flight), so waiting behind others is not billed as use.
	 * Dividing its whole service time by the number in flight at dispatch
	 * would bill the first requests of a batch for the whole batch: the
	 * engine dispatches a batch at one instant and reaps it together, the
	 * first of it are the in-service tenant's, and the heavier a tenant, the
	 * more it would pay per byte. */
	uint64_t need_ns = sched_req_need_ns(s, r);
	if (need_ns)
		share_ns = need_ns;
	uint64_t t = share_ns / 1000 * s->rate.slot_bytes_per_s / 1000000;
	return t > r->charge_bytes ? t - r->charge_bytes : 0;
}

/* A queue counts in the sum of weights while it has requests queued or at
 * the store, and a deep one while it is away: through FUSE a deep tenant's
 * queue drains for a moment whenever its callers are slow to send the next
 * batch, and if it stopped counting, virtual time would race ahead with the
 * others' service and it would come back having lost its place. */
static void queue_weight_add(struct sched *s, struct sched_queue *q)
{
	if (q->weighed)
		return;
	/* Everyone went idle: nobody carries old debt or credit forward. */
	if (!s->wq.wsum && sched_wf2q_before(s->wq.vtime, s->max_finish_vt))
		s->wq.vtime = s->max_finish_vt;
	q->weighed = true;
	s->wq.wsum += q->ent.weight;
	sched_tree_activate(s, &q->node);
	sched_depth_short_update(s, q);
}

void sched_bfq_weight_drop(struct sched *s, struct sched_queue *q)
{
	if (!q->weighed || queue_busy(q) || q->depth == QUEUE_AWAY || q == s->in_service)
		return;
	q->weighed = false;
	sched_wf2q_remove(&s->wq, &q->ent); /* resting */
	s->wq.wsum -= q->ent.weight;
	sched_tree_deactivate(s, &q->node);
	sched_depth_short_update(s, q);
}

/* back: the queue returns from being away, so it keeps its place even if V
 * passed it; the service it missed meanwhile is owed to it. */
static void queue_activate(struct sched *s, struct sched_queue *q, bool back)
{
	sched_wf2q_remove(&s->wq, &q->ent); /* resting */
	queue_weight_add(s, q);
	/* An emptied queue keeps its finish until V passes it: no gain from
	 * going idle and coming back. */
	if (!back && sched_wf2q_before(q->ent.finish_vt, s->wq.vtime))
		q->ent.start_vt = s->wq.vtime;
	else
		q->ent.start_vt = q->ent.finish_vt;
	q->ent.finish_vt = q->ent.start_vt + sched_wf2q_vt_len(q->slice.budget_bytes, q->ent.weight);
	vt_note_finish(s, q);
	sched_wf2q_insert(&s->wq, &q->ent);
}

/* ---- slices ---- */

static void budget_feedback(struct sched *s, struct sched_queue *q, enum sched_expire why)
{
	uint64_t b = q->slice.budget_bytes;
	switch (why) {
	case SCHED_EXPIRE_EXHAUSTED:	/* it had more to do: give it more */
		b *= 2;
		break;
	case SCHED_EXPIRE_TIMEOUT:	/* slow, not greedy: keep it */
	case SCHED_EXPIRE_PREEMPTED:
		break;
	default:			/* emptied, too idle: it needed what it used */
		b = q->slice.service_bytes;
		break;
	}
	if (b > s->rate.max_budget_bytes)
		b = s->rate.max_budget_bytes;
	if (b < s->p.budget_min_bytes)
		b = s->p.budget_min_bytes;
	q->slice.budget_bytes = b;
}

/* q is in service; its slice ends. */
static void queue_expire(struct sched *s, struct sched_queue *q, enum sched_expire why,
			 uint64_t now_ns)
{
	sched_slice_serve(s, now_ns);
	q->stats.expirations[why]++;
	budget_feedback(s, q, why);
	q->ent.finish_vt = q->ent.start_vt + sched_wf2q_vt_len(q->slice.service_bytes, q->ent.weight);
	vt_note_finish(s, q);
	s->in_service = NULL;
	sched_gap_update(s, q);
	if (q->pending) {
		q->ent.start_vt = q->ent.finish_vt;
		q->ent.finish_vt = q->ent.start_vt + sched_wf2q_vt_len(q->slice.budget_bytes, q->ent.weight);
		vt_note_finish(s, q);
		sched_wf2q_insert(&s->wq, &q->ent);
	} else if (q->depth == QUEUE_AWAY) {
		sched_wf2q_park(&s->wq, &q->ent);
	} else {
		sched_bfq_weight_drop(s, q);
		sched_queue_free_if_done(s, q);
	}
}

/* Budget and timeout are only judged while the tenant has requests: ending
 * a slice while it thinks would hand the store to whoever is queued, with
 * virtual time jumping to them, and the idle window would buy nothing. */
static bool slice_over(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	enum sched_expire why;
	bool idling = s->slice.state == SLICE_IDLING;
	if (g->pending && g->slice.service_bytes >= g->slice.budget_bytes)
		why = SCHED_EXPIRE_EXHAUSTED;
	else if (g->pending && now_ns - s->slice.start_ns >= s->p.budget_timeout_ns)
		why = SCHED_EXPIRE_TIMEOUT;
	else if (idling && now_ns >= s->slice.idle_deadline_ns)
		why = SCHED_EXPIRE_TOO_IDLE;
	else if (!g->pending && g->inflight == g->hung && !idling)
		why = SCHED_EXPIRE_EMPTIED; /* nothing, or only hung requests, to wait for */
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
	sched_gap_update(s, q);
	s->slice.start_ns = now_ns;
	q->slice.service_bytes = 0;
}

/* Away queues are parked in wq: V does not jump past their places, so a
 * queue served while they are away is served ahead of its time (at most a
 * slice), and it is charged for that when they are back. */
static struct sched_queue *slice_begin(struct sched *s, uint64_t now_ns)
{
	struct sched_queue *q = queue_of_ent(sched_wf2q_select(&s->wq));
	if (q)
		slice_begin_with(s, q, now_ns);
	return q;
}

/* ---- dispatch ---- */

struct sched_req *sched_bfq_take(struct sched *s, struct sched_queue *q, int kind,
				 uint64_t now_ns)
{
	struct sched_req *r = queue_head(q);
	sched_req_start(s, q, r, now_ns);
	sched_deep_note(s, q, now_ns);
	r->charge_bytes = req_is_rw(r) ? r->bytes : 0;
	q->inflight_charged += r->charge_bytes;
	if (kind >= 0) {
		q->stats.injected_ops[kind]++;
		s->inject_seq++;
		s->waker_inject_seq += kind == SCHED_INJECT_WAKER;
	}
	sched_sync_list_update(s, q);
	queue_charge(s, q, r->charge_bytes);
	if (!q->pending) {
		if (q != s->in_service) {
			/* Still counted: in flight. Served outside a slice of its
			 * own, it was charged for what it used (queue_charge moved
			 * its start); the budget its finish reserved for a slice it
			 * never had is not its debt, or each such visit would cost
			 * a whole budget of virtual time. It rests there until its
			 * next request or its last completion: V does not jump past
			 * it, or light queues waiting behind it would be served
			 * again and again while its requests are out. */
			sched_wf2q_remove(&s->wq, &q->ent);
			q->ent.finish_vt = q->ent.start_vt;
			sched_wf2q_rest(&s->wq, &q->ent);
		}
		else if (queue_deep(q) && q->last_sync) {
			s->slice.state = SLICE_HOLDING;
			sched_note_deep_waits(s);
		}
		else if (!sched_idle_worthy(s, q))
			queue_expire(s, q, SCHED_EXPIRE_EMPTIED, now_ns);
	}
	sched_gap_update(s, q);
	return r;
}

/* The service g's requests at the store have had so far and are not yet
 * charged for: their store share at the slot rate, past the bytes charged
 * at their dispatch. It is charged when they complete. */
static uint64_t held_service(struct sched *s, const struct sched_queue *g, uint64_t now_ns)
{
	if (!g->inflight)
		return 0;
	uint64_t share = (uint64_t)g->inflight * sched_store_share_now(s, now_ns) -
			 g->inflight_share_starts;
	uint64_t t = (share >> STORE_SHARE_SHIFT) / 1000 * s->rate.slot_bytes_per_s / 1000000;
	return t > g->inflight_charged ? t - g->inflight_charged : 0;
}

/* While the store has completed nothing for a budget timeout, or g has
 * requests hung there: the queue first in line that would be owed service
 * were g's requests at the store charged for what they have held so far.
 * A store that stalls charges nothing, V stands still, and a tenant back
 * from a request of its own stays ahead of it while g, past its cap, takes
 * every slot; beside a tenant whose store hangs for it alone, the other's
 * requests complete, and without the hung ones counted each of them waited
 * out g's slice (20-30 ms). Not while completions come otherwise: where
 * the store queues what it is sent (a serial one behind max_inflight),
 * every slot given is a place in its queue, and shares there follow the
 * places (seed 92 of the matrix). */
static struct sched_queue *owed_counting_held(struct sched *s, struct sched_queue *g,
					      uint64_t now_ns)
{
	if (now_ns - s->last_complete_ns < s->p.budget_timeout_ns && !g->hung)
		return NULL;
	struct sched_queue *o = queue_of_ent(sched_wf2q_peek(&s->wq, WF2Q_WAITING));
	if (!o || !s->wq.wsum)
		return NULL;
	unsigned __int128 d = (unsigned __int128)held_service(s, g, now_ns) * WF2Q_SCALE / s->wq.wsum;
	uint64_t v = s->wq.vtime + (d > WF2Q_LEN_MAX ? WF2Q_LEN_MAX : (uint64_t)d);
	return sched_wf2q_before(v, o->ent.start_vt) ? NULL : o;
}

/* Past its cap the in-service tenant g yields free slots to tenants still
 * owed service, so one deep tenant cannot fill the store ahead of everyone
 * (small sync readers behind a streaming writer), counting what its
 * requests at the store have held so far as served. The cap is soft: a
 * store that nobody else is owed is not left idle. */
static struct sched_req *dispatch_yield(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	struct sched_queue *o = queue_of_ent(sched_wf2q_peek(&s->wq, WF2Q_ELIGIBLE));
	if (!o && g->inflight >= sched_bfq_cap(s, g))
		o = owed_counting_held(s, g, now_ns);
	if (!o || !sched_bfq_head_fits(s, o, now_ns))
		return NULL;
	struct sched_req *r = sched_bfq_take(s, o, -1, now_ns);
	/* A heavier tenant is owed the store: the lighter one stops adding to
	 * the queue in front of it (a depth-1 reader of high weight next to a
	 * deep one of low weight, on a serial store). Not a shallow sync one:
	 * it adds only its next request or two, and, at its cap after the
	 * first, would get one request per slice of the heavier tenant. */
	if (o->ent.weight > g->ent.weight && (queue_deep(g) || !g->last_sync)) {
		queue_expire(s, g, SCHED_EXPIRE_PREEMPTED, now_ns);
		slice_begin_with(s, o, now_ns);
	}
	return r;
}

static struct sched_req *bfq_dispatch(struct sched *s, uint64_t now_ns)
{
	sched_reserve_expire(s, now_ns);
	struct sched_queue *g = s->in_service;
	if (g && slice_over(s, g, now_ns))
		g = NULL;
	if (!g)
		g = slice_begin(s, now_ns);
	if (!g)
		return NULL;
	if (!g->pending)
		return sched_inject(s, g, now_ns);
	bool fits = sched_bfq_head_fits(s, g, now_ns);
	if (!fits || g->inflight >= sched_bfq_cap(s, g)) {
		struct sched_req *r = dispatch_yield(s, g, now_ns);
		if (r)
			return r;
	}
	if (g->inflight >= sched_bfq_cap(s, g) && sched_gap_guarded(s, g))
		return NULL;
	return fits ? sched_bfq_take(s, g, -1, now_ns) : NULL;
}

/* ---- arrivals, completions, timers ---- */

static void bfq_enqueue(struct sched *s, struct sched_queue *q, struct sched_req *r,
			uint64_t now_ns)
{
	bool back = q->depth == QUEUE_AWAY;
	if (back)
		sched_away_return(s, q);
	sched_reserve_arrival(s, q);
	sched_list_add_tail(&q->reqs, &r->link);
	if (q->pending > 1)
		return;
	sched_gap_update(s, q);
	sched_sync_list_update(s, q);
	if (q == s->in_service) {
		sched_slice_serve(s, now_ns);
		return;
	}
	queue_activate(s, q, back);
	/* A heavier tenant that is owed service does not wait for a lighter
	 * one's slice to end (BFQ's preemption on weight). */
	struct sched_queue *g = s->in_service;
	if (g && q->ent.weight > g->ent.weight && !sched_wf2q_before(s->wq.vtime, q->ent.start_vt))
		queue_expire(s, g, SCHED_EXPIRE_PREEMPTED, now_ns);
}

static void bfq_complete(struct sched *s, struct sched_req *r, uint64_t now_ns)
{
	struct sched_queue *q = r->queue;
	uint64_t share_ns = sched_req_finish(s, r, now_ns);
	q->inflight_charged -= r->charge_bytes;
	bool cycle_slowed = sched_learn_cycle(s, q, r, now_ns);
	if (sched_req_settle(s, q, r, now_ns)) {
		sched_deep_emptied(s, q, now_ns);
		sched_reserve_join(s, q, now_ns);
	}
	sched_gap_update(s, q);
	queue_charge(s, q, time_charge_extra(s, r, share_ns));
	sched_learn_inject_limit(s, q, r, cycle_slowed, now_ns);
	sched_bfq_weight_drop(s, q);
	if (q == s->in_service && !queue_busy(q)) {
		if (sched_idle_worthy(s, q))
			sched_idle_begin(s, q, now_ns);
		else
			queue_expire(s, q, SCHED_EXPIRE_EMPTIED, now_ns);
		return;
	}
	sched_queue_free_if_done(s, q);
}

static uint64_t bfq_next_deadline(const struct sched *s)
{
	uint64_t d = sched_away_deadline(s);
	const struct sched_queue *g = s->in_service;
	uint64_t g_ns = SCHED_DEADLINE_NONE;
	if (!g)
		return d;
	if (s->slice.state == SLICE_IDLING)
		g_ns = s->slice.idle_deadline_ns;
	else if (g->pending)
		g_ns = s->slice.start_ns + s->p.budget_timeout_ns;
	return g_ns < d ? g_ns : d;
}

static void bfq_timer(struct sched *s, uint64_t now_ns)
{
	sched_away_timer(s, now_ns);
	if (s->in_service)
		slice_over(s, s->in_service, now_ns);
}

static void bfq_detach(struct sched *s, struct sched_queue *q)
{
	sched_away_detach(s, q);
	/* No clock here: an idle window ends where it started, not counted. */
	if (q == s->in_service && !queue_busy(q))
		queue_expire(s, q, SCHED_EXPIRE_EMPTIED,
			     s->slice.state == SLICE_IDLING ? s->slice.idle_start_ns
							    : s->slice.start_ns);
	else
		sched_queue_free_if_done(s, q);
}

/* Every queue back out of virtual time, the tree's active sums and every
 * list, shallow and out of service, as sched_queue_get made it; what was
 * learned of it (think time, cycles, injection limit, budget) is kept.
 * Nothing is in flight but hung requests, which policy_switch has made
 * charged for nothing at dispatch. */
static void bfq_leave(struct sched *s, struct sched_link *handed)
{
	struct sched_link *pos;
	sched_list_foreach(pos, &s->all_queues) {
		struct sched_queue *q = sched_list_entry(pos, struct sched_queue, all_link);
		sched_merge_by_arrival(handed, &q->reqs);
		if (sched_list_linked(&q->sync_link))
			sched_list_remove(&q->sync_link);
		sched_deep_forget(s, q);
		q->inflight_charged = 0;
		sched_reserve_leave(s, q);
		sched_wf2q_remove(&s->wq, &q->ent);
		if (q->weighed) {
			q->weighed = false;
			s->wq.wsum -= q->ent.weight;
			sched_tree_deactivate(s, &q->node);
		}
		sched_depth_short_update(s, q);
		q->slice.service_bytes = 0;
	}
	s->in_service = NULL;
	s->slice = (struct slice){ .state = SLICE_SERVING };
	sched_door_forget(s);
}

const struct sched_policy_ops sched_bfq_ops = {
	.enqueue = bfq_enqueue,
	.dispatch = bfq_dispatch,
	.complete = bfq_complete,
	.next_deadline = bfq_next_deadline,
	.timer = bfq_timer,
	.detach = bfq_detach,
	.leave = bfq_leave,
};
