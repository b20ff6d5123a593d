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
#include <errno.h>
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

/*
 * Forks one process running @fn(@idx, @arg) (its return is the exit code)
 * that dies with this one (PR_SET_PDEATHSIG) and after @timeout_s (alarm).
 * Returns its pid.
 */
static inline pid_t mproc_spawn(int (*fn)(int idx, void *arg), int idx, void *arg, int timeout_s)
{
	pid_t parent = getpid();
	fflush(NULL);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		exit(1);
	}
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != parent)
			_exit(1); /* the parent died before the line above */
		alarm((unsigned)timeout_s);
		int rc = fn(idx, arg);
		fflush(NULL);
		_exit(rc);
	}
	return pid;
}

/* Waits for @pid; returns its exit code, or 128 + the signal that killed
 * it (said on stderr with @what). */
static inline int mproc_exit_code(pid_t pid, const char *what)
{
	int st;
	while (waitpid(pid, &st, 0) < 0) {
		if (errno != EINTR) {
			perror("waitpid");
			exit(1);
		}
	}
	if (WIFSIGNALED(st)) {
		fprintf(stderr, "   %s killed by signal %d\n", what, WTERMSIG(st));
		return 128 + WTERMSIG(st);
	}
	return WEXITSTATUS(st);
}

/* Unsets every variable a launcher (or a test) may have left that says
 * what job this process is in, so a test sets exactly its own. */
static inline void mproc_clear_launcher_env(void)
{
	static const char *const vars[] = {
		"XP_RANK",
		"XP_SIZE",
		"XP_ADDR",
		"XP_JOB_KEY",
		"XP_BOOT_TIMEOUT_MS",
		"XP_SOCKET_IFNAME",
		"XP_BOOT_LISTEN_FD",
		"RANK",
		"WORLD_SIZE",
		"MASTER_ADDR",
		"MASTER_PORT",
		"OMPI_COMM_WORLD_RANK",
		"OMPI_COMM_WORLD_SIZE",
		"PMI_RANK",
		"PMI_SIZE",
		"SLURM_PROCID",
		"SLURM_NTASKS",
		"SLURM_JOB_ID",
		"SLURM_STEP_ID",
		"SLURM_STEPID",
		"SLURM_STEP_NODELIST",
		"SLURM_JOB_NODELIST",
		"SLURM_NODELIST",
	};
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

/* setenv() of a decimal number. */
static inline void mproc_setenv_int(const char *name, long v)
{
	char s[32];
	snprintf(s, sizeof(s), "%ld", v);
	setenv(name, s, 1);
}

/* A socket listening on 127.0.0.1 at a port the kernel chose; *@port is
 * that port. */
static inline int mproc_listen_loopback(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 64) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		perror("mproc_listen_loopback");
		exit(1);
	}
	*port = ntohs(a.sin_port);
	return fd;
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
