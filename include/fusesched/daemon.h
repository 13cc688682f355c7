/*
 * The mount daemon: checks what it was given, mounts, serves until unmounted
 * or signalled, then drains and unmounts.
 */
#ifndef FUSESCHED_DAEMON_H
#define FUSESCHED_DAEMON_H

#include <stdbool.h>
#include <stddef.h>

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
	bool drop_page_cache;        /* -o nokeep_cache: pages dropped at every open */
	bool uring_only;             /* -o uring_only: no held writes (engine.h) */
	char max_background[16];     /* -o max_background=N, empty: fs.h's default */
	char max_write[16];          /* -o max_write=BYTES, empty: fs.h's default */
	char entry_timeout[16];      /* -o entry_timeout=SECONDS, empty: fs.h's default */
	char attr_timeout[16];       /* -o attr_timeout=SECONDS */
	char negative_timeout[16];   /* -o negative_timeout=SECONDS */
	char watch_timeout[16];      /* -o watch_timeout=SECONDS */
	char stop_timeout[16];       /* -o stop_timeout=SECONDS, empty: the default */
	char fuse_opts[DAEMON_MAX_FUSE_OPTS]; /* passed to libfuse as one -o */
};

/*
 * One of the daemon's own -o options. The parser and the --help text both
 * read daemon_mount_opts, so an option cannot be parsed yet undocumented.
 */
struct daemon_mount_opt {
	const char *name;     /* as written after -o */
	const char *arg;      /* NULL: a flag; else name=ARG, ARG the help's word for it ("FILE", "N") */
	const char *alias;    /* the command-line option doing the same ("-f"), or NULL */
	size_t field;         /* offsetof(struct daemon_options, ...): a bool, or name=ARG's array */
	size_t field_bytes;
	bool value;           /* what a flag sets its bool to */
	const char *help;     /* one line for --help */
};

/* In --help order; a NULL name ends it. */
extern const struct daemon_mount_opt daemon_mount_opts[];

/*
 * Splits one -o argument: the daemon's own options (daemon_mount_opts) go
 * into o, the rest is appended to o->fuse_opts. Returns 0, or -1 with a
 * message in err.
 */
int daemon_parse_mount_opts(struct daemon_options *o, const char *opts, char *err,
			    unsigned long err_bytes);

/* Returns a process exit status: 0 after a clean unmount, 1 runtime failure, 2 bad input. */
int daemon_run(const struct daemon_options *o);

#endif
