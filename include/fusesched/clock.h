/* The one clock for durations and deadlines: CLOCK_MONOTONIC in nanoseconds. */
#ifndef FUSESCHED_CLOCK_H
#define FUSESCHED_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

#endif
