/* The mount daemon: preflight checks, FUSE session, serving loop, shutdown. */
#include "fusesched/config.h"
#include "fusesched/ctl.h"
#include "fusesched/daemon.h"
#include "fusesched/engine.h"
#include "fusesched/fs.h"
#include "fusesched/kernel_queue.h"
#include "fusesched/mountinfo.h"
#include "fusesched/mountroot.h"
#include "fusesched/stats.h"
#include "fusesched/stop_guard.h"
#include "fusesched/tenant.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <syslog.h>
#include <unistd.h>
#ifdef FUSESCHED_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>
#endif

static int append_fuse_opt(struct daemon_options *o, const char *opt, char *err,
			   unsigned long err_bytes)
{
	size_t used = strlen(o->fuse_opts);
	size_t need = used + (used ? 1 : 0) + strlen(opt) + 1;
	if (need > sizeof(o->fuse_opts)) {
		snprintf(err, err_bytes, "mount options too long (over %zu bytes)",
			 sizeof(o->fuse_opts));
		return -1;
	}
	if (used)
		strcat(o->fuse_opts, ",");
	strcat(o->fuse_opts, opt);
	return 0;
}

/* Distinct cgroups served at once; more share the default tenant. */
#define DAEMON_MAX_TENANTS 4096u

/* Numeric options (max_background) take 1..this: the kernel's field is 16 bits. */
#define MOUNT_OPT_NUMBER_MAX 65535u
/* A write request's payload, in bytes: whole pages, at most the largest request (fs.h). */
#define MOUNT_OPT_WRITE_MIN_BYTES 4096u
#define MOUNT_OPT_WRITE_MAX_BYTES FS_READ_MAX_BYTES
/* A stop gives up its requests after this long without one finishing (stop_guard.h):
 * a third of the systemd unit's TimeoutStopSec, so the daemon ends them itself. */
#define STOP_TIMEOUT_DEFAULT_S 30.0

/* Cache timeouts take 0..this: a day, past which "forever" is what was meant. */
#define MOUNT_OPT_SECONDS_MAX 86400u

#define OPT_FIELD(member) offsetof(struct daemon_options, member), \
	sizeof(((struct daemon_options *)0)->member)
#define OPT_FLAG(member, value) OPT_FIELD(member), value
#define OPT_FILE(member) OPT_FIELD(member), false

const struct daemon_mount_opt daemon_mount_opts[] = {
	{"config", "FILE", "-c FILE", OPT_FILE(config_path),
	 "scheduler and tenant configuration (INI)"},
	{"foreground", NULL, "-f", OPT_FLAG(foreground, true),
	 "stay in the foreground (default: daemonize)"},
	{"dev", NULL, NULL, OPT_FLAG(allow_devices, true),
	 "device nodes can be opened, not only created"},
	{"nodev", NULL, NULL, OPT_FLAG(allow_devices, false),
	 "device nodes can be created but not opened (default)"},
	{"nodevnodes", NULL, NULL, OPT_FLAG(refuse_device_nodes, true),
	 "refuse creating device nodes (EPERM)"},
	{"noacl", NULL, NULL, OPT_FLAG(no_posix_acl, true),
	 "report no POSIX ACLs, check mode bits only: faster ls -l"},
	{"suid", NULL, NULL, OPT_FLAG(allow_suid, true),
	 "honour setuid bits"},
	{"nosuid", NULL, NULL, OPT_FLAG(allow_suid, false),
	 "ignore setuid bits (default)"},
	{"writeback_cache", NULL, NULL, OPT_FLAG(writeback_cache, true),
	 "kernel write caching; flushes charged to the opener"},
	{"keep_cache", NULL, NULL, OPT_FLAG(drop_page_cache, false),
	 "keep a file's cached pages across opens while it is unchanged (default)"},
	{"nokeep_cache", NULL, NULL, OPT_FLAG(drop_page_cache, true),
	 "drop a file's cached pages at every open"},
	{"uring_only", NULL, NULL, OPT_FLAG(uring_only, true),
	 "every data request through io_uring (see README)"},
	{"max_background", "N", NULL, OPT_FILE(max_background),
	 "async requests the kernel sends at once, 1..65535 (default: sized, at most 1024)"},
	{"max_write", "BYTES", NULL, OPT_FILE(max_write),
	 "largest write request the kernel sends, 4096..1048576 in whole pages (default 1048576)"},
	{"entry_timeout", "SECONDS", NULL, OPT_FILE(entry_timeout),
	 "how long the kernel trusts a name it looked up (default 1)"},
	{"attr_timeout", "SECONDS", NULL, OPT_FILE(attr_timeout),
	 "how long the kernel trusts attributes it was given (default 1)"},
	{"negative_timeout", "SECONDS", NULL, OPT_FILE(negative_timeout),
	 "how long the kernel remembers that a name is missing (default 1)"},
	{"watch_timeout", "SECONDS", NULL, OPT_FILE(watch_timeout),
	 "the three timeouts on a local backing filesystem, whose changes are watched (default 60; 0: not watched)"},
	{"stop_timeout", "SECONDS", NULL, OPT_FILE(stop_timeout),
	 "a stop in which no request finishes for this long (a hung backing store) gives up "
	 "the requests left (default 30; 0: waits for them)"},
	{NULL, NULL, NULL, 0, 0, false, NULL},
};

/* The table entry OPT ("dev", "config=FILE") names, or NULL; *value is what follows '='. */
static const struct daemon_mount_opt *find_mount_opt(const char *opt, const char **value)
{
	for (const struct daemon_mount_opt *m = daemon_mount_opts; m->name; m++) {
		size_t len = strlen(m->name);
		if (strncmp(opt, m->name, len) != 0)
			continue;
		if (!m->arg && opt[len] == '\0')
			return m;
		if (m->arg && opt[len] == '=') {
			*value = opt + len + 1;
			return m;
		}
	}
	return NULL;
}

static int set_mount_opt(struct daemon_options *o, const struct daemon_mount_opt *m,
			 const char *value, char *err, unsigned long err_bytes)
{
	char *field = (char *)o + m->field;
	if (!m->arg) {
		*(bool *)field = m->value;
		return 0;
	}
	bool number = strcmp(m->arg, "N") == 0;
	bool seconds = strcmp(m->arg, "SECONDS") == 0;
	bool bytes = strcmp(m->arg, "BYTES") == 0;
	if (!value[0] || strlen(value) >= m->field_bytes ||
	    ((number || seconds || bytes) &&
	     strspn(value, seconds ? "0123456789." : "0123456789") != strlen(value))) {
		snprintf(err, err_bytes, "mount option '%s=' needs %s", m->name,
			 number ? "a number" : seconds ? "a number of seconds"
				: bytes ? "a number of bytes" : "a file name");
		return -1;
	}
	if (seconds) {
		char *end;
		double s = strtod(value, &end);
		if (*end || s > MOUNT_OPT_SECONDS_MAX) {
			snprintf(err, err_bytes, "mount option '%s=%s': must be seconds, 0..%u", m->name,
				 value, MOUNT_OPT_SECONDS_MAX);
			return -1;
		}
	}
	if (number && (strtoul(value, NULL, 10) < 1 || strtoul(value, NULL, 10) > MOUNT_OPT_NUMBER_MAX)) {
		snprintf(err, err_bytes, "mount option '%s=%s': must be 1..%u", m->name, value,
			 MOUNT_OPT_NUMBER_MAX);
		return -1;
	}
	if (bytes) {
		unsigned long b = strtoul(value, NULL, 10);
		if (b < MOUNT_OPT_WRITE_MIN_BYTES || b > MOUNT_OPT_WRITE_MAX_BYTES || b % 4096) {
			snprintf(err, err_bytes, "mount option '%s=%s': must be a multiple of 4096, %u..%u",
				 m->name, value, MOUNT_OPT_WRITE_MIN_BYTES, MOUNT_OPT_WRITE_MAX_BYTES);
			return -1;
		}
	}
	strcpy(field, value);
	return 0;
}

int daemon_parse_mount_opts(struct daemon_options *o, const char *opts, char *err,
			    unsigned long err_bytes)
{
	char *copy = strdup(opts);
	if (!copy) {
		snprintf(err, err_bytes, "out of memory");
		return -1;
	}
	int r = 0;
	char *save = NULL;
	for (char *opt = strtok_r(copy, ",", &save); opt && r == 0;
	     opt = strtok_r(NULL, ",", &save)) {
		const char *value = NULL;
		const struct daemon_mount_opt *m = find_mount_opt(opt, &value);
		if (m)
			r = set_mount_opt(o, m, value, err, err_bytes);
		else if (opt[0])
			r = append_fuse_opt(o, opt, err, err_bytes);
	}
	free(copy);
	return r;
}

/* Is path (already resolved) the mount point of an existing mount? */
static bool is_mount_point(const char *path)
{
	struct mountinfo_entry e;
	return mountinfo_find(path, &e) == 0;
}

static bool user_allow_other_configured(void)
{
	FILE *f = fopen("/etc/fuse.conf", "re");
	if (!f)
		return false;
	char line[256];
	bool found = false;
	while (!found && fgets(line, sizeof(line), f))
		found = strncmp(line, "user_allow_other", 16) == 0;
	fclose(f);
	return found;
}

/* Names the first problem that would make the mount fail, in words a user can act on. */
static int preflight(const struct daemon_options *o)
{
	struct stat st;
	if (stat(o->backing_path, &st) < 0) {
		fprintf(stderr, "fusesched: backing directory '%s': %s\n", o->backing_path,
			strerror(errno));
		return 2;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "fusesched: backing directory '%s' is not a directory\n",
			o->backing_path);
		return 2;
	}
	if (stat(o->mountpoint, &st) < 0) {
		if (errno == ENOTCONN)
			fprintf(stderr,
				"fusesched: mountpoint '%s' is a disconnected FUSE mount; "
				"run 'fusermount3 -u %s' first\n", o->mountpoint, o->mountpoint);
		else
			fprintf(stderr, "fusesched: mountpoint '%s': %s\n", o->mountpoint,
				strerror(errno));
		return 2;
	}
	if (!S_ISDIR(st.st_mode)) {
		fprintf(stderr, "fusesched: mountpoint '%s' is not a directory\n", o->mountpoint);
		return 2;
	}
	char real[PATH_MAX];
	if (realpath(o->mountpoint, real) && is_mount_point(real)) {
		fprintf(stderr,
			"fusesched: mountpoint '%s' is busy: something is already mounted there "
			"(unmount it first)\n", o->mountpoint);
		return 2;
	}
	int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		fprintf(stderr,
			"fusesched: cannot open /dev/fuse: %s (is the fuse module loaded? "
			"in a container, pass the device in)\n", strerror(errno));
		return 2;
	}
	close(fd);
	if (geteuid() != 0 && !user_allow_other_configured()) {
		fprintf(stderr,
			"fusesched: mounting with allow_other (needed so every tenant can use the "
			"volume) requires root, or 'user_allow_other' in /etc/fuse.conf\n");
		return 2;
	}
	return 0;
}

/*
 * Every file open through the mount costs two descriptors (its own and its
 * inode's), and the inode table caches up to half the soft limit (inode.h).
 * As root, take the system's ceiling (fs.nr_open); otherwise the hard limit.
 * Past it callers get EMFILE, not a crash. Runs before CAP_SYS_RESOURCE is
 * dropped.
 */
static void raise_nofile_limit(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return;
	unsigned long long nr_open = 0;
	FILE *f = fopen("/proc/sys/fs/nr_open", "re");
	if (f) {
		if (fscanf(f, "%llu", &nr_open) != 1)
			nr_open = 0;
		fclose(f);
	}
	if (nr_open > rl.rlim_max &&
	    setrlimit(RLIMIT_NOFILE, &(struct rlimit){(rlim_t)nr_open, (rlim_t)nr_open}) == 0)
		return;
	rl.rlim_cur = rl.rlim_max;
	setrlimit(RLIMIT_NOFILE, &rl);
}

/*
 * Writes are issued by root; without CAP_SYS_RESOURCE they still count
 * against disk quotas and reserved blocks like the tenant's own would.
 * Done before any thread starts, so every thread inherits it.
 */
static void drop_resource_capability(void)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return;
	int bit = CAP_SYS_RESOURCE;
	data[bit / 32].effective &= ~(1u << (bit % 32));
	data[bit / 32].permitted &= ~(1u << (bit % 32));
	syscall(SYS_capset, &hdr, data);
}

/* The config named by -c, or the defaults; NULL after printing FILE:LINE: why. */
static struct config *load_config(const struct daemon_options *o)
{
	struct config *cfg = NULL;
	char err[512];
	int r = o->config_path[0] ? config_load_file(o->config_path, &cfg, err, sizeof(err))
				  : config_new_default(&cfg);
	if (r < 0) {
		if (o->config_path[0])
			fprintf(stderr, "fusesched: %s\n", err);
		else
			fprintf(stderr, "fusesched: out of memory\n");
		return NULL;
	}
	return cfg;
}

/* The [scheduler] section, in the scheduler's own terms: a mount's, and a
 * reload's for what a reload changes (engine_reload). */
static void engine_params_from_config(const struct config *cfg, struct engine_params *ep)
{
	engine_params_default(ep);
	const struct config_scheduler *c = &cfg->scheduler;
	ep->sched.policy = c->policy == CONFIG_POLICY_FIFO ? SCHED_POLICY_FIFO : SCHED_POLICY_BFQ;
	ep->sched.max_inflight = c->max_inflight;
	ep->sched.learn_depth = c->learn_depth;
	ep->sched.work_conserving = c->work_conserving == CONFIG_DOOR_YES  ? SCHED_DOOR_OPEN
				    : c->work_conserving == CONFIG_DOOR_NO ? SCHED_DOOR_SHUT
									   : SCHED_DOOR_LEARN;
	ep->sched.default_weight = c->default_weight;
	ep->sched.budget_timeout_ns = (uint64_t)c->budget_timeout_ms * 1000000u;
	ep->busy_poll_ns = (uint64_t)c->busy_poll_us * 1000u;
	ep->sched.reserve_window_ns = (uint64_t)c->reserve_ms * 1000000u;
	ep->sched.idle_enable = c->idle_mode != CONFIG_IDLE_OFF;
	ep->sched.idle_fixed_ns = c->idle_mode == CONFIG_IDLE_FIXED ? (uint64_t)c->idle_us * 1000u : 0;
	const struct config_cost *cost[SCHED_COST_KINDS] = {
		[SCHED_COST_READ] = &c->read_cost,
		[SCHED_COST_WRITE] = &c->write_cost,
		[SCHED_COST_DSYNC] = &c->dsync_cost,
	};
	for (int k = 0; k < SCHED_COST_KINDS; k++) {
		ep->sched.model_iops[k] = cost[k]->iops;
		ep->sched.model_bytes_per_s[k] = cost[k]->iops ? (uint64_t)cost[k]->mb_per_s * 1000000u : 0;
	}
}

/*
 * Tells a Type=notify service manager (systemd) the daemon's state:
 * READY=1 once the mount is up, STOPPING=1 when it starts to drain. A no-op
 * without NOTIFY_SOCKET in the environment or in a build without libsystemd.
 */
static void daemon_notify(const char *state)
{
#ifdef FUSESCHED_HAVE_SYSTEMD
	sd_notify(0, state);
#else
	(void)state;
#endif
}

/* Once daemonized, stderr is /dev/null: messages go to syslog instead. */
/*
 * The engine's new size for the kernel's async request queue (engine.h),
 * or the same again to wake a caller waiting for room in it: that comes
 * every 100 ms while a store hangs, so a failure is logged once.
 */
static void set_kernel_queue(void *q, uint32_t limit)
{
	static bool failure_logged;
	int r = kernel_queue_set(q, limit);
	if (r && !failure_logged) {
		failure_logged = true;
		fuse_log(FUSE_LOG_WARNING, "fusesched: cannot set the kernel's queue limit (fusectl max_background "
			 "and congestion_threshold) to %u: %s (not logged again)\n", limit, strerror(-r));
	}
}

static int64_t kernel_queue_outstanding(void *q)
{
	return kernel_queue_waiting(q);
}

static void log_to_syslog(enum fuse_log_level level, const char *fmt, va_list ap)
{
	vsyslog((int)level, fmt, ap);
}

/*
 * A background start: the mount command forks at once, and the parent
 * waits until the volume is served at the mountpoint, which happens once
 * the session's loop runs (mountroot.h): it exits 0 then, or, when the
 * daemon stopped before, prints its reason and exits with its status. The
 * daemon writes '+' when serving, or '-' and why it stopped. Forked
 * before anything large is allocated: a parent alive beside the daemon
 * shares its memory copy-on-write, and the daemon's first writes to its
 * buffers then copy them and split their huge pages (a 1 MiB direct-write
 * flood moved a fifth less).
 */
static int started_fd = -1;

static int start_in_background(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0)
		return -1;
	pid_t pid = fork();
	if (pid < 0) {
		close(p[0]);
		close(p[1]);
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		started_fd = p[1];
		return 0;
	}
	close(p[1]);
	char msg[640];
	size_t got = 0;
	for (;;) {
		ssize_t n = read(p[0], msg + got, sizeof(msg) - 1 - got);
		if (n > 0 && (got += (size_t)n) < sizeof(msg) - 1)
			continue;
		if (n < 0 && errno == EINTR)
			continue;
		break;
	}
	msg[got] = '\0';
	if (got && msg[0] == '+')
		_exit(0);
	if (got > 1)
		fprintf(stderr, "fusesched: %s\n", msg + 1);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	_exit(WIFEXITED(st) && WEXITSTATUS(st) ? WEXITSTATUS(st) : 1);
}

/* The daemon leaves the caller's session, directory and terminal. */
static int detach(bool foreground)
{
	if (foreground)
		return chdir("/") == 0 ? 0 : -1;
	if (setsid() < 0 || chdir("/") < 0)
		return -1;
	int null = open("/dev/null", O_RDWR | O_CLOEXEC);
	if (null < 0)
		return -1;
	for (int fd = 0; fd <= 2; fd++)
		(void)dup2(null, fd);
	if (null > 2)
		close(null);
	return 0;
}

/* Serving at the mountpoint (error NULL), or not: the service manager and the waiting parent are told. */
static void daemon_started(const char *mountpoint, const char *error)
{
	if (!error) {
		/* The PID is the daemon's own, as NotifyAccess=main wants. */
		char ready[PATH_MAX + 64];
		snprintf(ready, sizeof(ready), "READY=1\nMAINPID=%ld\nSTATUS=serving %s", (long)getpid(),
			 mountpoint);
		daemon_notify(ready);
	}
	if (started_fd < 0)
		return;
	char msg[640];
	int n = snprintf(msg, sizeof(msg), "%c%s", error ? '-' : '+', error ? error : "");
	(void)!write(started_fd, msg, n < (int)sizeof(msg) ? (size_t)n : sizeof(msg) - 1);
	close(started_fd);
	started_fd = -1;
}

/* Puts the volume at the mountpoint once the loop can answer the kernel (mountroot.h). */
struct publisher {
	pthread_t thread;
	bool started;
	atomic_bool done, stopping;
	struct mountroot *root;
	struct fs *fs;
};

static void *publish(void *arg)
{
	struct publisher *p = arg;
	char err[512];
	if (mountroot_publish(p->root, p->fs, err, sizeof(err)) < 0) {
		fuse_log(FUSE_LOG_ERR, "fusesched: %s\n", err);
		daemon_started(p->root->mountpoint, err);
		if (!atomic_load(&p->stopping))
			kill(getpid(), SIGTERM); /* ends the loop as a stop does */
	} else {
		daemon_started(p->root->mountpoint, NULL);
	}
	atomic_store(&p->done, true);
	return NULL;
}

/*
 * The loop ended (a stop while starting) with the bind perhaps still
 * waiting for its lookup's answer: requests are answered here until it
 * has one, so that its thread ends and the volume is unmounted wherever it
 * got to.
 */
static void publisher_finish(struct publisher *p, struct fuse_session *se)
{
	if (!p->started)
		return;
	atomic_store(&p->stopping, true);
	struct fuse_buf buf = {.mem = NULL};
	while (!atomic_load(&p->done)) {
		struct pollfd pfd = {.fd = fuse_session_fd(se), .events = POLLIN};
		if (poll(&pfd, 1, 10) == 1 && (pfd.revents & POLLIN) && fuse_session_receive_buf(se, &buf) > 0)
			fuse_session_process_buf(se, &buf);
	}
	free(buf.mem);
	pthread_join(p->thread, NULL);
}

/* What a reload needs: the file named at mount, and what it changes. */
struct daemon_reload {
	const char *config_path;          /* absolute: the daemon chdirs to / */
	struct tenant_table *tenants;
	struct engine *engine;            /* the cost model applies live */
	struct ctl_server *ctl;           /* its socket follows [control] socket and group */
	struct ctl_http **http;           /* the metrics listener in force, NULL: none */
	struct config_listen listen;      /* ... and the [metrics] listen it came from */
	char socket_path[128];            /* the [control] socket in force, "": auto */
	char group[64];                   /* the [control] group in force, "": none */
	bool foreground;
};

/* Daemonized, stderr is /dev/null: reload outcomes go to syslog instead. */
static void daemon_log(const struct daemon_reload *d, int priority, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void daemon_log(const struct daemon_reload *d, int priority, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	if (d->foreground) {
		fputs("fusesched: ", stderr);
		vfprintf(stderr, fmt, ap);
		fputc('\n', stderr);
	} else {
		vsyslog(priority, fmt, ap);
	}
	va_end(ap);
}

/* The control server's reload: re-read the file, apply it whole or not at all. */
/*
 * As sshd's StrictModes: a reload applies whatever the file says with the
 * daemon's authority, so a file that another user could have written is
 * refused. 0, or -EPERM with the reason in err.
 */
static int config_file_trusted(const char *path, char *err, size_t err_bytes)
{
	struct stat st;
	if (stat(path, &st) < 0)
		return 0; /* loading it reports the error */
	if (st.st_uid != 0 && st.st_uid != geteuid()) {
		snprintf(err, err_bytes, "%s: owned by uid %u, not root: refusing to reload it", path,
			 (unsigned)st.st_uid);
		return -EPERM;
	}
	if (st.st_mode & (S_IWGRP | S_IWOTH)) {
		snprintf(err, err_bytes,
			 "%s: writable by group or others (mode %04o): refusing to reload it", path,
			 (unsigned)(st.st_mode & 07777));
		return -EPERM;
	}
	return 0;
}

static bool same_listen(const struct config_listen *a, const struct config_listen *b)
{
	char was[128], now[128];
	config_format_listen(a, was, sizeof(was));
	config_format_listen(b, now, sizeof(now));
	return strcmp(was, now) == 0;
}

/* A listener on LISTEN serving, in *out; -errno with a message naming the address. */
static int metrics_listener_start(struct ctl_server *ctl, const struct config_listen *listen,
				  struct ctl_http **out, char *err, size_t err_bytes)
{
	int r = ctl_http_new(ctl, (const struct sockaddr *)&listen->addr, listen->addr_len, out, err,
			     err_bytes);
	if (r == 0 && (r = ctl_http_start(*out, err, err_bytes)) < 0) {
		ctl_http_free(*out);
		*out = NULL;
	}
	return r;
}

/*
 * The reload's [metrics] listen: a listener on a new address replaces the
 * old one, which serves until the new one does. Where the new address
 * cannot be bound while the old one listens (the same port on an
 * overlapping address), the old one is closed first and, if the new one
 * still fails, opened again. 0, or -errno with the message in err: the
 * listener in force is then the one before (or, if its address was
 * taken meanwhile, none, which is logged).
 */
static int daemon_reload_metrics(struct daemon_reload *d, const struct config_listen *listen,
				 char *err, size_t err_bytes)
{
	if (same_listen(&d->listen, listen))
		return 0;
	struct ctl_http *fresh = NULL;
	int r = 0;
	if (listen->set) {
		r = metrics_listener_start(d->ctl, listen, &fresh, err, err_bytes);
		if (r == -EADDRINUSE && *d->http) {
			ctl_http_free(*d->http);
			*d->http = NULL;
			r = metrics_listener_start(d->ctl, listen, &fresh, err, err_bytes);
			if (r < 0) {
				char again[512];
				if (metrics_listener_start(d->ctl, &d->listen, d->http, again,
							   sizeof(again)) < 0) {
					daemon_log(d, LOG_ERR, "metrics listener stopped: %s", again);
					d->listen.set = false;
					ctl_server_set_metrics_listen(d->ctl, NULL);
				}
			}
		}
		if (r < 0)
			return r;
	}
	ctl_http_free(*d->http);
	*d->http = fresh;
	d->listen = *listen;
	ctl_server_set_metrics_listen(d->ctl, fresh ? ctl_http_where(fresh) : NULL);
	return 0;
}

static const char *or_null(const char *s)
{
	return s[0] ? s : NULL;
}

/* The reload's [control] socket and group and [metrics] listen: all or none. */
static int daemon_reload_listeners(struct daemon_reload *d, const struct config *cfg, char *err,
				   size_t err_bytes)
{
	const char *path = cfg->control.socket_path, *group = cfg->control.group;
	bool control_changed = strcmp(d->socket_path, path ? path : "") != 0 ||
			       strcmp(d->group, group ? group : "") != 0;
	int r = control_changed ? ctl_server_set_socket(d->ctl, path, group, err, err_bytes) : 0;
	if (r == 0 && (r = daemon_reload_metrics(d, &cfg->metrics.listen, err, err_bytes)) < 0 &&
	    control_changed) {
		char ignored[256];
		ctl_server_set_socket(d->ctl, or_null(d->socket_path), or_null(d->group), ignored,
				      sizeof(ignored));
	}
	if (r == 0) {
		snprintf(d->socket_path, sizeof(d->socket_path), "%s", path ? path : "");
		snprintf(d->group, sizeof(d->group), "%s", group ? group : "");
	}
	return r;
}

static int daemon_reload_config(void *ctx, struct ctl_reload_result *res)
{
	struct daemon_reload *d = ctx;
	snprintf(res->config_path, sizeof(res->config_path), "%s", d->config_path);
	if (!d->config_path[0]) {
		snprintf(res->error, sizeof(res->error),
			 "mounted without a config file (-c FILE): nothing to reload");
		return -ENOENT;
	}
	struct config *cfg = NULL;
	int r = config_file_trusted(d->config_path, res->error, sizeof(res->error));
	if (r == 0)
		r = config_load_file(d->config_path, &cfg, res->error, sizeof(res->error));
	if (r == 0)
		r = daemon_reload_listeners(d, cfg, res->error, sizeof(res->error));
	if (r == 0) {
		r = tenant_table_apply_config(d->tenants, cfg);
		if (r < 0)
			snprintf(res->error, sizeof(res->error), "%s: cannot apply: %s", d->config_path,
				 strerror(-r));
	}
	if (r < 0) {
		daemon_log(d, LOG_ERR, "reload failed, running config kept: %s", res->error);
	} else {
		struct engine_params ep;
		engine_params_from_config(cfg, &ep);
		engine_reload(d->engine, &ep);
		daemon_log(d, LOG_INFO, "reloaded %s", d->config_path);
	}
	config_free(cfg);
	return r;
}

int daemon_run(const struct daemon_options *o)
{
	if (!o->foreground && start_in_background() < 0) {
		fprintf(stderr, "fusesched: cannot start in the background: %s\n", strerror(errno));
		return 1;
	}
	int status = preflight(o);
	if (status)
		return status;
	struct config *cfg = load_config(o);
	if (!cfg)
		return 2;
	raise_nofile_limit();
	(void)fs_channel_make_pipes();
	drop_resource_capability();
	/*
	 * Creations apply the caller's umask in their own thread (creds.h); the
	 * daemon's own is 0 so that nothing else masks a mode twice.
	 */
	umask(0);

	struct fs_options fo;
	fs_options_default(&fo);
	fo.backing_path = o->backing_path;
	fo.refuse_device_nodes = o->refuse_device_nodes;
	fo.posix_acl = !o->no_posix_acl;
	fo.writeback_cache = o->writeback_cache;
	fo.keep_page_cache = !o->drop_page_cache;
	if (o->max_background[0]) /* checked by daemon_parse_mount_opts */
		fo.max_background = (unsigned int)strtoul(o->max_background, NULL, 10);
	if (o->max_write[0]) /* checked by daemon_parse_mount_opts */
		fo.max_write_bytes = (unsigned int)strtoul(o->max_write, NULL, 10);
	fo.entry_timeout_given = o->entry_timeout[0];
	if (fo.entry_timeout_given)
		fo.entry_timeout_s = strtod(o->entry_timeout, NULL);
	fo.attr_timeout_given = o->attr_timeout[0];
	if (fo.attr_timeout_given)
		fo.attr_timeout_s = strtod(o->attr_timeout, NULL);
	fo.negative_timeout_given = o->negative_timeout[0];
	if (fo.negative_timeout_given)
		fo.negative_timeout_s = strtod(o->negative_timeout, NULL);
	if (o->watch_timeout[0])
		fo.watch_timeout_s = strtod(o->watch_timeout, NULL);

	char err[512];
	struct engine_params ep;
	engine_params_from_config(cfg, &ep);
	if (o->uring_only) {
		ep.max_held_writes = 0;
		ep.solo_requests = false;
	}
	struct tenant_table *tenants = NULL;
	struct stats *stats = stats_new(DAEMON_MAX_TENANTS);
	struct engine *engine = NULL;
	struct fs *fs = NULL;
	struct fuse_session *se = NULL;
	struct ctl_server *ctl = NULL;
	struct ctl_http *http = NULL;
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct kernel_queue kernel_queue = {.dir_fd = -1, .limit_fd = -1, .threshold_fd = -1};
	struct mountroot root = {.published = false};
	status = 2;
	const struct tenant_table_params tp = {.max_tenants = DAEMON_MAX_TENANTS};
	if (!stats) {
		snprintf(err, sizeof(err), "out of memory");
		fprintf(stderr, "fusesched: %s\n", err);
		goto out_fs;
	}
	if (tenant_table_new(&tp, cfg, &tenants, err, sizeof(err)) < 0 ||
	    engine_new(&ep, tenants, stats, &engine, err, sizeof(err)) < 0 ||
	    fs_new(&fo, engine_datapath(engine), &fs, err, sizeof(err)) < 0) {
		fprintf(stderr, "fusesched: %s\n", err);
		goto out_fs;
	}

	char real_backing[PATH_MAX], real_mnt[PATH_MAX], real_config[PATH_MAX] = "";
	if (!realpath(o->backing_path, real_backing))
		snprintf(real_backing, sizeof(real_backing), "%s", o->backing_path);
	if (!realpath(o->mountpoint, real_mnt))
		snprintf(real_mnt, sizeof(real_mnt), "%s", o->mountpoint);
	/* Reload re-reads it after the daemon has changed directory to /. */
	if (o->config_path[0] && !realpath(o->config_path, real_config))
		snprintf(real_config, sizeof(real_config), "%s", o->config_path);
	struct daemon_reload reload = {.config_path = real_config,
				       .tenants = tenants, .engine = engine, .http = &http,
				       .listen = cfg->metrics.listen, .foreground = o->foreground};
	snprintf(reload.socket_path, sizeof(reload.socket_path), "%s",
		 cfg->control.socket_path ? cfg->control.socket_path : "");
	snprintf(reload.group, sizeof(reload.group), "%s",
		 cfg->control.group ? cfg->control.group : "");
	const struct ctl_server_params cp = {
		.mountpoint = real_mnt, .backing = real_backing,
		.socket_path = cfg->control.socket_path, .group = cfg->control.group,
		.config_path = real_config,
		.stats = stats, .tenants = tenants, .reload = daemon_reload_config,
		.reload_ctx = &reload, .reload_signal = SIGHUP};
	/* Before mounting: a socket a live daemon owns is a clear error, not a second server. */
	if (ctl_server_new(&cp, &ctl, err, sizeof(err)) < 0) {
		fprintf(stderr, "fusesched: %s\n", err);
		goto out_fs;
	}
	reload.ctl = ctl;
	/* The same for the metrics listener's address: bound now, served once daemonized. */
	if (cfg->metrics.listen.set &&
	    ctl_http_new(ctl, (const struct sockaddr *)&cfg->metrics.listen.addr,
			 cfg->metrics.listen.addr_len, &http, err, sizeof(err)) < 0) {
		fprintf(stderr, "fusesched: %s\n", err);
		goto out_fs;
	}
	/* Commas would split the option string; fsname is cosmetic, so replace them. */
	for (char *c = real_backing; *c; c++)
		if (*c == ',')
			*c = '_';
	char opts[DAEMON_MAX_FUSE_OPTS + PATH_MAX + 128];
	/* libfuse mounts nosuid,nodev unless told "suid" or "dev". */
	snprintf(opts, sizeof(opts), "allow_other,default_permissions,%s,%s,fsname=%s,subtype=fusesched%s%s",
		 o->allow_suid ? "suid" : "nosuid", o->allow_devices ? "dev" : "nodev", real_backing,
		 o->fuse_opts[0] ? "," : "", o->fuse_opts);
	char *argv[] = {"fusesched", "-o", opts, o->debug ? "-d" : NULL, NULL};
	args = (struct fuse_args)FUSE_ARGS_INIT(o->debug ? 4 : 3, argv);

	status = 1;
	se = fuse_session_new(&args, fs_lowlevel_ops(), sizeof(struct fuse_lowlevel_ops), fs);
	if (!se) {
		fprintf(stderr, "fusesched: invalid mount options '%s'\n", opts);
		status = 2;
		goto out_fs;
	}
	if (fuse_set_signal_handlers(se) != 0)
		goto out_session;
	/*
	 * SIGHUP means reload, not exit (libfuse's handler would end the session):
	 * blocked here, before any thread exists, so every thread inherits the
	 * mask and the control thread takes it from its signalfd.
	 */
	sigset_t hup;
	sigemptyset(&hup);
	sigaddset(&hup, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &hup, NULL);
	const char *mount_at = mountroot_prepare(&root, real_mnt);
	if (fuse_session_mount(se, mount_at) != 0) {
		fprintf(stderr, "fusesched: mounting on '%s' failed (see the message above)\n",
			mount_at);
		if (root.stage[0])
			mountroot_unmount(&root, NULL);
		goto out_signals;
	}
	if (fs_attach_channel(fs, se) != 0) {
		fprintf(stderr, "fusesched: cannot attach to the FUSE channel\n");
		goto out_unmount;
	}
	/* Mounted, INIT not yet answered: the kernel's queue is sized while mounted unless
	 * fixed. The connection's files are opened either way, for a stop that cannot
	 * finish (stop_guard.h): found later, the mount's path walk would wait on it. */
	if (kernel_queue_open(mount_at, &kernel_queue, err, sizeof(err)) == 0) {
		if (!o->max_background[0])
			fs_set_max_background(fs, engine_set_kernel_queue(engine, set_kernel_queue,
									  kernel_queue_outstanding,
									  &kernel_queue, fo.max_background));
	} else if (!o->max_background[0]) {
		fprintf(stderr, "fusesched: %s; max_background stays %u\n", err, fo.max_background);
	}
	if (kernel_queue.limit_fd < 0 || o->max_background[0])
		engine_set_kernel_queue(engine, NULL, NULL, NULL, fo.max_background);
	if (detach(o->foreground) != 0)
		goto out_unmount;
	if (!o->foreground) {
		openlog("fusesched", LOG_PID, LOG_DAEMON);
		fuse_set_log_func(log_to_syslog);
	}
	/* After daemonizing: the reactor thread and the pages of the registered
	 * buffers must be the daemon process's. */
	if (engine_start(engine) < 0) {
		fprintf(stderr, "fusesched: cannot start the io_uring engine thread\n");
		goto out_unmount;
	}
	/* The listener before the control thread, whose reloads may replace it. */
	if (http && ctl_http_start(http, err, sizeof(err)) < 0) {
		fprintf(stderr, "fusesched: %s\n", err);
		engine_stop(engine);
		goto out_unmount;
	}
	if (http)
		ctl_server_set_metrics_listen(ctl, ctl_http_where(http));
	if (ctl_server_start(ctl) < 0) {
		fprintf(stderr, "fusesched: cannot start the control socket thread\n");
		engine_stop(engine);
		goto out_unmount;
	}

	struct fuse_loop_config *loop = fuse_loop_cfg_create();
	if (!loop) {
		engine_stop(engine); /* the reactor runs: join it before freeing */
		goto out_unmount;
	}
	fuse_loop_cfg_set_clone_fd(loop, 0);
	fuse_loop_cfg_set_max_threads(loop, 64);
	/* Last before the loop: it notifies through the session, so it stops right after. */
	if (fs_watch_backing(fs, err, sizeof(err)) == 0)
		stats_publish_watch_timeout(stats, (uint32_t)fo.watch_timeout_s);
	else
		fuse_log(FUSE_LOG_NOTICE, "fusesched: changes beside the mount are not watched (%s); "
			 "timeouts stay as set\n", err);
	/* Mounted, engine and control socket running: ready, once the volume is
	 * at the mountpoint; from a stage that takes the loop's answers. */
	struct publisher pub = {.root = &root, .fs = fs};
	if (!root.stage[0])
		daemon_started(real_mnt, NULL);
	else if (pthread_create(&pub.thread, NULL, publish, &pub) == 0)
		pub.started = true;
	else
		kill(getpid(), SIGTERM);
	double stop_timeout_s = o->stop_timeout[0] ? strtod(o->stop_timeout, NULL)
						   : STOP_TIMEOUT_DEFAULT_S;
	struct stop_guard_params guarded = {.se = se, .engine = engine, .connection = &kernel_queue,
					    .root = &root, .ctl = ctl,
					    .timeout_ns = (uint64_t)(stop_timeout_s * 1e9)};
	struct stop_guard *guard = NULL;
	if (stop_guard_start(&guarded, &guard) != 0)
		fuse_log(FUSE_LOG_WARNING, "fusesched: cannot start the stop's guard: a stop "
			 "waits for requests hung at the backing store\n");
	/* Returns after SIGTERM/SIGINT/unmount once every worker finished its request. */
	/* A positive result is the signal that ended the loop: a clean stop. */
	status = fuse_session_loop_mt(se, loop) < 0 ? 1 : 0;
	publisher_finish(&pub, se);
	if (root.stage[0] && !root.published) /* stopped, or failed, before it was served */
		status = 1;
	fs_unwatch_backing(fs);
	daemon_notify("STOPPING=1\nSTATUS=draining and unmounting");
	fuse_loop_cfg_destroy(loop);
	/* Scrapes end with the mount. The control thread first: a reload
	 * there may replace the listener until it is stopped. */
	ctl_server_stop(ctl);
	ctl_http_free(http);
	http = NULL;
	/* Every request the kernel handed over is answered before the mount goes. */
	engine_stop(engine);
	stop_guard_end(guard);
out_unmount:
	daemon_started(real_mnt, "the daemon stopped before it served the mount (see the system log)");
	mountroot_unmount(&root, se);
out_signals:
	fuse_remove_signal_handlers(se);
out_session:
	fuse_session_destroy(se);
out_fs:
	fuse_opt_free_args(&args);
	ctl_server_stop(ctl); /* no reload replaces the listener from here */
	ctl_http_free(http);  /* it serves the control server's replies: before the server goes */
	ctl_server_free(ctl);
	fs_free(fs);
	engine_free(engine);
	kernel_queue_close(&kernel_queue);
	tenant_table_free(tenants);
	stats_free(stats);
	config_free(cfg);
	return status;
}
