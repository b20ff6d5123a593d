/* SPDX-License-Identifier: MIT */
/*
 * The reductions (allreduce, reduce, reduce_scatter), blocking and not:
 * argument checks, the working type (float16 and bfloat16 are reduced in
 * float32 and rounded to their own type once, at the end: reduce.h), the
 * choice of algorithm, and the schedule that runs it.
 */
#include <errno.h>
#include <math.h>
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

int xpi_coll_check_root(const char *call, const xp_comm_t *comm, size_t count, xp_dtype_t dt,
			int root)
{
	int rc = xpi_coll_check(call, comm, count, dt);
	if (rc == 0 && (root < 0 || root >= comm->size))
		rc = xpi_coll_bad(call, comm, "the root is not a rank of the communicator");
	return rc;
}

int xpi_coll_no_request(const char *call, const xp_comm_t *comm)
{
	return xpi_coll_bad(call, comm, "no place for the request (NULL)");
}

static void combine_kernel(void *acc, const void *in, size_t count, const struct xpi_combine *how)
{
	xpi_reduce(acc, in, count, (xp_dtype_t)how->dtype,
		   how->op == XP_AVG ? XP_SUM : (xp_op_t)how->op);
}

static void combine3_kernel(void *out, const void *one, const void *in, size_t count,
			    const struct xpi_combine *how)
{
	xpi_reduce3(out, one, in, count, (xp_dtype_t)how->dtype,
		    how->op == XP_AVG ? XP_SUM : (xp_op_t)how->op);
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

/* The last touches of a reduction: an average's division, then the result
 * in the program's type where it wants it (unless it is already there). */
static void reduction_finish(struct xpi_sched *s)
{
	if (s->fin.op == XP_AVG)
		xpi_reduce_avg_finish(s->fin.work, s->fin.count, (xp_dtype_t)s->how.dtype,
				      s->comm->size);
	if (s->fin.dst != NULL && s->fin.dst != s->fin.work)
		from_work(s->fin.dst, s->fin.work, s->fin.count, (xp_dtype_t)s->fin.dtype);
}

/*
 * The vector to reduce, in the working type: @dst itself when that is the
 * working type (the input copied there first unless in place), else a
 * float32 copy of the input in the schedule's scratch. Sets how and fin.
 * With @in_out not NULL, an input the algorithm can read where it is is
 * not copied: *@in_out says where (NULL: it is in the vector returned).
 */
static void *work_begin_src(struct xpi_sched *s, const void *src, void *dst, size_t count,
			    xp_dtype_t dt, xp_op_t op, const void **in_out)
{
	xp_dtype_t work = xpi_reduce_work_type(dt);
	s->how = (struct xpi_combine){ combine_kernel, combine3_kernel, xp_dtype_size(work), work,
				       op };
	s->finish = reduction_finish;
	s->fin.dst = dst;
	s->fin.count = count;
	s->fin.dtype = dt;
	s->fin.op = op;
	const void *in = src == XP_IN_PLACE ? dst : src;
	if (in_out != NULL)
		*in_out = NULL;
	if (work == dt && dst != NULL) {
		if (in != dst && count > 0 && in_out != NULL)
			*in_out = in;
		else if (in != dst && count > 0)
			memcpy(dst, in, count * xp_dtype_size(dt));
		s->fin.work = dst;
		return dst;
	}
	void *buf = xpi_sched_scratch(s, count * xp_dtype_size(work));
	if (buf == NULL)
		return NULL;
	if (dt == XP_FLOAT16)
		xpi_f16_to_f32(buf, in, count);
	else if (dt == XP_BFLOAT16)
		xpi_bf16_to_f32(buf, in, count);
	else if (count > 0)
		memcpy(buf, in, count * xp_dtype_size(dt));
	s->fin.work = buf;
	return buf;
}

static void *work_begin(struct xpi_sched *s, const void *src, void *dst, size_t count,
			xp_dtype_t dt, xp_op_t op)
{
	return work_begin_src(s, src, dst, count, dt, op, NULL);
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

/* @algo: the program's choice for this call, or XP_ALLREDUCE_AUTO. */
static int allreduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		     xp_dtype_t dtype, xp_op_t op, int algo, xp_request_t **req)
{
	const char *call = req != NULL ? "xp_iallreduce" : "xp_allreduce";
	int rc = check_reduction(call, comm, sendbuf, recvbuf, count, dtype, op, true);
	if (rc < 0)
		return rc;
	if (algo < XP_ALLREDUCE_AUTO || algo >= XP_ALLREDUCE_ALGO_COUNT)
		return xpi_coll_bad(call, comm, "not an enum xp_allreduce_algo");
	size_t bytes = count * xp_dtype_size(xpi_reduce_work_type(dtype));
	struct xpi_allreduce_plan plan;
	xpi_allreduce_choose(comm, bytes, count, &plan);
	if (algo != XP_ALLREDUCE_AUTO &&
	    (algo != XP_ALLREDUCE_SHARED_MEMORY || isfinite(plan.t_shm_ns))) {
		/* The call's own choice wins over the setting's; the ring needs
		 * a block per rank; shared memory, the members on one host (else
		 * the model chooses among the others). */
		plan.forced = true;
		plan.algo = algo == XP_ALLREDUCE_RING && count < (size_t)comm->size ?
				    XP_ALLREDUCE_RECURSIVE_DOUBLING :
				    algo;
	}
	if (xpi_debug_on("coll"))
		xpi_log(XPI_LOG_DEBUG,
			"rank %d: %s of %zu B on communicator %u (%d ranks, %d hosts): %s (%s; "
			"model: recursive doubling %.1f us, ring %.1f us, rabenseifner %.1f us, "
			"hierarchical %.1f us, shared memory %.1f us)",
			comm->rank, call, bytes, comm->id, comm->size, comm->nhosts,
			xpi_allreduce_algo_name(plan.algo),
			plan.forced ? "XP_ALLREDUCE_ALGO" : "chosen", plan.t_rd_ns / 1000,
			plan.t_ring_ns / 1000, plan.t_rab_ns / 1000, plan.t_hier_ns / 1000,
			plan.t_shm_ns / 1000);
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_ALLREDUCE, call);
	if (s == NULL)
		return -ENOMEM;
	/* The ring and shared memory read a separate input where it is: no
	 * copy into the result first (the ring's first reduction writes every
	 * block but one, which the allgather brings; shared memory copies in
	 * from the input and out into the result). */
	const void *src = NULL;
	bool reads_apart =
		plan.algo == XP_ALLREDUCE_RING || plan.algo == XP_ALLREDUCE_SHARED_MEMORY;
	void *buf =
		work_begin_src(s, sendbuf, recvbuf, count, dtype, op, reads_apart ? &src : NULL);
	if (buf == NULL)
		return xpi_coll_go(s, -ENOMEM, req);
	if (plan.algo == XP_ALLREDUCE_SHARED_MEMORY)
		rc = xpi_shmcoll_build(s, buf, src, count);
	else if (plan.algo == XP_ALLREDUCE_RING)
		rc = xpi_build_allreduce_ring(s, buf, src, count);
	else if (plan.algo == XP_ALLREDUCE_HIERARCHICAL)
		rc = xpi_build_allreduce_hierarchical(s, buf, count, plan.across);
	else if (plan.algo == XP_ALLREDUCE_RABENSEIFNER)
		rc = xpi_build_allreduce_rabenseifner(s, buf, count);
	else
		rc = xpi_build_allreduce_rd(s, buf, count);
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_allreduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			    xp_dtype_t dtype, xp_op_t op)
{
	return allreduce(comm, sendbuf, recvbuf, count, dtype, op, XP_ALLREDUCE_AUTO, NULL);
}

XPI_EXPORT int xp_allreduce_with(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
				 xp_dtype_t dtype, xp_op_t op, int algo)
{
	return allreduce(comm, sendbuf, recvbuf, count, dtype, op, algo, NULL);
}

XPI_EXPORT int xp_iallreduce_with(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
				  xp_dtype_t dtype, xp_op_t op, int algo, xp_request_t **req)
{
	if (req == NULL)
		return xpi_coll_no_request("xp_iallreduce", comm);
	return allreduce(comm, sendbuf, recvbuf, count, dtype, op, algo, req);
}

XPI_EXPORT int xp_iallreduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			     xp_dtype_t dtype, xp_op_t op, xp_request_t **req)
{
	if (req == NULL)
		return xpi_coll_no_request("xp_iallreduce", comm);
	return allreduce(comm, sendbuf, recvbuf, count, dtype, op, XP_ALLREDUCE_AUTO, req);
}

static int reduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		  xp_dtype_t dtype, xp_op_t op, int root, xp_request_t **req)
{
	const char *call = req != NULL ? "xp_ireduce" : "xp_reduce";
	int rc = xpi_coll_check_root(call, comm, count, dtype, root);
	if (rc < 0)
		return rc;
	bool at_root = comm->rank == root;
	rc = check_reduction(call, comm, sendbuf, recvbuf, count, dtype, op, at_root);
	if (rc < 0)
		return rc;
	if (op == XP_AVG)
		return xpi_coll_bad(call, comm, "XP_AVG is for allreduce and reduce_scatter");
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_REDUCE, call);
	if (s == NULL)
		return -ENOMEM;
	/* Away from the root the result is not kept: work in a copy. */
	void *buf = work_begin(s, sendbuf, at_root ? recvbuf : NULL, count, dtype, op);
	if (buf == NULL)
		return xpi_coll_go(s, -ENOMEM, req);
	rc = xpi_build_reduce_binomial(s, buf, count, root);
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_reduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			 xp_dtype_t dtype, xp_op_t op, int root)
{
	return reduce(comm, sendbuf, recvbuf, count, dtype, op, root, NULL);
}

XPI_EXPORT int xp_ireduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			  xp_dtype_t dtype, xp_op_t op, int root, xp_request_t **req)
{
	if (req == NULL)
		return xpi_coll_no_request("xp_ireduce", comm);
	return reduce(comm, sendbuf, recvbuf, count, dtype, op, root, req);
}

static int reduce_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			  xp_dtype_t dtype, xp_op_t op, xp_request_t **req)
{
	const char *call = req != NULL ? "xp_ireduce_scatter" : "xp_reduce_scatter";
	int rc = check_reduction(call, comm, sendbuf, recvbuf, count, dtype, op, true);
	if (rc < 0)
		return rc;
	int p = comm->size;
	size_t total = count * (size_t)p;
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_REDUCE_SCATTER, call);
	if (s == NULL)
		return -ENOMEM;
	/* The whole input in the working type, always a copy: the ring
	 * writes partial results over it. */
	const void *in = sendbuf == XP_IN_PLACE ? recvbuf : sendbuf;
	uint8_t *buf = work_begin(s, in, NULL, total, dtype, op);
	if (buf == NULL)
		return xpi_coll_go(s, -ENOMEM, req);
	/* What the finish turns into the result: this rank's block. */
	s->fin.work = buf + (size_t)comm->rank * count * s->how.elem;
	s->fin.dst = recvbuf;
	s->fin.count = count;
	rc = xpi_build_reduce_scatter_ring(s, buf, count);
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_reduce_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
				 xp_dtype_t dtype, xp_op_t op)
{
	return reduce_scatter(comm, sendbuf, recvbuf, count, dtype, op, NULL);
}

XPI_EXPORT int xp_ireduce_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
				  xp_dtype_t dtype, xp_op_t op, xp_request_t **req)
{
	if (req == NULL)
		return xpi_coll_no_request("xp_ireduce_scatter", comm);
	return reduce_scatter(comm, sendbuf, recvbuf, count, dtype, op, req);
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
