/* Unit, edge-case and consistency tests of the pure scheduler. */
#include "fusesched/sched.h"
#include "list.h"
#include "sched_internal.h"	/* the tree tests look at groups and sums */
#include "wf2q.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define US 1000ull
#define MS (1000 * US)

static uint64_t rng_state;

static uint64_t rnd(uint64_t n)
{
	rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
	return (rng_state >> 33) % n;
}

static struct sched *new_sched(enum sched_policy policy, uint32_t max_inflight)
{
	struct sched_params p;
	struct sched *s;
	sched_params_default(&p);
	p.policy = policy;
	p.max_inflight = max_inflight;
	/* short slices, so that shares converge within a few thousand requests */
	p.budget_max_bytes = p.budget_initial_bytes;
	ck_assert_int_eq(sched_new(&p, &s), 0);
	return s;
}

static struct sched_queue *queue(struct sched *s, uint64_t id, uint32_t weight)
{
	struct sched_queue *q;
	ck_assert_int_eq(sched_queue_get(s, id, weight, &q), 0);
	return q;
}

static void req_init(struct sched_req *r, struct sched_queue *q, enum sched_op op, uint64_t bytes)
{
	*r = (struct sched_req){ .queue = q, .op = op, .bytes = bytes, .sync = false };
}

START_TEST(params_validated)
{
	struct sched_params p;
	struct sched *s;
	sched_params_default(&p);
	p.max_inflight = 0;
	ck_assert_int_eq(sched_new(&p, &s), -EINVAL);
	sched_params_default(&p);
	p.budget_min_bytes = p.budget_max_bytes * 2;
	ck_assert_int_eq(sched_new(&p, &s), -EINVAL);
	sched_params_default(&p);
	p.idle_min_ns = p.idle_max_ns + 1;
	ck_assert_int_eq(sched_new(&p, &s), -EINVAL);
	sched_params_default(&p);
	p.inject_cycle_slowdown_pct = 99;
	ck_assert_int_eq(sched_new(&p, &s), -EINVAL);
	sched_params_default(&p);
	p.model_iops[1] = 40000;	/* a write model without its bandwidth */
	ck_assert_int_eq(sched_new(&p, &s), -EINVAL);
	p.model_bytes_per_s[1] = 3000000000ull;
	ck_assert_int_eq(sched_new(&p, &s), 0);
	sched_free(s);

	s = new_sched(SCHED_POLICY_BFQ, 4);
	struct sched_queue *q;
	ck_assert_int_eq(sched_queue_get(s, 1, 1001, &q), -EINVAL);
	q = queue(s, 1, 0);
	struct sched_queue_stats st;
	sched_queue_stats(q, &st);
	ck_assert_uint_eq(st.weight, SCHED_WEIGHT_DEFAULT);
	ck_assert_ptr_eq(queue(s, 1, 500), q);	/* existing queue keeps its weight */
	ck_assert_int_eq(sched_queue_set_weight(s, q, 0), -EINVAL);
	ck_assert_int_eq(sched_queue_set_weight(s, q, 1000), 0);
	sched_queue_stats(q, &st);
	ck_assert_uint_eq(st.weight, 1000);
	ck_assert_ptr_eq(sched_queue_find(s, 1), q);
	ck_assert_ptr_null(sched_queue_find(s, 2));
	sched_free(s);
}
END_TEST

/* Two tenants alike but for O_DSYNC, each sending four 4 KiB sync writes
 * that take 10 us at the store, under kind's model only (1 ms a write,
 * against 10 us): what each was charged. */
static void charged_plain_and_dsync(enum sched_cost_kind kind, uint64_t *plain_bytes,
				    uint64_t *dsync_bytes)
{
	struct sched_params p;
	struct sched *s;
	sched_params_default(&p);
	p.model_iops[kind] = 1000;
	p.model_bytes_per_s[kind] = 1000000000ull;
	ck_assert_int_eq(sched_new(&p, &s), 0);
	struct sched_queue *plain = queue(s, 1, 100), *dsync = queue(s, 2, 100);
	struct sched_req a, b, *r;
	uint64_t now = 1000 * US;
	for (int round = 0; round < 4; round++, now += 100 * US) {
		req_init(&a, plain, SCHED_OP_WRITE, 4096);
		req_init(&b, dsync, SCHED_OP_WRITE, 4096);
		a.sync = b.sync = b.dsync = true;
		sched_enqueue(s, &a, now);
		sched_enqueue(s, &b, now);
		int n = 0;
		while ((r = sched_dispatch(s, now)))
			n++;
		ck_assert_int_eq(n, 2);
		sched_complete(s, &a, now + 10 * US);
		sched_complete(s, &b, now + 10 * US);
	}
	struct sched_queue_stats sa, sb;
	sched_queue_stats(plain, &sa);
	sched_queue_stats(dsync, &sb);
	ck_assert_uint_eq(sa.served_bytes, sb.served_bytes);
	*plain_bytes = sa.charged_bytes;
	*dsync_bytes = sb.charged_bytes;
	/* one number of the kind without the other is refused */
	p.model_bytes_per_s[kind] = 0;
	ck_assert_int_eq(sched_reload(s, &p), -EINVAL);
	sched_free(s);
}

/* With the store's cost model a plain write is billed the model's price
 * whatever its time in flight; a dsync write, with no dsync model given,
 * its time in flight: the model's write must cost far more (1 ms x 32
 * slots against 10 us), and the dsync one must not. */
START_TEST(cost_model_prices_plain_writes_not_dsync_ones)
{
	uint64_t plain, dsync;
	charged_plain_and_dsync(SCHED_COST_WRITE, &plain, &dsync);
	ck_assert_msg(plain > 100 * dsync, "plain write charged %lu, dsync write %lu",
		      (unsigned long)plain, (unsigned long)dsync);
}
END_TEST

/* A dsync write is priced by the dsync model, not the plain one: with only
 * that kind priced the two come out the other way round. */
START_TEST(cost_model_prices_dsync_writes_by_their_own_kind)
{
	uint64_t plain, dsync;
	charged_plain_and_dsync(SCHED_COST_DSYNC, &plain, &dsync);
	ck_assert_msg(dsync > 100 * plain, "dsync write charged %lu, plain write %lu",
		      (unsigned long)dsync, (unsigned long)plain);
}
END_TEST

/* Charged bytes of rounds 4 KiB sync writes of q, each 10 us at the store. */
static uint64_t charged_for_writes(struct sched *s, struct sched_queue *q, int rounds, uint64_t *now)
{
	struct sched_queue_stats before, after;
	sched_queue_stats(q, &before);
	for (int i = 0; i < rounds; i++, *now += 100 * US) {
		struct sched_req w;
		req_init(&w, q, SCHED_OP_WRITE, 4096);
		w.sync = true;
		sched_enqueue(s, &w, *now);
		ck_assert_ptr_eq(sched_dispatch(s, *now), &w);
		sched_complete(s, &w, *now + 10 * US);
	}
	sched_queue_stats(q, &after);
	return after.charged_bytes - before.charged_bytes;
}

/* A reload's model bills the requests completing after it; one number of
 * a kind without the other is refused and the model in use kept. */
START_TEST(cost_model_set_live)
{
	struct sched_params p;
	struct sched *s;
	sched_params_default(&p);
	ck_assert_int_eq(sched_new(&p, &s), 0);
	struct sched_queue *q = queue(s, 1, 100);
	uint64_t now = 1000 * US;
	uint64_t by_time = charged_for_writes(s, q, 8, &now);
	p.model_iops[1] = 1000;				/* a 4 KiB write: 1 ms of the store */
	p.model_bytes_per_s[1] = 1000000000ull;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	uint64_t by_model = charged_for_writes(s, q, 8, &now);
	ck_assert_msg(by_model > 20 * by_time, "model %lu, time %lu", (unsigned long)by_model,
		      (unsigned long)by_time);
	p.model_bytes_per_s[1] = 0;			/* iops without bandwidth */
	ck_assert_int_eq(sched_reload(s, &p), -EINVAL);
	uint64_t still = charged_for_writes(s, q, 8, &now);
	ck_assert_msg(still * 10 > by_model * 9, "kept model %lu, before %lu", (unsigned long)still,
		      (unsigned long)by_model);
	p.model_iops[1] = 0;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	uint64_t off = charged_for_writes(s, q, 8, &now);
	ck_assert_msg(off * 20 < by_model, "off %lu, model %lu", (unsigned long)off,
		      (unsigned long)by_model);
	sched_free(s);
}
END_TEST

/*
 * One cycle of a depth-1 reader a (think 10 us) beside b's requests at the
 * store: true when, a's request done, the scheduler opened an idle window
 * for a.
 */
static bool a_is_idled_for(struct sched *s, struct sched_queue *a, uint64_t *now)
{
	static struct sched_req ra;
	req_init(&ra, a, SCHED_OP_READ, 4096);
	ra.sync = true;
	sched_enqueue(s, &ra, *now);
	struct sched_req *r;
	while ((r = sched_dispatch(s, *now)) && r != &ra)
		;	/* b's stay at the store */
	ck_assert_ptr_eq(r, &ra);
	struct sched_queue_stats before, after;
	sched_queue_stats(a, &before);
	*now += 100 * US;
	sched_complete(s, &ra, *now);
	sched_queue_stats(a, &after);
	*now += 10 * US;
	return after.idle_windows > before.idle_windows;
}

START_TEST(reload_changes_idling_and_keeps_the_rest)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 4);
	struct sched_queue *a = queue(s, 1, 100), *b = queue(s, 2, 100);
	struct sched_req rb[3];
	uint64_t now = 0;
	for (int i = 0; i < 3; i++) {
		req_init(&rb[i], b, SCHED_OP_READ, 4096);
		sched_enqueue(s, &rb[i], now);
	}
	for (int round = 0; round < 4; round++)	/* a's think time learned */
		a_is_idled_for(s, a, &now);
	ck_assert(a_is_idled_for(s, a, &now));

	struct sched_params p = *sched_params_of(s);
	p.idle_enable = false;
	p.default_weight = 500;	/* kept: tenants' weights come from their table */
	p.budget_timeout_ns = 5000000;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	ck_assert(!sched_params_of(s)->idle_enable);
	ck_assert_uint_eq(sched_params_of(s)->budget_timeout_ns, 5000000);
	ck_assert_uint_eq(sched_params_of(s)->default_weight, SCHED_WEIGHT_DEFAULT);
	for (int round = 0; round < 3; round++)
		ck_assert(!a_is_idled_for(s, a, &now));

	p.idle_enable = true;
	p.budget_timeout_ns = 0;	/* refused: nothing of it applied */
	ck_assert_int_eq(sched_reload(s, &p), -EINVAL);
	ck_assert(!sched_params_of(s)->idle_enable);
	ck_assert(!a_is_idled_for(s, a, &now));

	p.budget_timeout_ns = 20000000;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	bool idled = false;
	for (int round = 0; round < 4 && !idled; round++)
		idled = a_is_idled_for(s, a, &now);
	ck_assert(idled);
	sched_free(s);
}
END_TEST

/* A reload's lower max_inflight: what is at the store finishes, and no
 * more is dispatched until it is under the new limit. */
START_TEST(reload_lowers_max_inflight)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 8);
	struct sched_queue *q = queue(s, 1, 100);
	struct sched_req r[16], *out[16];
	uint64_t now = 0;
	for (int i = 0; i < 16; i++) {
		req_init(&r[i], q, SCHED_OP_READ, 4096);
		sched_enqueue(s, &r[i], now);
	}
	int n = 0;
	while (n < 16 && (out[n] = sched_dispatch(s, now)))
		n++;
	ck_assert_int_eq(n, 8);

	struct sched_params p = *sched_params_of(s);
	p.max_inflight = 4;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	ck_assert_uint_eq(sched_max_inflight(s), 4);
	now += 100 * US;
	for (int i = 0; i < 6; i++)	/* 2 left at the store */
		sched_complete(s, out[i], now);
	int more = 0;
	while (n + more < 16 && (out[n + more] = sched_dispatch(s, now)))
		more++;
	ck_assert_int_eq(more, 2);
	sched_free(s);
}
END_TEST

START_TEST(unknown_policy_rejected)
{
	struct sched_params p;
	struct sched *s;
	sched_params_default(&p);
	p.policy = (enum sched_policy)(SCHED_POLICY_FIFO + 1);
	ck_assert_int_eq(sched_new(&p, &s), -EINVAL);
}
END_TEST

/* The table grows past its initial buckets; removed tenants are gone from
 * it, and a tenant id removed and asked for again gets a new queue. */
START_TEST(tenant_table_many)
{
	enum { N = 1000 };
	static struct sched_queue *q[N];
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 4);
	for (uint64_t i = 0; i < N; i++)
		q[i] = queue(s, i * 0x9e3779b97f4a7c15ull, 1 + i % SCHED_WEIGHT_MAX);
	for (uint64_t i = 0; i < N; i++)
		ck_assert_ptr_eq(sched_queue_find(s, i * 0x9e3779b97f4a7c15ull), q[i]);
	for (uint64_t i = 0; i < N; i += 3) {
		sched_queue_remove(s, q[i]);
		ck_assert_ptr_null(sched_queue_find(s, i * 0x9e3779b97f4a7c15ull));
	}
	for (uint64_t i = 0; i < N; i++) {
		struct sched_queue *f = sched_queue_find(s, i * 0x9e3779b97f4a7c15ull);
		if (i % 3)
			ck_assert_ptr_eq(f, q[i]);
		else
			ck_assert_ptr_nonnull(queue(s, i * 0x9e3779b97f4a7c15ull, 0));
	}
	sched_free(s);
}
END_TEST

/*
 * A tenant given every slot whose requests hang at the store (they never
 * complete) stops holding the others out once they are at the store past
 * the hung bound (5 s): another tenant's requests are dispatched then, not
 * before, and the hung tenant gets no more slots than it holds. Both
 * policies free the depth and hold the hung tenant's next requests back
 * (fifo while it has a full depth at the store; bfq at its share).
 */
static void hung_requests_leave_the_depth(enum sched_policy policy)
{
	enum { DEPTH = 4 };
	struct sched *s = new_sched(policy, DEPTH);
	struct sched_queue *stuck = queue(s, 1, 100), *other = queue(s, 2, 100);
	struct sched_req hung[DEPTH + 2], probe[2];
	uint64_t now = 1 * MS;
	for (int i = 0; i < DEPTH + 2; i++) {
		req_init(&hung[i], stuck, SCHED_OP_READ, 4096);
		hung[i].sync = true;
		sched_enqueue(s, &hung[i], now);
	}
	int dispatched = 0;
	while (sched_dispatch(s, now))
		dispatched++;
	ck_assert_int_eq(dispatched, DEPTH); /* alone: every slot */
	now += 1 * MS;
	for (int i = 0; i < 2; i++) {
		req_init(&probe[i], other, SCHED_OP_READ, 4096);
		probe[i].sync = true;
		sched_enqueue(s, &probe[i], now);
	}
	/* Slow, not hung: the others wait, the timers run as they come due. */
	for (; now < 4900 * MS; now += 10 * MS) {
		if (sched_next_deadline(s) <= now)
			sched_timer(s, now);
		ck_assert_ptr_null(sched_dispatch(s, now));
	}
	ck_assert_uint_eq(sched_hung(s), 0);
	/* The reactor is woken when the oldest turns hung. */
	uint64_t due = sched_next_deadline(s);
	ck_assert_uint_le(due, 1 * MS + 5000 * MS);
	now = 1 * MS + 5000 * MS;
	sched_timer(s, now);
	ck_assert_uint_eq(sched_hung(s), DEPTH);
	struct sched_req *got[4];
	int n = 0;
	for (struct sched_req *r; n < 4 && (r = sched_dispatch(s, now));)
		got[n++] = r;
	int probes = 0, stuck_more = 0;
	for (int i = 0; i < n; i++) {
		probes += got[i]->queue == other;
		stuck_more += got[i]->queue == stuck;
	}
	ck_assert_int_eq(probes, 2);
	ck_assert_int_eq(stuck_more, 0); /* a full depth hung (bfq: at its share and more): no more slots */
	for (int i = 0; i < n; i++)
		sched_complete(s, got[i], now + 1 * MS);
	/* The hung ones return at last: they are plain completions. */
	for (int i = 0; i < DEPTH; i++)
		sched_complete(s, &hung[i], now + 2 * MS);
	ck_assert_uint_eq(sched_hung(s), 0);
	while (sched_inflight(s) || sched_pending(s)) {
		struct sched_req *r = sched_dispatch(s, now + 3 * MS);
		if (!r) {
			now += 10 * MS;
			if (sched_next_deadline(s) <= now)
				sched_timer(s, now);
			continue;
		}
		sched_complete(s, r, now + 3 * MS);
	}
	sched_free(s);
}

START_TEST(hung_requests_leave_the_depth_bfq)
{
	hung_requests_leave_the_depth(SCHED_POLICY_BFQ);
}
END_TEST

START_TEST(hung_requests_leave_the_depth_fifo)
{
	hung_requests_leave_the_depth(SCHED_POLICY_FIFO);
}
END_TEST

/*
 * A request the engine cannot start before its own hung ones return
 * (sched_hang: the executors' line holds it back) leaves its slot at once,
 * not after the hung bound: another tenant's request, queued after it, is
 * dispatched in the same round. It completes later like any request.
 */
static void hung_at_dispatch_leaves_the_slot(enum sched_policy policy)
{
	enum { DEPTH = 2 };
	struct sched *s = new_sched(policy, DEPTH);
	struct sched_queue *stuck = queue(s, 1, 100), *other = queue(s, 2, 100);
	struct sched_req held[DEPTH], probe;
	uint64_t now = 1 * MS;
	for (int i = 0; i < DEPTH; i++) {
		req_init(&held[i], stuck, SCHED_OP_OTHER, 0);
		held[i].sync = true;
		sched_enqueue(s, &held[i], now);
	}
	for (int i = 0; i < DEPTH; i++)
		ck_assert_ptr_eq(sched_dispatch(s, now), &held[i]);
	req_init(&probe, other, SCHED_OP_OTHER, 0);
	probe.sync = true;
	sched_enqueue(s, &probe, now);
	ck_assert_ptr_null(sched_dispatch(s, now)); /* the depth is full */
	sched_hang(s, &held[0]);
	sched_hang(s, &held[0]); /* once only */
	ck_assert_uint_eq(sched_hung(s), 1);
	ck_assert_ptr_eq(sched_dispatch(s, now), &probe);
	sched_complete(s, &probe, now + 1 * MS);
	for (int i = 0; i < DEPTH; i++)
		sched_complete(s, &held[i], now + 2 * MS);
	ck_assert_uint_eq(sched_hung(s), 0);
	ck_assert_uint_eq(sched_inflight(s), 0);
	sched_free(s);
}

START_TEST(hung_at_dispatch_leaves_the_slot_bfq)
{
	hung_at_dispatch_leaves_the_slot(SCHED_POLICY_BFQ);
}
END_TEST

START_TEST(hung_at_dispatch_leaves_the_slot_fifo)
{
	hung_at_dispatch_leaves_the_slot(SCHED_POLICY_FIFO);
}
END_TEST

/*
 * The hung bound follows the store's own times: 16 times the longest a
 * request took there lately, within 200 ms..5 s. A tenant alone at the
 * store serves rounds whose requests each take store_ns, then its next
 * requests never return and another tenant comes: that tenant's requests
 * are not dispatched before the bound, and are when it is reached. Its
 * rounds are run through the scheduler, solo (sched_account), or are
 * metadata run at once (sched_note_store_time).
 */
enum rounds_run { ROUNDS_SCHEDULED, ROUNDS_SOLO, ROUNDS_METADATA_AT_ONCE };

static void hung_after(enum sched_policy policy, enum rounds_run how, uint64_t store_ns, uint64_t bound_ns)
{
	bool solo = how != ROUNDS_SCHEDULED;
	enum { DEPTH = 4, ROUNDS = 20 };
	struct sched *s = new_sched(policy, DEPTH);
	struct sched_queue *stuck = queue(s, 1, 100), *other = queue(s, 2, 100);
	struct sched_req served[DEPTH], hung[DEPTH], probe;
	uint64_t now = 1 * MS;
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < DEPTH; i++) {
			req_init(&served[i], stuck, SCHED_OP_READ, 4096);
			served[i].sync = true;
			if (!solo)
				sched_enqueue(s, &served[i], now);
		}
		for (int i = 0; i < DEPTH && !solo; i++)
			ck_assert_ptr_eq(sched_dispatch(s, now), &served[i]);
		now += store_ns;
		for (int i = 0; i < DEPTH; i++) {
			if (how == ROUNDS_METADATA_AT_ONCE)
				sched_note_store_time(s, store_ns, now);
			else if (solo)
				sched_account(s, &served[i], store_ns, now);
			else
				sched_complete(s, &served[i], now);
		}
	}
	for (int i = 0; i < DEPTH; i++) {
		req_init(&hung[i], stuck, SCHED_OP_READ, 4096);
		hung[i].sync = true;
		sched_enqueue(s, &hung[i], now);
		ck_assert_ptr_eq(sched_dispatch(s, now), &hung[i]);
	}
	uint64_t hang_start = now;
	req_init(&probe, other, SCHED_OP_READ, 4096);
	probe.sync = true;
	sched_enqueue(s, &probe, now);
	for (; now + 10 * MS < hang_start + bound_ns; now += 10 * MS) {
		if (sched_next_deadline(s) <= now)
			sched_timer(s, now);
		ck_assert_msg(!sched_dispatch(s, now), "dispatched %llu ms into the hang, before the bound %llu ms",
			      (unsigned long long)((now - hang_start) / MS), (unsigned long long)(bound_ns / MS));
	}
	ck_assert_uint_eq(sched_hung(s), 0);
	ck_assert_uint_le(sched_next_deadline(s), hang_start + bound_ns);
	now = hang_start + bound_ns;
	sched_timer(s, now);
	ck_assert_uint_eq(sched_hung(s), DEPTH);
	ck_assert_ptr_eq(sched_dispatch(s, now), &probe);
	sched_complete(s, &probe, now + 100 * US);
	for (int i = 0; i < DEPTH; i++)
		sched_complete(s, &hung[i], now + 1 * MS);
	ck_assert_uint_eq(sched_hung(s), 0);
	sched_free(s);
}

START_TEST(the_hung_bound_follows_the_stores_times)
{
	enum sched_policy policy = _i ? SCHED_POLICY_FIFO : SCHED_POLICY_BFQ;
	for (enum rounds_run how = ROUNDS_SCHEDULED; how <= ROUNDS_METADATA_AT_ONCE; how++) {
		hung_after(policy, how, 100 * US, 200 * MS);	/* a fast store: the floor */
		hung_after(policy, how, 30 * MS, 480 * MS);	/* 16 times its longest */
		hung_after(policy, how, 1000 * MS, 5000 * MS); /* a slow one: the ceiling */
	}
}
END_TEST

/*
 * Beside a tenant whose requests hang at the store, another tenant's
 * requests complete, and each is dispatched as it comes rather than after
 * the hung tenant's slice: its hung requests count as the service they
 * hold. What the hung tenant holds, queued and at the store, is counted
 * for the kernel's queue of async requests (sched_held_by_hung), with the
 * hung requests' mean size.
 */
START_TEST(beside_a_hung_tenant_others_are_served_as_they_come)
{
	enum { DEPTH = 4, QUEUED = 3, PROBES = 50 };
	struct sched *s = new_sched(SCHED_POLICY_BFQ, DEPTH);
	struct sched_queue *stuck = queue(s, 1, 100), *other = queue(s, 2, 100);
	struct sched_req hung[DEPTH + QUEUED], probe;
	uint64_t now = 1 * MS, mean_bytes = 1;
	for (int i = 0; i < DEPTH + QUEUED; i++) {
		req_init(&hung[i], stuck, SCHED_OP_READ, 8192);
		hung[i].sync = true;
		sched_enqueue(s, &hung[i], now);
	}
	while (sched_dispatch(s, now))
		;
	ck_assert_uint_eq(sched_held_by_hung(s, &mean_bytes), 0);
	ck_assert_uint_eq(mean_bytes, 0);
	now += 5001 * MS;
	sched_timer(s, now);
	ck_assert_uint_eq(sched_hung(s), DEPTH);
	ck_assert_uint_eq(sched_held_by_hung(s, &mean_bytes), DEPTH + QUEUED);
	ck_assert_uint_eq(mean_bytes, 8192);
	for (int i = 0; i < PROBES; i++) {
		req_init(&probe, other, SCHED_OP_READ, 4096);
		probe.sync = true;
		sched_enqueue(s, &probe, now);
		struct sched_req *r = sched_dispatch(s, now);
		ck_assert_msg(r == &probe, "probe %d was not dispatched as it came", i);
		now += 100 * US;
		sched_complete(s, r, now);
		now += 100 * US;
		if (sched_next_deadline(s) <= now)
			sched_timer(s, now);
	}
	ck_assert_uint_eq(sched_held_by_hung(s, &mean_bytes), DEPTH + QUEUED);
	for (int i = 0; i < DEPTH; i++)
		sched_complete(s, &hung[i], now);
	ck_assert_uint_eq(sched_held_by_hung(s, &mean_bytes), 0);
	for (struct sched_req *r; sched_inflight(s) || sched_pending(s);) {
		if ((r = sched_dispatch(s, now)))
			sched_complete(s, r, now + 1 * MS);
		now += 1 * MS;
		if (sched_next_deadline(s) <= now)
			sched_timer(s, now);
	}
	sched_free(s);
}
END_TEST

struct list_item {
	int v;
	struct sched_link link;
};

START_TEST(intrusive_list)
{
	struct sched_link head;
	struct list_item it[4] = { { .v = 0 }, { .v = 1 }, { .v = 2 }, { .v = 3 } };
	sched_list_init(&head);
	ck_assert(sched_list_empty(&head));
	ck_assert_ptr_null(sched_list_first_entry(&head, struct list_item, link));
	for (int i = 0; i < 4; i++) {
		ck_assert(!sched_list_linked(&it[i].link));
		sched_list_add_tail(&head, &it[i].link);
		ck_assert(sched_list_linked(&it[i].link));
	}
	sched_list_remove(&it[0].link);
	sched_list_remove(&it[2].link);
	ck_assert(!sched_list_linked(&it[2].link));
	ck_assert_int_eq(sched_list_first_entry(&head, struct list_item, link)->v, 1);
	sched_list_add_tail(&head, &it[0].link);
	int seen[4], n = 0;
	struct sched_link *pos, *tmp;
	sched_list_foreach_safe(pos, tmp, &head) {
		seen[n++] = sched_list_entry(pos, struct list_item, link)->v;
		sched_list_remove(pos);
	}
	ck_assert_int_eq(n, 3);
	ck_assert_int_eq(seen[0], 1);
	ck_assert_int_eq(seen[1], 3);
	ck_assert_int_eq(seen[2], 0);
	ck_assert(sched_list_empty(&head));
}
END_TEST

START_TEST(all_idle)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 4);
	queue(s, 1, 100);
	queue(s, 2, 100);
	ck_assert_ptr_null(sched_dispatch(s, 1000));
	ck_assert_uint_eq(sched_next_deadline(s), SCHED_DEADLINE_NONE);
	sched_timer(s, 2000);
	ck_assert_ptr_null(sched_dispatch(s, 3000));
	ck_assert_uint_eq(sched_inflight(s), 0);
	ck_assert_uint_eq(sched_pending(s), 0);
	sched_free(s);
}
END_TEST

/* A lone tenant's requests that ran without the scheduler are counted, and hold nothing. */
START_TEST(solo_requests_are_counted)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 8);
	struct sched_queue *q = queue(s, 1, 100);
	enum { REQUESTS = 64 };
	for (int i = 0; i < REQUESTS; i++) {
		struct sched_req r;
		req_init(&r, q, SCHED_OP_READ, 1 << 20);
		r.sync = true;
		sched_account(s, &r, 100 * US, (uint64_t)(i + 1) * MS);
	}
	ck_assert_uint_eq(sched_peak_rate(s), 0); /* nothing learned (see sched.h) */
	struct sched_queue_stats st;
	sched_queue_stats(q, &st);
	ck_assert_uint_eq(st.served_ops, REQUESTS);
	ck_assert_uint_eq(st.served_bytes, REQUESTS * (1ull << 20));
	ck_assert_uint_eq(st.think_ns, 0);
	/* It holds nothing: no slice, no timer, nothing pending or in flight. */
	ck_assert_uint_eq(sched_pending(s), 0);
	ck_assert_uint_eq(sched_inflight(s), 0);
	ck_assert_uint_eq(sched_busy_queues(s), 0);
	ck_assert_uint_eq(sched_next_deadline(s), SCHED_DEADLINE_NONE);
	ck_assert_ptr_null(sched_dispatch(s, 1000000));
	sched_free(s);
}
END_TEST

START_TEST(idle_window_and_timer)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 4);
	struct sched_queue *a = queue(s, 1, 100), *b = queue(s, 2, 100);
	struct sched_req ra[3], rb[3];
	uint64_t now = 0;
	for (int i = 0; i < 3; i++) {
		req_init(&rb[i], b, SCHED_OP_READ, 4096);
		sched_enqueue(s, &rb[i], now);
	}
	for (int round = 0; round < 3; round++) {	/* a: think 10 us, learned */
		req_init(&ra[round], a, SCHED_OP_READ, 4096);
		ra[round].sync = true;
		sched_enqueue(s, &ra[round], now);
		struct sched_req *r;
		while ((r = sched_dispatch(s, now)) && r != &ra[round])
			;
		ck_assert_ptr_eq(r, &ra[round]);
		now += 100 * US;
		sched_complete(s, r, now);
		now += 10 * US;
	}
	/* a is in service and idle: b's requests wait unless injected */
	uint64_t d = sched_next_deadline(s);
	ck_assert_uint_ne(d, SCHED_DEADLINE_NONE);
	struct sched_queue_stats st;
	sched_queue_stats(a, &st);
	ck_assert_uint_ge(st.idle_windows, 1);
	ck_assert_uint_gt(st.think_ns, 0);
	sched_timer(s, d);
	ck_assert_ptr_nonnull(sched_dispatch(s, d));
	sched_queue_stats(a, &st);
	ck_assert_uint_ge(st.expirations[SCHED_EXPIRE_TOO_IDLE], 1);
	sched_free(s);
}
END_TEST

START_TEST(zero_length_requests)
{
	for (int pol = 0; pol < 2; pol++) {
		struct sched *s = new_sched(pol ? SCHED_POLICY_FIFO : SCHED_POLICY_BFQ, 3);
		struct sched_queue *q[2] = { queue(s, 1, 100), queue(s, 2, 300) };
		struct sched_req r[200];
		for (int i = 0; i < 200; i++) {
			req_init(&r[i], q[i % 2], i % 3 ? SCHED_OP_READ : SCHED_OP_FSYNC, 0);
			sched_enqueue(s, &r[i], 0);
		}
		uint64_t now = 0;
		int done = 0;
		for (int guard = 0; done < 200 && guard < 10000; guard++) {
			struct sched_req *d[3];
			int n = 0;
			while (n < 3 && (d[n] = sched_dispatch(s, now)))
				n++;
			ck_assert_uint_le(sched_inflight(s), 3);
			now += 5 * US;
			for (int i = 0; i < n; i++)
				sched_complete(s, d[i], now);
			done += n;
			if (!n) {
				now = sched_next_deadline(s);
				ck_assert_uint_ne(now, SCHED_DEADLINE_NONE);
				sched_timer(s, now);
			}
		}
		ck_assert_int_eq(done, 200);
		struct sched_queue_stats st;
		sched_queue_stats(q[0], &st);
		ck_assert_uint_eq(st.served_ops, 100);
		ck_assert_uint_eq(st.served_bytes, 0);
		sched_free(s);
	}
}
END_TEST

START_TEST(remove_with_requests_in_flight)
{
	for (int pol = 0; pol < 2; pol++) {
		struct sched *s = new_sched(pol ? SCHED_POLICY_FIFO : SCHED_POLICY_BFQ, 2);
		struct sched_queue *a = queue(s, 7, 100), *b = queue(s, 8, 100);
		struct sched_req ra[3], rb;
		for (int i = 0; i < 3; i++) {
			req_init(&ra[i], a, SCHED_OP_WRITE, 4096);
			ra[i].sync = true;
			sched_enqueue(s, &ra[i], 0);
		}
		req_init(&rb, b, SCHED_OP_READ, 4096);
		sched_enqueue(s, &rb, 0);
		struct sched_req *d1 = sched_dispatch(s, 0), *d2 = sched_dispatch(s, 0);
		ck_assert_ptr_nonnull(d1);
		ck_assert_ptr_nonnull(d2);
		sched_queue_remove(s, a);
		ck_assert_ptr_null(sched_queue_find(s, 7));
		/* the tenant's queued and in-flight requests still go through */
		uint64_t now = 10 * US;
		sched_complete(s, d1, now);
		sched_complete(s, d2, now);
		int left = 4 - 2;
		for (int guard = 0; left && guard < 100; guard++) {
			struct sched_req *r = sched_dispatch(s, now);
			if (!r) {
				now = sched_next_deadline(s);
				ck_assert_uint_ne(now, SCHED_DEADLINE_NONE);
				sched_timer(s, now);
				continue;
			}
			now += 10 * US;
			sched_complete(s, r, now);
			left--;
		}
		ck_assert_int_eq(left, 0);
		ck_assert_uint_eq(sched_pending(s), 0);
		ck_assert_uint_eq(sched_inflight(s), 0);
		struct sched_queue *a2 = queue(s, 7, 100);	/* a fresh queue */
		struct sched_queue_stats st;
		sched_queue_stats(a2, &st);
		ck_assert_uint_eq(st.served_ops, 0);
		sched_free(s);
	}
}
END_TEST

/* Runs n dispatch/complete cycles at depth 1, refilling each queue k
 * while refill[k] (refill NULL: every queue, all backlogged), and adds
 * what each got to got[k]. */
static void run_depth1(struct sched *s, struct sched_queue **q, int nq, int n, const bool *refill,
		       uint64_t *now, uint64_t *got)
{
	for (int i = 0; i < n; i++) {
		struct sched_req *r = sched_dispatch(s, *now);
		if (!r) {
			*now = sched_next_deadline(s);
			ck_assert_uint_ne(*now, SCHED_DEADLINE_NONE);
			sched_timer(s, *now);
			i--;
			continue;
		}
		*now += 10 * US;
		sched_complete(s, r, *now);
		int k = 0;
		while (k < nq && r->queue != q[k])
			k++;
		ck_assert_int_lt(k, nq);
		got[k] += r->bytes;
		if (!refill || refill[k]) {
			req_init(r, r->queue, SCHED_OP_READ, 4096);
			sched_enqueue(s, r, *now);
		}
	}
}

static void run_backlogged(struct sched *s, struct sched_queue **q, int nq, int n,
			   uint64_t *now, uint64_t *got)
{
	run_depth1(s, q, nq, n, NULL, now, got);
}

START_TEST(weight_change_while_backlogged)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_queue *q[2] = { queue(s, 1, 100), queue(s, 2, 100) };
	struct sched_req pool[16];
	for (int i = 0; i < 16; i++) {
		req_init(&pool[i], q[i % 2], SCHED_OP_READ, 4096);
		sched_enqueue(s, &pool[i], 0);
	}
	uint64_t now = 0, got[2] = { 0, 0 };
	run_backlogged(s, q, 2, 4000, &now, got);
	double before = (double)got[0] / (double)got[1];
	ck_assert_double_gt(before, 0.9);
	ck_assert_double_lt(before, 1.1);
	ck_assert_int_eq(sched_queue_set_weight(s, q[0], 300), 0);
	got[0] = got[1] = 0;
	run_backlogged(s, q, 2, 8000, &now, got);
	double after = (double)got[0] / (double)got[1];
	ck_assert_msg(after > 2.7 && after < 3.3, "after weight change %.2f", after);
	sched_free(s);
}
END_TEST

/* Dispatches what it can, completing each at once, until n requests went
 * out; their enqueue times in order into at. */
static void dispatch_completing(struct sched *s, uint64_t *now, int n, uint64_t *at)
{
	for (int i = 0; i < n; i++) {
		struct sched_req *r = sched_dispatch(s, *now);
		if (!r) {
			uint64_t d = sched_next_deadline(s);
			ck_assert_uint_ne(d, SCHED_DEADLINE_NONE);
			*now = d > *now ? d : *now;
			sched_timer(s, *now);
			i--;
			continue;
		}
		at[i] = r->enqueue_ns;
		*now += 10 * US;
		sched_complete(s, r, *now);
	}
}

/* A reload's new policy: what is at the store completes first, with
 * nothing dispatched meanwhile; then the queued requests are the new
 * policy's: in arrival order under fifo, by weight under bfq. */
START_TEST(reload_changes_policy_once_nothing_is_in_flight)
{
	enum { N = 40 };
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 4);
	struct sched_queue *q[2] = { queue(s, 1, 800), queue(s, 2, 100) };
	static struct sched_req r[2 * N];
	uint64_t now = 0, at[2 * N];
	for (int i = 0; i < 2 * N; i++) {	/* alternating: 1, 2, 1, 2, ... */
		req_init(&r[i], q[i % 2], SCHED_OP_READ, 4096);
		sched_enqueue(s, &r[i], now += US);
	}
	struct sched_req *out[4];
	for (int i = 0; i < 4; i++)
		ck_assert_ptr_nonnull(out[i] = sched_dispatch(s, now));

	struct sched_params p = *sched_params_of(s);
	p.policy = SCHED_POLICY_FIFO;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	ck_assert_int_eq(sched_params_of(s)->policy, SCHED_POLICY_FIFO);
	for (int i = 0; i < 3; i++) {
		sched_complete(s, out[i], now += 10 * US);
		ck_assert_ptr_null(sched_dispatch(s, now));
		ck_assert_uint_ne(sched_next_deadline(s), 0);
	}
	sched_complete(s, out[3], now += 10 * US);
	ck_assert_uint_eq(sched_next_deadline(s), 0);	/* due at once */
	ck_assert_uint_eq(sched_pending(s), 2 * N - 4);
	dispatch_completing(s, &now, 2 * N - 4, at);
	for (int i = 1; i < 2 * N - 4; i++)
		ck_assert_uint_gt(at[i], at[i - 1]);
	ck_assert_uint_eq(sched_pending(s), 0);

	/* Back to bfq, both backlogged: 8:1 again. */
	for (int i = 0; i < 2 * N; i++) {
		req_init(&r[i], q[i % 2], SCHED_OP_READ, 4096);
		sched_enqueue(s, &r[i], now += US);
	}
	p.policy = SCHED_POLICY_BFQ;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	uint64_t got[2] = { 0, 0 };
	run_backlogged(s, q, 2, 9000, &now, got);
	double ratio = (double)got[0] / (double)got[1];
	ck_assert_msg(ratio > 7.2 && ratio < 8.8, "8:1 after the change back: %.2f", ratio);
	sched_free(s);
}
END_TEST

/* Asked for and asked back before it was taken up: nothing changes, and
 * dispatching goes on at once. */
START_TEST(reload_policy_asked_back_is_no_change)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 2);
	struct sched_queue *q = queue(s, 1, 100);
	struct sched_req r[4];
	for (int i = 0; i < 4; i++) {
		req_init(&r[i], q, SCHED_OP_READ, 4096);
		sched_enqueue(s, &r[i], 0);
	}
	struct sched_req *first = sched_dispatch(s, 0);
	ck_assert_ptr_nonnull(first);
	struct sched_params p = *sched_params_of(s);
	p.policy = SCHED_POLICY_FIFO;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	ck_assert_ptr_null(sched_dispatch(s, 0));
	p.policy = SCHED_POLICY_BFQ;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	ck_assert_ptr_nonnull(sched_dispatch(s, 0));
	ck_assert_str_eq(sched_policy_name(sched_params_of(s)->policy), "bfq");
	ck_assert_str_eq(sched_policy_name(SCHED_POLICY_FIFO), "fifo");
	sched_free(s);
}
END_TEST

/* r, a sync request of q, enqueued at now. */
static void enqueue_sync(struct sched *s, struct sched_req *r, struct sched_queue *q,
			 enum sched_op op, uint64_t bytes, uint64_t now)
{
	req_init(r, q, op, bytes);
	r->sync = true;
	sched_enqueue(s, r, now);
}

/*
 * A reload's change of policy while a tenant's requests hang at the store:
 * it waits for the requests that are merely slow, not for hung ones (which
 * may never return), so the others are dispatched under the new policy
 * from the hung bound on, not when the store comes back. The hung requests
 * go over as requests at the store: a change back is taken at once, and
 * when they return under a third policy they are plain completions.
 */
START_TEST(reload_changes_policy_beside_hung_requests)
{
	enum { DEPTH = 4 };
	struct sched *s = new_sched(SCHED_POLICY_BFQ, DEPTH);
	struct sched_queue *stuck = queue(s, 1, 100), *other = queue(s, 2, 100);
	static struct sched_req hung[DEPTH], probe[4], after;
	uint64_t now = 1 * MS;
	for (int i = 0; i < DEPTH; i++)
		enqueue_sync(s, &hung[i], stuck, SCHED_OP_READ, 4096, now);
	for (int i = 0; i < DEPTH; i++)
		ck_assert_ptr_eq(sched_dispatch(s, now), &hung[i]);
	now += 1 * MS;
	/* Under bfq the hung tenant's requests leave the depth to the other. */
	enqueue_sync(s, &probe[0], other, SCHED_OP_READ, 4096, now);
	now = 1 * MS + 5000 * MS;
	sched_timer(s, now);
	ck_assert_uint_eq(sched_hung(s), DEPTH);
	ck_assert_ptr_eq(sched_dispatch(s, now), &probe[0]);
	sched_complete(s, &probe[0], now += 1 * MS);
	ck_assert_int_eq(stuck->depth, QUEUE_IN_GAP); /* deep, out of service */

	/* To fifo with only hung requests out: taken at once, bfq's lists
	 * let go of the gapped queue. */
	struct sched_params p = *sched_params_of(s);
	p.policy = SCHED_POLICY_FIFO;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	enqueue_sync(s, &probe[1], other, SCHED_OP_READ, 4096, now += 1 * MS);
	ck_assert_ptr_eq(sched_dispatch(s, now), &probe[1]);
	ck_assert_int_eq(sched_params_of(s)->policy, SCHED_POLICY_FIFO);
	ck_assert_int_eq(stuck->depth, QUEUE_SHALLOW);
	ck_assert(sched_list_empty(&s->gap_queues));

	/* Back to bfq with probe[1] at the store, slow but not hung: the
	 * change waits for it, and only for it. */
	p.policy = SCHED_POLICY_BFQ;
	ck_assert_int_eq(sched_reload(s, &p), 0);
	enqueue_sync(s, &probe[2], other, SCHED_OP_READ, 4096, now += 1 * MS);
	ck_assert_ptr_null(sched_dispatch(s, now));
	ck_assert_uint_ne(sched_next_deadline(s), 0);
	sched_complete(s, &probe[1], now += 1 * MS);
	ck_assert_uint_eq(sched_next_deadline(s), 0); /* due at once */
	ck_assert_ptr_eq(sched_dispatch(s, now), &probe[2]);
	ck_assert_int_eq(sched_params_of(s)->policy, SCHED_POLICY_BFQ);
	sched_complete(s, &probe[2], now += 1 * MS);
	enqueue_sync(s, &probe[3], other, SCHED_OP_READ, 4096, now += 1 * MS);
	ck_assert_ptr_eq(sched_dispatch(s, now), &probe[3]);
	sched_complete(s, &probe[3], now += 1 * MS);

	/* The store comes back: plain completions under a third policy, no
	 * charge at dispatch left owed, and the stuck tenant is served again. */
	for (int i = 0; i < DEPTH; i++)
		sched_complete(s, &hung[i], now);
	ck_assert_uint_eq(sched_hung(s), 0);
	ck_assert_uint_eq(sched_inflight(s), 0);
	ck_assert_uint_eq(stuck->inflight_charged, 0);
	ck_assert_uint_eq(other->inflight_charged, 0);
	enqueue_sync(s, &after, stuck, SCHED_OP_READ, 4096, now += 1 * MS);
	struct sched_req *r = NULL;
	for (int tries = 0; !r && tries < 1000; tries++, now += 10 * MS) {
		if (sched_next_deadline(s) <= now)
			sched_timer(s, now);
		r = sched_dispatch(s, now);
	}
	ck_assert_ptr_eq(r, &after);
	sched_complete(s, r, now);
	ck_assert_uint_eq(stuck->inflight_charged, 0);
	sched_free(s);
}
END_TEST

/* Dispatches what the scheduler sends: the probe's read (*probe_out set)
 * or the writer's, onto at_store in dispatch order. */
static void dispatch_into(struct sched *s, uint64_t now, const struct sched_req *probe,
			  bool *probe_out, struct sched_req **at_store, int *n_at)
{
	if (now >= sched_next_deadline(s))
		sched_timer(s, now);
	struct sched_req *r;
	while ((r = sched_dispatch(s, now))) {
		if (r == probe)
			*probe_out = true;
		else
			at_store[(*n_at)++] = r;
	}
}

/* One probe of the holding door (door.c) with holder taking the store in
 * every phase: the door let someone in for it whenever open, and each
 * queue's completions in the open and shut phases as given. */
static void door_probe(struct sched *s, struct sched_queue *holder, uint64_t start_ns,
		       struct sched_queue *const *qs, const uint32_t (*done)[2], unsigned n)
{
	const uint64_t phase_ns = 25 * MS;
	for (uint64_t phase = 0; phase < 8; phase++) {
		uint64_t t = start_ns + phase * phase_ns + MS;
		bool shut = sched_door_shut(s, holder, t);
		ck_assert(shut == (phase == 1 || phase == 2 || phase == 5 || phase == 6));
		if (!shut)
			sched_door_used(s, holder, t);
		for (unsigned i = 0; i < n; i++) {
			struct sched_req r;
			req_init(&r, qs[i], SCHED_OP_READ, 4096);
			for (uint32_t k = 0; k < done[i][shut]; k++)
				sched_door_completion(s, qs[i], &r, t + MS);
		}
	}
	sched_door_shut(s, holder, start_ns + 8 * phase_ns + MS);	/* ends it */
}

/* The door's verdict is its holder's: a queue that moved clearly less with
 * the door open than shut is shut to others; one that others held for in a
 * later probe's open phases (it was not let in for) has no evidence there
 * and keeps its verdict, which would otherwise open its door for the next
 * 4 s on nothing (seen on the real mount: three readers at depth 8 whose
 * slices rotate, one of them not the holder in a probe's open phases). */
START_TEST(door_verdict_stands_without_evidence)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 32);
	struct sched_queue *a = queue(s, 1, 300), *b = queue(s, 2, 300);
	struct sched_queue *qs[] = { a, b };
	const uint32_t a_loses[][2] = { { 6, 10 }, { 10, 10 } };
	door_probe(s, a, 1 * MS, qs, a_loses, 2);
	ck_assert(a->door.shut);
	ck_assert(!b->door.shut);	/* never the holder: no evidence */
	const uint32_t even[][2] = { { 10, 10 }, { 10, 10 } };
	door_probe(s, b, 5000 * MS, qs, even, 2);
	ck_assert(a->door.shut);
	ck_assert(!b->door.shut);
	door_probe(s, a, 9000 * MS, qs, even, 2);
	ck_assert(!a->door.shut);
	sched_free(s);
}
END_TEST

/* A light queue the open door let far ahead of its share (here placed
 * there by hand: ten slices past V, waiting) keeps its lead while the
 * verdict is open, and is brought back to one slice ahead when a probe
 * shuts the door: paid back, its lead shut it out for seconds. */
START_TEST(door_shut_forgives_what_the_open_door_gave)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 32);
	struct sched_queue *a = queue(s, 1, 300), *c = queue(s, 3, 100);
	struct sched_queue *qs[] = { a, c };
	const uint64_t slice = 1000, v = s->wq.vtime;
	c->ent.start_vt = v + 10 * slice;
	c->ent.finish_vt = c->ent.start_vt + slice;
	sched_wf2q_insert(&s->wq, &c->ent);
	ck_assert_int_eq(c->ent.heap_which, WF2Q_WAITING);
	const uint32_t even[][2] = { { 10, 10 }, { 10, 10 } };
	door_probe(s, a, 1 * MS, qs, even, 2);
	ck_assert(!a->door.shut);
	ck_assert_uint_eq(c->ent.start_vt - s->wq.vtime, 10 * slice);
	const uint32_t a_loses[][2] = { { 6, 10 }, { 10, 10 } };
	door_probe(s, a, 5000 * MS, qs, a_loses, 2);
	ck_assert(a->door.shut);
	ck_assert_uint_eq(c->ent.start_vt - s->wq.vtime, slice);
	ck_assert_uint_eq(c->ent.finish_vt - c->ent.start_vt, slice);
	ck_assert_int_eq(c->ent.heap_which, WF2Q_WAITING);
	sched_wf2q_remove(&s->wq, &c->ent);
	sched_free(s);
}
END_TEST

/* A store that stalls with a light deep tenant's requests at it: a heavy
 * depth-1 tenant coming back finds the slot the reserve kept for it, not a
 * wait for the deep one's requests to come back. Its last request left it
 * ahead of V, and while the store holds the deep one's requests nothing is
 * charged that would move V. */
START_TEST(stalled_store_keeps_the_reserved_slot_for_its_tenant)
{
	enum { DEEP = 64, MAXIN = 32 };
	struct sched *s = new_sched(SCHED_POLICY_BFQ, MAXIN);
	struct sched_queue *a = queue(s, 1, 10), *b = queue(s, 2, 100);
	static struct sched_req w[DEEP];
	struct sched_req rd, *at_store[MAXIN];
	int n_at = 0;
	bool probe_out = false;
	uint64_t now = 0;
	for (int i = 0; i < DEEP; i++)
		enqueue_sync(s, &w[i], a, SCHED_OP_WRITE, 1 << 20, now);
	/* The writer streams, a request done each 100 us; the prober reads
	 * every 5 ms, each read done 200 us after it went out. */
	uint64_t probe_sent = 0;
	for (int step = 0; step < 3000; step++) {
		now += 100 * US;
		if (probe_out && now - probe_sent >= 200 * US) {
			sched_complete(s, &rd, now);
			probe_out = false;
		}
		if (step % 50 == 0 && !probe_out) {
			enqueue_sync(s, &rd, b, SCHED_OP_READ, 4096, now);
			probe_sent = now;
		}
		if (n_at) {
			struct sched_req *done = at_store[0];
			memmove(at_store, at_store + 1, (size_t)--n_at * sizeof(at_store[0]));
			sched_complete(s, done, now);
			enqueue_sync(s, done, a, SCHED_OP_WRITE, 1 << 20, now);
		}
		dispatch_into(s, now, &rd, &probe_out, at_store, &n_at);
	}
	/* The store stalls: the writer's requests stay at it. */
	for (int k = 0; k < 3; k++) {
		if (probe_out) {
			sched_complete(s, &rd, now += 200 * US);
			probe_out = false;
		}
		now += 50 * MS;
		dispatch_into(s, now, &rd, &probe_out, at_store, &n_at);
		ck_assert_int_ge(n_at, MAXIN / 2);
		enqueue_sync(s, &rd, b, SCHED_OP_READ, 4096, now);
		dispatch_into(s, now, &rd, &probe_out, at_store, &n_at);
		ck_assert_msg(probe_out, "stall %d: the read waits, %d of the writer's at the store", k,
			      n_at);
	}
	sched_free(s);
}
END_TEST

/* Virtual time after long idle periods: a tenant that was busy alone and
 * then idle for an hour neither owes nor is owed anything; one that stayed
 * away while another ran does not come back with credit. */
START_TEST(vtime_after_long_idle)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_queue *q[2] = { queue(s, 1, 100), queue(s, 2, 100) };
	struct sched_req pool[16];
	for (int i = 0; i < 8; i++) {
		req_init(&pool[i], q[0], SCHED_OP_READ, 4096);
		sched_enqueue(s, &pool[i], 0);
	}
	uint64_t now = 0, got[2] = { 0, 0 };
	run_backlogged(s, q, 2, 3000, &now, got);	/* a alone */
	for (int guard = 0; sched_inflight(s) || sched_pending(s); guard++) {
		ck_assert_int_lt(guard, 100);
		struct sched_req *r = sched_dispatch(s, now);
		if (r)
			sched_complete(s, r, now += 10 * US);
		else
			sched_timer(s, now = sched_next_deadline(s));
	}
	now += 3600ull * 1000000000ull;
	for (int i = 0; i < 16; i++) {
		req_init(&pool[i], q[i % 2], SCHED_OP_READ, 4096);
		sched_enqueue(s, &pool[i], now);
	}
	got[0] = got[1] = 0;
	run_backlogged(s, q, 2, 4000, &now, got);
	double r = (double)got[0] / (double)got[1];
	ck_assert_msg(r > 0.9 && r < 1.1, "after long idle %.2f", r);
	sched_free(s);
}
END_TEST

START_TEST(no_credit_for_staying_away)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_queue *q[2] = { queue(s, 1, 100), queue(s, 2, 100) };
	struct sched_req pool[16];
	for (int i = 0; i < 16; i++) {
		req_init(&pool[i], q[1], SCHED_OP_READ, 4096);
		sched_enqueue(s, &pool[i], 0);
	}
	uint64_t now = 0, got[2] = { 0, 0 };
	run_backlogged(s, q, 2, 4000, &now, got);	/* b alone, a away */
	/* a comes back: from here on both are served 1:1, a gets no burst */
	struct sched_req extra[8];
	for (int i = 0; i < 8; i++) {
		req_init(&extra[i], q[0], SCHED_OP_READ, 4096);
		sched_enqueue(s, &extra[i], now);
	}
	got[0] = got[1] = 0;
	run_backlogged(s, q, 2, 400, &now, got);
	ck_assert_msg(got[0] <= got[1] * 3 / 2 + 256 * 1024, "returning tenant got %lu vs %lu",
		      (unsigned long)got[0], (unsigned long)got[1]);
	ck_assert_uint_gt(got[0], 0);
	sched_free(s);
}
END_TEST

/* A waker is a tenant whose completion ends what it had at the store (a
 * journal's commit). A deep neighbour completing one of many requests just
 * before each of q's arrivals is a stream, not what q waits for: taken for
 * a waker, it was injected past the injection limit while q was idled for,
 * and on a disk with its own queue every such request was a wait for q. */
START_TEST(a_streaming_neighbour_is_no_waker)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 16);
	struct sched_queue *w = queue(s, 1, 100), *d = queue(s, 2, 100);
	enum { DEEP = 64 };
	struct sched_req rd[DEEP], rw[8], *flying[DEEP], *r;
	uint32_t nd = 0, nflying = 0;
	uint64_t now = 0;
	for (; nd < 12; nd++) {
		req_init(&rd[nd], d, SCHED_OP_READ, 65536);
		rd[nd].sync = true;
		sched_enqueue(s, &rd[nd], now);
	}
	while ((r = sched_dispatch(s, now)))
		flying[nflying++] = r;
	for (int round = 0; round < 8; round++) {
		req_init(&rw[round], w, SCHED_OP_READ, 4096);
		rw[round].sync = true;
		sched_enqueue(s, &rw[round], now);
		struct sched_req *mine = NULL;
		for (int g = 0; !mine; g++) {
			ck_assert_int_lt(g, 4);
			while ((r = sched_dispatch(s, now))) {
				if (r == &rw[round])
					mine = r;
				else
					flying[nflying++] = r;
			}
			if (!mine)
				sched_timer(s, now = sched_next_deadline(s));
		}
		now += 100 * US;
		sched_complete(s, mine, now);
		/* one of d's many completes just before w's next arrival */
		ck_assert_uint_ge(nflying, 2);
		now += 10 * US;
		sched_complete(s, flying[--nflying], now);
		ck_assert_uint_lt(nd, DEEP);
		req_init(&rd[nd], d, SCHED_OP_READ, 65536);
		rd[nd].sync = true;
		sched_enqueue(s, &rd[nd++], now);
		now += 5 * US;
	}
	struct sched_queue_stats st;
	sched_queue_stats(w, &st);
	ck_assert(!st.has_waker);
	sched_free(s);
}
END_TEST

/* A think time runs from a completion to the caller's next request reaching
 * the daemon (arrival_ns), not to the scheduler seeing it: on a busy daemon
 * the request can wait milliseconds to be handed over, and counted as
 * thinking, that wait cost a depth-1 reader its idle windows. The window
 * itself must still last until the scheduler can see the request, the
 * hand-over included. A completion the scheduler hears of after the next
 * arrival (answered on another thread) is no think time at all, not a
 * wrapped one. */
START_TEST(think_time_runs_to_the_arrival)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 4);
	struct sched_queue *a = queue(s, 1, 100), *b = queue(s, 2, 100);
	struct sched_req ra[5], rb[3];
	uint64_t now = 0, completed = 0;
	for (int i = 0; i < 3; i++) {
		req_init(&rb[i], b, SCHED_OP_READ, 4096);
		sched_enqueue(s, &rb[i], now);
	}
	for (int round = 0; round < 5; round++) {
		req_init(&ra[round], a, SCHED_OP_READ, 4096);
		ra[round].sync = true;
		/* the last one arrived before its predecessor's completion was heard of */
		ra[round].arrival_ns = round == 4 ? completed - 500 * US : completed + 20 * US;
		now = completed + 3000 * US;	/* handed over 3 ms later */
		sched_enqueue(s, &ra[round], now);
		struct sched_req *r;
		while ((r = sched_dispatch(s, now)) && r != &ra[round])
			;
		ck_assert_ptr_eq(r, &ra[round]);
		completed = now + 100 * US;
		sched_complete(s, r, completed);
	}
	struct sched_queue_stats st;
	sched_queue_stats(a, &st);
	ck_assert_uint_gt(st.think_ns, 0);
	ck_assert_uint_le(st.think_ns, 20 * US);
	/* a thinks 20 us: it is idled for, b waits, for as long as the
	 * hand-over takes (3 ms: the longest window, 1 ms) */
	ck_assert_uint_ge(st.idle_windows, 1);
	ck_assert_uint_eq(sched_next_deadline(s) - completed, 1000 * US);
	sched_free(s);
}
END_TEST

/* A tenant whose arrivals keep following another's completions learns that
 * one as its waker; a busy neighbour completing at random does not qualify. */
START_TEST(waker_detected)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 8);
	struct sched_queue *w = queue(s, 1, 100), *j = queue(s, 2, 100);
	struct sched_req rw, rj;
	uint64_t now = 0;
	for (int round = 0; round < 6; round++) {
		req_init(&rw, w, SCHED_OP_WRITE, 512);
		rw.sync = true;
		sched_enqueue(s, &rw, now);
		struct sched_req *r = sched_dispatch(s, now);
		ck_assert_ptr_eq(r, &rw);
		now += 250 * US;
		sched_complete(s, r, now);
		now += 10 * US;
		req_init(&rj, j, SCHED_OP_WRITE, 4096);	/* the journal commit */
		rj.sync = true;
		sched_enqueue(s, &rj, now);
		for (int g = 0; !(r = sched_dispatch(s, now)); g++) {
			ck_assert_int_lt(g, 3);
			sched_timer(s, now = sched_next_deadline(s));
		}
		ck_assert_ptr_eq(r, &rj);
		now += 250 * US;
		sched_complete(s, r, now);
		now += 20 * US;	/* the writer wakes up */
	}
	struct sched_queue_stats st;
	sched_queue_stats(w, &st);
	ck_assert(st.has_waker);
	ck_assert_uint_eq(st.waker_id, 2);
	sched_queue_stats(j, &st);
	ck_assert(st.has_waker);	/* and the other way round */
	ck_assert_uint_eq(st.waker_id, 1);
	sched_free(s);
}
END_TEST

/*
 * A depth-1 reader (w800) next to a deep one (w100) on a parallel store:
 * every request takes 50 us at the store whatever else is there. With
 * contention, the reader's think time grows from 30 us to 300 us whenever
 * the deep reader has requests at the store while it thinks: through FUSE
 * on a small host the others' requests cost the reader's callers CPU, not
 * store time. Returns the reader's completions in 2 virtual seconds.
 */
#define D1_DEEP 24
static uint64_t depth1_next_to_deep(bool contention, bool with_deep, uint32_t *inject_limit,
				    uint64_t *deep_done, uint64_t *cycle_alone_ns)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 32);
	struct sched_queue *sq = queue(s, 1, 800), *dq = queue(s, 2, 100);
	struct sched_req sr, dr[D1_DEEP];
	uint64_t done_at[D1_DEEP + 1];  /* by slot; D1_DEEP is the reader's */
	bool busy[D1_DEEP + 1] = {false};
	uint64_t now = 0, arrive = 0, end = 2000000 * US, shallow_done = 0;
	uint32_t deep_inflight = 0;
	bool stretched = false;  /* this think time already paid for the contention */
	bool reader_waiting = true;  /* its next request is not yet issued */
	*deep_done = 0;
	for (int i = 0; with_deep && i < D1_DEEP; i++) {
		req_init(&dr[i], dq, SCHED_OP_READ, 4096);
		dr[i].sync = true;
		sched_enqueue(s, &dr[i], now);
	}
	while (now < end) {
		if (reader_waiting && arrive <= now) {
			req_init(&sr, sq, SCHED_OP_READ, 4096);
			sr.sync = true;
			sched_enqueue(s, &sr, now);
			reader_waiting = false;
		}
		for (struct sched_req *r; (r = sched_dispatch(s, now));) {
			int slot = r == &sr ? D1_DEEP : (int)(r - dr);
			busy[slot] = true;
			done_at[slot] = now + 50 * US;
			if (slot == D1_DEEP)
				continue;
			deep_inflight++;
			if (contention && reader_waiting && !stretched) {
				arrive = now + 300 * US;
				stretched = true;
			}
		}
		/* the next event: a completion, the reader's arrival or a timer */
		uint64_t next = sched_next_deadline(s);
		if (reader_waiting && arrive < next)
			next = arrive;
		for (int i = 0; i <= D1_DEEP; i++)
			if (busy[i] && done_at[i] < next)
				next = done_at[i];
		ck_assert_uint_ne(next, SCHED_DEADLINE_NONE);
		now = next > now ? next : now;
		for (int i = 0; i <= D1_DEEP; i++) {
			if (!busy[i] || done_at[i] > now)
				continue;
			busy[i] = false;
			if (i == D1_DEEP) {
				sched_complete(s, &sr, now);
				shallow_done++;
				stretched = contention && deep_inflight;
				arrive = now + (stretched ? 300 : 30) * US;
				reader_waiting = true;
			} else {
				sched_complete(s, &dr[i], now);
				deep_inflight--;
				(*deep_done)++;
				req_init(&dr[i], dq, SCHED_OP_READ, 4096);  /* always backlogged */
				dr[i].sync = true;
				sched_enqueue(s, &dr[i], now);
			}
		}
		if (sched_next_deadline(s) <= now)
			sched_timer(s, now);
	}
	struct sched_queue_stats st;
	sched_queue_stats(sq, &st);
	*inject_limit = st.inject_limit;
	*cycle_alone_ns = st.cycle_alone_ns;
	sched_free(s);
	return shallow_done;
}

/* Injection that slows the idled tenant's cycles stops, even when its
 * requests are served as fast as alone; injection that does not, stays. */
START_TEST(injection_backs_off_when_cycles_slow)
{
	uint32_t limit;
	uint64_t deep_done, cycle_ns;
	uint64_t solo = depth1_next_to_deep(true, false, &limit, &deep_done, &cycle_ns);
	ck_assert_uint_gt(solo, 20000);  /* 80 us per cycle */
	uint64_t contended = depth1_next_to_deep(true, true, &limit, &deep_done, &cycle_ns);
	/* Unchecked, every cycle would take 350 us: 5,700 in 2 s. */
	ck_assert_uint_ge(contended * 100, solo * 85);
	ck_assert_uint_eq(cycle_ns, 80 * US);  /* the baseline is its cycle alone */
	ck_assert_uint_gt(deep_done, 0);  /* the deep reader still gets its share */
	uint64_t harmless = depth1_next_to_deep(false, true, &limit, &deep_done, &cycle_ns);
	ck_assert_uint_ge(harmless * 10, solo * 9);
	ck_assert_uint_gt(limit, 0);
	ck_assert_uint_gt(deep_done, contended);  /* it used the idle gaps */
}
END_TEST

/* fsync moves no bytes but holds the store: it is charged by the time it
 * held it, converted at the fastest per-request rate seen, never more. */
START_TEST(fsync_charged_by_time_held)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_queue *q = queue(s, 1, 100);
	struct sched_req r;
	uint64_t now = 0;
	for (int i = 0; i < 40; i++) {	/* 4 KiB in 10 us: 409.6 bytes/us */
		req_init(&r, q, SCHED_OP_READ, 4096);
		sched_enqueue(s, &r, now);
		ck_assert_ptr_eq(sched_dispatch(s, now), &r);
		sched_complete(s, &r, now += 10 * US);
	}
	struct sched_queue_stats before, after;
	sched_queue_stats(q, &before);
	req_init(&r, q, SCHED_OP_FSYNC, 0);
	sched_enqueue(s, &r, now);
	ck_assert_ptr_eq(sched_dispatch(s, now), &r);
	sched_complete(s, &r, now += 100 * US);
	sched_queue_stats(q, &after);
	uint64_t charged = after.charged_bytes - before.charged_bytes;
	ck_assert_uint_gt(charged, 100 * 4096 / 10 / 2);
	ck_assert_uint_le(charged, 100 * 4096 / 10);
	sched_free(s);
}
END_TEST

/* A batch dispatched at one instant and reaped at one instant, as the
 * loaded reactor does: every request held the store alike, so every one
 * pays the same, whichever tenant was first in the batch. */
START_TEST(time_charge_shared_within_batch)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 8);
	struct sched_queue *q[2] = { queue(s, 1, 100), queue(s, 2, 100) };
	struct sched_req r[8];
	uint64_t now = 0;
	for (int i = 0; i < 80; i++) {	/* random reads, 4 KiB in 10 us: seeky, rate learned */
		req_init(&r[0], q[i % 2], SCHED_OP_READ, 4096);
		sched_enqueue(s, &r[0], now);
		ck_assert_ptr_eq(sched_dispatch(s, now), &r[0]);
		sched_complete(s, &r[0], now += 10 * US);
	}
	struct sched_queue_stats before[2], after[2];
	for (int k = 0; k < 2; k++)
		sched_queue_stats(q[k], &before[k]);
	for (int i = 0; i < 8; i++) {
		req_init(&r[i], q[i / 4], SCHED_OP_READ, 4096);
		sched_enqueue(s, &r[i], now);
	}
	struct sched_req *d[8];
	for (int i = 0; i < 8; i++)
		ck_assert_ptr_nonnull(d[i] = sched_dispatch(s, now));
	now += 1000 * US;
	for (int i = 0; i < 8; i++)
		sched_complete(s, d[i], now);
	uint64_t charged[2];
	for (int k = 0; k < 2; k++) {
		sched_queue_stats(q[k], &after[k]);
		charged[k] = after[k].charged_bytes - before[k].charged_bytes;
	}
	ck_assert_uint_gt(charged[0], 4 * 4096 * 2);	/* charged by time, not bytes */
	ck_assert_uint_eq(charged[0], charged[1]);
	sched_free(s);
}
END_TEST

/* The index of the earliest of n > 0 times: the next event of a test's own
 * event loop. */
static uint32_t earliest(const uint64_t *at, uint32_t n)
{
	uint32_t first = 0;
	for (uint32_t i = 1; i < n; i++)
		if (at[i] < at[first])
			first = i;
	return first;
}

/* A store of 8 slots that serves every request at once, two kinds beside
 * each other: 8 KiB reads of 150 us and 4 KiB sync writes of 300 us, the
 * reads moving bytes fastest. Each tenant pays the same per unit of store
 * time it held: the store's parallelism is what it serves at once (8), not
 * its peak rate over the reads' rate, which beside the slower writes says
 * 5 and split every request's time that many ways, so that the reads paid
 * their bytes, more than their time, and the writes less. */
START_TEST(time_charge_alike_across_kinds)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 8);
	struct sched_queue *q[2] = { queue(s, 1, 100), queue(s, 2, 100) };
	static struct sched_req pool[16];
	struct sched_req *at_store[8];
	uint64_t done_at[8], held_ns[2] = { 0, 0 };
	struct sched_queue_stats before[2], after[2];
	uint32_t n = 0;
	uint64_t now = 0;
	for (int i = 0; i < 16; i++) {	/* both backlogged, 8 queued each */
		req_init(&pool[i], q[i % 2], i % 2 ? SCHED_OP_WRITE : SCHED_OP_READ,
			 i % 2 ? 4096 : 8192);
		pool[i].sync = true;
		sched_enqueue(s, &pool[i], now);
	}
	for (int c = 0; c < 6000; c++) {
		struct sched_req *r;
		while (n < 8 && (r = sched_dispatch(s, now))) {
			at_store[n] = r;
			done_at[n++] = now + (r->op == SCHED_OP_READ ? 150 : 300) * US;
		}
		ck_assert_uint_gt(n, 0);
		uint32_t first = earliest(done_at, n);
		r = at_store[first];
		now = done_at[first];
		int k = r->queue == q[1];
		if (c == 2000)	/* rates learned: measure from here */
			for (int j = 0; j < 2; j++) {
				sched_queue_stats(q[j], &before[j]);
				held_ns[j] = 0;
			}
		held_ns[k] += (r->op == SCHED_OP_READ ? 150 : 300) * US;
		sched_complete(s, r, now);
		at_store[first] = at_store[--n];
		done_at[first] = done_at[n];
		enum sched_op op = r->op;
		req_init(r, q[k], op, op == SCHED_OP_READ ? 8192 : 4096);
		r->sync = true;
		sched_enqueue(s, r, now);
	}
	double per_ns[2];
	for (int j = 0; j < 2; j++) {
		sched_queue_stats(q[j], &after[j]);
		per_ns[j] = (double)(after[j].charged_bytes - before[j].charged_bytes) /
			    (double)held_ns[j];
	}
	ck_assert_double_lt(per_ns[0], per_ns[1] * 1.1);
	ck_assert_double_gt(per_ns[0], per_ns[1] * 0.9);
	sched_free(s);
}
END_TEST

/* A deep tenant that wants less than its share: a weight-10 tenant of 8
 * jobs (each 30 us of think time between requests) beside a weight-1
 * tenant of 12 always-queued requests, on a store of 16 slots where every
 * request takes 100 us. The heavy one holds the store whenever its queue
 * runs dry with its requests at the store, but only the slots it would take
 * back (the 8 it has had at once) are kept for it: the light one uses the
 * rest, and the store stays busy. Before, while it held, the light one got
 * only what it was owed and the store ran at 6.8; with the door always
 * open it runs at 14.2, and the door's first probe (door.c), whose shut
 * phases leave the light one's slots empty for 100 ms, costs 0.2 of that
 * over the 2.5 s of virtual time measured here. */
START_TEST(deep_tenant_under_its_share_leaves_the_rest)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 16);
	struct sched_queue *q[2] = { queue(s, 1, 1000), queue(s, 2, 100) };
	static struct sched_req pool[20];
	struct sched_req *at_store[16], *idle_jobs[8];
	uint64_t done_at[16], arrive_at[8];
	uint32_t n = 0, narrive = 0, nidle = 0;
	uint64_t now = 0, busy_area = 0, since = 0, served[2] = { 0, 0 };
	for (int i = 0; i < 20; i++) {
		req_init(&pool[i], q[i < 8 ? 0 : 1], SCHED_OP_READ, 4096);
		pool[i].sync = true;
		sched_enqueue(s, &pool[i], now);
	}
	for (int c = 0; c < 400000; c++) {
		struct sched_req *r;
		while (n < 16 && (r = sched_dispatch(s, now))) {
			at_store[n] = r;
			done_at[n++] = now + 100 * US;
		}
		/* the next event: a completion or one of the heavy tenant's arrivals */
		uint64_t next = UINT64_MAX;
		int which = -1, arrival = -1;
		if (n)
			which = (int)earliest(done_at, n), next = done_at[which];
		if (narrive && arrive_at[earliest(arrive_at, narrive)] < next)
			arrival = (int)earliest(arrive_at, narrive), next = arrive_at[arrival], which = -1;
		uint64_t d = sched_next_deadline(s);
		ck_assert(which >= 0 || arrival >= 0 || d != SCHED_DEADLINE_NONE);
		if (d < next) {
			busy_area += c >= 10000 ? n * (d - now) : 0;
			now = d;
			sched_timer(s, now);
			continue;
		}
		if (c == 10000)
			since = now;
		busy_area += c >= 10000 ? n * (next - now) : 0;
		now = next;
		if (arrival >= 0) {
			r = idle_jobs[--nidle];
			req_init(r, q[0], SCHED_OP_READ, 4096);
			r->sync = true;
			sched_enqueue(s, r, now);
			arrive_at[arrival] = arrive_at[--narrive];
			continue;
		}
		r = at_store[which];
		sched_complete(s, r, now);
		at_store[which] = at_store[--n];
		done_at[which] = done_at[n];
		served[r->queue == q[1]] += c >= 10000;
		if (r->queue == q[0]) {
			idle_jobs[nidle++] = r;
			arrive_at[narrive++] = now + 30 * US;
		} else {
			req_init(r, q[1], SCHED_OP_READ, 4096);
			r->sync = true;
			sched_enqueue(s, r, now);
		}
	}
	double busy = (double)busy_area / (double)(now - since);
	ck_assert_msg(busy > 13.5, "store busy %.2f of 16 slots", busy);
	/* the heavy one still has all it asks for: 8 jobs of 130 us cycles */
	double heavy_per_ms = (double)served[0] / ((double)(now - since) / 1e6);
	ck_assert_msg(heavy_per_ms > 8 / 0.130 * 0.9, "heavy %.1f requests/ms", heavy_per_ms);
	sched_free(s);
}
END_TEST

/* Dispatches and completes at depth 1, without refilling, until the
 * scheduler hands out nothing more now; returns the bytes served. */
static uint64_t serve_while_dispatching(struct sched *s, uint64_t *now)
{
	uint64_t bytes = 0;
	struct sched_req *r;
	while ((r = sched_dispatch(s, *now))) {
		sched_complete(s, r, *now += 10 * US);
		bytes += r->bytes;
	}
	return bytes;
}

/* Two deep tenants; both batches come back at once and a's callers do not
 * send again for gone_ns, while b sends 500 more at once. Then both are
 * backlogged for 800 requests. early: what b got while a was away; a_first:
 * a's request went first when a was back. */
static void away_run(uint64_t away_window_ns, uint64_t gone_ns, uint64_t *early, bool *a_first,
		     uint64_t *got)
{
	struct sched_params p;
	struct sched *s;
	sched_params_default(&p);
	p.max_inflight = 8;
	p.budget_max_bytes = p.budget_initial_bytes;
	p.away_window_ns = away_window_ns;
	ck_assert_int_eq(sched_new(&p, &s), 0);
	struct sched_queue *q[2] = { queue(s, 1, 100), queue(s, 2, 100) };
	static struct sched_req pool[600];
	uint64_t now = 0;
	for (int i = 0; i < 8; i++) {	/* both deep: four each at the store at once */
		req_init(&pool[i], q[i % 2], SCHED_OP_READ, 4096);
		pool[i].sync = true;
		sched_enqueue(s, &pool[i], now);
	}
	struct sched_req *d[8];
	for (int i = 0; i < 8; i++)
		ck_assert_ptr_nonnull(d[i] = sched_dispatch(s, now));
	now += 100 * US;
	for (int i = 0; i < 8; i++)
		sched_complete(s, d[i], now);
	for (int i = 0; i < 500; i++) {
		req_init(&pool[i], q[1], SCHED_OP_READ, 4096);
		pool[i].sync = true;
		sched_enqueue(s, &pool[i], now);
	}
	uint64_t back_ns = now + gone_ns;
	*early = 0;
	for (int guard = 0; sched_pending(s); guard++) {
		ck_assert_int_lt(guard, 100);
		*early += serve_while_dispatching(s, &now);
		uint64_t deadline = sched_next_deadline(s);
		if (!sched_pending(s) || deadline > back_ns)
			break;
		sched_timer(s, now = deadline > now ? deadline : now);
	}
	now = now > back_ns ? now : back_ns;
	if (now >= sched_next_deadline(s))
		sched_timer(s, now);
	for (int i = 500; i < 516; i++) {	/* a is back; both backlogged */
		req_init(&pool[i], q[i % 2], SCHED_OP_READ, 4096);
		pool[i].sync = true;
		sched_enqueue(s, &pool[i], now);
	}
	struct sched_req *r = sched_dispatch(s, now);
	ck_assert_ptr_nonnull(r);
	*a_first = r->queue == q[0];
	sched_complete(s, r, now += 10 * US);
	req_init(r, r->queue, SCHED_OP_READ, 4096);
	sched_enqueue(s, r, now);
	got[0] = got[1] = 0;
	run_backlogged(s, q, 2, 800, &now, got);
	sched_free(s);
}

/* A deep tenant whose whole batch is back with its callers is away, not
 * idle, for away_window_ns: the other may run ahead of it by one slice of
 * its own, then the store waits for it; back within the window, it gets
 * what the other took meanwhile. After the window, or with the window off,
 * the other is not held back and nobody is owed anything. */
/* Runs the heavy tenant at heavy_depth requests at once (pool[32] on; each
 * re-issued as it completes, 100 us at the store) next to a light one whose
 * 32 (pool[0..31]) come back the same way, for ms of virtual time from
 * *now. Whatever is at the store at the end is dropped: the scheduler is
 * only looked at, then freed. */
static void short_beside_deep(struct sched *s, struct sched_queue *heavy, struct sched_req *pool,
			      uint32_t heavy_depth, uint64_t *now, uint64_t ms)
{
	struct sched_req *at_store[48];
	uint64_t done_at[48];
	uint32_t n = 0;
	for (uint32_t k = heavy->pending + heavy->inflight; k < heavy_depth; k++) {
		struct sched_req *r = &pool[32 + k];
		req_init(r, heavy, SCHED_OP_READ, 4096);
		r->sync = true;
		sched_enqueue(s, r, *now);
	}
	for (uint64_t end = *now + ms * 1000 * US; *now < end;) {
		struct sched_req *r;
		while ((r = sched_dispatch(s, *now))) {
			at_store[n] = r;
			done_at[n++] = *now + 100 * US;
		}
		uint64_t next = n ? done_at[earliest(done_at, n)] : UINT64_MAX;
		uint64_t d = sched_next_deadline(s);
		if (d < next) {
			*now = d;
			sched_timer(s, *now);
			continue;
		}
		ck_assert_uint_ne(next, UINT64_MAX);
		*now = next;
		uint32_t i = earliest(done_at, n);
		r = at_store[i];
		sched_complete(s, r, *now);
		at_store[i] = at_store[--n];
		done_at[i] = done_at[n];
		req_init(r, r->queue, SCHED_OP_READ, 4096);
		r->sync = true;
		sched_enqueue(s, r, *now);
	}
}

/*
 * The depth is shared max-min fairly: a tenant that lately had fewer
 * requests at once than its weight's share (over a whole window of 1-2 s)
 * takes only the most it had, and the others' caps divide the rest by
 * weight. A tenant just come is not judged short before a window of it was
 * seen.
 */
START_TEST(cap_shares_what_short_tenants_leave)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 16);
	struct sched_queue *heavy = queue(s, 1, 900), *light = queue(s, 2, 100);
	static struct sched_req pool[48];
	uint64_t now = 0;
	for (int i = 0; i < 32; i++) {
		req_init(&pool[i], light, SCHED_OP_READ, 4096);
		pool[i].sync = true;
		sched_enqueue(s, &pool[i], now);
	}
	req_init(&pool[32], heavy, SCHED_OP_READ, 4096);
	pool[32].sync = true;
	sched_enqueue(s, &pool[32], now);
	/* both weighed, nothing seen yet: the weights' shares, 16 * 100 / 1000 */
	ck_assert_uint_eq(sched_bfq_cap(s, light), 2);
	ck_assert_uint_eq(sched_bfq_cap(s, heavy), 15);
	short_beside_deep(s, heavy, pool, 1, &now, 2500);
	/* one at a time, lately: the light tenant's share of the other 15 is all of it */
	ck_assert_uint_eq(s->short_wsum, heavy->ent.weight);
	ck_assert_uint_eq(s->short_depth, 1);
	ck_assert_uint_eq(sched_bfq_cap(s, light), 15);
	ck_assert_uint_eq(sched_bfq_cap(s, heavy), 15);
	short_beside_deep(s, heavy, pool, 6, &now, 100);
	/* six at once now: what it leaves is 10 */
	ck_assert_uint_eq(sched_bfq_cap(s, light), 10);
	short_beside_deep(s, heavy, pool, 15, &now, 100);
	/* at its share: nobody is short, the weights' shares again */
	ck_assert_uint_eq(s->short_wsum, 0);
	ck_assert_uint_eq(sched_bfq_cap(s, light), 2);
	sched_free(s);
}
END_TEST

START_TEST(deep_tenant_away_keeps_place)
{
	uint64_t early, got[2];
	bool a_first;
	const uint64_t slice = 256 * 1024;	/* the budget here */
	away_run(20000 * US, 2000 * US, &early, &a_first, got);
	/* Away, a still weighs in V, which so moves by half of b's service:
	 * b may run one slice of its own ahead of V, so what a is owed back
	 * (b's service beyond its half) is at most one slice, plus its part
	 * of the first batch. */
	ck_assert_msg(early / 2 <= slice + 4 * 4096, "ahead while away: %lu", (unsigned long)early);
	ck_assert(a_first);
	away_run(0, 2000 * US, &early, &a_first, got);
	ck_assert_uint_eq(early, 500 * 4096);
	ck_assert_msg(got[0] <= got[1] * 3 / 2 + slice, "window 0: %lu vs %lu",
		      (unsigned long)got[0], (unsigned long)got[1]);
	away_run(20000 * US, 30000 * US, &early, &a_first, got);
	ck_assert_uint_eq(early, 500 * 4096);
	ck_assert_msg(got[0] <= got[1] * 3 / 2 + slice, "back after the window: %lu vs %lu",
		      (unsigned long)got[0], (unsigned long)got[1]);
}
END_TEST

/* ---- the tenant tree ---- */

static struct sched_group *group(struct sched *s, uint64_t id, struct sched_group *parent,
				 uint32_t weight)
{
	struct sched_group *g;
	ck_assert_int_eq(sched_group_get(s, id, parent, weight, &g), 0);
	return g;
}

static struct sched_queue *queue_in(struct sched *s, uint64_t id, uint32_t weight,
				    struct sched_group *parent)
{
	struct sched_queue *q = queue(s, id, weight);
	sched_queue_set_parent(s, q, parent);
	return q;
}

/* As the reactor calls the scheduler: dispatch all it gives at now, then
 * again at each deadline it names, until want is dispatched (true) or by
 * give_up_ns (false); *now ends where want was dispatched. */
static bool dispatched_as_the_reactor_would(struct sched *s, uint64_t *now, struct sched_req *want,
					    uint64_t give_up_ns)
{
	for (;;) {
		for (struct sched_req *r; (r = sched_dispatch(s, *now));)
			if (r == want)
				return true;
		uint64_t d = sched_next_deadline(s);
		if (d == SCHED_DEADLINE_NONE || d > give_up_ns)
			return false;
		*now = d > *now ? d : *now;
		sched_timer(s, *now);
	}
}

/*
 * The tenants of one delegated cgroup (a user's child cgroups, each a
 * tenant), every request of theirs hung at the store: another tenant's
 * requests are still dispatched (as slots turn hung and leave the depth,
 * at most the hung bound apart: within its ceiling, 5 s, while the
 * children's own requests still come), and so are the children's own. The
 * hung requests left the depth, but the slot reserve and injection still
 * counted them in it, so with more hung than max_inflight no queue
 * fitted, virtual time stood still and the other tenant, not yet
 * eligible, never got its turn (on the real mount: its open waited with
 * 39 executors idle). And a deep child in service whose requests were all
 * hung was held for (bfq waits for a deep sync queue's next request):
 * its slice never ended, and nobody was served.
 */
static void hung_child_tenants_leave_another_its_turns(enum sched_policy policy)
{
	enum { DEPTH = 8, CHILDREN = 16, EACH = 8, TURNS = 8 };
	struct sched *s = new_sched(policy, DEPTH);
	struct sched_group *attacker = group(s, 1000, NULL, 10);
	struct sched_queue *own = queue_in(s, 9, 10, attacker), *victim = queue(s, 1, 100);
	static struct sched_req own_hung[DEPTH], hung[CHILDREN][EACH];
	struct sched_req warm, probe;
	uint64_t now = 1 * MS;
	/* The victim served before: its next start is past V. */
	req_init(&warm, victim, SCHED_OP_READ, 64 << 20);
	warm.sync = true;
	sched_enqueue(s, &warm, now);
	ck_assert_ptr_eq(sched_dispatch(s, now), &warm);
	sched_complete(s, &warm, now + 50 * US);
	now += 1 * MS;
	for (int j = 0; j < DEPTH; j++) {
		req_init(&own_hung[j], own, SCHED_OP_READ, 4096);
		own_hung[j].sync = true;
		sched_enqueue(s, &own_hung[j], now);
	}
	ck_assert(!dispatched_as_the_reactor_would(s, &now, NULL, now));
	now += 1000 * MS;
	for (int i = 0; i < CHILDREN; i++, now += 3 * MS) {
		struct sched_queue *child = queue_in(s, 10 + (uint64_t)i, 100, attacker);
		for (int j = 0; j < EACH; j++) {
			req_init(&hung[i][j], child, SCHED_OP_OTHER, 0); /* lookups, run by executors */
			hung[i][j].sync = true;
			sched_enqueue(s, &hung[i][j], now);
		}
		ck_assert(!dispatched_as_the_reactor_would(s, &now, NULL, now + 3 * MS));
	}
	/* Until every request of theirs is at the store, nearly all hung. */
	for (int t = 0; t < 100 && sched_pending(s); t++)
		ck_assert(!dispatched_as_the_reactor_would(s, &now, NULL, now + 1000 * MS));
	ck_assert_uint_eq(sched_pending(s), 0);
	ck_assert_uint_ge(sched_hung(s), CHILDREN * EACH);
	for (int k = 0; k < TURNS; k++) {
		req_init(&probe, victim, k % 2 ? SCHED_OP_OTHER : SCHED_OP_READ, 4096);
		probe.sync = true;
		uint64_t arrival = now;
		sched_enqueue(s, &probe, arrival);
		ck_assert_msg(dispatched_as_the_reactor_would(s, &now, &probe, arrival + 5000 * MS),
			      "request %d of the other tenant not dispatched beside %u hung of %u, %u queued", k, sched_hung(s), sched_inflight(s), sched_pending(s));
		now += 100 * US;
		sched_complete(s, &probe, now);
		now += 100 * US;
	}
	sched_free(s);
}

START_TEST(hung_child_tenants_leave_another_its_turns_bfq)
{
	hung_child_tenants_leave_another_its_turns(SCHED_POLICY_BFQ);
}
END_TEST

START_TEST(hung_child_tenants_leave_another_its_turns_fifo)
{
	hung_child_tenants_leave_another_its_turns(SCHED_POLICY_FIFO);
}
END_TEST

/* Groups not yet freed, removed ones included: whether a group lives is
 * otherwise invisible from outside. */
static unsigned groups_alive(const struct sched *s)
{
	unsigned n = 0;
	const struct sched_link *pos;
	for (pos = s->all_groups.next; pos != &s->all_groups; pos = pos->next)
		n++;
	return n;
}

/* Gives each queue `per` requests from pool (nq * per of them). */
static void backlog(struct sched *s, struct sched_queue **q, int nq, struct sched_req *pool,
		    int per, uint64_t now)
{
	for (int i = 0; i < nq * per; i++) {
		req_init(&pool[i], q[i % nq], SCHED_OP_READ, 4096);
		sched_enqueue(s, &pool[i], now);
	}
}

/* At depth 1 a queue's part of the requests is its share of the store:
 * within 5% of want, as weight_change_while_backlogged's ratios within 10%.
 * Each run below is 60+ slices of the lightest queue, so a slice more or
 * less moves its share by under 2%. */
static void shares_near(const uint64_t *got, int nq, const double *want, const char *what)
{
	uint64_t total = 0;
	for (int k = 0; k < nq; k++)
		total += got[k];
	ck_assert_uint_gt(total, 0);
	for (int k = 0; k < nq; k++) {
		double sh = (double)got[k] / (double)total;
		ck_assert_msg(sh >= want[k] * 0.95 && sh <= want[k] * 1.05,
			      "%s: queue %d share %.4f, want %.4f", what, k, sh, want[k]);
	}
}

/* H1 and H4 of the simulator at depth 1, read off the dispatch counts; the
 * same queues at the root share alike instead. */
/* Dispatches everything the scheduler lets out now; returns how many. */
static unsigned dispatch_all(struct sched *s, uint64_t now)
{
	unsigned n = 0;
	while (sched_dispatch(s, now))
		n++;
	return n;
}

/*
 * What the scheduler holds of the others while a deep tenant waits for its
 * next requests (the engine makes room for it in the kernel's queue, where
 * that tenant's requests would otherwise wait behind it): a heavy deep
 * writer whose requests are all at the store holds it, and the light
 * tenant's queued requests are counted; read once, the count starts over.
 * A deep tenant alone counts nothing, nor a shallow one waited for.
 */
START_TEST(held_beside_a_waiting_deep_tenant_is_counted)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 8);
	struct sched_queue *heavy = queue(s, 1, 800), *light = queue(s, 2, 100);
	struct sched_req h[8], l[6];
	uint64_t now = 1000 * US;
	for (int i = 0; i < 8; i++) {
		req_init(&h[i], heavy, SCHED_OP_WRITE, 1 << 20);
		h[i].sync = true;
		sched_enqueue(s, &h[i], now);
	}
	ck_assert_uint_eq(dispatch_all(s, now), 8);
	ck_assert(queue_deep(heavy));
	ck_assert_uint_eq(sched_take_held_beside_deep(s), 0); /* alone */
	for (int i = 0; i < 6; i++) {
		req_init(&l[i], light, SCHED_OP_WRITE, 1 << 20);
		l[i].sync = true;
		sched_enqueue(s, &l[i], now);
	}
	/* the store is full of the heavy one's: the light one's all wait */
	ck_assert_uint_eq(dispatch_all(s, now), 0);
	now += 100 * US;
	sched_complete(s, &h[0], now);
	struct sched_req *next = sched_dispatch(s, now);
	ck_assert_ptr_nonnull(next);
	ck_assert_ptr_eq(next->queue, light);
	/* the heavy one has nothing queued, its requests at the store: held for,
	 * with the light one's other five waiting beside it */
	ck_assert_uint_ge(sched_take_held_beside_deep(s), 5);
	ck_assert_uint_eq(sched_take_held_beside_deep(s), 0);
	sched_free(s);

	/* a shallow tenant idled for is not counted */
	s = new_sched(SCHED_POLICY_BFQ, 8);
	struct sched_queue *one = queue(s, 1, 800), *other = queue(s, 2, 100);
	struct sched_req a, o[4];
	req_init(&a, one, SCHED_OP_READ, 4096);
	a.sync = true;
	sched_enqueue(s, &a, now);
	ck_assert_uint_eq(dispatch_all(s, now), 1);
	for (int i = 0; i < 4; i++) {
		req_init(&o[i], other, SCHED_OP_READ, 4096);
		sched_enqueue(s, &o[i], now);
	}
	now += 100 * US;
	sched_complete(s, &a, now);
	ck_assert(!queue_deep(one));
	ck_assert_uint_eq(sched_take_held_beside_deep(s), 0);
	sched_free(s);
}
END_TEST

/* A shallow tenant gone idle keeps a slot (reserve.c): a deep tenant past
 * its share of the depth does not take the last one, so the light tenant's
 * next request goes out at once instead of waiting for a completion; a
 * third tenant that is here, within its share, may take it; the slot is
 * given up reserve_window_ns after the light tenant went idle, and however
 * many light tenants come and go, the deep one keeps all but
 * reserve_max_pct of the depth. Without the reserve (window 0) the deep
 * tenant takes every slot. */
START_TEST(reserve_keeps_a_slot_for_a_light_tenant)
{
	for (int with = 0; with <= 1; with++) {
		struct sched_params p;
		struct sched *s;
		sched_params_default(&p);
		p.max_inflight = 8;
		p.idle_enable = false;	/* the light tenant is not idled for */
		if (!with)
			p.reserve_window_ns = 0;
		ck_assert_int_eq(sched_new(&p, &s), 0);
		struct sched_queue *deep = queue(s, 1, 10), *light = queue(s, 2, 100);
		static struct sched_req rd[64], rl[3];
		uint64_t now = 1000 * US;
		req_init(&rl[0], light, SCHED_OP_READ, 4096);
		rl[0].sync = true;
		sched_enqueue(s, &rl[0], now);
		ck_assert_ptr_eq(sched_dispatch(s, now), &rl[0]);
		/* A store this slow: the deep tenant's requests, at the store past
		 * the window below, are not taken for hung (sched.c). */
		now += 100 * MS;
		sched_complete(s, &rl[0], now);
		for (int i = 0; i < 64; i++) {
			req_init(&rd[i], deep, SCHED_OP_WRITE, 1 << 20);
			rd[i].sync = true;
			sched_enqueue(s, &rd[i], now);
		}
		ck_assert_uint_eq(dispatch_all(s, now), with ? 7 : 8);
		ck_assert_uint_eq(sched_reserved_slots(s, now), with ? 1 : 0);
		/* the light tenant is back 10 ms later */
		now += 10000 * US;
		req_init(&rl[1], light, SCHED_OP_READ, 4096);
		rl[1].sync = true;
		sched_enqueue(s, &rl[1], now);
		struct sched_req *r = sched_dispatch(s, now);
		if (!with) {
			ck_assert_ptr_null(r);
			sched_free(s);
			continue;
		}
		ck_assert_ptr_eq(r, &rl[1]);
		now += 100 * US;
		sched_complete(s, &rl[1], now);
		/* remembered again: the deep tenant stays at 7 */
		sched_complete(s, &rd[0], now);
		ck_assert_uint_eq(dispatch_all(s, now), 1);
		ck_assert_uint_eq(sched_inflight(s), 7);
		/* a tenant that is here takes the kept slot */
		struct sched_queue *other = queue(s, 3, 100);
		req_init(&rl[2], other, SCHED_OP_READ, 4096);
		rl[2].sync = true;
		sched_enqueue(s, &rl[2], now);
		ck_assert_ptr_eq(sched_dispatch(s, now), &rl[2]);
		now += 100 * US;
		sched_complete(s, &rl[2], now);
		/* both remembered: still one slot kept of 8 (reserve_max_pct) */
		ck_assert_uint_eq(dispatch_all(s, now), 0);
		ck_assert_uint_eq(sched_inflight(s), 7);
		/* past the window the deep tenant may use it */
		now += p.reserve_window_ns;
		ck_assert_uint_eq(sched_reserved_slots(s, now), 0);
		ck_assert_uint_eq(dispatch_all(s, now), 1);
		ck_assert_uint_eq(sched_inflight(s), 8);
		sched_free(s);
	}
	/* many light tenants come and go: the deep one keeps 7 of 8 */
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 8);
	static struct sched_req rl[20], rd[16];
	uint64_t now = 1000 * US;
	for (int i = 0; i < 20; i++) {
		req_init(&rl[i], queue(s, 10 + (uint64_t)i, 1000), SCHED_OP_READ, 4096);
		rl[i].sync = true;
		sched_enqueue(s, &rl[i], now);
		ck_assert_ptr_eq(sched_dispatch(s, now), &rl[i]);
		now += 100 * US;
		sched_complete(s, &rl[i], now);
	}
	struct sched_queue *deep = queue(s, 1, 1);
	for (int i = 0; i < 16; i++) {
		req_init(&rd[i], deep, SCHED_OP_WRITE, 1 << 20);
		rd[i].sync = true;
		sched_enqueue(s, &rd[i], now);
	}
	ck_assert_uint_eq(dispatch_all(s, now), 7);
	sched_free(s);
}
END_TEST

START_TEST(tree_shares_by_weight_among_siblings)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_group *ga = group(s, 10, NULL, 200), *gb = group(s, 11, NULL, 100);
	struct sched_queue *q[4] = { queue_in(s, 1, 100, ga), queue_in(s, 2, 100, gb),
				     queue_in(s, 3, 100, gb), queue_in(s, 4, 100, gb) };
	struct sched_queue_stats st;
	sched_queue_stats(q[0], &st);
	ck_assert_uint_eq(st.parent_id, 10);
	ck_assert_uint_eq(st.weight, 100);	/* among its siblings, not its share */
	sched_queue_stats(q[3], &st);
	ck_assert_uint_eq(st.parent_id, 11);
	static struct sched_req pool[32];
	backlog(s, q, 4, pool, 8, 0);
	uint64_t now = 0, got[4] = { 0 };
	run_backlogged(s, q, 4, 36000, &now, got);
	shares_near(got, 4, (const double[]){ 2.0 / 3, 1.0 / 9, 1.0 / 9, 1.0 / 9 }, "pods 2:1");
	sched_free(s);

	s = new_sched(SCHED_POLICY_BFQ, 1);	/* flat: the contrast */
	for (int k = 0; k < 4; k++)
		q[k] = queue(s, (uint64_t)k + 1, 100);
	sched_queue_stats(q[0], &st);
	ck_assert_uint_eq(st.parent_id, SCHED_GROUP_NONE);
	backlog(s, q, 4, pool, 8, 0);
	got[0] = got[1] = got[2] = got[3] = 0;
	run_backlogged(s, q, 4, 36000, &now, got);
	shares_near(got, 4, (const double[]){ 1.0 / 4, 1.0 / 4, 1.0 / 4, 1.0 / 4 }, "flat");
	sched_free(s);

	/* A w300 -> { A1 w100 -> 2 leaves, a2 w100 }, b w100 */
	s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_group *a = group(s, 1, NULL, 300), *a1 = group(s, 2, a, 100);
	q[0] = queue_in(s, 1, 100, a1);
	q[1] = queue_in(s, 2, 100, a1);
	q[2] = queue_in(s, 3, 100, a);
	q[3] = queue(s, 4, 100);
	backlog(s, q, 4, pool, 8, 0);
	got[0] = got[1] = got[2] = got[3] = 0;
	run_backlogged(s, q, 4, 36000, &now, got);
	shares_near(got, 4, (const double[]){ 3.0 / 16, 3.0 / 16, 3.0 / 8, 1.0 / 4 }, "nested");
	sched_free(s);
}
END_TEST

/* Depth 1, each queue refilled only while refill[k]; counts what each got. */
static void run_tree(struct sched *s, struct sched_queue **q, int nq, int n, const bool *refill,
		     uint64_t *now, uint64_t *got)
{
	for (int i = 0; i < nq; i++)
		got[i] = 0;
	run_depth1(s, q, nq, n, refill, now, got);
}

/* A group's share goes to its children that have requests: a second child
 * halves the first one's part and takes nothing from the root tenant, and
 * once it has run dry the first gets all of it back. Weights of the group
 * and of its children move the parts accordingly. */
START_TEST(tree_group_share_divided_among_active)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_group *g = group(s, 1, NULL, 100);
	struct sched_queue *q[3] = { queue(s, 1, 100), queue_in(s, 2, 100, g),
				     queue_in(s, 3, 100, g) };
	static struct sched_req pool[48];
	uint64_t now = 0, got[3];
	backlog(s, q, 2, pool, 8, now);
	run_tree(s, q, 3, 12000, (const bool[]){ true, true, false }, &now, got);
	shares_near(got, 2, (const double[]){ 1.0 / 2, 1.0 / 2 }, "one child");
	ck_assert_uint_eq(got[2], 0);

	for (int i = 16; i < 24; i++) {
		req_init(&pool[i], q[2], SCHED_OP_READ, 4096);
		sched_enqueue(s, &pool[i], now);
	}
	run_tree(s, q, 3, 24000, (const bool[]){ true, true, true }, &now, got);
	shares_near(got, 3, (const double[]){ 1.0 / 2, 1.0 / 4, 1.0 / 4 }, "two children");

	ck_assert_int_eq(sched_group_set_weight(s, g, 300), 0);
	run_tree(s, q, 3, 24000, (const bool[]){ true, true, true }, &now, got);
	shares_near(got, 3, (const double[]){ 1.0 / 4, 3.0 / 8, 3.0 / 8 }, "group w300");
	ck_assert_int_eq(sched_queue_set_weight(s, q[1], 300), 0);
	run_tree(s, q, 3, 24000, (const bool[]){ true, true, true }, &now, got);
	shares_near(got, 3, (const double[]){ 1.0 / 4, 9.0 / 16, 3.0 / 16 }, "child w300");

	/* q[2] runs dry: its sibling gets the group's whole share again */
	run_tree(s, q, 3, 2000, (const bool[]){ true, true, false }, &now, got);
	struct sched_queue_stats st;
	sched_queue_stats(q[2], &st);
	ck_assert_uint_eq(st.pending + st.inflight, 0);
	run_tree(s, q, 3, 16000, (const bool[]){ true, true, false }, &now, got);
	ck_assert_uint_eq(got[2], 0);
	shares_near(got, 2, (const double[]){ 1.0 / 4, 3.0 / 4 }, "second child gone");
	sched_free(s);
}
END_TEST

/* A removed group's id is free at once for a new group; the old one lives
 * while anything is beneath it and is freed with its last queue, its
 * parents with it if removed too. A group that was not removed outlives
 * its queues. */
START_TEST(tree_group_lifetime)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 4);
	struct sched_group *g;
	ck_assert_int_eq(sched_group_get(s, 7, NULL, 1001, &g), -EINVAL);
	ck_assert_int_eq(sched_group_get(s, SCHED_GROUP_NONE, NULL, 100, &g), -EINVAL);
	ck_assert_uint_eq(groups_alive(s), 0);
	g = group(s, 7, NULL, 0);
	ck_assert_uint_eq(g->node.weight, SCHED_WEIGHT_DEFAULT);
	ck_assert_ptr_eq(group(s, 7, NULL, 500), g);	/* existing: keeps its weight */
	ck_assert_uint_eq(g->node.weight, SCHED_WEIGHT_DEFAULT);
	ck_assert_ptr_eq(sched_group_find(s, 7), g);
	ck_assert_ptr_null(sched_group_find(s, 8));
	ck_assert_int_eq(sched_group_set_weight(s, g, 0), -EINVAL);
	ck_assert_int_eq(sched_group_set_weight(s, g, 1001), -EINVAL);

	struct sched_queue *q = queue_in(s, 1, 100, g);
	struct sched_req r[3];
	for (int i = 0; i < 3; i++) {
		req_init(&r[i], q, SCHED_OP_READ, 4096);
		sched_enqueue(s, &r[i], 0);
	}
	struct sched_req *d[2] = { sched_dispatch(s, 0), sched_dispatch(s, 0) };
	ck_assert_ptr_nonnull(d[0]);
	ck_assert_ptr_nonnull(d[1]);
	sched_group_remove(s, g);
	ck_assert_ptr_null(sched_group_find(s, 7));
	struct sched_group *g2 = group(s, 7, NULL, 100);
	ck_assert_ptr_ne(g2, g);
	ck_assert_uint_eq(groups_alive(s), 2);	/* the old one lives beneath q */
	struct sched_queue_stats st;
	sched_queue_stats(q, &st);
	ck_assert_uint_eq(st.parent_id, 7);
	/* q still works under the removed group */
	uint64_t now = 10 * US;
	sched_complete(s, d[0], now);
	sched_complete(s, d[1], now);
	struct sched_req *last = sched_dispatch(s, now);
	ck_assert_ptr_eq(last, &r[2]);
	sched_queue_remove(s, q);	/* in flight: q and the old group live on */
	ck_assert_uint_eq(groups_alive(s), 2);
	sched_complete(s, last, now + 10 * US);
	ck_assert_uint_eq(groups_alive(s), 1);
	ck_assert_ptr_eq(sched_group_find(s, 7), g2);

	/* not removed: outlives its last queue */
	struct sched_queue *q2 = queue_in(s, 2, 100, g2);
	sched_queue_remove(s, q2);
	ck_assert_ptr_eq(sched_group_find(s, 7), g2);
	ck_assert_uint_eq(groups_alive(s), 1);

	/* a removed chain goes with its last queue */
	struct sched_group *p = group(s, 8, NULL, 100), *c = group(s, 9, p, 100);
	struct sched_queue *q3 = queue_in(s, 3, 100, c);
	sched_group_remove(s, p);	/* c is beneath it */
	ck_assert_ptr_null(sched_group_find(s, 8));
	ck_assert_ptr_eq(sched_group_find(s, 9), c);
	sched_group_remove(s, c);
	ck_assert_uint_eq(groups_alive(s), 3);
	sched_queue_remove(s, q3);
	ck_assert_uint_eq(groups_alive(s), 1);

	/* an empty group goes at once */
	sched_group_remove(s, g2);
	ck_assert_uint_eq(groups_alive(s), 0);
	ck_assert_ptr_null(sched_group_find(s, 7));
	sched_free(s);
}
END_TEST

/* A group cannot be moved beneath itself; refused moves change nothing,
 * and shares follow the moves that are made. */
START_TEST(tree_set_parent_cycle_refused)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_group *a = group(s, 1, NULL, 300), *b = group(s, 2, a, 100),
			   *c = group(s, 3, b, 100);
	ck_assert_int_eq(sched_group_set_parent(s, a, a), -EINVAL);
	ck_assert_int_eq(sched_group_set_parent(s, a, b), -EINVAL);
	ck_assert_int_eq(sched_group_set_parent(s, a, c), -EINVAL);
	ck_assert_int_eq(sched_group_set_parent(s, b, c), -EINVAL);
	ck_assert_ptr_eq(b->node.parent, a);
	ck_assert_ptr_eq(c->node.parent, b);
	struct sched_queue *q[2] = { queue(s, 1, 100), queue_in(s, 2, 100, c) };
	static struct sched_req pool[16];
	backlog(s, q, 2, pool, 8, 0);
	uint64_t now = 0, got[2];
	const bool both[2] = { true, true };
	run_tree(s, q, 2, 16000, both, &now, got);
	shares_near(got, 2, (const double[]){ 1.0 / 4, 3.0 / 4 }, "c under b under a (w300)");
	/* c to the root with its weight 100, while backlogged */
	ck_assert_int_eq(sched_group_set_parent(s, c, NULL), 0);
	run_tree(s, q, 2, 16000, both, &now, got);
	shares_near(got, 2, (const double[]){ 1.0 / 2, 1.0 / 2 }, "c at the root");
	/* now a may go under c: a -> b, c at the root; and back refused */
	ck_assert_int_eq(sched_group_set_parent(s, a, c), 0);
	ck_assert_int_eq(sched_group_set_parent(s, c, b), -EINVAL);
	ck_assert_int_eq(sched_group_set_weight(s, c, 200), 0);
	run_tree(s, q, 2, 16000, both, &now, got);
	shares_near(got, 2, (const double[]){ 1.0 / 3, 2.0 / 3 }, "c w200 at the root");
	sched_free(s);
}
END_TEST

/* A queue moves between groups, backlogged and with a request in flight:
 * it keeps working, takes its new siblings' part, and the group it left
 * has nobody active left (removed, it goes at once). */
START_TEST(tree_queue_moves_between_groups)
{
	struct sched *s = new_sched(SCHED_POLICY_BFQ, 1);
	struct sched_group *g1 = group(s, 1, NULL, 100), *g2 = group(s, 2, NULL, 300);
	struct sched_queue *q[2] = { queue_in(s, 1, 100, g1), queue_in(s, 2, 100, g2) };
	static struct sched_req pool[16];
	backlog(s, q, 2, pool, 8, 0);
	uint64_t now = 0, got[2];
	const bool both[2] = { true, true };
	run_tree(s, q, 2, 16000, both, &now, got);
	shares_near(got, 2, (const double[]){ 1.0 / 4, 3.0 / 4 }, "g1 w100, g2 w300");

	struct sched_req *r = NULL;
	while (!r || r->queue != q[0]) {	/* q[0]'s request in flight */
		if (r) {
			sched_complete(s, r, now += 10 * US);
			req_init(r, r->queue, SCHED_OP_READ, 4096);
			sched_enqueue(s, r, now);
		}
		r = sched_dispatch(s, now);
		ck_assert_ptr_nonnull(r);
	}
	sched_queue_set_parent(s, q[0], g2);
	struct sched_queue_stats st;
	sched_queue_stats(q[0], &st);
	ck_assert_uint_eq(st.parent_id, 2);
	ck_assert(!g1->node.active);
	ck_assert_uint_eq(g1->active_wsum, 0);
	sched_group_remove(s, g1);
	ck_assert_uint_eq(groups_alive(s), 1);
	sched_complete(s, r, now += 10 * US);
	req_init(r, r->queue, SCHED_OP_READ, 4096);
	sched_enqueue(s, r, now);
	run_tree(s, q, 2, 16000, both, &now, got);
	shares_near(got, 2, (const double[]){ 1.0 / 2, 1.0 / 2 }, "both in g2");

	sched_queue_set_parent(s, q[0], NULL);	/* to the root, w100 next to g2's 300 */
	run_tree(s, q, 2, 16000, both, &now, got);
	shares_near(got, 2, (const double[]){ 1.0 / 4, 3.0 / 4 }, "back at the root");
	/* g2 beneath a new group of w100: its share is that group's now */
	struct sched_group *h = group(s, 3, NULL, 100);
	ck_assert_int_eq(sched_group_set_parent(s, g2, h), 0);
	run_tree(s, q, 2, 16000, both, &now, got);
	shares_near(got, 2, (const double[]){ 1.0 / 2, 1.0 / 2 }, "g2 under h");
	sched_free(s);
}
END_TEST

/* ---- S6: the engine against a naive reference ---- */

struct ref_ent {
	uint64_t start, finish, id;
	uint32_t weight;
	bool in;
};

static struct ref_ent *ref_select(struct ref_ent *e, int n, uint64_t *vtime)
{
	struct ref_ent *best = NULL, *minstart = NULL;
	for (int i = 0; i < n; i++) {
		if (!e[i].in)
			continue;
		if (!minstart || sched_wf2q_before(e[i].start, minstart->start) ||
		    (e[i].start == minstart->start && e[i].id < minstart->id))
			minstart = &e[i];
	}
	if (!minstart)
		return NULL;
	bool any = false;
	for (int i = 0; i < n; i++)
		any |= e[i].in && !sched_wf2q_before(*vtime, e[i].start);
	if (!any)
		*vtime = minstart->start;
	for (int i = 0; i < n; i++) {
		if (!e[i].in || sched_wf2q_before(*vtime, e[i].start))
			continue;
		if (!best || sched_wf2q_before(e[i].finish, best->finish) ||
		    (e[i].finish == best->finish && e[i].id < best->id))
			best = &e[i];
	}
	return best;
}

START_TEST(s6_engine_matches_reference)
{
	enum { N = 300 };
	static struct wf2q_entity ent[N];
	static struct ref_ent ref[N];
	struct wf2q w;
	uint64_t ref_v = (uint64_t)-5000000;	/* start near the wrap point */
	sched_wf2q_init(&w);
	w.vtime = ref_v;
	ck_assert_int_eq(sched_wf2q_reserve(&w, N), 0);
	rng_state = 42;
	for (int i = 0; i < N; i++) {
		ent[i] = (struct wf2q_entity){ .id = (uint64_t)i, .heap_pos = -1,
					       .weight = 1 + (uint32_t)rnd(1000) };
		ref[i] = (struct ref_ent){ .id = (uint64_t)i, .weight = ent[i].weight };
	}
	for (int step = 0; step < 200000; step++) {
		int i = (int)rnd(N);
		switch (rnd(6)) {
		case 0:	/* activate */
			if (ref[i].in)
				break;
			ref[i].start = ref_v + rnd(3) * rnd(100000);
			ref[i].finish = ref[i].start + sched_wf2q_vt_len(1 + rnd(1 << 20), ref[i].weight);
			ent[i].start_vt = ref[i].start;
			ent[i].finish_vt = ref[i].finish;
			sched_wf2q_insert(&w, &ent[i]);
			ref[i].in = true;
			w.wsum += ent[i].weight;
			break;
		case 1:	/* deactivate */
			if (!ref[i].in)
				break;
			sched_wf2q_remove(&w, &ent[i]);
			ref[i].in = false;
			w.wsum -= ent[i].weight;
			break;
		case 2: {	/* service */
			uint64_t bytes = rnd(1 << 20);
			if (w.wsum)
				ref_v += bytes * WF2Q_SCALE / w.wsum;
			sched_wf2q_advance(&w, bytes);
			break;
		}
		case 3: {	/* injected service or weight change: tags move */
			if (!ref[i].in)
				break;
			uint64_t d = rnd(1 << 16);
			ref[i].start += d;
			ref[i].finish += d + rnd(1 << 16);
			ent[i].start_vt = ref[i].start;
			ent[i].finish_vt = ref[i].finish;
			sched_wf2q_reposition(&w, &ent[i]);
			break;
		}
		default: {
			struct ref_ent *r = ref_select(ref, N, &ref_v);
			struct wf2q_entity *e = sched_wf2q_select(&w);
			ck_assert_uint_eq(w.vtime, ref_v);
			if (!r) {
				ck_assert_ptr_null(e);
				break;
			}
			ck_assert_ptr_nonnull(e);
			ck_assert_uint_eq(e->id, r->id);
			break;
		}
		}
	}
	sched_wf2q_destroy(&w);
}
END_TEST

/* A resting entity (nothing queued, requests still at the store) stops V's
 * catch-up at its finish, as a parked one does, but holds nobody back: the
 * waiting entity is served although V has not reached its start, where a
 * parked entity in the same place would keep it waiting. Once it leaves,
 * V jumps to the waiting start. */
START_TEST(s6_resting_entity_holds_v_not_the_others)
{
	struct wf2q w;
	sched_wf2q_init(&w);
	ck_assert_int_eq(sched_wf2q_reserve(&w, 4), 0);
	struct wf2q_entity kept = {.id = 1, .heap_pos = -1, .weight = 4096,
				   .start_vt = 100, .finish_vt = 100};
	struct wf2q_entity waiting = {.id = 2, .heap_pos = -1, .weight = 4096,
				      .start_vt = 1000, .finish_vt = 1010};
	w.vtime = 50;
	sched_wf2q_rest(&w, &kept);
	sched_wf2q_insert(&w, &waiting);
	ck_assert_ptr_eq(sched_wf2q_select(&w), &waiting);
	ck_assert_uint_eq(w.vtime, 100);
	ck_assert(!sched_wf2q_owed(&w, &kept));
	/* parked in the same place, it holds the waiting one back */
	sched_wf2q_remove(&w, &kept);
	sched_wf2q_park(&w, &kept);
	ck_assert_ptr_null(sched_wf2q_select(&w));
	sched_wf2q_remove(&w, &kept);
	sched_wf2q_catch_up(&w);
	ck_assert_uint_eq(w.vtime, 1000);
	ck_assert_ptr_eq(sched_wf2q_select(&w), &waiting);
	sched_wf2q_destroy(&w);
}
END_TEST

/* Random enqueue/dispatch/complete/weight-change/remove sequences: every
 * request is dispatched exactly once and completed, bounds always hold.
 * With tree, queues and groups also move, groups are reweighted, removed
 * and made again, and the tree's sums are checked after every step. */
enum { R_FREE, R_QUEUED, R_INFLIGHT };

/* The tree's books: the weighed queues are the active ones and their
 * shares make up wq.wsum; a group is active iff its active children's
 * weights (active_wsum) are not 0, and its children divide its share
 * without adding to it. Returns what is wrong, NULL if nothing; plain
 * tests, as every ck_assert costs Check a write to its log. */
static const char *tree_check(const struct sched *s)
{
	uint64_t wsum = 0;
	const struct sched_link *pos, *c;
	for (pos = s->all_queues.next; pos != &s->all_queues; pos = pos->next) {
		const struct sched_queue *q = sched_list_entry(pos, struct sched_queue, all_link);
		if (q->weighed != q->node.active)
			return "a queue's weighed and active differ";
		if (q->weighed)
			wsum += q->ent.weight;
	}
	if (wsum != s->wq.wsum)
		return "wq.wsum is not the weighed queues' shares";
	for (pos = s->all_groups.next; pos != &s->all_groups; pos = pos->next) {
		const struct sched_group *g = sched_list_entry(pos, struct sched_group, all_link);
		uint64_t aw = 0, shares = 0;
		for (c = g->active.next; c != &g->active; c = c->next) {
			const struct sched_node *n = sched_list_entry(c, struct sched_node, active_link);
			if (!n->active || n->parent != g)
				return "an inactive node or a stranger among a group's active children";
			aw += n->weight;
			shares += n->is_group
					  ? sched_list_entry(n, struct sched_group, node)->share
					  : sched_list_entry(n, struct sched_queue, node)->ent.weight;
		}
		if (aw != g->active_wsum)
			return "active_wsum is not the active children's weights";
		if (g->node.active != (aw != 0))
			return "a group is active without active children, or the other way";
		if (g->node.active && shares > g->share)
			return "a group's children have more than its share";
	}
	return NULL;
}

/* One random change of the tree: a group made (under a random group or the
 * root), reweighted, moved (a cycle must be refused), removed; a queue
 * moved. A removed group's slot is emptied: the caller may not use it. */
static void random_tree_op(struct sched *s, struct sched_queue **q, int nq, struct sched_group **g,
			   int ng, uint64_t step)
{
	int k = (int)rnd((uint64_t)ng), j = (int)rnd((uint64_t)ng + 1);
	struct sched_group *other = j < ng ? g[j] : NULL;	/* j == ng: the root */
	switch (rnd(5)) {
	case 0:
		if (!g[k])
			ck_assert_int_eq(sched_group_get(s, 1000 * step + (uint64_t)k, other,
							 1 + (uint32_t)rnd(1000), &g[k]), 0);
		break;
	case 1:
		if (g[k])
			ck_assert_int_eq(sched_group_set_weight(s, g[k], 1 + (uint32_t)rnd(1000)), 0);
		break;
	case 2: {
		if (!g[k])
			break;
		bool beneath = false;	/* other is g[k] or in its subtree */
		for (struct sched_group *a = other; a; a = a->node.parent)
			beneath |= a == g[k];
		ck_assert_int_eq(sched_group_set_parent(s, g[k], other), beneath ? -EINVAL : 0);
		break;
	}
	case 3:
		if (g[k] && rnd(3) == 0) {
			sched_group_remove(s, g[k]);
			g[k] = NULL;
		}
		break;
	default: {
		struct sched_queue *m = q[rnd((uint64_t)nq)];
		if (m)
			sched_queue_set_parent(s, m, other);
		break;
	}
	}
}

/* switching: now and then a reload changes the policy (either way, or
 * asks for the one in force). */
static void random_run(enum sched_policy policy, uint64_t seed, bool tree, bool switching)
{
	enum { NT = 60, NR = 500, MAXIN = 8, NG = 8 };
	struct sched *s = new_sched(policy, MAXIN);
	static struct sched_req req[NR];
	static int state[NR];
	struct sched_queue *q[NT] = { 0 };
	struct sched_group *g[NG] = { 0 };
	uint32_t queued = 0, inflight = 0;
	uint64_t now = 0;
	rng_state = seed;
	for (int i = 0; i < NR; i++)
		state[i] = R_FREE;
	for (int step = 0; step < 60000; step++) {
		now += rnd(30 * US);
		int t = (int)rnd(NT), i = (int)rnd(NR);
		switch (rnd(10)) {
		case 0: case 1: case 2: case 3:
			if (state[i] != R_FREE)
				break;
			if (!q[t])
				q[t] = queue(s, (uint64_t)t + 1000 * (uint64_t)step, 1 + (uint32_t)rnd(1000));
			req_init(&req[i], q[t], (enum sched_op)rnd(5), rnd(4) ? 4096 * rnd(64) : 0);
			req[i].sync = rnd(2);
			sched_enqueue(s, &req[i], now);
			state[i] = R_QUEUED;
			queued++;
			break;
		case 4: case 5: case 6:
			if (state[i] != R_INFLIGHT)
				break;
			sched_complete(s, &req[i], now);
			state[i] = R_FREE;
			inflight--;
			break;
		case 7:
			if (q[t])
				ck_assert_int_eq(sched_queue_set_weight(s, q[t], 1 + (uint32_t)rnd(1000)), 0);
			if (tree)
				random_tree_op(s, q, NT, g, NG, (uint64_t)step);
			break;
		case 8:
			if (q[t] && rnd(4) == 0) {
				sched_queue_remove(s, q[t]);
				q[t] = NULL;
			}
			break;
		default:
			if (switching && rnd(40) == 0) {
				struct sched_params p = *sched_params_of(s);
				p.policy = rnd(2) ? SCHED_POLICY_BFQ : SCHED_POLICY_FIFO;
				ck_assert_int_eq(sched_reload(s, &p), 0);
			}
			if (now >= sched_next_deadline(s))
				sched_timer(s, now);
			break;
		}
		struct sched_req *r;
		while ((r = sched_dispatch(s, now))) {
			int k = (int)(r - req);
			ck_assert_int_ge(k, 0);
			ck_assert_int_lt(k, NR);
			ck_assert_int_eq(state[k], R_QUEUED);
			state[k] = R_INFLIGHT;
			queued--;
			inflight++;
		}
		ck_assert_uint_le(inflight, MAXIN);
		ck_assert_uint_eq(sched_inflight(s), inflight);
		ck_assert_uint_eq(sched_pending(s), queued);
		if (queued && !inflight)	/* waiting is allowed only with a deadline */
			ck_assert_uint_ne(sched_next_deadline(s), SCHED_DEADLINE_NONE);
		if (tree) {
			const char *bad = tree_check(s);
			ck_assert_msg(!bad, "step %d: %s", step, bad);
		}
	}
	for (int guard = 0; queued || inflight; guard++) {	/* drain */
		ck_assert_int_lt(guard, 100000);
		for (int k = 0; k < NR; k++)
			if (state[k] == R_INFLIGHT) {
				sched_complete(s, &req[k], now += US);
				state[k] = R_FREE;
				inflight--;
			}
		struct sched_req *r;
		while ((r = sched_dispatch(s, now))) {
			state[r - req] = R_INFLIGHT;
			queued--;
			inflight++;
		}
		if (queued && !inflight) {
			uint64_t d = sched_next_deadline(s);
			ck_assert_uint_ne(d, SCHED_DEADLINE_NONE);
			now = d > now ? d : now;
			sched_timer(s, now);
		}
	}
	sched_free(s);
}

START_TEST(s6_random_sequences_consistent)
{
	for (uint64_t seed = 1; seed <= 4; seed++) {
		random_run(SCHED_POLICY_BFQ, seed, false, false);
		random_run(SCHED_POLICY_FIFO, seed, false, false);
	}
}
END_TEST

/* The same with the policy changed by reloads along the way, tenant tree
 * and all. */
START_TEST(policy_changes_in_random_sequences_consistent)
{
	for (uint64_t seed = 1; seed <= 4; seed++)
		random_run(seed % 2 ? SCHED_POLICY_BFQ : SCHED_POLICY_FIFO, seed, true, true);
}
END_TEST

/* fifo never activates the tree: one seed covers its moves and removals. */
START_TEST(tree_random_sequences_consistent)
{
	for (uint64_t seed = 1; seed <= 4; seed++)
		random_run(SCHED_POLICY_BFQ, seed, true, false);
	random_run(SCHED_POLICY_FIFO, 1, true, false);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sched");
	TCase *tc = tcase_create("unit");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, params_validated);
	tcase_add_test(tc, unknown_policy_rejected);
	tcase_add_test(tc, cost_model_prices_plain_writes_not_dsync_ones);
	tcase_add_test(tc, cost_model_prices_dsync_writes_by_their_own_kind);
	tcase_add_test(tc, cost_model_set_live);
	tcase_add_test(tc, reload_changes_idling_and_keeps_the_rest);
	tcase_add_test(tc, reload_lowers_max_inflight);
	tcase_add_test(tc, reload_changes_policy_once_nothing_is_in_flight);
	tcase_add_test(tc, reload_changes_policy_beside_hung_requests);
	tcase_add_test(tc, reload_policy_asked_back_is_no_change);
	tcase_add_test(tc, tenant_table_many);
	tcase_add_test(tc, intrusive_list);
	tcase_add_test(tc, hung_requests_leave_the_depth_bfq);
	tcase_add_test(tc, hung_requests_leave_the_depth_fifo);
	tcase_add_test(tc, hung_at_dispatch_leaves_the_slot_bfq);
	tcase_add_test(tc, hung_at_dispatch_leaves_the_slot_fifo);
	tcase_add_test(tc, hung_child_tenants_leave_another_its_turns_bfq);
	tcase_add_test(tc, hung_child_tenants_leave_another_its_turns_fifo);
	tcase_add_loop_test(tc, the_hung_bound_follows_the_stores_times, 0, 2);
	tcase_add_test(tc, beside_a_hung_tenant_others_are_served_as_they_come);
	tcase_add_test(tc, all_idle);
	tcase_add_test(tc, solo_requests_are_counted);
	tcase_add_test(tc, idle_window_and_timer);
	tcase_add_test(tc, zero_length_requests);
	tcase_add_test(tc, remove_with_requests_in_flight);
	tcase_add_test(tc, weight_change_while_backlogged);
	tcase_add_test(tc, vtime_after_long_idle);
	tcase_add_test(tc, no_credit_for_staying_away);
	tcase_add_test(tc, think_time_runs_to_the_arrival);
	tcase_add_test(tc, waker_detected);
	tcase_add_test(tc, a_streaming_neighbour_is_no_waker);
	tcase_add_test(tc, injection_backs_off_when_cycles_slow);
	tcase_add_test(tc, fsync_charged_by_time_held);
	tcase_add_test(tc, time_charge_shared_within_batch);
	tcase_add_test(tc, time_charge_alike_across_kinds);
	tcase_add_test(tc, deep_tenant_under_its_share_leaves_the_rest);
	tcase_add_test(tc, deep_tenant_away_keeps_place);
	tcase_add_test(tc, cap_shares_what_short_tenants_leave);
	tcase_add_test(tc, reserve_keeps_a_slot_for_a_light_tenant);
	tcase_add_test(tc, stalled_store_keeps_the_reserved_slot_for_its_tenant);
	tcase_add_test(tc, door_verdict_stands_without_evidence);
	tcase_add_test(tc, door_shut_forgives_what_the_open_door_gave);
	tcase_add_test(tc, s6_engine_matches_reference);
	tcase_add_test(tc, s6_resting_entity_holds_v_not_the_others);
	tcase_add_test(tc, held_beside_a_waiting_deep_tenant_is_counted);
	tcase_add_test(tc, s6_random_sequences_consistent);
	tcase_add_test(tc, policy_changes_in_random_sequences_consistent);
	tcase_add_test(tc, tree_shares_by_weight_among_siblings);
	tcase_add_test(tc, tree_group_share_divided_among_active);
	tcase_add_test(tc, tree_group_lifetime);
	tcase_add_test(tc, tree_set_parent_cycle_refused);
	tcase_add_test(tc, tree_queue_moves_between_groups);
	tcase_add_test(tc, tree_random_sequences_consistent);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
