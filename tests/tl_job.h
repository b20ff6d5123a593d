/* SPDX-License-Identifier: MIT */
/*
 * Runs one test body as the ranks of a job over one transport: "inproc"
 * as threads of this process (xp_local_run), "shm" or "tcp" as processes
 * (mproc.h) with XP_TRANSPORTS naming it ("tcp,shm": messages over TCP,
 * rendezvous payloads over shared memory, the two lanes split). Either way each rank first
 * checks that the transport really serves every peer, so a test meant for
 * TCP cannot pass over shared memory by mistake.
 */
#ifndef XP_TL_JOB_H
#define XP_TL_JOB_H

#include <stdbool.h>
#include <string.h>

#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"

static const char *tl_job_transport;
static int (*tl_job_body)(xp_context_t *ctx);

/* The transport that serves messages: the first of a list such as
 * "tcp,shm" (whose lanes the selection splits: payloads over shm). */
static inline bool tl_job_serves(const char *route, const char *tl)
{
	size_t n = strcspn(tl, ",");
	return strlen(route) == n && strncmp(route, tl, n) == 0;
}

static inline int tl_job_rank(xp_context_t *ctx)
{
	for (int peer = 0; peer < xp_size(ctx); peer++) {
		xp_route_t route;
		if (peer == xp_rank(ctx))
			continue;
		T_OK(xp_route_get(ctx, peer, 0, &route));
		if (!tl_job_serves(route.transport, tl_job_transport))
			T_FAIL("rank %d -> %d is served by %s, not %s", xp_rank(ctx), peer,
			       route.transport, tl_job_transport);
	}
	return tl_job_body(ctx);
}

static inline int tl_job_local(xp_context_t *ctx, void *arg)
{
	(void)arg;
	return tl_job_rank(ctx);
}

static inline int tl_job_process(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	int rc = tl_job_rank(ctx);
	xp_finalize(ctx);
	return rc;
}

static inline void tl_job_env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_TRANSPORTS", tl_job_transport, 1);
}

/* Runs @body on @n ranks over @tl; processes are killed after @timeout_s.
 * The XP_* environment the caller set applies to every rank. 0 if every
 * rank returned 0, else 1. */
static inline int tl_job_run(const char *tl, int n, int (*body)(xp_context_t *ctx), int timeout_s)
{
	tl_job_transport = tl;
	tl_job_body = body;
	if (strcmp(tl, "inproc") == 0)
		return xp_local_run(n, NULL, tl_job_local, NULL) == 0 ? 0 : 1;
	return mproc_run(n, tl_job_process, NULL, timeout_s, tl_job_env, NULL) == 0 ? 0 : 1;
}

#endif
