/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "compiler.h"
#include "engine.h"
#include "log.h"

static _Thread_local char thread_detail[512];

XPI_EXPORT const char *xp_strerror(int code)
{
	if (code < 0)
		code = -code;
	switch (code) {
	case 0:
		return "success";
	case EINVAL:
		return "invalid argument";
	case ENOMEM:
		return "out of memory";
	case ENOBUFS:
		return "no pooled buffer available (pool exhausted or message too large for it)";
	case EMSGSIZE:
		return "message truncated: receive buffer smaller than the message";
	case ETIMEDOUT:
		return "operation timed out";
	case ECANCELED:
		return "operation cancelled";
	case EPROTONOSUPPORT:
		return "no transport in this build can serve the job";
	case ECONNRESET:
		return "peer closed the connection or died";
	case EACCES:
		return "refused: the peer did not prove the job key (wrong XP_JOB_KEY?)";
	case EPROTO:
		return "protocol error: malformed or incompatible data from the peer";
	case EAGAIN:
		return "resource temporarily unavailable";
	default:
		break;
	}
	/* strerrordesc_np is thread-safe, unlike strerror. */
	const char *s = strerrordesc_np(code);
	return s != NULL ? s : "unknown error";
}

XPI_EXPORT const char *xp_error_detail(void)
{
	return thread_detail;
}

void xpi_set_thread_detail(const char *text)
{
	/* Cut to what fits (snprintf would do, but gcc warns of the cut). */
	size_t n = text != NULL ? strnlen(text, sizeof(thread_detail) - 1) : 0;
	if (n != 0)
		memcpy(thread_detail, text, n);
	thread_detail[n] = '\0';
}

void xpi_detail_clear(void)
{
	thread_detail[0] = '\0';
}

int xpi_detail_ensure(int rc, const char *call)
{
	if (rc < 0 && thread_detail[0] == '\0')
		xpi_fail(rc, "%s: %s", call, xp_strerror(rc));
	return rc;
}

int xpi_fail(int rc, const char *fmt, ...)
{
	char text[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	xpi_set_thread_detail(text);
	return rc;
}

void xpi_log_detailv(int level, const char *fmt, va_list ap)
{
	char text[640]; /* what the bootstrap's texts need; the detail keeps 512 */
	vsnprintf(text, sizeof(text), fmt, ap);
	xpi_log(level, "%s", text);
	xpi_set_thread_detail(text);
}

void xpi_log_detail(int level, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	xpi_log_detailv(level, fmt, ap);
	va_end(ap);
}
