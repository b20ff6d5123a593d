/* SPDX-License-Identifier: MIT */
/*
 * The card parser's generated replay cases (replay.c runs the corpus): a
 * few valid cards, each truncation of them and each single-bit flip of
 * their used bytes.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "select/card.h"
#include "replay.h"

/* Card @i of a few shapes: empty, one TCP entry, all four with lists. */
static void make_card(int i, struct xpi_card *c)
{
	memset(c, 0, sizeof(*c));
	c->rank = (uint32_t)i * 1000;
	memset(c->host, 0x10 + i, sizeof(c->host));
	unsigned ntl = i == 0 ? 0 : i == 1 ? 1 : 4;
	static const uint8_t types[4] = { XPI_TL_TCP, XPI_TL_SHM, XPI_TL_RDMA, XPI_TL_DPDK };
	for (unsigned k = 0; k < ntl; k++) {
		struct xpi_card_tl *t = &c->tl[c->ntl++];
		t->type = types[k];
		t->caps = k;
		t->max_msg = (uint64_t)k << 40;
		t->mtu = 1500 * k;
		t->lat_ns = 1000 + k;
		t->bw_mbps = 3000 * (k + 1);
		t->reach_len = t->type == XPI_TL_TCP ? 7 : (uint16_t)(8 * k);
		t->reach[0] = AF_INET;
		for (unsigned b = 1; b < t->reach_len; b++)
			t->reach[b] = (uint8_t)(b * 7 + k);
	}
	if (i == 2) {
		c->nallowed = 3;
		c->allowed[0] = XPI_TL_TCP;
		c->allowed[1] = XPI_TL_SHM;
		c->allowed[2] = 9; /* a type of a newer version */
	}
}

long replay_generated(void)
{
	long cases = 0;
	for (int i = 0; i < 3; i++) {
		struct xpi_card c;
		make_card(i, &c);
		uint8_t buf[XPI_CARD_WIRE_MAX];
		if (xpi_card_pack(&c, buf) != 0) {
			fprintf(stderr, "card %d: pack failed\n", i);
			abort();
		}
		/* the used bytes: the header, then each entry by its length */
		size_t used = buf[6] | buf[7] << 8;
		for (unsigned k = 0; k < buf[10]; k++)
			used += buf[used + 2] | buf[used + 3] << 8;
		for (size_t len = 0; len <= used; len++, cases++)
			LLVMFuzzerTestOneInput(buf, len);
		LLVMFuzzerTestOneInput(buf, sizeof(buf));
		for (size_t bit = 0; bit < used * 8; bit++, cases++) {
			uint8_t m[XPI_CARD_WIRE_MAX];
			memcpy(m, buf, sizeof(m));
			m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			LLVMFuzzerTestOneInput(m, sizeof(m));
		}
	}
	return cases;
}
