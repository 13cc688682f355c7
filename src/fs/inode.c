/* Inode table: slot-indexed node ids, (dev, ino) hash, O_PATH descriptors. */
#include "fusesched/inode.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

/*
 * Slots live in fixed-size chunks that never move, so readers find a node's
 * descriptor without taking the table lock while writers add chunks.
 */
#define SLOTS_PER_CHUNK 4096u
#define MAX_CHUNKS 65536u          /* 268M nodes: far past any fd limit */
#define ROOT_NODE_ID 1u

struct inode_slot {
	_Atomic int fd;            /* -1 when the slot is free */
	mode_t type;
	dev_t dev;
	ino_t ino;
	uint64_t nlookup;
	uint64_t generation;
	uint32_t next;             /* hash chain, or free list when free */
};

struct inode_table {
	pthread_mutex_t lock;
	_Atomic(struct inode_slot *) chunks[MAX_CHUNKS];
	uint32_t slots_allocated;  /* slots [0, slots_allocated) exist */
	uint32_t free_head;        /* 0: empty (slot 0 is never used) */
	uint32_t *buckets;         /* heads of hash chains, 0: empty */
	uint32_t bucket_count;     /* power of two */
	uint64_t live;
};

static struct inode_slot *slot_at(const struct inode_table *t, uint64_t id)
{
	uint64_t chunk = id / SLOTS_PER_CHUNK;
	if (chunk >= MAX_CHUNKS)
		return NULL;
	struct inode_slot *c = atomic_load_explicit(&((struct inode_table *)t)->chunks[chunk],
						    memory_order_acquire);
	return c ? &c[id % SLOTS_PER_CHUNK] : NULL;
}

static uint32_t hash_dev_ino(dev_t dev, ino_t ino, uint32_t bucket_count)
{
	uint64_t h = (uint64_t)ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)dev * 0xc2b2ae3d27d4eb4full;
	h ^= h >> 29;
	return (uint32_t)(h & (bucket_count - 1));
}

static int grow_slots(struct inode_table *t)
{
	uint32_t chunk = t->slots_allocated / SLOTS_PER_CHUNK;
	if (chunk >= MAX_CHUNKS)
		return -ENFILE;
	struct inode_slot *c = calloc(SLOTS_PER_CHUNK, sizeof(*c));
	if (!c)
		return -ENOMEM;
	for (uint32_t i = 0; i < SLOTS_PER_CHUNK; i++)
		atomic_init(&c[i].fd, -1);
	uint32_t first = t->slots_allocated;
	/* Thread the new slots onto the free list, lowest index first. */
	for (uint32_t i = SLOTS_PER_CHUNK; i-- > 0;) {
		uint32_t id = first + i;
		if (id == 0)
			continue;
		c[i].next = t->free_head;
		t->free_head = id;
	}
	atomic_store_explicit(&t->chunks[chunk], c, memory_order_release);
	t->slots_allocated += SLOTS_PER_CHUNK;
	return 0;
}

static int grow_buckets(struct inode_table *t)
{
	uint32_t count = t->bucket_count ? t->bucket_count * 2 : 1024;
	uint32_t *b = calloc(count, sizeof(*b));
	if (!b)
		return -ENOMEM;
	for (uint32_t i = 0; i < t->bucket_count; i++) {
		uint32_t id = t->buckets[i];
		while (id) {
			struct inode_slot *s = slot_at(t, id);
			uint32_t next = s->next;
			uint32_t h = hash_dev_ino(s->dev, s->ino, count);
			s->next = b[h];
			b[h] = id;
			id = next;
		}
	}
	free(t->buckets);
	t->buckets = b;
	t->bucket_count = count;
	return 0;
}

static void chain_remove(struct inode_table *t, uint32_t id, const struct inode_slot *s)
{
	uint32_t *link = &t->buckets[hash_dev_ino(s->dev, s->ino, t->bucket_count)];
	while (*link && *link != id)
		link = &slot_at(t, *link)->next;
	if (*link)
		*link = s->next;
}

/* Caller holds the lock. */
static int slot_publish(struct inode_table *t, int fd, const struct stat *st, uint32_t *id_out)
{
	if (!t->free_head) {
		int r = grow_slots(t);
		if (r)
			return r;
	}
	if (t->live + 1 > t->bucket_count) {
		int r = grow_buckets(t);
		if (r)
			return r;
	}
	uint32_t id = t->free_head;
	struct inode_slot *s = slot_at(t, id);
	t->free_head = s->next;
	s->type = st->st_mode & S_IFMT;
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->nlookup = 1;
	s->generation++;
	uint32_t h = hash_dev_ino(s->dev, s->ino, t->bucket_count);
	s->next = t->buckets[h];
	t->buckets[h] = id;
	atomic_store_explicit(&s->fd, fd, memory_order_release);
	t->live++;
	*id_out = id;
	return 0;
}

int inode_table_new(int root_fd, struct inode_table **out)
{
	struct stat st;
	if (fstatat(root_fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	struct inode_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	uint32_t id = 0;
	int r = slot_publish(t, root_fd, &st, &id);
	if (r == 0 && id != ROOT_NODE_ID)
		r = -EINVAL; /* the free list hands out 1 first; anything else is a bug */
	if (r) {
		inode_table_free(t);
		return r;
	}
	*out = t;
	return 0;
}

void inode_table_free(struct inode_table *t)
{
	if (!t)
		return;
	for (uint32_t c = 0; c < MAX_CHUNKS; c++) {
		struct inode_slot *chunk = atomic_load(&t->chunks[c]);
		if (!chunk)
			break;
		for (uint32_t i = 0; i < SLOTS_PER_CHUNK; i++) {
			int fd = atomic_load(&chunk[i].fd);
			if (fd >= 0)
				close(fd);
		}
		free(chunk);
	}
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int inode_table_insert(struct inode_table *t, int fd, const struct stat *st,
		       uint64_t *node_id, uint64_t *generation)
{
	pthread_mutex_lock(&t->lock);
	uint32_t id = t->buckets[hash_dev_ino(st->st_dev, st->st_ino, t->bucket_count)];
	struct inode_slot *s = NULL;
	while (id) {
		s = slot_at(t, id);
		if (s->dev == st->st_dev && s->ino == st->st_ino)
			break;
		id = s->next;
	}
	int r = 0;
	if (id) {
		s->nlookup++;
		close(fd);
	} else {
		r = slot_publish(t, fd, st, &id);
		s = r ? NULL : slot_at(t, id);
	}
	if (s) {
		*node_id = id;
		*generation = s->generation;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

int inode_table_ref(struct inode_table *t, uint64_t node_id)
{
	int r = -ESTALE;
	pthread_mutex_lock(&t->lock);
	struct inode_slot *s = node_id < t->slots_allocated ? slot_at(t, node_id) : NULL;
	if (s && atomic_load(&s->fd) >= 0) {
		s->nlookup++;
		r = 0;
	}
	pthread_mutex_unlock(&t->lock);
	return r;
}

int inode_table_fd(const struct inode_table *t, uint64_t node_id)
{
	const struct inode_slot *s = node_id ? slot_at(t, node_id) : NULL;
	if (!s)
		return -ESTALE;
	int fd = atomic_load_explicit(&((struct inode_slot *)s)->fd, memory_order_acquire);
	return fd >= 0 ? fd : -ESTALE;
}

mode_t inode_table_type(const struct inode_table *t, uint64_t node_id)
{
	const struct inode_slot *s = node_id ? slot_at(t, node_id) : NULL;
	return s ? s->type : 0;
}

void inode_table_forget(struct inode_table *t, uint64_t node_id, uint64_t nlookup)
{
	if (node_id == ROOT_NODE_ID)
		return; /* the root is pinned for the life of the mount */
	pthread_mutex_lock(&t->lock);
	struct inode_slot *s = node_id < t->slots_allocated ? slot_at(t, node_id) : NULL;
	if (s && atomic_load(&s->fd) >= 0) {
		s->nlookup = nlookup >= s->nlookup ? 0 : s->nlookup - nlookup;
		if (s->nlookup == 0) {
			chain_remove(t, (uint32_t)node_id, s);
			int fd = atomic_exchange(&s->fd, -1);
			close(fd);
			s->next = t->free_head;
			t->free_head = (uint32_t)node_id;
			t->live--;
		}
	}
	pthread_mutex_unlock(&t->lock);
}

uint64_t inode_table_count(struct inode_table *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t n = t->live;
	pthread_mutex_unlock(&t->lock);
	return n;
}
