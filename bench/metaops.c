/*
 * Metadata benchmark: create (with a small write), stat, restat (stat
 * again after a pause past a 1 s cache timeout: files untouched for a
 * while, as a build or a scan finds them), read (open, read the 1 KiB,
 * close: the first read since the create), reread (the same again: served
 * from the page cache where it is kept across opens) and unlink N files in
 * one directory; prints one line per phase: "<phase> <ops_per_s> <p99_us>".
 * The first stat follows the writes: the kernel asks for a file's
 * attributes again after writing it, whatever the timeouts.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void report(const char *phase, double *lat_us, int n, double total_us)
{
	qsort(lat_us, (size_t)n, sizeof(*lat_us), cmp_double);
	printf("%s %.0f %.1f\n", phase, n / (total_us / 1e6), lat_us[(int)(n * 0.99)]);
	fflush(stdout); /* as the phase ends: bench/run reads the daemon's CPU at each line */
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s DIR COUNT\n", argv[0]);
		return 2;
	}
	const char *dir = argv[1];
	int n = atoi(argv[2]);
	if (n <= 0) {
		fprintf(stderr, "metaops: COUNT must be a positive number, got '%s'\n", argv[2]);
		return 2;
	}
	double *lat = calloc((size_t)n, sizeof(*lat));
	char path[4096], data[1024], got[1024];
	memset(data, 'm', sizeof(data));
	const char *phases[] = {"create", "stat", "restat", "read", "reread", "unlink"};
	for (int phase = 0; phase < 6; phase++) {
		if (phase == 2)
			usleep(1500 * 1000);
		double start = now_us();
		for (int i = 0; i < n; i++) {
			snprintf(path, sizeof(path), "%s/f%06d", dir, i);
			double t0 = now_us();
			int ok;
			if (phase == 0) {
				int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
				ok = fd >= 0 && write(fd, data, sizeof(data)) == sizeof(data);
				if (fd >= 0)
					close(fd);
			} else if (phase == 1 || phase == 2) {
				struct stat st;
				ok = stat(path, &st) == 0;
			} else if (phase == 3 || phase == 4) {
				int fd = open(path, O_RDONLY);
				ok = fd >= 0 && read(fd, got, sizeof(got)) == sizeof(got) &&
				     memcmp(got, data, sizeof(got)) == 0;
				if (fd >= 0)
					close(fd);
			} else {
				ok = unlink(path) == 0;
			}
			if (!ok) {
				perror(path);
				return 1;
			}
			lat[i] = now_us() - t0;
		}
		report(phases[phase], lat, n, now_us() - start);
	}
	free(lat);
	return 0;
}
