/* The executors' line (executor_line.h): a list in arrival order, counts per tenant and per user. */
#include "fusesched/executor_line.h"
#include "fusesched/uid_counts.h"

#include <errno.h>
#include <stdlib.h>

struct executor_line {
	struct executor_line_item *head, *tail;
	uint32_t bound, shared;
	uint32_t held;		/* executors held in all */
	bool tightened;		/* executor_line_tightened */
	uint32_t *tenant_held;	/* by tenant id, max_tenants of them */
	uint32_t max_tenants;
	struct uid_counts uids;	/* executors held per user */
};

int executor_line_new(uint32_t max_tenants, uint32_t bound, uint32_t shared,
		      struct executor_line **out)
{
	struct executor_line *l = calloc(1, sizeof(*l));
	if (!l || !(l->tenant_held = calloc(max_tenants ? max_tenants : 1, sizeof(uint32_t)))) {
		free(l);
		return -ENOMEM;
	}
	l->max_tenants = max_tenants;
	executor_line_set_limits(l, bound, shared);
	*out = l;
	return 0;
}

void executor_line_free(struct executor_line *l)
{
	if (!l)
		return;
	free(l->tenant_held);
	uid_counts_free(&l->uids);
	free(l);
}

void executor_line_set_limits(struct executor_line *l, uint32_t bound, uint32_t shared)
{
	l->bound = bound ? bound : 1;
	l->shared = shared;
}

bool executor_line_empty(const struct executor_line *l)
{
	return !l->head;
}

uint32_t executor_line_held(const struct executor_line *l, uint32_t tenant)
{
	return tenant < l->max_tenants ? l->tenant_held[tenant] : 0;
}

static bool may_go(struct executor_line *l, const struct executor_line_item *it)
{
	uint32_t tenant = it->tenant < l->max_tenants ? l->tenant_held[it->tenant] : 0;
	const uint32_t *u = it->uid ? uid_counts_find(&l->uids, it->uid, false) : NULL;
	uint32_t user = u ? *u : 0;
	if (tenant >= l->bound || user >= l->bound)
		return false;
	return l->held < l->shared || (tenant == 0 && user == 0);
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
	l->held++;
	if (it->tenant < l->max_tenants)
		l->tenant_held[it->tenant]++;
	uint32_t *u = it->uid ? uid_counts_find(&l->uids, it->uid, true) : NULL;
	it->uid_counted = u != NULL;
	if (u)
		(*u)++;
	/* Below the room and every owner below the bound, whatever could go still can. */
	bool tenant_full = it->tenant < l->max_tenants && l->tenant_held[it->tenant] >= l->bound;
	if (l->head && (l->held >= l->shared || tenant_full || (u && *u >= l->bound)))
		l->tightened = true;
	return it;
}

bool executor_line_tightened(struct executor_line *l)
{
	bool was = l->tightened;
	l->tightened = false;
	return was;
}

void executor_line_each_waiting(struct executor_line *l,
				void (*fn)(struct executor_line_item *it, void *arg), void *arg)
{
	for (struct executor_line_item *it = l->head; it; it = it->next)
		if (!may_go(l, it))
			fn(it, arg);
}

void executor_line_done(struct executor_line *l, const struct executor_line_item *it)
{
	l->held--;
	if (it->tenant < l->max_tenants && l->tenant_held[it->tenant])
		l->tenant_held[it->tenant]--;
	uint32_t *u = it->uid_counted ? uid_counts_find(&l->uids, it->uid, false) : NULL;
	if (u && *u) {
		(*u)--;
		uid_counts_forget_idle(&l->uids, it->uid);
	}
}
