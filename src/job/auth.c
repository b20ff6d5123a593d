/* SPDX-License-Identifier: MIT */
/* The job-key handshake; the protocol is described in auth.h. */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>

#include <sodium.h>

#include "auth.h"
#include "../core/be.h"
#include "../core/engine.h"
#include "../core/log.h"
#include "sock.h"

_Static_assert(XPI_AUTH_KEY_LEN == crypto_auth_KEYBYTES, "the job key is crypto_auth's key");
_Static_assert(XPI_AUTH_PROOF_LEN == crypto_auth_BYTES, "the proof is crypto_auth's tag");
_Static_assert(sizeof(((struct xpi_auth_hs *)0)->peer) == XPI_SOCK_ADDRSTRLEN,
	       "a handshake holds a whole peer address");
_Static_assert(XPI_AUTH_PROOF_LEN == crypto_auth_hmacsha512256_BYTES,
	       "crypto_auth is HMAC-SHA-512-256");
_Static_assert(XPI_AUTH_KEY_LEN >= crypto_generichash_BYTES_MIN &&
		       XPI_AUTH_KEY_LEN <= crypto_generichash_BYTES_MAX,
	       "BLAKE2b can give the job key's length");

static const uint8_t hello_magic[4] = { 'X', 'P', 'A', 'U' };
static const char proof_label[] = "xport-auth-v3";     /* 13 bytes, no NUL on the wire */
static const char data_label[] = "xport-auth-v3-data"; /* 18 bytes, no NUL on the wire */
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

/* Starts the HMAC every tag of the handshake is: under @key, over @head
 * (label, roles, ranks), both nonces and the binding, its length first. */
static void mac_start(crypto_auth_hmacsha512256_state *st, const uint8_t *key, const uint8_t *head,
		      size_t head_len, const uint8_t peer_nonce[XPI_AUTH_NONCE_LEN],
		      const uint8_t own_nonce[XPI_AUTH_NONCE_LEN], struct xpi_auth_bind bind)
{
	uint8_t len[2];
	put_be16(len, (uint16_t)bind.len);
	crypto_auth_hmacsha512256_init(st, key, XPI_AUTH_KEY_LEN);
	crypto_auth_hmacsha512256_update(st, head, head_len);
	crypto_auth_hmacsha512256_update(st, peer_nonce, XPI_AUTH_NONCE_LEN);
	crypto_auth_hmacsha512256_update(st, own_nonce, XPI_AUTH_NONCE_LEN);
	crypto_auth_hmacsha512256_update(st, len, sizeof(len));
	if (bind.len > 0)
		crypto_auth_hmacsha512256_update(st, bind.bytes, bind.len);
}

void xpi_auth_proof(const uint8_t key[XPI_AUTH_KEY_LEN], int own_rank, int peer_rank, int size,
		    const uint8_t peer_nonce[XPI_AUTH_NONCE_LEN],
		    const uint8_t own_nonce[XPI_AUTH_NONCE_LEN], struct xpi_auth_bind bind,
		    uint8_t out[XPI_AUTH_PROOF_LEN])
{
	uint8_t head[sizeof(proof_label) - 1 + 1 + 4 + 4];
	uint8_t *p = head;
	memcpy(p, proof_label, sizeof(proof_label) - 1);
	p += sizeof(proof_label) - 1;
	*p++ = own_rank < peer_rank ? 'L' : 'H';
	put_be32(p, (uint32_t)own_rank);
	put_be32(p + 4, (uint32_t)size);
	crypto_auth_hmacsha512256_state st;
	mac_start(&st, key, head, sizeof(head), peer_nonce, own_nonce, bind);
	crypto_auth_hmacsha512256_final(&st, out);
}

void xpi_auth_data_tag(const uint8_t key[XPI_AUTH_KEY_LEN], int own_rank, int peer_rank,
		       const uint8_t peer_nonce[XPI_AUTH_NONCE_LEN],
		       const uint8_t own_nonce[XPI_AUTH_NONCE_LEN], struct xpi_auth_bind bind,
		       const uint8_t *data, size_t len, uint8_t out[XPI_AUTH_PROOF_LEN])
{
	uint8_t head[sizeof(data_label) - 1 + 4 + 4];
	memcpy(head, data_label, sizeof(data_label) - 1);
	put_be32(head + sizeof(data_label) - 1, (uint32_t)own_rank);
	put_be32(head + sizeof(data_label) - 1 + 4, (uint32_t)peer_rank);
	crypto_auth_hmacsha512256_state st;
	mac_start(&st, key, head, sizeof(head), peer_nonce, own_nonce, bind);
	uint8_t dlen[2];
	put_be16(dlen, (uint16_t)len);
	crypto_auth_hmacsha512256_update(&st, dlen, sizeof(dlen));
	if (len > 0)
		crypto_auth_hmacsha512256_update(&st, data, len);
	crypto_auth_hmacsha512256_final(&st, out);
}

void xpi_auth_job_id(struct xpi_auth_bind bind, const uint8_t nonce[32], uint8_t out[32])
{
	static const char label[] = "xport-job-id-v1"; /* 15 bytes, no NUL */
	uint8_t len[2];
	put_be16(len, (uint16_t)bind.len);
	crypto_generichash_state st;
	crypto_generichash_init(&st, (const unsigned char *)label, sizeof(label) - 1, 32);
	crypto_generichash_update(&st, len, sizeof(len));
	if (bind.len > 0)
		crypto_generichash_update(&st, bind.bytes, bind.len);
	crypto_generichash_update(&st, nonce, 32);
	crypto_generichash_final(&st, out, 32);
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

int xpi_auth_random(uint8_t *buf, size_t len)
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

static int io_failed(const struct xpi_auth_hs *h, int rc, const char *step)
{
	if (rc == -ETIMEDOUT)
		return fail(rc,
			    "rank %d: authentication with %s timed out (%s): the peer is not an "
			    "xport rank, or is stuck",
			    h->my_rank, h->peer, step);
	if (rc == -ECONNRESET)
		return fail(rc,
			    "rank %d: %s closed the connection during authentication (%s): it "
			    "refused us or died",
			    h->my_rank, h->peer, step);
	return fail(rc, "rank %d: authentication with %s failed (%s): %s", h->my_rank, h->peer,
		    step, errtext(rc));
}

/* The phases: each sends its out bytes and reads its in bytes. */
enum { PH_HELLO, PH_PROOF, PH_DONE };

static const char *phase_step(const struct xpi_auth_hs *h, bool sending)
{
	if (h->phase == PH_HELLO)
		return sending ? "sending hello" : "waiting for hello";
	return sending ? "sending key proof" : "waiting for key proof";
}

int xpi_auth_hs_start(struct xpi_auth_hs *h, int fd, const struct xpi_auth_args *a, int timeout_ms)
{
	if (h == NULL || a == NULL || fd < 0 || a->key == NULL || a->size < 1 || a->my_rank < 0 ||
	    a->my_rank >= a->size || a->bind.len > XPI_AUTH_BIND_MAX ||
	    (a->bind.len > 0 && a->bind.bytes == NULL) || a->send_len > XPI_AUTH_DATA_MAX ||
	    (a->send_len > 0 && a->send == NULL) || a->recv_len > XPI_AUTH_DATA_MAX)
		return -EINVAL;
	int rc = xpi_auth_init();
	if (rc < 0)
		return rc;
	memset(h, 0, sizeof(*h));
	h->fd = fd;
	h->deadline = xpi_deadline_in(timeout_ms);
	h->peer_rank = -1;
	h->key = a->key;
	h->my_rank = a->my_rank;
	h->size = a->size;
	h->bind_len = a->bind.len;
	if (a->bind.len > 0)
		memcpy(h->bind, a->bind.bytes, a->bind.len);
	h->send_len = a->send_len;
	if (a->send_len > 0)
		memcpy(h->send, a->send, a->send_len);
	h->recv_len = a->recv_len;
	xpi_sock_peer_str(fd, h->peer, sizeof(h->peer));
	h->mine = (struct xpi_auth_hello){
		.version = XPI_AUTH_VERSION,
		.rank = (uint32_t)a->my_rank,
		.size = (uint32_t)a->size,
	};
	rc = xpi_auth_random(h->mine.nonce, sizeof(h->mine.nonce));
	if (rc < 0)
		return fail(rc, "rank %d: getrandom failed: %s", a->my_rank, errtext(rc));
	h->phase = PH_HELLO;
	xpi_auth_hello_write(&h->mine, h->out);
	h->out_len = XPI_AUTH_HELLO_LEN;
	h->in_len = XPI_AUTH_HELLO_LEN;
	h->events = POLLOUT;
	return 0;
}

/* The peer's hello is in: check it, and queue our proof and message. */
static int hello_received(struct xpi_auth_hs *h)
{
	struct xpi_auth_hello *theirs = &h->theirs;
	int my_rank = h->my_rank;
	if (xpi_auth_hello_parse(h->in, XPI_AUTH_HELLO_LEN, theirs) < 0)
		return fail(-EPROTO, "rank %d: %s is not an xport rank (bad hello magic)", my_rank,
			    h->peer);
	switch (xpi_auth_hello_check(theirs, &h->mine)) {
	case XPI_AUTH_HELLO_OK:
		break;
	case XPI_AUTH_HELLO_VERSION:
		return fail(-EPROTO,
			    "rank %d: %s speaks authentication protocol version %u, this build "
			    "speaks %u: run the same xport version on every rank",
			    my_rank, h->peer, (unsigned)theirs->version,
			    (unsigned)XPI_AUTH_VERSION);
	case XPI_AUTH_HELLO_SIZE:
		return fail(-EPROTO,
			    "rank %d: %s says the job has %u ranks, this rank says %d: the two "
			    "belong to different jobs",
			    my_rank, h->peer, (unsigned)theirs->size, h->size);
	case XPI_AUTH_HELLO_RANK:
		return fail(-EPROTO, "rank %d: %s says it is rank %u of a job of %d", my_rank,
			    h->peer, (unsigned)theirs->rank, h->size);
	default: /* XPI_AUTH_HELLO_REFLECTED */
		return fail(-EPROTO, "rank %d: %s sent our own nonce back", my_rank, h->peer);
	}
	int other = (int)theirs->rank;
	struct xpi_auth_bind bind = { h->bind, h->bind_len };
	xpi_auth_proof(h->key, my_rank, other, h->size, theirs->nonce, h->mine.nonce, bind, h->out);
	h->out_len = XPI_AUTH_PROOF_LEN;
	if (h->send_len > 0) {
		memcpy(h->out + h->out_len, h->send, h->send_len);
		xpi_auth_data_tag(h->key, my_rank, other, theirs->nonce, h->mine.nonce, bind,
				  h->send, h->send_len, h->out + h->out_len + h->send_len);
		h->out_len += h->send_len + XPI_AUTH_PROOF_LEN;
	}
	h->in_len = XPI_AUTH_PROOF_LEN + (h->recv_len > 0 ? h->recv_len + XPI_AUTH_PROOF_LEN : 0);
	return 0;
}

/* The peer's proof (and message) are in: check them. */
static int proof_received(struct xpi_auth_hs *h)
{
	int other = (int)h->theirs.rank;
	struct xpi_auth_bind bind = { h->bind, h->bind_len };
	uint8_t want[XPI_AUTH_PROOF_LEN];
	xpi_auth_proof(h->key, other, h->my_rank, h->size, h->mine.nonce, h->theirs.nonce, bind,
		       want);
	bool ok = xpi_auth_proof_matches(h->in, XPI_AUTH_PROOF_LEN, want);
	if (ok && h->recv_len > 0) {
		const uint8_t *data = h->in + XPI_AUTH_PROOF_LEN;
		xpi_auth_data_tag(h->key, other, h->my_rank, h->mine.nonce, h->theirs.nonce, bind,
				  data, h->recv_len, want);
		ok = xpi_auth_proof_matches(data + h->recv_len, XPI_AUTH_PROOF_LEN, want);
		if (ok)
			memcpy(h->data, data, h->recv_len);
	}
	if (!ok)
		return fail(-EACCES,
			    "rank %d: wrong job key: the peer at %s (says rank %d) failed the key "
			    "proof; every rank of a job needs the same XP_JOB_KEY, and a rank of "
			    "another job with the same key is refused too",
			    h->my_rank, h->peer, other);
	h->peer_rank = other;
	return 0;
}

/* One send of what is left of the phase's bytes (@sending) or one receive
 * of what is missing. Returns 1 if bytes moved, 0 if the socket would
 * block (@h->events says for what), or a negative code (logged). */
static int io_once(struct xpi_auth_hs *h, bool sending)
{
	ssize_t n;
	do {
		if (sending)
			n = send(h->fd, h->out + h->out_done, h->out_len - h->out_done,
				 MSG_DONTWAIT | MSG_NOSIGNAL);
		else
			n = recv(h->fd, h->in + h->in_done, h->in_len - h->in_done, MSG_DONTWAIT);
	} while (n < 0 && errno == EINTR);
	if (n == 0 && !sending)
		return io_failed(h, -ECONNRESET, phase_step(h, false));
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
		h->events = sending ? POLLOUT : POLLIN;
		return 0;
	}
	if (n < 0) /* the one code for "the other side is gone" */
		return io_failed(h, errno == EPIPE || errno == ECONNRESET ? -ECONNRESET : -errno,
				 phase_step(h, sending));
	*(sending ? &h->out_done : &h->in_done) += (size_t)n;
	return 1;
}

int xpi_auth_hs_step(struct xpi_auth_hs *h)
{
	while (h->phase != PH_DONE) {
		bool sending = h->out_done < h->out_len;
		if (sending || h->in_done < h->in_len) {
			int rc = io_once(h, sending);
			if (rc < 0)
				return rc;
			if (rc == 0)
				break;
			continue;
		}
		int rc = h->phase == PH_HELLO ? hello_received(h) : proof_received(h);
		if (rc < 0)
			return rc;
		h->phase++;
		h->out_done = 0;
		h->in_done = 0;
	}
	if (h->phase == PH_DONE)
		return 1;
	if (xpi_deadline_left_ms(h->deadline) == 0)
		return io_failed(h, -ETIMEDOUT, phase_step(h, h->events == POLLOUT));
	return 0;
}

int xpi_auth_handshake(int fd, const struct xpi_auth_args *a, int timeout_ms, int *peer_rank,
		       uint8_t *data)
{
	struct xpi_auth_hs h;
	if (peer_rank == NULL || (a != NULL && a->recv_len > 0 && data == NULL))
		return -EINVAL;
	int rc = xpi_auth_hs_start(&h, fd, a, timeout_ms);
	while (rc == 0) {
		rc = xpi_auth_hs_step(&h);
		if (rc != 0)
			break;
		rc = xpi_sock_wait(fd, h.events, h.deadline);
		if (rc == -ETIMEDOUT)
			rc = io_failed(&h, rc, phase_step(&h, h.events == POLLOUT));
		else if (rc < 0)
			rc = io_failed(&h, rc, "waiting");
	}
	if (rc < 0)
		return rc;
	*peer_rank = h.peer_rank;
	if (a->recv_len > 0)
		memcpy(data, h.data, a->recv_len);
	return 0;
}
