/* SPDX-License-Identifier: MIT */
/*
 * A peer killed while we send to it must end our operations with an error,
 * never with a signal (issue 24, 5.3): SIGPIPE stays at its default action
 * in the survivor, as in a program that never heard of it.
 *
 * Two ranks over the transports named by the argument ("shm", "tcp",
 * "tcp,shm"), several jobs in a row. Rank 1 posts receives for large
 * messages and waits on one that never comes; rank 0 sends it large and
 * small messages and kills it (SIGKILL), in alternate jobs while the
 * payloads stream and once rank 1 sleeps in the library (a sleeper is
 * woken through a doorbell that a dead peer no longer reads), then goes
 * on sending. Every send must end, those that fail with -ECONNRESET naming
 * rank 1, and rank 0 must finalize and exit 0.
 *
 * Usage: test_kill_sigpipe TRANSPORTS. Exit: 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "xport/xport.h"
#include "core/engine.h"
#include "shm/shm.h"
#include "shm/shm_int.h"
#include "mproc.h"
#include "testutil.h"

#define JOBS 6
#define NBIG 4
#define BIG (16u << 20)
#define NSMALL 64
#define END_WITHIN_MS 10000

struct shared {
	_Atomic int victim_pid;
};
static struct shared *sh;
static const char *transports;
static bool kill_asleep;

/* Milliseconds on the monotonic clock. */
static int64_t now_ms(void)
{
	return (int64_t)(t_now_s() * 1000);
}

/* Rank 1's segment says it sleeps (the doorbell will be rung), if shared
 * memory reaches it; over TCP only, a while for it to fall asleep. */
static void wait_asleep(xp_context_t *ctx)
{
	struct xpi_shm *s = NULL;
	for (int i = 0; i < ctx->ntls; i++)
		if (ctx->tls[i].ops == &xpi_shm_ops)
			s = ctx->tls[i].tl;
	if (s == NULL || s->peers[1].seg == NULL) {
		usleep(200000);
		return;
	}
	int64_t until = now_ms() + 5000;
	while (atomic_load(&s->peers[1].seg->sleeping) == 0)
		T_CHECK(now_ms() < until);
}

static int victim(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	xp_request_t *r[NBIG];
	for (int i = 0; i < NBIG; i++) {
		void *buf = malloc(BIG);
		T_CHECK(buf != NULL);
		T_OK(xp_irecv(w, buf, BIG, 0, 1, XP_TAG_EXACT, &r[i]));
	}
	atomic_store(&sh->victim_pid, (int)getpid());
	T_OK(xp_oob_barrier(ctx));
	uint8_t never;
	xp_request_t *nr;
	T_OK(xp_irecv(w, &never, 1, 0, 2, XP_TAG_EXACT, &nr));
	(void)xp_wait(&nr, 60000, NULL);
	return 1; /* killed before */
}

/* Waits for @r, returns its result; it must end in bounded time. */
static int wait_end(xp_request_t **r)
{
	int64_t t0 = now_ms();
	int rc = xp_wait(r, END_WITHIN_MS * 2, NULL);
	T_CHECK(now_ms() - t0 < END_WITHIN_MS);
	if (rc < 0) {
		T_EQ(rc, -ECONNRESET);
		T_CONTAINS(xp_error_detail(), "rank 1");
	}
	return rc;
}

static int survivor(xp_context_t *ctx)
{
	xp_comm_t *w = xp_comm_world(ctx);
	uint8_t *big = calloc(1, BIG), small[256] = { 0 };
	T_CHECK(big != NULL);
	xp_request_t *s[NBIG + NSMALL], *more[NSMALL];
	T_OK(xp_oob_barrier(ctx));
	if (kill_asleep) {
		/* Killed asleep, it stays asleep as far as its segment says:
		 * every message we send next rings its doorbell. */
		wait_asleep(ctx);
		T_CHECK(kill(atomic_load(&sh->victim_pid), SIGKILL) == 0);
	}
	for (int i = 0; i < NBIG; i++)
		T_OK(xp_isend(w, big, BIG, 1, 1, &s[i]));
	for (int i = 0; i < NSMALL; i++)
		T_OK(xp_isend(w, small, sizeof(small), 1, 3, &s[NBIG + i]));
	if (!kill_asleep) {
		for (int i = 0; i < 200; i++) /* let the payloads get going */
			(void)xp_test(&s[0], NULL);
		T_CHECK(kill(atomic_load(&sh->victim_pid), SIGKILL) == 0);
	}
	/* Sends after the death, before we can know of it. */
	for (int i = 0; i < NSMALL; i++)
		T_OK(xp_isend(w, small, sizeof(small), 1, 4, &more[i]));
	int failed = 0;
	for (int i = 0; i < NBIG + NSMALL; i++)
		failed += s[i] != NULL && wait_end(&s[i]) < 0;
	for (int i = 0; i < NSMALL; i++)
		failed += wait_end(&more[i]) < 0;
	fprintf(stderr, "   rank 0: %d of %d sends failed naming rank 1\n", failed,
		NBIG + 2 * NSMALL);
	T_CHECK(failed > 0);
	free(big);
	return 0;
}

static int body(int rank, void *arg)
{
	(void)arg;
	signal(SIGPIPE, SIG_DFL); /* as in a program that never set it */
	setenv("XP_TRANSPORTS", transports, 1);
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	int rc = rank == 0 ? survivor(ctx) : victim(ctx);
	xp_finalize(ctx);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: test_kill_sigpipe TRANSPORTS\n");
		return 1;
	}
	transports = argv[1];
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_CHECK(sh != MAP_FAILED);
	for (int j = 0; j < JOBS; j++) {
		kill_asleep = j % 2 == 1;
		fprintf(stderr, "-- job %d over %s: rank 1 killed %s\n", j, transports,
			kill_asleep ? "asleep in the library" : "while payloads stream to it");
		atomic_store(&sh->victim_pid, 0);
		struct mproc_result res;
		mproc_run(2, body, NULL, 60, NULL, &res);
		int st = res.status[0];
		if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
			T_FAIL("job %d: rank 0 %s %d", j,
			       WIFSIGNALED(st) ? "killed by signal" : "exited with",
			       WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
		T_CHECK(WIFSIGNALED(res.status[1]) && WTERMSIG(res.status[1]) == SIGKILL);
	}
	return 0;
}
