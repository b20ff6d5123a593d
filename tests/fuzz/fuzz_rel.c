/* SPDX-License-Identifier: MIT */
/*
 * libFuzzer target for the DPDK path's reliability (src/dpdk/rel.c) fed
 * what a broken or hostile peer could send: any acknowledgement (ack, sack,
 * credit) and any psn, in any order, with time moving on between them.
 * The input is a list of 16-byte operations; its first byte picks one:
 *   0 send a packet if there is room    1 an acknowledgement arrives
 *   2 time passes, the sender polls     3 a packet arrives at the receiver
 * the rest are its values (little-endian). Whatever comes, the sender must
 * keep at most window packets in flight and none past the credit it was
 * given; must release each packet exactly once and only once acknowledged
 * (or at teardown); must refuse (-EPROTO) exactly the acknowledgements of
 * what it never sent. The receiver must deliver consecutive psns, each
 * once, and hand back every packet exactly once. Never crash.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "dpdk/rel.h"
#include "replay.h"

#define MAXPKT 4096
static uint8_t tx_state[MAXPKT]; /* 0 free, 1 sent and kept, 2 released */
static uint8_t rx_state[MAXPKT]; /* 0 free, 1 with the receiver, 2 given back */
static uint32_t rx_psn[MAXPKT];
static uint32_t ntx, nrx;
static uint32_t last_delivered, first_psn;
static bool any_delivered;

static uint64_t get(const uint8_t *p, int n)
{
	uint64_t v = 0;
	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static int resend(void *arg, void *pkt, uint32_t psn)
{
	(void)arg;
	(void)psn;
	if (tx_state[(uintptr_t)pkt] != 1)
		abort(); /* resending what it no longer holds */
	return 0;
}

static void release(void *arg, void *pkt)
{
	(void)arg;
	if (tx_state[(uintptr_t)pkt] != 1)
		abort(); /* released twice, or never sent */
	tx_state[(uintptr_t)pkt] = 2;
}

static void deliver(void *arg, void *pkt)
{
	struct xpi_rel_rx *rx = arg;
	uintptr_t id = (uintptr_t)pkt;
	if (rx_state[id] != 1)
		abort();
	rx_state[id] = 2;
	/* Consecutive from the first psn: each one after the last delivered. */
	if (rx_psn[id] != (any_delivered ? last_delivered + 1 : first_psn))
		abort();
	(void)rx;
	last_delivered = rx_psn[id];
	any_delivered = true;
}

static void drop(void *arg, void *pkt)
{
	(void)arg;
	uintptr_t id = (uintptr_t)pkt;
	if (rx_state[id] != 1)
		abort();
	rx_state[id] = 2;
}

static const struct xpi_rel_tx_ops tx_ops = { resend, release };
static const struct xpi_rel_rx_ops rx_ops = { deliver, drop };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct xpi_rel_params p;
	xpi_rel_params_default(&p);
	if (size >= 4) { /* a window, a capacity and a starting psn of the input's */
		p.window = data[0] % 70;
		p.rx_capacity = data[1] % 70;
		p.give_up_ns = 1000000;
	}
	uint32_t isn = size >= 8 ? (uint32_t)get(data + 4, 4) : 0;
	struct xpi_rel_tx tx;
	struct xpi_rel_rx rx;
	int64_t now = 0;
	xpi_rel_tx_init(&tx, &p, isn, now);
	xpi_rel_rx_init(&rx, &p, isn);
	memset(tx_state, 0, sizeof(tx_state));
	memset(rx_state, 0, sizeof(rx_state));
	ntx = nrx = 0;
	any_delivered = false;
	first_psn = isn;
	uint32_t credit_end = isn + (p.rx_capacity == 0 ? 1 : p.rx_capacity);
	if (p.rx_capacity > XPI_REL_MAX_WINDOW)
		credit_end = isn + XPI_REL_MAX_WINDOW;

	for (size_t off = size >= 8 ? 8 : size; off + 16 <= size; off += 16) {
		const uint8_t *op = data + off;
		switch (op[0] % 4) {
		case 0:
			if (ntx < MAXPKT && xpi_rel_tx_room(&tx) > 0) {
				if (xpi_rel_tx_inflight(&tx) >= tx.p.window ||
				    (int32_t)(tx.nxt - credit_end) >= 0)
					abort(); /* room past the window or the credit */
				tx_state[ntx] = 1;
				xpi_rel_tx_sent(&tx, (void *)(uintptr_t)ntx, now);
				ntx++;
			}
			break;
		case 1: {
			uint32_t ack = tx.una + (uint32_t)(int8_t)op[1];
			uint64_t sack = get(op + 2, 8);
			uint32_t credit = (uint32_t)get(op + 10, 4);
			bool never_sent = (int32_t)(ack - tx.nxt) > 0;
			int rc = xpi_rel_tx_acked(&tx, ack, sack, credit, now, &tx_ops, NULL);
			if ((rc == -EPROTO) != never_sent || (rc != 0 && rc != -EPROTO))
				abort();
			if (rc == 0 && (int32_t)(ack - tx.una) >= 0) {
				uint32_t c = credit < (1u << 20) ? credit : (1u << 20);
				credit_end = ack + c;
			}
			break;
		}
		case 2: {
			now += (int64_t)get(op + 1, 3) * 64;
			int64_t next;
			if (xpi_rel_tx_poll(&tx, now, &tx_ops, NULL, &next) == -ETIMEDOUT) {
				if (xpi_rel_tx_inflight(&tx) == 0)
					abort(); /* gave up with nothing outstanding */
			}
			int64_t when;
			(void)xpi_rel_rx_ack_due(&rx, now, &when);
			if (op[4] & 1)
				xpi_rel_rx_ack_sent(&rx);
			break;
		}
		default:
			if (nrx < MAXPKT) {
				uint32_t psn = rx.nxt + (uint32_t)(int8_t)op[1];
				rx_state[nrx] = 1;
				rx_psn[nrx] = psn;
				xpi_rel_rx_arrived(&rx, psn, (void *)(uintptr_t)nrx, now, &rx_ops,
						   &rx);
				nrx++;
			}
			break;
		}
		if (xpi_rel_tx_inflight(&tx) > tx.p.window)
			abort();
	}
	/* Teardown gives back everything still held, exactly once. */
	xpi_rel_tx_drop_all(&tx, &tx_ops, NULL);
	xpi_rel_rx_drop_all(&rx, &rx_ops, &rx);
	for (uint32_t i = 0; i < ntx; i++)
		if (tx_state[i] != 2)
			abort();
	for (uint32_t i = 0; i < nrx; i++)
		if (rx_state[i] != 2)
			abort();
	return 0;
}
