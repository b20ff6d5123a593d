/* SPDX-License-Identifier: MIT */
/*
 * A rank for tests/test_quiet.sh: xp_init, xp_oob_barrier, xp_finalize and
 * nothing else. With --wait it prints "ready N" after the barrier and waits
 * in the library until a signal ends it, on a receive from itself that
 * nothing sends (one no peer's loss can fail). With --early (two ranks)
 * rank 1 finalizes while rank 0 only passes a barrier with it, then stays
 * in the library for a second: it sees rank 1 leave with nothing of its
 * own under way.
 */
#include <stdio.h>
#include <string.h>

#include "xport/xport.h"

/* Waits in the library for @ms on a receive from ourselves nothing sends. */
static void wait_self(xp_context_t *ctx, int ms)
{
	char c;
	xp_request_t *r;
	if (xp_irecv(xp_comm_world(ctx), &c, 1, xp_rank(ctx), 7, XP_TAG_EXACT, &r) < 0)
		return;
	if (xp_wait(&r, ms, NULL) < 0 && r != NULL) { /* still posted: take it back */
		(void)xp_cancel(r);
		(void)xp_wait(&r, XP_TIMEOUT_INFINITE, NULL);
	}
}

int main(int argc, char **argv)
{
	int wait = argc > 1 && strcmp(argv[1], "--wait") == 0;
	int early = argc > 1 && strcmp(argv[1], "--early") == 0;
	xp_context_t *ctx;
	int rc = xp_init(NULL, &ctx);
	if (rc < 0) {
		fprintf(stderr, "xp_init: %s: %s\n", xp_strerror(rc), xp_error_detail());
		return 1;
	}
	rc = xp_oob_barrier(ctx);
	if (rc < 0) {
		fprintf(stderr, "xp_oob_barrier: %s: %s\n", xp_strerror(rc), xp_error_detail());
		return 1;
	}
	if (early && xp_rank(ctx) == 1) {
		xp_finalize(ctx); /* its barrier meets rank 0's xp_oob_barrier */
		return 0;
	}
	if (early) {
		(void)xp_oob_barrier(ctx);
		wait_self(ctx, 1000);
	}
	if (wait) {
		printf("ready %d\n", xp_rank(ctx));
		fflush(stdout);
		wait_self(ctx, XP_TIMEOUT_INFINITE);
	}
	xp_finalize(ctx);
	return 0;
}
