/* The tenant table: tenant id -> queue, chained hashing over a power of two
 * of buckets, doubled when there are as many queues as buckets. Detached
 * queues are not in it. */
#include "sched_internal.h"

#include <errno.h>
#include <stdlib.h>

#define TABLE_INITIAL_BUCKETS 64

static size_t bucket_of(uint64_t id, size_t nbuckets)
{
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (size_t)(id & (nbuckets - 1));
}

int sched_table_init(struct tenant_table *t)
{
	t->nbuckets = TABLE_INITIAL_BUCKETS;
	t->nqueues = 0;
	t->buckets = calloc(t->nbuckets, sizeof(*t->buckets));
	return t->buckets ? 0 : -ENOMEM;
}

void sched_table_destroy(struct tenant_table *t)
{
	free(t->buckets);
	t->buckets = NULL;
}

static int table_grow(struct tenant_table *t)
{
	size_t n = t->nbuckets * 2;
	struct sched_queue **b = calloc(n, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (size_t i = 0; i < t->nbuckets; i++) {
		struct sched_queue *q = t->buckets[i];
		while (q) {
			struct sched_queue *next = q->table_next;
			size_t j = bucket_of(q->tenant_id, n);
			q->table_next = b[j];
			b[j] = q;
			q = next;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->nbuckets = n;
	return 0;
}

int sched_table_reserve(struct tenant_table *t)
{
	return t->nqueues >= t->nbuckets ? table_grow(t) : 0;
}

struct sched_queue *sched_table_find(const struct tenant_table *t, uint64_t tenant_id)
{
	struct sched_queue *q = t->buckets[bucket_of(tenant_id, t->nbuckets)];
	while (q && q->tenant_id != tenant_id)
		q = q->table_next;
	return q;
}

void sched_table_insert(struct tenant_table *t, struct sched_queue *q)
{
	size_t b = bucket_of(q->tenant_id, t->nbuckets);
	q->table_next = t->buckets[b];
	t->buckets[b] = q;
	t->nqueues++;
}

void sched_table_remove(struct tenant_table *t, struct sched_queue *q)
{
	struct sched_queue **pp = &t->buckets[bucket_of(q->tenant_id, t->nbuckets)];
	while (*pp && *pp != q)
		pp = &(*pp)->table_next;
	if (*pp) {
		*pp = q->table_next;
		t->nqueues--;
	}
}
