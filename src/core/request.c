/* SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "engine.h"

/* The per-thread cache (engine.h has its common cases); a thread's cached
 * requests are freed when the thread exits. */
_Thread_local struct xpi_request_cache xpi_request_cache __attribute__((tls_model("initial-exec")));
static pthread_key_t cache_key;
static pthread_once_t cache_once = PTHREAD_ONCE_INIT;

static void cache_release(void *arg)
{
	struct xpi_request_cache *c = arg;
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

xp_request_t *xpi_request_alloc_slow(void)
{
	return malloc(sizeof(xp_request_t));
}

/* The last reference is gone and the inline case did not apply: a
 * collective's schedule or an error text to free, a full cache, or a
 * thread that has not yet registered its cache for release at exit. */
void xpi_request_free_slow(xp_request_t *r)
{
	struct xpi_request_cache *c = &xpi_request_cache;
	if (r->coll_hooks != NULL)
		r->coll_hooks->destroy(r);
	free(r->detail);
	r->detail = NULL;
	r->coll_hooks = NULL;
	if (c->count >= XPI_REQUEST_CACHE_MAX) {
		free(r);
		return;
	}
	if (!c->registered) {
		pthread_once(&cache_once, cache_key_create);
		(void)pthread_setspecific(cache_key, c);
		c->registered = true;
	}
	*(xp_request_t **)r = c->head;
	c->head = r;
	c->count++;
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
