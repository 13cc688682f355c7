/*
 * Caller credentials for the thread acting on a caller's behalf.
 *
 * The daemon runs as root, but the backing filesystem must see the caller:
 * objects are created as the caller (owner, group, setgid and default-ACL
 * inheritance, umask), and data is written as the file's opener (ext4's root
 * reserve and quotas go by fsuid and fsgid). The thread's fsuid, fsgid and
 * supplementary groups are switched with raw syscalls, which act on the
 * calling thread only (glibc's wrappers would change every thread).
 * Switching fsuid away from 0 also drops the filesystem capabilities, so
 * root's privileges do not leak into what a tenant creates or writes.
 */
#ifndef FUSESCHED_CREDS_H
#define FUSESCHED_CREDS_H

#include <stdbool.h>
#include <sys/types.h>

#define CREDS_MAX_GROUPS 64

struct creds {
	uid_t uid;
	gid_t gid;
	int group_count;           /* 0: none known (not fetched, or the caller has none) */
	gid_t groups[CREDS_MAX_GROUPS];
	/*
	 * CAP_FSETID kept through the switch: for a write the kernel did not
	 * ask to drop setuid and setgid for (a mapping's stores written back,
	 * a writer holding CAP_FSETID), which the backing filesystem would
	 * otherwise drop because the opener lacks it.
	 */
	bool keep_fsetid;
};

/* Switches this thread to c; returns 0 or -errno (and stays as root). */
int creds_enter(const struct creds *c);
/* Back to root with no supplementary groups. */
void creds_leave(void);

/* Same uid, gid, groups (in order) and keep_fsetid. */
bool creds_equal(const struct creds *a, const struct creds *b);

/*
 * Root's data needs no switch: fsuid 0 is what the backing filesystem would
 * see from a root caller, whatever its groups.
 */
static inline bool creds_are_root(const struct creds *c)
{
	return c->uid == 0;
}

/*
 * Gives back CAP_MKNOD, which creds_enter dropped with the other
 * filesystem capabilities, until creds_leave: for a device node the kernel
 * has already checked CAP_MKNOD in the caller. 0 or -errno.
 */
int creds_keep_mknod(void);

/*
 * Sets this thread's umask to mask (the caller's, for a creation) and returns
 * the mode to create with: mode itself, so that the backing filesystem
 * applies the umask only where no default ACL replaces it, as for a local
 * caller. The first call gives the thread its own umask (unshare(CLONE_FS));
 * a thread that cannot have one gets mode & ~mask instead, never a mode
 * wider than the caller asked for.
 */
mode_t creds_umask_for_creation(mode_t mode, mode_t mask);

#endif
