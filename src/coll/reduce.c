/* SPDX-License-Identifier: MIT */
/*
 * Reduction kernels and 16-bit float conversions (reduce.h).
 *
 * Every kernel is one plain loop over restrict pointers, stamped out per
 * (type, op) by a macro, with no branch in its body (selections are
 * ternaries the compiler turns into compare-and-blend), so gcc and clang
 * vectorise it with the x86-64 baseline (SSE2), and with AVX2 where the
 * CPU has it (XPI_KERNEL_CLONES); src/meson.build builds this
 * file at -O3 and says why no fast-math flag is used. The loops read the
 * element's bits through memcpy, which both compilers treat as a
 * reinterpretation, not a call.
 */
#include <assert.h>
#include <math.h>
#include <string.h>

#include "../core/compiler.h"
#include "reduce.h"

XPI_EXPORT size_t xp_dtype_size(xp_dtype_t dtype)
{
	switch (dtype) {
	case XP_INT8:
	case XP_UINT8:
		return 1;
	case XP_FLOAT16:
	case XP_BFLOAT16:
		return 2;
	case XP_INT32:
	case XP_UINT32:
	case XP_FLOAT32:
		return 4;
	case XP_INT64:
	case XP_UINT64:
	case XP_FLOAT64:
		return 8;
	case XP_DTYPE_COUNT:
		break;
	}
	return 0;
}

xp_dtype_t xpi_reduce_work_type(xp_dtype_t dt)
{
	return dt == XP_FLOAT16 || dt == XP_BFLOAT16 ? XP_FLOAT32 : dt;
}

/* A value's bits and back; memcpy is what C allows for it, and compilers
 * make it a register move (or nothing) inside vector loops. */
#define BITCAST(name, To, From)                                                                    \
	static inline To name(From x)                                                              \
	{                                                                                          \
		To y;                                                                              \
		memcpy(&y, &x, sizeof(y));                                                         \
		return y;                                                                          \
	}
BITCAST(f32_bits, uint32_t, float)
BITCAST(f32_from, float, uint32_t)
BITCAST(f64_bits, uint64_t, double)
BITCAST(f64_from, double, uint64_t)

/* The default quiet NaNs min and max return (reduce.h says why one NaN). */
#define F32_QNAN 0x7fc00000u
#define F64_QNAN 0x7ff8000000000000ull

/* Each kernel (and conversion) is also built for x86-64-v3 (AVX2, FMA,
 * F16C), chosen when the library is loaded on a CPU that has it (an
 * ifunc): twice the lanes of the baseline's SSE2. Measured with
 * bench_core (BM_reduce_sum_*, medians of 3): float32 sums of 4 KiB 35 ->
 * 71 GB/s, of 1 MiB 33 -> 44 GB/s. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define XPI_KERNEL_CLONES __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define XPI_KERNEL_CLONES
#endif

/* One kernel: acc[i] = EXPR(a, b) with a = acc[i], b = in[i], both of type T.
 * It takes void pointers so that one table of pointers holds every kernel. */
#define XPI_KERNEL(name, T, EXPR)                                                                  \
	XPI_KERNEL_CLONES static void name(void *restrict acc_, const void *restrict in_,          \
					   size_t n)                                               \
	{                                                                                          \
		T *restrict acc = acc_;                                                            \
		const T *restrict in = in_;                                                        \
		for (size_t i = 0; i < n; i++) {                                                   \
			T a = acc[i], b = in[i];                                                   \
			acc[i] = (T)(EXPR);                                                        \
		}                                                                                  \
	}                                                                                          \
	/* out[i] = EXPR(a, b) with a = one[i], b = two[i]. */                                     \
	XPI_KERNEL_CLONES static void name##_3(void *restrict out_, const void *restrict one_,     \
					       const void *restrict two_, size_t n)                \
	{                                                                                          \
		T *restrict out = out_;                                                            \
		const T *restrict one = one_, *restrict two = two_;                                \
		for (size_t i = 0; i < n; i++) {                                                   \
			T a = one[i], b = two[i];                                                  \
			out[i] = (T)(EXPR);                                                        \
		}                                                                                  \
	}

/* Integer sums and products in the unsigned type of the same width: they
 * wrap, and a signed element read as its unsigned counterpart is allowed by
 * C's aliasing rules (C11 6.5p7), so one loop serves both. uint8_t operands
 * are promoted to int, where 255 * 255 cannot overflow. */
#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))

XPI_KERNEL(sum_u8, uint8_t, ADD(a, b))
XPI_KERNEL(sum_u32, uint32_t, ADD(a, b))
XPI_KERNEL(sum_u64, uint64_t, ADD(a, b))
XPI_KERNEL(prod_u8, uint8_t, MUL(a, b))
XPI_KERNEL(prod_u32, uint32_t, MUL(a, b))
XPI_KERNEL(prod_u64, uint64_t, MUL(a, b))
XPI_KERNEL(min_i8, int8_t, MIN(a, b))
XPI_KERNEL(min_u8, uint8_t, MIN(a, b))
XPI_KERNEL(min_i32, int32_t, MIN(a, b))
XPI_KERNEL(min_u32, uint32_t, MIN(a, b))
XPI_KERNEL(min_i64, int64_t, MIN(a, b))
XPI_KERNEL(min_u64, uint64_t, MIN(a, b))
XPI_KERNEL(max_i8, int8_t, MAX(a, b))
XPI_KERNEL(max_u8, uint8_t, MAX(a, b))
XPI_KERNEL(max_i32, int32_t, MAX(a, b))
XPI_KERNEL(max_u32, uint32_t, MAX(a, b))
XPI_KERNEL(max_i64, int64_t, MAX(a, b))
XPI_KERNEL(max_u64, uint64_t, MAX(a, b))
XPI_KERNEL(sum_f32, float, ADD(a, b))
XPI_KERNEL(sum_f64, double, ADD(a, b))
XPI_KERNEL(prod_f32, float, MUL(a, b))
XPI_KERNEL(prod_f64, double, MUL(a, b))

/*
 * Float min and max (reduce.h): a NaN operand gives the default quiet NaN;
 * otherwise the strictly smaller (larger) operand; equal operands differ only
 * for zeros, where OR-ing the bits gives -0 (min) and AND-ing them +0 (max).
 * Each is a function of the unordered pair, so it is commutative, and of the
 * set's order with -0 < +0, so associative, down to the bits.
 */
#define FMIN(a, b, bits, from, qnan)                                                               \
	from(isunordered(a, b) ? (qnan) :                                                          \
	     (a) < (b)         ? bits(a) :                                                         \
	     (b) < (a)         ? bits(b) :                                                         \
				 bits(a) | bits(b))
#define FMAX(a, b, bits, from, qnan)                                                               \
	from(isunordered(a, b) ? (qnan) :                                                          \
	     (a) > (b)         ? bits(a) :                                                         \
	     (b) > (a)         ? bits(b) :                                                         \
				 bits(a) & bits(b))

XPI_KERNEL(min_f32, float, FMIN(a, b, f32_bits, f32_from, F32_QNAN))
XPI_KERNEL(max_f32, float, FMAX(a, b, f32_bits, f32_from, F32_QNAN))
XPI_KERNEL(min_f64, double, FMIN(a, b, f64_bits, f64_from, F64_QNAN))
XPI_KERNEL(max_f64, double, FMAX(a, b, f64_bits, f64_from, F64_QNAN))

typedef void (*kernel_fn)(void *restrict acc, const void *restrict in, size_t n);
typedef void (*kernel3_fn)(void *restrict out, const void *restrict one, const void *restrict two,
			   size_t n);

/* The kernels of each (work type, op), two-operand and three; NULL for
 * 16-bit types, which the kernels never see. XP_AVG is XP_SUM until
 * xpi_reduce_avg_finish. */
struct kernel_pair {
	kernel_fn two;
	kernel3_fn three;
};
#define K(name)                                                                                    \
	{                                                                                          \
		name, name##_3                                                                     \
	}
#define ROW(sum, prod, min, max)                                                                   \
	{                                                                                          \
		K(sum), K(prod), K(min), K(max), K(sum)                                            \
	}
static const struct kernel_pair kernels[XP_DTYPE_COUNT][XP_OP_COUNT] = {
	[XP_INT8] = ROW(sum_u8, prod_u8, min_i8, max_i8),
	[XP_UINT8] = ROW(sum_u8, prod_u8, min_u8, max_u8),
	[XP_INT32] = ROW(sum_u32, prod_u32, min_i32, max_i32),
	[XP_UINT32] = ROW(sum_u32, prod_u32, min_u32, max_u32),
	[XP_INT64] = ROW(sum_u64, prod_u64, min_i64, max_i64),
	[XP_UINT64] = ROW(sum_u64, prod_u64, min_u64, max_u64),
	[XP_FLOAT32] = ROW(sum_f32, prod_f32, min_f32, max_f32),
	[XP_FLOAT64] = ROW(sum_f64, prod_f64, min_f64, max_f64),
};

/* The kernels of (@work, @op), or NULL: not a working type or operator
 * (the callers check; asserted in debug builds). */
static const struct kernel_pair *kernels_of(xp_dtype_t work, xp_op_t op)
{
	assert((unsigned)work < XP_DTYPE_COUNT && (unsigned)op < XP_OP_COUNT);
	assert(work != XP_FLOAT16 && work != XP_BFLOAT16);
	if ((unsigned)work >= XP_DTYPE_COUNT || (unsigned)op >= XP_OP_COUNT)
		return NULL;
	return &kernels[work][op];
}

void xpi_reduce3(void *restrict out, const void *restrict one, const void *restrict two,
		 size_t count, xp_dtype_t work, xp_op_t op)
{
	const struct kernel_pair *k = kernels_of(work, op);
	if (k != NULL && k->three != NULL && count > 0)
		k->three(out, one, two, count);
}

void xpi_reduce(void *restrict acc, const void *restrict in, size_t count, xp_dtype_t work,
		xp_op_t op)
{
	const struct kernel_pair *k = kernels_of(work, op);
	if (k != NULL && k->two != NULL && count > 0)
		k->two(acc, in, count);
}

/* acc[i] = acc[i] / d with d of type D, truncating toward zero for integers
 * (C11 6.5.5p6). Integer division does not vectorise on x86 (there is no such
 * instruction); this runs once per collective, not once per peer. */
#define XPI_DIVIDE(name, T, D)                                                                     \
	static void name(void *restrict acc_, size_t n, D d)                                       \
	{                                                                                          \
		T *restrict acc = acc_;                                                            \
		for (size_t i = 0; i < n; i++)                                                     \
			acc[i] = (T)(acc[i] / d);                                                  \
	}

/* 8-bit elements divide in int and unsigned int, so a divisor above 127 is
 * not cut down; the quotient is no larger than the element, so it fits. */
XPI_DIVIDE(div_i8, int8_t, int)
XPI_DIVIDE(div_u8, uint8_t, unsigned int)
XPI_DIVIDE(div_i32, int32_t, int32_t)
XPI_DIVIDE(div_u32, uint32_t, uint32_t)
XPI_DIVIDE(div_i64, int64_t, int64_t)
XPI_DIVIDE(div_u64, uint64_t, uint64_t)
XPI_DIVIDE(div_f32, float, float)
XPI_DIVIDE(div_f64, double, double)

void xpi_reduce_avg_finish(void *acc, size_t count, xp_dtype_t work, int nranks)
{
	assert(nranks > 0);
	assert(work != XP_FLOAT16 && work != XP_BFLOAT16);
	/* nranks > 0 rules out the one overflowing division, INT_MIN / -1. */
	if (nranks <= 1)
		return;
	switch (work) {
	case XP_INT8:
		div_i8(acc, count, nranks);
		break;
	case XP_UINT8:
		div_u8(acc, count, (unsigned int)nranks);
		break;
	case XP_INT32:
		div_i32(acc, count, nranks);
		break;
	case XP_UINT32:
		div_u32(acc, count, (uint32_t)nranks);
		break;
	case XP_INT64:
		div_i64(acc, count, nranks);
		break;
	case XP_UINT64:
		div_u64(acc, count, (uint64_t)nranks);
		break;
	case XP_FLOAT32:
		/* Exact for nranks up to 2^24. */
		div_f32(acc, count, (float)nranks);
		break;
	case XP_FLOAT64:
		div_f64(acc, count, (double)nranks);
		break;
	case XP_FLOAT16:
	case XP_BFLOAT16:
	case XP_DTYPE_COUNT:
		break;
	}
}

/*
 * What a float16 or bfloat16 reduction delivers (the bounds xport.h states;
 * issue 24, 6). Each rank's input is widened exactly to float32 (both types'
 * values are floats). Every algorithm (recursive doubling, ring,
 * Rabenseifner's, hierarchical, shared memory; reduce's binomial tree;
 * reduce_scatter's ring) combines float32 vectors only, through
 * xpi_reduce()/xpi_reduce3() in the work type, and sends float32 partials;
 * the only narrowing is ops.c's from_work(), once, on the final vector.
 *
 * SUM over p ranks: whatever the tree, the exact sum S = x_1 + ... + x_p is
 * reached by p - 1 float32 additions, each of two exact inputs or earlier
 * partials, each rounded once: fl(a + b) = (a + b)(1 + e), |e| <= u = 2^-24
 * (an addition whose result is subnormal is exact, so no underflow term).
 * Unrolled, each x_i is multiplied by at most p - 1 factors (1 + e), so
 * the float32 result s has |s - S| <= d = g(p-1) * sum |x_i|, with
 * g(k) = k u / (1 - k u) (Higham, Accuracy and Stability, 2nd ed., 4.2 and
 * lemma 3.1). The result is RN(s), RN rounding to nearest even in the
 * 16-bit type, and RN is monotone: RN(S - d) <= RN(s) <= RN(S + d). So it is
 * RN(S), the once-rounded sum, unless a halfway point between two adjacent
 * values of the type lies within d of S; then it is one of those two (if d
 * is below half their spacing, the usual case). The largest finite value
 * and infinity count as adjacent, halfway at 65520 (float16) and
 * 2^128 - 2^119 (bfloat16).
 *
 * AVG divides s by p in float32 (div_f32; (float)p is exact to 2^24): one
 * more factor (1 + e), so |fl(s / p) - S / p| <= g(p) * sum |x_i| / p, plus
 * 2^-150 when the quotient is below 2^-126 (a subnormal float is rounded
 * absolutely: only bfloat16 gets there). PROD: p - 1 multiplications, the
 * relative bound |s - P| <= g(p-1) |P|, while every partial product is
 * zero or a normal float (below it, the error is absolute; above, infinity).
 * float16 products stay normal for p <= 5 (2^-24^5 = 2^-120, 65504^5 < 2^80).
 * MIN and MAX choose one of the inputs: exact, and so is narrowing it.
 *
 * Overflow: a float16 partial sum is at most p * 65504 in magnitude, far
 * from float32's 2^128. A bfloat16 partial sum is at most (1 + g(p-1)) sum
 * |x_i|, so none overflows while sum |x_i| < 2^127 and the bound holds.
 * Beyond, a partial may round to +-inf. With inputs of one sign that
 * happens only when |S| is near or past 2^128, and (for p < 2^15) the
 * result is +-inf, as RN(S) is; with both signs, the result may be +-inf or NaN (+inf + -inf)
 * where S is finite, or finite where S is not.
 *
 * Rounding to the 16-bit type between steps would break the bound (1 +
 * 2^-11 + 2^-13 in float16 would give 1 in some orders, not RN(S) = 1 +
 * 2^-10), so nothing does; float64 partials would make float16 sums exact
 * (1586aea) but double the bytes on the wire, and halved float16
 * allreduce's bandwidth.
 */
/*
 * binary16: 1 sign, 5 exponent (bias 15), 10 mantissa bits; binary32: 1, 8
 * (bias 127), 23. A normal half's exponent and mantissa, shifted left by 13,
 * are a float's once the exponent is rebiased by 127 - 15 = 112, i.e. plus
 * 112 << 23 = 0x38000000. Each loop computes every case's answer and picks
 * one with ternaries, so it has no branch and vectorises.
 */
#define H_REBIAS 0x38000000u

XPI_KERNEL_CLONES void xpi_f16_to_f32(float *restrict out, const uint16_t *restrict in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t sign = (uint32_t)(in[i] & 0x8000) << 16;
		uint32_t em = in[i] & 0x7fffu; /* exponent and mantissa */
		/* Exponent 31 (infinity, NaN) is rebiased once more, to 255; a
		 * NaN is made quiet (bit 22). */
		uint32_t r = (em << 13) + H_REBIAS + (em >= 0x7c00 ? H_REBIAS : 0);
		r |= em > 0x7c00 ? 0x00400000u : 0;
		/* Exponent 0: mantissa x 2^-24, exact in float (and a normal one:
		 * no subnormal float is made, so a program's flush-to-zero or
		 * denormals-are-zero mode changes nothing). */
		uint32_t sub = f32_bits((float)(int32_t)em * 0x1p-24f);
		out[i] = f32_from(sign | (em < 0x0400 ? sub : r));
	}
}

XPI_KERNEL_CLONES void xpi_f32_to_f16(uint16_t *restrict out, const float *restrict in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u = f32_bits(in[i]);
		uint32_t sign = (u >> 16) & 0x8000;
		uint32_t a = u & 0x7fffffffu;
		/* A NaN: quiet (bit 9), keeping the payload's upper 9 bits. */
		uint32_t nan = 0x7e00 | ((a >> 13) & 0x3ff);
		/*
		 * Normal: rebias and drop 13 bits, rounding to nearest even by
		 * adding just under half (0xfff) plus the kept part's lowest
		 * bit. A carry out of the mantissa bumps the exponent, which is
		 * the right answer; from 65520 (0x477ff000, halfway between
		 * 65504 and 2^16) up it would reach exponent 31: infinity.
		 */
		uint32_t normal = (a - H_REBIAS + 0xfff + ((a >> 13) & 1)) >> 13;
		/*
		 * Below 2^-14 the half is subnormal: |x| rounded to a multiple of
		 * 2^-24. Adding 0.5f does that rounding in the FPU (floats in
		 * [0.5, 1) are the multiples of 2^-24 there), and the sum's
		 * mantissa bits are then the half's: no variable shift, which SSE2
		 * lacks. The result 0x400 (rounded up to 2^-14) is the smallest
		 * normal half, also right.
		 */
		uint32_t sub = f32_bits(f32_from(a) + 0.5f) - 0x3f000000u;
		uint32_t r = a > 0x7f800000u  ? nan :
			     a >= 0x477ff000u ? 0x7c00u :
			     a >= 0x38800000u ? normal :
						sub;
		out[i] = (uint16_t)(sign | r);
	}
}

/* bfloat16 is a float's upper half: widening is a shift. */
XPI_KERNEL_CLONES void xpi_bf16_to_f32(float *restrict out, const uint16_t *restrict in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u = (uint32_t)in[i] << 16;
		uint32_t quiet = (in[i] & 0x7fff) > 0x7f80 ? 0x00400000u : 0;
		out[i] = f32_from(u | quiet);
	}
}

XPI_KERNEL_CLONES void xpi_f32_to_bf16(uint16_t *restrict out, const float *restrict in, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t u = f32_bits(in[i]);
		/* Round to nearest even at bit 16, as above; the carry reaches
		 * the exponent, and infinity from the largest finite bf16 up.
		 * Only a NaN could carry out of 32 bits, and it is apart. */
		uint32_t rounded = (u + 0x7fff + ((u >> 16) & 1)) >> 16;
		uint32_t nan = (u >> 16) | 0x0040;
		out[i] = (uint16_t)((u & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
	}
}
