/*
 * I/O buffers for the engine: page-aligned blocks carved from one arena that
 * is faulted in once and registered with io_uring.
 *
 * A fresh malloc'd 1 MiB buffer per request costs an mmap, 256 page faults
 * and an munmap with a TLB shootdown; a registered block costs none of that,
 * and the kernel skips pinning its pages on every direct I/O. Blocks come in
 * power-of-two sizes from 4 KiB to 1 MiB (one 1 MiB slab of the arena per
 * size at a time; a slab whose blocks are all free goes back to any size).
 * A request larger than 1 MiB, or one that finds the arena full, gets a
 * mapping of its own instead: slower, never refused. Mappings of up to
 * 1 MiB are made at their block size and, given back, kept for reuse by
 * size until bufpool_trim finds them unused, so a flood maps its buffers
 * once and its memory goes back to the system after it.
 *
 * Thread-safe: FUSE workers take buffers for the writes they copy in and for
 * their solo requests, the reactor for the reads it dispatches.
 */
#ifndef FUSESCHED_BUFPOOL_H
#define FUSESCHED_BUFPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/uio.h>

#define BUFPOOL_ALIGN_BYTES 4096u
#define BUFPOOL_MAX_BLOCK_BYTES (1u << 20)

struct bufpool;

/* arena_bytes is rounded down to whole 1 MiB slabs; 0 makes a pool of heap buffers only. */
int bufpool_new(size_t arena_bytes, struct bufpool **out);
void bufpool_free(struct bufpool *pool);

/* The whole arena, for io_uring_register_buffers (iov_len 0 without an arena). */
struct iovec bufpool_arena(const struct bufpool *pool);

/* A page-aligned buffer of at least bytes (1 when 0), or NULL when out of memory. */
void *bufpool_get(struct bufpool *pool, size_t bytes);

/*
 * The same for a payload that will wait in a queue (a write copied in): it
 * takes a fresh slab only while less than half the arena is in use, so a
 * backlog cannot leave the requests being dispatched without registered
 * buffers.
 */
void *bufpool_get_queued(struct bufpool *pool, size_t bytes);

/* Gives back a buffer from bufpool_get or bufpool_get_queued. NULL is ignored. */
void bufpool_put(struct bufpool *pool, void *buf);

/* True when buf lies in the arena (it may then be used as registered buffer 0). */
bool bufpool_in_arena(const struct bufpool *pool, const void *buf);

/* Arena slabs in use right now and heap buffers handed out so far (tests, stats). */
size_t bufpool_slabs_used(struct bufpool *pool);
size_t bufpool_heap_fallbacks(struct bufpool *pool);
/* Bytes mapped for heap buffers: handed out, or kept for reuse. */
size_t bufpool_heap_bytes(struct bufpool *pool);

/*
 * Unmaps the kept heap buffers that sat unused since the last call (the
 * fewest kept at any moment since), at most max_unmaps of them; returns how
 * many. Called periodically (the reactor: each second), it leaves a
 * running flood's buffers alone and returns them within two calls of its end.
 */
size_t bufpool_trim(struct bufpool *pool, size_t max_unmaps);

#endif
