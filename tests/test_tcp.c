/* SPDX-License-Identifier: MIT */
/*
 * The io_uring TCP transport between real processes over loopback: sizes
 * from 0 bytes to several MiB with content checks (eager and rendezvous),
 * pooled receives, truncation, order across protocols, a flood of
 * unexpected messages past the eager credit, all-to-all among four ranks
 * with wildcard receives.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"
#include "pattern.h"

#define MAXLEN (5u << 20)

/* Ping-pong of every size class, then random sizes, both ways. */
static int sizes_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(MAXLEN);
	static const size_t fixed[] = { 0,     1,     55,     56,      57,      4095,   32767,
					32768, 65536, 100001, 1 << 20, 3 << 20, 5 << 20 };
	size_t n = sizeof(fixed) / sizeof(fixed[0]);
	unsigned seed = 12345;
	for (unsigned i = 0; i < n + 60; i++) {
		size_t len =
			i < n ? fixed[i] : (size_t)(rand_r(&seed) % (i % 3 == 0 ? MAXLEN : 70000));
		xp_status_t st;
		if (rank == 0) {
			fill(buf, len, i);
			T_OK(xp_send(w, buf, len, 1, i));
			T_OK(xp_recv(w, buf, MAXLEN, 1, i, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_CHECK(check(buf, len, i + 7777) == 0);
		} else {
			T_OK(xp_recv(w, buf, MAXLEN, XP_ANY_SOURCE, i, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_EQ(st.source, 0);
			T_CHECK(check(buf, len, i) == 0);
			fill(buf, len, i + 7777);
			T_OK(xp_send(w, buf, len, 0, i));
		}
	}
	xp_stats_t s;
	T_OK(xp_stats_get(ctx, &s));
	T_CHECK(s.eager_sends > 0 && s.rndv_sends > 0);
	free(buf);
	xp_finalize(ctx);
	return 0;
}

/* Pooled receives (zero copy from the receive buffers), truncation in
 * both protocols, and order across protocols on one tag. */
static int features_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	static const size_t lens[] = { 0, 8, 5000, 40000, 2 << 20 };
	uint8_t *buf = malloc(4 << 20);
	if (rank == 0) {
		for (unsigned i = 0; i < 5; i++) {
			fill(buf, lens[i], i);
			T_OK(xp_send(w, buf, lens[i], 1, 100 + i));
		}
		/* Truncation: eager and rendezvous. */
		fill(buf, 1000, 50);
		T_OK(xp_send(w, buf, 1000, 1, 200));
		fill(buf, 300000, 51);
		T_OK(xp_send(w, buf, 300000, 1, 201));
		/* Alternating protocols, one tag: must arrive in send order. */
		xp_request_t *r[40];
		static uint8_t big[40][70000];
		for (int i = 0; i < 40; i++) {
			size_t len = i % 2 ? 70000 : 16;
			memset(big[i], i, len);
			T_OK(xp_isend(w, big[i], len, 1, 300, &r[i]));
		}
		for (int i = 0; i < 40; i++)
			T_OK(xp_wait(&r[i], XP_TIMEOUT_DEFAULT, NULL));
		T_OK(xp_recv(w, NULL, 0, 1, 999, XP_TAG_EXACT, NULL)); /* done */
	} else {
		for (unsigned i = 0; i < 5; i++) {
			xp_buf_t *b;
			xp_status_t st;
			T_OK(xp_recv_buf(w, 0, 100 + i, XP_TAG_EXACT, &b, &st));
			T_EQ(xp_buf_len(b), lens[i]);
			T_CHECK(check(xp_buf_data(b), lens[i], i) == 0);
			xp_buf_release(b);
		}
		xp_status_t st;
		uint8_t small[100];
		T_EQ(xp_recv(w, small, 100, 0, 200, XP_TAG_EXACT, &st), -EMSGSIZE);
		T_EQ(st.length, 1000);
		T_CHECK(check(small, 100, 50) == 0);
		T_EQ(xp_recv(w, small, 100, 0, 201, XP_TAG_EXACT, &st), -EMSGSIZE);
		T_EQ(st.length, 300000);
		T_CHECK(check(small, 100, 51) == 0);
		T_CHECK(strstr(xp_error_detail(), "truncated") != NULL);
		for (int i = 0; i < 40; i++) {
			T_OK(xp_recv(w, buf, 70000, 0, 0, XP_TAG_ANY, &st));
			T_EQ(st.length, i % 2 ? 70000 : 16);
			T_EQ(buf[0], i);
		}
		T_OK(xp_send(w, NULL, 0, 0, 999));
	}
	free(buf);
	xp_finalize(ctx);
	return 0;
}

/* Thousands of messages sent before the receiver posts anything: past the
 * eager credit the sender switches to rendezvous, nothing is lost. */
static int flood_body(int rank, void *arg)
{
	(void)arg;
	enum { N = 3000, LEN = 2000 };
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	if (rank == 0) {
		uint8_t *bufs = malloc((size_t)N * LEN);
		xp_request_t **r = malloc(N * sizeof(*r));
		for (int i = 0; i < N; i++) {
			fill(bufs + (size_t)i * LEN, LEN, (uint32_t)i);
			T_OK(xp_isend(w, bufs + (size_t)i * LEN, LEN, 1, 5, &r[i]));
		}
		T_OK(xp_send(w, NULL, 0, 1, 6)); /* "all posted" */
		for (int i = 0; i < N; i++)
			T_OK(xp_wait(&r[i], XP_TIMEOUT_DEFAULT, NULL));
		free(bufs);
		free(r);
	} else {
		T_OK(xp_recv(w, NULL, 0, 0, 6, XP_TAG_EXACT, NULL));
		uint8_t buf[LEN];
		for (int i = 0; i < N; i++) {
			xp_status_t st;
			T_OK(xp_recv(w, buf, LEN, 0, 5, XP_TAG_EXACT, &st));
			T_CHECK(check(buf, LEN, (uint32_t)i) == 0);
		}
		xp_stats_t s;
		T_OK(xp_stats_get(ctx, &s));
		T_CHECK(s.unexpected_bytes_max <= 256 * 1024);
	}
	xp_finalize(ctx);
	return 0;
}

static void small_credit(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_UNEXPECTED_MAX_BYTES", "512k", 1);
}

/* Four ranks, everyone to everyone, random sizes, any-source receives. */
static int alltoall_body(int rank, void *arg)
{
	(void)arg;
	enum { ROUNDS = 6 };
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	int n = xp_size(ctx);
	uint8_t *out = malloc(MAXLEN), *in = malloc((size_t)n * (2 << 20));
	for (int round = 0; round < ROUNDS; round++) {
		xp_request_t *rq[16];
		int k = 0;
		for (int p = 0; p < n; p++)
			T_OK(xp_irecv(w, in + (size_t)p * (2 << 20), 2 << 20, XP_ANY_SOURCE,
				      (uint64_t)round, XP_TAG_EXACT, &rq[k++]));
		size_t len = (size_t)((round * 7919 + rank * 104729) % (2 << 20));
		fill(out, len, (uint32_t)(rank * 100 + round));
		for (int p = 0; p < n; p++)
			T_OK(xp_isend(w, out, len, p, (uint64_t)round, &rq[k++]));
		for (int i = 0; i < k; i++) {
			xp_status_t st;
			T_OK(xp_wait(&rq[i], XP_TIMEOUT_DEFAULT, &st));
			if (i < n) {
				size_t want =
					(size_t)((round * 7919 + st.source * 104729) % (2 << 20));
				T_EQ(st.length, want);
				T_CHECK(check(in + (size_t)i * (2 << 20), want,
					      (uint32_t)(st.source * 100 + round)) == 0);
			}
		}
	}
	free(out);
	free(in);
	xp_finalize(ctx);
	return 0;
}

/* Eager sends complete once queued; queued frames must still leave when
 * the sender next blocks out of band or finalizes without progressing. */
static int send_then_block_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t buf[64] = { 0 };
	for (int i = 0; i < 200; i++) {
		if (rank == 0)
			T_OK(xp_send(w, buf, sizeof(buf), 1, 7));
		else
			T_OK(xp_recv(w, buf, sizeof(buf), 0, 7, XP_TAG_EXACT, NULL));
	}
	T_OK(xp_oob_barrier(ctx));
	if (rank == 0) {
		for (int i = 0; i < 200; i++)
			T_OK(xp_send(w, buf, sizeof(buf), 1, 8));
	} else {
		for (int i = 0; i < 200; i++)
			T_OK(xp_recv(w, buf, sizeof(buf), 0, 8, XP_TAG_EXACT, NULL));
	}
	xp_finalize(ctx); /* rank 0 right after its last send */
	return 0;
}

int main(void)
{
	/* Ranks of one host would get shared memory: these tests are TCP's. */
	setenv("XP_TRANSPORTS", "tcp", 1);
	fprintf(stderr, "-- sends then an out-of-band barrier / finalize\n");
	T_EQ(mproc_run(2, send_then_block_body, NULL, 60, NULL, NULL), 0);
	fprintf(stderr, "-- sizes\n");
	T_EQ(mproc_run(2, sizes_body, NULL, 120, NULL, NULL), 0);
	fprintf(stderr, "-- features\n");
	T_EQ(mproc_run(2, features_body, NULL, 120, NULL, NULL), 0);
	fprintf(stderr, "-- flood past the eager credit\n");
	T_EQ(mproc_run(2, flood_body, NULL, 120, small_credit, NULL), 0);
	fprintf(stderr, "-- all-to-all, 4 ranks\n");
	T_EQ(mproc_run(4, alltoall_body, NULL, 120, NULL, NULL), 0);
	return 0;
}
