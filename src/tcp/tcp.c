/* SPDX-License-Identifier: MIT */
/* The io_uring TCP transport: its ops, progress, and losing a peer. */
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/compiler.h"
#include "../core/log.h"
#include "tcp.h"
#include "tcp_setup.h"

/*
 * The peer of @c is lost, however the engine learnt it (this connection
 * failing, the peer's other lane, the engine's own limits): its pending
 * kernel operations are woken and everything held for it fails.
 */
void tcp_conn_shut(struct xpi_tcp *t, struct tcp_conn *c)
{
	if (c->dead)
		return;
	c->dead = true;
	xp_context_t *ctx = t->ctx; /* c->tcp is not set in a conn never connected */
	/* Wakes the kernel's pending operations on both sockets; their
	 * completions come back with errors and are ignored. */
	shutdown(c->fd_ctl, SHUT_RDWR);
	shutdown(c->fd_bulk, SHUT_RDWR);
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&c->rts_out)) != NULL) {
		xp_request_t *s = xpi_container_of(l, xp_request_t, tl_link);
		if (atomic_load(&s->rndv_state) != XPI_RNDV_WITHDRAWN)
			xpi_engine_fail_request(ctx, s, c->peer);
		xpi_request_put(s);
	}
	while ((l = xpi_dlist_pop_head(&c->bulk_tx)) != NULL) {
		xp_request_t *s = xpi_container_of(l, xp_request_t, tl_link);
		if (s->tl_pending != 0) {
			/* The kernel still holds its pages: failed when the
			 * notification comes (tcp_bulk_zc_cqe). Marked cut off,
			 * unlike the sends on zc_wait already, whose every byte
			 * went out (tl_deadline is free here: a send the peer
			 * asked for has no withdrawal grace). */
			s->tl_deadline = XPI_TCP_ZC_CUT_OFF;
			xpi_dlist_push_tail(&c->zc_wait, &s->tl_link);
			continue;
		}
		if (atomic_load(&s->rndv_state) != XPI_RNDV_WITHDRAWN)
			xpi_engine_fail_request(ctx, s, c->peer);
		xpi_request_put(s);
	}
	/*
	 * A receive whose buffer an armed recv reads into fails only when
	 * that recv's completion comes (tcp_bulk_received_dead), not now
	 * (issue 24, 4.3). The shutdown above does not take the recv back: a
	 * recv the socket has woken retries as task work, run at our next
	 * io_uring_enter (DEFER_TASKRUN) or next system call (COOP_TASKRUN),
	 * and copies what the socket holds (shutdown(2) discards nothing
	 * queued) into the buffer, after the program got its error and maybe
	 * freed it. An IORING_OP_ASYNC_CANCEL would end it in that same task
	 * work, so either way the buffer is free only once the completion is
	 * reaped. The shutdown makes the recv complete (with data, 0 or an
	 * error), so the wait is short.
	 */
	struct tcp_bulk_rx *armed = NULL;
	if (!xpi_dlist_empty(&c->bulk_rx)) {
		armed = xpi_container_of(c->bulk_rx.next, struct tcp_bulk_rx, link);
		if (tcp_bulk_rx_in_user(c, armed))
			xpi_dlist_remove(&armed->link);
		else
			armed = NULL;
	}
	while ((l = xpi_dlist_pop_head(&c->bulk_rx)) != NULL) {
		struct tcp_bulk_rx *x = xpi_container_of(l, struct tcp_bulk_rx, link);
		if (x->rreq != NULL) /* NULL: its receive gave up (tcp_rndv_abort) */
			xpi_engine_fail_request(ctx, x->rreq, c->peer);
		free(x);
	}
	if (armed != NULL)
		xpi_dlist_push_tail(&c->bulk_rx, &armed->link);
}

static void tcp_peer_lost(void *tlp, int peer)
{
	struct xpi_tcp *t = tlp;
	struct tcp_conn *c = peer < t->nconn ? tcp_conn_at(t, peer) : NULL;
	if (c != NULL) { /* else nothing was ever made with it */
		tcp_wire_peer_lost(t, c);
		tcp_conn_shut(t, c);
	}
}

void tcp_conn_fail(struct tcp_conn *c, int err, const char *why)
{
	if (c->dead)
		return;
	/* However the socket noticed (a reset, a broken pipe, an abort), the
	 * peer is lost: one code for the program, the details in the text. */
	if (err == -EPIPE || err == -ECONNABORTED || err == -ENOTCONN)
		err = -ECONNRESET;
	/* The engine marks the peer failed and calls tcp_peer_lost; not
	 * while the transports are destroyed, hence the call after it. */
	xpi_engine_peer_failed(c->tcp->ctx, c->peer, err, why);
	tcp_conn_shut(c->tcp, c);
}

/* The first need of @peer's pair (or a pair lost): makes its state if it
 * has none and starts making the pair (tcp_wire_need). */
static int conn_need(struct xpi_tcp *t, int peer)
{
	struct tcp_conn *c = tcp_conn_get(t, peer);
	return c != NULL ? tcp_wire_need(t, c) : -ENOMEM;
}

static void tcp_peer_wanted(void *tlp, int peer)
{
	struct xpi_tcp *t = tlp;
	struct tcp_conn *c = tcp_conn_at(t, peer);
	if (t->want[peer] && (c == NULL || (c->wstate == TW_IDLE && !c->dead)))
		(void)conn_need(t, peer);
}

static int tcp_sideband_send(void *tlp, int peer, uint8_t type, const void *data, size_t len)
{
	struct xpi_tcp *t = tlp;
	struct tcp_conn *c = tcp_conn_at(t, peer);
	if (len == 0 || len > XPI_SIDEBAND_MAX)
		return -EINVAL;
	if (c == NULL || c->wstate != TW_READY || c->dead)
		return conn_need(t, peer);
	struct xpi_frame f = { .type = XPI_FRAME_SIDEBAND,
			       .payload_len = (uint32_t)len,
			       .comm = type };
	int rc = tcp_ctl_queue(c, &f, data);
	if (rc < 0)
		return rc;
	tcp_ctl_flush(c);
	io_uring_submit(&t->ring);
	return 0;
}

static int tcp_send_eager(void *tlp, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	struct xpi_tcp *t = tlp;
	struct tcp_conn *c = tcp_conn_at(t, peer);
	if (xpi_unlikely(c == NULL || c->wstate != TW_READY || c->dead))
		return conn_need(t, peer); /* the first message to it, or lost */
	uint64_t cost = xpi_eager_cost(h->len);
	struct xpi_peer *p = &t->ctx->peers[peer];
	if (h->len > XPI_TCP_EAGER_SEND_MAX ||
	    p->eager_sent + cost - p->eager_granted > t->credit_per_peer)
		return -ENOBUFS; /* too long, or no credit with the receiver: rendezvous */
	struct xpi_frame f = {
		.type = XPI_FRAME_EAGER,
		.payload_len = (uint32_t)h->len,
		.comm = h->comm,
		.tag = h->tag,
		.peer_seq = h->peer_seq,
		.msg_len = h->len,
	};
	int rc = tcp_ctl_queue(c, &f, data);
	if (rc < 0)
		return rc;
	p->eager_sent += cost;
	tcp_ctl_flush(c);
	io_uring_submit(&t->ring);
	return 0;
}

static int tcp_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			const struct xpi_reg *reg, const struct xpi_rndv_desc *desc)
{
	(void)reg; /* TCP reads the buffer through the kernel: no key needed */
	struct xpi_tcp *t = tlp;
	struct tcp_conn *c = tcp_conn_at(t, peer);
	if (xpi_unlikely(c == NULL || c->wstate != TW_READY || c->dead))
		return conn_need(t, peer);
	struct xpi_frame f = {
		.type = XPI_FRAME_RTS,
		.comm = h->comm,
		.tag = h->tag,
		.peer_seq = h->peer_seq,
		.msg_len = h->len,
		.id = c->next_id,
	};
	if (desc != NULL) {
		/* The bulk lane (another transport) holds the send and its
		 * payload: carry its descriptor, hold nothing. */
		f.payload_len = desc->len;
		f.id = 0;
		int rc = tcp_ctl_queue(c, &f, desc->bytes);
		if (rc == 0) {
			tcp_ctl_flush(c);
			io_uring_submit(&t->ring);
		}
		return rc;
	}
	int rc = tcp_ctl_queue(c, &f, NULL);
	if (rc < 0)
		return rc;
	sreq->tl_id = c->next_id++;
	sreq->tl_pending_seq = h->peer_seq; /* names it in a WITHDRAW */
	xpi_request_get(sreq);              /* until its payload went out or it was withdrawn */
	xpi_dlist_push_tail(&c->rts_out, &sreq->tl_link);
	tcp_ctl_flush(c);
	io_uring_submit(&t->ring);
	return 0;
}

/*
 * A send that timed out (or was cancelled) is taken back only if the
 * receiver agrees: its engine alone knows whether a receive took the
 * announcement, and deciding there keeps MPI's order (a receive that took
 * a message its sender then withdrew would be away while later receives
 * match). Until the receiver asked for it (CTS), we ask it (WITHDRAW) and
 * return 1: its WITHDRAW_ACK completes the send withdrawn (got_withdraw_ack)
 * or, too late, its CTS lets it go on as usual.
 */
static int tcp_send_cancel(void *tlp, xp_request_t *sreq)
{
	struct xpi_tcp *t = tlp;
	struct xpi_dlink *pos;
	struct tcp_conn *c = tcp_conn_at(t, sreq->peer);
	if (c == NULL)
		return -EBUSY; /* never announced here: nothing of ours holds it */
	xpi_dlist_for_each(pos, &c->rts_out) {
		if (pos != &sreq->tl_link)
			continue;
		if (atomic_load(&sreq->rndv_state) == XPI_RNDV_ASKED)
			return 1; /* asked already */
		struct xpi_frame f = {
			.type = XPI_FRAME_WITHDRAW,
			.comm = sreq->comm,
			.tag = sreq->tag,
			.peer_seq = (uint32_t)sreq->tl_pending_seq,
			.id = sreq->tl_id,
		};
		if (tcp_ctl_queue(c, &f, NULL) < 0) {
			/* No room to ask: take it back alone, as when the
			 * receiver does not answer (tcp_ask_timer_fire). */
			atomic_store(&sreq->rndv_state, XPI_RNDV_WITHDRAWN);
			return 0;
		}
		atomic_store(&sreq->rndv_state, XPI_RNDV_ASKED);
		sreq->tl_deadline = xpi_now_ns() + XPI_TCP_ASK_GRACE_NS;
		/* Deadlines only grow, so an armed timer is due no later. Without
		 * memory for the timer the receiver's answer alone ends it. */
		if (t->ask_timer.heap_pos == 0)
			(void)xpi_timer_arm(t->ctx, &t->ask_timer, sreq->tl_deadline);
		tcp_ctl_flush(c);
		io_uring_submit(&t->ring);
		return 1;
	}
	return -EBUSY;
}

/* A send taken back without the receiver's word: it stays announced
 * there, so if it asks later (CTS) it is told (DATA, withdrawn), and the
 * receive that took it is put back by its engine. */
static void withdraw_alone(struct xpi_tcp *t, xp_request_t *s)
{
	atomic_store(&s->rndv_state, XPI_RNDV_WITHDRAWN);
	xpi_engine_send_withdrawn(t->ctx, s);
}

/* The ask timer: withdraws the sends whose receiver has not answered by
 * their deadline, and waits for the next. */
void tcp_ask_timer_fire(struct xp_context *ctx, struct xpi_timer *timer)
{
	struct xpi_tcp *t = xpi_container_of(timer, struct xpi_tcp, ask_timer);
	int64_t now = xpi_now_ns(), next = INT64_MAX;
	for (int i = 0; i < t->nlinked; i++) {
		struct xpi_dlink *pos;
		xpi_dlist_for_each(pos, &tcp_conn_at(t, t->linked[i])->rts_out) {
			xp_request_t *s = xpi_container_of(pos, xp_request_t, tl_link);
			if (atomic_load(&s->rndv_state) != XPI_RNDV_ASKED)
				continue;
			if (s->tl_deadline <= now)
				withdraw_alone(t, s);
			else if (s->tl_deadline < next)
				next = s->tl_deadline;
		}
	}
	if (next != INT64_MAX)
		(void)xpi_timer_arm(ctx, timer, next);
}

/*
 * Receive @rreq cannot take rendezvous message @msg (@err): the sender is
 * told with a refusing CTS, so its send fails too instead of waiting for a
 * CTS that never comes; if not even that fits in the control queue, the
 * connection fails, which fails the send as well. Returns @err, with which
 * the engine fails the receive.
 */
static int refuse_fetch(struct tcp_conn *c, const struct xpi_msg *msg, xp_request_t *rreq, int err)
{
	xp_context_t *ctx = c->tcp->ctx;
	xpi_request_set_detail(rreq,
			       "rank %d: %s from rank %d tag 0x%llx on communicator %u failed: "
			       "cannot take its %llu-byte rendezvous message: %s (rank %d is told)",
			       ctx->rank, rreq->op == XPI_OP_RECV_BUF ? "xp_recv_buf" : "xp_recv",
			       c->peer, (unsigned long long)msg->u.key.tag, msg->u.key.comm,
			       (unsigned long long)msg->len, xp_strerror(err), c->peer);
	struct xpi_frame f = {
		.type = XPI_FRAME_CTS,
		.flags = XPI_FRAME_F_REFUSED,
		.msg_len = (uint64_t)-err,
		.id = (uint64_t)(uintptr_t)msg->rndv,
	};
	if (tcp_ctl_queue(c, &f, NULL) == 0) {
		tcp_ctl_flush(c);
		io_uring_submit(&c->tcp->ring);
	} else {
		tcp_conn_fail(c, err,
			      "could not be told that a receive of its rendezvous message failed; "
			      "its connection was closed");
	}
	return err;
}

static int tcp_rndv_fetch(void *tlp, struct xpi_msg *msg, void *dst, size_t cap, xp_request_t *rreq,
			  const struct xpi_reg *dst_reg)
{
	(void)dst_reg; /* nothing to register: the payload is copied in */
	struct xpi_tcp *t = tlp;
	struct tcp_conn *c = tcp_conn_at(t, msg->u.key.src);
	if (c->dead)
		return -ECONNRESET; /* the engine names the lost peer */
	struct tcp_bulk_rx *x = malloc(sizeof(*x));
	if (x == NULL)
		return refuse_fetch(c, msg, rreq, -ENOMEM);
	*x = (struct tcp_bulk_rx){
		.rreq = rreq,
		.dst = dst,
		.cap = cap,
		.len = msg->len,
		.id = (uint64_t)(uintptr_t)msg->rndv,
	};
	xpi_dlist_push_tail(&c->bulk_rx, &x->link);
	c->cts_waiting++;
	tcp_cts_queue_waiting(c);
	tcp_bulk_arm(c);
	io_uring_submit(&t->ring);
	return 1; /* tcp_bulk_received() finishes it */
}

/* The receive lets go; the rest of its payload, whenever the sender sends
 * it, is read into the drop buffer (cap shrinks to what the receive
 * buffer already has). Not while the kernel reads into that buffer: a
 * recv in flight there cannot be pointed elsewhere. */
static int tcp_rndv_abort(void *tlp, xp_request_t *rreq)
{
	struct xpi_tcp *t = tlp;
	int src = rreq->status.source;
	if (src < 0 || src >= t->nconn || tcp_conn_at(t, src) == NULL)
		return -EBUSY;
	struct tcp_conn *c = tcp_conn_at(t, src);
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &c->bulk_rx) {
		struct tcp_bulk_rx *x = xpi_container_of(pos, struct tcp_bulk_rx, link);
		if (x->rreq != rreq)
			continue;
		uint64_t have = 0;
		if (pos == c->bulk_rx.next && c->bulk_rx_off > XPI_FRAME_HDR_LEN)
			have = c->bulk_rx_off - XPI_FRAME_HDR_LEN;
		if (tcp_bulk_rx_in_user(c, x))
			return -EBUSY; /* the payload is coming into the buffer now */
		x->cap = have < x->cap ? have : x->cap;
		x->rreq = NULL;
		return 0;
	}
	return -EBUSY;
}

static void tcp_msg_release(void *tlp, struct xpi_msg *msg)
{
	(void)tlp;
	(void)msg; /* an announced message holds nothing here */
}

static void handle_cqe(struct xpi_tcp *t, const struct io_uring_cqe *cqe)
{
	uint64_t ud = cqe->user_data;
	enum tcp_op op = (enum tcp_op)(ud >> 56);
	int peer = (int)(uint32_t)(ud >> 32 & 0xffffff);
	uint32_t gen = (uint32_t)ud;
	if (xpi_unlikely(op == TCP_OP_WIRE)) {
		tcp_wire_cqe(t, ud);
		return;
	}
	if (xpi_unlikely(op == TCP_OP_LISTEN)) {
		if (peer == 0)
			tcp_wire_listen_cqe(t, cqe->res, cqe->flags);
		else
			tcp_ep_listen_cqe(t, peer - 1, cqe->res, cqe->flags);
		return;
	}
	if (op == TCP_OP_CANCEL || peer >= t->nconn || tcp_conn_at(t, peer) == NULL)
		return;
	struct tcp_conn *c = tcp_conn_at(t, peer);
	if (op == TCP_OP_SEND_BULK_ZC) {
		/* Handled also on a dead connection: the pages are the user's
		 * again only when the notification says so. */
		tcp_bulk_zc_cqe(c, gen, cqe->res, cqe->flags);
		return;
	}
	if (c->gen != gen)
		return;
	if (!(op == TCP_OP_RECV_CTL && (cqe->flags & IORING_CQE_F_MORE)))
		c->inflight--;
	switch (op) {
	case TCP_OP_RECV_CTL:
		if (c->dead && (cqe->flags & IORING_CQE_F_BUFFER)) {
			/* Data that raced with the close: give the buffer back. */
			unsigned bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
			struct xp_buf *chunk = tcp_br_take(t, bid);
			if (chunk != NULL)
				tcp_br_give_back(t, bid, chunk);
			return;
		}
		tcp_ctl_received(c, cqe->res, cqe->flags);
		break;
	case TCP_OP_SEND_CTL:
		if (!c->dead)
			tcp_ctl_sent(c, cqe->res);
		break;
	case TCP_OP_RECV_BULK:
		if (!c->dead)
			tcp_bulk_received(c, cqe->res);
		else if (c->bulk_rx_busy)
			tcp_bulk_received_dead(c); /* the kernel is done with its buffer */
		break;
	case TCP_OP_SEND_BULK:
		if (!c->dead)
			tcp_bulk_sent(c, cqe->res);
		break;
	default:
		break;
	}
}

/* Gives back eager credit the engine has freed, when the peer would
 * otherwise wait for it: a quarter of its window unreported. */
static void return_credit(struct xpi_tcp *t)
{
	if (t->ctx->eager_returned_total == t->credit_seen)
		return; /* nothing consumed since the last look */
	t->credit_seen = t->ctx->eager_returned_total;
	for (int i = 0; i < t->nlinked; i++) {
		int p = t->linked[i];
		struct tcp_conn *c = tcp_conn_at(t, p);
		/* A connection that only watches the peer (its messages go
		 * over rdma, say) owes it nothing. */
		if (c->fd_ctl < 0 || c->dead || t->ctx->peers[p].tl_small != t->tl_index)
			continue;
		uint64_t owed = t->ctx->peers[p].eager_returned - c->credit_told;
		if (owed > t->credit_per_peer / 4) {
			struct xpi_frame f = { .type = XPI_FRAME_CREDIT };
			if (tcp_ctl_queue(c, &f, NULL) == 0)
				tcp_ctl_flush(c);
		}
	}
}

/* Re-arms receives that stopped because every provided buffer was lent
 * out, once some came back. */
static void rearm(struct xpi_tcp *t)
{
	t->need_arm = false;
	for (int i = 0; i < t->nlinked; i++) {
		struct tcp_conn *c = tcp_conn_at(t, t->linked[i]);
		if (c->fd_ctl >= 0 && !c->dead && !c->recv_armed) {
			if (t->br_empty == XPI_TCP_BR_ENTRIES)
				t->need_arm = true;
			else
				tcp_ctl_arm(c);
		}
	}
}

/* A ring tied to the thread of xp_init (XP_THREAD_FUNNELED) refuses any
 * other: the promise was broken, and the connections' traffic can no
 * longer be driven. Said once; the rank's TCP peers fail, by name. */
static void wrong_thread(struct xpi_tcp *t)
{
	if (t->wrong_thread_said)
		return;
	t->wrong_thread_said = true;
	for (int i = 0; i < t->nlinked; i++) {
		struct tcp_conn *c = tcp_conn_at(t, t->linked[i]);
		if (c->fd_ctl >= 0 && !c->dead)
			tcp_conn_fail(c, -EEXIST,
				      "cannot be reached from this thread: XP_THREAD_FUNNELED "
				      "promised only the thread of xp_init calls into the rank");
	}
}

/*
 * Work waits in a deferring ring: reads the control stream of the peer that
 * last had control data with recv(2) instead (tcp_ctl_recv_direct says why
 * and why the order holds), once per wake-up. Only when that connection has
 * nothing in the kernel but its armed recv, so the work is likely its data,
 * and nothing else waits: submissions, completions, an overflow.
 */
static bool ctl_direct_first(struct xpi_tcp *t, unsigned kflags)
{
	if (t->evfd < 0 || t->direct_tried || t->direct_peer < 0 || !(kflags & IORING_SQ_TASKRUN) ||
	    (kflags & IORING_SQ_CQ_OVERFLOW) || io_uring_sq_ready(&t->ring) != 0 ||
	    io_uring_cq_ready(&t->ring) != 0)
		return false;
	t->direct_tried = true;
	struct tcp_conn *c = tcp_conn_at(t, t->direct_peer);
	if (c->dead || !c->recv_armed || c->inflight != 1)
		return false;
	return tcp_ctl_recv_direct(c) > 0;
}

static int tcp_progress(void *tlp)
{
	struct xpi_tcp *t = tlp;
	struct io_uring_cqe *cqe;
	int n = 0;

	/* Another thread would find the ring refusing it only when it next
	 * has something to ask, or never: tell it now. */
	if (xpi_unlikely(t->evfd >= 0 && &tcp_thread_mark != t->ring_thread)) {
		wrong_thread(t);
		return 0;
	}

	/* With TASKRUN_FLAG the kernel says when completions wait to be run:
	 * only then is a system call needed. */
	unsigned kflags = IO_URING_READ_ONCE(*t->ring.sq.kflags);
	/* The work a direct read left pending has run (any io_uring_submit
	 * with the flag up asks for events too): the next wake-up is new. */
	if (!(kflags & IORING_SQ_TASKRUN))
		t->direct_tried = false;
	if (io_uring_sq_ready(&t->ring) != 0 || (kflags & IORING_SQ_TASKRUN) ||
	    !(t->ring_flags & IORING_SETUP_TASKRUN_FLAG)) {
		if (ctl_direct_first(t, kflags)) {
			n++;
		} else {
			t->direct_tried = false;
			int rc = io_uring_submit_and_get_events(&t->ring);
			if (xpi_unlikely(rc == -EEXIST))
				wrong_thread(t);
		}
	}
	/* An empty CQ is seen by two loads here: io_uring_peek_cqe would
	 * look through liburing's out-of-line __io_uring_get_cqe first, on
	 * every idle round of every waiter. An overflow is left to it. */
	if (io_uring_cq_ready(&t->ring) != 0 || (kflags & IORING_SQ_CQ_OVERFLOW))
		while (io_uring_peek_cqe(&t->ring, &cqe) == 0) {
			handle_cqe(t, cqe);
			io_uring_cqe_seen(&t->ring, cqe);
			n++;
		}
	return_credit(t);
	if (t->nheld != 0)
		tcp_ctl_release_holds(t);
	if (io_uring_sq_ready(&t->ring) != 0)
		io_uring_submit(&t->ring);
	if (t->nlent != 0 || t->br_empty != 0) /* chunks to take back or to put in */
		tcp_br_refill(t);
	if (t->need_arm)
		rearm(t);
	if (xpi_unlikely(t->nclosing != 0))
		tcp_ep_progress(t);
	return n;
}

/* The ring's fd is readable while completions wait in it. What is queued
 * goes to the kernel first, or the sleep could wait for our own output.
 * Completions the kernel holds as task work for this thread (COOP_TASKRUN)
 * wake the ppoll too: adding the work wakes an interruptible sleeper, the
 * work runs as the call returns, and the call, restarted, finds the CQEs. */
static void tcp_sleep_done(void *tlp);

/*
 * A deferring ring's eventfd can be signalled late: on kernel 6.18.44 it
 * came 13-16 ms after the peer's data (strace of test_funneled, every
 * time), where the kernel this was first written on signalled at once. So
 * a sleeper also watches the control sockets its ring reads: a message or
 * an announcement arriving wakes the ppoll at once, and the progress that
 * follows runs the ring's deferred work. Only those with a receive armed
 * (one without would wake the sleep over and over for data nobody reads
 * yet), and not the bulk sockets: a payload streams in pieces, and waking
 * for each made 1 MiB TCP bandwidth fall to 2.8-3.1 GB/s in 3 of 11
 * runs (against 5.4-8.2); a rank spins for a millisecond before it sleeps, so
 * a payload under way does not find it asleep. The eventfd still wakes for
 * the rest, late on such a kernel. Returns the entries written to @fds.
 */
static int watch_sockets(struct xpi_tcp *t, struct pollfd *fds, int max)
{
	int n = 0;
	if (t->listen_armed && n < max)
		fds[n++] = (struct pollfd){ .fd = t->listen_fd, .events = POLLIN };
	for (int i = 0; i < t->nlinked && n < max; i++) {
		const struct tcp_conn *c = tcp_conn_at(t, t->linked[i]);
		if (c->dead)
			continue;
		if (c->recv_armed && c->fd_ctl >= 0)
			fds[n++] = (struct pollfd){ .fd = c->fd_ctl, .events = POLLIN };
	}
	return n;
}

static int tcp_sleep_prepare(void *tlp, struct pollfd *fds, int max)
{
	struct xpi_tcp *t = tlp;
	if (max < 1)
		return -ENOTSUP;
	if (t->nheld != 0)
		tcp_ctl_release_holds(t);
	io_uring_submit(&t->ring);
	/* A deferring ring signals its eventfd from now on; the look below
	 * catches what came before. */
	if (t->evfd >= 0)
		io_uring_cq_eventfd_toggle(&t->ring, true);
	if (io_uring_cq_ready(&t->ring) != 0 || io_uring_cq_has_overflow(&t->ring) ||
	    (IO_URING_READ_ONCE(*t->ring.sq.kflags) & IORING_SQ_TASKRUN) != 0) {
		tcp_sleep_done(t);
		return -EAGAIN;
	}
	int fd = t->evfd >= 0 ? t->evfd : t->ring.ring_fd;
	fds[0] = (struct pollfd){ .fd = fd, .events = POLLIN };
	if (t->evfd < 0)
		return 1;
	return 1 + watch_sockets(t, fds + 1, max - 1);
}

/* Awake: a deferring ring stops signalling (a spinning owner sees the
 * flag), and what it signalled is drained. */
static void tcp_sleep_done(void *tlp)
{
	struct xpi_tcp *t = tlp;
	if (t->evfd < 0)
		return;
	io_uring_cq_eventfd_toggle(&t->ring, false);
	uint64_t v;
	ssize_t n = read(t->evfd, &v, sizeof(v));
	(void)n; /* EAGAIN: nothing signalled */
}

static bool tcp_tx_pending(void *tlp)
{
	struct xpi_tcp *t = tlp;
	for (int i = 0; i < t->nlinked; i++) {
		const struct tcp_conn *c = tcp_conn_at(t, t->linked[i]);
		if (c->fd_ctl >= 0 && !c->dead &&
		    (c->tx_busy != 0 || c->tx_tail != c->tx_head || c->cts_waiting != 0 ||
		     c->nacks != 0))
			return true;
	}
	return false;
}

static void tcp_destroy(void *tlp)
{
	tcp_setup_destroy(tlp);
}

const struct xpi_tl_ops xpi_tcp_ops = {
	.name = "tcp",
	.rndv_threshold = 32768,
	.eager_max = XPI_TCP_EAGER_SEND_MAX,
	.mem_reg = xpi_tl_mem_reg_none,
	.mem_dereg = xpi_tl_mem_dereg_none,
	.send_eager = tcp_send_eager,
	.send_rts = tcp_send_rts,
	.rndv_offer = xpi_tl_rndv_offer_none,
	.send_cancel = tcp_send_cancel,
	.rndv_fetch = tcp_rndv_fetch,
	.rndv_abort = tcp_rndv_abort,
	.msg_release = tcp_msg_release,
	.peer_lost = tcp_peer_lost,
	.peer_wanted = tcp_peer_wanted,
	.sideband_send = tcp_sideband_send,
	.progress = tcp_progress,
	.sleep_prepare = tcp_sleep_prepare,
	.sleep_done = tcp_sleep_done,
	.tx_pending = tcp_tx_pending,
	.destroy = tcp_destroy,
};
