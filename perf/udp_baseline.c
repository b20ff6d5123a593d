/* SPDX-License-Identifier: MIT */
/*
 * udp-baseline: what plain kernel UDP sockets achieve between two network
 * namespaces joined by a veth pair, the link perf/compare-dpdk.sh also runs
 * xport's DPDK transport over; the two are read side by side.
 *
 * Two processes, each started by the script in its own namespace:
 *
 *   udp-baseline server --bind IP:PORT [--seconds S]
 *   udp-baseline client --to IP:PORT lat|rate|bw [--size N] [--iters N]
 *                       [--seconds S] [--json]
 *
 * The first byte of every datagram says what it is:
 *   'L'  ping-pong: the server sends it straight back to its sender.
 *   'R'  stream: the server counts it and its bytes.
 *   'E'  end of a stream: the server answers its sender with the text
 *        "<count> <bytes>" (decimal), what it received of that stream.
 *   'Q'  quit: the server exits 0 (it also does after --seconds).
 *
 * The client's tests:
 *  - lat: ping-pong of --size-byte datagrams, --iters round trips after
 *    1000 warm-up ones. The client busy-polls its receives (recv with
 *    MSG_DONTWAIT in a loop) and the server does while it is busy, because
 *    a blocking wake-up costs 10-20 us on this machine and would be most of
 *    what is measured; the DPDK side polls too. One-way latency is half the
 *    round trip: p50, p99 and average. A datagram not answered within
 *    100 ms is sent again (with a new sequence number, so a late answer to
 *    the first one is not taken for the answer to the second); the number
 *    sent again is reported.
 *  - rate: --size-byte datagrams, as fast as sendmmsg takes them in
 *    batches of 32, for --seconds; then 'E'. Reports datagrams sent, those
 *    the server received, the received rate (Mmsg_per_s) and the loss.
 *  - bw: the same with messages of --size bytes cut into datagrams of at
 *    most 1472 bytes (the veth's 1500-byte MTU less the IPv4 and UDP
 *    headers), whole messages for --seconds; goodput is the bytes the
 *    server received over the sender's sending time, in MB/s (10^6 B/s).
 *
 * Nothing is retransmitted in rate and bw: lost datagrams are only counted.
 * Kernel UDP here is a ceiling without reliability, what the link and the
 * kernel move, not the equivalent of a reliable transport such as xport's.
 *
 * Every length is checked: a datagram shorter (or longer) than expected is
 * counted as bad and skipped. Both processes end themselves with alarm()
 * --seconds + 60 s after starting, so neither can hang a run.
 */
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <arpa/inet.h>
#include <unistd.h>
#include "perf_util.h"

#define MAX_UDP_PAYLOAD 65507 /* IPv4: 65535 less the IPv4 and UDP headers */
#define VETH_PAYLOAD 1472     /* 1500-byte MTU less 20 (IPv4) and 8 (UDP) */
#define MAX_BW_SIZE ((size_t)1 << 30)
#define RECV_CAP 65536 /* larger than any IPv4 UDP datagram: none is cut */
#define SOCK_BUF (4 << 20)
#define BATCH 32 /* datagrams per sendmmsg / recvmmsg */
#define ALARM_SLACK_S 60

#define DEFAULT_LAT_SIZE 8
#define DEFAULT_RATE_SIZE 64
#define DEFAULT_BW_SIZE ((size_t)1 << 20)
#define DEFAULT_ITERS 10000
#define WARMUP 1000
#define DEFAULT_CLIENT_SECONDS 2.0
#define DEFAULT_SERVER_SECONDS 120.0

#define RESEND_NS 100000000LL   /* lat: an answer later than 100 ms is lost */
#define GIVE_UP_NS 5000000000LL /* no answer at all for 5 s: the server is not there */
#define END_RETRY_MS 10         /* 'E' is sent again after 10 ms without answer */
#define END_GIVE_UP_NS 2000000000LL
#define QUIT_COPIES 3
/* The server spins on its socket for this long after the last datagram, then
 * sleeps in poll(): a test in progress never waits for a wake-up, an idle
 * server between tests does not burn a CPU for its whole --seconds. */
#define SERVER_SPIN_NS 1000000000LL
#define SERVER_POLL_MS 100
/* After this many empty polls, give the CPU away once, in case both
 * processes share one CPU. */
#define SPINS_BEFORE_YIELD (1u << 14)
/* lat: bytes 1..8 of a ping carry its sequence number, as many as fit. */
#define SEQ_BYTES 8

enum mode { MODE_LAT, MODE_RATE, MODE_BW };

static const char *const mode_names[] = {
	[MODE_LAT] = "lat",
	[MODE_RATE] = "rate",
	[MODE_BW] = "bw",
};

struct opts {
	bool server;
	struct sockaddr_in addr; /* server: --bind; client: --to */
	enum mode mode;
	size_t size; /* 0 until given: then the mode's default */
	long iters;
	double seconds;
	bool json;
};

#ifndef XPORT_VERSION_STRING
#error "XPORT_VERSION_STRING comes from meson.build (meson.project_version())"
#endif

static const char *who = "udp-baseline"; /* prefix of error messages */

/* ------------------------------------------------------------------------- */
/* Failing                                                                   */

static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", who);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	exit(1);
}

static void __attribute__((noreturn)) die_errno(const char *what)
{
	die("%s: %s", what, strerrordesc_np(errno));
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: udp-baseline server --bind IP:PORT [--seconds S]\n"
		"       udp-baseline client --to IP:PORT lat|rate|bw [--size N] [--iters N]\n"
		"                           [--seconds S] [--json]\n"
		"       udp-baseline --version | --help\n"
		"\n"
		"Plain kernel UDP (IPv4) between two processes, meant for two network\n"
		"namespaces joined by a veth pair: the yardstick for xport's DPDK transport.\n"
		"  server       echoes pings, counts streams, answers ends of stream; exits\n"
		"               on a quit datagram or after --seconds (default %.0f)\n"
		"  lat          ping-pong of N-byte datagrams (default %d), --iters round\n"
		"               trips (default %d) after %d warm-up ones, busy-polling;\n"
		"               one-way latency (half the round trip) p50, p99, avg in us\n"
		"  rate         N-byte datagrams (default %d) for --seconds (default %.0f)\n"
		"               with sendmmsg: datagrams received by the server per second\n"
		"               (Mmsg_per_s) and the loss\n"
		"  bw           N-byte messages (default %zu) in datagrams of at most %d B\n"
		"               for --seconds: goodput at the server, MB/s = 10^6 B/s, and\n"
		"               the loss (no retransmission: a ceiling, not a transport)\n"
		"  --size N     bytes, k/m/g suffixes (x1024); 1 to %d (lat, rate) or 1g (bw)\n"
		"  --iters N    lat only: measured round trips\n"
		"  --seconds S  client: how long rate and bw send; server: how long it\n"
		"               serves; either ends itself S + %d s after starting\n"
		"  --json       one JSON line on stdout\n",
		DEFAULT_SERVER_SECONDS, DEFAULT_LAT_SIZE, DEFAULT_ITERS, WARMUP, DEFAULT_RATE_SIZE,
		DEFAULT_CLIENT_SECONDS, DEFAULT_BW_SIZE, VETH_PAYLOAD, MAX_UDP_PAYLOAD,
		ALARM_SLACK_S);
}

/* ------------------------------------------------------------------------- */
/* Sockets                                                                   */

static void format_addr(const struct sockaddr_in *a, char *buf, size_t len)
{
	char ip[INET_ADDRSTRLEN];
	inet_ntop(AF_INET, &a->sin_addr, ip, sizeof(ip));
	snprintf(buf, len, "%s:%u", ip, ntohs(a->sin_port));
}

/* 4 MiB each way, so a burst of the stream tests is queued, not dropped, while
 * the other side catches up. SO_*BUFFORCE passes net.core.[rw]mem_max for
 * root (CAP_NET_ADMIN); otherwise the plain option is capped by them. Either
 * may fail: the test then runs with what the kernel gives. */
static void set_buffers(int fd)
{
	int size = SOCK_BUF;
	if (setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &size, sizeof(size)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
	if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) != 0)
		(void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

static int udp_socket(void)
{
	int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die_errno("socket");
	set_buffers(fd);
	return fd;
}

static bool would_block(int err)
{
	return err == EAGAIN || err == EWOULDBLOCK || err == EINTR;
}

static void spin_pause(unsigned *spins)
{
	if (++*spins >= SPINS_BEFORE_YIELD) {
		sched_yield();
		*spins = 0;
	} else {
		cpu_relax();
	}
}

/* ------------------------------------------------------------------------- */
/* Server                                                                    */

struct server {
	int fd;
	/* The stream being counted: its sender, and whether its end was
	 * answered. A stream datagram from another sender, or after an answered
	 * end, starts a new count: so one server serves test after test, and
	 * repeated 'E's of one stream all get the same answer. */
	struct sockaddr_in stream_from;
	bool stream_open, stream_ended;
	unsigned long long count, bytes;
	/* For the summary on exit. */
	unsigned long long echoed, echo_failed, streamed, bad;
	bool quit;
};

static bool same_sender(const struct sockaddr_in *a, const struct sockaddr_in *b)
{
	return a->sin_addr.s_addr == b->sin_addr.s_addr && a->sin_port == b->sin_port;
}

static void server_reply(struct server *s, const void *buf, size_t len,
			 const struct sockaddr_in *to)
{
	/* Never block: a reply the kernel cannot take now is lost, as on the
	 * wire, and the client sends its request again. */
	ssize_t n = sendto(s->fd, buf, len, MSG_DONTWAIT, (const struct sockaddr *)to, sizeof(*to));
	if (n != (ssize_t)len)
		s->echo_failed++;
}

static void server_handle(struct server *s, const uint8_t *buf, ssize_t len, bool truncated,
			  const struct sockaddr_in *from)
{
	char text[64];
	int tlen;

	if (len < 1 || truncated) {
		s->bad++;
		return;
	}
	switch (buf[0]) {
	case 'L':
		server_reply(s, buf, (size_t)len, from);
		s->echoed++;
		break;
	case 'R':
		if (!s->stream_open || s->stream_ended || !same_sender(from, &s->stream_from)) {
			s->stream_from = *from;
			s->stream_open = true;
			s->stream_ended = false;
			s->count = 0;
			s->bytes = 0;
		}
		s->count++;
		s->bytes += (unsigned long long)len;
		s->streamed++;
		break;
	case 'E':
		/* An end from a sender none of whose stream arrived: it all got
		 * lost, and that is the answer. */
		if (s->stream_open && same_sender(from, &s->stream_from)) {
			s->stream_ended = true;
			tlen = snprintf(text, sizeof(text), "%llu %llu", s->count, s->bytes);
		} else {
			tlen = snprintf(text, sizeof(text), "0 0");
		}
		server_reply(s, text, (size_t)tlen, from);
		break;
	case 'Q':
		s->quit = true;
		break;
	default:
		s->bad++;
		break;
	}
}

static int run_server(const struct opts *o)
{
	struct server s = { .fd = udp_socket() };
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct sockaddr_in from[BATCH];
	uint8_t *bufs = malloc((size_t)BATCH * RECV_CAP);
	char where[32];
	const int64_t start = now_ns(), end = start + (int64_t)(o->seconds * 1e9);
	int64_t last = start, now = start;
	unsigned spins = 0;

	who = "udp-baseline: server";
	if (bufs == NULL)
		die("out of memory");
	format_addr(&o->addr, where, sizeof(where));
	if (bind(s.fd, (const struct sockaddr *)&o->addr, sizeof(o->addr)) != 0)
		die("bind %s: %s", where, strerrordesc_np(errno));

	while (!s.quit && now < end) {
		for (int i = 0; i < BATCH; i++) {
			iov[i] = (struct iovec){ bufs + (size_t)i * RECV_CAP, RECV_CAP };
			msgs[i].msg_hdr = (struct msghdr){
				.msg_name = &from[i],
				.msg_namelen = sizeof(from[i]),
				.msg_iov = &iov[i],
				.msg_iovlen = 1,
			};
		}
		int n = recvmmsg(s.fd, msgs, BATCH, MSG_DONTWAIT, NULL);
		now = now_ns();
		if (n > 0) {
			for (int i = 0; i < n && !s.quit; i++) {
				/* Not from an IPv4 peer: nothing to answer to. */
				if (msgs[i].msg_hdr.msg_namelen != sizeof(from[i])) {
					s.bad++;
					continue;
				}
				server_handle(&s, iov[i].iov_base, (ssize_t)msgs[i].msg_len,
					      (msgs[i].msg_hdr.msg_flags & MSG_TRUNC) != 0,
					      &from[i]);
			}
			last = now;
			spins = 0;
			continue;
		}
		if (n < 0 && !would_block(errno))
			die_errno("recvmmsg");
		if (now - last < SERVER_SPIN_NS) {
			spin_pause(&spins);
			continue;
		}
		int64_t left_ms = (end - now) / 1000000 + 1;
		struct pollfd p = { .fd = s.fd, .events = POLLIN };
		if (poll(&p, 1, left_ms < SERVER_POLL_MS ? (int)left_ms : SERVER_POLL_MS) < 0 &&
		    errno != EINTR)
			die_errno("poll");
		now = now_ns();
	}
	fprintf(stderr,
		"udp-baseline: server on %s: %llu pings echoed (%llu not sent), %llu stream "
		"datagrams, %llu bad; ended by %s\n",
		where, s.echoed, s.echo_failed, s.streamed, s.bad,
		s.quit ? "a quit datagram" : "--seconds");
	free(bufs);
	close(s.fd);
	return 0;
}

/* ------------------------------------------------------------------------- */
/* Client: receiving and the control datagrams                               */

/* The next datagram's real length (MSG_TRUNC: even if it did not fit), or
 * -1 if none came before @deadline. Spins: never sleeps in the kernel.
 * ECONNREFUSED is an ICMP port unreachable for an earlier datagram: the
 * server is not (yet) bound; that datagram is lost like any other. */
static ssize_t recv_spin(int fd, uint8_t *buf, int64_t deadline)
{
	unsigned spins = 0;
	for (;;) {
		ssize_t n = recv(fd, buf, RECV_CAP, MSG_DONTWAIT | MSG_TRUNC);
		if (n >= 0)
			return n;
		if (!would_block(errno) && errno != ECONNREFUSED)
			die_errno("recv");
		if (now_ns() >= deadline)
			return -1;
		spin_pause(&spins);
	}
}

/* Sends one datagram; a datagram the kernel refuses (queue full, port
 * unreachable reported) is lost and is the caller's to send again. */
static void send_one(int fd, const uint8_t *buf, size_t len)
{
	ssize_t n;
	do {
		n = send(fd, buf, len, 0);
	} while (n < 0 && errno == EINTR);
	if (n < 0 && !would_block(errno) && errno != ENOBUFS && errno != ECONNREFUSED)
		die_errno("send");
	if (n >= 0 && (size_t)n != len)
		die("send: %zd of %zu bytes", n, len);
}

/* Writes the ping's sequence number into its bytes 1.. as far as they go. */
static void put_seq(uint8_t *buf, size_t size, uint64_t seq)
{
	for (size_t i = 1; i < size && i <= SEQ_BYTES; i++, seq >>= 8)
		buf[i] = (uint8_t)seq;
}

/* Whether @got (@n bytes) answers the ping @sent: same length, same kind
 * and sequence number. */
static bool is_echo(const uint8_t *got, ssize_t n, const uint8_t *sent, size_t size)
{
	size_t head = size < SEQ_BYTES + 1 ? size : SEQ_BYTES + 1;
	return n == (ssize_t)size && memcmp(got, sent, head) == 0;
}

/* One ping sent until answered. Returns the round trip of the attempt that
 * was answered, in ns; counts the datagrams sent again and the bad ones. */
static int64_t ping(int fd, uint8_t *sbuf, uint8_t *rbuf, size_t size, uint64_t *seq, long *resent,
		    long *bad)
{
	const int64_t first = now_ns();
	for (;;) {
		put_seq(sbuf, size, ++*seq);
		int64_t t0 = now_ns(), t1;
		send_one(fd, sbuf, size);
		for (;;) {
			ssize_t n = recv_spin(fd, rbuf, t0 + RESEND_NS);
			t1 = now_ns();
			if (n < 0)
				break; /* lost */
			if (is_echo(rbuf, n, sbuf, size))
				return t1 - t0;
			/* A late answer to an earlier attempt is not bad, only late. */
			if (!(n == (ssize_t)size && rbuf[0] == 'L'))
				(*bad)++;
		}
		if (t1 - first >= GIVE_UP_NS)
			die("no answer to a ping for %lld s: is the server running?",
			    GIVE_UP_NS / 1000000000);
		(*resent)++;
	}
}

/* Waits until the server answers a ping, so no stream starts before it is
 * listening: the script may start the client a moment before the server
 * binds. Then drops the error an early ping's ICMP may have left pending. */
static void wait_for_server(int fd, uint8_t *rbuf)
{
	uint8_t probe[1 + SEQ_BYTES] = { 'L' };
	uint64_t seq = (uint64_t)1 << 63; /* apart from the measured pings */
	long resent = 0, bad = 0;
	int err;
	socklen_t len = sizeof(err);

	ping(fd, probe, rbuf, sizeof(probe), &seq, &resent, &bad);
	(void)getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
}

/* Sends 'E' until the server answers with "<count> <bytes>", every 10 ms, at
 * most 2 s. Waiting sleeps in poll(): nothing is being timed any more. */
static void end_stream(int fd, uint8_t *rbuf, unsigned long long *count, unsigned long long *bytes)
{
	const uint8_t e = 'E';
	const int64_t give_up = now_ns() + END_GIVE_UP_NS;
	long bad = 0;

	while (now_ns() < give_up) {
		send_one(fd, &e, 1);
		struct pollfd p = { .fd = fd, .events = POLLIN };
		if (poll(&p, 1, END_RETRY_MS) < 0 && errno != EINTR)
			die_errno("poll");
		for (;;) {
			ssize_t n = recv(fd, rbuf, RECV_CAP - 1, MSG_DONTWAIT | MSG_TRUNC);
			if (n < 0 && (would_block(errno) || errno == ECONNREFUSED))
				break;
			if (n < 0)
				die_errno("recv");
			if (n >= 3 && n < 64 && rbuf[0] >= '0' && rbuf[0] <= '9') {
				char text[64], *end;
				memcpy(text, rbuf, (size_t)n);
				text[n] = '\0';
				errno = 0;
				*count = strtoull(text, &end, 10);
				if (errno == 0 && *end == ' ' && end[1] >= '0' && end[1] <= '9') {
					*bytes = strtoull(end + 1, &end, 10);
					if (errno == 0 && *end == '\0')
						return;
				}
			}
			/* Late echoes of the probe are expected; anything else is bad. */
			if (n < 1 || rbuf[0] != 'L')
				bad++;
		}
	}
	die("no answer to the end of the stream within %lld s (%ld bad datagrams)",
	    END_GIVE_UP_NS / 1000000000, bad);
}

static void send_quit(int fd)
{
	const uint8_t q = 'Q';
	/* Several copies, in case one is lost; errors no longer matter. */
	for (int i = 0; i < QUIT_COPIES; i++)
		(void)send(fd, &q, 1, MSG_DONTWAIT);
}

/* ------------------------------------------------------------------------- */
/* Client: the tests                                                         */

static void *alloc_touched(size_t len)
{
	void *p = malloc(len);
	if (p == NULL)
		die("out of memory (%zu bytes)", len);
	/* Touched now, so no page fault lands in a measurement. */
	memset(p, 0, len);
	return p;
}

static void run_lat(const struct opts *o, int fd, uint8_t *rbuf)
{
	uint8_t *sbuf = alloc_touched(o->size);
	int64_t *rt = alloc_touched(sizeof(*rt) * (size_t)o->iters);
	uint64_t seq = 0;
	long resent = 0, bad = 0;
	double sum = 0;

	sbuf[0] = 'L';
	for (long i = 0; i < WARMUP + o->iters; i++) {
		int64_t t = ping(fd, sbuf, rbuf, o->size, &seq, &resent, &bad);
		if (i >= WARMUP)
			rt[i - WARMUP] = t;
	}
	qsort(rt, (size_t)o->iters, sizeof(*rt), cmp_i64);
	for (long i = 0; i < o->iters; i++)
		sum += (double)rt[i];
	double p50 = (double)rt[pct_index((size_t)o->iters, 50)] / 2e3;
	double p99 = (double)rt[pct_index((size_t)o->iters, 99)] / 2e3;
	double avg = sum / (double)o->iters / 2e3;
	if (bad > 0)
		fprintf(stderr, "udp-baseline: %ld bad datagrams skipped\n", bad);
	if (o->json)
		printf("{\"test\":\"udp_baseline_lat\",\"size\":%zu,\"iters\":%ld,"
		       "\"lat_us_p50\":%.3f,\"lat_us_p99\":%.3f,\"lat_us_avg\":%.3f,"
		       "\"resent\":%ld}\n",
		       o->size, o->iters, p50, p99, avg, resent);
	else
		printf("udp-baseline lat: %zu B, %ld round trips after %d warm-up: one-way "
		       "p50 %.3f us, p99 %.3f us, avg %.3f us; %ld resent\n",
		       o->size, o->iters, WARMUP, p50, p99, avg, resent);
	free(rt);
	free(sbuf);
}

/* Sends @n datagrams described by @msgs, all of them: sendmmsg takes up to a
 * batch at a time; when it takes none (socket buffer or device queue full),
 * the next one goes alone with send(), retried until the kernel takes it. */
static void send_datagrams(int fd, struct mmsghdr *msgs, size_t n)
{
	size_t done = 0;
	unsigned spins = 0;
	while (done < n) {
		unsigned want = n - done < BATCH ? (unsigned)(n - done) : BATCH;
		int k = sendmmsg(fd, msgs + done, want, MSG_DONTWAIT);
		if (k > 0) {
			done += (size_t)k;
			continue;
		}
		if (k < 0 && errno == ECONNREFUSED)
			die("sendmmsg: the server went away (port unreachable)");
		if (k < 0 && !would_block(errno) && errno != ENOBUFS)
			die_errno("sendmmsg");
		const struct iovec *v = msgs[done].msg_hdr.msg_iov;
		ssize_t s;
		while ((s = send(fd, v->iov_base, v->iov_len, MSG_DONTWAIT)) < 0) {
			if (errno == ECONNREFUSED)
				die("send: the server went away (port unreachable)");
			if (!would_block(errno) && errno != ENOBUFS)
				die_errno("send");
			spin_pause(&spins);
		}
		if ((size_t)s != v->iov_len)
			die("send: %zd of %zu bytes", s, v->iov_len);
		done++;
	}
}

/* Describes @size bytes of @buf as datagrams of at most @max bytes, each one
 * starting with 'R'. Returns how many. */
static size_t cut_datagrams(uint8_t *buf, size_t size, size_t max, struct mmsghdr *msgs,
			    struct iovec *iov)
{
	size_t n = 0;
	for (size_t off = 0; off < size; off += max, n++) {
		buf[off] = 'R';
		iov[n] = (struct iovec){ buf + off, size - off < max ? size - off : max };
		msgs[n] = (struct mmsghdr){ .msg_hdr = { .msg_iov = &iov[n], .msg_iovlen = 1 } };
	}
	return n;
}

struct stream_result {
	unsigned long long sent, received, bytes; /* datagrams; bytes received */
	double seconds;                           /* the sender's sending time */
};

/* rate and bw: sends @unit (@n datagrams) again and again until --seconds
 * have passed, then asks the server what arrived. */
static void stream(const struct opts *o, int fd, uint8_t *rbuf, struct mmsghdr *unit, size_t n,
		   struct stream_result *r)
{
	const int64_t t0 = now_ns(), end = t0 + (int64_t)(o->seconds * 1e9);
	int64_t t1 = t0;
	unsigned long long sent = 0;

	while (t1 < end) {
		send_datagrams(fd, unit, n);
		sent += n;
		t1 = now_ns();
	}
	r->sent = sent;
	r->seconds = (double)(t1 - t0) / 1e9;
	end_stream(fd, rbuf, &r->received, &r->bytes);
}

static double loss(const struct stream_result *r)
{
	/* More received than sent would be another sender's datagrams. */
	if (r->received >= r->sent)
		return 0;
	return (double)(r->sent - r->received) / (double)r->sent;
}

static void run_rate(const struct opts *o, int fd, uint8_t *rbuf)
{
	uint8_t *buf = alloc_touched(o->size);
	struct mmsghdr msgs[BATCH];
	struct iovec iov[BATCH];
	struct stream_result r;

	/* A batch of copies of one datagram: what they carry does not matter. */
	for (int i = 0; i < BATCH; i++)
		cut_datagrams(buf, o->size, o->size, &msgs[i], &iov[i]);
	stream(o, fd, rbuf, msgs, BATCH, &r);
	double mmsg = (double)r.received / r.seconds / 1e6;
	if (o->json)
		printf("{\"test\":\"udp_baseline_rate\",\"size\":%zu,\"sent\":%llu,"
		       "\"received\":%llu,\"Mmsg_per_s\":%.4f,\"loss\":%.6f}\n",
		       o->size, r.sent, r.received, mmsg, loss(&r));
	else
		printf("udp-baseline rate: %zu B datagrams for %.3f s: %llu sent, %llu received "
		       "by the server, %.4f Mmsg/s received, loss %.6f\n",
		       o->size, r.seconds, r.sent, r.received, mmsg, loss(&r));
	free(buf);
}

static void run_bw(const struct opts *o, int fd, uint8_t *rbuf)
{
	size_t max_n = (o->size + VETH_PAYLOAD - 1) / VETH_PAYLOAD;
	uint8_t *buf = alloc_touched(o->size);
	struct mmsghdr *msgs = alloc_touched(sizeof(*msgs) * max_n);
	struct iovec *iov = alloc_touched(sizeof(*iov) * max_n);
	struct stream_result r;

	size_t n = cut_datagrams(buf, o->size, VETH_PAYLOAD, msgs, iov);
	stream(o, fd, rbuf, msgs, n, &r);
	double mbps = (double)r.bytes / r.seconds / 1e6;
	if (o->json)
		printf("{\"test\":\"udp_baseline_bw\",\"size\":%zu,\"bw_MBps\":%.1f,"
		       "\"loss\":%.6f}\n",
		       o->size, mbps, loss(&r));
	else
		printf("udp-baseline bw: %zu B messages in %zu datagrams for %.3f s: %llu "
		       "messages sent, %.1f MB/s received by the server, loss %.6f\n",
		       o->size, n, r.seconds, r.sent / n, mbps, loss(&r));
	free(iov);
	free(msgs);
	free(buf);
}

static int run_client(const struct opts *o)
{
	int fd = udp_socket();
	uint8_t *rbuf = alloc_touched(RECV_CAP);
	char where[32];

	who = "udp-baseline: client";
	format_addr(&o->addr, where, sizeof(where));
	/* Connected: send() needs no address, and the kernel drops datagrams
	 * from anyone but the server. */
	if (connect(fd, (const struct sockaddr *)&o->addr, sizeof(o->addr)) != 0)
		die("connect %s: %s", where, strerrordesc_np(errno));
	wait_for_server(fd, rbuf);
	switch (o->mode) {
	case MODE_LAT:
		run_lat(o, fd, rbuf);
		break;
	case MODE_RATE:
		run_rate(o, fd, rbuf);
		break;
	case MODE_BW:
		run_bw(o, fd, rbuf);
		break;
	}
	fflush(stdout);
	send_quit(fd);
	free(rbuf);
	close(fd);
	return 0;
}

/* ------------------------------------------------------------------------- */
/* Options                                                                   */

/* IPv4 address and port, "10.203.0.1:5000". */
static bool parse_addr(const char *s, struct sockaddr_in *out)
{
	char ip[INET_ADDRSTRLEN], *end;
	const char *colon = strrchr(s, ':');
	if (colon == NULL || (size_t)(colon - s) >= sizeof(ip))
		return false;
	memcpy(ip, s, (size_t)(colon - s));
	ip[colon - s] = '\0';
	*out = (struct sockaddr_in){ .sin_family = AF_INET };
	if (inet_pton(AF_INET, ip, &out->sin_addr) != 1)
		return false;
	errno = 0;
	unsigned long port = strtoul(colon + 1, &end, 10);
	if (errno != 0 || end == colon + 1 || *end != '\0' || port < 1 || port > 65535 ||
	    colon[1] < '0' || colon[1] > '9')
		return false;
	out->sin_port = htons((uint16_t)port);
	return true;
}

/* Bytes, with an optional k, m or g suffix (x1024), from 1 to @max. */
static bool parse_size(const char *s, size_t max, size_t *out)
{
	char *end;
	unsigned shift = 0;
	if (*s < '0' || *s > '9')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0)
		return false;
	if (*end == 'k' || *end == 'K')
		shift = 10;
	else if (*end == 'm' || *end == 'M')
		shift = 20;
	else if (*end == 'g' || *end == 'G')
		shift = 30;
	if (shift != 0)
		end++;
	if (*end != '\0' || v == 0 || v > (max >> shift))
		return false;
	*out = (size_t)(v << shift);
	return true;
}

static bool parse_long(const char *s, long min, long max, long *out)
{
	char *end;
	errno = 0;
	long v = strtol(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || v < min || v > max)
		return false;
	*out = v;
	return true;
}

/* Seconds, fractions allowed, more than 0 and at most a day. */
static bool parse_seconds(const char *s, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (errno != 0 || end == s || *end != '\0' || !(v > 0) || v > 86400)
		return false;
	*out = v;
	return true;
}

/* Returns 0 to run, 1 to exit 0 (help, version), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_BIND = 256, OPT_TO, OPT_SIZE, OPT_ITERS, OPT_SECONDS, OPT_JSON, OPT_VERSION };
	static const struct option longopts[] = {
		{ "bind", required_argument, NULL, OPT_BIND },
		{ "to", required_argument, NULL, OPT_TO },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "iters", required_argument, NULL, OPT_ITERS },
		{ "seconds", required_argument, NULL, OPT_SECONDS },
		{ "json", no_argument, NULL, OPT_JSON },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *size_arg = NULL, *role = NULL, *mode = NULL;
	bool have_addr = false, client_only = false;
	int c;

	*o = (struct opts){ .iters = DEFAULT_ITERS };
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_BIND:
		case OPT_TO:
			if (!parse_addr(optarg, &o->addr)) {
				fprintf(stderr, "udp-baseline: bad address '%s' (IPv4:PORT)\n",
					optarg);
				return 2;
			}
			/* Checked against the role below. */
			have_addr = true;
			o->server = c == OPT_BIND;
			break;
		case OPT_SIZE:
			size_arg = optarg; /* its bounds depend on the mode */
			client_only = true;
			break;
		case OPT_ITERS:
			if (!parse_long(optarg, 1, 100000000, &o->iters)) {
				fprintf(stderr,
					"udp-baseline: --iters wants a count from 1 to 10^8\n");
				return 2;
			}
			client_only = true;
			break;
		case OPT_SECONDS:
			if (!parse_seconds(optarg, &o->seconds)) {
				fprintf(stderr,
					"udp-baseline: --seconds wants a number of seconds, "
					"more than 0, at most 86400\n");
				return 2;
			}
			break;
		case OPT_JSON:
			o->json = true;
			client_only = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case OPT_VERSION:
			printf("udp-baseline (xport) %s\n", XPORT_VERSION_STRING);
			return 1;
		default:
			fprintf(stderr, "udp-baseline: try --help\n");
			return 2;
		}
	}
	/* getopt_long has moved the words that are not options to the end. */
	if (optind < argc)
		role = argv[optind++];
	if (optind < argc)
		mode = argv[optind++];
	if (role == NULL || (strcmp(role, "server") != 0 && strcmp(role, "client") != 0)) {
		usage(stderr);
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "udp-baseline: unexpected argument '%s'; try --help\n",
			argv[optind]);
		return 2;
	}
	if (strcmp(role, "server") == 0) {
		if (!have_addr || !o->server || mode != NULL || client_only) {
			fprintf(stderr, "udp-baseline: the server takes --bind IP:PORT and "
					"--seconds S only\n");
			return 2;
		}
		if (o->seconds == 0)
			o->seconds = DEFAULT_SERVER_SECONDS;
		return 0;
	}
	if (!have_addr || o->server) {
		fprintf(stderr, "udp-baseline: the client takes --to IP:PORT%s\n",
			have_addr ? ", not --bind" : "");
		return 2;
	}
	o->mode = MODE_LAT;
	bool known = false;
	for (int i = 0; mode != NULL && i < (int)(sizeof(mode_names) / sizeof(*mode_names)); i++) {
		if (strcmp(mode, mode_names[i]) == 0) {
			o->mode = (enum mode)i;
			known = true;
		}
	}
	if (!known) {
		fprintf(stderr, "udp-baseline: the client wants a test, lat, rate or bw%s%s\n",
			mode != NULL ? ", not " : "", mode != NULL ? mode : "");
		return 2;
	}
	size_t max = o->mode == MODE_BW ? MAX_BW_SIZE : MAX_UDP_PAYLOAD;
	if (size_arg != NULL && !parse_size(size_arg, max, &o->size)) {
		fprintf(stderr,
			"udp-baseline: bad size '%s' for %s (bytes, optional k, m or g suffix, "
			"from 1 to %zu)\n",
			size_arg, mode, max);
		return 2;
	}
	if (size_arg == NULL)
		o->size = o->mode == MODE_LAT  ? DEFAULT_LAT_SIZE :
			  o->mode == MODE_RATE ? DEFAULT_RATE_SIZE :
						 DEFAULT_BW_SIZE;
	if (o->seconds == 0)
		o->seconds = DEFAULT_CLIENT_SECONDS;
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	int rc = parse_args(argc, argv, &o);

	if (rc != 0)
		return rc == 1 ? 0 : 1;
	/* Whatever happens to the peer or the link, this process ends. */
	unsigned whole = (unsigned)o.seconds;
	alarm(whole + (whole < o.seconds) + ALARM_SLACK_S); /* a fraction rounds up */
	return o.server ? run_server(&o) : run_client(&o);
}
