/*
 * Per-tenant counters: written by the engine (its reactor and the FUSE
 * workers that run requests themselves), read by anyone (the control thread
 * serving `fusesched stat`) without stopping the engine.
 *
 * Plain counters are relaxed atomics. The scheduler's own view of a tenant
 * (weight, queue depths, idling, injection, budget expirations) is copied
 * by the engine into a seqlock-protected snapshot, so a reader sees one
 * consistent copy of it.
 */
#ifndef FUSESCHED_STATS_H
#define FUSESCHED_STATS_H

#include "fusesched/sched.h"

#include <stdbool.h>
#include <stdint.h>

enum stats_op {
	STATS_OP_READ,
	STATS_OP_WRITE,
	STATS_OP_SYNC,     /* fsync, fdatasync */
	STATS_OP_OTHER,    /* fallocate, copy_file_range */
	STATS_OP_NR,
};

/* Latency histogram: bucket i holds latencies in [2^i, 2^(i+1)) ns; bucket 0 also holds 0. */
#define STATS_LATENCY_BUCKETS 40

struct stats_tenant_snapshot {
	bool active;                          /* ever saw a request */
	uint64_t ops[STATS_OP_NR];
	uint64_t bytes[STATS_OP_NR];
	uint64_t errors;
	uint64_t solo_ops;                    /* of ops: run while the scheduler had nothing to do */
	uint64_t latency_buckets[STATS_LATENCY_BUCKETS];
	uint64_t latency_max_ns;
	struct sched_queue_stats sched;       /* as of the engine's last publish */
};

struct stats;

/* max_tenants: tenant ids are below it. NULL on allocation failure. */
struct stats *stats_new(uint32_t max_tenants);
void stats_free(struct stats *s);
uint32_t stats_max_tenants(const struct stats *s);

/* Any engine thread. */
void stats_record(struct stats *s, uint32_t tenant, enum stats_op op, uint64_t bytes,
		  uint64_t latency_ns, bool failed);
/* The request just recorded ran solo (engine.h: solo_requests). */
void stats_record_solo(struct stats *s, uint32_t tenant);

/* Engine reactor only. */
void stats_publish_sched(struct stats *s, uint32_t tenant, const struct sched_queue_stats *q);
/* The tenant id was retired and may be reused: its history must not carry over. */
void stats_reset_tenant(struct stats *s, uint32_t tenant);
/* reserved: dispatch slots the scheduler keeps for tenants that come and go
 * (sched_reserved_slots). */
void stats_publish_global(struct stats *s, uint64_t peak_rate_bytes_per_s, uint32_t inflight,
			  uint32_t max_inflight, uint32_t reserved);

/* Any thread. */
void stats_read_tenant(const struct stats *s, uint32_t tenant, struct stats_tenant_snapshot *out);
/* Of the requests in flight, those taken to be hung at the store (sched_hung). */
void stats_publish_hung(struct stats *s, uint32_t hung);
uint32_t stats_read_hung(const struct stats *s);
/* Executor threads running (engine_executors): more while requests hang. */
void stats_publish_executors(struct stats *s, uint32_t executors);
uint32_t stats_read_executors(const struct stats *s);

void stats_read_global(const struct stats *s, uint64_t *peak_rate_bytes_per_s, uint32_t *inflight,
		       uint32_t *max_inflight, uint32_t *reserved);

/* The kernel's async request limit in force (max_background; engine.h), 0 until known. */
void stats_publish_kernel_queue(struct stats *s, uint32_t limit);
uint32_t stats_read_kernel_queue(const struct stats *s);

/* The scheduler's settings in force (a reload changes some: sched_reload),
 * published by the engine when it applies them. */
struct stats_settings {
	struct sched_params sched;
	uint64_t busy_poll_ns;
};
void stats_publish_settings(struct stats *s, const struct stats_settings *in);
void stats_read_settings(const struct stats *s, struct stats_settings *out);

/* How long the kernel trusts names and attributes on the watched backing filesystem (watch.h), 0: not watched. */
void stats_publish_watch_timeout(struct stats *s, uint32_t seconds);
uint32_t stats_read_watch_timeout(const struct stats *s);

/* Latency at quantile q (0..1) from histogram buckets: the bucket's upper bound, in ns. */
uint64_t stats_latency_quantile_ns(const uint64_t buckets[STATS_LATENCY_BUCKETS], double q);

#endif
