/* SPDX-License-Identifier: MIT */
/*
 * xport-perf: point-to-point latency, bandwidth and message rate of xport
 * between two ranks, either two threads of this process (in-process
 * transport, beside what the machine itself allows: two threads ping-ponging
 * one cache line) or two processes started by a launcher (xprun, torchrun,
 * Slurm, Open MPI), whose ranks talk over the transport xp_init() gave them.
 *
 * Method (the shape of ucx_perftest and the OSU tests, see STYLE.md):
 *  - lat: ping-pong. Each side posts its receive before the message it waits
 *    for can be sent, so the expected path is measured, not the unexpected
 *    one. One-way latency is half the round trip; p50 and p99 are taken over
 *    the iterations after a warmup.
 *  - bw, rate: rank 1 posts every receive of a round, then lets rank 0 go,
 *    and rank 0 sends the round's messages with at most a window of them in
 *    flight. Bandwidth and message rate are taken at the receiver: the
 *    round's bytes (messages) divided by the time from its go to the last
 *    completion (not from the first completion: see run_stream); the median
 *    over rounds is reported. rate is the same measurement over small
 *    messages, reported in millions of messages a second.
 *  - bibw: both ranks post their receives, both go, both send a round to
 *    each other at once; each takes its own receive bandwidth, and the row
 *    reports the median over rounds of their sum.
 *  - In-process, a round is one window, as it always was. Between processes
 *    a round is as many windows as it takes to make it long (thousands of
 *    messages, or tens of MiB): its start is signalled through the control
 *    channel, whose hop (~12 us here) must stay small beside the round.
 *    A job of other than 2 ranks is refused (exit 2), not run with idlers.
 *  - Control (start and end of each phase, handing over results) never goes
 *    through the measured transport: no xport message is ever sent that is
 *    not measured, and no measured message carries control. In-process it
 *    is a spinning barrier on C11 atomics between the two threads (a
 *    sleeping one would do, but waking a halted vCPU costs 10-20 us here,
 *    lab BASELINES.md, and would land on the first iteration after it).
 *    Between processes it is xp_oob_barrier(). Results and counters reach
 *    rank 0, which alone prints, through xp_oob_allgather() in both cases.
 *  - Every received message is checked (length, source, tag, first and last
 *    byte, which change with every iteration), so a library that drops or
 *    misdelivers data fails the run instead of reporting a number.
 *
 * Collectives (allreduce, reduce_scatter, allgather, bcast, alltoall,
 * barrier; "coll" for all of them), the way nccl-tests and the OSU
 * collective tests measure them, between any number of ranks (threads:
 * --ranks N; processes: the job's size):
 *  - Each rank times each call (warmup calls first) back to back, with no
 *    barrier between calls; an iteration's time is the largest of the
 *    ranks' times for it, as nccl-tests reports. The per-call times reach
 *    rank 0 out of band (xp_oob_allgather) after the last call.
 *  - The size is the largest buffer of the call, as in nccl-tests:
 *    allreduce and bcast the vector, reduce_scatter the input of every
 *    rank's blocks, allgather the output, alltoall one rank's input. It is
 *    rounded down to whole elements (and, for the three with a block per
 *    rank, to a multiple of ranks x element size).
 *  - algbw = size / mean time; busbw = algbw x the nccl-tests factor
 *    (allreduce 2(n-1)/n; reduce_scatter, allgather, alltoall (n-1)/n;
 *    bcast 1), the rate at which the busiest link would have to move data.
 *  - --check fills every rank's input from small integers that depend on
 *    the rank and the element, so that the result is exact in every type,
 *    and compares every element of every call's result with what the rank
 *    computes locally.
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
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "xport/xport.h"
#include "perf_util.h"
#include "shell_words.h"

/* Ranks of the point-to-point tests. */
#define NRANKS 2
/* Ranks of an in-process collective run at most (--ranks). */
#define MAX_INPROC_RANKS 256
#define DEFAULT_WINDOW 64
#define MAX_SIZE ((size_t)1 << 30)
/* The receiver of a window keeps window x size bytes of receive buffers. */
#define MAX_WINDOW_BYTES ((size_t)1 << 30)
#define BASELINE_ITERS 100000
/* rate's default sizes: those of the default sweep up to this. */
#define RATE_MAX_DEFAULT_SIZE 4096
/* Between processes: a round holds at least this many messages, unless
 * their receive buffers would pass NET_ROUND_BYTES (a window always fits). */
#define NET_ROUND_MSGS 8192
#define NET_ROUND_BYTES ((size_t)64 << 20)

enum test_id { T_LAT, T_BW, T_BIBW, T_RATE, NTESTS };

static const char *const test_name[NTESTS] = { "lat", "bw", "bibw", "rate" };
/* Tags of measured messages, one per test. Nothing else is ever sent. */
static const uint64_t test_tag[NTESTS] = { 0x1a7, 0xb3, 0xb1b3, 0x4a7e };

enum coll_id { C_ALLREDUCE, C_REDUCE_SCATTER, C_ALLGATHER, C_BCAST, C_ALLTOALL, C_BARRIER, NCOLL };

static const char *const coll_name[NCOLL] = {
	"allreduce", "reduce_scatter", "allgather", "bcast", "alltoall", "barrier",
};
/* The algorithm of each collective but allreduce, whose choice
 * xp_allreduce_algo_get() tells (src/coll). */
static const char *const coll_algo[NCOLL] = {
	NULL, "ring", "ring", "binomial", "pairwise", "dissemination",
};

static const char *const dtype_name[XP_DTYPE_COUNT] = {
	[XP_INT8] = "int8",       [XP_UINT8] = "uint8",       [XP_INT32] = "int32",
	[XP_UINT32] = "uint32",   [XP_INT64] = "int64",       [XP_UINT64] = "uint64",
	[XP_FLOAT16] = "float16", [XP_BFLOAT16] = "bfloat16", [XP_FLOAT32] = "float32",
	[XP_FLOAT64] = "float64",
};
static const char *const op_name[XP_OP_COUNT] = {
	[XP_SUM] = "sum", [XP_PROD] = "prod", [XP_MIN] = "min", [XP_MAX] = "max", [XP_AVG] = "avg",
};

/* The collectives' default sweep, as nccl-tests' -b -e -f. */
#define COLL_MIN_BYTES 8
#define COLL_MAX_BYTES ((size_t)64 << 20)
#define COLL_FACTOR 4

static const size_t default_sizes[] = {
	0, 8, 64, 256, 1000, 4096, 16384, 65536, 262144, 1048576, 4194304,
};

enum transport_choice { TR_AUTO, TR_INPROC, TR_TCP, TR_SHM };

struct opts {
	bool test[NTESTS];
	bool coll[NCOLL];
	bool is_coll; /* collectives asked for (never with point-to-point tests) */
	bool json, progress, pin, sizes_given;
	bool reg;        /* --register: xp_mem_register the point-to-point buffers */
	bool one_buffer; /* --one-buffer: every receive of a round into one buffer */
	bool endpoints;  /* --endpoints: over an endpoint of the two ranks (xp_connect) */
	bool one_way;    /* --one-way: an endpoint per direction, as NCCL's comms */
	int transport;   /* enum transport_choice */
	size_t *sizes;
	int nsizes;
	long iters;  /* 0: chosen per size */
	long warmup; /* collectives; -1: chosen per size */
	int window;
	int nranks; /* in-process collectives: --ranks (default 2) */
	bool ranks_given;
	size_t minbytes, maxbytes; /* -b, -e; 0: not given */
	long factor;               /* -f; 0: not given */
	xp_dtype_t dtype;
	xp_op_t op;
	bool dtype_given, op_given;
	bool check, in_place;
};

/* One line of output. A negative figure means "not measured by this test". */
struct row {
	const char *test, *transport, *protocol;
	const char *route_protocol; /* set when the counters disagree with it */
	size_t size;
	long iters;
	int window;          /* windowed tests only */
	long msgs_per_round; /* windowed tests only, per direction */
	long recv_buffers;   /* windowed tests only: distinct receive buffers of a round */
	/* Latency: one-way (half the round trip) mean, minimum, median, p99. */
	double avg_us, min_us, p50_us, p99_us;
	double bw_mbps, mmsg_s;
};

/* Sense-reversing barrier for the two rank threads: the in-process control
 * path. */
struct spin_barrier {
	_Alignas(64) _Atomic unsigned count;
	_Alignas(64) _Atomic unsigned phase;
};

/* What each rank says about itself at the start (rank 0 prints it). */
struct rank_info {
	int32_t cpu;     /* CPU it is pinned to, or -1 */
	int32_t pin_err; /* errno of the pinning call, or 0 */
	int32_t ncpus;   /* CPUs it was allowed to run on */
	int32_t pid;
	char host[64];
};

/* What each rank reports after a test: its senders' protocol counters and
 * what it still holds unexpected. */
struct rank_report {
	uint64_t eager, rndv, unexpected;
};

struct bench {
	const struct opts *o;
	bool net; /* ranks are processes (xp_init), not threads */
	const char *launcher;
	xp_config_t cfg;
	int nranks;          /* of the job: 2 for point-to-point tests */
	int *cpu;            /* in-process: the CPU each rank is pinned to, or -1 */
	int *pin_err;        /* in-process: pthread_setaffinity_np's error, or 0 */
	int pin_cpus;        /* in-process: CPUs this process may use */
	char transports[64]; /* collectives: what serves rank 0's pairs ("shm+tcp") */
	struct spin_barrier bar;
	double clock_ns; /* cost of one clock read */
	double base_p50_us, lat8_p50_us, bw1m_mbps;
	/* In-process, the receivers' start signals: the number of the round
	 * each is ready for. Each alone on its line, as is the next. */
	struct {
		_Alignas(64) _Atomic long v;
	} go[NRANKS];
	/* The baseline's cache line. */
	_Alignas(64) _Atomic uint64_t line;
	char pad[64 - sizeof(uint64_t)];
};

/* What one rank (a thread in-process, the process otherwise) owns. */
struct rank_state {
	struct bench *b;
	int rank, peer;
	xp_context_t *ctx;
	xp_comm_t *comm;
	xp_ep_t *ep;    /* --endpoints: the measured messages go on it, not on comm */
	xp_ep_t *ep_rx; /* and are received on it: ep, or with --one-way the other one */
	char lanes[32]; /* a result's transport when the lanes differ: "tcp/rdma" */
	pthread_t thread;
	uint8_t *sbuf, *rbuf;   /* lat, and the senders' buffer */
	uint8_t *win;           /* receivers of windowed tests: a round's buffers */
	xp_mem_t *regs[3];      /* --register: of sbuf, rbuf, win */
	int64_t *ts;            /* lat: timestamps of rank 0 */
	double *t_ns;           /* windowed tests: this rank's receive time per round */
	double *t_all;          /* the same of every rank (nranks x rounds) */
	double *sum;            /* rank 0: per-round figures to sort */
	xp_request_t **sreqs;   /* the send window */
	xp_request_t **rreqs;   /* a round's receives */
	long go_seq;            /* in-process rounds run so far, counted alike by both */
	bool sent;              /* sent since the last control operation (ctl_net) */
	uint64_t bufs_at_start; /* pooled buffers in use before the tests */
	xp_stats_t st_before;   /* counters at the start of the test */
	struct rank_info *info; /* every rank's, nranks of them */
};

static FILE *hdr_out;     /* header and summary: stdout, or stderr with --json */
static char *run_command; /* how this run was started, for the run record */

#ifndef XPORT_VERSION_STRING
#error "XPORT_VERSION_STRING comes from meson.build (meson.project_version())"
#endif

/* ------------------------------------------------------------------------- */
/* Failing                                                                   */

/* A failure ends the process at once: the other rank may be spinning in a
 * barrier or waiting for a message that will never come, and nothing it
 * could still print would be trustworthy. Between processes the peer then
 * sees this rank's connections close and fails too (or, at worst, times out
 * after XP_TIMEOUT_MS), so nothing hangs. */
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

static void __attribute__((noreturn)) die_xp(int rank, const char *call, int rc)
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
		"usage: xport-perf [lat|bw|bibw|rate|all] [--json] [--sizes a,b,c] [--iters N]\n"
		"                  [--window N] [--transport inproc|shm|tcp] [--no-pin] [--progress]\n"
		"                  [--register] [--one-buffer] [--endpoints [--one-way]]\n"
		"                  [--version] [--help]\n"
		"       xport-perf allreduce|reduce_scatter|allgather|bcast|alltoall|barrier|coll\n"
		"                  [-b MIN] [-e MAX] [-f FACTOR] [--sizes a,b,c] [--dtype T] [--op OP]\n"
		"                  [--iters N] [--warmup N] [--check] [--in-place] [--ranks N]\n"
		"                  [--json] [--transport inproc|shm|tcp] [--no-pin] [--progress]\n"
		"\n"
		"Measures xport between two ranks: two threads of this process (in-process\n"
		"transport), or, when a launcher started it (XP_RANK, OMPI_COMM_WORLD_RANK,\n"
		"PMI_RANK, RANK or SLURM_PROCID set, e.g. `xprun -n 2 xport-perf`), this\n"
		"process's rank of a job of two processes, over the transport xp_init() gives\n"
		"them. Only rank 0 prints. Each rank is pinned to a CPU (in-process: the first\n"
		"two it may use; processes: CPU rank %% N of the N it may use).\n"
		"  lat          ping-pong latency (half the round trip, receive posted first):\n"
		"               lat_us_avg, lat_us_min, lat_us_p50, lat_us_p99; in-process\n"
		"               beside two threads ping-ponging one cache line\n"
		"  bw           bandwidth of a window of sends, measured at the receiver\n"
		"               (bw_MBps, 10^6 B/s)\n"
		"  bibw         both ranks send to each other at once; the sum of both\n"
		"               directions' receive bandwidth\n"
		"  rate         message rate of small messages (Mmsg_per_s), as bw; default sizes\n"
		"               up to %d B\n"
		"  all          all four (the default)\n"
		"  allreduce, reduce_scatter, allgather, bcast, alltoall, barrier: a collective\n"
		"               between any number of ranks (the job's, or --ranks threads), as\n"
		"               nccl-tests: time_us_avg/min/p50/p99 of a call (the slowest rank's),\n"
		"               algbw_GBps, busbw_GBps; coll: all six\n"
		"  -b, --minbytes N, -e, --maxbytes N, -f, --stepfactor F\n"
		"               collectives' sizes: N, N x F, ... up to MAX (default 8 to 64m by 4);\n"
		"               sizes that are not whole elements are rounded down (said)\n"
		"  --dtype T    int8 uint8 int32 uint32 int64 uint64 float16 bfloat16 float32\n"
		"               (default) float64\n"
		"  --op OP      sum (default) prod min max avg (allreduce, reduce_scatter)\n"
		"  --warmup N   collectives: calls before the timed ones (default iters/10, >= 5)\n"
		"  --check      compare every element of every result with a local reference\n"
		"               (exit 1 naming rank, element, got and want)\n"
		"  --in-place   XP_IN_PLACE as the send buffer\n"
		"  --ranks N    in-process collectives: N threads (default 2, at most %d); not\n"
		"               pinned if the process has fewer CPUs\n"
		"  --json       JSON lines on stdout: first {\"type\":\"run\",...} (version,\n"
		"               command, transport), then one object per row with the table's\n"
		"               column names as keys (null: not measured); header on stderr\n"
		"  --sizes L    message sizes in bytes, comma-separated, each digits with an\n"
		"               optional k, m or g suffix (x1024), at most 1g\n"
		"  --iters N    lat: iterations per size; others: rounds per size (default: by\n"
		"               size and transport)\n"
		"  --window N   bw, bibw, rate: sends in flight (default %d)\n"
		"  --transport T  inproc: two threads of this process (under a launcher, rank 0\n"
		"               runs it and the other ranks exit at once); shm: ranks started\n"
		"               by a launcher on one host, over shared memory; tcp: ranks\n"
		"               started by a launcher, over TCP. Default: under a launcher,\n"
		"               whatever xp_init() chooses (XP_TRANSPORTS, else shm between\n"
		"               ranks of one host, tcp otherwise), else inproc. With shm or\n"
		"               tcp, XP_TRANSPORTS (if set) must list T; inproc does not go\n"
		"               with XP_TRANSPORTS (exit 2 either way). A job must have\n"
		"               exactly 2 ranks for lat/bw/bibw/rate; any for collectives\n"
		"  --no-pin     leave the ranks where the scheduler puts them\n"
		"  --register   point-to-point tests: register the send and receive buffers\n"
		"               (xp_mem_register), as a program that sends from them often would;\n"
		"               otherwise a transport that needs registrations makes one per\n"
		"               transfer\n"
		"  --one-buffer bw, bibw, rate: every receive of a round into one buffer, as\n"
		"               osu_bw and ucx_perftest do (the receiver's copies stay in its\n"
		"               cache); default: each into its own, as an application's would\n"
		"  --endpoints  point-to-point tests between processes: over an endpoint the\n"
		"               two ranks make (rank 0 listens, rank 1 connects: xp_listen,\n"
		"               xp_connect), not over their job's pair; transport\n"
		"               tcp-endpoint, or rdma-endpoint where it moved to RDMA\n"
		"  --one-way    --endpoints, one endpoint per direction, as NCCL's send and\n"
		"               receive comms are: each rank connects to the other, sends on\n"
		"               the endpoint it connected, receives on the one it accepted\n"
		"               (transport tcp-endpoint-1way, rdma-endpoint-1way)\n"
		"  --progress   a line on stderr per size (the default when stderr is a\n"
		"               terminal, or under xprun when xprun's is: XPRUN_STDERR_TTY=1)\n"
		"  --version    print the version and exit\n"
		"Environment: XP_TRANSPORTS, XP_TIMEOUT_MS, XP_RNDV_THRESHOLD, XP_POOL_MAX_BYTES, ...\n"
		"(xport.h). See xport-perf(1).\n",
		RATE_MAX_DEFAULT_SIZE, MAX_INPROC_RANKS, DEFAULT_WINDOW);
}

/* ------------------------------------------------------------------------- */
/* Time, statistics                                                          */

/* ------------------------------------------------------------------------- */
/* Control path                                                              */

/* Spinning is right with one busy thread per CPU; on a machine with fewer
 * CPUs than threads it would burn the peer's time slice, so after a while
 * give the CPU away. */
#define SPINS_BEFORE_YIELD 4096
/* A pause-free load loop turns over much faster; this still bounds it to
 * well under a millisecond. */
#define SPINS_BEFORE_YIELD_TIGHT (1u << 16)

static void barrier_wait(struct spin_barrier *bar, int nranks)
{
	unsigned phase = atomic_load_explicit(&bar->phase, memory_order_acquire);
	if (atomic_fetch_add_explicit(&bar->count, 1, memory_order_acq_rel) ==
	    (unsigned)nranks - 1) {
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

/*
 * Between processes, a control operation that follows this rank's sends
 * runs on a helper thread while the rank's thread keeps calling
 * xp_progress(). Why: over TCP an eager send completes as soon as its frame
 * is queued, and frames queued behind a send still in the kernel go out
 * only when the sender's engine next runs; xp_oob_barrier() and
 * xp_oob_allgather() block on the bootstrap socket without running it (the
 * local job's barrier does run it). A sender that went straight into the
 * barrier would strand the tail of its round, and the receiver would wait
 * for it until XP_TIMEOUT_MS (two xp_send() and an xp_oob_barrier() are
 * enough). The helper is pinned with the rank (it inherits the affinity)
 * and mostly sleeps in poll(). Since then the out-of-band calls run the
 * engine themselves every millisecond they wait, which a funneled rank
 * (the default here) relies on: no other thread may call into it.
 */
struct ctl_op {
	xp_context_t *ctx;
	const void *mine;
	void *all;
	size_t len;
	bool barrier;
	int rc;
	char detail[512]; /* xp_error_detail() is per thread: copied here */
	_Atomic bool done;
};

static int ctl_op_run(struct ctl_op *op)
{
	int rc = op->barrier ? xp_oob_barrier(op->ctx) :
			       xp_oob_allgather(op->ctx, op->mine, op->len, op->all);
	if (rc < 0)
		snprintf(op->detail, sizeof(op->detail), "%s", xp_error_detail());
	return rc;
}

static void *ctl_thread(void *arg)
{
	struct ctl_op *op = arg;
	op->rc = ctl_op_run(op);
	atomic_store_explicit(&op->done, true, memory_order_release);
	return NULL;
}

static void ctl_net(struct rank_state *rs, bool barrier, const void *mine, size_t len, void *all)
{
	struct ctl_op op = {
		.ctx = rs->ctx, .mine = mine, .all = all, .len = len, .barrier = barrier
	};
	const char *call = barrier ? "xp_oob_barrier" : "xp_oob_allgather";
	pthread_t thread;
	/* Funneled, no other thread may call into the rank; the barrier runs
	 * the engine itself, every millisecond it waits (src/job/init.c). */
	if (!rs->sent || rs->b->cfg.thread_mode == XP_THREAD_FUNNELED) {
		op.rc = ctl_op_run(&op);
	} else {
		rs->sent = false;
		int rc = pthread_create(&thread, NULL, ctl_thread, &op);
		if (rc != 0)
			die("rank %d: pthread_create: %s", rs->rank, strerrordesc_np(rc));
		for (unsigned idle = 0; !atomic_load_explicit(&op.done, memory_order_acquire);) {
			if (xp_progress(rs->ctx) > 0)
				idle = 0;
			else if (++idle % 64 == 0)
				sched_yield(); /* lets the helper run when its answer came */
		}
		pthread_join(thread, NULL);
	}
	if (op.rc < 0)
		die("rank %d: %s failed: %s%s%s", rs->rank, call, xp_strerror(op.rc),
		    *op.detail ? ": " : "", op.detail);
}

/* A barrier of both ranks, outside the measured transport. */
static void ctl_barrier(struct rank_state *rs)
{
	if (rs->b->net)
		ctl_net(rs, true, NULL, 0, NULL);
	else
		barrier_wait(&rs->b->bar, rs->b->nranks);
}

/* Every rank's @len bytes, in rank order, into @all; outside the measured
 * transport (a local job's xp_oob_allgather works through memory). */
static void ctl_gather(struct rank_state *rs, const void *mine, size_t len, void *all)
{
	if (rs->b->net)
		ctl_net(rs, false, mine, len, all);
	else
		XP_CHECK(rs->rank, xp_oob_allgather(rs->ctx, mine, len, all));
}

/* In-process: a sender waits for its receiver's go, a tight spin because
 * this handoff is inside the measured interval. */
static void wait_go(struct bench *b, int peer, long seq)
{
	unsigned spins = 0;
	while (atomic_load_explicit(&b->go[peer].v, memory_order_acquire) != seq) {
		if (++spins > SPINS_BEFORE_YIELD_TIGHT) {
			sched_yield();
			spins = 0;
		}
	}
}

/*
 * Starts a round of a windowed test once every receive of it is posted.
 * Returns the receiver's start time (0 for a rank that only sends).
 *
 * In-process: a barrier, then each receiver reads the clock and says go, and
 * each sender waits for its peer's go: one cache-line handoff inside the
 * interval (the baseline row), a small and known understatement of the
 * bandwidth.
 *
 * Between processes there is no shared line; the go is a control barrier.
 * A first barrier ("ready") lines the ranks up, so that neither rank's
 * lateness lands in the other's interval. Then each receiver starts its
 * clock at the latest moment it knows the peer cannot have sent yet: the
 * barrier runs through rank 0 (a star: rank 0 leaves it when the others'
 * contributions have arrived, the others when rank 0's answer has), so
 * rank 1 reads the clock just before the "go" barrier and rank 0 just after
 * it. Either way the interval includes one control-channel hop (tens of us):
 * the figures are a slight understatement, and the rounds are made long
 * enough (NET_ROUND_MSGS, NET_ROUND_BYTES) to keep it small.
 */
static int64_t round_start(struct rank_state *rs, bool sends, bool recvs)
{
	struct bench *b = rs->b;
	int64_t t0 = 0;

	if (!b->net) {
		barrier_wait(&b->bar, b->nranks);
		rs->go_seq++;
		if (recvs) {
			t0 = now_ns();
			atomic_store_explicit(&b->go[rs->rank].v, rs->go_seq, memory_order_release);
		}
		if (sends)
			wait_go(b, rs->peer, rs->go_seq);
		return t0;
	}
	ctl_barrier(rs);
	if (recvs && rs->rank != 0)
		t0 = now_ns();
	ctl_barrier(rs);
	if (recvs && rs->rank == 0)
		t0 = now_ns();
	return t0;
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

/* The measured sends and receives: to and from the peer rank, or on the
 * endpoint between the two (--endpoints). */
static int p2p_isend(const struct rank_state *rs, const void *buf, size_t len, uint64_t tag,
		     xp_request_t **req)
{
	return rs->ep != NULL ? xp_ep_isend(rs->ep, buf, len, tag, req) :
				xp_isend(rs->comm, buf, len, rs->peer, tag, req);
}

static int p2p_irecv(const struct rank_state *rs, void *buf, size_t cap, uint64_t tag,
		     xp_request_t **req)
{
	return rs->ep != NULL ? xp_ep_irecv(rs->ep_rx, buf, cap, tag, XP_TAG_EXACT, req) :
				xp_irecv(rs->comm, buf, cap, rs->peer, tag, XP_TAG_EXACT, req);
}

/* Whether the measured messages go on an endpoint, whose receives report
 * source 0 (its only peer). */
static bool on_endpoint;

static void check_recv(int rank, const char *test, size_t size, long i, const xp_status_t *st,
		       const uint8_t *buf, int src, uint64_t tag)
{
	if (st->length != size || st->source != (on_endpoint ? 0 : src) || st->tag != tag)
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

static void lat_plan(const struct bench *b, size_t size, long *iters, long *warm)
{
	if (b->o->iters > 0)
		*iters = b->o->iters;
	else if (b->net)
		/* Round trips over loopback TCP here: ~15 us for small
		 * messages, ~1 ms at 1 MiB, ~6 ms at 4 MiB. The sweep takes
		 * ~4 s and 8 B still gets 10^4 samples. */
		*iters = size <= 4096    ? 10000 :
			 size <= 65536   ? 2000 :
			 size <= 262144  ? 1000 :
			 size <= 1048576 ? 300 :
					   100;
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

/* Rounds, warmup rounds and windows per round of a windowed test whose
 * messages go in @dirs directions (bibw: 2). */
static void stream_plan(const struct bench *b, size_t size, int dirs, long *rounds, long *warm,
			long *batch)
{
	const struct opts *o = b->o;
	const size_t per_window = size * (size_t)o->window;
	if (!b->net) {
		*batch = 1;
		if (o->iters > 0) {
			*rounds = o->iters;
		} else {
			/* About 1 GiB a size, within bounds that keep small
			 * sizes statistically sound and big ones quick. */
			long r = per_window != 0 ? (long)(((size_t)1 << 30) / per_window) : 2000;
			*rounds = r < 10 ? 10 : (r > 2000 ? 2000 : r);
		}
	} else {
		/* Byte budgets count both directions. */
		const size_t moved = per_window * (size_t)dirs;
		long by_msgs = (NET_ROUND_MSGS + o->window - 1) / o->window;
		long by_bytes = moved != 0 ? (long)(NET_ROUND_BYTES / moved) : by_msgs;
		*batch = by_msgs < by_bytes ? by_msgs : by_bytes;
		if (*batch < 1)
			*batch = 1;
		if (o->iters > 0) {
			*rounds = o->iters;
		} else {
			/* About 512 MiB a size, 10 to 40 rounds. Over loopback
			 * TCP here a round is ~3 ms (8 B; the go's hop, ~12 us,
			 * is 0.5% of it) to ~100 ms (4 MiB), and a default run
			 * of every test takes ~15-25 s. */
			size_t per_round = moved * (size_t)*batch;
			long r = per_round != 0 ? (long)(((size_t)512 << 20) / per_round) : 40;
			*rounds = r < 10 ? 10 : (r > 40 ? 40 : r);
		}
	}
	*warm = *rounds / 10 > 0 ? *rounds / 10 : 1;
}

/* ------------------------------------------------------------------------- */
/* Output (rank 0 only)                                                      */

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
	printf("%-5s %-19s %-8s %9s %7s %10s %10s %10s %10s %9s %10s\n", "test", "transport",
	       "protocol", "size", "iters", "lat_us_avg", "lat_us_min", "lat_us_p50", "lat_us_p99",
	       "bw_MBps", "Mmsg_per_s");
	fflush(stdout);
}

static void print_row(const struct opts *o, const struct row *r)
{
	/* Every figure, in the order of the table's columns and named alike. */
	const double v[6] = { r->avg_us, r->min_us, r->p50_us, r->p99_us, r->bw_mbps, r->mmsg_s };
	static const int prec[6] = { 3, 3, 3, 3, 1, 3 };
	char f[6][32];
	for (int k = 0; k < 6; k++)
		(o->json ? json_num : fmt_num)(f[k], sizeof(f[k]), v[k], prec[k]);
	if (o->json) {
		printf("{\"test\":\"%s\",\"transport\":\"%s\",\"protocol\":\"%s\",\"size\":%zu,"
		       "\"iters\":%ld,\"lat_us_avg\":%s,\"lat_us_min\":%s,\"lat_us_p50\":%s,"
		       "\"lat_us_p99\":%s,\"bw_MBps\":%s,\"Mmsg_per_s\":%s",
		       r->test, r->transport, r->protocol, r->size, r->iters, f[0], f[1], f[2],
		       f[3], f[4], f[5]);
		if (r->window > 0)
			printf(",\"window\":%d,\"msgs_per_round\":%ld,\"recv_buffers\":%ld",
			       r->window, r->msgs_per_round, r->recv_buffers);
		else
			printf(",\"window\":null,\"msgs_per_round\":null,\"recv_buffers\":null");
		if (r->route_protocol != NULL)
			printf(",\"route_protocol\":\"%s\"", r->route_protocol);
		printf("}\n");
	} else {
		printf("%-5s %-19s %-8s %9zu %7ld %10s %10s %10s %10s %9s %10s\n", r->test,
		       r->transport, r->protocol, r->size, r->iters, f[0], f[1], f[2], f[3], f[4],
		       f[5]);
	}
	/* Rows appear as they are measured; the other rank waits meanwhile. */
	fflush(stdout);
}

/* @s as a JSON string, quotes included. */
static void json_str(FILE *f, const char *s)
{
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < 0x20)
			fprintf(f, "\\u%04x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

/* With --json, the first line: what ran, so that a plot can say it. */
static void print_run_record(const struct bench *b, const char *transport)
{
	if (!b->o->json)
		return;
	printf("{\"type\":\"run\",\"system\":\"xport\",\"tool\":\"xport-perf\",\"version\":");
	json_str(stdout, XPORT_VERSION_STRING);
	printf(",\"command\":");
	json_str(stdout, run_command != NULL ? run_command : "xport-perf");
	printf(",\"transport\":");
	json_str(stdout, transport);
	printf(",\"launcher\":");
	if (b->net)
		json_str(stdout, b->launcher);
	else
		printf("null");
	printf("}\n");
	fflush(stdout);
}

static void progress(const struct rank_state *rs, const char *test, size_t size)
{
	if (rs->rank == 0 && rs->b->o->progress)
		fprintf(stderr, "xport-perf: %s %zu B ...\n", test, size);
}

/* ------------------------------------------------------------------------- */
/* Counters and routes                                                       */

/* Every rank, before a test: notes its counters. */
static void stats_before(struct rank_state *rs)
{
	XP_CHECK(rs->rank, xp_stats_get(rs->ctx, &rs->st_before));
}

/*
 * Every rank, after a test: brings each rank's protocol counters to rank 0,
 * which checks that nothing was left behind and fills @r's transport and
 * protocol: the route xp_route_get() gives for the size, cross-checked with
 * what the senders counted.
 */
static void stats_after(struct rank_state *rs, const char *test, size_t size, struct row *r)
{
	xp_stats_t st;
	struct rank_report mine, all[NRANKS];
	XP_CHECK(rs->rank, xp_stats_get(rs->ctx, &st));
	mine = (struct rank_report){
		.eager = st.eager_sends - rs->st_before.eager_sends,
		.rndv = st.rndv_sends - rs->st_before.rndv_sends,
		.unexpected = st.unexpected_now,
	};
	ctl_gather(rs, &mine, sizeof(mine), all);
	if (rs->rank != 0)
		return;

	uint64_t eager = 0, rndv = 0;
	for (int k = 0; k < NRANKS; k++) {
		eager += all[k].eager;
		rndv += all[k].rndv;
		/* Every receive was posted before its send: a message left
		 * queued means it went to the wrong receive, or nowhere. */
		if (all[k].unexpected != 0)
			die("rank %d: %s %zu B: %" PRIu64
			    " messages still unexpected after the test",
			    k, test, size, all[k].unexpected);
	}
	xp_route_t route;
	XP_CHECK(0, xp_route_get(rs->ctx, rs->peer, size, &route));
	const char *counted = eager != 0 && rndv != 0 ? "mixed" : rndv != 0 ? "rndv" : "eager";
	/* "tcp/rdma": messages over tcp, rendezvous payloads over rdma. An
	 * endpoint's are its own route's: "rdma-endpoint" once it moved. */
	if (rs->ep != NULL) {
		xp_route_t er;
		XP_CHECK(0, xp_ep_route(rs->ep, size, &er));
		snprintf(rs->lanes, sizeof(rs->lanes), "%s-endpoint%s", er.transport,
			 rs->ep_rx != rs->ep ? "-1way" : "");
		r->transport = rs->lanes;
		r->protocol = counted;
		r->route_protocol = NULL;
		return;
	}
	if (strcmp(route.transport, route.payloads) != 0) {
		snprintf(rs->lanes, sizeof(rs->lanes), "%s/%s", route.transport, route.payloads);
		r->transport = rs->lanes;
	} else {
		r->transport = route.transport;
	}
	r->protocol = route.protocol;
	r->route_protocol = NULL;
	if (strcmp(counted, route.protocol) != 0) {
		/* Real, not an error: a sender out of eager credit with its
		 * receiver switches to rendezvous (ARCHITECTURE.md). Show what
		 * happened, and what the route promised. */
		r->protocol = counted;
		r->route_protocol = route.protocol;
		fprintf(stderr,
			"xport-perf: note: %s %zu B: the route says %s (rendezvous from %zu B) but "
			"the senders counted %" PRIu64 " eager and %" PRIu64
			" rendezvous sends; the row says %s\n",
			test, size, route.protocol, route.rndv_threshold, eager, rndv, counted);
	}
}

/* Polls until @ep is connected, or dies. */
static void ep_wait_ready(const struct rank_state *rs, xp_ep_t *ep)
{
	int rc;
	while ((rc = xp_ep_ready(ep)) == -EAGAIN)
		;
	XP_CHECK(rs->rank, rc);
}

static xp_ep_t *ep_wait_accept(const struct rank_state *rs, xp_listener_t *l)
{
	xp_ep_t *ep;
	int rc;
	while ((rc = xp_accept(l, &ep)) == -EAGAIN)
		;
	XP_CHECK(rs->rank, rc);
	return ep;
}

/*
 * --endpoints: rank 0 listens and gives its address to rank 1 out of band;
 * rank 1 connects; both poll until the endpoint is ready, and both send
 * and receive on it. With --one-way, as NCCL's send and receive comms are:
 * each rank listens and connects to the other, sends on the endpoint it
 * connected and receives on the one it accepted.
 */
static void connect_endpoint(struct rank_state *rs, bool one_way)
{
	xp_ep_addr_t mine = { { 0 } }, all[NRANKS];
	xp_listener_t *l = NULL;
	if (rs->rank == 0 || one_way)
		XP_CHECK(rs->rank, xp_listen(rs->ctx, &l, &mine));
	ctl_gather(rs, &mine, sizeof(mine), all);
	if (one_way) {
		XP_CHECK(rs->rank, xp_connect(rs->ctx, &all[rs->peer], &rs->ep));
		rs->ep_rx = ep_wait_accept(rs, l);
		ep_wait_ready(rs, rs->ep);
	} else if (rs->rank == 0) {
		rs->ep = rs->ep_rx = ep_wait_accept(rs, l);
	} else {
		XP_CHECK(rs->rank, xp_connect(rs->ctx, &all[0], &rs->ep));
		rs->ep_rx = rs->ep;
		ep_wait_ready(rs, rs->ep);
	}
	xp_listener_close(l);
	on_endpoint = true;
	/* One message each way: a lane's pair is made by its first message
	 * (RDMA's queue pair, its share of the receive queue), which then
	 * counts neither in the tests nor as buffers they left in use. */
	uint8_t out = 1, in = 0;
	xp_request_t *s, *r;
	XP_CHECK(rs->rank, xp_ep_irecv(rs->ep_rx, &in, 1, 0, XP_TAG_EXACT, &r));
	XP_CHECK(rs->rank, xp_ep_isend(rs->ep, &out, 1, 0, &s));
	XP_CHECK(rs->rank, xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	XP_CHECK(rs->rank, xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
}

/* ------------------------------------------------------------------------- */
/* Tests                                                                     */

/* @row's latency figures from @iters round-trip times (ns), which it sorts. */
static void lat_stats(struct row *row, int64_t *rt, long iters)
{
	double sum = 0;
	qsort(rt, (size_t)iters, sizeof(*rt), cmp_i64);
	for (long i = 0; i < iters; i++)
		sum += (double)rt[i];
	row->iters = iters;
	row->avg_us = sum / (double)iters / 2e3;
	row->min_us = (double)rt[0] / 2e3;
	row->p50_us = (double)rt[pct_index((size_t)iters, 50)] / 2e3;
	row->p99_us = (double)rt[pct_index((size_t)iters, 99)] / 2e3;
	row->bw_mbps = -1;
	row->mmsg_s = -1;
}

/* Two threads hand one cache line back and forth: the floor for any
 * shared-memory transport between these two CPUs. In-process only. */
static void run_baseline(struct rank_state *rs)
{
	struct bench *b = rs->b;
	long iters = BASELINE_ITERS, warm = iters / 10, n = warm + iters;
	_Atomic uint64_t *line = &b->line;

	if (rs->rank == 0) {
		progress(rs, "lat cacheline-baseline", sizeof(uint64_t));
		atomic_store(line, 0);
	}
	barrier_wait(&b->bar, b->nranks);
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
	barrier_wait(&b->bar, b->nranks);
	if (rs->rank == 0) {
		int64_t *rt = rs->ts + warm;
		for (long i = 0; i < iters; i++)
			rt[i] = rs->ts[warm + i + 1] - rs->ts[warm + i];
		struct row row = {
			.test = "lat",
			.transport = "cacheline-baseline",
			.protocol = b->o->json ? "none" : "-",
			.size = sizeof(uint64_t),
		};
		lat_stats(&row, rt, iters);
		b->base_p50_us = row.p50_us;
		print_row(b->o, &row);
	}
}

static void run_lat(struct rank_state *rs, size_t size)
{
	struct bench *b = rs->b;
	const int me = rs->rank, peer = rs->peer;
	const uint64_t tag = test_tag[T_LAT];
	xp_request_t *rr = NULL, *sr;
	xp_status_t st;
	long iters, warm;

	lat_plan(b, size, &iters, &warm);
	const long n = warm + iters;
	progress(rs, "lat", size);
	stats_before(rs);
	if (me == 1) /* The first ping's receive is posted before rank 0 may send. */
		XP_CHECK(me, p2p_irecv(rs, rs->rbuf, size, tag, &rr));
	ctl_barrier(rs);
	if (me == 0) {
		for (long i = 0; i < n; i++) {
			rs->ts[i] = now_ns();
			stamp(rs->sbuf, size, i, me);
			XP_CHECK(me, p2p_irecv(rs, rs->rbuf, size, tag, &rr));
			XP_CHECK(me, p2p_isend(rs, rs->sbuf, size, tag, &sr));
			rs->sent = true;
			wait_ok(me, &sr, NULL, "xp_wait (lat send)");
			wait_ok(me, &rr, &st, "xp_wait (lat receive)");
			check_recv(me, "lat", size, i, &st, rs->rbuf, peer, tag);
		}
		rs->ts[n] = now_ns();
	} else {
		for (long i = 0; i < n; i++) {
			wait_ok(me, &rr, &st, "xp_wait (lat receive)");
			check_recv(me, "lat", size, i, &st, rs->rbuf, peer, tag);
			/* The next ping cannot be sent before this pong
			 * arrives, so its receive is posted first. */
			if (i + 1 < n)
				XP_CHECK(me, p2p_irecv(rs, rs->rbuf, size, tag, &rr));
			stamp(rs->sbuf, size, i, me);
			XP_CHECK(me, p2p_isend(rs, rs->sbuf, size, tag, &sr));
			rs->sent = true;
			wait_ok(me, &sr, NULL, "xp_wait (lat send)");
		}
	}
	struct row row = { 0 };
	stats_after(rs, "lat", size, &row);
	if (me != 0)
		return;
	int64_t *rt = rs->ts + warm;
	for (long i = 0; i < iters; i++)
		rt[i] = rs->ts[warm + i + 1] - rs->ts[warm + i];
	row.test = "lat";
	row.size = size;
	lat_stats(&row, rt, iters);
	if (size == 8)
		b->lat8_p50_us = row.p50_us;
	print_row(b->o, &row);
}

/*
 * Where the round's receive @k lands: its own slot of the window, or with
 * --one-buffer the first slot for all (as osu_bw and ucx_perftest receive:
 * the receiver's writes stay in its cache, and a copying transport's
 * bandwidth is then the cache's, not memory's).
 */
static inline uint8_t *recv_slot(const struct rank_state *rs, long k, size_t size)
{
	return rs->win + (rs->b->o->one_buffer ? 0 : (size_t)k * size);
}

/* Sends @n messages of the round, at most a window in flight. */
static void send_round(struct rank_state *rs, uint64_t tag, size_t size, long n)
{
	const int me = rs->rank, w = rs->b->o->window;
	for (long i = 0; i < n; i++) {
		xp_request_t **slot = &rs->sreqs[i % w];
		if (i >= w)
			wait_ok(me, slot, NULL, "xp_wait (send)");
		XP_CHECK(me, p2p_isend(rs, rs->sbuf, size, tag, slot));
		rs->sent = true;
	}
	for (long i = n > w ? n - w : 0; i < n; i++)
		wait_ok(me, &rs->sreqs[i % w], NULL, "xp_wait (send)");
}

/* Completes the round's @n receives in order; returns when the last did. */
static int64_t recv_round(struct rank_state *rs, const char *test, uint64_t tag, size_t size,
			  long round, long n)
{
	xp_status_t st;
	for (long k = 0; k < n; k++) {
		wait_ok(rs->rank, &rs->rreqs[k], &st, "xp_wait (receive)");
		check_recv(rs->rank, test, size, round, &st, recv_slot(rs, k, size), rs->peer, tag);
	}
	return now_ns();
}

/*
 * Polls @req: 1 with @st when it completed, 0 if not yet. Once the loop
 * has seen no completion for the context's timeout, waits for it with a
 * deadline of 0 instead, so that the library cancels it and names what is
 * stuck (peer, tag, what was last exchanged), and the run ends with that.
 */
static int poll_req(struct rank_state *rs, xp_request_t **req, xp_status_t *st, bool stalled,
		    const char *what)
{
	int rc = stalled ? xp_wait(req, 0, st) : xp_test(req, st);
	if (rc < 0)
		die_xp(rs->rank, what, rc);
	return stalled ? 1 : rc;
}

/*
 * bibw: sends @n messages (a window in flight) while the round's @n
 * receives complete; returns when the last receive did. One loop polls
 * both, so neither direction waits for the other.
 */
static int64_t sendrecv_round(struct rank_state *rs, const char *test, uint64_t tag, size_t size,
			      long round, long n)
{
	const int me = rs->rank, w = rs->b->o->window;
	const int64_t limit = (int64_t)rs->b->cfg.timeout_ms * 1000000;
	long posted = 0, sent = 0, got = 0;
	int64_t t_last = 0, t_moved = now_ns();
	unsigned idle = 0;
	bool stalled = false;
	xp_status_t st;

	while (sent < n || got < n) {
		bool moved = false;
		while (posted < n && posted - sent < w) {
			XP_CHECK(me, p2p_isend(rs, rs->sbuf, size, tag, &rs->sreqs[posted % w]));
			posted++;
			moved = true;
			rs->sent = true;
		}
		while (sent < posted &&
		       poll_req(rs, &rs->sreqs[sent % w], &st, stalled, "xp_wait (send)") == 1) {
			sent++;
			moved = true;
			stalled = false;
		}
		while (got < n &&
		       poll_req(rs, &rs->rreqs[got], &st, stalled, "xp_wait (receive)") == 1) {
			check_recv(me, test, size, round, &st, recv_slot(rs, got, size), rs->peer,
				   tag);
			if (++got == n)
				t_last = now_ns();
			moved = true;
			stalled = false;
		}
		if (moved) {
			idle = 0;
			continue;
		}
		if (++idle % SPINS_BEFORE_YIELD != 0)
			continue;
		int64_t now = now_ns();
		if (idle == SPINS_BEFORE_YIELD)
			t_moved = now;
		else if (now - t_moved > limit)
			stalled = true;
		sched_yield(); /* only matters when the ranks share a CPU */
	}
	return t_last;
}

/*
 * bw, bibw, rate. A round: the receivers post all of its receives, the
 * round starts (round_start), the senders send its messages with at most a
 * window in flight, each receiver times it to its last completion.
 *
 * The interval cannot start at the first completion: one progress call
 * takes in all the messages that arrived (in-process, up to a ring's worth;
 * over TCP a coalesced batch), so the receiver sees many complete at once
 * (in-process, a 64 x 64 KiB window "took" 0.3 us).
 */
static void run_stream(struct rank_state *rs, enum test_id t, size_t size)
{
	struct bench *b = rs->b;
	const struct opts *o = b->o;
	const int me = rs->rank, w = o->window;
	const bool bidir = t == T_BIBW;
	const bool sends = bidir || me == 0, recvs = bidir || me == 1;
	const char *name = test_name[t];
	const uint64_t tag = test_tag[t];
	long rounds, warm, batch;

	stream_plan(b, size, bidir ? 2 : 1, &rounds, &warm, &batch);
	const long n = (long)w * batch; /* messages per round and direction */
	progress(rs, name, size);
	stats_before(rs);
	for (long r = 0; r < warm + rounds; r++) {
		if (recvs)
			for (long k = 0; k < n; k++)
				XP_CHECK(me, p2p_irecv(rs, recv_slot(rs, k, size), size, tag,
						       &rs->rreqs[k]));
		/* The previous round's sends have all completed, so the
		 * buffer is ours again. */
		if (sends)
			stamp(rs->sbuf, size, r, me);
		int64_t t0 = round_start(rs, sends, recvs), t1 = 0;
		if (bidir)
			t1 = sendrecv_round(rs, name, tag, size, r, n);
		else if (sends)
			send_round(rs, tag, size, n);
		else
			t1 = recv_round(rs, name, tag, size, r, n);
		if (r >= warm)
			rs->t_ns[r - warm] = recvs ? (double)(t1 - t0 > 0 ? t1 - t0 : 1) : 0;
	}
	ctl_gather(rs, rs->t_ns, sizeof(double) * (size_t)rounds, rs->t_all);
	struct row row = { 0 };
	stats_after(rs, name, size, &row);
	if (me != 0)
		return;

	/* Per round: the receivers' bandwidths added up (one receiver
	 * unless bibw), then the median over rounds. */
	double *bw = rs->sum, *rate = rs->sum + rounds;
	for (long r = 0; r < rounds; r++) {
		bw[r] = rate[r] = 0;
		for (int k = 0; k < NRANKS; k++) {
			double ns = rs->t_all[(size_t)k * (size_t)rounds + (size_t)r];
			if (ns <= 0)
				continue;
			bw[r] += (double)n * (double)size * 1e3 / ns;
			rate[r] += (double)n * 1e3 / ns;
		}
	}
	qsort(bw, (size_t)rounds, sizeof(double), cmp_double);
	qsort(rate, (size_t)rounds, sizeof(double), cmp_double);
	row.test = name;
	row.size = size;
	row.iters = rounds;
	row.window = w;
	row.msgs_per_round = n;
	row.recv_buffers = o->one_buffer ? 1 : n;
	row.avg_us = row.min_us = row.p50_us = row.p99_us = -1;
	row.bw_mbps = bw[pct_index((size_t)rounds, 50)];
	row.mmsg_s = rate[pct_index((size_t)rounds, 50)];
	if (t == T_BW && size == 1048576)
		b->bw1m_mbps = row.bw_mbps;
	print_row(o, &row);
}

/* ------------------------------------------------------------------------- */
/* Collectives                                                               */

/* bcast's root, as nccl-tests' default. */
#define COLL_ROOT 0

/* What a call of a requested size moves. */
struct coll_shape {
	size_t count; /* the count argument of the call (elements) */
	size_t elems; /* elements of the largest buffer: the count column */
	size_t bytes; /* elems x element size: the size column */
};

static bool coll_has_blocks(enum coll_id t)
{
	return t == C_REDUCE_SCATTER || t == C_ALLGATHER || t == C_ALLTOALL;
}

static bool coll_reduces(enum coll_id t)
{
	return t == C_ALLREDUCE || t == C_REDUCE_SCATTER;
}

/* @size bytes, rounded down to whole elements (and to a block per rank). */
static void coll_shape_of(enum coll_id t, size_t size, xp_dtype_t dt, int n, struct coll_shape *sh)
{
	const size_t es = xp_dtype_size(dt), e = size / es;
	if (t == C_BARRIER)
		sh->count = sh->elems = 0;
	else if (coll_has_blocks(t))
		sh->elems = (sh->count = e / (size_t)n) * (size_t)n;
	else
		sh->count = sh->elems = e;
	sh->bytes = sh->elems * es;
}

/* Calls of a size (perf_util.h: a default run of `xprun -n 2 xport-perf
 * allreduce` takes a few seconds here). */
static void coll_plan(const struct opts *o, size_t bytes, long *iters, long *warm)
{
	*iters = o->iters > 0 ? o->iters : perf_coll_iters(bytes);
	*warm = o->warmup >= 0 ? o->warmup : perf_coll_warmup(*iters);
}

/* nccl-tests' bus bandwidth factor (doc/PERFORMANCE.md there), or -1. */
static double busbw_factor(enum coll_id t, int n)
{
	switch (t) {
	case C_ALLREDUCE:
		return 2.0 * (n - 1) / n;
	case C_REDUCE_SCATTER:
	case C_ALLGATHER:
	case C_ALLTOALL:
		return (double)(n - 1) / n;
	case C_BCAST:
		return 1.0;
	default:
		return -1;
	}
}

/* float16 and bfloat16 by hand, rounding to nearest even: the program
 * sees only the public API. */
static uint16_t f32_to_f16(float f)
{
	uint32_t u, sign, man;
	int32_t exp;
	memcpy(&u, &f, sizeof(u));
	sign = (u >> 16) & 0x8000;
	exp = (int32_t)((u >> 23) & 0xff) - 127 + 15;
	man = u & 0x7fffff;
	if (((u >> 23) & 0xff) == 0xff)
		return (uint16_t)(sign | 0x7c00 | (man != 0 ? 0x200 : 0));
	if (exp >= 31)
		return (uint16_t)(sign | 0x7c00);
	if (exp <= 0) {
		if (exp < -10)
			return (uint16_t)sign;
		man |= 0x800000;
		unsigned shift = (unsigned)(14 - exp);
		uint32_t h = man >> shift, rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
		if (rem > mid || (rem == mid && (h & 1)))
			h++;
		return (uint16_t)(sign | h);
	}
	uint32_t h = sign | ((uint32_t)exp << 10) | (man >> 13), rem = man & 0x1fff;
	if (rem > 0x1000 || (rem == 0x1000 && (h & 1)))
		h++; /* a carry into the exponent is still right */
	return (uint16_t)h;
}

static float f16_to_f32(uint16_t h)
{
	uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
	float f;
	if (exp == 0) {
		f = (float)man / 16777216.0f; /* 2^-24 */
		return sign != 0 ? -f : f;
	}
	if (exp == 31)
		u = sign | 0x7f800000 | (man << 13);
	else
		u = sign | ((exp - 15 + 127) << 23) | (man << 13);
	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint16_t f32_to_bf16(float f)
{
	uint32_t u;
	memcpy(&u, &f, sizeof(u));
	if ((u & 0x7fffffff) > 0x7f800000)
		return (uint16_t)((u >> 16) | 0x40); /* NaN stays NaN */
	return (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16);
}

static float bf16_to_f32(uint16_t h)
{
	uint32_t u = (uint32_t)h << 16;
	float f;
	memcpy(&f, &u, sizeof(f));
	return f;
}

/* Element @i of @buf, of type @dt, set to @v (integers wrap, floats round). */
static void put_elem(void *buf, size_t i, xp_dtype_t dt, int64_t v)
{
	switch (dt) {
	case XP_INT8:
		((int8_t *)buf)[i] = (int8_t)v;
		break;
	case XP_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)v;
		break;
	case XP_INT32:
		((int32_t *)buf)[i] = (int32_t)v;
		break;
	case XP_UINT32:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	case XP_INT64:
		((int64_t *)buf)[i] = v;
		break;
	case XP_UINT64:
		((uint64_t *)buf)[i] = (uint64_t)v;
		break;
	case XP_FLOAT16:
		((uint16_t *)buf)[i] = f32_to_f16((float)v);
		break;
	case XP_BFLOAT16:
		((uint16_t *)buf)[i] = f32_to_bf16((float)v);
		break;
	case XP_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	default:
		((double *)buf)[i] = (double)v;
		break;
	}
}

static double get_elem(const void *buf, size_t i, xp_dtype_t dt)
{
	switch (dt) {
	case XP_INT8:
		return ((const int8_t *)buf)[i];
	case XP_UINT8:
		return ((const uint8_t *)buf)[i];
	case XP_INT32:
		return ((const int32_t *)buf)[i];
	case XP_UINT32:
		return ((const uint32_t *)buf)[i];
	case XP_INT64:
		return (double)((const int64_t *)buf)[i];
	case XP_UINT64:
		return (double)((const uint64_t *)buf)[i];
	case XP_FLOAT16:
		return f16_to_f32(((const uint16_t *)buf)[i]);
	case XP_BFLOAT16:
		return bf16_to_f32(((const uint16_t *)buf)[i]);
	case XP_FLOAT32:
		return ((const float *)buf)[i];
	default:
		return ((const double *)buf)[i];
	}
}

/*
 * --check: rank @r's input at element @i, a small integer so that every
 * partial result is exact in every type (bfloat16 holds the integers to
 * 256 exactly: sums stay exact up to 128 ranks). The data collectives get
 * values that tell rank and element apart; avg's inputs add up to a
 * multiple of the number of ranks, so the mean is exact too.
 */
static int64_t coll_input(enum coll_id t, xp_op_t op, int n, int r, size_t i)
{
	const size_t ur = (size_t)r;
	if (!coll_reduces(t))
		return (int64_t)((i * 7 + ur * 13) % 100);
	switch (op) {
	case XP_PROD: /* at most one rank gives a 2 */
		return 1 + (r < 7 && (i + ur) % 7 == 0);
	case XP_MIN:
	case XP_MAX:
		return (int64_t)((i * 3 + ur * 5) % 11);
	case XP_AVG: {
		int64_t k = (int64_t)(i % 4) + 1;
		if (n > 1 && r < 2)
			return r == 0 ? k + 1 : k - 1;
		return k;
	}
	default:
		return (int64_t)((i + 2 * ur) % 3);
	}
}

/* The reduction over every rank's input at element @i, in @dt. */
static double coll_want_reduced(enum coll_id t, xp_op_t op, xp_dtype_t dt, int n, size_t i)
{
	int64_t acc = coll_input(t, op, n, 0, i);
	for (int r = 1; r < n; r++) {
		int64_t v = coll_input(t, op, n, r, i);
		if (op == XP_PROD)
			acc *= v;
		else if (op == XP_MIN)
			acc = v < acc ? v : acc;
		else if (op == XP_MAX)
			acc = v > acc ? v : acc;
		else
			acc += v;
	}
	if (op == XP_AVG)
		acc /= n;
	uint64_t one[1];
	put_elem(one, 0, dt, acc); /* wraps or rounds as the type does */
	return get_elem(one, 0, dt);
}

/* The input of the call (and, with --check, a known pattern where the
 * result goes, so that a call that writes nothing fails). */
static void coll_fill(struct rank_state *rs, enum coll_id t, const struct coll_shape *sh,
		      bool in_place)
{
	const struct opts *o = rs->b->o;
	const xp_dtype_t dt = o->dtype;
	const int me = rs->rank, n = rs->b->nranks;
	const size_t es = xp_dtype_size(dt);
	uint8_t *in = in_place ? rs->rbuf : rs->sbuf;

	if (o->check)
		memset(rs->rbuf, 0xa5, sh->bytes);
	switch (t) {
	case C_BCAST:
		if (me == COLL_ROOT)
			for (size_t i = 0; i < sh->count; i++)
				put_elem(rs->rbuf, i, dt, coll_input(t, o->op, n, me, i));
		break;
	case C_ALLGATHER:
		if (in_place)
			in += (size_t)me * sh->count * es;
		for (size_t i = 0; i < sh->count; i++)
			put_elem(in, i, dt, coll_input(t, o->op, n, me, i));
		break;
	case C_BARRIER:
		break;
	default: /* allreduce, reduce_scatter, alltoall: elems in */
		for (size_t i = 0; i < sh->elems; i++)
			put_elem(in, i, dt, coll_input(t, o->op, n, me, i));
		break;
	}
}

static int coll_call(struct rank_state *rs, enum coll_id t, const struct coll_shape *sh,
		     bool in_place)
{
	const struct opts *o = rs->b->o;
	const void *in = in_place ? XP_IN_PLACE : rs->sbuf;
	switch (t) {
	case C_ALLREDUCE:
		return xp_allreduce(rs->comm, in, rs->rbuf, sh->count, o->dtype, o->op);
	case C_REDUCE_SCATTER:
		return xp_reduce_scatter(rs->comm, in, rs->rbuf, sh->count, o->dtype, o->op);
	case C_ALLGATHER:
		return xp_allgather(rs->comm, in, rs->rbuf, sh->count, o->dtype);
	case C_BCAST:
		return xp_bcast(rs->comm, rs->rbuf, sh->count, o->dtype, COLL_ROOT);
	case C_ALLTOALL:
		return xp_alltoall(rs->comm, in, rs->rbuf, sh->count, o->dtype);
	default:
		return xp_barrier(rs->comm);
	}
}

/* --check: every element of this rank's result against the reference. */
static void coll_verify(const struct rank_state *rs, enum coll_id t, const struct coll_shape *sh,
			long call)
{
	const struct opts *o = rs->b->o;
	const xp_dtype_t dt = o->dtype;
	const int me = rs->rank, n = rs->b->nranks;
	const size_t c = sh->count;
	size_t len = t == C_REDUCE_SCATTER ? c : t == C_BARRIER ? 0 : sh->elems;

	for (size_t k = 0; k < len; k++) {
		double want, got = get_elem(rs->rbuf, k, dt);
		size_t q = c != 0 ? k / c : 0, e = c != 0 ? k % c : 0;
		switch (t) {
		case C_ALLREDUCE:
			want = coll_want_reduced(t, o->op, dt, n, k);
			break;
		case C_REDUCE_SCATTER:
			want = coll_want_reduced(t, o->op, dt, n, (size_t)me * c + k);
			break;
		case C_ALLGATHER:
			want = (double)coll_input(t, o->op, n, (int)q, e);
			break;
		case C_ALLTOALL:
			want = (double)coll_input(t, o->op, n, (int)q, (size_t)me * c + e);
			break;
		default: /* bcast */
			want = (double)coll_input(t, o->op, n, COLL_ROOT, k);
			break;
		}
		if (got != want && !(got != got && want != want))
			die("rank %d: %s %zu B (%zu %s%s%s), call %ld: element %zu: got %.10g, "
			    "want %.10g (--check)",
			    me, coll_name[t], sh->bytes, sh->elems, dtype_name[dt],
			    coll_reduces(t) ? " " : "", coll_reduces(t) ? op_name[o->op] : "", call,
			    k, got, want);
	}
}

struct coll_row {
	const char *test, *dtype, *op, *algorithm, *transports;
	size_t size, count;
	long iters, warmup;
	int ranks;
	double avg_us, min_us, p50_us, p99_us, algbw, busbw; /* < 0: null */
	bool in_place, check;
};

static void print_coll_head(const struct opts *o)
{
	if (o->json)
		return;
	printf("%-14s %10s %10s %-8s %-4s %6s %11s %11s %11s %11s %10s %10s %-18s %-10s %5s\n",
	       "test", "size", "count", "dtype", "op", "iters", "time_us_avg", "time_us_min",
	       "time_us_p50", "time_us_p99", "algbw_GBps", "busbw_GBps", "algorithm", "transports",
	       "ranks");
	fflush(stdout);
}

static void print_coll_row(const struct opts *o, const struct coll_row *r)
{
	const double v[6] = { r->avg_us, r->min_us, r->p50_us, r->p99_us, r->algbw, r->busbw };
	/* JSON keeps small sizes' bandwidths from rounding to 0. */
	const int bw_prec = o->json ? 6 : 3, prec[6] = { 3, 3, 3, 3, bw_prec, bw_prec };
	char f[6][32];
	for (int k = 0; k < 6; k++)
		(o->json ? json_num : fmt_num)(f[k], sizeof(f[k]), v[k], prec[k]);
	if (!o->json) {
		printf("%-14s %10zu %10zu %-8s %-4s %6ld %11s %11s %11s %11s %10s %10s %-18s %-10s "
		       "%5d\n",
		       r->test, r->size, r->count, r->dtype != NULL ? r->dtype : "-",
		       r->op != NULL ? r->op : "-", r->iters, f[0], f[1], f[2], f[3], f[4], f[5],
		       r->algorithm, r->transports, r->ranks);
		fflush(stdout);
		return;
	}
	printf("{\"test\":\"%s\",\"size\":%zu,\"count\":%zu,\"dtype\":", r->test, r->size,
	       r->count);
	if (r->dtype != NULL)
		printf("\"%s\"", r->dtype);
	else
		printf("null");
	printf(",\"op\":");
	if (r->op != NULL)
		printf("\"%s\"", r->op);
	else
		printf("null");
	printf(",\"iters\":%ld,\"warmup\":%ld,\"time_us_avg\":%s,\"time_us_min\":%s,"
	       "\"time_us_p50\":%s,\"time_us_p99\":%s,\"algbw_GBps\":%s,\"busbw_GBps\":%s,"
	       "\"algorithm\":\"%s\",\"transports\":\"%s\",\"ranks\":%d,\"in_place\":%s,"
	       "\"check\":%s}\n",
	       r->iters, r->warmup, f[0], f[1], f[2], f[3], f[4], f[5], r->algorithm, r->transports,
	       r->ranks, r->in_place ? "true" : "false", r->check ? "true" : "false");
	fflush(stdout);
}

/* One row: @iters timed calls of collective @t of @size bytes on every rank. */
static void run_coll(struct rank_state *rs, enum coll_id t, size_t size)
{
	struct bench *b = rs->b;
	const struct opts *o = b->o;
	const int me = rs->rank, n = b->nranks;
	const bool in_place = o->in_place && t != C_BCAST && t != C_BARRIER;
	struct coll_shape sh;
	long iters, warm;

	coll_shape_of(t, size, o->dtype, n, &sh);
	coll_plan(o, sh.bytes, &iters, &warm);
	progress(rs, coll_name[t], sh.bytes);
	if (!o->check)
		coll_fill(rs, t, &sh, in_place);
	ctl_barrier(rs);
	for (long i = 0; i < warm + iters; i++) {
		if (o->check)
			coll_fill(rs, t, &sh, in_place);
		int64_t t0 = now_ns();
		int rc = coll_call(rs, t, &sh, in_place);
		int64_t t1 = now_ns();
		if (rc < 0)
			die_xp(me, coll_name[t], rc);
		rs->sent = true;
		if (i >= warm)
			rs->t_ns[i - warm] = (double)(t1 - t0);
		if (o->check)
			coll_verify(rs, t, &sh, i);
	}
	ctl_gather(rs, rs->t_ns, sizeof(double) * (size_t)iters, rs->t_all);
	if (me != 0)
		return;

	/* A call's time is the slowest rank's. */
	double *tm = rs->sum, total = 0;
	for (long i = 0; i < iters; i++) {
		tm[i] = 0;
		for (int k = 0; k < n; k++) {
			double v = rs->t_all[(size_t)k * (size_t)iters + (size_t)i];
			tm[i] = v > tm[i] ? v : tm[i];
		}
		total += tm[i];
	}
	qsort(tm, (size_t)iters, sizeof(double), cmp_double);
	struct coll_row row = {
		.test = coll_name[t],
		.dtype = t != C_BARRIER ? dtype_name[o->dtype] : NULL,
		.op = coll_reduces(t) ? op_name[o->op] : NULL,
		.algorithm = coll_algo[t],
		.transports = b->transports,
		.size = sh.bytes,
		.count = sh.elems,
		.iters = iters,
		.warmup = warm,
		.ranks = n,
		.avg_us = total / (double)iters / 1e3,
		.min_us = tm[0] / 1e3,
		.p50_us = tm[pct_index((size_t)iters, 50)] / 1e3,
		.p99_us = tm[pct_index((size_t)iters, 99)] / 1e3,
		.in_place = in_place,
		.check = o->check,
	};
	if (t == C_ALLREDUCE) {
		int rc = xp_allreduce_algo_get(rs->comm, sh.count, o->dtype, &row.algorithm);
		if (rc < 0)
			die_xp(0, "xp_allreduce_algo_get", rc);
	}
	double f = busbw_factor(t, n);
	/* bytes per ns = GB/s */
	row.algbw = f < 0 ? -1 : (double)sh.bytes / (total / (double)iters);
	row.busbw = f < 0 ? -1 : row.algbw * f;
	print_coll_row(o, &row);
}

/* Every collective asked for, over every size (barrier once). */
static void run_colls(struct rank_state *rs)
{
	const struct opts *o = rs->b->o;
	for (int t = 0; t < NCOLL; t++) {
		if (!o->coll[t])
			continue;
		if (t == C_BARRIER) {
			run_coll(rs, C_BARRIER, 0);
			continue;
		}
		for (int i = 0; i < o->nsizes; i++)
			run_coll(rs, (enum coll_id)t, o->sizes[i]);
	}
}

/* ------------------------------------------------------------------------- */
/* Ranks                                                                     */

/* rate's sizes: the given ones, or the small ones of the default sweep. */
static bool size_in_test(const struct opts *o, enum test_id t, size_t size)
{
	return t != T_RATE || o->sizes_given || size <= RATE_MAX_DEFAULT_SIZE;
}

static void print_pinning(const struct rank_state *rs)
{
	const struct bench *b = rs->b;
	if (b->o->reg)
		fprintf(hdr_out, "# buffers registered (--register): xp_mem_register\n");
	if (b->net)
		fprintf(hdr_out, "# thread mode: %s\n",
			b->cfg.thread_mode == XP_THREAD_FUNNELED ?
				"funneled (one thread per rank)" :
			b->cfg.thread_mode == XP_THREAD_SERIALIZED ? "serialized" :
								     "multi");
	if (!b->o->pin) {
		fprintf(hdr_out, "# ranks NOT pinned (--no-pin): the scheduler places them\n");
		return;
	}
	if (!b->net) {
		if (b->cpu[0] >= 0 && b->pin_err[0] == 0 && b->pin_err[1] == 0)
			fprintf(hdr_out,
				"# rank 0 pinned to CPU %d, rank 1 pinned to CPU %d "
				"(pthread_setaffinity_np)\n",
				b->cpu[0], b->cpu[1]);
		else if (b->cpu[0] >= 0)
			fprintf(hdr_out, "# ranks NOT pinned: pthread_setaffinity_np failed (%s)\n",
				strerrordesc_np(b->pin_err[0] != 0 ? b->pin_err[0] :
								     b->pin_err[1]));
		else
			fprintf(hdr_out,
				"# ranks NOT pinned: fewer than 2 CPUs available; spinning "
				"ranks share one CPU, expect poor figures\n");
		return;
	}
	const struct rank_info *in = rs->info;
	if (in[0].cpu >= 0 && in[1].cpu >= 0) {
		fprintf(hdr_out,
			"# rank 0 pinned to CPU %d, rank 1 pinned to CPU %d (sched_setaffinity: "
			"CPU rank %% N of the N = %d, %d it may use)%s\n",
			in[0].cpu, in[1].cpu, in[0].ncpus, in[1].ncpus,
			in[0].cpu == in[1].cpu && strcmp(in[0].host, in[1].host) == 0 ?
				"; SAME CPU: spinning ranks share it, expect poor figures" :
				"");
		return;
	}
	for (int k = 0; k < NRANKS; k++) {
		if (in[k].cpu >= 0)
			fprintf(hdr_out, "# rank %d pinned to CPU %d (sched_setaffinity)\n", k,
				in[k].cpu);
		else
			fprintf(hdr_out, "# rank %d NOT pinned: sched_setaffinity failed (%s)\n", k,
				strerrordesc_np(in[k].pin_err));
	}
}

/* Collectives: where each of the job's ranks runs. */
static void print_pinning_coll(const struct rank_state *rs)
{
	const struct bench *b = rs->b;
	const int n = b->nranks;
	char list[256] = "";
	size_t used = 0;
	int unpinned = 0, failed = 0, err = 0;

	if (!b->o->pin) {
		fprintf(hdr_out, "# ranks NOT pinned (--no-pin): the scheduler places them\n");
		return;
	}
	for (int k = 0; k < n; k++) {
		int cpu = b->net ? rs->info[k].cpu : b->cpu[0] >= 0 ? b->cpu[k] : -1;
		int e = b->net ? rs->info[k].pin_err : b->pin_err[k];
		if (e != 0) {
			failed++;
			err = e;
		} else if (cpu < 0) {
			unpinned++;
		} else if (used < sizeof(list) - 24) {
			used += (size_t)snprintf(list + used, sizeof(list) - used, "%s%d:%d",
						 used != 0 ? " " : "", k, cpu);
		}
	}
	if (failed != 0)
		fprintf(hdr_out, "# %d rank%s NOT pinned: %s failed (%s)\n", failed,
			failed == 1 ? "" : "s",
			b->net ? "sched_setaffinity" : "pthread_setaffinity_np",
			strerrordesc_np(err));
	if (unpinned != 0 && !b->net)
		fprintf(hdr_out,
			"# ranks NOT pinned: %d ranks, %d CPUs this process may use: OVERSUBSCRIBED, "
			"ranks share CPUs and take each other's time; expect poor figures\n",
			n, b->pin_cpus);
	else if (unpinned != 0)
		fprintf(hdr_out,
			"# %d rank%s NOT pinned: more ranks on their host than CPUs they may use: "
			"OVERSUBSCRIBED, ranks share CPUs; expect poor figures\n",
			unpinned, unpinned == 1 ? "" : "s");
	if (used != 0)
		fprintf(hdr_out, "# pinned (rank:CPU): %s%s (%s)\n", list,
			used >= sizeof(list) - 24 ? " ..." : "",
			b->net ?
				"sched_setaffinity: a host's k-th rank to the k-th CPU it may use" :
				"pthread_setaffinity_np");
}

/* Collectives: which transports serve rank 0's pairs, "a+b" in the order
 * of the peers. */
static void coll_transports(struct rank_state *rs)
{
	struct bench *b = rs->b;
	size_t used = 0;
	b->transports[0] = '\0';
	for (int k = 0; k < b->nranks; k++) {
		xp_route_t route;
		if (k == rs->rank && b->nranks > 1)
			continue;
		XP_CHECK(0, xp_route_get(rs->ctx, k, 0, &route));
		const char *name = route.transport;
		size_t len = strlen(name);
		bool seen = false;
		for (const char *p = b->transports; *p && !seen;
		     p += strcspn(p, "+"), p += *p == '+')
			seen = strncmp(p, name, len) == 0 && (p[len] == '+' || p[len] == '\0');
		if (!seen && used + len + 2 < sizeof(b->transports))
			used += (size_t)snprintf(b->transports + used, sizeof(b->transports) - used,
						 "%s%s", used != 0 ? "+" : "", name);
	}
}

static void print_coll_header(struct rank_state *rs)
{
	struct bench *b = rs->b;
	const struct opts *o = b->o;
	const int n = b->nranks;
	xp_stats_t st;
	XP_CHECK(0, xp_stats_get(rs->ctx, &st));
	coll_transports(rs);
	print_run_record(b, b->transports);
	if (!b->net)
		fprintf(hdr_out,
			"# xport-perf (xport %d.%d.%d): collectives, %d rank%s as threads of one "
			"process, transport %s\n",
			XP_VERSION_MAJOR, XP_VERSION_MINOR, XP_VERSION_PATCH, n, n == 1 ? "" : "s",
			b->transports);
	else
		fprintf(hdr_out,
			"# xport-perf (xport %d.%d.%d): collectives between %d process%s "
			"(launcher: %s), rank 0's pairs served by %s; rank 0 pid %d on %s\n",
			XP_VERSION_MAJOR, XP_VERSION_MINOR, XP_VERSION_PATCH, n, n == 1 ? "" : "es",
			b->launcher, b->transports, rs->info[0].pid, rs->info[0].host);
	fprintf(hdr_out, "# command: %s\n", run_command != NULL ? run_command : "xport-perf");
	print_pinning_coll(rs);
	fprintf(hdr_out,
		"# control path: %s; per-call times reach rank 0 by xp_oob_allgather "
		"after a size's last call\n",
		b->net ? "xp_oob_barrier (rank 0's bootstrap service), not the measured transport" :
			 "spinning barrier on C11 atomics between the threads");
	fprintf(hdr_out,
		"# each rank times each call, back to back after warmup calls (no barrier between "
		"calls);\n#   a call's time is the slowest rank's (as nccl-tests); time_us_* over "
		"iters calls\n"
		"# algbw_GBps = size / time_us_avg (10^9 B/s); busbw_GBps = algbw x 2(n-1)/n "
		"(allreduce),\n#   (n-1)/n (reduce_scatter, allgather, alltoall), 1 (bcast); "
		"barrier: none\n"
		"# size = the call's largest buffer (nccl-tests): the vector (allreduce, bcast), "
		"all ranks' blocks\n#   (reduce_scatter's input, allgather's output, alltoall's "
		"input); count = its elements\n");
	fprintf(hdr_out, "# dtype %s, op %s (reductions), bcast root %d, %s, %s\n",
		dtype_name[o->dtype], op_name[o->op], COLL_ROOT,
		o->in_place ? "in place (XP_IN_PLACE; bcast and barrier have no other way)" :
			      "out of place",
		o->check ?
			"--check: every element of every call's result compared with a local "
			"reference\n#   (inputs refilled before each call, outside its time, but "
			"the ranks' skew from checking\n#   lands in the next call: measure "
			"without --check)" :
			"results not checked (--check to)");
	/* Sizes that are not whole elements (or blocks) say so, a line a test. */
	for (int t = 0; t < NCOLL; t++) {
		char list[160] = "";
		size_t used = 0;
		int rounded = 0;
		for (int i = 0; o->coll[t] && t != C_BARRIER && i < o->nsizes; i++) {
			struct coll_shape sh;
			coll_shape_of((enum coll_id)t, o->sizes[i], o->dtype, n, &sh);
			if (sh.bytes == o->sizes[i])
				continue;
			if (rounded++ < 8 && used < sizeof(list))
				used += (size_t)snprintf(list + used, sizeof(list) - used,
							 "%s%zu->%zu", used != 0 ? ", " : "",
							 o->sizes[i], sh.bytes);
		}
		if (rounded == 0)
			continue;
		if (coll_has_blocks((enum coll_id)t))
			fprintf(hdr_out,
				"# note: %s: sizes rounded down to whole blocks (one per rank) of "
				"%s elements: %s%s B\n",
				coll_name[t], dtype_name[o->dtype], list,
				rounded > 8 ? ", ..." : "");
		else
			fprintf(hdr_out,
				"# note: %s: sizes rounded down to whole %s elements: %s%s B\n",
				coll_name[t], dtype_name[o->dtype], list,
				rounded > 8 ? ", ..." : "");
	}
	fprintf(hdr_out, "# rank 0's pool on %s pages; clock CLOCK_MONOTONIC_RAW, %.0f ns a read\n",
		st.pool_hugepages ? "hugetlb" : "ordinary", b->clock_ns);
	fflush(hdr_out);
	print_coll_head(o);
}

static void print_header(struct rank_state *rs)
{
	const struct bench *b = rs->b;
	const struct opts *o = b->o;
	xp_stats_t st;
	xp_route_t route;
	XP_CHECK(0, xp_stats_get(rs->ctx, &st));
	XP_CHECK(0, xp_route_get(rs->ctx, rs->peer, 0, &route));
	print_run_record(b, route.transport);
	if (!b->net)
		fprintf(hdr_out,
			"# xport-perf (xport %d.%d.%d): transport %s, %d ranks as threads of one "
			"process\n",
			XP_VERSION_MAJOR, XP_VERSION_MINOR, XP_VERSION_PATCH, route.transport,
			NRANKS);
	else
		fprintf(hdr_out,
			"# xport-perf (xport %d.%d.%d): transport %s between %d processes "
			"(launcher: %s): rank 0 pid %d on %s, rank 1 pid %d on %s\n",
			XP_VERSION_MAJOR, XP_VERSION_MINOR, XP_VERSION_PATCH, route.transport,
			NRANKS, b->launcher, rs->info[0].pid, rs->info[0].host, rs->info[1].pid,
			rs->info[1].host);
	fprintf(hdr_out, "# command: %s\n", run_command != NULL ? run_command : "xport-perf");
	print_pinning(rs);
	fprintf(hdr_out, "# control path: %s; results reach rank 0 by xp_oob_allgather\n",
		b->net ? "xp_oob_barrier (rank 0's bootstrap service), not the measured transport" :
			 "spinning barrier on C11 atomics between the two threads");
	if (o->test[T_LAT])
		fprintf(hdr_out,
			"# lat: one-way = half the round trip, receives posted first; "
			"lat_us_avg (mean), lat_us_min, lat_us_p50, lat_us_p99\n#      over iters after "
			"iters/10 warmup; each round trip includes one clock read\n");
	if (o->test[T_BW] || o->test[T_BIBW] || o->test[T_RATE]) {
		fprintf(hdr_out,
			"# bw/bibw/rate: window %d sends in flight, every receive of a round posted "
			"first, measured at the receiver\n#   from its go to its last completion; "
			"MB/s = 10^6 B/s, Mmsg_per_s = 10^6 messages/s, median of iters rounds;\n",
			o->window);
		if (o->one_buffer)
			fprintf(hdr_out, "#   --one-buffer: every receive of a round into one "
					 "buffer (as osu_bw, ucx_perftest)\n");
		if (b->net)
			fprintf(hdr_out,
				"#   a round is %d+ messages, or windows up to %zu MiB (both "
				"directions); its go is a control\n#   barrier, whose hop "
				"(~12 us here) lies inside the interval: a slight understatement\n",
				NET_ROUND_MSGS, NET_ROUND_BYTES >> 20);
		else
			fprintf(hdr_out, "#   a round is one window; the go is one cache-line "
					 "handoff inside the interval\n");
		if (o->test[T_BIBW])
			fprintf(hdr_out,
				"# bibw: both ranks send at once; bw_MBps and Mmsg_per_s are "
				"the sum of both directions\n");
	}
	char rndv[96];
	if (b->cfg.rndv_threshold != 0)
		snprintf(rndv, sizeof(rndv), "from %zu B (XP_RNDV_THRESHOLD)",
			 route.rndv_threshold);
	else
		snprintf(rndv, sizeof(rndv), "from %zu B (the %s transport's threshold)",
			 route.rndv_threshold, route.transport);
	fprintf(hdr_out,
		"# rendezvous %s; rank 0's pool on %s pages; clock CLOCK_MONOTONIC_RAW, %.0f ns "
		"a read\n",
		rndv, st.pool_hugepages ? "hugetlb" : "ordinary", b->clock_ns);
	if (strcmp(route.transport, route.payloads) != 0)
		fprintf(hdr_out,
			"# lanes: messages over %s, rendezvous payloads over %s (transport %s/%s "
			"in the rows)\n",
			route.transport, route.payloads, route.transport, route.payloads);
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

static void *alloc_or_die(size_t len)
{
	void *p = calloc(len != 0 ? len : 1, 1);
	if (p == NULL)
		die("out of memory (%zu bytes)", len);
	return p;
}

/* Collectives: send and receive buffers of the largest size, times of
 * the most calls. */
static void alloc_coll_buffers(struct rank_state *rs)
{
	const struct opts *o = rs->b->o;
	size_t max = 0;
	long max_iters = 1;
	for (int t = 0; t < NCOLL; t++) {
		for (int i = 0; o->coll[t] && i < (t == C_BARRIER ? 1 : o->nsizes); i++) {
			struct coll_shape sh;
			long iters, warm;
			coll_shape_of((enum coll_id)t, t == C_BARRIER ? 0 : o->sizes[i], o->dtype,
				      rs->b->nranks, &sh);
			coll_plan(o, sh.bytes, &iters, &warm);
			max = sh.bytes > max ? sh.bytes : max;
			max_iters = iters > max_iters ? iters : max_iters;
		}
	}
	rs->sbuf = alloc_touched(max);
	rs->rbuf = alloc_touched(max);
	rs->t_ns = alloc_or_die(sizeof(double) * (size_t)max_iters);
	if (rs->rank == 0) {
		rs->t_all =
			alloc_or_die(sizeof(double) * (size_t)max_iters * (size_t)rs->b->nranks);
		rs->sum = alloc_or_die(sizeof(double) * (size_t)max_iters);
	} else {
		/* xp_oob_allgather gives every rank every rank's times. */
		rs->t_all =
			alloc_or_die(sizeof(double) * (size_t)max_iters * (size_t)rs->b->nranks);
	}
}

/* Buffers for the largest size of every test this rank takes part in. */
static void alloc_buffers(struct rank_state *rs)
{
	const struct bench *b = rs->b;
	const struct opts *o = b->o;
	size_t max = 0, win = 0;
	long max_n = 1, max_rounds = 1, max_msgs = 1;

	if (o->is_coll) {
		alloc_coll_buffers(rs);
		return;
	}

	if (o->test[T_LAT] && !b->net)
		max_n = BASELINE_ITERS + BASELINE_ITERS / 10;
	for (int i = 0; i < o->nsizes; i++) {
		size_t size = o->sizes[i];
		long n, w, batch;
		max = size > max ? size : max;
		if (o->test[T_LAT]) {
			lat_plan(b, size, &n, &w);
			max_n = n + w > max_n ? n + w : max_n;
		}
		for (int t = T_BW; t < NTESTS; t++) {
			if (!o->test[t] || !size_in_test(o, t, size))
				continue;
			stream_plan(b, size, t == T_BIBW ? 2 : 1, &n, &w, &batch);
			long msgs = (long)o->window * batch;
			max_rounds = n > max_rounds ? n : max_rounds;
			max_msgs = msgs > max_msgs ? msgs : max_msgs;
			size_t need = (size_t)(o->one_buffer ? 1 : msgs) * size;
			if (t == T_BIBW || rs->rank == 1)
				win = need > win ? need : win;
		}
	}
	rs->sbuf = alloc_touched(max);
	rs->rbuf = alloc_touched(max);
	rs->win = alloc_touched(win);
	uint8_t *bufs[3] = { rs->sbuf, rs->rbuf, rs->win };
	size_t lens[3] = { max, max, win };
	for (int i = 0; o->reg && i < 3; i++)
		if (bufs[i] != NULL && lens[i] != 0)
			XP_CHECK(rs->rank,
				 xp_mem_register(rs->ctx, bufs[i], lens[i], &rs->regs[i]));
	if (rs->rank == 0)
		rs->ts = alloc_or_die(sizeof(*rs->ts) * (size_t)(max_n + 1));
	rs->t_ns = alloc_or_die(sizeof(double) * (size_t)max_rounds);
	rs->t_all = alloc_or_die(sizeof(double) * (size_t)max_rounds * NRANKS);
	rs->sum = alloc_or_die(sizeof(double) * (size_t)max_rounds * 2);
	rs->sreqs = alloc_or_die(sizeof(*rs->sreqs) * (size_t)o->window);
	rs->rreqs = alloc_or_die(sizeof(*rs->rreqs) * (size_t)max_msgs);
}

static void free_buffers(struct rank_state *rs)
{
	for (int i = 0; i < 3; i++)
		if (rs->regs[i] != NULL)
			xp_mem_deregister(rs->regs[i]);
	free(rs->sbuf);
	free(rs->rbuf);
	free(rs->win);
	free(rs->ts);
	free(rs->t_ns);
	free(rs->t_all);
	free(rs->sum);
	free(rs->sreqs);
	free(rs->rreqs);
}

/* Runs every test as rank rs->rank; in-process on its own thread, between
 * processes on the main thread. Only rank 0 prints. */
static void run_rank(struct rank_state *rs)
{
	struct bench *b = rs->b;
	const struct opts *o = b->o;

	/* Buffers are allocated after pinning, so their pages come from the
	 * rank's own node. */
	alloc_buffers(rs);
	ctl_barrier(rs);
	if (o->is_coll) {
		if (rs->rank == 0)
			print_coll_header(rs);
		run_colls(rs);
		ctl_barrier(rs);
		free_buffers(rs);
		return;
	}
	if (rs->rank == 0)
		print_header(rs);

	if (o->test[T_LAT]) {
		if (!b->net)
			run_baseline(rs);
		for (int i = 0; i < o->nsizes; i++)
			run_lat(rs, o->sizes[i]);
	}
	for (int t = T_BW; t < NTESTS; t++)
		for (int i = 0; o->test[t] && i < o->nsizes; i++)
			if (size_in_test(o, (enum test_id)t, o->sizes[i]))
				run_stream(rs, (enum test_id)t, o->sizes[i]);

	ctl_barrier(rs);
	free_buffers(rs);
}

static void *rank_thread(void *arg)
{
	struct rank_state *rs = arg;
	struct bench *b = rs->b;
	if (b->cpu[rs->rank] >= 0) {
		cpu_set_t set;
		CPU_ZERO(&set);
		CPU_SET(b->cpu[rs->rank], &set);
		b->pin_err[rs->rank] = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	}
	run_rank(rs);
	return NULL;
}

/* The first @n CPUs this process may run on, or -1s if there are fewer
 * (then the ranks share CPUs, and pinning would only choose which).
 * Returns how many it may use. */
static int choose_cpus(int *cpu, int n)
{
	cpu_set_t set;
	int found = 0;
	for (int k = 0; k < n; k++)
		cpu[k] = -1;
	if (sched_getaffinity(0, sizeof(set), &set) != 0)
		return 0;
	for (int c = 0; c < CPU_SETSIZE; c++)
		if (CPU_ISSET(c, &set) && found++ < n)
			cpu[found - 1] = c;
	if (found < n)
		for (int k = 0; k < n; k++)
			cpu[k] = -1;
	return found;
}

/* Between processes: pins this process (its one thread) to CPU @rank % N of
 * the N it may run on. */
static void pin_process(int rank, struct rank_info *info)
{
	cpu_set_t set, one;
	info->cpu = -1;
	info->pin_err = 0;
	info->ncpus = 0;
	if (sched_getaffinity(0, sizeof(set), &set) != 0) {
		info->pin_err = errno;
		return;
	}
	info->ncpus = CPU_COUNT(&set);
	/* Collectives: more ranks on this host than CPUs share them whatever
	 * we do; the scheduler balances them better than a fixed choice. */
	if (rank < 0)
		return;
	for (int c = 0, k = 0; c < CPU_SETSIZE && info->ncpus > 0; c++) {
		if (!CPU_ISSET(c, &set) || k++ != rank % info->ncpus)
			continue;
		CPU_ZERO(&one);
		CPU_SET(c, &one);
		if (sched_setaffinity(0, sizeof(one), &one) != 0)
			info->pin_err = errno;
		else
			info->cpu = c;
		return;
	}
}

/* ------------------------------------------------------------------------- */
/* Modes                                                                     */

/* The launcher that started this process, from its rank variable, or NULL;
 * *@rank0 says whether that variable names rank 0. In the library's order
 * of precedence (docs/LAUNCHERS.md): the launcher that started the process
 * before an enclosing Slurm allocation. */
static const char *launcher_env(bool *rank0)
{
	static const char *const vars[][2] = {
		{ "XP_RANK", "xprun or by hand (XP_RANK, XP_SIZE)" },
		{ "OMPI_COMM_WORLD_RANK", "Open MPI (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE)" },
		{ "PMI_RANK", "MPICH or Intel MPI (PMI_RANK, PMI_SIZE)" },
		{ "RANK", "torchrun (RANK, WORLD_SIZE)" },
		{ "SLURM_PROCID", "Slurm (SLURM_PROCID, SLURM_NTASKS)" },
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const char *v = getenv(vars[i][0]);
		if (v != NULL && *v != '\0') {
			*rank0 = strspn(v, "0") == strlen(v);
			return vars[i][1];
		}
	}
	*rank0 = true;
	return NULL;
}

static int main_inproc(struct bench *b)
{
	const int n = b->nranks;
	struct rank_state *rs = alloc_or_die(sizeof(*rs) * (size_t)n);
	xp_local_job_t *job;
	xp_context_t **ctx = alloc_or_die(sizeof(*ctx) * (size_t)n);
	int rc = xp_local_job_create(n, &b->cfg, &job);
	if (rc < 0)
		die_xp(0, "xp_local_job_create", rc);
	for (int r = 0; r < n; r++) {
		rc = xp_local_job_context(job, r, &ctx[r]);
		if (rc < 0)
			die_xp(r, "xp_local_job_context", rc);
	}
	b->cpu = alloc_or_die(sizeof(*b->cpu) * (size_t)n);
	b->pin_err = alloc_or_die(sizeof(*b->pin_err) * (size_t)n);
	b->pin_cpus = choose_cpus(b->cpu, n);
	if (!b->o->pin)
		for (int r = 0; r < n; r++)
			b->cpu[r] = -1;
	b->clock_ns = clock_cost_ns();

	for (int r = 0; r < n; r++) {
		rs[r] = (struct rank_state){
			.b = b,
			.rank = r,
			.peer = (r + 1) % n,
			.ctx = ctx[r],
			.comm = xp_comm_world(ctx[r]),
		};
		rc = pthread_create(&rs[r].thread, NULL, rank_thread, &rs[r]);
		if (rc != 0)
			die("pthread_create: %s", strerrordesc_np(rc));
	}
	for (int r = 0; r < n; r++)
		pthread_join(rs[r].thread, NULL);

	if (b->base_p50_us > 0 && b->lat8_p50_us >= 0)
		fprintf(hdr_out,
			"# summary: xport inproc 8 B one-way p50 %.3f us = %.1fx the "
			"cache-line baseline (%.3f us)\n",
			b->lat8_p50_us, b->lat8_p50_us / b->base_p50_us, b->base_p50_us);

	/* Whatever a rank still holds now was lost by the library. */
	for (int r = 0; r < n; r++) {
		xp_stats_t st;
		if (xp_stats_get(ctx[r], &st) == 0 && st.pool_bufs_in_use != 0)
			fprintf(stderr,
				"xport-perf: warning: rank %d still has %" PRIu64
				" pooled buffers in use after all requests completed\n",
				r, st.pool_bufs_in_use);
	}
	xp_local_job_destroy(job);
	free(b->cpu);
	free(b->pin_err);
	free(ctx);
	free(rs);
	return 0;
}

static int main_net(struct bench *b)
{
	const struct opts *o = b->o;
	struct rank_state rs = { .b = b };
	struct rank_info mine = { 0 };
	xp_context_t *ctx;
	xp_route_t route;

	/* The transport asked for is the only one the negotiation may pick
	 * (main checked that XP_TRANSPORTS, if set, allows it). */
	if (o->transport == TR_TCP)
		b->cfg.transports = "tcp";
	else if (o->transport == TR_SHM)
		b->cfg.transports = "shm";
	/* Each rank is this process's one thread, as ucx_perftest's worker is
	 * single-threaded and osu_latency runs under MPI_THREAD_SINGLE: say so
	 * (XP_THREAD_MODE, if set, decides instead). */
	if (getenv("XP_THREAD_MODE") == NULL)
		b->cfg.thread_mode = XP_THREAD_FUNNELED;
	int rc = xp_init(&b->cfg, &ctx);
	if (rc < 0)
		die("xp_init failed: %s%s%s", xp_strerror(rc), *xp_error_detail() ? ": " : "",
		    xp_error_detail());
	rs.rank = xp_rank(ctx);
	b->nranks = xp_size(ctx);
	if (o->is_coll && o->ranks_given && o->nranks != b->nranks) {
		if (rs.rank == 0)
			fprintf(stderr,
				"xport-perf: --ranks %d, but this job has %d ranks: under a launcher "
				"the job's size is the number of ranks (--ranks is for the "
				"in-process mode)\n",
				o->nranks, b->nranks);
		xp_finalize(ctx);
		return 2;
	}
	if (!o->is_coll && xp_size(ctx) != NRANKS) {
		/* Refused rather than leaving ranks idle: every rank says
		 * the same, rank 0 alone prints it. */
		if (rs.rank == 0)
			fprintf(stderr,
				"xport-perf: this job has %d rank%s; the point-to-point tests "
				"measure between exactly 2 (the collectives take any number): start "
				"it with `xprun -n 2 xport-perf ...`%s\n",
				xp_size(ctx), xp_size(ctx) == 1 ? "" : "s",
				xp_size(ctx) == 1 ?
					" (or run it without launcher variables, or with "
					"--transport inproc, for two threads of one "
					"process)" :
					"");
		xp_finalize(ctx);
		return 2;
	}
	rs.peer = (rs.rank + 1) % b->nranks;
	rs.ctx = ctx;
	rs.comm = xp_comm_world(ctx);
	rs.info = alloc_or_die(sizeof(*rs.info) * (size_t)b->nranks);
	const char *asked = o->transport == TR_TCP ? "tcp" : o->transport == TR_SHM ? "shm" : NULL;
	for (int k = 0; k < b->nranks; k++) {
		if (k == rs.rank && b->nranks > 1)
			continue;
		XP_CHECK(rs.rank, xp_route_get(ctx, k, 0, &route));
		if (asked != NULL && strcmp(route.transport, asked) != 0)
			die("rank %d: --transport %s, but xp_init() serves rank %d with transport "
			    "'%s'",
			    rs.rank, asked, k, route.transport);
	}
	XP_CHECK(rs.rank, xp_route_get(ctx, rs.peer, 0, &route));

	mine.pid = (int32_t)getpid();
	if (gethostname(mine.host, sizeof(mine.host)) != 0)
		snprintf(mine.host, sizeof(mine.host), "?");
	mine.host[sizeof(mine.host) - 1] = '\0';
	int slot = rs.rank;
	if (o->is_coll && o->pin) {
		/* The k-th rank of a host takes the k-th CPU it may use, if
		 * the host has a CPU for each of its ranks. */
		pin_process(-1, &mine);
		ctl_gather(&rs, &mine, sizeof(mine), rs.info);
		int nlocal = 0;
		slot = -1;
		for (int k = 0; k < b->nranks; k++) {
			if (strcmp(rs.info[k].host, mine.host) != 0)
				continue;
			if (k == rs.rank)
				slot = nlocal;
			nlocal++;
		}
		if (nlocal > mine.ncpus)
			slot = -1;
	}
	if (o->pin)
		pin_process(slot, &mine);
	else
		mine.cpu = -1;
	ctl_gather(&rs, &mine, sizeof(mine), rs.info);
	b->clock_ns = clock_cost_ns();

	if (o->endpoints && !o->is_coll)
		connect_endpoint(&rs, o->one_way);
	/* The transport keeps some pooled buffers for itself (TCP: its
	 * provided-buffer ring); only more than that at the end is a leak. */
	xp_stats_t st;
	XP_CHECK(rs.rank, xp_stats_get(ctx, &st));
	rs.bufs_at_start = st.pool_bufs_in_use;
	run_rank(&rs);

	if (rs.rank == 0 && b->lat8_p50_us >= 0)
		fprintf(hdr_out, "# summary: xport %s 8 B one-way p50 %.3f us\n", route.transport,
			b->lat8_p50_us);
	if (rs.rank == 0 && b->bw1m_mbps >= 0)
		fprintf(hdr_out, "# summary: xport %s 1 MiB bw %.1f MB/s\n", route.transport,
			b->bw1m_mbps);
	if (xp_stats_get(ctx, &st) == 0 && st.pool_bufs_in_use > rs.bufs_at_start)
		fprintf(stderr,
			"xport-perf: warning: rank %d has %" PRIu64
			" pooled buffers in use after all requests completed, %" PRIu64
			" before the tests\n",
			rs.rank, st.pool_bufs_in_use, rs.bufs_at_start);
	/* Both ranks are done with it (the last control operation). */
	if (rs.ep_rx != rs.ep)
		xp_ep_close(rs.ep_rx);
	xp_ep_close(rs.ep);
	xp_finalize(ctx);
	free(rs.info);
	return 0;
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

/*
 * --sizes: a comma-separated list of sizes, each as parse_size() takes
 * it. Strict: an empty element ("8,,16", a trailing comma), a sign, hex,
 * trailing junk ("8k5") or a size above 1g is an error that names the
 * element; a typo never runs some other sweep.
 */
static int parse_sizes(const char *arg, struct opts *o)
{
	int n = 1;
	for (const char *p = arg; *p; p++)
		n += *p == ',';
	if (*arg == '\0') {
		fprintf(stderr, "xport-perf: --sizes needs at least one size\n");
		return -EINVAL;
	}
	o->sizes = calloc((size_t)n, sizeof(*o->sizes));
	if (o->sizes == NULL)
		return -ENOMEM;
	o->nsizes = 0;
	for (const char *p = arg;; p++) {
		size_t len = strcspn(p, ",");
		char tok[32] = "";
		if (len < sizeof(tok))
			memcpy(tok, p, len);
		tok[len < sizeof(tok) ? len : 0] = '\0';
		if (len == 0 || len >= sizeof(tok) || !parse_size(tok, &o->sizes[o->nsizes])) {
			if (len == 0)
				fprintf(stderr, "xport-perf: --sizes %s: element %d is empty\n",
					arg, o->nsizes + 1);
			else
				fprintf(stderr,
					"xport-perf: --sizes %s: bad size '%.*s' (element %d): want "
					"digits with an optional k, m or g suffix, at most 1g\n",
					arg, (int)len, p, o->nsizes + 1);
			return -EINVAL;
		}
		o->nsizes++;
		p += len;
		if (*p == '\0')
			break;
	}
	o->sizes_given = true;
	return 0;
}

/* Whether the XP_TRANSPORTS list @list (names, commas, blanks, any case)
 * names @name. */
static bool transports_list_has(const char *list, const char *name)
{
	const size_t n = strlen(name);
	for (const char *p = list; *p;) {
		p += strspn(p, " \t,");
		size_t len = strcspn(p, ",");
		size_t end = len;
		while (end > 0 && (p[end - 1] == ' ' || p[end - 1] == '\t'))
			end--;
		if (end == n && strncasecmp(p, name, n) == 0)
			return true;
		p += len;
	}
	return false;
}

/* The command line for the run record: xprun's (XPRUN_COMMAND) when it
 * started this rank, else this process's. */
static char *command_of(int argc, char **argv)
{
	const char *launched = getenv("XPRUN_COMMAND");
	if (launched != NULL && *launched != '\0' && getenv("XP_RANK") != NULL)
		return strdup(launched);
	return shell_words(argc, argv);
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

/* -b, -e: a size as parse_size() takes it; says which option is bad. */
static bool parse_bytes_opt(const char *opt, const char *arg, size_t *out)
{
	if (parse_size(arg, out) && *out > 0)
		return true;
	fprintf(stderr,
		"xport-perf: %s '%s': want a size from 1 to 1g (digits with an optional k, m or "
		"g suffix)\n",
		opt, arg);
	return false;
}

/* The index of @arg in @names (@n of them, NULL entries skipped), or -1. */
static int name_index(const char *const *names, int n, const char *arg)
{
	for (int k = 0; k < n; k++)
		if (names[k] != NULL && strcmp(names[k], arg) == 0)
			return k;
	return -1;
}

/* Collectives' sizes from -b, -e and -f (or their defaults), as nccl-tests
 * sweeps: from min, multiplied by the factor while at most max. */
static int coll_sizes(struct opts *o)
{
	size_t lo = o->minbytes != 0 ? o->minbytes : COLL_MIN_BYTES;
	size_t hi = o->maxbytes != 0 ? o->maxbytes : COLL_MAX_BYTES;
	long f = o->factor != 0 ? o->factor : COLL_FACTOR;
	if (o->maxbytes == 0 && lo > hi)
		hi = lo;
	if (lo > hi) {
		fprintf(stderr, "xport-perf: -b %zu is above -e %zu\n", lo, hi);
		return -EINVAL;
	}
	int n = 0;
	for (size_t v = lo; v <= hi; v *= (size_t)f)
		n++;
	o->sizes = calloc((size_t)n, sizeof(*o->sizes));
	if (o->sizes == NULL)
		return -ENOMEM;
	o->nsizes = 0;
	for (size_t v = lo; v <= hi; v *= (size_t)f)
		o->sizes[o->nsizes++] = v;
	return 0;
}

/* Returns 0 to run, 1 to exit 0 (help), 2 on a usage error. */
static int parse_args(int argc, char **argv, struct opts *o)
{
	enum {
		OPT_JSON = 256,
		OPT_SIZES,
		OPT_ITERS,
		OPT_WINDOW,
		OPT_TRANSPORT,
		OPT_PROGRESS,
		OPT_NO_PIN,
		OPT_REGISTER,
		OPT_ONE_BUFFER,
		OPT_ENDPOINTS,
		OPT_ONE_WAY,
		OPT_VERSION,
		OPT_DTYPE,
		OPT_OP,
		OPT_WARMUP,
		OPT_CHECK,
		OPT_IN_PLACE,
		OPT_RANKS,
	};
	static const struct option longopts[] = {
		{ "json", no_argument, NULL, OPT_JSON },
		{ "sizes", required_argument, NULL, OPT_SIZES },
		{ "iters", required_argument, NULL, OPT_ITERS },
		{ "window", required_argument, NULL, OPT_WINDOW },
		{ "transport", required_argument, NULL, OPT_TRANSPORT },
		{ "progress", no_argument, NULL, OPT_PROGRESS },
		{ "no-pin", no_argument, NULL, OPT_NO_PIN },
		{ "register", no_argument, NULL, OPT_REGISTER },
		{ "one-buffer", no_argument, NULL, OPT_ONE_BUFFER },
		{ "endpoints", no_argument, NULL, OPT_ENDPOINTS },
		{ "one-way", no_argument, NULL, OPT_ONE_WAY },
		{ "version", no_argument, NULL, OPT_VERSION },
		{ "minbytes", required_argument, NULL, 'b' },
		{ "maxbytes", required_argument, NULL, 'e' },
		{ "stepfactor", required_argument, NULL, 'f' },
		{ "dtype", required_argument, NULL, OPT_DTYPE },
		{ "op", required_argument, NULL, OPT_OP },
		{ "warmup", required_argument, NULL, OPT_WARMUP },
		{ "check", no_argument, NULL, OPT_CHECK },
		{ "in-place", no_argument, NULL, OPT_IN_PLACE },
		{ "ranks", required_argument, NULL, OPT_RANKS },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	long v;
	int c, idx;
	bool coll_opt = false; /* an option only the collectives take */
	const char *coll_opt_name = NULL;

	*o = (struct opts){
		.window = DEFAULT_WINDOW,
		.pin = true,
		.warmup = -1,
		.nranks = 2,
		.dtype = XP_FLOAT32,
		.op = XP_SUM,
	};
	/* Progress on a terminal only; under xprun stderr is a pipe, and xprun
	 * says whether its own is a terminal. */
	const char *xprun_tty = getenv("XPRUN_STDERR_TTY");
	o->progress =
		isatty(STDERR_FILENO) == 1 || (xprun_tty != NULL && strcmp(xprun_tty, "1") == 0);
	while ((c = getopt_long(argc, argv, "hb:e:f:", longopts, NULL)) != -1) {
		switch (c) {
		case 'b':
		case 'e':
			if (!parse_bytes_opt(c == 'b' ? "-b/--minbytes" : "-e/--maxbytes", optarg,
					     c == 'b' ? &o->minbytes : &o->maxbytes))
				return 2;
			coll_opt_name = c == 'b' ? "-b" : "-e";
			coll_opt = true;
			break;
		case 'f':
			if (!parse_long(optarg, 2, 1024, &v)) {
				fprintf(stderr,
					"xport-perf: -f/--stepfactor '%s': want a factor from 2 to "
					"1024\n",
					optarg);
				return 2;
			}
			o->factor = v;
			coll_opt_name = "-f";
			coll_opt = true;
			break;
		case OPT_DTYPE:
			if ((idx = name_index(dtype_name, XP_DTYPE_COUNT, optarg)) < 0) {
				fprintf(stderr,
					"xport-perf: unknown --dtype '%s' (int8, uint8, int32, uint32, "
					"int64, uint64, float16, bfloat16, float32, float64)\n",
					optarg);
				return 2;
			}
			o->dtype = (xp_dtype_t)idx;
			coll_opt_name = "--dtype";
			coll_opt = true;
			break;
		case OPT_OP:
			if ((idx = name_index(op_name, XP_OP_COUNT, optarg)) < 0) {
				fprintf(stderr,
					"xport-perf: unknown --op '%s' (sum, prod, min, max, avg)\n",
					optarg);
				return 2;
			}
			o->op = (xp_op_t)idx;
			coll_opt_name = "--op";
			coll_opt = true;
			break;
		case OPT_WARMUP:
			if (!parse_long(optarg, 0, 100000000, &v)) {
				fprintf(stderr,
					"xport-perf: --warmup wants a count from 0 to 10^8\n");
				return 2;
			}
			o->warmup = v;
			coll_opt_name = "--warmup";
			coll_opt = true;
			break;
		case OPT_CHECK:
			o->check = true;
			coll_opt_name = "--check";
			coll_opt = true;
			break;
		case OPT_IN_PLACE:
			o->in_place = true;
			coll_opt_name = "--in-place";
			coll_opt = true;
			break;
		case OPT_RANKS:
			if (!parse_long(optarg, 1, MAX_INPROC_RANKS, &v)) {
				fprintf(stderr, "xport-perf: --ranks wants a count from 1 to %d\n",
					MAX_INPROC_RANKS);
				return 2;
			}
			o->nranks = (int)v;
			o->ranks_given = true;
			break;
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
			if (!parse_long(optarg, 1, 65536, &v)) {
				fprintf(stderr,
					"xport-perf: --window wants a count from 1 to 65536\n");
				return 2;
			}
			o->window = (int)v;
			break;
		case OPT_TRANSPORT:
			if (strcmp(optarg, "inproc") == 0) {
				o->transport = TR_INPROC;
			} else if (strcmp(optarg, "tcp") == 0) {
				o->transport = TR_TCP;
			} else if (strcmp(optarg, "shm") == 0) {
				o->transport = TR_SHM;
			} else {
				fprintf(stderr,
					"xport-perf: unknown transport '%s' (inproc, shm or tcp)\n",
					optarg);
				return 2;
			}
			break;
		case OPT_PROGRESS:
			o->progress = true;
			break;
		case OPT_NO_PIN:
			o->pin = false;
			break;
		case OPT_ENDPOINTS:
			o->endpoints = true;
			break;
		case OPT_ONE_WAY:
			o->endpoints = o->one_way = true;
			break;
		case OPT_ONE_BUFFER:
			o->one_buffer = true;
			break;
		case OPT_REGISTER:
			o->reg = true;
			break;
		case 'h':
			usage(stdout);
			return 1;
		case OPT_VERSION:
			printf("xport-perf (xport) %s\n", XPORT_VERSION_STRING);
			return 1;
		default:
			fprintf(stderr, "xport-perf: try --help\n");
			return 2;
		}
	}
	if (optind < argc) {
		const char *t = argv[optind++];
		bool all = strcmp(t, "all") == 0, known = all;
		bool coll = strcmp(t, "coll") == 0;
		for (idx = 0; idx < NTESTS; idx++) {
			o->test[idx] = all || strcmp(t, test_name[idx]) == 0;
			known |= o->test[idx];
		}
		for (idx = 0; idx < NCOLL; idx++) {
			o->coll[idx] = coll || strcmp(t, coll_name[idx]) == 0;
			o->is_coll |= o->coll[idx];
		}
		if (!known && !o->is_coll) {
			fprintf(stderr,
				"xport-perf: unknown test '%s' (lat, bw, bibw, rate, all; "
				"allreduce, reduce_scatter, allgather, bcast, alltoall, barrier, "
				"coll)\n",
				t);
			return 2;
		}
	} else {
		for (int k = 0; k < NTESTS; k++)
			o->test[k] = true;
	}
	if (optind < argc) {
		fprintf(stderr, "xport-perf: unexpected argument '%s'; try --help\n", argv[optind]);
		return 2;
	}
	/* --transport and XP_TRANSPORTS both say which transport to use: when
	 * they disagree, neither silently wins. */
	const char *env_tl = getenv("XP_TRANSPORTS");
	if (o->transport != TR_AUTO && env_tl != NULL && *env_tl != '\0') {
		const char *name = o->transport == TR_INPROC ? "inproc" :
				   o->transport == TR_SHM    ? "shm" :
							       "tcp";
		if (o->transport == TR_INPROC || !transports_list_has(env_tl, name)) {
			fprintf(stderr,
				"xport-perf: --transport %s disagrees with XP_TRANSPORTS=%s in the "
				"environment%s; drop one of them or make them agree\n",
				name, env_tl,
				o->transport == TR_INPROC ?
					" (XP_TRANSPORTS chooses between processes; inproc is "
					"two threads of one)" :
					"");
			return 2;
		}
	}
	if (!o->is_coll && coll_opt) {
		fprintf(stderr,
			"xport-perf: %s is for the collective tests (allreduce, reduce_scatter, "
			"allgather, bcast, alltoall, barrier, coll)\n",
			coll_opt_name);
		return 2;
	}
	if (!o->is_coll && o->ranks_given && o->nranks != NRANKS) {
		fprintf(stderr,
			"xport-perf: the point-to-point tests run between 2 ranks; --ranks %d is "
			"for the collective tests\n",
			o->nranks);
		return 2;
	}
	if (o->is_coll && o->sizes != NULL &&
	    (o->minbytes != 0 || o->maxbytes != 0 || o->factor != 0)) {
		fprintf(stderr, "xport-perf: --sizes or -b/-e/-f, not both\n");
		return 2;
	}
	if (o->is_coll && o->sizes == NULL && coll_sizes(o) < 0)
		return 2;
	if (o->sizes == NULL) {
		o->nsizes = (int)(sizeof(default_sizes) / sizeof(default_sizes[0]));
		o->sizes = malloc(sizeof(default_sizes));
		if (o->sizes == NULL)
			return 2;
		memcpy(o->sizes, default_sizes, sizeof(default_sizes));
	}
	for (int t = T_BW; t < NTESTS && !o->is_coll; t++) {
		for (int i = 0; o->test[t] && i < o->nsizes; i++) {
			if (o->sizes[i] > MAX_WINDOW_BYTES / (size_t)o->window) {
				fprintf(stderr,
					"xport-perf: %s: a window of %d messages of %zu B needs "
					"more than %zu MiB of receive buffers; lower --window "
					"or --sizes\n",
					test_name[t], o->window, o->sizes[i],
					MAX_WINDOW_BYTES >> 20);
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
	bool rank0;
	/* Before getopt_long() permutes argv. */
	run_command = command_of(argc, argv);
	int rc = parse_args(argc, argv, &o);

	if (rc != 0) {
		free(o.sizes);
		free(run_command);
		return rc == 1 ? 0 : 2;
	}
	/* Whole lines as they are printed, even into a pipe (xprun). */
	setvbuf(stdout, NULL, _IOLBF, 0);
	const char *launcher = launcher_env(&rank0);
	if ((o.transport == TR_TCP || o.transport == TR_SHM) && launcher == NULL) {
		fprintf(stderr,
			"xport-perf: --transport tcp|shm measures between two processes, and no "
			"launcher started this one (none of XP_RANK, RANK, SLURM_PROCID, "
			"OMPI_COMM_WORLD_RANK is set): start it with `xprun -n 2 xport-perf ... "
			"--transport tcp` (or by hand: XP_RANK=0|1 XP_SIZE=2 XP_ADDR=127.0.0.1:PORT "
			"XP_JOB_KEY=K in each of two processes)\n");
		free(o.sizes);
		return 2;
	}
	bool net = launcher != NULL && o.transport != TR_INPROC;
	if (launcher != NULL && !net && !rank0) {
		/* --transport inproc under a launcher: rank 0's process runs
		 * the in-process benchmark, the others have nothing to do. */
		free(o.sizes);
		return 0;
	}
	hdr_out = o.json ? stderr : stdout;
	b = aligned_alloc(64, (sizeof(*b) + 63) & ~(size_t)63);
	if (b == NULL)
		die("out of memory");
	memset(b, 0, sizeof(*b));
	b->o = &o;
	b->net = net;
	b->launcher = launcher;
	b->base_p50_us = b->lat8_p50_us = b->bw1m_mbps = -1;
	b->nranks = o.is_coll ? o.nranks : NRANKS;
	xp_config_init(&b->cfg);
	rc = net ? main_net(b) : main_inproc(b);
	free(b);
	free(o.sizes);
	free(run_command);
	return rc;
}
