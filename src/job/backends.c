/* SPDX-License-Identifier: MIT */
/*
 * The one list of the backends built into this library (backend.h). Meson
 * defines XPORT_HAVE_<NAME> for each backend it builds. The order is attach
 * and fallback order: TCP, which reaches everything, comes last.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "backend.h"
#include "../select/card.h"

extern const struct xpi_backend xpi_shm_backend;
extern const struct xpi_backend xpi_rdma_backend;
extern const struct xpi_backend xpi_dpdk_backend;
extern const struct xpi_backend xpi_tcp_backend;

const struct xpi_backend *const xpi_backends[] = {
	&xpi_shm_backend,
#ifdef XPORT_HAVE_RDMA
	&xpi_rdma_backend,
#endif
#ifdef XPORT_HAVE_DPDK
	&xpi_dpdk_backend,
#endif
#ifdef XPORT_HAVE_TCP
	&xpi_tcp_backend,
#endif
	NULL,
};

/* Every transport type the capability cards know (card.h), built or not. */
static const uint8_t card_types[] = { XPI_TL_SHM, XPI_TL_RDMA, XPI_TL_DPDK, XPI_TL_TCP };

const struct xpi_backend *xpi_backend_find(const char *name, size_t len)
{
	for (const struct xpi_backend *const *b = xpi_backends; *b != NULL; b++)
		if (strlen((*b)->name) == len && strncasecmp((*b)->name, name, len) == 0)
			return *b;
	return NULL;
}

bool xpi_backend_allowed(const struct xpi_config *cfg, const struct xpi_backend *b)
{
	const char *p = cfg->transports;
	if (*p == '\0')
		return true;
	while (*p != '\0') {
		size_t len = strcspn(p, ",");
		while (len > 0 && p[len - 1] == ' ')
			len--;
		if (strlen(b->name) == len && strncasecmp(b->name, p, len) == 0)
			return true;
		p += strcspn(p, ",");
		p += *p == ',';
		p += strspn(p, " ");
	}
	return false;
}

static bool type_built(uint8_t type)
{
	for (const struct xpi_backend *const *b = xpi_backends; *b != NULL; b++)
		if ((*b)->type == type)
			return true;
	return false;
}

static void list_types(bool built, char *out, size_t n)
{
	size_t used = 0;
	out[0] = '\0';
	for (size_t i = 0; i < sizeof(card_types) && used < n; i++)
		if (type_built(card_types[i]) == built)
			used += (size_t)snprintf(out + used, n - used, "%s%s", used > 0 ? ", " : "",
						 xpi_tl_type_name(card_types[i]));
}

void xpi_backends_built(char *out, size_t n)
{
	list_types(true, out, n);
}

void xpi_backends_not_built(char *out, size_t n)
{
	list_types(false, out, n);
}

int xpi_backends_check_list(const char *list, char *why, size_t n)
{
	char built[64], missing[64];
	xpi_backends_built(built, sizeof(built));
	xpi_backends_not_built(missing, sizeof(missing));
	for (const char *p = list; *p != '\0';) {
		p += strspn(p, " \t");
		size_t len = strcspn(p, ", \t");
		if (len > 0 && xpi_backend_find(p, len) == NULL) {
			bool known = false;
			for (size_t i = 0; i < sizeof(card_types); i++) {
				const char *name = xpi_tl_type_name(card_types[i]);
				known |= strlen(name) == len && strncasecmp(name, p, len) == 0;
			}
			if (known)
				snprintf(why, n, "%.*s is not in this build (built: %s)", (int)len,
					 p, built);
			else
				snprintf(why, n,
					 "'%.*s' is not a transport (built: %s%s%s; 'inproc' is "
					 "chosen by forming a local job, not here)",
					 (int)len, p, built,
					 missing[0] != '\0' ? "; not built: " : "", missing);
			return -EINVAL;
		}
		p += len;
		p += strspn(p, " \t");
		if (*p == ',')
			p++;
		else if (*p != '\0')
			break; /* the syntax is the card parser's to judge */
	}
	/* Separators, repeats, empty names: the same parser the card uses. */
	uint8_t types[XPI_CARD_MAX_TL], count;
	const char *syntax = "";
	if (xpi_transports_parse(list, types, &count, &syntax) < 0) {
		snprintf(why, n, "%s", syntax);
		return -EINVAL;
	}
	return 0;
}
