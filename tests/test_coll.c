/* SPDX-License-Identifier: MIT */
/*
 * Collectives and communicators against references this test computes:
 * every operation x type x operator at 1 to 8 ranks (odd counts of ranks
 * included), in place and not, at sizes that take each allreduce
 * algorithm; dup and split (MPI's order: key, then old rank); collectives
 * running while the program's own receives with XP_ANY_SOURCE and a zero
 * mask wait on the same communicators (they must not match); many
 * requests (waitall, waitany, testsome).
 *
 * Run alone: in-process jobs of 1 to 8 ranks. Under a launcher (xprun -n
 * N, with XP_TRANSPORTS=shm or tcp): this process is one rank and the same
 * checks run across processes.
 *
 * The data-moving collectives (bcast, allgather, alltoall, gather,
 * scatter) run in every type too, with a value for every byte of every
 * block, compared bytewise.
 *
 * The reductions' inputs are small integers, so sums, products, minima
 * and maxima are exact in every type (float16 holds integers to 2048,
 * bfloat16 to 256) whatever order the algorithm combines in: the results
 * are compared exactly. Averages are not integers: compared with a tolerance of the
 * type's rounding, once (float16 and bfloat16 are reduced in float32).
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

/* ---------------------------------------------------------------------- */
/* Values in every type                                                   */

static float f16_to_float(uint16_t h)
{
	int e = (h >> 10) & 31, m = h & 1023;
	float v = e == 0 ? ldexpf((float)m, -24) : ldexpf((float)(m | 1024), e - 25);
	return (h & 0x8000) ? -v : v;
}

/* Exact for the small integers and the halves of them used here. */
static uint16_t float_to_f16(float f)
{
	if (f == 0)
		return signbit(f) ? 0x8000 : 0;
	uint16_t sign = f < 0 ? 0x8000 : 0;
	f = fabsf(f);
	int e;
	float m = frexpf(f, &e);             /* f = m * 2^e, m in [0.5, 1) */
	int mant = (int)lrintf(m * 2048.0f); /* 11 bits with the leading one */
	if (mant == 2048) {
		mant = 1024;
		e++;
	}
	return (uint16_t)(sign | (uint16_t)((e + 14) << 10) | (uint16_t)(mant & 1023));
}

static float bf16_to_float(uint16_t b)
{
	uint32_t u = (uint32_t)b << 16;
	float f;
	memcpy(&f, &u, 4);
	return f;
}

static uint16_t float_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, 4);
	return (uint16_t)(u >> 16); /* exact for the values used here */
}

/* Element @i of @buf of type @dt as a double, and back. */
static double get(const void *buf, xp_dtype_t dt, size_t i)
{
	switch (dt) {
	case XP_INT8:
		return ((const int8_t *)buf)[i];
	case XP_UINT8:
		return ((const uint8_t *)buf)[i];
	case XP_INT32:
		return ((const int32_t *)buf)[i];
	case XP_UINT32:
		return ((const uint32_t *)buf)[i];
	case XP_INT64:
		return (double)((const int64_t *)buf)[i];
	case XP_UINT64:
		return (double)((const uint64_t *)buf)[i];
	case XP_FLOAT16:
		return f16_to_float(((const uint16_t *)buf)[i]);
	case XP_BFLOAT16:
		return bf16_to_float(((const uint16_t *)buf)[i]);
	case XP_FLOAT32:
		return ((const float *)buf)[i];
	default:
		return ((const double *)buf)[i];
	}
}

static void put(void *buf, xp_dtype_t dt, size_t i, double v)
{
	switch (dt) {
	case XP_INT8:
		((int8_t *)buf)[i] = (int8_t)v;
		break;
	case XP_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)v;
		break;
	case XP_INT32:
		((int32_t *)buf)[i] = (int32_t)v;
		break;
	case XP_UINT32:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	case XP_INT64:
		((int64_t *)buf)[i] = (int64_t)v;
		break;
	case XP_UINT64:
		((uint64_t *)buf)[i] = (uint64_t)v;
		break;
	case XP_FLOAT16:
		((uint16_t *)buf)[i] = float_to_f16((float)v);
		break;
	case XP_BFLOAT16:
		((uint16_t *)buf)[i] = float_to_bf16((float)v);
		break;
	case XP_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	default:
		((double *)buf)[i] = v;
		break;
	}
}

static bool is_signed(xp_dtype_t dt)
{
	return dt != XP_UINT8 && dt != XP_UINT32 && dt != XP_UINT64;
}

static bool is_float(xp_dtype_t dt)
{
	return dt >= XP_FLOAT16;
}

/* Rank @r's element @i for operator @op: small integers whose reduction
 * over 8 ranks fits every type exactly (int8 products: values 1 and -1
 * or 2 at one rank only). */
static double input(int r, size_t i, xp_dtype_t dt, xp_op_t op)
{
	if (op == XP_PROD) {
		int v = ((size_t)r == i % 8) ? 2 : 1;
		return is_signed(dt) && (i + (size_t)r) % 3 == 0 ? -v : v;
	}
	int v = (int)((i * 7 + (size_t)r * 3) % 11); /* 0 to 10: 8 ranks sum to 80 */
	return is_signed(dt) && (i + (size_t)r) % 2 ? -v : v;
}

static double reference(int n, size_t i, xp_dtype_t dt, xp_op_t op)
{
	double acc = input(0, i, dt, op);
	for (int r = 1; r < n; r++) {
		double v = input(r, i, dt, op);
		switch (op) {
		case XP_SUM:
		case XP_AVG:
			acc += v;
			break;
		case XP_PROD:
			acc *= v;
			break;
		case XP_MIN:
			acc = v < acc ? v : acc;
			break;
		default:
			acc = v > acc ? v : acc;
			break;
		}
	}
	if (op == XP_AVG)
		acc = is_float(dt) ? acc / n : trunc(acc / n);
	return acc;
}

static double tolerance(xp_dtype_t dt, double want)
{
	double eps = dt == XP_FLOAT16  ? 1.0 / 1024 :
		     dt == XP_BFLOAT16 ? 1.0 / 128 :
		     dt == XP_FLOAT32  ? 1.0 / (1 << 23) :
					 1e-15;
	return fabs(want) * eps + 1e-30;
}

static const char *const type_names[] = { "int8",   "uint8",   "int32",    "uint32",  "int64",
					  "uint64", "float16", "bfloat16", "float32", "float64" };
static const char *const op_names[] = { "sum", "prod", "min", "max", "avg" };

/* ---------------------------------------------------------------------- */
/* The checks, run by every rank of a job                                 */

static void check_result(const char *what, xp_comm_t *comm, const void *got, size_t count,
			 xp_dtype_t dt, xp_op_t op)
{
	int n = xp_comm_size(comm);
	for (size_t i = 0; i < count; i++) {
		double want = reference(n, i, dt, op), have = get(got, dt, i);
		bool ok = op == XP_AVG && is_float(dt) ? fabs(have - want) <= tolerance(dt, want) :
							 have == want;
		if (!ok)
			T_FAIL("rank %d of %d: %s %s %s count %zu: element %zu is %g, want %g",
			       xp_comm_rank(comm), n, what, type_names[dt], op_names[op], count, i,
			       have, want);
	}
}

static void check_allreduce(xp_comm_t *comm, size_t count, xp_dtype_t dt, xp_op_t op, bool in_place)
{
	size_t es = xp_dtype_size(dt);
	uint8_t *in = malloc(count * es + 1), *out = malloc(count * es + 1);
	T_CHECK(in != NULL && out != NULL);
	int r = xp_comm_rank(comm);
	for (size_t i = 0; i < count; i++)
		put(in, dt, i, input(r, i, dt, op));
	if (in_place) {
		memcpy(out, in, count * es);
		T_OK(xp_allreduce(comm, XP_IN_PLACE, out, count, dt, op));
	} else {
		memset(out, 0x5a, count * es);
		T_OK(xp_allreduce(comm, in, out, count, dt, op));
		for (size_t i = 0; i < count; i++) /* the send buffer is only read */
			T_CHECK(get(in, dt, i) == input(r, i, dt, op));
	}
	check_result(in_place ? "allreduce in place" : "allreduce", comm, out, count, dt, op);
	free(in);
	free(out);
}

static void check_allreduce_with(xp_comm_t *comm, size_t count, xp_dtype_t dt, xp_op_t op, int algo)
{
	size_t es = xp_dtype_size(dt);
	uint8_t *in = malloc(count * es + 1), *out = malloc(count * es + 1);
	int r = xp_comm_rank(comm);
	for (size_t i = 0; i < count; i++)
		put(in, dt, i, input(r, i, dt, op));
	T_OK(xp_allreduce_with(comm, in, out, count, dt, op, algo));
	check_result("allreduce_with", comm, out, count, dt, op);
	xp_request_t *req;
	memcpy(out, in, count * es);
	T_OK(xp_iallreduce_with(comm, XP_IN_PLACE, out, count, dt, op, algo, &req));
	T_OK(xp_wait(&req, XP_TIMEOUT_DEFAULT, NULL));
	check_result("iallreduce_with in place", comm, out, count, dt, op);
	T_EQ(xp_allreduce_with(comm, in, out, count, dt, op, 99), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_allreduce_algo");
	free(in);
	free(out);
}

static void check_reduce(xp_comm_t *comm, size_t count, xp_dtype_t dt, xp_op_t op, int root)
{
	size_t es = xp_dtype_size(dt);
	uint8_t *in = malloc(count * es + 1), *out = malloc(count * es + 1);
	int r = xp_comm_rank(comm);
	for (size_t i = 0; i < count; i++)
		put(in, dt, i, input(r, i, dt, op));
	T_OK(xp_reduce(comm, in, r == root ? out : NULL, count, dt, op, root));
	if (r == root)
		check_result("reduce", comm, out, count, dt, op);
	free(in);
	free(out);
}

/*
 * The data-moving collectives carry every type as bytes. Byte @b of element @i of the block member @from gives member @to (-1:
 * every member), in type @dt of @es bytes. Consecutive bytes differ (131
 * is odd: 256 bytes before one repeats), and the block's members and the
 * type shift them all, so a byte misplaced, an element of another size or
 * a block from or for another member shows.
 */
static uint8_t pattern(xp_dtype_t dt, size_t es, int from, int to, size_t i, size_t b)
{
	return (uint8_t)((i * es + b) * 131 + (size_t)from * 37 + (size_t)(to + 1) * 59 +
			 (size_t)dt * 17);
}

static void fill(uint8_t *buf, size_t count, xp_dtype_t dt, int from, int to)
{
	size_t es = xp_dtype_size(dt);
	for (size_t i = 0; i < count; i++)
		for (size_t b = 0; b < es; b++)
			buf[i * es + b] = pattern(dt, es, from, to, i, b);
}

/* Fails naming @what unless @buf holds fill()'s block (@from, @to). */
static void expect(const char *what, xp_comm_t *comm, const uint8_t *buf, size_t count,
		   xp_dtype_t dt, int from, int to)
{
	size_t es = xp_dtype_size(dt);
	for (size_t k = 0; k < count * es; k++)
		if (buf[k] != pattern(dt, es, from, to, k / es, k % es))
			T_FAIL("rank %d of %d: %s %s count %zu, block of %d for %d: element %zu "
			       "byte %zu is 0x%02x, want 0x%02x",
			       xp_comm_rank(comm), xp_comm_size(comm), what, type_names[dt], count,
			       from, to, k / es, k % es, buf[k],
			       pattern(dt, es, from, to, k / es, k % es));
}

static void check_bcast_allgather_of(xp_comm_t *comm, size_t count, xp_dtype_t dt)
{
	int n = xp_comm_size(comm), r = xp_comm_rank(comm);
	size_t bytes = count * xp_dtype_size(dt);
	uint8_t *buf = malloc(bytes + 1), *all = malloc((size_t)n * bytes + 1);
	T_CHECK(buf != NULL && all != NULL);
	for (int root = 0; root < n; root++) {
		if (r == root)
			fill(buf, count, dt, root, -1);
		else
			memset(buf, 0xff, bytes);
		T_OK(xp_bcast(comm, buf, count, dt, root));
		expect("bcast", comm, buf, count, dt, root, -1);
	}
	fill(buf, count, dt, r, -1);
	for (int in_place = 0; in_place < 2; in_place++) {
		memset(all, 0xff, (size_t)n * bytes);
		if (in_place)
			memcpy(all + (size_t)r * bytes, buf, bytes);
		T_OK(xp_allgather(comm, in_place ? XP_IN_PLACE : buf, all, count, dt));
		for (int q = 0; q < n; q++)
			expect(in_place ? "allgather in place" : "allgather", comm,
			       all + (size_t)q * bytes, count, dt, q, -1);
	}
	free(buf);
	free(all);
}

static void check_bcast_allgather(xp_comm_t *comm, size_t count)
{
	for (int dt = 0; dt < XP_DTYPE_COUNT; dt++)
		check_bcast_allgather_of(comm, count, (xp_dtype_t)dt);
}

static void check_reduce_scatter(xp_comm_t *comm, size_t count, xp_dtype_t dt, xp_op_t op,
				 bool in_place)
{
	int n = xp_comm_size(comm), r = xp_comm_rank(comm);
	size_t es = xp_dtype_size(dt), total = count * (size_t)n;
	uint8_t *in = malloc(total * es + 1), *out = malloc(total * es + 1);
	for (size_t i = 0; i < total; i++)
		put(in, dt, i, input(r, i, dt, op));
	if (in_place) {
		memcpy(out, in, total * es);
		T_OK(xp_reduce_scatter(comm, XP_IN_PLACE, out, count, dt, op));
	} else {
		T_OK(xp_reduce_scatter(comm, in, out, count, dt, op));
	}
	for (size_t i = 0; i < count; i++) {
		size_t g = (size_t)r * count + i;
		double want = reference(n, g, dt, op), have = get(out, dt, i);
		bool ok = op == XP_AVG && is_float(dt) ? fabs(have - want) <= tolerance(dt, want) :
							 have == want;
		if (!ok)
			T_FAIL("rank %d of %d: reduce_scatter %s %s count %zu: element %zu is %g, "
			       "want %g",
			       r, n, type_names[dt], op_names[op], count, i, have, want);
	}
	free(in);
	free(out);
}

/* alltoall, gather, scatter: the block from q to r holds fill()'s (q, r). */
static void check_personalised_of(xp_comm_t *comm, size_t count, xp_dtype_t dt)
{
	int n = xp_comm_size(comm), r = xp_comm_rank(comm);
	size_t bytes = count * xp_dtype_size(dt), total = (size_t)n * bytes;
	uint8_t *in = malloc(total + 1), *out = malloc(total + 1);
	T_CHECK(in != NULL && out != NULL);
	for (int in_place = 0; in_place < 2; in_place++) {
		for (int q = 0; q < n; q++)
			fill(in + (size_t)q * bytes, count, dt, r, q);
		if (in_place) {
			memcpy(out, in, total);
			T_OK(xp_alltoall(comm, XP_IN_PLACE, out, count, dt));
		} else {
			memset(out, 0xff, total);
			T_OK(xp_alltoall(comm, in, out, count, dt));
		}
		for (int q = 0; q < n; q++)
			expect(in_place ? "alltoall in place" : "alltoall", comm,
			       out + (size_t)q * bytes, count, dt, q, r);
	}
	for (int root = 0; root < n; root++) {
		fill(in, count, dt, r, root);
		memset(out, 0xff, total);
		bool in_place = root % 2 == 1 && r == root;
		if (in_place)
			memcpy(out + (size_t)r * bytes, in, bytes);
		T_OK(xp_gather(comm, in_place ? XP_IN_PLACE : in, r == root ? out : NULL, count, dt,
			       root));
		if (r == root)
			for (int q = 0; q < n; q++)
				expect(in_place ? "gather in place" : "gather", comm,
				       out + (size_t)q * bytes, count, dt, q, root);
		for (int q = 0; q < n; q++)
			fill(in + (size_t)q * bytes, count, dt, root, q);
		memset(out, 0xff, bytes + 1);
		if (in_place) {
			T_OK(xp_scatter(comm, in, XP_IN_PLACE, count, dt, root));
			expect("scatter in place", comm, in + (size_t)r * bytes, count, dt, root,
			       r);
		} else {
			T_OK(xp_scatter(comm, r == root ? in : NULL, out, count, dt, root));
			expect("scatter", comm, out, count, dt, root, r);
			T_EQ(out[bytes], 0xff); /* nothing beyond the block */
		}
	}
	free(in);
	free(out);
}

static void check_personalised(xp_comm_t *comm, size_t count)
{
	for (int dt = 0; dt < XP_DTYPE_COUNT; dt++)
		check_personalised_of(comm, count, (xp_dtype_t)dt);
}

/* Every type and operator at sizes that take both algorithms. */
static void check_reductions(xp_comm_t *comm)
{
	static const size_t counts[] = { 0, 1, 7, 1000 };
	for (int dt = 0; dt < XP_DTYPE_COUNT; dt++) {
		for (int op = 0; op < XP_OP_COUNT; op++) {
			for (size_t k = 0; k < sizeof(counts) / sizeof(counts[0]); k++) {
				check_allreduce(comm, counts[k], (xp_dtype_t)dt, (xp_op_t)op,
						k % 2 == 0);
				check_reduce_scatter(comm, counts[k], (xp_dtype_t)dt, (xp_op_t)op,
						     k % 2 == 1);
				if (op != XP_AVG)
					check_reduce(comm, counts[k], (xp_dtype_t)dt, (xp_op_t)op,
						     (int)(k % (size_t)xp_comm_size(comm)));
			}
		}
		/* Each algorithm asked for by the call itself, blocking and not,
		 * in place and not: at fewer elements than ranks (Rabenseifner's
		 * empty blocks, the ring's fallback) and at small and ring sizes. */
		for (int algo = XP_ALLREDUCE_RECURSIVE_DOUBLING; algo < XP_ALLREDUCE_ALGO_COUNT;
		     algo++) {
			check_allreduce_with(comm, dt % 2 ? 1 : 7, (xp_dtype_t)dt, XP_SUM, algo);
			check_allreduce_with(comm, dt % 2 ? 33 : 5003, (xp_dtype_t)dt, XP_SUM,
					     algo);
		}
		/* Every operator on a large odd count, 5003 or 20011 by turns
		 * (each operator gets both over the types; checking the results
		 * costs more than the allreduces): the ring or Rabenseifner, as
		 * the cost model (20011 elements of 4 bytes and more are beyond
		 * 64 KiB) or XP_ALLREDUCE_ALGO says. */
		for (int op = 0; op < XP_OP_COUNT; op++)
			check_allreduce(comm, (dt + op) % 2 ? 5003 : 20011, (xp_dtype_t)dt,
					(xp_op_t)op, (dt + op) % 4 < 2);
	}
	/* Several of shared memory's 1 MiB chunks, the last one short; many
	 * ring segments. */
	check_allreduce(comm, 300007, XP_FLOAT64, XP_SUM, false);
	check_allreduce(comm, 300007, XP_INT32, XP_MAX, true);
}

/* Split by parity, ordered by descending old rank (key = -rank). */
static void check_split(xp_comm_t *world)
{
	int n = xp_comm_size(world), r = xp_comm_rank(world);
	xp_comm_t *half, *none, *dup;
	T_OK(xp_comm_split(world, r % 2, -r, &half));
	int want_size = (n - r % 2 + 1) / 2;
	T_EQ(xp_comm_size(half), want_size);
	/* Ranks of my parity above me come first. */
	int above = 0;
	for (int q = r + 1; q < n; q++)
		above += q % 2 == r % 2;
	T_EQ(xp_comm_rank(half), above);
	T_OK(xp_comm_split(world, r == 0 ? 0 : XP_UNDEFINED, 0, &none));
	T_CHECK((r == 0) == (none != NULL));
	if (none != NULL)
		T_EQ(xp_comm_size(none), 1);
	T_OK(xp_comm_dup(world, &dup));
	T_EQ(xp_comm_size(dup), n);
	T_EQ(xp_comm_rank(dup), r);

	/* The program's receives, any source and any tag, on every one of
	 * them: the collectives below must not feed them. */
	xp_request_t *user[3];
	int ubuf[3];
	T_OK(xp_irecv(world, &ubuf[0], sizeof(int), XP_ANY_SOURCE, 0, XP_TAG_ANY, &user[0]));
	T_OK(xp_irecv(half, &ubuf[1], sizeof(int), XP_ANY_SOURCE, 0, XP_TAG_ANY, &user[1]));
	T_OK(xp_irecv(dup, &ubuf[2], sizeof(int), XP_ANY_SOURCE, 0, XP_TAG_ANY, &user[2]));

	check_allreduce(half, 100, XP_INT32, XP_SUM, false);
	check_allreduce(dup, 100, XP_FLOAT32, XP_MAX, true);
	check_bcast_allgather(half, 5);
	if (none != NULL)
		check_allreduce(none, 10, XP_INT64, XP_SUM, false);
	T_OK(xp_barrier(dup));
	size_t idx[3];
	xp_status_t early[3];
	int done = xp_testsome(3, user, idx, early);
	for (int k = 0; k < done; k++) /* nothing of the collectives matched */
		T_FAIL("rank %d: the program's receive %zu completed with %d (%s) from rank %d "
		       "tag 0x%llx, %zu bytes",
		       r, idx[k], early[k].error, xp_error_detail(), early[k].source,
		       (unsigned long long)early[k].tag, early[k].length);

	T_OK(xp_barrier(world)); /* every rank has looked before anyone sends */

	/* Now the program's own messages, with tags the collectives used:
	 * each receive gets exactly its one, from its communicator. */
	xp_comm_t *comms[3] = { world, half, dup };
	for (int k = 0; k < 3; k++) {
		int to = (xp_comm_rank(comms[k]) + 1) % xp_comm_size(comms[k]);
		int v = 1000 * k + r;
		T_OK(xp_send(comms[k], &v, sizeof(v), to, 0));
	}
	xp_status_t st[3];
	T_OK(xp_waitall(3, user, XP_TIMEOUT_DEFAULT, st));
	for (int k = 0; k < 3; k++) {
		int m = xp_comm_size(comms[k]);
		int from = (xp_comm_rank(comms[k]) + m - 1) % m;
		T_EQ(st[k].source, from); /* the sender's rank in that communicator */
		T_CHECK(ubuf[k] / 1000 == k);
	}
	xp_comm_free(half);
	xp_comm_free(none);
	xp_comm_free(dup);
}

/* Many requests: a ring of sends and receives finished with waitany. */
static void check_many(xp_comm_t *world)
{
	int n = xp_comm_size(world), r = xp_comm_rank(world);
	enum { K = 16 };
	xp_request_t *reqs[2 * K];
	int in[K], out[K];
	for (int k = 0; k < K; k++) {
		out[k] = r * 100 + k;
		T_OK(xp_irecv(world, &in[k], sizeof(int), (r + n - 1) % n, (uint64_t)k,
			      XP_TAG_EXACT, &reqs[k]));
	}
	for (int k = 0; k < K; k++)
		T_OK(xp_isend(world, &out[k], sizeof(int), (r + 1) % n, (uint64_t)k, &reqs[K + k]));
	bool seen[2 * K] = { false };
	for (int got = 0; got < 2 * K; got++) {
		size_t i;
		T_OK(xp_waitany(2 * K, reqs, XP_TIMEOUT_DEFAULT, &i, NULL));
		T_CHECK(i < 2 * K && !seen[i] && reqs[i] == NULL);
		seen[i] = true;
	}
	size_t i;
	T_EQ(xp_waitany(2 * K, reqs, 0, &i, NULL), -EINVAL); /* all NULL now */
	for (int k = 0; k < K; k++)
		T_EQ(in[k], ((r + n - 1) % n) * 100 + k);
	T_OK(xp_waitall(0, NULL, 0, NULL));
}

/* Several nonblocking collectives in flight at once, on two
 * communicators, beside the program's own messages, finished in an order
 * that differs from rank to rank: each must complete right, and no rank
 * may wait for another that waits for something else. */
static void check_nonblocking(xp_comm_t *world)
{
	int n = xp_comm_size(world), r = xp_comm_rank(world);
	xp_comm_t *dup;
	T_OK(xp_comm_dup(world, &dup));
	enum { C1 = 1000, C2 = 20011, K = 6 };
	int32_t *a = malloc(C1 * 4), *b = malloc(C2 * 4), *g = malloc((size_t)n * 7 * 4);
	int32_t bc[5], mine[7], token = r, got = -1;
	for (size_t i = 0; i < C1; i++)
		a[i] = (int32_t)input(r, i, XP_INT32, XP_SUM);
	for (size_t i = 0; i < C2; i++)
		b[i] = (int32_t)input(r, i, XP_INT32, XP_MAX);
	for (int i = 0; i < 7; i++)
		mine[i] = r * 100 + i;
	for (int i = 0; i < 5; i++)
		bc[i] = r == n - 1 ? 77 + i : -1;
	xp_request_t *reqs[K + 2];
	T_OK(xp_iallreduce(world, XP_IN_PLACE, a, C1, XP_INT32, XP_SUM, &reqs[0]));
	T_OK(xp_iallreduce(dup, XP_IN_PLACE, b, C2, XP_INT32, XP_MAX, &reqs[1]));
	T_OK(xp_ibcast(dup, bc, 5, XP_INT32, n - 1, &reqs[2]));
	T_OK(xp_iallgather(world, mine, g, 7, XP_INT32, &reqs[3]));
	T_OK(xp_ibarrier(world, &reqs[4]));
	T_OK(xp_ibarrier(dup, &reqs[5]));
	T_OK(xp_irecv(world, &got, 4, (r + n - 1) % n, 5, XP_TAG_EXACT, &reqs[6]));
	T_OK(xp_isend(world, &token, 4, (r + 1) % n, 5, &reqs[7]));
	T_EQ(xp_cancel(reqs[0]), -EINVAL); /* collectives cannot be cancelled */
	if (r % 3 == 0) {
		T_OK(xp_waitall(K + 2, reqs, XP_TIMEOUT_DEFAULT, NULL));
	} else if (r % 3 == 1) {
		for (int k = K + 1; k >= 0; k--) /* the last posted first */
			T_OK(xp_wait(&reqs[k], XP_TIMEOUT_DEFAULT, NULL));
	} else {
		for (int k = 0; k < K + 2; k++) {
			size_t i;
			T_OK(xp_waitany(K + 2, reqs, XP_TIMEOUT_DEFAULT, &i, NULL));
		}
	}
	for (size_t i = 0; i < C1; i++)
		if (a[i] != (int32_t)reference(n, i, XP_INT32, XP_SUM))
			T_FAIL("rank %d: iallreduce sum element %zu is %d", r, i, a[i]);
	for (size_t i = 0; i < C2; i++)
		if (b[i] != (int32_t)reference(n, i, XP_INT32, XP_MAX))
			T_FAIL("rank %d: iallreduce max element %zu is %d", r, i, b[i]);
	for (int i = 0; i < 5; i++)
		T_EQ(bc[i], 77 + i);
	for (int q = 0; q < n; q++)
		for (int i = 0; i < 7; i++)
			T_EQ(g[q * 7 + i], q * 100 + i);
	T_EQ(got, (r + n - 1) % n);
	/* A collective tested to completion, as a polling program would. */
	xp_request_t *t;
	T_OK(xp_iallreduce(dup, XP_IN_PLACE, a, C1, XP_INT32, XP_MIN, &t));
	int rc;
	while ((rc = xp_test(&t, NULL)) == 0)
		;
	T_EQ(rc, 1);
	/* A blocking allreduce (over shared memory where it can: no
	 * messages) while a nonblocking one is under way on another
	 * communicator: the ranks that wait for the nonblocking one first
	 * need the others to progress it from inside their blocking call. */
	int32_t v[3] = { r, 2 * r, 3 * r }, sum = n * (n - 1) / 2;
	T_OK(xp_iallreduce(world, XP_IN_PLACE, v, 2, XP_INT32, XP_SUM, &t));
	if (r % 2 == 1)
		T_OK(xp_wait(&t, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_allreduce(dup, XP_IN_PLACE, v + 2, 1, XP_INT32, XP_SUM));
	if (r % 2 == 0)
		T_OK(xp_wait(&t, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(v[0], sum);
	T_EQ(v[1], 2 * sum);
	T_EQ(v[2], 3 * sum);
	/* Several nonblocking allreduces on one communicator at once, small
	 * and of several shared-memory chunks, waited for last first: they
	 * run in the order they were made, whatever the waits' order. */
	enum { BIG = 600001 };
	int32_t *big = malloc(BIG * 4), s1 = r, s2 = 10 * r;
	for (size_t i = 0; i < BIG; i++)
		big[i] = (int32_t)(i % 1000) * (r + 1);
	xp_request_t *three[3];
	T_OK(xp_iallreduce(world, XP_IN_PLACE, &s1, 1, XP_INT32, XP_SUM, &three[0]));
	T_OK(xp_iallreduce(world, XP_IN_PLACE, big, BIG, XP_INT32, XP_SUM, &three[1]));
	T_OK(xp_iallreduce(world, XP_IN_PLACE, &s2, 1, XP_INT32, XP_MAX, &three[2]));
	for (int k = 2; k >= 0; k--)
		T_OK(xp_wait(&three[k], XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(s1, sum);
	T_EQ(s2, 10 * (n - 1));
	for (size_t i = 0; i < BIG; i++)
		if (big[i] != (int32_t)(i % 1000) * (n * (n + 1) / 2))
			T_FAIL("rank %d: overlapping iallreduce element %zu is %d", r, i, big[i]);
	free(big);
	free(a);
	free(b);
	free(g);
	xp_comm_free(dup);
}

/*
 * Communicators made and freed many times over (more than the
 * shared-memory channels a rank has): each gets what the world gets
 * (shared memory on one host, whatever the model says elsewhere) and
 * right results, small and in chunks, while the one before it may still
 * be read by a slower member.
 */
static void check_comm_churn(xp_comm_t *world)
{
	int n = xp_comm_size(world), r = xp_comm_rank(world);
	const char *world_algo = "", *algo = "";
	T_CHECK(xp_allreduce_algo_get(world, 3, XP_INT64, &world_algo) > 0);
	size_t big = 300007;
	int64_t *v = malloc(big * sizeof(int64_t));
	for (int round = 0; round < 20; round++) {
		xp_comm_t *c;
		T_OK(xp_comm_dup(world, &c));
		size_t count = round % 2 ? big : 3;
		for (size_t i = 0; i < count; i++)
			v[i] = (int64_t)(r + round) * (int64_t)(i + 1);
		T_OK(xp_allreduce(c, XP_IN_PLACE, v, count, XP_INT64, XP_SUM));
		int64_t sum_r = (int64_t)n * (n - 1) / 2 + (int64_t)n * round;
		for (size_t i = 0; i < count; i++)
			if (v[i] != sum_r * (int64_t)(i + 1))
				T_FAIL("rank %d: churn round %d: element %zu is %lld, want %lld", r,
				       round, i, (long long)v[i],
				       (long long)(sum_r * (int64_t)(i + 1)));
		T_CHECK(xp_allreduce_algo_get(c, 3, XP_INT64, &algo) > 0);
		if (strcmp(algo, world_algo) != 0)
			T_FAIL("rank %d: churn round %d: a small allreduce is %s, on the world %s",
			       r, round, algo, world_algo);
		xp_comm_free(c);
	}
	free(v);
}

static int rank_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	xp_comm_t *world = xp_comm_world(ctx);
	T_OK(xp_barrier(world));
	check_bcast_allgather(world, 0);
	check_bcast_allgather(world, 33);
	check_personalised(world, 0);
	check_personalised(world, 9);
	check_reductions(world);
	check_split(world);
	check_many(world);
	check_nonblocking(world);
	check_comm_churn(world);
	T_OK(xp_barrier(world));
	return 0;
}

int main(int argc, char **argv)
{
	if (getenv("XP_RANK") != NULL) {
		int h = t_hosts_from_env();
		int size = atoi(getenv("XP_SIZE")), rank = atoi(getenv("XP_RANK"));
		xp_context_t *ctx;
		T_OK(xp_init(NULL, &ctx));
		const char *algo = "";
		int a = xp_allreduce_algo_get(xp_comm_world(ctx), 2, XP_FLOAT32, &algo);
		T_CHECK(a > 0);
		if (h > 1 && h < size && getenv("XP_ALLREDUCE_ALGO") == NULL) {
			/* Several hosts with several ranks each: the cost model
			 * must see them, and prefer one message per host across. */
			T_EQ(a, XP_ALLREDUCE_HIERARCHICAL);
			xp_route_t route;
			int peer = (rank + size / h) % size;
			T_OK(xp_route_get(ctx, peer, 8, &route));
			T_CHECK(strcmp(route.transport, "tcp") == 0); /* another "host" */
		}
		if (rank == 0)
			fprintf(stderr, "   small allreduce: %s\n", algo);
		rank_body(ctx, NULL);
		if (xp_rank(ctx) == 0)
			printf("coll: ok, %d processes\n", xp_size(ctx));
		xp_finalize(ctx);
		return 0;
	}
	int max = argc > 1 ? atoi(argv[1]) : 8;
	for (int n = 1; n <= max; n++) {
		T_OK(xp_local_run(n, NULL, rank_body, NULL));
		fprintf(stderr, "   %d in-process ranks: ok\n", n);
	}
	printf("coll: ok\n");
	return 0;
}
