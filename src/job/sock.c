/* SPDX-License-Identifier: MIT */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../core/clock.h"
#include "sock.h"

int64_t xpi_deadline_in(int timeout_ms)
{
	if (timeout_ms < 0)
		return XPI_DEADLINE_NONE;
	return xpi_now_ns() + (int64_t)timeout_ms * 1000000;
}

int xpi_deadline_left_ms(int64_t deadline_ns)
{
	if (deadline_ns == XPI_DEADLINE_NONE)
		return -1;
	int64_t left = deadline_ns - xpi_now_ns();
	if (left <= 0)
		return 0;
	int64_t ms = (left + 999999) / 1000000;
	return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* The longest wait between two runs of the idle work (xpi_sock_poll). */
#define IDLE_TICK_MAX_MS 32

static _Thread_local void (*idle_fn)(void *arg);
static _Thread_local void *idle_arg;

void xpi_sock_set_idle(void (*fn)(void *arg), void *arg)
{
	idle_fn = fn;
	idle_arg = arg;
}

int xpi_sock_poll(struct pollfd *fds, unsigned long n, int ms)
{
	if (idle_fn == NULL || ms == 0)
		return poll(fds, (nfds_t)n, ms);
	int64_t end = xpi_now_ns() + (int64_t)ms * 1000000;
	/* The idle work runs after 1 ms, then at doubling intervals up to
	 * IDLE_TICK_MAX_MS: a rank waiting long (for a job's last ranks to
	 * come, on a host with more ranks than CPUs) would otherwise wake a
	 * thousand times a second, and 256 such ranks took the CPU the
	 * others needed to arrive (perf/scale.py: xp_init's CPU grew with
	 * the job's size). What the idle work answers (a peer's
	 * acknowledgements) tolerates that much delay. */
	int tick = 1;
	for (;;) {
		int k = poll(fds, (nfds_t)n, tick);
		if (k != 0)
			return k;
		idle_fn(idle_arg);
		if (xpi_now_ns() >= end)
			return 0;
		if (tick < IDLE_TICK_MAX_MS)
			tick *= 2;
	}
}

int xpi_sock_wait(int fd, short events, int64_t deadline_ns)
{
	struct pollfd p = { .fd = fd, .events = events };
	for (;;) {
		int ms = xpi_deadline_left_ms(deadline_ns);
		if (ms == 0)
			return -ETIMEDOUT;
		int n = xpi_sock_poll(&p, 1, ms);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return -errno;
		/* n == 0 or EINTR: the loop looks at the deadline again. */
	}
}

/* The one code for "the other side is gone". */
static int conn_error(int err)
{
	switch (err) {
	case EPIPE:
	case ECONNRESET:
	case ENOTCONN:
	case ECONNABORTED:
		return -ECONNRESET;
	default:
		return -err;
	}
}

int xpi_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline_ns)
{
	const char *p = buf;
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return conn_error(errno);
		int rc = xpi_sock_wait(fd, POLLOUT, deadline_ns);
		if (rc < 0)
			return rc;
	}
	return 0;
}

int xpi_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline_ns)
{
	char *p = buf;
	while (len > 0) {
		ssize_t n = recv(fd, p, len, MSG_DONTWAIT);
		if (n > 0) {
			p += n;
			len -= (size_t)n;
			continue;
		}
		if (n == 0)
			return -ECONNRESET; /* orderly shutdown before all bytes came */
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return conn_error(errno);
		int rc = xpi_sock_wait(fd, POLLIN, deadline_ns);
		if (rc < 0)
			return rc;
	}
	return 0;
}

static void set_nodelay(int fd)
{
	int one = 1;
	/* Control messages are small and answered at once: Nagle would hold
	 * each for a round trip. Failure only costs latency. */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int xpi_sock_connect(const struct sockaddr *sa, socklen_t salen, int64_t deadline_ns, int *fd)
{
	int s = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	int rc = 0;
	if (connect(s, sa, salen) < 0) {
		if (errno != EINPROGRESS && errno != EINTR) {
			rc = -errno;
			goto fail;
		}
		/* connect(2): wait for writability, then SO_ERROR says how it
		 * ended. */
		rc = xpi_sock_wait(s, POLLOUT, deadline_ns);
		if (rc < 0)
			goto fail;
		int err = 0;
		socklen_t elen = sizeof(err);
		if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &elen) < 0) {
			rc = -errno;
			goto fail;
		}
		if (err != 0) {
			rc = -err;
			goto fail;
		}
	}
	set_nodelay(s);
	*fd = s;
	return 0;
fail:
	close(s);
	return rc;
}

int xpi_sock_listen(const struct sockaddr *sa, socklen_t salen, int backlog, int *fd)
{
	int s = socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -errno;
	int one = 1;
	int rc;
	/* A restarted job can bind the port its predecessor's connections
	 * still hold in TIME_WAIT. */
	if (setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(s, sa, salen) < 0 || listen(s, backlog) < 0) {
		rc = -errno;
		close(s);
		return rc;
	}
	*fd = s;
	return 0;
}

int xpi_sock_accept(int lfd, int64_t deadline_ns, int *fd)
{
	for (;;) {
		int s = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (s >= 0) {
			set_nodelay(s);
			*fd = s;
			return 0;
		}
		switch (errno) {
		case EINTR:
		case ECONNABORTED: /* a client gave up while queued: next one */
			continue;
		case EAGAIN:
#if EWOULDBLOCK != EAGAIN
		case EWOULDBLOCK:
#endif
			break;
		default:
			return -errno;
		}
		int rc = xpi_sock_wait(lfd, POLLIN, deadline_ns);
		if (rc < 0)
			return rc;
	}
}

static int copy_str(char *dst, size_t cap, const char *src, size_t len)
{
	if (len >= cap)
		return -EINVAL;
	memcpy(dst, src, len);
	dst[len] = '\0';
	return 0;
}

int xpi_sock_split_hostport(const char *s, char *host, size_t hostcap, char *port, size_t portcap)
{
	const char *h, *colon;
	size_t hlen;
	if (s == NULL)
		return -EINVAL;
	if (s[0] == '[') {
		const char *rb = strchr(s, ']');
		if (rb == NULL || rb[1] != ':')
			return -EINVAL;
		h = s + 1;
		hlen = (size_t)(rb - h);
		colon = rb + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || memchr(s, ':', (size_t)(colon - s)) != NULL)
			return -EINVAL; /* no port, or an IPv6 address without [] */
		h = s;
		hlen = (size_t)(colon - s);
	}
	const char *p = colon + 1;
	size_t plen = strlen(p);
	if (hlen == 0 || plen == 0 || plen > 5 || strspn(p, "0123456789") != plen)
		return -EINVAL;
	unsigned long v = 0;
	for (size_t i = 0; i < plen; i++)
		v = v * 10 + (unsigned long)(p[i] - '0');
	if (v > 65535)
		return -EINVAL;
	if (copy_str(host, hostcap, h, hlen) < 0 || copy_str(port, portcap, p, plen) < 0)
		return -EINVAL;
	return 0;
}

int xpi_sock_resolve(const char *host, const char *port, struct sockaddr_storage *out,
		     socklen_t *len)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICSERV };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host, port, &hints, &res);
	switch (rc) {
	case 0:
		break;
	case EAI_AGAIN:
		return -EAGAIN;
	case EAI_MEMORY:
		return -ENOMEM;
	case EAI_SYSTEM:
		return errno != 0 ? -errno : -EINVAL;
	default:
		return -EINVAL;
	}
	if (res == NULL || res->ai_addrlen > sizeof(*out)) {
		freeaddrinfo(res);
		return -EINVAL;
	}
	memset(out, 0, sizeof(*out));
	memcpy(out, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

int xpi_sock_is_numeric_host(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;
	return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

void xpi_sock_addr_str(const struct sockaddr *sa, char *buf, size_t n)
{
	char ip[INET6_ADDRSTRLEN];
	if (n == 0)
		return;
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
		inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
		snprintf(buf, n, "%s:%u", ip, (unsigned)ntohs(a->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)sa;
		inet_ntop(AF_INET6, &a->sin6_addr, ip, sizeof(ip));
		if (a->sin6_scope_id != 0)
			snprintf(buf, n, "[%s%%%u]:%u", ip, (unsigned)a->sin6_scope_id,
				 (unsigned)ntohs(a->sin6_port));
		else
			snprintf(buf, n, "[%s]:%u", ip, (unsigned)ntohs(a->sin6_port));
	} else {
		snprintf(buf, n, "?");
	}
}

void xpi_sock_peer_str(int fd, char *buf, size_t n)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0) {
		snprintf(buf, n, "unknown peer");
		return;
	}
	xpi_sock_addr_str((const struct sockaddr *)&ss, buf, n);
}

int xpi_sock_addr_port(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	if (sa->sa_family == AF_INET6)
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	return 0;
}

/* 3: IPv4, 2: global IPv6, 1: link-local IPv6 (needs its scope id). */
static int addr_preference(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return 3;
	if (sa->sa_family == AF_INET6)
		return IN6_IS_ADDR_LINKLOCAL(&((const struct sockaddr_in6 *)sa)->sin6_addr) ? 1 : 2;
	return 0;
}

/* Adds @name to the list "a, b" in @names unless it is there already. */
static void add_name(char *names, size_t n, const char *name)
{
	size_t used = strlen(names);
	if (n == 0 || strstr(names, name) != NULL || used + 1 >= n)
		return;
	snprintf(names + used, n - used, "%s%s", used ? ", " : "", name);
}

/* Is @i an address xpi_sock_iface_addr may pick, and how good is it? */
static int iface_rank(const struct ifaddrs *i, const char *ifname)
{
	int pref = i->ifa_addr != NULL ? addr_preference(i->ifa_addr) : 0;
	if (pref == 0)
		return 0;
	if (ifname != NULL)
		return strcmp(i->ifa_name, ifname) == 0 ? pref : 0;
	/* Any interface: up, not a loopback, and no link-local address
	 * (others could not use it without knowing our scope). */
	if (!(i->ifa_flags & IFF_UP) || (i->ifa_flags & IFF_LOOPBACK) || pref == 1)
		return 0;
	return pref;
}

int xpi_sock_iface_addr(const char *ifname, struct sockaddr_storage *out, socklen_t *len,
			char *names, size_t n)
{
	struct ifaddrs *all, *best = NULL;
	if (getifaddrs(&all) < 0)
		return -errno;
	if (n > 0)
		names[0] = '\0';
	for (struct ifaddrs *i = all; i != NULL; i = i->ifa_next) {
		int r = iface_rank(i, ifname);
		if (r > 0 && (best == NULL || r > iface_rank(best, ifname)))
			best = i;
		else if (r == 0 && i->ifa_addr != NULL && addr_preference(i->ifa_addr) > 0)
			add_name(names, n, i->ifa_name); /* for the message */
	}
	int rc = -ENODEV;
	if (best != NULL) {
		socklen_t l = best->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in) :
								     sizeof(struct sockaddr_in6);
		memset(out, 0, sizeof(*out));
		memcpy(out, best->ifa_addr, l);
		if (out->ss_family == AF_INET)
			((struct sockaddr_in *)out)->sin_port = 0;
		else
			((struct sockaddr_in6 *)out)->sin6_port = 0;
		*len = l;
		rc = 0;
	}
	freeifaddrs(all);
	return rc;
}
