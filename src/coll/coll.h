/* SPDX-License-Identifier: MIT */
/*
 * The collectives' internals (src/coll): a layer above the engine that
 * uses only its point-to-point calls in each communicator's collective
 * tag space (xpi_coll_isend, xpi_coll_irecv). Every collective call takes
 * the communicator's next sequence number; its messages carry it in their
 * tags with the operation and the step, so two calls never mix, and a
 * program's receives never see them (another tag space).
 */
#ifndef XPI_COLL_H
#define XPI_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/engine.h"

enum xpi_coll_kind {
	XPI_COLL_BARRIER = 1,
	XPI_COLL_BCAST,
	XPI_COLL_REDUCE,
	XPI_COLL_ALLREDUCE,
	XPI_COLL_ALLGATHER,
	XPI_COLL_REDUCE_SCATTER,
	XPI_COLL_ALLTOALL,
	XPI_COLL_GATHER,
	XPI_COLL_SCATTER,
	XPI_COLL_COMM, /* making a communicator */
};

/*
 * One collective call in progress on this rank. The algorithms run over a
 * group of the communicator's ranks (all of them, or one host's, or the
 * hosts' leaders in a hierarchical allreduce) and number its members 0 to
 * gsize - 1; steps are numbered from step_base, so the phases of one call
 * never share a tag.
 */
struct xpi_coll {
	xp_comm_t *comm;
	const char *call; /* "xp_allreduce", for messages */
	uint64_t tag_base;
	int64_t deadline;
	int timeout_ms;
	const int *group; /* member index -> rank in comm; NULL: the identity */
	int gsize, grank; /* the group's size and this rank's index in it */
	unsigned step_base;
};

/* Runs the next algorithm over @group (@n members, this rank being index
 * @me), its steps numbered from @step_base. NULL group: the whole
 * communicator. */
void xpi_coll_group(struct xpi_coll *c, const int *group, int n, int me, unsigned step_base);

/* Starts a call: its sequence number and deadline. */
void xpi_coll_begin(struct xpi_coll *c, xp_comm_t *comm, enum xpi_coll_kind kind, const char *call);

/*
 * One step: sends @slen bytes to member @to and receives up to @rcap bytes
 * from member @from (of the group; either may be -1: no send, no
 * receive), waits for both.
 * A received message of another length than @rcap is an error naming the
 * peer: the members disagree on counts or types. Returns 0 or the failure,
 * with a detail naming the call, the step and the peer.
 */
int xpi_coll_sendrecv(struct xpi_coll *c, unsigned step, int to, const void *sbuf, size_t slen,
		      int from, void *rbuf, size_t rcap);

/* How a reduction combines: acc = acc (op) in, @count elements. */
struct xpi_combine {
	void (*fn)(void *acc, const void *in, size_t count, const struct xpi_combine *how);
	size_t elem; /* bytes of one element */
	int dtype, op;
};

/* What the cost model says of an allreduce of @bytes: each algorithm's
 * estimated time and the one chosen (XP_ALLREDUCE_ALGO, if set, wins). */
struct xpi_allreduce_plan {
	int algo;   /* enum xp_allreduce_algo, never AUTO */
	int across; /* hierarchical: the algorithm between the hosts' leaders */
	bool forced;
	double t_rd_ns, t_ring_ns, t_hier_ns; /* hierarchical: infinite if it does not apply */
};
void xpi_allreduce_choose(xp_comm_t *comm, size_t bytes, size_t count,
			  struct xpi_allreduce_plan *plan);
const char *xpi_allreduce_algo_name(int algo);

/* The algorithms, on @count elements of @how->elem bytes in @buf (in
 * place), with a scratch buffer of the same size where needed. */
int xpi_allreduce_recursive_doubling(struct xpi_coll *c, void *buf, size_t count,
				     const struct xpi_combine *how);
int xpi_allreduce_ring(struct xpi_coll *c, void *buf, size_t count, const struct xpi_combine *how);
/* The ring's first half on size blocks of @block elements: afterwards
 * block r of @buf is complete at rank r (the others hold partial sums). */
int xpi_reduce_scatter_ring(struct xpi_coll *c, void *buf, size_t block,
			    const struct xpi_combine *how);
/* Binomial trees over the group, rooted at member @root: a broadcast of
 * @bytes, and a reduction whose result only the root keeps in @buf. */
int xpi_bcast_binomial(struct xpi_coll *c, void *buf, size_t bytes, int root);
int xpi_reduce_binomial(struct xpi_coll *c, void *buf, size_t count, const struct xpi_combine *how,
			int root);
/* Within each host to its leader, between the leaders with @across
 * (XP_ALLREDUCE_RECURSIVE_DOUBLING or _RING), back within each host. */
int xpi_allreduce_hierarchical(struct xpi_coll *c, void *buf, size_t count,
			       const struct xpi_combine *how, int across);

/* -EINVAL naming the call and the communicator (never NULL here). */
int xpi_coll_bad(const char *call, const xp_comm_t *comm, const char *what);
/* The checks every collective makes of its communicator, count and type. */
int xpi_coll_check(const char *call, const xp_comm_t *comm, size_t count, xp_dtype_t dt);

#endif
