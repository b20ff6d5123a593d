/* SPDX-License-Identifier: MIT */
/*
 * A receiver that has gone to sleep wakes at once for a message that comes
 * late, over one transport, two processes: the sender waits 120 ms after a
 * barrier (the receiver spins for a millisecond, then sleeps), then sends.
 * Five times each: an eager message (8 B) and a rendezvous one (256 KiB,
 * whose announcement is what wakes the receiver). A sleep lasts at most
 * 50 ms (src/core/p2p.c), so a wake-up that never comes costs 25 ms on
 * average (a sender that never rang measured 31.9 ms here) and one that
 * works well under 1 ms. The median must be under 20 ms more than the
 * same message sent at once takes, measured first in the same run: under
 * TSan, beside other tests, a late 256 KiB rendezvous took 11.9 ms, its
 * wake-ups of both sides included.
 * The payloads are checked.
 *
 * Usage: test_late_wake shm|tcp [funneled]
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xport/xport.h"
#include "pattern.h"
#include "tl_job.h"

#define ROUNDS 5
#define SLEEP_MS 120
#define BIG ((size_t)256 << 10)

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static int rank_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), peer = 1 - me;
	uint8_t *buf = malloc(BIG);
	T_CHECK(buf != NULL);
	const size_t sizes[2] = { 8, BIG };
	for (int s = 0; s < 2; s++) {
		double took[2][ROUNDS]; /* [0]: sent at once, [1]: sent late */
		for (int l = 0; l < 2; l++) {
			long wait_ms = l == 0 ? 0 : SLEEP_MS;
			for (int k = 0; k < ROUNDS; k++) {
				int seed = s * 100 + l * 10 + k;
				T_OK(xp_oob_barrier(ctx));
				if (me == 0) {
					nanosleep(
						&(struct timespec){ .tv_nsec = wait_ms * 1000000L },
						NULL);
					fill(buf, sizes[s], seed);
					T_OK(xp_send(w, buf, sizes[s], peer, 3));
				} else {
					memset(buf, 0, sizes[s]);
					double t0 = t_now_s();
					T_OK(xp_recv(w, buf, sizes[s], peer, 3, XP_TAG_EXACT,
						     NULL));
					took[l][k] = t_now_s() - t0 - (double)wait_ms / 1e3;
					T_CHECK(check(buf, sizes[s], seed) == 0);
				}
			}
			if (me == 1)
				qsort(took[l], ROUNDS, sizeof(took[l][0]), cmp_double);
		}
		if (me == 1) {
			double base = took[0][ROUNDS / 2], late = took[1][ROUNDS / 2];
			fprintf(stderr,
				"   %zu B sent %d ms late: received %.1f to %.1f ms after, median "
				"%.1f; sent at once, median %.1f ms\n",
				sizes[s], SLEEP_MS, took[1][0] * 1e3, took[1][ROUNDS - 1] * 1e3,
				late * 1e3, base * 1e3);
			T_CHECK(late - base < 0.020);
		}
	}
	T_OK(xp_oob_barrier(ctx));
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: test_late_wake shm|tcp [funneled]\n");
		return 2;
	}
	setenv("XP_LOG_LEVEL", "none", 1);
	if (argc > 2 && strcmp(argv[2], "funneled") == 0)
		setenv("XP_THREAD_MODE", "funneled", 1);
	return tl_job_run(argv[1], 2, rank_body, 60);
}
