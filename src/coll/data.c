/* SPDX-License-Identifier: MIT */
/*
 * The collectives that move data without reducing it, blocking and not:
 * barrier, bcast, allgather, gather, scatter, alltoall.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/compiler.h"
#include "../core/log.h"
#include "coll.h"

/* The call's name, blocking or not. */
#define CALL(req, name) ((req) != NULL ? "xp_i" name : "xp_" name)

static int barrier(xp_comm_t *comm, xp_request_t **req)
{
	const char *call = CALL(req, "barrier");
	if (comm == NULL)
		return xpi_coll_bad(call, comm, "no communicator (NULL)");
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_BARRIER, call);
	if (s == NULL)
		return -ENOMEM;
	int p = comm->size, r = comm->rank, rc = 0;
	/* Dissemination: ceil(log2 p) rounds for any p. */
	unsigned step = 0;
	for (int k = 1; rc == 0 && k < p; k <<= 1, step++)
		rc = xpi_sched_sendrecv(s, step, (r + k) % p, NULL, 0, (r - k + p) % p, NULL, 0);
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_barrier(xp_comm_t *comm)
{
	return barrier(comm, NULL);
}

XPI_EXPORT int xp_ibarrier(xp_comm_t *comm, xp_request_t **req)
{
	return req != NULL ? barrier(comm, req) : xpi_coll_no_request("xp_ibarrier", comm);
}

static int bcast(xp_comm_t *comm, void *buf, size_t count, xp_dtype_t dtype, int root,
		 xp_request_t **req)
{
	const char *call = CALL(req, "bcast");
	int rc = xpi_coll_check_root(call, comm, count, dtype, root);
	if (rc < 0)
		return rc;
	if (buf == NULL && count > 0)
		return xpi_coll_bad(call, comm, "NULL buffer");
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_BCAST, call);
	if (s == NULL)
		return -ENOMEM;
	rc = xpi_build_bcast_binomial(s, buf, count * xp_dtype_size(dtype), root);
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_bcast(xp_comm_t *comm, void *buf, size_t count, xp_dtype_t dtype, int root)
{
	return bcast(comm, buf, count, dtype, root, NULL);
}

XPI_EXPORT int xp_ibcast(xp_comm_t *comm, void *buf, size_t count, xp_dtype_t dtype, int root,
			 xp_request_t **req)
{
	return req != NULL ? bcast(comm, buf, count, dtype, root, req) :
			     xpi_coll_no_request("xp_ibcast", comm);
}

static int allgather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		     xp_dtype_t dtype, xp_request_t **req)
{
	const char *call = CALL(req, "allgather");
	int rc = xpi_coll_check(call, comm, count, dtype);
	if (rc < 0)
		return rc;
	if (count > 0 && (recvbuf == NULL || sendbuf == NULL))
		return xpi_coll_bad(call, comm, "NULL buffer");
	int p = comm->size, r = comm->rank;
	size_t bytes = count * xp_dtype_size(dtype);
	uint8_t *out = recvbuf;
	if (sendbuf != XP_IN_PLACE && count > 0)
		memmove(out + (size_t)r * bytes, sendbuf, bytes);
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_ALLGATHER, call);
	if (s == NULL)
		return -ENOMEM;
	/* Ring: p - 1 steps, each passing on the block received last. */
	int right = (r + 1) % p, left = (r + p - 1) % p;
	for (int k = 0; rc == 0 && k < p - 1; k++) {
		int sb = (r - k + p) % p, rb = (r - k - 1 + p) % p;
		rc = xpi_sched_sendrecv(s, (unsigned)k, right, out + (size_t)sb * bytes, bytes,
					left, out + (size_t)rb * bytes, bytes);
	}
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_allgather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			    xp_dtype_t dtype)
{
	return allgather(comm, sendbuf, recvbuf, count, dtype, NULL);
}

XPI_EXPORT int xp_iallgather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			     xp_dtype_t dtype, xp_request_t **req)
{
	return req != NULL ? allgather(comm, sendbuf, recvbuf, count, dtype, req) :
			     xpi_coll_no_request("xp_iallgather", comm);
}

/* The root's one step of gather and scatter: a receive (or send) per
 * other rank, all at once. */
static int root_step(struct xpi_sched *s, uint8_t *blocks, size_t bytes, bool receive)
{
	int rc = xpi_sched_begin_step(s, 0);
	for (int q = 0; rc == 0 && q < s->comm->size; q++)
		if (q != s->comm->rank)
			rc = xpi_sched_add(s, q, !receive, blocks + (size_t)q * bytes, bytes);
	return rc;
}

static int gather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		  xp_dtype_t dtype, int root, xp_request_t **req)
{
	const char *call = CALL(req, "gather");
	int rc = xpi_coll_check_root(call, comm, count, dtype, root);
	if (rc < 0)
		return rc;
	bool at_root = comm->rank == root;
	if (count > 0 && (sendbuf == NULL || (at_root && recvbuf == NULL) ||
			  (!at_root && sendbuf == XP_IN_PLACE)))
		return xpi_coll_bad(call, comm, "NULL buffer, or XP_IN_PLACE away from the root");
	size_t bytes = count * xp_dtype_size(dtype);
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_GATHER, call);
	if (s == NULL)
		return -ENOMEM;
	if (!at_root) {
		rc = xpi_sched_sendrecv(s, 0, root, sendbuf, bytes, -1, NULL, 0);
	} else {
		uint8_t *out = recvbuf;
		if (sendbuf != XP_IN_PLACE && count > 0)
			memmove(out + (size_t)root * bytes, sendbuf, bytes);
		rc = comm->size > 1 ? root_step(s, out, bytes, true) : 0;
	}
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_gather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			 xp_dtype_t dtype, int root)
{
	return gather(comm, sendbuf, recvbuf, count, dtype, root, NULL);
}

XPI_EXPORT int xp_igather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			  xp_dtype_t dtype, int root, xp_request_t **req)
{
	return req != NULL ? gather(comm, sendbuf, recvbuf, count, dtype, root, req) :
			     xpi_coll_no_request("xp_igather", comm);
}

static int scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		   xp_dtype_t dtype, int root, xp_request_t **req)
{
	const char *call = CALL(req, "scatter");
	int rc = xpi_coll_check_root(call, comm, count, dtype, root);
	if (rc < 0)
		return rc;
	bool at_root = comm->rank == root;
	if (count > 0 && (recvbuf == NULL || (at_root && sendbuf == NULL)))
		return xpi_coll_bad(call, comm, "NULL buffer");
	size_t bytes = count * xp_dtype_size(dtype);
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_SCATTER, call);
	if (s == NULL)
		return -ENOMEM;
	if (!at_root) {
		rc = xpi_sched_sendrecv(s, 0, -1, NULL, 0, root, recvbuf, bytes);
	} else {
		const uint8_t *in = sendbuf;
		if (recvbuf != XP_IN_PLACE && count > 0)
			memmove(recvbuf, in + (size_t)root * bytes, bytes);
		rc = comm->size > 1 ? root_step(s, (uint8_t *)(uintptr_t)in, bytes, false) : 0;
	}
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			  xp_dtype_t dtype, int root)
{
	return scatter(comm, sendbuf, recvbuf, count, dtype, root, NULL);
}

XPI_EXPORT int xp_iscatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			   xp_dtype_t dtype, int root, xp_request_t **req)
{
	return req != NULL ? scatter(comm, sendbuf, recvbuf, count, dtype, root, req) :
			     xpi_coll_no_request("xp_iscatter", comm);
}

static int alltoall(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		    xp_dtype_t dtype, xp_request_t **req)
{
	const char *call = CALL(req, "alltoall");
	int rc = xpi_coll_check(call, comm, count, dtype);
	if (rc < 0)
		return rc;
	if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
		return xpi_coll_bad(call, comm, "NULL buffer");
	int p = comm->size, r = comm->rank;
	size_t bytes = count * xp_dtype_size(dtype);
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_ALLTOALL, call);
	if (s == NULL)
		return -ENOMEM;
	const uint8_t *in = sendbuf;
	uint8_t *out = recvbuf;
	if (sendbuf == XP_IN_PLACE && count > 0) {
		/* The blocks to send are overwritten as blocks arrive. */
		uint8_t *copy = xpi_sched_scratch(s, (size_t)p * bytes);
		if (copy == NULL)
			return xpi_coll_go(s, -ENOMEM, req);
		memcpy(copy, recvbuf, (size_t)p * bytes);
		in = copy;
	}
	if (count > 0 && in != out)
		memmove(out + (size_t)r * bytes, in + (size_t)r * bytes, bytes);
	/* Pairwise: in step k, to r + k and from r - k, so every pair meets
	 * once and no rank is sent to by two at a time. */
	for (int k = 1; rc == 0 && k < p; k++) {
		int to = (r + k) % p, from = (r - k + p) % p;
		rc = xpi_sched_sendrecv(s, (unsigned)k, to, in + (size_t)to * bytes, bytes, from,
					out + (size_t)from * bytes, bytes);
	}
	return xpi_coll_go(s, rc, req);
}

XPI_EXPORT int xp_alltoall(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			   xp_dtype_t dtype)
{
	return alltoall(comm, sendbuf, recvbuf, count, dtype, NULL);
}

XPI_EXPORT int xp_ialltoall(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			    xp_dtype_t dtype, xp_request_t **req)
{
	return req != NULL ? alltoall(comm, sendbuf, recvbuf, count, dtype, req) :
			     xpi_coll_no_request("xp_ialltoall", comm);
}
