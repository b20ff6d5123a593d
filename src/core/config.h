/* SPDX-License-Identifier: MIT */
/* Resolved settings of a context: defaults, then XP_* variables, then the
 * program's xp_config_t, validated by one policy (settings.h). */
#ifndef XPI_CONFIG_H
#define XPI_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include "settings.h"
#include "xport/xport.h"

/* Shared memory: rendezvous payloads from this size are copied by
 * cross-memory attach, split between both processes (src/shm/shm_int.h
 * has the measurements). */
#define XPI_SHM_CMA_MIN_DEFAULT ((size_t)8 << 10)

struct xpi_config {
	int timeout_ms;
	size_t pool_max_bytes;
	size_t unexpected_max_bytes;
	size_t rndv_threshold;
	int hugepages;
	int thread_mode;
	int boot_timeout_ms; /* resolved: never 0 */
	bool has_job_key;
	char job_key[256];
	bool job_key_required;  /* XP_JOB_KEY_REQUIRED */
	char socket_ifname[16]; /* "" : unset */
	char transports[128];   /* "" : unset */
	size_t shm_cma_min;     /* SIZE_MAX: off */
	int tcp_zc;             /* enum xp_tcp_zc */
	int log_level;          /* enum xp_log_level */
	int allreduce_algo;     /* enum xp_allreduce_algo */
	size_t coll_segment;    /* 0: from the links */
	unsigned debug_mask;    /* xpi_settings_debug_mask */
	char debug[128];        /* as given, "" : unset */
	char host_id[64];       /* XP_HOST_ID, "" : unset */
	char rdma_device[64];   /* XP_RDMA_DEVICE, "" : unset */
	size_t rdma_rcache_bytes;
	int rdma_cm;                /* XP_RDMA_CM: 1 to connect through rdma_cm */
	size_t tcp_sockbuf;         /* XP_TCP_SOCKBUF: 0 auto, SIZE_MAX off */
	char dpdk_eal[1024];        /* XP_DPDK_EAL, "" : unset ({rank} not yet replaced) */
	char dpdk_ip[1024];         /* XP_DPDK_IP, "" : unset */
	size_t dpdk_port;           /* XP_DPDK_PORT: the ethdev port id */
	size_t dpdk_udp_port;       /* XP_DPDK_UDP_PORT */
	char dpdk_neighbours[1024]; /* XP_DPDK_NEIGHBOURS, "" : unset (ARP) */
	char dpdk_drop[64];         /* XP_DPDK_DROP, "" : unset; syntax unchecked here */
	int dpdk_peer_timeout_ms;   /* XP_DPDK_PEER_TIMEOUT_MS */
	bool dpdk_auth;             /* XP_DPDK_AUTH */
	int ep_max;                 /* XP_EP_MAX */
	/* What xport-info shows: every setting's value as given and where it
	 * came from, in the table's order. */
	xp_config_t given;
	unsigned char origin[XPI_SETTINGS_MAX];
};

/* The default of timeout_ms (XP_TIMEOUT_MS). */
#define XPI_DEFAULT_TIMEOUT_MS 30000

/* Parses a size with an optional k/m/g suffix (powers of 1024). Returns 0,
 * -EINVAL (not a size) or -ERANGE (does not fit a size_t). */
int xpi_parse_size(const char *s, size_t *out);

/* Writes @v the shortest way with a suffix ("64m", "4097"). */
void xpi_format_size(size_t v, char *out, size_t n);

/* Validates the environment and a public config (NULL: defaults and
 * environment) and resolves them into @out; applies the log level and
 * debug subsystems to the process. Returns 0 or -EINVAL, logged (info) and
 * made the thread's error detail, naming the variable or field, the value
 * and what is accepted. */
int xpi_config_resolve(const xp_config_t *in, struct xpi_config *out);

#endif
