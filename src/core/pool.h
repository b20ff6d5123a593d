/* SPDX-License-Identifier: MIT */
/*
 * Registered memory pools: size-classed buffers carved from a few large
 * regions that are mapped once (hugetlb pages when the host has them) and
 * registered once with every backend through its mem_register hook.
 *
 * Threads: get and put may run on any thread at once (free lists are
 * lock-free stacks, free_stack.h). Buffers are refcounted; the last release puts a
 * buffer back on its class's free list. The pool never grows past its bound:
 * an empty class is back-pressure (-ENOBUFS), never a new allocation.
 * Messages larger than the largest class get a dedicated mapping charged to
 * the same byte bound.
 *
 * The bound is exact: the classes' mappings (hugetlb pages rounded up to
 * whole pages included) plus the dedicated mappings alive never exceed
 * max_bytes. Half the bound is shared equally by the classes, the rest
 * (and what the classes leave) is for dedicated mappings. A class whose
 * share holds no buffer gets one if the bound keeps room for a second of
 * that size, and is otherwise left empty: its sizes go to the next class
 * that has buffers, or to a dedicated mapping. Hugetlb pages are used for
 * a class only where its rounding to whole 2 MiB pages fits in the
 * classes' half (xpi_pool_plan), so large buffers keep theirs; every
 * class fits from about 20 MiB. XP_HUGEPAGES_ON with a smaller bound fails.
 */
#ifndef XPI_POOL_H
#define XPI_POOL_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "free_stack.h"

#define XPI_POOL_NCLASSES 5
#define XPI_POOL_LARGE_CLASS 0xffu
#define XPI_POOL_VIEW_CLASS 0xfeu

struct xpi_pool;

/* One registration of one region with one backend (see transport.h). */
struct xpi_reg_hook {
	/* Registers [addr, addr+len); returns 0 and an opaque handle, or <0. */
	int (*reg)(void *arg, void *addr, size_t len, void **handle);
	void (*dereg)(void *arg, void *handle);
	void *arg;
};

#define XPI_POOL_MAX_HOOKS 8 /* one per transport: XPI_MAX_TL */

struct xp_buf {
	struct xpi_pool *pool;
	uint8_t *data;
	size_t cap;
	size_t len;
	_Atomic uint32_t refs;
	uint32_t index;                          /* within its class */
	uint8_t cls;                             /* class, XPI_POOL_LARGE_CLASS or _VIEW_CLASS */
	struct xp_buf *parent;                   /* a view's: whose memory it shows */
	void *large_handles[XPI_POOL_MAX_HOOKS]; /* registrations of a large buffer */
	uint32_t large_registered;               /* which of them exist (1 << hook) */
};

struct xpi_pool_class {
	size_t buf_size;
	uint32_t count;
	uint8_t *base; /* count * buf_size bytes */
	size_t map_len;
	bool huge;
	struct xp_buf *bufs;
	struct xpi_free_stack free;
	void *handles[XPI_POOL_MAX_HOOKS];
};

struct xpi_pool {
	struct xpi_pool_class cls[XPI_POOL_NCLASSES];
	size_t max_bytes;
	size_t reserved_bytes;        /* what the classes mapped (<= max_bytes) */
	_Atomic size_t large_bytes;   /* dedicated mappings now alive */
	_Atomic int64_t large_in_use; /* how many of them */
	struct xpi_reg_hook hooks[XPI_POOL_MAX_HOOKS];
	_Atomic int nhooks;
	bool huge;
};

/* How a pool bounded by @max_bytes lays out its classes. */
struct xpi_pool_plan {
	uint32_t count[XPI_POOL_NCLASSES]; /* buffers; 0: the class is empty */
	/* Buffers on ordinary pages: the layout without hugetlb pages, and
	 * where a class planned on them falls back to (no more than count). */
	uint32_t ordinary[XPI_POOL_NCLASSES];
	size_t len[XPI_POOL_NCLASSES]; /* bytes its mapping takes */
	bool huge[XPI_POOL_NCLASSES];  /* on hugetlb pages (len whole 2 MiB pages) */
};

/* The layout of a pool bounded by @max_bytes, with hugetlb pages for the
 * classes where they fit if @huge: the lengths never add up to more than
 * @max_bytes. Pure. */
void xpi_pool_plan(size_t max_bytes, bool huge, struct xpi_pool_plan *out);

/*
 * Creates a pool bounded by @max_bytes, laid out as xpi_pool_plan says (a
 * class planned on hugetlb pages falls back to ordinary ones if the host
 * has none free, unless @hugepages is XP_HUGEPAGES_ON). Any bound is
 * honoured; xp_init refuses bounds below XP_POOL_MIN_BYTES, too small for
 * the transports. @hugepages is enum xp_hugepages. Returns 0, -EINVAL,
 * -ENOMEM (also: XP_HUGEPAGES_ON and no free huge pages, or a bound too
 * small for whole huge pages).
 */
int xpi_pool_create(size_t max_bytes, int hugepages, struct xpi_pool **out);
void xpi_pool_destroy(struct xpi_pool *pool);
/* Undoes every registration the hooks made and forgets the hooks: before
 * the backends that own them are destroyed (a device cannot be closed with
 * memory still registered on it). */
void xpi_pool_drop_hooks(struct xpi_pool *pool);

/*
 * Registers every region of the pool with a backend's hook and remembers
 * the hook for large buffers mapped later. Not thread-safe against itself;
 * called while a context is being set up. Returns 0 or the hook's error.
 */
int xpi_pool_add_hook(struct xpi_pool *pool, const struct xpi_reg_hook *hook);

/* The smallest buffer of at least @size bytes. Returns 0 or -ENOBUFS. */
int xpi_pool_get(struct xpi_pool *pool, size_t size, struct xp_buf **out);

/* Adds a reference. */
static inline void xpi_buf_retain(struct xp_buf *b)
{
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
}

/* Drops a reference; the last one returns the buffer to its pool. */
void xpi_buf_put(struct xp_buf *b);

/*
 * A buffer that shows [@data, @data + @len) of @parent's memory, holding a
 * reference to @parent until it is released: how a stream transport hands
 * one message out of a received chunk to the user without a copy.
 * Returns 0 or -ENOMEM.
 */
int xpi_buf_view(struct xp_buf *parent, uint8_t *data, size_t len, struct xp_buf **out);

/*
 * The registration handle of the buffer for hook number @hook (a transport's
 * index in its context), or NULL. A large buffer is registered with that
 * hook on the first call, by whoever holds the buffer, and deregistered
 * when it is freed: only the backend that needs a key pays for one.
 */
void *xpi_buf_handle(struct xp_buf *b, int hook);

size_t xpi_pool_largest_class(const struct xpi_pool *pool);

/* Buffers taken and not yet released. Walks every descriptor: for
 * statistics and tests, not for hot paths (a shared counter updated on every
 * get and put would cost a cache-line transfer between threads each time). */
uint64_t xpi_pool_in_use(const struct xpi_pool *pool);

#endif
