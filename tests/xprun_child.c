/* SPDX-License-Identifier: MIT */
/*
 * A rank for tests/test_xprun.sh. It prints what it was given and then does
 * what its options say:
 *
 *   --print        "rank R size S addr A key K listenfd F" on stdout, "err R"
 *                  on stderr, and "tail R" on stdout without a newline
 *   --boot         forms the job with the xport bootstrap, allgathers the
 *                  ranks, and prints "boot ok R" after a barrier
 *   --spawn        starts a child that sleeps ("grandchild R pid P")
 *   --ignore-term  ignores SIGTERM
 *   --exit R:C     rank R exits with status C
 *   --kill R:S     rank R raises signal S
 *   --hang         every rank not told otherwise waits until killed
 *   --unfinalized N  forms a job with xp_init; rank 0 sends N messages of
 *                  64 bytes to rank 1 with xp_send and returns from main
 *                  without xp_finalize; rank 1 receives them, printing "got
 *                  K" for each, and finalizes (issue 24, 4.4)
 *   --finalized    xp_init, then xp_finalize, and "finalized R"
 *
 * Every rank first prints "ready R pid P". An alarm ends it after 60 s
 * whatever happens, so a broken xprun cannot leave it behind.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "job/bootstrap.h"
#include "xport/xport.h"

static int env_int(const char *name)
{
	const char *s = getenv(name);
	return s != NULL ? atoi(s) : -1;
}

static const char *env_str(const char *name)
{
	const char *s = getenv(name);
	return s != NULL ? s : "(unset)";
}

static int boot(int rank)
{
	struct xpi_boot *b;
	struct xpi_boot_opts o;
	xpi_boot_opts_from_env(&o, 20000);
	int rc = xpi_boot_create(&o, &b);
	if (rc != 0) {
		fprintf(stderr, "xpi_boot_create: %d\n", rc);
		return 1;
	}
	int size = xpi_boot_size(b), me = xpi_boot_rank(b);
	int *all = calloc((size_t)size, sizeof(int));
	rc = all == NULL ? -1 : xpi_boot_allgather(b, &me, sizeof(me), all);
	for (int r = 0; rc == 0 && r < size; r++)
		if (all[r] != r)
			rc = -1;
	if (rc == 0)
		rc = xpi_boot_barrier(b);
	free(all);
	xpi_boot_destroy(b);
	if (rc != 0 || me != rank) {
		fprintf(stderr, "bootstrap failed: %d\n", rc);
		return 1;
	}
	printf("boot ok %d\n", rank);
	return 0;
}

/* --unfinalized @n (@n >= 0) or, with @n < 0, --finalized. */
static int with_context(int n)
{
	xp_context_t *ctx;
	if (xp_init(NULL, &ctx) < 0) {
		fprintf(stderr, "xp_init: %s\n", xp_error_detail());
		return 1;
	}
	xp_comm_t *world = xp_comm_world(ctx);
	char msg[64] = { 0 };
	int me = xp_rank(ctx);
	for (int k = 0; k < n && me <= 1; k++) {
		int rc = me == 0 ? xp_send(world, msg, sizeof(msg), 1, (uint64_t)k) :
				   xp_recv(world, msg, sizeof(msg), 0, (uint64_t)k, ~0ull, NULL);
		if (rc < 0) {
			fprintf(stderr, "rank %d: message %d: %s\n", me, k, xp_error_detail());
			return 1;
		}
		if (me == 1)
			printf("got %d\n", k);
	}
	if (n >= 0 && me == 0)
		return 0; /* the sends completed; no xp_finalize */
	xp_finalize(ctx);
	printf("finalized %d\n", me);
	return 0;
}

/* "R:V" naming this rank: writes V. */
static int for_me(const char *arg, int rank, int *value)
{
	int r, v;
	if (sscanf(arg, "%d:%d", &r, &v) != 2 || r != rank)
		return 0;
	*value = v;
	return 1;
}

int main(int argc, char **argv)
{
	int rank = env_int("XP_RANK");
	int exit_code = -1, sig = -1, hang = 0;
	alarm(60);
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready %d pid %d\n", rank, (int)getpid());
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--print") == 0) {
			printf("rank %d size %d addr %s key %s listenfd %s\n", rank,
			       env_int("XP_SIZE"), env_str("XP_ADDR"), env_str("XP_JOB_KEY"),
			       env_str("XP_BOOT_LISTEN_FD"));
			fprintf(stderr, "err %d\n", rank);
			printf("tail %d", rank);
			fflush(stdout);
		} else if (strcmp(argv[i], "--boot") == 0) {
			if (boot(rank) != 0)
				return 1;
		} else if (strcmp(argv[i], "--spawn") == 0) {
			/* The rank goes on only once the grandchild has printed,
			 * so a test always sees both lines. */
			int ready[2];
			char c = 0;
			if (pipe(ready) < 0)
				return 1;
			pid_t pid = fork();
			if (pid == 0) {
				alarm(60); /* alarms are not inherited */
				printf("grandchild %d pid %d\n", rank, (int)getpid());
				(void)!write(ready[1], &c, 1);
				for (;;)
					pause();
			}
			close(ready[1]);
			if (pid < 0 || read(ready[0], &c, 1) != 1)
				return 1;
			close(ready[0]);
		} else if (strcmp(argv[i], "--ignore-term") == 0) {
			signal(SIGTERM, SIG_IGN);
		} else if (strcmp(argv[i], "--exit") == 0 && i + 1 < argc) {
			for_me(argv[++i], rank, &exit_code);
		} else if (strcmp(argv[i], "--kill") == 0 && i + 1 < argc) {
			for_me(argv[++i], rank, &sig);
		} else if (strcmp(argv[i], "--hang") == 0) {
			hang = 1;
		} else if (strcmp(argv[i], "--unfinalized") == 0 && i + 1 < argc) {
			return with_context(atoi(argv[++i]));
		} else if (strcmp(argv[i], "--finalized") == 0) {
			return with_context(-1);
		} else {
			fprintf(stderr, "xprun_child: unknown argument %s\n", argv[i]);
			return 2;
		}
	}
	if (sig > 0)
		raise(sig);
	if (exit_code >= 0)
		return exit_code;
	if (hang)
		for (;;)
			pause(); /* until xprun (or the alarm) ends it */
	return 0;
}
