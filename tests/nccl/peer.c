/* SPDX-License-Identifier: MIT */
/*
 * The other process: a child forked before the plugin is loaded, and two
 * pipes for what NCCL's bootstrap would carry (listen handles, "ready"
 * points). Reads poll with a deadline, so a peer that stops answering
 * fails the test instead of hanging it; the child dies with the parent
 * and after its alarm.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>

#include "harness.h"

void h_peer_fork(struct h_peer *p, int (*child)(struct h_peer *), int timeout_s)
{
	int down[2], up[2];
	if (pipe(down) != 0 || pipe(up) != 0)
		H_FAIL("pipe: %s", strerror(errno));
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0)
		H_FAIL("fork: %s", strerror(errno));
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1); /* the parent died before the line above */
		alarm((unsigned)timeout_s);
		h_who = "child";
		close(down[1]);
		close(up[0]);
		*p = (struct h_peer){ .in = down[0], .out = up[1], .pid = 0, .role = 1 };
		int rc = child(p);
		fflush(NULL);
		_exit(rc);
	}
	close(down[0]);
	close(up[1]);
	*p = (struct h_peer){ .in = up[0], .out = down[1], .pid = pid, .role = 0 };
}

void h_peer_send(struct h_peer *p, const void *buf, size_t len)
{
	/* At most PIPE_BUF: one write, never split or interleaved. */
	H_CHECK(len <= 256);
	ssize_t w;
	do
		w = write(p->out, buf, len);
	while (w < 0 && errno == EINTR);
	if (w != (ssize_t)len)
		H_FAIL("write to the peer: %s", w < 0 ? strerror(errno) : "short");
}

void h_peer_recv(struct h_peer *p, void *buf, size_t len, double timeout_s)
{
	double end = h_now() + timeout_s;
	size_t got = 0;
	while (got < len) {
		double left = end - h_now();
		if (left <= 0)
			H_FAIL("the peer sent nothing for %.0f s", timeout_s);
		struct pollfd pfd = { .fd = p->in, .events = POLLIN };
		int n = poll(&pfd, 1, (int)(left * 1000) + 1);
		if (n < 0 && errno != EINTR)
			H_FAIL("poll: %s", strerror(errno));
		if (n <= 0)
			continue;
		ssize_t r = read(p->in, (char *)buf + got, len - got);
		if (r == 0)
			H_FAIL("the peer closed its pipe (it failed or died)");
		if (r < 0 && errno != EINTR)
			H_FAIL("read from the peer: %s", strerror(errno));
		if (r > 0)
			got += (size_t)r;
	}
}

void h_peer_barrier(struct h_peer *p, double timeout_s)
{
	char c = 'b', d = 0;
	h_peer_send(p, &c, 1);
	h_peer_recv(p, &d, 1, timeout_s);
	H_EQ(d, 'b');
}

int h_peer_join(struct h_peer *p)
{
	int st;
	while (waitpid(p->pid, &st, 0) < 0)
		if (errno != EINTR)
			H_FAIL("waitpid: %s", strerror(errno));
	close(p->in);
	close(p->out);
	return WIFSIGNALED(st) ? 128 + WTERMSIG(st) : WEXITSTATUS(st);
}
