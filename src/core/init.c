/* SPDX-License-Identifier: MIT */
/*
 * xp_init and xp_finalize: forming this process's rank of a job from the
 * launcher's environment and starting the transports that serve it. With
 * no launcher variables (or a job size of 1) the rank is a job of its own,
 * as MPI's singletons are.
 */
#include <errno.h>
#include <stdlib.h>

#include "../inproc/inproc.h"
#include "../inproc/job.h"
#ifdef XPORT_HAVE_TCP
#include "../tcp/tcp_setup.h"
#endif
#include "bootstrap.h"
#include "compiler.h"
#include "engine.h"
#include "log.h"
#include "self.h"

static int init_singleton(const struct xpi_config *cfg, xp_context_t **out)
{
	xp_local_job_t *job;
	int rc = xpi_local_job_create(1, cfg, &job);
	if (rc < 0)
		return rc;
	job->ctxs[0]->owned_by_job = false; /* xp_finalize destroys the job */
	*out = job->ctxs[0];
	return 0;
}

static void destroy_networked(xp_context_t *ctx)
{
	xpi_context_teardown(ctx);
	for (int i = ctx->ntls - 1; i >= 0; i--)
		ctx->tls[i].ops->destroy(ctx->tls[i].tl);
	xpi_boot_destroy(ctx->boot);
	xpi_context_destroy(ctx);
}

static int init_networked(const struct xpi_config *cfg, struct xpi_boot *boot, xp_context_t **out)
{
#ifndef XPORT_HAVE_TCP
	(void)cfg;
	xpi_log(XPI_LOG_ERROR,
		"xp_init: the job has %d ranks but this build has no network transport "
		"(liburing was not found when it was built)",
		xpi_boot_size(boot));
	xpi_boot_destroy(boot);
	return -EPROTONOSUPPORT;
#else
	xp_context_t *ctx;
	int rc = xpi_context_create(xpi_boot_rank(boot), xpi_boot_size(boot), cfg, &ctx);
	if (rc < 0) {
		xpi_boot_destroy(boot);
		return rc;
	}
	ctx->boot = boot;
	ctx->oob_barrier = xpi_oob_boot_barrier;
	ctx->oob_allgather = xpi_oob_boot_allgather;
	rc = xpi_self_attach(ctx);
	if (rc == 0)
		rc = xpi_tcp_attach(ctx, boot);
	if (rc < 0) {
		destroy_networked(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
#endif
}

XPI_EXPORT int xp_init(const xp_config_t *cfg, xp_context_t **ctx)
{
	struct xpi_config icfg;
	if (ctx == NULL)
		return -EINVAL;
	int rc = xpi_config_resolve(cfg, &icfg);
	if (rc < 0)
		return rc;
	struct xpi_boot *boot;
	rc = xpi_boot_create(icfg.timeout_ms, &boot);
	if (rc < 0)
		return rc;
	if (rc == 1)
		return init_singleton(&icfg, ctx);
	return init_networked(&icfg, boot, ctx);
}

XPI_EXPORT void xp_finalize(xp_context_t *ctx)
{
	if (ctx == NULL || ctx->owned_by_job)
		return;
	if (ctx->boot == NULL) {
		xp_local_job_destroy(ctx->local_job);
		return;
	}
	/* Everyone stops sending before anyone closes: a rank that finalizes
	 * early must not look like a dead peer to the others. Bounded by the
	 * bootstrap's timeout if some rank never gets here. */
	int rc = xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
	if (rc == 0)
		rc = xpi_boot_barrier(ctx->boot);
	if (rc < 0)
		xpi_log(XPI_LOG_WARN, "rank %d: xp_finalize: not every rank reached it: %s",
			ctx->rank, xp_strerror(rc));
	destroy_networked(ctx);
}
