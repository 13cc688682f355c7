/* Tenants: caller pid -> cgroup path -> tenant id and weight.
 *
 * Building blocks (pure, tested on fixtures):
 *   tenant_parse_proc_cgroup   text of /proc/<pid>/cgroup -> v2 and blkio paths
 *   tenant_select_key          the tenant key for hierarchy = auto|v2|blkio
 *   tenant_parse_mountinfo     /proc/self/mountinfo -> cgroup v2 / blkio roots
 *   tenant_match_rule          first [group] rule matching a cgroup path
 *   tenant_parse_weight_file   io.bfq.weight / io.weight / blkio.* contents
 *   tenant_read_cgroup_weight  the cgroup's own weight, from a given root
 *   tenant_resolve_weight      rule, else cgroup files, else default_weight
 *
 * The table (struct tenant_table) is what the daemon uses from every FUSE
 * worker thread: tenant_resolve() is lock-free on a cache hit.  Time is
 * always an argument (CLOCK_MONOTONIC nanoseconds in the daemon).
 */
#ifndef FUSESCHED_TENANT_H
#define FUSESCHED_TENANT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "fusesched/config.h"

/* ---- /proc/<pid>/cgroup ------------------------------------------------- */

/* Paths point into the parsed text (not NUL-terminated; use the lengths). */
struct tenant_cgroup_paths {
	const char *v2;		/* "0::PATH" line, NULL if absent */
	size_t v2_len;
	bool v2_deleted;	/* the kernel appended " (deleted)" */
	const char *blkio;	/* v1 line whose controller list has blkio */
	size_t blkio_len;
	bool blkio_deleted;
};

enum tenant_hierarchy_id {
	TENANT_HIER_V2,
	TENANT_HIER_BLKIO,
};

/* Returns 0, or -EINVAL if a line is malformed (no two ':'). */
int tenant_parse_proc_cgroup(const char *text, size_t len,
			     struct tenant_cgroup_paths *out);

/* Picks the key for MODE (auto: v2 when present and not "/", else blkio,
 * else the v2 "/").  Returns the hierarchy it came from, or -ENOENT. */
int tenant_select_key(const struct tenant_cgroup_paths *paths,
		      enum config_hierarchy mode, const char **key,
		      size_t *key_len);

/* ---- cgroup mount points ------------------------------------------------ */

#define TENANT_PATH_MAX 4096

struct tenant_cgroup_roots {
	char v2[TENANT_PATH_MAX];	/* "" if not mounted */
	char blkio[TENANT_PATH_MAX];	/* "" if not mounted */
};

/* From the text of /proc/self/mountinfo: the first cgroup2 mount and the
 * first v1 cgroup mount whose super options name blkio, mounted at their
 * hierarchy root.  Octal escapes (\040) in mount points are decoded. */
void tenant_parse_mountinfo(const char *text, size_t len,
			    struct tenant_cgroup_roots *out);

/* ---- weights ------------------------------------------------------------ */

/* Index of the first rule whose pattern matches PATH, or -1.  A pattern
 * matches if it equals PATH, or component by component: "**" as a whole
 * component matches any number of components (none too, unless it is the
 * last: "/a/STARSTAR" matches "/a/b" and "/a/b/c" but not "/a"); any other
 * component is an fnmatch() glob whose wildcards never cross a slash:
 * "/a/STAR" matches "/a/b" but not "/a/b/c" (STAR being the asterisk). */
int tenant_match_rule(const struct config_group_rule *rules, size_t count,
		      const char *path);

enum tenant_weight_file {
	TENANT_WEIGHT_IO_BFQ,		/* v2 io.bfq.weight, 1..1000 */
	TENANT_WEIGHT_IO,		/* v2 io.weight, 1..10000, scaled */
	TENANT_WEIGHT_BLKIO_BFQ,	/* v1 blkio.bfq.weight, 1..1000 */
	TENANT_WEIGHT_BLKIO,		/* v1 blkio.weight, 10..1000 */
};

/* Parses a weight file's text ("N" or "default N", per-device lines
 * ignored) into 1..1000.  Returns the weight or -EINVAL. */
int tenant_parse_weight_file(enum tenant_weight_file kind, const char *text);

/* The cgroup's own weight: io.bfq.weight, io.weight under ROOTS->v2 + V2_PATH,
 * then blkio.bfq.weight, blkio.weight under ROOTS->blkio + BLKIO_PATH (NULL
 * paths or empty roots are skipped).  A file owned by a user other than
 * root counts only where that user owns the cgroup's parent too (below a
 * subtree delegated to it, never on the delegated cgroup itself).
 * Returns 1..1000 or -ENOENT. */
int tenant_read_cgroup_weight(const struct tenant_cgroup_roots *roots,
			      const char *v2_path, const char *blkio_path);

/* Whether cgroup PATH of hierarchy HIER was delegated: a user other than
 * root owns its directory and not its parent's (systemd's Delegate=, a
 * rootless container's cgroup).  Such a cgroup is a level of the tenant
 * tree whatever its weight, so that the cgroups its user makes below it
 * divide its share, as the kernel's controllers have it. */
bool tenant_cgroup_delegated(const struct tenant_cgroup_roots *roots,
			     enum tenant_hierarchy_id hier, const char *path);

/* The length of PATH's nearest proper ancestor delegated to a user
 * (tenant_cgroup_delegated), or 0 if there is none. */
size_t tenant_cgroup_delegation_len(const struct tenant_cgroup_roots *roots,
				    enum tenant_hierarchy_id hier,
				    const char *path);

enum tenant_weight_source {
	TENANT_WEIGHT_FROM_RULE,
	TENANT_WEIGHT_FROM_CGROUP,
	TENANT_WEIGHT_FROM_DEFAULT,
};

/* Resolution order: first matching rule; else, with honor_cgroup_weights,
 * the cgroup's own files; else default_weight. */
uint32_t tenant_resolve_weight(const struct config *cfg,
			       const struct tenant_cgroup_roots *roots,
			       const char *key, const char *v2_path,
			       const char *blkio_path,
			       enum tenant_weight_source *source);

/* ---- the table ---------------------------------------------------------- */

/* Requests with pid 0, from invisible pids, or from new cgroups refused an
 * id that have no ancestor tenant to share. */
#define TENANT_ID_DEFAULT 0u
/* No tenant: the parent of a top-level tenant. */
#define TENANT_ID_NONE UINT32_MAX

struct tenant_table;

struct tenant_table_params {
	const char *proc_root;		/* NULL: "/proc" */
	/* NULL: discovered from PROC_ROOT/self/mountinfo */
	const struct tenant_cgroup_roots *roots;
	/* 0: 4096; ids are < max_tenants.  The last max_tenants/16 free ids
	 * (at least 1) go only to cgroups a [group] rule names; the children
	 * of one cgroup other than the root hold at most max_tenants/8 (at
	 * least 1). */
	uint32_t max_tenants;
	uint32_t cache_entries;		/* 0: 4096; rounded up to a power of 2 */
};

struct tenant_info {
	uint32_t id;
	uint32_t parent;	/* tenant_parent(): TENANT_ID_NONE at the top */
	uint32_t weight;
	enum tenant_weight_source weight_source;
	char path[TENANT_PATH_MAX];	/* "" for the default tenant */
};

struct tenant_stats {
	uint64_t misses;	/* hits are not counted: a shared counter
				 * would cost more than the hit itself */
	uint64_t invisible;	/* pid 0 or no /proc entry */
	uint64_t pid_reuse_guarded;	/* hits refused: pid may be reused */
	uint64_t table_full;	/* new cgroups refused an id: none free for
				 * them (only the reserve left, and no rule) */
	uint64_t subtree_capped;	/* refused: their parent's children hold
					 * max_tenants/8 ids already */
	uint64_t retired;
	uint32_t live_tenants;
};

/* CFG is read, not kept.  Returns 0 or a negative errno with a message. */
int tenant_table_new(const struct tenant_table_params *params,
		     const struct config *cfg, struct tenant_table **out,
		     char *err, size_t err_len);
void tenant_table_free(struct tenant_table *table);

/* The tenant of thread PID at NOW_NS: its cgroup's, or that of the
 * outermost ancestor whose rule says account = subtree.  Never fails: pid
 * 0, vanished or invisible pids give TENANT_ID_DEFAULT; a new cgroup
 * refused an id (table full, or its parent's cap) gets its nearest
 * ancestor's tenant (below the root; the parent's is created if the parent
 * may have an id), else TENANT_ID_DEFAULT.  A cached answer is at most
 * cache_ttl_ms old (a moved process is re-attributed within it) and is
 * refused when pid PID may have been reused since. */
uint32_t tenant_resolve(struct tenant_table *table, pid_t pid,
			uint64_t now_ns);

/* Current weight of tenant ID (lock-free), 0 for an unknown id. */
uint32_t tenant_weight(const struct tenant_table *table, uint32_t id);

/* The tenant whose share tenant ID divides with its siblings (lock-free):
 * the tenant of the nearest ancestor cgroup that is a level of the
 * scheduling tree (a [group] rule names it, or its weight file is set), or
 * TENANT_ID_NONE when there is none and ID shares at the top level.  A
 * tenant holds its parent, so a parent outlives its children. */
uint32_t tenant_parent(const struct tenant_table *table, uint32_t id);

/* Increments whenever any tenant's weight or parent changes, so the
 * engine knows to push them into the scheduler. */
uint64_t tenant_table_weights_epoch(const struct tenant_table *table);

/* A hold keeps ID from being retired (fs/ holds the opener's tenant for
 * each file handle, to charge pid-0 writeback to it). */
void tenant_hold(struct tenant_table *table, uint32_t id);
void tenant_release(struct tenant_table *table, uint32_t id);

/* Copies tenant ID's description.  Returns 0 or -ENOENT. */
int tenant_get_info(struct tenant_table *table, uint32_t id,
		    struct tenant_info *out);

/* Re-resolves every weight and parent (creating new levels' tenants) and
 * takes the new hierarchy, TTL and retirement settings; all under one
 * lock, so resolutions see the old or the new config, never a mix.  Cached
 * pids are dropped if the hierarchy or the subtree rules changed. */
int tenant_table_apply_config(struct tenant_table *table,
			      const struct config *cfg);

/* Reads again the weight files (with honor_cgroup_weights) of up to MAX
 * tenants used in the last 10 s or held (tenants below them, files open),
 * going round the table from where the last call stopped: a weight a
 * cgroup's owner changes (systemd's IOWeight=, a container runtime's
 * update) is followed without a reload, as the kernel's own I/O
 * controllers follow it, and a cgroup whose file becomes set (or unset)
 * becomes (or stops being) a level. Moves the weights epoch if a weight or
 * a parent changed. Takes the table lock for its reads, so MAX bounds how
 * long resolutions may wait. Returns how many tenants it read. */
size_t tenant_table_refresh_weights(struct tenant_table *table,
				    uint64_t now_ns, size_t max);

/* Retires tenants unused for retire_idle_ms, not held (a child tenant
 * holds its parent), whose cgroup directory is gone or folded into an
 * ancestor's tenant by a subtree rule.  While free ids are no more than the reserve it also
 * retires tenants unused for min(retire_idle_ms, 1 s) and not held, least
 * recently used first, whose cgroups still exist, until more than the
 * reserve is free (such a cgroup gets a new id, with fresh stats, on its
 * next request).  Both take two passes.  Writes up to MAX retired ids to IDS
 * (so the engine can drop their queues) and returns how many.  Their ids
 * are reused later. */
size_t tenant_table_retire(struct tenant_table *table, uint64_t now_ns,
			   uint32_t *ids, size_t max);

void tenant_table_get_stats(const struct tenant_table *table,
			    struct tenant_stats *out);

#endif /* FUSESCHED_TENANT_H */
