/* BFQ's slot reserve: dispatch slots kept free for tenants that come and go.
 *
 * A tenant of a few requests at a time with think time between them (a
 * service answering its clients, a prober, an interactive user) has nothing
 * queued most of the time, so it is neither idled for (its think time is
 * past idle_max_ns) nor counted in anyone's cap. Meanwhile a deep tenant
 * fills every slot, and the light tenant's next request, however heavy its
 * weight, waits for one of the deep tenant's requests to finish: through
 * FUSE in front of a page cache or a fast disk, milliseconds of a 1 MiB
 * write flood's batch each time.
 *
 * So a shallow queue that went idle is remembered for reserve_window_ns, and
 * while it is, the slots it used (at most its weight's share of the depth)
 * are kept free: no tenant past its own share of the depth (counting the
 * remembered ones as busy) takes the last of them. When it comes back, it
 * leaves the reserve and finds its slot. The total kept is at most
 * reserve_max_pct of max_inflight, so a spray of tenants cannot close the
 * store to a deep one. Deep queues are not remembered here: away (deep.c)
 * keeps their place instead.
 *
 * The window is fixed, so the remembered queues expire in the order they
 * went idle: one list, oldest first. */
#include "sched_internal.h"

/* Of the slots the remembered queues used, those kept: at most
 * reserve_max_pct of max_inflight, at least 1, never every slot. */
static uint32_t reserve_kept(const struct sched *s, uint32_t reserved)
{
	uint32_t most = s->p.max_inflight * s->p.reserve_max_pct / 100;
	if (!most)
		most = 1;
	if (most >= s->p.max_inflight)
		most = s->p.max_inflight - 1;
	return reserved < most ? reserved : most;
}

void sched_reserve_leave(struct sched *s, struct sched_queue *q)
{
	if (!q->reserved)
		return;
	sched_list_remove(&q->reserve_link);
	s->reserved_slots -= q->reserved;
	s->reserved_wsum -= q->reserved_weight;
	q->reserved = 0;
}

void sched_reserve_arrival(struct sched *s, struct sched_queue *q)
{
	sched_reserve_leave(s, q);
	uint32_t depth = q->pending + q->inflight;
	if (depth > q->busy_depth_max)
		q->busy_depth_max = depth;
}

void sched_reserve_join(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	uint32_t used = q->busy_depth_max;
	q->busy_depth_max = 0;
	if (!s->p.reserve_window_ns || q->detached || queue_deep(q) || !used)
		return;
	/* Its share of the depth were it busy beside the busy ones. */
	uint32_t share = sched_depth_share(s, q->ent.weight, s->wq.wsum + q->ent.weight);
	q->reserved = used < share ? used : share;
	q->reserved_weight = q->ent.weight;
	q->reserve_until_ns = now_ns + s->p.reserve_window_ns;
	sched_list_add_tail(&s->reserve_queues, &q->reserve_link);
	s->reserved_slots += q->reserved;
	s->reserved_wsum += q->reserved_weight;
}

void sched_reserve_expire(struct sched *s, uint64_t now_ns)
{
	while (!sched_list_empty(&s->reserve_queues)) {
		struct sched_queue *q = sched_list_first_entry(&s->reserve_queues, struct sched_queue,
							       reserve_link);
		if (q->reserve_until_ns > now_ns)
			break;
		sched_reserve_leave(s, q);
	}
}

/* Only a queue past its share of the depth, counting the remembered queues
 * as if they were busy, is kept out: a light tenant that is here now is
 * not made to wait for one that is not. */
bool sched_reserve_fits(const struct sched *s, const struct sched_queue *q)
{
	if (sched_depth_held(s) + reserve_kept(s, s->reserved_slots) < s->p.max_inflight)
		return true;
	uint64_t wsum = s->wq.wsum + s->reserved_wsum + (q->weighed ? 0 : q->ent.weight);
	return q->inflight < sched_depth_share(s, q->ent.weight, wsum);
}

uint32_t sched_reserved_slots(const struct sched *s, uint64_t now_ns)
{
	uint32_t reserved = 0;
	const struct sched_link *l;
	sched_list_foreach(l, &s->reserve_queues) {
		const struct sched_queue *q = sched_list_entry(l, struct sched_queue, reserve_link);
		if (q->reserve_until_ns > now_ns)
			reserved += q->reserved;
	}
	return reserve_kept(s, reserved);
}
