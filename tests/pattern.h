/* SPDX-License-Identifier: MIT */
/*
 * The test payload pattern: a xorshift stream seeded per message, so a
 * misplaced, stale or swapped byte shows up with its offset.
 */
#ifndef XP_PATTERN_H
#define XP_PATTERN_H

#include <stdint.h>
#include <stdio.h>

static inline void fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		p[i] = (uint8_t)x;
	}
}

static inline int check(const uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t x = seed * 2654435761u + 1;
	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		if (p[i] != (uint8_t)x) {
			fprintf(stderr, "byte %zu of %zu differs (seed %u)\n", i, len, seed);
			return -1;
		}
	}
	return 0;
}

#endif
