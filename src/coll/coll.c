/* SPDX-License-Identifier: MIT */
/* The allreduce building blocks: recursive doubling, rings, trees. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "coll.h"

int xpi_coll_go(struct xpi_sched *s, int rc, xp_request_t **req)
{
	if (rc < 0) {
		xpi_sched_free(s);
		return rc;
	}
	return req != NULL ? xpi_sched_start(s, req) : xpi_sched_run(s);
}

/*
 * For any p, folded onto a power of two (fold.c), so the doubling runs
 * between pof2 of them. Latency: 2 + log2(pof2) messages of the whole
 * vector; the choice for small messages.
 */
int xpi_build_allreduce_rd(struct xpi_sched *s, void *buf, size_t count)
{
	size_t bytes = count * s->how.elem;
	if (s->gsize == 1 || count == 0)
		return 0;
	struct xpi_fold f;
	xpi_fold_init(&f, s->gsize, s->grank);
	/* One scratch vector: a step is posted only once the reduction of the
	 * step before it has read it. */
	uint8_t *tmp = xpi_sched_scratch(s, bytes);
	if (tmp == NULL)
		return -ENOMEM;
	int rc = xpi_build_fold_in(s, &f, buf, tmp, count);
	unsigned step = 1;
	for (int mask = 1; rc == 0 && f.newrank >= 0 && mask < f.pof2; mask <<= 1, step++) {
		int partner = xpi_fold_member(&f, f.newrank ^ mask);
		rc = xpi_sched_sendrecv(s, step, partner, buf, bytes, partner, tmp, bytes);
		if (rc == 0)
			xpi_sched_combine(s, buf, tmp, count);
	}
	if (rc == 0)
		rc = xpi_build_fold_out(s, &f, buf, count);
	return rc;
}

/* Block @b of @p over @count elements: its first element and length. */
static void block_of(size_t count, int p, int b, size_t *first, size_t *len)
{
	size_t base = count / (size_t)p, extra = count % (size_t)p, bb = (size_t)b;
	*first = bb * base + (bb < extra ? bb : extra);
	*len = base + (bb < extra ? 1 : 0);
}

/*
 * A ring's blocks move in segments (xpi_coll_segment_bytes), each its own
 * pipelined step (sched.h): up to a window of them in flight at once, so
 * one segment's handshake and transfer overlap the others' and the
 * reductions, which find what they reduce still in cache. A segment waits
 * only for what it depends on: the reduction of the segment it sends (the
 * previous ring step's), and its scratch segment's previous user, one of
 * RING_TMP used in turn.
 */
#define RING_TMP 4

struct ring_pipe {
	size_t seg;             /* elements of a segment (the last of a block may be shorter) */
	unsigned nseg;          /* segments of the longest block */
	uint8_t *tmp[RING_TMP]; /* scratch segments, used in turn */
	unsigned turn;
};

static int ring_pipe_init(struct xpi_sched *s, struct ring_pipe *rp, size_t maxlen, int steps)
{
	size_t elem = s->how.elem, per = xpi_coll_segment_bytes(s->comm) / elem;
	if (per == 0)
		per = 1;
	/* Step numbers stay below the hierarchical phases' spacing. */
	size_t most =
		(XPI_RING_MAX_STEPS / (size_t)steps) > 0 ? XPI_RING_MAX_STEPS / (size_t)steps : 1;
	size_t nseg = (maxlen + per - 1) / per;
	if (nseg > most)
		nseg = most;
	if (nseg == 0)
		nseg = 1;
	rp->nseg = (unsigned)nseg;
	rp->seg = (maxlen + nseg - 1) / nseg;
	rp->turn = 0;
	unsigned ntmp = nseg < RING_TMP ? (unsigned)nseg : RING_TMP;
	size_t bytes = (rp->seg * elem + 63) & ~(size_t)63;
	uint8_t *all = xpi_sched_scratch(s, bytes * ntmp);
	if (all == NULL)
		return -ENOMEM;
	for (unsigned i = 0; i < RING_TMP; i++)
		rp->tmp[i] = all + bytes * (i % ntmp);
	return 0;
}

/* Segment @j of a block of @len elements: its offset and length. */
static size_t seg_of(const struct ring_pipe *rp, unsigned j, size_t len, size_t *n)
{
	size_t at = (size_t)j * rp->seg;
	*n = at >= len ? 0 : (len - at < rp->seg ? len - at : rp->seg);
	return at;
}

/* Where a ring step's blocks are: sent from @from, received (or reduced)
 * into @base; reduced with the first operand from @one if set (the
 * input, where it is apart from the result), else in place. */
struct ring_bufs {
	const uint8_t *from, *one;
	uint8_t *base;
};

/*
 * Ring step @k: block (@sfirst, @slen) to the right, block (@rfirst,
 * @rlen) from the left, segment by segment; reduced into @base when
 * @reduce, else received in place.
 */
static int ring_step(struct xpi_sched *s, struct ring_pipe *rp, unsigned k, int right, int left,
		     const struct ring_bufs *b, size_t sfirst, size_t slen, size_t rfirst,
		     size_t rlen, bool reduce)
{
	size_t elem = s->how.elem;
	int rc = 0;
	for (unsigned j = 0; rc == 0 && j < rp->nseg; j++) {
		size_t sn, rn, sat = seg_of(rp, j, slen, &sn), rat = seg_of(rp, j, rlen, &rn);
		uint8_t *rbuf = reduce ? rp->tmp[rp->turn] : b->base + (rfirst + rat) * elem;
		rc = xpi_sched_sendrecv(s, k * rp->nseg + j, right, b->from + (sfirst + sat) * elem,
					sn * elem, left, rbuf, rn * elem);
		if (rc == 0 && reduce && rn > 0 && b->one != NULL) {
			xpi_sched_combine3(s, b->base + (rfirst + rat) * elem,
					   b->one + (rfirst + rat) * elem, rbuf, rn);
		} else if (rc == 0 && reduce && rn > 0) {
			xpi_sched_combine(s, b->base + (rfirst + rat) * elem, rbuf, rn);
		}
		if (rc == 0)
			xpi_sched_pipelined(s);
		if (rc == 0 && reduce && rn > 0)
			rp->turn = (rp->turn + 1) % RING_TMP;
	}
	return rc;
}

/*
 * Each member sends 2(p-1)/p of the vector and receives as much, for any
 * p, in 2(p-1) steps of a block each, pipelined in segments (ring_pipe).
 */
int xpi_build_allreduce_ring(struct xpi_sched *s, void *buf, const void *src, size_t count)
{
	int p = s->gsize, r = s->grank, rc = 0;
	if (src != NULL && p == 1 && count > 0)
		memcpy(buf, src, count * s->how.elem);
	if (p == 1 || count == 0)
		return 0;
	int right = (r + 1) % p, left = (r + p - 1) % p;
	size_t sfirst, slen, rfirst, rlen;
	struct ring_pipe rp;
	if (ring_pipe_init(s, &rp, (count + (size_t)p - 1) / (size_t)p, 2 * p) < 0)
		return -ENOMEM;
	/* Reduce-scatter: after step k, block (r - k - 1) holds k + 2
	 * members' contributions; at the end block (r + 1) is complete. With
	 * the input apart, step 0 sends this member's own block from it, and
	 * every reduction reads its block there: each block of the result is
	 * written once, by its reduction here or its arrival in the allgather
	 * (block r), so nothing is copied in first. */
	struct ring_bufs b = { .from = buf, .one = src, .base = buf };
	for (int k = 0; rc == 0 && k < p - 1; k++) {
		block_of(count, p, (r - k + p) % p, &sfirst, &slen);
		block_of(count, p, (r - k - 1 + p) % p, &rfirst, &rlen);
		b.from = k == 0 && src != NULL ? src : buf;
		rc = ring_step(s, &rp, (unsigned)k, right, left, &b, sfirst, slen, rfirst, rlen,
			       true);
	}
	/* Allgather: the complete blocks around. */
	b.from = buf;
	for (int k = 0; rc == 0 && k < p - 1; k++) {
		block_of(count, p, (r + 1 - k + p) % p, &sfirst, &slen);
		block_of(count, p, (r - k + p) % p, &rfirst, &rlen);
		rc = ring_step(s, &rp, (unsigned)(p + k), right, left, &b, sfirst, slen, rfirst,
			       rlen, false);
	}
	return rc;
}

int xpi_build_reduce_scatter_ring(struct xpi_sched *s, void *buf, size_t block)
{
	int p = s->gsize, r = s->grank, rc = 0;
	if (p == 1 || block == 0)
		return 0;
	int right = (r + 1) % p, left = (r + p - 1) % p;
	struct ring_pipe rp;
	if (ring_pipe_init(s, &rp, block, p) < 0)
		return -ENOMEM;
	/* As the allreduce ring, the blocks shifted by one so that the block
	 * complete here at the end is this member's own. */
	const struct ring_bufs b = { .from = buf, .base = buf };
	for (int k = 0; rc == 0 && k < p - 1; k++) {
		size_t sb = (size_t)((r - k - 1 + 2 * p) % p),
		       rb = (size_t)((r - k - 2 + 2 * p) % p);
		rc = ring_step(s, &rp, (unsigned)k, right, left, &b, sb * block, block, rb * block,
			       block, true);
	}
	return rc;
}

int xpi_build_bcast_binomial(struct xpi_sched *s, void *buf, size_t bytes, int root)
{
	int p = s->gsize, vr = (s->grank - root + p) % p, rc = 0;
	/* Receive from the parent, then send to the children, farthest first. */
	int mask = 1;
	while (mask < p) {
		if (vr & mask) {
			rc = xpi_sched_sendrecv(s, 0, -1, NULL, 0, (vr - mask + root) % p, buf,
						bytes);
			break;
		}
		mask <<= 1;
	}
	for (mask >>= 1; rc == 0 && mask > 0; mask >>= 1)
		if (vr + mask < p)
			rc = xpi_sched_sendrecv(s, 0, (vr + mask + root) % p, buf, bytes, -1, NULL,
						0);
	return rc;
}

int xpi_build_reduce_binomial(struct xpi_sched *s, void *buf, size_t count, int root)
{
	int p = s->gsize, vr = (s->grank - root + p) % p, rc = 0;
	size_t bytes = count * s->how.elem;
	if (p == 1 || count == 0)
		return 0;
	uint8_t *tmp = xpi_sched_scratch(s, bytes);
	if (tmp == NULL)
		return -ENOMEM;
	/* Toward the root; every operator is commutative. */
	for (int mask = 1; rc == 0 && mask < p; mask <<= 1) {
		if (vr & mask) {
			rc = xpi_sched_sendrecv(s, 0, (vr - mask + root) % p, buf, bytes, -1, NULL,
						0);
			break;
		}
		if (vr + mask < p) {
			rc = xpi_sched_sendrecv(s, 0, -1, NULL, 0, (vr + mask + root) % p, tmp,
						bytes);
			if (rc == 0)
				xpi_sched_combine(s, buf, tmp, count);
		}
	}
	return rc;
}
