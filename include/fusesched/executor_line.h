/*
 * The executors' line: requests waiting for a blocking executor (metadata
 * handed over, copies, large reads' answers), taken oldest first, except
 * that no tenant, and no user but root, holds more than `bound` executors
 * at once. The executors are few and shared, and a request on a store that
 * hangs holds its executor for as long as the store hangs: without the
 * bound, one user's hung lookups, spread over child cgroups (each a tenant
 * with its own share of the depth), took every executor and the others'
 * requests, dispatched, waited behind them. Past its bound a tenant's or
 * user's requests wait in the line until one of its own comes back; the
 * others pass them. Root is bounded per tenant only: its containers are
 * tenants apart, and root can make as many cgroups as it likes anyway.
 *
 * Hung requests cannot be taken back, so with enough owners hung at once
 * (a shared network store hung for many containers) the bound alone would
 * still let them take every executor. So once `shared` executors are held
 * in all, only a tenant and user holding none goes: what hangs can take no
 * more, and a newcomer still finds a thread (the engine starts one per
 * owner past the shared ones, up to its most).
 *
 * A request that could go when it came may not once others were taken
 * (its owner at the bound, the room filled): the line says so
 * (executor_line_tightened), and the engine takes such requests for hung
 * as it does those held back at their push, so they hold no depth.
 *
 * Not locked: the engine calls it under its executors' lock.
 */
#ifndef FUSESCHED_EXECUTOR_LINE_H
#define FUSESCHED_EXECUTOR_LINE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* Embedded in what waits; tenant ids at or past max_tenants are counted per user only. */
struct executor_line_item {
	struct executor_line_item *next;
	uint32_t tenant;
	uid_t uid;
	bool uid_counted;	/* set by executor_line_take */
};

struct executor_line;

/* 0 or -ENOMEM. */
int executor_line_new(uint32_t max_tenants, uint32_t bound, uint32_t shared,
		      struct executor_line **out);
void executor_line_free(struct executor_line *l);
void executor_line_set_limits(struct executor_line *l, uint32_t bound, uint32_t shared);

/* True when it waits: its tenant or user holds the bound now, or holds
 * any past the shared room (behind its own requests, which hang: only
 * hung ones hold executors past the depth). */
bool executor_line_push(struct executor_line *l, struct executor_line_item *it);
/*
 * The oldest item that may go (above; any item when !bounded: a drain),
 * out of the line and counted as held until executor_line_done; NULL if
 * none may go. Never fails: a user's count that cannot be made (out of
 * memory) is not bounded.
 */
struct executor_line_item *executor_line_take(struct executor_line *l, bool bounded);
void executor_line_done(struct executor_line *l, const struct executor_line_item *it);
/*
 * True, once, when a take since the last call may have left an item that
 * could go unable to: an owner at the bound, or the room full. Then
 * executor_line_each_waiting finds them.
 */
bool executor_line_tightened(struct executor_line *l);
/* fn on each item in the line that may not go now, oldest first. */
void executor_line_each_waiting(struct executor_line *l,
				void (*fn)(struct executor_line_item *it, void *arg), void *arg);
bool executor_line_empty(const struct executor_line *l);
/* Executors tenant holds now (tests). */
uint32_t executor_line_held(const struct executor_line *l, uint32_t tenant);

#endif
