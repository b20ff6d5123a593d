/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the job-key handshake's messages (src/job/auth.c):
 * the input is what a peer sends, a 32-byte hello and then its 32-byte
 * proof (protocol version 3, bound to the job binding "fuzz"). A hello must either parse (only with the magic and enough bytes)
 * and write back to the same bytes, or be refused; the check against our
 * own hello must accept only a peer of our job size with another valid
 * rank and nonce; and the proof must be accepted exactly when it is the
 * one the key gives. Never crash or read past @size. Built with clang
 * -fsanitize=fuzzer when available; replay.c runs the corpus in ordinary
 * builds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "job/auth.h"

/* The key and our side of the handshake: rank 1 of 4 (the corpus's hellos
 * and proofs are made with these). The key is those 32 ASCII bytes. */
static const uint8_t fuzz_key[XPI_AUTH_KEY_LEN] = "xport-fuzz-key-for-the-v2-proofs";
static const struct xpi_auth_hello mine = {
	.version = XPI_AUTH_VERSION,
	.rank = 1,
	.size = 4,
	.nonce = { 0x6d, 0x69, 0x6e, 0x65, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12 },
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (xpi_auth_init() < 0)
		abort(); /* libsodium unusable: nothing below would mean anything */
	struct xpi_auth_hello theirs;
	size_t hlen = size < XPI_AUTH_HELLO_LEN ? size : XPI_AUTH_HELLO_LEN;
	if (xpi_auth_hello_parse(data, hlen, &theirs) < 0) {
		if (hlen == XPI_AUTH_HELLO_LEN && memcmp(data, "XPAU", 4) == 0)
			abort(); /* a whole hello with the magic is never refused */
		return 0;
	}
	if (hlen != XPI_AUTH_HELLO_LEN)
		abort();
	uint8_t again[XPI_AUTH_HELLO_LEN];
	xpi_auth_hello_write(&theirs, again);
	if (memcmp(again, data, sizeof(again)) != 0)
		abort(); /* parse and write disagree */

	int v = xpi_auth_hello_check(&theirs, &mine);
	if (v < XPI_AUTH_HELLO_OK || v > XPI_AUTH_HELLO_REFLECTED)
		abort();
	if (v != XPI_AUTH_HELLO_OK)
		return 0;
	if (theirs.version != XPI_AUTH_VERSION || theirs.size != mine.size ||
	    theirs.rank >= mine.size || theirs.rank == mine.rank ||
	    memcmp(theirs.nonce, mine.nonce, XPI_AUTH_NONCE_LEN) == 0)
		abort(); /* the check let a bad hello through */

	/* The proof the peer must send, as xpi_auth_handshake computes it. */
	uint8_t want[XPI_AUTH_PROOF_LEN];
	xpi_auth_proof(fuzz_key, (int)theirs.rank, (int)mine.rank, (int)mine.size, mine.nonce,
		       theirs.nonce, (struct xpi_auth_bind){ (const uint8_t *)"fuzz", 4 }, want);
	const uint8_t *proof = data + XPI_AUTH_HELLO_LEN;
	size_t plen = size - XPI_AUTH_HELLO_LEN;
	int right = plen == XPI_AUTH_PROOF_LEN && memcmp(proof, want, XPI_AUTH_PROOF_LEN) == 0;
	if (xpi_auth_proof_matches(proof, plen, want) != right)
		abort();
	return 0;
}
