/*
 * fusesched over a distributed backing: a GlusterFS replica-2 volume served
 * over loopback by a glusterd the test starts (gluster_fixture.h), mounted
 * twice with mount.glusterfs as two "nodes". Behaviour, not timing:
 *
 * - integrity: files of many sizes written through fusesched over node 1
 *   (buffered in odd-sized pieces, and O_DIRECT), read back after
 *   drop_caches through fusesched (buffered and O_DIRECT), through node 2's
 *   client and from both bricks (each replica must have them); rename,
 *   truncate and unlink seen the same way; an unaligned O_DIRECT write
 *   behaves through fusesched as on the gluster mount itself; fio --verify.
 * - attribution: I/O of processes in two test cgroups is counted exactly
 *   to each cgroup's own tenant in `fusesched stat --json`.
 * - two nodes: a fusesched mount over each client mount of the same volume;
 *   what one writes and closes the other reads identically (both ways), a
 *   rewrite and a rename made through one reach the other once the
 *   attribute caches (about a second) let them; each mount's config gives
 *   the same cgroup a different weight and each mount's stat shows its
 *   own, before and after one of them is reloaded.
 * - descriptors: a FUSE backing has no file handles to reopen inodes by,
 *   so the daemon keeps a descriptor per inode the kernel keeps, and gives
 *   them back when the kernel forgets the inodes (drop_caches, or asked
 *   to past half the daemon's limit: more files than the limit are created
 *   and read back).
 *
 * glusterd and the volume are set up once for the whole run (about 10 s,
 * most of it glusterd's first start configuring geo-replication) before
 * the tests fork, and taken down after, failed tests included; every test
 * makes its own fusesched mounts in its own directory of the volume.
 * Needs root, /dev/fuse, glusterd, gluster, mount.glusterfs and a free port
 * 24007; exits 77 naming what is missing.
 */
#include "ctl_test_util.h"
#include "gluster_fixture.h"
#include "leftovers.h"
#include "mount_helper.h"
#if __has_include("scratch.h")
#include "scratch.h" /* TEST_SCRATCH_DIR */
#endif

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CGROUP2_SUPER_MAGIC 0x63677270
#define MiB (1024 * 1024)

static struct gluster G;
static pid_t runner;
static char cg_root[64];       /* the v2 hierarchy fusesched attributes by */
static char config_path[2][512];

/* Every test's first line: the volume must be up (its error otherwise, never a pass). */
static void require_volume(void)
{
	ck_assert_msg(G.up, "%s", G.error);
}

/* ---- content: a byte stream that is a function of (seed, offset) ---- */

static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static void fill(unsigned char *buf, size_t n, uint64_t seed, uint64_t offset)
{
	for (size_t i = 0; i < n; i++) {
		uint64_t o = offset + i;
		buf[i] = (unsigned char)(mix(seed ^ (o / 8) * 0x100000001b3ull) >> (8 * (o % 8)));
	}
}

static uint64_t fnv(uint64_t h, const unsigned char *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 0x100000001b3ull;
	return h;
}
#define FNV_START 0xcbf29ce484222325ull

/* Hash of the stream's first size bytes (then zero_tail zero bytes: a file extended by truncate). */
static uint64_t expected_hash(uint64_t seed, size_t size, size_t zero_tail)
{
	static unsigned char buf[MiB];
	uint64_t h = FNV_START;
	for (size_t off = 0; off < size; off += sizeof(buf)) {
		size_t n = size - off < sizeof(buf) ? size - off : sizeof(buf);
		fill(buf, n, seed, off);
		h = fnv(h, buf, n);
	}
	memset(buf, 0, sizeof(buf));
	for (size_t off = 0; off < zero_tail; off += sizeof(buf))
		h = fnv(h, buf, zero_tail - off < sizeof(buf) ? zero_tail - off : sizeof(buf));
	return h;
}

/*
 * Writes the stream's first size bytes to path in pieces of chunk bytes
 * (O_DIRECT in flags: aligned pieces from an aligned buffer), fsyncs and
 * closes. 0, or the errno of the step that failed.
 */
static int write_stream(const char *path, uint64_t seed, size_t size, size_t chunk, int flags)
{
	unsigned char *buf;
	if (posix_memalign((void **)&buf, 4096, chunk ? chunk : 4096))
		return ENOMEM;
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_CLOEXEC | flags, 0644);
	int err = fd < 0 ? errno : 0;
	for (size_t off = 0; !err && off < size; off += chunk) {
		size_t n = size - off < chunk ? size - off : chunk;
		fill(buf, n, seed, off);
		ssize_t w = pwrite(fd, buf, n, (off_t)off);
		if (w != (ssize_t)n)
			err = w < 0 ? errno : EIO;
	}
	if (!err && fsync(fd) < 0)
		err = errno;
	if (fd >= 0 && close(fd) < 0 && !err)
		err = errno;
	free(buf);
	return err;
}

/* Hash and size of path read in 1 MiB pieces (O_DIRECT in flags: aligned); false if it cannot be read. */
static bool read_hash(const char *path, int flags, uint64_t *hash, size_t *size)
{
	unsigned char *buf;
	if (posix_memalign((void **)&buf, 4096, MiB))
		return false;
	int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
	bool ok = fd >= 0;
	*hash = FNV_START;
	*size = 0;
	while (ok) {
		ssize_t n = pread(fd, buf, MiB, (off_t)*size);
		if (n < 0)
			ok = false;
		if (n <= 0)
			break;
		*hash = fnv(*hash, buf, (size_t)n);
		*size += (size_t)n;
	}
	if (fd >= 0)
		close(fd);
	free(buf);
	return ok;
}

static void drop_caches(void)
{
	ck_assert_int_eq(test_sh("sync && echo 3 > /proc/sys/vm/drop_caches"), 0);
}

/* What a reader sees at path: size and content as expected, or the test fails naming the reader. */
static void assert_content(const char *who, const char *path, int flags, uint64_t want_hash,
			   size_t want_size)
{
	uint64_t h;
	size_t n;
	ck_assert_msg(read_hash(path, flags, &h, &n), "%s: cannot read %s: %s", who, path, strerror(errno));
	ck_assert_msg(n == want_size, "%s: %s has %zu bytes, %zu written", who, path, n, want_size);
	ck_assert_msg(h == want_hash, "%s: %s has other bytes than were written (%zu bytes)", who, path, n);
}

/*
 * The file REL (in the test's directory SUB of the volume) as every reader
 * sees it: through fusesched buffered and O_DIRECT, through node 2's
 * client, and in each brick.
 */
static void assert_everywhere(const struct test_mount *m, const char *sub, const char *rel,
			      uint64_t want_hash, size_t want_size)
{
	char on_volume[256];
	snprintf(on_volume, sizeof(on_volume), "%s/%s", sub, rel);
	assert_content("fusesched", test_mnt_path(m, rel), 0, want_hash, want_size);
	assert_content("fusesched O_DIRECT", test_mnt_path(m, rel), O_DIRECT, want_hash, want_size);
	assert_content("node 2's client", gluster_node_path(&G, 1, on_volume), 0, want_hash, want_size);
	for (int b = 0; b < 2; b++)
		assert_content(b ? "brick 2" : "brick 1", gluster_brick_path(&G, b, on_volume), 0, want_hash,
			       want_size);
}

static void assert_gone_everywhere(const struct test_mount *m, const char *sub, const char *rel)
{
	char on_volume[256];
	snprintf(on_volume, sizeof(on_volume), "%s/%s", sub, rel);
	const char *paths[] = {test_mnt_path(m, rel), gluster_node_path(&G, 1, on_volume),
			       gluster_brick_path(&G, 0, on_volume), gluster_brick_path(&G, 1, on_volume)};
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		struct stat st;
		ck_assert_msg(lstat(paths[i], &st) < 0 && errno == ENOENT, "%s is still there", paths[i]);
	}
}

/* A fusesched mount over the volume's directory SUB, reached through node NODE's client. */
static void mount_over(struct test_mount *m, int node, const char *sub, const char *config)
{
	const char *backing = gluster_node_path(&G, node, sub);
	ck_assert_msg(mkdir(backing, 0777) == 0 || errno == EEXIST, "mkdir %s: %s", backing, strerror(errno));
	chmod(backing, 0777);
	const char *args[] = {"-c", config, NULL};
	test_mount_start_with_backing(m, backing, config ? args : NULL);
}

/* ---- integrity ---- */

struct sized {
	const char *name;
	size_t size, chunk;
	int flags;
};

START_TEST(files_of_every_size_round_trip_to_both_replicas)
{
	require_volume();
	struct test_mount m;
	mount_over(&m, 0, "sizes", NULL);
	static const struct sized files[] = {
		{"empty", 0, 4096, 0},
		{"one", 1, 4096, 0},
		{"odd-511", 511, 100, 0},
		{"page-minus", 4095, 1000, 0},
		{"page", 4096, 4096, 0},
		{"page-plus", 4097, 4097, 0},
		{"64k-plus-17", 65536 + 17, 12345, 0},
		{"1m-minus-1", MiB - 1, 100003, 0},
		{"3m-plus-5", 3 * MiB + 5, 131072 + 7, 0},
		{"direct-4k", 4096, 4096, O_DIRECT},
		{"direct-1m", MiB, 65536, O_DIRECT},
		{"direct-4m-plus-4k", 4 * MiB + 4096, MiB, O_DIRECT},
		{"direct-512", 3 * 512, 512, O_DIRECT},
	};
	const size_t count = sizeof(files) / sizeof(files[0]);
	for (size_t i = 0; i < count; i++) {
		int err = write_stream(test_mnt_path(&m, files[i].name), 100 + i, files[i].size, files[i].chunk,
				       files[i].flags);
		ck_assert_msg(err == 0, "writing %s through fusesched: %s", files[i].name, strerror(err));
	}
	drop_caches();
	for (size_t i = 0; i < count; i++)
		assert_everywhere(&m, "sizes", files[i].name, expected_hash(100 + i, files[i].size, 0),
				  files[i].size);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

START_TEST(rename_truncate_and_unlink_reach_the_volume)
{
	require_volume();
	struct test_mount m;
	mount_over(&m, 0, "meta", NULL);
	const char *sub = "meta";
	/* rename: in place, into a directory, over an existing file; RENAME_NOREPLACE refuses. */
	ck_assert_int_eq(write_stream(test_mnt_path(&m, "a"), 1, 200000, 65536, 0), 0);
	ck_assert_int_eq(write_stream(test_mnt_path(&m, "victim"), 2, 5000, 5000, 0), 0);
	ck_assert_int_eq(rename(test_mnt_path(&m, "a"), test_mnt_path(&m, "b")), 0);
	ck_assert_int_eq(mkdir(test_mnt_path(&m, "dir"), 0755), 0);
	ck_assert_int_eq(rename(test_mnt_path(&m, "b"), test_mnt_path(&m, "dir/c")), 0);
	ck_assert_int_eq(renameat2(AT_FDCWD, test_mnt_path(&m, "dir/c"), AT_FDCWD,
				   test_mnt_path(&m, "victim"), RENAME_NOREPLACE), -1);
	ck_assert_int_eq(errno, EEXIST);
	ck_assert_int_eq(rename(test_mnt_path(&m, "dir/c"), test_mnt_path(&m, "victim")), 0);
	/* truncate: shorter, then longer (zeros), and O_TRUNC */
	ck_assert_int_eq(write_stream(test_mnt_path(&m, "t"), 3, MiB + 77, 100000, 0), 0);
	ck_assert_int_eq(truncate(test_mnt_path(&m, "t"), 5000), 0);
	ck_assert_int_eq(write_stream(test_mnt_path(&m, "t2"), 4, 70000, 70000, 0), 0);
	ck_assert_int_eq(truncate(test_mnt_path(&m, "t2"), 2 * MiB), 0);
	ck_assert_int_eq(write_stream(test_mnt_path(&m, "t3"), 5, 30000, 30000, 0), 0);
	int fd = open(test_mnt_path(&m, "t3"), O_WRONLY | O_TRUNC);
	ck_assert_int_ge(fd, 0);
	close(fd);
	/* unlink, also of a file still open: the open descriptor keeps reading it */
	ck_assert_int_eq(write_stream(test_mnt_path(&m, "gone"), 6, 9000, 9000, 0), 0);
	ck_assert_int_eq(write_stream(test_mnt_path(&m, "open-gone"), 7, 9000, 9000, 0), 0);
	int open_fd = open(test_mnt_path(&m, "open-gone"), O_RDONLY);
	ck_assert_int_ge(open_fd, 0);
	ck_assert_int_eq(unlink(test_mnt_path(&m, "gone")), 0);
	ck_assert_int_eq(unlink(test_mnt_path(&m, "open-gone")), 0);
	drop_caches();

	assert_everywhere(&m, sub, "victim", expected_hash(1, 200000, 0), 200000);
	assert_gone_everywhere(&m, sub, "a");
	assert_gone_everywhere(&m, sub, "b");
	assert_gone_everywhere(&m, sub, "dir/c");
	assert_everywhere(&m, sub, "t", expected_hash(3, 5000, 0), 5000);
	assert_everywhere(&m, sub, "t2", expected_hash(4, 70000, 2 * MiB - 70000), 2 * MiB);
	assert_everywhere(&m, sub, "t3", FNV_START, 0);
	assert_gone_everywhere(&m, sub, "gone");
	assert_gone_everywhere(&m, sub, "open-gone");
	unsigned char buf[9000], want[9000];
	fill(want, sizeof(want), 7, 0);
	ck_assert_int_eq(pread(open_fd, buf, sizeof(buf), 0), (ssize_t)sizeof(buf));
	ck_assert_msg(memcmp(buf, want, sizeof(buf)) == 0, "an unlinked open file reads other bytes");
	close(open_fd);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* One unaligned O_DIRECT write (5000 bytes at offset 1234) and what it left: errno, or 0 and the hash. */
static int unaligned_direct(const char *path, uint64_t *hash, size_t *size)
{
	unsigned char *buf;
	if (posix_memalign((void **)&buf, 4096, 8192))
		return ENOMEM;
	fill(buf, 5000, 9, 0);
	int fd = open(path, O_CREAT | O_TRUNC | O_WRONLY | O_DIRECT, 0644);
	int err = fd < 0 ? errno : 0;
	if (!err && pwrite(fd, buf + 1, 5000, 1234) != 5000)
		err = errno;
	if (fd >= 0)
		close(fd);
	free(buf);
	if (!err && !read_hash(path, 0, hash, size))
		err = errno;
	return err;
}

START_TEST(unaligned_direct_io_behaves_as_on_the_gluster_mount)
{
	require_volume();
	struct test_mount m;
	mount_over(&m, 0, "unaligned", NULL);
	uint64_t h_raw = 0, h_fs = 0;
	size_t n_raw = 0, n_fs = 0;
	int raw = unaligned_direct(gluster_node_path(&G, 0, "unaligned/raw"), &h_raw, &n_raw);
	int fs = unaligned_direct(test_mnt_path(&m, "through"), &h_fs, &n_fs);
	ck_assert_msg(raw == fs, "unaligned O_DIRECT write: %s on the gluster mount, %s through fusesched",
		      raw ? strerror(raw) : "success", fs ? strerror(fs) : "success");
	if (!raw) {
		ck_assert_int_eq(n_fs, n_raw);
		ck_assert_msg(h_fs == h_raw, "an unaligned O_DIRECT write stored other bytes through fusesched");
	}
	fprintf(stderr, "gluster: an unaligned O_DIRECT write: %s, on the gluster mount and through fusesched\n",
		raw ? strerror(raw) : "stored");
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

START_TEST(fio_verify_through_fusesched)
{
	require_volume();
	if (test_sh("command -v fio >/dev/null") != 0) {
		fprintf(stderr, "gluster: fio not found: the fio --verify run is left out\n");
		return;
	}
	struct test_mount m;
	mount_over(&m, 0, "fio", NULL);
	char log[512];
	snprintf(log, sizeof(log), "%s/fio.log", m.root);
	/* 4k random direct writes at depth 8, and 1 MiB-ish buffered sequential ones; each verified. */
	int status = test_sh(
		"fio --directory='%s' --output='%s' --verify=crc32c --verify_fatal=1 --do_verify=1 "
		"--name=rand-direct --rw=randwrite --bs=4k --size=8m --direct=1 --ioengine=libaio --iodepth=8 "
		"--name=seq-buffered --rw=write --bs=1000k --size=24m --ioengine=psync --end_fsync=1",
		m.mnt, log);
	char tail[4096] = "";
	if (status != 0) {
		FILE *f = fopen(log, "r");
		size_t n = f ? fread(tail, 1, sizeof(tail) - 1, f) : 0;
		tail[n] = '\0';
		if (f)
			fclose(f);
	}
	ck_assert_msg(status == 0, "fio --verify exited %d:\n%s", status, tail);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* ---- cgroups ---- */

static void find_cgroup_root(void)
{
	struct statfs sf;
	if (access(CG_V2 "/cgroup.procs", F_OK) == 0)
		snprintf(cg_root, sizeof(cg_root), "%s", CG_V2);
	else if (statfs("/sys/fs/cgroup", &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
		snprintf(cg_root, sizeof(cg_root), "/sys/fs/cgroup");
}

/* In a forked child: joins the v2 cgroup NAME; exits 90 if it cannot. */
static void join_cgroup(const char *name)
{
	char procs[256], me[32];
	snprintf(procs, sizeof(procs), "%s%s/cgroup.procs", cg_root, name);
	snprintf(me, sizeof(me), "%d\n", (int)getpid());
	int fd = open(procs, O_WRONLY);
	if (fd < 0 || write(fd, me, strlen(me)) < 0)
		_exit(90);
	close(fd);
}

struct direct_job {
	const char *group;
	const char *path;
	int writes;
	size_t write_bytes;
	int reads;
	size_t read_bytes;
};

/* In a child in the job's cgroup: O_DIRECT writes then reads, each call exactly one FUSE request. */
static int run_direct_job(const struct direct_job *j)
{
	pid_t pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		join_cgroup(j->group);
		size_t max = j->write_bytes > j->read_bytes ? j->write_bytes : j->read_bytes;
		unsigned char *buf;
		if (posix_memalign((void **)&buf, 4096, max))
			_exit(1);
		memset(buf, 'g', max);
		int fd = open(j->path, O_CREAT | O_RDWR | O_DIRECT, 0644);
		if (fd < 0)
			_exit(2);
		for (int i = 0; i < j->writes; i++)
			if (pwrite(fd, buf, j->write_bytes, (off_t)(i * j->write_bytes)) != (ssize_t)j->write_bytes)
				_exit(3);
		for (int i = 0; i < j->reads; i++)
			if (pread(fd, buf, j->read_bytes, (off_t)(i * j->read_bytes)) != (ssize_t)j->read_bytes)
				_exit(4);
		_exit(close(fd) == 0 ? 0 : 5);
	}
	int status;
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int64_t field(struct json_object *t, const char *section, const char *key)
{
	struct json_object *s = t, *v;
	if (section)
		ck_assert_msg(json_object_object_get_ex(t, section, &s), "no %s", section);
	ck_assert_msg(json_object_object_get_ex(s, key, &v), "no %s", key);
	return json_object_get_int64(v);
}

static const char *text_field(struct json_object *t, const char *key)
{
	struct json_object *v;
	ck_assert_msg(json_object_object_get_ex(t, key, &v), "no %s", key);
	return json_object_get_string(v);
}

/* The row of cgroup in mnt's stat must show these counts, weight and weight source. */
static void assert_tenant(const char *mnt, const char *cgroup, const struct direct_job *j, int weight,
			  const char *source)
{
	struct json_object *mount;
	struct json_object *doc = ctl_test_stat(mnt, &mount);
	struct json_object *t = ctl_test_tenant(mount, cgroup);
	ck_assert_msg(t != NULL, "%s: no tenant %s in stat", mnt, cgroup);
	if (j) {
		ck_assert_int_eq(field(t, "ops", "write"), j->writes);
		ck_assert_int_eq(field(t, "ops", "read"), j->reads);
		ck_assert_int_eq(field(t, "bytes", "write"), (int64_t)(j->writes * j->write_bytes));
		ck_assert_int_eq(field(t, "bytes", "read"), (int64_t)(j->reads * j->read_bytes));
	}
	ck_assert_msg(field(t, NULL, "weight") == weight, "%s: %s has weight %lld, not %d", mnt, cgroup,
		      (long long)field(t, NULL, "weight"), weight);
	ck_assert_str_eq(text_field(t, "weight_source"), source);
	json_object_put(doc);
}

static void write_config(int index, const char *text)
{
	snprintf(config_path[index], sizeof(config_path[index]), "%s/gluster-%d-%d.conf", TEST_SCRATCH_DIR,
		 (int)getpid(), index);
	leftovers_add_dir(config_path[index]);
	test_write_file(config_path[index], text);
}

static void remove_configs(void)
{
	for (int i = 0; i < 2; i++)
		if (config_path[i][0])
			unlink(config_path[i]);
}

START_TEST(io_in_a_cgroup_is_that_cgroups_tenant)
{
	require_volume();
	ck_assert_msg(cg_root[0], "no cgroup v2 hierarchy (/sys/fs/cgroup/unified or /sys/fs/cgroup)");
	char group_a[64], group_b[64], text[512];
	snprintf(group_a, sizeof(group_a), "/fusesched-gluster-%d-a", (int)getpid());
	snprintf(group_b, sizeof(group_b), "/fusesched-gluster-%d-b", (int)getpid());
	ctl_test_cgroup_make(cg_root, group_a);
	ctl_test_cgroup_make(cg_root, group_b);
	snprintf(text, sizeof(text), "[tenants]\ncache_ttl_ms = 20\n\n[group \"%s\"]\nweight = 200\n", group_a);
	write_config(0, text);
	struct test_mount m;
	mount_over(&m, 0, "tenants", config_path[0]);
	const struct direct_job a = {group_a, test_mnt_path(&m, "a"), 9, 65536, 5, 65536};
	const struct direct_job b = {group_b, test_mnt_path(&m, "b"), 4, 16384, 6, 4096};
	ck_assert_int_eq(run_direct_job(&a), 0);
	ck_assert_int_eq(run_direct_job(&b), 0);
	/* Replies follow the counting; poll only to be safe across the daemon's threads. */
	CTL_TEST_POLL(ctl_test_tenant_u64(m.mnt, group_b, "ops.read") == b.reads);
	assert_tenant(m.mnt, group_a, &a, 200, "rule");
	assert_tenant(m.mnt, group_b, &b, 100, "default");
	/* And the bytes are on the volume. */
	struct stat st;
	ck_assert_int_eq(stat(gluster_node_path(&G, 1, "tenants/a"), &st), 0);
	ck_assert_int_eq(st.st_size, 9 * 65536);
	test_mount_require_clean_exit(test_mount_stop(&m));
	ctl_test_cgroups_cleanup();
	remove_configs();
}
END_TEST

/* ---- two nodes ---- */

/* Polls up to 10 s until reader sees (hash, size) at path; returns the seconds it took, or -1. */
static double converges(const char *path, uint64_t want_hash, size_t want_size)
{
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < 500; i++) {
		uint64_t h;
		size_t n;
		if (read_hash(path, 0, &h, &n) && h == want_hash && n == want_size) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			return (double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9;
		}
		usleep(20000);
	}
	return -1;
}

START_TEST(two_nodes_share_data_and_keep_their_own_weights)
{
	require_volume();
	ck_assert_msg(cg_root[0], "no cgroup v2 hierarchy (/sys/fs/cgroup/unified or /sys/fs/cgroup)");
	char group[64], text[512];
	snprintf(group, sizeof(group), "/fusesched-gluster-%d-x", (int)getpid());
	ctl_test_cgroup_make(cg_root, group);
	snprintf(text, sizeof(text), "[tenants]\ncache_ttl_ms = 20\n\n[group \"%s\"]\nweight = 300\n", group);
	write_config(0, text);
	snprintf(text, sizeof(text), "[tenants]\ncache_ttl_ms = 20\n\n[group \"%s\"]\nweight = 50\n", group);
	write_config(1, text);
	struct test_mount n1, n2;
	mount_over(&n1, 0, "shared", config_path[0]);
	mount_over(&n2, 1, "shared", config_path[1]);

	/* Node 1 writes (in the cgroup, O_DIRECT: exact counts), node 2 reads, both in the cgroup. */
	const struct direct_job w = {group, test_mnt_path(&n1, "from-1-direct"), 16, 65536, 0, 4096};
	ck_assert_int_eq(run_direct_job(&w), 0);
	const struct direct_job r = {group, test_mnt_path(&n2, "from-1-direct"), 0, 4096, 8, 131072};
	ck_assert_int_eq(run_direct_job(&r), 0);
	CTL_TEST_POLL(ctl_test_tenant_u64(n2.mnt, group, "ops.read") == r.reads);
	/* Attribution is local to each node: each counts its own I/O only. */
	assert_tenant(n1.mnt, group, &w, 300, "rule");
	assert_tenant(n2.mnt, group, &r, 50, "rule");

	/* Files written and closed through one node read identically through the other, both ways. */
	static const size_t sizes[] = {1, 4097, 3 * MiB + 5};
	for (int from = 0; from < 2; from++) {
		struct test_mount *wm = from ? &n2 : &n1, *rm = from ? &n1 : &n2;
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			char name[64];
			snprintf(name, sizeof(name), "from-%d-%zu", from + 1, sizes[i]);
			uint64_t seed = 1000 + (uint64_t)from * 10 + i;
			ck_assert_int_eq(write_stream(test_mnt_path(wm, name), seed, sizes[i], 100003, 0), 0);
			assert_content(from ? "node 1 reading node 2's file" : "node 2 reading node 1's file",
				       test_mnt_path(rm, name), 0, expected_hash(seed, sizes[i], 0), sizes[i]);
		}
	}
	/*
	 * A file node 2 has read, rewritten shorter through node 1, and a
	 * rename: node 2 sees both once the attribute caches let it (its
	 * fusesched's and its gluster client's, about a second each).
	 */
	ck_assert_int_eq(write_stream(test_mnt_path(&n1, "rewritten"), 1, 2 * MiB, MiB, 0), 0);
	assert_content("node 2", test_mnt_path(&n2, "rewritten"), 0, expected_hash(1, 2 * MiB, 0), 2 * MiB);
	ck_assert_int_eq(write_stream(test_mnt_path(&n1, "rewritten"), 2, 1000, 1000, 0), 0);
	double rewrite_s = converges(test_mnt_path(&n2, "rewritten"), expected_hash(2, 1000, 0), 1000);
	ck_assert_msg(rewrite_s >= 0, "node 2 did not see node 1's rewrite within 10 s");
	ck_assert_int_eq(rename(test_mnt_path(&n1, "rewritten"), test_mnt_path(&n1, "renamed")), 0);
	double rename_s = converges(test_mnt_path(&n2, "renamed"), expected_hash(2, 1000, 0), 1000);
	ck_assert_msg(rename_s >= 0, "node 2 did not see node 1's rename within 10 s");
	struct stat st;
	for (int i = 0; i < 500 && stat(test_mnt_path(&n2, "rewritten"), &st) == 0; i++)
		usleep(20000);
	ck_assert_msg(stat(test_mnt_path(&n2, "rewritten"), &st) < 0 && errno == ENOENT,
		      "node 2 still finds the renamed file's old name after 10 s");
	fprintf(stderr, "gluster: node 2 saw node 1's rewrite after %.2f s, its rename after %.2f s\n",
		rewrite_s, rename_s);

	/* Weights are per mount: reloading node 1 with another weight leaves node 2's alone. */
	snprintf(text, sizeof(text), "[tenants]\ncache_ttl_ms = 20\n\n[group \"%s\"]\nweight = 80\n", group);
	test_write_file(config_path[0], text);
	ck_assert_int_eq(test_sh("%s reload '%s' >/dev/null", FUSESCHED_BIN, n1.mnt), 0);
	assert_tenant(n1.mnt, group, NULL, 80, "rule");
	assert_tenant(n2.mnt, group, NULL, 50, "rule");

	test_mount_require_clean_exit(test_mount_stop(&n1));
	test_mount_require_clean_exit(test_mount_stop(&n2));
	ctl_test_cgroups_cleanup();
	remove_configs();
}
END_TEST

/* ---- descriptors ---- */

#define FILES 200

START_TEST(a_fuse_backing_costs_a_descriptor_per_cached_inode)
{
	require_volume();
	struct test_mount m;
	mount_over(&m, 0, "fds", NULL);
	int before = test_count_fds(m.daemon_pid);
	for (int i = 0; i < FILES; i++) {
		char name[32];
		snprintf(name, sizeof(name), "f%d", i);
		int fd = open(test_mnt_path(&m, name), O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		close(fd);
	}
	/* The kernel keeps the inodes (cached dentries), the daemon a descriptor for each. */
	int cached = test_count_fds(m.daemon_pid);
	ck_assert_msg(cached >= before + FILES, "%d descriptors before, %d after %d files", before, cached,
		      FILES);
	/* Forgotten inodes give them back. */
	int after = cached;
	for (int i = 0; i < 250 && after >= before + FILES / 4; i++) {
		ck_assert_int_eq(test_sh("echo 2 > /proc/sys/vm/drop_caches"), 0);
		usleep(40000);
		after = test_count_fds(m.daemon_pid);
	}
	ck_assert_msg(after < before + FILES / 4, "%d descriptors before, %d with %d files cached, %d after "
		      "drop_caches", before, cached, FILES, after);
	fprintf(stderr, "gluster: daemon descriptors: %d, %d with %d inodes cached, %d after drop_caches\n",
		before, cached, FILES, after);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * Past half the daemon's descriptor limit it asks the kernel to forget the
 * least recently used inodes (FUSE_NOTIFY_PRUNE, Linux 6.18): files past
 * the limit are created and read back without EMFILE.
 */
#define PRUNE_NOFILE 512
#define PRUNE_FILES 1200

START_TEST(files_past_the_descriptor_limit_are_created_and_read_back)
{
	require_volume();
	if (!test_kernel_at_least(6, 18)) {
		fprintf(stderr, "note: kernel before 6.18 has no FUSE_NOTIFY_PRUNE; not tested\n");
		return;
	}
	const char *backing = gluster_node_path(&G, 0, "prune");
	ck_assert_msg(mkdir(backing, 0777) == 0 || errno == EEXIST, "mkdir %s: %s", backing, strerror(errno));
	struct test_mount m;
	test_mount_start_nofile(&m, backing, PRUNE_NOFILE);
	char name[32], text[16], back[16];
	for (int i = 0; i < PRUNE_FILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		int fd = open(test_mnt_path(&m, name), O_CREAT | O_WRONLY, 0644);
		ck_assert_msg(fd >= 0, "create %s: %s", name, strerror(errno));
		int len = snprintf(text, sizeof(text), "%d", i);
		ck_assert_int_eq(write(fd, text, (size_t)len), len);
		close(fd);
	}
	int fds = test_count_fds(m.daemon_pid);
	ck_assert_msg(fds <= PRUNE_NOFILE / 2 + 150, "daemon holds %d descriptors", fds);
	for (int i = 0; i < PRUNE_FILES; i++) {
		snprintf(name, sizeof(name), "f%d", i);
		int fd = open(test_mnt_path(&m, name), O_RDONLY);
		ck_assert_msg(fd >= 0, "open %s: %s", name, strerror(errno));
		ssize_t n = read(fd, back, sizeof(back) - 1);
		close(fd);
		ck_assert_int_gt(n, 0);
		back[n] = 0;
		snprintf(text, sizeof(text), "%d", i);
		ck_assert_str_eq(back, text);
	}
	fprintf(stderr, "gluster: %d files at a limit of %d: daemon descriptors %d after the creates\n",
		PRUNE_FILES, PRUNE_NOFILE, fds);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* ---- the run ---- */

static void stop_at_exit(void)
{
	/* Forked tests inherit this handler: only the runner owns glusterd. */
	if (getpid() == runner && G.dir[0])
		gluster_stop(&G);
}

static Suite *gluster_suite(void)
{
	Suite *s = suite_create("gluster");
	struct {
		const char *name;
		const TTest *test;
	} cases[] = {
		{"integrity", files_of_every_size_round_trip_to_both_replicas},
		{"integrity", rename_truncate_and_unlink_reach_the_volume},
		{"integrity", unaligned_direct_io_behaves_as_on_the_gluster_mount},
		{"integrity", fio_verify_through_fusesched},
		{"attribution", io_in_a_cgroup_is_that_cgroups_tenant},
		{"two-nodes", two_nodes_share_data_and_keep_their_own_weights},
		{"descriptors", a_fuse_backing_costs_a_descriptor_per_cached_inode},
		{"descriptors", files_past_the_descriptor_limit_are_created_and_read_back},
	};
	TCase *tc = NULL;
	const char *current = "";
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (strcmp(current, cases[i].name) != 0) {
			current = cases[i].name;
			tc = tcase_create(current);
			tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
			tcase_set_timeout(tc, 90);
			suite_add_tcase(s, tc);
		}
		tcase_add_test(tc, cases[i].test);
	}
	return s;
}

int main(void)
{
	const char *skip = gluster_skip_reason();
	if (skip) {
		fprintf(stderr, "SKIP: gluster: %s\n", skip);
		return 77;
	}
	runner = getpid();
	find_cgroup_root();
	atexit(stop_at_exit);
	gluster_start(&G);
	if (G.up)
		fprintf(stderr, "gluster: volume %s (replica 2 on %s, two clients) up in %.1f s: %s\n",
			G.volume, G.host, G.start_s, G.steps);
	else
		fprintf(stderr, "%s\n", G.error);
	SRunner *sr = srunner_create(gluster_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	int stopped = gluster_stop(&G);
	fprintf(stderr, "gluster: volume and glusterd taken down in %.1f s: %s%s\n", G.stop_s, G.steps,
		stopped ? "; with problems (above)" : "");
	return failed || stopped ? EXIT_FAILURE : EXIT_SUCCESS;
}
