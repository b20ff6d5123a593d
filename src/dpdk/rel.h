/* SPDX-License-Identifier: MIT */
/*
 * Reliability for the DPDK path: what UDP lacks, per pair of ranks, as
 * pure functions of the packets seen and the time passed in, so that they
 * are tested on their own against a channel that loses, reorders and
 * duplicates (tests/test_dpdk_rel.c) before any device is involved.
 *
 * One direction of a pair is a sender's struct xpi_rel_tx and the
 * receiver's struct xpi_rel_rx. Packets carry a 32-bit packet sequence
 * number (psn); every packet of the other direction, and ACKs of their
 * own, carry back (docs/DPDK-WIRE.md):
 *   ack     the next psn the receiver expects (all before it arrived),
 *   sack    bit i: psn ack + 1 + i arrived too (64 packets past ack),
 *   credit  how many packets past ack it can still take.
 *
 * Sender: at most min(window, congestion window, credit) packets past the
 * oldest unacknowledged one; a packet is kept (as the transport's opaque
 * pointer) until acknowledged cumulatively. Loss is found two ways: a
 * packet still missing when one sent after it has arrived (cumulatively or
 * selectively acknowledged) is taken as lost at once (RACK's rule, RFC
 * 8985, by send time, so a resent packet is judged again only by what was
 * sent after it), and a packet missing a retransmission timeout after it
 * was sent is resent (RFC 6298's estimate from RTT samples, Karn's rule,
 * doubling on each timeout until an acknowledgement makes progress).
 * Congestion response: AIMD on the packet window, halved once per loss
 * event and down to its floor (cwnd_min) on a timeout, grown by one packet
 * per window acknowledged. AIMD rather than Timely: it needs no precise
 * clock, and round trips on a shared host or a virtual device vary too
 * much by themselves to be read as a queue building up. A sender that has
 * seen no acknowledgement for give_up_ns with packets outstanding gives
 * the peer up (-ETIMEDOUT): its operations fail naming the rank.
 *
 * Receiver: delivers in psn order, exactly once; holds up to 64 packets
 * that came early (the sack field's reach), drops duplicates and anything
 * past its credit. Acknowledges at once on a gap or a duplicate (the
 * sender is missing something), else every ack_every packets or
 * ack_delay_ns after the first it has not acknowledged.
 *
 * All psn comparisons are serial (RFC 1982): a pair may send 2^32 packets
 * and more.
 */
#ifndef XPI_DPDK_REL_H
#define XPI_DPDK_REL_H

#include <stdbool.h>
#include <stdint.h>

/* Packets a sender may have in flight, and a receiver may hold early: the
 * reach of the 64-bit sack field, so every packet in flight can be
 * acknowledged selectively. */
#define XPI_REL_MAX_WINDOW 64u

struct xpi_rel_params {
	uint32_t window;     /* packets in flight at most, 1..XPI_REL_MAX_WINDOW */
	int64_t rto_init_ns; /* before the first RTT sample */
	int64_t rto_min_ns, rto_max_ns;
	int64_t give_up_ns;   /* no acknowledgement this long: the peer is lost */
	uint32_t ack_every;   /* the receiver acknowledges every N packets at least */
	int64_t ack_delay_ns; /* or this long after the first unacknowledged one */
	uint32_t rx_capacity; /* the receiver's credit: packets past ack it takes */
	uint32_t cwnd_min;    /* the congestion window's floor, in packets */
};

/* Defaults for a datacenter path: eRPC's 5 ms timeout is the upper end of
 * what we start with; the estimate takes over after the first samples. */
void xpi_rel_params_default(struct xpi_rel_params *p);

/* What the sender asks of the transport. */
struct xpi_rel_tx_ops {
	/* Sends packet @pkt (numbered @psn) again, with fresh ack fields. 0,
	 * or <0 if it could not be sent now (tried again on the next poll). */
	int (*resend)(void *arg, void *pkt, uint32_t psn);
	/* @pkt was acknowledged: the sender no longer needs it. */
	void (*release)(void *arg, void *pkt);
};

struct xpi_rel_tx_slot {
	void *pkt;
	int64_t sent_ns; /* last (re)sent */
	uint32_t tries;  /* times sent */
	bool sacked;     /* the receiver has it, out of order */
	bool lost;       /* to be resent at the next poll */
};

struct xpi_rel_tx {
	struct xpi_rel_params p;
	uint32_t una;        /* oldest psn not acknowledged */
	uint32_t nxt;        /* the next psn to give */
	uint32_t credit_end; /* psns before it may be sent (ack + credit) */
	uint32_t recover;    /* a loss before it belongs to the last event */
	bool in_recovery;
	uint32_t cwnd_fp; /* congestion window, packets << 10 */
	int64_t srtt_ns, rttvar_ns, rto_ns;
	int64_t last_ack_ns; /* when an acknowledgement last moved una */
	uint32_t cwnd_min_fp;
	int64_t rack_sent_ns, rack_rtt_ns; /* RACK: newest arrived packet's send, its RTT */
	int64_t min_rtt_ns;
	uint32_t reo_mult, reo_events; /* the reordering window, in min_rtt / 4 */
	uint32_t probes;               /* tail loss probes since the last progress */
	struct xpi_rel_tx_slot slot[XPI_REL_MAX_WINDOW];
	/* Counters, for tests and statistics. */
	uint64_t st_sent, st_resent, st_fast, st_timeouts, st_loss_events, st_probes, st_spurious;
};

struct xpi_rel_rx {
	uint32_t nxt;  /* the next psn expected */
	uint64_t have; /* bit i: psn nxt + 1 + i is held */
	void *held[XPI_REL_MAX_WINDOW];
	uint32_t capacity;
	uint32_t ack_every;
	int64_t ack_delay_ns;
	uint32_t unacked; /* delivered since the last acknowledgement */
	int64_t first_unacked_ns;
	bool ack_now; /* a gap or a duplicate: acknowledge at once */
	uint64_t st_delivered, st_dups, st_held, st_beyond;
};

/* What the receiver asks of the transport. */
struct xpi_rel_rx_ops {
	/* @pkt is next in order: the transport takes it (frames, messages). */
	void (*deliver)(void *arg, void *pkt);
	/* @pkt is not wanted (a duplicate, or beyond the credit). */
	void (*drop)(void *arg, void *pkt);
};

/* --- sender --- */
/* Starts a sender whose first psn is @isn, at time @now_ns. The credit
 * until the receiver says otherwise is p->rx_capacity. */
void xpi_rel_tx_init(struct xpi_rel_tx *tx, const struct xpi_rel_params *p, uint32_t isn,
		     int64_t now_ns);
/* How many new packets may be sent now (window, congestion, credit). */
uint32_t xpi_rel_tx_room(const struct xpi_rel_tx *tx);
/* Numbers @pkt, which the transport is sending now, and keeps it until it
 * is acknowledged. Only while xpi_rel_tx_room() > 0. Returns its psn. */
uint32_t xpi_rel_tx_sent(struct xpi_rel_tx *tx, void *pkt, int64_t now_ns);
/* The ack fields of a packet from the receiver. 0; -EPROTO if they
 * acknowledge a psn never sent (the peer is broken). */
int xpi_rel_tx_acked(struct xpi_rel_tx *tx, uint32_t ack, uint64_t sack, uint32_t credit,
		     int64_t now_ns, const struct xpi_rel_tx_ops *ops, void *arg);
/* Resends what is lost or timed out. 0 with *@next_ns set to when it
 * wants to run again (INT64_MAX: nothing outstanding); -ETIMEDOUT once
 * nothing was acknowledged for give_up_ns with packets outstanding. */
int xpi_rel_tx_poll(struct xpi_rel_tx *tx, int64_t now_ns, const struct xpi_rel_tx_ops *ops,
		    void *arg, int64_t *next_ns);
/* Packets sent and not yet acknowledged. */
static inline uint32_t xpi_rel_tx_inflight(const struct xpi_rel_tx *tx)
{
	return tx->nxt - tx->una;
}
/* Hands every kept packet to ops->release (teardown). */
void xpi_rel_tx_drop_all(struct xpi_rel_tx *tx, const struct xpi_rel_tx_ops *ops, void *arg);

/* --- receiver --- */
/* Starts a receiver expecting psn @isn first. */
void xpi_rel_rx_init(struct xpi_rel_rx *rx, const struct xpi_rel_params *p, uint32_t isn);
/* Packet @psn arrived: delivered (with any held ones it makes in order),
 * held, or dropped, through @ops. */
void xpi_rel_rx_arrived(struct xpi_rel_rx *rx, uint32_t psn, void *pkt, int64_t now_ns,
			const struct xpi_rel_rx_ops *ops, void *arg);
/* The ack fields to send now. */
void xpi_rel_rx_ack_fields(const struct xpi_rel_rx *rx, uint32_t *ack, uint64_t *sack,
			   uint32_t *credit);
/* Whether an acknowledgement is due by @now_ns; *@when_ns: when one will
 * be due if nothing else happens (INT64_MAX: none). */
bool xpi_rel_rx_ack_due(const struct xpi_rel_rx *rx, int64_t now_ns, int64_t *when_ns);
/* The ack fields went out (on an ACK or on a DATA packet). */
void xpi_rel_rx_ack_sent(struct xpi_rel_rx *rx);
/* Hands every held packet to ops->drop (teardown). */
void xpi_rel_rx_drop_all(struct xpi_rel_rx *rx, const struct xpi_rel_rx_ops *ops, void *arg);

#endif
