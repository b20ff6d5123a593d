/* SPDX-License-Identifier: MIT */
/*
 * A message the engine cannot keep for lack of memory: it was dropped with
 * a log line, and that sender's stream then stopped for ever (every later
 * message waited behind the gap). Now the sender is lost: operations with
 * it fail at once with -ENOMEM and a text naming it.
 *
 * Built with -Wl,--wrap=malloc: the engine's copy of a long early message
 * (the only allocation of FAIL_SIZE bytes) fails when asked.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "inproc/job.h"
#include "xport/xport.h"
#include "testutil.h"

#define PAYLOAD 1000
#define FAIL_SIZE (sizeof(struct xpi_msg) - XPI_INLINE_MAX + PAYLOAD)

void *__real_malloc(size_t size);
static bool fail_copy;

void *__wrap_malloc(size_t size)
{
	if (fail_copy && size == FAIL_SIZE)
		return NULL;
	return __real_malloc(size);
}

static void deliver(xp_context_t *ctx, uint32_t peer_seq, const void *data, size_t len)
{
	struct xpi_msg m = {
		.u.key = { .comm = 0, .src = 0, .tag = 8 },
		.kind = XPI_MSG_INLINE,
		.peer_seq = peer_seq,
		.len = len,
		.data = data,
	};
	T_CHECK(xpi_owner_try_acquire(ctx));
	xpi_engine_deliver(ctx, &m);
	xpi_owner_release(ctx);
}

int main(void)
{
	xp_local_job_t *job;
	xp_context_t *ctx;
	setenv("XP_LOG_LEVEL", "none", 1);
	T_OK(xp_local_job_create(2, NULL, &job));
	T_OK(xp_local_job_context(job, 1, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	static uint8_t payload[PAYLOAD];
	memset(payload, 7, sizeof(payload));

	xp_request_t *r;
	uint8_t in[PAYLOAD];
	T_OK(xp_irecv(w, in, sizeof(in), 0, 8, XP_TAG_EXACT, &r));
	fail_copy = true;
	deliver(ctx, 1, payload, sizeof(payload)); /* early, and cannot be held */
	fail_copy = false;
	/* The receive waiting for rank 0 ends now, naming it; it does not
	 * wait for a gap that will never fill. */
	int rc = xp_wait(&r, 5000, NULL);
	fprintf(stderr, "   %d: %s\n", rc, xp_error_detail());
	T_EQ(rc, -ENOMEM);
	T_CHECK(strstr(xp_error_detail(), "rank 0") != NULL);
	T_CHECK(strstr(xp_error_detail(), "no memory") != NULL);
	/* What rank 0 sends after the lost message is not matched out of
	 * order: the gap fills, and still a receive from it fails at once. */
	deliver(ctx, 0, payload, 4);
	T_OK(xp_irecv(w, in, sizeof(in), 0, 8, XP_TAG_EXACT, &r));
	T_EQ(xp_wait(&r, 5000, NULL), -ENOMEM);
	xp_local_job_destroy(job);
	return 0;
}
