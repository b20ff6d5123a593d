/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4: a keyed 64-bit pseudorandom function (Aumasson and
 * Bernstein, "SipHash: a fast short-input PRF", INDOCRYPT 2012), here for
 * the host identity of capability cards (xpi_card_host_id). The job key
 * uses libsodium instead (src/job/auth.h).
 * Not for secrecy of anything longer than a 128-bit key, and its 64-bit
 * output is a MAC tag, not a collision-resistant hash.
 */
#ifndef XPI_SIPHASH_H
#define XPI_SIPHASH_H

#include <stddef.h>
#include <stdint.h>

#define XPI_SIPHASH_KEY_LEN 16

/*
 * SipHash-2-4 of @len bytes at @data under the 16-byte @key. The key's two
 * halves and the message are read as little-endian 64-bit words, as the
 * paper specifies, so the result is the same on every host. Pure; any thread.
 */
uint64_t xpi_siphash24(const uint8_t key[XPI_SIPHASH_KEY_LEN], const void *data, size_t len);

#endif
