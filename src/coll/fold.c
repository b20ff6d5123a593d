/* SPDX-License-Identifier: MIT */
/*
 * Any number of members folded onto a power of two, for the algorithms
 * that pair members by the bits of their index (recursive doubling,
 * Rabenseifner): with pof2 the largest power of two <= p and rem = p -
 * pof2, the first 2 rem members pair up, each even one giving its vector
 * to the odd one above it, which takes part for both; at the end the odd
 * ones give the result back.
 */
#include "coll.h"

/* The unfold's step, above every step the algorithms between use (at
 * most 2 log2 p < 64 of them), whatever the number of members. */
#define FOLD_OUT_STEP 64

void xpi_fold_init(struct xpi_fold *f, int p, int r)
{
	f->pof2 = 1;
	while (f->pof2 * 2 <= p)
		f->pof2 *= 2;
	f->rem = p - f->pof2;
	f->rank = r;
	if (r >= 2 * f->rem)
		f->newrank = r - f->rem;
	else
		f->newrank = r % 2 == 1 ? r / 2 : -1;
}

int xpi_fold_member(const struct xpi_fold *f, int newrank)
{
	return newrank < f->rem ? newrank * 2 + 1 : newrank + f->rem;
}

int xpi_build_fold_in(struct xpi_sched *s, const struct xpi_fold *f, void *buf, void *tmp,
		      size_t count)
{
	size_t bytes = count * s->how.elem;
	int r = f->rank;
	if (r >= 2 * f->rem)
		return 0;
	if (r % 2 == 0)
		return xpi_sched_sendrecv(s, 0, r + 1, buf, bytes, -1, NULL, 0);
	int rc = xpi_sched_sendrecv(s, 0, -1, NULL, 0, r - 1, tmp, bytes);
	if (rc == 0)
		xpi_sched_combine(s, buf, tmp, count);
	return rc;
}

int xpi_build_fold_out(struct xpi_sched *s, const struct xpi_fold *f, void *buf, size_t count)
{
	size_t bytes = count * s->how.elem;
	int r = f->rank;
	if (r >= 2 * f->rem)
		return 0;
	if (r % 2 == 1)
		return xpi_sched_sendrecv(s, FOLD_OUT_STEP, r - 1, buf, bytes, -1, NULL, 0);
	return xpi_sched_sendrecv(s, FOLD_OUT_STEP, -1, NULL, 0, r + 1, buf, bytes);
}
