/* SPDX-License-Identifier: MIT */
/*
 * Jobs of real processes over loopback, formed by xp_init from each
 * launcher's variables as that launcher sets them, or by xp_init_rank from
 * a unique id; in each, every rank sends to the next and receives from the
 * previous. One section per run (argv[1]):
 *
 *   mpirun-slurm  Open MPI's variables for 2 ranks inside a Slurm
 *                 allocation of 1 task: a job of 2, and no warning (Slurm
 *                 is the outer launcher: the normal case)
 *   slurm         srun's variables only, no XP_ADDR: the rendezvous is
 *                 derived from the step (the job id is chosen so that the
 *                 derived port is free; skipped if none is). No job key:
 *                 one warning, from rank 0, naming the address it bound
 *   key-required  XP_JOB_KEY_REQUIRED=on without a key: every rank's
 *                 xp_init fails at once with -EACCES naming the setting
 *   refused       rank 1's settings are refused: it joins with the job's
 *                 key only to leave, so rank 0 fails at once naming it,
 *                 and nobody warns about the key
 *   torchrun      torchrun's variables while the test holds MASTER_PORT, as
 *                 the agent's TCPStore does: xport uses MASTER_PORT + 1 and
 *                 never touches the store
 *   uid           rank 0 makes the id and pipes its 128 bytes to the others
 *                 (misleading launcher variables around are ignored)
 *   uid-bad       damaged ids and bad arguments: -EINVAL naming the problem
 *   uid-other     the maker of the id is rank 1; rank 0, another process,
 *                 binds the id's port itself
 *   uid-strangers as uid, with 100 idle connections to the id's socket
 *                 opened before any rank starts: the job forms at once
 *
 * Where rank 0 binds a port itself, a port taken in between makes it exit
 * with EXIT_RETRY and the job runs again on another. Children die with the
 * test and after an alarm; nothing waits on sleep.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "job/launcher.h"
#include "job/unique_id.h"
#include "mproc.h"
#include "testutil.h"

#define CHILD_ALARM_S 60
#define EXIT_RETRY 75
#define MAX_RANKS 4

static void child_env(void)
{
	mproc_clear_launcher_env();
	setenv("XP_BOOT_TIMEOUT_MS", "20000", 1);
}

/* Can a socket bind @port on @ip right now (as rank 0 will)? */
static bool port_free(uint32_t ip, int port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(ip),
				 .sin_port = htons((uint16_t)port) };
	int one = 1, fd = socket(AF_INET, SOCK_STREAM, 0);
	T_CHECK(fd >= 0);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	bool ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
	close(fd);
	return ok;
}

/* Every rank sends to the next and receives from the previous; then
 * finalizes. */
static int ring(xp_context_t *ctx, int want_size)
{
	int r = xp_rank(ctx), n = xp_size(ctx);
	xp_comm_t *w = xp_comm_world(ctx);
	char out[64], in[64] = "", want[64];
	xp_request_t *rq;
	xp_status_t st;
	T_EQ(n, want_size);
	snprintf(out, sizeof(out), "hello from rank %d", r);
	T_OK(xp_isend(w, out, strlen(out) + 1, (r + 1) % n, 7, &rq));
	T_OK(xp_recv(w, in, sizeof(in), (r + n - 1) % n, 7, XP_TAG_EXACT, &st));
	T_OK(xp_wait(&rq, XP_TIMEOUT_DEFAULT, NULL));
	snprintf(want, sizeof(want), "hello from rank %d", (r + n - 1) % n);
	if (strcmp(in, want) != 0)
		T_FAIL("rank %d got \"%s\", expected \"%s\"", r, in, want);
	xp_finalize(ctx);
	return 0;
}

/* xp_init, then the ring; rank 0 exits EXIT_RETRY if its port was taken. */
static int init_and_ring(int rank, int size)
{
	xp_context_t *ctx;
	int rc = xp_init(NULL, &ctx);
	if (rank == 0 && rc == -EADDRINUSE)
		return EXIT_RETRY;
	if (rc < 0)
		T_FAIL("rank %d: xp_init: %s: %s", rank, xp_strerror(rc), xp_error_detail());
	T_EQ(xp_rank(ctx), rank);
	return ring(ctx, size);
}

struct job {
	int n;
	int port, lfd;
	long job_id;
	int log_fd; /* every rank's stderr, or -1 */
	int (*rank_main)(int rank, void *arg);
	xp_unique_id_t id;
	int id_pipe[MAX_RANKS][2];
	int strangers; /* idle connections rank 0 opens to the id's socket */
};

/* Runs @j's ranks and returns 0 when all exited 0, EXIT_RETRY when rank 0
 * asked for another port (the others are killed), or fails. */
static int run_ranks(struct job *j)
{
	pid_t pids[MAX_RANKS];
	for (int r = j->n - 1; r >= 0; r--)
		pids[r] = mproc_spawn(j->rank_main, r, j, CHILD_ALARM_S);
	int rc0 = mproc_exit_code(pids[0], "rank 0");
	if (rc0 == EXIT_RETRY) {
		for (int r = 1; r < j->n; r++) {
			kill(pids[r], SIGKILL);
			mproc_exit_code(pids[r], "a rank of an abandoned job");
		}
		return EXIT_RETRY;
	}
	int bad = rc0 != 0;
	for (int r = 1; r < j->n; r++) {
		char what[32];
		snprintf(what, sizeof(what), "rank %d", r);
		int rc = mproc_exit_code(pids[r], what);
		if (rc != 0)
			fprintf(stderr, "   rank %d exited with %d\n", r, rc);
		bad += rc != 0;
	}
	if (bad)
		T_FAIL("%d rank(s) failed (rank 0: %d)", bad, rc0);
	return 0;
}

/* What the ranks wrote to the shared log. */
static void read_log(int fd, char *text, size_t n)
{
	ssize_t k = pread(fd, text, n - 1, 0);
	text[k > 0 ? (size_t)k : 0] = '\0';
	fprintf(stderr, "   the ranks said:\n%s", text);
}

/* ---------------------------------------------------------------------- */

/* What every rank of @j gets: the test's environment, stderr to the log,
 * rank 0 the listening socket, and XP_ADDR 127.0.0.1:@j->port. */
static void rank_env(struct job *j, int rank)
{
	char addr[64];
	child_env();
	dup2(j->log_fd, STDERR_FILENO);
	if (rank == 0)
		mproc_setenv_int("XP_BOOT_LISTEN_FD", j->lfd);
	else
		close(j->lfd);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", j->port);
	setenv("XP_ADDR", addr, 1);
}

/* How many times @needle occurs in @text. */
static int count_of(const char *text, const char *needle)
{
	int n = 0;
	for (const char *p = strstr(text, needle); p != NULL; p = strstr(p + 1, needle))
		n++;
	return n;
}

static int mpirun_slurm_rank(int rank, void *arg)
{
	struct job *j = arg;
	rank_env(j, rank);
	/* mpirun's, inside an allocation salloc -n 1 made. */
	mproc_setenv_int("OMPI_COMM_WORLD_RANK", rank);
	mproc_setenv_int("OMPI_COMM_WORLD_SIZE", j->n);
	mproc_setenv_int("OMPI_COMM_WORLD_LOCAL_RANK", rank);
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_NTASKS", "1", 1);
	setenv("SLURM_JOB_ID", "4242", 1);
	setenv("SLURM_JOB_NODELIST", "localhost", 1);
	setenv("XP_JOB_KEY", "mpirun-in-slurm", 1);
	return init_and_ring(rank, j->n);
}

static int test_mpirun_slurm(void)
{
	struct job j = { .n = 2, .rank_main = mpirun_slurm_rank };
	FILE *log = tmpfile();
	T_CHECK(log != NULL);
	j.log_fd = fileno(log);
	j.lfd = mproc_listen_loopback(&j.port);
	T_EQ(run_ranks(&j), 0);
	char text[16384];
	read_log(j.log_fd, text, sizeof(text));
	/* mpirun inside an allocation is the normal case: no warning. */
	T_EQ(count_of(text, "launchers disagree"), 0);
	fclose(log);
	return 0;
}

/* ---------------------------------------------------------------------- */

#define SLURM_STEP 3

static int slurm_rank(int rank, void *arg)
{
	struct job *j = arg;
	char n[16];
	child_env();
	snprintf(n, sizeof(n), "%d", j->n);
	/* As srun -n N sets them for one node (no XP_ADDR, no job key). */
	mproc_setenv_int("SLURM_JOB_ID", j->job_id);
	mproc_setenv_int("SLURM_JOBID", j->job_id);
	mproc_setenv_int("SLURM_STEP_ID", SLURM_STEP);
	mproc_setenv_int("SLURM_STEPID", SLURM_STEP);
	mproc_setenv_int("SLURM_PROCID", rank);
	mproc_setenv_int("SLURM_LOCALID", rank);
	setenv("SLURM_NODEID", "0", 1);
	setenv("SLURM_NTASKS", n, 1);
	setenv("SLURM_NPROCS", n, 1);
	setenv("SLURM_STEP_NUM_TASKS", n, 1);
	setenv("SLURM_STEP_NUM_NODES", "1", 1);
	setenv("SLURM_NNODES", "1", 1);
	setenv("SLURM_STEP_TASKS_PER_NODE", n, 1);
	setenv("SLURM_STEP_NODELIST", "localhost", 1);
	setenv("SLURM_JOB_NODELIST", "localhost", 1);
	setenv("SLURM_NODELIST", "localhost", 1);
	setenv("SLURMD_NODENAME", "localhost", 1);
	dup2(j->log_fd, STDERR_FILENO);
	return init_and_ring(rank, j->n);
}

static int test_slurm(void)
{
	struct job j = { .n = 4, .rank_main = slurm_rank };
	FILE *log = tmpfile();
	T_CHECK(log != NULL);
	j.log_fd = fileno(log);
	/* A job id (near this pid, so parallel runs differ) whose derived
	 * port is free; rank 0 binds it on the wildcard address ("localhost"
	 * is a name). */
	long base = 100000 + getpid() % 100000;
	for (long id = base, tries = 0; tries < 40; id++, tries++) {
		int port = xpi_slurm_port((unsigned long)id, SLURM_STEP);
		if (!port_free(INADDR_ANY, port)) {
			fprintf(stderr, "   job %ld: port %d is taken: another id\n", id, port);
			continue;
		}
		j.job_id = id;
		fprintf(stderr, "   SLURM_JOB_ID=%ld SLURM_STEP_ID=%d: port %d\n", id, SLURM_STEP,
			port);
		if (run_ranks(&j) != 0) {
			fprintf(stderr, "   port %d was taken meanwhile: another id\n", port);
			T_CHECK(ftruncate(j.log_fd, 0) == 0);
			continue;
		}
		/* srun sets no key: one line says so, from rank 0, naming the
		 * address it bound ("localhost" is a name: the wildcard). */
		char text[16384], where[48];
		read_log(j.log_fd, text, sizeof(text));
		T_EQ(count_of(text, "XP_JOB_KEY is not set"), 1);
		T_CONTAINS(text, "rank 0: XP_JOB_KEY is not set");
		snprintf(where, sizeof(where), "reaches 0.0.0.0:%d can join", port);
		T_CONTAINS(text, where);
		fclose(log);
		return 0;
	}
	fprintf(stderr, "   no free port among the derived ones: skipped\n");
	return T_SKIP;
}

/* ---------------------------------------------------------------------- */

/* XP_* variables for rank @rank of @j on 127.0.0.1:@j->port, no key. */
static void xp_env(struct job *j, int rank)
{
	rank_env(j, rank);
	mproc_setenv_int("XP_RANK", rank);
	mproc_setenv_int("XP_SIZE", j->n);
}

static int key_required_rank(int rank, void *arg)
{
	struct job *j = arg;
	xp_env(j, rank);
	setenv("XP_JOB_KEY_REQUIRED", "on", 1);
	xp_context_t *ctx = NULL;
	double t0 = t_now_s();
	T_EQ(xp_init(NULL, &ctx), -EACCES);
	T_CHECK(t_now_s() - t0 < 5.0); /* at once, not at the 20 s boot timeout */
	T_CONTAINS(xp_error_detail(), "XP_JOB_KEY_REQUIRED");
	return 0;
}

/* Runs a 2-rank job of @rank_main on XP_* variables; what every rank
 * wrote to stderr goes to @text. */
static void run_logged(int (*rank_main)(int, void *), char *text, size_t n)
{
	struct job j = { .n = 2, .rank_main = rank_main };
	FILE *log = tmpfile();
	T_CHECK(log != NULL);
	j.log_fd = fileno(log);
	j.lfd = mproc_listen_loopback(&j.port);
	T_EQ(run_ranks(&j), 0);
	read_log(j.log_fd, text, n);
	fclose(log);
}

static int test_key_required(void)
{
	char text[16384];
	run_logged(key_required_rank, text, sizeof(text));
	T_EQ(count_of(text, "not protected"), 0); /* an error, not the warning */
	return 0;
}

static int refused_rank(int rank, void *arg)
{
	struct job j_copy = *(struct job *)arg;
	xp_env(&j_copy, rank);
	setenv("XP_JOB_KEY", "refused-settings", 1);
	if (rank == 1)
		setenv("XP_TIMEOUT_MS", "soon", 1);
	xp_context_t *ctx = NULL;
	double t0 = t_now_s();
	int rc = xp_init(NULL, &ctx);
	fprintf(stderr, "   rank %d: %d after %.2f s: %s\n", rank, rc, t_now_s() - t0,
		xp_error_detail());
	T_CHECK(t_now_s() - t0 < 5.0); /* rank 0 learns at once that rank 1 left */
	if (rank == 1) {
		T_EQ(rc, -EINVAL);
		T_CONTAINS(xp_error_detail(), "XP_TIMEOUT_MS");
	} else {
		T_CHECK(rc < 0);
		T_CONTAINS(xp_error_detail(), "rank 1");
	}
	return 0;
}

static int test_refused(void)
{
	char text[16384];
	run_logged(refused_rank, text, sizeof(text));
	T_EQ(count_of(text, "XP_JOB_KEY"), 0);
	T_EQ(count_of(text, "wrong job key"), 0);
	return 0;
}

/* ---------------------------------------------------------------------- */

static int torchrun_rank(int rank, void *arg)
{
	struct job *j = arg;
	child_env();
	close(j->lfd); /* the store is the agent's, not the ranks' */
	mproc_setenv_int("RANK", rank);
	mproc_setenv_int("LOCAL_RANK", rank);
	mproc_setenv_int("GROUP_RANK", 0);
	mproc_setenv_int("ROLE_RANK", rank);
	mproc_setenv_int("WORLD_SIZE", j->n);
	mproc_setenv_int("LOCAL_WORLD_SIZE", j->n);
	mproc_setenv_int("ROLE_WORLD_SIZE", j->n);
	setenv("MASTER_ADDR", "127.0.0.1", 1);
	mproc_setenv_int("MASTER_PORT", j->port);
	setenv("TORCHELASTIC_RUN_ID", "xport-test", 1);
	setenv("TORCHELASTIC_RESTART_COUNT", "0", 1);
	return init_and_ring(rank, j->n);
}

static int test_torchrun(void)
{
	struct job j = { .n = 3, .rank_main = torchrun_rank, .log_fd = -1 };
	for (int tries = 0; tries < 20; tries++) {
		/* The agent's store on MASTER_PORT, held throughout. */
		j.lfd = mproc_listen_loopback(&j.port);
		if (j.port == 65535 || !port_free(INADDR_LOOPBACK, j.port + 1)) {
			close(j.lfd);
			continue;
		}
		fprintf(stderr, "   store on MASTER_PORT=%d, xport on %d\n", j.port, j.port + 1);
		int rc = run_ranks(&j);
		if (rc == EXIT_RETRY) {
			close(j.lfd);
			continue;
		}
		/* Nobody knocked at the store. */
		int fl = fcntl(j.lfd, F_GETFL);
		T_CHECK(fcntl(j.lfd, F_SETFL, fl | O_NONBLOCK) == 0);
		int c = accept(j.lfd, NULL, NULL);
		T_CHECK(c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
		close(j.lfd);
		return 0;
	}
	fprintf(stderr, "   no two free consecutive ports: skipped\n");
	return T_SKIP;
}

/* ---------------------------------------------------------------------- */

static void send_id(struct job *j, int to)
{
	ssize_t k = write(j->id_pipe[to][1], &j->id, sizeof(j->id));
	T_EQ(k, sizeof(j->id));
}

static void recv_id(struct job *j, int me)
{
	size_t got = 0;
	while (got < sizeof(j->id)) {
		ssize_t k = read(j->id_pipe[me][0], j->id.bytes + got, sizeof(j->id) - got);
		if (k <= 0)
			T_FAIL("rank %d: the id pipe closed after %zu bytes", me, got);
		got += (size_t)k;
	}
}

static int init_rank_and_ring(struct job *j, int rank)
{
	xp_context_t *ctx;
	/* Launcher variables that would say otherwise are ignored. */
	setenv("XP_RANK", "0", 1);
	setenv("XP_SIZE", "1", 1);
	setenv("SLURM_PROCID", "0", 1);
	setenv("SLURM_NTASKS", "9", 1);
	setenv("XP_JOB_KEY", "not-the-id's", 1);
	int rc = xp_init_rank(NULL, rank, j->n, &j->id, &ctx);
	if (rc < 0)
		T_FAIL("rank %d: xp_init_rank: %s: %s", rank, xp_strerror(rc), xp_error_detail());
	T_EQ(xp_rank(ctx), rank);
	return ring(ctx, j->n);
}

/* Opens @n connections to the socket the id names that say nothing (and
 * are never closed: they die with the process). */
static void open_idle_to_id(const xp_unique_id_t *id, int n)
{
	struct xpi_uid u;
	const char *why = "";
	T_EQ(xpi_uid_parse(id->bytes, sizeof(id->bytes), &u, &why), 0);
	T_EQ(u.family, AF_INET);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(u.port) };
	memcpy(&a.sin_addr, u.addr, 4);
	for (int i = 0; i < n; i++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		T_CHECK(fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0);
	}
}

static int uid_rank(int rank, void *arg)
{
	struct job *j = arg;
	child_env();
	if (rank == 0) {
		T_OK(xp_get_unique_id(&j->id));
		open_idle_to_id(&j->id, j->strangers);
		for (int r = 1; r < j->n; r++)
			send_id(j, r);
	} else {
		recv_id(j, rank);
	}
	double t0 = t_now_s();
	int rc = init_rank_and_ring(j, rank);
	/* Idle strangers hold nothing up: handshakes run at once, and each
	 * stranger's own deadline is 3 s. */
	if (j->strangers > 0)
		T_CHECK(t_now_s() - t0 < 2.5);
	return rc;
}

static void open_pipes(struct job *j)
{
	for (int r = 0; r < j->n; r++)
		T_CHECK(pipe(j->id_pipe[r]) == 0);
}

static int test_uid(void)
{
	struct job j = { .n = 3, .rank_main = uid_rank, .log_fd = -1 };
	open_pipes(&j);
	T_EQ(run_ranks(&j), 0);
	return 0;
}

static int test_uid_strangers(void)
{
	struct job j = { .n = 3, .rank_main = uid_rank, .log_fd = -1, .strangers = 100 };
	open_pipes(&j);
	T_EQ(run_ranks(&j), 0);
	return 0;
}

/* The maker is rank 1; the parent passes the id on to ranks 0 and 2. */
static int uid_maker(int rank, void *arg)
{
	struct job *j = arg;
	child_env();
	T_OK(xp_get_unique_id(&j->id));
	send_id(j, 0);
	return init_rank_and_ring(j, rank);
}

static int uid_other_rank(int rank, void *arg)
{
	child_env();
	return init_rank_and_ring(arg, rank);
}

static int test_uid_other(void)
{
	struct job j = { .n = 3, .rank_main = uid_other_rank, .log_fd = -1 };
	open_pipes(&j);
	pid_t maker = mproc_spawn(uid_maker, 1, &j, CHILD_ALARM_S);
	recv_id(&j, 0);
	pid_t p0 = mproc_spawn(uid_other_rank, 0, &j, CHILD_ALARM_S);
	pid_t p2 = mproc_spawn(uid_other_rank, 2, &j, CHILD_ALARM_S);
	int rc0 = mproc_exit_code(p0, "rank 0"), rc1 = mproc_exit_code(maker, "rank 1 (maker)"),
	    rc2 = mproc_exit_code(p2, "rank 2");
	if (rc0 != 0 || rc1 != 0 || rc2 != 0)
		T_FAIL("exit codes: rank 0 %d, rank 1 (maker) %d, rank 2 %d", rc0, rc1, rc2);
	return 0;
}

/* ---------------------------------------------------------------------- */

static void expect_bad_id(const xp_unique_id_t *id, int rank, int size, const char *needle)
{
	xp_context_t *ctx = NULL;
	T_EQ(xp_init_rank(NULL, rank, size, id, &ctx), -EINVAL);
	T_CHECK(ctx == NULL);
	fprintf(stderr, "   detail: %s\n", xp_error_detail());
	T_CONTAINS(xp_error_detail(), needle);
}

static int test_uid_bad(void)
{
	xp_unique_id_t id, bad;
	xp_context_t *ctx = NULL;
	child_env();
	T_EQ(xp_get_unique_id(NULL), -EINVAL);
	T_OK(xp_get_unique_id(&id));

	bad = id;
	bad.bytes[40] ^= 0x10; /* a key byte */
	expect_bad_id(&bad, 1, 2, "checksum");
	bad = id;
	bad.bytes[0] = 'Q';
	expect_bad_id(&bad, 1, 2, "magic");
	bad = id;
	bad.bytes[5] = 9;
	expect_bad_id(&bad, 1, 2, "version");
	memset(&bad, 0, sizeof(bad));
	expect_bad_id(&bad, 0, 2, "unique id");
	expect_bad_id(&id, 2, 2, "rank 2 of a job of 2");
	expect_bad_id(&id, -1, 2, "rank -1");
	expect_bad_id(&id, 0, 0, "job of 0");
	expect_bad_id(NULL, 1, 2, "no unique id");
	T_EQ(xp_init_rank(NULL, 0, 2, &id, NULL), -EINVAL);

	/* A job of one needs no id; with one, its socket is let go. */
	T_OK(xp_init_rank(NULL, 0, 1, NULL, &ctx));
	T_EQ(xp_size(ctx), 1);
	xp_finalize(ctx);
	struct xpi_uid u;
	const char *why = "";
	T_EQ(xpi_uid_parse(id.bytes, sizeof(id.bytes), &u, &why), 0);
	T_CHECK(!port_free(INADDR_ANY, u.port) || u.family != AF_INET); /* held */
	T_OK(xp_init_rank(NULL, 0, 1, &id, &ctx));
	T_EQ(xp_size(ctx), 1);
	xp_finalize(ctx);
	if (u.family == AF_INET) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons(u.port) };
		memcpy(&a.sin_addr, u.addr, 4);
		int fd = socket(AF_INET, SOCK_STREAM, 0);
		T_CHECK(fd >= 0);
		T_CHECK(bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0); /* free now */
		close(fd);
	}
	return 0;
}

int main(int argc, char **argv)
{
	static const struct {
		const char *name;
		int (*fn)(void);
	} sections[] = {
		{ "mpirun-slurm", test_mpirun_slurm },
		{ "slurm", test_slurm },
		{ "torchrun", test_torchrun },
		{ "uid", test_uid },
		{ "uid-bad", test_uid_bad },
		{ "uid-other", test_uid_other },
		{ "key-required", test_key_required },
		{ "refused", test_refused },
		{ "uid-strangers", test_uid_strangers },
	};
	signal(SIGPIPE, SIG_IGN);
	for (size_t i = 0; argc == 2 && i < sizeof(sections) / sizeof(sections[0]); i++) {
		if (strcmp(argv[1], sections[i].name) == 0) {
			fprintf(stderr, "-- %s\n", argv[1]);
			return sections[i].fn();
		}
	}
	fprintf(stderr,
		"usage: %s mpirun-slurm|slurm|torchrun|uid|uid-bad|uid-other|key-required|refused|uid-strangers\n",
		argv[0]);
	return 1;
}
