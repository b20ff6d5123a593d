/* SPDX-License-Identifier: MIT */
/*
 * Blocking socket I/O with deadlines, for the control paths (bootstrap,
 * authentication, connection setup of the TCP backend). Nothing here waits
 * past its deadline: every wait is a poll() bounded by it.
 *
 * Deadlines are absolute times on xpi_now_ns()'s clock (clock.h);
 * XPI_DEADLINE_NONE waits without one. Functions return 0 or a negative
 * errno, and -ETIMEDOUT when the deadline passes first. A peer that closed
 * the connection or reset it is -ECONNRESET, whatever the kernel said
 * (EOF, EPIPE, ECONNRESET), so callers test one code.
 *
 * The send and receive helpers work on blocking and nonblocking sockets
 * alike (each call uses MSG_DONTWAIT and polls when the socket is not
 * ready); the sockets created here are nonblocking and close-on-exec. No
 * function raises SIGPIPE. Any thread, on sockets it owns.
 */
#ifndef XPI_SOCK_H
#define XPI_SOCK_H

#include <stddef.h>
#include <poll.h>
#include <stdint.h>
#include <sys/socket.h>

#define XPI_DEADLINE_NONE INT64_MAX
/* Room for "[ipv6-address%scope]:port" and a NUL. */
#define XPI_SOCK_ADDRSTRLEN 80

/* The deadline @timeout_ms from now; a negative @timeout_ms gives none. */
int64_t xpi_deadline_in(int timeout_ms);

/* Milliseconds left until @deadline_ns, rounded up, for poll(): 0 if it has
 * passed, -1 for XPI_DEADLINE_NONE. */
int xpi_deadline_left_ms(int64_t deadline_ns);

/* Waits until @fd has one of @events (POLLIN, POLLOUT). Returns 0 (ready or
 * error/hang-up pending: the next call on the socket tells which),
 * -ETIMEDOUT, or another negative errno of poll(). */
int xpi_sock_wait(int fd, short events, int64_t deadline_ns);

/*
 * While this thread waits in the bootstrap (xpi_sock_wait, xpi_sock_poll),
 * @fn(@arg) runs every millisecond (NULL: none). xp_oob_* and
 * xp_finalize's barrier set it to progress the rank's engine: a transport
 * whose peers need our acknowledgements (dpdk) must not go quiet while we
 * wait for them out of band.
 */
void xpi_sock_set_idle(void (*fn)(void *arg), void *arg);
/* poll(), running the idle function of xpi_sock_set_idle between slices. */
int xpi_sock_poll(struct pollfd *fds, unsigned long n, int ms);

/* Sends all @len bytes. Returns 0, -ETIMEDOUT (part may have been sent),
 * -ECONNRESET, or another negative errno. */
int xpi_sock_send_all(int fd, const void *buf, size_t len, int64_t deadline_ns);

/* Receives exactly @len bytes. Returns 0, -ETIMEDOUT (part may have been
 * received), -ECONNRESET (also: the peer closed before @len bytes), or
 * another negative errno. */
int xpi_sock_recv_all(int fd, void *buf, size_t len, int64_t deadline_ns);

/* Connects a new TCP socket (nonblocking, close-on-exec, TCP_NODELAY) to
 * @sa. One attempt: -ECONNREFUSED, -ENETUNREACH, ... are the caller's to
 * retry. Returns 0 and *@fd (the caller's to close), -ETIMEDOUT, or a
 * negative errno. */
int xpi_sock_connect(const struct sockaddr *sa, socklen_t salen, int64_t deadline_ns, int *fd);

/* A TCP socket bound to @sa (SO_REUSEADDR) and listening with @backlog.
 * Returns 0 and *@fd (nonblocking, close-on-exec; the caller's to close),
 * or a negative errno (-EADDRINUSE, -EADDRNOTAVAIL, ...). */
int xpi_sock_listen(const struct sockaddr *sa, socklen_t salen, int backlog, int *fd);

/* Accepts one connection on listening socket @lfd. Returns 0 and *@fd
 * (nonblocking, close-on-exec, TCP_NODELAY; the caller's), -ETIMEDOUT, or a
 * negative errno. */
int xpi_sock_accept(int lfd, int64_t deadline_ns, int *fd);

/* Splits "host:port" or "[v6addr]:port" into its parts (NUL-terminated, at
 * most @hostcap and @portcap bytes with the NUL). The port must be decimal
 * digits; 0 is allowed here. Returns 0 or -EINVAL. Pure. */
int xpi_sock_split_hostport(const char *s, char *host, size_t hostcap, char *port, size_t portcap);

/* Resolves @host and decimal @port to the first TCP address getaddrinfo()
 * gives. May block on name resolution. Returns 0, -EINVAL (unknown name or
 * bad port), -EAGAIN (temporary resolver failure: retry), -ENOMEM. */
int xpi_sock_resolve(const char *host, const char *port, struct sockaddr_storage *out,
		     socklen_t *len);

/* True if @host is an IPv4 or IPv6 address literal, not a name. Pure. */
int xpi_sock_is_numeric_host(const char *host);

/* Writes "1.2.3.4:80" or "[::1]:80" into @buf (always NUL-terminated;
 * "?" for an unknown family). Pure. */
void xpi_sock_addr_str(const struct sockaddr *sa, char *buf, size_t n);

/* The peer address of connected socket @fd as text, or "unknown peer". */
void xpi_sock_peer_str(int fd, char *buf, size_t n);

/*
 * An address of this host's interface @ifname, port 0: its first IPv4
 * address, else a global IPv6 one, else a link-local IPv6 one (with its
 * scope id). With @ifname NULL: of the first interface that is up and not
 * a loopback, its IPv4 address, else the first global IPv6 address of such
 * an interface (as NCCL picks one). Returns 0 and *@out, *@len; -ENODEV if
 * there is none, with the names of the interfaces there are in @names (@n
 * bytes, may be 0); or a negative errno of getifaddrs(). Never blocks.
 */
int xpi_sock_iface_addr(const char *ifname, struct sockaddr_storage *out, socklen_t *len,
			char *names, size_t n);

/* The port of an IPv4 or IPv6 address, or 0. Pure. */
int xpi_sock_addr_port(const struct sockaddr *sa);

#endif
