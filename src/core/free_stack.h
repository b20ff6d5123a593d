/* SPDX-License-Identifier: MIT */
/*
 * A lock-free LIFO of 32-bit indices (a Treiber stack over an array),
 * used for the pool's free buffers: get and put run on any thread at once.
 *
 * The head packs the top index with a 32-bit version that every change
 * bumps, so a pop that read a stale "next" fails its compare-and-swap
 * instead of corrupting the stack (the ABA problem). A push or pop never
 * waits for another thread: one that loses the race retries with the value
 * the winner left. LIFO also hands out the buffer that was freed last,
 * whose lines are the likeliest to be in a cache.
 *
 * (An earlier version used a bounded MPMC ring. Its push can fail without
 * the ring being full, while a popper that claimed the cell has not yet
 * released it, and the pool then lost that buffer for good.)
 */
#ifndef XPI_FREE_STACK_H
#define XPI_FREE_STACK_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define XPI_FREE_STACK_NIL UINT32_MAX

struct xpi_free_stack {
	_Atomic uint64_t head;  /* version << 32 | top index */
	_Atomic uint32_t *next; /* next[i]: the index below i */
};

/* Room for indices [0, capacity); starts empty. Returns 0 or -ENOMEM. */
int xpi_free_stack_init(struct xpi_free_stack *s, uint32_t capacity);
void xpi_free_stack_fini(struct xpi_free_stack *s);

static inline void xpi_free_stack_push(struct xpi_free_stack *s, uint32_t idx)
{
	uint64_t old = atomic_load_explicit(&s->head, memory_order_relaxed);
	uint64_t val;
	do {
		atomic_store_explicit(&s->next[idx], (uint32_t)old, memory_order_relaxed);
		val = ((old >> 32) + 1) << 32 | idx;
	} while (!atomic_compare_exchange_weak_explicit(&s->head, &old, val, memory_order_release,
							memory_order_relaxed));
}

/* Returns false if the stack is empty. */
static inline bool xpi_free_stack_pop(struct xpi_free_stack *s, uint32_t *idx)
{
	uint64_t old = atomic_load_explicit(&s->head, memory_order_acquire);
	uint64_t val;
	do {
		uint32_t top = (uint32_t)old;
		if (top == XPI_FREE_STACK_NIL)
			return false;
		/* May be stale if another thread pops top meanwhile; the
		 * version in head then makes the exchange fail. */
		uint32_t below = atomic_load_explicit(&s->next[top], memory_order_relaxed);
		val = ((old >> 32) + 1) << 32 | below;
	} while (!atomic_compare_exchange_weak_explicit(&s->head, &old, val, memory_order_acquire,
							memory_order_acquire));
	*idx = (uint32_t)old;
	return true;
}

#endif
