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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MATRIX_FIRST 1u
#define MATRIX_COUNT 60u

/* Failing shapes among seeds MATRIX_FIRST.., with the properties as
 * fusesched-sim --matrix prints them (share, shallow, total; x failed, o
 * held, - not applicable; updated whenever the scheduler changes) and what
 * failed, by class, when the shape was first kept (the tenant named is the
 * one it is about, as sim_matrix_describe writes it):
 *   idled-for   the store starves (total) or others are slowed while a
 *               shallow sync tenant is idled for: it keeps the slice, and
 *               the others, never eligible, get in only by injection
 *   barrier     small sync writes (<= 16 KiB) or fsyncs injected whatever
 *               their tenant's share (share, too much)
 *   waker       a busy neighbour taken for a tenant's waker and injected
 *               whatever its share
 *   run-ahead   injected far ahead of virtual time, then starved while V
 *               catches up
 *   async       a shallow buffered writer (never idled for) below its part
 *   shallow     a shallow sync tenant below 80% of its part
 *   over-share, under-share  share missed otherwise
 *   total       the store less busy than under fifo with nobody idled for */
static const struct {
	uint64_t seed;
	const char *props, *why;
} matrix_known_failures[] = {
	{ 1, "xxx", "idled-for W64k:2@211+s2/3ms/27+seq" },
	{ 2, "oxo", "idled-for R4k:4@1+t13+seq; async B128k:8@117+t877+s2/3ms/39+seq" },
	{ 6, "x-o", "under-share B32k:3@245+t11+seq" },
	{ 7, "x-x", "idled-for F:1@384+t25" },
	{ 8, "oox", "total (no tenant idled for)" },
	{ 9, "oxx", "idled-for W64k:3@926+t35+s3/1ms/33" },
	{ 10, "oxx", "async B16k:1@32+t0/p1; total (no tenant idled for)" },
	{ 13, "xxx", "barrier W8k:8@313+t15/p3; idled-for R32k:3@7+t417/p1" },
	{ 15, "x-x", "barrier D16k:6@20+t99; idled-for R64k:16@963+t120+s2/3ms/5+seq" },
	{ 17, "xxx",
	  "waker R32k:38@4+t22+s2/1ms/17; idled-for R8k:5@302+t0; async B256k:7@17+t70+s2/5ms/34" },
	{ 18, "xoo", "run-ahead B512k:4@2+t29+s4/3ms/15+seq/p1" },
	{ 19, "xxx", "idled-for D32k:1@687+t15+seq" },
	{ 24, "xxx",
	  "barrier W16k:54@106+t590+seq/p1; idled-for F:2@364+t28; "
	  "shallow D4k:15@964+t20+s2/5ms/25+seq/p1" },
	{ 27, "oxo",
	  "idled-for R128k:3@840+t0+seq; async B16k:3@11+t33+s1/4ms/28; shallow R16k:1@34+t88" },
	{ 28, "xxx",
	  "barrier D16k:1@4+t630+s1/3ms/42; idled-for F:2@392; "
	  "shallow D32k:1@390+t34+s1/1ms/15+seq" },
	{ 30, "xxx",
	  "idled-for R16k:1@289+t355; async B4k:4@67+t68+seq; shallow W4k:2@39+t108+seq" },
	{ 31, "xox", "idled-for F:2@182+t665" },
	{ 32, "xox", "idled-for R64k:3@5+t683+seq" },
	{ 34, "xox", "run-ahead R64k:12@1+t14+s4/4ms/24; idled-for R16k:11@10+t11+s3/1ms/44+seq" },
	{ 35, "xxx",
	  "barrier W8k:4@1+t116+seq; idled-for F:1@139+t31; async B64k:30@774+t0+s3/4ms/48; "
	  "over-share W256k:27@1+t31" },
	{ 36, "oox", "idled-for W32k:2@476+t27+seq" },
	{ 37, "xxx", "idled-for R8k:1@805+t103+s1/2ms/5; shallow D8k:1@61+t25+s1/3ms/23+seq" },
	{ 38, "oox", "idled-for R64k:2@111+t0; over-share W512k:5@54+seq/p3" },
	{ 39, "xxo", "async B4k:1@144+t393/p1; under-share W4k:4@4+t22+seq/p1" },
	{ 40, "xox",
	  "idled-for R4k:23@281+t81+s4/4ms/40+seq; over-share R64k:12@3+t109+s4/3ms/13" },
	{ 43, "xxx",
	  "barrier W8k:16@3+t0+s3/5ms/41+seq; idled-for F:1@274+t28; "
	  "shallow R4k:11@926+t25+s3/1ms/35/p1" },
	{ 44, "xxx",
	  "run-ahead W1m:53@2+t40+s2/2ms/25; idled-for R256k:3@59+t111+seq; "
	  "async B64k:7@625+t28+s4/5ms/5+seq; shallow W4k:17@24+t35" },
	{ 45, "xox", "idled-for R8k:15@50+t133" },
	{ 47, "oox", "total (no tenant idled for)" },
	{ 50, "xox", "idled-for W64k:22@233+t721+s3/4ms/42+seq" },
	{ 52, "xox",
	  "waker B256k:15@123+t28+s1/2ms/13+seq; run-ahead R32k:3@1+t754; "
	  "idled-for W4k:9@67+t0+seq; over-share W4k:9@67+t0+seq" },
	{ 53, "xxo", "barrier W8k:4@827+t0+s1/1ms/8+seq/p1; idled-for R4k:3@1+t18/p3" },
	{ 55, "xxo", "barrier D16k:56@1+t51+s4/5ms/24; shallow R16k:5@153+t198" },
	{ 56, "xxx",
	  "barrier D16k:8@2+t48+s3/5ms/49+seq; idled-for R512k:1@13+t159+seq; "
	  "shallow R32k:3@7+t689" },
	{ 58, "xxx", "run-ahead D256k:5@90+t57/p1; idled-for F:1@212+t13" },
	{ 59, "oox", "idled-for D64k:2@7+t20+s1/3ms/31" },
	{ 60, "xxx", "idled-for R8k:1@675+t129+seq" },
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
	unsigned seq = 0, think0 = 0, think_long = 0, w_small = 0, w_big = 0;
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
			seq += t->sequential;
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
	ck_assert_uint_gt(nested, 10);
	ck_assert_uint_gt(stalls, 200);
	for (int k = 0; k < 5; k++)
		ck_assert_uint_gt(kinds[k], 50);
	ck_assert_uint_gt(seq, 500);
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
	/* a tenant left out (fsync: no bytes) takes nothing */
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
 * tenant, both able to use 1000 MB/s alone. */
static void fake_window(struct sim_result *r, uint32_t w, uint64_t mb0, uint64_t mb1)
{
	r->w[w].t_bytes[0] = mb0 * 1000000;
	r->w[w].t_bytes[1] = mb1 * 1000000;
	r->w[w].total_bytes = (mb0 + mb1) * 1000000;
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
	double solo[2] = { 1000, 1000 };
	memset(&bfq, 0, sizeof(bfq));
	memset(&fifo, 0, sizeof(fifo));
	for (uint32_t w = 0; w < SIM_MATRIX_WINDOWS; w++)
		fake_window(&bfq, w, 300, 100);
	bfq.store_busy = 15;
	fifo.store_busy = 16;
	static struct sim_matrix_outcome o;
	sim_matrix_check(&sc, solo, &bfq, &fifo, &o);
	ck_assert_uint_eq(o.nviol, 0);
	ck_assert(o.checked[SIM_PROP_SHARE] && o.checked[SIM_PROP_TOTAL]);
	ck_assert(!o.checked[SIM_PROP_SHALLOW]);
	/* one window at 250:150, the total below 90% of fifo's */
	fake_window(&bfq, 2, 250, 150);
	bfq.store_busy = 14;
	sim_matrix_check(&sc, solo, &bfq, &fifo, &o);
	ck_assert_uint_eq(o.nviol, 3);
	ck_assert(o.failed[SIM_PROP_SHARE] && o.failed[SIM_PROP_TOTAL]);
	ck_assert_int_eq(o.v[0].window, 2);
	ck_assert_int_eq(o.v[o.worst].tenant, 1);	/* +50% beats -17% */
	/* b can do only 50 alone: shallow, owed 50; at 30 it is short */
	solo[1] = 50;
	fake_window(&bfq, 2, 370, 30);
	bfq.store_busy = 15;
	sim_matrix_check(&sc, solo, &bfq, &fifo, &o);
	ck_assert_uint_eq(o.nviol, 1);
	ck_assert_int_eq(o.v[0].prop, SIM_PROP_SHALLOW);
	ck_assert_uint_eq(o.t[1].cls[2], SIM_CLASS_SHALLOW);
	ck_assert_double_eq_tol(o.t[1].target_mb[2], 50, 1e-9);
	/* alone among the backlogged, a owes nobody a share: what b left
	 * was not capacity a could have used */
	ck_assert_uint_eq(o.t[0].cls[2], SIM_CLASS_BACKLOGGED);
	ck_assert_double_eq_tol(o.t[0].target_mb[2], 370, 1e-9);
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
		ck_assert_double_eq(a.t[i].solo_mb, b.t[i].solo_mb);
	}
	ck_assert_double_eq(a.bfq_busy, b.bfq_busy);
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
