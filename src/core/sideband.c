/* SPDX-License-Identifier: MIT */
/*
 * Sideband messages: a few bytes one transport carries for another between
 * the same two ranks (transport.h, sideband_send). An RDMA queue pair made
 * on first need trades its number this way, over the stream pair that
 * carries the peer's messages or watches it, as UCX's wire-up messages go
 * over an auxiliary transport. And the watcher of a pair made on first
 * need (a DPDK pair's TCP pair), made when that pair is. Endpoints' lanes
 * are chosen and made the same way, over their connection (ep.c).
 */
#include <errno.h>

#include "engine.h"
#include "transport.h"

int xpi_engine_sideband(xp_context_t *ctx, int peer, uint8_t type, const uint8_t *data, size_t len)
{
	/* Only a taker whose arrays hold the endpoint slots (ep.h) takes
	 * one from a slot: from any other, the message is broken. */
	if (type >= XPI_SIDEBAND_TYPES || ctx->sideband[type].take == NULL ||
	    (peer >= ctx->size && !ctx->sideband[type].slots))
		return -ENOENT;
	ctx->sideband[type].take(ctx->sideband[type].tl, peer, data, len);
	return 0;
}

/* The peer's transport that can carry for transport @from, or -1. */
static int carrier_of(const xp_context_t *ctx, int peer, int from)
{
	const struct xpi_peer *p = &ctx->peers[peer];
	if (p->tl_small != from && ctx->tls[p->tl_small].ops->sideband_send != NULL)
		return p->tl_small;
	if (p->tl_watch != XPI_NO_TL && p->tl_watch != from &&
	    ctx->tls[p->tl_watch].ops->sideband_send != NULL)
		return p->tl_watch;
	return -1;
}

int xpi_engine_sideband_send(xp_context_t *ctx, int peer, int from, uint8_t type, const void *data,
			     size_t len)
{
	int c = carrier_of(ctx, peer, from);
	if (c < 0)
		return -ENOTCONN;
	return ctx->tls[c].ops->sideband_send(ctx->tls[c].tl, peer, type, data, len);
}

void xpi_engine_watch_peer(xp_context_t *ctx, int peer)
{
	const struct xpi_peer *p = &ctx->peers[peer];
	if (p->tl_watch == XPI_NO_TL || ctx->tls[p->tl_watch].ops->peer_wanted == NULL)
		return;
	ctx->tls[p->tl_watch].ops->peer_wanted(ctx->tls[p->tl_watch].tl, peer);
}
