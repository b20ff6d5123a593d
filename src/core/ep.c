/* SPDX-License-Identifier: MIT */
/* Endpoints: the public calls (xport.h), their slots and their addresses. */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "ep.h"
#include "log.h"

/* --- addresses --------------------------------------------------------------- */

void xpi_ep_addr_write(const struct xpi_ep_addr *a, uint8_t out[XP_EP_ADDR_BYTES])
{
	memset(out, 0, XP_EP_ADDR_BYTES);
	memcpy(out, XPI_EP_MAGIC, 4);
	out[4] = XPI_EP_VERSION;
	out[5] = a->flags;
	memcpy(out + 8, a->card, XPI_EP_CARD_LEN);
	memcpy(out + 32, a->secret, XPI_EP_SECRET_LEN);
	memcpy(out + 64, a->host, XPI_EP_HOST_LEN);
}

int xpi_ep_addr_parse(const uint8_t in[XP_EP_ADDR_BYTES], struct xpi_ep_addr *out, const char **why)
{
	if (memcmp(in, XPI_EP_MAGIC, 4) != 0) {
		*why = "it is not an xport endpoint address (no magic)";
		return -EINVAL;
	}
	if (in[4] != XPI_EP_VERSION) {
		*why = "it is an address of another xport version";
		return -EINVAL;
	}
	static const uint8_t zero[48];
	if ((in[5] & ~XPI_EP_FLAG_KEY) != 0 || in[6] != 0 || in[7] != 0 ||
	    memcmp(in + 80, zero, sizeof(zero)) != 0) {
		*why = "its reserved bits are set (damaged, or of a later version)";
		return -EINVAL;
	}
	out->flags = in[5];
	memcpy(out->card, in + 8, XPI_EP_CARD_LEN);
	memcpy(out->secret, in + 32, XPI_EP_SECRET_LEN);
	memcpy(out->host, in + 64, XPI_EP_HOST_LEN);
	return 0;
}

/* --- slots ----------------------------------------------------------------- */

static void peer_init(struct xpi_peer *p)
{
	memset(p, 0, sizeof(*p));
	xpi_dlist_init(&p->held);
	xpi_dlist_init(&p->pending);
	p->tl_watch = XPI_NO_TL;
	p->host = -1;
}

int xpi_ep_slots_init(xp_context_t *ctx, int n)
{
	int total = ctx->size + n;
	struct xpi_peer *peers = realloc(ctx->peers, (size_t)total * sizeof(*peers));
	if (peers == NULL)
		return -ENOMEM;
	ctx->peers = peers;
	/* The ranks' empty lists point at themselves: where they were. */
	for (int i = 0; i < ctx->size; i++) {
		xpi_dlist_init(&peers[i].held);
		xpi_dlist_init(&peers[i].pending);
	}
	for (int i = ctx->size; i < total; i++)
		peer_init(&peers[i]);
	ctx->ep_state = calloc((size_t)n, 1);
	ctx->ep_label = calloc((size_t)n, sizeof(*ctx->ep_label));
	ctx->ep_slots = calloc((size_t)n, sizeof(*ctx->ep_slots));
	if (ctx->ep_state == NULL || ctx->ep_label == NULL || ctx->ep_slots == NULL) {
		xpi_ep_slots_fini(ctx);
		return -ENOMEM;
	}
	ctx->npeers = total;
	ctx->ep_tl_index = -1;
	xpi_ep_lanes_init(ctx);
	return 0;
}

void xpi_ep_slots_fini(xp_context_t *ctx)
{
	free(ctx->ep_state);
	free(ctx->ep_label);
	free(ctx->ep_slots);
	ctx->ep_state = NULL;
	ctx->ep_label = NULL;
	ctx->ep_slots = NULL;
	ctx->npeers = ctx->size;
}

void xpi_ep_register(xp_context_t *ctx, const struct xpi_ep_ops *ops, void *tl, int tl_index)
{
	ctx->ep_ops = ops;
	ctx->ep_tl = tl;
	ctx->ep_tl_index = tl_index;
}

int xpi_ep_slot_take(xp_context_t *ctx, const char *label)
{
	int n = ctx->npeers - ctx->size;
	for (int i = 0; i < n; i++) {
		if (ctx->ep_state[i] != XPI_SLOT_FREE)
			continue;
		int slot = ctx->size + i;
		ctx->ep_state[i] = XPI_SLOT_USED;
		ctx->ep_used++;
		snprintf(ctx->ep_label[i], sizeof(ctx->ep_label[i]), "%s", label);
		peer_init(&ctx->peers[slot]);
		xpi_ep_slot_reset(ctx, slot);
		xpi_context_set_peer_tl(ctx, slot, ctx->ep_tl_index);
		return slot;
	}
	return -EMFILE;
}

void xpi_ep_slot_released(xp_context_t *ctx, int slot)
{
	xpi_engine_peer_reset(ctx, slot);
	xpi_ep_slot_reset(ctx, slot);
	peer_init(&ctx->peers[slot]);
	ctx->ep_state[slot - ctx->size] = XPI_SLOT_FREE;
	ctx->ep_used--;
}

void xpi_peer_name(const xp_context_t *ctx, int peer, char *out, size_t n)
{
	if (peer < ctx->size)
		snprintf(out, n, "rank %d", peer);
	else
		snprintf(out, n, "endpoint %d (%s)", peer - ctx->size,
			 ctx->ep_label[peer - ctx->size]);
}

int xpi_ep_accepted(struct xp_listener *l, int slot)
{
	/* Room now for when it is handed over: that cannot fail. */
	if (l->count + l->choosing == l->cap) {
		unsigned cap = l->cap != 0 ? 2 * l->cap : 8;
		int *r = malloc(cap * sizeof(*r));
		if (r == NULL)
			return -ENOMEM;
		for (unsigned i = 0; i < l->count; i++)
			r[i] = l->ready[(l->head + i) % l->cap];
		free(l->ready);
		l->ready = r;
		l->head = 0;
		l->cap = cap;
	}
	l->choosing++;
	l->ctx->ep_slots[slot - l->ctx->size].listener = l;
	if (l->ctx->ep_slots[slot - l->ctx->size].settled)
		xpi_ep_hand_over(l->ctx, slot);
	return 0;
}

void xpi_ep_hand_over(xp_context_t *ctx, int slot)
{
	struct xpi_ep_slot *s = &ctx->ep_slots[slot - ctx->size];
	struct xp_listener *l = s->listener;
	if (l == NULL)
		return;
	s->listener = NULL;
	l->choosing--;
	l->ready[(l->head + l->count++) % l->cap] = slot;
}

/* --- the public calls ------------------------------------------------------ */

/* Takes the owner token, waiting for a thread that holds it to let go (it
 * is asked to, as xpi_engine_flush's spinning waiters are). */
static void token_take(xp_context_t *ctx)
{
	while (!xpi_owner_try_acquire(ctx)) {
		atomic_store_explicit(&ctx->token_wanted, 1, memory_order_relaxed);
		sched_yield();
	}
}

/* The transport of endpoints, made now if the context can make it.
 * Holding the token. */
static bool have_ep_transport(xp_context_t *ctx)
{
	/* Once: the transports of endpoints the job's peers did not need,
	 * the connections' and the lanes' (open.c). */
	if (!ctx->ep_opened && ctx->ep_open != NULL && ctx->npeers > ctx->size) {
		ctx->ep_opened = true;
		(void)ctx->ep_open(ctx);
	}
	return ctx->ep_ops != NULL;
}

static int no_endpoints(const xp_context_t *ctx, const char *call)
{
	return xpi_fail(
		-ENOTSUP, "rank %d: %s: this context makes no endpoints: %s", ctx->rank, call,
		ctx->npeers == ctx->size ?
			"a job of threads or of one rank has no slots for them (use xp_open)" :
			"it has no TCP transport (XP_TRANSPORTS without tcp, or a build "
			"without io_uring)");
}

XPI_EXPORT int xp_listen(xp_context_t *ctx, xp_listener_t **out, xp_ep_addr_t *addr)
{
	xpi_detail_clear();
	if (ctx == NULL || out == NULL || addr == NULL)
		return xpi_fail(-EINVAL, "xp_listen: %s is NULL",
				ctx == NULL ? "the context" :
				out == NULL ? "the listener pointer" :
					      "the address");
	struct xp_listener *l = calloc(1, sizeof(*l));
	if (l == NULL)
		return -ENOMEM;
	l->ctx = ctx;
	struct xpi_ep_addr a = { .flags = ctx->cfg.has_job_key ? XPI_EP_FLAG_KEY : 0 };
	token_take(ctx);
	int rc = have_ep_transport(ctx) ? ctx->ep_ops->listen(ctx->ep_tl, l, &a) :
					  no_endpoints(ctx, "xp_listen");
	xpi_owner_release(ctx);
	if (rc < 0) {
		free(l);
		return rc;
	}
	xpi_ep_addr_write(&a, addr->bytes);
	*out = l;
	return 0;
}

XPI_EXPORT int xp_accept(xp_listener_t *l, xp_ep_t **out)
{
	if (l == NULL || out == NULL)
		return xpi_fail(-EINVAL, "xp_accept: %s is NULL",
				l == NULL ? "the listener" : "the endpoint pointer");
	xp_context_t *ctx = l->ctx;
	struct xp_ep *ep = malloc(sizeof(*ep));
	if (ep == NULL)
		return -ENOMEM;
	token_take(ctx);
	xpi_engine_run(ctx);
	int slot = -1;
	if (l->count != 0) {
		slot = l->ready[l->head];
		l->head = (l->head + 1) % l->cap;
		l->count--;
	}
	xpi_owner_release(ctx);
	if (slot < 0) {
		free(ep);
		return -EAGAIN;
	}
	*ep = (struct xp_ep){ .ctx = ctx, .slot = slot };
	*out = ep;
	return 0;
}

XPI_EXPORT void xp_listener_close(xp_listener_t *l)
{
	if (l == NULL)
		return;
	xp_context_t *ctx = l->ctx;
	token_take(ctx);
	ctx->ep_ops->listen_close(ctx->ep_tl, l);
	/* Connections made and never taken: nobody will close them but us. */
	for (; l->count != 0; l->count--, l->head = (l->head + 1) % l->cap) {
		int slot = l->ready[l->head];
		ctx->ep_state[slot - ctx->size] = XPI_SLOT_CLOSING;
		ctx->ep_ops->close(ctx->ep_tl, slot);
	}
	/* And those whose lanes were still being chosen. */
	for (int i = 0; l->choosing != 0 && i < ctx->npeers - ctx->size; i++)
		if (ctx->ep_slots[i].listener == l) {
			ctx->ep_slots[i].listener = NULL;
			l->choosing--;
			ctx->ep_state[i] = XPI_SLOT_CLOSING;
			xpi_engine_peer_closed(ctx, ctx->size + i);
			ctx->ep_ops->close(ctx->ep_tl, ctx->size + i);
		}
	xpi_owner_release(ctx);
	free(l->ready);
	free(l);
}

XPI_EXPORT int xp_connect(xp_context_t *ctx, const xp_ep_addr_t *addr, xp_ep_t **out)
{
	xpi_detail_clear();
	if (ctx == NULL || addr == NULL || out == NULL)
		return xpi_fail(-EINVAL, "xp_connect: %s is NULL",
				ctx == NULL  ? "the context" :
				addr == NULL ? "the address" :
					       "the endpoint pointer");
	struct xpi_ep_addr a;
	const char *why = "";
	if (xpi_ep_addr_parse(addr->bytes, &a, &why) < 0)
		return xpi_fail(-EINVAL, "rank %d: xp_connect: the address is not one: %s",
				ctx->rank, why);
	struct xp_ep *ep = malloc(sizeof(*ep));
	if (ep == NULL)
		return -ENOMEM;
	token_take(ctx);
	if (!have_ep_transport(ctx)) {
		xpi_owner_release(ctx);
		free(ep);
		return no_endpoints(ctx, "xp_connect");
	}
	int slot = xpi_ep_slot_take(ctx, "connecting");
	int rc = slot;
	if (slot >= 0) {
		rc = ctx->ep_ops->connect(ctx->ep_tl, slot, &a);
		if (rc < 0)
			xpi_ep_slot_released(ctx, slot);
	}
	xpi_owner_release(ctx);
	if (rc < 0) {
		free(ep);
		if (rc == -EMFILE)
			return xpi_fail(rc,
					"rank %d: xp_connect: all %d endpoints of the context are "
					"open (XP_EP_MAX)",
					ctx->rank, ctx->npeers - ctx->size);
		return rc;
	}
	*ep = (struct xp_ep){ .ctx = ctx, .slot = slot };
	*out = ep;
	return 0;
}

XPI_EXPORT int xp_ep_ready(xp_ep_t *ep)
{
	if (ep == NULL)
		return xpi_fail(-EINVAL, "xp_ep_ready: the endpoint is NULL");
	xp_context_t *ctx = ep->ctx;
	token_take(ctx);
	xpi_engine_run(ctx);
	int rc = ctx->ep_ops->state(ctx->ep_tl, ep->slot);
	/* Made, but its lanes not yet chosen: the choice is a round trip
	 * away, and a program that asks is told which serve it after. */
	if (rc == 0 && !ctx->ep_slots[ep->slot - ctx->size].settled)
		rc = -EAGAIN;
	if (rc < 0 && rc != -EAGAIN) {
		char name[96];
		xpi_peer_name(ctx, ep->slot, name, sizeof(name));
		xpi_fail(rc, "rank %d: %s cannot be connected: %s%s", ctx->rank, name,
			 ctx->peers[ep->slot].failed_why[0] != '\0' ?
				 ctx->peers[ep->slot].failed_why :
				 xp_strerror(rc),
			 rc == -EACCES ? " (the listener and we do not prove the same key: an "
					 "address whose secret is not the listener's, or a job key "
					 "on one side only or not the same)" :
					 "");
	}
	xpi_owner_release(ctx);
	return rc;
}

XPI_EXPORT int xp_ep_route(xp_ep_t *ep, size_t size, xp_route_t *route)
{
	if (ep == NULL || route == NULL)
		return xpi_fail(-EINVAL, "xp_ep_route: %s is NULL",
				ep == NULL ? "the endpoint" : "the route pointer");
	xp_context_t *ctx = ep->ctx;
	/* The lanes change once (xp_ep_ready): read them as the owner. */
	token_take(ctx);
	xpi_route_of(ctx, ep->slot, size, route);
	xpi_owner_release(ctx);
	return 0;
}

XPI_EXPORT xp_context_t *xp_ep_context(const xp_ep_t *ep)
{
	return ep != NULL ? ep->ctx : NULL;
}

static int ep_post(xp_ep_t *ep, uint8_t op, void *buf, size_t len, uint64_t tag, uint64_t mask,
		   xp_request_t **req, const char *call)
{
	if (ep == NULL || req == NULL)
		return xpi_fail(-EINVAL, "%s: %s is NULL", call,
				ep == NULL ? "the endpoint" : "the request pointer");
	if (len > XP_MSG_MAX)
		return xpi_fail(-EINVAL, "%s: length %zu is beyond XP_MSG_MAX", call, len);
	if (buf == NULL && len != 0)
		return xpi_fail(-EINVAL, "%s: NULL buffer of %zu bytes", call, len);
	xp_request_t *r = xpi_request_new(ep->ctx, op);
	if (r == NULL)
		return xpi_fail(-ENOMEM, "%s: no memory for the request", call);
	xpi_request_target(r, XPI_EP_COMM, ep->slot, buf, len, tag, mask);
	*req = r;
	xpi_engine_submit(ep->ctx, &r->post_cmd);
	return 0;
}

XPI_EXPORT int xp_ep_isend(xp_ep_t *ep, const void *buf, size_t len, uint64_t tag,
			   xp_request_t **req)
{
	return ep_post(ep, XPI_OP_SEND, (void *)buf, len, tag, XP_TAG_EXACT, req, "xp_ep_isend");
}

XPI_EXPORT int xp_ep_irecv(xp_ep_t *ep, void *buf, size_t cap, uint64_t tag, uint64_t mask,
			   xp_request_t **req)
{
	return ep_post(ep, XPI_OP_RECV, buf, cap, tag, mask, req, "xp_ep_irecv");
}

XPI_EXPORT void xp_ep_close(xp_ep_t *ep)
{
	if (ep == NULL)
		return;
	xp_context_t *ctx = ep->ctx;
	token_take(ctx);
	/* Posted work first, the commands queued by other threads included,
	 * so none of it reaches the slot after it is reused. */
	xpi_engine_run(ctx);
	ctx->ep_state[ep->slot - ctx->size] = XPI_SLOT_CLOSING;
	xpi_engine_peer_closed(ctx, ep->slot);
	ctx->ep_ops->close(ctx->ep_tl, ep->slot);
	xpi_owner_release(ctx);
	free(ep);
}
