/* fusesched-bench-tenant: ns per tenant_resolve() on a cache hit (one
 * thread and all CPUs) and on a miss (real /proc reads).  Not a test. */
#include "fusesched/clock.h"
#include "fusesched/tenant.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct run {
	struct tenant_table *table;
	pid_t pid;
	long iterations;
	double ns_per_call;
};

/* The daemon reads the clock once per request anyway; here "now" advances
 * by 1 ns per call so the clock read is not part of the figure. */
static void *run_hits(void *p)
{
	struct run *r = p;
	uint64_t base = clock_now_ns(), start, sum = 0;

	tenant_resolve(r->table, r->pid, base);
	start = clock_now_ns();
	for (long i = 0; i < r->iterations; i++)
		sum += tenant_resolve(r->table, r->pid, base + (uint64_t)i);
	r->ns_per_call = (double)(clock_now_ns() - start) / (double)r->iterations;
	if (sum == UINT64_MAX)	/* keeps the loop from being optimised away */
		puts("");
	return NULL;
}

static struct tenant_table *table_with_ttl(const char *ttl_line)
{
	char err[256], text[128];
	struct config *cfg;
	struct tenant_table *table;
	FILE *in;

	snprintf(text, sizeof(text), "[tenants]\n%s\n", ttl_line);
	in = fmemopen(text, strlen(text), "r");
	if (config_load_stream(in, "bench", &cfg, err, sizeof(err)) ||
	    tenant_table_new(NULL, cfg, &table, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		exit(1);
	}
	fclose(in);
	config_free(cfg);
	return table;
}

int main(void)
{
	long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
	struct tenant_table *table = table_with_ttl("cache_ttl_ms = 60000");
	struct run one = { table, getpid(), 20000000, 0 }, *many;
	pthread_t *th;

	run_hits(&one);
	printf("hit, 1 thread:   %6.1f ns/call\n", one.ns_per_call);

	many = calloc((size_t)ncpu, sizeof(*many));
	th = calloc((size_t)ncpu, sizeof(*th));
	for (long i = 0; i < ncpu; i++) {
		many[i] = (struct run){ table, getpid(), 20000000, 0 };
		pthread_create(&th[i], NULL, run_hits, &many[i]);
	}
	for (long i = 0; i < ncpu; i++) {
		pthread_join(th[i], NULL);
		printf("hit, %ld threads: %6.1f ns/call (thread %ld)\n", ncpu,
		       many[i].ns_per_call, i);
	}
	tenant_table_free(table);

	table = table_with_ttl("cache_ttl_ms = 0");
	one = (struct run){ table, getpid(), 20000, 0 };
	run_hits(&one);
	printf("miss:            %6.1f ns/call (reads /proc/PID/cgroup)\n",
	       one.ns_per_call);
	tenant_table_free(table);
	free(many);
	free(th);
	return 0;
}
