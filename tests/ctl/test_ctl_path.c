/* Socket names derived from mountpoints: readable, distinct, bounded. */
#include "fusesched/ctl.h"

#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/un.h>

static const char *name_of(const char *mnt)
{
	static char out[4][sizeof(((struct sockaddr_un *)0)->sun_path)];
	static int next;
	char *p = out[next++ % 4];
	ck_assert_int_eq(ctl_socket_path_for_mount(mnt, p, sizeof(out[0])), 0);
	return p;
}

START_TEST(plain_paths_read_like_systemd_escape)
{
	ck_assert_str_eq(name_of("/mnt/shared"), "/run/fusesched/mnt-shared.sock");
	ck_assert_str_eq(name_of("/"), "/run/fusesched/-.sock");
	ck_assert_str_eq(name_of("/srv/a b"), "/run/fusesched/srv-a\\x20b.sock");
	ck_assert_str_eq(name_of("/.hidden/x"), "/run/fusesched/\\x2ehidden-x.sock");
}
END_TEST

START_TEST(dashes_and_slashes_do_not_collide)
{
	ck_assert_str_ne(name_of("/a-b"), name_of("/a/b"));
	ck_assert_str_ne(name_of("/a\\x2db"), name_of("/a-b"));
}
END_TEST

START_TEST(long_paths_are_cut_with_a_hash_and_stay_distinct)
{
	char a[600], b[600];
	memset(a, 'x', sizeof(a));
	a[0] = '/';
	a[sizeof(a) - 1] = '\0';
	memcpy(b, a, sizeof(b));
	b[sizeof(b) - 2] = 'y'; /* differs only past the cut */
	const char *na = name_of(a), *nb = name_of(b);
	ck_assert_uint_lt(strlen(na), sizeof(((struct sockaddr_un *)0)->sun_path));
	ck_assert_ptr_nonnull(strchr(na, '~'));
	ck_assert_str_ne(na, nb);
	ck_assert_str_eq(name_of(a), na); /* stable */
}
END_TEST

START_TEST(relative_and_too_small_are_errors)
{
	char out[200];
	ck_assert_int_eq(ctl_socket_path_for_mount("mnt", out, sizeof(out)), -EINVAL);
	ck_assert_int_eq(ctl_socket_path_for_mount("/mnt/shared", out, 10), -ENAMETOOLONG);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctl_path");
	TCase *tc = tcase_create("names");
	tcase_add_test(tc, plain_paths_read_like_systemd_escape);
	tcase_add_test(tc, dashes_and_slashes_do_not_collide);
	tcase_add_test(tc, long_paths_are_cut_with_a_hash_and_stay_distinct);
	tcase_add_test(tc, relative_and_too_small_are_errors);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
