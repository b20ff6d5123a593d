/* SPDX-License-Identifier: MIT */
/*
 * The DPDK transport: internal structures shared by its files.
 *
 * One DPDK port per rank (dpdk_port.h), driven by the owner of the rank's
 * engine, and per peer one reliable, ordered stream of datagrams (rel.h)
 * carrying the TCP transport's frames (wire.h): eager messages,
 * rendezvous announcements (RTS), clear-to-send (CTS), payloads (DATA),
 * withdrawals, credit. A frame is cut into datagrams of at most
 * XPI_DPDK_MSS bytes (the datagram header's msg_len and frag_off say
 * where each piece goes); since the stream is in order, reassembly is a
 * copy at frag_off into one destination chosen when the frame's header
 * arrives: the frame itself when it fits one datagram (no copy at all), a
 * pool buffer for a longer eager message (handed to a pooled receive as
 * it is), the receive buffer for rendezvous DATA.
 *
 * Rendezvous is receiver-driven: the receiver asks for the payload in
 * windows of XPI_DPDK_WINDOW bytes (CTS with the window's offset and
 * length), at most XPI_DPDK_WINDOWS_AHEAD at a time, and the sender
 * streams each window as one DATA frame from the send buffer itself (no
 * copy on our side: the port copies into its packet buffers). The send
 * completes when every window has been acknowledged. On this path's
 * frames (docs/DPDK-WIRE.md), CTS and DATA carry the window's offset in
 * the frame's tag field and its length in msg_len.
 *
 * Timers: one engine timer per rank, at the earliest deadline of every
 * pair (a retransmission, a delayed acknowledgement, a withdrawal's
 * grace). A port has no file descriptor: a waiter never sleeps on it
 * (sleep_prepare -ENOTSUP), it yields.
 */
#ifndef XPI_DPDK_TL_H
#define XPI_DPDK_TL_H

#include <stdbool.h>
#include <stdint.h>

#include "../core/clock.h"
#include "../core/dlist.h"
#include "../core/engine.h"
#include "../core/wire.h"
#include "dpdk_auth.h"
#include "dpdk_port.h"
#include "rel.h"

/* Payload bytes per datagram: a 1500-byte IP MTU less the IPv4, UDP and
 * xport headers (udp_wire.h). */
#define XPI_DPDK_MSS (1500u - XPI_IPV4_HDR_LEN - XPI_UDP_HDR_LEN - XPI_DGRAM_HDR_LEN)
/* Eager messages up to this long; longer ones go by rendezvous. */
#define XPI_DPDK_EAGER_MAX (64u << 10)
/* Rendezvous windows: bytes per CTS, and how many are asked for at once. */
#define XPI_DPDK_WINDOW (256u << 10)
#define XPI_DPDK_WINDOWS_AHEAD 2u
/* Windows this long or longer are sent without a copy where the port can:
 * below it the chained buffer costs more than copying. */
#define XPI_DPDK_ZC_MIN 4096u
/* How long a withdrawal waits for the receiver's answer (as tcp's). */
#define XPI_DPDK_ASK_GRACE_NS (20 * 1000000LL)

/* A frame being sent: its header (and an eager payload, copied), or for
 * DATA the header and a pointer into the send's buffer. Freed when every
 * datagram of it has been acknowledged. */
struct dpdk_txmsg {
	struct dpdk_peer *peer;
	/* DATA of XPI_DPDK_ZC_MIN bytes or more where the port allows it:
	 * its pieces go to the device by reference (dpdk_port.h), and the
	 * window counts as delivered only once the device let go of them. */
	bool zc_on;
	struct xpi_dpdk_zc zc;
	uint32_t refs;               /* datagrams not yet acknowledged */
	uint32_t len;                /* bytes of the frame: header and payload */
	uint32_t head;               /* bytes in @bytes (the rest is at @payload) */
	struct dpdk_rndv_tx *window; /* DATA: the send it is a window of */
	const uint8_t *payload;      /* DATA: the window's bytes in the send buffer */
	uint8_t bytes[];
};

/* One datagram of a frame: queued until the window lets it go, then kept
 * by the reliability layer until acknowledged. */
struct dpdk_pkt {
	struct xpi_dlink link;
	struct dpdk_txmsg *m;
	uint32_t off;
	uint32_t len;
};

/* A rendezvous send: announced, then streamed window by window. */
struct dpdk_rndv_tx {
	struct xpi_dlink link; /* in the peer's rts_out */
	xp_request_t *sreq;
	uint64_t id;
	uint64_t sent;    /* payload bytes sent in windows */
	uint64_t acked;   /* of them, acknowledged */
	uint32_t windows; /* windows sent and not yet acknowledged */
	int err;          /* the receiver refused it: fail once windows are done */
	bool asked_for;   /* a CTS came: too late to withdraw */
	bool taken_back;  /* withdrawn without the receiver's word */
};

/* A rendezvous payload this rank asked for. */
struct dpdk_rndv_rx {
	struct xpi_dlink link; /* in the peer's bulk_rx */
	xp_request_t *rreq;    /* NULL: its receive let go (rndv_abort) */
	uint8_t *dst;
	uint64_t cap, len, id;
	uint64_t nwin;    /* windows in all: at least one, for an empty payload */
	uint64_t asked;   /* windows asked for (CTS sent) */
	uint64_t arrived; /* windows arrived whole */
	bool refused;     /* the receive let go: no more asked, what comes is dropped */
};

/* The frame being reassembled from a peer's datagrams. */
struct dpdk_asm {
	bool active;
	struct xpi_frame f;
	uint32_t total, have;    /* bytes of the frame (header included) */
	uint8_t *dst;            /* where payload byte 0 goes (NULL: dropped) */
	uint64_t cap;            /* bytes of it that go there */
	struct xp_buf *buf;      /* EAGER into a pool buffer */
	uint8_t *heap;           /* EAGER into memory of ours (no pool buffer free) */
	struct dpdk_rndv_rx *rx; /* DATA: its receive */
};

struct dpdk_peer {
	struct xpi_dpdk_tl *t;
	int rank;
	bool up, dead;
	uint32_t ip, epoch; /* the peer's address and incarnation */
	uint16_t udp_port;
	/* Authentication (dpdk_auth.h): on for the pair unless both ends
	 * turned it off (XP_DPDK_AUTH=off). */
	bool auth;
	uint64_t tx_seq; /* the seq of our last datagram to it */
	struct xpi_dgram_replay replay;
	struct xpi_dgram_key tx_key, rx_key;
	struct xpi_rel_tx tx;
	struct xpi_rel_rx rx;
	struct xpi_dlink txq; /* datagrams not yet sent */
	uint32_t nqueued;     /* how many */
	struct dpdk_asm as;
	uint64_t eager_sent, peer_credit, credit_told, next_id;
	struct xpi_dlink rts_out; /* struct dpdk_rndv_tx */
	struct xpi_dlink bulk_rx; /* struct dpdk_rndv_rx */
};

/* XP_DPDK_DROP: what the receive path does to datagrams, for tests. */
struct dpdk_drop {
	uint32_t loss, reorder, dup; /* per 2^32 */
	uint64_t rng;
	uint8_t *held; /* a frame held back to arrive after the next */
	size_t held_len;
	uint64_t dropped, reordered, duplicated;
};

struct xpi_dpdk_tl {
	xp_context_t *ctx;
	int tl_index;
	int npeers;
	struct xpi_dpdk_port *port;
	uint32_t epoch;
	/* By rank: a pair's state, made on first need (dpdk_peer_get: the
	 * first datagram to or from the peer), NULL until then; and the ranks
	 * whose state is made, in the order they were, which the loops over
	 * pairs visit, so a rank's cost grows with the peers it talks to. */
	struct dpdk_peer **peers;
	int *made;
	int nmade;
	/* made[watch_next..] have not had their watcher asked to make its
	 * pair too (from progress: xpi_engine_watch_peer) yet. */
	int watch_next;
	/* By rank: what the address exchange said (dpdk_setup.c), and what
	 * making a pair's keys needs later: the job key, the job's identity,
	 * this rank's own authentication flags. */
	struct dpdk_addr {
		uint32_t ip, epoch;
		uint16_t udp_port;
		uint8_t auth; /* its XCHG_* flags */
		bool ok;      /* agreed: a pair may be made */
		bool watched; /* its watcher is made on first need too */
	} * addrs;
	uint8_t job_key[32];
	uint8_t job_id[XPI_DPDK_JOB_ID_LEN];
	bool has_job_id;
	uint8_t my_auth;
	struct xpi_rel_params rel;
	uint64_t credit_per_peer;
	uint64_t credit_seen;
	struct xpi_timer timer;
	struct dpdk_drop drop;
	/* Datagrams from a pair's address dropped unused: whose MAC did not
	 * verify, and verified ones seen before (replays, duplicates). */
	uint64_t auth_failed, auth_replayed;
	bool dirty;                    /* state changed: the timer's deadline is to be recomputed */
	bool in_rx;                    /* inside the port's poll: sends wait for its end */
	bool backlog;                  /* some peer has datagrams queued */
	bool added;                    /* the context owns it (xpi_context_add_tl) */
	bool all_ranks;                /* every rank of the job has this transport */
	bool closing;                  /* its end: nothing more goes to the engine */
	int nasks;                     /* sends whose withdrawal was asked and not yet answered */
	bool close_in_turn;            /* every rank at its end: rank 0 closes its port first */
	int nfailed_seen;              /* ctx->nfailed when last looked at */
	struct dpdk_pkt *free_pkts;    /* datagram records to reuse, linked by m */
	struct dpdk_txmsg *free_small; /* short frames' blocks to reuse, linked by payload */
	uint32_t nfree_small;
};

/* The clock of the engine's round, read once (outside one: read now). */
static inline int64_t dpdk_clock(struct xpi_dpdk_tl *t)
{
	return xpi_engine_now(t->ctx);
}

/* dpdk_setup.c: rank @rank's pair, made now if it is not (the keys
 * derived, the reliability's state set), or NULL if no pair was agreed
 * with it or there was no memory. */
struct dpdk_peer *dpdk_peer_get(struct xpi_dpdk_tl *t, int rank);
/* dpdk_setup.c: whether the pair with agreed rank @rank authenticates its
 * datagrams, and the key of what it sends us (to check a datagram from a
 * rank whose pair is not made yet). 0 or a negative code. */
bool dpdk_pair_auth(const struct xpi_dpdk_tl *t, int rank);
int dpdk_pair_rx_key(struct xpi_dpdk_tl *t, int rank, struct xpi_dgram_key *k);

/* dpdk_tx.c */
int dpdk_queue_frame(struct dpdk_peer *pr, const struct xpi_frame *f, const void *payload,
		     struct dpdk_rndv_tx *window, const uint8_t *window_bytes);
void dpdk_pump(struct dpdk_peer *pr);
void dpdk_send_ack(struct dpdk_peer *pr);
extern const struct xpi_rel_tx_ops dpdk_rel_tx_ops;
void dpdk_drop_queue(struct dpdk_peer *pr);
void dpdk_txmsg_cache_free(struct xpi_dpdk_tl *t);

/* dpdk_rx.c */
void dpdk_rx_frame(void *arg, const struct xpi_rx_frame *f);
void dpdk_asm_reset(struct dpdk_peer *pr);
extern const struct xpi_rel_rx_ops dpdk_rel_rx_ops;
void dpdk_grant(struct dpdk_peer *pr, struct dpdk_rndv_rx *x);
void dpdk_drop_release(struct xpi_dpdk_tl *t);

/* dpdk_tl.c */
void dpdk_peer_fail(struct dpdk_peer *pr, int err, const char *why);
void dpdk_send_settle(struct dpdk_peer *pr, struct dpdk_rndv_tx *w);
void dpdk_window_acked(struct dpdk_peer *pr, struct dpdk_rndv_tx *w, uint32_t bytes);
void dpdk_service(struct xpi_dpdk_tl *t, int64_t now);
void dpdk_timer_fire(struct xp_context *ctx, struct xpi_timer *timer);
extern const struct xpi_tl_ops xpi_dpdk_ops;

/* dpdk_setup.c */
void dpdk_destroy(void *tl);

#endif
