/* Shared between the control server and client; not part of the public face. */
#ifndef FUSESCHED_CTL_INTERNAL_H
#define FUSESCHED_CTL_INTERNAL_H

#include "fusesched/stats.h"
#include "fusesched/tenant.h"

#include <json-c/json.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CTL_NS_PER_S 1000000000ull

/* One line, no newlines inside, '/' unescaped (paths stay readable). */
#define CTL_JSON_FLAGS (JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE)

static inline void ctl_json_add_u64(struct json_object *o, const char *key, uint64_t v)
{
	json_object_object_add(o, key, json_object_new_uint64(v));
}

static inline void ctl_json_add_double(struct json_object *o, const char *key, double v)
{
	json_object_object_add(o, key, json_object_new_double(v));
}

/* ---- the tenant tree (tree.c): pure, tested without a daemon ------------- */

/* The parent index of a top-level node. */
#define CTL_TREE_ROOT SIZE_MAX

struct ctl_tree_node {
	uint32_t id;
	uint32_t parent;        /* an id; TENANT_ID_NONE at the top level */
	uint32_t weight;
	bool active;            /* its own requests: did I/O lately, or has some queued or in flight */
};

/*
 * UP[i]: the index of node i's parent, CTL_TREE_ROOT when it is top level
 * or its parent is not among NODES; DEPTH[i]: its distance from the top.
 * A parent cycle (never made by the tenant table) is cut so every node has
 * a depth. Returns 0 or -ENOMEM.
 */
int ctl_tree_link(const struct ctl_tree_node *nodes, size_t n, size_t *up, unsigned *depth);

/*
 * TARGET[i]: node i's target share of the store, as the scheduler divides
 * it: the product, over its path from the top, of its weight over the sum
 * of the weights of its competing siblings (itself included). A node
 * competes when it or a descendant is active; with none active anywhere,
 * every node does (what each would get if all competed). Non-competing
 * nodes get 0. A flat set gives exactly weight / sum. Returns 0 or -ENOMEM.
 */
int ctl_tree_target_shares(const struct ctl_tree_node *nodes, size_t n, double *target);

/* SUBTREE[i]: OWN[i] plus OWN of all node i's descendants. Returns 0 or -ENOMEM. */
int ctl_tree_subtree_sums(const struct ctl_tree_node *nodes, size_t n, const uint64_t *own,
			  uint64_t *subtree);

/*
 * ORDER: the nodes in pre-order (each right after its parent, before the
 * parent's next sibling); siblings, and top-level nodes, in the order RANK
 * (a permutation of 0..N-1) lists them. UP from ctl_tree_link. Returns 0 or -ENOMEM.
 */
int ctl_tree_order(const size_t *up, size_t n, const size_t *rank, size_t *order);

/* ---- the tenants of a stat reply (tenants.c) ----------------------------- */

struct ctl_row {
	uint32_t id, parent, weight;
	enum tenant_weight_source source;
	char *path;
	bool active;                /* did I/O in the last interval, or has requests queued or in flight */
	uint64_t interval_bytes, interval_read, interval_write, interval_ops;
	uint64_t interval_charged;  /* the scheduler's service over the interval (store time, in bytes) */
	struct stats_tenant_snapshot snap;
};

/*
 * The "tenants" array of a stat reply, one object per row in row order:
 * hierarchical target_share; share_interval and share_total (of bytes) and
 * time_share_interval and time_share_total (of the service the scheduler
 * charged: store time) of each row's subtree (itself and its descendants
 * among ROWS). NULL when out of memory.
 */
struct json_object *ctl_tenants_json(const struct ctl_row *rows, size_t n, double interval_s);

/* ---- the server's stat reply (server.c) ---------------------------------- */

struct ctl_server;

/*
 * What {"cmd":"stat"} answers now (an error reply when out of memory), for
 * the metrics HTTP listener: any thread, while the server is not freed.
 */
struct json_object *ctl_server_stat_reply(struct ctl_server *s);

/* ---- printing a stat reply (client.c) ------------------------------------ */

/*
 * The table of one mount's stat reply, as `fusesched stat` prints it.
 * SORT_KEY: a --sort column name, NULL for "tenant". Returns 0, or -EINVAL
 * for an unknown SORT_KEY.
 */
int ctl_print_table(FILE *out, struct json_object *mount, const char *sort_key);

/* The Prometheus text exposition of N mounts' stat replies. */
void ctl_print_prometheus(FILE *out, struct json_object *const *mounts, size_t n);

/*
 * PATH with every container id (a run of exactly 64 lowercase hex digits)
 * cut to its first 12, as `docker ps` shows them. Returns strlen(PATH) of
 * the result (truncated to OUT_BYTES like snprintf).
 */
size_t ctl_shorten_ids(char *out, size_t out_bytes, const char *path);

#endif
