/* SPDX-License-Identifier: MIT */
/* The lock-free queues: MPSC (command handoff) and MPMC ring (pool free
 * lists), with several producers at once; FIFO per producer, nothing lost
 * or duplicated. */
#include <pthread.h>
#include <stdint.h>

#include "core/compiler.h"
#include "core/mpmc_ring.h"
#include "core/mpsc.h"
#include "testutil.h"

#define PRODUCERS 3
#define PER_PRODUCER 100000

struct item {
	struct xpi_qnode node;
	int producer;
	int seq;
};

static struct xpi_mpsc q;
static struct item *items[PRODUCERS];

static void *produce(void *arg)
{
	int p = (int)(intptr_t)arg;
	for (int i = 0; i < PER_PRODUCER; i++)
		xpi_mpsc_push(&q, &items[p][i].node);
	return NULL;
}

static void test_mpsc_fifo_per_producer(void)
{
	xpi_mpsc_init(&q);
	T_CHECK(!xpi_mpsc_maybe_nonempty(&q));
	T_CHECK(xpi_mpsc_pop(&q) == NULL);
	pthread_t t[PRODUCERS];
	for (int p = 0; p < PRODUCERS; p++) {
		items[p] = calloc(PER_PRODUCER, sizeof(struct item));
		for (int i = 0; i < PER_PRODUCER; i++)
			items[p][i] = (struct item){ .producer = p, .seq = i };
		T_EQ(pthread_create(&t[p], NULL, produce, (void *)(intptr_t)p), 0);
	}
	int next[PRODUCERS] = { 0 };
	long total = 0;
	while (total < (long)PRODUCERS * PER_PRODUCER) {
		struct xpi_qnode *n = xpi_mpsc_pop(&q);
		if (n == NULL)
			continue; /* empty, or a push half done: try again */
		struct item *it = xpi_container_of(n, struct item, node);
		T_EQ(it->seq, next[it->producer]);
		next[it->producer]++;
		total++;
	}
	for (int p = 0; p < PRODUCERS; p++)
		pthread_join(t[p], NULL);
	T_CHECK(xpi_mpsc_pop(&q) == NULL);
	T_CHECK(!xpi_mpsc_maybe_nonempty(&q));
	for (int p = 0; p < PRODUCERS; p++) {
		T_EQ(next[p], PER_PRODUCER);
		free(items[p]);
	}
}

static struct xpi_mpmc_ring ring;
static _Atomic long popped_sum;

static void *mpmc_worker(void *arg)
{
	int id = (int)(intptr_t)arg;
	long sum = 0;
	for (uint32_t i = 0; i < 50000; i++) {
		uint32_t v = (uint32_t)id * 1000000u + i;
		while (!xpi_mpmc_ring_push(&ring, v))
			xpi_cpu_relax();
		uint32_t got;
		while (!xpi_mpmc_ring_pop(&ring, &got))
			xpi_cpu_relax();
		sum += got;
	}
	atomic_fetch_add(&popped_sum, sum);
	return NULL;
}

static void test_mpmc_ring(void)
{
	T_CHECK(xpi_mpmc_ring_init(&ring, 3) < 0); /* not a power of two */
	T_OK(xpi_mpmc_ring_init(&ring, 8));
	uint32_t v;
	T_CHECK(!xpi_mpmc_ring_pop(&ring, &v));
	for (uint32_t i = 0; i < 8; i++)
		T_CHECK(xpi_mpmc_ring_push(&ring, i));
	T_CHECK(!xpi_mpmc_ring_push(&ring, 99)); /* full */
	for (uint32_t i = 0; i < 8; i++) {
		T_CHECK(xpi_mpmc_ring_pop(&ring, &v));
		T_EQ(v, i);
	}
	/* Every value pushed is popped exactly once: the sums agree. */
	pthread_t t[4];
	long want = 0;
	for (int id = 0; id < 4; id++) {
		for (uint32_t i = 0; i < 50000; i++)
			want += (long)id * 1000000 + i;
		T_EQ(pthread_create(&t[id], NULL, mpmc_worker, (void *)(intptr_t)id), 0);
	}
	for (int id = 0; id < 4; id++)
		pthread_join(t[id], NULL);
	T_EQ(atomic_load(&popped_sum), want);
	T_CHECK(!xpi_mpmc_ring_pop(&ring, &v));
	xpi_mpmc_ring_fini(&ring);
}

int main(void)
{
	T_RUN(test_mpsc_fifo_per_producer);
	T_RUN(test_mpmc_ring);
	return 0;
}
