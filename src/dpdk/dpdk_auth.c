/* SPDX-License-Identifier: MIT */
/* Authenticated datagrams for the DPDK path (dpdk_auth.h). */
#include <errno.h>
#include <string.h>

#include "../core/be.h"
#include "dpdk_auth.h"
#include "udp_wire.h"

/* Bound into every key: another layout or use of the key is another key. */
static const char kdf_label[] = "xport dpdk datagram mac v2";

bool xpi_dgram_gcm_ok(void)
{
	return sodium_init() >= 0 && crypto_aead_aes256gcm_is_available();
}

int xpi_dgram_key_init(struct xpi_dgram_key *k, int mac, const uint8_t *job_key,
		       const uint8_t *job_id, uint32_t src, uint32_t dst, uint32_t src_epoch,
		       uint32_t dst_epoch)
{
	if (sodium_init() < 0 || (mac != XPI_DGRAM_MAC_GCM && mac != XPI_DGRAM_MAC_POLY1305) ||
	    (mac == XPI_DGRAM_MAC_GCM && !crypto_aead_aes256gcm_is_available()))
		return -EINVAL;
	/* label, a byte saying whether a job id follows, the id (or zeros),
	 * the MAC, then the pair and its epochs, big-endian */
	uint8_t in[sizeof(kdf_label) + 1 + XPI_DPDK_JOB_ID_LEN + 1 + 16];
	uint8_t *p = in;
	memcpy(p, kdf_label, sizeof(kdf_label));
	p += sizeof(kdf_label);
	*p++ = job_id != NULL;
	if (job_id != NULL)
		memcpy(p, job_id, XPI_DPDK_JOB_ID_LEN);
	else
		memset(p, 0, XPI_DPDK_JOB_ID_LEN);
	p += XPI_DPDK_JOB_ID_LEN;
	*p++ = (uint8_t)mac;
	put_be32(p, src);
	put_be32(p + 4, dst);
	put_be32(p + 8, src_epoch);
	put_be32(p + 12, dst_epoch);
	k->mac = mac;
	crypto_generichash(k->raw, sizeof(k->raw), in, sizeof(in), job_key, XPI_DPDK_AUTH_KEY_LEN);
	if (mac == XPI_DGRAM_MAC_GCM)
		crypto_aead_aes256gcm_beforenm(&k->gcm, k->raw);
	return 0;
}

void xpi_dgram_key_clear(struct xpi_dgram_key *k)
{
	sodium_memzero(k, sizeof(*k));
}

/* 96-bit nonces for both MACs: four zero bytes, then seq big-endian. */
static void nonce_of(const uint8_t *d, uint8_t n[12])
{
	memset(n, 0, 4);
	memcpy(n + 4, d + XPI_DGRAM_SEQ_OFF, 8);
}

/* The tag of @d[0, @len), whose tag field is zero. */
static void tag_of(const struct xpi_dgram_key *k, const uint8_t *d, size_t len,
		   uint8_t tag[XPI_DGRAM_TAG_LEN])
{
	uint8_t n[12];
	nonce_of(d, n);
	if (k->mac == XPI_DGRAM_MAC_GCM) {
		/* Nothing to encrypt: libsodium's arguments are nonnull all
		 * the same, and a zero length reads and writes none of them. */
		uint8_t none[1] = { 0 };
		unsigned long long tl;
		crypto_aead_aes256gcm_encrypt_detached_afternm(none, tag, &tl, none, 0, d, len,
							       NULL, n, &k->gcm);
		return;
	}
	uint8_t otk[crypto_onetimeauth_KEYBYTES];
	crypto_stream_chacha20_ietf(otk, sizeof(otk), n, k->raw);
	crypto_onetimeauth(tag, d, len, otk);
	sodium_memzero(otk, sizeof(otk));
}

void xpi_dgram_seal(const struct xpi_dgram_key *k, uint8_t *d, size_t len)
{
	memset(d + XPI_DGRAM_TAG_OFF, 0, XPI_DGRAM_TAG_LEN);
	tag_of(k, d, len, d + XPI_DGRAM_TAG_OFF);
}

int xpi_dgram_verify(const struct xpi_dgram_key *k, uint8_t *d, size_t len)
{
	if (len < XPI_DGRAM_HDR_LEN)
		return -EBADMSG;
	uint8_t got[XPI_DGRAM_TAG_LEN], want[XPI_DGRAM_TAG_LEN];
	memcpy(got, d + XPI_DGRAM_TAG_OFF, sizeof(got));
	memset(d + XPI_DGRAM_TAG_OFF, 0, sizeof(got));
	tag_of(k, d, len, want);
	memcpy(d + XPI_DGRAM_TAG_OFF, got, sizeof(got));
	return crypto_verify_16(got, want) == 0 ? 0 : -EBADMSG;
}

int xpi_dgram_replay_check(struct xpi_dgram_replay *r, uint64_t seq)
{
	if (seq == 0)
		return -EALREADY; /* never sent under a key */
	if (seq > r->top) {
		uint64_t shift = seq - r->top;
		/* The old top joins the window, at bit shift - 1. */
		if (r->top == 0 || shift > 64)
			r->seen = 0;
		else
			r->seen = (shift == 64 ? 0 : r->seen << shift) | 1ull << (shift - 1);
		r->top = seq;
		return 0;
	}
	uint64_t back = r->top - seq; /* 0: top itself */
	if (back == 0 || back > 64)
		return -EALREADY;
	uint64_t bit = 1ull << (back - 1);
	if (r->seen & bit)
		return -EALREADY;
	r->seen |= bit;
	return 0;
}
