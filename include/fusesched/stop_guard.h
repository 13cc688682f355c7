/*
 * A stop that cannot finish. A stop (SIGTERM, SIGINT, an unmount) completes
 * every request the daemon has taken, so that every acknowledged write is on
 * the backing directory; a request at a backing store that hangs (a hard NFS
 * mount whose server is gone, a FUSE backing stuck in a lock) never
 * completes, and the stop waited for it, the volume unusable for every
 * tenant, until the store answered or the process was killed.
 *
 * The guard watches the stop: once no request has finished for the stop
 * timeout, it aborts the FUSE connection (every request not yet answered
 * fails with ECONNABORTED to its caller), detaches the mount and ends the
 * process with status 1. Only requests never answered are given up: an
 * answer is sent only once its request completed, so nothing acknowledged
 * is lost. A stop that keeps finishing requests (a long queue draining) is
 * never cut short.
 */
#ifndef FUSESCHED_STOP_GUARD_H
#define FUSESCHED_STOP_GUARD_H

#include <stdint.h>

struct ctl_server;
struct engine;
struct fuse_session;
struct kernel_queue;
struct mountroot;

struct stop_guard_params {
	struct fuse_session *se;		/* its exit flag is the stop */
	const struct engine *engine;		/* requests finished: the stop's progress */
	const struct kernel_queue *connection;	/* its fusectl directory (dir_fd -1: none, the
						 * connection ends as the device closes) */
	const struct mountroot *root;		/* where the volume is mounted */
	struct ctl_server *ctl;			/* its socket's name is removed (NULL: none) */
	uint64_t timeout_ns;			/* 0: no guard, a stop waits as long as it takes */
};

struct stop_guard;

/* Starts the guard's thread (none with timeout_ns 0: *out NULL). 0 or -errno. */
int stop_guard_start(const struct stop_guard_params *p, struct stop_guard **out);

/* The stop finished (or never began): ends the thread and frees the guard. NULL is fine. */
void stop_guard_end(struct stop_guard *g);

#endif
