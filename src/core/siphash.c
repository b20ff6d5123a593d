/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4, written from section 2 of the paper (Aumasson and Bernstein,
 * 2012): initialisation, c = 2 compression rounds per 8-byte word, the last
 * word carrying the message length modulo 256 in its top byte, and d = 4
 * finalisation rounds. tests/test_siphash.c checks it against the paper's
 * Appendix A example and 64 vectors made by a separate reference.
 */
#include "siphash.h"

static inline uint64_t rotl64(uint64_t x, unsigned b)
{
	return (x << b) | (x >> (64 - b));
}

static inline uint64_t load_le64(const uint8_t *p)
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

struct sip_state {
	uint64_t v0, v1, v2, v3;
};

/* SipRound: the ARX network of the paper's figure 2.2. */
static inline void sip_round(struct sip_state *s)
{
	s->v0 += s->v1;
	s->v1 = rotl64(s->v1, 13);
	s->v1 ^= s->v0;
	s->v0 = rotl64(s->v0, 32);
	s->v2 += s->v3;
	s->v3 = rotl64(s->v3, 16);
	s->v3 ^= s->v2;
	s->v0 += s->v3;
	s->v3 = rotl64(s->v3, 21);
	s->v3 ^= s->v0;
	s->v2 += s->v1;
	s->v1 = rotl64(s->v1, 17);
	s->v1 ^= s->v2;
	s->v2 = rotl64(s->v2, 32);
}

static inline void sip_compress(struct sip_state *s, uint64_t m)
{
	s->v3 ^= m;
	sip_round(s);
	sip_round(s);
	s->v0 ^= m;
}

uint64_t xpi_siphash24(const uint8_t key[XPI_SIPHASH_KEY_LEN], const void *data, size_t len)
{
	const uint8_t *p = data;
	uint64_t k0 = load_le64(key), k1 = load_le64(key + 8);
	/* "somepseudorandomlygeneratedbytes" */
	struct sip_state s = {
		.v0 = k0 ^ 0x736f6d6570736575ULL,
		.v1 = k1 ^ 0x646f72616e646f6dULL,
		.v2 = k0 ^ 0x6c7967656e657261ULL,
		.v3 = k1 ^ 0x7465646279746573ULL,
	};
	size_t full = len & ~(size_t)7;
	for (size_t i = 0; i < full; i += 8)
		sip_compress(&s, load_le64(p + i));
	/* Last word: the 0..7 remaining bytes, then len mod 256 in the top byte. */
	uint64_t last = (uint64_t)(len & 0xff) << 56;
	for (size_t i = 0; i < (len & 7); i++)
		last |= (uint64_t)p[full + i] << (8 * i);
	sip_compress(&s, last);
	s.v2 ^= 0xff;
	for (int i = 0; i < 4; i++)
		sip_round(&s);
	return s.v0 ^ s.v1 ^ s.v2 ^ s.v3;
}
