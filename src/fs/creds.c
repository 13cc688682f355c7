/* Per-thread fsuid/fsgid/groups switching by raw syscalls. */
#include "fusesched/creds.h"

#include <errno.h>
#include <sys/syscall.h>
#include <unistd.h>

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
	return 0;
}

void creds_leave(void)
{
	syscall(SYS_setfsuid, 0);
	syscall(SYS_setfsgid, 0);
	syscall(SYS_setgroups, 0, NULL);
}
