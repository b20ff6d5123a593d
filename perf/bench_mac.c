/* SPDX-License-Identifier: MIT */
/*
 * The candidate MACs for the DPDK transport's datagrams (src/dpdk/dpdk_auth.h),
 * timed over the lengths a datagram has: the 72-byte header alone (an ACK,
 * the latency path), one full datagram (72 + 1400 bytes) and, to see the
 * long-message rate, 8 KiB and 1 MiB. Each candidate does per packet what
 * the transport would have to do, key schedule excluded (done once per
 * pair): AES-GCM over the whole datagram as additional data with a counter
 * nonce (and, split, the header as plaintext: what zero copy would need),
 * and Poly1305 under a per-packet one-time key, as xpi_dgram_seal
 * runs them; SipHash-2-4 (64-bit tag), keyed BLAKE2b, HMAC-SHA-256 and
 * HMAC-SHA-512/256 as one call each. The software UDP checksum, which a
 * sealed datagram no longer needs, for scale.
 *
 *   bench-mac [--ms N]     (prints ns per MAC and GB/s, and JSON lines)
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <sodium.h>

#include "core/siphash.h"
#include "dpdk/dpdk_auth.h"
#include "dpdk/udp_wire.h"

static int64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_RAW, &t);
	return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static uint8_t key[32];
static volatile uint64_t sink;

static void mac_siphash(const uint8_t *p, size_t n)
{
	sink += xpi_siphash24(key, p, n);
}

/* The two the transport runs, as it runs them (xpi_dgram_seal: per-packet
 * nonce from the header's seq; Poly1305's one-time key from ChaCha20). The
 * buffer's first bytes stand for the header; seal writes its tag field. */
static struct xpi_dgram_key kgcm, kpoly;

static void mac_poly1305(const uint8_t *p, size_t n)
{
	xpi_dgram_seal(&kpoly, (uint8_t *)(uintptr_t)p, n);
}

static void mac_gcm(const uint8_t *p, size_t n)
{
	xpi_dgram_seal(&kgcm, (uint8_t *)(uintptr_t)p, n);
}

/* The alternative that would keep zero-copy sends (the payload read where
 * it lies, apart from the header): GCM with the payload as additional
 * data and the header's 56 bytes as plaintext, the ciphertext dropped.
 * libsodium's GCM encrypts even 56 bytes at a cost: measured, it loses
 * more than the copy it saves. */
static void mac_gcm_split(const uint8_t *p, size_t n)
{
	uint8_t c[XPI_DGRAM_TAG_OFF], tag[16], nonce[12] = { 0 };
	unsigned long long tl;
	memcpy(nonce + 4, p + XPI_DGRAM_SEQ_OFF, 8);
	crypto_aead_aes256gcm_encrypt_detached_afternm(c, tag, &tl, p, XPI_DGRAM_TAG_OFF,
						       p + XPI_DGRAM_HDR_LEN, n - XPI_DGRAM_HDR_LEN,
						       NULL, nonce, &kgcm.gcm);
	sink += tag[0];
}

/* The verifying side: the tag zeroed, computed, put back, compared. */
static void verify_gcm(const uint8_t *p, size_t n)
{
	sink += (uint64_t)xpi_dgram_verify(&kgcm, (uint8_t *)(uintptr_t)p, n);
}

/* What a sealed datagram no longer computes: the UDP checksum in software
 * (udp_wire.c), for scale. */
static void csum(const uint8_t *p, size_t n)
{
	sink += xpi_csum_fold(xpi_csum_add(0, p, n));
}

static void mac_blake2b(const uint8_t *p, size_t n)
{
	uint8_t tag[16];
	crypto_generichash(tag, sizeof(tag), p, n, key, 32);
	sink += tag[0];
}

static void mac_hmac256(const uint8_t *p, size_t n)
{
	uint8_t tag[crypto_auth_hmacsha256_BYTES];
	crypto_auth_hmacsha256(tag, p, n, key);
	sink += tag[0];
}

static void mac_hmac512256(const uint8_t *p, size_t n)
{
	uint8_t tag[crypto_auth_hmacsha512256_BYTES];
	crypto_auth_hmacsha512256(tag, p, n, key);
	sink += tag[0];
}

struct cand {
	const char *name;
	void (*fn)(const uint8_t *p, size_t n);
};

int main(int argc, char **argv)
{
	int ms = 200;
	if (argc == 3 && strcmp(argv[1], "--ms") == 0)
		ms = atoi(argv[2]);
	if (sodium_init() < 0)
		return 1;
	randombytes_buf(key, sizeof(key));
	bool have_gcm = xpi_dgram_gcm_ok();
	if (have_gcm)
		xpi_dgram_key_init(&kgcm, XPI_DGRAM_MAC_GCM, key, NULL, 0, 1, 1, 2);
	xpi_dgram_key_init(&kpoly, XPI_DGRAM_MAC_POLY1305, key, NULL, 0, 1, 1, 2);
	static const struct cand cands[] = {
		{ "aes256gcm-gmac", mac_gcm },
		{ "aes256gcm-verify", verify_gcm },
		{ "aes256gcm-split", mac_gcm_split },
		{ "poly1305-chacha20", mac_poly1305 },
		{ "siphash24", mac_siphash },
		{ "blake2b-128", mac_blake2b },
		{ "hmac-sha256", mac_hmac256 },
		{ "hmac-sha512256", mac_hmac512256 },
		{ "udp-csum", csum },
	};
	/* An ACK (the header alone), an 8-byte message (a 56-byte frame
	 * header and 8 bytes), a full datagram, longer runs. */
	static const size_t sizes[] = { XPI_DGRAM_HDR_LEN, XPI_DGRAM_HDR_LEN + 64,
					XPI_DGRAM_HDR_LEN + 1400, 8192, 1 << 20 };
	uint8_t *buf = malloc(1 << 20);
	if (buf == NULL)
		return 1;
	randombytes_buf(buf, 1 << 20);
	printf("%-20s %10s %12s %10s\n", "mac", "bytes", "ns/mac", "GB/s");
	for (size_t c = 0; c < sizeof(cands) / sizeof(cands[0]); c++) {
		if ((cands[c].fn == mac_gcm || cands[c].fn == verify_gcm ||
		     cands[c].fn == mac_gcm_split) &&
		    !have_gcm)
			continue;
		for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			size_t n = sizes[s];
			/* Warm up, then as many as fit in @ms, best of 3. */
			double best = 1e30;
			for (int rep = 0; rep < 3; rep++) {
				int64_t t0 = now_ns(), t;
				long iters = 0;
				do {
					for (int k = 0; k < 16; k++)
						cands[c].fn(buf, n);
					iters += 16;
					t = now_ns();
				} while (t - t0 < (int64_t)ms * 1000000 / 3);
				double ns = (double)(t - t0) / (double)iters;
				if (ns < best)
					best = ns;
			}
			printf("%-20s %10zu %12.1f %10.2f\n", cands[c].name, n, best,
			       (double)n / best);
			fprintf(stderr,
				"{\"mac\":\"%s\",\"bytes\":%zu,\"ns_per_mac\":%.1f,\"GBps\":%.3f}\n",
				cands[c].name, n, best, (double)n / best);
		}
	}
	free(buf);
	return 0;
}
