/* The holding door, learned (work_conserving = auto): whether the slots a
 * deep tenant in service leaves unused are room at the store or places in
 * its queue.
 *
 * Where the store serves fewer requests at once than max_inflight, the
 * others' requests let in beside a holding tenant's wait in the store's own
 * queue among its requests and take its share (two 16-deep readers at
 * 400:100 came out 1:1); where it has room, keeping them out only leaves
 * the store idle. So when the door first matters, and then at most every
 * DOOR_PROBE_EVERY_NS, it is opened and shut in turn for a few short
 * phases (open, shut, shut, open, ...: a drift in the store's rate falls on
 * both alike), and each queue's completed bytes are counted by the phase
 * they came back in. A queue on whose behalf the door let others in, and
 * which moved clearly less with it open than shut, lost its service to
 * them: until the next probe the door stays shut to anyone more than a
 * slice ahead of its share while it holds (work_conserving = no). Where it
 * moved about as much either way, the door stays open; for a queue the
 * door let nobody in for (others held through the open phases) the probe
 * says nothing, and its verdict stands. The probes are
 * short and rare because their shut phases are what work conservation
 * avoids: on a loaded FUSE host a probe each second cost shapes their
 * total. */
#include "sched_internal.h"

#define DOOR_PROBE_EVERY_NS 4000000000ull
#define DOOR_PHASE_NS 25000000ull
#define DOOR_PHASES 8u
/* Shut for a queue that kept less than this much of its shut rate open. */
#define DOOR_KEEP_PCT 85u

/* Phase i of a probe: open for 0, 3, 4, 7; shut for 1, 2, 5, 6. */
static bool phase_shut(uint32_t phase)
{
	return ((phase + 1) / 2) % 2 == 1;
}

/* What the open door let a queue take beyond a slice ahead of its share
 * is not paid back once the door shuts: paid back, a light reader let in
 * at every free slot before the first verdict was then shut out for
 * seconds. Any queue: in service, waiting, or out of the trees with its
 * tags kept for its return. */
static void door_forgive(struct sched *s)
{
	struct sched_link *l;
	sched_list_foreach(l, &s->all_queues) {
		struct sched_queue *q = sched_list_entry(l, struct sched_queue, all_link);
		struct wf2q_entity *e = &q->ent;
		if (sched_wf2q_ahead_ok(&s->wq, e))
			continue;
		uint64_t back = e->start_vt - (s->wq.vtime + (e->finish_vt - e->start_vt));
		e->start_vt -= back;
		e->finish_vt -= back;
		sched_wf2q_reposition(&s->wq, e);
	}
}

static void door_decide(struct sched *s)
{
	bool shut = false;
	struct sched_link *l;
	sched_list_foreach(l, &s->all_queues) {
		struct sched_queue *q = sched_list_entry(l, struct sched_queue, all_link);
		struct queue_door *d = &q->door;
		if (d->used)
			d->shut = d->bytes[1] &&
				  d->bytes[0] * 100 < d->bytes[1] * DOOR_KEEP_PCT;
		shut |= d->shut;
		d->bytes[0] = d->bytes[1] = 0;
		d->used = false;
	}
	if (shut)
		door_forgive(s);
}

/* The probe phase now, or -1 outside a probe; ends a probe that is over. */
static int door_phase(struct sched *s, uint64_t now_ns)
{
	struct door_probe *p = &s->door;
	if (!p->start_ns || now_ns < p->start_ns)
		return -1; /* no probe, or stamped before it began: not part of it */
	uint64_t phase = (now_ns - p->start_ns) / DOOR_PHASE_NS;
	if (phase < DOOR_PHASES)
		return (int)phase;
	door_decide(s);
	p->start_ns = 0;
	return -1;
}

void sched_door_forget(struct sched *s)
{
	s->door = (struct door_probe){ 0 };
	struct sched_link *l;
	sched_list_foreach(l, &s->all_queues) {
		struct sched_queue *q = sched_list_entry(l, struct sched_queue, all_link);
		q->door = (struct queue_door){ 0 };
	}
}

bool sched_door_shut(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	if (s->p.work_conserving != SCHED_DOOR_LEARN)
		return s->p.work_conserving == SCHED_DOOR_SHUT;
	int phase = door_phase(s, now_ns);
	if (phase < 0 && now_ns >= s->door.next_ns) {
		s->door.start_ns = now_ns ? now_ns : 1;
		s->door.next_ns = now_ns + DOOR_PROBE_EVERY_NS;
		phase = 0;
	}
	return phase < 0 ? g->door.shut : phase_shut((uint32_t)phase);
}

void sched_door_used(struct sched *s, struct sched_queue *g, uint64_t now_ns)
{
	int phase = door_phase(s, now_ns);
	if (phase >= 0 && !phase_shut((uint32_t)phase))
		g->door.used = true;
}

void sched_door_completion(struct sched *s, struct sched_queue *q, const struct sched_req *r,
			   uint64_t now_ns)
{
	int phase = door_phase(s, now_ns);
	if (phase >= 0)
		q->door.bytes[phase_shut((uint32_t)phase)] += r->bytes;
}
