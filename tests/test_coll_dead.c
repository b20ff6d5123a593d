/* SPDX-License-Identifier: MIT */
/*
 * A rank that dies mid-allreduce: every other rank's xp_allreduce fails
 * well within the timeout with an error naming the dead rank, never
 * hangs, whether or not it talks to that rank in the algorithm's steps.
 * Five processes over shm or tcp; rank 3 dies while the others are in
 * their third allreduce (of a ring-sized vector, so most of them are
 * waiting on live neighbours when it happens).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mproc.h"
#include "testutil.h"

#define NRANKS 5
#define DEAD 3
#define TIMEOUT_MS 20000
#define COUNT (1 << 16)

static const char *transport;

static int body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	float *v = malloc(COUNT * sizeof(float));
	for (int i = 0; i < COUNT; i++)
		v[i] = 1;
	for (int round = 0; round < 2; round++)
		T_OK(xp_allreduce(w, XP_IN_PLACE, v, COUNT, XP_FLOAT32, XP_SUM));
	T_OK(xp_barrier(w));
	if (rank == DEAD) {
		/* The others are in the allreduce after 100 ms. Progressing
		 * meanwhile, as a live rank does: over a transport that
		 * resends from user space (dpdk) our last barrier messages
		 * may need it, or the others' barrier would fail instead. */
		double until = t_now_s() + 0.1;
		while (t_now_s() < until)
			xp_progress(ctx);
		_exit(0); /* dies without a word */
	}
	double t0 = t_now_s();
	int rc = xp_allreduce(w, XP_IN_PLACE, v, COUNT, XP_FLOAT32, XP_SUM);
	double took = t_now_s() - t0;
	fprintf(stderr, "rank %d: xp_allreduce returned %d after %.2f s: %s\n", rank, rc, took,
		xp_error_detail());
	T_CHECK(rc < 0);
	T_CHECK(took < TIMEOUT_MS / 1000.0 / 2); /* detected, not timed out */
	T_CONTAINS(xp_error_detail(), "rank 3");
	T_CONTAINS(xp_error_detail(), "xp_allreduce");
	free(v);
	xp_finalize(ctx); /* rank 3 never comes: warns after the boot timeout */
	_exit(0);
}

static void env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_TRANSPORTS", transport, 1);
	char t[16];
	snprintf(t, sizeof(t), "%d", TIMEOUT_MS);
	setenv("XP_TIMEOUT_MS", t, 1);
	setenv("XP_BOOT_TIMEOUT_MS", "2000", 1);
	setenv("XP_LOG_LEVEL", "none", 1);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s shm|tcp\n", argv[0]);
		return 2;
	}
	transport = argv[1];
	return mproc_run(NRANKS, body, NULL, 60, env, NULL) == 0 ? 0 : 1;
}
