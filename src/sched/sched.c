/* The scheduler's public entry points: parameters, the queue lifecycle, and
 * the accounting every policy does per request (counters, the store share
 * sum, what every policy learns). The policy itself (bfq.c, fifo.c) is the
 * struct sched_policy_ops chosen at sched_new. */
#include "sched_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The bound on a request's time at the store past which it is hung, and
 * how it follows the store's own times (learn_hung_bound). */
#define SCHED_HUNG_MAX_NS (5 * UINT64_C(1000000000))
#define SCHED_HUNG_MIN_NS (200 * UINT64_C(1000000))
#define SCHED_HUNG_FACTOR 16
#define SCHED_HUNG_WINDOW_NS (30 * UINT64_C(1000000000))

void sched_params_default(struct sched_params *p)
{
	*p = (struct sched_params){
		.policy = SCHED_POLICY_BFQ,
		.max_inflight = 32,
		.work_conserving = SCHED_DOOR_LEARN,
		.default_weight = SCHED_WEIGHT_DEFAULT,
		.budget_timeout_ns = 20000000,
		.budget_min_bytes = 16 << 10,
		.budget_initial_bytes = 16 << 10,
		.budget_max_bytes = 64 << 10,
		.peak_window_ns = 2000000,
		.idle_enable = true,
		.idle_fixed_ns = 0,
		.idle_min_ns = 20000,
		.idle_max_ns = 1000000,
		.idle_think_pct = 200,
		.inject_enable = true,
		.small_sync_write_bytes = 16 << 10,
		.inject_slowdown_pct = 150,
		.inject_cycle_slowdown_pct = 125,
		.inject_reprobe_ns = 100000000,
		.quiet_every_ns = 1000000000,
		.waker_gap_ns = 1000000,
		.waker_hits = 3,
		.waker_window_ns = 1000000000,
		.charge_by_time = true,
		.hold_depth_pct = 50,
		.hold_min_inflight = 4,
		.away_window_ns = 20000000,
		.async_depth_pct = 90,
		.async_sync_window_ns = 100000000,
		.reserve_window_ns = 1000000000,
		.reserve_max_pct = 12,
	};
}

static const struct sched_policy_ops *policy_ops(enum sched_policy policy)
{
	switch (policy) {
	case SCHED_POLICY_BFQ:
		return &sched_bfq_ops;
	case SCHED_POLICY_FIFO:
		return &sched_fifo_ops;
	}
	return NULL;
}

static bool weight_valid(uint32_t w)
{
	return w >= SCHED_WEIGHT_MIN && w <= SCHED_WEIGHT_MAX;
}

/* Per kind, none or both: requests a second and bytes a second. */
static bool cost_model_valid(const uint32_t iops[SCHED_COST_KINDS],
			     const uint64_t bytes_per_s[SCHED_COST_KINDS])
{
	for (int k = 0; k < SCHED_COST_KINDS; k++)
		if (!iops[k] != !bytes_per_s[k])
			return false;
	return true;
}

static int params_check(const struct sched_params *p)
{
	if (!policy_ops(p->policy))
		return -EINVAL;
	if (!p->max_inflight || !weight_valid(p->default_weight) || !p->budget_timeout_ns)
		return -EINVAL;
	if (!p->budget_min_bytes || p->budget_min_bytes > p->budget_initial_bytes ||
	    p->budget_initial_bytes > p->budget_max_bytes)
		return -EINVAL;
	if (!p->peak_window_ns || p->idle_min_ns > p->idle_max_ns || !p->idle_think_pct)
		return -EINVAL;
	if (p->inject_slowdown_pct < 100 || p->inject_cycle_slowdown_pct < 100 || !p->waker_hits ||
	    !p->async_depth_pct || p->async_depth_pct > 100 || p->reserve_max_pct > 100 ||
	    !cost_model_valid(p->model_iops, p->model_bytes_per_s))
		return -EINVAL;
	return 0;
}

const char *sched_policy_name(enum sched_policy policy)
{
	return policy == SCHED_POLICY_FIFO ? "fifo" : "bfq";
}

void sched_merge_by_arrival(struct sched_link *into, struct sched_link *from)
{
	struct sched_link *at = into->next;
	struct sched_req *r;
	while ((r = sched_list_first_entry(from, struct sched_req, link))) {
		while (at != into &&
		       sched_list_entry(at, struct sched_req, link)->enqueue_ns <= r->enqueue_ns)
			at = at->next;
		sched_list_remove(&r->link);
		sched_list_add_tail(at, &r->link); /* before at */
	}
}

/*
 * A reload's change of policy, once nothing is in flight but hung requests
 * (a request at the store completes under the policy that sent it: each
 * keeps its own accounts of what it dispatched). Hung requests may never
 * return, and waiting for them stopped every tenant's dispatch for as long
 * as one tenant's store hung; they go over to the new policy as requests
 * at the store that nobody was charged for at dispatch (charge_bytes 0),
 * so whichever policy sees them return bills their whole time, as bfq
 * would have. The old policy hands its queued requests over in arrival
 * order and lets go of its state; the new one takes them as arrivals, so
 * each queue is counted again from none.
 */
static void policy_switch(struct sched *s, uint64_t now_ns)
{
	struct sched_link handed, *pos, *tmp;
	sched_list_init(&handed);
	sched_list_foreach(pos, &s->hung_reqs)
		sched_list_entry(pos, struct sched_req, link)->charge_bytes = 0;
	s->ops->leave(s, &handed);
	s->ops = s->next_ops;
	s->next_ops = NULL;
	sched_list_foreach(pos, &s->all_queues)
		sched_list_entry(pos, struct sched_queue, all_link)->pending = 0;
	s->pending = 0;
	struct sched_req *r;
	while ((r = sched_list_first_entry(&handed, struct sched_req, link))) {
		sched_list_remove(&r->link);
		r->queue->pending++;
		s->pending++;
		s->ops->enqueue(s, r->queue, r, now_ns);
	}
	sched_list_foreach_safe(pos, tmp, &s->all_queues)
		sched_queue_free_if_done(s, sched_list_entry(pos, struct sched_queue, all_link));
}

/* Due when a change of policy waits for nothing more: only hung requests
 * (if any) are at the store. */
static bool switch_due(const struct sched *s)
{
	return s->next_ops && s->inflight == s->hung;
}

int sched_reload(struct sched *s, const struct sched_params *p)
{
	struct sched_params next = s->p;
	next.policy = p->policy;
	next.max_inflight = p->max_inflight;
	next.learn_depth = p->learn_depth;
	next.work_conserving = p->work_conserving;
	next.budget_timeout_ns = p->budget_timeout_ns;
	next.reserve_window_ns = p->reserve_window_ns;
	next.idle_enable = p->idle_enable;
	next.idle_fixed_ns = p->idle_fixed_ns;
	for (int k = 0; k < SCHED_COST_KINDS; k++) {
		next.model_iops[k] = p->model_iops[k];
		next.model_bytes_per_s[k] = p->model_bytes_per_s[k];
	}
	int err = params_check(&next);
	if (err)
		return err;
	/* A depth learned before, or none, is no measure for the new setting. */
	if (next.learn_depth != s->p.learn_depth || next.max_inflight != s->p.max_inflight)
		memset(&s->depth, 0, sizeof(s->depth));
	if (next.work_conserving != s->p.work_conserving)
		sched_door_forget(s);
	/* Asked back before it was taken up: nothing to change. */
	const struct sched_policy_ops *want = policy_ops(next.policy);
	s->next_ops = want == s->ops ? NULL : want;
	s->p = next;
	return 0;
}

const struct sched_params *sched_params_of(const struct sched *s)
{
	return &s->p;
}

int sched_new(const struct sched_params *p, struct sched **out)
{
	int err = params_check(p);
	if (err)
		return err;
	struct sched *s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	if (sched_table_init(&s->tenants)) {
		free(s);
		return -ENOMEM;
	}
	s->p = *p;
	s->ops = policy_ops(p->policy);
	sched_wf2q_init(&s->wq);
	sched_list_init(&s->all_queues);
	sched_list_init(&s->all_groups);
	sched_list_init(&s->sync_queues);
	sched_list_init(&s->away_queues);
	sched_list_init(&s->gap_queues);
	sched_list_init(&s->reserve_queues);
	sched_list_init(&s->fifo_reqs);
	sched_list_init(&s->flight);
	sched_list_init(&s->hung_reqs);
	s->hung_after_ns = SCHED_HUNG_MAX_NS;
	s->rate.max_budget_bytes = p->budget_initial_bytes;
	*out = s;
	return 0;
}

void sched_free(struct sched *s)
{
	if (!s)
		return;
	struct sched_link *pos, *tmp;
	sched_list_foreach_safe(pos, tmp, &s->all_queues)
		free(sched_list_entry(pos, struct sched_queue, all_link));
	sched_tree_free_all(s);
	sched_wf2q_destroy(&s->wq);
	sched_table_destroy(&s->tenants);
	free(s);
}

/* ---- queues ---- */

struct sched_queue *sched_queue_find(const struct sched *s, uint64_t tenant_id)
{
	return sched_table_find(&s->tenants, tenant_id);
}

static struct sched_queue *queue_new(struct sched *s, uint64_t tenant_id, uint32_t weight)
{
	struct sched_queue *q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->tenant_id = tenant_id;
	q->node.weight = weight;
	q->ent.weight = (uint32_t)sched_tree_share(&q->node);
	q->ent.id = s->next_queue_id++;
	q->ent.heap_pos = -1;
	q->ent.start_vt = q->ent.finish_vt = s->wq.vtime;
	sched_list_init(&q->reqs);
	q->slice.budget_bytes = s->p.budget_initial_bytes;
	q->inject.limit = 1;
	q->inject.ceiling = INJECT_NO_CEILING;
	return q;
}

int sched_queue_get(struct sched *s, uint64_t tenant_id, uint32_t weight,
		    struct sched_queue **out)
{
	if (!weight)
		weight = s->p.default_weight;
	if (!weight_valid(weight))
		return -EINVAL;
	struct sched_queue *q = sched_table_find(&s->tenants, tenant_id);
	if (q) {
		*out = q;
		return 0;
	}
	if (sched_table_reserve(&s->tenants) || sched_wf2q_reserve(&s->wq, s->nqueues_alloc + 1))
		return -ENOMEM;
	q = queue_new(s, tenant_id, weight);
	if (!q)
		return -ENOMEM;
	sched_table_insert(&s->tenants, q);
	sched_list_add_tail(&s->all_queues, &q->all_link);
	s->nqueues_alloc++;
	*out = q;
	return 0;
}

/* A detached queue lives on until its last request is done, so the engine
 * never holds a request whose queue is gone. */
void sched_queue_free_if_done(struct sched *s, struct sched_queue *q)
{
	if (!q->detached || queue_busy(q) || q->depth == QUEUE_AWAY || q == s->in_service)
		return;
	sched_reserve_leave(s, q);
	sched_list_remove(&q->all_link);
	s->nqueues_alloc--;
	sched_tree_queue_gone(q);
	free(q);
}

void sched_queue_remove(struct sched *s, struct sched_queue *q)
{
	sched_table_remove(&s->tenants, q);
	q->detached = true;
	s->ops->detach(s, q);
}

void sched_queue_stats(const struct sched_queue *q, struct sched_queue_stats *st)
{
	*st = (struct sched_queue_stats){
		.tenant_id = q->tenant_id,
		.parent_id = q->node.parent ? q->node.parent->group_id : SCHED_GROUP_NONE,
		.weight = q->node.weight,
		.pending = q->pending,
		.inflight = q->inflight,
		.served_ops = q->stats.served_ops,
		.served_bytes = q->stats.served_bytes,
		.charged_bytes = q->stats.charged_bytes,
		.idle_windows = q->stats.idle_windows,
		.idle_ns = q->stats.idle_ns,
		.budget_bytes = q->slice.budget_bytes,
		.think_ns = q->think.think_ns,
		.cycle_alone_ns = q->cycle.alone_ns,
		.inject_limit = q->inject.limit,
		.door_shut = q->door.shut,
		.has_waker = q->waker.known,
		.waker_id = q->waker.id,
	};
	for (int i = 0; i < SCHED_INJECT_NR; i++)
		st->injected_ops[i] = q->stats.injected_ops[i];
	for (int i = 0; i < SCHED_EXPIRE_NR; i++)
		st->expirations[i] = q->stats.expirations[i];
}

/* ---- requests ---- */

/* How many requests the store serves at once (learn.c), within
 * 1..max_inflight. */
static uint64_t store_parallelism(const struct sched *s)
{
	uint64_t par = (s->rate.parallelism_256 + 128) / 256;
	if (par < 1)
		par = 1;
	return par > s->p.max_inflight ? s->p.max_inflight : par;
}

/* Before the number in flight changes: the time since the last change.
 * Up to the store's parallelism each request had a slot of its own; past
 * it they shared what there was, so waiting behind others is not billed as
 * use. */
static void store_share_advance(struct sched *s, uint64_t now_ns)
{
	if (s->inflight && now_ns > s->store_share_last_ns) {
		uint64_t par = store_parallelism(s);
		uint64_t dt = (now_ns - s->store_share_last_ns) << STORE_SHARE_SHIFT;
		s->store_share += s->inflight <= par ? dt : dt / s->inflight * par;
	}
	s->store_share_last_ns = now_ns;
}

uint64_t sched_store_share_now(struct sched *s, uint64_t now_ns)
{
	store_share_advance(s, now_ns);
	return s->store_share;
}

void sched_enqueue(struct sched *s, struct sched_req *r, uint64_t now_ns)
{
	struct sched_queue *q = r->queue;
	r->enqueue_ns = now_ns;
	s->arrival_seq++;
	sched_learn_arrival(s, q, r->arrival_ns && r->arrival_ns < now_ns ? r->arrival_ns : now_ns,
			    now_ns);
	s->nbusy += !queue_busy(q);
	q->last_sync = r->sync;
	if (r->sync)
		s->last_sync_ns = now_ns ? now_ns : 1;
	s->nmulti += q->pending + q->inflight == 1;
	q->pending++;
	s->pending++;
	s->ops->enqueue(s, q, r, now_ns);
	sched_note_deep_waits(s);
}

void sched_req_start(struct sched *s, struct sched_queue *q, struct sched_req *r, uint64_t now_ns)
{
	sched_list_remove(&r->link);
	sched_list_add_tail(&s->flight, &r->link);
	r->hung = false;
	q->pending--;
	s->pending--;
	store_share_advance(s, now_ns);
	r->store_share_start = s->store_share;
	q->inflight_share_starts += r->store_share_start;
	r->dispatch_ns = now_ns;
	r->others_inflight = s->inflight - q->inflight;
	r->probed = s->p.learn_depth && now_ns < s->depth.probe_end_ns;
	s->dispatch_seq++;
	q->inflight++;
	s->inflight++;
	s->async_inflight += !r->sync;
}

/*
 * A request at the store for much longer than the store has lately taken
 * for any request is hung (its store hangs: a hung NFS subtree, a
 * GlusterFS file stuck in a lock) and stops counting against the depth
 * the others may use, while it still counts against its own tenant's share
 * (bfq's cap): otherwise a tenant given every slot, its requests hung,
 * kept every other tenant waiting until they returned. "Much longer" is
 * SCHED_HUNG_FACTOR times the longest completed time at the store (solo
 * requests' too, sched_account, and metadata run at once,
 * sched_note_store_time) over the last one to two windows, within
 * SCHED_HUNG_MIN_NS..SCHED_HUNG_MAX_NS:
 * where requests take 100 us, the others wait 200 ms for a hung tenant's
 * slots, not 5 s; where they take seconds (the simulator's overloaded FUSE
 * hosts, an fsync behind much dirty data) the bound rises with them, since
 * a request taken for hung while its store is merely slow lets one more
 * through past the depth. A completion of a hung request counts too, so a
 * store that hung once is given the full bound for a while. With nothing
 * completed yet, the full bound.
 */
static void learn_hung_bound(struct sched *s, uint64_t flight_ns, uint64_t now_ns)
{
	if (now_ns >= s->flight_window_ns + SCHED_HUNG_WINDOW_NS) {
		bool last_ended = now_ns - s->flight_window_ns < 2 * SCHED_HUNG_WINDOW_NS;
		s->flight_max_ns[1] = last_ended ? s->flight_max_ns[0] : 0;
		s->flight_max_ns[0] = 0;
		s->flight_window_ns = now_ns;
	}
	if (flight_ns > s->flight_max_ns[0])
		s->flight_max_ns[0] = flight_ns;
	uint64_t longest = s->flight_max_ns[0] > s->flight_max_ns[1] ? s->flight_max_ns[0] : s->flight_max_ns[1];
	uint64_t bound = longest > SCHED_HUNG_MAX_NS / SCHED_HUNG_FACTOR ? SCHED_HUNG_MAX_NS
									 : longest * SCHED_HUNG_FACTOR;
	s->hung_after_ns = bound < SCHED_HUNG_MIN_NS ? SCHED_HUNG_MIN_NS : bound;
}

static void hang(struct sched *s, struct sched_req *r)
{
	sched_list_remove(&r->link);
	sched_list_add_tail(&s->hung_reqs, &r->link);
	r->hung = true;
	r->queue->hung++;
	s->hung++;
	s->async_inflight -= !r->sync;
}

static void mark_hung(struct sched *s, uint64_t now_ns)
{
	struct sched_req *r;
	while ((r = sched_list_first_entry(&s->flight, struct sched_req, link)) &&
	       r->dispatch_ns + s->hung_after_ns <= now_ns)
		hang(s, r);
}

void sched_hang(struct sched *s, struct sched_req *r)
{
	if (!r->hung)
		hang(s, r);
}

struct sched_req *sched_dispatch(struct sched *s, uint64_t now_ns)
{
	mark_hung(s, now_ns);
	if (s->next_ops) {
		if (!switch_due(s))
			return NULL;
		policy_switch(s, now_ns);
	}
	if (sched_depth_held(s) >= sched_depth_now(s, now_ns))
		return NULL;
	return s->ops->dispatch(s, now_ns);
}

/*
 * A store kept full makes every request wait alike, so its time in flight
 * holds the line it waited in, not what it needed: a 4 KiB write behind
 * 1 MiB ones was billed a fifth of what each of them was, where alone it
 * needs a twelfth, and a w100 tenant of them kept 0.05 of its solo rate
 * beside a w400 one of 1 MiB writes (0.2 due). Where the store's cost
 * model is given (sched_params.model_iops, as `fusesched calibrate`
 * measures it), a read or write is billed what the model says it needs
 * instead: its part of the store's time, 1 / iops plus its bytes past
 * 4 KiB at the bandwidth, times max_inflight (each slot being that share
 * of the store, the unit the time in flight is counted in). A dsync
 * write has its own kind: it costs a flush of the device's cache besides
 * the write (priced as a plain write, the simulator's dsync writers paid
 * a ninth of their time). 0: no model for its kind. A store time known
 * beforehand (sched_req.need_ns, the simulator's) comes first.
 */
uint64_t sched_req_need_ns(const struct sched *s, const struct sched_req *r)
{
	if (r->need_ns)
		return r->need_ns;
	int k = r->op == SCHED_OP_READ	  ? SCHED_COST_READ
		: r->op != SCHED_OP_WRITE ? -1
		: r->dsync		  ? SCHED_COST_DSYNC
					  : SCHED_COST_WRITE;
	if (k < 0 || !s->p.model_iops[k])
		return 0;
	uint64_t past = r->bytes > 4096 ? r->bytes - 4096 : 0;
	uint64_t ns = 1000000000ull / s->p.model_iops[k] +
		      (uint64_t)((unsigned __int128)past * 1000000000u / s->p.model_bytes_per_s[k]);
	return ns * s->p.max_inflight;
}

uint64_t sched_req_finish(struct sched *s, struct sched_req *r, uint64_t now_ns)
{
	struct sched_queue *q = r->queue;
	store_share_advance(s, now_ns);
	uint64_t share_ns = (s->store_share - r->store_share_start) >> STORE_SHARE_SHIFT;
	q->inflight_share_starts -= r->store_share_start;
	sched_list_remove(&r->link);
	s->hung -= r->hung;
	q->hung -= r->hung;
	learn_hung_bound(s, now_ns > r->dispatch_ns ? now_ns - r->dispatch_ns : 0, now_ns);
	s->last_complete_ns = now_ns;
	s->nmulti -= q->pending + q->inflight == 2;
	q->inflight--;
	s->inflight--;
	s->async_inflight -= !r->sync && !r->hung;
	q->stats.served_ops++;
	q->stats.served_bytes += r->bytes;
	return share_ns;
}

bool sched_req_settle(struct sched *s, struct sched_queue *q, const struct sched_req *r,
		      uint64_t now_ns)
{
	sched_learn_completion(s, q, r, now_ns);
	if (queue_busy(q))
		return false;
	s->nbusy--;
	return true;
}

void sched_complete(struct sched *s, struct sched_req *r, uint64_t now_ns)
{
	s->ops->complete(s, r, now_ns);
}

void sched_account(struct sched *s, struct sched_req *r, uint64_t store_ns, uint64_t now_ns)
{
	sched_note_store_time(s, store_ns, now_ns);
	r->queue->stats.served_ops++;
	r->queue->stats.served_bytes += r->bytes;
}

void sched_note_store_time(struct sched *s, uint64_t store_ns, uint64_t now_ns)
{
	learn_hung_bound(s, store_ns, now_ns);
}

uint64_t sched_next_deadline(const struct sched *s)
{
	if (switch_due(s))
		return 0;
	uint64_t d = s->ops->next_deadline(s);
	/* Someone waits: the oldest request at the store may turn hung and free a slot. */
	const struct sched_link *oldest = s->flight.next;
	if (s->pending && oldest != &s->flight) {
		uint64_t hung_ns = sched_list_entry(oldest, struct sched_req, link)->dispatch_ns + s->hung_after_ns;
		if (hung_ns < d)
			d = hung_ns;
	}
	return d;
}

void sched_timer(struct sched *s, uint64_t now_ns)
{
	if (switch_due(s)) {
		policy_switch(s, now_ns);
		return;
	}
	mark_hung(s, now_ns);
	if (s->ops->next_deadline(s) <= now_ns)
		s->ops->timer(s, now_ns);
}

uint32_t sched_hung(const struct sched *s)
{
	return s->hung;
}

uint32_t sched_held_by_hung(struct sched *s, uint64_t *hung_mean_bytes)
{
	uint32_t held = 0;
	uint64_t bytes = 0;
	s->hung_tally++;
	for (struct sched_link *l = s->hung_reqs.next; l != &s->hung_reqs; l = l->next) {
		const struct sched_req *r = sched_list_entry(l, struct sched_req, link);
		struct sched_queue *q = r->queue;
		bytes += r->bytes;
		if (q->hung_tally != s->hung_tally) {
			q->hung_tally = s->hung_tally;
			held += q->pending + q->inflight;
		}
	}
	*hung_mean_bytes = s->hung ? bytes / s->hung : 0;
	return held;
}

uint64_t sched_peak_rate(const struct sched *s)
{
	return s->rate.peak_bytes_per_s;
}

uint32_t sched_inflight(const struct sched *s)
{
	return s->inflight;
}

uint32_t sched_max_inflight(const struct sched *s)
{
	return sched_depth_limit(s);
}

/* A deep queue with nothing queued is waited for: in service and idled or
 * held for, or away. */
static bool deep_waits(const struct sched *s)
{
	const struct sched_queue *g = s->in_service;
	if (g && queue_deep(g) && !g->pending &&
	    (s->slice.state == SLICE_IDLING || s->slice.state == SLICE_HOLDING))
		return true;
	return !sched_list_empty(&s->away_queues);
}

void sched_note_deep_waits(struct sched *s)
{
	if (s->pending > s->held_beside_deep && deep_waits(s))
		s->held_beside_deep = s->pending;
}

uint32_t sched_take_held_beside_deep(struct sched *s)
{
	uint32_t n = s->held_beside_deep;
	s->held_beside_deep = 0;
	return n;
}

uint32_t sched_pending(const struct sched *s)
{
	return s->pending;
}

uint32_t sched_busy_queues(const struct sched *s)
{
	return s->nbusy;
}
