/* SPDX-License-Identifier: MIT */
/*
 * Memory registrations: regMr, regMrDmaBuf, deregMr.
 *
 * xport registers memory with the context, not with a connection
 * (xp_mem_register), so the comm NCCL names only has to be one of ours and
 * the registration serves every comm (regIsGlobal). Sends and receives
 * find it by address, so isend and irecv need not be given the handle.
 * Device memory is refused: over TCP the CPU touches every byte, and it
 * cannot reach GPU memory.
 */
#include <errno.h>
#include <stdlib.h>

#include "plugin.h"

/* Whether @comm may carry a registration: a send or receive comm of ours.
 * NULL too, since the registration does not depend on it. */
static bool comm_ok(void *comm)
{
	return comm == NULL || xpn_obj_check(comm, XPN_SEND) != NULL ||
	       xpn_obj_check(comm, XPN_RECV) != NULL;
}

static bool type_ok(int type, const char *call)
{
	if (type == XNCCL_PTR_HOST)
		return true;
	if (type & XNCCL_PTR_CUDA)
		XPN_WARN("NET/xport : %s: GPU memory (type %d) cannot be registered: this plugin "
			 "moves host memory only (its ptrSupport is NCCL_PTR_HOST)",
			 call, type);
	else
		XPN_WARN("NET/xport : %s: memory type %d is not one we know", call, type);
	return false;
}

/* A registration made by @reg (given the context), or an error. */
static xnccl_result_t mr_make(void *comm, size_t size, void **mhandle, const char *call,
			      int (*reg)(xp_context_t *, const void *, xp_mem_t **),
			      const void *arg)
{
	if (!comm_ok(comm) || mhandle == NULL) {
		XPN_WARN("NET/xport : %s: %p is not a comm of ours", call, comm);
		return XNCCL_INTERNAL_ERROR;
	}
	xp_context_t *ctx;
	if (xpn_ctx() == NULL || xpn_ctx_get(&ctx) < 0) {
		XPN_WARN("NET/xport : %s: called before init", call);
		return XNCCL_INTERNAL_ERROR;
	}
	struct xpn_mr *mr = calloc(1, sizeof(*mr));
	/* An empty range registers nothing: xport has nothing to pin, and
	 * NCCL still gets a handle to give back. */
	int rc = mr == NULL ? -ENOMEM : size == 0 ? 0 : reg(ctx, arg, &mr->mem);
	if (rc < 0) {
		free(mr);
		xpn_ctx_put();
		return XPN_FAIL(rc, call);
	}
	xpn_obj_add(&mr->obj, XPN_MR);
	*mhandle = mr;
	return XNCCL_OK;
}

struct host_range {
	void *data;
	size_t size;
};

static int reg_host(xp_context_t *ctx, const void *arg, xp_mem_t **mem)
{
	const struct host_range *r = arg;
	return xp_mem_register(ctx, r->data, r->size, mem);
}

xnccl_result_t xpn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	if (!type_ok(type, "regMr"))
		return XNCCL_INTERNAL_ERROR;
	struct host_range r = { data, size };
	return mr_make(comm, size, mhandle, "regMr", reg_host, &r);
}

struct dmabuf_range {
	void *data;
	size_t size;
	uint64_t offset;
	int fd;
};

/* A device on a lane that cannot take dmabufs (soft-RoCE) refuses it:
 * the CPU's mapping of it is then registered, as any host memory, which
 * is what the connections move it through anyway. */
static int reg_dmabuf(xp_context_t *ctx, const void *arg, xp_mem_t **mem)
{
	const struct dmabuf_range *r = arg;
	int rc = xp_mem_register_dmabuf(ctx, r->fd, r->offset, r->size, r->data, mem);
	if (rc != -EOPNOTSUPP)
		return rc;
	XPN_INFO("NET/xport : regMrDmaBuf: %s; registering the buffer's mapping at %p instead",
		 xp_error_detail(), r->data);
	return xp_mem_register(ctx, r->data, r->size, mem);
}

/*
 * A dmabuf the CPU can map at @data (type NCCL_PTR_HOST): xport reads and
 * writes it through that mapping over TCP. NCCL itself never calls this,
 * since we do not say NCCL_PTR_DMABUF: it hands dmabufs only for GPU
 * memory, which TCP cannot reach.
 */
xnccl_result_t xpn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				 int fd, void **mhandle)
{
	if (!type_ok(type, "regMrDmaBuf"))
		return XNCCL_INTERNAL_ERROR;
	struct dmabuf_range r = { data, size, offset, fd };
	return mr_make(comm, size, mhandle, "regMrDmaBuf", reg_dmabuf, &r);
}

xnccl_result_t xpn_dereg_mr(void *comm, void *mhandle)
{
	if (mhandle == NULL)
		return XNCCL_OK;
	if (!xpn_obj_remove(mhandle, XPN_MR)) {
		XPN_WARN("NET/xport : deregMr: %p is not a registration of ours (deregistered "
			 "twice?)",
			 mhandle);
		return XNCCL_INTERNAL_ERROR;
	}
	struct xpn_mr *mr = mhandle;
	xp_mem_deregister(mr->mem);
	free(mr);
	xpn_ctx_put();
	return XNCCL_OK;
}
