/* SPDX-License-Identifier: MIT */
/* One ring from one rank to another (see inproc.h). */
#ifndef XPI_INPROC_RING_H
#define XPI_INPROC_RING_H

#include <stdatomic.h>
#include <stdint.h>

#include "../core/engine.h"

#define XPI_RING_SLOTS 256u

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
		struct xp_buf *buf;   /* XPI_MSG_BUF: a buffer of the receiver's pool */
		xp_request_t *sreq;   /* XPI_MSG_RTS: the send, holding a reference */
	} u;
};
_Static_assert(sizeof(struct xpi_slot) == 64, "a slot is one cache line");

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
