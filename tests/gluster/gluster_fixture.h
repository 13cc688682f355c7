/*
 * A GlusterFS replicated volume over loopback, run by the test itself.
 *
 * gluster_start runs a glusterd of its own (a child of the caller, in the
 * foreground): its working directory (volumes, peers, its UUID), run
 * directory (pid files), logs and CLI socket are all in a fresh scratch
 * directory DIR, never /var/lib/glusterd, so it leaves the host's gluster
 * state alone. It listens on the standard port 24007 (bricks and clients
 * find it there), so it cannot run beside a glusterd of the host's own:
 * gluster_skip_reason says so. It then creates a replica-2 volume of two
 * brick directories DIR/brick1 and DIR/brick2 on this host (`force`: both
 * on one host and on the root filesystem), starts it and mounts it twice
 * with mount.glusterfs, at DIR/node1 and DIR/node2: two clients of the
 * same volume, as two hosts would have.
 *
 * gluster_stop unmounts both clients (and first any mount made over them
 * that is still there, lazily), stops and deletes the volume, stops the
 * glusterd it started (SIGTERM, then SIGKILL) and any brick, self-heal or
 * client process still running out of DIR, removes the brick processes'
 * sockets from /run/gluster (the one path glusterd does not let move) and
 * DIR. It is safe to call after a partial or failed start and twice.
 *
 * A run killed before its cleanup (a CTest timeout) is cleaned up by the
 * next run's gluster_start: each run registers its directory in
 * /run/fusesched-test-gluster under its pid and start time, and a
 * directory whose run is gone is taken down the same way.
 */
#ifndef FUSESCHED_TEST_GLUSTER_FIXTURE_H
#define FUSESCHED_TEST_GLUSTER_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define GLUSTER_NODES 2

struct gluster {
	char dir[256];                     /* scratch: state, bricks, mounts, logs */
	char host[256];                    /* this host's name, as the bricks name it */
	char volume[64];
	char node[GLUSTER_NODES][320];     /* the client mounts: DIR/node1, DIR/node2 */
	pid_t glusterd;                    /* ours, or 0 */
	bool up;                           /* volume started and both nodes mounted */
	char error[2048];                  /* why not, when !up */
	double start_s, stop_s;            /* how long gluster_start and gluster_stop took */
	char steps[256];                   /* the last of them step by step, e.g. "glusterd 8.9 s, ..." */
};

/*
 * NULL when this host can run the fixture; otherwise why not (a static
 * string): not root, no /dev/fuse, glusterd, gluster or mount.glusterfs
 * missing, the host name does not resolve, port 24007 taken. Adds
 * /usr/sbin to PATH if it lacks it, and takes down what killed runs left
 * (their glusterd holds the port) before it looks at the port.
 */
const char *gluster_skip_reason(void);

/* Starts everything; on failure g->up is false and g->error says what failed (with log tails). */
void gluster_start(struct gluster *g);
/* Takes everything down; returns 0, or -1 with what it could not remove on stderr. */
int gluster_stop(struct gluster *g);

/* "node1/REL" style paths: a client mount's path of REL. */
const char *gluster_node_path(const struct gluster *g, int node, const char *rel);
/* A brick's copy of REL (brick 0 or 1): a replica, to read only. */
const char *gluster_brick_path(const struct gluster *g, int brick, const char *rel);

#endif
