/* Temporary directory trees standing in for /proc and /sys/fs/cgroup. */
#ifndef FAKE_TREE_H
#define FAKE_TREE_H

#include <stddef.h>

/* Creates a fresh directory and returns its path (malloc'ed). */
char *fake_tree_new(void);
/* Writes TEXT to ROOT/REL, creating parent directories. */
void fake_tree_write(const char *root, const char *rel, const char *text);
void fake_tree_remove(const char *root, const char *rel);
/* Removes the whole tree and frees ROOT. */
void fake_tree_free(char *root);
/* Reads a fixture file from FIXTURES_DIR (malloc'ed, NUL-terminated). */
char *fixture_read(const char *name, size_t *len);

#endif
