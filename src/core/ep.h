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
 * registers its xpi_ep_ops when it attaches.
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
	 * first: a ring of cap entries. Owner. */
	int *ready;
	unsigned head, count, cap;
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

/* Called by the transport when it attaches. */
void xpi_ep_register(xp_context_t *ctx, const struct xpi_ep_ops *ops, void *tl, int tl_index);
/* Gives @ctx @n endpoint slots (before any transport attaches). 0 or -ENOMEM. */
int xpi_ep_slots_init(xp_context_t *ctx, int n);
void xpi_ep_slots_fini(xp_context_t *ctx);
/* Takes a free slot for a connection to or from @label: its lanes are the
 * endpoint transport. The slot, or -EMFILE when all are taken. Owner. */
int xpi_ep_slot_take(xp_context_t *ctx, const char *label);
/* A connection through @l is ready: xp_accept will give it. Owner. */
int xpi_ep_accepted(struct xp_listener *l, int slot);
/* The transport has let go of @slot: it is free again. Owner. */
void xpi_ep_slot_released(xp_context_t *ctx, int slot);
/* True if @peer is an endpoint slot. */
static inline bool xpi_peer_is_ep(const xp_context_t *ctx, int peer)
{
	return peer >= ctx->size;
}
/* "rank N", or "endpoint N (ADDRESS)": how texts name @peer. */
void xpi_peer_name(const xp_context_t *ctx, int peer, char *out, size_t n);

#endif
