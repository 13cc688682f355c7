/* The io_uring engine: one reactor thread owning the ring and the scheduler. */
#include "fusesched/engine.h"
#include "fusesched/bufpool.h"
#include "fusesched/clock.h"
#include "fusesched/executor_line.h"
#include "fusesched/fdio.h"
#include "fusesched/open_files.h"
#include "fusesched/personality.h"
#include "fusesched/stats.h"
#include "fusesched/tenant.h"
#include "fusesched/tenant_queues.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#else
#define RUNNING_ON_VALGRIND 0
#endif

#define REACTOR_NICE (-10)
#define REACTOR_SLICE_NS 100000u
#define WAKE_TAG 0u                /* user_data of the eventfd read */
#define RETIRE_BATCH 64u
/* Opener credential sets kept registered with nobody's file open; in use at once (an eighth per tenant). */
#define PERSONALITIES_IDLE_MAX 64u
#define PERSONALITIES_LIVE_MAX 4096u
/*
 * Blocking executors: as many as requests may be at the store (max_inflight)
 * and hung there, so a dispatched request never waits for a thread; idle
 * ones cost nothing (a stack each), and none is started before it is
 * needed. A reload that raises max_inflight starts more; one that lowers it
 * leaves them idle. Each hung request holds its executor: of the first
 * EXECUTORS_SHARED one tenant or user holds at most a quarter, and those
 * holding some share them less the depth; past that, only owners holding
 * none get one (executor_line.h), up to EXECUTORS_MAX, so a newcomer finds
 * a thread beside hundreds of owners hung at once.
 */
#define EXECUTORS_SHARED 256u
#define EXECUTORS_MAX 1024u
#define EXECUTORS_MIN 2u
#define KERNEL_QUEUE_EVERY_NS 1000000000u
#define TRIM_EVERY_NS 1000000000u
/* Nobody, or several tenants, have requests (engine.meta_sole). */
#define META_NOBODY UINT32_MAX
#define META_MANY (UINT32_MAX - 1)
/* Metadata requests one tenant may run at once in workers while others are about. */
#define META_INLINE_PER_TENANT 4u
/* A tenant whose requests ran unscheduled within this counts as active. */
#define INLINE_ACTIVE_NS (100u * 1000 * 1000)
/* last_inline_ns is written at most this often per tenant. */
#define INLINE_STAMP_NS (1000u * 1000)
/*
 * A copy_file_range runs this much at a time and answers how much it
 * copied (callers loop on short copies, as they must on any filesystem):
 * each piece is a request of its own, scheduled and charged, so a large
 * copy shares the store like any other stream and holds a blocking
 * executor only briefly.
 */
#define COPY_CHUNK_BYTES (4u << 20)
/*
 * A read that moved at least this much is answered by a blocking executor,
 * not the reactor: the answer's copy into the caller's pages (about 100 us
 * for 512 KiB here) would hold up every tenant's hand-overs, completions and
 * dispatches behind one tenant's large reads. Smaller answers cost less
 * than the hand-over to a thread.
 */
#define ANSWER_AWAY_BYTES (64u << 10)

/* The solo token (see take_solo). Only the reactor closes and opens it. */
enum solo_state {
	SOLO_CLOSED,               /* the scheduler has work: everything goes through it */
	SOLO_OPEN,                 /* nothing queued, in flight or timed: a worker may take it */
	SOLO_TAKEN,                /* a worker runs a request itself */
	SOLO_CLOSED_TAKEN,         /* closed while a worker ran one: it reports when done */
};

struct engine_req {
	struct sched_req sched;    /* first: the scheduler hands this back */
	struct engine_req *next;   /* handoff stack link */
	fuse_req_t req;
	enum datapath_op op;
	struct datapath_file *file;
	struct datapath_file *file_out;
	uint64_t offset_bytes;
	uint64_t size_bytes;
	uint64_t done_bytes;       /* short transfers resume from here */
	uint64_t offset_out_bytes;
	unsigned int copy_flags;
	int fallocate_mode;
	uint32_t tenant;
	uint64_t submit_ns;        /* handed over by FUSE: latency starts here */
	void *buf;
	/* A held write (see engine_submit): the payload stays in the worker's buffer (or pipe). */
	const void *held_data;
	int payload_pipe_fd;       /* a write whose payload waits in its worker's pipe; -1: none */
	int write_rwf;             /* RWF_DSYNC, RWF_SYNC: durable before answered (datapath_req) */
	bool keep_privs;           /* a non-root opener's write_keeps_privs: run with CAP_FSETID */
	int fd;                    /* its transfer's descriptor: the file's, or its buffered twin */
	bool direct;               /* the descriptor is O_DIRECT: buffers and lengths aligned */
	sem_t *held_go;            /* posted by the reactor at dispatch */
	int held_res;              /* -ENOMEM: the reactor refused it, the worker finishes it */
	bool scheduled;            /* enqueued: the scheduler holds it until the reactor releases it */
	bool ran_solo;             /* a worker ran it at once (see take_solo); the scheduler is told */
	uint64_t solo_ns;          /* ran solo: its time from submit_ns to its end */
	void (*meta_run)(void *arg);  /* META: runs and answers it */
	void *meta_arg;
	int answer_res;            /* a read done at the store, answered by an executor with this (ANSWER_AWAY_BYTES) */
	struct executor_line_item line; /* its place in the executors' line: whose */
	bool held_back;            /* hung in the line, counted in engine.held_back (under blocking_lock) */
};

/* What one tenant holds of what the workers share (engine.per_tenant). */
struct tenant_counts {
	atomic_uint held_writes;       /* workers waiting in or running its held writes */
	atomic_uint meta_inline;       /* its metadata requests running at once in workers */
	atomic_uint meta_handed;       /* its metadata requests handed over, not finished */
	_Atomic uint64_t last_inline_ns; /* when its unscheduled requests last ran */
};

/* An executor's place: slot 0's thread also trims buffers and never ends idle. */
enum executor_state { EXECUTOR_FREE, EXECUTOR_RUNNING, EXECUTOR_ENDED };
struct executor_slot {
	struct engine *e;
	pthread_t thread;
	enum executor_state state;
};

struct engine {
	struct datapath dp;        /* first: fs/ holds a pointer to it */
	struct engine_params params;
	struct tenant_table *tenants;
	struct stats *stats;
	struct sched *sched;
	struct io_uring ring;
	struct bufpool *buffers;
	struct personality_cache *personalities;
	struct open_files *open_files;
	bool buffers_registered;   /* arena is the ring's fixed buffer 0 */
	bool wait_by_poll;         /* wait with poll(2) on the ring fd, not inside io_uring_enter */
	int wake_fd;
	uint64_t wake_value;
	_Atomic(struct engine_req *) handoff;
	_Atomic(struct engine_req *) finished;   /* finished off the reactor: to release, or solo to count */
	/* A reload's settings, for the reactor to apply when reload_epoch
	 * passes reload_applied (engine_reload). */
	pthread_mutex_t reload_lock;
	struct engine_params reloaded;           /* under reload_lock */
	_Atomic uint64_t reload_epoch;
	uint64_t reload_applied;
	atomic_uint held_writes;                 /* workers waiting in or running a held write */
	struct tenant_counts *per_tenant;        /* by tenant id, max_tenants of them */
	/*
	 * Metadata runs at once in its worker only while one tenant (or
	 * nobody) has requests: meta_sole is that tenant, META_NOBODY or
	 * META_MANY. Workers set it from nobody to themselves; the reactor
	 * sets it to many when another tenant's request arrives, and
	 * recomputes it each stats tick from the queues and last_inline_ns
	 * (per tenant: when its unscheduled requests last ran).
	 */
	_Atomic uint32_t meta_sole;
	atomic_uint meta_inline;                 /* metadata running at once in workers, everyone's */
	uint32_t held_writes_per_tenant;
	uint32_t max_tenants;
	atomic_int solo;                         /* enum solo_state: see take_solo */
	atomic_bool stopping;
	atomic_bool reactor_asleep;              /* set while it blocks: only then a push wakes it */
	atomic_uint_fast64_t completed;
	pthread_t thread;
	bool started;
	/*
	 * Executors: threads for what io_uring has no opcode for
	 * (copy_file_range, metadata handed over), so that the reactor never
	 * blocks on one. They take dispatched requests in order and finish them.
	 */
	struct executor_slot executors[EXECUTORS_MAX]; /* under blocking_lock */
	atomic_uint executors_alive;   /* slots RUNNING (written under blocking_lock) */
	atomic_uint executors_kept;    /* what the depth and the hung now want: more end when idle */
	uint32_t hung_now;             /* hung at the store now, not in the line (follow_hung); on the reactor */
	uint32_t hung_seen;            /* the most of them at once: io-wq's limit only rises */
	atomic_uint held_back;         /* of them, waiting in the executors' line (written under blocking_lock) */
	atomic_bool line_tightened;    /* a take may have left dispatched requests in the line unable to go */
	_Atomic uint64_t meta_inline_longest_ns; /* of metadata run at once since the reactor last took it */
	pthread_mutex_t blocking_lock;
	pthread_cond_t blocking_work;
	struct executor_line *line;    /* under blocking_lock: what waits for an executor */
	bool blocking_stop;
	/* Reactor-only state. */
	struct tenant_queues *queues;  /* each tenant's, placed in the scheduler's tree */
	uint64_t next_retire_ns;
	uint64_t next_publish_ns;
	_Atomic uint64_t error_logged_ns; /* rate limit for backing-store error lines */
	uint32_t ring_inflight;        /* request SQEs not yet completed */
	/* The kernel's async request limit (engine_size_kernel_queue), sized each second. */
	void (*kernel_queue_set)(void *arg, uint32_t limit);
	int64_t (*kernel_queue_waiting)(void *arg);
	void *kernel_queue_arg;
	uint32_t kernel_queue_limit, kernel_queue_max;
	uint64_t next_kernel_queue_ns;
	uint64_t window_transfers, window_transfer_bytes; /* reads and writes finished this second */
	uint32_t window_peak_held;     /* most requests outstanding at a stats tick */
	uint32_t kernel_queue_beside;  /* room added for others' held requests (size_kernel_queue) */
	uint32_t kernel_queue_hung;    /* room added for hung tenants' requests (size_kernel_queue) */
	uint64_t kernel_queue_mean_bytes; /* of the last second's reads and writes that had any */
	uint64_t wait_avg_ns;          /* moving average of waits with requests at the store */
};


void engine_params_default(struct engine_params *p)
{
	memset(p, 0, sizeof(*p));
	sched_params_default(&p->sched);
	p->retire_check_ns = 1000000000u;
	p->stats_publish_ns = 100000000u;
	p->buffer_arena_bytes = 64u << 20;
	p->max_held_writes = 16;
	p->max_inline_meta = 32;
	p->executor_idle_ns = 10000000000u;
	p->solo_requests = true;
	p->busy_poll_ns = 200000u;
}

/* ---- shared by workers and reactor: replies, stats, error lines ------- */

static enum stats_op stats_op_of(enum datapath_op op)
{
	switch (op) {
	case DATAPATH_READ:
		return STATS_OP_READ;
	case DATAPATH_WRITE:
		return STATS_OP_WRITE;
	case DATAPATH_FSYNC:
	case DATAPATH_FDATASYNC:
		return STATS_OP_SYNC;
	case DATAPATH_FALLOCATE:
	case DATAPATH_COPY_RANGE:
	case DATAPATH_META:
		break;
	}
	return STATS_OP_OTHER;
}

static const char *op_name(enum datapath_op op)
{
	static const char *const names[] = {"read", "write", "fsync", "fdatasync", "fallocate",
					    "copy_file_range", "metadata"};
	return names[op];
}

/* The caller gets the errno; the operator gets a line, at most one a second. */
static void log_backing_error(struct engine *e, const struct engine_req *er, int res, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&e->error_logged_ns, memory_order_relaxed);
	if (now < last + 1000000000u ||
	    !atomic_compare_exchange_strong_explicit(&e->error_logged_ns, &last, now,
						     memory_order_relaxed, memory_order_relaxed))
		return;
	fuse_log(FUSE_LOG_ERR, "fusesched: backing %s failed: %s (tenant %u)\n", op_name(er->op),
		 strerror(-res), er->tenant);
}

static bool is_transfer(enum datapath_op op)
{
	return op == DATAPATH_READ || op == DATAPATH_WRITE || op == DATAPATH_COPY_RANGE;
}

/* Counted for its tenant; done before the answer, so the caller's next look at stats finds it. */
static void record_done(struct engine *e, const struct engine_req *er, int res, uint64_t now)
{
	if (er->op == DATAPATH_META) {
		/* Counted by the scheduler only: the stats columns are data. */
		if (er->tenant < e->max_tenants)
			atomic_fetch_sub(&e->per_tenant[er->tenant].meta_handed, 1);
		atomic_fetch_add_explicit(&e->completed, 1, memory_order_relaxed);
		return;
	}
	if (res < 0)
		log_backing_error(e, er, res, now);
	uint64_t bytes = is_transfer(er->op) ? er->done_bytes : 0;
	stats_record(e->stats, er->tenant, stats_op_of(er->op), bytes,
		     now > er->submit_ns ? now - er->submit_ns : 0, res < 0 && bytes == 0);
	if (er->ran_solo)
		stats_record_solo(e->stats, er->tenant);
	atomic_fetch_add_explicit(&e->completed, 1, memory_order_relaxed);
}

/* A transfer acknowledges what really moved, even if it failed after that. */
static void answer(struct engine *e, const struct engine_req *er, int res)
{
	if (er->op == DATAPATH_META)
		return; /* its run answered it */
	bool moved = is_transfer(er->op) && er->done_bytes > 0;
	int err = res < 0 && !moved ? -res : 0;
	e->dp.reply(er->req, er->op, err, er->buf, is_transfer(er->op) ? er->done_bytes : 0);
}

static void push_to_reactor(struct engine *e, _Atomic(struct engine_req *) *stack,
			    struct engine_req *er);

static void request_free(struct engine *e, struct engine_req *er)
{
	bufpool_put(e->buffers, er->buf);
	free(er);
}

/* Reactor only: the request sizes the kernel's queue is sized by. */
static void note_transfer(struct engine *e, const struct engine_req *er)
{
	if (er->op != DATAPATH_READ && er->op != DATAPATH_WRITE)
		return;
	e->window_transfers++;
	e->window_transfer_bytes += er->size_bytes;
}

/* Reactor only. The scheduler learns the request is done; its memory goes back. */
static void release(struct engine *e, struct engine_req *er, uint64_t now)
{
	note_transfer(e, er);
	sched_complete(e->sched, &er->sched, now);
	request_free(e, er);
}

/* Set in the reactor thread: the one thread that may call the scheduler. */
static _Thread_local bool on_reactor;
/*
 * The reactor's time for a round of completions, read once when it wakes:
 * every request it finishes in the round completes at that time, not at
 * the time its answer is written. Answering a batch takes a while, and the
 * later answers' requests would be charged for it, and the deepest tenant
 * has the most of them (charged by time, it would fall below its share).
 */
static _Thread_local uint64_t reactor_round_ns;

static void push_quietly(_Atomic(struct engine_req *) *stack, struct engine_req *er);
static void give_back_solo(struct engine *e);

/*
 * A solo request's account goes to the reactor (quietly: it learns of it on
 * its next round), then the token, then the answer: a stopping reactor that
 * sees the token back has the account, and the caller's next request, sent
 * once it has the answer, finds the token open.
 */
static void finish_solo(struct engine *e, struct engine_req *er, int res)
{
	struct engine_req answer_of = *er; /* the account is the reactor's once pushed */
	er->buf = NULL;
	push_quietly(&e->finished, er);
	give_back_solo(e);
	answer(e, &answer_of, res);
	bufpool_put(e->buffers, answer_of.buf);
}

/*
 * The one end of every request, on whichever thread ran it: counted for its
 * tenant, answered, then given back to the scheduler (by the reactor, which
 * owns it: other threads hand it over): released if it was enqueued,
 * accounted if it ran solo (finish_solo), else freed.
 */
static void finish(struct engine *e, struct engine_req *er, int res)
{
	uint64_t now = on_reactor ? reactor_round_ns : clock_now_ns();
	record_done(e, er, res, now);
	if (er->ran_solo) {
		er->solo_ns = now > er->submit_ns ? now - er->submit_ns : 0;
		finish_solo(e, er, res);
		return;
	}
	answer(e, er, res);
	if (!er->scheduled) {
		request_free(e, er);
	} else if (on_reactor) {
		release(e, er, now);
	} else {
		push_to_reactor(e, &e->finished, er);
	}
}

/* ---- worker side ------------------------------------------------------ */

static enum sched_op sched_op_of(enum datapath_op op)
{
	switch (op) {
	case DATAPATH_READ:
		return SCHED_OP_READ;
	case DATAPATH_WRITE:
		return SCHED_OP_WRITE;
	case DATAPATH_FSYNC:
		return SCHED_OP_FSYNC;
	case DATAPATH_FDATASYNC:
		return SCHED_OP_FDATASYNC;
	case DATAPATH_FALLOCATE:
	case DATAPATH_COPY_RANGE:
	case DATAPATH_META:
		break;
	}
	return SCHED_OP_OTHER; /* charged by the time it held the store */
}

static void wake_reactor(struct engine *e)
{
	uint64_t one = 1;
	/* A full counter already means "wake up": nothing is lost. */
	if (write(e->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		fprintf(stderr, "fusesched: engine wakeup failed: %s\n", strerror(errno));
}

/*
 * Requests from pid 0 (writeback, mmap) or from pids the daemon cannot see
 * are charged to whoever opened the file.
 */
static uint32_t tenant_of(struct engine *e, const struct datapath_req *r)
{
	if (!r->file)
		return r->pid ? tenant_resolve(e->tenants, r->pid, clock_now_ns()) : TENANT_ID_DEFAULT;
	if (r->pid == 0)
		return r->file->opener_tenant;
	uint32_t id = tenant_resolve(e->tenants, r->pid, clock_now_ns());
	return id == TENANT_ID_DEFAULT ? r->file->opener_tenant : id;
}

/*
 * Pushes onto a lock-free stack and wakes the reactor only if it is blocked
 * (or about to block): one eventfd write per sleep, none while it works. The
 * push and the flag's load pair with the reactor's store of the flag and its
 * load of the stacks (all sequentially consistent), so either the pusher sees
 * it asleep or the reactor sees the request before blocking.
 */
static void push_quietly(_Atomic(struct engine_req *) *stack, struct engine_req *er)
{
	struct engine_req *head = atomic_load_explicit(stack, memory_order_relaxed);
	do
		er->next = head;
	while (!atomic_compare_exchange_weak(stack, &head, er));
}

static void push_to_reactor(struct engine *e, _Atomic(struct engine_req *) *stack,
			    struct engine_req *er)
{
	push_quietly(stack, er);
	if (atomic_load(&e->reactor_asleep) && atomic_exchange(&e->reactor_asleep, false))
		wake_reactor(e);
}

/*
 * A buffered write the worker runs itself once the scheduler dispatches it.
 * Backing filesystems like ext4 cannot write the page cache without
 * blocking, so io_uring would hand it to one of its own worker threads
 * anyway: the FUSE worker that already holds the payload does the same job
 * without the copy into an engine buffer and without that thread hop. It
 * waits for its turn, so the scheduler still decides when the write starts
 * and charges it on completion.
 */
static bool try_hold_worker(struct engine *e, const struct engine_req *er)
{
	uint32_t tenant = er->tenant;
	if (er->op != DATAPATH_WRITE || er->direct || tenant >= e->max_tenants)
		return false;
	atomic_uint *mine = &e->per_tenant[tenant].held_writes;
	if (atomic_fetch_add(mine, 1) < e->held_writes_per_tenant) {
		if (atomic_fetch_add(&e->held_writes, 1) < e->params.max_held_writes)
			return true;
		atomic_fetch_sub(&e->held_writes, 1);
	}
	atomic_fetch_sub(mine, 1);
	return false;
}

/*
 * A transfer run by a FUSE worker, resuming short ones. A direct one stops
 * at the first short count: the rest would be unaligned (for a read it is EOF).
 */
static int transfer_in_worker(struct engine_req *er, void *buf)
{
	bool write = er->op == DATAPATH_WRITE;
	while (er->done_bytes < er->size_bytes) {
		size_t left = er->size_bytes - er->done_bytes;
		char *at = (char *)buf + er->done_bytes;
		off_t off = (off_t)(er->offset_bytes + er->done_bytes);
		struct iovec iov = { .iov_base = at, .iov_len = left };
		ssize_t n = write ? pwritev2(er->fd, &iov, 1, off, er->write_rwf)
				  : pread(er->fd, at, left, off);
		if (n > 0) {
			er->done_bytes += (uint64_t)n;
			if (er->direct && (size_t)n < left)
				break;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n == 0 && !write) {
			break; /* EOF */
		} else {
			return n < 0 ? -errno : -EIO; /* a write without progress would loop forever */
		}
	}
	return 0;
}

/*
 * A piped payload spliced into the backing file: the backing filesystem
 * copies it from the pages the kernel referenced into the pipe (for a
 * buffered write, the FUSE file's own page cache), so the worker copies
 * nothing. A backing filesystem that cannot be spliced into (EINVAL before
 * anything moved) is written from a copy, as without a pipe. What a failed
 * write leaves in the pipe, the channel drains.
 */
static int splice_in_worker(struct engine_req *er)
{
	while (er->done_bytes < er->size_bytes) {
		loff_t off = (loff_t)(er->offset_bytes + er->done_bytes);
		ssize_t n = splice(er->payload_pipe_fd, NULL, er->fd, &off,
				   er->size_bytes - er->done_bytes, SPLICE_F_MOVE);
		if (n > 0) {
			er->done_bytes += (uint64_t)n;
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EINVAL && !er->done_bytes) {
			void *copy = malloc(er->size_bytes);
			int res = copy ? fdio_read_full(er->payload_pipe_fd, copy, er->size_bytes) : -ENOMEM;
			if (!res)
				res = transfer_in_worker(er, copy);
			free(copy);
			return res;
		} else {
			return n < 0 ? -errno : -EIO;
		}
	}
	/* splice takes no RWF flags: the file's data is made durable after */
	if (er->write_rwf && (er->write_rwf & RWF_SYNC ? fsync(er->fd) : fdatasync(er->fd)) < 0)
		return -errno;
	return 0;
}

/*
 * A write run by a FUSE worker runs as the file's opener, as the ring's do
 * (personality.h): allocation rules such as ext4's root reserve go by the
 * writer's fsuid. Reads and syncs of an open file consult no identity.
 */
static int transfer_in_worker_as_opener(struct engine_req *er, void *buf)
{
	const struct creds *opener = &er->file->opener;
	bool switch_creds = er->op == DATAPATH_WRITE && !creds_are_root(opener);
	if (switch_creds) {
		struct creds keeping;
		if (er->keep_privs) {
			keeping = *opener;
			keeping.keep_fsetid = true;
			opener = &keeping;
		}
		int r = creds_enter(opener);
		if (r)
			return r;
	}
	int res = !buf && er->payload_pipe_fd >= 0 ? splice_in_worker(er) : transfer_in_worker(er, buf);
	if (switch_creds)
		creds_leave();
	return res;
}

static void run_held_write(struct engine *e, struct engine_req *er, sem_t *go)
{
	while (sem_wait(go) != 0)
		; /* EINTR: the wait resumes */
	sem_destroy(go);
	/* held_res < 0: refused before it was queued, so not the scheduler's. */
	int res = er->held_res ? er->held_res : transfer_in_worker_as_opener(er, (void *)er->held_data);
	atomic_fetch_sub(&e->held_writes, 1);
	atomic_fetch_sub(&e->per_tenant[er->tenant].held_writes, 1);
	finish(e, er, res);
}

/*
 * The solo token. While the scheduler has nothing queued, nothing in flight
 * and no timer running (no idle window, no budget running out), it would
 * dispatch the next request the moment it arrived: handing it to the
 * reactor and back would only add two or three thread wakeups. So the
 * reactor leaves the token open, and one worker at a time takes it and runs
 * its request itself, like a plain passthrough. A request that finds it
 * taken goes to the reactor, which closes it: from then on the scheduler
 * orders everything again, until it has nothing left. A solo request is
 * counted in its tenant's stats and, once answered, accounted to the
 * scheduler (sched_account): it ran alone, with nobody to be fair to, so it
 * is only counted.
 */
static bool take_solo(struct engine *e, const struct datapath_req *r)
{
	if (!e->params.solo_requests)
		return false;
	switch (r->op) {
	case DATAPATH_READ:
	case DATAPATH_WRITE:
	case DATAPATH_FSYNC:
	case DATAPATH_FDATASYNC:
		break;
	case DATAPATH_FALLOCATE:
	case DATAPATH_COPY_RANGE:
	case DATAPATH_META:
		return false; /* rare, or handed over because others are busy */
	}
	/* A plain load first: under load the token is closed, and a failing
	 * compare-and-swap on every request would still own the cache line. */
	int open = SOLO_OPEN;
	return atomic_load_explicit(&e->solo, memory_order_relaxed) == SOLO_OPEN &&
	       atomic_compare_exchange_strong(&e->solo, &open, SOLO_TAKEN);
}

static void give_back_solo(struct engine *e)
{
	int taken = SOLO_TAKEN;
	if (atomic_compare_exchange_strong(&e->solo, &taken, SOLO_OPEN))
		return;
	/* SOLO_CLOSED_TAKEN: the reactor closed it meanwhile and may open it again now. */
	atomic_store(&e->solo, SOLO_CLOSED);
	wake_reactor(e);
}

static void run_solo(struct engine *e, struct engine_req *er, const void *write_data)
{
	int res = 0;
	switch (er->op) {
	case DATAPATH_READ:
	case DATAPATH_WRITE:
		/* A read needs a buffer to reply from; direct I/O an aligned one
		 * (a payload read into an engine buffer already is). */
		if (er->op == DATAPATH_READ || (er->direct && !er->buf)) {
			if (!(er->buf = bufpool_get(e->buffers, er->size_bytes))) {
				res = -ENOMEM;
				break;
			}
			if (er->op == DATAPATH_WRITE)
				memcpy(er->buf, write_data, er->size_bytes);
		}
		res = transfer_in_worker_as_opener(er, er->buf ? er->buf : (void *)write_data);
		break;
	case DATAPATH_FSYNC:
		res = fsync(er->file->fd) < 0 ? -errno : 0;
		break;
	case DATAPATH_FDATASYNC:
		res = fdatasync(er->file->fd) < 0 ? -errno : 0;
		break;
	case DATAPATH_FALLOCATE:
	case DATAPATH_COPY_RANGE:
	case DATAPATH_META:
		break;
	}
	er->ran_solo = true;
	finish(e, er, res); /* gives the token back */
}

/*
 * A write that keeps setuid/setgid, issued through the ring: its file's
 * opener's personality with CAP_FSETID, registered at the first such write
 * (from this worker: root, credentials not switched). Where none can be had
 * (the personalities' bounds), it is written as the opener alone, and the
 * backing filesystem drops them.
 */
static void ring_personality_keeping_privs(struct engine *e, struct engine_req *er)
{
	struct datapath_file *f = er->file;
	if (atomic_load(&f->ring_personality_keeping_privs))
		return;
	struct creds keeping = f->opener;
	keeping.keep_fsetid = true;
	int id = personality_get(e->personalities, &keeping, f->opener_tenant);
	if (id <= 0) {
		er->keep_privs = false;
		return;
	}
	uint16_t none = 0;
	if (!atomic_compare_exchange_strong(&f->ring_personality_keeping_privs, &none, (uint16_t)id))
		personality_put(e->personalities, id); /* another worker's came first */
}

static void engine_submit(struct datapath *dp, const struct datapath_req *r)
{
	struct engine *e = (struct engine *)dp;
	struct engine_req *er = calloc(1, sizeof(*er));
	if (!er) {
		if (r->op == DATAPATH_META)
			r->meta_run(r->meta_arg); /* it cannot wait: it runs now */
		else
			e->dp.reply(r->req, r->op, ENOMEM, NULL, 0); /* never became a request */
		if (r->write_owned)
			bufpool_put(e->buffers, (void *)r->write_data);
		return;
	}
	/* A payload read into one of our buffers is the request's from now on. */
	if (r->op == DATAPATH_WRITE && r->write_owned)
		er->buf = (void *)r->write_data;
	er->payload_pipe_fd = r->op == DATAPATH_WRITE && r->write_piped ? r->write_pipe_fd : -1;
	er->write_rwf = r->op == DATAPATH_WRITE ? r->write_rwf : 0;
	er->keep_privs = r->op == DATAPATH_WRITE && r->write_keeps_privs && !creds_are_root(&r->file->opener);
	bool buffered = r->op == DATAPATH_WRITE && r->write_buffered;
	er->fd = r->op == DATAPATH_META ? -1 : buffered ? atomic_load(&r->file->buffered_fd) : r->file->fd;
	er->direct = r->op != DATAPATH_META && r->file->direct && !buffered;
	er->req = r->req;
	er->op = r->op;
	er->file = r->file;
	er->file_out = r->file_out;
	er->offset_bytes = r->offset_bytes;
	er->size_bytes = r->op == DATAPATH_COPY_RANGE && r->size_bytes > COPY_CHUNK_BYTES
				 ? COPY_CHUNK_BYTES : r->size_bytes;
	er->offset_out_bytes = r->offset_out_bytes;
	er->copy_flags = r->copy_flags;
	er->fallocate_mode = r->fallocate_mode;
	er->meta_run = r->meta_run;
	er->meta_arg = r->meta_arg;
	er->tenant = tenant_of(e, r);
	er->line.tenant = er->tenant;
	er->line.uid = r->uid;
	er->submit_ns = clock_now_ns();
	er->sched.arrival_ns = er->submit_ns;
	er->sched.op = sched_op_of(r->op);
	/* A fallocate's length is not bytes moved: it would inflate the learned rate. */
	er->sched.bytes = r->op == DATAPATH_FALLOCATE ? 0 : er->size_bytes;
	/* (a META request has no file) */
	er->sched.dsync = r->op == DATAPATH_WRITE && (r->file->sync_writes || er->write_rwf);
	er->sched.sync = r->op != DATAPATH_WRITE || er->sched.dsync || er->direct;
	if (r->op == DATAPATH_META) {
		if (er->tenant < e->max_tenants)
			atomic_fetch_add(&e->per_tenant[er->tenant].meta_handed, 1);
		push_to_reactor(e, &e->handoff, er);
		return;
	}
	if (r->op == DATAPATH_WRITE && r->pid == 0)
		er->sched.sync = false; /* writeback: nobody waits on it directly */
	if (take_solo(e, r)) {
		run_solo(e, er, r->write_data);
		return;
	}
	sem_t go;
	bool held = try_hold_worker(e, er);
	if (held) {
		sem_init(&go, 0, 0);
		er->held_data = r->write_data;
		er->held_go = &go;
	} else if (r->op == DATAPATH_WRITE && !er->buf) {
		/*
		 * The worker's buffer is reused once we return: copy the payload
		 * now, never waiting for memory (a waiting worker would stop
		 * reading /dev/fuse for every tenant; see DESIGN.md, queued write
		 * payloads). A read gets its buffer only when dispatched, so
		 * queued reads cost no payload memory.
		 */
		er->buf = bufpool_get_queued(e->buffers, r->size_bytes);
		if (!er->buf) {
			finish(e, er, -ENOMEM);
			return;
		}
		int res = 0;
		if (er->payload_pipe_fd >= 0)
			res = fdio_read_full(er->payload_pipe_fd, er->buf, r->size_bytes);
		else
			memcpy(er->buf, r->write_data, r->size_bytes);
		er->payload_pipe_fd = -1;
		if (res) {
			finish(e, er, res);
			return;
		}
	}
	if (!held && er->keep_privs)
		ring_personality_keeping_privs(e, er);
	push_to_reactor(e, &e->handoff, er);
	if (held)
		run_held_write(e, er, &go);
}

/* A tenant's requests ran unscheduled (solo, or metadata at once) around now. */
static void note_inline(struct engine *e, uint32_t tenant, uint64_t now)
{
	if (tenant >= e->max_tenants)
		return;
	uint64_t last = atomic_load_explicit(&e->per_tenant[tenant].last_inline_ns, memory_order_relaxed);
	if (now > last + INLINE_STAMP_NS)
		atomic_store_explicit(&e->per_tenant[tenant].last_inline_ns, now, memory_order_relaxed);
}

/* Reactor: a request of tenant was queued; with another tenant about, metadata queues too. */
static void note_scheduled(struct engine *e, uint32_t tenant)
{
	uint32_t sole = atomic_load_explicit(&e->meta_sole, memory_order_relaxed);
	if (sole == tenant || sole == META_MANY)
		return;
	atomic_store(&e->meta_sole, sole == META_NOBODY ? tenant : META_MANY);
}

/*
 * Reactor, each stats tick: the tenants with requests queued or in flight,
 * or whose requests ran unscheduled lately; active_queued counts the first
 * kind (publish_stats passes what it read from the queues).
 */
static void recompute_meta_sole(struct engine *e, uint64_t now, uint32_t busy_tenant,
				uint32_t busy_count)
{
	uint32_t sole = busy_count > 1 ? META_MANY : busy_count ? busy_tenant : META_NOBODY;
	for (uint32_t id = 0; id < e->max_tenants && sole != META_MANY; id++) {
		uint64_t last = atomic_load_explicit(&e->per_tenant[id].last_inline_ns, memory_order_relaxed);
		if (last && now < last + INLINE_ACTIVE_NS && id != sole)
			sole = sole == META_NOBODY ? id : META_MANY;
	}
	atomic_store(&e->meta_sole, sole);
}

/*
 * Metadata runs at once in the worker that read it while its tenant is the
 * only one with requests (or nobody has any): there is nobody to be fair
 * to, and a handover would only add thread wakeups. With others about, it
 * still runs at once if its tenant has none handed over and fewer than
 * META_INLINE_PER_TENANT running in workers: a light tenant's lookup need
 * not wait for a dispatch slot behind another's data. Past that it is
 * handed over (DATAPATH_META), queued in its tenant's queue behind the
 * tenant's earlier ones, and run by an executor at its turn, charged by the
 * time it held the store like any request of its kind: a storm waits for
 * its own share and holds at most META_INLINE_PER_TENANT workers. And
 * never more than max_inline_meta run at once, alone or not, the kernel's
 * own (pid 0) too: metadata on a store that hangs blocks the worker running
 * it, and a tenant alone with a hundred processes on a hung subtree held
 * every worker, so nobody's requests were read at all.
 */
static bool engine_meta_now(struct datapath *dp, pid_t pid, struct datapath_meta_ticket *ticket)
{
	struct engine *e = (struct engine *)dp;
	uint64_t now = clock_now_ns();
	ticket->start_ns = now;
	if (atomic_fetch_add(&e->meta_inline, 1) >= e->params.max_inline_meta) {
		atomic_fetch_sub(&e->meta_inline, 1);
		return false;
	}
	if (pid == 0) {
		/* The kernel's own (a release after the last close): nobody's, at once. */
		ticket->tenant = UINT32_MAX;
		return true;
	}
	uint32_t tenant = tenant_resolve(e->tenants, pid, now);
	if (tenant >= e->max_tenants) {
		atomic_fetch_sub(&e->meta_inline, 1);
		return false;
	}
	uint32_t sole = atomic_load_explicit(&e->meta_sole, memory_order_relaxed);
	bool alone = sole == tenant;
	if (sole == META_NOBODY) {
		note_inline(e, tenant, now); /* stamped first: a recompute then keeps it */
		alone = atomic_compare_exchange_strong(&e->meta_sole, &sole, tenant) || sole == tenant;
	}
	unsigned running = atomic_fetch_add(&e->per_tenant[tenant].meta_inline, 1);
	if (!alone && (running >= META_INLINE_PER_TENANT ||
		       atomic_load_explicit(&e->per_tenant[tenant].meta_handed, memory_order_relaxed))) {
		atomic_fetch_sub(&e->per_tenant[tenant].meta_inline, 1);
		atomic_fetch_sub(&e->meta_inline, 1);
		return false;
	}
	ticket->tenant = tenant;
	return true;
}

static void engine_meta_ran(struct datapath *dp, const struct datapath_meta_ticket *ticket)
{
	struct engine *e = (struct engine *)dp;
	uint64_t now = clock_now_ns(), took = now > ticket->start_ns ? now - ticket->start_ns : 1;
	/* For the hung bound (take_meta_times): the store's times, whoever's. */
	uint64_t longest = atomic_load_explicit(&e->meta_inline_longest_ns, memory_order_relaxed);
	while (took > longest &&
	       !atomic_compare_exchange_weak_explicit(&e->meta_inline_longest_ns, &longest, took,
						      memory_order_relaxed, memory_order_relaxed))
		;
	atomic_fetch_sub(&e->meta_inline, 1);
	if (ticket->tenant >= e->max_tenants)
		return;
	atomic_fetch_sub(&e->per_tenant[ticket->tenant].meta_inline, 1);
	note_inline(e, ticket->tenant, now);
}

/*
 * Buffers for the channel to read large write payloads into: taken like a
 * queued payload's (half the arena kept for dispatch), so the write that
 * keeps one costs no copy in the worker.
 */
static void *engine_payload_get(struct datapath *dp, size_t bytes)
{
	return bufpool_get_queued(((struct engine *)dp)->buffers, bytes);
}

static void engine_payload_put(struct datapath *dp, void *buf)
{
	bufpool_put(((struct engine *)dp)->buffers, buf);
}

/*
 * EMFILE for a tenant or user at its open-file cap (open_files.h), the
 * others unaffected. The tenant is held while the file or directory is
 * open, so that its count goes back to it, not to a tenant that took its
 * slot.
 */
static int engine_handle_opened(struct datapath *dp, pid_t pid, uid_t uid, uint32_t *tenant)
{
	struct engine *e = (struct engine *)dp;
	*tenant = tenant_resolve(e->tenants, pid, clock_now_ns());
	int r = open_files_take(e->open_files, *tenant, uid);
	if (r)
		return r;
	tenant_hold(e->tenants, *tenant);
	return 0;
}

static void engine_handle_released(struct datapath *dp, uint32_t tenant, uid_t uid)
{
	struct engine *e = (struct engine *)dp;
	tenant_release(e->tenants, tenant);
	open_files_put(e->open_files, tenant, uid);
}

/*
 * Whether io_uring may issue a transfer on fd inline, in the reactor's
 * submit: only where the filesystem returns EAGAIN rather than block when
 * asked not to (local ones). A FUSE backing's direct I/O waits in the
 * submit for a free slot of its own connection's background queue, and
 * network filesystems for their transport: one tenant's requests to a
 * slow or hung store there would stop the reactor, and every tenant with
 * it. Elsewhere each transfer goes to io_uring's workers (IOSQE_ASYNC).
 */
static bool issues_inline(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf) != 0)
		return false;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC: /* ext2 and ext3 too */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
	case TMPFS_MAGIC:
		return true;
	default:
		return false;
	}
}

static int engine_file_opened(struct datapath *dp, struct datapath_file *f)
{
	struct engine *e = (struct engine *)dp;
	int r = engine_handle_opened(dp, f->opener_pid, f->opener.uid, &f->opener_tenant);
	if (r)
		return r;
	f->issue_async = !issues_inline(f->fd);
	int id = personality_get(e->personalities, &f->opener, f->opener_tenant);
	if (id < 0) {
		fuse_log(FUSE_LOG_ERR, "fusesched: cannot register io_uring credentials of uid %u: %s\n",
			 (unsigned)f->opener.uid, strerror(-id));
		engine_handle_released(dp, f->opener_tenant, f->opener.uid);
		return id;
	}
	f->ring_personality = (uint16_t)id;
	return 0;
}

static void engine_file_released(struct datapath *dp, struct datapath_file *f)
{
	struct engine *e = (struct engine *)dp;
	personality_put(e->personalities, f->ring_personality);
	personality_put(e->personalities, atomic_load(&f->ring_personality_keeping_privs));
	engine_handle_released(dp, f->opener_tenant, f->opener.uid);
}

/* ---- reactor side ----------------------------------------------------- */

static struct io_uring_sqe *get_sqe(struct engine *e)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&e->ring);
	if (!sqe) {
		io_uring_submit(&e->ring);
		sqe = io_uring_get_sqe(&e->ring);
	}
	return sqe;
}

static void arm_wake_read(struct engine *e)
{
	struct io_uring_sqe *sqe = get_sqe(e);
	io_uring_prep_read(sqe, e->wake_fd, &e->wake_value, sizeof(e->wake_value), 0);
	io_uring_sqe_set_data64(sqe, WAKE_TAG);
}

/*
 * copy_file_range has no io_uring opcode and blocks for as long as the copy
 * takes: a blocking executor runs it once the scheduler let it through, as
 * the destination's opener, like every write.
 */
static int copy_range_as_opener(struct engine_req *er)
{
	const struct creds *writer = &er->file_out->opener;
	bool switch_creds = !creds_are_root(writer);
	int entered = switch_creds ? creds_enter(writer) : 0;
	if (entered)
		return entered;
	loff_t in = (loff_t)er->offset_bytes, out = (loff_t)er->offset_out_bytes;
	ssize_t n = copy_file_range(er->file->fd, &in, er->file_out->fd, &out, er->size_bytes,
				    er->copy_flags);
	int res = n < 0 ? -errno : 0;
	if (switch_creds)
		creds_leave();
	if (n > 0)
		er->done_bytes = (uint64_t)n;
	return res;
}

/*
 * The first executor also gives a flood's idle heap buffers back once a
 * second (bufpool_trim): unmapping a thousand of them takes tens of
 * milliseconds, which the reactor must not spend.
 */
static void trim_if_due(struct engine *e, uint64_t *next_trim_ns)
{
	uint64_t now = clock_now_ns();
	if (now < *next_trim_ns)
		return;
	*next_trim_ns = now + TRIM_EVERY_NS;
	pthread_mutex_unlock(&e->blocking_lock);
	bufpool_trim(e->buffers, SIZE_MAX);
	pthread_mutex_lock(&e->blocking_lock);
}

/*
 * Waits for work under blocking_lock; slot 0 wakes to trim buffers each
 * TRIM_EVERY_NS. False when the thread has been idle executor_idle_ns and
 * more are running than are kept: it ends. Kept, its idle time starts
 * again (a deadline left in the past would make the wait spin).
 */
static bool wait_for_blocking_work(struct engine *e, struct executor_slot *me, uint64_t *idle_since_ns,
				   uint64_t *next_trim_ns)
{
	bool trims = me == &e->executors[0];
	uint64_t at = trims ? *next_trim_ns : *idle_since_ns + e->params.executor_idle_ns;
	struct timespec until = {.tv_sec = (time_t)(at / 1000000000u), .tv_nsec = (long)(at % 1000000000u)};
	pthread_cond_timedwait(&e->blocking_work, &e->blocking_lock, &until);
	if (trims) {
		trim_if_due(e, next_trim_ns);
		return true;
	}
	uint64_t now = clock_now_ns();
	if (now < at)
		return true;
	if (atomic_load_explicit(&e->executors_alive, memory_order_relaxed) >
	    atomic_load_explicit(&e->executors_kept, memory_order_relaxed))
		return false;
	*idle_since_ns = now;
	return true;
}

static void *blocking_main(void *arg)
{
	struct executor_slot *me = arg;
	struct engine *e = me->e;
	(void)pthread_setname_np(pthread_self(), ENGINE_EXECUTOR_THREAD);
	pthread_mutex_lock(&e->blocking_lock);
	uint64_t next_trim_ns = clock_now_ns() + TRIM_EVERY_NS;
	for (;;) {
		struct executor_line_item *it;
		uint64_t idle_since_ns = clock_now_ns();
		bool stays = true;
		/* Stopping, the line drains whatever its bounds. */
		while (!(it = executor_line_take(e->line, !e->blocking_stop)) && !e->blocking_stop && stays)
			stays = wait_for_blocking_work(e, me, &idle_since_ns, &next_trim_ns);
		if (!it)
			break; /* stopping and nothing left, or idle and not wanted */
		struct engine_req *er = (struct engine_req *)((char *)it - offsetof(struct engine_req, line));
		struct executor_line_item held = *it; /* er is gone once finished */
		if (er->held_back) {
			er->held_back = false;
			atomic_fetch_sub_explicit(&e->held_back, 1, memory_order_relaxed);
		}
		bool tightened = executor_line_tightened(e->line);
		pthread_mutex_unlock(&e->blocking_lock);
		if (tightened) {
			atomic_store_explicit(&e->line_tightened, true, memory_order_relaxed);
			wake_reactor(e);
		}
		if (er->op == DATAPATH_READ) {
			finish(e, er, er->answer_res); /* reads come here only to be answered */
		} else if (er->op == DATAPATH_META) {
			er->meta_run(er->meta_arg);
			finish(e, er, 0);
		} else {
			finish(e, er, copy_range_as_opener(er));
		}
		pthread_mutex_lock(&e->blocking_lock);
		executor_line_done(e->line, &held);
	}
	/* Joined by whoever next starts one in this slot, or by the stop. */
	me->state = EXECUTOR_ENDED;
	atomic_fetch_sub_explicit(&e->executors_alive, 1, memory_order_relaxed);
	pthread_mutex_unlock(&e->blocking_lock);
	return NULL;
}

/*
 * Requests the scheduler took to be hung (sched.c) keep their executor or
 * io-wq worker while the others get their slots back: as many more of
 * each. io-wq's limit follows the most hung at once (its idle workers end
 * by themselves); the executors follow those hung now.
 */
static uint32_t depth_with_hung(const struct engine *e)
{
	return e->params.sched.max_inflight + e->hung_seen;
}

/* max_inflight and the requests hung now within EXECUTORS_MIN..EXECUTORS_MAX. */
static uint32_t executors_wanted(const struct engine *e)
{
	uint32_t n = e->params.sched.max_inflight + e->hung_now;
	return n < EXECUTORS_MIN ? EXECUTORS_MIN : n > EXECUTORS_MAX ? EXECUTORS_MAX : n;
}

/*
 * Executors one tenant, or one user other than root, may hold at once
 * (executor_line.h): a quarter of them, and never fewer than the depth, so
 * a lone tenant's dispatched requests never wait for its bound while
 * nothing hangs. A user's hung requests then leave the rest to the others.
 */
static uint32_t executor_bound(uint32_t max_inflight)
{
	return max_inflight > EXECUTORS_SHARED / 4 ? max_inflight : EXECUTORS_SHARED / 4;
}

/* Executors those already holding some may share (executor_line.h): the
 * rest, the depth's worth, is kept for tenants and users holding none. */
static uint32_t executors_shared(uint32_t max_inflight)
{
	return EXECUTORS_SHARED - (max_inflight < EXECUTORS_SHARED / 2 ? max_inflight : EXECUTORS_SHARED / 2);
}

/* Up to executors_wanted running; 0 or the error of the first that did not
 * start. On the reactor once it runs, before that engine_start. */
static int start_executors(struct engine *e)
{
	uint32_t want = executors_wanted(e);
	atomic_store_explicit(&e->executors_kept, want, memory_order_relaxed);
	if (atomic_load_explicit(&e->executors_alive, memory_order_relaxed) >= want)
		return 0;
	int r = 0;
	pthread_mutex_lock(&e->blocking_lock);
	for (uint32_t i = 0; i < EXECUTORS_MAX && !r &&
			     atomic_load_explicit(&e->executors_alive, memory_order_relaxed) < want;
	     i++) {
		struct executor_slot *slot = &e->executors[i];
		if (slot->state == EXECUTOR_RUNNING)
			continue;
		if (slot->state == EXECUTOR_ENDED)
			pthread_join(slot->thread, NULL); /* past its last use of the lock */
		slot->e = e;
		slot->state = EXECUTOR_RUNNING;
		atomic_fetch_add_explicit(&e->executors_alive, 1, memory_order_relaxed);
		r = pthread_create(&slot->thread, NULL, blocking_main, slot);
		if (r) {
			slot->state = EXECUTOR_FREE;
			atomic_fetch_sub_explicit(&e->executors_alive, 1, memory_order_relaxed);
		}
	}
	pthread_mutex_unlock(&e->blocking_lock);
	return r;
}

/*
 * On the reactor, under blocking_lock: a dispatched request that waits in
 * the line behind its own tenant's or user's hung requests
 * (executor_line.h) waits on the store they wait on. Hung at once, it
 * does not hold the depth from the others for the hung bound first (a
 * victim's lookup beside 320 of one user's hung ones waited 1.2 s for a
 * slot); counted in engine.held_back until taken.
 */
static void hold_back(struct engine *e, struct engine_req *er)
{
	er->held_back = true;
	atomic_fetch_add_explicit(&e->held_back, 1, memory_order_relaxed);
	sched_hang(e->sched, &er->sched);
}

/* Into the executors' line. dispatched: the scheduler just let it go to the store. */
static void run_blocking(struct engine *e, struct engine_req *er, bool dispatched)
{
	pthread_mutex_lock(&e->blocking_lock);
	if (executor_line_push(e->line, &er->line) && dispatched)
		hold_back(e, er);
	pthread_cond_signal(&e->blocking_work);
	pthread_mutex_unlock(&e->blocking_lock);
}

/* A dispatched request in the line that may no longer go: hung, as if held back at its push. */
static void hold_back_waiting(struct executor_line_item *it, void *arg)
{
	struct engine *e = arg;
	struct engine_req *er = (struct engine_req *)((char *)it - offsetof(struct engine_req, line));
	if (er->held_back || !er->scheduled || er->op == DATAPATH_READ)
		return; /* a read's answer was served by the store: not its to hang */
	hold_back(e, er);
}

/*
 * On the reactor, before dispatching: requests let into the line before
 * the room filled (or their owner reached the bound) wait behind hung
 * ones now; left as they were, they held the depth until the hung bound,
 * and then executors were started for them that they could not take
 * (beside 200 of root's cgroups of two hung lookups each, a victim's 24
 * requests took a median 0.51 s and the daemon up to 441 threads; with
 * this 0.31 s and 390). A request taken by an executor is released on
 * the reactor only, so marking it here, with the lock held, races nothing.
 */
static void hold_back_tightened(struct engine *e)
{
	if (!atomic_load_explicit(&e->line_tightened, memory_order_relaxed))
		return;
	atomic_store_explicit(&e->line_tightened, false, memory_order_relaxed);
	pthread_mutex_lock(&e->blocking_lock);
	executor_line_each_waiting(e->line, hold_back_waiting, e);
	pthread_mutex_unlock(&e->blocking_lock);
}

static void issue(struct engine *e, struct engine_req *er)
{
	if (er->op == DATAPATH_COPY_RANGE || er->op == DATAPATH_META) {
		run_blocking(e, er, true);
		return;
	}
	if (er->held_go) {
		sem_t *go = er->held_go;
		er->held_go = NULL; /* the worker's: gone once it runs */
		sem_post(go);
		return;
	}
	if (er->op == DATAPATH_READ && !er->buf &&
	    !(er->buf = bufpool_get(e->buffers, er->size_bytes))) {
		finish(e, er, -ENOMEM);
		return;
	}
	struct io_uring_sqe *sqe = get_sqe(e);
	uint64_t off = er->offset_bytes + er->done_bytes;
	unsigned int left = (unsigned int)(er->size_bytes - er->done_bytes);
	char *buf = (char *)er->buf + er->done_bytes;
	bool fixed = e->buffers_registered && bufpool_in_arena(e->buffers, er->buf);
	switch (er->op) {
	case DATAPATH_READ:
		if (fixed)
			io_uring_prep_read_fixed(sqe, er->fd, buf, left, off, 0);
		else
			io_uring_prep_read(sqe, er->fd, buf, left, off);
		break;
	case DATAPATH_WRITE:
		if (fixed)
			io_uring_prep_write_fixed(sqe, er->fd, buf, left, off, 0);
		else
			io_uring_prep_write(sqe, er->fd, buf, left, off);
		sqe->rw_flags = er->write_rwf;
		break;
	case DATAPATH_FSYNC:
		io_uring_prep_fsync(sqe, er->file->fd, 0);
		break;
	case DATAPATH_FDATASYNC:
		io_uring_prep_fsync(sqe, er->file->fd, IORING_FSYNC_DATASYNC);
		break;
	case DATAPATH_FALLOCATE:
		io_uring_prep_fallocate(sqe, er->file->fd, er->fallocate_mode, er->offset_bytes,
					er->size_bytes);
		break;
	case DATAPATH_COPY_RANGE:
	case DATAPATH_META:
		break; /* run by an executor (above) */
	}
	/* as the opener (personality.h) */
	sqe->personality = er->keep_privs ? atomic_load(&er->file->ring_personality_keeping_privs)
					  : er->file->ring_personality;
	if (er->file->issue_async)
		io_uring_sqe_set_flags(sqe, IOSQE_ASYNC);
	io_uring_sqe_set_data(sqe, er);
	e->ring_inflight++;
}

static void on_completion(struct engine *e, struct engine_req *er, int res)
{
	e->ring_inflight--;
	if (res == -EINTR || res == -EAGAIN) {
		issue(e, er);
		return;
	}
	bool transfer = er->op == DATAPATH_READ || er->op == DATAPATH_WRITE;
	if (transfer && res > 0) {
		er->done_bytes += (uint64_t)res;
		/* A short transfer continues where it stopped; a direct one could not (alignment). */
		if (er->done_bytes < er->size_bytes && !er->direct) {
			issue(e, er);
			return;
		}
		res = 0;
	}
	if (transfer && res == 0 && er->op == DATAPATH_WRITE && er->done_bytes == 0 &&
	    er->size_bytes > 0)
		res = -EIO; /* a write that makes no progress would loop forever */
	if (er->op == DATAPATH_READ && er->done_bytes >= ANSWER_AWAY_BYTES) {
		er->answer_res = res;
		run_blocking(e, er, false);
		return;
	}
	finish(e, er, res);
}

/* A stack's requests, oldest first (it is newest first). */
static struct engine_req *take_in_order(_Atomic(struct engine_req *) *stack)
{
	struct engine_req *newest = atomic_exchange_explicit(stack, NULL, memory_order_acquire);
	struct engine_req *oldest = NULL;
	while (newest) {
		struct engine_req *next = newest->next;
		newest->next = oldest;
		oldest = newest;
		newest = next;
	}
	return oldest;
}

/* A solo request: the scheduler counts it for its tenant and learns its
 * time at the store (sched_account). */
static void account_solo(struct engine *e, struct engine_req *er)
{
	uint64_t now = clock_now_ns();
	note_inline(e, er->tenant, now);
	note_transfer(e, er);
	er->sched.queue = tenant_queues_get(e->queues, er->tenant);
	if (er->sched.queue)
		sched_account(e->sched, &er->sched, er->solo_ns, now);
	request_free(e, er);
}

/* Requests other threads finished (and answered), in the order they finished. */
static void take_finished(struct engine *e, uint64_t now)
{
	struct engine_req *er = take_in_order(&e->finished);
	while (er) {
		struct engine_req *next = er->next;
		if (er->ran_solo)
			account_solo(e, er);
		else
			release(e, er, now);
		er = next;
	}
}

static void take_handoff(struct engine *e, uint64_t now)
{
	struct engine_req *fifo = take_in_order(&e->handoff);
	while (fifo) {
		struct engine_req *er = fifo;
		fifo = er->next;
		er->sched.queue = tenant_queues_get(e->queues, er->tenant);
		if (!er->sched.queue) {
			if (er->held_go) {
				er->held_res = -ENOMEM; /* its worker finishes it */
				sem_post(er->held_go);
			} else if (er->op == DATAPATH_META) {
				run_blocking(e, er, false); /* unscheduled: it must still run to be answered */
			} else {
				finish(e, er, -ENOMEM);
			}
			continue;
		}
		er->scheduled = true;
		sched_enqueue(e->sched, &er->sched, now);
		note_scheduled(e, er->tenant);
	}
}

/* Once a second: idle tenants. */
static void retire_idle(struct engine *e, uint64_t now)
{
	if (now < e->next_retire_ns)
		return;
	e->next_retire_ns = now + e->params.retire_check_ns;
	uint32_t ids[RETIRE_BATCH];
	size_t n = tenant_table_retire(e->tenants, now, ids, RETIRE_BATCH);
	for (size_t i = 0; i < n; i++) {
		stats_reset_tenant(e->stats, ids[i]);
		tenant_queues_retire(e->queues, ids[i]);
	}
}

uint32_t engine_kernel_queue_limit(uint64_t mean_transfer_bytes, uint32_t min_requests, uint32_t max)
{
	uint64_t bytes = mean_transfer_bytes > 4096u ? mean_transfer_bytes : 4096u;
	uint64_t limit = ENGINE_KERNEL_QUEUE_BYTES / bytes;
	if (limit < min_requests)
		limit = min_requests;
	return limit < 1 ? 1 : limit > max ? max : (uint32_t)limit;
}

static uint32_t kernel_queue_min(const struct engine *e)
{
	return e->params.sched.max_inflight;
}

/* The limit the mean size of this second's reads and writes asks for (engine.h). */
static uint32_t window_kernel_queue_limit(const struct engine *e)
{
	return engine_kernel_queue_limit(e->window_transfer_bytes / e->window_transfers, kernel_queue_min(e),
					 e->kernel_queue_max);
}

/* Requests of mean_bytes each that make ENGINE_KERNEL_QUEUE_HELD_BYTES. */
static uint32_t held_room(uint64_t mean_bytes)
{
	return engine_kernel_queue_limit(mean_bytes, 0, UINT32_MAX) *
	       (uint32_t)(ENGINE_KERNEL_QUEUE_HELD_BYTES / ENGINE_KERNEL_QUEUE_BYTES);
}

/*
 * Each second, the kernel's async request limit from the mean size of the
 * reads and writes that finished in it, or in the last second that had
 * any (engine.h). It falls at once, but
 * rises only when three quarters of the limit or more were outstanding at
 * some stats tick (deep tenants were probably held back in the kernel):
 * a limit raised by a few small reads alone would let the next flood's
 * first burst in whole. Written only when it moves by a quarter or more,
 * so that a steady load costs no writes.
 */
static void size_kernel_queue(struct engine *e, uint64_t now)
{
	if (!e->kernel_queue_set || now < e->next_kernel_queue_ns)
		return; /* fixed (or unknown): published once, by engine_set_kernel_queue */
	e->next_kernel_queue_ns = now + KERNEL_QUEUE_EVERY_NS;
	/*
	 * What the scheduler holds queued while a deep tenant waits for its
	 * next requests is outstanding in the kernel's queue too, and when it
	 * fills the queue that tenant's requests wait behind it in the kernel,
	 * unseen (two deep 1 MiB writers at 8:1 got 1:1, and the scheduler
	 * idled for the heavy one). So the limit makes room for it on top of
	 * its size in bytes, at most ENGINE_KERNEL_QUEUE_HELD_BYTES more, and
	 * gives that room back by a quarter a second once no deep tenant waits:
	 * with the room, the deep tenant's requests come in and it waits less.
	 */
	uint32_t beside = sched_take_held_beside_deep(e->sched);
	uint32_t kept = e->kernel_queue_beside - e->kernel_queue_beside / 4u;
	e->kernel_queue_beside = beside > kept ? beside : kept;
	/*
	 * A tenant whose store hangs keeps its requests outstanding there for
	 * as long as it hangs, and with them every other tenant's readahead,
	 * writeback and aio waited at the full queue (a buffered read of
	 * another file: 20 s and more). Room is made for twice what it holds,
	 * past the limit's usual ceiling up to the kernel's: its callers are
	 * the first in the kernel's line for room (they found the queue full
	 * first), so room for as much again would go to them each second;
	 * twice passes whatever depth they have in a few seconds and leaves
	 * the rest to the others. Its requests wait for the store, not to be
	 * copied; the room is at most ENGINE_KERNEL_QUEUE_HELD_BYTES of
	 * requests the size of the hung ones, which bounds the payloads it
	 * may queue meanwhile. The room goes as soon as they are answered.
	 */
	uint64_t hung_mean_bytes = 0;
	uint64_t hung_room = 2u * (uint64_t)sched_held_by_hung(e->sched, &hung_mean_bytes);
	uint64_t hung_room_max = held_room(hung_mean_bytes);
	e->kernel_queue_hung = (uint32_t)(hung_room < hung_room_max ? hung_room : hung_room_max);
	if (e->window_transfers)
		e->kernel_queue_mean_bytes = e->window_transfer_bytes / e->window_transfers;
	uint64_t mean = e->kernel_queue_mean_bytes;
	uint32_t room = held_room(mean);
	uint64_t limit = (uint64_t)engine_kernel_queue_limit(mean, kernel_queue_min(e), e->kernel_queue_max) +
			 (e->kernel_queue_beside < room ? e->kernel_queue_beside : room);
	if (limit > e->kernel_queue_max)
		limit = e->kernel_queue_max;
	limit += e->kernel_queue_hung;
	if (limit > ENGINE_KERNEL_QUEUE_LIMIT_MAX)
		limit = ENGINE_KERNEL_QUEUE_LIMIT_MAX;
	uint32_t old = e->kernel_queue_limit;
	bool held_back = e->window_peak_held * 4u >= old * 3u;
	if (limit * 4u < old * 3u || (limit * 4u > old * 5u && held_back)) {
		e->kernel_queue_set(e->kernel_queue_arg, (uint32_t)limit);
		e->kernel_queue_limit = (uint32_t)limit;
		stats_publish_kernel_queue(e->stats, (uint32_t)limit);
	}
	e->window_transfers = e->window_transfer_bytes = 0;
	e->window_peak_held = 0;
}

/*
 * At a stats tick, while room is kept for hung tenants: the kernel wakes one
 * caller waiting for room in its queue when the limit is written and another
 * when one of the queue's requests is answered. With every request in the
 * queue hung none is answered, so after a rise the first waiter woken (the
 * hung tenant's, the first to find the queue full) could take the room
 * while the others slept on; writing the limit again wakes the next.
 */
static void wake_kernel_queue_waiters(struct engine *e)
{
	if (e->kernel_queue_set && e->kernel_queue_hung)
		e->kernel_queue_set(e->kernel_queue_arg, e->kernel_queue_limit);
}

/*
 * At a stats tick: how many requests are outstanding. The scheduler holds
 * those the daemon has read; while the daemon is slower to read than the
 * callers to ask (short of CPU), the rest wait unread in the kernel, which
 * counts them. That count costs three syscalls, so it is read only while
 * the limit could rise and the scheduler's own count does not already
 * show it full.
 */
static void note_outstanding(struct engine *e)
{
	uint32_t held = sched_pending(e->sched) + sched_inflight(e->sched);
	uint32_t full = e->kernel_queue_limit * 3u / 4u;
	if (held < full && e->window_peak_held < full && e->kernel_queue_waiting && e->window_transfers &&
	    window_kernel_queue_limit(e) * 4u > e->kernel_queue_limit * 5u) {
		int64_t waiting = e->kernel_queue_waiting(e->kernel_queue_arg);
		if (waiting > (int64_t)held)
			held = waiting > UINT32_MAX ? UINT32_MAX : (uint32_t)waiting;
	}
	if (held > e->window_peak_held)
		e->window_peak_held = held;
}

void engine_reload(struct engine *e, const struct engine_params *p)
{
	pthread_mutex_lock(&e->reload_lock);
	e->reloaded = *p;
	pthread_mutex_unlock(&e->reload_lock);
	atomic_fetch_add_explicit(&e->reload_epoch, 1, memory_order_release);
	wake_reactor(e);
}

static void publish_settings(struct engine *e)
{
	const struct sched_params *p = sched_params_of(e->sched);
	struct stats_settings st = {
		.sched = *p,
		.busy_poll_ns = e->params.busy_poll_ns,
	};
	stats_publish_settings(e->stats, &st);
}

/*
 * io_uring's workers, which run what is not issued inline (issues_inline,
 * and requests that would block): by default at most four per CPU, so a
 * tenant's requests hung at a slow store would take them all and another
 * tenant's request would queue behind them. As many as requests may be
 * at the store. On the reactor: the limit is its task's.
 */
static void size_ring_workers(struct engine *e)
{
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	unsigned int floor = cpus > 0 ? 4u * (unsigned int)cpus : 4u;
	unsigned int bounded = depth_with_hung(e) > floor ? depth_with_hung(e) : floor;
	unsigned int limits[2] = {bounded, 0}; /* 0: the unbounded kind unchanged */
	int r = io_uring_register_iowq_max_workers(&e->ring, limits);
	if (r < 0)
		fuse_log(FUSE_LOG_WARNING, "fusesched: io_uring workers not raised to %u: %s\n", bounded,
			 strerror(-r));
}

/* On the reactor: executors for the depth and the requests hung now. */
static void grow_executors(struct engine *e)
{
	int r = start_executors(e);
	if (r)
		fuse_log(FUSE_LOG_WARNING, "fusesched: %u executors of %u running: %s\n",
			 atomic_load_explicit(&e->executors_alive, memory_order_relaxed),
			 executors_wanted(e), strerror(r));
}

/* On the reactor, after dispatching: workers for the requests hung at the store
 * (not those hung in the executors' line: they hold neither). */
static void follow_hung(struct engine *e)
{
	uint32_t hung = sched_hung(e->sched), waiting = atomic_load_explicit(&e->held_back, memory_order_relaxed);
	hung = hung > waiting ? hung - waiting : 0;
	if (hung == e->hung_now)
		return;
	e->hung_now = hung;
	if (hung > e->hung_seen) {
		e->hung_seen = hung;
		size_ring_workers(e);
	}
	grow_executors(e); /* or, fewer hung, lets the idle ones end */
}

/* On the reactor: settings reloaded since the last round, applied and published. */
static void apply_reload(struct engine *e)
{
	uint64_t epoch = atomic_load_explicit(&e->reload_epoch, memory_order_acquire);
	if (epoch == e->reload_applied)
		return;
	e->reload_applied = epoch;
	pthread_mutex_lock(&e->reload_lock);
	struct engine_params p = e->reloaded;
	pthread_mutex_unlock(&e->reload_lock);
	if (sched_reload(e->sched, &p.sched) != 0)
		return;
	/*
	 * A depth past the mount's: the ring was sized for the mount's, so its
	 * submission queue fills sooner (get_sqe submits what it holds) and
	 * completions past its completion queue wait in the kernel's overflow
	 * list (IORING_FEAT_NODROP), which the next submit flushes: none is
	 * lost. The executors are started here, the kernel's queue follows at
	 * its next sizing (kernel_queue_min).
	 */
	e->params.sched.max_inflight = p.sched.max_inflight;
	pthread_mutex_lock(&e->blocking_lock);
	executor_line_set_limits(e->line, executor_bound(p.sched.max_inflight),
				 executors_shared(p.sched.max_inflight));
	pthread_mutex_unlock(&e->blocking_lock);
	size_ring_workers(e);
	grow_executors(e);
	if (!e->wait_by_poll)
		e->params.busy_poll_ns = p.busy_poll_ns;
	publish_settings(e);
}

uint32_t engine_set_kernel_queue(struct engine *e, void (*set)(void *arg, uint32_t limit),
				 int64_t (*waiting)(void *arg), void *arg, uint32_t max)
{
	e->kernel_queue_set = set;
	e->kernel_queue_waiting = waiting;
	e->kernel_queue_arg = arg;
	e->kernel_queue_max = max;
	e->kernel_queue_mean_bytes = ENGINE_MAX_TRANSFER_BYTES; /* as the first limit assumes */
	e->kernel_queue_limit = set ? engine_kernel_queue_limit(ENGINE_MAX_TRANSFER_BYTES, kernel_queue_min(e), max)
				    : max;
	stats_publish_kernel_queue(e->stats, e->kernel_queue_limit);
	return e->kernel_queue_limit;
}

/* The scheduler's view of each tenant, copied out for readers on other threads. */
static void publish_stats(struct engine *e, uint64_t now)
{
	size_kernel_queue(e, now);
	if (now < e->next_publish_ns)
		return;
	e->next_publish_ns = now + e->params.stats_publish_ns;
	uint32_t busy_tenant = 0, busy_count = 0;
	for (uint32_t id = 0; id < tenant_queues_limit(e->queues); id++) {
		struct sched_queue *queue = tenant_queues_find(e->queues, id);
		if (!queue)
			continue;
		struct sched_queue_stats q;
		sched_queue_stats(queue, &q);
		stats_publish_sched(e->stats, id, &q);
		if (q.pending || q.inflight) {
			busy_tenant = id;
			busy_count++;
		}
	}
	note_outstanding(e);
	wake_kernel_queue_waiters(e);
	recompute_meta_sole(e, now, busy_tenant, busy_count);
	stats_publish_global(e->stats, sched_peak_rate(e->sched), sched_inflight(e->sched),
			     sched_max_inflight(e->sched), sched_reserved_slots(e->sched, now));
	stats_publish_hung(e->stats, sched_hung(e->sched));
	stats_publish_executors(e->stats, engine_executors(e));
}

/*
 * On the reactor: the longest metadata run at once in a worker since the
 * last round, learned by the hung bound. Without it a daemon that had run
 * only such metadata took its first scheduled requests that hung for hung
 * after 5 s (the bound before anything completed), holding the others'
 * slots that long.
 */
static void take_meta_times(struct engine *e, uint64_t now)
{
	if (!atomic_load_explicit(&e->meta_inline_longest_ns, memory_order_relaxed))
		return;
	uint64_t longest = atomic_exchange_explicit(&e->meta_inline_longest_ns, 0, memory_order_relaxed);
	if (longest)
		sched_note_store_time(e->sched, longest, now);
}

static void close_solo(struct engine *e)
{
	int s = atomic_load(&e->solo);
	while ((s == SOLO_OPEN || s == SOLO_TAKEN) &&
	       !atomic_compare_exchange_weak(&e->solo, &s,
					     s == SOLO_OPEN ? SOLO_CLOSED : SOLO_CLOSED_TAKEN))
		;
}

/* Opens the token while the scheduler would dispatch the next request at once. */
static void open_solo_if_idle(struct engine *e)
{
	if (!e->params.solo_requests || atomic_load(&e->stopping) || atomic_load(&e->handoff) ||
	    sched_pending(e->sched) || sched_inflight(e->sched) || e->ring_inflight ||
	    sched_next_deadline(e->sched) != SCHED_DEADLINE_NONE)
		return;
	int closed = SOLO_CLOSED;
	atomic_compare_exchange_strong(&e->solo, &closed, SOLO_OPEN);
}

/* Nothing left anywhere; a worker still holding the solo token has not pushed its account yet. */
static bool drained(struct engine *e)
{
	int solo = atomic_load(&e->solo);
	return solo != SOLO_TAKEN && solo != SOLO_CLOSED_TAKEN &&
	       atomic_load(&e->handoff) == NULL && atomic_load(&e->finished) == NULL &&
	       sched_pending(e->sched) == 0 &&
	       sched_inflight(e->sched) == 0 && e->ring_inflight == 0;
}

/* A moving average over the last eight or so waits for the store. */
static void note_wait(struct engine *e, uint64_t waited_ns)
{
	e->wait_avg_ns = (7 * e->wait_avg_ns + waited_ns) / 8;
}

static bool work_arrived(struct engine *e)
{
	return io_uring_cq_ready(&e->ring) ||
	       atomic_load_explicit(&e->handoff, memory_order_relaxed) ||
	       atomic_load_explicit(&e->finished, memory_order_relaxed);
}

/*
 * With requests at the store, completions and new requests often follow
 * within tens of microseconds, and on a VM putting this thread to sleep and
 * waking it (an IPI to an idle vCPU) costs about as much: so it polls for
 * up to busy_poll_ns first, yielding the CPU to anyone waiting for it.
 * Only while the waits it sees average less than that (against a slow store
 * it goes straight to sleep), and only while one tenant has requests: with
 * several, their callers and the FUSE workers serving them need the CPU more
 * (a depth-1 reader next to a flooding tenant got 1262-2215 IOPS with
 * polling, 2463-2558 without). Returns whether something arrived while
 * polling.
 */
static bool busy_poll(struct engine *e, uint64_t now, uint64_t deadline)
{
	if (!e->params.busy_poll_ns || e->wait_avg_ns >= e->params.busy_poll_ns ||
	    sched_busy_queues(e->sched) > 1)
		return false;
	io_uring_submit(&e->ring);
	uint64_t until = now + e->params.busy_poll_ns < deadline ? now + e->params.busy_poll_ns
								 : deadline;
	for (uint64_t t = now; t < until; t = clock_now_ns()) {
		if (work_arrived(e)) {
			note_wait(e, t - now);
			return true;
		}
		sched_yield(); /* a FUSE worker or the caller waiting for this CPU goes first */
	}
	return false;
}

/* Sleeps in the ring until a completion, a handed-over request or the next deadline. */
static void wait_for_events(struct engine *e, uint64_t now)
{
	uint64_t deadline = sched_next_deadline(e->sched);
	if (e->next_retire_ns < deadline)
		deadline = e->next_retire_ns;
	if (e->next_publish_ns < deadline)
		deadline = e->next_publish_ns;
	if (deadline <= now) {
		io_uring_submit(&e->ring);
		return;
	}
	/* Waits with nothing at the store are a tenant's think time, not the store's. */
	bool store_busy = e->ring_inflight > 0;
	if (store_busy && busy_poll(e, now, deadline))
		return;
	atomic_store(&e->reactor_asleep, true);
	if (atomic_load(&e->handoff) || atomic_load(&e->finished)) {
		atomic_store(&e->reactor_asleep, false);
		io_uring_submit(&e->ring);
		return;
	}
	uint64_t wait_ns = deadline - now;
	if (e->wait_by_poll) {
		io_uring_submit(&e->ring);
		if (!io_uring_cq_ready(&e->ring)) {
			struct pollfd ring = {.fd = e->ring.ring_fd, .events = POLLIN};
			(void)poll(&ring, 1, (int)((wait_ns + 999999u) / 1000000u));
		}
	} else {
		struct __kernel_timespec ts = {.tv_sec = (long long)(wait_ns / 1000000000u),
					       .tv_nsec = (long long)(wait_ns % 1000000000u)};
		struct io_uring_cqe *cqe;
		io_uring_submit_and_wait_timeout(&e->ring, &cqe, 1, &ts, NULL);
	}
	atomic_store(&e->reactor_asleep, false);
	if (store_busy)
		note_wait(e, clock_now_ns() - now);
}

/*
 * Every tenant's requests pass through the reactor, so its CPU is shared by
 * all of them: under one tenant's flood, the FUSE workers copying that
 * tenant's payloads kept it waiting for a CPU 70% of the time (746 us per
 * wakeup), and another tenant's read waited with it. It runs at a higher
 * priority than the workers (nice REACTOR_NICE) and with a short slice
 * (REACTOR_SLICE_NS: under EEVDF a shorter slice is an earlier deadline, so
 * its wakeups preempt instead of queueing), and the io_uring worker
 * threads it spawns do not inherit that (SCHED_FLAG_RESET_ON_FORK): they
 * run a tenant's blocking writes. Best effort: without CAP_SYS_NICE it
 * stays as it is.
 */
/* sched_setattr(2)'s first version; glibc 2.36 has neither it nor the call. */
struct reactor_sched_attr {
	uint32_t size, sched_policy;
	uint64_t sched_flags;
	int32_t sched_nice;
	uint32_t sched_priority;
	uint64_t sched_runtime, sched_deadline, sched_period;
};
#define SCHED_FLAG_RESET_ON_FORK_ 0x01u

static void raise_reactor_priority(void)
{
	struct reactor_sched_attr attr = {
		.size = sizeof(attr),
		.sched_policy = SCHED_OTHER,
		.sched_flags = SCHED_FLAG_RESET_ON_FORK_,
		.sched_nice = REACTOR_NICE,
		.sched_runtime = REACTOR_SLICE_NS,
	};
	if (syscall(SYS_sched_setattr, 0, &attr, 0) == 0)
		return;
	/* Kernels before 6.12 take no slice for SCHED_OTHER. */
	attr.sched_runtime = 0;
	(void)syscall(SYS_sched_setattr, 0, &attr, 0);
}

static void *reactor_main(void *arg)
{
	struct engine *e = arg;
	on_reactor = true;
	(void)pthread_setname_np(pthread_self(), ENGINE_REACTOR_THREAD);
	raise_reactor_priority();
	size_ring_workers(e);
	arm_wake_read(e);
	for (;;) {
		uint64_t now = clock_now_ns();
		reactor_round_ns = now;
		if (sched_next_deadline(e->sched) <= now)
			sched_timer(e->sched, now);
		close_solo(e);
		take_finished(e, now);
		take_meta_times(e, now);
		take_handoff(e, now);
		tenant_queues_sync(e->queues);
		apply_reload(e);
		retire_idle(e, now);
		publish_stats(e, now);
		hold_back_tightened(e);
		for (struct sched_req *sr; (sr = sched_dispatch(e->sched, now));)
			issue(e, (struct engine_req *)sr);
		follow_hung(e);
		if (atomic_load(&e->stopping) && drained(e))
			break;
		open_solo_if_idle(e);
		wait_for_events(e, now);
		reactor_round_ns = clock_now_ns();
		unsigned head, seen = 0;
		struct io_uring_cqe *cqe;
		io_uring_for_each_cqe(&e->ring, head, cqe) {
			seen++;
			void *data = io_uring_cqe_get_data(cqe);
			if ((uintptr_t)data == WAKE_TAG)
				arm_wake_read(e);
			else
				on_completion(e, data, cqe->res);
		}
		io_uring_cq_advance(&e->ring, seen);
	}
	return NULL;
}

/* ---- lifecycle -------------------------------------------------------- */

/*
 * Registered, the arena's pages are pinned once instead of on every direct
 * I/O. Without it (RLIMIT_MEMLOCK and no CAP_IPC_LOCK) the same buffers are
 * used unregistered: slower, still correct. Done in the process that serves:
 * the pinned pages are the registering process's, and after a fork (the
 * mount going to the background) the daemon's copies of them would never be
 * what the kernel reads or writes.
 */
static void register_buffers(struct engine *e)
{
	struct iovec arena = bufpool_arena(e->buffers);
	if (arena.iov_len == 0)
		return;
	int r = io_uring_register_buffers(&e->ring, &arena, 1);
	if (r < 0) {
		fuse_log(FUSE_LOG_WARNING,
			 "fusesched: cannot register %zu bytes of I/O buffers with io_uring (%s): "
			 "using them unregistered; raise RLIMIT_MEMLOCK to register them\n",
			 arena.iov_len, strerror(-r));
		return;
	}
	e->buffers_registered = true;
}

int engine_new(const struct engine_params *p, struct tenant_table *tenants, struct stats *stats,
	       struct engine **out, char *err, size_t err_bytes)
{
	struct engine *e = calloc(1, sizeof(*e));
	if (!e) {
		snprintf(err, err_bytes, "out of memory");
		return -ENOMEM;
	}
	e->params = *p;
	e->tenants = tenants;
	/*
	 * A held write is a worker not reading /dev/fuse, whose queue every
	 * tenant shares: one tenant may hold a quarter of the slots, so writers
	 * waiting for a light tenant's turns cannot take many workers.
	 */
	e->max_tenants = stats_max_tenants(stats);
	e->held_writes_per_tenant = p->max_held_writes > 4 ? p->max_held_writes / 4 : p->max_held_writes;
	e->per_tenant = calloc(e->max_tenants ? e->max_tenants : 1, sizeof(*e->per_tenant));
	atomic_init(&e->meta_sole, META_NOBODY);
	if (!e->per_tenant ||
	    executor_line_new(e->max_tenants, executor_bound(p->sched.max_inflight),
			      executors_shared(p->sched.max_inflight), &e->line) != 0) {
		free(e->per_tenant);
		free(e);
		snprintf(err, err_bytes, "out of memory");
		return -ENOMEM;
	}
	pthread_mutex_init(&e->blocking_lock, NULL);
	pthread_mutex_init(&e->reload_lock, NULL);
	pthread_condattr_t monotonic; /* the executors' timed wait is on clock.h's clock */
	pthread_condattr_init(&monotonic);
	pthread_condattr_setclock(&monotonic, CLOCK_MONOTONIC);
	pthread_cond_init(&e->blocking_work, &monotonic);
	pthread_condattr_destroy(&monotonic);
	e->stats = stats;
	e->wake_fd = -1;
	e->dp.reply = p->reply ? p->reply : datapath_reply_fuse;
	e->dp.submit = engine_submit;
	e->dp.file_opened = engine_file_opened;
	e->dp.dir_opened = engine_handle_opened;
	e->dp.dir_released = engine_handle_released;
	e->dp.file_released = engine_file_released;
	e->dp.meta_now = engine_meta_now;
	e->dp.meta_ran = engine_meta_ran;
	e->dp.payload_get = engine_payload_get;
	e->dp.payload_put = engine_payload_put;
	int r = sched_new(&p->sched, &e->sched);
	if (r < 0) {
		snprintf(err, err_bytes, "invalid scheduler parameters: %s", strerror(-r));
		goto fail;
	}
	r = tenant_queues_new(e->sched, tenants, p->sched.default_weight, &e->queues);
	if (r < 0) {
		snprintf(err, err_bytes, "out of memory");
		goto fail;
	}
	e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (e->wake_fd < 0) {
		r = -errno;
		snprintf(err, err_bytes, "eventfd: %s", strerror(errno));
		goto fail;
	}
	uint32_t entries = p->ring_entries ? p->ring_entries : 2 * p->sched.max_inflight + 16;
	r = io_uring_queue_init(entries, &e->ring, 0);
	if (r < 0) {
		snprintf(err, err_bytes,
			 "io_uring is unavailable: %s (check the sysctl kernel.io_uring_disabled "
			 "and seccomp/container policy)", strerror(-r));
		close(e->wake_fd);
		e->wake_fd = -1;
		goto fail;
	}
	r = bufpool_new(p->buffer_arena_bytes, &e->buffers);
	if (r < 0) {
		snprintf(err, err_bytes, "cannot map %llu bytes of I/O buffers: %s",
			 (unsigned long long)p->buffer_arena_bytes, strerror(-r));
		io_uring_queue_exit(&e->ring);
		goto fail;
	}
	r = personality_cache_new(&e->ring, PERSONALITIES_IDLE_MAX, PERSONALITIES_LIVE_MAX,
				  PERSONALITIES_LIVE_MAX / 8, e->max_tenants,
				  &e->personalities);
	if (r == 0)
		r = open_files_new(stats_max_tenants(stats), &e->open_files);
	if (r < 0) {
		personality_cache_free(e->personalities);
		snprintf(err, err_bytes, "out of memory");
		bufpool_free(e->buffers);
		io_uring_queue_exit(&e->ring);
		goto fail;
	}
	/*
	 * valgrind runs one thread at a time and does not know io_uring_enter
	 * may block: the reactor would sleep holding it and every FUSE worker
	 * would stall. poll(2) it knows, at the cost of a syscall per wait.
	 */
	e->wait_by_poll = RUNNING_ON_VALGRIND;
	if (e->wait_by_poll)
		e->params.busy_poll_ns = 0; /* valgrind runs one thread at a time: polling would stall the rest */
	publish_settings(e);
	*out = e;
	return 0;
fail:
	tenant_queues_free(e->queues);
	sched_free(e->sched);
	if (e->wake_fd >= 0)
		close(e->wake_fd);
	free(e->per_tenant);
	executor_line_free(e->line);
	free(e);
	return r;
}

static void blocking_stop(struct engine *e)
{
	pthread_mutex_lock(&e->blocking_lock);
	e->blocking_stop = true;
	pthread_cond_broadcast(&e->blocking_work);
	for (uint32_t i = 0; i < EXECUTORS_MAX; i++) {
		struct executor_slot *slot = &e->executors[i];
		if (slot->state == EXECUTOR_FREE)
			continue;
		pthread_mutex_unlock(&e->blocking_lock); /* a running one ends under it */
		pthread_join(slot->thread, NULL);
		pthread_mutex_lock(&e->blocking_lock);
		slot->state = EXECUTOR_FREE;
	}
	pthread_mutex_unlock(&e->blocking_lock);
}

uint32_t engine_executors(const struct engine *e)
{
	return atomic_load_explicit(&((struct engine *)e)->executors_alive, memory_order_relaxed);
}

int engine_start(struct engine *e)
{
	if (!e->buffers_registered)
		register_buffers(e);
	e->blocking_stop = false;
	atomic_store(&e->stopping, false);
	int r = start_executors(e);
	if (r) {
		blocking_stop(e);
		return -r;
	}
	r = pthread_create(&e->thread, NULL, reactor_main, e);
	if (r) {
		blocking_stop(e);
		return -r;
	}
	e->started = true;
	return 0;
}

/* The reactor drains first: it waits for what the blocking executors still run. */
void engine_stop(struct engine *e)
{
	if (!e->started)
		return;
	atomic_store(&e->stopping, true);
	wake_reactor(e);
	pthread_join(e->thread, NULL);
	blocking_stop(e);
	e->started = false;
}

void engine_free(struct engine *e)
{
	if (!e)
		return;
	engine_stop(e);
	personality_cache_free(e->personalities);
	open_files_free(e->open_files);
	io_uring_queue_exit(&e->ring);
	bufpool_free(e->buffers);
	close(e->wake_fd);
	sched_free(e->sched);
	tenant_queues_free(e->queues);
	free(e->per_tenant);
	executor_line_free(e->line);
	pthread_cond_destroy(&e->blocking_work);
	pthread_mutex_destroy(&e->blocking_lock);
	pthread_mutex_destroy(&e->reload_lock);
	free(e);
}

struct datapath *engine_datapath(struct engine *e)
{
	return &e->dp;
}

uint64_t engine_completed(const struct engine *e)
{
	return atomic_load_explicit(&((struct engine *)e)->completed, memory_order_relaxed);
}
