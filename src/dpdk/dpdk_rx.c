/* SPDX-License-Identifier: MIT */
/* The DPDK transport's receiving side: datagrams checked against the pair
 * they claim to belong to, put in order by the reliability layer, frames
 * reassembled from them and handled (delivered to the engine, or acted
 * on: CTS, withdrawals). Every field from the wire is checked before use;
 * a peer that breaks the protocol is failed, naming it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/log.h"
#include "../core/pool.h"
#include "dpdk_tl.h"

/* A datagram's piece of a frame, as the reliability layer passes it on:
 * on the stack when it is delivered (or dropped) at once, copied when it
 * is held for a gap before it. */
struct rx_pkt {
	uint32_t frag_off, msg_len, len;
	bool heap;
	const uint8_t *data;
	uint8_t copy[];
};

static void protocol_error(struct dpdk_peer *pr, const char *what)
{
	char text[160];
	snprintf(text, sizeof(text), "sent a malformed datagram over dpdk (%s)", what);
	dpdk_peer_fail(pr, -EPROTO, text);
}

void dpdk_asm_reset(struct dpdk_peer *pr)
{
	struct dpdk_asm *a = &pr->as;
	if (a->buf != NULL)
		xpi_buf_put(a->buf);
	free(a->heap);
	*a = (struct dpdk_asm){ .active = false };
}

static void deliver(struct dpdk_peer *pr, const struct xpi_frame *f, uint8_t kind, const void *data,
		    struct xp_buf *buf)
{
	struct xpi_msg m;
	m.desc_len = 0;
	m.u.key.comm = f->comm;
	m.u.key.src = pr->rank;
	m.u.key.tag = f->tag;
	m.u.key.mask = 0;
	m.kind = kind;
	m.tl = (uint8_t)pr->t->tl_index;
	m.sized = false;
	m.peer_seq = f->peer_seq;
	m.len = f->msg_len;
	m.data = data;
	m.buf = buf;
	m.rndv = (void *)(uintptr_t)f->id;
	if (kind == XPI_MSG_RTS)
		m.desc_len = (uint8_t)f->payload_len;
	xpi_engine_deliver(pr->t->ctx, &m);
}

/* Asks for the next windows of @x's payload, keeping XPI_DPDK_WINDOWS_AHEAD
 * in flight: the receiver paces the sender. */
void dpdk_grant(struct dpdk_peer *pr, struct dpdk_rndv_rx *x)
{
	while (!x->refused && x->asked < x->nwin &&
	       x->asked - x->arrived < XPI_DPDK_WINDOWS_AHEAD) {
		uint64_t off = x->asked * XPI_DPDK_WINDOW;
		uint64_t wlen = x->len - off < XPI_DPDK_WINDOW ? x->len - off : XPI_DPDK_WINDOW;
		struct xpi_frame f = {
			.type = XPI_FRAME_CTS,
			.tag = off,
			.msg_len = wlen,
			.id = x->id,
		};
		if (dpdk_queue_frame(pr, &f, NULL, NULL, NULL) < 0) {
			dpdk_peer_fail(pr, -ENOMEM, "could not be asked for a rendezvous payload");
			return;
		}
		x->asked++;
	}
}

static struct dpdk_rndv_tx *find_send(struct dpdk_peer *pr, uint64_t id)
{
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &pr->rts_out) {
		struct dpdk_rndv_tx *w = xpi_container_of(pos, struct dpdk_rndv_tx, link);
		if (w->id == id)
			return w;
	}
	return NULL;
}

static struct dpdk_rndv_rx *find_recv(struct dpdk_peer *pr, uint64_t id)
{
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &pr->bulk_rx) {
		struct dpdk_rndv_rx *x = xpi_container_of(pos, struct dpdk_rndv_rx, link);
		if (x->id == id)
			return x;
	}
	return NULL;
}

/* The receiver asked for a window of our send @f->id (offset in tag,
 * length in msg_len), or refused the whole of it. */
static void got_cts(struct dpdk_peer *pr, const struct xpi_frame *f)
{
	struct dpdk_rndv_tx *w = find_send(pr, f->id);
	if (w == NULL) {
		protocol_error(pr, "clear-to-send for a send it was never announced");
		return;
	}
	xp_request_t *s = w->sreq;
	if (f->flags & XPI_FRAME_F_REFUSED) {
		w->err = f->msg_len != 0 && f->msg_len < 4096 ? -(int)f->msg_len : -EIO;
		w->asked_for = true;
		dpdk_send_settle(pr, w);
		return;
	}
	if (w->taken_back) {
		/* Withdrawn without the receiver's word: it is told now, and
		 * puts its receive back. */
		struct xpi_frame d = { .type = XPI_FRAME_DATA,
				       .flags = XPI_FRAME_F_WITHDRAWN,
				       .id = w->id };
		(void)dpdk_queue_frame(pr, &d, NULL, NULL, NULL);
		xpi_dlist_remove(&w->link);
		xpi_request_put(s);
		free(w);
		return;
	}
	if (f->tag != w->sent || f->msg_len > s->len - w->sent ||
	    (f->msg_len == 0 && s->len != 0)) {
		protocol_error(pr, "clear-to-send for a window out of order or past the message");
		return;
	}
	w->asked_for = true;
	int expected = XPI_RNDV_ASKED;
	atomic_compare_exchange_strong(&s->rndv_state, &expected, XPI_RNDV_PENDING);
	struct xpi_frame d = {
		.type = XPI_FRAME_DATA,
		.comm = s->comm,
		.tag = w->sent,
		.msg_len = f->msg_len,
		.id = w->id,
	};
	if (dpdk_queue_frame(pr, &d, NULL, w, (const uint8_t *)s->buf + w->sent) < 0) {
		dpdk_peer_fail(pr, -ENOMEM, "could not be sent a rendezvous payload");
		return;
	}
	w->sent += f->msg_len;
	w->windows++;
}

/* The sender of message @f->id asks to take it back: our engine decides. */
static void got_withdraw(struct dpdk_peer *pr, const struct xpi_frame *f)
{
	int rc = xpi_engine_withdraw(pr->t->ctx, pr->rank, f->comm, f->tag, f->peer_seq);
	struct xpi_frame a = {
		.type = XPI_FRAME_WITHDRAW_ACK,
		.flags = rc == 0 ? 0 : XPI_FRAME_F_BUSY,
		.id = f->id,
	};
	if (dpdk_queue_frame(pr, &a, NULL, NULL, NULL) < 0)
		dpdk_peer_fail(pr, -ENOMEM, "could not be answered a withdrawal");
}

static void got_withdraw_ack(struct dpdk_peer *pr, const struct xpi_frame *f)
{
	struct dpdk_rndv_tx *w = find_send(pr, f->id);
	if (w == NULL) {
		if (!(f->flags & XPI_FRAME_F_BUSY))
			protocol_error(pr, "withdrawal granted for a send it was never asked for");
		return;
	}
	xp_request_t *s = w->sreq;
	int state = atomic_load(&s->rndv_state);
	if (f->flags & XPI_FRAME_F_BUSY) {
		if (state == XPI_RNDV_ASKED)
			atomic_store(&s->rndv_state, XPI_RNDV_PENDING);
		return;
	}
	if (w->asked_for) {
		protocol_error(pr, "withdrawal granted for a send it asked for");
		return;
	}
	xpi_dlist_remove(&w->link);
	if (state == XPI_RNDV_ASKED) {
		atomic_store(&s->rndv_state, XPI_RNDV_WITHDRAWN);
		xpi_engine_send_withdrawn(pr->t->ctx, s);
	}
	xpi_request_put(s);
	free(w);
}

/* A window of @x arrived whole (or the sender withdrew the message). */
static void window_arrived(struct dpdk_peer *pr, struct dpdk_rndv_rx *x, bool withdrawn)
{
	x->arrived++;
	if (withdrawn || x->arrived == x->nwin || (x->refused && x->arrived == x->asked)) {
		xpi_dlist_remove(&x->link);
		xp_request_t *r = x->rreq;
		free(x);
		if (r != NULL)
			xpi_engine_rndv_done(pr->t->ctx, r, withdrawn ? -ECANCELED : 0);
		return;
	}
	dpdk_grant(pr, x);
}

/* A frame that came whole in one datagram, @payload after its header. */
static void handle_frame(struct dpdk_peer *pr, const struct xpi_frame *f, const uint8_t *payload)
{
	xp_context_t *ctx = pr->t->ctx;
	switch (f->type) {
	case XPI_FRAME_EAGER:
	case XPI_FRAME_RTS:
		if (!xpi_engine_comm_valid(ctx, f->comm)) {
			protocol_error(pr, "communicator id out of range");
			return;
		}
		if (f->type == XPI_FRAME_RTS)
			deliver(pr, f, XPI_MSG_RTS, f->payload_len != 0 ? payload : NULL, NULL);
		else
			deliver(pr, f, XPI_MSG_INLINE, payload, NULL);
		return;
	case XPI_FRAME_CTS:
		got_cts(pr, f);
		return;
	case XPI_FRAME_WITHDRAW:
		got_withdraw(pr, f);
		return;
	case XPI_FRAME_WITHDRAW_ACK:
		got_withdraw_ack(pr, f);
		return;
	case XPI_FRAME_CREDIT:
	case XPI_FRAME_BYE:
		return;
	default: /* DATA: handled by start_frame */
		protocol_error(pr, "a frame of an unknown type");
	}
}

/* The first datagram of a DATA frame: where its window goes. */
static int start_data(struct dpdk_peer *pr, const struct xpi_frame *f)
{
	struct dpdk_asm *a = &pr->as;
	struct dpdk_rndv_rx *x = find_recv(pr, f->id);
	if (x == NULL)
		return -1;
	if (f->flags & XPI_FRAME_F_WITHDRAWN) {
		if (f->msg_len != 0)
			return -1;
		window_arrived(pr, x, true);
		return 1;
	}
	uint64_t off = x->arrived * XPI_DPDK_WINDOW;
	uint64_t wlen = x->len - off < XPI_DPDK_WINDOW ? x->len - off : XPI_DPDK_WINDOW;
	if (x->arrived >= x->asked || f->tag != off || f->msg_len != wlen)
		return -1;
	a->rx = x;
	a->dst = x->rreq != NULL && !x->refused ? x->dst + off : NULL;
	a->cap = x->cap > off ? (x->cap - off < wlen ? x->cap - off : wlen) : 0;
	return 0;
}

static void finish_frame(struct dpdk_peer *pr)
{
	struct dpdk_asm *a = &pr->as;
	struct xpi_frame f = a->f;
	if (f.type == XPI_FRAME_DATA) {
		struct dpdk_rndv_rx *x = a->rx;
		dpdk_asm_reset(pr);
		window_arrived(pr, x, false);
		return;
	}
	/* EAGER, assembled in a pool buffer (a pooled receive takes it as
	 * it is) or, with none free, in memory of ours the engine copies. */
	struct xp_buf *b = a->buf;
	uint8_t *heap = a->heap;
	a->buf = NULL;
	a->heap = NULL;
	dpdk_asm_reset(pr);
	if (!xpi_engine_comm_valid(pr->t->ctx, f.comm)) {
		if (b != NULL)
			xpi_buf_put(b);
		free(heap);
		protocol_error(pr, "communicator id out of range");
		return;
	}
	if (b != NULL)
		deliver(pr, &f, XPI_MSG_BUF, NULL, b);
	else
		deliver(pr, &f, XPI_MSG_INLINE, heap, NULL);
	free(heap);
}

/* Where the payload of a frame that spans datagrams goes. */
static int start_frame(struct dpdk_peer *pr, const struct xpi_frame *f)
{
	struct dpdk_asm *a = &pr->as;
	if (f->type == XPI_FRAME_EAGER) {
		if (xpi_pool_get(pr->t->ctx->pool, f->payload_len, &a->buf) == 0) {
			a->dst = a->buf->data;
		} else {
			a->buf = NULL;
			a->heap = malloc(f->payload_len);
			if (a->heap == NULL) {
				dpdk_peer_fail(pr, -ENOMEM,
					       "sent a message this rank had no memory to take");
				return 1;
			}
			a->dst = a->heap;
		}
		a->cap = f->payload_len;
		return 0;
	}
	if (f->type == XPI_FRAME_DATA)
		return start_data(pr, f);
	return -1; /* only messages and payloads span datagrams */
}

/* The reliability layer hands over the pieces of frames in order. */
static void on_piece(struct dpdk_peer *pr, const struct rx_pkt *p)
{
	struct dpdk_asm *a = &pr->as;
	const uint8_t *data = p->data;
	uint32_t len = p->len, at = p->frag_off;
	if (p->frag_off == 0) {
		if (a->active) {
			protocol_error(pr, "a frame began before the one before it ended");
			return;
		}
		struct xpi_frame f;
		const char *why = "a frame header split over datagrams";
		if (len < XPI_FRAME_HDR_LEN ||
		    xpi_frame_parse(data, len, XPI_DPDK_EAGER_MAX, &f, &why) < 0) {
			protocol_error(pr, why);
			return;
		}
		uint64_t body = f.type == XPI_FRAME_DATA ? f.msg_len : f.payload_len;
		if (body > UINT32_MAX - XPI_FRAME_HDR_LEN ||
		    p->msg_len != XPI_FRAME_HDR_LEN + body) {
			protocol_error(pr, "a frame length that disagrees with its header");
			return;
		}
		if (f.credit > pr->peer_credit)
			pr->peer_credit = f.credit;
		if (p->msg_len == len && f.type != XPI_FRAME_DATA) {
			handle_frame(pr, &f, data + XPI_FRAME_HDR_LEN);
			return;
		}
		int rc = start_frame(pr, &f);
		if (rc != 0) {
			if (rc < 0)
				protocol_error(pr, "a payload for no receive that asked for it");
			return;
		}
		a->active = true;
		a->f = f;
		a->total = p->msg_len;
		a->have = 0;
	} else if (!a->active || at != a->have || p->msg_len != a->total) {
		protocol_error(pr, "a piece of a frame out of place");
		return;
	}
	/* The payload's part of this piece, where it goes (what passes a
	 * receive's capacity is dropped). */
	uint32_t skip = at < XPI_FRAME_HDR_LEN ? XPI_FRAME_HDR_LEN - at : 0;
	if (skip < len && a->dst != NULL) {
		uint64_t from = at + skip - XPI_FRAME_HDR_LEN, n = len - skip;
		if (from < a->cap)
			memcpy(a->dst + from, data + skip, n < a->cap - from ? n : a->cap - from);
	}
	a->have += len;
	if (a->have == a->total)
		finish_frame(pr);
}

static void rel_deliver(void *arg, void *pkt)
{
	struct dpdk_peer *pr = arg;
	struct rx_pkt *p = pkt;
	if (!pr->dead && !pr->t->closing)
		on_piece(pr, p);
	if (p->heap)
		free(p);
}

static void rel_drop(void *arg, void *pkt)
{
	(void)arg;
	struct rx_pkt *p = pkt;
	if (p->heap)
		free(p);
}

const struct xpi_rel_rx_ops dpdk_rel_rx_ops = {
	.deliver = rel_deliver,
	.drop = rel_drop,
};

/* The rank a datagram claims to come from, if it is one of ours: to this
 * rank, from the address and incarnation of a peer agreed with; else -1. A
 * datagram from another address, or from an earlier run of that rank, is
 * not this pair's: dropped without a word. Nothing of the datagram is
 * used yet (the MAC is checked after). */
static int sender_of(const struct xpi_dpdk_tl *t, const struct xpi_rx_frame *f)
{
	const struct xpi_dgram_hdr *h = &f->hdr;
	if (h->dst_rank != (uint32_t)t->ctx->rank || h->src_rank >= (uint32_t)t->npeers)
		return -1;
	const struct dpdk_addr *a = &t->addrs[h->src_rank];
	if (!a->ok || f->from.ip != a->ip || f->from.port != a->udp_port || h->epoch != a->epoch)
		return -1;
	return (int)h->src_rank;
}

/* The pair of an authentic datagram (made by authentic() if it was its
 * first), unless it is lost. */
static struct dpdk_peer *pair_of(struct xpi_dpdk_tl *t, const struct xpi_rx_frame *f)
{
	int src = sender_of(t, f);
	struct dpdk_peer *pr = src >= 0 ? t->peers[src] : NULL;
	return pr != NULL && pr->up && !pr->dead ? pr : NULL;
}

/* The first datagram from a rank whose pair is not made: its MAC checked
 * with a key derived for the purpose, and the pair made only if it is
 * right, so a stranger who copies a peer's address and epoch makes no
 * state and no connection here. */
static struct dpdk_peer *first_from(struct xpi_dpdk_tl *t, int src, const struct xpi_rx_frame *f)
{
	if (dpdk_pair_auth(t, src)) {
		struct xpi_dgram_key k;
		if (dpdk_pair_rx_key(t, src, &k) < 0)
			return NULL;
		uint8_t *d = (uint8_t *)(uintptr_t)(f->payload - XPI_DGRAM_HDR_LEN);
		int rc = xpi_dgram_verify(&k, d, XPI_DGRAM_HDR_LEN + f->payload_len);
		xpi_dgram_key_clear(&k);
		if (rc < 0) {
			t->auth_failed++;
			return NULL;
		}
	}
	return dpdk_peer_get(t, src);
}

/* One of our datagrams, authenticated (dpdk_rx_frame). */
static void process(struct xpi_dpdk_tl *t, const struct xpi_rx_frame *f)
{
	const struct xpi_dgram_hdr *h = &f->hdr;
	struct dpdk_peer *pr = pair_of(t, f);
	if (pr == NULL)
		return;
	int64_t now = dpdk_clock(t);
	if (xpi_rel_tx_acked(&pr->tx, h->ack, h->sack, h->credit, now, &dpdk_rel_tx_ops, pr) < 0) {
		protocol_error(pr, "acknowledged a datagram never sent");
		return;
	}
	t->dirty = true;
	if (h->type != XPI_DGRAM_DATA || pr->dead)
		return;
	struct rx_pkt stack = {
		.frag_off = h->frag_off,
		.msg_len = h->msg_len,
		.len = (uint32_t)f->payload_len,
		.data = f->payload,
	};
	struct rx_pkt *p = &stack;
	/* Next in order, or seen before: handled within the call. Anything
	 * else may be held for the gap before it, so it is copied. */
	if ((int32_t)(h->psn - pr->rx.nxt) > 0) {
		p = malloc(sizeof(*p) + f->payload_len);
		if (p == NULL)
			return; /* as if lost: it comes again */
		*p = stack;
		p->heap = true;
		memcpy(p->copy, f->payload, f->payload_len);
		p->data = p->copy;
	}
	xpi_rel_rx_arrived(&pr->rx, h->psn, p, now, &dpdk_rel_rx_ops, pr);
}

static uint32_t drop_rand(struct dpdk_drop *d)
{
	/* xorshift64*: a test knob's randomness, not a secret */
	d->rng ^= d->rng >> 12;
	d->rng ^= d->rng << 25;
	d->rng ^= d->rng >> 27;
	return (uint32_t)((d->rng * 0x2545F4914F6CDD1DULL) >> 32);
}

/* The frame held back by XP_DPDK_DROP's reordering arrives now. */
void dpdk_drop_release(struct xpi_dpdk_tl *t)
{
	struct dpdk_drop *d = &t->drop;
	if (d->held == NULL)
		return;
	struct xpi_rx_frame *f = (struct xpi_rx_frame *)d->held;
	d->held = NULL;
	f->payload = (const uint8_t *)(f + 1);
	process(t, f);
	free(f);
}

/* Whether @f's MAC verifies under its pair's key and it was not seen
 * before; if not it is counted and dropped, and the pair goes on: a
 * forger must not be able to fail it. */
static bool authentic(struct xpi_dpdk_tl *t, const struct xpi_rx_frame *f)
{
	int src = sender_of(t, f);
	if (src < 0)
		return false;
	struct dpdk_peer *pr = t->peers[src];
	if (pr == NULL) { /* its first: verified there, then made */
		pr = first_from(t, src, f);
		return pr != NULL && pr->up && !pr->dead &&
		       (!pr->auth || xpi_dgram_replay_check(&pr->replay, f->hdr.seq) == 0);
	}
	if (!pr->up || pr->dead)
		return false;
	if (!pr->auth)
		return true;
	/* The datagram lies in the port's receive buffer, which is ours
	 * during the call: verification writes to its tag field and puts
	 * it back (xpi_dgram_verify). */
	uint8_t *d = (uint8_t *)(uintptr_t)(f->payload - XPI_DGRAM_HDR_LEN);
	if (xpi_dgram_verify(&pr->rx_key, d, XPI_DGRAM_HDR_LEN + f->payload_len) < 0) {
		t->auth_failed++;
		return false;
	}
	if (xpi_dgram_replay_check(&pr->replay, f->hdr.seq) < 0) {
		t->auth_replayed++;
		return false;
	}
	return true;
}

/* Datagrams are verified before anything else, the test knob's losses
 * included: it stands for a lossy wire between two authentic ends, and
 * what it duplicates must reach the reliability layer to be tested. */
void dpdk_rx_frame(void *arg, const struct xpi_rx_frame *f)
{
	struct xpi_dpdk_tl *t = arg;
	struct dpdk_drop *d = &t->drop;
	if (!authentic(t, f))
		return;
	if ((d->loss | d->reorder | d->dup) == 0) {
		process(t, f);
		return;
	}
	uint64_t r = drop_rand(d);
	if (r < d->loss) {
		d->dropped++;
		return;
	}
	r -= d->loss;
	if (r < d->reorder && d->held == NULL) {
		struct xpi_rx_frame *c = malloc(sizeof(*c) + f->payload_len);
		if (c != NULL) {
			*c = *f;
			memcpy(c + 1, f->payload, f->payload_len);
			d->held = (uint8_t *)c;
			d->reordered++;
			return;
		}
	}
	r -= d->reorder;
	process(t, f);
	if (r < d->dup) {
		d->duplicated++;
		process(t, f);
	}
	dpdk_drop_release(t);
}
