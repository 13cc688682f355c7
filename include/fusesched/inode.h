/*
 * Inode table: the kernel's node ids mapped to O_PATH descriptors of the
 * backing directory.
 *
 * Node ids are stable slot indices, not heap pointers, so that a future
 * restart can hand the kernel back the same ids. Slot 1 is the backing root
 * (FUSE_ROOT_ID). A (dev, ino) pair has at most one slot; looking up a name
 * twice bumps the lookup count instead of pinning a second descriptor.
 * A reused slot gets a new generation so the kernel can tell them apart.
 */
#ifndef FUSESCHED_INODE_H
#define FUSESCHED_INODE_H

#include <stdint.h>
#include <sys/stat.h>

struct inode_table;

/* Takes ownership of root_fd (an O_PATH directory descriptor). */
int inode_table_new(int root_fd, struct inode_table **out);
void inode_table_free(struct inode_table *table);

/*
 * Publishes a freshly opened O_PATH fd for st->st_dev/st_ino with one more
 * kernel lookup. Takes ownership of fd: it is closed when the inode is already
 * known. Returns 0 and the node id and generation, or -errno.
 */
int inode_table_insert(struct inode_table *table, int fd, const struct stat *st,
                       uint64_t *node_id, uint64_t *generation);

/* One more kernel lookup on a node the kernel already holds (readdirplus of "."). */
int inode_table_ref(struct inode_table *table, uint64_t node_id);

/*
 * The O_PATH descriptor of a live node, or -ESTALE. Lock-free: valid until the
 * kernel forgets the node, which it does not do while a request on it runs.
 */
int inode_table_fd(const struct inode_table *table, uint64_t node_id);

/* The file type bits (S_IFMT) recorded when the node was first looked up. */
mode_t inode_table_type(const struct inode_table *table, uint64_t node_id);

/* The kernel dropped nlookup references; at zero the descriptor is closed. */
void inode_table_forget(struct inode_table *table, uint64_t node_id, uint64_t nlookup);

/* Live nodes, root included (tests and stats). */
uint64_t inode_table_count(struct inode_table *table);

#endif
