/* SPDX-License-Identifier: MIT */
/*
 * Endpoints' lanes (ep.h): which transport serves an endpoint once its
 * connection is made, and how its end waits for what is still on them.
 *
 * Choosing. When the connection is made, each side sends an offer: the
 * transport types it has lanes of (a bit each). Both take the lowest type
 * that both offered (the cards' numbering, select/card.h, goes fastest
 * first: shared memory, RDMA, DPDK), so both choose alike without a third
 * message; that transport then makes its pair over the connection
 * (its own sideband messages) and settles the slot on itself, or on the
 * connection if its pair cannot be made. Until then the connection
 * carries the endpoint's messages, so nothing waits for the choice.
 *
 * Offer, 4 bytes: u8 kind (1), u8 version (1), u8 types (bit t: enum
 * xpi_tl_type t), u8 zero.
 *
 * Ending. A goodbye on the connection says how many messages the peer
 * sent in all; when the connection then ends, the endpoint is lost only
 * once they all came, or a second later: the last of them may be on a
 * faster lane than the goodbye, or a slower one.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "clock.h"
#include "compiler.h"
#include "ep.h"
#include "log.h"

#define OFFER_KIND 1u
#define OFFER_VERSION 1u
#define OFFER_LEN 4u

/* How long a lost endpoint's loss waits for the messages its goodbye
 * counted. */
#define GONE_WAIT_NS (1000 * 1000000LL)

static struct xpi_ep_slot *slot_of(xp_context_t *ctx, int slot)
{
	return &ctx->ep_slots[slot - ctx->size];
}

static uint8_t our_offers(const xp_context_t *ctx)
{
	uint8_t types = 0;
	for (int i = 0; i < ctx->nep_lanes; i++)
		types |= (uint8_t)(1u << ctx->ep_lanes[i].type);
	return types;
}

void xpi_ep_lane_register(xp_context_t *ctx, uint8_t type, const struct xpi_ep_lane_ops *ops,
			  void *tl, int tl_index)
{
	if (ctx->nep_lanes == (int)(sizeof(ctx->ep_lanes) / sizeof(ctx->ep_lanes[0])) || type > 7)
		return;
	ctx->ep_lanes[ctx->nep_lanes++] =
		(struct xpi_ep_lane){ .type = type, .tl_index = tl_index, .ops = ops, .tl = tl };
	ctx->tls[tl_index].slots = true;
}

static void send_offer(xp_context_t *ctx, int slot)
{
	struct xpi_ep_slot *s = slot_of(ctx, slot);
	uint8_t m[OFFER_LEN] = { OFFER_KIND, OFFER_VERSION, our_offers(ctx), 0 };
	/* The connection is made, so it has room or queues: a failure is
	 * its loss, which it reports itself. */
	if (xpi_engine_sideband_send(ctx, slot, -1, XPI_SIDEBAND_EP, m, sizeof(m)) == 0)
		s->offered = true;
}

/* Both offers are known: the first lane both have, or the connection. */
static void choose(xp_context_t *ctx, int slot)
{
	struct xpi_ep_slot *s = slot_of(ctx, slot);
	uint8_t both = our_offers(ctx) & s->peer_offers;
	for (unsigned type = 0; type < 8; type++) {
		if (!(both & (1u << type)))
			continue;
		for (int i = 0; i < ctx->nep_lanes; i++)
			if (ctx->ep_lanes[i].type == type) {
				ctx->ep_lanes[i].ops->start(ctx->ep_lanes[i].tl, slot);
				return;
			}
	}
	xpi_ep_lane_settled(ctx, slot, -1);
}

void xpi_ep_pair_made(xp_context_t *ctx, int slot)
{
	struct xpi_ep_slot *s = slot_of(ctx, slot);
	if (!s->offered)
		send_offer(ctx, slot);
	if (s->offered && s->heard && !s->settled)
		choose(ctx, slot);
}

/* The sideband taker of XPI_SIDEBAND_EP: the peer's offer. */
static void take_offer(void *arg, int slot, const uint8_t *m, size_t len)
{
	xp_context_t *ctx = arg;
	struct xpi_ep_slot *s = slot_of(ctx, slot);
	if (len != OFFER_LEN || m[0] != OFFER_KIND || m[1] != OFFER_VERSION || m[3] != 0 ||
	    s->heard) {
		xpi_engine_peer_failed(ctx, slot, -EPROTO,
				       "sent a wrong offer of lanes (a broken or other version)");
		return;
	}
	s->heard = true;
	s->peer_offers = m[2];
	xpi_ep_pair_made(ctx, slot); /* ours may not have gone yet */
}

void xpi_ep_lane_settled(xp_context_t *ctx, int slot, int tl_index)
{
	struct xpi_ep_slot *s = slot_of(ctx, slot);
	s->settled = true;
	if (tl_index >= 0) {
		/* The connection watches the peer and carries the lane's
		 * sideband messages from now on. */
		xpi_context_set_peer_tl(ctx, slot, tl_index);
		ctx->peers[slot].tl_watch = (uint8_t)ctx->ep_tl_index;
		if (xpi_debug_on("transport")) {
			char name[96];
			xpi_peer_name(ctx, slot, name, sizeof(name));
			xpi_log(XPI_LOG_INFO, "rank %d: %s moved to %s", ctx->rank, name,
				ctx->tls[tl_index].ops->name);
		}
	}
	xpi_ep_hand_over(ctx, slot);
}

int xpi_ep_lanes_release(xp_context_t *ctx, int slot)
{
	int rc = 0;
	for (int i = 0; i < ctx->nep_lanes; i++)
		if (ctx->ep_lanes[i].ops->release(ctx->ep_lanes[i].tl, slot) == -EAGAIN)
			rc = -EAGAIN;
	return rc;
}

void xpi_ep_bye(xp_context_t *ctx, int slot, uint32_t seq)
{
	struct xpi_ep_slot *s = slot_of(ctx, slot);
	s->bye = true;
	s->bye_seq = seq;
}

static void gone_now(xp_context_t *ctx, int peer)
{
	struct xpi_ep_slot *s = slot_of(ctx, peer);
	ctx->peers[peer].bye_wait = false;
	xpi_timer_cancel(ctx, &s->gone_timer);
	char why[sizeof(s->gone_why)];
	memcpy(why, s->gone_why, sizeof(why));
	xpi_engine_peer_failed(ctx, peer, s->gone_err, why);
}

static void gone_timer_fire(xp_context_t *ctx, struct xpi_timer *t)
{
	struct xpi_ep_slot *s = xpi_container_of(t, struct xpi_ep_slot, gone_timer);
	if (ctx->peers[s->slot].bye_wait)
		gone_now(ctx, s->slot);
}

bool xpi_ep_loss_deferred(xp_context_t *ctx, int peer, int err, const char *why)
{
	struct xpi_ep_slot *s = slot_of(ctx, peer);
	struct xpi_peer *p = &ctx->peers[peer];
	if (p->bye_wait)
		return true; /* another lane noticed too: the first reason stands */
	if (!s->bye || p->recv_seq == s->bye_seq || p->failed != 0)
		return false;
	s->gone_err = err;
	snprintf(s->gone_why, sizeof(s->gone_why), "%s", why);
	s->slot = peer;
	s->gone_timer.fire = gone_timer_fire;
	if (xpi_timer_arm(ctx, &s->gone_timer, xpi_now_ns() + GONE_WAIT_NS) < 0)
		return false;
	p->bye_wait = true;
	return true;
}

void xpi_ep_caught_up(xp_context_t *ctx, int peer)
{
	if (ctx->peers[peer].recv_seq == slot_of(ctx, peer)->bye_seq)
		gone_now(ctx, peer);
}

void xpi_ep_lanes_init(xp_context_t *ctx)
{
	ctx->sideband[XPI_SIDEBAND_EP] =
		(struct xpi_sideband){ .take = take_offer, .tl = ctx, .slots = true };
}

void xpi_ep_slot_reset(xp_context_t *ctx, int slot)
{
	struct xpi_ep_slot *s = slot_of(ctx, slot);
	xpi_timer_cancel(ctx, &s->gone_timer);
	if (s->listener != NULL)
		s->listener->choosing--;
	memset(s, 0, sizeof(*s));
	ctx->peers[slot].bye_wait = false;
}
