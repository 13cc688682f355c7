/* Open files counted per tenant and per uid, under one lock (opens are not a hot path). */
#include "fusesched/open_files.h"
#include "fusesched/uid_counts.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/resource.h>

struct open_files {
	pthread_mutex_t lock;
	uint32_t *tenant_files;    /* by tenant id */
	uint32_t max_tenants;
	struct uid_counts uids;    /* files open per user */
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
	uid_counts_free(&of->uids);
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

int open_files_take(struct open_files *of, uint32_t tenant, uid_t uid)
{
	uint32_t cap = open_files_cap();
	pthread_mutex_lock(&of->lock);
	uint32_t *t = tenant < of->max_tenants ? &of->tenant_files[tenant] : NULL;
	uint32_t *u = uid_counts_find(&of->uids, uid, true);
	int r = u ? -EMFILE : -ENOMEM;
	if (u && (!t || *t < cap) && *u < cap) {
		if (t)
			(*t)++;
		(*u)++;
		r = 0;
	}
	uid_counts_forget_idle(&of->uids, uid); /* made for a refused open */
	pthread_mutex_unlock(&of->lock);
	return r;
}

void open_files_put(struct open_files *of, uint32_t tenant, uid_t uid)
{
	pthread_mutex_lock(&of->lock);
	if (tenant < of->max_tenants && of->tenant_files[tenant])
		of->tenant_files[tenant]--;
	uint32_t *u = uid_counts_find(&of->uids, uid, false);
	if (u && *u) {
		(*u)--;
		uid_counts_forget_idle(&of->uids, uid);
	}
	pthread_mutex_unlock(&of->lock);
}
