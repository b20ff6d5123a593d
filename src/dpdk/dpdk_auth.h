/* SPDX-License-Identifier: MIT */
/*
 * Authenticated datagrams for the DPDK path (issue 24, item 3): every
 * datagram of a pair carries a MAC over its xport header and payload under
 * a key of that pair and direction, and a receiver uses nothing of a
 * datagram (ACK, SACK, credit, data) before the MAC verifies.
 *
 * Keys: one per ordered pair of ranks and per run, derived from the job key
 * (xpi_boot_key, which every rank holds through the authenticated
 * bootstrap) by keyed BLAKE2b over a fixed label, the job's identity, the
 * sender's and the receiver's ranks and both their epochs (the per-run
 * incarnations the bootstrap exchanged): a datagram of another job, of the
 * other direction, of another pair or of an earlier run of either rank does
 * not verify.
 *
 * The MAC, chosen by measurement (perf/bench_mac.c, docs/DPDK-WIRE.md):
 * AES-256-GCM with the whole datagram (header, tag zeroed, and payload) as
 * additional data and nothing encrypted, i.e. GMAC, where the CPU has
 * AES-NI and PCLMUL (crypto_aead_aes256gcm_is_available); else Poly1305
 * under a one-time key, the first 32 bytes of ChaCha20's keystream for
 * the pair key and the nonce (the construction of RFC 8439 2.6), which
 * libsodium runs everywhere. A pair uses GCM only if both ends can.
 * Either way the tag is 16 bytes: a 64-bit GCM tag leaves forgeries a
 * chance of 2^-64 times the message's length in blocks per try, and each
 * success teaches the forger about the hash key (Ferguson, "Authentication
 * weaknesses in GCM", 2005); an attacker on the segment can try millions
 * a second for as long as a job runs.
 *
 * Nonces: the header's 64-bit seq, the sender's count of datagrams to that
 * receiver, 1 for the first, one more for every datagram built (a resent
 * DATA and every ACK take a fresh one). A key serves one direction of one
 * pair in one run, so (key, nonce) never repeats: GCM and the Poly1305 key
 * both require that.
 *
 * Replays: the receiver keeps the highest seq verified and a window of
 * the 64 below it (RFC 4303 3.4.3): a datagram seen already or older than
 * the window is dropped unused. The reliability layer would mostly shrug a
 * replay off (an old psn is a duplicate, an old acknowledgement moves
 * nothing), but not once its 32-bit psns wrap, where a replayed old
 * datagram reads as new data and an old ack as one for packets not sent
 * (which fails the pair): seq is 64 bits and never wraps.
 */
#ifndef XPI_DPDK_AUTH_H
#define XPI_DPDK_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sodium.h>

#define XPI_DPDK_AUTH_KEY_LEN 32u
#define XPI_DPDK_JOB_ID_LEN 32u

enum xpi_dgram_mac {
	XPI_DGRAM_MAC_GCM = 1,      /* AES-256-GCM, all additional data */
	XPI_DGRAM_MAC_POLY1305 = 2, /* Poly1305, one-time key from ChaCha20 */
};

/* One direction of one pair: its key, as the MAC wants it. */
struct xpi_dgram_key {
	crypto_aead_aes256gcm_state gcm; /* expanded once (16-byte aligned) */
	uint8_t raw[XPI_DPDK_AUTH_KEY_LEN];
	int mac; /* enum xpi_dgram_mac */
};

/* What a receiver saw of one direction: replays are refused. */
struct xpi_dgram_replay {
	uint64_t top;  /* the highest seq verified (0: none yet) */
	uint64_t seen; /* bit i: seq top - 1 - i verified */
};

/* Whether this CPU runs libsodium's AES-256-GCM (AES-NI and PCLMUL). */
bool xpi_dgram_gcm_ok(void);

/*
 * The key of datagrams from rank @src (of epoch @src_epoch) to rank @dst
 * (of epoch @dst_epoch) of the job whose key is @job_key
 * (XPI_DPDK_AUTH_KEY_LEN bytes) and whose identity is @job_id
 * (XPI_DPDK_JOB_ID_LEN bytes; NULL: none known, the job key alone), for
 * the MAC @mac, into *@k. Pure but for the expansion of the AES key; any
 * thread. 0, or -EINVAL for a MAC this CPU cannot run.
 */
int xpi_dgram_key_init(struct xpi_dgram_key *k, int mac, const uint8_t *job_key,
		       const uint8_t *job_id, uint32_t src, uint32_t dst, uint32_t src_epoch,
		       uint32_t dst_epoch);
/* Wipes *@k. */
void xpi_dgram_key_clear(struct xpi_dgram_key *k);

/*
 * Seals the datagram @d[0, @len) (our header, as xpi_dgram_hdr_pack wrote
 * it with its seq, then the payload): writes the tag over the header's
 * zeroed tag field. @len >= XPI_DGRAM_HDR_LEN.
 */
void xpi_dgram_seal(const struct xpi_dgram_key *k, uint8_t *d, size_t len);

/*
 * Verifies the datagram @d[0, @len) as received: 0 if its tag is right,
 * -EBADMSG if not (or if @len is shorter than a header). The tag field is
 * zeroed for the computation and put back: @d is written to, and on
 * return holds what it held.
 */
int xpi_dgram_verify(const struct xpi_dgram_key *k, uint8_t *d, size_t len);

/* Whether @seq of a verified datagram is new to *@r (then recorded: 0)
 * or seen already or older than the window (-EALREADY). */
int xpi_dgram_replay_check(struct xpi_dgram_replay *r, uint64_t seq);

#endif
