/* The tenant table: pid cache, tenant registry, weights, retirement.
 *
 * Fast path.  A cache hit costs a handful of atomic loads and no lock: each
 * direct-mapped slot is a seqlock (one writer at a time, claimed by CAS;
 * a writer that loses the race just does not cache).  Memory is fixed at
 * creation: cache_entries slots and max_tenants records.
 *
 * Staleness.  An entry lives cache_ttl_ms, which bounds how long a process
 * moved to another cgroup keeps its old tenant.
 *
 * Pid reuse.  The kernel hands out pids cyclically, so pid P can only name
 * a new thread after the allocation cursor (/proc/sys/kernel/ns_last_pid)
 * has travelled from where it was when we read /proc/P/cgroup round to P.
 * The table samples the cursor (on misses, and on a hit when the last
 * sample is older than PID_SAMPLE_MAX_AGE_NS) and accumulates how far it
 * moved; an entry records the distance at which P comes round again and is
 * refused once the cursor may have got there.  This is checked on every hit
 * without a syscall, unlike comparing /proc/P/stat start times, and it
 * matters here: pid_max is 32768 on these hosts, which a busy build wraps
 * in seconds.  The margin covers cursor movement between samples (up to
 * 1024 pids in 20 ms, i.e. 50k thread creations per second).
 *
 * Retirement is two-phase so that a concurrent cache hit can never return
 * an id that has already been freed: phase one bumps the tenant's
 * generation (cache entries for it stop hitting) and marks it retiring; a
 * later pass frees it only if it is still unused, idle and unheld.
 *
 * Exhaustion.  Anyone with a delegated cgroup subtree can create thousands
 * of cgroups, so ids are rationed: the last max_tenants/16 free ids (the
 * reserve) go only to cgroups a [group] rule names, and the children of one
 * parent cgroup (other than the root) hold at most max_tenants/8 ids.  A
 * cgroup refused an id is charged to its nearest ancestor's tenant (the
 * parent's is created if the parent may have one), else to the default
 * tenant.  When free ids fall to the reserve, retirement also takes idle,
 * unheld tenants whose cgroups still exist, least recently used first; such
 * a cgroup gets a fresh id (and fresh stats) on its next request.
 *
 * The scheduling tree.  A cgroup that a [group] rule names, or whose own
 * weight file is set (with honor_cgroup_weights), is a level: the tenants
 * below it divide its share.  A tenant's parent is the tenant of its
 * nearest level ancestor, created on demand (levels may take the reserve)
 * and held by the child, so it is retired only after its children.
 * Unconfigured cgroups are transparent.  A rule with account = subtree
 * folds its whole subtree into its cgroup's one tenant.
 */
#include "fusesched/tenant.h"

#include <errno.h>
#include <pthread.h>
#include <stdalign.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tenant_internal.h"

#define NO_ID UINT32_MAX
_Static_assert(NO_ID == TENANT_ID_NONE, "a missing parent is no id");
#define DEFAULT_CAPACITY 4096u
#define PID_SAMPLE_MAX_AGE_NS (20u * 1000 * 1000)
#define PID_REUSE_MARGIN 1024u
/* last_used is written at most this often per tenant: every hit writing
 * it would bounce its cache line between worker threads. */
#define TOUCH_GRANULARITY_NS (100u * 1000 * 1000)
#define NS_PER_MS 1000000ull
/* Idleness that makes a tenant evictable when ids run short, if
 * retire_idle_ms is longer: under an exhaustion attack a minute is too long
 * to wait for room. */
#define EVICT_IDLE_NS (1000 * NS_PER_MS)
/* Tenants whose weight files tenant_table_refresh_weights reads: those
 * used this recently, and held ones (a level with tenants below, whose
 * weight divides the store among them; a tenant with files open); an idle
 * one's weight matters once it is back, and the next pass reads it then. */
#define TENANT_REFRESH_RECENT_NS (10000 * NS_PER_MS)

struct cache_slot {
	alignas(64) _Atomic uint32_t seq;	/* odd while being written */
	_Atomic int32_t pid;
	_Atomic uint32_t id;
	_Atomic uint32_t gen;		/* tenant generation when cached */
	_Atomic uint32_t epoch;		/* table cache epoch when cached */
	_Atomic uint64_t expires_ns;
	_Atomic uint64_t reuse_at;	/* pid_advance at which pid may recur */
};

struct tenant_rec {
	alignas(64) _Atomic uint32_t weight;
	/* tenant_parent(), held by this one; written under table->lock */
	_Atomic uint32_t sched_parent;
	_Atomic uint32_t gen;
	_Atomic uint32_t holds;
	_Atomic uint64_t last_used_ns;
	/* the rest is under table->lock */
	bool live;
	bool retiring;
	bool evicting;		/* retiring for room, its cgroup still there:
				 * phase two needs only EVICT_IDLE_NS idle */
	enum tenant_weight_source source;
	enum tenant_hierarchy_id hier;
	char *key;
	char *v2_path;		/* the creator's paths, for weight files */
	char *blkio_path;
	uint32_t next;		/* hash chain */
	uint32_t parent;	/* struct parent_ent index, NO_ID: top level */
};

/* Live tenants directly below one cgroup path (under table->lock).  There
 * are never more entries in use than live tenants, so max_tenants entries
 * are enough. */
struct parent_ent {
	char *path;		/* NULL while free */
	uint32_t count;
	uint32_t next;		/* hash chain, or the free list */
};

struct lru_cand {
	uint64_t last_used_ns;
	uint32_t id;
};

struct tenant_table {
	char proc_root[TENANT_PATH_MAX];
	struct tenant_cgroup_roots roots;
	uint32_t max_tenants;
	uint32_t cache_shift;
	struct cache_slot *cache;
	struct tenant_rec *recs;
	uint32_t *buckets;
	uint32_t bucket_mask;
	uint32_t *free_ids;
	uint32_t free_count;
	uint32_t reserve;	/* free ids only ruled cgroups may take */
	uint32_t subtree_cap;	/* ids one parent's children may hold */
	struct parent_ent *parents;
	uint32_t *parent_buckets;	/* bucket_mask + 1 of them */
	uint32_t parent_free;
	struct lru_cand *lru;	/* scratch for tenant_table_retire */

	pthread_mutex_t lock;
	struct config *cfg;	/* private copy: scalars and rules */
	bool subtree_rules;	/* some rule in cfg says account = subtree */
	_Atomic int hierarchy;
	_Atomic uint64_t ttl_ns;
	_Atomic uint32_t cache_epoch;
	_Atomic uint64_t weights_epoch;
	uint32_t refresh_next;	/* under lock: where the next weight refresh starts */

	uint32_t pid_max;	/* 0: no cursor readable, TTL only */
	pthread_mutex_t sample_lock;
	uint32_t last_cursor;
	_Atomic uint64_t pid_advance;
	_Atomic uint64_t sample_ns;

	_Atomic uint64_t misses, invisible, reuse_guarded, table_full,
		subtree_capped, retired;
	_Atomic uint32_t live;
};

static uint32_t hash_bytes(const char *s, size_t len)
{
	uint32_t h = 2166136261u;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h;
}

static uint32_t hash_string(const char *s)
{
	return hash_bytes(s, strlen(s));
}

static uint32_t round_up_pow2(uint32_t v)
{
	uint32_t p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

static int read_u32_file(const char *path, uint32_t *out)
{
	char buf[32], *end;
	unsigned long v;

	if (tenant_read_small_file(path, buf, sizeof(buf)) <= 0)
		return -EINVAL;
	v = strtoul(buf, &end, 10);
	if (end == buf || (*end && *end != '\n') || v > UINT32_MAX)
		return -EINVAL;
	*out = (uint32_t)v;
	return 0;
}

/* ---- pid reuse guard ------------------------------------------------------ */

/* Reads the allocation cursor and adds how far it moved to pid_advance,
 * unless it was read within max_age_ns (0: read it now): the workers that
 * find the sample stale at once take the lock in turn, and all but the
 * first use its reading (each reading its own was five times the sampling
 * rate under a 16-deep reader). Returns the advance, and the cursor in
 * *cursor. */
static uint64_t pid_sample(struct tenant_table *t, uint64_t now_ns,
			   uint64_t max_age_ns, uint32_t *cursor)
{
	char path[TENANT_PATH_MAX + 32];
	uint32_t raw;
	uint64_t advance;

	snprintf(path, sizeof(path), "%s/sys/kernel/ns_last_pid", t->proc_root);
	pthread_mutex_lock(&t->sample_lock);
	advance = atomic_load_explicit(&t->pid_advance, memory_order_relaxed);
	uint64_t sampled = atomic_load_explicit(&t->sample_ns, memory_order_relaxed);
	if (max_age_ns && (int64_t)(now_ns - sampled) <= (int64_t)max_age_ns) {
		/* read by another worker since this one looked */
	} else if (read_u32_file(path, &raw) == 0 && raw < t->pid_max) {
		advance += (raw + t->pid_max - t->last_cursor) % t->pid_max;
		t->last_cursor = raw;
		atomic_store_explicit(&t->pid_advance, advance,
				      memory_order_relaxed);
		atomic_store_explicit(&t->sample_ns, now_ns,
				      memory_order_release);
	} else {
		/* unreadable now: pretend a full wrap, so nothing is trusted */
		advance += t->pid_max;
		atomic_store_explicit(&t->pid_advance, advance,
				      memory_order_relaxed);
	}
	*cursor = t->last_cursor;
	pthread_mutex_unlock(&t->sample_lock);
	return advance;
}

/* The pid_advance value at which PID may be handed out again. */
static uint64_t pid_reuse_at(const struct tenant_table *t, pid_t pid,
			     uint64_t advance, uint32_t cursor)
{
	uint64_t p = (uint64_t)pid;

	if (p >= t->pid_max)
		return advance;
	return advance + (p + t->pid_max - cursor - 1) % t->pid_max + 1;
}

static bool pid_still_ours(struct tenant_table *t, uint64_t reuse_at,
			   uint64_t now_ns)
{
	uint64_t sampled;
	uint32_t cursor;

	if (!t->pid_max)
		return true;
	sampled = atomic_load_explicit(&t->sample_ns, memory_order_acquire);
	if ((int64_t)(now_ns - sampled) > (int64_t)PID_SAMPLE_MAX_AGE_NS)
		pid_sample(t, now_ns, PID_SAMPLE_MAX_AGE_NS, &cursor);
	if (atomic_load_explicit(&t->pid_advance, memory_order_relaxed) +
		    PID_REUSE_MARGIN < reuse_at)
		return true;
	atomic_fetch_add_explicit(&t->reuse_guarded, 1, memory_order_relaxed);
	return false;
}

/* ---- cache ---------------------------------------------------------------- */

static struct cache_slot *cache_slot_of(const struct tenant_table *t,
					pid_t pid)
{
	return &t->cache[((uint32_t)pid * 2654435761u) >> t->cache_shift];
}

static void cache_store(struct tenant_table *t, pid_t pid, uint32_t id,
			uint32_t gen, uint32_t epoch, uint64_t expires_ns,
			uint64_t reuse_at)
{
	struct cache_slot *s = cache_slot_of(t, pid);
	uint32_t seq = atomic_load_explicit(&s->seq, memory_order_relaxed);

	if ((seq & 1) ||
	    !atomic_compare_exchange_strong_explicit(&s->seq, &seq, seq + 1,
						     memory_order_relaxed,
						     memory_order_relaxed))
		return;
	atomic_thread_fence(memory_order_release);
	atomic_store_explicit(&s->pid, pid, memory_order_relaxed);
	atomic_store_explicit(&s->id, id, memory_order_relaxed);
	atomic_store_explicit(&s->gen, gen, memory_order_relaxed);
	atomic_store_explicit(&s->epoch, epoch, memory_order_relaxed);
	atomic_store_explicit(&s->expires_ns, expires_ns, memory_order_relaxed);
	atomic_store_explicit(&s->reuse_at, reuse_at, memory_order_relaxed);
	atomic_store_explicit(&s->seq, seq + 2, memory_order_release);
}

static void touch(struct tenant_rec *rec, uint64_t now_ns)
{
	uint64_t last = atomic_load_explicit(&rec->last_used_ns,
					     memory_order_relaxed);

	if ((int64_t)(now_ns - last) > (int64_t)TOUCH_GRANULARITY_NS)
		atomic_store_explicit(&rec->last_used_ns, now_ns,
				      memory_order_relaxed);
}

/* ---- registry (under t->lock) -------------------------------------------- */

static char *dup_or_null(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* Whether the weight changed. */
static bool rec_set_weight(struct tenant_table *t, struct tenant_rec *rec)
{
	rec->source = TENANT_WEIGHT_FROM_DEFAULT;
	uint32_t weight = rec->key[0] ? tenant_resolve_weight(t->cfg, &t->roots, rec->key,
							     rec->v2_path, rec->blkio_path,
							     &rec->source)
				      : t->cfg->scheduler.default_weight;
	return atomic_exchange_explicit(&rec->weight, weight, memory_order_relaxed) != weight;
}

/* Length of KEY's parent path; 0 when the parent is the root, whose
 * children (the top-level slices) are not capped. */
static size_t parent_len(const char *key)
{
	const char *slash = strrchr(key, '/');

	return slash ? (size_t)(slash - key) : 0;
}

/* The entry for the first LEN bytes of KEY, or NO_ID. */
static uint32_t parent_find(const struct tenant_table *t, const char *key,
			    size_t len)
{
	uint32_t p = t->parent_buckets[hash_bytes(key, len) & t->bucket_mask];

	for (; p != NO_ID; p = t->parents[p].next)
		if (strncmp(t->parents[p].path, key, len) == 0 &&
		    t->parents[p].path[len] == '\0')
			return p;
	return NO_ID;
}

/* Length of the cgroup whose tenants below KEY's count against the cap:
 * KEY's parent, or, below a cgroup delegated to a user, that cgroup, at
 * any depth. Counted by parent only, a user nesting cgroups in its
 * delegation took every id but the reserve (512 children a level), and
 * every other cgroup no rule names was put in the default tenant. */
static size_t cap_len(const struct tenant_table *t, const char *key,
		      enum tenant_hierarchy_id hier)
{
	size_t delegated = tenant_cgroup_delegation_len(&t->roots, hier, key);

	return delegated ? delegated : parent_len(key);
}

static bool parent_capped(const struct tenant_table *t, const char *key,
			  enum tenant_hierarchy_id hier)
{
	size_t len = cap_len(t, key, hier);
	uint32_t p;

	if (!len)
		return false;
	p = parent_find(t, key, len);
	return p != NO_ID && t->parents[p].count >= t->subtree_cap;
}

/* Counts a new tenant KEY under its parent (cap_len); its entry in *out.
 * False when out of memory. */
static bool parent_acquire(struct tenant_table *t, const char *key,
			   enum tenant_hierarchy_id hier, uint32_t *out)
{
	size_t len = cap_len(t, key, hier);
	uint32_t p, bucket;

	*out = NO_ID;
	if (!len)
		return true;
	p = parent_find(t, key, len);
	if (p == NO_ID) {
		p = t->parent_free;
		if (p == NO_ID)
			return false;	/* cannot happen: see struct parent_ent */
		t->parents[p].path = strndup(key, len);
		if (!t->parents[p].path)
			return false;
		t->parent_free = t->parents[p].next;
		bucket = hash_bytes(key, len) & t->bucket_mask;
		t->parents[p].count = 0;
		t->parents[p].next = t->parent_buckets[bucket];
		t->parent_buckets[bucket] = p;
	}
	t->parents[p].count++;
	*out = p;
	return true;
}

static void parent_release(struct tenant_table *t, uint32_t p)
{
	struct parent_ent *ent;
	uint32_t *link;

	if (p == NO_ID)
		return;
	ent = &t->parents[p];
	if (--ent->count)
		return;
	link = &t->parent_buckets[hash_string(ent->path) & t->bucket_mask];
	while (*link != p)
		link = &t->parents[*link].next;
	*link = ent->next;
	free(ent->path);
	ent->path = NULL;
	ent->next = t->parent_free;
	t->parent_free = p;
}

static uint32_t registry_find(const struct tenant_table *t, const char *key)
{
	uint32_t id = t->buckets[hash_string(key) & t->bucket_mask];

	while (id != NO_ID && strcmp(t->recs[id].key, key) != 0)
		id = t->recs[id].next;
	return id;
}

/* A use: the tenant stays (or becomes again) ineligible for retirement. */
static void rec_revive(struct tenant_rec *rec, uint64_t now_ns)
{
	rec->retiring = rec->evicting = false;
	atomic_store_explicit(&rec->last_used_ns, now_ns, memory_order_relaxed);
}

enum id_refusal {
	ID_GRANTED,
	ID_NONE_FREE,		/* none free, or only the reserve and no rule */
	ID_SUBTREE_CAPPED,	/* the parent's children hold subtree_cap */
};

/* Whether the new cgroup KEY may have an id of its own.  A CONFIGURED
 * cgroup (a [group] rule names it) may take any free id: the admin asked
 * for its weight. */
static enum id_refusal may_take_id(const struct tenant_table *t,
				   const char *key, enum tenant_hierarchy_id hier,
				   bool configured)
{
	if (t->free_count == 0 || (!configured && t->free_count <= t->reserve))
		return ID_NONE_FREE;
	if (!configured && parent_capped(t, key, hier))
		return ID_SUBTREE_CAPPED;
	return ID_GRANTED;
}

static bool ruled(const struct tenant_table *t, const char *key)
{
	return tenant_match_rule(t->cfg->groups, t->cfg->group_count, key) >= 0;
}

/* Whether cgroup PATH of hierarchy HIER is a level of the scheduling tree:
 * its weight comes from a rule or from its own weight file (read in HIER
 * only: an ancestor has no known path in the other hierarchy), or it was
 * delegated to a user, whose cgroups below it must divide its share: left
 * transparent, each child a user made was a tenant of its own beside
 * everyone's, its weight file (the user's to write) up to 10 times the
 * default. */
static bool is_level(const struct tenant_table *t, const char *path,
		     enum tenant_hierarchy_id hier)
{
	enum tenant_weight_source source;

	tenant_resolve_weight(t->cfg, &t->roots, path,
			      hier == TENANT_HIER_V2 ? path : NULL,
			      hier == TENANT_HIER_BLKIO ? path : NULL, &source);
	return source != TENANT_WEIGHT_FROM_DEFAULT ||
	       tenant_cgroup_delegated(&t->roots, hier, path);
}

/* Creates the tenant KEY with a free id, under PARENT (held; NO_ID: top
 * level).  NO_ID when none is free or out of memory. */
static uint32_t rec_create(struct tenant_table *t, const char *key,
			   enum tenant_hierarchy_id hier, const char *v2_path,
			   const char *blkio_path, uint32_t parent,
			   uint64_t now_ns)
{
	uint32_t bucket = hash_string(key) & t->bucket_mask, id, parent_ent;
	struct tenant_rec *rec;

	if (t->free_count == 0)
		return NO_ID;
	id = t->free_ids[t->free_count - 1];
	rec = &t->recs[id];
	rec->key = strdup(key);
	rec->v2_path = dup_or_null(v2_path);
	rec->blkio_path = dup_or_null(blkio_path);
	if (!rec->key || (v2_path && !rec->v2_path) ||
	    (blkio_path && !rec->blkio_path) ||
	    !parent_acquire(t, key, hier, &parent_ent)) {
		free(rec->key);
		free(rec->v2_path);
		free(rec->blkio_path);
		rec->key = rec->v2_path = rec->blkio_path = NULL;
		return NO_ID;
	}
	t->free_count--;
	rec->parent = parent_ent;
	tenant_hold(t, parent);
	atomic_store_explicit(&rec->sched_parent, parent, memory_order_relaxed);
	rec->hier = hier;
	rec->live = true;
	rec->retiring = rec->evicting = false;
	rec_set_weight(t, rec);
	atomic_store_explicit(&rec->last_used_ns, now_ns, memory_order_relaxed);
	rec->next = t->buckets[bucket];
	t->buckets[bucket] = id;
	atomic_fetch_add_explicit(&t->live, 1, memory_order_relaxed);
	return id;
}

/* The tenant of KEY's nearest proper ancestor that is a level, or NO_ID.
 * Levels without a tenant get one, outermost first, each the next one's
 * parent; a level that cannot have an id (none free, or only the reserve
 * and no rule names it) is skipped, so the tenants below it share the
 * next level up.  New levels are last used at
 * NOW_NS, which matters only once no child holds them. */
static uint32_t level_parent(struct tenant_table *t, const char *key,
			     enum tenant_hierarchy_id hier, uint64_t now_ns)
{
	/* the levels without a tenant, by the length of their path */
	uint64_t missing[TENANT_PATH_MAX / 64] = { 0 };
	char path[TENANT_PATH_MAX];
	size_t key_len = strlen(key), len, top = 0;
	uint32_t parent = NO_ID, id;

	if (key_len >= sizeof(path))
		return NO_ID;	/* cannot happen: keys fit TENANT_PATH_MAX */
	memcpy(path, key, key_len + 1);
	while ((len = parent_len(path)) > 0) {
		path[len] = '\0';
		if (!is_level(t, path, hier))
			continue;
		parent = registry_find(t, path);
		if (parent != NO_ID) {
			top = len;
			break;
		}
		missing[len / 64] |= 1ull << (len % 64);
	}
	memcpy(path, key, key_len + 1);
	for (len = top + 1; len < key_len; len++) {
		if (!(missing[len / 64] >> (len % 64) & 1))
			continue;
		path[len] = '\0';
		/* Only a rule's level may take the reserve: anyone with a
		 * delegated subtree can write weight files in it, and a chain
		 * of them must not use up the ids kept for configured cgroups. */
		id = may_take_id(t, path, hier, ruled(t, path)) == ID_GRANTED
			     ? rec_create(t, path, hier,
					  hier == TENANT_HIER_V2 ? path : NULL,
					  hier == TENANT_HIER_BLKIO ? path : NULL,
					  parent, now_ns)
			     : NO_ID;
		if (id != NO_ID)
			parent = id;
		path[len] = '/';
	}
	return parent;
}

/* The length of KEY's outermost ancestor (or KEY itself) whose first
 * matching rule says account = subtree, which makes every cgroup below it
 * its tenant; strlen(KEY) if there is none.  The root folds nothing. */
static size_t subtree_len(const struct config *cfg, const char *key)
{
	char path[TENANT_PATH_MAX];
	size_t len = strlen(key);
	int rule;

	if (len >= sizeof(path))
		return len;	/* cannot happen: keys fit TENANT_PATH_MAX */
	memcpy(path, key, len + 1);
	for (size_t i = 1; i <= len; i++) {
		if (key[i] != '/' && key[i] != '\0')
			continue;
		path[i] = '\0';
		rule = tenant_match_rule(cfg->groups, cfg->group_count, path);
		path[i] = key[i];
		if (rule >= 0 &&
		    cfg->groups[rule].account == CONFIG_ACCOUNT_SUBTREE)
			return i;
	}
	return len;
}

/* For a cgroup refused an id: the tenant of its nearest ancestor below the
 * root that has one, or of its parent if the parent may take an id itself,
 * so a capped subtree's extra children share their parent's weight rather
 * than the default.  NO_ID if there is none. */
static uint32_t ancestor_tenant(struct tenant_table *t, const char *key,
				enum tenant_hierarchy_id hier, uint64_t now_ns)
{
	char path[TENANT_PATH_MAX];
	bool is_parent = true;
	size_t len = strlen(key);
	uint32_t id;

	if (len >= sizeof(path))
		return NO_ID;	/* cannot happen: keys fit TENANT_PATH_MAX */
	memcpy(path, key, len + 1);
	while ((len = parent_len(path)) > 0) {
		path[len] = '\0';
		id = registry_find(t, path);
		if (id != NO_ID) {
			rec_revive(&t->recs[id], now_ns);
			return id;
		}
		/* only the parent: its weight files are at a known path in
		 * the key's hierarchy, and it adds one tenant, not a chain
		 * (besides the levels above it, which its children need) */
		if (is_parent && may_take_id(t, path, hier, ruled(t, path)) == ID_GRANTED) {
			id = rec_create(t, path, hier,
					hier == TENANT_HIER_V2 ? path : NULL,
					hier == TENANT_HIER_BLKIO ? path : NULL,
					level_parent(t, path, hier, now_ns),
					now_ns);
			if (id != NO_ID)
				return id;
		}
		is_parent = false;
	}
	return NO_ID;
}

/* Finds or creates the tenant of cgroup KEY (cut short, in place, to the
 * cgroup whose subtree is one tenant).  Returns its id (or, when KEY may
 * not have one, its ancestor's or TENANT_ID_DEFAULT) and that tenant's
 * generation in *gen. */
static uint32_t registry_get(struct tenant_table *t, char *key,
			     enum tenant_hierarchy_id hier, const char *v2_path,
			     const char *blkio_path, uint64_t now_ns,
			     uint32_t *gen)
{
	enum id_refusal why;
	uint32_t id;
	size_t len;

	pthread_mutex_lock(&t->lock);
	if (t->subtree_rules && (len = subtree_len(t->cfg, key)) < strlen(key)) {
		/* the weight files too are the folding cgroup's */
		key[len] = '\0';
		v2_path = hier == TENANT_HIER_V2 ? key : NULL;
		blkio_path = hier == TENANT_HIER_BLKIO ? key : NULL;
	}
	id = registry_find(t, key);
	if (id != NO_ID) {
		rec_revive(&t->recs[id], now_ns);
		goto out;
	}
	why = may_take_id(t, key, hier, ruled(t, key));
	if (why == ID_GRANTED) {
		id = rec_create(t, key, hier, v2_path, blkio_path,
				level_parent(t, key, hier, now_ns), now_ns);
		if (id == NO_ID)
			why = ID_NONE_FREE;	/* out of memory */
	}
	if (why != ID_GRANTED) {
		atomic_fetch_add_explicit(why == ID_SUBTREE_CAPPED
						  ? &t->subtree_capped
						  : &t->table_full,
					  1, memory_order_relaxed);
		id = ancestor_tenant(t, key, hier, now_ns);
		if (id == NO_ID)
			id = TENANT_ID_DEFAULT;
	}
out:
	*gen = atomic_load_explicit(&t->recs[id].gen, memory_order_relaxed);
	pthread_mutex_unlock(&t->lock);
	return id;
}

/* Copies LEN bytes of S into DST as a string; false if it does not fit. */
static bool copy_path(char *dst, const char *s, size_t len)
{
	if (!s || len >= TENANT_PATH_MAX)
		return false;
	memcpy(dst, s, len);
	dst[len] = '\0';
	return true;
}

static uint32_t resolve_slow(struct tenant_table *t, pid_t pid,
			     uint64_t now_ns)
{
	uint32_t epoch = atomic_load_explicit(&t->cache_epoch,
					      memory_order_acquire);
	int hierarchy = atomic_load_explicit(&t->hierarchy,
					     memory_order_relaxed);
	char path[TENANT_PATH_MAX + 32], text[16384];
	char v2[TENANT_PATH_MAX], blkio[TENANT_PATH_MAX];
	struct tenant_cgroup_paths paths;
	uint32_t id = TENANT_ID_DEFAULT, gen = 0, cursor = 0;
	uint64_t advance = 0, reuse_at = UINT64_MAX;
	const char *key;
	size_t key_len;
	ssize_t n;
	int hier;

	atomic_fetch_add_explicit(&t->misses, 1, memory_order_relaxed);
	/* sample the cursor before reading: see the comment at the top */
	if (t->pid_max) {
		advance = pid_sample(t, now_ns, 0, &cursor);
		reuse_at = pid_reuse_at(t, pid, advance, cursor);
	}
	snprintf(path, sizeof(path), "%s/%d/cgroup", t->proc_root, (int)pid);
	n = tenant_read_small_file(path, text, sizeof(text));
	if (n <= 0 || (size_t)n + 1 >= sizeof(text) ||
	    tenant_parse_proc_cgroup(text, (size_t)n, &paths) ||
	    (hier = tenant_select_key(&paths, (enum config_hierarchy)hierarchy,
				      &key, &key_len)) < 0 ||
	    !copy_path(path, key, key_len)) {
		atomic_fetch_add_explicit(&t->invisible, 1,
					  memory_order_relaxed);
		gen = atomic_load_explicit(&t->recs[0].gen,
					   memory_order_relaxed);
	} else {
		bool has_v2 = copy_path(v2, paths.v2, paths.v2_len);
		bool has_blkio = copy_path(blkio, paths.blkio, paths.blkio_len);

		id = registry_get(t, path, (enum tenant_hierarchy_id)hier,
				  has_v2 ? v2 : NULL, has_blkio ? blkio : NULL,
				  now_ns, &gen);
	}
	cache_store(t, pid, id, gen, epoch,
		    now_ns + atomic_load_explicit(&t->ttl_ns,
						  memory_order_relaxed),
		    reuse_at);
	return id;
}

uint32_t tenant_resolve(struct tenant_table *t, pid_t pid, uint64_t now_ns)
{
	struct cache_slot *s;
	uint32_t seq, id, gen, epoch;
	uint64_t expires_ns, reuse_at;
	int32_t cached_pid;

	if (pid <= 0)
		return TENANT_ID_DEFAULT;
	s = cache_slot_of(t, pid);
	seq = atomic_load_explicit(&s->seq, memory_order_acquire);
	if (seq & 1)
		return resolve_slow(t, pid, now_ns);
	cached_pid = atomic_load_explicit(&s->pid, memory_order_relaxed);
	id = atomic_load_explicit(&s->id, memory_order_relaxed);
	gen = atomic_load_explicit(&s->gen, memory_order_relaxed);
	epoch = atomic_load_explicit(&s->epoch, memory_order_relaxed);
	expires_ns = atomic_load_explicit(&s->expires_ns, memory_order_relaxed);
	reuse_at = atomic_load_explicit(&s->reuse_at, memory_order_relaxed);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&s->seq, memory_order_relaxed) != seq ||
	    cached_pid != pid || (int64_t)(expires_ns - now_ns) <= 0 ||
	    epoch != atomic_load_explicit(&t->cache_epoch,
					  memory_order_relaxed) ||
	    gen != atomic_load_explicit(&t->recs[id].gen, memory_order_acquire) ||
	    !pid_still_ours(t, reuse_at, now_ns))
		return resolve_slow(t, pid, now_ns);
	touch(&t->recs[id], now_ns);
	return id;
}

/* ---- config ---------------------------------------------------------------- */

/* The table keeps its own copy of what it uses, so the daemon may free its
 * config whenever it likes. */
static int copy_config(const struct config *cfg, struct config **out)
{
	struct config *c = calloc(1, sizeof(*c));

	if (!c)
		return -ENOMEM;
	c->scheduler = cfg->scheduler;
	c->tenants = cfg->tenants;
	if (cfg->group_count) {
		c->groups = calloc(cfg->group_count, sizeof(*c->groups));
		if (!c->groups)
			goto nomem;
	}
	for (size_t i = 0; i < cfg->group_count; i++) {
		c->groups[i] = cfg->groups[i];
		c->groups[i].pattern = strdup(cfg->groups[i].pattern);
		c->group_count = i + 1;
		if (!c->groups[i].pattern)
			goto nomem;
	}
	*out = c;
	return 0;
nomem:
	config_free(c);
	return -ENOMEM;
}

static bool has_subtree_rules(const struct config *cfg)
{
	for (size_t i = 0; i < cfg->group_count; i++)
		if (cfg->groups[i].account == CONFIG_ACCOUNT_SUBTREE)
			return true;
	return false;
}

/* Whether A and B may fold some cgroup into different tenants: subtree
 * rules in either, and patterns or accounts that differ. */
static bool folding_changed(const struct config *a, const struct config *b)
{
	if (!has_subtree_rules(a) && !has_subtree_rules(b))
		return false;
	if (a->group_count != b->group_count)
		return true;
	for (size_t i = 0; i < a->group_count; i++)
		if (a->groups[i].account != b->groups[i].account ||
		    strcmp(a->groups[i].pattern, b->groups[i].pattern) != 0)
			return true;
	return false;
}

/* Points tenant ID at the tenant of its nearest level ancestor under the
 * current rules.  Returns whether that changed its parent. */
static bool rec_update_parent(struct tenant_table *t, uint32_t id)
{
	struct tenant_rec *rec = &t->recs[id];
	uint32_t before = atomic_load_explicit(&rec->sched_parent,
					       memory_order_relaxed);
	uint32_t parent = level_parent(
		t, rec->key, rec->hier,
		atomic_load_explicit(&rec->last_used_ns, memory_order_relaxed));

	if (parent == before)
		return false;
	tenant_hold(t, parent);
	tenant_release(t, before);
	atomic_store_explicit(&rec->sched_parent, parent, memory_order_relaxed);
	return true;
}

int tenant_table_apply_config(struct tenant_table *t, const struct config *cfg)
{
	struct config *copy, *old;
	bool changed = false;
	int rc = copy_config(cfg, &copy);

	if (rc)
		return rc;
	pthread_mutex_lock(&t->lock);
	old = t->cfg;
	t->cfg = copy;
	t->subtree_rules = has_subtree_rules(copy);
	if (atomic_load_explicit(&t->hierarchy, memory_order_relaxed) !=
		    (int)cfg->tenants.hierarchy ||
	    folding_changed(old, copy)) {
		/* keys change meaning: forget every cached pid */
		atomic_store_explicit(&t->hierarchy, (int)cfg->tenants.hierarchy,
				      memory_order_relaxed);
		atomic_fetch_add_explicit(&t->cache_epoch, 1,
					  memory_order_release);
	}
	atomic_store_explicit(&t->ttl_ns,
			      (uint64_t)cfg->tenants.cache_ttl_ms * NS_PER_MS,
			      memory_order_relaxed);
	for (uint32_t id = 0; id < t->max_tenants; id++) {
		struct tenant_rec *rec = &t->recs[id];
		if (rec->live)
			changed |= rec_set_weight(t, rec);
	}
	/* rules may have made or unmade levels; a level created here is live
	 * (and has its weight) before the loop reaches it, if it does */
	for (uint32_t id = 1; id < t->max_tenants; id++)
		if (t->recs[id].live)
			changed |= rec_update_parent(t, id);
	if (changed)
		atomic_fetch_add_explicit(&t->weights_epoch, 1,
					  memory_order_release);
	pthread_mutex_unlock(&t->lock);
	config_free(old);
	return 0;
}

size_t tenant_table_refresh_weights(struct tenant_table *t, uint64_t now_ns,
				    size_t max)
{
	size_t read = 0;
	bool changed = false;

	pthread_mutex_lock(&t->lock);
	if (!t->cfg->scheduler.honor_cgroup_weights) {
		pthread_mutex_unlock(&t->lock);
		return 0; /* rules and the default change only at reload */
	}
	uint32_t id = t->refresh_next;
	/* ids 1.. in turn: 0, the default tenant, has no files */
	for (uint32_t step = 1; step < t->max_tenants && read < max; step++) {
		id = id + 1 < t->max_tenants ? id + 1 : 1;
		struct tenant_rec *rec = &t->recs[id];
		uint64_t used = atomic_load_explicit(&rec->last_used_ns,
						     memory_order_relaxed);

		bool held = atomic_load_explicit(&rec->holds,
						 memory_order_relaxed) > 0;

		if (!rec->live || rec->retiring ||
		    (!held && (int64_t)(now_ns - used) >
					(int64_t)TENANT_REFRESH_RECENT_NS))
			continue;
		changed |= rec_set_weight(t, rec);
		/* its weight file set or unset makes or unmakes a level above
		 * its children: each of them moves when its own turn comes */
		changed |= rec_update_parent(t, id);
		read++;
	}
	t->refresh_next = id;
	if (changed)
		atomic_fetch_add_explicit(&t->weights_epoch, 1,
					  memory_order_release);
	pthread_mutex_unlock(&t->lock);
	return read;
}

/* ---- life cycle ------------------------------------------------------------ */

static int fail(char *err, size_t err_len, int rc, const char *what)
{
	snprintf(err, err_len, "tenant table: %s: %s", what, strerror(-rc));
	return rc;
}

int tenant_table_new(const struct tenant_table_params *params,
		     const struct config *cfg, struct tenant_table **out,
		     char *err, size_t err_len)
{
	const char *proc_root = params && params->proc_root ? params->proc_root
							    : "/proc";
	uint32_t max_tenants = params && params->max_tenants
				       ? params->max_tenants : DEFAULT_CAPACITY;
	uint32_t entries = params && params->cache_entries
				   ? params->cache_entries : DEFAULT_CAPACITY;
	char path[TENANT_PATH_MAX + 32];
	struct tenant_table *t;
	uint32_t nbuckets;
	int rc;

	*out = NULL;
	if (strlen(proc_root) >= TENANT_PATH_MAX || max_tenants < 2 ||
	    max_tenants > (1u << 24) || entries > (1u << 24))
		return fail(err, err_len, -EINVAL, "bad parameters");
	entries = round_up_pow2(entries < 64 ? 64 : entries);
	nbuckets = round_up_pow2(max_tenants);
	t = calloc(1, sizeof(*t));
	if (!t)
		return fail(err, err_len, -ENOMEM, "allocating");
	strcpy(t->proc_root, proc_root);
	t->max_tenants = max_tenants;
	t->cache_shift = 32u - (uint32_t)__builtin_ctz(entries);
	t->bucket_mask = nbuckets - 1;
	t->cache = aligned_alloc(64, entries * sizeof(*t->cache));
	t->recs = aligned_alloc(64, max_tenants * sizeof(*t->recs));
	t->buckets = malloc(nbuckets * sizeof(*t->buckets));
	t->free_ids = malloc(max_tenants * sizeof(*t->free_ids));
	t->parents = calloc(max_tenants, sizeof(*t->parents));
	t->parent_buckets = malloc(nbuckets * sizeof(*t->parent_buckets));
	t->lru = malloc(max_tenants * sizeof(*t->lru));
	pthread_mutex_init(&t->lock, NULL);
	pthread_mutex_init(&t->sample_lock, NULL);
	if (!t->cache || !t->recs || !t->buckets || !t->free_ids ||
	    !t->parents || !t->parent_buckets || !t->lru) {
		if (t->recs)	/* tenant_table_free frees their keys */
			memset(t->recs, 0, max_tenants * sizeof(*t->recs));
		tenant_table_free(t);
		return fail(err, err_len, -ENOMEM, "allocating");
	}
	memset(t->cache, 0, entries * sizeof(*t->cache));
	memset(t->recs, 0, max_tenants * sizeof(*t->recs));
	memset(t->buckets, 0xff, nbuckets * sizeof(*t->buckets));
	memset(t->parent_buckets, 0xff, nbuckets * sizeof(*t->parent_buckets));
	for (uint32_t id = max_tenants - 1; id > 0; id--)
		t->free_ids[t->free_count++] = id;
	for (uint32_t p = 0; p < max_tenants; p++) {
		t->recs[p].parent = NO_ID;
		atomic_init(&t->recs[p].sched_parent, NO_ID);
		t->parents[p].next = p + 1 < max_tenants ? p + 1 : NO_ID;
	}
	t->parent_free = 0;
	t->reserve = max_tenants / 16 ? max_tenants / 16 : 1;
	t->subtree_cap = max_tenants / 8 ? max_tenants / 8 : 1;

	if (params && params->roots) {
		t->roots = *params->roots;
	} else {
		char *text = malloc(1 << 20);
		ssize_t n;

		snprintf(path, sizeof(path), "%s/self/mountinfo", proc_root);
		n = text ? tenant_read_small_file(path, text, 1 << 20) : -ENOMEM;
		if (n > 0)
			tenant_parse_mountinfo(text, (size_t)n, &t->roots);
		free(text);
	}

	snprintf(path, sizeof(path), "%s/sys/kernel/pid_max", proc_root);
	if (read_u32_file(path, &t->pid_max) || t->pid_max < 2)
		t->pid_max = 0;
	snprintf(path, sizeof(path), "%s/sys/kernel/ns_last_pid", proc_root);
	if (t->pid_max && read_u32_file(path, &t->last_cursor))
		t->pid_max = 0;

	t->recs[0].key = strdup("");
	rc = t->recs[0].key ? copy_config(cfg, &t->cfg) : -ENOMEM;
	if (rc) {
		tenant_table_free(t);
		return fail(err, err_len, rc, "copying the config");
	}
	t->recs[0].live = true;
	t->subtree_rules = has_subtree_rules(t->cfg);
	atomic_store(&t->hierarchy, (int)cfg->tenants.hierarchy);
	atomic_store(&t->ttl_ns, (uint64_t)cfg->tenants.cache_ttl_ms * NS_PER_MS);
	rec_set_weight(t, &t->recs[0]);
	atomic_store(&t->live, 1);
	*out = t;
	return 0;
}

void tenant_table_free(struct tenant_table *t)
{
	if (!t)
		return;
	if (t->recs) {
		for (uint32_t id = 0; id < t->max_tenants; id++) {
			free(t->recs[id].key);
			free(t->recs[id].v2_path);
			free(t->recs[id].blkio_path);
		}
	}
	if (t->parents)
		for (uint32_t p = 0; p < t->max_tenants; p++)
			free(t->parents[p].path);
	config_free(t->cfg);
	pthread_mutex_destroy(&t->lock);
	pthread_mutex_destroy(&t->sample_lock);
	free(t->cache);
	free(t->recs);
	free(t->buckets);
	free(t->free_ids);
	free(t->parents);
	free(t->parent_buckets);
	free(t->lru);
	free(t);
}

/* ---- queries ---------------------------------------------------------------- */

uint32_t tenant_weight(const struct tenant_table *t, uint32_t id)
{
	return id < t->max_tenants
		       ? atomic_load_explicit(&t->recs[id].weight,
					      memory_order_relaxed)
		       : 0;
}

uint32_t tenant_parent(const struct tenant_table *t, uint32_t id)
{
	return id < t->max_tenants
		       ? atomic_load_explicit(&t->recs[id].sched_parent,
					      memory_order_relaxed)
		       : TENANT_ID_NONE;
}

uint64_t tenant_table_weights_epoch(const struct tenant_table *t)
{
	return atomic_load_explicit(&t->weights_epoch, memory_order_acquire);
}

void tenant_hold(struct tenant_table *t, uint32_t id)
{
	if (id < t->max_tenants)
		atomic_fetch_add_explicit(&t->recs[id].holds, 1,
					  memory_order_relaxed);
}

void tenant_release(struct tenant_table *t, uint32_t id)
{
	if (id < t->max_tenants)
		atomic_fetch_sub_explicit(&t->recs[id].holds, 1,
					  memory_order_relaxed);
}

int tenant_get_info(struct tenant_table *t, uint32_t id,
		    struct tenant_info *out)
{
	int rc = -ENOENT;

	if (id >= t->max_tenants)
		return rc;
	pthread_mutex_lock(&t->lock);
	if (t->recs[id].live) {
		out->id = id;
		out->parent = tenant_parent(t, id);
		out->weight = atomic_load_explicit(&t->recs[id].weight,
						   memory_order_relaxed);
		out->weight_source = t->recs[id].source;
		snprintf(out->path, sizeof(out->path), "%s", t->recs[id].key);
		rc = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return rc;
}

static bool cgroup_gone(const struct tenant_table *t,
			const struct tenant_rec *rec)
{
	const char *root = rec->hier == TENANT_HIER_V2 ? t->roots.v2
						       : t->roots.blkio;
	char path[2 * TENANT_PATH_MAX];
	struct stat st;

	if (!root[0])
		return true;	/* cannot tell: idleness alone decides */
	snprintf(path, sizeof(path), "%s%s", root, rec->key);
	return stat(path, &st) != 0 && errno == ENOENT;
}

/* A tenant whose cgroup a subtree rule now folds into an ancestor's tenant
 * gets no more requests, as if its cgroup were gone. */
static bool folded(const struct tenant_table *t, const struct tenant_rec *rec)
{
	return t->subtree_rules &&
	       subtree_len(t->cfg, rec->key) < strlen(rec->key);
}

static int lru_cmp(const void *a, const void *b)
{
	const struct lru_cand *x = a, *y = b;

	if (x->last_used_ns != y->last_used_ns)
		return x->last_used_ns < y->last_used_ns ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

static void registry_unlink(struct tenant_table *t, uint32_t id)
{
	uint32_t *link = &t->buckets[hash_string(t->recs[id].key) &
				     t->bucket_mask];

	while (*link != id)
		link = &t->recs[*link].next;
	*link = t->recs[id].next;
}

static void rec_free(struct tenant_table *t, uint32_t id)
{
	struct tenant_rec *rec = &t->recs[id];

	registry_unlink(t, id);
	parent_release(t, rec->parent);
	tenant_release(t, atomic_load_explicit(&rec->sched_parent,
					       memory_order_relaxed));
	atomic_store_explicit(&rec->sched_parent, NO_ID, memory_order_relaxed);
	free(rec->key);
	free(rec->v2_path);
	free(rec->blkio_path);
	rec->key = rec->v2_path = rec->blkio_path = NULL;
	rec->parent = NO_ID;
	rec->live = rec->retiring = rec->evicting = false;
	atomic_store_explicit(&rec->weight, 0, memory_order_relaxed);
	t->free_ids[t->free_count++] = id;
	atomic_fetch_sub_explicit(&t->live, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&t->retired, 1, memory_order_relaxed);
}

/* Phase one for the WANT least recently used tenants idle for IDLE_NS and
 * unheld, whether or not their cgroups still exist. */
static void evict_lru(struct tenant_table *t, uint64_t now_ns, int64_t idle_ns,
		      uint32_t want)
{
	uint32_t count = 0;

	for (uint32_t id = 1; id < t->max_tenants; id++) {
		struct tenant_rec *rec = &t->recs[id];
		uint64_t last;

		if (!rec->live || rec->retiring ||
		    atomic_load_explicit(&rec->holds, memory_order_relaxed))
			continue;
		last = atomic_load_explicit(&rec->last_used_ns,
					    memory_order_relaxed);
		if ((int64_t)(now_ns - last) >= idle_ns)
			t->lru[count++] = (struct lru_cand){ last, id };
	}
	if (count > want)
		qsort(t->lru, count, sizeof(*t->lru), lru_cmp);
	for (uint32_t i = 0; i < count && i < want; i++) {
		struct tenant_rec *rec = &t->recs[t->lru[i].id];

		rec->retiring = rec->evicting = true;
		atomic_fetch_add_explicit(&rec->gen, 1, memory_order_release);
	}
}

size_t tenant_table_retire(struct tenant_table *t, uint64_t now_ns,
			   uint32_t *ids, size_t max)
{
	uint32_t pending = 0;	/* retiring, to be freed at a later pass */
	int64_t idle_ns, evict_idle_ns;
	size_t n = 0;

	pthread_mutex_lock(&t->lock);
	idle_ns = (int64_t)t->cfg->tenants.retire_idle_ms * (int64_t)NS_PER_MS;
	evict_idle_ns = idle_ns < (int64_t)EVICT_IDLE_NS ? idle_ns
							 : (int64_t)EVICT_IDLE_NS;
	for (uint32_t id = 1; id < t->max_tenants; id++) {
		struct tenant_rec *rec = &t->recs[id];
		bool held;
		int64_t idle_for_ns;

		if (!rec->live)
			continue;
		held = atomic_load_explicit(&rec->holds, memory_order_relaxed);
		idle_for_ns = (int64_t)(now_ns - atomic_load_explicit(
							 &rec->last_used_ns,
							 memory_order_relaxed));
		if (rec->retiring) {
			if (held || idle_for_ns < (rec->evicting ? evict_idle_ns
								 : idle_ns)) {
				rec->retiring = rec->evicting = false;
			} else if (n < max) {
				rec_free(t, id);
				ids[n++] = id;
			} else {
				pending++;
			}
		} else if (!held && idle_for_ns >= idle_ns &&
			   (cgroup_gone(t, rec) || folded(t, rec))) {
			rec->retiring = true;
			atomic_fetch_add_explicit(&rec->gen, 1,
						  memory_order_release);
			pending++;
		}
	}
	/* nearly full: make room until unruled cgroups may take ids again */
	if (t->free_count + pending <= t->reserve) {
		uint32_t want = t->reserve + 1 - t->free_count - pending;

		evict_lru(t, now_ns, evict_idle_ns,
			  want < max ? want : (uint32_t)max);
	}
	pthread_mutex_unlock(&t->lock);
	return n;
}

void tenant_table_get_stats(const struct tenant_table *t,
			    struct tenant_stats *out)
{
	out->misses = atomic_load(&t->misses);
	out->invisible = atomic_load(&t->invisible);
	out->pid_reuse_guarded = atomic_load(&t->reuse_guarded);
	out->table_full = atomic_load(&t->table_full);
	out->subtree_capped = atomic_load(&t->subtree_capped);
	out->retired = atomic_load(&t->retired);
	out->live_tenants = atomic_load(&t->live);
}
