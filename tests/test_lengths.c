/* SPDX-License-Identifier: MIT */
/*
 * Lengths beyond XP_MSG_MAX are refused, from the caller and from the wire.
 * xp_isend and xp_irecv once took SIZE_MAX, 2^63 and 2^62 as they were,
 * and neither a TCP RTS frame's length nor a shared-memory announcement's
 * was checked at all, so a length plus a header could wrap. Bad arguments say what was wrong in xp_error_detail().
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "core/slot_ring.h"
#include "core/wire.h"
#include "xport/xport.h"
#include "testutil.h"

static void expect_detail(const char *needle)
{
	const char *d = xp_error_detail();
	if (d == NULL || strstr(d, needle) == NULL)
		T_FAIL("error detail \"%s\" does not say \"%s\"", d != NULL ? d : "(null)", needle);
}

static int body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	if (xp_rank(ctx) != 0)
		return 0;
	xp_comm_t *w = xp_comm_world(ctx);
	static uint8_t buf[16];
	const size_t bad[] = { SIZE_MAX, (size_t)1 << 63, (size_t)1 << 62, XP_MSG_MAX + 1 };
	xp_request_t *r = NULL;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		T_EQ(xp_isend(w, buf, bad[i], 1, 1, &r), -EINVAL);
		expect_detail("XP_MSG_MAX");
		T_EQ(xp_irecv(w, buf, bad[i], 1, 1, XP_TAG_EXACT, &r), -EINVAL);
		expect_detail("XP_MSG_MAX");
		T_CHECK(r == NULL); /* nothing was written on failure */
	}
	T_EQ(xp_isend(w, buf, 1, 5, 1, &r), -EINVAL);
	expect_detail("rank 5 is not one of its 2 ranks");
	T_EQ(xp_irecv(w, buf, 1, -7, 1, XP_TAG_EXACT, &r), -EINVAL);
	expect_detail("rank -7");
	T_EQ(xp_isend(w, NULL, 4, 1, 1, &r), -EINVAL);
	expect_detail("NULL buffer");
	/* The limit itself is accepted (a receive of that capacity: nothing
	 * is written until a message comes, and we cancel it). */
	T_OK(xp_irecv(w, buf, XP_MSG_MAX, 1, 1, XP_TAG_EXACT, &r));
	T_OK(xp_cancel(r));
	T_EQ(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL), -ECANCELED);
	return 0;
}

/* An RTS or DATA frame announcing more than XP_MSG_MAX is malformed. */
static void test_wire_lengths(void)
{
	const uint8_t types[] = { XPI_FRAME_RTS, XPI_FRAME_DATA };
	for (size_t i = 0; i < sizeof(types); i++) {
		struct xpi_frame f = { .type = types[i], .msg_len = UINT64_MAX }, out;
		uint8_t hdr[XPI_FRAME_HDR_LEN];
		const char *why = NULL;
		xpi_frame_pack(&f, hdr);
		T_EQ(xpi_frame_parse(hdr, sizeof(hdr), 1 << 20, &out, &why), -EPROTO);
		T_CHECK(why != NULL && strstr(why, "XP_MSG_MAX") != NULL);
		f.msg_len = XP_MSG_MAX;
		xpi_frame_pack(&f, hdr);
		T_OK(xpi_frame_parse(hdr, sizeof(hdr), 1 << 20, &out, &why));
		T_EQ(out.msg_len, XP_MSG_MAX);
	}
}

/* A SIDEBAND frame carries 1 to XPI_SIDEBAND_MAX bytes for a transport
 * type (comm), and nothing in the fields it does not use. */
static void test_sideband_lengths(void)
{
	struct {
		uint32_t payload_len, comm;
		uint64_t tag;
		int want;
	} cases[] = {
		{ 12, 2, 0, 0 },
		{ XPI_SIDEBAND_MAX, 2, 0, 0 },
		{ 0, 2, 0, -EPROTO },
		{ XPI_SIDEBAND_MAX + 1, 2, 0, -EPROTO },
		{ UINT32_MAX, 2, 0, -EPROTO },
		{ 12, 0, 0, -EPROTO },
		{ 12, 256, 0, -EPROTO },
		{ 12, 2, 1, -EPROTO },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct xpi_frame f = { .type = XPI_FRAME_SIDEBAND,
				       .payload_len = cases[i].payload_len,
				       .comm = cases[i].comm,
				       .tag = cases[i].tag },
				 out;
		uint8_t hdr[XPI_FRAME_HDR_LEN];
		const char *why = NULL;
		xpi_frame_pack(&f, hdr);
		T_EQ(xpi_frame_parse(hdr, sizeof(hdr), 1 << 20, &out, &why), cases[i].want);
		if (cases[i].want == 0)
			T_CHECK(out.payload_len == cases[i].payload_len &&
				out.comm == cases[i].comm);
		else
			T_CHECK(why != NULL && strstr(why, "sideband") != NULL);
	}
}

/* So is a shared-memory announcement of more than XP_MSG_MAX. */
static void test_slot_lengths(void)
{
	struct xpi_slot slot = { .kind = XPI_MSG_RTS, .len = UINT64_MAX };
	const struct xpi_slot_limits lim = { .inline_max = 4096, .rts_index_max = 16 };
	struct xpi_slot_msg m;
	const char *why = NULL;
	T_EQ(xpi_slot_parse((const uint8_t *)&slot, sizeof(slot), &lim, &m, &why), -EPROTO);
	T_CHECK(why != NULL && strstr(why, "XP_MSG_MAX") != NULL);
	slot.len = XP_MSG_MAX;
	T_OK(xpi_slot_parse((const uint8_t *)&slot, sizeof(slot), &lim, &m, &why));
	T_EQ(m.len, XP_MSG_MAX);
}

int main(void)
{
	T_RUN(test_wire_lengths);
	T_RUN(test_sideband_lengths);
	T_RUN(test_slot_lengths);
	fprintf(stderr, "-- api lengths\n");
	return xp_local_run(2, NULL, body, NULL) == 0 ? 0 : 1;
}
