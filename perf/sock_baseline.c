/* SPDX-License-Identifier: MIT */
/*
 * sock-baseline: what plain TCP sockets achieve over loopback on this
 * machine, measured the way xport-perf measures xport, so the two can be
 * read side by side (perf/compare-p2p.py runs both, beside ucx_perftest).
 *
 * Two processes, both children of this one: a server (bound to port 0 on
 * 127.0.0.1, it reports the port through a pipe) and a client that connects
 * to it. The parent is the control path: it starts them, collects the result
 * through a second pipe and prints it. No control ever travels over the
 * measured socket.
 *  - lat: 8-byte (--size) ping-pong, blocking send/recv, TCP_NODELAY. The
 *    client times each round trip; one-way latency is half of it, p50 and
 *    p99 over the iterations after a warmup.
 *  - lat-spin: the same, but both sides receive with recv(MSG_DONTWAIT) in a
 *    spin loop, so neither ever sleeps in the kernel (lab BASELINES.md: a
 *    blocking wake-up across vCPUs costs 10-20 us here).
 *  - bw: the client streams N-byte messages (default 1 MiB) with blocking
 *    send; the server receives each one whole with blocking recv and takes
 *    the bandwidth at its end, over chunks of messages; the median chunk is
 *    reported, in 10^6 B/s.
 * Every message carries a stamp in its first and last byte that changes
 * with each iteration, and every receiver checks it.
 * Both children set PR_SET_PDEATHSIG and an alarm, so neither outlives the
 * parent nor hangs a run.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <time.h>
#include <unistd.h>
#include "perf_util.h"

#define MAX_SIZE ((size_t)1 << 30)
#define DEFAULT_LAT_SIZE 8
#define DEFAULT_BW_SIZE ((size_t)1 << 20)
#define DEFAULT_TIMEOUT_S 60
/* bw: the measured messages are cut into this many chunks, timed at the
 * receiver; the median chunk is reported, as xport-perf reports the median
 * of its rounds. */
#define BW_CHUNKS 20
/* lat-spin: after this many empty polls, give the CPU away once, in case
 * both processes share one CPU (unpinned on a busy machine). */
#define SPINS_BEFORE_YIELD (1u << 14)

enum mode { MODE_LAT, MODE_LAT_SPIN, MODE_BW };
enum role { ROLE_CLIENT = 0, ROLE_SERVER = 1 };

static const char *const mode_names[] = {
	[MODE_LAT] = "lat",
	[MODE_LAT_SPIN] = "lat-spin",
	[MODE_BW] = "bw",
};
static const char *const role_names[] = {
	[ROLE_CLIENT] = "client",
	[ROLE_SERVER] = "server",
};

struct opts {
	enum mode mode;
	size_t size;
	long iters; /* 0: chosen by size */
	bool json, pin;
	int cpu[2]; /* indexed by role, when pin */
	int timeout_s;
};

/* What the measuring child hands the parent through the result pipe. */
struct result {
	long iters;
	/* Negative: not measured by this test. Latency is one-way: mean,
	 * minimum, median and p99 of half the round trips. */
	double avg_us, min_us, p50_us, p99_us, bw_mbps;
};

#ifndef XPORT_VERSION_STRING
#error "XPORT_VERSION_STRING comes from meson.build (meson.project_version())"
#endif

static const char *who = "sock-baseline"; /* prefix of error messages */
/* The parent's children, for its signal handler; 0 until forked. */
static volatile sig_atomic_t child_pid[2];

/* ------------------------------------------------------------------------- */
/* Failing                                                                   */

/* In a child, ends only that child: the parent sees the exit status and an
 * empty result pipe. */
static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	va_start(ap, fmt);
	fprintf(stderr, "%s: ", who);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(1);
}

static void __attribute__((noreturn)) die_errno(const char *what)
{
	die("%s: %s", what, strerrordesc_np(errno));
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: sock-baseline lat|lat-spin|bw [--size N] [--iters N] [--pin]\n"
		"                     [--cpus A,B] [--json] [--timeout S] [--version] [--help]\n"
		"\n"
		"Plain TCP over loopback between two processes (fork), as a yardstick for\n"
		"xport-perf --transport tcp and ucx_perftest.\n"
		"  lat          ping-pong, blocking send/recv, TCP_NODELAY; one-way latency\n"
		"               (half the round trip): lat_us_avg, lat_us_min, lat_us_p50,\n"
		"               lat_us_p99 (default size %d B)\n"
		"  lat-spin     the same with recv(MSG_DONTWAIT) spinning on both sides\n"
		"  bw           one-way stream of N-byte messages, blocking send/recv,\n"
		"               measured at the receiver (default size %zu B), MB/s = 10^6 B/s\n"
		"  --size N     message size in bytes, k/m/g suffixes (x1024), 1 B to 1 GiB\n"
		"  --iters N    measured iterations (lat) or messages (bw); default by size;\n"
		"               a tenth as many again run first as warmup\n"
		"  --pin        pin the client (ping sender, bw sender) to CPU 0 and the\n"
		"               server (pong sender, bw receiver) to CPU 1\n"
		"  --cpus A,B   pin the client to CPU A and the server to CPU B\n"
		"  --json       one JSON line on stdout (xport-perf's keys); header on stderr\n"
		"  --timeout S  each process ends itself after S seconds (default %d)\n"
		"  --version    print the version and exit\n",
		DEFAULT_LAT_SIZE, DEFAULT_BW_SIZE, DEFAULT_TIMEOUT_S);
}

/* ------------------------------------------------------------------------- */
/* Time and statistics                                                       */

/* ------------------------------------------------------------------------- */
/* Payload stamps (the same scheme as xport-perf)                           */

static inline uint8_t stamp_first(long i, int role)
{
	return (uint8_t)(i * 131 + 17 + role * 64);
}

static inline uint8_t stamp_last(long i, int role)
{
	return (uint8_t)(i * 29 + 101 + role * 32);
}

/* A 1-byte message carries only the first stamp. */
static inline void stamp(uint8_t *buf, size_t size, long i, int role)
{
	buf[size - 1] = stamp_last(i, role);
	buf[0] = stamp_first(i, role);
}

static inline void check(const uint8_t *buf, size_t size, long i, int from)
{
	if (buf[0] != stamp_first(i, from) || (size > 1 && buf[size - 1] != stamp_last(i, from)))
		die("message %ld of %zu B: payload corrupt: first/last byte 0x%02x/0x%02x, "
		    "expected 0x%02x/0x%02x",
		    i, size, buf[0], buf[size - 1], stamp_first(i, from), stamp_last(i, from));
}

/* ------------------------------------------------------------------------- */
/* Socket I/O                                                                */

static void send_all(int fd, const uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die_errno("send");
		}
		buf += n;
		len -= (size_t)n;
	}
}

/* Blocking: sleeps in the kernel until data arrives. */
static void recv_all(int fd, uint8_t *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = recv(fd, buf, len, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die_errno("recv");
		}
		if (n == 0)
			die("recv: the peer closed the connection early");
		buf += n;
		len -= (size_t)n;
	}
}

/* Spinning: polls with nonblocking recv calls; never sleeps. */
static void recv_all_spin(int fd, uint8_t *buf, size_t len)
{
	unsigned spins = 0;
	while (len > 0) {
		ssize_t n = recv(fd, buf, len, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) {
				if (++spins >= SPINS_BEFORE_YIELD) {
					sched_yield();
					spins = 0;
				} else {
					cpu_relax();
				}
				continue;
			}
			die_errno("recv");
		}
		if (n == 0)
			die("recv: the peer closed the connection early");
		buf += n;
		len -= (size_t)n;
	}
}

static void set_nodelay(int fd)
{
	int one = 1;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) != 0)
		die_errno("setsockopt(TCP_NODELAY)");
}

static void write_full(int fd, const void *p, size_t len, const char *what)
{
	const char *c = p;
	while (len > 0) {
		ssize_t n = write(fd, c, len);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die_errno(what);
		}
		c += n;
		len -= (size_t)n;
	}
}

/* Returns the bytes read: fewer than @len only at end of file. */
static size_t read_full(int fd, void *p, size_t len, const char *what)
{
	char *c = p;
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, c + got, len - got);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			die_errno(what);
		}
		if (n == 0)
			break;
		got += (size_t)n;
	}
	return got;
}

/* ------------------------------------------------------------------------- */
/* Plans                                                                     */

/* lat follows xport-perf's lat_plan, so the two take the same samples. */
static void plan(const struct opts *o, long *iters, long *warm)
{
	if (o->iters > 0) {
		*iters = o->iters;
	} else if (o->mode == MODE_BW) {
		/* About 2 GiB, within bounds that keep small sizes sound and
		 * every size under a few seconds. */
		long n = (long)(((size_t)2 << 30) / o->size);
		*iters = n < 200 ? 200 : (n > 200000 ? 200000 : n);
	} else if (o->size <= 4096) {
		*iters = 20000;
	} else if (o->size <= 65536) {
		*iters = 5000;
	} else if (o->size <= 1048576) {
		*iters = 1000;
	} else {
		*iters = 200;
	}
	*warm = *iters / 10 > 0 ? *iters / 10 : 1;
}

static void *alloc_touched(size_t len)
{
	size_t cap = (len + 4095) & ~(size_t)4095;
	void *p = aligned_alloc(4096, cap);
	if (p == NULL)
		die("out of memory (%zu bytes)", len);
	/* Touch now so page faults never land in a measurement. */
	memset(p, 0, cap);
	return p;
}

/* ------------------------------------------------------------------------- */
/* The measured loops                                                        */

static void run_lat_client(const struct opts *o, int fd, struct result *res)
{
	const bool spin = o->mode == MODE_LAT_SPIN;
	long iters, warm;
	plan(o, &iters, &warm);
	const long n = warm + iters;
	uint8_t *sbuf = alloc_touched(o->size), *rbuf = alloc_touched(o->size);
	int64_t *ts = malloc(sizeof(*ts) * (size_t)(n + 1));
	if (ts == NULL)
		die("out of memory");

	for (long i = 0; i < n; i++) {
		ts[i] = now_ns();
		stamp(sbuf, o->size, i, ROLE_CLIENT);
		send_all(fd, sbuf, o->size);
		if (spin)
			recv_all_spin(fd, rbuf, o->size);
		else
			recv_all(fd, rbuf, o->size);
		check(rbuf, o->size, i, ROLE_SERVER);
	}
	ts[n] = now_ns();

	int64_t *rt = ts + warm;
	for (long i = 0; i < iters; i++)
		rt[i] = ts[warm + i + 1] - ts[warm + i];
	qsort(rt, (size_t)iters, sizeof(*rt), cmp_i64);
	double sum = 0;
	for (long i = 0; i < iters; i++)
		sum += (double)rt[i];
	*res = (struct result){
		.iters = iters,
		.avg_us = sum / (double)iters / 2e3,
		.min_us = (double)rt[0] / 2e3,
		.p50_us = (double)rt[pct_index((size_t)iters, 50)] / 2e3,
		.p99_us = (double)rt[pct_index((size_t)iters, 99)] / 2e3,
		.bw_mbps = -1,
	};
	free(ts);
	free(sbuf);
	free(rbuf);
}

static void run_lat_server(const struct opts *o, int fd)
{
	const bool spin = o->mode == MODE_LAT_SPIN;
	long iters, warm;
	plan(o, &iters, &warm);
	const long n = warm + iters;
	uint8_t *sbuf = alloc_touched(o->size), *rbuf = alloc_touched(o->size);

	for (long i = 0; i < n; i++) {
		if (spin)
			recv_all_spin(fd, rbuf, o->size);
		else
			recv_all(fd, rbuf, o->size);
		check(rbuf, o->size, i, ROLE_CLIENT);
		stamp(sbuf, o->size, i, ROLE_SERVER);
		send_all(fd, sbuf, o->size);
	}
	free(sbuf);
	free(rbuf);
}

static void run_bw_client(const struct opts *o, int fd)
{
	long iters, warm;
	plan(o, &iters, &warm);
	const long n = warm + iters;
	uint8_t *sbuf = alloc_touched(o->size), byte;

	for (long i = 0; i < n; i++) {
		stamp(sbuf, o->size, i, ROLE_CLIENT);
		send_all(fd, sbuf, o->size);
	}
	/* Stay until the receiver has everything and closes. */
	if (shutdown(fd, SHUT_WR) != 0)
		die_errno("shutdown");
	while (recv(fd, &byte, 1, 0) > 0)
		;
	free(sbuf);
}

static void run_bw_server(const struct opts *o, int fd, struct result *res)
{
	long iters, warm;
	plan(o, &iters, &warm);
	const long n = warm + iters;
	const long chunks = iters < BW_CHUNKS ? iters : BW_CHUNKS;
	uint8_t *rbuf = alloc_touched(o->size);
	double bw[BW_CHUNKS];
	long c = 0, first = warm; /* the chunk being timed and its first message */
	int64_t t0 = 0;

	for (long i = 0; i < n; i++) {
		if (i == warm)
			t0 = now_ns();
		recv_all(fd, rbuf, o->size);
		check(rbuf, o->size, i, ROLE_CLIENT);
		/* Chunk c is messages [warm + c * iters / chunks, warm + (c + 1) *
		 * iters / chunks): timed from the completion of the message before
		 * it to the completion of its last one. */
		if (i >= warm && i + 1 == warm + (c + 1) * iters / chunks) {
			int64_t t1 = now_ns();
			double ns = (double)(t1 - t0 > 0 ? t1 - t0 : 1);
			bw[c++] = (double)(i + 1 - first) * (double)o->size * 1e3 / ns;
			t0 = t1;
			first = i + 1;
		}
	}
	qsort(bw, (size_t)chunks, sizeof(double), cmp_double);
	*res = (struct result){
		.iters = iters,
		.avg_us = -1,
		.min_us = -1,
		.p50_us = -1,
		.p99_us = -1,
		.bw_mbps = bw[pct_index((size_t)chunks, 50)],
	};
	free(rbuf);
}

/* ------------------------------------------------------------------------- */
/* Processes                                                                 */

/* The parent, ended by a signal (timeout(1), an interrupt, its own alarm):
 * takes the children along and reaps them, then ends by the same signal.
 * PR_SET_PDEATHSIG would kill them too, but they would linger as zombies
 * until init reaps them. Only async-signal-safe calls here. */
static void on_fatal_signal(int sig)
{
	for (int i = 0; i < 2; i++)
		if (child_pid[i] > 0)
			kill((pid_t)child_pid[i], SIGKILL);
	for (int i = 0; i < 2; i++)
		if (child_pid[i] > 0)
			waitpid((pid_t)child_pid[i], NULL, 0);
	signal(sig, SIG_DFL);
	raise(sig);
}

static const int fatal_signals[] = { SIGTERM, SIGINT, SIGHUP, SIGALRM };

static void set_fatal_handlers(void (*handler)(int))
{
	struct sigaction sa = { .sa_handler = handler };
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
		sigaction(fatal_signals[i], &sa, NULL);
}

/* Both children: die with the parent, end by themselves after the timeout,
 * run on their CPU. */
static void child_setup(const struct opts *o, enum role role, pid_t parent)
{
	who = role == ROLE_CLIENT ? "sock-baseline: client" : "sock-baseline: server";
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
		die_errno("prctl(PR_SET_PDEATHSIG)");
	/* The parent may have gone before prctl: then nobody would kill us. */
	if (getppid() != parent)
		_exit(1);
	/* The parent's handlers are not ours: the alarm must kill. */
	set_fatal_handlers(SIG_DFL);
	alarm((unsigned)o->timeout_s);
	if (o->pin) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(o->cpu[role], &set);
		if (sched_setaffinity(0, sizeof(set), &set) != 0)
			die("cannot pin to CPU %d: %s", o->cpu[role], strerrordesc_np(errno));
	}
}

static void child_finish(const struct opts *o, enum role role, int fd, int res_fd)
{
	struct result res = { 0 };
	bool measures = (o->mode == MODE_BW) == (role == ROLE_SERVER);

	set_nodelay(fd);
	if (o->mode == MODE_BW) {
		if (role == ROLE_SERVER)
			run_bw_server(o, fd, &res);
		else
			run_bw_client(o, fd);
	} else {
		if (role == ROLE_CLIENT)
			run_lat_client(o, fd, &res);
		else
			run_lat_server(o, fd);
	}
	if (measures)
		write_full(res_fd, &res, sizeof(res), "write (result pipe)");
	close(fd);
	_exit(0);
}

static void __attribute__((noreturn))
server_main(const struct opts *o, pid_t parent, int port_fd, int res_fd)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	socklen_t alen = sizeof(addr);
	int one = 1, lfd, fd;
	uint16_t port;

	child_setup(o, ROLE_SERVER, parent);
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		die_errno("socket");
	if (setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0)
		die_errno("setsockopt(SO_REUSEADDR)");
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = 0; /* the kernel chooses a free port */
	if (bind(lfd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		die_errno("bind 127.0.0.1:0");
	if (listen(lfd, 1) != 0)
		die_errno("listen");
	if (getsockname(lfd, (struct sockaddr *)&addr, &alen) != 0)
		die_errno("getsockname");
	port = ntohs(addr.sin_port);
	/* Listening before the port is reported: the client can connect at
	 * once, with no retry and no sleep. */
	write_full(port_fd, &port, sizeof(port), "write (port pipe)");
	close(port_fd);
	fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
	if (fd < 0)
		die_errno("accept");
	close(lfd);
	child_finish(o, ROLE_SERVER, fd, res_fd);
	_exit(0);
}

static void __attribute__((noreturn))
client_main(const struct opts *o, pid_t parent, uint16_t port, int res_fd)
{
	struct sockaddr_in addr = { .sin_family = AF_INET };
	int fd;

	child_setup(o, ROLE_CLIENT, parent);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		die_errno("socket");
	addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	addr.sin_port = htons(port);
	if (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) != 0)
		die("connect 127.0.0.1:%u: %s", port, strerrordesc_np(errno));
	child_finish(o, ROLE_CLIENT, fd, res_fd);
	_exit(0);
}

/* Waits for a child; returns true if it exited 0, else says how it ended. */
static bool reap(pid_t pid, enum role role)
{
	int status;
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			fprintf(stderr, "sock-baseline: waitpid: %s\n", strerrordesc_np(errno));
			return false;
		}
	}
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return true;
	if (WIFSIGNALED(status))
		fprintf(stderr, "sock-baseline: %s killed by signal %d (%s)%s\n", role_names[role],
			WTERMSIG(status), sigabbrev_np(WTERMSIG(status)),
			WTERMSIG(status) == SIGALRM ? ": timed out" : "");
	else
		fprintf(stderr, "sock-baseline: %s exited with status %d\n", role_names[role],
			WEXITSTATUS(status));
	return false;
}

/* ------------------------------------------------------------------------- */
/* Output                                                                    */

static void print_header(const struct opts *o, FILE *f)
{
	long iters, warm;
	plan(o, &iters, &warm);
	fprintf(f, "# sock-baseline: plain TCP over loopback (127.0.0.1), two processes "
		   "(fork), TCP_NODELAY\n");
	if (o->pin)
		fprintf(f,
			"# client (%s) pinned to CPU %d, server (%s) pinned to CPU %d "
			"(sched_setaffinity)\n",
			o->mode == MODE_BW ? "sender" : "sends the ping", o->cpu[ROLE_CLIENT],
			o->mode == MODE_BW ? "receiver" : "sends the pong", o->cpu[ROLE_SERVER]);
	else
		fprintf(f, "# processes NOT pinned (the scheduler places them; --pin pins "
			   "them to CPUs 0 and 1)\n");
	switch (o->mode) {
	case MODE_LAT:
		fprintf(f,
			"# lat: blocking send/recv ping-pong; one-way = half the round trip;\n"
			"#      lat_us_avg/min/p50/p99 over iters after iters/10 warmup; each round trip "
			"includes one clock read\n");
		break;
	case MODE_LAT_SPIN:
		fprintf(f,
			"# lat-spin: ping-pong, both sides spin on recv(MSG_DONTWAIT), send "
			"blocking;\n#      one-way = half the round trip; lat_us_avg/min/p50/p99 over iters "
			"after iters/10 warmup\n");
		break;
	case MODE_BW:
		fprintf(f,
			"# bw: one-way stream, blocking send/recv of whole messages, measured at "
			"the receiver;\n#     MB/s = 10^6 B/s, median of %d chunks of the iters "
			"messages after iters/10 warmup\n",
			BW_CHUNKS);
		break;
	}
	fprintf(f,
		"# clock CLOCK_MONOTONIC_RAW, %.0f ns a read; each process ends itself "
		"after %d s\n",
		clock_cost_ns(), o->timeout_s);
	if (!o->json)
		fprintf(f, "%-5s %-19s %-8s %9s %7s %10s %10s %10s %10s %9s\n", "test", "transport",
			"protocol", "size", "iters", "lat_us_avg", "lat_us_min", "lat_us_p50",
			"lat_us_p99", "bw_MBps");
	fflush(f);
}

static void fmt_num(char *out, size_t len, double v, int prec, bool json)
{
	if (v < 0)
		snprintf(out, len, json ? "null" : "-");
	else
		snprintf(out, len, "%.*f", prec, v);
}

static void print_row(const struct opts *o, const struct result *r)
{
	const char *test = o->mode == MODE_BW ? "bw" : "lat";
	const char *protocol = o->mode == MODE_LAT_SPIN ? "spin" : "blocking";
	char avg[32], min[32], p50[32], p99[32], bw[32];

	fmt_num(avg, sizeof(avg), r->avg_us, 3, o->json);
	fmt_num(min, sizeof(min), r->min_us, 3, o->json);
	fmt_num(p50, sizeof(p50), r->p50_us, 3, o->json);
	fmt_num(p99, sizeof(p99), r->p99_us, 3, o->json);
	fmt_num(bw, sizeof(bw), r->bw_mbps, 1, o->json);
	if (o->json)
		printf("{\"test\":\"%s\",\"transport\":\"socket-tcp\",\"protocol\":\"%s\","
		       "\"size\":%zu,\"iters\":%ld,\"lat_us_avg\":%s,\"lat_us_min\":%s,"
		       "\"lat_us_p50\":%s,\"lat_us_p99\":%s,\"bw_MBps\":%s}\n",
		       test, protocol, o->size, r->iters, avg, min, p50, p99, bw);
	else
		printf("%-5s %-19s %-8s %9zu %7ld %10s %10s %10s %10s %9s\n", test, "socket-tcp",
		       protocol, o->size, r->iters, avg, min, p50, p99, bw);
	fflush(stdout);
}

/* ------------------------------------------------------------------------- */
/* Options                                                                   */

static bool parse_size(const char *s, size_t *out)
{
	char *end;
	errno = 0;
	if (*s < '0' || *s > '9')
		return false;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0)
		return false;
	unsigned shift = 0;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	default:
		break;
	}
	if (*end != '\0' || v == 0 || v > (MAX_SIZE >> shift))
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

static bool parse_cpus(const char *s, int cpu[2])
{
	long a, b;
	char buf[64], *comma;
	if (strlen(s) >= sizeof(buf))
		return false;
	strcpy(buf, s);
	comma = strchr(buf, ',');
	if (comma == NULL)
		return false;
	*comma = '\0';
	if (!parse_long(buf, 0, CPU_SETSIZE - 1, &a) ||
	    !parse_long(comma + 1, 0, CPU_SETSIZE - 1, &b) || a == b)
		return false;
	cpu[ROLE_CLIENT] = (int)a;
	cpu[ROLE_SERVER] = (int)b;
	return true;
}

/* Returns 0 to run, 1 to exit 0 (help), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_JSON = 256, OPT_SIZE, OPT_ITERS, OPT_PIN, OPT_CPUS, OPT_TIMEOUT, OPT_VERSION };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "size", required_argument, NULL, OPT_SIZE },
		{ "iters", required_argument, NULL, OPT_ITERS },
		{ "pin", no_argument, NULL, OPT_PIN },
		{ "cpus", required_argument, NULL, OPT_CPUS },
		{ "timeout", required_argument, NULL, OPT_TIMEOUT },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	bool have_mode = false;
	long v;
	int c;

	*o = (struct opts){ .cpu = { 0, 1 }, .timeout_s = DEFAULT_TIMEOUT_S };
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_SIZE:
			if (!parse_size(optarg, &o->size)) {
				fprintf(stderr,
					"sock-baseline: bad size '%s' (bytes, optional k, m "
					"or g suffix, from 1 B to 1g)\n",
					optarg);
				return 2;
			}
			break;
		case OPT_ITERS:
			if (!parse_long(optarg, 1, 100000000, &v)) {
				fprintf(stderr,
					"sock-baseline: --iters wants a count from 1 to 10^8\n");
				return 2;
			}
			o->iters = v;
			break;
		case OPT_PIN:
			o->pin = true;
			break;
		case OPT_CPUS:
			if (!parse_cpus(optarg, o->cpu)) {
				fprintf(stderr, "sock-baseline: --cpus wants two different CPU "
						"numbers, A,B\n");
				return 2;
			}
			o->pin = true;
			break;
		case OPT_TIMEOUT:
			if (!parse_long(optarg, 1, 86400, &v)) {
				fprintf(stderr,
					"sock-baseline: --timeout wants seconds from 1 to 86400\n");
				return 2;
			}
			o->timeout_s = (int)v;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case OPT_VERSION:
			printf("sock-baseline (xport) %s\n", XPORT_VERSION_STRING);
			return 1;
		default:
			fprintf(stderr, "sock-baseline: try --help\n");
			return 2;
		}
	}
	if (optind < argc) {
		const char *m = argv[optind++];
		for (int i = 0; i < (int)(sizeof(mode_names) / sizeof(mode_names[0])); i++) {
			if (strcmp(m, mode_names[i]) == 0) {
				o->mode = (enum mode)i;
				have_mode = true;
			}
		}
		if (!have_mode) {
			fprintf(stderr, "sock-baseline: unknown test '%s' (lat, lat-spin or bw)\n",
				m);
			return 2;
		}
	}
	if (!have_mode) {
		usage(stderr);
		return 2;
	}
	if (optind < argc) {
		fprintf(stderr, "sock-baseline: unexpected argument '%s'; try --help\n",
			argv[optind]);
		return 2;
	}
	if (o->size == 0)
		o->size = o->mode == MODE_BW ? DEFAULT_BW_SIZE : DEFAULT_LAT_SIZE;
	if (o->pin) {
		cpu_set_t allowed;
		if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
			fprintf(stderr, "sock-baseline: sched_getaffinity: %s\n",
				strerrordesc_np(errno));
			return 2;
		}
		for (int r = 0; r < 2; r++) {
			if (!CPU_ISSET(o->cpu[r], &allowed)) {
				fprintf(stderr,
					"sock-baseline: cannot pin the %s to CPU %d: not among this "
					"process's CPUs (see taskset -p $$); use --cpus A,B\n",
					role_names[r], o->cpu[r]);
				return 2;
			}
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	int port_pipe[2], res_pipe[2];
	pid_t parent = getpid(), server, client;
	uint16_t port;
	struct result res;
	bool ok;
	int rc = parse_args(argc, argv, &o);

	if (rc != 0)
		return rc == 1 ? 0 : 2;
	print_header(&o, o.json ? stderr : stdout);
	/* Should a child hang past its own alarm, the parent ends too, and
	 * PR_SET_PDEATHSIG takes the children with it. */
	set_fatal_handlers(on_fatal_signal);
	alarm((unsigned)o.timeout_s + 5);

	if (pipe2(port_pipe, O_CLOEXEC) != 0 || pipe2(res_pipe, O_CLOEXEC) != 0)
		die_errno("pipe2");
	fflush(NULL); /* nothing buffered is duplicated into the children */
	server = fork();
	if (server < 0)
		die_errno("fork");
	if (server == 0) {
		close(port_pipe[0]);
		close(res_pipe[0]);
		server_main(&o, parent, port_pipe[1], res_pipe[1]);
	}
	child_pid[ROLE_SERVER] = server;
	close(port_pipe[1]);
	/* Wait on the pipe, never on a sleep: EOF here means the server died
	 * before listening (it has said why on stderr). */
	if (read_full(port_pipe[0], &port, sizeof(port), "read (port pipe)") != sizeof(port)) {
		close(res_pipe[1]);
		reap(server, ROLE_SERVER);
		die("the server did not report its port");
	}
	close(port_pipe[0]);

	client = fork();
	if (client < 0) {
		kill(server, SIGKILL);
		die_errno("fork");
	}
	if (client == 0) {
		close(res_pipe[0]);
		client_main(&o, parent, port, res_pipe[1]);
	}
	child_pid[ROLE_CLIENT] = client;
	close(res_pipe[1]);

	ok = read_full(res_pipe[0], &res, sizeof(res), "read (result pipe)") == sizeof(res);
	close(res_pipe[0]);
	if (!ok) {
		/* The measuring side is gone; the other may be blocked on it. */
		kill(server, SIGKILL);
		kill(client, SIGKILL);
	}
	ok &= reap(client, ROLE_CLIENT);
	ok &= reap(server, ROLE_SERVER);
	if (!ok) {
		fprintf(stderr, "sock-baseline: %s %zu B failed\n", mode_names[o.mode], o.size);
		return 1;
	}
	print_row(&o, &res);
	return 0;
}
