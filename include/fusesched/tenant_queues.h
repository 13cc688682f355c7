/*
 * Tenant queues: each tenant's scheduler queue, placed in the scheduler's
 * tree as the tenant table places the tenant.
 *
 * A tenant that is some tenant's parent (tenant_parent) is a scheduler
 * group with the parent's weight, whose share its children divide; the
 * tenant's own processes, if it has any, are its queue inside its own
 * group with the default weight, beside its children. Any other tenant's
 * queue sits in its parent's group (the root at the top) with its own
 * weight. Each tenant's path to the root is resolved when its queue or
 * group is made and again when the tenant table's weights epoch moves
 * (a reload), never per request.
 *
 * Reactor-only: no locking.
 */
#ifndef FUSESCHED_TENANT_QUEUES_H
#define FUSESCHED_TENANT_QUEUES_H

#include <stdint.h>

struct sched;
struct sched_queue;
struct tenant_table;
struct tenant_queues;

/* Both are borrowed. default_weight: the own queue's weight inside a
 * tenant's group. -ENOMEM. */
int tenant_queues_new(struct sched *sched, struct tenant_table *tenants, uint32_t default_weight,
		      struct tenant_queues **out);
void tenant_queues_free(struct tenant_queues *tq);

/* Tenant's queue, made and placed on first use; NULL: out of memory. */
struct sched_queue *tenant_queues_get(struct tenant_queues *tq, uint32_t tenant);
/* Its queue if it has one, else NULL. */
struct sched_queue *tenant_queues_find(const struct tenant_queues *tq, uint32_t tenant);
/* Tenant ids below this may have a queue. */
uint32_t tenant_queues_limit(const struct tenant_queues *tq);
/* Weights and parents again, if the tenant table's weights epoch moved. */
void tenant_queues_sync(struct tenant_queues *tq);
/* The tenant was retired: its queue and group are detached (they finish
 * what they hold), and its id may name a new tenant. */
void tenant_queues_retire(struct tenant_queues *tq, uint32_t tenant);

#endif
