/* SPDX-License-Identifier: MIT */
/*
 * One version's table, called as NCCL calls it: each function takes the
 * newest arguments and calls the version's entry with that version's
 * types (int sizes before v9, no device handles in v6, a context from v11
 * on), as NCCL's loader (src/plugin/net/net_v*.cc) adapts its core to
 * each. The plugin's own adapters are what these calls test.
 */
#include <dlfcn.h>
#include <limits.h>
#include <string.h>

#include "harness.h"

#define T6(n) ((const struct xnccl_net_v6 *)(n)->table)
#define T7(n) ((const struct xnccl_net_v7 *)(n)->table)
#define T8(n) ((const struct xnccl_net_v8 *)(n)->table)
#define T9(n) ((const struct xnccl_net_v9 *)(n)->table)
#define T10(n) ((const struct xnccl_net_v10 *)(n)->table)
#define T11(n) ((const struct xnccl_net_v11 *)(n)->table)
#define T12(n) ((const struct xnccl_net_v12 *)(n)->table)

/* The calls whose signature is the same in every version, through any
 * version's table: the struct's layout is what NCCL relies on. */
#define SAME(n, field, ...)                                                                        \
	((n)->version == 6  ? T6(n)->field(__VA_ARGS__) :                                          \
	 (n)->version == 7  ? T7(n)->field(__VA_ARGS__) :                                          \
	 (n)->version == 8  ? T8(n)->field(__VA_ARGS__) :                                          \
	 (n)->version == 9  ? T9(n)->field(__VA_ARGS__) :                                          \
	 (n)->version == 10 ? T10(n)->field(__VA_ARGS__) :                                         \
	 (n)->version == 11 ? T11(n)->field(__VA_ARGS__) :                                         \
			      T12(n)->field(__VA_ARGS__))

const char *h_result_name(int res)
{
	static const char *names[] = { "ncclSuccess",         "ncclUnhandledCudaError",
				       "ncclSystemError",     "ncclInternalError",
				       "ncclInvalidArgument", "ncclInvalidUsage",
				       "ncclRemoteError" };
	return res >= 0 && res < 7 ? names[res] : "not an ncclResult_t";
}

void h_net_load(struct h_net *n, const char *path, int version)
{
	void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL)
		H_FAIL("dlopen %s: %s", path, dlerror());
	char sym[32];
	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
	const void *t = dlsym(lib, sym);
	if (t == NULL || version < 6 || version > 12)
		H_FAIL("%s: no %s", path, sym);
	/* Every version NCCL 2.18 to 2.30 looks for is there. */
	for (int v = 6; v <= 12; v++) {
		snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", v);
		if (dlsym(lib, sym) == NULL)
			H_FAIL("%s: no %s", path, sym);
	}
	*n = (struct h_net){ .version = version, .table = t };
	n->name = *(const char *const *)t; /* the first entry of every version */
}

int h_net_init(struct h_net *n)
{
	switch (n->version) {
	case 6:
		return T6(n)->init(h_logger);
	case 7:
		return T7(n)->init(h_logger);
	case 8:
		return T8(n)->init(h_logger);
	case 9:
		return T9(n)->init(h_logger);
	case 10:
		return T10(n)->init(h_logger, NULL);
	default:
		return h_net_init_ctx(n, &n->ctx, 0x1234);
	}
}

int h_net_init_ctx(struct h_net *n, void **ctx, uint64_t comm_id)
{
	struct xnccl_comm_config cfg = { .traffic_class = -1 };
	if (n->version == 11)
		return T11(n)->init(ctx, comm_id, &cfg, h_logger, NULL);
	if (n->version == 12)
		return T12(n)->init(ctx, comm_id, &cfg, h_logger, NULL);
	return -1;
}

int h_net_finalize(struct h_net *n, void *ctx)
{
	if (n->version == 11)
		return T11(n)->finalize(ctx);
	if (n->version == 12)
		return T12(n)->finalize(ctx);
	return XNCCL_OK; /* nothing to finalize before v11 */
}

int h_net_devices(struct h_net *n, int *ndev)
{
	return SAME(n, devices, ndev);
}

/* The version's getProperties into a buffer with room past @size, filled
 * with a pattern: fails if the plugin wrote past this version's layout. */
static int props_raw(struct h_net *n, int dev, void *out, size_t size)
{
	union {
		struct xnccl_props_v12 align;
		unsigned char b[sizeof(struct xnccl_props_v12) + 64];
	} u;
	memset(&u, 0xa5, sizeof(u));
	void *p = u.b;
	int r;
	switch (n->version) {
	case 6:
		r = T6(n)->get_properties(dev, p);
		break;
	case 7:
		r = T7(n)->get_properties(dev, p);
		break;
	case 8:
		r = T8(n)->get_properties(dev, p);
		break;
	case 9:
		r = T9(n)->get_properties(dev, p);
		break;
	case 10:
		r = T10(n)->get_properties(dev, p);
		break;
	case 11:
		r = T11(n)->get_properties(dev, p);
		break;
	default:
		r = T12(n)->get_properties(dev, p);
		break;
	}
	for (size_t k = size; k < sizeof(u.b); k++)
		if (u.b[k] != 0xa5)
			H_FAIL("getProperties (v%d) wrote byte %zu past its %zu", n->version, k,
			       size);
	memcpy(out, u.b, size);
	return r;
}

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
#define PROPS_NEWER(d, s)                                                                          \
	do {                                                                                       \
		(d)->reg_is_global = (s).reg_is_global;                                            \
		(d)->force_flush = (s).force_flush;                                                \
		(d)->device_type = (int)(s).device_type;                                           \
		(d)->device_version = (s).device_version;                                          \
		(d)->vdev_ndevs = (s).vdev.ndevs;                                                  \
		(d)->vdev0 = (s).vdev.devs[0];                                                     \
		(d)->max_p2p_bytes = (s).max_p2p_bytes;                                            \
		(d)->max_coll_bytes = (s).max_coll_bytes;                                          \
	} while (0)

int h_net_props(struct h_net *n, int dev, struct h_props *p)
{
	/* What a version lacks reads as NCCL's loader fills it in. */
	*p = (struct h_props){ .reg_is_global = 0,
			       .vdev_ndevs = 1,
			       .max_multi_request_size = 1,
			       .rail_id = -1,
			       .plane_id = -1 };
	int r;
	switch (n->version) {
	case 6: {
		struct xnccl_props_v6 s;
		r = props_raw(n, dev, &s, sizeof(s));
		PROPS_BASE(p, s);
		break;
	}
	case 7: {
		struct xnccl_props_v7 s;
		r = props_raw(n, dev, &s, sizeof(s));
		PROPS_BASE(p, s);
		p->device_type = (int)s.device_type;
		p->device_version = s.device_version;
		break;
	}
	case 8: {
		struct xnccl_props_v8 s;
		r = props_raw(n, dev, &s, sizeof(s));
		PROPS_BASE(p, s);
		p->reg_is_global = s.reg_is_global;
		p->device_type = (int)s.device_type;
		p->device_version = s.device_version;
		break;
	}
	case 9:
	case 10: {
		struct xnccl_props_v9 s;
		r = props_raw(n, dev, &s, sizeof(s));
		PROPS_BASE(p, s);
		PROPS_NEWER(p, s);
		break;
	}
	case 11: {
		struct xnccl_props_v11 s;
		r = props_raw(n, dev, &s, sizeof(s));
		PROPS_BASE(p, s);
		PROPS_NEWER(p, s);
		p->max_multi_request_size = s.max_multi_request_size;
		break;
	}
	default: {
		struct xnccl_props_v12 s;
		r = props_raw(n, dev, &s, sizeof(s));
		PROPS_BASE(p, s);
		PROPS_NEWER(p, s);
		p->max_multi_request_size = s.max_multi_request_size;
		p->rail_id = s.rail_id;
		p->plane_id = s.plane_id;
		break;
	}
	}
	return r;
}

int h_net_listen(struct h_net *n, void *handle, void **lc)
{
	switch (n->version) {
	case 6:
		return T6(n)->listen(0, handle, lc);
	case 7:
		return T7(n)->listen(0, handle, lc);
	case 8:
		return T8(n)->listen(0, handle, lc);
	case 9:
		return T9(n)->listen(0, handle, lc);
	case 10:
		return T10(n)->listen(0, handle, lc);
	case 11:
		return T11(n)->listen(n->ctx, 0, handle, lc);
	default:
		return T12(n)->listen(n->ctx, 0, handle, lc);
	}
}

int h_net_connect(struct h_net *n, void *handle, void **sc)
{
	/* NCCL passes a place for a device handle and leaves it NULL: it
	 * asks for no device offload from a host plugin. */
	struct xnccl_dev_handle *dev = NULL;
	struct xnccl_comm_config cfg = { .traffic_class = -1 };
	int r;
	switch (n->version) {
	case 6:
		return T6(n)->connect(0, handle, sc);
	case 7:
		r = T7(n)->connect(0, handle, sc, &dev);
		break;
	case 8:
		r = T8(n)->connect(0, handle, sc, &dev);
		break;
	case 9:
		r = T9(n)->connect(0, handle, sc, &dev);
		break;
	case 10:
		r = T10(n)->connect(0, &cfg, handle, sc, &dev);
		break;
	case 11:
		r = T11(n)->connect(n->ctx, 0, handle, sc, &dev);
		break;
	default:
		r = T12(n)->connect(n->ctx, 0, handle, sc, &dev);
		break;
	}
	H_CHECK(dev == NULL);
	return r;
}

int h_net_accept(struct h_net *n, void *lc, void **rc)
{
	struct xnccl_dev_handle *dev = NULL;
	int r;
	switch (n->version) {
	case 6:
		return T6(n)->accept(lc, rc);
	case 7:
		r = T7(n)->accept(lc, rc, &dev);
		break;
	case 8:
		r = T8(n)->accept(lc, rc, &dev);
		break;
	case 9:
		r = T9(n)->accept(lc, rc, &dev);
		break;
	case 10:
		r = T10(n)->accept(lc, rc, &dev);
		break;
	case 11:
		r = T11(n)->accept(lc, rc, &dev);
		break;
	default:
		r = T12(n)->accept(lc, rc, &dev);
		break;
	}
	H_CHECK(dev == NULL);
	return r;
}

int h_net_reg_mr(struct h_net *n, void *comm, void *data, size_t size, int type, void **mh)
{
	if (n->version <= 7) {
		/* NCCL's loader refuses 2 GiB and more for these itself. */
		H_CHECK(size < (size_t)INT_MAX);
		return n->version == 6 ? T6(n)->reg_mr(comm, data, (int)size, type, mh) :
					 T7(n)->reg_mr(comm, data, (int)size, type, mh);
	}
	switch (n->version) {
	case 8:
		return T8(n)->reg_mr(comm, data, size, type, mh);
	case 9:
		return T9(n)->reg_mr(comm, data, size, type, mh);
	case 10:
		return T10(n)->reg_mr(comm, data, size, type, mh);
	case 11:
		return T11(n)->reg_mr(comm, data, size, type, mh);
	default:
		return T12(n)->reg_mr(comm, data, size, type, mh);
	}
}

int h_net_reg_mr_dmabuf(struct h_net *n, void *comm, void *data, size_t size, int type,
			uint64_t offset, int fd, void **mh)
{
	return SAME(n, reg_mr_dmabuf, comm, data, size, type, offset, fd, mh);
}

int h_net_dereg_mr(struct h_net *n, void *comm, void *mh)
{
	return SAME(n, dereg_mr, comm, mh);
}

int h_net_isend(struct h_net *n, void *sc, void *data, size_t size, int tag, void *mh, void **req)
{
	if (n->version <= 8) {
		H_CHECK(size <= (size_t)INT_MAX);
		int s = (int)size;
		return n->version == 6 ? T6(n)->isend(sc, data, s, tag, mh, req) :
		       n->version == 7 ? T7(n)->isend(sc, data, s, tag, mh, req) :
					 T8(n)->isend(sc, data, s, tag, mh, req);
	}
	switch (n->version) {
	case 9:
		return T9(n)->isend(sc, data, size, tag, mh, req);
	case 10:
		return T10(n)->isend(sc, data, size, tag, mh, NULL, req);
	case 11:
		return T11(n)->isend(sc, data, size, tag, mh, NULL, req);
	default:
		return T12(n)->isend(sc, data, size, tag, mh, NULL, req);
	}
}

int h_net_irecv(struct h_net *n, void *rc, int cnt, void **data, size_t *sizes, int *tags,
		void **mhs, void **req)
{
	if (n->version <= 8) {
		int s[16];
		for (int k = 0; k < cnt && k < 16; k++) {
			H_CHECK(sizes[k] <= (size_t)INT_MAX);
			s[k] = (int)sizes[k];
		}
		return n->version == 6 ? T6(n)->irecv(rc, cnt, data, s, tags, mhs, req) :
		       n->version == 7 ? T7(n)->irecv(rc, cnt, data, s, tags, mhs, req) :
					 T8(n)->irecv(rc, cnt, data, s, tags, mhs, req);
	}
	/* From v9 on, NCCL may pass *req holding its "completion optional"
	 * mark (LL protocols): the plugin must still give a real request. */
	*req = XNCCL_OPTIONAL_RECV_COMPLETION;
	switch (n->version) {
	case 9:
		return T9(n)->irecv(rc, cnt, data, sizes, tags, mhs, req);
	case 10:
		return T10(n)->irecv(rc, cnt, data, sizes, tags, mhs, NULL, req);
	case 11:
		return T11(n)->irecv(rc, cnt, data, sizes, tags, mhs, NULL, req);
	default:
		return T12(n)->irecv(rc, cnt, data, sizes, tags, mhs, NULL, req);
	}
}

int h_net_iflush(struct h_net *n, void *rc, int cnt, void **data, int *sizes, void **mhs,
		 void **req)
{
	return SAME(n, iflush, rc, cnt, data, sizes, mhs, req);
}

int h_net_test(struct h_net *n, void *req, int *done, int *sizes)
{
	return SAME(n, test, req, done, sizes);
}

int h_net_close_send(struct h_net *n, void *sc)
{
	return SAME(n, close_send, sc);
}

int h_net_close_recv(struct h_net *n, void *rc)
{
	return SAME(n, close_recv, rc);
}

int h_net_close_listen(struct h_net *n, void *lc)
{
	return SAME(n, close_listen, lc);
}

int h_net_host_entries_empty(struct h_net *n)
{
	switch (n->version) {
	case 6:
		return 1;
	case 7:
		return T7(n)->get_device_mr == NULL && T7(n)->irecv_consumed == NULL;
	case 8:
		return T8(n)->get_device_mr == NULL && T8(n)->irecv_consumed == NULL;
	case 9:
		return T9(n)->get_device_mr == NULL && T9(n)->irecv_consumed == NULL &&
		       T9(n)->make_vdevice == NULL;
	case 10:
		return T10(n)->get_device_mr == NULL && T10(n)->irecv_consumed == NULL &&
		       T10(n)->make_vdevice == NULL;
	case 11:
		return T11(n)->get_device_mr == NULL && T11(n)->irecv_consumed == NULL &&
		       T11(n)->make_vdevice == NULL && T11(n)->set_net_attr == NULL &&
		       T11(n)->finalize != NULL;
	default:
		return T12(n)->get_device_mr == NULL && T12(n)->irecv_consumed == NULL &&
		       T12(n)->make_vdevice == NULL && T12(n)->set_net_attr == NULL &&
		       T12(n)->finalize != NULL;
	}
}

void h_net_connect_pair(struct h_net *n, void *lc, void *peer_handle, void **sc, void **rc,
			double timeout_s)
{
	*sc = *rc = NULL;
	double end = h_now() + timeout_s;
	long polls = 0;
	while (*sc == NULL || *rc == NULL) {
		if (*sc == NULL)
			H_OK(h_net_connect(n, peer_handle, sc));
		if (*rc == NULL)
			H_OK(h_net_accept(n, lc, rc));
		polls++;
		if (h_now() > end)
			H_FAIL("not connected after %.0f s (%ld polls; send comm %p, receive comm "
			       "%p)",
			       timeout_s, polls, *sc, *rc);
	}
}

void h_net_wait(struct h_net *n, void *req, int *sizes, double timeout_s)
{
	H_CHECK(req != NULL);
	double end = h_now() + timeout_s;
	int done = 0;
	while (!done) {
		H_OK(h_net_test(n, req, &done, sizes));
		if (!done && h_now() > end)
			H_FAIL("request %p not done after %.0f s", req, timeout_s);
	}
}
