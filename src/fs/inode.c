/*
 * Inode table: slot-indexed node ids, (dev, ino) hash, file handles and a
 * bounded clock cache of O_PATH descriptors. Nodes without a handle that
 * reopens keep their descriptor as long as the kernel keeps them; a second
 * clock ring over those picks the ones to ask the kernel to forget when
 * they pass the same bound (inode_table_prune_pick).
 *
 * Pin protocol between fd_get (lock-free) and the evictor (table lock):
 *   getter:  pins += 1;           then read fd
 *   evictor: swap fd for -1;      then read pins; nonzero: put fd back
 * All four are sequentially consistent, so either the getter reads the
 * descriptor before the swap, and then the evictor sees its pin and keeps
 * the descriptor, or the getter reads -1 and reopens under the lock.
 */
#include "fusesched/inode.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

/*
 * Slots live in fixed-size chunks that never move, so readers find a node's
 * descriptor without taking the table lock while writers add chunks.
 */
#define SLOTS_PER_CHUNK 4096u
#define MAX_CHUNKS 65536u          /* 268M nodes: far past what memory holds */
#define ROOT_NODE_ID 1u
/* Descriptors closed per lock hold; they are closed after the lock is dropped. */
#define CLOSE_BATCH 64u
#define NO_MOUNT UINT32_MAX
#define FUSE_SUPER_MAGIC 0x65735546

/* What a backing file was, as far as a change to it shows: any change,
 * through the mount or beside it, moves its ctime. */
struct file_version {
	struct timespec mtime, ctime;
	off_t size;
};

struct inode_slot {
	_Atomic int fd;            /* cached O_PATH descriptor; -1 when evicted or free */
	atomic_uint pins;          /* fd_get calls not yet put */
	atomic_bool referenced;    /* got since the clock hand last passed it */
	bool live;
	bool evictable;            /* has a handle; otherwise the fd lives as long as the node */
	mode_t type;
	dev_t dev;
	ino_t ino;
	uint64_t nlookup;
	uint64_t generation;
	uint32_t next;             /* hash chain, or free list when free */
	uint32_t clock_prev;       /* ring of the slots holding a descriptor, not held */
	uint32_t clock_next;       /* (the cache or the kept ring); 0 when not on it */
	uint32_t mount;            /* index into mounts, or NO_MOUNT */
	uint32_t holds;            /* open files: their node's descriptor stays off the ring */
	struct file_handle *handle;
	/* What the backing file was when the kernel's page cache of it was last
	 * validated (inode_table_cache_valid). */
	bool cache_known;
	struct file_version cache_version;
	/* Until when the kernel holds the entry and attributes it was last
	 * given, and what the backing file was then (inode_table_entry_held). */
	uint64_t given_until_ns;
	struct file_version given_version;
};

/*
 * open_by_handle_at needs a descriptor on the handle's mount (the mount, not
 * just the filesystem: a read-only bind mount inside the backing directory
 * must stay read-only), and not an O_PATH one: a directory opened for
 * reading, the first one met on that mount (a walk enters a mount at its
 * root directory). One per mount the live nodes are on, kept while any node
 * on it lives; the mount id cannot be reused while we hold it.
 */
struct inode_mount {
	int mount_id;
	/*
	 * -1: handles on this mount do not reopen reliably, its nodes keep their
	 * descriptors. FUSE hands out handles but, unless its server supports
	 * export, decodes them only while the inode is still cached.
	 */
	int fd;
	uint32_t nodes;            /* 0: entry unused */
};

/* A clock ring of slots, linked through clock_prev/clock_next. */
struct fd_ring {
	uint32_t hand;             /* a slot on the ring, 0: ring empty */
	uint32_t count;            /* slots on the ring */
};

struct inode_table {
	pthread_mutex_t lock;
	_Atomic(struct inode_slot *) chunks[MAX_CHUNKS];
	uint32_t slots_allocated;  /* slots [0, slots_allocated) exist */
	uint32_t free_head;        /* 0: empty (slot 0 is never used) */
	uint32_t *buckets;         /* heads of hash chains, 0: empty */
	uint32_t bucket_count;     /* power of two */
	uint64_t live;
	struct inode_mount *mounts;
	uint32_t mount_count;
	struct fd_ring cache;      /* evictable slots' cached descriptors */
	struct fd_ring kept;       /* descriptors of slots without a handle (root and held: off it) */
	atomic_uint kept_fds;      /* kept.count, read without the lock */
	uint32_t cached_fds_max;   /* bound of each ring */
};

/* Descriptors to close once the table lock is dropped (a last close can be slow). */
struct fd_batch {
	int fds[CLOSE_BATCH + 2];  /* + a node's fd and its mount's fd on forget */
	uint32_t count;
};

static void fd_batch_close(struct fd_batch *b)
{
	for (uint32_t i = 0; i < b->count; i++)
		close(b->fds[i]);
	b->count = 0;
}

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

/* Caller holds the lock. The findable slot of (dev, ino), or 0. */
static uint32_t chain_find(const struct inode_table *t, dev_t dev, ino_t ino)
{
	uint32_t id = t->buckets[hash_dev_ino(dev, ino, t->bucket_count)];
	while (id) {
		const struct inode_slot *s = slot_at(t, id);
		if (s->dev == dev && s->ino == ino)
			return id;
		id = s->next;
	}
	return 0;
}

/*
 * Removes by id, not by (dev, ino): a slot already taken off its chain (its
 * number went to a newer inode) is not found, and the newer slot on the same
 * chain stays.
 */
static void chain_remove(struct inode_table *t, uint32_t id, const struct inode_slot *s)
{
	uint32_t *link = &t->buckets[hash_dev_ino(s->dev, s->ino, t->bucket_count)];
	while (*link && *link != id)
		link = &slot_at(t, *link)->next;
	if (*link)
		*link = s->next;
}

/* The ring a slot holding a descriptor belongs on. */
static struct fd_ring *ring_of(struct inode_table *t, const struct inode_slot *s)
{
	return s->evictable ? &t->cache : &t->kept;
}

/* Caller holds the lock. New entries go just behind the hand. */
static void ring_insert(struct inode_table *t, uint32_t id, struct inode_slot *s)
{
	struct fd_ring *r = ring_of(t, s);
	if (!r->hand) {
		s->clock_prev = s->clock_next = id;
		r->hand = id;
	} else {
		struct inode_slot *hand = slot_at(t, r->hand);
		s->clock_next = r->hand;
		s->clock_prev = hand->clock_prev;
		slot_at(t, hand->clock_prev)->clock_next = id;
		hand->clock_prev = id;
	}
	r->count++;
	if (r == &t->kept)
		atomic_store_explicit(&t->kept_fds, r->count, memory_order_relaxed);
}

static void ring_remove(struct inode_table *t, uint32_t id, struct inode_slot *s)
{
	struct fd_ring *r = ring_of(t, s);
	if (s->clock_next == id) {
		r->hand = 0;
	} else {
		slot_at(t, s->clock_prev)->clock_next = s->clock_next;
		slot_at(t, s->clock_next)->clock_prev = s->clock_prev;
		if (r->hand == id)
			r->hand = s->clock_next;
	}
	s->clock_prev = s->clock_next = 0;
	r->count--;
	if (r == &t->kept)
		atomic_store_explicit(&t->kept_fds, r->count, memory_order_relaxed);
}

/* Caller holds the lock. Installs fd as the cached descriptor of an evictable slot. */
static void cache_install(struct inode_table *t, uint32_t id, struct inode_slot *s, int fd)
{
	/* A fresh descriptor was wanted just now: one pass of the hand spares it. */
	atomic_store_explicit(&s->referenced, true, memory_order_relaxed);
	atomic_store(&s->fd, fd);
	ring_insert(t, id, s);
}

/*
 * Caller holds the lock. Moves the hand until at most target descriptors are
 * cached or the batch is full; a referenced slot loses its mark and is passed,
 * a pinned one is passed. Two turns of the ring at most, so a ring of pinned
 * descriptors (more requests in flight than the bound) cannot spin it.
 */
static void clock_evict(struct inode_table *t, uint32_t target, struct fd_batch *b)
{
	uint64_t steps = 2 * (uint64_t)t->cache.count;
	while (t->cache.count > target && b->count < CLOSE_BATCH && steps-- > 0) {
		uint32_t id = t->cache.hand;
		struct inode_slot *s = slot_at(t, id);
		if (atomic_load_explicit(&s->referenced, memory_order_relaxed)) {
			atomic_store_explicit(&s->referenced, false, memory_order_relaxed);
			t->cache.hand = s->clock_next;
			continue;
		}
		if (atomic_load(&s->pins) != 0) { /* in use: do not even hide it */
			t->cache.hand = s->clock_next;
			continue;
		}
		int fd = atomic_exchange(&s->fd, -1);
		if (atomic_load(&s->pins) != 0) {
			atomic_store(&s->fd, fd); /* a getter read it before the swap */
			t->cache.hand = s->clock_next;
			continue;
		}
		ring_remove(t, id, s); /* moves the hand on */
		b->fds[b->count++] = fd;
	}
}

/*
 * Caller holds the lock. The mount entry for mount_id with one more node on
 * it, or -1: no entry yet and fd (the node's) is not a directory to anchor one.
 */
static int32_t mount_ref(struct inode_table *t, int mount_id, int fd, bool is_dir)
{
	int32_t unused = -1;
	for (uint32_t i = 0; i < t->mount_count; i++) {
		if (t->mounts[i].nodes && t->mounts[i].mount_id == mount_id) {
			t->mounts[i].nodes++;
			return (int32_t)i;
		}
		if (!t->mounts[i].nodes && unused < 0)
			unused = (int32_t)i;
	}
	if (!is_dir)
		return -1;
	if (unused < 0) {
		struct inode_mount *m = realloc(t->mounts, (t->mount_count + 1) * sizeof(*m));
		if (!m)
			return -1;
		t->mounts = m;
		unused = (int32_t)t->mount_count++;
	}
	int anchor = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (anchor < 0)
		return -1;
	struct statfs sfs;
	if (fstatfs(anchor, &sfs) < 0 || sfs.f_type == FUSE_SUPER_MAGIC) {
		close(anchor);
		anchor = -1;
	}
	t->mounts[unused] = (struct inode_mount){.mount_id = mount_id, .fd = anchor, .nodes = 1};
	return unused;
}

/* Caller holds the lock. */
static void mount_unref(struct inode_table *t, uint32_t index, struct fd_batch *b)
{
	struct inode_mount *m = &t->mounts[index];
	if (--m->nodes == 0 && m->fd >= 0) {
		b->fds[b->count++] = m->fd;
		m->fd = -1;
	}
}

/* Room for any file handle. */
struct handle_buf {
	_Alignas(struct file_handle) unsigned char bytes[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};

/* fd's file handle and mount id, or NULL: the filesystem has no handles (EOPNOTSUPP). */
static const struct file_handle *handle_of(int fd, struct handle_buf *buf, int *mount_id)
{
	struct file_handle *fh = (struct file_handle *)buf->bytes;
	fh->handle_bytes = MAX_HANDLE_SZ;
	return name_to_handle_at(fd, "", fh, mount_id, AT_EMPTY_PATH) == 0 ? fh : NULL;
}

static bool handles_equal(const struct file_handle *a, const struct file_handle *b)
{
	return a && b && a->handle_type == b->handle_type && a->handle_bytes == b->handle_bytes &&
	       memcmp(a->f_handle, b->f_handle, a->handle_bytes) == 0;
}

/*
 * Caller holds the lock. Is fd, found under the (dev, ino) of the live slot
 * s, open on s's inode? A cached descriptor pins that inode, so its number
 * cannot have gone to another file (no syscall on this path); without one
 * the file handles decide, as they carry the inode's generation. No handle
 * to compare counts as another inode: a fresh slot is right for fd either
 * way. *fd_can_cache: fd is on the mount s reopens through, so it may
 * become s's descriptor.
 */
static bool slot_is_inode_of(const struct inode_table *t, const struct inode_slot *s, int fd,
			     bool *fd_can_cache)
{
	*fd_can_cache = false;
	if (atomic_load(&s->fd) >= 0)
		return true;
	struct handle_buf buf;
	int mount_id = 0;
	const struct file_handle *fh = handle_of(fd, &buf, &mount_id);
	if (!handles_equal(fh, s->handle))
		return false;
	*fd_can_cache = s->evictable && t->mounts[s->mount].mount_id == mount_id;
	return true;
}

/*
 * Caller holds the lock. Takes fd's file handle, so that the descriptor can
 * be evicted; without a handle that reopens (EOPNOTSUPP, FUSE, no anchor for
 * the mount) the descriptor stays for the node's lifetime.
 */
static void slot_take_handle(struct inode_table *t, struct inode_slot *s, int fd)
{
	struct handle_buf buf;
	int mount_id = 0;
	const struct file_handle *fh = handle_of(fd, &buf, &mount_id);
	int32_t mount = fh ? mount_ref(t, mount_id, fd, S_ISDIR(s->type)) : -1;
	if (mount < 0)
		return;
	s->mount = (uint32_t)mount;
	if (t->mounts[mount].fd < 0)
		return;
	size_t bytes = sizeof(*fh) + fh->handle_bytes;
	s->handle = malloc(bytes);
	if (!s->handle)
		return;
	memcpy(s->handle, fh, bytes);
	s->evictable = true;
}

/* Caller holds the lock. */
static int slot_publish(struct inode_table *t, int fd, const struct stat *st, bool pinned,
			uint32_t *id_out)
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
	s->live = true;
	s->evictable = false;
	s->mount = NO_MOUNT;
	s->cache_known = false;
	s->given_until_ns = 0;
	if (!pinned)
		slot_take_handle(t, s, fd);
	uint32_t h = hash_dev_ino(s->dev, s->ino, t->bucket_count);
	s->next = t->buckets[h];
	t->buckets[h] = id;
	if (s->evictable) {
		cache_install(t, id, s, fd);
	} else {
		atomic_store(&s->fd, fd);
		if (!pinned) {
			atomic_store_explicit(&s->referenced, true, memory_order_relaxed);
			ring_insert(t, id, s);
		}
	}
	t->live++;
	*id_out = id;
	return 0;
}

/*
 * The backing directory's mount gets its anchor now: its nodes below are
 * mostly files, which cannot anchor one. The root holds it for good.
 */
static void root_mount_register(struct inode_table *t, int root_fd)
{
	struct handle_buf buf;
	int mount_id = 0;
	if (handle_of(root_fd, &buf, &mount_id))
		mount_ref(t, mount_id, root_fd, true);
}

int inode_table_new(int root_fd, uint32_t cached_fds_max, struct inode_table **out)
{
	struct stat st;
	if (fstatat(root_fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
		return -errno;
	struct inode_table *t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	pthread_mutex_init(&t->lock, NULL);
	t->cached_fds_max = cached_fds_max ? cached_fds_max : 1;
	uint32_t id = 0;
	/* The root stays open: every walk starts there. */
	int r = slot_publish(t, root_fd, &st, true, &id);
	if (r == 0)
		root_mount_register(t, root_fd);
	if (r == 0 && id != ROOT_NODE_ID)
		r = -EINVAL; /* the free list hands out 1 first; anything else is a bug */
	if (r) {
		if (id)
			atomic_store(&slot_at(t, id)->fd, -1); /* on failure root_fd stays the caller's */
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
			free(chunk[i].handle);
		}
		free(chunk);
	}
	for (uint32_t i = 0; i < t->mount_count; i++)
		if (t->mounts[i].fd >= 0)
			close(t->mounts[i].fd);
	free(t->mounts);
	free(t->buckets);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

int inode_table_insert(struct inode_table *t, int fd, const struct stat *st,
		       uint64_t *node_id, uint64_t *generation)
{
	struct fd_batch b = {.count = 0};
	pthread_mutex_lock(&t->lock);
	uint32_t id = chain_find(t, st->st_dev, st->st_ino);
	struct inode_slot *s = id ? slot_at(t, id) : NULL;
	bool fd_can_cache = false;
	if (s && !slot_is_inode_of(t, s, fd, &fd_can_cache)) {
		/*
		 * The number now names another inode. The old node stays live for
		 * the kernel's lookups until it is forgotten, but is no longer found.
		 */
		chain_remove(t, id, s);
		id = 0;
		s = NULL;
	}
	int r = 0;
	if (id) {
		/*
		 * Known node: its own descriptor (or handle) stays, so it keeps
		 * the mount it was first found on; fd, opened just now, saves a
		 * reopen when the descriptor was evicted.
		 */
		s->nlookup++;
		if (fd_can_cache)
			cache_install(t, id, s, fd);
		else
			b.fds[b.count++] = fd;
	} else {
		r = slot_publish(t, fd, st, false, &id);
		s = r ? NULL : slot_at(t, id);
	}
	if (s) {
		*node_id = id;
		*generation = s->generation;
	}
	clock_evict(t, t->cached_fds_max, &b);
	pthread_mutex_unlock(&t->lock);
	fd_batch_close(&b);
	return r;
}

/* fd_get's slow path: the descriptor was evicted (or the node is not live). */
static int slot_reopen(struct inode_table *t, uint32_t id, struct inode_slot *s)
{
	pthread_mutex_lock(&t->lock);
	int fd = s->live ? atomic_load(&s->fd) : -1;
	if (fd >= 0 || !s->live || !s->evictable) {
		pthread_mutex_unlock(&t->lock);
		return fd >= 0 ? fd : -ESTALE;
	}
	/* Stable while the node is live, and our caller's request keeps it live. */
	const struct file_handle *handle = s->handle;
	int mount_fd = t->mounts[s->mount].fd;
	pthread_mutex_unlock(&t->lock);

	int fresh = open_by_handle_at(mount_fd, (struct file_handle *)handle, O_PATH | O_CLOEXEC);
	if (fresh < 0 && (errno == EMFILE || errno == ENFILE) &&
	    inode_table_fds_release(t, CLOSE_BATCH) > 0)
		fresh = open_by_handle_at(mount_fd, (struct file_handle *)handle, O_PATH | O_CLOEXEC);
	if (fresh < 0)
		return errno == ENOENT ? -ESTALE : -errno;

	struct fd_batch b = {.count = 0};
	pthread_mutex_lock(&t->lock);
	fd = atomic_load(&s->fd);
	if (fd >= 0) {
		b.fds[b.count++] = fresh; /* another getter reopened it first */
	} else {
		cache_install(t, id, s, fresh);
		fd = fresh;
		clock_evict(t, t->cached_fds_max, &b); /* our pin protects fresh */
	}
	pthread_mutex_unlock(&t->lock);
	fd_batch_close(&b);
	return fd;
}

int inode_table_fd_get(struct inode_table *t, uint64_t node_id)
{
	struct inode_slot *s = node_id && node_id <= UINT32_MAX ? slot_at(t, node_id) : NULL;
	if (!s)
		return -ESTALE;
	atomic_fetch_add(&s->pins, 1);
	int fd = atomic_load(&s->fd);
	if (fd >= 0) {
		/* Read before write: a hot node's cache line is not dirtied on every get. */
		if (!atomic_load_explicit(&s->referenced, memory_order_relaxed))
			atomic_store_explicit(&s->referenced, true, memory_order_relaxed);
		return fd;
	}
	fd = slot_reopen(t, (uint32_t)node_id, s);
	if (fd < 0)
		atomic_fetch_sub(&s->pins, 1);
	return fd;
}

void inode_table_fd_put(struct inode_table *t, uint64_t node_id)
{
	atomic_fetch_sub_explicit(&slot_at(t, node_id)->pins, 1, memory_order_release);
}

int inode_table_fd_hold(struct inode_table *t, uint64_t node_id)
{
	int fd = inode_table_fd_get(t, node_id);
	if (fd < 0)
		return fd;
	pthread_mutex_lock(&t->lock);
	struct inode_slot *s = slot_at(t, node_id);
	s->holds++;
	if (s->clock_next)
		ring_remove(t, (uint32_t)node_id, s);
	pthread_mutex_unlock(&t->lock);
	return fd;
}

void inode_table_fd_drop(struct inode_table *t, uint64_t node_id)
{
	struct fd_batch b = {.count = 0};
	pthread_mutex_lock(&t->lock);
	struct inode_slot *s = slot_at(t, node_id);
	if (--s->holds == 0 && node_id != ROOT_NODE_ID && atomic_load(&s->fd) >= 0) {
		ring_insert(t, (uint32_t)node_id, s);
		if (s->evictable)
			clock_evict(t, t->cached_fds_max, &b);
	}
	pthread_mutex_unlock(&t->lock);
	fd_batch_close(&b);
	inode_table_fd_put(t, node_id);
}

uint32_t inode_table_fds_release(struct inode_table *t, uint32_t count)
{
	uint32_t closed = 0;
	for (;;) {
		struct fd_batch b = {.count = 0};
		pthread_mutex_lock(&t->lock);
		uint32_t want = count - closed;
		clock_evict(t, t->cache.count > want ? t->cache.count - want : 0, &b);
		pthread_mutex_unlock(&t->lock);
		closed += b.count;
		bool more = b.count == CLOSE_BATCH && closed < count;
		fd_batch_close(&b);
		if (!more)
			return closed;
	}
}

bool inode_table_prune_due(struct inode_table *t)
{
	return atomic_load_explicit(&t->kept_fds, memory_order_relaxed) > t->cached_fds_max;
}

uint32_t inode_table_prune_pick(struct inode_table *t, bool short_of_fds, uint64_t *ids,
				uint32_t max)
{
	pthread_mutex_lock(&t->lock);
	/* Down to seven eighths of the bound, so that the next round is a batch away. */
	uint32_t low = t->cached_fds_max - t->cached_fds_max / 8;
	uint32_t want = short_of_fds ? t->kept.count : t->kept.count > low ? t->kept.count - low : 0;
	if (!short_of_fds && t->kept.count <= t->cached_fds_max)
		want = 0;
	if (want > max)
		want = max;
	uint32_t picked = 0;
	uint64_t steps = 2 * (uint64_t)t->kept.count;
	while (picked < want && steps-- > 0) {
		uint32_t id = t->kept.hand;
		struct inode_slot *s = slot_at(t, id);
		t->kept.hand = s->clock_next;
		if (atomic_load_explicit(&s->referenced, memory_order_relaxed)) {
			atomic_store_explicit(&s->referenced, false, memory_order_relaxed);
			continue;
		}
		if (atomic_load(&s->pins) != 0)
			continue;
		ids[picked++] = id;
		/*
		 * The kernel's forget comes later, or never (an inode in use stays):
		 * a pass of the hand before it is asked for again.
		 */
		atomic_store_explicit(&s->referenced, true, memory_order_relaxed);
	}
	pthread_mutex_unlock(&t->lock);
	return picked;
}

uint64_t inode_table_find(struct inode_table *t, dev_t dev, ino_t ino)
{
	pthread_mutex_lock(&t->lock);
	uint32_t id = chain_find(t, dev, ino);
	pthread_mutex_unlock(&t->lock);
	return id;
}

dev_t inode_table_dev(struct inode_table *t, uint64_t node_id)
{
	pthread_mutex_lock(&t->lock);
	const struct inode_slot *s = node_id && node_id < t->slots_allocated ? slot_at(t, node_id) : NULL;
	dev_t dev = s && s->live ? s->dev : 0;
	pthread_mutex_unlock(&t->lock);
	return dev;
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
	struct fd_batch b = {.count = 0};
	pthread_mutex_lock(&t->lock);
	struct inode_slot *s = node_id < t->slots_allocated ? slot_at(t, node_id) : NULL;
	if (s && s->live) {
		s->nlookup = nlookup >= s->nlookup ? 0 : s->nlookup - nlookup;
		if (s->nlookup == 0) {
			chain_remove(t, (uint32_t)node_id, s);
			if (s->clock_next)
				ring_remove(t, (uint32_t)node_id, s);
			int fd = atomic_exchange(&s->fd, -1);
			if (fd >= 0)
				b.fds[b.count++] = fd;
			if (s->mount != NO_MOUNT)
				mount_unref(t, s->mount, &b);
			free(s->handle);
			s->handle = NULL;
			s->evictable = false;
			s->live = false;
			s->next = t->free_head;
			t->free_head = (uint32_t)node_id;
			t->live--;
		}
	}
	pthread_mutex_unlock(&t->lock);
	fd_batch_close(&b);
}

uint64_t inode_table_count(struct inode_table *t)
{
	pthread_mutex_lock(&t->lock);
	uint64_t n = t->live;
	pthread_mutex_unlock(&t->lock);
	return n;
}

static struct file_version version_of(const struct stat *st)
{
	return (struct file_version){.mtime = st->st_mtim, .ctime = st->st_ctim, .size = st->st_size};
}

static bool same_version(struct file_version a, struct file_version b)
{
	return a.mtime.tv_sec == b.mtime.tv_sec && a.mtime.tv_nsec == b.mtime.tv_nsec &&
	       a.ctime.tv_sec == b.ctime.tv_sec && a.ctime.tv_nsec == b.ctime.tv_nsec &&
	       a.size == b.size;
}

void inode_table_entry_given(struct inode_table *t, uint64_t node_id, const struct stat *st,
			     uint64_t now_ns, uint64_t held_ns)
{
	pthread_mutex_lock(&t->lock);
	struct inode_slot *s = slot_at(t, node_id);
	s->given_until_ns = now_ns + held_ns;
	s->given_version = version_of(st);
	pthread_mutex_unlock(&t->lock);
}

bool inode_table_entry_held(struct inode_table *t, uint64_t node_id, const struct stat *st,
			    uint64_t now_ns)
{
	pthread_mutex_lock(&t->lock);
	const struct inode_slot *s = slot_at(t, node_id);
	bool held = now_ns < s->given_until_ns && same_version(s->given_version, version_of(st));
	pthread_mutex_unlock(&t->lock);
	return held;
}

bool inode_table_cache_valid(struct inode_table *t, uint64_t node_id, const struct stat *now)
{
	pthread_mutex_lock(&t->lock);
	struct inode_slot *s = slot_at(t, node_id);
	struct file_version v = version_of(now);
	bool valid = s->cache_known && same_version(s->cache_version, v);
	s->cache_known = true;
	s->cache_version = v;
	pthread_mutex_unlock(&t->lock);
	return valid;
}
