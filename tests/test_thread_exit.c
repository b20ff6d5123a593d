/* SPDX-License-Identifier: MIT */
/*
 * A thread that drove the rank's engine may exit while what it submitted
 * is still under way. io_uring cancels a thread's requests when it exits,
 * and any thread that holds a rank's token submits the TCP transport's
 * reads and sends: the transport took those cancellations for its own and
 * dropped the read, so a matched rendezvous receive never got its payload
 * (thread_ops_tcp failed about one run in five).
 *
 * Rank 1: a thread posts the receive of a rendezvous message already
 * announced (so it sends the clear-to-send and arms the payload's read)
 * and exits. Rank 0 answers only after that thread is gone. The receive,
 * waited for by the main thread, must complete whole.
 *
 * Usage: test_thread_exit tcp|shm|tcp,shm
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xport/xport.h"
#include "pattern.h"
#include "tl_job.h"

#define BIG (1u << 20)

struct poster {
	xp_context_t *ctx;
	xp_comm_t *comm;
	uint8_t *buf;
	xp_request_t *req;
};

static void *post_and_exit(void *arg)
{
	struct poster *p = arg;
	T_OK(xp_irecv(p->comm, p->buf, BIG, 0, 1, XP_TAG_EXACT, &p->req));
	/* Drive the engine a little, as a thread does that tests its request. */
	for (int i = 0; i < 100; i++)
		xp_progress(p->ctx);
	return NULL; /* the thread ends: io_uring cancels what it submitted */
}

static int rank_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(BIG);
	T_CHECK(buf != NULL);
	int marker = 0;
	if (xp_rank(ctx) == 0) {
		fill(buf, BIG, 9);
		xp_request_t *r;
		T_OK(xp_isend(w, buf, BIG, 1, 1, &r));
		marker = 1;
		T_OK(xp_send(w, &marker, sizeof(marker), 1, 2));
		T_OK(xp_oob_barrier(ctx)); /* rank 1's thread has posted and exited */
		T_OK(xp_wait(&r, 10000, NULL));
	} else {
		/* The announcement is here once the marker sent after it is. */
		T_OK(xp_recv(w, &marker, sizeof(marker), 0, 2, XP_TAG_EXACT, NULL));
		struct poster p = { .ctx = ctx, .comm = w, .buf = buf };
		pthread_t t;
		T_EQ(pthread_create(&t, NULL, post_and_exit, &p), 0);
		pthread_join(t, NULL);
		T_OK(xp_oob_barrier(ctx));
		xp_status_t st;
		int rc = xp_wait(&p.req, 5000, &st);
		if (rc != 0)
			T_FAIL("receive posted by a thread that exited: %d (%s)", rc,
			       xp_error_detail());
		T_EQ(st.length, BIG);
		T_OK(check(buf, BIG, 9));
	}
	T_OK(xp_oob_barrier(ctx));
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s tcp|shm|tcp,shm\n", argv[0]);
		return 2;
	}
	setenv("XP_LOG_LEVEL", "none", 1);
	return tl_job_run(argv[1], 2, rank_body, 60);
}
