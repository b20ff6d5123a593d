/* SPDX-License-Identifier: MIT */
/*
 * Engine mechanisms that the in-process transport never exercises by
 * itself: restoring send order when a backend delivers a peer's messages
 * out of order or twice (as a lossy datagram path or several lanes will),
 * and handing user registrations to the backends' hooks.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

#include "core/compiler.h"
#include "core/engine.h"
#include "inproc/job.h"
#include "xport/xport.h"
#include "testutil.h"

/* Delivers an inline message from rank 0 to @ctx as a backend would. */
static void deliver(xp_context_t *ctx, uint32_t peer_seq, int value)
{
	struct xpi_msg m = {
		.u.key = { .comm = 0, .src = 0, .tag = 77 },
		.kind = XPI_MSG_INLINE,
		.peer_seq = peer_seq,
		.len = sizeof(value),
		.data = &value,
	};
	T_CHECK(xpi_owner_try_acquire(ctx));
	xpi_engine_deliver(ctx, &m);
	xpi_owner_release(ctx);
}

static void test_out_of_order_delivery(void)
{
	xp_local_job_t *job;
	xp_context_t *ctx;
	setenv("XP_LOG_LEVEL", "none", 1);
	T_OK(xp_local_job_create(2, NULL, &job));
	T_OK(xp_local_job_context(job, 1, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	/* Sequence numbers 3, 1, 0, 1 (duplicate), 2 carry values 30, 10, 0, 99, 20. */
	deliver(ctx, 3, 30);
	deliver(ctx, 1, 10);
	xp_stats_t s;
	T_OK(xp_stats_get(ctx, &s));
	T_EQ(s.unexpected_now, 0); /* held back: nothing before them has come */
	deliver(ctx, 0, 0);
	deliver(ctx, 1, 99); /* a duplicate: dropped */
	deliver(ctx, 2, 20);
	T_OK(xp_stats_get(ctx, &s));
	T_EQ(s.unexpected_now, 4);
	for (int i = 0; i < 4; i++) {
		int v = -1;
		xp_status_t st;
		T_OK(xp_recv(w, &v, sizeof(v), XP_ANY_SOURCE, 0, XP_TAG_ANY, &st));
		T_EQ(v, i * 10); /* send order, not arrival order */
	}
	int v;
	xp_request_t *r;
	T_OK(xp_irecv(w, &v, sizeof(v), 0, 77, XP_TAG_EXACT, &r));
	T_EQ(xp_wait(&r, 50, NULL), -ETIMEDOUT); /* the duplicate is gone */
	/* Credit came back once for each of the four messages: the duplicate
	 * was a retransmission, never charged by its sender. */
	T_EQ(ctx->peers[0].eager_returned, 4 * xpi_eager_cost(sizeof(int)));
	xp_local_job_destroy(job);
	unsetenv("XP_LOG_LEVEL");
}

/* A duplicate of a message still held early (as a retransmitting datagram
 * path sends): deliveries 1, 1, 2, 0, 3 must pass all four to matching.
 * The held list once kept both copies of 1, stopped at the second, and
 * wedged the stream with 2 and 3 behind it. */
static void test_duplicate_of_held_message(void)
{
	xp_local_job_t *job;
	xp_context_t *ctx;
	T_OK(xp_local_job_create(2, NULL, &job));
	T_OK(xp_local_job_context(job, 1, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	const uint32_t order[] = { 1, 1, 2, 0, 3, 2, 0 };
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		deliver(ctx, order[i], (int)order[i] * 10);
	xp_stats_t s;
	T_OK(xp_stats_get(ctx, &s));
	T_EQ(s.unexpected_now, 4);
	for (int i = 0; i < 4; i++) {
		int v = -1;
		T_OK(xp_recv(w, &v, sizeof(v), 0, 77, XP_TAG_EXACT, NULL));
		T_EQ(v, i * 10);
	}
	T_EQ(ctx->peers[0].recv_seq, 4);
	T_EQ(ctx->peers[0].eager_returned, 4 * xpi_eager_cost(sizeof(int)));
	T_CHECK(xpi_dlist_empty(&ctx->peers[0].held));
	xp_local_job_destroy(job);
}

static void test_registration_reaches_backend(void)
{
	xp_local_job_t *job;
	xp_context_t *c0, *c1;
	T_OK(xp_local_job_create(2, NULL, &job));
	T_OK(xp_local_job_context(job, 0, &c0));
	T_OK(xp_local_job_context(job, 1, &c1));
	struct xpi_inproc *tl = c0->tls[0].tl;
	/* The pool was registered at creation, once per region. */
	int64_t base = atomic_load(&tl->regs_live);
	T_EQ(base, XPI_POOL_NCLASSES);

	enum { LEN = 1 << 20 };
	uint8_t *buf = malloc(2 * LEN);
	memset(buf, 0x5a, 2 * LEN);
	xp_mem_t *mem;
	T_OK(xp_mem_register(c0, buf, 2 * LEN, &mem));
	T_EQ(atomic_load(&tl->regs_live), base + 1);

	/* A rendezvous send from inside the registration uses it. */
	xp_request_t *s, *r;
	uint8_t *in = malloc(LEN);
	T_OK(xp_isend(xp_comm_world(c0), buf + 4096, LEN, 1, 1, &s));
	T_OK(xp_irecv(xp_comm_world(c1), in, LEN, 0, 1, XP_TAG_EXACT, &r));
	T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(atomic_load(&tl->rts_registered), 1);
	T_EQ(in[0], 0x5a);
	T_EQ(in[LEN - 1], 0x5a);
	/* One that is not inside it does not. */
	uint8_t *other = malloc(LEN);
	memset(other, 1, LEN);
	T_OK(xp_isend(xp_comm_world(c0), other, LEN, 1, 2, &s));
	T_OK(xp_recv(xp_comm_world(c1), in, LEN, 0, 2, XP_TAG_EXACT, NULL));
	T_OK(xp_wait(&s, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(atomic_load(&tl->rts_registered), 1);

	xp_mem_deregister(mem);
	xp_progress(c0);
	T_EQ(atomic_load(&tl->regs_live), base);
	free(buf);
	free(in);
	free(other);
	xp_local_job_destroy(job);
}

/*
 * Another thread's push into the command queue that is half done (its
 * exchange of the tail made, its link not yet written) hides everything
 * pushed after it from the owner's drain. A thread whose earlier command
 * sits behind it must not see its next command run first.
 */
struct half_push {
	struct xpi_cmd cmd;
	struct xpi_qnode *prev;
	_Atomic int ran;
};

static void half_push_run(struct xp_context *ctx, struct xpi_cmd *cmd)
{
	(void)ctx;
	atomic_store(&xpi_container_of(cmd, struct half_push, cmd)->ran, 1);
}

static void half_push_begin(xp_context_t *ctx, struct half_push *h)
{
	*h = (struct half_push){ .cmd = { .type = XPI_CMD_TL, .run = half_push_run } };
	atomic_store(&h->cmd.node.next, NULL);
	h->prev = atomic_exchange(&ctx->cmdq.tail, &h->cmd.node);
}

static void *half_push_finish(void *arg)
{
	struct half_push *h = arg;
	nanosleep(&(struct timespec){ .tv_nsec = 20 * 1000000 }, NULL);
	atomic_store_explicit(&h->prev->next, &h->cmd.node, memory_order_release);
	return NULL;
}

struct second_op {
	xp_comm_t *comm;
	xp_request_t **cancel; /* cancel *cancel, or NULL: send value 2 */
	xp_request_t *sent;
};

static void *second_op_run(void *arg)
{
	struct second_op *op = arg;
	static const int two = 2;
	if (op->cancel != NULL)
		T_OK(xp_cancel(*op->cancel));
	else
		T_OK(xp_isend(op->comm, &two, sizeof(two), 1, 9, &op->sent));
	return NULL;
}

/* Runs the first operation while this thread holds the token with a half
 * push queued, then lets go and runs @op on another thread while the half
 * push completes 20 ms later. */
static void behind_half_push(xp_context_t *ctx, void (*first)(void *), void *arg,
			     struct second_op *op)
{
	struct half_push h;
	T_CHECK(xpi_owner_try_acquire(ctx)); /* as if another thread owned the rank */
	half_push_begin(ctx, &h);
	first(arg);                   /* finds the token taken: queued behind the half push */
	atomic_store(&ctx->owner, 0); /* let go without draining */
	pthread_t finisher, second;
	T_EQ(pthread_create(&finisher, NULL, half_push_finish, &h), 0);
	T_EQ(pthread_create(&second, NULL, second_op_run, op), 0);
	pthread_join(second, NULL);
	pthread_join(finisher, NULL);
	xp_progress(ctx);
	T_EQ(atomic_load(&h.ran), 1);
}

static const int one = 1;
static xp_request_t *first_req;
static void send_one(void *comm)
{
	T_OK(xp_isend(comm, &one, sizeof(one), 1, 9, &first_req));
}

static int recv_slot;
static void post_recv(void *comm)
{
	T_OK(xp_irecv(comm, &recv_slot, sizeof(recv_slot), 1, 9, XP_TAG_EXACT, &first_req));
}

static void test_order_behind_half_push(void)
{
	xp_local_job_t *job;
	xp_context_t *c0, *c1;
	T_OK(xp_local_job_create(2, NULL, &job));
	T_OK(xp_local_job_context(job, 0, &c0));
	T_OK(xp_local_job_context(job, 1, &c1));
	xp_comm_t *w0 = xp_comm_world(c0), *w1 = xp_comm_world(c1);

	/* Two sends from one thread to one (peer, tag) arrive in order. */
	struct second_op op = { .comm = w0 };
	behind_half_push(c0, send_one, w0, &op);
	T_OK(xp_wait(&first_req, XP_TIMEOUT_DEFAULT, NULL));
	T_OK(xp_wait(&op.sent, XP_TIMEOUT_DEFAULT, NULL));
	int a = 0, b = 0;
	T_OK(xp_recv(w1, &a, sizeof(a), 0, 9, XP_TAG_EXACT, NULL));
	T_OK(xp_recv(w1, &b, sizeof(b), 0, 9, XP_TAG_EXACT, NULL));
	T_EQ(a, 1);
	T_EQ(b, 2);

	/* A cancel never overtakes its own post: the receive ends cancelled,
	 * not posted for ever. */
	struct second_op cancel = { .comm = w0, .cancel = &first_req };
	behind_half_push(c0, post_recv, w0, &cancel);
	T_EQ(xp_wait(&first_req, 1000, NULL), -ECANCELED);
	xp_local_job_destroy(job);
}

/* Operations still posted or queued when a rank goes away end cancelled,
 * saying why; they once stayed incomplete for ever. */
static void test_teardown_completes_posts(void)
{
	xp_local_job_t *job;
	xp_context_t *c0;
	T_OK(xp_local_job_create(2, NULL, &job));
	T_OK(xp_local_job_context(job, 0, &c0));
	xp_comm_t *w = xp_comm_world(c0);
	int a, b;
	xp_request_t *exact, *wild, *queued;
	T_OK(xp_irecv(w, &a, sizeof(a), 1, 3, XP_TAG_EXACT, &exact));
	T_OK(xp_irecv(w, &b, sizeof(b), XP_ANY_SOURCE, 0, XP_TAG_ANY, &wild));
	/* One more, handed over while "another thread" holds the token. */
	T_CHECK(xpi_owner_try_acquire(c0));
	T_OK(xp_irecv(w, &b, sizeof(b), 1, 4, XP_TAG_EXACT, &queued));
	atomic_store(&c0->owner, 0);
	xp_local_job_destroy(job);
	xp_request_t *reqs[] = { exact, wild, queued };
	for (int i = 0; i < 3; i++) {
		T_EQ(xp_test(&reqs[i], NULL), -ECANCELED);
		T_CHECK(strstr(xp_error_detail(), "finalized") != NULL);
	}
}

int main(void)
{
	T_RUN(test_out_of_order_delivery);
	T_RUN(test_duplicate_of_held_message);
	T_RUN(test_order_behind_half_push);
	T_RUN(test_teardown_completes_posts);
	T_RUN(test_registration_reaches_backend);
	return 0;
}
