#include "wf2q.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>

void sched_wf2q_init(struct wf2q *w)
{
	*w = (struct wf2q){ 0 };
}

void sched_wf2q_destroy(struct wf2q *w)
{
	for (int i = 0; i < WF2Q_NHEAPS; i++)
		free(w->heap[i].v);
	*w = (struct wf2q){ 0 };
}

int sched_wf2q_reserve(struct wf2q *w, size_t n)
{
	for (int i = 0; i < WF2Q_NHEAPS; i++) {
		struct wf2q_heap *h = &w->heap[i];
		if (h->cap >= n)
			continue;
		size_t cap = h->cap ? h->cap : 16;
		while (cap < n)
			cap *= 2;
		struct wf2q_entity **v = realloc(h->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		h->v = v;
		h->cap = cap;
	}
	return 0;
}

uint64_t sched_wf2q_vt_len(uint64_t bytes, uint32_t weight)
{
	unsigned __int128 len = (unsigned __int128)bytes * WF2Q_SCALE / (weight ? weight : 1);
	return len > WF2Q_LEN_MAX ? WF2Q_LEN_MAX : (uint64_t)len;
}

static uint64_t entity_key(const struct wf2q_entity *e, int which)
{
	return which == WF2Q_WAITING ? e->start_vt : e->finish_vt;
}

static bool entity_less(const struct wf2q_entity *a, const struct wf2q_entity *b, int which)
{
	uint64_t ka = entity_key(a, which), kb = entity_key(b, which);
	if (ka != kb)
		return sched_wf2q_before(ka, kb);
	return a->id < b->id;
}

static void heap_set(struct wf2q_heap *h, size_t i, struct wf2q_entity *e)
{
	h->v[i] = e;
	e->heap_pos = (int32_t)i;
}

static void heap_up(struct wf2q_heap *h, size_t i, int which)
{
	struct wf2q_entity *e = h->v[i];
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (!entity_less(e, h->v[p], which))
			break;
		heap_set(h, i, h->v[p]);
		i = p;
	}
	heap_set(h, i, e);
}

static void heap_down(struct wf2q_heap *h, size_t i, int which)
{
	struct wf2q_entity *e = h->v[i];
	for (;;) {
		size_t c = 2 * i + 1;
		if (c >= h->n)
			break;
		if (c + 1 < h->n && entity_less(h->v[c + 1], h->v[c], which))
			c++;
		if (!entity_less(h->v[c], e, which))
			break;
		heap_set(h, i, h->v[c]);
		i = c;
	}
	heap_set(h, i, e);
}

static void heap_push(struct wf2q_heap *h, struct wf2q_entity *e, int which)
{
	e->heap_which = (uint8_t)which;
	h->v[h->n++] = e;
	heap_up(h, h->n - 1, which);
}

static void heap_del(struct wf2q_heap *h, struct wf2q_entity *e, int which)
{
	size_t i = (size_t)e->heap_pos;
	struct wf2q_entity *last = h->v[--h->n];
	e->heap_pos = -1;
	if (i == h->n)
		return;
	heap_set(h, i, last);
	heap_up(h, i, which);
	heap_down(h, (size_t)last->heap_pos, which);
}

void sched_wf2q_insert(struct wf2q *w, struct wf2q_entity *e)
{
	int which = sched_wf2q_before(w->vtime, e->start_vt) ? WF2Q_WAITING : WF2Q_ELIGIBLE;
	heap_push(&w->heap[which], e, which);
}

void sched_wf2q_park(struct wf2q *w, struct wf2q_entity *e)
{
	heap_push(&w->heap[WF2Q_PARKED], e, WF2Q_PARKED);
}

void sched_wf2q_rest(struct wf2q *w, struct wf2q_entity *e)
{
	heap_push(&w->heap[WF2Q_RESTING], e, WF2Q_RESTING);
}

void sched_wf2q_remove(struct wf2q *w, struct wf2q_entity *e)
{
	if (e->heap_pos < 0)
		return;
	heap_del(&w->heap[e->heap_which], e, e->heap_which);
}

void sched_wf2q_reposition(struct wf2q *w, struct wf2q_entity *e)
{
	if (e->heap_pos < 0)
		return;
	int which = e->heap_which;
	sched_wf2q_remove(w, e);
	if (which == WF2Q_PARKED || which == WF2Q_RESTING)
		heap_push(&w->heap[which], e, which);
	else
		sched_wf2q_insert(w, e);
}

static void wf2q_migrate(struct wf2q *w)
{
	struct wf2q_heap *wait = &w->heap[WF2Q_WAITING];
	while (wait->n && !sched_wf2q_before(w->vtime, wait->v[0]->start_vt)) {
		struct wf2q_entity *e = wait->v[0];
		heap_del(wait, e, WF2Q_WAITING);
		heap_push(&w->heap[WF2Q_ELIGIBLE], e, WF2Q_ELIGIBLE);
	}
}

void sched_wf2q_advance(struct wf2q *w, uint64_t service_bytes)
{
	if (!w->wsum)
		return;
	unsigned __int128 d = (unsigned __int128)service_bytes * WF2Q_SCALE / w->wsum;
	w->vtime += d > WF2Q_LEN_MAX ? WF2Q_LEN_MAX : (uint64_t)d;
	wf2q_migrate(w);
}

bool sched_wf2q_ahead_ok(const struct wf2q *w, const struct wf2q_entity *e)
{
	return !sched_wf2q_before(e->finish_vt - e->start_vt, e->start_vt - w->vtime);
}

bool sched_wf2q_early_ok(const struct wf2q *w, const struct wf2q_entity *e)
{
	const struct wf2q_entity *park = sched_wf2q_peek(w, WF2Q_PARKED);
	if (!park || !sched_wf2q_before(park->finish_vt, e->start_vt))
		return true;
	return sched_wf2q_ahead_ok(w, e);
}

void sched_wf2q_catch_up(struct wf2q *w)
{
	const struct wf2q_entity *wait = sched_wf2q_peek(w, WF2Q_WAITING);
	if (sched_wf2q_peek(w, WF2Q_ELIGIBLE) || !wait)
		return;
	uint64_t vt = wait->start_vt;
	for (int which = WF2Q_PARKED; which <= WF2Q_RESTING; which++) {
		const struct wf2q_entity *kept = sched_wf2q_peek(w, which);
		if (kept && sched_wf2q_before(kept->finish_vt, vt))
			vt = kept->finish_vt;
	}
	if (sched_wf2q_before(w->vtime, vt)) {
		w->vtime = vt;
		wf2q_migrate(w);
	}
}

bool sched_wf2q_owed(const struct wf2q *w, const struct wf2q_entity *e)
{
	if (e->heap_pos < 0 || e->heap_which >= WF2Q_PARKED)
		return false;
	return e->heap_which == WF2Q_ELIGIBLE || sched_wf2q_ahead_ok(w, e);
}

struct wf2q_entity *sched_wf2q_select(struct wf2q *w)
{
	sched_wf2q_catch_up(w);
	struct wf2q_entity *e = sched_wf2q_peek(w, WF2Q_ELIGIBLE);
	if (e || !sched_wf2q_peek(w, WF2Q_WAITING))
		return e;
	e = sched_wf2q_peek(w, WF2Q_WAITING);
	return sched_wf2q_early_ok(w, e) ? e : NULL;
}

struct wf2q_entity *sched_wf2q_peek(const struct wf2q *w, int which)
{
	return w->heap[which].n ? w->heap[which].v[0] : NULL;
}
