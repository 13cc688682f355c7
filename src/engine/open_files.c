/* Open files counted per tenant and per uid, under one lock (opens are not a hot path). */
#include "fusesched/open_files.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>

struct uid_count {
	uid_t uid;
	uint32_t files;
};

struct open_files {
	pthread_mutex_t lock;
	uint32_t *tenant_files;    /* by tenant id */
	uint32_t max_tenants;
	struct uid_count *uids;    /* users with files open: few, so a list */
	uint32_t uid_count, uid_capacity;
};

int open_files_new(uint32_t max_tenants, struct open_files **out)
{
	struct open_files *of = calloc(1, sizeof(*of));
	if (!of || !(of->tenant_files = calloc(max_tenants ? max_tenants : 1, sizeof(uint32_t)))) {
		free(of);
		return -ENOMEM;
	}
	pthread_mutex_init(&of->lock, NULL);
	of->max_tenants = max_tenants;
	*out = of;
	return 0;
}

void open_files_free(struct open_files *of)
{
	if (!of)
		return;
	pthread_mutex_destroy(&of->lock);
	free(of->tenant_files);
	free(of->uids);
	free(of);
}

uint32_t open_files_cap(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
		return UINT32_MAX;
	rlim_t cap = rl.rlim_cur / 8;
	if (cap > UINT32_MAX)
		return UINT32_MAX;
	return cap ? (uint32_t)cap : 1;
}

/* Caller holds the lock. The user's entry, made if missing; NULL when out of memory. */
static struct uid_count *uid_entry(struct open_files *of, uid_t uid)
{
	for (uint32_t i = 0; i < of->uid_count; i++)
		if (of->uids[i].uid == uid)
			return &of->uids[i];
	if (of->uid_count == of->uid_capacity) {
		uint32_t capacity = of->uid_capacity ? of->uid_capacity * 2 : 16;
		struct uid_count *grown = realloc(of->uids, capacity * sizeof(*grown));
		if (!grown)
			return NULL;
		of->uids = grown;
		of->uid_capacity = capacity;
	}
	of->uids[of->uid_count] = (struct uid_count){.uid = uid};
	return &of->uids[of->uid_count++];
}

int open_files_take(struct open_files *of, uint32_t tenant, uid_t uid)
{
	uint32_t cap = open_files_cap();
	pthread_mutex_lock(&of->lock);
	uint32_t *t = tenant < of->max_tenants ? &of->tenant_files[tenant] : NULL;
	struct uid_count *u = uid_entry(of, uid);
	int r = u ? -EMFILE : -ENOMEM;
	if (u && (!t || *t < cap) && u->files < cap) {
		if (t)
			(*t)++;
		u->files++;
		r = 0;
	}
	if (u && u->files == 0)
		*u = of->uids[--of->uid_count]; /* made for a refused open */
	pthread_mutex_unlock(&of->lock);
	return r;
}

void open_files_put(struct open_files *of, uint32_t tenant, uid_t uid)
{
	pthread_mutex_lock(&of->lock);
	if (tenant < of->max_tenants && of->tenant_files[tenant])
		of->tenant_files[tenant]--;
	for (uint32_t i = 0; i < of->uid_count; i++) {
		if (of->uids[i].uid != uid)
			continue;
		if (--of->uids[i].files == 0)
			of->uids[i] = of->uids[--of->uid_count];
		break;
	}
	pthread_mutex_unlock(&of->lock);
}
