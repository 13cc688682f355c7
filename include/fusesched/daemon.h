/*
 * The mount daemon: checks what it was given, mounts, serves until unmounted
 * or signalled, then drains and unmounts.
 */
#ifndef FUSESCHED_DAEMON_H
#define FUSESCHED_DAEMON_H

#include <stdbool.h>

#define DAEMON_MAX_FUSE_OPTS 1024

struct daemon_options {
	const char *backing_path;
	const char *mountpoint;
	char config_path[4096];      /* empty: built-in defaults */
	bool foreground;
	bool debug;                  /* libfuse request tracing */
	bool allow_devices;          /* -o dev: device nodes on the volume can be opened */
	bool refuse_device_nodes;    /* -o nodevnodes: mknod of devices fails (EPERM) */
	bool no_posix_acl;           /* -o noacl: no POSIX ACLs on the volume */
	bool allow_suid;             /* -o suid */
	bool writeback_cache;        /* -o writeback_cache */
	bool uring_only;             /* -o uring_only: no held writes (engine.h) */
	char fuse_opts[DAEMON_MAX_FUSE_OPTS]; /* passed to libfuse as one -o */
};

/*
 * Splits one -o argument: the daemon's own keys (config=, dev, nodev, suid,
 * nosuid, foreground, writeback_cache, uring_only) go into o, the rest is
 * appended to o->fuse_opts. Returns 0, or -1
 * with a message in err.
 */
int daemon_parse_mount_opts(struct daemon_options *o, const char *opts, char *err,
			    unsigned long err_bytes);

/* Returns a process exit status: 0 after a clean unmount, 1 runtime failure, 2 bad input. */
int daemon_run(const struct daemon_options *o);

#endif
