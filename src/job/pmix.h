/* SPDX-License-Identifier: MIT */
/*
 * Forming a job through the launcher's PMIx server (srun --mpi=pmix, Open
 * MPI's mpirun), where xpi_launch_pmix_wanted (launcher.h) says the process
 * has one. PMIx gives rank and size; rank 0 makes a unique id (unique_id.h:
 * a random job key and its address, on a port the kernel picked and that it
 * already listens on) and puts it in PMIx; every rank fetches it from rank 0
 * after a fence without data collection (each rank fetches only rank 0's
 * value, not everyone's); then the job forms from the id as xp_init_rank
 * does. So no port is derived (nothing to collide with another job's) and
 * the job is protected by a key nobody set: PMIx's server is local and per
 * job, and only this job's processes can read what rank 0 put.
 *
 * pmix.c with libpmix (meson option pmix); pmix_none.c without it.
 */
#ifndef XPI_PMIX_H
#define XPI_PMIX_H

#include <stdbool.h>
#include <stddef.h>

struct xp_unique_id;

/* What PMIx says about this process's job. */
struct xpi_pmix_job {
	int rank, size;
	int local_rank, local_size; /* on this host; -1 if PMIx does not say */
	char host[256];             /* "" if PMIx does not say */
};

/* Whether this build has PMIx. */
bool xpi_pmix_built(void);

/* Whether this process's last job was formed through PMIx. */
bool xpi_pmix_used(void);

/*
 * Connects to the PMIx server, reads the job, and (size > 1) exchanges
 * rank 0's unique id: rank 0 makes it (xp_get_unique_id) and puts it; all
 * fence; the others get it. Disconnects before returning (after a second
 * fence, so rank 0's value outlives every rank's read). Blocks at most
 * @timeout_ms in the fence and get. Returns 0 with *@job and *@id, 1 for a
 * job of one (no id), -ENOTSUP without PMIx in this build, or a negative
 * errno logged with what PMIx said (xp_error_detail).
 */
int xpi_pmix_job(int timeout_ms, struct xpi_pmix_job *job, struct xp_unique_id *id);

#endif
