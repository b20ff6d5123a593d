/* SPDX-License-Identifier: MIT */
/*
 * The collectives' algorithms (src/coll): each builds the steps of a
 * schedule (sched.h) over the schedule's current group, in place on
 * @count elements of s->how.elem bytes at @buf, with scratch from the
 * schedule. They return 0 or -ENOMEM (the detail set).
 */
#ifndef XPI_COLL_H
#define XPI_COLL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "sched.h"

/* A ring takes at most this many steps, so that its step numbers stay
 * below the hierarchical phases' (hier.c). */
#define XPI_RING_MAX_STEPS (1u << 19)

/* Recursive doubling for any p (the extra ranks fold in first and get the
 * result last): log2 p whole vectors; for small vectors. */
int xpi_build_allreduce_rd(struct xpi_sched *s, void *buf, size_t count);
/* Rabenseifner's, for any p (folded as recursive doubling): a
 * reduce-scatter by recursive halving, then an allgather by recursive
 * doubling, 2 log2 p steps moving 2(p-1)/p of the vector; any count (with
 * fewer elements than the power of two some blocks are empty). */
int xpi_build_allreduce_rabenseifner(struct xpi_sched *s, void *buf, size_t count);
/* Ring: reduce-scatter then allgather, 2(p-1) steps of 1/p of the vector
 * each; bandwidth-optimal, for large vectors. With @src not NULL, the
 * input is there (@buf, the result, need not hold it). */
int xpi_build_allreduce_ring(struct xpi_sched *s, void *buf, const void *src, size_t count);
/* The ring's first half on size blocks of @block elements: afterwards
 * block r of @buf is complete at member r. */
int xpi_build_reduce_scatter_ring(struct xpi_sched *s, void *buf, size_t block);
/* The fold onto a power of two (fold.c) that recursive doubling and
 * Rabenseifner share: pof2 members take part, index newrank (-1: this
 * member only gives its vector at the start and gets the result at the
 * end). */
struct xpi_fold {
	int pof2, rem; /* the largest power of two <= p; p - pof2 */
	int rank;      /* this member's index in the group */
	int newrank;   /* its index among the pof2, or -1 */
};
void xpi_fold_init(struct xpi_fold *f, int p, int r);
/* The group member that takes part as folded index @newrank. */
int xpi_fold_member(const struct xpi_fold *f, int newrank);
/* Step 0: the even members of the first 2 rem give their @count elements
 * at @buf to the odd ones, which reduce them into theirs via @tmp (@count
 * elements of scratch). Nothing for the others. */
int xpi_build_fold_in(struct xpi_sched *s, const struct xpi_fold *f, void *buf, void *tmp,
		      size_t count);
/* The last step (step 64): the odd ones give the result back. */
int xpi_build_fold_out(struct xpi_sched *s, const struct xpi_fold *f, void *buf, size_t count);
/* Binomial trees rooted at member @root: a broadcast of @bytes, and a
 * reduction whose result only the root keeps. */
int xpi_build_bcast_binomial(struct xpi_sched *s, void *buf, size_t bytes, int root);
int xpi_build_reduce_binomial(struct xpi_sched *s, void *buf, size_t count, int root);
/* Within each host to its leader, between the leaders with @across
 * (XP_ALLREDUCE_RECURSIVE_DOUBLING, _RING or _RABENSEIFNER), back within
 * each host. */
int xpi_build_allreduce_hierarchical(struct xpi_sched *s, void *buf, size_t count, int across);

/* Allreduce over shared memory (shmcoll.c), when every pair of a
 * communicator's members maps each other's shm segment: whether it can
 * (every member decides alike); the steps of one call on @count elements
 * of the working type into @buf, from @src if not NULL (s->how set); each
 * channel's highest numbers in this rank's area, for a new communicator's
 * start (the highest over its members'), and that start, once it has its
 * channel (waits until the channel's previous readers are done); the
 * channel given back as the communicator is freed. */
bool xpi_shmcoll_possible(xp_comm_t *comm);
int xpi_shmcoll_build(struct xpi_sched *s, void *buf, const void *src, size_t count);
void xpi_shmcoll_highest(xp_context_t *ctx, uint64_t *calls, uint64_t *chunks);
int xpi_shmcoll_join(xp_comm_t *comm, uint64_t calls, uint64_t chunks);
void xpi_shmcoll_release(xp_comm_t *comm);

/* What the cost model says of an allreduce of @bytes: each algorithm's
 * estimated time and the one chosen (XP_ALLREDUCE_ALGO, if set, wins). */
struct xpi_allreduce_plan {
	int algo;   /* enum xp_allreduce_algo, never AUTO */
	int across; /* hierarchical: the algorithm between the hosts' leaders */
	bool forced;
	/* Infinite where it does not apply. */
	double t_rd_ns, t_ring_ns, t_rab_ns, t_hier_ns, t_shm_ns;
};
void xpi_allreduce_choose(xp_comm_t *comm, size_t bytes, size_t count,
			  struct xpi_allreduce_plan *plan);
const char *xpi_allreduce_algo_name(int algo);
/* The bytes of a pipeline's segment over @comm's slowest link. */
size_t xpi_coll_segment_bytes(xp_comm_t *comm);

/* -EINVAL naming the call and the communicator (never NULL here). */
int xpi_coll_bad(const char *call, const xp_comm_t *comm, const char *what);
/* The checks every collective makes of its communicator, count and type;
 * and those with a root, of the root too (@root < 0: none). */
int xpi_coll_check(const char *call, const xp_comm_t *comm, size_t count, xp_dtype_t dt);
int xpi_coll_check_root(const char *call, const xp_comm_t *comm, size_t count, xp_dtype_t dt,
			int root);
/* -EINVAL for a nonblocking call given no place for its request. */
int xpi_coll_no_request(const char *call, const xp_comm_t *comm);

/* Starts @s (built: @rc 0) for a nonblocking call (@req not NULL) or runs
 * it to the end for a blocking one; frees it on a building failure. */
int xpi_coll_go(struct xpi_sched *s, int rc, xp_request_t **req);

#endif
