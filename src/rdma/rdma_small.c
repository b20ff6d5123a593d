/* SPDX-License-Identifier: MIT */
/*
 * The RDMA transport's small lane: frames sent with two-sided SENDs into
 * the peers' shared receive queue, and the window that keeps that queue
 * from running dry (rdma_tl.h says how and why).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/wire.h"
#include "rdma_tl.h"

/* Header slots are cache-line apart: the device writes one while the CPU
 * reads its neighbour. */
#define HDR_STRIDE 64u
#define EAGER_MAX (XPI_RDMA_RX_BUF - XPI_FRAME_HDR_LEN)

/* The lkey of a pool buffer: the pool's class mappings are registered
 * whole, once (rdma_mem_reg), so this never pins or locks. */
static bool pool_lkey(struct xpi_rdma_tl *t, struct xp_buf *b, uint32_t *lkey)
{
	struct rdma_region *r = xpi_buf_handle(b, t->tl_index);
	if (r == NULL || r->mr == NULL)
		return false;
	*lkey = r->mr->lkey;
	return true;
}

int rdma_small_setup(struct xpi_rdma_tl *t)
{
	struct ibv_srq_init_attr sa = { .attr = { .max_wr = t->srq_depth, .max_sge = 2 } };
	t->srq = ibv_create_srq(t->dev.pd, &sa);
	if (t->srq == NULL)
		return xpi_rdma_fail_errno("setting up the shared receive queue", "ibv_create_srq",
					   t->dev.name, NULL);
	size_t hdrs = (size_t)t->srq_depth * HDR_STRIDE;
	t->rx_hdrs = aligned_alloc(4096, (hdrs + 4095) & ~(size_t)4095);
	t->rx_bufs = calloc(t->srq_depth, sizeof(*t->rx_bufs));
	t->rx_unposted = calloc(t->srq_depth, sizeof(*t->rx_unposted));
	if (t->rx_hdrs == NULL || t->rx_bufs == NULL || t->rx_unposted == NULL)
		return -ENOMEM;
	t->rx_hdrs_mr = ibv_reg_mr(t->dev.pd, t->rx_hdrs, hdrs, IBV_ACCESS_LOCAL_WRITE);
	if (t->rx_hdrs_mr == NULL)
		return xpi_rdma_fail_errno("registering the receive headers", "ibv_reg_mr",
					   t->dev.name, NULL);
	/* The buffers come as pairs are made (rdma_small_grow): a rank pins
	 * 16 KiB per entry of the windows of the peers it talks to, not of
	 * every peer of the job (at 1,000 peers, 94 MiB). */
	return 0;
}

/* Posts the entries taken since the last time (t->rx_unposted), in one
 * call: off the path from a message's arrival to its answer, and with one
 * lock of the queue for many. Those that cannot be posted stay for the
 * next try. 0 or the failed call's code. */
static int post_unposted(struct xpi_rdma_tl *t)
{
	while (t->nrx_unposted != 0) {
		struct ibv_recv_wr wr[XPI_RDMA_REPOST_BATCH], *bad = NULL;
		struct ibv_sge sge[XPI_RDMA_REPOST_BATCH][2];
		uint32_t n = t->nrx_unposted < XPI_RDMA_REPOST_BATCH ? t->nrx_unposted :
								       XPI_RDMA_REPOST_BATCH;
		const uint32_t *slots = t->rx_unposted + t->nrx_unposted - n;
		for (uint32_t i = 0; i < n; i++) {
			uint32_t slot = slots[i], lkey;
			struct xp_buf *b = t->rx_bufs[slot];
			if (!pool_lkey(t, b, &lkey))
				return -EINVAL;
			sge[i][0] = (struct ibv_sge){ (uintptr_t)(t->rx_hdrs +
								  (size_t)slot * HDR_STRIDE),
						      XPI_FRAME_HDR_LEN, t->rx_hdrs_mr->lkey };
			sge[i][1] = (struct ibv_sge){ (uintptr_t)b->data, XPI_RDMA_RX_BUF, lkey };
			wr[i] = (struct ibv_recv_wr){ .wr_id = rdma_wr_id(RDMA_WR_RECV, slot),
						      .next = i + 1 < n ? &wr[i + 1] : NULL,
						      .sg_list = sge[i],
						      .num_sge = 2 };
		}
		int rc = ibv_post_srq_recv(t->srq, wr, &bad);
		/* The ones before @bad are posted; it and those after are not. */
		uint32_t done = rc == 0 ? n : (uint32_t)(bad - wr);
		memmove(t->rx_unposted + t->nrx_unposted - n,
			t->rx_unposted + t->nrx_unposted - n + done, (n - done) * sizeof(uint32_t));
		t->nrx_unposted -= done;
		if (rc != 0)
			return xpi_rdma_fail_pos(rc, "giving the shared receive queue entries",
						 "ibv_post_srq_recv", t->dev.name, NULL);
	}
	return 0;
}

/* Entry @slot was taken: it goes back with the next batch. The queue is
 * XPI_RDMA_REPOST_BATCH entries deeper than the windows need, so a batch
 * waiting never leaves them short. */
static void taken(struct xpi_rdma_tl *t, uint32_t slot)
{
	t->rx_unposted[t->nrx_unposted++] = slot;
	if (t->nrx_unposted >= XPI_RDMA_REPOST_BATCH)
		post_unposted(t);
}

void rdma_small_repost(struct xpi_rdma_tl *t)
{
	if (t->nrx_unposted != 0)
		post_unposted(t);
}

int rdma_small_grow(struct xpi_rdma_tl *t, uint32_t n)
{
	if (n > t->srq_depth - t->srq_filled)
		return -ENOSPC; /* more than the windows promised: never */
	int rc = 0;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t slot = t->srq_filled;
		if (xpi_pool_get(t->ctx->pool, XPI_RDMA_RX_BUF, &t->rx_bufs[slot]) < 0) {
			rc = -ENOBUFS;
			break;
		}
		t->srq_filled++;
		t->rx_unposted[t->nrx_unposted++] = slot;
	}
	int prc = post_unposted(t);
	return rc < 0 ? rc : prc;
}

void rdma_small_fini(struct xpi_rdma_tl *t)
{
	if (t->srq != NULL)
		ibv_destroy_srq(t->srq);
	for (uint32_t i = 0; t->rx_bufs != NULL && i < t->srq_depth; i++)
		if (t->rx_bufs[i] != NULL)
			xpi_buf_put(t->rx_bufs[i]);
	if (t->rx_hdrs_mr != NULL)
		ibv_dereg_mr(t->rx_hdrs_mr);
	free(t->rx_hdrs);
	free(t->rx_bufs);
	free(t->rx_unposted);
	for (int p = 0; t->peers != NULL && p < t->npeers; p++)
		free(t->peers[p].fins);
}

/*
 * Posts frame @f with @len payload bytes to @peer: inline if header and
 * payload fit the device's inline size, else copied into a pool buffer
 * that the send's completion gives back. With @fin, an immediate value
 * @imm goes along (a FIN). Every frame reports what we took of the peer's
 * window and the eager credit the engine gave back. -EAGAIN: no room now.
 */
static int post_frame(struct xpi_rdma_tl *t, int peer, struct xpi_frame *f, const void *payload,
		      size_t len, bool fin, uint32_t imm)
{
	struct rdma_peer *p = &t->peers[peer];
	if (p->tx_count == XPI_RDMA_TX_RING)
		return -EAGAIN;
	f->id = p->win_taken;
	/* The engine's count covers the peer's small lane, whichever it is;
	 * only ours has eager messages to give credit for. */
	f->credit = t->ctx->peers[peer].tl_small == t->tl_index ?
			    t->ctx->peers[peer].eager_returned :
			    0;
	uint8_t hdr[XPI_FRAME_HDR_LEN];
	xpi_frame_pack(f, hdr);
	struct ibv_sge sge[2];
	/* The ring entry is in the id: a completion retires every send
	 * before it on the QP too, signalled or not (they complete in order). */
	uint32_t pos = (p->tx_head + p->tx_count) % XPI_RDMA_TX_RING;
	struct ibv_send_wr wr = { .wr_id = rdma_wr_id(RDMA_WR_SEND,
						      (uint64_t)pos << 32 | (uint32_t)peer),
				  .sg_list = sge,
				  .opcode = fin ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND,
				  .imm_data = htonl(imm) },
			   *bad;
	struct xp_buf *b = NULL;
	if (XPI_FRAME_HDR_LEN + len <= t->max_inline) {
		sge[0] = (struct ibv_sge){ (uintptr_t)hdr, XPI_FRAME_HDR_LEN, 0 };
		sge[1] = (struct ibv_sge){ (uintptr_t)payload, (uint32_t)len, 0 };
		wr.num_sge = len != 0 ? 2 : 1;
		wr.send_flags |= IBV_SEND_INLINE;
	} else {
		uint32_t lkey;
		if (xpi_pool_get(t->ctx->pool, XPI_FRAME_HDR_LEN + len, &b) < 0)
			return -EAGAIN; /* the pool is dry: retried when buffers come back */
		if (!pool_lkey(t, b, &lkey)) {
			xpi_buf_put(b);
			return -EIO;
		}
		memcpy(b->data, hdr, XPI_FRAME_HDR_LEN);
		if (len != 0)
			memcpy(b->data + XPI_FRAME_HDR_LEN, payload, len);
		sge[0] = (struct ibv_sge){ (uintptr_t)b->data, (uint32_t)(XPI_FRAME_HDR_LEN + len),
					   lkey };
		wr.num_sge = 1;
	}
	/* Inline sends hold nothing of ours: only one in XPI_RDMA_SIGNAL_EVERY
	 * asks for a completion (each costs the device a CQE and us a poll). */
	bool signal = b != NULL || p->tx_unsignaled + 1 >= XPI_RDMA_SIGNAL_EVERY;
	if (signal)
		wr.send_flags |= IBV_SEND_SIGNALED;
	int rc = ibv_post_send(p->qp, &wr, &bad);
	if (rc != 0) {
		if (b != NULL)
			xpi_buf_put(b);
		return xpi_rdma_fail_pos(rc, "sending a message", "ibv_post_send", t->dev.name,
					 NULL);
	}
	p->tx_ring[pos] = b;
	p->tx_count++;
	p->tx_unsignaled = signal ? 0 : p->tx_unsignaled + 1;
	if (b != NULL)
		t->st_tx_copied++;
	else
		t->st_tx_inline++;
	p->win_told = p->win_taken;
	p->credit_told = f->credit;
	return 0;
}

/* @peer needs rdma_small_flush's look: owed a report, or FINs waiting. */
static void attend(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	if (!p->in_attn) {
		p->in_attn = true;
		t->attn[t->nattn++] = peer;
	}
}

static bool window_open(const struct rdma_peer *p)
{
	return p->win_sent - p->win_returned < p->window;
}

static int flush_fins(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	uint32_t done = 0;
	int rc = 0;
	while (done < p->nfins && window_open(p)) {
		struct xpi_frame f = { .type = XPI_FRAME_CREDIT };
		rc = post_frame(t, peer, &f, NULL, 0, true, p->fins[done]);
		if (rc < 0)
			break;
		p->win_sent++;
		done++;
	}
	memmove(p->fins, p->fins + done, (p->nfins - done) * sizeof(*p->fins));
	p->nfins -= done;
	t->nfins_total -= done;
	return rc == -EAGAIN ? 0 : rc;
}

int rdma_send_fin(struct xpi_rdma_tl *t, int peer, uint32_t idx, bool failed)
{
	struct rdma_peer *p = &t->peers[peer];
	if (p->dead)
		return -ECONNRESET;
	if (p->nfins == p->fins_cap) {
		uint32_t cap = p->fins_cap != 0 ? 2 * p->fins_cap : 64;
		uint32_t *n = realloc(p->fins, cap * sizeof(*n));
		if (n == NULL)
			return -ENOMEM;
		p->fins = n;
		p->fins_cap = cap;
	}
	p->fins[p->nfins++] = idx | (failed ? XPI_RDMA_FIN_FAILED : 0);
	t->nfins_total++;
	int rc = flush_fins(t, peer);
	if (p->nfins != 0)
		attend(t, peer);
	if (rc < 0)
		rdma_peer_failed(t, peer, rc, "could not be sent the end of a rendezvous");
	return rc;
}

int rdma_send_eager(void *tlp, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	struct xpi_rdma_tl *t = tlp;
	struct rdma_peer *p = &t->peers[peer];
	if (!p->up || p->dead)
		return rdma_wire_need(t, peer); /* the first message to it, or lost */
	uint64_t cost = xpi_eager_cost(h->len);
	struct xpi_peer *ep = &t->ctx->peers[peer];
	if (h->len > EAGER_MAX ||
	    ep->eager_sent + cost - ep->eager_granted > t->ctx->eager_credit_per_peer)
		return -ENOBUFS; /* too long, or no credit with the receiver: rendezvous */
	/* FINs first: they finish the peer's sends. */
	if (p->nfins != 0 && flush_fins(t, peer) < 0)
		return -ECONNRESET;
	if (p->nfins != 0 || !window_open(p))
		return -EAGAIN;
	struct xpi_frame f = { .type = XPI_FRAME_EAGER,
			       .payload_len = (uint32_t)h->len,
			       .comm = h->comm,
			       .tag = h->tag,
			       .peer_seq = h->peer_seq,
			       .msg_len = h->len };
	int rc = post_frame(t, peer, &f, data, h->len, false, 0);
	if (rc < 0)
		return rc;
	p->win_sent++;
	ep->eager_sent += cost;
	return 0;
}

int rdma_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
		  const struct xpi_reg *reg, const struct xpi_rndv_desc *desc)
{
	struct xpi_rdma_tl *t = tlp;
	struct rdma_peer *p = &t->peers[peer];
	if (!p->up || p->dead)
		return rdma_wire_need(t, peer);
	if (p->nfins != 0 && flush_fins(t, peer) < 0)
		return -ECONNRESET;
	if (p->nfins != 0 || !window_open(p) || p->tx_count == XPI_RDMA_TX_RING)
		return -EAGAIN;
	/* Both lanes are ours: we offer the payload too. */
	struct xpi_rndv_desc own;
	if (desc == NULL) {
		int rc = rdma_rndv_offer(t, peer, sreq, reg, &own);
		if (rc < 0)
			return rc;
	}
	const struct xpi_rndv_desc *d = desc != NULL ? desc : &own;
	struct xpi_frame f = { .type = XPI_FRAME_RTS,
			       .payload_len = d->len,
			       .comm = h->comm,
			       .tag = h->tag,
			       .peer_seq = h->peer_seq,
			       .msg_len = h->len };
	int rc = post_frame(t, peer, &f, d->bytes, d->len, false, 0);
	if (rc < 0) {
		if (desc == NULL)
			rdma_rndv_unoffer(t, sreq);
		return rc;
	}
	p->win_sent++;
	return 0;
}

static int peer_of_qpn(const struct xpi_rdma_tl *t, uint32_t qpn)
{
	int lo = 0, hi = t->nqpns - 1;
	while (lo <= hi) {
		int mid = (lo + hi) / 2;
		if (t->qpns[mid].qpn == qpn)
			return t->qpns[mid].peer;
		if (t->qpns[mid].qpn < qpn)
			lo = mid + 1;
		else
			hi = mid - 1;
	}
	return -1;
}

static void protocol_error(struct xpi_rdma_tl *t, int peer, const char *why)
{
	char text[96];
	snprintf(text, sizeof(text), "sent a malformed rdma message (%s)", why);
	rdma_peer_failed(t, peer, -EPROTO, text);
}

static void deliver(struct xpi_rdma_tl *t, int peer, const struct xpi_frame *f, uint8_t kind,
		    const void *data, struct xp_buf *buf)
{
	struct xpi_msg m;
	m.desc_len = kind == XPI_MSG_RTS ? (uint8_t)f->payload_len : 0;
	m.u.key.comm = f->comm;
	m.u.key.src = peer;
	m.u.key.tag = f->tag;
	m.u.key.mask = 0;
	m.kind = kind;
	m.tl = (uint8_t)t->tl_index;
	m.sized = false;
	m.peer_seq = f->peer_seq;
	m.len = f->msg_len;
	m.data = data;
	m.buf = buf;
	m.rndv = NULL;
	xpi_engine_deliver(t->ctx, &m);
}

/* What a frame reports of our window and our eager credit with the peer;
 * false if it reports more than we ever sent (a broken peer). */
static bool take_reports(struct xpi_rdma_tl *t, int peer, const struct xpi_frame *f)
{
	struct rdma_peer *p = &t->peers[peer];
	struct xpi_peer *ep = &t->ctx->peers[peer];
	if (f->id > p->win_sent || f->credit > ep->eager_sent)
		return false;
	if (f->id > p->win_returned)
		p->win_returned = f->id;
	if (f->credit > ep->eager_granted)
		ep->eager_granted = f->credit;
	return true;
}

void rdma_small_recv_done(struct xpi_rdma_tl *t, const struct ibv_wc *wc)
{
	uint32_t slot = (uint32_t)(wc->wr_id & ((1ull << 56) - 1));
	if (slot >= t->srq_depth)
		return;
	int peer = peer_of_qpn(t, wc->qp_num);
	bool again = true; /* the entry goes back to the queue as it is */
	if (wc->status != IBV_WC_SUCCESS) {
		if (peer >= 0 && wc->status != IBV_WC_WR_FLUSH_ERR)
			rdma_peer_failed(t, peer, -EIO, "broke its queue pair");
		goto repost;
	}
	if (peer < 0 || t->peers[peer].dead)
		goto repost;
	struct rdma_peer *p = &t->peers[peer];
	if (!p->up)
		rdma_wire_heard(t, peer); /* it sends only once both QPs are connected */
	const uint8_t *h = t->rx_hdrs + (size_t)slot * HDR_STRIDE;
	struct xpi_frame f;
	const char *why = "shorter than a header";
	if (wc->byte_len < XPI_FRAME_HDR_LEN ||
	    xpi_frame_parse(h, XPI_FRAME_HDR_LEN, EAGER_MAX, &f, &why) < 0) {
		protocol_error(t, peer, why);
		goto repost;
	}
	bool fin = (wc->wc_flags & IBV_WC_WITH_IMM) != 0;
	if (wc->byte_len != XPI_FRAME_HDR_LEN + (uint64_t)f.payload_len)
		why = "its length differs from its header's";
	else if (f.type != XPI_FRAME_EAGER && f.type != XPI_FRAME_RTS && f.type != XPI_FRAME_CREDIT)
		why = "a frame type rdma does not carry";
	else if (fin && f.type != XPI_FRAME_CREDIT)
		why = "an immediate value on a message";
	else if (f.type == XPI_FRAME_RTS && f.payload_len != XPI_RDMA_DESC_LEN)
		why = "a rendezvous descriptor of the wrong length";
	else if (f.type != XPI_FRAME_CREDIT && !xpi_engine_comm_valid(t->ctx, f.comm))
		why = "a communicator id out of range";
	else if (!take_reports(t, peer, &f))
		why = "it reports more than we sent";
	else
		why = NULL;
	if (why != NULL) {
		protocol_error(t, peer, why);
		goto repost;
	}
	if (f.type != XPI_FRAME_CREDIT || fin) {
		p->win_taken++;
		attend(t, peer);
	}
	struct xp_buf *b = t->rx_bufs[slot];
	if (fin) {
		rdma_got_fin(t, peer, ntohl(wc->imm_data));
	} else if (f.type == XPI_FRAME_RTS) {
		deliver(t, peer, &f, XPI_MSG_RTS, b->data, NULL);
	} else if (f.type == XPI_FRAME_EAGER) {
		struct xp_buf *fresh = NULL;
		uint32_t lkey;
		if (f.payload_len > XPI_RDMA_RX_COPY_MAX &&
		    xpi_pool_get(t->ctx->pool, XPI_RDMA_RX_BUF, &fresh) == 0 &&
		    pool_lkey(t, fresh, &lkey)) {
			/* Zero copy: the engine takes this buffer, the entry a
			 * fresh one. */
			t->rx_bufs[slot] = fresh;
			taken(t, slot);
			again = false;
			t->st_rx_lent++;
			b->len = f.payload_len;
			deliver(t, peer, &f, XPI_MSG_BUF, NULL, b);
		} else {
			if (fresh != NULL)
				xpi_buf_put(fresh);
			t->st_rx_copied++;
			deliver(t, peer, &f, XPI_MSG_INLINE, b->data, NULL);
		}
	}
repost:
	if (again)
		taken(t, slot);
}

/* The oldest send's completion came (or never will): its buffer back. */
static void tx_pop(struct rdma_peer *p)
{
	struct xp_buf *b = p->tx_ring[p->tx_head];
	p->tx_ring[p->tx_head] = NULL;
	p->tx_head = (p->tx_head + 1) % XPI_RDMA_TX_RING;
	p->tx_count--;
	if (b != NULL)
		xpi_buf_put(b);
}

void rdma_small_send_done(struct xpi_rdma_tl *t, const struct ibv_wc *wc)
{
	uint64_t low = wc->wr_id & ((1ull << 56) - 1);
	uint32_t peer = (uint32_t)low, pos = (uint32_t)(low >> 32);
	if (peer >= (uint32_t)t->npeers)
		return;
	struct rdma_peer *p = &t->peers[peer];
	while (p->tx_count != 0) {
		uint32_t head = p->tx_head;
		tx_pop(p);
		if (head == pos)
			break;
	}
	if (wc->status != IBV_WC_SUCCESS && wc->status != IBV_WC_WR_FLUSH_ERR)
		rdma_peer_failed(t, (int)peer, -EIO, "did not take a message we sent it");
}

void rdma_small_flush(struct xpi_rdma_tl *t)
{
	/* From the top down, each taken out as it is handled: a peer listed
	 * again meanwhile goes to the end, for the next progress. */
	for (int i = t->nattn - 1; i >= 0; i--) {
		int peer = t->attn[i];
		t->attn[i] = t->attn[--t->nattn];
		struct rdma_peer *p = &t->peers[peer];
		p->in_attn = false;
		if (p->dead)
			continue;
		if (p->nfins != 0 && flush_fins(t, peer) < 0) {
			rdma_peer_failed(t, peer, -EIO,
					 "could not be sent the end of a rendezvous");
			continue;
		}
		if (p->nfins != 0)
			attend(t, peer); /* its window is full: next time */
		/* Half a window unreported: a CREDIT frame, outside the
		 * window, before the peer has to wait for it. Less is told
		 * with the next frame; it stays less until more frames come,
		 * which list the peer again. */
		if (p->up && p->win_taken - p->win_told >= (p->granted + 1) / 2) {
			struct xpi_frame f = { .type = XPI_FRAME_CREDIT };
			if (post_frame(t, peer, &f, NULL, 0, false, 0) < 0)
				attend(t, peer); /* no room: next time */
		}
	}
}

int rdma_small_fence(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	if (p->tx_count == XPI_RDMA_TX_RING)
		return -EAGAIN;
	/* Sends on a QP complete in order, and a read's answer comes after
	 * the acknowledgements of what went before it: its completion says
	 * the peer took them all. The word read lands in a scratch slot. */
	uint32_t pos = (p->tx_head + p->tx_count) % XPI_RDMA_TX_RING;
	struct ibv_sge sge = { (uintptr_t)&t->result[XPI_RDMA_ATOMIC_SLOTS], sizeof(uint64_t),
			       t->result_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = rdma_wr_id(RDMA_WR_SEND,
						      (uint64_t)pos << 32 | (uint32_t)peer),
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED,
				  .wr.rdma = { .remote_addr = p->words_addr,
					       .rkey = p->words_rkey } },
			   *bad;
	int rc = ibv_post_send(p->qp, &wr, &bad);
	if (rc != 0)
		return xpi_rdma_fail_pos(rc, "closing an endpoint", "ibv_post_send", t->dev.name,
					 NULL);
	p->tx_ring[pos] = NULL;
	p->tx_count++;
	p->tx_unsignaled = 0;
	return 0;
}

void rdma_small_peer_lost(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	t->nfins_total -= p->nfins;
	p->nfins = 0;
}

void rdma_small_drop_tx(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	while (p->tx_count != 0)
		tx_pop(p);
}
