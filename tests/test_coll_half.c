/* SPDX-License-Identifier: MIT */
/*
 * float16 and bfloat16 reductions are rounded once, whatever the algorithm
 * and the number of ranks (issue 24, 6): float16 1 + 2^-11 + 2^-24 is
 * 0x3c01 and bfloat16 1 + 2^-8 + 2^-24 is 0x3f81, where float32 partial
 * sums gave 0x3c00 and 0x3f80 from three ranks on (1 + 2^-11 or 1 + 2^-8,
 * a halfway point of the 16-bit type, once 2^-24 was rounded away).
 *
 * Element j of the vector puts the three values on the j-th ordered triple
 * of distinct ranks (every one, so every order of combining is met), zero
 * elsewhere; odd triples negated. Every allreduce algorithm, reduce and
 * reduce_scatter, in-process at 3, 5 and 8 ranks, or under xprun (with
 * COLL_TEST_HOSTS=h, on h "hosts", so the hierarchical one spans them).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "testutil.h"

/* The three values and the once-rounded sum, per type (bit patterns). */
struct half_case {
	xp_dtype_t dt;
	const char *name;
	uint16_t v[3], sum;
};

static const struct half_case cases[] = {
	/* 1.0, 2^-11, 2^-24 (the smallest subnormal) */
	{ XP_FLOAT16, "float16", { 0x3c00, 0x1000, 0x0001 }, 0x3c01 },
	/* 1.0, 2^-8, 2^-24 */
	{ XP_BFLOAT16, "bfloat16", { 0x3f80, 0x3b80, 0x3380 }, 0x3f81 },
};

static const int algos[] = { XP_ALLREDUCE_RECURSIVE_DOUBLING, XP_ALLREDUCE_RING,
			     XP_ALLREDUCE_RABENSEIFNER, XP_ALLREDUCE_HIERARCHICAL,
			     XP_ALLREDUCE_SHARED_MEMORY };

/* The triples of distinct ranks, in order; @t gets each (3 ints). */
static size_t triples(int p, int *t)
{
	size_t n = 0;
	for (int a = 0; a < p; a++)
		for (int b = 0; b < p; b++)
			for (int c = 0; c < p; c++)
				if (a != b && b != c && a != c) {
					t[3 * n] = a;
					t[3 * n + 1] = b;
					t[3 * n + 2] = c;
					n++;
				}
	return n;
}

static void fill(const struct half_case *hc, const int *t, size_t n, int me, uint16_t *v)
{
	for (size_t j = 0; j < n; j++) {
		uint16_t neg = j % 2 ? 0x8000 : 0;
		v[j] = neg;
		for (int k = 0; k < 3; k++)
			if (t[3 * j + k] == me)
				v[j] = hc->v[k] | neg;
	}
}

static void expect(const struct half_case *hc, const uint16_t *got, size_t n, const char *what,
		   int p)
{
	for (size_t j = 0; j < n; j++) {
		uint16_t want = hc->sum | (j % 2 ? 0x8000 : 0);
		if (got[j] != want)
			T_FAIL("%s %s over %d ranks, element %zu: %#x, want %#x", hc->name, what, p,
			       j, got[j], want);
	}
}

static int rank_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	xp_comm_t *world = xp_comm_world(ctx);
	int p = xp_size(ctx), me = xp_rank(ctx);
	T_CHECK(p >= 3);
	int *t = malloc(sizeof(int) * 3 * (size_t)(p * p * p));
	size_t n = triples(p, t);
	uint16_t *in = malloc(2 * n), *out = malloc(2 * n * (size_t)p);
	T_CHECK(t != NULL && in != NULL && out != NULL);
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		const struct half_case *hc = &cases[c];
		fill(hc, t, n, me, in);
		for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
			T_OK(xp_allreduce_with(world, in, out, n, hc->dt, XP_SUM, algos[a]));
			expect(hc, out, n, "allreduce", p);
		}
		T_OK(xp_reduce(world, in, out, n, hc->dt, XP_SUM, p - 1));
		if (me == p - 1)
			expect(hc, out, n, "reduce", p);
		/* Reduce-scatter: every block the same vector, so each rank's
		 * block is the whole answer. */
		uint16_t *big = malloc(2 * n * (size_t)p);
		T_CHECK(big != NULL);
		for (int b = 0; b < p; b++)
			for (size_t j = 0; j < n; j++)
				big[(size_t)b * n + j] = in[j];
		T_OK(xp_reduce_scatter(world, big, out, n, hc->dt, XP_SUM));
		expect(hc, out, n, "reduce_scatter", p);
		free(big);
	}
	free(t);
	free(in);
	free(out);
	return 0;
}

int main(void)
{
	if (getenv("XP_RANK") != NULL) {
		t_hosts_from_env();
		xp_context_t *ctx;
		T_OK(xp_init(NULL, &ctx));
		rank_body(ctx, NULL);
		if (xp_rank(ctx) == 0)
			printf("coll_half: ok, %d processes\n", xp_size(ctx));
		xp_finalize(ctx);
		return 0;
	}
	static const int sizes[] = { 3, 5, 8 };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		T_OK(xp_local_run(sizes[i], NULL, rank_body, NULL));
		fprintf(stderr, "   %d in-process ranks: ok\n", sizes[i]);
	}
	printf("coll_half: ok\n");
	return 0;
}
