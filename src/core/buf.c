/* SPDX-License-Identifier: MIT */
/* Public pooled-buffer calls and memory registration. */
#include <errno.h>
#include <stdlib.h>

#include "compiler.h"
#include "engine.h"
#include "log.h"

XPI_EXPORT int xp_buf_get(xp_context_t *ctx, size_t size, xp_buf_t **buf)
{
	if (ctx == NULL || buf == NULL)
		return xpi_fail(-EINVAL, "xp_buf_get: %s is NULL",
				ctx == NULL ? "the context" : "the buffer pointer");
	return xpi_pool_get(ctx->pool, size, buf);
}

XPI_EXPORT void *xp_buf_data(const xp_buf_t *buf)
{
	return buf != NULL ? buf->data : NULL;
}

XPI_EXPORT size_t xp_buf_len(const xp_buf_t *buf)
{
	return buf != NULL ? buf->len : 0;
}

XPI_EXPORT void xp_buf_release(xp_buf_t *buf)
{
	if (buf != NULL)
		xpi_buf_put(buf);
}

XPI_EXPORT int xp_mem_register(xp_context_t *ctx, void *addr, size_t len, xp_mem_t **mem)
{
	if (ctx == NULL || addr == NULL || len == 0 || mem == NULL)
		return xpi_fail(-EINVAL, "xp_mem_register: %s",
				ctx == NULL  ? "the context is NULL" :
				addr == NULL ? "the address is NULL" :
				len == 0     ? "the length is 0" :
					       "the registration pointer is NULL");
	xp_mem_t *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return xpi_fail(-ENOMEM, "rank %d: xp_mem_register: no memory for the registration",
				ctx->rank);
	struct xpi_reg *g = &m->reg;
	g->ctx = ctx;
	g->addr = addr;
	g->len = len;
	/* Backends' hooks are thread-safe, so they run here, on the caller's
	 * thread; only the owner's index of registrations goes through cmdq,
	 * whose step also registers with transports added meanwhile. */
	int ntls = ctx->ntls;
	for (int i = 0; i < ntls; i++) {
		int rc = ctx->tls[i].ops->mem_reg(ctx->tls[i].tl, addr, len, &g->handles[i]);
		if (rc < 0) {
			while (--i >= 0)
				ctx->tls[i].ops->mem_dereg(ctx->tls[i].tl, g->handles[i]);
			free(m);
			return rc;
		}
		g->nregistered = i + 1;
	}
	g->cmd.type = XPI_CMD_MEM_ADD;
	xpi_engine_submit(ctx, &g->cmd);
	*mem = m;
	return 0;
}

XPI_EXPORT void xp_mem_deregister(xp_mem_t *mem)
{
	if (mem == NULL)
		return;
	/* The owner unlinks it, runs the backends' dereg hooks and frees it. */
	mem->reg.del_cmd.type = XPI_CMD_MEM_DEL;
	xpi_engine_submit(mem->reg.ctx, &mem->reg.del_cmd);
}
