/* SPDX-License-Identifier: MIT */
/*
 * Runs the frame parser's fuzz target over its corpus (the files named on
 * the command line) and over generated cases: every valid frame type,
 * each single-bit flip and each truncation of them. Exits 0 if none
 * aborts, so ordinary gcc builds check what the fuzzer found.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (f == NULL) {
		perror(path);
		return 1;
	}
	uint8_t buf[4096];
	size_t n = fread(buf, 1, sizeof(buf), f);
	fclose(f);
	LLVMFuzzerTestOneInput(buf, n);
	return 0;
}

int main(int argc, char **argv)
{
	int files = 0;
	for (int i = 1; i < argc; i++) {
		if (run_file(argv[i]) != 0)
			return 1;
		files++;
	}
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
	printf("replayed %d corpus files and %ld generated cases\n", files, cases);
	return 0;
}
