/* SPDX-License-Identifier: MIT */
/*
 * The collectives that move data without reducing it: barrier, bcast,
 * allgather, gather, scatter, alltoall.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/compiler.h"
#include "../core/log.h"
#include "coll.h"

XPI_EXPORT int xp_barrier(xp_comm_t *comm)
{
	if (comm == NULL)
		return xpi_coll_bad("xp_barrier", comm, "no communicator (NULL)");
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_BARRIER, "xp_barrier");
	int p = comm->size, r = comm->rank, rc = 0;
	/* Dissemination: ceil(log2 p) rounds for any p. */
	unsigned step = 0;
	for (int k = 1; rc == 0 && k < p; k <<= 1, step++)
		rc = xpi_coll_sendrecv(&c, step, (r + k) % p, NULL, 0, (r - k + p) % p, NULL, 0);
	return rc;
}

XPI_EXPORT int xp_bcast(xp_comm_t *comm, void *buf, size_t count, xp_dtype_t dtype, int root)
{
	int rc = xpi_coll_check("xp_bcast", comm, count, dtype);
	if (rc < 0)
		return rc;
	if (root < 0 || root >= comm->size)
		return xpi_coll_bad("xp_bcast", comm, "the root is not a rank of the communicator");
	if (buf == NULL && count > 0)
		return xpi_coll_bad("xp_bcast", comm, "NULL buffer");
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_BCAST, "xp_bcast");
	return xpi_bcast_binomial(&c, buf, count * xp_dtype_size(dtype), root);
}

XPI_EXPORT int xp_allgather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			    xp_dtype_t dtype)
{
	int rc = xpi_coll_check("xp_allgather", comm, count, dtype);
	if (rc < 0)
		return rc;
	if (count > 0 && (recvbuf == NULL || sendbuf == NULL))
		return xpi_coll_bad("xp_allgather", comm, "NULL buffer");
	int p = comm->size, r = comm->rank;
	size_t bytes = count * xp_dtype_size(dtype);
	uint8_t *out = recvbuf;
	if (sendbuf != XP_IN_PLACE && count > 0)
		memmove(out + (size_t)r * bytes, sendbuf, bytes);
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_ALLGATHER, "xp_allgather");
	/* Ring: p - 1 steps, each passing on the block received last. */
	int right = (r + 1) % p, left = (r + p - 1) % p;
	for (int s = 0; rc == 0 && s < p - 1; s++) {
		int sb = (r - s + p) % p, rb = (r - s - 1 + p) % p;
		rc = xpi_coll_sendrecv(&c, (unsigned)s, right, out + (size_t)sb * bytes, bytes,
				       left, out + (size_t)rb * bytes, bytes);
	}
	return rc;
}

/* Posts a receive (or send) per rank but this one and waits for them
 * all: the root's side of gather and scatter. */
static int root_exchange(struct xpi_coll *c, uint8_t *blocks, size_t bytes, bool receive)
{
	int p = c->comm->size, r = c->comm->rank, rc = 0;
	xp_request_t **reqs = calloc((size_t)p, sizeof(*reqs));
	if (reqs == NULL)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory", r, c->call);
	for (int q = 0; rc == 0 && q < p; q++) {
		if (q == r)
			continue;
		if (receive)
			rc = xpi_coll_irecv(c->comm, blocks + (size_t)q * bytes, bytes, q,
					    c->tag_base, &reqs[q]);
		else
			rc = xpi_coll_isend(c->comm, blocks + (size_t)q * bytes, bytes, q,
					    c->tag_base, &reqs[q]);
	}
	int64_t left = c->deadline - xpi_now_ns();
	int wrc = xp_waitall((size_t)p, reqs, left > 0 ? (int)(left / 1000000) + 1 : 0, NULL);
	free(reqs);
	if (rc == 0)
		rc = wrc;
	if (rc < 0) {
		char inner[512];
		snprintf(inner, sizeof(inner), "%s", xp_error_detail());
		return xpi_fail(rc, "rank %d: %s on communicator %u (root): %s", r, c->call,
				c->comm->id, inner);
	}
	return 0;
}

XPI_EXPORT int xp_gather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			 xp_dtype_t dtype, int root)
{
	int rc = xpi_coll_check("xp_gather", comm, count, dtype);
	if (rc < 0)
		return rc;
	if (root < 0 || root >= comm->size)
		return xpi_coll_bad("xp_gather", comm,
				    "the root is not a rank of the communicator");
	bool at_root = comm->rank == root;
	if (count > 0 && (sendbuf == NULL || (at_root && recvbuf == NULL) ||
			  (!at_root && sendbuf == XP_IN_PLACE)))
		return xpi_coll_bad("xp_gather", comm,
				    "NULL buffer, or XP_IN_PLACE away from the root");
	size_t bytes = count * xp_dtype_size(dtype);
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_GATHER, "xp_gather");
	if (!at_root)
		return xpi_coll_sendrecv(&c, 0, root, sendbuf, bytes, -1, NULL, 0);
	uint8_t *out = recvbuf;
	if (sendbuf != XP_IN_PLACE && count > 0)
		memmove(out + (size_t)root * bytes, sendbuf, bytes);
	return comm->size > 1 ? root_exchange(&c, out, bytes, true) : 0;
}

XPI_EXPORT int xp_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			  xp_dtype_t dtype, int root)
{
	int rc = xpi_coll_check("xp_scatter", comm, count, dtype);
	if (rc < 0)
		return rc;
	if (root < 0 || root >= comm->size)
		return xpi_coll_bad("xp_scatter", comm,
				    "the root is not a rank of the communicator");
	bool at_root = comm->rank == root;
	if (count > 0 && (recvbuf == NULL || (at_root && sendbuf == NULL)))
		return xpi_coll_bad("xp_scatter", comm, "NULL buffer");
	size_t bytes = count * xp_dtype_size(dtype);
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_SCATTER, "xp_scatter");
	if (!at_root)
		return xpi_coll_sendrecv(&c, 0, -1, NULL, 0, root, recvbuf, bytes);
	const uint8_t *in = sendbuf;
	if (recvbuf != XP_IN_PLACE && count > 0)
		memmove(recvbuf, in + (size_t)root * bytes, bytes);
	return comm->size > 1 ? root_exchange(&c, (uint8_t *)(uintptr_t)in, bytes, false) : 0;
}

XPI_EXPORT int xp_alltoall(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
			   xp_dtype_t dtype)
{
	int rc = xpi_coll_check("xp_alltoall", comm, count, dtype);
	if (rc < 0)
		return rc;
	if (count > 0 && (sendbuf == NULL || recvbuf == NULL))
		return xpi_coll_bad("xp_alltoall", comm, "NULL buffer");
	int p = comm->size, r = comm->rank;
	size_t bytes = count * xp_dtype_size(dtype);
	const uint8_t *in = sendbuf;
	uint8_t *copy = NULL, *out = recvbuf;
	if (sendbuf == XP_IN_PLACE && count > 0) {
		/* The blocks to send are overwritten as blocks arrive. */
		copy = malloc((size_t)p * bytes);
		if (copy == NULL)
			return xpi_fail(-ENOMEM, "rank %d: xp_alltoall: no memory", r);
		memcpy(copy, recvbuf, (size_t)p * bytes);
		in = copy;
	}
	if (count > 0 && in != out)
		memmove(out + (size_t)r * bytes, in + (size_t)r * bytes, bytes);
	struct xpi_coll c;
	xpi_coll_begin(&c, comm, XPI_COLL_ALLTOALL, "xp_alltoall");
	/* Pairwise: in step s, to r + s and from r - s, so every pair meets
	 * once and no rank is sent to by two at a time. */
	for (int s = 1; rc == 0 && s < p; s++) {
		int to = (r + s) % p, from = (r - s + p) % p;
		rc = xpi_coll_sendrecv(&c, (unsigned)s, to, in + (size_t)to * bytes, bytes, from,
				       out + (size_t)from * bytes, bytes);
	}
	free(copy);
	return rc;
}
