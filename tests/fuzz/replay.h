/* SPDX-License-Identifier: MIT */
/* What a fuzz target and its replay (replay.c) share. */
#ifndef XP_FUZZ_REPLAY_H
#define XP_FUZZ_REPLAY_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* The target: aborts on a finding, returns 0 otherwise. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A target's generated cases beyond its corpus, run through the target;
 * returns how many. Optional: a target without them has none. */
long replay_generated(void);

/* A parser's answer @rc: true if it refused the input with -EPROTO and
 * said why in @why, false if it accepted it; aborts on anything else. */
static inline bool fuzz_refused(int rc, const char *why)
{
	if (rc == -EPROTO && why != NULL)
		return true;
	if (rc != 0)
		abort(); /* refused without a reason, or with another code */
	return false;
}

#endif
