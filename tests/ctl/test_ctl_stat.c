/*
 * `fusesched stat` without a daemon: the tenant tree's target shares, the
 * tenants JSON built from rows, and the table and Prometheus printers fed a
 * reply document directly.
 */
#include "ctl_internal.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define NONE TENANT_ID_NONE
#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEX63 "123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void targets_of(const struct ctl_tree_node *nodes, size_t n, double *target)
{
	ck_assert_int_eq(ctl_tree_target_shares(nodes, n, target), 0);
}

/* ---- target shares ------------------------------------------------------- */

START_TEST(flat_targets_are_weight_over_the_active_sum)
{
	const struct ctl_tree_node active[] = {
		{1, NONE, 300, true}, {2, NONE, 100, true}, {3, NONE, 600, false}};
	double t[3];
	targets_of(active, 3, t);
	/* Exactly what the flat server computed: weight / sum, no rounding of its own. */
	ck_assert(t[0] == (double)300 / (double)400);
	ck_assert(t[1] == (double)100 / (double)400);
	ck_assert(t[2] == 0);
	/* Nobody active: what each would get if all competed. */
	const struct ctl_tree_node idle[] = {
		{1, NONE, 300, false}, {2, NONE, 100, false}, {3, NONE, 600, false}};
	targets_of(idle, 3, t);
	ck_assert(t[0] == (double)300 / (double)1000);
	ck_assert(t[1] == (double)100 / (double)1000);
	ck_assert(t[2] == (double)600 / (double)1000);
}
END_TEST

/* Two pods of equal weight, one container in the first, three in the second; children listed before parents. */
static const struct ctl_tree_node PODS[] = {
	{21, 20, 50, true}, {11, 10, 100, true}, {22, 20, 50, true},
	{10, NONE, 100, false}, {23, 20, 50, true}, {20, NONE, 100, false},
};

START_TEST(pod_of_one_and_pod_of_three_get_a_half_and_a_sixth)
{
	double t[6];
	targets_of(PODS, 6, t);
	ck_assert_double_eq_tol(t[1], 0.5, 1e-12);       /* the lone container */
	ck_assert_double_eq_tol(t[0], 1.0 / 6, 1e-12);
	ck_assert_double_eq_tol(t[2], 1.0 / 6, 1e-12);
	ck_assert_double_eq_tol(t[4], 1.0 / 6, 1e-12);
	/* The pods, active only through their containers, hold half each. */
	ck_assert_double_eq_tol(t[3], 0.5, 1e-12);
	ck_assert_double_eq_tol(t[5], 0.5, 1e-12);
}
END_TEST

START_TEST(an_inactive_sibling_does_not_count)
{
	struct ctl_tree_node nodes[6];
	memcpy(nodes, PODS, sizeof(nodes));
	nodes[4].active = false; /* container 23 */
	double t[6];
	targets_of(nodes, 6, t);
	ck_assert_double_eq_tol(t[0], 0.25, 1e-12);
	ck_assert_double_eq_tol(t[2], 0.25, 1e-12);
	ck_assert(t[4] == 0);
	/* A whole pod idle: the other pod has the store, and the idle one nothing. */
	nodes[0].active = nodes[2].active = false;
	targets_of(nodes, 6, t);
	ck_assert_double_eq_tol(t[1], 1.0, 1e-12);
	ck_assert_double_eq_tol(t[3], 1.0, 1e-12);
	ck_assert(t[5] == 0 && t[0] == 0 && t[2] == 0);
}
END_TEST

START_TEST(a_node_active_only_through_a_grandchild_competes)
{
	/* /a (100) > /a/m (100) > /a/m/leaf, the only active one below /a; /b (300) active. */
	const struct ctl_tree_node nodes[] = {
		{1, NONE, 100, false}, {2, 1, 100, false}, {3, 2, 100, true},
		{4, NONE, 300, true}, {5, 1, 900, false},
	};
	double t[5];
	targets_of(nodes, 5, t);
	ck_assert_double_eq_tol(t[0], 0.25, 1e-12);
	ck_assert_double_eq_tol(t[1], 0.25, 1e-12); /* its idle heavy sibling 5 does not count */
	ck_assert_double_eq_tol(t[2], 0.25, 1e-12);
	ck_assert_double_eq_tol(t[3], 0.75, 1e-12);
	ck_assert(t[4] == 0);
}
END_TEST

START_TEST(missing_parents_are_top_level_and_cycles_end)
{
	/* 2's parent 9 is not listed: 2 is top level. 3 and 4 are each other's parent. */
	const struct ctl_tree_node nodes[] = {
		{1, NONE, 100, true}, {2, 9, 100, true}, {3, 4, 100, true}, {4, 3, 100, true},
	};
	size_t up[4];
	unsigned depth[4];
	ck_assert_int_eq(ctl_tree_link(nodes, 4, up, depth), 0);
	ck_assert_uint_eq(up[0], CTL_TREE_ROOT);
	ck_assert_uint_eq(up[1], CTL_TREE_ROOT);
	ck_assert_uint_eq(depth[1], 0);
	/* The cycle is cut once: one of the two is a root, the other its child. */
	ck_assert((up[2] == CTL_TREE_ROOT) != (up[3] == CTL_TREE_ROOT));
	ck_assert_uint_eq(depth[2] + depth[3], 1);
	double t[4];
	targets_of(nodes, 4, t);
	ck_assert_double_eq_tol(t[0] + t[1] + t[2] + t[3], 1.0 + 1.0 / 3, 1e-12);
}
END_TEST

START_TEST(subtree_sums_add_every_descendant)
{
	const struct ctl_tree_node nodes[] = {
		{3, 2, 1, false}, {1, NONE, 1, false}, {2, 1, 1, false}, {4, 1, 1, false}, {5, NONE, 1, false},
	};
	const uint64_t own[] = {1, 10, 100, 1000, 10000};
	uint64_t sub[5];
	ck_assert_int_eq(ctl_tree_subtree_sums(nodes, 5, own, sub), 0);
	ck_assert_uint_eq(sub[0], 1);
	ck_assert_uint_eq(sub[1], 1111);
	ck_assert_uint_eq(sub[2], 101);
	ck_assert_uint_eq(sub[3], 1000);
	ck_assert_uint_eq(sub[4], 10000);
}
END_TEST

START_TEST(tree_order_puts_children_after_their_parent_in_rank_order)
{
	/* 0 and 3 top level; 1, 2 children of 0; 4 child of 1. */
	const size_t up[] = {CTL_TREE_ROOT, 0, 0, CTL_TREE_ROOT, 1};
	const size_t rank[] = {3, 2, 4, 1, 0}; /* as a sort would list them */
	size_t order[5];
	ck_assert_int_eq(ctl_tree_order(up, 5, rank, order), 0);
	const size_t want[] = {3, 0, 2, 1, 4};
	for (size_t i = 0; i < 5; i++)
		ck_assert_uint_eq(order[i], want[i]);
}
END_TEST

/* ---- the tenants JSON ---------------------------------------------------- */

static struct ctl_row row(uint32_t id, uint32_t parent, const char *path, bool active,
			  uint64_t interval_bytes, uint64_t total_bytes)
{
	struct ctl_row r;
	memset(&r, 0, sizeof(r));
	r.id = id;
	r.parent = parent;
	r.weight = 100;
	r.path = (char *)path;
	r.active = active;
	r.interval_bytes = r.interval_write = interval_bytes;
	r.snap.bytes[STATS_OP_WRITE] = total_bytes;
	return r;
}

static struct json_object *by_id(struct json_object *tenants, uint32_t id)
{
	for (size_t i = 0; i < json_object_array_length(tenants); i++) {
		struct json_object *t = json_object_array_get_idx(tenants, i), *v;
		if (json_object_object_get_ex(t, "id", &v) && json_object_get_int64(v) == id)
			return t;
	}
	ck_abort_msg("no tenant %u", id);
	return NULL;
}

static double dbl(struct json_object *t, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(t, key, &v), "no %s", key);
	return json_object_get_double(v);
}

START_TEST(json_has_parent_ids_tree_targets_and_subtree_shares)
{
	struct ctl_row rows[] = {
		row(7, 5, "/pod/c1", true, 300, 3000), row(0, NONE, "", false, 0, 0),
		row(5, NONE, "/pod", false, 0, 0), row(8, 5, "/pod/c2", true, 100, 1000),
		row(9, NONE, "/other", true, 400, 4000),
	};
	/* Charged service (store time in bytes): c1's requests cost more per byte. */
	rows[0].interval_charged = 500;
	rows[0].snap.sched.charged_bytes = 5000;
	rows[3].interval_charged = 100;
	rows[3].snap.sched.charged_bytes = 1000;
	rows[4].interval_charged = 400;
	rows[4].snap.sched.charged_bytes = 4000;
	struct json_object *tenants = ctl_tenants_json(rows, 5, 1.0), *v;
	ck_assert_ptr_nonnull(tenants);
	/* A child names its parent's id; a top-level tenant has the key, null. */
	ck_assert(json_object_object_get_ex(by_id(tenants, 7), "parent", &v));
	ck_assert(json_object_is_type(v, json_type_int));
	ck_assert_int_eq(json_object_get_int64(v), 5);
	ck_assert(json_object_object_get_ex(by_id(tenants, 5), "parent", &v));
	ck_assert(json_object_is_type(v, json_type_null));
	ck_assert(json_object_object_get_ex(by_id(tenants, 0), "parent", &v));
	ck_assert(json_object_is_type(v, json_type_null));
	ck_assert_double_eq_tol(dbl(by_id(tenants, 5), "target_share"), 0.5, 1e-12);
	ck_assert_double_eq_tol(dbl(by_id(tenants, 7), "target_share"), 0.25, 1e-12);
	ck_assert_double_eq_tol(dbl(by_id(tenants, 9), "target_share"), 0.5, 1e-12);
	ck_assert(dbl(by_id(tenants, 0), "target_share") == 0);
	/* The pod's received shares are its containers' together. */
	ck_assert_double_eq_tol(dbl(by_id(tenants, 5), "share_interval"), 0.5, 1e-12);
	ck_assert_double_eq_tol(dbl(by_id(tenants, 5), "share_total"), 0.5, 1e-12);
	ck_assert_double_eq_tol(dbl(by_id(tenants, 7), "share_interval"), 0.375, 1e-12);
	ck_assert_double_eq_tol(dbl(by_id(tenants, 8), "share_total"), 0.125, 1e-12);
	/* Store-time shares, from the scheduler's charged service, by subtree
	 * too: they differ from the byte shares when requests cost
	 * differently per byte. */
	ck_assert_double_eq_tol(dbl(by_id(tenants, 5), "time_share_interval"), 0.6, 1e-12);
	ck_assert_double_eq_tol(dbl(by_id(tenants, 7), "time_share_interval"), 0.5, 1e-12);
	ck_assert_double_eq_tol(dbl(by_id(tenants, 9), "time_share_total"), 0.4, 1e-12);
	ck_assert_double_eq_tol(dbl(by_id(tenants, 0), "time_share_total"), 0, 1e-12);
	/* Its own rates stay its own (none). */
	ck_assert(dbl(by_id(tenants, 5), "write_bytes_per_s") == 0);
	/* Row order is kept, and the JSON text carries the id. */
	ck_assert_int_eq(json_object_get_int64(json_object_object_get(json_object_array_get_idx(tenants, 0), "id")), 7);
	ck_assert_ptr_nonnull(strstr(json_object_to_json_string_ext(tenants, CTL_JSON_FLAGS),
				     "\"id\":7,\"parent\":5,\"cgroup\":\"/pod/c1\""));
	json_object_put(tenants);
}
END_TEST

/* ---- printers ------------------------------------------------------------ */

/* A mount's stat reply; TENANTS is the inside of its array. */
static struct json_object *doc(const char *tenants)
{
	char text[16384];
	snprintf(text, sizeof(text),
		 "{\"ok\":true,\"mount\":\"/mnt/m\",\"backing\":\"/srv/b\",\"policy\":\"bfq\","
		 "\"inflight\":3,\"max_inflight\":32,\"reserved_slots\":1,\"max_background\":128,\"peak_rate_bytes_per_s\":734003200,"
		 "\"uptime_s\":3725.5,\"interval_s\":1.0,\"tenants\":[%s]}",
		 tenants);
	struct json_object *o = json_tokener_parse(text);
	ck_assert_ptr_nonnull(o);
	return o;
}

/* What ctl_print_table prints; freed by the caller. */
static char *table(struct json_object *mount, const char *sort)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(ctl_print_table(f, mount, sort), 0);
	fclose(f);
	return text;
}

static char *prometheus(struct json_object *mount)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	ck_assert_ptr_nonnull(f);
	ctl_print_prometheus(f, &mount, 1);
	fclose(f);
	return text;
}

/* The TENANT cells of the table's rows (after the header lines), in order. */
static size_t tenant_cells(char *text, char cells[][128], size_t max)
{
	size_t n = 0, line = 0;
	for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		if (line++ < 2)
			continue;
		ck_assert_uint_lt(n, max);
		/* The cell ends where the padding before WEIGHT starts: two spaces or more. */
		char *end = strstr(l + strspn(l, " "), "  ");
		ck_assert_ptr_nonnull(end);
		while (end > l && end[-1] == ' ')
			end--;
		/* An indented cell's leading spaces are part of it. */
		snprintf(cells[n++], 128, "%.*s", (int)(end - l), l);
	}
	return n;
}

#define TREE_TENANTS                                                                               \
	"{\"id\":5,\"parent\":null,\"cgroup\":\"/system.slice/docker-" HEX64 ".scope\",\"weight\":100},"   \
	"{\"id\":4,\"parent\":3,\"cgroup\":\"/kubepods/poda/cri-containerd-" HEX64 ".scope\",\"weight\":100}," \
	"{\"id\":2,\"parent\":1,\"cgroup\":\"/kubepods/podb\",\"weight\":500},"                            \
	"{\"id\":6,\"parent\":2,\"cgroup\":\"/kubepods/podb/ctr\",\"weight\":100},"                         \
	"{\"id\":3,\"parent\":1,\"cgroup\":\"/kubepods/poda\",\"weight\":200},"                             \
	"{\"id\":1,\"parent\":null,\"cgroup\":\"/kubepods\",\"weight\":50}"

START_TEST(table_rows_are_a_tree_indented_relative_and_short)
{
	struct json_object *m = doc(TREE_TENANTS);
	char *text = table(m, NULL), cells[8][128];
	ck_assert_ptr_null(strstr(text, HEX64)); /* no full id anywhere in the table */
	ck_assert_uint_eq(tenant_cells(text, cells, 8), 6);
	ck_assert_str_eq(cells[0], "/kubepods");
	ck_assert_str_eq(cells[1], "  poda");
	ck_assert_str_eq(cells[2], "    cri-containerd-0123456789ab.scope");
	ck_assert_str_eq(cells[3], "  podb");
	ck_assert_str_eq(cells[4], "    ctr");
	ck_assert_str_eq(cells[5], "/system.slice/docker-0123456789ab.scope");
	free(text);
	/* By weight within each level: podb (500) before poda (200), /kubepods (50) last. */
	text = table(m, "weight");
	ck_assert_uint_eq(tenant_cells(text, cells, 8), 6);
	ck_assert_str_eq(cells[0], "/system.slice/docker-0123456789ab.scope");
	ck_assert_str_eq(cells[1], "/kubepods");
	ck_assert_str_eq(cells[2], "  podb");
	ck_assert_str_eq(cells[3], "    ctr");
	ck_assert_str_eq(cells[4], "  poda");
	ck_assert_str_eq(cells[5], "    cri-containerd-0123456789ab.scope");
	free(text);
	json_object_put(m);
}
END_TEST

#define FLAT_TENANTS(parent)                                                                       \
	"{\"id\":2," parent "\"cgroup\":\"/demo-bronze\",\"weight\":100,\"target_share\":0.111111,"     \
	"\"share_interval\":0.481,\"share_total\":0.5,\"time_share_interval\":0.3,"                   \
	"\"read_bytes_per_s\":0,"                                                                       \
	"\"write_bytes_per_s\":128974848,\"iops\":1970,"                                               \
	"\"latency_ns\":{\"p50\":262144,\"p99\":1048576,\"max\":24700000},\"queued\":2,\"inflight\":1," \
	"\"idle_windows\":206,\"idle_ns\":21400000,"                                                   \
	"\"injected\":{\"waker\":234,\"fsync\":0,\"general\":1140},"                                   \
	"\"expirations\":{\"exhausted\":116,\"timeout\":0,\"emptied\":1330,\"too_idle\":3,"            \
	"\"preempted\":173}},"                                                                         \
	"{\"id\":1," parent "\"cgroup\":\"/demo-gold\",\"weight\":800,\"target_share\":0.888889,"       \
	"\"share_interval\":0.519,\"share_total\":0.5,\"time_share_interval\":0.7,"                   \
	"\"read_bytes_per_s\":0,"                                                                       \
	"\"write_bytes_per_s\":139460608,\"iops\":2120,"                                               \
	"\"latency_ns\":{\"p50\":262144,\"p99\":1048576,\"max\":25500000},\"queued\":0,\"inflight\":0," \
	"\"idle_windows\":1090,\"idle_ns\":125000000,"                                                 \
	"\"injected\":{\"waker\":1,\"fsync\":0,\"general\":9},"                                        \
	"\"expirations\":{\"exhausted\":637,\"timeout\":0,\"emptied\":1900,\"too_idle\":69,"           \
	"\"preempted\":0}},"                                                                           \
	"{\"id\":0," parent "\"cgroup\":\"\",\"weight\":100,\"target_share\":0,\"share_interval\":0,"  \
	"\"share_total\":0,\"time_share_interval\":0,\"latency_ns\":{\"p50\":0,\"p99\":0,\"max\":0}}"

/* Printed by the flat printer before the tree: a flat mount must print the same bytes. */
static const char FLAT_BY_WEIGHT[] =
	"mount /mnt/m  backing /srv/b  policy bfq  in flight 3/32 (1 kept)  kernel queue 128  peak 700MiB/s  uptime 1h02m05s\n"
	"TENANT       WEIGHT TARGET  SHARE SH.ALL   TIME   READ/s  WRITE/s   IOPS     P50     P99     MAX QUEUED  INFL  IDLE#    IDLE   INJ w/f/g   EXP x/t/e/i/p\n"
	"/demo-gold      800  88.9%  51.9%  50.0%  70.0%       0B   133MiB  2.12k   262us  1.05ms  25.5ms      0     0  1.09k   125ms       1/0/9 637/0/1.90k/69/0\n"
	"(default)       100   0.0%   0.0%   0.0%   0.0%       0B       0B      0     0ns     0ns     0ns      0     0      0     0ns       0/0/0       0/0/0/0/0\n"
	"/demo-bronze    100  11.1%  48.1%  50.0%  30.0%       0B   123MiB  1.97k   262us  1.05ms  24.7ms      2     1    206  21.4ms 234/0/1.14k 116/0/1.33k/3/173\n";

/* The header names requests hung at the store only when there are some. */
START_TEST(header_names_hung_requests_when_there_are_some)
{
	struct json_object *mount = doc("");
	char *text = table(mount, NULL);
	ck_assert_msg(strstr(text, "in flight 3/32 (1 kept)  "), "%s", text);
	free(text);
	json_object_object_add(mount, "hung", json_object_new_int(2));
	json_object_object_add(mount, "executors", json_object_new_int(34));
	text = table(mount, NULL);
	ck_assert_msg(strstr(text, "in flight 3/32 (1 kept, 2 hung, 34 executors)  "), "%s", text);
	free(text);
	json_object_put(mount);
}
END_TEST

START_TEST(flat_table_is_unchanged_with_null_or_no_parents)
{
	/* null parents (this daemon) and no parent key at all (a daemon older than the tree). */
	const char *tenants[] = {FLAT_TENANTS("\"parent\":null,"), FLAT_TENANTS("")};
	for (int i = 0; i < 2; i++) {
		struct json_object *m = doc(tenants[i]);
		char *text = table(m, "weight");
		ck_assert_str_eq(text, FLAT_BY_WEIGHT);
		free(text);
		text = table(m, NULL);
		char cells[4][128];
		ck_assert_uint_eq(tenant_cells(text, cells, 4), 3);
		ck_assert_str_eq(cells[0], "(default)");
		ck_assert_str_eq(cells[1], "/demo-bronze");
		ck_assert_str_eq(cells[2], "/demo-gold");
		free(text);
		json_object_put(m);
	}
}
END_TEST

START_TEST(unknown_sort_key_is_refused)
{
	struct json_object *m = doc("");
	ck_assert_int_eq(ctl_print_table(stdout, m, "bogus"), -EINVAL);
	json_object_put(m);
}
END_TEST

static const char *shortened(const char *path)
{
	static char out[512];
	size_t len = ctl_shorten_ids(out, sizeof(out), path);
	ck_assert_uint_eq(len, strlen(out));
	return out;
}

START_TEST(container_ids_are_cut_to_twelve_hex_digits)
{
	ck_assert_str_eq(shortened("/system.slice/docker-" HEX64 ".scope"),
			 "/system.slice/docker-0123456789ab.scope");
	ck_assert_str_eq(shortened("/kubepods.slice/kubepods-pod1.slice/cri-containerd-" HEX64 ".scope"),
			 "/kubepods.slice/kubepods-pod1.slice/cri-containerd-0123456789ab.scope");
	ck_assert_str_eq(shortened("/machine.slice/libpod-" HEX64), "/machine.slice/libpod-0123456789ab");
	ck_assert_str_eq(shortened("/kubepods/burstable/pod1/" HEX64 "/x"),
			 "/kubepods/burstable/pod1/0123456789ab/x");
	ck_assert_str_eq(shortened("/a-" HEX64 "/b-" HEX64), "/a-0123456789ab/b-0123456789ab");
	/* Not a 64-digit run: left alone (63 digits; 65; uppercase; a uuid). */
	ck_assert_str_eq(shortened("/docker-" HEX64 "0"), "/docker-" HEX64 "0");
	ck_assert_str_eq(shortened("/docker-" HEX63), "/docker-" HEX63);
	ck_assert_str_eq(shortened("/DOCKER-0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF"),
			 "/DOCKER-0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF0123456789ABCDEF");
	ck_assert_str_eq(shortened("/pod4f1c2a9e-6b7d-4e1f-9a2b-3c4d5e6f7a8b"),
			 "/pod4f1c2a9e-6b7d-4e1f-9a2b-3c4d5e6f7a8b");
	/* Truncated like snprintf, with the full length returned. */
	char small[10];
	ck_assert_uint_eq(ctl_shorten_ids(small, sizeof(small), "/docker-" HEX64), 20);
	ck_assert_str_eq(small, "/docker-0");
}
END_TEST

START_TEST(prometheus_names_the_parent_of_children_only)
{
	struct json_object *m = doc(TREE_TENANTS);
	char *text = prometheus(m);
	/* Full paths in tenant and parent: the tree can be rebuilt, ids are not cut. */
	ck_assert_ptr_nonnull(strstr(text, "fusesched_tenant_weight{mount=\"/mnt/m\",tenant=\"/kubepods/poda/cri-containerd-" HEX64
					   ".scope\",parent=\"/kubepods/poda\"} 100\n"));
	ck_assert_ptr_nonnull(strstr(text, "fusesched_tenant_weight{mount=\"/mnt/m\",tenant=\"/kubepods/podb\",parent=\"/kubepods\"} 500\n"));
	ck_assert_ptr_nonnull(strstr(text, "fusesched_tenant_weight{mount=\"/mnt/m\",tenant=\"/kubepods\"} 50\n"));
	free(text);
	json_object_put(m);
	/* Flat: not one parent label, and the samples as before. */
	m = doc(FLAT_TENANTS("\"parent\":null,"));
	text = prometheus(m);
	ck_assert_ptr_null(strstr(text, "parent="));
	ck_assert_ptr_nonnull(strstr(text, "\nfusesched_tenant_weight{mount=\"/mnt/m\",tenant=\"/demo-gold\"} 800\n"));
	ck_assert_ptr_nonnull(strstr(text, "\nfusesched_tenant_injected_total{mount=\"/mnt/m\",tenant=\"/demo-bronze\",kind=\"waker\"} 234\n"));
	free(text);
	json_object_put(m);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("ctl_stat");
	TCase *tree = tcase_create("tree");
	tcase_add_test(tree, flat_targets_are_weight_over_the_active_sum);
	tcase_add_test(tree, pod_of_one_and_pod_of_three_get_a_half_and_a_sixth);
	tcase_add_test(tree, an_inactive_sibling_does_not_count);
	tcase_add_test(tree, a_node_active_only_through_a_grandchild_competes);
	tcase_add_test(tree, missing_parents_are_top_level_and_cycles_end);
	tcase_add_test(tree, subtree_sums_add_every_descendant);
	tcase_add_test(tree, tree_order_puts_children_after_their_parent_in_rank_order);
	suite_add_tcase(s, tree);
	TCase *out = tcase_create("output");
	tcase_add_test(out, json_has_parent_ids_tree_targets_and_subtree_shares);
	tcase_add_test(out, table_rows_are_a_tree_indented_relative_and_short);
	tcase_add_test(out, flat_table_is_unchanged_with_null_or_no_parents);
	tcase_add_test(out, header_names_hung_requests_when_there_are_some);
	tcase_add_test(out, unknown_sort_key_is_refused);
	tcase_add_test(out, container_ids_are_cut_to_twelve_hex_digits);
	tcase_add_test(out, prometheus_names_the_parent_of_children_only);
	suite_add_tcase(s, out);
	SRunner *sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
