/* SPDX-License-Identifier: MIT */
/*
 * Which launcher started this process, and what it says: rank, size and
 * where rank 0's rendezvous is. A pure reading of an environment through a
 * lookup callback, so tests can feed whole environments (docs/LAUNCHERS.md
 * is the user's view of the same rules).
 *
 * Precedence: the launcher that started the process must win, and the
 * outer ones leave their variables behind (mpirun inside a Slurm
 * allocation sees SLURM_NTASKS of the allocation, torchrun under srun sees
 * one Slurm task per node). So the first whose size variable is set wins:
 *
 *   xport                 XP_RANK / XP_SIZE
 *   Open MPI              OMPI_COMM_WORLD_RANK / OMPI_COMM_WORLD_SIZE
 *   MPICH, Intel MPI      PMI_RANK / PMI_SIZE
 *   torchrun              RANK / WORLD_SIZE
 *   Slurm (srun)          SLURM_PROCID / SLURM_NTASKS
 *
 * Every later launcher whose variables are also set and say another rank
 * or size is named in a warning. XP_RANK without XP_SIZE is an error (our
 * own variables are not set by accident); half of another launcher's set
 * is not ours to judge.
 *
 * The rendezvous address, first that applies:
 *   XP_ADDR                   "host:port" or "[ipv6]:port", as given
 *   MASTER_ADDR, MASTER_PORT  MASTER_ADDR on port MASTER_PORT + 1, whatever
 *                             the launcher: torchrun's agent serves its
 *                             TCPStore on MASTER_PORT itself
 *   Slurm only                the first host of SLURM_STEP_NODELIST
 *                             (else SLURM_JOB_NODELIST, SLURM_NODELIST) on
 *                             the port xpi_slurm_port(SLURM_JOB_ID,
 *                             SLURM_STEP_ID) gives
 */
#ifndef XPI_LAUNCHER_H
#define XPI_LAUNCHER_H

#include <stddef.h>

/* xpi_launch_read() found no launcher, or a job of one rank. */
#define XPI_LAUNCH_SINGLETON 1
#define XPI_LAUNCH_TEXT_MAX 1024
/* The largest job size accepted, as xp_init. */
#define XPI_LAUNCH_MAX_SIZE (1 << 24)

/* Ports derived under Slurm: XPI_SLURM_PORT_BASE + a value below
 * XPI_SLURM_PORT_SPAN, so 20000 to 31999, below Linux's ephemeral range
 * (32768 to 60999), where connections' own ports never land. */
#define XPI_SLURM_PORT_BASE 20000
#define XPI_SLURM_PORT_SPAN 12000
#define XPI_SLURM_PORT_JOB_STRIDE 101

/* Returns the variable's value, or NULL if it is not set. */
typedef const char *(*xpi_env_get_fn)(void *arg, const char *name);

/* An xpi_env_get_fn over the process environment (getenv; @arg unused). */
const char *xpi_env_getenv(void *arg, const char *name);

struct xpi_launch {
	const char *launcher; /* "xport", "Open MPI", ...; NULL: none */
	const char *rank_var, *size_var;
	int rank, size;
	/* The rendezvous (jobs of more than one rank). */
	char host[256];
	char port[8];
	char addr[300];      /* "host:port" or "[v6]:port", for messages */
	char addr_from[200]; /* where the address came from, for messages */
	/* XP_BOOT_LISTEN_FD (rank 0 only), or -1. */
	int listen_fd;
	/* Launchers that disagree with the winner, or "": to be logged. */
	char warning[XPI_LAUNCH_TEXT_MAX];
	/* On -EINVAL: what is wrong, naming the variable and its value. */
	char error[XPI_LAUNCH_TEXT_MAX];
};

/*
 * Reads the launcher's variables through @get(@arg, name) (an empty value
 * counts as unset). Returns 0 (a job of more than one rank, with its
 * rendezvous), XPI_LAUNCH_SINGLETON (no launcher, or a size of 1: launcher,
 * rank and size are set if a launcher was found), or -EINVAL with
 * @out->error. @out->warning may be set in every case. Pure.
 */
int xpi_launch_read(xpi_env_get_fn get, void *arg, struct xpi_launch *out);

/*
 * The rendezvous port of Slurm step @step_id of job @job_id:
 *   XPI_SLURM_PORT_BASE + (job_id * XPI_SLURM_PORT_JOB_STRIDE + step_id)
 *                          mod XPI_SLURM_PORT_SPAN
 * Steps of one job get distinct ports (fewer than 12000 steps), and so do
 * steps of jobs with nearby ids (the stride keeps them apart). Pure.
 */
int xpi_slurm_port(unsigned long job_id, unsigned long step_id);

/*
 * The first host of Slurm host list @list ("node01", "a,b", "n[001-004,9]",
 * "rack1-n[3-4],gpu7", "r[1-2]n[01-08]"): ranges in brackets expand with
 * the zero padding of their lower bound, so the first host takes each
 * bracket's first number as written. The whole list is checked: host names
 * of letters, digits, '-', '.', '_'; brackets closed, not nested, holding
 * numbers and ranges lo-hi with lo <= hi; no empty entries. Returns 0 and
 * the NUL-terminated host in @out (@n bytes), or -EINVAL with *@why saying
 * what is wrong and *@at (if not NULL) its offset in @list. Pure.
 */
int xpi_hostlist_first(const char *list, char *out, size_t n, const char **why, size_t *at);

/*
 * Tells xprun, if it started this process, that it called xp_init ('I')
 * or xp_finalize ('F') (xprun_note.c). Never blocks or fails.
 */
void xpi_xprun_note(char what);

#endif
