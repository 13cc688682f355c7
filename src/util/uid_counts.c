/* Counts per user (uid_counts.h). */
#include "fusesched/uid_counts.h"

#include <stdlib.h>

uint32_t *uid_counts_find(struct uid_counts *c, uid_t uid, bool make)
{
	for (uint32_t i = 0; i < c->n; i++)
		if (c->users[i].uid == uid)
			return &c->users[i].count;
	if (!make)
		return NULL;
	if (c->n == c->capacity) {
		uint32_t capacity = c->capacity ? c->capacity * 2 : 16;
		struct uid_count *grown = realloc(c->users, capacity * sizeof(*grown));
		if (!grown)
			return NULL;
		c->users = grown;
		c->capacity = capacity;
	}
	c->users[c->n] = (struct uid_count){.uid = uid};
	return &c->users[c->n++].count;
}

void uid_counts_forget_idle(struct uid_counts *c, uid_t uid)
{
	for (uint32_t i = 0; i < c->n; i++) {
		if (c->users[i].uid != uid)
			continue;
		if (c->users[i].count == 0)
			c->users[i] = c->users[--c->n];
		return;
	}
}

void uid_counts_free(struct uid_counts *c)
{
	free(c->users);
	*c = (struct uid_counts){0};
}
