/* SPDX-License-Identifier: MIT */
/*
 * Progress while NCCL is not calling (plugin.h says why it is needed).
 *
 * A thread wakes every millisecond and, if no plugin call has made
 * progress since its last look, calls xp_progress once. While NCCL drives
 * the plugin (its proxy thread tests requests in a loop) the thread only
 * reads a counter, so it never competes with NCCL's thread for the
 * context; it acts only in the gaps, where a queued frame or a
 * connection's handshake would otherwise wait for NCCL's next call.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>

#include "plugin.h"

#define IDLE_PERIOD_NS 1000000L

static pthread_t idle_thread;
static bool idle_running;
static pthread_mutex_t idle_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t idle_cond;
static bool idle_stop; /* under idle_lock */
static atomic_ulong idle_activity;

void xpn_idle_note(void)
{
	atomic_fetch_add_explicit(&idle_activity, 1, memory_order_relaxed);
}

static void *idle_main(void *arg)
{
	xp_context_t *ctx = arg;
	unsigned long seen = atomic_load_explicit(&idle_activity, memory_order_relaxed);
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	pthread_mutex_lock(&idle_lock);
	while (!idle_stop) {
		next.tv_nsec += IDLE_PERIOD_NS;
		if (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		int rc = pthread_cond_timedwait(&idle_cond, &idle_lock, &next);
		if (idle_stop)
			break;
		if (rc != ETIMEDOUT)
			continue;
		unsigned long now = atomic_load_explicit(&idle_activity, memory_order_relaxed);
		if (now == seen) {
			pthread_mutex_unlock(&idle_lock);
			xp_progress(ctx);
			pthread_mutex_lock(&idle_lock);
		}
		seen = now;
		/* After a long stall (a stopped process), start again from
		 * now instead of catching up in a burst. */
		struct timespec t;
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec > next.tv_sec + 1)
			next = t;
	}
	pthread_mutex_unlock(&idle_lock);
	return NULL;
}

int xpn_idle_start(xp_context_t *ctx)
{
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&idle_cond, &ca);
	pthread_condattr_destroy(&ca);
	idle_stop = false;
	/* The program's signals go to its own threads, never to this one. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	int rc = pthread_create(&idle_thread, NULL, idle_main, ctx);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		pthread_cond_destroy(&idle_cond);
		return -rc;
	}
	pthread_setname_np(idle_thread, "xport-nccl-idle");
	idle_running = true;
	return 0;
}

void xpn_idle_stop(void)
{
	if (!idle_running)
		return;
	pthread_mutex_lock(&idle_lock);
	idle_stop = true;
	pthread_cond_signal(&idle_cond);
	pthread_mutex_unlock(&idle_lock);
	pthread_join(idle_thread, NULL);
	pthread_cond_destroy(&idle_cond);
	idle_running = false;
}
