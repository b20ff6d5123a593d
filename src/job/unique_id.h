/* SPDX-License-Identifier: MIT */
/*
 * The unique id of a job formed by xp_init_rank (xp_get_unique_id makes
 * it): rank 0's rendezvous address and the job's key, in the 128 opaque
 * bytes of xp_unique_id_t, and the process-wide table of the listening
 * sockets xp_get_unique_id opened, so that rank 0 in the same process uses
 * its socket (no race for the port; ranks that connect first wait in its
 * backlog).
 *
 * Layout, version 1. Integers big-endian; every byte not named is zero.
 *     0  4  magic "XPID"
 *     4  2  version (1)
 *     6  1  address family: 4 (IPv4) or 6 (IPv6)
 *     7  1  zero
 *     8  2  rank 0's port (not 0)
 *    10  2  zero
 *    12  4  IPv6 scope id (0 for IPv4)
 *    16 16  rank 0's address (IPv4: 4 bytes, then 12 zero; not unspecified)
 *    32 32  job key: random bytes (getrandom)
 *    64 60  zero (for later versions)
 *   124  4  CRC-32 (IEEE, as zlib's) of bytes 0 to 123: a damaged copy is
 *           refused as such, rather than as a wrong job key later
 */
#ifndef XPI_UNIQUE_ID_H
#define XPI_UNIQUE_ID_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define XPI_UID_LEN 128
#define XPI_UID_VERSION 1
#define XPI_UID_KEY_LEN 32

struct xpi_uid {
	sa_family_t family; /* AF_INET or AF_INET6 */
	uint16_t port;
	uint32_t scope_id;
	uint8_t addr[16];
	uint8_t key[XPI_UID_KEY_LEN];
};

/* Writes @u as the XPI_UID_LEN bytes of an id. Pure. */
void xpi_uid_write(const struct xpi_uid *u, uint8_t out[XPI_UID_LEN]);

/*
 * Parses an id from @len bytes at @buf: the length, magic, version,
 * checksum, family, port, address and every zero byte are checked.
 * Returns 0 and *@out, or -EPROTO with *@why (if not NULL) saying what is
 * wrong. Pure.
 */
int xpi_uid_parse(const uint8_t *buf, size_t len, struct xpi_uid *out, const char **why);

/* Rank 0's address from @u, as a socket address and as text ("1.2.3.4",
 * "fe80::1%2", without the port; @n >= 64). Pure. */
void xpi_uid_sockaddr(const struct xpi_uid *u, struct sockaddr_storage *ss, socklen_t *len);
void xpi_uid_host(const struct xpi_uid *u, char *host, size_t n);

/*
 * Takes the listening socket xp_get_unique_id() opened in this process for
 * @u out of the table: the caller owns it now. Returns it, or -1 if this
 * process holds none for @u. Thread-safe.
 */
int xpi_uid_take_listener(const struct xpi_uid *u);

/* The address a new job's rank 0 (xp_get_unique_id) or a context of no
 * job (xp_open) listens on, port 0: @ifname's, else the first interface
 * up and not a loopback, else 127.0.0.1. 0, -ENODEV (@ifname has no
 * address: the error detail lists those there are), or getifaddrs's. */
int xpi_uid_pick_address(const char *ifname, struct sockaddr_storage *ss, socklen_t *len);

#endif
