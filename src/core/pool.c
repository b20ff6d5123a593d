/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "xport/xport.h"
#include "compiler.h"
#include "pool.h"

#define HUGE_PAGE_SIZE (2u << 20)
/* More buffers than this in one class buy nothing but descriptor memory. */
#define MAX_BUFS_PER_CLASS 16384u

static const size_t class_sizes[XPI_POOL_NCLASSES] = { 256, 2048, 16384, 131072, 1048576 };

/* Maps @len bytes: hugetlb pages if @huge (@len a multiple of their size),
 * ordinary pages otherwise. NULL if the kernel refuses. */
static void *map_region(size_t len, bool huge)
{
	void *p;
	if (huge)
		/* No MAP_NORESERVE here: with it the map succeeds even when no
		 * huge page is free, and the first touch dies of SIGBUS. Without
		 * it the kernel reserves the pages now or fails the map. */
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
	else
		/* MAP_NORESERVE so an unused bound costs nothing. */
		p = mmap(NULL, len, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	return p == MAP_FAILED ? NULL : p;
}

static size_t min_size(size_t a, size_t b)
{
	return a < b ? a : b;
}

void xpi_pool_plan(size_t max_bytes, bool huge, struct xpi_pool_plan *out)
{
	struct xpi_pool_plan p = { 0 };
	/* Ordinary pages first: each class an equal share of half the bound
	 * (the other half is for large buffers). A class whose share holds
	 * no buffer still gets one if the bound keeps room for one more of
	 * that size after it: otherwise that size could be served neither
	 * from the class nor by a dedicated mapping. */
	size_t share = max_bytes / 2 / XPI_POOL_NCLASSES, used = 0;
	for (int i = 0; i < XPI_POOL_NCLASSES; i++) {
		size_t sz = class_sizes[i];
		size_t n = min_size(share / sz, MAX_BUFS_PER_CLASS);
		if (n == 0 && max_bytes >= 2 * sz && used + sz <= max_bytes - sz)
			n = 1;
		p.count[i] = p.ordinary[i] = (uint32_t)n;
		p.len[i] = n * sz;
		used += p.len[i];
	}
	/* Then hugetlb pages, class by class, where the class rounded up to
	 * whole huge pages still leaves room for the classes after it within
	 * the classes' half of the bound (or what the ordinary plan takes, if
	 * more); else shrunk to the whole huge pages that do fit, if one
	 * buffer does; else the class stays on ordinary pages. So the
	 * rounding never eats into the large buffers' half, and every step
	 * keeps (what is planned so far) + (the ordinary plan of the rest)
	 * within that limit. */
	size_t limit = used > max_bytes / 2 ? used : max_bytes / 2;
	size_t rest = used, planned = 0;
	for (int i = 0; huge && i < XPI_POOL_NCLASSES; i++) {
		size_t sz = class_sizes[i];
		rest -= p.len[i];
		if (p.count[i] == 0)
			continue;
		size_t room = limit - planned - rest; /* >= p.len[i] */
		size_t hlen = xpi_align_up(p.len[i], HUGE_PAGE_SIZE);
		if (hlen > room)
			hlen = room & ~((size_t)HUGE_PAGE_SIZE - 1);
		if (hlen >= sz) {
			/* The pages are reserved either way: fill them. */
			size_t n = min_size(hlen / sz, MAX_BUFS_PER_CLASS);
			p.count[i] = (uint32_t)n;
			p.len[i] = xpi_align_up(n * sz, HUGE_PAGE_SIZE);
			p.huge[i] = true;
		}
		planned += p.len[i];
	}
	*out = p;
}

static void unregister_class(struct xpi_pool *pool, struct xpi_pool_class *c)
{
	int nhooks = atomic_load(&pool->nhooks);
	for (int h = 0; h < nhooks; h++) {
		if (c->handles[h] != NULL && pool->hooks[h].dereg != NULL)
			pool->hooks[h].dereg(pool->hooks[h].arg, c->handles[h]);
		c->handles[h] = NULL;
	}
}

void xpi_pool_drop_hooks(struct xpi_pool *pool)
{
	if (pool == NULL)
		return;
	for (int i = 0; i < XPI_POOL_NCLASSES; i++)
		unregister_class(pool, &pool->cls[i]);
	/* Large buffers the program still holds keep their registrations
	 * until the backends close their devices, which frees them. */
	atomic_store(&pool->nhooks, 0);
}

void xpi_pool_destroy(struct xpi_pool *pool)
{
	if (pool == NULL)
		return;
	for (int i = 0; i < XPI_POOL_NCLASSES; i++) {
		struct xpi_pool_class *c = &pool->cls[i];
		unregister_class(pool, c);
		if (c->base != NULL)
			munmap(c->base, c->map_len);
		free(c->bufs);
		xpi_free_stack_fini(&c->free);
	}
	free(pool);
}

static int init_class(struct xpi_pool *pool, struct xpi_pool_class *c, size_t buf_size,
		      const struct xpi_pool_plan *plan, int i, int hugepages)
{
	c->buf_size = buf_size;
	c->count = plan->count[i];
	if (c->count == 0)
		return 0; /* the bound leaves no room for this class */
	c->map_len = plan->len[i];
	c->huge = plan->huge[i];
	c->base = map_region(c->map_len, c->huge);
	if (c->base == NULL && c->huge && hugepages == XP_HUGEPAGES_AUTO) {
		/* No free huge pages: the ordinary layout, or the fewer buffers
		 * a shrunk class had, so no more than the planned bytes. */
		c->huge = false;
		if (plan->ordinary[i] < c->count)
			c->count = plan->ordinary[i];
		c->map_len = (size_t)c->count * buf_size;
		c->base = map_region(c->map_len, false);
	}
	if (c->base == NULL)
		return -ENOMEM;
	c->bufs = calloc(c->count, sizeof(*c->bufs));
	if (c->bufs == NULL)
		return -ENOMEM;
	int rc = xpi_free_stack_init(&c->free, c->count);
	if (rc < 0)
		return rc;
	for (uint32_t k = 0; k < c->count; k++) {
		struct xp_buf *b = &c->bufs[k];
		b->pool = pool;
		b->data = c->base + (size_t)k * buf_size;
		b->cap = buf_size;
		b->index = k;
		b->cls = (uint8_t)(c - pool->cls);
	}
	/* Pushed from the top down, so the first gets hand out the lowest
	 * addresses in order. */
	for (uint32_t k = c->count; k-- > 0;)
		xpi_free_stack_push(&c->free, k);
	pool->reserved_bytes += c->map_len;
	return 0;
}

int xpi_pool_create(size_t max_bytes, int hugepages, struct xpi_pool **out)
{
	if (max_bytes == 0 || hugepages < XP_HUGEPAGES_AUTO || hugepages > XP_HUGEPAGES_ON)
		return -EINVAL;
	struct xpi_pool_plan plan;
	xpi_pool_plan(max_bytes, hugepages != XP_HUGEPAGES_OFF, &plan);
	bool any = false, all_huge = true;
	for (int i = 0; i < XPI_POOL_NCLASSES; i++) {
		any = any || plan.count[i] != 0;
		all_huge = all_huge && (plan.count[i] == 0 || plan.huge[i]);
	}
	if (hugepages == XP_HUGEPAGES_ON && !all_huge)
		return -ENOMEM; /* the bound is too small for whole huge pages */
	struct xpi_pool *pool = calloc(1, sizeof(*pool));
	if (pool == NULL)
		return -ENOMEM;
	pool->max_bytes = max_bytes;
	pool->huge = any;
	for (int i = 0; i < XPI_POOL_NCLASSES; i++) {
		int rc = init_class(pool, &pool->cls[i], class_sizes[i], &plan, i, hugepages);
		if (rc < 0) {
			xpi_pool_destroy(pool);
			return rc;
		}
		if (pool->cls[i].count != 0)
			pool->huge = pool->huge && pool->cls[i].huge;
	}
	*out = pool;
	return 0;
}

int xpi_pool_add_hook(struct xpi_pool *pool, const struct xpi_reg_hook *hook)
{
	int h = atomic_load(&pool->nhooks);
	if (h >= XPI_POOL_MAX_HOOKS)
		return -ENOSPC;
	for (int i = 0; i < XPI_POOL_NCLASSES; i++) {
		struct xpi_pool_class *c = &pool->cls[i];
		if (c->count == 0)
			continue;
		int rc = hook->reg(hook->arg, c->base, c->map_len, &c->handles[h]);
		if (rc < 0) {
			while (--i >= 0) {
				if (pool->cls[i].count != 0)
					hook->dereg(hook->arg, pool->cls[i].handles[h]);
				pool->cls[i].handles[h] = NULL;
			}
			return rc;
		}
	}
	pool->hooks[h] = *hook;
	atomic_store(&pool->nhooks, h + 1);
	return 0;
}

size_t xpi_pool_largest_class(const struct xpi_pool *pool)
{
	return pool->cls[XPI_POOL_NCLASSES - 1].buf_size;
}

static int get_large(struct xpi_pool *pool, size_t size, struct xp_buf **out)
{
	size_t len = xpi_align_up(size, 4096);
	size_t budget =
		pool->max_bytes > pool->reserved_bytes ? pool->max_bytes - pool->reserved_bytes : 0;
	size_t prev = atomic_fetch_add(&pool->large_bytes, len);
	if (prev + len > budget) {
		atomic_fetch_sub(&pool->large_bytes, len);
		return -ENOBUFS;
	}
	struct xp_buf *b = calloc(1, sizeof(*b));
	void *mem = b != NULL ? map_region(len, false) : NULL;
	if (mem == NULL) {
		free(b);
		atomic_fetch_sub(&pool->large_bytes, len);
		return -ENOBUFS;
	}
	b->pool = pool;
	b->data = mem;
	b->cap = len;
	b->cls = XPI_POOL_LARGE_CLASS;
	/* Not registered here: most large pooled receives are copied into by a
	 * transport that needs no key, and registering (pinning) a mapping of
	 * megabytes with every backend on every get would cost more than the
	 * copy. xpi_buf_handle() registers with the one backend that asks. */
	b->large_registered = 0;
	atomic_store_explicit(&b->refs, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&pool->large_in_use, 1, memory_order_relaxed);
	*out = b;
	return 0;
}

int xpi_pool_get(struct xpi_pool *pool, size_t size, struct xp_buf **out)
{
	for (int i = 0; i < XPI_POOL_NCLASSES; i++) {
		struct xpi_pool_class *c = &pool->cls[i];
		if (size > c->buf_size || c->count == 0)
			continue; /* a class the bound left empty: the next serves */
		uint32_t idx;
		if (!xpi_free_stack_pop(&c->free, &idx))
			return -ENOBUFS; /* back-pressure: do not borrow a bigger class */
		struct xp_buf *b = &c->bufs[idx];
		atomic_store_explicit(&b->refs, 1, memory_order_relaxed);
		b->len = size;
		*out = b;
		return 0;
	}
	return get_large(pool, size, out);
}

void xpi_buf_put(struct xp_buf *b)
{
	if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
		return;
	struct xpi_pool *pool = b->pool;
	if (b->cls == XPI_POOL_VIEW_CLASS) {
		struct xp_buf *parent = b->parent;
		free(b);
		xpi_buf_put(parent);
		return;
	}
	if (b->cls == XPI_POOL_LARGE_CLASS) {
		atomic_fetch_sub_explicit(&pool->large_in_use, 1, memory_order_relaxed);
		int nhooks = atomic_load(&pool->nhooks);
		for (int h = 0; h < nhooks; h++)
			if ((b->large_registered & (1u << h)) != 0 && pool->hooks[h].dereg != NULL)
				pool->hooks[h].dereg(pool->hooks[h].arg, b->large_handles[h]);
		munmap(b->data, b->cap);
		atomic_fetch_sub(&pool->large_bytes, b->cap);
		free(b);
		return;
	}
	xpi_free_stack_push(&pool->cls[b->cls].free, b->index);
}

uint64_t xpi_pool_in_use(const struct xpi_pool *pool)
{
	uint64_t n = (uint64_t)atomic_load(&pool->large_in_use);
	for (int i = 0; i < XPI_POOL_NCLASSES; i++)
		for (uint32_t k = 0; k < pool->cls[i].count; k++)
			n += atomic_load_explicit(&pool->cls[i].bufs[k].refs,
						  memory_order_relaxed) != 0;
	return n;
}

int xpi_buf_view(struct xp_buf *parent, uint8_t *data, size_t len, struct xp_buf **out)
{
	struct xp_buf *v = malloc(sizeof(*v));
	if (v == NULL)
		return -ENOMEM;
	*v = (struct xp_buf){
		.pool = parent->pool,
		.data = data,
		.cap = len,
		.len = len,
		.cls = XPI_POOL_VIEW_CLASS,
		.parent = parent,
	};
	atomic_init(&v->refs, 1);
	xpi_buf_retain(parent);
	*out = v;
	return 0;
}

void *xpi_buf_handle(struct xp_buf *b, int hook)
{
	if (hook < 0 || hook >= atomic_load(&b->pool->nhooks))
		return NULL;
	if (b->cls == XPI_POOL_VIEW_CLASS)
		return xpi_buf_handle(b->parent, hook);
	if (b->cls != XPI_POOL_LARGE_CLASS)
		return b->pool->cls[b->cls].handles[hook];
	if ((b->large_registered & (1u << hook)) == 0) {
		const struct xpi_reg_hook *h = &b->pool->hooks[hook];
		if (h->reg(h->arg, b->data, b->cap, &b->large_handles[hook]) < 0)
			return NULL;
		b->large_registered |= 1u << hook;
	}
	return b->large_handles[hook];
}
