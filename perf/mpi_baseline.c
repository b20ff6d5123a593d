/* SPDX-License-Identifier: MIT */
/*
 * mpi-baseline: the Open MPI rows of perf/compare-p2p.py (ob1 over vader,
 * and over tcp for the message rate). Two ranks of an MPI job measure what
 * xport-perf measures, the same way, so that the figures stand side by side:
 *
 *  - lat: ping-pong of SIZE bytes (default 8). Each side posts its receive
 *    before the message it waits for can be sent (MPI_Irecv, then MPI_Send,
 *    then MPI_Wait), so the expected path is measured. One clock read per
 *    round trip on rank 0; one-way latency is half the round trip, p50 and
 *    p99 over ITERS round trips after ITERS/10 of warmup.
 *  - bw: rank 1 posts a window of WINDOW (64) receives of SIZE bytes (default
 *    1 MiB) into distinct buffers, as xport-perf does (--one-buffer: all
 *    into one buffer, as osu_bw and ucx_perftest do, which keeps the
 *    receiver's writes in its cache), reads the clock and sends rank 0 a
 *    zero-byte "go"; rank 0 then sends the window (MPI_Isend of one buffer,
 *    MPI_Waitall). Bandwidth is taken at the receiver: WINDOW x SIZE bytes
 *    from just before its go to its last completion. The median over ITERS
 *    rounds (default 10, after one warmup round) is reported. Unlike
 *    xport-perf's out-of-band barrier, the go crosses the measured
 *    transport; it is one small message (~0.1 us) in a round of milliseconds.
 *  - rate: as bw, over small messages (default 8 B), but a round is 8192
 *    messages with at most WINDOW in flight (the sender waits for its oldest
 *    send before the next), as xport-perf's rate between processes, so that
 *    the go stays small beside the round; the median over ITERS rounds
 *    (default 40, after a tenth of that as warmup) in Mmsg_per_s (10^6
 *    messages/s), at the receiver.
 *  - Every received message's first and last bytes are checked (they change
 *    with every iteration or round), so a run that drops data fails instead
 *    of reporting a number.
 *
 * Output: one JSON object per test on stdout, from rank 0, with the keys of
 * xport-perf's rows (test, transport, size, iters, lat_us_p50, lat_us_p99,
 * bw_MBps; bw and rate rows also Mmsg_per_s, window, msgs_per_round and
 * recv_buffers).
 * MB/s = 10^6 B/s.
 * A header on stderr says which MPI library, which Open MPI components the
 * environment asked for, and which CPUs each rank may run on.
 *
 * Build and run (what compare-p2p.py does):
 *   mpicc -O2 -std=c11 -o build/perf/mpi-baseline perf/mpi_baseline.c
 *   mpirun --allow-run-as-root -np 2 --bind-to core --mca pml ob1 \
 *       --mca btl self,vader build/perf/mpi-baseline lat|bw|rate|all
 * This is not part of the Meson build: it needs an MPI compiler wrapper.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#include <mpi.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "perf_util.h"

/* compare-p2p.py passes meson's project version, as meson does for the
 * other programs; a build by hand says so instead of inventing one. */
#ifndef XPORT_VERSION_STRING
#define XPORT_VERSION_STRING "unknown (built outside perf/compare-p2p.py)"
#endif

#define TAG_LAT 0x1a7
#define TAG_BW 0xb3
#define TAG_GO 0x60
/* rate: messages in a round, as xport-perf's NET_ROUND_MSGS. */
#define RATE_ROUND_MSGS 8192

struct opts {
	int lat, bw, rate;
	long lat_size, bw_size, rate_size;
	long iters; /* 0: the default of the test */
	int window;
	int one_buffer; /* bw, rate: every receive of a round into one buffer */
	const char *transport;
};

static int me;

static void die(const char *fmt, const char *arg)
{
	fprintf(stderr, "mpi-baseline: rank %d: ", me);
	fprintf(stderr, fmt, arg);
	fputc('\n', stderr);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

static void *alloc_touched(size_t len)
{
	size_t cap = (len + 4095) & ~(size_t)4095;
	void *p = aligned_alloc(4096, cap != 0 ? cap : 4096);
	if (p == NULL)
		die("out of memory (%s)", "buffers");
	/* Touch now so page faults never land in a measurement. */
	memset(p, 0, cap != 0 ? cap : 4096);
	return p;
}

/* The first and last bytes of a message: they change with @i and the sender. */
static void stamp(uint8_t *buf, size_t size, long i, int from)
{
	if (size == 0)
		return;
	buf[0] = (uint8_t)(i * 7 + from + 1);
	buf[size - 1] = (uint8_t)(i * 13 + from + 3);
}

static void check(const uint8_t *buf, size_t size, long i, int from, const char *test)
{
	if (size == 0)
		return;
	if (buf[0] != (uint8_t)(i * 7 + from + 1) || buf[size - 1] != (uint8_t)(i * 13 + from + 3))
		die("%s: a received message does not hold what was sent", test);
}

static void run_lat(const struct opts *o, size_t size)
{
	const int peer = 1 - me;
	const long iters = o->iters > 0 ? o->iters : 10000, warm = iters / 10, n = warm + iters;
	uint8_t *sbuf = alloc_touched(size), *rbuf = alloc_touched(size);
	int64_t *ts = me == 0 ? calloc((size_t)n + 1, sizeof(*ts)) : NULL;
	MPI_Request rr;

	if (me == 0 && ts == NULL)
		die("out of memory (%s)", "timestamps");
	if (me == 1) /* The first ping's receive is posted before rank 0 may send. */
		MPI_Irecv(rbuf, (int)size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, &rr);
	MPI_Barrier(MPI_COMM_WORLD);
	if (me == 0) {
		for (long i = 0; i < n; i++) {
			ts[i] = now_ns();
			stamp(sbuf, size, i, me);
			MPI_Irecv(rbuf, (int)size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD, &rr);
			MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
			MPI_Wait(&rr, MPI_STATUS_IGNORE);
			check(rbuf, size, i, peer, "lat");
		}
		ts[n] = now_ns();
	} else {
		for (long i = 0; i < n; i++) {
			MPI_Wait(&rr, MPI_STATUS_IGNORE);
			check(rbuf, size, i, peer, "lat");
			/* The next ping cannot come before this pong arrives. */
			if (i + 1 < n)
				MPI_Irecv(rbuf, (int)size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD,
					  &rr);
			stamp(sbuf, size, i, me);
			MPI_Send(sbuf, (int)size, MPI_BYTE, peer, TAG_LAT, MPI_COMM_WORLD);
		}
	}
	MPI_Barrier(MPI_COMM_WORLD);
	if (me == 0) {
		int64_t *rt = ts + warm;
		for (long i = 0; i < iters; i++)
			rt[i] = ts[warm + i + 1] - ts[warm + i];
		qsort(rt, (size_t)iters, sizeof(*rt), cmp_i64);
		double sum = 0;
		for (long i = 0; i < iters; i++)
			sum += (double)rt[i];
		printf("{\"test\":\"lat\",\"transport\":\"%s\",\"size\":%zu,\"iters\":%ld,"
		       "\"lat_us_avg\":%.3f,\"lat_us_min\":%.3f,\"lat_us_p50\":%.3f,"
		       "\"lat_us_p99\":%.3f,\"bw_MBps\":null}\n",
		       o->transport, size, iters, sum / (double)iters / 2e3, (double)rt[0] / 2e3,
		       (double)rt[pct_index((size_t)iters, 50)] / 2e3,
		       (double)rt[pct_index((size_t)iters, 99)] / 2e3);
		fflush(stdout);
	}
	free(ts);
	free(sbuf);
	free(rbuf);
}

/*
 * bw and rate: rounds of @n messages of @size bytes, at most a window in
 * flight, into distinct receive buffers (or one, --one-buffer), timed at
 * the receiver from its go to its last completion.
 */
static void run_stream(const struct opts *o, const char *test, size_t size, long n, long rounds,
		       long warm)
{
	const int peer = 1 - me, w = o->window;
	const long nbufs = o->one_buffer ? 1 : n;
	uint8_t *sbuf = NULL, *win = NULL;
	MPI_Request *req = calloc((size_t)n, sizeof(*req));
	/* Per round, Mmsg/s; the bandwidth is that times the size. */
	double *rate = calloc((size_t)rounds, sizeof(*rate));

	if (req == NULL || rate == NULL)
		die("out of memory (%s)", "requests");
	if (me == 0)
		sbuf = alloc_touched(size);
	else
		win = alloc_touched(size * (size_t)nbufs);
	MPI_Barrier(MPI_COMM_WORLD);
	for (long r = 0; r < warm + rounds; r++) {
		if (me == 0) {
			/* The previous round's sends completed: the buffer is ours. */
			stamp(sbuf, size, r, me);
			MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			/* A window in flight: each send waits for the one a window
			 * before it (in bw a round is one window: no wait). */
			for (long k = 0; k < n; k++) {
				if (k >= w)
					MPI_Wait(&req[k % w], MPI_STATUS_IGNORE);
				MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD,
					  &req[k % w]);
			}
			MPI_Waitall(n < w ? (int)n : w, req, MPI_STATUSES_IGNORE);
		} else {
			for (long k = 0; k < n; k++)
				MPI_Irecv(win + (size_t)(o->one_buffer ? 0 : k) * size, (int)size,
					  MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &req[k]);
			int64_t t0 = now_ns();
			MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD);
			MPI_Waitall((int)n, req, MPI_STATUSES_IGNORE);
			int64_t t1 = now_ns();
			for (long k = 0; k < nbufs; k++)
				check(win + (size_t)k * size, size, r, peer, test);
			if (r >= warm)
				rate[r - warm] =
					(double)n * 1e3 / (double)(t1 - t0 > 0 ? t1 - t0 : 1);
		}
	}
	/* The receiver's figures reach rank 0, which prints. */
	if (me == 1)
		MPI_Send(rate, (int)rounds, MPI_DOUBLE, 0, TAG_BW, MPI_COMM_WORLD);
	else
		MPI_Recv(rate, (int)rounds, MPI_DOUBLE, 1, TAG_BW, MPI_COMM_WORLD,
			 MPI_STATUS_IGNORE);
	if (me == 0) {
		qsort(rate, (size_t)rounds, sizeof(*rate), cmp_double);
		double mmsg = rate[pct_index((size_t)rounds, 50)], mbps = mmsg * (double)size;
		printf("{\"test\":\"%s\",\"transport\":\"%s\",\"size\":%zu,\"iters\":%ld,"
		       "\"lat_us_avg\":null,\"lat_us_min\":null,\"lat_us_p50\":null,"
		       "\"lat_us_p99\":null,\"bw_MBps\":%.1f,\"Mmsg_per_s\":%.3f,\"window\":%d,"
		       "\"msgs_per_round\":%ld,\"recv_buffers\":%ld}\n",
		       test, o->transport, size, rounds, mbps, mmsg, w, n, nbufs);
		fflush(stdout);
	}
	free(req);
	free(rate);
	free(sbuf);
	free(win);
}

static void run_bw(const struct opts *o, size_t size)
{
	run_stream(o, "bw", size, o->window, o->iters > 0 ? o->iters : 10, 1);
}

static void run_rate(const struct opts *o, size_t size)
{
	/* Whole windows, at least RATE_ROUND_MSGS messages. */
	long n = (RATE_ROUND_MSGS + o->window - 1) / o->window * o->window;
	long rounds = o->iters > 0 ? o->iters : 40;
	run_stream(o, "rate", size, n, rounds, rounds / 10 > 0 ? rounds / 10 : 1);
}

/* "0-1" style list of the CPUs this process may run on. */
static void cpu_list(char *out, size_t cap)
{
	cpu_set_t set;
	size_t len = 0;
	out[0] = '\0';
	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		snprintf(out, cap, "?");
		return;
	}
	for (unsigned c = 0; c < CPU_SETSIZE && len + 16 < cap; c++) {
		if (!CPU_ISSET(c, &set))
			continue;
		unsigned e = c;
		while (e + 1 < CPU_SETSIZE && CPU_ISSET(e + 1, &set))
			e++;
		len += (size_t)snprintf(out + len, cap - len, len ? ",%u" : "%u", c);
		if (e > c)
			len += (size_t)snprintf(out + len, cap - len, "-%u", e);
		c = e;
	}
}

static void header(const struct opts *o)
{
	char mine[128], cpus[2][128], lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;
	cpu_list(mine, sizeof(mine));
	MPI_Gather(mine, sizeof(mine), MPI_CHAR, cpus, sizeof(cpus[0]), MPI_CHAR, 0,
		   MPI_COMM_WORLD);
	if (me != 0)
		return;
	MPI_Get_library_version(lib, &len);
	char *nl = strchr(lib, '\n');
	if (nl != NULL)
		*nl = '\0';
	const char *pml = getenv("OMPI_MCA_pml"), *btl = getenv("OMPI_MCA_btl");
	const char *sc = getenv("OMPI_MCA_btl_vader_single_copy_mechanism");
	fprintf(stderr, "# mpi-baseline (%s): transport %s; pml %s, btl %s%s%s\n", lib,
		o->transport, pml ? pml : "(default)", btl ? btl : "(default)",
		sc ? ", vader single copy " : "", sc ? sc : "");
	fprintf(stderr, "# rank 0 may run on CPU %s, rank 1 on CPU %s\n", cpus[0], cpus[1]);
}

static long parse_long(const char *s, const char *what)
{
	char *end;
	long v = strtol(s, &end, 10);
	long mult = 1;
	if (*end == 'k' || *end == 'K')
		mult = 1024, end++;
	else if (*end == 'm' || *end == 'M')
		mult = 1024 * 1024, end++;
	if (end == s || *end != '\0' || v < 0 || v > (1L << 30) / mult)
		die("bad %s", what);
	return v * mult;
}

static void usage(void)
{
	fputs("usage: mpirun -np 2 ... mpi-baseline [lat|bw|rate|all] [--size N] [--iters N]\n"
	      "                                     [--window N] [--one-buffer] [--transport LABEL]\n"
	      "                                     [--version]\n"
	      "  lat          ping-pong, one-way = half the round trip (default 8 B)\n"
	      "  bw           window of sends, measured at the receiver (default 1 MiB)\n"
	      "  rate         as bw, rounds of 8192 messages (default 8 B): Mmsg_per_s\n"
	      "  all          all three (the default)\n"
	      "  --size N     message size in bytes (k/m suffixes, x1024)\n"
	      "  --iters N    lat: round trips (default 10000); bw: rounds (default 10);\n"
	      "               rate: rounds (default 40)\n"
	      "  --window N   bw, rate: sends in flight (default 64)\n"
	      "  --one-buffer bw, rate: every receive of a round into one buffer (as osu_bw,\n"
	      "               ucx_perftest), not one buffer each (as xport-perf)\n"
	      "  --transport  the label of the JSON rows (default: from OMPI_MCA_btl,\n"
	      "               e.g. vader for self,vader)\n"
	      "  --version    print the version and exit\n",
	      stderr);
}

int main(int argc, char **argv)
{
	struct opts o = {
		.lat = 1, .bw = 1, .lat_size = 8, .bw_size = 1048576, .rate_size = 8, .window = 64
	};
	long size = -1;
	int nranks;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "lat") == 0) {
			o.lat = 1, o.bw = o.rate = 0;
		} else if (strcmp(a, "bw") == 0) {
			o.lat = o.rate = 0, o.bw = 1;
		} else if (strcmp(a, "rate") == 0) {
			o.lat = o.bw = 0, o.rate = 1;
		} else if (strcmp(a, "all") == 0) {
			o.lat = o.bw = o.rate = 1;
		} else if (strcmp(a, "--one-buffer") == 0) {
			o.one_buffer = 1;
		} else if (strcmp(a, "--version") == 0) {
			if (me == 0)
				printf("mpi-baseline (xport) %s\n", XPORT_VERSION_STRING);
			MPI_Finalize();
			return 0;
		} else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			if (me == 0)
				usage();
			MPI_Finalize();
			return 0;
		} else if (i + 1 < argc && strcmp(a, "--size") == 0) {
			size = parse_long(argv[++i], "--size");
		} else if (i + 1 < argc && strcmp(a, "--iters") == 0) {
			o.iters = parse_long(argv[++i], "--iters");
		} else if (i + 1 < argc && strcmp(a, "--window") == 0) {
			o.window = (int)parse_long(argv[++i], "--window");
			if (o.window < 1 || o.window > 4096)
				die("bad %s", "--window");
		} else if (i + 1 < argc && strcmp(a, "--transport") == 0) {
			o.transport = argv[++i];
		} else {
			if (me == 0)
				usage();
			die("unknown argument '%s'", a);
		}
	}
	if (nranks != 2) {
		if (me == 0)
			fprintf(stderr,
				"mpi-baseline: measures between exactly 2 ranks (mpirun -np 2)\n");
		MPI_Finalize();
		return 2;
	}
	if (size >= 0)
		o.lat_size = o.bw_size = o.rate_size = size;
	if (o.bw && (size_t)o.bw_size * (size_t)o.window > ((size_t)1 << 31))
		die("%s: window x size above 2 GiB", "bw");
	if (o.rate &&
	    (size_t)o.rate_size * (RATE_ROUND_MSGS + (size_t)o.window) > ((size_t)1 << 31))
		die("%s: a round's receive buffers above 2 GiB", "rate");
	static char label[64];
	if (o.transport == NULL) {
		const char *btl = getenv("OMPI_MCA_btl"), *pml = getenv("OMPI_MCA_pml");
		if (pml != NULL && strcmp(pml, "ucx") == 0) {
			o.transport = "ucx";
		} else if (btl != NULL) {
			/* self,vader -> vader */
			const char *s = strstr(btl, "self,") == btl ? btl + 5 : btl;
			snprintf(label, sizeof(label), "%s", s);
			o.transport = label;
		} else {
			o.transport = "mpi";
		}
	}
	header(&o);
	if (o.lat)
		run_lat(&o, (size_t)o.lat_size);
	if (o.bw)
		run_bw(&o, (size_t)o.bw_size);
	if (o.rate)
		run_rate(&o, (size_t)o.rate_size);
	MPI_Finalize();
	return 0;
}
