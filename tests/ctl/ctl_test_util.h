/* Shared by the ctl integration suites: run the CLI, read its JSON, real cgroups. */
#ifndef FUSESCHED_CTL_TEST_UTIL_H
#define FUSESCHED_CTL_TEST_UTIL_H

#include "mount_helper.h"

#include <json-c/json.h>
#include <stdint.h>
#include <sys/types.h>

#define CG_V2 "/sys/fs/cgroup/unified"
#define CG_BLKIO "/sys/fs/cgroup/blkio"

/* Runs a shell command line; returns its stdout (and stderr with 2>&1 in it), *status its exit status. */
char *ctl_test_capture(int *status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes TEXT to CONF, then `fusesched reload MNT`: its exit status, its output (stderr too) in *out. */
int ctl_test_reload(const char *mnt, const char *conf, const char *text, char **out);

/* `fusesched stat MNT --json`, parsed; the mount's object is *mount. Fails the test on error. */
struct json_object *ctl_test_stat(const char *mnt, struct json_object **mount);

/*
 * The stat reply once no tenant is active any more (up to 20 s): every
 * listed tenant then competes, so the targets are the weights' alone; a
 * whole sampling interval has passed by then, so the engine has published
 * where each queue is (it does every 100 ms).
 */
struct json_object *ctl_test_stat_idle(const char *mnt, struct json_object **mount);
/* Writes BLOCKS 4 KiB blocks to MNT-relative REL with O_DIRECT, so they reach the daemon now. */
void ctl_test_write_direct(const struct test_mount *m, const char *rel, int blocks);

/* The tenant row whose cgroup is CGROUP, or NULL. */
struct json_object *ctl_test_tenant(struct json_object *mount, const char *cgroup);
/* Integer at a dotted path ("ops.write") of a tenant row; -1 when the tenant is missing. */
int64_t ctl_test_tenant_u64(const char *mnt, const char *cgroup, const char *path);

/*
 * Creates ROOT/NAME; remembers it so ctl_test_cgroups_cleanup() removes it,
 * and records it for the runner's cleanup after a failed test (leftovers.h).
 */
void ctl_test_cgroup_make(const char *root, const char *name);
void ctl_test_cgroup_move(const char *root, const char *name, pid_t pid);
void ctl_test_cgroups_cleanup(void);
/*
 * In a forked child: joins v2 cgroup NAME and becomes uid (gid = uid, no
 * supplementary groups); exits 90 if it cannot.
 */
void ctl_test_become(const char *name, uid_t uid);

/* Polls COND (an expression) every 20 ms for up to 20 s. */
#define CTL_TEST_POLL(cond)                                                          \
	do {                                                                         \
		for (int poll_i_ = 0; poll_i_ < 1000 && !(cond); poll_i_++)          \
			usleep(20000);                                               \
	} while (0)

#endif
