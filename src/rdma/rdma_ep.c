/* SPDX-License-Identifier: MIT */
/*
 * RDMA as a lane of endpoints (src/core/ep.h): a pair agreed over the
 * endpoint's connection, and given back when the endpoint is.
 *
 * A job's pairs are agreed through the bootstrap: each rank's head (its
 * port's address, its state words, the window it grants) reaches every
 * other at xp_init. An endpoint has no bootstrap: once both sides chose
 * this lane (ep_lanes.c), each sends its head as a sideband message over
 * the connection, and both agree if both have room for a pair (a share of
 * the SRQ: t->ep_budget pairs at most) and their ports are on the same
 * kind of link; both compute that alike from the two heads. The pair is
 * then made on first need as a job's (rdma_wire.c: ASK, CONN).
 *
 * Head, 40 bytes, little-endian: u8 kind (3), u8 version (1), u8 ok (1: it
 * has room), u8 MTU (enum ibv_mtu), u8 GID index, u8 link (1 Ethernet, 0
 * InfiniBand), u16 LID, u16 window, u16 zero, u32 state words' rkey, u64
 * their address, 16 bytes GID.
 *
 * Giving a slot back. Our sends may still be on the wire (an eager send
 * completes when it is posted), so a fence (a read behind them,
 * rdma_small_fence) is posted and waited for; then the QP is put in the
 * error state, what it still held is flushed and waited for, and it is
 * destroyed, so that no completion of the old pair is taken for the
 * slot's next one. Each wait is bounded by RELEASE_NS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/ep.h"
#include "../core/le.h"
#include "../select/card.h"
#include "rdma_tl.h"

#define HEAD_KIND 3u
#define HEAD_VERSION 1u
#define HEAD_LEN 40u
/* The longest window a head may grant: more than a device's SRQ holds. */
#define HEAD_WINDOW_MAX 4096u
#define RELEASE_NS (1000 * 1000000LL)

static void send_head(struct xpi_rdma_tl *t, int slot)
{
	struct rdma_peer *p = &t->peers[slot];
	bool ok = t->ep_pairs < t->ep_budget;
	if (ok) {
		t->ep_pairs++;
		p->ep_reserved = true;
	}
	uint8_t m[HEAD_LEN] = { HEAD_KIND,           HEAD_VERSION,     ok,
				(uint8_t)t->dev.mtu, t->dev.gid_index, t->dev.roce };
	put16(m + 6, t->dev.lid);
	put16(m + 8, (uint16_t)t->ep_window);
	put32(m + 12, t->words_mr->rkey);
	put64(m + 16, (uint64_t)(uintptr_t)t->words);
	memcpy(m + 24, t->dev.gid.raw, 16);
	p->head_sent = true;
	/* The connection is made: it queues, or it is lost and says so. */
	(void)xpi_engine_sideband_send(t->ctx, slot, t->tl_index, XPI_TL_RDMA, m, sizeof(m));
}

/* Both heads are known: the pair is agreed (made on first need), or the
 * endpoint stays on its connection. */
static void decide(struct xpi_rdma_tl *t, int slot)
{
	struct rdma_peer *p = &t->peers[slot];
	if (p->head_ok && p->ep_reserved) {
		p->granted = t->ep_window;
		p->wstate = RW_IDLE;
		xpi_ep_lane_settled(t->ctx, slot, t->tl_index);
		return;
	}
	if (p->ep_reserved) {
		t->ep_pairs--;
		p->ep_reserved = false;
	}
	xpi_ep_lane_settled(t->ctx, slot, -1);
}

static void ep_start(void *tl, int slot)
{
	struct xpi_rdma_tl *t = tl;
	send_head(t, slot);
	if (t->peers[slot].head_heard)
		decide(t, slot);
}

void rdma_ep_take_head(struct xpi_rdma_tl *t, int peer, const uint8_t *m, size_t len)
{
	struct rdma_peer *p = &t->peers[peer];
	uint16_t window = len == HEAD_LEN ? get16(m + 8) : 0;
	if (peer < t->ctx->size || p->head_heard || len != HEAD_LEN || m[1] != HEAD_VERSION ||
	    m[2] > 1 || m[5] > 1 || m[10] != 0 || m[11] != 0 || m[3] < IBV_MTU_256 ||
	    m[3] > IBV_MTU_4096 || window == 0 || window > HEAD_WINDOW_MAX) {
		rdma_peer_failed(t, peer, -EPROTO,
				 "sent a wrong rdma head (broken, or of another "
				 "version)");
		return;
	}
	p->head_heard = true;
	p->head_ok = m[2] == 1 && m[5] == t->dev.roce;
	p->window = window;
	p->words_rkey = get32(m + 12);
	p->words_addr = get64(m + 16);
	p->remote = (struct xpi_rdma_addr){ .lid = get16(m + 6), .mtu = m[3], .gid_index = m[4] };
	memcpy(p->remote.gid, m + 24, 16);
	if (p->head_sent)
		decide(t, peer);
}

/* True while the device may still complete work of @slot's QP. */
static bool flushing(const struct xpi_rdma_tl *t, int slot)
{
	if (t->peers[slot].tx_count != 0)
		return true;
	for (const struct xpi_dlink *l = t->fetches.next; l != &t->fetches; l = l->next)
		if (xpi_container_of(l, const struct rdma_fetch, link)->peer == slot)
			return true;
	for (uint32_t i = 0; i < XPI_RDMA_ATOMIC_SLOTS; i++)
		if (t->atomics[i].busy && t->atomics[i].kind == RDMA_WR_CLAIM &&
		    t->atomics[i].peer == slot)
			return true;
	return false;
}

/* Drops the reads of @slot whose completion will not come (its QP is
 * gone): the device writes no more. */
static void drop_fetches(struct xpi_rdma_tl *t, int slot)
{
	struct xpi_dlink *pos, *next;
	for (pos = t->fetches.next; pos != &t->fetches; pos = next) {
		next = pos->next;
		struct rdma_fetch *f = xpi_container_of(pos, struct rdma_fetch, link);
		if (f->peer != slot)
			continue;
		xpi_dlist_remove(&f->link);
		if (f->mr != NULL)
			ibv_dereg_mr(f->mr);
		xpi_rcache_put(&t->rcache, f->chunk);
		free(f);
	}
}

static int ep_release(void *tl, int slot)
{
	struct xpi_rdma_tl *t = tl;
	struct rdma_peer *p = &t->peers[slot];
	if (!p->head_sent && !p->head_heard && p->qp == NULL && !p->in_todo && !p->in_attn) {
		memset(p, 0, sizeof(*p)); /* never served it */
		return 0;
	}
	int64_t now = xpi_now_ns();
	if (!p->releasing) {
		p->releasing = true;
		p->release_deadline = now + RELEASE_NS;
	}
	if (!p->dead && p->up && p->tx_count != 0 && now < p->release_deadline) {
		if (!p->fence_posted && rdma_small_fence(t, slot) == 0)
			p->fence_posted = true;
		return -EAGAIN;
	}
	if (!p->dead) {
		rdma_peer_failed(t, slot, 0, NULL); /* the QP to error: flushed */
		p->release_deadline = now + RELEASE_NS;
	}
	if (p->qp != NULL && flushing(t, slot) && now < p->release_deadline)
		return -EAGAIN;
	rdma_small_drop_tx(t, slot);
	drop_fetches(t, slot);
	if (p->qp_ready)
		rdma_qpn_remove(t, slot);
	rdma_qp_destroy(t, slot);
	if (p->srq_share)
		t->srq_promised -= p->granted + 2;
	if (p->ep_reserved)
		t->ep_pairs--;
	for (int i = 0; p->in_todo && i < t->ntodo; i++)
		if (t->todo[i] == slot)
			t->todo[i] = t->todo[--t->ntodo];
	for (int i = 0; p->in_attn && i < t->nattn; i++)
		if (t->attn[i] == slot)
			t->attn[i] = t->attn[--t->nattn];
	t->nfins_total -= p->nfins;
	free(p->fins);
	memset(p, 0, sizeof(*p));
	return 0;
}

static const struct xpi_ep_lane_ops rdma_ep_ops = {
	.start = ep_start,
	.release = ep_release,
};

void rdma_ep_attach(struct xpi_rdma_tl *t)
{
	if (t->npeers > t->ctx->size && t->cm == NULL && t->ep_budget > 0)
		xpi_ep_lane_register(t->ctx, XPI_TL_RDMA, &rdma_ep_ops, t, t->tl_index);
}
