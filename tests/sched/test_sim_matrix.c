/* Issue 23, "Weights that hold on workloads no benchmark named": the seeded
 * shape matrix of tests/sim/matrix.c, its properties (share, shallow, total:
 * sim.h) asserted on the first MATRIX_COUNT shapes the generator gives.
 *
 * Shapes bfq fails today are listed in matrix_known_failures: they are run
 * and their violations printed, but they do not fail the test, so that a
 * fix to the scheduler can promote them (a known failure that passes says
 * so). Every other shape must keep every property: a change that breaks a
 * shape that passes fails here, with the seed to rerun it by
 * (build/fusesched-sim --shape SEED). Same seed, same result. */
#include "sim.h"

#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MATRIX_FIRST 1u
#define MATRIX_COUNT 60u

/* Failing shapes among seeds MATRIX_FIRST.., with the properties as
 * fusesched-sim --matrix prints them (share, shallow, total; x failed, o
 * held, - not applicable) and the worst violation when the shape was last
 * recorded (rerun with build/fusesched-sim --shape SEED -v). The classes of
 * failure, and what is known of their causes, are in docs/DESIGN.md
 * (section 9, "What the shape matrix says"). */
static const struct {
	uint64_t seed;
	const char *props, *why;
} matrix_known_failures[] = {
	{ 1, "xxo",
	  "share: t0 direct window 3: 0.005 slots, target 0.096 (-95%)" },
	{ 7, "xxx",
	  "shallow: t3 buffered window 3: 0.006 slots, solo 0.047, target 0.047 (13%)" },
	{ 9, "xxx",
	  "share: t3 read window 3: 5.307 slots, target 0.654 (+711%)" },
	{ 10, "x-o",
	  "share: t4 direct window 3: 0.307 slots, target 0.031 (+897%)" },
	{ 11, "x-o",
	  "share: t3 dsync window 0: 0.550 slots, target 0.332 (+66%)" },
	{ 12, "x-o",
	  "share: t0 read window 1: 0.164 slots, target 1.168 (-86%)" },
	{ 13, "xxo",
	  "share: t2 read window 1: 0.195 slots, target 0.003 (+5730%)" },
	{ 14, "xox",
	  "share: t1 buffered window 3: 0.521 slots, target 0.129 (+304%)" },
	{ 15, "x-o",
	  "share: t7 direct window 2: 0.015 slots, target 0.001 (+1171%)" },
	{ 17, "xxx",
	  "share: t4 read window 2: 0.127 slots, target 0.715 (-82%)" },
	{ 18, "xxx",
	  "share: t3 read window 1: 0.849 slots, target 0.500 (+70%)" },
	{ 24, "xxx",
	  "share: t3 direct window 0: 0.006 slots, target 0.018 (-64%)" },
	{ 27, "xxx",
	  "share: t3 dsync window 0: 0.152 slots, target 0.050 (+202%)" },
	{ 28, "xxx",
	  "share: t0 read window 3: 0.200 slots, target 0.052 (+286%)" },
	{ 30, "oox",
	  "total: store busy 13.72 slots, fifo 16.00 (86%); 1357.3 MB/s, fifo 2952.6" },
	{ 31, "xxx",
	  "share: t2 read window 2: 0.008 slots, target 0.079 (-90%)" },
	{ 32, "xoo",
	  "share: t3 buffered window 0: 0.000 slots, target 0.002 (-100%)" },
	{ 34, "xxo",
	  "shallow: t2 direct window 3: 0.184 slots, solo 0.291, target 0.291 (63%)" },
	{ 35, "xxo",
	  "share: t6 buffered window 0: 0.042 slots, target 0.318 (-87%)" },
	{ 37, "xxx",
	  "share: t1 dsync window 2: 0.413 slots, target 0.085 (+388%)" },
	{ 38, "xxx",
	  "share: t0 read window 1: 0.758 slots, target 0.040 (+1816%)" },
	{ 39, "xxx",
	  "share: t3 direct window 1: 0.186 slots, target 0.068 (+172%)" },
	{ 43, "xxo",
	  "share: t1 read window 0: 0.004 slots, target 0.021 (-83%)" },
	{ 44, "oxo",
	  "shallow: t5 fsync window 1: 0.106 slots, solo 0.169, target 0.169 (63%)" },
	{ 45, "xxx",
	  "share: t2 buffered window 3: 0.001 slots, target 0.036 (-96%)" },
	{ 47, "oxx",
	  "shallow: t1 direct window 1: 0.490 slots, solo 0.793, target 0.793 (62%)" },
	{ 50, "xox",
	  "share: t1 buffered window 3: 0.195 slots, target 0.018 (+997%)" },
	{ 52, "xxo",
	  "share: t0 buffered window 0: 0.033 slots, target 0.219 (-85%)" },
	{ 53, "xxo",
	  "share: t0 read window 0: 0.001 slots, target 0.004 (-82%)" },
	{ 56, "xxx",
	  "share: t0 read window 0: 0.369 slots, target 0.169 (+118%)" },
	{ 57, "oxo",
	  "shallow: t3 direct window 2: 0.969 slots, solo 1.433, target 1.433 (68%)" },
	{ 58, "xxx",
	  "share: t1 read window 0: 2.782 slots, target 0.109 (+2463%)" },
	{ 60, "xxo",
	  "share: t3 buffered window 0: 0.741 slots, target 0.256 (+190%)" },
};

#define NKNOWN (sizeof(matrix_known_failures) / sizeof(matrix_known_failures[0]))

static int known_index(uint64_t seed)
{
	for (unsigned k = 0; k < NKNOWN; k++)
		if (matrix_known_failures[k].seed == seed)
			return (int)k;
	return -1;
}

/* Big: three runs' results; one per forked test. */
static struct sim_matrix_outcome outcome;

START_TEST(matrix_shape)
{
	uint64_t seed = MATRIX_FIRST + (uint64_t)_i;
	struct sim_scenario sc;
	char desc[1024];
	sim_matrix_shape(seed, &sc);
	sim_matrix_describe(&sc, desc, sizeof(desc));
	ck_assert_int_eq(sim_matrix_run(&sc, sim_params_bfq, &outcome), 0);
	const struct sim_matrix_outcome *o = &outcome;
	int k = known_index(seed);
	if (k >= 0) {
		if (o->nviol)
			printf("matrix seed %lu: known failure (%s: %s), %u violations, worst: %s\n",
			       (unsigned long)seed, matrix_known_failures[k].props,
			       matrix_known_failures[k].why, o->nviol, o->v[o->worst].why);
		else
			printf("matrix seed %lu: known failure now passes, promote it: %s\n",
			       (unsigned long)seed, desc);
		return;
	}
	ck_assert_msg(!o->nviol, "matrix seed %lu (%s): %u violations, worst: %s",
		      (unsigned long)seed, desc, o->nviol, o->nviol ? o->v[o->worst].why : "");
}
END_TEST

/* The list names shapes the test runs, each once. */
START_TEST(matrix_known_list)
{
	for (unsigned k = 0; k < NKNOWN; k++) {
		ck_assert_uint_ge(matrix_known_failures[k].seed, MATRIX_FIRST);
		ck_assert_uint_lt(matrix_known_failures[k].seed, MATRIX_FIRST + MATRIX_COUNT);
		ck_assert_int_eq(known_index(matrix_known_failures[k].seed), (int)k);
	}
}
END_TEST

static bool is_pow2(uint64_t x)
{
	return x && !(x & (x - 1));
}

/* The generator stays within the ranges, covers every kind it
 * promises, and gives the same shape for the same seed. */
START_TEST(matrix_generator)
{
	unsigned fuse = 0, grouped = 0, nested = 0, stalls = 0, kinds[5] = { 0 };
	unsigned think0 = 0, think_long = 0, w_small = 0, w_big = 0, queued = 0;
	for (uint64_t seed = 0; seed < 500; seed++) {
		struct sim_scenario a, b;
		sim_matrix_shape(seed, &a);
		sim_matrix_shape(seed, &b);
		ck_assert(!memcmp(&a, &b, sizeof(a)));
		ck_assert_uint_ge(a.ntenants, 2);
		ck_assert_uint_le(a.ntenants, 8);
		ck_assert_uint_eq(a.nwindows, SIM_MATRIX_WINDOWS);
		ck_assert_uint_eq(a.duration_ns - a.warmup_ns, SIM_MATRIX_WINDOWS * SIM_MATRIX_WINDOW_NS);
		fuse += a.host.reactor_wake_ns > 0;
		grouped += a.ngroups > 0;
		ck_assert_uint_ge(a.dev.slots, 1);
		ck_assert_uint_le(a.dev.slots, a.max_inflight);
		if (a.dev.slots < a.max_inflight) {
			ck_assert_uint_le(a.dev.slots, a.max_inflight / 4);
			queued++;
		}
		for (uint32_t k = 0; k < a.ngroups; k++) {
			ck_assert_int_le(a.g[k].parent, (int)k);
			nested += a.g[k].parent > 0;
		}
		for (uint32_t i = 0; i < a.ntenants; i++) {
			const struct sim_tenant *t = &a.t[i];
			ck_assert_uint_ge(t->weight, 1);
			ck_assert_uint_le(t->weight, 1000);
			ck_assert_uint_ge(t->depth, 1);
			ck_assert_uint_le(t->depth, 64);
			ck_assert_uint_le(t->think_ns, 1000000);
			ck_assert_uint_le(t->threads, t->depth);
			ck_assert_int_le(t->group, (int)a.ngroups);
			if (t->op == SCHED_OP_FSYNC) {
				ck_assert_uint_eq(t->bytes, 0);
				ck_assert_int_eq(t->group, 0);
				kinds[4]++;
			} else {
				ck_assert(is_pow2(t->bytes));
				ck_assert_uint_ge(t->bytes, 4096);
				ck_assert_uint_le(t->bytes, 1u << 20);
				kinds[t->op == SCHED_OP_READ ? 0 : !t->sync ? 3 : t->dsync ? 2 : 1]++;
			}
			stalls += t->threads && t->stall_permille;
			think0 += !t->think_ns;
			think_long += t->think_ns >= 300000;
			w_small += t->weight <= 10;
			w_big += t->weight >= 100;
		}
	}
	/* both hosts, pods, nesting, stalls; every kind of caller */
	ck_assert_uint_gt(fuse, 150);
	ck_assert_uint_lt(fuse, 350);
	ck_assert_uint_gt(grouped, 80);
	ck_assert_uint_gt(queued, 80);	/* a store that queues: a quarter */
	ck_assert_uint_lt(queued, 200);
	ck_assert_uint_gt(nested, 10);
	ck_assert_uint_gt(stalls, 200);
	for (int k = 0; k < 5; k++)
		ck_assert_uint_gt(kinds[k], 50);
	ck_assert_uint_gt(think0, 100);
	ck_assert_uint_gt(think_long, 100);
	/* log-uniform: tiny and large weights alike common */
	ck_assert_uint_gt(w_small, 500);
	ck_assert_uint_gt(w_big, 500);
}
END_TEST

/* The targets: max-min fair by weight, level by level. */
START_TEST(matrix_waterfill)
{
	struct sim_scenario sc = { .ntenants = 3 };
	double d[SIM_MAX_TENANTS], t[SIM_MAX_TENANTS];
	/* weights 3:1, both wanting more than there is */
	sc.ntenants = 2;
	sc.t[0].weight = 300;
	sc.t[1].weight = 100;
	d[0] = d[1] = 1e9;
	sim_matrix_waterfill(&sc, 400, d, t);
	ck_assert_double_eq_tol(t[0], 300, 1e-9);
	ck_assert_double_eq_tol(t[1], 100, 1e-9);
	/* a shallow tenant keeps its demand, the rest divide what it leaves */
	sc.ntenants = 3;
	sc.t[0].weight = 100;
	sc.t[1].weight = 100;
	sc.t[2].weight = 200;
	d[0] = 10;
	d[1] = d[2] = 1e9;
	sim_matrix_waterfill(&sc, 410, d, t);
	ck_assert_double_eq_tol(t[0], 10, 1e-9);
	ck_assert_double_eq_tol(t[1], 400.0 / 3, 1e-9);
	ck_assert_double_eq_tol(t[2], 800.0 / 3, 1e-9);
	/* a tenant left out (no demand) takes nothing */
	d[0] = 0;
	sim_matrix_waterfill(&sc, 300, d, t);
	ck_assert_double_eq_tol(t[0], 0, 1e-9);
	ck_assert_double_eq_tol(t[1], 100, 1e-9);
	ck_assert_double_eq_tol(t[2], 200, 1e-9);
	/* pods 2:1; pod B's shallow child leaves its part to its sibling,
	 * not to pod A */
	sc.ngroups = 2;
	sc.g[0] = (struct sim_group){ .weight = 200 };
	sc.g[1] = (struct sim_group){ .weight = 100 };
	sc.t[0] = (struct sim_tenant){ .weight = 1, .group = 1 };
	sc.t[1] = (struct sim_tenant){ .weight = 100, .group = 2 };
	sc.t[2] = (struct sim_tenant){ .weight = 100, .group = 2 };
	d[0] = d[1] = 1e9;
	d[2] = 10;
	sim_matrix_waterfill(&sc, 300, d, t);
	ck_assert_double_eq_tol(t[0], 200, 1e-9);
	ck_assert_double_eq_tol(t[1], 90, 1e-9);
	ck_assert_double_eq_tol(t[2], 10, 1e-9);
	/* a whole pod that cannot use its weight: the root tenant takes it */
	sc.g[0].weight = 900;
	sc.t[0].group = 0;
	sc.t[0].weight = 100;
	sc.t[1].group = 1;
	sc.t[2].group = 1;
	d[0] = 1e9;
	d[1] = 30;
	d[2] = 20;
	sim_matrix_waterfill(&sc, 1000, d, t);
	ck_assert_double_eq_tol(t[0], 950, 1e-9);
	ck_assert_double_eq_tol(t[1], 30, 1e-9);
	ck_assert_double_eq_tol(t[2], 20, 1e-9);
	/* nested: the inner pod's part is the outer pod's to divide */
	sc.g[1].parent = 1;
	sc.t[2].group = 2;
	d[1] = d[2] = 1e9;
	sim_matrix_waterfill(&sc, 1000, d, t);
	ck_assert_double_eq_tol(t[0], 100, 1e-9);
	ck_assert_double_eq_tol(t[1], 900.0 * 100 / 200, 1e-9);
	ck_assert_double_eq_tol(t[2], 900.0 * 100 / 200, 1e-9);
}
END_TEST

/* The checker itself, on made-up results: 1 s windows of a w300 and a w100
 * tenant, both able to keep 10 slots busy alone; rates in slots (tenths). */
static void fake_window(struct sim_result *r, uint32_t w, uint64_t tenths0, uint64_t tenths1)
{
	r->w[w].t_store_ns[0] = tenths0 * 100000000;
	r->w[w].t_store_ns[1] = tenths1 * 100000000;
	r->w[w].total_store_ns = (tenths0 + tenths1) * 100000000;
}

START_TEST(matrix_check_flags)
{
	struct sim_scenario sc;
	static struct sim_result bfq, fifo;
	sim_matrix_shape(1, &sc);	/* for the windows and durations */
	sc.ntenants = 2;
	sc.ngroups = 0;
	sc.t[0] = (struct sim_tenant){ .name = "a", .weight = 300, .depth = 8, .bytes = 4096,
				       .op = SCHED_OP_READ, .sync = true, .journal = -1 };
	sc.t[1] = sc.t[0];
	sc.t[1].name = "b";
	sc.t[1].weight = 100;
	struct sim_solo solo[2] = { { .slots = 10, .slot_s_per_op = 1e-4 },
				    { .slots = 10, .slot_s_per_op = 1e-4 } };
	memset(&bfq, 0, sizeof(bfq));
	memset(&fifo, 0, sizeof(fifo));
	for (uint32_t w = 0; w < SIM_MATRIX_WINDOWS; w++)
		fake_window(&bfq, w, 30, 10);
	bfq.store_busy = 15;
	fifo.store_busy = 16;
	static struct sim_matrix_outcome o;
	sim_matrix_check(&sc, solo, &bfq, &fifo, &o);
	ck_assert_uint_eq(o.nviol, 0);
	ck_assert(o.checked[SIM_PROP_SHARE] && o.checked[SIM_PROP_TOTAL]);
	ck_assert(!o.checked[SIM_PROP_SHALLOW]);
	/* one window at 2.5:1.5, the total below 90% of fifo's */
	fake_window(&bfq, 2, 25, 15);
	bfq.store_busy = 14;
	sim_matrix_check(&sc, solo, &bfq, &fifo, &o);
	ck_assert_uint_eq(o.nviol, 3);
	ck_assert(o.failed[SIM_PROP_SHARE] && o.failed[SIM_PROP_TOTAL]);
	ck_assert_int_eq(o.v[0].window, 2);
	ck_assert_int_eq(o.v[o.worst].tenant, 1);	/* +50% beats -17% */
	/* b can keep only 0.5 slots busy alone: shallow, owed 0.5; at 0.3 it
	 * is short */
	solo[1].slots = 0.5;
	fake_window(&bfq, 2, 37, 3);
	bfq.store_busy = 15;
	sim_matrix_check(&sc, solo, &bfq, &fifo, &o);
	ck_assert_uint_eq(o.nviol, 1);
	ck_assert_int_eq(o.v[0].prop, SIM_PROP_SHALLOW);
	ck_assert_uint_eq(o.t[1].cls[2], SIM_CLASS_SHALLOW);
	ck_assert_double_eq_tol(o.t[1].target[2], 0.5, 1e-9);
	/* alone among the backlogged, a owes nobody a share: what b left
	 * was not capacity a could have used */
	ck_assert_uint_eq(o.t[0].cls[2], SIM_CLASS_BACKLOGGED);
	ck_assert_double_eq_tol(o.t[0].target[2], 3.7, 1e-9);
}
END_TEST

/* Same seed, same outcome. */
START_TEST(matrix_deterministic)
{
	struct sim_scenario sc;
	static struct sim_matrix_outcome a, b;
	sim_matrix_shape(7, &sc);
	ck_assert_int_eq(sim_matrix_run(&sc, sim_params_bfq, &a), 0);
	ck_assert_int_eq(sim_matrix_run(&sc, sim_params_bfq, &b), 0);
	ck_assert_uint_eq(a.nviol, b.nviol);
	for (uint32_t i = 0; i < sc.ntenants; i++) {
		ck_assert_uint_eq(a.bfq.t[i].bytes, b.bfq.t[i].bytes);
		ck_assert_double_eq(a.t[i].solo.slots, b.t[i].solo.slots);
	}
	ck_assert_double_eq(a.bfq_busy, b.bfq_busy);
}
END_TEST

/* Matrix seed 192: a weight-1 writer of 4 KiB dsync writes, let in as a
 * barrier whenever another tenant idled, and a weight-3 fsync committer
 * beside six heavier tenants. While a queue served outside its slice had
 * requests at the store and none queued, it was in no heap and V's
 * catch-up jumped past it to the light queues' starts, over and over: the
 * writer took 0.23-0.29 slots against a target of 0.008-0.009. Resting
 * queues hold V (wf2q.h); the light ones stay near their targets. */
START_TEST(matrix_light_barrier_tenants_keep_their_weight)
{
	struct sim_scenario sc;
	static struct sim_matrix_outcome o;
	sim_matrix_shape(192, &sc);
	ck_assert_int_eq(sim_matrix_run(&sc, sim_params_bfq, &o), 0);
	static const uint32_t light[] = {3, 7};
	for (unsigned k = 0; k < 2; k++) {
		uint32_t i = light[k];
		ck_assert_uint_lt(i, sc.ntenants);
		ck_assert_uint_le(sc.t[i].weight, 3);
		for (uint32_t w = 0; w < sc.nwindows; w++)
			ck_assert_msg(o.t[i].got[w] <= 1.5 * o.t[i].target[w],
				      "tenant %u window %u: %.3f slots, target %.3f", i, w,
				      o.t[i].got[w], o.t[i].target[w]);
	}
}
END_TEST

/* Every tenant within SIM_MATRIX_SHARE_TOL of its target in every window. */
static void assert_every_share_holds(const struct sim_scenario *sc, const struct sim_matrix_outcome *o)
{
	for (uint32_t i = 0; i < sc->ntenants; i++)
		for (uint32_t w = 0; w < sc->nwindows; w++)
			ck_assert_msg(fabs(o->t[i].got[w] - o->t[i].target[w]) <=
					      SIM_MATRIX_SHARE_TOL * o->t[i].target[w],
				      "tenant %u window %u: %.3f slots, target %.3f", i, w,
				      o->t[i].got[w], o->t[i].target[w]);
}

/* Matrix seed 12: a w7 reader of 16 KiB beside a w17 writer of 512 KiB on
 * a store of 4 slots behind 16 dispatch slots, both always queued in the
 * store's own line. Billed by time in flight, each request pays the line
 * it waited in and the reader starves (0.18-0.33 slots against
 * 1.17). Billed the store time each request needs (the simulator's own,
 * sched_req.need_ns), every share holds in every window: what fails there
 * is the measure of store time, not the scheduling on it. */
/* Matrix shape seed on a store of slots slots (fewer than its dispatch
 * slots), billed the store time each request needs: every tenant is
 * backlogged and every share holds. */
static void assert_known_store_time_keeps_shares(uint64_t seed, uint32_t slots)
{
	struct sim_scenario sc;
	static struct sim_matrix_outcome o;
	sim_matrix_shape(seed, &sc);
	ck_assert_uint_eq(sc.dev.slots, slots);
	ck_assert_uint_lt(sc.dev.slots, sc.max_inflight);
	sc.oracle_billing = true;
	ck_assert_int_eq(sim_matrix_run(&sc, sim_params_bfq, &o), 0);
	for (uint32_t i = 0; i < sc.ntenants; i++)
		for (uint32_t w = 0; w < sc.nwindows; w++)
			ck_assert_uint_eq(o.t[i].cls[w], SIM_CLASS_BACKLOGGED);
	assert_every_share_holds(&sc, &o);
}

START_TEST(matrix_known_store_time_keeps_queued_store_shares)
{
	assert_known_store_time_keeps_shares(12, 4);
}
END_TEST

/* Matrix seed 92: a w350 reader of 256 KiB at depth 64 beside a w221
 * buffered writer of 1 MiB, on a store of one slot behind 16 dispatch
 * slots. Every request after the first waits in the store's line, so its
 * time in flight is never its own: a slot rate learned from times in
 * flight came out a fraction of the store's, each request's store time at
 * that rate fell below its bytes, and both were billed bytes, which the
 * reads move 1.36 times faster per unit of store time (0.54 slots against
 * 0.61 due, the writer +18%). The rate is learned from the store time a
 * request needs where that is known, so the known times are what is
 * billed. */
START_TEST(matrix_known_store_time_is_billed_on_a_serial_store)
{
	assert_known_store_time_keeps_shares(92, 1);
}
END_TEST

/* The same shape with the store's cost model given to bfq, as `fusesched
 * calibrate` gives it on the real mount: each kind's 4 KiB requests a
 * second and bytes a second with every slot busy. The model is exact for
 * the simulated store, so every share holds as with the store's own
 * times; without it the reader is billed its waits (the test above). */
static struct sim_device model_dev;

static void bfq_with_model(struct sched_params *p)
{
	sim_params_bfq(p);
	sim_device_cost_model(&model_dev, p);
}

START_TEST(matrix_store_cost_model_keeps_queued_store_shares)
{
	struct sim_scenario sc;
	static struct sim_matrix_outcome o;
	sim_matrix_shape(12, &sc);
	model_dev = sc.dev;
	ck_assert_int_eq(sim_matrix_run(&sc, bfq_with_model, &o), 0);
	assert_every_share_holds(&sc, &o);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sched_matrix");
	TCase *tc = tcase_create("checker");
	tcase_add_test(tc, matrix_known_list);
	tcase_add_test(tc, matrix_generator);
	tcase_add_test(tc, matrix_waterfill);
	tcase_add_test(tc, matrix_check_flags);
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, matrix_deterministic);
	tcase_add_test(tc, matrix_light_barrier_tenants_keep_their_weight);
	tcase_add_test(tc, matrix_known_store_time_keeps_queued_store_shares);
	tcase_add_test(tc, matrix_known_store_time_is_billed_on_a_serial_store);
	tcase_add_test(tc, matrix_store_cost_model_keeps_queued_store_shares);
	suite_add_tcase(s, tc);
	TCase *shapes = tcase_create("shapes");
	/* a shape is three to ten short runs; ASan is ~4x slower */
	tcase_set_timeout(shapes, 120);
	tcase_add_loop_test(shapes, matrix_shape, 0, MATRIX_COUNT);
	suite_add_tcase(s, shapes);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
