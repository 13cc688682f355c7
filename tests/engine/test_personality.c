/*
 * Ring personalities: one per opener credential set, shared and counted,
 * idle ones bounded, and the ring really acting with them.
 */
#include "fusesched/personality.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static struct io_uring ring;

static void ring_up(void)
{
	ck_assert_int_eq(io_uring_queue_init(8, &ring, 0), 0);
}

static void ring_down(void)
{
	io_uring_queue_exit(&ring);
}

static struct creds user(uid_t uid)
{
	struct creds c = {.uid = uid, .gid = uid, .group_count = 1, .groups = {uid + 1000}};
	return c;
}

START_TEST(one_personality_per_credential_set)
{
	struct personality_cache *pc;
	ck_assert_int_eq(personality_cache_new(&ring, 4, 16, 16, 1, &pc), 0);
	struct creds root = {0};
	ck_assert_int_eq(personality_get(pc, &root, 0), 0); /* root needs none */
	struct creds a = user(2001), b = user(2002), a_other_groups = user(2001);
	a_other_groups.groups[0] = 5000;
	int id_a = personality_get(pc, &a, 0);
	ck_assert_int_gt(id_a, 0);
	ck_assert_int_eq(personality_get(pc, &a, 0), id_a);
	int id_b = personality_get(pc, &b, 0);
	int id_c = personality_get(pc, &a_other_groups, 0);
	ck_assert_int_gt(id_b, 0);
	ck_assert_int_gt(id_c, 0);
	ck_assert_int_ne(id_a, id_b);
	ck_assert_int_ne(id_a, id_c);
	/* The same ids keeping CAP_FSETID are a set of their own. */
	struct creds a_keeping = a;
	a_keeping.keep_fsetid = true;
	int id_k = personality_get(pc, &a_keeping, 0);
	ck_assert_int_gt(id_k, 0);
	ck_assert_int_ne(id_k, id_a);
	ck_assert_uint_eq(personality_count(pc), 4);
	personality_put(pc, id_a);
	personality_put(pc, id_a);
	personality_put(pc, id_b);
	personality_put(pc, id_c);
	personality_put(pc, id_k);
	ck_assert_uint_eq(personality_count(pc), 4); /* idle, kept: under idle_max */
	ck_assert_int_eq(personality_get(pc, &a, 0), id_a); /* reused, not registered again */
	personality_put(pc, id_a);
	personality_cache_free(pc);
}
END_TEST

START_TEST(idle_and_live_sets_are_bounded)
{
	struct personality_cache *pc;
	ck_assert_int_eq(personality_cache_new(&ring, 2, 3, 3, 1, &pc), 0);
	int ids[3];
	for (int i = 0; i < 3; i++) {
		struct creds c = user(3000 + (uid_t)i);
		ids[i] = personality_get(pc, &c, 0);
		ck_assert_int_gt(ids[i], 0);
	}
	struct creds fourth = user(3003);
	ck_assert_int_eq(personality_get(pc, &fourth, 0), -ENFILE);
	for (int i = 0; i < 3; i++)
		personality_put(pc, ids[i]);
	ck_assert_uint_eq(personality_count(pc), 2); /* the longest idle went */
	/* The unregistered id is gone from the ring: a request naming it fails. */
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_nop(sqe);
	sqe->personality = (unsigned short)ids[0];
	ck_assert_int_eq(io_uring_submit(&ring), 1);
	struct io_uring_cqe *cqe;
	ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
	ck_assert_int_eq(cqe->res, -EINVAL);
	io_uring_cqe_seen(&ring, cqe);
	ck_assert_int_gt(personality_get(pc, &fourth, 0), 0);
	personality_cache_free(pc);
}
END_TEST

/*
 * One owner (tenant) cycling through credential sets stops at its share of
 * the live ones with EMFILE; another owner still gets its own, and a set
 * the first owner already uses stays shared.
 */
START_TEST(one_owner_cannot_take_every_live_set)
{
	struct personality_cache *pc;
	ck_assert_int_eq(personality_cache_new(&ring, 0, 16, 2, 4, &pc), 0);
	struct creds a = user(5001), b = user(5002), c = user(5003), d = user(5004);
	int id_a = personality_get(pc, &a, 1), id_b = personality_get(pc, &b, 1);
	ck_assert_int_gt(id_a, 0);
	ck_assert_int_gt(id_b, 0);
	ck_assert_int_eq(personality_get(pc, &c, 1), -EMFILE);
	ck_assert_int_eq(personality_get(pc, &a, 1), id_a); /* already live: shared */
	int id_d = personality_get(pc, &d, 2);
	ck_assert_int_gt(id_d, 0);
	ck_assert_int_eq(personality_get(pc, &a, 2), id_a); /* another owner shares it */
	/* Closed, its sets count no more: the owner may make a new one live. */
	personality_put(pc, id_b);
	int id_c = personality_get(pc, &c, 1);
	ck_assert_int_gt(id_c, 0);
	personality_put(pc, id_c);
	personality_put(pc, id_d);
	personality_put(pc, id_a);
	personality_put(pc, id_a);
	personality_put(pc, id_a);
	ck_assert_uint_eq(personality_count(pc), 0); /* idle_max 0: all unregistered */
	personality_cache_free(pc);
}
END_TEST

/* An open through the ring as the personality: refused where only root may read. */
static int ring_open(const char *path, int personality)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&ring);
	io_uring_prep_openat(sqe, AT_FDCWD, path, O_RDONLY, 0);
	sqe->personality = (unsigned short)personality;
	ck_assert_int_eq(io_uring_submit(&ring), 1);
	struct io_uring_cqe *cqe;
	ck_assert_int_eq(io_uring_wait_cqe(&ring, &cqe), 0);
	int res = cqe->res;
	io_uring_cqe_seen(&ring, cqe);
	if (res >= 0)
		close(res);
	return res < 0 ? res : 0;
}

START_TEST(the_ring_acts_with_the_credentials)
{
	char dir[] = "/tmp/personality-XXXXXX";
	ck_assert_ptr_nonnull(mkdtemp(dir));
	chmod(dir, 0755);
	char root_only[64], group_readable[64];
	snprintf(root_only, sizeof(root_only), "%s/root-only", dir);
	snprintf(group_readable, sizeof(group_readable), "%s/group", dir);
	int fd = open(root_only, O_CREAT | O_WRONLY, 0600);
	ck_assert_int_ge(fd, 0);
	close(fd);
	fd = open(group_readable, O_CREAT | O_WRONLY, 0640);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(chown(group_readable, 0, 3001 + 1000), 0);
	struct personality_cache *pc;
	ck_assert_int_eq(personality_cache_new(&ring, 4, 16, 16, 1, &pc), 0);
	struct creds u = user(3001); /* supplementary group 4001 */
	int id = personality_get(pc, &u, 0);
	ck_assert_int_gt(id, 0);
	ck_assert_int_eq(ring_open(root_only, 0), 0);
	ck_assert_int_eq(ring_open(root_only, id), -EACCES);
	ck_assert_int_eq(ring_open(group_readable, id), 0); /* through the supplementary group */
	personality_put(pc, id);
	personality_cache_free(pc);
	unlink(root_only);
	unlink(group_readable);
	rmdir(dir);
}
END_TEST

static Suite *personality_suite(void)
{
	Suite *s = suite_create("personality");
	TCase *tc = tcase_create("ring");
	tcase_add_checked_fixture(tc, ring_up, ring_down);
	tcase_add_test(tc, one_personality_per_credential_set);
	tcase_add_test(tc, idle_and_live_sets_are_bounded);
	tcase_add_test(tc, one_owner_cannot_take_every_live_set);
	tcase_add_test(tc, the_ring_acts_with_the_credentials);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("personality", "registers other users' credentials");
	SRunner *sr = srunner_create(personality_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
