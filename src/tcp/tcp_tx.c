/* SPDX-License-Identifier: MIT */
/* The TCP transport's sending side: framed control messages, coalesced, and
 * rendezvous payloads on the bulk channel. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../core/log.h"
#include "tcp.h"

/*
 * Queues frame @f (and its payload_len bytes of @payload) on the control
 * channel; every frame also gives back the eager credit we owe. Returns 0,
 * or -EAGAIN if the queue is full (the core retries in order).
 */
static void acks_queue_waiting(struct tcp_conn *c);

int tcp_ctl_queue(struct tcp_conn *c, const struct xpi_frame *f, const void *payload)
{
	size_t need = XPI_FRAME_HDR_LEN + f->payload_len;
	if (c->tx_tail + need > XPI_TCP_TX_CAP) {
		/* Slide what is queued but not in the kernel's hands down to
		 * make room (the part in flight must not move). */
		if (c->tx_busy == 0 && c->tx_head != 0) {
			memmove(c->tx_buf, c->tx_buf + c->tx_head, c->tx_tail - c->tx_head);
			c->tx_tail -= c->tx_head;
			c->tx_head = 0;
		}
		if (c->tx_tail + need > XPI_TCP_TX_CAP)
			return -EAGAIN;
	}
	struct xpi_frame fr = *f;
	fr.credit = c->tcp->ctx->peers[c->peer].eager_returned;
	c->credit_told = fr.credit;
	xpi_frame_pack(&fr, c->tx_buf + c->tx_tail);
	if (f->payload_len != 0 && payload != NULL) /* control frames pass NULL, and no payload */
		memcpy(c->tx_buf + c->tx_tail + XPI_FRAME_HDR_LEN, payload, f->payload_len);
	c->tx_tail += need;
	return 0;
}

/*
 * Sends everything queued, unless a send is in flight or held.
 *
 * When nothing is in flight the frames go with one send(2) at once: cheaper
 * than a submission and its completion, and a lone message is not delayed.
 * The queue is then held until the next progress call, so that the frames
 * of a burst (a window of sends) coalesce into one send, as they do behind
 * a send in flight. What the socket does not take at once (full buffer,
 * error) goes by io_uring, whose completion reports the error or the rest.
 */
void tcp_ctl_flush(struct tcp_conn *c)
{
	if (c->dead || c->tx_busy != 0 || c->tx_held || c->tx_tail == c->tx_head)
		return;
	struct xpi_tcp *t = c->tcp;
	ssize_t n = send(c->fd_ctl, c->tx_buf + c->tx_head, c->tx_tail - c->tx_head,
			 MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n > 0) {
		c->tx_held = true;
		t->held[t->nheld++] = c->peer;
		c->tx_head += (size_t)n;
		if (c->tx_head == c->tx_tail) {
			c->tx_head = c->tx_tail = 0;
			return;
		}
	}
	struct io_uring_sqe *sqe = tcp_sqe(t);
	if (sqe == NULL)
		return; /* retried from progress */
	c->tx_busy = c->tx_tail - c->tx_head;
	io_uring_prep_send(sqe, c->fd_ctl, c->tx_buf + c->tx_head, c->tx_busy, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, tcp_udata(TCP_OP_SEND_CTL, c));
	c->inflight++;
}

/* Lets the held control queues go (tcp_ctl_flush): what was queued since
 * their send(2), and what waited for room (withdrawal answers, CTS). */
void tcp_ctl_release_holds(struct xpi_tcp *t)
{
	int n = t->nheld;
	t->nheld = 0;
	for (int i = 0; i < n; i++) {
		struct tcp_conn *c = t->conns[t->held[i]];
		c->tx_held = false;
		if (c->dead)
			continue;
		acks_queue_waiting(c);
		tcp_cts_queue_waiting(c);
		tcp_ctl_flush(c);
	}
}

void tcp_ctl_sent(struct tcp_conn *c, int res)
{
	size_t busy = c->tx_busy;
	c->tx_busy = 0;
	if (res == -ECANCELED) {
		/* The thread that submitted it exited (io_uring cancels its
		 * requests then; any thread holding the token submits): nothing
		 * went, send it again. */
		tcp_ctl_flush(c);
		return;
	}
	if (res < 0) {
		tcp_conn_fail(c, res, "broke its connection");
		return;
	}
	/* A short send leaves the rest at the head of the queue. */
	c->tx_head += (size_t)res < busy ? (size_t)res : busy;
	if (c->tx_head == c->tx_tail)
		c->tx_head = c->tx_tail = 0;
	acks_queue_waiting(c);
	tcp_cts_queue_waiting(c);
	tcp_ctl_flush(c);
}

/* Queues the withdrawal answers that did not fit before, oldest first,
 * while the control queue has room. */
static void acks_queue_waiting(struct tcp_conn *c)
{
	if (c->nacks == 0)
		return; /* the usual case; c->acks may be NULL */
	unsigned done = 0;
	while (done < c->nacks && !c->dead) {
		struct xpi_frame f = { .type = XPI_FRAME_WITHDRAW_ACK,
				       .flags = c->acks[done].flags,
				       .id = c->acks[done].id };
		if (tcp_ctl_queue(c, &f, NULL) < 0)
			break; /* full: tcp_ctl_sent() calls again */
		done++;
	}
	memmove(c->acks, c->acks + done, (c->nacks - done) * sizeof(*c->acks));
	c->nacks -= done;
}

int tcp_ack_queue(struct tcp_conn *c, struct tcp_ack ack)
{
	if (c->nacks == 0) {
		struct xpi_frame f = { .type = XPI_FRAME_WITHDRAW_ACK,
				       .flags = ack.flags,
				       .id = ack.id };
		if (tcp_ctl_queue(c, &f, NULL) == 0) {
			tcp_ctl_flush(c);
			return 0;
		}
	}
	if (c->nacks == c->acks_cap) {
		unsigned cap = c->acks_cap != 0 ? 2 * c->acks_cap : 16;
		struct tcp_ack *a = realloc(c->acks, cap * sizeof(*a));
		if (a == NULL)
			return -ENOMEM;
		c->acks = a;
		c->acks_cap = cap;
	}
	c->acks[c->nacks++] = ack; /* behind the others: answers keep their order */
	return 0;
}

/* Queues the clear-to-send of every payload asked for whose CTS did not
 * fit before, oldest first, while the control queue has room. */
void tcp_cts_queue_waiting(struct tcp_conn *c)
{
	struct xpi_dlink *pos;
	if (c->cts_waiting == 0 || c->dead)
		return;
	xpi_dlist_for_each(pos, &c->bulk_rx) {
		struct tcp_bulk_rx *x = xpi_container_of(pos, struct tcp_bulk_rx, link);
		if (x->cts_queued)
			continue;
		struct xpi_frame f = { .type = XPI_FRAME_CTS, .id = x->id };
		if (tcp_ctl_queue(c, &f, NULL) < 0)
			return; /* full: tcp_ctl_sent() calls again */
		x->cts_queued = true;
		c->cts_waiting--;
	}
	tcp_ctl_flush(c);
}

static int zc_slot_free(const struct tcp_conn *c)
{
	for (int i = 0; i < XPI_TCP_ZC_SLOTS; i++)
		if (c->zc_slot[i] == NULL)
			return i;
	return -1; /* all busy: this part goes by a plain send */
}

/* Starts (or continues) sending the payload the peer asked for first. */
void tcp_bulk_start(struct tcp_conn *c)
{
	if (c->dead || c->bulk_tx_busy || xpi_dlist_empty(&c->bulk_tx))
		return;
	xp_request_t *s = xpi_container_of(c->bulk_tx.next, xp_request_t, tl_link);
	bool withdrawn = atomic_load(&s->rndv_state) == XPI_RNDV_WITHDRAWN;
	uint64_t len = withdrawn ? 0 : s->len;
	if (c->bulk_tx_off == 0) {
		struct xpi_frame f = {
			.type = XPI_FRAME_DATA,
			.flags = withdrawn ? XPI_FRAME_F_WITHDRAWN : 0,
			.comm = s->comm,
			.tag = s->tag,
			.msg_len = len,
			.id = s->tl_id,
		};
		xpi_frame_pack(&f, c->bulk_tx_hdr);
	}
	/* Header and payload in one sendmsg; after a short send, what is left. */
	uint64_t hdr_off = c->bulk_tx_off < XPI_FRAME_HDR_LEN ? c->bulk_tx_off : XPI_FRAME_HDR_LEN;
	uint64_t off = c->bulk_tx_off - hdr_off; /* into the payload */
	struct io_uring_sqe *sqe = tcp_sqe(c->tcp);
	if (sqe == NULL)
		return;
	int slot = c->zc && !c->bulk_tx_nozc && len - off >= XPI_TCP_ZC_MIN ? zc_slot_free(c) : -1;
	/* A plain send has copied its bytes when it completes; a zero-copy
	 * one reads them until its notification: its header gets a copy of
	 * its own, alive as long as the slot. */
	const uint8_t *hdr = c->bulk_tx_hdr;
	if (slot >= 0 && hdr_off < XPI_FRAME_HDR_LEN) {
		memcpy(c->zc_hdr[slot], c->bulk_tx_hdr, XPI_FRAME_HDR_LEN);
		hdr = c->zc_hdr[slot];
	}
	int n = 0;
	if (hdr_off < XPI_FRAME_HDR_LEN)
		c->bulk_iov[n++] =
			(struct iovec){ (void *)(hdr + hdr_off), XPI_FRAME_HDR_LEN - hdr_off };
	if (len - off != 0)
		c->bulk_iov[n++] = (struct iovec){ (uint8_t *)s->buf + off, len - off };
	memset(&c->bulk_msg, 0, sizeof(c->bulk_msg));
	c->bulk_msg.msg_iov = c->bulk_iov;
	c->bulk_msg.msg_iovlen = (size_t)n;
	if (slot >= 0) {
		io_uring_prep_sendmsg_zc(sqe, c->fd_bulk, &c->bulk_msg, MSG_NOSIGNAL);
		sqe->ioprio |= IORING_SEND_ZC_REPORT_USAGE;
		io_uring_sqe_set_data64(sqe, (uint64_t)TCP_OP_SEND_BULK_ZC << 56 |
						     (uint64_t)(uint32_t)c->peer << 32 |
						     (uint32_t)slot);
		c->zc_slot[slot] = s;
		s->tl_pending++;
		c->tcp->zc_sends++;
	} else {
		io_uring_prep_sendmsg(sqe, c->fd_bulk, &c->bulk_msg, MSG_NOSIGNAL);
		io_uring_sqe_set_data64(sqe, tcp_udata(TCP_OP_SEND_BULK, c));
	}
	c->bulk_zc_slot = slot;
	c->bulk_tx_busy = true;
	c->inflight++;
}

/* Finishes a zero-copy send whose bytes all went out once the kernel has
 * given back every page it lent (its last notification). */
static void zc_maybe_finish(struct tcp_conn *c, xp_request_t *s)
{
	if (s->tl_pending != 0 || s->tl_link.next == &s->tl_link)
		return;
	bool on_wait_list = false;
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &c->zc_wait) {
		on_wait_list |= pos == &s->tl_link;
	}
	if (!on_wait_list)
		return; /* still being sent */
	xpi_dlist_remove(&s->tl_link);
	/* Every byte went out before the peer said goodbye (it finalizes
	 * only after its receives completed): the send is done, whatever
	 * became of the connection after. */
	bool delivered = !c->dead || (c->bye && s->tl_deadline != XPI_TCP_ZC_CUT_OFF);
	if (delivered)
		xpi_request_complete(s, 0);
	else
		xpi_engine_fail_request(c->tcp->ctx, s, c->peer);
	xpi_request_put(s);
}

/* A zero-copy send's completions: the send itself (F_MORE: a notification
 * follows) and its notification (F_NOTIF). */
void tcp_bulk_zc_cqe(struct tcp_conn *c, unsigned slot, int res, unsigned flags)
{
	xp_request_t *s = slot < XPI_TCP_ZC_SLOTS ? c->zc_slot[slot] : NULL;
	if (s == NULL)
		return;
	if (flags & IORING_CQE_F_NOTIF) {
		/* The kernel reports when it had to copy after all (loopback,
		 * devices without scatter-gather): then zero-copy only adds
		 * pinning and a notification, so stop using it on this
		 * connection after a run of such reports. */
		if (res & IORING_NOTIF_USAGE_ZC_COPIED) {
			c->tcp->zc_copied++;
			if (++c->zc_copied_run == 8 && c->zc) {
				c->zc = false;
				if (xpi_debug_on("transport"))
					xpi_log(XPI_LOG_INFO,
						"rank %d: zero-copy sends to rank %d were copied "
						"by the kernel anyway; plain sends from now on",
						c->tcp->ctx->rank, c->peer);
			}
		} else {
			c->zc_copied_run = 0;
		}
		c->zc_slot[slot] = NULL;
		s->tl_pending--;
		c->inflight--;
		zc_maybe_finish(c, s);
		return;
	}
	if (!(flags & IORING_CQE_F_MORE)) {
		/* No notification will come (the send failed early). */
		c->zc_slot[slot] = NULL;
		s->tl_pending--;
		c->inflight--;
	}
	if (!c->dead)
		tcp_bulk_sent(c, res);
	else
		zc_maybe_finish(c, s);
}

void tcp_bulk_sent(struct tcp_conn *c, int res)
{
	c->bulk_tx_busy = false;
	if (res == -ECANCELED) { /* its submitter exited: as tcp_ctl_sent */
		tcp_bulk_start(c);
		return;
	}
	if (res == -EFAULT && c->bulk_zc_slot >= 0) {
		/* Zero copy pins the pages, which memory mapped with VM_PFNMAP
		 * (a dmabuf's, a device's) refuses although the CPU can read
		 * it: nothing went out, so send the rest by copying. */
		c->bulk_tx_nozc = true;
		tcp_bulk_start(c);
		return;
	}
	if (res < 0) {
		tcp_conn_fail(
			c, res,
			res == -EFAULT ?
				"lost its bulk connection: a payload for it could not be read (EFAULT)" :
				"broke its bulk connection");
		return;
	}
	xp_request_t *s = xpi_container_of(c->bulk_tx.next, xp_request_t, tl_link);
	bool withdrawn = atomic_load(&s->rndv_state) == XPI_RNDV_WITHDRAWN;
	uint64_t total = XPI_FRAME_HDR_LEN + (withdrawn ? 0 : s->len);
	c->bulk_tx_off += (uint64_t)res;
	if (c->bulk_tx_off >= total) {
		xpi_dlist_remove(&s->tl_link);
		c->bulk_tx_off = 0;
		c->bulk_tx_nozc = false;
		if (s->tl_pending != 0) {
			/* Zero-copy: the kernel still holds the user's pages. */
			xpi_dlist_push_tail(&c->zc_wait, &s->tl_link);
		} else {
			/* The kernel has copied the payload: the buffer is free. */
			if (!withdrawn)
				xpi_request_complete(s, 0);
			xpi_request_put(s);
		}
	}
	tcp_bulk_start(c);
}
