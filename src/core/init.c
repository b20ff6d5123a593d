/* SPDX-License-Identifier: MIT */
/*
 * xp_init: forms this process's rank of a job from the launcher's
 * environment. Until a network backend exists, only a job of one rank
 * (a "singleton", as MPI calls it) can be formed here.
 */
#include <errno.h>
#include <stdlib.h>

#include "../inproc/inproc.h"
#include "../inproc/job.h"
#include "compiler.h"
#include "engine.h"
#include "log.h"

/* Job size from the first launcher variable that is set: ours, torchrun's,
 * Slurm's, Open MPI's. Returns 1 if none is, -EINVAL if one is malformed. */
static int job_size_from_env(const char **which)
{
	static const char *const vars[] = { "XP_SIZE", "WORLD_SIZE", "SLURM_NTASKS",
					    "OMPI_COMM_WORLD_SIZE" };
	for (size_t i = 0; i < XPI_ARRAY_SIZE(vars); i++) {
		const char *s = getenv(vars[i]);
		if (s == NULL || *s == '\0')
			continue;
		char *end;
		long v = strtol(s, &end, 10);
		*which = vars[i];
		if (*end != '\0' || v < 1 || v > (1L << 24))
			return -EINVAL;
		return (int)v;
	}
	return 1;
}

XPI_EXPORT int xp_init(const xp_config_t *cfg, xp_context_t **ctx)
{
	struct xpi_config icfg;
	const char *which = NULL;
	if (ctx == NULL)
		return -EINVAL;
	int rc = xpi_config_resolve(cfg, &icfg);
	if (rc < 0)
		return rc;
	int size = job_size_from_env(&which);
	if (size < 0) {
		xpi_log(XPI_LOG_ERROR, "xp_init: %s=%s is not a job size", which, getenv(which));
		return size;
	}
	if (size > 1) {
		xpi_log(XPI_LOG_ERROR,
			"xp_init: %s=%d asks for a job of several processes, but this build has "
			"no network transport",
			which, size);
		return -EPROTONOSUPPORT;
	}
	xp_local_job_t *job;
	rc = xpi_local_job_create(1, &icfg, &job);
	if (rc < 0)
		return rc;
	job->ctxs[0]->owned_by_job = false; /* xp_finalize destroys the job */
	*ctx = job->ctxs[0];
	return 0;
}

XPI_EXPORT void xp_finalize(xp_context_t *ctx)
{
	if (ctx == NULL || ctx->owned_by_job)
		return;
	xp_local_job_destroy(ctx->local_job);
}
