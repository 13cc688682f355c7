/*
 * The io_uring engine: the scheduled datapath.
 *
 * FUSE worker threads hand data requests over through a lock-free stack and
 * an eventfd and return at once. One reactor thread owns the ring and the
 * scheduler: it enqueues each request in its tenant's queue, submits what
 * the scheduler dispatches, and replies to FUSE from the completions
 * (exactly one reply per request). Writes run as the file's opener: ring
 * requests carry its personality (personality.h), workers switch to it
 * (creds.h). The scheduler's idle timer and budget
 * timeout are waited on with the ring; with requests at the store it polls
 * briefly before sleeping (busy_poll_ns).
 *
 * Buffered writes are the exception: io_uring cannot write most page caches
 * without blocking and would pass them to a thread of its own, so the FUSE
 * worker waits for the scheduler to dispatch its write, runs it from its own
 * buffer, tells the reactor, and replies itself (at most max_held_writes
 * workers at once; past that, writes are copied and go through the ring).
 *
 * And while the scheduler has nothing to do (nothing queued or in flight,
 * no idle window), it would dispatch the next request at once: then one
 * worker at a time runs its read, write or sync itself and replies, with no
 * handoff (solo_requests). The first request that overlaps it goes to the
 * reactor, and the scheduler orders everything from there.
 */
#ifndef FUSESCHED_ENGINE_H
#define FUSESCHED_ENGINE_H

#include "fusesched/datapath.h"
#include "fusesched/sched.h"

#include <stddef.h>
#include <stdint.h>

struct stats;
struct tenant_table;

struct engine_params {
	struct sched_params sched;
	uint32_t ring_entries;          /* 0: derived from sched.max_inflight */
	uint64_t retire_check_ns;       /* how often idle tenants are retired: 1 s */
	uint64_t stats_publish_ns;      /* how often the scheduler's view is published: 100 ms */
	/*
	 * I/O buffers registered with the ring (bufpool.h): 64 MiB, enough for
	 * max_inflight 1 MiB requests plus queued writes; past it requests use
	 * heap buffers. 0: heap buffers only.
	 */
	uint64_t buffer_arena_bytes;
	/*
	 * FUSE workers that may wait for their own buffered write (16), a
	 * quarter of them for one tenant: each is a worker not reading
	 * requests, so this stays well under the loop's thread cap. 0: every
	 * write is copied and goes through the ring.
	 */
	uint32_t max_held_writes;
	/*
	 * FUSE workers that may run metadata at once, whoever it is for (32:
	 * half the loop's 64 threads, so with max_held_writes and the solo
	 * worker a quarter is always left to read requests). Past it,
	 * metadata is handed over and waits as a request, even for a tenant
	 * alone: a store that hangs for one tenant's metadata (a hung NFS
	 * subtree under many of its processes) holds at most this many
	 * workers, and the others' requests are still read. 0: no metadata
	 * runs at once.
	 */
	uint32_t max_inline_meta;
	/*
	 * An executor idle this long ends while more are running than the
	 * depth and the requests hung now want (10 s): a store that hung for
	 * hundreds of owners had started as many threads, and they stayed for
	 * good after it came back, each a task against the service's pids
	 * limit, a kernel stack and some 20 KiB of the daemon's memory.
	 */
	uint64_t executor_idle_ns;
	/*
	 * While the scheduler has nothing queued, in flight or timed, one FUSE
	 * worker at a time runs its read, write, fsync or fdatasync itself
	 * (counted in stats and in the scheduler's view of its tenant): true.
	 * false: every request is dispatched by the scheduler.
	 */
	bool solo_requests;
	/*
	 * With requests at the store, the reactor polls this long for the next
	 * completion or request before it sleeps (200 us), while the waits it
	 * sees average less than that and only one tenant has requests. 0: it
	 * always sleeps.
	 */
	uint64_t busy_poll_ns;
	/* How requests are answered: NULL for FUSE (datapath_reply_fuse); tests record. */
	datapath_reply_fn *reply;
};

void engine_params_default(struct engine_params *p);

struct engine;

/*
 * The tenant table and stats are borrowed and must outlive the engine; stats
 * must cover every tenant id. Returns 0 or -errno with a message naming the
 * problem (io_uring unavailable, ...).
 */
int engine_new(const struct engine_params *p, struct tenant_table *tenants, struct stats *stats,
	       struct engine **out, char *err, size_t err_bytes);

/*
 * Registers the I/O buffers with the ring and starts the reactor thread. Call
 * it in the process that serves, after any fork (daemonizing): registered
 * pages belong to the process that registers them.
 */
int engine_start(struct engine *e);

/*
 * Stops taking requests, serves and replies to everything queued or in
 * flight, and joins the reactor. Call after the FUSE loop returned and
 * before unmounting, so every acknowledged request really completed.
 */
void engine_stop(struct engine *e);

void engine_free(struct engine *e);

/*
 * The engine's threads by name (top -H, /proc/PID/task/TID/comm): the one
 * reactor, and the blocking executors, which also answer large reads so
 * that the reactor never spends a copy's time on one tenant's answer.
 */
#define ENGINE_REACTOR_THREAD "fs-reactor"
#define ENGINE_EXECUTOR_THREAD "fs-executor"

/* The datapath fs/ submits to. Valid while the engine lives. */
struct datapath *engine_datapath(struct engine *e);

/*
 * The kernel's queue of async requests (aio direct I/O, readahead,
 * writeback: max_background) is one FIFO every tenant's requests pass
 * through, and the daemon reads each request whole, payload included. Its
 * length in requests is what the scheduler can see and choose among (deep
 * aio tenants keep their weights only if it holds more of their requests
 * than may be in flight); its length in bytes is how long another tenant's
 * request waits behind a flood's burst before it is even read (1024
 * requests of 1 MiB: a quarter of a second of copying on two cores). So
 * the limit is sized in bytes: ENGINE_KERNEL_QUEUE_BYTES over the mean
 * size of the reads and writes of the last second, but never below
 * min_requests (max_inflight: a deep tenant alone can fill the store) nor
 * above max; it starts as for the largest requests. (64 MiB left a
 * prober's requests twice as long behind a 1 MiB direct-write flood's
 * burst, for 5% more of the flood's rate; what the scheduler must see of
 * deep tenants beyond max_inflight is the room below.) Each second the
 * engine adds room for the requests the scheduler held back of others
 * while a deep tenant waited for its own (sched_take_held_beside_deep), at
 * most ENGINE_KERNEL_QUEUE_HELD_BYTES of them: held, they stay outstanding
 * in that queue, and the deep tenant's next requests would wait behind
 * them in the kernel. It adds room too, past max, for twice what tenants
 * with requests hung at the store hold (sched_held_by_hung), at most
 * ENGINE_KERNEL_QUEUE_HELD_BYTES of requests their size: those stay
 * outstanding for as long as the store hangs.
 */
#define ENGINE_KERNEL_QUEUE_BYTES (32u << 20)
/* At most this much more room for requests the scheduler holds back while
 * a deep tenant waits for its own (engine.c, size_kernel_queue). */
#define ENGINE_KERNEL_QUEUE_HELD_BYTES (192u << 20)
/* The kernel's own ceiling for the limit (a 16-bit field); room for hung
 * tenants' requests may take it past max (engine.c, size_kernel_queue). */
#define ENGINE_KERNEL_QUEUE_LIMIT_MAX 65535u
#define ENGINE_MAX_TRANSFER_BYTES (1u << 20)  /* fs.h's FS_READ_MAX_BYTES; max_write is at most that */
/* Executor threads running now (started, not yet ended idle). */
uint32_t engine_executors(const struct engine *e);
uint32_t engine_kernel_queue_limit(uint64_t mean_transfer_bytes, uint32_t min_requests, uint32_t max);

/*
 * Before engine_start: set is called (on the reactor) with each new limit.
 * Returns the first, for ENGINE_MAX_TRANSFER_BYTES, which the caller gives
 * the kernel itself (at INIT). waiting (may be
 * NULL) returns the requests the kernel has outstanding to the daemon,
 * read or not, or -errno: the limit rises only while it is nearly full.
 * set NULL: the limit is fixed at max (only reported in stats).
 */
uint32_t engine_set_kernel_queue(struct engine *e, void (*set)(void *arg, uint32_t limit),
			     int64_t (*waiting)(void *arg), void *arg, uint32_t max);

/* Any thread: a reload's params, for the reactor to apply from its next
 * round on: busy_poll_ns and what sched_reload takes of sched, its
 * max_inflight at most the engine's own (what the ring and executors were
 * sized for); the rest stays as the engine was made. stats show them once
 * applied. */
void engine_reload(struct engine *e, const struct engine_params *p);

/* Requests completed so far (tests, stats, and a stop's progress: stop_guard.h). */
uint64_t engine_completed(const struct engine *e);

#endif
