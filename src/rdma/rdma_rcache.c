/* SPDX-License-Identifier: MIT */
/* The registration cache (rdma_rcache.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../core/compiler.h"
#include "rdma.h"
#include "rdma_rcache.h"

#define ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE)

void xpi_rcache_init(struct rdma_rcache *rc, struct ibv_pd *pd, size_t max_bytes)
{
	memset(rc, 0, sizeof(*rc));
	pthread_mutex_init(&rc->lock, NULL);
	rc->pd = pd;
	rc->max_bytes = max_bytes;
	xpi_dlist_init(&rc->lru);
}

static void drop_entry(struct rdma_rcache *rc, struct rdma_rentry *e)
{
	ibv_dereg_mr(e->mr);
	rc->bytes -= e->end - e->start;
	rc->entries--;
	free(e);
}

/* Removes @e from its region's list of chunks. */
static void unlink_from_region(struct rdma_rentry *e)
{
	struct rdma_region *r = e->region;
	for (uint32_t i = 0; r != NULL && i < r->nchunks; i++) {
		if (r->chunks[i] == e) {
			r->chunks[i] = r->chunks[--r->nchunks];
			break;
		}
	}
	e->region = NULL;
}

/* Lets go of least recently used chunks no transfer holds while the cache
 * is over its bounds (it may stay over if every chunk is in use). */
static void evict(struct rdma_rcache *rc)
{
	while ((rc->bytes > rc->max_bytes || rc->entries > XPI_RCACHE_MAX_ENTRIES) &&
	       !xpi_dlist_empty(&rc->lru)) {
		struct rdma_rentry *e =
			xpi_container_of(xpi_dlist_pop_head(&rc->lru), struct rdma_rentry, lru);
		unlink_from_region(e);
		drop_entry(rc, e);
		rc->evictions++;
	}
}

void xpi_rcache_fini(struct rdma_rcache *rc)
{
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&rc->lru)) != NULL) {
		struct rdma_rentry *e = xpi_container_of(l, struct rdma_rentry, lru);
		unlink_from_region(e);
		drop_entry(rc, e);
	}
	pthread_mutex_destroy(&rc->lock);
}

int xpi_rcache_region_new(struct rdma_rcache *rc, void *addr, size_t len, bool whole,
			  struct rdma_region **out)
{
	struct rdma_region *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	r->start = (uintptr_t)addr;
	r->end = r->start + len;
	if (whole || len <= XPI_RCACHE_EAGER_MAX) {
		r->mr = ibv_reg_mr(rc->pd, addr, len, ACCESS);
		if (r->mr == NULL) {
			int err = errno > 0 ? -errno : -EIO;
			free(r);
			return err;
		}
	}
	*out = r;
	return 0;
}

int xpi_rcache_region_dmabuf(struct rdma_rcache *rc, int fd, uint64_t offset, void *addr,
			     size_t len, struct rdma_region **out)
{
	struct rdma_region *r = calloc(1, sizeof(*r));
	if (r == NULL)
		return -ENOMEM;
	r->start = (uintptr_t)addr;
	r->end = r->start + len;
	/* Its I/O virtual address is the program's name for the memory, so
	 * work requests and peers use the addresses sends and receives give. */
	r->mr = ibv_reg_dmabuf_mr(rc->pd, offset, len, (uint64_t)(uintptr_t)addr, fd, ACCESS);
	if (r->mr == NULL) {
		int err = errno > 0 ? -errno : -EIO;
		free(r);
		return err;
	}
	*out = r;
	return 0;
}

void xpi_rcache_region_free(struct rdma_rcache *rc, struct rdma_region *r)
{
	if (r->mr != NULL)
		ibv_dereg_mr(r->mr);
	pthread_mutex_lock(&rc->lock);
	while (r->nchunks > 0) {
		struct rdma_rentry *e = r->chunks[r->nchunks - 1];
		unlink_from_region(e);
		if (e->refs == 0) {
			xpi_dlist_remove(&e->lru);
			drop_entry(rc, e);
		} /* else: in use; xpi_rcache_put drops it, region-less */
	}
	pthread_mutex_unlock(&rc->lock);
	free(r->chunks);
	free(r);
}

struct ibv_mr *xpi_rcache_get(struct rdma_rcache *rc, struct rdma_region *r, const void *buf,
			      size_t len, struct rdma_rentry **ent, int *err)
{
	uintptr_t b = (uintptr_t)buf, e = b + len;
	*ent = NULL;
	if (b < r->start || e > r->end || e < b) {
		*err = -EINVAL;
		return NULL;
	}
	if (r->mr != NULL)
		return r->mr;
	pthread_mutex_lock(&rc->lock);
	for (uint32_t i = 0; i < r->nchunks; i++) {
		struct rdma_rentry *c = r->chunks[i];
		if (c->start <= b && e <= c->end) {
			if (c->refs++ == 0)
				xpi_dlist_remove(&c->lru); /* in use: not evictable */
			rc->hits++;
			pthread_mutex_unlock(&rc->lock);
			*ent = c;
			return c->mr;
		}
	}
	/* A miss: pin the aligned chunks this transfer spans, within the
	 * registration. */
	uintptr_t cs = b & ~(uintptr_t)(XPI_RCACHE_CHUNK - 1);
	uintptr_t ce = (e + XPI_RCACHE_CHUNK - 1) & ~(uintptr_t)(XPI_RCACHE_CHUNK - 1);
	if (cs < r->start)
		cs = r->start;
	if (ce > r->end)
		ce = r->end;
	struct rdma_rentry *c = calloc(1, sizeof(*c));
	if (c != NULL && r->nchunks == r->cap) {
		uint32_t cap = r->cap ? 2 * r->cap : 8;
		struct rdma_rentry **v = realloc(r->chunks, cap * sizeof(*v));
		if (v == NULL) {
			free(c);
			c = NULL;
		} else {
			r->chunks = v;
			r->cap = cap;
		}
	}
	if (c == NULL) {
		pthread_mutex_unlock(&rc->lock);
		*err = -ENOMEM;
		return NULL;
	}
	c->mr = ibv_reg_mr(rc->pd, (void *)cs, ce - cs, ACCESS);
	if (c->mr == NULL) {
		*err = errno > 0 ? -errno : -EIO;
		free(c);
		pthread_mutex_unlock(&rc->lock);
		return NULL;
	}
	c->region = r;
	c->start = cs;
	c->end = ce;
	c->refs = 1;
	xpi_dlist_init(&c->lru);
	r->chunks[r->nchunks++] = c;
	rc->bytes += ce - cs;
	rc->entries++;
	rc->misses++;
	evict(rc);
	pthread_mutex_unlock(&rc->lock);
	*ent = c;
	return c->mr;
}

void xpi_rcache_put(struct rdma_rcache *rc, struct rdma_rentry *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&rc->lock);
	if (--c->refs == 0) {
		if (c->region == NULL) {
			drop_entry(rc, c); /* its registration went while in use */
		} else {
			xpi_dlist_push_tail(&rc->lru, &c->lru);
			evict(rc);
		}
	}
	pthread_mutex_unlock(&rc->lock);
}
