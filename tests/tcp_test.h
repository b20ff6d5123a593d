/* SPDX-License-Identifier: MIT */
/* What tests of the TCP transport reach inside it for. Needs XPORT_HAVE_TCP. */
#ifndef XP_TCP_TEST_H
#define XP_TCP_TEST_H

#include <liburing.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "tcp/tcp.h"
#include "tcp/tcp_setup.h"
#include "testutil.h"

/* The TCP transport of @ctx; fails the test if it has none. */
static inline struct xpi_tcp *tcp_of(xp_context_t *ctx)
{
	for (int i = 0; i < ctx->ntls; i++)
		if (ctx->tls[i].ops == &xpi_tcp_ops)
			return ctx->tls[i].tl;
	T_FAIL("rank %d has no TCP transport", ctx->rank);
}

/* Where @ctx's TCP pair with @peer stands: TW_IDLE if nothing of it was
 * ever made (its state is made on first need too). */
static inline int tcp_wstate(xp_context_t *ctx, int peer)
{
	const struct tcp_conn *c = tcp_conn_at(tcp_of(ctx), peer);
	return c != NULL ? c->wstate : TW_IDLE;
}

/*
 * Makes @ctx's TCP pair with @peer and returns once both its connections
 * exist, for a test that reaches into their sockets: pairs are made on
 * first need (tcp_wire.c), which a receive naming the peer is. The peer
 * must make progress meanwhile (any waiting call). Fails the test after
 * 10 s.
 */
static inline struct tcp_conn *tcp_pair_made(xp_context_t *ctx, int peer)
{
	struct tcp_conn *c = tcp_conn_get(tcp_of(ctx), peer);
	T_CHECK(c != NULL);
	xp_request_t *r;
	uint8_t none;
	/* A tag no test uses: cancelled once the pair is made. */
	T_OK(xp_irecv(xp_comm_world(ctx), &none, 1, peer, 0x7ffffff1u, XP_TAG_EXACT, &r));
	double until = t_now_s() + 10;
	while (c->wstate != TW_READY) {
		T_CHECK(!c->dead);
		T_CHECK(t_now_s() < until);
		(void)xp_progress(ctx);
	}
	T_OK(xp_cancel(r));
	(void)xp_wait(&r, 1000, NULL);
	return c;
}

/*
 * For a test's main(): the ranks it starts talk TCP (ranks of one host
 * would get shared memory), and the test exits with the skip code if this
 * host has no io_uring.
 */
static inline void tcp_test_require(void)
{
	setenv("XP_TRANSPORTS", "tcp", 1);
	struct io_uring ring;
	int rc = io_uring_queue_init(4, &ring, 0);
	if (rc < 0) {
		printf("SKIP: io_uring is not available here: %s\n", strerror(-rc));
		exit(T_SKIP);
	}
	io_uring_queue_exit(&ring);
}

#endif
