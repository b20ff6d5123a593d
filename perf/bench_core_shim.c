/* SPDX-License-Identifier: MIT */
/*
 * C side of bench_core. The pool, MPSC queue and free-stack headers use C11
 * _Atomic, which C++17 cannot parse, so the loops that exercise them live
 * here and bench_core.cpp calls them with plain types. Each call runs a
 * whole batch, so the out-of-line call costs a fraction of a nanosecond per
 * operation instead of landing on every one of them.
 *
 * The prototypes are repeated in bench_core.cpp; keep the two in step.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "xport/xport.h"
#include "core/engine.h"
#include "core/free_stack.h"
#include "core/mpsc.h"
#include "core/pool.h"
#include "coll/reduce.h"

struct bc_mpsc {
	struct xpi_mpsc q;
	int nnodes;
	struct xpi_qnode *nodes;
};

struct bc_stack {
	struct xpi_free_stack stack;
};

struct xpi_pool *bc_pool_create(size_t max_bytes);
void bc_pool_destroy(struct xpi_pool *pool);
int bc_pool_get_put(struct xpi_pool *pool, size_t size, long n);
struct bc_mpsc *bc_mpsc_create(int nnodes);
void bc_mpsc_destroy(struct bc_mpsc *q);
long bc_mpsc_run(struct bc_mpsc *q, long n, int burst);
struct bc_stack *bc_stack_create(uint32_t capacity);
void bc_stack_destroy(struct bc_stack *r);
long bc_stack_run(struct bc_stack *r, long n, int burst, int thread);
struct bc_regs *bc_regs_create(int n);
void bc_regs_destroy(struct bc_regs *r);
long bc_regs_find(struct bc_regs *r, long n);
long bc_regs_find_linear(struct bc_regs *r, long n);
void bc_reduce(void *acc, const void *in, size_t count, int work, int op);
void bc_f16_to_f32(float *out, const uint16_t *in, size_t n);
void bc_f32_to_f16(uint16_t *out, const float *in, size_t n);

/* Ordinary pages: hugetlb availability differs between hosts and would make
 * runs incomparable; the free-list code is the same either way. */
struct xpi_pool *bc_pool_create(size_t max_bytes)
{
	struct xpi_pool *pool;
	return xpi_pool_create(max_bytes, XP_HUGEPAGES_OFF, &pool) == 0 ? pool : NULL;
}

void bc_pool_destroy(struct xpi_pool *pool)
{
	xpi_pool_destroy(pool);
}

/* @n times: take a buffer of @size bytes and give it back. 0 or -ENOBUFS. */
int bc_pool_get_put(struct xpi_pool *pool, size_t size, long n)
{
	for (long i = 0; i < n; i++) {
		struct xp_buf *b;
		int rc = xpi_pool_get(pool, size, &b);
		if (rc < 0)
			return rc;
		xpi_buf_put(b);
	}
	return 0;
}

struct bc_mpsc *bc_mpsc_create(int nnodes)
{
	struct bc_mpsc *q = aligned_alloc(64, (sizeof(*q) + 63) & ~(size_t)63);
	if (q == NULL)
		return NULL;
	q->nodes = calloc((size_t)nnodes, sizeof(*q->nodes));
	if (q->nodes == NULL) {
		free(q);
		return NULL;
	}
	q->nnodes = nnodes;
	xpi_mpsc_init(&q->q);
	return q;
}

void bc_mpsc_destroy(struct bc_mpsc *q)
{
	if (q == NULL)
		return;
	free(q->nodes);
	free(q);
}

/*
 * @n push-pop pairs, @burst pushes then @burst pops at a time (@burst must
 * divide @n and be at most the node count). A burst of one always empties
 * the queue, which takes pop's slow path (re-pushing the stub); longer
 * bursts mostly take the fast one. Returns the nodes popped, in order, or
 * -EPROTO if one came out of order.
 */
long bc_mpsc_run(struct bc_mpsc *q, long n, int burst)
{
	long popped = 0;
	for (long i = 0; i < n; i += burst) {
		for (int k = 0; k < burst; k++)
			xpi_mpsc_push(&q->q, &q->nodes[k]);
		for (int k = 0; k < burst; k++) {
			struct xpi_qnode *node = xpi_mpsc_pop(&q->q);
			if (node != &q->nodes[k])
				return -EPROTO;
			popped++;
		}
	}
	return popped;
}

struct bc_stack *bc_stack_create(uint32_t capacity)
{
	struct bc_stack *r = aligned_alloc(64, (sizeof(*r) + 63) & ~(size_t)63);
	if (r == NULL)
		return NULL;
	if (xpi_free_stack_init(&r->stack, capacity) < 0) {
		free(r);
		return NULL;
	}
	for (uint32_t i = 0; i < capacity; i++)
		xpi_free_stack_push(&r->stack, i);
	return r;
}

void bc_stack_destroy(struct bc_stack *r)
{
	if (r == NULL)
		return;
	xpi_free_stack_fini(&r->stack);
	free(r);
}

/*
 * @n pop-push pairs, @burst at a time, as the pool's get and put do. Safe
 * from several threads on one stack holding at least threads x @burst
 * indices. Returns the pairs done, or -EPROTO if a pop found the stack empty
 * (it never is: each thread gives back what it took).
 */
long bc_stack_run(struct bc_stack *r, long n, int burst, int thread)
{
	(void)thread;
	uint32_t held[64];
	long done = 0;
	if (burst > 64)
		burst = 64;
	for (long i = 0; i < n; i += burst) {
		for (int k = 0; k < burst; k++)
			if (!xpi_free_stack_pop(&r->stack, &held[k]))
				return -EPROTO;
		for (int k = 0; k < burst; k++) {
			xpi_free_stack_push(&r->stack, held[k]);
			done++;
		}
	}
	return done;
}

/* User registrations (src/core/reg.c): @n disjoint 64 KiB regions, and
 * lookups of buffers inside them, spread over all of them. The index lives
 * in the context; a zeroed one is enough for it. */
struct bc_regs {
	xp_context_t *ctx;
	struct xpi_reg *regs;
	int n;
	uint8_t *base;
};

struct bc_regs *bc_regs_create(int n)
{
	struct bc_regs *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return NULL;
	r->ctx = calloc(1, sizeof(*r->ctx));
	r->regs = calloc((size_t)n, sizeof(*r->regs));
	r->n = n;
	r->base = (uint8_t *)(uintptr_t)0x100000000ull; /* never touched: addresses only */
	if (r->ctx == NULL || r->regs == NULL) {
		bc_regs_destroy(r);
		return NULL;
	}
	for (int i = 0; i < n; i++) {
		r->regs[i].addr = r->base + (size_t)i * (64 << 10);
		r->regs[i].len = 64 << 10;
	}
	/* Inserted out of address order, as a program might (7919 is prime,
	 * so i * 7919 mod n visits every index when n is not its multiple). */
	for (int i = 0; i < n; i++)
		if (xpi_reg_insert(r->ctx, &r->regs[(int)(((int64_t)i * 7919) % n)]) < 0) {
			bc_regs_destroy(r);
			return NULL;
		}
	return r;
}

void bc_regs_destroy(struct bc_regs *r)
{
	if (r == NULL)
		return;
	if (r->ctx != NULL) {
		free(r->ctx->regs);
		free(r->ctx->reg_max_end);
	}
	free(r->ctx);
	free(r->regs);
	free(r);
}

/* @n lookups; returns how many found the registration that covers them. */
long bc_regs_find(struct bc_regs *r, long n)
{
	long found = 0;
	for (long i = 0; i < n; i++) {
		int k = (int)(((uint64_t)i * 2654435761u) % (uint64_t)r->n);
		const struct xpi_reg *g =
			xpi_reg_find(r->ctx, r->base + (size_t)k * (64 << 10) + 100, 4096);
		found += g == &r->regs[k];
	}
	return found;
}

/* The baseline: the same lookups as a walk of every registration, as the
 * engine's list of them did before reg.c. */
long bc_regs_find_linear(struct bc_regs *r, long n)
{
	long found = 0;
	for (long i = 0; i < n; i++) {
		int k = (int)(((uint64_t)i * 2654435761u) % (uint64_t)r->n);
		const uint8_t *b = r->base + (size_t)k * (64 << 10) + 100;
		const struct xpi_reg *g = NULL;
		for (int j = 0; j < r->n && g == NULL; j++) {
			const struct xpi_reg *c = &r->regs[(int)(((int64_t)j * 7919) % r->n)];
			if (b >= c->addr && (size_t)(b - c->addr) + 4096 <= c->len)
				g = c;
		}
		found += g == &r->regs[k];
	}
	return found;
}

/* The reduction kernels (src/coll/reduce.h), whose header uses C's restrict. */
void bc_reduce(void *acc, const void *in, size_t count, int work, int op)
{
	xpi_reduce(acc, in, count, (xp_dtype_t)work, (xp_op_t)op);
}

void bc_f16_to_f32(float *out, const uint16_t *in, size_t n)
{
	xpi_f16_to_f32(out, in, n);
}

void bc_f32_to_f16(uint16_t *out, const float *in, size_t n)
{
	xpi_f32_to_f16(out, in, n);
}
