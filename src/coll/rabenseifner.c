/* SPDX-License-Identifier: MIT */
/*
 * Rabenseifner's allreduce (R. Rabenseifner, "Optimization of Collective
 * Reduction Operations", ICCS 2004): a reduce-scatter by recursive
 * halving, then an allgather by recursive doubling, over pof2 members
 * (the others folded in first and given the result last, fold.c).
 *
 * The vector is cut into pof2 blocks, the first count % pof2 of them one
 * element longer. In halving step k (k = 0 .. log2 pof2 - 1), with mask =
 * pof2 >> (k + 1), each member and the one whose index differs in that bit
 * split the blocks they still share: each keeps the half named by its own
 * bit, receives the partner's contribution to it, reduces, and sends the
 * other half. After the last step member i holds block i reduced over
 * everyone. The allgather retraces the steps backwards, each member
 * sending all it holds and receiving as much. Each half sends and
 * receives (pof2 - 1)/pof2 of the vector in log2 pof2 steps: the ring's
 * bytes in far fewer steps, for large vectors at a power of two.
 *
 * With fewer elements than pof2 some blocks are empty: a message of none
 * is not sent (both members of a pair know the block sizes, so they agree
 * on which messages exist), and a step with nothing to move is left out.
 */
#include <errno.h>

#include "coll.h"

/* The first element of block @b of @nblocks over @count elements (block
 * @nblocks starts at @count). */
static size_t block_start(size_t count, int nblocks, int b)
{
	size_t base = count / (size_t)nblocks, extra = count % (size_t)nblocks, bb = (size_t)b;
	return bb * base + (bb < extra ? bb : extra);
}

/* Elements of blocks [@b, @b + @n). */
struct span {
	size_t first, len;
};

static struct span blocks(size_t count, int nblocks, int b, int n)
{
	size_t first = block_start(count, nblocks, b);
	return (struct span){ first, block_start(count, nblocks, b + n) - first };
}

/* One step with @partner: @give of @buf to it, its @take into @rbuf,
 * either left out if empty, the step itself if both are. */
static int swap(struct xpi_sched *s, unsigned step, int partner, uint8_t *buf, struct span give,
		void *rbuf, struct span take)
{
	size_t elem = s->how.elem;
	if (give.len == 0 && take.len == 0)
		return 0;
	return xpi_sched_sendrecv(s, step, give.len > 0 ? partner : -1, buf + give.first * elem,
				  give.len * elem, take.len > 0 ? partner : -1, rbuf,
				  take.len * elem);
}

int xpi_build_allreduce_rabenseifner(struct xpi_sched *s, void *buf, size_t count)
{
	if (s->gsize == 1 || count == 0)
		return 0;
	struct xpi_fold f;
	xpi_fold_init(&f, s->gsize, s->grank);
	int pof2 = f.pof2, me = f.newrank;
	size_t elem = s->how.elem;
	uint8_t *base = buf;
	/* One scratch buffer, for what the steps receive before reducing it
	 * (a step is posted only once the one before it is reduced): the
	 * whole vector for the fold, else the largest half, the first. */
	size_t tmp_count = f.rem > 0 ? count : block_start(count, pof2, pof2 / 2);
	uint8_t *tmp = xpi_sched_scratch(s, tmp_count * elem);
	if (tmp == NULL)
		return -ENOMEM;
	int rc = xpi_build_fold_in(s, &f, buf, tmp, count);
	unsigned step = 1;
	/* Reduce-scatter: the blocks [lo, lo + 2 mask) are shared with the
	 * partner; this member keeps the half its bit names. */
	int lo = 0;
	for (int mask = pof2 / 2; rc == 0 && me >= 0 && mask > 0; mask >>= 1, step++) {
		int partner = xpi_fold_member(&f, me ^ mask);
		bool upper = (me & mask) != 0;
		struct span keep = blocks(count, pof2, upper ? lo + mask : lo, mask);
		struct span give = blocks(count, pof2, upper ? lo : lo + mask, mask);
		rc = swap(s, step, partner, base, give, tmp, keep);
		if (rc == 0 && keep.len > 0)
			xpi_sched_combine(s, base + keep.first * elem, tmp, keep.len);
		if (upper)
			lo += mask;
	}
	/* Allgather: this member holds the mask blocks from lo (its own block
	 * to start with), the partner the mask blocks next to them. */
	for (int mask = 1; rc == 0 && me >= 0 && mask < pof2; mask <<= 1, step++) {
		int partner = xpi_fold_member(&f, me ^ mask);
		lo = me & ~(mask - 1);
		struct span mine = blocks(count, pof2, lo, mask);
		struct span theirs = blocks(count, pof2, lo ^ mask, mask);
		rc = swap(s, step, partner, base, mine, base + theirs.first * elem, theirs);
	}
	if (rc == 0)
		rc = xpi_build_fold_out(s, &f, buf, count);
	return rc;
}
