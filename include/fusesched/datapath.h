/*
 * The data path: the one boundary every scheduled request crosses.
 *
 * fs/ turns READ, WRITE, FSYNC, FDATASYNC, FALLOCATE and COPY_FILE_RANGE into
 * a struct datapath_req and hands it to a datapath. The datapath owns the
 * request from then on and replies to FUSE exactly once. The io_uring engine
 * (engine.h) is the datapath: it queues each request per tenant, lets the
 * scheduler choose, and replies from completions.
 *
 * Every other request (lookup, create, unlink, readdir, setattr, xattrs,
 * ...) is metadata. fs/'s channel asks meta_now whether one may run at
 * once in the worker that read it; if not, it hands it over as
 * DATAPATH_META, a request the datapath queues and schedules like any
 * other and runs on one of its threads at its turn (run answers FUSE).
 */
#ifndef FUSESCHED_DATAPATH_H
#define FUSESCHED_DATAPATH_H

#define FUSE_USE_VERSION 312
#include <fuse_lowlevel.h>

#include "fusesched/creds.h"
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

enum datapath_op {
	DATAPATH_READ,
	DATAPATH_WRITE,
	DATAPATH_FSYNC,
	DATAPATH_FDATASYNC,
	DATAPATH_FALLOCATE,
	DATAPATH_COPY_RANGE,
	DATAPATH_META,             /* a metadata request run at its turn: meta_run answers it */
};

/* An open file of the backing directory (fuse_file_info.fh points at one). */
struct datapath_file {
	int fd;
	bool direct;               /* O_DIRECT backing: buffers must be aligned */
	bool sync_writes;          /* O_SYNC/O_DSYNC: each write is waited on like a journal's */
	pid_t opener_pid;          /* who opened it */
	struct creds opener;       /* with groups: its data is written as the opener (creds.h) */
	uint32_t opener_tenant;    /* set by the datapath: pid-0 requests are charged here */
	uint16_t ring_personality; /* set by the datapath: its io_uring id for opener, 0: none */
	/* set by the datapath at the first write that keeps setuid/setgid
	 * (write_keeps_privs): the id for opener with CAP_FSETID kept, 0: none yet */
	_Atomic uint16_t ring_personality_keeping_privs;
	/* an O_DIRECT file's twin without O_DIRECT, for the kernel's own writes
	 * (write_buffered), opened at the first; -1: none */
	_Atomic int buffered_fd;
	bool issue_async;          /* set by the datapath: never issued inline (engine.c) */
};

struct datapath_req {
	fuse_req_t req;
	enum datapath_op op;
	struct datapath_file *file;
	uint64_t offset_bytes;
	uint64_t size_bytes;
	/*
	 * WRITE: the payload, valid only during submit (a deferring path
	 * copies it), unless write_owned: then it is a buffer from the
	 * datapath's payload_get, and the datapath keeps it and gives it back.
	 */
	const void *write_data;
	bool write_owned;
	/*
	 * WRITE to a file not opened O_DIRECT: or the payload waits in the
	 * calling worker's pipe (write_data NULL), spliced there from
	 * /dev/fuse: the datapath takes it (splices it to the file, or reads
	 * it into a buffer) before submit returns, or, for a write the
	 * worker holds, before it answers.
	 */
	bool write_piped;
	int write_pipe_fd;
	/*
	 * WRITE: RWF_DSYNC or RWF_SYNC where this write must be on the device
	 * before it is answered though its file was not opened so: the
	 * caller's pwritev2 or io_uring flag, which the kernel passes in the
	 * write's flags as O_DSYNC or O_SYNC (for a direct_io file nothing
	 * else makes it durable: the kernel sends no fsync after it). 0: none.
	 */
	int write_rwf;
	/*
	 * WRITE the kernel did not flag to drop setuid and setgid
	 * (FUSE_WRITE_KILL_SUIDGID): a mapping's stores written back, or a
	 * writer holding CAP_FSETID. Done as a non-root opener, whom the
	 * backing filesystem would have drop them, it keeps CAP_FSETID.
	 */
	bool write_keeps_privs;
	/*
	 * WRITE of an O_DIRECT file made by the kernel from its page cache
	 * (writeback: no caller), which ends where the file does, not on a
	 * block boundary: it goes to file->buffered_fd, as buffered I/O.
	 */
	bool write_buffered;
	int fallocate_mode;
	/* COPY_RANGE: destination and flags. */
	struct datapath_file *file_out;
	uint64_t offset_out_bytes;
	unsigned int copy_flags;
	/* Caller, for attribution; pid 0 means writeback, mmap or not visible. */
	pid_t pid;
	uid_t uid;                 /* the caller's, as FUSE gives it (the executors' bound per user) */
	/* META: runs the request and answers it, on a datapath thread. */
	void (*meta_run)(void *arg);
	void *meta_arg;
};

/* A metadata request that runs at once in its worker: whose, since when. */
struct datapath_meta_ticket {
	uint32_t tenant;
	uint64_t start_ns;
};

/*
 * The answer to one data request: err (0 or a positive errno) or, for a
 * transfer, the bytes moved (a read's are at data). A datapath calls its
 * reply exactly once per request, from any of its threads.
 */
typedef void datapath_reply_fn(fuse_req_t req, enum datapath_op op, int err, const void *data,
			       uint64_t bytes);

/* The answer to FUSE (fuse_reply_buf, fuse_reply_write, fuse_reply_err). */
void datapath_reply_fuse(fuse_req_t req, enum datapath_op op, int err, const void *data,
			 uint64_t bytes);

struct datapath {
	/* How it answers: datapath_reply_fuse, or a test's recorder. */
	datapath_reply_fn *reply;
	/* Takes the request; answers r->req exactly once (reply), now or later. */
	void (*submit)(struct datapath *self, const struct datapath_req *r);
	/*
	 * A file was opened (before the reply; 0 or -errno, and then the open
	 * fails) or released (after its last request).
	 */
	int (*file_opened)(struct datapath *self, struct datapath_file *f);
	void (*file_released)(struct datapath *self, struct datapath_file *f);
	/*
	 * A directory was opened by pid as uid (0 or -errno, and then the open
	 * fails; *tenant is what to give back at release) or released: it
	 * holds a descriptor as a file does, and counts as one. NULL: not counted.
	 */
	int (*dir_opened)(struct datapath *self, pid_t pid, uid_t uid, uint32_t *tenant);
	void (*dir_released)(struct datapath *self, uint32_t tenant, uid_t uid);
	/*
	 * May a metadata request of pid run now in the calling worker? True
	 * while nobody else has requests to be fair to (fills *ticket; call
	 * meta_ran once it ran); false: submit it as DATAPATH_META. NULL: always.
	 */
	bool (*meta_now)(struct datapath *self, pid_t pid, struct datapath_meta_ticket *ticket);
	void (*meta_ran)(struct datapath *self, const struct datapath_meta_ticket *ticket);
	/*
	 * A page-aligned buffer of bytes for a write payload to be read from
	 * /dev/fuse straight into (NULL when out of memory), handed back with
	 * a submit as write_owned or with payload_put. NULL: the channel reads
	 * payloads into libfuse's buffer and the datapath copies what it keeps.
	 */
	void *(*payload_get)(struct datapath *self, size_t bytes);
	void (*payload_put)(struct datapath *self, void *buf);
};

#endif
