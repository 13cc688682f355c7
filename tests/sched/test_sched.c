/* Unit, edge-case and consistency tests of the pure scheduler. */
#include "fusesched/sched.h"
#include "list.h"
#include "wf2q.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define US 1000ull

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
	*r = (struct sched_req){ .queue = q, .op = op, .bytes = bytes, .sync = false,
				 .offset = rnd(1u << 20) * 4096 };
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

/* A depth-1 sync tenant is idled for while another competes; the idle
 * window ends by the timer and dispatch resumes with the other. */
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
		sched_account(s, &r);
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

/* Runs n dispatch/complete cycles at depth 1 with both tenants backlogged,
 * refilling each, and counts what each got. */
static void run_backlogged(struct sched *s, struct sched_queue **q, int nq, int n,
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
		for (int k = 0; k < nq; k++)
			if (r->queue == q[k])
				got[k] += r->bytes;
		req_init(r, r->queue, SCHED_OP_READ, 4096);
		sched_enqueue(s, r, *now);
	}
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
START_TEST(deep_tenant_away_keeps_place)
{
	uint64_t early, got[2];
	bool a_first;
	const uint64_t slice = 256 * 1024;	/* the budget here */
	away_run(20000 * US, 2000 * US, &early, &a_first, got);
	ck_assert_msg(early <= slice, "ahead while away: %lu", (unsigned long)early);
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

/* Random enqueue/dispatch/complete/weight-change/remove sequences: every
 * request is dispatched exactly once and completed, bounds always hold. */
enum { R_FREE, R_QUEUED, R_INFLIGHT };

static void random_run(enum sched_policy policy, uint64_t seed)
{
	enum { NT = 60, NR = 500, MAXIN = 8 };
	struct sched *s = new_sched(policy, MAXIN);
	static struct sched_req req[NR];
	static int state[NR];
	struct sched_queue *q[NT] = { 0 };
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
			break;
		case 8:
			if (q[t] && rnd(4) == 0) {
				sched_queue_remove(s, q[t]);
				q[t] = NULL;
			}
			break;
		default:
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
		random_run(SCHED_POLICY_BFQ, seed);
		random_run(SCHED_POLICY_FIFO, seed);
	}
}
END_TEST

int main(void)
{
	Suite *s = suite_create("sched");
	TCase *tc = tcase_create("unit");
	tcase_set_timeout(tc, 60);
	tcase_add_test(tc, params_validated);
	tcase_add_test(tc, unknown_policy_rejected);
	tcase_add_test(tc, tenant_table_many);
	tcase_add_test(tc, intrusive_list);
	tcase_add_test(tc, all_idle);
	tcase_add_test(tc, solo_requests_are_counted);
	tcase_add_test(tc, idle_window_and_timer);
	tcase_add_test(tc, zero_length_requests);
	tcase_add_test(tc, remove_with_requests_in_flight);
	tcase_add_test(tc, weight_change_while_backlogged);
	tcase_add_test(tc, vtime_after_long_idle);
	tcase_add_test(tc, no_credit_for_staying_away);
	tcase_add_test(tc, waker_detected);
	tcase_add_test(tc, injection_backs_off_when_cycles_slow);
	tcase_add_test(tc, fsync_charged_by_time_held);
	tcase_add_test(tc, time_charge_shared_within_batch);
	tcase_add_test(tc, deep_tenant_away_keeps_place);
	tcase_add_test(tc, s6_engine_matches_reference);
	tcase_add_test(tc, s6_random_sequences_consistent);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
