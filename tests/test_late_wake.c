/* SPDX-License-Identifier: MIT */
/*
 * A receiver that has gone to sleep wakes at once for a message that comes
 * late, over one transport, two processes: the sender waits 120 ms after a
 * barrier (the receiver spins for a millisecond, then sleeps), then sends.
 * Five times each: an eager message (8 B) and a rendezvous one (256 KiB,
 * whose announcement is what wakes the receiver). A sleep lasts at most
 * 50 ms (src/core/p2p.c), so a wake-up that never comes costs 25 ms on
 * average and one that works well under 1 ms: the median must be under
 * 10 ms. The payloads are checked.
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
		double late[ROUNDS];
		for (int k = 0; k < ROUNDS; k++) {
			int seed = s * 100 + k;
			T_OK(xp_oob_barrier(ctx));
			if (me == 0) {
				nanosleep(&(struct timespec){ .tv_nsec = SLEEP_MS * 1000000L },
					  NULL);
				fill(buf, sizes[s], seed);
				T_OK(xp_send(w, buf, sizes[s], peer, 3));
			} else {
				memset(buf, 0, sizes[s]);
				double t0 = t_now_s();
				T_OK(xp_recv(w, buf, sizes[s], peer, 3, XP_TAG_EXACT, NULL));
				late[k] = t_now_s() - t0 - SLEEP_MS / 1e3;
				T_CHECK(check(buf, sizes[s], seed) == 0);
			}
		}
		if (me == 1) {
			qsort(late, ROUNDS, sizeof(late[0]), cmp_double);
			fprintf(stderr,
				"   %zu B sent %d ms late: received %.1f to %.1f ms after, median "
				"%.1f\n",
				sizes[s], SLEEP_MS, late[0] * 1e3, late[ROUNDS - 1] * 1e3,
				late[ROUNDS / 2] * 1e3);
			T_CHECK(late[ROUNDS / 2] < 0.010);
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
