/* SPDX-License-Identifier: MIT */
/*
 * init, finalize, devices and getProperties: the plugin's life and what
 * it tells NCCL about its one device.
 */
#include <errno.h>
#include <stdlib.h>

#include "plugin.h"

static void log_ready(void)
{
	XPN_INFO("NET/xport : xport %d.%d.%d ready (one device: connections over TCP, moved to "
		 "RDMA where both ends have a device; XP_SOCKET_IFNAME, NCCL_SOCKET_IFNAME "
		 "choose the interface)",
		 XP_VERSION_MAJOR, XP_VERSION_MINOR, XP_VERSION_PATCH);
}

xnccl_result_t xpn_init_process(xnccl_logger_t log)
{
	xpn_log_set(log);
	int rc = xpn_ctx_pin();
	if (rc < 0)
		return XPN_FAIL(rc, "init: cannot open an xport context (xp_open)");
	log_ready();
	return XNCCL_OK;
}

xnccl_result_t xpn_init(void **netctx, uint64_t comm_id, const struct xnccl_comm_config *config,
			xnccl_logger_t log)
{
	xpn_log_set(log);
	if (netctx == NULL) {
		XPN_WARN("NET/xport : init: no place for the context (NULL)");
		return XNCCL_INTERNAL_ERROR;
	}
	struct xpn_netctx *x = calloc(1, sizeof(*x));
	if (x == NULL)
		return XPN_FAIL(-ENOMEM, "init");
	x->comm_id = comm_id;
	x->traffic_class = config != NULL ? config->traffic_class : -1;
	xp_context_t *ctx;
	int rc = xpn_ctx_get(&ctx);
	if (rc < 0) {
		free(x);
		return XPN_FAIL(rc, "init: cannot open an xport context (xp_open)");
	}
	xpn_obj_add(&x->obj, XPN_NETCTX);
	*netctx = x;
	log_ready();
	return XNCCL_OK;
}

xnccl_result_t xpn_finalize(void *netctx)
{
	if (!xpn_obj_remove(netctx, XPN_NETCTX)) {
		XPN_WARN("NET/xport : finalize: %p is not a context of ours (finalized twice?)",
			 netctx);
		return XNCCL_INTERNAL_ERROR;
	}
	free(netctx);
	xpn_ctx_put();
	return XNCCL_OK;
}

xnccl_result_t xpn_devices(int *ndev)
{
	if (ndev == NULL)
		return XNCCL_INTERNAL_ERROR;
	if (xpn_ctx() == NULL) {
		XPN_WARN("NET/xport : devices: called before init");
		return XNCCL_INTERNAL_ERROR;
	}
	*ndev = 1;
	return XNCCL_OK;
}

xnccl_result_t xpn_get_properties(int dev, struct xnccl_props_v12 *props)
{
	if (dev != 0 || props == NULL) {
		XPN_WARN("NET/xport : getProperties: no device %d (there is one, 0)", dev);
		return XNCCL_INTERNAL_ERROR;
	}
	xpn_props_fill(props);
	return XNCCL_OK;
}
