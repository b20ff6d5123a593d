/* SPDX-License-Identifier: MIT */
/* The in-process transport's ops (see inproc.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "../core/compiler.h"
#include "../core/self.h"
#include "inproc.h"
#include "job.h"
#include "ring.h"

/* Runs on the consumer's owner: starts polling a new incoming ring. */
static void ring_announced(xp_context_t *ctx, struct xpi_cmd *cmd)
{
	struct xpi_ring *ring = xpi_container_of(cmd, struct xpi_ring, announce);
	struct xpi_inproc *ip = ctx->tls[0].tl;
	ip->in[ip->nin++] = ring;
	(void)ctx;
}

static struct xpi_ring *ring_to(struct xpi_inproc *ip, int peer)
{
	struct xpi_ring *ring = ip->out[peer];
	if (xpi_likely(ring != NULL))
		return ring;
	ring = aligned_alloc(64, sizeof(*ring));
	if (ring == NULL)
		return NULL;
	memset(ring, 0, sizeof(*ring));
	ring->src = ip->rank;
	ring->dst = peer;
	ring->announce.type = XPI_CMD_TL;
	ring->announce.run = ring_announced;
	ip->out[peer] = ring;
	ip->job->rings[(size_t)ip->rank * (size_t)ip->job->n + (size_t)peer] = ring;
	/* Only pushed, not run here: running the peer's engine from this thread
	 * would nest two ranks' engines on one stack. The peer's next progress
	 * call picks it up. */
	xpi_mpsc_push(&ip->job->ctxs[peer]->cmdq, &ring->announce.node);
	return ring;
}

/* The first of @nslots free slots of the ring to @peer, or NULL if there
 * are not that many free (or no ring). */
static struct xpi_slot *slot_claim(struct xpi_inproc *ip, int peer, uint32_t nslots,
				   struct xpi_ring **out)
{
	struct xpi_ring *ring = ring_to(ip, peer);
	if (xpi_unlikely(ring == NULL))
		return NULL;
	if (ring->prod_pos + nslots - ring->prod_head_cache > XPI_RING_SLOTS) {
		ring->prod_head_cache = atomic_load_explicit(&ring->head_pub, memory_order_acquire);
		if (ring->prod_pos + nslots - ring->prod_head_cache > XPI_RING_SLOTS)
			return NULL;
	}
	*out = ring;
	return &ring->slots[ring->prod_pos & (XPI_RING_SLOTS - 1)];
}

/* Fills the header of the message's first slot and publishes the message:
 * the release store of its sequence number makes everything written
 * before it (payload, later slots) visible to the consumer. */
static void slot_publish(struct xpi_ring *ring, struct xpi_slot *s, const struct xpi_msg_hdr *h,
			 uint8_t kind, uint32_t nslots)
{
	s->kind = kind;
	s->comm = h->comm;
	s->peer_seq = h->peer_seq;
	s->tag = h->tag;
	s->len = h->len;
	atomic_store_explicit(&s->seq, ring->prod_pos + 1, memory_order_release);
	ring->prod_pos += nslots;
}

static struct xpi_slot_cont *cont_slot(struct xpi_ring *ring, uint32_t pos)
{
	return (struct xpi_slot_cont *)&ring->slots[pos & (XPI_RING_SLOTS - 1)];
}

/* Writes a long inline payload: its head into slot @s, the rest into the
 * slots after it, each stamped with its own position. */
static void slots_write(struct xpi_ring *ring, struct xpi_slot *s, const uint8_t *data,
			uint64_t len)
{
	memcpy(s->u.data, data, XPI_SLOT_HEAD_DATA);
	uint64_t off = XPI_SLOT_HEAD_DATA;
	for (uint32_t pos = ring->prod_pos + 1; off < len; pos++) {
		struct xpi_slot_cont *c = cont_slot(ring, pos);
		uint64_t n = len - off < XPI_SLOT_CONT_DATA ? len - off : XPI_SLOT_CONT_DATA;
		memcpy(c->data, data + off, n);
		atomic_store_explicit(&c->seq, pos + 1, memory_order_relaxed);
		off += n;
	}
}

/* Gathers a long inline payload that starts at slot @s into @out. */
static void slots_read(struct xpi_ring *ring, const struct xpi_slot *s, uint8_t *out)
{
	uint64_t len = s->len;
	memcpy(out, s->u.data, XPI_SLOT_HEAD_DATA);
	uint64_t off = XPI_SLOT_HEAD_DATA;
	for (uint32_t pos = ring->cons_pos + 1; off < len; pos++) {
		uint64_t n = len - off < XPI_SLOT_CONT_DATA ? len - off : XPI_SLOT_CONT_DATA;
		memcpy(out + off, cont_slot(ring, pos)->data, n);
		off += n;
	}
}

/* Slots taken by the message whose first slot is @s. */
static uint32_t slots_of(const struct xpi_slot *s)
{
	return s->kind == XPI_MSG_INLINE ? xpi_slots_for(s->len) : 1;
}

static int inproc_send_eager(void *tlp, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	struct xpi_inproc *ip = tlp;
	struct xpi_ring *ring;
	bool inline_ = h->len <= XPI_RING_INLINE_MAX;
	uint32_t nslots = inline_ ? xpi_slots_for(h->len) : 1;
	struct xpi_slot *s = slot_claim(ip, peer, nslots, &ring);
	if (s == NULL)
		return ring_to(ip, peer) == NULL ? -ENOMEM : -EAGAIN;

	uint64_t cost = xpi_eager_cost(h->len);
	uint64_t credit = ip->ctx->eager_credit_per_peer; /* one config per job */
	if (ring->eager_sent + cost - ring->credit_cache > credit) {
		ring->credit_cache = atomic_load_explicit(&ring->credit_pub, memory_order_acquire);
		if (ring->eager_sent + cost - ring->credit_cache > credit)
			return -ENOBUFS;
	}
	if (inline_) {
		if (nslots > 1)
			slots_write(ring, s, data, h->len);
		else if (h->len != 0)
			memcpy(s->u.data, data, h->len);
		ring->eager_sent += cost;
		slot_publish(ring, s, h, XPI_MSG_INLINE, nslots);
		return 0;
	}
	struct xp_buf *b;
	if (xpi_pool_get(ip->job->pools[peer], h->len, &b) < 0)
		return -ENOBUFS;
	memcpy(b->data, data, h->len);
	b->len = h->len;
	s->u.buf = b;
	ring->eager_sent += cost;
	slot_publish(ring, s, h, XPI_MSG_BUF, 1);
	return 0;
}

static int inproc_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			   const struct xpi_reg *reg)
{
	struct xpi_inproc *ip = tlp;
	struct xpi_ring *ring;
	struct xpi_slot *s = slot_claim(ip, peer, 1, &ring);
	if (s == NULL)
		return ring_to(ip, peer) == NULL ? -ENOMEM : -EAGAIN;
	if (reg != NULL)
		atomic_fetch_add_explicit(&ip->rts_registered, 1, memory_order_relaxed);
	xpi_request_get(sreq); /* dropped when the receiver fetches or drops it */
	s->u.sreq = sreq;
	slot_publish(ring, s, h, XPI_MSG_RTS, 1);
	return 0;
}

/* Polls at most this many slots of one ring per call, so one busy peer
 * cannot starve the others. */
#define POLL_BATCH 64

static int poll_ring(struct xpi_inproc *ip, struct xpi_ring *ring)
{
	int n = 0;
	for (; n < POLL_BATCH; n++) {
		struct xpi_slot *s = &ring->slots[ring->cons_pos & (XPI_RING_SLOTS - 1)];
		if (atomic_load_explicit(&s->seq, memory_order_acquire) != ring->cons_pos + 1)
			break;
		/* Field by field: zeroing the whole descriptor (its links and
		 * inline store) would cost more than the rest of the delivery. */
		struct xpi_msg m;
		m.u.key.comm = s->comm;
		m.u.key.src = ring->src;
		m.u.key.tag = s->tag;
		m.u.key.mask = 0;
		m.kind = s->kind;
		m.tl = 0;
		m.sized = false;
		m.peer_seq = s->peer_seq;
		m.len = s->len;
		m.data = s->u.data;
		uint32_t nslots = slots_of(s);
		if (nslots > 1) {
			slots_read(ring, s, ip->scratch);
			m.data = ip->scratch;
		}
		m.buf = s->kind == XPI_MSG_BUF ? s->u.buf : NULL;
		m.rndv = s->kind == XPI_MSG_RTS ? s->u.sreq : NULL;
		xpi_engine_deliver(ip->ctx, &m);
		ring->cons_pos += nslots;
	}
	/* Publish progress when the ring ran dry or a quarter was read. */
	if (ring->cons_pos != ring->cons_published &&
	    (n < POLL_BATCH || ring->cons_pos - ring->cons_published >= XPI_RING_SLOTS / 4)) {
		atomic_store_explicit(&ring->head_pub, ring->cons_pos, memory_order_release);
		ring->cons_published = ring->cons_pos;
	}
	/* Credit goes back as soon as the engine consumed something, also when
	 * no new message came: the sender may be waiting for it. */
	uint64_t returned = ip->ctx->peers[ring->src].eager_returned;
	if (returned != ring->credit_published) {
		atomic_store_explicit(&ring->credit_pub, returned, memory_order_release);
		ring->credit_published = returned;
	}
	return n;
}

static int inproc_progress(void *tlp)
{
	struct xpi_inproc *ip = tlp;
	int n = 0;
	for (int i = 0; i < ip->nin; i++)
		n += poll_ring(ip, ip->in[i]);
	return n;
}

static void inproc_destroy(void *tlp)
{
	(void)tlp; /* the job frees rings and instances (job.c) */
}

/* Threads of one process need no keys to reach each other's memory; the
 * handle just remembers the region, and the count lets tests see that the
 * core hands every registration to the backend exactly once. */
struct inproc_region {
	void *addr;
	size_t len;
};

static int inproc_mem_reg(void *tlp, void *addr, size_t len, void **handle)
{
	struct xpi_inproc *ip = tlp;
	struct inproc_region *g = malloc(sizeof(*g));
	if (g == NULL)
		return -ENOMEM;
	g->addr = addr;
	g->len = len;
	atomic_fetch_add(&ip->regs_live, 1);
	*handle = g;
	return 0;
}

static void inproc_mem_dereg(void *tlp, void *handle)
{
	struct xpi_inproc *ip = tlp;
	if (handle == NULL)
		return;
	atomic_fetch_sub(&ip->regs_live, 1);
	free(handle);
}

const struct xpi_tl_ops xpi_inproc_ops = {
	.name = "inproc",
	/* Rendezvous here is one copy by the receiver straight from the
	 * sender's buffer, and beat eager from about 1 KiB up in xport-perf
	 * (16 KiB: 0.6 against 1.9 us). Below 4 KiB eager is kept anyway, as
	 * Open MPI's shared memory does: such sends complete at once, and
	 * programs that send before they post receives rely on that. */
	.rndv_threshold = 4096,
	.mem_reg = inproc_mem_reg,
	.mem_dereg = inproc_mem_dereg,
	.send_eager = inproc_send_eager,
	.send_rts = inproc_send_rts,
	.send_cancel = xpi_local_send_cancel,
	.rndv_fetch = xpi_local_rndv_fetch,
	.msg_release = xpi_local_msg_release,
	.progress = inproc_progress,
	.block = xpi_tl_block_yield,
	.tx_pending = xpi_tl_tx_pending_none,
	.destroy = inproc_destroy,
};

/* Releases what unread slots of a ring hold (job teardown). */
void xpi_ring_drain(struct xpi_ring *ring)
{
	while (atomic_load(&ring->slots[ring->cons_pos & (XPI_RING_SLOTS - 1)].seq) ==
	       ring->cons_pos + 1) {
		struct xpi_slot *s = &ring->slots[ring->cons_pos & (XPI_RING_SLOTS - 1)];
		if (s->kind == XPI_MSG_BUF)
			xpi_buf_put(s->u.buf);
		else if (s->kind == XPI_MSG_RTS)
			xpi_request_put(s->u.sreq);
		ring->cons_pos += slots_of(s);
	}
}
