/* SPDX-License-Identifier: MIT */
/*
 * A waiter's sleep covers every transport and lets the rank's other threads
 * run (src/core/sleep.c).
 *
 *   mixed      three ranks: 0 and 1 over shared memory, 2 over TCP. Rank 1
 *              waits 325 ms for rank 0's message. It used to sleep in TCP's
 *              ring only, in 1 ms slices the shm message never ended (some
 *              300 wake-ups, each message noticed up to a slice late); now
 *              the shm doorbell ends its sleep: a few sleeps, one ended by
 *              the message. Then the same for a message over TCP.
 *   oob-shm, oob-tcp
 *              one thread waits 3 s for a message that never comes while
 *              another thread of the rank calls xp_oob_barrier: the barrier
 *              must not wait for the wait (it did: 3 s, the whole wait).
 *   inproc     two ranks as threads: a receive waits 325 ms for its message,
 *              and a rendezvous send 325 ms for its receive (the receiver's
 *              thread completes it). Both sleep and are woken by the event
 *              (they used to yield the CPU in a loop: in-process rings could
 *              not wake a sleeper).
 *   timer      a timer armed on the engine fires while xp_wait sleeps, at
 *              or after its deadline and before the message that ends the
 *              wait.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/engine.h"
#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"

static const char *section;

/* How late the late messages and receives come: not a multiple of a
 * sleep's 50 ms bound (SLEEP_MAX_NS, src/core/p2p.c), or the event could
 * fall just as a sleep ends by its bound anyway, be seen by the next round
 * instead of waking a sleep, and fail the test by a coin flip (it did,
 * under TSan, at 300 ms). 325 ms lies mid-way between two bounds. */
#define LATE_MS 325

static void sleep_ms(int ms)
{
	nanosleep(&(struct timespec){ .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L },
		  NULL);
}

static void expect_route(xp_context_t *ctx, int peer, const char *tl)
{
	xp_route_t route;
	T_OK(xp_route_get(ctx, peer, 8, &route));
	if (strcmp(route.transport, tl) != 0)
		T_FAIL("rank %d -> %d: %s, not %s", xp_rank(ctx), peer, route.transport, tl);
}

/* Rank 1 waits for a message from @from that comes LATE_MS late; returns
 * how many sleeps it took, after checking that the message ended one. */
static void late_message(xp_context_t *ctx, int from, const char *tl)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), v = 0;
	T_OK(xp_oob_barrier(ctx));
	if (me == from) {
		sleep_ms(LATE_MS);
		v = 7;
		T_OK(xp_send(w, &v, sizeof(v), 1, 1));
	} else if (me == 1) {
		uint64_t sleeps = atomic_load(&ctx->st_sleeps);
		uint64_t events = atomic_load(&ctx->st_sleep_events);
		T_OK(xp_recv(w, &v, sizeof(v), from, 1, XP_TAG_EXACT, NULL));
		T_EQ(v, 7);
		sleeps = atomic_load(&ctx->st_sleeps) - sleeps;
		events = atomic_load(&ctx->st_sleep_events) - events;
		fprintf(stderr, "   %s message %d ms late: %llu sleeps, %llu ended by an event\n",
			tl, LATE_MS, (unsigned long long)sleeps, (unsigned long long)events);
		T_CHECK(sleeps >= 1);  /* it slept (not spun) */
		T_CHECK(sleeps <= 30); /* not in 1 ms slices */
		T_CHECK(events >= 1);  /* the message woke it */
	}
	T_OK(xp_oob_barrier(ctx));
}

static int mixed(xp_context_t *ctx)
{
	int me = xp_rank(ctx);
	if (me != 2)
		expect_route(ctx, 1 - me, "shm");
	expect_route(ctx, me == 2 ? 0 : 2, "tcp");
	late_message(ctx, 0, "shm");
	late_message(ctx, 2, "tcp");
	return 0;
}

/* Sleeps and wake-ups of @ctx across @call, which must end by an event. */
#define EXPECT_WOKEN(ctx, what, call)                                                              \
	do {                                                                                       \
		uint64_t _s = atomic_load(&(ctx)->st_sleeps);                                      \
		uint64_t _e = atomic_load(&(ctx)->st_sleep_events);                                \
		T_OK(call);                                                                        \
		_s = atomic_load(&(ctx)->st_sleeps) - _s;                                          \
		_e = atomic_load(&(ctx)->st_sleep_events) - _e;                                    \
		fprintf(stderr, "   %s: %llu sleeps, %llu ended by an event\n", what,              \
			(unsigned long long)_s, (unsigned long long)_e);                           \
		T_CHECK(_s >= 1 && _s <= 30 && _e >= 1);                                           \
	} while (0)

static int inproc_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	xp_comm_t *w = xp_comm_world(ctx);
	enum { BIG = 1 << 20 };
	uint8_t *buf = calloc(1, BIG);
	int v = 7;
	T_OK(xp_oob_barrier(ctx));
	if (xp_rank(ctx) == 0) {
		sleep_ms(LATE_MS);
		T_OK(xp_send(w, &v, sizeof(v), 1, 1));
		EXPECT_WOKEN(ctx, "inproc rendezvous send, receive 325 ms late",
			     xp_send(w, buf, BIG, 1, 2));
	} else {
		EXPECT_WOKEN(ctx, "inproc receive, message 325 ms late",
			     xp_recv(w, &v, sizeof(v), 0, 1, XP_TAG_EXACT, NULL));
		sleep_ms(LATE_MS);
		T_OK(xp_recv(w, buf, BIG, 0, 2, XP_TAG_EXACT, NULL));
	}
	free(buf);
	return 0;
}

struct waiter {
	xp_context_t *ctx;
	_Atomic int started;
	int rc;
};

static void *wait_long(void *arg)
{
	struct waiter *w = arg;
	int v;
	xp_request_t *r;
	T_OK(xp_irecv(xp_comm_world(w->ctx), &v, sizeof(v), 1 - xp_rank(w->ctx), 99, XP_TAG_EXACT,
		      &r));
	atomic_store(&w->started, 1);
	w->rc = xp_wait(&r, 3000, NULL);
	return NULL;
}

static int oob_while_waiting(xp_context_t *ctx)
{
	T_OK(xp_oob_barrier(ctx));
	struct waiter w = { .ctx = ctx };
	pthread_t t;
	if (xp_rank(ctx) == 0) {
		T_EQ(pthread_create(&t, NULL, wait_long, &w), 0);
		while (!atomic_load(&w.started))
			sleep_ms(1);
		sleep_ms(100); /* well into its wait, spinning or asleep */
	}
	int64_t t0 = xpi_now_ns();
	T_OK(xp_oob_barrier(ctx));
	double took = (double)(xpi_now_ns() - t0) / 1e9;
	if (xp_rank(ctx) == 0) {
		fprintf(stderr, "   %s: xp_oob_barrier beside a 3 s xp_wait took %.3f s\n", section,
			took);
		T_CHECK(took < 1.5); /* not held until the wait's end */
		pthread_join(t, NULL);
		T_EQ(w.rc, -ETIMEDOUT);
	}
	T_OK(xp_oob_barrier(ctx));
	return 0;
}

static int64_t fired_at;
static void timer_fire(struct xp_context *ctx, struct xpi_timer *t)
{
	(void)ctx;
	(void)t;
	fired_at = xpi_now_ns();
}

static int timer_during_wait(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int v = 0;
	T_OK(xp_oob_barrier(ctx));
	if (xp_rank(ctx) == 0) {
		sleep_ms(300);
		T_OK(xp_send(w, &v, sizeof(v), 1, 1));
	} else {
		struct xpi_timer t = { .fire = timer_fire };
		int64_t armed = xpi_now_ns(), deadline = armed + 100 * 1000000;
		T_CHECK(xpi_owner_try_acquire(ctx));
		T_OK(xpi_timer_arm(ctx, &t, deadline));
		xpi_owner_release(ctx);
		T_OK(xp_recv(w, &v, sizeof(v), 0, 1, XP_TAG_EXACT, NULL));
		int64_t got = xpi_now_ns();
		fprintf(stderr, "   timer due at +100 ms fired at +%.1f ms; message at +%.1f ms\n",
			(double)(fired_at - armed) / 1e6, (double)(got - armed) / 1e6);
		T_CHECK(fired_at >= deadline);
		T_CHECK(fired_at < got);
		T_EQ(t.heap_pos, 0); /* fired timers are disarmed */
	}
	T_OK(xp_oob_barrier(ctx));
	return 0;
}

static int body(int rank, void *arg)
{
	(void)rank;
	(void)arg;
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	int rc;
	if (strcmp(section, "mixed") == 0)
		rc = mixed(ctx);
	else if (strcmp(section, "timer") == 0)
		rc = timer_during_wait(ctx);
	else
		rc = oob_while_waiting(ctx);
	xp_finalize(ctx);
	return rc;
}

static void env(int rank, void *arg)
{
	(void)arg;
	const char *tl = "tcp";
	if (strcmp(section, "mixed") == 0)
		tl = rank == 2 ? "tcp" : "shm,tcp";
	else if (strcmp(section, "oob-shm") == 0)
		tl = "shm";
	setenv("XP_TRANSPORTS", tl, 1);
	setenv("XP_TIMEOUT_MS", "10000", 1);
	setenv("XP_LOG_LEVEL", "error", 1);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s mixed|oob-shm|oob-tcp|timer|inproc\n", argv[0]);
		return 2;
	}
	section = argv[1];
	if (strcmp(section, "inproc") == 0)
		return xp_local_run(2, NULL, inproc_body, NULL) == 0 ? 0 : 1;
	int n = strcmp(section, "mixed") == 0 ? 3 : 2;
	return mproc_run(n, body, NULL, 60, env, NULL) == 0 ? 0 : 1;
}
