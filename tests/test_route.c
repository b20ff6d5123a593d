/* SPDX-License-Identifier: MIT */
/*
 * xp_route_get and the messages agree: for every size, the protocol the
 * route names is the one the send counters show, on every transport and at
 * the default and a raised rendezvous threshold. Over shared memory with
 * XP_RNDV_THRESHOLD=4m the route once said eager for payloads the ring
 * cannot carry, which went by rendezvous.
 *
 * Usage: test_route inproc|shm|tcp [threshold] (one meson test each).
 */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "xport/xport.h"
#include "tl_job.h"
#include "pattern.h"
#include "testutil.h"

static const char *transport, *threshold;
static const size_t sizes[] = { 0, 1, 4095, 4096, 4097, 8192, 32767, 32768, 65536, 262144 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static int rank_body(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), peer = 1 - me;
	size_t max = sizes[NSIZES - 1];
	uint8_t *buf = malloc(max);
	T_CHECK(buf != NULL);
	for (size_t i = 0; i < NSIZES; i++) {
		size_t len = sizes[i];
		if (me == 1) {
			xp_status_t st;
			T_OK(xp_recv(w, buf, max, 0, i, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_OK(check(buf, len, (uint32_t)i));
			continue;
		}
		xp_route_t route;
		xp_stats_t before, after;
		T_OK(xp_route_get(ctx, peer, len, &route));
		T_CHECK(strcmp(route.transport, transport) == 0);
		T_OK(xp_stats_get(ctx, &before));
		fill(buf, len, (uint32_t)i);
		T_OK(xp_send(w, buf, len, peer, i));
		T_OK(xp_stats_get(ctx, &after));
		bool rndv = after.rndv_sends > before.rndv_sends;
		fprintf(stderr, "   %s threshold %s: %zu B: route %s (from %zu B), sent %s\n",
			transport, threshold != NULL ? threshold : "default", len, route.protocol,
			route.rndv_threshold, rndv ? "rndv" : "eager");
		if (strcmp(route.protocol, rndv ? "rndv" : "eager") != 0)
			T_FAIL("%zu B: the route says %s, the send went %s", len, route.protocol,
			       rndv ? "rndv" : "eager");
		T_EQ(len >= route.rndv_threshold, rndv);
	}
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc < 2 || argc > 3) {
		fprintf(stderr, "usage: %s inproc|shm|tcp [threshold]\n", argv[0]);
		return 2;
	}
	transport = argv[1];
	threshold = argc == 3 ? argv[2] : NULL;
	if (threshold != NULL)
		setenv("XP_RNDV_THRESHOLD", threshold, 1);
	return tl_job_run(transport, 2, rank_body, 60);
}
