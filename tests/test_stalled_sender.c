/* SPDX-License-Identifier: MIT */
/*
 * A receive that matched a rendezvous message still ends by its deadline
 * when the sender stops calling into xport before it sends the payload
 * (found by tests/test_conformance.c: the receive waited until the sender
 * next ran its engine, however long past its deadline). It ends with
 * -ETIMEDOUT and a text naming the sender; the payload, when it comes, is
 * dropped, and the stream between the two goes on intact.
 *
 * Rank 0 announces 1 MiB and then sleeps 3 s outside any xport call. Rank 1
 * receives it with a 300 ms deadline: -ETIMEDOUT well before rank 0 wakes.
 * Then rank 0's send completes (the payload went, to be dropped) and a
 * small message after it arrives whole.
 *
 * Usage: test_stalled_sender shm|tcp (one meson test each).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xport/xport.h"
#include "pattern.h"
#include "tl_job.h"

#define BIG (1u << 20)

static int rank_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(BIG);
	T_CHECK(buf != NULL);
	int v = 0;
	/* The pair is made first: pairs are made on first need, and a sender
	 * that stalls before its pair exists stalls its first message too
	 * (its announcement leaves at its next call). */
	int peer = 1 - xp_rank(ctx), hello = 0;
	if (xp_rank(ctx) == 0) {
		T_OK(xp_send(w, &hello, sizeof(hello), peer, 9));
		T_OK(xp_recv(w, &hello, sizeof(hello), peer, 9, XP_TAG_EXACT, NULL));
	} else {
		T_OK(xp_recv(w, &hello, sizeof(hello), peer, 9, XP_TAG_EXACT, NULL));
		T_OK(xp_send(w, &hello, sizeof(hello), peer, 9));
	}
	if (xp_rank(ctx) == 0) {
		fill(buf, BIG, 3);
		xp_request_t *r;
		T_OK(xp_oob_barrier(ctx)); /* rank 1's receive is posted */
		T_OK(xp_isend(w, buf, BIG, 1, 1, &r));
		/* The announcement is out; now stall outside xport. */
		nanosleep(&(struct timespec){ .tv_sec = 3 }, NULL);
		T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
		v = 42;
		T_OK(xp_send(w, &v, sizeof(v), 1, 2));
	} else {
		xp_request_t *r;
		T_OK(xp_irecv(w, buf, BIG, 0, 1, XP_TAG_EXACT, &r));
		T_OK(xp_oob_barrier(ctx));
		double t0 = t_now_s();
		int rc = xp_wait(&r, 300, NULL);
		double took = t_now_s() - t0;
		fprintf(stderr, "   receive from a stalled sender: %d after %.3f s (%s)\n", rc,
			took, xp_error_detail());
		T_EQ(rc, -ETIMEDOUT);
		T_CHECK(took < 2.0); /* by its deadline, not when the sender woke */
		T_CHECK(strstr(xp_error_detail(), "rank 0") != NULL);
		/* What follows on the stream is intact. */
		T_OK(xp_recv(w, &v, sizeof(v), 0, 2, XP_TAG_EXACT, NULL));
		T_EQ(v, 42);
	}
	T_OK(xp_oob_barrier(ctx));
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s shm|tcp\n", argv[0]);
		return 2;
	}
	setenv("XP_LOG_LEVEL", "none", 1);
	/* Streamed through shared memory's chunks, which need the sender: a
	 * payload copied by cross-memory attach arrives without it (test_shm
	 * cma-min). */
	setenv("XP_SHM_CMA_MIN", "2g", 1);
	return tl_job_run(argv[1], 2, rank_body, 60);
}
