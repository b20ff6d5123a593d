/* SPDX-License-Identifier: MIT */
/*
 * The reduction kernels and 16-bit float conversions (src/coll/reduce.h)
 * against references written another way: element by element through a
 * switch on the type, integers in 128-bit arithmetic truncated by masks,
 * float32 through double (one double operation then one rounding to float
 * is the correctly rounded float result for + and x), float min/max as
 * if-chains, and the narrowing conversions by scaling in double with the
 * ties decided explicitly. Every count that ends a vector loop early or late
 * (0 ... 1023), every pair of alignments (offset by one element) and guard
 * elements on both sides catch tail and alignment bugs.
 */
#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "testutil.h"
#include "coll/reduce.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
	/* xorshift64* */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 2685821657736338717ull;
}

#define BITCAST(name, To, From)                                                                    \
	static To name(From x)                                                                     \
	{                                                                                          \
		To y;                                                                              \
		memcpy(&y, &x, sizeof(y));                                                         \
		return y;                                                                          \
	}
BITCAST(bits32, uint32_t, float)
BITCAST(from32, float, uint32_t)
BITCAST(bits64, uint64_t, double)
BITCAST(from64, double, uint64_t)

static const char *const dtype_name[] = { "int8",   "uint8",   "int32",    "uint32",  "int64",
					  "uint64", "float16", "bfloat16", "float32", "float64" };
static const char *const op_name[] = { "sum", "prod", "min", "max", "avg" };
static const xp_dtype_t work_types[] = { XP_INT8,  XP_UINT8,  XP_INT32,   XP_UINT32,
					 XP_INT64, XP_UINT64, XP_FLOAT32, XP_FLOAT64 };

static bool is_float(xp_dtype_t t)
{
	return t == XP_FLOAT32 || t == XP_FLOAT64;
}

static bool is_signed(xp_dtype_t t)
{
	return t == XP_INT8 || t == XP_INT32 || t == XP_INT64;
}

/* Element @i of an array of @t, as its raw bits (zero-extended). */
static uint64_t get_bits(xp_dtype_t t, const void *p, size_t i)
{
	const uint8_t *b = (const uint8_t *)p + i * xp_dtype_size(t);
	uint64_t v = 0;
	memcpy(&v, b, xp_dtype_size(t)); /* little-endian x86-64 */
	return v;
}

static void put_bits(xp_dtype_t t, void *p, size_t i, uint64_t v)
{
	memcpy((uint8_t *)p + i * xp_dtype_size(t), &v, xp_dtype_size(t));
}

static uint64_t width_mask(xp_dtype_t t)
{
	return xp_dtype_size(t) == 8 ? ~0ull : (1ull << (8 * xp_dtype_size(t))) - 1;
}

/* An integer element's value, sign-extended when the type is signed. */
static __int128 int_value(xp_dtype_t t, uint64_t bits)
{
	unsigned w = 8 * (unsigned)xp_dtype_size(t);
	if (is_signed(t) && w < 64 && (bits >> (w - 1)) & 1)
		return (__int128)bits - ((__int128)1 << w);
	if (is_signed(t) && w == 64)
		return (__int128)(int64_t)bits;
	return (__int128)bits;
}

static uint64_t ref_int(xp_dtype_t t, xp_op_t op, uint64_t a, uint64_t b)
{
	__int128 x = int_value(t, a), y = int_value(t, b);
	unsigned __int128 r;
	switch (op) {
	case XP_SUM:
	case XP_AVG:
		r = (unsigned __int128)x + (unsigned __int128)y;
		break;
	case XP_PROD:
		r = (unsigned __int128)x * (unsigned __int128)y;
		break;
	case XP_MIN:
		r = (unsigned __int128)(x <= y ? x : y);
		break;
	default:
		r = (unsigned __int128)(x >= y ? x : y);
		break;
	}
	return (uint64_t)r & width_mask(t);
}

/* Float min/max as reduce.h specifies them, in if-chains over doubles. */
static uint64_t ref_fminmax(xp_dtype_t t, bool is_min, double x, double y, uint64_t xb, uint64_t yb)
{
	if (isnan(x) || isnan(y))
		return t == XP_FLOAT32 ? 0x7fc00000u : 0x7ff8000000000000ull;
	if (x == y) {
		if (x != 0)
			return xb;
		bool neg = is_min ? (signbit(x) || signbit(y)) : (signbit(x) && signbit(y));
		if (t == XP_FLOAT32)
			return neg ? 0x80000000u : 0;
		return neg ? 0x8000000000000000ull : 0;
	}
	if (is_min)
		return x < y ? xb : yb;
	return x > y ? xb : yb;
}

/* Sum and product: NaN results are compared as "a NaN" (which operand's
 * payload survives depends on the order the compiler put the operands in). */
static uint64_t ref_float(xp_dtype_t t, xp_op_t op, uint64_t a, uint64_t b)
{
	double x = t == XP_FLOAT32 ? (double)from32((uint32_t)a) : from64(a);
	double y = t == XP_FLOAT32 ? (double)from32((uint32_t)b) : from64(b);
	if (op == XP_MIN || op == XP_MAX)
		return ref_fminmax(t, op == XP_MIN, x, y, a, b);
	double r = op == XP_PROD ? x * y : x + y;
	return t == XP_FLOAT32 ? bits32((float)r) : bits64(r);
}

static bool same_result(xp_dtype_t t, uint64_t got, uint64_t want)
{
	if (t == XP_FLOAT32 && isnan(from32((uint32_t)want)))
		return isnan(from32((uint32_t)got));
	if (t == XP_FLOAT64 && isnan(from64(want)))
		return isnan(from64(got));
	return got == want;
}

static uint64_t random_float_bits(xp_dtype_t t)
{
	static const uint32_t s32[] = { 0x7fc00000, 0xffc00001, 0x7f800001, 0x7fa5a5a5,
					0x7f800000, 0xff800000, 0x00000000, 0x80000000,
					0x00000001, 0x807fffff, 0x7f7fffff, 0xff7fffff };
	static const uint64_t s64[] = { 0x7ff8000000000000, 0xfff8000000000001,
					0x7ff0000000000001, 0x7ff0000000000000,
					0xfff0000000000000, 0,
					0x8000000000000000, 1,
					0x800fffffffffffff, 0x7fefffffffffffff };
	uint64_t r = rnd();
	if (r % 16 == 0)
		return t == XP_FLOAT32 ? s32[(r >> 8) % ARRAY_SIZE(s32)] :
					 s64[(r >> 8) % ARRAY_SIZE(s64)];
	if (r % 16 == 1)
		return t == XP_FLOAT32 ? (uint32_t)(r >> 32) : rnd();
	/* A finite value of moderate size, so sums and products stay finite. */
	double v = ldexp((double)(r >> 11) / 9007199254740992.0, (int)((r >> 4) % 41) - 20);
	v = (r & 8) ? -v : v;
	return t == XP_FLOAT32 ? bits32((float)v) : bits64(v);
}

static uint64_t random_bits(xp_dtype_t t)
{
	return is_float(t) ? random_float_bits(t) : rnd() & width_mask(t);
}

#define GUARD 4
static const size_t counts[] = { 0, 1, 3, 7, 8, 15, 16, 17, 1000, 1023 };

/* Every (work type, op) at every count and pair of alignments, with guard
 * elements around acc that must be left alone. */
static void test_kernels(void)
{
	enum { MAXN = 1023 + 2 * GUARD + 1 };
	static uint64_t accbuf[MAXN], inbuf[MAXN], orig[MAXN], inv[MAXN];
	static uint64_t onebuf[MAXN], outbuf[MAXN];
	for (size_t ti = 0; ti < ARRAY_SIZE(work_types); ti++) {
		xp_dtype_t t = work_types[ti];
		for (int op = 0; op < XP_OP_COUNT; op++) {
			for (size_t ci = 0; ci < ARRAY_SIZE(counts); ci++) {
				for (int off = 0; off < 4; off++) {
					size_t n = counts[ci], total = n + 2 * GUARD;
					size_t ao = GUARD + (size_t)(off & 1),
					       io = (size_t)(off >> 1);
					for (size_t i = 0; i < total; i++) {
						orig[i] = random_bits(t);
						inv[i] = random_bits(t);
						/* Equal pairs (zeros of both signs among
						 * them) for min and max's tie rule. */
						if (rnd() % 8 == 0)
							inv[i] = orig[i];
						put_bits(t, accbuf, i, orig[i]);
					}
					for (size_t i = 0; i < n; i++)
						put_bits(t, inbuf, io + i, inv[ao + i]);
					xpi_reduce((uint8_t *)accbuf + ao * xp_dtype_size(t),
						   (uint8_t *)inbuf + io * xp_dtype_size(t), n, t,
						   (xp_op_t)op);
					for (size_t i = 0; i < total; i++) {
						uint64_t got = get_bits(t, accbuf, i),
							 want = orig[i];
						if (i >= ao && i < ao + n)
							want = is_float(t) ?
								       ref_float(t, op, orig[i],
										 inv[i]) :
								       ref_int(t, op, orig[i],
									       inv[i]);
						if (!same_result(t, got, want))
							T_FAIL("%s %s n=%zu acc+%zu in+%zu: [%ld] "
							       "%#llx (op) %#llx = %#llx, want %#llx",
							       dtype_name[t], op_name[op], n,
							       ao - GUARD, io, (long)i - (long)ao,
							       (unsigned long long)orig[i],
							       (unsigned long long)inv[i],
							       (unsigned long long)got,
							       (unsigned long long)want);
					}
					/* The three-operand form: the same result in
					 * another buffer, from the first operand
					 * where it is; nothing outside written. */
					for (size_t i = 0; i < total; i++) {
						put_bits(t, onebuf, i, orig[i]);
						put_bits(t, outbuf, i, inv[i]);
					}
					xpi_reduce3((uint8_t *)outbuf + ao * xp_dtype_size(t),
						    (uint8_t *)onebuf + ao * xp_dtype_size(t),
						    (uint8_t *)inbuf + io * xp_dtype_size(t), n, t,
						    (xp_op_t)op);
					for (size_t i = 0; i < total; i++) {
						uint64_t got = get_bits(t, outbuf, i);
						bool in_range = i >= ao && i < ao + n;
						uint64_t want = in_range ? get_bits(t, accbuf, i) :
									   inv[i] & width_mask(t);
						/* (A NaN's payload may come from either
						 * operand of a sum or product.) */
						if (in_range ? !same_result(t, got, want) :
							       got != want)
							T_FAIL("%s %s n=%zu: xpi_reduce3 [%ld] is "
							       "%#llx, xpi_reduce gave %#llx",
							       dtype_name[t], op_name[op], n,
							       (long)i - (long)ao,
							       (unsigned long long)got,
							       (unsigned long long)want);
					}
				}
			}
		}
	}
}

static void reduce1(xp_dtype_t t, xp_op_t op, void *acc, const void *in)
{
	xpi_reduce(acc, in, 1, t, op);
}

/* Integer sums and products wrap, whichever the signedness. */
static void test_wraparound(void)
{
	int32_t i32 = INT32_MAX, one32 = 1;
	reduce1(XP_INT32, XP_SUM, &i32, &one32);
	T_EQ(i32, INT32_MIN);
	int8_t i8 = -128, m1 = -1;
	reduce1(XP_INT8, XP_PROD, &i8, &m1);
	T_EQ(i8, -128);
	i8 = 100;
	int8_t i8b = 100;
	reduce1(XP_INT8, XP_SUM, &i8, &i8b);
	T_EQ(i8, -56);
	uint8_t u8 = 255, u8one = 1;
	reduce1(XP_UINT8, XP_SUM, &u8, &u8one);
	T_EQ(u8, 0);
	u8 = 255;
	uint8_t u8b = 255;
	reduce1(XP_UINT8, XP_PROD, &u8, &u8b);
	T_EQ(u8, 1);
	uint32_t u32 = 0xffffffffu, u32b = 0xffffffffu;
	reduce1(XP_UINT32, XP_PROD, &u32, &u32b);
	T_EQ(u32, 1);
	int32_t big = 65536 * 3, big2 = 65536 * 5;
	reduce1(XP_INT32, XP_PROD, &big, &big2);
	T_EQ(big, 0);
	int64_t i64 = INT64_MIN, m64 = -1;
	reduce1(XP_INT64, XP_PROD, &i64, &m64);
	T_CHECK(i64 == INT64_MIN);
	i64 = INT64_MAX;
	int64_t one64 = 1;
	reduce1(XP_INT64, XP_SUM, &i64, &one64);
	T_CHECK(i64 == INT64_MIN);
	uint64_t u64 = 0x100000001ull, u64b = 0xffffffffull;
	reduce1(XP_UINT64, XP_PROD, &u64, &u64b);
	T_CHECK(u64 == 0xffffffffull * 0x100000001ull);
	/* Signed min/max compare as signed, unsigned as unsigned. */
	int32_t s = -1, s2 = 1;
	reduce1(XP_INT32, XP_MIN, &s, &s2);
	T_EQ(s, -1);
	uint32_t us = 0xffffffffu, us2 = 1;
	reduce1(XP_UINT32, XP_MIN, &us, &us2);
	T_EQ(us, 1);
	int64_t l = INT64_MIN, l2 = INT64_MAX;
	reduce1(XP_INT64, XP_MAX, &l, &l2);
	T_CHECK(l == INT64_MAX);
	uint64_t ul = 1ull << 63, ul2 = 1;
	reduce1(XP_UINT64, XP_MAX, &ul, &ul2);
	T_CHECK(ul == 1ull << 63);
}

static uint32_t f32_op(xp_op_t op, uint32_t a, uint32_t b)
{
	float x = from32(a), y = from32(b);
	reduce1(XP_FLOAT32, op, &x, &y);
	return bits32(x);
}

static uint64_t f64_op(xp_op_t op, uint64_t a, uint64_t b)
{
	double x = from64(a), y = from64(b);
	reduce1(XP_FLOAT64, op, &x, &y);
	return bits64(x);
}

/* NaN, infinities and signed zeros; min and max give the same bits in either
 * order, and associate, over every pair and triple of special values. */
static void test_float_specials(void)
{
	static const uint32_t v32[] = { 0x00000000, 0x80000000, 0x3f800000, 0xbf800000, 0x7f800000,
					0xff800000, 0x7fc00000, 0xffc00000, 0x7f800001, 0x7fc12345,
					0x00000001, 0x80000001, 0x7f7fffff, 0xff7fffff };
	static const uint64_t v64[] = { 0,
					0x8000000000000000,
					0x3ff0000000000000,
					0x7ff0000000000000,
					0xfff0000000000000,
					0x7ff8000000000000,
					0xfff8000000000000,
					0x7ff0000000000001,
					1,
					0x800fffffffffffff };
	const uint32_t pz = 0, nz = 0x80000000, one = 0x3f800000, inf = 0x7f800000,
		       ninf = 0xff800000, qnan = 0x7fc00000;

	T_EQ(f32_op(XP_MIN, pz, nz), nz);
	T_EQ(f32_op(XP_MIN, nz, pz), nz);
	T_EQ(f32_op(XP_MAX, pz, nz), pz);
	T_EQ(f32_op(XP_MAX, nz, pz), pz);
	T_EQ(f32_op(XP_MIN, 0x7fa00001, one), qnan); /* signalling in, default quiet out */
	T_EQ(f32_op(XP_MIN, one, 0xffc00001), qnan);
	T_EQ(f32_op(XP_MAX, ninf, 0xffc00000), qnan);
	T_EQ(f32_op(XP_MAX, inf, one), inf);
	T_EQ(f32_op(XP_MIN, ninf, one), ninf);
	T_CHECK(isnan(from32(f32_op(XP_SUM, inf, ninf))));
	T_CHECK(isnan(from32(f32_op(XP_SUM, one, qnan))));
	T_CHECK(isnan(from32(f32_op(XP_PROD, pz, inf))));
	T_EQ(f32_op(XP_SUM, nz, nz), nz);
	T_EQ(f32_op(XP_SUM, nz, pz), pz);
	T_EQ(f32_op(XP_SUM, inf, one), inf);
	T_EQ(f32_op(XP_PROD, nz, one), nz);
	T_CHECK(f64_op(XP_MIN, 0, 0x8000000000000000) == 0x8000000000000000);
	T_CHECK(f64_op(XP_MAX, 0x8000000000000000, 0) == 0);
	T_CHECK(f64_op(XP_MAX, 0x7ff0000000000001, 0x3ff0000000000000) == 0x7ff8000000000000);
	T_CHECK(f64_op(XP_SUM, 0x8000000000000000, 0x8000000000000000) == 0x8000000000000000);

	for (int op = XP_MIN; op <= XP_MAX; op++) {
		for (size_t i = 0; i < ARRAY_SIZE(v32); i++)
			for (size_t j = 0; j < ARRAY_SIZE(v32); j++) {
				uint32_t ab = f32_op(op, v32[i], v32[j]);
				T_EQ(ab, f32_op(op, v32[j], v32[i]));
				for (size_t k = 0; k < ARRAY_SIZE(v32); k++)
					T_EQ(f32_op(op, ab, v32[k]),
					     f32_op(op, v32[i], f32_op(op, v32[j], v32[k])));
			}
		for (size_t i = 0; i < ARRAY_SIZE(v64); i++)
			for (size_t j = 0; j < ARRAY_SIZE(v64); j++) {
				uint64_t ab = f64_op(op, v64[i], v64[j]);
				T_CHECK(ab == f64_op(op, v64[j], v64[i]));
				for (size_t k = 0; k < ARRAY_SIZE(v64); k++)
					T_CHECK(f64_op(op, ab, v64[k]) ==
						f64_op(op, v64[i], f64_op(op, v64[j], v64[k])));
			}
	}
}

/* AVG's division: integers truncate toward zero, floats round once. */
static void test_avg_finish(void)
{
	int32_t i32[] = { -7, 7, -1, 1, INT32_MIN, INT32_MAX, 0 };
	const int32_t i32_half[] = { -3, 3, 0, 0, INT32_MIN / 2, INT32_MAX / 2, 0 };
	xpi_reduce_avg_finish(i32, ARRAY_SIZE(i32), XP_INT32, 2);
	for (size_t i = 0; i < ARRAY_SIZE(i32); i++)
		T_EQ(i32[i], i32_half[i]);
	T_EQ(INT32_MIN / 2, -1073741824);

	int8_t i8[] = { -128, -128, -128, 127, -5 };
	xpi_reduce_avg_finish(i8, 1, XP_INT8, 3);
	xpi_reduce_avg_finish(i8 + 1, 1, XP_INT8, 128);
	xpi_reduce_avg_finish(i8 + 2, 1, XP_INT8, 200);
	xpi_reduce_avg_finish(i8 + 3, 2, XP_INT8, 4);
	T_EQ(i8[0], -42);
	T_EQ(i8[1], -1);
	T_EQ(i8[2], 0);
	T_EQ(i8[3], 31);
	T_EQ(i8[4], -1);

	uint8_t u8[] = { 255, 7 };
	xpi_reduce_avg_finish(u8, 2, XP_UINT8, 2);
	T_EQ(u8[0], 127);
	T_EQ(u8[1], 3);
	uint32_t u32[] = { 0xffffffffu, 5 };
	xpi_reduce_avg_finish(u32, 2, XP_UINT32, 4096);
	T_EQ(u32[0], 0xffffffffu / 4096);
	T_EQ(u32[1], 0);
	int64_t i64[] = { INT64_MIN, INT64_MAX, -9 };
	xpi_reduce_avg_finish(i64, 3, XP_INT64, 3);
	T_CHECK(i64[0] == -3074457345618258602ll); /* -(2^63 / 3), rounded toward zero */
	T_CHECK(i64[1] == 3074457345618258602ll);
	T_CHECK(i64[2] == -3);
	int64_t one_rank = INT64_MIN;
	xpi_reduce_avg_finish(&one_rank, 1, XP_INT64, 1);
	T_CHECK(one_rank == INT64_MIN);
	uint64_t u64[] = { UINT64_MAX };
	xpi_reduce_avg_finish(u64, 1, XP_UINT64, 7);
	T_CHECK(u64[0] == UINT64_MAX / 7);

	/* Floats at every count: one division each, correctly rounded
	 * (a double quotient rounded to float is the float quotient). */
	static float f[1023 + GUARD];
	static double d[1023 + GUARD];
	static const int ranks[] = { 2, 3, 7, 4096 };
	for (size_t ci = 0; ci < ARRAY_SIZE(counts); ci++)
		for (size_t ri = 0; ri < ARRAY_SIZE(ranks); ri++) {
			size_t n = counts[ci];
			int nr = ranks[ri];
			for (size_t i = 0; i < n + GUARD; i++) {
				f[i] = from32((uint32_t)random_float_bits(XP_FLOAT32));
				d[i] = from64(random_float_bits(XP_FLOAT64));
			}
			float f0[1023 + GUARD];
			double d0[1023 + GUARD];
			memcpy(f0, f, sizeof(f0));
			memcpy(d0, d, sizeof(d0));
			xpi_reduce_avg_finish(f + 1, n, XP_FLOAT32, nr);
			xpi_reduce_avg_finish(d + 1, n, XP_FLOAT64, nr);
			for (size_t i = 0; i < n + GUARD; i++) {
				bool in = i >= 1 && i < n + 1;
				float fw = in ? (float)((double)f0[i] / nr) : f0[i];
				double dw = in ? d0[i] / nr : d0[i];
				T_CHECK(isnan(fw) ? isnan(f[i]) : bits32(f[i]) == bits32(fw));
				T_CHECK(isnan(dw) ? isnan(d[i]) : bits64(d[i]) == bits64(dw));
			}
		}
}

/* ------------------------------------------------------------------------- */
/* 16-bit floats                                                             */

/* A binary16 pattern's value, decoded field by field. */
static double ref_f16_value(uint16_t h)
{
	int e = (h >> 10) & 0x1f, m = h & 0x3ff;
	double v;
	if (e == 0)
		v = ldexp(m, -24);
	else if (e == 31)
		v = m ? NAN : INFINITY;
	else
		v = ldexp(1024 + m, e - 25);
	return (h & 0x8000) ? -v : v;
}

/*
 * @x (finite, >= 0) rounded to nearest, ties to even, among the numbers with
 * @prec significant bits and exponent at least @emin (so subnormals below
 * 2^emin keep the spacing 2^(emin - prec + 1)). The scaling by a power of two
 * and the floor are exact in double for every float32 input.
 */
static double ref_round(double x, int prec, int emin)
{
	if (x == 0)
		return 0;
	int E;
	frexp(x, &E); /* x = m * 2^E, 0.5 <= m < 1: exponent E - 1 */
	int e = E - 1 < emin ? emin : E - 1;
	double ulp = ldexp(1.0, e - (prec - 1));
	double q = x / ulp, fl = floor(q), frac = q - fl;
	if (frac > 0.5 || (frac == 0.5 && fmod(fl, 2.0) != 0))
		fl += 1;
	return fl * ulp;
}

/* The binary16 pattern float32 @f should narrow to, for a non-NaN @f. */
static uint16_t ref_f32_to_f16(float f)
{
	uint16_t sign = signbit(f) ? 0x8000 : 0;
	double r = ref_round(fabs((double)f), 11, -14);
	if (r >= 65536.0)
		return sign | 0x7c00; /* from 65520 up, and infinity */
	if (r < 0x1p-14)
		return sign | (uint16_t)(r * 0x1p24);
	int E;
	double m = frexp(r, &E); /* r = m * 2^E: exponent E - 1, 1024 + mantissa = m * 2^11 */
	return sign | (uint16_t)((E - 1 + 15) << 10) | (uint16_t)(m * 2048.0 - 1024.0);
}

static uint16_t ref_f32_to_bf16(float f)
{
	double r = ref_round(fabs((double)f), 8, -126);
	if (r >= 0x1p128)
		r = INFINITY;
	uint32_t u = bits32((float)(signbit(f) ? -r : r));
	T_EQ(u & 0xffff, 0); /* r has 8 significant bits: representable */
	return (uint16_t)(u >> 16);
}

/* A narrowed NaN: a NaN of the same sign, quiet, with the payload's top. */
static void check_nan16(uint16_t got, uint32_t from, bool bf16)
{
	uint16_t want =
		bf16 ? (uint16_t)((from >> 16) | 0x0040) :
		       (uint16_t)(((from >> 16) & 0x8000) | 0x7e00 | ((from >> 13) & 0x3ff));
	if (got != want)
		T_FAIL("NaN %#x narrowed to %#x, want %#x", from, got, want);
}

/* Every 16-bit pattern, widened and narrowed back. */
static void test_f16_exhaustive(void)
{
	static uint16_t h[65536], back[65536];
	static float f[65536];
	for (uint32_t i = 0; i < 65536; i++)
		h[i] = (uint16_t)i;

	xpi_f16_to_f32(f, h, 65536);
	xpi_f32_to_f16(back, f, 65536);
	for (uint32_t i = 0; i < 65536; i++) {
		double v = ref_f16_value(h[i]);
		if (isnan(v)) {
			uint32_t u = bits32(f[i]);
			T_CHECK(isnan(f[i]));
			T_EQ(u >> 31, i >> 15);
			T_EQ(u & 0x00400000, 0x00400000);             /* quiet */
			T_EQ((u >> 13) & 0x3ff, (i & 0x3ff) | 0x200); /* payload */
			T_EQ(u & 0x1fff, 0);
			T_EQ(back[i], i | 0x200);
		} else {
			if (bits32(f[i]) != bits32((float)v))
				T_FAIL("f16 %#x -> %#x, want %#x", i, bits32(f[i]),
				       bits32((float)v));
			if (back[i] != i)
				T_FAIL("f16 %#x -> f32 -> %#x", i, back[i]);
		}
	}

	xpi_bf16_to_f32(f, h, 65536);
	xpi_f32_to_bf16(back, f, 65536);
	for (uint32_t i = 0; i < 65536; i++) {
		uint32_t u = bits32(f[i]);
		if ((i & 0x7fff) > 0x7f80) {
			T_CHECK(isnan(f[i]));
			T_EQ(u, (i << 16) | 0x00400000);
			T_EQ(back[i], i | 0x40);
		} else {
			T_EQ(u, i << 16);
			T_EQ(back[i], i);
		}
	}
}

/* The narrowing inputs: around every halfway point and every value of both
 * 16-bit types (in f16's case its subnormals and overflow threshold
 * included), float32 subnormals, special values and random patterns. */
static size_t narrowing_inputs(float *out, size_t cap)
{
	size_t n = 0;
#define ADD_AROUND(x)                                                                              \
	do {                                                                                       \
		float x_ = (x);                                                                    \
		if (n + 6 > cap)                                                                   \
			T_FAIL("narrowing input table too small");                                 \
		out[n++] = x_;                                                                     \
		out[n++] = nextafterf(x_, INFINITY);                                               \
		out[n++] = nextafterf(x_, -INFINITY);                                              \
		out[n++] = -x_;                                                                    \
		out[n++] = -nextafterf(x_, INFINITY);                                              \
		out[n++] = -nextafterf(x_, -INFINITY);                                             \
	} while (0)
	for (uint32_t h = 0; h < 0x7c00; h++) {
		double v = ref_f16_value((uint16_t)h);
		double next = h + 1 == 0x7c00 ? 65536.0 : ref_f16_value((uint16_t)(h + 1));
		ADD_AROUND((float)v);
		ADD_AROUND((float)((v + next) / 2)); /* exact in float: 12 bits */
	}
	for (uint32_t b = 0; b < 0x7f80; b++) {
		ADD_AROUND(from32(b << 16));
		ADD_AROUND(from32((b << 16) | 0x8000)); /* halfway to the next */
	}
	static const float specials[] = { 65504.0f, 65519.0f,  65520.0f, 65536.0f, 1e5f,
					  FLT_MAX,  INFINITY,  0x1p-24f, 0x1p-25f, 0x1p-26f,
					  0x1p-14f, 0x1p-126f, 0x1p-149f };
	for (size_t i = 0; i < ARRAY_SIZE(specials); i++)
		ADD_AROUND(specials[i]);
	while (n + 2 <= cap) {
		uint64_t r = rnd();
		out[n++] = from32((uint32_t)r);
		/* Mostly inside binary16's range: exponents 96 .. 159. */
		out[n++] = from32((uint32_t)((r >> 32) & 0x807fffff) | (uint32_t)(96 + (r & 63))
									       << 23);
	}
#undef ADD_AROUND
	return n;
}

static void test_narrowing(void)
{
	enum { N = 2400000 };
	float *in = malloc(N * sizeof(*in));
	uint16_t *h = malloc(N * sizeof(*h)), *b = malloc(N * sizeof(*b));
	T_CHECK(in != NULL && h != NULL && b != NULL);
	size_t n = narrowing_inputs(in, N);
	xpi_f32_to_f16(h, in, n);
	xpi_f32_to_bf16(b, in, n);
	for (size_t i = 0; i < n; i++) {
		float f = in[i];
		if (isnan(f)) {
			check_nan16(h[i], bits32(f), false);
			check_nan16(b[i], bits32(f), true);
			continue;
		}
		if (h[i] != ref_f32_to_f16(f))
			T_FAIL("f32 %#x (%a) -> f16 %#x, want %#x", bits32(f), (double)f, h[i],
			       ref_f32_to_f16(f));
		if (b[i] != ref_f32_to_bf16(f))
			T_FAIL("f32 %#x (%a) -> bf16 %#x, want %#x", bits32(f), (double)f, b[i],
			       ref_f32_to_bf16(f));
	}
	/* The vector loops' tails and misaligned starts give what the bulk call
	 * gave (the same elements, one by one or in short runs). */
	static uint16_t o16[1023 + GUARD];
	static float o32[1023 + GUARD];
	for (size_t ci = 0; ci < ARRAY_SIZE(counts); ci++)
		for (size_t off = 0; off < 2; off++) {
			size_t c = counts[ci], s = 12345 + off;
			memset(o16, 0xa5, sizeof(o16));
			xpi_f32_to_f16(o16 + off, in + s, c);
			for (size_t i = 0; i < c; i++)
				T_EQ(o16[off + i], h[s + i]);
			T_EQ(o16[off + c], 0xa5a5);
			xpi_f32_to_bf16(o16 + off, in + s, c);
			for (size_t i = 0; i < c; i++)
				T_EQ(o16[off + i], b[s + i]);
			T_EQ(o16[off + c], 0xa5a5);
			memset(o32, 0xa5, sizeof(o32));
			xpi_f16_to_f32(o32 + off, h + s, c);
			for (size_t i = 0; i < c; i++) {
				float w;
				xpi_f16_to_f32(&w, h + s + i, 1);
				T_EQ(bits32(o32[off + i]), bits32(w));
			}
			T_EQ(bits32(o32[off + c]), 0xa5a5a5a5);
			xpi_bf16_to_f32(o32 + off, b + s, c);
			for (size_t i = 0; i < c; i++)
				T_EQ(bits32(o32[off + i]), (uint32_t)b[s + i] << 16);
		}
	fprintf(stderr, "   %zu float32 patterns narrowed to both types\n", n);
	free(in);
	free(h);
	free(b);
}

/* A float16 AVG as a collective does it: widen, reduce in float32, divide,
 * narrow once. Three ranks' 0.1, 0.2, 0.4 (as halves). */
static void test_f16_avg_path(void)
{
	uint16_t r0[] = { 0x2e66, 0x3266 }, r1[] = { 0x3266, 0x3666 }, r2[] = { 0x3666, 0xbc00 };
	float acc[2], tmp[2];
	T_EQ(xpi_reduce_work_type(XP_FLOAT16), XP_FLOAT32);
	T_EQ(xpi_reduce_work_type(XP_BFLOAT16), XP_FLOAT32);
	T_EQ(xpi_reduce_work_type(XP_INT8), XP_INT8);
	T_EQ(xpi_reduce_work_type(XP_FLOAT64), XP_FLOAT64);
	xpi_f16_to_f32(acc, r0, 2);
	xpi_f16_to_f32(tmp, r1, 2);
	xpi_reduce(acc, tmp, 2, XP_FLOAT32, XP_AVG);
	xpi_f16_to_f32(tmp, r2, 2);
	xpi_reduce(acc, tmp, 2, XP_FLOAT32, XP_AVG);
	xpi_reduce_avg_finish(acc, 2, XP_FLOAT32, 3);
	uint16_t out[2];
	xpi_f32_to_f16(out, acc, 2);
	float want0 = (from32(0x3dccc000) + from32(0x3e4cc000) + from32(0x3eccc000)) / 3.0f;
	float want1 = (from32(0x3e4cc000) + from32(0x3eccc000) - 1.0f) / 3.0f;
	T_EQ(out[0], ref_f32_to_f16(want0));
	T_EQ(out[1], ref_f32_to_f16(want1));
}

static void test_sizes(void)
{
	static const size_t want[XP_DTYPE_COUNT] = { 1, 1, 4, 4, 8, 8, 2, 2, 4, 8 };
	for (int t = 0; t < XP_DTYPE_COUNT; t++)
		T_EQ(xp_dtype_size((xp_dtype_t)t), want[t]);
	T_EQ(xp_dtype_size(XP_DTYPE_COUNT), 0);
	T_EQ(xp_dtype_size((xp_dtype_t)-1), 0);
}

int main(void)
{
	T_RUN(test_sizes);
	T_RUN(test_kernels);
	T_RUN(test_wraparound);
	T_RUN(test_float_specials);
	T_RUN(test_avg_finish);
	T_RUN(test_f16_exhaustive);
	T_RUN(test_narrowing);
	T_RUN(test_f16_avg_path);
	return 0;
}
