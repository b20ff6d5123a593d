/* SPDX-License-Identifier: MIT */
/*
 * A rendezvous send that times out is withdrawn; the next send on the same
 * tag must still reach a receive posted after both were announced. The
 * receive first takes the withdrawn announcement, is put back, and must
 * then look at the unexpected messages again: it once went back to the
 * posted queue only, and the second message waited there, unexpected, until
 * the receive timed out ("1 of them unexpected and still queued").
 *
 * Usage: test_withdraw inproc|shm|tcp (one meson test each).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "xport/xport.h"
#include "tl_job.h"
#include "pattern.h"
#include "testutil.h"

#define LEN (1u << 20) /* rendezvous on every transport */
#define TAG 5
#define TAG_AFTER 6

static const char *transport;

static int sender(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	xp_route_t route;
	T_OK(xp_route_get(ctx, 1, LEN, &route));
	T_CHECK(strcmp(route.protocol, "rndv") == 0); /* the case under test */
	uint8_t *a = malloc(LEN), *b = malloc(LEN);
	T_CHECK(a != NULL && b != NULL);
	fill(a, LEN, 1);
	fill(b, LEN, 2);
	xp_request_t *ra, *rb, *rc;
	T_OK(xp_isend(w, a, LEN, 1, TAG, &ra));
	/* Nobody receives yet: it times out and is withdrawn. */
	T_EQ(xp_wait(&ra, 50, NULL), -ETIMEDOUT);
	T_OK(xp_isend(w, b, LEN, 1, TAG, &rb));
	int marker = 42;
	T_OK(xp_isend(w, &marker, sizeof(marker), 1, TAG_AFTER, &rc));
	T_OK(xp_oob_barrier(ctx));
	T_OK(xp_wait(&rc, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_wait(&rb, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_oob_barrier(ctx));
	free(a);
	free(b);
	return 0;
}

static int receiver(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *in = malloc(LEN);
	T_CHECK(in != NULL);
	T_OK(xp_oob_barrier(ctx));
	/* Messages of one sender match in send order: once the marker sent
	 * after both announcements is here, so are they. */
	int marker = 0;
	T_OK(xp_recv(w, &marker, sizeof(marker), 0, TAG_AFTER, XP_TAG_EXACT, NULL));
	T_EQ(marker, 42);
	xp_request_t *r;
	xp_status_t st;
	T_OK(xp_irecv(w, in, LEN, 0, TAG, XP_TAG_EXACT, &r));
	int rc = xp_wait(&r, 5000, &st);
	if (rc < 0)
		T_FAIL("%s: receive after a withdrawn send: %s (%s)", transport, xp_strerror(rc),
		       xp_error_detail());
	T_EQ(st.length, LEN);
	T_OK(check(in, LEN, 2)); /* the second message, whole */
	T_OK(xp_oob_barrier(ctx));
	free(in);
	return 0;
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
	setenv("XP_LOG_LEVEL", "none", 1); /* the expected timeout is logged */
	return tl_job_run(transport, 2, rank_body, 60);
}
