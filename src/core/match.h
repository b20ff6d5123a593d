/* SPDX-License-Identifier: MIT */
/*
 * The tag-matching engine of one rank.
 *
 * Only the current owner of the rank's engine calls these functions, so
 * nothing here is atomic or locked.
 *
 * A receive (comm, src, tag, mask) matches a message (comm', src', tag')
 * when comm == comm', src is XP_ANY_SOURCE or == src', and
 * ((tag ^ tag') & mask) == 0.
 *
 * Posted receives: those with a specific source and a full mask are "exact"
 * and live in a hash of FIFO buckets keyed by (comm, src, tag); all others
 * live in one wildcard list. Every posted receive gets a sequence number.
 * An arriving message looks at its one bucket and, only if the wildcard list
 * is not empty, at that list too, and takes the candidate with the lower
 * sequence number: the earliest posted receive that matches, which is what
 * MPI's non-overtaking rule asks for.
 *
 * Unexpected messages: one list in arrival order, plus a hash of FIFO
 * buckets keyed the same way. An exact receive looks at one bucket; a
 * wildcard receive walks the arrival list. Messages of one source arrive in
 * send order (the per-peer sequencer sees to that), so the first match is
 * the earliest sent.
 *
 * Buckets hold entries of several keys when keys collide; the hash tables
 * double when they hold twice as many entries as buckets, so lookups stay
 * O(1) on average however many receives or messages are queued.
 */
#ifndef XPI_MATCH_H
#define XPI_MATCH_H

#include <stdbool.h>
#include <stdint.h>

#include "dlist.h"

struct xpi_match_key {
	uint32_t comm;
	int32_t src; /* XP_ANY_SOURCE allowed in receives */
	uint64_t tag;
	uint64_t mask; /* receives only */
};

/* Embedded in a receive request. */
struct xpi_posted {
	struct xpi_dlink link; /* bucket or wildcard list */
	struct xpi_match_key key;
	uint64_t seq;
	bool exact;
};

/* Embedded in an unexpected-message descriptor. */
struct xpi_unexp {
	struct xpi_dlink all_link;  /* arrival order */
	struct xpi_dlink hash_link; /* its bucket */
	struct xpi_match_key key;   /* mask unused */
	uint64_t arrival;
};

struct xpi_hash {
	struct xpi_dlink *buckets;
	uint32_t nbuckets; /* power of two */
	uint32_t count;
};

struct xpi_match {
	struct xpi_hash posted_exact;
	struct xpi_dlink posted_wild;
	uint32_t posted_wild_count;
	struct xpi_hash unexp_hash;
	struct xpi_dlink unexp_all;
	uint32_t unexp_count;
	uint64_t next_seq;
	uint64_t next_arrival;
};

int xpi_match_init(struct xpi_match *m);
void xpi_match_fini(struct xpi_match *m);

/*
 * Posts a receive. If an unexpected message matches, removes the earliest
 * one from the unexpected queues and returns it (the receive is not
 * queued). Otherwise queues the receive and returns NULL. May fail to grow
 * the hash (still correct: buckets just get longer).
 */
struct xpi_unexp *xpi_match_post(struct xpi_match *m, struct xpi_posted *p);

/*
 * A message arrived. Returns the earliest posted receive it matches,
 * removed from the posted queues, or NULL; then the caller keeps the
 * message with xpi_match_add_unexpected().
 */
struct xpi_posted *xpi_match_arrive(struct xpi_match *m, const struct xpi_match_key *msg);

/* Queues an unexpected message behind all earlier arrivals. */
void xpi_match_add_unexpected(struct xpi_match *m, struct xpi_unexp *u);

/* Puts a message back at the position it had (by arrival number). */
void xpi_match_return_unexpected(struct xpi_match *m, struct xpi_unexp *u);

/* Removes a posted receive that has not matched. Returns false if it is not queued. */
bool xpi_match_cancel(struct xpi_match *m, struct xpi_posted *p);

/* The earliest unexpected message with exactly key @k (comm, src, tag) for
 * which @pred(u, arg) holds, or NULL; not removed. */
struct xpi_unexp *xpi_match_find_unexpected(struct xpi_match *m, const struct xpi_match_key *k,
					    bool (*pred)(const struct xpi_unexp *u,
							 const void *arg),
					    const void *arg);

/* Removes an unexpected message (for example a cancelled rendezvous). */
void xpi_match_remove_unexpected(struct xpi_match *m, struct xpi_unexp *u);

static inline bool xpi_match_keys_match(const struct xpi_match_key *recv,
					const struct xpi_match_key *msg)
{
	return recv->comm == msg->comm && (recv->src < 0 || recv->src == msg->src) &&
	       ((recv->tag ^ msg->tag) & recv->mask) == 0;
}

/* Puts back a receive that xpi_match_arrive() returned but that could not
 * take the message after all, at the place its sequence number gives it. */
void xpi_match_repost(struct xpi_match *m, struct xpi_posted *p);

/* Puts back a receive that was away from the queues (it took a message
 * whose sender then withdrew it): like xpi_match_post, but it keeps its
 * number, so if no unexpected message matches it goes back to its place in
 * the posting order; if one does, that one is removed and returned. */
struct xpi_unexp *xpi_match_repost_search(struct xpi_match *m, struct xpi_posted *p);

#endif
