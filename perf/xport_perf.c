/* SPDX-License-Identifier: MIT */
/*
 * xport-perf: point-to-point latency and bandwidth of xport between two
 * ranks, beside what the machine itself allows (two threads ping-ponging one
 * cache line), so a number is never read without its yardstick.
 *
 * Method (the shape of ucx_perftest and the OSU tests, see STYLE.md):
 *  - lat: ping-pong. Each side posts its receive before the message it waits
 *    for can be sent, so the expected path is measured, not the unexpected
 *    one. One-way latency is half the round trip; p50 and p99 are taken over
 *    the iterations after a warmup.
 *  - bw: the receiver posts a window of receives, then tells the sender to
 *    go, and the sender issues a window of sends. Bandwidth is taken at the
 *    receiver: the window's bytes divided by the time from its go to the
 *    last completion (not from the first completion: see run_bw); the
 *    median over rounds is reported.
 *  - Control (start and end of each phase, handing over results) goes
 *    through a spinning barrier on C11 atomics between the two threads: no
 *    xport message is ever sent that is not measured, and no measured
 *    message carries control. A sleeping barrier would do, but waking a
 *    halted vCPU costs 10-20 us here (lab BASELINES.md) and would land on the
 *    first iteration after it.
 *  - Every received message is checked (length, source, tag, first and last
 *    byte, which change with every iteration), so a library that drops or
 *    misdelivers data fails the run instead of reporting a number.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "xport/xport.h"

#define NRANKS 2
#define DEFAULT_WINDOW 64
#define MAX_SIZE ((size_t)1 << 30)
/* The bw receiver keeps window x size bytes of receive buffers. */
#define MAX_WINDOW_BYTES ((size_t)1 << 30)
#define BASELINE_ITERS 100000
/* Tags of measured messages. Nothing else is ever sent. */
#define TAG_LAT 0x1a7
#define TAG_BW 0xb3

static const size_t default_sizes[] = {
	0, 8, 64, 256, 1000, 4096, 16384, 65536, 262144, 1048576, 4194304,
};

struct opts {
	bool lat, bw, json, progress;
	size_t *sizes;
	int nsizes;
	long iters; /* 0: chosen per size */
	int window;
};

/* One line of output. A negative figure means "not measured by this test". */
struct row {
	const char *test, *transport, *protocol;
	size_t size;
	long iters;
	int window; /* bw only */
	double p50_us, p99_us, bw_mbps, mmsg_s;
};

/* Sense-reversing barrier for the two rank threads: the control path. */
struct spin_barrier {
	_Alignas(64) _Atomic unsigned count;
	_Alignas(64) _Atomic unsigned phase;
};

struct bench {
	const struct opts *o;
	xp_config_t cfg;
	xp_context_t *ctx[NRANKS];
	int cpu[NRANKS];     /* the CPU each rank is pinned to, or -1 */
	int pin_err[NRANKS]; /* pthread_setaffinity_np's error, or 0 */
	struct spin_barrier bar;
	double clock_ns; /* cost of one clock read */
	/* Handed from the measuring thread to the printing one (rank 0)
	 * between two barriers. */
	struct row row;
	xp_stats_t st_before[NRANKS];
	double base_p50_us, lat8_p50_us;
	/* The bw receiver's start signal: the number of the round it is ready
	 * for. Alone on its line, as is the next. */
	_Alignas(64) _Atomic long go;
	/* The baseline's cache line. */
	_Alignas(64) _Atomic uint64_t line;
	char pad[64 - sizeof(uint64_t)];
};

/* What one rank thread owns. */
struct rank_state {
	struct bench *b;
	int rank;
	pthread_t thread;
	uint8_t *sbuf, *rbuf; /* lat, and the bw sender's buffer */
	uint8_t *win;         /* bw receiver: window x largest size */
	int64_t *ts;          /* lat: timestamps of rank 0 */
	double *bw, *rate;    /* bw: MB/s and Mmsg/s of each round (rank 1) */
	xp_request_t **reqs;  /* bw: the window */
	long go_seq;          /* bw rounds run so far, counted alike by both ranks */
};

static FILE *hdr_out; /* header and summary: stdout, or stderr with --json */

/* ------------------------------------------------------------------------- */
/* Failing                                                                   */

/* A failure in one rank thread ends the process at once: the other thread
 * may be spinning in a barrier or waiting for a message that will never
 * come, and nothing it could still print would be trustworthy. */
static void __attribute__((noreturn, format(printf, 1, 2))) die(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	va_start(ap, fmt);
	fputs("xport-perf: ", stderr);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	fflush(stderr);
	_exit(1);
}

static void die_xp(int rank, const char *call, int rc)
{
	const char *detail = xp_error_detail();
	die("rank %d: %s failed: %s%s%s", rank, call, xp_strerror(rc), *detail ? ": " : "", detail);
}

#define XP_CHECK(rank, call)                                                                       \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ < 0)                                                                       \
			die_xp((rank), #call, rc_);                                                \
	} while (0)

static void usage(FILE *f)
{
	fprintf(f,
		"usage: xport-perf [lat|bw|all] [--json] [--sizes a,b,c] [--iters N] [--window N]\n"
		"                  [--transport inproc] [--progress] [--help]\n"
		"\n"
		"Measures xport between two ranks that are threads of this process, pinned to\n"
		"two CPUs when there are two.\n"
		"  lat          ping-pong latency (half the round trip, receive posted first),\n"
		"               p50 and p99, beside two threads ping-ponging one cache line\n"
		"  bw           bandwidth of a window of sends, measured at the receiver\n"
		"  all          both (the default)\n"
		"  --json       JSON lines on stdout, one object per row; header on stderr\n"
		"  --sizes L    message sizes in bytes, comma-separated, k/m/g suffixes (x1024)\n"
		"  --iters N    lat: iterations per size; bw: rounds per size (default: by size)\n"
		"  --window N   bw: sends in flight and receives posted per round (default %d)\n"
		"  --transport T  only inproc in this build\n"
		"  --progress   a line on stderr per size (the default when stderr is a tty)\n"
		"Environment: XP_RNDV_THRESHOLD, XP_POOL_MAX_BYTES, XP_HUGEPAGES, ... (xport.h)\n",
		DEFAULT_WINDOW);
}

/* ------------------------------------------------------------------------- */
/* Time, statistics, control                                                 */

static inline int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double clock_cost_ns(void)
{
	enum { N = 10000 };
	int64_t t0 = now_ns(), t1 = t0;
	for (int i = 0; i < N; i++)
		t1 = now_ns();
	return (double)(t1 - t0) / N;
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
	return (x > y) - (x < y);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* Nearest-rank percentile of @n sorted values, @p in (0, 100]. */
static size_t pct_index(size_t n, double p)
{
	size_t k = (size_t)((p / 100.0) * (double)n + 0.999999);
	return k == 0 ? 0 : (k > n ? n - 1 : k - 1);
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Spinning is right with one busy thread per CPU; on a machine with fewer
 * CPUs than threads it would burn the peer's time slice, so after a while
 * give the CPU away. */
#define SPINS_BEFORE_YIELD 4096
/* A pause-free load loop turns over much faster; this still bounds it to
 * well under a millisecond. */
#define SPINS_BEFORE_YIELD_TIGHT (1u << 16)

static void barrier_wait(struct spin_barrier *bar)
{
	unsigned phase = atomic_load_explicit(&bar->phase, memory_order_acquire);
	if (atomic_fetch_add_explicit(&bar->count, 1, memory_order_acq_rel) == NRANKS - 1) {
		atomic_store_explicit(&bar->count, 0, memory_order_relaxed);
		atomic_store_explicit(&bar->phase, phase + 1, memory_order_release);
		return;
	}
	for (unsigned spins = 0; atomic_load_explicit(&bar->phase, memory_order_acquire) == phase;
	     spins++) {
		if (spins < SPINS_BEFORE_YIELD)
			cpu_relax();
		else
			sched_yield();
	}
}

/* The bw sender waits for the receiver's go: a tight spin, because this
 * handoff is inside the measured interval. */
static void wait_go(struct bench *b, long seq)
{
	unsigned spins = 0;
	while (atomic_load_explicit(&b->go, memory_order_acquire) != seq) {
		if (++spins > SPINS_BEFORE_YIELD_TIGHT) {
			sched_yield();
			spins = 0;
		}
	}
}

/* ------------------------------------------------------------------------- */
/* Payload stamps                                                            */

/* First and last byte of message @i from @rank: they differ from one
 * iteration to the next, so a stale buffer never passes for a new one. */
static inline uint8_t stamp_first(long i, int rank)
{
	return (uint8_t)(i * 131 + 17 + rank * 64);
}

static inline uint8_t stamp_last(long i, int rank)
{
	return (uint8_t)(i * 29 + 101 + rank * 32);
}

static inline void stamp(uint8_t *buf, size_t size, long i, int rank)
{
	if (size == 0)
		return;
	buf[0] = stamp_first(i, rank);
	buf[size - 1] = stamp_last(i, rank);
}

static void check_recv(int rank, const char *test, size_t size, long i, const xp_status_t *st,
		       const uint8_t *buf, int src, uint64_t tag)
{
	if (st->length != size || st->source != src || st->tag != tag)
		die("rank %d: %s %zu B, message %ld: received %zu bytes from rank %d tag 0x%" PRIx64
		    ", expected %zu bytes from rank %d tag 0x%" PRIx64,
		    rank, test, size, i, st->length, st->source, st->tag, size, src, tag);
	if (size == 0)
		return;
	if (buf[0] != stamp_first(i, src) || buf[size - 1] != stamp_last(i, src))
		die("rank %d: %s %zu B, message %ld: payload corrupt: first/last byte "
		    "0x%02x/0x%02x, expected 0x%02x/0x%02x",
		    rank, test, size, i, buf[0], buf[size - 1], stamp_first(i, src),
		    stamp_last(i, src));
}

static void wait_ok(int rank, xp_request_t **req, xp_status_t *st, const char *what)
{
	xp_status_t tmp;
	int rc = xp_wait(req, XP_TIMEOUT_DEFAULT, st != NULL ? st : &tmp);
	if (rc < 0)
		die_xp(rank, what, rc);
}

/* ------------------------------------------------------------------------- */
/* Plans                                                                     */

static void lat_plan(const struct opts *o, size_t size, long *iters, long *warm)
{
	if (o->iters > 0)
		*iters = o->iters;
	else if (size <= 4096)
		*iters = 20000;
	else if (size <= 65536)
		*iters = 5000;
	else if (size <= 1048576)
		*iters = 1000;
	else
		*iters = 200;
	*warm = *iters / 10;
}

static void bw_plan(const struct opts *o, size_t size, long *rounds, long *warm)
{
	if (o->iters > 0) {
		*rounds = o->iters;
	} else {
		/* About 1 GiB a size, within bounds that keep small sizes
		 * statistically sound and big ones quick. */
		size_t per_round = size * (size_t)o->window;
		long r = per_round != 0 ? (long)(((size_t)1 << 30) / per_round) : 2000;
		*rounds = r < 10 ? 10 : (r > 2000 ? 2000 : r);
	}
	*warm = *rounds / 10 > 0 ? *rounds / 10 : 1;
}

/* ------------------------------------------------------------------------- */
/* Output                                                                    */

static void fmt_num(char *out, size_t len, double v, int prec)
{
	if (v < 0)
		snprintf(out, len, "-");
	else
		snprintf(out, len, "%.*f", prec, v);
}

static void json_num(char *out, size_t len, double v, int prec)
{
	if (v < 0)
		snprintf(out, len, "null");
	else
		snprintf(out, len, "%.*f", prec, v);
}

static void print_table_head(const struct opts *o)
{
	if (o->json)
		return;
	printf("%-5s %-19s %-8s %9s %7s %11s %11s %10s\n", "test", "transport", "protocol", "size",
	       "iters", "lat_us_p50", "lat_us_p99", "bw_MBps");
	fflush(stdout);
}

static void print_row(const struct opts *o, const struct row *r)
{
	char p50[32], p99[32], bw[32];
	if (o->json) {
		char rate[32];
		json_num(p50, sizeof(p50), r->p50_us, 3);
		json_num(p99, sizeof(p99), r->p99_us, 3);
		json_num(bw, sizeof(bw), r->bw_mbps, 1);
		json_num(rate, sizeof(rate), r->mmsg_s, 3);
		printf("{\"test\":\"%s\",\"transport\":\"%s\",\"protocol\":\"%s\",\"size\":%zu,"
		       "\"iters\":%ld,\"lat_us_p50\":%s,\"lat_us_p99\":%s,\"bw_MBps\":%s",
		       r->test, r->transport, r->protocol, r->size, r->iters, p50, p99, bw);
		if (r->window > 0)
			printf(",\"window\":%d,\"Mmsg_per_s\":%s", r->window, rate);
		printf("}\n");
	} else {
		fmt_num(p50, sizeof(p50), r->p50_us, 3);
		fmt_num(p99, sizeof(p99), r->p99_us, 3);
		fmt_num(bw, sizeof(bw), r->bw_mbps, 1);
		printf("%-5s %-19s %-8s %9zu %7ld %11s %11s %10s\n", r->test, r->transport,
		       r->protocol, r->size, r->iters, p50, p99, bw);
	}
	/* Rows appear as they are measured; the other thread waits meanwhile. */
	fflush(stdout);
}

static void progress(const struct opts *o, const char *test, size_t size)
{
	if (o->progress)
		fprintf(stderr, "xport-perf: %s %zu B ...\n", test, size);
}

/* Rank 0, between barriers: notes the counters before a test. */
static void stats_before(struct bench *b)
{
	for (int r = 0; r < NRANKS; r++)
		XP_CHECK(0, xp_stats_get(b->ctx[r], &b->st_before[r]));
}

/*
 * Rank 0, between barriers: which protocol served the test's messages,
 * from the senders' counters, and a check that nothing was left behind.
 */
static const char *stats_after(struct bench *b, const char *test, size_t size)
{
	uint64_t eager = 0, rndv = 0;
	for (int r = 0; r < NRANKS; r++) {
		xp_stats_t st;
		XP_CHECK(0, xp_stats_get(b->ctx[r], &st));
		eager += st.eager_sends - b->st_before[r].eager_sends;
		rndv += st.rndv_sends - b->st_before[r].rndv_sends;
		/* Every receive was posted before its send: a message left
		 * queued means it went to the wrong receive, or nowhere. */
		if (st.unexpected_now != 0)
			die("rank %d: %s %zu B: %" PRIu64
			    " messages still unexpected after the test",
			    r, test, size, st.unexpected_now);
	}
	if (eager != 0 && rndv != 0)
		return "mixed";
	return rndv != 0 ? "rndv" : "eager";
}

/* ------------------------------------------------------------------------- */
/* Tests                                                                     */

/* Two threads hand one cache line back and forth: the floor for any
 * shared-memory transport between these two CPUs. */
static void run_baseline(struct rank_state *rs)
{
	struct bench *b = rs->b;
	long iters = BASELINE_ITERS, warm = iters / 10, n = warm + iters;
	_Atomic uint64_t *line = &b->line;

	if (rs->rank == 0) {
		progress(b->o, "lat cacheline-baseline", sizeof(uint64_t));
		atomic_store(line, 0);
	}
	barrier_wait(&b->bar);
	if (rs->rank == 0) {
		for (long i = 0; i < n; i++) {
			uint64_t want = 2 * (uint64_t)i + 2;
			unsigned spins = 0;
			rs->ts[i] = now_ns();
			atomic_store_explicit(line, want - 1, memory_order_release);
			/* No pause in the spin: this is the floor, so it
			 * notices the line's return as early as it can. */
			while (atomic_load_explicit(line, memory_order_acquire) != want) {
				if (++spins > SPINS_BEFORE_YIELD_TIGHT) {
					sched_yield();
					spins = 0;
				}
			}
		}
		rs->ts[n] = now_ns();
	} else {
		for (long i = 0; i < n; i++) {
			uint64_t want = 2 * (uint64_t)i + 1;
			unsigned spins = 0;
			while (atomic_load_explicit(line, memory_order_acquire) != want) {
				if (++spins > SPINS_BEFORE_YIELD_TIGHT) {
					sched_yield();
					spins = 0;
				}
			}
			atomic_store_explicit(line, want + 1, memory_order_release);
		}
	}
	barrier_wait(&b->bar);
	if (rs->rank == 0) {
		int64_t *rt = rs->ts + warm;
		for (long i = 0; i < iters; i++)
			rt[i] = rs->ts[warm + i + 1] - rs->ts[warm + i];
		qsort(rt, (size_t)iters, sizeof(*rt), cmp_i64);
		b->row = (struct row){
			.test = "lat",
			.transport = "cacheline-baseline",
			.protocol = b->o->json ? "none" : "-",
			.size = sizeof(uint64_t),
			.iters = iters,
			.p50_us = (double)rt[pct_index((size_t)iters, 50)] / 2e3,
			.p99_us = (double)rt[pct_index((size_t)iters, 99)] / 2e3,
			.bw_mbps = -1,
			.mmsg_s = -1,
		};
		b->base_p50_us = b->row.p50_us;
		print_row(b->o, &b->row);
	}
}

static void run_lat(struct rank_state *rs, size_t size)
{
	struct bench *b = rs->b;
	const int me = rs->rank, peer = 1 - me;
	xp_comm_t *comm = xp_comm_world(b->ctx[me]);
	xp_request_t *rr = NULL, *sr;
	xp_status_t st;
	long iters, warm;

	lat_plan(b->o, size, &iters, &warm);
	const long n = warm + iters;
	if (me == 0) {
		progress(b->o, "lat", size);
		stats_before(b);
	} else {
		/* The first ping's receive is posted before rank 0 may send. */
		XP_CHECK(me, xp_irecv(comm, rs->rbuf, size, peer, TAG_LAT, XP_TAG_EXACT, &rr));
	}
	barrier_wait(&b->bar);
	if (me == 0) {
		for (long i = 0; i < n; i++) {
			rs->ts[i] = now_ns();
			stamp(rs->sbuf, size, i, me);
			XP_CHECK(me,
				 xp_irecv(comm, rs->rbuf, size, peer, TAG_LAT, XP_TAG_EXACT, &rr));
			XP_CHECK(me, xp_isend(comm, rs->sbuf, size, peer, TAG_LAT, &sr));
			wait_ok(me, &sr, NULL, "xp_wait (lat send)");
			wait_ok(me, &rr, &st, "xp_wait (lat receive)");
			check_recv(me, "lat", size, i, &st, rs->rbuf, peer, TAG_LAT);
		}
		rs->ts[n] = now_ns();
	} else {
		for (long i = 0; i < n; i++) {
			wait_ok(me, &rr, &st, "xp_wait (lat receive)");
			check_recv(me, "lat", size, i, &st, rs->rbuf, peer, TAG_LAT);
			/* The next ping cannot be sent before this pong
			 * arrives, so its receive is posted first. */
			if (i + 1 < n)
				XP_CHECK(me, xp_irecv(comm, rs->rbuf, size, peer, TAG_LAT,
						      XP_TAG_EXACT, &rr));
			stamp(rs->sbuf, size, i, me);
			XP_CHECK(me, xp_isend(comm, rs->sbuf, size, peer, TAG_LAT, &sr));
			wait_ok(me, &sr, NULL, "xp_wait (lat send)");
		}
	}
	barrier_wait(&b->bar);
	if (me == 0) {
		int64_t *rt = rs->ts + warm;
		for (long i = 0; i < iters; i++)
			rt[i] = rs->ts[warm + i + 1] - rs->ts[warm + i];
		qsort(rt, (size_t)iters, sizeof(*rt), cmp_i64);
		b->row = (struct row){
			.test = "lat",
			.transport = "inproc",
			.protocol = stats_after(b, "lat", size),
			.size = size,
			.iters = iters,
			.p50_us = (double)rt[pct_index((size_t)iters, 50)] / 2e3,
			.p99_us = (double)rt[pct_index((size_t)iters, 99)] / 2e3,
			.bw_mbps = -1,
			.mmsg_s = -1,
		};
		if (size == 8)
			b->lat8_p50_us = b->row.p50_us;
		print_row(b->o, &b->row);
	}
}

static void run_bw(struct rank_state *rs, size_t size)
{
	struct bench *b = rs->b;
	const int me = rs->rank, peer = 1 - me, w = b->o->window;
	xp_comm_t *comm = xp_comm_world(b->ctx[me]);
	xp_status_t st;
	long rounds, warm;

	bw_plan(b->o, size, &rounds, &warm);
	if (me == 0) {
		progress(b->o, "bw", size);
		stats_before(b);
	}
	for (long r = 0; r < warm + rounds; r++) {
		if (me == 1) {
			for (int k = 0; k < w; k++)
				XP_CHECK(me, xp_irecv(comm, rs->win + (size_t)k * size, size, peer,
						      TAG_BW, XP_TAG_EXACT, &rs->reqs[k]));
		} else {
			/* The previous round's sends have all completed, so
			 * the buffer is ours again. */
			stamp(rs->sbuf, size, r, me);
		}
		/* Every receive of the round is posted before the first send. */
		barrier_wait(&b->bar);
		rs->go_seq++;
		if (me == 0) {
			wait_go(b, rs->go_seq);
			for (int k = 0; k < w; k++)
				XP_CHECK(me, xp_isend(comm, rs->sbuf, size, peer, TAG_BW,
						      &rs->reqs[k]));
			for (int k = 0; k < w; k++)
				wait_ok(me, &rs->reqs[k], NULL, "xp_wait (bw send)");
			continue;
		}
		/*
		 * The round runs from this go to the last completion. It cannot
		 * start at the first completion: one progress call polls up to
		 * a ring's worth of messages, so the receiver sees the whole
		 * window complete at once (a 64 x 64 KiB window "took" 0.3 us).
		 * The go costs one cache-line handoff (the baseline row), a
		 * small and known understatement of the bandwidth.
		 */
		int64_t t0 = now_ns(), t1;
		atomic_store_explicit(&b->go, rs->go_seq, memory_order_release);
		for (int k = 0; k < w; k++) {
			wait_ok(me, &rs->reqs[k], &st, "xp_wait (bw receive)");
			check_recv(me, "bw", size, r, &st, rs->win + (size_t)k * size, peer,
				   TAG_BW);
		}
		t1 = now_ns();
		if (r >= warm) {
			double ns = (double)(t1 - t0 > 0 ? t1 - t0 : 1);
			rs->bw[r - warm] = (double)w * (double)size * 1e3 / ns;
			rs->rate[r - warm] = (double)w * 1e3 / ns;
		}
	}
	if (me == 1) {
		double *bw = rs->bw, *rate = rs->rate;
		qsort(bw, (size_t)rounds, sizeof(double), cmp_double);
		qsort(rate, (size_t)rounds, sizeof(double), cmp_double);
		b->row = (struct row){
			.test = "bw",
			.transport = "inproc",
			.size = size,
			.iters = rounds,
			.window = w,
			.p50_us = -1,
			.p99_us = -1,
			.bw_mbps = bw[pct_index((size_t)rounds, 50)],
			.mmsg_s = rate[pct_index((size_t)rounds, 50)],
		};
	}
	barrier_wait(&b->bar);
	if (me == 0) {
		b->row.protocol = stats_after(b, "bw", size);
		print_row(b->o, &b->row);
	}
}

/* ------------------------------------------------------------------------- */
/* Rank threads                                                              */

static void print_header(struct bench *b)
{
	const struct opts *o = b->o;
	xp_stats_t st;
	XP_CHECK(0, xp_stats_get(b->ctx[0], &st));
	fprintf(hdr_out,
		"# xport-perf (xport %d.%d.%d): transport inproc, %d ranks as threads "
		"of one process\n",
		XP_VERSION_MAJOR, XP_VERSION_MINOR, XP_VERSION_PATCH, NRANKS);
	if (b->cpu[0] >= 0 && b->pin_err[0] == 0 && b->pin_err[1] == 0)
		fprintf(hdr_out,
			"# rank 0 pinned to CPU %d, rank 1 pinned to CPU %d "
			"(pthread_setaffinity_np)\n",
			b->cpu[0], b->cpu[1]);
	else if (b->cpu[0] >= 0)
		fprintf(hdr_out, "# ranks NOT pinned: pthread_setaffinity_np failed (%s)\n",
			strerrordesc_np(b->pin_err[0] != 0 ? b->pin_err[0] : b->pin_err[1]));
	else
		fprintf(hdr_out, "# ranks NOT pinned: fewer than 2 CPUs available; spinning "
				 "ranks share one CPU, expect poor figures\n");
	if (o->lat)
		fprintf(hdr_out, "# lat: one-way = half the round trip, receives posted first; "
				 "p50/p99 over iters after iters/10 warmup;\n#      each round "
				 "trip includes one clock read\n");
	if (o->bw)
		fprintf(hdr_out,
			"# bw: window %d, receives posted first, measured at the receiver "
			"from its go to the last completion;\n#     MB/s = 10^6 B/s, "
			"median of iters rounds\n",
			o->window);
	char rndv[64];
	if (b->cfg.rndv_threshold != 0)
		snprintf(rndv, sizeof(rndv), "from %zu B (XP_RNDV_THRESHOLD)",
			 b->cfg.rndv_threshold);
	else
		snprintf(rndv, sizeof(rndv), "at the transport's threshold (see protocol)");
	fprintf(hdr_out,
		"# rendezvous %s; pool on %s pages; clock CLOCK_MONOTONIC_RAW, %.0f ns a read\n",
		rndv, st.pool_hugepages ? "hugetlb" : "ordinary", b->clock_ns);
	fflush(hdr_out);
	print_table_head(o);
}

static void *alloc_touched(size_t len)
{
	size_t cap = (len + 4095) & ~(size_t)4095;
	void *p = aligned_alloc(4096, cap != 0 ? cap : 4096);
	if (p == NULL)
		die("out of memory (%zu bytes)", len);
	/* Touch now so page faults never land in a measurement. */
	memset(p, 0, cap != 0 ? cap : 4096);
	return p;
}

static void *rank_main(void *arg)
{
	struct rank_state *rs = arg;
	struct bench *b = rs->b;
	const struct opts *o = b->o;
	size_t max = 0;
	long max_n = BASELINE_ITERS + BASELINE_ITERS / 10, max_rounds = 1;

	if (b->cpu[rs->rank] >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(b->cpu[rs->rank], &set);
		b->pin_err[rs->rank] = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	/* Buffers are allocated after pinning, so their pages come from the
	 * rank's own node. */
	for (int i = 0; i < o->nsizes; i++) {
		long n, w;
		max = o->sizes[i] > max ? o->sizes[i] : max;
		lat_plan(o, o->sizes[i], &n, &w);
		max_n = n + w > max_n ? n + w : max_n;
		bw_plan(o, o->sizes[i], &n, &w);
		max_rounds = n > max_rounds ? n : max_rounds;
	}
	rs->sbuf = alloc_touched(max);
	rs->rbuf = alloc_touched(max);
	if (rs->rank == 0) {
		rs->ts = malloc(sizeof(*rs->ts) * (size_t)(max_n + 1));
		if (rs->ts == NULL)
			die("out of memory");
	}
	if (o->bw) {
		rs->reqs = calloc((size_t)o->window, sizeof(*rs->reqs));
		if (rs->reqs == NULL)
			die("out of memory");
		if (rs->rank == 1) {
			rs->win = alloc_touched(max * (size_t)o->window);
			rs->bw = malloc(sizeof(double) * (size_t)max_rounds);
			rs->rate = malloc(sizeof(double) * (size_t)max_rounds);
			if (rs->bw == NULL || rs->rate == NULL)
				die("out of memory");
		}
	}
	barrier_wait(&b->bar);
	if (rs->rank == 0)
		print_header(b);

	if (o->lat) {
		run_baseline(rs);
		for (int i = 0; i < o->nsizes; i++)
			run_lat(rs, o->sizes[i]);
	}
	if (o->bw)
		for (int i = 0; i < o->nsizes; i++)
			run_bw(rs, o->sizes[i]);

	barrier_wait(&b->bar);
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->win);
	free(rs->ts);
	free(rs->bw);
	free(rs->rate);
	free(rs->reqs);
	return NULL;
}

/* The first two CPUs this process may run on, or -1s if there are fewer. */
static void choose_cpus(int cpu[NRANKS])
{
	cpu_set_t set;
	int found = 0;
	cpu[0] = cpu[1] = -1;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return;
	for (int c = 0; c < CPU_SETSIZE && found < NRANKS; c++)
		if (CPU_ISSET(c, &set))
			cpu[found++] = c;
	if (found < NRANKS)
		cpu[0] = cpu[1] = -1;
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
	if (*end != '\0' || v > (MAX_SIZE >> shift))
		return false;
	*out = (size_t)(v << shift);
	return true;
}

static int parse_sizes(const char *arg, struct opts *o)
{
	char *copy = strdup(arg), *save = NULL;
	int n = 1;
	if (copy == NULL)
		return -ENOMEM;
	for (const char *p = arg; *p; p++)
		n += *p == ',';
	o->sizes = calloc((size_t)n, sizeof(*o->sizes));
	if (o->sizes == NULL) {
		free(copy);
		return -ENOMEM;
	}
	o->nsizes = 0;
	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!parse_size(tok, &o->sizes[o->nsizes])) {
			fprintf(stderr,
				"xport-perf: bad size '%s' (bytes, optional k, m or g suffix, "
				"at most 1g)\n",
				tok);
			free(copy);
			return -EINVAL;
		}
		o->nsizes++;
	}
	free(copy);
	if (o->nsizes == 0) {
		fprintf(stderr, "xport-perf: --sizes needs at least one size\n");
		return -EINVAL;
	}
	return 0;
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

/* Returns 0 to run, 1 to exit 0 (help), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	enum { OPT_JSON = 256, OPT_SIZES, OPT_ITERS, OPT_WINDOW, OPT_TRANSPORT, OPT_PROGRESS };
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "sizes", required_argument, NULL, OPT_SIZES },
		{ "iters", required_argument, NULL, OPT_ITERS },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "transport", required_argument, NULL, OPT_TRANSPORT },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long v;
	int c;

	*o = (struct opts){ .lat = true, .bw = true, .window = DEFAULT_WINDOW };
	o->progress = isatty(STDERR_FILENO) == 1;
	while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
		switch (c) {
		case OPT_JSON:
			o->json = true;
			break;
		case OPT_SIZES:
			free(o->sizes);
			if (parse_sizes(optarg, o) < 0)
				return 2;
			break;
		case OPT_ITERS:
			if (!parse_long(optarg, 1, 100000000, &v)) {
				fprintf(stderr,
					"xport-perf: --iters wants a count from 1 to 10^8\n");
				return 2;
			}
			o->iters = v;
			break;
		case OPT_WINDOW:
			/* Bandwidth runs from the first completion to the
			 * last: a window of one has no interval. */
			if (!parse_long(optarg, 2, 65536, &v)) {
				fprintf(stderr,
					"xport-perf: --window wants a count from 2 to 65536\n");
				return 2;
			}
			o->window = (int)v;
			break;
		case OPT_TRANSPORT:
			if (strcmp(optarg, "inproc") != 0) {
				fprintf(stderr,
					"xport-perf: unknown transport '%s'; "
					"this build has: inproc\n",
					optarg);
				return 2;
			}
			break;
		case OPT_PROGRESS:
			o->progress = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		default:
			fprintf(stderr, "xport-perf: try --help\n");
			return 2;
		}
	}
	if (optind < argc) {
		const char *t = argv[optind++];
		if (strcmp(t, "lat") == 0) {
			o->bw = false;
		} else if (strcmp(t, "bw") == 0) {
			o->lat = false;
		} else if (strcmp(t, "all") != 0) {
			fprintf(stderr, "xport-perf: unknown test '%s' (lat, bw or all)\n", t);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "xport-perf: unexpected argument '%s'; try --help\n", argv[optind]);
		return 2;
	}
	if (o->sizes == NULL) {
		o->nsizes = (int)(sizeof(default_sizes) / sizeof(default_sizes[0]));
		o->sizes = malloc(sizeof(default_sizes));
		if (o->sizes == NULL)
			return 2;
		memcpy(o->sizes, default_sizes, sizeof(default_sizes));
	}
	if (o->bw) {
		for (int i = 0; i < o->nsizes; i++) {
			if (o->sizes[i] > MAX_WINDOW_BYTES / (size_t)o->window) {
				fprintf(stderr,
					"xport-perf: bw: a window of %d messages of %zu B needs "
					"more than %zu MiB of receive buffers; lower --window "
					"or --sizes\n",
					o->window, o->sizes[i], MAX_WINDOW_BYTES >> 20);
				return 2;
			}
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	struct opts o;
	struct bench *b;
	struct rank_state rs[NRANKS];
	xp_local_job_t *job;
	int rc = parse_args(argc, argv, &o);

	if (rc != 0) {
		free(o.sizes);
		return rc == 1 ? 0 : 2;
	}
	hdr_out = o.json ? stderr : stdout;
	b = aligned_alloc(64, (sizeof(*b) + 63) & ~(size_t)63);
	if (b == NULL)
		die("out of memory");
	memset(b, 0, sizeof(*b));
	b->o = &o;
	b->base_p50_us = b->lat8_p50_us = -1;
	xp_config_init(&b->cfg);
	rc = xp_local_job_create(NRANKS, &b->cfg, &job);
	if (rc < 0)
		die_xp(0, "xp_local_job_create", rc);
	for (int r = 0; r < NRANKS; r++) {
		rc = xp_local_job_context(job, r, &b->ctx[r]);
		if (rc < 0)
			die_xp(r, "xp_local_job_context", rc);
	}
	choose_cpus(b->cpu);
	b->clock_ns = clock_cost_ns();

	for (int r = 0; r < NRANKS; r++) {
		rs[r] = (struct rank_state){ .b = b, .rank = r };
		rc = pthread_create(&rs[r].thread, NULL, rank_main, &rs[r]);
		if (rc != 0)
			die("pthread_create: %s", strerrordesc_np(rc));
	}
	for (int r = 0; r < NRANKS; r++)
		pthread_join(rs[r].thread, NULL);

	if (b->base_p50_us > 0 && b->lat8_p50_us >= 0)
		fprintf(hdr_out,
			"# summary: xport inproc 8 B one-way p50 %.3f us = %.1fx the "
			"cache-line baseline (%.3f us)\n",
			b->lat8_p50_us, b->lat8_p50_us / b->base_p50_us, b->base_p50_us);

	/* Whatever a rank still holds now was lost by the library. */
	for (int r = 0; r < NRANKS; r++) {
		xp_stats_t st;
		if (xp_stats_get(b->ctx[r], &st) == 0 && st.pool_bufs_in_use != 0)
			fprintf(stderr,
				"xport-perf: warning: rank %d still has %" PRIu64
				" pooled buffers in use after all requests completed\n",
				r, st.pool_bufs_in_use);
	}
	xp_local_job_destroy(job);
	free(b);
	free(o.sizes);
	return 0;
}
