/* SPDX-License-Identifier: MIT */
/*
 * A single-producer, single-consumer ring of 64-byte slots, for transports
 * whose ranks share memory (threads of one process, processes of one
 * host). The producer is the owner of the sending rank's engine and the
 * consumer the owner of the receiving rank's, so neither side needs an
 * atomic read-modify-write.
 *
 * Every slot carries its own sequence number, so a message costs the
 * receiver one cache-line transfer (the slot); the consumer publishes how
 * far it has read only now and then, and the producer reads that only when
 * its own copy says the ring is full. An eager payload may span slots:
 * 32 bytes in its first, 60 in each further one, each slot stamped with its
 * own position so stale payload is never taken for a filled slot. The ring
 * also carries the receiver's eager credit back to the sender beside its
 * head index (engine.h). Everything lives in the ring, with no pointers of
 * its own, so the ring may sit in memory mapped at different addresses.
 */
#ifndef XPI_SLOT_RING_H
#define XPI_SLOT_RING_H

#include <errno.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "engine.h"

#define XPI_RING_SLOTS 256u
#define XPI_SLOT_HEAD_DATA 32u
#define XPI_SLOT_CONT_DATA 60u

/* One message's first slot: exactly one cache line. */
struct xpi_slot {
	_Atomic uint32_t seq; /* position + 1 once the slot is filled */
	uint8_t kind;         /* enum xpi_msg_kind */
	/* The sending rank, 24 bits little-endian, where one ring has many
	 * senders (shared memory's receive FIFO, src/shm/shm_fifo.h); unused
	 * in a ring of one sender. */
	uint8_t src[3];
	uint32_t comm;
	uint32_t peer_seq;
	uint64_t tag;
	uint64_t len;
	union {
		uint8_t data[XPI_SLOT_HEAD_DATA];
		struct xp_buf *buf; /* in-process XPI_MSG_BUF: a buffer of the receiver's pool */
		xp_request_t *sreq; /* in-process XPI_MSG_RTS: the send, holding a reference */
		uint64_t w[4];      /* between processes: numbers, never pointers */
	} u;
};
_Static_assert(sizeof(struct xpi_slot) == 64, "a slot is one cache line");

/* A slot after the first of a long inline message. */
struct xpi_slot_cont {
	_Atomic uint32_t seq;
	uint8_t data[XPI_SLOT_CONT_DATA];
};
_Static_assert(sizeof(struct xpi_slot_cont) == 64, "a slot is one cache line");

struct xpi_slot_ring {
	/* Producer only. */
	_Alignas(64) uint32_t prod_pos;
	uint32_t prod_head_cache; /* last look at head_pub */
	uint64_t eager_sent;      /* eager cost sent so far */
	uint64_t credit_cache;    /* last look at credit_pub */
	/* Consumer publishes, producer reads (only when its copies say full). */
	_Alignas(64) _Atomic uint32_t head_pub;
	_Atomic uint64_t credit_pub; /* the receiver's peers[src].eager_returned */
	/* Words the consumer posts to the producer, the transport's to use
	 * (shm: which send it claimed; how many it read directly). */
	_Atomic uint32_t mailbox;
	_Atomic uint32_t events;
	/* Consumer only. */
	_Alignas(64) uint32_t cons_pos;
	uint32_t cons_published;
	uint64_t credit_published;
	_Alignas(64) struct xpi_slot slots[XPI_RING_SLOTS];
};

/* How many slots an eager inline message of @len bytes takes. */
static inline uint32_t xpi_slots_for(uint64_t len)
{
	if (len <= XPI_SLOT_HEAD_DATA)
		return 1;
	return 1 +
	       (uint32_t)((len - XPI_SLOT_HEAD_DATA + XPI_SLOT_CONT_DATA - 1) / XPI_SLOT_CONT_DATA);
}

/* Slots taken by the message whose first slot is @s. */
static inline uint32_t xpi_slots_of(const struct xpi_slot *s)
{
	return s->kind == XPI_MSG_INLINE ? xpi_slots_for(s->len) : 1;
}

/* Producer: the first of @nslots free slots, or NULL if not that many are free. */
static inline struct xpi_slot *xpi_slot_ring_claim(struct xpi_slot_ring *r, uint32_t nslots)
{
	if (r->prod_pos + nslots - r->prod_head_cache > XPI_RING_SLOTS) {
		r->prod_head_cache = atomic_load_explicit(&r->head_pub, memory_order_acquire);
		if (r->prod_pos + nslots - r->prod_head_cache > XPI_RING_SLOTS)
			return NULL;
	}
	return &r->slots[r->prod_pos & (XPI_RING_SLOTS - 1)];
}

/* Producer: true if the receiver has credit for an eager message of @len
 * bytes, given a per-sender credit of @credit; spends it if so. */
static inline int xpi_slot_ring_spend_credit(struct xpi_slot_ring *r, uint64_t len, uint64_t credit)
{
	uint64_t cost = xpi_eager_cost(len);
	if (r->eager_sent + cost - r->credit_cache > credit) {
		r->credit_cache = atomic_load_explicit(&r->credit_pub, memory_order_acquire);
		if (r->eager_sent + cost - r->credit_cache > credit)
			return 0;
	}
	r->eager_sent += cost;
	return 1;
}

/* Producer: fills the header of the message's first slot and publishes it.
 * The release store of its sequence number makes everything written before
 * it (payload, later slots) visible to the consumer. */
static inline void xpi_slot_ring_publish(struct xpi_slot_ring *r, struct xpi_slot *s,
					 const struct xpi_msg_hdr *h, uint8_t kind, uint32_t nslots)
{
	s->kind = kind;
	s->comm = h->comm;
	s->peer_seq = h->peer_seq;
	s->tag = h->tag;
	s->len = h->len;
	atomic_store_explicit(&s->seq, r->prod_pos + 1, memory_order_release);
	r->prod_pos += nslots;
}

static inline struct xpi_slot_cont *xpi_slot_ring_cont(struct xpi_slot_ring *r, uint32_t pos)
{
	return (struct xpi_slot_cont *)&r->slots[pos & (XPI_RING_SLOTS - 1)];
}

/* Producer: writes an inline payload into slot @s, at position @pos of
 * @slots (a power-of-two array, @mask its size - 1), and the slots after
 * it, each continuation stamped with its own position. */
static inline void xpi_slots_write(struct xpi_slot *slots, uint32_t mask, uint32_t pos,
				   struct xpi_slot *s, const uint8_t *data, uint64_t len)
{
	if (len <= XPI_SLOT_HEAD_DATA) {
		if (len != 0)
			memcpy(s->u.data, data, len);
		return;
	}
	memcpy(s->u.data, data, XPI_SLOT_HEAD_DATA);
	uint64_t off = XPI_SLOT_HEAD_DATA;
	for (pos++; off < len; pos++) {
		struct xpi_slot_cont *c = (struct xpi_slot_cont *)&slots[pos & mask];
		uint64_t n = len - off < XPI_SLOT_CONT_DATA ? len - off : XPI_SLOT_CONT_DATA;
		memcpy(c->data, data + off, n);
		atomic_store_explicit(&c->seq, pos + 1, memory_order_relaxed);
		off += n;
	}
}

/* Producer: writes an inline payload into slot @s and the slots after it. */
static inline void xpi_slot_ring_write(struct xpi_slot_ring *r, struct xpi_slot *s,
				       const uint8_t *data, uint64_t len)
{
	xpi_slots_write(r->slots, XPI_RING_SLOTS - 1, r->prod_pos, s, data, len);
}

/* Consumer: the next filled slot, or NULL. */
static inline struct xpi_slot *xpi_slot_ring_peek(struct xpi_slot_ring *r)
{
	struct xpi_slot *s = &r->slots[r->cons_pos & (XPI_RING_SLOTS - 1)];
	if (atomic_load_explicit(&s->seq, memory_order_acquire) != r->cons_pos + 1)
		return NULL;
	return s;
}

/* Consumer: gathers the long inline payload that starts at slot @s. */
static inline void xpi_slot_ring_read(struct xpi_slot_ring *r, const struct xpi_slot *s,
				      uint8_t *out)
{
	uint64_t len = s->len;
	memcpy(out, s->u.data, XPI_SLOT_HEAD_DATA);
	uint64_t off = XPI_SLOT_HEAD_DATA;
	for (uint32_t pos = r->cons_pos + 1; off < len; pos++) {
		uint64_t n = len - off < XPI_SLOT_CONT_DATA ? len - off : XPI_SLOT_CONT_DATA;
		memcpy(out + off, xpi_slot_ring_cont(r, pos)->data, n);
		off += n;
	}
}

/*
 * --- a slot as a receiver in another process sees it ---
 * Between processes the producer is not trusted: it may be buggy, or still
 * writing. So the consumer reads each field of a message's first slot once
 * (after xpi_slot_ring_peek saw its sequence number), with xpi_slot_parse,
 * checks them there and uses them from its result, never twice from the
 * ring (a length checked in the ring could change before use). The layout is the host's own (both ends run on one host):
 * struct xpi_slot, read field by field at its offsets.
 */
struct xpi_slot_limits {
	uint64_t inline_max;    /* longest inline payload the receiver accepts */
	uint32_t rts_index_max; /* an RTS word's low 32 bits (its index) are below this */
};

/* A message's first slot, checked. */
struct xpi_slot_msg {
	uint8_t kind; /* XPI_MSG_INLINE or XPI_MSG_RTS: no pointers cross processes */
	int32_t src;  /* the sender the slot names (a ring of many senders), unchecked */
	uint32_t comm;
	uint32_t peer_seq;
	uint64_t tag;
	uint64_t len;    /* INLINE: <= inline_max; RTS: the rendezvous payload's length */
	uint32_t nslots; /* slots the message takes, 1 to XPI_RING_SLOTS */
	uint64_t word;   /* RTS: the sender's word (u.w[0]): gen << 32 | index */
};

/*
 * Parses the first slot of a message from @len bytes at @buf (a copy of the
 * slot) into @out: the kind must be INLINE or RTS, an inline payload at most
 * @lim->inline_max bytes and no more slots than the ring has, an RTS index
 * below @lim->rts_index_max. The communicator is the engine's to check.
 * Returns 0, -EAGAIN if @len is less than one slot, or -EPROTO with *@why
 * (if not NULL) saying what was wrong. Pure.
 */
static inline int xpi_slot_parse(const uint8_t *buf, size_t len, const struct xpi_slot_limits *lim,
				 struct xpi_slot_msg *out, const char **why)
{
	const char *dummy;
	if (why == NULL)
		why = &dummy;
	if (len < sizeof(struct xpi_slot))
		return -EAGAIN;
	struct xpi_slot_msg m;
	m.kind = buf[offsetof(struct xpi_slot, kind)];
	const uint8_t *src = buf + offsetof(struct xpi_slot, src);
	m.src = (int32_t)(src[0] | (uint32_t)src[1] << 8 | (uint32_t)src[2] << 16);
	memcpy(&m.comm, buf + offsetof(struct xpi_slot, comm), sizeof(m.comm));
	memcpy(&m.peer_seq, buf + offsetof(struct xpi_slot, peer_seq), sizeof(m.peer_seq));
	memcpy(&m.tag, buf + offsetof(struct xpi_slot, tag), sizeof(m.tag));
	memcpy(&m.len, buf + offsetof(struct xpi_slot, len), sizeof(m.len));
	memcpy(&m.word, buf + offsetof(struct xpi_slot, u.w), sizeof(m.word));
	m.nslots = 1;
	switch (m.kind) {
	case XPI_MSG_INLINE:
		if (m.len > lim->inline_max) {
			*why = "inline payload longer than the inline limit";
			return -EPROTO;
		}
		/* len <= inline_max was checked first, so this cannot wrap. */
		if (m.len >
		    XPI_SLOT_HEAD_DATA + (uint64_t)(XPI_RING_SLOTS - 1) * XPI_SLOT_CONT_DATA) {
			*why = "inline payload longer than the ring";
			return -EPROTO;
		}
		m.nslots = xpi_slots_for(m.len);
		m.word = 0;
		break;
	case XPI_MSG_RTS:
		if ((uint32_t)m.word >= lim->rts_index_max) {
			*why = "rendezvous announcement names no send (index out of range)";
			return -EPROTO;
		}
		if (m.len > XP_MSG_MAX) { /* so no length from the peer can wrap */
			*why = "rendezvous length beyond XP_MSG_MAX";
			return -EPROTO;
		}
		break;
	default:
		*why = "unknown message kind";
		return -EPROTO;
	}
	*out = m;
	return 0;
}

/*
 * Consumer: copies the payload of the inline message @m, which starts at
 * position @pos of @slots (@mask: their count - 1) and whose first slot's
 * data bytes are @head (the checked copy), into @out (m->len bytes). Each continuation slot must carry its own
 * position (its sequence number), or the producer never wrote it.
 * Returns 0 or -EPROTO.
 */
static inline int xpi_slots_gather(const struct xpi_slot *slots, uint32_t mask, uint32_t pos,
				   const struct xpi_slot_msg *m,
				   const uint8_t head[XPI_SLOT_HEAD_DATA], uint8_t *out)
{
	uint64_t len = m->len;
	memcpy(out, head, len < XPI_SLOT_HEAD_DATA ? len : XPI_SLOT_HEAD_DATA);
	uint64_t off = XPI_SLOT_HEAD_DATA;
	for (pos++; off < len; pos++) {
		const struct xpi_slot_cont *c = (const struct xpi_slot_cont *)&slots[pos & mask];
		/* Relaxed: the acquire of the first slot's number ordered it. */
		if (atomic_load_explicit(&c->seq, memory_order_relaxed) != pos + 1)
			return -EPROTO;
		uint64_t n = len - off < XPI_SLOT_CONT_DATA ? len - off : XPI_SLOT_CONT_DATA;
		memcpy(out + off, c->data, n);
		off += n;
	}
	return 0;
}

/* The same for a ring of one sender, from its cons_pos. */
static inline int xpi_slot_ring_gather(struct xpi_slot_ring *r, const struct xpi_slot_msg *m,
				       const uint8_t head[XPI_SLOT_HEAD_DATA], uint8_t *out)
{
	return xpi_slots_gather(r->slots, XPI_RING_SLOTS - 1, r->cons_pos, m, head, out);
}

/*
 * Consumer, after a round of reading: publishes how far it read when the
 * ring ran dry (@dry) or a quarter of it was read, and gives back the eager
 * credit @returned (the receiver's peers[src].eager_returned) as soon as it
 * changed, also with no new message: the sender may be waiting for it.
 */
static inline void xpi_slot_ring_publish_head(struct xpi_slot_ring *r, int dry, uint64_t returned)
{
	if (r->cons_pos != r->cons_published &&
	    (dry || r->cons_pos - r->cons_published >= XPI_RING_SLOTS / 4)) {
		atomic_store_explicit(&r->head_pub, r->cons_pos, memory_order_release);
		r->cons_published = r->cons_pos;
	}
	if (returned != r->credit_published) {
		atomic_store_explicit(&r->credit_pub, returned, memory_order_release);
		r->credit_published = returned;
	}
}

#endif
