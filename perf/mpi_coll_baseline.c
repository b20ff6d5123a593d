/* SPDX-License-Identifier: MIT */
/*
 * mpi-coll-baseline: the Open MPI rows of perf/compare-coll.py. The ranks
 * of an MPI job time MPI_Allreduce of floats (sum) the way xport-perf
 * times xp_allreduce, so that the rows stand side by side:
 *
 *  - sizes as xport-perf's collectives (-b 8 -e 64m -f 4, or --sizes), a
 *    size rounded down to whole floats;
 *  - per size, MPI_Barrier, then warmup calls and timed calls back to back
 *    (no barrier between calls), each rank timing each call with
 *    CLOCK_MONOTONIC_RAW; as many calls as xport-perf makes (perf_util.h);
 *  - after the last call, MPI_Gather brings every rank's per-call times to
 *    rank 0 (after the timing, so it costs the figures nothing); a call's
 *    time is the slowest rank's, as nccl-tests reports;
 *  - the result's first and last elements are checked after every call
 *    (inputs are small integers: the sum is exact), so a run that computes
 *    nothing fails instead of reporting a number.
 *
 * Output on stdout from rank 0: a {"type":"run","system":"openmpi",...}
 * record, then one JSON row per size with xport-perf's collective keys
 * (test, size, count, dtype, op, iters, warmup, time_us_avg, time_us_min,
 * time_us_p50, time_us_p99, algbw_GBps, busbw_GBps, algorithm
 * "ompi-default", transports: the --transport label, ranks) and
 * "system":"openmpi". A header on stderr names the MPI library and where
 * each rank may run.
 *
 * Build and run (what compare-coll.py does):
 *   mpicc -O2 -std=c11 -Iperf -o build/perf/mpi-coll-baseline perf/mpi_coll_baseline.c
 *   mpirun --allow-run-as-root -np 2 --bind-to core --mca pml ob1 \
 *       --mca btl self,vader build/perf/mpi-coll-baseline --transport vader
 * Not part of the Meson build: it needs an MPI compiler wrapper.
 */
#define _GNU_SOURCE /* sched_getaffinity, CPU_* */
#include <mpi.h>
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "perf_util.h"

#ifndef XPORT_VERSION_STRING
#define XPORT_VERSION_STRING "unknown (built outside perf/compare-coll.py)"
#endif

#define MAX_SIZE ((size_t)1 << 30)
#define MAX_SIZES 64

struct opts {
	size_t sizes[MAX_SIZES];
	int nsizes;
	size_t lo, hi;
	long factor, iters, warmup; /* 0 / -1: the default */
	const char *transport;
};

static int me, nranks;

static void __attribute__((noreturn)) fail(const char *msg, const char *arg)
{
	fprintf(stderr, "mpi-coll-baseline: rank %d: %s%s\n", me, msg, arg);
	MPI_Abort(MPI_COMM_WORLD, 1);
	exit(1);
}

/* Digits with an optional k, m or g suffix (x1024), at most 1g. */
static int parse_size(const char *s, size_t *out)
{
	char *end;
	if (*s < '0' || *s > '9')
		return -1;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	unsigned shift = 0;
	if (*end == 'k' || *end == 'K')
		shift = 10;
	else if (*end == 'm' || *end == 'M')
		shift = 20;
	else if (*end == 'g' || *end == 'G')
		shift = 30;
	end += shift != 0;
	if (errno != 0 || *end != '\0' || v > (MAX_SIZE >> shift))
		return -1;
	*out = (size_t)(v << shift);
	return 0;
}

static long parse_count(const char *s, long min)
{
	char *end;
	long v = strtol(s, &end, 10);
	if (end == s || *end != '\0' || v < min || v > 100000000)
		fail("bad count: ", s);
	return v;
}

static void parse_args(int argc, char **argv, struct opts *o)
{
	*o = (struct opts){
		.lo = 8, .hi = (size_t)64 << 20, .factor = 4, .warmup = -1, .transport = "unknown"
	};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (v == NULL)
			fail("missing value after ", a);
		if (strcmp(a, "-b") == 0 || strcmp(a, "-e") == 0) {
			if (parse_size(v, a[1] == 'b' ? &o->lo : &o->hi) < 0)
				fail("bad size: ", v);
		} else if (strcmp(a, "-f") == 0) {
			o->factor = parse_count(v, 2);
		} else if (strcmp(a, "--iters") == 0) {
			o->iters = parse_count(v, 1);
		} else if (strcmp(a, "--warmup") == 0) {
			o->warmup = parse_count(v, 0);
		} else if (strcmp(a, "--transport") == 0) {
			o->transport = v;
		} else if (strcmp(a, "--sizes") == 0) {
			char *copy = strdup(v), *save = NULL;
			if (copy == NULL)
				fail("out of memory", "");
			for (char *t = strtok_r(copy, ",", &save); t != NULL;
			     t = strtok_r(NULL, ",", &save)) {
				if (o->nsizes == MAX_SIZES ||
				    parse_size(t, &o->sizes[o->nsizes]) < 0)
					fail("bad --sizes element: ", t);
				o->nsizes++;
			}
			free(copy);
			if (o->nsizes == 0)
				fail("empty --sizes", "");
		} else {
			fail("unknown option (-b -e -f --sizes --iters --warmup --transport): ", a);
		}
		i++;
	}
	if (o->nsizes == 0) {
		if (o->lo == 0 || o->lo > o->hi)
			fail("-b must be from 1 to -e", "");
		for (size_t s = o->lo; s <= o->hi && o->nsizes < MAX_SIZES; s *= (size_t)o->factor)
			o->sizes[o->nsizes++] = s;
	}
}

/* Rank @r's input at element @i: small integers, so the sum is exact. */
static float input(int r, size_t i)
{
	return (float)((i + 2 * (size_t)r) % 3);
}

static float want(size_t i)
{
	float sum = 0;
	for (int r = 0; r < nranks; r++)
		sum += input(r, i);
	return sum;
}

static void print_header(const char *transport)
{
	char lib[MPI_MAX_LIBRARY_VERSION_STRING];
	int len = 0;
	cpu_set_t set;
	MPI_Get_library_version(lib, &len);
	lib[strcspn(lib, "\n")] = '\0';
	char cpus[64] = "?";
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		size_t used = 0;
		for (int c = 0; c < CPU_SETSIZE && used < sizeof(cpus) - 8; c++)
			if (CPU_ISSET(c, &set))
				used += (size_t)snprintf(cpus + used, sizeof(cpus) - used, "%s%d",
							 used != 0 ? "," : "", c);
	}
	/* Every rank says where it may run; rank 0 also what runs. */
	char line[128], *all = NULL;
	memset(line, 0, sizeof(line));
	snprintf(line, sizeof(line), "rank %d pid %d may run on CPUs %s", me, (int)getpid(), cpus);
	if (me == 0 && (all = malloc(sizeof(line) * (size_t)nranks)) == NULL)
		fail("out of memory", "");
	MPI_Gather(line, sizeof(line), MPI_CHAR, all, sizeof(line), MPI_CHAR, 0, MPI_COMM_WORLD);
	if (me != 0)
		return;
	fprintf(stderr, "# mpi-coll-baseline (xport %s): MPI_Allreduce float sum, %d ranks, %s\n",
		XPORT_VERSION_STRING, nranks, lib);
	fprintf(stderr, "# transport label %s; OMPI_MCA_pml=%s OMPI_MCA_btl=%s UCX_TLS=%s\n",
		transport, getenv("OMPI_MCA_pml") ? getenv("OMPI_MCA_pml") : "-",
		getenv("OMPI_MCA_btl") ? getenv("OMPI_MCA_btl") : "-",
		getenv("UCX_TLS") ? getenv("UCX_TLS") : "-");
	for (int r = 0; r < nranks; r++)
		fprintf(stderr, "# %s\n", all + (size_t)r * sizeof(line));
	free(all);
	printf("{\"type\":\"run\",\"system\":\"openmpi\",\"tool\":\"mpi-coll-baseline\","
	       "\"version\":\"%s\",\"mpi\":\"%.60s\",\"transport\":\"%s\"}\n",
	       XPORT_VERSION_STRING, lib, transport);
	fflush(stdout);
}

static void run_size(const struct opts *o, size_t size, float *sbuf, float *rbuf, double *t,
		     double *t_all)
{
	const size_t count = size / sizeof(float), bytes = count * sizeof(float);
	const long iters = o->iters > 0 ? o->iters : perf_coll_iters(bytes);
	const long warm = o->warmup >= 0 ? o->warmup : perf_coll_warmup(iters);
	char what[160];

	for (size_t i = 0; i < count; i++)
		sbuf[i] = input(me, i);
	MPI_Barrier(MPI_COMM_WORLD);
	for (long i = 0; i < warm + iters; i++) {
		rbuf[0] = rbuf[count > 0 ? count - 1 : 0] = -1;
		int64_t t0 = now_ns();
		MPI_Allreduce(sbuf, rbuf, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		int64_t t1 = now_ns();
		if (i >= warm)
			t[i - warm] = (double)(t1 - t0);
		if (count > 0 && (rbuf[0] != want(0) || rbuf[count - 1] != want(count - 1))) {
			snprintf(what, sizeof(what), "%zu B, call %ld: got %g/%g, want %g/%g",
				 bytes, i, rbuf[0], rbuf[count - 1], want(0), want(count - 1));
			fail("MPI_Allreduce result wrong: ", what);
		}
	}
	MPI_Gather(t, (int)iters, MPI_DOUBLE, t_all, (int)iters, MPI_DOUBLE, 0, MPI_COMM_WORLD);
	if (me != 0)
		return;
	double total = 0;
	for (long i = 0; i < iters; i++) {
		double m = 0;
		for (int r = 0; r < nranks; r++)
			m = t_all[(size_t)r * (size_t)iters + (size_t)i] > m ?
				    t_all[(size_t)r * (size_t)iters + (size_t)i] :
				    m;
		t[i] = m;
		total += m;
	}
	qsort(t, (size_t)iters, sizeof(double), cmp_double);
	double avg = total / (double)iters, algbw = (double)bytes / avg;
	printf("{\"test\":\"allreduce\",\"system\":\"openmpi\",\"size\":%zu,\"count\":%zu,"
	       "\"dtype\":\"float32\",\"op\":\"sum\",\"iters\":%ld,\"warmup\":%ld,"
	       "\"time_us_avg\":%.3f,\"time_us_min\":%.3f,\"time_us_p50\":%.3f,"
	       "\"time_us_p99\":%.3f,\"algbw_GBps\":%.6f,\"busbw_GBps\":%.6f,"
	       "\"algorithm\":\"ompi-default\",\"transports\":\"%s\",\"ranks\":%d,"
	       "\"in_place\":false,\"check\":false}\n",
	       bytes, count, iters, warm, avg / 1e3, t[0] / 1e3,
	       t[pct_index((size_t)iters, 50)] / 1e3, t[pct_index((size_t)iters, 99)] / 1e3, algbw,
	       algbw * 2.0 * (nranks - 1) / nranks, o->transport, nranks);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	struct opts o;
	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &me);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	parse_args(argc, argv, &o);
	size_t max = sizeof(float);
	long max_iters = 1;
	for (int i = 0; i < o.nsizes; i++) {
		size_t b = o.sizes[i] / sizeof(float) * sizeof(float);
		long it = o.iters > 0 ? o.iters : perf_coll_iters(b);
		max = b > max ? b : max;
		max_iters = it > max_iters ? it : max_iters;
	}
	float *sbuf = calloc(max, 1), *rbuf = calloc(max, 1);
	double *t = calloc((size_t)max_iters, sizeof(double));
	double *t_all = calloc((size_t)max_iters * (size_t)nranks, sizeof(double));
	if (sbuf == NULL || rbuf == NULL || t == NULL || t_all == NULL)
		fail("out of memory", "");
	memset(rbuf, 0, max); /* touched before timing, as xport-perf's */
	print_header(o.transport);
	for (int i = 0; i < o.nsizes; i++)
		run_size(&o, o.sizes[i], sbuf, rbuf, t, t_all);
	free(sbuf);
	free(rbuf);
	free(t);
	free(t_all);
	MPI_Finalize();
	return 0;
}
