/* Per-thread fsuid/fsgid/groups/umask switching by raw syscalls. */
#include "fusesched/creds.h"

#include <errno.h>
#include <linux/capability.h>
#include <sched.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* One capability back into this thread's effective set, from its permitted set. */
static int raise_capability(int cap)
{
	struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
	struct __user_cap_data_struct data[2];
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -errno;
	data[cap / 32].effective |= 1u << (cap % 32);
	return syscall(SYS_capset, &hdr, data) < 0 ? -errno : 0;
}

int creds_enter(const struct creds *c)
{
	int groups = c->group_count > 0 ? c->group_count : 0;
	if (groups > CREDS_MAX_GROUPS)
		groups = CREDS_MAX_GROUPS;
	/* Groups first: after setfsuid the thread may no longer hold CAP_SETGID. */
	if (syscall(SYS_setgroups, groups, c->groups) < 0)
		return -errno;
	syscall(SYS_setfsgid, c->gid);
	if ((gid_t)syscall(SYS_setfsgid, -1) != c->gid) {
		creds_leave();
		return -EPERM;
	}
	syscall(SYS_setfsuid, c->uid);
	if ((uid_t)syscall(SYS_setfsuid, -1) != c->uid) {
		creds_leave();
		return -EPERM;
	}
	if (c->keep_fsetid && c->uid != 0) {
		int r = raise_capability(CAP_FSETID);
		if (r) {
			creds_leave();
			return r;
		}
	}
	return 0;
}

void creds_leave(void)
{
	/* fsuid back to 0 raises the filesystem capabilities again (from permitted). */
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, 0);
	syscall(SYS_setgroups, 0, NULL);
}

bool creds_equal(const struct creds *a, const struct creds *b)
{
	return a->uid == b->uid && a->gid == b->gid && a->keep_fsetid == b->keep_fsetid &&
	       a->group_count == b->group_count &&
	       (a->group_count <= 0 ||
		memcmp(a->groups, b->groups, (size_t)a->group_count * sizeof(a->groups[0])) == 0);
}

int creds_keep_mknod(void)
{
	return raise_capability(CAP_MKNOD);
}

mode_t creds_umask_for_creation(mode_t mode, mode_t mask)
{
	static _Thread_local bool own_umask;
	if (!own_umask && unshare(CLONE_FS) == 0)
		own_umask = true;
	if (!own_umask)
		return mode & ~mask; /* the process's umask (0) is shared: mask here */
	umask(mask);
	return mode;
}
