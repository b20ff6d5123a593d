/* SPDX-License-Identifier: MIT */
/* A build without PMIx (meson option pmix); see pmix.h. */
#include <errno.h>

#include "pmix.h"

bool xpi_pmix_built(void)
{
	return false;
}

bool xpi_pmix_used(void)
{
	return false;
}

int xpi_pmix_job(int timeout_ms, struct xpi_pmix_job *job, struct xp_unique_id *id)
{
	(void)timeout_ms;
	(void)job;
	(void)id;
	return -ENOTSUP;
}
