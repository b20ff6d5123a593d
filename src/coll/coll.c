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
 * Each member sends 2(p-1)/p of the vector and receives as much, for any
 * p. Each step moves one block and then reduces it; the next step starts
 * once that reduction is done (segments that overlap the two are still
 * to come).
 */
int xpi_build_allreduce_ring(struct xpi_sched *s, void *buf, size_t count)
{
	int p = s->gsize, r = s->grank, rc = 0;
	if (p == 1 || count == 0)
		return 0;
	int right = (r + 1) % p, left = (r + p - 1) % p;
	size_t elem = s->how.elem, maxlen = count / (size_t)p + 1, first, len;
	uint8_t *base = buf;
	/* One scratch block (steps run one after another). */
	uint8_t *tmp = xpi_sched_scratch(s, maxlen * elem);
	if (tmp == NULL)
		return -ENOMEM;
	/* Reduce-scatter: after step k, block (r - k - 1) holds k + 2
	 * members' contributions; at the end block (r + 1) is complete. */
	for (int k = 0; rc == 0 && k < p - 1; k++) {
		int sb = (r - k + p) % p, rb = (r - k - 1 + p) % p;
		size_t sfirst, slen;
		uint8_t *in = tmp;
		block_of(count, p, sb, &sfirst, &slen);
		block_of(count, p, rb, &first, &len);
		rc = xpi_sched_sendrecv(s, (unsigned)k, right, base + sfirst * elem, slen * elem,
					left, in, len * elem);
		if (rc == 0)
			xpi_sched_combine(s, base + first * elem, in, len);
	}
	/* Allgather: the complete blocks around. */
	for (int k = 0; rc == 0 && k < p - 1; k++) {
		int sb = (r + 1 - k + p) % p, rb = (r - k + p) % p;
		size_t sfirst, slen;
		block_of(count, p, sb, &sfirst, &slen);
		block_of(count, p, rb, &first, &len);
		rc = xpi_sched_sendrecv(s, (unsigned)(p + k), right, base + sfirst * elem,
					slen * elem, left, base + first * elem, len * elem);
	}
	return rc;
}

int xpi_build_reduce_scatter_ring(struct xpi_sched *s, void *buf, size_t block)
{
	int p = s->gsize, r = s->grank, rc = 0;
	if (p == 1 || block == 0)
		return 0;
	int right = (r + 1) % p, left = (r + p - 1) % p;
	size_t bytes = block * s->how.elem;
	uint8_t *base = buf, *tmp = xpi_sched_scratch(s, bytes);
	if (tmp == NULL)
		return -ENOMEM;
	/* As the allreduce ring, the blocks shifted by one so that the block
	 * complete here at the end is this member's own. */
	for (int k = 0; rc == 0 && k < p - 1; k++) {
		int sb = (r - k - 1 + 2 * p) % p, rb = (r - k - 2 + 2 * p) % p;
		rc = xpi_sched_sendrecv(s, (unsigned)k, right, base + (size_t)sb * bytes, bytes,
					left, tmp, bytes);
		if (rc == 0)
			xpi_sched_combine(s, base + (size_t)rb * bytes, tmp, block);
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
