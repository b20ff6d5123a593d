/* SPDX-License-Identifier: MIT */
/* rdma-core's three ways of failing, converted to one (rdma.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../core/log.h"
#include "rdma.h"

static int fail(int err, const char *step, const char *call, const char *dev, char *why)
{
	char text[XPI_RDMA_WHY_LEN];
	snprintf(text, sizeof(text), "%s: %s on %s: %s", step, call, dev != NULL ? dev : "?",
		 strerror(err));
	if (why != NULL)
		memcpy(why, text, sizeof(text));
	xpi_fail(-err, "%s", text);
	return -err;
}

int xpi_rdma_fail_pos(int rc, const char *step, const char *call, const char *dev, char *why)
{
	/* A provider that breaks the convention (a negative value) still
	 * yields an error, never success. */
	int err = rc > 0 ? rc : rc < 0 ? -rc : EIO;
	return fail(err, step, call, dev, why);
}

int xpi_rdma_fail_errno(const char *step, const char *call, const char *dev, char *why)
{
	int err = errno > 0 ? errno : EIO;
	return fail(err, step, call, dev, why);
}
