/* SPDX-License-Identifier: MIT */
/* Out-of-band barrier and allgather, and which transport serves a peer. */
#include <errno.h>

#include "compiler.h"
#include "engine.h"

XPI_EXPORT int xp_oob_barrier(xp_context_t *ctx)
{
	if (ctx == NULL)
		return -EINVAL;
	/* Messages sent before the barrier must not wait for it to end. */
	xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
	return ctx->oob_barrier(ctx);
}

XPI_EXPORT int xp_oob_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all)
{
	if (ctx == NULL || (len != 0 && (mine == NULL || all == NULL)))
		return -EINVAL;
	xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
	return ctx->oob_allgather(ctx, mine, len, all);
}

XPI_EXPORT int xp_route_get(xp_context_t *ctx, int peer, size_t size, xp_route_t *route)
{
	if (ctx == NULL || route == NULL || peer < 0 || peer >= ctx->size)
		return -EINVAL;
	/* Read without the owner token: these fields are set before the
	 * context is handed to the program and never change after. */
	const struct xpi_peer *p = &ctx->peers[peer];
	*route = (xp_route_t){
		.transport = ctx->tls[p->tl_small].ops->name,
		.protocol = size < p->rndv_threshold ? "eager" : "rndv",
		.rndv_threshold = p->rndv_threshold,
	};
	return 0;
}
