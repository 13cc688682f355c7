/* Tenant queues: tenant id -> scheduler queue and group, placed in the
 * scheduler's tree as the tenant table places the tenant (tenant_queues.h). */
#include "fusesched/tenant_queues.h"
#include "fusesched/sched.h"
#include "fusesched/tenant.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The tenant table never makes a chain this deep (cgroup paths are at most
 * 4096 bytes); the bound only stops a loop should a reload ever race. */
#define TREE_DEPTH_MAX 128u

struct tenant_slot {
	struct sched_queue *queue;	/* NULL: no request yet, or retired */
	struct sched_group *group;	/* while it is (or was) some tenant's parent */
	uint32_t queue_weight;		/* the weight its queue has */
};

struct tenant_queues {
	struct sched *sched;
	struct tenant_table *tenants;
	uint32_t default_weight;
	struct tenant_slot *slots;	/* by tenant id */
	uint32_t count;
	uint64_t epoch;
};

int tenant_queues_new(struct sched *sched, struct tenant_table *tenants, uint32_t default_weight,
		      struct tenant_queues **out)
{
	struct tenant_queues *tq = calloc(1, sizeof(*tq));
	if (!tq)
		return -ENOMEM;
	tq->sched = sched;
	tq->tenants = tenants;
	tq->default_weight = default_weight;
	tq->epoch = tenant_table_weights_epoch(tenants);
	*out = tq;
	return 0;
}

void tenant_queues_free(struct tenant_queues *tq)
{
	if (!tq)
		return;
	free(tq->slots);
	free(tq);
}

static int slots_cover(struct tenant_queues *tq, uint32_t tenant)
{
	if (tenant < tq->count)
		return 0;
	uint32_t count = tq->count ? tq->count : 64;
	while (count <= tenant)
		count *= 2;
	struct tenant_slot *grown = realloc(tq->slots, count * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	memset(grown + tq->count, 0, (count - tq->count) * sizeof(*grown));
	tq->slots = grown;
	tq->count = count;
	return 0;
}

static uint32_t weight_of(const struct tenant_queues *tq, uint32_t tenant)
{
	uint32_t w = tenant_weight(tq->tenants, tenant);
	return w ? w : tq->default_weight;
}

static int place_queue(struct tenant_queues *tq, uint32_t tenant);

/* Tenant's group (NULL for TENANT_ID_NONE: the root), made with its
 * ancestors on first use. */
static int group_of(struct tenant_queues *tq, uint32_t tenant, uint32_t depth,
		    struct sched_group **out)
{
	*out = NULL;
	if (tenant == TENANT_ID_NONE || depth > TREE_DEPTH_MAX)
		return 0;
	int err = slots_cover(tq, tenant);
	if (err)
		return err;
	if (tq->slots[tenant].group) {
		*out = tq->slots[tenant].group;
		return 0;
	}
	struct sched_group *parent;
	err = group_of(tq, tenant_parent(tq->tenants, tenant), depth + 1, &parent);
	if (err)
		return err;
	struct sched_group *g;
	err = sched_group_get(tq->sched, tenant, parent, weight_of(tq, tenant), &g);
	if (err)
		return err;
	tq->slots[tenant].group = g;
	*out = g;
	/* Its own processes now share its group with its children. */
	return tq->slots[tenant].queue ? place_queue(tq, tenant) : 0;
}

static int place_queue(struct tenant_queues *tq, uint32_t tenant)
{
	struct sched_group *parent = tq->slots[tenant].group;
	uint32_t weight = tq->default_weight;
	if (!parent) {
		int err = group_of(tq, tenant_parent(tq->tenants, tenant), 0, &parent);
		if (err)
			return err;
		weight = weight_of(tq, tenant);
	}
	struct tenant_slot *slot = &tq->slots[tenant];
	sched_queue_set_parent(tq->sched, slot->queue, parent);
	if (weight != slot->queue_weight && sched_queue_set_weight(tq->sched, slot->queue, weight) == 0)
		slot->queue_weight = weight;
	return 0;
}

struct sched_queue *tenant_queues_get(struct tenant_queues *tq, uint32_t tenant)
{
	if (slots_cover(tq, tenant))
		return NULL;
	struct tenant_slot *slot = &tq->slots[tenant];
	if (slot->queue)
		return slot->queue;
	uint32_t weight = weight_of(tq, tenant);
	if (sched_queue_get(tq->sched, tenant, weight, &slot->queue) < 0)
		return NULL;
	slot->queue_weight = weight;
	/* Out of memory for its ancestors' groups: it competes at the root
	 * rather than not at all. */
	(void)place_queue(tq, tenant);
	return tq->slots[tenant].queue;
}

struct sched_queue *tenant_queues_find(const struct tenant_queues *tq, uint32_t tenant)
{
	return tenant < tq->count ? tq->slots[tenant].queue : NULL;
}

uint32_t tenant_queues_limit(const struct tenant_queues *tq)
{
	return tq->count;
}

/* Slots are re-read by index: making a group can grow the array. */
void tenant_queues_sync(struct tenant_queues *tq)
{
	uint64_t epoch = tenant_table_weights_epoch(tq->tenants);
	if (epoch == tq->epoch)
		return;
	tq->epoch = epoch;
	for (uint32_t id = 0; id < tq->count; id++) {
		struct sched_group *g = tq->slots[id].group, *parent;
		if (!g)
			continue;
		sched_group_set_weight(tq->sched, g, weight_of(tq, id));
		if (group_of(tq, tenant_parent(tq->tenants, id), 0, &parent) == 0)
			sched_group_set_parent(tq->sched, tq->slots[id].group, parent);
	}
	for (uint32_t id = 0; id < tq->count; id++)
		if (tq->slots[id].queue)
			(void)place_queue(tq, id);
}

void tenant_queues_retire(struct tenant_queues *tq, uint32_t tenant)
{
	if (tenant >= tq->count)
		return;
	struct tenant_slot *slot = &tq->slots[tenant];
	if (slot->queue)
		sched_queue_remove(tq->sched, slot->queue);
	if (slot->group)
		sched_group_remove(tq->sched, slot->group);
	*slot = (struct tenant_slot){ 0 };
}
