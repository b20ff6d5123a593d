/* SPDX-License-Identifier: MIT */
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "log.h"
#include "settings.h"

/* The process's level and debug subsystems: set by every context's
 * resolution of its settings (xpi_log_configure); before the first, read
 * from the environment (a value not accepted counts as unset: the context
 * being created fails on it). */
static _Atomic int log_level = -1;
static _Atomic unsigned debug_mask;

static void configure_from_env(void)
{
	xp_config_t cfg;
	(void)xpi_settings_from_env(&cfg, NULL, NULL, 0);
	int expected = -1;
	if (atomic_compare_exchange_strong(&log_level, &expected, cfg.log_level))
		atomic_store(&debug_mask, xpi_settings_debug_mask(cfg.debug));
}

void xpi_log_configure(int level, unsigned mask)
{
	atomic_store(&debug_mask, mask);
	atomic_store(&log_level, level);
}

bool xpi_log_enabled(int level)
{
	int cur = atomic_load_explicit(&log_level, memory_order_relaxed);
	if (cur < 0) {
		configure_from_env();
		cur = atomic_load(&log_level);
	}
	return level <= cur;
}

bool xpi_debug_on(const char *subsystem)
{
	if (atomic_load_explicit(&log_level, memory_order_relaxed) < 0)
		configure_from_env();
	unsigned mask = atomic_load_explicit(&debug_mask, memory_order_relaxed);
	/* Nothing on, the usual case: no parsing of the name (hot paths ask). */
	return mask != 0 && (mask & xpi_settings_debug_mask(subsystem)) != 0;
}

void xpi_log(int level, const char *fmt, ...)
{
	static const char *const tags[] = { "", "ERROR", "WARN", "INFO", "DEBUG" };
	if (!xpi_log_enabled(level))
		return;
	char line[1024];
	int n = snprintf(line, sizeof(line), "xport[%d] %s: ", (int)getpid(), tags[level]);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write per line so lines of several threads never interleave. */
	size_t len = strlen(line);
	if (len < sizeof(line) - 1)
		line[len++] = '\n';
	(void)!write(STDERR_FILENO, line, len);
}
