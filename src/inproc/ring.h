/* SPDX-License-Identifier: MIT */
/* One ring from one rank to another (see inproc.h). */
#ifndef XPI_INPROC_RING_H
#define XPI_INPROC_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "../core/engine.h"
#include "../core/slot_ring.h"

/* Eager payloads up to this travel inside the ring, over 1 + 16 slots;
 * longer ones in a buffer of the receiver's pool. Inside the ring they
 * cross between cores with the message itself and touch nothing else
 * that both sides write (the pool's free list, the buffer's refcount). */
#define XPI_RING_INLINE_MAX (XPI_SLOT_HEAD_DATA + 16u * XPI_SLOT_CONT_DATA)

struct xpi_ring {
	struct xpi_cmd announce; /* tells the consumer the ring exists */
	int src, dst;
	struct xpi_slot_ring r;
};

#endif
