/* SPDX-License-Identifier: MIT */
/* Building and running collective schedules; see sched.h. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/clock.h"
#include "../core/compiler.h"
#include "../core/log.h"
#include "sched.h"

/* A tag: the call's sequence number, the operation, the step. */
#define TAG_SEQ_SHIFT 32
#define TAG_KIND_SHIFT 24
/* Idle waiting, as xp_wait's: spin, then yield, then nap on the rank's
 * events, looking at least this often whether a member was lost. */
#define YIELD_NS (1 * 1000000)
#define NAP_NS (1 * 1000000)
#define POLL_NAP_NS (20 * 1000)
/* How long a collective that lost only members that finalized waits to
 * see the member that died (shm notices a process gone within 100 ms). */
#define LEFT_GRACE_NS (300 * 1000000LL)

/* The schedule this thread freed last, kept for its next collective
 * (freed with the thread: the key's destructor). */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void spare_key_make(void)
{
	(void)pthread_key_create(&spare_key, free);
}

struct xpi_sched *xpi_sched_new(xp_comm_t *comm, enum xpi_coll_kind kind, const char *call)
{
	struct xpi_sched *s = xpi_sched_new_seq(comm, kind, comm->coll_seq, call);
	if (s != NULL)
		comm->coll_seq++;
	return s;
}

struct xpi_sched *xpi_sched_new_seq(xp_comm_t *comm, enum xpi_coll_kind kind, uint32_t seq,
				    const char *call)
{
	pthread_once(&spare_once, spare_key_make);
	struct xpi_sched *s = pthread_getspecific(spare_key);
	if (s != NULL) {
		pthread_setspecific(spare_key, NULL);
	} else {
		s = malloc(sizeof(*s));
		if (s == NULL) {
			xpi_fail(-ENOMEM, "rank %d: %s: no memory for its schedule", comm->rank,
				 call);
			return NULL;
		}
	}
	/* Every field but the inline arrays, which are written before read. */
	memset(s, 0, offsetof(struct xpi_sched, steps_inline));
	s->steps = s->steps_inline;
	s->steps_cap = XPI_SCHED_INLINE_STEPS;
	s->ops = s->ops_inline;
	s->ops_cap = XPI_SCHED_INLINE_OPS;
	s->reqs = s->reqs_inline;
	s->sts = s->sts_inline;
	s->reqs_cap = XPI_SCHED_INLINE_OPS;
	s->scratch_used = 0;
	s->comm = comm;
	s->call = call;
	s->tag_base = (uint64_t)seq << TAG_SEQ_SHIFT | (uint64_t)kind << TAG_KIND_SHIFT;
	s->started = xpi_now_ns();
	s->deadline = s->started + (int64_t)comm->ctx->cfg.timeout_ms * 1000000;
	xpi_sched_group(s, NULL, comm->size, comm->rank, 0);
	xpi_dlist_init(&s->link);
	return s;
}

void xpi_sched_group(struct xpi_sched *s, const int *group, int n, int me, unsigned step_base)
{
	s->group = group;
	s->gsize = n;
	s->grank = me;
	s->step_base = step_base;
}

void *xpi_sched_scratch(struct xpi_sched *s, size_t bytes)
{
	size_t at = (s->scratch_used + 63) & ~(size_t)63;
	if (bytes <= XPI_SCHED_INLINE_SCRATCH && at + bytes <= XPI_SCHED_INLINE_SCRATCH) {
		s->scratch_used = at + bytes;
		return s->scratch_inline + at;
	}
	if (s->nscratch == XPI_SCHED_SCRATCH) {
		xpi_fail(-ENOMEM, "rank %d: %s: too many scratch buffers", s->comm->rank, s->call);
		return NULL;
	}
	void *p = malloc(bytes > 0 ? bytes : 1);
	if (p == NULL)
		xpi_fail(-ENOMEM, "rank %d: %s: no memory for %zu bytes of scratch", s->comm->rank,
			 s->call, bytes);
	else
		s->scratch[s->nscratch++] = p;
	return p;
}

/* Grows an array that starts in the schedule's inline room (@inline_buf). */
static int grow(void **arr, unsigned *cap, unsigned need, size_t elem, const void *inline_buf)
{
	if (need <= *cap)
		return 0;
	unsigned n = *cap * 2;
	while (n < need)
		n *= 2;
	void *p = *arr == inline_buf ? malloc((size_t)n * elem) : realloc(*arr, (size_t)n * elem);
	if (p == NULL)
		return -ENOMEM;
	if (*arr == inline_buf)
		memcpy(p, inline_buf, (size_t)*cap * elem);
	*arr = p;
	*cap = n;
	return 0;
}

int xpi_sched_begin_step(struct xpi_sched *s, unsigned step)
{
	if (grow((void **)&s->steps, &s->steps_cap, s->nsteps + 1, sizeof(*s->steps),
		 s->steps_inline) < 0)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for its schedule", s->comm->rank,
				s->call);
	s->steps[s->nsteps++] =
		(struct xpi_sched_step){ .first = s->nops, .tag = s->step_base + step };
	return 0;
}

int xpi_sched_add(struct xpi_sched *s, int member, bool send, void *buf, size_t len)
{
	if (grow((void **)&s->ops, &s->ops_cap, s->nops + 1, sizeof(*s->ops), s->ops_inline) < 0)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for its schedule", s->comm->rank,
				s->call);
	int peer = s->group != NULL ? s->group[member] : member;
	s->ops[s->nops++] = (struct xpi_sched_op){ peer, send, buf, len };
	s->steps[s->nsteps - 1].nops++;
	return 0;
}

int xpi_sched_sendrecv(struct xpi_sched *s, unsigned step, int to, const void *sbuf, size_t slen,
		       int from, void *rbuf, size_t rcap)
{
	int rc = xpi_sched_begin_step(s, step);
	/* The receive first: it is posted first, before its peer's send. */
	if (rc == 0 && from >= 0)
		rc = xpi_sched_add(s, from, false, rbuf, rcap);
	if (rc == 0 && to >= 0)
		rc = xpi_sched_add(s, to, true, (void *)(uintptr_t)sbuf, slen);
	return rc;
}

int xpi_sched_poll_step(struct xpi_sched *s, unsigned step,
			int (*poll)(struct xpi_sched *s, char *why, size_t n))
{
	int rc = xpi_sched_begin_step(s, step);
	if (rc == 0)
		s->steps[s->nsteps - 1].poll = poll;
	return rc;
}

void xpi_sched_combine(struct xpi_sched *s, void *acc, const void *in, size_t count)
{
	struct xpi_sched_step *st = &s->steps[s->nsteps - 1];
	st->acc = acc;
	st->in = in;
	st->count = count;
}

void xpi_sched_combine3(struct xpi_sched *s, void *out, const void *one, const void *in,
			size_t count)
{
	xpi_sched_combine(s, out, in, count);
	s->steps[s->nsteps - 1].one = one;
}

void xpi_sched_pipelined(struct xpi_sched *s)
{
	s->steps[s->nsteps - 1].pipelined = true;
}

void xpi_sched_free(struct xpi_sched *s)
{
	if (s == NULL)
		return;
	for (unsigned i = 0; i < s->nscratch; i++)
		free(s->scratch[i]);
	if (s->steps != s->steps_inline)
		free(s->steps);
	if (s->ops != s->ops_inline)
		free(s->ops);
	if (s->reqs != s->reqs_inline)
		free(s->reqs);
	if (s->sts != s->sts_inline)
		free(s->sts);
	pthread_once(&spare_once, spare_key_make);
	if (pthread_getspecific(spare_key) == NULL && pthread_setspecific(spare_key, s) == 0)
		return;
	free(s);
}

/* ---------------------------------------------------------------------- */
/* Running                                                                */

/* A member of the communicator whose connection is lost, or -1: one
 * that died before one that finalized (which may only have left because
 * the collective failed on it first). */
static int lost_member(const struct xpi_sched *s, char *why, size_t n, bool *left)
{
	xp_context_t *ctx = s->comm->ctx;
	int n_watched = s->members != NULL ? s->nmembers : s->comm->size;
	for (int pass = 0; pass < 2; pass++) {
		for (int i = 0; i < n_watched; i++) {
			int r = s->members != NULL ? s->members[i] : i;
			const struct xpi_peer *peer = &ctx->peers[xpi_comm_world_rank(s->comm, r)];
			if (peer->failed != 0 && (pass == 1 || !peer->finalized)) {
				snprintf(why, n, "%s", peer->failed_why);
				if (left != NULL)
					*left = pass == 1;
				return r;
			}
		}
	}
	return -1;
}

/* The requests of posted step @i. */
static xp_request_t **slot_reqs(const struct xpi_sched *s, unsigned i)
{
	return s->reqs + (i % s->window) * s->stride;
}

/* Ends the schedule: its outstanding ops cancelled and waited for (their
 * buffers are the schedule's), the finish run if all went well, the
 * request completed. */
static void conclude(struct xpi_sched *s, int rc, const char *detail)
{
	for (unsigned i = s->cur; i < s->cur + s->nposted; i++)
		for (unsigned k = 0; k < s->steps[i].nops; k++)
			if (slot_reqs(s, i)[k] != NULL)
				xp_cancel(slot_reqs(s, i)[k]);
	for (unsigned i = s->cur; i < s->cur + s->nposted; i++)
		(void)xp_waitall(s->steps[i].nops, slot_reqs(s, i), XP_TIMEOUT_DEFAULT, NULL);
	s->nposted = 0;
	if (rc == 0 && s->finish != NULL)
		s->finish(s);
	if (s->cleanup != NULL)
		s->cleanup(s);
	s->rc = rc;
	s->done = true;
	if (s->listed) {
		pthread_mutex_lock(&s->comm->ctx->comm_lock);
		xpi_dlist_remove(&s->link);
		atomic_fetch_sub(&s->comm->ctx->coll_nactive, 1);
		pthread_mutex_unlock(&s->comm->ctx->comm_lock);
		s->listed = false;
	}
	if (s->req != NULL) {
		if (rc < 0)
			xpi_request_set_detail(s->req, "%s", detail);
		xpi_request_complete(s->req, rc);
	} else if (rc < 0) {
		xpi_set_thread_detail(detail);
	}
}

static void fail(struct xpi_sched *s, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void fail(struct xpi_sched *s, int rc, const char *fmt, ...)
{
	char text[640];
	int n = snprintf(text, sizeof(text), "rank %d: %s on communicator %u: ", s->comm->rank,
			 s->call, s->comm->id);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text + n, sizeof(text) - (size_t)n, fmt, ap);
	va_end(ap);
	conclude(s, rc, text);
}

/* Sizes the request slots from the widest step: a window of pipelined
 * steps if there are any and every step is narrow, else one step. */
static int size_slots(struct xpi_sched *s)
{
	unsigned widest = 1;
	bool pipelined = false;
	for (unsigned i = 0; i < s->nsteps; i++) {
		widest = s->steps[i].nops > widest ? s->steps[i].nops : widest;
		pipelined |= s->steps[i].pipelined;
	}
	s->stride = widest;
	s->window = pipelined && widest <= XPI_SCHED_WINDOW_OPS ? XPI_SCHED_WINDOW : 1;
	unsigned need = s->window * s->stride, sts_cap = s->reqs_cap;
	if (grow((void **)&s->sts, &sts_cap, need, sizeof(*s->sts), s->sts_inline) < 0 ||
	    grow((void **)&s->reqs, &s->reqs_cap, need, sizeof(*s->reqs), s->reqs_inline) < 0)
		return xpi_fail(-ENOMEM, "no memory for its requests");
	return 0;
}

/* Posts step @i, the next after those posted. */
static int post_step(struct xpi_sched *s, unsigned i)
{
	const struct xpi_sched_step *st = &s->steps[i];
	uint64_t tag = s->tag_base | st->tag;
	unsigned slot = i % s->window;
	xp_request_t **reqs = slot_reqs(s, i);
	s->pending[slot] = 0;
	s->nposted++; /* what did get posted is cancelled if the rest fails */
	int rc = 0;
	for (unsigned k = 0; k < st->nops; k++) {
		const struct xpi_sched_op *op = &s->ops[st->first + k];
		reqs[k] = NULL;
		if (rc == 0)
			rc = op->send ? xpi_coll_isend(s->comm, op->buf, op->len, op->peer, tag,
						       &reqs[k]) :
					xpi_coll_irecv(s->comm, op->buf, op->len, op->peer, tag,
						       &reqs[k]);
		s->pending[slot] += reqs[k] != NULL;
	}
	return rc;
}

static bool overlap(const void *a, size_t an, const void *b, size_t bn)
{
	const uint8_t *x = a, *y = b;
	return an != 0 && bn != 0 && x < y + bn && y < x + an;
}

/* Whether step @b may be in flight beside @a, earlier and not yet done
 * (its messages, then its reduction): @b reads nothing @a writes and
 * writes nothing @a reads or writes. @b's own reduction runs after @a's. */
static bool independent(const struct xpi_sched *s, const struct xpi_sched_step *a,
			const struct xpi_sched_step *b)
{
	size_t red = a->count * s->how.elem;
	for (unsigned j = 0; j < b->nops; j++) {
		const struct xpi_sched_op *y = &s->ops[b->first + j];
		for (unsigned i = 0; i < a->nops; i++) {
			const struct xpi_sched_op *x = &s->ops[a->first + i];
			if ((!x->send || !y->send) && overlap(x->buf, x->len, y->buf, y->len))
				return false;
		}
		if (overlap(a->acc, red, y->buf, y->len))
			return false;
		if (!y->send && (overlap(a->in, red, y->buf, y->len) ||
				 (a->one != NULL && overlap(a->one, red, y->buf, y->len))))
			return false;
	}
	return true;
}

/*
 * Posts the pipelined steps that follow those posted, while the window has
 * room and each is independent of every step before it not yet done, and
 * of @reducing (the step whose reduction is about to run) if set. Stops
 * at the first that is not. 0, or the failure (@failed: that step).
 */
static int post_ahead(struct xpi_sched *s, const struct xpi_sched_step *reducing, unsigned *failed)
{
	while (s->nposted < s->window) {
		unsigned c = s->cur + s->nposted;
		if (c >= s->nsteps)
			return 0;
		const struct xpi_sched_step *b = &s->steps[c];
		if (!b->pipelined || b->poll != NULL ||
		    (reducing != NULL && !independent(s, reducing, b)))
			return 0;
		for (unsigned a = s->cur; a < c; a++)
			if (s->steps[a].poll != NULL || !independent(s, &s->steps[a], b))
				return 0;
		int rc = post_step(s, c);
		if (rc < 0) {
			*failed = c;
			return rc;
		}
	}
	return 0;
}

/* Finishes the ops of posted step @i that are done. 0, or a failure. */
static int collect(struct xpi_sched *s, unsigned i, char *why, size_t n)
{
	const struct xpi_sched_step *st = &s->steps[i];
	xp_request_t **reqs = slot_reqs(s, i);
	xp_status_t *sts = s->sts + (i % s->window) * s->stride;
	for (unsigned k = 0; k < st->nops; k++) {
		if (reqs[k] == NULL || !xpi_request_done(reqs[k]))
			continue;
		const struct xpi_sched_op *op = &s->ops[st->first + k];
		int rc = xp_wait(&reqs[k], 0, &sts[k]);
		s->pending[i % s->window]--;
		if (rc == -EMSGSIZE || (rc == 0 && !op->send && sts[k].length != op->len)) {
			snprintf(why, n,
				 "rank %d sent %zu bytes where %zu were expected (step %u): the "
				 "members disagree on the count, the type or the root",
				 op->peer, sts[k].length, op->len, st->tag);
			return -EINVAL;
		}
		if (rc < 0) {
			snprintf(why, n, "step %u, %s rank %d: %s", st->tag,
				 op->send ? "sending to" : "receiving from", op->peer,
				 xp_error_detail());
			return rc;
		}
	}
	return 0;
}

/* Fails @s for step @i that could not be posted; false then. */
static bool posted_or_fail(struct xpi_sched *s, int rc, unsigned i)
{
	if (rc < 0)
		fail(s, rc, "posting step %u: %s", s->steps[i].tag, xp_error_detail());
	return rc >= 0;
}

/* Runs @s as far as it goes without blocking. */
static void advance(struct xpi_sched *s)
{
	char why[512];
	if (!s->done && s->stride == 0 && size_slots(s) < 0) {
		fail(s, -ENOMEM, "%s", xp_error_detail());
		return;
	}
	while (!s->done) {
		unsigned failed = s->cur;
		if (s->nposted == 0) {
			if (s->cur == s->nsteps) {
				conclude(s, 0, "");
				return;
			}
			if (!posted_or_fail(s, post_step(s, s->cur), s->cur))
				return;
		}
		if (!posted_or_fail(s, post_ahead(s, NULL, &failed), failed))
			return;
		const struct xpi_sched_step *cur = &s->steps[s->cur];
		unsigned slot = s->cur % s->window;
		int rc = 0;
		if (cur->poll != NULL) {
			/* Polled first: progress only while it waits (for the rank's
			 * messages, and word of lost members). */
			rc = cur->poll(s, why, sizeof(why));
			s->pending[slot] = rc == 0; /* waiting, as for a message */
			if (rc == 0)
				xp_progress(s->comm->ctx);
			if (rc > 0)
				rc = 0;
		} else {
			xp_progress(s->comm->ctx);
			for (unsigned i = s->cur; rc == 0 && i < s->cur + s->nposted; i++)
				rc = collect(s, i, why, sizeof(why));
		}
		if (rc < 0) {
			/* A step that failed because some member died: name that one
			 * (the step's own peer may only be its victim). */
			char lost_why[128];
			int lost = rc != -EINVAL ?
					   lost_member(s, lost_why, sizeof(lost_why), NULL) :
					   -1;
			if (lost >= 0)
				fail(s, -EPIPE,
				     "rank %d of it is lost (%s); the collective cannot "
				     "complete (%.200s)",
				     lost, lost_why, why);
			else
				fail(s, rc, "%s", why);
			return;
		}
		if (s->pending[slot] > 0) {
			char lost_why[128];
			bool left = false;
			int lost = lost_member(s, lost_why, sizeof(lost_why), &left);
			/* Only members that finalized are gone: they left because the
			 * collective failed on them, so the one that died is about to
			 * be seen here too; give it a moment, to name it. */
			int64_t now = left ? xpi_now_ns() : 0;
			if (left && s->left_seen_ns == 0)
				s->left_seen_ns = now;
			if (left && now - s->left_seen_ns < LEFT_GRACE_NS)
				lost = -1;
			if (lost >= 0) {
				fail(s, -EPIPE,
				     "rank %d of it is lost (%s); the collective cannot "
				     "complete",
				     lost, lost_why);
			} else if (xpi_now_ns() >= s->deadline) {
				/* The deadline is the context's timeout or, if
				 * shorter, the program's wait's: say how long it
				 * waited. */
				fail(s, -ETIMEDOUT,
				     "timed out in step %u of %u after %lld ms (a member not "
				     "calling the same collective, or stuck outside xport calls?)",
				     s->cur + 1, s->nsteps,
				     (long long)((xpi_now_ns() - s->started) / 1000000));
			}
			return;
		}
		const struct xpi_sched_step *st = &s->steps[s->cur];
		s->cur++;
		s->nposted--;
		if (st->count == 0)
			continue;
		/* What can move meanwhile is posted before the reduction runs. */
		if (!posted_or_fail(s, post_ahead(s, st, &failed), failed))
			return;
		if (st->one != NULL)
			s->how.fn3(st->acc, st->one, st->in, st->count, &s->how);
		else
			s->how.fn(st->acc, st->in, st->count, &s->how);
	}
}

/* Advances @s unless another thread is advancing it. */
static void try_advance(struct xpi_sched *s)
{
	int expected = 0;
	if (!atomic_compare_exchange_strong(&s->busy, &expected, 1))
		return;
	advance(s);
	atomic_store(&s->busy, 0);
}

/* Advances every collective in progress on the rank but @self (or NULL). */
static void advance_others(xp_context_t *ctx, struct xpi_sched *self)
{
	struct xpi_sched *todo[16];
	unsigned n = 0;
	/* The usual case, nothing else in progress: no lock. */
	if (atomic_load_explicit(&ctx->coll_nactive, memory_order_relaxed) <=
	    (self != NULL && self->listed ? 1 : 0))
		return;
	pthread_mutex_lock(&ctx->comm_lock);
	for (struct xpi_dlink *l = ctx->coll_active.next; l != &ctx->coll_active && n < 16;
	     l = l->next) {
		struct xpi_sched *o = xpi_container_of(l, struct xpi_sched, link);
		int expected = 0;
		if (o != self && atomic_compare_exchange_strong(&o->busy, &expected, 1))
			todo[n++] = o;
	}
	pthread_mutex_unlock(&ctx->comm_lock);
	for (unsigned i = 0; i < n; i++) {
		advance(todo[i]);
		atomic_store(&todo[i]->busy, 0);
	}
}

void xpi_sched_advance_all(xp_context_t *ctx)
{
	advance_others(ctx, NULL);
}

/* Runs @s until it is done, at most until @deadline (then it fails). */
static void run_until_done(struct xpi_sched *s, int64_t deadline)
{
	xp_context_t *ctx = s->comm->ctx;
	int64_t idle_since = 0;
	unsigned cur = s->cur, rounds = 0;
	while (!s->done) {
		try_advance(s);
		if (s->done)
			break;
		advance_others(ctx, s);
		if (s->cur != cur) {
			cur = s->cur;
			rounds = 0;
			idle_since = 0;
			continue;
		}
		if (++rounds < ctx->spin_rounds)
			continue;
		int64_t now = xpi_now_ns();
		if (now >= deadline && deadline < s->deadline) {
			/* The program's own wait ended first. */
			s->deadline = now;
			continue;
		}
		if (idle_since == 0)
			idle_since = now;
		if (now - idle_since < YIELD_NS) {
			sched_yield();
			continue;
		}
		if (s->cur < s->nsteps && s->steps[s->cur].poll != NULL) {
			/* What it waits for is a store into shared memory, which
			 * rings no doorbell: short naps, not the engine's sleep. */
			struct timespec nap = { 0, POLL_NAP_NS };
			nanosleep(&nap, NULL);
			continue;
		}
		if (!xpi_owner_try_acquire(ctx)) {
			sched_yield();
			continue;
		}
		int64_t until = now + NAP_NS;
		xpi_engine_sleep(ctx, until, NULL); /* gives the token back */
	}
}

static bool hook_advance(xp_request_t *r)
{
	struct xpi_sched *s = r->coll;
	try_advance(s);
	if (!s->done)
		advance_others(r->ctx, s);
	return s->done;
}

static void hook_wait(xp_request_t *r, int timeout_ms)
{
	struct xpi_sched *s = r->coll;
	int64_t deadline = INT64_MAX;
	if (timeout_ms >= 0)
		deadline = xpi_now_ns() + (int64_t)timeout_ms * 1000000;
	run_until_done(s, deadline);
}

static void hook_destroy(xp_request_t *r)
{
	xpi_sched_free(r->coll);
	r->coll = NULL;
}

static const struct xpi_coll_hooks sched_hooks = {
	.advance = hook_advance,
	.wait = hook_wait,
	.destroy = hook_destroy,
};

static void list_it(struct xpi_sched *s)
{
	pthread_mutex_lock(&s->comm->ctx->comm_lock);
	xpi_dlist_push_tail(&s->comm->ctx->coll_active, &s->link);
	atomic_fetch_add(&s->comm->ctx->coll_nactive, 1);
	pthread_mutex_unlock(&s->comm->ctx->comm_lock);
	s->listed = true;
}

int xpi_sched_start(struct xpi_sched *s, xp_request_t **req)
{
	xp_request_t *r = xpi_request_new(s->comm->ctx, XPI_OP_COLL);
	if (r == NULL) {
		xpi_sched_free(s);
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory for the request", s->comm->rank,
				s->call);
	}
	r->comm_obj = s->comm;
	r->coll = s;
	r->coll_hooks = &sched_hooks;
	s->req = r;
	list_it(s);
	/* The first step now, so that its messages are on their way even if
	 * the program computes a while before it tests. */
	try_advance(s);
	*req = r;
	return 0;
}

int xpi_sched_run(struct xpi_sched *s)
{
	/* Not listed: its own thread runs it to the end, and runs the
	 * others' while it waits. */
	run_until_done(s, INT64_MAX);
	int rc = s->rc;
	xpi_sched_free(s);
	return rc;
}
