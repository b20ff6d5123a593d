/* SPDX-License-Identifier: MIT */
/*
 * The owner's side of a rank: the owner token, the command queue, and what
 * happens to a message from its arrival to the completion of the receive
 * that takes it. Everything below except xpi_engine_submit() and
 * xpi_owner_release() runs with the token held.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "compiler.h"
#include "engine.h"
#include "ep.h"
#include "log.h"

/* How a receive and a message got on (see take_message). */
enum take_result {
	TAKE_CONSUMED, /* the receive has the message (or is fetching it) */
	TAKE_KEEP,     /* the receive failed (-ENOBUFS); the message stays queued */
	TAKE_DROPPED,  /* the sender withdrew the message; the receive is untouched */
};

static void run_cmd(xp_context_t *ctx, struct xpi_cmd *cmd);
static void flush_reposts_slow(xp_context_t *ctx);
static void set_cancel_detail(xp_context_t *ctx, xp_request_t *r, int reason);
static void fail_wildcard(xp_context_t *ctx, xp_request_t *r);

/* The checks below run on every call and every round of a waiter: inline
 * and first, so that the common case (nothing queued, nothing to repost,
 * no send waiting for room) costs a few loads and no call. */

/* What xpi_mpsc_pop looks at first: nothing was pushed since the last pop. */
static inline bool cmdq_empty(xp_context_t *ctx)
{
	return ctx->cmdq.head == &ctx->cmdq.stub &&
	       atomic_load_explicit(&ctx->cmdq.stub.next, memory_order_acquire) == NULL;
}

static inline void flush_reposts(xp_context_t *ctx)
{
	if (xpi_unlikely(!xpi_dlist_empty(&ctx->reposts)))
		flush_reposts_slow(ctx);
}

static int drain_cmdq_slow(xp_context_t *ctx)
{
	int n = 0;
	struct xpi_qnode *node;
	while ((node = xpi_mpsc_pop(&ctx->cmdq)) != NULL) {
		run_cmd(ctx, xpi_container_of(node, struct xpi_cmd, node));
		n++;
	}
	return n;
}

static inline int drain_cmdq(xp_context_t *ctx)
{
	return cmdq_empty(ctx) ? 0 : drain_cmdq_slow(ctx);
}

int xpi_engine_run(xp_context_t *ctx)
{
	ctx->in_round = true;
	ctx->round_now = 0;
	int n = drain_cmdq(ctx);
	if (ctx->npending != 0)
		n += xpi_engine_retry_pending(ctx);
	for (int i = 0; i < ctx->ntls; i++)
		if (ctx->tls[i].ops->progress != NULL) /* NULL: nothing to poll (self) */
			n += ctx->tls[i].ops->progress(ctx->tls[i].tl);
	/* A clock read only with timers, and none more if the round read it. */
	if (xpi_unlikely(ctx->ntimers != 0))
		n += xpi_timers_run(ctx, xpi_engine_now(ctx));
	flush_reposts(ctx);
	ctx->in_round = false;
	return n;
}

int xpi_owner_release_quiet(xp_context_t *ctx)
{
	int n = 0;
	if (ctx->serialized)
		return 0; /* commands of other ranks wait for this rank's next call */
	for (;;) {
		/* seq_cst store then seq_cst load of the queue tail: pairs with
		 * the seq_cst exchange in xpi_mpsc_push, so either the producer
		 * sees the token free or we see its command. */
		atomic_store_explicit(&ctx->owner, 0, memory_order_seq_cst);
		if (!xpi_mpsc_maybe_nonempty(&ctx->cmdq) || !xpi_owner_try_acquire(ctx))
			return n;
		n += drain_cmdq(ctx);
		flush_reposts(ctx);
	}
}

int xpi_owner_release(xp_context_t *ctx)
{
	int n = xpi_owner_release_quiet(ctx);
	/* A thread of this rank asleep in xpi_engine_sleep may be waiting for
	 * what we just did: wake it (once per sleep; a missed one costs it at
	 * most its sleep's bound). */
	if (xpi_unlikely(atomic_load_explicit(&ctx->sleepers, memory_order_seq_cst) != 0))
		xpi_engine_wake(ctx);
	return n;
}

int xpi_engine_flush(xp_context_t *ctx, int timeout_ms)
{
	int64_t deadline = xpi_now_ns() + (int64_t)timeout_ms * 1000000;
	for (;;) {
		bool pending = false;
		if (!xpi_owner_try_acquire(ctx)) {
			/* A waiter holds the token across its spin: ask for it. */
			atomic_store_explicit(&ctx->token_wanted, 1, memory_order_relaxed);
		} else {
			xpi_engine_run(ctx);
			pending = ctx->npending != 0;
			for (int i = 0; i < ctx->ntls && !pending; i++)
				pending = ctx->tls[i].ops->tx_pending(ctx->tls[i].tl);
			xpi_owner_release(ctx);
			if (!pending)
				return 0;
		}
		if (xpi_now_ns() > deadline)
			return -ETIMEDOUT;
		sched_yield();
	}
}

void xpi_engine_submit(xp_context_t *ctx, struct xpi_cmd *cmd)
{
	if (xpi_owner_try_acquire(ctx)) {
		/* Older commands first, so one thread's operations keep their
		 * order. The drain stops early at a push another thread has
		 * half done, and an earlier command of this very thread may sit
		 * behind it: then this one must queue behind it too, never run
		 * ahead (the release below drains the rest). Whether anything
		 * is left is asked as the consumer: the producers' hint can say
		 * "empty" while a command it could not pop waits at the head
		 * (xpi_mpsc_empty), and running this one then put a thread's
		 * operations out of order (a cancel before its post, a receive
		 * before the one posted ahead of it). */
		drain_cmdq(ctx);
		if (xpi_unlikely(!ctx->serialized && !xpi_mpsc_empty(&ctx->cmdq)))
			xpi_mpsc_push(&ctx->cmdq, &cmd->node);
		else if (xpi_likely(cmd->type == XPI_CMD_POST))
			xpi_engine_exec_post(ctx, xpi_container_of(cmd, xp_request_t, post_cmd));
		else
			run_cmd(ctx, cmd);
		flush_reposts(ctx);
		xpi_owner_release(ctx);
		return;
	}
	xpi_mpsc_push(&ctx->cmdq, &cmd->node);
	/* The push's seq_cst exchange and this seq_cst load pair with the
	 * owner's seq_cst release store and its seq_cst look at the queue
	 * (xpi_owner_release): in the single total order of those four either
	 * the owner sees our command or we see the token free. A relaxed
	 * load here could read a stale "taken" (allowed by C11 even where x86
	 * would not) and strand the command. */
	if (atomic_load_explicit(&ctx->owner, memory_order_seq_cst) == 0 &&
	    xpi_owner_try_acquire(ctx)) {
		drain_cmdq(ctx);
		flush_reposts(ctx);
		xpi_owner_release(ctx);
	}
}

/* ------------------------------------------------------------------------- */
/* Message descriptors                                                       */

struct xpi_msg *xpi_msg_alloc(xp_context_t *ctx)
{
	struct xpi_msg *m = ctx->free_msgs;
	if (m != NULL)
		ctx->free_msgs = *(struct xpi_msg **)m;
	else
		m = malloc(sizeof(*m));
	return m;
}

void xpi_msg_free(xp_context_t *ctx, struct xpi_msg *m)
{
	if (m->sized) {
		free(m);
		return;
	}
	*(struct xpi_msg **)m = ctx->free_msgs;
	ctx->free_msgs = m;
}

/* Copies a transient message into an owned descriptor. NULL if out of
 * memory. A long inline payload gets a descriptor sized for it; its memory
 * is bounded by the sender's eager credit like any buffered payload. */
static struct xpi_msg *msg_clone(xp_context_t *ctx, const struct xpi_msg *src)
{
	bool sized = src->kind == XPI_MSG_INLINE && src->len > XPI_INLINE_MAX;
	struct xpi_msg *m =
		sized ? malloc(sizeof(*m) - XPI_INLINE_MAX + src->len) : xpi_msg_alloc(ctx);
	if (m == NULL)
		return NULL;
	memcpy(m, src, offsetof(struct xpi_msg, store));
	m->sized = sized;
	m->withdrawn = false;
	if (src->kind == XPI_MSG_INLINE) {
		if (src->len != 0)
			memcpy(m->store, src->data, src->len);
		m->data = m->store;
	} else if (src->kind == XPI_MSG_RTS && src->desc_len != 0) {
		/* The bulk lane's descriptor; XPI_RNDV_DESC_MAX fits the store. */
		memcpy(m->store, src->data, src->desc_len);
		m->data = m->store;
	}
	return m;
}

static inline bool msg_is_eager(const struct xpi_msg *m)
{
	return m->kind != XPI_MSG_RTS;
}

/* An eager message was consumed: its sender gets the credit back (the
 * transport carries the count to it). */
static inline void credit_return(xp_context_t *ctx, const struct xpi_msg *m)
{
	uint64_t cost = xpi_eager_cost(m->len);
	ctx->peers[m->u.key.src].eager_returned += cost;
	ctx->eager_returned_total += cost;
}

static void stat_add(_Atomic uint64_t *c, int64_t v)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + (uint64_t)v,
			      memory_order_relaxed);
}

static void unexp_account(xp_context_t *ctx, const struct xpi_msg *m, int dir)
{
	ctx->peers[m->u.key.src].unexp_count += (uint32_t)dir;
	/* The program's count leaves out collectives' and the control
	 * path's messages: a peer one step ahead sends them at any time, so
	 * a program checking that its own messages all matched would see
	 * them come and go (xp_stats_t). Their bytes count all the same. */
	if (!xpi_comm_id_is_coll(m->u.key.comm))
		stat_add(&ctx->st_unexp_now, dir);
	if (!msg_is_eager(m))
		return;
	stat_add(&ctx->st_unexp_bytes_now, dir * (int64_t)m->len);
	uint64_t now = atomic_load_explicit(&ctx->st_unexp_bytes_now, memory_order_relaxed);
	if (now > atomic_load_explicit(&ctx->st_unexp_bytes_max, memory_order_relaxed))
		atomic_store_explicit(&ctx->st_unexp_bytes_max, now, memory_order_relaxed);
}

/* Releases what a message holds without delivering it. No credit goes
 * back: a duplicate was never charged twice, and a stream that broke has
 * no credit left to speak of. */
static void msg_release(xp_context_t *ctx, struct xpi_msg *m)
{
	if (m->kind == XPI_MSG_BUF && m->buf != NULL)
		xpi_buf_put(m->buf);
	else if (m->kind == XPI_MSG_RTS)
		ctx->tls[m->tl].ops->msg_release(ctx->tls[m->tl].tl, m);
}

/* A message that could not be kept (out of memory) breaks its sender's
 * stream: what follows it would be matched out of order, so the sender is
 * treated as lost, its operations fail naming it, and it learns the same
 * when its own operations with this rank fail. */
static void stream_broken(xp_context_t *ctx, struct xpi_msg *m)
{
	int src = m->u.key.src;
	char why[96];
	snprintf(why, sizeof(why),
		 "sent message %u (tag 0x%llx) that rank %d had no memory to keep", m->peer_seq,
		 (unsigned long long)m->u.key.tag, ctx->rank);
	msg_release(ctx, m);
	xpi_engine_peer_failed(ctx, src, -ENOMEM, why);
}

/* ------------------------------------------------------------------------- */
/* Completing receives                                                       */

/* The call the program made: xp_recv, or xp_irecv (then waited for). */
static const char *op_name(const xp_request_t *r)
{
	if (r->comm == XPI_EP_COMM)
		return r->op == XPI_OP_SEND ? "xp_ep_isend" : "xp_ep_irecv";
	switch (r->op) {
	case XPI_OP_SEND:
		return r->blocking ? "xp_send" : "xp_isend";
	case XPI_OP_RECV:
		return r->blocking ? "xp_recv" : "xp_irecv";
	default:
		return r->blocking ? "xp_recv_buf" : "xp_irecv_buf";
	}
}

/* A deadline is xp_wait's: "xp_recv", or "xp_wait on an xp_irecv". */
static const char *timed_op_name(const xp_request_t *r, char *buf, size_t n)
{
	if (r->blocking)
		return op_name(r);
	snprintf(buf, n, "xp_wait on an %s", op_name(r));
	return buf;
}

static void set_truncation_detail(xp_context_t *ctx, xp_request_t *r)
{
	xpi_request_set_detail(r,
			       "rank %d: %s from rank %d tag 0x%llx on communicator %u: message of "
			       "%zu bytes truncated to the %zu-byte receive buffer",
			       ctx->rank, op_name(r), r->status.source,
			       (unsigned long long)r->status.tag, r->comm, r->status.length,
			       r->len);
}

static void finish_recv(xp_context_t *ctx, xp_request_t *r, int err)
{
	if (err == 0 && r->op == XPI_OP_RECV && r->status.length > r->len) {
		err = -EMSGSIZE;
		set_truncation_detail(ctx, r);
	}
	stat_add(&ctx->st_recvs, 1);
	xpi_request_complete(r, err);
}

/*
 * Gives message @m to receive @r. Eager payloads are copied (or, for
 * pooled receives, handed over); rendezvous payloads are fetched by the
 * transport straight into the receive buffer.
 */
static enum take_result take_message(xp_context_t *ctx, xp_request_t *r, struct xpi_msg *m)
{
	struct xp_buf *pb = NULL;

	r->status.source = m->u.key.src;
	r->status.tag = m->u.key.tag;
	r->status.length = m->len;

	if (r->op == XPI_OP_RECV_BUF && !(m->kind == XPI_MSG_BUF)) {
		if (xpi_pool_get(ctx->pool, m->len, &pb) < 0) {
			xpi_request_set_detail(
				r,
				"rank %d: xp_recv_buf from rank %d tag 0x%llx: no pooled "
				"buffer of %llu bytes is free; the message stays queued",
				ctx->rank, m->u.key.src, (unsigned long long)m->u.key.tag,
				(unsigned long long)m->len);
			stat_add(&ctx->st_recvs, 1);
			xpi_request_complete(r, -ENOBUFS);
			return TAKE_KEEP;
		}
		pb->len = m->len;
	}

	if (m->kind == XPI_MSG_RTS) {
		void *dst = pb != NULL ? pb->data : r->buf;
		size_t cap = pb != NULL ? m->len : (r->len < m->len ? r->len : m->len);
		r->status.buf = pb;
		/* A descriptor names the peer's bulk lane; without one, the
		 * transport that delivered the announcement serves it. A pooled
		 * destination's registration is its buffer's (xpi_buf_handle). */
		int lane = m->desc_len != 0 ? ctx->peers[m->u.key.src].tl_bulk : m->tl;
		const struct xpi_tl_slot *t = &ctx->tls[lane];
		const struct xpi_reg *dst_reg = pb != NULL ? NULL : xpi_reg_find(ctx, dst, cap);
		r->tl = (uint8_t)lane;
		int rc = t->ops->rndv_fetch(t->tl, m, dst, cap, r, dst_reg);
		if (rc == -ECANCELED) {
			r->status.buf = NULL;
			if (pb != NULL)
				xpi_buf_put(pb);
			return TAKE_DROPPED;
		}
		if (rc == 1) /* the transport calls xpi_engine_rndv_done() later */
			r->proto = XPI_PROTO_RNDV;
		else
			xpi_engine_rndv_done(ctx, r, rc);
		return TAKE_CONSUMED;
	}

	const void *src = m->kind == XPI_MSG_INLINE ? m->data : m->buf->data;
	if (r->op == XPI_OP_RECV_BUF) {
		if (m->kind == XPI_MSG_BUF) {
			pb = m->buf; /* zero copy: the sender filled our pool's buffer */
			pb->len = m->len;
		} else if (m->len != 0) {
			xpi_copy(pb->data, src, m->len);
		}
		r->status.buf = pb;
	} else {
		size_t n = m->len < r->len ? m->len : r->len;
		xpi_copy(r->buf, src, n);
		if (m->kind == XPI_MSG_BUF)
			xpi_buf_put(m->buf);
	}
	credit_return(ctx, m);
	finish_recv(ctx, r, 0);
	return TAKE_CONSUMED;
}

void xpi_engine_rndv_done(xp_context_t *ctx, xp_request_t *r, int err)
{
	r->proto = XPI_PROTO_NONE; /* no fetch under way */
	if (err < 0 && r->status.buf != NULL) {
		xpi_buf_put(r->status.buf);
		r->status.buf = NULL;
	}
	if (err < 0 && err != -ECANCELED && r->status.source >= 0 &&
	    ctx->peers[r->status.source].failed != 0) {
		/* The sender was lost before or while it sent: say so by name. */
		xpi_engine_fail_request(ctx, r, r->status.source);
		return;
	}
	if (err == -ECANCELED) {
		/* The sender withdrew the message after this receive took it:
		 * the receive goes back where its number puts it, as if the
		 * message had never been sent. Not here but at the end of the
		 * engine's current step: a transport may say so from inside
		 * rndv_fetch or while it walks its own lists, and taking
		 * another message now would re-enter it. */
		r->status = (xp_status_t){ .source = XP_ANY_SOURCE };
		xpi_dlist_push_tail(&ctx->reposts, &r->pending_link);
		return;
	}
	finish_recv(ctx, r, err);
}

/* ------------------------------------------------------------------------- */
/* Arrivals                                                                  */

/* Matches an in-order message against posted receives, or queues it. */
static void deliver_in_order(xp_context_t *ctx, struct xpi_msg *m, bool owned)
{
	struct xpi_peer *peer = &ctx->peers[m->u.key.src];
	if (xpi_unlikely(owned && m->withdrawn)) { /* taken back while held */
		msg_release(ctx, m);
		xpi_msg_free(ctx, m);
		return;
	}
	peer->nrecvd++;
	peer->last_recvd_tag = m->u.key.tag;

	struct xpi_posted *p;
	while ((p = xpi_match_arrive(&ctx->match, &m->u.key)) != NULL) {
		xp_request_t *r = xpi_container_of(p, xp_request_t, posted);
		enum take_result res = take_message(ctx, r, m);
		if (res == TAKE_CONSUMED) {
			if (owned)
				xpi_msg_free(ctx, m);
			return;
		}
		if (res == TAKE_DROPPED) {
			xpi_match_repost(&ctx->match, p);
			if (owned)
				xpi_msg_free(ctx, m);
			return;
		}
		/* TAKE_KEEP: that receive failed; another may still take it. */
	}
	if (!owned) {
		struct xpi_msg *copy = msg_clone(ctx, m);
		if (xpi_unlikely(copy == NULL)) {
			stream_broken(ctx, m);
			return;
		}
		m = copy;
	}
	xpi_match_add_unexpected(&ctx->match, &m->u);
	unexp_account(ctx, m, +1);
}

/* A copy of a message that came early, held in sequence order until the
 * gap before it fills; one already held (a retransmission) is dropped. */
static void hold_early(xp_context_t *ctx, struct xpi_peer *peer, struct xpi_msg *msg)
{
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &peer->held) {
		struct xpi_msg *h = xpi_container_of(pos, struct xpi_msg, held_link);
		int32_t d = (int32_t)(h->peer_seq - msg->peer_seq);
		if (d == 0) {
			msg_release(ctx, msg);
			return;
		}
		if (d > 0)
			break;
	}
	struct xpi_msg *copy = msg_clone(ctx, msg);
	if (xpi_unlikely(copy == NULL)) {
		stream_broken(ctx, msg);
		return;
	}
	xpi_dlist_push_tail(pos, &copy->held_link);
}

void xpi_engine_deliver(xp_context_t *ctx, struct xpi_msg *msg)
{
	struct xpi_peer *peer = &ctx->peers[msg->u.key.src];
	int32_t ahead = (int32_t)(msg->peer_seq - peer->recv_seq);

	if (xpi_unlikely(ahead != 0 || peer->failed != 0)) {
		/* A retransmission of what was delivered before; or anything
		 * from a lost peer, whose stream may have a hole in it. */
		if (ahead < 0 || peer->failed != 0)
			msg_release(ctx, msg);
		else
			hold_early(ctx, peer, msg);
		return;
	}
	deliver_in_order(ctx, msg, false);
	peer->recv_seq++;
	while (!xpi_dlist_empty(&peer->held)) {
		struct xpi_msg *h = xpi_container_of(peer->held.next, struct xpi_msg, held_link);
		if (h->peer_seq != peer->recv_seq)
			break;
		xpi_dlist_remove(&h->held_link);
		deliver_in_order(ctx, h, true);
		peer->recv_seq++;
	}
	if (xpi_unlikely(peer->bye_wait))
		xpi_ep_caught_up(ctx, (int)(peer - ctx->peers));
}

/* ------------------------------------------------------------------------- */
/* Posting                                                                   */

/* Queued receive @r can never match: its source (or, for a wildcard,
 * every other rank) is lost. Fails it, naming them; false if it may. */
static bool fail_if_unreachable(xp_context_t *ctx, xp_request_t *r)
{
	if (r->peer >= 0) {
		if (xpi_likely(ctx->peers[r->peer].failed == 0))
			return false;
		xpi_match_cancel(&ctx->match, &r->posted);
		xpi_engine_fail_request(ctx, r, r->peer);
		return true;
	}
	if (xpi_likely(ctx->nfailed == 0) || ctx->nfailed < ctx->size - 1)
		return false;
	xpi_match_cancel(&ctx->match, &r->posted);
	fail_wildcard(ctx, r);
	return true;
}

/*
 * Finds @r a message among the unexpected ones, or queues it. A new
 * receive gets its number now; a reposted one (@repost) keeps its own and
 * goes back to its place in the posting order, and it must search the
 * unexpected messages again: a message that came while it was away (taking
 * a message its sender then withdrew) matched no queued receive, so it is
 * there, and it is this receive's.
 */
static void recv_search(xp_context_t *ctx, xp_request_t *r, bool repost)
{
	for (;;) {
		struct xpi_unexp *u = repost ? xpi_match_repost_search(&ctx->match, &r->posted) :
					       xpi_match_post(&ctx->match, &r->posted);
		repost = true; /* numbered once; a retry below is a repost */
		if (u == NULL) {
			fail_if_unreachable(ctx, r);
			return;
		}
		struct xpi_msg *m = xpi_container_of(u, struct xpi_msg, u);
		unexp_account(ctx, m, -1);
		enum take_result res = take_message(ctx, r, m);
		if (res == TAKE_CONSUMED) {
			xpi_msg_free(ctx, m);
			return;
		}
		if (res == TAKE_KEEP) {
			xpi_match_return_unexpected(&ctx->match, &m->u);
			unexp_account(ctx, m, +1);
			return;
		}
		xpi_msg_free(ctx, m); /* withdrawn by its sender: look again */
	}
}

/* Whether unexpected message @u is the rendezvous announcement number
 * *@arg of its sender (xpi_engine_withdraw). */
static bool peer_seq_matches(const struct xpi_unexp *u, const void *arg)
{
	const struct xpi_msg *m = xpi_container_of(u, struct xpi_msg, u);
	return m->kind == XPI_MSG_RTS && m->peer_seq == *(const uint32_t *)arg;
}

/* A receive names @src for the first time: transports that connect on
 * first need make the pair now (transport.h, peer_wanted). */
static void want_peer(xp_context_t *ctx, int src)
{
	struct xpi_peer *peer = &ctx->peers[src];
	peer->wanted = true;
	const struct xpi_tl_slot *small = &ctx->tls[peer->tl_small];
	const struct xpi_tl_slot *bulk = &ctx->tls[peer->tl_bulk];
	if (small->ops->peer_wanted != NULL)
		small->ops->peer_wanted(small->tl, src);
	if (bulk != small && bulk->ops->peer_wanted != NULL)
		bulk->ops->peer_wanted(bulk->tl, src);
}

static void exec_recv(xp_context_t *ctx, xp_request_t *r)
{
	if (r->peer >= 0 && xpi_unlikely(!ctx->peers[r->peer].wanted))
		want_peer(ctx, r->peer);
	r->posted.key.comm = r->comm;
	r->posted.key.src = r->peer;
	r->posted.key.tag = r->tag;
	r->posted.key.mask = r->mask;
	recv_search(ctx, r, false);
}

/* Puts back the receives whose message was withdrawn (xpi_engine_rndv_done).
 * One that was cancelled meanwhile ends now: its cancel found it away
 * and left it, and a cancel is asked for only once. */
static void flush_reposts_slow(xp_context_t *ctx)
{
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&ctx->reposts)) != NULL) {
		xp_request_t *r = xpi_container_of(l, xp_request_t, pending_link);
		int reason = atomic_load_explicit(&r->cancel_reason, memory_order_relaxed);
		if (reason != 0) {
			set_cancel_detail(ctx, r, reason);
			stat_add(&ctx->st_recvs, 1);
			xpi_request_complete(r, reason);
			continue;
		}
		recv_search(ctx, r, true);
	}
}

/*
 * Announces rendezvous send @r: on the small lane alone, or, when the
 * peer's bulk lane is another transport, offered there and announced with
 * its descriptor. Sets r->tl to the transport that holds it before that
 * transport has it (it may complete at once and be freed by its waiter).
 */
static int send_rndv(xp_context_t *ctx, struct xpi_peer *peer, xp_request_t *r,
		     const struct xpi_msg_hdr *h)
{
	const struct xpi_tl_slot *small = &ctx->tls[peer->tl_small];
	const struct xpi_reg *reg = xpi_reg_find(ctx, r->buf, r->len);
	if (peer->tl_bulk == peer->tl_small) {
		r->tl = peer->tl_small;
		return small->ops->send_rts(small->tl, r->peer, h, r, reg, NULL);
	}
	const struct xpi_tl_slot *bulk = &ctx->tls[peer->tl_bulk];
	struct xpi_rndv_desc desc = { 0 };
	r->tl = peer->tl_bulk;
	int rc = bulk->ops->rndv_offer(bulk->tl, r->peer, r, reg, &desc);
	if (rc < 0)
		return rc;
	if (xpi_unlikely(desc.len > XPI_RNDV_DESC_MAX))
		return -EPROTO; /* a backend bug, said at once */
	/* The peer cannot fetch what it has not heard of, so until the
	 * announcement is out the offer can always be taken back. */
	rc = small->ops->send_rts(small->tl, r->peer, h, r, reg, &desc);
	if (rc < 0 && bulk->ops->send_cancel(bulk->tl, r) != 0)
		return -EPROTO;
	return rc;
}

/* Tries to hand a send to its transport. Returns -EAGAIN if it must wait. */
static int try_send(xp_context_t *ctx, xp_request_t *r)
{
	struct xpi_peer *peer = &ctx->peers[r->peer];
	const struct xpi_tl_slot *t = &ctx->tls[peer->tl_small];
	struct xpi_msg_hdr h = {
		.comm = r->comm,
		.src = ctx->rank,
		.tag = r->tag,
		.len = r->len,
		.peer_seq = peer->send_seq,
	};
	int rc;

	if (r->proto == XPI_PROTO_NONE)
		r->proto = r->len < peer->rndv_threshold ? XPI_PROTO_EAGER : XPI_PROTO_RNDV;
	if (r->proto == XPI_PROTO_EAGER) {
		rc = t->ops->send_eager(t->tl, r->peer, &h, r->buf);
		if (rc == 0) {
			peer->send_seq++;
			peer->nsent++;
			peer->last_sent_tag = r->tag;
			stat_add(&ctx->st_eager, 1);
			stat_add(&ctx->st_sends, 1);
			xpi_request_complete(r, 0);
			return 0;
		}
		if (rc != -ENOBUFS)
			goto out;
		/* The receiver's unexpected buffer is full: keep the payload here. */
		r->proto = XPI_PROTO_RNDV;
	}
	/* Once the transport has it, @r may complete (a receive takes it at
	 * once) and be freed by its waiter on another thread: touch it no more. */
	rc = send_rndv(ctx, peer, r, &h);
	if (rc == 0) {
		peer->send_seq++;
		peer->nsent++;
		peer->last_sent_tag = h.tag;
		stat_add(&ctx->st_rndv, 1);
		stat_add(&ctx->st_sends, 1);
		return 0;
	}
out:
	if (rc == -EAGAIN)
		return rc;
	xpi_request_set_detail(r, "rank %d: xp_send to rank %d tag 0x%llx on communicator %u: %s",
			       ctx->rank, r->peer, (unsigned long long)r->tag, r->comm,
			       xp_strerror(rc));
	xpi_request_complete(r, rc);
	return 0;
}

static void exec_send(xp_context_t *ctx, xp_request_t *r)
{
	struct xpi_peer *peer = &ctx->peers[r->peer];
	if (xpi_unlikely(peer->failed != 0)) {
		xpi_engine_fail_request(ctx, r, r->peer);
		return;
	}
	if (!xpi_dlist_empty(&peer->pending) || try_send(ctx, r) == -EAGAIN) {
		xpi_dlist_push_tail(&peer->pending, &r->pending_link);
		/* The peers retry_pending looks at: a range, so a context of a
		 * thousand endpoint slots does not visit them all. */
		int i = r->peer;
		if (ctx->npending == 0 || i < ctx->pend_lo)
			ctx->pend_lo = i;
		if (ctx->npending == 0 || i > ctx->pend_hi)
			ctx->pend_hi = i;
		ctx->npending++;
	}
}

int xpi_engine_retry_pending(xp_context_t *ctx)
{
	int n = 0;
	int hi = ctx->pend_hi;
	for (int i = ctx->pend_lo; i <= hi && ctx->npending != 0; i++) {
		struct xpi_peer *peer = &ctx->peers[i];
		while (!xpi_dlist_empty(&peer->pending)) {
			xp_request_t *r =
				xpi_container_of(peer->pending.next, xp_request_t, pending_link);
			/* Off the list before the send: a send that goes out may
			 * complete, and its waiter may free and reuse @r at once. */
			xpi_dlist_remove(&r->pending_link);
			if (try_send(ctx, r) == -EAGAIN) {
				xpi_dlist_push_tail(peer->pending.next, &r->pending_link);
				break;
			}
			ctx->npending--;
			n++;
		}
	}
	return n;
}

void xpi_engine_exec_post(xp_context_t *ctx, xp_request_t *r)
{
	if (r->op == XPI_OP_SEND)
		exec_send(ctx, r);
	else
		exec_recv(ctx, r);
}

/* ------------------------------------------------------------------------- */
/* Cancelling and timeouts                                                   */

static void describe_peer(xp_context_t *ctx, int peer, char *out, size_t len)
{
	if (peer < 0) {
		snprintf(out, len, "%u unexpected messages are queued from all ranks",
			 ctx->match.unexp_count);
		return;
	}
	const struct xpi_peer *p = &ctx->peers[peer];
	char name[96];
	xpi_peer_name(ctx, peer, name, sizeof(name));
	snprintf(out, len,
		 "with %s so far: %llu messages sent (last tag 0x%llx), %llu received "
		 "(last tag 0x%llx), %u of them unexpected and still queued",
		 name, (unsigned long long)p->nsent, (unsigned long long)p->last_sent_tag,
		 (unsigned long long)p->nrecvd, (unsigned long long)p->last_recvd_tag,
		 p->unexp_count);
}

static void set_cancel_detail(xp_context_t *ctx, xp_request_t *r, int reason)
{
	char peer_text[96], history[256], name[40], mask[40] = "";
	if (r->peer < 0)
		snprintf(peer_text, sizeof(peer_text), "any rank");
	else
		xpi_peer_name(ctx, r->peer, peer_text, sizeof(peer_text));
	describe_peer(ctx, r->peer, history, sizeof(history));
	/* A receive's mask matters; a send's tag is exact. */
	if (r->op != XPI_OP_SEND && r->mask != XP_TAG_EXACT)
		snprintf(mask, sizeof(mask), " mask 0x%llx", (unsigned long long)r->mask);
	if (reason == -ETIMEDOUT)
		xpi_request_set_detail(
			r,
			"rank %d: %s %s %s tag 0x%llx%s on communicator %u timed out "
			"after %lld ms with no matching %s; the peers are probably not running "
			"the same sequence of operations (%s)",
			ctx->rank, timed_op_name(r, name, sizeof(name)),
			r->op == XPI_OP_SEND ? "to" : "from", peer_text, (unsigned long long)r->tag,
			mask, r->comm, (long long)r->waited_ms,
			r->op == XPI_OP_SEND ? "receive" : "message", history);
	else
		xpi_request_set_detail(r,
				       "rank %d: %s %s %s tag 0x%llx on communicator %u cancelled",
				       ctx->rank, op_name(r), r->op == XPI_OP_SEND ? "to" : "from",
				       peer_text, (unsigned long long)r->tag, r->comm);
}

/*
 * A receive whose deadline passed while its rendezvous payload is still to
 * come (the sender does not progress) must still end by its deadline: its
 * transport lets go of it if it can, and drops the rest. True if it did;
 * the caller completes the receive with the timeout and this text.
 */
static bool abort_fetch(xp_context_t *ctx, xp_request_t *r, int reason)
{
	if (reason != -ETIMEDOUT || r->proto != XPI_PROTO_RNDV)
		return false;
	const struct xpi_tl_slot *t = &ctx->tls[r->tl];
	if (t->ops->rndv_abort(t->tl, r) != 0)
		return false;
	r->proto = XPI_PROTO_NONE;
	if (r->status.buf != NULL) {
		xpi_buf_put(r->status.buf);
		r->status.buf = NULL;
	}
	return true;
}

void xpi_engine_exec_cancel(xp_context_t *ctx, xp_request_t *r)
{
	int reason = atomic_load_explicit(&r->cancel_reason, memory_order_relaxed);
	if (xpi_request_done(r))
		return;
	if (r->op != XPI_OP_SEND) {
		if (!xpi_match_cancel(&ctx->match, &r->posted) && !abort_fetch(ctx, r, reason))
			return; /* matched: it completes normally */
	} else if (r->pending_link.next != &r->pending_link) {
		xpi_dlist_remove(&r->pending_link);
		ctx->npending--;
	} else if (r->proto == XPI_PROTO_RNDV) {
		const struct xpi_tl_slot *t = &ctx->tls[r->tl];
		/* -EBUSY: the receiver has it, it completes normally; 1: the
		 * receiver was asked and decides, and the transport completes
		 * it either way (xpi_engine_send_withdrawn, or normally). */
		if (t->ops->send_cancel(t->tl, r) != 0)
			return;
	} else {
		return;
	}
	char name[40];
	if (r->op != XPI_OP_SEND && r->status.source >= 0)
		xpi_request_set_detail(
			r,
			"rank %d: %s from rank %d tag 0x%llx on communicator %u timed out after "
			"%lld ms: it matched a %zu-byte message whose payload rank %d did not send "
			"in time (is that rank stuck outside xport calls?); the payload is dropped",
			ctx->rank, timed_op_name(r, name, sizeof(name)), r->status.source,
			(unsigned long long)r->status.tag, r->comm, (long long)r->waited_ms,
			r->status.length, r->status.source);
	else
		set_cancel_detail(ctx, r, reason);
	xpi_request_complete(r, reason);
}

void xpi_engine_send_withdrawn(xp_context_t *ctx, xp_request_t *r)
{
	int reason = atomic_load_explicit(&r->cancel_reason, memory_order_relaxed);
	set_cancel_detail(ctx, r, reason != 0 ? reason : -ECANCELED);
	xpi_request_complete(r, reason != 0 ? reason : -ECANCELED);
}

int xpi_engine_withdraw(xp_context_t *ctx, int src, uint32_t comm, uint64_t tag, uint32_t peer_seq)
{
	struct xpi_peer *peer = &ctx->peers[src];
	struct xpi_dlink *pos;
	/* Held early: it must still take its place in the sequence, so it
	 * stays, marked, and is dropped when its turn comes. */
	xpi_dlist_for_each(pos, &peer->held) {
		struct xpi_msg *h = xpi_container_of(pos, struct xpi_msg, held_link);
		if (h->peer_seq == peer_seq && h->kind == XPI_MSG_RTS) {
			h->withdrawn = true;
			return 0;
		}
	}
	/* Unexpected: gone, as if never sent. */
	struct xpi_match_key key = { .comm = comm, .src = src, .tag = tag };
	struct xpi_unexp *u =
		xpi_match_find_unexpected(&ctx->match, &key, peer_seq_matches, &peer_seq);
	if (u == NULL)
		return -EBUSY; /* a receive took it: it goes on */
	struct xpi_msg *m = xpi_container_of(u, struct xpi_msg, u);
	xpi_match_remove_unexpected(&ctx->match, u);
	unexp_account(ctx, m, -1);
	msg_release(ctx, m);
	xpi_msg_free(ctx, m);
	return 0;
}

/* ------------------------------------------------------------------------- */
/* Peer failure                                                              */

static void fail_request(xp_context_t *ctx, xp_request_t *r, int peer, int err, const char *why)
{
	char peer_text[96];
	if (r->peer < 0)
		snprintf(peer_text, sizeof(peer_text), "any rank");
	else
		xpi_peer_name(ctx, r->peer, peer_text, sizeof(peer_text));
	char lost[96];
	xpi_peer_name(ctx, peer, lost, sizeof(lost));
	xpi_request_set_detail(r, "rank %d: %s %s %s tag 0x%llx on communicator %u failed: %s %s",
			       ctx->rank, op_name(r), r->op == XPI_OP_SEND ? "to" : "from",
			       peer_text, (unsigned long long)r->tag, r->comm, lost, why);
	if (r->op != XPI_OP_SEND)
		stat_add(&ctx->st_recvs, 1);
	ctx->nlost_ops++;
	xpi_request_complete(r, err);
}

/* Fails the posted receives that name @peer (wildcard ones stay). */
static void fail_named_receives(xp_context_t *ctx, int peer, int err, const char *why)
{
	struct xpi_hash *h = &ctx->match.posted_exact;
	for (uint32_t b = 0; b < h->nbuckets; b++) {
		struct xpi_dlink *pos = h->buckets[b].next;
		while (pos != &h->buckets[b]) {
			struct xpi_posted *pp = xpi_container_of(pos, struct xpi_posted, link);
			pos = pos->next;
			if (pp->key.src == peer) {
				xpi_match_cancel(&ctx->match, pp);
				fail_request(ctx, xpi_container_of(pp, xp_request_t, posted), peer,
					     err, why);
			}
		}
	}
}

void xpi_engine_peer_failed(xp_context_t *ctx, int peer, int err, const char *why)
{
	struct xpi_peer *p = &ctx->peers[peer];
	if (p->failed)
		return;
	/* An endpoint that said goodbye may still have messages on another
	 * lane: its loss waits for them (ep_lanes.c). */
	if (peer >= ctx->size && xpi_ep_loss_deferred(ctx, peer, err, why))
		return;
	p->failed = err;
	snprintf(p->failed_why, sizeof(p->failed_why), "%s", why);
	if (peer >= ctx->size)
		xpi_ep_hand_over(ctx, peer); /* xp_accept gives it, failed */
	uint64_t lost_before = ctx->nlost_ops;
	/* Sends waiting for room. */
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&p->pending)) != NULL) {
		ctx->npending--;
		fail_request(ctx, xpi_container_of(l, xp_request_t, pending_link), peer, err, why);
	}
	/* Receives that name it. Wildcard receives stay: another rank may
	 * still send what they wait for. */
	fail_named_receives(ctx, peer, err, why);
	/* Wildcard receives too once no other rank is left to send: when
	 * every peer is lost, an XP_ANY_SOURCE receive can never match. */
	/* Endpoints are not of the job: XP_ANY_SOURCE never names them. */
	if (peer < ctx->size)
		ctx->nfailed++;
	bool all_lost = ctx->nfailed >= ctx->size - 1 && peer < ctx->size;
	struct xpi_dlink *pos = ctx->match.posted_wild.next;
	while (pos != &ctx->match.posted_wild) {
		struct xpi_posted *pp = xpi_container_of(pos, struct xpi_posted, link);
		xp_request_t *r = xpi_container_of(pp, xp_request_t, posted);
		pos = pos->next;
		if (pp->key.src == peer) {
			xpi_match_cancel(&ctx->match, pp);
			fail_request(ctx, r, peer, err, why);
		} else if (pp->key.src < 0 && all_lost) {
			xpi_match_cancel(&ctx->match, pp);
			fail_wildcard(ctx, r);
		}
	}
	/* What the transports hold: matched receives waiting for their
	 * payload, sends the peer announced or claimed. Every transport, not
	 * only the one that noticed: the peer's other lane holds some too. */
	for (int i = 0; i < ctx->ntls && !ctx->tls_closing; i++)
		/* An endpoint is known only to the transports whose arrays
		 * hold the slots (the one that makes endpoints, and lanes). */
		if (ctx->tls[i].ops->peer_lost != NULL &&
		    (peer < ctx->size || i == ctx->ep_tl_index || ctx->tls[i].slots))
			ctx->tls[i].ops->peer_lost(ctx->tls[i].tl, peer);
	/* An error only if it failed something the program sees: a peer
	 * that finalized after the job's last barrier, or one stopped with
	 * the rest of the job, is how jobs end (issue 24, 4.5). What fails
	 * later carries the reason in its own error detail. */
	bool hurt = ctx->nlost_ops != lost_before;
	char name[96];
	xpi_peer_name(ctx, peer, name, sizeof(name));
	xpi_log(hurt ? XPI_LOG_ERROR : XPI_LOG_INFO,
		"rank %d: %s %s; operations with it fail, others go on", ctx->rank, name, why);
}

void xpi_engine_peer_closed(xp_context_t *ctx, int peer)
{
	struct xpi_peer *p = &ctx->peers[peer];
	if (p->failed == 0) {
		p->failed = -ECANCELED;
		snprintf(p->failed_why, sizeof(p->failed_why), "was closed by this side");
	}
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&p->pending)) != NULL) {
		ctx->npending--;
		fail_request(ctx, xpi_container_of(l, xp_request_t, pending_link), peer, -ECANCELED,
			     "was closed by this side");
	}
	fail_named_receives(ctx, peer, -ECANCELED, "was closed by this side");
}

void xpi_engine_peer_reset(xp_context_t *ctx, int peer)
{
	struct xpi_peer *p = &ctx->peers[peer];
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&p->held)) != NULL) {
		struct xpi_msg *m = xpi_container_of(l, struct xpi_msg, held_link);
		msg_release(ctx, m);
		xpi_msg_free(ctx, m);
	}
	/* Its unexpected messages are in the endpoints' tag space, under
	 * any tag: found by source alone. */
	struct xpi_dlink *pos = ctx->match.unexp_all.next;
	while (pos != &ctx->match.unexp_all) {
		struct xpi_unexp *u = xpi_container_of(pos, struct xpi_unexp, all_link);
		pos = pos->next;
		if (u->key.src != peer)
			continue;
		struct xpi_msg *m = xpi_container_of(u, struct xpi_msg, u);
		xpi_match_remove_unexpected(&ctx->match, u);
		unexp_account(ctx, m, -1);
		msg_release(ctx, m);
		xpi_msg_free(ctx, m);
	}
	ctx->eager_returned_total -= p->eager_returned;
}

/* Completes wildcard receive @r when every other rank is lost, naming them
 * (the first few) and why the last one went. */
static void fail_wildcard(xp_context_t *ctx, xp_request_t *r)
{
	char ranks[160];
	size_t used = 0;
	int shown = 0, last = -1;
	ranks[0] = '\0';
	for (int i = 0; i < ctx->size; i++) {
		if (ctx->peers[i].failed == 0)
			continue;
		last = i;
		if (shown++ < 8 && used < sizeof(ranks))
			used += (size_t)snprintf(ranks + used, sizeof(ranks) - used, "%s%d",
						 shown > 1 ? ", " : "", i);
	}
	if (shown > 8 && used < sizeof(ranks))
		snprintf(ranks + used, sizeof(ranks) - used, " and %d more", shown - 8);
	xpi_request_set_detail(r,
			       "rank %d: %s from any rank tag 0x%llx mask 0x%llx on communicator "
			       "%u failed: every other rank is lost (rank%s %s; rank %d %s)",
			       ctx->rank, op_name(r), (unsigned long long)r->tag,
			       (unsigned long long)r->mask, r->comm, shown > 1 ? "s" : "", ranks,
			       last, last >= 0 ? ctx->peers[last].failed_why : "failed");
	stat_add(&ctx->st_recvs, 1);
	ctx->nlost_ops++;
	xpi_request_complete(r, last >= 0 ? ctx->peers[last].failed : -ECONNRESET);
}

void xpi_engine_fail_request(xp_context_t *ctx, xp_request_t *r, int peer)
{
	const struct xpi_peer *p = &ctx->peers[peer];
	fail_request(ctx, r, peer, p->failed != 0 ? p->failed : -ECONNRESET,
		     p->failed != 0 ? p->failed_why : "failed");
}

/* ------------------------------------------------------------------------- */
/* Commands                                                                  */

/* Registers @g with the transports added since xp_mem_register looked
 * (xpi_context_add_tl registers the indexed ones with any added later). */
int xpi_reg_catch_up(xp_context_t *ctx, struct xpi_reg *g)
{
	for (int i = g->nregistered; i < ctx->ntls; i++) {
		int rc = xpi_reg_with_tl(ctx, i, g);
		if (rc < 0)
			return rc;
		g->nregistered = i + 1;
	}
	return 0;
}

static void exec_mem_add(xp_context_t *ctx, struct xpi_reg *g)
{
	int rc = xpi_reg_catch_up(ctx, g);
	if (rc == 0)
		rc = xpi_reg_insert(ctx, g);
	if (rc < 0) /* still correct: sends from it just go without its keys */
		xpi_log(XPI_LOG_WARN,
			"rank %d: registration of %zu bytes at %p not usable for rendezvous: %s",
			ctx->rank, g->len, (void *)g->addr, xp_strerror(rc));
}

void xpi_reg_release(xp_context_t *ctx, struct xpi_reg *g)
{
	xpi_reg_remove(ctx, g);
	for (int i = 0; i < g->nregistered; i++)
		ctx->tls[i].ops->mem_dereg(ctx->tls[i].tl, g->handles[i]);
	g->nregistered = 0;
	if (g->dmabuf_fd >= 0) /* no transport will be added any more */
		close(g->dmabuf_fd);
	g->dmabuf_fd = -1;
}

static void exec_mem_del(xp_context_t *ctx, struct xpi_reg *g)
{
	xpi_reg_release(ctx, g);
	free(g);
}

static void run_cmd(xp_context_t *ctx, struct xpi_cmd *cmd)
{
	switch (cmd->type) {
	case XPI_CMD_POST:
		xpi_engine_exec_post(ctx, xpi_container_of(cmd, xp_request_t, post_cmd));
		break;
	case XPI_CMD_CANCEL: {
		xp_request_t *r = xpi_container_of(cmd, xp_request_t, cancel_cmd);
		xpi_engine_exec_cancel(ctx, r);
		xpi_request_put(r); /* the reference the cancel command held */
		break;
	}
	case XPI_CMD_MEM_ADD:
		exec_mem_add(ctx, xpi_container_of(cmd, struct xpi_reg, cmd));
		break;
	case XPI_CMD_MEM_DEL:
		exec_mem_del(ctx, xpi_container_of(cmd, struct xpi_reg, del_cmd));
		break;
	default:
		cmd->run(ctx, cmd); /* XPI_CMD_TL */
		break;
	}
}

void xpi_engine_drop_request(xp_context_t *ctx, xp_request_t *r)
{
	if (xpi_request_done(r))
		return;
	char peer_text[96];
	if (r->peer < 0)
		snprintf(peer_text, sizeof(peer_text), "any rank");
	else
		xpi_peer_name(ctx, r->peer, peer_text, sizeof(peer_text));
	xpi_request_set_detail(
		r,
		"rank %d: %s %s %s tag 0x%llx on communicator %u cancelled: the rank "
		"was finalized (or its job destroyed) before it completed",
		ctx->rank, op_name(r), r->op == XPI_OP_SEND ? "to" : "from", peer_text,
		(unsigned long long)r->tag, r->comm);
	xpi_request_complete(r, -ECANCELED);
}
