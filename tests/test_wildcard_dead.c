/* SPDX-License-Identifier: MIT */
/*
 * An XP_ANY_SOURCE receive and lost peers (the rule in xport.h, at
 * xp_irecv): while some other rank lives, a wildcard receive stays posted
 * (that rank may still send what it waits for); once every other rank is
 * lost, it fails with the peer-failure error naming them, at once, not at
 * its deadline.
 *
 * Three ranks. Rank 0 posts a wildcard receive, rank 1 dies: the receive
 * stays and takes what rank 2 sends next. Rank 0 posts another, rank 2
 * dies: that one fails, naming ranks 1 and 2, long before its deadline.
 *
 * Usage: test_wildcard_dead shm|tcp (one meson test each).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"

#define DEADLINE_MS 20000

static const char *transport;

static int rank0(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int first = 0, second = 0, probe;
	xp_request_t *wild1, *wild2, *from1;
	xp_status_t st;
	T_OK(xp_irecv(w, &first, sizeof(first), XP_ANY_SOURCE, 3, XP_TAG_EXACT, &wild1));
	T_OK(xp_oob_barrier(ctx)); /* the receive is posted: rank 1 dies now */
	/* Learn that rank 1 is gone from a receive that names it. */
	T_OK(xp_irecv(w, &probe, sizeof(probe), 1, 4, XP_TAG_EXACT, &from1));
	int rc = xp_wait(&from1, DEADLINE_MS, NULL);
	if (rc != -ECONNRESET)
		T_FAIL("receive from dead rank 1: %d (%s)", rc, xp_error_detail());
	/* The wildcard receive is still posted: rank 2 lives. */
	T_EQ(xp_test(&wild1, NULL), 0);
	int go = 1;
	T_OK(xp_send(w, &go, sizeof(go), 2, 5));
	T_OK(xp_wait(&wild1, DEADLINE_MS, &st));
	T_EQ(st.source, 2);
	T_EQ(first, 22);
	/* Now rank 2 dies too: nobody is left who could send. */
	T_OK(xp_irecv(w, &second, sizeof(second), XP_ANY_SOURCE, 3, XP_TAG_EXACT, &wild2));
	double t0 = t_now_s();
	rc = xp_wait(&wild2, DEADLINE_MS, NULL);
	double took = t_now_s() - t0;
	const char *why = xp_error_detail();
	fprintf(stderr, "   %s: wildcard receive ended after %.3f s: %d (%s)\n", transport, took,
		rc, why);
	T_EQ(rc, -ECONNRESET);
	T_CHECK(took < DEADLINE_MS / 2000.0);
	T_CHECK(strstr(why, "any rank") != NULL);
	T_CHECK(strstr(why, "ranks 1, 2") != NULL);
	/* And one posted after that fails at once. */
	T_OK(xp_irecv(w, &second, sizeof(second), XP_ANY_SOURCE, 3, XP_TAG_EXACT, &wild2));
	T_EQ(xp_wait(&wild2, DEADLINE_MS, NULL), -ECONNRESET);
	return 0;
}

static int body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_route_t route;
	T_OK(xp_route_get(ctx, rank == 0 ? 1 : 0, 0, &route));
	if (strcmp(route.transport, transport) != 0)
		T_FAIL("served by %s, not %s", route.transport, transport);
	if (rank == 0) {
		int rc = rank0(ctx);
		xp_finalize(ctx); /* the others are gone: warns, returns */
		return rc;
	}
	T_OK(xp_oob_barrier(ctx));
	if (rank == 1)
		_exit(0); /* dies without a word */
	int go, v = 22;
	T_OK(xp_recv(xp_comm_world(ctx), &go, sizeof(go), 0, 5, XP_TAG_EXACT, NULL));
	T_OK(xp_send(xp_comm_world(ctx), &v, sizeof(v), 0, 3));
	_exit(0);
}

static void env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_TRANSPORTS", transport, 1);
	setenv("XP_TIMEOUT_MS", "5000", 1);
	setenv("XP_LOG_LEVEL", "none", 1);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s shm|tcp\n", argv[0]);
		return 2;
	}
	transport = argv[1];
	return mproc_run(3, body, NULL, 60, env, NULL) == 0 ? 0 : 1;
}
