/* SPDX-License-Identifier: MIT */
/* What the rest of the library sees of the TCP transport. */
#ifndef XPI_TCP_SETUP_H
#define XPI_TCP_SETUP_H

#include "../core/engine.h"

struct xpi_boot;
struct xpi_tcp;

extern const struct xpi_tl_ops xpi_tcp_ops;

/*
 * Collective over the job that @boot formed: every rank calls it. Connects
 * this rank to the peers with @want[peer] set (two authenticated TCP
 * connections per pair; the selection is symmetric, so they want us too),
 * adds the transport to @ctx and makes it serve them. Blocks until done or
 * the context's timeout. Returns 0 or a negative code, having logged which
 * peer failed and why.
 */
int xpi_tcp_attach(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *want);

/*
 * The transport of a context that is not a job (xp_open): no peers but its
 * endpoints, whose listeners are made at @where's address. 0 or a
 * negative code.
 */
struct sockaddr_storage;
int xpi_tcp_open(xp_context_t *ctx, const struct sockaddr_storage *where);

void tcp_setup_destroy(struct xpi_tcp *t);

#endif
