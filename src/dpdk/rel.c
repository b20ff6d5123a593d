/* SPDX-License-Identifier: MIT */
/* Reliability for the DPDK path: sender and receiver of one direction of a
 * pair (rel.h says what each does and why). */
#include <errno.h>
#include <stddef.h>

#include "rel.h"

/* Serial comparison (RFC 1982): a - b as a signed distance. */
static inline int32_t sdiff(uint32_t a, uint32_t b)
{
	return (int32_t)(a - b);
}

static inline int64_t min64(int64_t a, int64_t b)
{
	return a < b ? a : b;
}

static inline int64_t max64(int64_t a, int64_t b)
{
	return a > b ? a : b;
}

#define CWND_ONE (1u << 10) /* one packet, in cwnd_fp's fixed point */
/* A credit past this is a broken peer's: clamped, so that ack + credit
 * never wraps into the past. */
#define CREDIT_MAX (1u << 20)

void xpi_rel_params_default(struct xpi_rel_params *p)
{
	*p = (struct xpi_rel_params){
		.window = XPI_REL_MAX_WINDOW,
		.rto_init_ns = 5 * 1000000,
		.rto_min_ns = 200 * 1000,
		.rto_max_ns = 20 * 1000000,
		.give_up_ns = 10ll * 1000000000,
		.ack_every = 16,
		.ack_delay_ns = 50 * 1000,
		.rx_capacity = XPI_REL_MAX_WINDOW,
		.cwnd_min = 4,
	};
}

static uint32_t clamp_window(uint32_t w)
{
	return w == 0 ? 1 : w > XPI_REL_MAX_WINDOW ? XPI_REL_MAX_WINDOW : w;
}

/* ------------------------------------------------------------------------- */
/* Sender                                                                    */

void xpi_rel_tx_init(struct xpi_rel_tx *tx, const struct xpi_rel_params *p, uint32_t isn,
		     int64_t now_ns)
{
	*tx = (struct xpi_rel_tx){ .p = *p };
	tx->p.window = clamp_window(p->window);
	tx->una = tx->nxt = tx->recover = isn;
	tx->credit_end = isn + clamp_window(p->rx_capacity);
	/* Start at the full window, as eRPC does: credits already keep the
	 * receiver from overflowing, and the window shrinks at the first
	 * loss. */
	tx->cwnd_fp = tx->p.window * CWND_ONE;
	tx->rto_ns = p->rto_init_ns;
	tx->last_ack_ns = now_ns;
	tx->cwnd_min_fp = (p->cwnd_min == 0 ? 1 : p->cwnd_min) * CWND_ONE;
	if (tx->cwnd_min_fp > tx->cwnd_fp)
		tx->cwnd_min_fp = tx->cwnd_fp;
	tx->rack_sent_ns = INT64_MIN;
	tx->reo_mult = 1;
}

static inline struct xpi_rel_tx_slot *slot_of(struct xpi_rel_tx *tx, uint32_t psn)
{
	return &tx->slot[psn % XPI_REL_MAX_WINDOW];
}

uint32_t xpi_rel_tx_room(const struct xpi_rel_tx *tx)
{
	uint32_t cw = tx->cwnd_fp / CWND_ONE;
	uint32_t lim = cw < tx->p.window ? cw : tx->p.window;
	if (lim == 0)
		lim = 1;
	uint32_t inflight = tx->nxt - tx->una;
	if (inflight >= lim)
		return 0;
	int32_t credit = sdiff(tx->credit_end, tx->nxt);
	if (credit <= 0)
		return 0;
	uint32_t room = lim - inflight;
	return (uint32_t)credit < room ? (uint32_t)credit : room;
}

uint32_t xpi_rel_tx_sent(struct xpi_rel_tx *tx, void *pkt, int64_t now_ns)
{
	if (tx->nxt == tx->una)
		tx->last_ack_ns = now_ns; /* the give-up clock starts now */
	*slot_of(tx, tx->nxt) =
		(struct xpi_rel_tx_slot){ .pkt = pkt, .sent_ns = now_ns, .tries = 1 };
	tx->st_sent++;
	return tx->nxt++;
}

/* The timeout from the estimate, without backoff (RFC 6298 (2.3)). */
static void rto_reset(struct xpi_rel_tx *tx)
{
	if (tx->srtt_ns == 0)
		return; /* no sample yet: rto_init_ns, backed off */
	int64_t rto = tx->srtt_ns + max64(4 * tx->rttvar_ns, 1000);
	tx->rto_ns = min64(max64(rto, tx->p.rto_min_ns), tx->p.rto_max_ns);
}

/* RFC 6298, in nanoseconds. */
static void rtt_sample(struct xpi_rel_tx *tx, int64_t r)
{
	if (r <= 0)
		r = 1;
	if (tx->srtt_ns == 0) {
		tx->srtt_ns = r;
		tx->rttvar_ns = r / 2;
	} else {
		int64_t err = tx->srtt_ns > r ? tx->srtt_ns - r : r - tx->srtt_ns;
		tx->rttvar_ns += (err - tx->rttvar_ns) / 4;
		tx->srtt_ns += (r - tx->srtt_ns) / 8;
	}
	rto_reset(tx);
}

/* A loss: the congestion window halves, once per window's worth of
 * packets (a burst of losses is one event), or drops to its floor after a
 * timeout. The floor (cwnd_min) keeps random loss, which a congested
 * switch does not cause, from throttling a pair to one packet a round
 * trip. */
static void loss_event(struct xpi_rel_tx *tx, uint32_t psn, bool timeout)
{
	if (timeout) {
		tx->cwnd_fp = tx->cwnd_min_fp;
	} else {
		if (tx->in_recovery && sdiff(psn, tx->recover) < 0)
			return;
		tx->cwnd_fp = tx->cwnd_fp / 2 < tx->cwnd_min_fp ? tx->cwnd_min_fp : tx->cwnd_fp / 2;
	}
	tx->in_recovery = true;
	tx->recover = tx->nxt;
	tx->st_loss_events++;
	if (tx->reo_mult > 1 && ++tx->reo_events >= 16) {
		tx->reo_mult--;
		tx->reo_events = 0;
	}
}

/*
 * RACK (RFC 8985): the newest send time among the packets known to have
 * arrived, and the round trip that packet took. A packet sent before it
 * and still missing a round trip plus a reordering window after it was
 * sent is lost: found within about one round trip, without waiting for a
 * timeout, and a resent packet is judged again only by what was sent
 * after it. The window is a quarter of the smoothed round trip.
 */
static void rack_update(struct xpi_rel_tx *tx, const struct xpi_rel_tx_slot *s, int64_t now_ns)
{
	/* A resent packet acknowledged sooner than any round trip took: the
	 * first copy arrived, late, and the resend was spurious. The
	 * reordering window grows (RFC 8985 6.2.4, by this rule in place of
	 * DSACK) and shrinks back after 16 loss events without one. */
	if (s->tries > 1 && tx->min_rtt_ns != 0 && now_ns - s->sent_ns < tx->min_rtt_ns) {
		tx->st_spurious++;
		if (tx->reo_mult < 16)
			tx->reo_mult++;
		tx->reo_events = 0;
	}
	if (s->sent_ns <= tx->rack_sent_ns)
		return;
	tx->rack_sent_ns = s->sent_ns;
	tx->rack_rtt_ns = now_ns - s->sent_ns;
}

int xpi_rel_tx_acked(struct xpi_rel_tx *tx, uint32_t ack, uint64_t sack, uint32_t credit,
		     int64_t now_ns, const struct xpi_rel_tx_ops *ops, void *arg)
{
	if (sdiff(ack, tx->nxt) > 0)
		return -EPROTO; /* acknowledges what was never sent */
	int32_t advance = sdiff(ack, tx->una);
	/* The newest report of the credit wins; an older one (acknowledgements
	 * can be reordered too) says nothing new. */
	if (advance >= 0)
		tx->credit_end = ack + (credit < CREDIT_MAX ? credit : CREDIT_MAX);
	if (advance > 0) {
		struct xpi_rel_tx_slot *last = slot_of(tx, ack - 1);
		if (last->tries == 1) { /* Karn: never time a resent packet */
			int64_t r = now_ns - last->sent_ns;
			rtt_sample(tx, r);
			if (tx->min_rtt_ns == 0 || r < tx->min_rtt_ns)
				tx->min_rtt_ns = r;
		}
		for (uint32_t psn = tx->una; psn != ack; psn++) {
			struct xpi_rel_tx_slot *s = slot_of(tx, psn);
			rack_update(tx, s, now_ns);
			ops->release(arg, s->pkt);
			*s = (struct xpi_rel_tx_slot){ 0 };
			/* Additive increase: one packet per window acknowledged. */
			uint32_t cap = tx->p.window * CWND_ONE;
			tx->cwnd_fp += CWND_ONE * CWND_ONE / tx->cwnd_fp;
			if (tx->cwnd_fp > cap)
				tx->cwnd_fp = cap;
		}
		tx->una = ack;
		tx->last_ack_ns = now_ns;
		tx->probes = 0;
		rto_reset(tx); /* progress ends the backoff */
		if (tx->in_recovery && sdiff(tx->una, tx->recover) >= 0)
			tx->in_recovery = false;
	}
	for (uint64_t bits = sack; bits != 0; bits &= bits - 1) {
		uint32_t psn = ack + 1 + (uint32_t)__builtin_ctzll(bits);
		if (sdiff(psn, tx->una) < 0 || sdiff(psn, tx->nxt) >= 0)
			continue;
		struct xpi_rel_tx_slot *s = slot_of(tx, psn);
		if (!s->sacked) {
			s->sacked = true;
			s->lost = false;
			rack_update(tx, s, now_ns);
		}
	}
	return 0;
}

/* When a tail loss probe goes: two round trips, and the receiver's delay
 * for an acknowledgement it holds back, without one. */
/* Tail loss probes between two acknowledgements that make progress; the
 * last waits 2^(PROBES_MAX-1) probe intervals, by then the timeout's. */
#define PROBES_MAX 6

static int64_t probe_after(const struct xpi_rel_tx *tx)
{
	return 2 * tx->srtt_ns + tx->p.ack_delay_ns;
}

int xpi_rel_tx_poll(struct xpi_rel_tx *tx, int64_t now_ns, const struct xpi_rel_tx_ops *ops,
		    void *arg, int64_t *next_ns)
{
	*next_ns = INT64_MAX;
	if (tx->una == tx->nxt)
		return 0;
	if (now_ns - tx->last_ack_ns >= tx->p.give_up_ns)
		return -ETIMEDOUT;
	/* Lost by RACK's rule; then a timeout: every packet still missing
	 * that was sent a timeout ago is resent (a lost tail has no later
	 * packet to reveal it). */
	int64_t reo = tx->reo_mult * (tx->min_rtt_ns / 4);
	if (reo > tx->srtt_ns)
		reo = tx->srtt_ns;
	const int64_t rack_wait = tx->rack_rtt_ns + reo;
	bool timed_out = false;
	for (uint32_t psn = tx->una; psn != tx->nxt; psn++) {
		struct xpi_rel_tx_slot *s = slot_of(tx, psn);
		if (s->sacked || s->lost)
			continue;
		if (s->sent_ns < tx->rack_sent_ns && now_ns - s->sent_ns >= rack_wait) {
			s->lost = true;
			tx->st_fast++;
			loss_event(tx, psn, false);
		} else if (now_ns - s->sent_ns >= tx->rto_ns) {
			s->lost = true;
			timed_out = true;
		}
	}
	if (timed_out) {
		tx->st_timeouts++;
		loss_event(tx, tx->una, true);
		tx->rto_ns = min64(tx->rto_ns * 2, tx->p.rto_max_ns);
	} else if (tx->probes < PROBES_MAX && tx->srtt_ns != 0 &&
		   now_ns - tx->last_ack_ns >= probe_after(tx) << tx->probes) {
		/* A tail loss probe (RFC 8985 7): nothing acknowledged for two
		 * round trips. Resending the newest packet still missing makes
		 * the receiver report what it has, so RACK finds the losses
		 * before the timeout would. Again at doubling intervals while
		 * nothing progresses: with the window full behind one hole (the
		 * receiver holds what came after it), a lost resend of the hole
		 * leaves nothing newer to reveal it, and at 20% loss waiting
		 * for the timeout each time was most of the transfer's time. */
		for (uint32_t psn = tx->nxt; psn != tx->una;) {
			struct xpi_rel_tx_slot *s = slot_of(tx, --psn);
			if (!s->sacked) {
				s->lost = true;
				tx->st_probes++;
				break;
			}
		}
		tx->probes++;
	}
	for (uint32_t psn = tx->una; psn != tx->nxt; psn++) {
		struct xpi_rel_tx_slot *s = slot_of(tx, psn);
		if (!s->lost)
			continue;
		if (ops->resend(arg, s->pkt, psn) < 0)
			break; /* no room on the device now: the next poll */
		s->lost = false;
		s->tries++;
		s->sent_ns = now_ns;
		tx->st_resent++;
	}
	int64_t next = tx->last_ack_ns + tx->p.give_up_ns;
	for (uint32_t psn = tx->una; psn != tx->nxt; psn++) {
		const struct xpi_rel_tx_slot *s = slot_of(tx, psn);
		if (s->lost)
			next = now_ns; /* could not be resent: at once */
		else if (!s->sacked && s->sent_ns < tx->rack_sent_ns)
			next = min64(next, s->sent_ns + rack_wait);
		else if (!s->sacked)
			next = min64(next, s->sent_ns + tx->rto_ns);
	}
	if (tx->probes < PROBES_MAX && tx->srtt_ns != 0)
		next = min64(next, tx->last_ack_ns + (probe_after(tx) << tx->probes));
	*next_ns = next;
	return 0;
}

void xpi_rel_tx_drop_all(struct xpi_rel_tx *tx, const struct xpi_rel_tx_ops *ops, void *arg)
{
	for (; tx->una != tx->nxt; tx->una++) {
		struct xpi_rel_tx_slot *s = slot_of(tx, tx->una);
		ops->release(arg, s->pkt);
		*s = (struct xpi_rel_tx_slot){ 0 };
	}
}

/* ------------------------------------------------------------------------- */
/* Receiver                                                                  */

void xpi_rel_rx_init(struct xpi_rel_rx *rx, const struct xpi_rel_params *p, uint32_t isn)
{
	*rx = (struct xpi_rel_rx){
		.nxt = isn,
		.capacity = clamp_window(p->rx_capacity),
		.ack_every = p->ack_every != 0 ? p->ack_every : 1,
		.ack_delay_ns = p->ack_delay_ns,
	};
}

static void count_unacked(struct xpi_rel_rx *rx, int64_t now_ns)
{
	if (rx->unacked++ == 0)
		rx->first_unacked_ns = now_ns;
	rx->st_delivered++;
}

void xpi_rel_rx_arrived(struct xpi_rel_rx *rx, uint32_t psn, void *pkt, int64_t now_ns,
			const struct xpi_rel_rx_ops *ops, void *arg)
{
	int32_t d = sdiff(psn, rx->nxt);
	if (d < 0) { /* delivered before: our acknowledgement was lost */
		rx->st_dups++;
		rx->ack_now = true;
		ops->drop(arg, pkt);
		return;
	}
	if (d > 0) {
		uint32_t bit = (uint32_t)d - 1;
		if ((uint32_t)d > rx->capacity) {
			rx->st_beyond++; /* past the credit we gave */
			rx->ack_now = true;
			ops->drop(arg, pkt);
		} else if (rx->have & (1ull << bit)) {
			rx->st_dups++;
			rx->ack_now = true;
			ops->drop(arg, pkt);
		} else {
			rx->have |= 1ull << bit;
			rx->held[psn % XPI_REL_MAX_WINDOW] = pkt;
			rx->st_held++;
			rx->ack_now = true; /* a gap: the sender should know now */
		}
		return;
	}
	ops->deliver(arg, pkt);
	count_unacked(rx, now_ns);
	/* Bit i of have is psn nxt + 1 + i: each step moves nxt on by one and
	 * the bits with it, delivering the held packet that is now next. */
	for (;;) {
		bool next_held = (rx->have & 1) != 0;
		rx->have >>= 1;
		rx->nxt++;
		if (!next_held)
			break;
		void **h = &rx->held[rx->nxt % XPI_REL_MAX_WINDOW];
		void *p = *h;
		*h = NULL;
		ops->deliver(arg, p);
		count_unacked(rx, now_ns);
	}
}

void xpi_rel_rx_ack_fields(const struct xpi_rel_rx *rx, uint32_t *ack, uint64_t *sack,
			   uint32_t *credit)
{
	*ack = rx->nxt;
	*sack = rx->have;
	*credit = rx->capacity;
}

bool xpi_rel_rx_ack_due(const struct xpi_rel_rx *rx, int64_t now_ns, int64_t *when_ns)
{
	*when_ns = INT64_MAX;
	if (rx->ack_now || rx->unacked >= rx->ack_every) {
		*when_ns = now_ns;
		return true;
	}
	if (rx->unacked == 0)
		return false;
	*when_ns = rx->first_unacked_ns + rx->ack_delay_ns;
	return now_ns >= *when_ns;
}

void xpi_rel_rx_ack_sent(struct xpi_rel_rx *rx)
{
	rx->unacked = 0;
	rx->ack_now = false;
}

void xpi_rel_rx_drop_all(struct xpi_rel_rx *rx, const struct xpi_rel_rx_ops *ops, void *arg)
{
	/* By the bits of have, not by the pointers: a packet is the
	 * transport's opaque value, which may be anything, NULL included. */
	for (uint64_t bits = rx->have; bits != 0; bits &= bits - 1) {
		uint32_t psn = rx->nxt + 1 + (uint32_t)__builtin_ctzll(bits);
		void **h = &rx->held[psn % XPI_REL_MAX_WINDOW];
		ops->drop(arg, *h);
		*h = NULL;
	}
	rx->have = 0;
}
