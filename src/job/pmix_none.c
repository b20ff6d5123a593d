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

int xpi_pmix_job(int timeout_ms, struct xpi_pmix_job *job, struct xp_unique_id *id,
		 uint8_t nonce[XPI_PMIX_NONCE_LEN])
{
	(void)timeout_ms;
	(void)job;
	(void)id;
	(void)nonce;
	return -ENOTSUP;
}

int xpi_pmix_allgather(uint32_t seq, int rank, int size, const void *mine, size_t len, void *all,
		       int timeout_ms)
{
	(void)seq;
	(void)rank;
	(void)size;
	(void)mine;
	(void)len;
	(void)all;
	(void)timeout_ms;
	return -ENOTSUP;
}

void xpi_pmix_leave(bool fence, const char *why, int timeout_ms)
{
	(void)fence;
	(void)why;
	(void)timeout_ms;
}
