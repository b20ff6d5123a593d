/* SPDX-License-Identifier: MIT */
/*
 * Intrusive circular doubly linked lists. Used only by the owner of a rank's
 * engine, so nothing here is atomic.
 */
#ifndef XPI_DLIST_H
#define XPI_DLIST_H

#include <stdbool.h>
#include <stddef.h>

struct xpi_dlink {
	struct xpi_dlink *prev, *next;
};

static inline void xpi_dlist_init(struct xpi_dlink *head)
{
	head->prev = head->next = head;
}

static inline bool xpi_dlist_empty(const struct xpi_dlink *head)
{
	return head->next == head;
}

static inline void xpi_dlist_push_tail(struct xpi_dlink *head, struct xpi_dlink *n)
{
	n->prev = head->prev;
	n->next = head;
	head->prev->next = n;
	head->prev = n;
}

static inline void xpi_dlist_remove(struct xpi_dlink *n)
{
	n->prev->next = n->next;
	n->next->prev = n->prev;
	n->prev = n->next = n;
}

static inline struct xpi_dlink *xpi_dlist_pop_head(struct xpi_dlink *head)
{
	struct xpi_dlink *n = head->next;
	if (n == head)
		return NULL;
	xpi_dlist_remove(n);
	return n;
}

#define xpi_dlist_for_each(pos, head)                                                              \
	for ((pos) = (head)->next; (pos) != (head); (pos) = (pos)->next)

#endif
