/* SPDX-License-Identifier: MIT */
/*
 * Shared memory's receive FIFO and lent chunk sets (src/shm/shm_fifo.h,
 * shm_int.h), the parts where many senders share one receiver's memory:
 *
 *  - sets:   every rank of 7 sends ROUNDS payloads of 200 KiB to rank 0
 *            (and 8 B between), all posted at once, through the chunks
 *            (cross-memory attach off): 6 senders for 4 chunk sets, so
 *            streams wait for a set and get one as others finish. Every
 *            payload arrives intact and in each sender's order; then an
 *            all-to-all of 100 KiB, every rank receiving from 6 at once.
 *  - dead-claim: rank 2 claims slots of rank 0's FIFO the way a send does
 *            and dies before it writes them, leaving a hole before every
 *            later message. Rank 1's messages, sent after the hole, must
 *            still reach rank 0 once rank 2 is known dead (the receiver
 *            steps over what rank 2's note says it claimed), and rank 2's
 *            loss is reported.
 *
 * Usage: test_shm_fifo sets|dead-claim. Exit: 0 pass, 1 fail.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xport/xport.h"
#include "core/engine.h"
#include "shm/shm.h"
#include "shm/shm_int.h"
#include "mproc.h"
#include "pattern.h"
#include "testutil.h"

#define RANKS 7
#define ROUNDS 8
#define BIG (200u << 10)
#define A2A (100u << 10)
#define WAIT_MS 60000

static struct xpi_shm *shm_of(xp_context_t *ctx)
{
	for (int i = 0; i < ctx->ntls; i++)
		if (ctx->tls[i].ops == &xpi_shm_ops)
			return ctx->tls[i].tl;
	return NULL;
}

static uint64_t seed_of(int from, int to, int round)
{
	return (uint64_t)from * 1000003u + (uint64_t)to * 1009u + (uint64_t)round;
}

static int sets_body(int rank, void *arg)
{
	(void)arg;
	setenv("XP_TRANSPORTS", "shm", 1);
	setenv("XP_SHM_CMA_MIN", "off", 1); /* every payload through the chunks */
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	int n = xp_size(ctx);
	T_EQ(n, RANKS);
	if (rank == 0) {
		/* Every sender's rounds at once: big, then small, in order. */
		size_t nreq = (size_t)(n - 1) * ROUNDS * 2;
		xp_request_t **r = calloc(nreq, sizeof(*r));
		uint8_t **buf = calloc(nreq, sizeof(*buf));
		T_CHECK(r != NULL && buf != NULL);
		size_t k = 0;
		for (int src = 1; src < n; src++)
			for (int i = 0; i < ROUNDS; i++, k += 2) {
				buf[k] = malloc(BIG);
				buf[k + 1] = malloc(8);
				T_CHECK(buf[k] != NULL && buf[k + 1] != NULL);
				T_OK(xp_irecv(w, buf[k], BIG, src, 1, XP_TAG_EXACT, &r[k]));
				T_OK(xp_irecv(w, buf[k + 1], 8, src, 1, XP_TAG_EXACT, &r[k + 1]));
			}
		T_OK(xp_waitall(nreq, r, WAIT_MS, NULL));
		k = 0;
		for (int src = 1; src < n; src++)
			for (int i = 0; i < ROUNDS; i++, k += 2) {
				T_OK(check(buf[k], BIG, seed_of(src, 0, i)));
				uint64_t v;
				memcpy(&v, buf[k + 1], 8);
				T_EQ(v, seed_of(src, 0, i));
				free(buf[k]);
				free(buf[k + 1]);
			}
		free(r);
		free(buf);
	} else {
		uint8_t *out[ROUNDS];
		uint64_t small[ROUNDS];
		xp_request_t *r[2 * ROUNDS];
		for (int i = 0; i < ROUNDS; i++) {
			out[i] = malloc(BIG);
			T_CHECK(out[i] != NULL);
			fill(out[i], BIG, seed_of(rank, 0, i));
			small[i] = seed_of(rank, 0, i);
			T_OK(xp_isend(w, out[i], BIG, 0, 1, &r[2 * i]));
			T_OK(xp_isend(w, &small[i], 8, 0, 1, &r[2 * i + 1]));
		}
		T_OK(xp_waitall(2 * ROUNDS, r, WAIT_MS, NULL));
		for (int i = 0; i < ROUNDS; i++)
			free(out[i]);
	}
	/* All-to-all: every rank a receiver of six streams at once. */
	uint8_t *in = malloc((size_t)n * A2A), *out = malloc((size_t)n * A2A);
	xp_request_t **r = calloc(2 * (size_t)n, sizeof(*r));
	T_CHECK(in != NULL && out != NULL && r != NULL);
	int nr = 0;
	for (int p = 0; p < n; p++) {
		if (p == rank)
			continue;
		fill(out + (size_t)p * A2A, A2A, seed_of(rank, p, 99));
		T_OK(xp_irecv(w, in + (size_t)p * A2A, A2A, p, 2, XP_TAG_EXACT, &r[nr++]));
		T_OK(xp_isend(w, out + (size_t)p * A2A, A2A, p, 2, &r[nr++]));
	}
	T_OK(xp_waitall((size_t)nr, r, WAIT_MS, NULL));
	for (int p = 0; p < n; p++)
		if (p != rank)
			T_OK(check(in + (size_t)p * A2A, A2A, seed_of(p, rank, 99)));
	free(in);
	free(out);
	free(r);
	T_OK(xp_oob_barrier(ctx));
	xp_finalize(ctx);
	return 0;
}

struct dead_shared {
	_Atomic int claimed; /* rank 2 has claimed its slots and is about to die */
};
static struct dead_shared *dsh;

#define DEAD_MSGS 50

static int dead_body(int rank, void *arg)
{
	(void)arg;
	setenv("XP_TRANSPORTS", "shm", 1);
	setenv("XP_LOG_LEVEL", "none", 1); /* the expected loss */
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	T_EQ(xp_size(ctx), 3);
	if (rank == 2) {
		/* A send's claim, as shm_send_eager makes it (its first to
		 * rank 0: it maps rank 0's segment first), and no more. Rank 0
		 * never served rank 2: it must still step over the hole. */
		struct xpi_shm *s = shm_of(ctx);
		T_CHECK(s != NULL);
		T_OK(xpi_shm_connect(s, 0));
		struct shm_seg *seg = s->peers[0].seg;
		uint32_t head = 0;
		T_CHECK(shm_fifo_claim(&seg->fifo, &head, 3, &seg->lanes[2].note) >= 0);
		atomic_store(&dsh->claimed, 1);
		_exit(0); /* dies mid-send: no finalize, nothing published */
	}
	while (!atomic_load(&dsh->claimed))
		usleep(1000);
	if (rank == 1) {
		for (uint64_t i = 0; i < DEAD_MSGS; i++)
			T_OK(xp_send(w, &i, sizeof(i), 0, 7));
		T_OK(xp_send(w, (uint64_t[]){ 0 }, 8, 0, 8)); /* our last */
		/* Stay until rank 0 has it all: its progress needs our FIFO
		 * nothing, but our exit would be a loss too. */
		uint64_t done;
		T_OK(xp_recv(w, &done, sizeof(done), 0, 9, XP_TAG_EXACT, NULL));
		xp_finalize(ctx);
		return 0;
	}
	double t0 = t_now_s();
	for (uint64_t i = 0; i < DEAD_MSGS; i++) {
		uint64_t v;
		xp_status_t st;
		T_OK(xp_recv(w, &v, sizeof(v), 1, 7, XP_TAG_EXACT, &st));
		T_EQ(v, i);
	}
	double took = t_now_s() - t0;
	fprintf(stderr, "   rank 0: rank 1's %d messages behind rank 2's hole in %.2f s\n",
		DEAD_MSGS, took);
	T_CHECK(took < 20);
	/* Rank 2's loss is known and named. */
	uint64_t v;
	int rc = xp_recv(w, &v, sizeof(v), 2, 7, XP_TAG_EXACT, NULL);
	T_EQ(rc, -ECONNRESET);
	T_CHECK(strstr(xp_error_detail(), "rank 2") != NULL);
	T_OK(xp_recv(w, &v, sizeof(v), 1, 8, XP_TAG_EXACT, NULL));
	T_OK(xp_send(w, &v, sizeof(v), 1, 9));
	xp_finalize(ctx);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "sets") == 0)
		return mproc_run(RANKS, sets_body, NULL, 120, NULL, NULL) == 0 ? 0 : 1;
	if (argc == 2 && strcmp(argv[1], "dead-claim") == 0) {
		dsh = mmap(NULL, sizeof(*dsh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
			   -1, 0);
		T_CHECK(dsh != MAP_FAILED);
		/* Rank 2 dies on purpose, with status 0: every rank must pass. */
		return mproc_run(3, dead_body, NULL, 60, NULL, NULL) == 0 ? 0 : 1;
	}
	fprintf(stderr, "usage: test_shm_fifo sets|dead-claim\n");
	return 2;
}
