/* SPDX-License-Identifier: MIT */
/* Out-of-band barrier and allgather, and which transport serves a peer. */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "../inproc/job.h"
#include "bootstrap.h"
#include "clock.h"
#include "compiler.h"
#include "engine.h"

/* A sense-reversing barrier of a local job's threads; each waiter keeps
 * its rank's engine going, so messages still move while it waits. */
static int local_barrier(xp_context_t *ctx)
{
	struct xp_local_job *job = ctx->local_job;
	int gen = atomic_load(&job->oob_gen);
	if (atomic_fetch_add(&job->oob_count, 1) == job->n - 1) {
		atomic_store(&job->oob_count, 0);
		atomic_fetch_add(&job->oob_gen, 1);
		return 0;
	}
	int64_t deadline = xpi_now_ns() + (int64_t)ctx->cfg.timeout_ms * 1000000;
	unsigned spins = 0;
	while (atomic_load(&job->oob_gen) == gen) {
		xp_progress(ctx);
		if (++spins % 1024 == 0) {
			sched_yield();
			if (xpi_now_ns() > deadline)
				return -ETIMEDOUT; /* the job is broken from here on */
		}
	}
	return 0;
}

XPI_EXPORT int xp_oob_barrier(xp_context_t *ctx)
{
	if (ctx == NULL)
		return -EINVAL;
	if (ctx->boot != NULL)
		return xpi_boot_barrier(ctx->boot);
	return local_barrier(ctx);
}

XPI_EXPORT int xp_oob_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all)
{
	if (ctx == NULL || (len != 0 && (mine == NULL || all == NULL)))
		return -EINVAL;
	if (ctx->boot != NULL)
		return xpi_boot_allgather(ctx->boot, mine, len, all);
	/* Each rank shows where its bytes are, all copy, nobody leaves before
	 * everyone has copied. */
	struct xp_local_job *job = ctx->local_job;
	atomic_store(&job->oob_slots[ctx->rank], mine);
	int rc = local_barrier(ctx);
	for (int r = 0; rc == 0 && r < job->n; r++)
		memcpy((char *)all + (size_t)r * len, atomic_load(&job->oob_slots[r]), len);
	if (rc == 0)
		rc = local_barrier(ctx);
	return rc;
}

XPI_EXPORT int xp_route_get(xp_context_t *ctx, int peer, size_t size, xp_route_t *route)
{
	if (ctx == NULL || route == NULL || peer < 0 || peer >= ctx->size)
		return -EINVAL;
	/* Read without the owner token: these fields are set before the
	 * context is handed to the program and never change after. */
	const struct xpi_peer *p = &ctx->peers[peer];
	*route = (xp_route_t){
		.transport = ctx->tls[p->tl].ops->name,
		.protocol = size < p->rndv_threshold ? "eager" : "rndv",
		.rndv_threshold = p->rndv_threshold,
	};
	return 0;
}
