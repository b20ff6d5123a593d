/* SPDX-License-Identifier: MIT */
/*
 * One rank of a two-rank job, started by a launcher (tests/test_netns.sh
 * runs one in each of two network namespaces): a ping-pong of every size
 * from 0 bytes to 4 MiB that matters to the TCP transport (frame header
 * bounds, the rendezvous threshold, the provided-buffer size, several
 * MiB), with a content check each way. Prints "ok rank N bytes B" and
 * exits 0 when every message came back intact; prints why and exits 1
 * otherwise, or 77 if this build has no network transport.
 * Uses only the public API.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "xport/xport.h"
#include "pattern.h"

#define MAXLEN (4u << 20)

static int fail(int rank, const char *what, int rc)
{
	fprintf(stderr, "rank %d: %s: %s: %s\n", rank, what, xp_strerror(rc), xp_error_detail());
	return 1;
}

int main(void)
{
	static const size_t fixed[] = {
		0,     1,     7,      55,      56,      57,         1000,
		4095,  4096,  16383,  16384,   16385,   32767,      32768,
		32769, 65536, 100003, 1 << 20, 2 << 20, MAXLEN - 1, MAXLEN
	};
	const unsigned nfixed = sizeof(fixed) / sizeof(fixed[0]);
	xp_context_t *ctx;
	int rc = xp_init(NULL, &ctx);
	if (rc == -EPROTONOSUPPORT) {
		printf("SKIP: this build has no network transport\n");
		return 77;
	}
	if (rc < 0)
		return fail(-1, "xp_init", rc);
	int rank = xp_rank(ctx);
	if (xp_size(ctx) != 2) {
		fprintf(stderr, "rank %d: needs a job of 2 ranks, not %d\n", rank, xp_size(ctx));
		return 1;
	}
	xp_route_t route;
	rc = xp_route_get(ctx, 1 - rank, 0, &route);
	if (rc < 0)
		return fail(rank, "xp_route_get", rc);
	/* NETNS_TRANSPORT: the transport that must serve the peer (tcp). */
	const char *want = getenv("NETNS_TRANSPORT") != NULL ? getenv("NETNS_TRANSPORT") : "tcp";
	if (strcmp(route.transport, want) != 0) {
		fprintf(stderr, "rank %d: the peer is served by %s, not %s\n", rank,
			route.transport, want);
		return 1;
	}
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(MAXLEN);
	if (buf == NULL)
		return fail(rank, "malloc", -ENOMEM);
	unsigned seed = 4242;
	uint64_t bytes = 0;
	for (unsigned i = 0; i < nfixed + 40; i++) {
		/* Then random sizes, a third of them up to 4 MiB. */
		size_t len = i < nfixed ? fixed[i] :
					  (size_t)rand_r(&seed) % (i % 3 == 0 ? MAXLEN + 1 : 70000);
		xp_status_t st;
		if (rank == 0) {
			fill(buf, len, i);
			rc = xp_send(w, buf, len, 1, i);
			if (rc < 0)
				return fail(rank, "xp_send", rc);
			rc = xp_recv(w, buf, MAXLEN, 1, i, XP_TAG_EXACT, &st);
			if (rc < 0)
				return fail(rank, "xp_recv", rc);
			if (st.length != len || check(buf, len, i + 7777) != 0) {
				fprintf(stderr, "rank 0: reply %u: %zu bytes, expected %zu\n", i,
					st.length, len);
				return 1;
			}
		} else {
			rc = xp_recv(w, buf, MAXLEN, 0, i, XP_TAG_EXACT, &st);
			if (rc < 0)
				return fail(rank, "xp_recv", rc);
			if (st.length != len || check(buf, len, i) != 0) {
				fprintf(stderr, "rank 1: message %u: %zu bytes, expected %zu\n", i,
					st.length, len);
				return 1;
			}
			fill(buf, len, i + 7777);
			rc = xp_send(w, buf, len, 0, i);
			if (rc < 0)
				return fail(rank, "xp_send", rc);
		}
		bytes += len;
	}
	free(buf);
	xp_finalize(ctx);
	/* The script compares this with the veth counters. */
	printf("ok rank %d bytes %llu\n", rank, (unsigned long long)bytes);
	return 0;
}
