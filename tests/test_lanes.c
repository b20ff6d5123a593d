/* SPDX-License-Identifier: MIT */
/*
 * The engine's delivery and rendezvous contract under the traffic a lossy
 * or multi-lane backend produces, checked against a model of MPI matching.
 *
 * Two ranks in one process, each with two shim transports as its lanes
 * (small: index 0, bulk: index 1, as RDMA beside TCP will be). The shim's
 * wire is a queue per receiver; the receiver's progress takes entries out
 * of order, drops one now and redelivers it later, delivers some twice, and
 * hands each arrival in on either lane. Rendezvous sends are offered on the
 * bulk lane (rndv_offer, a descriptor) and announced on the small one;
 * fetches run on the bulk lane, finishing now or in a later progress. Some
 * rendezvous sends are withdrawn (xp_cancel before any progress), some
 * receives cancelled.
 *
 * Expected, for every seed: every message not withdrawn is received once,
 * intact, by the receive the model says (receives posted before arrival
 * take messages in send order, earliest receive first; receives posted
 * later take the earliest unexpected match); withdrawn messages reach no
 * one; cancelled operations end -ECANCELED; credit comes back exactly once.
 *
 * A test shim, not a backend: it stands in for no transport's claim to
 * work, only for the wire the engine must cope with. Usage: test_lanes
 * [seed] [rounds]; XP_TEST_SEED works too.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/compiler.h"
#include "core/config.h"
#include "core/engine.h"
#include "xport/xport.h"
#include "pattern.h"
#include "testutil.h"

#define NMSG 120
#define MAXQ 1024
#define RNDV_FROM 1024
#define MAXLEN 20000

static uint64_t rng;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* ---- the shim ---------------------------------------------------------- */

struct wire_msg {
	struct xpi_msg_hdr h;
	uint8_t kind;
	struct xpi_rndv_desc desc;
	uint8_t *payload; /* eager: a copy */
};

struct offer {
	xp_request_t *sreq;
	xp_context_t *sender;
	bool withdrawn, fetched;
};

struct fetch {
	xp_request_t *rreq;
	uint32_t offer;
	void *dst;
	size_t cap;
};

struct shim {
	xp_context_t *ctx;
	int lane;
};

static struct {
	struct wire_msg *q[2][MAXQ]; /* by receiving rank */
	int nq[2];
	struct offer offers[NMSG];
	int noffers;
	struct fetch fetches[2][NMSG]; /* by receiving rank: under way */
	int nfetches[2];
	uint64_t eager_sent_cost;
	int delivered, duplicates, redelivered;
} net;

static struct shim shims[2][2];
static xp_context_t *ctxs[2];

static void enqueue(int dst, const struct xpi_msg_hdr *h, uint8_t kind, const void *data,
		    const struct xpi_rndv_desc *desc)
{
	struct wire_msg *w = calloc(1, sizeof(*w));
	T_CHECK(w != NULL && net.nq[dst] < MAXQ);
	w->h = *h;
	w->kind = kind;
	if (desc != NULL)
		w->desc = *desc;
	if (kind == XPI_MSG_INLINE && h->len != 0) {
		w->payload = malloc(h->len);
		memcpy(w->payload, data, h->len);
	}
	net.q[dst][net.nq[dst]++] = w;
}

static int shim_send_eager(void *tlp, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	struct shim *s = tlp;
	T_EQ(s->lane, 0); /* eager goes on the small lane */
	net.eager_sent_cost += xpi_eager_cost(h->len);
	enqueue(peer, h, XPI_MSG_INLINE, data, NULL);
	return 0;
}

static int shim_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			 const struct xpi_reg *reg, const struct xpi_rndv_desc *desc)
{
	struct shim *s = tlp;
	(void)sreq;
	(void)reg;
	T_EQ(s->lane, 0);
	T_CHECK(desc != NULL && desc->len == sizeof(uint32_t)); /* the lanes are split */
	enqueue(peer, h, XPI_MSG_RTS, NULL, desc);
	return 0;
}

static int shim_rndv_offer(void *tlp, int peer, xp_request_t *sreq, const struct xpi_reg *reg,
			   struct xpi_rndv_desc *desc)
{
	struct shim *s = tlp;
	(void)peer;
	(void)reg;
	T_EQ(s->lane, 1); /* offered on the bulk lane */
	uint32_t id = (uint32_t)net.noffers++;
	net.offers[id] = (struct offer){ .sreq = sreq, .sender = s->ctx };
	xpi_request_get(sreq);
	sreq->tl_id = id;
	desc->len = sizeof(id);
	memcpy(desc->bytes, &id, sizeof(id));
	return 0;
}

static int shim_send_cancel(void *tlp, xp_request_t *sreq)
{
	struct shim *s = tlp;
	T_EQ(s->lane, 1); /* the bulk lane holds it */
	struct offer *o = &net.offers[sreq->tl_id];
	if (o->fetched)
		return -EBUSY;
	o->withdrawn = true;
	xpi_request_put(sreq);
	return 0;
}

/* Moves an offered payload and completes the send, as a one-sided read. */
static void do_fetch(struct offer *o, void *dst, size_t cap)
{
	if (cap != 0)
		memcpy(dst, o->sreq->buf, cap);
	o->fetched = true;
	xpi_request_complete(o->sreq, 0);
	xpi_request_put(o->sreq);
}

static int shim_rndv_fetch(void *tlp, struct xpi_msg *msg, void *dst, size_t cap,
			   xp_request_t *rreq, const struct xpi_reg *dst_reg)
{
	struct shim *s = tlp;
	(void)dst_reg;
	T_EQ(s->lane, 1); /* fetched on the bulk lane, whichever lane announced */
	T_EQ(msg->desc_len, sizeof(uint32_t));
	uint32_t id;
	memcpy(&id, msg->data, sizeof(id));
	T_CHECK(id < (uint32_t)net.noffers);
	struct offer *o = &net.offers[id];
	T_CHECK(!o->fetched);
	if (o->withdrawn)
		return -ECANCELED;
	if (rnd(2) == 0) {
		do_fetch(o, dst, cap);
		return 0;
	}
	int me = s->ctx->rank;
	net.fetches[me][net.nfetches[me]++] = (struct fetch){ rreq, id, dst, cap };
	return 1; /* a later progress finishes it */
}

static void shim_msg_release(void *tlp, struct xpi_msg *msg)
{
	(void)tlp;
	(void)msg;
}

/* Delivers one wire entry with the faults of a lossy, multi-lane path. */
static int deliver_some(xp_context_t *ctx)
{
	int me = ctx->rank, n = 0;
	while (net.nq[me] != 0 && n < 4) {
		int i = rnd(3) == 0 ? (int)rnd((uint32_t)net.nq[me]) : 0; /* reorder */
		struct wire_msg *w = net.q[me][i];
		if (rnd(5) == 0) { /* lost now, retransmitted later */
			memmove(&net.q[me][i], &net.q[me][i + 1],
				(size_t)(net.nq[me] - i - 1) * sizeof(w));
			net.q[me][net.nq[me] - 1] = w;
			net.redelivered++;
			n++;
			continue;
		}
		bool dup = rnd(5) == 0; /* delivered now and once more later */
		struct xpi_msg m = {
			.u.key = { .comm = w->h.comm, .src = w->h.src, .tag = w->h.tag },
			.kind = w->kind,
			.tl = (uint8_t)rnd(2), /* either lane */
			.peer_seq = w->h.peer_seq,
			.len = w->h.len,
			.data = w->kind == XPI_MSG_INLINE ? w->payload : w->desc.bytes,
			.desc_len = w->kind == XPI_MSG_RTS ? w->desc.len : 0,
		};
		xpi_engine_deliver(ctx, &m);
		net.delivered++;
		n++;
		if (dup) {
			net.duplicates++;
			continue; /* it stays queued */
		}
		memmove(&net.q[me][i], &net.q[me][i + 1], (size_t)(net.nq[me] - i - 1) * sizeof(w));
		net.nq[me]--;
		free(w->payload);
		free(w);
	}
	return n;
}

static int shim_progress(void *tlp)
{
	struct shim *s = tlp;
	int me = s->ctx->rank;
	if (s->lane == 0)
		return deliver_some(s->ctx);
	int n = 0;
	while (net.nfetches[me] != 0 && rnd(2) == 0) {
		struct fetch f = net.fetches[me][--net.nfetches[me]];
		do_fetch(&net.offers[f.offer], f.dst, f.cap);
		xpi_engine_rndv_done(s->ctx, f.rreq, 0);
		n++;
	}
	return n;
}

static void shim_destroy(void *tlp)
{
	(void)tlp;
}

static const struct xpi_tl_ops shim_ops = {
	.name = "shim",
	.rndv_threshold = RNDV_FROM,
	.eager_max = SIZE_MAX,
	.mem_reg = xpi_tl_mem_reg_none,
	.mem_dereg = xpi_tl_mem_dereg_none,
	.send_eager = shim_send_eager,
	.send_rts = shim_send_rts,
	.rndv_offer = shim_rndv_offer,
	.send_cancel = shim_send_cancel,
	.rndv_fetch = shim_rndv_fetch,
	.rndv_abort = xpi_tl_rndv_abort_none,
	.msg_release = shim_msg_release,
	.progress = shim_progress,
	.sleep_prepare = xpi_tl_sleep_prepare_none,
	.sleep_done = xpi_tl_sleep_done_none,
	.tx_pending = xpi_tl_tx_pending_none,
	.destroy = shim_destroy,
};

/* ---- the model --------------------------------------------------------- */

struct msg_spec {
	uint64_t tag;
	size_t len;
	bool withdrawn;
	xp_request_t *req;
	uint8_t *buf;
};

struct recv_spec {
	int src; /* 0 or XP_ANY_SOURCE */
	uint64_t tag, mask;
	bool cancelled;
	int expect; /* message index, -1: none (stays posted) */
	xp_request_t *req;
	uint8_t *buf;
};

static struct msg_spec msgs[NMSG];
static struct recv_spec pre[NMSG], post[NMSG];
static int npre, npost;

static bool matches(const struct recv_spec *r, const struct msg_spec *m)
{
	return ((r->tag ^ m->tag) & r->mask) == 0;
}

static void random_recv(struct recv_spec *r)
{
	*r = (struct recv_spec){ .src = rnd(3) == 0 ? XP_ANY_SOURCE : 0,
				 .tag = rnd(8),
				 .mask = XP_TAG_EXACT,
				 .expect = -1 };
	if (rnd(6) == 0)
		r->mask = ~(uint64_t)3; /* a group of four tags */
	else if (rnd(12) == 0)
		r->mask = 0; /* anything */
}

/* What MPI says: pre-posted receives take messages in send order, the
 * earliest posted first; the rest wait unexpected, and receives posted later
 * take the earliest unexpected one that matches. */
static void model(void)
{
	bool taken[NMSG] = { false };
	for (int i = 0; i < NMSG; i++) {
		if (msgs[i].withdrawn)
			continue;
		for (int j = 0; j < npre; j++) {
			if (!pre[j].cancelled && pre[j].expect < 0 && matches(&pre[j], &msgs[i])) {
				pre[j].expect = i;
				taken[i] = true;
				break;
			}
		}
	}
	for (int j = 0; j < npost; j++) {
		for (int i = 0; i < NMSG; i++) {
			if (!msgs[i].withdrawn && !taken[i] && matches(&post[j], &msgs[i])) {
				post[j].expect = i;
				taken[i] = true;
				break;
			}
		}
	}
}

/* Counts (in *@arg) the unexpected announcements whose offer was withdrawn;
 * never "found", so every entry of the key is seen. */
static bool count_withdrawn(const struct xpi_unexp *u, const void *arg)
{
	const struct xpi_msg *m = xpi_container_of(u, struct xpi_msg, u);
	uint32_t id;
	if (m->kind != XPI_MSG_RTS || m->desc_len != sizeof(id))
		return false;
	memcpy(&id, m->data, sizeof(id));
	if (id < (uint32_t)net.noffers && net.offers[id].withdrawn)
		(*(int *)(uintptr_t)arg)++;
	return false;
}

/* ---- one round --------------------------------------------------------- */

static void progress_all(void)
{
	for (int k = 0; k < 2; k++) {
		T_CHECK(xpi_owner_try_acquire(ctxs[k]));
		xpi_engine_run(ctxs[k]);
		xpi_owner_release(ctxs[k]);
	}
}

static void settle(void)
{
	for (int i = 0; i < 100000 && (net.nq[1] != 0 || net.nfetches[1] != 0); i++)
		progress_all();
	T_EQ(net.nq[1], 0);
	T_EQ(net.nfetches[1], 0);
}

static void check_recv(struct recv_spec *r, const char *phase, int j)
{
	xp_status_t st;
	if (r->cancelled || r->expect < 0) {
		if (!r->cancelled)
			T_OK(xp_cancel(r->req));
		int rc = xp_wait(&r->req, 1000, &st);
		if (rc != -ECANCELED)
			T_FAIL("%s receive %d (tag %llu mask %llx): %d, expected no message", phase,
			       j, (unsigned long long)r->tag, (unsigned long long)r->mask, rc);
		return;
	}
	int rc = xp_wait(&r->req, 1000, &st);
	if (rc != 0)
		T_FAIL("%s receive %d: %d (%s), expected message %d", phase, j, rc,
		       xp_error_detail(), r->expect);
	const struct msg_spec *m = &msgs[r->expect];
	if (st.tag != m->tag || st.length != m->len || st.source != 0 ||
	    check(r->buf, m->len, (uint32_t)r->expect) != 0)
		T_FAIL("%s receive %d got tag %llu, %zu B; expected message %d (tag %llu, %zu B)",
		       phase, j, (unsigned long long)st.tag, st.length, r->expect,
		       (unsigned long long)m->tag, m->len);
}

static void post_recv(struct recv_spec *r)
{
	r->buf = malloc(MAXLEN);
	T_OK(xp_irecv(xp_comm_world(ctxs[1]), r->buf, MAXLEN, r->src, r->tag, r->mask, &r->req));
}

static void round_once(const struct xpi_config *cfg)
{
	memset(&net, 0, sizeof(net));
	for (int r = 0; r < 2; r++) {
		T_OK(xpi_context_create(r, 2, cfg, &ctxs[r]));
		for (int lane = 0; lane < 2; lane++) {
			shims[r][lane] = (struct shim){ .ctx = ctxs[r], .lane = lane };
			T_OK(xpi_context_add_tl(ctxs[r], &shim_ops, &shims[r][lane]));
		}
		xpi_context_set_peer_lanes(ctxs[r], 1 - r, 0, 1);
		xpi_context_set_peer_lanes(ctxs[r], r, 0, 1);
	}
	npre = NMSG / 2 + (int)rnd(NMSG / 4);
	npost = NMSG;
	for (int j = 0; j < npre; j++) {
		random_recv(&pre[j]);
		post_recv(&pre[j]);
		if (rnd(10) == 0) {
			pre[j].cancelled = true;
			T_OK(xp_cancel(pre[j].req));
		}
	}
	for (int i = 0; i < NMSG; i++) {
		msgs[i] = (struct msg_spec){ .tag = rnd(8),
					     .len = rnd(3) == 0 ?
							    RNDV_FROM + rnd(MAXLEN - RNDV_FROM) :
							    rnd(RNDV_FROM) };
		msgs[i].buf = malloc(msgs[i].len + 1);
		fill(msgs[i].buf, msgs[i].len, (uint32_t)i);
		T_OK(xp_isend(xp_comm_world(ctxs[0]), msgs[i].buf, msgs[i].len, 1, msgs[i].tag,
			      &msgs[i].req));
		if (msgs[i].len >= RNDV_FROM && rnd(6) == 0) {
			msgs[i].withdrawn = true; /* before the peer can have seen it */
			T_OK(xp_cancel(msgs[i].req));
		}
	}
	for (int j = 0; j < npost; j++)
		random_recv(&post[j]);
	model();
	settle(); /* everything delivered; pre-posted receives matched */
	for (int j = 0; j < npost; j++)
		post_recv(&post[j]);
	for (int j = 0; j < npre; j++)
		check_recv(&pre[j], "pre-posted", j);
	for (int j = 0; j < npost; j++)
		check_recv(&post[j], "posted later", j);
	/* Messages nobody took are still unexpected; then every send ends. */
	int left = 0;
	for (int i = 0; i < NMSG; i++) {
		bool taken = msgs[i].withdrawn;
		for (int j = 0; j < npre && !taken; j++)
			taken = pre[j].expect == i;
		for (int j = 0; j < npost && !taken; j++)
			taken = post[j].expect == i;
		left += !taken;
	}
	/* A withdrawal the bulk lane takes back by itself (shim_send_cancel,
	 * as a one-sided lane would) tells the receiver nothing: an
	 * announcement no receive has tried yet still waits unexpected, and
	 * goes when one does (rndv_fetch says -ECANCELED). Those count too. */
	int stale = 0;
	for (uint64_t tag = 0; tag < 8; tag++) {
		struct xpi_match_key key = { .comm = xp_comm_world(ctxs[1])->id,
					     .src = 0,
					     .tag = tag };
		xpi_match_find_unexpected(&ctxs[1]->match, &key, count_withdrawn, &stale);
	}
	if (stale != 0)
		fprintf(stderr,
			"   %d withdrawn announcements still unexpected (no receive tried them)\n",
			stale);
	xp_stats_t s;
	T_OK(xp_stats_get(ctxs[1], &s));
	if (s.unexpected_now != (uint64_t)(left + stale))
		T_FAIL("%llu messages wait unexpected, expected %d not taken and %d withdrawn "
		       "announcements not yet tried",
		       (unsigned long long)s.unexpected_now, left, stale);
	for (int i = 0; i < NMSG; i++) {
		bool rndv = msgs[i].len >= RNDV_FROM, taken = false;
		for (int j = 0; j < npre && !taken; j++)
			taken = pre[j].expect == i;
		for (int j = 0; j < npost && !taken; j++)
			taken = post[j].expect == i;
		if (rndv && !taken && !msgs[i].withdrawn)
			T_OK(xp_cancel(msgs[i].req)); /* nobody will fetch it */
		int rc = xp_wait(&msgs[i].req, 1000, NULL);
		if (rndv && !taken) /* withdrawn, before or now */
			T_EQ(rc, -ECANCELED);
		else
			T_OK(rc); /* eager: complete once taken; rendezvous: fetched */
		free(msgs[i].buf);
	}
	/* Each eager message consumed returned its credit once, duplicates
	 * and redeliveries notwithstanding. */
	uint64_t consumed = 0;
	for (int j = 0; j < npre + npost; j++) {
		const struct recv_spec *r = j < npre ? &pre[j] : &post[j - npre];
		if (!r->cancelled && r->expect >= 0 && msgs[r->expect].len < RNDV_FROM)
			consumed += xpi_eager_cost(msgs[r->expect].len);
	}
	T_EQ(ctxs[1]->peers[0].eager_returned, consumed);
	fprintf(stderr, "   %d deliveries, %d duplicates, %d redelivered later\n", net.delivered,
		net.duplicates, net.redelivered);
	for (int j = 0; j < npre; j++)
		free(pre[j].buf);
	for (int j = 0; j < npost; j++)
		free(post[j].buf);
	for (int r = 0; r < 2; r++) {
		xpi_context_teardown(ctxs[r]);
		xpi_context_destroy(ctxs[r]);
	}
	for (int k = 0; k < 2; k++)
		for (int i = 0; i < net.nq[k]; i++) {
			free(net.q[k][i]->payload);
			free(net.q[k][i]);
		}
}

int main(int argc, char **argv)
{
	const char *env = getenv("XP_TEST_SEED");
	uint64_t seed = argc > 1    ? strtoull(argv[1], NULL, 0) :
			env != NULL ? strtoull(env, NULL, 0) :
				      (uint64_t)time(NULL);
	int rounds = argc > 2 ? atoi(argv[2]) : 20;
	setenv("XP_LOG_LEVEL", "none", 1);
	struct xpi_config cfg;
	T_OK(xpi_config_resolve(NULL, &cfg));
	for (int k = 0; k < rounds; k++) {
		rng = (seed + (uint64_t)k) * 0x9e3779b97f4a7c15ull | 1;
		fprintf(stderr, "-- round %d: seed %llu (replay: %s %llu 1)\n", k,
			(unsigned long long)(seed + (uint64_t)k), argv[0],
			(unsigned long long)(seed + (uint64_t)k));
		round_once(&cfg);
	}
	return 0;
}
