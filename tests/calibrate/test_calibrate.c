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
	const struct calibrate_measure *m[] = { &r.read_iops,  &r.read_mb_per_s, &r.write_iops,
						&r.write_mb_per_s, &r.dsync_iops,   &r.dsync_mb_per_s };
	for (int i = 0; i < 6; i++) {
		ck_assert_uint_gt(m[i]->median, 1);
		ck_assert_uint_le(m[i]->low, m[i]->median);
		ck_assert_uint_le(m[i]->median, m[i]->high);
	}
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
	ck_assert_uint_eq(cfg->scheduler.read_cost.iops, r.read_iops.median);
	ck_assert_uint_eq(cfg->scheduler.read_cost.mb_per_s, r.read_mb_per_s.median);
	ck_assert_uint_eq(cfg->scheduler.write_cost.iops, r.write_iops.median);
	ck_assert_uint_eq(cfg->scheduler.write_cost.mb_per_s, r.write_mb_per_s.median);
	ck_assert_uint_eq(cfg->scheduler.dsync_cost.iops, r.dsync_iops.median);
	ck_assert_uint_eq(cfg->scheduler.dsync_cost.mb_per_s, r.dsync_mb_per_s.median);
	config_free(cfg);
}
END_TEST

static char *printed(const struct calibrate_result *r)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	calibrate_print("/backing", r, f);
	fclose(f);
	return text;
}

/* The medians go to the config lines; rounds further apart than half
 * are named, so a calibration disturbed by other I/O is not taken on trust. */
START_TEST(the_medians_are_printed_and_unsteady_rounds_named)
{
	struct calibrate_result r = {
		.direct = true, .seconds = 2,
		.read_iops = { 50000, 48000, 52000 }, .read_mb_per_s = { 3300, 3200, 3400 },
		.write_iops = { 40000, 39000, 41000 }, .write_mb_per_s = { 3100, 3000, 3200 },
		.dsync_iops = { 9000, 8800, 9100 }, .dsync_mb_per_s = { 1500, 1400, 1600 },
	};
	char *text = printed(&r);
	ck_assert_msg(strstr(text, "read_cost = 50000 3300\nwrite_cost = 40000 3100\n"
				   "dsync_cost = 9000 1500\n"),
		      "%s", text);
	ck_assert_msg(strstr(text, "(rounds 48000-52000)"), "%s", text);
	ck_assert_msg(!strstr(text, "Measure again"), "%s", text);
	free(text);
	r.write_mb_per_s.low = 2000;	/* the highest round 1.6 times the lowest */
	text = printed(&r);
	ck_assert_msg(strstr(text, "Measure again"), "%s", text);
	ck_assert_msg(strstr(text, "write_cost = 40000 3100\n"), "%s", text);
	free(text);
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
	tcase_add_test(tc, the_medians_are_printed_and_unsteady_rounds_named);
	suite_add_tcase(s, tc);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
