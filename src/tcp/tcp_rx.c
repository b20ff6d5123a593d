/* SPDX-License-Identifier: MIT */
/* The TCP transport's receiving side: parsing the control stream out of the
 * buffers the kernel filled, and reading rendezvous payloads straight into
 * receive buffers. Every field that came from the wire is checked first. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "../core/ep.h"
#include "../core/log.h"
#include "tcp.h"

/* Arms the multishot recv of the control channel. */
void tcp_ctl_arm(struct tcp_conn *c)
{
	if (c->dead || c->recv_armed)
		return;
	struct io_uring_sqe *sqe = tcp_sqe(c->tcp);
	if (sqe == NULL)
		return;
	io_uring_prep_recv_multishot(sqe, c->fd_ctl, NULL, 0, 0);
	sqe->flags |= IOSQE_BUFFER_SELECT;
	sqe->buf_group = XPI_TCP_BGID;
	io_uring_sqe_set_data64(sqe, tcp_udata(TCP_OP_RECV_CTL, c));
	c->recv_armed = true;
	c->inflight++;
}

static void protocol_error(struct tcp_conn *c, const char *why)
{
	char text[160];
	snprintf(text, sizeof(text), "sent a malformed frame (%s); its connection was closed", why);
	tcp_conn_fail(c, -EPROTO, text);
}

static void deliver(struct tcp_conn *c, const struct xpi_frame *f, uint8_t kind, const void *data,
		    struct xp_buf *buf, uint64_t id)
{
	struct xpi_msg m;
	m.desc_len = 0; /* set field by field: the store is not cleared */
	m.u.key.comm = f->comm;
	m.u.key.src = c->peer;
	m.u.key.tag = f->tag;
	m.u.key.mask = 0;
	m.kind = kind;
	m.tl = (uint8_t)c->tcp->tl_index;
	m.sized = false;
	m.peer_seq = f->peer_seq;
	m.len = f->msg_len;
	m.data = data;
	m.buf = buf;
	m.rndv = (void *)(uintptr_t)id;
	if (kind == XPI_MSG_RTS) /* its payload: the bulk lane's descriptor, if any */
		m.desc_len = (uint8_t)f->payload_len;
	xpi_engine_deliver(c->tcp->ctx, &m);
}

/* The peer could not take our send @s, its receive failed with @code (a
 * positive errno from the wire): the send fails with it, naming the peer. */
static void send_refused(struct tcp_conn *c, xp_request_t *s, uint64_t code)
{
	xp_context_t *ctx = c->tcp->ctx;
	int err = code != 0 && code < 4096 ? -(int)code : -EIO;
	/* A send withdrawn meanwhile has been completed by the core already. */
	if (atomic_load(&s->rndv_state) != XPI_RNDV_WITHDRAWN) {
		xpi_request_set_detail(
			s,
			"rank %d: xp_send to rank %d tag 0x%llx on communicator %u "
			"failed: rank %d could not take it (%s) and failed its receive",
			ctx->rank, c->peer, (unsigned long long)s->tag, s->comm, c->peer,
			xp_strerror(err));
		xpi_request_complete(s, err);
	}
	xpi_request_put(s);
}

/* The peer asked for the payload of our send @f->id: queue it on the bulk
 * channel; or it refused it. */
static void got_cts(struct tcp_conn *c, const struct xpi_frame *f)
{
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &c->rts_out) {
		xp_request_t *s = xpi_container_of(pos, xp_request_t, tl_link);
		if (s->tl_id != f->id)
			continue;
		xpi_dlist_remove(&s->tl_link);
		if (f->flags & XPI_FRAME_F_REFUSED) {
			send_refused(c, s, f->msg_len);
			return;
		}
		/* Asked to withdraw, but the receiver took it first: it goes
		 * (its answer, busy, follows; one taken back alone streams
		 * nothing, DATA withdrawn). */
		int expected = XPI_RNDV_ASKED;
		atomic_compare_exchange_strong(&s->rndv_state, &expected, XPI_RNDV_PENDING);
		xpi_dlist_push_tail(&c->bulk_tx, &s->tl_link);
		tcp_bulk_start(c);
		return;
	}
	protocol_error(c, "clear-to-send for a send it was never announced");
}

/* The sender of message @f->id asks to take it back: our engine decides
 * (a receive may have taken it) and we answer. */
static void got_withdraw(struct tcp_conn *c, const struct xpi_frame *f)
{
	int rc = xpi_engine_withdraw(c->tcp->ctx, c->peer, f->comm, f->tag, f->peer_seq);
	struct tcp_ack ack = { .id = f->id, .flags = rc == 0 ? 0 : XPI_FRAME_F_BUSY };
	/* A full control queue only delays the answer; the sender does not
	 * wait for it past its grace (tcp_ask_timer_fire). */
	if (tcp_ack_queue(c, ack) < 0)
		tcp_conn_fail(c, -ENOMEM, "could not be answered a withdrawal (out of memory)");
}

/* The receiver answered our WITHDRAW: the send ends withdrawn, or (busy) it
 * goes on, its CTS on the way or already here. */
static void got_withdraw_ack(struct tcp_conn *c, const struct xpi_frame *f)
{
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &c->rts_out) {
		xp_request_t *s = xpi_container_of(pos, xp_request_t, tl_link);
		if (s->tl_id != f->id)
			continue;
		int state = atomic_load(&s->rndv_state);
		if (f->flags & XPI_FRAME_F_BUSY) {
			/* A receive took it first; its CTS follows. One we took
			 * back alone meanwhile is told so then (DATA, withdrawn). */
			if (state == XPI_RNDV_ASKED)
				atomic_store(&s->rndv_state, XPI_RNDV_PENDING);
			return;
		}
		xpi_dlist_remove(&s->tl_link);
		if (state == XPI_RNDV_ASKED) { /* not yet taken back alone */
			atomic_store(&s->rndv_state, XPI_RNDV_WITHDRAWN);
			xpi_engine_send_withdrawn(c->tcp->ctx, s);
		}
		xpi_request_put(s);
		return;
	}
	/* Answered busy before, or its CTS came first: nothing to do. */
	if (!(f->flags & XPI_FRAME_F_BUSY))
		protocol_error(c, "withdrawal granted for a send it was never asked for");
}

/* A SIDEBAND frame's payload, for the transport it names: a peer that
 * sends one for a transport that takes none here is broken. */
static void sideband(struct tcp_conn *c, const uint8_t *payload)
{
	if (xpi_engine_sideband(c->tcp->ctx, c->peer, (uint8_t)c->frame.comm, payload,
				c->frame.payload_len) < 0)
		protocol_error(c, "a sideband message for a transport that takes none");
}

/* A frame header is complete. Returns false if the connection failed. */
static bool got_header(struct tcp_conn *c, const struct xpi_frame *f)
{
	struct xpi_peer *p = &c->tcp->ctx->peers[c->peer];
	if (f->credit > p->eager_granted)
		p->eager_granted = f->credit;
	switch (f->type) {
	case XPI_FRAME_EAGER:
	case XPI_FRAME_RTS:
		if (!xpi_engine_comm_valid(c->tcp->ctx, f->comm)) {
			protocol_error(c, "communicator id out of range");
			return false;
		}
		if (f->type == XPI_FRAME_RTS && f->payload_len == 0)
			deliver(c, f, XPI_MSG_RTS, NULL, NULL, f->id);
		else if (f->type == XPI_FRAME_EAGER && f->payload_len == 0)
			deliver(c, f, XPI_MSG_INLINE, NULL, NULL, 0);
		else
			c->in_payload = true;
		break;
	case XPI_FRAME_CTS:
		got_cts(c, f);
		break;
	case XPI_FRAME_WITHDRAW:
		got_withdraw(c, f);
		break;
	case XPI_FRAME_WITHDRAW_ACK:
		got_withdraw_ack(c, f);
		break;
	case XPI_FRAME_SIDEBAND:
		c->in_payload = true; /* never empty (xpi_frame_parse) */
		break;
	case XPI_FRAME_CREDIT:
		break;
	case XPI_FRAME_BYE:
		c->bye = true;
		/* An endpoint's says how many messages it sent in all: its
		 * end waits for those still on another lane. */
		if (c->ep != NULL)
			xpi_ep_bye(c->tcp->ctx, c->peer, (uint32_t)f->id);
		break;
	default: /* DATA belongs on the bulk channel */
		protocol_error(c, "bulk data on the control channel");
		return false;
	}
	return !c->dead;
}

/*
 * Parses @n bytes at @p, part of pooled buffer @chunk. An eager payload of
 * XPI_TCP_VIEW_MIN bytes or more that lies entirely inside the chunk may go
 * to the engine as a view of it (no copy; see tcp.h for when); others go as
 * inline payloads the engine copies, gathered in asm_buf first if they span
 * chunks.
 */
static void parse(struct tcp_conn *c, struct xp_buf *chunk, uint8_t *p, size_t n)
{
	while (n != 0 && !c->dead) {
		if (!c->in_payload) {
			const uint8_t *h = p;
			size_t used = XPI_FRAME_HDR_LEN;
			if (c->hdr_have != 0 || n < XPI_FRAME_HDR_LEN) {
				size_t k = XPI_FRAME_HDR_LEN - c->hdr_have;
				if (k > n)
					k = n;
				memcpy(c->hdr + c->hdr_have, p, k);
				c->hdr_have += k;
				used = k;
				h = c->hdr;
				if (c->hdr_have < XPI_FRAME_HDR_LEN)
					return; /* the rest comes in the next chunk */
				c->hdr_have = 0;
			}
			p += used;
			n -= used;
			const char *why;
			if (xpi_frame_parse(h, XPI_FRAME_HDR_LEN, c->tcp->max_eager, &c->frame,
					    &why) < 0) {
				protocol_error(c, why);
				return;
			}
			if (!got_header(c, &c->frame))
				return;
			continue;
		}
		size_t need = c->frame.payload_len - c->asm_have;
		/* An RTS's payload is a descriptor for the bulk lane. */
		uint8_t kind = c->frame.type == XPI_FRAME_RTS ? XPI_MSG_RTS : XPI_MSG_INLINE;
		uint64_t id = c->frame.type == XPI_FRAME_RTS ? c->frame.id : 0;
		if (c->asm_have == 0 && n >= need) {
			struct xp_buf *view;
			if (c->frame.type == XPI_FRAME_SIDEBAND)
				sideband(c, p);
			else if (kind == XPI_MSG_INLINE && need >= XPI_TCP_VIEW_MIN &&
				 tcp_br_may_lend(c->tcp) &&
				 xpi_buf_view(chunk, p, need, &view) == 0)
				deliver(c, &c->frame, XPI_MSG_BUF, NULL, view, 0);
			else
				deliver(c, &c->frame, kind, p, NULL, id);
			p += need;
			n -= need;
			c->in_payload = false;
			continue;
		}
		size_t k = n < need ? n : need;
		memcpy(c->asm_buf + c->asm_have, p, k);
		c->asm_have += k;
		p += k;
		n -= k;
		if (c->asm_have == c->frame.payload_len) {
			if (c->frame.type == XPI_FRAME_SIDEBAND)
				sideband(c, c->asm_buf);
			else
				deliver(c, &c->frame, kind, c->asm_buf, NULL, id);
			c->asm_have = 0;
			c->in_payload = false;
		}
	}
}

/*
 * A funneled rank's ring defers its completions' work until the owner asks
 * for events: when the kernel says work waits, the owner would enter the
 * ring, which runs the multishot recv's retry into a provided buffer and
 * posts its completion, 0.4-0.5 us more than recv(2) on the socket itself
 * (io_uring ping-pong 1.12-1.15x a spinning recv here). So the owner reads
 * the control stream of the connection that last had data itself, once per
 * wake-up; the recv armed on it then finds nothing and waits again, and
 * the entry that runs that comes after the message was handled. The order
 * of the stream holds: the caller reads only with no completion waiting
 * in the ring (every byte the kernel read for us already handled), and
 * whatever the ring reads later was sent later.
 *
 * Returns 1 if something was read and parsed, 0 if not (nothing there, no
 * chunk, or an end or error, which the armed recv also sees and reports).
 */
int tcp_ctl_recv_direct(struct tcp_conn *c)
{
	struct xpi_tcp *t = c->tcp;
	struct xp_buf *chunk = t->direct;
	if (chunk == NULL) {
		if (xpi_pool_get(t->ctx->pool, XPI_TCP_CHUNK, &chunk) < 0)
			return 0;
		t->direct = chunk;
	}
	ssize_t n = recv(c->fd_ctl, chunk->data, XPI_TCP_CHUNK, MSG_DONTWAIT);
	if (n <= 0)
		return 0;
	t->direct_reads++;
	parse(c, chunk, chunk->data, (size_t)n);
	if (tcp_chunk_keep_lent(t, chunk))
		t->direct = NULL;
	return 1;
}

void tcp_ctl_received(struct tcp_conn *c, int res, unsigned flags)
{
	struct xpi_tcp *t = c->tcp;
	t->direct_peer = c->peer;
	if (!(flags & IORING_CQE_F_MORE))
		c->recv_armed = false; /* re-armed below or by progress */
	if (res > 0 && (flags & IORING_CQE_F_BUFFER)) {
		unsigned bid = flags >> IORING_CQE_BUFFER_SHIFT;
		struct xp_buf *chunk = tcp_br_take(t, bid);
		if (chunk == NULL) {
			tcp_conn_fail(c, -EPROTO, "got data in a buffer we never provided");
			return;
		}
		t->ring_reads++;
		if (!c->dead)
			parse(c, chunk, chunk->data, (size_t)res);
		tcp_br_give_back(t, bid, chunk);
	} else if (res == -ENOBUFS) {
		/* The kernel filled every provided buffer before we could give
		 * any back: re-armed by progress once the ring has some again. */
		t->need_arm = true;
		return;
	} else if (res == 0) {
		if (c->bye)
			c->tcp->ctx->peers[c->peer].finalized = true;
		tcp_conn_fail(
			c, -ECONNRESET,
			c->bye ?
				(c->ep != NULL ? "closed the endpoint" : "has finalized") :
				"closed its connection (it exited, died, or refused what we sent)");
		return;
	} else if (res < 0 && res != -ECANCELED) {
		tcp_conn_fail(c, res, "broke its connection");
		return;
	}
	if (!c->recv_armed)
		tcp_ctl_arm(c);
}

/* Arms the read of the next rendezvous payload on the bulk channel. */
void tcp_bulk_arm(struct tcp_conn *c)
{
	if (c->dead || c->bulk_rx_busy || xpi_dlist_empty(&c->bulk_rx))
		return;
	struct tcp_bulk_rx *x = xpi_container_of(c->bulk_rx.next, struct tcp_bulk_rx, link);
	uint8_t *dst;
	size_t len;
	uint64_t off = c->bulk_rx_off;
	if (off < XPI_FRAME_HDR_LEN) {
		dst = c->bulk_rx_hdr + off;
		len = XPI_FRAME_HDR_LEN - off;
	} else if ((off -= XPI_FRAME_HDR_LEN) < x->cap) {
		dst = x->dst + off; /* straight into the user's receive buffer */
		len = x->cap - off;
	} else {
		off -= x->cap; /* a truncated receive: read the rest and drop it */
		dst = c->tcp->drop;
		len = x->len - x->cap - off;
		if (len > XPI_TCP_MAX_EAGER)
			len = XPI_TCP_MAX_EAGER;
	}
	if (len > (1u << 30))
		len = 1u << 30;
	struct io_uring_sqe *sqe = tcp_sqe(c->tcp);
	if (sqe == NULL)
		return;
	io_uring_prep_recv(sqe, c->fd_bulk, dst, len, MSG_WAITALL);
	io_uring_sqe_set_data64(sqe, tcp_udata(TCP_OP_RECV_BULK, c));
	c->bulk_rx_busy = true;
	c->inflight++;
}

bool tcp_bulk_rx_in_user(const struct tcp_conn *c, const struct tcp_bulk_rx *x)
{
	return c->bulk_rx_busy && &x->link == c->bulk_rx.next &&
	       c->bulk_rx_off >= XPI_FRAME_HDR_LEN && c->bulk_rx_off - XPI_FRAME_HDR_LEN < x->cap;
}

void tcp_bulk_received_dead(struct tcp_conn *c)
{
	c->bulk_rx_busy = false;
	struct xpi_dlink *l = xpi_dlist_pop_head(&c->bulk_rx);
	if (l == NULL)
		return;
	struct tcp_bulk_rx *x = xpi_container_of(l, struct tcp_bulk_rx, link);
	if (x->rreq != NULL)
		xpi_engine_fail_request(c->tcp->ctx, x->rreq, c->peer);
	free(x);
}

void tcp_bulk_received(struct tcp_conn *c, int res)
{
	c->bulk_rx_busy = false;
	if (res == 0) {
		if (c->bye)
			c->tcp->ctx->peers[c->peer].finalized = true;
		tcp_conn_fail(
			c, -ECONNRESET,
			c->bye ?
				(c->ep != NULL ? "closed the endpoint" : "has finalized") :
				"closed its connection (it exited, died, or refused what we sent)");
		return;
	}
	if (res == -ECANCELED) {
		/* Not ours: io_uring cancels a thread's requests when that
		 * thread exits, and whichever thread held the rank's token
		 * submitted this read. Nothing was read: read again. */
		tcp_bulk_arm(c);
		return;
	}
	if (res < 0) {
		tcp_conn_fail(c, res, "broke its bulk connection");
		return;
	}
	struct tcp_bulk_rx *x = xpi_container_of(c->bulk_rx.next, struct tcp_bulk_rx, link);
	uint64_t before = c->bulk_rx_off;
	c->bulk_rx_off += (uint64_t)res;
	if (before < XPI_FRAME_HDR_LEN && c->bulk_rx_off >= XPI_FRAME_HDR_LEN) {
		struct xpi_frame f;
		const char *why = "bulk data of another message";
		if (xpi_frame_parse(c->bulk_rx_hdr, XPI_FRAME_HDR_LEN, 0, &f, &why) < 0 ||
		    f.type != XPI_FRAME_DATA || f.id != x->id ||
		    (!(f.flags & XPI_FRAME_F_WITHDRAWN) && f.msg_len != x->len)) {
			protocol_error(c, why);
			return;
		}
		if (f.flags & XPI_FRAME_F_WITHDRAWN) {
			/* The sender timed out and took the message back. */
			xpi_dlist_remove(&x->link);
			c->bulk_rx_off = 0;
			if (x->rreq != NULL)
				xpi_engine_rndv_done(c->tcp->ctx, x->rreq, -ECANCELED);
			free(x);
			tcp_bulk_arm(c);
			return;
		}
	}
	if (c->bulk_rx_off == XPI_FRAME_HDR_LEN + x->len) {
		xpi_dlist_remove(&x->link);
		c->bulk_rx_off = 0;
		if (x->rreq != NULL) /* NULL: its receive gave up (tcp_rndv_abort) */
			xpi_engine_rndv_done(c->tcp->ctx, x->rreq, 0);
		free(x);
	}
	tcp_bulk_arm(c);
}
