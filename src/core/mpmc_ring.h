/* SPDX-License-Identifier: MIT */
/*
 * Bounded multi-producer, multi-consumer ring of 32-bit values (D. Vyukov's
 * design: every cell carries a sequence number, so there is no ABA problem
 * and neither side ever waits for the other). The pool keeps the indices of
 * its free buffers here, because buffers are released by whatever thread
 * the user releases them on.
 */
#ifndef XPI_MPMC_RING_H
#define XPI_MPMC_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

struct xpi_mpmc_cell {
	_Atomic uint64_t seq;
	uint32_t value;
};

struct xpi_mpmc_ring {
	_Alignas(64) _Atomic uint64_t enq_pos;
	_Alignas(64) _Atomic uint64_t deq_pos;
	_Alignas(64) struct xpi_mpmc_cell *cells;
	uint64_t mask;
};

/* @capacity must be a power of two. Returns 0 or -ENOMEM. */
int xpi_mpmc_ring_init(struct xpi_mpmc_ring *r, uint32_t capacity);
void xpi_mpmc_ring_fini(struct xpi_mpmc_ring *r);

/* Returns false if the ring is full. */
static inline bool xpi_mpmc_ring_push(struct xpi_mpmc_ring *r, uint32_t value)
{
	uint64_t pos = atomic_load_explicit(&r->enq_pos, memory_order_relaxed);
	for (;;) {
		struct xpi_mpmc_cell *c = &r->cells[pos & r->mask];
		uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - pos);
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&r->enq_pos, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				c->value = value;
				atomic_store_explicit(&c->seq, pos + 1, memory_order_release);
				return true;
			}
		} else if (dif < 0) {
			return false;
		} else {
			pos = atomic_load_explicit(&r->enq_pos, memory_order_relaxed);
		}
	}
}

/* Returns false if the ring is empty. */
static inline bool xpi_mpmc_ring_pop(struct xpi_mpmc_ring *r, uint32_t *value)
{
	uint64_t pos = atomic_load_explicit(&r->deq_pos, memory_order_relaxed);
	for (;;) {
		struct xpi_mpmc_cell *c = &r->cells[pos & r->mask];
		uint64_t seq = atomic_load_explicit(&c->seq, memory_order_acquire);
		int64_t dif = (int64_t)(seq - (pos + 1));
		if (dif == 0) {
			if (atomic_compare_exchange_weak_explicit(&r->deq_pos, &pos, pos + 1,
								  memory_order_relaxed,
								  memory_order_relaxed)) {
				*value = c->value;
				atomic_store_explicit(&c->seq, pos + r->mask + 1,
						      memory_order_release);
				return true;
			}
		} else if (dif < 0) {
			return false;
		} else {
			pos = atomic_load_explicit(&r->deq_pos, memory_order_relaxed);
		}
	}
}

#endif
