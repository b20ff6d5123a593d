/* SPDX-License-Identifier: MIT */
/*
 * Forming a job through the launcher's PMIx server (srun --mpi=pmix, Open
 * MPI's mpirun), where xpi_launch_pmix_wanted (launcher.h) says the process
 * has one. PMIx gives rank and size; rank 0 makes a unique id (unique_id.h:
 * a random job key and its address) and a random nonce that names the job,
 * and puts them in PMIx; every rank fetches them from rank 0 after a fence
 * without data collection (each rank fetches only rank 0's value, not
 * everyone's). So no port is derived (nothing to collide with another
 * job's) and the job is protected by a key nobody set: PMIx's server is
 * local and per job, and only this job's processes can read what rank 0
 * put.
 *
 * The job's control operations while it forms (the capability cards, the
 * transports' agreements, bootstrap.h's allgather and barrier) then go
 * through PMIx too, not through a star of sockets around rank 0: each rank
 * puts its part (PMIx_Put, PMIx_Commit), all fence with data collection
 * (the launcher's servers swap the parts host by host) and each rank reads
 * the others' parts from its local copy (PMIx_Get). Every rank needs every
 * card while the job forms (it chooses a transport for each peer), so the
 * fence collects them rather than leaving each get to ask the peer's host.
 * A rank that leaves while the job forms (a setting refused, a transport
 * that failed) joins one last fence with the reason (xpi_pmix_leave), so
 * the others fail at once naming it, as rank 0's abort does on the star.
 *
 * Keys are "xport.<generation>.<what>": the generation counts the jobs this
 * process formed through PMIx, in step on every rank, so a second job of
 * the same processes never reads the first one's values.
 *
 * pmix.c with libpmix (meson option pmix); pmix_none.c without it.
 */
#ifndef XPI_PMIX_H
#define XPI_PMIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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

/* Bytes of the nonce rank 0 draws to name the job (bootstrap.h's job id). */
#define XPI_PMIX_NONCE_LEN 32

/*
 * Connects to the PMIx server, reads the job, and (size > 1) exchanges
 * rank 0's unique id and nonce: rank 0 makes them (xp_get_unique_id, whose
 * listening socket it closes: nobody connects to it) and puts them; all
 * fence; the others get them. Blocks at most @timeout_ms in the fence and
 * get. Returns 0 with *@job, *@id and @nonce, still connected: the job's
 * control operations go through PMIx until xpi_pmix_leave. Or 1 for a job
 * of one (no id), -ENOTSUP without PMIx in this build, or a negative errno
 * logged with what PMIx said (xp_error_detail), disconnected.
 */
int xpi_pmix_job(int timeout_ms, struct xpi_pmix_job *job, struct xp_unique_id *id,
		 uint8_t nonce[XPI_PMIX_NONCE_LEN]);

/*
 * The job's control operation number @seq (bootstrap.h's allgather): puts
 * @len bytes at @mine, fences with data collection, and fills @all with
 * every rank's part (rank r's at r * @len). A part of another length fails
 * with -EPROTO naming the rank and both lengths; a rank that left fails it
 * with -ECONNRESET and its reason. Bounded by @timeout_ms (-ETIMEDOUT).
 */
int xpi_pmix_allgather(uint32_t seq, int rank, int size, const void *mine, size_t len, void *all,
		       int timeout_ms);

/*
 * Ends this process's part in the job's control operations and disconnects.
 * With @fence (no operation failed here), puts @why ("" at a normal end:
 * every rank leaves at the same point) and joins one last fence, so ranks
 * still forming the job fail at once with the reason.
 */
void xpi_pmix_leave(bool fence, const char *why, int timeout_ms);

#endif
