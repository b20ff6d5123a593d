/* SPDX-License-Identifier: MIT */
/*
 * DPDK pair state made on first need (dpdk_peer_get), on real virtual
 * devices (tests/dpdk/job.sh bridge N): after xp_init no rank holds any
 * pair's state (no keys, no reliability windows) and no TCP pair to watch
 * a peer; a ring exchange (eager and rendezvous, checked) makes exactly
 * the state of the two neighbours, and the TCP pairs that watch them; no
 * other rank's, until the out-of-band gather at the end talks to the
 * tree's neighbours.
 *
 *   tests/dpdk/job.sh bridge 4 test_dpdk_pairs
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "dpdk/dpdk_tl.h"
#include "../ring_exchange.h"
#include "../tcp_test.h"
#include "../tl_job.h"

#define BIG (256u << 10)

static struct xpi_dpdk_tl *dpdk_of(xp_context_t *ctx)
{
	for (int i = 0; i < ctx->ntls; i++)
		if (strcmp(ctx->tls[i].ops->name, "dpdk") == 0)
			return ctx->tls[i].tl;
	T_FAIL("rank %d has no dpdk transport", ctx->rank);
}

static int made_with(const struct xpi_dpdk_tl *t, int rank)
{
	return t->peers[rank] != NULL;
}

static int ring_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int n = xp_size(ctx), me = xp_rank(ctx);
	struct xpi_dpdk_tl *t = dpdk_of(ctx);
	T_EQ(t->nmade, 0);
	T_EQ(tcp_of(ctx)->nlinked, 0);
	int right = (me + 1) % n, left = (me + n - 1) % n;
	t_ring_exchange(w, BIG);
	T_EQ(t->nmade, 2);
	T_CHECK(made_with(t, left) && made_with(t, right));
	/* The watchers follow from the next progress, as the peer's do. */
	double until = t_now_s() + 10;
	struct xpi_tcp *tcp = tcp_of(ctx);
	while (tcp_wstate(ctx, left) != TW_READY || tcp_wstate(ctx, right) != TW_READY) {
		T_CHECK(t_now_s() < until);
		(void)xp_progress(ctx);
	}
	T_EQ(tcp->nlinked, 2);
	fprintf(stderr, "   rank %d: dpdk pair state with ranks %d and %d only, of %d\n", me, left,
		right, n - 1);
	/* Everyone has counted before the gather of xp_finalize talks to
	 * the tree's neighbours. */
	t_ring_token_twice(w, 4);
	return 0;
}

int main(void)
{
	return tl_job_run("dpdk,tcp", 4, ring_body, 200);
}
