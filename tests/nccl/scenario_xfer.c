/* SPDX-License-Identifier: MIT */
/*
 * Transfers between the two processes, both ways at once, as NCCL's proxy
 * makes them: every payload a seeded pattern checked byte by byte (a
 * misplaced, stale or swapped byte shows with its offset), every size the
 * plugin reports compared with what was sent.
 */
#include <string.h>

#include "../pattern.h"
#include "harness.h"

#define ARENA_BYTES ((size_t)64 << 20)
#define SLACK 4096 /* receives larger than their sends use it */
#define XFER_TIMEOUT_S 60.0

/* The seed of payload @idx of phase @phase sent by process @role. */
static uint32_t seed_of(int role, int phase, int idx)
{
	return (uint32_t)((role + 1) * 1000003 + phase * 10007 + idx);
}

_Static_assert(ARENA_BYTES + SLACK == H_XFER_BYTES, "harness.h says the arena's size");

/* Buffers both processes use, registered once (regIsGlobal: a
 * registration made through one comm serves the other): host memory of
 * ours, or the caller's dmabufs (h_xfer_use_dmabufs). */
static struct {
	unsigned char *send, *recv;
	void *send_mh, *recv_mh;
	bool borrowed; /* the caller's mappings: not ours to free */
} arena;

void h_xfer_use_dmabufs(struct h_net *n, void *sc, void *rc, const struct h_xfer_dmabuf *send,
			const struct h_xfer_dmabuf *recv)
{
	H_CHECK(arena.send == NULL);
	H_CHECK(send->len == H_XFER_BYTES && recv->len == H_XFER_BYTES);
	arena.send_mh = arena.recv_mh = NULL;
	/* As regMr's host memory: the CPU maps it (NCCL_PTR_HOST), the whole
	 * dmabuf from its start. */
	H_OK(h_net_reg_mr_dmabuf(n, sc, send->map, send->len, XNCCL_PTR_HOST, 0, send->fd,
				 &arena.send_mh));
	H_OK(h_net_reg_mr_dmabuf(n, rc, recv->map, recv->len, XNCCL_PTR_HOST, 0, recv->fd,
				 &arena.recv_mh));
	H_CHECK(arena.send_mh != NULL && arena.recv_mh != NULL);
	arena.send = send->map;
	arena.recv = recv->map;
	arena.borrowed = true;
}

static void arena_setup(struct h_net *n, void *sc, void *rc)
{
	if (arena.send != NULL)
		return;
	arena.borrowed = false;
	arena.send = malloc(ARENA_BYTES + SLACK);
	arena.recv = malloc(ARENA_BYTES + SLACK);
	H_CHECK(arena.send != NULL && arena.recv != NULL);
	H_OK(h_net_reg_mr(n, sc, arena.send, ARENA_BYTES + SLACK, XNCCL_PTR_HOST, &arena.send_mh));
	H_OK(h_net_reg_mr(n, rc, arena.recv, ARENA_BYTES + SLACK, XNCCL_PTR_HOST, &arena.recv_mh));
	H_CHECK(arena.send_mh != NULL && arena.recv_mh != NULL);
}

/* Tests both requests, in turn, until both are done (NCCL's proxy tests
 * its sends and receives in one loop). */
static void wait_both(struct h_net *n, void *sreq, void *rreq, int *ssize, int *rsizes)
{
	double end = h_now() + XFER_TIMEOUT_S;
	int sdone = 0, rdone = 0;
	while (!sdone || !rdone) {
		if (!sdone)
			H_OK(h_net_test(n, sreq, &sdone, ssize));
		if (!rdone)
			H_OK(h_net_test(n, rreq, &rdone, rsizes));
		if (h_now() > end)
			H_FAIL("send %s, receive %s after %.0f s", sdone ? "done" : "pending",
			       rdone ? "done" : "pending", XFER_TIMEOUT_S);
	}
}

void h_run_sizes(struct h_net *n, struct h_peer *p, void *sc, void *rc)
{
	static const size_t sizes[] = {
		0,        1,        7,     8,       4095,          4096,    4097,
		32767,    32768,    65539, 1 << 20, (1 << 20) + 1, 4 << 20, (16 << 20) - 5,
		32 << 20, 64 << 20,
	};
	arena_setup(n, sc, rc);
	int me = p->role, peer = 1 - p->role;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t s = sizes[i];
		/* Every other receive is larger than its send. */
		size_t cap = i % 2 ? s + SLACK : s;
		fill(arena.send, s, seed_of(me, 1, (int)i));
		memset(arena.recv + s, 0x5a, SLACK);
		int tag = (int)i, ssize = -1, rsize = -1;
		void *sreq = NULL, *rreq = NULL;
		void *dst = arena.recv;
		H_OK(h_net_irecv(n, rc, 1, &dst, &cap, &tag, &arena.recv_mh, &rreq));
		H_OK(h_net_isend(n, sc, arena.send, s, tag, arena.send_mh, &sreq));
		H_CHECK(rreq != NULL && sreq != NULL);
		wait_both(n, sreq, rreq, &ssize, &rsize);
		H_EQ(ssize, s);
		H_EQ(rsize, s);
		if (check(arena.recv, s, seed_of(peer, 1, (int)i)) != 0)
			H_FAIL("payload of %zu bytes damaged", s);
		for (size_t k = 0; k < SLACK; k++)
			if (arena.recv[s + k] != 0x5a)
				H_FAIL("a %zu-byte message wrote byte %zu past its end", s, k);
	}
	/* The whole buffer into the whole other one: every registered byte,
	 * to the last, carried. */
	size_t cap = H_XFER_BYTES;
	int tag = 76, ssize = -1, rsize = -1;
	void *sreq = NULL, *rreq = NULL, *dst = arena.recv;
	fill(arena.send, H_XFER_BYTES, seed_of(me, 1, tag));
	H_OK(h_net_irecv(n, rc, 1, &dst, &cap, &tag, &arena.recv_mh, &rreq));
	H_OK(h_net_isend(n, sc, arena.send, H_XFER_BYTES, tag, arena.send_mh, &sreq));
	H_CHECK(rreq != NULL && sreq != NULL);
	wait_both(n, sreq, rreq, &ssize, &rsize);
	H_EQ(ssize, H_XFER_BYTES);
	H_EQ(rsize, H_XFER_BYTES);
	if (check(arena.recv, H_XFER_BYTES, seed_of(peer, 1, tag)) != 0)
		H_FAIL("the whole buffer's payload (%zu bytes) damaged", H_XFER_BYTES);
	/* An empty message into a buffer of a page: size 0 reported. */
	cap = 4096;
	tag = 77;
	ssize = rsize = -1;
	sreq = rreq = NULL;
	H_OK(h_net_irecv(n, rc, 1, &dst, &cap, &tag, &arena.recv_mh, &rreq));
	H_OK(h_net_isend(n, sc, arena.send, 0, tag, arena.send_mh, &sreq));
	wait_both(n, sreq, rreq, &ssize, &rsize);
	H_EQ(rsize, 0);
	h_peer_barrier(p, XFER_TIMEOUT_S);
}

/* Size of buffer @k of a group of @n (phase 2): from a few bytes to past
 * the eager limit. */
static size_t group_size(int n, int k)
{
	return (size_t)(k * 9001 + n * 13 + 3);
}

void h_run_groups(struct h_net *n, struct h_peer *p, void *sc, void *rc)
{
	arena_setup(n, sc, rc);
	int me = p->role, peer = 1 - p->role;
	static const int counts[] = { 1, 3, 8 };
	for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
		int cnt = counts[c];
		void *dst[8], *mhs[8], *sreq[8], *rreq = NULL;
		size_t caps[8];
		int tags[8], rsizes[8];
		size_t off = 0;
		for (int k = 0; k < cnt; k++) {
			/* Distinct tags, not in order, and buffers larger than
			 * their messages for odd k. */
			tags[k] = 1000 + ((k * 5) % 8) * 3;
			caps[k] = group_size(cnt, k) + (k % 2 ? 777 : 0);
			dst[k] = arena.recv + off;
			mhs[k] = arena.recv_mh;
			off += caps[k];
			rsizes[k] = -1;
		}
		H_OK(h_net_irecv(n, rc, cnt, dst, caps, tags, mhs, &rreq));
		H_CHECK(rreq != NULL);
		/* The sends go in another order than the buffers: the tag,
		 * not the order, says which buffer each fills. */
		size_t soff = 0;
		for (int j = 0; j < cnt; j++) {
			int k = (j * 5 + 1) % cnt;
			size_t s = group_size(cnt, k);
			fill(arena.send + soff, s, seed_of(me, 2, (int)c * 8 + k));
			H_OK(h_net_isend(n, sc, arena.send + soff, s, tags[k], arena.send_mh,
					 &sreq[j]));
			H_CHECK(sreq[j] != NULL);
			soff += s;
		}
		double end = h_now() + XFER_TIMEOUT_S;
		int rdone = 0, pending = cnt;
		int sdone[8] = { 0 };
		while (!rdone || pending > 0) {
			for (int j = cnt - 1; j >= 0; j--) /* from the last */
				if (!sdone[j]) {
					H_OK(h_net_test(n, sreq[j], &sdone[j], NULL));
					pending -= sdone[j];
				}
			if (!rdone)
				H_OK(h_net_test(n, rreq, &rdone, rsizes));
			if (h_now() > end)
				H_FAIL("group of %d not done after %.0f s", cnt, XFER_TIMEOUT_S);
		}
		/* One request, one done, and each buffer's own size. */
		for (int k = 0; k < cnt; k++) {
			H_EQ(rsizes[k], group_size(cnt, k));
			if (check(dst[k], group_size(cnt, k), seed_of(peer, 2, (int)c * 8 + k)) !=
			    0)
				H_FAIL("buffer %d of a group of %d damaged", k, cnt);
		}
	}
	h_peer_barrier(p, XFER_TIMEOUT_S);
}

/* ------------------------------------------------------------------------- */
/* NCCL's bound of requests in flight                                        */

#define GROUPS XNCCL_MAX_REQUESTS /* grouped receives in flight on a comm */
#define PER 8                     /* buffers each: maxRecvs */
#define NSEND (GROUPS * PER)      /* sends in flight on a comm */
#define WIN_CAP 65536             /* each buffer; the sizes go up to it */

static size_t win_size(int g, int t)
{
	return 1 + (size_t)((g * PER + t) * 7919) % WIN_CAP;
}

static uint32_t rng_next(uint32_t *x)
{
	*x ^= *x << 13;
	*x ^= *x >> 17;
	*x ^= *x << 5;
	return *x;
}

void h_run_window(struct h_net *n, struct h_peer *p, void *sc, void *rc)
{
	arena_setup(n, sc, rc);
	int me = p->role, peer = 1 - p->role;
	static void *rreq[GROUPS], *sreq[NSEND];
	static int sg[NSEND], st[NSEND]; /* the group and tag each send is for */
	static int rsizes[GROUPS][PER];
	int tags[PER];
	for (int t = 0; t < PER; t++)
		tags[t] = 5000 + t * 11;

	/* Every grouped receive NCCL may have in flight, then one more:
	 * no request (NCCL tries again later), and no error. */
	for (int g = 0; g < GROUPS; g++) {
		void *dst[PER], *mhs[PER];
		size_t caps[PER];
		for (int t = 0; t < PER; t++) {
			dst[t] = arena.recv + ((size_t)g * PER + t) * WIN_CAP;
			caps[t] = WIN_CAP;
			mhs[t] = arena.recv_mh;
		}
		H_OK(h_net_irecv(n, rc, PER, dst, caps, tags, mhs, &rreq[g]));
		if (rreq[g] == NULL)
			H_FAIL("grouped receive %d of %d refused", g, GROUPS);
	}
	void *extra = arena.recv + ARENA_BYTES - WIN_CAP, *more = (void *)1;
	size_t extra_cap = 100;
	int extra_tag = 9999;
	H_OK(h_net_irecv(n, rc, 1, &extra, &extra_cap, &extra_tag, &arena.recv_mh, &more));
	H_CHECK(more == NULL);

	/* The sends in a shuffled order, except that for each tag the groups
	 * come in order: the k-th send with a tag fills the k-th receive's
	 * buffer with that tag, as NCCL's matching says. */
	uint32_t rng = 0x9e3779b9u ^ (uint32_t)(me + 1) * 2654435761u;
	for (int i = 0; i < NSEND; i++)
		st[i] = i % PER;
	for (int i = NSEND - 1; i > 0; i--) {
		int j = (int)(rng_next(&rng) % (uint32_t)(i + 1)), tmp = st[i];
		st[i] = st[j];
		st[j] = tmp;
	}
	int next_group[PER] = { 0 };
	for (int i = 0; i < NSEND; i++)
		sg[i] = next_group[st[i]]++;
	for (int i = 0; i < NSEND; i++) {
		unsigned char *src = arena.send + ((size_t)sg[i] * PER + st[i]) * WIN_CAP;
		size_t s = win_size(sg[i], st[i]);
		fill(src, s, seed_of(me, 3, sg[i] * PER + st[i]));
		H_OK(h_net_isend(n, sc, src, s, tags[st[i]], arena.send_mh, &sreq[i]));
		if (sreq[i] == NULL)
			H_FAIL("send %d of %d refused", i, NSEND);
	}
	void *late = (void *)1;
	H_OK(h_net_isend(n, sc, arena.send, 10, 9999, arena.send_mh, &late));
	H_CHECK(late == NULL);

	/* Completion tested in a new random order each round, sends and
	 * receives mixed. */
	static int order[GROUPS + NSEND];
	static int done[GROUPS + NSEND];
	memset(done, 0, sizeof(done));
	int left = GROUPS + NSEND;
	for (int i = 0; i < GROUPS + NSEND; i++)
		order[i] = i;
	double end = h_now() + XFER_TIMEOUT_S;
	while (left > 0) {
		for (int i = GROUPS + NSEND - 1; i > 0; i--) {
			int j = (int)(rng_next(&rng) % (uint32_t)(i + 1)), tmp = order[i];
			order[i] = order[j];
			order[j] = tmp;
		}
		for (int i = 0; i < GROUPS + NSEND; i++) {
			int r = order[i];
			if (done[r])
				continue;
			if (r < GROUPS)
				H_OK(h_net_test(n, rreq[r], &done[r], rsizes[r]));
			else
				H_OK(h_net_test(n, sreq[r - GROUPS], &done[r], NULL));
			left -= done[r];
		}
		if (h_now() > end)
			H_FAIL("%d of %d requests not done after %.0f s", left, GROUPS + NSEND,
			       XFER_TIMEOUT_S);
	}
	for (int g = 0; g < GROUPS; g++)
		for (int t = 0; t < PER; t++) {
			H_EQ(rsizes[g][t], win_size(g, t));
			unsigned char *b = arena.recv + ((size_t)g * PER + t) * WIN_CAP;
			if (check(b, win_size(g, t), seed_of(peer, 3, g * PER + t)) != 0)
				H_FAIL("group %d, tag %d damaged", g, tags[t]);
		}

	/* The send and the receive that found no room, tried again now. */
	fill(arena.send, 10, seed_of(me, 4, 0));
	more = late = NULL;
	H_OK(h_net_irecv(n, rc, 1, &extra, &extra_cap, &extra_tag, &arena.recv_mh, &more));
	H_OK(h_net_isend(n, sc, arena.send, 10, 9999, arena.send_mh, &late));
	H_CHECK(more != NULL && late != NULL);
	int ssize = -1, rsize = -1;
	wait_both(n, late, more, &ssize, &rsize);
	H_EQ(rsize, 10);
	if (check(extra, 10, seed_of(peer, 4, 0)) != 0)
		H_FAIL("the retried message is damaged");
	h_peer_barrier(p, XFER_TIMEOUT_S);
}

/* ------------------------------------------------------------------------- */
/* A sender that stops calling                                               */

#define QUIET_MSGS XNCCL_MAX_REQUESTS
#define QUIET_BYTES 4096

/*
 * NCCL stops calling the plugin once its requests are done, though a
 * completed send may still sit in a queue of ours (a small message is
 * copied and its request completes at once). Here the sender completes a
 * burst of small sends and then only waits on the pipe, calling nothing,
 * until the receiver says it has every message: their delivery must not
 * depend on the sender's next call.
 */
static void quiet_round(struct h_net *n, struct h_peer *p, void *sc, void *rc, int sender)
{
	void *req[QUIET_MSGS];
	int done[QUIET_MSGS] = { 0 }, left = QUIET_MSGS, sizes[QUIET_MSGS];
	if (!sender) {
		for (int i = 0; i < QUIET_MSGS; i++) {
			void *dst = arena.recv + (size_t)i * QUIET_BYTES;
			size_t cap = QUIET_BYTES;
			int tag = 7000 + i;
			H_OK(h_net_irecv(n, rc, 1, &dst, &cap, &tag, &arena.recv_mh, &req[i]));
			H_CHECK(req[i] != NULL);
		}
	}
	h_peer_barrier(p, XFER_TIMEOUT_S);
	if (sender) {
		for (int i = 0; i < QUIET_MSGS; i++) {
			unsigned char *src = arena.send + (size_t)i * QUIET_BYTES;
			fill(src, QUIET_BYTES, seed_of(p->role, 5, i));
			H_OK(h_net_isend(n, sc, src, QUIET_BYTES, 7000 + i, arena.send_mh,
					 &req[i]));
			H_CHECK(req[i] != NULL);
		}
	}
	double end = h_now() + 20.0;
	while (left > 0) {
		for (int i = 0; i < QUIET_MSGS; i++)
			if (!done[i]) {
				H_OK(h_net_test(n, req[i], &done[i], &sizes[i]));
				left -= done[i];
			}
		if (left > 0 && h_now() > end)
			H_FAIL("%d of %d %s not done after 20 s, the %s calling nothing", left,
			       QUIET_MSGS, sender ? "sends" : "receives",
			       sender ? "receiver" : "sender");
	}
	char word = 'q';
	if (sender) {
		/* Not a call into the plugin until the receiver has it all. */
		h_peer_recv(p, &word, 1, XFER_TIMEOUT_S);
		H_EQ(word, 'r');
		return;
	}
	for (int i = 0; i < QUIET_MSGS; i++) {
		H_EQ(sizes[i], QUIET_BYTES);
		if (check(arena.recv + (size_t)i * QUIET_BYTES, QUIET_BYTES,
			  seed_of(1 - p->role, 5, i)) != 0)
			H_FAIL("quiet message %d damaged", i);
	}
	word = 'r';
	h_peer_send(p, &word, 1);
}

void h_run_quiet(struct h_net *n, struct h_peer *p, void *sc, void *rc)
{
	arena_setup(n, sc, rc);
	quiet_round(n, p, sc, rc, p->role == 0);
	quiet_round(n, p, sc, rc, p->role == 1);
}

void h_xfer_teardown(struct h_net *n, void *sc, void *rc)
{
	if (arena.send == NULL)
		return;
	/* Deregistered through the other comm than the one that made each:
	 * registrations are global. */
	H_OK(h_net_dereg_mr(n, rc, arena.send_mh));
	H_OK(h_net_dereg_mr(n, sc, arena.recv_mh));
	if (!arena.borrowed) {
		free(arena.send);
		free(arena.recv);
	}
	arena.send = arena.recv = NULL;
}
