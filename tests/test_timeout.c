/* SPDX-License-Identifier: MIT */
/*
 * Timeouts and cancellation: a receive whose message never comes, a
 * rendezvous send nobody receives, the default deadline of the blocking
 * calls, and xp_cancel. Each failure must name this rank, the peer, the tag
 * and the communicator, and a withdrawn send must never be delivered later.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "core/clock.h"
#include "xport/xport.h"
#include "testutil.h"

static _Atomic int step;

static void wait_step(int s)
{
	while (atomic_load(&step) < s)
		;
}

static int recv_timeout_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	xp_comm_t *w = xp_comm_world(ctx);
	if (xp_rank(ctx) == 0) {
		/* Sends tag 41, never the 42 that rank 1 waits for. */
		int v = 41;
		T_OK(xp_send(w, &v, sizeof(v), 1, 41));
		wait_step(1);
		return 0;
	}
	int v;
	xp_request_t *r;
	xp_status_t st;
	T_OK(xp_irecv(w, &v, sizeof(v), 0, 42, XP_TAG_EXACT, &r));
	int64_t t0 = xpi_now_ns();
	T_EQ(xp_wait(&r, 200, &st), -ETIMEDOUT);
	int64_t waited_ms = (xpi_now_ns() - t0) / 1000000;
	T_CHECK(r == NULL);
	T_EQ(st.error, -ETIMEDOUT);
	T_CHECK(waited_ms >= 200);
	const char *d = xp_error_detail();
	fprintf(stderr, "   detail: %s\n", d);
	T_CHECK(strstr(d, "rank 1:") != NULL);
	T_CHECK(strstr(d, "from rank 0") != NULL);
	T_CHECK(strstr(d, "tag 0x2a") != NULL);
	T_CHECK(strstr(d, "communicator 0") != NULL);
	T_CHECK(strstr(d, "same sequence of operations") != NULL);
	T_CHECK(strstr(d, "1 received (last tag 0x29)") != NULL);
	/* The cancelled receive took nothing: tag 41 is still there. */
	T_OK(xp_recv(w, &v, sizeof(v), 0, 41, XP_TAG_EXACT, &st));
	T_EQ(v, 41);

	/* Any-source receives name "any rank". */
	T_OK(xp_irecv(w, &v, sizeof(v), XP_ANY_SOURCE, 7, XP_TAG_EXACT, &r));
	T_EQ(xp_wait(&r, 50, NULL), -ETIMEDOUT);
	T_CHECK(strstr(xp_error_detail(), "from any rank") != NULL);
	atomic_store(&step, 1);
	return 0;
}

static void test_receive_timeout_names_everything(void)
{
	atomic_store(&step, 0);
	T_OK(xp_local_run(2, NULL, recv_timeout_body, NULL));
}

static int send_timeout_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	xp_comm_t *w = xp_comm_world(ctx);
	enum { LEN = 1 << 20 }; /* rendezvous: the payload waits at the sender */
	if (xp_rank(ctx) == 0) {
		uint8_t *buf = malloc(LEN);
		memset(buf, 0xaa, LEN);
		xp_request_t *r;
		T_OK(xp_isend(w, buf, LEN, 1, 0x99, &r));
		T_EQ(xp_wait(&r, 100, NULL), -ETIMEDOUT);
		/* The call the program made, and no mask: a send's tag is exact. */
		T_CHECK(strstr(xp_error_detail(), "xp_wait on an xp_isend to rank 1 tag 0x99 on") !=
			NULL);
		T_CHECK(strstr(xp_error_detail(), "mask") == NULL);
		/* The buffer is ours again: overwrite it, then send the real one. */
		memset(buf, 0xbb, LEN);
		free(buf);
		buf = malloc(LEN);
		memset(buf, 0xcc, LEN);
		atomic_store(&step, 1);
		T_OK(xp_send(w, buf, LEN, 1, 0x99));
		free(buf);
		return 0;
	}
	wait_step(1);
	uint8_t *buf = malloc(LEN);
	xp_status_t st;
	/* The withdrawn send is skipped: the receive gets the second one. */
	T_OK(xp_recv(w, buf, LEN, 0, 0x99, XP_TAG_EXACT, &st));
	for (size_t i = 0; i < LEN; i++)
		if (buf[i] != 0xcc)
			T_FAIL("byte %zu is 0x%x: a withdrawn send was delivered", i, buf[i]);
	free(buf);
	return 0;
}

static void test_send_timeout_withdraws(void)
{
	atomic_store(&step, 0);
	T_OK(xp_local_run(2, NULL, send_timeout_body, NULL));
}

static int default_timeout_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	if (xp_rank(ctx) == 1)
		return 0;
	int v;
	int64_t t0 = xpi_now_ns();
	/* Blocking calls never hang: they use the context's deadline. */
	T_EQ(xp_recv(xp_comm_world(ctx), &v, sizeof(v), 1, 3, XP_TAG_EXACT, NULL), -ETIMEDOUT);
	int64_t ms = (xpi_now_ns() - t0) / 1000000;
	T_CHECK(ms >= 150 && ms < 10000);
	return 0;
}

static void test_blocking_calls_have_a_deadline(void)
{
	xp_config_t cfg;
	xp_config_init(&cfg);
	cfg.timeout_ms = 150;
	T_OK(xp_local_run(2, &cfg, default_timeout_body, NULL));
	/* The environment sets it too. */
	setenv("XP_TIMEOUT_MS", "150", 1);
	T_OK(xp_local_run(2, NULL, default_timeout_body, NULL));
	unsetenv("XP_TIMEOUT_MS");
}

static void test_cancel(void)
{
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	int v = 5, got = 0;
	xp_request_t *r;
	T_OK(xp_irecv(w, &got, sizeof(got), 0, 1, XP_TAG_EXACT, &r));
	T_OK(xp_cancel(r));
	T_OK(xp_cancel(r)); /* twice is harmless */
	T_EQ(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL), -ECANCELED);
	T_CHECK(strstr(xp_error_detail(), "cancelled") != NULL);
	/* A matched receive is past cancelling: it completes normally. */
	T_OK(xp_send(w, &v, sizeof(v), 0, 1));
	xp_progress(ctx); /* now it waits in the unexpected queue */
	T_OK(xp_irecv(w, &got, sizeof(got), 0, 1, XP_TAG_EXACT, &r));
	T_OK(xp_cancel(r));
	T_OK(xp_wait(&r, XP_TIMEOUT_DEFAULT, NULL));
	T_EQ(got, 5);
	xp_finalize(ctx);
}

int main(void)
{
	setenv("XP_LOG_LEVEL", "none", 1); /* the errors are expected here */
	T_RUN(test_receive_timeout_names_everything);
	T_RUN(test_send_timeout_withdraws);
	T_RUN(test_blocking_calls_have_a_deadline);
	T_RUN(test_cancel);
	return 0;
}
