/*
 * The /dev/fuse channel: libfuse's reads and replies pass through here. It
 * is where every request enters, so it is where a metadata request that
 * must wait for its turn is taken aside (see channel_read), where the
 * requests libfuse 3.14 cannot serve are served (FUSE_STATX) or rewritten
 * (FUSE_TMPFILE), and where the daemon takes over dropping setuid/setgid
 * from the kernel (FUSE_HANDLE_KILLPRIV_V2), which libfuse 3.14 cannot
 * negotiate, and where parallel lookups are asked for
 * (FUSE_PARALLEL_DIROPS), which libfuse 3.14 means to ask for and never
 * does. Interrupts stop here (channel_read). Large write payloads are read
 * where they will wait: a direct one into a datapath buffer, a buffered
 * one left in a pipe (read_request).
 *
 * Without it the kernel asks the daemon for security.capability before
 * every write (a full round trip through a worker), because a FUSE
 * filesystem with xattrs never marks its inodes as having none. With it the
 * kernel asks once per inode and instead flags each write, truncation and
 * O_TRUNC open whose caller lacks CAP_FSETID; the operation then drops the
 * bits itself (fs_request_drops_privs). Capabilities need no help: the
 * backing filesystem removes security.capability on our write.
 *
 * Without parallel lookups the kernel serializes every lookup and readdir
 * of a directory on the directory's lock, held for the round trip: one
 * tenant's lookup on a store that hangs (a name in a hung NFS subtree)
 * held every other tenant's lookups in that directory, the mount's root
 * included, for as long as it hung, and its many processes queued there
 * one at a time. The daemon serves lookups of one directory in parallel as
 * it does those of different ones (the inode table is shared by all
 * workers; revalidating lookups are never serialized anyway).
 *
 * The root's second node (fs.h) is translated here, both ways: a request
 * naming it (as its node or as a rename's new directory) is the root's,
 * and, once the kernel walks it, a notification about the root names it.
 */
#include "fs_internal.h"
#include "fusesched/clock.h"
#include "fusesched/fdio.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fuse.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* The worker that read a request serves it (libfuse's loop): the flag is its own. */
static _Thread_local bool request_drops_privs;
static _Thread_local bool request_is_tmpfile;
static _Atomic uint64_t init_unique;      /* the INIT request whose reply is to amend */
static _Atomic uint32_t kernel_init_flags; /* what the kernel offered at INIT */

bool fs_request_drops_privs(void)
{
	return request_drops_privs;
}

bool fs_request_is_tmpfile(void)
{
	return request_is_tmpfile;
}

/* The kill flag of a request the kernel sent under FUSE_HANDLE_KILLPRIV_V2. */
static bool drops_privs(const struct fuse_in_header *h, size_t bytes)
{
	const void *arg = h + 1;
	bytes -= sizeof(*h);
	switch (h->opcode) {
	case FUSE_WRITE:
		return bytes >= sizeof(struct fuse_write_in) &&
		       (((const struct fuse_write_in *)arg)->write_flags & FUSE_WRITE_KILL_SUIDGID);
	case FUSE_SETATTR:
		return bytes >= sizeof(struct fuse_setattr_in) &&
		       (((const struct fuse_setattr_in *)arg)->valid & FATTR_KILL_SUIDGID);
	case FUSE_OPEN:
		return bytes >= sizeof(struct fuse_open_in) &&
		       (((const struct fuse_open_in *)arg)->open_flags & FUSE_OPEN_KILL_SUIDGID);
	default:
		return false;
	}
}

/*
 * libfuse 3.14 answers FUSE_TMPFILE (open with O_TMPFILE) with ENOSYS, and
 * the kernel then refuses O_TMPFILE on the mount for good. Its arguments
 * are a CREATE's (the name is the kernel's placeholder), and so is its
 * answer: it is served as a CREATE that this worker knows is a tmpfile.
 */
static void take_request(struct fuse_in_header *h, size_t bytes)
{
	request_drops_privs = drops_privs(h, bytes);
	request_is_tmpfile = h->opcode == FUSE_TMPFILE;
	if (request_is_tmpfile)
		h->opcode = FUSE_CREATE;
}

/*
 * Data requests go to the datapath from their fs/ operations and wait
 * there as requests; these are served in the worker that read them or need
 * no answer. Everything else is metadata, scheduled here.
 */
static bool is_metadata(uint32_t opcode)
{
	switch (opcode) {
	case FUSE_INIT:
	case FUSE_DESTROY:
	case FUSE_FORGET:
	case FUSE_BATCH_FORGET:
	case FUSE_NOTIFY_REPLY:
	case FUSE_READ:
	case FUSE_WRITE:
	case FUSE_FSYNC:
	case FUSE_FALLOCATE:
	case FUSE_COPY_FILE_RANGE:
		return false;
	default:
		return true;
	}
}

/* The daemon's one mount (fs_attach_channel). */
static struct fs *channel_fs;

void fs_root_alias_arm(struct fs *fs, bool armed)
{
	atomic_store(&fs->root_alias_armed, armed);
}

void fs_root_alias_use(struct fs *fs)
{
	atomic_store(&fs->root_alias_used, true);
}

/* The request as the daemon serves it: the root's second node is the root. */
static void root_alias_in(struct fuse_in_header *h, size_t bytes)
{
	if (h->nodeid == FS_ROOT_ALIAS_ID)
		h->nodeid = FUSE_ROOT_ID;
	uint64_t *newdir = NULL;
	if (h->opcode == FUSE_RENAME && bytes >= sizeof(*h) + sizeof(struct fuse_rename_in))
		newdir = &((struct fuse_rename_in *)(h + 1))->newdir;
	else if (h->opcode == FUSE_RENAME2 && bytes >= sizeof(*h) + sizeof(struct fuse_rename2_in))
		newdir = &((struct fuse_rename2_in *)(h + 1))->newdir;
	if (newdir && *newdir == FS_ROOT_ALIAS_ID)
		*newdir = FUSE_ROOT_ID;
}

/* A metadata request taken aside: its bytes, run later by the datapath. */
struct deferred {
	size_t bytes;
	char mem[];
};

static void run_deferred(void *arg)
{
	struct deferred *d = arg;
	if (((struct fuse_in_header *)d->mem)->opcode == FS_FUSE_STATX) {
		fs_serve_statx(channel_fs, fuse_session_fd(channel_fs->session), d->mem, d->bytes);
		free(d);
		return;
	}
	take_request((struct fuse_in_header *)d->mem, d->bytes);
	struct fuse_buf buf = {.size = d->bytes, .mem = d->mem};
	fuse_session_process_buf(channel_fs->session, &buf);
	request_drops_privs = request_is_tmpfile = false;
	free(d);
}

/*
 * Large write payloads are read from /dev/fuse straight into a datapath
 * buffer, the worker's spare, which the write then keeps (write_owned): a
 * flood's bytes are copied once, by the kernel, not again by the worker
 * into a buffer that can wait in a queue. The request's head goes to
 * libfuse's buffer as usual; anything else that spills into the spare is
 * copied back behind it. A worker keeps a spare while it reads large
 * writes and gives it back once IDLE_RELEASE_NS passed without one, so
 * workers that serve only other requests hold no payload memory.
 *
 * A worker waiting in read for the next request keeps what it holds, and
 * after a flood every worker libfuse started waits: their spares, and
 * libfuse's buffers that large payloads were read into, would stay
 * resident until requests came again (64 workers: 64-128 MiB). So a worker
 * that is about to wait holding more than BUF_KEPT_BYTES arms a one-shot
 * timer of IDLE_RELEASE_NS on its own thread; a read still waiting when it
 * fires is interrupted (a no-op handler without SA_RESTART), and the
 * worker gives its spare back, drops its buffer's pages (MADV_DONTNEED)
 * and waits again holding nothing. The timer is disarmed right after the
 * read returns, so its signal can only interrupt that read: one that fires
 * as the read returns is delivered on the disarm's return. Workers that
 * hold nothing (small requests) arm nothing and pay nothing. A busy worker
 * never waits a whole IDLE_RELEASE_NS: the kernel wakes the worker that
 * has waited longest, so a trickle of small requests keeps every worker
 * reading now and then. So a worker also gives back between requests
 * what it has not needed for IDLE_RELEASE_NS: its spare a second after
 * its last large write, its buffer's pages a second after the last
 * request that filled them. Kept, the workers' spares stayed resident
 * under any small load after a flood, and the timer's two system calls
 * on each read cost a depth-1 reader about a tenth of the daemon's CPU
 * per request.
 */
#define PAYLOAD_HEAD_BYTES (sizeof(struct fuse_in_header) + sizeof(struct fuse_write_in))
#define HANDOVER_MIN_BYTES (128u << 10) /* smaller payloads are cheaper copied than kept in a spare */
#define BUF_KEPT_BYTES (64u << 10)      /* of libfuse's buffer, kept resident while waiting */
#define IDLE_RELEASE_NS 1000000000l

static _Thread_local void *spare;
static _Thread_local bool spare_wanted;
static _Thread_local uint64_t last_large_write_ns;
static _Thread_local uint64_t last_full_buf_ns; /* a request filled libfuse's buffer past BUF_KEPT_BYTES */
static _Thread_local void *payload;     /* the current write's, until fs_channel_take_payload */
static _Thread_local size_t payload_bytes;
static _Thread_local size_t buf_touched_bytes; /* of libfuse's buffer, since last dropped */
static _Thread_local int pipe_fds[2] = {-1, -1}; /* read end, write end; see splice_request */
static _Thread_local bool splice_wanted;
static _Thread_local size_t piped_bytes; /* the current write's payload in the pipe, until fs_channel_take_piped */
static _Thread_local bool pipe_maybe_full; /* a payload was left there: what its write did not take is drained */
static atomic_bool splice_refused;      /* the device cannot splice: read as before */
static _Thread_local timer_t idle_timer;
static _Thread_local bool idle_timer_made;
static pthread_key_t worker_key;        /* gives a worker's buffers and timer back when it exits */
static pthread_once_t worker_key_once = PTHREAD_ONCE_INIT;

/*
 * The pipes requests are spliced into (splice_request), made at start. One
 * must take any request whole: the kernel fails a splice that the pipe
 * cannot take whole only after it took the request off its queue, and that
 * request would be lost. A request of the largest max_write comes in a
 * page-sized piece per page, one more for a payload that does not start on
 * a page and one for the head: more than fs.pipe-max-size (1 MiB), which
 * only CAP_SYS_RESOURCE may exceed, and the daemon gives that up at start
 * (daemon.c). So they are made before, and a worker takes one while it
 * splices and gives it back. Without one a worker reads as before. A
 * spliced payload saves its copy only where the worker writes it itself
 * (solo, or held: at most max_held_writes at once); a queued one is read
 * out of the pipe into an engine buffer. So PIPES_MAX is that many, and
 * when descriptors run out they are the first given back, for good
 * (fs_channel_give_up_pipes).
 */
#define PIPES_MAX 16
static pthread_mutex_t pipes_lock = PTHREAD_MUTEX_INITIALIZER;
static int pipes_free[PIPES_MAX][2];
static unsigned pipes_free_count;
static bool pipes_given_up;

unsigned fs_channel_make_pipes(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t want = (FS_READ_MAX_BYTES / page + 3) * page;
	pthread_mutex_lock(&pipes_lock);
	while (pipes_free_count < PIPES_MAX) {
		int p[2];
		if (pipe2(p, O_CLOEXEC) != 0)
			break;
		int got = fcntl(p[1], F_SETPIPE_SZ, (int)want);
		if (got < 0 || (size_t)got < want) {
			(void)close(p[0]);
			(void)close(p[1]);
			break;
		}
		memcpy(pipes_free[pipes_free_count++], p, sizeof(p));
	}
	unsigned made = pipes_free_count;
	pthread_mutex_unlock(&pipes_lock);
	return made;
}

/* This worker's pipe, broken: closed, not given back. */
static void pipe_discard(void)
{
	if (pipe_fds[0] >= 0) {
		(void)close(pipe_fds[0]);
		(void)close(pipe_fds[1]);
	}
	pipe_fds[0] = pipe_fds[1] = -1;
	piped_bytes = 0;
	pipe_maybe_full = false;
}

/* This worker's pipe back to the others; only an empty one goes back. */
static void pipe_close(void)
{
	int left = 0;
	if (pipe_fds[0] < 0)
		return;
	if (ioctl(pipe_fds[0], FIONREAD, &left) != 0 || left > 0) {
		pipe_discard();
		return;
	}
	pthread_mutex_lock(&pipes_lock);
	bool keep = !pipes_given_up && pipes_free_count < PIPES_MAX;
	if (keep)
		memcpy(pipes_free[pipes_free_count++], pipe_fds, sizeof(pipe_fds));
	pthread_mutex_unlock(&pipes_lock);
	if (!keep) {
		pipe_discard();
		return;
	}
	pipe_fds[0] = pipe_fds[1] = -1;
	piped_bytes = 0;
	pipe_maybe_full = false;
}

unsigned fs_channel_give_up_pipes(void)
{
	pthread_mutex_lock(&pipes_lock);
	pipes_given_up = true;
	unsigned closed = pipes_free_count;
	while (pipes_free_count) {
		pipes_free_count--;
		(void)close(pipes_free[pipes_free_count][0]);
		(void)close(pipes_free[pipes_free_count][1]);
	}
	pthread_mutex_unlock(&pipes_lock);
	return closed;
}

static void give_back_buffers(void *unused)
{
	(void)unused;
	if (idle_timer_made)
		(void)timer_delete(idle_timer);
	idle_timer_made = false;
	struct datapath *dp = channel_fs ? channel_fs->datapath : NULL;
	if (!dp)
		return;
	dp->payload_put(dp, spare);
	dp->payload_put(dp, payload);
	spare = payload = NULL;
	pipe_close();
}

static void make_worker_key(void)
{
	(void)pthread_key_create(&worker_key, give_back_buffers);
}

/* This worker's state is given back when it exits. */
static void worker_state_taken(void)
{
	(void)pthread_once(&worker_key_once, make_worker_key);
	(void)pthread_setspecific(worker_key, &worker_key); /* any non-NULL: the destructor runs */
}

static void on_idle_release(int sig)
{
	(void)sig; /* its only effect: the read it interrupts returns EINTR */
}

static int idle_signal(void)
{
	return SIGRTMIN;
}

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

/* Arms (or with 0, disarms) this worker's idle timer; false when it has none. */
static bool idle_timer_set(long ns)
{
	if (!idle_timer_made) {
		struct sigevent ev = {.sigev_notify = SIGEV_THREAD_ID, .sigev_signo = idle_signal()};
		ev.sigev_notify_thread_id = gettid();
		if (timer_create(CLOCK_MONOTONIC, &ev, &idle_timer) != 0)
			return false;
		idle_timer_made = true;
		worker_state_taken();
	}
	struct itimerspec when = {.it_value = {.tv_sec = ns / 1000000000l, .tv_nsec = ns % 1000000000l}};
	return timer_settime(idle_timer, 0, &when, NULL) == 0;
}

/* A pipe for this worker, if one is free. */
static bool pipe_open(void)
{
	pthread_mutex_lock(&pipes_lock);
	bool got = pipes_free_count > 0;
	if (got)
		memcpy(pipe_fds, pipes_free[--pipes_free_count], sizeof(pipe_fds));
	pthread_mutex_unlock(&pipes_lock);
	if (got)
		worker_state_taken();
	return got;
}

/* n bytes of the request in the pipe into buf; false: the pipe failed. */
static bool pipe_take(char *buf, size_t n)
{
	return fdio_read_full(pipe_fds[0], buf, n) == 0;
}

/* The worker stops keeping a spare until large writes come again. */
static void spare_drop(struct datapath *dp)
{
	dp->payload_put(dp, spare);
	spare = NULL;
	spare_wanted = false;
}

/* The pages of libfuse's buffer past BUF_KEPT_BYTES go back; nothing there may be in use. */
static void drop_buf_pages(char *buf, size_t buf_bytes)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t from = ((uintptr_t)buf + BUF_KEPT_BYTES + page - 1) & ~(page - 1);
	uintptr_t to = ((uintptr_t)buf + buf_bytes) & ~(page - 1);
	if (to > from)
		(void)madvise((void *)from, to - from, MADV_DONTNEED);
	buf_touched_bytes = 0;
}

/* The worker stops splicing until large buffered writes come again. */
static void splice_drop(void)
{
	pipe_close();
	splice_wanted = false;
}

/* Waited a whole IDLE_RELEASE_NS: give back the spare, the pipe and the buffer's pages. */
static void release_idle(struct datapath *dp, char *buf, size_t buf_bytes)
{
	spare_drop(dp);
	splice_drop();
	drop_buf_pages(buf, buf_bytes);
}

/* A request of n bytes, now in buf; large_write: its payload is one a spare
 * is kept for. What the worker holds goes back once it was not needed for
 * IDLE_RELEASE_NS: the spare a second after the last large write, the
 * buffer's pages past BUF_KEPT_BYTES a second after the last request that
 * filled them; and its reads go untimed again. */
static void request_read(struct datapath *dp, char *buf, size_t buf_bytes, size_t n,
			 bool large_write)
{
	uint64_t now_ns = 0;
	if (large_write) {
		last_large_write_ns = now_ns = clock_now_ns();
	} else if ((spare || pipe_fds[0] >= 0) &&
		   (now_ns = clock_now_ns()) - last_large_write_ns >= (uint64_t)IDLE_RELEASE_NS) {
		spare_drop(dp);
		splice_drop();
	}
	if (n > BUF_KEPT_BYTES) {
		last_full_buf_ns = now_ns ? now_ns : clock_now_ns();
		return;
	}
	if (buf_touched_bytes <= BUF_KEPT_BYTES)
		return;
	if ((now_ns ? now_ns : clock_now_ns()) - last_full_buf_ns < (uint64_t)IDLE_RELEASE_NS)
		return;
	drop_buf_pages(buf, buf_bytes);
	buf_touched_bytes = n;
}

const void *fs_channel_take_payload(size_t bytes)
{
	void *p = payload;
	if (!p || payload_bytes != bytes)
		return NULL;
	payload = NULL;
	return p;
}

int fs_channel_take_piped(size_t bytes)
{
	if (!piped_bytes || piped_bytes != bytes)
		return -1;
	piped_bytes = 0;
	return pipe_fds[0];
}

/* A write whose file was opened O_DIRECT: its payload must be aligned, so
 * it is read into the spare, not spliced (the kernel would copy the
 * caller's pages into the pipe anyway). */
static bool write_is_direct(const struct fuse_write_in *w)
{
	return ((const struct fs_file *)(uintptr_t)w->fh)->data.direct;
}

/* A large write's payload: it is kept where it was read, not copied. */
static bool is_large_write(const struct fuse_in_header *h, size_t n)
{
	return h->opcode == FUSE_WRITE && n >= PAYLOAD_HEAD_BYTES + HANDOVER_MIN_BYTES &&
	       ((const struct fuse_write_in *)(h + 1))->size == n - PAYLOAD_HEAD_BYTES;
}

/* What the next reads take a large write's payload into: a pipe for a
 * buffered one, the spare for a direct one. */
static void large_write_read(const struct fuse_in_header *h)
{
	bool direct = write_is_direct((const struct fuse_write_in *)(h + 1));
	splice_wanted = !direct && !atomic_load_explicit(&splice_refused, memory_order_relaxed);
	spare_wanted = !splice_wanted;
	if (!splice_wanted)
		pipe_close(); /* empty: what was spliced was read back */
}

/*
 * One request spliced from /dev/fuse into the worker's pipe. The kernel
 * moves a buffered write's payload there as references to the FUSE file's
 * page cache, so nobody copies it until the backing filesystem does, at the
 * write (splice_in_worker, engine.c): read(2) copied a 1 MiB payload into
 * the daemon first, about a third of the daemon's CPU for each buffered
 * write. The head is read into buf; a large buffered write's payload stays
 * in the pipe for the write to take (fs_channel_take_piped); anything else
 * is read in behind the head, as read(2) would have left it. 0 with
 * *retry: the request could not be taken out of the pipe and was answered
 * EIO; read the next.
 */
static ssize_t splice_request(int fd, char *buf, size_t buf_bytes, bool *retry)
{
	*retry = false;
	ssize_t n = splice(fd, NULL, pipe_fds[1], NULL, buf_bytes, 0);
	if (n <= 0)
		return n;
	size_t head = (size_t)n < PAYLOAD_HEAD_BYTES ? (size_t)n : PAYLOAD_HEAD_BYTES;
	const struct fuse_in_header *h = (const void *)buf;
	if (pipe_take(buf, head)) {
		if (is_large_write(h, (size_t)n) && !write_is_direct((const void *)(h + 1))) {
			piped_bytes = (size_t)n - head;
			pipe_maybe_full = true;
			return n;
		}
		if (pipe_take(buf + head, (size_t)n - head))
			return n;
	}
	/* Our own pipe failed us: the request is answered, never lost. */
	if (head >= sizeof(*h)) {
		struct fuse_out_header out = {.len = sizeof(out), .error = -EIO, .unique = h->unique};
		(void)write(fd, &out, sizeof(out));
	}
	fuse_log(FUSE_LOG_ERR, "fusesched: a request could not be read back from its pipe: %s\n",
		 strerror(errno));
	pipe_discard();
	splice_wanted = false;
	*retry = true;
	return 0;
}

/* A spare holds the most a FUSE_WRITE carries: the mount's max_write. */
static size_t spare_bytes(void)
{
	return channel_fs->opts.max_write_bytes ? channel_fs->opts.max_write_bytes : FS_READ_MAX_BYTES;
}

/* The spare takes the bytes libfuse's buffer would have held there. */
static ssize_t read_into_spare(int fd, char *buf, size_t buf_bytes)
{
	size_t spare_len = spare_bytes();
	struct iovec iov[3] = {
		{.iov_base = buf, .iov_len = PAYLOAD_HEAD_BYTES},
		{.iov_base = spare, .iov_len = spare_len},
		{.iov_base = buf + PAYLOAD_HEAD_BYTES + spare_len,
		 .iov_len = buf_bytes - PAYLOAD_HEAD_BYTES - spare_len},
	};
	return readv(fd, iov, 3);
}

/* read(2) of one request into buf, a large write's payload into the spare. */
static ssize_t read_request(struct datapath *dp, int fd, char *buf, size_t buf_bytes)
{
again:
	if (pipe_maybe_full) { /* a payload its write did not take whole (it failed, or never ran) */
		int left = 0;
		if (ioctl(pipe_fds[0], FIONREAD, &left) != 0 ||
		    (left > 0 && !pipe_take(buf, (size_t)left < buf_bytes ? (size_t)left : buf_bytes)))
			pipe_discard();
		piped_bytes = 0;
		pipe_maybe_full = false;
	}
	if (splice_wanted && pipe_fds[0] < 0 && !pipe_open())
		splice_wanted = false;
	if (payload) { /* read, but its write never ran (libfuse answered it) */
		if (!spare) {
			spare = payload;
		} else {
			dp->payload_put(dp, payload);
		}
		payload = NULL;
	}
	if (splice_wanted && spare)
		spare_drop(dp);
	else if (spare_wanted && !spare && dp->payload_get &&
		 buf_bytes >= PAYLOAD_HEAD_BYTES + spare_bytes()) {
		spare = dp->payload_get(dp, spare_bytes());
		worker_state_taken();
	}
	bool spliced = splice_wanted, retry = false;
	bool timed = (spare || buf_touched_bytes > BUF_KEPT_BYTES) && idle_timer_set(IDLE_RELEASE_NS);
	ssize_t n = spliced ? splice_request(fd, buf, buf_bytes, &retry)
		    : spare ? read_into_spare(fd, buf, buf_bytes) : read(fd, buf, buf_bytes);
	if (timed) {
		int read_errno = errno;
		(void)idle_timer_set(0);
		errno = read_errno;
	}
	if (n < 0 && errno == EINTR && timed) {
		release_idle(dp, buf, buf_bytes);
		goto again; /* holding nothing: an untimed read */
	}
	if (retry)
		goto again;
	if (spliced && n < 0 && errno == EINVAL) { /* this device cannot splice */
		atomic_store(&splice_refused, true);
		splice_drop();
		spare_wanted = true;
		goto again;
	}
	if (!spare) {
		const struct fuse_in_header *h = (const void *)buf;
		bool piped = spliced && pipe_maybe_full;
		size_t in_buf = piped ? PAYLOAD_HEAD_BYTES : n > 0 ? (size_t)n : 0;
		if (in_buf > buf_touched_bytes)
			buf_touched_bytes = in_buf;
		bool large_write = dp->payload_get && n > 0 && is_large_write(h, (size_t)n);
		if (large_write)
			large_write_read(h); /* from the next read on */
		if (n > 0)
			request_read(dp, buf, buf_bytes, in_buf, large_write);
		return n;
	}
	if (n <= (ssize_t)PAYLOAD_HEAD_BYTES) {
		if (n > 0)
			request_read(dp, buf, buf_bytes, (size_t)n, false);
		return n;
	}
	size_t spilled = (size_t)n - PAYLOAD_HEAD_BYTES;
	const struct fuse_in_header *h = (const void *)buf;
	const struct fuse_write_in *w = (const void *)(h + 1);
	if (h->opcode == FUSE_WRITE && w->size == spilled && spilled >= HANDOVER_MIN_BYTES) {
		payload = spare;
		payload_bytes = spilled;
		spare = NULL;
		large_write_read(h);
		request_read(dp, buf, buf_bytes, PAYLOAD_HEAD_BYTES, true);
		return n;
	}
	memcpy(buf + PAYLOAD_HEAD_BYTES, spare, spilled < spare_bytes() ? spilled : spare_bytes());
	if ((size_t)n > buf_touched_bytes)
		buf_touched_bytes = (size_t)n;
	request_read(dp, buf, buf_bytes, (size_t)n, false);
	return n;
}

/* The metadata request this worker runs at once, accounted when it reads again. */
static _Thread_local struct datapath_meta_ticket running;
static _Thread_local bool running_valid;

/*
 * A metadata request runs at once in the worker that read it when the
 * datapath says so (meta_now: its tenant alone, or light); otherwise its
 * bytes are copied and handed
 * to the datapath, which runs it at its tenant's turn, and the worker reads
 * on: the request waits as a request, not as a blocked worker, so another
 * tenant's requests are always read and queued.
 */
static ssize_t channel_read(int fd, void *buf, size_t buf_bytes, void *userdata)
{
	(void)userdata;
	struct datapath *dp = channel_fs->datapath;
	if (running_valid) {
		running_valid = false;
		dp->meta_ran(dp, &running);
	}
	fs_prune_nodes(channel_fs, false); /* this worker's request is answered */
	for (;;) {
		ssize_t n = read_request(dp, fd, buf, buf_bytes);
		request_drops_privs = request_is_tmpfile = false;
		if (n < (ssize_t)sizeof(struct fuse_in_header))
			return n;
		struct fuse_in_header *h = buf;
		root_alias_in(h, (size_t)n);
		if (h->opcode == FUSE_INIT &&
		    (size_t)n >= sizeof(*h) + offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) {
			const struct fuse_init_in *in = (const void *)(h + 1);
			atomic_store(&kernel_init_flags, in->flags);
			atomic_store(&init_unique, h->unique);
			return n;
		}
		/*
		 * No operation here checks fuse_req_interrupted: every request is
		 * answered whatever its caller does, and an interrupt needs no
		 * answer. libfuse 3.14 keeps one whose request it cannot find (a
		 * metadata request taken aside, or one already answered) on a
		 * list it never frees, and answers it EAGAIN only when another
		 * request comes: at exit it leaked (LeakSanitizer, after a
		 * metadata storm's processes were killed). It is read and dropped.
		 */
		if (h->opcode == FUSE_INTERRUPT)
			continue;
		bool metadata = dp->meta_now && is_metadata(h->opcode);
		if (!metadata || dp->meta_now(dp, (pid_t)h->pid, &running)) {
			if (h->opcode == FS_FUSE_STATX) { /* libfuse cannot: served here, and read on */
				fs_serve_statx(channel_fs, fd, h, (size_t)n);
				if (metadata)
					dp->meta_ran(dp, &running);
				continue;
			}
			running_valid = metadata;
			take_request(h, (size_t)n);
			return n;
		}
		struct deferred *d = malloc(sizeof(*d) + (size_t)n);
		if (!d) {
			take_request(h, (size_t)n);
			return n; /* no memory to wait in: it runs now */
		}
		d->bytes = (size_t)n;
		memcpy(d->mem, buf, (size_t)n);
		struct datapath_req r = {.op = DATAPATH_META, .pid = (pid_t)h->pid, .uid = h->uid,
					 .meta_run = run_deferred, .meta_arg = d};
		dp->submit(dp, &r);
	}
}

/*
 * A notification about the root names the node the kernel walks. The
 * node is the first field of each kind that names a directory or an inode
 * (libfuse sends the header, then that argument).
 */
#define NOTIFY_ARG_MAX_BYTES 32u /* the largest of the three below (fuse_notify_delete_out: 24) */

static void root_alias_out(struct iovec *iov, int count, char copy[NOTIFY_ARG_MAX_BYTES])
{
	const struct fuse_out_header *h = iov[0].iov_base;
	uint64_t node;
	if (h->unique != 0 || count < 2 || iov[1].iov_len < sizeof(node) ||
	    iov[1].iov_len > NOTIFY_ARG_MAX_BYTES ||
	    !atomic_load_explicit(&channel_fs->root_alias_used, memory_order_relaxed))
		return;
	switch (h->error) {
	case FUSE_NOTIFY_INVAL_INODE: /* ino */
	case FUSE_NOTIFY_INVAL_ENTRY: /* parent */
	case FUSE_NOTIFY_DELETE:      /* parent */
		memcpy(&node, iov[1].iov_base, sizeof(node));
		if (node != FUSE_ROOT_ID)
			break;
		/* A copy, so the caller's argument is left as it was. */
		memcpy(copy, iov[1].iov_base, iov[1].iov_len);
		node = FS_ROOT_ALIAS_ID;
		memcpy(copy, &node, sizeof(node));
		iov[1].iov_base = copy;
		break;
	default:
		break;
	}
}

static ssize_t channel_writev(int fd, struct iovec *iov, int count, void *userdata)
{
	(void)userdata;
	const struct fuse_out_header *h = iov[0].iov_base;
	uint64_t init = atomic_load_explicit(&init_unique, memory_order_relaxed);
	struct fuse_init_out amended;
	/* libfuse replies to INIT with the header and one fuse_init_out. */
	if (init && h->unique == init && atomic_exchange(&init_unique, 0) == init && h->error == 0 &&
	    count == 2 && iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t) &&
	    iov[1].iov_len <= sizeof(amended)) {
		memcpy(&amended, iov[1].iov_base, iov[1].iov_len);
		amended.flags |= atomic_load(&kernel_init_flags) & (FUSE_HANDLE_KILLPRIV_V2 | FUSE_PARALLEL_DIROPS);
		/*
		 * libfuse derives max_pages from max_write, and max_pages bounds
		 * reads too (readahead, direct reads): a smaller max_write must
		 * not shrink them (fs.h).
		 */
		if ((amended.flags & FUSE_MAX_PAGES) &&
		    iov[1].iov_len >= offsetof(struct fuse_init_out, max_pages) + sizeof(amended.max_pages))
			amended.max_pages = (uint16_t)(FS_READ_MAX_BYTES / (size_t)sysconf(_SC_PAGESIZE));
		iov[1].iov_base = &amended;
	}
	char notify_arg[NOTIFY_ARG_MAX_BYTES];
	root_alias_out(iov, count, notify_arg);
	return writev(fd, iov, count);
}

int fs_attach_channel(struct fs *fs, struct fuse_session *se)
{
	fs->session = se;
	channel_fs = fs;
	static const struct fuse_custom_io io = {.read = channel_read, .writev = channel_writev};
	struct sigaction on_idle = {.sa_handler = on_idle_release}; /* no SA_RESTART: the read ends */
	sigemptyset(&on_idle.sa_mask);
	if (sigaction(idle_signal(), &on_idle, NULL) != 0)
		return -1;
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
