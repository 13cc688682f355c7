/* fusesched-sim: the scenario table for people (bfq vs fifo vs bfq without
 * injection / idling; for H1..H6 also bfq with every tenant at the root),
 * --bench-scale, the per-request cost at 10, 1000 and 10000 tenants, and
 * --matrix / --shape, the seeded shape matrix and its properties (sim.h),
 * with --set PARAM=VALUE to try any scheduler tunable on it. */
#include "sim.h"
#include "fusesched/clock.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct policy {
	const char *name;
	void (*set)(struct sched_params *p);
};

static const struct policy policies[] = {
	{ "bfq", sim_params_bfq },
	{ "fifo", sim_params_fifo },
	{ "bfq-noinject", sim_params_bfq_noinject },
	{ "bfq-noidle", sim_params_bfq_noidle },
	{ "bfq-fixedidle", sim_params_bfq_fixed_idle },
	{ "bfq-learndepth", sim_params_bfq_learn_depth },
	{ "bfq-strict", sim_params_bfq_strict },
	{ "bfq-nohold", sim_params_bfq_nohold },
	{ "bfq-noaway", sim_params_bfq_noaway },
};

#define NPOLICIES (sizeof(policies) / sizeof(policies[0]))

/* P_FLAT, the bit after the policies': bfq, the groups left out
 * (sim_scenario.flat). */
enum { P_BFQ = 1 << 0, P_FIFO = 1 << 1, P_NOINJ = 1 << 2, P_NOIDLE = 1 << 3, P_FIXED = 1 << 4,
       P_NOHOLD = 1 << 5, P_NOAWAY = 1 << 6, P_FLAT = 1 << NPOLICIES };

static void print_result(const struct sim_scenario *sc, const char *policy, const struct sim_result *r)
{
	for (uint32_t i = 0; i < r->ntenants;) {
		uint32_t j = i + 1;
		while (j < r->ntenants && !strcmp(sc->t[j].name, sc->t[i].name))
			j++;
		double mb = 0, share = 0;
		uint64_t p50 = 0, p99 = 0, max = 0, idle = 0, inj = 0;
		for (uint32_t k = i; k < j; k++) {
			const struct sim_tenant_result *t = &r->t[k];
			mb += t->mb_per_s;
			share += t->share;
			idle += t->st.idle_windows;
			for (int x = 0; x < SCHED_INJECT_NR; x++)
				inj += t->st.injected_ops[x];
			p50 = t->lat_p50_ns > p50 ? t->lat_p50_ns : p50;
			p99 = t->lat_p99_ns > p99 ? t->lat_p99_ns : p99;
			max = t->lat_max_ns > max ? t->lat_max_ns : max;
		}
		char name[48];
		if (j - i > 1)
			snprintf(name, sizeof(name), "%s x%u", sc->t[i].name, j - i);
		else
			snprintf(name, sizeof(name), "%s", sc->t[i].name);
		printf("  %-13s %-16s %4u %10.2f %6.1f%% %9.0f %9.0f %9.0f %7lu %7lu\n", policy, name,
		       sc->t[i].weight, mb, share * 100, p50 / 1e3, p99 / 1e3, max / 1e3,
		       (unsigned long)idle, (unsigned long)inj);
		i = j;
	}
	printf("  %-13s %-16s %4s %10.2f\n", policy, "total", "", r->total_mb_per_s);
}

/* ---- H1..H6: rows in tree order, groups summed over their subtrees ---- */

struct span {
	double mb, share;
	uint64_t p50, p99, max, idle, inj;
};

static void span_add(struct span *a, const struct sim_tenant_result *t)
{
	a->mb += t->mb_per_s;
	a->share += t->share;
	a->idle += t->st.idle_windows;
	for (int x = 0; x < SCHED_INJECT_NR; x++)
		a->inj += t->st.injected_ops[x];
	a->p50 = t->lat_p50_ns > a->p50 ? t->lat_p50_ns : a->p50;
	a->p99 = t->lat_p99_ns > a->p99 ? t->lat_p99_ns : a->p99;
	a->max = t->lat_max_ns > a->max ? t->lat_max_ns : a->max;
}

/* "promise": the share the tree gives it if everyone is backlogged, at the
 * end of the warm-up (scenarios whose promise changes have windows). */
static void span_print(const char *policy, int indent, const char *name, uint32_t wt,
		       const struct span *a, double promise)
{
	char label[64];
	snprintf(label, sizeof(label), "%*s%s", 2 * indent, "", name);
	printf("  %-13s %-20s %4u %10.2f %6.1f%% %6.1f%% %9.0f %9.0f %9.0f %7lu %7lu\n", policy,
	       label, wt, a->mb, a->share * 100, promise * 100, a->p50 / 1e3, a->p99 / 1e3,
	       a->max / 1e3, (unsigned long)a->idle, (unsigned long)a->inj);
}

/* The children of parent (as sim_tenant.group): its tenants, runs of
 * identical names summed, then its groups with their subtrees. */
static void print_children(const struct sim_scenario *sc, const char *policy,
			   const struct sim_result *r, int parent, int indent)
{
	uint64_t at = sc->warmup_ns;
	for (uint32_t i = 0; i < r->ntenants;) {
		if (sc->t[i].group != parent) {
			i++;
			continue;
		}
		uint32_t j = i + 1;
		while (j < r->ntenants && sc->t[j].group == parent &&
		       !strcmp(sc->t[j].name, sc->t[i].name))
			j++;
		struct span a = { 0 };
		double promise = 0;
		for (uint32_t k = i; k < j; k++) {
			span_add(&a, &r->t[k]);
			promise += sim_tree_share(sc, at, (int)k);
		}
		char name[48];
		if (j - i > 1)
			snprintf(name, sizeof(name), "%s x%u", sc->t[i].name, j - i);
		else
			snprintf(name, sizeof(name), "%s", sc->t[i].name);
		span_print(policy, indent, name, sc->t[i].weight, &a, promise);
		i = j;
	}
	for (uint32_t k = 0; k < sc->ngroups; k++) {
		if (sc->g[k].parent != parent)
			continue;
		struct span a = { 0 };
		for (uint32_t i = 0; i < r->ntenants; i++)
			if (sim_in_group(sc, sc->t[i].group, k))
				span_add(&a, &r->t[i]);
		char name[48];
		snprintf(name, sizeof(name), "%s/", sc->g[k].name);
		span_print(policy, indent, name, sc->g[k].weight, &a,
			   sim_tree_group_share(sc, at, (int)k));
		print_children(sc, policy, r, (int)k + 1, indent + 1);
	}
}

/* Each window: the groups' and the root tenants' shares, promise in (). */
static void print_windows(const struct sim_scenario *sc, const char *policy,
			  const struct sim_result *r)
{
	for (uint32_t w = 0; w < r->nwindows; w++) {
		const struct sim_window_result *wr = &r->w[w];
		uint64_t at = sc->w[w].from_ns;
		printf("  %-13s %4lu-%lu ms:", policy, (unsigned long)(sc->w[w].from_ns / 1000000),
		       (unsigned long)(sc->w[w].to_ns / 1000000));
		for (uint32_t k = 0; k < sc->ngroups; k++)
			printf(" %s/ %.1f%% (%.1f)", sc->g[k].name, wr->g_share[k] * 100,
			       sim_tree_group_share(sc, at, (int)k) * 100);
		for (uint32_t i = 0; i < r->ntenants; i++)
			if (!sc->t[i].group)
				printf(" %s %.1f%% (%.1f)", sc->t[i].name, wr->t_share[i] * 100,
				       sim_tree_share(sc, at, (int)i) * 100);
		printf(", total %.2f MB/s\n", wr->total_mb_per_s);
	}
}

static void print_tree(const struct sim_scenario *sc, const char *policy, const struct sim_result *r)
{
	print_children(sc, policy, r, 0, 0);
	printf("  %-13s %-20s %4s %10.2f\n", policy, "total", "", r->total_mb_per_s);
	print_windows(sc, policy, r);
}

static int run_tree_table(const struct sim_scenario *sc, unsigned which)
{
	printf("\n%s: %s (%u slots, max_inflight %u, %.1f s)\n", sc->name, sc->about, sc->dev.slots,
	       sc->max_inflight, (double)sc->duration_ns / 1e9);
	printf("  %-13s %-20s %4s %10s %7s %7s %9s %9s %9s %7s %7s\n", "policy", "tenant", "wt",
	       "MB/s", "share", "promise", "p50 us", "p99 us", "max us", "idled", "inject");
	for (size_t i = 0; i <= NPOLICIES; i++) {
		bool flat = i == NPOLICIES;
		if (!(which & (1u << i)))
			continue;
		struct sim_scenario run_sc = *sc;
		struct sched_params p;
		struct sim_result r;
		run_sc.flat = flat;
		(flat ? sim_params_bfq : policies[i].set)(&p);
		int err = sim_run(&run_sc, &p, &r);
		if (err) {
			fprintf(stderr, "fusesched-sim: %s: %s\n", sc->name, strerror(-err));
			return 1;
		}
		print_tree(&run_sc, flat ? "bfq-flat" : policies[i].name, &r);
	}
	return 0;
}

static int run_table(const struct sim_scenario *sc, unsigned which)
{
	if (sc->ngroups)
		return run_tree_table(sc, which);
	printf("\n%s: %s (%u slots, max_inflight %u, %.1f s)\n", sc->name, sc->about, sc->dev.slots,
	       sc->max_inflight, (double)sc->duration_ns / 1e9);
	printf("  %-13s %-16s %4s %10s %7s %9s %9s %9s %7s %7s\n", "policy", "tenant", "wt", "MB/s",
	       "share", "p50 us", "p99 us", "max us", "idled", "inject");
	for (size_t i = 0; i < sizeof(policies) / sizeof(policies[0]); i++) {
		if (!(which & (1u << i)))
			continue;
		struct sched_params p;
		struct sim_result r;
		policies[i].set(&p);
		int err = sim_run(sc, &p, &r);
		if (err) {
			fprintf(stderr, "fusesched-sim: %s: %s\n", sc->name, strerror(-err));
			return 1;
		}
		print_result(sc, policies[i].name, &r);
	}
	return 0;
}

/* The reference the property is measured against: the tenant alone. */
static int run_solo(const struct sim_scenario *sc, void (*set)(struct sched_params *p))
{
	struct sched_params p;
	struct sim_result r;
	set(&p);
	int err = sim_run(sc, &p, &r);
	if (err) {
		fprintf(stderr, "fusesched-sim: %s: %s\n", sc->name, strerror(-err));
		return 1;
	}
	printf("  %-13s %-16s %4u %10.2f\n", "alone", sc->t[0].name, sc->t[0].weight,
	       r.t[0].mb_per_s);
	return 0;
}

static int table(void)
{
	struct sim_scenario sc;
	int rc = 0;
	sim_scenario_s1_journal(&sc, 100);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOINJ);
	sim_scenario_s1_journal(&sc, 400);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOINJ);
	sim_scenario_s2_rate_limited(&sc, true);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOINJ | P_FIXED);
	sim_scenario_s2_rate_limited(&sc, false);
	rc |= run_solo(&sc, sim_params_bfq);
	sim_scenario_s3_streaming(&sc, true);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOINJ);
	sim_scenario_s3_streaming(&sc, false);
	rc |= run_solo(&sc, sim_params_fifo);
	sim_scenario_s4_weights(&sc, 2);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOINJ);
	sim_scenario_s4_weights(&sc, 3);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOINJ);
	sim_scenario_s4_fuse(&sc, 2);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOHOLD | P_NOAWAY);
	sim_scenario_s4_fuse(&sc, 3);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOHOLD | P_NOAWAY);
	sim_scenario_s5_sync_reader(&sc, 1, true);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOINJ | P_NOIDLE);
	sim_scenario_s5_sync_reader(&sc, 16, true);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_NOINJ | P_NOIDLE);
	sim_scenario_s5_sync_reader(&sc, 16, false);
	rc |= run_solo(&sc, sim_params_bfq);
	sim_scenario_h1_pods(&sc);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT);
	sim_scenario_h1_pods_fuse(&sc);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT | P_NOHOLD | P_NOAWAY);
	sim_scenario_h2_equal_pods(&sc);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT);
	sim_scenario_h2_equal_pods_fuse(&sc);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT);
	sim_scenario_h3_delegated(&sc);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT);
	sim_scenario_h4_nested(&sc);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT);
	sim_scenario_h5_sync_reader(&sc, 1, true);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT | P_NOIDLE);
	sim_scenario_h5_sync_reader(&sc, 16, true);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT | P_NOINJ);
	sim_scenario_h5_journal(&sc);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT | P_NOINJ);
	sim_scenario_h6_reweight(&sc);
	rc |= run_table(&sc, P_BFQ | P_FIFO | P_FLAT);
	return rc;
}

/* Steady state: every completion is followed by a new request of a random
 * tenant and a dispatch round, as the engine does. Virtual time advances
 * 2 us per request; the wall clock measures only the scheduler calls. */
static int bench_one(uint32_t ntenants, uint32_t iters)
{
	struct sched_params p;
	sched_params_default(&p);
	struct sched *s;
	int err = sched_new(&p, &s);
	if (err)
		return err;
	uint32_t nreq = ntenants * 2 + p.max_inflight;
	struct sched_req *reqs = calloc(nreq, sizeof(*reqs));
	struct sched_req **ring = calloc(p.max_inflight, sizeof(*ring));
	struct sched_queue **qs = calloc(ntenants, sizeof(*qs));
	if (!reqs || !ring || !qs) {
		err = -ENOMEM;
		goto out;
	}
	uint64_t rng = 12345, now = 0;
	for (uint32_t i = 0; i < ntenants && !err; i++)
		err = sched_queue_get(s, i, 1 + i % SCHED_WEIGHT_MAX, &qs[i]);
	for (uint32_t i = 0; i < nreq && !err; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		reqs[i] = (struct sched_req){ .queue = qs[(rng >> 33) % ntenants],
					      .op = (rng >> 20) % 4 ? SCHED_OP_READ : SCHED_OP_WRITE,
					      .bytes = 4096,
					      .sync = (rng >> 8) % 2 };
		sched_enqueue(s, &reqs[i], now);
	}
	uint32_t head = 0, n = 0, done = 0;
	uint64_t t0 = clock_now_ns();
	while (!err && done < iters) {
		struct sched_req *r;
		while ((r = sched_dispatch(s, now))) {
			ring[(head + n) % p.max_inflight] = r;
			n++;
		}
		now += 2000;
		if (!n) {	/* idling with nothing in flight: let the timer fire */
			uint64_t d = sched_next_deadline(s);
			now = d > now ? d : now;
			sched_timer(s, now);
			continue;
		}
		r = ring[head];
		head = (head + 1) % p.max_inflight;
		n--;
		sched_complete(s, r, now);
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		r->queue = qs[(rng >> 33) % ntenants];
		sched_enqueue(s, r, now);
		done++;
	}
	uint64_t t1 = clock_now_ns();
	if (!err)
		printf("  %6u tenants: %7.0f ns per request (enqueue + dispatch + complete), %u requests\n",
		       ntenants, (double)(t1 - t0) / iters, iters);
out:
	free(qs);
	free(ring);
	free(reqs);
	sched_free(s);
	return err;
}


/* ---- the shape matrix ---- */

/* billed: a tenant's part of what bfq charged over its part of the store
 * time its requests held, after warm-up. 1.00 is billing by store time;
 * above it, the tenant paid for others' time (waits behind them counted as
 * its own), and the weights divide the store wrongly by that much. */
static void shape_detail(const struct sim_scenario *sc, const struct sim_matrix_outcome *o)
{
	static const char cls[] = "-BS";
	uint64_t charged = 0, store_ns = 0;
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		charged += o->bfq.t[i].charged_bytes;
		store_ns += o->bfq.t[i].store_ns;
	}
	printf("  %-3s %-34s %9s %7s", "t", "tenant", "solo MB/s", "slots");
	for (uint32_t w = 0; w < sc->nwindows; w++)
		printf("   win%u got/target", w);
	printf(" %6s %6s %20s %6s %7s %6s %6s %6s %5s %5s\n", "billed", "idled", "inj waker/sync/gen",
	       "exh", "tmo/emp", "idle", "preemp", "budget", "think", "limit");
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		const struct sim_matrix_tenant *t = &o->t[i];
		const struct sched_queue_stats *st = &o->bfq.t[i].st;
		char d[96];
		sim_matrix_describe_tenant(sc, i, d, sizeof(d));
		printf("  %-3u %-34s %9.2f %7.3f", i, d, t->solo.mb_per_s, t->solo.slots);
		for (uint32_t w = 0; w < sc->nwindows; w++)
			printf(" %c %8.3f/%-8.3f", cls[t->cls[w]], t->got[w], t->target[w]);
		const struct sim_tenant_result *tr = &o->bfq.t[i];
		if (charged && store_ns && tr->store_ns)
			printf(" %6.2f", ((double)tr->charged_bytes / (double)charged) /
					     ((double)tr->store_ns / (double)store_ns));
		else
			printf(" %6s", "-");
		char inj[48];
		snprintf(inj, sizeof(inj), "%lu/%lu/%lu",
			 (unsigned long)st->injected_ops[SCHED_INJECT_WAKER],
			 (unsigned long)st->injected_ops[SCHED_INJECT_SYNC],
			 (unsigned long)st->injected_ops[SCHED_INJECT_GENERAL]);
		printf(" %6lu %20s %6lu %3lu/%-3lu %6lu %6lu %5luk %5lu %5u\n",
		       (unsigned long)st->idle_windows, inj,
		       (unsigned long)st->expirations[SCHED_EXPIRE_EXHAUSTED],
		       (unsigned long)st->expirations[SCHED_EXPIRE_TIMEOUT],
		       (unsigned long)st->expirations[SCHED_EXPIRE_EMPTIED],
		       (unsigned long)st->expirations[SCHED_EXPIRE_TOO_IDLE],
		       (unsigned long)st->expirations[SCHED_EXPIRE_PREEMPTED],
		       (unsigned long)(st->budget_bytes >> 10), (unsigned long)(st->think_ns / 1000),
		       st->inject_limit);
	}
	/* Requests too: where the host's CPU, not the store, bounds the work,
	 * a mix of more small requests keeps the store less busy. */
	uint64_t bfq_ops = 0, fifo_ops = 0;
	for (uint32_t i = 0; i < sc->ntenants; i++) {
		bfq_ops += o->bfq.t[i].ops;
		fifo_ops += o->fifo.t[i].ops;
	}
	double secs = (double)(sc->duration_ns - sc->warmup_ns) / 1e9;
	printf("  store busy %.2f slots (fifo %.2f), %.1f MB/s (fifo %.1f), %.0f requests/s (fifo %.0f);"
	       " fifo per tenant MB/s:",
	       o->bfq_busy, o->fifo_busy, o->bfq_mb, o->fifo_mb, (double)bfq_ops / secs,
	       (double)fifo_ops / secs);
	for (uint32_t i = 0; i < sc->ntenants; i++)
		printf(" %.2f", o->fifo.t[i].mb_per_s);
	printf("\n");
	for (uint32_t v = 0; v < o->nviol; v++)
		printf("  %s\n", o->v[v].why);
}

/* --model: the judged policy is given each shape's store's cost model
 * (sim_device_cost_model), as the daemon is by read_cost and write_cost. */
static const struct sim_device *model_of_shape;

/* One line per shape, then how many shapes kept each property. verbose:
 * each shape's tenants, windows and violations too. pol: the policy judged
 * (fifo too: what the properties ask beyond doing nothing). oracle: bill
 * the store time each request needs (sim.h oracle_billing). model: give
 * the store's cost model. */
static int matrix(uint64_t from, uint64_t n, bool verbose, bool oracle, bool model,
		  const struct policy *pol)
{	uint32_t pass_all = 0, applied[SIM_PROP_NR] = { 0 }, passed[SIM_PROP_NR] = { 0 };
	uint32_t bytes_ok = 0;
	static struct sim_matrix_outcome o;	/* big: results of three runs */
	for (uint64_t seed = from; seed < from + n; seed++) {
		struct sim_scenario sc;
		char desc[1024];
		sim_matrix_shape(seed, &sc);
		sc.oracle_billing = oracle;
		model_of_shape = model ? &sc.dev : NULL;
		sim_matrix_describe(&sc, desc, sizeof(desc));
		int err = sim_matrix_run(&sc, pol->set, &o);
		if (err) {
			fprintf(stderr, "fusesched-sim: seed %lu: %s\n", (unsigned long)seed,
				strerror(-err));
			return 1;
		}
		bool ok = !o.nviol;
		pass_all += ok;
		bytes_ok += o.bfq_mb >= SIM_MATRIX_TOTAL_MIN * o.fifo_mb;
		char props[SIM_PROP_NR + 1];
		for (int p = 0; p < SIM_PROP_NR; p++) {
			applied[p] += o.checked[p];
			passed[p] += o.checked[p] && !o.failed[p];
			props[p] = !o.checked[p] ? '-' : o.failed[p] ? 'x' : 'o';
		}
		props[SIM_PROP_NR] = 0;
		printf("%6lu %s %s %s%s%s\n", (unsigned long)seed, ok ? "pass" : "FAIL", props, desc,
		       ok ? "" : "  ## ", ok ? "" : o.v[o.worst].why);
		if (verbose)
			shape_detail(&sc, &o);
		fflush(stdout);
	}
	printf("\n%s, %lu shapes from seed %lu: %u pass every property (%.0f%%)\n", pol->name,
	       (unsigned long)n, (unsigned long)from, pass_all, 100.0 * pass_all / (double)n);
	for (int p = 0; p < SIM_PROP_NR; p++)
		printf("  %-8s applies to %3u shapes, holds in %3u (%.0f%%)\n",
		       sim_prop_name((enum sim_prop)p), applied[p], passed[p],
		       applied[p] ? 100.0 * passed[p] / applied[p] : 100.0);
	printf("  (bytes total >= %.0f%% of fifo's in %u shapes; not a property, see sim.h)\n",
	       SIM_MATRIX_TOTAL_MIN * 100, bytes_ok);
	return 0;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s || *end)
		return false;
	*out = v;
	return true;
}

/* --set NAME=VALUE: any tunable of struct sched_params, over the judged
 * policy's own, so that a change can be tried on the matrix before it is
 * made a default. */
enum param_kind { PARAM_U32, PARAM_U64, PARAM_BOOL, PARAM_DOOR };
#define PARAM(name, kind) { #name, offsetof(struct sched_params, name), kind }
static const struct param_field {
	const char *name;
	size_t offset;
	enum param_kind kind;
} param_fields[] = {
	PARAM(max_inflight, PARAM_U32), PARAM(learn_depth, PARAM_BOOL),
	PARAM(work_conserving, PARAM_DOOR), PARAM(default_weight, PARAM_U32),
	PARAM(budget_timeout_ns, PARAM_U64), PARAM(budget_min_bytes, PARAM_U64),
	PARAM(budget_initial_bytes, PARAM_U64), PARAM(budget_max_bytes, PARAM_U64),
	PARAM(peak_window_ns, PARAM_U64), PARAM(idle_enable, PARAM_BOOL),
	PARAM(idle_fixed_ns, PARAM_U64), PARAM(idle_min_ns, PARAM_U64),
	PARAM(idle_max_ns, PARAM_U64), PARAM(idle_think_pct, PARAM_U32),
	PARAM(inject_enable, PARAM_BOOL), PARAM(small_sync_write_bytes, PARAM_U64),
	PARAM(inject_slowdown_pct, PARAM_U32), PARAM(inject_cycle_slowdown_pct, PARAM_U32),
	PARAM(inject_reprobe_ns, PARAM_U64), PARAM(quiet_every_ns, PARAM_U64),
	PARAM(waker_gap_ns, PARAM_U64), PARAM(waker_hits, PARAM_U32),
	PARAM(waker_window_ns, PARAM_U64), PARAM(charge_by_time, PARAM_BOOL),
	PARAM(hold_depth_pct, PARAM_U32), PARAM(hold_min_inflight, PARAM_U32),
	PARAM(away_window_ns, PARAM_U64), PARAM(async_depth_pct, PARAM_U32),
	PARAM(async_sync_window_ns, PARAM_U64), PARAM(reserve_window_ns, PARAM_U64),
	PARAM(reserve_max_pct, PARAM_U32),
};
#define NPARAMS (sizeof(param_fields) / sizeof(param_fields[0]))

static struct {
	const struct param_field *field;
	uint64_t value;
} overrides[NPARAMS];
static size_t noverrides;
static const struct policy *judged;

static void set_judged(struct sched_params *p)
{
	judged->set(p);
	if (model_of_shape)
		sim_device_cost_model(model_of_shape, p);
	for (size_t i = 0; i < noverrides; i++) {
		char *at = (char *)p + overrides[i].field->offset;
		switch (overrides[i].field->kind) {
		case PARAM_U32: *(uint32_t *)(void *)at = (uint32_t)overrides[i].value; break;
		case PARAM_U64: *(uint64_t *)(void *)at = overrides[i].value; break;
		case PARAM_BOOL: *(bool *)at = overrides[i].value; break;
		case PARAM_DOOR: *(enum sched_door *)(void *)at = (enum sched_door)overrides[i].value; break;
		}
	}
}

/* "NAME=VALUE" into overrides; false (with a message) if it is not one. */
static bool parse_override(const char *arg)
{
	const char *eq = strchr(arg, '=');
	size_t len = eq ? (size_t)(eq - arg) : strlen(arg);
	const struct param_field *f = NULL;
	for (size_t i = 0; i < NPARAMS && !f; i++)
		if (strlen(param_fields[i].name) == len && !strncmp(param_fields[i].name, arg, len))
			f = &param_fields[i];
	if (!f) {
		fprintf(stderr, "fusesched-sim: --set %s: no such scheduler parameter "
				"(the fields of struct sched_params, e.g. budget_max_bytes)\n", arg);
		return false;
	}
	/* sim_run gives the scheduler the scenario's own depth (every scenario
	 * and shape sets one), so an override would be silently dropped. */
	if (f->offset == offsetof(struct sched_params, max_inflight)) {
		fprintf(stderr, "fusesched-sim: --set %s: each scenario and matrix shape sets its "
				"own max_inflight (sim_scenario.max_inflight); it cannot be overridden\n",
			arg);
		return false;
	}
	uint64_t v;
	if (!eq || !parse_u64(eq + 1, &v) || (f->kind == PARAM_BOOL && v > 1) ||
	    (f->kind == PARAM_DOOR && v > SCHED_DOOR_LEARN) ||
	    (f->kind == PARAM_U32 && v > UINT32_MAX)) {
		fprintf(stderr, "fusesched-sim: --set %s: the value must be %s\n", arg,
			f->kind == PARAM_BOOL ? "0 or 1"
			: f->kind == PARAM_DOOR ? "0 (open), 1 (shut) or 2 (learned)"
						: "a non-negative integer");
		return false;
	}
	size_t i = 0;
	while (i < noverrides && overrides[i].field != f)
		i++;
	overrides[i].field = f;
	overrides[i].value = v;
	noverrides += i == noverrides;
	return true;
}

static int usage(void)
{
	fprintf(stderr, "usage: fusesched-sim [--bench-scale | --matrix N [--from SEED] [-v] |"
			" --shape SEED] [--policy NAME] [--set PARAM=VALUE]... [--oracle | --model]\n");
	return 2;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (!strcmp(argv[1], "--matrix") || !strcmp(argv[1], "--shape"))) {
		bool shape = !strcmp(argv[1], "--shape"), verbose = shape, oracle = false, model = false;
		uint64_t n = 1, from = 1;
		const struct policy *pol = &policies[0];
		if (argc < 3 || !parse_u64(argv[2], shape ? &from : &n) || !n)
			return usage();
		for (int i = 3; i < argc; i++) {
			if (!shape && !strcmp(argv[i], "--from") && i + 1 < argc &&
			    parse_u64(argv[i + 1], &from)) {
				i++;
			} else if (!strcmp(argv[i], "-v")) {
				verbose = true;
			} else if (!strcmp(argv[i], "--oracle")) {
				oracle = true;
			} else if (!strcmp(argv[i], "--model")) {
				model = true;
			} else if (!strcmp(argv[i], "--policy") && i + 1 < argc) {
				size_t k = 0;
				while (k < NPOLICIES && strcmp(policies[k].name, argv[i + 1]))
					k++;
				if (k == NPOLICIES)
					return usage();
				pol = &policies[k];
				i++;
			} else if (!strcmp(argv[i], "--set") && i + 1 < argc) {
				if (!parse_override(argv[++i]))
					return 2;
			} else {
				return usage();
			}
		}
		judged = pol;
		struct policy with_overrides = { pol->name, set_judged };
		return matrix(from, n, verbose, oracle, model, &with_overrides);
	}
	if (argc == 2 && !strcmp(argv[1], "--bench-scale")) {
		printf("scheduler cost, bfq defaults, max_inflight 32:\n");
		static const uint32_t sizes[] = { 10, 1000, 10000 };
		for (size_t i = 0; i < 3; i++) {
			int err = bench_one(sizes[i], 1000000);
			if (err) {
				fprintf(stderr, "fusesched-sim: %s\n", strerror(-err));
				return 1;
			}
		}
		return 0;
	}
	if (argc != 1)
		return usage();
	printf("fusesched-sim: throughput MB/s and share in the measured window (after 10%% warm-up);\n"
	       "latency from enqueue to completion; idled: idle windows granted to the tenant;\n"
	       "inject: its requests let in while another was in service. Rows of identical\n"
	       "tenants are summed (MB/s, share, counts) or maxed (latencies). 'alone': the\n"
	       "first tenant by itself, the reference of S2, S3 and S5.\n"
	       "H1..H6: tenants in groups (name/), indented beneath them; a group's row sums\n"
	       "its subtree. promise: the share the tree gives it if everyone is backlogged\n"
	       "(as the warm-up ends).\n"
	       "bfq-flat: every tenant at the root with its own weight (the contrast).\n"
	       "Windows (from-to ms): shares within that phase, the promise in ().\n");
	return table();
}
