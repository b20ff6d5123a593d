/* SPDX-License-Identifier: MIT */
/*
 * Two ranks over the DPDK transport (tests/dpdk/job.sh provides the
 * devices and XP_DPDK_EAL), through the public API only.
 *
 *   test_dpdk_stream stream   every message delivered once, in order and
 *                             intact, both ways at once: sizes around the
 *                             datagram's payload, the eager limit and the
 *                             rendezvous windows, then a burst of 400
 *                             mixed messages one way received with any
 *                             tag (order checked), some as pooled
 *                             receives. Run with XP_DPDK_DROP to lose,
 *                             reorder and duplicate datagrams. Prints the
 *                             burst's goodput.
 *   test_dpdk_stream silent   rank 1 stops (SIGSTOP) after telling rank 0
 *                             its pid; rank 0's rendezvous send to it must
 *                             fail within XP_DPDK_PEER_TIMEOUT_MS (the
 *                             caller sets 1000) with an error naming rank 1
 *                             as silent over dpdk, not at the operation's
 *                             timeout; then rank 1 is continued and ends.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../pattern.h"
#include "../tl_job.h"

static const size_t sizes[] = {
	0,     1,     55,     56,     57,     1343,   1344,        1345,
	1399,  1400,  1401,   2800,   4096,   32767,  32768,       65535,
	65536, 65537, 262143, 262144, 262145, 524289, 1048576 + 3, 3u << 20
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define BURST 400

static uint32_t seed_of(int from, unsigned i)
{
	return (uint32_t)from * 100003u + i;
}

/* Both ranks send every size to each other at once, and check what came. */
static void exchange(xp_comm_t *w, int me, uint8_t *out, uint8_t *in)
{
	int peer = 1 - me;
	for (unsigned i = 0; i < NSIZES; i++) {
		xp_request_t *s, *r;
		xp_status_t st;
		fill(out, sizes[i], seed_of(me, i));
		T_OK(xp_irecv(w, in, sizes[i], peer, i, XP_TAG_EXACT, &r));
		T_OK(xp_isend(w, out, sizes[i], peer, i, &s));
		T_OK(xp_wait(&s, -1, NULL));
		T_OK(xp_wait(&r, -1, &st));
		T_EQ(st.length, sizes[i]);
		if (check(in, sizes[i], seed_of(peer, i)) != 0)
			T_FAIL("rank %d: message %u (%zu B) from rank %d corrupted", me, i,
			       sizes[i], peer);
	}
}

static size_t burst_len(unsigned i)
{
	static const size_t mix[] = { 8, 200, 1400, 1500, 6000, 40000, 70000, 8 };
	return mix[(i * 7) % (sizeof(mix) / sizeof(mix[0]))];
}

/* Rank 0 sends BURST messages back to back; rank 1 takes them with any
 * tag, so the order they match in is the order they arrived in. */
static void burst(xp_comm_t *w, int me, uint8_t *out, uint8_t *in)
{
	if (me == 0) {
		xp_request_t **reqs = calloc(BURST, sizeof(*reqs));
		uint8_t **bufs = calloc(BURST, sizeof(*bufs));
		T_CHECK(reqs != NULL && bufs != NULL);
		size_t total = 0;
		double t0 = t_now_s();
		for (unsigned i = 0; i < BURST; i++) {
			bufs[i] = malloc(burst_len(i) + 1);
			T_CHECK(bufs[i] != NULL);
			fill(bufs[i], burst_len(i), seed_of(0, 1000 + i));
			T_OK(xp_isend(w, bufs[i], burst_len(i), 1, 1000 + i, &reqs[i]));
			total += burst_len(i);
		}
		for (unsigned i = 0; i < BURST; i++) {
			T_OK(xp_wait(&reqs[i], -1, NULL));
			free(bufs[i]);
		}
		uint8_t done;
		T_OK(xp_recv(w, &done, 1, 1, 9999, XP_TAG_EXACT, NULL));
		double s = t_now_s() - t0;
		printf("burst: %u messages, %zu bytes in %.3f s: goodput %.1f MB/s\n", BURST, total,
		       s, total / s / 1e6);
		fflush(stdout);
		free(reqs);
		free(bufs);
		return;
	}
	(void)out;
	for (unsigned i = 0; i < BURST; i++) {
		xp_status_t st;
		const uint8_t *got = in;
		xp_buf_t *b = NULL;
		if (i % 3 ==
		    0) { /* pooled: a long eager message comes as the buffer it was put in */
			T_OK(xp_recv_buf(w, 0, 0, XP_TAG_ANY, &b, &st));
			got = xp_buf_data(b);
		} else {
			T_OK(xp_recv(w, in, 1 << 20, 0, 0, XP_TAG_ANY, &st));
		}
		if (st.tag != 1000 + i)
			T_FAIL("burst: message %u arrived as %llu (out of order, lost or twice)", i,
			       (unsigned long long)st.tag);
		T_EQ(st.length, burst_len(i));
		if (check(got, st.length, seed_of(0, 1000 + i)) != 0)
			T_FAIL("burst: message %u corrupted", i);
		if (b != NULL)
			xp_buf_release(b);
	}
	uint8_t done = 1;
	T_OK(xp_send(w, &done, 1, 0, 9999));
}

static int stream_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx);
	uint8_t *out = malloc(3u << 20), *in = malloc(3u << 20);
	T_CHECK(out != NULL && in != NULL);
	exchange(w, me, out, in);
	burst(w, me, out, in);
	T_OK(xp_oob_barrier(ctx));
	free(out);
	free(in);
	printf("rank %d: ok\n", me);
	fflush(stdout); /* the rank ends with _exit */
	return 0;
}

static int silent_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx);
	if (me == 1) {
		/* A send completes once queued: the answer says it arrived. */
		int pid = (int)getpid(), go;
		T_OK(xp_send(w, &pid, sizeof(pid), 0, 1));
		T_OK(xp_recv(w, &go, sizeof(go), 0, 3, XP_TAG_EXACT, NULL));
		raise(SIGSTOP);
		return 0; /* continued by rank 0 once it gave us up */
	}
	int pid;
	T_OK(xp_recv(w, &pid, sizeof(pid), 1, 1, XP_TAG_EXACT, NULL));
	T_OK(xp_send(w, &pid, sizeof(pid), 1, 3));
	usleep(200 * 1000); /* rank 1 is stopped by now */
	size_t len = 1u << 20;
	uint8_t *buf = calloc(1, len);
	T_CHECK(buf != NULL);
	double t0 = t_now_s();
	int rc = xp_send(w, buf, len, 1, 2);
	double s = t_now_s() - t0;
	const char *why = xp_error_detail();
	printf("rank 0: xp_send to the stopped rank 1: %s after %.2f s: %s\n", xp_strerror(rc), s,
	       why);
	fflush(stdout);
	kill(pid, SIGCONT);
	T_EQ(rc, -ETIMEDOUT);
	T_CONTAINS(why, "rank 1 acknowledged nothing over dpdk");
	/* The peer timeout (1 s from rank 1's last acknowledgement, which came
	 * before the 200 ms pause), not the operation's (XP_TIMEOUT_MS, 30 s). */
	T_CHECK(s >= 0.5 && s < 10);
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "stream") != 0 && strcmp(argv[1], "silent") != 0)) {
		fprintf(stderr, "usage: %s stream|silent (under tests/dpdk/job.sh)\n", argv[0]);
		return 1;
	}
	if (getenv("XP_DPDK_EAL") == NULL) {
		printf("SKIP: no XP_DPDK_EAL: run under tests/dpdk/job.sh\n");
		return T_SKIP;
	}
	bool silent = strcmp(argv[1], "silent") == 0;
	return tl_job_run("dpdk,tcp", 2, silent ? silent_body : stream_body, 120);
}
