/* SPDX-License-Identifier: MIT */
/*
 * The reduction kernels of the collectives: pure functions over arrays, no
 * communication, no allocation, no state. A collective receives a peer's
 * contribution into a buffer and folds it into its accumulator with
 * xpi_reduce(); for XP_AVG it divides once at the end with
 * xpi_reduce_avg_finish().
 *
 * Collectives compute and send in the *work type* (xpi_reduce_work_type):
 * float16 and bfloat16 are widened to float32 when a rank's data enters the
 * collective, partial results travel between ranks as float32, and the
 * result is narrowed to the 16-bit type once, when it leaves the collective.
 * Nothing narrows between steps: each float32 partial is rounded once, which
 * is what the public header's error bounds count (derived in reduce.c, above
 * the conversions). The kernels themselves never see a 16-bit type.
 *
 * Every result is the same on every rank for MIN and MAX whatever order the
 * algorithm combines contributions in (down to the bits, NaN and signed zeros
 * included); integer SUM and PROD are exact modulo 2^bits, so they are too.
 * Floating-point SUM and PROD are correctly rounded per step, so their result
 * depends on the combining order, as in every MPI and NCCL.
 *
 * None of these functions blocks, fails or touches anything but the arrays
 * it is given. Arrays of different arguments must not overlap.
 */
#ifndef XPI_COLL_REDUCE_H
#define XPI_COLL_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "xport/xport.h"

/* The type a collective over @dt computes and sends in: XP_FLOAT32 for
 * XP_FLOAT16 and XP_BFLOAT16, @dt itself otherwise. */
xp_dtype_t xpi_reduce_work_type(xp_dtype_t dt);

/*
 * acc[i] = acc[i] (op) in[i] for i < @count, in the work type @work (any type
 * but XP_FLOAT16 and XP_BFLOAT16: callers convert first; a debug build
 * asserts). XP_AVG reduces as XP_SUM; xpi_reduce_avg_finish() divides.
 *
 *  - Integers: SUM and PROD wrap modulo 2^bits (computed in the unsigned
 *    type: no signed overflow). MIN and MAX compare as the signed or
 *    unsigned type says.
 *  - Floats, SUM and PROD: IEEE addition and multiplication in the current
 *    rounding mode (to nearest even unless the program changed it). A NaN
 *    operand gives a NaN.
 *  - Floats, MIN and MAX (IEEE 754-2019 minimum and maximum, not C's fmin):
 *    if either operand is a NaN, the result is the default quiet NaN
 *    (+0x7fc00000, +0x7ff8000000000000), whatever the NaNs' payloads. -0.0 is
 *    below +0.0: min(-0, +0) = -0, max(-0, +0) = +0. Otherwise the smaller or
 *    larger value. Why: a NaN in training data must not vanish (fmin would
 *    drop it), and every rank must get the same bits whatever the order the
 *    algorithm combines in. Keeping "the first NaN seen" or letting x86's
 *    minps pick an operand would make the payload, or the sign of a zero,
 *    depend on that order; one canonical NaN and an order on the zeros make
 *    the operation commutative and associative down to the bits.
 *
 * @acc and @in must not overlap. No alignment beyond the element type's is
 * needed.
 */
void xpi_reduce(void *restrict acc, const void *restrict in, size_t count, xp_dtype_t work,
		xp_op_t op);
/* The same, out[i] = one[i] (op) two[i]: the first operand read from
 * elsewhere, which saves copying it into @out first. No two overlap. */
void xpi_reduce3(void *restrict out, const void *restrict one, const void *restrict two,
		 size_t count, xp_dtype_t work, xp_op_t op);

/*
 * XP_AVG's last step: acc[i] /= @nranks (> 0) for i < @count, in the work
 * type @work. Integers: truncated toward zero (C's division; -7 / 2 = -3),
 * which cannot overflow since @nranks > 0. Floats: one correctly rounded
 * division by (float or double)@nranks.
 */
void xpi_reduce_avg_finish(void *acc, size_t count, xp_dtype_t work, int nranks);

/*
 * Conversions between the 16-bit float types and float32, @n elements from
 * @in to @out (which must not overlap). Widening is exact. Narrowing rounds
 * to nearest, ties to even, overflows to +-infinity and gives subnormals
 * where the narrow type has them. A NaN stays a NaN of the same sign, made
 * quiet, keeping the payload's upper bits that fit. Narrowing to float16
 * assumes the default rounding mode (to nearest even), as the kernels above
 * do; the bit patterns of the other results do not depend on it.
 */
void xpi_f16_to_f32(float *restrict out, const uint16_t *restrict in, size_t n);
void xpi_f32_to_f16(uint16_t *restrict out, const float *restrict in, size_t n);
void xpi_bf16_to_f32(float *restrict out, const uint16_t *restrict in, size_t n);
void xpi_f32_to_bf16(uint16_t *restrict out, const float *restrict in, size_t n);

#endif
