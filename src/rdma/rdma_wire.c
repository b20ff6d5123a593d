/* SPDX-License-Identifier: MIT */
/*
 * RDMA pairs made on first need. xp_init trades only each rank's port and
 * state words (rdma_setup.c); a peer's queue pair is made when a send, an
 * offer or a receive naming the peer first needs it, and the two ranks
 * trade QP numbers as sideband messages (transport.h) over the stream pair
 * that carries or watches the peer: authenticated by the job key, in
 * order, and watching the peer's process from then on. UCX's wire-up does
 * the same over an auxiliary transport.
 *
 * Two messages, each sent at most once per pair and side:
 *   ASK   "my QP is made: here is its number", sent by the side that needs
 *         the pair first (or both, when they need it at once);
 *   CONN  "my QP is connected to yours".
 * A side sends frames only once both QPs are connected (RW_UP): its own,
 * and the peer's, as its CONN says (or any frame from it, which it sends
 * only when up). So no frame ever reaches a QP that cannot take it.
 *
 *   IDLE  --need-->  ASKED (send ASK)
 *   IDLE  --ASK-->   HALF  (make, connect, send CONN)
 *   ASKED --ASK-->   HALF  (both asked at once: connect, send CONN)
 *   ASKED --CONN-->  UP    (connect, send CONN)
 *   HALF  --CONN-->  UP
 *   HALF  --frame--> UP
 * Anything else is a broken peer.
 *
 * Wire format of both, 12 bytes, little-endian: u8 kind (1 ASK, 2 CONN),
 * u8 version (1), u16 zero, u32 QP number, u32 first packet sequence
 * number (both 24 bits). An endpoint's pair is agreed first by a third
 * kind (3, a head: rdma_ep.c), as a job's is through the bootstrap.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/le.h"
#include "../core/log.h"
#include "../select/card.h"
#include "rdma_tl.h"

enum { WIRE_ASK = 1, WIRE_CONN = 2, WIRE_HEAD = 3 };
#define WIRE_VERSION 1u
#define WIRE_LEN 12u

/* @peer needs progress's attention (a message owed, a failure). */
static void todo(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	if (!p->in_todo) {
		p->in_todo = true;
		t->todo[t->ntodo++] = peer;
	}
}

/* Sends message @kind about our QP, now or, if the carrier has no room
 * yet (its pair is being made), from progress. */
static void send_wire(struct xpi_rdma_tl *t, int peer, uint8_t kind)
{
	struct rdma_peer *p = &t->peers[peer];
	uint8_t m[WIRE_LEN] = { kind, WIRE_VERSION, 0, 0 };
	put32(m + 4, p->qp->qp_num);
	put32(m + 8, p->psn);
	int rc = xpi_engine_sideband_send(t->ctx, peer, t->tl_index, XPI_TL_RDMA, m, sizeof(m));
	if (rc == 0) {
		p->owed = 0;
		return;
	}
	p->owed = kind;
	if (rc != -EAGAIN)
		p->wire_err = rc;
	todo(t, peer);
}

/* Our QP to @peer: made, unconnected (INIT). */
static int make_qp(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	struct xpi_rdma_qp_caps caps = { .max_send_wr = XPI_RDMA_SQ_DEPTH,
					 .max_send_sge = 2,
					 .max_inline = XPI_RDMA_INLINE_WANT };
	uint32_t inl;
	int rc = xpi_rdma_qp_create(&t->dev, t->cq, t->cq, t->srq, &caps, &p->qp, &inl, NULL);
	if (rc < 0)
		return rc;
	/* Frames go inline up to what every QP was granted: the same caps
	 * get the same grant, which setup learnt from its own QP. */
	if (inl < t->max_inline) {
		ibv_destroy_qp(p->qp);
		p->qp = NULL;
		return -ENOSPC;
	}
	p->psn = xpi_rdma_psn();
	return 0;
}

int rdma_cq_fit(struct xpi_rdma_tl *t, int nqps)
{
	int64_t need = (int64_t)(nqps + 1) * XPI_RDMA_SQ_DEPTH + t->srq_depth;
	if (need > t->dev.attr.max_cqe)
		need = t->dev.attr.max_cqe; /* as big as the device allows */
	if (t->cq->cqe >= need)
		return 0;
	/* Doubling: a job that talks to many peers resizes log(N) times. */
	int64_t want = 2 * (int64_t)t->cq->cqe > need ? 2 * (int64_t)t->cq->cqe : need;
	if (want > t->dev.attr.max_cqe)
		want = t->dev.attr.max_cqe;
	int rc = ibv_resize_cq(t->cq, (int)want);
	if (rc != 0)
		return xpi_rdma_fail_pos(rc, "growing the completion queue", "ibv_resize_cq",
					 t->dev.name, NULL);
	/* What a wait for a claim keeps: never more than the CQ holds. */
	struct ibv_wc *b = realloc(t->backlog, (size_t)t->cq->cqe * sizeof(*b));
	if (b == NULL)
		return -ENOMEM;
	t->backlog = b;
	t->backlog_cap = (uint32_t)t->cq->cqe;
	return 0;
}

/* Connects our QP to the peer's QP @qpn (first packet @psn), once the SRQ
 * has room for the window we promised it and the CQ for its completions:
 * the peer may send as soon as it hears we connected. */
static int connect_qp(struct xpi_rdma_tl *t, int peer, uint32_t qpn, uint32_t psn)
{
	struct rdma_peer *p = &t->peers[peer];
	p->remote.qpn = qpn;
	p->remote.psn = psn;
	int rc = rdma_cq_fit(t, t->nqpns + 1);
	t->srq_promised += p->granted + 2;
	p->srq_share = true;
	if (rc == 0 && t->srq_promised > t->srq_filled)
		rc = rdma_small_grow(t, t->srq_promised - t->srq_filled);
	if (rc == -ENOBUFS)
		xpi_log(XPI_LOG_WARN,
			"rank %d: rdma to rank %d: the buffer pool cannot give the shared receive "
			"queue its window (raise XP_POOL_MAX_BYTES)",
			t->ctx->rank, peer);
	if (rc < 0)
		return rc;
	char why[XPI_RDMA_WHY_LEN];
	rc = xpi_rdma_qp_connect(&t->dev, p->qp, p->psn, &p->remote, why);
	if (rc < 0) {
		xpi_log(XPI_LOG_WARN, "rank %d: rdma to rank %d: %s", t->ctx->rank, peer, why);
		return rc;
	}
	/* Indexed before our CONN goes: the peer's first frame follows it. */
	rdma_qpn_add(t, peer);
	p->qp_ready = true;
	return 0;
}

static void now_up(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	p->wstate = RW_UP;
	p->up = true;
	t->st_wired++;
	if (xpi_debug_on("transport"))
		xpi_log(XPI_LOG_INFO, "rank %d: rdma pair with rank %d made (QP %u to %u)",
			t->ctx->rank, peer, p->qp->qp_num, p->remote.qpn);
}

int rdma_wire_need(struct xpi_rdma_tl *t, int peer)
{
	struct rdma_peer *p = &t->peers[peer];
	if (p->dead || p->wstate == RW_OFF)
		return -ECONNRESET;
	if (p->wire_err != 0)
		return p->wire_err;
	if (p->wstate != RW_IDLE)
		return -EAGAIN; /* being made: the engine retries */
	int rc = make_qp(t, peer);
	if (rc < 0) {
		/* Reported from progress: a send may not re-enter the engine. */
		p->wire_err = rc;
		todo(t, peer);
		return rc;
	}
	p->wstate = RW_ASKED;
	send_wire(t, peer, WIRE_ASK);
	return p->wire_err != 0 ? p->wire_err : -EAGAIN;
}

static void broken(struct xpi_rdma_tl *t, int peer, const char *what)
{
	char text[96];
	snprintf(text, sizeof(text), "sent a wrong rdma pair message (%s)", what);
	rdma_peer_failed(t, peer, -EPROTO, text);
}

static void failed_to_make(struct xpi_rdma_tl *t, int peer, int err)
{
	char text[96];
	snprintf(text, sizeof(text), "could not be reached over rdma (its pair failed: %s)",
		 xp_strerror(err));
	rdma_peer_failed(t, peer, err, text);
}

/* A message from @peer: where it moves the pair. Runs inside the carrier's
 * progress; it may send back through it and report the peer lost, as the
 * carrier's own frames may. */
void rdma_wire_take(void *tl, int peer, const uint8_t *data, size_t len)
{
	struct xpi_rdma_tl *t = tl;
	struct rdma_peer *p = &t->peers[peer];
	if (p->dead)
		return;
	if (len >= 1 && data[0] == WIRE_HEAD) {
		rdma_ep_take_head(t, peer, data, len);
		return;
	}
	if (len != WIRE_LEN || data[1] != WIRE_VERSION || data[2] != 0 || data[3] != 0) {
		broken(t, peer, "malformed");
		return;
	}
	uint8_t kind = data[0];
	uint32_t qpn = get32(data + 4), psn = get32(data + 8);
	if ((qpn | psn) > 0xffffffu || (kind != WIRE_ASK && kind != WIRE_CONN)) {
		broken(t, peer, "malformed");
		return;
	}
	int rc = 0;
	switch (p->wstate << 4 | kind) {
	case RW_IDLE << 4 | WIRE_ASK:
		rc = make_qp(t, peer);
		/* fall through */
	case RW_ASKED << 4 | WIRE_ASK:
		if (rc == 0)
			rc = connect_qp(t, peer, qpn, psn);
		if (rc == 0) {
			p->wstate = RW_HALF;
			send_wire(t, peer, WIRE_CONN);
		}
		break;
	case RW_ASKED << 4 | WIRE_CONN:
		rc = connect_qp(t, peer, qpn, psn);
		if (rc == 0) {
			now_up(t, peer);
			send_wire(t, peer, WIRE_CONN);
		}
		break;
	case RW_HALF << 4 | WIRE_CONN:
	case RW_UP << 4 | WIRE_CONN: /* up already: a frame of its came first */
		if (qpn != p->remote.qpn) {
			broken(t, peer, "a QP other than the one it asked with");
			return;
		}
		if (p->wstate == RW_HALF)
			now_up(t, peer);
		break;
	default:
		broken(t, peer,
		       p->wstate == RW_OFF ? "no rdma pair was agreed with it" : "out of turn");
		return;
	}
	if (rc < 0)
		failed_to_make(t, peer, rc);
	else if (p->wire_err != 0)
		failed_to_make(t, peer, p->wire_err);
}

void rdma_wire_heard(struct xpi_rdma_tl *t, int peer)
{
	if (t->peers[peer].wstate == RW_HALF)
		now_up(t, peer);
}

void rdma_wire_progress(struct xpi_rdma_tl *t)
{
	/* From the top down, each taken out as it is handled: a peer listed
	 * again meanwhile goes to the end, for the next progress. */
	for (int i = t->ntodo - 1; i >= 0; i--) {
		int peer = t->todo[i];
		t->todo[i] = t->todo[--t->ntodo];
		struct rdma_peer *p = &t->peers[peer];
		p->in_todo = false;
		if (p->dead)
			continue;
		if (p->wire_err == 0 && p->owed != 0)
			send_wire(t, peer, p->owed); /* lists it again if still owed */
		if (p->wire_err != 0)
			failed_to_make(t, peer, p->wire_err);
	}
}

void rdma_qpn_remove(struct xpi_rdma_tl *t, int peer)
{
	for (int i = 0; i < t->nqpns; i++)
		if (t->qpns[i].peer == peer) {
			memmove(&t->qpns[i], &t->qpns[i + 1],
				(size_t)(t->nqpns - i - 1) * sizeof(t->qpns[0]));
			t->nqpns--;
			return;
		}
}

void rdma_qpn_add(struct xpi_rdma_tl *t, int peer)
{
	uint32_t qpn = t->peers[peer].qp->qp_num;
	int at = t->nqpns;
	while (at > 0 && t->qpns[at - 1].qpn > qpn) {
		t->qpns[at] = t->qpns[at - 1];
		at--;
	}
	t->qpns[at] = (struct rdma_qpn){ qpn, peer };
	t->nqpns++;
}
