/*
 * Ring personalities: the credentials the engine's io_uring requests run with.
 *
 * io_uring runs a request with its submitter's credentials (the reactor's:
 * root) unless the SQE names a personality, a credential set registered
 * earlier by a thread that held it (IORING_REGISTER_PERSONALITY). Data is
 * written as the file's opener (creds.h), so each distinct opener
 * credential set gets one personality: registered by the worker serving the
 * first open with it, shared by every open file with it, kept while any
 * such file is open, and unregistered once idle when more than idle_max are
 * idle. Root openers need none (id 0: the reactor's own credentials).
 */
#ifndef FUSESCHED_PERSONALITY_H
#define FUSESCHED_PERSONALITY_H

#include "fusesched/creds.h"

#include <stdint.h>

struct io_uring;
struct personality_cache;

/*
 * The ring is borrowed. live_max bounds the credential sets in use at once
 * (past it, opens with a new one fail with ENFILE); owner_live_max bounds
 * those one owner (a tenant id below owners) made live, so that one tenant
 * cycling through credentials cannot take them all (past it, its own opens
 * with a new one fail with EMFILE).
 */
int personality_cache_new(struct io_uring *ring, uint32_t idle_max, uint32_t live_max,
			  uint32_t owner_live_max, uint32_t owners, struct personality_cache **out);
/* Unregisters every personality. */
void personality_cache_free(struct personality_cache *pc);

/*
 * The personality for c, with one more reference, for owner's open: > 0, 0
 * for root (none needed), or -errno (ENFILE, EMFILE: see above; or the
 * registration failed). Call from a thread that is root
 * with no switched credentials; it switches to c to register.
 */
int personality_get(struct personality_cache *pc, const struct creds *c, uint32_t owner);
/* Drops a reference taken by personality_get (0 is ignored). */
void personality_put(struct personality_cache *pc, int id);

/* Registered personalities, idle ones included (tests and stats). */
uint32_t personality_count(struct personality_cache *pc);

#endif
