/* SPDX-License-Identifier: MIT */
/*
 * Logging to stderr. XP_LOG_LEVEL=none|error|warn|info|debug (default warn)
 * sets what is printed; XP_DEBUG=all or a comma list of subsystems
 * (match,proto,pool,transport) turns on debug lines of those subsystems.
 * Both are the process's, set by the context created last (log_level and
 * debug of xp_config_t).
 *
 * Levels: ERROR for a failure nobody learns of by a return code (a peer
 * lost during progress, a connection refused at rank 0); a failure the
 * program receives as a return code is logged at INFO (xpi_log_detail),
 * since the program decides whether it is an error.
 */
#ifndef XPI_LOG_H
#define XPI_LOG_H

#include <stdarg.h>
#include <stdbool.h>

enum xpi_log_level { XPI_LOG_NONE = 0, XPI_LOG_ERROR, XPI_LOG_WARN, XPI_LOG_INFO, XPI_LOG_DEBUG };

void xpi_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
bool xpi_log_enabled(int level);
/* Sets the process's level (enum xpi_log_level) and debug subsystems. */
void xpi_log_configure(int level, unsigned debug_mask);
/* Logs a failure at @level and makes the same text the calling thread's
 * xp_error_detail(). */
void xpi_log_detail(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void xpi_log_detailv(int level, const char *fmt, va_list ap);
/* Makes the text the thread's xp_error_detail() without logging it (a bad
 * argument the caller is told of at once) and returns @rc. */
int xpi_fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* For calls that set up much (xp_init, local jobs): clear the detail on
 * entry, and on a failure that set none, give it "call: xp_strerror(rc)",
 * so xp_error_detail() is never empty after an error. Returns @rc. */
void xpi_detail_clear(void);
int xpi_detail_ensure(int rc, const char *call);
/* True if XP_DEBUG names @subsystem (or "all"). */
bool xpi_debug_on(const char *subsystem);

#endif
