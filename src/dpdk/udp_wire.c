/* SPDX-License-Identifier: MIT */
/* The DPDK path's frames, parsed and built by pure functions (udp_wire.h). */
#include <errno.h>
#include <string.h>

#include "../core/be.h"
#include "udp_wire.h"

/* The shortest frame Ethernet carries; shorter ones are padded. */
#define ETH_MIN_FRAME 60u
#define IPV4_MAX_TOTAL 65535u
#define IP_PROTO_UDP 17u
#define IPV4_DF 0x4000u
#define IPV4_FRAG_MASK 0x3fffu /* MF and the offset: a fragment */

/*
 * RFC 1071's sum, eight bytes at a time: the ones' complement sum does not
 * depend on byte order (RFC 1071 2(B)), so the words are added as the CPU
 * loads them and the folded result swapped once into network order, where
 * adding big-endian 16-bit words one by one cost a quarter of a
 * microsecond per 1424-byte datagram, on each side. Each 64-bit load goes
 * in as two 32-bit halves, so the 64-bit accumulator cannot overflow below
 * 2^32 words.
 */
uint32_t xpi_csum_add(uint32_t sum, const uint8_t *p, size_t len)
{
	uint64_t s = 0;
	size_t i = 0;
	for (; i + 8 <= len; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		s += (w & 0xffffffffu) + (w >> 32);
	}
	for (; i + 2 <= len; i += 2) {
		uint16_t w;
		memcpy(&w, p + i, 2);
		s += w;
	}
	while (s >> 16)
		s = (s & 0xffffu) + (s >> 16);
	uint32_t be = (uint32_t)s;
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	be = (be >> 8 | be << 8) & 0xffffu;
#endif
	uint64_t t = (uint64_t)sum + be;
	if (i < len)
		t += (uint32_t)p[i] << 8; /* an odd last byte, padded with zero */
	while (t >> 32)
		t = (t & 0xffffffffu) + (t >> 32);
	return (uint32_t)t;
}

uint16_t xpi_csum_fold(uint32_t sum)
{
	while (sum >> 16)
		sum = (sum & 0xffffu) + (sum >> 16);
	return (uint16_t)sum;
}

/* The UDP checksum's pseudo-header (RFC 768): addresses, protocol, length. */
static uint32_t pseudo_sum(uint32_t src, uint32_t dst, uint16_t udp_len)
{
	uint8_t ph[12];
	put_be32(ph, src);
	put_be32(ph + 4, dst);
	ph[8] = 0;
	ph[9] = IP_PROTO_UDP;
	put_be16(ph + 10, udp_len);
	return xpi_csum_add(0, ph, sizeof(ph));
}

static int refuse(const char **why, const char *what)
{
	*why = what;
	return -EPROTO;
}

static int parse_arp(const uint8_t *p, size_t n, struct xpi_arp *a, const char **why)
{
	if (n < XPI_ARP_LEN)
		return refuse(why, "truncated ARP packet");
	if (get_be16(p) != 1 || get_be16(p + 2) != XPI_ETHERTYPE_IPV4 || p[4] != 6 || p[5] != 4)
		return refuse(why, "ARP for other than Ethernet and IPv4");
	a->op = get_be16(p + 6);
	if (a->op != XPI_ARP_REQUEST && a->op != XPI_ARP_REPLY)
		return refuse(why, "ARP operation neither request nor reply");
	memcpy(a->sha, p + 8, 6);
	a->spa = get_be32(p + 14);
	memcpy(a->tha, p + 18, 6);
	a->tpa = get_be32(p + 24);
	return 0;
}

int xpi_dgram_hdr_parse(const uint8_t *p, size_t n, uint32_t nranks, struct xpi_dgram_hdr *h,
			const char **why)
{
	if (n < XPI_DGRAM_HDR_LEN || p[0] != XPI_DGRAM_MAGIC)
		return refuse(why, "not an xport datagram (too short, or no magic)");
	if (p[1] != XPI_DGRAM_VERSION)
		return refuse(why, "xport datagram of another version (we speak 2)");
	*h = (struct xpi_dgram_hdr){
		.type = p[2],
		.flags = p[3],
		.src_rank = get_be32(p + 4),
		.dst_rank = get_be32(p + 8),
		.epoch = get_be32(p + 12),
		.psn = get_be32(p + 16),
		.ack = get_be32(p + 20),
		.sack = get_be64(p + 24),
		.credit = get_be32(p + 32),
		.msg_len = get_be32(p + 36),
		.frag_off = get_be32(p + 40),
		.seq = get_be64(p + XPI_DGRAM_SEQ_OFF),
	};
	if (h->flags != 0 || get_be32(p + 44) != 0)
		return refuse(why, "xport datagram with flags or reserved bits set");
	if (h->src_rank >= nranks || h->dst_rank >= nranks)
		return refuse(why, "xport datagram naming a rank outside the job");
	uint64_t payload = n - XPI_DGRAM_HDR_LEN;
	switch (h->type) {
	case XPI_DGRAM_DATA:
		if ((uint64_t)h->frag_off + payload > h->msg_len)
			return refuse(why, "xport DATA reaching past its message's length");
		if (payload == 0 && h->msg_len != 0)
			return refuse(why, "xport DATA with no payload of a non-empty message");
		return 0;
	case XPI_DGRAM_ACK:
		if (payload != 0 || h->psn != 0 || h->msg_len != 0 || h->frag_off != 0)
			return refuse(why, "xport ACK carrying data fields");
		return 0;
	default:
		return refuse(why, "xport datagram of an unknown type");
	}
}

int xpi_rx_frame_parse(const uint8_t *buf, size_t len, uint32_t nranks, struct xpi_rx_frame *out,
		       const char **why)
{
	return xpi_rx_frame_parse_flags(buf, len, nranks, 0, out, why);
}

int xpi_rx_frame_parse_flags(const uint8_t *buf, size_t len, uint32_t nranks, unsigned flags,
			     struct xpi_rx_frame *out, const char **why)
{
	bool checked = (flags & XPI_PARSE_CSUM_CHECKED) != 0;
	if (len < XPI_ETH_HDR_LEN)
		return refuse(why, "truncated Ethernet header");
	memset(out, 0, sizeof(*out));
	memcpy(out->dst_mac, buf, 6);
	memcpy(out->src_mac, buf + 6, 6);
	uint16_t ethertype = get_be16(buf + 12);
	const uint8_t *ip = buf + XPI_ETH_HDR_LEN;
	size_t n = len - XPI_ETH_HDR_LEN;
	if (ethertype == XPI_ETHERTYPE_ARP) {
		out->kind = XPI_RX_ARP;
		return parse_arp(ip, n, &out->arp, why);
	}
	if (ethertype != XPI_ETHERTYPE_IPV4)
		return -ENOENT;
	if (n < XPI_IPV4_HDR_LEN)
		return refuse(why, "truncated IPv4 header");
	size_t ihl = (size_t)(ip[0] & 0xf) * 4;
	if (ip[0] >> 4 != 4 || ihl < XPI_IPV4_HDR_LEN || ihl > n)
		return refuse(why, "IPv4 header of a wrong version or length");
	size_t total = get_be16(ip + 2); /* a frame may carry padding after it */
	if (total < ihl || total > n)
		return refuse(why, "IPv4 total length outside the frame");
	if (get_be16(ip + 6) & IPV4_FRAG_MASK)
		return refuse(why, "IPv4 fragment (xport sends none)");
	if (!checked && xpi_csum_fold(xpi_csum_add(0, ip, ihl)) != 0xffff)
		return refuse(why, "bad IPv4 header checksum");
	if (ip[9] != IP_PROTO_UDP)
		return -ENOENT;
	out->from.ip = get_be32(ip + 12);
	out->to.ip = get_be32(ip + 16);
	memcpy(out->from.mac, out->src_mac, 6);
	memcpy(out->to.mac, out->dst_mac, 6);
	const uint8_t *udp = ip + ihl;
	size_t udp_len = total - ihl;
	if (udp_len < XPI_UDP_HDR_LEN)
		return refuse(why, "truncated UDP header");
	if (get_be16(udp + 4) != udp_len)
		return refuse(why, "UDP length disagreeing with IPv4's");
	if (!checked && get_be16(udp + 6) != 0 && /* 0: the sender computed none (IPv4 allows it) */
	    xpi_csum_fold(xpi_csum_add(pseudo_sum(out->from.ip, out->to.ip, (uint16_t)udp_len), udp,
				       udp_len)) != 0xffff)
		return refuse(why, "bad UDP checksum");
	out->from.port = get_be16(udp);
	out->to.port = get_be16(udp + 2);
	out->payload = udp + XPI_UDP_HDR_LEN;
	out->payload_len = udp_len - XPI_UDP_HDR_LEN;
	out->kind = XPI_RX_UDP;
	if (out->payload_len < XPI_DGRAM_HDR_LEN || out->payload[0] != XPI_DGRAM_MAGIC)
		return 0; /* somebody else's datagram */
	int rc = xpi_dgram_hdr_parse(out->payload, out->payload_len, nranks, &out->hdr, why);
	if (rc < 0)
		return rc;
	out->kind = XPI_RX_DGRAM;
	out->payload += XPI_DGRAM_HDR_LEN;
	out->payload_len -= XPI_DGRAM_HDR_LEN;
	return 0;
}

void xpi_dgram_hdr_pack(const struct xpi_dgram_hdr *h, uint8_t d[XPI_DGRAM_HDR_LEN])
{
	d[0] = XPI_DGRAM_MAGIC;
	d[1] = XPI_DGRAM_VERSION;
	d[2] = h->type;
	d[3] = h->flags;
	put_be32(d + 4, h->src_rank);
	put_be32(d + 8, h->dst_rank);
	put_be32(d + 12, h->epoch);
	put_be32(d + 16, h->psn);
	put_be32(d + 20, h->ack);
	put_be64(d + 24, h->sack);
	put_be32(d + 32, h->credit);
	put_be32(d + 36, h->msg_len);
	put_be32(d + 40, h->frag_off);
	put_be32(d + 44, 0);
	put_be64(d + XPI_DGRAM_SEQ_OFF, h->seq);
	memset(d + XPI_DGRAM_TAG_OFF, 0, XPI_DGRAM_TAG_LEN);
}

bool xpi_dgram_hdr_same(const struct xpi_dgram_hdr *a, const struct xpi_dgram_hdr *b)
{
	return a->type == b->type && a->flags == b->flags && a->src_rank == b->src_rank &&
	       a->dst_rank == b->dst_rank && a->epoch == b->epoch && a->psn == b->psn &&
	       a->ack == b->ack && a->sack == b->sack && a->credit == b->credit &&
	       a->msg_len == b->msg_len && a->frag_off == b->frag_off && a->seq == b->seq;
}

int xpi_dgram_build(uint8_t *buf, size_t cap, const struct xpi_udp_addr *src,
		    const struct xpi_udp_addr *dst, uint16_t ip_id, const struct xpi_dgram_hdr *h,
		    const void *payload, size_t payload_len)
{
	return xpi_dgram_build_flags(buf, cap, src, dst, ip_id, h, payload, payload_len, 0);
}

int xpi_dgram_build_flags(uint8_t *buf, size_t cap, const struct xpi_udp_addr *src,
			  const struct xpi_udp_addr *dst, uint16_t ip_id,
			  const struct xpi_dgram_hdr *h, const void *payload, size_t payload_len,
			  unsigned flags)
{
	size_t ip_total = XPI_IPV4_HDR_LEN + XPI_UDP_HDR_LEN + XPI_DGRAM_HDR_LEN + payload_len;
	size_t need =
		(flags & XPI_BUILD_HEADERS_ONLY) ? XPI_DGRAM_OVERHEAD : XPI_ETH_HDR_LEN + ip_total;
	if (payload_len > IPV4_MAX_TOTAL || ip_total > IPV4_MAX_TOTAL || need > cap)
		return -EMSGSIZE;
	memcpy(buf, dst->mac, 6);
	memcpy(buf + 6, src->mac, 6);
	put_be16(buf + 12, XPI_ETHERTYPE_IPV4);
	uint8_t *ip = buf + XPI_ETH_HDR_LEN;
	ip[0] = 0x45; /* version 4, 20 bytes */
	ip[1] = 0;
	put_be16(ip + 2, (uint16_t)ip_total);
	put_be16(ip + 4, ip_id);
	put_be16(ip + 6, IPV4_DF);
	ip[8] = 64; /* TTL */
	ip[9] = IP_PROTO_UDP;
	put_be16(ip + 10, 0);
	put_be32(ip + 12, src->ip);
	put_be32(ip + 16, dst->ip);
	bool offload = (flags & XPI_BUILD_CSUM_OFFLOAD) != 0;
	if (!offload)
		put_be16(ip + 10, (uint16_t)~xpi_csum_fold(xpi_csum_add(0, ip, XPI_IPV4_HDR_LEN)));
	uint8_t *udp = ip + XPI_IPV4_HDR_LEN;
	uint16_t udp_len = (uint16_t)(ip_total - XPI_IPV4_HDR_LEN);
	put_be16(udp, src->port);
	put_be16(udp + 2, dst->port);
	put_be16(udp + 4, udp_len);
	put_be16(udp + 6, 0);
	uint8_t *d = udp + XPI_UDP_HDR_LEN;
	xpi_dgram_hdr_pack(h, d);
	bool headers_only = (flags & XPI_BUILD_HEADERS_ONLY) != 0;
	if (payload_len != 0 && !headers_only)
		memcpy(d + XPI_DGRAM_HDR_LEN, payload, payload_len);
	if (flags & XPI_BUILD_NO_UDP_CSUM)
		return (int)(headers_only ? XPI_DGRAM_OVERHEAD : XPI_ETH_HDR_LEN + ip_total);
	if (offload) {
		/* The device finishes it from the pseudo-header's sum. */
		put_be16(udp + 6, xpi_csum_fold(pseudo_sum(src->ip, dst->ip, udp_len)));
		return (int)(headers_only ? XPI_DGRAM_OVERHEAD : XPI_ETH_HDR_LEN + ip_total);
	}
	uint32_t sum = pseudo_sum(src->ip, dst->ip, udp_len);
	if (headers_only) /* the payload is summed where it lies */
		sum = xpi_csum_add(xpi_csum_add(sum, udp, XPI_UDP_HDR_LEN + XPI_DGRAM_HDR_LEN),
				   payload, payload_len);
	else
		sum = xpi_csum_add(sum, udp, udp_len);
	uint16_t c = (uint16_t)~xpi_csum_fold(sum);
	put_be16(udp + 6, c != 0 ? c : 0xffff); /* 0 would mean "none" (RFC 768) */
	return (int)(headers_only ? XPI_DGRAM_OVERHEAD : XPI_ETH_HDR_LEN + ip_total);
}

int xpi_arp_build(uint8_t *buf, size_t cap, const struct xpi_arp *a)
{
	static const uint8_t broadcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };
	if (cap < ETH_MIN_FRAME)
		return -EMSGSIZE;
	memset(buf, 0, ETH_MIN_FRAME);
	memcpy(buf, a->op == XPI_ARP_REQUEST ? broadcast : a->tha, 6);
	memcpy(buf + 6, a->sha, 6);
	put_be16(buf + 12, XPI_ETHERTYPE_ARP);
	uint8_t *p = buf + XPI_ETH_HDR_LEN;
	put_be16(p, 1); /* Ethernet */
	put_be16(p + 2, XPI_ETHERTYPE_IPV4);
	p[4] = 6;
	p[5] = 4;
	put_be16(p + 6, a->op);
	memcpy(p + 8, a->sha, 6);
	put_be32(p + 14, a->spa);
	memcpy(p + 18, a->tha, 6);
	put_be32(p + 24, a->tpa);
	return (int)ETH_MIN_FRAME;
}
