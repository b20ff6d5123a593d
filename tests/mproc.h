/* SPDX-License-Identifier: MIT */
/*
 * Runs a test body as N ranks in N processes on this host, the way a
 * launcher would: each child gets XP_RANK, XP_SIZE, XP_ADDR (a free
 * loopback port) and XP_JOB_KEY, dies with the parent (PR_SET_PDEATHSIG)
 * and after @timeout_s (alarm). The parent waits for all of them and
 * reports each failure; it never sleeps to synchronise.
 */
#ifndef XP_MPROC_H
#define XP_MPROC_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

/* A loopback port free right now (the kernel picks it). */
static inline int mproc_free_port(void)
{
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("mproc_free_port");
		exit(1);
	}
	close(fd);
	return ntohs(a.sin_port);
}

/* What each rank's process exited with: its status as waitpid gave it. */
struct mproc_result {
	int status[64];
};

/*
 * Forks @n ranks running @body(rank, @arg) (its return is the exit code).
 * @env_of, if not NULL, may setenv() extra variables per rank before the
 * body runs. Returns the number of ranks that did not exit 0; fills @res.
 */
static inline int mproc_run(int n, int (*body)(int rank, void *arg), void *arg, int timeout_s,
			    void (*env_of)(int rank, void *arg), struct mproc_result *res)
{
	char addr[64], size[16], key[40];
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", mproc_free_port());
	snprintf(size, sizeof(size), "%d", n);
	snprintf(key, sizeof(key), "test-key-%d-%ld", (int)getpid(), (long)random());
	pid_t pids[64];
	fflush(NULL);
	for (int r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] < 0) {
			perror("fork");
			exit(1);
		}
		if (pids[r] == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			alarm((unsigned)timeout_s);
			char rank[16];
			snprintf(rank, sizeof(rank), "%d", r);
			setenv("XP_RANK", rank, 1);
			setenv("XP_SIZE", size, 1);
			setenv("XP_ADDR", addr, 1);
			setenv("XP_JOB_KEY", key, 1);
			if (env_of != NULL)
				env_of(r, arg);
			_exit(body(r, arg));
		}
	}
	int bad = 0;
	for (int r = 0; r < n; r++) {
		int st;
		waitpid(pids[r], &st, 0);
		if (res != NULL)
			res->status[r] = st;
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			bad++;
			if (WIFSIGNALED(st))
				fprintf(stderr, "   rank %d killed by signal %d\n", r,
					WTERMSIG(st));
			else
				fprintf(stderr, "   rank %d exited with %d\n", r, WEXITSTATUS(st));
		}
	}
	return bad;
}

#endif
