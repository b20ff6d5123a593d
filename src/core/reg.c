/* SPDX-License-Identifier: MIT */
/*
 * The rank's index of user registrations (xp_mem_register): which one
 * covers a buffer, for send_rts, rndv_offer and rndv_fetch. A sorted array
 * by start address with, beside it, the largest end address of every entry
 * up to each position: a lookup binary-searches the last entry starting at
 * or before the buffer and walks back only while an earlier entry could
 * still reach past it, so it costs O(log n) unless registrations overlap
 * heavily. Registering is rare and pays the O(n) insert. Owner only.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static uint64_t end_of(const struct xpi_reg *g)
{
	return (uint64_t)(uintptr_t)g->addr + g->len;
}

/* Recomputes the running maximum of end addresses from position @from on. */
static void refresh_max_end(xp_context_t *ctx, uint32_t from)
{
	uint64_t m = from > 0 ? ctx->reg_max_end[from - 1] : 0;
	for (uint32_t i = from; i < ctx->nregs; i++) {
		if (end_of(ctx->regs[i]) > m)
			m = end_of(ctx->regs[i]);
		ctx->reg_max_end[i] = m;
	}
}

/* The first position whose entry starts after @addr. */
static uint32_t upper_bound(const xp_context_t *ctx, uintptr_t addr)
{
	uint32_t lo = 0, hi = ctx->nregs;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if ((uintptr_t)ctx->regs[mid]->addr <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

int xpi_reg_insert(xp_context_t *ctx, struct xpi_reg *g)
{
	if (ctx->nregs == ctx->regs_cap) {
		uint32_t cap = ctx->regs_cap != 0 ? 2 * ctx->regs_cap : 16;
		struct xpi_reg **v = realloc(ctx->regs, cap * sizeof(*v));
		if (v == NULL)
			return -ENOMEM;
		ctx->regs = v;
		uint64_t *e = realloc(ctx->reg_max_end, cap * sizeof(*e));
		if (e == NULL)
			return -ENOMEM;
		ctx->reg_max_end = e;
		ctx->regs_cap = cap;
	}
	uint32_t pos = upper_bound(ctx, (uintptr_t)g->addr);
	memmove(&ctx->regs[pos + 1], &ctx->regs[pos], (ctx->nregs - pos) * sizeof(*ctx->regs));
	ctx->regs[pos] = g;
	ctx->nregs++;
	g->indexed = true;
	refresh_max_end(ctx, pos);
	return 0;
}

void xpi_reg_remove(xp_context_t *ctx, struct xpi_reg *g)
{
	if (!g->indexed)
		return;
	for (uint32_t i = upper_bound(ctx, (uintptr_t)g->addr); i-- > 0;) {
		if (ctx->regs[i] != g)
			continue;
		memmove(&ctx->regs[i], &ctx->regs[i + 1],
			(ctx->nregs - i - 1) * sizeof(*ctx->regs));
		ctx->nregs--;
		g->indexed = false;
		refresh_max_end(ctx, i);
		return;
	}
}

const struct xpi_reg *xpi_reg_find(const xp_context_t *ctx, const void *buf, size_t len)
{
	uintptr_t b = (uintptr_t)buf;
	uint64_t end = (uint64_t)b + len;
	for (uint32_t i = upper_bound(ctx, b); i-- > 0;) {
		if (ctx->reg_max_end[i] < end)
			return NULL; /* nothing at or before i reaches that far */
		if (end_of(ctx->regs[i]) >= end)
			return ctx->regs[i];
	}
	return NULL;
}

int xpi_reg_with_tl(xp_context_t *ctx, int i, struct xpi_reg *g)
{
	const struct xpi_tl_ops *ops = ctx->tls[i].ops;
	if (g->dmabuf_fd >= 0 && ops->mem_reg_dmabuf != NULL)
		return ops->mem_reg_dmabuf(ctx->tls[i].tl, g->dmabuf_fd, g->dmabuf_offset, g->addr,
					   g->len, &g->handles[i]);
	return ops->mem_reg(ctx->tls[i].tl, g->addr, g->len, &g->handles[i]);
}
