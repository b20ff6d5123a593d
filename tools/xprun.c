/* SPDX-License-Identifier: MIT */
/*
 * xprun: starts the ranks of an xport job on this host.
 *
 *   xprun -n N [--key K] [--prefix | --no-prefix] [--output-filename DIR]
 *         [--] program [args...]
 *
 * -np N is the same as -n N, as mpirun users type it.
 *
 * Each rank gets XP_RANK, XP_SIZE, XP_ADDR=127.0.0.1:<port> and XP_JOB_KEY
 * (64 random hex digits, 256 bits, or K). xprun binds the rendezvous port itself
 * before starting anyone and hands the socket to rank 0
 * (XP_BOOT_LISTEN_FD, see src/job/bootstrap.h): no race for a free port,
 * and ranks that connect before rank 0 runs wait in its backlog. Each rank
 * also gets XPRUN_STDOUT_TTY and XPRUN_STDERR_TTY ("1" when xprun's own
 * stdout or stderr is a terminal, else "0": the rank's are pipes either
 * way, so a program that shows progress only on a terminal can ask these
 * instead), XPRUN_COMMAND (xprun's command line, shell-quoted, for
 * programs that record how they were run) and XPRUN_STATUS_FD (below).
 *
 * Output: every line a rank writes to stdout or stderr comes out on xprun's
 * stdout or stderr, as it arrives and in one write, so lines of different
 * ranks never mix. Prefixes "[rank] ": stderr lines get one by default
 * (diagnostics want attribution); stdout lines only when xprun's stdout is
 * a terminal, so that data in pipelines and files comes out exactly as the
 * ranks wrote it (`xprun -n 2 xport-perf --json > rows.json` is JSON
 * lines). --prefix prefixes both, --no-prefix neither. A last line
 * without a newline gets one when the rank's stream ends, and a line longer
 * than 64 KiB is cut into pieces, each a line, so that no rank's line runs
 * into another's; except that without a prefix in a job of one rank, the
 * bytes pass unchanged. A rank's stdout is a pipe, so a program that
 * buffers it (C stdio does, unless it is a terminal) delivers its lines
 * when it flushes: xport-perf flushes every line; others may want
 * `stdbuf -oL`.
 *
 * --output-filename DIR also writes each rank's output, unprefixed and
 * exactly as written, to DIR/1/rank.R/stdout and DIR/1/rank.R/stderr, the
 * layout of Open MPI 4's mpirun (1 is the job; R is padded with zeros to
 * the width of the last rank, so listings sort), and, as Open MPI does by
 * default, still copies it to xprun's stdout and stderr.
 *
 * Standard input: rank 0 reads xprun's unless that is a terminal; the
 * other ranks read /dev/null.
 *
 * Failure: when a rank exits non-zero or is killed by a signal, xprun says
 * which ("xprun: rank 2 exited with status 1", "... killed by signal 9
 * (SIGKILL)") and stops the others: SIGTERM, then SIGKILL after 2 s. SIGINT,
 * SIGTERM or SIGHUP to xprun stop the job the same way (a second one sends
 * SIGKILL at once). Each rank runs in its own process group and the signals
 * go to the group, so processes a rank started go too; whatever is left in
 * those groups when the job ends is killed (SIGKILL), failed or not, as
 * Slurm ends a job step. Every rank has
 * PR_SET_PDEATHSIG(SIGKILL): if xprun itself is killed (kill -9), the ranks
 * die with it (their own children do not, unless they arranged the same).
 *
 * A rank that called xp_init and exits without xp_finalize has failed too,
 * whatever its status ("xprun: rank 0 exited without calling xp_finalize",
 * as Open MPI's mpirun says it): sends it completed may not have left it
 * (xport.h, xp_send), and its peers fail after it. The library tells xprun
 * of each call through XPRUN_STATUS_FD (src/job/xprun_note.c); a program
 * that never calls xp_init is not asked to finalize.
 *
 * Exit status: 0 when every rank exited 0. Otherwise that of the first rank
 * to fail: its exit status, or 128 + N if signal N killed it, or 1 if it
 * exited 0 without xp_finalize. 128 + N when xprun was stopped by signal N
 * before any rank failed (130 for Ctrl-C). 2 for a usage error, 1 when
 * xprun itself cannot start the job.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "shell_words.h"

#define MAX_RANKS 1024
#define LINE_CAP 65536 /* longest line forwarded whole */
#define GRACE_MS 2000  /* between SIGTERM and SIGKILL */
#define EXIT_USAGE 2
#define EXIT_SETUP 1

#ifndef XPORT_VERSION_STRING
#error "XPORT_VERSION_STRING comes from meson.build (meson.project_version())"
#endif

enum prefix_mode { PREFIX_AUTO, PREFIX_ON, PREFIX_OFF };

struct stream {
	int fd;      /* read end of the rank's pipe, -1 once closed */
	int out;     /* STDOUT_FILENO or STDERR_FILENO */
	int file;    /* --output-filename: the rank's file, else -1 */
	bool prefix; /* lines to @out get "[rank] " */
	char *buf;   /* the part of a line not yet written */
	size_t len, cap;
};

struct rank {
	pid_t pid;
	bool reaped;
	struct stream s[2];
	/* xprun's end of the rank's XPRUN_STATUS_FD (-1: closed), and its
	 * contexts made by xp_init and not yet finalized. */
	int note_fd;
	int unfinalized;
};

static struct rank *ranks;
static int nranks;
static int first_failure = -1; /* exit status xprun will return, once known */
static bool stopping;
static bool killed;        /* SIGKILL sent */
static int64_t kill_at_ms; /* when to send SIGKILL while stopping */

/* Options */
static const char *key;
static const char *output_dir;
static enum prefix_mode prefix_mode = PREFIX_AUTO;
static bool stdout_tty, stderr_tty; /* xprun's own */
static char *command_line;          /* XPRUN_COMMAND */

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void usage(FILE *f)
{
	fprintf(f,
		"usage: xprun -n N [--key K] [--prefix | --no-prefix] [--output-filename DIR]\n"
		"             [--] program [args...]\n"
		"  starts N ranks of an xport job on this host (N from 1 to %d)\n"
		"  -n N, -np N     number of ranks\n"
		"  --key K         job key (XP_JOB_KEY) instead of a random one\n"
		"  --prefix        \"[rank] \" before every line of stdout and stderr\n"
		"                  (default: stderr always, stdout only to a terminal, so\n"
		"                  data in pipes and files is exactly what the ranks wrote)\n"
		"  --no-prefix     no prefix on either\n"
		"  --output-filename DIR\n"
		"                  also write each rank's output, unprefixed, to\n"
		"                  DIR/1/rank.R/stdout and stderr (Open MPI 4's layout);\n"
		"                  it is still shown on xprun's stdout and stderr\n"
		"  --version       print the version and exit\n"
		"Ranks get XP_RANK, XP_SIZE, XP_ADDR, XP_JOB_KEY; XPRUN_STDOUT_TTY and\n"
		"XPRUN_STDERR_TTY (1 if xprun's stdout/stderr is a terminal, else 0); and\n"
		"XPRUN_COMMAND (this command line). See xprun(1).\n",
		MAX_RANKS);
}

static const char *signame(int sig)
{
	const char *s = sigabbrev_np(sig);
	return s != NULL ? s : "?";
}

/* ---------------------------------------------------------------------- */
/* Output                                                                 */

/* Writes all of @iov; gives up quietly if the output is gone (EPIPE):
 * the job must not die because nobody reads its log. */
static void write_all(int fd, struct iovec *iov, int n)
{
	while (n > 0) {
		ssize_t k = writev(fd, iov, n);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				struct pollfd p = { .fd = fd, .events = POLLOUT };
				poll(&p, 1, 1000);
				continue;
			}
			return;
		}
		while (n > 0 && (size_t)k >= iov->iov_len) {
			k -= (ssize_t)iov->iov_len;
			iov++;
			n--;
		}
		if (n > 0) {
			iov->iov_base = (char *)iov->iov_base + k;
			iov->iov_len -= (size_t)k;
		}
	}
}

static void write_bytes(int fd, const char *p, size_t len)
{
	struct iovec iov = { .iov_base = (void *)p, .iov_len = len };
	write_all(fd, &iov, 1);
}

/* One line, prefixed, in one write (so lines of ranks never mix). */
static void emit_line(int rank, int out, const char *line, size_t len)
{
	char prefix[24];
	int plen = snprintf(prefix, sizeof(prefix), "[%d] ", rank);
	struct iovec iov[3] = {
		{ .iov_base = prefix, .iov_len = (size_t)plen },
		{ .iov_base = (void *)line, .iov_len = len },
		{ .iov_base = "\n", .iov_len = 1 },
	};
	write_all(out, iov, 3);
}

/* Writes the complete lines in @s's buffer; with @final, the rest too. */
static void flush_lines(int rank, struct stream *s, bool final)
{
	size_t start = 0;
	if (s->len == 0)
		return;
	if (!s->prefix) {
		/* Unprefixed: the bytes as written, up to the last newline
		 * (whole lines, so ranks still do not mix), in one write. A
		 * piece that is not a whole line (the last, a line too long)
		 * gets a newline in a job of more ranks than one, where it
		 * would otherwise run into another rank's line. */
		const char *nl = memrchr(s->buf, '\n', s->len);
		start = nl != NULL ? (size_t)(nl - s->buf) + 1 : 0;
		bool cut = start < s->len && (final || s->len - start >= LINE_CAP);
		if (cut)
			start = s->len;
		struct iovec iov[2] = {
			{ .iov_base = s->buf, .iov_len = start },
			{ .iov_base = "\n", .iov_len = 1 },
		};
		if (start > 0)
			write_all(s->out, iov, cut && nranks > 1 ? 2 : 1);
	} else {
		for (;;) {
			char *nl = memchr(s->buf + start, '\n', s->len - start);
			if (nl == NULL)
				break;
			size_t end = (size_t)(nl - s->buf);
			emit_line(rank, s->out, s->buf + start, end - start);
			start = end + 1;
		}
		if (start < s->len && (final || s->len - start >= LINE_CAP)) {
			emit_line(rank, s->out, s->buf + start, s->len - start);
			start = s->len;
		}
	}
	memmove(s->buf, s->buf + start, s->len - start);
	s->len -= start;
}

static void close_stream(int rank, struct stream *s)
{
	flush_lines(rank, s, true);
	close(s->fd);
	s->fd = -1;
	if (s->file >= 0)
		close(s->file);
	s->file = -1;
	free(s->buf);
	s->buf = NULL;
	s->len = s->cap = 0;
}

/* Reads what the stream has now. Closes it at EOF. */
static void read_stream(int rank, struct stream *s)
{
	for (;;) {
		if (s->cap - s->len < 4096) {
			size_t cap = s->cap ? s->cap * 2 : 8192;
			if (cap > LINE_CAP + 4096)
				cap = LINE_CAP + 4096;
			char *nb = realloc(s->buf, cap);
			if (nb == NULL) {
				flush_lines(rank, s, true); /* no memory: pass on what we have */
				if (s->cap - s->len < 4096)
					return;
			} else {
				s->buf = nb;
				s->cap = cap;
			}
		}
		ssize_t k = read(s->fd, s->buf + s->len, s->cap - s->len);
		if (k > 0) {
			if (s->file >= 0)
				write_bytes(s->file, s->buf + s->len, (size_t)k);
			s->len += (size_t)k;
			flush_lines(rank, s, false);
			continue;
		}
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0 && errno == EAGAIN)
			return;
		close_stream(rank, s); /* EOF, or an error nothing can be done about */
		return;
	}
}

/* ---------------------------------------------------------------------- */
/* Ranks                                                                  */

static void signal_ranks(int sig)
{
	for (int r = 0; r < nranks; r++) {
		if (ranks[r].pid <= 0)
			continue;
		/* The rank's process group: the rank and what it started. A rank
		 * already reaped may have left children there. */
		if (kill(-ranks[r].pid, sig) < 0 && !ranks[r].reaped)
			kill(ranks[r].pid, sig);
	}
}

static void stop_job(void)
{
	if (stopping)
		return;
	stopping = true;
	kill_at_ms = now_ms() + GRACE_MS;
	signal_ranks(SIGTERM);
}

static void kill_job(void)
{
	if (killed)
		return;
	killed = true;
	signal_ranks(SIGKILL);
}

/* The rank's notes so far: 'I' for each xp_init, 'F' for each
 * xp_finalize. */
static void read_notes(struct rank *rk)
{
	char buf[64];
	ssize_t n;
	while (rk->note_fd >= 0 && (n = recv(rk->note_fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
		for (ssize_t i = 0; i < n; i++)
			rk->unfinalized += buf[i] == 'I' ? 1 : buf[i] == 'F' ? -1 : 0;
}

static void reap(void)
{
	for (;;) {
		int st;
		pid_t pid = waitpid(-1, &st, WNOHANG);
		if (pid <= 0)
			return;
		int r = 0;
		while (r < nranks && ranks[r].pid != pid)
			r++;
		if (r == nranks)
			continue; /* not a rank (cannot happen: xprun starts nothing else) */
		ranks[r].reaped = true;
		/* What it noted before it exited is all there by now. */
		read_notes(&ranks[r]);
		bool unfinalized = ranks[r].unfinalized > 0;
		if (ranks[r].note_fd >= 0)
			close(ranks[r].note_fd);
		ranks[r].note_fd = -1;
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && !unfinalized)
			continue;
		if (stopping)
			continue; /* we stopped it; the first failure was reported */
		if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
			fprintf(stderr, "xprun: rank %d exited without calling xp_finalize\n", r);
			first_failure = 1;
		} else if (WIFEXITED(st)) {
			fprintf(stderr, "xprun: rank %d exited with status %d\n", r,
				WEXITSTATUS(st));
			first_failure = WEXITSTATUS(st);
		} else {
			int sig = WTERMSIG(st);
			fprintf(stderr, "xprun: rank %d killed by signal %d (SIG%s)\n", r, sig,
				signame(sig));
			first_failure = 128 + sig;
		}
		stop_job();
	}
}

static bool all_reaped(void)
{
	for (int r = 0; r < nranks; r++)
		if (!ranks[r].reaped)
			return false;
	return true;
}

/* In the child: becomes rank @r and runs the program. Never returns. */
static void exec_rank(int r, pid_t parent, int lfd, int port, int out_fd, int err_fd, int note_fd,
		      const sigset_t *oldmask, char **argv)
{
	char v[64];
	/* Die with xprun, even by kill -9; and if xprun died before this
	 * line, do not run at all. */
	if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
		_exit(127);
	setpgid(0, 0);
	signal(SIGPIPE, SIG_DFL); /* an ignored signal stays ignored across exec */
	sigprocmask(SIG_SETMASK, oldmask, NULL);
	if (dup2(out_fd, STDOUT_FILENO) < 0 || dup2(err_fd, STDERR_FILENO) < 0)
		_exit(127);
	if (r != 0 || isatty(STDIN_FILENO)) {
		int null = open("/dev/null", O_RDONLY);
		if (null >= 0 && null != STDIN_FILENO) {
			dup2(null, STDIN_FILENO);
			close(null);
		}
	}
	snprintf(v, sizeof(v), "%d", r);
	setenv("XP_RANK", v, 1);
	snprintf(v, sizeof(v), "%d", nranks);
	setenv("XP_SIZE", v, 1);
	snprintf(v, sizeof(v), "127.0.0.1:%d", port);
	setenv("XP_ADDR", v, 1);
	setenv("XP_JOB_KEY", key, 1);
	setenv("XPRUN_STDOUT_TTY", stdout_tty ? "1" : "0", 1);
	setenv("XPRUN_STDERR_TTY", stderr_tty ? "1" : "0", 1);
	if (command_line != NULL)
		setenv("XPRUN_COMMAND", command_line, 1);
	/* For this process only (its pid): src/job/xprun_note.c. */
	fcntl(note_fd, F_SETFD, 0);
	snprintf(v, sizeof(v), "%d:%ld", note_fd, (long)getpid());
	setenv("XPRUN_STATUS_FD", v, 1);
	if (r == 0) {
		/* The listening socket goes to rank 0 only, across exec. */
		fcntl(lfd, F_SETFD, 0);
		snprintf(v, sizeof(v), "%d", lfd);
		setenv("XP_BOOT_LISTEN_FD", v, 1);
	} else {
		unsetenv("XP_BOOT_LISTEN_FD");
	}
	execvp(argv[0], argv);
	fprintf(stderr, "xprun: cannot run %s: %s\n", argv[0], strerror(errno));
	_exit(127);
}

/* A socket on 127.0.0.1 at a port the kernel picks, listening. */
static int rendezvous_socket(int *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int one = 1;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, nranks + 16) < 0 ||
	    getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
		fprintf(stderr, "xprun: cannot create the rendezvous socket: %s\n",
			strerror(errno));
		return -1;
	}
	*port = ntohs(a.sin_port);
	return fd;
}

/* 256 random bits, as the job key's MAC (HMAC-SHA-512-256) can use. */
static int random_key(char hex[65])
{
	uint8_t raw[32];
	size_t got = 0;
	while (got < sizeof(raw)) {
		ssize_t k = getrandom(raw + got, sizeof(raw) - got, 0);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			fprintf(stderr, "xprun: getrandom: %s\n", strerror(errno));
			return -1;
		}
		got += (size_t)k;
	}
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(hex + 2 * i, 3, "%02x", raw[i]);
	return 0;
}

/* ---------------------------------------------------------------------- */

/* mkdir -p @path (mode 0777 less the umask). */
static int make_dirs(const char *path)
{
	char *copy = strdup(path);
	int rc = 0;
	if (copy == NULL)
		return -ENOMEM;
	for (char *p = copy + 1;; p++) {
		if (*p != '/' && *p != '\0')
			continue;
		char c = *p;
		*p = '\0';
		if (mkdir(copy, 0777) < 0 && errno != EEXIST) {
			rc = -errno;
			break;
		}
		*p = c;
		if (c == '\0')
			break;
	}
	free(copy);
	return rc;
}

/*
 * --output-filename: opens DIR/1/rank.R/stdout and stderr for rank @r
 * into @fds (close-on-exec: only xprun writes them). Returns 0, or -1
 * after saying why.
 */
static int open_output_files(int r, int fds[2])
{
	char last[16], num[16];
	int width = snprintf(last, sizeof(last), "%d", nranks - 1);
	int digits = snprintf(num, sizeof(num), "%d", r);
	size_t cap = strlen(output_dir) + 64;
	char *path = malloc(cap);
	if (path == NULL) {
		fprintf(stderr, "xprun: out of memory\n");
		return -1;
	}
	size_t plen = (size_t)snprintf(path, cap, "%s/1/rank.", output_dir);
	for (int k = digits; k < width; k++)
		path[plen++] = '0';
	snprintf(path + plen, cap - plen, "%s", num);
	int rc = make_dirs(path);
	if (rc < 0) {
		fprintf(stderr, "xprun: --output-filename: cannot create %s: %s\n", path,
			strerror(-rc));
		free(path);
		return -1;
	}
	size_t dlen = strlen(path);
	static const char *const names[2] = { "stdout", "stderr" };
	for (int k = 0; k < 2; k++) {
		snprintf(path + dlen, cap - dlen, "/%s", names[k]);
		fds[k] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
		if (fds[k] < 0) {
			fprintf(stderr, "xprun: --output-filename: cannot open %s: %s\n", path,
				strerror(errno));
			if (k == 1)
				close(fds[0]);
			free(path);
			return -1;
		}
	}
	free(path);
	return 0;
}

/* The value of option @a (without its "=value" part, if any) at argv[*i]:
 * "--opt=value" or "--opt value". NULL after saying what is missing. */
static const char *option_value(int argc, char **argv, int *i, const char *a)
{
	const char *eq = strchr(argv[*i], '=');
	if (eq != NULL && strncmp(argv[*i], "--", 2) == 0) {
		(*i)++;
		return eq + 1;
	}
	if (*i + 1 >= argc) {
		fprintf(stderr, "xprun: %s needs a value\n", a);
		return NULL;
	}
	*i += 2;
	return argv[*i - 1];
}

static bool is_option(const char *a, const char *name)
{
	size_t n = strlen(name);
	return strncmp(a, name, n) == 0 && (a[n] == '\0' || (a[n] == '=' && a[1] == '-'));
}

static int parse_args(int argc, char **argv, int *prog)
{
	int i = 1;
	nranks = 0;
	while (i < argc) {
		const char *a = argv[i];
		const char *val = NULL;
		if (strcmp(a, "--") == 0) {
			i++;
			break;
		}
		if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
			usage(stdout);
			exit(0);
		}
		if (strcmp(a, "--version") == 0) {
			printf("xprun (xport) %s\n", XPORT_VERSION_STRING);
			exit(0);
		}
		if (strcmp(a, "--prefix") == 0 || strcmp(a, "--tag-output") == 0) {
			prefix_mode = PREFIX_ON;
			i++;
			continue;
		}
		if (strcmp(a, "--no-prefix") == 0) {
			prefix_mode = PREFIX_OFF;
			i++;
			continue;
		}
		if (strcmp(a, "-n") == 0 || strcmp(a, "-np") == 0 || is_option(a, "--np")) {
			val = option_value(argc, argv, &i, "-n");
			a = "-n";
		} else if (strncmp(a, "-n", 2) == 0 && a[2] != '\0' && a[2] != 'p') {
			val = a + 2;
			a = "-n";
			i++;
		} else if (is_option(a, "--key")) {
			val = option_value(argc, argv, &i, "--key");
			a = "--key";
		} else if (is_option(a, "--output-filename")) {
			val = option_value(argc, argv, &i, "--output-filename");
			a = "--output-filename";
		} else if (a[0] == '-') {
			fprintf(stderr, "xprun: unknown option %s\n", a);
			return -1;
		} else {
			break; /* the program */
		}
		if (val == NULL)
			return -1;
		if (strcmp(a, "-n") == 0) {
			char *end;
			long n = strtol(val, &end, 10);
			if (*val == '\0' || *end != '\0' || n < 1 || n > MAX_RANKS) {
				fprintf(stderr,
					"xprun: -n %s: want a number of ranks from 1 to %d\n", val,
					MAX_RANKS);
				return -1;
			}
			nranks = (int)n;
		} else if (*val == '\0') {
			fprintf(stderr, "xprun: %s needs a non-empty value\n", a);
			return -1;
		} else if (strcmp(a, "--key") == 0) {
			key = val;
		} else {
			output_dir = val;
		}
	}
	if (nranks == 0 || i >= argc) {
		fprintf(stderr, "xprun: %s\n", nranks == 0 ? "-n N is required" : "no program");
		return -1;
	}
	*prog = i;
	return 0;
}

int main(int argc, char **argv)
{
	int prog;
	char keybuf[65];
	if (parse_args(argc, argv, &prog) < 0) {
		usage(stderr);
		return EXIT_USAGE;
	}
	stdout_tty = isatty(STDOUT_FILENO) == 1;
	stderr_tty = isatty(STDERR_FILENO) == 1;
	command_line = shell_words(argc, argv);
	if (key == NULL) {
		if (random_key(keybuf) < 0)
			return EXIT_SETUP;
		key = keybuf;
	}
	ranks = calloc((size_t)nranks, sizeof(*ranks));
	if (ranks == NULL) {
		fprintf(stderr, "xprun: out of memory\n");
		return EXIT_SETUP;
	}
	for (int r = 0; r < nranks; r++)
		ranks[r].note_fd = -1;
	int port, lfd = rendezvous_socket(&port);
	if (lfd < 0)
		return EXIT_SETUP;

	/* Signals arrive through a signalfd in the poll loop: no handler
	 * races. The ranks get the mask back before exec. */
	sigset_t mask, oldmask;
	sigemptyset(&mask);
	sigaddset(&mask, SIGCHLD);
	static const int stop_signals[] = { SIGINT, SIGTERM, SIGHUP };
	for (size_t i = 0; i < sizeof(stop_signals) / sizeof(stop_signals[0]); i++) {
		/* A signal xprun was started with ignored (nohup; a background
		 * job of a shell without job control) stays ignored, as for
		 * any Unix program. */
		struct sigaction sa;
		if (sigaction(stop_signals[i], NULL, &sa) == 0 && sa.sa_handler == SIG_IGN)
			continue;
		sigaddset(&mask, stop_signals[i]);
	}
	sigprocmask(SIG_BLOCK, &mask, &oldmask);
	int sfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (sfd < 0) {
		fprintf(stderr, "xprun: signalfd: %s\n", strerror(errno));
		return EXIT_SETUP;
	}
	signal(SIGPIPE, SIG_IGN);
	fflush(NULL);

	/* Every output file is there before any rank starts, or none starts. */
	int(*files)[2] = calloc((size_t)nranks, sizeof(*files));
	if (files == NULL) {
		fprintf(stderr, "xprun: out of memory\n");
		return EXIT_SETUP;
	}
	for (int r = 0; r < nranks; r++) {
		files[r][0] = files[r][1] = -1;
		if (output_dir != NULL && open_output_files(r, files[r]) < 0) {
			for (int q = 0; q < r; q++)
				for (int k = 0; k < 2; k++)
					close(files[q][k]);
			free(files);
			return EXIT_SETUP;
		}
	}

	pid_t self = getpid();
	for (int r = 0; r < nranks; r++) {
		int out[2], err[2], note[2];
		if (pipe2(out, O_CLOEXEC) < 0 || pipe2(err, O_CLOEXEC) < 0 ||
		    socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, note) < 0) {
			fprintf(stderr,
				"xprun: pipe: %s (too many ranks for the open-files limit?)\n",
				strerror(errno));
			first_failure = EXIT_SETUP;
			stop_job();
			break;
		}
		pid_t pid = fork();
		if (pid == 0)
			exec_rank(r, self, lfd, port, out[1], err[1], note[1], &oldmask,
				  argv + prog);
		close(out[1]);
		close(err[1]);
		close(note[1]);
		ranks[r].note_fd = note[0];
		if (pid < 0) {
			fprintf(stderr, "xprun: fork: %s\n", strerror(errno));
			close(out[0]);
			close(err[0]);
			close(note[0]);
			ranks[r].note_fd = -1;
			first_failure = EXIT_SETUP;
			stop_job();
			break;
		}
		setpgid(pid, pid); /* as the child does: whoever runs first */
		ranks[r].pid = pid;
		ranks[r].s[0] = (struct stream){
			.fd = out[0],
			.out = STDOUT_FILENO,
			.file = files[r][0],
			.prefix = prefix_mode == PREFIX_ON ||
				  (prefix_mode == PREFIX_AUTO && stdout_tty),
		};
		ranks[r].s[1] = (struct stream){
			.fd = err[0],
			.out = STDERR_FILENO,
			.file = files[r][1],
			.prefix = prefix_mode != PREFIX_OFF,
		};
		fcntl(out[0], F_SETFL, O_NONBLOCK);
		fcntl(err[0], F_SETFL, O_NONBLOCK);
	}
	close(lfd); /* rank 0 has it now */
	for (int r = 0; r < nranks; r++) {
		if (ranks[r].pid > 0)
			continue;
		ranks[r].reaped = true; /* never started */
		for (int k = 0; k < 2; k++)
			if (files[r][k] >= 0)
				close(files[r][k]);
	}
	free(files);

	struct pollfd *pfds = calloc(3 * (size_t)nranks + 1, sizeof(*pfds));
	int *owner = calloc(3 * (size_t)nranks + 1, sizeof(*owner));
	if (pfds == NULL || owner == NULL) {
		fprintf(stderr, "xprun: out of memory\n");
		kill_job();
		free(pfds);
		free(owner);
		return EXIT_SETUP;
	}
	while (!all_reaped()) {
		int np = 0;
		pfds[np++] = (struct pollfd){ .fd = sfd, .events = POLLIN };
		for (int r = 0; r < nranks; r++) {
			for (int k = 0; k < 3; k++) {
				int fd = k < 2 ? ranks[r].s[k].fd : ranks[r].note_fd;
				if (fd < 0)
					continue;
				owner[np] = 3 * r + k;
				pfds[np++] = (struct pollfd){ .fd = fd, .events = POLLIN };
			}
		}
		int timeout = -1;
		if (stopping && !killed) {
			int64_t left = kill_at_ms - now_ms();
			timeout = left > 0 ? (int)left : 0;
		}
		int n = poll(pfds, (nfds_t)np, timeout);
		if (n < 0 && errno != EINTR) {
			fprintf(stderr, "xprun: poll: %s\n", strerror(errno));
			kill_job();
			break;
		}
		for (int i = 1; i < np && n > 0; i++) {
			if (pfds[i].revents == 0)
				continue;
			int r = owner[i] / 3, k = owner[i] % 3;
			if (k == 2)
				read_notes(&ranks[r]); /* a queue that never fills */
			else
				read_stream(r, &ranks[r].s[k]);
		}
		if (n > 0 && pfds[0].revents != 0) {
			struct signalfd_siginfo si;
			while (read(sfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
				if (si.ssi_signo == SIGCHLD)
					continue; /* reaped below */
				if (stopping) {
					kill_job(); /* asked twice: no more grace */
					continue;
				}
				fprintf(stderr, "xprun: got SIG%s, stopping the job\n",
					signame((int)si.ssi_signo));
				if (first_failure < 0)
					first_failure = 128 + (int)si.ssi_signo;
				stop_job();
			}
		}
		reap();
		if (stopping && !killed && now_ms() >= kill_at_ms) {
			kill_job();
		}
	}
	/* Every rank is gone, so all it wrote is in the pipes: pass it on.
	 * Whatever a leftover child of a rank still holds open is not waited
	 * for. */
	for (int r = 0; r < nranks; r++) {
		for (int k = 0; k < 2; k++) {
			struct stream *s = &ranks[r].s[k];
			if (s->fd >= 0)
				read_stream(r, s);
			if (s->fd >= 0)
				close_stream(r, s);
		}
	}
	/* What the ranks started and left behind goes with the job, as
	 * Slurm ends a step: nothing of it outlives xprun. */
	signal_ranks(SIGKILL);
	free(pfds);
	free(owner);
	free(ranks);
	free(command_line);
	close(sfd);
	return first_failure < 0 ? 0 : first_failure;
}
