/* SPDX-License-Identifier: MIT */
/*
 * XP_THREAD_FUNNELED over TCP: the transport's io_uring is tied to the
 * thread of xp_init (SINGLE_ISSUER | DEFER_TASKRUN), whose ring fd does not
 * wake a sleeper; it sleeps on an eventfd and the sockets it reads. Two
 * processes:
 *
 *  - small and 1 MiB messages both ways arrive whole;
 *  - a rank whose other thread breaks the promise gets an error that names
 *    XP_THREAD_FUNNELED, not a hang.
 *
 * That such a sleeper wakes at once for a late message is test_late_wake's
 * (tcp funneled).
 *
 * Usage: test_funneled (one meson test).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "xport/xport.h"
#include "pattern.h"
#include "tl_job.h"

#define BIG (1u << 20)

struct stray {
	xp_context_t *ctx;
	int rc;
	char detail[256];
};

/* Another thread than xp_init's waits for a message from rank 0. */
static void *stray_thread(void *arg)
{
	struct stray *s = arg;
	int v = 0;
	s->rc = xp_recv(xp_comm_world(s->ctx), &v, sizeof(v), 0, 9, XP_TAG_EXACT, NULL);
	snprintf(s->detail, sizeof(s->detail), "%s", xp_error_detail());
	return NULL;
}

static int rank_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), peer = 1 - me;
	uint8_t *buf = malloc(BIG);
	T_CHECK(buf != NULL);

	/* Both ways, small and large. */
	for (int round = 0; round < 2; round++) {
		size_t len = round == 0 ? 8 : BIG;
		if (me == 0) {
			fill(buf, len, round);
			T_OK(xp_send(w, buf, len, peer, 1));
			memset(buf, 0, len);
			T_OK(xp_recv(w, buf, len, peer, 2, XP_TAG_EXACT, NULL));
			T_CHECK(check(buf, len, round + 10) == 0);
		} else {
			T_OK(xp_recv(w, buf, len, peer, 1, XP_TAG_EXACT, NULL));
			T_CHECK(check(buf, len, round) == 0);
			fill(buf, len, round + 10);
			T_OK(xp_send(w, buf, len, peer, 2));
		}
	}

	/* The promise broken: rank 1 receives from another thread. */
	T_OK(xp_oob_barrier(ctx));
	if (me == 1) {
		struct stray s = { .ctx = ctx };
		pthread_t th;
		T_CHECK(pthread_create(&th, NULL, stray_thread, &s) == 0);
		T_CHECK(pthread_join(th, NULL) == 0);
		fprintf(stderr, "   receive from another thread: %d (%s)\n", s.rc, s.detail);
		T_CHECK(s.rc < 0);
		T_CHECK(strstr(s.detail, "XP_THREAD_FUNNELED") != NULL);
	}
	/* No barrier after it: the broken promise failed rank 1's TCP peers,
	 * and the out-of-band barrier goes along the job's own links. */
	free(buf);
	return 0;
}

int main(void)
{
	setenv("XP_LOG_LEVEL", "none", 1);
	setenv("XP_THREAD_MODE", "funneled", 1);
	return tl_job_run("tcp", 2, rank_body, 60);
}
