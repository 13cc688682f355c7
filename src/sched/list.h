/* Intrusive doubly linked list, the scheduler's only one.
 *
 * A member embeds a struct sched_link (declared in fusesched/sched.h, since
 * struct sched_req embeds one) and the list's head is one more, circular:
 * the head is its own sentinel, so no operation has a special case. A head
 * must be sched_list_init()ed; a member's link is zeroed while it is on no
 * list, which is what sched_list_linked() tests. */
#ifndef FUSESCHED_SCHED_LIST_H
#define FUSESCHED_SCHED_LIST_H

#include "fusesched/sched.h"

#include <stdbool.h>
#include <stddef.h>

#define sched_list_entry(link, type, member) \
	((type *)((char *)(link) - offsetof(type, member)))

/* The first member as a type *, or NULL when the list is empty. */
#define sched_list_first_entry(head, type, member) \
	(sched_list_empty(head) ? NULL : sched_list_entry((head)->next, type, member))

/* pos: the member's link; safe against removing pos inside the loop. */
#define sched_list_foreach(pos, head) \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

#define sched_list_foreach_safe(pos, tmp, head) \
	for ((pos) = (head)->next, (tmp) = (pos)->next; (pos) != (head); \
	     (pos) = (tmp), (tmp) = (pos)->next)

static inline void sched_list_init(struct sched_link *head)
{
	head->next = head->prev = head;
}

static inline bool sched_list_empty(const struct sched_link *head)
{
	return head->next == head;
}

static inline bool sched_list_linked(const struct sched_link *l)
{
	return l->next != NULL;
}

static inline void sched_list_add_tail(struct sched_link *head, struct sched_link *l)
{
	l->next = head;
	l->prev = head->prev;
	head->prev->next = l;
	head->prev = l;
}

static inline void sched_list_remove(struct sched_link *l)
{
	l->prev->next = l->next;
	l->next->prev = l->prev;
	l->next = l->prev = NULL;
}

#endif
