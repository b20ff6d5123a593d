/* SPDX-License-Identifier: MIT */
/*
 * Connections: listen, connect, accept and the closes.
 *
 * The listen handle is the listener's xport address (xp_ep_addr_t: 128
 * bytes, all of NCCL's handle). NCCL calls connect with that handle again
 * and again until a comm comes back, so the connection in progress must be
 * found from the handle. The address fills the handle, so the first call,
 * once xp_connect has read it, writes over it a mark of ours: a tag and
 * the id of the comm being connected (struct stage_mark). Later calls
 * find the comm by that id in the registry, never by a pointer from the
 * handle, so a damaged or stale handle is an error and not a crash. The
 * address, which holds the listener's secret, does not stay in NCCL's
 * memory.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "plugin.h"

_Static_assert(sizeof(xp_ep_addr_t) <= XNCCL_HANDLE_BYTES, "an address fits NCCL's handle");

#define STAGE_TAG "xport/nccl:conn" /* 15 characters and the NUL */
struct stage_mark {
	char tag[16];
	uint64_t id;
};
_Static_assert(sizeof(STAGE_TAG) == sizeof(((struct stage_mark *)0)->tag),
	       "the tag fills its field");
_Static_assert(sizeof(struct stage_mark) <= XNCCL_HANDLE_BYTES, "the mark fits the handle");

/* A comm of @kind with its request slots and a reference on the context;
 * NULL (and *@err) if it cannot be made. */
static struct xpn_comm *comm_new(enum xpn_kind kind, int *err)
{
	xp_context_t *ctx;
	*err = xpn_ctx_get(&ctx);
	if (*err < 0)
		return NULL;
	struct xpn_comm *c = calloc(1, sizeof(*c));
	if (c != NULL && xpn_slots_init(c, kind == XPN_SEND ? XPN_SEND_SLOTS : XPN_RECV_SLOTS,
					kind == XPN_SEND ? 1 : XPN_MAX_RECVS) == 0)
		return c;
	free(c);
	xpn_ctx_put();
	*err = -ENOMEM;
	return NULL;
}

/* Frees a comm no longer in the registry: its endpoint is closed first,
 * so that the requests still in xport's hands end, then waited for. */
static void comm_free(struct xpn_comm *c)
{
	xp_ep_close(c->ep);
	xpn_slots_drain(c);
	xpn_slots_fini(c);
	free(c);
	xpn_ctx_put();
}

xnccl_result_t xpn_listen(int dev, void *handle, void **listen_comm)
{
	if (dev != 0 || handle == NULL || listen_comm == NULL) {
		XPN_WARN("NET/xport : listen: device %d, handle %p, comm %p: not ours", dev, handle,
			 (void *)listen_comm);
		return XNCCL_INTERNAL_ERROR;
	}
	if (xpn_ctx() == NULL) {
		XPN_WARN("NET/xport : listen: called before init");
		return XNCCL_INTERNAL_ERROR;
	}
	xp_context_t *ctx;
	int rc = xpn_ctx_get(&ctx);
	if (rc < 0)
		return XPN_FAIL(rc, "listen");
	struct xpn_listen *lc = calloc(1, sizeof(*lc));
	xp_ep_addr_t addr;
	rc = lc != NULL ? xp_listen(ctx, &lc->l, &addr) : -ENOMEM;
	if (rc < 0) {
		free(lc);
		xpn_ctx_put();
		return XPN_FAIL(rc, "listen");
	}
	memset(handle, 0, XNCCL_HANDLE_BYTES);
	memcpy(handle, addr.bytes, sizeof(addr.bytes));
	xpn_obj_add(&lc->obj, XPN_LISTEN);
	*listen_comm = lc;
	return XNCCL_OK;
}

/* The comm the handle's mark names; NULL if the handle holds none (an
 * address: a connection to start), *@bad if it names none of ours. */
static struct xpn_comm *stage_of(const void *handle, bool *bad)
{
	struct stage_mark mark;
	memcpy(&mark, handle, sizeof(mark));
	*bad = false;
	if (memcmp(mark.tag, STAGE_TAG, sizeof(mark.tag)) != 0)
		return NULL;
	struct xpn_comm *c = xpn_stage_find(mark.id);
	*bad = c == NULL;
	return c;
}

/* Says which transport serves a comm now connected, as NCCL_DEBUG=INFO
 * shows NCCL's own choice. */
static void log_route(const struct xpn_comm *c, const char *kind)
{
	xp_route_t r;
	if (xp_ep_route(c->ep, 0, &r) == 0)
		XPN_INFO("NET/xport : %s comm %p connected over %s (payloads %s)", kind,
			 (const void *)c, r.transport, r.payloads);
}

/* Starts connecting to the address in @handle, and marks the handle. */
static int stage_start(void *handle, struct xpn_comm **out)
{
	int rc;
	struct xpn_comm *c = comm_new(XPN_SEND, &rc);
	if (c == NULL)
		return rc;
	xp_ep_addr_t addr;
	memcpy(addr.bytes, handle, sizeof(addr.bytes));
	rc = xp_connect(xpn_ctx(), &addr, &c->ep);
	if (rc < 0) {
		xpn_slots_fini(c);
		free(c);
		xpn_ctx_put();
		return rc;
	}
	c->stage_id = xpn_stage_id_new();
	xpn_obj_add(&c->obj, XPN_SEND);
	struct stage_mark mark = { .tag = STAGE_TAG, .id = c->stage_id };
	memset(handle, 0, XNCCL_HANDLE_BYTES);
	memcpy(handle, &mark, sizeof(mark));
	*out = c;
	return 0;
}

xnccl_result_t xpn_connect(int dev, void *handle, void **send_comm)
{
	if (dev != 0 || handle == NULL || send_comm == NULL) {
		XPN_WARN("NET/xport : connect: device %d, handle %p, comm %p: not ours", dev,
			 handle, (void *)send_comm);
		return XNCCL_INTERNAL_ERROR;
	}
	*send_comm = NULL;
	if (xpn_ctx() == NULL) {
		XPN_WARN("NET/xport : connect: called before init");
		return XNCCL_INTERNAL_ERROR;
	}
	bool bad;
	struct xpn_comm *c = stage_of(handle, &bad);
	if (bad) {
		XPN_WARN("NET/xport : connect: the handle names a connection this process is not "
			 "making (it failed already, or the handle is stale or damaged)");
		return XNCCL_INTERNAL_ERROR;
	}
	if (c == NULL) {
		int rc = stage_start(handle, &c);
		if (rc < 0)
			return XPN_FAIL(rc,
					"connect: the handle is not a listener's address we can "
					"reach");
	}
	int rc = xp_ep_ready(c->ep);
	if (rc == -EAGAIN) {
		xpn_idle_note();
		return XNCCL_OK; /* NCCL calls again */
	}
	if (rc < 0) {
		xnccl_result_t res = XPN_FAIL(rc, "connect");
		xpn_obj_remove(c, XPN_SEND);
		comm_free(c);
		return res;
	}
	c->connected = true;
	log_route(c, "send");
	*send_comm = c;
	return XNCCL_OK;
}

xnccl_result_t xpn_accept(void *listen_comm, void **recv_comm)
{
	struct xpn_listen *lc = (struct xpn_listen *)xpn_obj_check(listen_comm, XPN_LISTEN);
	if (lc == NULL || recv_comm == NULL) {
		XPN_WARN("NET/xport : accept: %p is not a listen comm of ours", listen_comm);
		return XNCCL_INTERNAL_ERROR;
	}
	*recv_comm = NULL;
	xp_ep_t *ep;
	int rc = xp_accept(lc->l, &ep);
	if (rc == -EAGAIN) {
		xpn_idle_note();
		return XNCCL_OK; /* NCCL calls again */
	}
	if (rc < 0)
		return XPN_FAIL(rc, "accept");
	struct xpn_comm *c = comm_new(XPN_RECV, &rc);
	if (c == NULL) {
		xp_ep_close(ep);
		return XPN_FAIL(rc, "accept");
	}
	c->ep = ep;
	c->connected = true;
	log_route(c, "receive");
	xpn_obj_add(&c->obj, XPN_RECV);
	*recv_comm = c;
	return XNCCL_OK;
}

static xnccl_result_t comm_close(void *comm, enum xpn_kind kind, const char *call)
{
	/* NCCL's own transports take NULL: nothing was made. */
	if (comm == NULL)
		return XNCCL_OK;
	if (!xpn_obj_remove(comm, kind)) {
		XPN_WARN("NET/xport : %s: %p is not an open comm of that kind (closed twice?)",
			 call, comm);
		return XNCCL_INTERNAL_ERROR;
	}
	comm_free(comm);
	return XNCCL_OK;
}

xnccl_result_t xpn_close_send(void *send_comm)
{
	return comm_close(send_comm, XPN_SEND, "closeSend");
}

xnccl_result_t xpn_close_recv(void *recv_comm)
{
	return comm_close(recv_comm, XPN_RECV, "closeRecv");
}

xnccl_result_t xpn_close_listen(void *listen_comm)
{
	if (listen_comm == NULL)
		return XNCCL_OK;
	if (!xpn_obj_remove(listen_comm, XPN_LISTEN)) {
		XPN_WARN("NET/xport : closeListen: %p is not an open listen comm (closed twice?)",
			 listen_comm);
		return XNCCL_INTERNAL_ERROR;
	}
	struct xpn_listen *lc = listen_comm;
	xp_listener_close(lc->l);
	free(lc);
	xpn_ctx_put();
	return XNCCL_OK;
}
