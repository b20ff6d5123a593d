/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the frame header parser (src/core/wire.c): any
 * bytes must either parse into a frame that packs back to the same bytes,
 * or be refused with -EPROTO / -EAGAIN; never crash or read past @size.
 * Built with clang -fsanitize=fuzzer when available; replay.c runs
 * the corpus in ordinary builds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xpi_frame f;
	const char *why = NULL;
	uint32_t max_eager = size > 0 ? (uint32_t)data[0] << 12 : 0;
	int rc = xpi_frame_parse(data, size, max_eager, &f, &why);
	if (rc == 0) {
		uint8_t again[XPI_FRAME_HDR_LEN];
		xpi_frame_pack(&f, again);
		if (memcmp(again, data, XPI_FRAME_HDR_LEN) != 0)
			abort(); /* parse and pack disagree */
		if (f.type == XPI_FRAME_EAGER &&
		    (f.payload_len > max_eager || f.msg_len != f.payload_len))
			abort();
	} else if (rc == -EPROTO) {
		if (why == NULL)
			abort(); /* every refusal says why */
	} else if (rc != -EAGAIN || size >= XPI_FRAME_HDR_LEN) {
		abort();
	}
	return 0;
}
