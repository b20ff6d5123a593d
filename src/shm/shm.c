/* SPDX-License-Identifier: MIT */
/* The shared-memory transport's data path: the receive FIFO, rendezvous
 * payloads streamed through lent chunk sets, sleeping on a doorbell FIFO, dead peers (see shm.h). */
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/log.h"
#include "../core/self.h"
#include "shm.h"
#include "shm_int.h"

/* The collectives' areas come last, page-aligned, after the lanes: the one
 * part of a segment that grows with the job, 256 B a rank. */
static size_t coll_areas_at(int nranks)
{
	size_t at = sizeof(struct shm_seg) + (size_t)nranks * sizeof(struct shm_lane);
	return (at + 4095) & ~(size_t)4095;
}

bool xpi_shm_coll_pair(void *tl, int a, int b)
{
	struct xpi_shm *s = tl;
	size_t n = (size_t)s->ctx->size;
	if (s->mapped == NULL || a < 0 || b < 0 || (size_t)a >= n || (size_t)b >= n || a == b)
		return false;
	return s->mapped[(size_t)a * n + (size_t)b] && s->mapped[(size_t)b * n + (size_t)a];
}

size_t xpi_shm_seg_size(int nranks)
{
	return coll_areas_at(nranks) + (size_t)XPI_COLL_CHANNELS * XPI_COLL_AREA;
}

void *xpi_shm_coll_area(void *tl, int rank, unsigned channel)
{
	struct xpi_shm *s = tl;
	xp_context_t *ctx = s->ctx;
	if (channel >= XPI_COLL_CHANNELS || rank < 0 || rank >= ctx->size)
		return NULL;
	/* A dead peer's segment stays mapped: its area reads as it was left.
	 * A peer's is mapped on the collectives' first need of it, which the
	 * program's thread has (a communicator's first allreduce or its
	 * creation): connecting changes what progress walks, so it is done
	 * holding the token, asked of a waiter that spins with it as
	 * xpi_engine_flush does. Never from inside the engine. */
	struct shm_seg *seg = s->mine;
	if (rank != ctx->rank) {
		while (!xpi_owner_try_acquire(ctx)) {
			atomic_store_explicit(&ctx->token_wanted, 1, memory_order_relaxed);
			sched_yield();
		}
		seg = xpi_shm_ensure(s, rank) == 0 ? s->peers[rank].seg : NULL;
		xpi_owner_release(ctx);
	}
	if (seg == NULL)
		return NULL;
	return (uint8_t *)seg + coll_areas_at(ctx->size) + (size_t)channel * XPI_COLL_AREA;
}

/* Rings a peer's doorbell if it sleeps. The fence orders what we just
 * wrote (a chunk, a word of a lane) before the look at its sleeper count;
 * a sleeper counts itself before it looks at our writes
 * (shm_sleep_prepare), so one of the two always sees the other. Messages
 * in the FIFO take a cheaper way (fifo_sleeper). A full FIFO (EAGAIN)
 * already wakes it. */
static void ring_bell(struct shm_peer *p)
{
	static const uint8_t ring = 1;
	if (p->bell_fd >= 0) {
		ssize_t n = write(p->bell_fd, &ring, 1);
		(void)n;
	}
}

void xpi_shm_notify(struct shm_peer *p)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&p->seg->sleeping, memory_order_relaxed) != 0)
		ring_bell(p);
}

/*
 * A message in the FIFO needs no fence of its own: the claim's
 * compare-and-swap on the tail is the sender's half of the handshake, and
 * a sleeper that counts itself then looks at the tail, not at published
 * slots (work_waiting), so a claim it sees keeps it awake until the
 * message is published. Whether to ring is read right after the claim and
 * the bell rung once the message is out. This saves the sender a second
 * full barrier, the one that waited for its slots to reach the receiver.
 */
static bool fifo_sleeper(const struct shm_peer *p)
{
	return atomic_load_explicit(&p->seg->sleeping, memory_order_seq_cst) != 0;
}

/* Our lane in @peer's segment: what it tells us as our receiver. */
static struct shm_lane *lane_to(struct xpi_shm *s, int peer)
{
	return &s->peers[peer].seg->lanes[s->ctx->rank];
}

/* @peer has a rendezvous under way with us, either way: progress visits it
 * until it has none (the FIFO brings everything else). */
static void mark_active(struct xpi_shm *s, int peer)
{
	struct shm_peer *p = &s->peers[peer];
	if (!p->active) {
		p->active = true;
		s->active[s->nactive++] = peer;
	}
}

/* True if @peer has credit for an eager message of @len bytes (engine.h);
 * spends it if so. */
static bool spend_credit(struct xpi_shm *s, int peer, uint64_t len)
{
	struct shm_peer *p = &s->peers[peer];
	uint64_t cost = xpi_eager_cost(len), credit = s->ctx->eager_credit_per_peer;
	if (p->eager_sent + cost - p->credit_seen > credit) {
		p->credit_seen =
			atomic_load_explicit(&lane_to(s, peer)->credit_pub, memory_order_acquire);
		if (p->eager_sent + cost - p->credit_seen > credit)
			return false;
	}
	p->eager_sent += cost;
	return true;
}

/* @nslots slots of @peer's FIFO, claimed: the first's position, or -1. */
static int64_t fifo_claim(struct xpi_shm *s, int peer, uint32_t nslots)
{
	struct shm_peer *p = &s->peers[peer];
	return shm_fifo_claim(&p->seg->fifo, &p->fifo_head, nslots, &lane_to(s, peer)->note);
}

static int shm_send_eager(void *tlp, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	struct xpi_shm *s = tlp;
	struct shm_peer *p = &s->peers[peer];
	if (h->len > SHM_INLINE_MAX)
		return -ENOBUFS; /* rendezvous */
	if (p->dead || xpi_unlikely(xpi_shm_ensure(s, peer) < 0))
		return -ECONNRESET;
	/* Credit first: a claim of FIFO slots cannot be taken back. */
	if (!spend_credit(s, peer, h->len))
		return -ENOBUFS;
	uint32_t nslots = xpi_slots_for(h->len);
	int64_t pos = fifo_claim(s, peer, nslots);
	if (pos < 0) {
		p->eager_sent -= xpi_eager_cost(h->len);
		return -EAGAIN;
	}
	bool sleeper = fifo_sleeper(p);
	struct shm_fifo *f = &p->seg->fifo;
	struct xpi_slot *slot = shm_fifo_slot(f, (uint32_t)pos);
	xpi_slots_write(f->slots, SHM_FIFO_SLOTS - 1, (uint32_t)pos, slot, data, h->len);
	shm_fifo_publish(slot, (uint32_t)pos, s->ctx->rank, h, XPI_MSG_INLINE);
	if (xpi_unlikely(sleeper))
		ring_bell(p);
	return 0;
}

/* A state word for rendezvous send @sreq to @peer, its buffer's address
 * for direct reads, and a reference held until the payload is out or the
 * send withdrawn. Returns the word's index and generation. */
static uint64_t rndv_announce(struct xpi_shm *s, int peer, xp_request_t *sreq)
{
	uint32_t idx = s->rndv_free[--s->nfree];
	uint32_t gen = ++s->rndv_gen[idx];
	atomic_store_explicit(&s->mine->rndv[idx].addr, (uint64_t)(uintptr_t)sreq->buf,
			      memory_order_relaxed);
	atomic_store_explicit(&s->mine->rndv[idx].state, gen << 2 | RNDV_PENDING,
			      memory_order_relaxed);
	xpi_request_get(sreq); /* until the receiver has its payload, or it is withdrawn */
	sreq->tl_id = idx;
	s->rndv_req[idx] = sreq;
	s->rndv_peer[idx] = peer;
	s->outstanding++;
	xpi_dlist_push_tail(&s->peers[peer].tx_out, &sreq->tl_link);
	mark_active(s, peer);
	return (uint64_t)gen << 32 | idx;
}

/*
 * Shared memory as another transport's bulk lane (XP_TRANSPORTS=tcp,shm
 * on one host gives it: the faster lane carries payloads): the same state
 * word as our own announcement, named by the descriptor the small lane
 * carries (8 bytes, little-endian: generation << 32 | index).
 */
static int shm_rndv_offer(void *tlp, int peer, xp_request_t *sreq, const struct xpi_reg *reg,
			  struct xpi_rndv_desc *desc)
{
	(void)reg;
	struct xpi_shm *s = tlp;
	if (s->peers[peer].dead || xpi_shm_ensure(s, peer) < 0)
		return -ECONNRESET;
	if (s->nfree == 0)
		return -EAGAIN; /* every state word is in use: wait for one */
	uint64_t w = rndv_announce(s, peer, sreq);
	desc->len = sizeof(w);
	for (unsigned i = 0; i < sizeof(w); i++)
		desc->bytes[i] = (uint8_t)(w >> (8 * i));
	return 0;
}

static int shm_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			const struct xpi_reg *reg, const struct xpi_rndv_desc *desc)
{
	if (desc != NULL)
		return -ENOTSUP; /* carries no other lane's descriptors yet */
	(void)reg;
	struct xpi_shm *s = tlp;
	struct shm_peer *p = &s->peers[peer];
	if (p->dead || xpi_shm_ensure(s, peer) < 0)
		return -ECONNRESET;
	if (s->nfree == 0)
		return -EAGAIN; /* every state word is in use: wait for one */
	int64_t pos = fifo_claim(s, peer, 1);
	if (pos < 0)
		return -EAGAIN;
	bool sleeper = fifo_sleeper(p);
	struct xpi_slot *slot = shm_fifo_slot(&p->seg->fifo, (uint32_t)pos);
	slot->u.w[0] = rndv_announce(s, peer, sreq);
	shm_fifo_publish(slot, (uint32_t)pos, s->ctx->rank, h, XPI_MSG_RTS);
	if (xpi_unlikely(sleeper))
		ring_bell(p);
	return 0;
}

static void rndv_release(struct xpi_shm *s, uint32_t idx)
{
	xpi_dlist_remove(&s->rndv_req[idx]->tl_link);
	atomic_store_explicit(&s->mine->rndv[idx].state, s->rndv_gen[idx] << 2 | RNDV_FREE,
			      memory_order_relaxed);
	s->rndv_req[idx] = NULL;
	s->rndv_free[s->nfree++] = idx;
	s->outstanding--;
}

static int shm_send_cancel(void *tlp, xp_request_t *sreq)
{
	struct xpi_shm *s = tlp;
	uint32_t idx = (uint32_t)sreq->tl_id;
	uint32_t expected = s->rndv_gen[idx] << 2 | RNDV_PENDING;
	if (!atomic_compare_exchange_strong(&s->mine->rndv[idx].state, &expected,
					    s->rndv_gen[idx] << 2 | RNDV_FREE))
		return -EBUSY; /* the receiver claimed it: it completes */
	rndv_release(s, idx);
	xpi_request_put(sreq);
	return 0;
}

/*
 * Claims expected payload @x from @src, at once, when a receive takes its
 * announcement: the compare-and-swap on the sender's state word decides the
 * race with a withdrawal there and then, so a receive never goes away
 * waiting to learn whether its message still exists (later receives would
 * match meanwhile, out of MPI's order). Returns 1: claimed, to be streamed
 * in turn (start_stream); 0: done (nothing to stream); -ECANCELED:
 * withdrawn by its sender.
 */
static int claim(struct xpi_shm *s, int src, struct shm_rx *x)
{
	struct shm_peer *p = &s->peers[src];
	uint32_t expected = x->gen << 2 | RNDV_PENDING;
	if (!atomic_compare_exchange_strong(&p->seg->rndv[x->idx].state, &expected,
					    x->gen << 2 | RNDV_CLAIMED))
		return -ECANCELED;
	if (x->len == 0) {
		/* Nothing to stream (a zero-byte send that found no eager
		 * credit): finish it as a direct read does. The one-word
		 * mailbox must not name it, or our next claim could overwrite
		 * it before the sender looked. */
		xpi_shm_finish_send(s, src, x->idx, x->gen);
		return 0;
	}
	return 1;
}

/* Asks the sender to stream claimed payload @x, the first in line: one at
 * a time per sender, named in the one-word mailbox of its lane (it reads
 * one word instead of searching), through a chunk set we lend it for the
 * stream. With every set lent, @x waits for one, behind the senders that
 * asked before (release_set). */
static void start_stream(struct xpi_shm *s, int src, struct shm_rx *x)
{
	struct shm_peer *p = &s->peers[src];
	if (x->split) {
		xpi_shm_push_request(s, src, x);
		return;
	}
	if (p->rx_set < 0) {
		if (s->sets_free == 0) {
			x->claimed = false; /* also after a split copy fell back */
			if (!p->set_wanted) {
				p->set_wanted = true;
				int n = s->ctx->size;
				s->set_queue[(s->set_head + s->set_count++) % n] = src;
			}
			return;
		}
		p->rx_set = __builtin_ctz(s->sets_free);
		s->sets_free &= ~(1u << p->rx_set);
		p->rx_chunk = 0;
	}
	x->claimed = true;
	s->streams++;
	struct shm_lane *l = &s->mine->lanes[src];
	atomic_store_explicit(&l->set, (uint32_t)p->rx_set, memory_order_relaxed);
	/* The release orders the set before the mailbox naming the send. */
	atomic_store_explicit(&l->mailbox, x->idx + 1, memory_order_release);
	xpi_shm_notify(p); /* the sender starts streaming */
}

/* @src's stream is over (or @src is lost): its chunk set, every chunk
 * empty again, goes to the first sender waiting for one, or back. */
static void release_set(struct xpi_shm *s, int src)
{
	struct shm_peer *p = &s->peers[src];
	int k = p->rx_set;
	if (k < 0)
		return;
	p->rx_set = -1;
	struct shm_set *set = &s->mine->sets[k];
	for (unsigned c = 0; c < NCHUNK; c++) /* a lost peer's may be full */
		atomic_store_explicit(&set->chunk[c].state, 0, memory_order_relaxed);
	s->sets_free |= 1u << k;
	while (s->set_count > 0 && s->sets_free != 0) {
		int w = s->set_queue[s->set_head];
		s->set_head = (s->set_head + 1) % s->ctx->size;
		s->set_count--;
		struct shm_peer *q = &s->peers[w];
		if (!q->set_wanted)
			continue;
		q->set_wanted = false;
		if (q->dead || xpi_dlist_empty(&q->rx))
			continue;
		struct shm_rx *x = xpi_container_of(q->rx.next, struct shm_rx, link);
		if (!x->claimed && !x->split)
			start_stream(s, w, x);
	}
}

/* The payload before in line from @src is done: streams the next. */
static void claim_next(struct xpi_shm *s, int src)
{
	struct shm_peer *p = &s->peers[src];
	if (!xpi_dlist_empty(&p->rx)) {
		struct shm_rx *x = xpi_container_of(p->rx.next, struct shm_rx, link);
		if (!x->claimed)
			start_stream(s, src, x);
	}
}

/* Sender: our sends the receiver has read directly. */
static int reap_direct(struct xpi_shm *s, int peer)
{
	struct shm_peer *p = &s->peers[peer];
	uint32_t ev = atomic_load_explicit(&lane_to(s, peer)->events, memory_order_acquire);
	if (ev == p->events_seen)
		return 0;
	p->events_seen = ev;
	int n = 0;
	struct xpi_dlink *pos = p->tx_out.next;
	while (pos != &p->tx_out) {
		xp_request_t *r = xpi_container_of(pos, xp_request_t, tl_link);
		pos = pos->next;
		uint32_t idx = (uint32_t)r->tl_id;
		uint32_t st = atomic_load_explicit(&s->mine->rndv[idx].state, memory_order_acquire);
		if (st != (s->rndv_gen[idx] << 2 | RNDV_DONE))
			continue;
		rndv_release(s, idx);
		xpi_request_complete(r, 0);
		xpi_request_put(r);
		n++;
	}
	return n;
}

static int shm_rndv_fetch(void *tlp, struct xpi_msg *msg, void *dst, size_t cap, xp_request_t *rreq,
			  const struct xpi_reg *dst_reg)
{
	(void)dst_reg; /* nothing to register: the payload is copied in */
	struct xpi_shm *s = tlp;
	int src = msg->u.key.src;
	struct shm_peer *p = &s->peers[src];
	uint64_t w = (uint64_t)(uintptr_t)msg->rndv;
	if (msg->desc_len != 0) { /* announced on another lane (shm_rndv_offer) */
		if (msg->desc_len != sizeof(w))
			return -EPROTO;
		const uint8_t *d = msg->data;
		w = 0;
		for (unsigned i = 0; i < sizeof(w); i++)
			w |= (uint64_t)d[i] << (8 * i);
	}
	/* Announced on another lane, its sender may not be connected here. */
	if (p->dead || xpi_shm_ensure(s, src) < 0)
		return -ECONNRESET;
	/* Cross-memory attach pins the sender's pages, which memory mapped
	 * with VM_PFNMAP (a dmabuf's, a device's) refuses although the CPU can
	 * read it: such a payload, still claimed, comes through the chunks. */
	bool claimed = false, split = false;
	if (p->cma && msg->len >= s->cma_min) {
		/* Split between us and the sender (shm_cma.c); a truncated
		 * receive, which wants less than all, reads its part alone. */
		split = cap >= msg->len;
		if (!split) {
			int rc = xpi_shm_fetch_direct(s, src, (uint32_t)w, (uint32_t)(w >> 32), dst,
						      cap);
			if (rc != -EFAULT)
				return rc;
			claimed = true;
		}
	}
	struct shm_rx *x = malloc(sizeof(*x));
	if (x == NULL) {
		if (claimed) /* the sender must not wait for it for ever */
			xpi_shm_finish_send(s, src, (uint32_t)w, (uint32_t)(w >> 32));
		return -ENOMEM;
	}
	*x = (struct shm_rx){ .rreq = rreq,
			      .dst = dst,
			      .cap = cap,
			      .len = msg->len,
			      .idx = (uint32_t)w,
			      .gen = (uint32_t)(w >> 32),
			      .split = split,
			      .half = (msg->len / 2) & ~(uint64_t)63 };
	if (x->idx >= NRNDV) {
		free(x);
		return -EPROTO;
	}
	/* Claimed now; said here, not through the engine, if it is already
	 * done or withdrawn (rndv_fetch never completes its own receive). */
	int rc = claimed ? 1 : claim(s, src, x);
	if (rc != 1) {
		free(x);
		return rc;
	}
	xpi_dlist_push_tail(&p->rx, &x->link);
	mark_active(s, src);
	if (p->rx.next == &x->link)
		start_stream(s, src, x);
	return 1; /* pump_rx() finishes it, streamed in turn */
}

/* The receive lets go; its payload, claimed, still comes through the chunks
 * and is dropped (pump_rx keeps only what fits in cap, none now). */
static int shm_rndv_abort(void *tlp, xp_request_t *rreq)
{
	struct xpi_shm *s = tlp;
	int src = rreq->status.source;
	if (src < 0 || src >= s->ctx->size)
		return -EBUSY;
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &s->peers[src].rx) {
		struct shm_rx *x = xpi_container_of(pos, struct shm_rx, link);
		if (x->rreq != rreq)
			continue;
		if (x->split && x->claimed) {
			if (!xpi_shm_push_revoke(s, src, x))
				return -EBUSY; /* the sender is writing into it: it completes */
			/* Nobody copies it now: dropped, as a stream would drop it. */
			xpi_shm_finish_send(s, src, x->idx, x->gen);
			xpi_dlist_remove(&x->link);
			s->streams--;
			free(x);
			claim_next(s, src);
			return 0;
		}
		x->split = false; /* streamed in turn, and dropped */
		x->cap = x->got < x->cap ? x->got : x->cap;
		x->rreq = NULL;
		return 0;
	}
	return -EBUSY;
}

static void shm_msg_release(void *tlp, struct xpi_msg *msg)
{
	(void)tlp;
	(void)msg; /* an announcement's ids travel inside the message itself */
}

/* Sender: copies our oldest claimed send to @peer into free chunks. */
static int pump_tx(struct xpi_shm *s, int peer)
{
	struct shm_peer *p = &s->peers[peer];
	if (p->tx_idx < 0) {
		/* The receiver claims one send at a time, in the order its
		 * receives took them (not always ours), and says which. */
		struct shm_lane *l = lane_to(s, peer);
		_Atomic uint32_t *mb = &l->mailbox;
		uint32_t claimed = atomic_load_explicit(mb, memory_order_acquire);
		if (claimed & MAILBOX_PUSH) {
			uint32_t idx = (claimed & ~MAILBOX_PUSH) - 1;
			/* Taken with a compare-and-swap: the receiver may take
			 * it back at the same time (xpi_shm_push_revoke). */
			if (idx >= NRNDV || s->rndv_req[idx] == NULL ||
			    !atomic_compare_exchange_strong(mb, &claimed, 0))
				return 0;
			xpi_shm_push_serve(s, peer, idx);
			return 1;
		}
		if (claimed == 0 || claimed > NRNDV || s->rndv_req[claimed - 1] == NULL)
			return 0;
		uint32_t set = atomic_load_explicit(&l->set, memory_order_relaxed);
		if (set >= NSET) {
			xpi_engine_peer_failed(s->ctx, peer, -EPROTO,
					       "lent a chunk set that does not exist");
			return 0;
		}
		atomic_store_explicit(mb, 0, memory_order_relaxed);
		p->tx_idx = (int)claimed - 1;
		p->tx_off = 0;
		p->tx_set = set;
		p->tx_chunk = 0; /* a lent set comes with every chunk empty */
		s->streams++;
	}
	xp_request_t *r = s->rndv_req[p->tx_idx];
	struct shm_set *b = &p->seg->sets[p->tx_set];
	int n = 0;
	while (p->tx_off < r->len) {
		uint32_t c = p->tx_chunk % NCHUNK;
		if (atomic_load_explicit(&b->chunk[c].state, memory_order_acquire) != 0)
			break; /* the receiver has not emptied it yet */
		uint64_t k = r->len - p->tx_off < CHUNK ? r->len - p->tx_off : CHUNK;
		memcpy(b->data[c], (const uint8_t *)r->buf + p->tx_off, k);
		atomic_store_explicit(&b->chunk[c].state, CHUNK_FULL | (uint32_t)k,
				      memory_order_release);
		p->tx_off += k;
		p->tx_chunk++;
		n++;
	}
	if (n != 0)
		xpi_shm_notify(p);
	if (p->tx_off == r->len) {
		/* All of it is in the chunks: the user's buffer is free. */
		rndv_release(s, (uint32_t)p->tx_idx);
		p->tx_idx = -1;
		s->streams--;
		xpi_request_complete(r, 0);
		xpi_request_put(r);
		n++;
	}
	return n;
}

/* Receiver: payload @x from @src is in; the next in line goes on. */
static int rx_done(struct xpi_shm *s, int src, struct shm_rx *x)
{
	xpi_dlist_remove(&x->link);
	if (x->rreq != NULL) /* NULL: its receive gave up (shm_rndv_abort) */
		xpi_engine_rndv_done(s->ctx, x->rreq, 0);
	free(x);
	claim_next(s, src);
	return 1;
}

/* Receiver: copies filled chunks from @src into the claimed receive. */
static int pump_rx(struct xpi_shm *s, int src)
{
	struct shm_peer *p = &s->peers[src];
	if (xpi_dlist_empty(&p->rx))
		return 0;
	struct shm_rx *x = xpi_container_of(p->rx.next, struct shm_rx, link);
	if (!x->claimed)
		return 0;
	if (x->split) {
		int rc = xpi_shm_split_progress(s, src, x);
		if (rc == 0)
			return 0;
		s->streams--;
		if (rc < 0) {
			start_stream(s, src, x); /* the chunks carry it all */
			return 1;
		}
		return rx_done(s, src, x);
	}
	struct shm_set *b = &s->mine->sets[p->rx_set];
	int n = 0;
	while (x->got < x->len) {
		uint32_t c = p->rx_chunk % NCHUNK;
		uint32_t st = atomic_load_explicit(&b->chunk[c].state, memory_order_acquire);
		if (!(st & CHUNK_FULL))
			break;
		uint64_t k = st & ~CHUNK_FULL;
		if (k > CHUNK || k > x->len - x->got) {
			/* Fails @x too (shm_peer_lost): it is gone now. */
			xpi_engine_peer_failed(s->ctx, src, -EPROTO,
					       "wrote a malformed chunk to shared memory");
			return n;
		}
		/* A truncated receive keeps what fits and drops the rest. */
		if (x->got < x->cap) {
			uint64_t fit = x->cap - x->got < k ? x->cap - x->got : k;
			memcpy(x->dst + x->got, b->data[c], fit);
		}
		x->got += k;
		atomic_store_explicit(&b->chunk[c].state, 0, memory_order_release);
		p->rx_chunk++;
		n++;
	}
	if (n != 0)
		xpi_shm_notify(p); /* room for the sender */
	if (x->got == x->len) {
		s->streams--;
		release_set(s, src);
		n += rx_done(s, src, x);
	}
	return n;
}

#define POLL_BATCH 64

/* What a peer may write to our FIFO. */
static const struct xpi_slot_limits shm_slot_limits = {
	.inline_max = SHM_INLINE_MAX,
	.rts_index_max = NRNDV,
};

static void fifo_malformed(struct xpi_shm *s, int src, const char *why)
{
	char text[160];
	snprintf(text, sizeof(text), "wrote a malformed message to shared memory (%s)", why);
	xpi_engine_peer_failed(s->ctx, src, -EPROTO, text);
}

/* The rank a slot names, read once; -1 unless it is a peer we serve. */
static int slot_sender(struct xpi_shm *s, const struct xpi_slot *slot)
{
	int src = slot->src[0] | slot->src[1] << 8 | slot->src[2] << 16;
	if (src >= s->ctx->size || src == s->ctx->rank || !s->peers[src].agreed)
		return -1;
	return src;
}

/*
 * Reads what our FIFO holds, in order. A slot that does not parse is
 * charged to the rank it names (any peer can write anywhere in our
 * segment, so the name is its word); we step over it one slot at a time.
 * Messages of a lost peer are dropped, as the engine would.
 */
static int poll_fifo(struct xpi_shm *s)
{
	struct shm_fifo *f = &s->mine->fifo;
	struct xpi_slot *slot;
	int n = 0;
	for (; n < POLL_BATCH && (slot = shm_fifo_peek(f, s->cons_pos)) != NULL; n++) {
		/* The peer can still write the shared memory, so every field
		 * that matters is read from it once, by the parser, into @sm,
		 * checked there and used from there (a length checked in the
		 * slot could change before use). The payload bytes are read in
		 * place: the peer can only spoil its own message with them. */
		struct xpi_slot_msg sm;
		const char *why = NULL;
		if (xpi_slot_parse((const uint8_t *)slot, sizeof(*slot), &shm_slot_limits, &sm,
				   &why) < 0) {
			int src = slot_sender(s, slot);
			s->cons_pos++;
			if (src >= 0)
				fifo_malformed(s, src, why);
			else
				xpi_log(XPI_LOG_WARN,
					"rank %d: dropped a malformed slot of shared memory (%s) "
					"naming no peer",
					s->ctx->rank, why);
			continue;
		}
		int src = sm.src;
		if (src >= s->ctx->size || src == s->ctx->rank || !s->peers[src].agreed) {
			xpi_log(XPI_LOG_WARN,
				"rank %d: dropped a message in shared memory naming rank %d, "
				"which is no peer of ours there",
				s->ctx->rank, src);
			s->cons_pos += sm.nslots;
			continue;
		}
		/* Its first message here: we serve it from now on (its
		 * credit, our chunks, our bell for it need its segment). */
		if (s->peers[src].dead || xpi_shm_ensure(s, src) < 0) {
			s->cons_pos += sm.nslots;
			continue;
		}
		if (!xpi_engine_comm_valid(s->ctx, sm.comm)) {
			s->cons_pos += sm.nslots;
			fifo_malformed(s, src, "communicator id out of range");
			continue;
		}
		struct xpi_msg m;
		m.desc_len = 0; /* set field by field: the store is not cleared */
		m.u.key.comm = sm.comm;
		m.u.key.src = src;
		m.u.key.tag = sm.tag;
		m.u.key.mask = 0;
		m.kind = sm.kind;
		m.tl = (uint8_t)s->tl_index;
		m.sized = false;
		m.peer_seq = sm.peer_seq;
		m.len = sm.len;
		m.data = slot->u.data;
		m.buf = NULL;
		m.rndv = NULL;
		if (sm.kind == XPI_MSG_RTS) {
			/* The ids fit in the pointer: they travel with the message. */
			m.rndv = (void *)(uintptr_t)sm.word;
		} else if (sm.nslots > 1) {
			if (xpi_slots_gather(f->slots, SHM_FIFO_SLOTS - 1, s->cons_pos, &sm, m.data,
					     s->scratch) < 0) {
				s->cons_pos += sm.nslots;
				fifo_malformed(s, src, "a continuation slot was never written");
				continue;
			}
			m.data = s->scratch;
		}
		xpi_engine_deliver(s->ctx, &m);
		s->cons_pos += sm.nslots;
	}
	/* The senders look at how far we read only when they find the FIFO
	 * full: tell them when it ran dry or a quarter of it was read. */
	if (s->cons_pos != s->cons_published &&
	    (n < POLL_BATCH || s->cons_pos - s->cons_published >= SHM_FIFO_SLOTS / 4)) {
		atomic_store_explicit(&f->head_pub, s->cons_pos, memory_order_release);
		s->cons_published = s->cons_pos;
	}
	return n;
}

/* Gives back the eager credit the engine returned since we last looked,
 * each peer's in its lane, as soon as it changed: a sender may be waiting
 * for it with nothing else to send us. */
static void return_credit_slow(struct xpi_shm *s)
{
	xp_context_t *ctx = s->ctx;
	s->credit_seen = ctx->eager_returned_total;
	for (int i = 0; i < s->npolled; i++) {
		int q = s->polled[i];
		uint64_t r = ctx->peers[q].eager_returned;
		if (r != s->peers[q].credit_published) {
			atomic_store_explicit(&s->mine->lanes[q].credit_pub, r,
					      memory_order_release);
			s->peers[q].credit_published = r;
		}
	}
}

/*
 * A sender that dies between claiming slots of our FIFO and publishing
 * them leaves a hole that would hold up every later message. Once the
 * next position has been claimed but not published for a second, and a
 * lost peer's note says it was claiming exactly there, we step over what
 * it claimed. A live sender publishes within microseconds of its claim.
 */
static void step_over_dead_claim(struct xpi_shm *s, int64_t now)
{
	struct shm_fifo *f = &s->mine->fifo;
	if (atomic_load_explicit(&f->tail, memory_order_acquire) == s->cons_pos ||
	    shm_fifo_peek(f, s->cons_pos) != NULL) {
		s->stuck_since_ns = 0;
		return;
	}
	if (s->stuck_since_ns == 0 || s->stuck_pos != s->cons_pos) {
		s->stuck_since_ns = now; /* stuck here from now */
		s->stuck_pos = s->cons_pos;
		return;
	}
	if (now - s->stuck_since_ns < 1000000000)
		return;
	/* A sender we never served (it died before its first message was
	 * out) is lost now if its process is gone. */
	for (int q = 0; q < s->ctx->size; q++) {
		struct shm_peer *pr = &s->peers[q];
		uint64_t note = pr->agreed && pr->seg == NULL && !pr->dead ?
					atomic_load_explicit(&s->mine->lanes[q].note,
							     memory_order_relaxed) :
					0;
		if (note != 0 && (uint32_t)note == s->cons_pos && xpi_shm_pid_gone(pr->pid))
			xpi_shm_peer_died(s, q, "exited or died (its process is gone)");
	}
	for (int q = 0; q < s->ctx->size; q++) {
		if (!s->peers[q].dead || !s->peers[q].agreed)
			continue;
		uint64_t note = atomic_load_explicit(&s->mine->lanes[q].note, memory_order_relaxed);
		uint32_t nslots = (uint32_t)(note >> 32);
		if ((uint32_t)note != s->cons_pos || nslots == 0 ||
		    nslots > xpi_slots_for(SHM_INLINE_MAX))
			continue;
		xpi_log(XPI_LOG_WARN,
			"rank %d: stepping over %u slots of shared memory that rank %d claimed "
			"and never wrote (it was lost)",
			s->ctx->rank, nslots, q);
		s->cons_pos += nslots;
		s->stuck_since_ns = 0;
		return;
	}
}

/* A peer whose process is gone fails what involves it (shm_peer_lost). */
void xpi_shm_peer_died(struct xpi_shm *s, int peer, const char *why)
{
	struct shm_peer *p = &s->peers[peer];
	/* One that finalized is lost but not the cause of anything (the
	 * collectives name the one that died, not one that left after it). */
	if (p->seg != NULL && atomic_load_explicit(&p->seg->finalized, memory_order_acquire))
		s->ctx->peers[peer].finalized = true;
	xpi_engine_peer_failed(s->ctx, peer, -ECONNRESET, why);
}

/*
 * The engine lost @peer, whoever noticed (our FIFO or chunks holding
 * garbage, its process gone, its TCP connection broken): the receives
 * matched to its announcements and our sends it announced or claimed fail
 * here, whatever state their streams are in, and we touch its memory no
 * more. A peer that is alive but wrote garbage may still write into our
 * segment; we no longer read it.
 */
static void shm_peer_lost(void *tlp, int peer)
{
	struct xpi_shm *s = tlp;
	struct shm_peer *p = &s->peers[peer];
	if (p->dead)
		return;
	p->dead = true;
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&p->rx)) != NULL) {
		struct shm_rx *x = xpi_container_of(l, struct shm_rx, link);
		if (x->claimed)
			s->streams--;
		if (x->rreq != NULL)
			xpi_engine_fail_request(s->ctx, x->rreq, peer);
		free(x);
	}
	p->set_wanted = false;
	release_set(s, peer);
	if (p->tx_idx >= 0) {
		p->tx_idx = -1;
		s->streams--;
	}
	while (!xpi_dlist_empty(&p->tx_out)) {
		xp_request_t *r = xpi_container_of(p->tx_out.next, xp_request_t, tl_link);
		rndv_release(s, (uint32_t)r->tl_id);
		xpi_engine_fail_request(s->ctx, r, peer);
		xpi_request_put(r);
	}
}

/* Marks dead the peers whose process has ended: one poll() over the live
 * peers' pidfds (readable once the process is gone), kill(pid, 0) for
 * those without one. */
static void check_liveness(struct xpi_shm *s)
{
	int n = 0;
	for (int i = 0; i < s->npolled; i++) {
		const struct shm_peer *p = &s->peers[s->polled[i]];
		if (p->dead)
			continue;
		if (p->pidfd >= 0)
			s->pidfds[n++] = (struct pollfd){ .fd = p->pidfd, .events = POLLIN };
		else if (kill(p->pid, 0) < 0 && errno == ESRCH)
			xpi_shm_peer_died(s, s->polled[i], "exited or died (its process is gone)");
	}
	if (n == 0 || poll(s->pidfds, (nfds_t)n, 0) <= 0)
		return;
	for (int i = 0; i < s->npolled; i++) {
		struct shm_peer *p = &s->peers[s->polled[i]];
		for (int j = 0; j < n; j++)
			if (!p->dead && s->pidfds[j].fd == p->pidfd && s->pidfds[j].revents != 0)
				xpi_shm_peer_died(s, s->polled[i],
						  "exited or died (its process is gone)");
	}
}

/* The peers whose segment could not be mapped on first need
 * (xpi_shm_connect) are lost to the engine, from progress: the send that
 * found it may not re-enter the engine. */
static void tell_unreachable(struct xpi_shm *s)
{
	s->unreachable_news = false;
	for (int p = 0; p < s->ctx->size; p++) {
		struct shm_peer *pr = &s->peers[p];
		if (pr->unreachable && !pr->dead)
			xpi_engine_peer_failed(s->ctx, p, -ECONNRESET, pr->lost_why);
	}
}

/* At most every 100 ms, wherever it is called from: a waiter that sleeps on
 * another transport, or a program that only polls, must notice too. */
static void maybe_check_liveness(struct xpi_shm *s)
{
	int64_t now = xpi_now_ns();
	if (now >= s->next_liveness_ns) {
		check_liveness(s);
		/* Also with no loss known yet: the sender of a hole may be
		 * one this rank never served, whose death it has not seen. */
		step_over_dead_claim(s, now);
		s->next_liveness_ns = now + 100000000;
	}
}

static inline void return_credit(struct xpi_shm *s)
{
	if (xpi_unlikely(s->ctx->eager_returned_total != s->credit_seen))
		return_credit_slow(s);
}

/*
 * Every round of a spinning waiter comes here, and how long an idle round
 * takes is how late the next message is seen: the empty FIFO, no stream
 * and no credit to give back cost a few loads and no call (a call to the
 * poll on every round made 8 B one-way latency 7% longer).
 */
static int shm_progress(void *tlp)
{
	struct xpi_shm *s = tlp;
	if (xpi_unlikely(s->unreachable_news))
		tell_unreachable(s);
	if ((++s->polls & 1023) == 0)
		maybe_check_liveness(s); /* a clock read every 1024 calls */
	int n = 0;
	if (shm_fifo_peek(&s->mine->fifo, s->cons_pos) != NULL)
		n = poll_fifo(s);
	for (int i = 0; i < s->nactive;) {
		int peer = s->active[i];
		struct shm_peer *p = &s->peers[peer];
		if (p->dead || (xpi_dlist_empty(&p->tx_out) && xpi_dlist_empty(&p->rx))) {
			p->active = false;
			s->active[i] = s->active[--s->nactive];
			continue;
		}
		if (!xpi_dlist_empty(&p->tx_out)) {
			n += pump_tx(s, peer);
			n += reap_direct(s, peer);
		}
		n += pump_rx(s, peer);
		i++;
	}
	return_credit(s);
	return n;
}

/* True if a peer has done something we have not acted on yet. */
static bool work_waiting(struct xpi_shm *s)
{
	/* Claimed, if not yet published: the sender may have looked at our
	 * sleeper count before we raised it (fifo_sleeper), and then it will
	 * not ring for it. */
	if (atomic_load_explicit(&s->mine->fifo.tail, memory_order_seq_cst) != s->cons_pos ||
	    shm_fifo_peek(&s->mine->fifo, s->cons_pos) != NULL)
		return true;
	for (int i = 0; i < s->nactive; i++) {
		int peer = s->active[i];
		struct shm_peer *p = &s->peers[peer];
		if (p->dead)
			continue;
		if (!xpi_dlist_empty(&p->rx)) { /* a chunk for our claimed receive? */
			const struct shm_rx *x = xpi_container_of(p->rx.next, struct shm_rx, link);
			if (x->split && x->claimed) { /* our part to read, or its answer? */
				const struct shm_push *q = &s->mine->lanes[peer].push;
				uint32_t done = atomic_load(&q->done) & ~PUSH_FAILED;
				if (!x->read_done || done == x->push_seq)
					return true;
			} else if (x->claimed && atomic_load(&s->mine->sets[p->rx_set]
								      .chunk[p->rx_chunk % NCHUNK]
								      .state) &
							 CHUNK_FULL) {
				return true;
			}
		}
		if (!xpi_dlist_empty(&p->tx_out)) { /* a claim, or a chunk emptied? */
			const struct shm_lane *l = lane_to(s, peer);
			if (atomic_load(&l->events) != p->events_seen)
				return true;
			if (p->tx_idx < 0) {
				if (atomic_load(&l->mailbox) != 0)
					return true;
				continue;
			}
			const struct shm_set *b = &p->seg->sets[p->tx_set];
			if (atomic_load(&b->chunk[p->tx_chunk % NCHUNK].state) == 0)
				return true;
		}
	}
	return false;
}

/* Sleeps on the doorbell and on the live peers' pidfds, so a peer's death
 * wakes us as a message does. */
static int shm_sleep_prepare(void *tlp, struct pollfd *fds, int max)
{
	struct xpi_shm *s = tlp;
	if (s->bell_fd < 0 || max < 1)
		return -ENOTSUP;
	check_liveness(s); /* none of the pidfds below is readable yet */
	/* A hole a lost sender may have left in our FIFO: no one would ring
	 * for it, so we stay awake until it is filled or stepped over. */
	struct shm_fifo *f = &s->mine->fifo;
	if (s->ctx->nfailed != 0 &&
	    atomic_load_explicit(&f->tail, memory_order_acquire) != s->cons_pos) {
		maybe_check_liveness(s);
		return -EAGAIN;
	}
	atomic_fetch_add(&s->mine->sleeping, 1); /* seq_cst: before the looks below */
	/* Look once more after saying we sleep, so what came in between (a
	 * message, a filled or emptied chunk, a claim) is not slept on. */
	if (work_waiting(s)) {
		atomic_fetch_sub(&s->mine->sleeping, 1);
		return -EAGAIN;
	}
	int n = 0;
	fds[n++] = (struct pollfd){ .fd = s->bell_fd, .events = POLLIN };
	for (int i = 0; i < s->npolled && n < max; i++) {
		const struct shm_peer *p = &s->peers[s->polled[i]];
		if (!p->dead && p->pidfd >= 0)
			fds[n++] = (struct pollfd){ .fd = p->pidfd, .events = POLLIN };
	}
	return n;
}

static void shm_sleep_done(void *tlp)
{
	struct xpi_shm *s = tlp;
	uint8_t drain[64];
	atomic_fetch_sub(&s->mine->sleeping, 1);
	while (read(s->bell_fd, drain, sizeof(drain)) == (ssize_t)sizeof(drain))
		;
}

static bool shm_tx_pending(void *tlp)
{
	(void)tlp;
	return false; /* a message is in the peer's FIFO once sent */
}

/* A receive names @peer (transport.h): connect now, so that its death is
 * seen as the receive waits, and one that died already fails it at once. */
static void shm_peer_wanted(void *tlp, int peer)
{
	struct xpi_shm *s = tlp;
	struct shm_peer *p = &s->peers[peer];
	if (p->dead || !p->agreed)
		return;
	if (xpi_shm_ensure(s, peer) < 0)
		tell_unreachable(s);
	else if (xpi_shm_pid_gone(p->pid))
		xpi_shm_peer_died(s, peer, "exited or died (its process is gone)");
}

const struct xpi_tl_ops xpi_shm_ops = {
	.name = "shm",
	/* Inside the FIFO an eager message needs no handshake; past 4 KiB the
	 * chunked stream, each side copying on its own core, wins. */
	.rndv_threshold = SHM_INLINE_MAX + 1,
	.eager_max = SHM_INLINE_MAX, /* larger payloads never go inside the FIFO */
	.mem_reg = xpi_tl_mem_reg_none,
	.mem_dereg = xpi_tl_mem_dereg_none,
	.send_eager = shm_send_eager,
	.send_rts = shm_send_rts,
	.rndv_offer = shm_rndv_offer,
	.send_cancel = shm_send_cancel,
	.rndv_fetch = shm_rndv_fetch,
	.rndv_abort = shm_rndv_abort,
	.msg_release = shm_msg_release,
	.peer_lost = shm_peer_lost,
	.peer_wanted = shm_peer_wanted,
	.progress = shm_progress,
	.sleep_prepare = shm_sleep_prepare,
	.sleep_done = shm_sleep_done,
	.tx_pending = shm_tx_pending,
	.destroy = xpi_shm_destroy,
};
