/* SPDX-License-Identifier: MIT */
/*
 * Setting up the RDMA transport in a job: its capability card entry, the
 * agreement with each peer that wants it (ports traded through the
 * bootstrap; the queue pairs then made on first need, rdma_wire.c, or here
 * where nothing can carry their numbers later), and the registry entry
 * (src/job/backend.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../job/backend.h"
#include "../job/bootstrap.h"
#include "../select/card.h"
#include "rdma_tl.h"
#ifdef XPORT_HAVE_RDMACM
#include "rdma_cm.h"
#endif

/* The device the settings name (XP_RDMA_DEVICE), or NULL: the first with
 * an active port. xport-info's probe has no context: the environment. */
static const char *device_wanted(const xp_context_t *ctx)
{
	const char *name = ctx != NULL ? ctx->cfg.rdma_device : getenv("XP_RDMA_DEVICE");
	return name != NULL && name[0] != '\0' ? name : NULL;
}

static int mtu_bytes(enum ibv_mtu m)
{
	return m >= IBV_MTU_256 && m <= IBV_MTU_4096 ? 128 << m : 0;
}

/* reach: the GID (16 bytes) and the link layer (1: Ethernet/RoCE). */
static int rdma_card(xp_context_t *ctx, struct xpi_boot *boot, struct xpi_card_tl *entry,
		     const char **why)
{
	(void)boot;
	static _Thread_local char text[XPI_RDMA_WHY_LEN];
	struct xpi_rdma_dev d;
	if (xpi_rdma_dev_open(device_wanted(ctx), &d, text) < 0) {
		/* A host without RDMA is no news; a device the settings name
		 * that cannot be had is, once, and its peers go over tcp. */
		if (device_wanted(ctx) != NULL)
			xpi_log(XPI_LOG_WARN,
				"rank %d: rdma: %s; payloads go over the next transport", ctx->rank,
				text);
		*why = text;
		return 1;
	}
	/* A QP cannot tell that its peer's process ended until it sends
	 * (and soft-RoCE not even then): a stream transport watches. */
	entry->caps = XPI_CAP_ZCOPY | XPI_CAP_RDMA_READ | XPI_CAP_WATCHED;
	entry->mtu = (uint32_t)mtu_bytes(d.mtu);
	/* Declared, not measured: a NIC's figures, so that rdma is chosen
	 * over tcp (and not over shared memory within a host). */
	entry->lat_ns = 3000;
	entry->bw_mbps = 10000;
	memcpy(entry->reach, d.gid.raw, 16);
	entry->reach[16] = d.roce;
	entry->reach_len = 17;
	xpi_rdma_dev_close(&d);
	return 0;
}

/* What each rank tells every other in the address exchange: its port, its
 * state words, and, only when some rank makes pairs in xp_init, per
 * destination the QP it made for it. */
struct xchg_head {
	uint8_t ok; /* 1: set up, the rest is valid */
	uint8_t mtu;
	uint8_t gid_index;
	uint8_t pad;
	uint16_t lid;
	uint16_t window; /* window frames each peer may have in our SRQ */
	uint8_t gid[16];
	uint64_t words_addr;
	uint32_t words_rkey;
	uint32_t cm_ip;   /* XP_RDMA_CM: the address rdma_cm listens on (0: not used) */
	uint16_t cm_port; /* and its port; both in network order */
	uint16_t pad3;
	uint32_t pad4;
};
struct xchg_qp {
	uint32_t qpn, psn;
};

static size_t xchg_len(int size)
{
	return sizeof(struct xchg_head) + (size_t)size * sizeof(struct xchg_qp);
}

static void warn_once(xp_context_t *ctx, const char *what)
{
	xpi_log(XPI_LOG_WARN, "rank %d: rdma: %s; its peers fall back to the next transport",
		ctx->rank, what);
}

static int qpn_cmp(const void *a, const void *b)
{
	uint32_t x = ((const struct rdma_qpn *)a)->qpn, y = ((const struct rdma_qpn *)b)->qpn;
	return x < y ? -1 : x > y;
}

/*
 * Whether the pair with @peer is made on first need (rdma_wire.c): a stream
 * transport carries its QP numbers (XPI_WANT_CARRIED), and rdma_cm, which
 * connects at setup, is not in use. Both ranks of a pair compute the same:
 * the carrier follows from the symmetric selection, and a peer whose
 * rdma_cm setting differs is refused below.
 */
static bool on_need(const xp_context_t *ctx, const uint8_t *want, int peer)
{
	return (want[peer] & XPI_WANT_CARRIED) != 0 && !ctx->cfg.rdma_cm;
}

/* The device, SRQ, CQ, state words, and the QPs of the pairs made now (not
 * on first need; @want NULL: no rank's, for endpoints only); 0 or a
 * negative code (logged). */
static int make(struct xpi_rdma_tl *t, const uint8_t *want)
{
	xp_context_t *ctx = t->ctx;
	char why[XPI_RDMA_WHY_LEN];
	int rc;
	if (ctx->cfg.rdma_cm) {
#ifdef XPORT_HAVE_RDMACM
		t->cm = calloc(1, sizeof(*t->cm));
		if (t->cm == NULL)
			return -ENOMEM;
		rc = xpi_rdma_cm_listen(t->cm, device_wanted(ctx), &t->dev, why);
#else
		snprintf(why, sizeof(why), "XP_RDMA_CM=on, but this build has no librdmacm");
		rc = -ENOTSUP;
#endif
	} else {
		rc = xpi_rdma_dev_open(device_wanted(ctx), &t->dev, why);
	}
	if (rc < 0) {
		warn_once(ctx, why);
		return rc;
	}
	xpi_rcache_init(&t->rcache, t->dev.pd, ctx->cfg.rdma_rcache_bytes);
	t->chan = ibv_create_comp_channel(t->dev.ctx);
	if (t->chan == NULL)
		return xpi_rdma_fail_errno("setting up", "ibv_create_comp_channel", t->dev.name,
					   NULL);
	/* The sleep reads it without blocking (rdma_sleep_done). */
	fcntl(t->chan->fd, F_SETFL, fcntl(t->chan->fd, F_GETFL) | O_NONBLOCK);
	/* The SRQ: a window and two CREDIT frames per peer (rdma_tl.h), a
	 * smaller window with many peers. */
	int npeers = 0;
	for (int p = 0; want != NULL && p < ctx->size; p++)
		npeers += p != ctx->rank && want[p];
	uint32_t w = XPI_RDMA_SRQ_TARGET / (uint32_t)(npeers > 0 ? npeers : 1);
	w = w > XPI_RDMA_WINDOW + 2     ? XPI_RDMA_WINDOW :
	    w > XPI_RDMA_WINDOW_MIN + 2 ? w - 2 :
					  XPI_RDMA_WINDOW_MIN;
	t->window = w;
	t->srq_depth = (uint32_t)npeers * (w + 2) + XPI_RDMA_REPOST_BATCH;
	if (t->srq_depth > (uint32_t)t->dev.attr.max_srq_wr) {
		warn_once(ctx, "the device's shared receive queue is too small for every peer");
		return -ENOSPC;
	}
	/* Endpoints' pairs get what room the device leaves, up to one per
	 * slot; those beyond stay on their connection (rdma_ep.c). */
	uint32_t nslots = (uint32_t)(ctx->npeers - ctx->size), room = 0;
	t->ep_window = XPI_RDMA_EP_WINDOW;
	if ((uint32_t)t->dev.attr.max_srq_wr > t->srq_depth)
		room = ((uint32_t)t->dev.attr.max_srq_wr - t->srq_depth) / (t->ep_window + 2);
	t->ep_budget = nslots < room ? nslots : room;
	t->srq_depth_job = t->srq_depth;
	t->srq_depth += t->ep_budget * (t->ep_window + 2);
	rc = rdma_small_setup(t);
	if (rc < 0) {
		warn_once(ctx, "the shared receive queue could not be set up");
		return rc;
	}
	/* Room for the completions of the QPs made now and the self QP; the
	 * CQ grows as pairs are made on first need (rdma_cq_fit). */
	int nnow = 0;
	for (int p = 0; p < ctx->size; p++)
		nnow += p != ctx->rank && want != NULL && want[p] &&
			(t->cm != NULL || !on_need(ctx, want, p));
	int cqe = (nnow + 1) * (int)XPI_RDMA_SQ_DEPTH + (int)t->srq_depth;
	if (cqe > t->dev.attr.max_cqe)
		cqe = t->dev.attr.max_cqe;
	t->cq = ibv_create_cq(t->dev.ctx, cqe, t, t->chan, 0);
	if (t->cq == NULL)
		return xpi_rdma_fail_errno("setting up", "ibv_create_cq", t->dev.name, NULL);
	/* Completions a wait for a claim takes and keeps: never more than the
	 * CQ holds (ibv_create_cq may round its size up). */
	t->backlog_cap = (uint32_t)t->cq->cqe;
	t->backlog = calloc(t->backlog_cap, sizeof(*t->backlog));
	if (t->backlog == NULL)
		return -ENOMEM;
	t->words = aligned_alloc(4096, XPI_RDMA_NWORDS * sizeof(uint64_t));
	t->result = aligned_alloc(64, XPI_RDMA_RESULT_LEN);
	if (t->words == NULL || t->result == NULL)
		return -ENOMEM;
	memset(t->words, 0, XPI_RDMA_NWORDS * sizeof(uint64_t));
	t->words_mr = ibv_reg_mr(t->dev.pd, t->words, XPI_RDMA_NWORDS * sizeof(uint64_t),
				 IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_ATOMIC |
					 IBV_ACCESS_REMOTE_READ);
	t->result_mr =
		ibv_reg_mr(t->dev.pd, t->result, XPI_RDMA_RESULT_LEN, IBV_ACCESS_LOCAL_WRITE);
	t->claim_ns = XPI_RDMA_CLAIM_NS;
	if (t->words_mr == NULL || t->result_mr == NULL)
		return xpi_rdma_fail_errno("registering the state words", "ibv_reg_mr", t->dev.name,
					   NULL);
	struct xpi_rdma_qp_caps caps = { .max_send_wr = XPI_RDMA_SQ_DEPTH,
					 .max_send_sge = 2,
					 .max_inline = XPI_RDMA_INLINE_WANT };
	uint32_t inl;
	t->max_inline = XPI_RDMA_INLINE_WANT;
	t->qpns = calloc((size_t)t->npeers, sizeof(*t->qpns));
	if (t->qpns == NULL)
		return -ENOMEM;
	/* Through rdma_cm, the QPs come with the connections (cm_connect). */
	for (int p = 0; p < ctx->size && t->cm == NULL; p++) {
		if (p == ctx->rank || want == NULL || !want[p] || on_need(ctx, want, p))
			continue;
		rc = xpi_rdma_qp_create(&t->dev, t->cq, t->cq, t->srq, &caps, &t->peers[p].qp, &inl,
					NULL);
		if (rc < 0)
			return rc;
		if (inl < t->max_inline)
			t->max_inline = inl;
	}
	/* Asked the same inline size as the peers' QPs: its grant is theirs
	 * (those made on first need check it), whether any is made now or not. */
	rc = xpi_rdma_qp_create(&t->dev, t->cq, t->cq, NULL, &caps, &t->self_qp, &inl, NULL);
	if (rc < 0)
		return rc;
	if (inl < t->max_inline)
		t->max_inline = inl;
	struct xpi_rdma_addr self;
	xpi_rdma_dev_addr(&t->dev, &self);
	self.qpn = t->self_qp->qp_num;
	self.psn = xpi_rdma_psn();
	return xpi_rdma_qp_connect(&t->dev, t->self_qp, self.psn, &self, NULL);
}

static void fill_head(const struct xpi_rdma_tl *t, uint8_t *blob)
{
	struct xchg_head h = { .ok = 1,
			       .mtu = (uint8_t)t->dev.mtu,
			       .gid_index = t->dev.gid_index,
			       .lid = t->dev.lid,
			       .window = (uint16_t)t->window,
			       .words_addr = (uint64_t)(uintptr_t)t->words,
			       .words_rkey = t->words_mr->rkey };
	memcpy(h.gid, t->dev.gid.raw, 16);
#ifdef XPORT_HAVE_RDMACM
	if (t->cm != NULL) {
		h.cm_ip = t->cm->ip;
		h.cm_port = t->cm->port;
	}
#endif
	memcpy(blob, &h, sizeof(h));
}

/* The QP numbers of the peers' QPs, sorted, for receive completions. */
static void index_qps(struct xpi_rdma_tl *t)
{
	t->nqpns = 0;
	for (int p = 0; p < t->ctx->size; p++)
		if (t->peers[p].qp != NULL)
			t->qpns[t->nqpns++] = (struct rdma_qpn){ t->peers[p].qp->qp_num, p };
	qsort(t->qpns, (size_t)t->nqpns, sizeof(*t->qpns), qpn_cmp);
}

#ifdef XPORT_HAVE_RDMACM
/* XP_RDMA_CM: connects through rdma_cm to the peers whose heads (in @all)
 * say they listen too; a peer whose setting differs is left out, both
 * sides warned. */
static int cm_connect(struct xpi_rdma_tl *t, const uint8_t *all, size_t len, const uint8_t *want)
{
	xp_context_t *ctx = t->ctx;
	int size = ctx->size;
	uint32_t *ips = calloc((size_t)size, sizeof(*ips));
	uint16_t *ports = calloc((size_t)size, sizeof(*ports));
	if (ips == NULL || ports == NULL) {
		free(ips);
		free(ports);
		return -ENOMEM;
	}
	for (int p = 0; p < size; p++) {
		struct xchg_head h;
		memcpy(&h, all + (size_t)p * len, sizeof(h));
		if (p == ctx->rank || !want[p] || h.ok != 1)
			continue;
		if (h.cm_ip == 0)
			xpi_log(XPI_LOG_WARN,
				"rank %d: rdma to rank %d: it does not connect through rdma_cm "
				"(XP_RDMA_CM differs)",
				ctx->rank, p);
		ips[p] = h.cm_ip;
		ports[p] = h.cm_port;
	}
	struct xpi_rdma_cm_qp_spec spec = { .pd = t->dev.pd,
					    .cq = t->cq,
					    .srq = t->srq,
					    .max_send_wr = XPI_RDMA_SQ_DEPTH,
					    .max_inline = XPI_RDMA_INLINE_WANT,
					    .max_inline_got = &t->max_inline,
					    .dev_name = t->dev.name };
	int64_t wait_ms = ctx->cfg.boot_timeout_ms > 0 ? ctx->cfg.boot_timeout_ms : 30000;
	int rc = xpi_rdma_cm_connect(t->cm, &spec, ctx->rank, size, ips, ports, want,
				     xpi_now_ns() + wait_ms * 1000000);
	for (int p = 0; rc == 0 && p < size; p++)
		t->peers[p].qp = xpi_rdma_cm_qp(t->cm, p);
	free(ips);
	free(ports);
	return rc;
}
#endif

/* What attach learns from every rank in one byte: whether it wants an rdma
 * peer at all, and whether it has a pair made at setup (which needs every
 * rank's QP numbers for every rank, N squared bytes: most jobs have none). */
enum { WANTS_ANY = 1, WANTS_NOW = 2 };

static int ask_all(struct xpi_boot *boot, int size, uint8_t mine, uint8_t *any)
{
	uint8_t *all = calloc((size_t)size, 1);
	if (all == NULL)
		return -ENOMEM;
	int rc = xpi_boot_allgather(boot, &mine, 1, all);
	*any = 0;
	for (int p = 0; p < size; p++)
		*any |= all[p];
	free(all);
	return rc;
}

/* A peer whose head came: its port's address, state words and window. */
static void take_head(const struct xpi_rdma_tl *t, struct rdma_peer *p, const struct xchg_head *h)
{
	p->words_addr = h->words_addr;
	p->words_rkey = h->words_rkey;
	p->window = h->window;
	p->granted = t->window;
	p->remote =
		(struct xpi_rdma_addr){ .lid = h->lid, .mtu = h->mtu, .gid_index = h->gid_index };
	memcpy(p->remote.gid, h->gid, 16);
}

/* A pair made at setup: both sides connected their QP to the other's. */
static void now_up(struct rdma_peer *p)
{
	p->wstate = RW_UP;
	p->up = p->qp_ready = true;
}

/* The pairs made at setup: connects our QP to each peer's from the
 * exchange (@all, @len bytes a rank), into @up. */
static void connect_now(struct xpi_rdma_tl *t, const uint8_t *mine, const uint8_t *all, size_t len,
			uint8_t *up)
{
	int me = t->ctx->rank;
	const struct xchg_qp *qm = (const struct xchg_qp *)(mine + sizeof(struct xchg_head));
	for (int p = 0; p < t->ctx->size; p++) {
		const uint8_t *theirs = all + (size_t)p * len;
		struct xchg_head h;
		memcpy(&h, theirs, sizeof(h));
		if (t->peers[p].qp == NULL || h.ok != 1)
			continue;
		if (t->cm != NULL) { /* connected already */
			take_head(t, &t->peers[p], &h);
			up[p] = 1;
			continue;
		}
		if (h.cm_ip != 0) {
			xpi_log(XPI_LOG_WARN,
				"rank %d: rdma to rank %d: it connects through rdma_cm and "
				"we do not (XP_RDMA_CM differs)",
				me, p);
			continue;
		}
		struct xchg_qp q;
		memcpy(&q, theirs + sizeof(h) + (size_t)me * sizeof(q), sizeof(q));
		take_head(t, &t->peers[p], &h);
		struct xpi_rdma_addr remote = t->peers[p].remote;
		remote.qpn = q.qpn;
		remote.psn = q.psn;
		char why[XPI_RDMA_WHY_LEN];
		if (xpi_rdma_qp_connect(&t->dev, t->peers[p].qp, qm[p].psn, &remote, why) < 0) {
			xpi_log(XPI_LOG_WARN, "rank %d: rdma to rank %d: %s", me, p, why);
			continue;
		}
		up[p] = 1;
	}
}

/* The pairs made on first need: agreed if both sides set up and neither
 * connects through rdma_cm, which both read from the same two heads. */
static void agree_on_need(struct xpi_rdma_tl *t, const uint8_t *want, const uint8_t *all,
			  size_t len, uint8_t *ok)
{
	xp_context_t *ctx = t->ctx;
	for (int p = 0; p < ctx->size; p++) {
		if (p == ctx->rank || !want[p] || !on_need(ctx, want, p))
			continue;
		struct xchg_head h;
		memcpy(&h, all + (size_t)p * len, sizeof(h));
		if (h.ok != 1)
			continue;
		if (h.cm_ip != 0) {
			xpi_log(XPI_LOG_WARN,
				"rank %d: rdma to rank %d: it connects through rdma_cm and "
				"we do not (XP_RDMA_CM differs)",
				ctx->rank, p);
			continue;
		}
		take_head(t, &t->peers[p], &h);
		t->peers[p].wstate = RW_IDLE;
		ok[p] = XPI_OK_ON_NEED;
	}
}

/* The transport's state, its per-peer arrays holding the endpoint slots
 * too. */
static int tl_new(xp_context_t *ctx, struct xpi_rdma_tl **out)
{
	struct xpi_rdma_tl *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	t->ctx = ctx;
	t->npeers = ctx->npeers;
	xpi_dlist_init(&t->fetches);
	t->peers = calloc((size_t)t->npeers, sizeof(*t->peers));
	t->todo = calloc((size_t)t->npeers, sizeof(*t->todo));
	t->attn = calloc((size_t)t->npeers, sizeof(*t->attn));
	if (t->peers == NULL || t->todo == NULL || t->attn == NULL) {
		free(t->peers);
		free(t->todo);
		free(t->attn);
		free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

/*
 * Adds @t, made, to its context, and posts @fill SRQ entries (at most its
 * depth): now that the pool is registered with us its buffers can go
 * there, taken before the transports added after this one share the
 * pool's class out. -ENOTCONN: not added (the caller destroys @t); any
 * other failure leaves @t the context's, which destroys it.
 */
static int tl_add(struct xpi_rdma_tl *t, uint32_t fill)
{
	xp_context_t *ctx = t->ctx;
	for (uint32_t i = 0; i < XPI_RDMA_NWORDS; i++)
		t->free_words[i] = XPI_RDMA_NWORDS - 1 - i;
	t->nfree = XPI_RDMA_NWORDS;
	t->tl_index = ctx->ntls;
	if (xpi_context_add_tl(ctx, &xpi_rdma_ops, t) < 0)
		return -ENOTCONN;
	ctx->sideband[XPI_TL_RDMA] = (struct xpi_sideband){ .take = rdma_wire_take,
							    .tl = t,
							    .slots = ctx->npeers > ctx->size };
	rdma_ep_attach(t);
	int rc = rdma_small_grow(t, fill < t->srq_depth ? fill : t->srq_depth);
	if (rc == -ENOBUFS)
		warn_once(ctx, "the buffer pool cannot fill the shared receive queue (raise "
			       "XP_POOL_MAX_BYTES)");
	return rc;
}

/*
 * Collective (backend.h): every rank takes part in the exchanges, with
 * nothing to offer if it wants no peer of ours or its device failed. A
 * pair made on first need is agreed from the two heads (ok = on need); one
 * made now works if both sides connected their QP to the other's, which
 * both compute alike from a second exchange.
 */
static int rdma_attach(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *want, uint8_t *ok)
{
	int size = ctx->size, me = ctx->rank, nwant = 0, nnow = 0;
	for (int p = 0; p < size; p++) {
		nwant += p != me && want[p];
		nnow += p != me && want[p] && !on_need(ctx, want, p);
	}
	for (int p = 0; p < size; p++)
		ok[p] = 0;
	uint8_t any;
	int arc =
		ask_all(boot, size,
			(uint8_t)((nwant > 0 ? WANTS_ANY : 0) | (nnow > 0 ? WANTS_NOW : 0)), &any);
	if (arc < 0 || !(any & WANTS_ANY))
		return arc;
	bool now = any & WANTS_NOW;
	size_t len = now ? xchg_len(size) : sizeof(struct xchg_head);
	uint8_t *mine = calloc(1, len), *all = calloc((size_t)size, len);
	uint8_t *up = calloc((size_t)size, 1),
		*ups = now ? calloc((size_t)size, (size_t)size) : NULL;
	struct xpi_rdma_tl *t = NULL;
	int rc = mine && all && up && (ups || !now) ? 0 : -ENOMEM;
	if (rc == 0 && nwant > 0)
		rc = tl_new(ctx, &t);
	if (t != NULL) {
		if (make(t, want) == 0) {
			fill_head(t, mine);
			struct xchg_qp *q = (struct xchg_qp *)(mine + sizeof(struct xchg_head));
			for (int p = 0; now && p < size; p++)
				if (t->peers[p].qp != NULL)
					q[p] = (struct xchg_qp){ t->peers[p].qp->qp_num,
								 xpi_rdma_psn() };
		}
	}
	if (rc == 0)
		rc = xpi_boot_allgather(boot, mine, len, all);
#ifdef XPORT_HAVE_RDMACM
	if (rc == 0 && t != NULL && mine[0] == 1 && t->cm != NULL)
		rc = cm_connect(t, all, len, want);
#endif
	if (rc == 0 && t != NULL && mine[0] == 1) {
		agree_on_need(t, want, all, len, ok);
		if (now)
			connect_now(t, mine, all, len, up);
	}
	if (rc == 0 && now)
		rc = xpi_boot_allgather(boot, up, (size_t)size, ups);
	int nok = 0;
	for (int p = 0; rc == 0 && p < size; p++) {
		if (ok[p] == XPI_OK_ON_NEED) {
			nok++;
			continue;
		}
		ok[p] = now && up[p] && ups[(size_t)p * size + me];
		if (t == NULL || t->peers[p].qp == NULL)
			continue;
		if (!ok[p]) {
			rdma_qp_destroy(t, p);
			continue;
		}
		now_up(&t->peers[p]);
		nok++;
	}
	free(mine);
	free(all);
	free(up);
	free(ups);
	if (t == NULL)
		return rc;
	if (rc == 0 && nok > 0) {
		index_qps(t);
		/* The windows of the pairs made now, and as many as
		 * XPI_RDMA_SRQ_TARGET asks, which holds every window of a job
		 * of up to 42 peers (all of them, as before pairs were made
		 * on first need); beyond, the SRQ grows as pairs are made
		 * (rdma_wire.c). A peer that sends before then is told RNR
		 * and retries; it cannot have sent more than its window. */
		t->srq_promised = XPI_RDMA_REPOST_BATCH + (uint32_t)t->nqpns * (t->window + 2);
		uint32_t first = XPI_RDMA_SRQ_TARGET + XPI_RDMA_REPOST_BATCH;
		first = first > t->srq_promised ? first : t->srq_promised;
		/* Not the endpoints' part: theirs is filled pair by pair. */
		rc = tl_add(t, first < t->srq_depth_job ? first : t->srq_depth_job);
		if (rc != -ENOTCONN) {
			if (rc == 0 && xpi_debug_on("transport"))
				xpi_log(XPI_LOG_INFO,
					"rank %d: rdma on %s port %u (gid index %u, mtu %d, window "
					"%u, inline %u B) to %d peers, %d of them connected now",
					me, t->dev.name, t->dev.port, t->dev.gid_index,
					mtu_bytes(t->dev.mtu), t->window, t->max_inline, nok,
					t->nqpns);
			return rc;
		}
		/* Not added: the pairs fail; every peer must agree, so this
		 * fails the job rather than diverge. */
		rc = -ENOMEM;
	}
	xpi_rdma_ops.destroy(t);
	return rc;
}

/* xp_open, or a rank of a job whose own peers needed no rdma (backend.h):
 * the transport for endpoints' lanes only. A host without a device is no
 * news: its endpoints stay on their connections. */
static int rdma_open(xp_context_t *ctx, const struct sockaddr_storage *where)
{
	(void)where; /* a device has its own address */
	if (ctx->cfg.rdma_cm)
		return 0; /* its pairs are made by rdma_cm's listener: not for endpoints */
	for (int i = 0; i < ctx->ntls; i++)
		if (ctx->tls[i].ops == &xpi_rdma_ops)
			return 0; /* the job's, which serves its endpoints too */
	struct xpi_rdma_dev probe;
	char why[XPI_RDMA_WHY_LEN];
	if (xpi_rdma_dev_open(device_wanted(ctx), &probe, why) < 0) {
		if (device_wanted(ctx) != NULL)
			xpi_log(XPI_LOG_WARN, "rank %d: rdma: %s; endpoints stay on tcp", ctx->rank,
				why);
		return 0;
	}
	xpi_rdma_dev_close(&probe);
	struct xpi_rdma_tl *t;
	int rc = tl_new(ctx, &t);
	if (rc < 0)
		return rc;
	rc = make(t, NULL);
	if (rc == 0) {
		t->srq_promised = XPI_RDMA_REPOST_BATCH;
		rc = tl_add(t, t->srq_promised);
		if (rc != -ENOTCONN)
			return rc;
	}
	xpi_rdma_ops.destroy(t);
	return rc == -ENOTCONN ? -ENOMEM : rc;
}

static int rdma_probe(char *note, size_t n)
{
	char why[XPI_RDMA_WHY_LEN];
	struct xpi_rdma_dev d;
	if (xpi_rdma_dev_open(device_wanted(NULL), &d, why) < 0) {
		snprintf(note, n, "%s", why);
		return 1;
	}
	snprintf(note, n,
		 "%s port %u, %s GID index %u, MTU %d; carries messages (eager up to "
		 "%u B, inline up to the device's size) and rendezvous payloads (RDMA READ)",
		 d.name, d.port, d.roce ? "RoCE" : "InfiniBand", d.gid_index, mtu_bytes(d.mtu),
		 (unsigned)xpi_rdma_ops.eager_max);
	xpi_rdma_dev_close(&d);
	return 0;
}

const struct xpi_backend xpi_rdma_backend = {
	.name = "rdma",
	.type = XPI_TL_RDMA,
	.ops = &xpi_rdma_ops,
	.card = rdma_card,
	.attach = rdma_attach,
	.probe = rdma_probe,
	.open = rdma_open,
};
