/* SPDX-License-Identifier: MIT */
/*
 * Runs one test body as the two ranks of a job over a named transport:
 * "inproc" as two threads of this process (xp_local_run), any other name as
 * two processes (mproc.h) whose xp_init is told XP_TRANSPORTS=<name> and
 * checked to have got it, with a 10 s default deadline. So one body tests
 * every transport the same way.
 */
#ifndef XP_RUN_OVER_H
#define XP_RUN_OVER_H

#include <string.h>

#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"

struct run_over {
	const char *transport;
	int (*body)(xp_context_t *ctx);
};

static inline int run_over_local(xp_context_t *ctx, void *arg)
{
	return ((const struct run_over *)arg)->body(ctx);
}

static inline int run_over_process(int rank, void *arg)
{
	(void)rank;
	const struct run_over *ro = arg;
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_route_t route;
	T_OK(xp_route_get(ctx, 1 - xp_rank(ctx), 0, &route));
	if (strcmp(route.transport, ro->transport) != 0)
		T_FAIL("served by %s, not %s", route.transport, ro->transport);
	int rc = ro->body(ctx);
	xp_finalize(ctx);
	return rc;
}

static inline void run_over_env(int rank, void *arg)
{
	(void)rank;
	setenv("XP_TRANSPORTS", ((const struct run_over *)arg)->transport, 1);
	setenv("XP_TIMEOUT_MS", "10000", 1);
}

/* Runs @body on both ranks over @transport; 0 if both returned 0. */
static inline int run_over(const char *transport, int (*body)(xp_context_t *ctx))
{
	struct run_over ro = { transport, body };
	if (strcmp(transport, "inproc") == 0)
		return xp_local_run(2, NULL, run_over_local, &ro) == 0 ? 0 : 1;
	return mproc_run(2, run_over_process, &ro, 60, run_over_env, NULL) == 0 ? 0 : 1;
}

#endif
