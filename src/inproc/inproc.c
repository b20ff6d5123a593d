/* SPDX-License-Identifier: MIT */
/* The in-process transport's ops (see inproc.h). */
#include <errno.h>
#include <linux/membarrier.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

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
	*out = ring;
	return xpi_slot_ring_claim(&ring->r, nslots);
}

/*
 * Wakes @peer if a thread of it sleeps. What we just published must be
 * ordered before the look at its sleeper count, as a sleeper counts itself
 * before it looks at its rings (inproc_sleep_prepare), so one of the two
 * always sees the other. With membarrier the sleeper pays for that order
 * (it makes every running thread of the process pass a full barrier), and
 * the send path needs only the compiler's; without it, a fence here.
 */
static void notify(struct xpi_inproc *ip, int peer)
{
	if (xpi_likely(ip->job->asym_barrier))
		atomic_signal_fence(memory_order_seq_cst);
	else
		atomic_thread_fence(memory_order_seq_cst);
	if (xpi_unlikely(atomic_load_explicit(&ip->job->tls[peer].sleeping, memory_order_relaxed) !=
			 0))
		xpi_engine_wake(ip->job->ctxs[peer]);
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

	struct xp_buf *b = NULL;
	if (!inline_ && xpi_pool_get(ip->job->pools[peer], h->len, &b) < 0)
		return -ENOBUFS;
	/* One config per job: the receiver's credit per sender is ours too. */
	if (!xpi_slot_ring_spend_credit(&ring->r, h->len, ip->ctx->eager_credit_per_peer)) {
		if (b != NULL)
			xpi_buf_put(b);
		return -ENOBUFS;
	}
	if (inline_) {
		xpi_slot_ring_write(&ring->r, s, data, h->len);
		xpi_slot_ring_publish(&ring->r, s, h, XPI_MSG_INLINE, nslots);
		notify(ip, peer);
		return 0;
	}
	memcpy(b->data, data, h->len);
	b->len = h->len;
	s->u.buf = b;
	xpi_slot_ring_publish(&ring->r, s, h, XPI_MSG_BUF, 1);
	notify(ip, peer);
	return 0;
}

static int inproc_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			   const struct xpi_reg *reg, const struct xpi_rndv_desc *desc)
{
	if (desc != NULL)
		return -ENOTSUP; /* carries no other lane's descriptors yet */
	struct xpi_inproc *ip = tlp;
	struct xpi_ring *ring;
	struct xpi_slot *s = slot_claim(ip, peer, 1, &ring);
	if (s == NULL)
		return ring_to(ip, peer) == NULL ? -ENOMEM : -EAGAIN;
	if (reg != NULL)
		atomic_fetch_add_explicit(&ip->rts_registered, 1, memory_order_relaxed);
	xpi_request_get(sreq); /* dropped when the receiver fetches or drops it */
	s->u.sreq = sreq;
	xpi_slot_ring_publish(&ring->r, s, h, XPI_MSG_RTS, 1);
	notify(ip, peer); /* @sreq may be complete and gone now: not touched */
	return 0;
}

/* Polls at most this many slots of one ring per call, so one busy peer
 * cannot starve the others. */
#define POLL_BATCH 64

static int poll_ring(struct xpi_inproc *ip, struct xpi_ring *ring)
{
	struct xpi_slot_ring *r = &ring->r;
	struct xpi_slot *s;
	int n = 0;
	for (; n < POLL_BATCH && (s = xpi_slot_ring_peek(r)) != NULL; n++) {
		/* Field by field: zeroing the whole descriptor (its links and
		 * inline store) would cost more than the rest of the delivery. */
		struct xpi_msg m;
		m.desc_len = 0; /* set field by field: the store is not cleared */
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
		uint32_t nslots = xpi_slots_of(s);
		if (nslots > 1) {
			xpi_slot_ring_read(r, s, ip->scratch);
			m.data = ip->scratch;
		}
		m.buf = s->kind == XPI_MSG_BUF ? s->u.buf : NULL;
		m.rndv = s->kind == XPI_MSG_RTS ? s->u.sreq : NULL;
		xpi_engine_deliver(ip->ctx, &m);
		r->cons_pos += nslots;
	}
	xpi_slot_ring_publish_head(r, n < POLL_BATCH, ip->ctx->peers[ring->src].eager_returned);
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

/*
 * The rank's own wake fd, which every sleep polls, is the doorbell: senders
 * write it (notify) once they see the sleeper count. Nothing of ours to add
 * to the set, so 0 descriptors, unless a message is already waiting. Sends
 * that wait for room in a full ring are retried only by progress: while
 * there are any, the waiter yields instead of sleeping.
 */
static int inproc_sleep_prepare(void *tlp, struct pollfd *fds, int max)
{
	struct xpi_inproc *ip = tlp;
	(void)fds;
	(void)max;
	if (ip->ctx->npending != 0 || ip->ctx->wake_fd < 0)
		return -ENOTSUP;
	atomic_fetch_add(&ip->sleeping, 1); /* seq_cst: before the looks below */
	/* The context counted its sleeper already (xpi_engine_sleep): this
	 * barrier orders both counts before every sender's next look. */
	if (ip->job->asym_barrier &&
	    syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) != 0) {
		atomic_fetch_sub(&ip->sleeping, 1);
		return -ENOTSUP;
	}
	bool waiting = xpi_mpsc_maybe_nonempty(&ip->ctx->cmdq);
	for (int i = 0; i < ip->nin && !waiting; i++)
		waiting = xpi_slot_ring_peek(&ip->in[i]->r) != NULL;
	if (waiting) {
		atomic_fetch_sub(&ip->sleeping, 1);
		return -EAGAIN;
	}
	return 0;
}

static void inproc_sleep_done(void *tlp)
{
	struct xpi_inproc *ip = tlp;
	atomic_fetch_sub(&ip->sleeping, 1);
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
	.eager_max = SIZE_MAX, /* larger payloads go in a buffer of the receiver's pool */
	.mem_reg = inproc_mem_reg,
	.mem_dereg = inproc_mem_dereg,
	.send_eager = inproc_send_eager,
	.send_rts = inproc_send_rts,
	.rndv_offer = xpi_tl_rndv_offer_none,
	.send_cancel = xpi_local_send_cancel,
	.rndv_fetch = xpi_local_rndv_fetch,
	.rndv_abort = xpi_tl_rndv_abort_none,
	.msg_release = xpi_local_msg_release,
	.progress = inproc_progress,
	.sleep_prepare = inproc_sleep_prepare,
	.sleep_done = inproc_sleep_done,
	.tx_pending = xpi_tl_tx_pending_none,
	.destroy = inproc_destroy,
};

/* Releases what unread slots of a ring hold (job teardown). */
void xpi_ring_drain(struct xpi_ring *ring)
{
	struct xpi_slot *s;
	while ((s = xpi_slot_ring_peek(&ring->r)) != NULL) {
		if (s->kind == XPI_MSG_BUF)
			xpi_buf_put(s->u.buf);
		else if (s->kind == XPI_MSG_RTS)
			xpi_request_put(s->u.sreq);
		ring->r.cons_pos += xpi_slots_of(s);
	}
}
