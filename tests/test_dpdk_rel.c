/* SPDX-License-Identifier: MIT */
/*
 * The DPDK path's reliability (src/dpdk/rel.c) against a simulated channel
 * that loses, reorders and duplicates packets in both directions, in
 * virtual time: a sender streams messages cut into packets, the receiver
 * puts them back together and acknowledges through the same lossy channel.
 * For 0%, 1%, 5% and 20% loss, with and without reordering and
 * duplication, and across the 2^32 wrap of the sequence numbers, every
 * message must arrive exactly once, in order, byte for byte; the sender
 * must keep to the receiver's credit; every packet must be given back.
 * Also: a peer that goes silent is given up after give_up_ns and not
 * before; acknowledgements of what was never sent are refused; the
 * congestion window shrinks under loss. This tests the protocol's logic;
 * that it works over real devices is for the suite dpdk.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dpdk/rel.h"
#include "testutil.h"

#define MTU_PAYLOAD 1024u
#define MAX_MSG 6000u
#define BASE_DELAY_NS 10000 /* one way */
#define JITTER_NS 30000     /* with reordering: up to this much more */
#define SEND_GAP_NS 500     /* a packet's time on the wire */

static uint64_t rng_state;
static uint64_t rnd(void)
{
	/* xorshift64*: a fixed seed per case, so a failure replays. */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return rng_state * 0x2545f4914f6cdd1dull;
}
static bool chance(double p)
{
	return (double)(rnd() >> 11) / (double)(1ull << 53) < p;
}

/* A packet as the channel carries it: DATA (sender to receiver) or ACK. */
struct pkt {
	bool is_ack;
	uint32_t psn;
	uint32_t ack, credit;
	uint64_t sack;
	uint32_t msg_id, msg_len, frag_off, len;
	uint8_t data[MTU_PAYLOAD];
};

struct in_flight {
	int64_t at;
	struct pkt *p;
};

struct sim {
	double loss, dup;
	bool reorder;
	bool dead; /* from now on nothing gets through */
	int64_t now;
	int64_t wire_free; /* the sender's link is busy until then */
	struct in_flight *q;
	size_t nq, capq;
	long live_pkts; /* allocated and not yet freed */
	struct xpi_rel_tx tx;
	struct xpi_rel_rx rx;
	/* The sender's messages. */
	uint32_t nmsgs, next_msg, next_off;
	/* The receiver's reassembly. */
	uint32_t want_msg, got;
	uint8_t buf[MAX_MSG];
	uint64_t bytes_delivered;
	uint32_t min_cwnd;
};

static uint32_t msg_len_of(uint32_t id)
{
	/* Sizes from 0 to MAX_MSG, fixed by the id: empty, one packet, many. */
	uint32_t x = id * 2654435761u;
	return id % 7 == 0 ? 0 : x % (MAX_MSG + 1);
}

static uint8_t byte_of(uint32_t id, uint32_t off)
{
	return (uint8_t)(id * 31 + off * 7 + (off >> 8));
}

static struct pkt *pkt_new(struct sim *s)
{
	struct pkt *p = calloc(1, sizeof(*p));
	T_CHECK(p != NULL);
	s->live_pkts++;
	return p;
}

static void pkt_free(struct sim *s, struct pkt *p)
{
	free(p);
	s->live_pkts--;
}

/* Puts a copy of @p on the channel, or loses it; maybe twice. */
static void transmit(struct sim *s, const struct pkt *p)
{
	int copies = chance(s->dup) ? 2 : 1;
	for (int c = 0; c < copies; c++) {
		if (s->dead || chance(s->loss))
			continue;
		struct pkt *cp = pkt_new(s);
		*cp = *p;
		int64_t at =
			s->now + BASE_DELAY_NS + (s->reorder ? (int64_t)(rnd() % JITTER_NS) : 0);
		if (s->nq == s->capq) {
			s->capq = s->capq ? 2 * s->capq : 256;
			s->q = realloc(s->q, s->capq * sizeof(*s->q));
			T_CHECK(s->q != NULL);
		}
		s->q[s->nq++] = (struct in_flight){ at, cp };
	}
}

/* --- the sender's side --- */

static int resend(void *arg, void *pkt, uint32_t psn)
{
	struct sim *s = arg;
	struct pkt *p = pkt;
	T_EQ(p->psn, psn);
	transmit(s, p);
	return 0;
}

static void release(void *arg, void *pkt)
{
	pkt_free(arg, pkt);
}

static const struct xpi_rel_tx_ops tx_ops = { resend, release };

/* Sends new packets while the window, the congestion window and the
 * credit allow, one per SEND_GAP_NS. */
static void send_more(struct sim *s)
{
	while (s->next_msg < s->nmsgs && s->wire_free <= s->now && xpi_rel_tx_room(&s->tx) > 0) {
		uint32_t len = msg_len_of(s->next_msg);
		uint32_t n = len - s->next_off < MTU_PAYLOAD ? len - s->next_off : MTU_PAYLOAD;
		struct pkt *p = pkt_new(s);
		p->msg_id = s->next_msg;
		p->msg_len = len;
		p->frag_off = s->next_off;
		p->len = n;
		for (uint32_t i = 0; i < n; i++)
			p->data[i] = byte_of(s->next_msg, s->next_off + i);
		p->psn = xpi_rel_tx_sent(&s->tx, p, s->now);
		transmit(s, p);
		s->next_off += n;
		if (s->next_off >= len) {
			s->next_msg++;
			s->next_off = 0;
		}
		s->wire_free = s->now + SEND_GAP_NS;
		uint32_t cw = s->tx.cwnd_fp >> 10;
		if (cw < s->min_cwnd)
			s->min_cwnd = cw;
	}
}

/* --- the receiver's side --- */

static void deliver(void *arg, void *pkt)
{
	struct sim *s = arg;
	struct pkt *p = pkt;
	/* In order: each packet continues the message being put together. */
	if (p->msg_id != s->want_msg || p->frag_off != s->got ||
	    p->msg_len != msg_len_of(p->msg_id))
		T_FAIL("out of order: message %u offset %u (length %u), expected message %u "
		       "offset %u",
		       p->msg_id, p->frag_off, p->msg_len, s->want_msg, s->got);
	T_CHECK(p->frag_off + p->len <= MAX_MSG);
	memcpy(s->buf + p->frag_off, p->data, p->len);
	s->got += p->len;
	if (s->got == p->msg_len) {
		for (uint32_t i = 0; i < p->msg_len; i++)
			if (s->buf[i] != byte_of(p->msg_id, i))
				T_FAIL("message %u corrupt at byte %u", p->msg_id, i);
		s->bytes_delivered += p->msg_len;
		s->want_msg++;
		s->got = 0;
	}
	pkt_free(s, p);
}

static void drop(void *arg, void *pkt)
{
	pkt_free(arg, pkt);
}

static const struct xpi_rel_rx_ops rx_ops = { deliver, drop };

static void send_ack(struct sim *s)
{
	struct pkt a = { .is_ack = true };
	xpi_rel_rx_ack_fields(&s->rx, &a.ack, &a.sack, &a.credit);
	xpi_rel_rx_ack_sent(&s->rx);
	transmit(s, &a);
}

/* --- the event loop --- */

/* Runs until every message is delivered and acknowledged, or the sender
 * gives up (its error), or @limit_ns of virtual time passes (-1). */
static int run(struct sim *s, int64_t limit_ns)
{
	for (;;) {
		send_more(s);
		int64_t tx_next, ack_next;
		int rc = xpi_rel_tx_poll(&s->tx, s->now, &tx_ops, s, &tx_next);
		if (rc < 0)
			return rc;
		if (xpi_rel_rx_ack_due(&s->rx, s->now, &ack_next)) {
			send_ack(s);
			xpi_rel_rx_ack_due(&s->rx, s->now, &ack_next);
		}
		if (s->next_msg == s->nmsgs && xpi_rel_tx_inflight(&s->tx) == 0 && !s->dead)
			return 0;
		if (s->now > limit_ns)
			return -1;
		/* The next event: an arrival, a timer, an acknowledgement due,
		 * or the link free for more. */
		int64_t next = tx_next < ack_next ? tx_next : ack_next;
		size_t first = SIZE_MAX;
		for (size_t i = 0; i < s->nq; i++)
			if (first == SIZE_MAX || s->q[i].at < s->q[first].at)
				first = i;
		if (first != SIZE_MAX && s->q[first].at < next)
			next = s->q[first].at;
		if (s->next_msg < s->nmsgs && xpi_rel_tx_room(&s->tx) > 0 && s->wire_free < next)
			next = s->wire_free;
		if (next == INT64_MAX)
			T_FAIL("nothing left to happen at %lld ns with %u packets in flight",
			       (long long)s->now, xpi_rel_tx_inflight(&s->tx));
		if (next > s->now)
			s->now = next;
		if (first == SIZE_MAX || s->q[first].at > s->now)
			continue;
		struct pkt *p = s->q[first].p;
		s->q[first] = s->q[--s->nq];
		if (p->is_ack) {
			T_OK(xpi_rel_tx_acked(&s->tx, p->ack, p->sack, p->credit, s->now, &tx_ops,
					      s));
			pkt_free(s, p);
		} else {
			xpi_rel_rx_arrived(&s->rx, p->psn, p, s->now, &rx_ops, s);
		}
	}
}

static void sim_init(struct sim *s, uint64_t seed, double loss, bool reorder, double dup,
		     uint32_t isn, const struct xpi_rel_params *p, uint32_t nmsgs)
{
	memset(s, 0, sizeof(*s));
	rng_state = seed;
	s->loss = loss;
	s->reorder = reorder;
	s->dup = dup;
	s->nmsgs = nmsgs;
	xpi_rel_tx_init(&s->tx, p, isn, 0);
	xpi_rel_rx_init(&s->rx, p, isn);
	s->min_cwnd = UINT32_MAX;
}

static void sim_fini(struct sim *s)
{
	for (size_t i = 0; i < s->nq; i++)
		pkt_free(s, s->q[i].p);
	s->nq = 0;
	xpi_rel_tx_drop_all(&s->tx, &tx_ops, s);
	xpi_rel_rx_drop_all(&s->rx, &rx_ops, s);
	free(s->q);
	T_EQ(s->live_pkts, 0); /* every packet given back exactly once */
}

static struct sim S;

static void one_case(double loss, bool reorder, double dup, uint32_t isn, uint32_t capacity)
{
	struct xpi_rel_params p;
	xpi_rel_params_default(&p);
	p.rx_capacity = capacity; /* the default timeouts: rto_min 4x the ack delay */
	const uint32_t nmsgs = 600;
	for (uint64_t seed = 1; seed <= 3; seed++) {
		sim_init(&S, seed * 0x9e3779b97f4a7c15ull, loss, reorder, dup, isn, &p, nmsgs);
		int rc = run(&S, 60ll * 1000000000);
		if (rc != 0)
			T_FAIL("loss %.2f reorder %d dup %.2f seed %llu: %s after %u of %u messages",
			       loss, reorder, dup, (unsigned long long)seed,
			       rc == -1 ? "no end in 60 s of virtual time" : "gave up", S.want_msg,
			       nmsgs);
		T_EQ(S.want_msg, nmsgs);
		T_EQ(S.rx.st_beyond, 0); /* the sender kept to the credit */
		if (loss > 0) {
			T_CHECK(S.tx.st_resent > 0);
			T_CHECK(S.tx.st_loss_events > 0);
			T_CHECK(S.min_cwnd < p.window); /* the window shrank */
		}
		if (loss == 0 && !reorder && dup == 0) {
			T_EQ(S.tx.st_resent, 0); /* a clean channel needs no resend */
			T_EQ(S.rx.st_dups, 0);
		}
		if (seed == 1)
			fprintf(stderr,
				"   loss %4.1f%% reorder %d dup %4.1f%% credit %2u: %u messages, "
				"goodput %6.1f MB/s (virtual), %llu sent, %llu resent (%llu "
				"found early, %llu probes, %llu timeouts; %llu spurious), %llu "
				"duplicates dropped, min cwnd %u\n",
				loss * 100, reorder, dup * 100, capacity, nmsgs,
				(double)S.bytes_delivered * 1e3 / (double)S.now,
				(unsigned long long)S.tx.st_sent,
				(unsigned long long)S.tx.st_resent,
				(unsigned long long)S.tx.st_fast,
				(unsigned long long)S.tx.st_probes,
				(unsigned long long)S.tx.st_timeouts,
				(unsigned long long)S.tx.st_spurious,
				(unsigned long long)S.rx.st_dups, S.min_cwnd);
		sim_fini(&S);
	}
}

static void test_lossy_channels(void)
{
	const double losses[] = { 0, 0.01, 0.05, 0.20 };
	for (size_t i = 0; i < sizeof(losses) / sizeof(losses[0]); i++) {
		one_case(losses[i], false, 0, 1000, XPI_REL_MAX_WINDOW);
		one_case(losses[i], true, 0.05, 1000, XPI_REL_MAX_WINDOW);
	}
}

static void test_psn_wrap(void)
{
	/* About 4000 packets go: numbers from 2^32 - 1500 wrap past zero. */
	one_case(0.05, true, 0.02, UINT32_MAX - 1500, XPI_REL_MAX_WINDOW);
}

static void test_small_credit(void)
{
	/* The receiver takes 8 packets past ack: never more are sent. */
	one_case(0, false, 0, 7, 8);
	one_case(0.05, true, 0.05, 7, 8);
}

static void test_peer_goes_silent(void)
{
	struct xpi_rel_params p;
	xpi_rel_params_default(&p);
	p.give_up_ns = 50ll * 1000000;
	sim_init(&S, 42, 0, false, 0, 1, &p, 5000);
	/* Half the messages go through, then nothing does. */
	int rc = run(&S, 1000000); /* 1 ms of virtual time */
	T_EQ(rc, -1);
	T_CHECK(S.want_msg > 0);
	S.dead = true;
	int64_t silent_from = S.now;
	rc = run(&S, silent_from + 10ll * p.give_up_ns);
	T_EQ(rc, -ETIMEDOUT);
	/* Not before give_up_ns without an acknowledgement, and not much
	 * after (a timer runs at the latest give_up_ns after the last one). */
	T_CHECK(S.now - S.tx.last_ack_ns >= p.give_up_ns);
	T_CHECK(S.now - silent_from <= p.give_up_ns + BASE_DELAY_NS + SEND_GAP_NS);
	T_CHECK(S.tx.st_timeouts > 0);
	sim_fini(&S);
}

static void test_bad_acks(void)
{
	struct xpi_rel_params p;
	xpi_rel_params_default(&p);
	sim_init(&S, 7, 0, false, 0, 100, &p, 0);
	struct pkt *a = pkt_new(&S), *b = pkt_new(&S);
	T_EQ(xpi_rel_tx_sent(&S.tx, a, 0), 100);
	T_EQ(xpi_rel_tx_sent(&S.tx, b, 0), 101);
	/* Acknowledging psn 102 (ack 103) that was never sent: refused, and
	 * nothing is released. */
	T_EQ(xpi_rel_tx_acked(&S.tx, 103, 0, 64, 10, &tx_ops, &S), -EPROTO);
	T_EQ(xpi_rel_tx_inflight(&S.tx), 2);
	/* A selective acknowledgement beyond what was sent is ignored; the
	 * cumulative part still counts. */
	T_OK(xpi_rel_tx_acked(&S.tx, 101, ~0ull, 64, 10, &tx_ops, &S));
	T_EQ(xpi_rel_tx_inflight(&S.tx), 1);
	/* An old acknowledgement (reordered) changes nothing, and a huge
	 * credit is clamped rather than wrapping into the past. */
	T_OK(xpi_rel_tx_acked(&S.tx, 100, 0, 0, 11, &tx_ops, &S));
	T_EQ(xpi_rel_tx_inflight(&S.tx), 1);
	T_OK(xpi_rel_tx_acked(&S.tx, 101, 0, UINT32_MAX, 12, &tx_ops, &S));
	T_CHECK(xpi_rel_tx_room(&S.tx) > 0);
	sim_fini(&S);
}

static void test_receiver_edges(void)
{
	struct xpi_rel_params p;
	xpi_rel_params_default(&p);
	p.rx_capacity = 4;
	sim_init(&S, 9, 0, false, 0, 10, &p, 0);
	S.want_msg = 0;
	/* Packets 11 and 13 early: held, acknowledged selectively. */
	struct pkt *p11 = pkt_new(&S), *p13 = pkt_new(&S), *p10 = pkt_new(&S);
	*p10 = (struct pkt){ .psn = 10, .msg_id = 0, .msg_len = 0 };
	*p11 = (struct pkt){ .psn = 11, .msg_id = 1, .msg_len = msg_len_of(1) };
	*p13 = (struct pkt){ .psn = 13 };
	xpi_rel_rx_arrived(&S.rx, 11, p11, 0, &rx_ops, &S);
	xpi_rel_rx_arrived(&S.rx, 13, p13, 0, &rx_ops, &S);
	uint32_t ack, credit;
	uint64_t sack;
	int64_t when;
	xpi_rel_rx_ack_fields(&S.rx, &ack, &sack, &credit);
	T_EQ(ack, 10);
	T_EQ(sack, 0x5); /* 11 and 13 */
	T_EQ(credit, 4);
	T_CHECK(xpi_rel_rx_ack_due(&S.rx, 0, &when)); /* a gap: at once */
	xpi_rel_rx_ack_sent(&S.rx);
	/* 15 is past the credit (10 + 4): dropped and counted; 11 again is a
	 * duplicate. */
	xpi_rel_rx_arrived(&S.rx, 15, pkt_new(&S), 0, &rx_ops, &S);
	T_EQ(S.rx.st_beyond, 1);
	struct pkt *dup = pkt_new(&S);
	*dup = *p11;
	xpi_rel_rx_arrived(&S.rx, 11, dup, 0, &rx_ops, &S);
	T_EQ(S.rx.st_dups, 1);
	/* 10 fills the gap: 10 and 11 are delivered, 13 stays held. The
	 * message of 11 is longer than one packet's worth in this test, so
	 * 13 must not be delivered yet (it would fail the order check). */
	xpi_rel_rx_arrived(&S.rx, 10, p10, 0, &rx_ops, &S);
	xpi_rel_rx_ack_fields(&S.rx, &ack, &sack, &credit);
	T_EQ(ack, 12);
	T_EQ(sack, 0x1); /* 13 */
	T_EQ(S.rx.st_delivered, 2);
	sim_fini(&S);
}

int main(void)
{
	T_RUN(test_bad_acks);
	T_RUN(test_receiver_edges);
	T_RUN(test_lossy_channels);
	T_RUN(test_psn_wrap);
	T_RUN(test_small_credit);
	T_RUN(test_peer_goes_silent);
	return 0;
}
