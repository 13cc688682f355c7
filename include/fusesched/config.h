/* fusesched configuration file: model, parser, printer.
 *
 * The file is INI (libinih for key = value lines and comments).  A loaded
 * `struct config` is immutable: a reload builds a new one and the daemon
 * swaps pointers, so a bad file never disturbs the running settings.
 *
 * Sections and keys (every key is optional; conf/fusesched.conf documents them):
 *
 *   [scheduler]  policy, max_inflight, learn_depth, work_conserving, idle,
 *                budget_timeout_ms, busy_poll_us, reserve_ms, default_weight,
 *                honor_cgroup_weights, read_cost, write_cost, dsync_cost
 *   [tenants]    hierarchy, cache_ttl_ms, retire_idle_ms
 *   [control]    socket, group
 *   [metrics]    listen
 *   [group "PATTERN"]  weight, account (any number, in file order; PATTERN
 *                is a cgroup path or glob, ** spanning whole components)
 *
 * Errors are reported as "FILE:LINE: message" and the functions return a
 * negative errno: -EINVAL for any content error, -ENOMEM, or the errno of a
 * failed open/read.
 */
#ifndef FUSESCHED_CONFIG_H
#define FUSESCHED_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>

/* Weights follow the kernel's io.bfq.weight range. */
#define CONFIG_WEIGHT_MIN 1u
#define CONFIG_WEIGHT_MAX 1000u
#define CONFIG_WEIGHT_DEFAULT 100u

/* Longest physical line accepted (section headers carry cgroup globs). */
#define CONFIG_LINE_MAX 4096u

enum config_policy {
	CONFIG_POLICY_BFQ,
	CONFIG_POLICY_FIFO,
};

enum config_idle_mode {
	CONFIG_IDLE_AUTO,	/* learned from each tenant's think time */
	CONFIG_IDLE_OFF,	/* never idle */
	CONFIG_IDLE_FIXED,	/* fixed window of scheduler.idle_us */
};

enum config_hierarchy {
	CONFIG_HIERARCHY_AUTO,	/* v2 path unless it is "/", else v1 blkio path */
	CONFIG_HIERARCHY_V2,	/* always the v2 ("0::") path */
	CONFIG_HIERARCHY_BLKIO,	/* always the v1 blkio path */
};

/* Who the tenants below a ruled cgroup are. */
enum config_account {
	CONFIG_ACCOUNT_CGROUP,	/* each cgroup below is a tenant of its own,
				 * dividing this cgroup's share */
	CONFIG_ACCOUNT_SUBTREE,	/* the whole subtree is this cgroup's one
				 * tenant (flat shares per pod) */
};

/* [scheduler] work_conserving. */
enum config_door {
	CONFIG_DOOR_YES,
	CONFIG_DOOR_NO,
	CONFIG_DOOR_AUTO,
};

/* One [group "PATTERN"] section. */
struct config_group_rule {
	char *pattern;		/* cgroup path or glob: * ? [...] within one
				 * component, ** across any number of them */
	uint32_t weight;
	enum config_account account;
	unsigned line;		/* line of the section header, for messages */
};

/* [scheduler] read_cost / write_cost / dsync_cost: the store's cost model
 * for one kind (sched_params.model_iops). iops 0: none. */
struct config_cost {
	uint32_t iops;		/* 4 KiB random requests a second, many at once */
	uint32_t mb_per_s;	/* MB (10^6 bytes) a second of large sequential ones */
};

struct config_scheduler {
	enum config_policy policy;
	uint32_t max_inflight;
	bool learn_depth;		/* at most 1.5x the depth the store was seen to serve */
	enum config_door work_conserving; /* no: unused slots never go to a tenant ahead of its share;
					   * auto: as the scheduler's probes find the store */
	enum config_idle_mode idle_mode;
	uint32_t idle_us;		/* meaningful for CONFIG_IDLE_FIXED */
	uint32_t budget_timeout_ms;
	uint32_t busy_poll_us;		/* engine thread polls this long before sleeping; 0: never */
	uint32_t reserve_ms;		/* slots kept for a tenant gone idle this long; 0: none */
	uint32_t default_weight;
	bool honor_cgroup_weights;
	struct config_cost read_cost, write_cost, dsync_cost;
};

struct config_tenants {
	enum config_hierarchy hierarchy;
	uint32_t cache_ttl_ms;
	uint32_t retire_idle_ms;
};

struct config_control {
	char *socket_path;	/* NULL: "auto", derived from the mountpoint */
	char *group;		/* NULL: no group, socket mode 0600 */
};

/* [metrics] listen: where the metrics HTTP listener binds. */
struct config_listen {
	bool set;			/* false: no listener (empty or absent) */
	struct sockaddr_storage addr;	/* a sockaddr_in or sockaddr_in6 */
	socklen_t addr_len;
};

struct config_metrics {
	struct config_listen listen;
};

struct config {
	char *source;			/* file name used in messages, or NULL */
	struct config_scheduler scheduler;
	struct config_tenants tenants;
	struct config_control control;
	struct config_metrics metrics;
	size_t group_count;
	struct config_group_rule *groups;	/* first match wins */
};

/* A configuration with every default (what an empty file gives). */
int config_new_default(struct config **out);

/* Parse PATH.  On success *out owns a new config; on failure *out is NULL
 * and err (if err_len > 0) holds "PATH:LINE: message" or "PATH: reason". */
int config_load_file(const char *path, struct config **out,
		     char *err, size_t err_len);

/* Same, from an open stream; NAME is used in messages. */
int config_load_stream(FILE *in, const char *name, struct config **out,
		       char *err, size_t err_len);

void config_free(struct config *cfg);

/* Print the effective settings as a valid config file (what
 * `fusesched check-config` shows).  Returns 0 or -EIO. */
int config_print(const struct config *cfg, FILE *out);

/* Parses a [metrics] listen value: "" (no listener), PORT (127.0.0.1:PORT:
 * loopback unless told otherwise), IPV4:PORT, localhost:PORT, or
 * [IPV6]:PORT; numeric addresses only (nothing is resolved), PORT 1..65535.
 * Returns 0, or -EINVAL with the reason (without FILE:LINE) in msg.  Pure:
 * it accepts a valid address whether or not this build has the listener
 * (config_load_* refuses it then). */
int config_parse_listen(const char *text, struct config_listen *out,
			char *msg, size_t msg_len);

/* LISTEN as a listen value (127.0.0.1:9101, [::1]:9101), "" when not set. */
void config_format_listen(const struct config_listen *listen, char *buf,
			  size_t len);

#endif /* FUSESCHED_CONFIG_H */
