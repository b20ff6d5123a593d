/* SPDX-License-Identifier: MIT */
/*
 * Forming a job through Slurm's PMI-2 key-value space (srun --mpi=pmi2, or
 * any srun on a cluster whose MpiDefault is pmi2), where
 * xpi_launch_pmi2_wanted (launcher.h) says Slurm's pmi2 plugin serves this
 * task. As with PMIx (pmix.h): rank 0 makes a unique id (unique_id.h: a
 * random job key and its address, on a port the kernel picked and that it
 * already listens on) and puts it, hex-encoded, under one key; every rank
 * fences and gets it; then the job forms from the id as xp_init_rank does.
 * So no port is derived from the job and step ids (nothing to collide with
 * another step's), and the key is protected by the step's own PMI server:
 * slurmstepd serves the space over a socket each task inherits (PMI_FD).
 *
 * Slurm serves one PMI-2 session per task: xport finalizes it, so a program
 * that uses PMI-2 itself (an MPI library under srun --mpi=pmi2) sets
 * XP_ADDR instead (docs/LAUNCHERS.md).
 *
 * pmi2.c with Slurm's libpmi2 (meson option pmi2); pmi2_none.c without it.
 */
#ifndef XPI_PMI2_H
#define XPI_PMI2_H

#include <stdbool.h>

struct xp_unique_id;

/* What PMI-2 says about this task's job. */
struct xpi_pmi2_job {
	int rank, size;
	char jobid[64]; /* PMI2_Job_GetId: Slurm's "<job>.<step>" */
};

/* Whether this build has PMI-2 (Slurm's libpmi2). */
bool xpi_pmi2_built(void);

/* Whether this process's last job was formed through PMI-2. */
bool xpi_pmi2_used(void);

/*
 * Connects to the step's PMI-2 server (PMI_FD), reads rank and size, and
 * (size > 1) exchanges rank 0's unique id: rank 0 makes it
 * (xp_get_unique_id) and puts it, or its error so that every rank fails
 * at once with it; all fence; the others get it; all fence again (so no
 * rank finalizes while another still reads) and finalize. Each wait for
 * the server is bounded by @timeout_ms. Returns 0 with *@job and *@id, 1
 * for a job of one (no id), -ENOTSUP without PMI-2 in this build,
 * -EALREADY if this process already had its PMI-2 session (Slurm serves
 * one per task: a second xp_init, or an MPI library's; the caller then
 * forms the job without PMI-2), or a negative errno with the reason in
 * xp_error_detail.
 */
int xpi_pmi2_job(int timeout_ms, struct xpi_pmi2_job *job, struct xp_unique_id *id);

#endif
