/* SPDX-License-Identifier: MIT */
/*
 * The frame header of stream transports (TCP), as a pure function pair.
 *
 * Every frame starts with a 56-byte header, little-endian, at these offsets:
 *   0  u16 magic 0x5058 ("XP")      2  u8 version (1)    3  u8 type
 *   4  u16 flags                    6  u16 reserved (0)
 *   8  u32 payload_len: bytes that follow this header in the same frame
 *  12  u32 comm                    16  u64 tag
 *  24  u32 peer_seq                28  u32 reserved (0)
 *  32  u64 msg_len: the message's full length (EAGER: = payload_len;
 *      RTS and DATA: the rendezvous payload's length;
 *      CTS with F_REFUSED: the positive errno the receiver failed with)
 *  40  u64 id: a rendezvous send's id (RTS, CTS, DATA, WITHDRAW, WITHDRAW_ACK;
 *      WITHDRAW names the message by comm, tag and peer_seq too)
 *  48  u64 credit: the sender's running count of eager bytes it has
 *      consumed from the receiver (eager credit given back)
 * SIDEBAND uses comm for the transport type it carries for, and no other
 * field but payload_len and credit.
 * Fields are never reinterpreted by casting a
 * struct over the bytes. A parser accepts only its own version; a newer
 * peer is refused with a clear error rather than misread.
 */
#ifndef XPI_WIRE_H
#define XPI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define XPI_WIRE_MAGIC 0x5058u
#define XPI_WIRE_VERSION 1u
#define XPI_FRAME_HDR_LEN 56u

enum xpi_frame_type {
	XPI_FRAME_EAGER = 1,  /* a message with its payload */
	XPI_FRAME_RTS = 2,    /* announces a rendezvous message; its payload, if any,
			       * is the bulk lane's descriptor (at most 32 bytes) */
	XPI_FRAME_CTS = 3,    /* receiver to sender: stream message @id now */
	XPI_FRAME_DATA = 4,   /* on the bulk channel: msg_len bytes of @id follow */
	XPI_FRAME_CREDIT = 5, /* only gives eager credit back */
	XPI_FRAME_BYE = 6,    /* orderly close */
	/* sender to receiver: take back rendezvous message @id (comm, tag and
	 * peer_seq as in its RTS); the receiver decides (WITHDRAW_ACK) */
	XPI_FRAME_WITHDRAW = 7,
	/* receiver to sender: message @id is withdrawn, or with F_BUSY a
	 * receive took it first and its CTS is (or was) on the way */
	XPI_FRAME_WITHDRAW_ACK = 8,
	/* a message of another transport's own (transport.h, sideband_send):
	 * comm names its type (enum xpi_tl_type), the payload (1 to
	 * XPI_SIDEBAND_MAX bytes) is its business */
	XPI_FRAME_SIDEBAND = 9,
};

/* The longest payload of a SIDEBAND frame. */
#define XPI_SIDEBAND_MAX 64u

/* DATA: the sender withdrew message @id (it timed out); no bytes follow. */
#define XPI_FRAME_F_WITHDRAWN 0x1u
/* CTS: the receiver cannot take message @id (its receive failed with
 * -msg_len): the sender fails the send and streams nothing. */
#define XPI_FRAME_F_REFUSED 0x2u
/* WITHDRAW_ACK: too late, a receive took the message. */
#define XPI_FRAME_F_BUSY 0x4u

struct xpi_frame {
	uint8_t type;
	uint16_t flags;
	uint32_t payload_len;
	uint32_t comm;
	uint64_t tag;
	uint32_t peer_seq;
	uint64_t msg_len;
	uint64_t id;
	uint64_t credit;
};

/* Writes the header of @f into @out. */
void xpi_frame_pack(const struct xpi_frame *f, uint8_t out[XPI_FRAME_HDR_LEN]);

/*
 * Parses a header from @buf (@len bytes available) into @out, checking
 * every field: magic, version, type, reserved bytes, and lengths
 * (an EAGER payload_len must equal msg_len and not exceed @max_eager;
 * other types carry no payload). Returns 0, -EAGAIN if fewer than
 * XPI_FRAME_HDR_LEN bytes are available, or -EPROTO; on -EPROTO, *@why
 * (if not NULL) says what was wrong, for the error message.
 */
int xpi_frame_parse(const uint8_t *buf, size_t len, uint32_t max_eager, struct xpi_frame *out,
		    const char **why);

#endif
