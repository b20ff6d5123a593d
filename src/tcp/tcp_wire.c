/* SPDX-License-Identifier: MIT */
/*
 * TCP connections made on demand ("wire-up"): a pair of ranks connects the
 * first time one of them sends to the other, not inside xp_init, so a rank
 * holds descriptors for the peers it talks to, not for the whole job (issue
 * 26: at 256 ranks every rank held 2 sockets per peer, and forming the job
 * grew as N squared).
 *
 * Everything runs inside the transport's progress, never blocking: the
 * listener (open for the job's life) and every connection being made are
 * watched by io_uring polls, so a sleeping waiter wakes for them as for any
 * completion, and each step is a non-blocking connect, a step of the
 * job-key handshake (auth.h, struct xpi_auth_hs) or a one-byte read.
 *
 * A pair is two connections, control then bulk (tcp.h), both made by the
 * same side. Whoever needs the pair first connects its control channel;
 * after the handshake the accepting side answers one byte, 'Y' (taken) or
 * 'N' (refused). Both ranks may start at once (each sends to the other
 * first); the acceptor then decides by rank, so that both keep the same
 * pair: the connection of the lower rank wins. In detail, a control
 * connection from peer q is taken if we have nothing with q, or if we are
 * connecting to q ourselves, q is the lower rank and q has not taken ours
 * yet (we then drop our own attempt); otherwise refused. q, for its part,
 * refuses ours by the same rule, or took it already, in which case we
 * never had to decide. A side refused by the rule waits for the other's
 * connection. The bulk connection follows the control one it belongs to,
 * and the pair serves messages once both are made.
 *
 * Strangers: an accepted connection has HANDSHAKE_MS to prove the job key,
 * all of them at once, and at most a bounded number are half-open (the
 * oldest is dropped beyond), as in the bootstrap (acceptor.h). A rank whose
 * connection was dropped before its handshake ended connects again until
 * its own deadline: the context's timeout from its first need of the pair.
 *
 * Failures: a connection refused by the peer's host (its listener gone with
 * its process), or a pair not made within the timeout, fails the peer as a
 * broken connection would, naming the address; the sends waiting for the
 * pair fail with it. A peer reached for the first time after it died thus
 * fails the send at once on one host (refused), or after the timeout
 * across hosts (no answer); a rank that only receives from a dead peer it
 * never talked to learns of it from its receive's deadline.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/clock.h"
#include "../core/log.h"
#include "../job/sock.h"
#include "../core/ep.h"
#include "tcp.h"

/* What an accepted connection has to prove the job key in. */
#define HANDSHAKE_MS 3000
/* Half-open accepted connections beyond those of the peers: a flood of
 * strangers costs at most this many descriptors. */
#define PENDING_SLACK 64
/* Refusals of strangers logged as warnings before the rest go to debug. */
#define WARN_REFUSALS 4
/* Connections accepted per listener wake-up before the others get a turn. */
#define ACCEPT_BURST 64

#define VERDICT_YES 'Y'
#define VERDICT_NO 'N'

enum wire_phase { WP_CONNECT, WP_HANDSHAKE, WP_VERDICT };

/* One connection being made, in either direction. */
struct tcp_wire {
	uint32_t gen; /* 0: the slot is free; else tags its polls (and its age) */
	int fd;
	int peer; /* -1 on an accepted one until its handshake proves a rank */
	int lsn;  /* accepted: -1 through the job's listener, else an endpoints' */
	uint8_t ch;
	bool out; /* we connected */
	uint8_t phase;
	int64_t deadline;
	struct xpi_auth_hs hs;
};

static int64_t now_ns(void)
{
	return xpi_now_ns();
}

static const char *errtext(int rc)
{
	const char *s = strerrordesc_np(rc < 0 ? -rc : rc);
	return s != NULL ? s : "unknown error";
}

static bool transient(const struct tcp_conn *c)
{
	return c->wstate == TW_OUT || c->wstate == TW_IN || c->wstate == TW_WAIT_IN;
}

/* --- the deadline timer ------------------------------------------------- */

/* Arms the timer for the earliest deadline of a wire or a pair being made,
 * or cancels it when nothing is being made. */
static void rearm_timer(struct xpi_tcp *t)
{
	int64_t next = INT64_MAX;
	for (int i = 0; i < t->nwires; i++)
		if (t->wires[i].gen != 0 && t->wires[i].deadline < next)
			next = t->wires[i].deadline;
	for (int p = 0; t->ntransient != 0 && p < t->nconn; p++)
		if (t->conns[p] != NULL && transient(t->conns[p]) && t->conns[p]->w_deadline < next)
			next = t->conns[p]->w_deadline;
	if (next == INT64_MAX)
		xpi_timer_cancel(t->ctx, &t->wire_timer);
	else if (xpi_timer_arm(t->ctx, &t->wire_timer, next) < 0)
		xpi_log(XPI_LOG_WARN, "rank %d: no memory for a connection's deadline",
			t->ctx->rank);
}

/* Makes sure the timer fires no later than @deadline. */
static void timer_at(struct xpi_tcp *t, int64_t deadline)
{
	if (t->wire_timer.heap_pos == 0 || deadline < t->wire_timer.deadline_ns)
		(void)xpi_timer_arm(t->ctx, &t->wire_timer, deadline);
}

static void set_state(struct xpi_tcp *t, struct tcp_conn *c, uint8_t s)
{
	t->ntransient += (int)transient(&(struct tcp_conn){ .wstate = s }) - (int)transient(c);
	c->wstate = s;
}

/* --- wire slots ------------------------------------------------------------ */

static struct tcp_wire *wire_new(struct xpi_tcp *t, int *index)
{
	for (int i = 0; i < t->nwires; i++)
		if (t->wires[i].gen == 0) {
			*index = i;
			return &t->wires[i];
		}
	if (t->nwires == t->wires_cap) {
		int cap = t->wires_cap != 0 ? 2 * t->wires_cap : 16;
		if (cap > 0xffffff)
			return NULL; /* the index must fit the poll's user_data */
		struct tcp_wire *w = realloc(t->wires, (size_t)cap * sizeof(*w));
		if (w == NULL)
			return NULL;
		t->wires = w;
		t->wires_cap = cap;
	}
	*index = t->nwires++;
	return &t->wires[*index];
}

/* Frees slot @i without touching its descriptor (handed on or closed). */
static void wire_free(struct xpi_tcp *t, int i)
{
	if (!t->wires[i].out)
		t->nhalf_open--;
	t->wires[i].gen = 0;
	while (t->nwires > 0 && t->wires[t->nwires - 1].gen == 0)
		t->nwires--;
}

/* Closes slot @i's connection. The shutdown ends a poll armed on it now
 * (the ring holds the file until its poll completes, and the peer would
 * not see the close before). */
static void wire_close(struct xpi_tcp *t, int i)
{
	shutdown(t->wires[i].fd, SHUT_RDWR);
	close(t->wires[i].fd);
	wire_free(t, i);
}

static void wire_poll(struct xpi_tcp *t, int i, short events)
{
	struct tcp_wire *w = &t->wires[i];
	struct io_uring_sqe *sqe = tcp_sqe(t);
	if (sqe == NULL) {
		xpi_log(XPI_LOG_WARN, "rank %d: io_uring has no room to watch a connection",
			t->ctx->rank);
		return; /* its deadline ends it */
	}
	io_uring_prep_poll_add(sqe, w->fd, (unsigned)events);
	io_uring_sqe_set_data64(sqe,
				(uint64_t)TCP_OP_WIRE << 56 | (uint64_t)(uint32_t)i << 32 | w->gen);
}

void tcp_wire_arm_listener(struct xpi_tcp *t)
{
	struct io_uring_sqe *sqe = tcp_sqe(t);
	if (sqe == NULL)
		return;
	io_uring_prep_poll_multishot(sqe, t->listen_fd, POLLIN);
	io_uring_sqe_set_data64(sqe, (uint64_t)TCP_OP_LISTEN << 56);
	t->listen_armed = true;
}

/* --- the pair's outcome ------------------------------------------------- */

/* Gives up the connections being made for @c's peer. */
static void drop_attempts(struct xpi_tcp *t, struct tcp_conn *c)
{
	for (int i = 0; i < t->nwires; i++)
		if (t->wires[i].gen != 0 && t->wires[i].peer == c->peer)
			wire_close(t, i);
	if (c->w_ctl >= 0)
		close(c->w_ctl);
	if (c->w_bulk >= 0)
		close(c->w_bulk);
	c->w_ctl = c->w_bulk = -1;
}

/* The pair with @c's peer cannot be made: the peer is lost, as if its
 * connection had broken. */
static void pair_failed(struct xpi_tcp *t, struct tcp_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void pair_failed(struct xpi_tcp *t, struct tcp_conn *c, int err, const char *fmt, ...)
{
	char why[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	drop_attempts(t, c);
	set_state(t, c, TW_IDLE);
	if (c->ep != NULL && c->ep->err == 0)
		c->ep->err = err;
	/* A peer whose host refuses it is gone (its listener lives as long
	 * as its process): lost, as a broken connection says it. */
	tcp_conn_fail(c, err == -ECONNREFUSED ? -ECONNRESET : err, why);
}

/* Both connections of @c's pair are made: it serves messages from now on. */
static void pair_ready(struct xpi_tcp *t, struct tcp_conn *c)
{
	c->fd_ctl = c->w_ctl;
	c->fd_bulk = c->w_bulk;
	c->w_ctl = c->w_bulk = -1;
	set_state(t, c, TW_READY);
	int rc = tcp_conn_ready(t, c);
	if (rc < 0) {
		tcp_conn_fail(c, rc, "no memory for its connection's buffers");
		return;
	}
	t->linked[t->nlinked++] = c->peer;
	if (c->ep != NULL && c->ep->lsn >= 0) {
		struct tcp_ep_listener *l = t->lsns[c->ep->lsn];
		c->ep->lsn = -1;
		if (l == NULL || xpi_ep_accepted(l->pub, c->peer) < 0) {
			/* Closed meanwhile, or no room: nobody will take it. */
			t->ctx->ep_state[c->peer - t->ctx->size] = XPI_SLOT_CLOSING;
			xpi_engine_peer_closed(t->ctx, c->peer);
			tcp_ep_close_inside(t, c->peer);
			return;
		}
	}
	if (c->ep != NULL)
		xpi_ep_pair_made(t->ctx, c->peer); /* its lanes offered */
	if (xpi_debug_on("transport"))
		xpi_log(XPI_LOG_INFO, "rank %d: tcp to rank %d connected, %.3f ms after first need",
			t->ctx->rank, c->peer, (double)(now_ns() - c->w_started) / 1e6);
}

/* --- connecting ----------------------------------------------------------- */

static int peer_addr(struct xpi_tcp *t, int peer, struct sockaddr_storage *ss, socklen_t *len)
{
	const struct tcp_conn *c = tcp_conn_at(t, peer);
	if (c != NULL && c->ep != NULL) {
		*ss = c->ep->addr;
		*len = c->ep->addrlen;
		return 0;
	}
	return tcp_card_parse(t->cards + (size_t)peer * XPI_TCP_CARD_LEN, ss, len);
}

/* Starts connecting channel @ch to @c's peer. 0, or a negative code with
 * the pair failed. */
static int connect_start(struct xpi_tcp *t, struct tcp_conn *c, uint8_t ch)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char where[XPI_SOCK_ADDRSTRLEN];
	if (peer_addr(t, c->peer, &ss, &len) < 0) {
		pair_failed(t, c, -EPROTO, "published a malformed address card");
		return -EPROTO;
	}
	xpi_sock_addr_str((const struct sockaddr *)&ss, where, sizeof(where));
	int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		int rc = -errno;
		pair_failed(t, c, rc, "cannot be connected to at %s: socket: %s", where,
			    errtext(rc));
		return rc;
	}
	int one = 1;
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (const struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		int rc = -errno;
		close(fd);
		pair_failed(t, c, rc, "cannot be connected to at %s: %s", where, errtext(rc));
		return rc;
	}
	int i;
	struct tcp_wire *w = wire_new(t, &i);
	if (w == NULL) {
		close(fd);
		pair_failed(t, c, -ENOMEM, "cannot be connected to: no memory");
		return -ENOMEM;
	}
	*w = (struct tcp_wire){ .gen = ++t->wire_gen != 0 ? t->wire_gen : ++t->wire_gen,
				.fd = fd,
				.peer = c->peer,
				.lsn = -1,
				.ch = ch,
				.out = true,
				.phase = WP_CONNECT,
				.deadline = c->w_deadline };
	wire_poll(t, i, POLLOUT);
	return 0;
}

int tcp_wire_need(struct xpi_tcp *t, struct tcp_conn *c)
{
	if (c->dead)
		return -ECONNRESET;
	if (c->wstate != TW_IDLE)
		return -EAGAIN; /* being made: the engine retries the send */
	c->w_started = now_ns();
	c->w_deadline = c->w_started + (int64_t)t->ctx->cfg.timeout_ms * 1000000;
	set_state(t, c, TW_OUT);
	int rc = connect_start(t, c, CH_CTL);
	if (rc < 0)
		return rc;
	timer_at(t, c->w_deadline);
	io_uring_submit(&t->ring);
	return -EAGAIN;
}

/* Our connection @i was taken ('Y'). */
static void out_taken(struct xpi_tcp *t, int i)
{
	struct tcp_wire *w = &t->wires[i];
	struct tcp_conn *c = t->conns[w->peer]; /* made: we connect for it */
	int fd = w->fd;
	uint8_t ch = w->ch;
	wire_free(t, i);
	if (ch == CH_CTL) {
		c->w_ctl = fd;
		(void)connect_start(t, c, CH_BULK);
	} else {
		c->w_bulk = fd;
		pair_ready(t, c);
	}
}

/* Our connection @i failed with @rc before it was taken. A reset before
 * the verdict is the peer dropping a half-open connection (or its answer
 * to a stranger-looking one): connect again while the deadline allows. */
static void out_failed(struct xpi_tcp *t, int i, int rc, const char *step)
{
	struct tcp_wire *w = &t->wires[i];
	struct tcp_conn *c = t->conns[w->peer]; /* made: we connect for it */
	uint8_t ch = w->ch;
	struct sockaddr_storage ss;
	socklen_t len;
	char where[XPI_SOCK_ADDRSTRLEN] = "?";
	if (peer_addr(t, w->peer, &ss, &len) == 0)
		xpi_sock_addr_str((const struct sockaddr *)&ss, where, sizeof(where));
	wire_close(t, i);
	bool again = (rc == -ECONNRESET || rc == -EPIPE) && now_ns() < c->w_deadline;
	if (again) {
		(void)connect_start(t, c, ch);
		return;
	}
	if (rc == -ETIMEDOUT)
		pair_failed(t, c, -ETIMEDOUT,
			    "could not be connected to at %s within %d ms (%s): is it still "
			    "running, and does it make progress?",
			    where, t->ctx->cfg.timeout_ms, step);
	else
		pair_failed(t, c, rc, "cannot be connected to at %s (%s): %s", where, step,
			    errtext(rc));
}

/* --- accepting ------------------------------------------------------------ */

static void refuse_in(struct xpi_tcp *t, int i, int rc)
{
	struct tcp_wire *w = &t->wires[i];
	/* A failed key proof or a foreign job is worth a warning; a close or
	 * a timeout is also what a rank whose own connection won does. */
	bool stranger = rc == -EACCES || rc == -EPROTO;
	t->refused++;
	bool loud = stranger && t->refused <= WARN_REFUSALS;
	if (loud || xpi_debug_on("transport"))
		xpi_log(loud ? XPI_LOG_WARN : XPI_LOG_DEBUG,
			"rank %d: tcp refused the connection from %s: %s%s", t->ctx->rank,
			w->hs.peer,
			rc == -EACCES && w->lsn >= 0 ?
				"it does not know this endpoint listener's secret (or job key)" :
			rc == -EACCES ? "wrong job key, or a rank of another job" :
			rc == -EPROTO ? "not an xport rank of this job (malformed hello)" :
					errtext(rc),
			loud && t->refused == WARN_REFUSALS ?
				" (further refusals: XP_DEBUG=transport)" :
				"");
	wire_close(t, i);
}

/* Answers accepted connection @i with @verdict. False if it could not. */
static bool answer(struct tcp_wire *w, uint8_t verdict)
{
	return send(w->fd, &verdict, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1;
}

/* Accepted connection @i, answered 'Y', becomes channel @ch of @c's pair. */
static void take_wire(struct xpi_tcp *t, int i, struct tcp_conn *c, uint8_t ch)
{
	int fd = t->wires[i].fd;
	t->wires[i].peer = c->peer;
	wire_free(t, i);
	if (ch == CH_CTL) {
		if (c->wstate == TW_IDLE)
			c->w_started = now_ns();
		c->w_ctl = fd;
		/* Its bulk connection follows at once; a peer that never
		 * sends it leaves the pair unmade (w_deadline). */
		c->w_deadline = now_ns() + (int64_t)t->ctx->cfg.timeout_ms * 1000000;
		set_state(t, c, TW_IN);
		timer_at(t, c->w_deadline);
	} else {
		c->w_bulk = fd;
		pair_ready(t, c);
	}
}

/* Accepted connection @i proved rank w->peer: take it or refuse it. */
static void decide(struct xpi_tcp *t, int i)
{
	struct tcp_wire *w = &t->wires[i];
	int q = w->hs.peer_rank;
	uint8_t ch = w->hs.data[0];
	/* A member proved itself: its pair's state is made now if this is
	 * the first we hear of it. */
	struct tcp_conn *c = q < t->nconn && t->want[q] ? tcp_conn_get(t, q) : NULL;
	bool take = false;
	if (c != NULL && t->want[q] && !c->dead) {
		if (ch == CH_CTL)
			take = c->wstate == TW_IDLE || c->wstate == TW_WAIT_IN ||
			       (c->wstate == TW_OUT && c->w_ctl < 0 && q < t->ctx->rank);
		else if (ch == CH_BULK)
			take = c->wstate == TW_IN && c->w_bulk < 0;
	}
	if (!take) {
		if (xpi_debug_on("transport"))
			xpi_log(XPI_LOG_DEBUG, "rank %d: tcp refused channel %u from rank %d: %s",
				t->ctx->rank, (unsigned)ch, q,
				c == NULL || !t->want[q] ? "not a tcp peer" :
				c->dead                  ? "lost already" :
							   "its pair is made from this side");
		(void)answer(w, VERDICT_NO);
		wire_close(t, i);
		return;
	}
	if (!answer(w, VERDICT_YES)) {
		wire_close(t, i); /* gone meanwhile: it connects again or fails */
		return;
	}
	if (ch == CH_CTL && c->wstate == TW_OUT)
		drop_attempts(t, c); /* the lower rank's connection wins */
	take_wire(t, i, c, ch);
}

/* The endpoint's pair @id of listener @lsn whose control connection was
 * taken and whose bulk one has not come yet, or NULL. */
static struct tcp_conn *ep_pair_of(struct xpi_tcp *t, int lsn, const uint8_t *id)
{
	for (int p = t->ctx->size; p < t->nconn; p++) {
		struct tcp_conn *c = t->conns[p];
		if (c != NULL && c->ep != NULL && c->ep->lsn == lsn && c->wstate == TW_IN &&
		    c->w_bulk < 0 && memcmp(c->ep->id, id, sizeof(c->ep->id)) == 0)
			return c;
	}
	return NULL;
}

/* Accepted connection @i proved it knows listener w->lsn's secret: its
 * control connection takes an endpoint slot, its bulk one joins it. */
static void decide_ep(struct xpi_tcp *t, int i)
{
	struct tcp_wire *w = &t->wires[i];
	uint8_t ch = w->hs.data[0];
	const uint8_t *id = w->hs.data + 1;
	struct tcp_conn *c = NULL;
	if (ch == CH_CTL && ep_pair_of(t, w->lsn, id) == NULL) {
		/* The endpoint's part first: a slot whose pair state exists
		 * is one the transport must close, not merely give back. */
		struct tcp_ep *ep = calloc(1, sizeof(*ep));
		int slot = ep != NULL ? xpi_ep_slot_take(t->ctx, w->hs.peer) : -ENOMEM;
		c = slot >= 0 ? tcp_conn_get(t, slot) : NULL;
		if (c != NULL) {
			memcpy(ep->id, id, sizeof(ep->id));
			ep->lsn = w->lsn;
			c->ep = ep;
			t->want[slot] = 1;
		} else if (slot >= 0) {
			xpi_ep_slot_released(t->ctx, slot); /* no memory for its state */
		}
		if (c == NULL)
			free(ep);
		if (slot == -EMFILE) {
			xpi_log(XPI_LOG_WARN,
				"rank %d: tcp refused an endpoint's connection from %s: all %d "
				"endpoints are open (XP_EP_MAX)",
				t->ctx->rank, w->hs.peer, t->ctx->npeers - t->ctx->size);
		}
	} else if (ch == CH_BULK) {
		c = ep_pair_of(t, w->lsn, id);
	}
	if (c == NULL || !answer(w, VERDICT_YES)) {
		if (c != NULL && ch == CH_CTL) { /* gone meanwhile: give the slot back */
			set_state(t, c, TW_IDLE);
			c->dead = true;
			t->ctx->ep_state[c->peer - t->ctx->size] = XPI_SLOT_CLOSING;
			tcp_ep_close_inside(t, c->peer);
		}
		if (c == NULL)
			(void)answer(w, VERDICT_NO);
		wire_close(t, i);
		return;
	}
	take_wire(t, i, c, ch);
}

void tcp_wire_drop_listener(struct xpi_tcp *t, int lsn)
{
	for (int i = 0; i < t->nwires; i++)
		if (t->wires[i].gen != 0 && !t->wires[i].out && t->wires[i].lsn == lsn)
			wire_close(t, i);
}

void tcp_wire_accept(struct xpi_tcp *t, int lfd, int lsn)
{
	for (int k = 0; k < ACCEPT_BURST; k++) {
		int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				xpi_log(XPI_LOG_WARN, "rank %d: tcp cannot accept: %s",
					t->ctx->rank, errtext(-errno));
			return;
		}
		int one = 1;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (t->nhalf_open >= t->max_half_open) {
			int oldest = -1;
			for (int i = 0; i < t->nwires; i++)
				if (t->wires[i].gen != 0 && !t->wires[i].out &&
				    (oldest < 0 || t->wires[i].gen < t->wires[oldest].gen))
					oldest = i;
			if (oldest >= 0)
				refuse_in(t, oldest, -EBUSY);
		}
		int i;
		struct tcp_wire *w = wire_new(t, &i);
		if (w == NULL) {
			close(fd);
			return;
		}
		*w = (struct tcp_wire){ .gen = ++t->wire_gen != 0 ? t->wire_gen : ++t->wire_gen,
					.fd = fd,
					.peer = -1,
					.lsn = lsn,
					.out = false,
					.phase = WP_HANDSHAKE };
		t->nhalf_open++;
		/* A rank proves the job key and sends its channel; an
		 * endpoint proves the listener's key, and sends its channel
		 * and its pair's id. */
		struct xpi_auth_args a = lsn < 0 ? t->auth : t->lsns[lsn]->auth;
		a.recv_len = lsn < 0 ? 1 : 1 + sizeof(((struct tcp_ep *)0)->id);
		if (xpi_auth_hs_start(&w->hs, fd, &a, HANDSHAKE_MS) < 0) {
			wire_close(t, i);
			return;
		}
		w->deadline = w->hs.deadline;
		timer_at(t, w->deadline);
		tcp_wire_step(t, i);
	}
}

void tcp_wire_listen_cqe(struct xpi_tcp *t, int res, unsigned flags)
{
	if (!(flags & IORING_CQE_F_MORE))
		t->listen_armed = false;
	if (res >= 0 && t->listen_fd >= 0)
		tcp_wire_accept(t, t->listen_fd, -1);
	if (!t->listen_armed && t->listen_fd >= 0)
		tcp_wire_arm_listener(t);
}

/* --- stepping --------------------------------------------------------------- */

void tcp_wire_step(struct xpi_tcp *t, int i)
{
	struct tcp_wire *w = &t->wires[i];
	if (w->phase == WP_CONNECT) {
		int err = 0;
		socklen_t len = sizeof(err);
		if (getsockopt(w->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err != 0) {
			out_failed(t, i, -err, "connecting");
			return;
		}
		/* A rank sends its channel; an endpoint the channel and the
		 * pair's id, under the endpoint's key. */
		const struct tcp_conn *c = t->conns[w->peer];
		uint8_t hello[1 + sizeof(c->ep->id)] = { w->ch };
		struct xpi_auth_args a = c->ep != NULL ? c->ep->auth : t->auth;
		a.send = hello;
		a.send_len = 1;
		if (c->ep != NULL) {
			memcpy(hello + 1, c->ep->id, sizeof(c->ep->id));
			a.send_len = sizeof(hello);
		}
		int left = xpi_deadline_left_ms(w->deadline);
		int rc = xpi_auth_hs_start(&w->hs, w->fd, &a, left > 0 ? left : 1);
		if (rc < 0) {
			out_failed(t, i, rc, "starting the handshake");
			return;
		}
		w->phase = WP_HANDSHAKE;
	}
	if (w->phase == WP_HANDSHAKE) {
		int rc = xpi_auth_hs_step(&w->hs);
		if (rc == 0) {
			wire_poll(t, i, w->hs.events);
			return;
		}
		if (rc < 0) {
			if (w->out)
				out_failed(t, i, rc, "authenticating");
			else
				refuse_in(t, i, rc);
			return;
		}
		if (!w->out) {
			if (w->lsn >= 0)
				decide_ep(t, i);
			else
				decide(t, i);
			return;
		}
		/* An endpoint's listener proves itself as rank 0 of 2. */
		if (w->hs.peer_rank != (t->conns[w->peer]->ep != NULL ? 0 : w->peer)) {
			out_failed(t, i, -EPROTO, "another rank answered at its address");
			return;
		}
		w->phase = WP_VERDICT;
	}
	uint8_t v;
	ssize_t n = recv(w->fd, &v, 1, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		if (now_ns() >= w->deadline)
			out_failed(t, i, -ETIMEDOUT, "waiting for its answer");
		else
			wire_poll(t, i, POLLIN);
		return;
	}
	if (n == 1 && v == VERDICT_YES) {
		out_taken(t, i);
		return;
	}
	if (n == 1 && v == VERDICT_NO) {
		/* The peer is making the pair itself (it is the lower rank and
		 * connecting too): wait for its connection. */
		struct tcp_conn *c = t->conns[w->peer];
		wire_close(t, i);
		if (c->ep != NULL)
			pair_failed(t, c, -ECONNREFUSED,
				    "refused the connection (its listener closed, or it has no "
				    "endpoint left)");
		else if (c->w_ctl < 0 && c->wstate == TW_OUT)
			set_state(t, c, TW_WAIT_IN);
		else
			pair_failed(t, c, -EPROTO, "refused the second connection of its pair");
		return;
	}
	out_failed(t, i, n == 0 ? -ECONNRESET : -errno, "waiting for its answer");
}

void tcp_wire_cqe(struct xpi_tcp *t, uint64_t user_data)
{
	int i = (int)(uint32_t)(user_data >> 32 & 0xffffff);
	uint32_t gen = (uint32_t)user_data;
	if (i < t->nwires && t->wires[i].gen == gen)
		tcp_wire_step(t, i);
}

void tcp_wire_timer_fire(struct xp_context *ctx, struct xpi_timer *timer)
{
	(void)ctx;
	struct xpi_tcp *t = xpi_container_of(timer, struct xpi_tcp, wire_timer);
	int64_t now = now_ns();
	for (int i = 0; i < t->nwires; i++) {
		struct tcp_wire *w = &t->wires[i];
		if (w->gen == 0 || w->deadline > now)
			continue;
		if (w->out)
			out_failed(t, i, -ETIMEDOUT,
				   w->phase == WP_CONNECT ? "connecting" : "authenticating");
		else
			refuse_in(t, i, -ETIMEDOUT);
	}
	for (int p = 0; t->ntransient != 0 && p < t->nconn; p++) {
		struct tcp_conn *c = t->conns[p];
		if (c == NULL || !transient(c) || c->w_deadline > now)
			continue;
		if (c->wstate == TW_IN && c->ep != NULL) {
			/* An endpoint's: nobody has it yet, and nobody will. */
			pair_failed(t, c, -ETIMEDOUT, "did not complete its connection");
			t->ctx->ep_state[c->peer - t->ctx->size] = XPI_SLOT_CLOSING;
			tcp_ep_close_inside(t, c->peer);
		} else if (c->wstate == TW_IN) {
			/* Its control connection came, its bulk one never did:
			 * start over on the next need. */
			drop_attempts(t, c);
			set_state(t, c, TW_IDLE);
		} else if (c->wstate == TW_WAIT_IN) {
			pair_failed(t, c, -ETIMEDOUT,
				    "refused our connection and did not make its own within %d ms",
				    t->ctx->cfg.timeout_ms);
		}
	}
	rearm_timer(t);
}

void tcp_wire_peer_lost(struct xpi_tcp *t, struct tcp_conn *c)
{
	drop_attempts(t, c);
	if (transient(c))
		set_state(t, c, TW_IDLE);
}

void tcp_wire_fini(struct xpi_tcp *t)
{
	xpi_timer_cancel(t->ctx, &t->wire_timer);
	for (int i = 0; i < t->nwires; i++)
		if (t->wires[i].gen != 0)
			close(t->wires[i].fd);
	free(t->wires);
	t->wires = NULL;
	t->nwires = 0;
	for (int p = 0; t->conns != NULL && p < t->nconn; p++) {
		if (t->conns[p] != NULL && t->conns[p]->w_ctl >= 0)
			close(t->conns[p]->w_ctl);
		if (t->conns[p] != NULL && t->conns[p]->w_bulk >= 0)
			close(t->conns[p]->w_bulk);
	}
}
