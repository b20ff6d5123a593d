/* SPDX-License-Identifier: MIT */
/*
 * The tables NCCL looks up, ncclNetPlugin_v6 to ncclNetPlugin_v12 (NCCL
 * 2.18 to 2.30; each NCCL takes the newest it knows), and the adapters
 * from each version's calls to the one implementation (plugin.h). An
 * adapter only converts: int sizes to size_t (refusing negative ones),
 * older properties from the newest, arguments a version adds that we do
 * not use (device-offload handles, profiler handles, the connection
 * config) dropped.
 *
 * Entries a host plugin leaves empty, as NCCL's own socket transport does:
 * getDeviceMr and irecvConsumed (for device-side networking), makeVDevice
 * (NCCL then uses our one device as it is), setNetAttr (no hints taken).
 */
#include "plugin.h"

#define XPN_EXPORT __attribute__((visibility("default")))

/* ------------------------------------------------------------------------- */
/* Properties: each version's fields from the newest layout                  */

#define PROPS_BASE(d, s)                                                                           \
	do {                                                                                       \
		(d)->name = (s).name;                                                              \
		(d)->pci_path = (s).pci_path;                                                      \
		(d)->guid = (s).guid;                                                              \
		(d)->ptr_support = (s).ptr_support;                                                \
		(d)->speed = (s).speed;                                                            \
		(d)->port = (s).port;                                                              \
		(d)->latency = (s).latency;                                                        \
		(d)->max_comms = (s).max_comms;                                                    \
		(d)->max_recvs = (s).max_recvs;                                                    \
	} while (0)

#define PROPS_DEVICE(d, s)                                                                         \
	do {                                                                                       \
		(d)->device_type = (s).device_type;                                                \
		(d)->device_version = (s).device_version;                                          \
	} while (0)

/* v9 to v11: four virtual-device entries; we have one device. */
#define PROPS_V9(d, s)                                                                             \
	do {                                                                                       \
		PROPS_BASE(d, s);                                                                  \
		PROPS_DEVICE(d, s);                                                                \
		(d)->reg_is_global = (s).reg_is_global;                                            \
		(d)->force_flush = (s).force_flush;                                                \
		(d)->vdev.ndevs = (s).vdev.ndevs;                                                  \
		for (int k = 0; k < (s).vdev.ndevs && k < XNCCL_VDEV_MAX_V9; k++)                  \
			(d)->vdev.devs[k] = (s).vdev.devs[k];                                      \
		(d)->max_p2p_bytes = (s).max_p2p_bytes;                                            \
		(d)->max_coll_bytes = (s).max_coll_bytes;                                          \
	} while (0)

static xnccl_result_t props_v6(int dev, struct xnccl_props_v6 *p)
{
	struct xnccl_props_v12 s;
	xnccl_result_t res = p != NULL ? xpn_get_properties(dev, &s) : XNCCL_INTERNAL_ERROR;
	if (res == XNCCL_OK)
		PROPS_BASE(p, s);
	return res;
}

static xnccl_result_t props_v7(int dev, struct xnccl_props_v7 *p)
{
	struct xnccl_props_v12 s;
	xnccl_result_t res = p != NULL ? xpn_get_properties(dev, &s) : XNCCL_INTERNAL_ERROR;
	if (res == XNCCL_OK) {
		PROPS_BASE(p, s);
		PROPS_DEVICE(p, s);
	}
	return res;
}

static xnccl_result_t props_v8(int dev, struct xnccl_props_v8 *p)
{
	struct xnccl_props_v12 s;
	xnccl_result_t res = p != NULL ? xpn_get_properties(dev, &s) : XNCCL_INTERNAL_ERROR;
	if (res == XNCCL_OK) {
		PROPS_BASE(p, s);
		PROPS_DEVICE(p, s);
		p->reg_is_global = s.reg_is_global;
	}
	return res;
}

static xnccl_result_t props_v9(int dev, struct xnccl_props_v9 *p)
{
	struct xnccl_props_v12 s;
	xnccl_result_t res = p != NULL ? xpn_get_properties(dev, &s) : XNCCL_INTERNAL_ERROR;
	if (res == XNCCL_OK)
		PROPS_V9(p, s);
	return res;
}

static xnccl_result_t props_v11(int dev, struct xnccl_props_v11 *p)
{
	struct xnccl_props_v12 s;
	xnccl_result_t res = p != NULL ? xpn_get_properties(dev, &s) : XNCCL_INTERNAL_ERROR;
	if (res == XNCCL_OK) {
		PROPS_V9(p, s);
		p->max_multi_request_size = s.max_multi_request_size;
	}
	return res;
}

/* ------------------------------------------------------------------------- */
/* Calls whose arguments changed                                             */

static xnccl_result_t init_v6(xnccl_logger_t log)
{
	return xpn_init_process(log);
}

static xnccl_result_t init_v10(xnccl_logger_t log, xnccl_profiler_cb_t prof)
{
	return xpn_init_process(log);
}

static xnccl_result_t init_v11(void **ctx, uint64_t comm_id, struct xnccl_comm_config *config,
			       xnccl_logger_t log, xnccl_profiler_cb_t prof)
{
	return xpn_init(ctx, comm_id, config, log);
}

static xnccl_result_t listen_v11(void *ctx, int dev, void *handle, void **listen_comm)
{
	return xpn_listen(dev, handle, listen_comm);
}

static xnccl_result_t connect_v7(int dev, void *handle, void **send_comm,
				 struct xnccl_dev_handle **send_dev)
{
	return xpn_connect(dev, handle, send_comm);
}

static xnccl_result_t connect_v10(int dev, struct xnccl_comm_config *config, void *handle,
				  void **send_comm, struct xnccl_dev_handle **send_dev)
{
	return xpn_connect(dev, handle, send_comm);
}

static xnccl_result_t connect_v11(void *ctx, int dev, void *handle, void **send_comm,
				  struct xnccl_dev_handle **send_dev)
{
	return xpn_connect(dev, handle, send_comm);
}

static xnccl_result_t accept_v7(void *listen_comm, void **recv_comm,
				struct xnccl_dev_handle **recv_dev)
{
	return xpn_accept(listen_comm, recv_comm);
}

static xnccl_result_t reg_mr_v6(void *comm, void *data, int size, int type, void **mhandle)
{
	if (size < 0) {
		XPN_WARN("NET/xport : regMr: negative size %d", size);
		return XNCCL_INTERNAL_ERROR;
	}
	return xpn_reg_mr(comm, data, (size_t)size, type, mhandle);
}

static xnccl_result_t isend_v6(void *send_comm, void *data, int size, int tag, void *mhandle,
			       void **request)
{
	if (size < 0) {
		XPN_WARN("NET/xport : isend: negative size %d", size);
		return XNCCL_INTERNAL_ERROR;
	}
	return xpn_isend(send_comm, data, (size_t)size, tag, request);
}

static xnccl_result_t isend_v9(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			       void **request)
{
	return xpn_isend(send_comm, data, size, tag, request);
}

static xnccl_result_t isend_v10(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request)
{
	return xpn_isend(send_comm, data, size, tag, request);
}

static xnccl_result_t irecv_v6(void *recv_comm, int n, void **data, int *sizes, int *tags,
			       void **mhandles, void **request)
{
	size_t wide[XPN_MAX_RECVS];
	if (n < 1 || n > XPN_MAX_RECVS || sizes == NULL) {
		XPN_WARN("NET/xport : irecv: %d buffers (1 to %d)", n, XPN_MAX_RECVS);
		return XNCCL_INTERNAL_ERROR;
	}
	for (int k = 0; k < n; k++) {
		if (sizes[k] < 0) {
			XPN_WARN("NET/xport : irecv: buffer %d has a negative size %d", k,
				 sizes[k]);
			return XNCCL_INTERNAL_ERROR;
		}
		wide[k] = (size_t)sizes[k];
	}
	return xpn_irecv(recv_comm, n, data, wide, tags, request);
}

static xnccl_result_t irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			       void **mhandles, void **request)
{
	return xpn_irecv(recv_comm, n, data, sizes, tags, request);
}

static xnccl_result_t irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request)
{
	return xpn_irecv(recv_comm, n, data, sizes, tags, request);
}

static xnccl_result_t iflush_any(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request)
{
	return xpn_iflush(recv_comm, n, data, sizes, request);
}

/* ------------------------------------------------------------------------- */
/* The tables                                                                */

/* The entries every version has with the same signature. */
#define COMMON_TAIL                                                                                \
	.reg_mr_dmabuf = xpn_reg_mr_dmabuf, .dereg_mr = xpn_dereg_mr, .iflush = iflush_any,        \
	.test = xpn_test, .close_send = xpn_close_send, .close_recv = xpn_close_recv,              \
	.close_listen = xpn_close_listen

XPN_EXPORT const struct xnccl_net_v6 ncclNetPlugin_v6 = {
	.name = "xport",
	.init = init_v6,
	.devices = xpn_devices,
	.get_properties = props_v6,
	.listen = xpn_listen,
	.connect = xpn_connect,
	.accept = xpn_accept,
	.reg_mr = reg_mr_v6,
	.isend = isend_v6,
	.irecv = irecv_v6,
	COMMON_TAIL,
};

XPN_EXPORT const struct xnccl_net_v7 ncclNetPlugin_v7 = {
	.name = "xport",
	.init = init_v6,
	.devices = xpn_devices,
	.get_properties = props_v7,
	.listen = xpn_listen,
	.connect = connect_v7,
	.accept = accept_v7,
	.reg_mr = reg_mr_v6,
	.isend = isend_v6,
	.irecv = irecv_v6,
	COMMON_TAIL,
	.get_device_mr = NULL,
	.irecv_consumed = NULL,
};

XPN_EXPORT const struct xnccl_net_v8 ncclNetPlugin_v8 = {
	.name = "xport",
	.init = init_v6,
	.devices = xpn_devices,
	.get_properties = props_v8,
	.listen = xpn_listen,
	.connect = connect_v7,
	.accept = accept_v7,
	.reg_mr = xpn_reg_mr,
	.isend = isend_v6,
	.irecv = irecv_v6,
	COMMON_TAIL,
	.get_device_mr = NULL,
	.irecv_consumed = NULL,
};

XPN_EXPORT const struct xnccl_net_v9 ncclNetPlugin_v9 = {
	.name = "xport",
	.init = init_v6,
	.devices = xpn_devices,
	.get_properties = props_v9,
	.listen = xpn_listen,
	.connect = connect_v7,
	.accept = accept_v7,
	.reg_mr = xpn_reg_mr,
	.isend = isend_v9,
	.irecv = irecv_v9,
	COMMON_TAIL,
	.get_device_mr = NULL,
	.irecv_consumed = NULL,
	.make_vdevice = NULL,
};

XPN_EXPORT const struct xnccl_net_v10 ncclNetPlugin_v10 = {
	.name = "xport",
	.init = init_v10,
	.devices = xpn_devices,
	.get_properties = props_v9,
	.listen = xpn_listen,
	.connect = connect_v10,
	.accept = accept_v7,
	.reg_mr = xpn_reg_mr,
	.isend = isend_v10,
	.irecv = irecv_v10,
	COMMON_TAIL,
	.get_device_mr = NULL,
	.irecv_consumed = NULL,
	.make_vdevice = NULL,
};

XPN_EXPORT const struct xnccl_net_v11 ncclNetPlugin_v11 = {
	.name = "xport",
	.init = init_v11,
	.devices = xpn_devices,
	.get_properties = props_v11,
	.listen = listen_v11,
	.connect = connect_v11,
	.accept = accept_v7,
	.reg_mr = xpn_reg_mr,
	.isend = isend_v10,
	.irecv = irecv_v10,
	COMMON_TAIL,
	.get_device_mr = NULL,
	.irecv_consumed = NULL,
	.make_vdevice = NULL,
	.finalize = xpn_finalize,
	.set_net_attr = NULL,
};

XPN_EXPORT const struct xnccl_net_v12 ncclNetPlugin_v12 = {
	.name = "xport",
	.init = init_v11,
	.devices = xpn_devices,
	.get_properties = xpn_get_properties,
	.listen = listen_v11,
	.connect = connect_v11,
	.accept = accept_v7,
	.reg_mr = xpn_reg_mr,
	.isend = isend_v10,
	.irecv = irecv_v10,
	COMMON_TAIL,
	.get_device_mr = NULL,
	.irecv_consumed = NULL,
	.make_vdevice = NULL,
	.finalize = xpn_finalize,
	.set_net_attr = NULL,
};
