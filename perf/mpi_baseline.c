/* SPDX-License-Identifier: MIT */
/*
 * mpi-baseline: the Open MPI rows of perf/compare-tcp.sh --transport shm.
 * Two ranks of an MPI job measure what xport-perf measures, the same way,
 * so that the figures stand side by side:
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
 *  - Every received message's first and last bytes are checked (they change
 *    with every iteration or round), so a run that drops data fails instead
 *    of reporting a number.
 *
 * Output: one JSON object per test on stdout, from rank 0, with the keys of
 * xport-perf's rows (test, transport, size, iters, lat_us_p50, lat_us_p99,
 * bw_MBps; bw rows also window, msgs_per_round and recv_buffers).
 * MB/s = 10^6 B/s.
 * A header on stderr says which MPI library, which Open MPI components the
 * environment asked for, and which CPUs each rank may run on.
 *
 * Build and run (what compare-tcp.sh does):
 *   mpicc -O2 -std=c11 -o build/perf/mpi-baseline perf/mpi_baseline.c
 *   mpirun --allow-run-as-root -np 2 --bind-to core --mca pml ob1 \
 *       --mca btl self,vader build/perf/mpi-baseline lat|bw|all
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

/* compare-tcp.sh passes meson's project version, as meson does for the
 * other programs; a build by hand says so instead of inventing one. */
#ifndef XPORT_VERSION_STRING
#define XPORT_VERSION_STRING "unknown (built outside perf/compare-tcp.sh)"
#endif

#define TAG_LAT 0x1a7
#define TAG_BW 0xb3
#define TAG_GO 0x60

struct opts {
	int lat, bw;
	long lat_size, bw_size; /* -1: the default of the test */
	long iters;             /* 0: the default of the test */
	int window;
	int one_buffer; /* bw: every receive of a window into one buffer */
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

static void run_bw(const struct opts *o, size_t size)
{
	const int peer = 1 - me, w = o->window;
	const long rounds = o->iters > 0 ? o->iters : 10, warm = 1;
	uint8_t *sbuf = NULL, *win = NULL;
	MPI_Request *req = calloc((size_t)w, sizeof(*req));
	double *bw = calloc((size_t)rounds, sizeof(*bw));

	if (req == NULL || bw == NULL)
		die("out of memory (%s)", "requests");
	if (me == 0)
		sbuf = alloc_touched(size);
	else
		win = alloc_touched(size * (size_t)(o->one_buffer ? 1 : w));
	MPI_Barrier(MPI_COMM_WORLD);
	for (long r = 0; r < warm + rounds; r++) {
		if (me == 0) {
			/* The previous round's sends completed: the buffer is ours. */
			stamp(sbuf, size, r, me);
			MPI_Recv(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD,
				 MPI_STATUS_IGNORE);
			for (int k = 0; k < w; k++)
				MPI_Isend(sbuf, (int)size, MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD,
					  &req[k]);
			MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
		} else {
			for (int k = 0; k < w; k++)
				MPI_Irecv(win + (size_t)(o->one_buffer ? 0 : k) * size, (int)size,
					  MPI_BYTE, peer, TAG_BW, MPI_COMM_WORLD, &req[k]);
			int64_t t0 = now_ns();
			MPI_Send(NULL, 0, MPI_BYTE, peer, TAG_GO, MPI_COMM_WORLD);
			MPI_Waitall(w, req, MPI_STATUSES_IGNORE);
			int64_t t1 = now_ns();
			for (int k = 0; k < (o->one_buffer ? 1 : w); k++)
				check(win + (size_t)k * size, size, r, peer, "bw");
			if (r >= warm)
				bw[r - warm] = (double)w * (double)size * 1e3 /
					       (double)(t1 - t0 > 0 ? t1 - t0 : 1);
		}
	}
	/* The receiver's figures reach rank 0, which prints. */
	if (me == 1)
		MPI_Send(bw, (int)rounds, MPI_DOUBLE, 0, TAG_BW, MPI_COMM_WORLD);
	else
		MPI_Recv(bw, (int)rounds, MPI_DOUBLE, 1, TAG_BW, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
	if (me == 0) {
		qsort(bw, (size_t)rounds, sizeof(*bw), cmp_double);
		printf("{\"test\":\"bw\",\"transport\":\"%s\",\"size\":%zu,\"iters\":%ld,"
		       "\"lat_us_avg\":null,\"lat_us_min\":null,\"lat_us_p50\":null,"
		       "\"lat_us_p99\":null,\"bw_MBps\":%.1f,\"window\":%d,"
		       "\"msgs_per_round\":%d,\"recv_buffers\":%d}\n",
		       o->transport, size, rounds, bw[pct_index((size_t)rounds, 50)], w, w,
		       o->one_buffer ? 1 : w);
		fflush(stdout);
	}
	free(req);
	free(bw);
	free(sbuf);
	free(win);
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
	fputs("usage: mpirun -np 2 ... mpi-baseline [lat|bw|all] [--size N] [--iters N]\n"
	      "                                     [--window N] [--one-buffer] [--transport LABEL]\n"
	      "                                     [--version]\n"
	      "  lat          ping-pong, one-way = half the round trip (default 8 B)\n"
	      "  bw           window of sends, measured at the receiver (default 1 MiB)\n"
	      "  all          both (the default)\n"
	      "  --size N     message size in bytes (k/m suffixes, x1024)\n"
	      "  --iters N    lat: round trips (default 10000); bw: rounds (default 10)\n"
	      "  --window N   bw: sends in flight (default 64)\n"
	      "  --one-buffer bw: every receive of a window into one buffer (as osu_bw,\n"
	      "               ucx_perftest), not one buffer each (as xport-perf)\n"
	      "  --transport  the label of the JSON rows (default: from OMPI_MCA_btl,\n"
	      "               e.g. vader for self,vader)\n"
	      "  --version    print the version and exit\n",
	      stderr);
}

int main(int argc, char **argv)
{
	struct opts o = { .lat = 1, .bw = 1, .lat_size = 8, .bw_size = 1048576, .window = 64 };
	long size = -1;
	int nranks;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "lat") == 0) {
			o.lat = 1, o.bw = 0;
		} else if (strcmp(a, "bw") == 0) {
			o.lat = 0, o.bw = 1;
		} else if (strcmp(a, "all") == 0) {
			o.lat = o.bw = 1;
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
		o.lat_size = o.bw_size = size;
	if ((size_t)o.bw_size * (size_t)o.window > ((size_t)1 << 31))
		die("%s: window x size above 2 GiB", "bw");
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
	MPI_Finalize();
	return 0;
}
