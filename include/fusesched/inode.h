/*
 * Inode table: the kernel's node ids mapped to files of the backing directory.
 *
 * Node ids are stable slot indices, not heap pointers, so that a future
 * restart can hand the kernel back the same ids. Slot 1 is the backing root
 * (FUSE_ROOT_ID). A (dev, ino) pair finds at most one slot; looking up a
 * name twice bumps the lookup count instead of adding a second node.
 * A reused slot gets a new generation so the kernel can tell them apart.
 *
 * The kernel keeps every inode of its dentry cache, so a volume whose users
 * touched 100,000 files has 100,000 live nodes: far more than RLIMIT_NOFILE
 * allows descriptors. A node therefore holds a kernel file handle
 * (name_to_handle_at) and only a cached O_PATH descriptor; at most
 * cached_fds_max descriptors stay cached and the others are closed (clock
 * order) and reopened from the handle on demand. Nodes whose filesystem has
 * no file handles, and the root, keep their descriptor for their lifetime.
 *
 * The backing filesystem hands a deleted file's inode number to a later
 * file, while the kernel may still hold the deleted file's node. So a slot
 * found by (dev, ino) is taken as the same inode only when it provably is:
 * its cached descriptor pins its inode, so the number cannot have moved on;
 * without one the file handles must match (they carry the inode's
 * generation). Otherwise the new file gets a slot of its own and the old
 * one, no longer found by (dev, ino), lives on until the kernel forgets it.
 */
#ifndef FUSESCHED_INODE_H
#define FUSESCHED_INODE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

struct inode_table;

/*
 * Takes ownership of root_fd (an O_PATH directory descriptor). cached_fds_max
 * bounds the descriptors of evictable nodes (at least 1); pinned descriptors
 * (requests in flight, open files) may exceed it until they are put. Nodes
 * without a handle get the same bound, kept by the kernel (prune_pick).
 */
int inode_table_new(int root_fd, uint32_t cached_fds_max, struct inode_table **out);
void inode_table_free(struct inode_table *table);

/*
 * Publishes a freshly opened O_PATH fd for st->st_dev/st_ino with one more
 * kernel lookup: of the node of that inode, or of a new one (see above).
 * Takes ownership of fd: it becomes the node's cached descriptor, or is
 * closed when the node already has one or was found through another mount.
 * Returns 0 and the node id and generation, or -errno.
 */
int inode_table_insert(struct inode_table *table, int fd, const struct stat *st,
                       uint64_t *node_id, uint64_t *generation);

/*
 * The O_PATH descriptor of a live node, pinned: it is not closed until the
 * matching inode_table_fd_put. Reopens it from the file handle when it was
 * evicted; -ESTALE when the file is gone (deleted on the backing side while
 * evicted) or the node is not live, -EMFILE/-ENFILE at the limit. A cached
 * descriptor costs two atomic operations and no lock. The kernel forgets a
 * node only after its requests and its open files' releases were answered,
 * so a pin never outlives its node.
 */
int inode_table_fd_get(struct inode_table *table, uint64_t node_id);
void inode_table_fd_put(struct inode_table *table, uint64_t node_id);

/*
 * fd_get for the lifetime of an open file or directory, ended by fd_drop:
 * the descriptor is kept out of the cache (no clock cost, not counted in the
 * bound), so a file unlinked while open still has one; its handle would give
 * ESTALE. Takes the table lock.
 */
int inode_table_fd_hold(struct inode_table *table, uint64_t node_id);
void inode_table_fd_drop(struct inode_table *table, uint64_t node_id);

/*
 * Closes up to count cached, unpinned descriptors regardless of the bound:
 * the caller hit EMFILE/ENFILE and open files need them more. Returns how
 * many were closed (0: retrying will not help).
 */
uint32_t inode_table_fds_release(struct inode_table *table, uint32_t count);

/*
 * Nodes on a backing filesystem without file handles that reopen (FUSE,
 * overlayfs without nfs_export) keep their descriptor for as long as the
 * kernel keeps the node, so the kernel's inode cache, not the daemon,
 * bounds them. Past cached_fds_max of those (not held open, not pinned),
 * prune_due is true and prune_pick names up to max of the least recently
 * used to ask the kernel to forget (FUSE_NOTIFY_PRUNE): down to seven
 * eighths of the bound, or as many as it finds when short_of_fds (the
 * caller hit EMFILE). A named node stays until the kernel forgets it, and is
 * named again only after a pass of the clock. Returns how many it named.
 */
bool inode_table_prune_due(struct inode_table *table);
uint32_t inode_table_prune_pick(struct inode_table *table, bool short_of_fds, uint64_t *ids,
				uint32_t max);

/*
 * Close-to-open validation of the kernel's page cache of a regular file:
 * whether the backing file is as it was (mtime, ctime and size) at the
 * node's previous call, when the kernel's cached pages were last
 * validated; records now for the next call. false on a node's first call.
 * Any change, whoever made it (through the mount or beside it), fails it.
 */
bool inode_table_cache_valid(struct inode_table *table, uint64_t node_id, const struct stat *now);

/*
 * The kernel was given node_id's entry and attributes (a lookup's answer,
 * a readdirplus record) at now_ns, and holds them for held_ns; st is what
 * the backing file was then.
 */
void inode_table_entry_given(struct inode_table *table, uint64_t node_id, const struct stat *st,
			     uint64_t now_ns, uint64_t held_ns);

/*
 * Whether the kernel still holds what it was last given for node_id and
 * the backing file is unchanged since (mtime, ctime and size as in st): a
 * readdirplus record would tell it nothing new.
 */
bool inode_table_entry_held(struct inode_table *table, uint64_t node_id, const struct stat *st,
			    uint64_t now_ns);

/*
 * The live node of the backing inode (dev, ino), or 0: none the kernel
 * holds. A node whose number went to a newer file is not found.
 */
uint64_t inode_table_find(struct inode_table *table, dev_t dev, ino_t ino);

/* The backing device of a live node (0 for none). */
dev_t inode_table_dev(struct inode_table *table, uint64_t node_id);

/* The file type bits (S_IFMT) recorded when the node was first looked up. */
mode_t inode_table_type(const struct inode_table *table, uint64_t node_id);

/* The kernel dropped nlookup references; at zero the node and its descriptor go. */
void inode_table_forget(struct inode_table *table, uint64_t node_id, uint64_t nlookup);

/* Live nodes, root included (tests and stats). */
uint64_t inode_table_count(struct inode_table *table);

#endif
