/* SPDX-License-Identifier: MIT */
/*
 * Faults on the io_uring TCP transport, between real processes on loopback:
 *  - kill, kill-zc: a rank dies (SIGKILL) while it streams 1 GiB to rank 0
 *              with eager messages behind it, and while rank 0 streams to
 *              it (kill-zc: with zero-copy sends). Rank 0's operations
 *              with it fail within 10 s with -ECONNRESET and name it; new
 *              ones fail at once; what arrived before is intact; an
 *              any-source receive stays posted; rank 0 and rank 2 go on;
 *  - malformed: a rank writes bad frames on its real connections; the
 *              receiver closes that connection, names the rank, and keeps
 *              every other message intact;
 *  - stranger: raw TCP clients on the ranks' listeners, which stay open
 *              for the job's life (pairs are made on first need): idle
 *              ones and junk; the job's exchanges go on at full pace, the
 *              ranks close them by their handshake deadline and end with
 *              the descriptors and threads they had;
 *  - key:      a rank with another job key: both sides fail in bounded
 *              time with clear errors;
 *  - setup:    a stranger first in a listener's accept queue when a pair
 *              is made (junk, or silent): the pair is made at once.
 * Usage: test_tcp_faults [SECTION]   (default: all, each in its own process)
 */
#include <errno.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xport/xport.h"
#include "core/clock.h"
#include "core/engine.h"
#include "job/sock.h"
#include "core/wire.h"
#include "mproc.h"
#include "testutil.h"

#ifndef XPORT_HAVE_TCP
int main(void)
{
	printf("SKIP: this build has no TCP transport (liburing missing)\n");
	return T_SKIP;
}
#else

#include "tcp_test.h"
#include "pattern.h"

static int64_t now_ms(void)
{
	return xpi_now_ns() / 1000000;
}

/*
 * Waits for @r at most @ms, by polling: xp_wait cancels at its deadline,
 * and a receive whose rendezvous payload is being streamed cannot be
 * cancelled, so only a loop of xp_test is bounded in every case here.
 * Returns the operation's result (0 or a negative code); fails the test
 * if it is still pending after @ms.
 */
static int wait_for(xp_request_t **r, int ms, xp_status_t *st, const char *what)
{
	int64_t until = now_ms() + ms;
	for (;;) {
		int rc = xp_test(r, st);
		if (rc != 0)
			return rc == 1 ? 0 : rc;
		if (now_ms() > until)
			T_FAIL("%s: still pending after %d ms", what, ms);
		sched_yield();
	}
}

/* Expects @rc to be @want and the thread's error detail to hold @sub. */
static void expect_fail(int rc, int want, const char *sub, const char *what)
{
	if (rc != want)
		T_FAIL("%s: returned %d (%s), expected %d (%s); detail: %s", what, rc,
		       xp_strerror(rc), want, xp_strerror(want), xp_error_detail());
	if (strstr(xp_error_detail(), sub) == NULL)
		T_FAIL("%s: the error detail \"%s\" does not contain \"%s\"", what,
		       xp_error_detail(), sub);
}

/* A ping-pong of eager and rendezvous sizes with content checks. */
static void pingpong(xp_comm_t *w, int me, int peer, uint64_t tag0)
{
	static const size_t sizes[] = { 0, 1, 1000, 32767, 32768, 200000, 3 << 20 };
	uint8_t *buf = malloc(3 << 20);
	T_CHECK(buf != NULL);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];
		uint64_t tag = tag0 + i;
		xp_status_t st;
		if (me < peer) {
			fill(buf, len, (uint32_t)tag);
			T_OK(xp_send(w, buf, len, peer, tag));
			T_OK(xp_recv(w, buf, 3 << 20, peer, tag, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_CHECK(check(buf, len, (uint32_t)tag + 1) == 0);
		} else {
			T_OK(xp_recv(w, buf, 3 << 20, peer, tag, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_EQ(st.source, peer);
			T_CHECK(check(buf, len, (uint32_t)tag) == 0);
			fill(buf, len, (uint32_t)tag + 1);
			T_OK(xp_send(w, buf, len, peer, tag));
		}
	}
	free(buf);
}

/* ------------------------------------------------------------------------- */
/* A peer killed in the middle of a transfer                                  */

/* Rank 1's message to rank 0: so long that it cannot end before rank 1 has
 * read BACK_CAP bytes of rank 0's and dies, however the two streams share
 * the connection (at 64 MiB it sometimes did, with 1 MiB send buffers),
 * sent from untouched pages (the kernel's zero page) into pages that cost
 * memory only as they are written. */
#define BIG ((size_t)1 << 30)
#define KILL_AFTER (1u << 20) /* bytes of rank 1's big send out before it dies */
/* Rank 0's message to rank 1: so long that it cannot end before rank 1
 * dies, and read from untouched pages (the kernel's zero page), so it
 * costs no memory. Rank 1 takes the first BACK_CAP bytes of it (the
 * transport reads and drops the rest of a truncated message). */
#define BACK_LEN ((size_t)1 << 30)
#define BACK_CAP (2u << 20)
#define EAGER_LEN 2000u
#define MAX_EAGER 1000
#define EARLY_RNDV_LEN 100000u

enum {
	TAG_BIG = 1,        /* rank 1 -> 0, 1 GiB */
	TAG_BIG_BACK,       /* rank 0 -> 1, 1 GiB */
	TAG_EAGER,          /* rank 1 -> 0, a stream of eager messages */
	TAG_EARLY_RNDV,     /* rank 1 -> 0, announced before the death, never fetched */
	TAG_UNCLAIMED,      /* rank 0 -> 1, rendezvous never asked for */
	TAG_NEVER,          /* nobody sends it */
	TAG_ANY = 50,       /* rank 2 -> 0, for a receive from any source */
	TAG_GO = 60,        /* rank 0 -> 2: "rank 1 is dead, go on" */
	TAG_MASKED = 0x100, /* receives with a partial mask */
	TAG_PP = 1000,      /* ping-pongs */
};

struct kill_shared {
	_Atomic int64_t kill_ns; /* when rank 1 raised SIGKILL */
	_Atomic int eager_sent;  /* eager messages rank 1 posted to rank 0 */
};

static int kill_rank0(xp_context_t *ctx, struct kill_shared *sh)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *rbig = mmap(NULL, BIG, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t *unclaimed = malloc(EARLY_RNDV_LEN);
	uint8_t *sback =
		mmap(NULL, BACK_LEN, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t never[16], masked[16], any[64], small[EAGER_LEN];
	T_CHECK(rbig != MAP_FAILED && sback != MAP_FAILED && unclaimed != NULL);
	xp_request_t *r_big, *r_never, *r_masked, *r_any, *s_big, *s_unclaimed;
	T_OK(xp_irecv(w, rbig, BIG, 1, TAG_BIG, XP_TAG_EXACT, &r_big));
	T_OK(xp_irecv(w, never, sizeof(never), 1, TAG_NEVER, XP_TAG_EXACT, &r_never));
	T_OK(xp_irecv(w, masked, sizeof(masked), 1, TAG_MASKED, ~(uint64_t)0xff, &r_masked));
	T_OK(xp_irecv(w, any, sizeof(any), XP_ANY_SOURCE, TAG_ANY, XP_TAG_EXACT, &r_any));
	T_OK(xp_isend(w, sback, BACK_LEN, 1, TAG_BIG_BACK, &s_big));
	T_OK(xp_isend(w, unclaimed, EARLY_RNDV_LEN, 1, TAG_UNCLAIMED, &s_unclaimed));
	T_OK(xp_oob_barrier(ctx)); /* everything posted on 0 and 1 */

	/* The receive being streamed into fails when rank 1 dies. */
	xp_status_t st;
	int rc = wait_for(&r_big, 30000, &st, "rank 0: 1 GiB receive from the dying rank 1");
	int64_t failed_ns = xpi_now_ns();
	expect_fail(rc, -ECONNRESET, "rank 1", "receive being streamed from rank 1");
	int64_t kill_ns = atomic_load(&sh->kill_ns);
	T_CHECK(kill_ns != 0); /* rank 1 did die by its own hand, not fail otherwise */
	fprintf(stderr, "   rank 0 saw the death %.1f ms after the kill: %s\n",
		(double)(failed_ns - kill_ns) / 1e6, xp_error_detail());
	T_CHECK(failed_ns - kill_ns < 10 * 1000000000LL);

	/* Every operation that names rank 1 failed with it. */
	expect_fail(wait_for(&r_never, 10000, NULL, "pending exact receive"), -ECONNRESET, "rank 1",
		    "pending exact receive from rank 1");
	expect_fail(wait_for(&r_masked, 10000, NULL, "pending masked receive"), -ECONNRESET,
		    "rank 1", "pending receive from rank 1 with a tag mask");
	expect_fail(wait_for(&s_big, 10000, NULL, "1 GiB send to rank 1"), -ECONNRESET, "rank 1",
		    "1 GiB send being streamed to rank 1");
	expect_fail(wait_for(&s_unclaimed, 10000, NULL, "announced send"), -ECONNRESET, "rank 1",
		    "announced send rank 1 never asked for");
	/* The receive from any source stays: rank 2 may still send. */
	T_EQ(xp_test(&r_any, NULL), 0);

	/* Posted afterwards: fails at once. */
	xp_request_t *r;
	T_OK(xp_irecv(w, never, sizeof(never), 1, TAG_NEVER + 1, XP_TAG_EXACT, &r));
	expect_fail(xp_test(&r, NULL), -ECONNRESET, "rank 1", "receive from rank 1 after death");
	expect_fail(xp_send(w, small, 100, 1, TAG_NEVER), -ECONNRESET, "rank 1",
		    "eager send to dead rank 1");
	expect_fail(xp_send(w, unclaimed, EARLY_RNDV_LEN, 1, TAG_NEVER), -ECONNRESET, "rank 1",
		    "rendezvous send to dead rank 1");

	/* The eager messages that arrived before the death are whole and in
	 * order; then receives fail. The first 16 went before the big RTS,
	 * which arrived (its payload was flowing), so they did too. */
	int got = 0;
	for (;;) {
		rc = xp_recv(w, small, sizeof(small), 1, TAG_EAGER, XP_TAG_EXACT, &st);
		if (rc < 0)
			break;
		T_EQ(st.length, EAGER_LEN);
		T_CHECK(check(small, EAGER_LEN, 7000u + (uint32_t)got) == 0);
		got++;
	}
	expect_fail(rc, -ECONNRESET, "rank 1", "receive past the eager messages that arrived");
	fprintf(stderr, "   %d of %d eager messages had arrived\n", got,
		atomic_load(&sh->eager_sent));
	T_CHECK(got >= 16 && got <= atomic_load(&sh->eager_sent));

	/* Rank 2 is unaffected. */
	T_OK(xp_send(w, "go", 3, 2, TAG_GO));
	T_OK(wait_for(&r_any, 30000, &st, "any-source receive"));
	T_EQ(st.source, 2);
	T_EQ(st.length, sizeof(any));
	T_CHECK(check(any, sizeof(any), 50) == 0);
	pingpong(w, 0, 2, TAG_PP);

	/* A rendezvous message rank 1 announced before it died: its payload
	 * can no longer come, and the error names who failed to send it. */
	rc = xp_recv(w, unclaimed, EARLY_RNDV_LEN, 1, TAG_EARLY_RNDV, XP_TAG_EXACT, &st);
	expect_fail(rc, -ECONNRESET, "rank 1", "receive of a message announced by dead rank 1");

	munmap(rbig, BIG);
	munmap(sback, BACK_LEN);
	free(unclaimed);
	xp_finalize(ctx);
	return 0;
}

static int kill_rank1(xp_context_t *ctx, struct kill_shared *sh)
{
	xp_comm_t *w = xp_comm_world(ctx);
	struct tcp_conn *c0 = tcp_conn_get(tcp_of(ctx), 0);
	T_CHECK(c0 != NULL);
	uint8_t *sbig =
		mmap(NULL, BIG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	uint8_t *rback = malloc(BACK_CAP), *early = malloc(EARLY_RNDV_LEN);
	uint8_t *eager = malloc((size_t)MAX_EAGER * EAGER_LEN);
	xp_request_t **er = calloc(MAX_EAGER, sizeof(*er));
	T_CHECK(sbig != MAP_FAILED && rback != NULL && early != NULL && eager != NULL &&
		er != NULL);
	fill(early, EARLY_RNDV_LEN, 3);
	xp_request_t *r_back, *s_big, *s_early;
	T_OK(xp_irecv(w, rback, BACK_CAP, 0, TAG_BIG_BACK, XP_TAG_EXACT, &r_back));
	int n = 0;
	for (; n < 16; n++) {
		fill(eager + (size_t)n * EAGER_LEN, EAGER_LEN, 7000u + (uint32_t)n);
		T_OK(xp_isend(w, eager + (size_t)n * EAGER_LEN, EAGER_LEN, 0, TAG_EAGER, &er[n]));
	}
	T_OK(xp_isend(w, early, EARLY_RNDV_LEN, 0, TAG_EARLY_RNDV, &s_early));
	T_OK(xp_isend(w, sbig, BIG, 0, TAG_BIG, &s_big));
	T_OK(xp_oob_barrier(ctx));

	/*
	 * Drive both streams, with more eager messages behind ours, until
	 * KILL_AFTER bytes of ours are out and BACK_CAP bytes of rank 0's are
	 * in (the transport's counts); then die. Each partial send of ours
	 * needs our next progress call, so ours is still going; rank 0's
	 * cannot have run far (checked), so it is still sending.
	 */
	const uint64_t back_in = XPI_FRAME_HDR_LEN + BACK_CAP;
	int64_t until = now_ms() + 30000;
	for (;;) {
		xp_progress(ctx);
		if (n < MAX_EAGER) {
			fill(eager + (size_t)n * EAGER_LEN, EAGER_LEN, 7000u + (uint32_t)n);
			T_OK(xp_isend(w, eager + (size_t)n * EAGER_LEN, EAGER_LEN, 0, TAG_EAGER,
				      &er[n]));
			n++;
		}
		if (c0->bulk_tx_off >= KILL_AFTER && c0->bulk_rx_off >= back_in)
			break;
		int sent = xp_test(&s_big, NULL), got = xp_test(&r_back, NULL);
		if (sent != 0 || got != 0)
			T_FAIL("rank 1: a big stream ended early (our 1 GiB send: %d, %llu bytes "
			       "out; our 1 GiB receive: %d, %llu bytes in)",
			       sent, (unsigned long long)c0->bulk_tx_off, got,
			       (unsigned long long)c0->bulk_rx_off);
		if (now_ms() > until)
			T_FAIL("rank 1: after 30 s, %llu bytes of our 1 GiB send are out, %llu "
			       "of rank 0's 1 GiB in",
			       (unsigned long long)c0->bulk_tx_off,
			       (unsigned long long)c0->bulk_rx_off);
	}
	if (c0->bulk_rx_off >= BACK_LEN / 2)
		T_FAIL("rank 1: rank 0's 1 GiB stream ran too far to be cut in the middle (%llu "
		       "bytes in)",
		       (unsigned long long)c0->bulk_rx_off);
	atomic_store(&sh->eager_sent, n);
	atomic_store(&sh->kill_ns, xpi_now_ns());
	raise(SIGKILL);
	return 1;
}

static int kill_rank2(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t any[64], go[3];
	T_OK(xp_oob_barrier(ctx));
	T_OK(xp_recv(w, go, sizeof(go), 0, TAG_GO, XP_TAG_EXACT, NULL));
	fill(any, sizeof(any), 50);
	T_OK(xp_send(w, any, sizeof(any), 0, TAG_ANY));
	pingpong(w, 2, 0, TAG_PP);
	/* Rank 2 lost rank 1 too, and says so. */
	xp_request_t *r;
	T_OK(xp_irecv(w, go, sizeof(go), 1, TAG_NEVER, XP_TAG_EXACT, &r));
	expect_fail(wait_for(&r, 10000, NULL, "rank 2: receive from dead rank 1"), -ECONNRESET,
		    "rank 1", "rank 2: receive from dead rank 1");
	xp_finalize(ctx);
	return 0;
}

static int kill_body(int rank, void *arg)
{
	xp_context_t *ctx = t_start_rank(rank);
	if (rank == 0)
		return kill_rank0(ctx, arg);
	if (rank == 1)
		return kill_rank1(ctx, arg);
	return kill_rank2(ctx);
}

static void zc_on(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	setenv("XP_TCP_ZC", "on", 1);
}

static void test_kill(bool zc)
{
	struct kill_shared *sh =
		mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_CHECK(sh != MAP_FAILED);
	atomic_store(&sh->kill_ns, 0);
	atomic_store(&sh->eager_sent, 0);
	struct mproc_result res;
	fprintf(stderr, "   (rank 1 kills itself: its signal 9 below is expected)\n");
	mproc_run(3, kill_body, sh, 120, zc ? zc_on : NULL, &res);
	T_CHECK(WIFEXITED(res.status[0]) && WEXITSTATUS(res.status[0]) == 0);
	T_CHECK(WIFSIGNALED(res.status[1]) && WTERMSIG(res.status[1]) == SIGKILL);
	T_CHECK(WIFEXITED(res.status[2]) && WEXITSTATUS(res.status[2]) == 0);
	T_CHECK(atomic_load(&sh->kill_ns) != 0);
	munmap(sh, sizeof(*sh));
}

/* ------------------------------------------------------------------------- */
/* Malformed frames                                                           */

enum bad_case {
	BAD_MAGIC,
	BAD_EAGER_TOO_LONG,
	BAD_UNKNOWN_COMM,
	BAD_CTS_UNANNOUNCED,
	BAD_DATA_ON_CTL,
	BAD_AFTER_GOOD, /* a valid eager frame, then one of another version */
	BAD_BULK_ID,    /* the bulk channel: payload of a message never announced */
	BAD_NCASES
};

static const char *const bad_names[] = {
	"bad magic",
	"EAGER longer than the eager limit",
	"communicator id out of range",
	"CTS for a send never announced",
	"DATA on the control channel",
	"a valid frame, then another version",
	"bulk payload for another message",
};

enum {
	TAG_OK = 7,    /* rank 1 -> 0: only the valid frame of BAD_AFTER_GOOD */
	TAG_BULK = 8,  /* rank 1 -> 0, rendezvous */
	TAG_E2 = 9,    /* rank 2 -> 0, eager */
	TAG_R2 = 10,   /* rank 2 -> 0, rendezvous */
	TAG_LATE = 11, /* receives posted after the failure */
	TAG_DONE = 12, /* rank 0 -> 2 -> 1: rank 0 is done checking */
};
#define BULK_LEN 300000u
#define R2_LEN (1u << 20)
#define E2_LEN 3000u
#define OK_LEN 40u

static void send_raw(int fd, const void *p, size_t len)
{
	ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
	if (n != (ssize_t)len)
		T_FAIL("send of %zu raw bytes: %zd (%s)", len, n, strerror(errno));
}

static int bad_rank1(xp_context_t *ctx, enum bad_case k)
{
	xp_comm_t *w = xp_comm_world(ctx);
	struct tcp_conn *c = tcp_pair_made(ctx, 0);
	uint8_t out[64 + OK_LEN + 4096];
	uint8_t *bulk = malloc(BULK_LEN);
	T_CHECK(bulk != NULL);
	memset(out, 0xa5, sizeof(out));
	struct xpi_frame f = { .type = XPI_FRAME_EAGER, .comm = 0, .tag = 99 };
	size_t len = XPI_FRAME_HDR_LEN;
	T_OK(xp_oob_barrier(ctx)); /* rank 0's receives are posted */
	/* Nothing of ours is queued or half sent on the control channel, so
	 * what we write starts at a frame boundary. */
	T_CHECK(c->tx_busy == 0 && c->tx_head == c->tx_tail && !c->dead);
	xp_request_t *s = NULL;
	switch (k) {
	case BAD_MAGIC:
		xpi_frame_pack(&f, out);
		out[0] ^= 0xff;
		break;
	case BAD_EAGER_TOO_LONG:
		f.payload_len = XPI_TCP_MAX_EAGER + 1;
		f.msg_len = XPI_TCP_MAX_EAGER + 1;
		xpi_frame_pack(&f, out);
		len = sizeof(out); /* and some of that payload */
		break;
	case BAD_UNKNOWN_COMM:
		f.comm = XPI_COMM_IDS; /* beyond every id a communicator can have */
		f.payload_len = 16;
		f.msg_len = 16;
		xpi_frame_pack(&f, out);
		len += 16;
		break;
	case BAD_CTS_UNANNOUNCED:
		f = (struct xpi_frame){ .type = XPI_FRAME_CTS, .id = 12345 };
		xpi_frame_pack(&f, out);
		break;
	case BAD_DATA_ON_CTL:
		f = (struct xpi_frame){ .type = XPI_FRAME_DATA, .msg_len = 0, .id = 0 };
		xpi_frame_pack(&f, out);
		break;
	case BAD_AFTER_GOOD:
		/* Exactly what our engine would send as its next message to 0
		 * (the barrier above sent it one). */
		f = (struct xpi_frame){ .type = XPI_FRAME_EAGER,
					.payload_len = OK_LEN,
					.tag = TAG_OK,
					.peer_seq = ctx->peers[0].send_seq,
					.msg_len = OK_LEN };
		xpi_frame_pack(&f, out);
		fill(out + XPI_FRAME_HDR_LEN, OK_LEN, TAG_OK);
		f = (struct xpi_frame){ .type = XPI_FRAME_CREDIT };
		xpi_frame_pack(&f, out + XPI_FRAME_HDR_LEN + OK_LEN);
		out[XPI_FRAME_HDR_LEN + OK_LEN + 2] = XPI_WIRE_VERSION + 1;
		len = 2 * XPI_FRAME_HDR_LEN + OK_LEN;
		break;
	case BAD_BULK_ID:
		/* A DATA header for id 777 first on the bulk channel, then a real
		 * rendezvous send: when rank 0 asks for its payload, it reads
		 * ours. */
		f = (struct xpi_frame){ .type = XPI_FRAME_DATA, .msg_len = BULK_LEN, .id = 777 };
		xpi_frame_pack(&f, out);
		send_raw(c->fd_bulk, out, XPI_FRAME_HDR_LEN);
		fill(bulk, BULK_LEN, TAG_BULK);
		T_OK(xp_isend(w, bulk, BULK_LEN, 0, TAG_BULK, &s));
		len = 0;
		break;
	default:
		T_FAIL("no case %d", (int)k);
	}
	if (len != 0)
		send_raw(c->fd_ctl, out, len);

	/* Rank 0 closes the connection: we see it closed. */
	xp_request_t *r;
	uint8_t b[16];
	T_OK(xp_irecv(w, b, sizeof(b), 0, TAG_LATE, XP_TAG_EXACT, &r));
	int rc = wait_for(&r, 10000, NULL, "rank 1: receive from rank 0, which closed on us");
	if (rc == 0 || rc == -ETIMEDOUT)
		T_FAIL("rank 1: receive from rank 0 returned %d, expected a connection error", rc);
	T_CONTAINS(xp_error_detail(), "rank 0");
	if (s != NULL) {
		/* It ends either way: the kernel may have taken the whole
		 * payload before rank 0 closed, or not. */
		rc = wait_for(&s, 10000, NULL, "rank 1: rendezvous send to rank 0");
		T_CHECK(rc == 0 || (rc < 0 && rc != -ETIMEDOUT));
	}
	/* Rank 0 is done checking. Told through rank 2: ranks 0 and 1 have
	 * lost each other, so the out-of-band barrier, which goes along the
	 * job's own links (rank 1's parent is rank 0), fails now. */
	uint8_t done;
	T_OK(xp_recv(w, &done, 1, 2, TAG_DONE, XP_TAG_EXACT, NULL));
	free(bulk);
	xp_finalize(ctx);
	return 0;
}

static int bad_rank0(xp_context_t *ctx, enum bad_case k)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t ok[OK_LEN], e2[E2_LEN], late[16];
	uint8_t *bulk = malloc(BULK_LEN), *r2 = malloc(R2_LEN);
	T_CHECK(bulk != NULL && r2 != NULL);
	xp_request_t *r_ok, *r_bulk, *r_e2, *r_r2;
	xp_status_t st;
	T_OK(xp_irecv(w, ok, sizeof(ok), 1, TAG_OK, XP_TAG_EXACT, &r_ok));
	T_OK(xp_irecv(w, bulk, BULK_LEN, 1, TAG_BULK, XP_TAG_EXACT, &r_bulk));
	T_OK(xp_irecv(w, e2, sizeof(e2), 2, TAG_E2, XP_TAG_EXACT, &r_e2));
	T_OK(xp_irecv(w, r2, R2_LEN, 2, TAG_R2, XP_TAG_EXACT, &r_r2));
	T_OK(xp_oob_barrier(ctx));

	int rc = wait_for(&r_ok, 10000, &st, "rank 0: receive from rank 1");
	if (k == BAD_AFTER_GOOD) {
		/* The valid frame before the bad one was delivered, intact. */
		T_OK(rc);
		T_EQ(st.length, OK_LEN);
		T_CHECK(check(ok, OK_LEN, TAG_OK) == 0);
	} else {
		expect_fail(rc, -EPROTO, "rank 1", "receive from rank 1");
		T_CONTAINS(xp_error_detail(), "malformed frame");
	}
	rc = wait_for(&r_bulk, 10000, &st, "rank 0: rendezvous receive from rank 1");
	expect_fail(rc, -EPROTO, "rank 1", "rendezvous receive from rank 1");
	T_CONTAINS(xp_error_detail(), "malformed frame");
	fprintf(stderr, "   %s\n", xp_error_detail());

	/* Rank 2's messages of the same moment are intact. */
	T_OK(wait_for(&r_e2, 10000, &st, "rank 0: eager receive from rank 2"));
	T_EQ(st.length, E2_LEN);
	T_CHECK(check(e2, E2_LEN, TAG_E2) == 0);
	T_OK(wait_for(&r_r2, 10000, &st, "rank 0: rendezvous receive from rank 2"));
	T_EQ(st.length, R2_LEN);
	T_CHECK(check(r2, R2_LEN, TAG_R2) == 0);

	/* Rank 1 stays failed: new operations with it fail at once. */
	xp_request_t *r;
	T_OK(xp_irecv(w, late, sizeof(late), 1, TAG_LATE, XP_TAG_EXACT, &r));
	expect_fail(xp_test(&r, NULL), -EPROTO, "rank 1", "receive from rank 1 afterwards");
	expect_fail(xp_send(w, late, sizeof(late), 1, TAG_LATE), -EPROTO, "rank 1",
		    "send to rank 1 afterwards");
	pingpong(w, 0, 2, TAG_PP);
	uint8_t done = 1;
	T_OK(xp_send(w, &done, 1, 2, TAG_DONE));
	free(bulk);
	free(r2);
	xp_finalize(ctx);
	return 0;
}

static int bad_rank2(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t e2[E2_LEN];
	uint8_t *r2 = malloc(R2_LEN);
	T_CHECK(r2 != NULL);
	fill(e2, E2_LEN, TAG_E2);
	fill(r2, R2_LEN, TAG_R2);
	T_OK(xp_oob_barrier(ctx));
	/* At the moment rank 1 writes its bad bytes. */
	xp_request_t *s1, *s2;
	T_OK(xp_isend(w, e2, E2_LEN, 0, TAG_E2, &s1));
	T_OK(xp_isend(w, r2, R2_LEN, 0, TAG_R2, &s2));
	T_OK(xp_wait(&s1, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_wait(&s2, XP_TIMEOUT_DEFAULT, NULL));
	pingpong(w, 2, 0, TAG_PP);
	uint8_t done;
	T_OK(xp_recv(w, &done, 1, 0, TAG_DONE, XP_TAG_EXACT, NULL));
	T_OK(xp_send(w, &done, 1, 1, TAG_DONE));
	free(r2);
	xp_finalize(ctx);
	return 0;
}

static int bad_body(int rank, void *arg)
{
	enum bad_case k = (enum bad_case)(intptr_t)arg;
	xp_context_t *ctx = t_start_rank(rank);
	if (rank == 0)
		return bad_rank0(ctx, k);
	if (rank == 1)
		return bad_rank1(ctx, k);
	return bad_rank2(ctx);
}

static void test_malformed(void)
{
	for (int k = 0; k < BAD_NCASES; k++) {
		fprintf(stderr, "   case: %s\n", bad_names[k]);
		T_EQ(mproc_run(3, bad_body, (void *)(intptr_t)k, 60, NULL, NULL), 0);
	}
}

/* ------------------------------------------------------------------------- */
/* Strangers on the listeners after the job formed                           */

/* Threads of this process, leaving out io_uring's own workers (iou-wrk-*,
 * iou-sqp-*), which the kernel starts and ends as it pleases. */
static int count_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	T_CHECK(d != NULL);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char path[300], comm[32] = "";
		snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(path, "r");
		if (f != NULL) {
			if (fgets(comm, sizeof(comm), f) == NULL)
				comm[0] = '\0';
			fclose(f);
		}
		n += strncmp(comm, "iou-", 4) != 0;
	}
	closedir(d);
	return n;
}

/* Every rank sends an eager and a rendezvous message to every other. */
static void exchange_all(xp_context_t *ctx, uint32_t round)
{
	enum { NR = 3, E_LEN = 2000, R_LEN = 200000 };
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), n = xp_size(ctx);
	T_CHECK(n == NR);
	uint8_t *out = malloc(E_LEN + R_LEN), *in = malloc((size_t)NR * (E_LEN + R_LEN));
	T_CHECK(out != NULL && in != NULL);
	fill(out, E_LEN, round * 100 + (uint32_t)me);
	fill(out + E_LEN, R_LEN, round * 100 + 50 + (uint32_t)me);
	xp_request_t *rq[4 * NR];
	int k = 0;
	for (int p = 0; p < n; p++) {
		if (p == me)
			continue;
		uint8_t *slot = in + (size_t)p * (E_LEN + R_LEN);
		T_OK(xp_irecv(w, slot, E_LEN, p, round * 2, XP_TAG_EXACT, &rq[k++]));
		T_OK(xp_irecv(w, slot + E_LEN, R_LEN, p, round * 2 + 1, XP_TAG_EXACT, &rq[k++]));
		T_OK(xp_isend(w, out, E_LEN, p, round * 2, &rq[k++]));
		T_OK(xp_isend(w, out + E_LEN, R_LEN, p, round * 2 + 1, &rq[k++]));
	}
	for (int i = 0; i < k; i++)
		T_OK(xp_wait(&rq[i], XP_TIMEOUT_DEFAULT, NULL));
	for (int p = 0; p < n; p++) {
		if (p == me)
			continue;
		uint8_t *slot = in + (size_t)p * (E_LEN + R_LEN);
		T_CHECK(check(slot, E_LEN, round * 100 + (uint32_t)p) == 0);
		T_CHECK(check(slot + E_LEN, R_LEN, round * 100 + 50 + (uint32_t)p) == 0);
	}
	free(out);
	free(in);
}

/* A nonblocking connect to @a; returns the fd, connected or on its way. */
static int raw_connect(const struct sockaddr_in *a, int *err)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	T_CHECK(fd >= 0);
	*err = 0;
	if (connect(fd, (const struct sockaddr *)a, sizeof(*a)) < 0)
		*err = errno;
	return fd;
}

/* Waits (bounded) for a nonblocking connect; returns 0 or the errno. */
static int raw_connected(int fd)
{
	int rc = xpi_sock_wait(fd, POLLOUT, xpi_deadline_in(5000));
	if (rc < 0)
		return -rc;
	int err = 0;
	socklen_t len = sizeof(err);
	getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
	return err;
}

/* Strangers each rank of the stranger test opens to the others' listeners. */
#define IDLE_STRANGERS 6

/* Waits until the rank at the other end closed stranger @fd, at most @ms;
 * returns the milliseconds it took, or -1. */
static int64_t closed_within(int fd, int ms)
{
	int64_t t0 = now_ms();
	while (now_ms() - t0 < ms) {
		char b[64];
		ssize_t n = recv(fd, b, sizeof(b), MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK))
			return now_ms() - t0;
		if (n > 0)
			continue; /* the listener's hello: drained */
		struct pollfd pf = { .fd = fd, .events = POLLIN };
		(void)poll(&pf, 1, 50);
	}
	return -1;
}

/*
 * The transport's listeners stay open for the job's life (pairs are made on
 * first need), so strangers reach them: idle ones and one that sends junk,
 * from rank 2 to ranks 0 and 1, while the job goes on. The ranks exchange
 * as fast as without them, close every stranger by its handshake deadline
 * (3 s) and end with the descriptors they had. The bootstrap's address is
 * closed once the job has formed.
 */
static int stranger_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	struct xpi_tcp *t = tcp_of(ctx);
	struct sockaddr_in all[3];
	T_EQ(t->listen_addr.ss_family, AF_INET);
	T_OK(xp_oob_allgather(ctx, &t->listen_addr, sizeof(all[0]), all));

	exchange_all(ctx, 1); /* every pair made */
	int fds0 = t_count_fds(), thr0 = count_threads();
	int strangers[2][IDLE_STRANGERS + 1];
	T_OK(xp_oob_barrier(ctx));
	if (rank == 2) {
		static const char junk[] = "GET / HTTP/1.0\r\n\r\n and some more bytes";
		for (int p = 0; p < 2; p++)
			for (int i = 0; i <= IDLE_STRANGERS; i++) {
				int err, fd = raw_connect(&all[p], &err);
				if (err == EINPROGRESS)
					err = raw_connected(fd);
				T_EQ(err, 0);
				if (i == IDLE_STRANGERS)
					T_EQ(send(fd, junk, sizeof(junk), MSG_NOSIGNAL),
					     (ssize_t)sizeof(junk));
				strangers[p][i] = fd;
			}
	}
	T_OK(xp_oob_barrier(ctx));
	int64_t t0 = now_ms();
	exchange_all(ctx, 2);
	int64_t took = now_ms() - t0;
	fprintf(stderr, "   rank %d: an exchange with strangers on the listeners took %lld ms\n",
		rank, (long long)took);
	T_CHECK(took < 2000); /* not behind a stranger's 3 s deadline */
	if (rank == 2) {
		for (int p = 0; p < 2; p++)
			for (int i = 0; i <= IDLE_STRANGERS; i++) {
				int64_t ms = closed_within(strangers[p][i], 8000);
				if (ms < 0)
					T_FAIL("rank %d kept stranger %d open for 8 s", p, i);
				close(strangers[p][i]);
			}
		fprintf(stderr, "   ranks 0 and 1 closed all %d strangers\n",
			2 * (IDLE_STRANGERS + 1));
		/* The bootstrap's rendezvous address: closed once the job formed. */
		struct sockaddr_storage boot;
		socklen_t blen;
		char host[64], port[16];
		T_OK(xpi_sock_split_hostport(getenv("XP_ADDR"), host, sizeof(host), port,
					     sizeof(port)));
		T_OK(xpi_sock_resolve(host, port, &boot, &blen));
		int err, fd = raw_connect((struct sockaddr_in *)&boot, &err);
		if (err == EINPROGRESS)
			err = raw_connected(fd);
		close(fd);
		fprintf(stderr, "   connect to the bootstrap address after the job formed: %s\n",
			err == 0 ? "accepted" : strerror(err));
		T_EQ(err, ECONNREFUSED);
	}
	T_OK(xp_oob_barrier(ctx));
	exchange_all(ctx, 3);
	T_EQ(t_count_fds(), fds0);
	T_EQ(count_threads(), thr0);
	xp_finalize(ctx);
	return 0;
}

static void test_stranger(void)
{
	T_EQ(mproc_run(3, stranger_body, NULL, 60, NULL, NULL), 0);
}

/* ------------------------------------------------------------------------- */
/* A stranger in the accept queue when a pair is made                         */

/*
 * Before the two ranks talk (their pair is made by the first message), each
 * puts a stranger first in the other's accept queue: one that sends junk,
 * or one that sends nothing. The pair is still made at once, not after the
 * stranger's 3 s handshake deadline.
 */
static int setup_body(int rank, void *arg)
{
	const char *kind = arg;
	xp_context_t *ctx = t_start_rank(rank);
	struct xpi_tcp *t = tcp_of(ctx);
	T_EQ(tcp_wstate(ctx, 1 - rank), TW_IDLE); /* nothing made yet */
	/* The peer's listener, from the addresses xp_init swapped (an
	 * out-of-band exchange now would make the pair: it goes over it). */
	struct sockaddr_storage peer;
	socklen_t plen;
	T_OK(tcp_card_parse(t->cards + (size_t)(1 - rank) * XPI_TCP_CARD_LEN, &peer, &plen));
	T_EQ(peer.ss_family, AF_INET);
	int err, fd = raw_connect((const struct sockaddr_in *)&peer, &err);
	if (err == EINPROGRESS)
		err = raw_connected(fd);
	T_EQ(err, 0);
	if (strcmp(kind, "junk") == 0) {
		static const char junk[] = "GET / HTTP/1.0\r\n\r\n and some more bytes";
		T_EQ(send(fd, junk, sizeof(junk), MSG_NOSIGNAL), (ssize_t)sizeof(junk));
	}
	/* Both ranks left xp_init together (its last step is collective):
	 * a moment more and both strangers are queued. */
	usleep(200000);
	T_EQ(tcp_wstate(ctx, 1 - rank), TW_IDLE);
	int64_t t0 = now_ms();
	pingpong(xp_comm_world(ctx), rank, 1 - rank, TAG_PP);
	int64_t el = now_ms() - t0;
	fprintf(stderr,
		"   rank %d: pair made and a ping-pong done in %lld ms despite the %s "
		"stranger\n",
		rank, (long long)el, kind);
	T_CHECK(el < 2000);
	xp_finalize(ctx);
	close(fd);
	return 0;
}

static void test_setup_stranger(void)
{
	fprintf(stderr, "   a stranger that sends junk\n");
	T_EQ(mproc_run(2, setup_body, "junk", 60, NULL, NULL), 0);
	fprintf(stderr, "   a stranger that sends nothing\n");
	T_EQ(mproc_run(2, setup_body, "silent", 60, NULL, NULL), 0);
}

/* ------------------------------------------------------------------------- */
/* The wrong job key                                                          */

#define KEY_TIMEOUT_MS 3000

static void key_env(int rank, void *arg)
{
	(void)arg;
	char v[16];
	snprintf(v, sizeof(v), "%d", KEY_TIMEOUT_MS);
	setenv("XP_TIMEOUT_MS", v, 1);
	if (rank == 1)
		setenv("XP_JOB_KEY", "not-the-job-key", 1);
}

static int key_body(int rank, void *arg)
{
	(void)arg;
	int64_t t0 = now_ms();
	xp_context_t *ctx = NULL;
	int rc = xp_init(NULL, &ctx);
	int64_t el = now_ms() - t0;
	fprintf(stderr, "   rank %d: xp_init returned %d after %lld ms: %s\n", rank, rc,
		(long long)el, xp_error_detail());
	T_CHECK(ctx == NULL);
	if (rank == 0) {
		/* Rank 0 refuses the stranger's key and waits for the real rank 1. */
		expect_fail(rc, -ETIMEDOUT, "rank 1", "rank 0: xp_init");
		T_CONTAINS(xp_error_detail(), "timed out");
		T_CHECK(el >= KEY_TIMEOUT_MS - 100);
	} else {
		expect_fail(rc, -EACCES, "key", "rank 1: xp_init");
	}
	T_CHECK(el < KEY_TIMEOUT_MS + 2000);
	return 0;
}

static void test_key(void)
{
	T_EQ(mproc_run(2, key_body, NULL, 30, key_env, NULL), 0);
}

static void test_kill_plain(void)
{
	test_kill(false);
}

static void test_kill_zc(void)
{
	test_kill(true);
}

static const struct section {
	const char *name, *what;
	void (*fn)(void);
} sections[] = {
	{ "kill", "a peer killed mid-transfer", test_kill_plain },
	{ "kill-zc", "a peer killed mid-transfer, zero-copy sends", test_kill_zc },
	{ "malformed", "malformed frames", test_malformed },
	{ "stranger", "strangers on the listeners after the job formed", test_stranger },
	{ "key", "a rank with the wrong job key", test_key },
	{ "setup", "a stranger first in the accept queue when a pair is made",
	  test_setup_stranger },
};

/* Runs each section in a child of its own, so one failing section does not
 * hide the others' results. */
static int run_section(const struct section *s)
{
	fprintf(stderr, "-- %s\n", s->what);
	fflush(NULL);
	pid_t pid = fork();
	T_CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(240);
		s->fn();
		exit(0);
	}
	int st;
	T_CHECK(waitpid(pid, &st, 0) == pid);
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	fprintf(stderr, "%s %s\n", ok ? "PASS" : "FAIL", s->name);
	return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
	tcp_test_require();
	int failed = 0, ran = 0;
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		if (argc > 1 && strcmp(argv[1], sections[i].name) != 0)
			continue;
		failed += run_section(&sections[i]);
		ran++;
	}
	if (ran == 0)
		T_FAIL("no section named %s", argv[1]);
	return failed != 0;
}

#endif
