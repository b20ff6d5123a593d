/* SPDX-License-Identifier: MIT */
/* The public point-to-point calls: posting, testing, waiting, cancelling. */
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "clock.h"
#include "compiler.h"
#include "engine.h"
#include "log.h"

/* -EINVAL with a text that says what was wrong with the call. */
static int bad_call(const char *call, const xp_comm_t *comm, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int bad_call(const char *call, const xp_comm_t *comm, const char *fmt, ...)
{
	char what[160], text[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (comm != NULL)
		snprintf(text, sizeof(text), "rank %d: %s on communicator %u: %s", comm->ctx->rank,
			 call, comm->id, what);
	else
		snprintf(text, sizeof(text), "%s: %s", call, what);
	xpi_set_thread_detail(text);
	return -EINVAL;
}

/* Checks what every posting call takes; 0 or -EINVAL with its text. */
static int __attribute__((noinline, cold))
check_args_slow(const char *call, const xp_comm_t *comm, const void *buf, size_t len, int rank,
		bool any_ok, bool buf_needed, const void *req)
{
	if (comm == NULL)
		return bad_call(call, NULL, "no communicator (NULL)");
	if (req == NULL)
		return bad_call(call, comm, "no place for the request (NULL)");
	if (!(any_ok && rank == XP_ANY_SOURCE) && (rank < 0 || rank >= comm->size))
		return bad_call(call, comm, "rank %d is not one of its %d ranks%s", rank,
				comm->size, any_ok ? " (nor XP_ANY_SOURCE)" : "");
	if (len > XP_MSG_MAX)
		return bad_call(call, comm, "length %zu is beyond XP_MSG_MAX (%zu)", len,
				(size_t)XP_MSG_MAX);
	if (buf_needed && buf == NULL && len != 0)
		return bad_call(call, comm, "NULL buffer of %zu bytes", len);
	return 0;
}

/* The same: the common case inline, with the texts out of the way. */
static inline int check_args(const char *call, const xp_comm_t *comm, const void *buf, size_t len,
			     int rank, bool any_ok, bool buf_needed, const void *req)
{
	if (xpi_likely(comm != NULL && req != NULL && (unsigned)rank < (unsigned)comm->size &&
		       len <= XP_MSG_MAX && (buf != NULL || !buf_needed)))
		return 0;
	return check_args_slow(call, comm, buf, len, rank, any_ok, buf_needed, req);
}

/* @space: the communicator's id (the program's messages) or its
 * collectives' (xpi_comm_coll_id). @dest is a rank of @comm. */
static int start_send(xp_comm_t *comm, uint32_t space, const void *buf, size_t len, int dest,
		      uint64_t tag, bool blocking, xp_request_t **req)
{
	const char *call = blocking ? "xp_send" : "xp_isend";
	if (xpi_unlikely(check_args(call, comm, buf, len, dest, false, true, req) < 0))
		return -EINVAL;
	xp_request_t *r = xpi_request_new(comm->ctx, XPI_OP_SEND);
	if (r == NULL)
		return xpi_fail(-ENOMEM,
				"rank %d: %s to rank %d tag 0x%llx: no memory for "
				"the request",
				comm->ctx->rank, call, dest, (unsigned long long)tag);
	r->blocking = blocking;
	r->comm_obj = comm;
	/* @buf is lent to us until the request completes; never written. */
	xpi_request_target(r, space, xpi_comm_world_rank(comm, dest), (void *)buf, len, tag,
			   XP_TAG_EXACT);
	*req = r;
	xpi_engine_submit(comm->ctx, &r->post_cmd);
	return 0;
}

XPI_EXPORT int xp_isend(xp_comm_t *comm, const void *buf, size_t len, int dest, uint64_t tag,
			xp_request_t **req)
{
	return start_send(comm, comm != NULL ? comm->id : 0, buf, len, dest, tag, false, req);
}

static int post_recv(xp_comm_t *comm, uint32_t space, uint8_t op, void *buf, size_t cap, int source,
		     uint64_t tag, uint64_t mask, bool blocking, xp_request_t **req)
{
	static const char *const calls[2][2] = { { "xp_irecv_buf", "xp_irecv" },
						 { "xp_recv_buf", "xp_recv" } };
	const char *call = calls[blocking][op == XPI_OP_RECV];
	if (xpi_unlikely(check_args(call, comm, buf, cap, source, true, op == XPI_OP_RECV, req) <
			 0))
		return -EINVAL;
	xp_request_t *r = xpi_request_new(comm->ctx, op);
	if (r == NULL)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for the request", comm->ctx->rank,
				call);
	r->blocking = blocking;
	r->comm_obj = comm;
	xpi_request_target(r, space,
			   source == XP_ANY_SOURCE ? source : xpi_comm_world_rank(comm, source),
			   buf, cap, tag, mask);
	*req = r;
	xpi_engine_submit(comm->ctx, &r->post_cmd);
	return 0;
}

XPI_EXPORT int xp_irecv(xp_comm_t *comm, void *buf, size_t cap, int source, uint64_t tag,
			uint64_t mask, xp_request_t **req)
{
	return post_recv(comm, comm != NULL ? comm->id : 0, XPI_OP_RECV, buf, cap, source, tag,
			 mask, false, req);
}

XPI_EXPORT int xp_irecv_buf(xp_comm_t *comm, int source, uint64_t tag, uint64_t mask,
			    xp_request_t **req)
{
	return post_recv(comm, comm != NULL ? comm->id : 0, XPI_OP_RECV_BUF, NULL, 0, source, tag,
			 mask, false, req);
}

/* Asks the owner to cancel @r for @reason, once. */
static void request_cancel(xp_request_t *r, int reason)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&r->cancel_reason, &expected, reason))
		return;     /* already asked */
	xpi_request_get(r); /* held by the queued command */
	xpi_engine_submit(r->ctx, &r->cancel_cmd);
}

XPI_EXPORT int xp_cancel(xp_request_t *req)
{
	if (req == NULL)
		return xpi_fail(-EINVAL, "xp_cancel: no request (NULL)");
	if (req->op == XPI_OP_COLL)
		return xpi_fail(-EINVAL,
				"rank %d: xp_cancel: a collective cannot be cancelled "
				"(every member must finish it)",
				req->ctx->rank);
	request_cancel(req, -ECANCELED);
	return 0;
}

/* Hands a completed request's result to the caller and frees it. */
static int finish(xp_request_t **reqp, xp_status_t *status)
{
	xp_request_t *r = *reqp;
	int err = r->status.error;
	if (status != NULL) {
		*status = r->status;
		/* The engine knows world ranks; the program, its communicator's. */
		if (r->comm_obj != NULL && status->source >= 0)
			status->source = xpi_comm_local_rank(r->comm_obj, status->source);
		else if (status->source >= r->ctx->size)
			status->source = 0; /* an endpoint's only peer */
	} else if (r->status.buf != NULL)
		xpi_buf_put(r->status.buf); /* nobody can take it: give it back */
	if (err != 0) {
		xpi_set_thread_detail(r->detail != NULL ? r->detail : xp_strerror(err));
		/* The caller has the code: whether it is an error is its call. */
		if ((err == -ETIMEDOUT || err == -ECONNRESET) && r->detail != NULL)
			xpi_log(XPI_LOG_INFO, "%s", r->detail);
	}
	*reqp = NULL;
	xpi_request_put(r);
	return err;
}

XPI_EXPORT int xp_test(xp_request_t **reqp, xp_status_t *status)
{
	if (reqp == NULL)
		return xpi_fail(-EINVAL, "xp_test: no request pointer (NULL)");
	if (*reqp == NULL) {
		if (status != NULL)
			*status = (xp_status_t){ .source = XP_ANY_SOURCE };
		return 1;
	}
	xp_request_t *r = *reqp;
	if (!xpi_request_done(r)) {
		if (r->op == XPI_OP_COLL) {
			if (!r->coll_hooks->advance(r))
				return 0;
		} else {
			xp_progress(r->ctx);
			if (!xpi_request_done(r))
				return 0;
		}
	}
	int err = finish(reqp, status);
	return err != 0 ? err : 1;
}

/* Spinning wins here by 10-20 us a message (waking a halted vCPU is that
 * slow), but with more ranks than cores a spinner steals the peer's core:
 * spin a while, then yield the CPU on every idle round (a peer that needs
 * it gets it; alone, the round just goes on), and only after a longer idle
 * time sleep on every transport's events at once. Sleeping sooner cost a
 * window of in-process 4 KiB sends 30% of its bandwidth here (the sender
 * slept between windows and waited for a wake-up each time). */
#define YIELD_BEFORE_SLEEP_NS (1 * 1000000)
/* A sleep's bound when nothing nearer ends it: every transport wakes a
 * sleeper on its events, so this only limits what a missed wake-up (a
 * completion finished by another thread, say) can cost. */
#define SLEEP_MAX_NS (50 * 1000000)

static int64_t wait_deadline(int timeout_ms)
{
	return timeout_ms == XP_TIMEOUT_INFINITE ? INT64_MAX :
						   xpi_now_ns() + (int64_t)timeout_ms * 1000000;
}

XPI_EXPORT int xp_wait(xp_request_t **reqp, int timeout_ms, xp_status_t *status)
{
	if (reqp == NULL)
		return xpi_fail(-EINVAL, "xp_wait: no request pointer (NULL)");
	if (timeout_ms < XP_TIMEOUT_DEFAULT)
		return xpi_fail(-EINVAL,
				"xp_wait: timeout %d ms is not >= 0, XP_TIMEOUT_DEFAULT or "
				"XP_TIMEOUT_INFINITE",
				timeout_ms);
	if (*reqp == NULL) {
		if (status != NULL)
			*status = (xp_status_t){ .source = XP_ANY_SOURCE };
		return 0;
	}
	xp_request_t *r = *reqp;
	if (xpi_request_done(r))
		return finish(reqp, status); /* the common case for eager sends: no clock read */
	if (r->op == XPI_OP_COLL) {
		r->coll_hooks->wait(r, timeout_ms);
		return finish(reqp, status);
	}
	xp_context_t *ctx = r->ctx;
	if (timeout_ms == XP_TIMEOUT_DEFAULT)
		timeout_ms = ctx->cfg.timeout_ms;
	/* The clock is first read after some rounds: most waits end sooner,
	 * and a read costs as much as a round. */
	int64_t deadline = 0;
	bool cancelled = false; /* the deadline passed and the cancel is asked for */
	unsigned idle = 0, rounds = 0;
	int64_t idle_since = 0; /* when the yielding began */
	bool owner = false;

	/*
	 * While it spins, this thread runs the rank's engine itself, holding the
	 * owner token across rounds: taking and giving back the token costs two
	 * atomic exchanges a round, and the round's length is how late a
	 * message is noticed. Other threads of the rank meanwhile hand their
	 * work over through cmdq, which each round drains; one that needs the
	 * token itself (out-of-band calls) asks for it with token_wanted. Once
	 * idle for a while it sleeps, without the token, until an event of any
	 * transport, a timer, or the deadline.
	 */
	while (!xpi_request_done(r)) {
		/* The deadline is looked at every 16 rounds, busy or idle: a
		 * wait that keeps seeing other work must still end on time. */
		if ((++rounds & 15) == 0 && !cancelled) {
			if (deadline == 0) {
				deadline = wait_deadline(timeout_ms);
			} else if (xpi_now_ns() >= deadline) {
				r->waited_ms = timeout_ms;
				request_cancel(r,
					       -ETIMEDOUT); /* queued to us if we hold the token */
				cancelled = true; /* the cancel ends the wait, soon and surely */
			}
		}
		if (!owner)
			owner = xpi_owner_try_acquire(ctx);
		if (owner && xpi_engine_run(ctx) > 0) {
			idle = 0;
			continue;
		}
		if (xpi_request_done(r))
			break;
		if (owner && xpi_unlikely(atomic_load_explicit(&ctx->token_wanted,
							       memory_order_relaxed) != 0)) {
			atomic_store_explicit(&ctx->token_wanted, 0, memory_order_relaxed);
			xpi_owner_release(ctx);
			owner = false;
			sched_yield(); /* the asking thread takes it now */
			continue;
		}
		/* No pause between idle rounds: a round of polling every
		 * transport is already hundreds of cycles of loads, and a pause
		 * only makes the next message later to be seen (up to 140
		 * cycles on recent x86; under QEMU's emulation it even leaves
		 * the translated code, ~0.4 us a round in the RDMA lab). UCX's
		 * and Open MPI's progress loops do not pause either. */
		if (++idle < ctx->spin_rounds)
			continue;
		int64_t now = xpi_now_ns();
		if (idle == ctx->spin_rounds)
			idle_since = now;
		if (!owner || now - idle_since < YIELD_BEFORE_SLEEP_NS) {
			sched_yield(); /* without the token: another thread runs the engine */
			continue;
		}
		if (deadline == 0)
			deadline = wait_deadline(timeout_ms);
		int64_t until = now + SLEEP_MAX_NS;
		if (!cancelled && deadline < until)
			until = deadline;
		xpi_engine_sleep(ctx, until, r); /* gives the token back */
		owner = false;
		idle = ctx->spin_rounds + 1; /* still idle: sleep again after one round */
		rounds |= 15;                /* look at the deadline at once */
	}
	if (owner)
		xpi_owner_release(ctx);
	return finish(reqp, status);
}

XPI_EXPORT int xp_send(xp_comm_t *comm, const void *buf, size_t len, int dest, uint64_t tag)
{
	xp_request_t *r;
	int rc = start_send(comm, comm != NULL ? comm->id : 0, buf, len, dest, tag, true, &r);
	if (rc < 0)
		return rc;
	return xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL);
}

XPI_EXPORT int xp_recv(xp_comm_t *comm, void *buf, size_t cap, int source, uint64_t tag,
		       uint64_t mask, xp_status_t *status)
{
	xp_request_t *r;
	int rc = post_recv(comm, comm != NULL ? comm->id : 0, XPI_OP_RECV, buf, cap, source, tag,
			   mask, true, &r);
	if (rc < 0)
		return rc;
	return xp_wait(&r, XP_TIMEOUT_DEFAULT, status);
}

XPI_EXPORT int xp_recv_buf(xp_comm_t *comm, int source, uint64_t tag, uint64_t mask, xp_buf_t **buf,
			   xp_status_t *status)
{
	if (buf == NULL)
		return xpi_fail(-EINVAL, "xp_recv_buf: no place for the buffer (NULL)");
	xp_request_t *r;
	xp_status_t st;
	int rc = post_recv(comm, comm != NULL ? comm->id : 0, XPI_OP_RECV_BUF, NULL, 0, source, tag,
			   mask, true, &r);
	if (rc < 0)
		return rc;
	rc = xp_wait(&r, XP_TIMEOUT_DEFAULT, &st);
	if (status != NULL)
		*status = st;
	if (rc == 0)
		*buf = st.buf;
	return rc;
}

int xpi_coll_isend(xp_comm_t *comm, const void *buf, size_t len, int dest, uint64_t tag,
		   xp_request_t **req)
{
	return start_send(comm, xpi_comm_coll_id(comm), buf, len, dest, tag, false, req);
}

int xpi_coll_irecv(xp_comm_t *comm, void *buf, size_t cap, int source, uint64_t tag,
		   xp_request_t **req)
{
	return post_recv(comm, xpi_comm_coll_id(comm), XPI_OP_RECV, buf, cap, source, tag,
			 XP_TAG_EXACT, false, req);
}
