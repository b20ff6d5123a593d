/* SPDX-License-Identifier: MIT */
/*
 * Transfers: isend, irecv, test and iflush, and the request slots behind
 * them.
 *
 * Each comm has a fixed array of request slots, made with it: NCCL's bound
 * on requests in flight (XNCCL_MAX_REQUESTS), times maxRecvs on the send
 * side, where each buffer of a grouped receive is a send of its own. When
 * all are taken, isend and irecv give NCCL no request, which it takes as
 * "try again", so a comm's memory is bounded and nothing is allocated on
 * the data path. A slot holds one xport request per buffer.
 *
 * Matching: NCCL matches a send to the first grouped receive posted, its
 * tag choosing the buffer; xport matches each endpoint's messages to its
 * receives in the order they were posted, among those whose tag fits. One
 * receive per buffer, with its exact tag, is therefore the same rule.
 *
 * A request that fails is reported at once; its other buffers are
 * cancelled, and the slot is an orphan until xport lets go of them (found
 * again when slots run out, and at close).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>

#include "plugin.h"

/* How long closing a comm waits for a request of its closed endpoint: they
 * end at once (-ECANCELED), so this only bounds a surprise. */
#define DRAIN_WAIT_MS 1000

static inline struct xpn_req *slot_at(struct xpn_comm *c, uint32_t i)
{
	return (struct xpn_req *)(c->slots + (size_t)i * c->stride);
}

int xpn_slots_init(struct xpn_comm *c, uint32_t nslots, uint32_t nsub)
{
	c->nslots = nslots;
	c->nsub = nsub;
	c->stride = (uint32_t)(sizeof(struct xpn_req) + nsub * sizeof(struct xpn_sub));
	c->slots = calloc(nslots, c->stride);
	c->free_stack = calloc(nslots, sizeof(*c->free_stack));
	if (c->slots == NULL || c->free_stack == NULL) {
		xpn_slots_fini(c);
		return -ENOMEM;
	}
	/* Stacked from the last, so slot 0 is taken first. */
	for (uint32_t i = 0; i < nslots; i++) {
		struct xpn_req *r = slot_at(c, i);
		r->index = (uint16_t)i;
		r->comm = c;
		c->free_stack[nslots - 1 - i] = (uint16_t)i;
	}
	c->nfree = nslots;
	return 0;
}

void xpn_slots_fini(struct xpn_comm *c)
{
	free(c->slots);
	free(c->free_stack);
	c->slots = NULL;
	c->free_stack = NULL;
}

static void slot_give(struct xpn_req *r)
{
	struct xpn_comm *c = r->comm;
	r->magic = 0;
	r->state = XPN_REQ_FREE;
	c->free_stack[c->nfree++] = r->index;
}

/* Frees the orphans whose buffers xport has let go of. */
static void orphans_reap(struct xpn_comm *c)
{
	for (uint32_t i = 0; i < c->nslots && c->norphans != 0; i++) {
		struct xpn_req *r = slot_at(c, i);
		if (r->state != XPN_REQ_ORPHAN)
			continue;
		bool left = false;
		for (int k = 0; k < r->n; k++)
			if (r->sub[k].xr != NULL && xp_test(&r->sub[k].xr, NULL) == 0)
				left = true;
		if (!left) {
			c->norphans--;
			slot_give(r);
		}
	}
}

static struct xpn_req *slot_take(struct xpn_comm *c)
{
	if (c->nfree == 0 && c->norphans != 0)
		orphans_reap(c);
	if (c->nfree == 0)
		return NULL;
	struct xpn_req *r = slot_at(c, c->free_stack[--c->nfree]);
	r->magic = XPN_REQ_LIVE;
	r->state = XPN_REQ_ACTIVE;
	r->n = 0;
	r->err = 0;
	return r;
}

/* Ends @r after a failure NCCL is told of: its buffers still in xport's
 * hands are cancelled and the slot waits for them as an orphan. */
static void slot_fail(struct xpn_req *r)
{
	bool left = false;
	for (int k = 0; k < r->n; k++)
		if (r->sub[k].xr != NULL) {
			xp_cancel(r->sub[k].xr);
			left = true;
		}
	if (!left) {
		slot_give(r);
		return;
	}
	r->magic = 0; /* NCCL may not test it again */
	r->state = XPN_REQ_ORPHAN;
	r->comm->norphans++;
}

void xpn_slots_drain(struct xpn_comm *c)
{
	if (c->slots == NULL)
		return;
	for (uint32_t i = 0; i < c->nslots; i++) {
		struct xpn_req *r = slot_at(c, i);
		if (r->state == XPN_REQ_FREE)
			continue;
		for (int k = 0; k < r->n; k++)
			if (r->sub[k].xr != NULL) {
				xp_cancel(r->sub[k].xr);
				xp_wait(&r->sub[k].xr, DRAIN_WAIT_MS, NULL);
			}
		r->state = XPN_REQ_FREE;
		r->magic = 0;
	}
}

/* NCCL's tags are ints, used as they are: xport compares all 64 bits. */
static inline uint64_t xpn_tag(int tag)
{
	return (uint64_t)(uint32_t)tag;
}

xnccl_result_t xpn_isend(void *send_comm, void *data, size_t size, int tag, void **request)
{
	struct xpn_comm *c = (struct xpn_comm *)xpn_obj_check(send_comm, XPN_SEND);
	if (c == NULL || !c->connected || request == NULL) {
		XPN_WARN("NET/xport : isend: %p is not a send comm of ours", send_comm);
		return XNCCL_INTERNAL_ERROR;
	}
	*request = NULL;
	struct xpn_req *r = slot_take(c);
	if (r == NULL)
		return XNCCL_OK; /* all slots in flight: NCCL tries again */
	r->n = 1;
	r->sub[0] = (struct xpn_sub){ .xr = NULL, .len = size };
	int rc = xp_ep_isend(c->ep, data, size, xpn_tag(tag), &r->sub[0].xr);
	if (rc < 0) {
		slot_give(r);
		return XPN_FAIL(rc, "isend");
	}
	xpn_idle_note();
	*request = r;
	return XNCCL_OK;
}

xnccl_result_t xpn_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
			 void **request)
{
	struct xpn_comm *c = (struct xpn_comm *)xpn_obj_check(recv_comm, XPN_RECV);
	if (c == NULL || request == NULL) {
		XPN_WARN("NET/xport : irecv: %p is not a receive comm of ours", recv_comm);
		return XNCCL_INTERNAL_ERROR;
	}
	if (n < 1 || (uint32_t)n > c->nsub || data == NULL || sizes == NULL || tags == NULL) {
		XPN_WARN("NET/xport : irecv: %d buffers (1 to %u, with their sizes and tags)", n,
			 c->nsub);
		return XNCCL_INTERNAL_ERROR;
	}
	/* *request may hold NCCL's "completion optional" mark: a value, not
	 * a request. We complete every receive as usual and overwrite it. */
	*request = NULL;
	struct xpn_req *r = slot_take(c);
	if (r == NULL)
		return XNCCL_OK; /* all slots in flight: NCCL tries again */
	r->n = (uint8_t)n;
	for (int k = 0; k < n; k++)
		r->sub[k] = (struct xpn_sub){ .xr = NULL, .len = 0 };
	for (int k = 0; k < n; k++) {
		int rc = xp_ep_irecv(c->ep, data[k], sizes[k], xpn_tag(tags[k]), XP_TAG_EXACT,
				     &r->sub[k].xr);
		if (rc < 0) {
			xnccl_result_t res = XPN_FAIL(rc, "irecv");
			slot_fail(r);
			return res;
		}
	}
	xpn_idle_note();
	*request = r;
	return XNCCL_OK;
}

xnccl_result_t xpn_iflush(void *recv_comm, int n, void **data, const int *sizes, void **request)
{
	if (xpn_obj_check(recv_comm, XPN_RECV) == NULL || request == NULL) {
		XPN_WARN("NET/xport : iflush: %p is not a receive comm of ours", recv_comm);
		return XNCCL_INTERNAL_ERROR;
	}
	/* Host memory is whole once the receive completes: nothing to wait
	 * for, and no request to test. */
	*request = NULL;
	return XNCCL_OK;
}

xnccl_result_t xpn_test(void *request, int *done, int *sizes)
{
	struct xpn_req *r = request;
	if (r == NULL || done == NULL || r->magic != XPN_REQ_LIVE || r->state != XPN_REQ_ACTIVE) {
		XPN_WARN("NET/xport : test: %p is not a request in flight (tested after it was "
			 "done?)",
			 request);
		return XNCCL_INTERNAL_ERROR;
	}
	*done = 0;
	xpn_idle_note();
	bool recv = r->comm->obj.kind == XPN_RECV;
	bool pending = false;
	for (int k = 0; k < r->n; k++) {
		if (r->sub[k].xr == NULL)
			continue;
		xp_status_t st;
		int rc = xp_test(&r->sub[k].xr, &st);
		if (rc == 0) {
			pending = true;
			continue;
		}
		/* A receive reports the message's length, which may be less
		 * than its buffer (and, truncated, more). */
		if (recv)
			r->sub[k].len = st.length;
		if (rc < 0) {
			/* Logged now, while xport's detail is this failure's. */
			xnccl_result_t res = XPN_FAIL(rc, recv ? "receive" : "send");
			slot_fail(r);
			return res;
		}
	}
	if (pending)
		return XNCCL_OK;
	/* test's sizes are ints in every version, while transfers may be
	 * up to maxP2pBytes: one beyond INT_MAX is reported as INT_MAX. */
	if (sizes != NULL)
		for (int k = 0; k < r->n; k++)
			sizes[k] = r->sub[k].len > INT_MAX ? INT_MAX : (int)r->sub[k].len;
	slot_give(r);
	*done = 1;
	return XNCCL_OK;
}
