/* SPDX-License-Identifier: MIT */
/*
 * A rank's receive FIFO in shared memory: one ring of 64-byte slots
 * (src/core/slot_ring.h) that every sender on the host writes to, so a
 * host's shared memory grows with its ranks, not with their pairs (UCX's
 * posix transport keeps one such FIFO per process for the same reason).
 *
 * A sender claims the slots of one message with a compare-and-swap on the
 * tail, writes them, and publishes the first with a release store of its
 * position + 1; the one consumer reads the messages in position order, so
 * each sender's messages arrive in the order it sent them. The consumer
 * publishes how far it has read now and then, and a sender reads that only
 * when its own copy says the FIFO is full.
 *
 * Before each claim the sender notes the position and length it is about to
 * claim in its own lane (struct shm_lane): a sender that dies between its
 * claim and its publication leaves a hole no one will fill, and its note is
 * how the consumer, once that rank is known dead, finds and steps over it.
 */
#ifndef XPI_SHM_FIFO_H
#define XPI_SHM_FIFO_H

#include <stdatomic.h>
#include <stdint.h>

#include "../core/slot_ring.h"

/* 64 KiB: fourteen of the longest inline messages (69 slots), or 1024 of
 * the shortest, from all senders together. */
#define SHM_FIFO_SLOTS 1024u

struct shm_fifo {
	_Alignas(64) _Atomic uint32_t tail;     /* senders: the next position to claim */
	_Alignas(64) _Atomic uint32_t head_pub; /* consumer: read up to here */
	_Alignas(64) struct xpi_slot slots[SHM_FIFO_SLOTS];
};

/* The note a sender leaves before claiming: nslots << 32 | position. */
static inline uint64_t shm_fifo_note(uint32_t pos, uint32_t nslots)
{
	return (uint64_t)nslots << 32 | pos;
}

/*
 * Sender: claims @nslots consecutive slots of @f, noting each attempt in
 * @note first. @head_cache is this sender's last look at the consumer's
 * head. Returns the first slot's position, or -1 if the FIFO has no room.
 */
static inline int64_t shm_fifo_claim(struct shm_fifo *f, uint32_t *head_cache, uint32_t nslots,
				     _Atomic uint64_t *note)
{
	uint32_t t = atomic_load_explicit(&f->tail, memory_order_relaxed);
	for (;;) {
		/* Signed: a tail read before others moved it can be behind
		 * the head; the compare-and-swap then fails and reloads it. */
		if ((int32_t)(t + nslots - *head_cache) > (int32_t)SHM_FIFO_SLOTS) {
			*head_cache = atomic_load_explicit(&f->head_pub, memory_order_acquire);
			if ((int32_t)(t + nslots - *head_cache) > (int32_t)SHM_FIFO_SLOTS)
				return -1;
		}
		atomic_store_explicit(note, shm_fifo_note(t, nslots), memory_order_relaxed);
		if (atomic_compare_exchange_weak_explicit(
			    &f->tail, &t, t + nslots, memory_order_seq_cst, memory_order_relaxed))
			return t;
	}
}

static inline struct xpi_slot *shm_fifo_slot(struct shm_fifo *f, uint32_t pos)
{
	return &f->slots[pos & (SHM_FIFO_SLOTS - 1)];
}

/* Sender: fills the header of the message's first slot, at @pos, naming
 * rank @src, and publishes it. The release store of its number makes the
 * payload and the later slots visible with it. */
static inline void shm_fifo_publish(struct xpi_slot *s, uint32_t pos, int src,
				    const struct xpi_msg_hdr *h, uint8_t kind)
{
	s->kind = kind;
	s->src[0] = (uint8_t)src;
	s->src[1] = (uint8_t)(src >> 8);
	s->src[2] = (uint8_t)(src >> 16);
	s->comm = h->comm;
	s->peer_seq = h->peer_seq;
	s->tag = h->tag;
	s->len = h->len;
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
}

/* Consumer: the message at @pos if it is published, else NULL. */
static inline struct xpi_slot *shm_fifo_peek(struct shm_fifo *f, uint32_t pos)
{
	struct xpi_slot *s = shm_fifo_slot(f, pos);
	if (atomic_load_explicit(&s->seq, memory_order_acquire) != pos + 1)
		return NULL;
	return s;
}

#endif
