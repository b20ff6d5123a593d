/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the bootstrap's control message header
 * (src/job/bootstrap.c, xpi_boot_hdr_parse): any bytes must either parse
 * into a header that writes back to the same 16 bytes, with a known op and
 * an abort's code and text length in range, or be refused with -EPROTO and
 * a reason (-EAGAIN only when fewer than 16 bytes came); never crash or read
 * past @size. An abort's text is then taken from what follows the header,
 * as a rank does. Built with clang -fsanitize=fuzzer when available;
 * replay.c runs the corpus in ordinary builds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "job/bootstrap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xpi_boot_hdr h;
	const char *why = NULL;
	int rc = xpi_boot_hdr_parse(data, size, &h, &why);
	if (rc == -EAGAIN) {
		if (size >= XPI_BOOT_HDR_LEN)
			abort();
		return 0;
	}
	if (fuzz_refused(rc, why))
		return 0;
	uint8_t again[XPI_BOOT_HDR_LEN];
	xpi_boot_hdr_write(&h, again);
	if (memcmp(again, data, sizeof(again)) != 0)
		abort(); /* parse and write disagree */
	switch (h.op) {
	case XPI_BOOT_OP_GATHER:
	case XPI_BOOT_OP_TABLE:
		break;
	case XPI_BOOT_OP_ABORT:
		if (h.code == 0 || h.code > 4095 || h.len > XPI_BOOT_ABORT_TEXT_MAX)
			abort();
		/* The text buffer a rank reads an abort into is this size. */
		if (h.len <= size - XPI_BOOT_HDR_LEN) {
			char text[XPI_BOOT_ABORT_TEXT_MAX + 1];
			memcpy(text, data + XPI_BOOT_HDR_LEN, (size_t)h.len);
			text[h.len] = '\0';
		}
		break;
	default:
		abort(); /* an op the parser does not know got through */
	}
	return 0;
}
