/* SPDX-License-Identifier: MIT */
/*
 * Lines through NCCL's logger, and xport's codes as NCCL's results.
 *
 * NCCL reads a plugin's result to decide what to say and whether to
 * retry: a system or remote error is the network's (or the peer's) doing,
 * an internal error is NCCL calling us wrongly, invalid usage the user's
 * configuration or sizes. xport's text for the failure (xp_error_detail:
 * which endpoint, which address, what the peer did) goes to the log with
 * the place in our code that saw it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>

#include "plugin.h"

static xnccl_logger_t logger; /* atomically: NCCL's threads log at once */

void xpn_log_set(xnccl_logger_t log)
{
	if (log != NULL)
		__atomic_store_n(&logger, log, __ATOMIC_RELEASE);
}

void xpn_log(enum xnccl_log_level level, const char *file, int line, const char *fmt, ...)
{
	char text[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	xnccl_logger_t log = __atomic_load_n(&logger, __ATOMIC_ACQUIRE);
	if (log != NULL) {
		/* Warnings concern every subsystem, as NCCL's own do; the rest
		 * are the network's and its setup's. */
		unsigned long flags = level == XNCCL_LOG_WARN ?
					      XNCCL_SUBSYS_ALL :
					      XNCCL_SUBSYS_INIT | XNCCL_SUBSYS_NET;
		log(level, flags, file, line, "%s", text);
	} else if (level <= XNCCL_LOG_WARN) {
		fprintf(stderr, "%s:%d %s\n", file, line, text);
	}
}

xnccl_result_t xpn_result(int xp_code)
{
	switch (-xp_code) {
	case 0:
		return XNCCL_OK;
	/* The peer: gone, refusing, silent, or sending what is not ours. */
	case ECONNRESET:
	case ECONNREFUSED:
	case ECONNABORTED:
	case EPIPE:
	case ETIMEDOUT:
	case EHOSTUNREACH:
	case ENETUNREACH:
	case EPROTO:
		return XNCCL_REMOTE_ERROR;
	/* The user's: sizes that do not fit, a job key that differs, an
	 * interface that does not exist, no TCP in XP_TRANSPORTS. */
	case EMSGSIZE:
	case EACCES:
	case ENODEV:
	case ENOTSUP:
		return XNCCL_INVALID_USAGE;
	/* NCCL's: a handle or argument that is not one, an operation
	 * cancelled under it. */
	case EINVAL:
	case EBADF:
	case ECANCELED:
		return XNCCL_INTERNAL_ERROR;
	/* The system's: memory, descriptors, anything else the kernel said. */
	default:
		return XNCCL_SYSTEM_ERROR;
	}
}

xnccl_result_t xpn_fail_at(const char *file, int line, int xp_code, const char *what)
{
	const char *detail = xp_error_detail();
	xpn_log(XNCCL_LOG_WARN, file, line, "NET/xport : %s: %s%s%s", what, xp_strerror(xp_code),
		detail[0] != '\0' ? ": " : "", detail);
	return xpn_result(xp_code);
}
