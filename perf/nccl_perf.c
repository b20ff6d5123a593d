/* SPDX-License-Identifier: MIT */
/*
 * xport-nccl-perf: the NCCL plugin (libnccl-net-xport.so) measured as NCCL
 * drives it, between two processes on this host: a ping-pong of 8 bytes
 * (half the round trip: median, mean, minimum, p99) and the bandwidth of
 * 1 MiB and 64 MiB messages, with a window of grouped receives and the
 * sends that match them, as NCCL's proxy keeps its steps in flight.
 *
 *   xport-nccl-perf [--json] [--iters N] [--group G] [--no-pin] PLUGIN
 *
 * It loads the newest table (ncclNetPlugin_v12) with dlopen, as NCCL
 * 2.28 on would. The two processes trade listen handles and barriers
 * through pipes: a control channel apart from what is measured. The
 * bandwidth is measured at the receiver: the median over the groups of
 * a group's bytes over the time since the group before completed (from a
 * barrier for the first), as xport-perf reports the median over its
 * rounds; Mmsg_per_s is the whole run's. --json prints JSON lines with xport-perf's field names (a
 * "run" record, then one row per measure); without it, a table.
 */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../src/nccl/nccl_net_abi.h"

#ifndef XPORT_VERSION_STRING
#define XPORT_VERSION_STRING "unknown"
#endif

#define LAT_BYTES 8
#define MAX_GROUP 8  /* the plugin's maxRecvs */
#define WINDOW_MAX 8 /* NCCL's steps in flight on a connection */
#define INFLIGHT_BYTES (256ul << 20)

struct opts {
	bool json;
	bool pin;   /* each process on a CPU of its own, as xport-perf pins its ranks */
	long iters; /* ping-pong round trips */
	int group;  /* buffers per grouped receive */
	const char *plugin;
};

struct side {
	const struct xnccl_net_v12 *net;
	void *ctx, *lc, *sc, *rc;
	int in, out; /* pipes to the other process */
	int rank;    /* 0: the parent, who prints; 1: the child */
};

static void die(const char *what, int r)
{
	fprintf(stderr, "xport-nccl-perf: %s failed (%d)\n", what, r);
	exit(1);
}

#define CALL(what, call)                                                                           \
	do {                                                                                       \
		int r_ = (call);                                                                   \
		if (r_ != XNCCL_OK)                                                                \
			die(what, r_);                                                             \
	} while (0)

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC_RAW, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* What carries the send comm, as the plugin logs it ("connected over
 * rdma"): the rows' transport. */
static char route[16] = "tcp";

static void logger(enum xnccl_log_level level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	va_list ap;
	if (level == XNCCL_LOG_INFO) {
		char text[256];
		va_start(ap, fmt);
		vsnprintf(text, sizeof(text), fmt, ap);
		va_end(ap);
		const char *over = strstr(text, "send comm");
		over = over != NULL ? strstr(over, "connected over ") : NULL;
		if (over != NULL)
			sscanf(over + strlen("connected over "), "%15[a-z]", route);
		return;
	}
	if (level != XNCCL_LOG_WARN)
		return;
	va_start(ap, fmt);
	fprintf(stderr, "%s:%d ", file, line);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
}

/* ------------------------------------------------------------------------- */
/* The control channel                                                       */

static void ctl_send(struct side *s, const void *buf, size_t len)
{
	if (write(s->out, buf, len) != (ssize_t)len)
		die("a write to the other process", errno);
}

static void ctl_recv(struct side *s, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		struct pollfd pfd = { .fd = s->in, .events = POLLIN };
		if (poll(&pfd, 1, 120000) <= 0)
			die("waiting for the other process", ETIMEDOUT);
		ssize_t r = read(s->in, (char *)buf + got, len - got);
		if (r <= 0)
			die("a read from the other process", r == 0 ? EPIPE : errno);
		got += (size_t)r;
	}
}

static void ctl_barrier(struct side *s)
{
	char c = 'b';
	ctl_send(s, &c, 1);
	ctl_recv(s, &c, 1);
}

/* ------------------------------------------------------------------------- */
/* Setup: the table, a connection each way                                   */

static void side_open(struct side *s, const char *plugin)
{
	void *lib = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
	if (lib == NULL) {
		fprintf(stderr, "xport-nccl-perf: %s\n", dlerror());
		exit(1);
	}
	s->net = dlsym(lib, "ncclNetPlugin_v12");
	if (s->net == NULL)
		die("finding ncclNetPlugin_v12", -1);
	struct xnccl_comm_config cfg = { .traffic_class = -1 };
	CALL("init", s->net->init(&s->ctx, 1, &cfg, logger, NULL));
	unsigned char mine[XNCCL_HANDLE_BYTES], theirs[XNCCL_HANDLE_BYTES];
	CALL("listen", s->net->listen(s->ctx, 0, mine, &s->lc));
	ctl_send(s, mine, sizeof(mine));
	ctl_recv(s, theirs, sizeof(theirs));
	s->sc = s->rc = NULL;
	double end = now_s() + 30;
	while (s->sc == NULL || s->rc == NULL) {
		if (s->sc == NULL)
			CALL("connect", s->net->connect(s->ctx, 0, theirs, &s->sc, NULL));
		if (s->rc == NULL)
			CALL("accept", s->net->accept(s->lc, &s->rc, NULL));
		if (now_s() > end)
			die("connecting", ETIMEDOUT);
	}
}

static void side_close(struct side *s)
{
	CALL("closeSend", s->net->close_send(s->sc));
	CALL("closeRecv", s->net->close_recv(s->rc));
	CALL("closeListen", s->net->close_listen(s->lc));
	CALL("finalize", s->net->finalize(s->ctx));
}

/* Tests @req until done, yielding the CPU after each test that found it
 * pending, as NCCL's proxy thread does when no request progressed. */
static void wait_req(struct side *s, void *req)
{
	int done = 0;
	for (;;) {
		CALL("test", s->net->test(req, &done, NULL));
		if (done)
			return;
		sched_yield();
	}
}

/* Posts a send, trying again while the plugin has no room. */
static void *post_send(struct side *s, void *buf, size_t len, int tag, void *mh)
{
	void *req = NULL;
	while (req == NULL)
		CALL("isend", s->net->isend(s->sc, buf, len, tag, mh, NULL, &req));
	return req;
}

static void *post_recv(struct side *s, int n, void **bufs, size_t *lens, int *tags, void **mhs)
{
	void *req = NULL;
	while (req == NULL)
		CALL("irecv", s->net->irecv(s->rc, n, bufs, lens, tags, mhs, NULL, &req));
	return req;
}

/* ------------------------------------------------------------------------- */
/* Output, as xport-perf writes it                                           */

struct row {
	const char *test;
	size_t size;
	long iters;
	double avg_us, min_us, p50_us, p99_us; /* < 0: not measured */
	double bw_mbps, mmsg_s;
	int window, group;
};

static void num(char *out, size_t len, double v, int prec, bool json)
{
	if (v < 0)
		snprintf(out, len, json ? "null" : "-");
	else
		snprintf(out, len, "%.*f", prec, v);
}

static void print_row(const struct opts *o, const struct row *r)
{
	const double v[6] = { r->avg_us, r->min_us, r->p50_us, r->p99_us, r->bw_mbps, r->mmsg_s };
	const int prec[6] = { 3, 3, 3, 3, o->json ? 6 : 1, 3 };
	char f[6][32];
	for (int k = 0; k < 6; k++)
		num(f[k], sizeof(f[k]), v[k], prec[k], o->json);
	if (!o->json) {
		printf("%-5s %9zu %7ld %10s %10s %10s %10s %9s %10s\n", r->test, r->size, r->iters,
		       f[0], f[1], f[2], f[3], f[4], f[5]);
		return;
	}
	printf("{\"test\":\"%s\",\"transport\":\"%s\",\"protocol\":\"nccl_net_v12\","
	       "\"size\":%zu,\"iters\":%ld,\"lat_us_avg\":%s,\"lat_us_min\":%s,"
	       "\"lat_us_p50\":%s,\"lat_us_p99\":%s,\"bw_MBps\":%s,\"Mmsg_per_s\":%s",
	       r->test, route, r->size, r->iters, f[0], f[1], f[2], f[3], f[4], f[5]);
	if (r->window > 0)
		printf(",\"window\":%d,\"msgs_per_round\":%d,\"recv_buffers\":%d}\n", r->window,
		       r->group, r->window * r->group);
	else
		printf(",\"window\":null,\"msgs_per_round\":null,\"recv_buffers\":null}\n");
	fflush(stdout);
}

/* ------------------------------------------------------------------------- */
/* Latency: a ping-pong of 8 bytes                                           */

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void run_latency(struct side *s, const struct opts *o)
{
	static char sbuf[LAT_BYTES], rbuf[LAT_BYTES];
	void *smh, *rmh, *dst = rbuf;
	CALL("regMr", s->net->reg_mr(s->sc, sbuf, sizeof(sbuf), XNCCL_PTR_HOST, &smh));
	CALL("regMr", s->net->reg_mr(s->rc, rbuf, sizeof(rbuf), XNCCL_PTR_HOST, &rmh));
	long warm = o->iters / 10 + 100, total = warm + o->iters;
	double *rtt = malloc(sizeof(double) * (size_t)o->iters);
	size_t cap = LAT_BYTES;
	int tag = 1;
	ctl_barrier(s);
	/* The receive for the next message is always posted before it can
	 * come, as NCCL's proxy posts its steps ahead. */
	void *rreq = post_recv(s, 1, &dst, &cap, &tag, &rmh);
	for (long i = 0; i < total; i++) {
		double t0 = now_s();
		if (s->rank == 0) {
			void *sreq = post_send(s, sbuf, LAT_BYTES, tag, smh);
			wait_req(s, rreq);
			rreq = i + 1 < total ? post_recv(s, 1, &dst, &cap, &tag, &rmh) : NULL;
			wait_req(s, sreq);
		} else {
			wait_req(s, rreq);
			rreq = i + 1 < total ? post_recv(s, 1, &dst, &cap, &tag, &rmh) : NULL;
			wait_req(s, post_send(s, sbuf, LAT_BYTES, tag, smh));
		}
		if (i >= warm)
			rtt[i - warm] = now_s() - t0;
	}
	if (s->rank == 0) {
		qsort(rtt, (size_t)o->iters, sizeof(double), cmp_double);
		double sum = 0;
		for (long i = 0; i < o->iters; i++)
			sum += rtt[i];
		/* One way: half the round trip. */
		struct row r = { .test = "lat",
				 .size = LAT_BYTES,
				 .iters = o->iters,
				 .avg_us = sum / (double)o->iters / 2 * 1e6,
				 .min_us = rtt[0] / 2 * 1e6,
				 .p50_us = rtt[o->iters / 2] / 2 * 1e6,
				 .p99_us = rtt[o->iters * 99 / 100] / 2 * 1e6,
				 .bw_mbps = -1,
				 .mmsg_s = -1 };
		print_row(o, &r);
	}
	free(rtt);
	CALL("deregMr", s->net->dereg_mr(s->sc, smh));
	CALL("deregMr", s->net->dereg_mr(s->rc, rmh));
}

/* ------------------------------------------------------------------------- */
/* Bandwidth: a window of grouped receives, rank 0 to rank 1                 */

static void run_bandwidth(struct side *s, const struct opts *o, size_t size)
{
	int g = o->group;
	int window = (int)(INFLIGHT_BYTES / (size * (size_t)g));
	window = window < 1 ? 1 : window > WINDOW_MAX ? WINDOW_MAX : window;
	/* About 2 GiB a measure (at least 4 windows' worth), a window's
	 * worth before it to warm up. */
	long rounds = (long)((2ul << 30) / (size * (size_t)g));
	if (rounds < 4L * window)
		rounds = 4L * window;
	long warm = window, total = warm + rounds;
	size_t bytes = size * (size_t)g * (size_t)window;
	unsigned char *buf = malloc(bytes);
	if (buf == NULL)
		die("allocating the buffers", ENOMEM);
	memset(buf, s->rank + 1, bytes);
	void *mh;
	CALL("regMr",
	     s->net->reg_mr(s->rank == 0 ? s->sc : s->rc, buf, bytes, XNCCL_PTR_HOST, &mh));
	void *reqs[WINDOW_MAX * MAX_GROUP] = { NULL };
	int tags[MAX_GROUP];
	for (int k = 0; k < g; k++)
		tags[k] = 100 + k;
	double t0 = 0;
	/* The receiver's clock at each measured group's completion, oldest
	 * first: the figure is the median over groups, as xport-perf's is
	 * the median over rounds, so one slow group (the scheduler, on two
	 * CPUs) moves neither more than the other. */
	double *done = calloc((size_t)rounds, sizeof(double));
	long ndone = 0;
	if (done == NULL)
		die("allocating the timestamps", ENOMEM);
	ctl_barrier(s);
	for (long r = 0; r < total; r++) {
		int w = (int)(r % window);
		if (r == warm) {
			/* Drain the warm-up, then start the clock together. */
			for (int k = 0; k < window * g; k++)
				if (reqs[k] != NULL)
					wait_req(s, reqs[k]);
			memset(reqs, 0, sizeof(reqs));
			ctl_barrier(s);
			t0 = now_s();
		}
		unsigned char *base = buf + (size_t)w * g * size;
		if (s->rank == 0) {
			/* Each of the group's buffers is a send of its own. */
			for (int k = 0; k < g; k++) {
				void **q = &reqs[w * g + k];
				if (*q != NULL)
					wait_req(s, *q);
				*q = post_send(s, base + (size_t)k * size, size, tags[k], mh);
			}
		} else {
			void **q = &reqs[w * g];
			if (*q != NULL) {
				wait_req(s, *q);
				if (r - window >= warm)
					done[ndone++] = now_s();
			}
			void *dst[MAX_GROUP], *mhs[MAX_GROUP];
			size_t caps[MAX_GROUP];
			for (int k = 0; k < g; k++) {
				dst[k] = base + (size_t)k * size;
				caps[k] = size;
				mhs[k] = mh;
			}
			*q = post_recv(s, g, dst, caps, tags, mhs);
		}
	}
	/* The receiver's last groups, oldest first; then anything left. */
	for (long r = total - window; s->rank == 1 && r < total; r++) {
		void **q = &reqs[(r % window) * g];
		if (r < warm || *q == NULL)
			continue;
		wait_req(s, *q);
		*q = NULL;
		done[ndone++] = now_s();
	}
	for (int k = 0; k < window * g; k++)
		if (reqs[k] != NULL)
			wait_req(s, reqs[k]);
	/* The receiver's figures, the ones that count, to the printer: the
	 * whole time, and the median group's bandwidth. */
	double fig[2] = { now_s() - t0, 0 };
	if (s->rank == 1) {
		for (long i = ndone - 1; i > 0; i--)
			done[i] -= done[i - 1];
		if (ndone > 0)
			done[0] -= t0;
		qsort(done, (size_t)ndone, sizeof(double), cmp_double);
		if (ndone > 0)
			fig[1] = (double)g * (double)size / done[ndone / 2] / 1e6;
		ctl_send(s, fig, sizeof(fig));
	} else {
		ctl_recv(s, fig, sizeof(fig));
	}
	free(done);
	double secs = fig[0];
	if (s->rank == 0) {
		double msgs = (double)rounds * g;
		struct row row = { .test = "bw",
				   .size = size,
				   .iters = (long)msgs,
				   .avg_us = -1,
				   .min_us = -1,
				   .p50_us = -1,
				   .p99_us = -1,
				   .bw_mbps = fig[1],
				   .mmsg_s = msgs / secs / 1e6,
				   .window = window,
				   .group = g };
		print_row(o, &row);
	}
	CALL("deregMr", s->net->dereg_mr(s->rank == 0 ? s->sc : s->rc, mh));
	free(buf);
}

/* ------------------------------------------------------------------------- */

static void usage(void)
{
	fprintf(stderr,
		"usage: xport-nccl-perf [--json] [--iters N] [--group G] [--no-pin] PLUGIN\n"
		"  PLUGIN      the path of libnccl-net-xport.so\n"
		"  --json      JSON lines (xport-perf's fields) instead of a table\n"
		"  --iters N   ping-pong round trips (default 20000)\n"
		"  --group G   buffers per grouped receive, 1 to %d (default 4)\n"
		"  --no-pin    leave both processes where the scheduler puts them (default:\n"
		"              process r on the r-th CPU it may use, as xport-perf)\n",
		MAX_GROUP);
	exit(2);
}

/* Pins the calling process (and the threads it starts later: the plugin's)
 * to the @rank-th CPU it may use, as xport-perf pins rank r to CPU r % N,
 * so that the two tools are compared placed alike. */
static void pin_process(int rank)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) != 0 || CPU_COUNT(&set) < 2)
		return;
	int want = rank % CPU_COUNT(&set), seen = 0;
	for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &set) || seen++ != want)
			continue;
		cpu_set_t one;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		if (sched_setaffinity(0, sizeof(one), &one) != 0)
			die("sched_setaffinity", errno);
		return;
	}
}

static void run(struct side *s, const struct opts *o)
{
	if (o->pin)
		pin_process(s->rank);
	side_open(s, o->plugin);
	run_latency(s, o);
	run_bandwidth(s, o, 1ul << 20);
	run_bandwidth(s, o, 64ul << 20);
	ctl_barrier(s);
	side_close(s);
}

int main(int argc, char **argv)
{
	struct opts o = { .iters = 20000, .group = 4, .pin = true };
	static const struct option longs[] = { { "json", no_argument, NULL, 'j' },
					       { "iters", required_argument, NULL, 'i' },
					       { "group", required_argument, NULL, 'g' },
					       { "no-pin", no_argument, NULL, 'n' },
					       { "help", no_argument, NULL, 'h' },
					       { NULL, 0, NULL, 0 } };
	int c;
	while ((c = getopt_long(argc, argv, "", longs, NULL)) != -1) {
		if (c == 'j')
			o.json = true;
		else if (c == 'i')
			o.iters = atol(optarg);
		else if (c == 'g')
			o.group = atoi(optarg);
		else if (c == 'n')
			o.pin = false;
		else
			usage();
	}
	if (optind != argc - 1 || o.iters < 1 || o.group < 1 || o.group > MAX_GROUP)
		usage();
	o.plugin = argv[optind];
	/* Over loopback unless told otherwise: both processes are here. */
	setenv("XP_SOCKET_IFNAME", "lo", 0);

	int down[2], up[2];
	if (pipe(down) != 0 || pipe(up) != 0)
		die("pipe", errno);
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		die("fork", errno);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		struct side s = { .in = down[0], .out = up[1], .rank = 1 };
		run(&s, &o);
		_exit(0);
	}
	struct side s = { .in = up[0], .out = down[1], .rank = 0 };
	/* The rows say what carried them (route); not known before. */
	if (o.json)
		printf("{\"type\":\"run\",\"system\":\"xport\",\"tool\":\"xport-nccl-perf\","
		       "\"version\":\"%s\",\"command\":\"xport-nccl-perf\",\"transport\":\"nccl-plugin\","
		       "\"launcher\":null}\n",
		       XPORT_VERSION_STRING);
	else
		printf("%-5s %9s %7s %10s %10s %10s %10s %9s %10s\n", "test", "size", "iters",
		       "lat_us_avg", "lat_us_min", "lat_us_p50", "lat_us_p99", "bw_MBps",
		       "Mmsg_per_s");
	fflush(stdout);
	run(&s, &o);
	int st;
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
		fprintf(stderr, "xport-nccl-perf: the other process failed\n");
		return 1;
	}
	return 0;
}
