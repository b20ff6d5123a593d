/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory transport between real processes of this host, one
 * section each (a section is one or more jobs of real processes):
 *  - basic:       two ranks get shm (xp_route_get: "shm" for the peer, "self"
 *                 for itself); sizes from 0 B to 8 MiB both ways with content
 *                 checks (eager up to 4 KiB inside the ring, rendezvous
 *                 above, streamed and read directly); pooled receives;
 *                 truncation in both protocols; order across protocols on one
 *                 tag; any-source receives;
 *  - flood:       thousands of messages before the receiver posts, past a
 *                 small eager credit; and a receiver that does not receive
 *                 yet must not hold up its sender's messages to others;
 *  - mix:         three ranks where rank 2 allows only tcp: 0-1 over shm,
 *                 every pair with 2 over tcp, all-to-all intact; and
 *                 XP_TRANSPORTS=shm everywhere gives shm;
 *  - bogus:       XP_TRANSPORTS=bogus fails xp_init with -EINVAL and says why;
 *  - crowd:       eight ranks (more than this host's cores) doing all-to-all
 *                 rounds and ping-pongs: they must finish, not livelock;
 *  - kill:        rank 1 of three dies (SIGKILL) with rendezvous sends
 *                 announced to rank 0, rank 0 waiting for the largest of them
 *                 (rank 1 dies while it streams it); rank 0's operations with
 *                 it fail within 10 s naming it, later ones at once, and ranks
 *                 0 and 2 go on. Rank 1 runs under a launcher that reaps it at
 *                 once (as xprun does);
 *  - kill-cma:    the same with payloads read by process_vm_readv;
 *  - kill-zombie: the same with nobody reaping rank 1 yet (it stays a zombie
 *                 while its launcher waits for rank 0, as mproc does);
 *  - kill-mixed:  the same in a job where rank 2 is reached over tcp;
 *  - kill-poll:   the same with rank 0 polling (xp_test) instead of waiting;
 *  - cma-min:     XP_SHM_CMA_MIN chooses which payloads are read directly;
 *  - cma-refused: a sender that may not write into its receiver (no
 *                 ptrace rights): the receiver reads every part itself;
 *  - setup-kill:  a rank killed while the job forms, once its segment exists:
 *                 the survivors fail in bounded time and leave nothing in
 *                 /dev/shm, and the next job sweeps what the dead rank left;
 *  - fallback:    a rank whose segment cannot be created (RLIMIT_FSIZE 0:
 *                 ftruncate fails with EFBIG), and a rank that cannot open one
 *                 peer's segment: those pairs go over tcp, each side says so
 *                 once, and the job works.
 * After every section, no /dev/shm/xport-<pid>-<rank> of a process this
 * test started may remain.
 *
 * Usage: test_shm [SECTION]   (default: all, each in a child of its own)
 * Exit: 0 pass, 1 fail, 77 skip (no /dev/shm; or every section run lacked
 * what it needs: tcp, process_vm_readv).
 *
 * Linked with -Wl,--wrap=xpi_boot_allgather and -Wl,--wrap=shm_open: the
 * wrappers let setup-kill's rank 1 kill itself at the first control exchange
 * it enters once its segment exists, and fallback's rank 1 fail to open rank
 * 2's segment, deterministically and without touching the library.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "xport/xport.h"
#include "job/bootstrap.h"
#include "mproc.h"
#include "testutil.h"
#include "pattern.h"

/* ------------------------------------------------------------------------- */
/* Helpers                                                                   */

static int64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double ms_since(int64_t t0)
{
	return (double)(now_ns() - t0) / 1e6;
}

/* What the ranks of this test share with the process that runs a section:
 * one anonymous shared page set up before anything forks. */
#define MAX_PIDS 2048
struct shared {
	_Atomic int npids;
	_Atomic int pids[MAX_PIDS]; /* every rank process this test started */
	_Atomic int job_pid[16];    /* the current job's ranks */
	/* kill sections */
	_Atomic int64_t kill_ns; /* when rank 1 raised SIGKILL */
	_Atomic int r0_posted;   /* rank 0 posted its receive of the big message */
	/* setup-kill */
	_Atomic int died_in_setup;
	/* cma-min: rendezvous sends announced / receives done; flood */
	_Atomic int announced, taken;
	_Atomic long r1_unexp; /* flood: rank 1's unexpected messages */
	/* crowd: voluntary context switches of each rank (its sleeps) */
	_Atomic long nvcsw[16];
};
static struct shared *sh;

static void record_rank(int rank)
{
	int pid = (int)getpid();
	atomic_store(&sh->job_pid[rank], pid);
	int i = atomic_fetch_add(&sh->npids, 1);
	if (i < MAX_PIDS)
		atomic_store(&sh->pids[i], pid);
}

static bool is_ours(int pid)
{
	int n = atomic_load(&sh->npids);
	for (int i = 0; i < n && i < MAX_PIDS; i++)
		if (atomic_load(&sh->pids[i]) == pid)
			return true;
	return false;
}

static xp_context_t *start(int rank)
{
	record_rank(rank);
	return t_start_rank(rank);
}

static void expect_route(xp_context_t *ctx, int peer, const char *tl)
{
	xp_route_t r;
	T_OK(xp_route_get(ctx, peer, 0, &r));
	if (strcmp(r.transport, tl) != 0)
		T_FAIL("rank %d: xp_route_get says rank %d is served by \"%s\", expected \"%s\"",
		       xp_rank(ctx), peer, r.transport, tl);
}

/* Every peer over @tl, except those named in @other (a bit per rank),
 * which go over @other_tl; the rank itself over "self". */
static void expect_routes(xp_context_t *ctx, const char *tl, unsigned other, const char *other_tl)
{
	for (int p = 0; p < xp_size(ctx); p++)
		expect_route(ctx, p, p == xp_rank(ctx) ? "self" : (other >> p) & 1 ? other_tl : tl);
}

/* Soft checks for the fault sections: each failure is printed and counted,
 * and the rank goes on so that one failure does not hide the next. */
static int soft_failures;

#define S_CHECK(cond, ...)                                                                         \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                       \
			fprintf(stderr, __VA_ARGS__);                                              \
			fprintf(stderr, "\n");                                                     \
			soft_failures++;                                                           \
		}                                                                                  \
	} while (0)

/* Checks that @rc is @want and that the error detail names @sub. */
static void expect_fail(int rc, int want, const char *sub, const char *what)
{
	S_CHECK(rc == want, "%s: returned %d (%s), expected %d (%s); detail: %s", what, rc,
		xp_strerror(rc), want, xp_strerror(want), xp_error_detail());
	if (rc == want)
		S_CHECK(strstr(xp_error_detail(), sub) != NULL,
			"%s: the error detail \"%s\" does not name \"%s\"", what, xp_error_detail(),
			sub);
}

/* A ping-pong of eager and rendezvous sizes with content checks. */
static void pingpong(xp_comm_t *w, int me, int peer, uint64_t tag0)
{
	static const size_t sizes[] = { 0, 1, 1000, 4096, 4097, 32768, 200000, 3 << 20 };
	uint8_t *buf = malloc(3 << 20);
	T_CHECK(buf != NULL);
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		size_t len = sizes[i];
		uint64_t tag = tag0 + i;
		xp_status_t st;
		if (me < peer) {
			fill(buf, len, (uint32_t)tag);
			T_OK(xp_send(w, buf, len, peer, tag));
			T_OK(xp_recv(w, buf, 3 << 20, peer, tag, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_CHECK(check(buf, len, (uint32_t)tag + 1) == 0);
		} else {
			T_OK(xp_recv(w, buf, 3 << 20, peer, tag, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_EQ(st.source, peer);
			T_CHECK(check(buf, len, (uint32_t)tag) == 0);
			fill(buf, len, (uint32_t)tag + 1);
			T_OK(xp_send(w, buf, len, peer, tag));
		}
	}
	free(buf);
}

/* Every rank sends every other one a message of each size, with content
 * checks; receives name their source. */
static void exchange_all(xp_context_t *ctx, uint32_t round)
{
	static const size_t sizes[] = { 0, 100, 4096, 4097, 32767, 32768, 200000, 1 << 20 };
	enum { NS = sizeof(sizes) / sizeof(sizes[0]) };
	const size_t total = 0 + 100 + 4096 + 4097 + 32767 + 32768 + 200000 + (1 << 20);
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), n = xp_size(ctx);
	uint8_t *out = malloc(total), *in = malloc((size_t)n * total);
	xp_request_t **rq = calloc((size_t)n * NS * 2, sizeof(*rq));
	T_CHECK(out != NULL && in != NULL && rq != NULL);
	size_t off = 0;
	for (int i = 0; i < NS; i++) {
		fill(out + off, sizes[i], round * 1000 + (uint32_t)me * 10 + (uint32_t)i);
		off += sizes[i];
	}
	int k = 0;
	for (int p = 0; p < n; p++) {
		if (p == me)
			continue;
		off = 0;
		for (int i = 0; i < NS; i++) {
			T_OK(xp_irecv(w, in + (size_t)p * total + off, sizes[i], p,
				      round * 100 + (uint32_t)i, XP_TAG_EXACT, &rq[k++]));
			T_OK(xp_isend(w, out + off, sizes[i], p, round * 100 + (uint32_t)i,
				      &rq[k++]));
			off += sizes[i];
		}
	}
	for (int i = 0; i < k; i++)
		T_OK(xp_wait(&rq[i], XP_TIMEOUT_DEFAULT, NULL));
	for (int p = 0; p < n; p++) {
		if (p == me)
			continue;
		off = 0;
		for (int i = 0; i < NS; i++) {
			if (check(in + (size_t)p * total + off, sizes[i],
				  round * 1000 + (uint32_t)p * 10 + (uint32_t)i) != 0)
				T_FAIL("rank %d: message %d (%zu bytes) of round %u from rank %d is "
				       "damaged",
				       me, i, sizes[i], round, p);
			off += sizes[i];
		}
	}
	free(out);
	free(in);
	free(rq);
}

/* ------------------------------------------------------------------------- */
/* Jobs: what each rank's environment gets                                   */

struct job {
	int variant;            /* what the body does, per section */
	int tcp_rank;           /* this rank allows only tcp (-1: none) */
	int bogus_rank;         /* this rank has XP_TRANSPORTS=bogus (-1: none) */
	const char *transports; /* XP_TRANSPORTS of every rank, or NULL */
	const char *unexp_max;  /* XP_UNEXPECTED_MAX_BYTES, or NULL */
	const char *timeout_ms; /* XP_TIMEOUT_MS, or NULL */
	const char *cma_min;    /* XP_SHM_CMA_MIN, or NULL */
	int fsize_rank;         /* this rank cannot create files (-1: none) */
	int reap_rank;          /* this rank runs under a reaping launcher (-1: none) */
	int die_in_setup_rank;  /* this rank dies once its segment exists (-1: none) */
	bool capture;           /* collect what the ranks write to stderr in log */
	int capture_fd;         /* run_job: where their stderr goes, or -1 */
	int timeout_s;          /* alarm of each rank */
	char *log;              /* what the ranks wrote, if captured */
};

static const struct job job_defaults = { .tcp_rank = -1,
					 .bogus_rank = -1,
					 .fsize_rank = -1,
					 .reap_rank = -1,
					 .die_in_setup_rank = -1,
					 .capture_fd = -1,
					 .timeout_s = 120 };

/* In a rank: the rank to kill itself during setup (see the wrapper). */
static int die_rank = -1;

/*
 * Makes this process a launcher that reaps its rank at once, as xprun and
 * any launcher with a SIGCHLD handler do: the rank goes on in a child,
 * this process waits for it and ends the same way. (mproc waits for its
 * ranks in rank order, so without this a rank that died stays a zombie
 * until every rank before it has exited.)
 */
static void reaping_launcher(int timeout_s)
{
	fflush(NULL);
	pid_t c = fork();
	if (c < 0) {
		perror("fork");
		_exit(1);
	}
	if (c == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm((unsigned)timeout_s); /* alarms do not survive fork */
		return;                     /* the rank */
	}
	int st;
	while (waitpid(c, &st, 0) < 0 && errno == EINTR)
		;
	if (WIFSIGNALED(st)) {
		signal(WTERMSIG(st), SIG_DFL);
		raise(WTERMSIG(st));
	}
	_exit(WIFEXITED(st) ? WEXITSTATUS(st) : 1);
}

static void job_env(int rank, void *arg)
{
	const struct job *j = arg;
	if (j->capture_fd >= 0)
		dup2(j->capture_fd, STDERR_FILENO);
	unsetenv("XP_TRANSPORTS");
	if (j->transports != NULL)
		setenv("XP_TRANSPORTS", j->transports, 1);
	if (rank == j->tcp_rank)
		setenv("XP_TRANSPORTS", "tcp", 1);
	if (rank == j->bogus_rank)
		setenv("XP_TRANSPORTS", "bogus", 1);
	if (j->unexp_max != NULL)
		setenv("XP_UNEXPECTED_MAX_BYTES", j->unexp_max, 1);
	if (j->timeout_ms != NULL)
		setenv("XP_TIMEOUT_MS", j->timeout_ms, 1);
	if (j->cma_min != NULL)
		setenv("XP_SHM_CMA_MIN", j->cma_min, 1);
	if (rank == j->fsize_rank) {
		/* ftruncate beyond the limit fails with EFBIG and raises
		 * SIGXFSZ, whose default action would kill the rank. The hard
		 * limit stays, so the rank can lift the soft one later. */
		struct rlimit rl;
		signal(SIGXFSZ, SIG_IGN);
		getrlimit(RLIMIT_FSIZE, &rl);
		rl.rlim_cur = 0;
		if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
			T_FAIL("setrlimit(RLIMIT_FSIZE, 0): %s", strerror(errno));
	}
	if (rank == j->die_in_setup_rank)
		die_rank = rank;
	if (rank == j->reap_rank)
		reaping_launcher(j->timeout_s);
}

/* Runs @n ranks of @body on @j; if j->capture, fills j->log with what they
 * wrote to stderr (and shows it). Returns how many ranks did not exit 0. */
static int run_job(int n, int (*body)(int, void *), struct job *j, struct mproc_result *res)
{
	int fds[2] = { -1, -1 };
	bool capture = j->capture;
	for (int r = 0; r < 16; r++)
		atomic_store(&sh->job_pid[r], 0);
	if (capture) {
		T_CHECK(pipe2(fds, O_CLOEXEC) == 0);
		/* Room for everything the ranks say: nobody reads until they end. */
		fcntl(fds[1], F_SETPIPE_SZ, 1 << 20);
		j->capture_fd = fds[1];
	}
	int bad = mproc_run(n, body, j, j->timeout_s, job_env, res);
	if (!capture)
		return bad;
	close(fds[1]);
	j->capture_fd = -1;
	size_t cap = 1 << 16, len = 0;
	char *log = malloc(cap);
	T_CHECK(log != NULL);
	for (;;) {
		if (cap - len < 4096) {
			cap *= 2;
			log = realloc(log, cap);
			T_CHECK(log != NULL);
		}
		ssize_t got = read(fds[0], log + len, cap - len - 1);
		if (got <= 0)
			break;
		len += (size_t)got;
	}
	log[len] = '\0';
	close(fds[0]);
	free(j->log);
	j->log = log;
	/* Show it: failures of ranks are in it too. */
	for (char *line = log; *line != '\0';) {
		char *nl = strchr(line, '\n');
		int l = nl != NULL ? (int)(nl - line) : (int)strlen(line);
		fprintf(stderr, "   | %.*s\n", l, line);
		line += l + (nl != NULL);
	}
	return bad;
}

/* ------------------------------------------------------------------------- */
/* basic: two ranks                                                          */

#define MAXLEN (8u << 20)

/* Every size both ways; the receiver takes from any source. */
static int sizes_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = start(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	int peer = 1 - rank;
	expect_routes(ctx, "shm", 0, NULL);
	xp_route_t r;
	T_OK(xp_route_get(ctx, peer, 4096, &r));
	T_CHECK(strcmp(r.protocol, "eager") == 0);
	T_OK(xp_route_get(ctx, peer, 4097, &r));
	T_CHECK(strcmp(r.protocol, "rndv") == 0);

	uint8_t *buf = malloc(MAXLEN);
	T_CHECK(buf != NULL);
	static const size_t fixed[] = { 0,       1,          31,     32,      33,
					92,      93,         100,    1000,    4095,
					4096,    4097,       4098,   8191,    32768,
					65536,   65537,      100001, 1 << 20, (1 << 20) + 7,
					3 << 20, MAXLEN - 1, MAXLEN };
	unsigned n = sizeof(fixed) / sizeof(fixed[0]);
	unsigned seed = 4242;
	uint64_t n_eager = 0, n_rndv = 0;
	for (unsigned i = 0; i < n + 30; i++) {
		size_t len =
			i < n ? fixed[i] : (size_t)rand_r(&seed) % (i % 3 == 0 ? MAXLEN + 1 : 8193);
		if (len <= 4096)
			n_eager++;
		else
			n_rndv++;
		xp_status_t st;
		if (rank == 0) {
			fill(buf, len, i);
			T_OK(xp_send(w, buf, len, 1, i));
			T_OK(xp_recv(w, buf, MAXLEN, 1, i, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_EQ(st.source, 1);
			if (check(buf, len, i + 7777) != 0)
				T_FAIL("rank 0: reply of %zu bytes damaged", len);
		} else {
			T_OK(xp_recv(w, buf, MAXLEN, XP_ANY_SOURCE, i, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_EQ(st.source, 0);
			T_EQ(st.tag, i);
			if (check(buf, len, i) != 0)
				T_FAIL("rank 1: message of %zu bytes damaged", len);
			fill(buf, len, i + 7777);
			T_OK(xp_send(w, buf, len, 0, i));
		}
	}
	/* Each size went by the protocol its route says. */
	xp_stats_t s;
	T_OK(xp_stats_get(ctx, &s));
	T_EQ(s.eager_sends, n_eager);
	T_EQ(s.rndv_sends, n_rndv);
	free(buf);
	xp_finalize(ctx);
	return 0;
}

/* Pooled receives, truncation in both protocols, order across protocols
 * on one tag (receives posted after the messages came, then before). */
static int features_body(int rank, void *arg)
{
	(void)arg;
	enum { NORD = 40, BIGLEN = 70000 };
	xp_context_t *ctx = start(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	static const size_t lens[] = { 0, 8, 4096, 4097, BIGLEN, 2 << 20, MAXLEN };
	enum { NL = sizeof(lens) / sizeof(lens[0]) };
	uint8_t *buf = malloc(MAXLEN);
	uint8_t(*big)[BIGLEN] = malloc(NORD * sizeof(*big));
	xp_request_t *r[NORD];
	T_CHECK(buf != NULL && big != NULL);
	if (rank == 0) {
		for (unsigned i = 0; i < NL; i++) {
			fill(buf, lens[i], i);
			T_OK(xp_send(w, buf, lens[i], 1, 100 + i));
		}
		/* Truncation: eager and rendezvous. */
		fill(buf, 1000, 50);
		T_OK(xp_send(w, buf, 1000, 1, 200));
		fill(buf, 4096, 51);
		T_OK(xp_send(w, buf, 4096, 1, 201));
		fill(buf, 100000, 54);
		T_OK(xp_send(w, buf, 100000, 1, 204));
		fill(buf, 300000, 52);
		T_OK(xp_send(w, buf, 300000, 1, 202));
		fill(buf, MAXLEN, 53);
		T_OK(xp_send(w, buf, MAXLEN, 1, 203));
		/* Alternating protocols on one tag, twice: must arrive in send order. */
		for (int round = 0; round < 2; round++) {
			if (round == 1) /* the receives are posted */
				T_OK(xp_recv(w, NULL, 0, 1, 302, XP_TAG_EXACT, NULL));
			for (int i = 0; i < NORD; i++) {
				size_t len = i % 2 ? BIGLEN : 16;
				fill(big[i], len, (uint32_t)(300 + round * NORD + i));
				T_OK(xp_isend(w, big[i], len, 1, 300 + (uint64_t)round, &r[i]));
			}
			for (int i = 0; i < NORD; i++)
				T_OK(xp_wait(&r[i], XP_TIMEOUT_DEFAULT, NULL));
		}
		T_OK(xp_recv(w, NULL, 0, 1, 999, XP_TAG_EXACT, NULL)); /* done */
	} else {
		for (unsigned i = 0; i < NL; i++) {
			xp_buf_t *b;
			xp_status_t st;
			T_OK(xp_recv_buf(w, 0, 100 + i, XP_TAG_EXACT, &b, &st));
			T_EQ(st.length, lens[i]);
			T_EQ(xp_buf_len(b), lens[i]);
			if (check(xp_buf_data(b), lens[i], i) != 0)
				T_FAIL("pooled receive of %zu bytes damaged", lens[i]);
			xp_buf_release(b);
		}
		xp_status_t st;
		T_EQ(xp_recv(w, buf, 100, 0, 200, XP_TAG_EXACT, &st), -EMSGSIZE);
		T_EQ(st.length, 1000);
		T_CHECK(check(buf, 100, 50) == 0);
		T_CHECK(strstr(xp_error_detail(), "truncated") != NULL);
		T_EQ(xp_recv(w, NULL, 0, 0, 201, XP_TAG_EXACT, &st), -EMSGSIZE);
		T_EQ(st.length, 4096);
		T_EQ(xp_recv(w, buf, 100, 0, 204, XP_TAG_EXACT, &st), -EMSGSIZE);
		T_EQ(st.length, 100000);
		T_CHECK(check(buf, 100, 54) == 0);
		T_EQ(xp_recv(w, buf, 100, 0, 202, XP_TAG_EXACT, &st), -EMSGSIZE);
		T_EQ(st.length, 300000);
		T_CHECK(check(buf, 100, 52) == 0);
		T_CHECK(strstr(xp_error_detail(), "truncated") != NULL);
		memset(buf, 0, 8192);
		T_EQ(xp_recv(w, buf, 4097, 0, 203, XP_TAG_EXACT, &st), -EMSGSIZE);
		T_EQ(st.length, MAXLEN);
		T_CHECK(check(buf, 4097, 53) == 0);
		for (int i = 4097; i < 8192; i++)
			if (buf[i] != 0)
				T_FAIL("byte %d past a truncated 4097-byte receive was written", i);
		/* Round 0: everything has come before the receives. */
		for (int i = 0; i < NORD; i++) {
			size_t len = i % 2 ? BIGLEN : 16;
			T_OK(xp_recv(w, buf, BIGLEN, i % 3 ? 0 : XP_ANY_SOURCE, 300, XP_TAG_EXACT,
				     &st));
			if (st.length != len || check(buf, len, (uint32_t)(300 + i)) != 0)
				T_FAIL("message %d of the unexpected alternating series is %zu "
				       "bytes, expected %zu, or out of order",
				       i, st.length, len);
		}
		/* Round 1: every receive posted first. */
		for (int i = 0; i < NORD; i++)
			T_OK(xp_irecv(w, big[i], BIGLEN, i % 3 ? 0 : XP_ANY_SOURCE, 301,
				      XP_TAG_EXACT, &r[i]));
		T_OK(xp_send(w, NULL, 0, 0, 302));
		for (int i = 0; i < NORD; i++) {
			size_t len = i % 2 ? BIGLEN : 16;
			T_OK(xp_wait(&r[i], XP_TIMEOUT_DEFAULT, &st));
			if (st.length != len || check(big[i], len, (uint32_t)(300 + NORD + i)) != 0)
				T_FAIL("message %d of the posted alternating series is %zu bytes, "
				       "expected %zu, or out of order",
				       i, st.length, len);
		}
		T_OK(xp_send(w, NULL, 0, 0, 999));
	}
	free(buf);
	free(big);
	xp_finalize(ctx);
	return 0;
}

#define FLOOD_N 3000
#define FLOOD_UNEXP (64u << 10)

static size_t flood_len(int i)
{
	return 16 + (size_t)(i * 397) % 4081; /* 16 .. 4096: eager sizes */
}

/*
 * Thousands of messages sent before the receiver posts anything, then an
 * "all sent" message it waits for: past the eager credit the sender
 * switches to rendezvous; nothing is lost, order is kept, the receiver
 * never buffers more than its bound.
 */
static int flood_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = start(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	expect_routes(ctx, "shm", 0, NULL);
	if (rank == 0) {
		uint8_t *bufs = malloc((size_t)FLOOD_N * 4096);
		xp_request_t **r = malloc(FLOOD_N * sizeof(*r));
		T_CHECK(bufs != NULL && r != NULL);
		for (int i = 0; i < FLOOD_N; i++) {
			fill(bufs + (size_t)i * 4096, flood_len(i), (uint32_t)i);
			T_OK(xp_isend(w, bufs + (size_t)i * 4096, flood_len(i), 1, 5, &r[i]));
		}
		int64_t t0 = now_ns();
		int rc = xp_send(w, NULL, 0, 1, 6); /* "all sent" */
		if (rc < 0)
			T_FAIL("rank 0: the \"all sent\" message behind %d sends to rank 1 failed "
			       "after %.0f ms: %s",
			       FLOOD_N, ms_since(t0), xp_error_detail());
		for (int i = 0; i < FLOOD_N; i++)
			T_OK(xp_wait(&r[i], XP_TIMEOUT_DEFAULT, NULL));
		xp_stats_t s;
		T_OK(xp_stats_get(ctx, &s));
		fprintf(stderr, "   flood: %llu eager, %llu rendezvous sends\n",
			(unsigned long long)s.eager_sends, (unsigned long long)s.rndv_sends);
		T_CHECK(s.rndv_sends > 0 && s.eager_sends > 0);
		free(bufs);
		free(r);
	} else {
		int64_t t0 = now_ns();
		int rc = xp_recv(w, NULL, 0, 0, 6, XP_TAG_EXACT, NULL);
		if (rc < 0)
			T_FAIL("rank 1: the \"all sent\" message did not come in %.0f ms: %s",
			       ms_since(t0), xp_error_detail());
		uint8_t buf[4096];
		for (int i = 0; i < FLOOD_N; i++) {
			xp_status_t st;
			T_OK(xp_recv(w, buf, sizeof(buf), i % 2 ? 0 : XP_ANY_SOURCE, 5,
				     XP_TAG_EXACT, &st));
			if (st.length != flood_len(i) || check(buf, st.length, (uint32_t)i) != 0)
				T_FAIL("flood message %d: %zu bytes, expected %zu, or damaged", i,
				       st.length, flood_len(i));
		}
		xp_stats_t s;
		T_OK(xp_stats_get(ctx, &s));
		fprintf(stderr, "   flood: at most %llu unexpected bytes buffered (bound %u)\n",
			(unsigned long long)s.unexpected_bytes_max, FLOOD_UNEXP);
		T_CHECK(s.unexpected_bytes_max <= FLOOD_UNEXP);
	}
	xp_finalize(ctx);
	return 0;
}

/* Three ranks: any-source receives take from both peers, mixed with
 * exact ones, and each peer's messages stay in order. */
static int anysource_body(int rank, void *arg)
{
	(void)arg;
	enum { N = 200 };
	xp_context_t *ctx = start(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	expect_routes(ctx, "shm", 0, NULL);
	uint8_t *buf = malloc(1 << 17);
	T_CHECK(buf != NULL);
	if (rank == 0) {
		int next[3] = { 0, 0, 0 };
		for (int i = 0; i < 2 * N; i++) {
			xp_status_t st;
			int src = i % 5 == 4 ? 1 + (i / 5) % 2 : XP_ANY_SOURCE;
			if (src != XP_ANY_SOURCE && next[src] == N)
				src = 3 - src;
			T_OK(xp_recv(w, buf, 1 << 17, src, 7, XP_TAG_EXACT, &st));
			T_CHECK(st.source == 1 || st.source == 2);
			int k = next[st.source]++;
			size_t len = k % 4 == 3 ? 100000 : (size_t)k * 7;
			if (st.length != len ||
			    check(buf, len, (uint32_t)(st.source * 10000 + k)) != 0)
				T_FAIL("message %d from rank %d: %zu bytes, expected %zu, or out "
				       "of order",
				       k, st.source, st.length, len);
		}
		T_EQ(next[1], N);
		T_EQ(next[2], N);
	} else {
		for (int k = 0; k < N; k++) {
			size_t len = k % 4 == 3 ? 100000 : (size_t)k * 7;
			fill(buf, len, (uint32_t)(rank * 10000 + k));
			T_OK(xp_send(w, buf, len, 0, 7));
		}
	}
	free(buf);
	xp_finalize(ctx);
	return 0;
}

static void test_basic(void)
{
	/* Rendezvous payloads go through the segment's chunks or are read
	 * from the sender's memory, by size (XP_SHM_CMA_MIN): both ways, and
	 * each way alone for every size. */
	static const char *const cma[] = { NULL, "1099511627776", "4097" };
	static const char *const how[] = {
		"", " (XP_SHM_CMA_MIN=1 TiB: every rendezvous streamed)",
		" (XP_SHM_CMA_MIN=4097: every rendezvous read directly)"
	};
	struct job j = job_defaults;
	for (int i = 0; i < 3; i++) {
		j.cma_min = cma[i];
		fprintf(stderr, "   routes; 0 B .. 8 MiB both ways, any-source receives%s\n",
			how[i]);
		T_EQ(run_job(2, sizes_body, &j, NULL), 0);
		fprintf(stderr, "   pooled receives, truncation, order across protocols%s\n",
			how[i]);
		T_EQ(run_job(2, features_body, &j, NULL), 0);
	}
	j.cma_min = NULL;
	fprintf(stderr, "   any-source receives from two senders\n");
	T_EQ(run_job(3, anysource_body, &j, NULL), 0);
}

#define XPEER_N 1100
#define XPEER_LEN 8192

/*
 * Rank 0 has more rendezvous sends to rank 1 than rank 1 has received yet
 * (rank 1 progresses, so each one has been announced, but posts no
 * receive); meanwhile rank 2 waits for one rendezvous message from rank 0.
 * A slow receiver must not hold up rank 0's messages to anyone else.
 */
static int xpeer_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = start(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(XPEER_LEN);
	T_CHECK(buf != NULL);
	if (rank == 0) {
		xp_request_t **r = calloc(XPEER_N + 1, sizeof(*r));
		T_CHECK(r != NULL);
		fill(buf, XPEER_LEN, 77);
		for (int i = 0; i < XPEER_N; i++)
			T_OK(xp_isend(w, buf, XPEER_LEN, 1, 1, &r[i]));
		/* Until rank 1 has taken in every announcement our transport
		 * will make for now (all of them, or as many as it can hold
		 * outstanding): no change for 200 ms. */
		int64_t until = now_ns() + 20 * 1000000000LL, stable = now_ns();
		uint64_t last = 0;
		for (;;) {
			xp_stats_t st;
			xp_progress(ctx);
			T_OK(xp_stats_get(ctx, &st));
			if (st.sends != last || atomic_load(&sh->r1_unexp) != (long)st.sends)
				stable = now_ns();
			last = st.sends;
			if (now_ns() - stable > 200000000)
				break;
			T_CHECK(now_ns() < until);
			sched_yield();
		}
		fprintf(stderr, "   rank 0: %llu of %d sends to rank 1 announced\n",
			(unsigned long long)last, XPEER_N);
		T_OK(xp_isend(w, buf, XPEER_LEN, 2, 2, &r[XPEER_N]));
		T_OK(xp_wait(&r[XPEER_N], 12000, NULL)); /* rank 2 waits 10 s */
		for (int i = 0; i < XPEER_N; i++)
			T_OK(xp_wait(&r[i], XP_TIMEOUT_DEFAULT, NULL));
		free(r);
	} else if (rank == 2) {
		xp_request_t *r;
		xp_status_t st;
		int64_t t0 = now_ns();
		T_OK(xp_irecv(w, buf, XPEER_LEN, 0, 2, XP_TAG_EXACT, &r));
		int rc = xp_wait(&r, 10000, &st);
		fprintf(stderr,
			"   rank 2: its message from rank 0, sent behind %d to rank 1 that rank 1 "
			"has not received: %s after %.0f ms\n",
			XPEER_N, rc == 0 ? "came" : xp_strerror(rc), ms_since(t0));
		atomic_store(&sh->announced, 1); /* rank 1 may receive now */
		T_OK(rc);
		T_CHECK(st.length == XPEER_LEN && check(buf, XPEER_LEN, 77) == 0);
	} else {
		int64_t until = now_ns() + 30 * 1000000000LL;
		while (atomic_load(&sh->announced) == 0) {
			xp_stats_t st;
			xp_progress(ctx); /* takes announcements in, receives nothing */
			T_OK(xp_stats_get(ctx, &st));
			atomic_store(&sh->r1_unexp, (long)st.unexpected_now);
			T_CHECK(now_ns() < until);
			sched_yield();
		}
		for (int i = 0; i < XPEER_N; i++) {
			xp_status_t st;
			T_OK(xp_recv(w, buf, XPEER_LEN, 0, 1, XP_TAG_EXACT, &st));
			T_CHECK(st.length == XPEER_LEN && check(buf, XPEER_LEN, 77) == 0);
		}
	}
	free(buf);
	xp_finalize(ctx);
	return 0;
}

static void test_flood(void)
{
	struct job j = job_defaults;
	fprintf(stderr,
		"   %d messages before the receiver posts, past a %u-byte unexpected bound\n",
		FLOOD_N, FLOOD_UNEXP);
	j.unexp_max = "64k";
	j.timeout_ms = "20000"; /* a stall fails in 20 s, not 30 */
	int bad_flood = run_job(2, flood_body, &j, NULL);

	fprintf(stderr,
		"   %d rendezvous sends to a rank that does not receive yet, then one "
		"to another rank\n",
		XPEER_N);
	j = job_defaults;
	j.timeout_ms = "20000";
	atomic_store(&sh->announced, 0);
	atomic_store(&sh->r1_unexp, -1);
	int bad_xpeer = run_job(3, xpeer_body, &j, NULL);
	T_EQ(bad_flood, 0);
	T_EQ(bad_xpeer, 0);
}

/* ------------------------------------------------------------------------- */
/* mix: per-pair transports                                                  */

enum { MIX_TCP2, MIX_SHM_ONLY };

static int mix_body(int rank, void *arg)
{
	const struct job *j = arg;
	xp_context_t *ctx = start(rank);
	if (j->variant == MIX_TCP2) {
		/* Rank 2 allows only tcp: every pair with it goes over tcp. */
		if (rank == 2)
			expect_routes(ctx, "tcp", 0, NULL);
		else
			expect_routes(ctx, "shm", 1u << 2, "tcp");
		xp_route_t r;
		if (rank != 2) {
			T_OK(xp_route_get(ctx, 2, 32767, &r));
			T_CHECK(strcmp(r.protocol, "eager") == 0);
			T_OK(xp_route_get(ctx, 2, 32768, &r));
			T_CHECK(strcmp(r.protocol, "rndv") == 0);
			T_OK(xp_route_get(ctx, 1 - rank, 4097, &r));
			T_CHECK(strcmp(r.protocol, "rndv") == 0);
		}
	} else {
		expect_routes(ctx, "shm", 0, NULL);
	}
	for (uint32_t round = 1; round <= 3; round++)
		exchange_all(ctx, round);
	xp_finalize(ctx);
	return 0;
}

/* XP_TRANSPORTS=bogus: xp_init fails at once with -EINVAL and says why. */
static int bogus_body(int rank, void *arg)
{
	const struct job *j = arg;
	record_rank(rank);
	xp_context_t *ctx = NULL;
	int64_t t0 = now_ns();
	int rc = xp_init(NULL, &ctx);
	double el = ms_since(t0);
	fprintf(stderr, "rank %d: xp_init returned %d (%s) after %.0f ms; detail: \"%s\"\n", rank,
		rc, xp_strerror(rc), el, xp_error_detail());
	T_CHECK(ctx == NULL);
	if (j->bogus_rank < 0 || rank == j->bogus_rank) {
		T_EQ(rc, -EINVAL);
		T_CHECK(el < 5000);
		/* The program can tell why, not only the log (as for other
		 * failures of xp_init, e.g. a wrong job key). */
		if (strstr(xp_error_detail(), "XP_TRANSPORTS") == NULL)
			T_FAIL("rank %d: after xp_init failed for XP_TRANSPORTS=bogus, "
			       "xp_error_detail() is \"%s\"",
			       rank, xp_error_detail());
	} else {
		/* A peer's bad setting: its partners fail too, soon. */
		T_CHECK(rc < 0);
		T_CHECK(el < 10000);
	}
	return 0;
}

/* Lines of @log that contain every one of @a, @b, @c (NULL: anything). */
static int count_lines(const char *log, const char *a, const char *b, const char *c)
{
	int n = 0;
	for (const char *line = log; *line != '\0';) {
		const char *nl = strchr(line, '\n');
		size_t l = nl != NULL ? (size_t)(nl - line) : strlen(line);
		char tmp[2048];
		snprintf(tmp, sizeof(tmp), "%.*s", (int)(l < sizeof(tmp) - 1 ? l : sizeof(tmp) - 1),
			 line);
		if ((a == NULL || strstr(tmp, a) != NULL) &&
		    (b == NULL || strstr(tmp, b) != NULL) && (c == NULL || strstr(tmp, c) != NULL))
			n++;
		line += l + (nl != NULL);
	}
	return n;
}

static void test_mix(void)
{
	struct job j = job_defaults;
	fprintf(stderr, "   rank 2 allows only tcp\n");
	j.tcp_rank = 2;
	j.variant = MIX_TCP2;
	T_EQ(run_job(3, mix_body, &j, NULL), 0);

	fprintf(stderr, "   XP_TRANSPORTS=shm on every rank\n");
	j = job_defaults;
	j.transports = "shm";
	j.variant = MIX_SHM_ONLY;
	T_EQ(run_job(3, mix_body, &j, NULL), 0);
}

static void test_bogus(void)
{
	struct job j = job_defaults;
	fprintf(stderr, "   XP_TRANSPORTS=bogus on every rank\n");
	j.transports = "bogus";
	j.capture = true;
	j.timeout_s = 60;
	int bad_all = run_job(3, bogus_body, &j, NULL);
	/* The reason is the program's to see, naming the variable and the
	 * value. */
	int said_all = count_lines(j.log, "detail: ", "XP_TRANSPORTS=bogus", "is not a transport");
	free(j.log);

	fprintf(stderr, "   XP_TRANSPORTS=bogus on rank 1 only\n");
	j = job_defaults;
	j.bogus_rank = 1;
	j.capture = true;
	j.timeout_s = 60;
	int bad_one = run_job(3, bogus_body, &j, NULL);
	int said_one = count_lines(j.log, "detail: ", "XP_TRANSPORTS=bogus", "is not a transport");
	free(j.log);
	fprintf(stderr, "   ranks that logged why: %d of 3, then %d of 1\n", said_all, said_one);
	T_EQ(said_all, 3);
	T_EQ(said_one, 1);
	T_EQ(bad_all, 0);
	T_EQ(bad_one, 0);
}

/* ------------------------------------------------------------------------- */
/* crowd: eight ranks on few cores                                           */

#define CROWD_N 8
#define CROWD_ROUNDS 10
#define CROWD_PP 200 /* ping-pongs a round, one in ten of 100 KB */
#define CROWD_RMAX 400000

static size_t crowd_eager_len(int round, int src)
{
	return 1 + (size_t)(round * 977 + src * 131) % 4096;
}

static size_t crowd_rndv_len(int round, int src)
{
	return 4097 + (size_t)(round * 7919 + src * 104729) % (CROWD_RMAX - 4097);
}

static int crowd_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = start(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	int n = xp_size(ctx);
	T_EQ(n, CROWD_N);
	expect_routes(ctx, "shm", 0, NULL);
	uint8_t *eout = malloc(4096), *rout = malloc(CROWD_RMAX);
	uint8_t *ein = malloc((size_t)n * 4096), *rin = malloc((size_t)n * CROWD_RMAX);
	uint8_t *pp = malloc(100000);
	T_CHECK(eout != NULL && rout != NULL && ein != NULL && rin != NULL && pp != NULL);
	for (int round = 0; round < CROWD_ROUNDS; round++) {
		/* All-to-all, every receive from any source. */
		xp_request_t *rq[4 * CROWD_N];
		int k = 0;
		for (int p = 0; p < n - 1; p++) {
			T_OK(xp_irecv(w, ein + (size_t)p * 4096, 4096, XP_ANY_SOURCE,
				      (uint64_t)round * 2, XP_TAG_EXACT, &rq[k++]));
			T_OK(xp_irecv(w, rin + (size_t)p * CROWD_RMAX, CROWD_RMAX, XP_ANY_SOURCE,
				      (uint64_t)round * 2 + 1, XP_TAG_EXACT, &rq[k++]));
		}
		size_t el = crowd_eager_len(round, rank), rl = crowd_rndv_len(round, rank);
		fill(eout, el, (uint32_t)(round * 100 + rank));
		fill(rout, rl, (uint32_t)(round * 100 + 50 + rank));
		for (int p = 0; p < n; p++) {
			if (p == rank)
				continue;
			T_OK(xp_isend(w, eout, el, p, (uint64_t)round * 2, &rq[k++]));
			T_OK(xp_isend(w, rout, rl, p, (uint64_t)round * 2 + 1, &rq[k++]));
		}
		unsigned seen = 0;
		for (int i = 0; i < k; i++) {
			xp_status_t st;
			T_OK(xp_wait(&rq[i], XP_TIMEOUT_DEFAULT, &st));
			if (i >= 2 * (n - 1))
				continue; /* a send */
			int src = st.source;
			T_CHECK(src >= 0 && src < n && src != rank);
			bool eager = i % 2 == 0;
			const uint8_t *got = eager ? ein + (size_t)(i / 2) * 4096 :
						     rin + (size_t)(i / 2) * CROWD_RMAX;
			size_t want =
				eager ? crowd_eager_len(round, src) : crowd_rndv_len(round, src);
			uint32_t seed = (uint32_t)(round * 100 + (eager ? 0 : 50) + src);
			if (st.length != want || check(got, want, seed) != 0)
				T_FAIL("rank %d round %d: %s message from rank %d: %zu bytes, "
				       "expected %zu, or damaged",
				       rank, round, eager ? "eager" : "rendezvous", src, st.length,
				       want);
			seen += 1u << (src * 2 + !eager);
		}
		/* One of each from every peer. */
		unsigned want_seen = 0;
		for (int p = 0; p < n; p++)
			if (p != rank)
				want_seen += 3u << (p * 2);
		T_EQ(seen, want_seen);

		/* Ping-pongs between partners (a hypercube's edges). */
		int partner = rank ^ (1 << (round % 3));
		for (int i = 0; i < CROWD_PP; i++) {
			size_t len = i % 10 == 9 ? 100000 : 8;
			uint64_t tag = 1000 + (uint64_t)round;
			xp_status_t st;
			if (rank < partner) {
				fill(pp, len, (uint32_t)i);
				T_OK(xp_send(w, pp, len, partner, tag));
				T_OK(xp_recv(w, pp, 100000, partner, tag, XP_TAG_EXACT, &st));
				T_CHECK(st.length == len && check(pp, len, (uint32_t)i + 1) == 0);
			} else {
				T_OK(xp_recv(w, pp, 100000, partner, tag, XP_TAG_EXACT, &st));
				T_CHECK(st.length == len && check(pp, len, (uint32_t)i) == 0);
				fill(pp, len, (uint32_t)i + 1);
				T_OK(xp_send(w, pp, len, partner, tag));
			}
		}
	}
	free(eout);
	free(rout);
	free(ein);
	free(rin);
	free(pp);
	xp_finalize(ctx);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	atomic_store(&sh->nvcsw[rank], ru.ru_nvcsw);
	return 0;
}

static void test_crowd(void)
{
	struct job j = job_defaults;
	long cores = sysconf(_SC_NPROCESSORS_ONLN);
	fprintf(stderr, "   %d ranks on %ld cores, %d rounds\n", CROWD_N, cores, CROWD_ROUNDS);
	int64_t t0 = now_ns();
	T_EQ(run_job(CROWD_N, crowd_body, &j, NULL), 0);
	long sleeps = 0;
	for (int r = 0; r < CROWD_N; r++)
		sleeps += atomic_load(&sh->nvcsw[r]);
	fprintf(stderr, "   %d ranks finished in %.0f ms; %ld voluntary context switches\n",
		CROWD_N, ms_since(t0), sleeps);
}

/* ------------------------------------------------------------------------- */
/* kill: a rank dies with announced rendezvous sends                         */

#define KILL_BIG (64u << 20) /* rank 1 -> 0: rank 0 waits for it */
#define KILL_EARLY 100000u   /* rank 1 -> 0: announced, fetched after the death */
#define KILL_BACK (1u << 20) /* rank 0 -> 1: announced, never asked for */
#define KILL_NE 16           /* eager messages from rank 1 before the big one */
#define KILL_ELEN 2000u
#define KILL_WAIT_MS 10000 /* every operation with the dead rank ends within this */

enum { KILL_REAPED, KILL_CMA, KILL_ZOMBIE, KILL_MIXED, KILL_POLL };

enum {
	TAG_BIG = 1,
	TAG_EARLY,
	TAG_BACK,
	TAG_EAGER,
	TAG_NEVER,
	TAG_LATE,
	TAG_ANY = 50,
	TAG_GO = 60,
	TAG_PP = 1000,
};

/*
 * Waits for @r at most @ms: with xp_wait, or by calling xp_test if @poll.
 * Returns the operation's result. Polling, a request still pending at the
 * deadline is cancelled (then -ETIMEDOUT) and polled 2 s more; if even
 * that does not end it (a receive whose payload is under way cannot be
 * cancelled) it is given up, *@r stays set, and -EINPROGRESS returned.
 */
static int wait_req(xp_request_t **r, int ms, xp_status_t *st, bool poll)
{
	if (!poll)
		return xp_wait(r, ms, st);
	int64_t until = now_ns() + (int64_t)ms * 1000000;
	bool cancelled = false;
	for (;;) {
		int rc = xp_test(r, st);
		if (rc != 0)
			return cancelled ? -ETIMEDOUT : rc == 1 ? 0 : rc;
		if (now_ns() > until) {
			if (cancelled)
				return -EINPROGRESS;
			xp_cancel(*r);
			cancelled = true;
			until = now_ns() + 2000000000LL;
		}
		sched_yield();
	}
}

/*
 * Waits at most @ms for a receive that may already be matched to a
 * rendezvous payload under way: xp_wait could not cancel it at its
 * deadline and would wait on for a sender whose death went unnoticed. So
 * the rank waits the way xp_wait does (spinning, then sleeping in the
 * transport, where dead peers are looked for) on a receive that nothing
 * matches, in slices, and tests @r between them. Gives @r up (it stays
 * set) and returns -EINPROGRESS after @ms; polls only, if @poll.
 */
static int wait_matched(xp_context_t *ctx, xp_request_t **r, int ms, xp_status_t *st, bool poll)
{
	if (poll)
		return wait_req(r, ms, st, true);
	xp_comm_t *w = xp_comm_world(ctx);
	int64_t until = now_ns() + (int64_t)ms * 1000000;
	for (;;) {
		int rc = xp_test(r, st);
		if (rc != 0)
			return rc == 1 ? 0 : rc;
		if (now_ns() > until)
			return -EINPROGRESS;
		xp_request_t *idle;
		T_OK(xp_irecv(w, NULL, 0, xp_rank(ctx), 0xdead, XP_TAG_EXACT, &idle));
		T_EQ(xp_wait(&idle, 50, NULL), -ETIMEDOUT);
	}
}

/* Checks that an operation with dead rank 1 ended with -ECONNRESET naming
 * it, within KILL_WAIT_MS of the kill. */
/* Checks that an operation with dead rank 1 ended with -ECONNRESET naming
 * it, within KILL_WAIT_MS of the kill or of @since_ns (when the wait for
 * it began), whichever is later. */
static void expect_lost(int me, int rc, int64_t since_ns, const char *what)
{
	int64_t k = atomic_load(&sh->kill_ns);
	double after = (double)(now_ns() - (since_ns > k ? since_ns : k)) / 1e6;
	fprintf(stderr, "   rank %d: %s ended after %.1f ms: %s\n", me, what, after,
		rc == 0            ? "completed" :
		rc == -EINPROGRESS ? "still pending, given up" :
				     xp_error_detail());
	expect_fail(rc, -ECONNRESET, "rank 1", what);
	S_CHECK(k != 0 && after < KILL_WAIT_MS, "%s ended after %.1f ms, not within %d ms", what,
		after, KILL_WAIT_MS);
}

static int kill_rank0(xp_context_t *ctx, const struct job *j)
{
	bool poll = j->variant == KILL_POLL;
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *big = calloc(1, KILL_BIG), *back = malloc(KILL_BACK), *early = malloc(KILL_EARLY);
	uint8_t small[KILL_ELEN], any[64];
	T_CHECK(big != NULL && back != NULL && early != NULL);
	fill(back, KILL_BACK, 9);
	xp_request_t *r_never, *r_any, *s_back, *r_big;
	T_OK(xp_irecv(w, small, sizeof(small), 1, TAG_NEVER, XP_TAG_EXACT, &r_never));
	T_OK(xp_irecv(w, any, sizeof(any), XP_ANY_SOURCE, TAG_ANY, XP_TAG_EXACT, &r_any));
	T_OK(xp_isend(w, back, KILL_BACK, 1, TAG_BACK, &s_back));

	/* Until everything rank 1 sends has been announced here: its eager
	 * messages and two rendezvous announcements, all unexpected. */
	int64_t until = now_ns() + 20 * 1000000000LL;
	for (;;) {
		xp_stats_t s;
		xp_progress(ctx);
		T_OK(xp_stats_get(ctx, &s));
		if (s.unexpected_now >= KILL_NE + 2)
			break;
		if (now_ns() > until)
			T_FAIL("rank 0: after 20 s, %llu of rank 1's %d messages announced",
			       (unsigned long long)s.unexpected_now, KILL_NE + 2);
		sched_yield();
	}
	/* The receive of the big message, posted after its announcement
	 * came; rank 1 dies while (or after) its payload is taken. */
	T_OK(xp_irecv(w, big, KILL_BIG, 1, TAG_BIG, XP_TAG_EXACT, &r_big));
	atomic_store(&sh->r0_posted, 1);
	xp_status_t st;
	fprintf(stderr, "   rank 0: waiting for the big message from rank 1\n");
	int64_t t0 = now_ns();
	int rc = wait_matched(ctx, &r_big, KILL_WAIT_MS + 2000, &st, poll);
	if (rc == 0) {
		/* The transport took the whole payload before the death. */
		fprintf(stderr, "   rank 0: the big message came whole before rank 1 died\n");
		S_CHECK(st.length == KILL_BIG && check(big, KILL_BIG, 1) == 0,
			"the big message is damaged");
	} else {
		expect_lost(0, rc, t0, "the receive of the big message being sent");
	}

	/* A receive posted before the death, for a message never sent. */
	t0 = now_ns();
	rc = wait_req(&r_never, KILL_WAIT_MS + 2000, NULL, poll);
	expect_lost(0, rc, t0, "a receive from rank 1 posted before its death");

	/* Our own announced send that rank 1 never asked for. */
	t0 = now_ns();
	rc = wait_req(&s_back, KILL_WAIT_MS + 2000, NULL, poll);
	expect_lost(0, rc, t0, "our rendezvous send announced to rank 1");

	/* Later operations with rank 1 fail at once. */
	xp_request_t *r;
	t0 = now_ns();
	T_OK(xp_irecv(w, small, sizeof(small), 1, TAG_LATE, XP_TAG_EXACT, &r));
	rc = xp_test(&r, NULL);
	if (rc == 0) {
		S_CHECK(false, "a receive from dead rank 1 is still pending after posting");
		xp_cancel(r);
		xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL);
	} else {
		expect_fail(rc, -ECONNRESET, "rank 1", "receive from rank 1 after its death");
	}
	expect_fail(xp_send(w, small, 100, 1, TAG_LATE), -ECONNRESET, "rank 1",
		    "eager send to dead rank 1");
	expect_fail(xp_send(w, early, KILL_EARLY, 1, TAG_LATE), -ECONNRESET, "rank 1",
		    "rendezvous send to dead rank 1");
	S_CHECK(ms_since(t0) < 1000, "operations with dead rank 1 took %.0f ms to fail",
		ms_since(t0));

	/* The eager messages that came before the death are whole and in order. */
	for (int i = 0; i < KILL_NE; i++) {
		rc = xp_recv(w, small, sizeof(small), 1, TAG_EAGER, XP_TAG_EXACT, &st);
		S_CHECK(rc == 0 && st.length == KILL_ELEN &&
				check(small, KILL_ELEN, 7000u + (uint32_t)i) == 0,
			"eager message %d that came before the death: %d (%s), %zu bytes", i, rc,
			xp_error_detail(), st.length);
	}

	/* The any-source receive stays for rank 2, which is unaffected. */
	S_CHECK(xp_test(&r_any, NULL) == 0, "the any-source receive ended with rank 1");
	expect_route(ctx, 2, j->variant == KILL_MIXED ? "tcp" : "shm");
	T_OK(xp_send(w, "go", 3, 2, TAG_GO));
	T_OK(xp_wait(&r_any, XP_TIMEOUT_DEFAULT, &st));
	T_EQ(st.source, 2);
	T_CHECK(check(any, sizeof(any), 50) == 0);
	pingpong(w, 0, 2, TAG_PP);

	/* A message announced before the death, whose payload cannot come. */
	fprintf(stderr, "   rank 0: receiving the message rank 1 announced before dying\n");
	T_OK(xp_irecv(w, early, KILL_EARLY, 1, TAG_EARLY, XP_TAG_EXACT, &r));
	rc = wait_matched(ctx, &r, KILL_WAIT_MS, &st, poll);
	if (rc == 0)
		S_CHECK(st.length == KILL_EARLY && check(early, KILL_EARLY, 3) == 0,
			"the early rendezvous message is damaged");
	else
		expect_fail(rc, -ECONNRESET, "rank 1", "receive of a message rank 1 announced");
	free(big);
	free(back);
	free(early);
	xp_finalize(ctx);
	return soft_failures != 0;
}

static int kill_rank1(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *big = malloc(KILL_BIG), *early = malloc(KILL_EARLY);
	uint8_t *eager = malloc((size_t)KILL_NE * KILL_ELEN);
	T_CHECK(big != NULL && early != NULL && eager != NULL);
	fill(big, KILL_BIG, 1);
	fill(early, KILL_EARLY, 3);
	xp_request_t *r[KILL_NE + 2];
	for (int i = 0; i < KILL_NE; i++) {
		fill(eager + (size_t)i * KILL_ELEN, KILL_ELEN, 7000u + (uint32_t)i);
		T_OK(xp_isend(w, eager + (size_t)i * KILL_ELEN, KILL_ELEN, 0, TAG_EAGER, &r[i]));
	}
	T_OK(xp_isend(w, early, KILL_EARLY, 0, TAG_EARLY, &r[KILL_NE]));
	T_OK(xp_isend(w, big, KILL_BIG, 0, TAG_BIG, &r[KILL_NE + 1]));
	/* Until the transport has taken every send (the eager ones wait for
	 * room in rank 0's ring). */
	int64_t until = now_ns() + 30 * 1000000000LL;
	for (;;) {
		xp_stats_t s;
		xp_progress(ctx);
		T_OK(xp_stats_get(ctx, &s));
		if (s.sends == KILL_NE + 2)
			break;
		if (now_ns() > until)
			T_FAIL("rank 1: after 30 s, %llu of %d sends taken by the transport",
			       (unsigned long long)s.sends, KILL_NE + 2);
		sched_yield();
	}
	/* Rank 0 posts its receive of the big message; we stay out of the
	 * library meanwhile, so a transport that streams from our side has
	 * not sent much of it. */
	while (atomic_load(&sh->r0_posted) == 0) {
		if (now_ns() > until)
			T_FAIL("rank 1: rank 0 never posted its receive");
		sched_yield();
	}
	for (int i = 0; i < 20; i++)
		xp_progress(ctx); /* a little of the payload, if it streams */
	atomic_store(&sh->kill_ns, now_ns());
	raise(SIGKILL);
	return 1;
}

static int kill_rank2(xp_context_t *ctx, const struct job *j)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t any[64], go[3];
	xp_request_t *r;
	/* Rank 0 first waits for what rank 1's death should end. */
	T_OK(xp_irecv(w, go, sizeof(go), 0, TAG_GO, XP_TAG_EXACT, &r));
	T_OK(xp_wait(&r, 5 * (KILL_WAIT_MS + 2000), NULL));
	fill(any, sizeof(any), 50);
	T_OK(xp_send(w, any, sizeof(any), 0, TAG_ANY));
	pingpong(w, 2, 0, TAG_PP);
	/* Rank 2 lost rank 1 too, and says so. */
	T_OK(xp_irecv(w, go, sizeof(go), 1, TAG_NEVER, XP_TAG_EXACT, &r));
	int64_t t0 = now_ns();
	int rc = wait_req(&r, KILL_WAIT_MS + 2000, NULL, j->variant == KILL_POLL);
	expect_lost(2, rc, t0, "a receive from rank 1");
	xp_finalize(ctx);
	return soft_failures != 0;
}

static int kill_body(int rank, void *arg)
{
	const struct job *j = arg;
	xp_context_t *ctx = start(rank);
	if (j->variant == KILL_MIXED)
		expect_routes(ctx, rank == 2 ? "tcp" : "shm", rank == 2 ? 0 : 1u << 2, "tcp");
	else
		expect_routes(ctx, "shm", 0, NULL);
	if (rank == 0)
		return kill_rank0(ctx, j);
	if (rank == 1)
		return kill_rank1(ctx);
	return kill_rank2(ctx, j);
}

static void test_kill_variant(int variant)
{
	struct job j = job_defaults;
	j.variant = variant;
	j.timeout_s = 120;
	j.timeout_ms = "11000"; /* blocking calls that should fail at once */
	j.reap_rank = variant == KILL_ZOMBIE ? -1 : 1;
	j.tcp_rank = variant == KILL_MIXED ? 2 : -1;
	/* KILL_CMA: rank 0 reads the payloads from rank 1's memory itself
	 * rather than rank 1 streaming them through the segment's chunks. */
	j.cma_min = variant == KILL_CMA ? "4097" : NULL;
	atomic_store(&sh->kill_ns, 0);
	atomic_store(&sh->r0_posted, 0);
	struct mproc_result res;
	fprintf(stderr, "   (rank 1 kills itself: its signal 9 below is expected)\n");
	run_job(3, kill_body, &j, &res);
	T_CHECK(atomic_load(&sh->kill_ns) != 0); /* rank 1 died by its own hand */
	T_CHECK(WIFSIGNALED(res.status[1]) && WTERMSIG(res.status[1]) == SIGKILL);
	T_CHECK(WIFEXITED(res.status[0]) && WEXITSTATUS(res.status[0]) == 0);
	T_CHECK(WIFEXITED(res.status[2]) && WEXITSTATUS(res.status[2]) == 0);
}

static void test_kill(void)
{
	test_kill_variant(KILL_REAPED);
}

static void test_kill_cma(void)
{
	test_kill_variant(KILL_CMA);
}

static void test_kill_zombie(void)
{
	test_kill_variant(KILL_ZOMBIE);
}

static void test_kill_mixed(void)
{
	test_kill_variant(KILL_MIXED);
}

static void test_kill_poll(void)
{
	test_kill_variant(KILL_POLL);
}

/* May this process read a child's memory with process_vm_readv (ptrace
 * rights), as the transport's direct reads need? */
static bool host_has_cma(void)
{
	static volatile uint64_t word = 0x1234;
	int p[2];
	T_CHECK(pipe(p) == 0);
	fflush(NULL);
	pid_t c = fork();
	T_CHECK(c >= 0);
	if (c == 0) {
		char b;
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		(void)!read(p[0], &b, 1); /* until the parent has read us */
		_exit(0);
	}
	uint64_t v = 0;
	struct iovec l = { &v, sizeof(v) }, r = { (void *)&word, sizeof(v) };
	ssize_t n = process_vm_readv(c, &l, 1, &r, 1, 0);
	(void)!write(p[1], "x", 1);
	waitpid(c, NULL, 0);
	close(p[0]);
	close(p[1]);
	return n == sizeof(v) && v == 0x1234;
}

/* ------------------------------------------------------------------------- */
/* cma-min: which rendezvous path XP_SHM_CMA_MIN selects                     */

static const size_t cma_lens[] = { 16384, 65535, 65536, 1 << 20 };
#define CMA_NLENS (sizeof(cma_lens) / sizeof(cma_lens[0]))

/*
 * For each size, rank 1 announces a rendezvous send and then stays out of
 * the library while rank 0 receives it for a second. A payload read from
 * rank 1's memory (process_vm_readv) arrives without rank 1's help; one
 * streamed through the chunks needs rank 1 to copy it in, so it cannot.
 * Rank 0 tells which (bit i: size i came without help) through sh->taken.
 */
static int cma_body(int rank, void *arg)
{
	(void)arg;
	unsigned direct = 0;
	xp_context_t *ctx = start(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(1 << 20);
	T_CHECK(buf != NULL);
	for (unsigned i = 0; i < CMA_NLENS; i++) {
		size_t len = cma_lens[i];
		xp_request_t *r;
		xp_status_t st;
		int64_t until = now_ns() + 10 * 1000000000LL;
		if (rank == 1) {
			fill(buf, len, i);
			T_OK(xp_isend(w, buf, len, 0, i, &r));
			xp_stats_t s;
			do {
				xp_progress(ctx);
				T_OK(xp_stats_get(ctx, &s));
				T_CHECK(now_ns() < until);
			} while (s.sends != i + 1);
			atomic_store(&sh->announced, (int)i + 1);
			while (atomic_load(&sh->taken) != (int)i + 1) {
				T_CHECK(now_ns() < until + 5 * 1000000000LL);
				sched_yield(); /* out of the library */
			}
			T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
		} else {
			xp_stats_t s;
			do {
				xp_progress(ctx);
				T_OK(xp_stats_get(ctx, &s));
				T_CHECK(now_ns() < until);
			} while (atomic_load(&sh->announced) != (int)i + 1 ||
				 s.unexpected_now != 1);
			memset(buf, 0, len);
			T_OK(xp_irecv(w, buf, len, 1, i, XP_TAG_EXACT, &r));
			int64_t t = now_ns() + 1000000000LL;
			int rc;
			while ((rc = xp_test(&r, &st)) == 0 && now_ns() < t)
				sched_yield();
			if (rc == 1)
				direct |= 1u << i;
			atomic_store(&sh->taken, (int)i + 1);
			if (rc == 0)
				T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, &st));
			else
				T_EQ(rc, 1);
			T_EQ(st.length, len);
			T_CHECK(check(buf, len, i) == 0);
		}
	}
	free(buf);
	xp_finalize(ctx);
	if (rank == 0) /* to the section's process */
		atomic_store(&sh->taken, (int)(0x10000 | direct));
	return 0;
}

static void test_cma_min(void)
{
	if (!host_has_cma()) {
		fprintf(stderr, "   no process_vm_readv between processes here\n");
		exit(T_SKIP);
	}
	static const struct {
		const char *env;
		unsigned want; /* bit i: cma_lens[i] is read directly */
		const char *meaning;
	} cases[] = {
		{ NULL, 0xf, "unset: from 8 KiB (the default) read directly" },
		{ "65536", 0xc, "65536: from 64 KiB read directly" },
		{ "1", 0xf, "1: every size read directly" },
		/* Sizes elsewhere take k/m/g (XP_POOL_MAX_BYTES) and refuse what
		 * they cannot parse with a warning: "64k" must mean 65536 or be
		 * refused, never read as 64. */
		{ "64k", 0xc, "64k: as 65536, or refused (then as unset)" },
		{ "2g", 0, "2g: every size streamed" },
		{ "off", 0, "off: every size streamed" },
	};
	int fails = 0;
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		struct job j = job_defaults;
		j.cma_min = cases[c].env;
		j.capture = true;
		j.timeout_s = 60;
		atomic_store(&sh->announced, 0);
		atomic_store(&sh->taken, 0);
		T_EQ(run_job(2, cma_body, &j, NULL), 0);
		int got = atomic_load(&sh->taken);
		T_CHECK(got & 0x10000);
		unsigned d = (unsigned)got & 0xf;
		bool refused = count_lines(j.log, "WARN", "XP_SHM_CMA_MIN", NULL) > 0;
		bool ok = d == cases[c].want || (c == 3 && refused && d == cases[0].want);
		char list[64] = "";
		for (unsigned i = 0; i < CMA_NLENS; i++)
			if ((d >> i) & 1)
				snprintf(list + strlen(list), sizeof(list) - strlen(list), " %zu",
					 cma_lens[i]);
		fprintf(stderr, "   XP_SHM_CMA_MIN=%s; read directly:%s%s\n", cases[c].meaning,
			d != 0 ? list : " none", ok ? "" : "  <- wrong");
		fails += !ok;
		free(j.log);
	}
	T_EQ(fails, 0);
}

/* ------------------------------------------------------------------------- */
/* cma-refused: a sender that may not write into its receiver                */

static const size_t refused_lens[] = { 8192, 1 << 20, (1 << 20) + 3, 3 << 20 };
#define REFUSED_NLENS (sizeof(refused_lens) / sizeof(refused_lens[0]))

/* Drops CAP_SYS_PTRACE from this process's effective set: root could
 * otherwise write into any process. */
static void drop_ptrace_cap(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[2];
	T_CHECK(syscall(SYS_capget, &h, d) == 0);
	d[CAP_SYS_PTRACE / 32].effective &= ~(1u << (CAP_SYS_PTRACE % 32));
	T_CHECK(syscall(SYS_capset, &h, d) == 0);
}

/*
 * Rank 0 makes itself undumpable after the job formed (the setup's probe
 * said each may read the other) and rank 1 gives up CAP_SYS_PTRACE: rank
 * 1's pushes into rank 0's receive buffers now fail (EPERM, checked), and
 * rank 0 must read those parts itself. Every payload arrives whole.
 */
static int refused_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = start(rank);
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *buf = malloc(3 << 20);
	T_CHECK(buf != NULL);
	if (rank == 0) {
		T_CHECK(prctl(PR_SET_DUMPABLE, 0) == 0);
		atomic_store(&sh->announced, getpid());
	} else {
		drop_ptrace_cap();
	}
	T_OK(xp_oob_barrier(ctx));
	if (rank == 1) {
		/* The premise: writing into rank 0 is refused now. */
		uint64_t v = 0;
		struct iovec l = { &v, sizeof(v) }, r = { &v, sizeof(v) };
		ssize_t n = process_vm_writev((pid_t)atomic_load(&sh->announced), &l, 1, &r, 1, 0);
		atomic_store(&sh->taken, n < 0 && errno == EPERM ? 1 : 2);
	}
	T_OK(xp_oob_barrier(ctx));
	if (atomic_load(&sh->taken) != 1) {
		xp_finalize(ctx);
		free(buf);
		return T_SKIP; /* the writes were not refused: nothing to test */
	}
	for (unsigned i = 0; i < REFUSED_NLENS; i++) {
		size_t len = refused_lens[i];
		if (rank == 1) {
			fill(buf, len, 40 + i);
			T_OK(xp_send(w, buf, len, 0, i));
		} else {
			xp_status_t st;
			memset(buf, 0, len);
			T_OK(xp_recv(w, buf, len, 1, i, XP_TAG_EXACT, &st));
			T_EQ(st.length, len);
			T_CHECK(check(buf, len, 40 + i) == 0);
		}
	}
	free(buf);
	xp_finalize(ctx);
	return 0;
}

static void test_cma_refused(void)
{
	if (!host_has_cma()) {
		fprintf(stderr, "   no process_vm_readv between processes here\n");
		exit(T_SKIP);
	}
	struct job j = job_defaults;
	j.timeout_s = 60;
	atomic_store(&sh->announced, 0);
	atomic_store(&sh->taken, 0);
	int rc = run_job(2, refused_body, &j, NULL);
	if (atomic_load(&sh->taken) == 2) {
		fprintf(stderr, "   rank 1 could still write into rank 0: the refusal is not "
				"testable here\n");
		exit(T_SKIP);
	}
	T_EQ(rc, 0);
	fprintf(stderr, "   8 KiB to 3 MiB arrived whole with every push refused\n");
}

/* ------------------------------------------------------------------------- */
/* setup-kill: a rank dies while the job forms                               */

int __real_xpi_boot_allgather(struct xpi_boot *b, const void *mine, size_t len, void *all);
int __wrap_xpi_boot_allgather(struct xpi_boot *b, const void *mine, size_t len, void *all);

/* The rank named by die_rank dies as it enters the first control exchange
 * at which its segment exists: between creating it and removing its name. */
int __wrap_xpi_boot_allgather(struct xpi_boot *b, const void *mine, size_t len, void *all)
{
	if (die_rank >= 0 && xpi_boot_rank(b) == die_rank) {
		char path[64];
		snprintf(path, sizeof(path), "/dev/shm/xport-%d-%d", (int)getpid(), die_rank);
		if (access(path, F_OK) == 0) {
			atomic_store(&sh->died_in_setup, 1);
			raise(SIGKILL);
		}
	}
	return __real_xpi_boot_allgather(b, mine, len, all);
}

static int setup_kill_body(int rank, void *arg)
{
	(void)arg;
	record_rank(rank);
	xp_context_t *ctx = NULL;
	int64_t t0 = now_ns();
	int rc = xp_init(NULL, &ctx);
	double el = ms_since(t0);
	if (rank == die_rank)
		T_FAIL("rank %d: xp_init returned %d without ever having a segment", rank, rc);
	fprintf(stderr, "   rank %d: xp_init returned %d (%s) after %.0f ms: %s\n", rank, rc,
		xp_strerror(rc), el, xp_error_detail());
	T_CHECK(rc < 0 && ctx == NULL);
	T_CHECK(el < 15000);
	return 0;
}

/* Segments in /dev/shm whose creator is one of @pids (0-terminated) or, if
 * @pids is NULL, any process this test started. Prints them; returns how
 * many. */
static int our_segments(const int *pids, const char *when)
{
	DIR *d = opendir("/dev/shm");
	T_CHECK(d != NULL);
	struct dirent *e;
	int n = 0;
	while ((e = readdir(d)) != NULL) {
		int pid, rank;
		if (sscanf(e->d_name, "xport-%d-%d", &pid, &rank) != 2)
			continue;
		bool mine = false;
		if (pids == NULL)
			mine = is_ours(pid);
		for (int i = 0; pids != NULL && pids[i] != 0; i++)
			mine |= pids[i] == pid;
		if (mine) {
			fprintf(stderr, "   /dev/shm/%s is left %s\n", e->d_name, when);
			n++;
		}
	}
	closedir(d);
	return n;
}

static void test_setup_kill(void)
{
	struct job j = job_defaults;
	j.die_in_setup_rank = 1;
	j.timeout_ms = "10000";
	j.timeout_s = 60;
	atomic_store(&sh->died_in_setup, 0);
	struct mproc_result res;
	fprintf(stderr, "   (rank 1 kills itself: its signal 9 below is expected)\n");
	run_job(3, setup_kill_body, &j, &res);
	T_CHECK(atomic_load(&sh->died_in_setup) == 1);
	T_CHECK(WIFSIGNALED(res.status[1]) && WTERMSIG(res.status[1]) == SIGKILL);
	T_CHECK(WIFEXITED(res.status[0]) && WEXITSTATUS(res.status[0]) == 0);
	T_CHECK(WIFEXITED(res.status[2]) && WEXITSTATUS(res.status[2]) == 0);
	int job[4] = { atomic_load(&sh->job_pid[0]), atomic_load(&sh->job_pid[1]),
		       atomic_load(&sh->job_pid[2]), 0 };
	int survivors[3] = { job[0], job[2], 0 };

	/* The survivors have exited: what they created is gone. */
	int left_by_survivors = our_segments(survivors, "by the survivors after they exited");
	int left_by_dead = our_segments((int[]){ job[1], 0 }, "by the killed rank");
	fprintf(stderr, "   after the job: %d segments of the survivors, %d of the killed rank\n",
		left_by_survivors, left_by_dead);

	/* The next job on this host sweeps what dead processes left. */
	struct job next = job_defaults;
	T_EQ(run_job(2, sizes_body, &next, NULL), 0);
	int left = our_segments(job, "after the next job formed");
	T_EQ(left, 0);
	T_EQ(left_by_survivors, 0);
}

/* ------------------------------------------------------------------------- */
/* fallback: shared memory fails for some pairs                              */

int __real_shm_open(const char *name, int oflag, mode_t mode);
int __wrap_shm_open(const char *name, int oflag, mode_t mode);

/* In a rank: it cannot open this peer's segment (-1: none). */
static int no_open_peer = -1;

/* A rank told so finds one peer's segment forbidden, as if another user's
 * umask or a security module stood in the way: shared memory fails for
 * that one pair, on one side only. */
int __wrap_shm_open(const char *name, int oflag, mode_t mode)
{
	int pid, rank;
	if (no_open_peer >= 0 && !(oflag & O_CREAT) &&
	    sscanf(name, "/xport-%d-%d", &pid, &rank) == 2 && rank == no_open_peer) {
		errno = EACCES;
		return -1;
	}
	return __real_shm_open(name, oflag, mode);
}

enum { FALLBACK_FSIZE, FALLBACK_PAIR };

static int fallback_body(int rank, void *arg)
{
	const struct job *j = arg;
	if (j->variant == FALLBACK_PAIR && rank == 1)
		no_open_peer = 2;
	xp_context_t *ctx = start(rank);
	if (j->variant == FALLBACK_FSIZE) {
		if (rank == j->fsize_rank) {
			struct rlimit rl;
			getrlimit(RLIMIT_FSIZE, &rl);
			rl.rlim_cur = rl.rlim_max;
			T_CHECK(setrlimit(RLIMIT_FSIZE, &rl) == 0);
			expect_routes(ctx, "tcp", 0, NULL);
		} else {
			expect_routes(ctx, "shm", 1u << j->fsize_rank, "tcp");
		}
	} else {
		/* Only the pair 1-2 falls back, on both sides. */
		expect_routes(ctx, "shm", rank == 1 ? 1u << 2 : rank == 2 ? 1u << 1 : 0, "tcp");
	}
	for (uint32_t round = 1; round <= 3; round++)
		exchange_all(ctx, round);
	xp_finalize(ctx);
	return 0;
}

/* Lines of @log that @me logged with WARN about falling back to tcp for
 * peer @p (they name both ranks and tcp). */
static int fallback_warnings(const char *log, int me, int p)
{
	char who[32], mine[32], peer[32];
	snprintf(who, sizeof(who), "xport[%d] WARN", atomic_load(&sh->job_pid[me]));
	snprintf(mine, sizeof(mine), "rank %d:", me);
	snprintf(peer, sizeof(peer), "rank %d ", p);
	int n = 0;
	for (const char *line = log; *line != '\0';) {
		const char *nl = strchr(line, '\n');
		size_t l = nl != NULL ? (size_t)(nl - line) : strlen(line);
		char tmp[2048];
		snprintf(tmp, sizeof(tmp), "%.*s", (int)(l < sizeof(tmp) - 1 ? l : sizeof(tmp) - 1),
			 line);
		n += strstr(tmp, who) != NULL && strstr(tmp, mine) != NULL &&
		     strstr(tmp, peer) != NULL && strstr(tmp, "tcp") != NULL;
		line += l + (nl != NULL);
	}
	return n;
}

/* Each rank warns once about each peer it falls back to tcp for (the
 * pairs in @pairs, a bit per rank pair a*3+b), never about the others. */
static void check_fallback_warnings(const char *log, unsigned pairs)
{
	int fails = 0;
	for (int me = 0; me < 3; me++) {
		for (int p = 0; p < 3; p++) {
			if (p == me)
				continue;
			int want = (pairs >> (me * 3 + p)) & 1, got = fallback_warnings(log, me, p);
			if (got != want) {
				fprintf(stderr,
					"FAIL: rank %d logged %d warnings about falling back to "
					"tcp for rank %d, expected %d\n",
					me, got, p, want);
				fails++;
			}
		}
	}
	T_EQ(fails, 0);
}

static void test_fallback(void)
{
	struct job j = job_defaults;
	j.variant = FALLBACK_FSIZE;
	j.fsize_rank = 2;
	j.capture = true;
	fprintf(stderr, "   rank 2 cannot create its segment (RLIMIT_FSIZE 0)\n");
	T_EQ(run_job(3, fallback_body, &j, NULL), 0);
	check_fallback_warnings(j.log, 1u << (0 * 3 + 2) | 1u << (1 * 3 + 2) | 1u << (2 * 3 + 0) |
					       1u << (2 * 3 + 1));
	free(j.log);

	j = job_defaults;
	j.variant = FALLBACK_PAIR;
	j.capture = true;
	fprintf(stderr, "   rank 1 cannot open rank 2's segment (the other side can)\n");
	T_EQ(run_job(3, fallback_body, &j, NULL), 0);
	check_fallback_warnings(j.log, 1u << (1 * 3 + 2) | 1u << (2 * 3 + 1));
	free(j.log);
}

/* ------------------------------------------------------------------------- */

static const struct section {
	const char *name, *what;
	void (*fn)(void);
	bool needs_tcp;
} sections[] = {
	{ "basic", "two ranks over shared memory", test_basic, false },
	{ "flood", "thousands of messages before the receiver posts", test_flood, false },
	{ "mix", "per-pair transports: shm between some ranks, tcp with others", test_mix, true },
	{ "bogus", "XP_TRANSPORTS=bogus", test_bogus, false },
	{ "crowd", "eight ranks on few cores", test_crowd, false },
	{ "kill", "a rank killed with rendezvous sends announced (reaped at once)", test_kill,
	  false },
	{ "kill-cma", "the same, payloads read by process_vm_readv (XP_SHM_CMA_MIN)", test_kill_cma,
	  false },
	{ "kill-zombie", "the same, the killed rank not yet reaped by its launcher",
	  test_kill_zombie, false },
	{ "kill-mixed", "the same in a job where rank 2 is reached over tcp", test_kill_mixed,
	  true },
	{ "kill-poll", "the same, rank 0 polling with xp_test", test_kill_poll, false },
	{ "cma-min", "XP_SHM_CMA_MIN picks streamed or direct rendezvous", test_cma_min, false },
	{ "cma-refused", "a sender refused writes into its receiver: the receiver reads it all",
	  test_cma_refused, false },
	{ "setup-kill", "a rank killed while the job forms; leftover segments", test_setup_kill,
	  false },
	{ "fallback", "shared memory failing to set up: tcp, warned once", test_fallback, true },
};

/* Runs each section in a child of its own, so one failing section does not
 * hide the others' results; then looks for segments left behind. */
static int run_section(const struct section *s)
{
	fprintf(stderr, "-- %s: %s\n", s->name, s->what);
#ifndef XPORT_HAVE_TCP
	if (s->needs_tcp) {
		fprintf(stderr, "SKIP %s (this build has no TCP transport)\n", s->name);
		return T_SKIP;
	}
#endif
	fflush(NULL);
	int64_t t0 = now_ns();
	pid_t pid = fork();
	T_CHECK(pid >= 0);
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(300);
		s->fn();
		exit(0);
	}
	int st;
	T_CHECK(waitpid(pid, &st, 0) == pid);
	if (WIFEXITED(st) && WEXITSTATUS(st) == T_SKIP) {
		fprintf(stderr, "SKIP %s\n", s->name);
		return T_SKIP;
	}
	bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
	int left = our_segments(NULL, "after the section");
	fprintf(stderr, "%s %s (%.1f s)%s\n", ok && left == 0 ? "PASS" : "FAIL", s->name,
		ms_since(t0) / 1000, left != 0 ? ", segments left in /dev/shm" : "");
	return ok && left == 0 ? 0 : 1;
}

/* Can this host share memory between processes through /dev/shm? */
static bool host_has_shm(void)
{
	char name[64];
	snprintf(name, sizeof(name), "/test_shm_probe_%d", (int)getpid());
	int fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL, 0600);
	if (fd < 0)
		return false;
	close(fd);
	shm_unlink(name);
	return true;
}

int main(int argc, char **argv)
{
	/* The transports are chosen per job below; nothing from outside. */
	unsetenv("XP_TRANSPORTS");
	if (!host_has_shm()) {
		printf("SKIP: no /dev/shm here\n");
		return T_SKIP;
	}
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_CHECK(sh != MAP_FAILED);
	memset(sh, 0, sizeof(*sh));
	int failed = 0, skipped = 0, ran = 0;
	for (size_t i = 0; i < sizeof(sections) / sizeof(sections[0]); i++) {
		if (argc > 1 && strcmp(argv[1], sections[i].name) != 0)
			continue;
		int rc = run_section(&sections[i]);
		failed += rc == 1;
		skipped += rc == T_SKIP;
		ran++;
	}
	if (ran == 0)
		T_FAIL("no section named %s", argv[1]);
	int left = our_segments(NULL, "at the end");
	fprintf(stderr,
		"%d of %d sections failed, %d skipped; %d segments of ours left in /dev/shm\n",
		failed, ran, skipped, left);
	if (failed != 0 || left != 0)
		return 1;
	return skipped == ran ? T_SKIP : 0;
}
