/* SPDX-License-Identifier: MIT */
/*
 * A bare DPDK ping-pong, the baseline xport's DPDK path is measured
 * against: the same Ethernet/IPv4/UDP frames (114 bytes of headers, as
 * xport's, then the payload), built and checked with DPDK's own helpers,
 * no xport code at all. Two processes, each started with its own EAL
 * arguments (a memif server and client, say); the client times round
 * trips.
 *
 *   dpdk-baseline server|client --size N --iters N -- EAL ARGS...
 *
 * Prints one JSON line (client): size, iters, the one-way latency (half
 * the round trip) median, p99 and average in microseconds.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_ip.h>
#include <rte_mbuf.h>
#include <rte_udp.h>

#define HDRS                                                                                       \
	(sizeof(struct rte_ether_hdr) + sizeof(struct rte_ipv4_hdr) + sizeof(struct rte_udp_hdr))
#define XPORT_HDR 72 /* counted as payload here, so frames match xport's */
#define WARM 100     /* round trips before the timed ones */

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void die(const char *what)
{
	fprintf(stderr, "dpdk-baseline: %s\n", what);
	exit(1);
}

/* A frame of @payload bytes from @src to @dst, checksums computed. */
static struct rte_mbuf *frame(struct rte_mempool *pool, const struct rte_ether_addr *src,
			      uint32_t sip, uint32_t dip, size_t payload)
{
	struct rte_mbuf *m = rte_pktmbuf_alloc(pool);
	if (m == NULL)
		return NULL;
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, (uint16_t)(HDRS + payload));
	struct rte_ether_hdr *eth = (struct rte_ether_hdr *)d;
	memset(&eth->dst_addr, 0xff, sizeof(eth->dst_addr)); /* point to point: broadcast */
	eth->src_addr = *src;
	eth->ether_type = rte_cpu_to_be_16(RTE_ETHER_TYPE_IPV4);
	struct rte_ipv4_hdr *ip = (struct rte_ipv4_hdr *)(eth + 1);
	memset(ip, 0, sizeof(*ip));
	ip->version_ihl = 0x45;
	ip->total_length = rte_cpu_to_be_16((uint16_t)(HDRS - sizeof(*eth) + payload));
	ip->fragment_offset = rte_cpu_to_be_16(RTE_IPV4_HDR_DF_FLAG);
	ip->time_to_live = 64;
	ip->next_proto_id = IPPROTO_UDP;
	ip->src_addr = rte_cpu_to_be_32(sip);
	ip->dst_addr = rte_cpu_to_be_32(dip);
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	udp->src_port = rte_cpu_to_be_16(4791);
	udp->dst_port = rte_cpu_to_be_16(4791);
	udp->dgram_len = rte_cpu_to_be_16((uint16_t)(sizeof(*udp) + payload));
	udp->dgram_cksum = 0;
	memset(udp + 1, 0x5a, payload);
	ip->hdr_checksum = rte_ipv4_cksum(ip);
	udp->dgram_cksum = rte_ipv4_udptcp_cksum(ip, udp);
	return m;
}

/* Whether @m is an intact frame of ours. Both checksums are summed with
 * their own fields in: an intact IPv4 header then sums to 0 inverted, and
 * UDP to 0xffff (rte_ipv4_udptcp_cksum turns 0 into 0xffff). */
static bool intact(struct rte_mbuf *m, size_t payload)
{
	if (m->data_len != HDRS + payload)
		return false;
	struct rte_ipv4_hdr *ip =
		rte_pktmbuf_mtod_offset(m, struct rte_ipv4_hdr *, sizeof(struct rte_ether_hdr));
	struct rte_udp_hdr *udp = (struct rte_udp_hdr *)(ip + 1);
	return rte_ipv4_cksum(ip) == 0 && rte_ipv4_udptcp_cksum(ip, udp) == 0xffff;
}

int main(int argc, char **argv)
{
	if (argc < 3 || (strcmp(argv[1], "server") != 0 && strcmp(argv[1], "client") != 0))
		die("usage: dpdk-baseline server|client [--size N] [--iters N] -- EAL ARGS...");
	bool client = strcmp(argv[1], "client") == 0;
	size_t payload = 64 + XPORT_HDR;
	int iters = 10000, i = 2;
	for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
		if (strcmp(argv[i], "--size") == 0 && i + 1 < argc)
			payload = (size_t)atoi(argv[++i]) + XPORT_HDR;
		else if (strcmp(argv[i], "--iters") == 0 && i + 1 < argc)
			iters = atoi(argv[++i]);
		else
			die("unknown option");
	}
	if (i == argc)
		die("no EAL arguments (after --)");
	argv[i] = argv[0];
	if (rte_eal_init(argc - i, argv + i) < 0)
		die("rte_eal_init failed");
	if (rte_eth_dev_count_avail() == 0)
		die("no port (did the vdev probe?)");
	struct rte_mempool *pool =
		rte_pktmbuf_pool_create("base", 4095, 256, 0, RTE_MBUF_DEFAULT_BUF_SIZE, 0);
	struct rte_eth_conf conf;
	memset(&conf, 0, sizeof(conf));
	if (pool == NULL || rte_eth_dev_configure(0, 1, 1, &conf) < 0 ||
	    rte_eth_rx_queue_setup(0, 0, 1024, 0, NULL, pool) < 0 ||
	    rte_eth_tx_queue_setup(0, 0, 1024, 0, NULL) < 0 || rte_eth_dev_start(0) < 0)
		die("setting the port up failed");
	struct rte_ether_addr mac;
	rte_eth_macaddr_get(0, &mac);
	double *rtt = calloc((size_t)iters, sizeof(double));
	struct rte_mbuf *pkts[32];
	/* The client's first frames may go before memif connects: until the
	 * first answer, it sends again every millisecond. */
	int done = 0, warm = 0, want = client ? iters : iters + WARM;
	double t0 = 0, last = 0;
	while (done < want) {
		if (client && (done == 0 && now_s() - last > 1e-3)) {
			struct rte_mbuf *m = frame(pool, &mac, 0x0a4f0001, 0x0a4f0002, payload);
			last = t0 = now_s();
			if (m != NULL && rte_eth_tx_burst(0, 0, &m, 1) != 1)
				rte_pktmbuf_free(m);
		}
		uint16_t n = rte_eth_rx_burst(0, 0, pkts, 32);
		for (uint16_t k = 0; k < n; k++) {
			bool ok = intact(pkts[k], payload);
			rte_pktmbuf_free(pkts[k]);
			if (!ok)
				continue;
			if (client && warm < WARM) {
				warm++; /* the first round trips warm caches and the link */
			} else if (client) {
				rtt[done++] = now_s() - t0;
			} else {
				done++;
			}
			if (client && done == iters)
				break;
			struct rte_mbuf *m = frame(pool, &mac, client ? 0x0a4f0001 : 0x0a4f0002,
						   client ? 0x0a4f0002 : 0x0a4f0001, payload);
			t0 = now_s();
			if (m != NULL && rte_eth_tx_burst(0, 0, &m, 1) != 1)
				rte_pktmbuf_free(m);
		}
	}
	if (client) {
		double sum = 0;
		for (int k = 0; k < iters; k++)
			sum += rtt[k];
		qsort(rtt, (size_t)iters, sizeof(double), cmp);
		printf("{\"test\":\"dpdk_baseline_lat\",\"size\":%zu,\"iters\":%d,"
		       "\"lat_us_p50\":%.3f,\"lat_us_p99\":%.3f,\"lat_us_avg\":%.3f}\n",
		       payload - XPORT_HDR, iters, rtt[iters / 2] / 2 * 1e6,
		       rtt[iters * 99 / 100] / 2 * 1e6, sum / iters / 2 * 1e6);
	}
	rte_eth_dev_stop(0);
	rte_eth_dev_close(0);
	rte_eal_cleanup();
	free(rtt);
	return 0;
}
