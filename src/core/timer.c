/* SPDX-License-Identifier: MIT */
/*
 * The engine's deadlines for its backends: a binary min-heap of armed
 * timers, each knowing its place so it can be moved or cancelled in
 * O(log n). Progress fires the due ones; a sleeping waiter wakes by the
 * earliest. Owner only, so nothing here is atomic.
 */
#include <errno.h>
#include <stdlib.h>

#include "engine.h"

static void heap_set(xp_context_t *ctx, uint32_t i, struct xpi_timer *t)
{
	ctx->timers[i] = t;
	t->heap_pos = i + 1;
}

static void sift_up(xp_context_t *ctx, uint32_t i)
{
	struct xpi_timer *t = ctx->timers[i];
	while (i > 0) {
		uint32_t parent = (i - 1) / 2;
		if (ctx->timers[parent]->deadline_ns <= t->deadline_ns)
			break;
		heap_set(ctx, i, ctx->timers[parent]);
		i = parent;
	}
	heap_set(ctx, i, t);
}

static void sift_down(xp_context_t *ctx, uint32_t i)
{
	struct xpi_timer *t = ctx->timers[i];
	for (;;) {
		uint32_t child = 2 * i + 1;
		if (child >= ctx->ntimers)
			break;
		if (child + 1 < ctx->ntimers &&
		    ctx->timers[child + 1]->deadline_ns < ctx->timers[child]->deadline_ns)
			child++;
		if (t->deadline_ns <= ctx->timers[child]->deadline_ns)
			break;
		heap_set(ctx, i, ctx->timers[child]);
		i = child;
	}
	heap_set(ctx, i, t);
}

/* Takes the entry at @i out of the heap. */
static void heap_remove(xp_context_t *ctx, uint32_t i)
{
	struct xpi_timer *last = ctx->timers[--ctx->ntimers];
	ctx->timers[i]->heap_pos = 0;
	if (i == ctx->ntimers)
		return;
	heap_set(ctx, i, last);
	sift_down(ctx, i);
	sift_up(ctx, last->heap_pos - 1);
}

int xpi_timer_arm(xp_context_t *ctx, struct xpi_timer *t, int64_t deadline_ns)
{
	if (t->heap_pos != 0) {
		uint32_t i = t->heap_pos - 1;
		t->deadline_ns = deadline_ns;
		sift_down(ctx, i);
		sift_up(ctx, t->heap_pos - 1);
		return 0;
	}
	if (ctx->ntimers == ctx->timers_cap) {
		uint32_t cap = ctx->timers_cap != 0 ? 2 * ctx->timers_cap : 16;
		struct xpi_timer **grown = realloc(ctx->timers, cap * sizeof(*grown));
		if (grown == NULL)
			return -ENOMEM;
		ctx->timers = grown;
		ctx->timers_cap = cap;
	}
	t->deadline_ns = deadline_ns;
	heap_set(ctx, ctx->ntimers++, t);
	sift_up(ctx, ctx->ntimers - 1);
	return 0;
}

void xpi_timer_cancel(xp_context_t *ctx, struct xpi_timer *t)
{
	if (t->heap_pos != 0)
		heap_remove(ctx, t->heap_pos - 1);
}

int xpi_timers_run(xp_context_t *ctx, int64_t now_ns)
{
	int n = 0;
	/* A timer may re-arm itself (or others) from fire(). Each call fires
	 * at most as many as were armed when it began, so one that re-arms
	 * itself for a time already past fires again at the next call, and
	 * this loop always ends. */
	uint32_t budget = ctx->ntimers;
	while (budget-- != 0 && ctx->ntimers != 0 && ctx->timers[0]->deadline_ns <= now_ns) {
		struct xpi_timer *t = ctx->timers[0];
		heap_remove(ctx, 0);
		t->fire(ctx, t);
		n++;
	}
	return n;
}
