/* SPDX-License-Identifier: MIT */
/*
 * Endpoints over TCP (src/core/ep.h): listeners of their own, pairs made
 * to an address, and pairs closed one at a time.
 *
 * A listener has its own port and a secret of 32 random bytes, which its
 * address carries. Its connections run the job's handshake (auth.h) as
 * ranks 0 (the listener) and 1 of 2, under a key derived from the secret
 * and, where the context has one, the job key: so only a process that was
 * given the address (and the key) gets a slot, and strangers are bounded
 * as on the job's listener (tcp_wire.c: all handshakes at once, each with
 * its deadline, half-open connections capped). The connecting side makes
 * both connections of the pair, control then bulk, each naming the pair
 * by a random id; there is no race to decide, as only one side connects.
 *
 * Closing a pair is not a failure: its goodbye (XPI_FRAME_BYE) leaves
 * after what is queued, then the sockets are shut, and the slot is given
 * back once the kernel holds nothing of the pair any more.
 */
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <poll.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/ep.h"
#include "../core/log.h"
#include "../job/sock.h"
#include "../select/card.h"
#include "tcp.h"
#include "tcp_setup.h"

/* What a closing pair's queued output and goodbye have to leave in: a
 * peer that reads nothing does not hold the slot longer. */
#define CLOSE_GRACE_NS (1000 * 1000000LL)

/* Both sides of an endpoint's handshake bind it to this (auth.h). */
static const uint8_t ep_binding[] = "xport-endpoint-v1";

/* The key an endpoint's connections prove: BLAKE2b-256 of the listener's
 * secret, keyed with the job key where the context has one. */
static int ep_key(const struct xpi_tcp *t, const uint8_t secret[XPI_EP_SECRET_LEN],
		  uint8_t out[XPI_AUTH_KEY_LEN])
{
	if (xpi_auth_init() < 0)
		return -EIO;
	bool keyed = t->ctx->cfg.has_job_key;
	return crypto_generichash(out, XPI_AUTH_KEY_LEN, secret, XPI_EP_SECRET_LEN,
				  keyed ? t->key : NULL, keyed ? XPI_AUTH_KEY_LEN : 0) == 0 ?
		       0 :
		       -EIO;
}

static struct xpi_auth_args ep_auth(const uint8_t *key, int my_rank)
{
	return (struct xpi_auth_args){ .key = key,
				       .my_rank = my_rank,
				       .size = 2,
				       .bind = { ep_binding, sizeof(ep_binding) - 1 } };
}

static void arm_listener(struct xpi_tcp *t, int lsn)
{
	struct io_uring_sqe *sqe = tcp_sqe(t);
	if (sqe == NULL)
		return;
	io_uring_prep_poll_multishot(sqe, t->lsns[lsn]->fd, POLLIN);
	io_uring_sqe_set_data64(sqe, (uint64_t)TCP_OP_LISTEN << 56 | (uint64_t)(lsn + 1) << 32);
	t->lsns[lsn]->armed = true;
}

void tcp_ep_listen_cqe(struct xpi_tcp *t, int lsn, int res, unsigned flags)
{
	struct tcp_ep_listener *l = lsn < t->nlsns ? t->lsns[lsn] : NULL;
	if (l == NULL)
		return; /* closed: the poll's last word */
	if (!(flags & IORING_CQE_F_MORE))
		l->armed = false;
	if (res >= 0)
		tcp_wire_accept(t, l->fd, lsn);
	if (!l->armed)
		arm_listener(t, lsn);
}

/* --- the ops -------------------------------------------------------------- */

static int ep_listen(void *tlp, struct xp_listener *pub, struct xpi_ep_addr *a)
{
	struct xpi_tcp *t = tlp;
	if (t->nlsns >= 0xfffffe)
		return -EMFILE; /* the index must fit the poll's user_data */
	struct tcp_ep_listener *l = calloc(1, sizeof(*l));
	struct tcp_ep_listener **lsns = realloc(t->lsns, (size_t)(t->nlsns + 1) * sizeof(*lsns));
	if (l == NULL || lsns == NULL) {
		free(l);
		return -ENOMEM;
	}
	t->lsns = lsns;
	int rc = xpi_auth_random(a->secret, sizeof(a->secret));
	if (rc == 0)
		rc = ep_key(t, a->secret, l->key);
	struct sockaddr_storage ss = t->listen_addr;
	socklen_t len =
		ss.ss_family == AF_INET ? sizeof(struct sockaddr_in) : sizeof(struct sockaddr_in6);
	((struct sockaddr_in *)&ss)->sin_port = 0; /* the same place in both families */
	if (rc == 0)
		rc = xpi_sock_listen((const struct sockaddr *)&ss, len, 128, &l->fd);
	if (rc == 0 && getsockname(l->fd, (struct sockaddr *)&ss, &len) < 0) {
		rc = -errno;
		close(l->fd);
	}
	if (rc < 0) {
		free(l);
		return xpi_fail(rc, "rank %d: xp_listen: cannot listen: %s", t->ctx->rank,
				xp_strerror(rc));
	}
	l->pub = pub;
	l->auth = ep_auth(l->key, 0);
	tcp_card_pack(&ss, a->card);
	if (t->ctx->cfg.host_id[0] != '\0')
		xpi_card_host_id_named(t->ctx->cfg.host_id, a->host);
	else
		xpi_card_host_id(a->host);
	xpi_sock_addr_str((const struct sockaddr *)&ss, pub->label, sizeof(pub->label));
	int lsn = t->nlsns++;
	t->lsns[lsn] = l;
	pub->tl_state = l;
	arm_listener(t, lsn);
	io_uring_submit(&t->ring);
	return 0;
}

static int lsn_index(const struct xpi_tcp *t, const struct xp_listener *pub)
{
	for (int i = 0; i < t->nlsns; i++)
		if (t->lsns[i] != NULL && t->lsns[i]->pub == pub)
			return i;
	return -1;
}

static void close_slot(struct xpi_tcp *t, int slot, bool inside);

static void ep_listen_close(void *tlp, struct xp_listener *pub)
{
	struct xpi_tcp *t = tlp;
	int lsn = lsn_index(t, pub);
	if (lsn < 0)
		return;
	struct tcp_ep_listener *l = t->lsns[lsn];
	t->lsns[lsn] = NULL;
	tcp_wire_drop_listener(t, lsn);
	/* Pairs half made through it: nobody will take them. */
	for (int p = t->ctx->size; p < t->nconn; p++) {
		struct tcp_conn *c = t->conns[p];
		if (c != NULL && c->ep != NULL && c->ep->lsn == lsn && !c->ep->closing) {
			t->ctx->ep_state[p - t->ctx->size] = XPI_SLOT_CLOSING;
			close_slot(t, p, true);
		}
	}
	/* The poll holds the file until it completes: take it back. */
	struct io_uring_sqe *sqe = l->armed ? tcp_sqe(t) : NULL;
	if (sqe != NULL) {
		io_uring_prep_poll_remove(sqe, (uint64_t)TCP_OP_LISTEN << 56 | (uint64_t)(lsn + 1)
										       << 32);
		io_uring_sqe_set_data64(sqe, (uint64_t)TCP_OP_CANCEL << 56);
		io_uring_submit(&t->ring);
	}
	close(l->fd);
	free(l);
}

static void conn_free(struct xpi_tcp *t, struct tcp_conn *c);

static int ep_connect(void *tlp, int slot, const struct xpi_ep_addr *a)
{
	struct xpi_tcp *t = tlp;
	/* Everything that can fail before the pair's state is made: after,
	 * a failure is the pair's, which xp_ep_ready reports. */
	struct tcp_ep ep0 = { .lsn = -1 };
	if (tcp_card_parse(a->card, &ep0.addr, &ep0.addrlen) < 0)
		return xpi_fail(-EINVAL, "rank %d: xp_connect: the address names no TCP listener",
				t->ctx->rank);
	int rc = xpi_auth_random(ep0.id, sizeof(ep0.id));
	if (rc == 0)
		rc = ep_key(t, a->secret, ep0.key);
	if (rc < 0)
		return rc;
	if ((a->flags & XPI_EP_FLAG_KEY) && !t->ctx->cfg.has_job_key)
		xpi_log(XPI_LOG_WARN,
			"rank %d: xp_connect: the listener's context has a job key and ours has "
			"none (XP_JOB_KEY): it will refuse us",
			t->ctx->rank);
	struct tcp_conn *c = tcp_conn_get(t, slot);
	struct tcp_ep *ep = c != NULL ? malloc(sizeof(*ep)) : NULL;
	if (ep == NULL) {
		if (c != NULL)
			conn_free(t, c);
		return -ENOMEM;
	}
	*ep = ep0;
	ep->auth = ep_auth(ep->key, 1); /* points at ep->key: made in place */
	c->ep = ep;
	xpi_sock_addr_str((const struct sockaddr *)&ep->addr, t->ctx->ep_label[slot - t->ctx->size],
			  sizeof(t->ctx->ep_label[0]));
	t->want[slot] = 1;
	(void)tcp_wire_need(t, c); /* -EAGAIN, or the pair failed: ep->err */
	return 0;
}

static int ep_state(void *tlp, int slot)
{
	struct xpi_tcp *t = tlp;
	const struct tcp_conn *c = tcp_conn_at(t, slot);
	if (c == NULL || c->ep == NULL)
		return -EINVAL;
	if (c->ep->err != 0)
		return c->ep->err;
	if (c->dead)
		return t->ctx->peers[slot].failed != 0 ? t->ctx->peers[slot].failed : -ECONNRESET;
	return c->wstate == TW_READY ? 0 : -EAGAIN;
}

/*
 * Sends @c's goodbye after what is queued, and then the end of both
 * streams: the peer reads everything we sent, then the goodbye, then the
 * end, and takes that as the close it is. Waits (running the transport,
 * at most CLOSE_GRACE_NS) until the queue is in the kernel's hands, so
 * that the end follows it without this process making progress later:
 * a program may close and exit.
 */
static void say_goodbye(struct xpi_tcp *t, struct tcp_conn *c)
{
	struct xpi_frame f = { .type = XPI_FRAME_BYE, .id = t->ctx->peers[c->peer].send_seq };
	if (tcp_ctl_queue(c, &f, NULL) == 0)
		tcp_ctl_flush(c);
	io_uring_submit(&t->ring);
	while (!c->dead && (c->tx_tail != c->tx_head || c->tx_busy != 0 || c->tx_held) &&
	       xpi_now_ns() < c->ep->close_deadline)
		xpi_tcp_ops.progress(t);
	if (!c->dead) {
		shutdown(c->fd_ctl, SHUT_WR);
		shutdown(c->fd_bulk, SHUT_WR);
	}
}
static void close_slot(struct xpi_tcp *t, int slot, bool inside);

static void ep_close(void *tlp, int slot)
{
	close_slot(tlp, slot, false);
}

/* Closes @slot's pair; @inside: called from the transport's own progress,
 * where running it again is not allowed (the pair then has sent nothing:
 * it was never handed to the program). */
static void close_slot(struct xpi_tcp *t, int slot, bool inside)
{
	struct tcp_conn *c = tcp_conn_at(t, slot);
	if (c == NULL) {
		xpi_ep_slot_released(t->ctx, slot);
		return;
	}
	if (c->ep->closing)
		return;
	c->ep->close_deadline = xpi_now_ns() + CLOSE_GRACE_NS;
	/* The goodbye first, while the pair is not yet marked closing: the
	 * progress it runs frees closing pairs (tcp_ep_progress), never an
	 * open one, so @c outlives it. */
	if (c->wstate == TW_READY && !c->dead && c->tx_buf != NULL && !inside)
		say_goodbye(t, c);
	c->ep->closing = true;
	t->nclosing++;
}

void tcp_ep_close_inside(struct xpi_tcp *t, int slot)
{
	close_slot(t, slot, true);
}

static const struct xpi_ep_ops tcp_ep_ops = {
	.listen = ep_listen,
	.listen_close = ep_listen_close,
	.connect = ep_connect,
	.state = ep_state,
	.close = ep_close,
};

void tcp_ep_attach(struct xpi_tcp *t)
{
	if (t->ctx->npeers > t->ctx->size)
		xpi_ep_register(t->ctx, &tcp_ep_ops, t, t->tl_index);
}

/* --- closing ---------------------------------------------------------------- */

/* True once the kernel holds nothing of @c: no operation in flight, no
 * zero-copy send whose pages it may still read. */
static bool kernel_done(const struct tcp_conn *c)
{
	return c->inflight == 0 && xpi_dlist_empty(&c->zc_wait) && c->bulk_zc_slot < 0;
}

static void conn_free(struct xpi_tcp *t, struct tcp_conn *c)
{
	for (int i = 0; i < t->nlinked; i++)
		if (t->linked[i] == c->peer) {
			t->linked[i] = t->linked[--t->nlinked];
			break;
		}
	if (t->direct_peer == c->peer)
		t->direct_peer = -1;
	if (c->fd_ctl >= 0)
		close(c->fd_ctl);
	if (c->fd_bulk >= 0)
		close(c->fd_bulk);
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&c->bulk_rx)) != NULL)
		free(xpi_container_of(l, struct tcp_bulk_rx, link));
	t->want[c->peer] = 0;
	t->conns[c->peer] = NULL;
	free(c->tx_buf);
	free(c->asm_buf);
	free(c->acks);
	free(c->ep);
	free(c);
}

void tcp_ep_progress(struct xpi_tcp *t)
{
	int64_t now = xpi_now_ns();
	/* A pair held back (tx_held) is in t->held: let its output go
	 * before any pair is freed. */
	if (t->nheld != 0)
		tcp_ctl_release_holds(t);
	for (int p = t->ctx->size; p < t->nconn && t->nclosing != 0; p++) {
		struct tcp_conn *c = t->conns[p];
		if (c == NULL || c->ep == NULL || !c->ep->closing)
			continue;
		if (!c->dead) {
			bool queued = c->tx_tail != c->tx_head || c->tx_busy != 0;
			if (queued && now < c->ep->close_deadline && c->wstate == TW_READY)
				continue;
			tcp_wire_peer_lost(t, c);
			tcp_conn_shut(t, c);
		}
		/* After the shutdown the kernel ends what it holds soon; a
		 * lane that serves the slot lets go of it (ep.h). */
		if (!kernel_done(c) || xpi_ep_lanes_release(t->ctx, p) != 0)
			continue;
		t->nclosing--;
		conn_free(t, c);
		xpi_ep_slot_released(t->ctx, p);
	}
}

void tcp_ep_fini(struct xpi_tcp *t)
{
	for (int i = 0; i < t->nlsns; i++)
		if (t->lsns[i] != NULL) {
			close(t->lsns[i]->fd);
			free(t->lsns[i]);
		}
	free(t->lsns);
	t->lsns = NULL;
	t->nlsns = 0;
}
