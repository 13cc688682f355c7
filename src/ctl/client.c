/* `fusesched stat` and `fusesched reload`: find the mounts, ask their daemons, print. */
#include "fusesched/ctl.h"
#include "fusesched/mountinfo.h"
#include "ctl_internal.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A wedged daemon must not hang the command forever. */
#define CTL_CLIENT_TIMEOUT_MS 10000
/* A stat reply with thousands of tenants is a few MiB; more is not a reply. */
#define CTL_REPLY_MAX_BYTES (256u << 20)

/* ---- mounts ---------------------------------------------------------------- */

struct ctl_mount {
	char mnt[PATH_MAX];
	char source[PATH_MAX];
};

/* Every fuse.fusesched mount visible here, in mount order. Returns the count or -errno. */
static int ctl_mounts_list(struct ctl_mount **out)
{
	*out = NULL;
	FILE *f = fopen("/proc/self/mountinfo", "re");
	if (!f)
		return -errno;
	struct ctl_mount *list = NULL;
	int n = 0;
	char *line = NULL;
	size_t cap = 0;
	while (getline(&line, &cap, f) > 0) {
		/* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER */
		char *sep = strstr(line, " - ");
		char mnt[PATH_MAX], fstype[64], source[PATH_MAX];
		if (!sep || sscanf(line, "%*s %*s %*s %*s %4095s", mnt) != 1 ||
		    sscanf(sep + 3, "%63s %4095s", fstype, source) != 2 ||
		    strcmp(fstype, "fuse.fusesched") != 0)
			continue;
		struct ctl_mount *grown = realloc(list, (size_t)(n + 1) * sizeof(*list));
		if (!grown)
			break;
		list = grown;
		mountinfo_unescape(list[n].mnt, sizeof(list[n].mnt), mnt, strlen(mnt));
		mountinfo_unescape(list[n].source, sizeof(list[n].source), source, strlen(source));
		n++;
	}
	free(line);
	fclose(f);
	*out = list;
	return n;
}

/*
 * The mounts ARG names (all of them when ARG is NULL). Returns the count,
 * or -1 after saying why ARG is not a fusesched mount.
 */
static int ctl_mounts_select(const char *arg, struct ctl_mount **out)
{
	int n = ctl_mounts_list(out);
	if (n < 0) {
		fprintf(stderr, "fusesched: cannot read /proc/self/mountinfo: %s\n", strerror(-n));
		return -1;
	}
	if (!arg)
		return n;
	char real[PATH_MAX];
	if (realpath(arg, real)) {
		/* The last match is the one on top, the one a path lookup sees. */
		for (int i = n - 1; i >= 0; i--) {
			if (strcmp((*out)[i].mnt, real) == 0) {
				(*out)[0] = (*out)[i];
				return 1;
			}
		}
	}
	fprintf(stderr, "fusesched: '%s' is not a fusesched mount (no fuse.fusesched mount there in "
		"/proc/self/mountinfo)\n", arg);
	free(*out);
	*out = NULL;
	return -1;
}

/* ---- one request ----------------------------------------------------------- */

static int ctl_wait(int fd, short events)
{
	struct pollfd p = {.fd = fd, .events = events};
	int r = poll(&p, 1, CTL_CLIENT_TIMEOUT_MS);
	return r > 0 ? 0 : r == 0 ? -ETIMEDOUT : -errno;
}

/* Sends CMD to MOUNT's daemon; *reply is its parsed answer. Returns 0 or -errno with a message. */
static int ctl_request(const char *mnt, const char *cmd, struct json_object **reply, char *err,
		       size_t err_bytes)
{
	*reply = NULL;
	struct sockaddr_un addr = {.sun_family = AF_UNIX};
	int r = ctl_socket_path_for_mount(mnt, addr.sun_path, sizeof(addr.sun_path));
	if (r < 0) {
		snprintf(err, err_bytes, "no control socket name for '%s'", mnt);
		return r;
	}
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		r = -errno;
		snprintf(err, err_bytes, "cannot connect to %s: %s%s", addr.sun_path, strerror(-r),
			 r == -EACCES	    ? " (needs root, or the [control] group)"
			 : r == -ENOENT	    ? " (is the daemon running? a fusesched older than stat?)"
			 : r == -ECONNREFUSED ? " (the daemon is gone)"
					      : "");
		if (fd >= 0)
			close(fd);
		return r;
	}
	struct json_object *req = json_object_new_object();
	json_object_object_add(req, "cmd", json_object_new_string(cmd));
	char line[64];
	snprintf(line, sizeof(line), "%s\n", json_object_to_json_string_ext(req, CTL_JSON_FLAGS));
	json_object_put(req);
	size_t len = strlen(line);
	if (send(fd, line, len, MSG_NOSIGNAL) != (ssize_t)len) {
		r = -errno;
		snprintf(err, err_bytes, "cannot send to %s: %s", addr.sun_path, strerror(-r));
		close(fd);
		return r;
	}
	char *buf = NULL;
	size_t used = 0, cap = 0;
	char *nl = NULL;
	while (!nl) {
		if (used + 65536 > cap) {
			size_t ncap = cap ? cap * 2 : 262144;
			char *nb = ncap <= CTL_REPLY_MAX_BYTES ? realloc(buf, ncap) : NULL;
			if (!nb) {
				r = -EMSGSIZE;
				break;
			}
			buf = nb;
			cap = ncap;
		}
		if ((r = ctl_wait(fd, POLLIN)) < 0)
			break;
		ssize_t n = recv(fd, buf + used, cap - used, 0);
		if (n <= 0) {
			r = n == 0 ? -ECONNRESET : -errno;
			break;
		}
		nl = memchr(buf + used, '\n', (size_t)n);
		used += (size_t)n;
	}
	close(fd);
	if (nl) {
		*nl = '\0';
		*reply = json_tokener_parse(buf);
		r = *reply && json_object_is_type(*reply, json_type_object) ? 0 : -EPROTO;
	}
	if (r < 0)
		snprintf(err, err_bytes, "no valid reply from %s: %s", addr.sun_path, strerror(-r));
	free(buf);
	return r;
}

static const char *reply_error_text(struct json_object *reply)
{
	struct json_object *ok, *e;
	if (json_object_object_get_ex(reply, "ok", &ok) && json_object_get_boolean(ok))
		return NULL;
	return json_object_object_get_ex(reply, "error", &e) ? json_object_get_string(e)
							      : "the daemon refused the request";
}

/* ---- field access ---------------------------------------------------------- */

/* Value at a dotted PATH ("latency_ns.p50"), NULL if absent. */
static struct json_object *field(struct json_object *o, const char *path)
{
	char key[64];
	while (o && *path) {
		size_t len = strcspn(path, ".");
		snprintf(key, sizeof(key), "%.*s", (int)len, path);
		struct json_object *next = NULL;
		if (!json_object_object_get_ex(o, key, &next))
			return NULL;
		o = next;
		path += len + (path[len] == '.');
	}
	return o;
}

static double num(struct json_object *o, const char *path)
{
	return json_object_get_double(field(o, path));
}

static uint64_t u64(struct json_object *o, const char *path)
{
	return json_object_get_uint64(field(o, path));
}

static const char *str(struct json_object *o, const char *path)
{
	const char *s = json_object_get_string(field(o, path));
	return s ? s : "";
}

/* Table and label name of a tenant: the default tenant has no cgroup. */
static const char *tenant_name(struct json_object *t)
{
	const char *p = str(t, "cgroup");
	return p[0] ? p : "(default)";
}

/* ---- human units ----------------------------------------------------------- */

/* Three significant digits and a suffix of powers of BASE. */
static void human_scaled(char *out, size_t out_bytes, double v, double base,
			 const char *const *suffix, size_t nsuffix)
{
	size_t i = 0;
	while (v >= base && i + 1 < nsuffix) {
		v /= base;
		i++;
	}
	if (i == 0)
		snprintf(out, out_bytes, "%.0f%s", v, suffix[0]);
	else
		snprintf(out, out_bytes, v < 10 ? "%.2f%s" : v < 100 ? "%.1f%s" : "%.0f%s", v, suffix[i]);
}

static void human_bytes(char *out, size_t n, double v)
{
	static const char *const sfx[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
	human_scaled(out, n, v, 1024, sfx, 6);
}

static void human_count(char *out, size_t n, double v)
{
	static const char *const sfx[] = {"", "k", "M", "G", "T"};
	human_scaled(out, n, v, 1000, sfx, 5);
}

static void human_ns(char *out, size_t n, double ns)
{
	static const char *const sfx[] = {"ns", "us", "ms", "s"};
	if (ns >= 60e9)
		snprintf(out, n, "%.0fm%02.0fs", ns / 60e9, (double)((uint64_t)(ns / 1e9) % 60));
	else
		human_scaled(out, n, ns, 1000, sfx, 4);
}

static void human_uptime(char *out, size_t n, double s)
{
	uint64_t t = (uint64_t)s;
	if (t >= 86400)
		snprintf(out, n, "%" PRIu64 "d%02" PRIu64 "h%02" PRIu64 "m", t / 86400, t / 3600 % 24,
			 t / 60 % 60);
	else if (t >= 3600)
		snprintf(out, n, "%" PRIu64 "h%02" PRIu64 "m%02" PRIu64 "s", t / 3600, t / 60 % 60, t % 60);
	else
		snprintf(out, n, "%" PRIu64 "m%02" PRIu64 "s", t / 60, t % 60);
}

static void human_pct(char *out, size_t n, double share)
{
	snprintf(out, n, "%.1f%%", share * 100);
}

/* ---- table ----------------------------------------------------------------- */

enum col_kind { COL_TEXT, COL_COUNT, COL_BYTES_RATE, COL_PCT, COL_NS, COL_INJ, COL_EXP };

struct col {
	const char *sort_key;  /* --sort name */
	const char *header;
	const char *field;     /* JSON field sorted and shown */
	enum col_kind kind;
	int width;
};

static const struct col COLS[] = {
	{"tenant", "TENANT", "cgroup", COL_TEXT, 0},
	{"weight", "WEIGHT", "weight", COL_COUNT, 6},
	{"target", "TARGET", "target_share", COL_PCT, 6},
	{"share", "SHARE", "share_interval", COL_PCT, 6},
	{"share-total", "SH.ALL", "share_total", COL_PCT, 6},
	{"time", "TIME", "time_share_interval", COL_PCT, 6},
	{"read", "READ/s", "read_bytes_per_s", COL_BYTES_RATE, 8},
	{"write", "WRITE/s", "write_bytes_per_s", COL_BYTES_RATE, 8},
	{"iops", "IOPS", "iops", COL_COUNT, 6},
	{"p50", "P50", "latency_ns.p50", COL_NS, 7},
	{"p99", "P99", "latency_ns.p99", COL_NS, 7},
	{"max", "MAX", "latency_ns.max", COL_NS, 7},
	{"queued", "QUEUED", "queued", COL_COUNT, 6},
	{"inflight", "INFL", "inflight", COL_COUNT, 5},
	{"idle", "IDLE#", "idle_windows", COL_COUNT, 6},
	{"idle-time", "IDLE", "idle_ns", COL_NS, 7},
	{"injected", "INJ w/f/g", "injected", COL_INJ, 11},
	{"expired", "EXP x/t/e/i/p", "expirations", COL_EXP, 15},
};
#define NCOLS (sizeof(COLS) / sizeof(COLS[0]))

static double sum_fields(struct json_object *o)
{
	double total = 0;
	json_object_object_foreach(o, key, val)
	{
		(void)key;
		total += json_object_get_double(val);
	}
	return total;
}

static void cell(char *out, size_t n, const struct col *c, struct json_object *t)
{
	struct json_object *v = field(t, c->field);
	double d = json_object_get_double(v);
	switch (c->kind) {
	case COL_TEXT:
		snprintf(out, n, "%s", tenant_name(t));
		break;
	case COL_COUNT:
		human_count(out, n, d);
		break;
	case COL_BYTES_RATE:
		human_bytes(out, n, d);
		break;
	case COL_PCT:
		human_pct(out, n, d);
		break;
	case COL_NS:
		human_ns(out, n, d);
		break;
	case COL_INJ: {
		char w[16], f[16], g[16];
		human_count(w, sizeof(w), num(v, "waker"));
		human_count(f, sizeof(f), num(v, "fsync"));
		human_count(g, sizeof(g), num(v, "general"));
		snprintf(out, n, "%s/%s/%s", w, f, g);
		break;
	}
	case COL_EXP: {
		static const char *const keys[] = {"exhausted", "timeout", "emptied", "too_idle",
						   "preempted"};
		size_t used = 0;
		out[0] = '\0';
		for (size_t i = 0; i < 5 && used < n; i++) {
			char c5[16];
			human_count(c5, sizeof(c5), num(v, keys[i]));
			used += (size_t)snprintf(out + used, n - used, "%s%s", i ? "/" : "", c5);
		}
		break;
	}
	}
}

static double sort_value(const struct col *c, struct json_object *t)
{
	struct json_object *v = field(t, c->field);
	return c->kind == COL_INJ || c->kind == COL_EXP ? sum_fields(v) : json_object_get_double(v);
}

static int compare_rows(struct json_object *ta, struct json_object *tb, const struct col *c)
{
	if (c->kind == COL_TEXT)
		return strcmp(tenant_name(ta), tenant_name(tb));
	double va = sort_value(c, ta), vb = sort_value(c, tb);
	/* Biggest first: that is what one sorts by a number to see. */
	if (va != vb)
		return va < vb ? 1 : -1;
	return strcmp(tenant_name(ta), tenant_name(tb));
}

struct rank_ctx {
	struct json_object *const *rows;
	const struct col *sort;
};

static int compare_indices(const void *a, const void *b, void *arg)
{
	const struct rank_ctx *ctx = arg;
	return compare_rows(ctx->rows[*(const size_t *)a], ctx->rows[*(const size_t *)b], ctx->sort);
}

static bool is_lower_hex(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

size_t ctl_shorten_ids(char *out, size_t out_bytes, const char *path)
{
	size_t used = 0;
	for (const char *p = path; *p;) {
		/* P starts a maximal run: runs are skipped whole, so the byte before is no hex digit. */
		size_t run = 0;
		while (is_lower_hex(p[run]))
			run++;
		size_t take = run == 0 ? 1 : run, keep = run == 64 ? 12 : take;
		for (size_t k = 0; k < keep; k++, used++)
			if (used + 1 < out_bytes)
				out[used] = p[k];
		p += take;
	}
	if (out_bytes)
		out[used < out_bytes ? used : out_bytes - 1] = '\0';
	return used;
}

/* Each row's parent id; none for top level, and for every row of a daemon older than the tree. */
static int rows_link(struct json_object *const *rows, size_t n, size_t *up, unsigned *depth)
{
	struct ctl_tree_node *nodes = malloc((n ? n : 1) * sizeof(*nodes));
	if (!nodes)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		struct json_object *p = field(rows[i], "parent");
		nodes[i] = (struct ctl_tree_node){
			.id = (uint32_t)u64(rows[i], "id"),
			.parent = json_object_is_type(p, json_type_int) ? (uint32_t)json_object_get_uint64(p)
									 : TENANT_ID_NONE};
	}
	int r = ctl_tree_link(nodes, n, up, depth);
	free(nodes);
	return r;
}

/*
 * The TENANT cell: two spaces per level, the path relative to the parent's
 * (a child's full path mostly repeats its parent's), container ids short.
 * Malloc'd; NULL when out of memory.
 */
static char *tree_name(struct json_object *t, struct json_object *parent, unsigned depth)
{
	const char *name = tenant_name(t);
	if (parent) {
		const char *pp = str(parent, "cgroup"), *p = str(t, "cgroup");
		size_t len = strlen(pp);
		if (len && strncmp(p, pp, len) == 0 && (pp[len - 1] == '/' || p[len] == '/') &&
		    p[len + (p[len] == '/')])
			name = p + len + (p[len] == '/');
	}
	size_t indent = 2 * (size_t)depth, len = ctl_shorten_ids(NULL, 0, name);
	char *out = malloc(indent + len + 1);
	if (out) {
		memset(out, ' ', indent);
		ctl_shorten_ids(out + indent, len + 1, name);
	}
	return out;
}

/* "read 61068/s 4246 MB/s" or "read off": one kind of the store's cost
 * model; whether it is set. */
static bool cost_text(char *out, size_t len, struct json_object *m, const char *key,
		      const char *kind)
{
	struct json_object *c = NULL;
	if (json_object_object_get_ex(m, key, &c) && c) {
		snprintf(out, len, "%s %" PRIu64 "/s %" PRIu64 " MB/s", kind, u64(c, "iops"),
			 u64(c, "mb_per_s"));
		return true;
	}
	snprintf(out, len, "%s off", kind);
	return false;
}

static void print_table(FILE *out, struct json_object *m, const struct col *sort)
{
	char up_time[32], peak[32], cost[3][64];
	human_uptime(up_time, sizeof(up_time), num(m, "uptime_s"));
	human_bytes(peak, sizeof(peak), num(m, "peak_rate_bytes_per_s"));
	bool model = cost_text(cost[0], sizeof(cost[0]), m, "read_cost", "read");
	model |= cost_text(cost[1], sizeof(cost[1]), m, "write_cost", "write");
	model |= cost_text(cost[2], sizeof(cost[2]), m, "dsync_cost", "dsync");
	char hung[64] = "";
	if (u64(m, "hung"))
		snprintf(hung, sizeof(hung), ", %" PRIu64 " hung, %" PRIu64 " executors", u64(m, "hung"),
			 u64(m, "executors"));
	fprintf(out, "mount %s  backing %s  policy %s  in flight %" PRIu64 "/%" PRIu64
		" (%" PRIu64 " kept%s)  kernel queue %" PRIu64 "  peak %s/s  uptime %s%s%s%s%s%s%s\n",
		str(m, "mount"), str(m, "backing"), str(m, "policy"), u64(m, "inflight"),
		u64(m, "max_inflight"), u64(m, "reserved_slots"), hung, u64(m, "max_background"), peak,
		up_time, model ? "\ncost model: " : "", model ? cost[0] : "", model ? ", " : "",
		model ? cost[1] : "", model ? ", " : "", model ? cost[2] : "");
	struct json_object *tenants = field(m, "tenants");
	size_t n = json_object_array_length(tenants), cap = n ? n : 1;
	struct json_object **rows = calloc(cap, sizeof(*rows));
	char **names = calloc(cap, sizeof(*names));
	size_t *up = malloc(3 * cap * sizeof(*up)), *rank = up ? up + cap : NULL;
	size_t *order = up ? rank + cap : NULL;
	unsigned *depth = malloc(cap * sizeof(*depth));
	if (!rows || !names || !up || !depth)
		goto out;
	for (size_t i = 0; i < n; i++) {
		rows[i] = json_object_array_get_idx(tenants, i);
		rank[i] = i;
	}
	/* Sorted within each level, each child right after its parent. */
	qsort_r(rank, n, sizeof(*rank), compare_indices, &(struct rank_ctx){rows, sort});
	if (rows_link(rows, n, up, depth) < 0 || ctl_tree_order(up, n, rank, order) < 0)
		goto out;
	int name_width = 8;
	for (size_t i = 0; i < n; i++) {
		names[i] = tree_name(rows[i], up[i] == CTL_TREE_ROOT ? NULL : rows[up[i]], depth[i]);
		if (!names[i])
			goto out;
		int w = (int)strlen(names[i]);
		if (w > name_width)
			name_width = w;
	}
	for (size_t c = 0; c < NCOLS; c++)
		fprintf(out, c ? " %*s" : "%-*s", c ? COLS[c].width : name_width, COLS[c].header);
	fputc('\n', out);
	for (size_t k = 0; k < n; k++) {
		size_t i = order[k];
		fprintf(out, "%-*s", name_width, names[i]);
		for (size_t c = 1; c < NCOLS; c++) {
			char text[128];
			cell(text, sizeof(text), &COLS[c], rows[i]);
			fprintf(out, " %*s", COLS[c].width, text);
		}
		fputc('\n', out);
	}
	if (n == 0)
		fprintf(out, "(no tenant has done I/O yet)\n");
out:
	for (size_t i = 0; names && i < n; i++)
		free(names[i]);
	free(names);
	free(rows);
	free(up);
	free(depth);
}

static const struct col *col_by_key(const char *key)
{
	for (size_t c = 0; c < NCOLS; c++)
		if (strcmp(COLS[c].sort_key, key) == 0)
			return &COLS[c];
	return NULL;
}

int ctl_print_table(FILE *out, struct json_object *mount, const char *sort_key)
{
	const struct col *sort = col_by_key(sort_key ? sort_key : "tenant");
	if (!sort)
		return -EINVAL;
	print_table(out, mount, sort);
	return 0;
}

/* ---- Prometheus ---------------------------------------------------------- */

struct prom_metric {
	const char *name, *type, *help;
	const char *field;     /* per tenant; NULL with mount_field set */
	const char *label;     /* the field is an object: one sample per key, labelled so */
	double scale;
	const char *mount_field;
};

static const struct prom_metric METRICS[] = {
	{"fusesched_uptime_seconds", "gauge", "Seconds since the daemon mounted.", NULL, NULL, 1, "uptime_s"},
	{"fusesched_inflight", "gauge", "Requests at the backing store now.", NULL, NULL, 1, "inflight"},
	{"fusesched_max_inflight", "gauge", "Configured limit of requests at the backing store.", NULL, NULL, 1, "max_inflight"},
	{"fusesched_reserved_slots", "gauge", "Dispatch slots kept free for tenants that went idle within the reserve window.", NULL, NULL, 1, "reserved_slots"},
	{"fusesched_hung", "gauge", "Requests taken to be hung: at the backing store past the hung bound (16 times the longest recent request, 200 ms to 5 s), or waiting for an executor behind their owner's hung ones. They leave the depth to the other tenants.", NULL, NULL, 1, "hung"},
	{"fusesched_executors", "gauge", "Threads running metadata, copies and large reads' answers: the depth's, and one more per request hung at the store; idle ones past that end after 10 s.", NULL, NULL, 1, "executors"},
	{"fusesched_max_background", "gauge", "The kernel's limit on async requests sent to the daemon at once.", NULL, NULL, 1, "max_background"},
	{"fusesched_peak_rate_bytes_per_second", "gauge", "Learned peak rate of the backing store.", NULL, NULL, 1, "peak_rate_bytes_per_s"},
	{"fusesched_tenant_weight", "gauge", "Weight of the tenant.", "weight", NULL, 1, NULL},
	{"fusesched_tenant_target_share", "gauge", "Share of the store the tenant and its descendants should get: product over its path of weight over the active siblings' weights.", "target_share", NULL, 1, NULL},
	{"fusesched_tenant_share_interval", "gauge", "Share of bytes received by the tenant and its descendants over the last interval.", "share_interval", NULL, 1, NULL},
	{"fusesched_tenant_share_total", "gauge", "Share of bytes received by the tenant and its descendants since mount.", "share_total", NULL, 1, NULL},
	{"fusesched_tenant_time_share_interval", "gauge", "Share of the store's time (the service the scheduler charged) received by the tenant and its descendants over the last interval.", "time_share_interval", NULL, 1, NULL},
	{"fusesched_tenant_time_share_total", "gauge", "Share of the store's time (the service the scheduler charged) received by the tenant and its descendants since mount.", "time_share_total", NULL, 1, NULL},
	{"fusesched_tenant_read_bytes_per_second", "gauge", "Bytes read per second over the last interval.", "read_bytes_per_s", NULL, 1, NULL},
	{"fusesched_tenant_write_bytes_per_second", "gauge", "Bytes written per second over the last interval.", "write_bytes_per_s", NULL, 1, NULL},
	{"fusesched_tenant_iops", "gauge", "Requests per second over the last interval.", "iops", NULL, 1, NULL},
	{"fusesched_tenant_ops_total", "counter", "Completed requests by operation.", "ops", "op", 1, NULL},
	{"fusesched_tenant_bytes_total", "counter", "Bytes transferred by operation.", "bytes", "op", 1, NULL},
	{"fusesched_tenant_errors_total", "counter", "Requests that failed.", "errors", NULL, 1, NULL},
	{"fusesched_tenant_latency_p50_seconds", "gauge", "Median request latency since mount (log2 bucket bound).", "latency_ns.p50", NULL, 1e-9, NULL},
	{"fusesched_tenant_latency_p99_seconds", "gauge", "99th percentile request latency since mount (log2 bucket bound).", "latency_ns.p99", NULL, 1e-9, NULL},
	{"fusesched_tenant_latency_max_seconds", "gauge", "Longest request latency since mount.", "latency_ns.max", NULL, 1e-9, NULL},
	{"fusesched_tenant_queued", "gauge", "Requests queued in the scheduler.", "queued", NULL, 1, NULL},
	{"fusesched_tenant_inflight", "gauge", "Requests of the tenant at the backing store.", "inflight", NULL, 1, NULL},
	{"fusesched_tenant_idle_windows_total", "counter", "Times the scheduler idled for the tenant.", "idle_windows", NULL, 1, NULL},
	{"fusesched_tenant_idle_seconds_total", "counter", "Time the scheduler idled for the tenant.", "idle_ns", NULL, 1e-9, NULL},
	{"fusesched_tenant_injected_total", "counter", "Requests let in while another tenant was idled for, by rule.", "injected", "kind", 1, NULL},
	{"fusesched_tenant_budget_expirations_total", "counter", "Times the tenant lost the store, by reason.", "expirations", "reason", 1, NULL},
};

static void prom_label_value(FILE *out, const char *v)
{
	fputc('"', out);
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(out, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", out);
		else
			fputc(*v, out);
	}
	fputc('"', out);
}

static void prom_value(FILE *out, struct json_object *v, double scale)
{
	if (scale == 1 && json_object_is_type(v, json_type_int))
		fprintf(out, " %" PRIu64 "\n", json_object_get_uint64(v));
	else
		fprintf(out, " %.9g\n", json_object_get_double(v) * scale);
}

static void prom_sample(FILE *out, const struct prom_metric *pm, const char *mnt,
			const char *tenant, const char *parent, const char *label,
			const char *label_value, struct json_object *v)
{
	fprintf(out, "%s{mount=", pm->name);
	prom_label_value(out, mnt);
	if (tenant) {
		fputs(",tenant=", out);
		prom_label_value(out, tenant);
	}
	if (parent) {
		fputs(",parent=", out);
		prom_label_value(out, parent);
	}
	if (label) {
		fprintf(out, ",%s=", label);
		prom_label_value(out, label_value);
	}
	fputc('}', out);
	prom_value(out, v, pm->scale);
}

/*
 * The parent label of each tenant of MOUNT: its parent's tenant label, so
 * the tree can be rebuilt from the samples alone; NULL at the top level (no
 * label: a flat mount's series stay as they were). NULL when out of memory.
 */
static const char **prom_parents(struct json_object *mount)
{
	struct json_object *tenants = field(mount, "tenants");
	size_t n = json_object_array_length(tenants), cap = n ? n : 1;
	struct json_object **rows = malloc(cap * sizeof(*rows));
	const char **parents = calloc(cap, sizeof(*parents));
	size_t *up = malloc(cap * sizeof(*up));
	unsigned *depth = malloc(cap * sizeof(*depth));
	if (rows && parents && up && depth) {
		for (size_t i = 0; i < n; i++)
			rows[i] = json_object_array_get_idx(tenants, i);
		if (rows_link(rows, n, up, depth) == 0) {
			for (size_t i = 0; i < n; i++)
				if (up[i] != CTL_TREE_ROOT)
					parents[i] = tenant_name(rows[up[i]]);
		}
	} else {
		free(parents);
		parents = NULL;
	}
	free(rows);
	free(up);
	free(depth);
	return parents;
}

/* Metric by metric, so each family's HELP and TYPE come once, before all its samples. */
void ctl_print_prometheus(FILE *out, struct json_object *const *mounts, size_t n)
{
	const char ***parents = calloc(n ? n : 1, sizeof(*parents));
	for (size_t i = 0; parents && i < n; i++)
		parents[i] = prom_parents(mounts[i]);
	for (size_t k = 0; k < sizeof(METRICS) / sizeof(METRICS[0]); k++) {
		const struct prom_metric *pm = &METRICS[k];
		fprintf(out, "# HELP %s %s\n# TYPE %s %s\n", pm->name, pm->help, pm->name, pm->type);
		for (size_t i = 0; i < n; i++) {
			const char *mnt = str(mounts[i], "mount");
			if (pm->mount_field) {
				prom_sample(out, pm, mnt, NULL, NULL, NULL, NULL,
					    field(mounts[i], pm->mount_field));
				continue;
			}
			struct json_object *tenants = field(mounts[i], "tenants");
			for (size_t t = 0; t < json_object_array_length(tenants); t++) {
				struct json_object *tj = json_object_array_get_idx(tenants, t);
				struct json_object *v = field(tj, pm->field);
				const char *parent = parents && parents[i] ? parents[i][t] : NULL;
				if (!pm->label) {
					prom_sample(out, pm, mnt, tenant_name(tj), parent, NULL, NULL, v);
					continue;
				}
				if (!json_object_is_type(v, json_type_object))
					continue; /* a daemon without this field: no crash, no samples */
				json_object_object_foreach(v, key, val)
					prom_sample(out, pm, mnt, tenant_name(tj), parent, pm->label, key,
						    val);
			}
		}
	}
	for (size_t i = 0; parents && i < n; i++)
		free(parents[i]);
	free(parents);
}

/* ---- commands -------------------------------------------------------------- */

enum stat_format { STAT_TABLE, STAT_JSON, STAT_PROMETHEUS };

struct stat_args {
	const char *mount;      /* NULL: all */
	enum stat_format format;
	double watch_s;         /* 0: once */
	const struct col *sort;
};

static int usage(const char *what)
{
	fprintf(stderr, "fusesched: %s\nTry 'fusesched --help'.\n", what);
	return 2;
}

static int stat_parse_args(int argc, char **argv, struct stat_args *a)
{
	*a = (struct stat_args){.sort = &COLS[0]};
	char msg[256];
	for (int i = 0; i < argc; i++) {
		const char *arg = argv[i];
		if (strcmp(arg, "--json") == 0) {
			a->format = STAT_JSON;
		} else if (strcmp(arg, "--prometheus") == 0) {
			a->format = STAT_PROMETHEUS;
		} else if (strcmp(arg, "--watch") == 0 || strcmp(arg, "--sort") == 0) {
			if (i + 1 >= argc) {
				snprintf(msg, sizeof(msg), "option '%s' needs an argument", arg);
				return usage(msg);
			}
			const char *v = argv[++i];
			if (arg[2] == 'w') {
				char *end;
				a->watch_s = strtod(v, &end);
				if (*end || !(a->watch_s >= 0.1 && a->watch_s <= 86400))
					return usage("--watch takes SECONDS, 0.1..86400");
				continue;
			}
			a->sort = col_by_key(v);
			if (!a->sort) {
				size_t used = (size_t)snprintf(msg, sizeof(msg), "unknown --sort column '%s'; one of:", v);
				for (size_t c = 0; c < NCOLS && used < sizeof(msg); c++)
					used += (size_t)snprintf(msg + used, sizeof(msg) - used, " %s", COLS[c].sort_key);
				return usage(msg);
			}
		} else if (arg[0] == '-') {
			snprintf(msg, sizeof(msg), "unknown stat option '%s'", arg);
			return usage(msg);
		} else if (!a->mount) {
			a->mount = arg;
		} else {
			snprintf(msg, sizeof(msg), "unexpected argument '%s'", arg);
			return usage(msg);
		}
	}
	if (a->watch_s > 0 && a->format != STAT_TABLE)
		return usage("--watch redraws the table; it does not combine with --json or --prometheus");
	return 0;
}

/* One round: ask every mount, print. Returns 0, or 1 if some mount did not answer. */
static int stat_once(const struct stat_args *a, const struct ctl_mount *mounts, int n, FILE *out)
{
	int status = 0;
	struct json_object *all = json_object_new_array();
	for (int i = 0; i < n; i++) {
		struct json_object *reply;
		char err[512];
		const char *why = err;
		if (ctl_request(mounts[i].mnt, "stat", &reply, err, sizeof(err)) == 0 &&
		    (why = reply_error_text(reply)) == NULL) {
			json_object_array_add(all, reply);
			continue;
		}
		fprintf(stderr, "fusesched: %s: %s\n", mounts[i].mnt, why);
		json_object_put(reply);
		status = 1;
	}
	size_t got = json_object_array_length(all);
	if (a->format == STAT_JSON) {
		struct json_object *doc = json_object_new_object();
		json_object_object_add(doc, "mounts", json_object_get(all));
		fprintf(out, "%s\n", json_object_to_json_string_ext(doc, JSON_C_TO_STRING_PRETTY |
									     JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(doc);
	} else if (a->format == STAT_PROMETHEUS) {
		struct json_object **list = calloc(got ? got : 1, sizeof(*list));
		for (size_t i = 0; list && i < got; i++)
			list[i] = json_object_array_get_idx(all, i);
		if (list)
			ctl_print_prometheus(out, list, got);
		free(list);
	} else {
		for (size_t i = 0; i < got; i++) {
			if (i)
				fputc('\n', out);
			print_table(out, json_object_array_get_idx(all, i), a->sort);
		}
		if (n == 0)
			fprintf(out, "no fusesched mounts\n");
	}
	json_object_put(all);
	return status;
}

/* Redraws every SECONDS until SIGINT or SIGTERM, which end it with status 0. */
static int stat_watch(const struct stat_args *a, const struct ctl_mount *mounts, int n)
{
	sigset_t stop;
	sigemptyset(&stop);
	sigaddset(&stop, SIGINT);
	sigaddset(&stop, SIGTERM);
	/* Taken synchronously by sigtimedwait below: no handler, no global flag. */
	sigprocmask(SIG_BLOCK, &stop, NULL);
	struct timespec every = {.tv_sec = (time_t)a->watch_s,
				 .tv_nsec = (long)((a->watch_s - (double)(time_t)a->watch_s) * 1e9)};
	for (;;) {
		char *text = NULL;
		size_t len = 0;
		FILE *mem = open_memstream(&text, &len);
		if (!mem)
			return 1;
		stat_once(a, mounts, n, mem);
		fclose(mem);
		/* Home, the new frame, then clear what the old frame left below it: no flicker. */
		printf("\033[H%s\033[J", text);
		fflush(stdout);
		free(text);
		int sig = sigtimedwait(&stop, NULL, &every);
		if (sig == SIGINT || sig == SIGTERM)
			break;
	}
	printf("\n");
	return 0;
}

int ctl_run_stat(int argc, char **argv)
{
	struct stat_args a;
	int r = stat_parse_args(argc, argv, &a);
	if (r)
		return r;
	struct ctl_mount *mounts;
	int n = ctl_mounts_select(a.mount, &mounts);
	if (n < 0)
		return 2;
	if (a.watch_s > 0) {
		printf("\033[2J");
		r = stat_watch(&a, mounts, n);
	} else {
		r = stat_once(&a, mounts, n, stdout);
	}
	free(mounts);
	return r;
}

int ctl_run_reload(int argc, char **argv)
{
	if (argc > 1 || (argc == 1 && argv[0][0] == '-'))
		return usage("usage: fusesched reload [MOUNTPOINT]");
	struct ctl_mount *mounts;
	int n = ctl_mounts_select(argc ? argv[0] : NULL, &mounts);
	if (n < 0)
		return 2;
	if (n == 0)
		fprintf(stderr, "fusesched: no fusesched mounts\n");
	int status = 0;
	for (int i = 0; i < n; i++) {
		struct json_object *reply;
		char err[512];
		if (ctl_request(mounts[i].mnt, "reload", &reply, err, sizeof(err)) < 0) {
			fprintf(stderr, "fusesched: %s: %s\n", mounts[i].mnt, err);
			status = status ? status : 1;
			continue;
		}
		const char *why = reply_error_text(reply);
		if (why) {
			fprintf(stderr, "fusesched: %s: reload failed, running config kept: %s\n",
				mounts[i].mnt, why);
			status = 2;
		} else {
			printf("%s: %s\n", mounts[i].mnt, str(reply, "message"));
		}
		json_object_put(reply);
	}
	free(mounts);
	return status;
}
