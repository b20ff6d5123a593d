/* SPDX-License-Identifier: MIT */
/*
 * Which transports two ranks use between them, chosen from their two
 * capability cards (card.h). Both ranks compute it from the same two cards,
 * each on its own, and must agree without talking: so it is a pure,
 * deterministic function, and symmetric (the order of the arguments never
 * changes the result).
 *
 * The rules:
 *  1. Candidates are the transports present in both cards that can reach
 *     across: SHM only if the host ids are equal; TCP only if both reach
 *     addresses have the same family (reach[0], card.h); RDMA and DPDK
 *     whenever both have them (for now: see select.c).
 *  2. The order: the preference list of the card with the lower rank if it
 *     has one, else the other card's, else the default SHM, RDMA, DPDK, TCP.
 *     (Equal ranks, which only a card compared with itself should have:
 *     the lexicographically smaller list.) A transport missing from a
 *     non-empty list of either card is no candidate: both sides'
 *     restrictions apply, whichever order is used.
 *  3. small (eager messages, latency) is the first candidate in that order.
 *  4. bulk (rendezvous payloads) is the candidate with the largest bandwidth
 *     both advertise (the smaller of the two cards' bw_mbps), ties going to
 *     the earlier in the order; if it is no better than small's, bulk is
 *     small.
 *  5. watch: if small's card entry on either side says XPI_CAP_WATCHED and
 *     TCP is a candidate other than small, TCP is connected too, to carry
 *     nothing but the news that the peer's process ended (its connection
 *     closes with it). 0 otherwise.
 */
#ifndef XPI_SELECT_H
#define XPI_SELECT_H

#include "card.h"

struct xpi_lanes {
	uint8_t small; /* enum xpi_tl_type: eager messages, latency */
	uint8_t bulk;  /* enum xpi_tl_type: rendezvous payloads */
	uint8_t watch; /* enum xpi_tl_type connected to see the peer end, or 0 */
};

/*
 * Picks the lanes between the ranks of cards @a and @b by the rules above.
 * Returns 0 with *@out written, or -ENOENT when no transport qualifies,
 * with *@why (if @why is not NULL) saying which rule left none: nothing in
 * common, the preference lists excluded all of it, or none could reach
 * (different hosts for SHM, different address families for TCP). -EINVAL
 * if a card's ntl or nallowed exceeds XPI_CARD_MAX_TL. Pure; any thread.
 */
int xpi_select(const struct xpi_card *a, const struct xpi_card *b, struct xpi_lanes *out,
	       const char **why);

/*
 * The same with the transports in @exclude (bit 1 << type) left out: the
 * fallback when those failed to set up between the two ranks, which both
 * know alike (the backends' attach agreed on it), so both still agree.
 */
int xpi_select_without(const struct xpi_card *a, const struct xpi_card *b, uint32_t exclude,
		       struct xpi_lanes *out, const char **why);

#endif
