/* A stop that cannot finish, ended: abort the connection past a timeout without progress (stop_guard.h). */
#include "fusesched/stop_guard.h"

#include "fusesched/clock.h"
#include "fusesched/ctl.h"
#include "fusesched/datapath.h" /* FUSE_USE_VERSION, before libfuse */
#include "fusesched/engine.h"
#include "fusesched/kernel_queue.h"
#include "fusesched/mountroot.h"

#include <errno.h>
#include <fuse_lowlevel.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <sys/mount.h>
#include <unistd.h>

/* How often a running daemon looks for a stop: it costs a wakeup each time. */
#define STOP_LOOK_NS (1000u * 1000 * 1000)

struct stop_guard {
	struct stop_guard_params p;
	int end_fd; /* eventfd: the stop finished */
	pthread_t thread;
};

/* Waits up to ns; true once the stop finished. */
static bool ended_within(struct stop_guard *g, uint64_t ns)
{
	struct pollfd pfd = {.fd = g->end_fd, .events = POLLIN};
	int ms = (int)((ns + 999999) / 1000000);
	return poll(&pfd, 1, ms) > 0;
}

static void give_up(struct stop_guard *g, uint64_t waited_ns)
{
	fuse_log(FUSE_LOG_ERR,
		 "fusesched: stopping: no request has finished for %.1f s (a backing store hangs); "
		 "the requests not answered are given up, their callers get ECONNABORTED\n",
		 (double)waited_ns / 1e9);
	/* The connection first: its callers are let go, and the mount is no longer busy. */
	if (g->p.connection->dir_fd < 0 || kernel_queue_abort(g->p.connection) != 0)
		fuse_log(FUSE_LOG_ERR, "fusesched: the connection cannot be aborted through fusectl; "
			 "it ends as the daemon exits\n");
	const struct mountroot *m = g->p.root;
	const char *at = m->published || !m->stage[0] ? m->mountpoint : m->stage;
	if (umount2(at, MNT_DETACH) != 0)
		fuse_log(FUSE_LOG_ERR, "fusesched: '%s' is left mounted (fusermount3 -u removes it)\n",
			 at);
	if (g->p.ctl)
		ctl_server_unlink_socket(g->p.ctl);
	/* The device's last reference gone, the kernel ends the connection too
	 * (without fusectl); threads still in the hung store hold none. */
	close(fuse_session_fd(g->p.se));
	_exit(1);
}

static void *guard_main(void *arg)
{
	struct stop_guard *g = arg;
	while (!fuse_session_exited(g->p.se))
		if (ended_within(g, STOP_LOOK_NS))
			return NULL;
	uint64_t look_ns = g->p.timeout_ns / 4 < STOP_LOOK_NS ? g->p.timeout_ns / 4 : STOP_LOOK_NS;
	uint64_t finished = engine_completed(g->p.engine), since_ns = clock_now_ns();
	while (!ended_within(g, look_ns ? look_ns : 1)) {
		uint64_t now_ns = clock_now_ns(), now_finished = engine_completed(g->p.engine);
		if (now_finished != finished) {
			finished = now_finished;
			since_ns = now_ns;
		} else if (now_ns - since_ns >= g->p.timeout_ns) {
			give_up(g, now_ns - since_ns);
		}
	}
	return NULL;
}

int stop_guard_start(const struct stop_guard_params *p, struct stop_guard **out)
{
	*out = NULL;
	if (!p->timeout_ns)
		return 0;
	struct stop_guard *g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	g->p = *p;
	g->end_fd = eventfd(0, EFD_CLOEXEC);
	if (g->end_fd < 0) {
		int r = -errno;
		free(g);
		return r;
	}
	int r = pthread_create(&g->thread, NULL, guard_main, g);
	if (r) {
		close(g->end_fd);
		free(g);
		return -r;
	}
	pthread_setname_np(g->thread, "fs-stop-guard");
	*out = g;
	return 0;
}

void stop_guard_end(struct stop_guard *g)
{
	if (!g)
		return;
	uint64_t one = 1;
	(void)!write(g->end_fd, &one, sizeof(one));
	pthread_join(g->thread, NULL);
	close(g->end_fd);
	free(g);
}
