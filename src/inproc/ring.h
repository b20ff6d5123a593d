/* SPDX-License-Identifier: MIT */
/* One ring from one rank to another (see inproc.h). */
#ifndef XPI_INPROC_RING_H
#define XPI_INPROC_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "../core/engine.h"

#define XPI_RING_SLOTS 256u
/* Payload bytes in a message's first slot and in each slot after it (every
 * slot keeps its own sequence number, so a consumer can never mistake
 * stale payload for a filled slot). */
#define XPI_SLOT_HEAD_DATA 32u
#define XPI_SLOT_CONT_DATA 60u
/* Eager payloads up to this travel inside the ring, over 1 + 16 slots;
 * longer ones in a buffer of the receiver's pool. Inside the ring they
 * cross between cores with the message itself and touch nothing else
 * that both sides write (the pool's free list, the buffer's refcount). */
#define XPI_RING_INLINE_MAX (XPI_SLOT_HEAD_DATA + 16u * XPI_SLOT_CONT_DATA)

/* One message: exactly one cache line. */
struct xpi_slot {
	_Atomic uint32_t seq; /* position + 1 once the slot is filled */
	uint8_t kind;         /* enum xpi_msg_kind */
	uint8_t pad[3];
	uint32_t comm;
	uint32_t peer_seq;
	uint64_t tag;
	uint64_t len;
	union {
		uint8_t data[XPI_INLINE_MAX];
		struct xp_buf *buf; /* XPI_MSG_BUF: a buffer of the receiver's pool */
		xp_request_t *sreq; /* XPI_MSG_RTS: the send, holding a reference */
	} u;
};
_Static_assert(sizeof(struct xpi_slot) == 64, "a slot is one cache line");

/* A slot after the first of a long inline message. */
struct xpi_slot_cont {
	_Atomic uint32_t seq;
	uint8_t data[XPI_SLOT_CONT_DATA];
};
_Static_assert(sizeof(struct xpi_slot_cont) == 64, "a slot is one cache line");

/* How many slots an eager inline message of @len bytes takes. */
static inline uint32_t xpi_slots_for(uint64_t len)
{
	if (len <= XPI_SLOT_HEAD_DATA)
		return 1;
	return 1 +
	       (uint32_t)((len - XPI_SLOT_HEAD_DATA + XPI_SLOT_CONT_DATA - 1) / XPI_SLOT_CONT_DATA);
}

struct xpi_ring {
	struct xpi_cmd announce; /* tells the consumer the ring exists */
	int src, dst;
	/* Producer only. */
	_Alignas(64) uint32_t prod_pos;
	uint32_t prod_head_cache; /* last look at head_pub */
	uint64_t eager_sent;      /* eager cost sent so far */
	uint64_t credit_cache;    /* last look at credit_pub */
	/* Consumer publishes, producer reads (only when its copies say full). */
	_Alignas(64) _Atomic uint32_t head_pub;
	_Atomic uint64_t credit_pub; /* the receiver's peers[src].eager_returned */
	/* Consumer only. */
	_Alignas(64) uint32_t cons_pos;
	uint32_t cons_published;
	uint64_t credit_published;
	_Alignas(64) struct xpi_slot slots[XPI_RING_SLOTS];
};

#endif
