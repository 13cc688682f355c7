/* The scheduled data path through a real mount: data integrity, errors, shutdown. */
#include "leftovers.h"
#include "mount_helper.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BLOCK_BYTES 4096
#define THREADS 8
#define MANY_THREADS 40 /* more writers than the engine lets wait for their own write (16) */
#define BLOCKS_PER_THREAD 256

/* Every block carries its own identity, so any misplaced or torn block shows. */
static void fill_block(uint32_t *b, uint32_t file_block, uint32_t version)
{
	for (size_t i = 0; i < BLOCK_BYTES / 4; i++)
		b[i] = file_block * 2654435761u ^ version * 40503u ^ (uint32_t)i;
}

static bool block_ok(const uint32_t *b, uint32_t file_block, uint32_t version)
{
	uint32_t want[BLOCK_BYTES / 4];
	fill_block(want, file_block, version);
	return memcmp(b, want, BLOCK_BYTES) == 0;
}

struct rw_arg {
	const char *path;
	int id;
	int threads;     /* block k of thread id is file block k * threads + id */
	int errors;
};

/* Each thread owns blocks id, id+THREADS, ...: writes them at random, reads each back. */
static void *random_rw(void *p)
{
	struct rw_arg *a = p;
	int fd = open(a->path, O_RDWR);
	if (fd < 0) {
		a->errors++;
		return NULL;
	}
	unsigned seed = (unsigned)a->id * 7919u + 1;
	uint32_t buf[BLOCK_BYTES / 4], back[BLOCK_BYTES / 4];
	uint32_t versions[BLOCKS_PER_THREAD] = {0};
	for (int n = 0; n < BLOCKS_PER_THREAD * 4; n++) {
		int k = rand_r(&seed) % BLOCKS_PER_THREAD;
		uint32_t file_block = (uint32_t)(k * a->threads + a->id);
		versions[k]++;
		fill_block(buf, file_block, versions[k]);
		off_t off = (off_t)file_block * BLOCK_BYTES;
		if (pwrite(fd, buf, BLOCK_BYTES, off) != BLOCK_BYTES ||
		    pread(fd, back, BLOCK_BYTES, off) != BLOCK_BYTES ||
		    !block_ok(back, file_block, versions[k]))
			a->errors++;
	}
	close(fd);
	return NULL;
}

/* threads writers at random offsets of one file through a mount with extra_args. */
static void checksummed_writers(const char *const *extra_args, int threads)
{
	struct test_mount m;
	test_mount_start(&m, extra_args);
	const char *path = test_mnt_path(&m, "random");
	int fd = open(path, O_CREAT | O_RDWR, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(ftruncate(fd, (off_t)threads * BLOCKS_PER_THREAD * BLOCK_BYTES), 0);
	close(fd);
	pthread_t t[MANY_THREADS];
	struct rw_arg args[MANY_THREADS];
	ck_assert_int_le(threads, MANY_THREADS);
	for (int i = 0; i < threads; i++) {
		args[i] = (struct rw_arg){.path = path, .id = i, .threads = threads};
		ck_assert_int_eq(pthread_create(&t[i], NULL, random_rw, &args[i]), 0);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < threads; i++)
		ck_assert_msg(args[i].errors == 0, "writer %d: %d bad writes or reads", i, args[i].errors);
	test_mount_require_clean_exit(test_mount_stop(&m));
}

START_TEST(threads_random_offsets_checksummed)
{
	checksummed_writers(NULL, THREADS);
}
END_TEST

/* Past the workers allowed to wait for their own write, writes are copied: both at once. */
START_TEST(more_writers_than_held_workers_checksummed)
{
	checksummed_writers(NULL, MANY_THREADS);
}
END_TEST

/* A config file in the scratch directory; the runner removes it if the test fails. */
static void write_conf(char *path, size_t path_bytes, const char *name, const char *text)
{
	snprintf(path, path_bytes, "%s/%s", TEST_SCRATCH_DIR, name);
	leftovers_add_dir(path); /* taken down by the runner if the test fails (leftovers.h) */
	test_write_file(path, text);
}

/* busy_poll_us = 0: the engine thread sleeps at every wait and each handover wakes it. */
START_TEST(without_busy_poll_checksummed)
{
	char conf[600];
	write_conf(conf, sizeof(conf), "nopoll.conf", "[scheduler]\nbusy_poll_us = 0\n");
	const char *args[] = {"-c", conf, NULL};
	checksummed_writers(args, THREADS);
	unlink(conf);
}
END_TEST

/* -o uring_only: buffered writes copied into the engine's buffers and sent through the ring. */
START_TEST(uring_only_checksummed)
{
	const char *args[] = {"-o", "uring_only", NULL};
	checksummed_writers(args, THREADS);
}
END_TEST

START_TEST(enospc_reaches_the_writer_and_daemon_keeps_serving)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	/* A 2 MiB tmpfs under the backing directory: the mount's own subtree runs out. */
	ck_assert_int_eq(mkdir(test_backing_path(&m, "small"), 0777), 0);
	leftovers_add_mount(test_backing_path(&m, "small")); /* unmounted first if the test fails */
	ck_assert_int_eq(test_sh("mount -t tmpfs -o size=2m none '%s'", test_backing_path(&m, "small")), 0);
	int fd = open(test_mnt_path(&m, "small/fill"), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	static char chunk[256 * 1024];
	memset(chunk, 'f', sizeof(chunk));
	int err = 0;
	size_t written = 0;
	for (int i = 0; i < 64 && !err; i++) {
		ssize_t n = write(fd, chunk, sizeof(chunk));
		if (n < 0)
			err = errno;
		else
			written += (size_t)n;
	}
	close(fd);
	ck_assert_int_eq(err, ENOSPC);
	ck_assert_uint_le(written, 2u << 20);
	struct stat st;
	ck_assert_int_eq(stat(test_backing_path(&m, "small/fill"), &st), 0);
	ck_assert_uint_eq((uint64_t)st.st_size, written); /* what was acknowledged is there */
	/* The daemon still serves, and space freed is usable again. */
	ck_assert_int_eq(unlink(test_mnt_path(&m, "small/fill")), 0);
	/* The kernel sends RELEASE and FORGET asynchronously: the space comes back soon, not at once. */
	ssize_t again = -1;
	for (int i = 0; i < 500 && again != 4096; i++) {
		if (i)
			usleep(10000);
		fd = open(test_mnt_path(&m, "small/again"), O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		again = write(fd, chunk, 4096);
		ck_assert_msg(again == 4096 || errno == ENOSPC, "write: %s", strerror(errno));
		close(fd);
	}
	ck_assert_int_eq(again, 4096);
	fd = open(test_mnt_path(&m, "elsewhere"), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_eq(write(fd, chunk, sizeof(chunk)), (ssize_t)sizeof(chunk));
	close(fd);
	test_sh("umount -l '%s'", test_backing_path(&m, "small"));
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/*
 * Writers append numbered blocks and publish how many were acknowledged;
 * SIGTERM arrives mid-stream. Every acknowledged block must be on the
 * backing directory, intact.
 */
#define TERM_WRITERS 4
struct ack_log {
	atomic_uint acked[TERM_WRITERS];
};

static void term_writer(const char *path, int id, struct ack_log *log)
{
	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	if (fd < 0)
		_exit(1);
	uint32_t buf[BLOCK_BYTES / 4];
	for (uint32_t b = 0;; b++) {
		fill_block(buf, b, (uint32_t)id + 1);
		if (pwrite(fd, buf, BLOCK_BYTES, (off_t)b * BLOCK_BYTES) != BLOCK_BYTES)
			_exit(0); /* the mount went away: stop */
		atomic_store(&log->acked[id], b + 1);
	}
}

START_TEST(sigterm_loses_no_acknowledged_write)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	struct ack_log *log = mmap(NULL, sizeof(*log), PROT_READ | PROT_WRITE,
				   MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	ck_assert_ptr_ne(log, MAP_FAILED);
	pid_t writers[TERM_WRITERS];
	for (int i = 0; i < TERM_WRITERS; i++) {
		char rel[32];
		snprintf(rel, sizeof(rel), "w%d", i);
		const char *path = test_mnt_path(&m, rel);
		writers[i] = fork();
		if (writers[i] == 0)
			term_writer(path, i, log);
	}
	/* Let them get going, then stop the daemon under load. */
	for (int spins = 0; spins < 500 && atomic_load(&log->acked[TERM_WRITERS - 1]) < 200; spins++)
		usleep(10000);
	ck_assert_int_eq(kill(m.daemon_pid, SIGTERM), 0);
	int status;
	ck_assert_int_eq(waitpid(m.daemon_pid, &status, 0), m.daemon_pid);
	m.daemon_pid = 0;
	ck_assert(WIFEXITED(status));
	ck_assert_int_eq(WEXITSTATUS(status), 0);
	for (int i = 0; i < TERM_WRITERS; i++) {
		kill(writers[i], SIGKILL);
		waitpid(writers[i], NULL, 0);
	}
	for (int i = 0; i < TERM_WRITERS; i++) {
		char rel[32];
		snprintf(rel, sizeof(rel), "w%d", i);
		int fd = open(test_backing_path(&m, rel), O_RDONLY);
		ck_assert_int_ge(fd, 0);
		uint32_t acked = atomic_load(&log->acked[i]);
		ck_assert_uint_gt(acked, 0);
		uint32_t buf[BLOCK_BYTES / 4];
		for (uint32_t b = 0; b < acked; b++) {
			ck_assert_int_eq(pread(fd, buf, BLOCK_BYTES, (off_t)b * BLOCK_BYTES), BLOCK_BYTES);
			ck_assert_msg(block_ok(buf, b, (uint32_t)i + 1), "writer %d block %u lost", i, b);
		}
		close(fd);
	}
	munmap(log, sizeof(*log));
	test_mount_stop(&m);
}
END_TEST

START_TEST(policy_fifo_serves_the_same_data)
{
	char conf[600];
	write_conf(conf, sizeof(conf), "fifo.conf", "[scheduler]\npolicy = fifo\n");
	const char *args[] = {"-c", conf, NULL};
	struct test_mount m;
	test_mount_start(&m, args);
	const char *path = test_mnt_path(&m, "fifo");
	int fd = open(path, O_CREAT | O_RDWR, 0644);
	ck_assert_int_eq(ftruncate(fd, (off_t)THREADS * BLOCKS_PER_THREAD * BLOCK_BYTES), 0);
	close(fd);
	struct rw_arg arg = {.path = path, .id = 3, .threads = THREADS};
	random_rw(&arg);
	ck_assert_int_eq(arg.errors, 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
	unlink(conf);
}
END_TEST

/* Does the image file hold marker anywhere? Read back through its own page cache, coherent with the loop device. */
static bool image_holds(const char *image, const unsigned char *marker, size_t marker_bytes)
{
	int fd = open(image, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	static unsigned char chunk[1 << 20];
	bool found = false;
	size_t keep = 0; /* tail of the previous chunk: a marker may straddle two */
	for (;;) {
		ssize_t n = read(fd, chunk + keep, sizeof(chunk) - keep);
		ck_assert_int_ge(n, 0);
		if (n == 0)
			break;
		size_t have = keep + (size_t)n;
		if (memmem(chunk, have, marker, marker_bytes)) {
			found = true;
			break;
		}
		keep = have < marker_bytes ? have : marker_bytes - 1;
		memmove(chunk, chunk + have - keep, keep);
	}
	close(fd);
	return found;
}

/*
 * fsync and fdatasync through the mount return only once the data left the
 * backing filesystem's cache: the backing directory here is an ext4 image on
 * a loop device, and the data must be in the image file. Before the sync it
 * must not be (ext4 delays allocation), or the check would prove nothing.
 */
START_TEST(fsync_returns_after_the_backing_data_is_on_disk)
{
	/* Run 0: the FUSE worker writes once dispatched; run 1: the write goes through the ring. */
	const char *uring_only[] = {"-o", "uring_only", NULL};
	struct test_mount m;
	test_mount_start(&m, _i ? uring_only : NULL);
	char image[400];
	snprintf(image, sizeof(image), "%s/disk.img", m.root);
	ck_assert_int_eq(mkdir(test_backing_path(&m, "disk"), 0777), 0);
	leftovers_add_mount(test_backing_path(&m, "disk")); /* unmounted first if the test fails */
	ck_assert_int_eq(test_sh("truncate -s 64M '%s' && mkfs.ext4 -q -F '%s' && "
				 "mount -o loop '%s' '%s' && chmod 1777 '%s'",
				 image, image, image, test_backing_path(&m, "disk"),
				 test_backing_path(&m, "disk")), 0);
	for (int datasync = 0; datasync <= 1; datasync++) {
		unsigned char block[BLOCK_BYTES];
		unsigned seed = (unsigned)getpid() * 31u + (unsigned)datasync;
		for (size_t i = 0; i < sizeof(block); i++)
			block[i] = (unsigned char)rand_r(&seed);
		const char *path = test_mnt_path(&m, datasync ? "disk/fdatasync" : "disk/fsync");
		int fd = open(path, O_CREAT | O_WRONLY, 0644);
		ck_assert_int_ge(fd, 0);
		ck_assert_int_eq(pwrite(fd, block, sizeof(block), 0), (ssize_t)sizeof(block));
		ck_assert_msg(!image_holds(image, block, 64), "data on disk before any sync");
		ck_assert_int_eq(datasync ? fdatasync(fd) : fsync(fd), 0);
		ck_assert_msg(image_holds(image, block, 64), "%s returned before the data was on disk",
			      datasync ? "fdatasync" : "fsync");
		close(fd);
	}
	/* Lazily: the daemon still holds the inodes the kernel has not forgotten. */
	ck_assert_int_eq(test_sh("umount -l '%s'", test_backing_path(&m, "disk")), 0);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* O_DIRECT callers get O_DIRECT backing I/O from aligned engine buffers; reads stop at EOF. */
START_TEST(direct_io_and_reads_across_eof)
{
	struct test_mount m;
	test_mount_start(&m, NULL);
	enum { DIRECT_BYTES = 1 << 20, TAIL_BYTES = 1000 };
	void *buf = NULL, *back = NULL;
	ck_assert_int_eq(posix_memalign(&buf, 4096, DIRECT_BYTES), 0);
	ck_assert_int_eq(posix_memalign(&back, 4096, DIRECT_BYTES), 0);
	for (uint32_t b = 0; b < DIRECT_BYTES / BLOCK_BYTES; b++)
		fill_block((uint32_t *)buf + b * (BLOCK_BYTES / 4), b, 9);
	int fd = open(test_mnt_path(&m, "direct"), O_CREAT | O_RDWR | O_DIRECT, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, DIRECT_BYTES, 0), DIRECT_BYTES);
	ck_assert_int_eq(pread(fd, back, DIRECT_BYTES, 0), DIRECT_BYTES);
	ck_assert_mem_eq(buf, back, DIRECT_BYTES);
	close(fd);
	/* A buffered file of 1 MiB + 1000 bytes: a 1 MiB read at 512 KiB gets what is there. */
	fd = open(test_mnt_path(&m, "tail"), O_CREAT | O_RDWR, 0644);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, buf, DIRECT_BYTES, 0), DIRECT_BYTES);
	ck_assert_int_eq(pwrite(fd, buf, TAIL_BYTES, DIRECT_BYTES), TAIL_BYTES);
	ck_assert_int_eq(pread(fd, back, DIRECT_BYTES, DIRECT_BYTES / 2), DIRECT_BYTES / 2 + TAIL_BYTES);
	ck_assert_mem_eq(back, (char *)buf + DIRECT_BYTES / 2, DIRECT_BYTES / 2);
	ck_assert_mem_eq((char *)back + DIRECT_BYTES / 2, buf, TAIL_BYTES);
	ck_assert_int_eq(pread(fd, back, 4096, DIRECT_BYTES + TAIL_BYTES), 0);
	close(fd);
	/* The same through O_DIRECT: the backing read is short at EOF and not resumed. */
	fd = open(test_mnt_path(&m, "tail"), O_RDONLY | O_DIRECT);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pread(fd, back, DIRECT_BYTES, DIRECT_BYTES / 2), DIRECT_BYTES / 2 + TAIL_BYTES);
	ck_assert_mem_eq((char *)back + DIRECT_BYTES / 2, buf, TAIL_BYTES);
	close(fd);
	free(buf);
	free(back);
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

/* The byte at offset off of a file written by spliced_writer: misplaced bytes show. */
static unsigned char offset_byte(uint64_t off, unsigned salt)
{
	return (unsigned char)((off * 2654435761u) >> 11 ^ salt);
}

struct splice_arg {
	const char *path;
	uint64_t start, bytes; /* this writer's region */
	unsigned salt;
	int errors;
};

/* Buffered writes of 1 MiB, 1 MiB - 1 and 700 KiB, from an unaligned start. */
static void *spliced_writer(void *p)
{
	struct splice_arg *a = p;
	static const size_t sizes[] = {1u << 20, (1u << 20) - 1, 700u << 10};
	unsigned char *buf = malloc(1u << 20);
	int fd = open(a->path, O_WRONLY);
	if (!buf || fd < 0) {
		a->errors++;
		free(buf);
		return NULL;
	}
	for (uint64_t done = 0, i = 0; done < a->bytes; i++) {
		size_t n = sizes[i % 3];
		if (n > a->bytes - done)
			n = (size_t)(a->bytes - done);
		for (size_t k = 0; k < n; k++)
			buf[k] = offset_byte(a->start + done + k, a->salt);
		if (pwrite(fd, buf, n, (off_t)(a->start + done)) != (ssize_t)n)
			a->errors++;
		done += n;
	}
	close(fd);
	free(buf);
	return NULL;
}

/* Every byte of [start, start + bytes) of the backing file is the writer's. */
static void check_region(const char *path, uint64_t start, uint64_t bytes, unsigned salt)
{
	unsigned char *buf = malloc(1u << 20);
	ck_assert_ptr_nonnull(buf);
	int fd = open(path, O_RDONLY);
	ck_assert_int_ge(fd, 0);
	for (uint64_t done = 0; done < bytes;) {
		size_t n = bytes - done < (1u << 20) ? (size_t)(bytes - done) : 1u << 20;
		ck_assert_int_eq(pread(fd, buf, n, (off_t)(start + done)), (ssize_t)n);
		for (size_t k = 0; k < n; k++)
			if (buf[k] != offset_byte(start + done + k, salt))
				ck_abort_msg("%s: byte %llu is not the writer's", path,
					     (unsigned long long)(start + done + k));
		done += n;
	}
	close(fd);
	free(buf);
}

/*
 * Large buffered writes are spliced from /dev/fuse into the backing file
 * (channel.c) where the daemon could make its pipes at start, which takes
 * pipes past fs.pipe-max-size: allowed here for the mount's start. Two
 * writers at once (one runs solo or held, the other queued), payloads at
 * unaligned offsets and of odd sizes, then a write that fails half way
 * (ENOSPC) leaves the rest of its payload in a pipe, which must not reach
 * the next request: the bytes written after it must be right too.
 */
START_TEST(large_buffered_writes_spliced_keep_their_bytes)
{
	struct test_mount m;
	ck_assert_msg(test_mount_start_spliced(&m, NULL) >= 2, "the daemon made no pipes to splice into");

	enum { REGION_BYTES = 24u << 20 };
	const char *path = test_mnt_path(&m, "spliced");
	int fd = open(path, O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	close(fd);
	pthread_t t[2];
	struct splice_arg args[2];
	for (int i = 0; i < 2; i++) {
		args[i] = (struct splice_arg){.path = path, .start = 1000 + (uint64_t)i * REGION_BYTES,
					      .bytes = REGION_BYTES, .salt = (unsigned)i + 1};
		ck_assert_int_eq(pthread_create(&t[i], NULL, spliced_writer, &args[i]), 0);
	}
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < 2; i++) {
		ck_assert_int_eq(args[i].errors, 0);
		check_region(test_backing_path(&m, "spliced"), args[i].start, args[i].bytes, args[i].salt);
	}

	/* A 2 MiB tmpfs: a 1 MiB write runs out of space part of the way through. */
	ck_assert_int_eq(mkdir(test_backing_path(&m, "small"), 0777), 0);
	leftovers_add_mount(test_backing_path(&m, "small"));
	ck_assert_int_eq(test_sh("mount -t tmpfs -o size=2m none '%s'", test_backing_path(&m, "small")), 0);
	fd = open(test_mnt_path(&m, "small/fill"), O_CREAT | O_WRONLY, 0644);
	ck_assert_int_ge(fd, 0);
	unsigned char *chunk = malloc(1u << 20);
	ck_assert_ptr_nonnull(chunk);
	memset(chunk, 'f', 1u << 20);
	int err = 0;
	for (int i = 0; i < 8 && !err; i++)
		if (pwrite(fd, chunk, (1u << 20) - 1, (off_t)i * ((1u << 20) - 1)) < 0)
			err = errno;
	close(fd);
	free(chunk);
	ck_assert_int_eq(err, ENOSPC);
	struct splice_arg after = {.path = path, .start = 7, .bytes = 8u << 20, .salt = 9};
	spliced_writer(&after);
	ck_assert_int_eq(after.errors, 0);
	check_region(test_backing_path(&m, "spliced"), after.start, after.bytes, after.salt);
	test_sh("umount -l '%s'", test_backing_path(&m, "small"));
	test_mount_require_clean_exit(test_mount_stop(&m));
}
END_TEST

static Suite *engine_suite(void)
{
	Suite *s = suite_create("engine_data");
	TCase *tc = tcase_create("mount");
	tcase_add_unchecked_fixture(tc, leftovers_init, leftovers_cleanup);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, threads_random_offsets_checksummed);
	tcase_add_test(tc, more_writers_than_held_workers_checksummed);
	tcase_add_test(tc, uring_only_checksummed);
	tcase_add_test(tc, without_busy_poll_checksummed);
	tcase_add_test(tc, enospc_reaches_the_writer_and_daemon_keeps_serving);
	tcase_add_test(tc, sigterm_loses_no_acknowledged_write);
	tcase_add_test(tc, policy_fifo_serves_the_same_data);
	tcase_add_loop_test(tc, fsync_returns_after_the_backing_data_is_on_disk, 0, 2);
	tcase_add_test(tc, direct_io_and_reads_across_eof);
	tcase_add_test(tc, large_buffered_writes_spliced_keep_their_bytes);
	suite_add_tcase(s, tc);
	return s;
}

int main(void)
{
	test_require_root("engine_data", "FUSE mounts, a loop device");
	SRunner *sr = srunner_create(engine_suite());
	srunner_run_all(sr, CK_NORMAL);
	int failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
