/* SPDX-License-Identifier: MIT */
/* Public pooled-buffer calls and memory registration. */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

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

/* Registers @m's range with every transport of the context, then hands it
 * to the owner's index. On failure nothing stays registered and @m is
 * freed. */
static int register_everywhere(xp_context_t *ctx, xp_mem_t *m, xp_mem_t **mem)
{
	struct xpi_reg *g = &m->reg;
	/* Backends' hooks are thread-safe, so they run here, on the caller's
	 * thread; only the owner's index of registrations goes through cmdq,
	 * whose step also registers with transports added meanwhile. */
	int ntls = ctx->ntls;
	for (int i = 0; i < ntls; i++) {
		int rc = xpi_reg_with_tl(ctx, i, g);
		if (rc < 0) {
			while (--i >= 0)
				ctx->tls[i].ops->mem_dereg(ctx->tls[i].tl, g->handles[i]);
			if (g->dmabuf_fd >= 0)
				close(g->dmabuf_fd);
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
	m->reg.ctx = ctx;
	m->reg.addr = addr;
	m->reg.len = len;
	m->reg.dmabuf_fd = -1;
	return register_everywhere(ctx, m, mem);
}

XPI_EXPORT int xp_mem_register_dmabuf(xp_context_t *ctx, int fd, uint64_t offset, size_t len,
				      void *addr, xp_mem_t **mem)
{
	if (ctx == NULL || fd < 0 || addr == NULL || len == 0 || mem == NULL)
		return xpi_fail(fd < 0 ? -EBADF : -EINVAL, "xp_mem_register_dmabuf: %s",
				ctx == NULL  ? "the context is NULL" :
				fd < 0       ? "the dmabuf fd is negative" :
				addr == NULL ? "the address is NULL" :
				len == 0     ? "the length is 0" :
					       "the registration pointer is NULL");
	/* A dmabuf's size is where a seek to its end lands (dma-buf.c); a
	 * range beyond it would fail later, in a backend, less clearly. */
	off_t size = lseek(fd, 0, SEEK_END);
	if (size < 0)
		return xpi_fail(-errno, "rank %d: xp_mem_register_dmabuf: fd %d has no size (%s)",
				ctx->rank, fd, xp_strerror(-errno));
	(void)lseek(fd, 0, SEEK_SET);
	if (offset > (uint64_t)size || len > (uint64_t)size - offset)
		return xpi_fail(-EINVAL,
				"rank %d: xp_mem_register_dmabuf: %zu bytes from offset %llu pass "
				"the end of the dmabuf (fd %d, %lld bytes)",
				ctx->rank, len, (unsigned long long)offset, fd, (long long)size);
	xp_mem_t *m = calloc(1, sizeof(*m));
	if (m == NULL)
		return xpi_fail(-ENOMEM,
				"rank %d: xp_mem_register_dmabuf: no memory for the registration",
				ctx->rank);
	/* Our own fd, for transports added after this call: the program may
	 * close its own as soon as we return. */
	m->reg.dmabuf_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (m->reg.dmabuf_fd < 0) {
		int rc = -errno;
		free(m);
		return xpi_fail(rc, "rank %d: xp_mem_register_dmabuf: cannot duplicate fd %d: %s",
				ctx->rank, fd, xp_strerror(rc));
	}
	m->reg.ctx = ctx;
	m->reg.addr = addr;
	m->reg.len = len;
	m->reg.dmabuf_offset = offset;
	return register_everywhere(ctx, m, mem);
}

XPI_EXPORT void xp_mem_deregister(xp_mem_t *mem)
{
	if (mem == NULL)
		return;
	/* The owner unlinks it, runs the backends' dereg hooks and frees it. */
	mem->reg.del_cmd.type = XPI_CMD_MEM_DEL;
	xpi_engine_submit(mem->reg.ctx, &mem->reg.del_cmd);
}
