/* Config file parser.
 *
 * libinih parses the key = value lines and their comments; we feed it through
 * our own line reader (ini_parse_stream) because the packaged libinih does
 * not pass line numbers to the handler, truncates section names at 50 bytes
 * and cannot parse a ']' inside a quoted glob.  So the reader:
 *   - counts physical lines, which gives every message its FILE:LINE;
 *   - rejects overlong lines, NUL bytes, invalid UTF-8 and control characters
 *     before anything is interpreted (binary garbage fails on its first line);
 *   - parses [section "pattern"] headers itself and never hands them to inih;
 *   - strips leading blanks, which keeps inih's multi-line continuation
 *     (an indented line appends to the previous key) from silently eating an
 *     indented key.
 * Every key lives in one table below: adding a key is one table entry.
 */
#include "fusesched/config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ini.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

enum section_id {
	SEC_NONE,
	SEC_SCHEDULER,
	SEC_TENANTS,
	SEC_CONTROL,
	SEC_METRICS,
	SEC_GROUP,
	SEC_COUNT,
};

static const char *const section_names[SEC_COUNT] = {
	[SEC_NONE] = "",
	[SEC_SCHEDULER] = "scheduler",
	[SEC_TENANTS] = "tenants",
	[SEC_CONTROL] = "control",
	[SEC_METRICS] = "metrics",
	[SEC_GROUP] = "group",
};

struct key_desc;

/* Parses TEXT into the field at FIELD; on error writes a message (without
 * the FILE:LINE prefix) into msg and returns -EINVAL or -ENOMEM. */
typedef int (*key_set_fn)(const struct key_desc *key, void *field,
			  const char *text, char *msg, size_t msg_len);
/* Prints the value line for the field at FIELD. */
typedef void (*key_print_fn)(const struct key_desc *key, const void *field,
			     FILE *out);

struct enum_name {
	const char *name;
	int value;
};

struct key_desc {
	enum section_id section;
	const char *name;
	key_set_fn set;
	key_print_fn print;
	size_t offset;		/* in struct config, or in the group rule */
	uint32_t min, max;	/* for numbers */
	const struct enum_name *enums;	/* NULL-terminated, for enums */
	const char *def;	/* default as written in a file; NULL: none */
};

static const struct enum_name policy_names[] = {
	{ "bfq", CONFIG_POLICY_BFQ },
	{ "fifo", CONFIG_POLICY_FIFO },
	{ NULL, 0 },
};

static const struct enum_name door_names[] = {
	{ "yes", CONFIG_DOOR_YES },
	{ "no", CONFIG_DOOR_NO },
	{ "auto", CONFIG_DOOR_AUTO },
	{ NULL, 0 },
};

static const struct enum_name hierarchy_names[] = {
	{ "auto", CONFIG_HIERARCHY_AUTO },
	{ "v2", CONFIG_HIERARCHY_V2 },
	{ "blkio", CONFIG_HIERARCHY_BLKIO },
	{ NULL, 0 },
};

static const struct enum_name account_names[] = {
	{ "cgroup", CONFIG_ACCOUNT_CGROUP },
	{ "subtree", CONFIG_ACCOUNT_SUBTREE },
	{ NULL, 0 },
};

/* ---- value parsers ------------------------------------------------------ */

/* Strict decimal: digits only, no sign, no blanks, no suffix.  Overflow is
 * reported as out of range with the text as written. */
static int set_u32(const struct key_desc *key, void *field, const char *text,
		   char *msg, size_t msg_len)
{
	uint64_t value = 0;
	const char *p;

	if (*text == '\0') {
		snprintf(msg, msg_len, "%s needs a value (%u..%u)", key->name,
			 key->min, key->max);
		return -EINVAL;
	}
	for (p = text; *p; p++) {
		if (*p < '0' || *p > '9') {
			snprintf(msg, msg_len,
				 "%s: '%s' is not a decimal number", key->name,
				 text);
			return -EINVAL;
		}
		if (value <= UINT32_MAX)
			value = value * 10 + (uint64_t)(*p - '0');
	}
	if (value < key->min || value > key->max) {
		snprintf(msg, msg_len, "%s must be %u..%u, got %s", key->name,
			 key->min, key->max, text);
		return -EINVAL;
	}
	*(uint32_t *)field = (uint32_t)value;
	return 0;
}

static void print_u32(const struct key_desc *key, const void *field, FILE *out)
{
	fprintf(out, "%s = %u\n", key->name, *(const uint32_t *)field);
}

static int set_bool(const struct key_desc *key, void *field, const char *text,
		    char *msg, size_t msg_len)
{
	static const char *const yes[] = { "yes", "true", "on", "1" };
	static const char *const no[] = { "no", "false", "off", "0" };

	for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
		if (strcasecmp(text, yes[i]) == 0) {
			*(bool *)field = true;
			return 0;
		}
		if (strcasecmp(text, no[i]) == 0) {
			*(bool *)field = false;
			return 0;
		}
	}
	snprintf(msg, msg_len, "%s must be yes or no, got '%s'", key->name,
		 text);
	return -EINVAL;
}

static void print_bool(const struct key_desc *key, const void *field, FILE *out)
{
	fprintf(out, "%s = %s\n", key->name,
		*(const bool *)field ? "yes" : "no");
}

static const char *enum_name_of(const struct enum_name *names, int value)
{
	for (; names->name; names++)
		if (names->value == value)
			return names->name;
	return "?";
}

static int set_enum(const struct key_desc *key, void *field, const char *text,
		    char *msg, size_t msg_len)
{
	const struct enum_name *e;
	size_t used;

	for (e = key->enums; e->name; e++) {
		if (strcasecmp(text, e->name) == 0) {
			*(int *)field = e->value;
			return 0;
		}
	}
	used = (size_t)snprintf(msg, msg_len, "%s must be", key->name);
	for (e = key->enums; e->name && used < msg_len; e++)
		used += (size_t)snprintf(msg + used, msg_len - used, "%s%s",
					 e == key->enums ? " " : " | ",
					 e->name);
	if (used < msg_len)
		snprintf(msg + used, msg_len - used, ", got '%s'", text);
	return -EINVAL;
}

static void print_enum(const struct key_desc *key, const void *field, FILE *out)
{
	fprintf(out, "%s = %s\n", key->name,
		enum_name_of(key->enums, *(const int *)field));
}

/* idle = auto | off | MICROSECONDS; FIELD is the struct config_scheduler. */
static int set_idle(const struct key_desc *key, void *field, const char *text,
		    char *msg, size_t msg_len)
{
	struct config_scheduler *s = field;
	uint32_t us;
	int rc;

	if (strcasecmp(text, "auto") == 0) {
		s->idle_mode = CONFIG_IDLE_AUTO;
		return 0;
	}
	if (strcasecmp(text, "off") == 0) {
		s->idle_mode = CONFIG_IDLE_OFF;
		return 0;
	}
	if (*text < '0' || *text > '9') {
		snprintf(msg, msg_len,
			 "%s must be auto, off or microseconds (%u..%u), got '%s'",
			 key->name, key->min, key->max, text);
		return -EINVAL;
	}
	rc = set_u32(key, &us, text, msg, msg_len);
	if (rc == 0) {
		s->idle_mode = CONFIG_IDLE_FIXED;
		s->idle_us = us;
	}
	return rc;
}

/* "off", or two numbers: IOPS (key->min..key->max) and MB/s (1..10^7). */
static int set_cost(const struct key_desc *key, void *field, const char *text,
		    char *msg, size_t msg_len)
{
	struct config_cost *c = field;
	unsigned long long iops, mb;
	char tail;

	if (strcasecmp(text, "off") == 0) {
		*c = (struct config_cost){ 0, 0 };
		return 0;
	}
	if (sscanf(text, "%llu %llu %c", &iops, &mb, &tail) != 2 || *text < '0' || *text > '9' ||
	    iops < key->min || iops > key->max || mb < 1 || mb > 10000000) {
		snprintf(msg, msg_len,
			 "%s must be off or IOPS and MB/s, e.g. '40000 3000' (IOPS %u..%u, "
			 "MB/s 1..10000000; fusesched calibrate measures them), got '%s'",
			 key->name, key->min, key->max, text);
		return -EINVAL;
	}
	*c = (struct config_cost){ (uint32_t)iops, (uint32_t)mb };
	return 0;
}

static void print_cost(const struct key_desc *key, const void *field, FILE *out)
{
	const struct config_cost *c = field;

	if (c->iops)
		fprintf(out, "%s = %u %u\n", key->name, c->iops, c->mb_per_s);
	else
		fprintf(out, "%s = off\n", key->name);
}

static void print_idle(const struct key_desc *key, const void *field, FILE *out)
{
	const struct config_scheduler *s = field;

	switch (s->idle_mode) {
	case CONFIG_IDLE_AUTO:
		fprintf(out, "%s = auto\n", key->name);
		break;
	case CONFIG_IDLE_OFF:
		fprintf(out, "%s = off\n", key->name);
		break;
	case CONFIG_IDLE_FIXED:
		fprintf(out, "%s = %u\n", key->name, s->idle_us);
		break;
	}
}

static int replace_string(char **field, const char *text)
{
	char *copy = NULL;

	if (text) {
		copy = strdup(text);
		if (!copy)
			return -ENOMEM;
	}
	free(*field);
	*field = copy;
	return 0;
}

/* socket = auto | /absolute/path, short enough for sun_path (108 bytes). */
static int set_socket(const struct key_desc *key, void *field,
		      const char *text, char *msg, size_t msg_len)
{
	if (strcasecmp(text, "auto") == 0)
		return replace_string(field, NULL);
	if (text[0] != '/') {
		snprintf(msg, msg_len,
			 "%s must be auto or an absolute path, got '%s'",
			 key->name, text);
		return -EINVAL;
	}
	if (strlen(text) >= key->max) {
		snprintf(msg, msg_len, "%s: path longer than %u bytes",
			 key->name, key->max - 1);
		return -EINVAL;
	}
	return replace_string(field, text);
}

static void print_socket(const struct key_desc *key, const void *field,
			 FILE *out)
{
	const char *path = *(char *const *)field;

	fprintf(out, "%s = %s\n", key->name, path ? path : "auto");
}

/* group = NAME or numeric gid: the portable user/group name characters. */
static int set_group_name(const struct key_desc *key, void *field,
			  const char *text, char *msg, size_t msg_len)
{
	size_t len = strlen(text);
	bool ok = len > 0 && len <= key->max && text[0] != '-';

	for (size_t i = 0; ok && i < len; i++)
		ok = isalnum((unsigned char)text[i]) || text[i] == '_' ||
		     text[i] == '-' || text[i] == '.';
	if (!ok) {
		snprintf(msg, msg_len,
			 "%s must be a group name or gid (up to %u of A-Z a-z 0-9 . _ -), got '%s'",
			 key->name, key->max, text);
		return -EINVAL;
	}
	return replace_string(field, text);
}

static void print_group_name(const struct key_desc *key, const void *field,
			     FILE *out)
{
	const char *name = *(char *const *)field;

	if (name)
		fprintf(out, "%s = %s\n", key->name, name);
	else
		fprintf(out, "; %s is not set: the socket is mode 0600\n",
			key->name);
}

int config_parse_listen(const char *text, struct config_listen *out,
			char *msg, size_t msg_len)
{
	char host[INET6_ADDRSTRLEN + 1];
	const char *port_text, *colon;
	size_t host_len;
	int family = AF_INET;
	unsigned long port;

	memset(out, 0, sizeof(*out));
	if (*text == '\0')
		return 0;
	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close || close[1] != ':')
			goto bad_form;
		family = AF_INET6;
		host_len = (size_t)(close - text - 1);
		memcpy(host, text + 1, host_len < sizeof(host) ? host_len : 0);
		port_text = close + 2;
	} else if ((colon = strrchr(text, ':'))) {
		if (memchr(text, ':', (size_t)(colon - text))) {
			snprintf(msg, msg_len,
				 "listen: an IPv6 address goes in brackets, as in [::1]:9101, got '%s'",
				 text);
			return -EINVAL;
		}
		host_len = (size_t)(colon - text);
		memcpy(host, text, host_len < sizeof(host) ? host_len : 0);
		port_text = colon + 1;
	} else {
		/* PORT alone: loopback, so enabling it exposes nothing. */
		host_len = strlen("127.0.0.1");
		memcpy(host, "127.0.0.1", host_len);
		port_text = text;
	}
	if (host_len == 0)
		goto bad_form;
	if (host_len >= sizeof(host)) {
		snprintf(msg, msg_len, "listen: address too long in '%s'", text);
		return -EINVAL;
	}
	host[host_len] = '\0';
	if (*port_text == '\0' || strspn(port_text, "0123456789") != strlen(port_text)) {
		if (port_text == text)
			goto bad_form;
		snprintf(msg, msg_len, "listen: port must be a number 1..65535, got '%s'",
			 port_text);
		return -EINVAL;
	}
	port_text += strspn(port_text, "0") == strlen(port_text) ? 0 : strspn(port_text, "0");
	port = strlen(port_text) > 5 ? 0 : strtoul(port_text, NULL, 10);
	if (port < 1 || port > 65535) {
		snprintf(msg, msg_len, "listen: port must be 1..65535, got '%s'",
			 port_text);
		return -EINVAL;
	}
	if (family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&out->addr;

		if (strcmp(host, "localhost") == 0)
			strcpy(host, "127.0.0.1");
		in->sin_family = AF_INET;
		in->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &in->sin_addr) != 1) {
			snprintf(msg, msg_len,
				 "listen: '%s' is not a numeric IPv4 address (host names are not resolved; IPv6 goes in brackets)",
				 host);
			return -EINVAL;
		}
		out->addr_len = sizeof(*in);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&out->addr;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &in6->sin6_addr) != 1) {
			snprintf(msg, msg_len,
				 "listen: '%s' is not a numeric IPv6 address",
				 host);
			return -EINVAL;
		}
		out->addr_len = sizeof(*in6);
	}
	out->set = true;
	return 0;

bad_form:
	snprintf(msg, msg_len,
		 "listen must be empty (no listener), PORT (on 127.0.0.1), IPV4:PORT or [IPV6]:PORT, got '%s'",
		 text);
	memset(out, 0, sizeof(*out));
	return -EINVAL;
}

void config_format_listen(const struct config_listen *listen, char *buf,
			  size_t len)
{
	char host[INET6_ADDRSTRLEN];

	if (len == 0)
		return;
	buf[0] = '\0';
	if (!listen->set)
		return;
	if (listen->addr.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 =
			(const struct sockaddr_in6 *)&listen->addr;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "[%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		const struct sockaddr_in *in =
			(const struct sockaddr_in *)&listen->addr;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "%s:%u", host, ntohs(in->sin_port));
	}
}

/* listen = [HOST:]PORT; refused, naming the setting, by a build without
 * the listener. */
static int set_listen(const struct key_desc *key, void *field,
		      const char *text, char *msg, size_t msg_len)
{
	struct config_listen parsed;
	int rc = config_parse_listen(text, &parsed, msg, msg_len);

	if (rc)
		return rc;
#ifndef FUSESCHED_HAVE_MICROHTTPD
	if (parsed.set) {
		snprintf(msg, msg_len,
			 "[metrics] %s = %s: this fusesched was built without the metrics HTTP listener (libmicrohttpd was missing); remove the setting, or rebuild with libmicrohttpd-dev installed",
			 key->name, text);
		return -EINVAL;
	}
#else
	(void)key;
#endif
	*(struct config_listen *)field = parsed;
	return 0;
}

static void print_listen(const struct key_desc *key, const void *field,
			 FILE *out)
{
	char text[INET6_ADDRSTRLEN + 16];

	config_format_listen(field, text, sizeof(text));
	if (text[0])
		fprintf(out, "%s = %s\n", key->name, text);
	else
		fprintf(out, "; %s is not set: no metrics HTTP listener\n",
			key->name);
}

/* ---- the key table ------------------------------------------------------ */

#define CFG(member) offsetof(struct config, member)
#define RULE(member) offsetof(struct config_group_rule, member)

static const struct key_desc keys[] = {
	{ SEC_SCHEDULER, "policy", set_enum, print_enum,
	  CFG(scheduler.policy), 0, 0, policy_names, "bfq" },
	{ SEC_SCHEDULER, "max_inflight", set_u32, print_u32,
	  CFG(scheduler.max_inflight), 1, 4096, NULL, "32" },
	{ SEC_SCHEDULER, "learn_depth", set_bool, print_bool,
	  CFG(scheduler.learn_depth), 0, 0, NULL, "no" },
	{ SEC_SCHEDULER, "work_conserving", set_enum, print_enum,
	  CFG(scheduler.work_conserving), 0, 0, door_names, "auto" },
	{ SEC_SCHEDULER, "idle", set_idle, print_idle,
	  CFG(scheduler), 1, 1000000, NULL, "auto" },
	{ SEC_SCHEDULER, "budget_timeout_ms", set_u32, print_u32,
	  CFG(scheduler.budget_timeout_ms), 1, 10000, NULL, "20" },
	{ SEC_SCHEDULER, "busy_poll_us", set_u32, print_u32,
	  CFG(scheduler.busy_poll_us), 0, 10000, NULL, "200" },
	{ SEC_SCHEDULER, "reserve_ms", set_u32, print_u32,
	  CFG(scheduler.reserve_ms), 0, 60000, NULL, "1000" },
	{ SEC_SCHEDULER, "default_weight", set_u32, print_u32,
	  CFG(scheduler.default_weight), CONFIG_WEIGHT_MIN, CONFIG_WEIGHT_MAX,
	  NULL, "100" },
	{ SEC_SCHEDULER, "honor_cgroup_weights", set_bool, print_bool,
	  CFG(scheduler.honor_cgroup_weights), 0, 0, NULL, "yes" },
	{ SEC_SCHEDULER, "read_cost", set_cost, print_cost,
	  CFG(scheduler.read_cost), 1, 100000000, NULL, "off" },
	{ SEC_SCHEDULER, "write_cost", set_cost, print_cost,
	  CFG(scheduler.write_cost), 1, 100000000, NULL, "off" },
	{ SEC_SCHEDULER, "dsync_cost", set_cost, print_cost,
	  CFG(scheduler.dsync_cost), 1, 100000000, NULL, "off" },

	{ SEC_TENANTS, "hierarchy", set_enum, print_enum,
	  CFG(tenants.hierarchy), 0, 0, hierarchy_names, "auto" },
	{ SEC_TENANTS, "cache_ttl_ms", set_u32, print_u32,
	  CFG(tenants.cache_ttl_ms), 0, 60000, NULL, "1000" },
	{ SEC_TENANTS, "retire_idle_ms", set_u32, print_u32,
	  CFG(tenants.retire_idle_ms), 1000, 86400000, NULL, "60000" },

	{ SEC_CONTROL, "socket", set_socket, print_socket,
	  CFG(control.socket_path), 0, 108, NULL, "auto" },
	{ SEC_CONTROL, "group", set_group_name, print_group_name,
	  CFG(control.group), 0, 32, NULL, NULL },

	{ SEC_METRICS, "listen", set_listen, print_listen,
	  CFG(metrics.listen), 0, 0, NULL, NULL },

	{ SEC_GROUP, "weight", set_u32, print_u32,
	  RULE(weight), CONFIG_WEIGHT_MIN, CONFIG_WEIGHT_MAX, NULL, NULL },
	{ SEC_GROUP, "account", set_enum, print_enum,
	  RULE(account), 0, 0, account_names, "cgroup" },
};

#define KEY_COUNT (sizeof(keys) / sizeof(keys[0]))
#define MSG_MAX 512

/* ---- parse context ------------------------------------------------------ */

struct parse_ctx {
	struct config *cfg;
	const char *name;
	FILE *in;
	unsigned lineno;
	char line[CONFIG_LINE_MAX + 2];
	enum section_id section;
	struct config_group_rule *rule;	/* current [group], or NULL */
	size_t rule_cap;
	unsigned section_line[SEC_COUNT];	/* first header line, singletons */
	unsigned key_line[KEY_COUNT];	/* in the current section; 0: unseen */
	int err;
	char *msg;
	size_t msg_len;
};

static void fail_at(struct parse_ctx *ctx, unsigned line, int err,
		    const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* Keeps the first error only: later ones are usually its consequences. */
static void fail_at(struct parse_ctx *ctx, unsigned line, int err,
		    const char *fmt, ...)
{
	va_list ap;
	int used;

	if (ctx->err)
		return;
	ctx->err = err;
	if (ctx->msg_len == 0)
		return;
	used = snprintf(ctx->msg, ctx->msg_len, "%s:%u: ", ctx->name, line);
	if (used < 0 || (size_t)used >= ctx->msg_len)
		return;
	va_start(ap, fmt);
	vsnprintf(ctx->msg + used, ctx->msg_len - (size_t)used, fmt, ap);
	va_end(ap);
}

/* The section as written, for messages: [scheduler] or [group "/x"]. */
static void describe_section(const struct parse_ctx *ctx, char *buf,
			     size_t len)
{
	if (ctx->section == SEC_GROUP)
		snprintf(buf, len, "[group \"%s\"]", ctx->rule->pattern);
	else
		snprintf(buf, len, "[%s]", section_names[ctx->section]);
}

/* Edit distance with adjacent transpositions, to suggest a key for a typo.
 * Names are short (< 32 bytes), so the O(n*m) table fits on the stack. */
static size_t edit_distance(const char *a, const char *b)
{
	enum { N = 33 };
	size_t la = strlen(a), lb = strlen(b), d[N][N];

	if (la >= N || lb >= N)
		return N;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t best = d[i - 1][j - 1] + cost;

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
			    a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	}
	return d[la][lb];
}

static const struct key_desc *find_key(enum section_id section,
				       const char *name)
{
	for (size_t i = 0; i < KEY_COUNT; i++)
		if (keys[i].section == section && strcmp(keys[i].name, name) == 0)
			return &keys[i];
	return NULL;
}

static const char *suggest_key(enum section_id section, const char *name)
{
	for (size_t i = 0; i < KEY_COUNT; i++)
		if (keys[i].section == section &&
		    edit_distance(keys[i].name, name) <= 2)
			return keys[i].name;
	return NULL;
}

static void *key_field(struct parse_ctx *ctx, const struct key_desc *key)
{
	char *base = key->section == SEC_GROUP ? (char *)ctx->rule
					       : (char *)ctx->cfg;
	return base + key->offset;
}

static int ini_on_key(void *user, const char *section, const char *name,
		      const char *value)
{
	struct parse_ctx *ctx = user;
	const struct key_desc *key;
	char where[CONFIG_LINE_MAX + 32], msg[MSG_MAX];
	size_t index;
	int rc;

	(void)section;	/* inih never sees our headers: ctx->section rules */
	if (ctx->err)
		return 0;
	if (ctx->section == SEC_NONE) {
		fail_at(ctx, ctx->lineno, -EINVAL,
			"key '%s' outside any section (put it under [scheduler], [tenants], [control], [metrics] or [group \"PATTERN\"])",
			name);
		return 0;
	}
	describe_section(ctx, where, sizeof(where));
	if (*name == '\0') {
		fail_at(ctx, ctx->lineno, -EINVAL, "missing key name before '=' in %s",
			where);
		return 0;
	}
	key = find_key(ctx->section, name);
	if (!key) {
		const char *hint = suggest_key(ctx->section, name);

		if (hint)
			fail_at(ctx, ctx->lineno, -EINVAL,
				"unknown key '%s' in %s (did you mean '%s'?)",
				name, where, hint);
		else
			fail_at(ctx, ctx->lineno, -EINVAL,
				"unknown key '%s' in %s", name, where);
		return 0;
	}
	index = (size_t)(key - keys);
	if (ctx->key_line[index]) {
		fail_at(ctx, ctx->lineno, -EINVAL,
			"duplicate key '%s' in %s (first set at line %u)", name,
			where, ctx->key_line[index]);
		return 0;
	}
	ctx->key_line[index] = ctx->lineno;
	rc = key->set(key, key_field(ctx, key), value, msg, sizeof(msg));
	if (rc == -ENOMEM)
		fail_at(ctx, ctx->lineno, rc, "out of memory");
	else if (rc)
		fail_at(ctx, ctx->lineno, rc, "%s", msg);
	return rc == 0;
}

/* Checks run when a section ends (next header or end of file). */
static void section_finish(struct parse_ctx *ctx)
{
	if (ctx->section == SEC_GROUP &&
	    !ctx->key_line[find_key(SEC_GROUP, "weight") - keys])
		fail_at(ctx, ctx->rule->line, -EINVAL,
			"[group \"%s\"] has no weight (weight = %u..%u)",
			ctx->rule->pattern, CONFIG_WEIGHT_MIN,
			CONFIG_WEIGHT_MAX);
}

static char *skip_blanks(char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

static int add_rule(struct parse_ctx *ctx, const char *pattern)
{
	struct config *cfg = ctx->cfg;

	for (size_t i = 0; i < cfg->group_count; i++) {
		if (strcmp(cfg->groups[i].pattern, pattern) == 0) {
			fail_at(ctx, ctx->lineno, -EINVAL,
				"duplicate [group \"%s\"] (first at line %u)",
				pattern, cfg->groups[i].line);
			return -EINVAL;
		}
	}
	if (cfg->group_count == ctx->rule_cap) {
		size_t cap = ctx->rule_cap ? ctx->rule_cap * 2 : 8;
		struct config_group_rule *grown =
			realloc(cfg->groups, cap * sizeof(*grown));

		if (!grown)
			goto nomem;
		cfg->groups = grown;
		ctx->rule_cap = cap;
	}
	ctx->rule = &cfg->groups[cfg->group_count];
	ctx->rule->pattern = strdup(pattern);
	if (!ctx->rule->pattern)
		goto nomem;
	ctx->rule->weight = 0;
	ctx->rule->account = CONFIG_ACCOUNT_CGROUP;
	ctx->rule->line = ctx->lineno;
	cfg->group_count++;
	return 0;
nomem:
	fail_at(ctx, ctx->lineno, -ENOMEM, "out of memory");
	return -ENOMEM;
}

/* The first component of PATTERN holding "**" without being it, or NULL:
 * "**" spans components only as a whole one. */
static const char *bad_double_star(const char *pattern, size_t *len)
{
	for (const char *c = pattern; *c; c += *len) {
		c += *c == '/';
		*len = strcspn(c, "/");
		if (*len != 2 && memmem(c, *len, "**", 2))
			return c;
	}
	return NULL;
}

/* Parses `[name]` or `[name "pattern"]` (pattern may hold \" and \\),
 * optionally followed by a ; or # comment.  P points at the '['. */
static void parse_header(struct parse_ctx *ctx, char *p)
{
	char *name, *pattern = NULL, *out;
	const char *bad;
	size_t name_len, bad_len;
	enum section_id id = SEC_NONE;

	p = skip_blanks(p + 1);
	name = p;
	while (islower((unsigned char)*p) || *p == '_')
		p++;
	name_len = (size_t)(p - name);
	p = skip_blanks(p);
	if (*p == '"') {
		pattern = out = ++p;
		for (; *p && *p != '"'; p++) {
			if (*p == '\\' && (p[1] == '"' || p[1] == '\\'))
				p++;
			*out++ = *p;
		}
		if (*p != '"') {
			fail_at(ctx, ctx->lineno, -EINVAL,
				"unterminated quoted pattern in section header");
			return;
		}
		p = skip_blanks(p + 1);
		*out = '\0';
	}
	if (*p != ']') {
		fail_at(ctx, ctx->lineno, -EINVAL,
			"malformed section header: expected [name] or [group \"PATTERN\"]");
		return;
	}
	p = skip_blanks(p + 1);
	if (*p && *p != ';' && *p != '#') {
		fail_at(ctx, ctx->lineno, -EINVAL,
			"unexpected text after ']': '%s'", p);
		return;
	}
	name[name_len] = '\0';
	for (int i = SEC_NONE + 1; i < SEC_COUNT; i++)
		if (strcmp(name, section_names[i]) == 0)
			id = (enum section_id)i;
	if (id == SEC_NONE) {
		fail_at(ctx, ctx->lineno, -EINVAL,
			"unknown section [%s] (known: [scheduler], [tenants], [control], [metrics], [group \"PATTERN\"])",
			name);
		return;
	}

	section_finish(ctx);
	if (ctx->err)
		return;
	if (id == SEC_GROUP) {
		if (!pattern) {
			fail_at(ctx, ctx->lineno, -EINVAL,
				"[group] needs a quoted pattern: [group \"/cgroup/path-or-glob*\"]");
			return;
		}
		if (pattern[0] != '/') {
			fail_at(ctx, ctx->lineno, -EINVAL,
				"group pattern must be an absolute cgroup path starting with '/', got \"%s\"",
				pattern);
			return;
		}
		if ((bad = bad_double_star(pattern, &bad_len))) {
			fail_at(ctx, ctx->lineno, -EINVAL,
				"group pattern \"%s\": ** must be a whole path component (as in \"/a/**/b\"), got \"%.*s\"",
				pattern, (int)bad_len, bad);
			return;
		}
		if (add_rule(ctx, pattern))
			return;
	} else {
		if (pattern) {
			fail_at(ctx, ctx->lineno, -EINVAL,
				"section [%s] takes no pattern", name);
			return;
		}
		if (ctx->section_line[id]) {
			fail_at(ctx, ctx->lineno, -EINVAL,
				"duplicate section [%s] (first at line %u)",
				name, ctx->section_line[id]);
			return;
		}
		ctx->section_line[id] = ctx->lineno;
		ctx->rule = NULL;
	}
	ctx->section = id;
	memset(ctx->key_line, 0, sizeof(ctx->key_line));
}

/* Validates UTF-8 and rejects NUL and control characters but tab.  Returns the 1-based column of the first bad byte,
 * or 0 if the line is clean. */
static size_t find_bad_byte(const unsigned char *s, size_t len, int *kind)
{
	size_t i = 0;

	while (i < len) {
		unsigned char c = s[i];
		size_t need;
		uint32_t cp;

		if (c < 0x80) {
			if (c == 0) {
				*kind = 0;
				return i + 1;
			}
			if ((c < 0x20 && c != '\t') || c == 0x7f) {
				*kind = 1;
				return i + 1;
			}
			i++;
			continue;
		}
		if (c >= 0xc2 && c <= 0xdf) {
			need = 1;
			cp = c & 0x1f;
		} else if (c >= 0xe0 && c <= 0xef) {
			need = 2;
			cp = c & 0x0f;
		} else if (c >= 0xf0 && c <= 0xf4) {
			need = 3;
			cp = c & 0x07;
		} else {
			*kind = 2;
			return i + 1;
		}
		if (i + need >= len) {
			*kind = 2;
			return i + 1;
		}
		for (size_t k = 1; k <= need; k++) {
			if ((s[i + k] & 0xc0) != 0x80) {
				*kind = 2;
				return i + 1;
			}
			cp = (cp << 6) | (s[i + k] & 0x3f);
		}
		/* overlong forms, UTF-16 surrogates, beyond U+10FFFF */
		if ((need == 2 && cp < 0x800) || (need == 3 && cp < 0x10000) ||
		    (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
			*kind = 2;
			return i + 1;
		}
		i += need + 1;
	}
	return 0;
}

/* Reads one physical line into ctx->line without its '\n' (or "\r\n").  Returns its
 * length, -1 at end of file, or -2 after recording an error. */
static long read_line(struct parse_ctx *ctx)
{
	size_t len = 0;
	int c;

	while ((c = getc_unlocked(ctx->in)) != EOF && c != '\n') {
		if (len == CONFIG_LINE_MAX) {
			fail_at(ctx, ctx->lineno + 1, -EINVAL,
				"line too long (more than %u bytes)",
				CONFIG_LINE_MAX);
			return -2;
		}
		ctx->line[len++] = (char)c;
	}
	if (ferror(ctx->in)) {
		fail_at(ctx, ctx->lineno + 1, -EIO, "read error");
		return -2;
	}
	if (c == EOF && len == 0)
		return -1;
	if (len > 0 && ctx->line[len - 1] == '\r')
		len--;	/* CRLF file */
	ctx->line[len] = '\0';
	ctx->lineno++;
	return (long)len;
}

/* ini_reader: hands inih only key = value lines, one physical line per call,
 * so ctx->lineno is the line of whatever inih reports next. */
static char *ini_read_line(char *buf, int num, void *stream)
{
	struct parse_ctx *ctx = stream;
	static const char *const kinds[] = {
		"NUL byte (binary file?)", "control character",
		"invalid UTF-8",
	};

	while (!ctx->err) {
		long len = read_line(ctx);
		size_t bad;
		char *p;
		int kind = 0;

		if (len < 0) {
			if (len == -1)
				section_finish(ctx);
			return NULL;
		}
		bad = find_bad_byte((const unsigned char *)ctx->line,
				    (size_t)len, &kind);
		if (bad) {
			fail_at(ctx, ctx->lineno, -EINVAL, "%s at column %zu",
				kinds[kind], bad);
			return NULL;
		}
		p = ctx->line;
		if (ctx->lineno == 1 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
			p += 3;
		p = skip_blanks(p);
		if (*p == '\0' || *p == ';' || *p == '#')
			continue;
		if (*p == '[') {
			parse_header(ctx, p);
			continue;
		}
		/* inih also splits on ':' and stops at a " ;" comment; demand
		 * the '=' first so "key value" and "key: value" are errors. */
		for (char *q = p; ; q++) {
			if (*q == '=')
				break;
			if (*q == '\0' || *q == ':' ||
			    (*q == ';' && (q[-1] == ' ' || q[-1] == '\t'))) {
				fail_at(ctx, ctx->lineno, -EINVAL,
					"expected 'key = value', missing '='");
				return NULL;
			}
		}
		if (strlen(p) + 2 > (size_t)num) {
			fail_at(ctx, ctx->lineno, -EINVAL,
				"key = value line too long (at most %d bytes)",
				num - 2);
			return NULL;
		}
		memcpy(buf, p, strlen(p) + 1);
		return buf;
	}
	return NULL;
}

/* ---- public API --------------------------------------------------------- */

int config_new_default(struct config **out)
{
	struct config *cfg = calloc(1, sizeof(*cfg));
	char msg[MSG_MAX];

	*out = NULL;
	if (!cfg)
		return -ENOMEM;
	for (size_t i = 0; i < KEY_COUNT; i++) {
		const struct key_desc *key = &keys[i];
		int rc;

		if (key->section == SEC_GROUP || !key->def)
			continue;
		rc = key->set(key, (char *)cfg + key->offset, key->def, msg,
			      sizeof(msg));
		if (rc) {
			config_free(cfg);
			return rc;
		}
	}
	*out = cfg;
	return 0;
}

int config_load_stream(FILE *in, const char *name, struct config **out,
		       char *err, size_t err_len)
{
	struct parse_ctx *ctx;
	int rc;

	*out = NULL;
	if (err_len)
		err[0] = '\0';
	/* The line buffer is 4 KiB: keep it off the daemon thread's stack. */
	ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		snprintf(err, err_len, "%s: out of memory", name);
		return -ENOMEM;
	}
	ctx->name = name;
	ctx->in = in;
	ctx->msg = err;
	ctx->msg_len = err_len;
	rc = config_new_default(&ctx->cfg);
	if (rc == 0 && replace_string(&ctx->cfg->source, name))
		rc = -ENOMEM;
	if (rc) {
		snprintf(err, err_len, "%s: out of memory", name);
		goto out;
	}
	rc = ini_parse_stream(ini_read_line, ctx, ini_on_key, ctx);
	if (rc != 0 && !ctx->err)
		fail_at(ctx, ctx->lineno, rc < 0 ? -ENOMEM : -EINVAL,
			rc < 0 ? "out of memory" : "syntax error");
	rc = ctx->err;
out:
	if (rc == 0)
		*out = ctx->cfg;
	else
		config_free(ctx->cfg);
	free(ctx);
	return rc;
}

int config_load_file(const char *path, struct config **out, char *err,
		     size_t err_len)
{
	FILE *in = fopen(path, "re");
	int rc;

	if (!in) {
		rc = -errno;
		*out = NULL;
		snprintf(err, err_len, "%s: %s", path, strerror(-rc));
		return rc;
	}
	rc = config_load_stream(in, path, out, err, err_len);
	fclose(in);
	return rc;
}

void config_free(struct config *cfg)
{
	if (!cfg)
		return;
	for (size_t i = 0; i < cfg->group_count; i++)
		free(cfg->groups[i].pattern);
	free(cfg->groups);
	free(cfg->control.socket_path);
	free(cfg->control.group);
	free(cfg->source);
	free(cfg);
}

static void print_section_keys(enum section_id section, const void *base,
			       FILE *out)
{
	for (size_t i = 0; i < KEY_COUNT; i++)
		if (keys[i].section == section)
			keys[i].print(&keys[i], (const char *)base + keys[i].offset,
				      out);
}

int config_print(const struct config *cfg, FILE *out)
{
	if (cfg->source)
		fprintf(out, "; effective settings of %s\n", cfg->source);
	for (int s = SEC_NONE + 1; s < SEC_GROUP; s++) {
		fprintf(out, "\n[%s]\n", section_names[s]);
		print_section_keys((enum section_id)s, cfg, out);
	}
	for (size_t i = 0; i < cfg->group_count; i++) {
		const struct config_group_rule *rule = &cfg->groups[i];

		fputs("\n[group \"", out);
		for (const char *p = rule->pattern; *p; p++) {
			if (*p == '"' || *p == '\\')
				fputc('\\', out);
			fputc(*p, out);
		}
		fputs("\"]\n", out);
		print_section_keys(SEC_GROUP, rule, out);
	}
	return ferror(out) ? -EIO : 0;
}
