/* SPDX-License-Identifier: MIT */
/*
 * The matching engine against a reference model, on random interleavings of
 * arrivals and exact, any-source, masked and any-tag receives (and cancels).
 * The model is the definition itself: a list of receives in posting order
 * and one of messages in arrival order, searched from the front. Each seed
 * runs thousands of operations; the seed is printed so that a failure can
 * be replayed with XP_TEST_SEED=<seed>.
 */
#include <stdint.h>
#include <time.h>

#include "core/compiler.h"
#include "core/match.h"
#include "xport/xport.h"
#include "testutil.h"

#define OPS 6000
#define SEEDS 40
#define MAX_LIVE 4096

struct recv {
	struct xpi_posted p;
	struct xpi_match_key key;
	int id;
	int live; /* posted in the model and not matched */
};

struct msg {
	struct xpi_unexp u;
	struct xpi_match_key key;
	int id;
	int live;
};

/* The model: arrays in posting / arrival order. */
static struct recv *recvs[OPS];
static int nrecvs;
static struct msg *msgs[OPS];
static int nmsgs;

static uint64_t rng_state;
static uint32_t rnd(void)
{
	/* xorshift64*: a fixed, portable sequence per seed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

static struct xpi_match_key random_msg_key(void)
{
	return (struct xpi_match_key){
		.comm = rnd() % 2,
		.src = (int32_t)(rnd() % 4),
		.tag = (uint64_t)(rnd() % 6) | ((uint64_t)(rnd() % 3) << 40),
	};
}

static struct xpi_match_key random_recv_key(void)
{
	struct xpi_match_key k = random_msg_key();
	k.mask = XP_TAG_EXACT;
	switch (rnd() % 6) {
	case 0:
		k.src = XP_ANY_SOURCE;
		break; /* any source */
	case 1:
		k.mask = 0xffull;
		break; /* masked: high bits free */
	case 2:
		k.mask = XP_TAG_ANY;
		break; /* any tag */
	case 3:
		k.src = XP_ANY_SOURCE;
		k.mask = 0x1;
		break; /* parity only */
	default:
		break; /* exact */
	}
	return k;
}

static void run_seed(uint64_t seed)
{
	struct xpi_match m;
	T_OK(xpi_match_init(&m));
	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	nrecvs = nmsgs = 0;
	int matched = 0;

	for (int op = 0; op < OPS; op++) {
		uint32_t what = rnd() % 100;
		if (what < 45) { /* a message arrives */
			struct msg *x = calloc(1, sizeof(*x));
			x->key = random_msg_key();
			x->id = op;
			struct recv *want = NULL;
			for (int i = 0; i < nrecvs; i++)
				if (recvs[i]->live &&
				    xpi_match_keys_match(&recvs[i]->key, &x->key)) {
					want = recvs[i];
					break;
				}
			struct xpi_posted *got = xpi_match_arrive(&m, &x->key);
			struct recv *gotr = got ? xpi_container_of(got, struct recv, p) : NULL;
			if (gotr != want)
				T_FAIL("seed %llu op %d: arrival matched receive %d, model says %d",
				       (unsigned long long)seed, op, gotr ? gotr->id : -1,
				       want ? want->id : -1);
			if (want != NULL) {
				want->live = 0;
				matched++;
				free(x);
			} else {
				x->u.key = x->key;
				x->live = 1;
				xpi_match_add_unexpected(&m, &x->u);
				msgs[nmsgs++] = x;
			}
		} else if (what < 92) { /* a receive is posted */
			struct recv *r = calloc(1, sizeof(*r));
			xpi_dlist_init(&r->p.link);
			r->key = random_recv_key();
			r->p.key = r->key;
			r->id = op;
			struct msg *want = NULL;
			for (int i = 0; i < nmsgs; i++)
				if (msgs[i]->live && xpi_match_keys_match(&r->key, &msgs[i]->key)) {
					want = msgs[i];
					break;
				}
			struct xpi_unexp *got = xpi_match_post(&m, &r->p);
			struct msg *gotm = got ? xpi_container_of(got, struct msg, u) : NULL;
			if (gotm != want)
				T_FAIL("seed %llu op %d: receive matched message %d, model says %d",
				       (unsigned long long)seed, op, gotm ? gotm->id : -1,
				       want ? want->id : -1);
			if (want != NULL) {
				want->live = 0;
				matched++;
				free(r);
			} else {
				r->live = 1;
				recvs[nrecvs++] = r;
			}
		} else if (nrecvs > 0) { /* a posted receive is cancelled */
			struct recv *r = recvs[rnd() % (uint32_t)nrecvs];
			bool removed = xpi_match_cancel(&m, &r->p);
			if (removed != (r->live != 0))
				T_FAIL("seed %llu op %d: cancel of %d returned %d, model says %d",
				       (unsigned long long)seed, op, r->id, removed, r->live);
			r->live = 0;
		}
	}
	/* Whatever is left must be exactly what the model has left. */
	uint32_t live_msgs = 0;
	for (int i = 0; i < nmsgs; i++)
		live_msgs += (uint32_t)msgs[i]->live;
	T_EQ(m.unexp_count, live_msgs);
	T_CHECK(matched > OPS / 10); /* the workload really matches things */
	for (int i = 0; i < nrecvs; i++)
		free(recvs[i]);
	for (int i = 0; i < nmsgs; i++)
		free(msgs[i]);
	xpi_match_fini(&m);
}

int main(void)
{
	const char *s = getenv("XP_TEST_SEED");
	if (s != NULL) {
		uint64_t seed = strtoull(s, NULL, 0);
		fprintf(stderr, "replaying seed %llu\n", (unsigned long long)seed);
		run_seed(seed);
		return 0;
	}
	uint64_t base = (uint64_t)time(NULL);
	for (int i = 0; i < SEEDS; i++) {
		uint64_t seed = base + (uint64_t)i;
		fprintf(stderr, "seed %llu (replay: XP_TEST_SEED=%llu)\n", (unsigned long long)seed,
			(unsigned long long)seed);
		run_seed(seed);
	}
	return 0;
}
