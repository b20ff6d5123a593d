/* SPDX-License-Identifier: MIT */
/* Concurrent authenticated accepting; see acceptor.h. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acceptor.h"
#include "../core/engine.h"
#include "../core/log.h"
#include "sock.h"

/* Refusals logged at warning level before the rest go to the debug log:
 * a flood of strangers must not flood the log too. */
#define WARN_REFUSALS 4
/* Connections accepted per wake-up before the pending ones get a turn. */
#define ACCEPT_BURST 64

struct xpi_acceptor {
	struct xpi_acceptor_opts o;
	/* Pending handshakes, oldest first. */
	struct xpi_auth_hs *hs;
	int n;
	struct pollfd *pfds; /* the listener, then one per pending handshake */
	unsigned long refused;
};

int xpi_acceptor_create(const struct xpi_acceptor_opts *o, struct xpi_acceptor **out)
{
	if (o == NULL || out == NULL || o->lfd < 0 || o->max_pending < 1 || o->handshake_ms < 1)
		return -EINVAL;
	struct xpi_acceptor *a = calloc(1, sizeof(*a));
	if (a == NULL)
		return -ENOMEM;
	a->o = *o;
	a->hs = calloc((size_t)o->max_pending, sizeof(*a->hs));
	a->pfds = calloc((size_t)o->max_pending + 1, sizeof(*a->pfds));
	if (a->hs == NULL || a->pfds == NULL) {
		xpi_acceptor_destroy(a);
		return -ENOMEM;
	}
	*out = a;
	return 0;
}

unsigned long xpi_acceptor_refused(const struct xpi_acceptor *a)
{
	return a->refused;
}

static const char *errtext(int rc)
{
	const char *s = strerrordesc_np(rc < 0 ? -rc : rc);
	return s != NULL ? s : "unknown error";
}

/* Takes pending handshake @i out of the list, keeping the order. */
static void remove_at(struct xpi_acceptor *a, int i)
{
	memmove(&a->hs[i], &a->hs[i + 1], (size_t)(a->n - i - 1) * sizeof(*a->hs));
	a->n--;
}

/* Closes pending connection @i, which failed with @rc (@why for the log). */
static void refuse(struct xpi_acceptor *a, int i, int rc, const char *why)
{
	struct xpi_auth_hs *h = &a->hs[i];
	a->refused++;
	bool loud = a->refused <= WARN_REFUSALS;
	if (loud || xpi_debug_on("transport"))
		xpi_log(loud ? XPI_LOG_WARN : XPI_LOG_DEBUG,
			"%s: refused the connection from %s: %s%s", a->o.who, h->peer,
			why != NULL ? why :
				      (rc == -EACCES ? "wrong job key, or a rank of another job" :
						       errtext(rc)),
			a->refused == WARN_REFUSALS ? " (further refusals: XP_DEBUG=transport)" :
						      "");
	close(h->fd);
	remove_at(a, i);
}

/* Accepts what the listener has queued, starting a handshake for each.
 * Returns how many it accepted (the newest entries of the list, as drops
 * take the oldest), or a negative errno. */
static int accept_burst(struct xpi_acceptor *a)
{
	int k;
	for (k = 0; k < ACCEPT_BURST; k++) {
		int fd = accept4(a->o.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EINTR || errno == ECONNABORTED)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			return -errno;
		}
		/* Control messages are small and answered at once (as
		 * xpi_sock_accept does): Nagle would hold each for a round trip. */
		int one = 1;
		(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		if (a->n == a->o.max_pending)
			refuse(a, 0, -EBUSY,
			       "too many connections still authenticating; "
			       "this was the oldest");
		struct xpi_auth_hs *h = &a->hs[a->n];
		int rc = xpi_auth_hs_start(h, fd, &a->o.auth, a->o.handshake_ms);
		if (rc < 0) {
			close(fd);
			return rc; /* -EIO or getrandom: nothing later would do better */
		}
		a->n++;
	}
	return k;
}

/* Drops the pending connections whose deadline has passed. */
static void expire(struct xpi_acceptor *a)
{
	for (int i = 0; i < a->n;) {
		if (xpi_deadline_left_ms(a->hs[i].deadline) == 0)
			refuse(a, i, -ETIMEDOUT, "it did not finish authenticating in time");
		else
			i++;
	}
}

/* Advances pending handshake @i. Returns 1 if it is done (still in the
 * list), 0 if it waits, or -1 if it failed and was closed. */
static int advance(struct xpi_acceptor *a, int i)
{
	int rc = xpi_auth_hs_step(&a->hs[i]);
	if (rc < 0) {
		refuse(a, i, rc, NULL);
		return -1;
	}
	return rc;
}

/* Hands out pending handshake @i, which is done. */
static int hand_out(struct xpi_acceptor *a, int i, int *fd, int *peer, uint8_t *data)
{
	struct xpi_auth_hs *h = &a->hs[i];
	*fd = h->fd;
	*peer = h->peer_rank;
	if (a->o.auth.recv_len > 0 && data != NULL)
		memcpy(data, h->data, a->o.auth.recv_len);
	remove_at(a, i);
	return 0;
}

/* Milliseconds to sleep: until @deadline or the earliest pending one. */
static int wait_ms(const struct xpi_acceptor *a, int64_t deadline)
{
	int ms = xpi_deadline_left_ms(deadline);
	for (int i = 0; i < a->n; i++) {
		int left = xpi_deadline_left_ms(a->hs[i].deadline);
		if (ms < 0 || left < ms)
			ms = left;
	}
	return ms;
}

int xpi_acceptor_next(struct xpi_acceptor *a, int64_t deadline, int *fd, int *peer, uint8_t *data)
{
	for (;;) {
		expire(a);
		/* A handshake may have become ready in an earlier call's round
		 * without being handed out: poll says so again (level). */
		a->pfds[0] = (struct pollfd){ .fd = a->o.lfd, .events = POLLIN };
		for (int i = 0; i < a->n; i++)
			a->pfds[i + 1] =
				(struct pollfd){ .fd = a->hs[i].fd, .events = a->hs[i].events };
		int ms = wait_ms(a, deadline);
		if (xpi_deadline_left_ms(deadline) == 0)
			return -ETIMEDOUT;
		int k = xpi_sock_poll(a->pfds, (unsigned long)a->n + 1, ms);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		/* Pending ones first (in the order polled: indices shift only
		 * behind a removal, which the walk accounts for), then new ones. */
		int npolled = a->n;
		for (int j = 0, i = 0; j < npolled; j++) {
			if (a->pfds[j + 1].revents == 0) {
				i++;
				continue;
			}
			int rc = advance(a, i);
			if (rc == 1)
				return hand_out(a, i, fd, peer, data);
			if (rc == 0)
				i++;
		}
		if (a->pfds[0].revents != 0) {
			int rc = accept_burst(a);
			if (rc < 0)
				return rc;
			/* The peer usually sent its hello with its connect: a
			 * new handshake may advance at once. */
			for (int i = a->n - (rc < a->n ? rc : a->n); i < a->n;) {
				rc = advance(a, i);
				if (rc == 1)
					return hand_out(a, i, fd, peer, data);
				if (rc == 0)
					i++;
			}
		}
	}
}

void xpi_acceptor_destroy(struct xpi_acceptor *a)
{
	if (a == NULL)
		return;
	for (int i = 0; i < a->n; i++)
		close(a->hs[i].fd);
	free(a->hs);
	free(a->pfds);
	free(a);
}
