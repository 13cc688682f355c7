/* The shape matrix (issue 23): workload shapes drawn from a seed, and the
 * properties bfq must keep on every one of them (sim.h). Nothing here is
 * tuned to the scheduler: the generator draws from the ranges the issue
 * names, and the targets come from the weights and the tenants' solo rates
 * alone. */
#include "sim.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define US 1000ull
#define MS 1000000ull
#define KIB 1024ull

/* ---- the generator ---- */

struct gen {
	uint64_t s;
};

static uint64_t gen_next(struct gen *g)
{
	return sim_splitmix64(&g->s);
}

static double gen_unit(struct gen *g)
{
	return (double)(gen_next(g) >> 11) * 0x1.0p-53;
}

static uint32_t gen_below(struct gen *g, uint32_t n)
{
	return (uint32_t)(gen_next(g) % n);
}

static bool gen_chance(struct gen *g, double p)
{
	return gen_unit(g) < p;
}

/* Log-uniform in lo..hi: 1-10 as likely as 100-1000, so tiny and huge
 * weights and depths next to each other are common, not a corner. */
static uint64_t gen_log(struct gen *g, uint64_t lo, uint64_t hi)
{
	double v = exp(log((double)lo) + gen_unit(g) * (log((double)hi + 1) - log((double)lo)));
	uint64_t x = (uint64_t)v;
	return x < lo ? lo : x > hi ? hi : x;
}

static const char *const pod_names[SIM_MAX_GROUPS] = { "pod1", "pod2", "pod3", "pod4" };

/* The kinds of caller, as sim_tenant fields. */
enum caller { C_READ, C_DIRECT, C_DSYNC, C_BUFFERED, C_FSYNC };

static enum caller caller_of(const struct sim_tenant *t)
{
	if (t->op == SCHED_OP_READ)
		return C_READ;
	if (t->op != SCHED_OP_WRITE)
		return C_FSYNC;
	if (!t->sync)
		return C_BUFFERED;
	return t->dsync ? C_DSYNC : C_DIRECT;
}

static void tenant_draw(struct gen *g, struct sim_tenant *t, bool fuse, uint32_t ngroups)
{
	static const char *const names[] = { "read", "direct", "dsync", "buffered", "fsync" };
	double u = gen_unit(g);
	enum caller c = u < 0.40 ? C_READ : u < 0.60 ? C_DIRECT : u < 0.75 ? C_DSYNC
			: u < 0.93 ? C_BUFFERED : C_FSYNC;
	*t = (struct sim_tenant){ .name = names[c], .journal = -1 };
	t->weight = (uint32_t)gen_log(g, 1, 1000);
	t->depth = (uint32_t)gen_log(g, 1, 64);
	t->bytes = 4 * KIB << gen_below(g, 9);	/* 4 KiB .. 1 MiB */
	t->op = c == C_READ ? SCHED_OP_READ : c == C_FSYNC ? SCHED_OP_FSYNC : SCHED_OP_WRITE;
	t->sync = c != C_BUFFERED;
	t->dsync = c == C_DSYNC;
	/* Think time: mostly a FUSE round trip's tens of microseconds, else up
	 * to a millisecond (a caller computing between requests). */
	double th = gen_unit(g);
	t->think_ns = th < 0.1 ? 0 : th < 0.55 ? 10 * US + gen_below(g, 20) * US
			: gen_log(g, 30, 1000) * US;
	/* Callers losing their CPU now and then: common on the loaded FUSE
	 * host (S4_fuse), rarer in front of the bare store. */
	if (gen_chance(g, fuse ? 0.5 : 0.2)) {
		uint32_t most = t->depth < 4 ? t->depth : 4;
		t->threads = 1 + gen_below(g, most);
		t->stall_ns = (1 + gen_below(g, 5)) * MS;
		t->stall_permille = 5 + gen_below(g, 46);
	}
	if (c == C_FSYNC) {
		/* A committer: a barrier or two at a time. No bytes, so it is
		 * outside the byte shares; at the root, so that what it takes
		 * comes off every byte tenant's share alike. */
		t->bytes = 0;
		t->depth = 1 + gen_below(g, 2);
		t->threads = 0;
		t->stall_ns = 0;
		t->stall_permille = 0;
		return;
	}
	if (ngroups && gen_chance(g, 0.7))
		t->group = 1 + (int)gen_below(g, ngroups);
}

void sim_matrix_shape(uint64_t seed, struct sim_scenario *sc)
{
	struct gen g = { .s = seed * 0x2545f4914f6cdd1dull + 0x6d6174726978ull };
	memset(sc, 0, sizeof(*sc));
	sc->name = "matrix";
	sc->about = "a shape of the seeded matrix (sim_matrix_describe)";
	/* The two hosts of the scenarios: the bare fast store (S1..S5), and
	 * S4_fuse's loaded FUSE host that reaps and dispatches in batches. */
	bool fuse = gen_chance(&g, 0.5);
	if (fuse) {
		sim_device_fast(&sc->dev, 32);
		sc->dev.base_ns[SIM_COST_READ] = 100 * US;
		sc->host.reactor_wake_ns = 1000 * US;
		sc->max_inflight = 32;
	} else {
		sim_device_fast(&sc->dev, 16);
		sc->max_inflight = 16;
	}
	sc->seed = gen_next(&g);
	sc->warmup_ns = SIM_MATRIX_WARMUP_NS;
	sc->duration_ns = SIM_MATRIX_WARMUP_NS + SIM_MATRIX_WINDOWS * SIM_MATRIX_WINDOW_NS;
	sc->nwindows = SIM_MATRIX_WINDOWS;
	for (uint32_t w = 0; w < SIM_MATRIX_WINDOWS; w++)
		sc->w[w] = (struct sim_window){ sc->warmup_ns + w * SIM_MATRIX_WINDOW_NS,
						sc->warmup_ns + (w + 1) * SIM_MATRIX_WINDOW_NS };
	/* Pods in a third of the shapes, now and then one inside another. */
	if (gen_chance(&g, 0.3)) {
		sc->ngroups = 1 + gen_below(&g, 3);
		for (uint32_t k = 0; k < sc->ngroups; k++)
			sc->g[k] = (struct sim_group){
				.name = pod_names[k], .weight = (uint32_t)gen_log(&g, 1, 1000),
				.parent = k && gen_chance(&g, 0.3) ? 1 + (int)gen_below(&g, k) : 0 };
	}
	sc->ntenants = 2 + gen_below(&g, 7);
	for (uint32_t i = 0; i < sc->ntenants; i++)
		tenant_draw(&g, &sc->t[i], fuse, sc->ngroups);
	/* In a quarter of the shapes the store serves fewer requests at once
	 * than the scheduler sends (max_inflight set above the store's
	 * parallelism, as its default can be): the rest wait in the store's
	 * own queue. Drawn last, so the other draws of a seed stay as they
	 * were. */
	if (gen_chance(&g, 0.25))
		sc->dev.slots = 1 + gen_below(&g, sc->max_inflight / 4);
}

static int put(char *buf, size_t n, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int put(char *buf, size_t n, size_t *at, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = *at < n ? vsnprintf(buf + *at, n - *at, fmt, ap) : 0;
	va_end(ap);
	if (k > 0)
		*at += (size_t)k;
	return k;
}

static void size_text(char *out, size_t n, uint64_t bytes)
{
	if (bytes >= 1024 * KIB)
		snprintf(out, n, "%lum", (unsigned long)(bytes / (1024 * KIB)));
	else
		snprintf(out, n, "%luk", (unsigned long)(bytes / KIB));
}

void sim_matrix_describe_tenant(const struct sim_scenario *sc, uint32_t i, char *buf, size_t n)
{
	static const char letters[] = "RWDBF";
	const struct sim_tenant *t = &sc->t[i];
	size_t at = 0;
	char sz[16];
	size_text(sz, sizeof(sz), t->bytes);
	put(buf, n, &at, "%c%s:%u@%u", letters[caller_of(t)], t->bytes ? sz : "", t->depth,
	    t->weight);
	if (t->think_ns != 10 * US)
		put(buf, n, &at, "+t%lu", (unsigned long)(t->think_ns / US));
	if (t->threads && t->stall_permille)
		put(buf, n, &at, "+s%u/%lums/%u", t->threads, (unsigned long)(t->stall_ns / MS),
		    t->stall_permille);
	if (t->group)
		put(buf, n, &at, "/p%d", t->group);
}

void sim_matrix_describe(const struct sim_scenario *sc, char *buf, size_t n)
{
	size_t at = 0;
	buf[0] = 0;
	put(buf, n, &at, "%s", sc->host.reactor_wake_ns ? "fuse" : "fast");
	if (sc->dev.slots < sc->max_inflight)
		put(buf, n, &at, " q%u", sc->dev.slots);
	for (uint32_t k = 0; k < sc->ngroups; k++) {
		put(buf, n, &at, " p%u@%u", k + 1, sc->g[k].weight);
		if (sc->g[k].parent)
			put(buf, n, &at, "/p%d", sc->g[k].parent);
	}
	put(buf, n, &at, " |");
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		char t[96];
		sim_matrix_describe_tenant(sc, i, t, sizeof(t));
		put(buf, n, &at, " %s", t);
	}
}

/* ---- the targets ---- */

/* What a node of the tree could use: a tenant its demand, a group the sum
 * of its subtree's. Negative demand: not in the pool. */
static double group_demand(const struct sim_scenario *sc, uint32_t k, const double *demand)
{
	double d = 0;
	for (uint32_t i = 0; i < sc->ntenants; i++)
		if (sc->t[i].group == (int)k + 1 && demand[i] > 0)
			d += demand[i];
	for (uint32_t j = k + 1; j < sc->ngroups; j++)
		if (sc->g[j].parent == (int)k + 1)
			d += group_demand(sc, j, demand);
	return d;
}

struct fill_child {
	double w, d, ratio;
	int tenant, group;	/* one of them >= 0 */
};

/* Max-min fair by weight among the children of parent: raise every child's
 * rate with its weight until it reaches its demand; what a child cannot
 * use goes to the others, by weight. Children in ascending demand per
 * weight: each takes the smaller of its demand and its weight's part of
 * what is left, so once one is capped, all after it are too, at the same
 * level. Then each group divides what it got among its own children. */
static void fill(const struct sim_scenario *sc, int parent, double amount, const double *demand,
		 double *target)
{
	struct fill_child c[SIM_MAX_TENANTS + SIM_MAX_GROUPS];
	uint32_t n = 0;
	for (uint32_t i = 0; i < sc->ntenants; i++)
		if (sc->t[i].group == parent && demand[i] > 0)
			c[n++] = (struct fill_child){ sc->t[i].weight, demand[i], 0, (int)i, -1 };
	for (uint32_t k = 0; k < sc->ngroups; k++) {
		if (sc->g[k].parent != parent)
			continue;
		double d = group_demand(sc, k, demand);
		if (d > 0)
			c[n++] = (struct fill_child){ sc->g[k].weight, d, 0, -1, (int)k };
	}
	double wsum = 0;
	for (uint32_t j = 0; j < n; j++) {
		c[j].ratio = c[j].d / c[j].w;
		wsum += c[j].w;
	}
	for (uint32_t j = 1; j < n; j++)	/* insertion sort: a handful */
		for (uint32_t k = j; k > 0 && c[k].ratio < c[k - 1].ratio; k--) {
			struct fill_child x = c[k];
			c[k] = c[k - 1];
			c[k - 1] = x;
		}
	double left = amount;
	for (uint32_t j = 0; j < n; j++) {
		double fair = wsum > 0 ? left * c[j].w / wsum : 0;
		double give = c[j].d < fair ? c[j].d : fair;
		left -= give;
		wsum -= c[j].w;
		if (c[j].tenant >= 0)
			target[c[j].tenant] = give;
		else
			fill(sc, c[j].group + 1, give, demand, target);
	}
}

void sim_matrix_waterfill(const struct sim_scenario *sc, double amount, const double *demand,
			  double *target)
{
	for (uint32_t i = 0; i < sc->ntenants; i++)
		target[i] = 0;
	fill(sc, 0, amount, demand, target);
}

/* ---- the checks ---- */

static void violation_add(struct sim_matrix_outcome *o, enum sim_prop prop, int tenant, int window,
			  double got, double want, double off, const char *fmt, ...)
	__attribute__((format(printf, 8, 9)));

static void violation_add(struct sim_matrix_outcome *o, enum sim_prop prop, int tenant, int window,
			  double got, double want, double off, const char *fmt, ...)
{
	o->failed[prop] = true;
	if (o->nviol == SIM_MATRIX_MAX_VIOLATIONS)
		return;
	struct sim_violation *v = &o->v[o->nviol++];
	*v = (struct sim_violation){ .prop = prop, .tenant = tenant, .window = window, .got = got,
				     .want = want, .off = off };
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(v->why, sizeof(v->why), fmt, ap);
	va_end(ap);
	if (o->nviol == 1 || off > o->v[o->worst].off)
		o->worst = o->nviol - 1;
}

static const char *const prop_names[SIM_PROP_NR] = { "share", "shallow", "total" };

const char *sim_prop_name(enum sim_prop p)
{
	return p < SIM_PROP_NR ? prop_names[p] : "?";
}

void sim_matrix_check(const struct sim_scenario *sc, const struct sim_solo *solo,
		      const struct sim_result *bfq, const struct sim_result *fifo,
		      struct sim_matrix_outcome *o)
{
	o->nviol = o->worst = 0;
	for (int p = 0; p < SIM_PROP_NR; p++)
		o->checked[p] = o->failed[p] = false;
	double demand[SIM_MAX_TENANTS];
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		o->t[i].solo = solo[i];
		demand[i] = solo[i].slots > 0 ? solo[i].slots : -1;
	}
	for (uint32_t w = 0; w < sc->nwindows; w++) {
		const struct sim_window_result *wr = &bfq->w[w];
		double secs = (double)(sc->w[w].to_ns - sc->w[w].from_ns) / 1e9;
		double total = (double)wr->total_store_ns / 1e9 / secs;
		double got[SIM_MAX_TENANTS], fair[SIM_MAX_TENANTS], left[SIM_MAX_TENANTS];
		double split[SIM_MAX_TENANTS];
		/* Who could use more than its part: the fair division of the slot
		 * time bfq used, every tenant wanting its solo rate. */
		sim_matrix_waterfill(sc, total, demand, fair);
		for (uint32_t i = 0; i < sc->ntenants; i++) {
			struct sim_matrix_tenant *mt = &o->t[i];
			got[i] = (double)wr->t_store_ns[i] / 1e9 / secs;
			mt->got[w] = got[i];
			mt->target[w] = fair[i];
			if (demand[i] <= 0)
				mt->cls[w] = SIM_CLASS_NONE;
			else if (demand[i] >= SIM_MATRIX_BACKLOG_MARGIN * fair[i])
				mt->cls[w] = SIM_CLASS_BACKLOGGED;
			else
				mt->cls[w] = SIM_CLASS_SHALLOW;
			/* The backlogged divide what the others left, each other
			 * keeping what it got: a shallow tenant's shortfall is not
			 * capacity anyone could have used, and is judged by the
			 * shallow rule. A lone backlogged tenant is then owed what
			 * it got. */
			left[i] = mt->cls[w] == SIM_CLASS_SHALLOW ? got[i]
				  : mt->cls[w] == SIM_CLASS_BACKLOGGED ? fmax(demand[i], got[i]) : -1;
		}
		sim_matrix_waterfill(sc, total, left, split);
		for (uint32_t i = 0; i < sc->ntenants; i++) {
			struct sim_matrix_tenant *mt = &o->t[i];
			/* A window holds whole requests, and a batch reaped at its
			 * edge lands on one side: two requests is its grain. */
			double grain = 2 * solo[i].slot_s_per_op / secs;
			if (mt->cls[w] == SIM_CLASS_BACKLOGGED) {
				double want = split[i], tol = SIM_MATRIX_SHARE_TOL * want;
				mt->target[w] = want;
				o->checked[SIM_PROP_SHARE] = true;
				tol = tol > grain ? tol : grain;
				if (got[i] < want - tol || got[i] > want + tol)
					violation_add(o, SIM_PROP_SHARE, (int)i, (int)w, got[i], want,
						      want > 0 ? fabs(got[i] - want) / want : 1,
						      "share: t%u %s window %u: %.3f slots, target %.3f (%+.0f%%)",
						      i, sc->t[i].name, w, got[i], want,
						      (got[i] / want - 1) * 100);
			} else if (mt->cls[w] == SIM_CLASS_SHALLOW) {
				o->checked[SIM_PROP_SHALLOW] = true;
				if (got[i] < SIM_MATRIX_SHALLOW_MIN * fair[i] - grain)
					violation_add(o, SIM_PROP_SHALLOW, (int)i, (int)w, got[i], fair[i],
						      1 - got[i] / fair[i],	/* fair > 0 here */
						      "shallow: t%u %s window %u: %.3f slots, solo %.3f, target %.3f (%.0f%%)",
						      i, sc->t[i].name, w, got[i], demand[i], fair[i],
						      got[i] / fair[i] * 100);
			}
		}
	}
	/* Work done: the store's slot time, whoever it went to (sim.h: why
	 * not bytes); the bytes are kept for the record. */
	o->checked[SIM_PROP_TOTAL] = true;
	o->bfq_busy = bfq->store_busy;
	o->fifo_busy = fifo->store_busy;
	o->bfq_mb = bfq->total_mb_per_s;
	o->fifo_mb = fifo->total_mb_per_s;
	if (o->bfq_busy < SIM_MATRIX_TOTAL_MIN * o->fifo_busy)	/* so fifo_busy > 0 */
		violation_add(o, SIM_PROP_TOTAL, -1, -1, o->bfq_busy, o->fifo_busy,
			      1 - o->bfq_busy / o->fifo_busy,
			      "total: store busy %.2f slots, fifo %.2f (%.0f%%); %.1f MB/s, fifo %.1f",
			      o->bfq_busy, o->fifo_busy, o->bfq_busy / o->fifo_busy * 100, o->bfq_mb,
			      o->fifo_mb);
}

/* ---- running a shape ---- */

int sim_matrix_solo(const struct sim_scenario *sc, uint32_t i, struct sim_solo *out)
{
	struct sim_scenario solo = *sc;
	struct sched_params p;
	struct sim_result r;
	solo.ntenants = 1;
	solo.t[0] = sc->t[i];
	solo.t[0].group = 0;
	solo.ngroups = 0;
	solo.nwindows = 0;
	solo.nreweights = 0;
	/* a steady rate: short is enough, the tenant's own behaviour is all */
	solo.warmup_ns = SIM_MATRIX_SOLO_WARMUP_NS;
	solo.duration_ns = SIM_MATRIX_SOLO_NS;
	sim_params_fifo(&p);
	int err = sim_run(&solo, &p, &r);
	if (err)
		return err;
	double secs = (double)(solo.duration_ns - solo.warmup_ns) / 1e9;
	out->mb_per_s = r.t[0].mb_per_s;
	out->slots = (double)r.t[0].store_ns / 1e9 / secs;
	out->slot_s_per_op = r.t[0].ops ? (double)r.t[0].store_ns / 1e9 / (double)r.t[0].ops : 0;
	return 0;
}

int sim_matrix_run(const struct sim_scenario *sc, void (*set)(struct sched_params *p),
		   struct sim_matrix_outcome *o)
{
	struct sched_params p;
	struct sim_solo solo[SIM_MAX_TENANTS];
	memset(o, 0, sizeof(*o));
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		int err = sim_matrix_solo(sc, i, &solo[i]);
		if (err)
			return err;
	}
	set(&p);
	int err = sim_run(sc, &p, &o->bfq);
	if (err)
		return err;
	sim_params_fifo(&p);
	err = sim_run(sc, &p, &o->fifo);
	if (err)
		return err;
	sim_matrix_check(sc, solo, &o->bfq, &o->fifo, o);
	return 0;
}
