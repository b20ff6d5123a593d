/* SPDX-License-Identifier: MIT */
/*
 * The "self" transport: messages a rank sends to itself when its other
 * peers are served by a network transport. The sender is the owner of the
 * rank's engine, so a message is handed to the engine on the spot; an
 * eager payload is copied once (straight into a posted receive, or into a
 * queued copy), a rendezvous payload once when a receive takes it.
 *
 * Also home of the rendezvous steps shared by transports whose ranks see
 * each other's memory (self, in-process): the receiver claims the send
 * with a compare-and-swap on its state and copies from the sender's
 * buffer; a sender that times out withdraws with the same CAS.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "engine.h"
#include "self.h"

int xpi_local_send_cancel(void *tl, xp_request_t *sreq)
{
	(void)tl;
	int expected = XPI_RNDV_PENDING;
	if (atomic_compare_exchange_strong(&sreq->rndv_state, &expected, XPI_RNDV_WITHDRAWN))
		return 0;
	return -EBUSY;
}

int xpi_local_rndv_fetch(void *tl, struct xpi_msg *msg, void *dst, size_t cap, xp_request_t *rreq,
			 const struct xpi_reg *dst_reg)
{
	(void)dst_reg; /* one copy from the sender's buffer */
	(void)tl;
	xp_request_t *sreq = msg->rndv;
	int expected = XPI_RNDV_PENDING;
	if (!atomic_compare_exchange_strong(&sreq->rndv_state, &expected, XPI_RNDV_CLAIMED)) {
		xpi_request_put(sreq); /* withdrawn by its sender */
		return -ECANCELED;
	}
	if (cap != 0)
		memcpy(dst, sreq->buf, cap); /* the one copy of a rendezvous message */
	/* The send completes on this thread, not its rank's: a thread of that
	 * rank asleep waiting for it must be woken (read the context first,
	 * the request may be freed the moment it completes). */
	xp_context_t *sender = sreq->ctx;
	xpi_request_complete(sreq, 0);
	xpi_request_put(sreq);
	/* Ordered after the completion by the sleeper's barrier (the
	 * in-process sleep_prepare's membarrier) or, without it, a fence. */
	if (sender != rreq->ctx) {
		if (xpi_likely(sender->sleepers_barrier))
			atomic_signal_fence(memory_order_seq_cst);
		else
			atomic_thread_fence(memory_order_seq_cst);
		if (xpi_unlikely(atomic_load_explicit(&sender->sleepers, memory_order_relaxed) !=
				 0))
			xpi_engine_wake(sender);
	}
	return 0;
}

void xpi_local_msg_release(void *tl, struct xpi_msg *msg)
{
	(void)tl;
	if (msg->kind == XPI_MSG_RTS)
		xpi_request_put(msg->rndv);
}

struct xpi_self {
	xp_context_t *ctx;
	int tl_index;
	uint64_t eager_sent; /* eager cost sent to ourselves, for the credit check */
};

static void deliver(struct xpi_self *s, const struct xpi_msg_hdr *h, uint8_t kind, const void *data,
		    void *sreq)
{
	struct xpi_msg m;
	m.desc_len = 0; /* set field by field: the store is not cleared */
	m.u.key.comm = h->comm;
	m.u.key.src = h->src;
	m.u.key.tag = h->tag;
	m.u.key.mask = 0;
	m.kind = kind;
	m.tl = (uint8_t)s->tl_index;
	m.sized = false;
	m.peer_seq = h->peer_seq;
	m.len = h->len;
	m.data = data;
	m.buf = NULL;
	m.rndv = sreq;
	xpi_engine_deliver(s->ctx, &m);
}

static int self_send_eager(void *tlp, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	struct xpi_self *s = tlp;
	(void)peer;
	uint64_t cost = xpi_eager_cost(h->len);
	uint64_t returned = s->ctx->peers[s->ctx->rank].eager_returned;
	if (s->eager_sent + cost - returned > s->ctx->eager_credit_per_peer)
		return -ENOBUFS;
	s->eager_sent += cost;
	deliver(s, h, XPI_MSG_INLINE, data, NULL);
	return 0;
}

static int self_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			 const struct xpi_reg *reg, const struct xpi_rndv_desc *desc)
{
	if (desc != NULL)
		return -ENOTSUP; /* carries no other lane's descriptors yet */
	(void)peer;
	(void)reg;
	xpi_request_get(sreq); /* dropped when a receive takes or drops it */
	deliver(tlp, h, XPI_MSG_RTS, NULL, sreq);
	return 0;
}

static void self_destroy(void *tlp)
{
	free(tlp);
}

const struct xpi_tl_ops xpi_self_ops = {
	.name = "self",
	.rndv_threshold = 4096,
	.eager_max = SIZE_MAX,
	.mem_reg = xpi_tl_mem_reg_none,
	.mem_dereg = xpi_tl_mem_dereg_none,
	.send_eager = self_send_eager,
	.send_rts = self_send_rts,
	.rndv_offer = xpi_tl_rndv_offer_none,
	.send_cancel = xpi_local_send_cancel,
	.rndv_fetch = xpi_local_rndv_fetch,
	.rndv_abort = xpi_tl_rndv_abort_none,
	.msg_release = xpi_local_msg_release,
	.progress = NULL, /* everything happened when it was sent: nothing to poll */
	.sleep_prepare = xpi_tl_sleep_prepare_idle,
	.sleep_done = xpi_tl_sleep_done_none,
	.tx_pending = xpi_tl_tx_pending_none,
	.destroy = self_destroy,
};

int xpi_self_attach(xp_context_t *ctx)
{
	struct xpi_self *s = calloc(1, sizeof(*s));
	if (s == NULL)
		return -ENOMEM;
	s->ctx = ctx;
	s->tl_index = ctx->ntls;
	int rc = xpi_context_add_tl(ctx, &xpi_self_ops, s);
	if (rc < 0) {
		free(s);
		return rc;
	}
	xpi_context_set_peer_tl(ctx, ctx->rank, s->tl_index);
	return 0;
}
