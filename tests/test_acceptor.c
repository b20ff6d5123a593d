/* SPDX-License-Identifier: MIT */
/*
 * The acceptor (src/job/acceptor.c) that rank 0's rendezvous listener and
 * the TCP transport's listener share, set up as the TCP transport sets it
 * up (rank 3 of 4, a one-byte channel after each connector's proof):
 *
 *   - 100 idle connections, 8 that send a right hello and then stall, and
 *     2 with another key, all made before the real ranks connect: the real
 *     ranks' connections come out in well under one handshake deadline,
 *     with their ranks and channels, and the strangers are refused (the
 *     oldest dropped beyond the cap, the rest at their deadline);
 *   - nobody connects: -ETIMEDOUT at the deadline.
 *
 * Real ranks are child processes running the blocking handshake; children
 * die with the test and after an alarm.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "job/acceptor.h"
#include "job/auth.h"
#include "job/sock.h"
#include "mproc.h"
#include "testutil.h"

#define SIZE 4
#define ME 3
#define IDLE 100
#define STALLED 8
#define WRONG_KEY 2
#define BIND "T-the-job"

static uint8_t key[XPI_AUTH_KEY_LEN], other_key[XPI_AUTH_KEY_LEN];

static int connect_to(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				  .sin_port = htons((uint16_t)port) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	T_CHECK(fd >= 0);
	T_CHECK(connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
	return fd;
}

/* A rank (@rank, key @k) connecting on channel @ch. Exits 0 if its
 * handshake succeeded against rank ME, or the negated error. */
static pid_t connector(int port, int rank, const uint8_t *k, uint8_t ch)
{
	fflush(NULL);
	pid_t pid = fork();
	T_CHECK(pid >= 0);
	if (pid > 0)
		return pid;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	alarm(30);
	int fd = connect_to(port), peer = -1;
	struct xpi_auth_args a = { .key = k,
				   .my_rank = rank,
				   .size = SIZE,
				   .bind = { (const uint8_t *)BIND, strlen(BIND) },
				   .send = &ch,
				   .send_len = 1 };
	int rc = xpi_auth_handshake(fd, &a, 10000, &peer, NULL);
	_exit(rc == 0 ? (peer == ME ? 0 : 200) : -rc);
}

/* A stranger that sends a right hello (rank 0 of SIZE) and then nothing:
 * its handshake stalls at the proof. */
static int stalled_hello(int port)
{
	int fd = connect_to(port);
	struct xpi_auth_hello h = { .version = XPI_AUTH_VERSION, .rank = 0, .size = SIZE };
	uint8_t buf[XPI_AUTH_HELLO_LEN];
	xpi_auth_hello_write(&h, buf);
	T_EQ(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	return fd;
}

static int exit_code(pid_t pid)
{
	int st;
	T_CHECK(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1000 + WTERMSIG(st);
}

static struct xpi_acceptor *make(int lfd, int handshake_ms)
{
	struct xpi_acceptor_opts o = {
		.lfd = lfd,
		.auth = { .key = key,
			  .my_rank = ME,
			  .size = SIZE,
			  .bind = { (const uint8_t *)BIND, strlen(BIND) },
			  .recv_len = 1 },
		.handshake_ms = handshake_ms,
		.max_pending = 6 + 64, /* as TCP: two per lower rank, and the slack */
		.who = "rank 3",
	};
	struct xpi_acceptor *a = NULL;
	T_OK(xpi_acceptor_create(&o, &a));
	return a;
}

static void test_strangers(void)
{
	int port, lfd = mproc_listen_loopback(&port);
	T_CHECK(listen(lfd, 512) == 0);
	T_CHECK(fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK) == 0);
	int idle[IDLE], stalled[STALLED];
	for (int i = 0; i < IDLE; i++)
		idle[i] = connect_to(port);
	for (int i = 0; i < STALLED; i++)
		stalled[i] = stalled_hello(port);
	pid_t wrong[WRONG_KEY], real[3];
	for (int i = 0; i < WRONG_KEY; i++)
		wrong[i] = connector(port, 1, other_key, 0);
	/* Wait until the strangers with another key are in the backlog, so
	 * the real ranks queue behind every stranger. */
	usleep(100 * 1000);
	for (int r = 0; r < 3; r++)
		real[r] = connector(port, r, key, (uint8_t)(r % 2));

	struct xpi_acceptor *a = make(lfd, 3000);
	double t0 = t_now_s();
	int seen[3] = { 0 };
	for (int k = 0; k < 3; k++) {
		int fd = -1, peer = -1;
		uint8_t ch = 0xff;
		T_OK(xpi_acceptor_next(a, xpi_deadline_in(10000), &fd, &peer, &ch));
		T_CHECK(peer >= 0 && peer < 3);
		T_EQ(ch, (uint8_t)(peer % 2));
		/* Small control messages answered at once: no Nagle (without
		 * it every bootstrap operation waited for a delayed ACK). */
		int nodelay = 0;
		socklen_t len = sizeof(nodelay);
		T_CHECK(getsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &nodelay, &len) == 0 && nodelay);
		seen[peer]++;
		close(fd);
	}
	double took = t_now_s() - t0;
	fprintf(stderr, "   3 ranks authenticated in %.3f s behind %d strangers; %lu refused\n",
		took, IDLE + STALLED + WRONG_KEY, xpi_acceptor_refused(a));
	T_CHECK(seen[0] == 1 && seen[1] == 1 && seen[2] == 1);
	T_CHECK(took < 1.5); /* half the deadline any stranger holds */
	/* 110 strangers, at most 70 pending: the oldest were dropped. */
	T_CHECK(xpi_acceptor_refused(a) >= IDLE + STALLED + WRONG_KEY - 70);
	for (int r = 0; r < 3; r++)
		T_EQ(exit_code(real[r]), 0);
	for (int i = 0; i < WRONG_KEY; i++)
		T_EQ(exit_code(wrong[i]), EACCES);
	xpi_acceptor_destroy(a);
	for (int i = 0; i < IDLE; i++)
		close(idle[i]);
	for (int i = 0; i < STALLED; i++)
		close(stalled[i]);
	close(lfd);
}

static void test_deadline(void)
{
	int port, lfd = mproc_listen_loopback(&port);
	T_CHECK(fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK) == 0);
	int idle = connect_to(port);
	struct xpi_acceptor *a = make(lfd, 100);
	int fd, peer;
	double t0 = t_now_s();
	T_EQ(xpi_acceptor_next(a, xpi_deadline_in(300), &fd, &peer, NULL), -ETIMEDOUT);
	double took = t_now_s() - t0;
	T_CHECK(took >= 0.29 && took < 3.0);
	T_EQ(xpi_acceptor_refused(a), 1); /* the idle one, at its own 100 ms */
	xpi_acceptor_destroy(a);
	xpi_acceptor_destroy(NULL);
	close(idle);
	close(lfd);
}

int main(void)
{
	signal(SIGPIPE, SIG_IGN);
	T_OK(xpi_auth_key_from_string("the key", key));
	T_OK(xpi_auth_key_from_string("another key", other_key));
	T_RUN(test_strangers);
	T_RUN(test_deadline);
	return 0;
}
