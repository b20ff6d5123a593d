/* SPDX-License-Identifier: MIT */
/* Lane selection from two capability cards; the rules are in select.h. */
#include <errno.h>
#include <string.h>
#include <sys/socket.h>

#include "select.h"

static const uint8_t default_order[] = { XPI_TL_SHM, XPI_TL_RDMA, XPI_TL_DPDK, XPI_TL_TCP };

static const struct xpi_card_tl *find_tl(const struct xpi_card *c, uint8_t type)
{
	for (unsigned i = 0; i < c->ntl; i++)
		if (c->tl[i].type == type)
			return &c->tl[i];
	return NULL;
}

/* An empty list allows everything. */
static bool allows(const struct xpi_card *c, uint8_t type)
{
	if (c->nallowed == 0)
		return true;
	return memchr(c->allowed, type, c->nallowed) != NULL;
}

/* Both conditions look only at the pair, never at which card is which. */
static bool reachable(const struct xpi_card *a, const struct xpi_card *b,
		      const struct xpi_card_tl *ta, const struct xpi_card_tl *tb)
{
	switch (ta->type) {
	case XPI_TL_SHM:
		return memcmp(a->host, b->host, sizeof(a->host)) == 0;
	case XPI_TL_TCP:
		/* An IPv4 listener cannot be reached from an IPv6-only peer and
		 * the other way round; nothing more is known until a connect. */
		return ta->reach_len >= 1 && tb->reach_len >= 1 && ta->reach[0] == tb->reach[0] &&
		       (ta->reach[0] == AF_INET || ta->reach[0] == AF_INET6);
	case XPI_TL_RDMA:
		/* TODO when the backend lands: same link layer (InfiniBand or
		 * Ethernet/RoCE, from the GID type in reach), and on InfiniBand
		 * the same subnet prefix, as a QP can only be connected within
		 * one fabric. Until then two RDMA cards are taken at their word. */
		return true;
	case XPI_TL_DPDK:
		/* TODO when the backend lands: the same L2 segment or IP subnet
		 * (from the MAC / UDP endpoint in reach). */
		return true;
	default:
		return false;
	}
}

/*
 * The order that rule 2 picks. Only this step looks at which card is
 * which, so it alone decides the result's symmetry: the lower rank is the
 * same card whichever argument it came in, and with equal ranks the smaller
 * list is too.
 */
static void pick_order(const struct xpi_card *a, const struct xpi_card *b, const uint8_t **order,
		       unsigned *n)
{
	const struct xpi_card *lo = a, *hi = b;
	if (b->rank < a->rank) {
		lo = b;
		hi = a;
	} else if (a->rank == b->rank && a->nallowed > 0 && b->nallowed > 0) {
		unsigned m = a->nallowed < b->nallowed ? a->nallowed : b->nallowed;
		int cmp = memcmp(a->allowed, b->allowed, m);
		if (cmp > 0 || (cmp == 0 && b->nallowed < a->nallowed)) {
			lo = b;
			hi = a;
		}
	}
	if (lo->nallowed > 0) {
		*order = lo->allowed;
		*n = lo->nallowed;
	} else if (hi->nallowed > 0) {
		*order = hi->allowed;
		*n = hi->nallowed;
	} else {
		*order = default_order;
		*n = sizeof(default_order);
	}
}

static int no_lane(const char **why, const char *reason)
{
	if (why != NULL)
		*why = reason;
	return -ENOENT;
}

int xpi_select(const struct xpi_card *a, const struct xpi_card *b, struct xpi_lanes *out,
	       const char **why)
{
	return xpi_select_without(a, b, 0, out, why);
}

int xpi_select_without(const struct xpi_card *a, const struct xpi_card *b, uint32_t exclude,
		       struct xpi_lanes *out, const char **why)
{
	if (a->ntl > XPI_CARD_MAX_TL || b->ntl > XPI_CARD_MAX_TL || a->nallowed > XPI_CARD_MAX_TL ||
	    b->nallowed > XPI_CARD_MAX_TL) {
		if (why != NULL)
			*why = "card with more than 8 transports or preferences";
		return -EINVAL;
	}
	const uint8_t *order;
	unsigned n;
	pick_order(a, b, &order, &n);

	/* Walk the order once; each type appears in it at most once (lists
	 * have no repeats), so the first candidate seen that can carry
	 * messages is small, and bulk is the first candidate seen replaced
	 * only by a strictly faster one (ties keep the earlier); a transport
	 * that carries only payloads (XPI_CAP_BULK_ONLY) can be bulk but
	 * never small. */
	bool common = false, permitted = false, found = false, tcp_ok = false, watched = false;
	uint8_t small = 0, bulk = 0;
	uint32_t bulk_bw = 0, small_bw = 0;
	for (unsigned i = 0; i < n; i++) {
		uint8_t type = order[i];
		const struct xpi_card_tl *ta = find_tl(a, type), *tb = find_tl(b, type);
		if (ta == NULL || tb == NULL)
			continue;
		common = true;
		if (!allows(a, type) || !allows(b, type) || (exclude & (1u << type)) != 0)
			continue;
		permitted = true;
		if (!reachable(a, b, ta, tb))
			continue;
		uint32_t bw = ta->bw_mbps < tb->bw_mbps ? ta->bw_mbps : tb->bw_mbps;
		bool bulk_only = ((ta->caps | tb->caps) & XPI_CAP_BULK_ONLY) != 0;
		tcp_ok |= type == XPI_TL_TCP;
		if (!found && !bulk_only) {
			found = true;
			small = type;
			small_bw = bw;
			watched = ((ta->caps | tb->caps) & XPI_CAP_WATCHED) != 0;
		}
		if (bulk == 0 || bw > bulk_bw) {
			bulk = type;
			bulk_bw = bw;
		}
	}
	/* A payload-only transport seen before small takes bulk only if it is
	 * strictly faster than small. */
	if (found && bulk != small && bulk_bw <= small_bw)
		bulk = small;
	if (!found) {
		if (!common) /* the order may be a list that leaves some out */
			for (unsigned i = 0; i < sizeof(default_order) && !common; i++)
				common = find_tl(a, default_order[i]) != NULL &&
					 find_tl(b, default_order[i]) != NULL;
		if (!common)
			return no_lane(why, "the two ranks have no transport in common");
		if (!permitted && exclude != 0)
			return no_lane(why, "every transport the two ranks have in common and "
					    "XP_TRANSPORTS allows failed to set up");
		if (!permitted)
			return no_lane(why, "XP_TRANSPORTS excludes every transport the two ranks "
					    "have in common");
		if (bulk != 0)
			return no_lane(why,
				       "the transports the two ranks have in common and may use "
				       "carry payloads only (rdma needs one for messages beside "
				       "it, such as tcp)");
		return no_lane(why, "no transport the two ranks have in common can reach across "
				    "(shm needs the same host, tcp the same address family)");
	}
	/* bulk differs from small only if strictly faster: rule 4's "no better
	 * than small's" case has already left bulk == small. */
	out->small = small;
	out->bulk = bulk;
	out->watch = watched && tcp_ok && small != XPI_TL_TCP ? XPI_TL_TCP : 0;
	return 0;
}
