/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the unique id of xp_init_rank (src/job/unique_id.c,
 * xpi_uid_parse): any bytes must either parse into an id that writes back
 * to the very same 128 bytes (every byte of the layout is checked, so an
 * accepted id has one spelling), with a known family, a port and a
 * specified address, or be refused with -EPROTO and a reason; never crash
 * or read past @size. Built with clang -fsanitize=fuzzer when available;
 * replay.c runs the corpus in ordinary builds.
 */
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "job/unique_id.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xpi_uid u;
	const char *why = NULL;
	int rc = xpi_uid_parse(data, size, &u, &why);
	if (fuzz_refused(rc, why))
		return 0;
	uint8_t again[XPI_UID_LEN];
	if (size != XPI_UID_LEN || u.port == 0 || (u.family != AF_INET && u.family != AF_INET6))
		abort();
	xpi_uid_write(&u, again);
	if (memcmp(again, data, XPI_UID_LEN) != 0)
		abort(); /* parse and write disagree */
	return 0;
}
