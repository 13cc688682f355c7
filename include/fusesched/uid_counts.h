/* A count per user, for the few users that hold something at once (open
 * files, executors): a list, searched in full. Not locked: its owner's lock. */
#ifndef FUSESCHED_UID_COUNTS_H
#define FUSESCHED_UID_COUNTS_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

struct uid_count {
	uid_t uid;
	uint32_t count;
};

struct uid_counts {
	struct uid_count *users;
	uint32_t n, capacity;
};

/* uid's count; when missing, made at 0 if make, else NULL. NULL also when out of memory.
 * Valid until the next call that makes or forgets one. */
uint32_t *uid_counts_find(struct uid_counts *c, uid_t uid, bool make);
/* uid is forgotten if its count is 0. */
void uid_counts_forget_idle(struct uid_counts *c, uid_t uid);
void uid_counts_free(struct uid_counts *c);

#endif
