/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

/*
 * Requests come from a small per-thread cache: an operation is allocated
 * and freed on the application's thread, often the same one, and malloc
 * plus free of a 300-byte object cost about as much as the rest of a small
 * in-process send. A thread's cache is freed when the thread exits.
 */
#define CACHE_MAX 64

struct request_cache {
	xp_request_t *head;
	int count;
	bool registered; /* with cache_key, for release at thread exit */
};

/* initial-exec: a shared library's TLS otherwise costs a call to
 * __tls_get_addr on every access. */
static _Thread_local struct request_cache cache __attribute__((tls_model("initial-exec")));
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_release(void *arg)
{
	struct request_cache *c = arg;
	while (c->head != NULL) {
		xp_request_t *r = c->head;
		c->head = *(xp_request_t **)r;
		free(r);
	}
	c->count = 0;
	c->registered = false;
}

static void cache_key_create(void)
{
	(void)pthread_key_create(&cache_key, cache_release);
}

xp_request_t *xpi_request_new(xp_context_t *ctx, uint8_t op)
{
	xp_request_t *r = cache.head;
	if (r != NULL) {
		cache.head = *(xp_request_t **)r;
		cache.count--;
	} else {
		r = malloc(sizeof(*r));
		if (r == NULL)
			return NULL;
	}
	/* Field by field rather than a memset of the whole request: the
	 * callers set the operation's own fields, and posted.key, posted.seq
	 * and the command links are written before they are read. */
	r->ctx = ctx;
	r->op = op;
	r->proto = XPI_PROTO_NONE;
	r->post_cmd.type = XPI_CMD_POST;
	r->cancel_cmd.type = XPI_CMD_CANCEL;
	xpi_dlist_init(&r->posted.link);
	xpi_dlist_init(&r->pending_link);
	xpi_dlist_init(&r->tl_link);
	r->tl_pending = 0;
	atomic_init(&r->cancel_reason, 0);
	atomic_init(&r->rndv_state, XPI_RNDV_PENDING);
	atomic_init(&r->refs, 1);
	atomic_init(&r->complete, 0);
	r->waited_ms = 0;
	r->status = (xp_status_t){ .source = XP_ANY_SOURCE };
	r->detail = NULL;
	r->blocking = false;
	r->comm_obj = NULL;
	r->coll_hooks = NULL;
	r->coll = NULL;
	return r;
}

void xpi_request_put(xp_request_t *r)
{
	/* Holding the last reference, nobody else can take one: skip the
	 * atomic read-modify-write (the usual case, a completed request given
	 * back by its waiter). The acquire load orders the request's last
	 * writes by other threads before its reuse here. */
	if (atomic_load_explicit(&r->refs, memory_order_acquire) != 1 &&
	    atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	if (r->coll_hooks != NULL)
		r->coll_hooks->destroy(r);
	free(r->detail);
	if (cache.count >= CACHE_MAX) {
		free(r);
		return;
	}
	if (!cache.registered) {
		pthread_once(&cache_once, cache_key_create);
		(void)pthread_setspecific(cache_key, &cache);
		cache.registered = true;
	}
	*(xp_request_t **)r = cache.head;
	cache.head = r;
	cache.count++;
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
