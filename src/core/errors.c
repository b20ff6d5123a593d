/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "compiler.h"
#include "engine.h"

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
	snprintf(thread_detail, sizeof(thread_detail), "%s", text != NULL ? text : "");
}
