/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr. XP_LOG_LEVEL=none|error|warn|info|debug (default warn)
 * sets what is printed; XP_DEBUG=all or a comma list of subsystems
 * (match,proto,pool,transport) turns on debug lines of those subsystems.
 */
#ifndef XPI_LOG_H
#define XPI_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum xpi_log_level { XPI_LOG_NONE = 0, XPI_LOG_ERROR, XPI_LOG_WARN, XPI_LOG_INFO, XPI_LOG_DEBUG };

void xpi_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool xpi_log_enabled(int level);
/* Logs a failure at @level and makes the same text the calling thread's
 * xp_error_detail(). */
void xpi_log_detail(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void xpi_log_detailv(int level, const char *fmt, va_list ap);
/* True if XP_DEBUG names @subsystem (or "all"). */
bool xpi_debug_on(const char *subsystem);

#endif
