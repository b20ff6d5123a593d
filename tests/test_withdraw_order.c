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
 * With "deadline", the same receive's wait has a 200 ms deadline while
 * the sender is busy for 1.5 s outside the library (between two barriers):
 * R0 is not waited for, R1 meets only the withdrawn A and must time out at
 * its deadline. Over TCP and shared memory it returns only when the sender
 * next runs its engine, 1.5 s later: the deadline passed, the cancel found
 * the receive away, and xp_wait then waits without a deadline
 * (src/core/p2p.c: once `cancelled` is set it never looks at the clock
 * again).
 *
 * Usage: test_withdraw_order inproc|shm|tcp [order|deadline] (shm and tcp
 * are expected to fail until the engine keeps such a receive's place and
 * a wait's deadline bounds it).
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xport/xport.h"
#include "pattern.h"
#include "testutil.h"
#include "tl_job.h"

#define BIG (1u << 20) /* rendezvous on every transport */

static const char *transport;
/* Static, not allocated: a failing run exits from anywhere, and a leak
 * report must not hide why. */
static uint8_t send_d[BIG], send_a[BIG], recv_d[BIG];
static bool deadline_mode;

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

static int deadline_receiver(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *d = recv_d;
	int marker = 0, v = 0;
	T_OK(xp_recv(w, &marker, sizeof(marker), 0, 7, XP_TAG_EXACT, NULL));
	T_OK(xp_oob_barrier(ctx));
	xp_request_t *q0, *q1;
	T_OK(xp_irecv(w, d, BIG, 0, 9, XP_TAG_EXACT, &q0));
	T_OK(xp_irecv(w, &v, sizeof(v), 0, 5, XP_TAG_EXACT, &q1));
	double t0 = now_ms();
	int rc = xp_wait(&q1, 200, NULL);
	double took = now_ms() - t0;
	fprintf(stderr,
		"   %s: a 200 ms wait for a receive that met only a withdrawn message "
		"returned %d (%s) after %.0f ms\n",
		transport, rc, xp_strerror(rc), took);
	int bad = rc != -ETIMEDOUT || took > 1000;
	if (bad)
		fprintf(stderr, "FAIL %s: expected -ETIMEDOUT within about 200 ms\n", transport);
	T_OK(xp_oob_barrier(ctx));
	T_OK(xp_wait(&q0, 10000, NULL));
	T_OK(check(d, BIG, 9));
	T_OK(xp_oob_barrier(ctx));
	return bad;
}

/* D, A withdrawn, B and C (not in deadline mode), the marker. In deadline
 * mode the sender is then busy outside the library between two barriers. */
static int sender(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *d = send_d, *a = send_a;
	fill(d, BIG, 9);
	fill(a, BIG, 5);
	char b[8] = "B", c[8] = "C";
	int marker = 7;
	xp_request_t *rd, *ra, *rb = NULL, *rc = NULL, *rm;
	T_OK(xp_isend(w, d, BIG, 1, 9, &rd));
	T_OK(xp_isend(w, a, BIG, 1, 5, &ra));
	T_OK(xp_cancel(ra));
	T_EQ(xp_wait(&ra, 5000, NULL), -ECANCELED);
	if (!deadline_mode) {
		T_OK(xp_isend(w, b, sizeof(b), 1, 5, &rb));
		T_OK(xp_isend(w, c, sizeof(c), 1, 5, &rc));
	}
	T_OK(xp_isend(w, &marker, sizeof(marker), 1, 7, &rm));
	T_OK(xp_oob_barrier(ctx));
	if (deadline_mode) {
		nanosleep(&(struct timespec){ .tv_sec = 1, .tv_nsec = 500000000 }, NULL);
		T_OK(xp_oob_barrier(ctx));
	}
	T_OK(xp_wait(&rd, 10000, NULL));
	T_OK(xp_wait(&rb, 10000, NULL));
	T_OK(xp_wait(&rc, 10000, NULL));
	T_OK(xp_wait(&rm, 10000, NULL));
	T_OK(xp_oob_barrier(ctx));
	return 0;
}

static int receiver(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *d = recv_d;
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
	return bad;
}

static int rank_body(xp_context_t *ctx)
{
	xp_route_t route;
	T_OK(xp_route_get(ctx, 1 - xp_rank(ctx), BIG, &route));
	T_CHECK(strcmp(route.protocol, "rndv") == 0);
	if (deadline_mode)
		return xp_rank(ctx) == 0 ? sender(ctx) : deadline_receiver(ctx);
	return xp_rank(ctx) == 0 ? sender(ctx) : receiver(ctx);
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3 ||
	    (argc == 3 && strcmp(argv[2], "order") != 0 && strcmp(argv[2], "deadline") != 0)) {
		fprintf(stderr, "usage: %s inproc|shm|tcp [order|deadline]\n", argv[0]);
		return 2;
	}
	transport = argv[1];
	deadline_mode = argc == 3 && strcmp(argv[2], "deadline") == 0;
	setenv("XP_LOG_LEVEL", "none", 1);
	/* Short: in deadline mode a failing run ends when a barrier gives up. */
	setenv("XP_TIMEOUT_MS", deadline_mode ? "3000" : "10000", 1);
	return tl_job_run(transport, 2, rank_body, 60);
}
