/* SPDX-License-Identifier: MIT */
/*
 * Many requests at once: xp_waitall, xp_waitany, xp_testsome. Waiting on
 * one request drives the whole rank (every transport, every request), so
 * waitall waits on each in turn under one deadline; waitany polls them
 * all between rounds of progress and sleeps in short naps on the rank's
 * events once idle, as xp_wait does.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>

#include "clock.h"
#include "compiler.h"
#include "engine.h"
#include "log.h"

/* As xp_wait's spin and yield phases (p2p.c). */
#define YIELD_NS (1 * 1000000)
/* A nap's bound: another thread's completion of one of the requests need
 * not wake this one, so it looks again at least this often. */
#define NAP_NS (1 * 1000000)

static int64_t deadline_of(const xp_request_t *any, int timeout_ms)
{
	if (timeout_ms == XP_TIMEOUT_DEFAULT)
		timeout_ms = any->ctx->cfg.timeout_ms;
	if (timeout_ms == XP_TIMEOUT_INFINITE)
		return INT64_MAX;
	return xpi_now_ns() + (int64_t)timeout_ms * 1000000;
}

static int left_ms(int64_t deadline)
{
	if (deadline == INT64_MAX)
		return XP_TIMEOUT_INFINITE;
	int64_t left = deadline - xpi_now_ns();
	return left <= 0 ? 0 : (int)((left + 999999) / 1000000);
}

static xp_request_t *first_pending(size_t n, xp_request_t **reqs)
{
	for (size_t i = 0; i < n; i++)
		if (reqs[i] != NULL)
			return reqs[i];
	return NULL;
}

XPI_EXPORT int xp_waitall(size_t n, xp_request_t **reqs, int timeout_ms, xp_status_t *statuses)
{
	if (n > 0 && reqs == NULL)
		return xpi_fail(-EINVAL, "xp_waitall: %zu requests but the array is NULL", n);
	if (timeout_ms < XP_TIMEOUT_DEFAULT)
		return xpi_fail(-EINVAL, "xp_waitall: timeout %d ms is not valid", timeout_ms);
	xp_request_t *any = first_pending(n, reqs);
	if (any == NULL) {
		for (size_t i = 0; statuses != NULL && i < n; i++)
			statuses[i] = (xp_status_t){ .source = XP_ANY_SOURCE };
		return 0;
	}
	int64_t deadline = deadline_of(any, timeout_ms);
	int first_err = 0;
	char detail[512] = "";
	for (size_t i = 0; i < n; i++) {
		xp_status_t st;
		/* Once the deadline has passed, each wait of 0 cancels its
		 * request unless it is already done. */
		int rc = xp_wait(&reqs[i], left_ms(deadline), &st);
		if (statuses != NULL)
			statuses[i] = st;
		if (rc < 0 && first_err == 0) {
			first_err = rc;
			snprintf(detail, sizeof(detail), "%s", xp_error_detail());
		}
	}
	if (first_err != 0)
		xpi_set_thread_detail(detail);
	return first_err;
}

/* Completes every done request among @reqs; see xp_testsome. */
static int collect_done(size_t n, xp_request_t **reqs, size_t *indices, xp_status_t *statuses,
			size_t max)
{
	size_t got = 0;
	for (size_t i = 0; i < n && got < max; i++) {
		if (reqs[i] == NULL)
			continue;
		if (reqs[i]->op == XPI_OP_COLL && !xpi_request_done(reqs[i]))
			reqs[i]->coll_hooks->advance(reqs[i]);
		if (!xpi_request_done(reqs[i]))
			continue;
		xp_status_t st;
		(void)xp_wait(&reqs[i], 0, &st);
		if (indices != NULL)
			indices[got] = i;
		if (statuses != NULL)
			statuses[got] = st;
		got++;
	}
	return (int)got;
}

XPI_EXPORT int xp_testsome(size_t n, xp_request_t **reqs, size_t *indices, xp_status_t *statuses)
{
	if (n > 0 && reqs == NULL)
		return xpi_fail(-EINVAL, "xp_testsome: %zu requests but the array is NULL", n);
	xp_request_t *any = first_pending(n, reqs);
	if (any == NULL)
		return 0;
	xp_progress(any->ctx);
	return collect_done(n, reqs, indices, statuses, n);
}

XPI_EXPORT int xp_waitany(size_t n, xp_request_t **reqs, int timeout_ms, size_t *index,
			  xp_status_t *status)
{
	if (index == NULL || (n > 0 && reqs == NULL))
		return xpi_fail(-EINVAL, "xp_waitany: %s is NULL",
				index == NULL ? "the index pointer" : "the request array");
	if (timeout_ms < XP_TIMEOUT_DEFAULT)
		return xpi_fail(-EINVAL, "xp_waitany: timeout %d ms is not valid", timeout_ms);
	xp_request_t *any = first_pending(n, reqs);
	if (any == NULL)
		return xpi_fail(-EINVAL, "xp_waitany: every one of the %zu requests is NULL", n);
	xp_context_t *ctx = any->ctx;
	int64_t deadline = deadline_of(any, timeout_ms), idle_since = 0;
	for (unsigned round = 0;; round++) {
		for (size_t i = 0; i < n; i++) {
			if (reqs[i] != NULL && reqs[i]->op == XPI_OP_COLL &&
			    !xpi_request_done(reqs[i]))
				reqs[i]->coll_hooks->advance(reqs[i]);
			if (reqs[i] != NULL && xpi_request_done(reqs[i])) {
				*index = i;
				return xp_wait(&reqs[i], 0, status);
			}
		}
		int events = xp_progress(ctx);
		if (events > 0) {
			idle_since = 0;
			continue;
		}
		if (round < ctx->spin_rounds)
			continue;
		int64_t now = xpi_now_ns();
		if (now >= deadline) {
			*index = n;
			return xpi_fail(
				-ETIMEDOUT,
				"rank %d: xp_waitany: none of %zu requests completed in time",
				ctx->rank, n);
		}
		if (idle_since == 0)
			idle_since = now;
		if (now - idle_since < YIELD_NS || !xpi_owner_try_acquire(ctx)) {
			sched_yield();
			continue;
		}
		int64_t until = now + NAP_NS < deadline ? now + NAP_NS : deadline;
		xpi_engine_sleep(ctx, until, NULL); /* gives the token back */
	}
}
