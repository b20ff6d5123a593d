/* SPDX-License-Identifier: MIT */
/* xp_config_init and the resolution of a context's settings; the table and
 * its policy are settings.c's. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "compiler.h"
#include "config.h"
#include "log.h"
#include "settings.h"

XPI_EXPORT void xp_config_init(xp_config_t *cfg)
{
	if (cfg == NULL)
		return;
	/* A bad variable leaves its default; xpi_config_resolve reports it. */
	(void)xpi_settings_from_env(cfg, NULL, NULL, 0);
}

static void copy_text(char *dst, size_t cap, const char *src)
{
	snprintf(dst, cap, "%s", src != NULL ? src : "");
}

/* At info: every setting that is not its default, and where it came from
 * (what xport-info shows for the environment, here with the program's
 * own config too). */
static void log_settings(const struct xpi_config *c, const struct xpi_setting *table, size_t count)
{
	if (!xpi_log_enabled(XPI_LOG_INFO))
		return;
	char line[900] = "";
	size_t used = 0;
	for (size_t i = 0; i < count && used < sizeof(line); i++) {
		if (c->origin[i] == XPI_ORIGIN_DEFAULT)
			continue;
		char value[128];
		xpi_setting_format(&table[i], &c->given, value, sizeof(value));
		used += (size_t)snprintf(line + used, sizeof(line) - used, "%s%s=%s (%s)",
					 used > 0 ? ", " : "", table[i].var, value,
					 xpi_origin_name(c->origin[i]));
	}
	xpi_log(XPI_LOG_INFO, "settings: %s", used > 0 ? line : "all defaults");
}

int xpi_config_resolve(const xp_config_t *in, struct xpi_config *out)
{
	char why[512];
	xp_config_t env_cfg, cfg;
	unsigned char origin[XPI_SETTINGS_MAX];
	if (xpi_settings_from_env(&env_cfg, origin, why, sizeof(why)) < 0) {
		xpi_log_detail(XPI_LOG_INFO, "%s", why);
		return -EINVAL;
	}
	cfg = env_cfg;
	if (in != NULL) {
		/* A program built against a shorter struct gets the defaults and
		 * environment for what it lacks. */
		if (in->struct_size < offsetof(xp_config_t, thread_mode) + sizeof(int)) {
			xpi_log_detail(XPI_LOG_INFO,
				       "xp_config_t.struct_size = %zu: not set by xp_config_init "
				       "(want at least %zu, this library's is %zu)",
				       in->struct_size,
				       offsetof(xp_config_t, thread_mode) + sizeof(int),
				       sizeof(xp_config_t));
			return -EINVAL;
		}
		size_t n = in->struct_size < sizeof(cfg) ? in->struct_size : sizeof(cfg);
		memcpy(&cfg, in, n);
		cfg.struct_size = sizeof(cfg);
	}
	if (xpi_settings_check(&cfg, why, sizeof(why)) < 0) {
		xpi_log_detail(XPI_LOG_INFO, "%s", why);
		return -EINVAL;
	}
	size_t count;
	const struct xpi_setting *table = xpi_settings(&count);
	memset(out, 0, sizeof(*out));
	for (size_t i = 0; i < count; i++)
		out->origin[i] = xpi_setting_equal(&table[i], &cfg, &env_cfg) ? origin[i] :
										XPI_ORIGIN_CONFIG;
	out->timeout_ms = cfg.timeout_ms;
	out->pool_max_bytes = cfg.pool_max_bytes;
	out->unexpected_max_bytes = cfg.unexpected_max_bytes;
	out->rndv_threshold = cfg.rndv_threshold;
	out->hugepages = cfg.hugepages;
	out->thread_mode = cfg.thread_mode;
	out->boot_timeout_ms = cfg.boot_timeout_ms != 0 ? cfg.boot_timeout_ms : cfg.timeout_ms;
	out->has_job_key = cfg.job_key != NULL;
	copy_text(out->job_key, sizeof(out->job_key), cfg.job_key);
	out->job_key_required = cfg.job_key_required != 0;
	copy_text(out->socket_ifname, sizeof(out->socket_ifname), cfg.socket_ifname);
	copy_text(out->transports, sizeof(out->transports), cfg.transports);
	out->shm_cma_min = cfg.shm_cma_min;
	out->tcp_zc = cfg.tcp_zc;
	out->log_level = cfg.log_level;
	out->allreduce_algo = cfg.allreduce_algo;
	out->coll_segment = cfg.coll_segment;
	out->debug_mask = xpi_settings_debug_mask(cfg.debug);
	copy_text(out->debug, sizeof(out->debug), cfg.debug);
	copy_text(out->host_id, sizeof(out->host_id), cfg.host_id);
	copy_text(out->rdma_device, sizeof(out->rdma_device), cfg.rdma_device);
	out->rdma_rcache_bytes = cfg.rdma_rcache_bytes;
	out->rdma_cm = cfg.rdma_cm;
	out->tcp_sockbuf = cfg.tcp_sockbuf;
	copy_text(out->dpdk_eal, sizeof(out->dpdk_eal), cfg.dpdk_eal);
	copy_text(out->dpdk_ip, sizeof(out->dpdk_ip), cfg.dpdk_ip);
	out->dpdk_port = cfg.dpdk_port;
	out->dpdk_udp_port = cfg.dpdk_udp_port;
	copy_text(out->dpdk_neighbours, sizeof(out->dpdk_neighbours), cfg.dpdk_neighbours);
	copy_text(out->dpdk_drop, sizeof(out->dpdk_drop), cfg.dpdk_drop);
	out->dpdk_peer_timeout_ms = cfg.dpdk_peer_timeout_ms;
	out->dpdk_auth = cfg.dpdk_auth != 0;
	out->ep_max = (int)cfg.ep_max;
	/* The strings of the given config need not outlive this call. */
	out->given = cfg;
	out->given.job_key = out->has_job_key ? out->job_key : NULL;
	out->given.socket_ifname = cfg.socket_ifname != NULL ? out->socket_ifname : NULL;
	out->given.transports = cfg.transports != NULL ? out->transports : NULL;
	out->given.debug = cfg.debug != NULL ? out->debug : NULL;
	out->given.host_id = cfg.host_id != NULL ? out->host_id : NULL;
	out->given.rdma_device = cfg.rdma_device != NULL ? out->rdma_device : NULL;
	out->given.dpdk_eal = cfg.dpdk_eal != NULL ? out->dpdk_eal : NULL;
	out->given.dpdk_ip = cfg.dpdk_ip != NULL ? out->dpdk_ip : NULL;
	out->given.dpdk_neighbours = cfg.dpdk_neighbours != NULL ? out->dpdk_neighbours : NULL;
	out->given.dpdk_drop = cfg.dpdk_drop != NULL ? out->dpdk_drop : NULL;
	xpi_log_configure(out->log_level, out->debug_mask);
	log_settings(out, table, count);
	return 0;
}
