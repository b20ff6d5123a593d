/* SPDX-License-Identifier: MIT */
/*
 * TCP pairs made on first need (src/tcp/tcp_wire.c), between real processes
 * on loopback:
 *  - ring:    after xp_init no rank has a pair, nor any pair's state; a
 *             ring exchange makes exactly the pairs with the two
 *             neighbours (the descriptors grow by their four sockets, the
 *             state is made for those two), and no other;
 *  - crowd:   every rank sends to every other at the same moment, so both
 *             ranks of every pair start connecting at once, several rounds:
 *             each pair ends with one set of connections on both sides,
 *             every message arrives intact and in order;
 *  - first:   the cost of the first message to a peer (connect, handshake,
 *             answer) beside the next ones, printed for the record.
 * Usage: test_tcp_on_demand ring|crowd|first
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"

#ifndef XPORT_HAVE_TCP
int main(void)
{
	printf("SKIP: this build has no TCP transport (liburing missing)\n");
	return T_SKIP;
}
#else
#include "tcp_test.h"

#define RANKS 6
#define CROWD_ROUNDS 4
#define CROWD_MSGS 8

/* Pairs of @ctx's TCP transport in state @s. */
static int pairs_in(xp_context_t *ctx, int s)
{
	int n = 0;
	for (int p = 0; p < ctx->size; p++)
		n += p != ctx->rank && tcp_wstate(ctx, p) == s;
	return n;
}

/* Pairs whose state @ctx's TCP transport made (on their first need). */
static int states_made(xp_context_t *ctx)
{
	struct xpi_tcp *t = tcp_of(ctx);
	int n = 0;
	for (int p = 0; p < ctx->size; p++)
		n += tcp_conn_at(t, p) != NULL;
	return n;
}

static int ring_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	int n = xp_size(ctx);
	T_EQ(pairs_in(ctx, TW_READY), 0);
	T_EQ(pairs_in(ctx, TW_IDLE), n - 1);
	T_EQ(states_made(ctx), 0);
	int fds0 = t_count_fds();
	int right = (rank + 1) % n, left = (rank + n - 1) % n;
	for (int round = 0; round < 3; round++) {
		uint64_t out = (uint64_t)rank << 8 | (uint64_t)round, in = 0;
		xp_request_t *r;
		T_OK(xp_irecv(w, &in, sizeof(in), left, 1, XP_TAG_EXACT, &r));
		T_OK(xp_send(w, &out, sizeof(out), right, 1));
		T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
		T_EQ(in, (uint64_t)left << 8 | (uint64_t)round);
	}
	/* Our receive named the left neighbour, and the right one's named us:
	 * both pairs are made (or being made by the other side), no other. */
	double until = t_now_s() + 10;
	while (tcp_wstate(ctx, left) != TW_READY || tcp_wstate(ctx, right) != TW_READY) {
		T_CHECK(t_now_s() < until);
		(void)xp_progress(ctx);
	}
	T_EQ(pairs_in(ctx, TW_READY), 2);
	T_EQ(pairs_in(ctx, TW_IDLE), n - 3);
	T_EQ(states_made(ctx), 2); /* and no other pair's state */
	int fds1 = t_count_fds();
	fprintf(stderr, "   rank %d: %d descriptors after xp_init, %d after the ring\n", rank, fds0,
		fds1);
	T_EQ(fds1, fds0 + 4); /* two sockets per neighbour */
	/* Everyone has counted before anyone finalizes (whose barrier makes
	 * the pairs of the out-of-band tree): a token around the ring, twice,
	 * over the pairs made already. */
	t_ring_token_twice(w, 4);
	/* No count from here: ranks that passed the token on may already be
	 * in xp_finalize, making the tree's pairs with us. */
	xp_finalize(ctx);
	return 0;
}

static int crowd_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	int n = xp_size(ctx);
	for (int round = 0; round < CROWD_ROUNDS; round++) {
		xp_request_t *s[RANKS][CROWD_MSGS], *r[RANKS][CROWD_MSGS];
		uint64_t in[RANKS][CROWD_MSGS], out[RANKS][CROWD_MSGS];
		/* Sends first, everyone at once: both sides of each pair start. */
		for (int p = 0; p < n; p++)
			for (int i = 0; p != rank && i < CROWD_MSGS; i++) {
				out[p][i] =
					(uint64_t)rank << 32 | (uint64_t)round << 16 | (uint64_t)i;
				T_OK(xp_isend(w, &out[p][i], sizeof(out[p][i]), p, 2, &s[p][i]));
			}
		for (int p = 0; p < n; p++)
			for (int i = 0; p != rank && i < CROWD_MSGS; i++)
				T_OK(xp_irecv(w, &in[p][i], sizeof(in[p][i]), p, 2, XP_TAG_EXACT,
					      &r[p][i]));
		for (int p = 0; p < n; p++)
			for (int i = 0; p != rank && i < CROWD_MSGS; i++) {
				T_OK(xp_wait(&s[p][i], XP_TIMEOUT_DEFAULT, NULL));
				T_OK(xp_wait(&r[p][i], XP_TIMEOUT_DEFAULT, NULL));
				/* In order: the i-th message from p is its i-th. */
				T_EQ(in[p][i],
				     (uint64_t)p << 32 | (uint64_t)round << 16 | (uint64_t)i);
			}
	}
	T_EQ(pairs_in(ctx, TW_READY), n - 1);
	/* One set of connections per pair: four sockets per peer beyond what
	 * the rank held before would mean both attempts were kept. */
	struct xpi_tcp *t = tcp_of(ctx);
	for (int p = 0; p < n; p++)
		if (p != rank)
			T_CHECK(t->conns[p]->w_ctl < 0 && t->conns[p]->w_bulk < 0);
	T_EQ(t->nlinked, n - 1);
	xp_finalize(ctx);
	return 0;
}

static int first_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint64_t v = 0;
	double lat[8];
	for (int i = 0; i < 8; i++) {
		T_OK(xp_oob_barrier(ctx));
		double t0 = t_now_s();
		if (rank == 0) {
			T_OK(xp_send(w, &v, sizeof(v), 1, 3));
			T_OK(xp_recv(w, &v, sizeof(v), 1, 3, XP_TAG_EXACT, NULL));
		} else {
			T_OK(xp_recv(w, &v, sizeof(v), 0, 3, XP_TAG_EXACT, NULL));
			T_OK(xp_send(w, &v, sizeof(v), 0, 3));
		}
		lat[i] = (t_now_s() - t0) * 1e6;
	}
	if (rank == 0)
		fprintf(stderr,
			"   round trip with a new pair %.0f us, then %.0f %.0f %.0f us (the pair "
			"made by the first)\n",
			lat[0], lat[1], lat[2], lat[3]);
	T_EQ(pairs_in(ctx, TW_READY), 1);
	xp_finalize(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_tcp_on_demand ring|crowd|first\n");
		return 2;
	}
	tcp_test_require();
	if (strcmp(argv[1], "ring") == 0)
		T_EQ(mproc_run(RANKS, ring_body, NULL, 90, NULL, NULL), 0);
	else if (strcmp(argv[1], "crowd") == 0)
		T_EQ(mproc_run(RANKS, crowd_body, NULL, 120, NULL, NULL), 0);
	else if (strcmp(argv[1], "first") == 0)
		T_EQ(mproc_run(2, first_body, NULL, 60, NULL, NULL), 0);
	else
		T_FAIL("no section %s", argv[1]);
	printf("PASS %s\n", argv[1]);
	return 0;
}
#endif
