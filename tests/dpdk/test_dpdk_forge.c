/* SPDX-License-Identifier: MIT */
/*
 * A stranger on the segment (issue 24, item 3): a host with no job key,
 * on the bridge the ranks' ports share, that watches their datagrams and
 * forges its own from what it saw, with every field in clear right (IP
 * addresses, UDP ports, ranks, epochs, sequence numbers) and the MAC wrong
 * or missing. tests/dpdk/forge.sh runs it in a third network namespace
 * while a job streams over the bridge, and checks that the job delivered
 * every message intact, failed no pair, and counted what it dropped.
 *
 *   test_dpdk_forge IFACE SECONDS
 *
 * For each of the first datagrams it sees between the two ranks (the bridge
 * floods: its ageing time is 0), it sends, each as a raw Ethernet frame:
 *   data     the datagram with the next few psns and its last payload byte
 *            changed, tag zero (no MAC) or random (a wrong one)
 *   ack      ACKs in the datagram's sender's name to its receiver,
 *            acknowledging far past what the receiver sent (which failed
 *            the pair before authentication) and a few packets ahead
 *            with every SACK bit set (which released packets never
 *            delivered)
 *   replay   the datagram itself, again, MAC and all
 * and once an ARP request from an address of its own for each rank's.
 * Knows nothing of the key; reads and writes the header at the offsets
 * docs/DPDK-WIRE.md gives, which versions 1 and 2 share, so that it can be
 * run against a build without authentication too (it then breaks the job).
 * Prints what it sent and exits after SECONDS or on SIGTERM: 0 if it saw
 * and forged something, 1 if not.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/if_packet.h>
#include <net/ethernet.h>
#include <net/if.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/be.h"
#include "dpdk/udp_wire.h"

#define FORGE_FIRST 300 /* datagrams seen that it forges from */

static volatile sig_atomic_t stop;
static int fd, ifindex;
static unsigned long n_seen, n_data, n_ack, n_replay, n_arp;

static void on_term(int sig)
{
	(void)sig;
	stop = 1;
}

static void send_frame(const uint8_t *f, size_t len)
{
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_ifindex = ifindex, .sll_halen = 6 };
	memcpy(to.sll_addr, f, 6);
	if (sendto(fd, f, len, 0, (struct sockaddr *)&to, sizeof(to)) < 0)
		perror("test_dpdk_forge: sendto");
}

/* Sets the IPv4 header's lengths and checksum, UDP's length and no
 * checksum, for a UDP payload of @n bytes in frame @f. */
static size_t finish(uint8_t *f, size_t n)
{
	uint8_t *ip = f + XPI_ETH_HDR_LEN, *udp = ip + XPI_IPV4_HDR_LEN;
	put_be16(ip + 2, (uint16_t)(XPI_IPV4_HDR_LEN + XPI_UDP_HDR_LEN + n));
	put_be16(ip + 10, 0);
	put_be16(ip + 10, (uint16_t)~xpi_csum_fold(xpi_csum_add(0, ip, XPI_IPV4_HDR_LEN)));
	put_be16(udp + 4, (uint16_t)(XPI_UDP_HDR_LEN + n));
	put_be16(udp + 6, 0);
	return XPI_ETH_HDR_LEN + XPI_IPV4_HDR_LEN + XPI_UDP_HDR_LEN + n;
}

static void set_tag(uint8_t *d, size_t hdr_len, int how)
{
	if (hdr_len < XPI_DGRAM_TAG_OFF + XPI_DGRAM_TAG_LEN)
		return; /* version 1: there is none */
	for (unsigned i = 0; i < XPI_DGRAM_TAG_LEN; i++)
		d[XPI_DGRAM_TAG_OFF + i] = how == 0 ? 0 : (uint8_t)rand();
}

/* The datagram @d (@n bytes, header @hl) in frame @f, forged every way. */
static void forge(const uint8_t *f, size_t len, const uint8_t *d, size_t n, size_t hl)
{
	uint8_t g[2048];
	size_t off = (size_t)(d - f);
	if (len > sizeof(g))
		return;
	uint32_t psn = get_be32(d + 16), ack = get_be32(d + 20);
	/* DATA, the next psns, changed, without a MAC or with a wrong one. */
	if (d[2] == XPI_DGRAM_DATA && n > hl) {
		for (uint32_t k = 1; k <= 4; k++) {
			memcpy(g, f, len);
			put_be32(g + off + 16, psn + k);
			g[off + n - 1] ^= 0x5a;
			set_tag(g + off, hl, (int)(k & 1));
			send_frame(g, finish(g, n));
			n_data++;
		}
	}
	/* ACKs in the same name (the sender's addresses, rank and epoch),
	 * telling the receiver its own packets arrived: far past what it
	 * sent, and a few ahead with every SACK bit set. */
	memcpy(g, f, off + hl);
	uint8_t *h = g + off;
	h[2] = XPI_DGRAM_ACK;
	put_be32(h + 16, 0);
	put_be64(h + 24, ~0ull);    /* every SACK bit */
	put_be32(h + 32, 1u << 20); /* credit */
	put_be32(h + 36, 0);
	put_be32(h + 40, 0);
	static const uint32_t ahead[] = { 1u << 20, 3, 8 };
	for (unsigned k = 0; k < sizeof(ahead) / sizeof(ahead[0]); k++) {
		put_be32(h + 20, ack + ahead[k]);
		set_tag(h, hl, (int)(k & 1));
		send_frame(g, finish(g, hl));
		n_ack++;
	}
	/* The datagram itself, MAC and all, once more. */
	send_frame(f, len);
	n_replay++;
}

/* An ARP request from an address of ours for @ip's hardware address. */
static void ask_arp(const uint8_t mac[6], uint32_t ip)
{
	uint8_t f[60];
	struct xpi_arp a = { .op = XPI_ARP_REQUEST,
			     .spa = (10u << 24) | (88u << 16) | 250,
			     .tpa = ip };
	memcpy(a.sha, mac, 6);
	int n = xpi_arp_build(f, sizeof(f), &a);
	if (n > 0) {
		send_frame(f, (size_t)n);
		n_arp++;
	}
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: %s IFACE SECONDS\n", argv[0]);
		return 2;
	}
	signal(SIGTERM, on_term);
	signal(SIGINT, on_term);
	ifindex = (int)if_nametoindex(argv[1]);
	fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (ifindex == 0 || fd < 0) {
		perror("test_dpdk_forge: socket or interface");
		return 2;
	}
	struct sockaddr_ll me = { .sll_family = AF_PACKET,
				  .sll_protocol = htons(ETH_P_ALL),
				  .sll_ifindex = ifindex };
	struct timeval tv = { .tv_sec = 0, .tv_usec = 100000 };
	if (bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0 ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) < 0) {
		perror("test_dpdk_forge: bind");
		return 2;
	}
	uint8_t mine[6] = { 0x02, 0x66, 0x6f, 0x72, 0x67, 0x65 };
	uint32_t asked[8];
	unsigned nasked = 0;
	time_t end = time(NULL) + atoi(argv[2]);
	srand((unsigned)getpid());
	while (!stop && time(NULL) < end) {
		uint8_t f[2048];
		struct sockaddr_ll from;
		socklen_t fl = sizeof(from);
		ssize_t len = recvfrom(fd, f, sizeof(f), 0, (struct sockaddr *)&from, &fl);
		if (len < 0 || from.sll_pkttype == PACKET_OUTGOING)
			continue;
		/* IPv4 without options carrying UDP carrying an xport header
		 * of either version (the library's parser speaks only its own). */
		const size_t at = XPI_ETH_HDR_LEN + XPI_IPV4_HDR_LEN + XPI_UDP_HDR_LEN;
		if ((size_t)len < at + 48 || get_be16(f + 12) != XPI_ETHERTYPE_IPV4 ||
		    f[XPI_ETH_HDR_LEN] != 0x45 || f[XPI_ETH_HDR_LEN + 9] != 17 ||
		    f[at] != XPI_DGRAM_MAGIC)
			continue;
		size_t n = get_be16(f + at - 4) - XPI_UDP_HDR_LEN;
		size_t hl = f[at + 1] == 1 ? 48 : XPI_DGRAM_HDR_LEN;
		if (n < hl || at + n > (size_t)len)
			continue;
		n_seen++;
		uint32_t to_ip = get_be32(f + XPI_ETH_HDR_LEN + 16);
		if (nasked < 8) { /* each rank's address, once */
			bool known = false;
			for (unsigned i = 0; i < nasked; i++)
				known |= asked[i] == to_ip;
			if (!known) {
				asked[nasked++] = to_ip;
				ask_arp(mine, to_ip);
			}
		}
		if (n_seen <= FORGE_FIRST)
			forge(f, (size_t)len, f + at, n, hl);
	}
	printf("stranger: saw %lu datagrams; forged data %lu, ack %lu; replayed %lu; arp %lu\n",
	       n_seen, n_data, n_ack, n_replay, n_arp);
	return n_data > 0 && n_ack > 0 && n_replay > 0 && n_arp > 0 ? 0 : 1;
}
