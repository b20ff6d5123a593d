/* SPDX-License-Identifier: MIT */
/*
 * The frame parser's generated replay cases (replay.c runs the corpus):
 * every valid frame type, each single-bit flip and each truncation of them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/wire.h"
#include "replay.h"

long replay_generated(void)
{
	long cases = 0;
	for (uint8_t type = 0; type <= 8; type++) {
		struct xpi_frame f = {
			.type = type, .comm = 3, .tag = 0x1234, .peer_seq = 9, .id = 77, .credit = 5
		};
		if (type == XPI_FRAME_EAGER)
			f.payload_len = 100, f.msg_len = 100;
		uint8_t buf[XPI_FRAME_HDR_LEN];
		xpi_frame_pack(&f, buf);
		for (size_t len = 0; len <= XPI_FRAME_HDR_LEN; len++, cases++)
			LLVMFuzzerTestOneInput(buf, len);
		for (size_t bit = 0; bit < XPI_FRAME_HDR_LEN * 8; bit++, cases++) {
			uint8_t m[XPI_FRAME_HDR_LEN];
			memcpy(m, buf, sizeof(m));
			m[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			LLVMFuzzerTestOneInput(m, sizeof(m));
		}
	}
	return cases;
}
