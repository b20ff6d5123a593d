/* SPDX-License-Identifier: MIT */
/*
 * Mutual authentication of the two ends of a connection by a job key: each
 * side proves it knows the 32-byte key without sending it, so a process of
 * another job (or a stranger on the network) cannot join this one. The
 * primitives are libsodium's: HMAC-SHA-512-256 (crypto_auth) for the proof
 * and BLAKE2b (crypto_generichash) to derive a key from a string.
 *
 * Protocol, version 2. Every integer is big-endian.
 *
 *   1. Both sides send a hello at once (XPI_AUTH_HELLO_LEN = 32 bytes):
 *        0  4  magic "XPAU"
 *        4  2  protocol version (2)
 *        6  2  flags (0; ignored on receipt, for later versions)
 *        8  4  sender's rank
 *       12  4  job size
 *       16 16  nonce: 16 fresh random bytes (getrandom)
 *      and read the other's. A hello with another magic or version, a job
 *      size other than ours, a rank >= size or equal to ours, or our own
 *      nonce (a reflected hello) ends the handshake with -EPROTO. The hello
 *      has the same length and layout as in version 1, so a rank of either
 *      version reads the other's hello whole and refuses it by its version
 *      number, with a message that says so, instead of waiting for bytes
 *      that never come.
 *   2. Both send a proof (XPI_AUTH_PROOF_LEN = 32 bytes, the HMAC tag):
 *        proof = HMAC-SHA-512-256(key, "xport-auth-v2" || role || own rank ||
 *                                      job size || peer nonce || own nonce)
 *      where HMAC-SHA-512-256 is HMAC-SHA-512 cut to its first 32 bytes
 *      (libsodium's crypto_auth), "xport-auth-v2" is those 13 ASCII bytes,
 *      role is one byte, 'L' if own rank < peer rank and 'H' otherwise, and
 *      ranks and size are 4 bytes each: 54 bytes in all (xpi_auth_proof).
 *      Each side checks the other's proof in constant time; a wrong one ends
 *      the handshake with -EACCES.
 *
 * Version 1 (xport before libsodium) had a 16-byte key and an 8-byte SipHash-2-4
 * proof over the same 54 bytes with the label "xport-auth-v1".
 *
 * Why this is enough against a process that does not know the key: each
 * proof covers a nonce the verifier has just drawn, so an old proof cannot
 * be replayed; the prover's rank and role are inside it, so a proof taken
 * from one connection (or reflected back on the same one) never fits
 * another direction or rank. What it does not do: protect the traffic after
 * the handshake, or stop an active man-in-the-middle that relays both
 * handshakes between two honest ranks. A key derived from a short
 * password (xpi_auth_key_from_string) can be guessed offline by anyone who
 * records a handshake; launchers should use random keys (xprun does).
 */
#ifndef XPI_AUTH_H
#define XPI_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define XPI_AUTH_KEY_LEN 32 /* crypto_auth_KEYBYTES */
#define XPI_AUTH_NONCE_LEN 16
#define XPI_AUTH_HELLO_LEN 32
#define XPI_AUTH_PROOF_LEN 32 /* crypto_auth_BYTES */
#define XPI_AUTH_VERSION 2

struct xpi_auth_hello {
	uint16_t version;
	uint16_t flags;
	uint32_t rank;
	uint32_t size;
	uint8_t nonce[XPI_AUTH_NONCE_LEN];
};

/* Writes @h (with the magic) as the 32 wire bytes. Pure. */
void xpi_auth_hello_write(const struct xpi_auth_hello *h, uint8_t buf[XPI_AUTH_HELLO_LEN]);

/* Reads a hello from @len bytes at @buf. Checks the length and the magic
 * only (the handshake checks the fields, so it can say what differs).
 * Returns 0 and *@out, or -EPROTO. Pure. */
int xpi_auth_hello_parse(const uint8_t *buf, size_t len, struct xpi_auth_hello *out);

/* Why a peer's hello is refused (xpi_auth_hello_check). */
enum xpi_auth_hello_verdict {
	XPI_AUTH_HELLO_OK = 0,
	XPI_AUTH_HELLO_VERSION,   /* another protocol version */
	XPI_AUTH_HELLO_SIZE,      /* another job size */
	XPI_AUTH_HELLO_RANK,      /* a rank >= size, or ours */
	XPI_AUTH_HELLO_REFLECTED, /* our own nonce: our hello sent back */
};

/* Checks the peer's parsed hello @theirs against our own @mine, in the
 * order the handshake reports them. Returns enum xpi_auth_hello_verdict. Pure. */
int xpi_auth_hello_check(const struct xpi_auth_hello *theirs, const struct xpi_auth_hello *mine);

/*
 * Makes libsodium ready (sodium_init, once per process; any thread, any
 * number of times). xpi_auth_handshake and xpi_auth_key_from_string call
 * it themselves; callers of xpi_auth_proof must have had it return 0.
 * Returns 0, or -EIO if libsodium cannot be initialised (logged and set as
 * the thread's error detail).
 */
int xpi_auth_init(void);

/* True if the @len bytes at @buf are the proof @want, compared in constant
 * time (sodium_memcmp). Pure. */
bool xpi_auth_proof_matches(const uint8_t *buf, size_t len, const uint8_t want[XPI_AUTH_PROOF_LEN]);

/* Writes to @out the proof a side of rank @own_rank sends to @peer_rank (see
 * above). Pure; needs xpi_auth_init. */
void xpi_auth_proof(const uint8_t key[XPI_AUTH_KEY_LEN], int own_rank, int peer_rank, int size,
		    const uint8_t peer_nonce[XPI_AUTH_NONCE_LEN],
		    const uint8_t own_nonce[XPI_AUTH_NONCE_LEN], uint8_t out[XPI_AUTH_PROOF_LEN]);

/*
 * Runs the handshake on connected stream socket @fd as rank @my_rank of a
 * job of @size ranks, with @key. Both ends call it; the protocol is
 * symmetric. Blocks for at most @timeout_ms in all (poll deadlines; a
 * negative value waits without one). The socket stays open and the
 * caller's, whatever the result; on failure it must not be used further.
 *
 * Returns 0 and *@peer_rank (< @size, != @my_rank), or
 *   -EACCES      the peer's key proof was wrong: it runs with another job
 *                key. Logged, and the thread's error detail
 *                (xp_error_detail) says "wrong job key" and names the
 *                peer's address.
 *   -EPROTO      not an xport peer, another protocol version (an xport
 *                build from before version 2 among them), another job
 *                size, a rank out of range, or a reflected hello
 *   -ETIMEDOUT   the peer did not finish within @timeout_ms
 *   -ECONNRESET  the peer closed or reset the connection
 *   -EIO         libsodium could not be initialised (xpi_auth_init)
 *   -EINVAL      bad arguments; or another negative errno of the socket or
 *                of getrandom().
 * Every failure but -EINVAL is logged and set as the error detail, naming
 * the peer's address.
 */
int xpi_auth_handshake(int fd, const uint8_t key[XPI_AUTH_KEY_LEN], int my_rank, int size,
		       int timeout_ms, int *peer_rank);

/*
 * Derives the 32-byte key from a string (XP_JOB_KEY): BLAKE2b with a
 * 32-byte output (crypto_generichash), keyed with the 16 ASCII bytes
 * "xport-job-key-v2" (no NUL) as a fixed domain-separation context, over
 * the string's bytes without its NUL (NULL is the empty string). The
 * context makes this key differ from any other BLAKE2b of the same string,
 * keyed or not. Deterministic across hosts and versions (the test pins it),
 * so every rank derives the same key. Not a password hash: see above.
 * Returns 0 and @key, or -EIO as xpi_auth_init.
 */
int xpi_auth_key_from_string(const char *s, uint8_t key[XPI_AUTH_KEY_LEN]);

#endif
