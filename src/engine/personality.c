/* Ring personalities per opener credential set, reference-counted, idle ones bounded. */
#include "fusesched/personality.h"

#include <errno.h>
#include <liburing.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

struct personality {
	struct creds creds;
	int id;
	uint32_t refs;             /* open files with these credentials */
	uint64_t idle_since;       /* idle_clock when refs fell to 0 */
	uint32_t owner;            /* whose open made it live (counted in owner_live) */
};

struct personality_cache {
	pthread_mutex_t lock;
	struct io_uring *ring;
	uint32_t idle_max;
	uint32_t live_max;
	uint32_t owner_live_max;   /* live entries one owner may have made live */
	uint32_t owners;
	uint32_t *owner_live;      /* by owner (tenant) id */
	/* Few distinct credential sets are open at once: a linear scan beats a hash here. */
	struct personality *entries;
	uint32_t count;
	uint32_t capacity;
	uint32_t idle;
	uint64_t idle_clock;
	bool holds_id_zero;
};

int personality_cache_new(struct io_uring *ring, uint32_t idle_max, uint32_t live_max,
			  uint32_t owner_live_max, uint32_t owners, struct personality_cache **out)
{
	struct personality_cache *pc = calloc(1, sizeof(*pc));
	if (!pc)
		return -ENOMEM;
	pc->owners = owners ? owners : 1;
	pc->owner_live = calloc(pc->owners, sizeof(*pc->owner_live));
	if (!pc->owner_live) {
		free(pc);
		return -ENOMEM;
	}
	pc->owner_live_max = owner_live_max ? owner_live_max : 1;
	pthread_mutex_init(&pc->lock, NULL);
	pc->ring = ring;
	pc->idle_max = idle_max;
	pc->live_max = live_max ? live_max : 1;
	*out = pc;
	return 0;
}

void personality_cache_free(struct personality_cache *pc)
{
	if (!pc)
		return;
	for (uint32_t i = 0; i < pc->count; i++)
		io_uring_unregister_personality(pc->ring, pc->entries[i].id);
	if (pc->holds_id_zero)
		io_uring_unregister_personality(pc->ring, 0);
	free(pc->entries);
	free(pc->owner_live);
	pthread_mutex_destroy(&pc->lock);
	free(pc);
}

static void remove_at(struct personality_cache *pc, uint32_t i)
{
	io_uring_unregister_personality(pc->ring, pc->entries[i].id);
	pc->entries[i] = pc->entries[--pc->count];
}

/* Caller holds the lock. Unregisters the longest-idle entries past idle_max. */
static void trim_idle(struct personality_cache *pc)
{
	while (pc->idle > pc->idle_max) {
		uint32_t oldest = pc->count;
		for (uint32_t i = 0; i < pc->count; i++)
			if (pc->entries[i].refs == 0 &&
			    (oldest == pc->count ||
			     pc->entries[i].idle_since < pc->entries[oldest].idle_since))
				oldest = i;
		if (oldest == pc->count)
			return;
		remove_at(pc, oldest);
		pc->idle--;
	}
}

/* Caller holds the lock. Registers c as this thread's credentials for a moment. */
static int register_creds(struct personality_cache *pc, const struct creds *c, uint32_t owner)
{
	if (pc->count - pc->idle >= pc->live_max)
		return -ENFILE;
	if (pc->owner_live[owner] >= pc->owner_live_max)
		return -EMFILE;
	if (pc->count == pc->capacity) {
		uint32_t capacity = pc->capacity ? pc->capacity * 2 : 16;
		struct personality *grown = realloc(pc->entries, capacity * sizeof(*grown));
		if (!grown)
			return -ENOMEM;
		pc->entries = grown;
		pc->capacity = capacity;
	}
	int r = creds_enter(c);
	if (r)
		return r;
	int id = io_uring_register_personality(pc->ring);
	if (id == 0) {
		/* An SQE cannot name id 0 (it means "none"): keep it taken, never used. */
		pc->holds_id_zero = true;
		id = io_uring_register_personality(pc->ring);
	}
	creds_leave();
	if (id < 0)
		return id;
	pc->entries[pc->count++] = (struct personality){.creds = *c, .id = id, .refs = 1, .owner = owner};
	pc->owner_live[owner]++;
	return id;
}

int personality_get(struct personality_cache *pc, const struct creds *c, uint32_t owner)
{
	if (creds_are_root(c))
		return 0;
	if (owner >= pc->owners)
		owner = 0;
	pthread_mutex_lock(&pc->lock);
	int id = 0;
	for (uint32_t i = 0; i < pc->count && !id; i++) {
		struct personality *p = &pc->entries[i];
		if (creds_equal(&p->creds, c)) {
			id = p->id;
			if (p->refs == 0) {
				/* Made live again: by this owner, within its share. */
				if (pc->owner_live[owner] >= pc->owner_live_max) {
					id = -EMFILE;
					break;
				}
				pc->idle--;
				p->owner = owner;
				pc->owner_live[owner]++;
			}
			p->refs++;
		}
	}
	if (!id) {
		trim_idle(pc); /* room before growing */
		id = register_creds(pc, c, owner);
	}
	pthread_mutex_unlock(&pc->lock);
	return id;
}

void personality_put(struct personality_cache *pc, int id)
{
	if (id <= 0)
		return;
	pthread_mutex_lock(&pc->lock);
	for (uint32_t i = 0; i < pc->count; i++) {
		struct personality *p = &pc->entries[i];
		if (p->id == id) {
			if (--p->refs == 0) {
				pc->owner_live[p->owner]--;
				p->idle_since = ++pc->idle_clock;
				pc->idle++;
				trim_idle(pc);
			}
			break;
		}
	}
	pthread_mutex_unlock(&pc->lock);
}

uint32_t personality_count(struct personality_cache *pc)
{
	pthread_mutex_lock(&pc->lock);
	uint32_t n = pc->count;
	pthread_mutex_unlock(&pc->lock);
	return n;
}
