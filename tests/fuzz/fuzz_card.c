/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the capability card parser (src/select/card.c): any
 * bytes must either parse into a card that packs and parses back to an
 * equal card, or be refused with -EPROTO and a reason; never crash or read
 * past @size. A parsed card must also select lanes with itself the same
 * way twice, whichever argument comes first. Built with clang
 * -fsanitize=fuzzer when available; replay.c runs the corpus in
 * ordinary builds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "select/card.h"
#include "select/select.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xpi_card c, again;
	const char *why = NULL;
	int rc = xpi_card_parse(data, size, &c, &why);
	if (fuzz_refused(rc, why))
		return 0;
	if (c.ntl > XPI_CARD_MAX_TL || c.nallowed > XPI_CARD_MAX_TL)
		abort();
	uint8_t wire[XPI_CARD_WIRE_MAX];
	if (xpi_card_pack(&c, wire) != 0)
		abort(); /* what parse returns, pack takes */
	why = NULL;
	if (xpi_card_parse(wire, sizeof(wire), &again, &why) != 0)
		abort();
	if (!xpi_card_equal(&c, &again))
		abort(); /* parse and pack disagree */

	/* Selection on what the parser lets through: a card against its own
	 * copy with the rank moved, so rule 2 looks at both cards. */
	again.rank = c.rank + 1;
	struct xpi_lanes l1, l2;
	int r1 = xpi_select(&c, &again, &l1, NULL), r2 = xpi_select(&again, &c, &l2, NULL);
	if (r1 != r2 || (r1 != 0 && r1 != -ENOENT))
		abort();
	if (r1 == 0 && (l1.small != l2.small || l1.bulk != l2.bulk))
		abort();
	return 0;
}
