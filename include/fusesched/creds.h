/*
 * Caller credentials for the worker thread serving a request.
 *
 * Objects are created as the caller: the thread's fsuid, fsgid and
 * supplementary groups are switched with raw syscalls, which act on the
 * calling thread only (glibc's wrappers would change every thread).
 * Switching fsuid away from 0 also drops the filesystem capabilities, so
 * root's privileges do not leak into what a tenant creates.
 */
#ifndef FUSESCHED_CREDS_H
#define FUSESCHED_CREDS_H

#include <sys/types.h>

#define CREDS_MAX_GROUPS 64

struct creds {
	uid_t uid;
	gid_t gid;
	int group_count;           /* -1: unknown, keep none */
	gid_t groups[CREDS_MAX_GROUPS];
};

/* Switches this thread to c; returns 0 or -errno (and stays as root). */
int creds_enter(const struct creds *c);
/* Back to root with no supplementary groups. */
void creds_leave(void);

#endif
