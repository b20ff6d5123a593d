/* SPDX-License-Identifier: MIT */
/*
 * The contract between the core and a backend ("transport").
 *
 * The core reaches a backend only through one static const table of these
 * ops (and, to create it, the registry entry of backend.h). Every op below
 * says, in this order: which thread calls it; whether it may block; whether
 * it may re-enter the engine (call xpi_engine_* functions that match, deliver
 * or complete); what it owns afterwards; what state a failure leaves; the
 * codes it returns. Unless an op says otherwise: it is called only by the
 * current owner of the rank's engine (never concurrently with another op of
 * the same rank), it never blocks, and a failure leaves the transport as it
 * was. Missing ops are not allowed: backends point what they do not need at
 * the xpi_tl_*_none stubs at the end, so the hot path never checks for NULL.
 *
 * Lanes. Each peer has a small lane (eager messages, rendezvous
 * announcements) and a bulk lane (rendezvous payloads), chosen by xpi_select;
 * they are the same transport unless a faster one exists between the two
 * ranks (RDMA beside TCP, say). A rendezvous send then goes in two parts:
 * the bulk transport makes the payload fetchable (rndv_offer) and writes a
 * descriptor of it (at most XPI_RNDV_DESC_MAX bytes: an address and a key,
 * an id); the small transport announces the message carrying that
 * descriptor (send_rts with @desc); the receiver's engine hands the
 * descriptor to its bulk transport (rndv_fetch), which moves the payload and
 * tells its peer, and the sender's bulk transport completes the send. When
 * both lanes are one transport, send_rts gets no descriptor and that
 * transport does all of it.
 *
 * Protocols on the bulk lane. A transport with one-sided reads serves a
 * fetch with a read of the sender's registered buffer; one with one-sided
 * writes sends a "ready" carrying the receive buffer's key (rndv_fetch gets
 * the destination's registration for that) and lets the sender write; a
 * stream transport asks the sender to stream the payload. All report the end
 * with xpi_engine_rndv_done() on the receiver and complete the send request
 * on the sender.
 *
 * Order. A transport delivers each peer's messages with the per-peer
 * sequence number the core gave them, once or more (a retransmission), in
 * any order and over either lane: the core drops duplicates and restores
 * send order before matching (xpi_engine_deliver).
 */
#ifndef XPI_TRANSPORT_H
#define XPI_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xport/xport.h"

struct pollfd;
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

/* A bulk transport's descriptor of a payload it offers (rndv_offer): opaque
 * to the core and to the small lane, which carries its @len bytes. */
#define XPI_RNDV_DESC_MAX 32
struct xpi_rndv_desc {
	uint8_t len;
	uint8_t bytes[XPI_RNDV_DESC_MAX];
};

struct xpi_tl_ops {
	const char *name;
	/* Messages this long or longer go by rendezvous unless the program set
	 * a threshold: where eager's extra copy starts to cost more than
	 * rendezvous's handshake on this transport (measured, see perf/). */
	size_t rndv_threshold;
	/* The longest payload send_eager can ever take (SIZE_MAX: no limit of
	 * its own). Longer messages go by rendezvous whatever threshold the
	 * program set, and xp_route_get says so. Never 0 (add_tl refuses it). */
	size_t eager_max;

	/*
	 * Registers [addr, addr+len) for this transport and writes in *handle
	 * what a peer needs to reach that memory (keys, an address), which the
	 * core passes back with the memory in send_rts, rndv_offer and
	 * rndv_fetch. Any thread, concurrently with everything (it must be
	 * thread-safe); may block (pinning pages). Does not re-enter the
	 * engine. Returns 0, or a negative code with nothing registered.
	 */
	int (*mem_reg)(void *tl, void *addr, size_t len, void **handle);
	/*
	 * The same for @len bytes of a dmabuf from @offset in @fd, which
	 * sends and receives name by the addresses [addr, addr+len) (the
	 * device's address of the memory, or the program's mapping of it).
	 * The transport may not keep @fd (the core closes it) but may keep
	 * the dmabuf (a memory region holds a reference). NULL for a
	 * transport that moves data through the CPU: it then gets mem_reg
	 * for the mapping at @addr.
	 */
	int (*mem_reg_dmabuf)(void *tl, int fd, uint64_t offset, void *addr, size_t len,
			      void **handle);
	/* Undoes mem_reg and mem_reg_dmabuf. Any thread; may block; cannot fail. */
	void (*mem_dereg)(void *tl, void *handle);

	/*
	 * Small lane: sends an eager message. Does not re-enter the engine.
	 * 0: the payload has been taken (copied or queued in transport-owned
	 * memory) and the send is complete; the caller keeps @data.
	 * -EAGAIN: no room now; nothing was taken; the core retries later, in
	 * order. -ENOBUFS: no eager credit with the receiver (see engine.h) or
	 * no buffer there; the core uses rendezvous. Any other code fails the
	 * send (-ECONNRESET: the peer is lost).
	 */
	int (*send_eager)(void *tl, int peer, const struct xpi_msg_hdr *h, const void *data);

	/*
	 * Small lane: announces a rendezvous send of sreq->buf. Does not
	 * re-enter the engine: the matching receive may exist already, but
	 * the peer learns of the announcement only from progress.
	 * Without @desc (both lanes are this transport): @reg is the
	 * registration covering the buffer, or NULL. On 0 the transport holds
	 * a reference to @sreq (xpi_request_get) until the payload was fetched
	 * or the send was withdrawn, and completes it with
	 * xpi_request_complete(); the core touches @sreq no more.
	 * With @desc: another transport (the bulk lane) holds @sreq and the
	 * payload; this one only carries the @desc->len descriptor bytes to
	 * the peer, which delivers them in the RTS message (msg->data,
	 * msg->desc_len), and holds no reference.
	 * -EAGAIN: no room now, nothing held; retried later in order. Other
	 * codes fail the send.
	 */
	int (*send_rts)(void *tl, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			const struct xpi_reg *reg, const struct xpi_rndv_desc *desc);

	/*
	 * Bulk lane, sender side, when the small lane is another transport:
	 * makes sreq->buf fetchable by @peer and writes its descriptor into
	 * @desc. Does not re-enter the engine. On 0 it holds a reference to
	 * @sreq and completes it as send_rts would; a send_cancel() withdraws
	 * it. -EAGAIN: no room now, nothing held. -ENOTSUP: this transport
	 * cannot serve as another's bulk lane (selection must then not split
	 * the lanes). Other codes fail the send.
	 */
	int (*rndv_offer)(void *tl, int peer, xp_request_t *sreq, const struct xpi_reg *reg,
			  struct xpi_rndv_desc *desc);

	/*
	 * Withdraws a rendezvous send that timed out or was cancelled, on the
	 * transport that holds it (sreq->tl). Does not re-enter the engine.
	 * The race with a receive taking the message must be decided where
	 * the receive matches, or the receive could go away unsure and break
	 * MPI's order (a claim the receiver makes with a compare-and-swap in
	 * rndv_fetch, or the receiver's engine asked: xpi_engine_withdraw).
	 * 0: withdrawn, the reference dropped; the core completes @sreq with
	 * the error. 1: the receiver was asked; the transport completes @sreq
	 * later, withdrawn (xpi_engine_send_withdrawn) or normally, within a
	 * bound of its own however the receiver behaves. -EBUSY: a receive has
	 * it; the send completes normally.
	 */
	int (*send_cancel)(void *tl, xp_request_t *sreq);

	/*
	 * Bulk lane, receiver side: brings the first @cap bytes of the
	 * rendezvous message @msg into @dst for receive @rreq. @dst_reg is the
	 * registration covering [dst, dst + cap), or NULL (a transport that
	 * writes into registered memory registers it itself, or refuses).
	 * Returns 0: done now. 1: under way; the transport calls
	 * xpi_engine_rndv_done(rreq, err) later, from its progress, never
	 * from inside this call (the engine is in the middle of matching).
	 * -ECANCELED: the sender withdrew the message; the core drops it and
	 * the receive takes the next match. Other codes fail the receive;
	 * the transport must then also tell the sender, whose send would
	 * otherwise wait. Either way the transport releases what @msg holds.
	 */
	int (*rndv_fetch)(void *tl, struct xpi_msg *msg, void *dst, size_t cap, xp_request_t *rreq,
			  const struct xpi_reg *dst_reg);

	/*
	 * Receiver side: receive @rreq, whose rndv_fetch returned 1, passed its
	 * deadline while its payload is still to come (a sender that does not
	 * progress). 0: the transport will not touch the receive or its
	 * buffer again, and drops what still comes of that payload; the core
	 * completes @rreq with -ETIMEDOUT. -EBUSY: it cannot let go now (the
	 * kernel is writing into the buffer); the receive completes when the
	 * payload has come. Does not re-enter the engine.
	 */
	int (*rndv_abort)(void *tl, xp_request_t *rreq);

	/* Releases what a message it delivered holds, without delivering it
	 * (teardown, a duplicate, a lost peer). Owner; never fails. */
	void (*msg_release)(void *tl, struct xpi_msg *msg);

	/*
	 * The engine has declared @peer lost (xpi_engine_peer_failed, called
	 * by this transport, another one or the engine itself): fail
	 * everything this transport holds that involves it (announced and
	 * claimed sends, matched receives waiting for their payload) with
	 * xpi_engine_fail_request(), and stop talking to it. Called once per
	 * transport and peer, from inside xpi_engine_peer_failed, so every
	 * way of losing a peer ends in the same cleanup. Re-enters the engine
	 * only through xpi_engine_fail_request(). NULL: the transport finds
	 * lost peers itself (it watches ctx->nfailed from its progress).
	 */
	void (*peer_lost)(void *tl, int peer);

	/*
	 * The program named @peer in a receive: a transport that makes its
	 * connections on first need (tcp) starts making the pair now, as a
	 * send would, so that the peer's messages find it made and a peer that
	 * died before the two ever talked fails the receive at once instead
	 * of at its deadline. Called once per peer and transport, by the
	 * owner; never blocks; may report the peer lost
	 * (xpi_engine_peer_failed) before it returns. NULL: its pairs are made
	 * at xp_init.
	 */
	void (*peer_wanted)(void *tl, int peer);

	/*
	 * Carries @len (1 to XPI_SIDEBAND_MAX, wire.h) bytes to @peer for
	 * its transport of type @type (enum xpi_tl_type), which gets them
	 * through xpi_engine_sideband(), in the order sent, authenticated as
	 * this transport's messages are: how a transport with no channel of
	 * its own yet (an RDMA queue pair made on first need) trades what
	 * makes one. Makes the pair if it is not made (as a send would), and
	 * the pair then also watches the peer. Owner; never blocks; does not
	 * re-enter the engine. 0: queued. -EAGAIN: not now (the pair is being
	 * made, or no room): the caller tries again from its progress.
	 * Another code: the peer cannot be reached (-ECONNRESET: lost).
	 * NULL: this transport carries nothing for others.
	 */
	int (*sideband_send)(void *tl, int peer, uint8_t type, const void *data, size_t len);

	/*
	 * Polls. Hands arrivals to xpi_engine_deliver() and finished
	 * rendezvous to xpi_engine_rndv_done(), both of which re-enter the
	 * engine and may call this transport's rndv_fetch (deliver -> match ->
	 * fetch), send_cancel or msg_release before they return; the transport
	 * must be consistent whenever it calls them. Reports a lost peer with
	 * xpi_engine_peer_failed(), which calls its peer_lost before it
	 * returns. Returns the events it handled (>= 0).
	 * NULL: nothing to poll (the engine skips it every round).
	 */
	int (*progress)(void *tl);

	/*
	 * A waiter that spun for a while without events is about to sleep in
	 * one ppoll() over every transport's file descriptors at once (and the
	 * engine's own wake fd). Owner; never blocks; does not re-enter the
	 * engine. Writes up to @max descriptors to wake it into @fds (events
	 * set) and returns how many (0: nothing to wait for, as a transport
	 * whose events all happen inside calls). After it returns >= 0 the
	 * transport must make any later event readable on one of them (a
	 * peer rings a doorbell once it sees the sleeper's flag, say).
	 * -EAGAIN: it has events already, do not sleep (the engine calls
	 * sleep_done for the others and runs progress). -ENOTSUP: it cannot
	 * wake a sleeper; the waiter then only yields the CPU. Leaves no
	 * state armed on failure.
	 */
	int (*sleep_prepare)(void *tl, struct pollfd *fds, int max);

	/*
	 * The sleep that sleep_prepare() returned >= 0 for has ended (or did
	 * not start). Any thread, the owner token not held: undoes what
	 * prepare armed (a sleeper count, a doorbell to drain) with atomics
	 * and non-blocking reads only. Called once per successful prepare.
	 */
	void (*sleep_done)(void *tl);

	/* True while the transport holds output it has not handed to the
	 * kernel or the peer yet (eager frames queued behind a send in flight):
	 * the engine runs until it is false before blocking outside the
	 * transport (xp_oob_*, xp_finalize), or the output would wait for it.
	 * Owner; never blocks. */
	bool (*tx_pending)(void *tl);

	/* Destroys the transport instance, failing (completing with an error)
	 * what it still holds. Called once, by the last owner, after the
	 * core's teardown; may block briefly (closing connections). */
	void (*destroy)(void *tl);
};

/* For transports that need no registration. */
int xpi_tl_mem_reg_none(void *tl, void *addr, size_t len, void **handle);
void xpi_tl_mem_dereg_none(void *tl, void *handle);
/* For transports that cannot be another's bulk lane: -ENOTSUP. */
int xpi_tl_rndv_offer_none(void *tl, int peer, xp_request_t *sreq, const struct xpi_reg *reg,
			   struct xpi_rndv_desc *desc);
/* For transports that carry payloads only, never messages (a bulk lane:
 * selection never makes them a small lane): -ENOTSUP. */
int xpi_tl_send_eager_none(void *tl, int peer, const struct xpi_msg_hdr *h, const void *data);
int xpi_tl_send_rts_none(void *tl, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			 const struct xpi_reg *reg, const struct xpi_rndv_desc *desc);
/* For transports whose fetches finish inside rndv_fetch: -EBUSY. */
int xpi_tl_rndv_abort_none(void *tl, xp_request_t *rreq);
/* For transports that cannot wake a sleeper (sleep_prepare: -ENOTSUP). */
int xpi_tl_sleep_prepare_none(void *tl, struct pollfd *fds, int max);
/* For transports whose events all happen inside calls (0 descriptors). */
int xpi_tl_sleep_prepare_idle(void *tl, struct pollfd *fds, int max);
void xpi_tl_sleep_done_none(void *tl);
/* For transports that never hold output back. */
bool xpi_tl_tx_pending_none(void *tl);

#endif
