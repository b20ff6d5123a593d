/* SPDX-License-Identifier: MIT */
/*
 * Timing and statistics shared by the benchmark programs (xport-perf,
 * sock-baseline, mpi-baseline, mpi-coll-baseline), so that they measure and report alike.
 */
#ifndef XP_PERF_UTIL_H
#define XP_PERF_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* CLOCK_MONOTONIC_RAW: not slewed by NTP. */
static inline int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* What one clock read costs, to say how much of a round trip it is. */
static inline double clock_cost_ns(void)
{
	enum { N = 10000 };
	int64_t t0 = now_ns(), t1 = t0;
	for (int i = 0; i < N; i++)
		t1 = now_ns();
	return (double)(t1 - t0) / N;
}

static inline int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of @n sorted values, @p in (0, 100]: the index
 * of the smallest k with k/n >= p. */
static inline size_t pct_index(size_t n, double p)
{
	size_t k = (size_t)((p / 100.0) * (double)n + 0.999999);
	return k == 0 ? 0 : (k > n ? n - 1 : k - 1);
}

/*
 * Collectives: how many timed calls a size gets, by the bytes of a call:
 * about 256 MiB in all, 20 to 1000 calls; and warmup calls, a tenth of
 * that, at least 5. xport-perf and mpi-coll-baseline plan alike, so that
 * their rows compare call for call.
 */
#define PERF_COLL_BYTES_BUDGET ((size_t)256 << 20)
#define PERF_COLL_MIN_ITERS 20
#define PERF_COLL_MAX_ITERS 1000

static inline long perf_coll_iters(size_t bytes)
{
	long by_bytes = bytes != 0 ? (long)(PERF_COLL_BYTES_BUDGET / bytes) : PERF_COLL_MAX_ITERS;
	return by_bytes < PERF_COLL_MIN_ITERS ? PERF_COLL_MIN_ITERS :
	       by_bytes > PERF_COLL_MAX_ITERS ? PERF_COLL_MAX_ITERS :
						by_bytes;
}

static inline long perf_coll_warmup(long iters)
{
	return iters / 10 > 5 ? iters / 10 : 5;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

#endif
