/*
 * The tenants of a stat reply, from rows the server collected: no socket,
 * no daemon, so the JSON a tree of tenants gives is tested on fixed rows.
 */
#include "ctl_internal.h"

#include <stdlib.h>

static struct json_object *counters4(const uint64_t v[STATS_OP_NR])
{
	struct json_object *o = json_object_new_object();
	ctl_json_add_u64(o, "read", v[STATS_OP_READ]);
	ctl_json_add_u64(o, "write", v[STATS_OP_WRITE]);
	ctl_json_add_u64(o, "sync", v[STATS_OP_SYNC]);
	ctl_json_add_u64(o, "other", v[STATS_OP_OTHER]);
	return o;
}

static const char *weight_source_name(enum tenant_weight_source src)
{
	switch (src) {
	case TENANT_WEIGHT_FROM_RULE:
		return "rule";
	case TENANT_WEIGHT_FROM_CGROUP:
		return "cgroup";
	case TENANT_WEIGHT_FROM_DEFAULT:
		break;
	}
	return "default";
}

/* A row's shares of its subtree: target, of bytes and of store time. */
struct row_shares {
	double target, bytes_interval, bytes_total, time_interval, time_total;
};

static struct json_object *ctl_row_json(const struct ctl_row *r, const struct row_shares *sh,
					double interval_s)
{
	const struct sched_queue_stats *q = &r->snap.sched;
	struct json_object *t = json_object_new_object();
	ctl_json_add_u64(t, "id", r->id);
	json_object_object_add(t, "parent",
			       r->parent == TENANT_ID_NONE ? NULL : json_object_new_uint64(r->parent));
	json_object_object_add(t, "cgroup", json_object_new_string(r->path));
	/* Where the scheduler placed its queue: its parent's group, its own
	 * (a parent's own processes share its group with its children), or
	 * the root (null, also before its first request). */
	json_object_object_add(t, "queue_group",
			       q->parent_id == SCHED_GROUP_NONE || !r->snap.active
				       ? NULL
				       : json_object_new_uint64(q->parent_id));
	ctl_json_add_u64(t, "weight", r->weight);
	json_object_object_add(t, "weight_source", json_object_new_string(weight_source_name(r->source)));
	json_object_object_add(t, "active", json_object_new_boolean(r->active));
	ctl_json_add_double(t, "target_share", sh->target);
	ctl_json_add_double(t, "share_interval", sh->bytes_interval);
	ctl_json_add_double(t, "share_total", sh->bytes_total);
	ctl_json_add_double(t, "time_share_interval", sh->time_interval);
	ctl_json_add_double(t, "time_share_total", sh->time_total);
	ctl_json_add_double(t, "read_bytes_per_s", interval_s > 0 ? (double)r->interval_read / interval_s : 0);
	ctl_json_add_double(t, "write_bytes_per_s", interval_s > 0 ? (double)r->interval_write / interval_s : 0);
	ctl_json_add_double(t, "iops", interval_s > 0 ? (double)r->interval_ops / interval_s : 0);
	json_object_object_add(t, "ops", counters4(r->snap.ops));
	json_object_object_add(t, "bytes", counters4(r->snap.bytes));
	ctl_json_add_u64(t, "errors", r->snap.errors);
	ctl_json_add_u64(t, "solo_ops", r->snap.solo_ops);
	struct json_object *lat = json_object_new_object();
	/* Quantiles are bucket bounds: never report one above the true maximum. */
	uint64_t p50 = stats_latency_quantile_ns(r->snap.latency_buckets, 0.50);
	uint64_t p99 = stats_latency_quantile_ns(r->snap.latency_buckets, 0.99);
	ctl_json_add_u64(lat, "p50", p50 < r->snap.latency_max_ns ? p50 : r->snap.latency_max_ns);
	ctl_json_add_u64(lat, "p99", p99 < r->snap.latency_max_ns ? p99 : r->snap.latency_max_ns);
	ctl_json_add_u64(lat, "max", r->snap.latency_max_ns);
	json_object_object_add(t, "latency_ns", lat);
	ctl_json_add_u64(t, "queued", q->pending);
	ctl_json_add_u64(t, "inflight", q->inflight);
	ctl_json_add_u64(t, "idle_windows", q->idle_windows);
	ctl_json_add_u64(t, "idle_ns", q->idle_ns);
	struct json_object *inj = json_object_new_object();
	ctl_json_add_u64(inj, "waker", q->injected_ops[SCHED_INJECT_WAKER]);
	ctl_json_add_u64(inj, "fsync", q->injected_ops[SCHED_INJECT_SYNC]);
	ctl_json_add_u64(inj, "general", q->injected_ops[SCHED_INJECT_GENERAL]);
	json_object_object_add(t, "injected", inj);
	struct json_object *exp = json_object_new_object();
	ctl_json_add_u64(exp, "exhausted", q->expirations[SCHED_EXPIRE_EXHAUSTED]);
	ctl_json_add_u64(exp, "timeout", q->expirations[SCHED_EXPIRE_TIMEOUT]);
	ctl_json_add_u64(exp, "emptied", q->expirations[SCHED_EXPIRE_EMPTIED]);
	ctl_json_add_u64(exp, "too_idle", q->expirations[SCHED_EXPIRE_TOO_IDLE]);
	ctl_json_add_u64(exp, "preempted", q->expirations[SCHED_EXPIRE_PREEMPTED]);
	json_object_object_add(t, "expirations", exp);
	ctl_json_add_u64(t, "budget_bytes", q->budget_bytes);
	ctl_json_add_u64(t, "think_ns", q->think_ns);
	ctl_json_add_u64(t, "cycle_alone_ns", q->cycle_alone_ns);
	ctl_json_add_u64(t, "inject_limit", q->inject_limit);
	json_object_object_add(t, "door_shut", json_object_new_boolean(q->door_shut));
	return t;
}

/* What each row's subtree got of a counter, over SUM. */
static double share_of(uint64_t sub, uint64_t sum)
{
	return sum ? (double)sub / (double)sum : 0;
}

struct json_object *ctl_tenants_json(const struct ctl_row *rows, size_t n, double interval_s)
{
	size_t m = n ? n : 1;
	struct ctl_tree_node *nodes = malloc(m * sizeof(*nodes));
	double *target = malloc(m * sizeof(*target));
	/* Own and subtree counters: bytes and charged service, over the
	 * interval and since mount. */
	enum { BYTES_INTERVAL, BYTES_TOTAL, TIME_INTERVAL, TIME_TOTAL, NCOUNTERS };
	uint64_t *own = malloc(2 * NCOUNTERS * m * sizeof(*own));
	struct json_object *tenants = NULL;
	if (!nodes || !target || !own)
		goto out;
	uint64_t *sub = own + NCOUNTERS * m, sum[NCOUNTERS] = {0};
	for (size_t i = 0; i < n; i++) {
		const struct ctl_row *r = &rows[i];
		nodes[i] = (struct ctl_tree_node){
			.id = r->id, .parent = r->parent, .weight = r->weight, .active = r->active};
		own[BYTES_INTERVAL * m + i] = r->interval_bytes;
		own[BYTES_TOTAL * m + i] = r->snap.bytes[STATS_OP_READ] + r->snap.bytes[STATS_OP_WRITE];
		own[TIME_INTERVAL * m + i] = r->interval_charged;
		own[TIME_TOTAL * m + i] = r->snap.sched.charged_bytes;
		for (int c = 0; c < NCOUNTERS; c++)
			sum[c] += own[c * m + i];
	}
	if (ctl_tree_target_shares(nodes, n, target) < 0)
		goto out;
	for (int c = 0; c < NCOUNTERS; c++)
		if (ctl_tree_subtree_sums(nodes, n, own + c * m, sub + c * m) < 0)
			goto out;
	/*
	 * A parent's received shares are its subtree's, like its target: the
	 * two compare like with like, and top-level shares still add up to 1.
	 */
	tenants = json_object_new_array();
	for (size_t i = 0; i < n; i++) {
		const struct row_shares sh = {
			.target = target[i],
			.bytes_interval = share_of(sub[BYTES_INTERVAL * m + i], sum[BYTES_INTERVAL]),
			.bytes_total = share_of(sub[BYTES_TOTAL * m + i], sum[BYTES_TOTAL]),
			.time_interval = share_of(sub[TIME_INTERVAL * m + i], sum[TIME_INTERVAL]),
			.time_total = share_of(sub[TIME_TOTAL * m + i], sum[TIME_TOTAL]),
		};
		json_object_array_add(tenants, ctl_row_json(&rows[i], &sh, interval_s));
	}
out:
	free(nodes);
	free(target);
	free(own);
	return tenants;
}
