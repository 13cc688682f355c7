/* B-WF2Q+ engine: virtual time, start/finish tags, eligibility.
 * No policy here: the policy (bfq.c) decides what a queue is charged and
 * when it is in or out of the trees; this file only keeps the order.
 * Internal to src/sched and its tests. */
#ifndef FUSESCHED_SCHED_WF2Q_H
#define FUSESCHED_SCHED_WF2Q_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Virtual time is bytes * WF2Q_SCALE / weight, where weights are shares
 * of the store in units of 1/4096 of a weight (tree.c's SHARE_ONE). The
 * scale keeps V moving when 10,000 tenants of weight 1000 share a 4 KiB
 * request (sum of weights 4e10), and gives a weight of 1 (unit 4096) 2^44
 * bytes before the signed compare would have to care about wrapping. A
 * length is capped at WF2Q_LEN_MAX (a tiny share of a huge charge), so
 * tags stay well inside that. */
#define WF2Q_SCALE (1ull << 32)
#define WF2Q_LEN_MAX (1ull << 60)

struct wf2q_entity {
	uint64_t start_vt, finish_vt;
	uint64_t id;		/* tie-break, so the order is total and testable */
	uint32_t weight;
	int32_t heap_pos;	/* -1: in no heap */
	uint8_t heap_which;	/* WF2Q_ELIGIBLE, WF2Q_WAITING, WF2Q_PARKED or WF2Q_RESTING */
};

/* Parked: nothing to serve now, but its place is kept (ordered by finish):
 * V does not jump past it when nobody is eligible, and others run at most a
 * slice of their own ahead of it. Resting: nothing queued, requests still
 * at the store (ordered by finish): V does not jump past it either, but
 * nobody is held back for it. */
enum { WF2Q_ELIGIBLE, WF2Q_WAITING, WF2Q_PARKED, WF2Q_RESTING, WF2Q_NHEAPS };

struct wf2q_heap {
	struct wf2q_entity **v;
	size_t n, cap;
};

/* Eligible (start <= V) ordered by finish; waiting (start > V) by start:
 * all O(log N), so selection cost does not grow with the tenant count. */
struct wf2q {
	uint64_t vtime;
	uint64_t wsum;		/* weights of the active entities, set by the policy */
	struct wf2q_heap heap[WF2Q_NHEAPS];
};

void sched_wf2q_init(struct wf2q *w);
void sched_wf2q_destroy(struct wf2q *w);
/* Room for n entities in each heap, so insertion never fails. */
int sched_wf2q_reserve(struct wf2q *w, size_t n);
uint64_t sched_wf2q_vt_len(uint64_t bytes, uint32_t weight);
/* Signed comparison so virtual time may wrap. */
static inline int sched_wf2q_before(uint64_t a, uint64_t b)
{
	return (int64_t)(a - b) < 0;
}
void sched_wf2q_insert(struct wf2q *w, struct wf2q_entity *e);
void sched_wf2q_park(struct wf2q *w, struct wf2q_entity *e);
void sched_wf2q_rest(struct wf2q *w, struct wf2q_entity *e);
void sched_wf2q_remove(struct wf2q *w, struct wf2q_entity *e);
/* After e's tags changed. */
void sched_wf2q_reposition(struct wf2q *w, struct wf2q_entity *e);
/* V += service / wsum, then entities that became eligible move over. */
void sched_wf2q_advance(struct wf2q *w, uint64_t service_bytes);
/* Waiting entity e is not more than one slice of its own (finish - start)
 * ahead of V. */
bool sched_wf2q_ahead_ok(const struct wf2q *w, const struct wf2q_entity *e);
/* Whether waiting entity e may be served now although V has not reached its
 * start: yes unless a parked entity's finish comes first (V could not jump
 * to e) and e is not sched_wf2q_ahead_ok. What a parked entity is owed back
 * thus stays bounded. */
bool sched_wf2q_early_ok(const struct wf2q *w, const struct wf2q_entity *e);
/* WF2Q+: virtual time never waits for nobody. If none is eligible, V jumps
 * to the smallest start, but not past a parked or resting entity's finish. */
void sched_wf2q_catch_up(struct wf2q *w);
/* e is in the eligible heap, or waiting at most one slice of its own ahead
 * of V: serving it now keeps its lead over its share bounded. */
bool sched_wf2q_owed(const struct wf2q *w, const struct wf2q_entity *e);
/* Smallest finish among eligible; if none is eligible, V first jumps to the
 * smallest start (WF2Q+: virtual time never waits for nobody), but not past
 * a parked entity's finish: then the waiting entity with the smallest start
 * is returned if sched_wf2q_early_ok, else NULL. */
struct wf2q_entity *sched_wf2q_select(struct wf2q *w);
struct wf2q_entity *sched_wf2q_peek(const struct wf2q *w, int which);

#endif
