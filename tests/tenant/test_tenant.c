/* Tenant building blocks on fixtures, and the table against a fake /proc
 * and a fake cgroup tree (time is an argument, so TTLs are exact). */
#include "fusesched/tenant.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_tree.h"

#define MS 1000000ull

static struct config *config_from(const char *text)
{
	char err[512];
	struct config *cfg;
	FILE *in = fmemopen((void *)text, strlen(text), "r");

	ck_assert_msg(config_load_stream(in, "test", &cfg, err, sizeof(err)) == 0,
		      "%s", err);
	fclose(in);
	return cfg;
}

/* Parses fixture NAME and returns the key selected for MODE ("" if none). */
static const char *key_of(const char *name, enum config_hierarchy mode,
			  int *hier)
{
	static char key_buf[4096];
	struct tenant_cgroup_paths paths;
	const char *key;
	size_t len, text_len;
	char *text = fixture_read(name, &text_len);

	ck_assert_int_eq(tenant_parse_proc_cgroup(text, text_len, &paths), 0);
	*hier = tenant_select_key(&paths, mode, &key, &len);
	key_buf[0] = '\0';
	if (*hier >= 0)
		snprintf(key_buf, sizeof(key_buf), "%.*s", (int)len, key);
	free(text);
	return key_buf;
}

START_TEST(proc_cgroup_fixtures)
{
	int h;

	ck_assert_str_eq(key_of("cgroup-v2-only.txt", CONFIG_HIERARCHY_AUTO, &h),
			 "/system.slice/docker-4f2a.scope");
	ck_assert_int_eq(h, TENANT_HIER_V2);
	key_of("cgroup-v2-only.txt", CONFIG_HIERARCHY_BLKIO, &h);
	ck_assert_int_eq(h, -ENOENT);

	ck_assert_str_eq(key_of("cgroup-v1-only.txt", CONFIG_HIERARCHY_AUTO, &h),
			 "/docker/4f2a9c");
	ck_assert_int_eq(h, TENANT_HIER_BLKIO);
	key_of("cgroup-v1-only.txt", CONFIG_HIERARCHY_V2, &h);
	ck_assert_int_eq(h, -ENOENT);

	/* this host: everything at the root; auto takes the blkio "/" */
	ck_assert_str_eq(key_of("cgroup-hybrid-host.txt", CONFIG_HIERARCHY_AUTO, &h), "/");
	ck_assert_int_eq(h, TENANT_HIER_BLKIO);
	ck_assert_str_eq(key_of("cgroup-hybrid-host.txt", CONFIG_HIERARCHY_V2, &h), "/");
	ck_assert_int_eq(h, TENANT_HIER_V2);

	/* "blkio,cpu" list; name=systemd is not a controller list match */
	ck_assert_str_eq(key_of("cgroup-hybrid-blkio.txt", CONFIG_HIERARCHY_AUTO, &h),
			 "/tenants/gold");
	ck_assert_int_eq(h, TENANT_HIER_BLKIO);
	ck_assert_str_eq(key_of("cgroup-hybrid-blkio.txt", CONFIG_HIERARCHY_V2, &h), "/");

	/* a v2 path that is not "/" wins in auto; spaces are kept */
	ck_assert_str_eq(key_of("cgroup-hybrid-v2.txt", CONFIG_HIERARCHY_AUTO, &h),
			 "/fs-test/job 1");
	ck_assert_str_eq(key_of("cgroup-hybrid-v2.txt", CONFIG_HIERARCHY_BLKIO, &h),
			 "/tenants/silver");

	ck_assert_str_eq(key_of("cgroup-deleted.txt", CONFIG_HIERARCHY_AUTO, &h),
			 "/a:b/with space");
	ck_assert_str_eq(key_of("cgroup-deleted.txt", CONFIG_HIERARCHY_BLKIO, &h),
			 "/tenants/old job");

	key_of("cgroup-no-blkio.txt", CONFIG_HIERARCHY_AUTO, &h);
	ck_assert_int_eq(h, -ENOENT);
}
END_TEST

START_TEST(proc_cgroup_edge_cases)
{
	struct tenant_cgroup_paths p;
	const char *key;
	size_t len;

	ck_assert_int_eq(tenant_parse_proc_cgroup("7:blkio:/x (deleted)\n0::/y",
						  26, &p), 0);
	ck_assert(p.blkio_deleted);
	ck_assert_uint_eq(p.blkio_len, 2);
	ck_assert(!p.v2_deleted);
	ck_assert_uint_eq(p.v2_len, 2);	/* no trailing newline */
	ck_assert_int_eq(tenant_parse_proc_cgroup("garbage\n", 8, &p), -EINVAL);
	ck_assert_int_eq(tenant_parse_proc_cgroup("1:cpu\n", 6, &p), -EINVAL);
	ck_assert_int_eq(tenant_parse_proc_cgroup("", 0, &p), 0);
	ck_assert_int_eq(tenant_select_key(&p, CONFIG_HIERARCHY_AUTO, &key, &len),
			 -ENOENT);
	/* "blkiox" and "xblkio" are not blkio */
	ck_assert_int_eq(tenant_parse_proc_cgroup("3:blkiox,xblkio:/n\n", 19, &p), 0);
	ck_assert_ptr_null(p.blkio);
	/* a hierarchy id "10" starting with 0 is not v2 */
	ck_assert_int_eq(tenant_parse_proc_cgroup("10::/n\n", 7, &p), 0);
	ck_assert_ptr_null(p.v2);
}
END_TEST

START_TEST(mountinfo_fixtures)
{
	struct tenant_cgroup_roots roots;
	size_t len;
	char *text = fixture_read("mountinfo-hybrid.txt", &len);

	tenant_parse_mountinfo(text, len, &roots);
	ck_assert_str_eq(roots.v2, "/sys/fs/cgroup/unified");
	ck_assert_str_eq(roots.blkio, "/sys/fs/cgroup/blkio");
	free(text);

	text = fixture_read("mountinfo-escaped.txt", &len);
	tenant_parse_mountinfo(text, len, &roots);
	ck_assert_str_eq(roots.v2, "/mnt/cg 2");	/* /sub bind skipped */
	ck_assert_str_eq(roots.blkio, "/mnt/v1 blk");
	free(text);

	tenant_parse_mountinfo("", 0, &roots);
	ck_assert_str_eq(roots.v2, "");
	ck_assert_str_eq(roots.blkio, "");
}
END_TEST

START_TEST(glob_rules_first_match_wins)
{
	struct config *cfg = config_from(
		"[group \"/tenants/gold\"]\nweight = 800\n"
		"[group \"/system.slice/docker-*.scope\"]\nweight = 200\n"
		"[group \"/tenants/*\"]\nweight = 300\n"
		"[group \"/odd[1]\"]\nweight = 5\n");
	const struct config_group_rule *r = cfg->groups;
	size_t n = cfg->group_count;

	ck_assert_int_eq(tenant_match_rule(r, n, "/tenants/gold"), 0);
	ck_assert_int_eq(tenant_match_rule(r, n, "/tenants/silver"), 2);
	/* FNM_PATHNAME: '*' stops at '/' */
	ck_assert_int_eq(tenant_match_rule(r, n, "/tenants/silver/job"), -1);
	ck_assert_int_eq(tenant_match_rule(r, n, "/tenants/gold/job"), -1);
	ck_assert_int_eq(tenant_match_rule(r, n, "/system.slice/docker-4f2a.scope"), 1);
	ck_assert_int_eq(tenant_match_rule(r, n, "/system.slice/docker-4f2a.scope/x"), -1);
	/* the exact path matches even when it reads as a glob */
	ck_assert_int_eq(tenant_match_rule(r, n, "/odd[1]"), 3);
	ck_assert_int_eq(tenant_match_rule(r, n, "/odd1"), 3);
	ck_assert_int_eq(tenant_match_rule(r, n, "/"), -1);
	ck_assert_int_eq(tenant_match_rule(r, 0, "/tenants/gold"), -1);
	config_free(cfg);
}
END_TEST

START_TEST(glob_double_star)
{
	struct config *cfg = config_from(
		"[group \"/kubepods.slice/**/kubepods-burstable-pod*.slice\"]\nweight = 1\n"
		"[group \"/user.slice/**\"]\nweight = 2\n"
		"[group \"/**/leaf\"]\nweight = 3\n"
		"[group \"/a/**/b/**/c\"]\nweight = 4\n"
		"[group \"/**\"]\nweight = 5\n");
	const struct config_group_rule *r = cfg->groups;
	size_t n = cfg->group_count;

	/* inner: zero, one or more components */
	ck_assert_int_eq(tenant_match_rule(r, n, "/kubepods.slice/kubepods-burstable-podX.slice"), 0);
	ck_assert_int_eq(tenant_match_rule(r, n, "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1234.slice"), 0);
	ck_assert_int_eq(tenant_match_rule(r, n, "/kubepods.slice/x/y/kubepods-burstable-pod1.slice"), 0);
	/* the component after it still matches one component, no more */
	ck_assert_int_eq(tenant_match_rule(r, 1, "/kubepods.slice/kubepods-burstable-pod1.slice/ctr.scope"), -1);
	ck_assert_int_eq(tenant_match_rule(r, 1, "/kubepods.slice"), -1);
	ck_assert_int_eq(tenant_match_rule(r, 1, "/kubepods.slicex/kubepods-burstable-pod1.slice"), -1);
	/* trailing: every cgroup below, not the cgroup itself */
	ck_assert_int_eq(tenant_match_rule(r, n, "/user.slice/user-1000.slice"), 1);
	ck_assert_int_eq(tenant_match_rule(r, n, "/user.slice/user-1000.slice/session-1.scope"), 1);
	ck_assert_int_eq(tenant_match_rule(r, 2, "/user.slice"), -1);
	ck_assert_int_eq(tenant_match_rule(r, 2, "/user.slices/x"), -1);
	/* leading: at any depth, the top level included */
	ck_assert_int_eq(tenant_match_rule(r, 3, "/leaf"), 2);
	ck_assert_int_eq(tenant_match_rule(r, 3, "/x/y/leaf"), 2);
	ck_assert_int_eq(tenant_match_rule(r, 3, "/x/leafy"), -1);
	ck_assert_int_eq(tenant_match_rule(r, 3, "/x/leaf/y"), -1);
	/* two of them: the matcher backtracks */
	ck_assert_int_eq(tenant_match_rule(r, 4, "/a/b/c"), 3);
	ck_assert_int_eq(tenant_match_rule(r, 4, "/a/x/b/y/z/c"), 3);
	ck_assert_int_eq(tenant_match_rule(r, 4, "/a/b/b/c/c"), 3);
	ck_assert_int_eq(tenant_match_rule(r, 4, "/a/b/c/d"), -1);
	ck_assert_int_eq(tenant_match_rule(r, 4, "/a/c"), -1);
	/* alone it matches every cgroup but the root */
	ck_assert_int_eq(tenant_match_rule(r, n, "/z"), 4);
	ck_assert_int_eq(tenant_match_rule(r, n, "/"), -1);
	config_free(cfg);
}
END_TEST

START_TEST(weight_file_formats)
{
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO_BFQ, "default 300\n8:0 200\n"), 300);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO_BFQ, "8:0 200\ndefault 301\n"), 301);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_BLKIO_BFQ, "250\n"), 250);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO_BFQ, "0\n"), -EINVAL);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO_BFQ, "1001\n"), -EINVAL);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO_BFQ, "12x\n"), -EINVAL);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO_BFQ, ""), -EINVAL);
	/* io.weight 1..10000 -> 10..1000 (runc's --blkio-weight mapping) */
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO, "default 2930\n"), 300);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO, "default 1\n"), 10);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO, "default 10000\n"), 1000);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_IO, "default 10001\n"), -EINVAL);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_BLKIO, "9\n"), -EINVAL);
	ck_assert_int_eq(tenant_parse_weight_file(TENANT_WEIGHT_BLKIO, "1000\n"), 1000);
}
END_TEST

static struct tenant_cgroup_roots roots_in(const char *tree)
{
	struct tenant_cgroup_roots roots;

	snprintf(roots.v2, sizeof(roots.v2), "%s/v2", tree);
	snprintf(roots.blkio, sizeof(roots.blkio), "%s/blkio", tree);
	return roots;
}

START_TEST(weight_resolution_order)
{
	char *tree = fake_tree_new();
	struct tenant_cgroup_roots roots = roots_in(tree);
	struct config *cfg = config_from("[group \"/ruled\"]\nweight = 42\n");
	enum tenant_weight_source src;

	fake_tree_write(tree, "v2/c/io.bfq.weight", "default 700\n");
	fake_tree_write(tree, "v2/c/io.weight", "default 2930\n");
	fake_tree_write(tree, "blkio/c/blkio.bfq.weight", "200\n");
	fake_tree_write(tree, "blkio/c/blkio.weight", "400\n");
	ck_assert_int_eq(tenant_read_cgroup_weight(&roots, "/c", "/c"), 700);
	fake_tree_remove(tree, "v2/c/io.bfq.weight");
	ck_assert_int_eq(tenant_read_cgroup_weight(&roots, "/c", "/c"), 300);
	/* kernel defaults mean "nobody set it": fall through */
	fake_tree_write(tree, "v2/c/io.weight", "default 100\n");
	ck_assert_int_eq(tenant_read_cgroup_weight(&roots, "/c", "/c"), 200);
	ck_assert_int_eq(tenant_read_cgroup_weight(&roots, NULL, "/c"), 200);
	fake_tree_write(tree, "blkio/c/blkio.bfq.weight", "100\n");
	ck_assert_int_eq(tenant_read_cgroup_weight(&roots, "/c", "/c"), 400);
	fake_tree_write(tree, "blkio/c/blkio.weight", "500\n");
	ck_assert_int_eq(tenant_read_cgroup_weight(&roots, "/c", "/c"), -ENOENT);
	ck_assert_int_eq(tenant_read_cgroup_weight(&roots, "/gone", "/gone"), -ENOENT);
	/* the root cgroup's files sit at the mount point itself */
	fake_tree_write(tree, "blkio/blkio.bfq.weight", "9\n");
	ck_assert_int_eq(tenant_read_cgroup_weight(&roots, NULL, "/"), 9);

	/* rule first, then cgroup files, then default_weight */
	fake_tree_write(tree, "blkio/ruled/blkio.bfq.weight", "600\n");
	ck_assert_uint_eq(tenant_resolve_weight(cfg, &roots, "/ruled", NULL, "/ruled", &src), 42);
	ck_assert_int_eq(src, TENANT_WEIGHT_FROM_RULE);
	ck_assert_uint_eq(tenant_resolve_weight(cfg, &roots, "/x", NULL, "/ruled", &src), 600);
	ck_assert_int_eq(src, TENANT_WEIGHT_FROM_CGROUP);
	ck_assert_uint_eq(tenant_resolve_weight(cfg, &roots, "/c", "/c", "/c", &src), 100);
	ck_assert_int_eq(src, TENANT_WEIGHT_FROM_DEFAULT);
	config_free(cfg);
	cfg = config_from("[scheduler]\nhonor_cgroup_weights = no\ndefault_weight = 77\n");
	ck_assert_uint_eq(tenant_resolve_weight(cfg, &roots, "/x", NULL, "/ruled", &src), 77);
	ck_assert_int_eq(src, TENANT_WEIGHT_FROM_DEFAULT);
	config_free(cfg);
	fake_tree_free(tree);
}
END_TEST

/* ---- the table on a fake /proc --------------------------------------------- */

struct fixture {
	char *proc;
	char *cg;
	struct tenant_cgroup_roots roots;
	struct tenant_table *table;
};

static void set_cgroup(struct fixture *f, int pid, const char *text)
{
	char rel[64];

	snprintf(rel, sizeof(rel), "%d/cgroup", pid);
	fake_tree_write(f->proc, rel, text);
}

static void set_cursor(struct fixture *f, unsigned cursor)
{
	char text[32];

	snprintf(text, sizeof(text), "%u\n", cursor);
	fake_tree_write(f->proc, "sys/kernel/ns_last_pid", text);
}

static void fixture_open(struct fixture *f, const char *cfg_text,
			 uint32_t max_tenants, uint32_t cache_entries)
{
	struct config *cfg = config_from(cfg_text);
	struct tenant_table_params params = { 0 };
	char err[256];

	f->proc = fake_tree_new();
	f->cg = fake_tree_new();
	f->roots = roots_in(f->cg);
	fake_tree_write(f->proc, "sys/kernel/pid_max", "32768\n");
	set_cursor(f, 1000);
	params.proc_root = f->proc;
	params.roots = &f->roots;
	params.max_tenants = max_tenants;
	params.cache_entries = cache_entries;
	ck_assert_msg(tenant_table_new(&params, cfg, &f->table, err, sizeof(err)) == 0,
		      "%s", err);
	config_free(cfg);
}

static void fixture_close(struct fixture *f)
{
	tenant_table_free(f->table);
	fake_tree_free(f->proc);
	fake_tree_free(f->cg);
}

static uint64_t misses(struct fixture *f)
{
	struct tenant_stats st;

	tenant_table_get_stats(f->table, &st);
	return st.misses;
}

static const char *path_of(struct fixture *f, uint32_t id)
{
	static struct tenant_info info;

	if (tenant_get_info(f->table, id, &info))
		return "(none)";
	return info.path;
}

START_TEST(table_ttl_and_move)
{
	struct fixture f;
	struct tenant_stats st;
	uint32_t a, b;

	fixture_open(&f, "[group \"/gold\"]\nweight = 800\n", 0, 0);
	ck_assert_uint_eq(tenant_resolve(f.table, 0, 0), TENANT_ID_DEFAULT);
	ck_assert_uint_eq(tenant_resolve(f.table, 5555, 0), TENANT_ID_DEFAULT);
	ck_assert_str_eq(path_of(&f, TENANT_ID_DEFAULT), "");
	ck_assert_uint_eq(tenant_weight(f.table, TENANT_ID_DEFAULT), 100);

	set_cgroup(&f, 20000, "7:blkio:/\n0::/a\n");
	a = tenant_resolve(f.table, 20000, 0);
	ck_assert_uint_ne(a, TENANT_ID_DEFAULT);
	ck_assert_str_eq(path_of(&f, a), "/a");
	ck_assert_uint_eq(tenant_weight(f.table, a), 100);

	/* moved to /gold: still /a from the cache until the TTL runs out */
	set_cgroup(&f, 20000, "7:blkio:/\n0::/gold\n");
	uint64_t m = misses(&f);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, 10 * MS), a);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, 999 * MS), a);
	ck_assert_uint_eq(misses(&f), m);
	b = tenant_resolve(f.table, 20000, 1000 * MS);
	ck_assert_uint_ne(b, a);
	ck_assert_str_eq(path_of(&f, b), "/gold");
	ck_assert_uint_eq(tenant_weight(f.table, b), 800);
	ck_assert_uint_eq(misses(&f), m + 1);

	/* a second pid in /a shares the tenant */
	set_cgroup(&f, 20001, "0::/a\n");
	ck_assert_uint_eq(tenant_resolve(f.table, 20001, 1000 * MS), a);
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.live_tenants, 3);
	ck_assert_uint_eq(st.invisible, 1);
	fixture_close(&f);
}
END_TEST

START_TEST(table_pid_reuse_guard)
{
	struct fixture f;
	struct tenant_stats st;
	uint32_t a, b;
	uint64_t m;

	fixture_open(&f, "", 0, 0);
	set_cgroup(&f, 20000, "0::/a\n");
	a = tenant_resolve(f.table, 20000, 0);	/* cursor 1000: 19000 to go */

	/* the cursor moved 4000 pids: 20000 cannot have come round yet */
	set_cursor(&f, 5000);
	m = misses(&f);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, 30 * MS), a);
	ck_assert_uint_eq(misses(&f), m);

	/* the cursor nearly reached 20000: a new thread 20000 may exist */
	set_cgroup(&f, 20000, "0::/b\n");
	set_cursor(&f, 19990);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, 40 * MS), a);	/* sample fresh: 10 ms */
	b = tenant_resolve(f.table, 20000, 60 * MS);
	ck_assert_str_eq(path_of(&f, b), "/b");
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.pid_reuse_guarded, 1);

	/* while the cursor sits just behind 20000 nothing is trusted; once it
	 * has passed, the entry is good for a whole lap again, across the
	 * wrap from 32767 to 300 */
	set_cursor(&f, 32000);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, 100 * MS), b);
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.pid_reuse_guarded, 2);
	set_cursor(&f, 400);
	m = misses(&f);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, 130 * MS), b);
	ck_assert_uint_eq(misses(&f), m);
	/* ... and refused when the cursor passes it again */
	set_cursor(&f, 19500);
	m = misses(&f);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, 160 * MS), b);
	ck_assert_uint_eq(misses(&f), m + 1);
	fixture_close(&f);
}
END_TEST

START_TEST(table_apply_config)
{
	struct fixture f;
	struct config *cfg;
	uint32_t a, v2_id, blk_id;
	uint64_t epoch;

	fixture_open(&f, "", 0, 0);
	set_cgroup(&f, 20000, "0::/a\n");
	set_cgroup(&f, 20002, "7:blkio:/blk\n0::/v2x\n");
	a = tenant_resolve(f.table, 20000, 0);
	v2_id = tenant_resolve(f.table, 20002, 0);
	ck_assert_str_eq(path_of(&f, v2_id), "/v2x");
	epoch = tenant_table_weights_epoch(f.table);

	cfg = config_from("[tenants]\nhierarchy = blkio\n"
			  "[group \"/a\"]\nweight = 50\n");
	ck_assert_int_eq(tenant_table_apply_config(f.table, cfg), 0);
	config_free(cfg);
	ck_assert_uint_eq(tenant_weight(f.table, a), 50);
	ck_assert_uint_gt(tenant_table_weights_epoch(f.table), epoch);
	/* within the TTL, but the hierarchy changed: re-keyed at once */
	blk_id = tenant_resolve(f.table, 20002, 1 * MS);
	ck_assert_str_eq(path_of(&f, blk_id), "/blk");

	/* same config again: no weight changed, no new epoch */
	epoch = tenant_table_weights_epoch(f.table);
	cfg = config_from("[tenants]\nhierarchy = blkio\n"
			  "[group \"/a\"]\nweight = 50\n");
	ck_assert_int_eq(tenant_table_apply_config(f.table, cfg), 0);
	config_free(cfg);
	ck_assert_uint_eq(tenant_table_weights_epoch(f.table), epoch);
	fixture_close(&f);
}
END_TEST

START_TEST(table_retire_and_holds)
{
	struct fixture f;
	uint32_t ids[8], a, kept;
	uint64_t t = 0;

	fixture_open(&f, "[tenants]\nretire_idle_ms = 1000\n", 0, 0);
	set_cgroup(&f, 20000, "0::/a\n");	/* /a has no directory: gone */
	set_cgroup(&f, 20001, "0::/kept\n");
	fake_tree_write(f.cg, "v2/kept/cgroup.procs", "");
	a = tenant_resolve(f.table, 20000, t);
	kept = tenant_resolve(f.table, 20001, t);

	ck_assert_uint_eq(tenant_table_retire(f.table, 500 * MS, ids, 8), 0);
	tenant_hold(f.table, a);
	ck_assert_uint_eq(tenant_table_retire(f.table, 2000 * MS, ids, 8), 0);
	ck_assert_uint_eq(tenant_table_retire(f.table, 2100 * MS, ids, 8), 0);
	ck_assert_str_eq(path_of(&f, a), "/a");
	tenant_release(f.table, a);

	/* phase one, then use revives it */
	ck_assert_uint_eq(tenant_table_retire(f.table, 2200 * MS, ids, 8), 0);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, 2300 * MS), a);
	ck_assert_uint_eq(tenant_table_retire(f.table, 2400 * MS, ids, 8), 0);
	ck_assert_str_eq(path_of(&f, a), "/a");

	/* idle again: phase one, phase two frees it */
	ck_assert_uint_eq(tenant_table_retire(f.table, 4000 * MS, ids, 8), 0);
	ck_assert_uint_eq(tenant_table_retire(f.table, 4100 * MS, ids, 8), 1);
	ck_assert_uint_eq(ids[0], a);
	ck_assert_str_eq(path_of(&f, a), "(none)");
	ck_assert_uint_eq(tenant_weight(f.table, a), 0);
	ck_assert_str_eq(path_of(&f, kept), "/kept");	/* directory exists */

	/* the cached pid no longer hits the retired id */
	set_cgroup(&f, 20000, "0::/c\n");
	ck_assert_str_eq(path_of(&f, tenant_resolve(f.table, 20000, 4200 * MS)), "/c");
	fixture_close(&f);
}
END_TEST

START_TEST(table_full_and_small_cache)
{
	struct fixture f;
	struct tenant_stats st;
	char text[64];

	/* two ids; the last one is the reserve, which only /b's rule may take */
	fixture_open(&f, "[tenants]\ncache_ttl_ms = 0\n"
			 "[group \"/b\"]\nweight = 200\n", 3, 1);
	set_cgroup(&f, 20000, "0::/a\n");
	set_cgroup(&f, 20001, "0::/b\n");
	set_cgroup(&f, 20002, "0::/c\n");
	ck_assert_uint_ne(tenant_resolve(f.table, 20000, 0), 0);
	ck_assert_uint_ne(tenant_resolve(f.table, 20001, 0), 0);
	ck_assert_uint_eq(tenant_resolve(f.table, 20002, 0), TENANT_ID_DEFAULT);
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.table_full, 1);
	/* TTL 0: every call goes to /proc */
	uint64_t m = misses(&f);
	tenant_resolve(f.table, 20000, 0);
	tenant_resolve(f.table, 20000, 0);
	ck_assert_uint_eq(misses(&f), m + 2);
	fixture_close(&f);

	/* 64 slots, 500 pids in 2 cgroups: evictions never give wrong ids */
	fixture_open(&f, "", 0, 64);
	for (int pid = 20000; pid < 20500; pid++) {
		snprintf(text, sizeof(text), "0::/g%d\n", pid % 2);
		set_cgroup(&f, pid, text);
	}
	for (int round = 0; round < 3; round++)
		for (int pid = 20000; pid < 20500; pid++) {
			char want[8];

			snprintf(want, sizeof(want), "/g%d", pid % 2);
			ck_assert_str_eq(path_of(&f, tenant_resolve(f.table, pid,
								  (uint64_t)round * MS)),
					 want);
		}
	fixture_close(&f);
}
END_TEST

/* ---- exhaustion: reserve, subtree cap, eviction --------------------------- */

/* Puts pid PID in cgroup PATH (v2) and resolves it at NOW_NS. */
static uint32_t resolve_in(struct fixture *f, int pid, const char *path,
			   uint64_t now_ns)
{
	char text[TENANT_PATH_MAX + 16];

	snprintf(text, sizeof(text), "0::%s\n", path);
	set_cgroup(f, pid, text);
	return tenant_resolve(f->table, pid, now_ns);
}

/* max_tenants 64: 63 ids, a reserve of 4, 8 per parent. */
START_TEST(table_subtree_cap)
{
	struct fixture f;
	struct tenant_stats st;
	struct tenant_info info;
	char path[64];
	uint32_t id, u1 = 0, deleg, own[8];
	int pid = 20000;

	fixture_open(&f, "[group \"/gold\"]\nweight = 500\n", 64, 0);

	/* a delegated subtree: 8 children get ids, the rest share /user/u1,
	 * whose tenant is created for them (/user is under its cap) */
	for (int i = 0; i < 20; i++) {
		snprintf(path, sizeof(path), "/user/u1/k%d", i);
		id = resolve_in(&f, pid++, path, 0);
		ck_assert_uint_ne(id, TENANT_ID_DEFAULT);
		if (i < 8) {
			own[i] = id;
			ck_assert_str_eq(path_of(&f, id), path);
			continue;
		}
		if (i == 8)
			u1 = id;
		ck_assert_uint_eq(id, u1);
		ck_assert_str_eq(path_of(&f, id), "/user/u1");
	}
	for (int i = 0; i < 8; i++)
		for (int j = 0; j < i; j++)
			ck_assert_uint_ne(own[i], own[j]);
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.live_tenants, 1 + 8 + 1);
	ck_assert_uint_eq(st.subtree_capped, 12);

	/* a parent that already has a tenant: its extra children share it */
	deleg = resolve_in(&f, pid++, "/deleg", 0);
	for (int i = 0; i < 8; i++) {
		snprintf(path, sizeof(path), "/deleg/x%d", i);
		ck_assert_uint_ne(resolve_in(&f, pid++, path, 0), deleg);
	}
	ck_assert_uint_eq(resolve_in(&f, pid++, "/deleg/x8", 0), deleg);

	/* unconfigured top-level cgroups take what they may (parent "/" is
	 * not capped) and stop at the reserve */
	tenant_table_get_stats(f.table, &st);
	for (int i = 0, room = 64 - 4 - (int)st.live_tenants; i < room; i++) {
		snprintf(path, sizeof(path), "/t%d", i);
		ck_assert_str_eq(path_of(&f, resolve_in(&f, pid++, path, 0)),
				 path);
	}
	ck_assert_uint_eq(resolve_in(&f, pid++, "/late", 0), TENANT_ID_DEFAULT);
	/* refused for want of ids now, a capped child still finds its parent,
	 * and a new subtree's child falls back past its parent (which may not
	 * take an id either) to the default tenant */
	ck_assert_uint_eq(resolve_in(&f, pid++, "/user/u1/k99", 0), u1);
	ck_assert_uint_eq(resolve_in(&f, pid++, "/user/u2/k0", 0),
			  TENANT_ID_DEFAULT);

	/* the configured cgroup still gets its own id and weight */
	id = resolve_in(&f, pid++, "/gold", 0);
	ck_assert_uint_ne(id, TENANT_ID_DEFAULT);
	ck_assert_int_eq(tenant_get_info(f.table, id, &info), 0);
	ck_assert_str_eq(info.path, "/gold");
	ck_assert_uint_eq(info.weight, 500);
	ck_assert_int_eq(info.weight_source, TENANT_WEIGHT_FROM_RULE);
	fixture_close(&f);
}
END_TEST

START_TEST(table_reserve_for_rules)
{
	struct fixture f;
	struct tenant_stats st;
	char path[64];
	int own = 0;

	fixture_open(&f, "[group \"/gold*\"]\nweight = 500\n", 64, 0);
	/* 80 parents with one child each: no cap applies, only the reserve */
	for (int i = 0; i < 80; i++) {
		snprintf(path, sizeof(path), "/p%d/c", i);
		if (resolve_in(&f, 20000 + i, path, 0) != TENANT_ID_DEFAULT)
			own++;
	}
	ck_assert_int_eq(own, 63 - 4);
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.table_full, 80 - 59);
	ck_assert_uint_eq(st.subtree_capped, 0);

	/* rules take the reserve, to the last id */
	for (int i = 0; i < 4; i++) {
		uint32_t id;

		snprintf(path, sizeof(path), "/gold%d", i);
		id = resolve_in(&f, 21000 + i, path, 0);
		ck_assert_str_eq(path_of(&f, id), path);
		ck_assert_uint_eq(tenant_weight(f.table, id), 500);
	}
	ck_assert_uint_eq(resolve_in(&f, 21004, "/gold4", 0), TENANT_ID_DEFAULT);
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.live_tenants, 64);
	fixture_close(&f);
}
END_TEST

START_TEST(table_evicts_lru_when_nearly_full)
{
	struct fixture f;
	struct tenant_stats st;
	uint32_t ids[64], c[59], n;
	char path[64];

	fixture_open(&f, "[tenants]\nretire_idle_ms = 60000\n"
			 "[group \"/gold\"]\nweight = 500\n"
			 "[group \"/silver\"]\nweight = 500\n", 64, 0);
	/* 59 idle tenants whose cgroups exist, used in order c0, c1, ... */
	for (int i = 0; i < 59; i++) {
		snprintf(path, sizeof(path), "v2/c%d/cgroup.procs", i);
		fake_tree_write(f.cg, path, "");
		snprintf(path, sizeof(path), "/c%d", i);
		c[i] = resolve_in(&f, 20000 + i, path, (uint64_t)i * MS);
		ck_assert_str_eq(path_of(&f, c[i]), path);
	}
	ck_assert_uint_eq(resolve_in(&f, 20100, "/new", 100 * MS),
			  TENANT_ID_DEFAULT);
	/* rules eat into the reserve: 2 free, 3 to make */
	resolve_in(&f, 20101, "/gold", 100 * MS);
	resolve_in(&f, 20102, "/silver", 100 * MS);
	tenant_hold(f.table, c[0]);
	/* nobody idle for 1 s yet: nothing */
	ck_assert_uint_eq(tenant_table_retire(f.table, 500 * MS, ids, 64), 0);
	tenant_resolve(f.table, 20001, 2500 * MS);	/* c1 used again */

	/* phase one for c2, c3, c4; c3 is used before phase two */
	ck_assert_uint_eq(tenant_table_retire(f.table, 3000 * MS, ids, 64), 0);
	ck_assert_uint_eq(tenant_resolve(f.table, 20003, 3500 * MS), c[3]);
	n = (uint32_t)tenant_table_retire(f.table, 4000 * MS, ids, 64);
	ck_assert_uint_eq(n, 2);
	ck_assert(ids[0] == c[2] || ids[1] == c[2]);
	ck_assert(ids[0] == c[4] || ids[1] == c[4]);
	ck_assert_str_eq(path_of(&f, c[2]), "(none)");
	ck_assert_str_eq(path_of(&f, c[4]), "(none)");
	ck_assert_str_eq(path_of(&f, c[0]), "/c0");	/* held */
	ck_assert_str_eq(path_of(&f, c[1]), "/c1");
	ck_assert_str_eq(path_of(&f, c[3]), "/c3");
	ck_assert_str_eq(path_of(&f, c[5]), "/c5");
	/* 4 free is still not above the reserve: c5 goes next */
	ck_assert_uint_eq(tenant_table_retire(f.table, 5000 * MS, ids, 64), 1);
	ck_assert_uint_eq(ids[0], c[5]);
	ck_assert_uint_eq(tenant_table_retire(f.table, 6000 * MS, ids, 64), 0);
	ck_assert_str_eq(path_of(&f, c[0]), "/c0");
	ck_assert_str_eq(path_of(&f, c[6]), "/c6");

	/* room for a new cgroup, which uses it up again */
	ck_assert_str_eq(path_of(&f, resolve_in(&f, 20100, "/new", 6000 * MS)),
			 "/new");
	ck_assert_uint_eq(tenant_resolve(f.table, 20002, 6000 * MS),
			  TENANT_ID_DEFAULT);
	/* c6 makes room, and retired c2, its cgroup in use again, gets a
	 * fresh id */
	ck_assert_uint_eq(tenant_table_retire(f.table, 7000 * MS, ids, 64), 0);
	ck_assert_uint_eq(tenant_table_retire(f.table, 8000 * MS, ids, 64), 1);
	ck_assert_uint_eq(ids[0], c[6]);
	ck_assert_str_eq(path_of(&f, tenant_resolve(f.table, 20002, 8000 * MS)),
			 "/c2");
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.retired, 4);
	ck_assert_str_eq(path_of(&f, c[0]), "/c0");
	tenant_release(f.table, c[0]);
	fixture_close(&f);
}
END_TEST

/* ---- the scheduling tree ------------------------------------------------- */

static const char *parent_path(struct fixture *f, uint32_t id)
{
	return path_of(f, tenant_parent(f->table, id));
}

START_TEST(table_parent_chains)
{
	struct fixture f;
	struct tenant_info info;
	uint32_t c1, pod, ctr, kpod, kube, other;
	int pid = 20000;

	fixture_open(&f, "[group \"/pod1\"]\nweight = 300\n"
			 "[group \"/kubepods.slice\"]\nweight = 600\n"
			 "[group \"/kubepods.slice/**/kubepods-*-pod*.slice\"]\nweight = 50\n",
		     0, 0);
	/* a rule's cgroup is the level its children divide */
	c1 = resolve_in(&f, pid++, "/pod1/c1", 0);
	pod = tenant_parent(f.table, c1);
	ck_assert_uint_ne(pod, TENANT_ID_NONE);
	ck_assert_int_eq(tenant_get_info(f.table, pod, &info), 0);
	ck_assert_str_eq(info.path, "/pod1");
	ck_assert_uint_eq(info.weight, 300);
	ck_assert_int_eq(info.weight_source, TENANT_WEIGHT_FROM_RULE);
	ck_assert_uint_eq(info.parent, TENANT_ID_NONE);
	ck_assert_uint_eq(tenant_weight(f.table, c1), 100);
	ck_assert_uint_eq(tenant_parent(f.table,
					resolve_in(&f, pid++, "/pod1/c2", 0)), pod);
	/* an unconfigured cgroup between them is transparent */
	ck_assert_uint_eq(tenant_parent(f.table,
					resolve_in(&f, pid++, "/pod1/mid/c3", 0)), pod);
	/* a process in the level itself is the level's tenant */
	ck_assert_uint_eq(resolve_in(&f, pid++, "/pod1", 0), pod);

	/* container -> pod -> /kubepods.slice, past an unruled slice */
	ctr = resolve_in(&f, pid++, "/kubepods.slice/kubepods-burstable.slice/"
			 "kubepods-burstable-pod1.slice/cri-containerd-1.scope", 0);
	ck_assert_int_eq(tenant_get_info(f.table, ctr, &info), 0);
	kpod = info.parent;
	ck_assert_str_eq(path_of(&f, kpod), "/kubepods.slice/kubepods-burstable.slice/"
			 "kubepods-burstable-pod1.slice");
	ck_assert_uint_eq(tenant_weight(f.table, kpod), 50);
	kube = tenant_parent(f.table, kpod);
	ck_assert_str_eq(path_of(&f, kube), "/kubepods.slice");
	ck_assert_uint_eq(tenant_weight(f.table, kube), 600);
	ck_assert_uint_eq(tenant_parent(f.table, kube), TENANT_ID_NONE);

	/* no level above: the top */
	other = resolve_in(&f, pid++, "/other/x", 0);
	ck_assert_uint_eq(tenant_parent(f.table, other), TENANT_ID_NONE);
	ck_assert_uint_eq(tenant_parent(f.table, TENANT_ID_DEFAULT), TENANT_ID_NONE);
	ck_assert_uint_eq(tenant_parent(f.table, 4095), TENANT_ID_NONE);
	ck_assert_uint_eq(tenant_parent(f.table, 1u << 30), TENANT_ID_NONE);
	fixture_close(&f);
}
END_TEST

START_TEST(table_weight_file_levels)
{
	struct fixture f;
	struct config *cfg;
	struct tenant_info info;
	uint32_t c, flat;
	uint64_t epoch;

	fixture_open(&f, "", 0, 0);
	fake_tree_write(f.cg, "v2/lvl/io.bfq.weight", "default 500\n");
	fake_tree_write(f.cg, "v2/flat/io.weight", "default 100\n");
	c = resolve_in(&f, 20000, "/lvl/c", 0);
	ck_assert_int_eq(tenant_get_info(f.table, tenant_parent(f.table, c), &info), 0);
	ck_assert_str_eq(info.path, "/lvl");
	ck_assert_uint_eq(info.weight, 500);
	ck_assert_int_eq(info.weight_source, TENANT_WEIGHT_FROM_CGROUP);
	/* the kernel's default is no setting: not a level */
	flat = resolve_in(&f, 20001, "/flat/c", 0);
	ck_assert_uint_eq(tenant_parent(f.table, flat), TENANT_ID_NONE);

	/* without honor_cgroup_weights weight files make no levels */
	epoch = tenant_table_weights_epoch(f.table);
	cfg = config_from("[scheduler]\nhonor_cgroup_weights = no\n");
	ck_assert_int_eq(tenant_table_apply_config(f.table, cfg), 0);
	config_free(cfg);
	ck_assert_uint_eq(tenant_parent(f.table, c), TENANT_ID_NONE);
	ck_assert_uint_gt(tenant_table_weights_epoch(f.table), epoch);
	fixture_close(&f);
}
END_TEST

/* Gives REL (under the fake cgroup tree) to UID, as delegation does. */
static void give_to(struct fixture *f, const char *rel, uid_t uid)
{
	char path[512];

	snprintf(path, sizeof(path), "%s/%s", f->cg, rel);
	ck_assert_msg(chown(path, uid, uid) == 0, "chown %s", path);
}

/*
 * A subtree delegated to a user (its directory the user's, as systemd's
 * Delegate= and rootless containers have it) is a level whatever its
 * weight: the cgroups the user makes below it divide its one share. Left
 * transparent, each of them was a tenant at the top beside everyone's, and
 * a weight file there (the user's to write) counted against theirs: with
 * io.weight 10000, 10 times the default. A user's weight file counts below
 * the delegated cgroup; on the delegated cgroup itself, only root's.
 */
START_TEST(table_delegated_subtree_is_a_level)
{
	struct fixture f;
	struct tenant_info info;
	const uid_t user = 2001;
	uint32_t a, b, deleg, other;

	if (geteuid() != 0) {
		fprintf(stderr, "table_delegated_subtree_is_a_level: not run (chown needs root)\n");
		return;
	}
	fixture_open(&f, "", 0, 0);
	fake_tree_write(f.cg, "v2/user.slice/u.service/app/a/io.weight", "default 10000\n");
	fake_tree_write(f.cg, "v2/user.slice/u.service/app/b/cgroup.procs", "");
	fake_tree_write(f.cg, "v2/user.slice/u.service/io.weight", "default 10000\n");
	fake_tree_write(f.cg, "v2/system.slice/other.scope/cgroup.procs", "");
	fake_tree_write(f.cg, "v2/system.slice/docker.scope/io.bfq.weight", "800\n");
	give_to(&f, "v2/user.slice/u.service", user);
	give_to(&f, "v2/user.slice/u.service/io.weight", user);
	give_to(&f, "v2/user.slice/u.service/app", user);
	give_to(&f, "v2/user.slice/u.service/app/a", user);
	give_to(&f, "v2/user.slice/u.service/app/a/io.weight", user);
	give_to(&f, "v2/user.slice/u.service/app/b", user);

	a = resolve_in(&f, 20000, "/user.slice/u.service/app/a", 0);
	b = resolve_in(&f, 20001, "/user.slice/u.service/app/b", 0);
	other = resolve_in(&f, 20002, "/system.slice/other.scope", 0);
	deleg = tenant_parent(f.table, a);
	ck_assert_uint_ne(deleg, TENANT_ID_NONE);
	ck_assert_str_eq(path_of(&f, deleg), "/user.slice/u.service");
	ck_assert_uint_eq(tenant_parent(f.table, b), deleg);
	ck_assert_uint_eq(tenant_parent(f.table, deleg), TENANT_ID_NONE);
	ck_assert_uint_eq(tenant_parent(f.table, other), TENANT_ID_NONE);
	/* the user's weight divides its share: honoured below the delegation */
	ck_assert_int_eq(tenant_get_info(f.table, a, &info), 0);
	ck_assert_uint_eq(info.weight, 1000);
	ck_assert_int_eq(info.weight_source, TENANT_WEIGHT_FROM_CGROUP);
	/* on the delegated cgroup itself a file the user owns is not its weight */
	ck_assert_int_eq(tenant_get_info(f.table, deleg, &info), 0);
	ck_assert_uint_eq(info.weight, 100);
	ck_assert_int_eq(info.weight_source, TENANT_WEIGHT_FROM_DEFAULT);
	/* a delegated cgroup of the kernel's default weight is a level too */
	fake_tree_write(f.cg, "v2/user.slice/w.service/c1/cgroup.procs", "");
	fake_tree_write(f.cg, "v2/user.slice/w.service/io.weight", "default 100\n");
	give_to(&f, "v2/user.slice/w.service", user + 1);
	give_to(&f, "v2/user.slice/w.service/c1", user + 1);
	a = resolve_in(&f, 20004, "/user.slice/w.service/c1", 0);
	ck_assert_uint_ne(tenant_parent(f.table, a), TENANT_ID_NONE);
	ck_assert_str_eq(path_of(&f, tenant_parent(f.table, a)), "/user.slice/w.service");
	/* root's file is, as before, and root's cgroups stay as they were */
	give_to(&f, "v2/user.slice/u.service/io.weight", 0);
	ck_assert_int_eq(tenant_read_cgroup_weight(&f.roots, "/user.slice/u.service", NULL), 1000);
	ck_assert_int_eq(tenant_get_info(f.table, resolve_in(&f, 20003, "/system.slice/docker.scope", 0),
					 &info), 0);
	ck_assert_uint_eq(info.weight, 800);
	ck_assert_uint_eq(info.parent, TENANT_ID_NONE);
	fixture_close(&f);
}
END_TEST

/*
 * A user's cgroups nested anywhere below its delegated cgroup count
 * together against the cap of ids one cgroup's children may hold: counted
 * by immediate parent, five parents of five children each took 25 ids
 * (with cap 8), and nesting deeper took every id but the reserve.
 */
START_TEST(table_delegated_subtree_is_capped_at_any_depth)
{
	struct fixture f;
	struct tenant_stats st;
	char path[64];
	uint32_t deleg, id, own = 0;
	int pid = 20000;

	if (geteuid() != 0) {
		fprintf(stderr, "table_delegated_subtree_is_capped_at_any_depth: not run (chown needs root)\n");
		return;
	}
	fixture_open(&f, "", 64, 0); /* a cap of 8 a subtree */
	fake_tree_write(f.cg, "v2/user/d/cgroup.procs", "");
	give_to(&f, "v2/user/d", 2001);
	for (int i = 0; i < 5; i++)
		for (int j = 0; j < 5; j++) {
			snprintf(path, sizeof(path), "/user/d/p%d/k%d", i, j);
			id = resolve_in(&f, pid++, path, 0);
			deleg = tenant_parent(f.table, id) == TENANT_ID_NONE ? id : tenant_parent(f.table, id);
			ck_assert_str_eq(path_of(&f, deleg), "/user/d");
			own += id != deleg;
		}
	ck_assert_uint_eq(own, 8);
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.subtree_capped, 25 - 8);
	fixture_close(&f);
}
END_TEST

#define S_NS 1000000000ull
#define S_NS 1000000000ull

/* A weight file changed by its cgroup's owner is read again without a
 * reload: the tenant's weight follows, a file newly set makes a level, and
 * tenants idle longer than 10 s and not held are left for later. */
START_TEST(table_weight_file_change_followed)
{
	struct fixture f;
	struct tenant_info info;
	uint64_t now = 100 * S_NS, epoch;

	fixture_open(&f, "", 0, 0);
	fake_tree_write(f.cg, "v2/svc/io.bfq.weight", "default 300\n");
	uint32_t svc = resolve_in(&f, 20000, "/svc", now);
	uint32_t kid = resolve_in(&f, 20001, "/pod/c1", now);
	uint32_t idle = resolve_in(&f, 20002, "/old", now);
	ck_assert_uint_eq(tenant_weight(f.table, svc), 300);
	ck_assert_uint_eq(tenant_parent(f.table, kid), TENANT_ID_NONE);

	now += 11 * S_NS;	/* idle 11 s: only those used since are read */
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, now), svc);
	ck_assert_uint_eq(tenant_resolve(f.table, 20001, now), kid);
	fake_tree_write(f.cg, "v2/svc/io.bfq.weight", "default 800\n");
	fake_tree_write(f.cg, "v2/pod/io.bfq.weight", "default 50\n");
	fake_tree_write(f.cg, "v2/old/io.bfq.weight", "default 700\n");
	epoch = tenant_table_weights_epoch(f.table);
	/* svc, c1 and the level /pod that c1's read made; not /old */
	ck_assert_uint_eq(tenant_table_refresh_weights(f.table, now, 64), 3);
	ck_assert_uint_gt(tenant_table_weights_epoch(f.table), epoch);
	ck_assert_uint_eq(tenant_weight(f.table, svc), 800);
	ck_assert_int_eq(tenant_get_info(f.table, tenant_parent(f.table, kid), &info), 0);
	ck_assert_str_eq(info.path, "/pod");
	ck_assert_uint_eq(info.weight, 50);
	ck_assert_uint_eq(tenant_weight(f.table, idle), 100);

	/* nothing changed: nothing moves; one a call goes round */
	epoch = tenant_table_weights_epoch(f.table);
	ck_assert_uint_eq(tenant_table_refresh_weights(f.table, now, 1), 1);
	ck_assert_uint_eq(tenant_table_refresh_weights(f.table, now, 1), 1);
	ck_assert_uint_eq(tenant_table_weights_epoch(f.table), epoch);

	/* the pod level, held by its container, is read while it is idle */
	fake_tree_write(f.cg, "v2/pod/io.bfq.weight", "default 90\n");
	now += 11 * S_NS;
	tenant_table_refresh_weights(f.table, now, 64);
	ck_assert_int_eq(tenant_get_info(f.table, tenant_parent(f.table, kid), &info), 0);
	ck_assert_uint_eq(info.weight, 90);

	/* without honor_cgroup_weights nothing is read */
	struct config *cfg = config_from("[scheduler]\nhonor_cgroup_weights = no\n");
	ck_assert_int_eq(tenant_table_apply_config(f.table, cfg), 0);
	config_free(cfg);
	ck_assert_uint_eq(tenant_resolve(f.table, 20000, now), svc);
	ck_assert_uint_eq(tenant_table_refresh_weights(f.table, now, 64), 0);
	fixture_close(&f);
}
END_TEST

/* Retires at NOW_NS; true if ID was among the retired. */
static bool retires(struct fixture *f, uint64_t now_ns, uint32_t id)
{
	uint32_t ids[64];
	size_t n = tenant_table_retire(f->table, now_ns, ids, 64);

	for (size_t i = 0; i < n; i++)
		if (ids[i] == id)
			return true;
	return false;
}

START_TEST(table_parent_outlives_children)
{
	struct fixture f;
	uint32_t c1, pod;
	bool gone = false;

	/* neither cgroup directory exists: both are gone */
	fixture_open(&f, "[tenants]\nretire_idle_ms = 1000\n"
			 "[group \"/pod1\"]\nweight = 300\n", 0, 0);
	c1 = resolve_in(&f, 20000, "/pod1/c1", 0);
	pod = tenant_parent(f.table, c1);
	ck_assert_str_eq(path_of(&f, pod), "/pod1");
	tenant_hold(f.table, c1);	/* an open file */
	for (uint64_t s = 2; s <= 5; s++)
		ck_assert(!retires(&f, s * 1000 * MS, pod));
	ck_assert_str_eq(path_of(&f, pod), "/pod1");
	ck_assert_str_eq(path_of(&f, c1), "/pod1/c1");

	/* the child goes first, in two passes; then the parent */
	tenant_release(f.table, c1);
	ck_assert(!retires(&f, 6000 * MS, c1));
	ck_assert(retires(&f, 7000 * MS, c1));
	ck_assert_str_eq(path_of(&f, pod), "/pod1");
	ck_assert_uint_eq(tenant_parent(f.table, c1), TENANT_ID_NONE);
	for (uint64_t s = 8; s <= 9; s++)
		gone |= retires(&f, s * 1000 * MS, pod);
	ck_assert(gone);
	ck_assert_str_eq(path_of(&f, pod), "(none)");
	fixture_close(&f);
}
END_TEST

static void apply(struct fixture *f, const char *text)
{
	struct config *cfg = config_from(text);

	ck_assert_int_eq(tenant_table_apply_config(f->table, cfg), 0);
	config_free(cfg);
}

START_TEST(table_reload_changes_parents)
{
	static const char pod_rule[] = "[tenants]\nretire_idle_ms = 1000\n"
				       "[group \"/pod1\"]\nweight = 300\n";
	struct fixture f;
	uint32_t c, pod, mid;
	uint64_t epoch;

	fixture_open(&f, "[tenants]\nretire_idle_ms = 1000\n", 0, 0);
	c = resolve_in(&f, 20000, "/pod1/mid/c", 0);
	tenant_hold(f.table, c);	/* kept while its cgroup is gone */
	ck_assert_uint_eq(tenant_parent(f.table, c), TENANT_ID_NONE);

	/* a rule adds a level: its tenant is made, and the epoch moves */
	epoch = tenant_table_weights_epoch(f.table);
	apply(&f, pod_rule);
	pod = tenant_parent(f.table, c);
	ck_assert_str_eq(path_of(&f, pod), "/pod1");
	ck_assert_uint_eq(tenant_weight(f.table, pod), 300);
	ck_assert_uint_gt(tenant_table_weights_epoch(f.table), epoch);
	epoch = tenant_table_weights_epoch(f.table);
	apply(&f, pod_rule);
	ck_assert_uint_eq(tenant_table_weights_epoch(f.table), epoch);
	ck_assert(!retires(&f, 2000 * MS, pod));
	ck_assert(!retires(&f, 3000 * MS, pod));

	/* a level between them: the child moves under it, it under the pod */
	apply(&f, "[tenants]\nretire_idle_ms = 1000\n"
		  "[group \"/pod1\"]\nweight = 300\n"
		  "[group \"/pod1/mid\"]\nweight = 20\n");
	mid = tenant_parent(f.table, c);
	ck_assert_str_eq(path_of(&f, mid), "/pod1/mid");
	ck_assert_uint_eq(tenant_parent(f.table, mid), pod);
	ck_assert_uint_gt(tenant_table_weights_epoch(f.table), epoch);
	epoch = tenant_table_weights_epoch(f.table);

	/* no rules: the child is at the top again, and the levels, held by
	 * nobody now, retire */
	apply(&f, "[tenants]\nretire_idle_ms = 1000\n");
	ck_assert_uint_eq(tenant_parent(f.table, c), TENANT_ID_NONE);
	ck_assert_uint_eq(tenant_parent(f.table, mid), TENANT_ID_NONE);
	ck_assert_uint_gt(tenant_table_weights_epoch(f.table), epoch);
	ck_assert(!retires(&f, 4000 * MS, mid));
	ck_assert(retires(&f, 5000 * MS, mid));
	ck_assert_str_eq(path_of(&f, pod), "(none)");
	ck_assert_str_eq(path_of(&f, c), "/pod1/mid/c");
	tenant_release(f.table, c);
	fixture_close(&f);
}
END_TEST

START_TEST(table_account_subtree)
{
	struct fixture f;
	struct tenant_info info;
	uint32_t pod1, inner;
	int pid = 20000;

	fixture_open(&f, "[group \"/pod1\"]\nweight = 300\naccount = subtree\n"
			 "[group \"/pod1/c1\"]\nweight = 50\naccount = subtree\n"
			 "[group \"/pod2/c1\"]\nweight = 70\naccount = subtree\n"
			 "[group \"/pod2\"]\nweight = 200\n", 0, 0);
	/* the outermost subtree rule wins */
	pod1 = resolve_in(&f, pid++, "/pod1/c1/x", 0);
	ck_assert_int_eq(tenant_get_info(f.table, pod1, &info), 0);
	ck_assert_str_eq(info.path, "/pod1");
	ck_assert_uint_eq(info.weight, 300);
	ck_assert_uint_eq(info.parent, TENANT_ID_NONE);
	ck_assert_uint_eq(resolve_in(&f, pid++, "/pod1", 0), pod1);
	ck_assert_uint_eq(resolve_in(&f, pid++, "/pod1/c2/y/z", 0), pod1);

	/* an inner one folds its own subtree, below its level */
	inner = resolve_in(&f, pid++, "/pod2/c1/x/y", 0);
	ck_assert_str_eq(path_of(&f, inner), "/pod2/c1");
	ck_assert_uint_eq(tenant_weight(f.table, inner), 70);
	ck_assert_str_eq(parent_path(&f, inner), "/pod2");
	ck_assert_str_eq(path_of(&f, resolve_in(&f, pid++, "/pod2/c2/x", 0)),
			 "/pod2/c2/x");
	fixture_close(&f);
}
END_TEST

START_TEST(table_reload_folds_a_subtree)
{
	struct fixture f;
	uint32_t c1, pod;

	fixture_open(&f, "[tenants]\nretire_idle_ms = 1000\n", 0, 0);
	fake_tree_write(f.cg, "v2/pod3/c1/cgroup.procs", "");
	c1 = resolve_in(&f, 20000, "/pod3/c1", 0);
	ck_assert_str_eq(path_of(&f, c1), "/pod3/c1");

	/* cached pids are re-resolved at once, and the folded tenant retires
	 * though its cgroup is still there */
	apply(&f, "[tenants]\nretire_idle_ms = 1000\n"
		  "[group \"/pod3\"]\nweight = 300\naccount = subtree\n");
	pod = tenant_resolve(f.table, 20000, 1 * MS);
	ck_assert_str_eq(path_of(&f, pod), "/pod3");
	ck_assert_uint_eq(tenant_parent(f.table, c1), pod);
	ck_assert(!retires(&f, 2000 * MS, c1));
	ck_assert(retires(&f, 3000 * MS, c1));
	ck_assert(!retires(&f, 4000 * MS, pod));
	ck_assert_str_eq(path_of(&f, pod), "/pod3");
	fixture_close(&f);
}
END_TEST

/* max_tenants 64: 63 ids, a reserve of 4. */
START_TEST(table_only_rule_levels_take_the_reserve)
{
	struct fixture f;
	struct tenant_stats st;
	char path[64];
	uint32_t c, lvl;
	int pid = 20000;

	fixture_open(&f, "", 64, 0);
	fake_tree_write(f.cg, "v2/lvl/io.bfq.weight", "default 400\n");
	for (int i = 0; i < 63 - 4; i++) {
		snprintf(path, sizeof(path), "/t%d", i);
		ck_assert_str_eq(path_of(&f, resolve_in(&f, pid++, path, 0)), path);
	}
	/* only the reserve is left: neither the child nor its level by
	 * weight file (which anyone with the subtree could write) takes it */
	c = resolve_in(&f, pid++, "/lvl/c", 0);
	ck_assert_uint_eq(c, TENANT_ID_DEFAULT);
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.table_full, 1);
	fixture_close(&f);

	/* one id above the reserve: the child takes it, the level a reserved one */
	fixture_open(&f, "[group \"/pod\"]\nweight = 300\n", 64, 0);
	for (int i = 0; i < 63 - 5; i++) {
		snprintf(path, sizeof(path), "/t%d", i);
		resolve_in(&f, pid++, path, 0);
	}
	c = resolve_in(&f, pid++, "/pod/c", 0);
	ck_assert_str_eq(path_of(&f, c), "/pod/c");
	lvl = tenant_parent(f.table, c);
	ck_assert_str_eq(path_of(&f, lvl), "/pod");
	tenant_table_get_stats(f.table, &st);
	ck_assert_uint_eq(st.live_tenants, 1 + 58 + 2);
	fixture_close(&f);
}
END_TEST

struct race_arg {
	struct fixture *f;
	uint32_t even, odd;
	int bad;
};

static void *race_worker(void *p)
{
	struct race_arg *r = p;

	for (uint64_t i = 0; i < 200000; i++) {
		int pid = 20000 + (int)(i % 16);
		uint32_t id = tenant_resolve(r->f->table, pid, i * 1000);

		if (id != (pid % 2 ? r->odd : r->even))
			r->bad++;
	}
	return NULL;
}

START_TEST(table_concurrent_hits)
{
	struct fixture f;
	struct race_arg args[4];
	pthread_t th[4];
	char text[32];

	fixture_open(&f, "[tenants]\ncache_ttl_ms = 1\n", 0, 64);
	for (int pid = 20000; pid < 20016; pid++) {
		snprintf(text, sizeof(text), "0::/g%d\n", pid % 2);
		set_cgroup(&f, pid, text);
	}
	for (int i = 0; i < 4; i++) {
		args[i] = (struct race_arg){ &f, tenant_resolve(f.table, 20000, 0),
					     tenant_resolve(f.table, 20001, 0), 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, race_worker, &args[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].bad, 0);
	}
	fixture_close(&f);
}
END_TEST

struct stale_arg {
	struct fixture *f;
	pthread_barrier_t *go;
	uint32_t want;
	int bad;
};

static void *stale_worker(void *p)
{
	struct stale_arg *a = p;

	pthread_barrier_wait(a->go);
	/* every worker read its clock at the same moment, 30 ms after the
	 * last sample: all find it stale */
	if (tenant_resolve(a->f->table, 20000, 30 * MS) != a->want)
		a->bad++;
	return NULL;
}

/* Workers that find the pid-reuse sample stale at the same moment read the
 * allocation cursor once between them, not once each. The cursor is a FIFO
 * here, so the first reading holds the others back until this test answers
 * it: by then every worker has found the sample stale. */
START_TEST(table_stale_sample_read_once)
{
	enum { WORKERS = 8 };
	struct fixture f;
	struct stale_arg args[WORKERS];
	pthread_t th[WORKERS];
	pthread_barrier_t go;
	char path[512];
	int served = 0;

	fixture_open(&f, "", 0, 0);
	set_cgroup(&f, 20000, "0::/a\n");
	uint32_t a = tenant_resolve(f.table, 20000, 0);	/* samples at 0 */
	snprintf(path, sizeof(path), "%s/sys/kernel/ns_last_pid", f.proc);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(mkfifo(path, 0600), 0);
	pthread_barrier_init(&go, NULL, WORKERS + 1);
	for (int i = 0; i < WORKERS; i++) {
		args[i] = (struct stale_arg){ &f, &go, a, 0 };
		ck_assert_int_eq(pthread_create(&th[i], NULL, stale_worker, &args[i]), 0);
	}
	pthread_barrier_wait(&go);
	usleep(100 * 1000);	/* all at the sample's lock, or in it */
	/* Answer every reading of the cursor until a whole 200 ms pass
	 * without one: each is a worker that read it. */
	for (int quiet_ms = 0; quiet_ms < 200;) {
		int fd = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0) {
			ck_assert_int_eq(errno, ENXIO);	/* no reader yet */
			usleep(1000);
			quiet_ms++;
			continue;
		}
		ck_assert_int_eq(write(fd, "1000\n", 5), 5);
		close(fd);
		served++;
		quiet_ms = 0;
		usleep(20 * 1000);	/* its reader reads it and closes */
	}
	for (int i = 0; i < WORKERS; i++) {
		pthread_join(th[i], NULL);
		ck_assert_int_eq(args[i].bad, 0);
	}
	ck_assert_int_eq(served, 1);
	pthread_barrier_destroy(&go);
	fixture_close(&f);
}
END_TEST

static Suite *tenant_suite(void)
{
	Suite *s = suite_create("tenant");
	TCase *pure = tcase_create("pure");
	TCase *table = tcase_create("table");

	tcase_add_test(pure, proc_cgroup_fixtures);
	tcase_add_test(pure, proc_cgroup_edge_cases);
	tcase_add_test(pure, mountinfo_fixtures);
	tcase_add_test(pure, glob_rules_first_match_wins);
	tcase_add_test(pure, glob_double_star);
	tcase_add_test(pure, weight_file_formats);
	tcase_add_test(pure, weight_resolution_order);
	tcase_add_test(table, table_ttl_and_move);
	tcase_add_test(table, table_pid_reuse_guard);
	tcase_add_test(table, table_apply_config);
	tcase_add_test(table, table_retire_and_holds);
	tcase_add_test(table, table_full_and_small_cache);
	tcase_add_test(table, table_subtree_cap);
	tcase_add_test(table, table_reserve_for_rules);
	tcase_add_test(table, table_evicts_lru_when_nearly_full);
	tcase_add_test(table, table_concurrent_hits);
	tcase_add_test(table, table_stale_sample_read_once);
	tcase_add_test(table, table_parent_chains);
	tcase_add_test(table, table_weight_file_levels);
	tcase_add_test(table, table_weight_file_change_followed);
	tcase_add_test(table, table_parent_outlives_children);
	tcase_add_test(table, table_reload_changes_parents);
	tcase_add_test(table, table_account_subtree);
	tcase_add_test(table, table_reload_folds_a_subtree);
	tcase_add_test(table, table_only_rule_levels_take_the_reserve);
	tcase_add_test(table, table_delegated_subtree_is_a_level);
	tcase_add_test(table, table_delegated_subtree_is_capped_at_any_depth);
	tcase_set_timeout(table, 60);
	suite_add_tcase(s, pure);
	suite_add_tcase(s, table);
	return s;
}

int main(void)
{
	SRunner *sr = srunner_create(tenant_suite());
	int failed;

	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
