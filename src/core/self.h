/* SPDX-License-Identifier: MIT */
/* The self transport, and rendezvous steps for ranks that share memory. */
#ifndef XPI_SELF_H
#define XPI_SELF_H

#include "engine.h"

extern const struct xpi_tl_ops xpi_self_ops;

/* Adds the self transport to @ctx and makes it serve the rank itself. */
int xpi_self_attach(xp_context_t *ctx);

/* send_cancel, rndv_fetch and msg_release for transports whose ranks read
 * each other's memory: a CAS on the send request decides claim or withdraw. */
int xpi_local_send_cancel(void *tl, xp_request_t *sreq);
int xpi_local_rndv_fetch(void *tl, struct xpi_msg *msg, void *dst, size_t cap, xp_request_t *rreq,
			 const struct xpi_reg *dst_reg);
void xpi_local_msg_release(void *tl, struct xpi_msg *msg);

#endif
