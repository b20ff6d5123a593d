/* SPDX-License-Identifier: MIT */
/* The job-key handshake; the protocol is described in auth.h. */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include <sodium.h>

#include "auth.h"
#include "../core/be.h"
#include "../core/engine.h"
#include "../core/log.h"
#include "sock.h"

_Static_assert(XPI_AUTH_KEY_LEN == crypto_auth_KEYBYTES, "the job key is crypto_auth's key");
_Static_assert(XPI_AUTH_PROOF_LEN == crypto_auth_BYTES, "the proof is crypto_auth's tag");
_Static_assert(XPI_AUTH_KEY_LEN >= crypto_generichash_BYTES_MIN &&
		       XPI_AUTH_KEY_LEN <= crypto_generichash_BYTES_MAX,
	       "BLAKE2b can give the job key's length");

static const uint8_t hello_magic[4] = { 'X', 'P', 'A', 'U' };
static const char proof_label[] = "xport-auth-v2"; /* 13 bytes, no NUL on the wire */
#define PROOF_INPUT_LEN (sizeof(proof_label) - 1 + 1 + 4 + 4 + 2 * XPI_AUTH_NONCE_LEN)
/* The key of the BLAKE2b that derives job keys from strings: 16 bytes, no NUL. */
static const char key_context[] = "xport-job-key-v2";
_Static_assert(sizeof(key_context) - 1 >= crypto_generichash_KEYBYTES_MIN &&
		       sizeof(key_context) - 1 <= crypto_generichash_KEYBYTES_MAX,
	       "the context is a valid BLAKE2b key length");

void xpi_auth_hello_write(const struct xpi_auth_hello *h, uint8_t buf[XPI_AUTH_HELLO_LEN])
{
	memcpy(buf, hello_magic, 4);
	put_be16(buf + 4, h->version);
	put_be16(buf + 6, h->flags);
	put_be32(buf + 8, h->rank);
	put_be32(buf + 12, h->size);
	memcpy(buf + 16, h->nonce, XPI_AUTH_NONCE_LEN);
}

int xpi_auth_hello_parse(const uint8_t *buf, size_t len, struct xpi_auth_hello *out)
{
	if (buf == NULL || len < XPI_AUTH_HELLO_LEN || memcmp(buf, hello_magic, 4) != 0)
		return -EPROTO;
	out->version = get_be16(buf + 4);
	out->flags = get_be16(buf + 6);
	out->rank = get_be32(buf + 8);
	out->size = get_be32(buf + 12);
	memcpy(out->nonce, buf + 16, XPI_AUTH_NONCE_LEN);
	return 0;
}

int xpi_auth_hello_check(const struct xpi_auth_hello *theirs, const struct xpi_auth_hello *mine)
{
	if (theirs->version != XPI_AUTH_VERSION)
		return XPI_AUTH_HELLO_VERSION;
	if (theirs->size != mine->size)
		return XPI_AUTH_HELLO_SIZE;
	if (theirs->rank >= mine->size || theirs->rank == mine->rank)
		return XPI_AUTH_HELLO_RANK;
	if (memcmp(theirs->nonce, mine->nonce, XPI_AUTH_NONCE_LEN) == 0)
		return XPI_AUTH_HELLO_REFLECTED;
	return XPI_AUTH_HELLO_OK;
}

static pthread_once_t sodium_once = PTHREAD_ONCE_INIT;
static int sodium_rc; /* sodium_init's result, written once under sodium_once */

static void sodium_init_once(void)
{
	sodium_rc = sodium_init();
}

int xpi_auth_init(void)
{
	/* sodium_init is itself safe to call from many threads, but it takes a
	 * lock each time; pthread_once makes later calls a load. */
	pthread_once(&sodium_once, sodium_init_once);
	if (sodium_rc < 0) {
		xpi_log_detail(XPI_LOG_INFO,
			       "libsodium could not be initialised (sodium_init returned %d): the "
			       "job key cannot be derived or proved",
			       sodium_rc);
		return -EIO;
	}
	return 0;
}

bool xpi_auth_proof_matches(const uint8_t *buf, size_t len, const uint8_t want[XPI_AUTH_PROOF_LEN])
{
	if (buf == NULL || len != XPI_AUTH_PROOF_LEN)
		return false;
	/* Constant time, so timing tells nothing about how much of a forged
	 * proof was right. */
	return sodium_memcmp(buf, want, XPI_AUTH_PROOF_LEN) == 0;
}

void xpi_auth_proof(const uint8_t key[XPI_AUTH_KEY_LEN], int own_rank, int peer_rank, int size,
		    const uint8_t peer_nonce[XPI_AUTH_NONCE_LEN],
		    const uint8_t own_nonce[XPI_AUTH_NONCE_LEN], uint8_t out[XPI_AUTH_PROOF_LEN])
{
	uint8_t in[PROOF_INPUT_LEN];
	uint8_t *p = in;
	memcpy(p, proof_label, sizeof(proof_label) - 1);
	p += sizeof(proof_label) - 1;
	*p++ = own_rank < peer_rank ? 'L' : 'H';
	put_be32(p, (uint32_t)own_rank);
	p += 4;
	put_be32(p, (uint32_t)size);
	p += 4;
	memcpy(p, peer_nonce, XPI_AUTH_NONCE_LEN);
	p += XPI_AUTH_NONCE_LEN;
	memcpy(p, own_nonce, XPI_AUTH_NONCE_LEN);
	crypto_auth(out, in, sizeof(in), key);
}

int xpi_auth_key_from_string(const char *s, uint8_t key[XPI_AUTH_KEY_LEN])
{
	int rc = xpi_auth_init();
	if (rc < 0)
		return rc;
	if (s == NULL)
		s = "";
	/* crypto_generichash fails only for lengths out of range, which the
	 * static asserts above exclude. */
	if (crypto_generichash(key, XPI_AUTH_KEY_LEN, (const unsigned char *)s, strlen(s),
			       (const unsigned char *)key_context, sizeof(key_context) - 1) != 0) {
		xpi_log_detail(XPI_LOG_INFO, "BLAKE2b failed deriving the job key");
		return -EIO;
	}
	return 0;
}

static int fill_random(uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = getrandom(buf, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* Logs a failure and makes it the thread's error detail. */
static int fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	xpi_log_detailv(XPI_LOG_INFO, fmt, ap);
	va_end(ap);
	return rc;
}

static const char *errtext(int rc)
{
	const char *s = strerrordesc_np(rc < 0 ? -rc : rc);
	return s != NULL ? s : "unknown error";
}

static int io_failed(int rc, int my_rank, const char *peer, const char *step, int timeout_ms)
{
	if (rc == -ETIMEDOUT)
		return fail(rc,
			    "rank %d: authentication with %s timed out after %d ms (%s): the "
			    "peer is not an xport rank, or is stuck",
			    my_rank, peer, timeout_ms, step);
	if (rc == -ECONNRESET)
		return fail(rc,
			    "rank %d: %s closed the connection during authentication (%s): it "
			    "refused us or died",
			    my_rank, peer, step);
	return fail(rc, "rank %d: authentication with %s failed (%s): %s", my_rank, peer, step,
		    errtext(rc));
}

int xpi_auth_handshake(int fd, const uint8_t key[XPI_AUTH_KEY_LEN], int my_rank, int size,
		       int timeout_ms, int *peer_rank)
{
	if (fd < 0 || key == NULL || peer_rank == NULL || size < 1 || my_rank < 0 ||
	    my_rank >= size)
		return -EINVAL;
	int rc = xpi_auth_init();
	if (rc < 0)
		return rc;
	int64_t deadline = xpi_deadline_in(timeout_ms);
	char peer[XPI_SOCK_ADDRSTRLEN];
	xpi_sock_peer_str(fd, peer, sizeof(peer));

	struct xpi_auth_hello mine = {
		.version = XPI_AUTH_VERSION,
		.rank = (uint32_t)my_rank,
		.size = (uint32_t)size,
	};
	rc = fill_random(mine.nonce, sizeof(mine.nonce));
	if (rc < 0)
		return fail(rc, "rank %d: getrandom failed: %s", my_rank, errtext(rc));
	uint8_t buf[XPI_AUTH_HELLO_LEN];
	xpi_auth_hello_write(&mine, buf);
	rc = xpi_sock_send_all(fd, buf, sizeof(buf), deadline);
	if (rc < 0)
		return io_failed(rc, my_rank, peer, "sending hello", timeout_ms);
	rc = xpi_sock_recv_all(fd, buf, sizeof(buf), deadline);
	if (rc < 0)
		return io_failed(rc, my_rank, peer, "waiting for hello", timeout_ms);

	struct xpi_auth_hello theirs;
	if (xpi_auth_hello_parse(buf, sizeof(buf), &theirs) < 0)
		return fail(-EPROTO, "rank %d: %s is not an xport rank (bad hello magic)", my_rank,
			    peer);
	switch (xpi_auth_hello_check(&theirs, &mine)) {
	case XPI_AUTH_HELLO_OK:
		break;
	case XPI_AUTH_HELLO_VERSION:
		return fail(-EPROTO,
			    "rank %d: %s speaks authentication protocol version %u, this build "
			    "speaks %u: run the same xport version on every rank",
			    my_rank, peer, (unsigned)theirs.version, (unsigned)XPI_AUTH_VERSION);
	case XPI_AUTH_HELLO_SIZE:
		return fail(-EPROTO,
			    "rank %d: %s says the job has %u ranks, this rank says %d: the two "
			    "belong to different jobs",
			    my_rank, peer, (unsigned)theirs.size, size);
	case XPI_AUTH_HELLO_RANK:
		return fail(-EPROTO, "rank %d: %s says it is rank %u of a job of %d", my_rank, peer,
			    (unsigned)theirs.rank, size);
	default: /* XPI_AUTH_HELLO_REFLECTED */
		return fail(-EPROTO, "rank %d: %s sent our own nonce back", my_rank, peer);
	}
	int other = (int)theirs.rank;

	uint8_t proof[XPI_AUTH_PROOF_LEN], want[XPI_AUTH_PROOF_LEN];
	xpi_auth_proof(key, my_rank, other, size, theirs.nonce, mine.nonce, proof);
	rc = xpi_sock_send_all(fd, proof, sizeof(proof), deadline);
	if (rc < 0)
		return io_failed(rc, my_rank, peer, "sending key proof", timeout_ms);
	rc = xpi_sock_recv_all(fd, proof, sizeof(proof), deadline);
	if (rc < 0)
		return io_failed(rc, my_rank, peer, "waiting for key proof", timeout_ms);
	xpi_auth_proof(key, other, my_rank, size, mine.nonce, theirs.nonce, want);
	if (!xpi_auth_proof_matches(proof, sizeof(proof), want))
		return fail(-EACCES,
			    "rank %d: wrong job key: the peer at %s (says rank %d) failed the key "
			    "proof; every rank of a job needs the same XP_JOB_KEY",
			    my_rank, peer, other);
	*peer_rank = other;
	return 0;
}
