#include "sim.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

enum ev_type { EV_ARRIVE, EV_DONE, EV_TIMER, EV_HOST, EV_REAP, EV_REWEIGHT };

struct sim_req {
	struct sched_req sr;
	uint32_t tenant, job;
	int waiter_tenant;		/* journal request: whose job resumes after it */
	uint32_t waiter_job;
	uint64_t svc_ns;
	struct sim_req *next;		/* free list, device FIFO, completion queue */
};

struct ev {
	uint64_t at_ns, seq;
	enum ev_type type;
	uint32_t tenant, job;
	int waiter_tenant;
	uint32_t waiter_job;
	uint64_t think_ns;		/* EV_HOST: the job's think time after it */
	struct sim_req *r;
	uint32_t rw;			/* EV_REWEIGHT: index into sc->rw */
};

struct lat_vec {
	uint64_t *v;
	size_t n, cap;
};

struct tstate {
	struct sched_queue *q;
	uint64_t next_ok_ns;		/* rate limit */
	struct lat_vec lat;
	uint64_t ops, bytes, store_ns;
	uint64_t charged_at_warmup;	/* its charged bytes when warm-up ended */
	bool warm;
	uint64_t win_bytes[SIM_MAX_WINDOWS], win_store_ns[SIM_MAX_WINDOWS];
	uint64_t stall_until_ns[SIM_MAX_THREADS];	/* caller thread descheduled until */
};

struct sim {
	const struct sim_scenario *sc;
	struct sched *s;
	uint64_t now_ns, rng, seq, timer_at_ns;
	struct ev *heap;
	size_t nev, evcap;
	struct sim_req *free_reqs;
	struct sim_req **allocs;	/* every request ever made, freed at the end */
	size_t nallocs, alloccap;
	struct sim_req *dev_head, *dev_tail;
	uint32_t dev_busy;
	struct ev *host_q;		/* ring of follow-ups waiting for a host slot */
	size_t host_head, host_n, host_cap;
	uint32_t host_busy;
	struct sim_req *cq_head, *cq_tail;	/* done at the store, not yet reaped */
	bool reap_pending;
	struct tstate ts[SIM_MAX_TENANTS];
	struct sched_group *groups[SIM_MAX_GROUPS];	/* NULL while sc->flat */
	int err;
};

static uint64_t rng_next(struct sim *m)
{
	return sim_splitmix64(&m->rng);
}

static uint64_t jitter(struct sim *m, uint64_t ns, uint32_t pct)
{
	if (!pct || !ns)
		return ns;
	uint64_t span = ns * pct / 100;
	return ns - span + rng_next(m) % (2 * span + 1);
}

static bool ev_less(const struct ev *a, const struct ev *b)
{
	return a->at_ns != b->at_ns ? a->at_ns < b->at_ns : a->seq < b->seq;
}

static void ev_push(struct sim *m, struct ev e)
{
	if (m->nev == m->evcap) {
		size_t cap = m->evcap ? m->evcap * 2 : 256;
		struct ev *h = realloc(m->heap, cap * sizeof(*h));
		if (!h) {
			m->err = -ENOMEM;
			return;
		}
		m->heap = h;
		m->evcap = cap;
	}
	e.seq = m->seq++;
	size_t i = m->nev++;
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!ev_less(&e, &m->heap[p]))
			break;
		m->heap[i] = m->heap[p];
		i = p;
	}
	m->heap[i] = e;
}

static struct ev ev_pop(struct sim *m)
{
	struct ev top = m->heap[0], last = m->heap[--m->nev];
	size_t i = 0;
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= m->nev)
			break;
		if (c + 1 < m->nev && ev_less(&m->heap[c + 1], &m->heap[c]))
			c++;
		if (!ev_less(&m->heap[c], &last))
			break;
		m->heap[i] = m->heap[c];
		i = c;
	}
	if (m->nev)
		m->heap[i] = last;
	return top;
}

static void lat_add(struct sim *m, struct lat_vec *l, uint64_t ns)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		uint64_t *v = realloc(l->v, cap * sizeof(*v));
		if (!v) {
			m->err = -ENOMEM;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = ns;
}

static enum sim_cost req_cost(const struct sched_req *r, bool dsync)
{
	switch (r->op) {
	case SCHED_OP_READ:
		return SIM_COST_READ;
	case SCHED_OP_WRITE:
		return dsync ? SIM_COST_DSYNC_WRITE : SIM_COST_WRITE;
	default:
		return SIM_COST_FLUSH;
	}
}

/* The store's service time for r before jitter. */
static uint64_t dev_need_ns(const struct sim *m, const struct sim_req *r)
{
	const struct sim_device *d = &m->sc->dev;
	enum sim_cost c = req_cost(&r->sr, m->sc->t[r->tenant].dsync);
	return d->base_ns[c] + r->sr.bytes * d->ps_per_byte[c] / 1000;
}

static void dev_start(struct sim *m, struct sim_req *r)
{
	m->dev_busy++;
	r->svc_ns = jitter(m, dev_need_ns(m, r), m->sc->dev.jitter_pct);
	ev_push(m, (struct ev){ .at_ns = m->now_ns + r->svc_ns, .type = EV_DONE, .r = r });
}

static void dev_submit(struct sim *m, struct sim_req *r)
{
	if (m->dev_busy < m->sc->dev.slots) {
		dev_start(m, r);
		return;
	}
	r->next = NULL;
	if (m->dev_tail)
		m->dev_tail->next = r;
	else
		m->dev_head = r;
	m->dev_tail = r;
}

static void arrive_at(struct sim *m, uint64_t at_ns, uint32_t t, uint32_t job, int waiter_tenant,
		      uint32_t waiter_job)
{
	const struct sim_tenant *tc = &m->sc->t[t];
	struct tstate *ts = &m->ts[t];
	if (tc->threads && tc->stall_permille && waiter_tenant < 0) {
		uint64_t *until = &ts->stall_until_ns[job % tc->threads];
		if (*until <= m->now_ns && rng_next(m) % 1000 < tc->stall_permille)
			*until = m->now_ns + jitter(m, tc->stall_ns, 50);
		if (at_ns < *until)
			at_ns = *until + (at_ns - m->now_ns);
	}
	if (tc->rate_bytes_per_s) {
		if (at_ns < ts->next_ok_ns)
			at_ns = ts->next_ok_ns;
		ts->next_ok_ns = at_ns + tc->bytes * 1000000000ull / tc->rate_bytes_per_s;
	}
	ev_push(m, (struct ev){ .at_ns = at_ns, .type = EV_ARRIVE, .tenant = t, .job = job,
				.waiter_tenant = waiter_tenant, .waiter_job = waiter_job });
}

static void host_start(struct sim *m, struct ev e)
{
	m->host_busy++;
	e.type = EV_HOST;
	e.at_ns = m->now_ns + jitter(m, m->sc->host.ns, m->sc->dev.jitter_pct);
	ev_push(m, e);
}

/* A completion's follow-up request: through the host if there is one, then
 * the job's think time. */
static void follow_up(struct sim *m, uint64_t think_ns, uint32_t t, uint32_t job,
		      int waiter_tenant, uint32_t waiter_job)
{
	struct ev e = { .tenant = t, .job = job, .waiter_tenant = waiter_tenant,
			.waiter_job = waiter_job, .think_ns = think_ns };
	if (!m->sc->host.slots) {
		arrive_at(m, m->now_ns + jitter(m, think_ns, 20), t, job, waiter_tenant, waiter_job);
		return;
	}
	if (m->host_busy < m->sc->host.slots) {
		host_start(m, e);
		return;
	}
	if (m->host_n == m->host_cap) {
		size_t cap = m->host_cap ? m->host_cap * 2 : 256;
		struct ev *q = malloc(cap * sizeof(*q));
		if (!q) {
			m->err = -ENOMEM;
			return;
		}
		for (size_t i = 0; i < m->host_n; i++)
			q[i] = m->host_q[(m->host_head + i) % m->host_cap];
		free(m->host_q);
		m->host_q = q;
		m->host_head = 0;
		m->host_cap = cap;
	}
	m->host_q[(m->host_head + m->host_n++) % m->host_cap] = e;
}

static void on_host_done(struct sim *m, const struct ev *e)
{
	m->host_busy--;
	arrive_at(m, m->now_ns + jitter(m, e->think_ns, 20), e->tenant, e->job, e->waiter_tenant,
		  e->waiter_job);
	if (m->host_n) {
		struct ev nx = m->host_q[m->host_head];
		m->host_head = (m->host_head + 1) % m->host_cap;
		m->host_n--;
		host_start(m, nx);
	}
}

static void on_arrive(struct sim *m, const struct ev *e)
{
	const struct sim_tenant *tc = &m->sc->t[e->tenant];
	struct tstate *ts = &m->ts[e->tenant];
	/* A stopped tenant's jobs end here; a journal request still goes in,
	 * or its waiter would never go on. */
	if (tc->stop_ns && m->now_ns >= tc->stop_ns && e->waiter_tenant < 0)
		return;
	struct sim_req *r = m->free_reqs;
	if (r) {
		m->free_reqs = r->next;
	} else {
		if (m->nallocs == m->alloccap) {
			size_t cap = m->alloccap ? m->alloccap * 2 : 64;
			struct sim_req **v = realloc(m->allocs, cap * sizeof(*v));
			if (!v) {
				m->err = -ENOMEM;
				return;
			}
			m->allocs = v;
			m->alloccap = cap;
		}
		if (!(r = malloc(sizeof(*r)))) {
			m->err = -ENOMEM;
			return;
		}
		m->allocs[m->nallocs++] = r;
	}
	memset(r, 0, sizeof(*r));
	r->tenant = e->tenant;
	r->job = e->job;
	r->waiter_tenant = e->waiter_tenant;
	r->waiter_job = e->waiter_job;
	r->sr.queue = ts->q;
	r->sr.op = tc->op;
	r->sr.bytes = tc->bytes;
	r->sr.sync = tc->sync;
	r->sr.dsync = tc->dsync;
	r->sr.need_ns = m->sc->oracle_billing ? dev_need_ns(m, r) : 0;
	sched_enqueue(m->s, &r->sr, m->now_ns);
}

/* The reactor has seen the completion: the scheduler, the caller's reply. */
static void reap_one(struct sim *m, struct sim_req *r)
{
	const struct sim_scenario *sc = m->sc;
	const struct sim_tenant *tc = &sc->t[r->tenant];
	struct tstate *ts = &m->ts[r->tenant];
	if (m->now_ns >= sc->warmup_ns && !ts->warm) {
		struct sched_queue_stats st;
		sched_queue_stats(ts->q, &st);
		ts->charged_at_warmup = st.charged_bytes;
		ts->warm = true;
	}
	sched_complete(m->s, &r->sr, m->now_ns);
	if (m->now_ns >= sc->warmup_ns) {
		ts->ops++;
		ts->bytes += r->sr.bytes;
		ts->store_ns += r->svc_ns;
		lat_add(m, &ts->lat, m->now_ns - r->sr.enqueue_ns);
	}
	for (uint32_t w = 0; w < sc->nwindows; w++)
		if (m->now_ns >= sc->w[w].from_ns && m->now_ns < sc->w[w].to_ns) {
			ts->win_bytes[w] += r->sr.bytes;
			ts->win_store_ns[w] += r->svc_ns;
		}
	if (r->waiter_tenant >= 0)
		follow_up(m, sc->t[r->waiter_tenant].think_ns, (uint32_t)r->waiter_tenant,
			  r->waiter_job, -1, 0);
	else if (tc->journal >= 0)
		follow_up(m, sc->t[tc->journal].think_ns, (uint32_t)tc->journal, 0, (int)r->tenant,
			  r->job);
	else if (tc->depth)
		follow_up(m, tc->think_ns, r->tenant, r->job, -1, 0);
	r->next = m->free_reqs;
	m->free_reqs = r;
}

static void on_reap(struct sim *m)
{
	m->reap_pending = false;
	while (m->cq_head) {
		struct sim_req *r = m->cq_head;
		m->cq_head = r->next;
		reap_one(m, r);
	}
	m->cq_tail = NULL;
}

/* The store is done with r: its slot goes to the next request at once; the
 * scheduler hears of it when the reactor gets to run. */
static void on_done(struct sim *m, struct sim_req *r)
{
	m->dev_busy--;
	if (m->dev_head) {
		struct sim_req *nx = m->dev_head;
		m->dev_head = nx->next;
		if (!m->dev_head)
			m->dev_tail = NULL;
		dev_start(m, nx);
	}
	if (!m->sc->host.reactor_wake_ns) {
		reap_one(m, r);
		return;
	}
	r->next = NULL;
	if (m->cq_tail)
		m->cq_tail->next = r;
	else
		m->cq_head = r;
	m->cq_tail = r;
	if (!m->reap_pending) {
		m->reap_pending = true;
		/* Sometimes a core is free at once, sometimes the reactor waits
		 * out another thread's time slice: uniform in 0..2x. */
		ev_push(m, (struct ev){ .at_ns = m->now_ns + jitter(m, m->sc->host.reactor_wake_ns, 100),
					.type = EV_REAP });
	}
}

static void pump(struct sim *m)
{
	struct sched_req *sr;
	while ((sr = sched_dispatch(m->s, m->now_ns)))
		dev_submit(m, (struct sim_req *)((char *)sr - offsetof(struct sim_req, sr)));
	uint64_t d = sched_next_deadline(m->s);
	if (d == SCHED_DEADLINE_NONE)
		return;
	if (d < m->now_ns)
		d = m->now_ns;
	if (m->timer_at_ns == SCHED_DEADLINE_NONE || d < m->timer_at_ns) {
		m->timer_at_ns = d;
		ev_push(m, (struct ev){ .at_ns = d, .type = EV_TIMER });
	}
}

static uint64_t pct_of(const struct lat_vec *l, unsigned pct)
{
	if (!l->n)
		return 0;
	size_t i = (l->n - 1) * pct / 100;
	return l->v[i];
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

bool sim_in_group(const struct sim_scenario *sc, int group, uint32_t k)
{
	/* the depth bound only guards against a cycle sim_run would refuse */
	for (int depth = 0; group > 0 && group <= (int)sc->ngroups && depth <= (int)SIM_MAX_GROUPS;
	     depth++) {
		if ((uint32_t)group == k + 1)
			return true;
		group = sc->g[group - 1].parent;
	}
	return false;
}

static void window_fill(const struct sim *m, uint32_t w, struct sim_window_result *wr)
{
	const struct sim_scenario *sc = m->sc;
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		wr->t_bytes[i] = m->ts[i].win_bytes[w];
		wr->total_bytes += wr->t_bytes[i];
		wr->t_store_ns[i] = m->ts[i].win_store_ns[w];
		wr->total_store_ns += wr->t_store_ns[i];
		for (uint32_t k = 0; k < sc->ngroups; k++)
			if (sim_in_group(sc, sc->t[i].group, k))
				wr->g_bytes[k] += wr->t_bytes[i];
	}
	double total = (double)wr->total_bytes;
	for (uint32_t i = 0; i < sc->ntenants; i++)
		wr->t_share[i] = total ? (double)wr->t_bytes[i] / total : 0;
	for (uint32_t k = 0; k < sc->ngroups; k++)
		wr->g_share[k] = total ? (double)wr->g_bytes[k] / total : 0;
	wr->total_mb_per_s = total / 1e6 / ((double)(sc->w[w].to_ns - sc->w[w].from_ns) / 1e9);
}

static void results_fill(struct sim *m, struct sim_result *out)
{
	const struct sim_scenario *sc = m->sc;
	double secs = (double)(sc->duration_ns - sc->warmup_ns) / 1e9;
	uint64_t total = 0;
	memset(out, 0, sizeof(*out));
	out->ntenants = sc->ntenants;
	uint64_t store_ns = 0;
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		total += m->ts[i].bytes;
		store_ns += m->ts[i].store_ns;
	}
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		struct tstate *ts = &m->ts[i];
		struct sim_tenant_result *tr = &out->t[i];
		if (ts->lat.n)	/* a starved tenant has none, and no array */
			qsort(ts->lat.v, ts->lat.n, sizeof(*ts->lat.v), cmp_u64);
		tr->ops = ts->ops;
		tr->bytes = ts->bytes;
		tr->store_ns = ts->store_ns;
		tr->mb_per_s = (double)ts->bytes / 1e6 / secs;
		tr->share = total ? (double)ts->bytes / (double)total : 0;
		tr->lat_p50_ns = pct_of(&ts->lat, 50);
		tr->lat_p99_ns = pct_of(&ts->lat, 99);
		tr->lat_max_ns = ts->lat.n ? ts->lat.v[ts->lat.n - 1] : 0;
		sched_queue_stats(ts->q, &tr->st);
		tr->charged_bytes = tr->st.charged_bytes - ts->charged_at_warmup;
	}
	out->total_mb_per_s = (double)total / 1e6 / secs;
	out->store_busy = (double)store_ns / 1e9 / secs;
	out->peak_rate = sched_peak_rate(m->s);
	out->ngroups = sc->ngroups;
	for (uint32_t k = 0; k < sc->ngroups; k++) {
		struct sim_group_result *gr = &out->g[k];
		for (uint32_t i = 0; i < sc->ntenants; i++) {
			if (!sim_in_group(sc, sc->t[i].group, k))
				continue;
			gr->ops += m->ts[i].ops;
			gr->bytes += m->ts[i].bytes;
		}
		gr->mb_per_s = (double)gr->bytes / 1e6 / secs;
		gr->share = total ? (double)gr->bytes / (double)total : 0;
	}
	out->nwindows = sc->nwindows;
	for (uint32_t w = 0; w < sc->nwindows; w++)
		window_fill(m, w, &out->w[w]);
}

static void on_reweight(struct sim *m, const struct sim_reweight *rw)
{
	int err = 0;
	if (!rw->group)
		err = sched_queue_set_weight(m->s, m->ts[rw->tenant].q, rw->weight);
	else if (m->groups[rw->group - 1])	/* else flat: there is no group */
		err = sched_group_set_weight(m->s, m->groups[rw->group - 1], rw->weight);
	if (err)
		m->err = err;
}

static bool scenario_valid(const struct sim_scenario *sc)
{
	if (sc->ntenants > SIM_MAX_TENANTS || sc->ngroups > SIM_MAX_GROUPS ||
	    sc->nreweights > SIM_MAX_REWEIGHTS || sc->nwindows > SIM_MAX_WINDOWS ||
	    !sc->dev.slots || sc->warmup_ns >= sc->duration_ns)
		return false;
	/* Parents before children: also rules out cycles. */
	for (uint32_t k = 0; k < sc->ngroups; k++)
		if (sc->g[k].parent < 0 || sc->g[k].parent > (int)k)
			return false;
	for (uint32_t i = 0; i < sc->ntenants; i++)
		if (sc->t[i].threads > SIM_MAX_THREADS || sc->t[i].group < 0 ||
		    sc->t[i].group > (int)sc->ngroups)
			return false;
	for (uint32_t k = 0; k < sc->nreweights; k++)
		if (sc->rw[k].group < 0 || sc->rw[k].group > (int)sc->ngroups ||
		    (!sc->rw[k].group && sc->rw[k].tenant >= sc->ntenants))
			return false;
	for (uint32_t w = 0; w < sc->nwindows; w++)
		if (sc->w[w].from_ns >= sc->w[w].to_ns || sc->w[w].to_ns > sc->duration_ns)
			return false;
	return true;
}

int sim_run(const struct sim_scenario *sc, const struct sched_params *p, struct sim_result *out)
{
	if (!scenario_valid(sc))
		return -EINVAL;
	struct sched_params sp = *p;
	if (sc->max_inflight)
		sp.max_inflight = sc->max_inflight;
	struct sim m = { .sc = sc, .rng = sc->seed, .timer_at_ns = SCHED_DEADLINE_NONE };
	int err = sched_new(&sp, &m.s);
	if (err)
		return err;
	/* Parents first: sc->g lists them before their children. */
	for (uint32_t k = 0; k < sc->ngroups && !sc->flat && !err; k++) {
		int parent = sc->g[k].parent;
		err = sched_group_get(m.s, k + 1, parent ? m.groups[parent - 1] : NULL,
				      sc->g[k].weight, &m.groups[k]);
	}
	for (uint32_t i = 0; i < sc->ntenants && !err; i++) {
		err = sched_queue_get(m.s, i + 1, sc->t[i].weight, &m.ts[i].q);
		if (!err && sc->t[i].group && !sc->flat)
			sched_queue_set_parent(m.s, m.ts[i].q, m.groups[sc->t[i].group - 1]);
	}
	for (uint32_t i = 0; i < sc->ntenants && !err; i++)
		for (uint32_t j = 0; j < sc->t[i].depth; j++)
			arrive_at(&m, sc->t[i].start_ns + i * 1000 + j * 100, i, j, -1, 0);
	for (uint32_t k = 0; k < sc->nreweights && !err; k++)
		ev_push(&m, (struct ev){ .at_ns = sc->rw[k].at_ns, .type = EV_REWEIGHT, .rw = k });
	while (!err && !m.err && m.nev) {
		struct ev e = ev_pop(&m);
		if (e.at_ns >= sc->duration_ns)
			break;
		m.now_ns = e.at_ns;
		switch (e.type) {
		case EV_ARRIVE:
			on_arrive(&m, &e);
			break;
		case EV_DONE:
			on_done(&m, e.r);
			break;
		case EV_HOST:
			on_host_done(&m, &e);
			break;
		case EV_REAP:
			on_reap(&m);
			break;
		case EV_REWEIGHT:
			on_reweight(&m, &sc->rw[e.rw]);
			break;
		case EV_TIMER:
			if (e.at_ns == m.timer_at_ns)
				m.timer_at_ns = SCHED_DEADLINE_NONE;
			if (m.now_ns >= sched_next_deadline(m.s))
				sched_timer(m.s, m.now_ns);
			break;
		}
		pump(&m);
	}
	if (!err)
		err = m.err;
	if (!err)
		results_fill(&m, out);
	/* Requests still at the store or queued are simply dropped here. */
	for (size_t i = 0; i < m.nallocs; i++)
		free(m.allocs[i]);
	free(m.allocs);
	free(m.host_q);
	for (uint32_t i = 0; i < sc->ntenants; i++)
		free(m.ts[i].lat.v);
	free(m.heap);
	sched_free(m.s);
	return err;
}

/* ---- the tree's promise (sim_tree_share) ---- */

struct tree_model {
	const struct sim_scenario *sc;
	uint32_t gw[SIM_MAX_GROUPS], tw[SIM_MAX_TENANTS];
	bool g_active[SIM_MAX_GROUPS], t_active[SIM_MAX_TENANTS];
};

/* Tenants running at at_ns, groups with one beneath them, weights then. */
static void model_at(const struct sim_scenario *sc, uint64_t at_ns, struct tree_model *md)
{
	memset(md, 0, sizeof(*md));
	md->sc = sc;
	for (uint32_t k = 0; k < sc->ngroups; k++)
		md->gw[k] = sc->g[k].weight;
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		const struct sim_tenant *t = &sc->t[i];
		md->tw[i] = t->weight;
		md->t_active[i] = t->depth && at_ns >= t->start_ns && (!t->stop_ns || at_ns < t->stop_ns);
		for (uint32_t k = 0; k < sc->ngroups && md->t_active[i]; k++)
			md->g_active[k] |= sim_in_group(sc, t->group, k);
	}
	for (uint32_t k = 0; k < sc->nreweights; k++) {
		const struct sim_reweight *rw = &sc->rw[k];
		if (rw->at_ns > at_ns)
			continue;
		if (rw->group)
			md->gw[rw->group - 1] = rw->weight;
		else
			md->tw[rw->tenant] = rw->weight;
	}
}

static double model_group(const struct tree_model *md, uint32_t k);

/* A child of weight w of parent (as sim_tenant.group): its part of the
 * parent's share by weight among the parent's active children. */
static double model_child(const struct tree_model *md, int parent, uint32_t w)
{
	const struct sim_scenario *sc = md->sc;
	uint64_t sum = 0;
	for (uint32_t k = 0; k < sc->ngroups && !sc->flat; k++)
		if (md->g_active[k] && sc->g[k].parent == parent)
			sum += md->gw[k];
	for (uint32_t i = 0; i < sc->ntenants; i++)
		if (md->t_active[i] && (sc->flat ? 0 : sc->t[i].group) == parent)
			sum += md->tw[i];
	double ps = parent ? model_group(md, (uint32_t)parent - 1) : 1.0;
	return sum ? ps * w / (double)sum : 0;
}

static double model_group(const struct tree_model *md, uint32_t k)
{
	const struct sim_scenario *sc = md->sc;
	if (!md->g_active[k])
		return 0;
	if (!sc->flat)
		return model_child(md, sc->g[k].parent, md->gw[k]);
	double share = 0;	/* flat: what its tenants get at the root */
	for (uint32_t i = 0; i < sc->ntenants; i++)
		if (md->t_active[i] && sim_in_group(sc, sc->t[i].group, k))
			share += model_child(md, 0, md->tw[i]);
	return share;
}

double sim_tree_share(const struct sim_scenario *sc, uint64_t at_ns, int tenant)
{
	struct tree_model md;
	model_at(sc, at_ns, &md);
	if (tenant < 0 || (uint32_t)tenant >= sc->ntenants || !md.t_active[tenant])
		return 0;
	return model_child(&md, sc->flat ? 0 : sc->t[tenant].group, md.tw[tenant]);
}

double sim_tree_group_share(const struct sim_scenario *sc, uint64_t at_ns, int group)
{
	struct tree_model md;
	model_at(sc, at_ns, &md);
	if (group < 0 || (uint32_t)group >= sc->ngroups)
		return 0;
	return model_group(&md, (uint32_t)group);
}
