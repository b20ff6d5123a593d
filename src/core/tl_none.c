/* SPDX-License-Identifier: MIT */
#include <sched.h>

#include "transport.h"

int xpi_tl_mem_reg_none(void *tl, void *addr, size_t len, void **handle)
{
	(void)tl;
	(void)addr;
	(void)len;
	*handle = NULL;
	return 0;
}

void xpi_tl_mem_dereg_none(void *tl, void *handle)
{
	(void)tl;
	(void)handle;
}

void xpi_tl_block_yield(void *tl, int64_t timeout_ns)
{
	(void)tl;
	(void)timeout_ns;
	sched_yield();
}

bool xpi_tl_tx_pending_none(void *tl)
{
	(void)tl;
	return false;
}
