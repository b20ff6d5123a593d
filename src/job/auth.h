/* SPDX-License-Identifier: MIT */
/*
 * Mutual authentication of the two ends of a connection by a job key: each
 * side proves it knows the 32-byte key without sending it, so a process of
 * another job (or a stranger on the network) cannot join this one. The
 * primitives are libsodium's: HMAC-SHA-512-256 (crypto_auth) for the proof
 * and BLAKE2b (crypto_generichash) to derive a key from a string.
 *
 * Protocol, version 3. Every integer is big-endian.
 *
 *   1. Both sides send a hello at once (XPI_AUTH_HELLO_LEN = 32 bytes):
 *        0  4  magic "XPAU"
 *        4  2  protocol version (3)
 *        6  2  flags (0; ignored on receipt, for later versions)
 *        8  4  sender's rank
 *       12  4  job size
 *       16 16  nonce: 16 fresh random bytes (getrandom)
 *      and read the other's. A hello with another magic or version, a job
 *      size other than ours, a rank >= size or equal to ours, or our own
 *      nonce (a reflected hello) ends the handshake with -EPROTO. The hello
 *      has the same length and layout in every version, so a rank of
 *      another version reads it whole and refuses it by its version number,
 *      with a message that says so, instead of waiting for bytes that never
 *      come.
 *   2. Both send a proof (XPI_AUTH_PROOF_LEN = 32 bytes, an HMAC tag):
 *        proof = HMAC-SHA-512-256(key, "xport-auth-v3" || role || own rank ||
 *                                      job size || peer nonce || own nonce ||
 *                                      binding length (2) || binding)
 *      where HMAC-SHA-512-256 is HMAC-SHA-512 cut to its first 32 bytes
 *      (libsodium's crypto_auth), "xport-auth-v3" is those 13 ASCII bytes,
 *      role is one byte, 'L' if own rank < peer rank and 'H' otherwise, and
 *      ranks and size are 4 bytes each (xpi_auth_proof). The binding names
 *      the job (at most XPI_AUTH_BIND_MAX bytes, the same on both sides):
 *      the bootstrap binds rank 0's rendezvous port, the transports the job
 *      identity rank 0 drew (bootstrap.h), so a proof made for one job never
 *      fits another that shares its key and size, and a handshake relayed
 *      between two such jobs fails. Each side checks the other's proof in
 *      constant time; a wrong one ends the handshake with -EACCES.
 *   3. Optionally, right after its proof, a side sends a short message
 *      (at most XPI_AUTH_DATA_MAX bytes; both sides know its length) and
 *      its tag:
 *        tag = HMAC-SHA-512-256(key, "xport-auth-v3-data" || own rank ||
 *                                    peer rank || peer nonce || own nonce ||
 *                                    binding length (2) || binding ||
 *                                    data length (2) || data)
 *      It is what the connection's proofs vouch for: rank 0 sends the job
 *      identity this way, a TCP connection its channel. A wrong tag ends
 *      the handshake with -EACCES; the data is never used before it checks.
 *
 * Version 2 had no binding and no data; version 1 (xport before libsodium)
 * a 16-byte key and an 8-byte SipHash-2-4 proof.
 *
 * Why this is enough against a process that does not know the key: each
 * proof covers a nonce the verifier has just drawn, so an old proof cannot
 * be replayed; the prover's rank and role are inside it, so a proof taken
 * from one connection (or reflected back on the same one) never fits
 * another direction or rank; the binding keeps it inside its job. What it
 * does not do: keep the traffic after the handshake secret or unaltered,
 * or stop an active man-in-the-middle that relays both handshakes between
 * two honest ranks of the same job. A key derived from a short password
 * (xpi_auth_key_from_string) can be guessed offline by anyone who records a
 * handshake; launchers should use random keys (xprun does).
 *
 * The handshake never blocks inside the library's loops: struct
 * xpi_auth_hs is its state, advanced by xpi_auth_hs_step whenever the
 * socket is ready, so one thread can run many at once (acceptor.h);
 * xpi_auth_handshake is the blocking form for one connection.
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
#define XPI_AUTH_VERSION 3
#define XPI_AUTH_BIND_MAX 64 /* bytes of a job binding */
#define XPI_AUTH_DATA_MAX 64 /* bytes of the optional message after the proof */

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

/* What the two sides of a handshake must agree on besides the key: the
 * job binding (@bind, @bind_len bytes, at most XPI_AUTH_BIND_MAX; may be
 * empty). */
struct xpi_auth_bind {
	const uint8_t *bytes;
	size_t len;
};

/* Writes to @out the proof a side of rank @own_rank sends to @peer_rank (see
 * above). Pure; needs xpi_auth_init. */
void xpi_auth_proof(const uint8_t key[XPI_AUTH_KEY_LEN], int own_rank, int peer_rank, int size,
		    const uint8_t peer_nonce[XPI_AUTH_NONCE_LEN],
		    const uint8_t own_nonce[XPI_AUTH_NONCE_LEN], struct xpi_auth_bind bind,
		    uint8_t out[XPI_AUTH_PROOF_LEN]);

/* Writes to @out the tag of the @len bytes of @data a side of rank
 * @own_rank sends to @peer_rank after its proof (see above). Pure; needs
 * xpi_auth_init. */
void xpi_auth_data_tag(const uint8_t key[XPI_AUTH_KEY_LEN], int own_rank, int peer_rank,
		       const uint8_t peer_nonce[XPI_AUTH_NONCE_LEN],
		       const uint8_t own_nonce[XPI_AUTH_NONCE_LEN], struct xpi_auth_bind bind,
		       const uint8_t *data, size_t len, uint8_t out[XPI_AUTH_PROOF_LEN]);

/* One side of a handshake: what it proves and what it sends and expects. */
struct xpi_auth_args {
	const uint8_t *key; /* XPI_AUTH_KEY_LEN bytes; must outlive the handshake */
	int my_rank, size;
	struct xpi_auth_bind bind; /* copied */
	const uint8_t *send;       /* sent after the proof (copied); NULL if send_len is 0 */
	size_t send_len;           /* 0 to XPI_AUTH_DATA_MAX */
	size_t recv_len;           /* what the peer sends after its proof, 0 to XPI_AUTH_DATA_MAX */
};

/* A handshake in progress on one socket. Fields are the library's; read
 * only @fd, @events, @deadline and, once done, @peer_rank and @data. */
struct xpi_auth_hs {
	int fd;
	short events;                    /* what to poll for before the next xpi_auth_hs_step */
	int64_t deadline;                /* absolute (clock.h), XPI_DEADLINE_NONE for none */
	int peer_rank;                   /* once done */
	uint8_t data[XPI_AUTH_DATA_MAX]; /* once done: the peer's message, verified */
	/* internal */
	const uint8_t *key;
	int my_rank, size, phase;
	uint8_t bind[XPI_AUTH_BIND_MAX];
	size_t bind_len, send_len, recv_len;
	uint8_t send[XPI_AUTH_DATA_MAX];
	struct xpi_auth_hello mine, theirs;
	uint8_t out[XPI_AUTH_PROOF_LEN * 2 + XPI_AUTH_DATA_MAX];
	uint8_t in[XPI_AUTH_PROOF_LEN * 2 + XPI_AUTH_DATA_MAX];
	size_t out_len, out_done, in_len, in_done;
	char peer[80]; /* the peer's address, for messages (XPI_SOCK_ADDRSTRLEN) */
};

/*
 * Starts a handshake on connected, non-blocking stream socket @fd with
 * @a, to finish within @timeout_ms (negative: no deadline). Sends nothing
 * yet. Returns 0, -EINVAL for bad arguments, -EIO (xpi_auth_init) or the
 * errno of getrandom (logged). The socket stays the caller's.
 */
int xpi_auth_hs_start(struct xpi_auth_hs *h, int fd, const struct xpi_auth_args *a, int timeout_ms);

/*
 * Advances @h as far as the socket allows without blocking. Returns 1 when
 * the handshake is done (peer_rank and data written), 0 when it waits for
 * @h->events on @h->fd, or a negative code as xpi_auth_handshake's (logged
 * and set as the thread's error detail; -ETIMEDOUT only if the deadline
 * has passed). Never blocks; never raises SIGPIPE.
 */
int xpi_auth_hs_step(struct xpi_auth_hs *h);

/*
 * Runs the handshake on connected stream socket @fd as @a says, blocking
 * for at most @timeout_ms in all (poll deadlines; a negative value waits
 * without one). Both ends call it; the protocol is symmetric but for the
 * data each sends. The socket stays open and the caller's, whatever the
 * result; on failure it must not be used further.
 *
 * Returns 0, *@peer_rank (< size, != my_rank) and, if @a->recv_len > 0,
 * the peer's verified message in @data (recv_len bytes), or
 *   -EACCES      the peer's key proof (or its message's tag) was wrong: it
 *                runs with another job key, or belongs to another job with
 *                the same key. Logged, and the thread's error detail
 *                (xp_error_detail) says "wrong job key" and names the
 *                peer's address.
 *   -EPROTO      not an xport peer, another protocol version (an xport
 *                build from before version 3 among them), another job
 *                size, a rank out of range, or a reflected hello
 *   -ETIMEDOUT   the peer did not finish within @timeout_ms
 *   -ECONNRESET  the peer closed or reset the connection
 *   -EIO         libsodium could not be initialised (xpi_auth_init)
 *   -EINVAL      bad arguments; or another negative errno of the socket or
 *                of getrandom().
 * Every failure but -EINVAL is logged and set as the error detail, naming
 * the peer's address.
 */
int xpi_auth_handshake(int fd, const struct xpi_auth_args *a, int timeout_ms, int *peer_rank,
		       uint8_t *data);

/* Fills @buf with @len random bytes (getrandom). Returns 0 or -errno. */
int xpi_auth_random(uint8_t *buf, size_t len);

/* Writes to @out the 32-byte identity of the job whose rank 0 bound its
 * handshakes to @bind and drew @nonce (32 bytes): BLAKE2b-256, keyed with
 * "xport-job-id-v1", over the binding's length (2), the binding and the
 * nonce. Pure; needs xpi_auth_init. */
void xpi_auth_job_id(struct xpi_auth_bind bind, const uint8_t nonce[32], uint8_t out[32]);

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
