/* SPDX-License-Identifier: MIT */
/*
 * The DPDK path's frames (src/dpdk/udp_wire.c), by known answers: the
 * RFC 1071 checksum example; a DATA datagram built, parsed back field for
 * field, and refused once any byte of its IPv4 header, UDP header or
 * payload is changed (each checksum catches its part); truncations at
 * every length; ARP built and parsed; each seed of the fuzz corpus parses
 * as the kind its name says. That the checksums are the ones the kernel
 * computes is tested against a real kernel socket (tests/dpdk/).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "dpdk/udp_wire.h"
#include "testutil.h"

static const struct xpi_udp_addr A = { { 2, 0, 0, 0, 0, 1 }, 0x0a4f0001, 4791 };
static const struct xpi_udp_addr B = { { 2, 0, 0, 0, 0, 2 }, 0x0a4f0002, 5000 };

static void test_rfc1071(void)
{
	/* RFC 1071 section 3: these 8 bytes sum to 0xddf2. */
	const uint8_t b[] = { 0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7 };
	T_EQ(xpi_csum_fold(xpi_csum_add(0, b, sizeof(b))), 0xddf2);
	/* An odd length pads the last byte with zero. */
	const uint8_t c[] = { 0x12, 0x34, 0x56 };
	T_EQ(xpi_csum_fold(xpi_csum_add(0, c, sizeof(c))), 0x1234 + 0x5600);
}

/* The word-at-a-time sum against the definition, 16-bit big-endian words
 * one by one, at every length and alignment up to a jumbo frame's. */
static void test_csum_against_definition(void)
{
	static uint8_t buf[9100];
	uint32_t x = 12345;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x = x * 1103515245u + 12345u;
		buf[i] = (uint8_t)(x >> 16);
	}
	for (size_t off = 0; off < 8; off++)
		for (size_t len = 0; len + off <= sizeof(buf); len += len < 80 ? 1 : 97) {
			uint64_t s = 7;
			size_t i = 0;
			for (; i + 1 < len; i += 2)
				s += (uint32_t)buf[off + i] << 8 | buf[off + i + 1];
			if (i < len)
				s += (uint32_t)buf[off + i] << 8;
			while (s >> 16)
				s = (s & 0xffff) + (s >> 16);
			T_EQ(xpi_csum_fold(xpi_csum_add(7, buf + off, len)), (uint16_t)s);
		}
	/* All ones: the largest sums, the most carries. */
	memset(buf, 0xff, sizeof(buf));
	T_EQ(xpi_csum_fold(xpi_csum_add(0xffffffffu, buf, sizeof(buf))), 0xffff);
}

static void test_data_roundtrip(void)
{
	uint8_t frame[2048], payload[1000];
	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 7 + 3);
	struct xpi_dgram_hdr h = { .type = XPI_DGRAM_DATA,
				   .src_rank = 3,
				   .dst_rank = 1,
				   .epoch = 0xdeadbeef,
				   .psn = 42,
				   .ack = 17,
				   .sack = 0x8000000000000001ull,
				   .credit = 64,
				   .msg_len = 5000,
				   .frag_off = 4000 };
	int n = xpi_dgram_build(frame, sizeof(frame), &A, &B, 9, &h, payload, sizeof(payload));
	T_EQ(n, XPI_DGRAM_OVERHEAD + sizeof(payload));
	struct xpi_rx_frame f;
	const char *why = NULL;
	T_OK(xpi_rx_frame_parse(frame, (size_t)n, 4, &f, &why));
	T_EQ(f.kind, XPI_RX_DGRAM);
	T_CHECK(xpi_dgram_hdr_same(&f.hdr, &h));
	T_EQ(f.payload_len, sizeof(payload));
	T_CHECK(memcmp(f.payload, payload, sizeof(payload)) == 0);
	T_EQ(f.from.ip, A.ip);
	T_EQ(f.to.ip, B.ip);
	T_EQ(f.from.port, A.port);
	T_EQ(f.to.port, B.port);
	T_CHECK(memcmp(f.src_mac, A.mac, 6) == 0 && memcmp(f.dst_mac, B.mac, 6) == 0);
	/* A rank outside the job. */
	T_EQ(xpi_rx_frame_parse(frame, (size_t)n, 3, &f, &why), -EPROTO);
	T_CONTAINS(why, "rank outside the job");
	/* Any byte changed from the IPv4 header on: some check refuses it
	 * (the MACs are not checked: Ethernet's CRC is the NIC's). */
	for (int i = XPI_ETH_HDR_LEN; i < n; i++) {
		frame[i] ^= 0x10;
		int rc = xpi_rx_frame_parse(frame, (size_t)n, 4, &f, &why);
		if (rc == 0 && f.kind == XPI_RX_DGRAM)
			T_FAIL("a flipped bit at byte %d went unnoticed", i);
		frame[i] ^= 0x10;
	}
	/* Every truncation is refused, never read past. */
	for (int len = 0; len < n; len++) {
		int rc = xpi_rx_frame_parse(frame, (size_t)len, 4, &f, &why);
		if (rc == 0 && f.kind == XPI_RX_DGRAM)
			T_FAIL("a frame cut to %d of %d bytes parsed", len, n);
	}
	/* Padding after the datagram (Ethernet's minimum) is fine. */
	memset(frame + n, 0, 10);
	T_OK(xpi_rx_frame_parse(frame, (size_t)n + 10, 4, &f, &why));
	T_EQ(f.payload_len, sizeof(payload));
	/* Past the message's end. */
	h.frag_off = 4001;
	n = xpi_dgram_build(frame, sizeof(frame), &A, &B, 9, &h, payload, sizeof(payload));
	T_EQ(xpi_rx_frame_parse(frame, (size_t)n, 4, &f, &why), -EPROTO);
	T_CONTAINS(why, "past its message");
	/* Too big for the buffer, or for IPv4. */
	T_EQ(xpi_dgram_build(frame, 100, &A, &B, 9, &h, payload, sizeof(payload)), -EMSGSIZE);
	static uint8_t big[70000];
	T_EQ(xpi_dgram_build(big, sizeof(big), &A, &B, 9, &h, big, 65500), -EMSGSIZE);
}

static void test_ack_and_arp(void)
{
	uint8_t frame[128];
	struct xpi_dgram_hdr h = { .type = XPI_DGRAM_ACK,
				   .src_rank = 0,
				   .dst_rank = 1,
				   .ack = 100,
				   .sack = 6,
				   .credit = 8 };
	int n = xpi_dgram_build(frame, sizeof(frame), &A, &B, 1, &h, NULL, 0);
	struct xpi_rx_frame f;
	const char *why = NULL;
	T_OK(xpi_rx_frame_parse(frame, (size_t)n, 2, &f, &why));
	T_EQ(f.kind, XPI_RX_DGRAM);
	T_EQ(f.hdr.ack, 100);
	h.psn = 5; /* an ACK has no sequence number */
	n = xpi_dgram_build(frame, sizeof(frame), &A, &B, 1, &h, NULL, 0);
	T_EQ(xpi_rx_frame_parse(frame, (size_t)n, 2, &f, &why), -EPROTO);

	struct xpi_arp a = { .op = XPI_ARP_REQUEST, .spa = A.ip, .tpa = B.ip };
	memcpy(a.sha, A.mac, 6);
	n = xpi_arp_build(frame, sizeof(frame), &a);
	T_EQ(n, 60);
	T_OK(xpi_rx_frame_parse(frame, (size_t)n, 2, &f, &why));
	T_EQ(f.kind, XPI_RX_ARP);
	T_EQ(f.arp.op, XPI_ARP_REQUEST);
	T_EQ(f.arp.spa, A.ip);
	T_EQ(f.arp.tpa, B.ip);
	for (int i = 0; i < 6; i++)
		T_EQ(f.dst_mac[i], 0xff);
	T_EQ(xpi_arp_build(frame, 59, &a), -EMSGSIZE);
	frame[XPI_ETH_HDR_LEN + 7] = 9; /* no such operation */
	T_EQ(xpi_rx_frame_parse(frame, (size_t)n, 2, &f, &why), -EPROTO);
}

/* The fuzz corpus's seeds: each is what its name says. */
static void test_corpus(const char *dir)
{
	static const struct {
		const char *name;
		int rc, kind;
	} seeds[] = {
		{ "data_small", 0, XPI_RX_DGRAM }, { "data_frag", 0, XPI_RX_DGRAM },
		{ "ack", 0, XPI_RX_DGRAM },        { "data_nocsum", 0, XPI_RX_DGRAM },
		{ "udp_other", 0, XPI_RX_UDP },    { "arp_request", 0, XPI_RX_ARP },
		{ "arp_reply", 0, XPI_RX_ARP },    { "ipv6", -ENOENT, 0 },
	};
	for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/%s", dir, seeds[i].name);
		FILE *fp = fopen(path, "rb");
		if (fp == NULL)
			T_FAIL("cannot open %s", path);
		uint8_t buf[4096];
		size_t n = fread(buf, 1, sizeof(buf), fp);
		fclose(fp);
		struct xpi_rx_frame f;
		const char *why = "";
		int rc = xpi_rx_frame_parse(buf, n, 4, &f, &why);
		if (rc != seeds[i].rc || (rc == 0 && f.kind != seeds[i].kind))
			T_FAIL("%s: %d kind %d (%s), want %d kind %d", seeds[i].name, rc,
			       rc == 0 ? f.kind : 0, why, seeds[i].rc, seeds[i].kind);
	}
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
		return 2;
	}
	T_RUN(test_rfc1071);
	T_RUN(test_csum_against_definition);
	T_RUN(test_data_roundtrip);
	T_RUN(test_ack_and_arp);
	test_corpus(argv[1]);
	return 0;
}
