/* SPDX-License-Identifier: MIT */
/* The DPDK transport's sending side: frames cut into datagrams, queued
 * until the reliability layer's window lets them go, kept by it until
 * acknowledged, and sent again when it says so. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "dpdk_tl.h"

/* A peer backed up this far makes eager sends wait (-EAGAIN): the engine
 * retries them in order rather than letting memory grow. */
#define TXQ_MAX_PKTS 4096u

static struct dpdk_pkt *pkt_new(struct xpi_dpdk_tl *t)
{
	struct dpdk_pkt *k = t->free_pkts;
	if (k != NULL) {
		t->free_pkts = (struct dpdk_pkt *)k->m;
		return k;
	}
	return malloc(sizeof(*k));
}

static void pkt_free(struct xpi_dpdk_tl *t, struct dpdk_pkt *k)
{
	k->m = (struct dpdk_txmsg *)t->free_pkts;
	t->free_pkts = k;
}

/* Frames of at most SMALL_HEAD bytes (control frames, short messages: the
 * latency path) come from a list of blocks of that size, not malloc. */
#define SMALL_HEAD 256u
#define SMALL_KEEP 1024u

static struct dpdk_txmsg *txmsg_new(struct xpi_dpdk_tl *t, uint32_t head)
{
	if (head <= SMALL_HEAD && t->free_small != NULL) {
		struct dpdk_txmsg *m = t->free_small;
		t->free_small = (struct dpdk_txmsg *)m->payload;
		t->nfree_small--;
		return m;
	}
	return malloc(sizeof(struct dpdk_txmsg) + (head <= SMALL_HEAD ? SMALL_HEAD : head));
}

static void txmsg_free(struct xpi_dpdk_tl *t, struct dpdk_txmsg *m)
{
	if (m->head <= SMALL_HEAD && t->nfree_small < SMALL_KEEP) {
		m->payload = (const uint8_t *)t->free_small;
		t->free_small = m;
		t->nfree_small++;
		return;
	}
	free(m);
}

void dpdk_txmsg_cache_free(struct xpi_dpdk_tl *t)
{
	while (t->free_small != NULL) {
		struct dpdk_txmsg *m = t->free_small;
		t->free_small = (struct dpdk_txmsg *)m->payload;
		free(m);
	}
	t->nfree_small = 0;
}

/* A frame is done: every datagram acknowledged (or dropped with its peer)
 * and, for one sent by reference, the device done with its memory. */
static void txmsg_done(void *arg)
{
	struct dpdk_txmsg *m = arg;
	struct dpdk_peer *pr = m->peer;
	if (m->window != NULL && !pr->dead)
		dpdk_window_acked(pr, m->window, m->len - m->head);
	txmsg_free(pr->t, m);
}

static uint32_t queued_pkts(const struct dpdk_peer *pr)
{
	return pr->nqueued;
}

int dpdk_queue_frame(struct dpdk_peer *pr, const struct xpi_frame *f, const void *payload,
		     struct dpdk_rndv_tx *window, const uint8_t *window_bytes)
{
	struct xpi_dpdk_tl *t = pr->t;
	if (pr->dead)
		return -ECONNRESET;
	/* DATA: the header alone in the first datagram, then the window's
	 * bytes straight from the send buffer. Others: header and payload
	 * copied together, so a short message is one datagram. */
	uint32_t head = XPI_FRAME_HDR_LEN + (window != NULL ? 0 : f->payload_len);
	uint32_t body = window != NULL ? (uint32_t)f->msg_len : 0;
	uint32_t npkts =
		(head + XPI_DPDK_MSS - 1) / XPI_DPDK_MSS + (body + XPI_DPDK_MSS - 1) / XPI_DPDK_MSS;
	/* Only messages wait (the engine retries them in order); control
	 * frames (CTS, withdrawal answers, credit) always queue: their
	 * callers cannot retry, and refusing them behind a backlog of
	 * windows would fail the pair. */
	bool message = f->type == XPI_FRAME_EAGER || f->type == XPI_FRAME_RTS;
	if (message && queued_pkts(pr) + npkts > TXQ_MAX_PKTS)
		return -EAGAIN;
	struct dpdk_txmsg *m = txmsg_new(t, head);
	if (m == NULL)
		return -ENOMEM;
	*m = (struct dpdk_txmsg){
		.peer = pr,
		.refs = npkts,
		.len = head + body,
		.head = head,
		.window = window,
		.payload = window_bytes,
	};
	if (window != NULL && body >= XPI_DPDK_ZC_MIN && !pr->auth && xpi_dpdk_zc_ok(t->port)) {
		m->zc_on = true;
		xpi_dpdk_zc_init(&m->zc, txmsg_done, m);
	}
	struct xpi_frame fr = *f;
	fr.credit = t->ctx->peers[pr->rank].eager_returned;
	pr->credit_told = fr.credit;
	xpi_frame_pack(&fr, m->bytes);
	if (window == NULL && f->payload_len != 0)
		memcpy(m->bytes + XPI_FRAME_HDR_LEN, payload, f->payload_len);

	struct xpi_dlink list;
	xpi_dlist_init(&list);
	uint32_t off = 0;
	for (uint32_t i = 0; i < npkts; i++) {
		struct dpdk_pkt *k = pkt_new(t);
		if (k == NULL) {
			struct xpi_dlink *l;
			while ((l = xpi_dlist_pop_head(&list)) != NULL)
				pkt_free(t, xpi_container_of(l, struct dpdk_pkt, link));
			m->head = head;
			txmsg_free(t, m);
			return -ENOMEM;
		}
		/* Pieces never straddle the header and a window's bytes. */
		uint32_t end = off < head ? head : head + body;
		k->m = m;
		k->off = off;
		k->len = end - off < XPI_DPDK_MSS ? end - off : XPI_DPDK_MSS;
		off += k->len;
		xpi_dlist_push_tail(&list, &k->link);
	}
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&list)) != NULL)
		xpi_dlist_push_tail(&pr->txq, l);
	pr->nqueued += npkts;
	t->backlog = true;
	if (!t->in_rx)
		dpdk_pump(pr);
	return 0;
}

/* Each datagram to @pr, DATA or ACK, new or resent, takes the next seq:
 * the nonce of its MAC (dpdk_auth.h). NULL: not sealed. */
static const struct xpi_dgram_key *next_seal(struct dpdk_peer *pr, struct xpi_dgram_hdr *h)
{
	if (!pr->auth)
		return NULL;
	h->seq = ++pr->tx_seq;
	return &pr->tx_key;
}

/* Sends datagram @k numbered @psn, with our acknowledgement of the other
 * direction riding on it. */
static int send_pkt(struct dpdk_peer *pr, const struct dpdk_pkt *k, uint32_t psn)
{
	struct xpi_dpdk_tl *t = pr->t;
	const struct dpdk_txmsg *m = k->m;
	struct xpi_dgram_hdr h = {
		.type = XPI_DGRAM_DATA,
		.src_rank = (uint32_t)t->ctx->rank,
		.dst_rank = (uint32_t)pr->rank,
		.epoch = t->epoch,
		.psn = psn,
		.msg_len = m->len,
		.frag_off = k->off,
	};
	xpi_rel_rx_ack_fields(&pr->rx, &h.ack, &h.sack, &h.credit);
	const struct xpi_dgram_key *key = next_seal(pr, &h);
	int rc;
	if (k->off < m->head)
		rc = xpi_dpdk_send(t->port, pr->ip, pr->udp_port, &h, m->bytes + k->off, k->len,
				   key);
	else if (m->zc_on) /* a window's bytes, by reference */
		rc = xpi_dpdk_send_zc(t->port, pr->ip, pr->udp_port, &h,
				      m->payload + (k->off - m->head), k->len,
				      (struct xpi_dpdk_zc *)&m->zc);
	else
		rc = xpi_dpdk_send(t->port, pr->ip, pr->udp_port, &h,
				   m->payload + (k->off - m->head), k->len, key);
	if (rc == 0)
		xpi_rel_rx_ack_sent(&pr->rx);
	return rc;
}

void dpdk_pump(struct dpdk_peer *pr)
{
	if (pr->dead || xpi_dlist_empty(&pr->txq))
		return;
	int64_t now = dpdk_clock(pr->t);
	while (!xpi_dlist_empty(&pr->txq) && xpi_rel_tx_room(&pr->tx) > 0) {
		struct dpdk_pkt *k = xpi_container_of(pr->txq.next, struct dpdk_pkt, link);
		if (send_pkt(pr, k, pr->tx.nxt) < 0)
			break; /* a full ring, or the neighbour's address unknown yet: later */
		xpi_dlist_remove(&k->link);
		pr->nqueued--;
		xpi_rel_tx_sent(&pr->tx, k, now);
		pr->t->dirty = true;
	}
}

void dpdk_send_ack(struct dpdk_peer *pr)
{
	struct xpi_dpdk_tl *t = pr->t;
	struct xpi_dgram_hdr h = {
		.type = XPI_DGRAM_ACK,
		.src_rank = (uint32_t)t->ctx->rank,
		.dst_rank = (uint32_t)pr->rank,
		.epoch = t->epoch,
	};
	xpi_rel_rx_ack_fields(&pr->rx, &h.ack, &h.sack, &h.credit);
	const struct xpi_dgram_key *key = next_seal(pr, &h);
	if (xpi_dpdk_send(t->port, pr->ip, pr->udp_port, &h, NULL, 0, key) == 0)
		xpi_rel_rx_ack_sent(&pr->rx);
}

static int rel_resend(void *arg, void *pkt, uint32_t psn)
{
	return send_pkt(arg, pkt, psn);
}

/* A datagram is acknowledged (or dropped with its peer): the frame goes
 * when its last one does, and a window of a send counts as delivered. */
static void rel_release(void *arg, void *pkt)
{
	struct dpdk_peer *pr = arg;
	struct dpdk_pkt *k = pkt;
	struct dpdk_txmsg *m = k->m;
	pkt_free(pr->t, k);
	if (--m->refs != 0)
		return;
	if (m->zc_on)
		xpi_dpdk_zc_put(&m->zc); /* txmsg_done once the device let go too */
	else
		txmsg_done(m);
}

const struct xpi_rel_tx_ops dpdk_rel_tx_ops = {
	.resend = rel_resend,
	.release = rel_release,
};

void dpdk_drop_queue(struct dpdk_peer *pr)
{
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&pr->txq)) != NULL)
		rel_release(pr, xpi_container_of(l, struct dpdk_pkt, link));
	pr->nqueued = 0;
	xpi_rel_tx_drop_all(&pr->tx, &dpdk_rel_tx_ops, pr);
}
