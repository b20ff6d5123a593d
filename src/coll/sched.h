/* SPDX-License-Identifier: MIT */
/*
 * A collective call as a schedule: a list of steps, each some sends and
 * receives in the communicator's collective tag space and then, once they
 * are all done, an optional local reduction. The algorithms (coll.c,
 * data.c, hier.c) only build schedules; this runs them, for blocking and
 * nonblocking calls alike: a step is posted when the one before it is
 * done, whenever the program tests or waits (any of the rank's collectives
 * runs when any is waited for, so ranks that wait in different orders
 * never wait for each other).
 *
 * Every call takes the communicator's next sequence number (a creation
 * over part of it, the number its members give); its messages carry it
 * in their tags with the operation and the step, so two calls never mix,
 * and the program's receives never see them (another tag space). A step
 * whose received length is not what was expected fails the call naming
 * the peer (the members disagree on counts or types); a member lost fails
 * it naming that rank; the deadline (the context's timeout from the
 * call's start) fails it with -ETIMEDOUT.
 */
#ifndef XPI_SCHED_H
#define XPI_SCHED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/dlist.h"
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
	XPI_COLL_COMM,       /* making a communicator */
	XPI_COLL_COMM_GROUP, /* making one over part of the parent (xp_comm_create_group) */
};

/* How a reduction combines: acc = acc (op) in, @count elements. */
struct xpi_combine {
	void (*fn)(void *acc, const void *in, size_t count, const struct xpi_combine *how);
	/* out = one (op) in, where the step has a first operand of its own
	 * (NULL where no builder asks for it). */
	void (*fn3)(void *out, const void *one, const void *in, size_t count,
		    const struct xpi_combine *how);
	size_t elem; /* bytes of one element */
	int dtype, op;
};

struct xpi_sched;

struct xpi_sched_op {
	int peer; /* rank in the communicator */
	bool send;
	void *buf;
	size_t len;
};

struct xpi_sched_step {
	unsigned first, nops; /* its ops in the schedule's array */
	unsigned tag;         /* the step's part of the tag */
	void *acc;            /* then acc (op)= in, count elements, if count > 0 */
	const void *one;      /* or, if set, acc = one (op) in */
	const void *in;
	size_t count;
	/* May be posted while earlier steps are still in flight (their
	 * messages moving, their reductions not yet run), as soon as none of
	 * them writes what this one reads or touches what it writes: a
	 * pipeline's segments, whose handshakes and transfers then overlap.
	 * Steps without it wait for every earlier one (a barrier's rounds
	 * depend on each other through no buffer). */
	bool pipelined;
	/* A step of no messages that polls instead (shared memory): 1 when
	 * done, 0 while it waits (the runner then looks for lost members and
	 * the deadline, and comes back), or a failure described in @why. */
	int (*poll)(struct xpi_sched *s, char *why, size_t n);
};

#define XPI_SCHED_SCRATCH 8
/* Pipelined steps in flight at most, when no step has more than
 * XPI_SCHED_WINDOW_OPS ops (wider schedules run one step at a time). */
#define XPI_SCHED_WINDOW 8
#define XPI_SCHED_WINDOW_OPS 4
/* Room in the schedule itself, so that a small collective allocates
 * nothing (a freed schedule is kept per thread for the next call). */
#define XPI_SCHED_INLINE_STEPS 8
#define XPI_SCHED_INLINE_OPS 16
#define XPI_SCHED_INLINE_SCRATCH 1024

struct xpi_sched {
	struct xpi_dlink link; /* ctx->coll_active while it runs */
	xp_comm_t *comm;
	const char *call; /* "xp_allreduce", for messages */
	uint64_t tag_base;
	int64_t started; /* xpi_now_ns() when it began, for messages */
	int64_t deadline;
	struct xpi_combine how;
	struct xpi_sched_step *steps;
	unsigned nsteps, steps_cap;
	struct xpi_sched_op *ops;
	unsigned nops, ops_cap;
	/* Building: the group the algorithm runs over (member index -> rank
	 * in comm; NULL: all of comm) and where its step numbers start. */
	const int *group;
	int gsize, grank;
	unsigned step_base;
	/* Running: the ranks of comm whose loss fails it (NULL: all of comm);
	 * set when only some members take part, so that a rank which is not
	 * one of them may die without failing the call. */
	const int *members;
	int nmembers;
	/* Running: steps cur .. cur + nposted - 1 are posted, cur the oldest
	 * not done (nsteps when all are). A posted step's requests are in
	 * slot (step % window), stride entries from slot x stride. */
	unsigned cur;
	unsigned nposted;
	unsigned window, stride;
	xp_request_t **reqs;
	xp_status_t *sts;                   /* their statuses */
	unsigned pending[XPI_SCHED_WINDOW]; /* requests not done, per slot */
	unsigned reqs_cap;
	int rc;               /* the first failure */
	int64_t left_seen_ns; /* when only members that finalized were lost */
	_Atomic int busy;     /* a thread is running it */
	bool done, listed;
	xp_request_t *req;                /* the program's handle */
	void *scratch[XPI_SCHED_SCRATCH]; /* freed with the schedule */
	unsigned nscratch;
	/* Run once every step is done, before the request completes: the
	 * operation's own last touches (an average's division, the rounding of
	 * float16 back into the program's buffer). */
	void (*finish)(struct xpi_sched *s);
	/* Run as the schedule ends, whether it worked or not. */
	void (*cleanup)(struct xpi_sched *s);
	/* A shared-memory allreduce's state (shmcoll.c). */
	struct {
		uint8_t *buf;
		const uint8_t *in; /* the input: buf, or apart from it */
		size_t count;
		uint64_t number, what;
		int j; /* the member a step waits for */
		int phase;
		uint64_t chunk;
	} shm;
	struct {
		void *work, *dst;
		size_t count;
		int dtype, op;
	} fin;
	struct xpi_sched_step steps_inline[XPI_SCHED_INLINE_STEPS];
	struct xpi_sched_op ops_inline[XPI_SCHED_INLINE_OPS];
	xp_request_t *reqs_inline[XPI_SCHED_INLINE_OPS];
	xp_status_t sts_inline[XPI_SCHED_INLINE_OPS];
	size_t scratch_used;
	_Alignas(64) uint8_t scratch_inline[XPI_SCHED_INLINE_SCRATCH];
};

/* A schedule for @call on @comm, with the communicator's next sequence
 * number and the context's timeout. NULL (with the detail set) if out of
 * memory. */
struct xpi_sched *xpi_sched_new(xp_comm_t *comm, enum xpi_coll_kind kind, const char *call);
/* The same with sequence number @seq, leaving the communicator's count
 * alone: for a call that only some members make (xp_comm_create_group),
 * which would put the others' count out of step; they name it instead. */
struct xpi_sched *xpi_sched_new_seq(xp_comm_t *comm, enum xpi_coll_kind kind, uint32_t seq,
				    const char *call);

/* Builds the next steps over @group (@n members, this rank being @me),
 * numbered from @step_base. NULL group: the whole communicator. */
void xpi_sched_group(struct xpi_sched *s, const int *group, int n, int me, unsigned step_base);

/* A step: sends @slen bytes to member @to and receives @rcap from member
 * @from (either -1: none). 0 or -ENOMEM. */
int xpi_sched_sendrecv(struct xpi_sched *s, unsigned step, int to, const void *sbuf, size_t slen,
		       int from, void *rbuf, size_t rcap);
/* A step of many ops: begin it, add ops to members, in any number. */
int xpi_sched_begin_step(struct xpi_sched *s, unsigned step);
int xpi_sched_add(struct xpi_sched *s, int member, bool send, void *buf, size_t len);
/* A step that polls (struct xpi_sched_step's poll). */
int xpi_sched_poll_step(struct xpi_sched *s, unsigned step,
			int (*poll)(struct xpi_sched *s, char *why, size_t n));
/* After the last step: acc (op)= in over @count elements of s->how; or
 * out = one (op) in (s->how.fn3). */
void xpi_sched_combine(struct xpi_sched *s, void *acc, const void *in, size_t count);
void xpi_sched_combine3(struct xpi_sched *s, void *out, const void *one, const void *in,
			size_t count);
/* Marks the last step pipelined (struct xpi_sched_step). */
void xpi_sched_pipelined(struct xpi_sched *s);
/* @bytes of scratch freed with the schedule, or NULL (detail set). */
void *xpi_sched_scratch(struct xpi_sched *s, size_t bytes);

/* Starts a built schedule and gives the program its request. 0, or the
 * failure to post the first step (the schedule is freed). */
int xpi_sched_start(struct xpi_sched *s, xp_request_t **req);
/* Starts, waits for and frees a built schedule: the blocking calls. */
int xpi_sched_run(struct xpi_sched *s);
/* Advances every nonblocking collective in progress on @ctx: what a
 * blocking collective that waits otherwise does (shmcoll.c). */
void xpi_sched_advance_all(xp_context_t *ctx);
/* Frees a schedule that was never started (a failure while building). */
void xpi_sched_free(struct xpi_sched *s);

#endif
