/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

xp_request_t *xpi_request_new(xp_context_t *ctx, uint8_t op)
{
	xp_request_t *r = malloc(sizeof(*r));
	if (r == NULL)
		return NULL;
	memset(r, 0, sizeof(*r));
	r->ctx = ctx;
	r->op = op;
	r->post_cmd.type = XPI_CMD_POST;
	r->cancel_cmd.type = XPI_CMD_CANCEL;
	xpi_dlist_init(&r->posted.link);
	xpi_dlist_init(&r->pending_link);
	atomic_init(&r->refs, 1);
	r->status.source = XP_ANY_SOURCE;
	return r;
}

void xpi_request_put(xp_request_t *r)
{
	if (atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(r->detail);
	free(r);
}

void xpi_request_complete(xp_request_t *r, int err)
{
	r->status.error = err;
	atomic_store_explicit(&r->complete, 1, memory_order_release);
}

void xpi_request_set_detail(xp_request_t *r, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	free(r->detail);
	r->detail = strdup(text);
}
