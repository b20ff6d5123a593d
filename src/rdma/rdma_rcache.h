/* SPDX-License-Identifier: MIT */
/*
 * The RDMA transport's registration cache, for memory the program
 * registered (xp_mem_register).
 *
 * Invalidation is explicit. A registration is the program's promise that
 * the range stays mapped until it deregisters it (xp_mem_deregister,
 * before it frees or unmaps the memory: xport.h says so). No hooks on
 * free or munmap: such hooks were libfabric's most-reported source of
 * corruption (../shared/LESSONS.md). Within that promise, memory can be
 * pinned lazily and let go again:
 *  - a small registration (up to XPI_RCACHE_EAGER_MAX; the pool's size
 *    classes are such) is one memory region, pinned at once;
 *  - a larger one is pinned in aligned chunks of XPI_RCACHE_CHUNK as
 *    transfers touch them. Chunks no transfer uses wait on a
 *    least-recently-used list and are let go when the cache would
 *    otherwise pin more than its bound in bytes or in entries.
 * Deregistering drops every chunk of the range. A chunk a transfer still
 * uses is dropped when that transfer ends, so no stale key survives a
 * deregistration, and memory mapped later at the same address is pinned
 * anew.
 *
 * Memory the program did not register is pinned for the one transfer
 * (rdma_bulk.c), since nothing tells us when it goes away.
 *
 * Thread safety: regions are made and freed on any thread (mem_reg and
 * mem_dereg), and chunks are taken and given back by the owner. One mutex
 * covers both. It is never on the matching path, only on rendezvous.
 */
#ifndef XPI_RDMA_RCACHE_H
#define XPI_RDMA_RCACHE_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/dlist.h"

#define XPI_RCACHE_EAGER_MAX (32u << 20)
#define XPI_RCACHE_CHUNK (2u << 20)
#define XPI_RCACHE_MAX_ENTRIES 1024u

struct rdma_region;

struct rdma_rentry {
	struct xpi_dlink lru;       /* on the cache's list while no transfer uses it */
	struct rdma_region *region; /* NULL: its region was deregistered */
	uintptr_t start, end;
	struct ibv_mr *mr;
	int refs;
};

struct rdma_region {
	uintptr_t start, end;
	struct ibv_mr *mr; /* small registrations: pinned whole; else NULL */
	struct rdma_rentry **chunks;
	uint32_t nchunks, cap;
};

struct rdma_rcache {
	pthread_mutex_t lock;
	struct ibv_pd *pd;
	struct xpi_dlink lru; /* head: least recently used */
	size_t bytes, max_bytes;
	uint32_t entries;
	uint64_t hits, misses, evictions; /* for tests and xport-perf */
};

void xpi_rcache_init(struct rdma_rcache *rc, struct ibv_pd *pd, size_t max_bytes);
void xpi_rcache_fini(struct rdma_rcache *rc);

/* mem_reg: a region for [addr, addr + len), pinned at once if small or
 * @whole. 0 or a negative errno. */
int xpi_rcache_region_new(struct rdma_rcache *rc, void *addr, size_t len, bool whole,
			  struct rdma_region **out);
/* mem_reg_dmabuf: a region for @len bytes of the dmabuf @fd from @offset,
 * named by [addr, addr + len), registered whole at once (a dmabuf pins
 * through its exporter, not in chunks). 0 or a negative errno. */
int xpi_rcache_region_dmabuf(struct rdma_rcache *rc, int fd, uint64_t offset, void *addr,
			     size_t len, struct rdma_region **out);
/* mem_dereg: drops the region and every chunk of it (those in use when
 * their transfer gives them back). */
void xpi_rcache_region_free(struct rdma_rcache *rc, struct rdma_region *r);

/*
 * The memory region covering [buf, buf + len) inside @r, pinning its
 * chunk if it is not yet. *@ent is what to give back with xpi_rcache_put
 * when the transfer ends (NULL: nothing, a small region). NULL with *@err
 * set if pinning failed or the range is not inside @r.
 */
struct ibv_mr *xpi_rcache_get(struct rdma_rcache *rc, struct rdma_region *r, const void *buf,
			      size_t len, struct rdma_rentry **ent, int *err);
void xpi_rcache_put(struct rdma_rcache *rc, struct rdma_rentry *ent);

#endif
