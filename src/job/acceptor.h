/* SPDX-License-Identifier: MIT */
/*
 * Accepting authenticated connections on a listening socket so that no one
 * who lacks the job key can stall a rank: every accepted connection runs
 * its job-key handshake (auth.h) at the same time as the others, each
 * against its own short deadline, while accepting goes on. A connection
 * that fails its handshake or misses its deadline is closed and never
 * handed out; when more connections are half-open than the cap, the
 * oldest is dropped. So what a stranger can take from a rank does not grow
 * with the number of connections it opens, and is never taken from a rank
 * that connected meanwhile: a real rank's handshake finishes in a round
 * trip whatever else is pending. (Before, rank 0 handshook one connection
 * at a time, each for up to 10 s: three idle connections outlasted a 20 s
 * boot timeout.)
 *
 * A rank whose connection is dropped under a flood of half-open ones sees
 * the connection reset before its handshake finished, and connects again
 * (bootstrap.c, tcp_setup.c).
 *
 * Used by rank 0's rendezvous listener (also when it is the socket
 * xp_get_unique_id opened) and by the TCP transport's listener. One thread
 * at a time; functions return 0 or a negative errno.
 */
#ifndef XPI_ACCEPTOR_H
#define XPI_ACCEPTOR_H

#include <stdint.h>

#include "auth.h"

struct xpi_acceptor;

struct xpi_acceptor_opts {
	int lfd;                   /* listening and non-blocking; stays the caller's */
	struct xpi_auth_args auth; /* every connection's handshake */
	int handshake_ms;          /* each connection's own deadline, from its accept */
	int max_pending;           /* half-open connections kept (>= 1); the oldest go first */
	const char *who;           /* for messages, e.g. "rank 0" */
};

/* Creates an acceptor for @o (copied; @o->auth's key must outlive it).
 * Returns 0 and *@out, -EINVAL or -ENOMEM. */
int xpi_acceptor_create(const struct xpi_acceptor_opts *o, struct xpi_acceptor **out);

/*
 * Accepts and handshakes until one connection has passed its handshake, or
 * @deadline (clock.h nanoseconds; XPI_DEADLINE_NONE: none) passes. Returns
 * 0 with *@fd (non-blocking, now the caller's), *@peer (the rank it proved)
 * and, if the handshake expects data from the peer, its verified bytes in
 * @data; -ETIMEDOUT; or the errno of a failed accept or poll other than a
 * passing one (-EMFILE among them). Connections that fail are logged (the
 * first few at warning level, the rest only with XP_DEBUG=transport) and
 * closed here. Half-open connections stay pending for the next call.
 */
int xpi_acceptor_next(struct xpi_acceptor *a, int64_t deadline, int *fd, int *peer, uint8_t *data);

/* How many connections it refused so far (failed, timed out or dropped). */
unsigned long xpi_acceptor_refused(const struct xpi_acceptor *a);

/* Closes the connections still pending and frees @a; NULL is harmless.
 * The listening socket stays open. */
void xpi_acceptor_destroy(struct xpi_acceptor *a);

#endif
