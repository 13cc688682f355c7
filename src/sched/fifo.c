/* The fifo policy, the baseline bfq is measured against: every request in
 * arrival order, whoever sent it, limited only by max_inflight. No slices,
 * no idling, no timers; requests are charged their bytes. One exception:
 * a tenant with requests hung at the store (sched.c) that already has
 * max_inflight there gets no more until some return. Its hung ones leave
 * the depth to the others, so in arrival order its next requests were
 * dispatched and hung in turn, every slot's worth, until the io_uring
 * workers and executors (then at most 64) all waited on its store. */
#include "sched_internal.h"

static void fifo_enqueue(struct sched *s, struct sched_queue *q, struct sched_req *r,
			 uint64_t now_ns)
{
	(void)q;
	(void)now_ns;
	sched_list_add_tail(&s->fifo_reqs, &r->link);
}

/* Its store hangs for q and q holds a full depth there: its requests wait. */
static bool held_back(const struct sched *s, const struct sched_queue *q)
{
	return q->hung && q->inflight >= s->p.max_inflight;
}

static struct sched_req *fifo_dispatch(struct sched *s, uint64_t now_ns)
{
	struct sched_req *r = NULL;
	for (struct sched_link *l = s->fifo_reqs.next; l != &s->fifo_reqs; l = l->next) {
		struct sched_req *c = sched_list_entry(l, struct sched_req, link);
		if (!s->hung || !held_back(s, c->queue)) {
			r = c;
			break;
		}
	}
	if (!r)
		return NULL;
	struct sched_queue *q = r->queue;
	sched_req_start(s, q, r, now_ns);
	r->charge_bytes = r->bytes;
	q->stats.charged_bytes += r->bytes;
	return r;
}

static void fifo_complete(struct sched *s, struct sched_req *r, uint64_t now_ns)
{
	struct sched_queue *q = r->queue;
	sched_req_finish(s, r, now_ns);
	sched_req_settle(s, q, r, now_ns);
	sched_queue_free_if_done(s, q);
}

static uint64_t fifo_next_deadline(const struct sched *s)
{
	(void)s;
	return SCHED_DEADLINE_NONE;
}

static void fifo_timer(struct sched *s, uint64_t now_ns)
{
	(void)s;
	(void)now_ns;
}

static void fifo_leave(struct sched *s, struct sched_link *handed)
{
	sched_merge_by_arrival(handed, &s->fifo_reqs);
}

const struct sched_policy_ops sched_fifo_ops = {
	.enqueue = fifo_enqueue,
	.dispatch = fifo_dispatch,
	.complete = fifo_complete,
	.next_deadline = fifo_next_deadline,
	.timer = fifo_timer,
	.detach = sched_queue_free_if_done,
	.leave = fifo_leave,
};
