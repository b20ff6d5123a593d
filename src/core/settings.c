/* SPDX-License-Identifier: MIT */
/* The settings table and its one validation policy; see settings.h. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "compiler.h"
#include "config.h"
#include "settings.h"

#define DAY_MS (24LL * 3600 * 1000)

static const char *const hugepage_names[] = { "auto", "off", "on", NULL };
static const char *const thread_names[] = { "multi", "serialized", "funneled", NULL };
static const char *const zc_names[] = { "auto", "off", "on", NULL };
static const char *const level_names[] = { "none", "error", "warn", "info", "debug", NULL };
static const char *const off_on_names[] = { "off", "on", NULL };
/* XP_DEBUG's subsystems; "all" is accepted besides. */
static const char *const debug_names[] = { "match", "proto", "pool", "transport", "coll", NULL };
static const char *const allreduce_names[] = {
	"auto", "recursive_doubling", "ring", "hierarchical", "rabenseifner", "shared_memory", NULL
};
/* A name for every enum xp_allreduce_algo value, in order. */
_Static_assert(sizeof(allreduce_names) / sizeof(allreduce_names[0]) == XP_ALLREDUCE_ALGO_COUNT + 1,
	       "allreduce_names: one name per enum xp_allreduce_algo value");

#define F(name) offsetof(xp_config_t, name)

/* The order is xport-info's. Enum names are in value order (enum
 * xp_hugepages, xp_thread_mode, xp_tcp_zc, xp_log_level). */
static const struct xpi_setting table[] = {
	{ "XP_TIMEOUT_MS", "timeout_ms", XPI_SET_MS, F(timeout_ms), 1, DAY_MS, NULL, NULL,
	  "default deadline of waits and blocking calls" },
	{ "XP_BOOT_TIMEOUT_MS", "boot_timeout_ms", XPI_SET_MS, F(boot_timeout_ms), 1, DAY_MS, NULL,
	  "timeout_ms", "bound on forming the job and each out-of-band operation" },
	{ "XP_JOB_KEY", "job_key", XPI_SET_STRING, F(job_key), 1, 255, NULL, NULL,
	  "secret every rank proves to join" },
	{ "XP_JOB_KEY_REQUIRED", "job_key_required", XPI_SET_ENUM, F(job_key_required), 0, 0,
	  off_on_names, NULL, "refuse to form a job without XP_JOB_KEY" },
	{ "XP_SOCKET_IFNAME", "socket_ifname", XPI_SET_STRING, F(socket_ifname), 1, 15, NULL, NULL,
	  "interface whose address a rank listens on" },
	{ "XP_TRANSPORTS", "transports", XPI_SET_STRING, F(transports), 1, 127, NULL, NULL,
	  "allowed transports in order of preference" },
	{ "XP_SHM_CMA_MIN", "shm_cma_min", XPI_SET_SIZE, F(shm_cma_min), 0, (long long)XP_MSG_MAX,
	  NULL, "off",
	  "shm: rendezvous payloads this long are copied by cross-memory attach, split between "
	  "sender and receiver" },
	{ "XP_TCP_ZC", "tcp_zc", XPI_SET_ENUM, F(tcp_zc), 0, 0, zc_names, NULL,
	  "tcp: zero-copy sends for payloads of 64 KiB or more" },
	{ "XP_POOL_MAX_BYTES", "pool_max_bytes", XPI_SET_SIZE, F(pool_max_bytes),
	  (long long)XP_POOL_MIN_BYTES, (long long)XP_MSG_MAX, NULL, NULL,
	  "hard bound on each rank's registered buffer pool" },
	{ "XP_UNEXPECTED_MAX_BYTES", "unexpected_max_bytes", XPI_SET_SIZE, F(unexpected_max_bytes),
	  0, (long long)XP_MSG_MAX, NULL, NULL, "bound on buffered unexpected payload per rank" },
	{ "XP_RNDV_THRESHOLD", "rndv_threshold", XPI_SET_SIZE, F(rndv_threshold), 0,
	  (long long)XP_MSG_MAX, NULL, NULL,
	  "messages this long or longer use rendezvous (0: each transport's)" },
	{ "XP_THREAD_MODE", "thread_mode", XPI_SET_ENUM, F(thread_mode), 0, 0, thread_names, NULL,
	  "whether threads may call into a rank at once" },
	{ "XP_HUGEPAGES", "hugepages", XPI_SET_ENUM, F(hugepages), 0, 0, hugepage_names, NULL,
	  "hugetlb pages for pools" },
	{ "XP_LOG_LEVEL", "log_level", XPI_SET_ENUM, F(log_level), 0, 0, level_names, NULL,
	  "what the log prints (process-wide)" },
	{ "XP_DEBUG", "debug", XPI_SET_LIST, F(debug), 0, 127, debug_names, NULL,
	  "debug lines of these subsystems (process-wide)" },
	{ "XP_ALLREDUCE_ALGO", "allreduce_algo", XPI_SET_ENUM, F(allreduce_algo), 0, 0,
	  allreduce_names, NULL, "allreduce algorithm (auto: by the cost model)" },
	{ "XP_HOST_ID", "host_id", XPI_SET_STRING, F(host_id), 1, 63, NULL, NULL,
	  "the host this rank says it is on (tests, containers)" },
	{ "XP_COLL_SEGMENT", "coll_segment", XPI_SET_SIZE, F(coll_segment), 0,
	  (long long)XP_MSG_MAX, NULL, NULL,
	  "bytes a collective's pipeline moves at a time (0: from the links)" },
	{ "XP_RDMA_DEVICE", "rdma_device", XPI_SET_STRING, F(rdma_device), 1, 63, NULL, NULL,
	  "rdma: the device to use (unset: the first with an active port)" },
	{ "XP_RDMA_RCACHE_BYTES", "rdma_rcache_bytes", XPI_SET_SIZE, F(rdma_rcache_bytes), 0,
	  (long long)XP_MSG_MAX, NULL, NULL,
	  "rdma: bound on registered memory the cache keeps pinned" },
	{ "XP_RDMA_CM", "rdma_cm", XPI_SET_ENUM, F(rdma_cm), 0, 0, off_on_names, NULL,
	  "rdma: connect queue pairs through rdma_cm" },
	{ "XP_TCP_SOCKBUF", "tcp_sockbuf", XPI_SET_SIZE, F(tcp_sockbuf), 0, 1ll << 30, NULL, "off",
	  "tcp: buffer sizes of bulk sockets (0: 512 KiB send, 1 MiB receive if the host allows)" },
	{ "XP_DPDK_EAL", "dpdk_eal", XPI_SET_STRING, F(dpdk_eal), 1, 1023, NULL, NULL,
	  "dpdk: EAL arguments, split at blanks; {rank} is replaced by the rank; ';' separates "
	  "lines of which rank r takes the r-th (unset: the application initialised the EAL, or "
	  "DPDK is not used)" },
	{ "XP_DPDK_IP", "dpdk_ip", XPI_SET_STRING, F(dpdk_ip), 1, 1023, NULL, NULL,
	  "dpdk: this rank's IPv4 address, or a comma list of addresses where rank r takes the "
	  "r-th (unset: 10.88.0.0 + rank + 1)" },
	{ "XP_DPDK_PORT", "dpdk_port", XPI_SET_SIZE, F(dpdk_port), 0, 1023, NULL, NULL,
	  "dpdk: the DPDK port (ethdev) id to use" },
	{ "XP_DPDK_UDP_PORT", "dpdk_udp_port", XPI_SET_SIZE, F(dpdk_udp_port), 1, 65535, NULL, NULL,
	  "dpdk: the UDP port each rank receives on" },
	{ "XP_DPDK_NEIGHBOURS", "dpdk_neighbours", XPI_SET_STRING, F(dpdk_neighbours), 1, 1023,
	  NULL, NULL,
	  "dpdk: static neighbour table IPV4=MAC,... never asked for by ARP (unset: ARP)" },
	{ "XP_DPDK_DROP", "dpdk_drop", XPI_SET_STRING, F(dpdk_drop), 1, 63, NULL, NULL,
	  "dpdk, for tests: drop, reorder and duplicate this fraction of received datagrams, "
	  "LOSS[,REORDER[,DUP]] e.g. 0.05,0.01,0.01 (unset: none)" },
	{ "XP_DPDK_AUTH", "dpdk_auth", XPI_SET_ENUM, F(dpdk_auth), 0, 0, off_on_names, NULL,
	  "dpdk: a MAC on every datagram (off: both ends of a pair send and accept them "
	  "without, to measure the cost)" },
	{ "XP_DPDK_PEER_TIMEOUT_MS", "dpdk_peer_timeout_ms", XPI_SET_MS, F(dpdk_peer_timeout_ms), 1,
	  DAY_MS, NULL, NULL,
	  "dpdk: a peer that acknowledges nothing this long is lost (its operations fail naming "
	  "it)" },
	{ "XP_EP_MAX", "ep_max", XPI_SET_SIZE, F(ep_max), 1, 65536, NULL, NULL,
	  "endpoints (connections made by address) a context holds at once" },
};

_Static_assert(XPI_ARRAY_SIZE(table) <= XPI_SETTINGS_MAX, "XPI_SETTINGS_MAX too small");

const struct xpi_setting *xpi_settings(size_t *n)
{
	*n = XPI_ARRAY_SIZE(table);
	return table;
}

int xpi_setting_index(const char *var)
{
	for (size_t i = 0; i < XPI_ARRAY_SIZE(table); i++)
		if (strcmp(table[i].var, var) == 0)
			return (int)i;
	return -1;
}

const char *xpi_origin_name(enum xpi_origin o)
{
	switch (o) {
	case XPI_ORIGIN_ENV:
		return "environment";
	case XPI_ORIGIN_CONFIG:
		return "config";
	default:
		return "default";
	}
}

/* ---------------------------------------------------------------------- */
/* Field access                                                           */

static int *int_field(const struct xpi_setting *s, xp_config_t *c)
{
	return (int *)(void *)((char *)c + s->offset);
}

static size_t *size_field(const struct xpi_setting *s, xp_config_t *c)
{
	return (size_t *)(void *)((char *)c + s->offset);
}

static const char **str_field(const struct xpi_setting *s, xp_config_t *c)
{
	return (const char **)(void *)((char *)c + s->offset);
}

/* The same for a const config; the table never writes through these. */
#define CFIELD(fn, s, c) (*fn((s), (xp_config_t *)(uintptr_t)(c)))

static int count_names(const char *const *names)
{
	int n = 0;
	while (names[n] != NULL)
		n++;
	return n;
}

static void join_names(const char *const *names, const char *extra, char *out, size_t n)
{
	size_t used = 0;
	out[0] = '\0';
	if (extra != NULL)
		used += (size_t)snprintf(out, n, "%s", extra);
	for (int i = 0; names[i] != NULL && used < n; i++)
		used += (size_t)snprintf(out + used, n - used, "%s%s", used > 0 ? ", " : "",
					 names[i]);
}

void xpi_setting_accepted(const struct xpi_setting *s, char *out, size_t n)
{
	char lo[32], hi[32];
	switch (s->type) {
	case XPI_SET_MS:
		snprintf(out, n, "%s%s%lld to %lld milliseconds", s->special != NULL ? "0 (" : "",
			 s->special != NULL ? "same as timeout_ms), " : "", s->min, s->max);
		break;
	case XPI_SET_SIZE:
		xpi_format_size((size_t)s->min, lo, sizeof(lo));
		xpi_format_size((size_t)s->max, hi, sizeof(hi));
		snprintf(out, n, "a size from %s to %s (digits, optional k, m or g suffix)%s%s", lo,
			 hi, s->special != NULL ? ", or " : "",
			 s->special != NULL ? s->special : "");
		break;
	case XPI_SET_ENUM:
		join_names(s->names, NULL, out, n);
		break;
	case XPI_SET_LIST:
		join_names(s->names, "all", out, n);
		if (strlen(out) + 20 < n)
			strcat(out, " (comma-separated)");
		break;
	case XPI_SET_STRING:
		snprintf(out, n, "a text of 1 to %lld bytes", s->max);
		break;
	}
}

/* ---------------------------------------------------------------------- */
/* Parsing one value                                                      */

/* Decimal digits only, at most 18 of them. */
static int parse_decimal(const char *p, size_t len, unsigned long long *out)
{
	if (len == 0 || len > 18)
		return -EINVAL;
	unsigned long long v = 0;
	for (size_t i = 0; i < len; i++) {
		if (p[i] < '0' || p[i] > '9')
			return -EINVAL;
		v = v * 10 + (unsigned)(p[i] - '0');
	}
	*out = v;
	return 0;
}

int xpi_parse_size(const char *s, size_t *out)
{
	size_t len = strlen(s);
	unsigned shift = 0;
	if (len > 0) {
		switch (s[len - 1]) {
		case 'k':
		case 'K':
			shift = 10;
			break;
		case 'm':
		case 'M':
			shift = 20;
			break;
		case 'g':
		case 'G':
			shift = 30;
			break;
		default:
			break;
		}
	}
	unsigned long long v;
	if (parse_decimal(s, shift != 0 ? len - 1 : len, &v) < 0)
		return -EINVAL;
	if (v > (SIZE_MAX >> shift))
		return -ERANGE;
	*out = (size_t)(v << shift);
	return 0;
}

void xpi_format_size(size_t v, char *out, size_t n)
{
	static const char suffix[] = "gmk";
	for (int i = 0; i < 3; i++) {
		unsigned shift = (unsigned)(30 - 10 * i);
		if (v != 0 && (v & (((size_t)1 << shift) - 1)) == 0) {
			snprintf(out, n, "%zu%c", v >> shift, suffix[i]);
			return;
		}
	}
	snprintf(out, n, "%zu", v);
}

/* A name of @names, by the length-delimited @p; -1 if none. */
static int find_name(const char *const *names, const char *p, size_t len)
{
	for (int i = 0; names[i] != NULL; i++)
		if (strlen(names[i]) == len && strncasecmp(names[i], p, len) == 0)
			return i;
	return -1;
}

/* Checks a LIST value; on failure names the first bad item in @why. */
static int check_list(const struct xpi_setting *s, const char *v, char *why, size_t n)
{
	const char *p = v;
	if ((long long)strlen(v) > s->max) {
		snprintf(why, n, "longer than %lld bytes", s->max);
		return -EINVAL;
	}
	for (;;) {
		const char *comma = strchr(p, ',');
		size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		if (len == 0) {
			snprintf(why, n, "an empty name in the list");
			return -EINVAL;
		}
		if (find_name(s->names, p, len) < 0 &&
		    !(len == 3 && strncasecmp(p, "all", 3) == 0)) {
			snprintf(why, n, "'%.*s' is not a name it knows", (int)len, p);
			return -EINVAL;
		}
		if (comma == NULL)
			return 0;
		p = comma + 1;
	}
}

/* Parses @v for @s into @cfg. Returns 0 or -EINVAL with @why saying why
 * (without the variable and value, which the caller adds). */
static int parse_value(const struct xpi_setting *s, const char *v, xp_config_t *cfg, char *why,
		       size_t n)
{
	unsigned long long u;
	size_t sz;
	int rc;
	why[0] = '\0';
	switch (s->type) {
	case XPI_SET_MS:
		if (parse_decimal(v, strlen(v), &u) < 0) {
			snprintf(why, n, "not a number of milliseconds");
			return -EINVAL;
		}
		if (!(u == 0 && s->special != NULL) &&
		    (u < (unsigned long long)s->min || u > (unsigned long long)s->max)) {
			snprintf(why, n, "out of range");
			return -EINVAL;
		}
		*int_field(s, cfg) = (int)u;
		return 0;
	case XPI_SET_SIZE:
		if (s->special != NULL && strcasecmp(v, s->special) == 0) {
			*size_field(s, cfg) = SIZE_MAX;
			return 0;
		}
		rc = xpi_parse_size(v, &sz);
		if (rc < 0 || sz < (size_t)s->min || sz > (size_t)s->max) {
			snprintf(why, n, "%s", rc == -EINVAL ? "not a size" : "out of range");
			return -EINVAL;
		}
		*size_field(s, cfg) = sz;
		return 0;
	case XPI_SET_ENUM:
		rc = find_name(s->names, v, strlen(v));
		if (rc < 0) {
			snprintf(why, n, "not a name it knows");
			return -EINVAL;
		}
		*int_field(s, cfg) = rc;
		return 0;
	case XPI_SET_LIST:
		if (check_list(s, v, why, n) < 0)
			return -EINVAL;
		*str_field(s, cfg) = v;
		return 0;
	case XPI_SET_STRING:
		if ((long long)strlen(v) > s->max) {
			snprintf(why, n, "longer than %lld bytes", s->max);
			return -EINVAL;
		}
		*str_field(s, cfg) = v;
		return 0;
	}
	return -EINVAL;
}

/* ---------------------------------------------------------------------- */
/* The environment and a program's config                                 */

static void set_defaults(xp_config_t *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->timeout_ms = XPI_DEFAULT_TIMEOUT_MS;
	cfg->pool_max_bytes = (size_t)64 << 20;
	cfg->unexpected_max_bytes = (size_t)16 << 20;
	cfg->rndv_threshold = 0; /* each transport's own */
	cfg->hugepages = XP_HUGEPAGES_AUTO;
	cfg->thread_mode = XP_THREAD_MULTI;
	cfg->boot_timeout_ms = 0; /* timeout_ms */
	cfg->shm_cma_min = XPI_SHM_CMA_MIN_DEFAULT;
	cfg->tcp_zc = XP_TCP_ZC_AUTO;
	cfg->log_level = XP_LOG_WARN;
	cfg->rdma_rcache_bytes = (size_t)1 << 30;
	cfg->dpdk_port = 0;
	cfg->dpdk_udp_port = 47100;
	cfg->dpdk_peer_timeout_ms = 10000;
	cfg->dpdk_auth = 1;
	cfg->ep_max = 1024;
}

int xpi_setting_from_env(const struct xpi_setting *s, xp_config_t *cfg, char *why, size_t n)
{
	const char *v = getenv(s->var);
	if (v == NULL || *v == '\0')
		return 0;
	char reason[160], accepted[200];
	if (parse_value(s, v, cfg, reason, sizeof(reason)) == 0)
		return 1;
	if (why != NULL) {
		xpi_setting_accepted(s, accepted, sizeof(accepted));
		/* A secret is never echoed, not even a wrong one. */
		if (s->offset == F(job_key))
			snprintf(why, n, "%s (%zu bytes) is not accepted: %s (accepted: %s)",
				 s->var, strlen(v), reason, accepted);
		else
			snprintf(why, n, "%s=%s is not accepted: %s (accepted: %s)", s->var, v,
				 reason, accepted);
	}
	return -EINVAL;
}

int xpi_settings_from_env(xp_config_t *cfg, unsigned char *origin, char *why, size_t n)
{
	int rc = 0;
	set_defaults(cfg);
	for (size_t i = 0; i < XPI_ARRAY_SIZE(table); i++) {
		int got = xpi_setting_from_env(&table[i], cfg, rc == 0 ? why : NULL, n);
		if (got < 0)
			rc = got;
		if (origin != NULL)
			origin[i] = got == 1 ? XPI_ORIGIN_ENV : XPI_ORIGIN_DEFAULT;
	}
	return rc;
}

int xpi_settings_check(const xp_config_t *cfg, char *why, size_t n)
{
	for (size_t i = 0; i < XPI_ARRAY_SIZE(table); i++) {
		const struct xpi_setting *s = &table[i];
		char value[64], reason[160] = "", accepted[200];
		bool ok = true;
		switch (s->type) {
		case XPI_SET_MS: {
			int v = CFIELD(int_field, s, cfg);
			snprintf(value, sizeof(value), "%d", v);
			ok = (v == 0 && s->special != NULL) || (v >= s->min && v <= s->max);
			break;
		}
		case XPI_SET_SIZE: {
			size_t v = CFIELD(size_field, s, cfg);
			snprintf(value, sizeof(value), "%zu", v);
			ok = (v == SIZE_MAX && s->special != NULL) ||
			     (v >= (size_t)s->min && v <= (size_t)s->max);
			break;
		}
		case XPI_SET_ENUM: {
			int v = CFIELD(int_field, s, cfg);
			snprintf(value, sizeof(value), "%d", v);
			ok = v >= 0 && v < count_names(s->names);
			break;
		}
		case XPI_SET_LIST:
		case XPI_SET_STRING: {
			const char *v = CFIELD(str_field, s, cfg);
			if (v == NULL)
				break;
			if (s->offset == F(job_key))
				snprintf(value, sizeof(value), "(%zu bytes)", strlen(v));
			else
				snprintf(value, sizeof(value), "\"%.40s%s\"", v,
					 strlen(v) > 40 ? "..." : "");
			if (s->type == XPI_SET_LIST) {
				ok = *v == '\0' || check_list(s, v, reason, sizeof(reason)) == 0;
			} else if ((long long)strlen(v) > s->max) {
				snprintf(reason, sizeof(reason), "longer than %lld bytes", s->max);
				ok = false;
			}
			break;
		}
		}
		if (!ok) {
			xpi_setting_accepted(s, accepted, sizeof(accepted));
			snprintf(why, n,
				 "xp_config_t.%s (%s) = %s is not accepted%s%s (accepted: %s)",
				 s->field, s->var, value, reason[0] != '\0' ? ": " : "", reason,
				 accepted);
			return -EINVAL;
		}
	}
	return 0;
}

bool xpi_setting_equal(const struct xpi_setting *s, const xp_config_t *a, const xp_config_t *b)
{
	switch (s->type) {
	case XPI_SET_MS:
	case XPI_SET_ENUM:
		return CFIELD(int_field, s, a) == CFIELD(int_field, s, b);
	case XPI_SET_SIZE:
		return CFIELD(size_field, s, a) == CFIELD(size_field, s, b);
	default: {
		const char *x = CFIELD(str_field, s, a), *y = CFIELD(str_field, s, b);
		return (x == NULL || y == NULL) ? x == y : strcmp(x, y) == 0;
	}
	}
}

void xpi_setting_format(const struct xpi_setting *s, const xp_config_t *cfg, char *out, size_t n)
{
	switch (s->type) {
	case XPI_SET_MS: {
		int v = CFIELD(int_field, s, cfg);
		if (v == 0 && s->special != NULL)
			snprintf(out, n, "0 (%s)", s->special);
		else
			snprintf(out, n, "%d", v);
		return;
	}
	case XPI_SET_SIZE: {
		size_t v = CFIELD(size_field, s, cfg);
		if (v == SIZE_MAX && s->special != NULL)
			snprintf(out, n, "%s", s->special);
		else
			xpi_format_size(v, out, n);
		return;
	}
	case XPI_SET_ENUM: {
		int v = CFIELD(int_field, s, cfg);
		snprintf(out, n, "%s", v >= 0 && v < count_names(s->names) ? s->names[v] : "?");
		return;
	}
	default: {
		const char *v = CFIELD(str_field, s, cfg);
		if (v == NULL || *v == '\0')
			snprintf(out, n, "(unset)");
		else if (s->offset == F(job_key))
			snprintf(out, n, "(set, %zu bytes)", strlen(v));
		else
			snprintf(out, n, "%s", v);
		return;
	}
	}
}

unsigned xpi_settings_debug_mask(const char *list)
{
	unsigned mask = 0;
	if (list == NULL)
		return 0;
	for (const char *p = list; *p != '\0';) {
		const char *comma = strchr(p, ',');
		size_t len = comma != NULL ? (size_t)(comma - p) : strlen(p);
		int i = find_name(debug_names, p, len);
		if (len == 3 && strncasecmp(p, "all", 3) == 0)
			mask = ~0u;
		else if (i >= 0)
			mask |= 1u << i;
		if (comma == NULL)
			break;
		p = comma + 1;
	}
	return mask;
}
