/* SPDX-License-Identifier: MIT */
/*
 * A program that uses xport the way an outside project would: it includes
 * only <xport/xport.h> and is built with nothing but
 * `pkg-config --cflags --libs xport` against an installed copy
 * (ci/install-test.sh). Prints "consumer: ok" and exits 0 when every check
 * passes; prints what went wrong and exits 1 otherwise.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <xport/xport.h>

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			fprintf(stderr, "consumer: %s:%d: check failed: %s\n", __FILE__, __LINE__, \
				#cond);                                                            \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

#define CHECK_OK(call)                                                                             \
	do {                                                                                       \
		int rc_ = (call);                                                                  \
		if (rc_ < 0) {                                                                     \
			fprintf(stderr, "consumer: %s:%d: %s returned %d (%s) %s\n", __FILE__,     \
				__LINE__, #call, rc_, xp_strerror(rc_), xp_error_detail());        \
			return 1;                                                                  \
		}                                                                                  \
	} while (0)

enum { TAG_SELF = 7, TAG_PING = 100, TAG_PONG = 101 };

/* A singleton job (xp_init with no launcher variables): a rank sends to itself. */
static int check_singleton(void)
{
	xp_config_t cfg;
	xp_context_t *ctx = NULL;
	xp_config_init(&cfg);
	CHECK(cfg.struct_size == sizeof(cfg));
	CHECK_OK(xp_init(&cfg, &ctx));
	CHECK(ctx != NULL);
	CHECK(xp_rank(ctx) == 0);
	CHECK(xp_size(ctx) == 1);
	xp_comm_t *world = xp_comm_world(ctx);
	CHECK(world != NULL);
	CHECK(xp_comm_rank(world) == 0 && xp_comm_size(world) == 1);

	static const char msg[] = "hello from a consumer";
	char got[64];
	memset(got, 0, sizeof(got));
	xp_request_t *sreq = NULL;
	xp_status_t st;
	CHECK_OK(xp_isend(world, msg, sizeof(msg), 0, TAG_SELF, &sreq));
	CHECK_OK(xp_recv(world, got, sizeof(got), XP_ANY_SOURCE, TAG_SELF, XP_TAG_EXACT, &st));
	CHECK_OK(xp_wait(&sreq, XP_TIMEOUT_DEFAULT, NULL));
	CHECK(sreq == NULL);
	CHECK(st.error == 0 && st.source == 0 && st.tag == TAG_SELF && st.length == sizeof(msg));
	CHECK(memcmp(got, msg, sizeof(msg)) == 0);

	/* The documented error model: a bad rank is -EINVAL and has a text. */
	xp_request_t *bad = NULL;
	CHECK(xp_isend(world, msg, sizeof(msg), 5, TAG_SELF, &bad) == -EINVAL);
	CHECK(bad == NULL);
	const char *text = xp_strerror(-EINVAL);
	CHECK(text != NULL && text[0] != '\0');
	CHECK(xp_strerror(12345) != NULL);

	xp_finalize(ctx);
	xp_finalize(NULL); /* destroying NULL is harmless */
	return 0;
}

/* Two in-process ranks: rank 0 sends a ping, rank 1 answers with a pong. */
static int pingpong(xp_context_t *ctx, void *arg)
{
	(void)arg;
	xp_comm_t *world = xp_comm_world(ctx);
	int me = xp_comm_rank(world);
	CHECK(xp_comm_size(world) == 2);
	int peer = 1 - me;
	char buf[32];
	xp_status_t st;
	memset(buf, 0, sizeof(buf));
	if (me == 0) {
		CHECK_OK(xp_send(world, "ping", 5, peer, TAG_PING));
		CHECK_OK(xp_recv(world, buf, sizeof(buf), peer, TAG_PONG, XP_TAG_EXACT, &st));
		CHECK(strcmp(buf, "pong") == 0);
	} else {
		CHECK_OK(xp_recv(world, buf, sizeof(buf), XP_ANY_SOURCE, TAG_PING, XP_TAG_EXACT,
				 &st));
		CHECK(strcmp(buf, "ping") == 0);
		CHECK_OK(xp_send(world, "pong", 5, peer, TAG_PONG));
	}
	CHECK(st.source == peer && st.length == 5);
	return 0;
}

int main(void)
{
	if (check_singleton() != 0)
		return 1;
	int rc = xp_local_run(2, NULL, pingpong, NULL);
	if (rc != 0) {
		fprintf(stderr, "consumer: xp_local_run returned %d (%s)\n", rc, xp_strerror(rc));
		return 1;
	}
	printf("consumer: ok\n");
	return 0;
}
