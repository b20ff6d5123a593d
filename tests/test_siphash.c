/* SPDX-License-Identifier: MIT */
/*
 * SipHash-2-4 against the paper's published values (Aumasson and Bernstein,
 * "SipHash: a fast short-input PRF", 2012): the worked example of its
 * Appendix A, and the 64 outputs for key 00 01 .. 0f and the messages of
 * length 0 to 63 whose bytes are 00 01 02 ... (the set the reference code
 * ships). The 64 values were computed with a separate implementation in
 * Python written from the paper's specification, not with this code; the
 * first (the empty message, 0x726fdb47dd0e0e31) and the sixteenth (Appendix
 * A) agree with the paper. Also: every length 0..63 at an unaligned address,
 * and that each key and message byte changes the output.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/siphash.h"
#include "testutil.h"

static const uint64_t vectors[64] = {
	0x726fdb47dd0e0e31ULL, /* 0 */
	0x74f839c593dc67fdULL, /* 1 */
	0x0d6c8009d9a94f5aULL, /* 2 */
	0x85676696d7fb7e2dULL, /* 3 */
	0xcf2794e0277187b7ULL, /* 4 */
	0x18765564cd99a68dULL, /* 5 */
	0xcbc9466e58fee3ceULL, /* 6 */
	0xab0200f58b01d137ULL, /* 7 */
	0x93f5f5799a932462ULL, /* 8 */
	0x9e0082df0ba9e4b0ULL, /* 9 */
	0x7a5dbbc594ddb9f3ULL, /* 10 */
	0xf4b32f46226bada7ULL, /* 11 */
	0x751e8fbc860ee5fbULL, /* 12 */
	0x14ea5627c0843d90ULL, /* 13 */
	0xf723ca908e7af2eeULL, /* 14 */
	0xa129ca6149be45e5ULL, /* 15 */
	0x3f2acc7f57c29bdbULL, /* 16 */
	0x699ae9f52cbe4794ULL, /* 17 */
	0x4bc1b3f0968dd39cULL, /* 18 */
	0xbb6dc91da77961bdULL, /* 19 */
	0xbed65cf21aa2ee98ULL, /* 20 */
	0xd0f2cbb02e3b67c7ULL, /* 21 */
	0x93536795e3a33e88ULL, /* 22 */
	0xa80c038ccd5ccec8ULL, /* 23 */
	0xb8ad50c6f649af94ULL, /* 24 */
	0xbce192de8a85b8eaULL, /* 25 */
	0x17d835b85bbb15f3ULL, /* 26 */
	0x2f2e6163076bcfadULL, /* 27 */
	0xde4daaaca71dc9a5ULL, /* 28 */
	0xa6a2506687956571ULL, /* 29 */
	0xad87a3535c49ef28ULL, /* 30 */
	0x32d892fad841c342ULL, /* 31 */
	0x7127512f72f27cceULL, /* 32 */
	0xa7f32346f95978e3ULL, /* 33 */
	0x12e0b01abb051238ULL, /* 34 */
	0x15e034d40fa197aeULL, /* 35 */
	0x314dffbe0815a3b4ULL, /* 36 */
	0x027990f029623981ULL, /* 37 */
	0xcadcd4e59ef40c4dULL, /* 38 */
	0x9abfd8766a33735cULL, /* 39 */
	0x0e3ea96b5304a7d0ULL, /* 40 */
	0xad0c42d6fc585992ULL, /* 41 */
	0x187306c89bc215a9ULL, /* 42 */
	0xd4a60abcf3792b95ULL, /* 43 */
	0xf935451de4f21df2ULL, /* 44 */
	0xa9538f0419755787ULL, /* 45 */
	0xdb9acddff56ca510ULL, /* 46 */
	0xd06c98cd5c0975ebULL, /* 47 */
	0xe612a3cb9ecba951ULL, /* 48 */
	0xc766e62cfcadaf96ULL, /* 49 */
	0xee64435a9752fe72ULL, /* 50 */
	0xa192d576b245165aULL, /* 51 */
	0x0a8787bf8ecb74b2ULL, /* 52 */
	0x81b3e73d20b49b6fULL, /* 53 */
	0x7fa8220ba3b2eceaULL, /* 54 */
	0x245731c13ca42499ULL, /* 55 */
	0xb78dbfaf3a8d83bdULL, /* 56 */
	0xea1ad565322a1a0bULL, /* 57 */
	0x60e61c23a3795013ULL, /* 58 */
	0x6606d7e446282b93ULL, /* 59 */
	0x6ca4ecb15c5f91e1ULL, /* 60 */
	0x9f626da15c9625f3ULL, /* 61 */
	0xe51b38608ef25f57ULL, /* 62 */
	0x958a324ceb064572ULL, /* 63 */
};

static void test_appendix_a(void)
{
	uint8_t key[16], msg[15];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 15; i++)
		msg[i] = (uint8_t)i;
	/* "SipHash-2-4 ... returns a129ca6149be45e5" (Appendix A). */
	T_CHECK(xpi_siphash24(key, msg, sizeof(msg)) == 0xa129ca6149be45e5ULL);
}

static void test_vectors(void)
{
	uint8_t key[16], msg[64];
	/* One spare byte in front, so every message also starts unaligned. */
	uint8_t unaligned[65];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 64; i++)
		msg[i] = (uint8_t)i;
	memcpy(unaligned + 1, msg, sizeof(msg));
	for (size_t n = 0; n < 64; n++) {
		uint64_t h = xpi_siphash24(key, msg, n);
		if (h != vectors[n])
			T_FAIL("length %zu: got 0x%016llx, want 0x%016llx", n,
			       (unsigned long long)h, (unsigned long long)vectors[n]);
		T_CHECK(xpi_siphash24(key, unaligned + 1, n) == h);
	}
	T_CHECK(xpi_siphash24(key, NULL, 0) == vectors[0]);
}

static void test_every_bit_counts(void)
{
	uint8_t key[16], msg[24];
	for (int i = 0; i < 16; i++)
		key[i] = (uint8_t)i;
	for (int i = 0; i < 24; i++)
		msg[i] = (uint8_t)i;
	uint64_t base = xpi_siphash24(key, msg, sizeof(msg));
	for (int i = 0; i < 16 * 8; i++) {
		key[i / 8] ^= (uint8_t)(1u << (i % 8));
		T_CHECK(xpi_siphash24(key, msg, sizeof(msg)) != base);
		key[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	for (int i = 0; i < 24 * 8; i++) {
		msg[i / 8] ^= (uint8_t)(1u << (i % 8));
		T_CHECK(xpi_siphash24(key, msg, sizeof(msg)) != base);
		msg[i / 8] ^= (uint8_t)(1u << (i % 8));
	}
	/* The length is part of the input: a trailing zero byte matters. */
	uint8_t z[2] = { 0, 0 };
	T_CHECK(xpi_siphash24(key, z, 1) != xpi_siphash24(key, z, 2));
}

int main(void)
{
	T_RUN(test_appendix_a);
	T_RUN(test_vectors);
	T_RUN(test_every_bit_counts);
	return 0;
}
