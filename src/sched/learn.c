/* What the scheduler learns from requests as they come and go: a queue's
 * think time, its waker, its cycle and injection limit, and
 * the store's rate. Every estimate is computed from the now_ns values passed
 * in; nothing here decides, the policy reads these. */
#include "sched_internal.h"

#include <string.h>

#define NS_PER_S 1000000000ull

/* 7/8 old, 1/8 new: the EWMA of think times. */
static uint64_t ewma8(uint64_t avg, uint64_t sample)
{
	return (avg * 7 + sample) / 8;
}

/* ---- think time ---- */

static void think_learn(struct sched *s, struct sched_queue *q, uint64_t arrival_ns,
			uint64_t now_ns)
{
	struct queue_think *t = &q->think;
	if (!t->completed)
		return;
	/* A completion the scheduler heard of after the next request arrived
	 * (answered on another thread): no think time at all. */
	uint64_t think = arrival_ns > t->last_complete_ns ? arrival_ns - t->last_complete_ns : 0;
	uint64_t ret = now_ns - t->last_complete_ns;
	t->think_ns = t->samples ? ewma8(t->think_ns, think) : think;
	t->return_ns = t->samples ? ewma8(t->return_ns, ret) : ret;
	t->samples++;
	if (q->cycle.open && !q->cycle.shared && s->dispatch_seq == q->cycle.dispatch_seq) {
		t->alone_ns = t->alone_samples ? ewma8(t->alone_ns, think) : think;
		t->alone_samples++;
	}
}

/* ---- wakers ----
 *
 * A waker is a tenant whose completion keeps preceding q's arrivals: the
 * journal thread that a dsync writer waits on. Injected first while q is
 * idled for, it brings q back. */

/* The tenant whose completion preceded q's arrival most closely, within
 * gap_ns; *waker_hit: q's known waker was among the recent completers. */
static const struct recent_completion *
recent_completer(const struct sched *s, const struct sched_queue *q, uint64_t gap_ns,
		 uint64_t now_ns, bool *cand_hit, bool *waker_hit)
{
	const struct recent_completion *newest = NULL;
	*cand_hit = *waker_hit = false;
	for (uint32_t i = 0; i < RECENT_COMPLETIONS; i++) {
		const struct recent_completion *c = &s->recent[i];
		if (!c->at_ns || c->tenant_id == q->tenant_id || now_ns - c->at_ns > gap_ns)
			continue;
		*cand_hit |= q->waker.cand_hits && c->tenant_id == q->waker.cand_id;
		*waker_hit |= q->waker.known && c->tenant_id == q->waker.id;
		if (!newest || newest->at_ns < c->at_ns)
			newest = c;
	}
	return newest;
}

static void waker_detect(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	struct queue_waker *w = &q->waker;
	/* The gap scales with the tenant's own think time: a tenant that
	 * thinks 20 us is not woken by a completion 1 ms ago, and a busy
	 * neighbour that completes all the time must not look like a waker. */
	uint64_t gap = s->p.waker_gap_ns;
	if (q->think.samples && q->think.think_ns / 2 < gap)
		gap = q->think.think_ns / 2;
	bool cand_hit, waker_hit;
	const struct recent_completion *newest =
		recent_completer(s, q, gap, now_ns, &cand_hit, &waker_hit);
	if (w->known) {	/* a waker that stopped waking is forgotten */
		w->misses = waker_hit ? 0 : w->misses + 1;
		if (w->misses >= s->p.waker_hits)
			w->known = false;
	}
	if (cand_hit && now_ns - w->cand_first_ns <= s->p.waker_window_ns) {
		w->cand_hits++;
	} else if (newest) {
		w->cand_id = newest->tenant_id;
		w->cand_hits = 1;
		w->cand_first_ns = now_ns;
	} else {
		w->cand_hits = 0;
		return;
	}
	if (w->cand_hits >= s->p.waker_hits &&
	    (w->cand_id != w->spurned_id || now_ns >= w->spurned_until_ns)) {
		w->known = true;
		w->id = w->cand_id;
		w->misses = 0;
	}
}

void sched_learn_arrival(struct sched *s, struct sched_queue *q, uint64_t arrival_ns,
			 uint64_t now_ns)
{
	if (queue_busy(q)) {
		q->cycle.open = false;	/* more than one at a time: no think-time cycle */
		return;
	}
	think_learn(s, q, arrival_ns, now_ns);
	waker_detect(s, q, arrival_ns);
}

/* ---- what a request needs of the store ----
 *
 * A request's time in flight is the store's time for it plus waits: behind
 * others in the store's own queue, and, through a loaded daemon, a reap
 * that comes late. What the store needs for a request is near the least
 * time in flight its like requests (same queue, kind and size) take: some
 * of them always find a free slot and are reaped at once. The least of this
 * window and the last, so a store that becomes slower is seen within two. */
#define COST_WINDOW_NS 1000000000ull

static uint32_t cost_size(uint64_t bytes)
{
	if (!bytes)
		return 0;
	uint32_t b = 1;
	for (uint64_t unit = 4096; unit < bytes && b < COST_SIZES - 1; unit <<= 1)
		b++;
	return b;
}

static uint32_t cost_kind(enum sched_op op)
{
	return op == SCHED_OP_READ ? 0 : op == SCHED_OP_WRITE ? 1 : 2;
}

static uint64_t least_in_flight(struct sched_queue *q, const struct sched_req *r, uint64_t now_ns)
{
	struct queue_cost *c = &q->cost;
	enum window_step step = window_step(&c->window_start_ns, now_ns, COST_WINDOW_NS);
	if (step != WINDOW_SAME) {
		if (step == WINDOW_NEXT)
			memcpy(c->last_ns, c->now_ns, sizeof(c->last_ns));
		else
			memset(c->last_ns, 0, sizeof(c->last_ns));
		memset(c->now_ns, 0, sizeof(c->now_ns));
	}
	uint64_t flight = now_ns > r->dispatch_ns ? now_ns - r->dispatch_ns : 0;
	uint32_t seen = flight > UINT32_MAX ? UINT32_MAX : flight ? (uint32_t)flight : 1;
	uint32_t k = cost_kind(r->op), b = cost_size(r->bytes);
	if (!c->now_ns[k][b] || seen < c->now_ns[k][b])
		c->now_ns[k][b] = seen;
	uint32_t least = c->now_ns[k][b];
	if (c->last_ns[k][b] && c->last_ns[k][b] < least)
		least = c->last_ns[k][b];
	return least;
}

/* ---- the store's depth (learn_depth) ----
 *
 * With max_inflight above what the store serves at once, the rest wait in
 * the store's own queue, first come first served: shares there follow how
 * many requests each tenant keeps outstanding, not weights, and tenants
 * whose depths together fit within max_inflight are never held back at all
 * (two 16-deep readers at 400:100 got 1:1). The depth the store serves is,
 * by Little's law, its completions' unqueued times in flight per unit of
 * time; a store kept full shows only queued times, so every
 * DEPTH_PROBE_EVERY_NS the limit halves for DEPTH_PROBE_NS, and the
 * requests dispatched then give each kind and size its unqueued mean. A
 * completion counts the smaller of that mean and its own time (a request
 * that found a free slot is its own measure); the most of this second's
 * and the last second's windows, times DEPTH_GAIN_PCT, is the limit: the
 * margin is the store's jitter, and what the others get of it beside a
 * tenant that cannot fill its share. Without kinds and sizes apart, a
 * probe that happened to send small requests read a mix of 1 MiB ones as
 * a fifth of its depth, and the limit spiralled down with the rate it cut. */
#define DEPTH_RATE_WINDOW_NS 20000000ull
#define DEPTH_SECOND_NS 1000000000ull
#define DEPTH_PROBE_EVERY_NS 1000000000ull
#define DEPTH_PROBE_NS 5000000ull
#define DEPTH_GAIN_PCT 150u

static void depth_learn(struct sched *s, const struct sched_req *r, uint64_t now_ns)
{
	struct store_depth *d = &s->depth;
	if (!s->p.learn_depth)
		return;
	uint64_t f = now_ns > r->dispatch_ns ? now_ns - r->dispatch_ns : 1;
	uint64_t *mean = &d->flight_ns[cost_kind(r->op)][cost_size(r->bytes)];
	if (r->probed)
		*mean = *mean ? (*mean * 7 + f) / 8 : f;
	if (!d->window_start_ns || now_ns < d->window_start_ns) {
		d->window_start_ns = now_ns;
		d->window_flight_ns = 0;
	}
	d->window_flight_ns += *mean && *mean < f ? *mean : f;
	uint64_t span = now_ns - d->window_start_ns;
	if (span < DEPTH_RATE_WINDOW_NS)
		return;
	uint64_t par = d->window_flight_ns * 256 / span;
	d->window_start_ns = now_ns;
	d->window_flight_ns = 0;
	if (!d->second_start_ns || now_ns - d->second_start_ns >= DEPTH_SECOND_NS) {
		d->most_last_256 = d->most_now_256;
		d->most_now_256 = 0;
		d->second_start_ns = now_ns;
	}
	if (par > d->most_now_256)
		d->most_now_256 = par;
	uint64_t most = d->most_now_256 > d->most_last_256 ? d->most_now_256 : d->most_last_256;
	uint64_t limit = (most * DEPTH_GAIN_PCT / 100 + 255) / 256;
	if (limit < 2)
		limit = 2;
	d->limit = limit > s->p.max_inflight ? s->p.max_inflight : (uint32_t)limit;
}

/* From the first dispatch on, a probe each DEPTH_PROBE_EVERY_NS: the first
 * gives the unqueued times to learn from. */
uint32_t sched_depth_now(struct sched *s, uint64_t now_ns)
{
	struct store_depth *d = &s->depth;
	if (!s->p.learn_depth)
		return s->p.max_inflight;
	if (now_ns >= d->probe_next_ns) {
		d->probe_end_ns = now_ns + DEPTH_PROBE_NS;
		d->probe_next_ns = now_ns + DEPTH_PROBE_EVERY_NS;
	}
	uint32_t limit = sched_depth_limit(s);
	if (now_ns < d->probe_end_ns)
		return limit / 2 ? limit / 2 : 1;
	return limit;
}

/* ---- the store's rate and parallelism ---- */

/* The slot rate (one request's bytes per second) converts store time into
 * bytes for requests charged by time, from each request's known need where
 * there is one (the cost model's price, the simulator's time), so that it
 * is in the need's terms, and from its time in flight otherwise (on a store
 * kept full never unqueued: a rate a fraction of the store's, under which
 * every request's time fell below its bytes); the peak rate sizes the largest budget
 * to what the store moves in budget_timeout_ns. The parallelism is how many
 * requests the store serves at once: by Little's law, the store time its
 * completions needed (their least times in flight) per unit of time, at its
 * most over a peak window. Not the peak rate over the slot rate: the slot
 * rate is that of the kind that moves bytes fastest, and beside a slower
 * kind (small dsync writes next to reads) that ratio was a quarter of the
 * store, so each request's time was split four times too many ways and a
 * tenant of fast requests paid its bytes, four times its time, per unit of
 * store time. */
static void rate_learn(struct sched *s, struct sched_queue *q, const struct sched_req *r,
		       uint64_t now_ns)
{
	struct store_rate *st = &s->rate;
	uint64_t need_ns = sched_req_need_ns(s, r);
	uint64_t svc_ns = need_ns ? need_ns : now_ns - r->dispatch_ns;
	if (r->bytes && req_is_rw(r) && svc_ns) {
		uint64_t one = r->bytes * NS_PER_S / svc_ns;
		/* rise quickly, never fall: the store's capability, not its load */
		if (one > st->slot_bytes_per_s)
			st->slot_bytes_per_s += (one - st->slot_bytes_per_s) / 8 + 1;
	}
	uint64_t least = least_in_flight(q, r, now_ns);
	if (!st->window_start_ns || now_ns < st->window_start_ns) {
		st->window_start_ns = now_ns;
		st->window_bytes = 0;
		st->window_least_ns = 0;
	}
	st->window_bytes += r->bytes;
	st->window_least_ns += least;
	uint64_t span = now_ns - st->window_start_ns;
	if (span < s->p.peak_window_ns)
		return;
	uint64_t rate = st->window_bytes * NS_PER_S / span;
	if (rate > st->peak_bytes_per_s) {
		st->peak_bytes_per_s += (rate - st->peak_bytes_per_s) / 2 + 1;
		uint64_t mb = st->peak_bytes_per_s / 1000 * (s->p.budget_timeout_ns / 1000) / 1000;
		if (mb < s->p.budget_min_bytes)
			mb = s->p.budget_min_bytes;
		st->max_budget_bytes = mb > s->p.budget_max_bytes ? s->p.budget_max_bytes : mb;
	}
	uint64_t par = st->window_least_ns * 256 / span;
	if (par > st->parallelism_256)
		st->parallelism_256 += (par - st->parallelism_256) / 2 + 1;
	st->window_start_ns = now_ns;
	st->window_bytes = 0;
	st->window_least_ns = 0;
}

void sched_learn_completion(struct sched *s, struct sched_queue *q, const struct sched_req *r,
			    uint64_t now_ns)
{
	q->think.last_complete_ns = now_ns;
	q->think.completed = true;
	/* Only a completion that leaves its tenant nothing at the store can
	 * be what another waits for (a journal's commit): a deep tenant's
	 * completions come all the time, precede a depth-1 neighbour's
	 * arrivals by chance, and would make it a waker, injected past the
	 * limit while that neighbour is idled for. */
	if (!q->inflight) {
		s->recent[s->recent_next] = (struct recent_completion){ q->tenant_id, now_ns };
		s->recent_next = (s->recent_next + 1) % RECENT_COMPLETIONS;
	}
	rate_learn(s, q, r, now_ns);
	depth_learn(s, r, now_ns);
	sched_door_completion(s, q, r, now_ns);
}

/* ---- cycles ----
 *
 * A tenant that issues one request at a time, waits, thinks and issues the
 * next, runs at one request per cycle. When the cycles in which others were
 * injected take longer than inject_slowdown_pct of its cycles alone, the
 * injection limit halves and a waker injected in them is forgotten, however
 * fast its requests were served: through FUSE on a host with few cores, a
 * deep reader injected next to a depth-1 one leaves the store's service
 * time unchanged and slows the depth-1 reader many times over through the
 * CPU its callers wait for. A cycle alone needs the others' requests gone,
 * so every quiet_every_ns the tenant runs quiet cycles with nobody injected
 * until the store has drained and QUIET_ALONE cycles were alone (at most
 * QUIET_CYCLES).
 *
 * Both sides are means: injected cycles are judged by batches of
 * CYCLE_BATCH, against the mean of the cycles alone. A cycle through FUSE
 * includes the wait for the reactor to reap its request, up to a
 * millisecond or two at random on a loaded host; judged one by one against
 * the fastest cycles alone, every long wait read as a slowdown, the limit
 * halved down to 0 and stayed there, and a weight-900 depth-1 reader left
 * a deep neighbour 1% of what it had beside it under fifo. */
#define QUIET_CYCLES 16
#define QUIET_ALONE 4
#define CYCLE_BATCH 8

/* A sample counts at most twice the mean: a cycle alone is the tenant's
 * own think and service time, steady, and one that ran into a stall of the
 * store (milliseconds, now and then) would otherwise set the baseline so
 * high that no slowdown is seen for many cycles. A tenant that really
 * slows down still moves the mean by a quarter per sample. */
static void cycle_alone_learn(struct queue_cycle *c, uint64_t cycle_ns)
{
	if (c->alone_ns && cycle_ns > 2 * c->alone_ns)
		cycle_ns = 2 * c->alone_ns;
	c->alone_ns = c->alone_ns ? (c->alone_ns * 3 + cycle_ns) / 4 : cycle_ns;
}

static void quiet_maybe_start(struct sched *s, struct sched_queue *q, uint64_t now_ns)
{
	struct queue_cycle *c = &q->cycle;
	if (c->open && !c->quiet_left && s->nbusy > 1 && s->p.quiet_every_ns &&
	    (!c->quiet_start_ns || now_ns - c->quiet_start_ns >= s->p.quiet_every_ns)) {
		c->quiet_left = QUIET_CYCLES;
		c->quiet_alone = 0;
		c->quiet_start_ns = now_ns ? now_ns : 1;
	}
}

/* A slowed batch of cycles: a real waker brings the tenant back sooner, so
 * the waker injected in them is a busy neighbour whose completions happen
 * to precede its requests; and the injection limit halves. */
static void cycle_slowed(struct sched *s, struct sched_queue *q, bool waker_injected,
			 uint64_t now_ns)
{
	if (waker_injected && q->waker.known) {
		q->waker.known = false;
		q->waker.spurned_id = q->waker.id;
		q->waker.spurned_until_ns = now_ns + s->p.waker_window_ns;
	}
	struct queue_inject *in = &q->inject;
	if (in->limit) {
		in->limit /= 2;
		if (!in->limit)
			in->limit_zero_ns = now_ns;
	}
	in->ceiling = in->limit;
}

/* A batch that was not slowed: the ceiling doubles, until it is no bound. */
static void cycle_fine(struct sched *s, struct queue_inject *in)
{
	if (in->ceiling == INJECT_NO_CEILING)
		return;
	in->ceiling = in->ceiling * 2 + 1;
	if (in->ceiling >= s->p.max_inflight - 1)
		in->ceiling = INJECT_NO_CEILING;
}

/* One more cycle with others injected: whether it closed a slowed batch. */
static bool cycle_batch_add(struct sched *s, struct sched_queue *q, uint64_t cycle_ns,
			    bool waker_injected, uint64_t now_ns)
{
	struct queue_cycle *c = &q->cycle;
	c->batch_ns += cycle_ns;
	c->batch_waker |= waker_injected;
	if (++c->batch_n < CYCLE_BATCH)
		return false;
	uint64_t mean = c->batch_ns / c->batch_n;
	bool waker = c->batch_waker;
	c->batch_ns = 0;
	c->batch_n = 0;
	c->batch_waker = false;
	if (mean * 100 <= c->alone_ns * s->p.inject_cycle_slowdown_pct) {
		cycle_fine(s, &q->inject);
		return false;
	}
	cycle_slowed(s, q, waker, now_ns);
	return true;
}

bool sched_learn_cycle(struct sched *s, struct sched_queue *q, const struct sched_req *r,
		       uint64_t now_ns)
{
	struct queue_cycle *c = &q->cycle;
	bool open = c->open && q->think.completed;
	uint64_t cycle_ns = now_ns - q->think.last_complete_ns;
	/* Alone: nobody else's request at the store, dispatched, or even
	 * arriving during the cycle. Others' arrivals are their callers and
	 * the daemon's threads at work on the host's CPU: a deep tenant's
	 * completions just before quiet cycles bring a burst of its next
	 * requests, and cycles counted alone beside it were 3-10x the cycle
	 * truly alone, so no slowdown was ever seen against them. */
	bool alone = s->dispatch_seq == c->dispatch_seq + 1 && !r->others_inflight && !c->shared &&
		     s->arrival_seq == c->arrival_seq + 1;
	bool injected = s->inject_seq != c->inject_seq;
	bool waker_injected = s->waker_inject_seq != c->waker_inject_seq;
	c->open = !queue_busy(q);
	c->shared = s->inflight > q->inflight;
	c->dispatch_seq = s->dispatch_seq;
	c->inject_seq = s->inject_seq;
	c->waker_inject_seq = s->waker_inject_seq;
	c->arrival_seq = s->arrival_seq;
	if (c->quiet_left) {
		bool enough = alone && open && ++c->quiet_alone >= QUIET_ALONE;
		c->quiet_left = enough ? 0 : c->quiet_left - 1;
	}
	if (!open || q != s->in_service)
		return false;
	quiet_maybe_start(s, q, now_ns);
	if (alone) {
		cycle_alone_learn(c, cycle_ns);
		return false;
	}
	if (!injected || !c->alone_ns)
		return false;
	return cycle_batch_add(s, q, cycle_ns, waker_injected, now_ns);
}

/* ---- injection limit ----
 *
 * Injection is worth it while the idled tenant's requests do not take
 * longer than inject_slowdown_pct of their service time alone. */

void sched_learn_inject_limit(struct sched *s, struct sched_queue *q, const struct sched_req *r,
			      bool cycle_was_slowed, uint64_t now_ns)
{
	struct queue_inject *in = &q->inject;
	uint64_t svc_ns = now_ns - r->dispatch_ns;
	if (!r->others_inflight) {
		in->svc_alone_ns = in->svc_alone_ns ? (in->svc_alone_ns * 3 + svc_ns) / 4 : svc_ns;
		return;
	}
	/* A tenant that never runs alone takes its fastest as the baseline. */
	if (!in->svc_samples++ || svc_ns < in->svc_min_ns)
		in->svc_min_ns = svc_ns;
	if (!in->svc_alone_ns && in->svc_samples >= 16)
		in->svc_alone_ns = in->svc_min_ns;
	if (!in->svc_alone_ns || cycle_was_slowed)
		return;
	if (svc_ns * 100 <= in->svc_alone_ns * s->p.inject_slowdown_pct) {
		uint32_t most = s->p.max_inflight - 1;
		if (in->ceiling < most)
			most = in->ceiling;
		if (r->others_inflight >= in->limit)
			in->limit = r->others_inflight + 1 < most ? r->others_inflight + 1 : most;
		return;
	}
	/* Slowed with k others in flight: at most k - 1 may be injected. More
	 * than the limit in flight means the others had the store in their own
	 * right, which says nothing about injection. */
	if (r->others_inflight > in->limit)
		return;
	in->limit = r->others_inflight - 1;
	if (!in->limit)
		in->limit_zero_ns = now_ns;
}

/* A limit of 0 is tried again at 1 every inject_reprobe_ns: what slowed the
 * tenant may be gone. Unknown service time alone: no general injection. */
uint32_t sched_inject_limit(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	struct queue_inject *in = &g->inject;
	if (in->svc_alone_ns && !in->limit && now_ns - in->limit_zero_ns >= s->p.inject_reprobe_ns) {
		in->limit = 1;
		if (!in->ceiling)
			in->ceiling = 1;
	}
	uint32_t limit = in->svc_alone_ns ? in->limit : 0;
	return limit > s->p.max_inflight - 1 ? s->p.max_inflight - 1 : limit;
}
