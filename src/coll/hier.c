/* SPDX-License-Identifier: MIT */
/*
 * Hierarchical allreduce, as NCCL's trees and Open MPI's han: a reduction
 * within each host to its leader (its lowest rank) over the host's fast
 * transport, an allreduce between the leaders only across hosts, and a
 * broadcast back within each host. Across hosts only one rank per host
 * sends, instead of every rank.
 */
#include <errno.h>
#include <stdlib.h>

#include "../core/log.h"
#include "coll.h"

/* Steps of the three phases: far apart, whatever the group sizes. */
#define PHASE_STEPS (1u << 20)

int xpi_build_allreduce_hierarchical(struct xpi_sched *c, void *buf, size_t count, int across)
{
	xp_comm_t *comm = c->comm;
	int p = comm->size, me = comm->rank;
	int *host = calloc((size_t)p, sizeof(int)), *local = calloc((size_t)p, sizeof(int));
	int *leaders = calloc((size_t)p, sizeof(int));
	if (host == NULL || local == NULL || leaders == NULL) {
		free(host);
		free(local);
		free(leaders);
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory", me, c->call);
	}
	int nlocal = 0, mylocal = 0, nleaders = 0, myleader = -1;
	for (int r = 0; r < p; r++)
		host[r] = comm->ctx->peers[xpi_comm_world_rank(comm, r)].host;
	for (int r = 0; r < p; r++) {
		bool first_of_host = true;
		for (int q = 0; q < r && first_of_host; q++)
			first_of_host = host[q] != host[r];
		if (first_of_host) {
			if (r == me)
				myleader = nleaders;
			leaders[nleaders++] = r;
		}
		if (host[r] == host[me]) {
			if (r == me)
				mylocal = nlocal;
			local[nlocal++] = r;
		}
	}
	/* The groups only translate member numbers while the steps are built. */
	xpi_sched_group(c, local, nlocal, mylocal, 0);
	int rc = xpi_build_reduce_binomial(c, buf, count, 0);
	if (rc == 0 && myleader >= 0) {
		xpi_sched_group(c, leaders, nleaders, myleader, PHASE_STEPS);
		if (across == XP_ALLREDUCE_RING)
			rc = xpi_build_allreduce_ring(c, buf, NULL, count);
		else if (across == XP_ALLREDUCE_RABENSEIFNER)
			rc = xpi_build_allreduce_rabenseifner(c, buf, count);
		else
			rc = xpi_build_allreduce_rd(c, buf, count);
	}
	if (rc == 0) {
		xpi_sched_group(c, local, nlocal, mylocal, 2 * PHASE_STEPS);
		rc = xpi_build_bcast_binomial(c, buf, count * c->how.elem, 0);
	}
	xpi_sched_group(c, NULL, p, me, 0);
	free(host);
	free(local);
	free(leaders);
	return rc;
}
