/* SPDX-License-Identifier: MIT */
/* One DPDK port speaking UDP/IPv4 (dpdk_port.h). The only file built with
 * DPDK's compiler flags (src/meson.build). */
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "dpdk_auth.h"
#include "dpdk_port.h"

#define RX_BURST 32
#define NB_DESC 1024
#define POOL_MBUFS 4095 /* a power of two minus one: the mempool's best size */
#define POOL_CACHE 256
#define MAX_NEIGH 64
#define ARP_RETRY_NS (100 * 1000000LL)
#define EAL_MAX_ARGS 64

struct neighbour {
	uint32_t ip;
	uint8_t mac[6];
	bool known, fixed;
	int64_t asked_ns; /* when we last asked (ARP request) */
};

struct xpi_dpdk_port {
	uint16_t port_id;
	struct xpi_udp_addr me;
	struct rte_mempool *pool;
	uint16_t ip_id;
	struct neighbour neigh[MAX_NEIGH];
	unsigned nneigh;
	bool tx_csum, rx_csum; /* the device computes / verifies IPv4 and UDP checksums */
	bool zc;               /* it takes chained frames and virtual addresses */
	bool arp_neighbours_only;
	struct xpi_dpdk_stats st;
};

/* The process's one EAL: who started it and how many ports use it. */
static pthread_mutex_t eal_lock = PTHREAD_MUTEX_INITIALIZER;
static int eal_users;
static bool eal_ours;    /* rte_eal_init was ours: cleaned up with the last port */
static bool eal_cleaned; /* DPDK cannot start an EAL twice in one process */
static char eal_rundir[512];

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int fail(char *why, size_t n, int rc, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail(char *why, size_t n, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, n, fmt, ap);
	va_end(ap);
	return rc;
}

/* DPDK reports with a negative errno or with -1 and rte_errno. */
static int dpdk_err(int rc)
{
	if (rc < -1)
		return rc;
	return rte_errno > 0 ? -rte_errno : -EIO;
}

/* Starts the EAL from @args unless it is up already. Under eal_lock. */
static int eal_start(const char *args, char *why, size_t n)
{
	if (eal_users > 0)
		return 0;
	if (eal_cleaned)
		return fail(why, n, -EALREADY,
			    "the EAL of this process was cleaned up, and DPDK cannot start one "
			    "again");
	char buf[1024];
	char *argv[EAL_MAX_ARGS + 1];
	int argc = 0;
	argv[argc++] = (char *)"xport";
	if (args != NULL) {
		if (strlen(args) >= sizeof(buf))
			return fail(why, n, -EINVAL, "XP_DPDK_EAL is longer than %zu bytes",
				    sizeof(buf) - 1);
		strcpy(buf, args);
		for (char *save, *tok = strtok_r(buf, " \t", &save); tok != NULL;
		     tok = strtok_r(NULL, " \t", &save)) {
			if (argc == EAL_MAX_ARGS)
				return fail(why, n, -EINVAL, "XP_DPDK_EAL has more than %d words",
					    EAL_MAX_ARGS - 1);
			argv[argc++] = tok;
		}
	}
	/* Hugepage files are unlinked as soon as they are mapped, unless the
	 * arguments say how to handle them: a process that ends, however it
	 * ends, leaves none of ours in the hugetlbfs mount (rte_eal_cleanup
	 * unmaps them but does not remove them). */
	bool huge_said = false;
	for (int i = 1; i < argc; i++)
		huge_said |= strcmp(argv[i], "--no-huge") == 0 ||
			     strcmp(argv[i], "--in-memory") == 0 ||
			     strncmp(argv[i], "--huge-unlink", 13) == 0;
	if (!huge_said) {
		if (argc == EAL_MAX_ARGS)
			return fail(why, n, -EINVAL, "XP_DPDK_EAL has more than %d words",
				    EAL_MAX_ARGS - 2);
		argv[argc++] = (char *)"--huge-unlink";
	}
	argv[argc] = NULL;
	int rc = rte_eal_init(argc, argv);
	if (rc < 0 && rte_errno == EALREADY) {
		eal_ours = false; /* the application's: use it, never clean it up */
		return 0;
	}
	if (rc < 0)
		return fail(why, n, dpdk_err(rc), "rte_eal_init(\"%s\") failed: %s",
			    args != NULL ? args : "", rte_strerror(rte_errno));
	eal_ours = true;
	snprintf(eal_rundir, sizeof(eal_rundir), "%s", rte_eal_get_runtime_dir());
	return 0;
}

/* Removes the EAL's runtime directory, which rte_eal_cleanup leaves: its
 * files (config, sockets, memory maps) and then itself. */
static void remove_rundir(const char *dir)
{
	DIR *d = opendir(dir);
	if (d == NULL)
		return;
	for (struct dirent *e; (e = readdir(d)) != NULL;) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		char path[1024];
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

/* Under eal_lock: the last user of our EAL cleans it up. */
static void eal_stop(void)
{
	if (--eal_users > 0 || !eal_ours)
		return;
	rte_eal_cleanup();
	eal_cleaned = true;
	remove_rundir(eal_rundir);
	eal_rundir[0] = '\0';
}

const char *xpi_dpdk_runtime_dir(void)
{
	return eal_users > 0 ? rte_eal_get_runtime_dir() : "";
}

static int parse_mac(const char *s, uint8_t mac[6])
{
	unsigned v[6];
	char end;
	if (sscanf(s, "%x:%x:%x:%x:%x:%x%c", &v[0], &v[1], &v[2], &v[3], &v[4], &v[5], &end) != 6)
		return -EINVAL;
	for (int i = 0; i < 6; i++) {
		if (v[i] > 0xff)
			return -EINVAL;
		mac[i] = (uint8_t)v[i];
	}
	return 0;
}

static int parse_ip(const char *s, uint32_t *ip)
{
	unsigned a, b, c, d;
	char end;
	if (sscanf(s, "%u.%u.%u.%u%c", &a, &b, &c, &d, &end) != 4 || a > 255 || b > 255 ||
	    c > 255 || d > 255)
		return -EINVAL;
	*ip = a << 24 | b << 16 | c << 8 | d;
	return 0;
}

static struct neighbour *neigh_find(struct xpi_dpdk_port *p, uint32_t ip)
{
	for (unsigned i = 0; i < p->nneigh; i++)
		if (p->neigh[i].ip == ip)
			return &p->neigh[i];
	return NULL;
}

static struct neighbour *neigh_add(struct xpi_dpdk_port *p, uint32_t ip)
{
	struct neighbour *e = neigh_find(p, ip);
	if (e != NULL || p->nneigh == MAX_NEIGH)
		return e;
	e = &p->neigh[p->nneigh++];
	*e = (struct neighbour){ .ip = ip };
	return e;
}

/* "ip=mac,ip=mac" into fixed entries. */
static int parse_neighbours(struct xpi_dpdk_port *p, const char *text, char *why, size_t n)
{
	char buf[1024];
	if (strlen(text) >= sizeof(buf))
		return fail(why, n, -EINVAL, "the neighbour table is longer than %zu bytes",
			    sizeof(buf) - 1);
	strcpy(buf, text);
	for (char *save, *tok = strtok_r(buf, ",", &save); tok != NULL;
	     tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		uint32_t ip;
		uint8_t mac[6];
		if (eq == NULL || (*eq = '\0', parse_ip(tok, &ip)) < 0 ||
		    parse_mac(eq + 1, mac) < 0)
			return fail(why, n, -EINVAL,
				    "neighbour \"%s\" is not IPV4=MAC (10.0.0.2=02:00:00:00:00:02)",
				    tok);
		struct neighbour *e = neigh_add(p, ip);
		if (e == NULL)
			return fail(why, n, -EINVAL, "more than %d neighbours", MAX_NEIGH);
		memcpy(e->mac, mac, 6);
		e->known = e->fixed = true;
	}
	return 0;
}

static int port_setup(struct xpi_dpdk_port *p, char *why, size_t n)
{
	uint16_t id = p->port_id;
	if (!rte_eth_dev_is_valid_port(id))
		return fail(why, n, -ENODEV, "no DPDK port %u (%u available; did the vdev probe?)",
			    id, rte_eth_dev_count_avail());
	int sock = rte_eth_dev_socket_id(id);
	if (sock < 0)
		sock = (int)rte_socket_id();
	char name[RTE_MEMPOOL_NAMESIZE];
	snprintf(name, sizeof(name), "xp_mbufs_%u", id);
	p->pool = rte_pktmbuf_pool_create(name, POOL_MBUFS, POOL_CACHE, 0,
					  RTE_MBUF_DEFAULT_BUF_SIZE, sock);
	if (p->pool == NULL)
		return fail(why, n, dpdk_err(-1), "rte_pktmbuf_pool_create: %s",
			    rte_strerror(rte_errno));
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	/* Checksums in the device where it can do both, in software where not
	 * (memif and af_packet cannot; tap and most NICs can). */
	struct rte_eth_dev_info info;
	if (rte_eth_dev_info_get(id, &info) == 0) {
		const uint64_t tx = RTE_ETH_TX_OFFLOAD_IPV4_CKSUM | RTE_ETH_TX_OFFLOAD_UDP_CKSUM;
		const uint64_t rx = RTE_ETH_RX_OFFLOAD_IPV4_CKSUM | RTE_ETH_RX_OFFLOAD_UDP_CKSUM;
		p->tx_csum = (info.tx_offload_capa & tx) == tx;
		p->rx_csum = (info.rx_offload_capa & rx) == rx;
		conf.txmode.offloads = p->tx_csum ? tx : 0;
		conf.rxmode.offloads = p->rx_csum ? rx : 0;
		p->zc = (info.tx_offload_capa & RTE_ETH_TX_OFFLOAD_MULTI_SEGS) != 0 &&
			rte_eal_iova_mode() == RTE_IOVA_VA;
		if (p->zc)
			conf.txmode.offloads |= RTE_ETH_TX_OFFLOAD_MULTI_SEGS;
	}
	int rc = rte_eth_dev_configure(id, 1, 1, &conf);
	if (rc < 0)
		return fail(why, n, dpdk_err(rc), "rte_eth_dev_configure(port %u): %s", id,
			    rte_strerror(-rc));
	uint16_t nrx = NB_DESC, ntx = NB_DESC;
	rc = rte_eth_dev_adjust_nb_rx_tx_desc(id, &nrx, &ntx);
	if (rc == 0)
		rc = rte_eth_rx_queue_setup(id, 0, nrx, (unsigned)sock, NULL, p->pool);
	if (rc == 0)
		rc = rte_eth_tx_queue_setup(id, 0, ntx, (unsigned)sock, NULL);
	if (rc < 0)
		return fail(why, n, dpdk_err(rc), "setting up port %u's queues: %s", id,
			    rte_strerror(-rc));
	rc = rte_eth_dev_start(id);
	if (rc < 0)
		return fail(why, n, dpdk_err(rc), "rte_eth_dev_start(port %u): %s", id,
			    rte_strerror(-rc));
	struct rte_ether_addr mac;
	rc = rte_eth_macaddr_get(id, &mac);
	if (rc < 0) {
		rte_eth_dev_stop(id);
		return fail(why, n, dpdk_err(rc), "rte_eth_macaddr_get(port %u): %s", id,
			    rte_strerror(-rc));
	}
	memcpy(p->me.mac, mac.addr_bytes, 6);
	return 0;
}

int xpi_dpdk_port_open(const struct xpi_dpdk_conf *c, struct xpi_dpdk_port **out, char *why,
		       size_t n)
{
	struct xpi_dpdk_port *p = calloc(1, sizeof(*p));
	if (p == NULL)
		return fail(why, n, -ENOMEM, "no memory for the port");
	p->port_id = c->port_id;
	p->me.ip = c->ip;
	p->me.port = c->udp_port;
	p->arp_neighbours_only = c->arp_neighbours_only;
	int rc = c->neighbours != NULL ? parse_neighbours(p, c->neighbours, why, n) : 0;
	if (rc < 0) {
		free(p);
		return rc;
	}
	pthread_mutex_lock(&eal_lock);
	rc = eal_start(c->eal != NULL && c->eal[0] != '\0' ? c->eal : NULL, why, n);
	if (rc == 0) {
		eal_users++;
		rc = port_setup(p, why, n);
		if (rc < 0) {
			if (p->pool != NULL)
				rte_mempool_free(p->pool);
			eal_stop();
		}
	}
	pthread_mutex_unlock(&eal_lock);
	if (rc < 0) {
		free(p);
		return rc;
	}
	*out = p;
	return 0;
}

void xpi_dpdk_port_close(struct xpi_dpdk_port *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&eal_lock);
	rte_eth_dev_stop(p->port_id);
	rte_eth_dev_close(p->port_id);
	rte_mempool_free(p->pool);
	eal_stop();
	pthread_mutex_unlock(&eal_lock);
	free(p);
}

int xpi_dpdk_port_wait_link(struct xpi_dpdk_port *p, int timeout_ms)
{
	int64_t start = now_ns(), restarted = start;
	for (;;) {
		struct rte_eth_link link;
		if (rte_eth_link_get_nowait(p->port_id, &link) == 0 &&
		    link.link_status == RTE_ETH_LINK_UP)
			return 0;
		int64_t now = now_ns();
		if (now - start >= (int64_t)timeout_ms * 1000000)
			return -ETIMEDOUT;
		/* A memif client that found no server yet does not try again
		 * by itself: a restart does. Not sooner than a second: one
		 * that interrupts a handshake under way may crash the server's
		 * driver. */
		if (now - restarted >= 1000 * 1000000LL) {
			rte_eth_dev_stop(p->port_id);
			(void)rte_eth_dev_start(p->port_id);
			restarted = now;
		}
		usleep(1000);
	}
}

void xpi_dpdk_port_mac(const struct xpi_dpdk_port *p, uint8_t mac[6])
{
	memcpy(mac, p->me.mac, 6);
}

void xpi_dpdk_stats(const struct xpi_dpdk_port *p, struct xpi_dpdk_stats *st)
{
	*st = p->st;
	st->tx_csum_offload = p->tx_csum;
	st->tx_zc_ok = p->zc;
	st->rx_csum_offload = p->rx_csum;
}

/* Transmits one frame of @len bytes that @build writes; 0 or -EAGAIN. */
static int tx_frame(struct xpi_dpdk_port *p, struct rte_mbuf *m)
{
	if (rte_eth_tx_burst(p->port_id, 0, &m, 1) == 1) {
		p->st.tx_frames++;
		return 0;
	}
	rte_pktmbuf_free(m);
	p->st.tx_full++;
	return -EAGAIN;
}

static int send_arp(struct xpi_dpdk_port *p, uint16_t op, const uint8_t tha[6], uint32_t tpa)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	if (m == NULL)
		return -EAGAIN;
	struct xpi_arp a = { .op = op, .spa = p->me.ip, .tpa = tpa };
	memcpy(a.sha, p->me.mac, 6);
	if (tha != NULL)
		memcpy(a.tha, tha, 6);
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, 60);
	if (d == NULL || xpi_arp_build(d, 60, &a) < 0) {
		rte_pktmbuf_free(m);
		return -EMSGSIZE;
	}
	return tx_frame(p, m);
}

int xpi_dpdk_port_allow(struct xpi_dpdk_port *p, uint32_t ip)
{
	return neigh_add(p, ip) != NULL ? 0 : -ENOSPC;
}

int xpi_dpdk_send(struct xpi_dpdk_port *p, uint32_t ip, uint16_t port,
		  const struct xpi_dgram_hdr *h, const void *payload, size_t len,
		  const struct xpi_dgram_key *key)
{
	struct neighbour *e = neigh_find(p, ip);
	if (e == NULL || !e->known) {
		e = neigh_add(p, ip);
		int64_t now = now_ns();
		if (e != NULL && (e->asked_ns == 0 || now - e->asked_ns >= ARP_RETRY_NS)) {
			e->asked_ns = now;
			p->st.arp_asked++;
			(void)send_arp(p, XPI_ARP_REQUEST, NULL, ip);
		}
		return -EAGAIN;
	}
	size_t frame = XPI_DGRAM_OVERHEAD + len;
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	if (m == NULL)
		return -EAGAIN;
	if (frame > rte_pktmbuf_tailroom(m)) {
		rte_pktmbuf_free(m);
		return -EMSGSIZE;
	}
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)frame);
	struct xpi_udp_addr to = { .ip = ip, .port = port };
	memcpy(to.mac, e->mac, 6);
	unsigned flags = p->tx_csum  ? XPI_BUILD_CSUM_OFFLOAD :
			 key != NULL ? XPI_BUILD_NO_UDP_CSUM :
				       0;
	int rc = xpi_dgram_build_flags(d, frame, &p->me, &to, p->ip_id++, h, payload, len, flags);
	if (rc < 0) {
		rte_pktmbuf_free(m);
		return rc;
	}
	if (key != NULL)
		xpi_dgram_seal(key, xpi_dgram_of_frame(d), XPI_DGRAM_HDR_LEN + len);
	if (p->tx_csum) {
		m->ol_flags |=
			RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;
		m->l2_len = XPI_ETH_HDR_LEN;
		m->l3_len = XPI_IPV4_HDR_LEN;
	}
	return tx_frame(p, m);
}

struct zc_impl {
	struct rte_mbuf_ext_shared_info sh;
	void (*done)(void *arg);
	void *arg;
};
_Static_assert(sizeof(struct zc_impl) <= sizeof(struct xpi_dpdk_zc), "xpi_dpdk_zc too small");

bool xpi_dpdk_zc_ok(const struct xpi_dpdk_port *p)
{
	return p->zc;
}

/* The device let go of the last piece (DPDK's free callback), or the
 * caller dropped its reference last. */
static void zc_free_cb(void *addr, void *opaque)
{
	(void)addr;
	struct zc_impl *z = opaque;
	z->done(z->arg);
}

void xpi_dpdk_zc_init(struct xpi_dpdk_zc *zc, void (*done)(void *arg), void *arg)
{
	struct zc_impl *z = (struct zc_impl *)zc;
	z->sh.free_cb = zc_free_cb;
	z->sh.fcb_opaque = z;
	rte_mbuf_ext_refcnt_set(&z->sh, 1); /* the caller's */
	z->done = done;
	z->arg = arg;
}

void xpi_dpdk_zc_put(struct xpi_dpdk_zc *zc)
{
	struct zc_impl *z = (struct zc_impl *)zc;
	if (rte_mbuf_ext_refcnt_update(&z->sh, -1) == 0)
		z->done(z->arg);
}

int xpi_dpdk_send_zc(struct xpi_dpdk_port *p, uint32_t ip, uint16_t port,
		     const struct xpi_dgram_hdr *h, const void *payload, size_t len,
		     struct xpi_dpdk_zc *zc)
{
	struct neighbour *e = neigh_find(p, ip);
	if (!p->zc || e == NULL || !e->known || len == 0 || len > UINT16_MAX)
		return xpi_dpdk_send(p, ip, port, h, payload, len, NULL);
	struct zc_impl *z = (struct zc_impl *)zc;
	struct rte_mbuf *m = rte_pktmbuf_alloc(p->pool);
	struct rte_mbuf *body = m != NULL ? rte_pktmbuf_alloc(p->pool) : NULL;
	if (body == NULL) {
		rte_pktmbuf_free(m);
		return -EAGAIN;
	}
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, XPI_DGRAM_OVERHEAD);
	struct xpi_udp_addr to = { .ip = ip, .port = port };
	memcpy(to.mac, e->mac, 6);
	unsigned flags = XPI_BUILD_HEADERS_ONLY | (p->tx_csum ? XPI_BUILD_CSUM_OFFLOAD : 0);
	int rc = d == NULL ? -EMSGSIZE :
			     xpi_dgram_build_flags(d, XPI_DGRAM_OVERHEAD, &p->me, &to, p->ip_id++,
						   h, payload, len, flags);
	if (rc < 0) {
		rte_pktmbuf_free(m);
		rte_pktmbuf_free(body);
		return rc;
	}
	/* The device's reference, dropped when it frees the buffer. */
	rte_mbuf_ext_refcnt_update(&z->sh, 1);
	rte_pktmbuf_attach_extbuf(body, (void *)(uintptr_t)payload, (rte_iova_t)(uintptr_t)payload,
				  (uint16_t)len, &z->sh);
	body->data_len = (uint16_t)len;
	body->pkt_len = (uint32_t)len;
	if (rte_pktmbuf_chain(m, body) != 0) {
		rte_pktmbuf_free(m);
		rte_pktmbuf_free(body); /* drops the reference taken above */
		return -EAGAIN;
	}
	if (p->tx_csum) {
		m->ol_flags |=
			RTE_MBUF_F_TX_IPV4 | RTE_MBUF_F_TX_IP_CKSUM | RTE_MBUF_F_TX_UDP_CKSUM;
		m->l2_len = XPI_ETH_HDR_LEN;
		m->l3_len = XPI_IPV4_HDR_LEN;
	}
	p->st.tx_zc++;
	return tx_frame(p, m);
}

/* Learns @ip at @mac (not over a fixed entry); answers a request for us.
 * Under arp_neighbours_only, only for neighbours: a host that is not one
 * neither learns our address from us nor has us send to it (issue 24). */
static void on_arp(struct xpi_dpdk_port *p, const struct xpi_arp *a)
{
	if (p->arp_neighbours_only && neigh_find(p, a->spa) == NULL) {
		p->st.arp_refused++;
		return;
	}
	struct neighbour *e =
		a->tpa == p->me.ip || neigh_find(p, a->spa) != NULL ? neigh_add(p, a->spa) : NULL;
	if (e != NULL && !e->fixed && a->spa != 0) {
		memcpy(e->mac, a->sha, 6);
		if (!e->known)
			p->st.arp_learned++;
		e->known = true;
	}
	if (a->op == XPI_ARP_REQUEST && a->tpa == p->me.ip) {
		p->st.arp_answered++;
		(void)send_arp(p, XPI_ARP_REPLY, a->sha, a->spa);
	}
}

int xpi_dpdk_poll(struct xpi_dpdk_port *p, uint32_t nranks,
		  void (*fn)(void *arg, const struct xpi_rx_frame *f), void *arg)
{
	struct rte_mbuf *pkts[RX_BURST];
	uint16_t got = rte_eth_rx_burst(p->port_id, 0, pkts, RX_BURST);
	int handed = 0;
	for (uint16_t i = 0; i < got; i++) {
		struct rte_mbuf *m = pkts[i];
		p->st.rx_frames++;
		struct xpi_rx_frame f;
		const char *why = "a frame in more than one buffer";
		/* Checksums the device says are good are not summed again; one
		 * it says is bad, or did not look at, is checked in software. */
		unsigned flags = 0;
		if (p->rx_csum &&
		    (m->ol_flags & RTE_MBUF_F_RX_IP_CKSUM_MASK) == RTE_MBUF_F_RX_IP_CKSUM_GOOD &&
		    (m->ol_flags & RTE_MBUF_F_RX_L4_CKSUM_MASK) == RTE_MBUF_F_RX_L4_CKSUM_GOOD) {
			flags = XPI_PARSE_CSUM_CHECKED;
			p->st.rx_csum_offloaded++;
		}
		int rc = m->nb_segs == 1 ?
				 xpi_rx_frame_parse_flags(rte_pktmbuf_mtod(m, const uint8_t *),
							  m->data_len, nranks, flags, &f, &why) :
				 -EPROTO;
		if (rc == -EPROTO) {
			p->st.rx_bad++;
			p->st.rx_bad_why = why;
		} else if (rc < 0 || (f.kind == XPI_RX_UDP) ||
			   (f.kind == XPI_RX_DGRAM &&
			    (f.to.ip != p->me.ip || f.to.port != p->me.port))) {
			p->st.rx_other++;
		} else if (f.kind == XPI_RX_ARP) {
			on_arp(p, &f.arp);
		} else {
			p->st.rx_dgrams++;
			fn(arg, &f);
			handed++;
		}
		rte_pktmbuf_free(m);
	}
	return handed;
}
