/* S1..S5 and H1..H6 (sim.h) in the simulator. Each test asserts the
 * property under bfq and the contrast that shows which mechanism earns it. */
#include "sim.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct sim_result run(const struct sim_scenario *sc, void (*set)(struct sched_params *))
{
	struct sched_params p;
	struct sim_result r;
	set(&p);
	ck_assert_int_eq(sim_run(sc, &p, &r), 0);
	return r;
}

static double ratio(const struct sim_result *r, unsigned a, unsigned b)
{
	ck_assert_uint_gt(r->t[b].bytes, 0);
	return (double)r->t[a].bytes / (double)r->t[b].bytes;
}

static uint64_t max_lat(const struct sim_result *r, unsigned from)
{
	uint64_t m = 0;
	for (unsigned i = from; i < r->ntenants; i++)
		m = r->t[i].lat_max_ns > m ? r->t[i].lat_max_ns : m;
	return m;
}

/* The journal pair (writer t[0], journal t[1]) next to a reader (t[2])
 * that is idled for: the writer keeps 0.9 of fifo's rate because the
 * journal gets in by injection, and collapses without injection. */
static void journal_injected(const struct sim_scenario *sc)
{
	struct sim_result bfq = run(sc, sim_params_bfq);
	struct sim_result fifo = run(sc, sim_params_fifo);
	struct sim_result noinj = run(sc, sim_params_bfq_noinject);
	ck_assert_msg(bfq.t[0].mb_per_s >= 0.9 * fifo.t[0].mb_per_s, "writer bfq %.3f fifo %.3f",
		      bfq.t[0].mb_per_s, fifo.t[0].mb_per_s);
	ck_assert_msg(noinj.t[0].mb_per_s < 0.2 * fifo.t[0].mb_per_s, "no collapse: %.3f vs %.3f",
		      noinj.t[0].mb_per_s, fifo.t[0].mb_per_s);
	ck_assert_uint_gt(bfq.t[2].st.idle_windows, 0);
	ck_assert_uint_gt(bfq.t[1].st.injected_ops[SCHED_INJECT_SYNC] +
				  bfq.t[1].st.injected_ops[SCHED_INJECT_WAKER], 0);
}

/* S1: the dsync writer keeps fifo's rate. With equal weights
 * nobody is idled for (everyone has one request at a time), so the reader
 * keeps fifo's rate too. A reader heavier than the other two together is
 * idled for; then injection is what keeps the journal, and so the writer,
 * from starving. */
START_TEST(s1_journal_writer_keeps_fifo_throughput)
{
	struct sim_scenario sc;
	sim_scenario_s1_journal(&sc, 100);
	struct sim_result bfq = run(&sc, sim_params_bfq);
	struct sim_result fifo = run(&sc, sim_params_fifo);
	ck_assert_uint_gt(fifo.t[0].ops, 1000);
	ck_assert_msg(bfq.t[0].mb_per_s >= 0.9 * fifo.t[0].mb_per_s, "bfq %.3f fifo %.3f",
		      bfq.t[0].mb_per_s, fifo.t[0].mb_per_s);
	ck_assert_msg(bfq.t[2].mb_per_s >= 0.9 * fifo.t[2].mb_per_s, "reader bfq %.3f fifo %.3f",
		      bfq.t[2].mb_per_s, fifo.t[2].mb_per_s);
	for (int i = 0; i < 3; i++)
		ck_assert_uint_eq(bfq.t[i].st.idle_windows, 0);

	sim_scenario_s1_journal(&sc, 400);
	journal_injected(&sc);
}
END_TEST

/* S2: a rate-limited tenant's idle windows must not cap the free one. */
START_TEST(s2_free_tenant_not_capped)
{
	struct sim_scenario solo, sc;
	sim_scenario_s2_rate_limited(&solo, false);
	sim_scenario_s2_rate_limited(&sc, true);
	double capacity = run(&solo, sim_params_bfq).t[0].mb_per_s;
	double limited = 4.0;
	struct sim_result bfq = run(&sc, sim_params_bfq);
	struct sim_result fixed = run(&sc, sim_params_bfq_fixed_idle);
	ck_assert_msg(bfq.t[0].mb_per_s >= 0.9 * (capacity - limited), "free %.2f capacity %.2f",
		      bfq.t[0].mb_per_s, capacity);
	ck_assert_double_ge(bfq.t[1].mb_per_s, 0.9 * limited);
	/* learned think time: the limited tenant is never idled for */
	ck_assert_uint_eq(bfq.t[1].st.idle_windows, 0);
	ck_assert_msg(fixed.t[0].mb_per_s < 0.5 * (capacity - limited),
		      "fixed idle window should starve the free tenant: %.2f", fixed.t[0].mb_per_s);
}
END_TEST

/* S3: small sync readers do not wait behind a streaming writer. */
START_TEST(s3_readers_latency_writer_throughput)
{
	struct sim_scenario solo, sc;
	sim_scenario_s3_streaming(&solo, false);
	sim_scenario_s3_streaming(&sc, true);
	double writer_solo = run(&solo, sim_params_fifo).t[0].mb_per_s;
	struct sim_result bfq = run(&sc, sim_params_bfq);
	struct sim_result fifo = run(&sc, sim_params_fifo);
	uint64_t bfq_max = max_lat(&bfq, 1), fifo_max = max_lat(&fifo, 1);
	ck_assert_msg(bfq_max * 10 <= fifo_max, "readers max bfq %lu fifo %lu ns",
		      (unsigned long)bfq_max, (unsigned long)fifo_max);
	ck_assert_msg(bfq.t[0].mb_per_s >= 0.8 * writer_solo, "writer %.0f solo %.0f",
		      bfq.t[0].mb_per_s, writer_solo);
	/* the readers got what they asked for; under fifo they did not */
	double bfq_readers = bfq.total_mb_per_s - bfq.t[0].mb_per_s;
	double fifo_readers = fifo.total_mb_per_s - fifo.t[0].mb_per_s;
	ck_assert_double_gt(bfq_readers, 2 * fifo_readers);
}
END_TEST

/* S4: the ratio and the total, together. */
START_TEST(s4_weights_8_to_1_at_full_speed)
{
	struct sim_scenario sc;
	sim_scenario_s4_weights(&sc, 2);
	struct sim_result bfq = run(&sc, sim_params_bfq);
	struct sim_result fifo = run(&sc, sim_params_fifo);
	double rb = ratio(&bfq, 0, 1), rf = ratio(&fifo, 0, 1);
	ck_assert_msg(rb >= 8 * 0.9 && rb <= 8 * 1.1, "bfq ratio %.2f", rb);
	ck_assert_msg(bfq.total_mb_per_s >= 0.9 * fifo.total_mb_per_s, "total %.1f fifo %.1f",
		      bfq.total_mb_per_s, fifo.total_mb_per_s);
	ck_assert_msg(rf < 1.2, "fifo should split 1:1, got %.2f", rf);
}
END_TEST

START_TEST(s4_weights_5_3_1)
{
	struct sim_scenario sc;
	sim_scenario_s4_weights(&sc, 3);
	struct sim_result bfq = run(&sc, sim_params_bfq);
	struct sim_result fifo = run(&sc, sim_params_fifo);
	static const double want[3][3] = { { 0, 5.0 / 3, 5 }, { 0, 0, 3 }, { 0 } };
	for (unsigned a = 0; a < 3; a++)
		for (unsigned b = a + 1; b < 3; b++) {
			double r = ratio(&bfq, a, b);
			ck_assert_msg(r >= want[a][b] * 0.9 && r <= want[a][b] * 1.1,
				      "ratio %u:%u = %.2f, want %.2f", a, b, r, want[a][b]);
		}
	ck_assert_double_ge(bfq.total_mb_per_s, 0.9 * fifo.total_mb_per_s);
}
END_TEST

/* S4 through FUSE on a loaded 2-core host, as bench/run measures it: the
 * reactor reaps and dispatches whole batches at one instant, and a deep
 * tenant's queue runs dry while its caller threads wait for a CPU. */
static double charge_per_byte(const struct sim_result *r, unsigned i)
{
	ck_assert_uint_gt(r->t[i].st.served_bytes, 0);
	return (double)r->t[i].st.charged_bytes / (double)r->t[i].st.served_bytes;
}

/* Holding the store for the heavy tenant, and keeping its place while all
 * its requests are with its callers, keep both goals; without either, the
 * gaps go to the light tenant. */
START_TEST(s4_fuse_round_trip_8_to_1)
{
	struct sim_scenario sc;
	sim_scenario_s4_fuse(&sc, 2);
	uint64_t seed0 = sc.seed;
	for (unsigned seed = 0; seed < 4; seed++) {
		sc.seed = seed0 + seed;
		struct sim_result bfq = run(&sc, sim_params_bfq);
		struct sim_result fifo = run(&sc, sim_params_fifo);
		double rb = ratio(&bfq, 0, 1);
		ck_assert_msg(rb >= 8 * 0.9 && rb <= 8 * 1.1, "bfq ratio %.2f (seed %u)", rb, seed);
		ck_assert_msg(bfq.total_mb_per_s >= 0.9 * fifo.total_mb_per_s, "total %.1f fifo %.1f",
			      bfq.total_mb_per_s, fifo.total_mb_per_s);
		/* the heavy tenant's queue did run dry: it was held for, not expired */
		ck_assert_uint_gt(bfq.t[1].st.injected_ops[SCHED_INJECT_GENERAL], 100);
	}
	sc.seed = seed0;
	struct sim_result nohold = run(&sc, sim_params_bfq_nohold);
	double rn = ratio(&nohold, 0, 1);
	ck_assert_msg(rn < 8 * 0.9, "without holding the ratio should be missed, got %.2f", rn);
	struct sim_result noaway = run(&sc, sim_params_bfq_noaway);
	rn = ratio(&noaway, 0, 1);
	ck_assert_msg(rn < 8 * 0.9, "without keeping its place the ratio should be missed, got %.2f",
		      rn);
}
END_TEST

/* Every tenant pays the same per byte although the heaviest always gets
 * the first places of a batch: charging a request its whole service time
 * divided by the number in flight when it was dispatched gave 2.7:2.4:1.
 * Charged by store time, each request pays its own, jittered, time: the
 * tenants' charges per byte stay within 8%. Not exactly alike: a request
 * let in while a deep tenant under its cap holds the store goes to a store
 * less full than a batch does, and its time in flight, the reaping's wait
 * included, is divided fewer ways (up to 6.5% more per byte for the light
 * tenant on these seeds; within 4% before such requests were let in). */
START_TEST(s4_fuse_round_trip_5_3_1)
{
	struct sim_scenario sc;
	sim_scenario_s4_fuse(&sc, 3);
	static const double want[3][3] = { { 0, 5.0 / 3, 5 }, { 0, 0, 3 }, { 0 } };
	uint64_t seed0 = sc.seed;
	for (unsigned seed = 0; seed < 4; seed++) {
		sc.seed = seed0 + seed;
		struct sim_result bfq = run(&sc, sim_params_bfq);
		struct sim_result fifo = run(&sc, sim_params_fifo);
		for (unsigned a = 0; a < 3; a++)
			for (unsigned b = a + 1; b < 3; b++) {
				double r = ratio(&bfq, a, b);
				ck_assert_msg(r >= want[a][b] * 0.9 && r <= want[a][b] * 1.1,
					      "ratio %u:%u = %.2f, want %.2f (seed %u)", a, b, r,
					      want[a][b], seed);
			}
		ck_assert_double_ge(bfq.total_mb_per_s, 0.9 * fifo.total_mb_per_s);
		double c0 = charge_per_byte(&bfq, 0), c2 = charge_per_byte(&bfq, 2);
		ck_assert_msg(c0 <= c2 * 1.08 && c2 <= c0 * 1.08, "charged per byte %.3f vs %.3f",
			      c0, c2);
	}
}
END_TEST

/* S5 on a serial store: idling earns the 8:1 ratio. */
START_TEST(s5_serial_idling_earns_ratio)
{
	struct sim_scenario sc;
	sim_scenario_s5_sync_reader(&sc, 1, true);
	struct sim_result bfq = run(&sc, sim_params_bfq);
	struct sim_result noidle = run(&sc, sim_params_bfq_noidle);
	double rb = ratio(&bfq, 0, 1), rn = ratio(&noidle, 0, 1);
	ck_assert_msg(rb >= 8 * 0.9 && rb <= 8 * 1.1, "bfq ratio %.2f", rb);
	ck_assert_msg(rn < 8 * 0.9, "without idling the ratio should be missed, got %.2f", rn);
	/* the learned injection limit is what keeps the deep reader out */
	ck_assert_uint_eq(bfq.t[0].st.inject_limit, 0);
}
END_TEST

/* S5 on a parallel store: the depth-1 reader cannot use 8/9 of it; it keeps
 * its solo throughput, the deep one gets the rest. */
START_TEST(s5_parallel_work_conserving)
{
	struct sim_scenario solo, sc;
	sim_scenario_s5_sync_reader(&solo, 16, false);
	sim_scenario_s5_sync_reader(&sc, 16, true);
	double a_solo = run(&solo, sim_params_bfq).t[0].mb_per_s;
	struct sim_result bfq = run(&sc, sim_params_bfq);
	struct sim_result fifo = run(&sc, sim_params_fifo);
	ck_assert_msg(bfq.t[0].mb_per_s >= 0.9 * a_solo, "depth-1 %.2f solo %.2f",
		      bfq.t[0].mb_per_s, a_solo);
	ck_assert_msg(bfq.total_mb_per_s >= 0.8 * fifo.total_mb_per_s, "total %.1f fifo %.1f",
		      bfq.total_mb_per_s, fifo.total_mb_per_s);
	ck_assert_double_gt(bfq.t[1].mb_per_s, 0.8 * (fifo.total_mb_per_s - a_solo));
	/* the learned injection limit is what lets the deep reader fill the store */
	ck_assert_uint_gt(bfq.t[0].st.inject_limit, 8);
	ck_assert_uint_gt(bfq.t[1].st.injected_ops[SCHED_INJECT_GENERAL], 1000);
	/* under fifo the depth-1 reader's throughput falls with the other's depth */
	ck_assert_double_lt(fifo.t[0].mb_per_s, 0.5 * a_solo);
	sc.t[1].depth = 32;
	double shallow = run(&sc, sim_params_fifo).t[0].mb_per_s;
	ck_assert_double_gt(shallow, 2 * fifo.t[0].mb_per_s);
}
END_TEST

/* ---- H1..H6: the tenant tree ----
 *
 * Tolerance: a share within 5% of what the tree promises (relative), the
 * S4 tests' +-10% on a ratio of two shares split between them. Over four
 * seeds the group shares measured here stay within 0.3% of the promise
 * on the parallel store and the FUSE host (H3's first phase within 1.1%),
 * so 5% leaves room for harmless changes of the scheduler, while every
 * flat contrast misses by 25% or more. A single light tenant of a group
 * (a child of H3's subtree, 1/55 of the store) moves by up to 7% between
 * seeds: 15% there. */
#define SHARE_TOL 0.05
#define SMALL_SHARE_TOL 0.15
#define US 1000ull
#define MS 1000000ull

static void share_near(double got, double want, double tol, const char *what)
{
	ck_assert_msg(got >= want * (1 - tol) && got <= want * (1 + tol),
		      "%s: share %.4f, want %.4f +-%.0f%%", what, got, want, tol * 100);
}

/* The flat contrast: the same tenants at the root with their own weights. */
static struct sim_result run_flat(const struct sim_scenario *sc)
{
	struct sim_scenario flat = *sc;
	flat.flat = true;
	return run(&flat, sim_params_bfq);
}

/* The shares H1..H6 promise, from the weights alone (sim_tree_share, the
 * promise column of fusesched-sim): the model the tests are read against. */
START_TEST(h_tree_model)
{
	struct sim_scenario sc;
	sim_scenario_h1_pods(&sc);
	ck_assert_double_eq_tol(sim_tree_group_share(&sc, 0, 0), 2.0 / 3, 1e-9);
	ck_assert_double_eq_tol(sim_tree_share(&sc, 0, 3), 1.0 / 9, 1e-9);
	sc.flat = true;
	ck_assert_double_eq_tol(sim_tree_group_share(&sc, 0, 0), 1.0 / 4, 1e-9);
	sim_scenario_h3_delegated(&sc);
	ck_assert_double_eq_tol(sim_tree_group_share(&sc, 100 * MS, 0), 10.0 / 110, 1e-9);
	ck_assert_double_eq_tol(sim_tree_group_share(&sc, 500 * MS, 0), 10.0 / 110, 1e-9);
	ck_assert_double_eq_tol(sim_tree_share(&sc, 500 * MS, 2), 2.0 / 110, 1e-9);
	ck_assert_double_eq_tol(sim_tree_share(&sc, 100 * MS, 2), 0, 1e-9);	/* not started */
	sim_scenario_h4_nested(&sc);
	ck_assert_double_eq_tol(sim_tree_share(&sc, 0, 0), 3.0 / 16, 1e-9);
	ck_assert_double_eq_tol(sim_tree_share(&sc, 0, 2), 3.0 / 8, 1e-9);
	ck_assert_double_eq_tol(sim_tree_share(&sc, 0, 3), 1.0 / 4, 1e-9);
	sim_scenario_h6_reweight(&sc);
	ck_assert_double_eq_tol(sim_tree_group_share(&sc, 100 * MS, 0), 1.0 / 2, 1e-9);
	ck_assert_double_eq_tol(sim_tree_group_share(&sc, 600 * MS, 0), 3.0 / 4, 1e-9);
	/* groups must come before their children */
	sim_scenario_h4_nested(&sc);
	sc.g[0].parent = 2;
	struct sched_params p;
	struct sim_result r;
	sim_params_bfq(&p);
	ck_assert_int_eq(sim_run(&sc, &p, &r), -EINVAL);
}
END_TEST

/* H1's shares: pods 2:1 whatever the number of containers in each. */
static void h1_check(const struct sim_scenario *sc, const char *what)
{
	struct sim_result bfq = run(sc, sim_params_bfq);
	struct sim_result fifo = run(sc, sim_params_fifo);
	char msg[64];
	snprintf(msg, sizeof(msg), "%s seed %lx pod A", what, (unsigned long)sc->seed);
	share_near(bfq.g[0].share, 2.0 / 3, SHARE_TOL, msg);
	snprintf(msg, sizeof(msg), "%s seed %lx pod B", what, (unsigned long)sc->seed);
	share_near(bfq.g[1].share, 1.0 / 3, SHARE_TOL, msg);
	for (unsigned i = 1; i < 4; i++) {
		snprintf(msg, sizeof(msg), "%s seed %lx container b%u", what,
			 (unsigned long)sc->seed, i);
		share_near(bfq.t[i].share, 1.0 / 9, SHARE_TOL, msg);
	}
	ck_assert_msg(bfq.total_mb_per_s >= 0.9 * fifo.total_mb_per_s, "%s: total %.1f fifo %.1f",
		      what, bfq.total_mb_per_s, fifo.total_mb_per_s);
}

START_TEST(h1_pods_2_to_1)
{
	struct sim_scenario sc;
	sim_scenario_h1_pods(&sc);
	h1_check(&sc, "H1");
	/* flat, pod A's one container gets 1/4 like each of B's three */
	struct sim_result flat = run_flat(&sc);
	ck_assert_msg(flat.g[0].share < (2.0 / 3) * (1 - SHARE_TOL), "flat pod A %.3f",
		      flat.g[0].share);
}
END_TEST

START_TEST(h1_fuse_pods_2_to_1)
{
	struct sim_scenario sc;
	sim_scenario_h1_pods_fuse(&sc);
	uint64_t seed0 = sc.seed;
	for (unsigned seed = 0; seed < 4; seed++) {
		sc.seed = seed0 + seed;
		h1_check(&sc, "H1 FUSE");
	}
	sc.seed = seed0;
	struct sim_result flat = run_flat(&sc);
	ck_assert_msg(flat.g[0].share < (2.0 / 3) * (1 - SHARE_TOL), "flat pod A %.3f",
		      flat.g[0].share);
}
END_TEST

static void h2_check(const struct sim_scenario *sc, const char *what)
{
	struct sim_result bfq = run(sc, sim_params_bfq);
	struct sim_result fifo = run(sc, sim_params_fifo);
	share_near(bfq.g[0].share, 1.0 / 2, SHARE_TOL, what);
	share_near(bfq.g[1].share, 1.0 / 2, SHARE_TOL, what);
	share_near(bfq.t[1].share, 1.0 / 4, SHARE_TOL, what);
	share_near(bfq.t[2].share, 1.0 / 4, SHARE_TOL, what);
	ck_assert_msg(bfq.total_mb_per_s >= 0.9 * fifo.total_mb_per_s, "%s: total %.1f fifo %.1f",
		      what, bfq.total_mb_per_s, fifo.total_mb_per_s);
	/* flat, the pod with two containers gets two thirds */
	struct sim_result flat = run_flat(sc);
	share_near(flat.g[1].share, 2.0 / 3, SHARE_TOL, what);
}

START_TEST(h2_equal_pods)
{
	struct sim_scenario sc;
	sim_scenario_h2_equal_pods(&sc);
	h2_check(&sc, "H2");
	sim_scenario_h2_equal_pods_fuse(&sc);
	h2_check(&sc, "H2 FUSE");
}
END_TEST

/* H3: children multiplying inside a subtree divide its share, in each
 * phase; flat they would take 1/2 and then 5/6 of the store. */
START_TEST(h3_delegated_subtree_holds_its_share)
{
	struct sim_scenario sc;
	sim_scenario_h3_delegated(&sc);
	const double want = 10.0 / 110;
	struct sim_result bfq = run(&sc, sim_params_bfq);
	for (unsigned w = 0; w < 2; w++) {
		char msg[48];
		snprintf(msg, sizeof(msg), "H3 subtree, phase %u", w + 1);
		share_near(bfq.w[w].g_share[0], want, SHARE_TOL, msg);
	}
	/* the spawned children divide it: none is starved, none takes more */
	for (unsigned i = 1; i < 6; i++) {
		char msg[48];
		snprintf(msg, sizeof(msg), "H3 phase 2, child %u", i);
		share_near(bfq.w[1].t_share[i], want / 5, SMALL_SHARE_TOL, msg);
	}
	struct sim_result fifo = run(&sc, sim_params_fifo);
	ck_assert_double_ge(bfq.total_mb_per_s, 0.9 * fifo.total_mb_per_s);
	struct sim_result flat = run_flat(&sc);
	ck_assert_msg(flat.w[0].g_share[0] > 4 * want && flat.w[1].g_share[0] > 8 * want,
		      "flat subtree %.3f, %.3f", flat.w[0].g_share[0], flat.w[1].g_share[0]);
}
END_TEST

START_TEST(h4_nested_levels)
{
	struct sim_scenario sc;
	sim_scenario_h4_nested(&sc);
	struct sim_result bfq = run(&sc, sim_params_bfq);
	share_near(bfq.g[0].share, 3.0 / 4, SHARE_TOL, "H4 A");
	share_near(bfq.g[1].share, 3.0 / 8, SHARE_TOL, "H4 A1");
	share_near(bfq.t[0].share, 3.0 / 16, SHARE_TOL, "H4 A1 leaf 1");
	share_near(bfq.t[1].share, 3.0 / 16, SHARE_TOL, "H4 A1 leaf 2");
	share_near(bfq.t[2].share, 3.0 / 8, SHARE_TOL, "H4 A2");
	share_near(bfq.t[3].share, 1.0 / 4, SHARE_TOL, "H4 B");
	struct sim_result fifo = run(&sc, sim_params_fifo);
	ck_assert_double_ge(bfq.total_mb_per_s, 0.9 * fifo.total_mb_per_s);
	/* flat the four leaves share alike: A1 takes half, A2 a quarter */
	struct sim_result flat = run_flat(&sc);
	ck_assert_msg(flat.g[1].share > (3.0 / 8) * (1 + SHARE_TOL), "flat A1 %.3f",
		      flat.g[1].share);
}
END_TEST

/* H5: a depth-1 reader in a heavy pod is idled for as S5's flat reader of
 * the pod's weight is; in a pod its own weight is only among the pod's
 * children, so flat (w100 next to w100) it loses most of it. */
START_TEST(h5_idling_through_the_tree)
{
	struct sim_scenario sc, s5;
	sim_scenario_h5_sync_reader(&sc, 1, true);
	sim_scenario_s5_sync_reader(&s5, 1, true);
	struct sim_result tree = run(&sc, sim_params_bfq);
	struct sim_result ref = run(&s5, sim_params_bfq);
	ck_assert_msg(tree.t[0].mb_per_s >= 0.95 * ref.t[0].mb_per_s, "serial: pod %.2f S5 %.2f",
		      tree.t[0].mb_per_s, ref.t[0].mb_per_s);
	ck_assert_uint_gt(tree.t[0].st.idle_windows, 1000);
	struct sim_result flat = run_flat(&sc);
	ck_assert_msg(flat.t[0].mb_per_s < 0.5 * ref.t[0].mb_per_s, "flat: %.2f", flat.t[0].mb_per_s);

	sim_scenario_h5_sync_reader(&sc, 16, true);
	sim_scenario_s5_sync_reader(&s5, 16, true);
	tree = run(&sc, sim_params_bfq);
	ref = run(&s5, sim_params_bfq);
	struct sim_result fifo = run(&sc, sim_params_fifo);
	ck_assert_msg(tree.t[0].mb_per_s >= 0.95 * ref.t[0].mb_per_s, "parallel: pod %.2f S5 %.2f",
		      tree.t[0].mb_per_s, ref.t[0].mb_per_s);
	ck_assert_double_ge(tree.total_mb_per_s, 0.8 * fifo.total_mb_per_s);
	ck_assert_uint_gt(tree.t[1].st.injected_ops[SCHED_INJECT_GENERAL], 1000);
}
END_TEST

/* H5: S1's journal pair in two pods, next to a heavier reader's pod. */
START_TEST(h5_journal_injected_across_pods)
{
	struct sim_scenario sc;
	sim_scenario_h5_journal(&sc);
	ck_assert_uint_gt(run(&sc, sim_params_fifo).t[0].ops, 500);
	journal_injected(&sc);
}
END_TEST

/* H6: after sched_group_set_weight the shares follow; without it they
 * would not have moved. */
START_TEST(h6_group_weight_change)
{
	struct sim_scenario sc;
	sim_scenario_h6_reweight(&sc);
	struct sim_result bfq = run(&sc, sim_params_bfq);
	share_near(bfq.w[0].g_share[0], 1.0 / 2, SHARE_TOL, "H6 pod A before");
	share_near(bfq.w[0].g_share[1], 1.0 / 2, SHARE_TOL, "H6 pod B before");
	share_near(bfq.w[1].g_share[0], 3.0 / 4, SHARE_TOL, "H6 pod A after");
	share_near(bfq.w[1].g_share[1], 1.0 / 4, SHARE_TOL, "H6 pod B after");
	share_near(bfq.w[1].t_share[1], 1.0 / 8, SHARE_TOL, "H6 container b1 after");
	share_near(bfq.w[1].t_share[2], 1.0 / 8, SHARE_TOL, "H6 container b2 after");
	struct sim_result fifo = run(&sc, sim_params_fifo);
	ck_assert_double_ge(bfq.w[1].total_mb_per_s, 0.9 * fifo.w[1].total_mb_per_s);
	sc.nreweights = 0;
	struct sim_result still = run(&sc, sim_params_bfq);
	share_near(still.w[1].g_share[0], 1.0 / 2, SHARE_TOL, "H6 without the change");
}
END_TEST

/* ---- a queue served outside its own slice pays only for what it used ----
 *
 * Served outside its own slice (injected, or yielded to past the in-service
 * queue's cap) and run empty, a queue once kept the finish tag that
 * reserved a whole budget for a slice it never had, and its next arrival
 * started there: every such visit cost it a budget of virtual time.
 * Depth-1 tenants of small share (a subtree's children) are served that
 * way all the time and got a fraction of their share (1.3% of 9.1%);
 * deep siblings served by injection lost to each other at random (60:34
 * for 1:1). */
START_TEST(h3_depth1_children_keep_the_subtree_share)
{
	struct sim_scenario sc;
	sim_scenario_h3_delegated(&sc);
	for (unsigned i = 1; i < sc.ntenants; i++) {	/* depth-1 children */
		sc.t[i].depth = 1;
		sc.t[i].think_ns = 20000;
	}
	struct sim_result bfq = run(&sc, sim_params_bfq);
	/* Five of them could take 27% alone; the subtree promises 9.1%. They
	 * get 15% less (7.67-7.83% over ten seeds, the same before and after
	 * the slot reserve), the shallow tenants' shortfall of the matrix: a
	 * bound of 15% held or failed by the seed. */
	share_near(bfq.w[1].g_share[0], 10.0 / 110, 0.20, "depth-1 children, phase 2");
}
END_TEST

START_TEST(h2_injected_deep_siblings_equal)
{
	struct sim_scenario sc;
	sim_scenario_h2_equal_pods(&sc);
	sc.t[0].depth = 1;	/* pod A: a depth-1 reader, idled for */
	sc.t[0].think_ns = 20000;
	struct sim_result bfq = run(&sc, sim_params_bfq);
	double r = ratio(&bfq, 1, 2);
	ck_assert_msg(r >= 0.9 && r <= 1.1, "pod B's equal containers: %.2f", r);
}
END_TEST

/* A 1 s run (100 ms warm-up) on a fast 16-slot store; tenants left to the caller. */
static void fast_store_scenario(struct sim_scenario *sc, const char *name, const char *about,
				uint64_t seed)
{
	memset(sc, 0, sizeof(*sc));
	sc->name = name;
	sc->about = about;
	sim_device_fast(&sc->dev, 16);
	sc->max_inflight = 16;
	sc->duration_ns = 1000 * MS;
	sc->warmup_ns = 100 * MS;
	sc->seed = seed;
}

/* The attack on injection: a weight-1 tenant streaming small sync writes
 * (barriers, injected first while a heavy depth-1 reader is idled for)
 * next to a backlogged weight-100 reader. Every injection door admits only
 * a queue owed service, so the weight-1 stream gets about its share of the
 * store's time, not whatever each idle window leaves; let in whenever the
 * reader idled, it took 36x its part (0.36 of the rest against 0.0099). */
START_TEST(injected_barriers_keep_to_their_weight)
{
	struct sim_scenario sc;
	fast_store_scenario(&sc, "barrier stream",
			    "w1 4 KiB sync writer x8, w800 depth-1 reader, w100 deep reader", 0x5eed0023);
	sc.t[0] = (struct sim_tenant){ .name = "barriers", .weight = 1, .depth = 8,
				       .think_ns = 10000, .op = SCHED_OP_WRITE, .bytes = 4096,
				       .sync = true, .journal = -1 };
	sc.t[1] = (struct sim_tenant){ .name = "idled-for", .weight = 800, .depth = 1,
				       .think_ns = 20000, .op = SCHED_OP_READ, .bytes = 4096,
				       .sync = true, .journal = -1 };
	sc.t[2] = (struct sim_tenant){ .name = "backlogged", .weight = 100, .depth = 32,
				       .think_ns = 10000, .op = SCHED_OP_READ, .bytes = 65536,
				       .sync = true, .journal = -1 };
	sc.ntenants = 3;
	struct sim_result bfq = run(&sc, sim_params_bfq);
	double total = 0;
	for (unsigned i = 0; i < 3; i++)
		total += (double)bfq.t[i].store_ns;
	/* what the reader idled for leaves is the two others', 1:100 */
	double left = total - (double)bfq.t[1].store_ns;
	double got = (double)bfq.t[0].store_ns / left;
	ck_assert_msg(got <= 3.0 / 101, "weight-1 barrier stream took %.4f of the rest, its part %.4f",
		      got, 1.0 / 101);
	ck_assert_uint_gt(bfq.t[1].st.idle_windows, 100);
}
END_TEST

/*
 * A light sync reader of depth 2 beside a heavy dsync writer of depth 24
 * (matrix seed 8): in service, the reader reaches its cap (its weight's
 * share of the depth, one slot) with its first request and yields the
 * free slots to the writer. Ending its slice there as well, because the
 * writer is heavier, gave it one request per writer slice: 0.15% of the
 * store's time against its weight's 4.1%. A shallow sync tenant keeps its
 * slice; the writer still gets every slot the reader does not use.
 */
START_TEST(light_reader_keeps_its_slice_at_its_cap)
{
	struct sim_scenario sc;
	fast_store_scenario(&sc, "light reader, heavy dsync writer",
			    "w278 4 KiB dsync writer x24, w12 8 KiB reader x2", 0x5eed0008);
	sc.t[0] = (struct sim_tenant){ .name = "dsync writer", .weight = 278, .depth = 24,
				       .think_ns = 12000, .op = SCHED_OP_WRITE, .bytes = 4096,
				       .sync = true, .dsync = true, .journal = -1 };
	sc.t[1] = (struct sim_tenant){ .name = "light reader", .weight = 12, .depth = 2,
				       .think_ns = 19000, .op = SCHED_OP_READ, .bytes = 8192,
				       .sync = true, .journal = -1 };
	sc.ntenants = 2;
	struct sim_result bfq = run(&sc, sim_params_bfq);
	struct sim_result fifo = run(&sc, sim_params_fifo);
	double total = (double)bfq.t[0].store_ns + (double)bfq.t[1].store_ns;
	double got = (double)bfq.t[1].store_ns / total;
	printf("light reader: %.4f of the store's time, its weight's share %.4f; writer %.1f MB/s, fifo %.1f\n",
	       got, 12.0 / 290, bfq.t[0].mb_per_s, fifo.t[0].mb_per_s);
	ck_assert_msg(got >= 0.25 * 12.0 / 290, "the light reader got %.4f of the store's time", got);
	ck_assert_msg(bfq.t[0].mb_per_s >= 0.8 * fifo.t[0].mb_per_s, "writer %.1f MB/s, fifo %.1f",
		      bfq.t[0].mb_per_s, fifo.t[0].mb_per_s);
}
END_TEST

/*
 * Through FUSE on a loaded host a request's time in flight includes the wait
 * for the reactor to reap it, up to 2 ms at random, whoever else is at the
 * store. A heavy depth-1 reader idled for beside a deep light reader: its
 * cycles judged one by one against the fastest alone read every long reap
 * as a slowdown from injection, the limit halved to 0 and stayed there,
 * and the deep reader got 0-2% of what it gets under fifo. Judged by the
 * means of batches, the reader keeps its rate and the deep one the store.
 */
START_TEST(reaping_noise_is_not_a_slowdown)
{
	for (uint64_t seed = 0; seed < 4; seed++) {
		struct sim_scenario sc;
		fast_store_scenario(&sc, "depth-1 reader beside a deep one, FUSE host",
				    "w900 4 KiB reader x1, w100 64 KiB reader x64", 0x5eed0030 + seed);
		sc.dev = (struct sim_device){ 0 };
		sim_device_fast(&sc.dev, 32);
		sc.dev.base_ns[SIM_COST_READ] = 100 * US;
		sc.host.reactor_wake_ns = 1000 * US;
		sc.max_inflight = 32;
		sc.duration_ns = 2000 * MS;
		sc.warmup_ns = 500 * MS;
		sc.t[0] = (struct sim_tenant){ .name = "depth-1", .weight = 900, .depth = 1,
					       .think_ns = 20 * US, .op = SCHED_OP_READ, .bytes = 4096,
					       .sync = true, .journal = -1 };
		sc.t[1] = (struct sim_tenant){ .name = "deep", .weight = 100, .depth = 64,
					       .think_ns = 20 * US, .op = SCHED_OP_READ,
					       .bytes = 65536, .sync = true, .journal = -1 };
		sc.ntenants = 2;
		struct sim_result bfq = run(&sc, sim_params_bfq);
		struct sim_result fifo = run(&sc, sim_params_fifo);
		sc.ntenants = 1;
		struct sim_result solo = run(&sc, sim_params_fifo);
		double reader = bfq.t[0].mb_per_s / solo.t[0].mb_per_s;
		double deep = bfq.t[1].mb_per_s / fifo.t[1].mb_per_s;
		ck_assert_msg(reader >= 0.9, "seed %lu: the depth-1 reader kept %.2f of its solo rate",
			      (unsigned long)seed, reader);
		ck_assert_msg(deep >= 0.5, "seed %lu: the deep reader got %.2f of its rate under fifo",
			      (unsigned long)seed, deep);
	}
}
END_TEST

/* Q1 on a store of 8 slots behind 32 dispatch slots under params: 4:1
 * between 3:1 and 5.5:1 (whole requests at this depth), the store at
 * least 0.9 as busy as under fifo. Returns the run. */
static struct sim_result assert_q1_keeps_weights(void (*params)(struct sched_params *),
						 const char *what)
{
	struct sim_scenario sc;
	sim_scenario_q1_queued_store(&sc, 8);
	struct sim_result got = run(&sc, params);
	struct sim_result fifo = run(&sc, sim_params_fifo);
	double r = ratio(&got, 0, 1);
	ck_assert_msg(r >= 3 && r <= 5.5, "%s: ratio %.2f", what, r);
	ck_assert_msg(got.store_busy >= 0.9 * fifo.store_busy, "%s: busy %.2f fifo %.2f", what,
		      got.store_busy, fifo.store_busy);
	return got;
}

/* Q1: two 16-deep readers at 400:100 all fit in the dispatch depth and the
 * store's queue serves them 1:1. With the depth learned from the store (8,
 * a limit of 12) the weights divide those 12: 10 and 2 at once, shares of
 * the store's queue in that ratio. On a store of 32 slots nothing queues,
 * each uses 16 of them, and the learned depth leaves it so. */
START_TEST(q1_learned_depth_keeps_weights_on_a_queued_store)
{
	assert_q1_keeps_weights(sim_params_bfq_learn_depth, "learned depth");
	struct sim_scenario sc;
	sim_scenario_q1_queued_store(&sc, 8);
	struct sim_result fixed = run(&sc, sim_params_bfq_open_door);
	double rx = ratio(&fixed, 0, 1);
	ck_assert_msg(rx < 1.5, "max_inflight and an open door held them back: ratio %.2f", rx);
	sim_scenario_q1_queued_store(&sc, 32);
	struct sim_result wide = run(&sc, sim_params_bfq_learn_depth);
	struct sim_result wide_fifo = run(&sc, sim_params_fifo);
	ck_assert_msg(wide.store_busy >= 0.95 * wide_fifo.store_busy, "busy %.2f fifo %.2f",
		      wide.store_busy, wide_fifo.store_busy);
}
END_TEST

/* Q1 again with work_conserving off: the light reader, a slice ahead of
 * its share, no longer takes the slots the heavy one leaves unused, so the
 * store's queue holds the heavy one's 16 and a few of the light one's (the
 * store is full either way). */
START_TEST(q1_without_work_conservation_keeps_weights_on_a_queued_store)
{
	assert_q1_keeps_weights(sim_params_bfq_strict, "work_conserving off");
}
END_TEST

/* Q1 with the defaults: the holding door's probes find the heavy reader
 * moving half as much with the door open as shut (the light one's
 * requests queue in the store beside its own) and shut it; on a store of
 * 32 slots, where nothing queues, they find it moving as much either way
 * and leave it open, the store as busy as under fifo. */
START_TEST(q1_learned_door_keeps_weights_on_a_queued_store)
{
	struct sim_result narrow = assert_q1_keeps_weights(sim_params_bfq, "learned door");
	ck_assert(narrow.t[0].st.door_shut);
	ck_assert(!narrow.t[1].st.door_shut);
	struct sim_scenario sc;
	sim_scenario_q1_queued_store(&sc, 32);
	struct sim_result wide = run(&sc, sim_params_bfq);
	ck_assert(!wide.t[0].st.door_shut);
	struct sim_result wide_fifo = run(&sc, sim_params_fifo);
	ck_assert_msg(wide.store_busy >= 0.95 * wide_fifo.store_busy, "busy %.2f fifo %.2f",
		      wide.store_busy, wide_fifo.store_busy);
}
END_TEST

/* Q3 (bench/run's weights-3-3-1-d8): where the store serves 16 at once,
 * the light reader's requests let in beside a holder wait in its queue
 * and take the heavy readers' share; the probes find the holder moving
 * less with the door open and shut it (always open: about 1:1:1): 3:3:1,
 * the store as busy as under fifo. On 32 slots the light reader's 8 are
 * room: the door stays open (shares as under fifo), and shut it would
 * leave a fifth of the store idle. */
START_TEST(q3_learned_door_follows_the_store)
{
	struct sim_scenario sc;
	sim_scenario_q3_depth_fitting(&sc, 16);
	struct sim_result full = run(&sc, sim_params_bfq);
	struct sim_result full_fifo = run(&sc, sim_params_fifo);
	double light = full.t[2].share, target = 100.0 / 700.0;
	ck_assert_msg(light > 0.9 * target && light < 1.1 * target, "light share %.3f", light);
	ck_assert(full.t[0].st.door_shut || full.t[1].st.door_shut);
	struct sim_result full_open = run(&sc, sim_params_bfq_open_door);
	ck_assert_msg(full_open.t[2].share > 0.25, "door open: light share %.3f",
		      full_open.t[2].share);
	ck_assert_msg(full.store_busy >= 0.95 * full_fifo.store_busy, "busy %.2f fifo %.2f",
		      full.store_busy, full_fifo.store_busy);
	sim_scenario_q3_depth_fitting(&sc, 32);
	struct sim_result room = run(&sc, sim_params_bfq);
	struct sim_result room_fifo = run(&sc, sim_params_fifo);
	struct sim_result room_shut = run(&sc, sim_params_bfq_strict);
	ck_assert(!room.t[0].st.door_shut && !room.t[1].st.door_shut);
	ck_assert_msg(room.store_busy >= 0.95 * room_fifo.store_busy, "busy %.2f fifo %.2f",
		      room.store_busy, room_fifo.store_busy);
	ck_assert_msg(room_shut.store_busy < 0.85 * room_fifo.store_busy, "shut: busy %.2f fifo %.2f",
		      room_shut.store_busy, room_fifo.store_busy);
}
END_TEST

/* Same seed, same numbers: the simulator is a test instrument. */
START_TEST(sim_is_deterministic)
{
	struct sim_scenario sc;
	sim_scenario_s1_journal(&sc, 100);
	struct sim_result a = run(&sc, sim_params_bfq), b = run(&sc, sim_params_bfq);
	for (unsigned i = 0; i < a.ntenants; i++) {
		ck_assert_uint_eq(a.t[i].ops, b.t[i].ops);
		ck_assert_uint_eq(a.t[i].lat_max_ns, b.t[i].lat_max_ns);
	}
	sc.seed++;
	struct sim_result c = run(&sc, sim_params_bfq);
	ck_assert_uint_ne(a.t[2].lat_max_ns, c.t[2].lat_max_ns);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sched_sim");
	TCase *tc = tcase_create("lessons");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, s1_journal_writer_keeps_fifo_throughput);
	tcase_add_test(tc, s2_free_tenant_not_capped);
	tcase_add_test(tc, s3_readers_latency_writer_throughput);
	tcase_add_test(tc, s4_weights_8_to_1_at_full_speed);
	tcase_add_test(tc, s4_weights_5_3_1);
	tcase_add_test(tc, s4_fuse_round_trip_8_to_1);
	tcase_add_test(tc, s4_fuse_round_trip_5_3_1);
	tcase_add_test(tc, s5_serial_idling_earns_ratio);
	tcase_add_test(tc, s5_parallel_work_conserving);
	tcase_add_test(tc, injected_barriers_keep_to_their_weight);
	tcase_add_test(tc, light_reader_keeps_its_slice_at_its_cap);
	tcase_add_test(tc, reaping_noise_is_not_a_slowdown);
	tcase_add_test(tc, q1_learned_depth_keeps_weights_on_a_queued_store);
	tcase_add_test(tc, q1_without_work_conservation_keeps_weights_on_a_queued_store);
	tcase_add_test(tc, q1_learned_door_keeps_weights_on_a_queued_store);
	tcase_add_test(tc, q3_learned_door_follows_the_store);
	tcase_add_test(tc, sim_is_deterministic);
	suite_add_tcase(s, tc);
	TCase *tree = tcase_create("tree");
	tcase_set_timeout(tree, 60);
	tcase_add_test(tree, h_tree_model);
	tcase_add_test(tree, h1_pods_2_to_1);
	tcase_add_test(tree, h1_fuse_pods_2_to_1);
	tcase_add_test(tree, h2_equal_pods);
	tcase_add_test(tree, h3_delegated_subtree_holds_its_share);
	tcase_add_test(tree, h4_nested_levels);
	tcase_add_test(tree, h5_idling_through_the_tree);
	tcase_add_test(tree, h5_journal_injected_across_pods);
	tcase_add_test(tree, h6_group_weight_change);
	tcase_add_test(tree, h3_depth1_children_keep_the_subtree_share);
	tcase_add_test(tree, h2_injected_deep_siblings_equal);
	suite_add_tcase(s, tree);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
