/* Config parser: defaults, every key, and every kind of malformed input. */
#include "fusesched/config.h"

#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ERR_LEN 1024

/* Parses LEN bytes of TEXT as file "t.conf". */
static int load_bytes(const char *text, size_t len, struct config **cfg,
		      char *err)
{
	FILE *in = fmemopen((void *)text, len, "r");
	int rc;

	ck_assert_ptr_nonnull(in);
	rc = config_load_stream(in, "t.conf", cfg, err, ERR_LEN);
	fclose(in);
	return rc;
}

static int load(const char *text, struct config **cfg, char *err)
{
	return load_bytes(text, strlen(text), cfg, err);
}

/* Asserts TEXT is rejected with exactly MESSAGE. */
static void expect_error(const char *text, const char *message)
{
	struct config *cfg = (struct config *)1;
	char err[ERR_LEN];

	ck_assert_int_eq(load(text, &cfg, err), -EINVAL);
	ck_assert_ptr_null(cfg);
	ck_assert_str_eq(err, message);
}

START_TEST(empty_file_gives_defaults)
{
	struct config *cfg;
	char err[ERR_LEN];

	ck_assert_int_eq(load("", &cfg, err), 0);
	ck_assert_str_eq(err, "");
	ck_assert_int_eq(cfg->scheduler.policy, CONFIG_POLICY_BFQ);
	ck_assert_uint_eq(cfg->scheduler.max_inflight, 32);
	ck_assert(!cfg->scheduler.learn_depth);
	ck_assert_int_eq(cfg->scheduler.work_conserving, CONFIG_DOOR_AUTO);
	ck_assert_int_eq(cfg->scheduler.idle_mode, CONFIG_IDLE_AUTO);
	ck_assert_uint_eq(cfg->scheduler.budget_timeout_ms, 20);
	ck_assert_uint_eq(cfg->scheduler.busy_poll_us, 200);
	ck_assert_uint_eq(cfg->scheduler.reserve_ms, 1000);
	ck_assert_uint_eq(cfg->scheduler.default_weight, 100);
	ck_assert(cfg->scheduler.honor_cgroup_weights);
	ck_assert_uint_eq(cfg->scheduler.read_cost.iops, 0);
	ck_assert_uint_eq(cfg->scheduler.write_cost.iops, 0);
	ck_assert_uint_eq(cfg->scheduler.dsync_cost.iops, 0);
	ck_assert_int_eq(cfg->tenants.hierarchy, CONFIG_HIERARCHY_AUTO);
	ck_assert_uint_eq(cfg->tenants.cache_ttl_ms, 1000);
	ck_assert_uint_eq(cfg->tenants.retire_idle_ms, 60000);
	ck_assert_ptr_null(cfg->control.socket_path);
	ck_assert_ptr_null(cfg->control.group);
	ck_assert(!cfg->metrics.listen.set);
	ck_assert_uint_eq(cfg->group_count, 0);
	ck_assert_str_eq(cfg->source, "t.conf");
	config_free(cfg);

	/* comments, blanks, CRLF and a BOM are still "empty" */
	ck_assert_int_eq(load("\xef\xbb\xbf; only comments\r\n\r\n  # x\n\t\n",
			      &cfg, err), 0);
	ck_assert_uint_eq(cfg->scheduler.max_inflight, 32);
	config_free(cfg);
}
END_TEST

START_TEST(full_file_sets_every_key)
{
	static const char text[] =
		"[scheduler]\n"
		"policy = fifo            ; bfq | fifo\n"
		"max_inflight = 64\n"
		"learn_depth = yes\n"
		"work_conserving = no\n"
		"idle = 250\n"
		"budget_timeout_ms = 40\n"
		"busy_poll_us = 0\n"
		"reserve_ms = 0\n"
		"default_weight = 50\n"
		"honor_cgroup_weights = no\n"
		"read_cost = 53330 3337\n"
		"write_cost = 41188 3151\n"
		"dsync_cost = 9120 640\n"
		"\n"
		"[tenants]\n"
		"hierarchy = blkio\n"
		"cache_ttl_ms = 0\n"
		"retire_idle_ms = 5000\n"
		"\r\n"
		"[control]\r\n"
		"socket = /run/fs.sock\r\n"
		"group = fusesched\r\n"
		"[group \"/tenants/gold\"]\n"
		"weight = 800\n"
		"  [ group  \"/system.slice/docker-*.scope\" ] ; docker\n"
		"    weight=200\n"
		"[group \"/odd/[ab]]/\\\"q\\\\\"]\n"
		"weight = 1\n";
	struct config *cfg;
	char err[ERR_LEN];

	ck_assert_msg(load(text, &cfg, err) == 0, "%s", err);
	ck_assert_int_eq(cfg->scheduler.policy, CONFIG_POLICY_FIFO);
	ck_assert_uint_eq(cfg->scheduler.max_inflight, 64);
	ck_assert(cfg->scheduler.learn_depth);
	ck_assert_int_eq(cfg->scheduler.work_conserving, CONFIG_DOOR_NO);
	ck_assert_int_eq(cfg->scheduler.idle_mode, CONFIG_IDLE_FIXED);
	ck_assert_uint_eq(cfg->scheduler.idle_us, 250);
	ck_assert_uint_eq(cfg->scheduler.budget_timeout_ms, 40);
	ck_assert_uint_eq(cfg->scheduler.busy_poll_us, 0);
	ck_assert_uint_eq(cfg->scheduler.reserve_ms, 0);
	ck_assert_uint_eq(cfg->scheduler.default_weight, 50);
	ck_assert_uint_eq(cfg->scheduler.read_cost.iops, 53330);
	ck_assert_uint_eq(cfg->scheduler.read_cost.mb_per_s, 3337);
	ck_assert_uint_eq(cfg->scheduler.write_cost.iops, 41188);
	ck_assert_uint_eq(cfg->scheduler.write_cost.mb_per_s, 3151);
	ck_assert_uint_eq(cfg->scheduler.dsync_cost.iops, 9120);
	ck_assert_uint_eq(cfg->scheduler.dsync_cost.mb_per_s, 640);
	ck_assert(!cfg->scheduler.honor_cgroup_weights);
	ck_assert_int_eq(cfg->tenants.hierarchy, CONFIG_HIERARCHY_BLKIO);
	ck_assert_uint_eq(cfg->tenants.cache_ttl_ms, 0);
	ck_assert_uint_eq(cfg->tenants.retire_idle_ms, 5000);
	ck_assert_str_eq(cfg->control.socket_path, "/run/fs.sock");
	ck_assert_str_eq(cfg->control.group, "fusesched");
	ck_assert_uint_eq(cfg->group_count, 3);
	ck_assert_str_eq(cfg->groups[0].pattern, "/tenants/gold");
	ck_assert_uint_eq(cfg->groups[0].weight, 800);
	ck_assert_uint_eq(cfg->groups[0].line, 24);
	ck_assert_str_eq(cfg->groups[1].pattern, "/system.slice/docker-*.scope");
	ck_assert_uint_eq(cfg->groups[1].weight, 200);
	ck_assert_str_eq(cfg->groups[2].pattern, "/odd/[ab]]/\"q\\");
	config_free(cfg);
}
END_TEST

START_TEST(value_spellings)
{
	struct config *cfg;
	char err[ERR_LEN];

	ck_assert_int_eq(load("[scheduler]\nidle = off\nhonor_cgroup_weights = TRUE\npolicy = BFQ\n",
			      &cfg, err), 0);
	ck_assert_int_eq(cfg->scheduler.idle_mode, CONFIG_IDLE_OFF);
	ck_assert(cfg->scheduler.honor_cgroup_weights);
	ck_assert_int_eq(cfg->scheduler.policy, CONFIG_POLICY_BFQ);
	config_free(cfg);
	ck_assert_int_eq(load("[scheduler]\nmax_inflight = 0007\n[control]\nsocket = auto\n",
			      &cfg, err), 0);
	ck_assert_uint_eq(cfg->scheduler.max_inflight, 7);
	ck_assert_ptr_null(cfg->control.socket_path);
	config_free(cfg);
}
END_TEST

START_TEST(unknown_key_names_section_and_suggests)
{
	expect_error("[group \"/tenants/gold\"]\nwieght = 800\n",
		     "t.conf:2: unknown key 'wieght' in [group \"/tenants/gold\"] (did you mean 'weight'?)");
	expect_error("[scheduler]\n\nfoo = 1\n",
		     "t.conf:3: unknown key 'foo' in [scheduler]");
	expect_error("[tenants]\nweight = 1\n",
		     "t.conf:2: unknown key 'weight' in [tenants]");
	expect_error("policy = bfq\n",
		     "t.conf:1: key 'policy' outside any section (put it under [scheduler], [tenants], [control], [metrics] or [group \"PATTERN\"])");
	expect_error("[scheduler]\n = 3\n",
		     "t.conf:2: missing key name before '=' in [scheduler]");
}
END_TEST

START_TEST(out_of_range)
{
	expect_error("[group \"/tenants/gold\"]\nweight = 0\n",
		     "t.conf:2: weight must be 1..1000, got 0");
	expect_error("[group \"/a\"]\nweight = 1001\n",
		     "t.conf:2: weight must be 1..1000, got 1001");
	expect_error("[scheduler]\ndefault_weight = 0\n",
		     "t.conf:2: default_weight must be 1..1000, got 0");
	expect_error("[scheduler]\nmax_inflight = 4097\n",
		     "t.conf:2: max_inflight must be 1..4096, got 4097");
	expect_error("[scheduler]\nbusy_poll_us = 10001\n",
		     "t.conf:2: busy_poll_us must be 0..10000, got 10001");
	expect_error("[scheduler]\nreserve_ms = 60001\n",
		     "t.conf:2: reserve_ms must be 0..60000, got 60001");
	expect_error("[scheduler]\nidle = 0\n",
		     "t.conf:2: idle must be 1..1000000, got 0");
	expect_error("[tenants]\ncache_ttl_ms = 60001\n",
		     "t.conf:2: cache_ttl_ms must be 0..60000, got 60001");
}
END_TEST

START_TEST(bad_numbers)
{
	expect_error("[scheduler]\nmax_inflight = 12abc\n",
		     "t.conf:2: max_inflight: '12abc' is not a decimal number");
	expect_error("[scheduler]\nmax_inflight = -1\n",
		     "t.conf:2: max_inflight: '-1' is not a decimal number");
	expect_error("[scheduler]\nmax_inflight = +5\n",
		     "t.conf:2: max_inflight: '+5' is not a decimal number");
	expect_error("[scheduler]\nmax_inflight = 0x10\n",
		     "t.conf:2: max_inflight: '0x10' is not a decimal number");
	expect_error("[scheduler]\nmax_inflight = 1 2\n",
		     "t.conf:2: max_inflight: '1 2' is not a decimal number");
	expect_error("[scheduler]\nmax_inflight =\n",
		     "t.conf:2: max_inflight needs a value (1..4096)");
	/* overflow of 32 and 64 bits is out of range, not wrapped */
	expect_error("[scheduler]\nmax_inflight = 4294967328\n",
		     "t.conf:2: max_inflight must be 1..4096, got 4294967328");
	expect_error("[scheduler]\nmax_inflight = 99999999999999999999999\n",
		     "t.conf:2: max_inflight must be 1..4096, got 99999999999999999999999");
	expect_error("[scheduler]\nwrite_cost = 41188\n",
		     "t.conf:2: write_cost must be off or IOPS and MB/s, e.g. '40000 3000' (IOPS "
		     "1..100000000, MB/s 1..10000000; fusesched calibrate measures them), got '41188'");
	expect_error("[scheduler]\nread_cost = 0 3000\n",
		     "t.conf:2: read_cost must be off or IOPS and MB/s, e.g. '40000 3000' (IOPS "
		     "1..100000000, MB/s 1..10000000; fusesched calibrate measures them), got '0 3000'");
	expect_error("[scheduler]\nread_cost = 40000 3000 9\n",
		     "t.conf:2: read_cost must be off or IOPS and MB/s, e.g. '40000 3000' (IOPS "
		     "1..100000000, MB/s 1..10000000; fusesched calibrate measures them), got '40000 3000 9'");
	expect_error("[scheduler]\nread_cost = -4 3000\n",
		     "t.conf:2: read_cost must be off or IOPS and MB/s, e.g. '40000 3000' (IOPS "
		     "1..100000000, MB/s 1..10000000; fusesched calibrate measures them), got '-4 3000'");
	expect_error("[scheduler]\nidle = sometimes\n",
		     "t.conf:2: idle must be auto, off or microseconds (1..1000000), got 'sometimes'");
	expect_error("[scheduler]\nhonor_cgroup_weights = maybe\n",
		     "t.conf:2: honor_cgroup_weights must be yes or no, got 'maybe'");
	expect_error("[scheduler]\nwork_conserving = off\n",
		     "t.conf:2: work_conserving must be yes | no | auto, got 'off'");
	expect_error("[scheduler]\npolicy = cfq\n",
		     "t.conf:2: policy must be bfq | fifo, got 'cfq'");
	expect_error("[tenants]\nhierarchy = v1\n",
		     "t.conf:2: hierarchy must be auto | v2 | blkio, got 'v1'");
	expect_error("[control]\nsocket = run/x.sock\n",
		     "t.conf:2: socket must be auto or an absolute path, got 'run/x.sock'");
	expect_error("[control]\ngroup = a b\n",
		     "t.conf:2: group must be a group name or gid (up to 32 of A-Z a-z 0-9 . _ -), got 'a b'");
	/* '#' is not an inline comment: the value is wrong, not silently cut */
	expect_error("[scheduler]\npolicy = bfq # x\n",
		     "t.conf:2: policy must be bfq | fifo, got 'bfq # x'");
}
END_TEST

START_TEST(missing_equals)
{
	expect_error("[scheduler]\npolicy bfq\n",
		     "t.conf:2: expected 'key = value', missing '='");
	expect_error("[scheduler]\npolicy: bfq\n",
		     "t.conf:2: expected 'key = value', missing '='");
	expect_error("[scheduler]\npolicy ; = bfq\n",
		     "t.conf:2: expected 'key = value', missing '='");
}
END_TEST

START_TEST(duplicates)
{
	expect_error("[scheduler]\npolicy = bfq\n\npolicy = fifo\n",
		     "t.conf:4: duplicate key 'policy' in [scheduler] (first set at line 2)");
	expect_error("[group \"/a\"]\nweight = 1\nweight = 2\n",
		     "t.conf:3: duplicate key 'weight' in [group \"/a\"] (first set at line 2)");
	expect_error("[scheduler]\npolicy = bfq\n[tenants]\n[scheduler]\n",
		     "t.conf:4: duplicate section [scheduler] (first at line 1)");
	expect_error("[group \"/a\"]\nweight = 1\n[group \"/b\"]\nweight = 1\n[group \"/a\"]\nweight = 2\n",
		     "t.conf:5: duplicate [group \"/a\"] (first at line 1)");
}
END_TEST

START_TEST(bad_sections)
{
	expect_error("[schedular]\n",
		     "t.conf:1: unknown section [schedular] (known: [scheduler], [tenants], [control], [metrics], [group \"PATTERN\"])");
	expect_error("[scheduler\npolicy = bfq\n",
		     "t.conf:1: malformed section header: expected [name] or [group \"PATTERN\"]");
	expect_error("[group \"/a]\n",
		     "t.conf:1: unterminated quoted pattern in section header");
	expect_error("[scheduler] x\n",
		     "t.conf:1: unexpected text after ']': 'x'");
	expect_error("[group]\nweight = 1\n",
		     "t.conf:1: [group] needs a quoted pattern: [group \"/cgroup/path-or-glob*\"]");
	expect_error("[group \"tenants/*\"]\n",
		     "t.conf:1: group pattern must be an absolute cgroup path starting with '/', got \"tenants/*\"");
	expect_error("[scheduler \"/x\"]\n",
		     "t.conf:1: section [scheduler] takes no pattern");
	/* ** only as a whole component */
	expect_error("[group \"/a**b\"]\nweight = 1\n",
		     "t.conf:1: group pattern \"/a**b\": ** must be a whole path component (as in \"/a/**/b\"), got \"a**b\"");
	expect_error("[scheduler]\n[group \"/x/**/***\"]\nweight = 1\n",
		     "t.conf:2: group pattern \"/x/**/***\": ** must be a whole path component (as in \"/a/**/b\"), got \"***\"");
	expect_error("[group \"/**x/y\"]\nweight = 1\n",
		     "t.conf:1: group pattern \"/**x/y\": ** must be a whole path component (as in \"/a/**/b\"), got \"**x\"");
	/* a group without a weight is reported at its header, at the next
	 * header or at the end of the file */
	expect_error("[group \"/a\"]\n; nothing\n[scheduler]\n",
		     "t.conf:1: [group \"/a\"] has no weight (weight = 1..1000)");
	expect_error("[scheduler]\n[group \"/a\"]\n",
		     "t.conf:2: [group \"/a\"] has no weight (weight = 1..1000)");
}
END_TEST

START_TEST(group_patterns_and_account)
{
	struct config *cfg;
	char err[ERR_LEN];

	ck_assert_msg(load("[group \"/**\"]\nweight = 1\n"
			   "[group \"/a/**/b*/**\"]\nweight = 2\naccount = subtree\n"
			   "[group \"/c/*\"]\naccount = SubTree\nweight = 3\n"
			   "[group \"/d\"]\nweight = 4\naccount = cgroup\n",
			   &cfg, err) == 0, "%s", err);
	ck_assert_uint_eq(cfg->group_count, 4);
	ck_assert_int_eq(cfg->groups[0].account, CONFIG_ACCOUNT_CGROUP);
	ck_assert_str_eq(cfg->groups[1].pattern, "/a/**/b*/**");
	ck_assert_int_eq(cfg->groups[1].account, CONFIG_ACCOUNT_SUBTREE);
	ck_assert_int_eq(cfg->groups[2].account, CONFIG_ACCOUNT_SUBTREE);
	ck_assert_int_eq(cfg->groups[3].account, CONFIG_ACCOUNT_CGROUP);
	config_free(cfg);

	expect_error("[group \"/a\"]\nweight = 1\naccount = pod\n",
		     "t.conf:3: account must be cgroup | subtree, got 'pod'");
	expect_error("[group \"/a\"]\naccount = subtree\naccount = cgroup\nweight = 1\n",
		     "t.conf:3: duplicate key 'account' in [group \"/a\"] (first set at line 2)");
	expect_error("[scheduler]\naccount = subtree\n",
		     "t.conf:2: unknown key 'account' in [scheduler]");
	/* a weight is still required */
	expect_error("[group \"/a\"]\naccount = subtree\n",
		     "t.conf:1: [group \"/a\"] has no weight (weight = 1..1000)");
}
END_TEST

START_TEST(long_lines)
{
	size_t n = CONFIG_LINE_MAX + 100;
	char *text = malloc(n + 64);
	struct config *cfg;
	char err[ERR_LEN];

	/* a long comment is fine up to the limit */
	memset(text, ';', CONFIG_LINE_MAX);
	strcpy(text + CONFIG_LINE_MAX, "\n[scheduler]\n");
	ck_assert_int_eq(load(text, &cfg, err), 0);
	config_free(cfg);

	memset(text, ';', n);
	strcpy(text + n, "\n");
	memcpy(text, "[scheduler]\n", 12);
	expect_error(text, "t.conf:2: line too long (more than 4096 bytes)");

	/* long glob patterns are fine (inih alone would truncate at 50) */
	strcpy(text, "[group \"/");
	memset(text + 9, 'x', 300);
	strcpy(text + 309, "*\"]\nweight = 5\n");
	ck_assert_msg(load(text, &cfg, err) == 0, "%s", err);
	ck_assert_uint_eq(strlen(cfg->groups[0].pattern), 302);
	config_free(cfg);

	/* key lines go through inih's 200-byte buffer */
	strcpy(text, "[control]\nsocket = /");
	memset(text + 20, 'x', 200);
	strcpy(text + 220, "\n");
	expect_error(text,
		     "t.conf:2: key = value line too long (at most 198 bytes)");
	free(text);
}
END_TEST

START_TEST(binary_garbage)
{
	static const char nul[] = "[scheduler]\npolicy = b\0fq\n";
	struct config *cfg;
	char err[ERR_LEN];
	char noise[4096];
	uint32_t x = 12345;

	ck_assert_int_eq(load_bytes(nul, sizeof(nul) - 1, &cfg, err), -EINVAL);
	ck_assert_str_eq(err, "t.conf:2: NUL byte (binary file?) at column 11");
	expect_error("[scheduler]\n; caf\xc3\n",
		     "t.conf:2: invalid UTF-8 at column 6");
	expect_error("; \xff\n", "t.conf:1: invalid UTF-8 at column 3");
	expect_error("; \xc0\xaf overlong\n", "t.conf:1: invalid UTF-8 at column 3");
	expect_error("; \xed\xa0\x80 surrogate\n",
		     "t.conf:1: invalid UTF-8 at column 3");
	expect_error("[scheduler]\x1b[0m\n", "t.conf:1: control character at column 12");
	/* valid UTF-8 in comments and patterns is fine */
	ck_assert_int_eq(load("; caf\xc3\xa9 \xf0\x9f\x98\x80\n[group \"/t\xc3\xa9\"]\nweight = 3\n",
			      &cfg, err), 0);
	config_free(cfg);

	for (size_t i = 0; i < sizeof(noise); i++) {
		x = x * 1103515245u + 12345u;
		noise[i] = (char)(x >> 16);
	}
	ck_assert_int_eq(load_bytes(noise, sizeof(noise), &cfg, err), -EINVAL);
	ck_assert_ptr_null(cfg);
	ck_assert_msg(strncmp(err, "t.conf:", 7) == 0, "%s", err);
}
END_TEST

START_TEST(indented_key_is_not_a_continuation)
{
	struct config *cfg;
	char err[ERR_LEN];

	/* inih would append "  max_inflight = 8" to policy's value */
	ck_assert_int_eq(load("[scheduler]\npolicy = fifo\n  max_inflight = 8\n",
			      &cfg, err), 0);
	ck_assert_int_eq(cfg->scheduler.policy, CONFIG_POLICY_FIFO);
	ck_assert_uint_eq(cfg->scheduler.max_inflight, 8);
	config_free(cfg);
}
END_TEST

START_TEST(print_round_trips)
{
	static const char text[] =
		"[scheduler]\nidle = 300\nhonor_cgroup_weights = off\nwrite_cost = 41188 3151\n"
		"[control]\ngroup = 1000\n"
		"[group \"/a\\\"b\"]\nweight = 7\n[group \"/c/*\"]\nweight = 9\n"
		"[group \"/k/**/p*\"]\naccount = subtree\nweight = 8\n";
	struct config *cfg, *again;
	char err[ERR_LEN], *out1, *out2;
	size_t len1, len2;
	FILE *mem;

	ck_assert_int_eq(load(text, &cfg, err), 0);
	mem = open_memstream(&out1, &len1);
	ck_assert_int_eq(config_print(cfg, mem), 0);
	fclose(mem);
	ck_assert_ptr_nonnull(strstr(out1, "\n[scheduler]\npolicy = bfq\nmax_inflight = 32\nlearn_depth = no\nwork_conserving = auto\nidle = 300\n"));
	ck_assert_ptr_nonnull(strstr(out1, "honor_cgroup_weights = no\nread_cost = off\nwrite_cost = 41188 3151\n"));
	ck_assert_ptr_nonnull(strstr(out1, "socket = auto\ngroup = 1000\n"));
	ck_assert_ptr_nonnull(strstr(out1, "[group \"/a\\\"b\"]\nweight = 7\naccount = cgroup\n"));
	ck_assert_ptr_nonnull(strstr(out1, "[group \"/k/**/p*\"]\nweight = 8\naccount = subtree\n"));

	ck_assert_msg(load(out1, &again, err) == 0, "%s\n%s", err, out1);
	ck_assert_str_eq(again->groups[0].pattern, "/a\"b");
	ck_assert_uint_eq(again->groups[1].weight, 9);
	ck_assert_int_eq(again->groups[1].account, CONFIG_ACCOUNT_CGROUP);
	ck_assert_int_eq(again->groups[2].account, CONFIG_ACCOUNT_SUBTREE);
	mem = open_memstream(&out2, &len2);
	ck_assert_int_eq(config_print(again, mem), 0);
	fclose(mem);
	ck_assert_str_eq(out1, out2);
	free(out1);
	free(out2);
	config_free(cfg);
	config_free(again);

	/* the defaults print and re-parse too (group unset is a comment) */
	ck_assert_int_eq(config_new_default(&cfg), 0);
	mem = open_memstream(&out1, &len1);
	ck_assert_int_eq(config_print(cfg, mem), 0);
	fclose(mem);
	ck_assert_ptr_nonnull(strstr(out1, "; group is not set"));
	ck_assert_int_eq(load(out1, &again, err), 0);
	free(out1);
	config_free(cfg);
	config_free(again);
}
END_TEST

START_TEST(load_file_errors)
{
	struct config *cfg = (struct config *)1;
	char err[ERR_LEN], path[] = "/tmp/fusesched-test-XXXXXX";
	int fd;

	ck_assert_int_eq(config_load_file("/nonexistent/x.conf", &cfg, err,
					  sizeof(err)), -ENOENT);
	ck_assert_ptr_null(cfg);
	ck_assert_str_eq(err, "/nonexistent/x.conf: No such file or directory");

	fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, "[tenants]\nhierarchy = v2\n[x]\n", 29), 29);
	close(fd);
	ck_assert_int_eq(config_load_file(path, &cfg, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, ":3: unknown section [x]"));
	ck_assert_int_eq(strncmp(err, path, strlen(path)), 0);
	/* a tiny buffer truncates the message but never overflows */
	ck_assert_int_eq(config_load_file(path, &cfg, err, 8), -EINVAL);
	ck_assert_uint_eq(strlen(err), 7);
	unlink(path);
}
END_TEST

START_TEST(example_file_parses)
{
	struct config *cfg;
	char err[ERR_LEN];

	ck_assert_msg(config_load_file(EXAMPLE_CONF, &cfg, err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_uint_eq(cfg->group_count, 2);
	ck_assert_str_eq(cfg->groups[0].pattern, "/tenants/gold");
	ck_assert_uint_eq(cfg->groups[0].weight, 800);
	config_free(cfg);
}
END_TEST

/* TEXT parses to listen address WANT (as config_format_listen writes it). */
static void expect_listen(const char *text, const char *want)
{
	struct config_listen l;
	char msg[256], got[128];

	ck_assert_msg(config_parse_listen(text, &l, msg, sizeof(msg)) == 0,
		      "'%s': %s", text, msg);
	config_format_listen(&l, got, sizeof(got));
	ck_assert_msg(strcmp(got, want) == 0, "'%s' -> '%s', want '%s'", text,
		      got, want);
	ck_assert(l.set == (want[0] != '\0'));
}

/* TEXT is refused with a message holding WANT. */
static void expect_listen_error(const char *text, const char *want)
{
	struct config_listen l;
	char msg[256];

	l.set = true;
	ck_assert_msg(config_parse_listen(text, &l, msg, sizeof(msg)) == -EINVAL,
		      "'%s' accepted", text);
	ck_assert(!l.set);
	ck_assert_msg(strstr(msg, want) != NULL, "'%s': '%s' lacks '%s'", text,
		      msg, want);
}

START_TEST(listen_address_parser)
{
	struct config_listen l;
	char msg[256];

	expect_listen("", "");
	/* PORT alone is loopback: enabling the listener exposes nothing */
	expect_listen("9101", "127.0.0.1:9101");
	expect_listen("127.0.0.1:9101", "127.0.0.1:9101");
	expect_listen("localhost:1", "127.0.0.1:1");
	expect_listen("0.0.0.0:65535", "0.0.0.0:65535");
	expect_listen("10.1.2.3:80", "10.1.2.3:80");
	expect_listen("[::1]:9101", "[::1]:9101");
	expect_listen("[::]:9101", "[::]:9101");
	expect_listen("[0:0:0:0:0:0:0:1]:9101", "[::1]:9101");
	expect_listen("00009101", "127.0.0.1:9101");

	/* the address itself, ready for bind(2) */
	ck_assert_int_eq(config_parse_listen("[::1]:443", &l, msg, sizeof(msg)), 0);
	ck_assert_int_eq(l.addr.ss_family, AF_INET6);
	ck_assert_uint_eq(l.addr_len, sizeof(struct sockaddr_in6));
	ck_assert_uint_eq(ntohs(((struct sockaddr_in6 *)&l.addr)->sin6_port), 443);
	ck_assert(IN6_IS_ADDR_LOOPBACK(&((struct sockaddr_in6 *)&l.addr)->sin6_addr));
	ck_assert_int_eq(config_parse_listen("9101", &l, msg, sizeof(msg)), 0);
	ck_assert_int_eq(l.addr.ss_family, AF_INET);
	ck_assert_uint_eq(l.addr_len, sizeof(struct sockaddr_in));
	ck_assert_uint_eq(ntohl(((struct sockaddr_in *)&l.addr)->sin_addr.s_addr),
			  INADDR_LOOPBACK);
	ck_assert_uint_eq(ntohs(((struct sockaddr_in *)&l.addr)->sin_port), 9101);

	expect_listen_error("0", "port must be 1..65535, got '0'");
	expect_listen_error("65536", "port must be 1..65535, got '65536'");
	expect_listen_error("127.0.0.1:99999999999999999999",
			    "port must be 1..65535");
	expect_listen_error("127.0.0.1:", "port must be a number");
	expect_listen_error("127.0.0.1:http", "port must be a number");
	expect_listen_error("127.0.0.1:-1", "port must be a number");
	expect_listen_error("127.0.0.1: 9101", "port must be a number");
	expect_listen_error("abc", "listen must be empty (no listener), PORT");
	expect_listen_error(":9101", "listen must be");
	expect_listen_error("[::1]", "listen must be");
	expect_listen_error("[::1:9101", "listen must be");
	expect_listen_error("[]:9101", "listen must be");
	expect_listen_error("::1:9101", "an IPv6 address goes in brackets");
	expect_listen_error("example.com:9101", "'example.com' is not a numeric IPv4 address");
	expect_listen_error("256.0.0.1:9101", "not a numeric IPv4 address");
	expect_listen_error("1.2.3:9101", "not a numeric IPv4 address");
	expect_listen_error("[127.0.0.1]:9101", "'127.0.0.1' is not a numeric IPv6 address");
	expect_listen_error("[fe80::1%eth0]:9101", "not a numeric IPv6 address");
	expect_listen_error("[::1]x:9101", "listen must be");
}
END_TEST

/* In the file: a section of its own, errors at their line. */
START_TEST(metrics_section)
{
	struct config *cfg;
	char err[ERR_LEN];
	char *out;
	size_t len;
	FILE *mem;

	expect_error("[scheduler]\n[metrics]\n\nlisten = 127.0.0.1:0\n",
		     "t.conf:4: listen: port must be 1..65535, got '0'");
	expect_error("[metrics]\nlisten = [::1]\n",
		     "t.conf:2: listen must be empty (no listener), PORT (on 127.0.0.1), IPV4:PORT or [IPV6]:PORT, got '[::1]'");
	expect_error("[metrics]\nlisen = 9101\n",
		     "t.conf:2: unknown key 'lisen' in [metrics] (did you mean 'listen'?)");
	expect_error("[metrics]\nlisten =\nlisten = 9102\n",
		     "t.conf:3: duplicate key 'listen' in [metrics] (first set at line 2)");
	expect_error("[metrics]\n[metrics]\n",
		     "t.conf:2: duplicate section [metrics] (first at line 1)");

	/* empty is off, and prints as a comment that parses back to off */
	ck_assert_int_eq(load("[metrics]\nlisten =\n", &cfg, err), 0);
	ck_assert(!cfg->metrics.listen.set);
	mem = open_memstream(&out, &len);
	ck_assert_int_eq(config_print(cfg, mem), 0);
	fclose(mem);
	ck_assert_ptr_nonnull(strstr(out, "\n[metrics]\n; listen is not set: no metrics HTTP listener\n"));
	free(out);
	config_free(cfg);

#ifdef FUSESCHED_HAVE_MICROHTTPD
	ck_assert_msg(load("[metrics]\nlisten = [::1]:9101 ; scrape me\n", &cfg, err) == 0,
		      "%s", err);
	ck_assert(cfg->metrics.listen.set);
	mem = open_memstream(&out, &len);
	ck_assert_int_eq(config_print(cfg, mem), 0);
	fclose(mem);
	ck_assert_ptr_nonnull(strstr(out, "\n[metrics]\nlisten = [::1]:9101\n"));
	free(out);
	config_free(cfg);
#else
	/* a build without the listener refuses to enable it, naming the setting */
	expect_error("[metrics]\nlisten = 9101\n",
		     "t.conf:2: [metrics] listen = 9101: this fusesched was built without the metrics HTTP listener (libmicrohttpd was missing); remove the setting, or rebuild with libmicrohttpd-dev installed");
#endif
}
END_TEST

static Suite *config_suite(void)
{
	Suite *s = suite_create("config");
	TCase *tc = tcase_create("parse");

	tcase_add_test(tc, empty_file_gives_defaults);
	tcase_add_test(tc, full_file_sets_every_key);
	tcase_add_test(tc, value_spellings);
	tcase_add_test(tc, unknown_key_names_section_and_suggests);
	tcase_add_test(tc, out_of_range);
	tcase_add_test(tc, bad_numbers);
	tcase_add_test(tc, missing_equals);
	tcase_add_test(tc, duplicates);
	tcase_add_test(tc, bad_sections);
	tcase_add_test(tc, group_patterns_and_account);
	tcase_add_test(tc, long_lines);
	tcase_add_test(tc, binary_garbage);
	tcase_add_test(tc, indented_key_is_not_a_continuation);
	tcase_add_test(tc, print_round_trips);
	tcase_add_test(tc, load_file_errors);
	tcase_add_test(tc, example_file_parses);
	tcase_add_test(tc, listen_address_parser);
	tcase_add_test(tc, metrics_section);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(config_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
