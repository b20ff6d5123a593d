/* SPDX-License-Identifier: MIT */
#include <errno.h>

#include "xport/xport.h"
#include "transport.h"
#include "wire.h"
#include "le.h"

void xpi_frame_pack(const struct xpi_frame *f, uint8_t out[XPI_FRAME_HDR_LEN])
{
	put16(out + 0, XPI_WIRE_MAGIC);
	out[2] = XPI_WIRE_VERSION;
	out[3] = f->type;
	put16(out + 4, f->flags);
	put16(out + 6, 0);
	put32(out + 8, f->payload_len);
	put32(out + 12, f->comm);
	put64(out + 16, f->tag);
	put32(out + 24, f->peer_seq);
	put32(out + 28, 0);
	put64(out + 32, f->msg_len);
	put64(out + 40, f->id);
	put64(out + 48, f->credit);
}

int xpi_frame_parse(const uint8_t *buf, size_t len, uint32_t max_eager, struct xpi_frame *out,
		    const char **why)
{
	const char *dummy;
	if (why == NULL)
		why = &dummy;
	if (len < XPI_FRAME_HDR_LEN)
		return -EAGAIN;
	if (get16(buf) != XPI_WIRE_MAGIC) {
		*why = "bad magic: not an xport frame";
		return -EPROTO;
	}
	if (buf[2] != XPI_WIRE_VERSION) {
		*why = "unsupported frame version";
		return -EPROTO;
	}
	if (get16(buf + 6) != 0 || get32(buf + 28) != 0) {
		*why = "reserved header bytes are not zero";
		return -EPROTO;
	}
	struct xpi_frame f = {
		.type = buf[3],
		.flags = get16(buf + 4),
		.payload_len = get32(buf + 8),
		.comm = get32(buf + 12),
		.tag = get64(buf + 16),
		.peer_seq = get32(buf + 24),
		.msg_len = get64(buf + 32),
		.id = get64(buf + 40),
		.credit = get64(buf + 48),
	};
	switch (f.type) {
	case XPI_FRAME_EAGER:
		if (f.payload_len > max_eager) {
			*why = "eager payload longer than the eager limit";
			return -EPROTO;
		}
		if (f.msg_len != f.payload_len) {
			*why = "eager message length differs from its payload length";
			return -EPROTO;
		}
		break;
	case XPI_FRAME_RTS:
		/* An RTS may carry another lane's descriptor of the payload. */
		if (f.payload_len > XPI_RNDV_DESC_MAX) {
			*why = "rendezvous descriptor longer than XPI_RNDV_DESC_MAX";
			return -EPROTO;
		}
		if (f.msg_len > XP_MSG_MAX) {
			*why = "message length beyond XP_MSG_MAX";
			return -EPROTO;
		}
		break;
	case XPI_FRAME_SIDEBAND:
		if (f.payload_len == 0 || f.payload_len > XPI_SIDEBAND_MAX) {
			*why = "sideband payload empty or longer than XPI_SIDEBAND_MAX";
			return -EPROTO;
		}
		if (f.comm == 0 || f.comm > 255 || f.tag != 0 || f.peer_seq != 0 ||
		    f.msg_len != 0 || f.id != 0) {
			*why = "sideband frame with a field it does not use set";
			return -EPROTO;
		}
		break;
	case XPI_FRAME_DATA:
		/* Bounded so that no length from the wire, added to a header
		 * or an offset, can wrap. */
		if (f.msg_len > XP_MSG_MAX) {
			*why = "message length beyond XP_MSG_MAX";
			return -EPROTO;
		}
		/* fall through */
	case XPI_FRAME_CTS:
	case XPI_FRAME_CREDIT:
	case XPI_FRAME_BYE:
	case XPI_FRAME_WITHDRAW:
	case XPI_FRAME_WITHDRAW_ACK:
		if (f.payload_len != 0) {
			*why = "payload on a frame type that carries none";
			return -EPROTO;
		}
		break;
	default:
		*why = "unknown frame type";
		return -EPROTO;
	}
	uint16_t allowed = f.type == XPI_FRAME_DATA         ? XPI_FRAME_F_WITHDRAWN :
			   f.type == XPI_FRAME_CTS          ? XPI_FRAME_F_REFUSED :
			   f.type == XPI_FRAME_WITHDRAW_ACK ? XPI_FRAME_F_BUSY :
							      0;
	if ((f.flags & ~allowed) != 0) {
		*why = "unknown frame flags";
		return -EPROTO;
	}
	*out = f;
	return 0;
}
