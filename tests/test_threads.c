/* SPDX-License-Identifier: MIT */
/*
 * Many threads on one rank, randomized. Two sender ranks with two threads
 * each send random tags and sizes (eager and rendezvous); three threads of
 * a third rank post random exact, any-source, masked and any-tag receives
 * at the same time, with short deadlines. Seven threads on two cores fight
 * for the ranks' engines, so work is handed over through the lock-free
 * queues all the time.
 *
 * Checked afterwards: every message arrived exactly once and intact, and
 * MPI's non-overtaking rule held: for two messages m1 before m2 of one
 * sending thread, the receive that took m2 was not posted (in the engine's
 * order) before the receive that took m1 if it could have taken m1 too.
 * The seed is printed; XP_TEST_SEED=<seed> replays the same choices.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

#include "core/engine.h"
#include "xport/xport.h"
#include "testutil.h"

#define SENDER_RANKS 2
#define THREADS_PER_SENDER 2
#define RECEIVER_THREADS 3
#define PER_STREAM 600
#define STREAMS (SENDER_RANKS * THREADS_PER_SENDER)
#define TOTAL (STREAMS * PER_STREAM)
#define BIG 40000
#define WINDOW 8

struct header {
	uint32_t rank, thread, seq, pad;
	uint64_t tag;
};

struct record {
	int taken;
	uint64_t recv_seq; /* the engine's order of the receive that took it */
	struct xpi_match_key key;
};

static struct record records[STREAMS][PER_STREAM];
static uint64_t sent_tag[STREAMS][PER_STREAM];
static _Atomic int received;
static xp_local_job_t *job;
static uint64_t seed;

static uint32_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return (uint32_t)((*s * 0x2545f4914f6cdd1dull) >> 32);
}

static uint8_t pattern(uint32_t stream, uint32_t seq, size_t i)
{
	return (uint8_t)(stream * 31 + seq * 7 + i);
}

struct sender_arg {
	int rank, thread;
};

static void *sender(void *p)
{
	struct sender_arg *a = p;
	xp_context_t *ctx;
	T_OK(xp_local_job_context(job, a->rank, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	uint32_t stream = (uint32_t)(a->rank * THREADS_PER_SENDER + a->thread);
	uint64_t s = seed * 977 + stream + 1;
	xp_request_t *win[WINDOW] = { 0 };
	uint8_t *bufs[WINDOW] = { 0 };
	for (uint32_t i = 0; i < PER_STREAM; i++) {
		int slot = (int)(i % WINDOW);
		if (win[slot] != NULL)
			T_OK(xp_wait(&win[slot], XP_TIMEOUT_DEFAULT, NULL));
		free(bufs[slot]);
		uint64_t tag = (rnd(&s) % 4) | ((uint64_t)(rnd(&s) % 2) << 8);
		size_t len = rnd(&s) % 16 == 0 ? BIG : sizeof(struct header) + rnd(&s) % 100;
		uint8_t *b = malloc(len);
		struct header h = { .rank = (uint32_t)a->rank,
				    .thread = (uint32_t)a->thread,
				    .seq = i,
				    .tag = tag };
		memcpy(b, &h, sizeof(h));
		for (size_t k = sizeof(h); k < len; k++)
			b[k] = pattern(stream, i, k);
		sent_tag[stream][i] = tag;
		bufs[slot] = b;
		T_OK(xp_isend(w, b, len, SENDER_RANKS, tag, &win[slot]));
	}
	for (int k = 0; k < WINDOW; k++) {
		if (win[k] != NULL)
			T_OK(xp_wait(&win[k], XP_TIMEOUT_DEFAULT, NULL));
		free(bufs[k]);
	}
	return NULL;
}

static void *receiver(void *p)
{
	int id = (int)(intptr_t)p;
	xp_context_t *ctx;
	T_OK(xp_local_job_context(job, SENDER_RANKS, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	uint64_t s = seed * 131 + (uint64_t)id + 99;
	uint8_t *buf = malloc(BIG);
	while (atomic_load(&received) < TOTAL) {
		int src = rnd(&s) % 3 == 0 ? XP_ANY_SOURCE : (int)(rnd(&s) % SENDER_RANKS);
		uint64_t tag = (rnd(&s) % 4) | ((uint64_t)(rnd(&s) % 2) << 8);
		uint64_t mask;
		switch (rnd(&s) % 4) {
		case 0:
			mask = XP_TAG_EXACT;
			break;
		case 1:
			mask = 0xff;
			break; /* ignores bit 8 */
		case 2:
			mask = 0x1;
			break; /* parity of the tag */
		default:
			mask = XP_TAG_ANY;
			break;
		}
		xp_request_t *r;
		T_OK(xp_irecv(w, buf, BIG, src, tag, mask, &r));
		/* Wait by hand, to read the engine's number of the receive before
		 * the request is freed. */
		struct timespec t0;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		while (!xpi_request_done(r)) {
			xp_progress(ctx);
			struct timespec t1;
			clock_gettime(CLOCK_MONOTONIC, &t1);
			if ((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000 >
			    20)
				break;
		}
		if (!xpi_request_done(r))
			xp_cancel(r);
		while (!xpi_request_done(r))
			xp_progress(ctx);
		uint64_t recv_seq = r->posted.seq;
		xp_status_t st;
		int rc = xp_wait(&r, XP_TIMEOUT_DEFAULT, &st);
		if (rc == -ECANCELED)
			continue;
		T_OK(rc);
		struct header h;
		T_CHECK(st.length >= sizeof(h));
		memcpy(&h, buf, sizeof(h));
		T_CHECK(h.rank < SENDER_RANKS && h.thread < THREADS_PER_SENDER &&
			h.seq < PER_STREAM);
		T_EQ(st.source, (int)h.rank);
		T_EQ(st.tag, h.tag);
		uint32_t stream = h.rank * THREADS_PER_SENDER + h.thread;
		for (size_t k = sizeof(h); k < st.length; k++)
			if (buf[k] != pattern(stream, h.seq, k))
				T_FAIL("stream %u message %u damaged at byte %zu", stream, h.seq,
				       k);
		struct record *rec = &records[stream][h.seq];
		if (rec->taken)
			T_FAIL("stream %u message %u received twice", stream, h.seq);
		rec->taken = 1;
		rec->recv_seq = recv_seq;
		rec->key =
			(struct xpi_match_key){ .comm = 0, .src = src, .tag = tag, .mask = mask };
		atomic_fetch_add(&received, 1);
	}
	free(buf);
	return NULL;
}

static void check_non_overtaking(void)
{
	long pairs = 0;
	for (int s = 0; s < STREAMS; s++) {
		int rank = s / THREADS_PER_SENDER;
		for (int j = 0; j < PER_STREAM; j++) {
			const struct record *later = &records[s][j];
			T_CHECK(later->taken);
			for (int i = 0; i < j; i++) {
				const struct record *earlier = &records[s][i];
				struct xpi_match_key m1 = { .comm = 0,
							    .src = rank,
							    .tag = sent_tag[s][i] };
				if (later->recv_seq < earlier->recv_seq &&
				    xpi_match_keys_match(&later->key, &m1))
					T_FAIL("seed %llu stream %d: message %d overtook message %d "
					       "(receive %llu could take both but got the later)",
					       (unsigned long long)seed, s, j, i,
					       (unsigned long long)later->recv_seq);
				pairs++;
			}
		}
	}
	fprintf(stderr, "   %d messages, %ld ordered pairs checked\n", TOTAL, pairs);
}

int main(void)
{
	const char *env = getenv("XP_TEST_SEED");
	seed = env != NULL ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
	fprintf(stderr, "seed %llu (replay: XP_TEST_SEED=%llu)\n", (unsigned long long)seed,
		(unsigned long long)seed);
	setenv("XP_LOG_LEVEL", "none", 1);
	T_OK(xp_local_job_create(SENDER_RANKS + 1, NULL, &job));
	pthread_t st[STREAMS], rt[RECEIVER_THREADS];
	struct sender_arg args[STREAMS];
	for (int i = 0; i < STREAMS; i++) {
		args[i] = (struct sender_arg){ .rank = i / THREADS_PER_SENDER,
					       .thread = i % THREADS_PER_SENDER };
		T_EQ(pthread_create(&st[i], NULL, sender, &args[i]), 0);
	}
	for (int i = 0; i < RECEIVER_THREADS; i++)
		T_EQ(pthread_create(&rt[i], NULL, receiver, (void *)(intptr_t)i), 0);
	for (int i = 0; i < STREAMS; i++)
		pthread_join(st[i], NULL);
	for (int i = 0; i < RECEIVER_THREADS; i++)
		pthread_join(rt[i], NULL);
	T_EQ(atomic_load(&received), TOTAL);
	check_non_overtaking();
	xp_local_job_destroy(job);
	return 0;
}
