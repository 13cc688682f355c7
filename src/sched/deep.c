/* BFQ for deep tenants: a sync tenant with a good part of its share of the
 * dispatch depth in flight. When its queue in the daemon runs dry it is not
 * done: its callers are busy with completions (a FUSE round trip, a caller
 * thread waiting for a CPU) and will be back. So
 *   in service, it keeps the store (holding, bfq.c) while its requests are
 *     at the store, and others are let in only as far as they are owed;
 *   out of service, it is in a gap, and while the gapped weigh at least as
 *     much as a tenant, that tenant gets nothing beyond its share;
 *   with every request back, it is away for away_window_ns: it keeps its
 *     weight and its place in virtual time.
 * Only sync tenants: holding for writeback would make small readers wait for
 * a streaming writer's whole backlog at the store. */
#include "sched_internal.h"

/* Every change of q->depth, so that gap_queues stays the gapped queues. */
static void deep_set(struct sched *s, struct sched_queue *q, enum queue_depth d)
{
	if (q->depth == QUEUE_IN_GAP)
		sched_list_remove(&q->gap_link);
	if (d == QUEUE_IN_GAP)
		sched_list_add_tail(&s->gap_queues, &q->gap_link);
	q->depth = d;
}

/* The most a queue has had at once is remembered for a window and the
 * next: long enough to span a deep tenant's batches through FUSE, whose
 * callers come back a few at a time. */
#define DEPTH_WINDOW_NS 1000000000ull

static uint32_t depth_max(const struct sched_queue *q)
{
	return q->depth_max_now > q->depth_max_last ? q->depth_max_now : q->depth_max_last;
}

void sched_deep_note(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	enum window_step step = window_step(&q->depth_window_start_ns, now_ns, DEPTH_WINDOW_NS);
	if (step != WINDOW_SAME) {
		q->depth_max_last = step == WINDOW_NEXT ? q->depth_max_now : 0;
		q->depth_max_now = 0;
	}
	if (q->pending + q->inflight > q->depth_max_now)
		q->depth_max_now = q->pending + q->inflight;
	sched_depth_short_update(s, q);
	if (q->depth == QUEUE_SHALLOW && q->last_sync && s->p.hold_depth_pct &&
	    q->inflight >= s->p.hold_min_inflight &&
	    (uint64_t)q->inflight * 100 >= (uint64_t)sched_bfq_cap(s, q) * s->p.hold_depth_pct)
		deep_set(s, q, QUEUE_DEEP);
}

/* ---- short of its share ----
 *
 * A weighed queue that lately had fewer requests at once than its weight's
 * share of the depth cannot use the rest of that share: the others' caps
 * (sched_bfq_cap) divide it among them. Judged only once a whole window of
 * it was seen: a queue just come is not short, it is starting. Its share
 * is reckoned as the sum of weights stands at its own dispatches and
 * weighing, which is where its part is brought up to date. */

static void short_set(struct sched *s, struct sched_queue *q, uint64_t weight, uint32_t depth)
{
	s->short_wsum += weight - q->short_weight;
	s->short_depth += depth - q->short_depth;
	q->short_weight = weight;
	q->short_depth = depth;
}

void sched_depth_short_update(struct sched *s, struct sched_queue *q)
{
	uint32_t most = depth_max(q);
	if (q->weighed && q->depth_max_last &&
	    most < sched_depth_share(s, q->ent.weight, s->wq.wsum))
		short_set(s, q, q->ent.weight, most);
	else
		short_set(s, q, 0, 0);
}

/* ---- the gap ---- */

uint32_t sched_deep_claim(const struct sched *s, const struct sched_queue *q)
{
	uint32_t cap = sched_bfq_cap(s, q);
	uint32_t most = depth_max(q) < cap ? depth_max(q) : cap;
	return most > q->inflight ? most - q->inflight : 0;
}

bool sched_deep_under_share(const struct sched *s, const struct sched_queue *q)
{
	return depth_max(q) < sched_bfq_cap(s, q);
}

/* Deep tenants in a gap, at least as heavy together as the tenant q that
 * would use it: the in-service tenant's cap stays hard and over-served
 * tenants get nothing beyond their share, or the gap would go to them. A
 * lighter tenant's gap does not hold back a heavier one: its share is kept
 * by virtual time. Only the slots the gapped tenants would take back are
 * held: a dsync writer of 8 jobs with a cap of 10 held its 2 unused slots
 * and the 2 it never used, so that three tenants at their caps left a
 * quarter of the store idle. */
bool sched_gap_guarded(const struct sched *s, const struct sched_queue *q)
{
	uint64_t wsum = 0;
	uint32_t claim = 0;
	const struct sched_link *l;
	sched_list_foreach(l, &s->gap_queues) {
		const struct sched_queue *g = sched_list_entry(l, struct sched_queue, gap_link);
		wsum += g->ent.weight;
		claim += sched_deep_claim(s, g);
	}
	return wsum && wsum >= q->ent.weight && sched_free_slots(s) <= claim;
}

void sched_gap_update(struct sched *s, struct sched_queue *q)
{
	bool want = queue_deep(q) && !q->pending && q->inflight && q != s->in_service;
	if (want && q->depth == QUEUE_DEEP)
		deep_set(s, q, QUEUE_IN_GAP);
	else if (!want && q->depth == QUEUE_IN_GAP)
		deep_set(s, q, QUEUE_DEEP);
}

/* ---- away ----
 *
 * A deep tenant whose every request is back with its callers (the whole
 * batch completed and was replied to; its callers have not sent the next
 * yet, or wait for a CPU on a loaded host) is still saturating, not idle:
 * for away_window_ns it keeps its weight in the sum and its place in
 * virtual time (parked in wq), and V does not jump past that place, so what
 * others are served meanwhile is charged against their share, not against
 * its; none runs more than a slice ahead of it (sched_wf2q_early_ok).
 * Without the kept place a light tenant takes the heavy one's share in every
 * such gap, and on a loaded host there are several per millisecond; without
 * the bound on running ahead, one stall past the window wipes out all that
 * the others were ahead. */

static void away_begin(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	/* The in-service queue is parked when its slice ends (queue_expire):
	 * its finish is settled only then. */
	if (q != s->in_service) {
		sched_wf2q_remove(&s->wq, &q->ent); /* resting */
		sched_wf2q_park(&s->wq, &q->ent);
	}
	deep_set(s, q, QUEUE_AWAY);
	q->away_until_ns = now_ns + s->p.away_window_ns;
	sched_list_add_tail(&s->away_queues, &q->away_link);
	sched_note_deep_waits(s);
}

void sched_deep_emptied(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	if (queue_deep(q) && s->p.away_window_ns && !q->detached)
		away_begin(s, q, now_ns);
	else
		deep_set(s, q, QUEUE_SHALLOW);
}

static void away_leave(struct sched *s, struct sched_queue *q, enum queue_depth d)
{
	sched_list_remove(&q->away_link);
	deep_set(s, q, d);
	sched_wf2q_remove(&s->wq, &q->ent);
}

void sched_deep_forget(struct sched *s, struct sched_queue *q)
{
	if (q->depth == QUEUE_AWAY)
		sched_list_remove(&q->away_link);
	deep_set(s, q, QUEUE_SHALLOW);
}

void sched_away_return(struct sched *s, struct sched_queue *q)
{
	away_leave(s, q, QUEUE_DEEP);
}

void sched_away_detach(struct sched *s, struct sched_queue *q)
{
	if (q->depth != QUEUE_AWAY)
		return;
	away_leave(s, q, QUEUE_SHALLOW);
	sched_bfq_weight_drop(s, q);
}

/* The list is in away_until_ns order: one window for everyone. A queue
 * whose window passed is idle after all, and loses its place as any emptied
 * queue does. */
void sched_away_timer(struct sched *s, uint64_t now_ns)
{
	struct sched_queue *q;
	while ((q = sched_list_first_entry(&s->away_queues, struct sched_queue, away_link)) &&
	       q->away_until_ns <= now_ns) {
		away_leave(s, q, QUEUE_SHALLOW);
		sched_bfq_weight_drop(s, q);
		sched_queue_free_if_done(s, q);
	}
}

uint64_t sched_away_deadline(const struct sched *s)
{
	const struct sched_queue *q =
		sched_list_first_entry(&s->away_queues, const struct sched_queue, away_link);
	return q ? q->away_until_ns : SCHED_DEADLINE_NONE;
}
