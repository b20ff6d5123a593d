/* SPDX-License-Identifier: MIT */
/*
 * RDMA pairs made on first need (src/rdma/rdma_wire.c), between processes
 * on a real device (the lab VM's soft-RoCE):
 *
 *   test_rdma_wire ring     XP_TRANSPORTS=rdma,tcp, 5 ranks: after xp_init
 *                           no rank has a queue pair or a tcp pair; a ring
 *                           exchange (eager and rendezvous, checked) makes
 *                           exactly the two with the neighbours (and
 *                           promises the shared receive queue their two
 *                           windows only), each
 *                           connected to the neighbour's own QP for us
 *                           (their numbers traded out of band afterwards),
 *                           and the tcp pairs that carried their numbers
 *   test_rdma_wire bulk     the same with XP_TRANSPORTS=tcp,rdma (messages
 *                           over tcp, payloads read over rdma): the first
 *                           rendezvous to a neighbour makes its pair
 *   test_rdma_wire crowd    4 ranks each send to every other at once,
 *                           eager and rendezvous, for several rounds, so
 *                           both ranks of each pair ask at the same moment:
 *                           every message arrives intact and in order, and
 *                           every pair ends with one QP each side, each
 *                           connected to the other's
 *   test_rdma_wire first    3 ranks: what the first message between ranks
 *                           1 and 2 costs (their QPs made and their numbers
 *                           traded over a tcp pair made for it) beside the
 *                           next ones, printed for the record (the
 *                           out-of-band barriers between rounds go through
 *                           rank 0, so they make no pair of 1 and 2)
 *   test_rdma_wire dead     rank 2 exits (no goodbye) before anyone talked
 *                           to it: rank 0's first send to it fails naming
 *                           rank 2, long before its deadline, and rank 0
 *                           still talks to rank 1
 *
 * Skips (77) where the host has no RDMA device.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"
#include "rdma/rdma_tl.h"
#include "mproc.h"
#include "pattern.h"
#include "ring_exchange.h"
#include "tcp_test.h"
#include "testutil.h"
#include "tl_job.h"

#define BIG (1u << 20)
#define CROWD_RANKS 4
#define CROWD_ROUNDS 3
#define CROWD_MSGS 6

/* The rank's rdma transport: it must carry the payloads to every peer. */
static struct xpi_rdma_tl *rdma_of(xp_context_t *ctx)
{
	for (int p = 0; p < ctx->size; p++) {
		if (p == ctx->rank)
			continue;
		const struct xpi_tl_slot *b = &ctx->tls[ctx->peers[p].tl_bulk];
		if (strcmp(b->ops->name, "rdma") != 0)
			T_FAIL("rank %d -> %d: payloads over %s, want rdma", ctx->rank, p,
			       b->ops->name);
	}
	return ctx->tls[ctx->peers[ctx->rank == 0 ? 1 : 0].tl_bulk].tl;
}

static int pairs_in(const struct xpi_rdma_tl *t, int state)
{
	int n = 0;
	for (int p = 0; p < t->ctx->size; p++)
		n += p != t->ctx->rank && t->peers[p].wstate == state;
	return n;
}

/* Pairs of the tcp transport made: its connections to the peer open. */
static int tcp_pairs(xp_context_t *ctx)
{
	return tcp_of(ctx)->nlinked;
}

/* Every rank's QP number for every peer (0: none), gathered out of band:
 * for the peers @which names (-1: all), rank p's QP for us must exist and
 * be the one ours is connected to. Others are not looked at: the gather
 * itself makes the pairs of the out-of-band tree, some before some ranks
 * took their numbers. */
static void check_connected_to_theirs(xp_context_t *ctx, const struct xpi_rdma_tl *t, int a, int b)
{
	int n = ctx->size, me = ctx->rank;
	uint32_t *mine = calloc((size_t)n, 4), *all = calloc((size_t)n * (size_t)n, 4);
	T_CHECK(mine != NULL && all != NULL);
	for (int p = 0; p < n; p++)
		mine[p] = t->peers[p].qp != NULL ? t->peers[p].qp->qp_num : 0;
	T_OK(xp_oob_allgather(ctx, mine, (size_t)n * 4, all));
	for (int p = 0; p < n; p++) {
		if (p == me || (a >= 0 && p != a && p != b))
			continue;
		T_CHECK(mine[p] != 0);
		uint32_t theirs = all[(size_t)p * (size_t)n + (size_t)me];
		if (theirs == 0 || theirs != t->peers[p].remote.qpn)
			T_FAIL("rank %d: our QP %u to rank %d is connected to its QP %u, but its "
			       "QP for us is %u",
			       me, t->peers[p].qp->qp_num, p, t->peers[p].remote.qpn, theirs);
	}
	free(mine);
	free(all);
}

static int ring_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int n = xp_size(ctx), me = xp_rank(ctx);
	struct xpi_rdma_tl *t = rdma_of(ctx);
	T_EQ(pairs_in(t, RW_UP) + pairs_in(t, RW_HALF) + pairs_in(t, RW_ASKED), 0);
	T_EQ(pairs_in(t, RW_IDLE), n - 1);
	T_EQ(t->nqpns, 0);
	T_EQ(tcp_pairs(ctx), 0);
	/* The shared receive queue is promised the windows of the pairs made
	 * only (its buffers are given up to XPI_RDMA_SRQ_TARGET at once). */
	T_EQ(t->srq_promised, XPI_RDMA_REPOST_BATCH);
	int right = (me + 1) % n, left = (me + n - 1) % n;
	t_ring_exchange(w, BIG);
	/* Our receive named the left neighbour, the right one's named us:
	 * both pairs are made, and no other. */
	double until = t_now_s() + 10;
	while (!t->peers[left].up || !t->peers[right].up) {
		T_CHECK(t_now_s() < until);
		(void)xp_progress(ctx);
	}
	T_EQ(pairs_in(t, RW_UP), 2);
	T_EQ(pairs_in(t, RW_IDLE), n - 3);
	T_EQ(t->nqpns, 2);
	T_EQ(tcp_pairs(ctx), 2); /* the carriers, which watch the neighbours now */
	T_EQ(t->srq_promised, XPI_RDMA_REPOST_BATCH + 2 * (t->window + 2));
	T_CHECK(t->srq_filled >= t->srq_promised);
	fprintf(stderr, "   rank %d: rdma pairs with ranks %d and %d only (QPs %u, %u)\n", me, left,
		right, t->peers[left].qp->qp_num, t->peers[right].qp->qp_num);
	/* Everyone has counted before anyone goes on to the gather, whose
	 * tree makes more pairs (a receive naming a peer makes its pair):
	 * a token around the ring, twice, over the pairs made already. */
	t_ring_token_twice(w, 4);
	check_connected_to_theirs(ctx, t, left, right);
	return 0;
}

static int crowd_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int n = xp_size(ctx), me = xp_rank(ctx);
	struct xpi_rdma_tl *t = rdma_of(ctx);
	static uint8_t out[CROWD_RANKS][CROWD_MSGS][BIG / 8], in[CROWD_RANKS][CROWD_MSGS][BIG / 8];
	for (int round = 0; round < CROWD_ROUNDS; round++) {
		xp_request_t *s[CROWD_RANKS][CROWD_MSGS], *r[CROWD_RANKS][CROWD_MSGS];
		/* Sends first, everyone at once: both sides of each pair ask. */
		for (int p = 0; p < n; p++)
			for (int i = 0; p != me && i < CROWD_MSGS; i++) {
				size_t len = i % 3 == 2 ? BIG / 8 : 48; /* some rendezvous */
				fill(out[p][i], len, (uint32_t)(me << 16 | round << 8 | i));
				T_OK(xp_isend(w, out[p][i], len, p, 2, &s[p][i]));
			}
		for (int p = 0; p < n; p++)
			for (int i = 0; p != me && i < CROWD_MSGS; i++)
				T_OK(xp_irecv(w, in[p][i], BIG / 8, p, 2, XP_TAG_EXACT, &r[p][i]));
		for (int p = 0; p < n; p++)
			for (int i = 0; p != me && i < CROWD_MSGS; i++) {
				xp_status_t st;
				T_OK(xp_wait(&s[p][i], XP_TIMEOUT_DEFAULT, NULL));
				T_OK(xp_wait(&r[p][i], XP_TIMEOUT_DEFAULT, &st));
				/* In order: the i-th message from p is its i-th. */
				T_EQ(st.length, (size_t)(i % 3 == 2 ? BIG / 8 : 48));
				T_OK(check(in[p][i], st.length,
					   (uint32_t)(p << 16 | round << 8 | i)));
			}
	}
	T_EQ(pairs_in(t, RW_UP), n - 1);
	T_EQ(t->nqpns, n - 1);
	check_connected_to_theirs(ctx, t, -1, -1);
	fprintf(stderr, "   rank %d: %d rdma pairs, %llu made on first need\n", me, t->nqpns,
		(unsigned long long)t->st_wired);
	T_EQ(t->st_wired, (uint64_t)(n - 1));
	return 0;
}

static int first_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), other = 3 - me;
	struct xpi_rdma_tl *t = rdma_of(ctx);
	double lat[8];
	for (int i = 0; i < 8; i++) {
		T_OK(xp_oob_barrier(ctx));
		if (me == 0)
			continue;
		if (i == 0)
			T_EQ(t->peers[other].wstate, RW_IDLE);
		uint64_t v = (uint64_t)i;
		double t0 = t_now_s();
		if (me == 1) {
			T_OK(xp_send(w, &v, sizeof(v), 2, 3));
			T_OK(xp_recv(w, &v, sizeof(v), 2, 3, XP_TAG_EXACT, NULL));
		} else {
			T_OK(xp_recv(w, &v, sizeof(v), 1, 3, XP_TAG_EXACT, NULL));
			T_OK(xp_send(w, &v, sizeof(v), 1, 3));
		}
		lat[i] = (t_now_s() - t0) * 1e6;
		T_EQ(v, (uint64_t)i);
		T_CHECK(t->peers[other].up);
	}
	if (me == 1)
		fprintf(stderr,
			"   rdma round trip with a new pair %.0f us, then %.0f %.0f %.0f us (the "
			"pair made by the first)\n",
			lat[0], lat[1], lat[2], lat[3]);
	return 0;
}

static int dead_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx);
	struct xpi_rdma_tl *t = rdma_of(ctx);
	/* No barrier here: the out-of-band tree's would make rank 0's pair
	 * with its child rank 2. */
	if (me == 2)
		_exit(0); /* no goodbye: as if killed (the kernel closes its fds) */
	if (me == 1) {
		char c;
		T_OK(xp_recv(w, &c, 1, 0, 1, XP_TAG_EXACT, NULL));
		T_EQ(c, 'y');
		return 0;
	}
	usleep(500000); /* rank 2 has left xp_init and is gone by now */
	T_EQ(t->peers[2].wstate, RW_IDLE);
	char c = 'x';
	double t0 = t_now_s();
	int rc = xp_send(w, &c, 1, 2, 1);
	double took = t_now_s() - t0;
	fprintf(stderr,
		"   rank 0: the first send to the dead rank 2 failed after %.3f s: %d (%s)\n", took,
		rc, xp_error_detail());
	T_CHECK(rc < 0 && rc != -ETIMEDOUT);
	T_CONTAINS(xp_error_detail(), "rank 2");
	c = 'y';
	T_OK(xp_send(w, &c, 1, 1, 1)); /* the others are not held up */
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s ring|bulk|crowd|first|dead\n", argv[0]);
		return 2;
	}
	if (getenv("XP_LAB") == NULL && access("/sys/class/infiniband", F_OK) != 0) {
		printf("SKIP: no RDMA device here (tests/rdma/in-lab.sh runs this in the lab VM)\n");
		return T_SKIP;
	}
	if (strcmp(argv[1], "ring") == 0)
		return tl_job_run("rdma,tcp", 5, ring_body, 200);
	if (strcmp(argv[1], "bulk") == 0)
		return tl_job_run("tcp,rdma", 5, ring_body, 200);
	if (strcmp(argv[1], "crowd") == 0)
		return tl_job_run("rdma,tcp", CROWD_RANKS, crowd_body, 300);
	if (strcmp(argv[1], "dead") == 0)
		return tl_job_run("rdma,tcp", 3, dead_body, 120);
	if (strcmp(argv[1], "first") == 0)
		return tl_job_run("rdma,tcp", 3, first_body, 120);
	fprintf(stderr, "usage: %s ring|bulk|crowd|first|dead\n", argv[0]);
	return 2;
}
