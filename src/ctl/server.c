/*
 * Control server: one thread polls the listening socket, its clients, a stop
 * eventfd and the reload signalfd. Clients are non-blocking and served one
 * request at a time each (a reply must be flushed before the next request
 * is read), so a client that does not read its replies costs one reply of
 * memory, never more, and never slows the others.
 */
#include "fusesched/ctl.h"
#include "fusesched/clock.h"
#include "fusesched/stats.h"
#include "fusesched/tenant.h"
#include "ctl_internal.h"

#include <errno.h>
#include <grp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#define CTL_MAX_CLIENTS 64
/* A client that neither sends nor reads for this long is dropped. */
#define CTL_CLIENT_IDLE_NS (10 * CTL_NS_PER_S)
/*
 * A request must be complete this long after its first byte, however the
 * bytes trickle in: a client sending one byte every few seconds would
 * otherwise keep its slot forever (and 64 of them every slot).
 */
#define CTL_REQUEST_DEADLINE_NS (5 * CTL_NS_PER_S)
/* After refusing an oversized request, input is discarded (so the client can read the error) up to this much. */
#define CTL_DISCARD_MAX_BYTES (64ull << 20)
#define CTL_SAMPLE_NS CTL_NS_PER_S
/* Tenants whose cgroup weight files are read again at each sample: a
 * changed weight is followed within a second where fewer are active, and
 * the table lock is held for at most this many tenants' reads. */
#define CTL_WEIGHT_REFRESH_MAX 64
/* How long a new daemon waits for the daemon of a just-unmounted mount to give up the socket. */
#define CTL_BIND_WAIT_MS 3000u

/* Cumulative counters of one tenant at a sample time, for per-interval rates. */
struct ctl_sample {
	uint64_t read_bytes, write_bytes, ops;
	uint64_t charged_bytes;     /* the scheduler's service: store time in bytes */
};

struct ctl_client {
	int fd;
	char *in;                   /* CTL_REQUEST_MAX_BYTES */
	size_t in_len;
	char *out;                  /* the pending reply */
	size_t out_len, out_off;
	bool discarding;            /* refused an oversized request: drop input until EOF */
	bool shut_wr;
	bool eof;
	uint64_t discarded_bytes;
	uint64_t last_progress_ns;
	uint64_t request_start_ns;  /* first byte of the unfinished request; 0: none */
};

#define CTL_SOCKET_PATH_MAX sizeof(((struct sockaddr_un *)0)->sun_path)

struct ctl_server {
	char *mountpoint, *backing, *config_path;
	struct stats *stats;
	struct tenant_table *tenants;
	ctl_reload_fn reload;
	void *reload_ctx;
	char socket_path[CTL_SOCKET_PATH_MAX];
	/* With a configured socket: a link at the auto path, so clients find it from the mountpoint. */
	char link_path[CTL_SOCKET_PATH_MAX];
	dev_t socket_dev;
	ino_t socket_ino;
	int listen_fd, stop_fd, signal_fd;
	pthread_t thread;
	bool started;
	uint64_t start_ns;
	uint32_t max_tenants;
	/*
	 * The samples: swapped by the control thread, read by every stat reply,
	 * the metrics HTTP listener's (another thread) too. Under the same
	 * lock, what a reload may change and a reply shows: socket_path, the
	 * socket's group ("": none) and where the metrics listener is ("": none).
	 */
	pthread_mutex_t sample_lock;
	char group[64];
	char metrics_listen[128];
	struct ctl_sample *older, *newer;
	uint64_t older_ns, newer_ns;
	struct ctl_client clients[CTL_MAX_CLIENTS];
	size_t client_count;
};

/* ---- socket setup ------------------------------------------------------ */

static int fail(char *err, size_t err_bytes, int rc, const char *fmt, const char *arg)
{
	char what[512];
	snprintf(what, sizeof(what), fmt, arg);
	snprintf(err, err_bytes, "control socket: %s: %s", what, strerror(-rc));
	return rc;
}

/* The auto directory must be ours alone: anyone able to write there could swap sockets. */
static int ctl_dir_prepare(char *err, size_t err_bytes)
{
	if (mkdir(CTL_SOCKET_DIR, 0755) < 0 && errno != EEXIST)
		return fail(err, err_bytes, -errno, "cannot create %s", CTL_SOCKET_DIR);
	struct stat st;
	if (lstat(CTL_SOCKET_DIR, &st) < 0)
		return fail(err, err_bytes, -errno, "%s", CTL_SOCKET_DIR);
	if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 022))
		return fail(err, err_bytes, -EPERM,
			    "%s must be a directory owned by the daemon's user and writable only by it",
			    CTL_SOCKET_DIR);
	return 0;
}

static int ctl_group_resolve(const char *group, gid_t *gid)
{
	char *end;
	unsigned long n = strtoul(group, &end, 10);
	if (*group && !*end) {
		*gid = (gid_t)n;
		return 0;
	}
	char buf[4096];
	struct group gr, *found = NULL;
	if (getgrnam_r(group, &gr, buf, sizeof(buf), &found) != 0 || !found)
		return -ENOENT;
	*gid = found->gr_gid;
	return 0;
}

/* Does a daemon answer on PATH? A refused connection means its owner died. */
static bool ctl_socket_is_live(const struct sockaddr_un *addr)
{
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return true; /* cannot tell: do not remove it */
	bool live = connect(fd, (const struct sockaddr *)addr, sizeof(*addr)) == 0 ||
		    errno != ECONNREFUSED;
	close(fd);
	return live;
}

static int ctl_socket_bind(struct ctl_server *s, const char *group, char *err, size_t err_bytes)
{
	gid_t gid = 0;
	if (group && ctl_group_resolve(group, &gid) < 0)
		return fail(err, err_bytes, -ENOENT, "unknown group '%s' in [control] group", group);
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", s->socket_path);
	s->listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s->listen_fd < 0)
		return fail(err, err_bytes, -errno, "%s", "socket");
	/* The umask makes it 0600 from birth: no moment when others could connect. */
	for (unsigned waited_ms = 0, removed = 0;;) {
		mode_t old = umask(0177);
		int r = bind(s->listen_fd, (struct sockaddr *)&addr, sizeof(addr));
		int saved = errno;
		umask(old);
		if (r == 0)
			break;
		if (saved != EADDRINUSE || removed)
			return fail(err, err_bytes, -saved, "cannot bind %s", s->socket_path);
		struct stat st;
		if (lstat(s->socket_path, &st) == 0 && !S_ISSOCK(st.st_mode))
			return fail(err, err_bytes, -EEXIST, "%s exists and is not a socket",
				    s->socket_path);
		if (ctl_socket_is_live(&addr)) {
			/*
			 * The daemon of a mount that was just unmounted still holds
			 * it for a moment: `umount; fusesched mount` must work.
			 */
			if (waited_ms >= CTL_BIND_WAIT_MS) {
				char what[sizeof(s->socket_path) + 128];
				snprintf(what, sizeof(what),
					 "%s is in use by a running fusesched daemon (waited %u ms "
					 "for it to exit; another mount configured with the same "
					 "socket?)", s->socket_path, waited_ms);
				return fail(err, err_bytes, -EADDRINUSE, "%s", what);
			}
			usleep(50 * 1000);
			waited_ms += 50;
			continue;
		}
		unlink(s->socket_path); /* left by a daemon that died */
		removed = 1;
	}
	/* Bound: a failure from here leaves no socket file behind. */
	int r = 0;
	struct stat st;
	if (group && (chown(s->socket_path, (uid_t)-1, gid) < 0 || chmod(s->socket_path, 0660) < 0))
		r = fail(err, err_bytes, -errno, "cannot give %s to its group", s->socket_path);
	else if (stat(s->socket_path, &st) < 0)
		r = fail(err, err_bytes, -errno, "%s", s->socket_path);
	else if (listen(s->listen_fd, 64) < 0)
		r = fail(err, err_bytes, -errno, "cannot listen on %s", s->socket_path);
	if (r < 0) {
		unlink(s->socket_path);
		return r;
	}
	s->socket_dev = st.st_dev;
	s->socket_ino = st.st_ino;
	pthread_mutex_lock(&s->sample_lock); /* a reload's: stat replies read it */
	snprintf(s->group, sizeof(s->group), "%s", group ? group : "");
	pthread_mutex_unlock(&s->sample_lock);
	return 0;
}

int ctl_server_set_group(struct ctl_server *s, const char *group, char *err, size_t err_bytes)
{
	gid_t gid = getegid();
	if (group && ctl_group_resolve(group, &gid) < 0)
		return fail(err, err_bytes, -ENOENT, "unknown group '%s' in [control] group", group);
	struct stat st;
	if (stat(s->socket_path, &st) < 0 || st.st_dev != s->socket_dev || st.st_ino != s->socket_ino)
		return fail(err, err_bytes, -ESTALE, "%s is no longer this daemon's socket",
			    s->socket_path);
	/* In the order that never lets in anyone neither group lets in: a
	 * group given is set before the mode opens to it, and the mode
	 * closes before a group taken away goes. */
	int r = group ? chown(s->socket_path, (uid_t)-1, gid) : chmod(s->socket_path, 0600);
	if (r == 0)
		r = group ? chmod(s->socket_path, 0660) : chown(s->socket_path, (uid_t)-1, gid);
	if (r < 0)
		return fail(err, err_bytes, -errno, "cannot give %s to its group", s->socket_path);
	pthread_mutex_lock(&s->sample_lock);
	snprintf(s->group, sizeof(s->group), "%s", group ? group : "");
	pthread_mutex_unlock(&s->sample_lock);
	return 0;
}

void ctl_server_set_metrics_listen(struct ctl_server *s, const char *where)
{
	pthread_mutex_lock(&s->sample_lock);
	snprintf(s->metrics_listen, sizeof(s->metrics_listen), "%s", where ? where : "");
	pthread_mutex_unlock(&s->sample_lock);
}

/* Points the auto path at a configured socket; a failure only costs discovery, not the mount. */
static void ctl_link_create(struct ctl_server *s)
{
	char auto_path[sizeof(s->link_path)], err[256];
	struct stat st;
	if (ctl_socket_path_for_mount(s->mountpoint, auto_path, sizeof(auto_path)) < 0 ||
	    strcmp(auto_path, s->socket_path) == 0 || ctl_dir_prepare(err, sizeof(err)) < 0)
		return;
	/* Replace only our own kind of leftover: a link, never a live socket. */
	if (lstat(auto_path, &st) == 0) {
		if (!S_ISLNK(st.st_mode))
			return;
		unlink(auto_path);
	}
	if (symlink(s->socket_path, auto_path) == 0)
		strcpy(s->link_path, auto_path);
}

/* LINK_PATH ("": none), if it still points at SOCKET_PATH. */
static void ctl_link_remove(const char *link_path, const char *socket_path)
{
	char target[CTL_SOCKET_PATH_MAX];
	if (!link_path[0])
		return;
	ssize_t n = readlink(link_path, target, sizeof(target) - 1);
	if (n < 0)
		return;
	target[n] = '\0';
	if (strcmp(target, socket_path) == 0)
		unlink(link_path);
}

/* Where the socket goes: CONFIGURED, or the mountpoint's auto path (NULL). */
static int ctl_socket_path_choose(const char *mountpoint, const char *configured,
				  char out[CTL_SOCKET_PATH_MAX], char *err, size_t err_bytes)
{
	if (configured) {
		if (strlen(configured) >= CTL_SOCKET_PATH_MAX || configured[0] != '/')
			return fail(err, err_bytes, -EINVAL,
				    "socket path '%s' must be absolute and under 108 bytes", configured);
		strcpy(out, configured);
		return 0;
	}
	int r = ctl_socket_path_for_mount(mountpoint, out, CTL_SOCKET_PATH_MAX);
	if (r == -EINVAL || r == -ENAMETOOLONG)
		return fail(err, err_bytes, r, "no socket name for mountpoint '%s'", mountpoint);
	return r < 0 ? r : ctl_dir_prepare(err, err_bytes);
}

int ctl_server_set_socket(struct ctl_server *s, const char *socket_path, const char *group,
			  char *err, size_t err_bytes)
{
	char path[CTL_SOCKET_PATH_MAX];
	int r = ctl_socket_path_choose(s->mountpoint, socket_path, path, err, err_bytes);
	if (r < 0)
		return r;
	if (strcmp(path, s->socket_path) == 0)
		return ctl_server_set_group(s, group, err, err_bytes);
	/* The old one serves until the new one listens; its link may sit where the new one goes. */
	char old_path[CTL_SOCKET_PATH_MAX], old_link[CTL_SOCKET_PATH_MAX], old_group[sizeof(s->group)];
	memcpy(old_path, s->socket_path, sizeof(old_path));
	memcpy(old_link, s->link_path, sizeof(old_link));
	memcpy(old_group, s->group, sizeof(old_group));
	int old_fd = s->listen_fd;
	dev_t old_dev = s->socket_dev;
	ino_t old_ino = s->socket_ino;
	bool link_in_the_way = strcmp(old_link, path) == 0;
	if (link_in_the_way)
		ctl_link_remove(old_link, old_path);
	s->link_path[0] = '\0';
	pthread_mutex_lock(&s->sample_lock);
	strcpy(s->socket_path, path);
	pthread_mutex_unlock(&s->sample_lock);
	s->listen_fd = -1;
	r = ctl_socket_bind(s, group, err, err_bytes);
	if (r < 0) {
		if (s->listen_fd >= 0)
			close(s->listen_fd);
		pthread_mutex_lock(&s->sample_lock);
		memcpy(s->socket_path, old_path, sizeof(s->socket_path));
		memcpy(s->group, old_group, sizeof(s->group));
		pthread_mutex_unlock(&s->sample_lock);
		memcpy(s->link_path, old_link, sizeof(s->link_path));
		s->listen_fd = old_fd;
		s->socket_dev = old_dev;
		s->socket_ino = old_ino;
		if (link_in_the_way)
			ctl_link_create(s);
		return r;
	}
	/* The old socket goes before the link is made: it may be at the auto path. */
	if (!link_in_the_way)
		ctl_link_remove(old_link, old_path);
	struct stat st;
	if (stat(old_path, &st) == 0 && st.st_dev == old_dev && st.st_ino == old_ino)
		unlink(old_path);
	close(old_fd);
	if (socket_path)
		ctl_link_create(s);
	return 0;
}

static char *dup_or_empty(const char *s)
{
	return strdup(s ? s : "");
}

/* The memory a server owns, whether or not it ever listened. */
static void ctl_server_release(struct ctl_server *s)
{
	free(s->mountpoint);
	free(s->backing);
	free(s->config_path);
	free(s->older);
	free(s->newer);
	pthread_mutex_destroy(&s->sample_lock);
	free(s);
}

int ctl_server_new(const struct ctl_server_params *p, struct ctl_server **out, char *err,
		   size_t err_bytes)
{
	*out = NULL;
	struct ctl_server *s = calloc(1, sizeof(*s));
	if (!s)
		return fail(err, err_bytes, -ENOMEM, "%s", "server");
	s->listen_fd = s->stop_fd = s->signal_fd = -1;
	pthread_mutex_init(&s->sample_lock, NULL);
	s->stats = p->stats;
	s->tenants = p->tenants;
	s->reload = p->reload;
	s->reload_ctx = p->reload_ctx;
	s->max_tenants = stats_max_tenants(p->stats);
	s->start_ns = s->older_ns = s->newer_ns = clock_now_ns();
	s->mountpoint = dup_or_empty(p->mountpoint);
	s->backing = dup_or_empty(p->backing);
	s->config_path = dup_or_empty(p->config_path);
	s->older = calloc(s->max_tenants, sizeof(*s->older));
	s->newer = calloc(s->max_tenants, sizeof(*s->newer));
	int r = 0;
	if (!s->mountpoint || !s->backing || !s->config_path || !s->older ||
	    !s->newer) {
		r = fail(err, err_bytes, -ENOMEM, "%s", "server");
		goto out_free;
	}
	if ((r = ctl_socket_path_choose(s->mountpoint, p->socket_path, s->socket_path, err,
					err_bytes)) < 0)
		goto out_free;
	if ((r = ctl_socket_bind(s, p->group, err, err_bytes)) < 0)
		goto out_close;
	if (p->socket_path)
		ctl_link_create(s);
	s->stop_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (s->stop_fd < 0) {
		r = fail(err, err_bytes, -errno, "%s", "eventfd");
		goto out_unlink;
	}
	if (p->reload_signal) {
		sigset_t mask;
		sigemptyset(&mask);
		sigaddset(&mask, p->reload_signal);
		s->signal_fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
		if (s->signal_fd < 0) {
			r = fail(err, err_bytes, -errno, "%s", "signalfd");
			goto out_unlink;
		}
	}
	*out = s;
	return 0;

out_unlink:
	ctl_link_remove(s->link_path, s->socket_path);
	unlink(s->socket_path);
out_close:
	if (s->listen_fd >= 0)
		close(s->listen_fd);
	if (s->stop_fd >= 0)
		close(s->stop_fd);
out_free:
	ctl_server_release(s);
	return r;
}

const char *ctl_server_socket_path(const struct ctl_server *s)
{
	return s->socket_path;
}

/* ---- samples ------------------------------------------------------------- */

static void ctl_sample_take(struct ctl_server *s, uint64_t now)
{
	pthread_mutex_lock(&s->sample_lock);
	struct ctl_sample *t = s->older;
	s->older = s->newer;
	s->older_ns = s->newer_ns;
	s->newer = t;
	s->newer_ns = now;
	for (uint32_t id = 0; id < s->max_tenants; id++) {
		struct stats_tenant_snapshot snap;
		stats_read_tenant(s->stats, id, &snap);
		uint64_t ops = 0;
		for (int op = 0; op < STATS_OP_NR; op++)
			ops += snap.ops[op];
		s->newer[id] = (struct ctl_sample){.read_bytes = snap.bytes[STATS_OP_READ],
						   .write_bytes = snap.bytes[STATS_OP_WRITE],
						   .ops = ops,
						   .charged_bytes = snap.sched.charged_bytes};
	}
	pthread_mutex_unlock(&s->sample_lock);
}

/* Counters only grow, except when a retired tenant's id is reused: never underflow. */
static uint64_t delta(uint64_t newer, uint64_t older)
{
	return newer > older ? newer - older : 0;
}

/* ---- replies ------------------------------------------------------------- */

static struct json_object *reply_error(const char *msg)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(0));
	json_object_object_add(o, "error", json_object_new_string(msg));
	return o;
}

static struct json_object *reply_ok(void)
{
	struct json_object *o = json_object_new_object();
	json_object_object_add(o, "ok", json_object_new_boolean(1));
	return o;
}

/* Appends tenant ID's row: SNAP, INFO, and its last interval from the samples. False when out of memory. */
static bool ctl_row_add(struct ctl_server *s, uint32_t id, const struct stats_tenant_snapshot *snap,
			const struct tenant_info *info, struct ctl_row **rows, size_t *n, size_t *cap)
{
	if (*n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 16;
		struct ctl_row *nr = realloc(*rows, ncap * sizeof(**rows));
		if (!nr)
			return false;
		*rows = nr;
		*cap = ncap;
	}
	struct ctl_row *r = &(*rows)[*n];
	r->path = strdup(info->path);
	if (!r->path)
		return false;
	r->id = id;
	r->parent = info->parent;
	r->weight = info->weight;
	r->source = info->weight_source;
	r->snap = *snap;
	r->interval_read = delta(s->newer[id].read_bytes, s->older[id].read_bytes);
	r->interval_write = delta(s->newer[id].write_bytes, s->older[id].write_bytes);
	r->interval_bytes = r->interval_read + r->interval_write;
	r->interval_ops = delta(s->newer[id].ops, s->older[id].ops);
	r->interval_charged = delta(s->newer[id].charged_bytes, s->older[id].charged_bytes);
	r->active = r->interval_ops || snap->sched.pending || snap->sched.inflight;
	(*n)++;
	return true;
}

/*
 * Live tenants that ever did I/O or have some queued, and every ancestor of
 * one (a parent with no I/O of its own still holds its children's shares).
 */
static size_t ctl_rows_collect(struct ctl_server *s, struct ctl_row **out)
{
	size_t n = 0, cap = 0;
	struct ctl_row *rows = NULL;
	struct tenant_info *info = malloc(sizeof(*info));
	bool *listed = calloc(s->max_tenants, sizeof(*listed));
	*out = NULL;
	if (!info || !listed)
		goto out;
	for (uint32_t id = 0; id < s->max_tenants; id++) {
		struct stats_tenant_snapshot snap;
		stats_read_tenant(s->stats, id, &snap);
		if (!snap.active && !snap.sched.pending && !snap.sched.inflight)
			continue;
		if (tenant_get_info(s->tenants, id, info) < 0)
			continue;
		if (!ctl_row_add(s, id, &snap, info, &rows, &n, &cap))
			goto out;
		listed[id] = true;
	}
	/* Rows appended here are walked in turn, so grandparents come too. */
	for (size_t i = 0; i < n; i++) {
		uint32_t p = rows[i].parent;
		if (p >= s->max_tenants || listed[p] || tenant_get_info(s->tenants, p, info) < 0)
			continue; /* top level, already listed, or retired meanwhile: shown top level */
		struct stats_tenant_snapshot snap;
		stats_read_tenant(s->stats, p, &snap);
		if (!ctl_row_add(s, p, &snap, info, &rows, &n, &cap))
			goto out;
		listed[p] = true;
	}
out:
	free(info);
	free(listed);
	*out = rows;
	return n;
}

/* The scheduler's settings in force, in the config file's terms (a reload
 * changes some: fusesched.conf(5)). */
static void ctl_settings_json(struct json_object *o, const struct stats_settings *set)
{
	const struct sched_params *p = &set->sched;
	static const char *const cost_keys[SCHED_COST_KINDS] = {
		[SCHED_COST_READ] = "read_cost",
		[SCHED_COST_WRITE] = "write_cost",
		[SCHED_COST_DSYNC] = "dsync_cost",
	};
	for (int k = 0; k < SCHED_COST_KINDS; k++) {
		struct json_object *c = NULL;
		if (p->model_iops[k]) {
			c = json_object_new_object();
			ctl_json_add_u64(c, "iops", p->model_iops[k]);
			ctl_json_add_u64(c, "mb_per_s", p->model_bytes_per_s[k] / 1000000u);
		}
		json_object_object_add(o, cost_keys[k], c);
	}
	json_object_object_add(o, "learn_depth", json_object_new_boolean(p->learn_depth));
	json_object_object_add(o, "work_conserving",
			       json_object_new_string(p->work_conserving == SCHED_DOOR_OPEN   ? "yes"
						      : p->work_conserving == SCHED_DOOR_SHUT ? "no"
											: "auto"));
	json_object_object_add(o, "idle",
			       json_object_new_string(!p->idle_enable	? "off"
						      : p->idle_fixed_ns ? "fixed"
									 : "auto"));
	json_object_object_add(o, "idle_fixed_us",
			       p->idle_enable && p->idle_fixed_ns
				       ? json_object_new_int64((int64_t)(p->idle_fixed_ns / 1000u))
				       : NULL);
	ctl_json_add_u64(o, "budget_timeout_ms", p->budget_timeout_ns / 1000000u);
	ctl_json_add_u64(o, "busy_poll_us", set->busy_poll_ns / 1000u);
	ctl_json_add_u64(o, "reserve_ms", p->reserve_window_ns / 1000000u);
}

static struct json_object *ctl_stat_reply(struct ctl_server *s, uint64_t now)
{
	struct json_object *o = reply_ok();
	json_object_object_add(o, "version", json_object_new_string(FUSESCHED_VERSION));
	ctl_json_add_u64(o, "pid", (uint64_t)getpid());
	json_object_object_add(o, "mount", json_object_new_string(s->mountpoint));
	json_object_object_add(o, "backing", json_object_new_string(s->backing));
	json_object_object_add(o, "config", s->config_path[0] ? json_object_new_string(s->config_path)
							       : NULL);
	pthread_mutex_lock(&s->sample_lock);
	json_object_object_add(o, "socket", json_object_new_string(s->socket_path));
	json_object_object_add(o, "socket_group",
			       s->group[0] ? json_object_new_string(s->group) : NULL);
	json_object_object_add(o, "metrics_listen", s->metrics_listen[0]
							    ? json_object_new_string(s->metrics_listen)
							    : NULL);
	pthread_mutex_unlock(&s->sample_lock);
	struct stats_settings set;
	stats_read_settings(s->stats, &set);
	json_object_object_add(o, "policy", json_object_new_string(sched_policy_name(set.sched.policy)));
	ctl_settings_json(o, &set);
	uint64_t peak;
	uint32_t inflight, max_inflight, reserved;
	stats_read_global(s->stats, &peak, &inflight, &max_inflight, &reserved);
	ctl_json_add_u64(o, "inflight", inflight);
	ctl_json_add_u64(o, "max_inflight", max_inflight);
	ctl_json_add_u64(o, "reserved_slots", reserved);
	ctl_json_add_u64(o, "hung", stats_read_hung(s->stats));
	ctl_json_add_u64(o, "executors", stats_read_executors(s->stats));
	ctl_json_add_u64(o, "max_background", stats_read_kernel_queue(s->stats));
	ctl_json_add_u64(o, "watch_timeout_s", stats_read_watch_timeout(s->stats));
	ctl_json_add_u64(o, "peak_rate_bytes_per_s", peak);
	ctl_json_add_double(o, "uptime_s", (double)(now - s->start_ns) / CTL_NS_PER_S);
	struct ctl_row *rows;
	pthread_mutex_lock(&s->sample_lock);
	double interval_s = (double)(s->newer_ns - s->older_ns) / CTL_NS_PER_S;
	size_t n = ctl_rows_collect(s, &rows);
	pthread_mutex_unlock(&s->sample_lock);
	ctl_json_add_double(o, "interval_s", interval_s);
	struct json_object *tenants = ctl_tenants_json(rows, n, interval_s);
	for (size_t i = 0; i < n; i++)
		free(rows[i].path);
	free(rows);
	if (!tenants) {
		json_object_put(o);
		return reply_error("out of memory");
	}
	json_object_object_add(o, "tenants", tenants);
	return o;
}

struct json_object *ctl_server_stat_reply(struct ctl_server *s)
{
	return ctl_stat_reply(s, clock_now_ns());
}

static struct json_object *ctl_reload_reply(struct ctl_server *s)
{
	if (!s->reload)
		return reply_error("this daemon cannot reload");
	struct ctl_reload_result *res = calloc(1, sizeof(*res));
	if (!res)
		return reply_error("out of memory");
	struct json_object *o;
	if (s->reload(s->reload_ctx, res) < 0) {
		o = reply_error(res->error[0] ? res->error : "reload failed");
	} else {
		char msg[sizeof(res->config_path) + 16];
		snprintf(msg, sizeof(msg), "reloaded %s", res->config_path);
		o = reply_ok();
		json_object_object_add(o, "config", json_object_new_string(res->config_path));
		json_object_object_add(o, "message", json_object_new_string(msg));
	}
	free(res);
	return o;
}

static struct json_object *ctl_handle_line(struct ctl_server *s, const char *line, size_t len,
					   uint64_t now)
{
	char msg[256];
	switch (ctl_request_parse(line, len, msg, sizeof(msg))) {
	case CTL_CMD_STAT:
		return ctl_stat_reply(s, now);
	case CTL_CMD_RELOAD:
		return ctl_reload_reply(s);
	case CTL_CMD_VERSION: {
		struct json_object *reply = reply_ok();
		json_object_object_add(reply, "version", json_object_new_string(FUSESCHED_VERSION));
		ctl_json_add_u64(reply, "pid", (uint64_t)getpid());
		return reply;
	}
	default:
		return reply_error(msg);
	}
}

/* ---- clients ------------------------------------------------------------- */

static void client_close(struct ctl_client *c)
{
	close(c->fd);
	free(c->in);
	free(c->out);
	c->fd = -1;
	c->in = c->out = NULL;
}

/* Queues REPLY (consumed) as one line. Returns false when out of memory. */
static bool client_queue(struct ctl_client *c, struct json_object *reply)
{
	size_t len;
	const char *text = json_object_to_json_string_length(reply, CTL_JSON_FLAGS, &len);
	free(c->out);
	c->out = text ? malloc(len + 1) : NULL;
	if (c->out) {
		memcpy(c->out, text, len);
		c->out[len] = '\n';
		c->out_len = len + 1;
		c->out_off = 0;
	}
	json_object_put(reply);
	return c->out != NULL;
}

static bool client_has_output(const struct ctl_client *c)
{
	return c->out && c->out_off < c->out_len;
}

/* Serves the next complete request, if any and if the last reply went out. */
static bool client_serve_next(struct ctl_server *s, struct ctl_client *c, uint64_t now)
{
	while (!client_has_output(c) && !c->discarding) {
		char *nl = memchr(c->in, '\n', c->in_len);
		if (!nl) {
			if (c->in_len < CTL_REQUEST_MAX_BYTES)
				return true;
			c->discarding = true;
			c->in_len = 0;
			char msg[96];
			snprintf(msg, sizeof(msg), "request longer than %u bytes: closing",
				 CTL_REQUEST_MAX_BYTES);
			return client_queue(c, reply_error(msg));
		}
		size_t len = (size_t)(nl - c->in);
		bool ok = len == 0 || client_queue(c, ctl_handle_line(s, c->in, len, now));
		c->in_len -= len + 1;
		memmove(c->in, nl + 1, c->in_len);
		if (!ok)
			return false;
	}
	return true;
}

/* Returns false on a dead connection. */
static bool client_on_writable(struct ctl_client *c, uint64_t now)
{
	while (client_has_output(c)) {
		ssize_t n = send(c->fd, c->out + c->out_off, c->out_len - c->out_off,
				 MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		c->out_off += (size_t)n;
		c->last_progress_ns = now;
	}
	if (c->discarding && !c->shut_wr) {
		/* The error is out: tell the client no more replies will come. */
		shutdown(c->fd, SHUT_WR);
		c->shut_wr = true;
	}
	return true;
}

/* A request is started by its first byte and ends with its newline (client_serve_next). */
static void note_request_start(struct ctl_client *c, size_t in_len_before, uint64_t now)
{
	if (c->in_len == 0)
		c->request_start_ns = 0;
	else if (in_len_before == 0 || c->in_len < in_len_before)
		c->request_start_ns = now;
}

/* Reads what the client sent; false on a dead connection. */
static bool client_read(struct ctl_client *c, uint64_t now)
{
	char scratch[16384];
	for (;;) {
		char *dst = c->discarding ? scratch : c->in + c->in_len;
		size_t room = c->discarding ? sizeof(scratch) : CTL_REQUEST_MAX_BYTES - c->in_len;
		if (room == 0)
			break;
		ssize_t n = recv(c->fd, dst, room, MSG_DONTWAIT);
		if (n < 0)
			return errno == EAGAIN || errno == EINTR;
		if (n == 0) {
			c->eof = true; /* a partial request at EOF is dropped */
			break;
		}
		c->last_progress_ns = now;
		if (c->discarding) {
			c->discarded_bytes += (uint64_t)n;
			if (c->discarded_bytes > CTL_DISCARD_MAX_BYTES)
				return false;
		} else {
			c->in_len += (size_t)n;
			if (memchr(dst, '\n', (size_t)n))
				break;
		}
	}
	return true;
}

static bool client_on_readable(struct ctl_server *s, struct ctl_client *c, uint64_t now)
{
	return client_read(c, now) && client_serve_next(s, c, now);
}

/*
 * Full: the client heard from least recently makes room, so clients that
 * connect and hold their slot (slowly or not at all) cannot lock out one
 * that comes to ask.
 */
static void drop_least_recent(struct ctl_server *s)
{
	size_t oldest = 0;
	for (size_t i = 1; i < s->client_count; i++)
		if (s->clients[i].last_progress_ns < s->clients[oldest].last_progress_ns)
			oldest = i;
	struct ctl_client *c = &s->clients[oldest];
	static const char dropped[] = "{\"ok\":false,\"error\":\"too many clients: dropped\"}\n";
	ssize_t ignored = send(c->fd, dropped, sizeof(dropped) - 1, MSG_NOSIGNAL | MSG_DONTWAIT);
	(void)ignored; /* best effort: the client learns why, or just sees EOF */
	client_close(c);
	s->clients[oldest] = s->clients[--s->client_count];
}

static void ctl_accept(struct ctl_server *s, uint64_t now)
{
	for (;;) {
		int fd = accept4(s->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0)
			return;
		if (s->client_count == CTL_MAX_CLIENTS)
			drop_least_recent(s);
		struct ctl_client *c = &s->clients[s->client_count];
		memset(c, 0, sizeof(*c));
		c->fd = fd;
		c->in = malloc(CTL_REQUEST_MAX_BYTES);
		c->last_progress_ns = now;
		if (!c->in) {
			close(fd);
			continue;
		}
		s->client_count++;
	}
}

/* ---- the thread ---------------------------------------------------------- */

static void ctl_on_signal(struct ctl_server *s)
{
	struct signalfd_siginfo si;
	bool got = false;
	while (read(s->signal_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
		got = true;
	/* The daemon's callback logs the outcome; nobody waits for a reply. */
	if (got)
		json_object_put(ctl_reload_reply(s));
}

static void *ctl_server_main(void *arg)
{
	struct ctl_server *s = arg;
	uint64_t next_sample_ns = clock_now_ns() + CTL_SAMPLE_NS;
	for (;;) {
		struct pollfd pfd[3 + CTL_MAX_CLIENTS];
		pfd[0] = (struct pollfd){.fd = s->stop_fd, .events = POLLIN};
		pfd[1] = (struct pollfd){.fd = s->listen_fd, .events = POLLIN};
		pfd[2] = (struct pollfd){.fd = s->signal_fd, .events = POLLIN};
		for (size_t i = 0; i < s->client_count; i++) {
			const struct ctl_client *c = &s->clients[i];
			short ev = client_has_output(c) ? POLLOUT : 0;
			if (!client_has_output(c) || c->discarding)
				ev |= POLLIN;
			pfd[3 + i] = (struct pollfd){.fd = c->fd, .events = ev};
		}
		uint64_t now = clock_now_ns();
		int timeout_ms = now >= next_sample_ns ? 0
						       : (int)((next_sample_ns - now) / 1000000u) + 1;
		int n = poll(pfd, 3 + s->client_count, timeout_ms);
		if (n < 0 && errno != EINTR)
			break;
		now = clock_now_ns();
		if (pfd[0].revents)
			break;
		if (pfd[2].revents)
			ctl_on_signal(s);
		size_t kept = 0;
		for (size_t i = 0; i < s->client_count; i++) {
			struct ctl_client *c = &s->clients[i];
			short re = pfd[3 + i].revents;
			size_t in_len_before = c->in_len;
			bool alive = !(re & (POLLERR | POLLNVAL));
			if (alive && (re & POLLOUT))
				alive = client_on_writable(c, now) &&
					client_serve_next(s, c, now);
			if (alive && (re & (POLLIN | POLLHUP)))
				alive = client_on_readable(s, c, now);
			note_request_start(c, in_len_before, now);
			/* Done once EOF is seen and every reply is out. */
			if (alive && c->eof && !client_has_output(c))
				alive = false;
			if (alive && now - c->last_progress_ns > CTL_CLIENT_IDLE_NS)
				alive = false;
			if (alive && c->request_start_ns &&
			    now - c->request_start_ns > CTL_REQUEST_DEADLINE_NS)
				alive = false;
			if (!alive)
				client_close(c);
			else
				s->clients[kept++] = *c;
		}
		s->client_count = kept;
		if (pfd[1].revents & POLLIN)
			ctl_accept(s, now);
		if (now >= next_sample_ns) {
			ctl_sample_take(s, now);
			tenant_table_refresh_weights(s->tenants, now, CTL_WEIGHT_REFRESH_MAX);
			next_sample_ns = now + CTL_SAMPLE_NS;
		}
	}
	for (size_t i = 0; i < s->client_count; i++)
		client_close(&s->clients[i]);
	s->client_count = 0;
	return NULL;
}

int ctl_server_start(struct ctl_server *s)
{
	int r = pthread_create(&s->thread, NULL, ctl_server_main, s);
	if (r)
		return -r;
	s->started = true;
	return 0;
}

/* Frees the socket's name for the next daemon at once, not after the drain. */
static void ctl_socket_release(struct ctl_server *s)
{
	if (s->listen_fd < 0)
		return;
	struct stat st;
	/* Only if it is still ours: a later daemon may have replaced it. */
	if (stat(s->socket_path, &st) == 0 && st.st_dev == s->socket_dev &&
	    st.st_ino == s->socket_ino)
		unlink(s->socket_path);
	ctl_link_remove(s->link_path, s->socket_path);
	close(s->listen_fd);
	s->listen_fd = -1;
}

void ctl_server_unlink_socket(struct ctl_server *s)
{
	char path[CTL_SOCKET_PATH_MAX], link_path[CTL_SOCKET_PATH_MAX];
	pthread_mutex_lock(&s->sample_lock);
	memcpy(path, s->socket_path, sizeof(path));
	memcpy(link_path, s->link_path, sizeof(link_path));
	dev_t dev = s->socket_dev;
	ino_t ino = s->socket_ino;
	bool listening = s->listen_fd >= 0;
	pthread_mutex_unlock(&s->sample_lock);
	struct stat st;
	if (!listening)
		return;
	if (stat(path, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
		unlink(path);
	ctl_link_remove(link_path, path);
}

void ctl_server_stop(struct ctl_server *s)
{
	if (!s || !s->started)
		return;
	uint64_t one = 1;
	ssize_t ignored = write(s->stop_fd, &one, sizeof(one));
	(void)ignored; /* an eventfd write only fails on overflow, which also wakes the poll */
	pthread_join(s->thread, NULL);
	s->started = false;
	ctl_socket_release(s);
}

void ctl_server_free(struct ctl_server *s)
{
	if (!s)
		return;
	ctl_server_stop(s);
	ctl_socket_release(s);
	close(s->stop_fd);
	if (s->signal_fd >= 0)
		close(s->signal_fd);
	ctl_server_release(s);
}
