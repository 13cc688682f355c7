/*
 * The /dev/fuse channel: libfuse's reads and replies pass through here. It
 * is where every request enters, so it is where a metadata request that
 * must wait for its turn is taken aside (see channel_read), and where the
 * daemon takes over dropping setuid/setgid from the kernel
 * (FUSE_HANDLE_KILLPRIV_V2), which libfuse 3.14 cannot negotiate.
 *
 * Without it the kernel asks the daemon for security.capability before
 * every write (a full round trip through a worker), because a FUSE
 * filesystem with xattrs never marks its inodes as having none. With it the
 * kernel asks once per inode and instead flags each write, truncation and
 * O_TRUNC open whose caller lacks CAP_FSETID; the operation then drops the
 * bits itself (fs_request_drops_privs). Capabilities need no help: the
 * backing filesystem removes security.capability on our write.
 */
#include "fs_internal.h"

#include <errno.h>
#include <linux/fuse.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The worker that read a request serves it (libfuse's loop): the flag is its own. */
static _Thread_local bool request_drops_privs;
static _Atomic uint64_t init_unique;      /* the INIT request whose reply is to amend */
static atomic_bool kernel_offers_killpriv_v2;

bool fs_request_drops_privs(void)
{
	return request_drops_privs;
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
	case FUSE_INTERRUPT:
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

/* A metadata request taken aside: its bytes, run later by the datapath. */
struct deferred {
	size_t bytes;
	char mem[];
};

static void run_deferred(void *arg)
{
	struct deferred *d = arg;
	request_drops_privs = drops_privs((const struct fuse_in_header *)d->mem, d->bytes);
	struct fuse_buf buf = {.size = d->bytes, .mem = d->mem};
	fuse_session_process_buf(channel_fs->session, &buf);
	request_drops_privs = false;
	free(d);
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
	for (;;) {
		ssize_t n = read(fd, buf, buf_bytes);
		request_drops_privs = false;
		if (n < (ssize_t)sizeof(struct fuse_in_header))
			return n;
		const struct fuse_in_header *h = buf;
		if (h->opcode == FUSE_INIT &&
		    (size_t)n >= sizeof(*h) + offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) {
			const struct fuse_init_in *in = (const void *)(h + 1);
			atomic_store(&kernel_offers_killpriv_v2, (in->flags & FUSE_HANDLE_KILLPRIV_V2) != 0);
			atomic_store(&init_unique, h->unique);
			return n;
		}
		bool metadata = dp->meta_now && is_metadata(h->opcode);
		if (!metadata || dp->meta_now(dp, (pid_t)h->pid, &running)) {
			running_valid = metadata;
			request_drops_privs = drops_privs(h, (size_t)n);
			return n;
		}
		struct deferred *d = malloc(sizeof(*d) + (size_t)n);
		if (!d) {
			request_drops_privs = drops_privs(h, (size_t)n);
			return n; /* no memory to wait in: it runs now */
		}
		d->bytes = (size_t)n;
		memcpy(d->mem, buf, (size_t)n);
		struct datapath_req r = {.op = DATAPATH_META, .pid = (pid_t)h->pid,
					 .meta_run = run_deferred, .meta_arg = d};
		dp->submit(dp, &r);
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
	    iov[1].iov_len <= sizeof(amended) && atomic_load(&kernel_offers_killpriv_v2)) {
		memcpy(&amended, iov[1].iov_base, iov[1].iov_len);
		amended.flags |= FUSE_HANDLE_KILLPRIV_V2;
		iov[1].iov_base = &amended;
	}
	return writev(fd, iov, count);
}

int fs_attach_channel(struct fs *fs, struct fuse_session *se)
{
	fs->session = se;
	channel_fs = fs;
	static const struct fuse_custom_io io = {.read = channel_read, .writev = channel_writev};
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
