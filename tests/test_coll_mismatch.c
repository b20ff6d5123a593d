/* SPDX-License-Identifier: MIT */
/*
 * Members that call a collective with different counts, types or roots:
 * every member's call fails (never hangs past the timeout), and where the
 * protocol sees it (a message of another length than expected) the error
 * says that the members disagree and names the rank that differs. Ranks
 * that see nothing wrong themselves fail at the timeout, naming the step.
 *
 * In-process ranks, and under xprun over shared memory (xprun -n 4
 * test_coll_mismatch): an allreduce there sends no message, and the
 * members compare each other's headers in shared memory (plain memory for
 * in-process ranks).
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define NRANKS 4
#define TIMEOUT_MS 2000

static _Atomic int said_disagree;

/* The rank that differs in case @which. */
static const int odd_rank[] = { 2, 1, 1, 3 };

static int run_case(xp_comm_t *w, int which)
{
	int r = xp_comm_rank(w);
	float v[128] = { 0 };
	double t0 = t_now_s();
	int rc;
	if (which == 0) /* rank 2 thinks the vector is longer */
		rc = xp_allreduce(w, XP_IN_PLACE, v, r == 2 ? 101 : 100, XP_FLOAT32, XP_SUM);
	else if (which == 1) /* rank 1 thinks it is float64 */
		rc = xp_allreduce(w, XP_IN_PLACE, v, 50, r == 1 ? XP_FLOAT64 : XP_FLOAT32, XP_SUM);
	else if (which == 2) /* rank 1 thinks it is float16: reduced in float32 all the same */
		rc = xp_allreduce(w, XP_IN_PLACE, v, 50, r == 1 ? XP_FLOAT16 : XP_FLOAT32, XP_SUM);
	else /* rank 3 thinks another rank is the root */
		rc = xp_bcast(w, v, 20, XP_FLOAT32, r == 3 ? 1 : 0);
	double took = t_now_s() - t0;
	fprintf(stderr, "   case %d rank %d: %d after %.2f s: %s\n", which, r, rc, took,
		xp_error_detail());
	if (which != 3 || r == 3)
		T_CHECK(rc < 0); /* those that cannot have the right answer fail */
	T_CHECK(took < TIMEOUT_MS / 1000.0 + 1.0);
	if (rc < 0 && strstr(xp_error_detail(), "disagree") != NULL) {
		/* Those that agree name the one that differs. */
		char odd[32];
		snprintf(odd, sizeof(odd), "rank %d ", odd_rank[which]);
		if (r != odd_rank[which])
			T_CONTAINS(xp_error_detail(), odd);
		return 1;
	}
	return 0;
}

static int body(xp_context_t *ctx, void *arg)
{
	if (run_case(xp_comm_world(ctx), *(int *)arg))
		atomic_fetch_add(&said_disagree, 1);
	return 0;
}

/* Under a launcher: the three allreduce cases, each on a communicator of
 * its own (a failed collective leaves its communicator unusable). */
static int launched(xp_config_t *cfg)
{
	xp_context_t *ctx;
	T_OK(xp_init(cfg, &ctx));
	T_EQ(xp_size(ctx), NRANKS);
	for (int which = 0; which < 3; which++) {
		xp_comm_t *c;
		T_OK(xp_comm_dup(xp_comm_world(ctx), &c));
		int32_t mine = run_case(c, which), all[NRANKS];
		xp_comm_free(c);
		T_OK(xp_oob_allgather(ctx, &mine, sizeof(mine), all));
		int said = 0;
		for (int q = 0; q < NRANKS; q++)
			said += all[q];
		if (said == 0)
			T_FAIL("case %d: no rank said the members disagree", which);
	}
	xp_finalize(ctx);
	printf("coll_mismatch: ok, %d processes\n", NRANKS);
	return 0;
}

int main(void)
{
	xp_config_t cfg;
	xp_config_init(&cfg);
	cfg.timeout_ms = TIMEOUT_MS;
	cfg.log_level = XP_LOG_NONE;
	if (getenv("XP_SIZE") != NULL)
		return launched(&cfg);
	for (int which = 0; which < 4; which++) {
		atomic_store(&said_disagree, 0);
		T_OK(xp_local_run(NRANKS, &cfg, body, &which));
		/* The length a member did not expect is seen by whoever receives
		 * it; with a wrong root only its would-be children see nothing
		 * they can check, so only the first three must say it. */
		if (which < 3 && atomic_load(&said_disagree) == 0)
			T_FAIL("case %d: no rank said the members disagree", which);
	}
	printf("coll_mismatch: ok\n");
	return 0;
}
