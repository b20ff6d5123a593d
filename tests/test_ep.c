/* SPDX-License-Identifier: MIT */
/*
 * Endpoints (xport.h: xp_open, xp_listen, xp_connect, xp_accept, xp_ep_*)
 * between two processes that trade the listener's address through a pipe,
 * over TCP on loopback: every case runs the real transport, with a real
 * second process. The suite rdma runs it again in the lab VM with
 * XP_TRANSPORTS=tcp,rdma and XP_TEST_EP_LANE=rdma: every endpoint then moves to
 * soft-RoCE once connected, and each case checks that it did.
 */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mproc.h"
#include "testutil.h"

/* Every case's bound: a hang fails the test instead of stalling CI. */
#define CASE_TIMEOUT_S 60

static xp_context_t *open_ctx(void)
{
	xp_context_t *ctx;
	T_OK(xp_open(NULL, &ctx));
	return ctx;
}

/* Polls until @ep is ready or fails; returns what xp_ep_ready said last. */
static int wait_ready(xp_ep_t *ep, double limit_s)
{
	double until = t_now_s() + limit_s;
	int rc;
	while ((rc = xp_ep_ready(ep)) == -EAGAIN && t_now_s() < until)
		;
	return rc;
}

/* Which transport serves @ep, once ready: XP_TEST_EP_LANE's where the test
 * asks for one (the suite rdma: "rdma"), else tcp on a host without an
 * RDMA device (with one, either may: not checked). */
static void check_lane(xp_ep_t *ep)
{
	const char *want = getenv("XP_TEST_EP_LANE");
	if (want == NULL && access("/sys/class/infiniband", F_OK) == 0)
		return;
	if (want == NULL)
		want = "tcp";
	xp_route_t r;
	T_OK(xp_ep_route(ep, 1 << 20, &r));
	T_CONTAINS(r.transport, want);
	T_CONTAINS(r.payloads, want);
	T_CONTAINS(r.protocol, "rndv");
}

static xp_ep_t *wait_accept(xp_listener_t *l, double limit_s)
{
	double until = t_now_s() + limit_s;
	xp_ep_t *ep = NULL;
	int rc;
	while ((rc = xp_accept(l, &ep)) == -EAGAIN && t_now_s() < until)
		;
	T_OK(rc);
	return ep;
}

static void write_all(int fd, const void *buf, size_t len)
{
	T_EQ(write(fd, buf, len), (long long)len);
}

static void read_all(int fd, void *buf, size_t len)
{
	size_t got = 0;
	while (got < len) {
		ssize_t n = read(fd, (char *)buf + got, len - got);
		T_CHECK(n > 0);
		got += (size_t)n;
	}
}

static void fill(uint8_t *buf, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(seed * 31 + i * 7 + (i >> 11));
}

static int check(const uint8_t *buf, size_t len, uint32_t seed)
{
	for (size_t i = 0; i < len; i++)
		if (buf[i] != (uint8_t)(seed * 31 + i * 7 + (i >> 11)))
			return -1;
	return 0;
}

static const size_t sizes[] = { 0, 1, 8, 4096, 65536, 1 << 20, 8 << 20 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

/* Sends each size on @ep with tag = its index, then receives each back
 * from the peer (which echoes what it got), checking every byte. */
static void ping_sizes(xp_ep_t *ep, uint32_t seed)
{
	for (size_t i = 0; i < NSIZES; i++) {
		uint8_t *out = malloc(sizes[i] + 1), *in = malloc(sizes[i] + 64);
		fill(out, sizes[i], seed + (uint32_t)i);
		xp_request_t *s, *r;
		/* A receive larger than the message: the status says its length. */
		T_OK(xp_ep_irecv(ep, in, sizes[i] + 64, 1000 + i, XP_TAG_EXACT, &r));
		T_OK(xp_ep_isend(ep, out, sizes[i], i, &s));
		xp_status_t st;
		T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
		T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, &st));
		T_EQ(st.length, sizes[i]);
		T_EQ(st.tag, 1000 + i);
		T_EQ(st.source, 0);
		T_EQ(check(in, sizes[i], seed + (uint32_t)i), 0);
		free(out);
		free(in);
	}
}

/* The other side of ping_sizes. */
static void echo_sizes(xp_ep_t *ep)
{
	for (size_t i = 0; i < NSIZES; i++) {
		uint8_t *buf = malloc(sizes[i] + 1);
		xp_request_t *r, *s;
		xp_status_t st;
		T_OK(xp_ep_irecv(ep, buf, sizes[i], i, XP_TAG_EXACT, &r));
		T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, &st));
		T_EQ(st.length, sizes[i]);
		T_OK(xp_ep_isend(ep, buf, sizes[i], 1000 + i, &s));
		T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
		free(buf);
	}
}

/* --- sizes both ways, and posted-order matching ----------------------------- */

static int connector_basic(int idx, void *arg)
{
	int fd = *(int *)arg;
	(void)idx;
	xp_ep_addr_t addr;
	read_all(fd, &addr, sizeof(addr));
	xp_context_t *ctx = open_ctx();
	xp_ep_t *ep;
	T_OK(xp_connect(ctx, &addr, &ep));
	T_EQ(wait_ready(ep, 10), 0);
	check_lane(ep);
	T_CHECK(xp_ep_context(ep) == ctx);
	echo_sizes(ep);
	/* Posted order: three messages of one tag land in the receives in
	 * the order those were posted, whatever the tags in between. */
	for (uint32_t k = 0; k < 3; k++) {
		xp_request_t *s;
		T_OK(xp_ep_isend(ep, &k, sizeof(k), 7, &s));
		T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	}
	/* Then wait for the listener's goodbye: its close fails our receive. */
	uint8_t b;
	xp_request_t *r;
	T_OK(xp_ep_irecv(ep, &b, 1, 99, XP_TAG_EXACT, &r));
	int rc = xp_wait(&r, 10000, NULL);
	T_EQ(rc, -ECONNRESET);
	T_CONTAINS(xp_error_detail(), "endpoint");
	xp_ep_close(ep);
	xp_finalize(ctx);
	return 0;
}

static void test_basic(void)
{
	int p[2];
	T_OK(pipe(p));
	pid_t pid = mproc_spawn(connector_basic, 0, &p[0], CASE_TIMEOUT_S);
	xp_context_t *ctx = open_ctx();
	xp_listener_t *l;
	xp_ep_addr_t addr;
	T_OK(xp_listen(ctx, &l, &addr));
	write_all(p[1], &addr, sizeof(addr));
	xp_ep_t *ep = wait_accept(l, 10);
	T_EQ(xp_ep_ready(ep), 0);
	check_lane(ep);
	ping_sizes(ep, 5);
	uint32_t got[3] = { 9, 9, 9 };
	xp_request_t *r[3];
	for (int k = 0; k < 3; k++)
		T_OK(xp_ep_irecv(ep, &got[k], sizeof(got[k]), 7, XP_TAG_EXACT, &r[k]));
	for (int k = 0; k < 3; k++)
		T_OK(xp_wait(&r[k], XP_TIMEOUT_DEFAULT, NULL));
	for (uint32_t k = 0; k < 3; k++)
		T_EQ(got[k], k);
	xp_ep_close(ep);
	xp_listener_close(l);
	T_EQ(mproc_exit_code(pid, "connector"), 0);
	xp_finalize(ctx);
	close(p[0]);
	close(p[1]);
}

/* --- many endpoints between two processes, closed and reused ------------------ */

#define MANY 12

static int connector_many(int idx, void *arg)
{
	int fd = *(int *)arg;
	(void)idx;
	xp_ep_addr_t addr;
	read_all(fd, &addr, sizeof(addr));
	/* Fewer slots than endpoints over the run: closed ones are reused. */
	setenv("XP_EP_MAX", "4", 1);
	xp_context_t *ctx = open_ctx();
	for (int round = 0; round < 3; round++) {
		xp_ep_t *ep[4];
		/* The slots of the round before come back once their closes
		 * are done (their goodbyes sent, the kernel done with them). */
		for (int i = 0; i < 4; i++) {
			double until = t_now_s() + 5;
			int rc;
			while ((rc = xp_connect(ctx, &addr, &ep[i])) == -EMFILE &&
			       t_now_s() < until)
				xp_progress(ctx);
			T_OK(rc);
		}
		xp_ep_t *extra;
		T_EQ(xp_connect(ctx, &addr, &extra), -EMFILE);
		for (int i = 0; i < 4; i++) {
			T_EQ(wait_ready(ep[i], 10), 0);
			check_lane(ep[i]);
			uint32_t v = (uint32_t)(round * 4 + i);
			xp_request_t *s;
			T_OK(xp_ep_isend(ep[i], &v, sizeof(v), 1, &s));
			T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
		}
		/* The listener answers each with its value doubled. */
		for (int i = 0; i < 4; i++) {
			uint32_t v;
			xp_request_t *r;
			T_OK(xp_ep_irecv(ep[i], &v, sizeof(v), 2, XP_TAG_EXACT, &r));
			T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
			T_EQ(v, 2 * (round * 4 + i));
			xp_ep_close(ep[i]);
		}
	}
	xp_finalize(ctx);
	return 0;
}

static void test_many(void)
{
	int p[2];
	T_OK(pipe(p));
	pid_t pid = mproc_spawn(connector_many, 0, &p[0], CASE_TIMEOUT_S);
	xp_context_t *ctx = open_ctx();
	xp_listener_t *l;
	xp_ep_addr_t addr;
	T_OK(xp_listen(ctx, &l, &addr));
	write_all(p[1], &addr, sizeof(addr));
	/* Each endpoint's message is its own: matched on the endpoint it
	 * came on, whatever order they were accepted in. */
	int served = 0;
	double until = t_now_s() + 30;
	while (served < MANY && t_now_s() < until) {
		xp_ep_t *ep;
		int rc = xp_accept(l, &ep);
		if (rc == -EAGAIN)
			continue;
		T_OK(rc);
		check_lane(ep);
		uint32_t v;
		xp_request_t *r, *s;
		T_OK(xp_ep_irecv(ep, &v, sizeof(v), 1, XP_TAG_EXACT, &r));
		T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
		v *= 2;
		T_OK(xp_ep_isend(ep, &v, sizeof(v), 2, &s));
		T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
		/* Closed at once: what was sent still reaches the peer. */
		xp_ep_close(ep);
		served++;
	}
	T_EQ(served, MANY);
	T_EQ(mproc_exit_code(pid, "connector"), 0);
	xp_listener_close(l);
	xp_finalize(ctx);
	close(p[0]);
	close(p[1]);
}

/* --- who may connect ------------------------------------------------------------ */

static void test_refusals(void)
{
	xp_context_t *ctx = open_ctx();
	xp_listener_t *l;
	xp_ep_addr_t addr;
	T_OK(xp_listen(ctx, &l, &addr));
	/* Not an address: refused at once, saying why. */
	xp_ep_addr_t junk;
	memset(&junk, 0x5a, sizeof(junk));
	xp_ep_t *ep;
	T_EQ(xp_connect(ctx, &junk, &ep), -EINVAL);
	T_CONTAINS(xp_error_detail(), "not an xport endpoint address");
	/* The right port with the wrong secret: the listener cannot prove
	 * the key we derive, nor we its: -EACCES, and no slot is taken. */
	xp_ep_addr_t wrong = addr;
	wrong.bytes[40] ^= 1;
	T_OK(xp_connect(ctx, &wrong, &ep));
	T_EQ(wait_ready(ep, 10), -EACCES);
	xp_ep_close(ep);
	xp_ep_t *in;
	T_EQ(xp_accept(l, &in), -EAGAIN);
	/* A closed listener: refused by the host. */
	xp_listener_t *l2;
	xp_ep_addr_t gone;
	T_OK(xp_listen(ctx, &l2, &gone));
	xp_listener_close(l2);
	T_OK(xp_connect(ctx, &gone, &ep));
	T_EQ(wait_ready(ep, 10), -ECONNREFUSED);
	xp_ep_close(ep);
	/* The right address still works, in this same process. */
	xp_ep_t *out;
	T_OK(xp_connect(ctx, &addr, &out));
	in = wait_accept(l, 10);
	T_EQ(wait_ready(out, 10), 0);
	uint64_t v = 0x1122334455667788ull, w = 0;
	xp_request_t *s, *r;
	T_OK(xp_ep_irecv(in, &w, sizeof(w), 3, XP_TAG_EXACT, &r));
	T_OK(xp_ep_isend(out, &v, sizeof(v), 3, &s));
	T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(w, v);
	xp_ep_close(in);
	xp_ep_close(out);
	xp_listener_close(l);
	xp_finalize(ctx);
}

/* A listener whose context has no slot left refuses the connection: the
 * connecting side learns it at once (-ECONNREFUSED), and nothing is held. */
static void test_full(void)
{
	setenv("XP_EP_MAX", "3", 1);
	xp_context_t *ctx = open_ctx();
	unsetenv("XP_EP_MAX");
	xp_listener_t *l;
	xp_ep_addr_t addr;
	T_OK(xp_listen(ctx, &l, &addr));
	/* Connecting and accepted sides in one context: two slots. */
	xp_ep_t *out, *in;
	T_OK(xp_connect(ctx, &addr, &out));
	in = wait_accept(l, 10);
	T_EQ(wait_ready(out, 10), 0);
	/* The third slot connects; the listener has none for its side. */
	xp_ep_t *refused;
	T_OK(xp_connect(ctx, &addr, &refused));
	T_EQ(wait_ready(refused, 10), -ECONNREFUSED);
	T_CONTAINS(xp_error_detail(), "no endpoint left");
	xp_ep_t *none;
	T_EQ(xp_accept(l, &none), -EAGAIN);
	/* Once one closes, a new connection finds room again. */
	xp_ep_close(refused);
	xp_ep_close(in);
	xp_ep_close(out);
	double until = t_now_s() + 5;
	int rc;
	while ((rc = xp_connect(ctx, &addr, &out)) == -EMFILE && t_now_s() < until)
		xp_progress(ctx);
	T_OK(rc);
	in = wait_accept(l, 10);
	T_EQ(wait_ready(out, 10), 0);
	xp_ep_close(in);
	xp_ep_close(out);
	xp_listener_close(l);
	xp_finalize(ctx);
}

/* The port of an address (its TCP card: family at 9, port at 10). */
static int addr_port(const xp_ep_addr_t *a)
{
	return a->bytes[10] << 8 | a->bytes[11];
}

/* Idle strangers on the listener's port, more than the handshake deadline
 * divided into the timeout: a real connection made meanwhile is ready in
 * about the time it takes without them. */
static void test_strangers(void)
{
	xp_context_t *ctx = open_ctx();
	xp_listener_t *l;
	xp_ep_addr_t addr;
	T_OK(xp_listen(ctx, &l, &addr));
	T_EQ(addr.bytes[9], AF_INET);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(addr_port(&addr)) };
	memcpy(&sa.sin_addr, addr.bytes + 12, 4);
	/* Beyond the cap of half-open connections, too (65 here). */
	enum { NSTRANGERS = 100 };
	int fds[NSTRANGERS];
	for (int i = 0; i < NSTRANGERS; i++) {
		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		T_OK(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)));
	}
	xp_progress(ctx);
	double t0 = t_now_s();
	xp_ep_t *out;
	T_OK(xp_connect(ctx, &addr, &out));
	xp_ep_t *in = wait_accept(l, 10);
	T_EQ(wait_ready(out, 10), 0);
	double took = t_now_s() - t0;
	printf("   ready in %.3f s beside %d idle strangers\n", took, NSTRANGERS);
	T_CHECK(took < 1.0);
	for (int i = 0; i < NSTRANGERS; i++)
		close(fds[i]);
	xp_ep_close(in);
	xp_ep_close(out);
	xp_listener_close(l);
	xp_finalize(ctx);
}

/* --- a peer killed mid-transfer ------------------------------------------------- */

static int connector_killed(int idx, void *arg)
{
	int fd = *(int *)arg;
	(void)idx;
	xp_ep_addr_t addr;
	read_all(fd, &addr, sizeof(addr));
	xp_context_t *ctx = open_ctx();
	xp_ep_t *ep;
	T_OK(xp_connect(ctx, &addr, &ep));
	T_EQ(wait_ready(ep, 10), 0);
	/* Half of what the listener waits for, then nothing: the parent
	 * kills us while it waits for the rest. */
	size_t len = 64 << 20;
	uint8_t *buf = calloc(1, len);
	xp_request_t *s;
	T_OK(xp_ep_isend(ep, buf, len / 2, 1, &s));
	T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	write_all(((int *)arg)[1], "x", 1); /* the pipe's other end */
	for (;;)
		pause();
	return 0;
}

static void test_killed(void)
{
	int p[2];
	T_OK(pipe(p));
	pid_t pid = mproc_spawn(connector_killed, 0, &p[0], CASE_TIMEOUT_S);
	xp_context_t *ctx = open_ctx();
	xp_listener_t *l;
	xp_ep_addr_t addr;
	T_OK(xp_listen(ctx, &l, &addr));
	write_all(p[1], &addr, sizeof(addr));
	xp_ep_t *ep = wait_accept(l, 10);
	size_t len = 64 << 20;
	uint8_t *buf = malloc(len);
	xp_request_t *r1, *r2;
	T_OK(xp_ep_irecv(ep, buf, len / 2, 1, XP_TAG_EXACT, &r1));
	T_OK(xp_ep_irecv(ep, buf + len / 2, len / 2, 2, XP_TAG_EXACT, &r2));
	T_OK(xp_wait(&r1, XP_TIMEOUT_DEFAULT, NULL));
	char c;
	read_all(p[0], &c, 1);
	kill(pid, SIGKILL);
	double t0 = t_now_s();
	int rc = xp_wait(&r2, 20000, NULL);
	printf("   the receive failed %.3f s after the kill: %s\n", t_now_s() - t0,
	       xp_error_detail());
	T_EQ(rc, -ECONNRESET);
	T_CONTAINS(xp_error_detail(), "endpoint 0");
	T_CHECK(t_now_s() - t0 < 5);
	mproc_exit_code(pid, "connector");
	xp_ep_close(ep);
	xp_listener_close(l);
	xp_finalize(ctx);
	free(buf);
	close(p[0]);
	close(p[1]);
}

/* --- endpoints inside a job ------------------------------------------------- */

struct job_arg {
	xp_unique_id_t id;
	int pipe[2];
};

/* Rank 0 listens and rank 1 connects, as two programs would, while the
 * job's own messages go on: a wildcard receive of the job never takes an
 * endpoint's message. */
static int job_rank(int rank, void *arg)
{
	struct job_arg *a = arg;
	xp_context_t *ctx;
	T_OK(xp_init_rank(NULL, rank, 2, &a->id, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	uint32_t job_msg = 0;
	xp_request_t *wild;
	T_OK(xp_irecv(w, &job_msg, sizeof(job_msg), XP_ANY_SOURCE, 5, XP_TAG_EXACT, &wild));
	xp_ep_t *ep;
	xp_listener_t *l = NULL;
	if (rank == 0) {
		xp_ep_addr_t addr;
		T_OK(xp_listen(ctx, &l, &addr));
		write_all(a->pipe[1], &addr, sizeof(addr));
		ep = wait_accept(l, 10);
	} else {
		xp_ep_addr_t addr;
		read_all(a->pipe[0], &addr, sizeof(addr));
		T_OK(xp_connect(ctx, &addr, &ep));
		T_EQ(wait_ready(ep, 10), 0);
	}
	check_lane(ep);
	uint32_t mine = 100 + (uint32_t)rank, theirs = 0;
	xp_request_t *s, *r;
	T_OK(xp_ep_irecv(ep, &theirs, sizeof(theirs), 5, XP_TAG_EXACT, &r));
	T_OK(xp_ep_isend(ep, &mine, sizeof(mine), 5, &s));
	T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(theirs, 101 - (uint32_t)rank);
	T_EQ(xp_test(&wild, NULL), 0); /* the endpoint's message was not the job's */
	T_OK(xp_oob_barrier(ctx));     /* both have looked before either sends */
	uint32_t job_out = 200 + (uint32_t)rank;
	T_OK(xp_send(w, &job_out, sizeof(job_out), 1 - rank, 5));
	T_OK(xp_wait(&wild, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(job_msg, 201 - (uint32_t)rank);
	T_OK(xp_oob_barrier(ctx));
	xp_ep_close(ep);
	xp_listener_close(l);
	xp_finalize(ctx);
	return 0;
}

static void test_in_job(void)
{
	struct job_arg a;
	T_OK(xp_get_unique_id(&a.id));
	T_OK(pipe(a.pipe));
	pid_t pids[2];
	for (int r = 0; r < 2; r++)
		pids[r] = mproc_spawn(job_rank, r, &a, CASE_TIMEOUT_S);
	T_EQ(mproc_exit_code(pids[0], "rank 0"), 0);
	T_EQ(mproc_exit_code(pids[1], "rank 1"), 0);
	close(a.pipe[0]);
	close(a.pipe[1]);
}

int main(void)
{
	mproc_clear_launcher_env();
	setenv("XP_SOCKET_IFNAME", "lo", 1);
	T_RUN(test_basic);
	T_RUN(test_many);
	T_RUN(test_refusals);
	T_RUN(test_full);
	T_RUN(test_strangers);
	T_RUN(test_killed);
	T_RUN(test_in_job);
	return 0;
}
