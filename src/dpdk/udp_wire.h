/* SPDX-License-Identifier: MIT */
/*
 * The DPDK path's frames, as pure functions: Ethernet II carrying ARP, or
 * IPv4 carrying UDP carrying xport's datagram header (docs/DPDK-WIRE.md).
 * No DPDK header is needed here, so the parsers build everywhere, the
 * fuzzers reach them and gcc builds replay their corpus.
 *
 * Every length comes from the bytes and is checked against what was
 * received; every multi-byte field is read in network byte order (big
 * endian), never by casting a struct over the packet. Checksums are
 * verified here, so a frame a NIC did not check is checked all the same.
 *
 * The xport header, 72 bytes after the UDP header:
 *   0  u8  magic 0x58 ('X')        1  u8  version (2)
 *   2  u8  type (DATA 1, ACK 2)    3  u8  flags (0)
 *   4  u32 src_rank                8  u32 dst_rank
 *  12  u32 epoch: the sender's incarnation (a restarted rank is new)
 *  16  u32 psn: this packet's sequence number (DATA; ACK: 0)
 *  20  u32 ack: the next psn the sender expects from the receiver
 *  24  u64 sack: bit i set: psn ack + 1 + i was received too
 *  32  u32 credit: packets past ack the sender can still take
 *  36  u32 msg_len: the whole message's length (DATA)
 *  40  u32 frag_off: where this packet's payload goes in it (DATA)
 *  44  u32 reserved (0)
 *  48  u64 seq: the sender's count of datagrams to this receiver, from 1
 *          (DATA and ACK alike, resends too): the MAC's nonce, never
 *          repeated under one key (dpdk_auth.h); 0 without authentication
 *  56  16 bytes: the MAC's tag over the header (tag zero) and the payload
 * then the payload: the rest of the UDP datagram.
 */
#ifndef XPI_UDP_WIRE_H
#define XPI_UDP_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XPI_ETH_HDR_LEN 14u
#define XPI_ARP_LEN 28u
#define XPI_IPV4_HDR_LEN 20u /* what we send: no options */
#define XPI_UDP_HDR_LEN 8u
#define XPI_DGRAM_HDR_LEN 72u
#define XPI_DGRAM_MAGIC 0x58u
#define XPI_DGRAM_VERSION 2u
#define XPI_DGRAM_SEQ_OFF 48u
#define XPI_DGRAM_TAG_OFF 56u
#define XPI_DGRAM_TAG_LEN 16u
/* Ethernet + IPv4 + UDP + ours, in front of every payload we send. */
#define XPI_DGRAM_OVERHEAD                                                                         \
	(XPI_ETH_HDR_LEN + XPI_IPV4_HDR_LEN + XPI_UDP_HDR_LEN + XPI_DGRAM_HDR_LEN)

#define XPI_ETHERTYPE_IPV4 0x0800u
#define XPI_ETHERTYPE_ARP 0x0806u

enum xpi_dgram_type {
	XPI_DGRAM_DATA = 1,
	XPI_DGRAM_ACK = 2,
};

enum xpi_arp_op {
	XPI_ARP_REQUEST = 1,
	XPI_ARP_REPLY = 2,
};

/* IPv4 addresses and UDP ports in host byte order throughout. */
struct xpi_udp_addr {
	uint8_t mac[6];
	uint32_t ip;
	uint16_t port;
};

struct xpi_dgram_hdr {
	uint8_t type, flags;
	uint32_t src_rank, dst_rank, epoch, psn, ack;
	uint64_t sack;
	uint32_t credit, msg_len, frag_off;
	uint64_t seq; /* the tag is not parsed: dpdk_auth.h reads it in place */
};

struct xpi_arp {
	uint16_t op;
	uint8_t sha[6], tha[6]; /* sender's and target's hardware addresses */
	uint32_t spa, tpa;      /* and protocol (IPv4) addresses */
};

/* What a received frame is. */
enum xpi_frame_kind {
	XPI_RX_ARP = 1,
	XPI_RX_DGRAM = 2, /* one of ours: hdr and payload are set */
	XPI_RX_UDP = 3,   /* UDP, but not ours (no or another header) */
};

struct xpi_rx_frame {
	int kind;
	uint8_t dst_mac[6], src_mac[6];
	struct xpi_arp arp;           /* XPI_RX_ARP */
	struct xpi_udp_addr from, to; /* UDP: IPv4 and ports (MACs: above) */
	struct xpi_dgram_hdr hdr;     /* XPI_RX_DGRAM */
	const uint8_t *payload;       /* UDP: after our header, or after UDP's */
	size_t payload_len;
};

/*
 * Parses the Ethernet frame @buf[0, @len). 0 with *@out filled, or
 * -EPROTO with *@why naming the first thing wrong: a truncated header,
 * an IPv4 header or total length that does not fit, a fragment (we send
 * none), a bad IPv4 or UDP checksum, a UDP length that disagrees with
 * IPv4's, an ARP for anything but Ethernet and IPv4; of our header, a
 * wrong version, an unknown type, DATA whose payload passes msg_len, an
 * ACK with a payload, a rank not below @nranks. -ENOENT: a frame of
 * another kind (IPv6, not UDP), which is dropped without a word.
 */
int xpi_rx_frame_parse(const uint8_t *buf, size_t len, uint32_t nranks, struct xpi_rx_frame *out,
		       const char **why);

/* The same for a frame whose IPv4 and UDP checksums the device verified
 * (XPI_PARSE_CSUM_CHECKED: they are not computed again); every other
 * check stays. */
#define XPI_PARSE_CSUM_CHECKED 0x1u
int xpi_rx_frame_parse_flags(const uint8_t *buf, size_t len, uint32_t nranks, unsigned flags,
			     struct xpi_rx_frame *out, const char **why);

/* Our header alone, for a kernel UDP socket's datagrams (the tests' peer):
 * packs @h into @out; parses @p[0, @n) (header and payload) into *@h, as
 * xpi_rx_frame_parse does after UDP. 0, or -EPROTO with *@why set. */
void xpi_dgram_hdr_pack(const struct xpi_dgram_hdr *h, uint8_t out[XPI_DGRAM_HDR_LEN]);
int xpi_dgram_hdr_parse(const uint8_t *p, size_t n, uint32_t nranks, struct xpi_dgram_hdr *h,
			const char **why);

/* Whether two headers say the same, field by field (the struct has
 * padding, which memcmp would compare too). */
bool xpi_dgram_hdr_same(const struct xpi_dgram_hdr *a, const struct xpi_dgram_hdr *b);

/*
 * Writes an Ethernet/IPv4/UDP frame from @src to @dst carrying our header
 * @h and @payload_len bytes of @payload into @buf (room for @cap bytes),
 * both checksums computed. Returns the frame's length, or -EMSGSIZE if it
 * does not fit @cap or the 65535 bytes IPv4 allows. @ip_id is the IPv4
 * identification field.
 */
int xpi_dgram_build(uint8_t *buf, size_t cap, const struct xpi_udp_addr *src,
		    const struct xpi_udp_addr *dst, uint16_t ip_id, const struct xpi_dgram_hdr *h,
		    const void *payload, size_t payload_len);

/* The same, for a device that computes both checksums
 * (XPI_BUILD_CSUM_OFFLOAD): the IPv4 checksum is left 0 and the UDP one
 * holds the pseudo-header's sum, as DPDK's offloads expect. */
#define XPI_BUILD_CSUM_OFFLOAD 0x1u
/* Only the 114 bytes of headers are written (the UDP checksum still covers
 * @payload, read where it lies): the payload goes in a buffer of its own. */
#define XPI_BUILD_HEADERS_ONLY 0x2u
/* No UDP checksum (0, which IPv4 allows: RFC 768): for datagrams whose MAC
 * the receiver verifies, which finds every corruption the checksum would
 * and more, so summing the payload twice is only a cost. */
#define XPI_BUILD_NO_UDP_CSUM 0x4u
int xpi_dgram_build_flags(uint8_t *buf, size_t cap, const struct xpi_udp_addr *src,
			  const struct xpi_udp_addr *dst, uint16_t ip_id,
			  const struct xpi_dgram_hdr *h, const void *payload, size_t payload_len,
			  unsigned flags);

/* The header's bytes and the payload's, where a built frame has them. */
static inline uint8_t *xpi_dgram_of_frame(uint8_t *frame)
{
	return frame + XPI_ETH_HDR_LEN + XPI_IPV4_HDR_LEN + XPI_UDP_HDR_LEN;
}

/* Writes a 42-byte Ethernet frame carrying @a (a request goes to the
 * broadcast address, a reply to a->tha) into @buf. Returns 42, or
 * -EMSGSIZE if @cap is smaller. */
int xpi_arp_build(uint8_t *buf, size_t cap, const struct xpi_arp *a);

/* The 16-bit ones' complement sum of @len bytes (RFC 1071), folded, not
 * inverted; @sum carries a partial sum in. */
uint32_t xpi_csum_add(uint32_t sum, const uint8_t *p, size_t len);
uint16_t xpi_csum_fold(uint32_t sum);

#endif
