/* SPDX-License-Identifier: MIT */
/*
 * The RDMA verbs transport: both lanes of a peer, or the bulk lane beside
 * another transport's small one.
 *
 * Small lane (rdma_small.c). Messages are two-sided SENDs of a frame: the
 * 56-byte header of the stream transports (src/core/wire.h, checked by the
 * same pure parser) and its payload. Every QP receives from one shared
 * receive queue (SRQ) whose entries scatter the header into a slot of a
 * registered header table and the payload into a buffer of the pool, at
 * its start: a payload arrives where the engine can take it as a pooled
 * buffer with no copy (small ones, and any when the pool is dry, are
 * copied instead so the entry goes straight back to the queue).
 *  - eager: header and payload sent inline when they fit the device's
 *    inline size (the provider copies them at posting, nothing to
 *    register), else copied into a pool buffer, registered once;
 *  - rendezvous: an RTS frame carrying the bulk lane's descriptor below.
 * Flow control, so the SRQ never runs dry (no RNR stalls however many
 * peers send at once): each peer may have XPI_RDMA_WINDOW frames that
 * occupy an SRQ entry of ours and that we have not yet reported taking
 * ("window frames": EAGER, RTS, FIN); every frame's id field reports how
 * many of the peer's window frames we took, and a CREDIT frame, outside
 * the window, reports it when half a window is owed and nothing else goes.
 * A peer's CREDIT frames in flight number at most two (each reports half
 * a window more than the last, and the peer cannot send more than a
 * window beyond the last report it saw), so an SRQ of
 * npeers * (window + 2) entries, and XPI_RDMA_REPOST_BATCH more for the
 * taken ones that wait to be reposted together, always has room. The eager byte credit of the engine (engine.h) rides along in the
 * credit field, as on TCP.
 *
 * Bulk lane (rdma_bulk.c): rendezvous payloads move with one-sided RDMA
 * between the users' buffers, zero copies on either side:
 *
 *  - the sender offers its buffer (rndv_offer): registers it, takes a
 *    state word in its registered table of words, and gives the small lane
 *    a 20-byte descriptor (buffer address, rkey, word index, generation);
 *  - the receiver, when a receive matches, claims the word with an RDMA
 *    compare-and-swap (PENDING -> CLAIMED of that generation), then reads
 *    the payload straight into the receive buffer (RDMA READ), then tells
 *    the sender with a FIN (a window frame sent with the word index as its
 *    immediate value), which completes the send;
 *  - a sender that times out withdraws with a compare-and-swap on the same
 *    word (PENDING -> FREE), posted through a QP connected to itself, so
 *    both go through the device's atomics and exactly one wins, however
 *    close they come: a CPU atomic is not atomic with a device's unless it
 *    says IBV_ATOMIC_GLOB, and soft-RoCE does not.
 *
 * Why reads: the receiver knows its buffer once it matches, so it pulls
 * and the sender does nothing until FIN (one message each way after the
 * announcement: claim, read, FIN). A sender-driven write would need a
 * ready-to-receive carrying the receive buffer's key first.
 *
 * The claim is waited for inside rndv_fetch (bounded: XPI_RDMA_CLAIM_NS),
 * because the engine must know at the moment a receive matches whether its
 * message still exists (transport.h); completions that arrive meanwhile
 * are kept and handled by the next progress.
 *
 * A claim the receiver stopped waiting for is still on the wire: the QP
 * retries it (up to about 2 s more under the IBA retry rules) and it may
 * yet succeed. So every compare-and-swap has a result slot of its own, kept
 * until its completion arrives, and a claim given up on stays recorded in
 * its slot: if its late completion says it won (the word was PENDING), the
 * receiver sends the sender a failing FIN, so the send completes with an
 * error and releases its word, registration and request instead of waiting
 * for ever. A withdrawal given up on that wins late completes its send
 * with -ECANCELED the same way. A late answer can never land in another
 * claim's slot.
 */
#ifndef XPI_RDMA_TL_H
#define XPI_RDMA_TL_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/dlist.h"
#include "../core/engine.h"
#include "rdma.h"
#include "rdma_rcache.h"

struct xpi_rdma_cm;

/* State words per rank: rendezvous sends offered and not yet finished. */
#define XPI_RDMA_NWORDS 1024u
/* A word: generation << 2 | state. */
enum { RDMA_W_FREE = 0, RDMA_W_PENDING = 1, RDMA_W_CLAIMED = 2 };
/* FIN's immediate value: the word index, and this bit if the receiver could
 * not take the payload (the send then fails too). */
#define XPI_RDMA_FIN_FAILED 0x80000000u
/* Window frames (see above) a peer may have unreported in our SRQ, at
 * most; fewer when many peers share it (rdma_setup.c). */
#define XPI_RDMA_WINDOW 64u
#define XPI_RDMA_WINDOW_MIN 4u
/* The window of an endpoint's pair: each takes its own share of the SRQ,
 * as many as the device's SRQ holds (rdma_ep.c). */
#define XPI_RDMA_EP_WINDOW 32u
/* Entries of the SRQ we aim for with few peers. */
#define XPI_RDMA_SRQ_TARGET 256u
/* Our small sends a QP can hold before their completions come back: a
 * window, the CREDIT frames, and completions that lag the peer's report
 * of taking them (its ACK and its next frame race). */
#define XPI_RDMA_TX_RING (2u * XPI_RDMA_WINDOW + 8u)
/* Send queue depth per QP. What can be in it at once is bounded by the
 * state words: a read for each of the peer's (XPI_RDMA_NWORDS), plus the
 * one claim waited for, and the small sends (FINs among them) the ring
 * above bounds; a shallower queue would fail a receive when a window of
 * more rendezvous messages than it holds matched at once. */
#define XPI_RDMA_SQ_DEPTH (XPI_RDMA_NWORDS + XPI_RDMA_TX_RING + XPI_RDMA_ATOMIC_SLOTS + 8u)
/* Taken SRQ entries go back this many at a time, or when progress finds
 * nothing to do: the SRQ is this much deeper than the windows need. */
#define XPI_RDMA_REPOST_BATCH 16u
/* One inline send in this many asks for a completion. */
#define XPI_RDMA_SIGNAL_EVERY 16u
/* Header and payload sent inline up to this, if the device allows. */
#define XPI_RDMA_INLINE_WANT 256u
/* The pool buffers SRQ entries receive payloads into, and so the longest
 * eager payload. */
#define XPI_RDMA_RX_BUF 16384u
/* Payloads up to this go to the engine copied (inline), the SRQ entry
 * straight back to the queue: a tiny message should not hold 16 KiB. */
#define XPI_RDMA_RX_COPY_MAX 256u
/* How long rndv_fetch waits for its claim's answer (the default of
 * struct xpi_rdma_tl's claim_ns). */
#define XPI_RDMA_CLAIM_NS (2000 * 1000000LL)
/* Compare-and-swaps that may be outstanding at once: the one waited for
 * and those given up on whose completion has not come yet. */
#define XPI_RDMA_ATOMIC_SLOTS 64u
/* The result slots' bytes: one per compare-and-swap, then a scratch word
 * for a closing endpoint's fence (rdma_small_fence), rounded up to the
 * alignment. */
#define XPI_RDMA_RESULT_LEN ((XPI_RDMA_ATOMIC_SLOTS + 8u) * sizeof(uint64_t))
/* Descriptor bytes: addr 8, rkey 4, index 4, generation 4. */
#define XPI_RDMA_DESC_LEN 20u

/* What a work request is, in the top byte of its wr_id. */
enum rdma_wr {
	RDMA_WR_RECV = 1, /* an SRQ entry; low bits: its slot */
	RDMA_WR_SEND,     /* a frame (FINs too); low bits: the peer */
	RDMA_WR_CLAIM,    /* low bits: the claim's sequence number */
	RDMA_WR_WITHDRAW, /* through the self QP; low bits: sequence number */
	RDMA_WR_READ,     /* low bits: the fetch's id */
};

static inline uint64_t rdma_wr_id(enum rdma_wr kind, uint64_t low)
{
	return (uint64_t)kind << 56 | (low & ((1ull << 56) - 1));
}

/* A compare-and-swap whose result slot is taken. */
struct rdma_atomic {
	bool busy;          /* posted; its completion has not come */
	bool abandoned;     /* its wait gave up: the completion is handled by progress */
	uint8_t kind;       /* enum rdma_wr: RDMA_WR_CLAIM or RDMA_WR_WITHDRAW */
	int peer;           /* a claim: whose word */
	uint32_t idx;       /* the word's index */
	uint64_t expect;    /* the value that means it won */
	xp_request_t *sreq; /* a withdrawal: its send */
};

/* Where a peer's pair stands (rdma_wire.c). */
enum rdma_wire_state {
	RW_OFF = 0, /* no pair with it: not wanted, or attach did not agree */
	RW_IDLE,    /* agreed, made on first need */
	RW_ASKED,   /* our QP made and its number sent; theirs not known */
	RW_HALF,    /* ours connected to theirs; theirs not yet said connected */
	RW_UP,      /* both connected: frames go */
};

struct rdma_peer {
	struct ibv_qp *qp;
	bool up;          /* both QPs connected (RW_UP): frames may go */
	bool qp_ready;    /* ours is connected (RW_HALF or RW_UP): it may be read from */
	bool dead;        /* its QP failed: everything with it fails */
	uint8_t wstate;   /* enum rdma_wire_state */
	uint8_t owed;     /* a wire message the carrier had no room for (rdma_wire.c), or 0 */
	bool in_todo;     /* listed in t->todo */
	bool in_attn;     /* listed in t->attn */
	int wire_err;     /* the pair could not be made: reported from progress */
	uint32_t psn;     /* our QP's first packet sequence number */
	uint32_t granted; /* the window we grant it: our SRQ's share for it */
	/* An endpoint slot's pair (rdma_ep.c): our head sent, the peer's
	 * heard (and whether it could take a pair), our SRQ share taken for
	 * it, and how its release stands. */
	bool head_sent, head_heard, head_ok, ep_reserved;
	bool releasing, fence_posted;
	bool srq_share; /* connect_qp promised the SRQ its window */
	int64_t release_deadline;
	struct xpi_rdma_addr remote; /* its port (attach), and its QP once told */
	uint64_t words_addr;
	uint32_t words_rkey;

	/* Small lane, sending (rdma_small.c). */
	uint32_t window;       /* what it granted us (its SRQ's share for us) */
	uint64_t win_sent;     /* window frames sent to it */
	uint64_t win_returned; /* of them, reported taken by it */
	/* Our sends on its QP, oldest first, whose completion has not come:
	 * the pool buffer each was copied into (NULL: sent inline). */
	struct xp_buf *tx_ring[XPI_RDMA_TX_RING];
	uint32_t tx_head, tx_count;
	uint32_t tx_unsignaled; /* sends since the last signalled one */
	/* FINs waiting for window (immediate values), oldest first. */
	uint32_t *fins;
	uint32_t nfins, fins_cap;

	/* Small lane, receiving. */
	uint64_t win_taken; /* its window frames we took from the SRQ */
	uint64_t win_told;  /* what our last frame to it reported */
	uint64_t credit_told;
};

/* A send we offered: word index @i. */
struct rdma_offer {
	xp_request_t *sreq;
	struct ibv_mr *mr;         /* registered for it alone (NULL: cached, or none) */
	struct rdma_rentry *chunk; /* the cache's chunk it holds, or NULL */
	int peer;
	uint32_t gen;
};

/* A payload being read into a receive. */
struct rdma_fetch {
	struct xpi_dlink link;
	uint64_t id;
	xp_request_t *rreq;        /* NULL: its receive gave up (rndv_abort) */
	struct ibv_mr *mr;         /* registered for it alone (NULL: cached) */
	struct rdma_rentry *chunk; /* the cache's chunk it holds, or NULL */
	int peer;
	uint32_t idx;
};

struct xpi_rdma_tl {
	xp_context_t *ctx;
	int tl_index;
	struct xpi_rdma_dev dev;
	struct rdma_rcache rcache; /* of the program's registrations */
	struct ibv_comp_channel *chan;
	struct ibv_cq *cq;
	bool cq_armed; /* notification requested for the sleep */
	struct rdma_peer *peers;
	int npeers; /* entries of peers[]: the job's ranks, then endpoint slots */
	/* Endpoints' pairs (rdma_ep.c): the window each is granted, how many
	 * the SRQ has room for, and how many are made or being made. */
	uint32_t ep_window, ep_budget, ep_pairs;
	struct ibv_qp *self_qp; /* connected to itself: the sender's own atomics */
	struct xpi_rdma_cm *cm; /* XP_RDMA_CM: the connections' (rdma_cm.h), or NULL */
	uint32_t max_inline;    /* what the device granted our QPs */
	uint32_t window;        /* XPI_RDMA_WINDOW, or less with many peers */
	/* Peers whose pair has work for progress (rdma_wire.c): a message
	 * to send, a failure to report. */
	int *todo;
	int ntodo;
	uint64_t st_wired; /* pairs made on first need */
	/* QP numbers of the peers' QPs, sorted, for receive completions. */
	struct rdma_qpn {
		uint32_t qpn;
		int peer;
	} * qpns;
	int nqpns;

	/* The shared receive queue: per entry (slot) a header and a pool
	 * buffer. */
	struct ibv_srq *srq;
	uint32_t srq_depth;     /* entries it may hold: every wanted peer's window */
	uint32_t srq_depth_job; /* of them, for the job's peers (the rest: endpoints') */
	uint32_t srq_filled;    /* entries given a buffer, slots [0, srq_filled) */
	uint32_t srq_promised;  /* what the windows of the pairs made need */
	uint8_t *rx_hdrs;
	struct ibv_mr *rx_hdrs_mr;
	struct xp_buf **rx_bufs;
	uint32_t *rx_unposted; /* slots taken, to go back with the next batch */
	uint32_t nrx_unposted;
	uint32_t nfins_total; /* FINs queued, all peers */
	/* How frames went, for tests and xport-perf: sent inline or copied
	 * into a pool buffer; eager payloads received lent to the engine
	 * (zero copy) or copied. */
	uint64_t st_tx_inline, st_tx_copied, st_rx_lent, st_rx_copied;
	/* Peers that may be owed a report of their window, or have FINs
	 * waiting for window: what each progress looks at (rdma_small_flush),
	 * so its cost follows the peers that talk, not npeers (an xp_open
	 * context has a thousand slots). */
	int *attn;
	int nattn;

	/* This rank's state words, and where claims and withdrawals put the
	 * value they found: a slot each (XPI_RDMA_ATOMIC_SLOTS), held until
	 * the completion comes, also after its wait gave up. */
	uint64_t *words;
	struct ibv_mr *words_mr;
	uint64_t *result;
	struct ibv_mr *result_mr;
	struct rdma_atomic atomics[XPI_RDMA_ATOMIC_SLOTS];
	uint64_t seq;     /* of the claim or withdrawal waited for */
	int64_t claim_ns; /* how long a claim is waited for (XPI_RDMA_CLAIM_NS) */
	uint64_t st_late_claims, st_late_withdrawals; /* won after they were given up */

	struct rdma_offer offers[XPI_RDMA_NWORDS];
	uint32_t gens[XPI_RDMA_NWORDS];
	uint32_t free_words[XPI_RDMA_NWORDS];
	uint32_t nfree;

	struct xpi_dlink fetches;
	uint64_t next_fetch;
	int nfailed_seen; /* ctx->nfailed when lost peers were last checked */

	/* Completions seen while waiting for a claim, handled by progress. */
	struct ibv_wc *backlog;
	uint32_t nbacklog, backlog_cap;
};

extern const struct xpi_tl_ops xpi_rdma_ops;

/* rdma_bulk.c, for the small lane's RTS: offers sreq->buf (rndv_offer). */
int rdma_rndv_offer(void *tl, int peer, xp_request_t *sreq, const struct xpi_reg *reg,
		    struct xpi_rndv_desc *desc);
/* rdma_bulk.c: destroys @peer's QP (ours, or rdma_cm's with its id). */
void rdma_qp_destroy(struct xpi_rdma_tl *t, int peer);
/* rdma_bulk.c: undoes an offer whose announcement could not be sent. */
void rdma_rndv_unoffer(struct xpi_rdma_tl *t, xp_request_t *sreq);
/* rdma_bulk.c: a FIN with immediate value @imm came from @peer. */
void rdma_got_fin(struct xpi_rdma_tl *t, int peer, uint32_t imm);

/* rdma_small.c */
int rdma_small_setup(struct xpi_rdma_tl *t); /* the SRQ; before the QPs */
/* Gives the SRQ @n more entries, each with a pool buffer, and posts them:
 * a pair's window (and two CREDIT frames) before the pair may send, once
 * the pool is registered with us. 0, -ENOBUFS (the pool is dry: the
 * entries got so far stay), or the failed post's code. */
int rdma_small_grow(struct xpi_rdma_tl *t, uint32_t n);
void rdma_small_fini(struct xpi_rdma_tl *t); /* after the QPs are gone */
int rdma_send_eager(void *tl, int peer, const struct xpi_msg_hdr *h, const void *data);
int rdma_send_rts(void *tl, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
		  const struct xpi_reg *reg, const struct xpi_rndv_desc *desc);
/* Tells @peer we took payload word @idx (@failed: could not): queued
 * until the window allows. 0 or a negative code (the peer is lost). */
int rdma_send_fin(struct xpi_rdma_tl *t, int peer, uint32_t idx, bool failed);
/* A completion of ours: a receive (RDMA_WR_RECV) or a send (RDMA_WR_SEND). */
void rdma_small_recv_done(struct xpi_rdma_tl *t, const struct ibv_wc *wc);
void rdma_small_send_done(struct xpi_rdma_tl *t, const struct ibv_wc *wc);
/* Progress found nothing: taken SRQ entries go back now. */
void rdma_small_repost(struct xpi_rdma_tl *t);
/* Each progress: queued FINs and owed credit go out. */
void rdma_small_flush(struct xpi_rdma_tl *t);
/* Drops what the small lane holds for @peer (lost). */
void rdma_small_peer_lost(struct xpi_rdma_tl *t, int peer);
/* Gives back the pool buffers of sends whose completions will not come. */
void rdma_small_drop_tx(struct xpi_rdma_tl *t, int peer);

/* rdma_wire.c: pairs made on first need, their QP numbers traded as
 * sideband messages over the stream pair that carries or watches the peer
 * (transport.h). Sends to a peer whose pair is not up return what this
 * does: -EAGAIN while it is made (started by the first), or the code that
 * lost the peer. Does not re-enter the engine. */
int rdma_wire_need(struct xpi_rdma_tl *t, int peer);
/* The sideband taker (ctx->sideband[XPI_TL_RDMA]). */
void rdma_wire_take(void *tl, int peer, const uint8_t *data, size_t len);
/* Each progress: messages owed, failures to report. */
void rdma_wire_progress(struct xpi_rdma_tl *t);
/* A frame came from @peer: it is up on its side, so on ours. */
void rdma_wire_heard(struct xpi_rdma_tl *t, int peer);
/* Adds @peer's QP to t->qpns, keeping it sorted. */
void rdma_qpn_add(struct xpi_rdma_tl *t, int peer);
/* Grows the CQ, if it must, to hold the completions of @nqps QPs' send
 * queues, the self QP's and the SRQ's. 0 or a negative code. */
int rdma_cq_fit(struct xpi_rdma_tl *t, int nqps);

/* rdma_ep.c */
/* The lane of endpoints (ep.h): registers it with the core. */
void rdma_ep_attach(struct xpi_rdma_tl *t);
/* A head (rdma_wire.c's kind 3) came from endpoint slot @peer. */
void rdma_ep_take_head(struct xpi_rdma_tl *t, int peer, const uint8_t *data, size_t len);
/* rdma_wire.c: removes @peer's QP from t->qpns. */
void rdma_qpn_remove(struct xpi_rdma_tl *t, int peer);
/* rdma_small.c: posts a signalled read of one word of @peer's behind our
 * sends to it, so that its completion retires them all (rdma_ep.c's
 * release). 0, -EAGAIN (no room), or the failed post's code. */
int rdma_small_fence(struct xpi_rdma_tl *t, int peer);

/* rdma_bulk.c: the transport's side of losing @peer: its QP failed (@why
 * says how, for the engine) or another lane lost it (@why NULL). */
void rdma_peer_failed(struct xpi_rdma_tl *t, int peer, int err, const char *why);

#endif
