/* SPDX-License-Identifier: MIT */
/*
 * A rank's capability card: which transports it has, what each can do,
 * what it costs and how to reach it, plus the rank's transport preference
 * list (XP_TRANSPORTS). Ranks exchange cards as equal-size blobs of
 * XPI_CARD_WIRE_MAX bytes (an allgather) and each pair picks its lanes from
 * the two cards with xpi_select (select.h). Everything here but
 * xpi_card_host_id is a pure function; any thread may call it.
 *
 * Wire form, little-endian, at these offsets. The header:
 *   0  u32 magic 0x44435058 (the bytes "XPCD")
 *   4  u16 version: 1 here; a newer writer says which fields it appended
 *   6  u16 hdr_len: bytes from offset 0 to the first entry (40 in version 1)
 *   8  u16 flags: none defined; written 0, ignored on receipt
 *  10  u8  ntl: transport entries that follow, types unknown to a reader
 *      included
 *  11  u8  nallowed: length of the preference list, 0..8 (0 = default)
 *  12  u32 rank
 *  16  u8[16] host: host identity (xpi_card_host_id)
 *  32  u8[8] allowed: the preference list in order (transport wire types,
 *      nonzero, no repeats; may name types a reader does not know); the
 *      slots after nallowed are written 0 and ignored
 *  40  end of version 1's header
 * then ntl entries, back to back from offset hdr_len:
 *   0  u8  type (enum xpi_tl_type)
 *   1  u8  flags: none defined; written 0, ignored on receipt
 *   2  u16 len: this entry's total length, these four bytes included
 *   4  u32 caps (XPI_CAP_*; bits a reader does not know are kept)
 *   8  u64 max_msg
 *  16  u32 mtu
 *  20  u32 lat_ns
 *  24  u32 bw_mbps
 *  28  u16 reach_len: 0..XPI_CARD_REACH_MAX
 *  30  u8[reach_len] reach
 *  30 + reach_len: end of version 1's entry
 * and zero padding up to XPI_CARD_WIRE_MAX, which readers ignore.
 *
 * Compatibility rules. Fields are only ever appended, to the header (a
 * reader skips to hdr_len) or to an entry (a reader takes the prefix it
 * knows and skips to len); an entry of a type the reader does not know is
 * skipped whole by its len. So any version >= 1 is read; the version
 * number only tells a reader which appended fields exist. A change that
 * breaks these rules needs a new magic. Flags must likewise only carry
 * meanings an older reader may ignore.
 *
 * Reach, per transport (bytes a peer needs to get to it):
 *   TCP   reach[0] the listener's address family as Linux numbers it
 *         (AF_INET 2, AF_INET6 10): the one byte selection reads, so
 *         reach_len >= 1. When present, reach[1..2] the port (big-endian)
 *         and the address, 4 or 16 bytes in network order (7 or 19 bytes).
 *   SHM   the segment name; RDMA the port's GID and QP details; DPDK the
 *         MAC and UDP endpoint: defined by those backends.
 */
#ifndef XPI_CARD_H
#define XPI_CARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum xpi_tl_type {
	XPI_TL_SHM = 1,
	XPI_TL_RDMA = 2,
	XPI_TL_DPDK = 3,
	XPI_TL_TCP = 4
}; /* wire values */

#define XPI_CAP_ZCOPY 0x1u /* zero-copy send or receive */
#define XPI_CAP_RDMA_READ 0x2u
#define XPI_CAP_RDMA_WRITE 0x4u
/* Carries rendezvous payloads only (a bulk lane), never messages. */
#define XPI_CAP_BULK_ONLY 0x8u
/* Cannot tell that a peer's process ended (an RDMA queue pair learns it
 * only from a send that is never answered, and soft-RoCE not even then):
 * a stream transport is connected beside it to watch (select.h, rule 5). */
#define XPI_CAP_WATCHED 0x10u

#define XPI_CARD_MAX_TL 8
#define XPI_CARD_REACH_MAX 64
#define XPI_CARD_WIRE_MAX 1024 /* the fixed size ranks exchange (allgather of equal-size blobs) */

#define XPI_CARD_MAGIC 0x44435058u
#define XPI_CARD_VERSION 1u
#define XPI_CARD_HDR_LEN 40u   /* version 1's header */
#define XPI_CARD_ENTRY_LEN 30u /* version 1's entry without its reach bytes */

struct xpi_card_tl {
	uint8_t type;     /* enum xpi_tl_type */
	uint32_t caps;    /* XPI_CAP_* */
	uint64_t max_msg; /* largest message it carries in one piece, 0 = unlimited */
	uint32_t mtu;     /* bytes per packet, 0 = stream */
	uint32_t lat_ns;  /* one-way latency estimate of a small message */
	uint32_t bw_mbps; /* bandwidth estimate, 10^6 B/s */
	uint16_t reach_len;
	uint8_t reach[XPI_CARD_REACH_MAX]; /* how to reach it: address, GID, MAC, segment name */
};

struct xpi_card {
	uint32_t rank;
	uint8_t host[16]; /* host identity (see xpi_card_host_id) */
	uint8_t ntl;
	struct xpi_card_tl tl[XPI_CARD_MAX_TL];
	uint8_t nallowed; /* the rank's transport preference list (XP_TRANSPORTS), in order; 0 = default */
	uint8_t allowed[XPI_CARD_MAX_TL];
};

/*
 * Writes @c's wire form into all XPI_CARD_WIRE_MAX bytes of @out (zero
 * padded). Returns 0, or -EINVAL, leaving @out untouched, if @c could not
 * be read back as it is: ntl or nallowed above XPI_CARD_MAX_TL, a reach_len
 * above XPI_CARD_REACH_MAX, an entry whose type is not an xpi_tl_type or
 * repeats another's, or a preference list with a 0 or a repeated type. For
 * every card it accepts, xpi_card_parse gives back an equal card
 * (xpi_card_equal).
 */
int xpi_card_pack(const struct xpi_card *c, uint8_t out[XPI_CARD_WIRE_MAX]);
/* How many of the bytes xpi_card_pack writes for @c carry the card (the
 * rest is zero padding): what ranks need to swap. Pure. */
size_t xpi_card_wire_len(const struct xpi_card *c);

/*
 * Reads a card from @len bytes at @buf (at most XPI_CARD_WIRE_MAX of them
 * are looked at) under the compatibility rules above: entries of unknown
 * types are skipped, longer entries and headers are read for what this
 * version knows. Returns 0 with *@out filled (unused slots zeroed), or
 * -EPROTO with *@out untouched and *@why (if @why is not NULL) saying what
 * was wrong: too short, bad magic, version 0, a header or entry length that
 * runs past the buffer or XPI_CARD_WIRE_MAX or is shorter than its fields,
 * more than XPI_CARD_MAX_TL known entries, a reach longer than
 * XPI_CARD_REACH_MAX, a repeated transport type, or a bad preference list.
 */
int xpi_card_parse(const uint8_t *buf, size_t len, struct xpi_card *out, const char **why);

/*
 * Whether two cards say the same thing: rank, host, the entries in order
 * (reach compared up to reach_len) and the preference list (up to
 * nallowed). Bytes past those lengths and struct padding do not count.
 */
bool xpi_card_equal(const struct xpi_card *a, const struct xpi_card *b);

/*
 * Writes this process's host identity: equal on every process that can
 * share /dev/shm with this one. It is SipHash-2-4 (two fixed keys, 8 bytes
 * each) of /proc/sys/kernel/random/boot_id and the ids of the IPC and mount
 * namespaces (the links /proc/self/ns/ipc and /proc/self/ns/mnt): another
 * boot, another host or a container with its own /dev/shm mount gives
 * another id. If any of the three cannot be read, random bytes are mixed
 * in, so the id matches no other process and shared memory is never chosen
 * on a guess. Reads /proc; any thread.
 */
void xpi_card_host_id(uint8_t out[16]);

/* The host identity of a rank told its host's name (XP_HOST_ID), in the
 * place of xpi_card_host_id's: equal names, equal ids. */
void xpi_card_host_id_named(const char *name, uint8_t out[16]);

/*
 * Parses a preference list such as "shm,tcp" (XP_TRANSPORTS): names shm,
 * rdma, dpdk and tcp, any case, separated by commas, blanks around a name
 * allowed. NULL or an all-blank string is the empty list (the default).
 * Returns 0 with @out and *@n written, or -EINVAL (nothing written) with
 * *@why (if @why is not NULL) naming the problem: an unknown or empty name
 * or one given twice.
 */
int xpi_transports_parse(const char *s, uint8_t out[XPI_CARD_MAX_TL], uint8_t *n, const char **why);

/* "shm", "rdma", "dpdk", "tcp", or "unknown" for any other value. */
const char *xpi_tl_type_name(uint8_t type);

#endif
