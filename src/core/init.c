/* SPDX-License-Identifier: MIT */
/*
 * xp_init and xp_finalize: forming this process's rank of a job from the
 * launcher's environment and starting the transports that serve it. With
 * no launcher variables (or a job size of 1) the rank is a job of its own,
 * as MPI's singletons are.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../inproc/inproc.h"
#include "../inproc/job.h"
#include "../shm/shm.h"
#ifdef XPORT_HAVE_TCP
#include "../tcp/tcp_setup.h"
#endif
#include "bootstrap.h"
#include "card.h"
#include "select.h"
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

/* This rank's capability card: what it has and how to reach it. The cost
 * figures are this machine's measurements (shared/lab/BASELINES.md). */
static int make_card(xp_context_t *ctx, struct xpi_boot *boot, struct xpi_card *c)
{
	memset(c, 0, sizeof(*c));
	c->rank = (uint32_t)ctx->rank;
	xpi_card_host_id(c->host);
	c->tl[c->ntl++] = (struct xpi_card_tl){
		.type = XPI_TL_SHM, .lat_ns = 150, .bw_mbps = 12000, .caps = XPI_CAP_ZCOPY
	};
#ifdef XPORT_HAVE_TCP
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (xpi_boot_local_addr(boot, &ss, &len) == 0) {
		struct xpi_card_tl *t = &c->tl[c->ntl++];
		*t = (struct xpi_card_tl){ .type = XPI_TL_TCP, .lat_ns = 5000, .bw_mbps = 4000 };
		t->reach[0] = (uint8_t)ss.ss_family;
		t->reach_len = 1;
	}
#else
	(void)boot;
#endif
	const char *env = getenv("XP_TRANSPORTS");
	if (env != NULL && *env != '\0') {
		const char *why = "";
		if (xpi_transports_parse(env, c->allowed, &c->nallowed, &why) < 0) {
			char text[256];
			snprintf(text, sizeof(text), "rank %d: XP_TRANSPORTS=%s: %s", ctx->rank,
				 env, why);
			xpi_log(XPI_LOG_ERROR, "%s", text);
			xpi_set_thread_detail(text);
			return -EINVAL;
		}
	}
	return 0;
}

/* Exchanges cards and picks each peer's transport with the pure selection
 * both sides compute alike; writes the chosen type per peer into @lane. */
static int negotiate(xp_context_t *ctx, struct xpi_boot *boot, uint8_t *lane)
{
	int n = ctx->size;
	struct xpi_card mine, theirs;
	uint8_t *blob = malloc(XPI_CARD_WIRE_MAX), *all = malloc((size_t)n * XPI_CARD_WIRE_MAX);
	int rc = blob == NULL || all == NULL ? -ENOMEM : make_card(ctx, boot, &mine);
	if (rc == 0)
		rc = xpi_card_pack(&mine, blob);
	if (rc == 0)
		rc = xpi_boot_allgather(boot, blob, XPI_CARD_WIRE_MAX, all);
	for (int p = 0; rc == 0 && p < n; p++) {
		const char *why = "";
		if (p == ctx->rank)
			continue;
		if (xpi_card_parse(all + (size_t)p * XPI_CARD_WIRE_MAX, XPI_CARD_WIRE_MAX, &theirs,
				   &why) < 0 ||
		    theirs.rank != (uint32_t)p) {
			xpi_log(XPI_LOG_ERROR,
				"rank %d: rank %d sent a malformed capability card: %s", ctx->rank,
				p, why);
			rc = -EPROTO;
			break;
		}
		struct xpi_lanes lanes;
		if (xpi_select(&mine, &theirs, &lanes, &why) < 0) {
			xpi_log(XPI_LOG_ERROR, "rank %d: no transport reaches rank %d: %s",
				ctx->rank, p, why);
			rc = -EPROTONOSUPPORT;
			break;
		}
		lane[p] = lanes.small;
	}
	free(blob);
	free(all);
	return rc;
}

static void destroy_networked(xp_context_t *ctx)
{
	xpi_context_teardown(ctx);
	for (int i = ctx->ntls - 1; i >= 0; i--)
		ctx->tls[i].ops->destroy(ctx->tls[i].tl);
	xpi_boot_destroy(ctx->boot);
	xpi_context_destroy(ctx);
}

/* Starts the transports the negotiation chose. A peer whose shared memory
 * fails to set up falls back to TCP (both sides agree in xpi_shm_attach)
 * and says so once. */
static int attach_transports(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *lane)
{
	int n = ctx->size;
	uint8_t *want_shm = calloc((size_t)n, 1), *ok = calloc((size_t)n, 1);
	uint8_t *want_tcp = calloc((size_t)n, 1);
	int rc = want_shm == NULL || ok == NULL || want_tcp == NULL ? -ENOMEM : 0;
	for (int p = 0; rc == 0 && p < n; p++) {
		want_shm[p] = lane[p] == XPI_TL_SHM;
		want_tcp[p] = lane[p] == XPI_TL_TCP;
	}
	if (rc == 0)
		rc = xpi_shm_attach(ctx, boot, want_shm, ok);
	for (int p = 0; rc == 0 && p < n; p++) {
		if (!want_shm[p] || ok[p])
			continue;
#ifdef XPORT_HAVE_TCP
		xpi_log(XPI_LOG_WARN,
			"rank %d: shared memory with rank %d failed to set up; falling back to tcp",
			ctx->rank, p);
		want_tcp[p] = 1;
#else
		xpi_log(XPI_LOG_ERROR,
			"rank %d: shared memory with rank %d failed to set up and this build has "
			"no other transport",
			ctx->rank, p);
		rc = -EPROTONOSUPPORT;
#endif
	}
#ifdef XPORT_HAVE_TCP
	if (rc == 0)
		rc = xpi_tcp_attach(ctx, boot, want_tcp);
#endif
	if (rc == 0 && xpi_debug_on("transport")) {
		for (int p = 0; p < n; p++) {
			xp_route_t r;
			if (xp_route_get(ctx, p, 0, &r) == 0)
				xpi_log(XPI_LOG_INFO,
					"rank %d -> rank %d: %s (rendezvous from %zu B)", ctx->rank,
					p, r.transport, r.rndv_threshold);
		}
	}
	free(want_shm);
	free(ok);
	free(want_tcp);
	return rc;
}

static int init_networked(const struct xpi_config *cfg, struct xpi_boot *boot, xp_context_t **out)
{
	xp_context_t *ctx;
	int rc = xpi_context_create(xpi_boot_rank(boot), xpi_boot_size(boot), cfg, &ctx);
	if (rc < 0) {
		xpi_boot_destroy(boot);
		return rc;
	}
	ctx->boot = boot;
	ctx->oob_barrier = xpi_oob_boot_barrier;
	ctx->oob_allgather = xpi_oob_boot_allgather;
	uint8_t *lane = calloc((size_t)ctx->size, 1);
	rc = lane == NULL ? -ENOMEM : xpi_self_attach(ctx);
	if (rc == 0)
		rc = negotiate(ctx, boot, lane);
	if (rc == 0)
		rc = attach_transports(ctx, boot, lane);
	free(lane);
	if (rc < 0) {
		destroy_networked(ctx);
		return rc;
	}
	*out = ctx;
	return 0;
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
