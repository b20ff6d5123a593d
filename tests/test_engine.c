/* SPDX-License-Identifier: MIT */
/*
 * Engine mechanisms that the in-process transport never exercises by
 * itself: restoring send order when a backend delivers a peer's messages
 * out of order or twice (as a lossy datagram path or several lanes will),
 * and handing user registrations to the backends' hooks.
 */
#include <errno.h>
#include <stdlib.h>

#include "core/engine.h"
#include "inproc/job.h"
#include "xport/xport.h"
#include "testutil.h"

/* Delivers an inline message from rank 0 to @ctx as a backend would. */
static void deliver(xp_context_t *ctx, uint32_t peer_seq, int value)
{
	struct xpi_msg m = {
		.u.key = { .comm = 0, .src = 0, .tag = 77 },
		.kind = XPI_MSG_INLINE,
		.peer_seq = peer_seq,
		.len = sizeof(value),
		.data = &value,
	};
	T_CHECK(xpi_owner_try_acquire(ctx));
	xpi_engine_deliver(ctx, &m);
	xpi_owner_release(ctx);
}

static void test_out_of_order_delivery(void)
{
	xp_local_job_t *job;
	xp_context_t *ctx;
	setenv("XP_LOG_LEVEL", "none", 1);
	T_OK(xp_local_job_create(2, NULL, &job));
	T_OK(xp_local_job_context(job, 1, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	/* Sequence numbers 3, 1, 0, 1 (duplicate), 2 carry values 30, 10, 0, 99, 20. */
	deliver(ctx, 3, 30);
	deliver(ctx, 1, 10);
	xp_stats_t s;
	T_OK(xp_stats_get(ctx, &s));
	T_EQ(s.unexpected_now, 0); /* held back: nothing before them has come */
	deliver(ctx, 0, 0);
	deliver(ctx, 1, 99); /* a duplicate: dropped */
	deliver(ctx, 2, 20);
	T_OK(xp_stats_get(ctx, &s));
	T_EQ(s.unexpected_now, 4);
	for (int i = 0; i < 4; i++) {
		int v = -1;
		xp_status_t st;
		T_OK(xp_recv(w, &v, sizeof(v), XP_ANY_SOURCE, 0, XP_TAG_ANY, &st));
		T_EQ(v, i * 10); /* send order, not arrival order */
	}
	int v;
	xp_request_t *r;
	T_OK(xp_irecv(w, &v, sizeof(v), 0, 77, XP_TAG_EXACT, &r));
	T_EQ(xp_wait(&r, 50, NULL), -ETIMEDOUT); /* the duplicate is gone */
	/* Credit came back once for each of the five, duplicate included. */
	T_EQ(ctx->peers[0].eager_returned, 5 * xpi_eager_cost(sizeof(int)));
	xp_local_job_destroy(job);
	unsetenv("XP_LOG_LEVEL");
}

static void test_registration_reaches_backend(void)
{
	xp_local_job_t *job;
	xp_context_t *c0, *c1;
	T_OK(xp_local_job_create(2, NULL, &job));
	T_OK(xp_local_job_context(job, 0, &c0));
	T_OK(xp_local_job_context(job, 1, &c1));
	struct xpi_inproc *tl = c0->tls[0].tl;
	/* The pool was registered at creation, once per region. */
	int64_t base = atomic_load(&tl->regs_live);
	T_EQ(base, XPI_POOL_NCLASSES);

	enum { LEN = 1 << 20 };
	uint8_t *buf = malloc(2 * LEN);
	memset(buf, 0x5a, 2 * LEN);
	xp_mem_t *mem;
	T_OK(xp_mem_register(c0, buf, 2 * LEN, &mem));
	T_EQ(atomic_load(&tl->regs_live), base + 1);

	/* A rendezvous send from inside the registration uses it. */
	xp_request_t *s, *r;
	uint8_t *in = malloc(LEN);
	T_OK(xp_isend(xp_comm_world(c0), buf + 4096, LEN, 1, 1, &s));
	T_OK(xp_irecv(xp_comm_world(c1), in, LEN, 0, 1, XP_TAG_EXACT, &r));
	T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(atomic_load(&tl->rts_registered), 1);
	T_EQ(in[0], 0x5a);
	T_EQ(in[LEN - 1], 0x5a);
	/* One that is not inside it does not. */
	uint8_t *other = malloc(LEN);
	memset(other, 1, LEN);
	T_OK(xp_isend(xp_comm_world(c0), other, LEN, 1, 2, &s));
	T_OK(xp_recv(xp_comm_world(c1), in, LEN, 0, 2, XP_TAG_EXACT, NULL));
	T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(atomic_load(&tl->rts_registered), 1);

	xp_mem_deregister(mem);
	xp_progress(c0);
	T_EQ(atomic_load(&tl->regs_live), base);
	free(buf);
	free(in);
	free(other);
	xp_local_job_destroy(job);
}

int main(void)
{
	T_RUN(test_out_of_order_delivery);
	T_RUN(test_registration_reaches_backend);
	return 0;
}
