/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the DPDK path's frame parser (src/dpdk/udp_wire.c):
 * any bytes must be refused with -EPROTO (saying why) or -ENOENT, or parse
 * into a frame whose payload lies inside the input; one of ours, built
 * again from what was parsed, must parse back to the same header and
 * payload. The first byte of the input sets the job's size. Replayed by
 * replay.c in ordinary builds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "dpdk/udp_wire.h"

static uint8_t again[70000];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xpi_rx_frame f;
	const char *why = NULL;
	uint32_t nranks = size > 0 ? (uint32_t)data[0] + 1 : 1;
	int rc = xpi_rx_frame_parse(data, size, nranks, &f, &why);
	if (rc == -EPROTO) {
		if (why == NULL)
			abort(); /* every refusal says why */
		return 0;
	}
	if (rc == -ENOENT)
		return 0;
	if (rc != 0)
		abort();
	if (f.kind == XPI_RX_ARP)
		return 0;
	if (f.payload < data || f.payload + f.payload_len > data + size)
		abort(); /* the payload must lie inside what was received */
	if (f.kind != XPI_RX_DGRAM)
		return 0;
	if (f.hdr.src_rank >= nranks || f.hdr.dst_rank >= nranks)
		abort();
	int n = xpi_dgram_build(again, sizeof(again), &f.from, &f.to, 7, &f.hdr, f.payload,
				f.payload_len);
	if (n < 0)
		abort();
	struct xpi_rx_frame g;
	if (xpi_rx_frame_parse(again, (size_t)n, nranks, &g, &why) != 0 || g.kind != XPI_RX_DGRAM ||
	    !xpi_dgram_hdr_same(&g.hdr, &f.hdr) || g.payload_len != f.payload_len ||
	    memcmp(g.payload, f.payload, f.payload_len) != 0 || g.from.ip != f.from.ip ||
	    g.to.port != f.to.port)
		abort(); /* build and parse disagree */
	return 0;
}
