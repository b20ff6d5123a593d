/* SPDX-License-Identifier: MIT */
/*
 * Zero-byte messages that go by rendezvous over shared memory (the eager
 * credit is spent, so the sender announces them): each must complete on
 * both sides, also many in a row. A receiver used to finish such a
 * message at once and claim the next in the same one-word mailbox before
 * the sender had read the first, so that send never completed.
 */
#include <stdlib.h>

#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"

#define N 200

static int body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	xp_route_t route;
	T_OK(xp_route_get(ctx, 1 - rank, 0, &route));
	T_CHECK(strcmp(route.transport, "shm") == 0);
	if (rank == 0) {
		xp_request_t *r[N];
		for (int i = 0; i < N; i++)
			T_OK(xp_isend(w, NULL, 0, 1, 7, &r[i]));
		T_OK(xp_oob_barrier(ctx)); /* all announced: now rank 1 receives */
		for (int i = 0; i < N; i++)
			T_OK(xp_wait(&r[i], XP_TIMEOUT_DEFAULT, NULL));
		xp_stats_t s;
		T_OK(xp_stats_get(ctx, &s));
		fprintf(stderr, "   %llu of %d zero-byte sends went by rendezvous\n",
			(unsigned long long)s.rndv_sends, N);
		T_CHECK(s.rndv_sends > 1); /* the case under test really ran */
	} else {
		T_OK(xp_oob_barrier(ctx)); /* all announced before any receive */
		for (int i = 0; i < N; i++) {
			xp_status_t st;
			T_OK(xp_recv(w, NULL, 0, 0, 7, XP_TAG_EXACT, &st));
			T_EQ(st.length, 0);
		}
	}
	xp_finalize(ctx);
	return 0;
}

static void env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_TRANSPORTS", "shm", 1);
	setenv("XP_UNEXPECTED_MAX_BYTES", "256", 1); /* 128 B of credit per sender */
	setenv("XP_TIMEOUT_MS", "10000", 1);
}

int main(void)
{
	T_EQ(mproc_run(2, body, NULL, 60, env, NULL), 0);
	return 0;
}
