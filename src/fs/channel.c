/*
 * The /dev/fuse channel: libfuse's reads and replies pass through here so
 * the daemon can take over dropping setuid/setgid from the kernel
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

static ssize_t channel_read(int fd, void *buf, size_t buf_bytes, void *userdata)
{
	(void)userdata;
	ssize_t n = read(fd, buf, buf_bytes);
	request_drops_privs = false;
	if (n < (ssize_t)sizeof(struct fuse_in_header))
		return n;
	const struct fuse_in_header *h = buf;
	if (h->opcode == FUSE_INIT && (size_t)n >= sizeof(*h) + offsetof(struct fuse_init_in, flags) +
							   sizeof(uint32_t)) {
		const struct fuse_init_in *in = (const void *)(h + 1);
		atomic_store(&kernel_offers_killpriv_v2, (in->flags & FUSE_HANDLE_KILLPRIV_V2) != 0);
		atomic_store(&init_unique, h->unique);
	} else {
		request_drops_privs = drops_privs(h, (size_t)n);
	}
	return n;
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
	static const struct fuse_custom_io io = {.read = channel_read, .writev = channel_writev};
	return fuse_session_custom_io(se, &io, fuse_session_fd(se));
}
