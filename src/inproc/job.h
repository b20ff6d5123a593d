/* SPDX-License-Identifier: MIT */
/* A local job: N ranks of one process and the rings between them. */
#ifndef XPI_INPROC_JOB_H
#define XPI_INPROC_JOB_H

#include <stdatomic.h>

#include "../core/engine.h"

struct xpi_ring;

/* One rank's instance of the in-process transport. */
struct xpi_inproc {
	xp_context_t *ctx;
	struct xp_local_job *job;
	int rank;
	struct xpi_ring **out; /* by destination; producer (this rank's owner) */
	struct xpi_ring **in;  /* incoming rings this rank polls; its owner */
	int nin;
	uint8_t *scratch; /* a long inline payload, gathered from its slots */
	/* Threads of this rank asleep (or about to be) in the engine's sleep:
	 * a sender that sees it non-zero after publishing wakes the rank's
	 * wake fd (inproc_sleep_prepare). */
	_Alignas(64) _Atomic int sleeping;
	/* Registrations this rank's backend holds, and rendezvous sends that
	 * found one (tests read these to see the hooks at work). */
	_Atomic int64_t regs_live;
	_Atomic uint64_t rts_registered;
};

struct xp_local_job {
	int n;
	/* The process is registered for membarrier(PRIVATE_EXPEDITED): a
	 * sleeper then pays the barrier that orders its sleeper count against
	 * senders' slots, and the send path needs none (inproc_sleep_prepare). */
	bool asym_barrier;
	xp_context_t **ctxs;
	/* Each rank's pool, read by its senders: a copy apart from the
	 * contexts, whose lines their owners write all the time. */
	struct xpi_pool **pools;
	struct xpi_inproc *tls;
	struct xpi_ring **rings; /* [src * n + dst], for teardown */
	/* Out-of-band barrier and allgather among the job's threads (oob.c). */
	_Atomic int oob_count, oob_gen;
	_Atomic(const void *) *oob_slots;
	/* The collectives' areas (ctx->host_area): XPI_COLL_CHANNELS of
	 * XPI_COLL_AREA bytes per rank, mapped untouched (pages come as they
	 * are written); NULL for jobs too large for them. */
	uint8_t *coll_areas;
	size_t coll_areas_len;
};

void xpi_ring_drain(struct xpi_ring *ring);

/* xp_oob_barrier and xp_oob_allgather of a local job (oob_local.c). */
int xpi_local_oob_barrier(xp_context_t *ctx);
int xpi_local_oob_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all);

#endif
