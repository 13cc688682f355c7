/* fusesched calibrate: the backing store's cost model, measured (calibrate.h). */
#include "fusesched/calibrate.h"
#include "fusesched/clock.h"

#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pass {
	bool write, random, dsync;
	uint32_t bytes, depth;
	uint64_t until_ns;	/* 0: once over the file, in order (the fill) */
	struct calibrate_measure *result;	/* NULL: the fill */
	uint64_t ops, moved;	/* completed */
	uint64_t next_block, rng;
};

static uint64_t pass_offset(struct pass *p)
{
	uint64_t blocks = CALIBRATE_FILE_BYTES / p->bytes;
	if (!p->random)
		return (p->next_block++ % blocks) * p->bytes;
	p->rng ^= p->rng << 13;	/* xorshift64: any spread will do */
	p->rng ^= p->rng >> 7;
	p->rng ^= p->rng << 17;
	return (p->rng % blocks) * p->bytes;
}

static bool pass_more(const struct pass *p, uint64_t issued)
{
	if (p->until_ns)
		return clock_now_ns() < p->until_ns;
	return issued < CALIBRATE_FILE_BYTES / p->bytes;
}

static void queue_one(struct io_uring *ring, int fd, struct pass *p, void *buf, uint32_t slot)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(ring);	/* the ring has a slot for each */
	uint64_t off = pass_offset(p);
	if (p->write)
		io_uring_prep_write(sqe, fd, buf, p->bytes, off);
	else
		io_uring_prep_read(sqe, fd, buf, p->bytes, off);
	io_uring_sqe_set_data64(sqe, slot);
}

/* depth requests at once until the pass is over; 0 or -errno with err set.
 * On a failure the requests still out are waited for: their buffers are
 * freed after. */
static int run_pass(struct io_uring *ring, int fd, char **bufs, struct pass *p, const char *dir,
		    char *err, size_t err_len)
{
	uint64_t issued = 0;
	uint32_t inflight = 0;
	int failed = 0;
	for (uint32_t i = 0; i < p->depth && pass_more(p, issued); i++, issued++, inflight++)
		queue_one(ring, fd, p, bufs[i], i);
	while (inflight) {
		int rc = io_uring_submit_and_wait(ring, 1);
		if (rc < 0 && rc != -EINTR) {
			snprintf(err, err_len, "io_uring on %s: %s", dir, strerror(-rc));
			return rc;	/* nothing can be waited for: the ring is broken */
		}
		struct io_uring_cqe *cqe;
		while (inflight && io_uring_peek_cqe(ring, &cqe) == 0) {
			int res = cqe->res;
			uint32_t slot = (uint32_t)io_uring_cqe_get_data64(cqe);
			io_uring_cqe_seen(ring, cqe);
			inflight--;
			if (!failed && (res < 0 || (uint32_t)res != p->bytes)) {
				snprintf(err, err_len, "%s a scratch file in %s: %s",
					 p->write ? "writing" : "reading", dir,
					 res < 0 ? strerror(-res) : "short transfer");
				failed = res < 0 ? res : -EIO;
			}
			if (failed)
				continue;
			p->ops++;
			p->moved += p->bytes;
			if (pass_more(p, issued)) {
				queue_one(ring, fd, p, bufs[slot], slot);
				issued++;
				inflight++;
			}
		}
	}
	return failed;
}

static int rate_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

_Static_assert(CALIBRATE_ROUNDS % 2 == 1, "the median of an odd number of rounds is one of them");

static struct calibrate_measure measure_of(const uint64_t *rounds)
{
	uint64_t sorted[CALIBRATE_ROUNDS];
	memcpy(sorted, rounds, sizeof(sorted));
	qsort(sorted, CALIBRATE_ROUNDS, sizeof(sorted[0]), rate_cmp);
	return (struct calibrate_measure){ .median = sorted[CALIBRATE_ROUNDS / 2],
					   .low = sorted[0],
					   .high = sorted[CALIBRATE_ROUNDS - 1] };
}

/* The scratch file, and in *dsync_fd a second descriptor of it opened with
 * O_DSYNC: how most programs that want dsync writes ask for them. */
static int open_scratch(const char *dir, bool *direct, int *dsync_fd, char *err, size_t err_len)
{
	char path[4096];
	int n = snprintf(path, sizeof(path), "%s/.fusesched-calibrate.%ld", dir, (long)getpid());
	if (n < 0 || (size_t)n >= sizeof(path)) {
		snprintf(err, err_len, "%s: name too long", dir);
		return -ENAMETOOLONG;
	}
	*direct = true;
	int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EINVAL) {	/* no O_DIRECT here: measure what there is */
		*direct = false;
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	}
	if (fd < 0) {
		int e = errno;
		snprintf(err, err_len, "creating a scratch file in %s: %s", dir, strerror(e));
		return -e;
	}
	*dsync_fd = open(path, O_RDWR | O_DSYNC | O_CLOEXEC | (*direct ? O_DIRECT : 0));
	int e = errno;
	(void)unlink(path);	/* nothing is left behind, whatever happens next */
	if (*dsync_fd < 0) {
		snprintf(err, err_len, "opening the scratch file in %s with O_DSYNC: %s", dir,
			 strerror(e));
		close(fd);
		return -e;
	}
	return fd;
}

int calibrate_store(const char *dir, double seconds, struct calibrate_result *out, char *err,
		    size_t err_len)
{
	memset(out, 0, sizeof(*out));
	out->seconds = seconds;
	int dsync_fd = -1;
	int fd = open_scratch(dir, &out->direct, &dsync_fd, err, err_len);
	if (fd < 0)
		return fd;
	const uint32_t nbufs = CALIBRATE_SMALL_DEPTH;
	char *bufs[CALIBRATE_SMALL_DEPTH] = { 0 };
	struct io_uring ring;
	int rc = io_uring_queue_init(nbufs, &ring, 0);
	if (rc < 0) {
		snprintf(err, err_len, "io_uring: %s", strerror(-rc));
		close(fd);
		close(dsync_fd);
		return rc;
	}
	for (uint32_t i = 0; i < nbufs && !rc; i++) {
		void *b;
		rc = -posix_memalign(&b, 4096, CALIBRATE_LARGE_BYTES);
		if (!rc) {
			memset(b, 0x5a + (int)i, CALIBRATE_LARGE_BYTES);
			bufs[i] = b;
		} else {
			snprintf(err, err_len, "buffers: %s", strerror(-rc));
		}
	}
	uint64_t round_ns = (uint64_t)(seconds * 1e9) / CALIBRATE_ROUNDS;
	/* The fill first, so that every later write overwrites and every read
	 * reads what the store holds; then, in each round, large ones before
	 * small ones. */
	struct pass fill = { .write = true, .bytes = CALIBRATE_LARGE_BYTES,
			     .depth = CALIBRATE_LARGE_DEPTH };
	const struct pass measures[] = {
		{ .write = true, .bytes = CALIBRATE_LARGE_BYTES, .depth = CALIBRATE_LARGE_DEPTH,
		  .result = &out->write_mb_per_s },
		{ .write = true, .random = true, .bytes = CALIBRATE_SMALL_BYTES,
		  .depth = CALIBRATE_SMALL_DEPTH, .result = &out->write_iops },
		{ .bytes = CALIBRATE_LARGE_BYTES, .depth = CALIBRATE_LARGE_DEPTH,
		  .result = &out->read_mb_per_s },
		{ .random = true, .bytes = CALIBRATE_SMALL_BYTES, .depth = CALIBRATE_SMALL_DEPTH,
		  .result = &out->read_iops },
		{ .write = true, .dsync = true, .bytes = CALIBRATE_LARGE_BYTES,
		  .depth = CALIBRATE_LARGE_DEPTH, .result = &out->dsync_mb_per_s },
		{ .write = true, .dsync = true, .random = true, .bytes = CALIBRATE_SMALL_BYTES,
		  .depth = CALIBRATE_SMALL_DEPTH, .result = &out->dsync_iops },
	};
	enum { NMEASURES = sizeof(measures) / sizeof(measures[0]) };
	uint64_t rate[NMEASURES][CALIBRATE_ROUNDS];
	if (!rc)
		rc = run_pass(&ring, fd, bufs, &fill, dir, err, err_len);
	for (uint32_t round = 0; round < CALIBRATE_ROUNDS && !rc; round++) {
		for (size_t i = 0; i < NMEASURES && !rc; i++) {
			struct pass p = measures[i];
			p.rng = 0x9e3779b97f4a7c15ull + round * NMEASURES + i;
			uint64_t start = clock_now_ns();
			p.until_ns = start + round_ns;
			rc = run_pass(&ring, p.dsync ? dsync_fd : fd, bufs, &p, dir, err, err_len);
			uint64_t took = clock_now_ns() - start;
			double units = p.random ? (double)p.ops : (double)p.moved / 1e6;
			double per_s = units * 1e9 / (double)(took ? took : 1);
			rate[i][round] = per_s >= 1 ? (uint64_t)per_s : 1;	/* the config takes no 0 */
		}
	}
	for (size_t i = 0; i < NMEASURES && !rc; i++)
		*measures[i].result = measure_of(rate[i]);
	io_uring_queue_exit(&ring);
	for (uint32_t i = 0; i < nbufs; i++)
		free(bufs[i]);
	close(fd);
	close(dsync_fd);
	return rc;
}

static bool measure_steady(const struct calibrate_measure *m)
{
	return m->high * 100 <= m->low * CALIBRATE_STEADY_PCT;
}

static void print_measure(FILE *out, const char *what, const struct calibrate_measure *m,
			  const char *unit)
{
	fprintf(out, ";   %s: %llu %s (rounds %llu-%llu)\n", what, (unsigned long long)m->median,
		unit, (unsigned long long)m->low, (unsigned long long)m->high);
}

void calibrate_print(const char *dir, const struct calibrate_result *r, FILE *out)
{
	char what[6][96];
	snprintf(what[0], sizeof(what[0]), "%u KiB random reads, %u at once", CALIBRATE_SMALL_BYTES >> 10,
		 CALIBRATE_SMALL_DEPTH);
	snprintf(what[1], sizeof(what[1]), "%u MiB sequential reads, %u at once",
		 CALIBRATE_LARGE_BYTES >> 20, CALIBRATE_LARGE_DEPTH);
	snprintf(what[2], sizeof(what[2]), "%u KiB random writes, %u at once",
		 CALIBRATE_SMALL_BYTES >> 10, CALIBRATE_SMALL_DEPTH);
	snprintf(what[3], sizeof(what[3]), "%u MiB sequential writes, %u at once",
		 CALIBRATE_LARGE_BYTES >> 20, CALIBRATE_LARGE_DEPTH);
	snprintf(what[4], sizeof(what[4]), "%u KiB random dsync writes, %u at once",
		 CALIBRATE_SMALL_BYTES >> 10, CALIBRATE_SMALL_DEPTH);
	snprintf(what[5], sizeof(what[5]), "%u MiB sequential dsync writes, %u at once",
		 CALIBRATE_LARGE_BYTES >> 20, CALIBRATE_LARGE_DEPTH);
	const struct calibrate_measure *m[6] = { &r->read_iops,	 &r->read_mb_per_s,
						 &r->write_iops, &r->write_mb_per_s,
						 &r->dsync_iops, &r->dsync_mb_per_s };
	fprintf(out, "; %s, measured by fusesched calibrate: %.1f s each in %u rounds, %s, a %u MiB scratch file.\n",
		dir, r->seconds, CALIBRATE_ROUNDS,
		r->direct ? "O_DIRECT" : "through the page cache (no O_DIRECT here: the reads may be the cache's)",
		CALIBRATE_FILE_BYTES >> 20);
	bool steady = true;
	for (int i = 0; i < 6; i++) {
		print_measure(out, what[i], m[i], i % 2 ? "MB/s" : "a second");
		steady = steady && measure_steady(m[i]);
	}
	if (!steady)
		fprintf(out, "; The rounds differ by more than %u%%: the store's speed moved while it was\n"
			     "; measured (other I/O on it?). Measure again with the volume quiet.\n",
			CALIBRATE_STEADY_PCT - 100);
	fprintf(out, "; For the [scheduler] section (the medians):\n"
		     "read_cost = %llu %llu\n"
		     "write_cost = %llu %llu\n"
		     "dsync_cost = %llu %llu\n",
		(unsigned long long)r->read_iops.median, (unsigned long long)r->read_mb_per_s.median,
		(unsigned long long)r->write_iops.median, (unsigned long long)r->write_mb_per_s.median,
		(unsigned long long)r->dsync_iops.median, (unsigned long long)r->dsync_mb_per_s.median);
}

int calibrate_run(int argc, char **argv)
{
	const char *dir = NULL;
	double seconds = 2.0;
	for (int i = 0; i < argc; i++) {
		if (strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
			char *end;
			seconds = strtod(argv[++i], &end);
			if (*end || !(seconds >= 0.1 && seconds <= 60)) {
				fprintf(stderr, "fusesched: calibrate: --seconds must be 0.1..60, got '%s'\n",
					argv[i]);
				return 2;
			}
		} else if (!dir && argv[i][0] != '-') {
			dir = argv[i];
		} else {
			fprintf(stderr, "fusesched: calibrate: unexpected argument '%s'\n"
					"usage: fusesched calibrate BACKING [--seconds S]\n", argv[i]);
			return 2;
		}
	}
	if (!dir) {
		fprintf(stderr, "fusesched: calibrate needs the backing directory\n"
				"usage: fusesched calibrate BACKING [--seconds S]\n");
		return 2;
	}
	struct calibrate_result r;
	char err[512];
	if (calibrate_store(dir, seconds, &r, err, sizeof(err)) < 0) {
		fprintf(stderr, "fusesched: calibrate: %s\n", err);
		return 1;
	}
	calibrate_print(dir, &r, stdout);
	return 0;
}
