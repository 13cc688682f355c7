/* The executors' line: arrival order, and no tenant or user past its bound. */
#include "fusesched/executor_line.h"

#include <check.h>
#include <stdlib.h>

#define TENANTS 64u
#define BOUND 4u
#define SHARED_ALL 1000u /* more than any test holds: the shared room never binds */

static struct executor_line *line_of(uint32_t bound)
{
	struct executor_line *l = NULL;
	ck_assert_int_eq(executor_line_new(TENANTS, bound, SHARED_ALL, &l), 0);
	return l;
}

START_TEST(items_go_in_arrival_order)
{
	struct executor_line *l = line_of(BOUND);
	struct executor_line_item it[3] = {{.tenant = 1, .uid = 1000}, {.tenant = 2, .uid = 1001},
					   {.tenant = 1, .uid = 1000}};
	ck_assert(executor_line_empty(l));
	for (int i = 0; i < 3; i++)
		executor_line_push(l, &it[i]);
	for (int i = 0; i < 3; i++)
		ck_assert_ptr_eq(executor_line_take(l, true), &it[i]);
	ck_assert(executor_line_empty(l));
	ck_assert_ptr_null(executor_line_take(l, true));
	ck_assert_uint_eq(executor_line_held(l, 1), 2);
	executor_line_done(l, &it[0]);
	ck_assert_uint_eq(executor_line_held(l, 1), 1);
	executor_line_free(l);
}
END_TEST

/*
 * A user's requests spread over many tenants (child cgroups), each one
 * held at a store that hangs: past the bound the user's wait, and another
 * user's request queued behind all of them goes first. Its own go again
 * as each of its held ones comes back.
 */
START_TEST(a_user_over_many_tenants_holds_at_most_the_bound)
{
	struct executor_line *l = line_of(BOUND);
	enum { SPREAD = 3 * BOUND };
	struct executor_line_item attacker[SPREAD], victim = {.tenant = TENANTS - 1, .uid = 2002};
	for (uint32_t i = 0; i < SPREAD; i++) {
		attacker[i] = (struct executor_line_item){.tenant = i, .uid = 2001};
		executor_line_push(l, &attacker[i]);
	}
	executor_line_push(l, &victim);
	for (uint32_t i = 0; i < BOUND; i++)
		ck_assert_ptr_eq(executor_line_take(l, true), &attacker[i]);
	ck_assert_ptr_eq(executor_line_take(l, true), &victim);
	ck_assert_ptr_null(executor_line_take(l, true));
	ck_assert(!executor_line_empty(l));
	/* One more of the user's is held back as it arrives; another user's is not. */
	struct executor_line_item late = {.tenant = SPREAD, .uid = 2001}, other = {.tenant = SPREAD + 1, .uid = 2003};
	ck_assert(executor_line_push(l, &late));
	ck_assert(!executor_line_push(l, &other));
	ck_assert_ptr_eq(executor_line_take(l, true), &other);
	executor_line_done(l, &attacker[2]);
	ck_assert_ptr_eq(executor_line_take(l, true), &attacker[BOUND]);
	ck_assert_ptr_null(executor_line_take(l, true));
	/* A drain takes everything left, bounds or not. */
	for (uint32_t i = BOUND + 1; i < SPREAD; i++)
		ck_assert_ptr_eq(executor_line_take(l, false), &attacker[i]);
	ck_assert_ptr_eq(executor_line_take(l, false), &late);
	ck_assert(executor_line_empty(l));
	executor_line_free(l);
}
END_TEST

/* One tenant's processes of many users, or root's: bounded per tenant. Root
 * in other tenants is not held back by it. */
START_TEST(a_tenant_holds_at_most_the_bound_and_root_is_bounded_per_tenant)
{
	struct executor_line *l = line_of(BOUND);
	enum { MANY = 2 * BOUND };
	struct executor_line_item mixed[MANY], root[MANY];
	for (uint32_t i = 0; i < MANY; i++) {
		mixed[i] = (struct executor_line_item){.tenant = 5, .uid = 3000 + i};
		root[i] = (struct executor_line_item){.tenant = 6 + i, .uid = 0};
		executor_line_push(l, &mixed[i]);
	}
	for (uint32_t i = 0; i < MANY; i++)
		executor_line_push(l, &root[i]);
	for (uint32_t i = 0; i < BOUND; i++)
		ck_assert_ptr_eq(executor_line_take(l, true), &mixed[i]);
	for (uint32_t i = 0; i < MANY; i++)
		ck_assert_ptr_eq(executor_line_take(l, true), &root[i]);
	ck_assert_ptr_null(executor_line_take(l, true));
	ck_assert_uint_eq(executor_line_held(l, 5), BOUND);
	executor_line_set_limits(l, BOUND + 1, SHARED_ALL);
	ck_assert_ptr_eq(executor_line_take(l, true), &mixed[BOUND]);
	ck_assert_ptr_null(executor_line_take(l, true));
	executor_line_free(l);
}
END_TEST

/* Users come and go: a user whose executors all came back is forgotten,
 * and the others' counts stay theirs. */
START_TEST(users_leave_and_others_keep_their_counts)
{
	struct executor_line *l = line_of(1);
	struct executor_line_item a = {.tenant = TENANTS + 7, .uid = 10}, b = {.tenant = TENANTS + 7, .uid = 11},
				  a2 = {.tenant = TENANTS + 7, .uid = 10}, b2 = {.tenant = TENANTS + 7, .uid = 11};
	executor_line_push(l, &a);
	executor_line_push(l, &b);
	executor_line_push(l, &a2);
	executor_line_push(l, &b2);
	/* Tenants past the table are counted per user only. */
	ck_assert_ptr_eq(executor_line_take(l, true), &a);
	ck_assert_ptr_eq(executor_line_take(l, true), &b);
	ck_assert_ptr_null(executor_line_take(l, true));
	executor_line_done(l, &a);
	ck_assert_ptr_eq(executor_line_take(l, true), &a2);
	ck_assert_ptr_null(executor_line_take(l, true)); /* b still held: b2 waits */
	executor_line_done(l, &b);
	ck_assert_ptr_eq(executor_line_take(l, true), &b2);
	executor_line_free(l);
}
END_TEST

/*
 * Many owners hung at once, each under its bound: past the shared room
 * those holding any wait, and a tenant and user holding none still go, one
 * each, while threads are left. Root's tenants count as owners apart.
 */
START_TEST(past_the_shared_room_only_owners_holding_none_go)
{
	enum { SHARED = 6 };
	struct executor_line *l = NULL;
	ck_assert_int_eq(executor_line_new(TENANTS, BOUND, SHARED, &l), 0);
	struct executor_line_item a[BOUND], b[BOUND], root[2], newcomer[2], same_user = {.tenant = 9, .uid = 1001};
	for (uint32_t i = 0; i < BOUND; i++) {
		a[i] = (struct executor_line_item){.tenant = 1, .uid = 1000};
		b[i] = (struct executor_line_item){.tenant = 2, .uid = 1001};
		executor_line_push(l, &a[i]);
	}
	for (uint32_t i = 0; i < BOUND; i++)
		ck_assert_ptr_eq(executor_line_take(l, true), &a[i]);
	for (uint32_t i = 0; i < BOUND; i++)
		ck_assert(!executor_line_push(l, &b[i])); /* nobody at its bound, the room not full */
	ck_assert_ptr_eq(executor_line_take(l, true), &b[0]);
	ck_assert_ptr_eq(executor_line_take(l, true), &b[1]); /* 6 held: the room is full */
	ck_assert_ptr_null(executor_line_take(l, true));
	ck_assert(executor_line_push(l, &same_user)); /* its user holds some */
	for (int i = 0; i < 2; i++) {
		root[i] = (struct executor_line_item){.tenant = 3, .uid = 0};
		newcomer[i] = (struct executor_line_item){.tenant = 4, .uid = 1002};
	}
	ck_assert(!executor_line_push(l, &root[0]));
	ck_assert(!executor_line_push(l, &newcomer[0]));
	ck_assert_ptr_eq(executor_line_take(l, true), &root[0]);
	ck_assert_ptr_eq(executor_line_take(l, true), &newcomer[0]);
	ck_assert(executor_line_push(l, &root[1]));
	ck_assert(executor_line_push(l, &newcomer[1]));
	ck_assert_ptr_null(executor_line_take(l, true));
	/* Back under the room, the oldest that may go goes; at the room again,
	 * only a tenant holding none (root's, its first came back). */
	executor_line_done(l, &a[0]);
	executor_line_done(l, &a[1]);
	executor_line_done(l, &root[0]);
	ck_assert_ptr_eq(executor_line_take(l, true), &b[2]);
	ck_assert_ptr_eq(executor_line_take(l, true), &root[1]);
	ck_assert_ptr_null(executor_line_take(l, true));
	/* A drain takes the rest. */
	ck_assert_ptr_eq(executor_line_take(l, false), &b[3]);
	ck_assert_ptr_eq(executor_line_take(l, false), &same_user);
	ck_assert_ptr_eq(executor_line_take(l, false), &newcomer[1]);
	ck_assert(executor_line_empty(l));
	executor_line_free(l);
}
END_TEST

static void collect(struct executor_line_item *it, void *arg)
{
	struct executor_line_item **next = arg;
	for (; *next; next++)
		;
	*next = it;
}

/*
 * Requests that could go when they came (no idle thread took them yet)
 * and cannot once others were taken: the line says it tightened, and
 * names them, oldest first; while nobody nears the room or a bound it
 * says nothing.
 */
START_TEST(a_take_that_fills_the_room_names_who_waits_now)
{
	enum { SHARED = 4 };
	struct executor_line *l = NULL;
	ck_assert_int_eq(executor_line_new(TENANTS, BOUND, SHARED, &l), 0);
	struct executor_line_item a[3], b[2], c = {.tenant = 3, .uid = 1002};
	for (int i = 0; i < 3; i++) {
		a[i] = (struct executor_line_item){.tenant = 1, .uid = 1000};
		ck_assert(!executor_line_push(l, &a[i]));
	}
	for (int i = 0; i < 2; i++) {
		b[i] = (struct executor_line_item){.tenant = 2, .uid = 1001};
		ck_assert(!executor_line_push(l, &b[i]));
	}
	ck_assert_ptr_eq(executor_line_take(l, true), &a[0]);
	ck_assert_ptr_eq(executor_line_take(l, true), &a[1]);
	ck_assert(!executor_line_tightened(l)); /* 2 of 4 held, nobody at its bound */
	ck_assert_ptr_eq(executor_line_take(l, true), &a[2]);
	ck_assert(!executor_line_tightened(l));
	ck_assert(!executor_line_push(l, &c)); /* nobody holds its user or tenant any */
	ck_assert_ptr_eq(executor_line_take(l, true), &b[0]); /* 4 held: the room is full */
	ck_assert(executor_line_tightened(l));
	ck_assert(!executor_line_tightened(l)); /* once */
	struct executor_line_item *waiting[4] = {NULL};
	executor_line_each_waiting(l, collect, waiting);
	ck_assert_ptr_eq(waiting[0], &b[1]); /* its tenant holds one */
	ck_assert_ptr_null(waiting[1]);      /* c holds none: it may still go */
	ck_assert_ptr_eq(executor_line_take(l, true), &c);
	ck_assert(executor_line_tightened(l));
	ck_assert_ptr_null(executor_line_take(l, true));
	ck_assert_ptr_eq(executor_line_take(l, false), &b[1]);
	/* An empty line has nobody to name. */
	ck_assert(!executor_line_tightened(l));
	executor_line_free(l);
}
END_TEST

/* A tenant reaching its bound leaves its next request in the line waiting. */
START_TEST(a_take_to_the_bound_names_the_owners_next)
{
	struct executor_line *l = line_of(2);
	struct executor_line_item a[3], other = {.tenant = 2, .uid = 1001};
	for (int i = 0; i < 3; i++) {
		a[i] = (struct executor_line_item){.tenant = 1, .uid = 1000};
		executor_line_push(l, &a[i]);
	}
	executor_line_push(l, &other);
	ck_assert_ptr_eq(executor_line_take(l, true), &a[0]);
	ck_assert(!executor_line_tightened(l));
	ck_assert_ptr_eq(executor_line_take(l, true), &a[1]);
	ck_assert(executor_line_tightened(l));
	struct executor_line_item *waiting[4] = {NULL};
	executor_line_each_waiting(l, collect, waiting);
	ck_assert_ptr_eq(waiting[0], &a[2]);
	ck_assert_ptr_null(waiting[1]);
	executor_line_free(l);
}
END_TEST

static Suite *executor_line_suite(void)
{
	Suite *s = suite_create("executor_line");
	TCase *tc = tcase_create("line");
	tcase_add_test(tc, items_go_in_arrival_order);
	tcase_add_test(tc, a_user_over_many_tenants_holds_at_most_the_bound);
	tcase_add_test(tc, a_tenant_holds_at_most_the_bound_and_root_is_bounded_per_tenant);
	tcase_add_test(tc, users_leave_and_others_keep_their_counts);
	tcase_add_test(tc, past_the_shared_room_only_owners_holding_none_go);
	tcase_add_test(tc, a_take_that_fills_the_room_names_who_waits_now);
	tcase_add_test(tc, a_take_to_the_bound_names_the_owners_next);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(executor_line_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
