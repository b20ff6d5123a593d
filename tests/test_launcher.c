/* SPDX-License-Identifier: MIT */
/*
 * The pure parts of forming a job, over whole environments fed through
 * xpi_launch_read's lookup callback (no setenv): launcher precedence, the
 * warning when launchers disagree, the address rules (XP_ADDR, MASTER_ADDR
 * on MASTER_PORT + 1, Slurm's derived rendezvous), every malformed variable
 * named in its error; Slurm host lists; the unique id's layout.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/launcher.h"
#include "job/unique_id.h"
#include "testutil.h"

/* An environment: NULL-terminated "NAME=value" strings. */
static const char *lookup(void *arg, const char *name)
{
	size_t n = strlen(name);
	for (const char *const *v = arg; *v != NULL; v++)
		if (strncmp(*v, name, n) == 0 && (*v)[n] == '=')
			return *v + n + 1;
	return NULL;
}

#define ENV(...) ((const char *const[]){ __VA_ARGS__, NULL })

static int launch(const char *const *env, struct xpi_launch *l)
{
	return xpi_launch_read(lookup, (void *)env, l);
}

/* Reads @env, expects @rc, and prints what came out. */
static void expect(const char *const *env, int rc, struct xpi_launch *l)
{
	int got = launch(env, l);
	if (got != rc)
		T_FAIL("got %d (error \"%s\"), expected %d", got, l->error, rc);
	if (rc < 0)
		fprintf(stderr, "   error: %s\n", l->error);
	if (l->warning[0] != '\0')
		fprintf(stderr, "   warning: %s\n", l->warning);
}

/* Expects -EINVAL with an error naming each of @needles (NULL-terminated). */
static void expect_error(const char *const *env, const char *const *needles)
{
	struct xpi_launch l;
	expect(env, -EINVAL, &l);
	for (const char *const *n = needles; *n != NULL; n++)
		T_CONTAINS(l.error, *n);
}

/* Expects a job whose rendezvous @field ("addr" or "host") is @want. */
static void expect_rendezvous(const char *const *env, const char *field, const char *want)
{
	struct xpi_launch l;
	expect(env, 0, &l);
	const char *got = strcmp(field, "host") == 0 ? l.host : l.addr;
	if (strcmp(got, want) != 0)
		T_FAIL("rendezvous %s \"%s\", expected \"%s\"", field, got, want);
}

static void test_precedence(void)
{
	struct xpi_launch l;
	expect(ENV("HOME=/root"), XPI_LAUNCH_SINGLETON, &l);
	T_CHECK(l.launcher == NULL);
	T_EQ(l.warning[0], '\0');

	/* Each launcher alone. */
	const struct {
		const char *const *env;
		const char *name;
	} alone[] = {
		{ ENV("XP_RANK=1", "XP_SIZE=3", "XP_ADDR=h:5"), "xport" },
		{ ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=3", "XP_ADDR=h:5"),
		  "Open MPI" },
		{ ENV("PMI_RANK=1", "PMI_SIZE=3", "XP_ADDR=h:5"), "MPICH/Intel MPI (PMI)" },
		{ ENV("RANK=1", "WORLD_SIZE=3", "XP_ADDR=h:5"), "torchrun" },
		{ ENV("SLURM_PROCID=1", "SLURM_NTASKS=3", "XP_ADDR=h:5"), "Slurm" },
	};
	for (size_t i = 0; i < sizeof(alone) / sizeof(alone[0]); i++) {
		expect(alone[i].env, 0, &l);
		T_CHECK(strcmp(l.launcher, alone[i].name) == 0);
		T_EQ(l.rank, 1);
		T_EQ(l.size, 3);
		T_EQ(l.warning[0], '\0');
		T_CHECK(strcmp(l.addr, "h:5") == 0);
	}

	/* mpirun inside a Slurm allocation: Open MPI started the process, and
	 * Slurm's other count is the allocation's, the normal case: no
	 * warning. */
	expect(ENV("SLURM_PROCID=0", "SLURM_NTASKS=1", "OMPI_COMM_WORLD_RANK=1",
		   "OMPI_COMM_WORLD_SIZE=2", "XP_ADDR=127.0.0.1:7000"),
	       0, &l);
	T_CHECK(strcmp(l.launcher, "Open MPI") == 0);
	T_EQ(l.rank, 1);
	T_EQ(l.size, 2);
	T_EQ(l.warning[0], '\0');
	/* A real conflict is still named: XP_RANK/XP_SIZE left behind under
	 * mpirun. */
	expect(ENV("XP_RANK=0", "XP_SIZE=2", "XP_ADDR=h:9", "OMPI_COMM_WORLD_RANK=1",
		   "OMPI_COMM_WORLD_SIZE=2"),
	       0, &l);
	T_CONTAINS(l.warning, "xport says rank 0 of 2");
	T_CONTAINS(l.warning, "Open MPI says OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2");
	T_CONTAINS(l.warning, "using xport's");

	/* srun --mpi=pmi2: Slurm's pmi2 plugin sets PMI_*, the step agrees:
	 * Slurm, with its derived rendezvous. */
	expect(ENV("PMI_RANK=1", "PMI_SIZE=4", "PMI_JOBID=77.3", "SLURM_PROCID=1", "SLURM_NTASKS=4",
		   "SLURM_JOB_ID=77", "SLURM_STEP_ID=3", "SLURM_STEP_NODELIST=n[1-2]"),
	       0, &l);
	T_CHECK(strcmp(l.launcher, "Slurm") == 0);
	T_EQ(l.rank, 1);
	T_EQ(l.size, 4);
	T_EQ(l.warning[0], '\0');
	T_CHECK(strcmp(l.host, "n1") == 0);
	T_EQ(atoi(l.port), xpi_slurm_port(77, 3));
	T_CHECK(strcmp(l.job_name, "slurm 77.3") == 0);
	/* Hydra's ranks inside a Slurm step of proxies (one per node): PMI's. */
	expect(ENV("PMI_RANK=3", "PMI_SIZE=4", "SLURM_PROCID=1", "SLURM_NTASKS=2",
		   "SLURM_JOB_ID=77", "SLURM_STEP_ID=3", "SLURM_STEP_NODELIST=n[1-2]",
		   "XP_ADDR=h:1"),
	       0, &l);
	T_CHECK(strcmp(l.launcher, "MPICH/Intel MPI (PMI)") == 0);
	T_EQ(l.rank, 3);
	/* PMI_JOBID of another step is not this step's PMI. */
	expect(ENV("PMI_RANK=1", "PMI_SIZE=2", "PMI_JOBID=77.2", "SLURM_PROCID=1", "SLURM_NTASKS=2",
		   "SLURM_JOB_ID=77", "SLURM_STEP_ID=3", "SLURM_STEP_NODELIST=n1", "XP_ADDR=h:1"),
	       0, &l);
	T_CHECK(strcmp(l.launcher, "MPICH/Intel MPI (PMI)") == 0);

	/* torchrun under srun --mpi=pmi2: its workers inherit the agent's
	 * Slurm PMI variables, which agree with Slurm's; torchrun started
	 * them, and wins. */
	expect(ENV("PMI_RANK=0", "PMI_SIZE=2", "PMI_JOBID=77.3", "PMI_FD=5", "SLURM_PROCID=0",
		   "SLURM_NTASKS=2", "SLURM_JOB_ID=77", "SLURM_STEP_ID=3",
		   "SLURM_STEP_NODELIST=n[1-2]", "RANK=3", "WORLD_SIZE=4", "MASTER_ADDR=n1",
		   "MASTER_PORT=29500"),
	       0, &l);
	T_CHECK(strcmp(l.launcher, "torchrun") == 0);
	T_EQ(l.rank, 3);
	T_EQ(l.size, 4);
	T_EQ(l.warning[0], '\0');

	/* Agreeing launchers say nothing. */
	expect(ENV("SLURM_PROCID=1", "SLURM_NTASKS=2", "OMPI_COMM_WORLD_RANK=1",
		   "OMPI_COMM_WORLD_SIZE=2", "PMI_RANK=1", "PMI_SIZE=2", "XP_ADDR=h:1"),
	       0, &l);
	T_CHECK(strcmp(l.launcher, "Open MPI") == 0);
	T_EQ(l.warning[0], '\0');

	/* torchrun under srun (one task per node): torchrun wins. */
	expect(ENV("SLURM_PROCID=1", "SLURM_NTASKS=2", "RANK=5", "WORLD_SIZE=8",
		   "MASTER_ADDR=node1", "MASTER_PORT=29500"),
	       0, &l);
	T_CHECK(strcmp(l.launcher, "torchrun") == 0);
	T_EQ(l.rank, 5);
	T_EQ(l.warning[0], '\0');

	/* xport over everything; two disagreements, both named. */
	expect(ENV("XP_RANK=0", "XP_SIZE=4", "XP_ADDR=h:9", "RANK=3", "WORLD_SIZE=4",
		   "SLURM_PROCID=0", "SLURM_NTASKS=1"),
	       0, &l);
	T_CHECK(strcmp(l.launcher, "xport") == 0);
	T_CONTAINS(l.warning, "torchrun says RANK=3 WORLD_SIZE=4");
	T_CHECK(strstr(l.warning, "Slurm says") == NULL);

	/* A loser with only its size, or a malformed one, disagrees; it is
	 * not an error: it is not the launcher that started us. */
	expect(ENV("XP_RANK=0", "XP_SIZE=2", "XP_ADDR=h:9", "WORLD_SIZE=x"), 0, &l);
	T_CONTAINS(l.warning, "RANK unset WORLD_SIZE=x");

	/* A job of one by the winner, others disagreeing: still warned. */
	expect(ENV("XP_SIZE=1", "XP_RANK=0", "RANK=3", "WORLD_SIZE=4"), XPI_LAUNCH_SINGLETON, &l);
	T_CHECK(strcmp(l.launcher, "xport") == 0);
	T_CONTAINS(l.warning, "RANK=3");

	/* Half of another launcher's set is nothing; half of ours is wrong.
	 * An empty value is unset. */
	expect(ENV("RANK=1"), XPI_LAUNCH_SINGLETON, &l);
	expect(ENV("WORLD_SIZE=", "RANK=1"), XPI_LAUNCH_SINGLETON, &l);
	expect_error(ENV("XP_RANK=1"), ENV("XP_RANK=1", "XP_SIZE"));
	expect_error(ENV("XP_RANK=1", "XP_SIZE="), ENV("XP_SIZE"));
}

/* Expects xpi_launch_pmi2_wanted(@env) to be @want; when false, its
 * reason to contain @why. */
static void expect_pmi2(const char *const *env, bool want, const char *why)
{
	char why_not[300];
	bool got = xpi_launch_pmi2_wanted(lookup, (void *)env, why_not, sizeof(why_not));
	if (got != want)
		T_FAIL("PMI-2 wanted: got %d (\"%s\"), expected %d", got, why_not, want);
	if (!want)
		T_CONTAINS(why_not, why);
}

#define SLURM_PMI2_STEP                                                                            \
	"PMI_FD=11", "PMI_RANK=1", "PMI_SIZE=2", "PMI_JOBID=77.3", "SLURM_PROCID=1",               \
		"SLURM_NTASKS=2", "SLURM_JOB_ID=77", "SLURM_STEP_ID=3", "SLURM_STEP_NODELIST=n1"

/* Slurm's pmi2 plugin, and only it, is asked for rank 0's id. */
static void test_pmi2_wanted(void)
{
	expect_pmi2(ENV(SLURM_PMI2_STEP), true, NULL);
	expect_pmi2(ENV("SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_JOB_ID=77", "SLURM_STEP_ID=3"),
		    false, "PMI_FD unset");
	/* MPICH's Hydra: PMI_FD, PMI_RANK, PMI_SIZE of its own, no step's
	 * PMI_JOBID, even where its proxies' Slurm ranks happen to agree. */
	expect_pmi2(ENV("PMI_FD=6", "PMI_RANK=1", "PMI_SIZE=2", "SLURM_PROCID=1", "SLURM_NTASKS=2",
			"SLURM_JOB_ID=77", "SLURM_STEP_ID=3"),
		    false, "not Slurm's pmi2 plugin");
	expect_pmi2(ENV("PMI_FD=6", "PMI_RANK=3", "PMI_SIZE=4", "PMI_JOBID=kvs_1234_0",
			"SLURM_PROCID=1", "SLURM_NTASKS=2", "SLURM_JOB_ID=77", "SLURM_STEP_ID=3"),
		    false, "not Slurm's pmi2 plugin");
	expect_pmi2(ENV("PMI_FD=6", "PMI_RANK=1", "PMI_SIZE=2", "PMI_JOBID=77.2", "SLURM_PROCID=1",
			"SLURM_NTASKS=2", "SLURM_JOB_ID=77", "SLURM_STEP_ID=3"),
		    false, "not Slurm's pmi2 plugin");
	/* Ours, and launchers started inside the task, take precedence. */
	expect_pmi2(ENV(SLURM_PMI2_STEP, "XP_ADDR=h:5"), false, "XP_ADDR=h:5 is set");
	expect_pmi2(ENV(SLURM_PMI2_STEP, "XP_SIZE=2"), false, "XP_SIZE=2");
	expect_pmi2(ENV(SLURM_PMI2_STEP, "WORLD_SIZE=4"), false, "WORLD_SIZE=4");
	expect_pmi2(ENV(SLURM_PMI2_STEP, "MASTER_ADDR=n1"), false, "MASTER_ADDR=n1");
	expect_pmi2(ENV(SLURM_PMI2_STEP, "OMPI_COMM_WORLD_SIZE=4"), false,
		    "OMPI_COMM_WORLD_SIZE=4");
}

static void test_rank_size_errors(void)
{
	expect_error(ENV("XP_SIZE=abc", "XP_RANK=0", "XP_ADDR=h:1"), ENV("XP_SIZE=abc"));
	expect_error(ENV("XP_SIZE=0", "XP_RANK=0"), ENV("XP_SIZE=0", "job size"));
	expect_error(ENV("XP_SIZE=-3", "XP_RANK=0"), ENV("XP_SIZE=-3"));
	expect_error(ENV("XP_SIZE=99999999999", "XP_RANK=0"), ENV("XP_SIZE=99999999999"));
	expect_error(ENV("XP_SIZE=16777217", "XP_RANK=0"), ENV("XP_SIZE=16777217"));
	expect_error(ENV("XP_SIZE=4", "XP_RANK=4", "XP_ADDR=h:1"),
		     ENV("XP_RANK=4", "XP_SIZE=4", "not a rank"));
	expect_error(ENV("XP_SIZE=4"), ENV("XP_SIZE=4", "XP_RANK is not"));
	expect_error(ENV("OMPI_COMM_WORLD_SIZE=2", "OMPI_COMM_WORLD_RANK=x"),
		     ENV("OMPI_COMM_WORLD_RANK=x"));
	expect_error(ENV("PMI_SIZE=2"), ENV("PMI_SIZE=2", "PMI_RANK"));
	expect_error(ENV("WORLD_SIZE=-2", "RANK=0"), ENV("WORLD_SIZE=-2"));
	expect_error(ENV("SLURM_NTASKS=4", "SLURM_PROCID=1x"), ENV("SLURM_PROCID=1x"));
	expect_error(ENV("XP_SIZE=2", "XP_RANK=0", "XP_ADDR=h:1", "XP_BOOT_LISTEN_FD=three"),
		     ENV("XP_BOOT_LISTEN_FD=three"));
	struct xpi_launch l;
	expect(ENV("XP_SIZE=2", "XP_RANK=0", "XP_ADDR=h:1", "XP_BOOT_LISTEN_FD=3"), 0, &l);
	T_EQ(l.listen_fd, 3);
	/* Only rank 0 takes a listening socket over. */
	expect(ENV("XP_SIZE=2", "XP_RANK=1", "XP_ADDR=h:1", "XP_BOOT_LISTEN_FD=3"), 0, &l);
	T_EQ(l.listen_fd, -1);
}

static void test_addresses(void)
{
	struct xpi_launch l;
	/* XP_ADDR as given, IPv6 in brackets. */
	expect(ENV("XP_SIZE=2", "XP_RANK=1", "XP_ADDR=[::1]:4000"), 0, &l);
	T_CHECK(strcmp(l.host, "::1") == 0 && strcmp(l.port, "4000") == 0);
	T_CHECK(strcmp(l.addr, "[::1]:4000") == 0);
	T_CHECK(strcmp(l.addr_from, "XP_ADDR") == 0);
	/* XP_ADDR over MASTER_ADDR/MASTER_PORT and over Slurm's. */
	expect_rendezvous(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=29500",
			      "XP_ADDR=x:1234"),
			  "addr", "x:1234");
	expect_rendezvous(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=5",
			      "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=n1", "XP_ADDR=x:1234"),
			  "addr", "x:1234");

	/* torchrun: MASTER_PORT + 1, whatever the launcher. */
	expect(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=10.0.0.1", "MASTER_PORT=29500"), 0, &l);
	T_CHECK(strcmp(l.host, "10.0.0.1") == 0 && strcmp(l.port, "29501") == 0);
	T_CONTAINS(l.addr_from, "MASTER_PORT=29500 + 1");
	expect_rendezvous(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2",
			      "MASTER_ADDR=[fe80::1]", "MASTER_PORT=65534"),
			  "addr", "[fe80::1]:65535");
	expect_error(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=65535"),
		     ENV("MASTER_PORT=65535", "MASTER_PORT+1", "XP_ADDR"));
	expect_error(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=0"),
		     ENV("MASTER_PORT=0"));
	expect_error(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=http"),
		     ENV("MASTER_PORT=http"));
	expect_error(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m", "MASTER_PORT=70000"),
		     ENV("MASTER_PORT=70000"));
	expect_error(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=m"),
		     ENV("MASTER_ADDR is set but MASTER_PORT is not"));
	expect_error(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_PORT=5"),
		     ENV("MASTER_PORT is set but MASTER_ADDR is not"));
	expect_error(ENV("RANK=0", "WORLD_SIZE=2", "MASTER_ADDR=a b", "MASTER_PORT=5"),
		     ENV("MASTER_ADDR=a b"));

	/* Malformed XP_ADDR. */
	expect_error(ENV("XP_SIZE=2", "XP_RANK=1", "XP_ADDR=127.0.0.1"),
		     ENV("XP_ADDR=127.0.0.1", "host:port"));
	expect_error(ENV("XP_SIZE=2", "XP_RANK=1", "XP_ADDR=127.0.0.1:0"),
		     ENV("XP_ADDR=127.0.0.1:0", "port 0"));
	expect_error(ENV("XP_SIZE=2", "XP_RANK=1", "XP_ADDR=::1:80"), ENV("XP_ADDR=::1:80"));
	expect_error(ENV("XP_SIZE=2", "XP_RANK=1", "XP_ADDR=h:70000"),
		     ENV("XP_ADDR=h:70000", "70000"));

	/* No address at all: each launcher says what to set. */
	expect_error(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2"),
		     ENV("Open MPI", "XP_ADDR", "MASTER_ADDR"));
	expect_error(ENV("XP_RANK=1", "XP_SIZE=2"), ENV("xport", "XP_ADDR"));
	expect_error(ENV("SLURM_PROCID=1", "SLURM_NTASKS=4"),
		     ENV("Slurm", "SLURM_STEP_NODELIST", "XP_ADDR"));
}

static void test_slurm(void)
{
	struct xpi_launch l;
	char port[16];
	/* srun's variables: the first node of the step, the derived port. */
	expect(ENV("SLURM_PROCID=3", "SLURM_NTASKS=4", "SLURM_JOB_ID=123456", "SLURM_STEP_ID=2",
		   "SLURM_STEP_NODELIST=gpu[007-010,3]", "SLURM_JOB_NODELIST=gpu[001-016]",
		   "SLURM_LOCALID=1", "SLURM_NODEID=1"),
	       0, &l);
	T_CHECK(strcmp(l.host, "gpu007") == 0);
	snprintf(port, sizeof(port), "%d", xpi_slurm_port(123456, 2));
	T_CHECK(strcmp(l.port, port) == 0);
	/* The documented rule, by hand: 20000 + (123456 * 101 + 2) mod 12000. */
	T_EQ(xpi_slurm_port(123456, 2), 20000 + (123456 % 600) * 20 + 2);
	T_CONTAINS(l.addr_from, "SLURM_STEP_NODELIST");
	T_CONTAINS(l.addr_from, "SLURM_JOB_ID=123456");
	/* Falls back to the job's node list, then SLURM_NODELIST; SLURM_STEPID. */
	expect_rendezvous(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=1",
			      "SLURM_STEP_ID=0", "SLURM_JOB_NODELIST=a,b"),
			  "host", "a");
	expect_rendezvous(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=1",
			      "SLURM_STEPID=0", "SLURM_NODELIST=rack1-n[3-4],gpu7"),
			  "host", "rack1-n3");
	/* MASTER_ADDR/MASTER_PORT beat the derivation. */
	expect_rendezvous(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=1",
			      "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=a", "MASTER_ADDR=m",
			      "MASTER_PORT=100"),
			  "addr", "m:101");
	/* Only Slurm derives: Open MPI inside an allocation needs an address. */
	expect_error(ENV("OMPI_COMM_WORLD_RANK=1", "OMPI_COMM_WORLD_SIZE=2", "SLURM_JOB_ID=1",
			 "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=a"),
		     ENV("Open MPI", "XP_ADDR"));

	/* Ports: in range, off the ephemeral range; the steps 0 to 19 of 600
	 * consecutive jobs all apart (the window xpi_slurm_port promises),
	 * and the old formula's collision: step 101 of job J against step 0
	 * of job J + 1. */
	for (unsigned long first = 0; first < 5000; first += 1237) {
		static char seen[XPI_SLURM_PORT_SPAN];
		memset(seen, 0, sizeof(seen));
		for (unsigned long job = first; job < first + XPI_SLURM_PORT_JOBS; job++) {
			for (unsigned long step = 0; step < XPI_SLURM_PORT_STEPS; step++) {
				int p = xpi_slurm_port(job, step);
				T_CHECK(p >= 20000 && p < 32000);
				T_EQ(seen[p - 20000], 0);
				seen[p - 20000] = 1;
			}
		}
	}
	for (unsigned long job = 0; job < 100000; job += 13)
		T_CHECK(xpi_slurm_port(job, 101) != xpi_slurm_port(job + 1, 0));
	T_CHECK(xpi_slurm_port(4294967295UL, 4294967279UL) >= 20000);
	T_CHECK(xpi_slurm_port(4294967295UL, 4294967279UL) < 32000);

	/* Ports Slurm reserved for the step win over the formula. */
	expect_rendezvous(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9",
			      "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=a",
			      "SLURM_STEP_RESV_PORTS=12000-12003"),
			  "addr", "a:12000");
	expect_rendezvous(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9",
			      "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=a",
			      "SLURM_STEP_RESV_PORTS=12007,12009"),
			  "addr", "a:12007");
	expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9", "SLURM_STEP_ID=0",
			 "SLURM_STEP_NODELIST=a", "SLURM_STEP_RESV_PORTS=x12"),
		     ENV("SLURM_STEP_RESV_PORTS=x12", "port list"));
	expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9", "SLURM_STEP_ID=0",
			 "SLURM_STEP_NODELIST=a", "SLURM_STEP_RESV_PORTS=70000"),
		     ENV("SLURM_STEP_RESV_PORTS=70000"));

	/* Every missing or malformed piece names its variable. */
	expect_error(
		ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_STEP_ID=0", "SLURM_STEP_NODELIST=a"),
		ENV("SLURM_JOB_ID is not set", "srun", "XP_ADDR"));
	expect_error(
		ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9", "SLURM_STEP_NODELIST=a"),
		ENV("SLURM_STEP_ID is not set"));
	expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=x9", "SLURM_STEP_ID=0",
			 "SLURM_STEP_NODELIST=a"),
		     ENV("SLURM_JOB_ID=x9"));
	expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9", "SLURM_STEP_ID=-1",
			 "SLURM_STEP_NODELIST=a"),
		     ENV("SLURM_STEP_ID=-1"));
	expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9",
			 "SLURM_STEP_ID=4294967294", "SLURM_STEP_NODELIST=a"),
		     ENV("SLURM_STEP_ID=4294967294", "batch"));
	expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9", "SLURM_STEP_ID=0",
			 "SLURM_STEP_NODELIST=n[1-"),
		     ENV("SLURM_STEP_NODELIST=n[1-", "not a Slurm host list", "XP_ADDR"));
	expect_error(ENV("SLURM_PROCID=0", "SLURM_NTASKS=2", "SLURM_JOB_ID=9", "SLURM_STEP_ID=0",
			 "SLURM_JOB_NODELIST=a,,b"),
		     ENV("SLURM_JOB_NODELIST=a,,b", "empty entry", "character 3"));
}

static void expect_first(const char *list, const char *want)
{
	char out[256];
	const char *why = NULL;
	size_t at = 0;
	int rc = xpi_hostlist_first(list, out, sizeof(out), &why, &at);
	if (rc != 0)
		T_FAIL("\"%s\": %s at %zu", list, why, at);
	if (strcmp(out, want) != 0)
		T_FAIL("\"%s\": first host \"%s\", expected \"%s\"", list, out, want);
}

#define ANY_AT ((size_t)-1)

static void expect_bad(const char *list, const char *why_part, size_t want_at)
{
	char out[256];
	const char *why = NULL;
	size_t at = 999;
	T_EQ(xpi_hostlist_first(list, out, sizeof(out), &why, &at), -EINVAL);
	T_CHECK(why != NULL);
	fprintf(stderr, "   \"%s\": %s (at %zu)\n", list, why, at);
	T_CONTAINS(why, why_part);
	if (want_at != ANY_AT)
		T_EQ(at, want_at);
}

static void test_hostlist(void)
{
	expect_first("node01", "node01");
	expect_first("a,b", "a");
	expect_first("n[001-004,9]", "n001");
	expect_first("n[9,001-004]", "n9");
	expect_first("rack1-n[3-4],gpu7", "rack1-n3");
	expect_first("gpu7,rack1-n[3-4]", "gpu7");
	expect_first("n[0001-0100]", "n0001");
	expect_first("n[7]", "n7");
	expect_first("r[1-2]n[01-08]", "r1n01");
	expect_first("n[1-2]-ib", "n1-ib");
	expect_first("host.example.org", "host.example.org");
	expect_first("under_score", "under_score");
	expect_first("[1-3]", "1");
	expect_first("localhost", "localhost");
	expect_first("n[01-01]", "n01");
	expect_first("n[8-10]", "n8");

	/* Malformed lists: the reason, and where (ANY_AT: not pinned). */
	static const struct {
		const char *list, *why;
		size_t at;
	} bad[] = {
		{ "", "empty host list", 0 },
		{ ",a", "empty entry", 0 },
		{ "a,", "empty entry", 2 },
		{ "a,,b", "empty entry", 2 },
		{ "n[1-3", "never closed", 5 },
		{ "n[", "never closed", 2 },
		{ "n[]", "empty range", 2 },
		{ "n[1,]", "empty range", 4 },
		{ "n[,1]", "empty range", 2 },
		{ "n1]", "']' without a '['", 2 },
		{ "n[1-]", "without an upper bound", 4 },
		{ "n[5-3]", "lower bound is above", ANY_AT },
		{ "n[010-9]", "lower bound is above", ANY_AT },
		{ "n[a-b]", "other than numbers", 2 },
		{ "n[1[2]]", "inside brackets", 3 },
		{ "n[1-2x]", "other than numbers", 5 },
		{ "no de", "not allowed", 2 },
		{ "a,b c", "not allowed", 3 },
		{ "a,b[1-2", "never closed", ANY_AT },
		{ "a,b[2-1]", "lower bound is above", ANY_AT },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		expect_bad(bad[i].list, bad[i].why, bad[i].at);

	/* Too long for the output buffer; NULL list. */
	char big[400], out[16];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	const char *why = NULL;
	T_EQ(xpi_hostlist_first(big, out, sizeof(out), &why, NULL), -EINVAL);
	T_CONTAINS(why, "too long");
	T_EQ(xpi_hostlist_first("n[123456789]", out, 8, &why, NULL), -EINVAL);
	T_EQ(xpi_hostlist_first("n[1234]", out, 6, &why, NULL), 0);
	T_CHECK(strcmp(out, "n1234") == 0);
	T_EQ(xpi_hostlist_first(NULL, out, sizeof(out), &why, NULL), -EINVAL);
}

static void test_unique_id_layout(void)
{
	struct xpi_uid u = { .family = AF_INET, .port = 0x1234 }, v;
	uint8_t b[XPI_UID_LEN], c[XPI_UID_LEN];
	const char *why = NULL;
	u.addr[0] = 10;
	u.addr[3] = 7;
	for (int i = 0; i < XPI_UID_KEY_LEN; i++)
		u.key[i] = (uint8_t)(0xa0 + i);
	xpi_uid_write(&u, b);
	/* The layout, pinned: magic, version, family, port, address, key. */
	T_CHECK(memcmp(b, "XPID\0\1\4\0\x12\x34\0\0\0\0\0\0\x0a\0\0\x07", 20) == 0);
	T_EQ(b[32], 0xa0);
	T_EQ(b[63], 0xa0 + 31);
	T_EQ(xpi_uid_parse(b, sizeof(b), &v, &why), 0);
	T_CHECK(v.family == AF_INET && v.port == 0x1234 && memcmp(v.key, u.key, 32) == 0);
	T_CHECK(memcmp(v.addr, u.addr, 4) == 0);
	char host[64];
	xpi_uid_host(&v, host, sizeof(host));
	T_CHECK(strcmp(host, "10.0.0.7") == 0);

	/* IPv6 with a scope. */
	struct xpi_uid w = { .family = AF_INET6, .port = 9, .scope_id = 3 };
	w.addr[0] = 0xfe;
	w.addr[1] = 0x80;
	w.addr[15] = 1;
	xpi_uid_write(&w, c);
	T_EQ(xpi_uid_parse(c, sizeof(c), &v, &why), 0);
	T_CHECK(v.family == AF_INET6 && v.scope_id == 3 && v.port == 9);
	xpi_uid_host(&v, host, sizeof(host));
	T_CHECK(strcmp(host, "fe80::1%3") == 0);

	/* Every single-bit change is refused, with a reason. */
	for (size_t bit = 0; bit < sizeof(b) * 8; bit++) {
		memcpy(c, b, sizeof(b));
		c[bit / 8] ^= (uint8_t)(1u << (bit % 8));
		why = NULL;
		T_EQ(xpi_uid_parse(c, sizeof(c), &v, &why), -EPROTO);
		T_CHECK(why != NULL);
	}
	memcpy(c, b, sizeof(b));
	c[40] ^= 1;
	T_EQ(xpi_uid_parse(c, sizeof(c), &v, &why), -EPROTO);
	T_CONTAINS(why, "checksum");
	c[0] = 'Y';
	T_EQ(xpi_uid_parse(c, sizeof(c), &v, &why), -EPROTO);
	T_CONTAINS(why, "magic");
	memcpy(c, b, sizeof(b));
	c[5] = 2;
	T_EQ(xpi_uid_parse(c, sizeof(c), &v, &why), -EPROTO);
	T_CONTAINS(why, "version");
	T_EQ(xpi_uid_parse(b, sizeof(b) - 1, &v, &why), -EPROTO);
	T_CONTAINS(why, "128 bytes");
	T_EQ(xpi_uid_parse(NULL, 0, &v, &why), -EPROTO);

	/* Well-formed checksums over bad fields: each named. */
	static const struct {
		int family;
		uint16_t port;
		uint32_t scope;
		int zero_addr;
		const char *why;
	} bad[] = {
		{ AF_INET, 0, 0, 0, "port 0" },
		{ AF_INET, 5, 0, 1, "unspecified address" },
		{ AF_INET6, 5, 0, 1, "unspecified address" },
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct xpi_uid x = { .family = (sa_family_t)bad[i].family,
				     .port = bad[i].port,
				     .scope_id = bad[i].scope };
		x.addr[0] = bad[i].zero_addr ? 0 : 1;
		xpi_uid_write(&x, c);
		T_EQ(xpi_uid_parse(c, sizeof(c), &v, &why), -EPROTO);
		T_CONTAINS(why, bad[i].why);
	}
}

int main(void)
{
	T_RUN(test_precedence);
	T_RUN(test_pmi2_wanted);
	T_RUN(test_rank_size_errors);
	T_RUN(test_addresses);
	T_RUN(test_slurm);
	T_RUN(test_hostlist);
	T_RUN(test_unique_id_layout);
	return 0;
}
