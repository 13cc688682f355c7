/* fusesched calibrate DIR: the backing store's cost model, measured.
 *
 * The scheduler bills a read or write by its time in flight unless the
 * store's cost model is given ([scheduler] read_cost, write_cost and
 * dsync_cost, as io.cost's linear model: 4 KiB random requests a second and
 * MB/s of large sequential ones, each with many requests at once; dsync:
 * writes of a descriptor opened with O_DSYNC, on the device when they
 * complete). On a store kept full
 * every request waits alike, so the time in flight holds the wait and small
 * requests beside large ones pay for it (docs/DESIGN.md section 9). This
 * measures the six numbers on a scratch file in DIR (unlinked at once,
 * O_DIRECT where the filesystem takes it) through io_uring, each the median
 * of CALIBRATE_ROUNDS rounds taken in turn with the others', so that a
 * moment of noise (another process, a flush) moves one round, not the
 * model, and the rounds' spread says how steady the store was.
 */
#ifndef FUSESCHED_CALIBRATE_H
#define FUSESCHED_CALIBRATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define CALIBRATE_FILE_BYTES (256u << 20)
#define CALIBRATE_SMALL_BYTES 4096u
#define CALIBRATE_SMALL_DEPTH 32u
#define CALIBRATE_LARGE_BYTES (1u << 20)
#define CALIBRATE_LARGE_DEPTH 8u
#define CALIBRATE_ROUNDS 3u
/* Rounds further apart than this (highest over lowest, percent) are named
 * in the printed comment: the store was not steady while measured. Not
 * less: a quiet virtual disk here moved 20-30% from round to round, which
 * the median absorbs. */
#define CALIBRATE_STEADY_PCT 150u

struct calibrate_measure {
	uint64_t median, low, high;	/* over the rounds */
};

struct calibrate_result {
	bool direct;			/* O_DIRECT (else the page cache was measured too) */
	double seconds;			/* each of the six measures, its rounds together */
	struct calibrate_measure read_iops, read_mb_per_s;	/* requests a second, MB/s */
	struct calibrate_measure write_iops, write_mb_per_s;
	struct calibrate_measure dsync_iops, dsync_mb_per_s;
};

/* 0, or a negative errno with err naming what failed and where. */
int calibrate_store(const char *dir, double seconds, struct calibrate_result *out, char *err,
		    size_t err_len);

/* The result as [scheduler] lines with comments, ready for a config file. */
void calibrate_print(const char *dir, const struct calibrate_result *r, FILE *out);

/* `fusesched calibrate DIR [--seconds S]`: exit status 0, 1 on a failure, 2 on usage. */
int calibrate_run(int argc, char **argv);

#endif
