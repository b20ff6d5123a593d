/* SPDX-License-Identifier: MIT */
/* The RDMA transport's ops: offers, claims, reads and FINs (rdma_tl.h). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/compiler.h"
#include "../core/log.h"
#include "rdma_tl.h"
#ifdef XPORT_HAVE_RDMACM
#include "rdma_cm.h"
#endif

static uint64_t word_of(uint32_t gen, unsigned state)
{
	return (uint64_t)gen << 2 | state;
}

/* Whether [addr, addr + len) is one of the pool's class mappings. */
static bool pool_class_memory(const struct xpi_rdma_tl *t, const void *addr, size_t len)
{
	const struct xpi_pool *pool = t->ctx->pool;
	for (int i = 0; i < XPI_POOL_NCLASSES; i++)
		if (pool->cls[i].base == addr && pool->cls[i].map_len == len)
			return true;
	return false;
}

/* The program's registrations and the pool's: regions of the cache
 * (rdma_rcache.h), small ones pinned now, large ones chunk by chunk. The
 * pool's classes are pinned whole whatever their size: their buffers are
 * the small lane's, whose sends and receives take the key without a
 * lookup or a lock (rdma_small.c). */
static int rdma_mem_reg(void *tlp, void *addr, size_t len, void **handle)
{
	struct xpi_rdma_tl *t = tlp;
	struct rdma_region *r;
	int rc = xpi_rcache_region_new(&t->rcache, addr, len, pool_class_memory(t, addr, len), &r);
	if (rc < 0) {
		errno = -rc;
		return xpi_rdma_fail_errno("registering memory", "ibv_reg_mr", t->dev.name, NULL);
	}
	*handle = r;
	return 0;
}

/* A dmabuf, by its fd: the device reaches the memory through the exporter,
 * with no CPU mapping. A driver without dmabuf support (rxe among them)
 * answers EOPNOTSUPP, which the program gets, naming the device. */
static int rdma_mem_reg_dmabuf(void *tlp, int fd, uint64_t offset, void *addr, size_t len,
			       void **handle)
{
	struct xpi_rdma_tl *t = tlp;
	struct rdma_region *r;
	int rc = xpi_rcache_region_dmabuf(&t->rcache, fd, offset, addr, len, &r);
	if (rc < 0) {
		char step[64];
		snprintf(step, sizeof(step), "rank %d: registering a dmabuf", t->ctx->rank);
		errno = -rc;
		return xpi_rdma_fail_errno(step, "ibv_reg_dmabuf_mr", t->dev.name, NULL);
	}
	*handle = r;
	return 0;
}

static void rdma_mem_dereg(void *tlp, void *handle)
{
	struct xpi_rdma_tl *t = tlp;
	xpi_rcache_region_free(&t->rcache, handle);
}

/*
 * The memory region covering [buf, buf + len): from the cache if the
 * program registered the memory (@reg; *@chunk is then what to give back),
 * else one made now for this transfer alone, in *@own (deregistered when it
 * ends). NULL with *@err set on failure.
 */
static struct ibv_mr *region_for(struct xpi_rdma_tl *t, const struct xpi_reg *reg, void *buf,
				 size_t len, int access, struct ibv_mr **own,
				 struct rdma_rentry **chunk, int *err)
{
	*own = NULL;
	*chunk = NULL;
	if (reg != NULL && reg->nregistered > t->tl_index && reg->handles[t->tl_index] != NULL) {
		struct ibv_mr *mr =
			xpi_rcache_get(&t->rcache, reg->handles[t->tl_index], buf, len, chunk, err);
		if (mr == NULL)
			xpi_fail(*err, "rank %d: rdma: cannot pin registered memory: %s",
				 t->ctx->rank, xp_strerror(*err));
		return mr;
	}
	struct ibv_mr *mr = ibv_reg_mr(t->dev.pd, buf, len, access);
	if (mr == NULL) {
		*err = xpi_rdma_fail_errno("registering a rendezvous buffer", "ibv_reg_mr",
					   t->dev.name, NULL);
		return NULL;
	}
	*own = mr;
	return mr;
}

static void release_word(struct xpi_rdma_tl *t, uint32_t idx)
{
	struct rdma_offer *o = &t->offers[idx];
	if (o->mr != NULL)
		ibv_dereg_mr(o->mr);
	xpi_rcache_put(&t->rcache, o->chunk);
	__atomic_store_n(&t->words[idx], word_of(o->gen, RDMA_W_FREE), __ATOMIC_RELAXED);
	*o = (struct rdma_offer){ 0 };
	t->free_words[t->nfree++] = idx;
}

int rdma_rndv_offer(void *tlp, int peer, xp_request_t *sreq, const struct xpi_reg *reg,
		    struct xpi_rndv_desc *desc)
{
	struct xpi_rdma_tl *t = tlp;
	struct rdma_peer *p = &t->peers[peer];
	if (!p->up || p->dead)
		return rdma_wire_need(t, peer);
	if (t->nfree == 0)
		return -EAGAIN; /* every state word is in use: wait for a FIN */
	struct ibv_mr *mr = NULL, *own = NULL;
	struct rdma_rentry *chunk = NULL;
	if (sreq->len != 0) {
		int err = 0;
		mr = region_for(t, reg, sreq->buf, sreq->len, IBV_ACCESS_REMOTE_READ, &own, &chunk,
				&err);
		if (mr == NULL)
			return err;
	}
	uint32_t idx = t->free_words[--t->nfree];
	uint32_t gen = t->gens[idx] = (t->gens[idx] + 1) & 0x3fffffff;
	__atomic_store_n(&t->words[idx], word_of(gen, RDMA_W_PENDING), __ATOMIC_RELAXED);
	t->offers[idx] = (struct rdma_offer){
		.sreq = sreq, .mr = own, .chunk = chunk, .peer = peer, .gen = gen
	};
	xpi_request_get(sreq); /* until its FIN, or it is withdrawn */
	sreq->tl_id = idx;
	uint64_t addr = (uint64_t)(uintptr_t)sreq->buf;
	uint32_t fields[3] = { mr != NULL ? mr->rkey : 0, idx, gen };
	for (unsigned i = 0; i < 8; i++)
		desc->bytes[i] = (uint8_t)(addr >> (8 * i));
	for (unsigned f = 0; f < 3; f++)
		for (unsigned i = 0; i < 4; i++)
			desc->bytes[8 + 4 * f + i] = (uint8_t)(fields[f] >> (8 * i));
	desc->len = XPI_RDMA_DESC_LEN;
	return 0;
}

void rdma_rndv_unoffer(struct xpi_rdma_tl *t, xp_request_t *sreq)
{
	release_word(t, (uint32_t)sreq->tl_id);
	xpi_request_put(sreq);
}

/* Keeps a completion that is not the one being waited for, for progress.
 * The backlog was sized to the CQ at setup: it never holds more than the CQ
 * could, so this never fails. */
static void keep(struct xpi_rdma_tl *t, const struct ibv_wc *wc)
{
	if (t->nbacklog < t->backlog_cap)
		t->backlog[t->nbacklog++] = *wc;
}

/* A free result slot, or -1 if every one waits for a late completion. */
static int atomic_slot(struct xpi_rdma_tl *t)
{
	for (int i = 0; i < (int)XPI_RDMA_ATOMIC_SLOTS; i++)
		if (!t->atomics[i].busy)
			return i;
	return -1;
}

/*
 * Posts a compare-and-swap of the word at @raddr (@rkey) on @qp, @what
 * saying what it is for, and waits for its answer, keeping other
 * completions for progress. Returns 0 with the value found in *@found, or
 * a negative code: the QP failed (-EIO) or no answer within @wait_ns
 * (-ETIMEDOUT; the slot stays taken, and progress handles the late
 * completion: late_atomic). The swap is @what->expect's state changed to
 * @swap.
 */
static int atomic_cas(struct xpi_rdma_tl *t, struct ibv_qp *qp, const struct rdma_atomic *what,
		      uint64_t raddr, uint32_t rkey, uint64_t swap, int64_t wait_ns,
		      uint64_t *found)
{
	int slot = atomic_slot(t);
	if (slot < 0)
		return -ETIMEDOUT; /* XPI_RDMA_ATOMIC_SLOTS earlier ones never answered */
	uint64_t id = rdma_wr_id((enum rdma_wr)what->kind, ++t->seq << 8 | (uint64_t)slot);
	struct ibv_sge sge = { (uintptr_t)&t->result[slot], 8, t->result_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	wr.wr.atomic.remote_addr = raddr;
	wr.wr.atomic.rkey = rkey;
	wr.wr.atomic.compare_add = what->expect;
	wr.wr.atomic.swap = swap;
	int rc = ibv_post_send(qp, &wr, &bad);
	if (rc != 0)
		return xpi_rdma_fail_pos(rc, "posting a compare-and-swap", "ibv_post_send",
					 t->dev.name, NULL);
	struct rdma_atomic *a = &t->atomics[slot];
	*a = *what;
	a->busy = true;
	int64_t end = xpi_now_ns() + wait_ns;
	for (;;) {
		/* The deadline first: a wait of 0 gives up without looking
		 * (the tests' stand-in for an answer slower than the wait). */
		if (xpi_now_ns() >= end) {
			a->abandoned = true;
			return -ETIMEDOUT;
		}
		/* One at a time: every completion taken but ours is kept. */
		struct ibv_wc wc;
		int n = ibv_poll_cq(t->cq, 1, &wc);
		if (n < 0) {
			a->abandoned = true; /* the device's; its flush frees the slot */
			return -EIO;
		}
		if (n == 1 && wc.wr_id != id) {
			keep(t, &wc);
			continue;
		}
		if (n == 1) {
			a->busy = false;
			if (wc.status != IBV_WC_SUCCESS)
				return -EIO;
			*found = __atomic_load_n(&t->result[slot], __ATOMIC_ACQUIRE);
			return 0;
		}
	}
}

/* The completion of a compare-and-swap whose wait gave up (slot @slot):
 * if it won after all, undo what its waiter could not. */
static void late_atomic(struct xpi_rdma_tl *t, uint32_t slot, const struct ibv_wc *wc)
{
	if (slot >= XPI_RDMA_ATOMIC_SLOTS || !t->atomics[slot].busy)
		return;
	struct rdma_atomic a = t->atomics[slot];
	t->atomics[slot] = (struct rdma_atomic){ 0 };
	bool won = wc->status == IBV_WC_SUCCESS &&
		   __atomic_load_n(&t->result[slot], __ATOMIC_ACQUIRE) == a.expect;
	if (!won || !a.abandoned)
		return; /* it lost, or its QP failed: the peer's failure handles the rest */
	if (a.kind == RDMA_WR_CLAIM) {
		/* The sender's word says CLAIMED and its send waits for a FIN
		 * that the receive, failed already, will not send: a failing
		 * one completes the send with an error and frees the word. */
		t->st_late_claims++;
		struct rdma_peer *p = &t->peers[a.peer];
		if (p->qp_ready && !p->dead)
			rdma_send_fin(t, a.peer, a.idx, true);
		return;
	}
	/* A withdrawal that won late: the word is FREE, no FIN will come. */
	struct rdma_offer *o = &t->offers[a.idx];
	if (o->sreq == NULL || o->sreq != a.sreq || word_of(o->gen, RDMA_W_PENDING) != a.expect)
		return; /* already ended with its peer */
	t->st_late_withdrawals++;
	xp_request_t *s = o->sreq;
	xpi_request_set_detail(s,
			       "rank %d: xp_send to rank %d tag 0x%llx on communicator %u: "
			       "withdrawn (its withdrawal was answered late)",
			       t->ctx->rank, o->peer, (unsigned long long)s->tag, s->comm);
	xpi_request_complete(s, -ECANCELED);
	release_word(t, a.idx);
	xpi_request_put(s);
}

/*
 * Withdraws our offer of @sreq if no receiver has claimed it: the same
 * compare-and-swap the receiver's claim is, through our own QP, so the
 * device decides between them.
 */
static int rdma_send_cancel(void *tlp, xp_request_t *sreq)
{
	struct xpi_rdma_tl *t = tlp;
	uint32_t idx = (uint32_t)sreq->tl_id;
	if (idx >= XPI_RDMA_NWORDS || t->offers[idx].sreq != sreq)
		return -EBUSY;
	struct rdma_offer *o = &t->offers[idx];
	uint64_t pending = word_of(o->gen, RDMA_W_PENDING), found = 0;
	struct rdma_atomic what = { .kind = RDMA_WR_WITHDRAW,
				    .peer = o->peer,
				    .idx = idx,
				    .expect = pending,
				    .sreq = sreq };
	int rc = atomic_cas(t, t->self_qp, &what, (uint64_t)(uintptr_t)&t->words[idx],
			    t->words_mr->rkey, word_of(o->gen, RDMA_W_FREE), XPI_RDMA_CLAIM_NS,
			    &found);
	if (rc < 0 || found != pending)
		return -EBUSY; /* claimed (its FIN completes it), or we cannot tell */
	release_word(t, idx);
	xpi_request_put(sreq);
	return 0;
}

static int rdma_rndv_fetch(void *tlp, struct xpi_msg *msg, void *dst, size_t cap,
			   xp_request_t *rreq, const struct xpi_reg *dst_reg)
{
	struct xpi_rdma_tl *t = tlp;
	int src = msg->u.key.src;
	if (src < 0 || src >= t->npeers || msg->desc_len != XPI_RDMA_DESC_LEN)
		return -EPROTO;
	struct rdma_peer *p = &t->peers[src];
	/* Its offer went once it was up, so ours is connected. */
	if (!p->qp_ready || p->dead)
		return -ECONNRESET;
	const uint8_t *d = msg->data;
	uint64_t addr = 0;
	uint32_t fields[3] = { 0, 0, 0 };
	for (unsigned i = 0; i < 8; i++)
		addr |= (uint64_t)d[i] << (8 * i);
	for (unsigned f = 0; f < 3; f++)
		for (unsigned i = 0; i < 4; i++)
			fields[f] |= (uint32_t)d[8 + 4 * f + i] << (8 * i);
	uint32_t rkey = fields[0], idx = fields[1], gen = fields[2];
	if (idx >= XPI_RDMA_NWORDS || gen > 0x3fffffff)
		return -EPROTO;

	/* The claim decides the race with a withdrawal, now. */
	uint64_t pending = word_of(gen, RDMA_W_PENDING), found = 0;
	struct rdma_atomic what = {
		.kind = RDMA_WR_CLAIM, .peer = src, .idx = idx, .expect = pending
	};
	int rc = atomic_cas(t, p->qp, &what, p->words_addr + 8ull * idx, p->words_rkey,
			    word_of(gen, RDMA_W_CLAIMED), t->claim_ns, &found);
	if (rc < 0) {
		xpi_request_set_detail(rreq,
				       "rank %d: xp_recv from rank %d tag 0x%llx: claiming its "
				       "rendezvous payload over rdma failed (%s)",
				       t->ctx->rank, src, (unsigned long long)msg->u.key.tag,
				       rc == -ETIMEDOUT ? "no answer" : "the queue pair failed");
		return rc == -ETIMEDOUT ? -ETIMEDOUT : -ECONNRESET;
	}
	if (found != pending)
		return -ECANCELED; /* its sender took it back first */

	size_t n = cap < msg->len ? cap : (size_t)msg->len;
	if (n == 0) {
		rc = rdma_send_fin(t, src, idx, false);
		return rc < 0 ? rc : 0;
	}
	struct ibv_mr *own = NULL;
	struct rdma_rentry *chunk = NULL;
	int err = 0;
	struct ibv_mr *mr =
		region_for(t, dst_reg, dst, n, IBV_ACCESS_LOCAL_WRITE, &own, &chunk, &err);
	struct rdma_fetch *f = mr != NULL ? malloc(sizeof(*f)) : NULL;
	if (f == NULL) {
		if (own != NULL)
			ibv_dereg_mr(own);
		xpi_rcache_put(&t->rcache, chunk);
		rdma_send_fin(t, src, idx, true); /* its send fails too */
		return mr == NULL ? err : -ENOMEM;
	}
	*f = (struct rdma_fetch){ .id = t->next_fetch++,
				  .rreq = rreq,
				  .mr = own,
				  .chunk = chunk,
				  .peer = src,
				  .idx = idx };
	struct ibv_sge sge = { (uintptr_t)dst, (uint32_t)n, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = rdma_wr_id(RDMA_WR_READ, f->id),
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	wr.wr.rdma.remote_addr = addr;
	wr.wr.rdma.rkey = rkey;
	if (n > UINT32_MAX || (rc = ibv_post_send(p->qp, &wr, &bad)) != 0) {
		rc = n > UINT32_MAX ? -EMSGSIZE :
				      xpi_rdma_fail_pos(rc, "posting an RDMA read", "ibv_post_send",
							t->dev.name, NULL);
		if (own != NULL)
			ibv_dereg_mr(own);
		xpi_rcache_put(&t->rcache, chunk);
		free(f);
		rdma_send_fin(t, src, idx, true);
		return rc;
	}
	xpi_dlist_push_tail(&t->fetches, &f->link);
	return 1; /* progress finishes it (read_done) */
}

/* The device writes into the buffer until the read completes: no letting
 * go before then. */
static int rdma_rndv_abort(void *tlp, xp_request_t *rreq)
{
	(void)tlp;
	(void)rreq;
	return -EBUSY;
}

static void rdma_msg_release(void *tlp, struct xpi_msg *msg)
{
	(void)tlp;
	(void)msg; /* the descriptor travels inside the message */
}

static struct rdma_fetch *find_fetch(struct xpi_rdma_tl *t, uint64_t id)
{
	struct xpi_dlink *pos;
	xpi_dlist_for_each(pos, &t->fetches) {
		struct rdma_fetch *f = xpi_container_of(pos, struct rdma_fetch, link);
		if (f->id == id)
			return f;
	}
	return NULL;
}

void rdma_got_fin(struct xpi_rdma_tl *t, int peer, uint32_t imm)
{
	uint32_t idx = imm & ~XPI_RDMA_FIN_FAILED;
	struct rdma_offer *o = idx < XPI_RDMA_NWORDS ? &t->offers[idx] : NULL;
	if (o == NULL || o->sreq == NULL || o->peer != peer) {
		rdma_peer_failed(t, peer, -EPROTO,
				 "sent an answer for a send it was never offered");
		return;
	}
	xp_request_t *s = o->sreq;
	if (imm & XPI_RDMA_FIN_FAILED) {
		xpi_request_set_detail(s,
				       "rank %d: xp_send to rank %d tag 0x%llx on communicator %u "
				       "failed: rank %d could not take its payload over rdma",
				       t->ctx->rank, peer, (unsigned long long)s->tag, s->comm,
				       peer);
		xpi_request_complete(s, -EIO);
	} else {
		xpi_request_complete(s, 0);
	}
	release_word(t, idx);
	xpi_request_put(s);
}

static void read_done(struct xpi_rdma_tl *t, uint64_t id, enum ibv_wc_status status)
{
	struct rdma_fetch *f = find_fetch(t, id);
	if (f == NULL)
		return; /* failed with its peer already */
	xpi_dlist_remove(&f->link);
	if (f->mr != NULL)
		ibv_dereg_mr(f->mr);
	xpi_rcache_put(&t->rcache, f->chunk);
	int peer = f->peer;
	xp_request_t *r = f->rreq;
	uint32_t idx = f->idx;
	free(f);
	if (status != IBV_WC_SUCCESS) {
		if (r != NULL)
			xpi_engine_fail_request(t->ctx, r, peer);
		rdma_peer_failed(t, peer, -EIO, "failed an RDMA read of its payload");
		return;
	}
	rdma_send_fin(t, peer, idx, false);
	if (r != NULL)
		xpi_engine_rndv_done(t->ctx, r, 0);
}

static void handle(struct xpi_rdma_tl *t, const struct ibv_wc *wc)
{
	enum rdma_wr kind = (enum rdma_wr)(wc->wr_id >> 56);
	uint64_t low = wc->wr_id & ((1ull << 56) - 1);
	switch (kind) {
	case RDMA_WR_RECV:
		rdma_small_recv_done(t, wc);
		return;
	case RDMA_WR_SEND:
		rdma_small_send_done(t, wc);
		return;
	case RDMA_WR_READ:
		read_done(t, low, wc->status);
		return;
	default: /* a claim or withdrawal whose wait gave up */
		late_atomic(t, (uint32_t)(low & 0xff), wc);
		return;
	}
}

/* A peer the other lane lost (its TCP connection closed) fails here too:
 * its sends offered and its payloads being read. Checked when the count of
 * lost peers changes, so the common case costs one comparison. */
static void check_lost_peers(struct xpi_rdma_tl *t)
{
	if (t->ctx->nfailed == t->nfailed_seen)
		return;
	t->nfailed_seen = t->ctx->nfailed;
	for (int p = 0; p < t->ctx->size; p++)
		if (t->peers[p].qp != NULL && !t->peers[p].dead && t->ctx->peers[p].failed != 0)
			rdma_peer_failed(t, p, t->ctx->peers[p].failed, NULL);
}

static int rdma_progress(void *tlp)
{
	struct xpi_rdma_tl *t = tlp;
	int events = 0;
	check_lost_peers(t);
	/* Handling one may add to the backlog (a FIN's answer does not, but a
	 * claim inside rndv_fetch, reached through rndv_done, may). */
	for (uint32_t i = 0; i < t->nbacklog; i++, events++) {
		struct ibv_wc wc = t->backlog[i];
		handle(t, &wc);
	}
	t->nbacklog = 0;
	struct ibv_wc wc[16];
	int n;
	/* A poll that found fewer than it could take emptied the CQ: a
	 * second would only take the provider's lock to find nothing. */
	do {
		n = ibv_poll_cq(t->cq, 16, wc);
		for (int i = 0; i < n; i++)
			handle(t, &wc[i]);
		events += n > 0 ? n : 0;
	} while (n == 16);
	if (t->ntodo != 0)
		rdma_wire_progress(t);
	rdma_small_flush(t);
	if (events == 0)
		rdma_small_repost(t); /* idle: nobody waits for this */
	return events;
}

/* The completion channel's fd wakes the sleep once the CQ is armed; a
 * completion that came between the last poll and arming is seen by the
 * poll after it. */
static int rdma_sleep_prepare(void *tlp, struct pollfd *fds, int max)
{
	struct xpi_rdma_tl *t = tlp;
	if (max < 1)
		return -ENOTSUP;
	if (t->nbacklog != 0)
		return -EAGAIN;
	rdma_small_repost(t);
	if (!__atomic_load_n(&t->cq_armed, __ATOMIC_ACQUIRE)) {
		if (ibv_req_notify_cq(t->cq, 0) != 0)
			return -ENOTSUP;
		__atomic_store_n(&t->cq_armed, true, __ATOMIC_RELEASE);
	}
	struct ibv_wc wc;
	int n = ibv_poll_cq(t->cq, 1, &wc);
	if (n > 0) {
		keep(t, &wc);
		return -EAGAIN;
	}
	fds[0] = (struct pollfd){ .fd = t->chan->fd, .events = POLLIN };
	return 1;
}

/* Takes the channel's event, if one came, so the next sleep arms again. */
static void rdma_sleep_done(void *tlp)
{
	struct xpi_rdma_tl *t = tlp;
	struct ibv_cq *cq;
	void *cq_ctx;
	if (ibv_get_cq_event(t->chan, &cq, &cq_ctx) == 0) {
		ibv_ack_cq_events(cq, 1);
		__atomic_store_n(&t->cq_armed, false, __ATOMIC_RELEASE);
	}
}

void rdma_peer_failed(struct xpi_rdma_tl *t, int peer, int err, const char *why)
{
	struct rdma_peer *p = &t->peers[peer];
	if (p->dead)
		return;
	p->dead = true;
	rdma_small_peer_lost(t, peer);
	if (why != NULL) /* NULL: the engine learnt it from another lane */
		xpi_engine_peer_failed(t->ctx, peer, err, why);
	/* Flushes what the QP still holds: each read ends in read_done (its
	 * buffer deregistered there), each FIN receive is dropped. */
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	if (p->qp != NULL)
		ibv_modify_qp(p->qp, &a, IBV_QP_STATE);
	for (uint32_t i = 0; i < XPI_RDMA_NWORDS; i++) {
		struct rdma_offer *o = &t->offers[i];
		if (o->sreq == NULL || o->peer != peer)
			continue;
		xp_request_t *s = o->sreq;
		xpi_engine_fail_request(t->ctx, s, peer);
		release_word(t, i);
		xpi_request_put(s);
	}
	struct xpi_dlink *pos, *next;
	for (pos = t->fetches.next; pos != &t->fetches; pos = next) {
		next = pos->next;
		struct rdma_fetch *f = xpi_container_of(pos, struct rdma_fetch, link);
		if (f->peer != peer)
			continue;
		/* The device may still write: the buffer stays registered
		 * until the flushed read completes; the receive fails now. */
		if (f->rreq != NULL)
			xpi_engine_fail_request(t->ctx, f->rreq, peer);
		f->rreq = NULL;
	}
}

void rdma_qp_destroy(struct xpi_rdma_tl *t, int peer)
{
	if (t->peers[peer].qp == NULL)
		return;
#ifdef XPORT_HAVE_RDMACM
	if (t->cm != NULL)
		xpi_rdma_cm_drop(t->cm, peer);
	else
#endif
		ibv_destroy_qp(t->peers[peer].qp);
	t->peers[peer].qp = NULL;
	/* Claims on it given up on will never complete now. */
	for (uint32_t i = 0; i < XPI_RDMA_ATOMIC_SLOTS; i++)
		if (t->atomics[i].busy && t->atomics[i].kind == RDMA_WR_CLAIM &&
		    t->atomics[i].peer == peer)
			t->atomics[i] = (struct rdma_atomic){ 0 };
}

static void rdma_destroy(void *tlp)
{
	struct xpi_rdma_tl *t = tlp;
	for (uint32_t i = 0; i < XPI_RDMA_NWORDS; i++) {
		xp_request_t *s = t->offers[i].sreq;
		if (s == NULL)
			continue;
		xpi_engine_drop_request(t->ctx, s);
		release_word(t, i);
		xpi_request_put(s);
	}
	for (int p = 0; t->peers != NULL && p < t->npeers; p++) {
		rdma_qp_destroy(t, p);
		rdma_small_drop_tx(t, p);
	}
#ifdef XPORT_HAVE_RDMACM
	if (t->cm != NULL) {
		xpi_rdma_cm_close(t->cm); /* before the CQ and SRQ its QPs used */
		free(t->cm);
	}
#endif
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&t->fetches)) != NULL) {
		struct rdma_fetch *f = xpi_container_of(l, struct rdma_fetch, link);
		if (f->rreq != NULL)
			xpi_engine_drop_request(t->ctx, f->rreq);
		if (f->mr != NULL)
			ibv_dereg_mr(f->mr);
		xpi_rcache_put(&t->rcache, f->chunk);
		free(f);
	}
	if (t->self_qp != NULL)
		ibv_destroy_qp(t->self_qp);
	rdma_small_fini(t);
	if (t->cq != NULL) {
		if (__atomic_load_n(&t->cq_armed, __ATOMIC_ACQUIRE))
			rdma_sleep_done(t); /* an event not taken keeps the CQ alive */
		ibv_destroy_cq(t->cq);
	}
	if (t->chan != NULL)
		ibv_destroy_comp_channel(t->chan);
	if (t->words_mr != NULL)
		ibv_dereg_mr(t->words_mr);
	if (t->result_mr != NULL)
		ibv_dereg_mr(t->result_mr);
	if (t->rcache.pd != NULL)
		xpi_rcache_fini(&t->rcache);
	free(t->words);
	free(t->result);
	free(t->backlog);
	free(t->qpns);
	free(t->todo);
	free(t->attn);
	free(t->peers);
	xpi_rdma_dev_close(&t->dev);
	free(t);
}

/* A receive names @peer: its pair is made now, as a send would make it,
 * so its first frame finds our QP connected and a peer that died first
 * fails the receive at once. */
/* The engine lost @peer: an endpoint slot's loss comes only this way (the
 * count check_lost_peers watches is the job's ranks'). */
static void rdma_peer_lost(void *tlp, int peer)
{
	struct xpi_rdma_tl *t = tlp;
	if (!t->peers[peer].dead && t->peers[peer].wstate != RW_OFF)
		rdma_peer_failed(t, peer, t->ctx->peers[peer].failed, NULL);
}

static void rdma_peer_wanted(void *tlp, int peer)
{
	struct xpi_rdma_tl *t = tlp;
	if (t->peers[peer].wstate == RW_IDLE && !t->peers[peer].dead)
		(void)rdma_wire_need(t, peer);
}

/* FINs wait for window in our queue; everything else is posted at once. */
static bool rdma_tx_pending(void *tlp)
{
	const struct xpi_rdma_tl *t = tlp;
	return t->nfins_total != 0;
}

const struct xpi_tl_ops xpi_rdma_ops = {
	.name = "rdma",
	/* Eager copies a message once on each side; rendezvous costs a
	 * claim, a read and a FIN, three trips through the device, and
	 * copies nothing. Where they cross on a NIC is for perf/ to find;
	 * 8 KiB is where UCX's rc transports switch by default. */
	.rndv_threshold = 8192,
	.eager_max = XPI_RDMA_RX_BUF - 56, /* the header shares the send buffer */
	.mem_reg = rdma_mem_reg,
	.mem_reg_dmabuf = rdma_mem_reg_dmabuf,
	.mem_dereg = rdma_mem_dereg,
	.send_eager = rdma_send_eager,
	.send_rts = rdma_send_rts,
	.rndv_offer = rdma_rndv_offer,
	.send_cancel = rdma_send_cancel,
	.rndv_fetch = rdma_rndv_fetch,
	.rndv_abort = rdma_rndv_abort,
	.msg_release = rdma_msg_release,
	.progress = rdma_progress,
	.sleep_prepare = rdma_sleep_prepare,
	.sleep_done = rdma_sleep_done,
	.tx_pending = rdma_tx_pending,
	.peer_lost = rdma_peer_lost,
	.peer_wanted = rdma_peer_wanted,
	.destroy = rdma_destroy,
};
