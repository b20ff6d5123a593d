/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "free_stack.h"

int xpi_free_stack_init(struct xpi_free_stack *s, uint32_t capacity)
{
	if (capacity == 0 || capacity == XPI_FREE_STACK_NIL)
		return -EINVAL;
	s->next = calloc(capacity, sizeof(*s->next));
	if (s->next == NULL)
		return -ENOMEM;
	atomic_init(&s->head, XPI_FREE_STACK_NIL);
	return 0;
}

void xpi_free_stack_fini(struct xpi_free_stack *s)
{
	free((void *)s->next);
	s->next = NULL;
}
