/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "compiler.h"
#include "match.h"

#define INITIAL_BUCKETS 1024u

/* Mixes both halves of the tag with comm and source (a 64-bit finaliser). */
static inline uint64_t key_hash(uint32_t comm, int32_t src, uint64_t tag)
{
	uint64_t h = tag ^ ((uint64_t)comm << 32 | (uint32_t)src) * 0x9e3779b97f4a7c15ull;
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

static inline bool same_key(const struct xpi_match_key *a, const struct xpi_match_key *b)
{
	return a->comm == b->comm && a->src == b->src && a->tag == b->tag;
}

static int hash_init(struct xpi_hash *h, uint32_t nbuckets)
{
	h->buckets = malloc(sizeof(*h->buckets) * nbuckets);
	if (h->buckets == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < nbuckets; i++)
		xpi_dlist_init(&h->buckets[i]);
	h->nbuckets = nbuckets;
	h->count = 0;
	return 0;
}

static inline struct xpi_dlink *bucket_of(struct xpi_hash *h, const struct xpi_match_key *k)
{
	return &h->buckets[key_hash(k->comm, k->src, k->tag) & (h->nbuckets - 1)];
}

/*
 * Doubles the bucket array. Entries are moved bucket by bucket from head to
 * tail, so entries of one key keep their relative (FIFO) order. @key_of
 * gives an entry's key from its link.
 */
static void hash_grow(struct xpi_hash *h,
		      const struct xpi_match_key *(*key_of)(const struct xpi_dlink *))
{
	struct xpi_hash bigger;
	if (hash_init(&bigger, h->nbuckets * 2) < 0)
		return; /* keep the old table: longer chains, same results */
	for (uint32_t i = 0; i < h->nbuckets; i++) {
		struct xpi_dlink *n;
		while ((n = xpi_dlist_pop_head(&h->buckets[i])) != NULL)
			xpi_dlist_push_tail(bucket_of(&bigger, key_of(n)), n);
	}
	free(h->buckets);
	bigger.count = h->count;
	*h = bigger;
}

static const struct xpi_match_key *posted_key(const struct xpi_dlink *l)
{
	return &xpi_container_of(l, struct xpi_posted, link)->key;
}

static const struct xpi_match_key *unexp_key(const struct xpi_dlink *l)
{
	return &xpi_container_of(l, struct xpi_unexp, hash_link)->key;
}

int xpi_match_init(struct xpi_match *m)
{
	int rc = hash_init(&m->posted_exact, INITIAL_BUCKETS);
	if (rc < 0)
		return rc;
	rc = hash_init(&m->unexp_hash, INITIAL_BUCKETS);
	if (rc < 0) {
		free(m->posted_exact.buckets);
		return rc;
	}
	xpi_dlist_init(&m->posted_wild);
	xpi_dlist_init(&m->unexp_all);
	m->posted_wild_count = 0;
	m->unexp_count = 0;
	m->next_seq = 1;
	m->next_arrival = 1;
	return 0;
}

void xpi_match_fini(struct xpi_match *m)
{
	free(m->posted_exact.buckets);
	free(m->unexp_hash.buckets);
	m->posted_exact.buckets = m->unexp_hash.buckets = NULL;
}

static void unexp_unlink(struct xpi_match *m, struct xpi_unexp *u)
{
	xpi_dlist_remove(&u->all_link);
	xpi_dlist_remove(&u->hash_link);
	m->unexp_hash.count--;
	m->unexp_count--;
}

/* Removes and returns the earliest unexpected message @p matches, or NULL. */
static inline __attribute__((always_inline)) struct xpi_unexp *
take_unexpected(struct xpi_match *m, const struct xpi_posted *p)
{
	struct xpi_dlink *n;
	if (m->unexp_count == 0)
		return NULL;
	if (p->exact) {
		struct xpi_dlink *b = bucket_of(&m->unexp_hash, &p->key);
		xpi_dlist_for_each(n, b) {
			struct xpi_unexp *u = xpi_container_of(n, struct xpi_unexp, hash_link);
			if (same_key(&u->key, &p->key)) {
				unexp_unlink(m, u);
				return u;
			}
		}
	} else {
		xpi_dlist_for_each(n, &m->unexp_all) {
			struct xpi_unexp *u = xpi_container_of(n, struct xpi_unexp, all_link);
			if (xpi_match_keys_match(&p->key, &u->key)) {
				unexp_unlink(m, u);
				return u;
			}
		}
	}
	return NULL;
}

struct xpi_unexp *xpi_match_post(struct xpi_match *m, struct xpi_posted *p)
{
	p->exact = p->key.src >= 0 && p->key.mask == UINT64_MAX;
	/* Numbered even when it matches at once: the numbers then give the
	 * order in which the engine saw every receive (tests check with it). */
	p->seq = m->next_seq++;
	struct xpi_unexp *u = take_unexpected(m, p);
	if (u != NULL)
		return u;
	if (p->exact) {
		if (m->posted_exact.count >= 2 * m->posted_exact.nbuckets)
			hash_grow(&m->posted_exact, posted_key);
		xpi_dlist_push_tail(bucket_of(&m->posted_exact, &p->key), &p->link);
		m->posted_exact.count++;
	} else {
		xpi_dlist_push_tail(&m->posted_wild, &p->link);
		m->posted_wild_count++;
	}
	return NULL;
}

struct xpi_posted *xpi_match_arrive(struct xpi_match *m, const struct xpi_match_key *msg)
{
	struct xpi_posted *best = NULL;
	struct xpi_dlink *n;

	if (m->posted_exact.count != 0) {
		struct xpi_dlink *b = bucket_of(&m->posted_exact, msg);
		xpi_dlist_for_each(n, b) {
			struct xpi_posted *p = xpi_container_of(n, struct xpi_posted, link);
			if (same_key(&p->key, msg)) {
				best = p;
				break;
			}
		}
	}
	/* The wildcard list is in posting order: its first match is its earliest. */
	if (m->posted_wild_count != 0) {
		xpi_dlist_for_each(n, &m->posted_wild) {
			struct xpi_posted *p = xpi_container_of(n, struct xpi_posted, link);
			if (best != NULL && p->seq > best->seq)
				break;
			if (xpi_match_keys_match(&p->key, msg)) {
				best = p;
				break;
			}
		}
	}
	if (best != NULL)
		xpi_match_cancel(m, best);
	return best;
}

void xpi_match_add_unexpected(struct xpi_match *m, struct xpi_unexp *u)
{
	if (m->unexp_hash.count >= 2 * m->unexp_hash.nbuckets)
		hash_grow(&m->unexp_hash, unexp_key);
	u->arrival = m->next_arrival++;
	xpi_dlist_push_tail(&m->unexp_all, &u->all_link);
	xpi_dlist_push_tail(bucket_of(&m->unexp_hash, &u->key), &u->hash_link);
	m->unexp_hash.count++;
	m->unexp_count++;
}

/* Inserts @n before the first entry of @head whose arrival number is larger. */
static void insert_by_arrival(struct xpi_dlink *head, struct xpi_dlink *n, uint64_t arrival,
			      size_t link_offset)
{
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, head) {
		const struct xpi_unexp *o = (const void *)((const char *)pos - link_offset);
		if (o->arrival > arrival)
			break;
	}
	xpi_dlist_push_tail(pos, n); /* push_tail on an entry inserts before it */
}

void xpi_match_return_unexpected(struct xpi_match *m, struct xpi_unexp *u)
{
	insert_by_arrival(&m->unexp_all, &u->all_link, u->arrival,
			  offsetof(struct xpi_unexp, all_link));
	insert_by_arrival(bucket_of(&m->unexp_hash, &u->key), &u->hash_link, u->arrival,
			  offsetof(struct xpi_unexp, hash_link));
	m->unexp_hash.count++;
	m->unexp_count++;
}

bool xpi_match_cancel(struct xpi_match *m, struct xpi_posted *p)
{
	if (p->link.next == &p->link || p->link.next == NULL)
		return false;
	xpi_dlist_remove(&p->link);
	if (p->exact)
		m->posted_exact.count--;
	else
		m->posted_wild_count--;
	return true;
}

void xpi_match_remove_unexpected(struct xpi_match *m, struct xpi_unexp *u)
{
	unexp_unlink(m, u);
}

void xpi_match_repost(struct xpi_match *m, struct xpi_posted *p)
{
	struct xpi_dlink *head, *pos;
	if (p->exact) {
		head = bucket_of(&m->posted_exact, &p->key);
		m->posted_exact.count++;
	} else {
		head = &m->posted_wild;
		m->posted_wild_count++;
	}
	xpi_dlist_for_each(pos, head) {
		if (xpi_container_of(pos, struct xpi_posted, link)->seq > p->seq)
			break;
	}
	xpi_dlist_push_tail(pos, &p->link);
}

struct xpi_unexp *xpi_match_repost_search(struct xpi_match *m, struct xpi_posted *p)
{
	struct xpi_unexp *u = take_unexpected(m, p);
	if (u == NULL)
		xpi_match_repost(m, p);
	return u;
}

struct xpi_unexp *
xpi_match_find_unexpected(struct xpi_match *m, const struct xpi_match_key *k,
			  bool (*pred)(const struct xpi_unexp *u, const void *arg), const void *arg)
{
	struct xpi_dlink *n;
	xpi_dlist_for_each(n, bucket_of(&m->unexp_hash, k)) {
		struct xpi_unexp *u = xpi_container_of(n, struct xpi_unexp, hash_link);
		if (same_key(&u->key, k) && pred(u, arg))
			return u;
	}
	return NULL;
}
