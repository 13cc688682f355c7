/* Per-tenant counters and latency histograms, many writers, many readers. */
#include "fusesched/stats.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct stats_tenant {
	atomic_bool active;
	atomic_uint_fast64_t ops[STATS_OP_NR];
	atomic_uint_fast64_t bytes[STATS_OP_NR];
	atomic_uint_fast64_t errors;
	atomic_uint_fast64_t solo_ops;
	atomic_uint_fast64_t latency_buckets[STATS_LATENCY_BUCKETS];
	atomic_uint_fast64_t latency_max_ns;
	atomic_uint sched_seq;             /* odd while the engine writes sched */
	struct sched_queue_stats sched;
};

struct stats {
	uint32_t max_tenants;
	atomic_uint_fast64_t peak_rate;
	atomic_uint inflight;
	atomic_uint max_inflight;
	atomic_uint kernel_queue_limit;
	atomic_uint watch_timeout_s;
	atomic_uint reserved;
	atomic_uint hung;
	atomic_uint executors;
	pthread_mutex_t settings_lock; /* rare: a mount's and a reload's, and stat's reads */
	struct stats_settings settings;
	struct stats_tenant tenants[];
};

struct stats *stats_new(uint32_t max_tenants)
{
	struct stats *s = calloc(1, sizeof(*s) + (size_t)max_tenants * sizeof(s->tenants[0]));
	if (!s)
		return NULL;
	s->max_tenants = max_tenants;
	pthread_mutex_init(&s->settings_lock, NULL);
	/* Until the engine's first publish, a tenant's queue is in no group. */
	for (uint32_t t = 0; t < max_tenants; t++)
		s->tenants[t].sched.parent_id = SCHED_GROUP_NONE;
	return s;
}

void stats_free(struct stats *s)
{
	if (s)
		pthread_mutex_destroy(&s->settings_lock);
	free(s);
}

uint32_t stats_max_tenants(const struct stats *s)
{
	return s->max_tenants;
}

static unsigned latency_bucket(uint64_t ns)
{
	unsigned b = ns ? 63u - (unsigned)__builtin_clzll(ns) : 0;
	return b < STATS_LATENCY_BUCKETS ? b : STATS_LATENCY_BUCKETS - 1;
}

/* Workers record their own requests (held writes, solo requests) next to the reactor. */
static void bump(atomic_uint_fast64_t *c, uint64_t by)
{
	atomic_fetch_add_explicit(c, by, memory_order_relaxed);
}

void stats_record(struct stats *s, uint32_t tenant, enum stats_op op, uint64_t bytes,
		  uint64_t latency_ns, bool failed)
{
	if (tenant >= s->max_tenants)
		return;
	struct stats_tenant *t = &s->tenants[tenant];
	atomic_store_explicit(&t->active, true, memory_order_relaxed);
	bump(&t->ops[op], 1);
	bump(&t->bytes[op], bytes);
	if (failed)
		bump(&t->errors, 1);
	bump(&t->latency_buckets[latency_bucket(latency_ns)], 1);
	uint_fast64_t max = atomic_load_explicit(&t->latency_max_ns, memory_order_relaxed);
	while (latency_ns > max &&
	       !atomic_compare_exchange_weak_explicit(&t->latency_max_ns, &max, latency_ns,
						      memory_order_relaxed, memory_order_relaxed))
		;
}

void stats_record_solo(struct stats *s, uint32_t tenant)
{
	if (tenant < s->max_tenants)
		bump(&s->tenants[tenant].solo_ops, 1);
}

void stats_publish_sched(struct stats *s, uint32_t tenant, const struct sched_queue_stats *q)
{
	if (tenant >= s->max_tenants)
		return;
	struct stats_tenant *t = &s->tenants[tenant];
	unsigned seq = atomic_load_explicit(&t->sched_seq, memory_order_relaxed);
	atomic_store_explicit(&t->sched_seq, seq + 1, memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
	memcpy(&t->sched, q, sizeof(*q));
	atomic_store_explicit(&t->sched_seq, seq + 2, memory_order_release);
}

void stats_reset_tenant(struct stats *s, uint32_t tenant)
{
	if (tenant >= s->max_tenants)
		return;
	struct stats_tenant *t = &s->tenants[tenant];
	atomic_store_explicit(&t->active, false, memory_order_relaxed);
	for (int i = 0; i < STATS_OP_NR; i++) {
		atomic_store_explicit(&t->ops[i], 0, memory_order_relaxed);
		atomic_store_explicit(&t->bytes[i], 0, memory_order_relaxed);
	}
	atomic_store_explicit(&t->errors, 0, memory_order_relaxed);
	atomic_store_explicit(&t->solo_ops, 0, memory_order_relaxed);
	for (int i = 0; i < STATS_LATENCY_BUCKETS; i++)
		atomic_store_explicit(&t->latency_buckets[i], 0, memory_order_relaxed);
	atomic_store_explicit(&t->latency_max_ns, 0, memory_order_relaxed);
	const struct sched_queue_stats empty = {.tenant_id = tenant, .parent_id = SCHED_GROUP_NONE};
	stats_publish_sched(s, tenant, &empty);
}

void stats_publish_global(struct stats *s, uint64_t peak_rate_bytes_per_s, uint32_t inflight,
			  uint32_t max_inflight, uint32_t reserved)
{
	atomic_store_explicit(&s->reserved, reserved, memory_order_relaxed);
	atomic_store_explicit(&s->peak_rate, peak_rate_bytes_per_s, memory_order_relaxed);
	atomic_store_explicit(&s->inflight, inflight, memory_order_relaxed);
	atomic_store_explicit(&s->max_inflight, max_inflight, memory_order_relaxed);
}

void stats_publish_kernel_queue(struct stats *s, uint32_t limit)
{
	atomic_store_explicit(&s->kernel_queue_limit, limit, memory_order_relaxed);
}

uint32_t stats_read_kernel_queue(const struct stats *s)
{
	return atomic_load_explicit(&((struct stats *)s)->kernel_queue_limit, memory_order_relaxed);
}

void stats_publish_settings(struct stats *s, const struct stats_settings *in)
{
	pthread_mutex_lock(&s->settings_lock);
	s->settings = *in;
	pthread_mutex_unlock(&s->settings_lock);
}

void stats_read_settings(const struct stats *s, struct stats_settings *out)
{
	struct stats *w = (struct stats *)s;
	pthread_mutex_lock(&w->settings_lock);
	*out = w->settings;
	pthread_mutex_unlock(&w->settings_lock);
}

void stats_publish_watch_timeout(struct stats *s, uint32_t seconds)
{
	atomic_store_explicit(&s->watch_timeout_s, seconds, memory_order_relaxed);
}

uint32_t stats_read_watch_timeout(const struct stats *s)
{
	return atomic_load_explicit(&((struct stats *)s)->watch_timeout_s, memory_order_relaxed);
}

void stats_read_tenant(const struct stats *s, uint32_t tenant, struct stats_tenant_snapshot *out)
{
	memset(out, 0, sizeof(*out));
	if (tenant >= s->max_tenants)
		return;
	struct stats_tenant *t = (struct stats_tenant *)&s->tenants[tenant];
	out->active = atomic_load_explicit(&t->active, memory_order_relaxed);
	for (int i = 0; i < STATS_OP_NR; i++) {
		out->ops[i] = atomic_load_explicit(&t->ops[i], memory_order_relaxed);
		out->bytes[i] = atomic_load_explicit(&t->bytes[i], memory_order_relaxed);
	}
	out->errors = atomic_load_explicit(&t->errors, memory_order_relaxed);
	out->solo_ops = atomic_load_explicit(&t->solo_ops, memory_order_relaxed);
	for (int i = 0; i < STATS_LATENCY_BUCKETS; i++)
		out->latency_buckets[i] = atomic_load_explicit(&t->latency_buckets[i],
							       memory_order_relaxed);
	out->latency_max_ns = atomic_load_explicit(&t->latency_max_ns, memory_order_relaxed);
	for (;;) {
		unsigned before = atomic_load_explicit(&t->sched_seq, memory_order_acquire);
		if (before & 1)
			continue;
		/* Byte-wise copy: the engine may be writing; the sequence check discards tears. */
		volatile const unsigned char *src = (const unsigned char *)&t->sched;
		unsigned char *dst = (unsigned char *)&out->sched;
		for (size_t i = 0; i < sizeof(out->sched); i++)
			dst[i] = src[i];
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&t->sched_seq, memory_order_relaxed) == before)
			break;
	}
}

void stats_publish_hung(struct stats *s, uint32_t hung)
{
	atomic_store_explicit(&s->hung, hung, memory_order_relaxed);
}

uint32_t stats_read_hung(const struct stats *s)
{
	return atomic_load_explicit(&((struct stats *)s)->hung, memory_order_relaxed);
}

void stats_publish_executors(struct stats *s, uint32_t executors)
{
	atomic_store_explicit(&s->executors, executors, memory_order_relaxed);
}

uint32_t stats_read_executors(const struct stats *s)
{
	return atomic_load_explicit(&((struct stats *)s)->executors, memory_order_relaxed);
}

void stats_read_global(const struct stats *s, uint64_t *peak_rate_bytes_per_s, uint32_t *inflight,
		       uint32_t *max_inflight, uint32_t *reserved)
{
	struct stats *m = (struct stats *)s;
	*peak_rate_bytes_per_s = atomic_load_explicit(&m->peak_rate, memory_order_relaxed);
	*inflight = atomic_load_explicit(&m->inflight, memory_order_relaxed);
	*max_inflight = atomic_load_explicit(&m->max_inflight, memory_order_relaxed);
	*reserved = atomic_load_explicit(&m->reserved, memory_order_relaxed);
}

uint64_t stats_latency_quantile_ns(const uint64_t buckets[STATS_LATENCY_BUCKETS], double q)
{
	uint64_t total = 0;
	for (int i = 0; i < STATS_LATENCY_BUCKETS; i++)
		total += buckets[i];
	if (total == 0)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)total);
	if (rank >= total)
		rank = total - 1;
	uint64_t seen = 0;
	for (int i = 0; i < STATS_LATENCY_BUCKETS; i++) {
		seen += buckets[i];
		if (seen > rank)
			return (uint64_t)1 << (i + 1);
	}
	return (uint64_t)1 << STATS_LATENCY_BUCKETS;
}
