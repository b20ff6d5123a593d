/* SPDX-License-Identifier: MIT */
/* Pools: size classes, refcounts, exhaustion as back-pressure, the byte
 * bound, registration hooks, and concurrent get/put from several threads. */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>

#include "core/pool.h"
#include "xport/xport.h"
#include "testutil.h"

#define MiB (1u << 20)

static void test_classes_and_refcount(void)
{
	struct xpi_pool *pool;
	T_OK(xpi_pool_create(16 * MiB, XP_HUGEPAGES_OFF, &pool));
	struct xp_buf *a, *b;
	T_OK(xpi_pool_get(pool, 1, &a));
	T_CHECK(a->cap >= 1 && a->cap <= 256);
	T_OK(xpi_pool_get(pool, 3000, &b));
	T_CHECK(b->cap >= 3000 && b->cap < 3000 * 8);
	T_CHECK(a->data != b->data);
	memset(b->data, 0xab, 3000); /* the memory is really there */
	T_EQ(xpi_pool_in_use(pool), 2);
	xpi_buf_retain(a);
	xpi_buf_put(a);
	T_EQ(xpi_pool_in_use(pool), 2); /* one reference left */
	xpi_buf_put(a);
	xpi_buf_put(b);
	T_EQ(xpi_pool_in_use(pool), 0);
	xpi_pool_destroy(pool);
	xpi_pool_destroy(NULL);
}

static void test_exhaustion_is_backpressure(void)
{
	struct xpi_pool *pool;
	T_OK(xpi_pool_create(4 * MiB, XP_HUGEPAGES_OFF, &pool));
	/* Take every buffer of the 2 KiB class; the next get must fail cleanly
	 * instead of borrowing a bigger class or allocating. */
	uint32_t count = 0;
	for (int i = 0; i < XPI_POOL_NCLASSES; i++)
		if (pool->cls[i].buf_size == 2048)
			count = pool->cls[i].count;
	T_CHECK(count > 0);
	struct xp_buf **held = calloc(count, sizeof(*held));
	for (uint32_t i = 0; i < count; i++)
		T_OK(xpi_pool_get(pool, 2000, &held[i]));
	struct xp_buf *x;
	T_EQ(xpi_pool_get(pool, 2000, &x), -ENOBUFS);
	xpi_buf_put(held[7]);
	T_OK(xpi_pool_get(pool, 2000, &x)); /* released buffers come back */
	T_CHECK(x == held[7]);
	held[7] = x;
	for (uint32_t i = 0; i < count; i++)
		xpi_buf_put(held[i]);
	free(held);

	/* Large buffers are charged to the same bound. */
	size_t large = pool->max_bytes; /* more than what is left for large buffers */
	T_EQ(xpi_pool_get(pool, large, &x), -ENOBUFS);
	size_t room = pool->max_bytes - pool->reserved_bytes;
	T_CHECK(room > xpi_pool_largest_class(pool));
	T_OK(xpi_pool_get(pool, room - 4096, &x));
	T_CHECK(x->cap >= room - 4096);
	memset(x->data, 1, room - 4096);
	struct xp_buf *y;
	T_EQ(xpi_pool_get(pool, 2 * 4096 + xpi_pool_largest_class(pool), &y), -ENOBUFS);
	xpi_buf_put(x);
	T_EQ(atomic_load(&pool->large_bytes), 0);
	xpi_pool_destroy(pool);
}

/* HugePages_Free of /proc/meminfo, or -1. */
static long free_hugepages(void)
{
	FILE *f = fopen("/proc/meminfo", "r");
	char line[128];
	long n = -1;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "HugePages_Free: %ld", &n) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return n;
}

static void test_hugepages_or_fallback(void)
{
	struct xpi_pool *pool;
	long before = free_hugepages();
	/* AUTO always works: hugetlb pages if reserved, ordinary pages else.
	 * 64 MiB, the default: below about 20 MiB the classes' half of the
	 * bound cannot hold each class in whole 2 MiB pages, and some stay on
	 * ordinary pages (test_plan_within_bound). */
	T_OK(xpi_pool_create(64 * MiB, XP_HUGEPAGES_AUTO, &pool));
	struct xp_buf *b;
	T_OK(xpi_pool_get(pool, 100000, &b));
	memset(b->data, 7, 100000);
	xpi_buf_put(b);
	int huge = pool->huge;
	xpi_pool_destroy(pool);
	fprintf(stderr, "   %ld free huge pages; pool pages: %s\n", before,
		huge ? "hugetlb" : "ordinary");
	/* Other tests may take huge pages meanwhile, so only the clear cases
	 * are checked: none free means ordinary pages and ON failing; plenty
	 * free (ci/test.sh reserves them) means hugetlb pages. */
	if (before == 0) {
		T_CHECK(!huge);
		T_EQ(xpi_pool_create(64 * MiB, XP_HUGEPAGES_ON, &pool), -ENOMEM);
	} else if (before >= 256) {
		T_CHECK(huge);
		T_OK(xpi_pool_create(64 * MiB, XP_HUGEPAGES_ON, &pool));
		T_CHECK(pool->huge);
		T_CHECK(pool->reserved_bytes <= 32 * MiB); /* the classes' half */
		xpi_pool_destroy(pool);
	}
	T_OK(xpi_pool_create(8 * MiB, XP_HUGEPAGES_OFF, &pool));
	T_CHECK(!pool->huge);
	xpi_pool_destroy(pool);
	T_EQ(xpi_pool_create(0, XP_HUGEPAGES_OFF, &pool), -EINVAL);
}

/* XP_POOL_MAX_BYTES is a bound: with a small one the classes shrink (or
 * stay empty) to fit, and a get larger than what is left is -ENOBUFS. */
static void test_small_bound_is_exact(void)
{
	struct xpi_pool *pool;
	size_t bound = 64 << 10;
	T_OK(xpi_pool_create(bound, XP_HUGEPAGES_OFF, &pool));
	T_CHECK(pool->reserved_bytes <= bound);
	struct xp_buf *b, *c;
	T_EQ(xpi_pool_get(pool, 256 << 10, &b), -ENOBUFS);
	T_OK(xpi_pool_get(pool, 100, &b)); /* the small classes are there */
	xpi_buf_put(b);
	/* The rest of the bound, as one dedicated mapping; then nothing. */
	size_t left = (bound - pool->reserved_bytes) & ~(size_t)4095;
	T_CHECK(left > 16384);
	T_OK(xpi_pool_get(pool, left, &b));
	T_CHECK(pool->reserved_bytes + atomic_load(&pool->large_bytes) <= bound);
	T_EQ(xpi_pool_get(pool, 20000, &c), -ENOBUFS);
	xpi_buf_put(b);
	T_EQ(atomic_load(&pool->large_bytes), 0);
	xpi_pool_destroy(pool);
}

/* The layout never adds up to more than the bound, with hugetlb pages
 * rounded up too, and the default keeps every class on hugetlb pages. */
static void test_plan_within_bound(void)
{
	static const size_t bounds[] = {
		1,        4096,         64 << 10, 1 * MiB,    1 * MiB + 12345,
		3 * MiB,  4 * MiB,      8 * MiB,  10 * MiB,   16 * MiB,
		20 * MiB, 33 * MiB + 1, 64 * MiB, 1024 * MiB, (size_t)16 << 30,
	};
	for (size_t k = 0; k < sizeof(bounds) / sizeof(bounds[0]); k++) {
		size_t ordinary = 0;
		for (int huge = 0; huge <= 1; huge++) {
			struct xpi_pool_plan p;
			xpi_pool_plan(bounds[k], huge, &p);
			size_t sum = 0;
			for (int i = 0; i < XPI_POOL_NCLASSES; i++) {
				T_CHECK(p.count[i] <= 16384);
				T_CHECK(!p.huge[i] || huge);
				T_CHECK(!p.huge[i] || p.len[i] % (2 * MiB) == 0);
				T_CHECK((p.count[i] == 0) == (p.len[i] == 0));
				T_CHECK(p.huge[i] || p.ordinary[i] == p.count[i]);
				sum += p.len[i];
			}
			if (sum > bounds[k])
				T_FAIL("bound %zu (huge %d): classes take %zu", bounds[k], huge,
				       sum);
			/* The rounding stays in the classes' half. */
			if (huge && sum > bounds[k] / 2 && sum > ordinary)
				T_FAIL("bound %zu: hugetlb classes take %zu of the large "
				       "buffers' half",
				       bounds[k], sum);
			ordinary = sum;
		}
	}
	/* Every class on hugetlb pages from 20 MiB (the default is 64 MiB). */
	for (size_t bound = 20 * MiB; bound <= 1024 * MiB; bound *= 2) {
		struct xpi_pool_plan p;
		xpi_pool_plan(bound, true, &p);
		for (int i = 0; i < XPI_POOL_NCLASSES; i++)
			if (p.count[i] == 0 || !p.huge[i])
				T_FAIL("bound %zu: class %d not on hugetlb pages", bound, i);
	}
}

/* Through the API: xp_init refuses a bound below XP_POOL_MIN_BYTES and
 * says why; at the minimum, the stats stay within the bound. */
static void test_bound_through_xp_init(void)
{
	xp_config_t cfg;
	xp_context_t *ctx;
	xp_config_init(&cfg);
	cfg.pool_max_bytes = 64 << 10;
	T_EQ(xp_init(&cfg, &ctx), -EINVAL);
	const char *why = xp_error_detail();
	T_CHECK(strstr(why, "XP_POOL_MAX_BYTES") != NULL);
	T_CHECK(strstr(why, "65536") != NULL);
	T_CHECK(strstr(why, "from 1m") != NULL);
	/* From the environment: the field keeps its default (nothing bad is
	 * applied) and xp_init fails naming the variable, even though the
	 * program's own field is fine. */
	setenv("XP_POOL_MAX_BYTES", "64k", 1);
	xp_config_init(&cfg);
	T_EQ(cfg.pool_max_bytes, 64 << 20);
	T_EQ(xp_init(&cfg, &ctx), -EINVAL);
	T_CHECK(strstr(xp_error_detail(), "XP_POOL_MAX_BYTES=64k") != NULL);
	unsetenv("XP_POOL_MAX_BYTES");

	cfg.pool_max_bytes = XP_POOL_MIN_BYTES;
	T_OK(xp_init(&cfg, &ctx));
	xp_stats_t st;
	T_OK(xp_stats_get(ctx, &st));
	T_CHECK(st.pool_bytes <= XP_POOL_MIN_BYTES);
	xp_buf_t *b, *c;
	T_OK(xp_buf_get(ctx, 256 << 10, &b));
	T_OK(xp_stats_get(ctx, &st));
	T_CHECK(st.pool_bytes <= XP_POOL_MIN_BYTES);
	size_t left = XP_POOL_MIN_BYTES - st.pool_bytes;
	T_EQ(xp_buf_get(ctx, left + 1, &c), -ENOBUFS);
	T_OK(xp_buf_get(ctx, left & ~(size_t)4095, &c));
	T_OK(xp_stats_get(ctx, &st));
	T_CHECK(st.pool_bytes <= XP_POOL_MIN_BYTES);
	xp_buf_release(c);
	xp_buf_release(b);
	xp_finalize(ctx);
}

struct hook_log {
	int regs, deregs;
	size_t bytes;
};

static int hook_reg(void *arg, void *addr, size_t len, void **handle)
{
	struct hook_log *log = arg;
	log->regs++;
	log->bytes += len;
	*handle = addr;
	return 0;
}

static void hook_dereg(void *arg, void *handle)
{
	struct hook_log *log = arg;
	T_CHECK(handle != NULL);
	log->deregs++;
}

static void test_registration_hook(void)
{
	struct xpi_pool *pool;
	struct hook_log log = { 0 };
	T_OK(xpi_pool_create(8 * MiB, XP_HUGEPAGES_OFF, &pool));
	struct xpi_reg_hook hook = { .reg = hook_reg, .dereg = hook_dereg, .arg = &log };
	T_OK(xpi_pool_add_hook(pool, &hook));
	/* Every class region is registered once, whatever the number of buffers. */
	T_EQ(log.regs, XPI_POOL_NCLASSES);
	T_EQ(log.bytes, pool->reserved_bytes);
	struct xp_buf *b;
	T_OK(xpi_pool_get(pool, 300, &b));
	T_CHECK(xpi_buf_handle(b, 0) != NULL);
	xpi_buf_put(b);
	T_EQ(log.regs, XPI_POOL_NCLASSES); /* no registration per get */
	/* A large buffer is registered only when a backend asks for its key,
	 * once, and deregistered when freed; one nobody asked for costs none. */
	T_OK(xpi_pool_get(pool, 2 * MiB, &b));
	T_EQ(log.regs, XPI_POOL_NCLASSES);
	xpi_buf_put(b);
	T_EQ(log.deregs, 0);
	T_OK(xpi_pool_get(pool, 2 * MiB, &b));
	void *handle = xpi_buf_handle(b, 0);
	T_CHECK(handle != NULL);
	T_CHECK(xpi_buf_handle(b, 0) == handle);
	T_EQ(log.regs, XPI_POOL_NCLASSES + 1);
	xpi_buf_put(b);
	T_EQ(log.deregs, 1);
	xpi_pool_destroy(pool);
	T_EQ(log.deregs, 1 + XPI_POOL_NCLASSES);
}

#define THREADS 4
#define ROUNDS 20000

static void *churn(void *arg)
{
	struct xpi_pool *pool = arg;
	struct xp_buf *mine[8];
	unsigned seed = (unsigned)(uintptr_t)&mine;
	for (int r = 0; r < ROUNDS; r++) {
		int n = 1 + (int)(rand_r(&seed) % 8);
		int got = 0;
		for (int i = 0; i < n; i++) {
			if (xpi_pool_get(pool,
					 1 + rand_r(&seed) % (rand_r(&seed) % 2 ? 4000 : 300000),
					 &mine[got]) == 0) {
				/* Stamp the buffer: two owners of one buffer would clash. */
				memset(mine[got]->data, (int)(uintptr_t)&seed & 0xff, 16);
				got++;
			}
		}
		for (int i = 0; i < got; i++) {
			uint8_t want = (uint8_t)((uintptr_t)&seed & 0xff);
			for (int k = 0; k < 16; k++)
				if (mine[i]->data[k] != want)
					T_FAIL("buffer shared by two threads");
			xpi_buf_put(mine[i]);
		}
	}
	return NULL;
}

static void test_concurrent_get_put(void)
{
	struct xpi_pool *pool;
	T_OK(xpi_pool_create(1 * MiB, XP_HUGEPAGES_OFF, &pool)); /* small: contention */
	pthread_t t[THREADS];
	for (int i = 0; i < THREADS; i++)
		T_EQ(pthread_create(&t[i], NULL, churn, pool), 0);
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	T_EQ(xpi_pool_in_use(pool), 0);
	/* No buffer was lost on the way: every one of every class can be taken. */
	for (int c = 0; c < XPI_POOL_NCLASSES; c++) {
		uint32_t n = pool->cls[c].count, got = 0;
		struct xp_buf **all = calloc(n + 1, sizeof(*all));
		while (got <= n && xpi_pool_get(pool, pool->cls[c].buf_size, &all[got]) == 0)
			got++;
		T_EQ(got, n);
		for (uint32_t i = 0; i < got; i++)
			xpi_buf_put(all[i]);
		free(all);
	}
	xpi_pool_destroy(pool);
}

int main(void)
{
	T_RUN(test_classes_and_refcount);
	T_RUN(test_exhaustion_is_backpressure);
	T_RUN(test_hugepages_or_fallback);
	T_RUN(test_small_bound_is_exact);
	T_RUN(test_plan_within_bound);
	T_RUN(test_bound_through_xp_init);
	T_RUN(test_registration_hook);
	T_RUN(test_concurrent_get_put);
	return 0;
}
