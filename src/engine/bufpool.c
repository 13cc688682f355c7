/* Engine I/O buffers: a registered arena of 1 MiB slabs, each split into one size of block. */
#include "fusesched/bufpool.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define SLAB_BYTES BUFPOOL_MAX_BLOCK_BYTES
#define MIN_BLOCK_SHIFT 12u                                  /* 4 KiB */
#define CLASS_COUNT 9u                                       /* 4 KiB .. 1 MiB */
#define MAX_BLOCKS_PER_SLAB (SLAB_BYTES >> MIN_BLOCK_SHIFT)  /* 256 */
#define NO_SLAB UINT32_MAX
#define NO_CLASS UINT8_MAX

/* A heap buffer's mapping kept for reuse (see heap_get). */
struct cached_map {
	struct cached_map *next;
};

/* Mappings kept for reuse, of one block size (the buffer's, plus its length page). */
struct cached_maps {
	struct cached_map *head;
	size_t count;
	size_t low;                       /* fewest kept since the last bufpool_trim */
};

struct slab {
	uint32_t prev, next;        /* in its class's list of slabs with free blocks, or the empty list */
	uint16_t free_count;
	uint8_t size_class;         /* NO_CLASS while empty */
	uint16_t free_blocks[MAX_BLOCKS_PER_SLAB];  /* stack of free block indices */
};

struct bufpool {
	pthread_mutex_t lock;
	char *arena;
	size_t arena_bytes;
	struct slab *slabs;
	uint32_t slab_count;
	uint32_t with_free[CLASS_COUNT];  /* heads: slabs of that class with a free block */
	uint32_t empty;                   /* head: slabs of no class */
	size_t slabs_used;
	size_t heap_fallbacks;
	size_t heap_bytes;                /* mapped for heap buffers now, cached ones included */
	struct cached_maps cached[CLASS_COUNT]; /* given back, kept for reuse, by block size */
};

static void list_push(struct bufpool *p, uint32_t *head, uint32_t i)
{
	p->slabs[i].prev = NO_SLAB;
	p->slabs[i].next = *head;
	if (*head != NO_SLAB)
		p->slabs[*head].prev = i;
	*head = i;
}

static void list_remove(struct bufpool *p, uint32_t *head, uint32_t i)
{
	struct slab *s = &p->slabs[i];
	if (s->prev != NO_SLAB)
		p->slabs[s->prev].next = s->next;
	else
		*head = s->next;
	if (s->next != NO_SLAB)
		p->slabs[s->next].prev = s->prev;
}

static uint32_t blocks_per_slab(uint8_t size_class)
{
	return MAX_BLOCKS_PER_SLAB >> size_class;
}

static uint8_t size_class_of(size_t bytes)
{
	uint8_t c = 0;
	while (((size_t)1 << (MIN_BLOCK_SHIFT + c)) < bytes)
		c++;
	return c;
}

/* A kept heap mapping of a block size: the block and its length page. */
static size_t mapped_bytes_of_class(uint8_t size_class)
{
	return ((size_t)1 << (MIN_BLOCK_SHIFT + size_class)) + BUFPOOL_ALIGN_BYTES;
}

int bufpool_new(size_t arena_bytes, struct bufpool **out)
{
	struct bufpool *p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->lock, NULL);
	p->empty = NO_SLAB;
	for (uint32_t c = 0; c < CLASS_COUNT; c++)
		p->with_free[c] = NO_SLAB;
	p->slab_count = (uint32_t)(arena_bytes / SLAB_BYTES);
	if (p->slab_count) {
		p->arena_bytes = (size_t)p->slab_count * SLAB_BYTES;
		p->slabs = calloc(p->slab_count, sizeof(*p->slabs));
		void *a = mmap(NULL, p->arena_bytes, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (!p->slabs || a == MAP_FAILED) {
			free(p->slabs);
			if (a != MAP_FAILED)
				munmap(a, p->arena_bytes);
			pthread_mutex_destroy(&p->lock);
			free(p);
			return -ENOMEM;
		}
		p->arena = a;
		/* Huge pages where the kernel has them; fault everything in now, not per request. */
		(void)madvise(p->arena, p->arena_bytes, MADV_HUGEPAGE);
		(void)madvise(p->arena, p->arena_bytes, MADV_POPULATE_WRITE);
		for (uint32_t i = p->slab_count; i-- > 0;) {
			p->slabs[i].size_class = NO_CLASS;
			list_push(p, &p->empty, i);
		}
	}
	*out = p;
	return 0;
}

void bufpool_free(struct bufpool *p)
{
	if (!p)
		return;
	if (p->arena)
		munmap(p->arena, p->arena_bytes);
	for (uint8_t k = 0; k < CLASS_COUNT; k++) {
		while (p->cached[k].head) {
			struct cached_map *c = p->cached[k].head;
			p->cached[k].head = c->next;
			munmap(c, mapped_bytes_of_class(k));
		}
	}
	free(p->slabs);
	pthread_mutex_destroy(&p->lock);
	free(p);
}

struct iovec bufpool_arena(const struct bufpool *p)
{
	return (struct iovec){.iov_base = p->arena, .iov_len = p->arena_bytes};
}

bool bufpool_in_arena(const struct bufpool *p, const void *buf)
{
	const char *c = buf;
	return p->arena && c >= p->arena && c < p->arena + p->arena_bytes;
}

/*
 * Past the arena, each buffer is a mapping of its own, one page larger: the
 * page before the buffer records the mapping's length. A buffer of up to
 * 1 MiB is mapped at its block size (a power of two, as in the arena), and
 * mappings given back are kept for reuse by size (a flood maps each once,
 * not once per request: mapped and unmapped per request, 128 KiB payloads
 * held a direct-write flood to a quarter of its 1 MiB rate, the workers'
 * mmaps waiting on the reactor's munmaps and their TLB shootdowns).
 * bufpool_trim unmaps those that sat unused since its last call, so after
 * a flood the memory goes back to the system (malloc would keep it in its
 * arenas, and glibc raises its mmap threshold after the first large free,
 * so later 1 MiB buffers would come from the heap and stay there).
 */
static void *heap_get(struct bufpool *p, size_t bytes)
{
	bool kept = bytes <= SLAB_BYTES;
	uint8_t k = kept ? size_class_of(bytes) : NO_CLASS;
	size_t rounded = kept ? (size_t)1 << (MIN_BLOCK_SHIFT + k)
			      : (bytes + BUFPOOL_ALIGN_BYTES - 1) & ~(size_t)(BUFPOOL_ALIGN_BYTES - 1);
	size_t mapped = rounded + BUFPOOL_ALIGN_BYTES;
	char *base = NULL;
	pthread_mutex_lock(&p->lock);
	p->heap_fallbacks++;
	if (kept && p->cached[k].head) {
		struct cached_maps *c = &p->cached[k];
		base = (char *)c->head;
		c->head = c->head->next;
		c->count--;
		if (c->count < c->low)
			c->low = c->count;
	}
	pthread_mutex_unlock(&p->lock);
	if (!base) {
		base = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		if (base == MAP_FAILED)
			return NULL;
		/* Fault it in with one call: page by page a VM can take ~11 us a
		 * page (3 ms a MiB) on the worker that copies the request in,
		 * against ~0.6 us a page populated. Best effort (older kernels). */
		(void)madvise(base, mapped, MADV_POPULATE_WRITE);
		pthread_mutex_lock(&p->lock);
		p->heap_bytes += mapped;
		pthread_mutex_unlock(&p->lock);
	}
	*(size_t *)base = mapped;
	return base + BUFPOOL_ALIGN_BYTES;
}

static void heap_put(struct bufpool *p, void *buf)
{
	char *base = (char *)buf - BUFPOOL_ALIGN_BYTES;
	size_t mapped = *(size_t *)base;
	uint8_t k = size_class_of(mapped - BUFPOOL_ALIGN_BYTES);
	if (k < CLASS_COUNT && mapped == mapped_bytes_of_class(k)) {
		struct cached_map *c = (struct cached_map *)base;
		pthread_mutex_lock(&p->lock);
		c->next = p->cached[k].head;
		p->cached[k].head = c;
		p->cached[k].count++;
		pthread_mutex_unlock(&p->lock);
		return;
	}
	munmap(base, mapped);
	pthread_mutex_lock(&p->lock);
	p->heap_bytes -= mapped;
	pthread_mutex_unlock(&p->lock);
}

size_t bufpool_trim(struct bufpool *p, size_t max_unmaps)
{
	size_t unmapped = 0;
	pthread_mutex_lock(&p->lock);
	for (uint8_t k = CLASS_COUNT; k-- > 0;) { /* the largest first: most memory per unmap */
		struct cached_maps *c = &p->cached[k];
		size_t bytes = mapped_bytes_of_class(k);
		/* The fewest kept since the last call: that many sat unused all along.
		 * The lock is dropped for each munmap, and others may take kept
		 * mappings meanwhile: the list, not the count taken here, says what is left. */
		size_t idle = c->low < c->count ? c->low : c->count;
		for (size_t done = 0; done < idle && unmapped < max_unmaps && c->head; done++) {
			struct cached_map *m = c->head;
			c->head = m->next;
			c->count--;
			p->heap_bytes -= bytes;
			pthread_mutex_unlock(&p->lock);
			munmap(m, bytes);
			unmapped++;
			pthread_mutex_lock(&p->lock);
		}
		c->low = c->count;
	}
	pthread_mutex_unlock(&p->lock);
	return unmapped;
}

static void *get(struct bufpool *p, size_t bytes, size_t max_slabs)
{
	if (bytes == 0)
		bytes = 1;
	if (bytes > SLAB_BYTES || !p->arena)
		return heap_get(p, bytes);
	uint8_t c = size_class_of(bytes);
	pthread_mutex_lock(&p->lock);
	uint32_t i = p->with_free[c];
	if (i == NO_SLAB) {
		i = p->empty;
		if (i == NO_SLAB || p->slabs_used >= max_slabs) {
			pthread_mutex_unlock(&p->lock);
			return heap_get(p, bytes);
		}
		list_remove(p, &p->empty, i);
		struct slab *fresh = &p->slabs[i];
		fresh->size_class = c;
		fresh->free_count = (uint16_t)blocks_per_slab(c);
		for (uint32_t b = 0; b < fresh->free_count; b++)
			fresh->free_blocks[b] = (uint16_t)(fresh->free_count - 1 - b);
		list_push(p, &p->with_free[c], i);
		p->slabs_used++;
	}
	struct slab *s = &p->slabs[i];
	uint16_t block = s->free_blocks[--s->free_count];
	if (s->free_count == 0)
		list_remove(p, &p->with_free[c], i);
	pthread_mutex_unlock(&p->lock);
	return p->arena + (size_t)i * SLAB_BYTES + ((size_t)block << (MIN_BLOCK_SHIFT + c));
}

void *bufpool_get(struct bufpool *p, size_t bytes)
{
	return get(p, bytes, p->slab_count);
}

void *bufpool_get_queued(struct bufpool *p, size_t bytes)
{
	return get(p, bytes, p->slab_count / 2);
}

void bufpool_put(struct bufpool *p, void *buf)
{
	if (!buf)
		return;
	if (!bufpool_in_arena(p, buf)) {
		heap_put(p, buf);
		return;
	}
	size_t offset = (size_t)((char *)buf - p->arena);
	uint32_t i = (uint32_t)(offset / SLAB_BYTES);
	pthread_mutex_lock(&p->lock);
	struct slab *s = &p->slabs[i];
	uint8_t c = s->size_class;
	if (s->free_count == 0)
		list_push(p, &p->with_free[c], i);
	s->free_blocks[s->free_count++] = (uint16_t)((offset % SLAB_BYTES) >> (MIN_BLOCK_SHIFT + c));
	if (s->free_count == blocks_per_slab(c)) {
		/* Wholly free: any size may take it next. */
		list_remove(p, &p->with_free[c], i);
		s->size_class = NO_CLASS;
		list_push(p, &p->empty, i);
		p->slabs_used--;
	}
	pthread_mutex_unlock(&p->lock);
}

size_t bufpool_slabs_used(struct bufpool *p)
{
	pthread_mutex_lock(&p->lock);
	size_t n = p->slabs_used;
	pthread_mutex_unlock(&p->lock);
	return n;
}

size_t bufpool_heap_fallbacks(struct bufpool *p)
{
	pthread_mutex_lock(&p->lock);
	size_t n = p->heap_fallbacks;
	pthread_mutex_unlock(&p->lock);
	return n;
}

size_t bufpool_heap_bytes(struct bufpool *p)
{
	pthread_mutex_lock(&p->lock);
	size_t n = p->heap_bytes;
	pthread_mutex_unlock(&p->lock);
	return n;
}
