/* SPDX-License-Identifier: MIT */
/*
 * float16 and bfloat16 reductions keep the bound xport.h states (issue 24,
 * 6): over p ranks, the float32 partials put the sum within
 * d = g(p-1) * sum |x_i| of the exact sum S, g(k) = k u / (1 - k u),
 * u = 2^-24, and the result is that float32 value rounded once to the 16-bit
 * type, so it lies between RN(S - d) and RN(S + d). Every check here
 * computes d from the inputs and accepts exactly that range.
 *
 * The cases (float16 1 + 2^-11 + 2^-24, bfloat16 1 + 2^-8 + 2^-24:
 * a halfway point lies 2^-24 from S, within d, so the result may be RN(S)
 * or its neighbour across that point) and cases far from any halfway point
 * (1 + 2^-11 + 2^-13, 1 + 2^-8 + 2^-10: exactly RN(S), where rounding to
 * the 16-bit type between steps gives 1 in some orders). Element j of the
 * vector puts the three values on the j-th ordered triple of distinct
 * ranks (every one, so every order of combining is met), zero elsewhere;
 * odd triples negated. Then random inputs on every rank, for every
 * operator, against a reference computed exactly in long double (the
 * inputs are drawn so that every sum and product is exact there).
 *
 * Every allreduce algorithm, reduce and reduce_scatter, in-process at 3, 5
 * and 8 ranks, or under xprun (with COLL_TEST_HOSTS=h, on h "hosts", so the
 * hierarchical one spans them).
 */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* The three values and the sum rounded once, per type (bit patterns);
 * split: a halfway point of the type lies within d of the sum. */
struct half_case {
	xp_dtype_t dt;
	const char *name;
	uint16_t v[3], once;
	bool split;
};

static const struct half_case cases[] = {
	/* 1.0, 2^-11, 2^-24 (the smallest subnormal) */
	{ XP_FLOAT16, "float16 issue", { 0x3c00, 0x1000, 0x0001 }, 0x3c01, true },
	/* 1.0, 2^-8, 2^-24 */
	{ XP_BFLOAT16, "bfloat16 issue", { 0x3f80, 0x3b80, 0x3380 }, 0x3f81, true },
	/* 1.0, 2^-11, 2^-13: 2^-13 above the halfway point 1 + 2^-11 */
	{ XP_FLOAT16, "float16 far", { 0x3c00, 0x1000, 0x0800 }, 0x3c01, false },
	/* 1.0, 2^-8, 2^-10 */
	{ XP_BFLOAT16, "bfloat16 far", { 0x3f80, 0x3b80, 0x3a80 }, 0x3f81, false },
};

static const int algos[] = { XP_ALLREDUCE_RECURSIVE_DOUBLING, XP_ALLREDUCE_RING,
			     XP_ALLREDUCE_RABENSEIFNER, XP_ALLREDUCE_HIERARCHICAL,
			     XP_ALLREDUCE_SHARED_MEMORY };

/* The value of a 16-bit pattern, exactly. */
static long double val16(uint16_t h, bool bf)
{
	if (bf) {
		uint32_t u = (uint32_t)h << 16;
		float f;
		memcpy(&f, &u, sizeof(f));
		return f;
	}
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	long double a = e == 0x1f ? (m != 0 ? NAN : INFINITY) :
			e == 0    ? ldexpl(m, -24) :
				    ldexpl(1024 + m, e - 25);
	return h & 0x8000 ? -a : a;
}

/* @x rounded to nearest even in the 16-bit type (infinity beyond its
 * largest value's halfway point to the next power of two). */
static long double rn16(long double x, bool bf)
{
	int prec = bf ? 8 : 11, emin = bf ? -126 : -14, e;
	long double ax = fabsl(x);
	if (ax == 0 || isinf(ax))
		return x;
	frexpl(ax, &e);
	e = e - 1 < emin ? emin : e - 1;
	long double ulp = ldexpl(1, e - (prec - 1));
	long double r = rintl(ax / ulp) * ulp; /* exact scaling; ties to even */
	if (r > (bf ? ldexpl(255, 120) : 65504.0L))
		r = INFINITY;
	return copysignl(r, x);
}

/* g(k) = k u / (1 - k u), u = 2^-24. */
static long double gamma_k(int k)
{
	long double ku = ldexpl(k, -24);
	return ku / (1 - ku);
}

/* Is @got within [RN(lo), RN(hi)]? */
static bool within(uint16_t got, bool bf, long double lo, long double hi)
{
	long double g = val16(got, bf);
	return !isnan(g) && rn16(lo, bf) <= g && g <= rn16(hi, bf);
}

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
	bool bf = hc->dt == XP_BFLOAT16;
	long double s = 0, sabs = 0;
	for (int k = 0; k < 3; k++) {
		s += val16(hc->v[k], bf);
		sabs += fabsl(val16(hc->v[k], bf));
	}
	long double d = gamma_k(p - 1) * sabs;
	/* The case is what it says: the reference, and whether the bound
	 * reaches a halfway point. */
	T_CHECK(rn16(s, bf) == val16(hc->once, bf));
	T_CHECK((rn16(s - d, bf) != rn16(s + d, bf)) == hc->split);
	for (size_t j = 0; j < n; j++) {
		long double sj = j % 2 ? -s : s;
		if (!within(got[j], bf, sj - d, sj + d))
			T_FAIL("%s %s over %d ranks, element %zu: %#x, want %#x%s", hc->name, what,
			       p, j, got[j], hc->once | (j % 2 ? 0x8000 : 0),
			       hc->split ? " or its neighbour toward 1" : "");
	}
}

static void run_cases(xp_comm_t *world, int p, int me)
{
	int *t = malloc(sizeof(int) * 3 * (size_t)(p * p * p));
	size_t n = triples(p, t);
	uint16_t *in = malloc(2 * n), *out = malloc(2 * n), *big = malloc(2 * n * (size_t)p);
	T_CHECK(t != NULL && in != NULL && out != NULL && big != NULL);
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
		for (int b = 0; b < p; b++)
			memcpy(big + (size_t)b * n, in, 2 * n);
		T_OK(xp_reduce_scatter(world, big, out, n, hc->dt, XP_SUM));
		expect(hc, out, n, "reduce_scatter", p);
	}
	free(t);
	free(in);
	free(out);
	free(big);
}

/* splitmix64 */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

enum { RANDOM_N = 4096 };

/*
 * Rank @r's element @k, the same on every rank. Sums are exact in long
 * double (64 bits): float16 values are multiples of 2^-24 below 2^9;
 * bfloat16 exponents lie within 20 of a centre drawn per element from
 * -140 (subnormals) to 100. Products: magnitudes 2^-4 to 2^4 (every
 * partial product a normal float) with at most 8 significant bits, so 8 of
 * them fit 64.
 */
static uint16_t gen(bool bf, xp_op_t op, int r, size_t k)
{
	uint64_t x = mix(mix(k * 16 + (uint64_t)op * 2 + bf) + (uint64_t)r);
	uint16_t sign = x & 1 ? 0x8000 : 0;
	int exp, mbits = bf ? 7 : 10;
	uint16_t m = (uint16_t)((x >> 8) & ((1u << mbits) - 1));
	if (op == XP_PROD) {
		exp = (int)((x >> 24) % 8) - 4;
		m &= (uint16_t)(bf ? 0x7f : 0x3f8);
	} else if (bf) {
		int centre = (int)(mix(k) % 241) - 140;
		exp = centre + (int)((x >> 24) % 41) - 20;
		if (exp > 127)
			exp = 127;
	} else {
		exp = (int)((x >> 24) % 24) - 15; /* -15: subnormal */
	}
	int bias = bf ? 127 : 15;
	if (exp + bias <= 0)
		return sign | m; /* a subnormal, or zero */
	return (uint16_t)(sign | (exp + bias) << mbits | m);
}

/* @got: the result's elements @first to @first + @n of the random vector. */
static void check_random(bool bf, xp_op_t op, int p, const uint16_t *got, size_t first, size_t n,
			 const char *what)
{
	for (size_t j = 0; j < n; j++) {
		size_t k = first + j;
		long double s = 0, sabs = 0, prod = 1, lo = INFINITY, hi = -INFINITY;
		for (int r = 0; r < p; r++) {
			long double x = val16(gen(bf, op, r, k), bf);
			s += x;
			sabs += fabsl(x);
			prod *= x;
			lo = fminl(lo, x);
			hi = fmaxl(hi, x);
		}
		long double want = s, d = gamma_k(p - 1) * sabs;
		if (op == XP_AVG) {
			want = s / p; /* S / p in long double: 2^-64 off at most */
			d = gamma_k(p) * sabs / p + (bf ? ldexpl(1, -150) : 0);
		} else if (op == XP_PROD) {
			want = prod;
			d = gamma_k(p - 1) * fabsl(prod);
		} else if (op == XP_MIN || op == XP_MAX) {
			want = op == XP_MIN ? lo : hi;
			d = 0;
		}
		if (!within(got[j], bf, want - d, want + d))
			T_FAIL("%s random op %d %s over %d ranks, element %zu: %#x (%Lg), want "
			       "%Lg +- %Lg",
			       bf ? "bfloat16" : "float16", (int)op, what, p, k, got[j],
			       val16(got[j], bf), want, d);
	}
}

static void run_random(xp_comm_t *world, int p, int me)
{
	size_t n = RANDOM_N, total = n * (size_t)p;
	uint16_t *in = malloc(2 * total), *out = malloc(2 * n);
	T_CHECK(in != NULL && out != NULL);
	static const xp_op_t ops[] = { XP_SUM, XP_AVG, XP_PROD, XP_MIN, XP_MAX };
	for (int bf = 0; bf < 2; bf++) {
		xp_dtype_t dt = bf ? XP_BFLOAT16 : XP_FLOAT16;
		for (size_t o = 0; o < sizeof(ops) / sizeof(ops[0]); o++) {
			xp_op_t op = ops[o];
			for (size_t k = 0; k < total; k++)
				in[k] = gen(bf, op, me, k);
			for (size_t a = 0; a < sizeof(algos) / sizeof(algos[0]); a++) {
				T_OK(xp_allreduce_with(world, in, out, n, dt, op, algos[a]));
				check_random(bf, op, p, out, 0, n, "allreduce");
			}
			T_OK(xp_reduce_scatter(world, in, out, n, dt, op));
			check_random(bf, op, p, out, (size_t)me * n, n, "reduce_scatter");
			if (op == XP_AVG)
				continue;
			T_OK(xp_reduce(world, in, out, n, dt, op, 0));
			if (me == 0)
				check_random(bf, op, p, out, 0, n, "reduce");
		}
	}
	free(in);
	free(out);
}

static int rank_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	xp_comm_t *world = xp_comm_world(ctx);
	int p = xp_size(ctx), me = xp_rank(ctx);
	T_CHECK(p >= 3);
	run_cases(world, p, me);
	run_random(world, p, me);
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
