/* SPDX-License-Identifier: MIT */
/* Resolved settings of a context: defaults, then XP_* variables, then the
 * program's xp_config_t. */
#ifndef XPI_CONFIG_H
#define XPI_CONFIG_H

#include <stddef.h>

#include "xport/xport.h"

struct xpi_config {
	int timeout_ms;
	size_t pool_max_bytes;
	size_t unexpected_max_bytes;
	size_t rndv_threshold;
	int hugepages;
	int thread_mode;
};

/* Parses a size with an optional k/m/g suffix (powers of 1024). Returns 0
 * or -EINVAL. */
int xpi_parse_size(const char *s, size_t *out);

/* Validates a public config (NULL: defaults and environment). Returns 0 or
 * -EINVAL; a pool bound below XP_POOL_MIN_BYTES is also logged and becomes
 * the thread's error detail, naming XP_POOL_MAX_BYTES, the value and the
 * minimum. */
int xpi_config_resolve(const xp_config_t *in, struct xpi_config *out);

#endif
