/*
 * Open-file caps: descriptors are a resource the tenants share, so no
 * tenant, and no user, may hold more than its cap of files open through
 * the daemon at once. Past it its opens fail with EMFILE, and the rest of
 * the descriptor limit stays for everyone else.
 *
 * The cap is half of what the daemon's descriptor limit leaves for open
 * files (a quarter of the limit: each open file holds two descriptors, and
 * the inode cache may use the other half), read at each open, since the
 * limit can change under the daemon.
 */
#ifndef FUSESCHED_OPEN_FILES_H
#define FUSESCHED_OPEN_FILES_H

#include <stdint.h>
#include <sys/types.h>

struct open_files;

/* Counts for tenant ids below max_tenants. 0 or -ENOMEM. */
int open_files_new(uint32_t max_tenants, struct open_files **out);
void open_files_free(struct open_files *of);

/* One more open file for tenant and uid: 0, or -EMFILE (nothing taken) when either is at the cap. */
int open_files_take(struct open_files *of, uint32_t tenant, uid_t uid);
void open_files_put(struct open_files *of, uint32_t tenant, uid_t uid);

/* The cap now, from RLIMIT_NOFILE (at least 1). */
uint32_t open_files_cap(void);

#endif
