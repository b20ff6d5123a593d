/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>

#include "mpmc_ring.h"

int xpi_mpmc_ring_init(struct xpi_mpmc_ring *r, uint32_t capacity)
{
	if (capacity == 0 || (capacity & (capacity - 1)) != 0)
		return -EINVAL;
	r->cells = calloc(capacity, sizeof(*r->cells));
	if (r->cells == NULL)
		return -ENOMEM;
	for (uint32_t i = 0; i < capacity; i++)
		atomic_init(&r->cells[i].seq, i);
	r->mask = capacity - 1;
	atomic_init(&r->enq_pos, 0);
	atomic_init(&r->deq_pos, 0);
	return 0;
}

void xpi_mpmc_ring_fini(struct xpi_mpmc_ring *r)
{
	free(r->cells);
	r->cells = NULL;
}
