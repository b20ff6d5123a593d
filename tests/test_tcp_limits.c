/* SPDX-License-Identifier: MIT */
/*
 * The io_uring TCP transport at its limits, between real processes on
 * loopback, one section per behaviour:
 *  - zc-burst:    XP_TCP_ZC=on, dozens of rendezvous messages of random
 *                 sizes in flight at once: every payload arrives intact (the
 *                 kernel reads a zero-copy send's header and payload until its
 *                 notification, so neither may be rewritten before);
 *  - eager-max:   XP_RNDV_THRESHOLD=4m: messages longer than the transport
 *                 can carry eagerly go by rendezvous, xp_route_get says so,
 *                 and none waits forever in the control queue;
 *  - unexp-small: thousands of small unexpected messages, each in its own
 *                 received chunk, then the receives: all intact, and the
 *                 rank kept receiving meanwhile (they pin no chunk);
 *  - held-bufs:   the program holds pooled receives (xp_recv_buf) until the
 *                 pool runs out: that receive gets -ENOBUFS, other traffic
 *                 goes on, and the message is received later;
 *  - fetch-fail:  the receiver cannot set up a rendezvous fetch (-ENOMEM):
 *                 both its receive and the sender's send fail, each naming
 *                 the other rank, the tag and the operation; the next
 *                 message on that pair goes through.
 *  - sockbuf:     XP_TCP_SOCKBUF=1m: both bulk sockets' send and receive
 *                 buffers are 1 MiB (the kernel reports twice that), the
 *                 control sockets' are left to autotuning, and a 4 MiB
 *                 message goes through intact;
 *  - sockbuf-auto: no setting: the bulk sockets get 4 MiB where the host's
 *                 net.core.rmem_max and wmem_max allow it, else autotuning.
 * Usage: test_tcp_limits SECTION
 *
 * Linked with -Wl,--wrap=malloc: the wrapper fails one allocation of a
 * rendezvous fetch's descriptor when fetch-fail asks it to.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"

void *__real_malloc(size_t size);
void *__wrap_malloc(size_t size);

#ifndef XPORT_HAVE_TCP
void *__wrap_malloc(size_t size)
{
	return __real_malloc(size);
}

int main(void)
{
	printf("SKIP: this build has no TCP transport (liburing missing)\n");
	return T_SKIP;
}
#else

#include "tcp_test.h"
#include "pattern.h"

/* Set by fetch-fail: the next allocation of a fetch descriptor fails. */
static atomic_int fail_fetch_alloc;

void *__wrap_malloc(size_t size)
{
	if (size == sizeof(struct tcp_bulk_rx) && atomic_load(&fail_fetch_alloc) != 0 &&
	    atomic_exchange(&fail_fetch_alloc, 0) != 0)
		return NULL;
	return __real_malloc(size);
}

#define TAG_RT 2

/* One round trip with @peer on @tag, so what was sent before it has been
 * taken off the wire, in a received chunk of its own. */
static void round_trip(xp_comm_t *w, int rank, int peer, uint64_t tag)
{
	uint8_t b[8] = { 0 };
	if (rank == 0) {
		T_OK(xp_send(w, b, sizeof(b), peer, tag));
		T_OK(xp_recv(w, b, sizeof(b), peer, tag, XP_TAG_EXACT, NULL));
	} else {
		T_OK(xp_recv(w, b, sizeof(b), peer, tag, XP_TAG_EXACT, NULL));
		T_OK(xp_send(w, b, sizeof(b), peer, tag));
	}
}

/* ------------------------------------------------------------------------- */
/* Zero-copy bulk sends, many in flight                                       */

enum { ZC_MSGS = 40, ZC_ROUNDS = 4 };
#define ZC_MIN_LEN (32u << 10)
#define ZC_MAX_LEN (4u << 20)

static size_t zc_len(unsigned round, unsigned i)
{
	unsigned seed = round * 1000 + i;
	return ZC_MIN_LEN + (size_t)rand_r(&seed) % (ZC_MAX_LEN - ZC_MIN_LEN);
}

static int zc_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *bufs[ZC_MSGS];
	for (unsigned i = 0; i < ZC_MSGS; i++) {
		bufs[i] = malloc(ZC_MAX_LEN);
		T_CHECK(bufs[i] != NULL);
	}
	struct xpi_tcp *t = tcp_of(ctx);
	(void)tcp_pair_made(ctx, 1 - rank); /* made before its zc is forced on */
	for (unsigned round = 0; round < ZC_ROUNDS; round++) {
		xp_request_t *rq[ZC_MSGS];
		/* On loopback the kernel copies anyway, and after a few such
		 * reports the transport stops asking for zero-copy: ask again,
		 * as a NIC that does not copy would keep it on. */
		struct tcp_conn *c = tcp_conn_get(t, 1 - rank);
		T_CHECK(c != NULL);
		c->zc = true;
		c->zc_copied_run = 0;
		for (unsigned i = 0; i < ZC_MSGS; i++) {
			size_t len = zc_len(round, i);
			if (rank == 0) {
				T_OK(xp_irecv(w, bufs[i], ZC_MAX_LEN, 1, i, XP_TAG_EXACT, &rq[i]));
			} else {
				fill(bufs[i], len, round * 1000 + i);
			}
		}
		T_OK(xp_oob_barrier(ctx)); /* every receive is posted */
		if (rank == 1)
			for (unsigned i = 0; i < ZC_MSGS; i++)
				T_OK(xp_isend(w, bufs[i], zc_len(round, i), 0, i, &rq[i]));
		for (unsigned i = 0; i < ZC_MSGS; i++) {
			xp_status_t st;
			/* A receiver that reads slowly keeps the sender's data (and
			 * its headers) queued in its socket, in pages the kernel
			 * still reads when the next send starts. */
			if (rank == 0)
				usleep(5000);
			int rc = xp_wait(&rq[i], XP_TIMEOUT_DEFAULT, &st);
			if (rc < 0)
				T_FAIL("rank %d: round %u message %u: %s: %s", rank, round, i,
				       xp_strerror(rc), xp_error_detail());
			if (rank == 0) {
				T_EQ(st.length, zc_len(round, i));
				if (check(bufs[i], st.length, round * 1000 + i) != 0)
					T_FAIL("round %u: message %u of %zu bytes corrupted", round,
					       i, st.length);
			}
		}
	}
	if (rank == 1) {
		T_CHECK(t->zc_sends >= ZC_ROUNDS * 8);
		fprintf(stderr, "   rank 1: %llu zero-copy sends (%llu copied by the kernel)\n",
			(unsigned long long)t->zc_sends, (unsigned long long)t->zc_copied);
	}
	T_OK(xp_oob_barrier(ctx));
	for (unsigned i = 0; i < ZC_MSGS; i++)
		free(bufs[i]);
	xp_finalize(ctx);
	return 0;
}

static void zc_env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_TCP_ZC", "on", 1);
}

/* ------------------------------------------------------------------------- */
/* Eager messages longer than the transport carries                          */

/* Sends @len bytes from rank 0 to rank 1 on @tag and checks that the
 * protocol the send used is the one xp_route_get() named for that size. */
static void eager_one(xp_context_t *ctx, uint8_t *buf, size_t len, uint64_t tag)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int rank = xp_rank(ctx);
	xp_route_t route;
	T_OK(xp_route_get(ctx, 1 - rank, len, &route));
	if (rank == 1) {
		xp_status_t st;
		T_OK(xp_recv(w, buf, 4u << 20, 0, tag, XP_TAG_EXACT, &st));
		T_EQ(st.length, len);
		T_CHECK(check(buf, len, (uint32_t)tag) == 0);
		return;
	}
	bool eager = strcmp(route.protocol, "eager") == 0;
	xp_stats_t before, after;
	T_OK(xp_stats_get(ctx, &before));
	fill(buf, len, (uint32_t)tag);
	int rc = xp_send(w, buf, len, 1, tag);
	if (rc < 0)
		T_FAIL("send of %zu bytes (%s by the route): %s", len, route.protocol,
		       xp_error_detail());
	T_OK(xp_stats_get(ctx, &after));
	T_EQ(after.eager_sends - before.eager_sends, eager);
	T_EQ(after.rndv_sends - before.rndv_sends, !eager);
}

static int eager_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(4u << 20);
	T_CHECK(buf != NULL);
	/* The program asked for eager up to 4 MiB: each of these goes, by the
	 * protocol the route names, and those behind it follow. */
	const size_t lens[] = { 524233, 1000, 300000, 1u << 20, (4u << 20) - 1, 8 };
	enum { N = sizeof(lens) / sizeof(lens[0]) };
	for (unsigned i = 0; i < N; i++)
		eager_one(ctx, buf, lens[i], i);
	/* The transport carries less than 4 MiB eagerly, and says where it
	 * stops; both sides of that line go as the route says. */
	xp_route_t route;
	T_OK(xp_route_get(ctx, 1 - rank, 4u << 20, &route));
	size_t limit = route.rndv_threshold;
	fprintf(stderr, "   rank %d: eager up to %zu bytes\n", rank, limit - 1);
	T_CHECK(limit > 64u << 10 && limit < 4u << 20);
	T_OK(xp_route_get(ctx, 1 - rank, limit - 1, &route));
	T_CHECK(strcmp(route.protocol, "eager") == 0);
	eager_one(ctx, buf, limit - 1, 50);
	eager_one(ctx, buf, limit, 51);
	/* Several of the longest at once, each behind the one before in the
	 * control queue. */
	xp_request_t *rq[8];
	for (unsigned i = 0; i < 8; i++) {
		size_t len = limit - 1 - i;
		uint8_t *p = buf + (size_t)i * (512u << 10);
		if (rank == 0) {
			fill(p, len, 100 + i);
			T_OK(xp_isend(w, p, len, 1, 100 + i, &rq[i]));
		} else {
			T_OK(xp_irecv(w, p, 512u << 10, 0, 100 + i, XP_TAG_EXACT, &rq[i]));
		}
	}
	for (unsigned i = 0; i < 8; i++) {
		xp_status_t st;
		T_OK(xp_wait(&rq[i], XP_TIMEOUT_DEFAULT, &st));
		if (rank == 1) {
			T_EQ(st.length, limit - 1 - i);
			T_CHECK(check(buf + (size_t)i * (512u << 10), st.length, 100 + i) == 0);
		}
	}
	free(buf);
	xp_finalize(ctx);
	return 0;
}

static void eager_env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_RNDV_THRESHOLD", "4m", 1);
}

/* ------------------------------------------------------------------------- */
/* Small unexpected messages                                                  */

enum { UNEXP_N = 5000, UNEXP_BIG = 6000, TAG_UNEXP = 1 };

/* Mostly 8 bytes; every tenth long enough that a view of the chunk could
 * pay for a pooled receive. */
static size_t unexp_len(unsigned i)
{
	return i % 10 == 9 ? UNEXP_BIG : 8;
}

static int unexp_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *bufs = malloc((size_t)UNEXP_N * UNEXP_BIG);
	T_CHECK(bufs != NULL);
	for (unsigned i = 0; i < UNEXP_N; i++) {
		uint8_t *p = bufs + (size_t)i * UNEXP_BIG;
		if (rank == 0) {
			fill(p, unexp_len(i), i);
			T_OK(xp_send(w, p, unexp_len(i), 1, TAG_UNEXP));
		}
		/* Rank 1 receives (other messages) all along. */
		round_trip(w, rank, 1 - rank, TAG_RT);
	}
	if (rank == 1) {
		xp_stats_t s;
		T_OK(xp_stats_get(ctx, &s));
		T_EQ(s.unexpected_now, UNEXP_N);
		for (unsigned i = 0; i < UNEXP_N; i++) {
			xp_status_t st;
			uint8_t *p = bufs + (size_t)i * UNEXP_BIG;
			T_OK(xp_recv(w, p, UNEXP_BIG, 0, TAG_UNEXP, XP_TAG_EXACT, &st));
			T_EQ(st.length, unexp_len(i));
			T_CHECK(check(p, st.length, i) == 0);
		}
	}
	T_OK(xp_oob_barrier(ctx));
	free(bufs);
	xp_finalize(ctx);
	return 0;
}

/* ------------------------------------------------------------------------- */
/* Pooled receives the program holds                                          */

enum { HELD_N = 600, HELD_LEN = 10000, TAG_HELD = 3 };

static int held_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	xp_buf_t **held = calloc(HELD_N, sizeof(*held));
	uint8_t *out = malloc(HELD_LEN);
	T_CHECK(held != NULL && out != NULL);
	int nheld = 0, first_short = -1;
	for (unsigned i = 0; i < HELD_N; i++) {
		if (rank == 0) {
			fill(out, HELD_LEN, i);
			T_OK(xp_send(w, out, HELD_LEN, 1, TAG_HELD));
		} else if (first_short < 0) {
			xp_status_t st;
			int rc = xp_recv_buf(w, 0, TAG_HELD, XP_TAG_EXACT, &held[nheld], &st);
			if (rc == -ENOBUFS) {
				/* The pool is lent out: a clean error, the message waits. */
				T_CONTAINS(xp_error_detail(), "rank 0");
				T_CONTAINS(xp_error_detail(), "xp_recv_buf");
				first_short = (int)i;
				fprintf(stderr, "   holding %d pooled receives: %s\n", nheld,
					xp_error_detail());
			} else {
				T_OK(rc);
				T_EQ(xp_buf_len(held[nheld]), HELD_LEN);
				T_CHECK(check(xp_buf_data(held[nheld]), HELD_LEN, i) == 0);
				nheld++;
			}
		}
		/* Traffic goes on while the program holds them. */
		round_trip(w, rank, 1 - rank, TAG_RT);
	}
	if (rank == 1) {
		T_CHECK(first_short > 0);
		for (int i = 0; i < nheld; i++)
			T_CHECK(check(xp_buf_data(held[i]), HELD_LEN, (uint32_t)i) == 0);
		for (int i = 0; i < nheld; i++)
			xp_buf_release(held[i]);
		/* What could not be received then is received now, in order. */
		for (unsigned i = (unsigned)first_short; i < HELD_N; i++) {
			xp_buf_t *b;
			T_OK(xp_recv_buf(w, 0, TAG_HELD, XP_TAG_EXACT, &b, NULL));
			T_EQ(xp_buf_len(b), HELD_LEN);
			T_CHECK(check(xp_buf_data(b), HELD_LEN, i) == 0);
			xp_buf_release(b);
		}
	}
	T_OK(xp_oob_barrier(ctx));
	free(held);
	free(out);
	xp_finalize(ctx);
	return 0;
}

/* ------------------------------------------------------------------------- */
/* A rendezvous fetch that cannot be set up                                   */

enum { FETCH_LEN = 200000, TAG_FETCH = 0x77, TAG_ANNOUNCED = 5 };

static int fetch_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(FETCH_LEN);
	T_CHECK(buf != NULL);
	for (int attempt = 0; attempt < 2; attempt++) {
		bool fail = attempt == 0;
		xp_status_t st;
		int rc;
		if (rank == 1) {
			xp_request_t *s;
			fill(buf, FETCH_LEN, (uint32_t)attempt);
			T_OK(xp_isend(w, buf, FETCH_LEN, 0, TAG_FETCH, &s));
			T_OK(xp_send(w, NULL, 0, 0, TAG_ANNOUNCED));
			rc = xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL);
		} else {
			/* The announcement is here (it came before this message). */
			T_OK(xp_recv(w, NULL, 0, 1, TAG_ANNOUNCED, XP_TAG_EXACT, NULL));
			atomic_store(&fail_fetch_alloc, fail);
			memset(buf, 0, FETCH_LEN);
			rc = xp_recv(w, buf, FETCH_LEN, 1, TAG_FETCH, XP_TAG_EXACT, &st);
		}
		char detail[512];
		snprintf(detail, sizeof(detail), "%s", rc < 0 ? xp_error_detail() : "");
		fprintf(stderr, "   rank %d: attempt %d: %d %s\n", rank, attempt, rc, detail);
		/* Both sides have their answer before either checks it: one left
		 * waiting fails by its own timeout, not by the other's exit. */
		T_OK(xp_oob_barrier(ctx));
		if (!fail) {
			T_OK(rc);
			if (rank == 0) {
				T_EQ(st.length, FETCH_LEN);
				T_CHECK(check(buf, FETCH_LEN, (uint32_t)attempt) == 0);
			}
			continue;
		}
		if (rc == 0 || rc == -ETIMEDOUT)
			T_FAIL("rank %d: the %s whose fetch failed returned %d (%s)", rank,
			       rank == 1 ? "send" : "receive", rc, detail);
		T_CONTAINS(detail, rank == 1 ? "rank 0" : "rank 1");
		T_CONTAINS(detail, rank == 1 ? "xp_send" : "xp_recv");
		T_CONTAINS(detail, "tag 0x77");
		if (rank == 0) {
			T_CHECK(atomic_load(&fail_fetch_alloc) == 0); /* it was tried */
			T_EQ(rc, -ENOMEM);
		}
	}
	free(buf);
	xp_finalize(ctx);
	return 0;
}

/* sockbuf, sockbuf-auto: the buffers of each socket to the peer, once the
 * pair is made, against what the setting asks for (@want_snd and @want_rcv
 * bytes, 0: autotuning), then one message. */
static int sockbuf_check(int rank, size_t want_snd, size_t want_rcv)
{
	xp_context_t *ctx = t_start_rank(rank);
	struct tcp_conn *c = tcp_pair_made(ctx, 1 - rank);
	int got[2][2]; /* [ctl, bulk][snd, rcv] */
	for (int ch = 0; ch < 2; ch++)
		for (int k = 0; k < 2; k++) {
			socklen_t n = sizeof(got[ch][k]);
			T_OK(getsockopt(ch == 0 ? c->fd_ctl : c->fd_bulk, SOL_SOCKET,
					k == 0 ? SO_SNDBUF : SO_RCVBUF, &got[ch][k], &n));
		}
	fprintf(stderr, "   rank %d: ctl %d/%d, bulk %d/%d bytes (send/receive), want %zu/%zu\n",
		rank, got[0][0], got[0][1], got[1][0], got[1][1], want_snd, want_rcv);
	/* The kernel doubles what it is given, for its own overhead. */
	const int autos[2] = { XPI_TCP_SNDBUF_AUTO, XPI_TCP_RCVBUF_AUTO };
	const size_t want[2] = { want_snd, want_rcv };
	for (int k = 0; k < 2; k++) {
		if (want[k] != 0)
			T_EQ(got[1][k], 2 * (long long)want[k]);
		else
			T_CHECK(got[1][k] != 2 * autos[k]);
		T_CHECK(got[0][k] != 2 * autos[k]); /* control sockets keep autotuning */
	}
	size_t len = 4u << 20;
	uint8_t *buf = malloc(len);
	T_CHECK(buf != NULL);
	xp_comm_t *w = xp_comm_world(ctx);
	if (rank == 0) {
		fill(buf, len, 9);
		T_OK(xp_send(w, buf, len, 1, 9));
	} else {
		xp_status_t st;
		T_OK(xp_recv(w, buf, len, 0, 9, XP_TAG_EXACT, &st));
		T_EQ(st.length, len);
		T_CHECK(check(buf, len, 9) == 0);
	}
	free(buf);
	xp_finalize(ctx);
	return 0;
}

static void sockbuf_env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_TCP_SOCKBUF", "1m", 1);
}

static int sockbuf_body(int rank, void *arg)
{
	(void)arg;
	return sockbuf_check(rank, 1u << 20, 1u << 20);
}

static long long proc_value(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "r");
	if (f != NULL && fscanf(f, "%lld", &v) != 1)
		v = -1;
	if (f != NULL)
		fclose(f);
	return v;
}

static int sockbuf_auto_body(int rank, void *arg)
{
	(void)arg;
	bool room = proc_value("/proc/sys/net/core/rmem_max") >= XPI_TCP_RCVBUF_AUTO &&
		    proc_value("/proc/sys/net/core/wmem_max") >= XPI_TCP_SNDBUF_AUTO;
	return room ? sockbuf_check(rank, XPI_TCP_SNDBUF_AUTO, XPI_TCP_RCVBUF_AUTO) :
		      sockbuf_check(rank, 0, 0);
}

/* ------------------------------------------------------------------------- */
/* Funneled ranks read the control stream themselves                         */

/*
 * A funneled rank's ring defers its work, and the rank reads control data
 * with recv(2) itself when work waits (tcp_ctl_recv_direct), the rest
 * through the ring. Messages of mixed sizes, answered one by one, with a
 * burst now and then, on one tag: each must arrive whole and in order,
 * whichever read took it. 5000 B ones go to pooled receives, views of the
 * chunk they were read into, and four are held across later reads. Both
 * ranks must have read directly; rank 1 also through the ring after that
 * (a 20000 B message is longer than a direct read's chunk: its rest comes
 * through the ring, so one message is read both ways).
 */
enum { DIRECT_ROUNDS = 3000, DIRECT_MAX = 20000, TAG_DR = 0x31, TAG_DR_ANSWER = 0x32 };
static const size_t direct_sizes[] = { 8, 100, 5000, DIRECT_MAX, 1 };

static void direct_env(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_THREAD_MODE", "funneled", 1);
}

static int direct_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	struct xpi_tcp *t = tcp_of(ctx);
	T_CHECK(t->evfd >= 0); /* a deferring ring: only funneled ranks read directly */
	uint8_t *buf = malloc(DIRECT_MAX);
	T_CHECK(buf != NULL);
	xp_buf_t *keep[4] = { NULL };
	uint32_t seq = 0;
	uint64_t ring_then = 0, direct_then = 0;
	for (int i = 0; i < DIRECT_ROUNDS; i++) {
		size_t len = direct_sizes[i % 5];
		int burst = i % 50 == 0 ? 8 : 1;
		for (int k = 0; k < burst; k++, seq++) {
			if (rank == 0) {
				fill(buf, len, seq);
				T_OK(xp_send(w, buf, len, 1, TAG_DR));
			} else if (len == 5000) {
				xp_buf_t **b = &keep[seq % 4];
				if (*b != NULL)
					xp_buf_release(*b);
				T_OK(xp_recv_buf(w, 0, TAG_DR, XP_TAG_EXACT, b, NULL));
				T_EQ(xp_buf_len(*b), len);
				T_CHECK(check(xp_buf_data(*b), len, seq) == 0);
			} else {
				xp_status_t st;
				memset(buf, 0, len);
				T_OK(xp_recv(w, buf, DIRECT_MAX, 0, TAG_DR, XP_TAG_EXACT, &st));
				T_EQ(st.length, len);
				T_CHECK(check(buf, len, seq) == 0);
			}
		}
		/* The answer carries the count, read back the other way. */
		uint32_t got = seq;
		if (rank == 1) {
			T_OK(xp_send(w, &got, sizeof(got), 0, TAG_DR_ANSWER));
		} else {
			T_OK(xp_recv(w, &got, sizeof(got), 1, TAG_DR_ANSWER, XP_TAG_EXACT, NULL));
			T_EQ(got, seq);
		}
		if (i == 100) {
			direct_then = t->direct_reads;
			ring_then = t->ring_reads;
		}
	}
	fprintf(stderr,
		"   rank %d: %llu direct reads (%llu by round 100), %llu ring reads (%llu)\n", rank,
		(unsigned long long)t->direct_reads, (unsigned long long)direct_then,
		(unsigned long long)t->ring_reads, (unsigned long long)ring_then);
	T_CHECK(direct_then > 0);
	if (rank == 1)
		T_CHECK(t->ring_reads > ring_then);
	for (int k = 0; k < 4; k++)
		if (keep[k] != NULL) {
			T_CHECK(xp_buf_len(keep[k]) == 5000);
			xp_buf_release(keep[k]);
		}
	T_OK(xp_oob_barrier(ctx));
	free(buf);
	xp_finalize(ctx);
	return 0;
}

/* ------------------------------------------------------------------------- */

static const struct section {
	const char *name;
	int (*body)(int rank, void *arg);
	void (*env)(int rank, void *arg);
} sections[] = {
	{ "zc-burst", zc_body, zc_env },
	{ "eager-max", eager_body, eager_env },
	{ "unexp-small", unexp_body, NULL },
	{ "held-bufs", held_body, NULL },
	{ "fetch-fail", fetch_body, NULL },
	{ "sockbuf", sockbuf_body, sockbuf_env },
	{ "sockbuf-auto", sockbuf_auto_body, NULL },
	{ "direct-read", direct_body, direct_env },
};

static const struct section *section; /* the one running */

static void section_env(int rank, void *arg)
{
	/* A stall shows as a timeout soon rather than after 30 s. */
	setenv("XP_TIMEOUT_MS", "10000", 1);
	if (section->env != NULL)
		section->env(rank, arg);
}

int main(int argc, char **argv)
{
	tcp_test_require();
	if (argc != 2)
		T_FAIL("usage: test_tcp_limits SECTION");
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		section = &sections[i];
		if (strcmp(argv[1], section->name) != 0)
			continue;
		fprintf(stderr, "-- %s\n", section->name);
		return mproc_run(2, section->body, NULL, 120, section_env, NULL) != 0;
	}
	T_FAIL("no section named %s", argv[1]);
}

#endif
