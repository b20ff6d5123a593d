/* SPDX-License-Identifier: MIT */
/*
 * The DPDK path's datagram MACs (src/dpdk/dpdk_auth.c), as pure functions:
 * a sealed datagram verifies, and with any one byte changed (header, tag
 * or payload) or under any other key (the other direction, another pair,
 * another run of either rank, another job key or job id) it does not, for
 * each MAC this CPU runs; the replay window takes each seq once and
 * nothing older than its reach.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dpdk/dpdk_auth.h"
#include "dpdk/udp_wire.h"
#include "testutil.h"

#define PAYLOAD 1400u
#define LEN (XPI_DGRAM_HDR_LEN + PAYLOAD)

static uint8_t job_key[32], job_id[32];

static void datagram(uint8_t *d, uint64_t seq)
{
	struct xpi_dgram_hdr h = {
		.type = XPI_DGRAM_DATA,
		.src_rank = 1,
		.dst_rank = 0,
		.epoch = 0x11223344,
		.psn = 7,
		.ack = 5,
		.sack = 0x8001,
		.credit = 64,
		.msg_len = PAYLOAD,
		.seq = seq,
	};
	xpi_dgram_hdr_pack(&h, d);
	for (unsigned i = 0; i < PAYLOAD; i++)
		d[XPI_DGRAM_HDR_LEN + i] = (uint8_t)(i * 31 + 3);
}

static void test_mac(int mac)
{
	struct xpi_dgram_key k, other;
	uint8_t d[LEN], copy[LEN];
	T_OK(xpi_dgram_key_init(&k, mac, job_key, job_id, 1, 0, 10, 20));
	datagram(d, 1);
	xpi_dgram_seal(&k, d, LEN);
	memcpy(copy, d, LEN);
	T_EQ(xpi_dgram_verify(&k, d, LEN), 0);
	T_CHECK(memcmp(d, copy, LEN) == 0); /* verification puts the tag back */
	/* One bit changed anywhere: refused, and the datagram as it was. */
	for (size_t i = 0; i < LEN; i++) {
		d[i] ^= 0x20;
		if (xpi_dgram_verify(&k, d, LEN) != -EBADMSG)
			T_FAIL("mac %d: byte %zu changed and the datagram still verifies", mac, i);
		d[i] ^= 0x20;
	}
	T_EQ(xpi_dgram_verify(&k, d, LEN), 0);
	/* Shorter or longer (a byte dropped or added at the end). */
	T_EQ(xpi_dgram_verify(&k, d, LEN - 1), -EBADMSG);
	T_EQ(xpi_dgram_verify(&k, d, XPI_DGRAM_HDR_LEN - 1), -EBADMSG);
	/* No tag at all, as a forger without the key would send. */
	datagram(copy, 1);
	T_EQ(xpi_dgram_verify(&k, copy, LEN), -EBADMSG);
	/* Every other key refuses it. */
	struct {
		const uint8_t *key, *id;
		uint32_t src, dst, se, de;
	} others[] = {
		{ job_key, job_id, 0, 1, 20, 10 }, /* the other direction */
		{ job_key, job_id, 1, 2, 10, 20 }, /* another pair */
		{ job_key, job_id, 1, 0, 11, 20 }, /* another run of the sender */
		{ job_key, job_id, 1, 0, 10, 21 }, /* of the receiver */
		{ job_key, NULL, 1, 0, 10, 20 },   /* no job id */
		{ job_id, job_id, 1, 0, 10, 20 },  /* another job key */
	};
	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		T_OK(xpi_dgram_key_init(&other, mac, others[i].key, others[i].id, others[i].src,
					others[i].dst, others[i].se, others[i].de));
		if (xpi_dgram_verify(&other, d, LEN) != -EBADMSG)
			T_FAIL("mac %d: key %zu verifies a datagram of another", mac, i);
	}
	/* The same inputs, the same key (every rank derives its peers'). */
	T_OK(xpi_dgram_key_init(&other, mac, job_key, job_id, 1, 0, 10, 20));
	T_CHECK(memcmp(other.raw, k.raw, sizeof(k.raw)) == 0);
	/* A new seq, a new tag: the same bytes under another nonce. */
	memcpy(copy, d, LEN);
	datagram(copy, 2);
	xpi_dgram_seal(&k, copy, LEN);
	T_CHECK(memcmp(copy + XPI_DGRAM_TAG_OFF, d + XPI_DGRAM_TAG_OFF, XPI_DGRAM_TAG_LEN) != 0);
	/* An ACK: the header alone. */
	datagram(copy, 3);
	xpi_dgram_seal(&k, copy, XPI_DGRAM_HDR_LEN);
	T_EQ(xpi_dgram_verify(&k, copy, XPI_DGRAM_HDR_LEN), 0);
	copy[20] ^= 1; /* its ack field */
	T_EQ(xpi_dgram_verify(&k, copy, XPI_DGRAM_HDR_LEN), -EBADMSG);
	xpi_dgram_key_clear(&k);
	xpi_dgram_key_clear(&other);
}

static void test_macs(void)
{
	test_mac(XPI_DGRAM_MAC_POLY1305);
	if (xpi_dgram_gcm_ok())
		test_mac(XPI_DGRAM_MAC_GCM);
	else
		fprintf(stderr, "(no AES-NI: AES-256-GCM not tested)\n");
	/* The two MACs' keys differ, so neither verifies the other's. */
	struct xpi_dgram_key a, b;
	T_OK(xpi_dgram_key_init(&a, XPI_DGRAM_MAC_POLY1305, job_key, NULL, 0, 1, 1, 2));
	if (xpi_dgram_gcm_ok()) {
		T_OK(xpi_dgram_key_init(&b, XPI_DGRAM_MAC_GCM, job_key, NULL, 0, 1, 1, 2));
		T_CHECK(memcmp(a.raw, b.raw, sizeof(a.raw)) != 0);
	}
	T_EQ(xpi_dgram_key_init(&a, 9, job_key, NULL, 0, 1, 1, 2), -EINVAL);
}

static void test_replay(void)
{
	struct xpi_dgram_replay r = { 0 };
	T_EQ(xpi_dgram_replay_check(&r, 0), -EALREADY); /* never sealed */
	T_EQ(xpi_dgram_replay_check(&r, 1), 0);
	T_EQ(xpi_dgram_replay_check(&r, 1), -EALREADY);
	T_EQ(xpi_dgram_replay_check(&r, 3), 0);
	T_EQ(xpi_dgram_replay_check(&r, 2), 0); /* late, inside the window */
	T_EQ(xpi_dgram_replay_check(&r, 2), -EALREADY);
	T_EQ(xpi_dgram_replay_check(&r, 3), -EALREADY);
	T_EQ(xpi_dgram_replay_check(&r, 100), 0);
	for (uint64_t s = 4; s < 36; s++) /* 96 and more behind: out of reach */
		T_EQ(xpi_dgram_replay_check(&r, s), -EALREADY);
	T_EQ(xpi_dgram_replay_check(&r, 36), 0); /* 64 behind: the window's last */
	T_EQ(xpi_dgram_replay_check(&r, 36), -EALREADY);
	T_EQ(xpi_dgram_replay_check(&r, 99), 0);
	T_EQ(xpi_dgram_replay_check(&r, 164), 0); /* 64 ahead: 100 at the edge */
	T_EQ(xpi_dgram_replay_check(&r, 100), -EALREADY);
	T_EQ(xpi_dgram_replay_check(&r, 99), -EALREADY);
	T_EQ(xpi_dgram_replay_check(&r, 1000), 0); /* far ahead: the window starts over */
	T_EQ(xpi_dgram_replay_check(&r, 999), 0);
	T_EQ(xpi_dgram_replay_check(&r, 164), -EALREADY);
	T_EQ(xpi_dgram_replay_check(&r, UINT64_MAX), 0);
	T_EQ(xpi_dgram_replay_check(&r, UINT64_MAX), -EALREADY);
}

int main(void)
{
	for (unsigned i = 0; i < 32; i++) {
		job_key[i] = (uint8_t)(i + 1);
		job_id[i] = (uint8_t)(0xa0 + i);
	}
	T_RUN(test_macs);
	T_RUN(test_replay);
	return 0;
}
