/* SPDX-License-Identifier: MIT */
/*
 * The one list of the backends built into this library (backend.h). Meson
 * defines XPORT_HAVE_<NAME> for each backend it builds. The order is attach
 * and fallback order: TCP, which reaches everything, comes last.
 */
#include "backend.h"

extern const struct xpi_backend xpi_shm_backend;
extern const struct xpi_backend xpi_tcp_backend;

const struct xpi_backend *const xpi_backends[] = {
	&xpi_shm_backend,
#ifdef XPORT_HAVE_TCP
	&xpi_tcp_backend,
#endif
	NULL,
};
