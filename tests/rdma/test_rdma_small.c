/* SPDX-License-Identifier: MIT */
/*
 * The RDMA small lane between processes, on a real device (the lab VM's
 * soft-RoCE): XP_TRANSPORTS=rdma,tcp, messages and payloads both over
 * rdma, tcp only watching. Each rank first checks that rdma carries both
 * lanes to every peer (the engine's lanes), so this cannot pass over TCP.
 *
 *   test_rdma_small sizes  0 B to 64 MiB + 1 both ways, checked byte for
 *                          byte, at every boundary of the lane: the inline
 *                          size the device granted (header + payload), the
 *                          copy-or-lend bound of receives (256 B), the
 *                          rendezvous threshold (8 KiB) and the eager limit;
 *                          each size must have gone the way its length says
 *                          (the transport's counts of inline, copied and
 *                          lent frames, the engine's of eager and
 *                          rendezvous sends); pooled receives (xp_recv_buf)
 *                          of lent payloads, intact
 *   test_rdma_small storm  ranks 1, 2 and 3 send 4000 messages each (8 B to
 *                          2 KiB, some rendezvous) to rank 0 as fast as
 *                          they can, rank 0 takes them with XP_ANY_SOURCE:
 *                          every message arrives once, in each sender's
 *                          order, intact; and rank 0's device sent no RNR
 *                          NAK meanwhile (its hw_counters): the window kept
 *                          the shared receive queue from running dry
 *   test_rdma_small cm     XP_RDMA_CM=on: the queue pairs connected through
 *                          rdma_cm (each rank listening on the device's
 *                          address), then what sizes checks, over them
 *   test_rdma_small dead   rank 1 vanishes (no goodbye) while rank 0
 *                          streams eager messages and then a 64 MiB
 *                          rendezvous to it: rank 0's send fails naming
 *                          rank 1, seen by the tcp watcher, well before its
 *                          deadline
 *
 * Skips (77) where the host has no RDMA device.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/wire.h"
#include "rdma/rdma_tl.h"
#include "mproc.h"
#include "pattern.h"
#include "testutil.h"
#include "tl_job.h"

#define BIG ((64u << 20) + 1)

static struct xpi_rdma_tl *rdma_of(xp_context_t *ctx, int peer)
{
	const struct xpi_tl_slot *s = &ctx->tls[ctx->peers[peer].tl_small];
	const struct xpi_tl_slot *b = &ctx->tls[ctx->peers[peer].tl_bulk];
	if (strcmp(s->ops->name, "rdma") != 0 || strcmp(b->ops->name, "rdma") != 0)
		T_FAIL("rank %d -> %d: lanes %s/%s, want rdma/rdma", xp_rank(ctx), peer,
		       s->ops->name, b->ops->name);
	return s->tl;
}

struct counts {
	uint64_t inl, copied, lent, rx_copied, eager, rndv;
};

static void counts_get(xp_context_t *ctx, const struct xpi_rdma_tl *t, struct counts *c)
{
	xp_stats_t st;
	T_OK(xp_stats_get(ctx, &st));
	*c = (struct counts){ t->st_tx_inline, t->st_tx_copied, t->st_rx_lent,
			      t->st_rx_copied, st.eager_sends,  st.rndv_sends };
}

/* One message of @len from @from to the other, checked; received pooled
 * (xp_recv_buf) if @pooled. Then both sides say which way it went. */
static void one(xp_context_t *ctx, struct xpi_rdma_tl *t, int from, size_t len, uint8_t *buf,
		uint32_t seed, bool pooled)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), peer = 1 - me;
	size_t hdr = XPI_FRAME_HDR_LEN;
	struct counts a, b;
	counts_get(ctx, t, &a);
	if (me == from) {
		fill(buf, len, seed);
		T_OK(xp_send(w, buf, len, peer, seed));
		counts_get(ctx, t, &b);
		bool rndv = len >= xpi_rdma_ops.rndv_threshold;
		if (b.rndv - a.rndv != rndv || b.eager - a.eager != !rndv)
			T_FAIL("%zu B: %llu eager and %llu rendezvous sends, want %s", len,
			       (unsigned long long)(b.eager - a.eager),
			       (unsigned long long)(b.rndv - a.rndv),
			       rndv ? "rendezvous" : "eager");
		/* An RTS carries a descriptor: inline too if it fits. */
		size_t frame = hdr + (rndv ? XPI_RDMA_DESC_LEN : len);
		bool inl = frame <= t->max_inline;
		if (b.inl - a.inl < (uint64_t)inl || b.copied - a.copied < (uint64_t)!inl)
			T_FAIL("%zu B: frame of %zu B, inline up to %u: %llu inline, %llu copied",
			       len, frame, t->max_inline, (unsigned long long)(b.inl - a.inl),
			       (unsigned long long)(b.copied - a.copied));
		return;
	}
	xp_status_t st;
	if (pooled) {
		xp_buf_t *pb;
		T_OK(xp_recv_buf(w, peer, seed, XP_TAG_EXACT, &pb, &st));
		T_EQ(xp_buf_len(pb), len);
		T_OK(check(xp_buf_data(pb), len, seed));
		xp_buf_release(pb);
	} else {
		memset(buf, 0xa5, len + 64);
		T_OK(xp_recv(w, buf, len + 64, peer, seed, XP_TAG_EXACT, &st));
		T_EQ(st.length, len);
		T_OK(check(buf, len, seed));
		for (size_t i = len; i < len + 64; i++)
			if (buf[i] != 0xa5)
				T_FAIL("%zu B message: byte %zu past it was written", len, i);
	}
	counts_get(ctx, t, &b);
	if (len < xpi_rdma_ops.rndv_threshold) {
		bool lend = len > XPI_RDMA_RX_COPY_MAX;
		if (b.lent - a.lent != lend || b.rx_copied - a.rx_copied != !lend)
			T_FAIL("%zu B: received %llu lent, %llu copied, want %s", len,
			       (unsigned long long)(b.lent - a.lent),
			       (unsigned long long)(b.rx_copied - a.rx_copied),
			       lend ? "lent" : "copied");
	}
}

static int sizes_body(xp_context_t *ctx)
{
	int me = xp_rank(ctx);
	struct xpi_rdma_tl *t = rdma_of(ctx, 1 - me);
	bool want_cm = getenv("XP_RDMA_CM") != NULL && strcmp(getenv("XP_RDMA_CM"), "on") == 0;
	if ((t->cm != NULL) != want_cm)
		T_FAIL("rank %d: connected %s rdma_cm, XP_RDMA_CM=%s", me,
		       t->cm != NULL ? "through" : "without", want_cm ? "on" : "off");
	size_t inl = t->max_inline > XPI_FRAME_HDR_LEN ? t->max_inline - XPI_FRAME_HDR_LEN : 0;
	size_t emax = xpi_rdma_ops.eager_max, thr = xpi_rdma_ops.rndv_threshold;
	fprintf(stderr, "   rank %d: inline payloads to %zu B, rendezvous from %zu B, window %u\n",
		me, inl, thr, t->window);
	T_CHECK(inl > 8); /* soft-RoCE grants inline sends: they must be tested */
	T_CHECK(emax >= thr);
	const size_t sizes[] = { 0,    1,        8,     inl - 1, inl, inl + 1, 255,
				 256,  257,      4096,  thr - 1, thr, thr + 1, emax - 1,
				 emax, emax + 1, 65536, 1 << 20, BIG };
	uint8_t *buf = malloc(BIG + 64);
	T_CHECK(buf != NULL);
	uint32_t seed = 1;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++)
		for (int from = 0; from < 2; from++)
			one(ctx, t, from, sizes[i], buf, seed++, false);
	/* Pooled receives of lent payloads: the engine hands the very
	 * buffer the device wrote. */
	/* (Senders alternate, as above: each message is the only one in
	 * flight while the counts are compared.) */
	const size_t pooled[] = { 4096, thr - 1 };
	for (size_t i = 0; i < 2; i++)
		for (int from = 0; from < 2; from++)
			one(ctx, t, from, pooled[i], buf, seed++, true);
	free(buf);
	return 0;
}

/* The device's count of RNR NAKs it sent (a receive queue that ran dry);
 * -1 if it keeps none. */
static long long rnr_sent(const struct xpi_rdma_tl *t)
{
	char path[256];
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%u/hw_counters/send_rnr_err",
		 t->dev.name, t->dev.port);
	FILE *f = fopen(path, "r");
	if (f == NULL)
		return -1;
	long long v = -1;
	if (fscanf(f, "%lld", &v) != 1)
		v = -1;
	fclose(f);
	return v;
}

#define STORM_N 4000
#define STORM_WIN 64

static size_t storm_len(int src, int i)
{
	/* Mostly small, now and then past the threshold (rendezvous). */
	return i % 97 == 0 ? 9000 : 8 + (size_t)((i * 131 + src * 17) % 2040);
}

static int storm_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), n = xp_size(ctx);
	struct xpi_rdma_tl *t = rdma_of(ctx, me == 0 ? 1 : 0);
	long long before = me == 0 ? rnr_sent(t) : 0;
	T_OK(xp_barrier(w));
	if (me != 0) {
		uint8_t *bufs = malloc((size_t)STORM_WIN * 9000);
		xp_request_t *reqs[STORM_WIN];
		T_CHECK(bufs != NULL);
		for (int i = 0; i < STORM_N; i += STORM_WIN) {
			int k = STORM_N - i < STORM_WIN ? STORM_N - i : STORM_WIN;
			for (int j = 0; j < k; j++) {
				uint8_t *b = bufs + (size_t)j * 9000;
				size_t len = storm_len(me, i + j);
				fill(b, len, (uint32_t)(me << 20 | (i + j)));
				T_OK(xp_isend(w, b, len, 0, (uint64_t)(i + j), &reqs[j]));
			}
			T_OK(xp_waitall((size_t)k, reqs, 60000, NULL));
		}
		free(bufs);
		T_OK(xp_barrier(w));
		return 0;
	}
	int next[8] = { 0 };
	uint8_t *buf = malloc(9000);
	T_CHECK(buf != NULL && n <= 8);
	for (int got = 0; got < (n - 1) * STORM_N; got++) {
		xp_status_t st;
		T_OK(xp_recv(w, buf, 9000, XP_ANY_SOURCE, 0, XP_TAG_ANY, &st));
		int src = st.source, i = next[src]++;
		if (src < 1 || src >= n || st.tag != (uint64_t)i)
			T_FAIL("message %d from rank %d has tag %llu: out of order", i, src,
			       (unsigned long long)st.tag);
		if (st.length != storm_len(src, i) ||
		    check(buf, st.length, (uint32_t)(src << 20 | i)) != 0)
			T_FAIL("message %d from rank %d: %zu B, damaged", i, src, st.length);
	}
	for (int src = 1; src < n; src++)
		T_EQ(next[src], STORM_N);
	long long after = rnr_sent(t);
	fprintf(stderr, "   rank 0: %d messages from %d senders; RNR NAKs sent: %lld -> %lld\n",
		(n - 1) * STORM_N, n - 1, before, after);
	T_CHECK(before >= 0); /* soft-RoCE counts them: the claim must be checked */
	T_EQ(after - before, 0);
	free(buf);
	T_OK(xp_barrier(w));
	return 0;
}

static int dead_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx);
	rdma_of(ctx, 1 - me);
	if (me == 1) {
		char c;
		T_OK(xp_recv(w, &c, 1, 0, 1, XP_TAG_EXACT, NULL));
		usleep(300000); /* rank 0 is streaming by now */
		_exit(0);       /* no goodbye: as if killed (the kernel closes its fds) */
	}
	char c = 'x';
	T_OK(xp_send(w, &c, 1, 1, 1));
	uint8_t *buf = malloc(BIG);
	T_CHECK(buf != NULL);
	fill(buf, BIG, 7);
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	int rc = 0;
	/* Eager messages until the window closes on the dead peer, then a
	 * rendezvous: one of them must fail, naming it. */
	for (int i = 0; i < 100000 && rc == 0; i++) {
		xp_request_t *r;
		T_OK(xp_isend(w, buf, i % 50 == 49 ? BIG : 64, 1, 2, &r));
		rc = xp_wait(&r, 20000, NULL);
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	double s = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
	fprintf(stderr, "   rank 0: sending to the killed rank 1 failed after %.2f s: %d (%s) %s\n",
		s, rc, xp_strerror(rc), xp_error_detail());
	T_CHECK(rc < 0);
	T_CHECK(rc != -ETIMEDOUT); /* the watcher saw it, not the deadline */
	T_CONTAINS(xp_error_detail(), "rank 1");
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s sizes|cm|storm|dead\n", argv[0]);
		return 2;
	}
	if (getenv("XP_LAB") == NULL && access("/sys/class/infiniband", F_OK) != 0) {
		printf("SKIP: no RDMA device here (tests/rdma/in-lab.sh runs this in the lab VM)\n");
		return T_SKIP;
	}
	if (strcmp(argv[1], "sizes") == 0)
		return tl_job_run("rdma,tcp", 2, sizes_body, 280);
	if (strcmp(argv[1], "cm") == 0) {
		setenv("XP_RDMA_CM", "on", 1);
		return tl_job_run("rdma,tcp", 2, sizes_body, 280);
	}
	if (strcmp(argv[1], "storm") == 0)
		return tl_job_run("rdma,tcp", 4, storm_body, 300);
	if (strcmp(argv[1], "dead") == 0)
		return tl_job_run("rdma,tcp", 2, dead_body, 120);
	fprintf(stderr, "usage: %s sizes|cm|storm|dead\n", argv[0]);
	return 2;
}
