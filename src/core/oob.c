/* SPDX-License-Identifier: MIT */
/* Out-of-band barrier and allgather, and which transport serves a peer. */
#include <errno.h>

#include "compiler.h"
#include "engine.h"
#include "log.h"

XPI_EXPORT int xp_oob_barrier(xp_context_t *ctx)
{
	if (ctx == NULL)
		return xpi_fail(-EINVAL, "xp_oob_barrier: the context is NULL");
	/* Messages sent before the barrier must not wait for it to end. */
	xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
	return ctx->oob_barrier(ctx);
}

XPI_EXPORT int xp_oob_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all)
{
	if (ctx == NULL || (len != 0 && (mine == NULL || all == NULL)))
		return xpi_fail(-EINVAL, "xp_oob_allgather: %s is NULL",
				ctx == NULL  ? "the context" :
				mine == NULL ? "this rank's contribution" :
					       "the result buffer");
	xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
	return ctx->oob_allgather(ctx, mine, len, all);
}

void xpi_route_of(const xp_context_t *ctx, int peer, size_t size, xp_route_t *route)
{
	const struct xpi_peer *p = &ctx->peers[peer];
	*route = (xp_route_t){
		.transport = ctx->tls[p->tl_small].ops->name,
		.protocol = size < p->rndv_threshold ? "eager" : "rndv",
		.rndv_threshold = p->rndv_threshold,
		.payloads = ctx->tls[p->tl_bulk].ops->name,
	};
}

XPI_EXPORT int xp_route_get(xp_context_t *ctx, int peer, size_t size, xp_route_t *route)
{
	if (ctx == NULL || route == NULL)
		return xpi_fail(-EINVAL, "xp_route_get: %s is NULL",
				ctx == NULL ? "the context" : "the route pointer");
	if (peer < 0 || peer >= ctx->size)
		return xpi_fail(-EINVAL,
				"rank %d: xp_route_get: rank %d is not one of the job's %d",
				ctx->rank, peer, ctx->size);
	/* Read without the owner token: a rank's lanes are set before the
	 * context is handed to the program and never change after. */
	xpi_route_of(ctx, peer, size, route);
	return 0;
}
