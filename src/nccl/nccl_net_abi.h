/* SPDX-License-Identifier: MIT */
/*
 * The binary interface NCCL uses to call a network plugin: the tables it
 * looks up by name (ncclNetPlugin_v6 to ncclNetPlugin_v12) and the
 * structures they pass, declared here in our own names.
 *
 * Only the layouts are NCCL's: the order, types and sizes of the fields,
 * and the values of the constants, as NCCL 2.18 to 2.30 read and write
 * them (checked against NCCL's plugin headers, field by field; the
 * _Static_asserts at the end pin the offsets on LP64, so a slip fails the
 * build instead of corrupting NCCL's memory). The names, the grouping and
 * the comments are ours. Nothing here is a CUDA type: a network plugin
 * needs none.
 *
 * How the versions grow (each adds to the one before):
 *   v6   sizes are int; init takes the logger only
 *   v7   connect and accept take a device-offload handle; the table gains
 *        getDeviceMr and irecvConsumed; properties gain the device type
 *   v8   regMr takes a size_t; properties gain regIsGlobal
 *   v9   isend and irecv take size_t; properties gain forceFlush, the
 *        virtual device list and the largest transfers; makeVDevice
 *   v10  init takes a profiler callback; connect takes a connection config;
 *        isend and irecv take profiler handles
 *   v11  init is per communicator (a context) and listen and connect take
 *        that context; finalize and setNetAttr; maxMultiRequestSize
 *   v12  virtual devices hold 8 devices (4 before); rail and plane ids
 */
#ifndef XPORT_NCCL_NET_ABI_H
#define XPORT_NCCL_NET_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------------------- */
/* Results, logging, profiling                                               */

/* What every table function returns (an int-sized enum in NCCL). */
typedef enum xnccl_result {
	XNCCL_OK = 0,
	XNCCL_UNHANDLED_CUDA_ERROR = 1, /* never ours: we use no CUDA */
	XNCCL_SYSTEM_ERROR = 2,         /* the OS or the network failed */
	XNCCL_INTERNAL_ERROR = 3,       /* NCCL called us in a way it should not */
	XNCCL_INVALID_ARGUMENT = 4,     /* NCCL checks arguments itself: rarely ours */
	XNCCL_INVALID_USAGE = 5,        /* the user's doing: configuration, sizes */
	XNCCL_REMOTE_ERROR = 6,         /* the peer went away or misbehaved */
} xnccl_result_t;

/* The logger's levels and subsystem bits (flags). */
enum xnccl_log_level {
	XNCCL_LOG_NONE = 0,
	XNCCL_LOG_VERSION = 1,
	XNCCL_LOG_WARN = 2,
	XNCCL_LOG_INFO = 3,
	XNCCL_LOG_ABORT = 4,
	XNCCL_LOG_TRACE = 5,
};
#define XNCCL_SUBSYS_INIT 0x1ul
#define XNCCL_SUBSYS_NET 0x10ul
#define XNCCL_SUBSYS_ALL (~0ul)

/* NCCL's logger: a printf-like function that also takes the level, the
 * subsystem bits and where the line comes from. */
typedef void (*xnccl_logger_t)(enum xnccl_log_level level, unsigned long flags, const char *file,
			       int line, const char *fmt, ...);

/* The profiler's callback (v10 on); we record no events, so never call it. */
typedef xnccl_result_t (*xnccl_profiler_cb_t)(void **event, int type, void *parent,
					      int64_t plugin_id, void *ext_data);

/* ------------------------------------------------------------------------- */
/* Constants                                                                 */

/* Bytes NCCL reserves for a listen handle, which it carries to the sender. */
#define XNCCL_HANDLE_BYTES 128
/* What a buffer may be (ptrSupport is a set of them; regMr's type is one). */
#define XNCCL_PTR_HOST 0x1
#define XNCCL_PTR_CUDA 0x2
#define XNCCL_PTR_DMABUF 0x4
/* The requests NCCL may have in flight on one comm (8 before NCCL 2.19);
 * a send comm sees this many times maxRecvs. */
#define XNCCL_MAX_REQUESTS 32
/* Largest transfer NCCL asks for when a plugin sets no smaller one: 1 TiB. */
#define XNCCL_MAX_NET_SIZE ((size_t)1 << 40)
/* What *request holds on entry to irecv when NCCL will not need the
 * completion (LL protocols poll the data). A value, not an address. */
#define XNCCL_OPTIONAL_RECV_COMPLETION ((void *)(uintptr_t)0x1)
/* Unset rail and plane ids (v12). */
#define XNCCL_ID_UNDEF (-1)
/* Kinds of device-side networking; a host plugin says HOST. */
enum xnccl_device_type {
	XNCCL_DEVICE_HOST = 0,
	XNCCL_DEVICE_UNPACK = 1,
	XNCCL_DEVICE_GIN_PROXY = 2,
	XNCCL_DEVICE_GIN_GDAKI = 3,
};
#define XNCCL_DEVICE_VERSION_NONE 0
/* Virtual devices fuse at most this many physical ones. */
#define XNCCL_VDEV_MAX_V9 4 /* v9, v10, v11 */
#define XNCCL_VDEV_MAX_V12 8

/* ------------------------------------------------------------------------- */
/* Structures passed through the tables                                      */

/* Device-offload description of a connection (v7 on; identical since).
 * NCCL passes a pointer to a pointer to one, which a host plugin leaves. */
struct xnccl_dev_handle {
	enum xnccl_device_type type;
	int version;
	void *handle;
	size_t size;
	int needs_proxy_progress;
};

/* The physical devices a virtual device is made of. */
struct xnccl_vdev_v9 {
	int ndevs;
	int devs[XNCCL_VDEV_MAX_V9];
};
struct xnccl_vdev_v12 {
	int ndevs;
	int devs[XNCCL_VDEV_MAX_V12];
};

/* Per-connection settings (v10 on): a traffic class or -1. */
struct xnccl_comm_config {
	int traffic_class;
};

/* Hints for a communicator's traffic (v11 on); we take none. */
struct xnccl_comm_attr {
	int32_t max_concurrent_peers;
	int32_t min_concurrent_peers;
	int32_t max_flows_per_peer;
	int32_t min_flows_per_peer;
};
struct xnccl_net_attr {
	struct xnccl_comm_attr send;
	struct xnccl_comm_attr recv;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
};

/*
 * A device's properties, one layout per version. The fields in common
 * have the same meaning throughout:
 *   name        for logs
 *   pci_path    the device's directory in /sys, or NULL for a virtual one
 *   guid        devices with the same guid share a port
 *   ptr_support XNCCL_PTR_* bits
 *   speed       Mb/s
 *   latency     microseconds NCCL adds to its own model (0: none)
 *   max_comms   connections we can hold
 *   max_recvs   buffers one grouped receive may name
 */
struct xnccl_props_v6 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
};

struct xnccl_props_v7 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	enum xnccl_device_type device_type;
	int device_version;
};

struct xnccl_props_v8 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global; /* a registration serves every comm */
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	enum xnccl_device_type device_type;
	int device_version;
};

/* v9 and v10 share this layout. */
struct xnccl_props_v9 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush; /* ask NCCL to flush after every receive */
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	enum xnccl_device_type device_type;
	int device_version;
	struct xnccl_vdev_v9 vdev;
	size_t max_p2p_bytes;  /* NCCL cuts larger point-to-point transfers */
	size_t max_coll_bytes; /* and larger collective ones */
};

struct xnccl_props_v11 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	enum xnccl_device_type device_type;
	int device_version;
	struct xnccl_vdev_v9 vdev;
	size_t max_p2p_bytes;
	size_t max_coll_bytes;
	int max_multi_request_size; /* requests one multi-request may hold */
};

struct xnccl_props_v12 {
	char *name;
	char *pci_path;
	uint64_t guid;
	int ptr_support;
	int reg_is_global;
	int force_flush;
	int speed;
	int port;
	float latency;
	int max_comms;
	int max_recvs;
	enum xnccl_device_type device_type;
	int device_version;
	struct xnccl_vdev_v12 vdev;
	size_t max_p2p_bytes;
	size_t max_coll_bytes;
	int max_multi_request_size;
	int16_t rail_id;
	int16_t plane_id;
};

/* ------------------------------------------------------------------------- */
/* The tables                                                                */

/*
 * Entries every version has, in this order after name, init, devices and
 * getProperties: listen, connect, accept, regMr, regMrDmaBuf, deregMr,
 * isend, irecv, iflush, test, closeSend, closeRecv, closeListen. Later
 * versions append getDeviceMr and irecvConsumed (v7), makeVDevice (v9),
 * finalize and setNetAttr (v11). Whatever the version, a function's
 * position is what NCCL calls, so the order below is the ABI.
 */

struct xnccl_net_v6 {
	const char *name;
	xnccl_result_t (*init)(xnccl_logger_t log);
	xnccl_result_t (*devices)(int *ndev);
	xnccl_result_t (*get_properties)(int dev, struct xnccl_props_v6 *props);
	xnccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	xnccl_result_t (*connect)(int dev, void *handle, void **send_comm);
	xnccl_result_t (*accept)(void *listen_comm, void **recv_comm);
	xnccl_result_t (*reg_mr)(void *comm, void *data, int size, int type, void **mhandle);
	xnccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
					uint64_t offset, int fd, void **mhandle);
	xnccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	xnccl_result_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle,
				void **request);
	xnccl_result_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request);
	xnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	xnccl_result_t (*test)(void *request, int *done, int *sizes);
	xnccl_result_t (*close_send)(void *send_comm);
	xnccl_result_t (*close_recv)(void *recv_comm);
	xnccl_result_t (*close_listen)(void *listen_comm);
};

struct xnccl_net_v7 {
	const char *name;
	xnccl_result_t (*init)(xnccl_logger_t log);
	xnccl_result_t (*devices)(int *ndev);
	xnccl_result_t (*get_properties)(int dev, struct xnccl_props_v7 *props);
	xnccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	xnccl_result_t (*connect)(int dev, void *handle, void **send_comm,
				  struct xnccl_dev_handle **send_dev);
	xnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct xnccl_dev_handle **recv_dev);
	xnccl_result_t (*reg_mr)(void *comm, void *data, int size, int type, void **mhandle);
	xnccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
					uint64_t offset, int fd, void **mhandle);
	xnccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	xnccl_result_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle,
				void **request);
	xnccl_result_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request);
	xnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	xnccl_result_t (*test)(void *request, int *done, int *sizes);
	xnccl_result_t (*close_send)(void *send_comm);
	xnccl_result_t (*close_recv)(void *recv_comm);
	xnccl_result_t (*close_listen)(void *listen_comm);
	xnccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **device_mhandle);
	xnccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
};

struct xnccl_net_v8 {
	const char *name;
	xnccl_result_t (*init)(xnccl_logger_t log);
	xnccl_result_t (*devices)(int *ndev);
	xnccl_result_t (*get_properties)(int dev, struct xnccl_props_v8 *props);
	xnccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	xnccl_result_t (*connect)(int dev, void *handle, void **send_comm,
				  struct xnccl_dev_handle **send_dev);
	xnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct xnccl_dev_handle **recv_dev);
	xnccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
	xnccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
					uint64_t offset, int fd, void **mhandle);
	xnccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	xnccl_result_t (*isend)(void *send_comm, void *data, int size, int tag, void *mhandle,
				void **request);
	xnccl_result_t (*irecv)(void *recv_comm, int n, void **data, int *sizes, int *tags,
				void **mhandles, void **request);
	xnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	xnccl_result_t (*test)(void *request, int *done, int *sizes);
	xnccl_result_t (*close_send)(void *send_comm);
	xnccl_result_t (*close_recv)(void *recv_comm);
	xnccl_result_t (*close_listen)(void *listen_comm);
	xnccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **device_mhandle);
	xnccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
};

struct xnccl_net_v9 {
	const char *name;
	xnccl_result_t (*init)(xnccl_logger_t log);
	xnccl_result_t (*devices)(int *ndev);
	xnccl_result_t (*get_properties)(int dev, struct xnccl_props_v9 *props);
	xnccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	xnccl_result_t (*connect)(int dev, void *handle, void **send_comm,
				  struct xnccl_dev_handle **send_dev);
	xnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct xnccl_dev_handle **recv_dev);
	xnccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
	xnccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
					uint64_t offset, int fd, void **mhandle);
	xnccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	xnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void **request);
	xnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **request);
	xnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	xnccl_result_t (*test)(void *request, int *done, int *sizes);
	xnccl_result_t (*close_send)(void *send_comm);
	xnccl_result_t (*close_recv)(void *recv_comm);
	xnccl_result_t (*close_listen)(void *listen_comm);
	xnccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **device_mhandle);
	xnccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
	xnccl_result_t (*make_vdevice)(int *dev, struct xnccl_vdev_v9 *props);
};

struct xnccl_net_v10 {
	const char *name;
	xnccl_result_t (*init)(xnccl_logger_t log, xnccl_profiler_cb_t prof);
	xnccl_result_t (*devices)(int *ndev);
	xnccl_result_t (*get_properties)(int dev, struct xnccl_props_v9 *props);
	xnccl_result_t (*listen)(int dev, void *handle, void **listen_comm);
	xnccl_result_t (*connect)(int dev, struct xnccl_comm_config *config, void *handle,
				  void **send_comm, struct xnccl_dev_handle **send_dev);
	xnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct xnccl_dev_handle **recv_dev);
	xnccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
	xnccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
					uint64_t offset, int fd, void **mhandle);
	xnccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	xnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	xnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	xnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	xnccl_result_t (*test)(void *request, int *done, int *sizes);
	xnccl_result_t (*close_send)(void *send_comm);
	xnccl_result_t (*close_recv)(void *recv_comm);
	xnccl_result_t (*close_listen)(void *listen_comm);
	xnccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **device_mhandle);
	xnccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
	xnccl_result_t (*make_vdevice)(int *dev, struct xnccl_vdev_v9 *props);
};

struct xnccl_net_v11 {
	const char *name;
	xnccl_result_t (*init)(void **ctx, uint64_t comm_id, struct xnccl_comm_config *config,
			       xnccl_logger_t log, xnccl_profiler_cb_t prof);
	xnccl_result_t (*devices)(int *ndev);
	xnccl_result_t (*get_properties)(int dev, struct xnccl_props_v11 *props);
	xnccl_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
	xnccl_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
				  struct xnccl_dev_handle **send_dev);
	xnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct xnccl_dev_handle **recv_dev);
	xnccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
	xnccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
					uint64_t offset, int fd, void **mhandle);
	xnccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	xnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	xnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	xnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	xnccl_result_t (*test)(void *request, int *done, int *sizes);
	xnccl_result_t (*close_send)(void *send_comm);
	xnccl_result_t (*close_recv)(void *recv_comm);
	xnccl_result_t (*close_listen)(void *listen_comm);
	xnccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **device_mhandle);
	xnccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
	xnccl_result_t (*make_vdevice)(int *dev, struct xnccl_vdev_v9 *props);
	xnccl_result_t (*finalize)(void *ctx);
	xnccl_result_t (*set_net_attr)(void *ctx, struct xnccl_net_attr *attr);
};

struct xnccl_net_v12 {
	const char *name;
	xnccl_result_t (*init)(void **ctx, uint64_t comm_id, struct xnccl_comm_config *config,
			       xnccl_logger_t log, xnccl_profiler_cb_t prof);
	xnccl_result_t (*devices)(int *ndev);
	xnccl_result_t (*get_properties)(int dev, struct xnccl_props_v12 *props);
	xnccl_result_t (*listen)(void *ctx, int dev, void *handle, void **listen_comm);
	xnccl_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
				  struct xnccl_dev_handle **send_dev);
	xnccl_result_t (*accept)(void *listen_comm, void **recv_comm,
				 struct xnccl_dev_handle **recv_dev);
	xnccl_result_t (*reg_mr)(void *comm, void *data, size_t size, int type, void **mhandle);
	xnccl_result_t (*reg_mr_dmabuf)(void *comm, void *data, size_t size, int type,
					uint64_t offset, int fd, void **mhandle);
	xnccl_result_t (*dereg_mr)(void *comm, void *mhandle);
	xnccl_result_t (*isend)(void *send_comm, void *data, size_t size, int tag, void *mhandle,
				void *phandle, void **request);
	xnccl_result_t (*irecv)(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				void **mhandles, void **phandles, void **request);
	xnccl_result_t (*iflush)(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
				 void **request);
	xnccl_result_t (*test)(void *request, int *done, int *sizes);
	xnccl_result_t (*close_send)(void *send_comm);
	xnccl_result_t (*close_recv)(void *recv_comm);
	xnccl_result_t (*close_listen)(void *listen_comm);
	xnccl_result_t (*get_device_mr)(void *comm, void *mhandle, void **device_mhandle);
	xnccl_result_t (*irecv_consumed)(void *recv_comm, int n, void *request);
	xnccl_result_t (*make_vdevice)(int *dev, struct xnccl_vdev_v12 *props);
	xnccl_result_t (*finalize)(void *ctx);
	xnccl_result_t (*set_net_attr)(void *ctx, struct xnccl_net_attr *attr);
};

/* ------------------------------------------------------------------------- */
/* Layout checks (LP64: x86-64, aarch64), from NCCL's own layouts            */

#if defined(__LP64__)
#define XNCCL_AT(type, field, off) _Static_assert(offsetof(type, field) == (off), #type "." #field)
#define XNCCL_SIZE(type, n) _Static_assert(sizeof(type) == (n), "sizeof " #type)

_Static_assert(sizeof(xnccl_result_t) == 4, "results are int-sized");
_Static_assert(sizeof(enum xnccl_device_type) == 4, "device types are int-sized");
XNCCL_SIZE(struct xnccl_dev_handle, 32);
XNCCL_AT(struct xnccl_dev_handle, handle, 8);
XNCCL_AT(struct xnccl_dev_handle, size, 16);
XNCCL_AT(struct xnccl_dev_handle, needs_proxy_progress, 24);
XNCCL_SIZE(struct xnccl_vdev_v9, 20);
XNCCL_SIZE(struct xnccl_vdev_v12, 36);
XNCCL_SIZE(struct xnccl_comm_config, 4);
XNCCL_SIZE(struct xnccl_net_attr, 44);

XNCCL_SIZE(struct xnccl_props_v6, 48);
XNCCL_AT(struct xnccl_props_v6, guid, 16);
XNCCL_AT(struct xnccl_props_v6, latency, 36);
XNCCL_AT(struct xnccl_props_v6, max_recvs, 44);
XNCCL_SIZE(struct xnccl_props_v7, 56);
XNCCL_AT(struct xnccl_props_v7, device_type, 48);
XNCCL_SIZE(struct xnccl_props_v8, 64);
XNCCL_AT(struct xnccl_props_v8, reg_is_global, 28);
XNCCL_AT(struct xnccl_props_v8, device_version, 56);
XNCCL_SIZE(struct xnccl_props_v9, 104);
XNCCL_AT(struct xnccl_props_v9, force_flush, 32);
XNCCL_AT(struct xnccl_props_v9, vdev, 64);
XNCCL_AT(struct xnccl_props_v9, max_p2p_bytes, 88);
XNCCL_AT(struct xnccl_props_v9, max_coll_bytes, 96);
XNCCL_SIZE(struct xnccl_props_v11, 112);
XNCCL_AT(struct xnccl_props_v11, max_multi_request_size, 104);
XNCCL_SIZE(struct xnccl_props_v12, 128);
XNCCL_AT(struct xnccl_props_v12, max_p2p_bytes, 104);
XNCCL_AT(struct xnccl_props_v12, max_multi_request_size, 120);
XNCCL_AT(struct xnccl_props_v12, rail_id, 124);
XNCCL_AT(struct xnccl_props_v12, plane_id, 126);

/* Tables: a name and then function pointers, one slot each. */
#define XNCCL_SLOTS(type, n) _Static_assert(sizeof(type) == 8 * (n), "entries of " #type)
XNCCL_SLOTS(struct xnccl_net_v6, 17);
XNCCL_SLOTS(struct xnccl_net_v7, 19);
XNCCL_SLOTS(struct xnccl_net_v8, 19);
XNCCL_SLOTS(struct xnccl_net_v9, 20);
XNCCL_SLOTS(struct xnccl_net_v10, 20);
XNCCL_SLOTS(struct xnccl_net_v11, 22);
XNCCL_SLOTS(struct xnccl_net_v12, 22);
XNCCL_AT(struct xnccl_net_v6, close_listen, 8 * 16);
XNCCL_AT(struct xnccl_net_v7, irecv_consumed, 8 * 18);
XNCCL_AT(struct xnccl_net_v9, make_vdevice, 8 * 19);
XNCCL_AT(struct xnccl_net_v11, finalize, 8 * 20);
XNCCL_AT(struct xnccl_net_v12, set_net_attr, 8 * 21);

#undef XNCCL_AT
#undef XNCCL_SIZE
#undef XNCCL_SLOTS
#endif

#endif
