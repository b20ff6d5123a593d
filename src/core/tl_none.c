/* SPDX-License-Identifier: MIT */
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
