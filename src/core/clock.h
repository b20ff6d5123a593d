/* SPDX-License-Identifier: MIT */
/* Monotonic time for deadlines and benchmarks. CLOCK_MONOTONIC_RAW is not
 * slewed by NTP, so intervals measured with it are what the CPU saw. */
#ifndef XPI_CLOCK_H
#define XPI_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline int64_t xpi_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

#endif
