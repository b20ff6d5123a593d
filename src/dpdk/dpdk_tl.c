/* SPDX-License-Identifier: MIT */
/* The DPDK transport's ops (transport.h), progress and timers, and losing
 * a peer. dpdk_tl.h says how the pieces fit. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/log.h"
#include "dpdk_tl.h"

static void fail_send(struct dpdk_peer *pr, struct dpdk_rndv_tx *w)
{
	xp_request_t *s = w->sreq;
	if (atomic_load(&s->rndv_state) != XPI_RNDV_WITHDRAWN && !w->taken_back)
		xpi_engine_fail_request(pr->t->ctx, s, pr->rank);
	xpi_request_put(s);
	free(w);
}

void dpdk_peer_fail(struct dpdk_peer *pr, int err, const char *why)
{
	if (pr->dead)
		return;
	pr->dead = true;
	struct xpi_dpdk_tl *t = pr->t;
	xp_context_t *ctx = t->ctx;
	if (t->closing) { /* the engine is gone: destroy fails the rest */
		dpdk_drop_queue(pr);
		return;
	}
	if (why != NULL)
		xpi_engine_peer_failed(ctx, pr->rank, err, why);
	/* Datagrams first (they point into sends' buffers), then the sends,
	 * then the receives. The reliability layer's receiver may be in the
	 * middle of handing over (this may run from its deliver): its held
	 * datagrams wait for the transport's end. */
	dpdk_drop_queue(pr);
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&pr->rts_out)) != NULL)
		fail_send(pr, xpi_container_of(l, struct dpdk_rndv_tx, link));
	while ((l = xpi_dlist_pop_head(&pr->bulk_rx)) != NULL) {
		struct dpdk_rndv_rx *x = xpi_container_of(l, struct dpdk_rndv_rx, link);
		if (x->rreq != NULL)
			xpi_engine_fail_request(ctx, x->rreq, pr->rank);
		free(x);
	}
	dpdk_asm_reset(pr);
}

/* Ends send @w if nothing of it is in flight any more: failed, if the
 * receiver refused it (w->err), or complete once all its payload was asked
 * for, sent and acknowledged. */
void dpdk_send_settle(struct dpdk_peer *pr, struct dpdk_rndv_tx *w)
{
	xp_request_t *s = w->sreq;
	if (w->windows != 0)
		return;
	if (w->err != 0) {
		xpi_dlist_remove(&w->link);
		if (atomic_load(&s->rndv_state) != XPI_RNDV_WITHDRAWN) {
			xpi_request_set_detail(
				s,
				"rank %d: xp_send to rank %d tag 0x%llx on communicator "
				"%u failed: rank %d could not take it (%s) and failed its "
				"receive",
				pr->t->ctx->rank, pr->rank, (unsigned long long)s->tag, s->comm,
				pr->rank, xp_strerror(w->err));
			xpi_request_complete(s, w->err);
		}
		xpi_request_put(s);
		free(w);
		return;
	}
	if (w->asked_for && w->sent == s->len && w->acked == s->len) {
		xpi_dlist_remove(&w->link);
		xpi_request_complete(s, 0);
		xpi_request_put(s);
		free(w);
	}
}

/* A window of send @w (@bytes of its payload) was acknowledged. */
void dpdk_window_acked(struct dpdk_peer *pr, struct dpdk_rndv_tx *w, uint32_t bytes)
{
	w->acked += bytes;
	w->windows--;
	dpdk_send_settle(pr, w);
}

/* @peer's pair, made on the first send to it; NULL: none agreed with it,
 * or no memory to make it. */
static struct dpdk_peer *peer_of(struct xpi_dpdk_tl *t, int peer)
{
	return dpdk_peer_get(t, peer);
}

static int dpdk_send_eager(void *tlp, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	struct xpi_dpdk_tl *t = tlp;
	struct dpdk_peer *pr = peer_of(t, peer);
	if (pr == NULL || pr->dead)
		return pr == NULL ? -ENOMEM : -ECONNRESET;
	uint64_t cost = xpi_eager_cost(h->len);
	if (h->len > XPI_DPDK_EAGER_MAX ||
	    pr->eager_sent + cost - pr->peer_credit > t->credit_per_peer)
		return -ENOBUFS; /* too long, or no credit with the receiver: rendezvous */
	struct xpi_frame f = {
		.type = XPI_FRAME_EAGER,
		.payload_len = (uint32_t)h->len,
		.comm = h->comm,
		.tag = h->tag,
		.peer_seq = h->peer_seq,
		.msg_len = h->len,
	};
	int rc = dpdk_queue_frame(pr, &f, data, NULL, NULL);
	if (rc == 0)
		pr->eager_sent += cost;
	return rc;
}

static int dpdk_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			 const struct xpi_reg *reg, const struct xpi_rndv_desc *desc)
{
	(void)reg; /* the port copies from the buffer: no key needed */
	struct xpi_dpdk_tl *t = tlp;
	struct dpdk_peer *pr = peer_of(t, peer);
	if (pr == NULL || pr->dead)
		return pr == NULL ? -ENOMEM : -ECONNRESET;
	struct xpi_frame f = {
		.type = XPI_FRAME_RTS,
		.comm = h->comm,
		.tag = h->tag,
		.peer_seq = h->peer_seq,
		.msg_len = h->len,
	};
	if (desc != NULL) { /* another transport carries the payload */
		f.payload_len = desc->len;
		return dpdk_queue_frame(pr, &f, desc->bytes, NULL, NULL);
	}
	struct dpdk_rndv_tx *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return -ENOMEM;
	f.id = w->id = ++pr->next_id;
	int rc = dpdk_queue_frame(pr, &f, NULL, NULL, NULL);
	if (rc < 0) {
		free(w);
		return rc;
	}
	w->sreq = sreq;
	sreq->tl_id = w->id;
	sreq->tl_pending_seq = h->peer_seq;
	xpi_request_get(sreq); /* until its payload is acknowledged or it is withdrawn */
	xpi_dlist_push_tail(&pr->rts_out, &w->link);
	return 0;
}

static struct dpdk_rndv_tx *send_of(struct dpdk_peer *pr, const xp_request_t *s)
{
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &pr->rts_out) {
		struct dpdk_rndv_tx *w = xpi_container_of(pos, struct dpdk_rndv_tx, link);
		if (w->sreq == s)
			return w;
	}
	return NULL;
}

static void arm(struct xpi_dpdk_tl *t, int64_t when)
{
	if (t->timer.heap_pos == 0 || when < t->timer.deadline_ns)
		(void)xpi_timer_arm(t->ctx, &t->timer, when);
}

/*
 * As tcp's: a send that timed out is taken back only if the receiver
 * agrees (its engine alone knows whether a receive took the announcement).
 * Until it asked for the payload, we ask it (WITHDRAW) and return 1; its
 * answer, or our grace running out, ends the send.
 */
static int dpdk_send_cancel(void *tlp, xp_request_t *sreq)
{
	struct xpi_dpdk_tl *t = tlp;
	struct dpdk_peer *pr = t->peers[sreq->peer]; /* made: it holds the send */
	struct dpdk_rndv_tx *w = pr != NULL ? send_of(pr, sreq) : NULL;
	if (w == NULL || w->asked_for || w->taken_back)
		return -EBUSY;
	if (atomic_load(&sreq->rndv_state) == XPI_RNDV_ASKED)
		return 1;
	struct xpi_frame f = {
		.type = XPI_FRAME_WITHDRAW,
		.comm = sreq->comm,
		.tag = sreq->tag,
		.peer_seq = (uint32_t)sreq->tl_pending_seq,
		.id = w->id,
	};
	if (dpdk_queue_frame(pr, &f, NULL, NULL, NULL) < 0) {
		w->taken_back = true; /* no room to ask: taken back alone */
		atomic_store(&sreq->rndv_state, XPI_RNDV_WITHDRAWN);
		return 0;
	}
	atomic_store(&sreq->rndv_state, XPI_RNDV_ASKED);
	sreq->tl_deadline = xpi_now_ns() + XPI_DPDK_ASK_GRACE_NS;
	arm(t, sreq->tl_deadline);
	return 1;
}

/* Withdrawals whose receiver has not answered within the grace: taken
 * back alone; if it asks later, it is told (DATA, withdrawn). */
static int64_t expire_asks(struct xpi_dpdk_tl *t, int64_t now)
{
	int64_t next = INT64_MAX;
	for (int i = 0; i < t->nmade; i++) {
		struct xpi_dlink *pos;
		xpi_dlist_for_each(pos, &t->peers[t->made[i]]->rts_out) {
			struct dpdk_rndv_tx *w = xpi_container_of(pos, struct dpdk_rndv_tx, link);
			xp_request_t *s = w->sreq;
			if (w->taken_back || atomic_load(&s->rndv_state) != XPI_RNDV_ASKED)
				continue;
			if (s->tl_deadline <= now) {
				w->taken_back = true;
				atomic_store(&s->rndv_state, XPI_RNDV_WITHDRAWN);
				xpi_engine_send_withdrawn(t->ctx, s);
			} else if (s->tl_deadline < next) {
				next = s->tl_deadline;
			}
		}
	}
	return next;
}

static int dpdk_rndv_fetch(void *tlp, struct xpi_msg *msg, void *dst, size_t cap,
			   xp_request_t *rreq, const struct xpi_reg *dst_reg)
{
	(void)dst_reg; /* the payload is copied in from the port's buffers */
	struct xpi_dpdk_tl *t = tlp;
	struct dpdk_peer *pr = peer_of(t, msg->u.key.src); /* made: it sent @msg */
	if (pr == NULL || pr->dead)
		return -ECONNRESET;
	struct dpdk_rndv_rx *x = calloc(1, sizeof(*x));
	if (x == NULL) {
		struct xpi_frame f = { .type = XPI_FRAME_CTS,
				       .flags = XPI_FRAME_F_REFUSED,
				       .msg_len = ENOMEM,
				       .id = (uint64_t)(uintptr_t)msg->rndv };
		if (dpdk_queue_frame(pr, &f, NULL, NULL, NULL) < 0)
			dpdk_peer_fail(pr, -ENOMEM, "could not be told a receive failed");
		return -ENOMEM;
	}
	*x = (struct dpdk_rndv_rx){
		.rreq = rreq,
		.dst = dst,
		.cap = cap,
		.len = msg->len,
		.id = (uint64_t)(uintptr_t)msg->rndv,
		.nwin = msg->len == 0 ? 1 : (msg->len + XPI_DPDK_WINDOW - 1) / XPI_DPDK_WINDOW,
	};
	xpi_dlist_push_tail(&pr->bulk_rx, &x->link);
	dpdk_grant(pr, x);
	return 1; /* window_arrived() finishes it */
}

/* The receive lets go: the sender is told its send failed (a refusing
 * CTS), what it already sent of the windows asked for is dropped. */
static int dpdk_rndv_abort(void *tlp, xp_request_t *rreq)
{
	struct xpi_dpdk_tl *t = tlp;
	int src = rreq->status.source;
	if (src < 0 || src >= t->npeers || t->peers[src] == NULL)
		return -EBUSY;
	struct dpdk_peer *pr = t->peers[src];
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &pr->bulk_rx) {
		struct dpdk_rndv_rx *x = xpi_container_of(pos, struct dpdk_rndv_rx, link);
		if (x->rreq != rreq)
			continue;
		x->rreq = NULL;
		x->refused = true;
		if (pr->as.active && pr->as.rx == x)
			pr->as.dst = NULL;
		struct xpi_frame f = { .type = XPI_FRAME_CTS,
				       .flags = XPI_FRAME_F_REFUSED,
				       .msg_len = ETIMEDOUT,
				       .id = x->id };
		(void)dpdk_queue_frame(pr, &f, NULL, NULL, NULL);
		if (x->arrived == x->asked) {
			xpi_dlist_remove(&x->link);
			free(x);
		}
		return 0;
	}
	return -EBUSY;
}

static void dpdk_msg_release(void *tlp, struct xpi_msg *msg)
{
	(void)tlp;
	(void)msg; /* an announced message holds nothing here */
}

/* Gives back eager credit the engine has freed, when the peer would
 * otherwise wait for it: a quarter of its window unreported. */
static void return_credit(struct xpi_dpdk_tl *t)
{
	if (t->ctx->eager_returned_total == t->credit_seen)
		return;
	t->credit_seen = t->ctx->eager_returned_total;
	for (int i = 0; i < t->nmade; i++) {
		int p = t->made[i];
		struct dpdk_peer *pr = t->peers[p];
		if (!pr->up || pr->dead || t->ctx->peers[p].tl_small != t->tl_index)
			continue;
		if (t->ctx->peers[p].eager_returned - pr->credit_told > t->credit_per_peer / 4) {
			struct xpi_frame f = { .type = XPI_FRAME_CREDIT };
			(void)dpdk_queue_frame(pr, &f, NULL, NULL, NULL);
		}
	}
}

/* Peers another transport found lost (the TCP connection that watches a
 * peer's process, say): fail what we hold for them too. */
static void watch_failures(struct xpi_dpdk_tl *t)
{
	t->nfailed_seen = t->ctx->nfailed;
	for (int i = 0; i < t->nmade; i++) {
		int p = t->made[i];
		struct dpdk_peer *pr = t->peers[p];
		if (pr->up && !pr->dead && t->ctx->peers[p].failed != 0)
			dpdk_peer_fail(pr, t->ctx->peers[p].failed, NULL);
	}
}

/*
 * Everything that runs on time, for every pair: retransmissions (and
 * giving a silent peer up), delayed acknowledgements, withdrawals' grace.
 * Re-arms the engine's timer at the earliest next deadline.
 */
void dpdk_service(struct xpi_dpdk_tl *t, int64_t now)
{
	int64_t next = expire_asks(t, now);
	bool backlog = false;
	for (int i = 0; i < t->nmade; i++) {
		struct dpdk_peer *pr = t->peers[t->made[i]];
		if (!pr->up || pr->dead)
			continue;
		/* What the window lets go first (it carries our acknowledgement
		 * too), then resends, with the deadlines of all that was sent. */
		int64_t tx_next, ack_next;
		dpdk_pump(pr);
		if (xpi_rel_tx_poll(&pr->tx, now, &dpdk_rel_tx_ops, pr, &tx_next) < 0) {
			char why[120];
			snprintf(
				why, sizeof(why),
				"acknowledged nothing over dpdk for %lld ms (XP_DPDK_PEER_TIMEOUT_MS)",
				(long long)(pr->tx.p.give_up_ns / 1000000));
			dpdk_peer_fail(pr, -ETIMEDOUT, why);
			continue;
		}
		if (xpi_rel_rx_ack_due(&pr->rx, now, &ack_next)) {
			dpdk_send_ack(pr);
			(void)xpi_rel_rx_ack_due(&pr->rx, now, &ack_next);
		}
		backlog |= !xpi_dlist_empty(&pr->txq);
		next = tx_next < next ? tx_next : next;
		next = ack_next < next ? ack_next : next;
	}
	t->dirty = false;
	t->backlog = backlog;
	if (next == INT64_MAX) {
		if (t->timer.heap_pos != 0)
			xpi_timer_cancel(t->ctx, &t->timer);
	} else if (t->timer.heap_pos == 0 || t->timer.deadline_ns != next) {
		(void)xpi_timer_arm(t->ctx, &t->timer, next);
	}
}

void dpdk_timer_fire(struct xp_context *ctx, struct xpi_timer *timer)
{
	(void)ctx;
	struct xpi_dpdk_tl *t = xpi_container_of(timer, struct xpi_dpdk_tl, timer);
	dpdk_service(t, dpdk_clock(t)); /* the round's clock: timers run in one */
}

static int dpdk_progress(void *tlp)
{
	struct xpi_dpdk_tl *t = tlp;
	/* One clock read for a whole burst and the service after it (the
	 * first datagram reads it: dpdk_clock), none in an idle round. */
	t->in_rx = true;
	int n = xpi_dpdk_poll(t->port, (uint32_t)t->npeers, dpdk_rx_frame, t);
	if (n == 0 && t->drop.held != NULL)
		dpdk_drop_release(t);
	t->in_rx = false;
	/* Pairs made since (by a send or a datagram): their watchers too,
	 * from here, where a watcher may report its peer lost. */
	while (t->watch_next < t->nmade) {
		int p = t->made[t->watch_next++];
		if (t->addrs[p].watched)
			xpi_engine_watch_peer(t->ctx, p);
	}
	if (t->ctx->nfailed != t->nfailed_seen)
		watch_failures(t);
	return_credit(t);
	/* Datagrams came, or went: losses found by what was acknowledged are
	 * sent again now (not at the next timeout), what the burst queued or
	 * the window let go goes out, acknowledgements due go, and the timer
	 * moves to the new earliest deadline. */
	if (n > 0 || t->backlog || t->dirty)
		dpdk_service(t, dpdk_clock(t));
	return n;
}

/* Output not yet handed to the port. Datagrams sent and not yet
 * acknowledged do not count: a peer that stopped polling (waiting in a
 * barrier) would hold the waiter until its timeout; they are resent until
 * acknowledged, and the transport's end lingers for them (destroy). */
static bool dpdk_tx_pending(void *tlp)
{
	struct xpi_dpdk_tl *t = tlp;
	for (int i = 0; i < t->nmade; i++) {
		const struct dpdk_peer *pr = t->peers[t->made[i]];
		if (pr->up && !pr->dead && (!xpi_dlist_empty(&pr->txq) || pr->rx.unacked != 0))
			return true;
	}
	return false;
}

const struct xpi_tl_ops xpi_dpdk_ops = {
	.name = "dpdk",
	.rndv_threshold = 32768,
	.eager_max = XPI_DPDK_EAGER_MAX,
	.mem_reg = xpi_tl_mem_reg_none,
	.mem_dereg = xpi_tl_mem_dereg_none,
	.send_eager = dpdk_send_eager,
	.send_rts = dpdk_send_rts,
	.rndv_offer = xpi_tl_rndv_offer_none,
	.send_cancel = dpdk_send_cancel,
	.rndv_fetch = dpdk_rndv_fetch,
	.rndv_abort = dpdk_rndv_abort,
	.msg_release = dpdk_msg_release,
	.progress = dpdk_progress,
	/* A port has no file descriptor to sleep on: a waiter yields. */
	.sleep_prepare = xpi_tl_sleep_prepare_none,
	.sleep_done = xpi_tl_sleep_done_none,
	.tx_pending = dpdk_tx_pending,
	.destroy = dpdk_destroy,
};
