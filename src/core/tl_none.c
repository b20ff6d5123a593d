/* SPDX-License-Identifier: MIT */
#include <errno.h>

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

int xpi_tl_sleep_prepare_none(void *tl, struct pollfd *fds, int max)
{
	(void)tl;
	(void)fds;
	(void)max;
	return -ENOTSUP;
}

int xpi_tl_sleep_prepare_idle(void *tl, struct pollfd *fds, int max)
{
	(void)tl;
	(void)fds;
	(void)max;
	return 0;
}

void xpi_tl_sleep_done_none(void *tl)
{
	(void)tl;
}

bool xpi_tl_tx_pending_none(void *tl)
{
	(void)tl;
	return false;
}

int xpi_tl_rndv_offer_none(void *tl, int peer, xp_request_t *sreq, const struct xpi_reg *reg,
			   struct xpi_rndv_desc *desc)
{
	(void)tl;
	(void)peer;
	(void)sreq;
	(void)reg;
	(void)desc;
	return -ENOTSUP;
}

int xpi_tl_rndv_abort_none(void *tl, xp_request_t *rreq)
{
	(void)tl;
	(void)rreq;
	return -EBUSY;
}

int xpi_tl_send_eager_none(void *tl, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	(void)tl;
	(void)peer;
	(void)h;
	(void)data;
	return -ENOTSUP;
}

int xpi_tl_send_rts_none(void *tl, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			 const struct xpi_reg *reg, const struct xpi_rndv_desc *desc)
{
	(void)tl;
	(void)peer;
	(void)h;
	(void)sreq;
	(void)reg;
	(void)desc;
	return -ENOTSUP;
}
