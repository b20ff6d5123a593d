/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for a shared-memory ring slot as the receiving process
 * sees it (src/core/slot_ring.h, xpi_slot_parse and xpi_slot_ring_gather,
 * used by src/shm/shm.c's poll_ring). The input is the ring a peer wrote:
 * its first 4 bytes the consumer's position (little-endian), the rest the
 * slots from that position on, wrapping around the ring. The first slot must
 * either parse into a message of a kind, length and slot count the receiver
 * can take, or be refused with -EPROTO and a reason; a long inline payload
 * is then gathered into a buffer of exactly its length, and must equal what
 * the trusting reader (xpi_slot_ring_read) copies. Never crash or read or
 * write out of bounds. Built with clang -fsanitize=fuzzer when available;
 * replay.c runs the corpus in ordinary builds.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "replay.h"
#include "shm/shm_int.h"

static struct xpi_slot_ring ring;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 4)
		return 0;
	memset(&ring, 0, sizeof(ring));
	ring.cons_pos = (uint32_t)data[0] | (uint32_t)data[1] << 8 | (uint32_t)data[2] << 16 |
			(uint32_t)data[3] << 24;
	const uint8_t *slots = data + 4;
	size_t n = size - 4;
	if (n > sizeof(ring.slots))
		n = sizeof(ring.slots);
	size_t first = (ring.cons_pos & (XPI_RING_SLOTS - 1)) * sizeof(struct xpi_slot);
	size_t tail = sizeof(ring.slots) - first < n ? sizeof(ring.slots) - first : n;
	memcpy((uint8_t *)ring.slots + first, slots, tail);
	memcpy((uint8_t *)ring.slots, slots + tail, n - tail);

	/* As poll_ring: one copy of the first slot, parsed. */
	const struct xpi_slot *s = &ring.slots[ring.cons_pos & (XPI_RING_SLOTS - 1)];
	uint8_t copy[sizeof(*s)];
	memcpy(copy, s, sizeof(copy));
	static const struct xpi_slot_limits lim = { .inline_max = SHM_INLINE_MAX,
						    .rts_index_max = NRNDV };
	struct xpi_slot_msg m;
	const char *why = NULL;
	int rc = xpi_slot_parse(copy, sizeof(copy), &lim, &m, &why);
	if (fuzz_refused(rc, why))
		return 0;
	if (m.nslots < 1 || m.nslots > XPI_RING_SLOTS)
		abort();
	if (m.kind == XPI_MSG_RTS) {
		if (m.nslots != 1 || (uint32_t)m.word >= NRNDV)
			abort();
		return 0;
	}
	if (m.kind != XPI_MSG_INLINE || m.len > SHM_INLINE_MAX || m.nslots != xpi_slots_for(m.len))
		abort();
	if (m.nslots == 1)
		return 0;
	/* Exactly m.len bytes: a gather that writes past them is caught. */
	uint8_t *out = malloc((size_t)m.len);
	if (out == NULL)
		abort();
	if (xpi_slot_ring_gather(&ring, &m, copy + offsetof(struct xpi_slot, u.data), out) == 0) {
		uint8_t *ref = malloc(SHM_INLINE_MAX);
		if (ref == NULL)
			abort();
		xpi_slot_ring_read(&ring, s, ref);
		if (memcmp(out, ref, (size_t)m.len) != 0)
			abort(); /* the checked and the trusting reader disagree */
		free(ref);
	}
	free(out);
	return 0;
}
