/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compiler.h"
#include "config.h"
#include "engine.h"
#include "log.h"

#define DEFAULT_TIMEOUT_MS 30000
#define DEFAULT_POOL_MAX (64u << 20)
#define DEFAULT_UNEXPECTED_MAX (16u << 20)

int xpi_parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || s[0] == '-')
		return -EINVAL;
	switch (*end) {
	case 'k':
	case 'K':
		v <<= 10;
		end++;
		break;
	case 'm':
	case 'M':
		v <<= 20;
		end++;
		break;
	case 'g':
	case 'G':
		v <<= 30;
		end++;
		break;
	default:
		break;
	}
	if (*end != '\0')
		return -EINVAL;
	*out = (size_t)v;
	return 0;
}

static void env_size(const char *name, size_t *field)
{
	const char *s = getenv(name);
	size_t v;
	if (s == NULL || *s == '\0')
		return;
	if (xpi_parse_size(s, &v) == 0)
		*field = v;
	else
		xpi_log(XPI_LOG_WARN, "ignoring %s=%s: not a size", name, s);
}

XPI_EXPORT void xp_config_init(xp_config_t *cfg)
{
	if (cfg == NULL)
		return;
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->timeout_ms = DEFAULT_TIMEOUT_MS;
	cfg->pool_max_bytes = DEFAULT_POOL_MAX;
	cfg->unexpected_max_bytes = DEFAULT_UNEXPECTED_MAX;
	cfg->rndv_threshold = 0; /* each transport's own */
	cfg->hugepages = XP_HUGEPAGES_AUTO;
	cfg->thread_mode = XP_THREAD_MULTI;

	const char *s = getenv("XP_TIMEOUT_MS");
	if (s != NULL && *s != '\0') {
		char *end;
		long v = strtol(s, &end, 10);
		if (*end == '\0' && v > 0 && v <= 24L * 3600 * 1000)
			cfg->timeout_ms = (int)v;
		else
			xpi_log(XPI_LOG_WARN, "ignoring XP_TIMEOUT_MS=%s", s);
	}
	env_size("XP_POOL_MAX_BYTES", &cfg->pool_max_bytes);
	env_size("XP_UNEXPECTED_MAX_BYTES", &cfg->unexpected_max_bytes);
	env_size("XP_RNDV_THRESHOLD", &cfg->rndv_threshold);
	s = getenv("XP_HUGEPAGES");
	if (s != NULL && *s != '\0') {
		if (strcasecmp(s, "on") == 0)
			cfg->hugepages = XP_HUGEPAGES_ON;
		else if (strcasecmp(s, "off") == 0)
			cfg->hugepages = XP_HUGEPAGES_OFF;
		else if (strcasecmp(s, "auto") == 0)
			cfg->hugepages = XP_HUGEPAGES_AUTO;
		else
			xpi_log(XPI_LOG_WARN, "ignoring XP_HUGEPAGES=%s: want auto, on or off", s);
	}
	s = getenv("XP_THREAD_MODE");
	if (s != NULL && *s != '\0') {
		if (strcasecmp(s, "multi") == 0)
			cfg->thread_mode = XP_THREAD_MULTI;
		else if (strcasecmp(s, "serialized") == 0)
			cfg->thread_mode = XP_THREAD_SERIALIZED;
		else
			xpi_log(XPI_LOG_WARN,
				"ignoring XP_THREAD_MODE=%s: want multi or serialized", s);
	}
}

int xpi_config_resolve(const xp_config_t *in, struct xpi_config *out)
{
	xp_config_t def;
	if (in == NULL) {
		xp_config_init(&def);
		in = &def;
	}
	if (in->struct_size >= sizeof(xp_config_t) && in->pool_max_bytes < XP_POOL_MIN_BYTES) {
		xpi_log_detail(XPI_LOG_ERROR,
			       "XP_POOL_MAX_BYTES (pool_max_bytes) = %zu is below the minimum of "
			       "%zu bytes (XP_POOL_MIN_BYTES, 1 MiB)",
			       in->pool_max_bytes, XP_POOL_MIN_BYTES);
		return -EINVAL;
	}
	if (in->struct_size < sizeof(xp_config_t) || in->timeout_ms <= 0 ||
	    in->hugepages < XP_HUGEPAGES_AUTO || in->hugepages > XP_HUGEPAGES_ON ||
	    in->thread_mode < XP_THREAD_MULTI || in->thread_mode > XP_THREAD_SERIALIZED)
		return -EINVAL;
	out->timeout_ms = in->timeout_ms;
	out->pool_max_bytes = in->pool_max_bytes;
	out->unexpected_max_bytes = in->unexpected_max_bytes;
	out->rndv_threshold = in->rndv_threshold;
	out->hugepages = in->hugepages;
	out->thread_mode = in->thread_mode;
	return 0;
}
