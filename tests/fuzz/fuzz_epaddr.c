/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for an endpoint's address (src/core/ep.h,
 * xpi_ep_addr_parse), the 128 bytes xp_connect takes from anyone: any
 * bytes must either parse into an address that writes back to the very
 * same 128 bytes (reserved bytes are checked, so an accepted address has
 * one spelling), or be refused with -EINVAL and a reason; never crash.
 * Other lengths are not addresses (xp_ep_addr_t has exactly 128 bytes).
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "core/ep.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size != XP_EP_ADDR_BYTES)
		return 0;
	struct xpi_ep_addr a;
	const char *why = NULL;
	int rc = xpi_ep_addr_parse(data, &a, &why);
	if (rc != 0) {
		if (rc != -EINVAL || why == NULL)
			abort(); /* refused without a reason, or with another code */
		return 0;
	}
	uint8_t again[XP_EP_ADDR_BYTES];
	xpi_ep_addr_write(&a, again);
	if (memcmp(again, data, XP_EP_ADDR_BYTES) != 0)
		abort(); /* parse and write disagree */
	return 0;
}
