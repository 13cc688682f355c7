/*
 * Synchronous datapath: each request served in the FUSE worker thread that
 * received it. The baseline and fallback for the io_uring engine.
 */
#include "fusesched/datapath.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DIRECT_ALIGN_BYTES 4096u

struct datapath_sync {
	struct datapath base;
};

/* One aligned buffer per worker thread, grown on demand, freed at thread exit. */
static __thread void *tls_buf;
static __thread size_t tls_buf_bytes;
static pthread_key_t tls_buf_key;
static pthread_once_t tls_buf_once = PTHREAD_ONCE_INIT;

static void tls_buf_release(void *p)
{
	free(p);
}

static void tls_buf_key_create(void)
{
	pthread_key_create(&tls_buf_key, tls_buf_release);
}

static void *thread_buffer(size_t bytes)
{
	if (bytes <= tls_buf_bytes)
		return tls_buf;
	pthread_once(&tls_buf_once, tls_buf_key_create);
	size_t want = (bytes + DIRECT_ALIGN_BYTES - 1) & ~(size_t)(DIRECT_ALIGN_BYTES - 1);
	void *p = NULL;
	if (posix_memalign(&p, DIRECT_ALIGN_BYTES, want))
		return NULL;
	free(tls_buf);
	tls_buf = p;
	tls_buf_bytes = want;
	pthread_setspecific(tls_buf_key, p);
	return p;
}

static void serve_read(const struct datapath_req *r)
{
	char *buf = thread_buffer(r->size_bytes ? r->size_bytes : 1);
	if (!buf) {
		fuse_reply_err(r->req, ENOMEM);
		return;
	}
	size_t done = 0;
	while (done < r->size_bytes) {
		ssize_t n = pread(r->file->fd, buf + done, r->size_bytes - done,
				  (off_t)(r->offset_bytes + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			if (done)
				break; /* report what was read, as read(2) does */
			fuse_reply_err(r->req, errno);
			return;
		}
		done += (size_t)n;
		/* EOF, or a short direct read: a retry would be unaligned. */
		if (n == 0 || r->file->direct)
			break;
	}
	fuse_reply_buf(r->req, buf, done);
}

static void serve_write(const struct datapath_req *r)
{
	const char *src = r->write_data;
	if (r->file->direct && ((uintptr_t)src % DIRECT_ALIGN_BYTES)) {
		char *buf = thread_buffer(r->size_bytes ? r->size_bytes : 1);
		if (!buf) {
			fuse_reply_err(r->req, ENOMEM);
			return;
		}
		memcpy(buf, src, r->size_bytes);
		src = buf;
	}
	size_t done = 0;
	while (done < r->size_bytes) {
		ssize_t n = pwrite(r->file->fd, src + done, r->size_bytes - done,
				   (off_t)(r->offset_bytes + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			if (done)
				break; /* acknowledge exactly what reached the backing file */
			fuse_reply_err(r->req, n < 0 ? errno : EIO);
			return;
		}
		done += (size_t)n;
	}
	fuse_reply_write(r->req, done);
}

static void serve_copy_range(const struct datapath_req *r)
{
	loff_t in = (loff_t)r->offset_bytes, out = (loff_t)r->offset_out_bytes;
	ssize_t n = copy_file_range(r->file->fd, &in, r->file_out->fd, &out,
				    r->size_bytes, r->copy_flags);
	if (n < 0)
		fuse_reply_err(r->req, errno);
	else
		fuse_reply_write(r->req, (size_t)n);
}

static void datapath_sync_submit(struct datapath *self, const struct datapath_req *r)
{
	(void)self;
	int rc = 0;
	switch (r->op) {
	case DATAPATH_READ:
		serve_read(r);
		return;
	case DATAPATH_WRITE:
		serve_write(r);
		return;
	case DATAPATH_COPY_RANGE:
		serve_copy_range(r);
		return;
	case DATAPATH_FSYNC:
		rc = fsync(r->file->fd);
		break;
	case DATAPATH_FDATASYNC:
		rc = fdatasync(r->file->fd);
		break;
	case DATAPATH_FALLOCATE:
		rc = fallocate(r->file->fd, r->fallocate_mode, (off_t)r->offset_bytes,
			       (off_t)r->size_bytes);
		break;
	}
	fuse_reply_err(r->req, rc < 0 ? errno : 0);
}

static void datapath_sync_destroy(struct datapath *self)
{
	free(self);
}

struct datapath *datapath_sync_new(void)
{
	struct datapath_sync *d = calloc(1, sizeof(*d));
	if (!d)
		return NULL;
	d->base.submit = datapath_sync_submit;
	d->base.destroy = datapath_sync_destroy;
	return &d->base;
}
