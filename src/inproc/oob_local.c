/* SPDX-License-Identifier: MIT */
/* Out-of-band barrier and allgather among the threads of a local job. */
#include <errno.h>
#include <sched.h>
#include <string.h>

#include "../core/clock.h"
#include "job.h"

/* A sense-reversing barrier; each waiter keeps its rank's engine going,
 * so messages still move while it waits. */
int xpi_local_oob_barrier(xp_context_t *ctx)
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

/* Each rank shows where its bytes are, all copy, and nobody leaves before
 * everyone has copied. */
int xpi_local_oob_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all)
{
	struct xp_local_job *job = ctx->local_job;
	atomic_store(&job->oob_slots[ctx->rank], mine);
	int rc = xpi_local_oob_barrier(ctx);
	for (int r = 0; rc == 0 && r < job->n; r++)
		memcpy((char *)all + (size_t)r * len, atomic_load(&job->oob_slots[r]), len);
	if (rc == 0)
		rc = xpi_local_oob_barrier(ctx);
	return rc;
}
