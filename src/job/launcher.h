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
 * PMI_RANK/PMI_SIZE that srun's pmi2 plugin set (the step's SLURM_PROCID,
 * SLURM_NTASKS agree and PMI_JOBID is "<job>.<step>") are Slurm's: srun
 * works whatever its --mpi plugin, and torchrun under such an srun is
 * still torchrun.
 *
 * Every later launcher whose variables are also set and say another rank
 * or size is named in a warning, but for Slurm, the outermost launcher
 * wherever it is set (mpirun under salloc is the normal case). XP_RANK
 * without XP_SIZE is an error (our own variables are not set by accident);
 * half of another launcher's set is not ours to judge.
 *
 * The rendezvous address, first that applies:
 *   XP_ADDR                   "host:port" or "[ipv6]:port", as given
 *   MASTER_ADDR, MASTER_PORT  MASTER_ADDR on port MASTER_PORT + 1, whatever
 *                             the launcher: torchrun's agent serves its
 *                             TCPStore on MASTER_PORT itself
 *   Slurm only                the first host of SLURM_STEP_NODELIST
 *                             (else SLURM_JOB_NODELIST, SLURM_NODELIST) on
 *                             the first port of SLURM_STEP_RESV_PORTS, else
 *                             the port xpi_slurm_port(SLURM_JOB_ID,
 *                             SLURM_STEP_ID) gives
 */
#ifndef XPI_LAUNCHER_H
#define XPI_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>

/* xpi_launch_read() found no launcher, or a job of one rank. */
#define XPI_LAUNCH_SINGLETON 1
#define XPI_LAUNCH_TEXT_MAX 1024
/* The largest job size accepted, as xp_init. */
#define XPI_LAUNCH_MAX_SIZE (1 << 24)

/*
 * Ports derived under Slurm (without SLURM_STEP_RESV_PORTS): a slot of
 * XPI_SLURM_PORT_STEPS ports per job, XPI_SLURM_PORT_JOBS slots, so 20000
 * to 31999, below Linux's ephemeral range (32768 to 60999), where
 * connections' own ports never land. See xpi_slurm_port.
 */
#define XPI_SLURM_PORT_BASE 20000
#define XPI_SLURM_PORT_STEPS 20
#define XPI_SLURM_PORT_JOBS 600
#define XPI_SLURM_PORT_SPAN (XPI_SLURM_PORT_STEPS * XPI_SLURM_PORT_JOBS)
/* The launcher's name for the job, bound into rank 0's handshakes. */
#define XPI_LAUNCH_JOB_NAME_MAX 48

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
	/* The launcher's name for this job ("slurm <job>.<step>"), or "": every
	 * rank's handshake with rank 0 binds it, so a rank that reaches
	 * another job's rank 0 on the same port is refused at once. */
	char job_name[XPI_LAUNCH_JOB_NAME_MAX];
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
 * Whether xp_init forms the job through the launcher's PMIx server
 * (pmix.h): PMIX_RANK and PMIX_NAMESPACE are set (srun --mpi=pmix, Open
 * MPI's mpirun), none of XP_SIZE, XP_ADDR, WORLD_SIZE, MASTER_ADDR is (our
 * own variables and torchrun's take precedence), and the innermost
 * launcher's rank variable (OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID,
 * the first set) equals PMIX_RANK (else the PMIx variables were inherited
 * from a parent that is the PMIx client). Otherwise false and @why_not
 * (@n bytes) says why. Pure.
 */
bool xpi_launch_pmix_wanted(xpi_env_get_fn get, void *arg, char *why_not, size_t n);

/*
 * Whether xp_init forms the job through Slurm's PMI-2 key-value space
 * (pmi2.h): PMI_FD is set, none of XP_SIZE, XP_ADDR, OMPI_COMM_WORLD_SIZE,
 * WORLD_SIZE, MASTER_ADDR is (ours, and the launchers that run inside a
 * Slurm task, take precedence), and PMI_RANK, PMI_SIZE and PMI_JOBID are
 * the Slurm step's SLURM_PROCID, SLURM_NTASKS and "<SLURM_JOB_ID>.<
 * SLURM_STEP_ID>" (Slurm's pmi2 plugin sets all four; MPICH's Hydra, which
 * serves its own PMI, does not set the step's PMI_JOBID). Otherwise false
 * and @why_not (@n bytes) says why. Pure.
 */
bool xpi_launch_pmi2_wanted(xpi_env_get_fn get, void *arg, char *why_not, size_t n);

/*
 * The rendezvous port of Slurm step @step_id of job @job_id:
 *   XPI_SLURM_PORT_BASE + (job_id mod XPI_SLURM_PORT_JOBS) * XPI_SLURM_PORT_STEPS
 *                       + (step_id mod XPI_SLURM_PORT_STEPS)
 * Two steps get the same port only if their job ids are congruent modulo
 * 600 and their step ids modulo 20. Only steps whose rank 0 runs on one
 * node at once can collide, so this cannot happen unless a node runs at
 * once two jobs 600 (1200, ...) job ids apart, or one job's steps n and
 * n + 20 (40, ...). In particular step 101 of job J and step 0 of job
 * J + 1 (the old formula's collision) get different ports, and so do the
 * steps 0 to 19 of any 600 consecutive jobs. A collision left is reported
 * at once on every rank (bootstrap.c); SLURM_STEP_RESV_PORTS, where Slurm
 * reserves ports, takes precedence over this. Pure.
 */
int xpi_slurm_port(unsigned long job_id, unsigned long step_id);

/* The first port of Slurm's SLURM_STEP_RESV_PORTS ("12000-12003",
 * "12000,12005", "12000"), or -EINVAL. Pure. */
int xpi_slurm_resv_port(const char *list);

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
