/*
 * The inode table on its own, without a mount: the descriptor cache stays
 * within its bound, reopens the same file from the handle, never closes a
 * pinned descriptor, reports ESTALE for a file deleted while evicted, and
 * gives a new file that got a deleted file's inode number a node of its own.
 * Descriptors are counted in /proc/self/fd (Check runs each test in a fork).
 */
#include "leftovers.h"
#include "mount_helper.h"

#include "fusesched/inode.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FILES 300
#define SMALL_BOUND 8
/* The backing root's fd plus the anchor (a directory open for reading) of its mount. */
#define TABLE_FIXED_FDS 2

static char dir[256];
static int dir_fd = -1;

static void scratch_up(void)
{
	snprintf(dir, sizeof(dir), "%s/inode-XXXXXX", TEST_SCRATCH_DIR);
	mkdir(TEST_SCRATCH_DIR, 0755);
	ck_assert_ptr_nonnull(mkdtemp(dir));
	leftovers_add_dir(dir); /* taken down by the runner if the test fails (leftovers.h) */
	char path[300];
	for (int i = 0; i < FILES; i++) {
		snprintf(path, sizeof(path), "%s/f%d", dir, i);
		int fd = open(path, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	dir_fd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(dir_fd, 0);
}

static void scratch_down(void)
{
	test_sh("umount '%s/sub' '%s/ro' 2>/dev/null; rm -rf '%s'", dir, dir, dir);
}

static struct inode_table *table_new(uint32_t bound)
{
	struct inode_table *t = NULL;
	int root = fcntl(dir_fd, F_DUPFD_CLOEXEC, 0);
	ck_assert_int_ge(root, 0);
	ck_assert_int_eq(inode_table_new(root, bound, &t), 0);
	return t;
}

/* Looks rel up below parent_fd as fs_lookup_entry does; returns the node id and generation. */
static uint64_t insert_at_generation(struct inode_table *t, int parent_fd, const char *rel,
				     struct stat *st, uint64_t *generation)
{
	int fd = openat(parent_fd, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW), 0);
	uint64_t id = 0;
	ck_assert_int_eq(inode_table_insert(t, fd, st, &id, generation), 0);
	return id;
}

static uint64_t insert_at(struct inode_table *t, int parent_fd, const char *rel, struct stat *st)
{
	uint64_t generation = 0;
	return insert_at_generation(t, parent_fd, rel, st, &generation);
}

/* A new file NAME in the scratch directory holding TEXT. */
static void write_scratch_file(const char *name, const char *text)
{
	char path[300];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
}

/* What the O_PATH descriptor fd's file holds (reopened for reading through /proc). */
static void assert_fd_holds(int fd, const char *text)
{
	char proc[64], buf[64] = {0};
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	int rd = open(proc, O_RDONLY | O_CLOEXEC);
	ck_assert_int_ge(rd, 0);
	ck_assert_int_ge(read(rd, buf, sizeof(buf) - 1), 0);
	close(rd);
	ck_assert_str_eq(buf, text);
}

static uint64_t ids[FILES];
static ino_t inos[FILES];

static void insert_all(struct inode_table *t)
{
	char rel[32];
	for (int i = 0; i < FILES; i++) {
		struct stat st;
		snprintf(rel, sizeof(rel), "f%d", i);
		ids[i] = insert_at(t, dir_fd, rel, &st);
		inos[i] = st.st_ino;
	}
}

static ino_t fd_ino(int fd)
{
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	return st.st_ino;
}

START_TEST(eviction_keeps_the_bound_and_reopens_the_same_file)
{
	int base_fds = test_count_fds(getpid());
	struct inode_table *t = table_new(SMALL_BOUND);
	insert_all(t);
	ck_assert_uint_eq(inode_table_count(t), FILES + 1);
	int limit = base_fds + TABLE_FIXED_FDS + SMALL_BOUND;
	ck_assert_int_le(test_count_fds(getpid()), limit);
	/* Every node, evicted or not, gives back its own file; the bound holds throughout. */
	for (int round = 0; round < 2; round++)
		for (int i = 0; i < FILES; i++) {
			int fd = inode_table_fd_get(t, ids[i]);
			ck_assert_int_ge(fd, 0);
			ck_assert_uint_eq(fd_ino(fd), inos[i]);
			inode_table_fd_put(t, ids[i]);
			ck_assert_int_le(test_count_fds(getpid()), limit);
		}
	/* EMFILE relief: every unpinned cached descriptor can be given back. */
	ck_assert_uint_eq(inode_table_fds_release(t, 1000), SMALL_BOUND);
	ck_assert_int_eq(test_count_fds(getpid()), base_fds + TABLE_FIXED_FDS);
	ck_assert_uint_eq(inode_table_fds_release(t, 1000), 0);
	for (int i = 0; i < FILES; i++)
		inode_table_forget(t, ids[i], 1);
	ck_assert_uint_eq(inode_table_count(t), 1);
	ck_assert_int_eq(test_count_fds(getpid()), base_fds + TABLE_FIXED_FDS);
	inode_table_free(t);
	ck_assert_int_eq(test_count_fds(getpid()), base_fds);
}
END_TEST

START_TEST(pinned_and_held_descriptors_are_not_evicted)
{
	struct inode_table *t = table_new(SMALL_BOUND);
	insert_all(t);
	int pinned = inode_table_fd_get(t, ids[0]);
	int held = inode_table_fd_hold(t, ids[1]);
	ck_assert_int_ge(pinned, 0);
	ck_assert_int_ge(held, 0);
	/* Churn the cache many times over its size. */
	for (int round = 0; round < 3; round++)
		for (int i = 2; i < FILES; i++) {
			int fd = inode_table_fd_get(t, ids[i]);
			ck_assert_int_ge(fd, 0);
			inode_table_fd_put(t, ids[i]);
		}
	/* The pinned one counts in the bound but stays; the held one is outside it. */
	ck_assert_uint_eq(inode_table_fds_release(t, 1000), SMALL_BOUND - 1);
	/* Still open, still the same files: a closed number would have been reused. */
	ck_assert_uint_eq(fd_ino(pinned), inos[0]);
	ck_assert_uint_eq(fd_ino(held), inos[1]);
	ck_assert_int_eq(inode_table_fd_get(t, ids[0]), pinned);
	inode_table_fd_put(t, ids[0]);
	inode_table_fd_put(t, ids[0]);
	inode_table_fd_drop(t, ids[1]);
	/* Unpinned now: they can go like any other. */
	ck_assert_uint_eq(inode_table_fds_release(t, 1000), 2);
	inode_table_free(t);
}
END_TEST

START_TEST(deleted_while_evicted_is_estale)
{
	struct inode_table *t = table_new(SMALL_BOUND);
	insert_all(t);
	/* Evicted (the table gave back every cached descriptor), then deleted behind its back. */
	ck_assert_uint_eq(inode_table_fds_release(t, 1000), SMALL_BOUND);
	char path[300];
	snprintf(path, sizeof(path), "%s/f0", dir);
	ck_assert_int_eq(unlink(path), 0);
	ck_assert_int_eq(inode_table_fd_get(t, ids[0]), -ESTALE);
	/* A held descriptor outlives the name, as an open file's node must. */
	int held = inode_table_fd_hold(t, ids[1]);
	ck_assert_int_ge(held, 0);
	snprintf(path, sizeof(path), "%s/f1", dir);
	ck_assert_int_eq(unlink(path), 0);
	inode_table_fds_release(t, 1000);
	int fd = inode_table_fd_get(t, ids[1]);
	ck_assert_int_eq(fd, held);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq(st.st_nlink, 0);
	inode_table_fd_put(t, ids[1]);
	inode_table_fd_drop(t, ids[1]);
	/* Not live at all: a forgotten node. */
	inode_table_forget(t, ids[2], 1);
	ck_assert_int_eq(inode_table_fd_get(t, ids[2]), -ESTALE);
	inode_table_free(t);
}
END_TEST

START_TEST(directories_symlinks_and_other_mounts_reopen)
{
	char sub_mnt[300], ro_mnt[300];
	snprintf(sub_mnt, sizeof(sub_mnt), "%s/sub", dir);
	snprintf(ro_mnt, sizeof(ro_mnt), "%s/ro", dir);
	leftovers_add_mount(sub_mnt);
	leftovers_add_mount(ro_mnt);
	ck_assert_int_eq(test_sh("mkdir '%s/sub' '%s/d' && ln -s target '%s/l' && "
				 "mount -t tmpfs none '%s/sub' && echo x > '%s/sub/x' && "
				 "mkdir '%s/ro' && echo r > '%s/ro/r' && mount --bind '%s/ro' '%s/ro' && "
				 "mount -o remount,bind,ro '%s/ro'",
				 dir, dir, dir, dir, dir, dir, dir, dir, dir, dir), 0);
	struct inode_table *t = table_new(1);
	struct stat st_d, st_l, st_sub, st_x, st_ro, st_r;
	uint64_t d = insert_at(t, dir_fd, "d", &st_d);
	uint64_t l = insert_at(t, dir_fd, "l", &st_l);
	uint64_t sub = insert_at(t, dir_fd, "sub", &st_sub);
	int sub_fd = inode_table_fd_get(t, sub);
	ck_assert_int_ge(sub_fd, 0);
	uint64_t x = insert_at(t, sub_fd, "x", &st_x);
	inode_table_fd_put(t, sub);
	uint64_t ro = insert_at(t, dir_fd, "ro", &st_ro);
	int ro_fd = inode_table_fd_get(t, ro);
	ck_assert_int_ge(ro_fd, 0);
	uint64_t r = insert_at(t, ro_fd, "r", &st_r);
	inode_table_fd_put(t, ro);
	ck_assert_uint_ne(st_x.st_dev, st_d.st_dev);
	inode_table_fds_release(t, 1000);

	int fd = inode_table_fd_get(t, d);
	ck_assert_uint_eq(fd_ino(fd), st_d.st_ino);
	int child = openat(fd, "new", O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
	ck_assert_int_ge(child, 0); /* a reopened directory still resolves names */
	close(child);
	inode_table_fd_put(t, d);
	inode_table_fds_release(t, 1000);

	fd = inode_table_fd_get(t, l);
	char target[16] = {0};
	ck_assert_int_eq(readlinkat(fd, "", target, sizeof(target) - 1), 6);
	ck_assert_str_eq(target, "target");
	inode_table_fd_put(t, l);
	inode_table_fds_release(t, 1000);

	/* A node on a nested mount reopens through that mount's anchor. */
	fd = inode_table_fd_get(t, x);
	ck_assert_int_ge(fd, 0);
	struct stat st;
	ck_assert_int_eq(fstat(fd, &st), 0);
	ck_assert_uint_eq(st.st_dev, st_x.st_dev);
	ck_assert_uint_eq(st.st_ino, st_x.st_ino);
	inode_table_fd_put(t, x);
	inode_table_fds_release(t, 1000);

	/* ...and a read-only bind mount of the same filesystem stays read-only. */
	fd = inode_table_fd_get(t, r);
	ck_assert_int_ge(fd, 0);
	char proc[64];
	snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
	ck_assert_int_eq(open(proc, O_WRONLY | O_CLOEXEC), -1);
	ck_assert_int_eq(errno, EROFS);
	inode_table_fd_put(t, r);

	/* The last node on a mount gone, its anchor goes: it can be unmounted. */
	inode_table_forget(t, x, 1);
	inode_table_forget(t, sub, 1);
	ck_assert_int_eq(test_sh("umount '%s/sub'", dir), 0);
	inode_table_free(t);
	ck_assert_int_eq(test_sh("umount '%s/ro'", dir), 0);
}
END_TEST

/* Six files of procfs, which has no file handles, inserted below proc_fd. */
static void insert_six_proc_files(struct inode_table *t, int proc_fd, uint64_t node[6])
{
	const char *names[] = {"meminfo", "cpuinfo", "uptime", "version", "stat", "filesystems"};
	for (int i = 0; i < 6; i++) {
		struct stat st;
		node[i] = insert_at(t, proc_fd, names[i], &st);
	}
}

START_TEST(filesystems_without_handles_keep_descriptors)
{
	/* procfs has no file handles: its nodes stay open, whatever the bound. */
	int proc_fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(proc_fd, 0);
	int base_fds = test_count_fds(getpid());
	struct inode_table *t = NULL;
	ck_assert_int_eq(inode_table_new(proc_fd, 1, &t), 0);
	uint64_t node[6];
	insert_six_proc_files(t, proc_fd, node);
	ck_assert_uint_eq(inode_table_fds_release(t, 1000), 0);
	ck_assert_int_eq(test_count_fds(getpid()), base_fds + 6);
	for (int i = 0; i < 6; i++) {
		ck_assert_int_ge(inode_table_fd_get(t, node[i]), 0);
		inode_table_fd_put(t, node[i]);
	}
	inode_table_free(t);
}
END_TEST

static bool named(const uint64_t *list, uint32_t count, uint64_t id)
{
	for (uint32_t i = 0; i < count; i++)
		if (list[i] == id)
			return true;
	return false;
}

/*
 * Past the bound, nodes without handles are named for the kernel to forget,
 * least recently used first, never one pinned by a request or held open;
 * once forgotten they are under the bound and nothing more is named.
 */
START_TEST(nodes_without_handles_past_the_bound_are_named_to_forget)
{
	int proc_fd = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
	ck_assert_int_ge(proc_fd, 0);
	struct inode_table *t = NULL;
	ck_assert_int_eq(inode_table_new(proc_fd, 2, &t), 0);
	uint64_t node[6];
	insert_six_proc_files(t, proc_fd, node);
	ck_assert(inode_table_prune_due(t));
	ck_assert_int_ge(inode_table_fd_get(t, node[0]), 0);  /* a request in flight */
	ck_assert_int_ge(inode_table_fd_hold(t, node[1]), 0); /* an open file */
	/*
	 * Five on the ring (the held one is off it), bound 2: three named, after
	 * one pass of the hand over nodes all used just now.
	 */
	uint64_t named_ids[16];
	uint32_t n = inode_table_prune_pick(t, false, named_ids, 16);
	ck_assert_uint_eq(n, 3);
	ck_assert(!named(named_ids, n, node[0]));
	ck_assert(!named(named_ids, n, node[1]));
	/* Until the kernel forgets them the table is still over its bound. */
	n = inode_table_prune_pick(t, false, named_ids, 16);
	ck_assert_uint_ge(n, 1);
	ck_assert(!named(named_ids, n, node[0]));
	ck_assert(!named(named_ids, n, node[1]));
	/* The kernel forgets: under the bound, nothing is named. */
	for (int i = 2; i < 5; i++)
		inode_table_forget(t, node[i], 1);
	ck_assert(!inode_table_prune_due(t));
	ck_assert_uint_eq(inode_table_prune_pick(t, false, named_ids, 16), 0);
	/* Short of descriptors, the last node not in use is named, bound or not. */
	n = 0;
	for (int pass = 0; pass < 2 && !n; pass++)
		n = inode_table_prune_pick(t, true, named_ids, 16);
	ck_assert_uint_eq(n, 1);
	ck_assert_uint_eq(named_ids[0], node[5]);
	inode_table_fd_put(t, node[0]);
	inode_table_fd_drop(t, node[1]);
	ck_assert(inode_table_prune_due(t)); /* the closed file's node is back on the ring: three */
	inode_table_free(t);
}
END_TEST

/*
 * Creates files in the scratch directory until the backing filesystem hands
 * out inode number ino again (each holding TEXT); the one that got it is
 * renamed to NAME. false when the number did not come back within the bound.
 */
#define REUSE_TRIES 2000

static bool create_until_ino_reused(ino_t ino, const char *name, const char *text)
{
	char rel[32], path[300], renamed[300];
	snprintf(renamed, sizeof(renamed), "%s/%s", dir, name);
	for (int i = 0; i < REUSE_TRIES; i++) {
		snprintf(rel, sizeof(rel), "reuse%d", i);
		write_scratch_file(rel, text);
		snprintf(path, sizeof(path), "%s/%s", dir, rel);
		struct stat st;
		ck_assert_int_eq(stat(path, &st), 0);
		if (st.st_ino == ino) {
			ck_assert_int_eq(rename(path, renamed), 0);
			return true;
		}
	}
	return false;
}

/* Live nodes well past the initial hash size, so the buckets are rehashed. */
#define GROW_FILES 1100

static void insert_many_new_files(struct inode_table *t)
{
	char rel[32];
	for (int i = 0; i < GROW_FILES; i++) {
		snprintf(rel, sizeof(rel), "grow%d", i);
		write_scratch_file(rel, "");
		struct stat st;
		insert_at(t, dir_fd, rel, &st);
	}
}

/*
 * A node whose descriptor was evicted no longer pins its inode: once the
 * file is deleted, the backing filesystem may give its number to a new file.
 * That file must get a node of its own, reopening to itself, while the old
 * node stays (the kernel may still hold it) until it is forgotten.
 */
START_TEST(reused_inode_number_gets_a_new_node)
{
	struct inode_table *t = table_new(SMALL_BOUND);
	write_scratch_file("old", "old");
	struct stat st_old, st_new;
	uint64_t old_generation = 0, new_generation = 0;
	uint64_t old_id = insert_at_generation(t, dir_fd, "old", &st_old, &old_generation);
	inode_table_fds_release(t, 1000);
	char path[300];
	snprintf(path, sizeof(path), "%s/old", dir);
	ck_assert_int_eq(unlink(path), 0);
	if (!create_until_ino_reused(st_old.st_ino, "new", "new")) {
		fprintf(stderr, "reused_inode_number_gets_a_new_node: SKIPPED: the backing "
			"filesystem of %s did not reuse inode %lu within %d creates\n",
			dir, (unsigned long)st_old.st_ino, REUSE_TRIES);
		inode_table_free(t);
		return;
	}
	uint64_t live_before = inode_table_count(t);
	uint64_t new_id = insert_at_generation(t, dir_fd, "new", &st_new, &new_generation);
	ck_assert_uint_eq(st_new.st_ino, st_old.st_ino);
	ck_assert_msg(new_id != old_id || new_generation != old_generation,
		      "the new file got the deleted file's node %llu",
		      (unsigned long long)old_id);
	ck_assert_uint_eq(inode_table_count(t), live_before + 1);

	/* The new node is the new file, cached and reopened from its handle alike. */
	for (int round = 0; round < 2; round++) {
		int fd = inode_table_fd_get(t, new_id);
		ck_assert_int_ge(fd, 0);
		ck_assert_uint_eq(fd_ino(fd), st_new.st_ino);
		assert_fd_holds(fd, "new");
		inode_table_fd_put(t, new_id);
		inode_table_fds_release(t, 1000);
	}
	ck_assert_int_eq(inode_table_fd_get(t, old_id), -ESTALE);

	/* Rehashing keeps the old node out of the hash: a lookup still finds the new one. */
	insert_many_new_files(t);
	struct stat st;
	ck_assert_uint_eq(insert_at(t, dir_fd, "new", &st), new_id);

	/* Forgetting the old node leaves the new one findable and working. */
	inode_table_forget(t, old_id, 1);
	ck_assert_uint_eq(insert_at(t, dir_fd, "new", &st), new_id);
	int fd = inode_table_fd_get(t, new_id);
	ck_assert_int_ge(fd, 0);
	assert_fd_holds(fd, "new");
	inode_table_fd_put(t, new_id);
	/* Three lookups of the new node: it goes with the third forget. */
	uint64_t live = inode_table_count(t);
	inode_table_forget(t, new_id, 2);
	ck_assert_uint_eq(inode_table_count(t), live);
	inode_table_forget(t, new_id, 1);
	ck_assert_uint_eq(inode_table_count(t), live - 1);
	inode_table_free(t);
}
END_TEST

/*
 * Readers pin and check their file while the cache churns under them: a
 * descriptor closed (and its number reused) under a reader shows up as the
 * wrong inode or EBADF.
 */
#define READERS 4
#define READER_GETS 40000

static struct inode_table *shared_table;
static atomic_int reader_errors;

static void *reader(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int n = 0; n < READER_GETS; n++) {
		int i = (int)(rand_r(&seed) % FILES);
		int fd = inode_table_fd_get(shared_table, ids[i]);
		struct stat st;
		if (fd < 0 || fstat(fd, &st) < 0 || st.st_ino != inos[i])
			atomic_fetch_add(&reader_errors, 1);
		if (fd >= 0)
			inode_table_fd_put(shared_table, ids[i]);
	}
	return NULL;
}

START_TEST(concurrent_gets_never_see_a_closed_descriptor)
{
	int base_fds = test_count_fds(getpid());
	shared_table = table_new(SMALL_BOUND);
	insert_all(shared_table);
	pthread_t th[READERS];
	for (uintptr_t i = 0; i < READERS; i++)
		ck_assert_int_eq(pthread_create(&th[i], NULL, reader, (void *)(i + 1)), 0);
	for (int i = 0; i < READERS; i++)
		pthread_join(th[i], NULL);
	int errors = atomic_load(&reader_errors);
	ck_assert_int_eq(errors, 0);
	/* Pins all returned: the cache is back within its bound and fully releasable. */
	inode_table_fds_release(shared_table, 1000);
	ck_assert_int_eq(test_count_fds(getpid()), base_fds + TABLE_FIXED_FDS);
	inode_table_free(shared_table);
}
END_TEST

static Suite *inode_suite(void)
{
	Suite *s = suite_create("fs_inode");
	TCase *tc = tcase_create("table");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_add_checked_fixture(tc, scratch_up, scratch_down);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, eviction_keeps_the_bound_and_reopens_the_same_file);
	tcase_add_test(tc, pinned_and_held_descriptors_are_not_evicted);
	tcase_add_test(tc, deleted_while_evicted_is_estale);
	tcase_add_test(tc, directories_symlinks_and_other_mounts_reopen);
	tcase_add_test(tc, filesystems_without_handles_keep_descriptors);
	tcase_add_test(tc, nodes_without_handles_past_the_bound_are_named_to_forget);
	tcase_add_test(tc, concurrent_gets_never_see_a_closed_descriptor);
	tcase_add_test(tc, reused_inode_number_gets_a_new_node);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("fs_inode", "tmpfs and bind mounts, opening by file handle");
	SRunner *sr = srunner_create(inode_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
