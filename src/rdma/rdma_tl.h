/* SPDX-License-Identifier: MIT */
/*
 * The RDMA verbs transport, first form: a bulk lane. Messages and
 * rendezvous announcements travel on another transport (the small lane,
 * TCP); this one moves rendezvous payloads with one-sided RDMA between the
 * users' buffers, zero copies on either side:
 *
 *  - the sender offers its buffer (rndv_offer): registers it, takes a
 *    state word in its registered table of words, and gives the small lane
 *    a 20-byte descriptor (buffer address, rkey, word index, generation);
 *  - the receiver, when a receive matches, claims the word with an RDMA
 *    compare-and-swap (PENDING -> CLAIMED of that generation), then reads
 *    the payload straight into the receive buffer (RDMA READ), then tells
 *    the sender with a zero-byte send carrying the word index (FIN), which
 *    completes the send;
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
 */
#ifndef XPI_RDMA_TL_H
#define XPI_RDMA_TL_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/dlist.h"
#include "../core/engine.h"
#include "rdma.h"
#include "rdma_rcache.h"

/* State words per rank: rendezvous sends offered and not yet finished. */
#define XPI_RDMA_NWORDS 1024u
/* A word: generation << 2 | state. */
enum { RDMA_W_FREE = 0, RDMA_W_PENDING = 1, RDMA_W_CLAIMED = 2 };
/* FIN's immediate value: the word index, and this bit if the receiver could
 * not take the payload (the send then fails too). */
#define XPI_RDMA_FIN_FAILED 0x80000000u
/* Zero-byte receives each QP keeps posted for FINs. */
#define XPI_RDMA_FIN_RECVS 128u
/* Send queue depth per QP. What can be in it at once is bounded by the
 * state words: a read for each of the peer's (XPI_RDMA_NWORDS) and a FIN
 * for each, plus the one claim waited for; a shallower queue would fail a
 * receive when a window of more rendezvous messages than it holds matched
 * at once. */
#define XPI_RDMA_SQ_DEPTH (2u * XPI_RDMA_NWORDS + 8u)
/* How long rndv_fetch waits for its claim's answer. */
#define XPI_RDMA_CLAIM_NS (2000 * 1000000LL)
/* Descriptor bytes: addr 8, rkey 4, index 4, generation 4. */
#define XPI_RDMA_DESC_LEN 20u

/* What a work request is, in the top byte of its wr_id. */
enum rdma_wr {
	RDMA_WR_FIN_RECV = 1, /* low bits: the peer */
	RDMA_WR_FIN_SEND,     /* unsignalled but for errors */
	RDMA_WR_CLAIM,        /* low bits: the claim's sequence number */
	RDMA_WR_WITHDRAW,     /* through the self QP; low bits: sequence number */
	RDMA_WR_READ,         /* low bits: the fetch's id */
};

struct rdma_peer {
	struct ibv_qp *qp;
	bool up;   /* connected */
	bool dead; /* its QP failed: everything with it fails */
	uint64_t words_addr;
	uint32_t words_rkey;
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
	struct ibv_qp *self_qp; /* connected to itself: the sender's own atomics */

	/* This rank's state words, and where claims and withdrawals put the
	 * value they found (one 8-byte slot, as they are waited for one at
	 * a time). */
	uint64_t *words;
	struct ibv_mr *words_mr;
	uint64_t *result;
	struct ibv_mr *result_mr;
	uint64_t seq; /* of the claim or withdrawal waited for */

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

/* rdma_bulk.c: the transport's side of losing @peer: its QP failed (@why
 * says how, for the engine) or another lane lost it (@why NULL). */
void rdma_peer_failed(struct xpi_rdma_tl *t, int peer, int err, const char *why);

#endif
