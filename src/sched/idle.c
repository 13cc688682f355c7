/* While the queue in service cannot use the store (it ran empty and is
 * idled for, or it is deep and holds the store): whether to idle for it at
 * all, and whom to let in meanwhile (injection), in order of how little
 * harm they do to it. Part of the BFQ policy (bfq.c). */
#include "sched_internal.h"

/* ---- barriers ---- */

static bool req_is_barrier(const struct sched *s, const struct sched_req *r)
{
	if (r->op == SCHED_OP_FSYNC || r->op == SCHED_OP_FDATASYNC)
		return true;
	return r->op == SCHED_OP_WRITE && r->sync && r->bytes <= s->p.small_sync_write_bytes;
}

/* Only a queue whose head is a barrier is listed: injecting from the middle
 * would reorder a tenant's own requests (an fsync before its writes). */
void sched_sync_list_update(struct sched *s, struct sched_queue *q)
{
	struct sched_req *head = queue_head(q);
	bool want = head && req_is_barrier(s, head);
	if (want == sched_list_linked(&q->sync_link))
		return;
	if (want)
		sched_list_add_tail(&s->sync_queues, &q->sync_link);
	else
		sched_list_remove(&q->sync_link);
}


/* ---- idling ---- */

static uint64_t idle_window_ns(const struct sched *s, const struct sched_queue *q)
{
	if (s->p.idle_fixed_ns)
		return s->p.idle_fixed_ns;
	/* long enough for its next request to reach the scheduler */
	uint64_t w = q->think.return_ns * s->p.idle_think_pct / 100;
	if (w < s->p.idle_min_ns)
		w = s->p.idle_min_ns;
	return w > s->p.idle_max_ns ? s->p.idle_max_ns : w;
}

/* Everyone else has at most one request outstanding (none deep between
 * batches or away), together weighing at least as much as q: q's next
 * request will find the store free, and the others cannot take its share,
 * so idling for it only makes them wait. A dsync writer next to a depth-1
 * reader is such a case: idled for, the writer gains nothing and the
 * reader waits out every idle window. A q heavier than them is still idled
 * for: on a serial store that is what earns its weight. */
static bool peers_one_at_a_time(const struct sched *s, const struct sched_queue *q)
{
	uint64_t others_wsum = s->wq.wsum - (q->weighed ? q->ent.weight : 0);
	uint32_t others_multi = s->nmulti - (q->pending + q->inflight >= 2 ? 1u : 0u);
	return !others_multi && sched_list_empty(&s->away_queues) &&
	       sched_list_empty(&s->gap_queues) &&
	       others_wsum >= q->ent.weight;
}

/* Idling costs the whole store's throughput for a while, so it is only
 * spent to keep a promise: a sync tenant that will be back soon, while
 * someone else is competing. A fixed window (idle_fixed_ns) skips the
 * think-time test: next to a rate-limited tenant, whose think time is
 * long, it idles the store away and starves the free tenant. */
bool sched_idle_worthy(const struct sched *s, const struct sched_queue *q)
{
	if (!s->p.idle_enable || q->detached || !q->last_sync)
		return false;
	if (s->nbusy <= (queue_busy(q) ? 1u : 0u))
		return false;
	if (s->p.idle_fixed_ns)
		return true;
	if (peers_one_at_a_time(s, q))
		return false;
	if (!q->think.samples)
		return true;
	/* Judged by how soon it comes back when the others let it: their load
	 * stretching its think time must not cost it its idle window. */
	uint64_t think = q->think.alone_samples && q->think.alone_ns < q->think.think_ns
				 ? q->think.alone_ns : q->think.think_ns;
	return think * s->p.idle_think_pct / 100 <= s->p.idle_max_ns;
}

void sched_idle_begin(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	s->slice.state = SLICE_IDLING;
	s->slice.idle_start_ns = now_ns;
	s->slice.idle_deadline_ns = now_ns + idle_window_ns(s, q);
	q->stats.idle_windows++;
	sched_note_deep_waits(s);
}

void sched_slice_serve(struct sched *s, uint64_t now_ns)
{
	if (s->slice.state == SLICE_IDLING)
		s->in_service->stats.idle_ns += now_ns - s->slice.idle_start_ns;
	s->slice.state = SLICE_SERVING;
}

/* ---- injection ---- */

static struct sched_req *inject_general(struct sched *s, struct sched_queue *o, uint64_t now_ns)
{
	if (!o || !sched_bfq_head_fits(s, o, now_ns))
		return NULL;
	return sched_bfq_take(s, o, SCHED_INJECT_GENERAL, now_ns);
}

/* Every door of injection admits only a queue that virtual time says is
 * owed service, at most a slice of its own ahead, or first in line (nobody
 * eligible, its start the smallest): injected service is charged like any
 * other, but a tenant let in whenever the one in service idles would
 * otherwise take what its weight gives others (a weight-1 stream of small
 * sync writes injected as barriers, over and over, ahead of a backlogged
 * third tenant). First in line, it takes nothing anyone else is owed. */
static bool inject_owed(struct sched *s, struct sched_queue *o)
{
	if (sched_wf2q_owed(&s->wq, &o->ent))
		return true;
	return &o->ent == sched_wf2q_peek(&s->wq, WF2Q_WAITING) &&
	       !sched_wf2q_peek(&s->wq, WF2Q_ELIGIBLE) && !sched_gap_guarded(s, o) &&
	       sched_wf2q_early_ok(&s->wq, &o->ent);
}

/* The first owed queue whose head is a barrier, moved to the back of the
 * list: barrier queues take turns. */
static struct sched_req *inject_barrier(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	struct sched_link *l;
	sched_list_foreach(l, &s->sync_queues) {
		struct sched_queue *b = sched_list_entry(l, struct sched_queue, sync_link);
		if (b == g || !inject_owed(s, b))
			continue;
		sched_list_remove(&b->sync_link);
		sched_list_add_tail(&s->sync_queues, &b->sync_link);
		return sched_bfq_take(s, b, SCHED_INJECT_SYNC, now_ns);
	}
	return NULL;
}

/* g holds the store: nothing of it waits on a waker, and its gap is not the
 * others' to take. Barriers are short, and the others' service is what
 * virtual time says they are owed; but a g that has not lately had its cap
 * at once cannot use all of its share, and the slots past those it would
 * take back go to whoever is first in line (work conservation), or a deep
 * tenant under its share leaves the store partly idle while it holds.
 * Unless the door is shut (work_conserving, door.c): then not to one more
 * than a slice ahead of its share. Slots are not the store's room: where
 * the store serves fewer than max_inflight at once, those slots queue in
 * it beside g's and take g's share (two 16-deep readers at 400:100 came
 * out 1:1 with the door open). */
static struct sched_req *inject_holding(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	struct sched_req *r = inject_barrier(s, g, now_ns);
	if (r)
		return r;
	struct wf2q_entity *e = sched_wf2q_peek(&s->wq, WF2Q_ELIGIBLE);
	if (!e && sched_deep_under_share(s, g) && sched_free_slots(s) > sched_deep_claim(s, g)) {
		e = sched_wf2q_peek(&s->wq, WF2Q_WAITING);
		if (e && !sched_wf2q_ahead_ok(&s->wq, e)) {
			if (sched_door_shut(s, g, now_ns))
				e = NULL;
			else
				sched_door_used(s, g, now_ns);
		}
	}
	return inject_general(s, queue_of_ent(e), now_ns);
}

/* Over-served queues may use what nobody else can (work conservation), but
 * not while deep queues in a gap outweigh them, nor beyond what wf2q allows
 * next to parked queues, nor more than a slice ahead of a deep g: g would
 * be owed more than its callers can take back (the CPU they need goes to
 * the others' requests), and its away window would end with everything it
 * was owed forgiven. */
static struct wf2q_entity *inject_ahead(struct sched *s, const struct sched_queue *g)
{
	struct wf2q_entity *e = sched_wf2q_peek(&s->wq, WF2Q_WAITING);
	if (e && (sched_gap_guarded(s, queue_of_ent(e)) || !sched_wf2q_early_ok(&s->wq, e) ||
		  (queue_deep(g) && !sched_wf2q_ahead_ok(&s->wq, e))))
		return NULL;
	return e;
}

/* g is in service with nothing queued. */
struct sched_req *sched_inject(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	if (!s->p.inject_enable || g->cycle.quiet_left)
		return NULL;
	if (s->slice.state == SLICE_HOLDING)
		return inject_holding(s, g, now_ns);
	/* g is idled for, which a shallow g keeps doing slice after slice when
	 * it never uses its budget: virtual time must still move on to the
	 * others, or none of them is ever owed anything while g waits. Not for
	 * a deep g: it is away or between batches, and keeps its place. */
	if (!queue_deep(g))
		sched_wf2q_catch_up(&s->wq);
	/* its waker: what the idled tenant is actually waiting for */
	if (g->waker.known) {
		struct sched_queue *w = sched_table_find(&s->tenants, g->waker.id);
		if (w && w != g && w->pending && inject_owed(s, w))
			return sched_bfq_take(s, w, SCHED_INJECT_WAKER, now_ns);
	}
	/* short barriers, which journal-style writers wait on */
	struct sched_req *r = inject_barrier(s, g, now_ns);
	if (r)
		return r;
	/* anyone, while the idled tenant's own service does not suffer */
	if (sched_depth_held(s) - (g->inflight - g->hung) >= sched_inject_limit(s, g, now_ns))
		return NULL;
	struct wf2q_entity *e = sched_wf2q_peek(&s->wq, WF2Q_ELIGIBLE);
	return inject_general(s, queue_of_ent(e ? e : inject_ahead(s, g)), now_ns);
}

