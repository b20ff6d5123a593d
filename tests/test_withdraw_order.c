/* SPDX-License-Identifier: MIT */
/*
 * A receive that meets a withdrawn rendezvous message keeps its place in
 * the posting order. Found by tests/test_conformance.c (seed 12345, shm
 * and tcp); this is its smallest form.
 *
 * Rank 0 sends D (1 MiB, tag 9), then A (1 MiB, tag 5) which it cancels
 * at once, then B and C (8 bytes each, tag 5), then a marker. Once rank 1
 * has the marker, all four are queued there. It posts R0 for D, then R1
 * and R2 for tag 5, back to back. A was withdrawn, so MPI's order says R1
 * gets B and R2 gets C.
 *
 * Over TCP, and over shared memory while another rendezvous from the same
 * sender is being streamed (D here), R1 learns that A was withdrawn only
 * later (the sender answers its CTS; the shm claim waits its turn behind
 * D). Meanwhile R1 is neither posted nor done, so R2, posted after it,
 * takes B; R1 is reposted afterwards and takes C. The in-process backend
 * decides the claim at once and gets it right.
 *
 * Usage: test_withdraw_order inproc|shm|tcp (shm and tcp are expected to
 * fail until the engine keeps such a receive's place).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xport/xport.h"
#include "run_over.h"
#include "pattern.h"
#include "testutil.h"

#define BIG (1u << 20) /* rendezvous on every transport */

static const char *transport;

static int sender(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	xp_route_t route;
	T_OK(xp_route_get(ctx, 1, BIG, &route));
	T_CHECK(strcmp(route.protocol, "rndv") == 0); /* the case under test */
	uint8_t *d = malloc(BIG), *a = malloc(BIG);
	T_CHECK(d != NULL && a != NULL);
	fill(d, BIG, 9);
	fill(a, BIG, 5);
	char b[8] = "B", c[8] = "C";
	int marker = 7;
	xp_request_t *rd, *ra, *rb, *rc, *rm;
	T_OK(xp_isend(w, d, BIG, 1, 9, &rd));
	T_OK(xp_isend(w, a, BIG, 1, 5, &ra));
	T_OK(xp_cancel(ra));
	T_EQ(xp_wait(&ra, 5000, NULL), -ECANCELED);
	T_OK(xp_isend(w, b, sizeof(b), 1, 5, &rb));
	T_OK(xp_isend(w, c, sizeof(c), 1, 5, &rc));
	T_OK(xp_isend(w, &marker, sizeof(marker), 1, 7, &rm));
	T_OK(xp_oob_barrier(ctx));
	T_OK(xp_wait(&rd, 10000, NULL));
	T_OK(xp_wait(&rb, 10000, NULL));
	T_OK(xp_wait(&rc, 10000, NULL));
	T_OK(xp_wait(&rm, 10000, NULL));
	T_OK(xp_oob_barrier(ctx));
	free(d);
	free(a);
	return 0;
}

static int receiver(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *d = malloc(BIG);
	T_CHECK(d != NULL);
	int marker = 0;
	/* Messages of one sender match in send order: with the marker here,
	 * D, A's announcement, B and C are queued. */
	T_OK(xp_recv(w, &marker, sizeof(marker), 0, 7, XP_TAG_EXACT, NULL));
	T_OK(xp_oob_barrier(ctx));
	char r1[8] = "", r2[8] = "";
	xp_request_t *q0, *q1, *q2;
	T_OK(xp_irecv(w, d, BIG, 0, 9, XP_TAG_EXACT, &q0));
	T_OK(xp_irecv(w, r1, sizeof(r1), 0, 5, XP_TAG_EXACT, &q1));
	T_OK(xp_irecv(w, r2, sizeof(r2), 0, 5, XP_TAG_EXACT, &q2));
	T_OK(xp_wait(&q0, 10000, NULL));
	T_OK(xp_wait(&q1, 10000, NULL));
	T_OK(xp_wait(&q2, 10000, NULL));
	T_OK(check(d, BIG, 9));
	fprintf(stderr, "   %s: R1 got %s, R2 got %s\n", transport, r1, r2);
	int bad = strcmp(r1, "B") != 0 || strcmp(r2, "C") != 0;
	if (bad)
		fprintf(stderr,
			"FAIL %s: R1, posted first, must get B (the first message not "
			"withdrawn) and R2 C\n",
			transport);
	T_OK(xp_oob_barrier(ctx));
	free(d);
	return bad;
}

static int rank_body(xp_context_t *ctx)
{
	return xp_rank(ctx) == 0 ? sender(ctx) : receiver(ctx);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s inproc|shm|tcp\n", argv[0]);
		return 2;
	}
	transport = argv[1];
	setenv("XP_LOG_LEVEL", "none", 1);
	return run_over(transport, rank_body);
}
