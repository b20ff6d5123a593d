/* SPDX-License-Identifier: MIT */
/*
 * Intrusive multi-producer, single-consumer FIFO queue (D. Vyukov's
 * non-blocking design). Producers never wait: a push is one atomic exchange
 * and one store. The single consumer is the current owner of a rank's
 * engine.
 *
 * A push is complete only after its second store, so for a moment the
 * consumer can see the tail moved but the link not yet written; pop then
 * reports "nothing yet" (NULL) and the consumer retries on its next
 * progress call. Nothing is lost and nobody blocks.
 */
#ifndef XPI_MPSC_H
#define XPI_MPSC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

struct xpi_qnode {
	_Atomic(struct xpi_qnode *) next;
};

struct xpi_mpsc {
	_Alignas(64) _Atomic(struct xpi_qnode *) tail; /* producers */
	_Alignas(64) struct xpi_qnode *head;           /* consumer only */
	struct xpi_qnode stub;
};

static inline void xpi_mpsc_init(struct xpi_mpsc *q)
{
	atomic_store_explicit(&q->stub.next, NULL, memory_order_relaxed);
	q->head = &q->stub;
	atomic_store_explicit(&q->tail, &q->stub, memory_order_relaxed);
}

/* Any thread. The node belongs to the queue until popped. */
static inline void xpi_mpsc_push(struct xpi_mpsc *q, struct xpi_qnode *n)
{
	atomic_store_explicit(&n->next, NULL, memory_order_relaxed);
	/* seq_cst: orders this push before the producer's later check of the
	 * owner token (see xpi_engine_kick), so a handoff is never missed. */
	struct xpi_qnode *prev = atomic_exchange_explicit(&q->tail, n, memory_order_seq_cst);
	atomic_store_explicit(&prev->next, n, memory_order_release);
}

/* Any thread; a hint only. */
static inline bool xpi_mpsc_maybe_nonempty(struct xpi_mpsc *q)
{
	return atomic_load_explicit(&q->tail, memory_order_seq_cst) != &q->stub ||
	       atomic_load_explicit(&q->stub.next, memory_order_acquire) != NULL;
}

/*
 * Consumer only: nothing is queued, not even a push half done. Unlike
 * xpi_mpsc_maybe_nonempty it also sees a node the consumer has reached but
 * could not pop: when pop puts the stub behind the last node while a
 * producer has swapped the tail but not yet linked its node, the tail is
 * the stub again and the stub has no successor, yet the node at head (and
 * the producer's) are still queued.
 */
static inline bool xpi_mpsc_empty(struct xpi_mpsc *q)
{
	return q->head == &q->stub &&
	       atomic_load_explicit(&q->stub.next, memory_order_acquire) == NULL &&
	       atomic_load_explicit(&q->tail, memory_order_seq_cst) == &q->stub;
}

/* Consumer only. Returns the oldest node, or NULL if none is ready yet. */
static inline struct xpi_qnode *xpi_mpsc_pop(struct xpi_mpsc *q)
{
	struct xpi_qnode *head = q->head;
	struct xpi_qnode *next = atomic_load_explicit(&head->next, memory_order_acquire);

	if (head == &q->stub) {
		if (next == NULL)
			return NULL;
		q->head = next;
		head = next;
		next = atomic_load_explicit(&head->next, memory_order_acquire);
	}
	if (next != NULL) {
		q->head = next;
		return head;
	}
	if (head != atomic_load_explicit(&q->tail, memory_order_acquire))
		return NULL; /* a push is half done; try again later */
	/* head is the last node: put the stub behind it so it can be detached */
	xpi_mpsc_push(q, &q->stub);
	next = atomic_load_explicit(&head->next, memory_order_acquire);
	if (next != NULL) {
		q->head = next;
		return head;
	}
	return NULL;
}

#endif
