/* SPDX-License-Identifier: MIT */
/*
 * A waiter's sleep: one ppoll over every transport's descriptors (io_uring's
 * ring, shared memory's doorbell and its peers' pidfds, later a verbs
 * completion channel) and the rank's wake eventfd, bounded by the earliest
 * timer and the caller's deadline. The owner token is given back for the
 * sleep, so the rank's other threads go on (out-of-band calls, their own
 * posts) while this one sleeps.
 */
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "clock.h"
#include "engine.h"

/* Descriptors in one sleep: the wake fd plus what the transports give
 * (shared memory gives one pidfd per peer while there is room, and only
 * looks at the others when it wakes). */
#define SLEEP_MAX_FDS 64

void xpi_engine_wake(xp_context_t *ctx)
{
	if (ctx->wake_fd < 0 || atomic_exchange(&ctx->wake_sent, 1) != 0)
		return; /* woken already: one write per sleep */
	uint64_t one = 1;
	ssize_t n = write(ctx->wake_fd, &one, sizeof(one));
	(void)n; /* an eventfd takes it unless its count is full, and then it is readable */
}

static void sleep_done(xp_context_t *ctx, const bool *armed)
{
	for (int i = 0; i < ctx->ntls; i++)
		if (armed[i])
			ctx->tls[i].ops->sleep_done(ctx->tls[i].tl);
}

bool xpi_engine_sleep(xp_context_t *ctx, int64_t until_ns, const xp_request_t *r)
{
	struct pollfd fds[SLEEP_MAX_FDS];
	bool armed[XPI_MAX_TL] = { false };
	bool wakeable = ctx->wake_fd >= 0;
	int n = 0;
	/* Counted as a sleeper before anything is looked at: a thread that
	 * finishes work for us from now on writes the wake fd (a spurious
	 * wake-up at worst), and one that finished before is seen below. */
	atomic_store_explicit(&ctx->wake_sent, 0, memory_order_relaxed);
	atomic_fetch_add_explicit(&ctx->sleepers, 1, memory_order_seq_cst);
	if (wakeable)
		fds[n++] = (struct pollfd){ .fd = ctx->wake_fd, .events = POLLIN };
	bool busy = false;
	for (int i = 0; i < ctx->ntls && wakeable; i++) {
		int k = ctx->tls[i].ops->sleep_prepare(ctx->tls[i].tl, fds + n, SLEEP_MAX_FDS - n);
		if (k == -EAGAIN) { /* it has events now: no sleep */
			busy = true;
			break;
		}
		if (k < 0) {
			wakeable = false; /* it cannot wake us: only yield */
			break;
		}
		armed[i] = true;
		n += k;
	}
	int64_t until = xpi_timer_next(ctx);
	if (until_ns < until)
		until = until_ns;
	/* Work handed over while we prepared: run it (xpi_owner_release
	 * does) and do not sleep on it. */
	busy |= xpi_owner_release_quiet(ctx) > 0;
	/* Pairs with the seq_cst release of whoever completes @r (or the
	 * transport's own barrier in sleep_prepare, in-process): finished
	 * before we counted ourselves, it is seen here. */
	atomic_thread_fence(memory_order_seq_cst);
	busy |= r != NULL && xpi_request_done(r);
	int64_t now = xpi_now_ns();
	if (!busy && !wakeable) {
		sched_yield();
	} else if (!busy && until > now) {
		int64_t ns = until - now;
		struct timespec ts = { .tv_sec = ns / 1000000000, .tv_nsec = ns % 1000000000 };
		atomic_fetch_add_explicit(&ctx->st_sleeps, 1, memory_order_relaxed);
		if (ppoll(fds, (nfds_t)n, &ts, NULL) > 0)
			atomic_fetch_add_explicit(&ctx->st_sleep_events, 1, memory_order_relaxed);
	}
	atomic_fetch_sub_explicit(&ctx->sleepers, 1, memory_order_seq_cst);
	if (n > 0 && (fds[0].revents & POLLIN) != 0) {
		uint64_t count;
		ssize_t rd = read(ctx->wake_fd, &count, sizeof(count));
		(void)rd;
	}
	sleep_done(ctx, armed);
	return !busy;
}

int xpi_engine_sleep_init(xp_context_t *ctx)
{
	ctx->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	return ctx->wake_fd >= 0 ? 0 : -errno;
}

void xpi_engine_sleep_fini(xp_context_t *ctx)
{
	if (ctx->wake_fd >= 0)
		close(ctx->wake_fd);
	ctx->wake_fd = -1;
}
