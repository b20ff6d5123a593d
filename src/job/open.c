/* SPDX-License-Identifier: MIT */
/* xp_open: a context that is not a job, for endpoints only (xport.h). */
#include <errno.h>
#include <sys/socket.h>

#include "../core/compiler.h"
#include "../core/engine.h"
#include "../core/ep.h"
#include "../core/log.h"
#include "../core/self.h"
#include "backend.h"
#include "unique_id.h"

/*
 * The backends of endpoints, made at @where: the first that makes their
 * connections (it carries the others' sideband messages: tcp), then those
 * that may serve their lanes (rdma), whose failure leaves the endpoints on
 * their connections. Each makes nothing it already has (a job's).
 */
static int open_ep_backend(xp_context_t *ctx, const struct sockaddr_storage *where)
{
	int rc = -ENOTSUP;
	for (const struct xpi_backend *const *b = xpi_backends; *b != NULL && rc == -ENOTSUP; b++)
		if ((*b)->open != NULL && (*b)->carries_sideband &&
		    xpi_backend_allowed(&ctx->cfg, *b))
			rc = (*b)->open(ctx, where);
	if (rc == -ENOTSUP)
		xpi_log_detail(
			XPI_LOG_INFO,
			"rank %d: no transport of this build makes endpoints (tcp: io_uring, "
			"allowed by XP_TRANSPORTS)",
			ctx->rank);
	if (rc < 0)
		return rc;
	for (const struct xpi_backend *const *b = xpi_backends; *b != NULL; b++) {
		if ((*b)->open == NULL || (*b)->carries_sideband ||
		    !xpi_backend_allowed(&ctx->cfg, *b))
			continue;
		int lrc = (*b)->open(ctx, where);
		if (lrc < 0)
			xpi_log(XPI_LOG_WARN,
				"rank %d: %s cannot serve endpoints (%s); they stay on tcp",
				ctx->rank, (*b)->name, xp_strerror(lrc));
	}
	return 0;
}

int xpi_job_ep_open(xp_context_t *ctx)
{
	struct sockaddr_storage where;
	socklen_t len;
	const char *ifname = ctx->cfg.socket_ifname[0] != '\0' ? ctx->cfg.socket_ifname : NULL;
	int rc = xpi_uid_pick_address(ifname, &where, &len);
	return rc < 0 ? rc : open_ep_backend(ctx, &where);
}

XPI_EXPORT int xp_open(const xp_config_t *cfg, xp_context_t **out)
{
	xpi_detail_clear();
	if (out == NULL)
		return xpi_fail(-EINVAL, "xp_open: the context pointer is NULL");
	struct xpi_config icfg;
	int rc = xpi_config_resolve(cfg, &icfg);
	if (rc < 0)
		return rc;
	struct sockaddr_storage where;
	socklen_t len;
	rc = xpi_uid_pick_address(icfg.socket_ifname[0] != '\0' ? icfg.socket_ifname : NULL, &where,
				  &len);
	if (rc < 0)
		return xpi_detail_ensure(rc, "xp_open");
	xp_context_t *ctx;
	rc = xpi_context_create(0, 1, &icfg, &ctx);
	if (rc < 0)
		return rc;
	ctx->networked = true;
	ctx->ep_only = true;
	/* Endpoints carry their own eager credit: a sixteenth of the bound
	 * each, so that many busy ones at once stay near it. */
	ctx->eager_credit_per_peer = icfg.unexpected_max_bytes / 16;
	rc = xpi_ep_slots_init(ctx, icfg.ep_max);
	if (rc == 0)
		rc = xpi_self_attach(ctx);
	if (rc == 0)
		rc = open_ep_backend(ctx, &where);
	if (rc < 0) {
		xp_finalize(ctx);
		return xpi_detail_ensure(rc, "xp_open");
	}
	*out = ctx;
	return 0;
}
