/* SPDX-License-Identifier: MIT */
/*
 * The RDMA bulk lane between processes, on a real device (the lab VM's
 * soft-RoCE): XP_TRANSPORTS=tcp,rdma, messages over TCP, rendezvous
 * payloads read with RDMA. Each rank first checks that rdma really is the
 * bulk lane to its peer (the engine's lanes, not a route's word), so this
 * cannot pass over TCP alone.
 *
 *   test_rdma_bulk sizes    0 B to 64 MiB both ways, checked byte for byte;
 *                           from and into buffers the program registered
 *                           (xp_mem_register) and not; a truncated receive
 *                           (-EMSGSIZE, the first cap bytes right, nothing
 *                           written past them)
 *   test_rdma_bulk dead     rank 1 exits with a 64 MiB send of rank 0's
 *                           offered to it: the send fails within its
 *                           deadline, naming rank 1, and does not hang
 *   test_rdma_bulk fallback XP_RDMA_DEVICE names no device: rdma is left
 *                           out (a warning says why) and payloads go over
 *                           tcp, intact
 *   test_rdma_bulk race     withdrawals racing the receiver's claim: rank 0
 *                           offers 64 KiB, cancels it after a varying
 *                           delay while rank 1's receive is posted, and at
 *                           once overwrites its buffer; then sends a short
 *                           message on the same tag. Either the claim won
 *                           (the send completes, rank 1 gets the 64 KiB
 *                           intact, then the short one) or the withdrawal
 *                           did (-ECANCELED, rank 1's receive gets the
 *                           short one): never the overwritten bytes, and
 *                           each side's view agrees with the other's
 *   test_rdma_bulk dead_sender  rank 0 exits while rank 1 reads its 64 MiB
 *                           payload: the receive fails naming rank 0
 *   test_rdma_bulk late_claim  rank 1 gives up on its claims without
 *                           waiting (its claim wait set to 0: it does not
 *                           poll), so their real answers, from the device,
 *                           come after it stopped waiting, as from a
 *                           sender slow to answer (soft-RoCE otherwise
 *                           answers within the post): every receive either gets its
 *                           1 MiB intact or fails with -ETIMEDOUT, and its
 *                           send then fails (the claim won late: a failing
 *                           FIN) instead of waiting for ever; the two sides
 *                           agree each round, rank 0 gets every state word
 *                           back, and later transfers (each claim in its
 *                           own result slot) arrive intact
 *   test_rdma_bulk rcache   the registration cache, with its bound at 8 MiB:
 *                           transfers from and into a 96 MiB registration
 *                           (pinned in 2 MiB chunks) hit, miss and evict as
 *                           counted; then the sender deregisters, unmaps,
 *                           maps new memory at the same address, fills it
 *                           anew and registers it: the receiver gets the new
 *                           bytes, not the old pages' (no stale key)
 *   test_rdma_bulk negotiate no XP_TRANSPORTS, the two ranks on two "hosts"
 *                           (XP_HOST_ID): the selection picks rdma for
 *                           messages and payloads, with tcp connected
 *                           beside it to watch; then with rank 1 lacking
 *                           the device (XP_RDMA_DEVICE naming none), tcp
 *                           for both, on both sides
 *
 * Skips (77) where the host has no RDMA device.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <sys/mman.h>

#include "core/engine.h"
#include "rdma/rdma_tl.h"
#include "mproc.h"
#include "pattern.h"
#include "testutil.h"
#include "tl_job.h"

static const size_t sizes[] = {
	0, 1, 16383, 16384, 32768, 65537, 1 << 20, (4 << 20) + 1, 64 << 20
};
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))
#define BIG (64u << 20)

static void expect_rdma_bulk(xp_context_t *ctx, int peer)
{
	const char *bulk = ctx->tls[ctx->peers[peer].tl_bulk].ops->name;
	const char *small = ctx->tls[ctx->peers[peer].tl_small].ops->name;
	if (strcmp(bulk, "rdma") != 0 || strcmp(small, "tcp") != 0)
		T_FAIL("rank %d -> %d: lanes %s/%s, want tcp/rdma", xp_rank(ctx), peer, small,
		       bulk);
}

/* One message of @len from @from to the other, received into @rbuf (its
 * capacity @cap, with 64 bytes more behind it that must stay untouched);
 * the sender's buffer @sbuf. */
static void one(xp_context_t *ctx, int from, size_t len, uint8_t *sbuf, uint8_t *rbuf, size_t cap,
		uint32_t seed)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), peer = 1 - me;
	if (me == from) {
		fill(sbuf, len, seed);
		T_OK(xp_send(w, sbuf, len, peer, seed));
		return;
	}
	memset(rbuf, 0xa5, cap + 64); /* every receive buffer has 64 bytes to spare */
	xp_status_t st;
	int rc = xp_recv(w, rbuf, cap, peer, seed, XP_TAG_EXACT, &st);
	if (len > cap) {
		T_EQ(rc, -EMSGSIZE);
		T_OK(check(rbuf, cap, seed));
	} else {
		T_OK(rc);
		T_EQ(st.length, len);
		T_OK(check(rbuf, len, seed));
	}
	for (size_t i = len < cap ? len : cap; i < (len < cap ? len : cap) + 64; i++)
		if (rbuf[i] != 0xa5)
			T_FAIL("%zu B message: byte %zu past it was written", len, i);
}

static int sizes_body(xp_context_t *ctx)
{
	int me = xp_rank(ctx);
	expect_rdma_bulk(ctx, 1 - me);
	uint8_t *sbuf = malloc(BIG + 64), *rbuf = malloc(BIG + 64);
	uint8_t *rsbuf = malloc(BIG + 64), *rrbuf = malloc(BIG + 64);
	T_CHECK(sbuf && rbuf && rsbuf && rrbuf);
	xp_mem_t *ms, *mr;
	T_OK(xp_mem_register(ctx, rsbuf, BIG + 64, &ms));
	T_OK(xp_mem_register(ctx, rrbuf, BIG + 64, &mr));
	xp_stats_t before, after;
	T_OK(xp_stats_get(ctx, &before));
	uint32_t seed = 1;
	for (size_t i = 0; i < NSIZES; i++) {
		for (int from = 0; from < 2; from++) {
			one(ctx, from, sizes[i], sbuf, rbuf, BIG, seed++);
			one(ctx, from, sizes[i], rsbuf, rrbuf, BIG, seed++); /* registered */
		}
	}
	/* Truncated: 1 MiB into 300000 bytes, and 64 MiB into 1 MiB. */
	one(ctx, 0, 1 << 20, sbuf, rbuf, 300000, seed++);
	one(ctx, 1, BIG, rsbuf, rbuf, 1 << 20, seed++);
	T_OK(xp_stats_get(ctx, &after));
	if (after.rndv_sends == before.rndv_sends)
		T_FAIL("no rendezvous send at all");
	fprintf(stderr, "   rank %d: %llu rendezvous sends over tcp+rdma\n", me,
		(unsigned long long)(after.rndv_sends - before.rndv_sends));
	xp_mem_deregister(ms);
	xp_mem_deregister(mr);
	free(sbuf);
	free(rbuf);
	free(rsbuf);
	free(rrbuf);
	return 0;
}

static int dead_body(xp_context_t *ctx)
{
	int me = xp_rank(ctx);
	expect_rdma_bulk(ctx, 1 - me);
	if (me == 1) {
		/* Take part in one small exchange, so rank 0 knows the
		 * connection works, then vanish without finalizing. */
		char c;
		T_OK(xp_recv(xp_comm_world(ctx), &c, 1, 0, 1, XP_TAG_EXACT, NULL));
		sleep(1); /* rank 0's 64 MiB send is offered by now */
		_exit(0);
	}
	uint8_t *buf = malloc(BIG);
	T_CHECK(buf != NULL);
	fill(buf, BIG, 7);
	char c = 'x';
	T_OK(xp_send(xp_comm_world(ctx), &c, 1, 1, 1));
	xp_request_t *r;
	T_OK(xp_isend(xp_comm_world(ctx), buf, BIG, 1, 2, &r));
	int rc = xp_wait(&r, 20000, NULL);
	fprintf(stderr, "   rank 0: the 64 MiB send to the vanished rank 1 ended: %d (%s) %s\n", rc,
		xp_strerror(rc), xp_error_detail());
	T_CHECK(rc < 0);
	T_CONTAINS(xp_error_detail(), "rank 1");
	free(buf);
	return 0;
}

static int fallback_body(xp_context_t *ctx)
{
	int me = xp_rank(ctx), peer = 1 - me;
	const char *bulk = ctx->tls[ctx->peers[peer].tl_bulk].ops->name;
	if (strcmp(bulk, "tcp") != 0)
		T_FAIL("rank %d -> %d: payloads over %s, want tcp", me, peer, bulk);
	uint8_t *buf = malloc((1 << 20) + 64);
	T_CHECK(buf != NULL);
	one(ctx, 0, 1 << 20, buf, buf, 1 << 20, 5);
	free(buf);
	return 0;
}

#define RC_LEN (96u << 20)
#define RC_MSG (1u << 20)

static struct rdma_rcache *rcache_of(xp_context_t *ctx, int peer)
{
	return &((struct xpi_rdma_tl *)ctx->tls[ctx->peers[peer].tl_bulk].tl)->rcache;
}

/* Maps the registration's memory exactly at @addr, where an earlier
 * mapping was; or (@addr NULL) anywhere 2 MiB-aligned, so that the cache's
 * chunks fall where the test counts on them. */
static uint8_t *map_at(void *addr)
{
	const size_t chunk = XPI_RCACHE_CHUNK;
	if (addr == NULL) {
		uint8_t *p = mmap(NULL, RC_LEN + chunk, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		T_CHECK(p != MAP_FAILED);
		uint8_t *a = (uint8_t *)(((uintptr_t)p + chunk - 1) & ~(uintptr_t)(chunk - 1));
		if (a > p)
			munmap(p, (size_t)(a - p));
		if (a + RC_LEN < p + RC_LEN + chunk)
			munmap(a + RC_LEN, (size_t)(p + RC_LEN + chunk - (a + RC_LEN)));
		return a;
	}
	void *p = mmap(addr, RC_LEN, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (p == MAP_FAILED || p != addr)
		T_FAIL("cannot map %u MiB at %p again", RC_LEN >> 20, addr);
	return p;
}

static int rcache_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), peer = 1 - me;
	expect_rdma_bulk(ctx, peer);
	struct rdma_rcache *rc = rcache_of(ctx, peer);
	T_EQ(rc->max_bytes, 8u << 20);
	uint8_t *mem = map_at(NULL);
	xp_mem_t *reg;
	T_OK(xp_mem_register(ctx, mem, RC_LEN, &reg));
	/* Offsets: one chunk twice (a miss, then hits), then ten others: the
	 * cache holds four 2 MiB chunks, so it lets old ones go. */
	size_t offs[] = { 0,         0,         1u << 20,  10u << 20, 20u << 20,
			  30u << 20, 40u << 20, 50u << 20, 60u << 20, 70u << 20,
			  80u << 20, 90u << 20, 0 };
	uint32_t seed = 100;
	for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
		uint8_t *p = mem + offs[i];
		if (me == 0) {
			fill(p, RC_MSG, seed);
			T_OK(xp_send(w, p, RC_MSG, 1, seed));
		} else {
			T_OK(xp_recv(w, p, RC_MSG, 0, seed, XP_TAG_EXACT, NULL));
			T_OK(check(p, RC_MSG, seed));
		}
		seed++;
	}
	fprintf(stderr, "   rank %d: %llu hits, %llu misses, %llu evictions, %zu bytes pinned\n",
		me, (unsigned long long)rc->hits, (unsigned long long)rc->misses,
		(unsigned long long)rc->evictions, rc->bytes);
	T_CHECK(rc->hits >= 2);
	T_CHECK(rc->misses >= 11);
	T_CHECK(rc->evictions >= 6);
	T_CHECK(rc->bytes <= rc->max_bytes);

	/* New memory at the same address: deregistered first, as xport.h
	 * asks, so nothing of the old pages may be used. */
	if (me == 0) {
		fill(mem, RC_MSG, 7777); /* what a stale key would still show */
		xp_mem_deregister(reg);
		T_EQ(rc->bytes, 0);
		T_EQ(munmap(mem, RC_LEN), 0);
		mem = map_at(mem); /* new pages at the same address */
		fill(mem, RC_MSG, 8888);
		T_OK(xp_mem_register(ctx, mem, RC_LEN, &reg));
		uint64_t misses = rc->misses;
		T_OK(xp_send(w, mem, RC_MSG, 1, 8888));
		T_EQ(rc->misses, misses + 1);
	} else {
		T_OK(xp_recv(w, mem, RC_MSG, 0, 8888, XP_TAG_EXACT, NULL));
		if (check(mem, RC_MSG, 8888) != 0)
			T_FAIL("the payload is not the new memory's%s",
			       check(mem, RC_MSG, 7777) == 0 ?
				       ": it is the old pages' (stale key)" :
				       "");
	}
	xp_mem_deregister(reg);
	munmap(mem, RC_LEN);
	return 0;
}

#define RACE_N 300
#define RACE_LEN (64u << 10)

static int race_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx);
	expect_rdma_bulk(ctx, 1 - me);
	uint8_t *buf = malloc(RACE_LEN);
	T_CHECK(buf != NULL);
	int claimed = 0, withdrawn = 0, raced = 0;
	uint32_t rng = 12345;
	for (int i = 0; i < RACE_N; i++) {
		uint64_t tag = (uint64_t)i;
		uint8_t outcome;
		if (me == 1) {
			xp_status_t st;
			T_OK(xp_recv(w, buf, RACE_LEN, 0, tag, XP_TAG_EXACT, &st));
			bool got_long = st.length == RACE_LEN;
			if (got_long) {
				T_OK(check(buf, RACE_LEN, (uint32_t)(2 * i + 1)));
				T_OK(xp_recv(w, buf, RACE_LEN, 0, tag, XP_TAG_EXACT, &st));
			}
			T_EQ(st.length, 8);
			T_OK(check(buf, 8, (uint32_t)(2 * i + 2)));
			T_OK(xp_recv(w, &outcome, 1, 0, 1000000 + tag, XP_TAG_EXACT, NULL));
			if (got_long != (outcome == 'C'))
				T_FAIL("round %d: the sender saw %s, the receiver got %s", i,
				       outcome == 'C' ? "its send complete" : "it withdrawn",
				       got_long ? "the payload" : "only the short message");
			claimed += got_long;
			withdrawn += !got_long;
			continue;
		}
		fill(buf, RACE_LEN, (uint32_t)(2 * i + 1));
		xp_request_t *r;
		T_OK(xp_isend(w, buf, RACE_LEN, 1, tag, &r));
		rng = rng * 1103515245u + 12345u;
		/* 0 to 4 ms, spread evenly over a log scale from 1 us: the
		 * claim's round trip is some microseconds on a NIC and a few
		 * hundred under the lab's emulation, and both must be met. */
		double frac = (double)((rng >> 8) % 1000) / 1000.0;
		int64_t spin_ns = (int64_t)(1000.0 * pow(4000.0, frac));
		/* Waiting as a sender with a deadline does: progressing (the
		 * announcement goes out, a FIN comes in), then giving up. */
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int rc = 1;
		do {
			rc = xp_test(&r, NULL);
			clock_gettime(CLOCK_MONOTONIC, &t);
		} while (rc == 0 &&
			 (t.tv_sec - t0.tv_sec) * 1000000000LL + (t.tv_nsec - t0.tv_nsec) <
				 spin_ns);
		if (rc < 0)
			T_FAIL("round %d: the send failed: %s", i, xp_error_detail());
		if (rc == 0) { /* still pending: withdraw it, racing the claim */
			T_OK(xp_cancel(r));
			rc = xp_wait(&r, 20000, NULL);
			raced += rc == 0; /* asked to withdraw, but the claim came first */
		} else {
			rc = 0; /* completed: the claim won outright */
		}
		if (rc != 0 && rc != -ECANCELED)
			T_FAIL("round %d: the send ended %d (%s)", i, rc, xp_error_detail());
		/* The buffer is ours again either way: a read of it now would
		 * deliver these bytes. */
		memset(buf, 0xdd, RACE_LEN);
		fill(buf, 8, (uint32_t)(2 * i + 2));
		T_OK(xp_send(w, buf, 8, 1, tag));
		outcome = rc == 0 ? 'C' : 'W';
		T_OK(xp_send(w, &outcome, 1, 1, 1000000 + tag));
		claimed += rc == 0;
		withdrawn += rc != 0;
	}
	fprintf(stderr,
		"   rank %d: %d rounds: the claim won %d (%d of them against a withdrawal already "
		"asked for), the withdrawal %d\n",
		me, RACE_N, claimed, raced, withdrawn);
	free(buf);
	return 0;
}

#define LATE_N 20
#define LATE_LEN (1u << 20)

static struct xpi_rdma_tl *rdma_of(xp_context_t *ctx, int peer)
{
	return (struct xpi_rdma_tl *)ctx->tls[ctx->peers[peer].tl_bulk].tl;
}

static int late_claim_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx);
	expect_rdma_bulk(ctx, 1 - me);
	struct xpi_rdma_tl *t = rdma_of(ctx, 1 - me);
	uint8_t *buf = malloc(LATE_LEN);
	T_CHECK(buf != NULL);
	int late = 0;
	for (int i = 0; i < LATE_N + 5; i++) {
		uint64_t tag = (uint64_t)i;
		uint32_t seed = (uint32_t)(100 + i);
		bool give_up = i < LATE_N; /* then 5 rounds as usual */
		char outcome;
		if (me == 1) {
			t->claim_ns = give_up ? 0 : XPI_RDMA_CLAIM_NS;
			int rc = xp_recv(w, buf, LATE_LEN, 0, tag, XP_TAG_EXACT, NULL);
			if (rc == 0)
				T_OK(check(buf, LATE_LEN, seed));
			else if (rc != -ETIMEDOUT || !give_up)
				T_FAIL("round %d: the receive ended %d (%s)", i, rc,
				       xp_error_detail());
			T_OK(xp_recv(w, &outcome, 1, 0, 1000 + tag, XP_TAG_EXACT, NULL));
			if ((rc == 0) != (outcome == 'C'))
				T_FAIL("round %d: the receive ended %d, the send %s", i, rc,
				       outcome == 'C' ? "completed" : "failed");
			late += rc != 0;
			continue;
		}
		fill(buf, LATE_LEN, seed);
		xp_request_t *r;
		T_OK(xp_isend(w, buf, LATE_LEN, 1, tag, &r));
		/* Bounded: a send whose claim won after the receiver gave up
		 * used to wait here for ever (for its deadline). */
		int rc = xp_wait(&r, 20000, NULL);
		if (rc != 0 && (rc != -EIO || !give_up))
			T_FAIL("round %d: the send ended %d (%s)", i, rc, xp_error_detail());
		outcome = rc == 0 ? 'C' : 'F';
		T_OK(xp_send(w, &outcome, 1, 1, 1000 + tag));
		late += rc != 0;
	}
	T_OK(xp_oob_barrier(ctx));
	fprintf(stderr,
		"   rank %d: %d of %d claims answered after the receiver gave up (%llu seen "
		"late here)\n",
		me, late, LATE_N, (unsigned long long)t->st_late_claims);
	if (me == 1 && (late == 0 || t->st_late_claims != (uint64_t)late))
		T_FAIL("rank 1: %d receives gave up, %llu late claims undone", late,
		       (unsigned long long)t->st_late_claims);
	if (me == 0 && t->nfree != XPI_RDMA_NWORDS)
		T_FAIL("rank 0: %u of %u state words free after every send ended", t->nfree,
		       XPI_RDMA_NWORDS);
	free(buf);
	return 0;
}

static int dead_sender_body(xp_context_t *ctx)
{
	int me = xp_rank(ctx);
	expect_rdma_bulk(ctx, 1 - me);
	uint8_t *buf = malloc(BIG);
	T_CHECK(buf != NULL);
	if (me == 0) {
		fill(buf, BIG, 3);
		xp_request_t *r;
		T_OK(xp_isend(xp_comm_world(ctx), buf, BIG, 1, 2, &r));
		/* The claim and the read need nothing of this process: let rank
		 * 1 start reading, then vanish in the middle of it (64 MiB at
		 * the lab's tens of MB/s take seconds). */
		sleep(1);
		_exit(0);
	}
	int rc = xp_recv(xp_comm_world(ctx), buf, BIG, 0, 2, XP_TAG_EXACT, NULL);
	fprintf(stderr,
		"   rank 1: the 64 MiB receive from the vanished rank 0 ended: %d (%s) %s\n", rc,
		xp_strerror(rc), xp_error_detail());
	T_CHECK(rc < 0);
	T_CONTAINS(xp_error_detail(), "rank 0");
	free(buf);
	return 0;
}

/* negotiate: which lanes each rank must see, by the case. */
static int negotiate_case;

static void negotiate_env(int rank, void *arg)
{
	(void)arg;
	unsetenv("XP_TRANSPORTS");
	setenv("XP_HOST_ID", rank == 0 ? "host-a" : "host-b", 1);
	if (negotiate_case == 1 && rank == 1)
		setenv("XP_RDMA_DEVICE", "no-such-device", 1);
}

static int negotiate_rank(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	int peer = 1 - rank;
	const char *small = ctx->tls[ctx->peers[peer].tl_small].ops->name;
	const char *bulk = ctx->tls[ctx->peers[peer].tl_bulk].ops->name;
	const char *want = negotiate_case == 0 ? "rdma" : "tcp";
	bool tcp_attached = false;
	for (int i = 0; i < ctx->ntls; i++)
		tcp_attached |= strcmp(ctx->tls[i].ops->name, "tcp") == 0;
	fprintf(stderr, "   case %d rank %d -> %d: messages over %s, payloads over %s, tcp %s\n",
		negotiate_case, rank, peer, small, bulk, tcp_attached ? "attached" : "absent");
	if (strcmp(small, want) != 0 || strcmp(bulk, want) != 0)
		T_FAIL("case %d rank %d: lanes %s/%s, want %s/%s", negotiate_case, rank, small,
		       bulk, want, want);
	/* Over rdma, tcp is connected beside it to see the peer end. */
	if (!tcp_attached)
		T_FAIL("case %d rank %d: no tcp connection (to watch rdma's peer)", negotiate_case,
		       rank);
	uint8_t *buf = malloc((1 << 20) + 64);
	T_CHECK(buf != NULL);
	one(ctx, 0, 1 << 20, buf, buf, 1 << 20, 9);
	free(buf);
	xp_finalize(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "negotiate") == 0) {
		if (getenv("XP_LAB") == NULL && access("/sys/class/infiniband", F_OK) != 0) {
			printf("SKIP: no RDMA device here (tests/rdma/in-lab.sh runs this in the "
			       "lab VM)\n");
			return T_SKIP;
		}
		int failed = 0;
		for (negotiate_case = 0; negotiate_case < 2; negotiate_case++)
			failed += mproc_run(2, negotiate_rank, NULL, 120, negotiate_env, NULL) != 0;
		return failed == 0 ? 0 : 1;
	}
	static const char *const modes[] = { "sizes",  "dead",        "fallback",  "race",
					     "rcache", "dead_sender", "late_claim" };
	int mode = -1;
	for (int i = 0; argc == 2 && i < (int)(sizeof(modes) / sizeof(modes[0])); i++)
		if (strcmp(argv[1], modes[i]) == 0)
			mode = i;
	if (mode < 0) {
		fprintf(stderr,
			"usage: %s sizes|dead|fallback|race|rcache|dead_sender|late_claim|negotiate\n",
			argv[0]);
		return 2;
	}
	if (getenv("XP_LAB") == NULL && access("/sys/class/infiniband", F_OK) != 0) {
		printf("SKIP: no RDMA device here (tests/rdma/in-lab.sh runs this in the lab VM)\n");
		return T_SKIP;
	}
	if (strcmp(argv[1], "sizes") == 0)
		return tl_job_run("tcp,rdma", 2, sizes_body, 280);
	if (strcmp(argv[1], "rcache") == 0) {
		setenv("XP_RDMA_RCACHE_BYTES", "8m", 1);
		return tl_job_run("tcp,rdma", 2, rcache_body, 200);
	}
	if (strcmp(argv[1], "race") == 0)
		return tl_job_run("tcp,rdma", 2, race_body, 300);
	if (strcmp(argv[1], "late_claim") == 0)
		return tl_job_run("tcp,rdma", 2, late_claim_body, 200);
	if (strcmp(argv[1], "dead_sender") == 0)
		return tl_job_run("tcp,rdma", 2, dead_sender_body, 120);
	if (strcmp(argv[1], "fallback") == 0) {
		setenv("XP_RDMA_DEVICE", "no-such-device", 1);
		return tl_job_run("tcp,rdma", 2, fallback_body, 120);
	}
	/* Rank 1's early exit is the test: mproc reports it, we judge rank 0. */
	return tl_job_run("tcp,rdma", 2, dead_body, 120);
}
