/* fusesched calibrate: the four numbers measured on a real directory, nothing
 * left behind, and printed as lines the config parser takes back. */
#include "fusesched/calibrate.h"
#include "fusesched/config.h"

#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[] = "/var/tmp/fusesched-calibrate-test.XXXXXX";

static void setup(void)
{
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	rmdir(dir);
}

static unsigned entries(const char *path)
{
	DIR *d = opendir(path);
	ck_assert_ptr_nonnull(d);
	unsigned n = 0;
	for (struct dirent *e; (e = readdir(d));)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

START_TEST(measures_and_prints_what_the_config_takes)
{
	struct calibrate_result r;
	char err[512] = "";
	ck_assert_msg(calibrate_store(dir, 0.2, &r, err, sizeof(err)) == 0, "%s", err);
	ck_assert_uint_gt(r.read_iops, 1);
	ck_assert_uint_gt(r.write_iops, 1);
	ck_assert_uint_gt(r.read_mb_per_s, 1);
	ck_assert_uint_gt(r.write_mb_per_s, 1);
	ck_assert_uint_eq(entries(dir), 0);	/* the scratch file went with its descriptor */

	char path[128];
	snprintf(path, sizeof(path), "%s.conf", dir);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs("[scheduler]\n", f);
	calibrate_print(dir, &r, f);
	fclose(f);
	struct config *cfg = NULL;
	ck_assert_msg(config_load_file(path, &cfg, err, sizeof(err)) == 0, "%s", err);
	unlink(path);
	ck_assert_uint_eq(cfg->scheduler.read_cost.iops, r.read_iops);
	ck_assert_uint_eq(cfg->scheduler.read_cost.mb_per_s, r.read_mb_per_s);
	ck_assert_uint_eq(cfg->scheduler.write_cost.iops, r.write_iops);
	ck_assert_uint_eq(cfg->scheduler.write_cost.mb_per_s, r.write_mb_per_s);
	config_free(cfg);
}
END_TEST

START_TEST(a_missing_directory_is_named)
{
	struct calibrate_result r;
	char err[512] = "", missing[128];
	snprintf(missing, sizeof(missing), "%s/not-there", dir);
	ck_assert_int_eq(calibrate_store(missing, 0.2, &r, err, sizeof(err)), -ENOENT);
	ck_assert_msg(strstr(err, missing) && strstr(err, "No such file"), "%s", err);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("calibrate");
	TCase *tc = tcase_create("store");
	tcase_add_checked_fixture(tc, setup, teardown);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, measures_and_prints_what_the_config_takes);
	tcase_add_test(tc, a_missing_directory_is_named);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
