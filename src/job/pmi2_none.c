/* SPDX-License-Identifier: MIT */
/* A build without Slurm's libpmi2 (meson option pmi2); see pmi2.h. */
#include <errno.h>

#include "pmi2.h"

bool xpi_pmi2_built(void)
{
	return false;
}

bool xpi_pmi2_used(void)
{
	return false;
}

int xpi_pmi2_job(int timeout_ms, struct xpi_pmi2_job *job, struct xp_unique_id *id)
{
	(void)timeout_ms;
	(void)job;
	(void)id;
	return -ENOTSUP;
}
