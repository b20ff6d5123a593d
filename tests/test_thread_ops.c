/* SPDX-License-Identifier: MIT */
/*
 * Several threads of one rank post, cancel and call the out-of-band
 * functions while another thread of the same rank waits in xp_wait, over
 * one transport, on two ranks that each run:
 *
 *   waiter     posts a receive for a message the peer sends only once
 *              every other thread of both ranks is done, and waits for it
 *              (deadline WAITER_MS): it spans the whole test, spinning with
 *              the owner token or asleep.
 *   senders    SENDERS threads, each a stream of eager and rendezvous
 *              messages to the peer on its own tags (low bits vary).
 *   receivers  RECEIVERS threads, one per peer stream, keeping WINDOW
 *              receives posted ahead (exact ones, or any-source ones with a
 *              mask that leaves the low bits free): each must get the
 *              stream's messages in send order, intact.
 *   canceller  receives for a tag never sent, cancelled (-ECANCELED) or
 *              timed out (-ETIMEDOUT), and rendezvous sends the peer never
 *              receives, cancelled (-ECANCELED).
 *   oob        OOB_ROUNDS of xp_oob_barrier and xp_oob_allgather, whose
 *              results are checked; none may wait for the waiter's
 *              deadline (each must end within OOB_MAX_MS).
 *
 * Usage: test_thread_ops inproc|shm|tcp
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xport/xport.h"
#include "pattern.h"
#include "testutil.h"
#include "tl_job.h"

#define SENDERS 2
#define RECEIVERS SENDERS /* one per peer stream */
#define PER_STREAM 2000
#define WINDOW 6
#define CANCELS 400
#define OOB_ROUNDS 200
#define OOB_MAX_MS 5000
#define WAITER_MS 60000
#define WAIT_MS 20000
#define BIG ((size_t)256 << 10)
#define FINAL_TAG 0x7000
#define NEVER_TAG 0x7100  /* sent and withdrawn, never received */
#define NOBODY_TAG 0x7200 /* received and cancelled, never sent */

static const char *transport;

struct rank_state {
	xp_context_t *ctx;
	size_t thr;
	int me, peer;
	_Atomic int waiter_rc;
	double oob_max_ms;
};

struct thread_arg {
	struct rank_state *rs;
	int index;
};

static double now_ms(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1e3 + (double)t.tv_nsec / 1e6;
}

/* What the sending rank @from's stream @i sends as message @seq: the
 * receiver computes the same. */
static uint64_t stream_tag(int from, int i, int seq)
{
	return (uint64_t)(0x10 + from * SENDERS + i) << 8 | (uint64_t)(seq % 7);
}

static size_t stream_len(const struct rank_state *rs, int i, int seq)
{
	uint32_t x = (uint32_t)(seq * 2654435761u) ^ (uint32_t)(i * 40503u);
	x ^= x >> 15;
	switch (x % 8) {
	case 0:
		return 0;
	case 1:
		return rs->thr + x % (BIG - rs->thr); /* rendezvous */
	case 2:
		return rs->thr - 1;
	default:
		return x % 512;
	}
}

static uint32_t stream_seed(int from, int i, int seq)
{
	return (uint32_t)(from * 1000003 + i * 7919 + seq + 1);
}

static void *waiter(void *p)
{
	struct rank_state *rs = p;
	int v = 0;
	xp_request_t *r;
	T_OK(xp_irecv(xp_comm_world(rs->ctx), &v, sizeof(v), rs->peer, FINAL_TAG, XP_TAG_EXACT,
		      &r));
	int rc = xp_wait(&r, WAITER_MS, NULL);
	if (rc == 0 && v != rs->peer + 1)
		rc = -EPROTO;
	atomic_store(&rs->waiter_rc, rc == 0 ? 1 : rc);
	return NULL;
}

static void *sender(void *p)
{
	const struct thread_arg *a = p;
	struct rank_state *rs = a->rs;
	xp_comm_t *w = xp_comm_world(rs->ctx);
	xp_request_t *win[WINDOW] = { 0 };
	uint8_t *bufs[WINDOW] = { 0 };
	for (int seq = 0; seq < PER_STREAM + WINDOW; seq++) {
		int slot = seq % WINDOW;
		if (win[slot] != NULL)
			T_OK(xp_wait(&win[slot], WAIT_MS, NULL));
		free(bufs[slot]);
		bufs[slot] = NULL;
		if (seq >= PER_STREAM)
			continue;
		size_t len = stream_len(rs, a->index, seq);
		bufs[slot] = malloc(len ? len : 1);
		T_CHECK(bufs[slot] != NULL);
		fill(bufs[slot], len, stream_seed(rs->me, a->index, seq));
		T_OK(xp_isend(w, bufs[slot], len, rs->peer, stream_tag(rs->me, a->index, seq),
			      &win[slot]));
	}
	return NULL;
}

/* Takes the peer's stream @index in order, WINDOW receives ahead. */
static void *receiver(void *p)
{
	const struct thread_arg *a = p;
	struct rank_state *rs = a->rs;
	xp_comm_t *w = xp_comm_world(rs->ctx);
	bool wild = a->index % 2 == 1;
	xp_request_t *win[WINDOW] = { 0 };
	uint8_t *bufs[WINDOW];
	for (int k = 0; k < WINDOW; k++) {
		bufs[k] = malloc(BIG);
		T_CHECK(bufs[k] != NULL);
	}
	for (int seq = 0; seq < PER_STREAM + WINDOW; seq++) {
		int slot = seq % WINDOW, got = seq - WINDOW;
		if (win[slot] != NULL) {
			xp_status_t st;
			T_OK(xp_wait(&win[slot], WAIT_MS, &st));
			size_t len = stream_len(rs, a->index, got);
			uint64_t tag = stream_tag(rs->peer, a->index, got);
			if (st.length != len || st.tag != tag || st.source != rs->peer)
				T_FAIL("%s rank %d stream %d: receive %d got %zu B tag 0x%llx "
				       "from %d, expected message %d (%zu B tag 0x%llx): out of "
				       "send order",
				       transport, rs->me, a->index, got, st.length,
				       (unsigned long long)st.tag, st.source, got, len,
				       (unsigned long long)tag);
			T_OK(check(bufs[slot], len, stream_seed(rs->peer, a->index, got)));
		}
		if (seq >= PER_STREAM)
			continue;
		/* The stream's own tags; a wildcard one leaves the low bits free. */
		uint64_t tag = stream_tag(rs->peer, a->index, seq);
		if (wild)
			T_OK(xp_irecv(w, bufs[slot], BIG, XP_ANY_SOURCE, tag & ~0xffull, ~0xffull,
				      &win[slot]));
		else
			T_OK(xp_irecv(w, bufs[slot], BIG, rs->peer, tag, XP_TAG_EXACT, &win[slot]));
	}
	for (int k = 0; k < WINDOW; k++)
		free(bufs[k]);
	return NULL;
}

static void *canceller(void *p)
{
	struct rank_state *rs = p;
	xp_comm_t *w = xp_comm_world(rs->ctx);
	uint8_t *big = malloc(BIG);
	T_CHECK(big != NULL);
	fill(big, BIG, 77);
	for (int i = 0; i < CANCELS; i++) {
		int v;
		xp_request_t *r;
		T_OK(xp_irecv(w, &v, sizeof(v), i % 2 ? XP_ANY_SOURCE : rs->peer, NOBODY_TAG,
			      XP_TAG_EXACT, &r));
		if (i % 3 == 0) {
			T_EQ(xp_wait(&r, 2, NULL), -ETIMEDOUT);
		} else {
			T_OK(xp_cancel(r));
			T_EQ(xp_wait(&r, WAIT_MS, NULL), -ECANCELED);
		}
		/* A rendezvous send nobody receives: withdrawn. */
		T_OK(xp_isend(w, big, BIG, rs->peer, NEVER_TAG, &r));
		T_OK(xp_cancel(r));
		T_EQ(xp_wait(&r, WAIT_MS, NULL), -ECANCELED);
	}
	free(big);
	return NULL;
}

static void *oob(void *p)
{
	struct rank_state *rs = p;
	int n = xp_size(rs->ctx);
	for (int i = 0; i < OOB_ROUNDS; i++) {
		double t0 = now_ms();
		T_OK(xp_oob_barrier(rs->ctx));
		int mine = rs->me * 1000 + i, all[2];
		T_OK(xp_oob_allgather(rs->ctx, &mine, sizeof(mine), all));
		for (int r = 0; r < n; r++)
			T_EQ(all[r], r * 1000 + i);
		double took = now_ms() - t0;
		if (took > rs->oob_max_ms)
			rs->oob_max_ms = took;
		if (took > OOB_MAX_MS)
			T_FAIL("%s rank %d: barrier and allgather %d took %.0f ms beside a waiter",
			       transport, rs->me, i, took);
	}
	return NULL;
}

static int rank_body(xp_context_t *ctx)
{
	T_EQ(xp_size(ctx), 2);
	struct rank_state rs = { .ctx = ctx, .me = xp_rank(ctx), .peer = 1 - xp_rank(ctx) };
	xp_route_t route;
	T_OK(xp_route_get(ctx, rs.peer, 0, &route));
	rs.thr = route.rndv_threshold;
	T_CHECK(rs.thr > 1 && rs.thr < BIG);

	pthread_t wt, st[SENDERS], rt[RECEIVERS], ct, ot;
	struct thread_arg sa[SENDERS], ra[RECEIVERS];
	T_EQ(pthread_create(&wt, NULL, waiter, &rs), 0);
	for (int i = 0; i < SENDERS; i++) {
		sa[i] = (struct thread_arg){ .rs = &rs, .index = i };
		T_EQ(pthread_create(&st[i], NULL, sender, &sa[i]), 0);
	}
	for (int i = 0; i < RECEIVERS; i++) {
		ra[i] = (struct thread_arg){ .rs = &rs, .index = i };
		T_EQ(pthread_create(&rt[i], NULL, receiver, &ra[i]), 0);
	}
	T_EQ(pthread_create(&ct, NULL, canceller, &rs), 0);
	T_EQ(pthread_create(&ot, NULL, oob, &rs), 0);
	double t0 = now_ms();
	for (int i = 0; i < SENDERS; i++)
		pthread_join(st[i], NULL);
	for (int i = 0; i < RECEIVERS; i++)
		pthread_join(rt[i], NULL);
	pthread_join(ct, NULL);
	pthread_join(ot, NULL);
	/* The waiter may be done already: the peer sends once its own
	 * threads are, and they may have finished first. */
	int v = rs.me + 1;
	T_OK(xp_send(xp_comm_world(ctx), &v, sizeof(v), rs.peer, FINAL_TAG));
	pthread_join(wt, NULL);
	if (atomic_load(&rs.waiter_rc) != 1)
		T_FAIL("%s rank %d: the waiter's receive returned %d", transport, rs.me,
		       atomic_load(&rs.waiter_rc));
	fprintf(stderr,
		"   %s rank %d: %d streams of %d each way, %d cancels, %d oob rounds in %.0f "
		"ms (longest %.0f ms) beside one waiter\n",
		transport, rs.me, SENDERS, PER_STREAM, CANCELS, OOB_ROUNDS, now_ms() - t0,
		rs.oob_max_ms);
	/* Both waiters are done before either rank leaves. */
	T_OK(xp_oob_barrier(ctx));
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s inproc|shm|tcp\n", argv[0]);
		return 2;
	}
	transport = argv[1];
	setenv("XP_LOG_LEVEL", "none", 1); /* the expected timeouts */
	setenv("XP_TIMEOUT_MS", "20000", 1);
	return tl_job_run(transport, 2, rank_body, 120);
}
