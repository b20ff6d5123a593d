/* SPDX-License-Identifier: MIT */
/* The matching engine on its own: exact and wildcard receives, masks,
 * communicators, the sequence rule between exact and wildcard receives,
 * unexpected queues, cancel, repost and hash growth. */
#include <stdint.h>

#include "core/compiler.h"
#include "core/match.h"
#include "xport/xport.h"
#include "testutil.h"

struct recv {
	struct xpi_posted p;
	int id;
};

struct msg {
	struct xpi_unexp u;
	int id;
};

static struct xpi_match m;

static void post(struct recv *r, int id, uint32_t comm, int src, uint64_t tag, uint64_t mask)
{
	memset(r, 0, sizeof(*r));
	xpi_dlist_init(&r->p.link);
	r->id = id;
	r->p.key = (struct xpi_match_key){ .comm = comm, .src = src, .tag = tag, .mask = mask };
}

static struct recv *arrive(uint32_t comm, int src, uint64_t tag)
{
	struct xpi_match_key k = { .comm = comm, .src = src, .tag = tag };
	struct xpi_posted *p = xpi_match_arrive(&m, &k);
	return p != NULL ? xpi_container_of(p, struct recv, p) : NULL;
}

static void unexpected(struct msg *x, int id, uint32_t comm, int src, uint64_t tag)
{
	memset(x, 0, sizeof(*x));
	x->id = id;
	x->u.key = (struct xpi_match_key){ .comm = comm, .src = src, .tag = tag };
	xpi_match_add_unexpected(&m, &x->u);
}

static void test_exact_and_wildcard_order(void)
{
	struct recv r[4];
	T_OK(xpi_match_init(&m));
	post(&r[0], 0, 0, 1, 5, XP_TAG_EXACT);             /* exact */
	post(&r[1], 1, 0, XP_ANY_SOURCE, 5, XP_TAG_EXACT); /* any source */
	post(&r[2], 2, 0, 1, 5, XP_TAG_EXACT);             /* exact, later */
	post(&r[3], 3, 0, 1, 0x100, 0xf00);                /* masked */
	for (int i = 0; i < 4; i++)
		T_CHECK(xpi_match_post(&m, &r[i].p) == NULL);
	/* Earliest posted first, whichever queue it sits in. */
	T_EQ(arrive(0, 1, 5)->id, 0);
	T_EQ(arrive(0, 1, 5)->id, 1);
	T_EQ(arrive(0, 1, 5)->id, 2);
	T_CHECK(arrive(0, 1, 5) == NULL);
	T_CHECK(arrive(1, 1, 0x1ab) == NULL); /* other communicator */
	T_CHECK(arrive(0, 2, 0x1ab) == NULL); /* other source */
	T_CHECK(arrive(0, 1, 0x2ab) == NULL); /* masked bits differ */
	T_EQ(arrive(0, 1, 0x1ab)->id, 3);     /* unmasked bits ignored */
	xpi_match_fini(&m);
}

static void test_wildcard_posted_first_wins(void)
{
	struct recv r[2];
	T_OK(xpi_match_init(&m));
	post(&r[0], 0, 0, XP_ANY_SOURCE, 0, XP_TAG_ANY);
	post(&r[1], 1, 0, 3, 9, XP_TAG_EXACT);
	xpi_match_post(&m, &r[0].p);
	xpi_match_post(&m, &r[1].p);
	T_EQ(arrive(0, 3, 9)->id, 0); /* the wildcard was posted first */
	T_EQ(arrive(0, 3, 9)->id, 1);
	xpi_match_fini(&m);
}

static void test_unexpected_fifo(void)
{
	struct msg x[5];
	struct recv r;
	T_OK(xpi_match_init(&m));
	unexpected(&x[0], 0, 0, 1, 7);
	unexpected(&x[1], 1, 0, 2, 7);
	unexpected(&x[2], 2, 0, 1, 7);
	unexpected(&x[3], 3, 0, 1, 8);
	unexpected(&x[4], 4, 1, 1, 7);
	post(&r, 0, 0, 1, 7, XP_TAG_EXACT);
	T_EQ(xpi_container_of(xpi_match_post(&m, &r.p), struct msg, u)->id, 0);
	post(&r, 0, 0, XP_ANY_SOURCE, 0, XP_TAG_ANY);
	T_EQ(xpi_container_of(xpi_match_post(&m, &r.p), struct msg, u)->id, 1);
	post(&r, 0, 1, XP_ANY_SOURCE, 7, XP_TAG_EXACT);
	T_EQ(xpi_container_of(xpi_match_post(&m, &r.p), struct msg, u)->id, 4);
	/* A message taken and given back keeps its place. */
	post(&r, 0, 0, 1, 0, XP_TAG_ANY);
	struct xpi_unexp *u = xpi_match_post(&m, &r.p);
	T_EQ(xpi_container_of(u, struct msg, u)->id, 2);
	xpi_match_return_unexpected(&m, u);
	post(&r, 0, 0, 1, 8, XP_TAG_EXACT);
	T_EQ(xpi_container_of(xpi_match_post(&m, &r.p), struct msg, u)->id, 3);
	post(&r, 0, 0, 1, 7, XP_TAG_EXACT);
	T_EQ(xpi_container_of(xpi_match_post(&m, &r.p), struct msg, u)->id, 2);
	T_EQ(m.unexp_count, 0);
	xpi_match_fini(&m);
}

static void test_cancel_and_repost(void)
{
	struct recv r[3];
	T_OK(xpi_match_init(&m));
	post(&r[0], 0, 0, 1, 1, XP_TAG_EXACT);
	post(&r[1], 1, 0, XP_ANY_SOURCE, 1, XP_TAG_EXACT);
	post(&r[2], 2, 0, 1, 1, XP_TAG_EXACT);
	for (int i = 0; i < 3; i++)
		xpi_match_post(&m, &r[i].p);
	T_CHECK(xpi_match_cancel(&m, &r[1].p));
	T_CHECK(!xpi_match_cancel(&m, &r[1].p)); /* not queued any more */
	struct recv *got = arrive(0, 1, 1);
	T_EQ(got->id, 0);
	xpi_match_repost(&m, &got->p); /* could not take it after all */
	T_EQ(arrive(0, 1, 1)->id, 0);  /* still first */
	T_EQ(arrive(0, 1, 1)->id, 2);
	xpi_match_fini(&m);
}

static void test_hash_growth_keeps_fifo(void)
{
	enum { N = 20000 };
	struct recv *r = calloc(N, sizeof(*r));
	struct msg *x = calloc(N, sizeof(*x));
	T_OK(xpi_match_init(&m));
	/* Many keys, each posted twice: growth must keep per-key order. */
	for (int i = 0; i < N; i++) {
		post(&r[i], i, 0, i % 7, (uint64_t)(i / 2), XP_TAG_EXACT);
		r[i].p.key.src = 0;
		T_CHECK(xpi_match_post(&m, &r[i].p) == NULL);
	}
	T_CHECK(m.posted_exact.nbuckets > 1024);
	for (int i = 0; i < N; i++)
		T_EQ(arrive(0, 0, (uint64_t)(i / 2))->id, i);
	for (int i = 0; i < N; i++)
		unexpected(&x[i], i, 0, 3, (uint64_t)(i % 5000));
	T_CHECK(m.unexp_hash.nbuckets > 1024);
	struct recv q;
	for (int i = 0; i < N; i++) {
		post(&q, 0, 0, 3, (uint64_t)(i % 5000), XP_TAG_EXACT);
		T_EQ(xpi_container_of(xpi_match_post(&m, &q.p), struct msg, u)->id, i);
	}
	xpi_match_fini(&m);
	free(r);
	free(x);
}

int main(void)
{
	T_RUN(test_exact_and_wildcard_order);
	T_RUN(test_wildcard_posted_first_wins);
	T_RUN(test_unexpected_fifo);
	T_RUN(test_cancel_and_repost);
	T_RUN(test_hash_growth_keeps_fifo);
	return 0;
}
