/* SPDX-License-Identifier: MIT */
/*
 * Three rounds around the ring of a communicator, each rank sending to its
 * right neighbour and receiving from its left: an eager message, one of
 * @big bytes (rendezvous on every transport), an eager one again, each
 * checked byte for byte. For the tests of pairs made on first need: it
 * makes exactly the pairs with the two neighbours.
 */
#ifndef XP_RING_EXCHANGE_H
#define XP_RING_EXCHANGE_H

#include <stdlib.h>

#include "xport/xport.h"
#include "pattern.h"
#include "testutil.h"

static inline void t_ring_exchange(xp_comm_t *w, size_t big)
{
	int n = xp_comm_size(w), me = xp_comm_rank(w);
	int right = (me + 1) % n, left = (me + n - 1) % n;
	uint8_t *out = malloc(big), *in = malloc(big);
	T_CHECK(out != NULL && in != NULL);
	for (int round = 0; round < 3; round++) {
		size_t len = round == 1 ? big : 64;
		fill(out, len, (uint32_t)(me * 16 + round));
		xp_request_t *r;
		T_OK(xp_irecv(w, in, len, left, 1, XP_TAG_EXACT, &r));
		T_OK(xp_send(w, out, len, right, 1));
		T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
		T_OK(check(in, len, (uint32_t)(left * 16 + round)));
	}
	free(out);
	free(in);
}

#endif
