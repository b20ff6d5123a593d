/* SPDX-License-Identifier: MIT */
/* The TCP transport's sending side: framed control messages, coalesced, and
 * rendezvous payloads on the bulk channel. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "tcp.h"

/*
 * Queues frame @f (and its payload_len bytes of @payload) on the control
 * channel; every frame also gives back the eager credit we owe. Returns 0,
 * or -EAGAIN if the queue is full (the core retries in order).
 */
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
	if (f->payload_len != 0)
		memcpy(c->tx_buf + c->tx_tail + XPI_FRAME_HDR_LEN, payload, f->payload_len);
	c->tx_tail += need;
	return 0;
}

/* Starts a send of everything queued, unless one is in flight already. */
void tcp_ctl_flush(struct tcp_conn *c)
{
	if (c->dead || c->tx_busy != 0 || c->tx_tail == c->tx_head)
		return;
	struct io_uring_sqe *sqe = tcp_sqe(c->tcp);
	if (sqe == NULL)
		return; /* retried from progress */
	c->tx_busy = c->tx_tail - c->tx_head;
	io_uring_prep_send(sqe, c->fd_ctl, c->tx_buf + c->tx_head, c->tx_busy, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, tcp_udata(TCP_OP_SEND_CTL, c));
	c->inflight++;
}

void tcp_ctl_sent(struct tcp_conn *c, int res)
{
	size_t busy = c->tx_busy;
	c->tx_busy = 0;
	if (res < 0) {
		tcp_conn_fail(c, res, "broke its connection");
		return;
	}
	/* A short send leaves the rest at the head of the queue. */
	c->tx_head += (size_t)res < busy ? (size_t)res : busy;
	if (c->tx_head == c->tx_tail)
		c->tx_head = c->tx_tail = 0;
	tcp_ctl_flush(c);
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
	uint64_t off = c->bulk_tx_off;
	int n = 0;
	if (off < XPI_FRAME_HDR_LEN) {
		c->bulk_iov[n++] = (struct iovec){ c->bulk_tx_hdr + off, XPI_FRAME_HDR_LEN - off };
		off = 0;
	} else {
		off -= XPI_FRAME_HDR_LEN;
	}
	if (len - off != 0)
		c->bulk_iov[n++] = (struct iovec){ (uint8_t *)s->buf + off, len - off };
	struct io_uring_sqe *sqe = tcp_sqe(c->tcp);
	if (sqe == NULL)
		return;
	memset(&c->bulk_msg, 0, sizeof(c->bulk_msg));
	c->bulk_msg.msg_iov = c->bulk_iov;
	c->bulk_msg.msg_iovlen = (size_t)n;
	io_uring_prep_sendmsg(sqe, c->fd_bulk, &c->bulk_msg, MSG_NOSIGNAL);
	io_uring_sqe_set_data64(sqe, tcp_udata(TCP_OP_SEND_BULK, c));
	c->bulk_tx_busy = true;
	c->inflight++;
}

void tcp_bulk_sent(struct tcp_conn *c, int res)
{
	c->bulk_tx_busy = false;
	if (res < 0) {
		tcp_conn_fail(c, res, "broke its bulk connection");
		return;
	}
	xp_request_t *s = xpi_container_of(c->bulk_tx.next, xp_request_t, tl_link);
	bool withdrawn = atomic_load(&s->rndv_state) == XPI_RNDV_WITHDRAWN;
	uint64_t total = XPI_FRAME_HDR_LEN + (withdrawn ? 0 : s->len);
	c->bulk_tx_off += (uint64_t)res;
	if (c->bulk_tx_off >= total) {
		xpi_dlist_remove(&s->tl_link);
		c->bulk_tx_off = 0;
		/* The kernel has copied the payload: the user's buffer is free. */
		if (!withdrawn)
			xpi_request_complete(s, 0);
		xpi_request_put(s);
	}
	tcp_bulk_start(c);
}
