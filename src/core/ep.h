/* SPDX-License-Identifier: MIT */
/*
 * Endpoints: connections made by address (xport.h, xp_listen and
 * xp_connect), in the engine as peers beyond the job's ranks.
 *
 * Every structure of the engine and the transports is indexed by rank, so
 * an endpoint is a *slot*: an index from ctx->size to ctx->npeers - 1 in
 * those arrays, taken when a connection is made (either side) and given
 * back once the transport has closed it. The per-slot arrays are sized
 * once (XP_EP_MAX); what a pair needs beyond them is made on its first
 * need, as for the job's pairs. An endpoint's messages are in a tag space
 * of their own (XPI_EP_COMM), so no receive of the job matches them, and
 * their source is the slot, so each connection matches in posted order.
 *
 * The transport that makes the connections (TCP, the one every host has)
 * registers its xpi_ep_ops when it attaches. Other transports may serve an
 * endpoint's messages once its connection is made ("lanes"): each side
 * offers the types it has (a sideband message of the core's, over the
 * connection), both take the first type both offer, and that transport
 * makes its pair over the connection as it does for ranks (RDMA: its
 * queue pair numbers as sideband messages), then moves the endpoint's
 * lanes to itself. The connection stays, as the watcher of the peer and
 * the carrier of sideband messages. Messages sent before the move and
 * after it are put back in order by their sequence numbers, as for
 * ranks; a goodbye carries how many were sent, and the endpoint's loss
 * waits until they all came.
 */
#ifndef XPI_EP_H
#define XPI_EP_H

#include <stdint.h>

#include "engine.h"

/* The tag space of endpoints' messages: the last pair of ids, which no
 * communicator takes (comm.c finds it used). */
#define XPI_EP_COMM (XPI_COMM_IDS - 2)

enum xpi_slot_state { XPI_SLOT_FREE = 0, XPI_SLOT_USED, XPI_SLOT_CLOSING };

/*
 * The address of a listener, as xp_ep_addr_t carries it (128 bytes, every
 * integer big-endian, reserved bytes zero):
 *    0  4  magic "XPEP"
 *    4  1  version (1)
 *    5  1  flags: bit 0, the listener's context has a job key
 *    6  2  reserved
 *    8 24  the TCP listener's card (tcp_setup.c: version, family, port,
 *          address)
 *   32 32  the listener's secret (getrandom)
 *   64 16  the listener's host (card.h's host id), for the transports to
 *          come
 *   80 48  reserved
 */
#define XPI_EP_MAGIC "XPEP"
#define XPI_EP_VERSION 1
#define XPI_EP_FLAG_KEY 1u
#define XPI_EP_CARD_LEN 24
#define XPI_EP_SECRET_LEN 32
#define XPI_EP_HOST_LEN 16

struct xpi_ep_addr {
	uint8_t flags;
	uint8_t card[XPI_EP_CARD_LEN];
	uint8_t secret[XPI_EP_SECRET_LEN];
	uint8_t host[XPI_EP_HOST_LEN];
};

/* Writes @a as the 128 bytes of an address. Pure. */
void xpi_ep_addr_write(const struct xpi_ep_addr *a, uint8_t out[XP_EP_ADDR_BYTES]);
/* Reads an address: 0 and *@out, or -EINVAL with *@why saying what is
 * wrong (another magic or version, reserved bytes set). Pure. */
int xpi_ep_addr_parse(const uint8_t in[XP_EP_ADDR_BYTES], struct xpi_ep_addr *out,
		      const char **why);

struct xp_listener {
	xp_context_t *ctx;
	void *tl_state; /* the transport's listener */
	/* Slots connected through it and not taken yet (xp_accept), oldest
	 * first: a ring of cap entries, with room for the @choosing ones
	 * connected whose lanes are being chosen. Owner. */
	int *ready;
	unsigned head, count, cap, choosing;
	char label[48]; /* its address, for messages */
};

struct xp_ep {
	xp_context_t *ctx;
	int slot;
};

/* What the transport that makes endpoints offers the core. Owner, never
 * blocking, as transport.h's ops. */
struct xpi_ep_ops {
	/* Listens for @l: writes the address's parts (card, secret, host)
	 * into @a and @l->label. 0 or a negative code. */
	int (*listen)(void *tl, struct xp_listener *l, struct xpi_ep_addr *a);
	/* Stops listening; connections of @l not made yet are closed, and
	 * those made but not taken are closed like an endpoint (close). */
	void (*listen_close)(void *tl, struct xp_listener *l);
	/* Starts connecting slot @slot to @a. 0 or a negative code. */
	int (*connect)(void *tl, int slot, const struct xpi_ep_addr *a);
	/* 0: connected; -EAGAIN: being made; or why it failed. */
	int (*state)(void *tl, int slot);
	/* Closes slot @slot after its queued output: the transport calls
	 * xpi_ep_slot_released once nothing of it is left. */
	void (*close)(void *tl, int slot);
};

/* What a transport that may serve endpoints' lanes offers the core.
 * Owner, never blocking. */
struct xpi_ep_lane_ops {
	/* Both sides of @slot offered this lane: make its pair (over the
	 * endpoint's connection, xpi_engine_sideband_send), then call
	 * xpi_ep_lane_settled. */
	void (*start)(void *tl, int slot);
	/* @slot is being given back (closed, and its connection gone): let go
	 * of all of it. 0: nothing of it is left; -EAGAIN: ask again (what
	 * was sent is still on the wire, bounded by the transport). */
	int (*release)(void *tl, int slot);
};

/* Per slot: the lanes' choice, and a goodbye's count (ep.c). */
struct xpi_ep_slot {
	bool offered; /* our offer was sent */
	bool heard;   /* the peer's came: peer_offers */
	bool settled; /* its lanes are chosen (xp_ep_ready) */
	uint8_t peer_offers;
	bool bye; /* the peer said goodbye after bye_seq messages */
	uint32_t bye_seq;
	int gone_err; /* its loss, deferred until they came */
	char gone_why[96];
	int slot;
	struct xpi_timer gone_timer;
	struct xp_listener *listener; /* made through it, not yet handed over */
};

/* Called by the transport when it attaches. */
void xpi_ep_register(xp_context_t *ctx, const struct xpi_ep_ops *ops, void *tl, int tl_index);
/* Gives @ctx @n endpoint slots (before any transport attaches). 0 or -ENOMEM. */
int xpi_ep_slots_init(xp_context_t *ctx, int n);
void xpi_ep_slots_fini(xp_context_t *ctx);
/* Takes a free slot for a connection to or from @label: its lanes are the
 * endpoint transport. The slot, or -EMFILE when all are taken. Owner. */
int xpi_ep_slot_take(xp_context_t *ctx, const char *label);
/* A connection through @l is made: xp_accept gives it once its lanes are
 * chosen (or it failed meanwhile). 0 or -ENOMEM. Owner. */
int xpi_ep_accepted(struct xp_listener *l, int slot);
/* ep_lanes.c: @slot's lanes are chosen, or it is lost: xp_accept may give
 * it now if a listener holds it. */
void xpi_ep_hand_over(xp_context_t *ctx, int slot);
/* The transport has let go of @slot: it is free again. Owner. */
void xpi_ep_slot_released(xp_context_t *ctx, int slot);
/* Called by a transport that may serve endpoints' lanes, of type @type
 * (enum xpi_tl_type), when it attaches. */
void xpi_ep_lane_register(xp_context_t *ctx, uint8_t type, const struct xpi_ep_lane_ops *ops,
			  void *tl, int tl_index);
/* The endpoint transport: @slot's connection is made (both sides call it):
 * the lanes are offered over it. Owner, inside its progress. */
void xpi_ep_pair_made(xp_context_t *ctx, int slot);
/* The lane transport: @slot's lanes are its own (@tl_index), or stay on
 * the connection (-1, its pair could not be made). */
void xpi_ep_lane_settled(xp_context_t *ctx, int slot, int tl_index);
/* The endpoint transport, before it gives @slot back: 0 once every lane
 * let go of it, else -EAGAIN (ask again from progress). */
int xpi_ep_lanes_release(xp_context_t *ctx, int slot);
/* The endpoint transport: the peer said goodbye on @slot after sending
 * @seq messages in all. */
void xpi_ep_bye(xp_context_t *ctx, int slot, uint32_t seq);
/* The engine, losing endpoint @peer: true if its loss waits for messages
 * its goodbye counted (then it is reported from xpi_ep_caught_up, or by
 * a deadline). */
bool xpi_ep_loss_deferred(xp_context_t *ctx, int peer, int err, const char *why);
/* The engine: a message of @peer, whose loss waits (bye_wait), came. */
void xpi_ep_caught_up(xp_context_t *ctx, int peer);
/* ep.c: takes the offers of lanes (at slots_init); forgets @slot's choice
 * and goodbye (when it is taken or given back). */
void xpi_ep_lanes_init(xp_context_t *ctx);
void xpi_ep_slot_reset(xp_context_t *ctx, int slot);

/* True if @peer is an endpoint slot. */
static inline bool xpi_peer_is_ep(const xp_context_t *ctx, int peer)
{
	return peer >= ctx->size;
}
/* "rank N", or "endpoint N (ADDRESS)": how texts name @peer. */
void xpi_peer_name(const xp_context_t *ctx, int peer, char *out, size_t n);

#endif
