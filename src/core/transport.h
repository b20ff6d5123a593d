/* SPDX-License-Identifier: MIT */
/*
 * The contract between the core and a backend ("transport").
 *
 * The core reaches a backend only through one static const table of these
 * ops. Unless an op says otherwise it is called only by the current owner of
 * the rank's engine (never concurrently with another op of the same rank),
 * it never blocks, and it leaves the transport usable when it fails.
 * Missing ops are not allowed: a backend without registrations points
 * mem_reg at xpi_tl_mem_reg_none, so the hot path never checks for NULL.
 *
 * Protocols. Eager: the payload travels with the header and the send is
 * complete once the transport has taken it. Rendezvous: the sender
 * announces (send_rts) and keeps its buffer; when a receive matches, the
 * core asks the receiver's transport to bring the payload into the receive
 * buffer (rndv_fetch). A transport with one-sided reads serves this with a
 * read of the sender's registered buffer; one with one-sided writes sends a
 * "ready" carrying the receive buffer's key and lets the sender write; a
 * stream transport asks the sender to stream the payload. All three report
 * the end with xpi_engine_rndv_done() on the receiver and complete the send
 * request on the sender.
 *
 * Order. A transport delivers each peer's messages with the per-peer
 * sequence number the core gave them; it may deliver them out of order (or
 * over several lanes) and the core restores send order before matching.
 */
#ifndef XPI_TRANSPORT_H
#define XPI_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xport/xport.h"

struct xpi_msg;
struct xpi_reg;

/* What a message carries besides its payload. */
struct xpi_msg_hdr {
	uint32_t comm;
	int32_t src; /* sender's rank in the job */
	uint64_t tag;
	uint64_t len;
	uint32_t peer_seq; /* position in the sender's stream to this receiver */
};

struct xpi_tl_ops {
	const char *name;
	/* Messages this long or longer go by rendezvous unless the program set
	 * a threshold: where eager's extra copy starts to cost more than
	 * rendezvous's handshake on this transport (measured, see perf/). */
	size_t rndv_threshold;
	/* The longest payload send_eager can ever take (0: no limit). Longer
	 * messages go by rendezvous whatever threshold the program set, so
	 * the engine never offers one that could only wait, and
	 * xp_route_get() names the protocol the send really uses. */
	size_t eager_max;

	/*
	 * Registers [addr, addr+len) for this transport; *handle is passed back
	 * with the memory in send_rts and rndv_fetch (it holds what a peer needs
	 * to reach the memory: keys, addresses). Any thread; must be
	 * thread-safe. Returns 0 or a negative code.
	 */
	int (*mem_reg)(void *tl, void *addr, size_t len, void **handle);
	void (*mem_dereg)(void *tl, void *handle);

	/*
	 * Sends an eager message. On 0 the payload has been taken (copied or
	 * queued in transport-owned memory) and the send is complete.
	 * -EAGAIN: no room now; the core retries later, in order.
	 * -ENOBUFS: no eager credit with the receiver (see engine.h) or no
	 * buffer there; the core uses rendezvous.
	 * Other codes fail the send.
	 */
	int (*send_eager)(void *tl, int peer, const struct xpi_msg_hdr *h, const void *data);

	/*
	 * Announces a rendezvous send of sreq->buf. @reg is the registration
	 * covering the buffer, or NULL. On 0 the transport holds a reference to
	 * @sreq (xpi_request_get) until the payload was fetched or the send was
	 * withdrawn, and completes it with xpi_request_complete().
	 * -EAGAIN: no room now, retried later in order.
	 */
	int (*send_rts)(void *tl, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			const struct xpi_reg *reg);

	/*
	 * Withdraws a rendezvous send that timed out or was cancelled.
	 * 0: withdrawn (the core completes sreq with the error); -EBUSY: the
	 * receiver already has it and the send will complete normally.
	 */
	int (*send_cancel)(void *tl, xp_request_t *sreq);

	/*
	 * Receiver side: brings the first @cap bytes of the rendezvous message
	 * @msg into @dst for receive request @rreq. 0: done now. 1: under way,
	 * the transport calls xpi_engine_rndv_done() later. -ECANCELED: the
	 * sender withdrew the message; the core drops it. Either way the
	 * transport releases what @msg holds.
	 */
	int (*rndv_fetch)(void *tl, struct xpi_msg *msg, void *dst, size_t cap, xp_request_t *rreq);

	/* Releases what a message holds without delivering it (teardown). */
	void (*msg_release)(void *tl, struct xpi_msg *msg);

	/* Polls; hands arrivals to xpi_engine_deliver(). Returns events handled. */
	int (*progress)(void *tl);

	/*
	 * Called after a waiter has spun for a while without events: may sleep
	 * until the transport has an event or @timeout_ns passes (a transport
	 * that cannot sleep on its events just yields the CPU). Never longer.
	 */
	void (*block)(void *tl, int64_t timeout_ns);

	/* True while the transport holds output it has not handed to the
	 * kernel or the peer yet (eager frames queued behind a send in flight):
	 * the engine runs until it is false before blocking outside the
	 * transport (xp_oob_*, xp_finalize), or the output would wait for it. */
	bool (*tx_pending)(void *tl);

	/* Destroys the transport instance. Called once, by the last owner. */
	void (*destroy)(void *tl);
};

/* For transports that need no registration. */
int xpi_tl_mem_reg_none(void *tl, void *addr, size_t len, void **handle);
void xpi_tl_mem_dereg_none(void *tl, void *handle);
/* For transports with nothing to sleep on: yields the CPU. */
void xpi_tl_block_yield(void *tl, int64_t timeout_ns);
/* For transports that never hold output back. */
bool xpi_tl_tx_pending_none(void *tl);

#endif
