/* SPDX-License-Identifier: MIT */
/*
 * The bound on unexpected messages. What happens when it is hit (the
 * behaviour docs/ARCHITECTURE.md documents): a receiver never buffers more
 * than unexpected_max_bytes of eager payload (plus 64 bytes a message);
 * each of its N senders has a 1/N share of that as credit, and once a
 * sender's share is used, it switches to rendezvous, so the payload stays
 * in the sender's buffer and the send completes only when a receive takes
 * it. Nothing is dropped and order is kept.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "xport/xport.h"
#include "testutil.h"

#define BOUND 8192
#define COUNT 64
#define LEN 1000

static _Atomic int sends_posted;
static _Atomic int receiver_done;
static _Atomic int sender_checked;

static int body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	xp_comm_t *w = xp_comm_world(ctx);
	if (xp_rank(ctx) == 0) {
		static uint8_t bufs[COUNT][LEN];
		xp_request_t *r[COUNT];
		for (int i = 0; i < COUNT; i++) {
			memset(bufs[i], i, LEN);
			T_OK(xp_isend(w, bufs[i], LEN, 1, 7, &r[i]));
		}
		atomic_store(&sends_posted, 1);
		/* Without receives, only what fits under the bound can be done. */
		int done = 0;
		for (int spin = 0; spin < 200000; spin++)
			xp_progress(ctx);
		for (int i = 0; i < COUNT; i++) {
			int rc = xp_test(&r[i], NULL);
			T_CHECK(rc >= 0);
			done += rc;
		}
		T_CHECK(done < COUNT);
		T_CHECK(done * (LEN + 64) <= BOUND / 2); /* this sender's share */
		fprintf(stderr, "   %d of %d sends completed eagerly before any receive\n", done,
			COUNT);
		xp_stats_t s;
		T_OK(xp_stats_get(ctx, &s));
		T_CHECK(s.rndv_sends >= (uint64_t)(COUNT - done));
		atomic_store(&sender_checked, 1);
		while (!atomic_load(&receiver_done))
			xp_progress(ctx);
		for (int i = 0; i < COUNT; i++)
			T_OK(xp_wait(&r[i], XP_TIMEOUT_DEFAULT, NULL));
		return 0;
	}
	while (!atomic_load(&sends_posted))
		;
	/* Let everything that wants to arrive, arrive. */
	xp_stats_t s;
	for (int spin = 0; spin < 200000; spin++)
		xp_progress(ctx);
	T_OK(xp_stats_get(ctx, &s));
	T_EQ(s.unexpected_now, COUNT); /* every message is here, eager or announced */
	T_CHECK(s.unexpected_bytes_now <= BOUND);
	while (!atomic_load(&sender_checked))
		xp_progress(ctx);
	uint8_t buf[LEN];
	for (int i = 0; i < COUNT; i++) {
		xp_status_t st;
		T_OK(xp_recv(w, buf, sizeof(buf), 0, 7, XP_TAG_EXACT, &st));
		T_EQ(st.length, LEN);
		for (int k = 0; k < LEN; k++)
			if (buf[k] != (uint8_t)i)
				T_FAIL("message %d arrived out of order or damaged", i);
	}
	T_OK(xp_stats_get(ctx, &s));
	T_CHECK(s.unexpected_bytes_max <= BOUND);
	T_EQ(s.unexpected_now, 0);
	atomic_store(&receiver_done, 1);
	return 0;
}

int main(void)
{
	xp_config_t cfg;
	xp_config_init(&cfg);
	cfg.unexpected_max_bytes = BOUND;
	T_OK(xp_local_run(2, &cfg, body, NULL));
	return 0;
}
