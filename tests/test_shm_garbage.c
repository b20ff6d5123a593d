/* SPDX-License-Identifier: MIT */
/*
 * A shared-memory peer that writes garbage, while rendezvous operations with
 * it are already matched (issue 24, 4.1): rank 0 has a receive matched to
 * rank 1's announcement and claimed (rank 1 was asked to stream it) and a
 * send rank 1 has claimed; both are in the transport's hands, not the
 * engine's queues. Rank 1 then stays alive but writes garbage into rank 0's
 * segment, one way per section:
 *  - chunk: a chunk header claiming more bytes than a chunk holds;
 *  - slot:  a FIFO slot of a kind that does not exist, naming rank 1.
 * Rank 0 must fail both operations promptly (-EPROTO, the detail naming
 * rank 1), though no deadline would end them: they used to wait for ever,
 * because the transport's cleanup for a lost peer only ran for a process
 * that was gone.
 *
 * Usage: test_shm_garbage chunk|slot. Exit: 0 pass, 1 fail, 77 skip.
 */
#include <errno.h>
#include <sched.h>
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

/* Larger than what the chunks carry before the receiver empties them, so
 * neither transfer can finish in the window where both ranks poll. */
#define BIG (16u << 20)
#define FAIL_WITHIN_MS 5000

struct shared {
	_Atomic int claimed;   /* ranks that saw both transfers claimed */
	_Atomic int corrupted; /* rank 1 has written its garbage */
	_Atomic int done;      /* rank 0 has seen what it wanted */
};
static struct shared *sh;
static bool slot_variant;

/* Milliseconds on the monotonic clock. */
static int64_t now_ms(void)
{
	return (int64_t)(t_now_s() * 1000);
}

static struct xpi_shm *shm_of(xp_context_t *ctx)
{
	for (int i = 0; i < ctx->ntls; i++)
		if (ctx->tls[i].ops == &xpi_shm_ops)
			return ctx->tls[i].tl;
	return NULL;
}

/* Our receive from @peer is claimed (its sender was asked to stream it) and
 * our send @peer announced is claimed by it: both are the transport's. */
static bool both_claimed(struct xpi_shm *s, int peer)
{
	struct shm_peer *p = &s->peers[peer];
	if (xpi_dlist_empty(&p->rx) || xpi_dlist_empty(&p->tx_out))
		return false;
	const struct shm_rx *x = xpi_container_of(p->rx.next, struct shm_rx, link);
	const xp_request_t *r = xpi_container_of(p->tx_out.next, xp_request_t, tl_link);
	uint32_t st = atomic_load(&s->mine->rndv[r->tl_id].state) & 3;
	return x->claimed && st == RNDV_CLAIMED;
}

static void write_garbage(struct xpi_shm *s, int me)
{
	struct shm_seg *seg = s->peers[0].seg;
	if (slot_variant) {
		/* A message of a kind that does not exist, naming us. */
		uint32_t head = 0;
		int64_t pos = shm_fifo_claim(&seg->fifo, &head, 1, &seg->lanes[me].note);
		T_CHECK(pos >= 0);
		struct xpi_msg_hdr h = { .comm = 0, .src = me, .tag = 1, .len = 0 };
		shm_fifo_publish(shm_fifo_slot(&seg->fifo, (uint32_t)pos), (uint32_t)pos, me, &h,
				 0xee);
	} else {
		/* The chunk set rank 0 lent us for the stream it claimed. */
		uint32_t k = atomic_load(&seg->lanes[me].set);
		T_CHECK(k < NSET);
		struct shm_set *b = &seg->sets[k];
		for (unsigned c = 0; c < NCHUNK; c++)
			atomic_store(&b->chunk[c].state, CHUNK_FULL | (CHUNK + 1));
	}
	xpi_shm_notify(&s->peers[0]);
}

/* Polls @r for at most @ms; returns its result, or -EINPROGRESS. */
static int poll_for(xp_request_t **r, int ms)
{
	int64_t until = now_ms() + ms;
	while (now_ms() < until) {
		int rc = xp_test(r, NULL);
		if (rc != 0)
			return rc == 1 ? 0 : rc;
		sched_yield();
	}
	return -EINPROGRESS;
}

static void expect_failed(xp_request_t **r, const char *what)
{
	int64_t t0 = now_ms();
	int rc = poll_for(r, 3 * FAIL_WITHIN_MS);
	int64_t el = now_ms() - t0;
	fprintf(stderr, "   rank 0: %s ended after %lld ms: %d (%s)\n", what, (long long)el, rc,
		rc == -EINPROGRESS ? "still pending" : xp_error_detail());
	T_EQ(rc, -EPROTO);
	T_CHECK(strstr(xp_error_detail(), "rank 1") != NULL);
	T_CHECK(el < FAIL_WITHIN_MS);
}

static int body(int rank, void *arg)
{
	(void)arg;
	setenv("XP_TRANSPORTS", "shm", 1);
	setenv("XP_SHM_CMA_MIN", "off", 1); /* every payload through the chunks */
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	struct xpi_shm *s = shm_of(ctx);
	T_CHECK(s != NULL);
	int peer = 1 - rank;
	uint8_t *in = malloc(BIG), *out = calloc(1, BIG);
	T_CHECK(in != NULL && out != NULL);
	xp_request_t *r, *sr;
	T_OK(xp_irecv(w, in, BIG, peer, (uint64_t)peer, XP_TAG_EXACT, &r));
	T_OK(xp_isend(w, out, BIG, peer, (uint64_t)rank, &sr));
	/* Both announced before either polls for the other's. */
	T_OK(xp_oob_barrier(ctx));
	int64_t until = now_ms() + 10000;
	while (!both_claimed(s, peer)) {
		T_CHECK(now_ms() < until);
		T_EQ(xp_test(&r, NULL), 0);
		T_EQ(xp_test(&sr, NULL), 0);
	}
	/* Both claimed on both sides. Not an out-of-band barrier: that goes
	 * over this very transport now, and its progress could finish the
	 * transfers the garbage must find under way. */
	atomic_fetch_add(&sh->claimed, 1);
	while (atomic_load(&sh->claimed) < 2) {
		T_CHECK(now_ms() < until);
		usleep(1000);
	}
	if (rank == 1) {
		write_garbage(s, rank);
		atomic_store(&sh->corrupted, 1);
		/* Alive but silent: rank 0 must not need our process to end. */
		for (int i = 0; i < 30000 && !atomic_load(&sh->done); i++)
			usleep(1000);
		_exit(0);
	}
	while (!atomic_load(&sh->corrupted))
		usleep(1000);
	expect_failed(&r, "the matched receive");
	expect_failed(&sr, "the claimed send");
	atomic_store(&sh->done, 1);
	xp_finalize(ctx);
	free(in);
	free(out);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2 || (strcmp(argv[1], "chunk") != 0 && strcmp(argv[1], "slot") != 0)) {
		fprintf(stderr, "usage: test_shm_garbage chunk|slot\n");
		return 1;
	}
	slot_variant = strcmp(argv[1], "slot") == 0;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	T_CHECK(sh != MAP_FAILED);
	int bad = mproc_run(2, body, NULL, 60, NULL, NULL);
	return bad == 0 ? 0 : 1;
}
