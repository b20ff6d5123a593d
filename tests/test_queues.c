/* SPDX-License-Identifier: MIT */
/* The lock-free queues: MPSC (command handoff) and the free stack (pool free
 * lists), with several producers at once; FIFO per producer, nothing lost
 * or duplicated. */
#include <pthread.h>
#include <stdint.h>

#include "core/compiler.h"
#include "core/free_stack.h"
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

/*
 * The state in which the producers' hint says "empty" while a node waits:
 * the consumer reached node a as the last one and put the stub behind it,
 * but producer b had swapped the tail in between and not yet linked a to
 * b. The consumer's own test must see a; pop must give a then b once b's
 * push is complete. Built step by step as the interleaving leaves it (one
 * thread cannot stop pop halfway).
 */
static void test_mpsc_empty_sees_blocked_head(void)
{
	struct xpi_mpsc bq;
	struct item a = { .seq = 1 }, b = { .seq = 2 };
	xpi_mpsc_init(&bq);
	T_CHECK(xpi_mpsc_empty(&bq));
	xpi_mpsc_push(&bq, &a.node);
	/* pop: past the stub to a, the last node (head == tail) */
	bq.head = &a.node;
	/* producer b, half done: the tail swapped, a not yet linked to b */
	atomic_store(&b.node.next, NULL);
	struct xpi_qnode *prev = atomic_exchange(&bq.tail, &b.node);
	T_CHECK(prev == &a.node);
	/* pop puts the stub behind the tail it sees, now b, and finds a
	 * without a successor: it returns nothing */
	xpi_mpsc_push(&bq, &bq.stub);
	T_CHECK(atomic_load(&a.node.next) == NULL);
	T_CHECK(!xpi_mpsc_maybe_nonempty(&bq)); /* the hint is blind to it */
	T_CHECK(!xpi_mpsc_empty(&bq));          /* the consumer is not */
	T_CHECK(xpi_mpsc_pop(&bq) == NULL);     /* still blocked on b's link */
	atomic_store(&prev->next, &b.node);     /* b's push completes */
	T_CHECK(xpi_mpsc_pop(&bq) == &a.node);
	T_CHECK(xpi_mpsc_pop(&bq) == &b.node);
	T_CHECK(xpi_mpsc_pop(&bq) == NULL);
	T_CHECK(xpi_mpsc_empty(&bq));
}

#define SLOTS 64
static struct xpi_free_stack stack;
static _Atomic int owner_of[SLOTS]; /* who holds each index now, 0 if nobody */

static void *stack_worker(void *arg)
{
	int me = (int)(intptr_t)arg;
	uint32_t held[4];
	for (int round = 0; round < 50000; round++) {
		int n = 0;
		while (n < 4 && xpi_free_stack_pop(&stack, &held[n])) {
			int prev = atomic_exchange(&owner_of[held[n]], me);
			if (prev != 0)
				T_FAIL("index %u popped by %d while %d holds it", held[n], me,
				       prev);
			n++;
		}
		while (n-- > 0) {
			atomic_store(&owner_of[held[n]], 0);
			xpi_free_stack_push(&stack, held[n]);
		}
	}
	return NULL;
}

static void test_free_stack(void)
{
	T_OK(xpi_free_stack_init(&stack, SLOTS));
	uint32_t v;
	T_CHECK(!xpi_free_stack_pop(&stack, &v));
	xpi_free_stack_push(&stack, 3);
	xpi_free_stack_push(&stack, 9);
	T_CHECK(xpi_free_stack_pop(&stack, &v));
	T_EQ(v, 9); /* last in, first out */
	T_CHECK(xpi_free_stack_pop(&stack, &v));
	T_EQ(v, 3);
	for (uint32_t i = 0; i < SLOTS; i++)
		xpi_free_stack_push(&stack, i);
	/* Four threads pop and push at once: no index is ever held twice. */
	pthread_t t[4];
	for (int id = 0; id < 4; id++)
		T_EQ(pthread_create(&t[id], NULL, stack_worker, (void *)(intptr_t)(id + 1)), 0);
	for (int id = 0; id < 4; id++)
		pthread_join(t[id], NULL);
	/* And none was lost: all of them come back out, once each. */
	int seen[SLOTS] = { 0 };
	int count = 0;
	while (xpi_free_stack_pop(&stack, &v)) {
		T_CHECK(v < SLOTS && !seen[v]);
		seen[v] = 1;
		count++;
	}
	T_EQ(count, SLOTS);
	xpi_free_stack_fini(&stack);
}

int main(void)
{
	T_RUN(test_mpsc_fifo_per_producer);
	T_RUN(test_mpsc_empty_sees_blocked_head);
	T_RUN(test_free_stack);
	return 0;
}
