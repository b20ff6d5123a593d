/* SPDX-License-Identifier: MIT */
/* Steps of the collectives and the allreduce algorithms; see coll.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/log.h"
#include "coll.h"

/* A tag: the call's sequence number, the operation, the step. */
#define TAG_SEQ_SHIFT 32
#define TAG_KIND_SHIFT 24

void xpi_coll_begin(struct xpi_coll *c, xp_comm_t *comm, enum xpi_coll_kind kind, const char *call)
{
	uint32_t seq = comm->coll_seq++;
	c->comm = comm;
	c->call = call;
	c->tag_base = (uint64_t)seq << TAG_SEQ_SHIFT | (uint64_t)kind << TAG_KIND_SHIFT;
	c->timeout_ms = comm->ctx->cfg.timeout_ms;
	c->deadline = xpi_now_ns() + (int64_t)c->timeout_ms * 1000000;
	xpi_coll_group(c, NULL, comm->size, comm->rank, 0);
}

void xpi_coll_group(struct xpi_coll *c, const int *group, int n, int me, unsigned step_base)
{
	c->group = group;
	c->gsize = n;
	c->grank = me;
	c->step_base = step_base;
}

static int member_rank(const struct xpi_coll *c, int m)
{
	return m < 0 || c->group == NULL ? m : c->group[m];
}

static int left_ms(const struct xpi_coll *c)
{
	int64_t left = c->deadline - xpi_now_ns();
	return left <= 0 ? 0 : (int)((left + 999999) / 1000000);
}

/* The failure of a step, said as the program's call. */
static int step_failed(struct xpi_coll *c, int rc, unsigned step, int to, int from)
{
	char inner[512];
	snprintf(inner, sizeof(inner), "%s", xp_error_detail());
	return xpi_fail(rc,
			"rank %d: %s on communicator %u (step %u, sending to rank %d, "
			"receiving from rank %d): %s",
			c->comm->rank, c->call, c->comm->id, step, to, from, inner);
}

/* A member of the communicator whose connection is lost, or -1. */
static int lost_member(const struct xpi_coll *c, char *why, size_t n)
{
	xp_context_t *ctx = c->comm->ctx;
	for (int r = 0; r < c->comm->size; r++) {
		const struct xpi_peer *peer = &ctx->peers[xpi_comm_world_rank(c->comm, r)];
		if (peer->failed != 0) {
			snprintf(why, n, "%s", peer->failed_why);
			return r;
		}
	}
	return -1;
}

/* The slice a step waits before it looks whether a member was lost: a rank
 * that waits for a live neighbour who itself waits for a dead rank learns
 * of it from its own connection to that rank within this. */
#define LOST_CHECK_MS 20

/*
 * Waits for a step's two requests until both are done, the call's deadline
 * passes (the rest are cancelled as xp_wait cancels), or some member of
 * the communicator is lost: then the rest are cancelled and the call
 * fails with -EPIPE naming that rank, on every rank that has a connection
 * to it, not only its neighbours in the algorithm.
 */
static int wait_step(struct xpi_coll *c, xp_request_t **reqs, xp_status_t *st)
{
	int first_err = 0;
	for (;;) {
		if (reqs[0] == NULL && reqs[1] == NULL)
			return first_err;
		int slice = left_ms(c);
		if (slice > LOST_CHECK_MS)
			slice = LOST_CHECK_MS;
		size_t i;
		xp_status_t one;
		int rc = xp_waitany(2, reqs, slice, &i, &one);
		if (rc == -ETIMEDOUT && i == 2) {
			char why[128];
			int lost = lost_member(c, why, sizeof(why));
			if (lost < 0 && left_ms(c) > 0)
				continue;
			if (lost < 0) /* the deadline: xp_wait cancels and says so */
				return xp_waitall(2, reqs, 0, st);
			for (int k = 0; k < 2; k++)
				if (reqs[k] != NULL)
					xp_cancel(reqs[k]);
			(void)xp_waitall(2, reqs, XP_TIMEOUT_DEFAULT, NULL);
			return xpi_fail(
				-EPIPE,
				"rank %d: %s on communicator %u: rank %d of it is lost (%s); "
				"the collective cannot complete",
				c->comm->rank, c->call, c->comm->id, lost, why);
		}
		st[i] = one;
		if (rc < 0 && first_err == 0)
			first_err = rc;
	}
}

int xpi_coll_sendrecv(struct xpi_coll *c, unsigned step, int to, const void *sbuf, size_t slen,
		      int from, void *rbuf, size_t rcap)
{
	xp_request_t *reqs[2] = { NULL, NULL };
	xp_status_t st[2];
	uint64_t tag = c->tag_base | (c->step_base + step);
	int rc = 0;
	to = member_rank(c, to);
	from = member_rank(c, from);
	if (from >= 0)
		rc = xpi_coll_irecv(c->comm, rbuf, rcap, from, tag, &reqs[1]);
	if (rc == 0 && to >= 0)
		rc = xpi_coll_isend(c->comm, sbuf, slen, to, tag, &reqs[0]);
	int wrc = wait_step(c, reqs, st);
	if (rc == 0)
		rc = wrc;
	if (rc == -EPIPE)
		return rc; /* a lost member, named already */
	if (rc == -EMSGSIZE || (rc == 0 && from >= 0 && st[1].length != rcap)) {
		size_t got = st[1].length;
		return xpi_fail(-EINVAL,
				"rank %d: %s on communicator %u (step %u): rank %d sent %zu bytes "
				"where %zu were expected: the members disagree on the count, the "
				"type or the root",
				c->comm->rank, c->call, c->comm->id, step, from, got, rcap);
	}
	if (rc < 0)
		return step_failed(c, rc, step, to, from);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Recursive doubling: log2(p) exchanges of the whole vector              */

/*
 * For any p: with pof2 the largest power of two <= p and rem = p - pof2,
 * the first 2*rem ranks pair up (even into odd) before and after, so the
 * doubling runs between pof2 ranks. Latency: 2 + log2(pof2) messages of
 * the whole vector; the choice for small messages.
 */
int xpi_allreduce_recursive_doubling(struct xpi_coll *c, void *buf, size_t count,
				     const struct xpi_combine *how)
{
	int p = c->gsize, r = c->grank;
	size_t bytes = count * how->elem;
	if (p == 1 || count == 0)
		return 0;
	void *tmp = malloc(bytes);
	if (tmp == NULL)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for %zu bytes of scratch", r,
				c->call, bytes);
	int pof2 = 1;
	while (pof2 * 2 <= p)
		pof2 *= 2;
	int rem = p - pof2, newrank, rc = 0;
	unsigned step = 0;
	/* Fold the extra ranks in: even ranks below 2*rem give their vector to
	 * the next odd one and sit out. */
	if (r < 2 * rem) {
		if (r % 2 == 0) {
			rc = xpi_coll_sendrecv(c, step, r + 1, buf, bytes, -1, NULL, 0);
			newrank = -1;
		} else {
			rc = xpi_coll_sendrecv(c, step, -1, NULL, 0, r - 1, tmp, bytes);
			if (rc == 0)
				how->fn(buf, tmp, count, how);
			newrank = r / 2;
		}
	} else {
		newrank = r - rem;
	}
	step++;
	for (int mask = 1; rc == 0 && newrank >= 0 && mask < pof2; mask <<= 1, step++) {
		int pnew = newrank ^ mask;
		int partner = pnew < rem ? pnew * 2 + 1 : pnew + rem;
		rc = xpi_coll_sendrecv(c, step, partner, buf, bytes, partner, tmp, bytes);
		if (rc == 0)
			how->fn(buf, tmp, count, how);
	}
	step = 64; /* the unfold's tag, whatever the number of doubling steps */
	if (rc == 0 && r < 2 * rem) {
		if (r % 2 == 1)
			rc = xpi_coll_sendrecv(c, step, r - 1, buf, bytes, -1, NULL, 0);
		else
			rc = xpi_coll_sendrecv(c, step, -1, NULL, 0, r + 1, buf, bytes);
	}
	free(tmp);
	return rc;
}

/* ---------------------------------------------------------------------- */
/* Ring: reduce-scatter then allgather, 2(p-1) steps of 1/p of the vector */

/* Block @b of @p over @count elements: its first element and length. */
static void block_of(size_t count, int p, int b, size_t *first, size_t *len)
{
	size_t base = count / (size_t)p, extra = count % (size_t)p, bb = (size_t)b;
	*first = bb * base + (bb < extra ? bb : extra);
	*len = base + (bb < extra ? 1 : 0);
}

/*
 * Each rank sends 2(p-1)/p of the vector and receives as much: the
 * bandwidth-optimal choice for large messages, for any p. The blocks also
 * pipeline the work: while one block travels the next is reduced.
 */
int xpi_allreduce_ring(struct xpi_coll *c, void *buf, size_t count, const struct xpi_combine *how)
{
	int p = c->gsize, r = c->grank;
	if (p == 1 || count == 0)
		return 0;
	int right = (r + 1) % p, left = (r + p - 1) % p, rc = 0;
	size_t first, len, maxlen = count / (size_t)p + 1;
	uint8_t *base = buf;
	uint8_t *tmp = malloc(maxlen * how->elem);
	if (tmp == NULL)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for scratch", r, c->call);
	/* Reduce-scatter: after step s, block (r - s - 1) holds s + 2 ranks'
	 * contributions; after p - 1 steps block (r + 1) is complete here. */
	for (int s = 0; rc == 0 && s < p - 1; s++) {
		int sb = (r - s + p) % p, rb = (r - s - 1 + p) % p;
		size_t sfirst, slen;
		block_of(count, p, sb, &sfirst, &slen);
		block_of(count, p, rb, &first, &len);
		rc = xpi_coll_sendrecv(c, (unsigned)s, right, base + sfirst * how->elem,
				       slen * how->elem, left, tmp, len * how->elem);
		if (rc == 0)
			how->fn(base + first * how->elem, tmp, len, how);
	}
	/* Allgather: pass the complete blocks around. */
	for (int s = 0; rc == 0 && s < p - 1; s++) {
		int sb = (r + 1 - s + p) % p, rb = (r - s + p) % p;
		size_t sfirst, slen;
		block_of(count, p, sb, &sfirst, &slen);
		block_of(count, p, rb, &first, &len);
		rc = xpi_coll_sendrecv(c, (unsigned)(p + s), right, base + sfirst * how->elem,
				       slen * how->elem, left, base + first * how->elem,
				       len * how->elem);
	}
	free(tmp);
	return rc;
}

int xpi_reduce_scatter_ring(struct xpi_coll *c, void *buf, size_t block,
			    const struct xpi_combine *how)
{
	int p = c->gsize, r = c->grank;
	if (p == 1 || block == 0)
		return 0;
	int right = (r + 1) % p, left = (r + p - 1) % p, rc = 0;
	size_t bytes = block * how->elem;
	uint8_t *base = buf, *tmp = malloc(bytes);
	if (tmp == NULL)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for scratch", r, c->call);
	/* As the allreduce ring, blocks shifted by one so that the block
	 * complete here at the end is this rank's own. */
	for (int s = 0; rc == 0 && s < p - 1; s++) {
		int sb = (r - s - 1 + 2 * p) % p, rb = (r - s - 2 + 2 * p) % p;
		rc = xpi_coll_sendrecv(c, (unsigned)s, right, base + (size_t)sb * bytes, bytes,
				       left, tmp, bytes);
		if (rc == 0)
			how->fn(base + (size_t)rb * bytes, tmp, block, how);
	}
	free(tmp);
	return rc;
}

int xpi_bcast_binomial(struct xpi_coll *c, void *buf, size_t bytes, int root)
{
	int p = c->gsize, vr = (c->grank - root + p) % p, rc = 0;
	/* Receive from the parent, then send to the children, farthest first. */
	int mask = 1;
	while (mask < p) {
		if (vr & mask) {
			rc = xpi_coll_sendrecv(c, 0, -1, NULL, 0, (vr - mask + root) % p, buf,
					       bytes);
			break;
		}
		mask <<= 1;
	}
	for (mask >>= 1; rc == 0 && mask > 0; mask >>= 1)
		if (vr + mask < p)
			rc = xpi_coll_sendrecv(c, 0, (vr + mask + root) % p, buf, bytes, -1, NULL,
					       0);
	return rc;
}

int xpi_reduce_binomial(struct xpi_coll *c, void *buf, size_t count, const struct xpi_combine *how,
			int root)
{
	int p = c->gsize, vr = (c->grank - root + p) % p, rc = 0;
	size_t bytes = count * how->elem;
	if (p == 1 || count == 0)
		return 0;
	void *tmp = malloc(bytes);
	if (tmp == NULL)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for scratch", c->comm->rank,
				c->call);
	/* Toward the root; every operator is commutative. */
	for (int mask = 1; rc == 0 && mask < p; mask <<= 1) {
		if (vr & mask) {
			rc = xpi_coll_sendrecv(c, 0, (vr - mask + root) % p, buf, bytes, -1, NULL,
					       0);
			break;
		}
		if (vr + mask < p) {
			rc = xpi_coll_sendrecv(c, 0, -1, NULL, 0, (vr + mask + root) % p, tmp,
					       bytes);
			if (rc == 0)
				how->fn(buf, tmp, count, how);
		}
	}
	free(tmp);
	return rc;
}
