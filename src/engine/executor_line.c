/* The executors' line (executor_line.h): a list in arrival order, counts per tenant and per user. */
#include "fusesched/executor_line.h"

#include <errno.h>
#include <stdlib.h>

struct uid_held {
	uid_t uid;
	uint32_t held;
};

struct executor_line {
	struct executor_line_item *head, *tail;
	uint32_t bound;
	uint32_t *tenant_held;	/* by tenant id, max_tenants of them */
	uint32_t max_tenants;
	struct uid_held *uids;	/* users holding executors: few, so a list */
	uint32_t uid_count, uid_capacity;
};

int executor_line_new(uint32_t max_tenants, uint32_t bound, struct executor_line **out)
{
	struct executor_line *l = calloc(1, sizeof(*l));
	if (!l || !(l->tenant_held = calloc(max_tenants ? max_tenants : 1, sizeof(uint32_t)))) {
		free(l);
		return -ENOMEM;
	}
	l->max_tenants = max_tenants;
	l->bound = bound ? bound : 1;
	*out = l;
	return 0;
}

void executor_line_free(struct executor_line *l)
{
	if (!l)
		return;
	free(l->tenant_held);
	free(l->uids);
	free(l);
}

void executor_line_set_bound(struct executor_line *l, uint32_t bound)
{
	l->bound = bound ? bound : 1;
}


bool executor_line_empty(const struct executor_line *l)
{
	return !l->head;
}

uint32_t executor_line_held(const struct executor_line *l, uint32_t tenant)
{
	return tenant < l->max_tenants ? l->tenant_held[tenant] : 0;
}

static struct uid_held *uid_find(struct executor_line *l, uid_t uid)
{
	for (uint32_t i = 0; i < l->uid_count; i++)
		if (l->uids[i].uid == uid)
			return &l->uids[i];
	return NULL;
}

/* uid's entry, made if missing; NULL when out of memory. */
static struct uid_held *uid_entry(struct executor_line *l, uid_t uid)
{
	struct uid_held *u = uid_find(l, uid);
	if (u)
		return u;
	if (l->uid_count == l->uid_capacity) {
		uint32_t capacity = l->uid_capacity ? l->uid_capacity * 2 : 16;
		struct uid_held *grown = realloc(l->uids, capacity * sizeof(*grown));
		if (!grown)
			return NULL;
		l->uids = grown;
		l->uid_capacity = capacity;
	}
	l->uids[l->uid_count] = (struct uid_held){.uid = uid};
	return &l->uids[l->uid_count++];
}

static bool may_go(struct executor_line *l, const struct executor_line_item *it)
{
	if (it->tenant < l->max_tenants && l->tenant_held[it->tenant] >= l->bound)
		return false;
	if (it->uid == 0)
		return true;
	const struct uid_held *u = uid_find(l, it->uid);
	return !u || u->held < l->bound;
}

bool executor_line_push(struct executor_line *l, struct executor_line_item *it)
{
	it->next = NULL;
	if (l->tail)
		l->tail->next = it;
	else
		l->head = it;
	l->tail = it;
	return !may_go(l, it);
}

struct executor_line_item *executor_line_take(struct executor_line *l, bool bounded)
{
	struct executor_line_item *prev = NULL, *it = l->head;
	while (it && bounded && !may_go(l, it)) {
		prev = it;
		it = it->next;
	}
	if (!it)
		return NULL;
	if (prev)
		prev->next = it->next;
	else
		l->head = it->next;
	if (l->tail == it)
		l->tail = prev;
	it->next = NULL;
	if (it->tenant < l->max_tenants)
		l->tenant_held[it->tenant]++;
	struct uid_held *u = it->uid ? uid_entry(l, it->uid) : NULL;
	it->uid_counted = u != NULL;
	if (u)
		u->held++;
	return it;
}

void executor_line_done(struct executor_line *l, const struct executor_line_item *it)
{
	if (it->tenant < l->max_tenants && l->tenant_held[it->tenant])
		l->tenant_held[it->tenant]--;
	struct uid_held *u = it->uid_counted ? uid_find(l, it->uid) : NULL;
	if (u && --u->held == 0)
		*u = l->uids[--l->uid_count];
}
