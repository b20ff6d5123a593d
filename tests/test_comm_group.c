/* SPDX-License-Identifier: MIT */
/*
 * xp_comm_create_group: a communicator made by the ranks it lists only,
 * over real transports (shm or tcp), four processes.
 *
 *   apart    ranks {3,1} make one while 0 and 2 exchange messages of their
 *            own on the world and then make {2,0} with another tag; each
 *            new communicator ranks its members in the list's order,
 *            reduces, broadcasts and carries messages; the world's
 *            collectives still line up afterwards (the creations took
 *            nothing of its count), and a program's receive of any source
 *            and any tag on the world never saw the creations' messages.
 *   overlap  {0,1,2} (tag 10) and {3,2,1} (tag 11) at the same time: rank 3
 *            starts at once, so its messages reach 1 and 2 while they are
 *            still in the first; plus a communicator of each rank alone.
 *   invalid  each wrong argument fails with -EINVAL, its detail naming it.
 *   dead     rank 3 dies; ranks 0 and 1 making {0,1,3} fail well within
 *            the timeout naming rank 3, and then {2,0,1} (3 dead, not
 *            listed) works.
 *   absent   rank 2 is listed but never calls: the others fail with
 *            -ETIMEDOUT after the context's timeout.
 *
 * usage: test_comm_group shm|tcp apart|overlap|invalid|dead|absent
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mproc.h"
#include "testutil.h"

#define NRANKS 4
#define BIG (1 << 16) /* floats: past shared memory's small-vector path */
#define DEAD_TIMEOUT_MS 20000
#define ABSENT_TIMEOUT_MS 2000

static const char *transport, *section;

/* Progresses for @s seconds, as a live rank that is busy elsewhere. */
static void busy_for(xp_context_t *ctx, double s)
{
	double until = t_now_s() + s;
	while (t_now_s() < until)
		xp_progress(ctx);
}

/*
 * Checks @c, made from the world's @ranks (@n of them) by this rank
 * (@wr): its numbering follows the list, and an allreduce (small and
 * large), a broadcast and a ring of messages over it give what they must.
 */
static void check_group(xp_comm_t *c, const int *ranks, int n, int wr)
{
	int me = -1;
	for (int i = 0; i < n; i++)
		if (ranks[i] == wr)
			me = i;
	T_EQ(xp_comm_size(c), n);
	T_EQ(xp_comm_rank(c), me);

	int32_t sum = wr + 1, want = 0;
	for (int i = 0; i < n; i++)
		want += ranks[i] + 1;
	T_OK(xp_allreduce(c, XP_IN_PLACE, &sum, 1, XP_INT32, XP_SUM));
	T_EQ(sum, want);

	float *v = malloc(BIG * sizeof(float));
	T_CHECK(v != NULL);
	for (int k = 0; k < BIG; k++)
		v[k] = (float)((wr + 1) * (k % 5 + 1));
	T_OK(xp_allreduce(c, XP_IN_PLACE, v, BIG, XP_FLOAT32, XP_SUM));
	for (int k = 0; k < BIG; k++)
		if (v[k] != (float)(want * (k % 5 + 1)))
			T_FAIL("rank %d: element %d of the group's allreduce is %g, not %d", wr, k,
			       (double)v[k], want * (k % 5 + 1));
	free(v);

	/* Member 0 is the list's first: the broadcast carries its world rank. */
	int32_t root_wr = me == 0 ? wr : -1;
	T_OK(xp_bcast(c, &root_wr, 1, XP_INT32, 0));
	T_EQ(root_wr, ranks[0]);

	/* A ring of messages: sources come back as ranks of the group. */
	int32_t out = wr, in = -1;
	xp_request_t *rr;
	xp_status_t st;
	T_OK(xp_irecv(c, &in, sizeof(in), XP_ANY_SOURCE, 5, XP_TAG_EXACT, &rr));
	T_OK(xp_send(c, &out, sizeof(out), (me + 1) % n, 5));
	T_OK(xp_wait(&rr, XP_TIMEOUT_DEFAULT, &st));
	T_EQ(st.source, (me + n - 1) % n);
	T_EQ(in, ranks[(me + n - 1) % n]);
}

/* The world's collectives still agree: every rank's count of them is
 * the same after the creations, whichever it took part in. */
static void check_world(xp_comm_t *world)
{
	int32_t s = xp_comm_rank(world);
	T_OK(xp_allreduce(world, XP_IN_PLACE, &s, 1, XP_INT32, XP_SUM));
	T_EQ(s, NRANKS * (NRANKS - 1) / 2);
	T_OK(xp_barrier(world));
}

static void apart(xp_context_t *ctx, int r)
{
	xp_comm_t *world = xp_comm_world(ctx), *g = NULL;
	check_world(world);
	static const int odd[] = { 3, 1 }, even[] = { 2, 0 };
	if (r == 1 || r == 3) {
		/* A receive of anything on the world, meanwhile: the creation's
		 * messages are in another tag space and must not feed it. */
		int32_t any;
		xp_request_t *user;
		T_OK(xp_irecv(world, &any, sizeof(any), XP_ANY_SOURCE, 0, XP_TAG_ANY, &user));
		T_OK(xp_comm_create_group(world, 2, odd, 7, &g));
		check_group(g, odd, 2, r);
		int done = xp_test(&user, NULL);
		if (done != 0)
			T_FAIL("rank %d: the program's receive on the world completed (%d)", r,
			       done);
		T_OK(xp_cancel(user));
		xp_status_t st;
		T_EQ(xp_wait(&user, XP_TIMEOUT_DEFAULT, &st), -ECANCELED);
	} else {
		/* Their own exchange first, on the world, while 1 and 3 agree;
		 * then their own communicator, with another tag. */
		int peer = 2 - r;
		for (int i = 0; i < 20; i++) {
			int32_t out = 100 * r + i, in = -1;
			xp_request_t *rr;
			T_OK(xp_irecv(world, &in, sizeof(in), peer, (uint64_t)i, XP_TAG_EXACT,
				      &rr));
			T_OK(xp_send(world, &out, sizeof(out), peer, (uint64_t)i));
			T_OK(xp_wait(&rr, XP_TIMEOUT_DEFAULT, NULL));
			T_EQ(in, 100 * peer + i);
		}
		T_OK(xp_comm_create_group(world, 2, even, 8, &g));
		check_group(g, even, 2, r);
	}
	xp_comm_free(g);
	check_world(world);
}

static void overlap(xp_context_t *ctx, int r)
{
	xp_comm_t *world = xp_comm_world(ctx), *a = NULL, *b = NULL, *self = NULL;
	static const int la[] = { 0, 1, 2 }, lb[] = { 3, 2, 1 };
	check_world(world);
	if (r == 0)
		busy_for(ctx, 0.05); /* 1 and 2 wait in the first while 3's messages come */
	if (r != 3)
		T_OK(xp_comm_create_group(world, 3, la, 10, &a));
	if (r != 0)
		T_OK(xp_comm_create_group(world, 3, lb, 11, &b));
	/* Ids: wherever two of these meet on a rank, they differ (the
	 * creations over ranks in common agreed on different ones). */
	if (a != NULL)
		check_group(a, la, 3, r);
	if (b != NULL)
		check_group(b, lb, 3, r);
	/* A communicator of this rank alone: no exchange at all. */
	T_OK(xp_comm_create_group(world, 1, &r, 12, &self));
	T_EQ(xp_comm_size(self), 1);
	T_EQ(xp_comm_rank(self), 0);
	int32_t x = r;
	T_OK(xp_allreduce(self, XP_IN_PLACE, &x, 1, XP_INT32, XP_SUM));
	T_EQ(x, r);
	xp_comm_free(self);
	xp_comm_free(a);
	xp_comm_free(b);
	check_world(world);
	/* The same tag again, once those are done: a tag may be reused. */
	if (r != 3) {
		T_OK(xp_comm_create_group(world, 3, la, 10, &a));
		check_group(a, la, 3, r);
		xp_comm_free(a);
	}
	check_world(world);
}

/* @call fails with -EINVAL, its detail naming the call and containing @what. */
#define T_INVALID(call, what)                                                                      \
	do {                                                                                       \
		int _rc = (call);                                                                  \
		if (_rc != -EINVAL)                                                                \
			T_FAIL("%s returned %d, not -EINVAL (%s)", #call, _rc, xp_error_detail()); \
		T_CONTAINS(xp_error_detail(), "xp_comm_create_group");                             \
		T_CONTAINS(xp_error_detail(), what);                                               \
	} while (0)

static void invalid(xp_context_t *ctx, int r)
{
	xp_comm_t *world = xp_comm_world(ctx), *out = NULL;
	int others[] = { (r + 1) % NRANKS, (r + 2) % NRANKS };
	int twice[] = { r, (r + 1) % NRANKS, r };
	int far[] = { r, NRANKS };
	int neg[] = { -1, r };
	int all[NRANKS + 1] = { 0, 1, 2, 3, 0 };
	T_INVALID(xp_comm_create_group(NULL, 1, &r, 0, &out), "the communicator is NULL");
	T_INVALID(xp_comm_create_group(world, 1, &r, 0, NULL), "the result pointer is NULL");
	T_INVALID(xp_comm_create_group(world, 1, NULL, 0, &out), "the list of ranks is NULL");
	T_INVALID(xp_comm_create_group(world, 0, &r, 0, &out), "n is 0");
	T_INVALID(xp_comm_create_group(world, -3, &r, 0, &out), "n is -3");
	T_INVALID(xp_comm_create_group(world, NRANKS + 1, all, 0, &out), "n is 5");
	T_INVALID(xp_comm_create_group(world, 2, others, 0, &out), "this rank");
	T_INVALID(xp_comm_create_group(world, 2, others, 0, &out), "not among");
	T_INVALID(xp_comm_create_group(world, 3, twice, 0, &out), "listed twice");
	T_INVALID(xp_comm_create_group(world, 3, twice, 0, &out), "ranks[0] and ranks[2]");
	T_INVALID(xp_comm_create_group(world, 2, far, 0, &out), "ranks[1] is 4");
	T_INVALID(xp_comm_create_group(world, 2, neg, 0, &out), "ranks[0] is -1");
	T_CHECK(out == NULL); /* written only on success */
	/* Nothing was taken or sent: the world goes on, and a good call works. */
	check_world(world);
	static const int both[] = { 1, 0 }, rest[] = { 2, 3 };
	T_OK(xp_comm_create_group(world, 2, r < 2 ? both : rest, 0, &out));
	check_group(out, r < 2 ? both : rest, 2, r);
	xp_comm_free(out);
	check_world(world);
}

static void dead(xp_context_t *ctx, int r)
{
	xp_comm_t *world = xp_comm_world(ctx), *g = NULL;
	static const int with3[] = { 0, 1, 3 }, live[] = { 2, 0, 1 };
	T_OK(xp_barrier(world));
	if (r == 3) {
		busy_for(ctx, 0.1); /* 0 and 1 are in the creation by then */
		_exit(0);           /* dies without a word */
	}
	if (r != 2) {
		double t0 = t_now_s();
		int rc = xp_comm_create_group(world, 3, with3, 1, &g);
		double took = t_now_s() - t0;
		fprintf(stderr, "rank %d: xp_comm_create_group returned %d after %.2f s: %s\n", r,
			rc, took, xp_error_detail());
		T_CHECK(rc < 0);
		T_CHECK(g == NULL);
		T_CHECK(took < DEAD_TIMEOUT_MS / 1000.0 / 2); /* detected, not timed out */
		T_CONTAINS(xp_error_detail(), "rank 3");
		T_CONTAINS(xp_error_detail(), "xp_comm_create_group");
	}
	/* Rank 3 is dead but not listed: none of this one's business. */
	T_OK(xp_comm_create_group(world, 3, live, 2, &g));
	check_group(g, live, 3, r);
	xp_comm_free(g);
}

static void absent(xp_context_t *ctx, int r)
{
	xp_comm_t *world = xp_comm_world(ctx), *g = NULL;
	static const int list[] = { 0, 1, 2 };
	T_OK(xp_barrier(world));
	if (r >= 2) {
		/* Alive and progressing, but never calls it. */
		busy_for(ctx, ABSENT_TIMEOUT_MS / 1000.0 + 0.5);
		return;
	}
	double t0 = t_now_s();
	int rc = xp_comm_create_group(world, 3, list, 3, &g);
	double took = t_now_s() - t0;
	fprintf(stderr, "rank %d: xp_comm_create_group returned %d after %.2f s: %s\n", r, rc, took,
		xp_error_detail());
	T_EQ(rc, -ETIMEDOUT);
	T_CHECK(g == NULL);
	T_CHECK(took >= ABSENT_TIMEOUT_MS / 1000.0 * 0.9);
	T_CONTAINS(xp_error_detail(), "xp_comm_create_group");
	T_CONTAINS(xp_error_detail(), "timed out");
}

static int body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	if (strcmp(section, "apart") == 0)
		apart(ctx, rank);
	else if (strcmp(section, "overlap") == 0)
		overlap(ctx, rank);
	else if (strcmp(section, "invalid") == 0)
		invalid(ctx, rank);
	else if (strcmp(section, "dead") == 0)
		dead(ctx, rank);
	else
		absent(ctx, rank);
	xp_finalize(ctx);
	fflush(NULL);
	_exit(0);
}

static void env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_TRANSPORTS", transport, 1);
	if (strcmp(section, "dead") == 0) {
		mproc_setenv_int("XP_TIMEOUT_MS", DEAD_TIMEOUT_MS);
		/* xp_finalize waits this long for rank 3, which never comes. */
		setenv("XP_BOOT_TIMEOUT_MS", "2000", 1);
		setenv("XP_LOG_LEVEL", "none", 1);
	} else if (strcmp(section, "absent") == 0) {
		mproc_setenv_int("XP_TIMEOUT_MS", ABSENT_TIMEOUT_MS);
	}
}

int main(int argc, char **argv)
{
	static const char *const sections[] = { "apart", "overlap", "invalid", "dead", "absent" };
	bool known = false;
	for (size_t i = 0; argc == 3 && i < sizeof(sections) / sizeof(sections[0]); i++)
		known |= strcmp(argv[2], sections[i]) == 0;
	if (!known) {
		fprintf(stderr, "usage: %s shm|tcp apart|overlap|invalid|dead|absent\n", argv[0]);
		return 2;
	}
	transport = argv[1];
	section = argv[2];
	mproc_clear_launcher_env();
	return mproc_run(NRANKS, body, NULL, 90, env, NULL) == 0 ? 0 : 1;
}
