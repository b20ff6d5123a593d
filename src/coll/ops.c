/* SPDX-License-Identifier: MIT */
/*
 * The reductions (allreduce, reduce, reduce_scatter): argument checks,
 * the working type (float16 and bfloat16 are reduced in float32 and
 * rounded once at the end) and the choice of algorithm.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/compiler.h"
#include "../core/log.h"
#include "coll.h"
#include "reduce.h"

int xpi_coll_bad(const char *call, const xp_comm_t *comm, const char *what)
{
	if (comm == NULL)
		return xpi_fail(-EINVAL, "%s: %s", call, what);
	return xpi_fail(-EINVAL, "rank %d: %s on communicator %u: %s", comm->ctx->rank, call,
			comm->id, what);
}

int xpi_coll_check(const char *call, const xp_comm_t *comm, size_t count, xp_dtype_t dt)
{
	if (comm == NULL)
		return xpi_coll_bad(call, comm, "no communicator (NULL)");
	if ((unsigned)dt >= XP_DTYPE_COUNT)
		return xpi_coll_bad(call, comm, "not an xp_dtype_t");
	if (count > XP_MSG_MAX / xp_dtype_size(dt) / (size_t)comm->size)
		return xpi_coll_bad(call, comm, "count beyond XP_MSG_MAX bytes");
	return 0;
}

static void combine_kernel(void *acc, const void *in, size_t count, const struct xpi_combine *how)
{
	xpi_reduce(acc, in, count, (xp_dtype_t)how->dtype,
		   how->op == XP_AVG ? XP_SUM : (xp_op_t)how->op);
}

/* ---------------------------------------------------------------------- */

/* The vector to reduce, in the working type: @recvbuf itself when that
 * is the working type, else a float32 copy. */
struct work {
	void *buf;
	bool owned;
	xp_dtype_t type;
};

static int work_begin(struct work *w, const char *call, const xp_comm_t *comm, const void *src,
		      void *dst, size_t count, xp_dtype_t dt)
{
	w->type = xpi_reduce_work_type(dt);
	w->owned = w->type != dt || dst == NULL;
	if (!w->owned) {
		w->buf = dst;
		if (src != XP_IN_PLACE && src != dst && count > 0)
			memcpy(dst, src, count * xp_dtype_size(dt));
		return 0;
	}
	w->buf = malloc(count * xp_dtype_size(w->type) + 1);
	if (w->buf == NULL)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for the working copy",
				comm->ctx->rank, call);
	const void *in = src == XP_IN_PLACE ? dst : src;
	if (dt == XP_FLOAT16)
		xpi_f16_to_f32(w->buf, in, count);
	else if (dt == XP_BFLOAT16)
		xpi_bf16_to_f32(w->buf, in, count);
	else
		memcpy(w->buf, in, count * xp_dtype_size(dt));
	return 0;
}

/* @count elements of the working type at @src to @dst in type @dt: the
 * one rounding of float16 and bfloat16. */
static void from_work(void *dst, const void *src, size_t count, xp_dtype_t dt)
{
	if (dt == XP_FLOAT16)
		xpi_f32_to_f16(dst, src, count);
	else if (dt == XP_BFLOAT16)
		xpi_f32_to_bf16(dst, src, count);
	else if (count > 0)
		memcpy(dst, src, count * xp_dtype_size(dt));
}

/* Writes the result to @dst (unless NULL) in the program's type. */
static void work_end(struct work *w, void *dst, size_t count, xp_dtype_t dt, int rc)
{
	if (!w->owned)
		return;
	if (rc == 0 && dst != NULL)
		from_work(dst, w->buf, count, dt);
	free(w->buf);
}

static int check_reduction(const char *call, const xp_comm_t *comm, const void *sendbuf,
			   const void *recvbuf, size_t count, xp_dtype_t dt, xp_op_t op,
			   bool recv_needed)
{
	int rc = xpi_coll_check(call, comm, count, dt);
	if (rc < 0)
		return rc;
	if ((unsigned)op >= XP_OP_COUNT)
		return xpi_coll_bad(call, comm, "not an xp_op_t");
	if (count > 0 && (sendbuf == NULL || (recv_needed && recvbuf == NULL)))
		return xpi_coll_bad(call, comm, "NULL buffer");
	if (sendbuf == XP_IN_PLACE && recvbuf == NULL)
		return xpi_coll_bad(call, comm, "XP_IN_PLACE with no receive buffer");
	return 0;
}

XPI_EXPORT int xp_allreduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			    xp_dtype_t dtype, xp_op_t op)
{
	int rc = check_reduction("xp_allreduce", comm, sendbuf, recvbuf, count, dtype, op, true);
	if (rc < 0)
		return rc;
	struct work w;
	rc = work_begin(&w, "xp_allreduce", comm, sendbuf, recvbuf, count, dtype);
	if (rc < 0)
		return rc;
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_ALLREDUCE, "xp_allreduce");
	struct xpi_combine how = { combine_kernel, xp_dtype_size(w.type), w.type, op };
	size_t bytes = count * how.elem;
	struct xpi_allreduce_plan plan;
	xpi_allreduce_choose(comm, bytes, count, &plan);
	if (xpi_debug_on("coll"))
		xpi_log(XPI_LOG_DEBUG,
			"rank %d: xp_allreduce of %zu B on communicator %u (%d ranks, %d hosts): %s "
			"(%s; model: recursive doubling %.1f us, ring %.1f us, hierarchical %.1f us)",
			comm->rank, bytes, comm->id, comm->size, comm->nhosts,
			xpi_allreduce_algo_name(plan.algo),
			plan.forced ? "XP_ALLREDUCE_ALGO" : "chosen", plan.t_rd_ns / 1000,
			plan.t_ring_ns / 1000, plan.t_hier_ns / 1000);
	if (plan.algo == XP_ALLREDUCE_RING)
		rc = xpi_allreduce_ring(&c, w.buf, count, &how);
	else if (plan.algo == XP_ALLREDUCE_HIERARCHICAL)
		rc = xpi_allreduce_hierarchical(&c, w.buf, count, &how, plan.across);
	else
		rc = xpi_allreduce_recursive_doubling(&c, w.buf, count, &how);
	if (rc == 0 && op == XP_AVG)
		xpi_reduce_avg_finish(w.buf, count, w.type, comm->size);
	work_end(&w, recvbuf, count, dtype, rc);
	return rc;
}

XPI_EXPORT int xp_reduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			 xp_dtype_t dtype, xp_op_t op, int root)
{
	int rc = xpi_coll_check("xp_reduce", comm, count, dtype);
	if (rc < 0)
		return rc;
	if (root < 0 || root >= comm->size)
		return xpi_coll_bad("xp_reduce", comm,
				    "the root is not a rank of the communicator");
	bool at_root = comm->rank == root;
	rc = check_reduction("xp_reduce", comm, sendbuf, recvbuf, count, dtype, op, at_root);
	if (rc < 0)
		return rc;
	if (op == XP_AVG)
		return xpi_coll_bad("xp_reduce", comm,
				    "XP_AVG is for xp_allreduce and reduce_scatter");
	struct work w;
	/* Away from the root the result is not kept: work in a copy. */
	rc = work_begin(&w, "xp_reduce", comm, sendbuf, at_root ? recvbuf : NULL, count, dtype);
	if (rc < 0)
		return rc;
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_REDUCE, "xp_reduce");
	struct xpi_combine how = { combine_kernel, xp_dtype_size(w.type), w.type, op };
	rc = xpi_reduce_binomial(&c, w.buf, count, &how, root);
	work_end(&w, at_root ? recvbuf : NULL, count, dtype, rc);
	return rc;
}

XPI_EXPORT int xp_reduce_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
				 xp_dtype_t dtype, xp_op_t op)
{
	int rc = check_reduction("xp_reduce_scatter", comm, sendbuf, recvbuf, count, dtype, op,
				 true);
	if (rc < 0)
		return rc;
	int p = comm->size, r = comm->rank;
	size_t total = count * (size_t)p;
	/* The whole input in the working type, always a copy: the ring
	 * writes partial results over it. */
	struct work w;
	const void *in = sendbuf == XP_IN_PLACE ? recvbuf : sendbuf;
	rc = work_begin(&w, "xp_reduce_scatter", comm, in, NULL, total, dtype);
	if (rc < 0)
		return rc;
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_REDUCE_SCATTER, "xp_reduce_scatter");
	struct xpi_combine how = { combine_kernel, xp_dtype_size(w.type), w.type, op };
	rc = xpi_reduce_scatter_ring(&c, w.buf, count, &how);
	uint8_t *mine = (uint8_t *)w.buf + (size_t)r * count * how.elem;
	if (rc == 0 && op == XP_AVG)
		xpi_reduce_avg_finish(mine, count, w.type, p);
	if (rc == 0)
		from_work(recvbuf, mine, count, dtype);
	work_end(&w, NULL, total, dtype, rc);
	return rc;
}

XPI_EXPORT int xp_allreduce_algo_get(xp_comm_t *comm, size_t count, xp_dtype_t dtype,
				     const char **name)
{
	int rc = xpi_coll_check("xp_allreduce_algo_get", comm, count, dtype);
	if (rc < 0)
		return rc;
	if (name == NULL)
		return xpi_coll_bad("xp_allreduce_algo_get", comm, "the name pointer is NULL");
	struct xpi_allreduce_plan plan;
	xp_dtype_t work = xpi_reduce_work_type(dtype);
	xpi_allreduce_choose(comm, count * xp_dtype_size(work), count, &plan);
	*name = xpi_allreduce_algo_name(plan.algo);
	return plan.algo;
}
