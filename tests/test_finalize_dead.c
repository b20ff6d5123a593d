/* SPDX-License-Identifier: MIT */
/*
 * Survivors that finalize as soon as their collective fails must still
 * name the rank that died (issue 24, 5.2). Four ranks on two fake hosts
 * (XP_HOST_ID: ranks 0-1 and 2-3, shared memory within, TCP across)
 * run allreduces; one rank kills itself (SIGKILL) in the middle of one,
 * and each survivor calls xp_finalize the moment its call fails. A fast
 * survivor's xp_finalize used to return at once, so a slower one saw it
 * leave and blamed it ("rank 0 of it is lost (has finalized)") instead of
 * the rank that was killed. Ten jobs, the killed rank varying; every
 * survivor's error must name it, whatever order they finish in.
 *
 * Usage: test_finalize_dead [TRANSPORTS]. Exit: 0 pass, 1 fail.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mproc.h"
#include "testutil.h"

#define NRANKS 4
#define JOBS 10
#define COUNT (1 << 14)
#define ROUNDS 100000

static int dead_rank;
static int job;

static void env_of(int rank, void *arg)
{
	(void)arg;
	char host[32];
	snprintf(host, sizeof(host), "test-host-%d", rank / 2);
	setenv("XP_HOST_ID", host, 1);
}

static int body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	float *v = malloc(COUNT * sizeof(float));
	T_CHECK(v != NULL);
	for (int i = 0; i < COUNT; i++)
		v[i] = 1;
	T_OK(xp_barrier(w));
	int rc = 0, round;
	for (round = 0; round < ROUNDS && rc == 0; round++) {
		if (rank == dead_rank && round == 20 + job) {
			/* Mid-allreduce: the others are in this one too. */
			xp_request_t *r;
			T_OK(xp_iallreduce(w, XP_IN_PLACE, v, COUNT, XP_FLOAT32, XP_SUM, &r));
			for (int i = 0; i < 5 * job; i++)
				(void)xp_test(&r, NULL);
			raise(SIGKILL);
		}
		rc = xp_allreduce(w, XP_IN_PLACE, v, COUNT, XP_FLOAT32, XP_SUM);
	}
	char detail[512];
	snprintf(detail, sizeof(detail), "%s", xp_error_detail());
	xp_finalize(ctx); /* at once, as a program that gives up would */
	fprintf(stderr, "   rank %d: xp_allreduce %d returned %d: %s\n", rank, round, rc, detail);
	T_CHECK(rc < 0);
	char want[64];
	snprintf(want, sizeof(want), "rank %d of it is lost", dead_rank);
	T_CONTAINS(detail, want);
	free(v);
	return 0;
}

int main(int argc, char **argv)
{
	unsetenv("XP_TRANSPORTS");
	if (argc > 1)
		setenv("XP_TRANSPORTS", argv[1], 1);
	int failed = 0;
	for (job = 0; job < JOBS; job++) {
		dead_rank = 1 + job % (NRANKS - 1);
		fprintf(stderr, "-- job %d: rank %d killed\n", job, dead_rank);
		struct mproc_result res;
		mproc_run(NRANKS, body, NULL, 60, env_of, &res);
		for (int r = 0; r < NRANKS; r++) {
			int st = res.status[r];
			bool ok = r == dead_rank ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL :
						   WIFEXITED(st) && WEXITSTATUS(st) == 0;
			failed += !ok;
		}
	}
	fprintf(stderr, "%d rank results wrong over %d jobs\n", failed, JOBS);
	return failed == 0 ? 0 : 1;
}
