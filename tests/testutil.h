/* SPDX-License-Identifier: MIT */
/*
 * A few assertion macros for test programs. A test exits 0 when it passes,
 * 1 when it fails and 77 when the host lacks what it needs (meson's and
 * automake's skip code), printing why.
 */
#ifndef XP_TESTUTIL_H
#define XP_TESTUTIL_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "xport/xport.h"

#define T_SKIP 77

#define T_FAIL(...)                                                                                \
	do {                                                                                       \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);                               \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		exit(1);                                                                           \
	} while (0)

#define T_CHECK(cond)                                                                              \
	do {                                                                                       \
		if (!(cond))                                                                       \
			T_FAIL("check failed: %s", #cond);                                         \
	} while (0)

#define T_EQ(a, b)                                                                                 \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		if (_a != _b)                                                                      \
			T_FAIL("%s == %lld, expected %s == %lld", #a, _a, #b, _b);                 \
	} while (0)

/* Asserts an xp_ call returned 0 (or a count), printing its error text. */
#define T_OK(call)                                                                                 \
	do {                                                                                       \
		int _rc = (call);                                                                  \
		if (_rc < 0)                                                                       \
			T_FAIL("%s returned %d (%s) %s", #call, _rc, xp_strerror(_rc),             \
			       xp_error_detail());                                                 \
	} while (0)

/* Asserts that @text contains @sub (an error message names what it should). */
#define T_CONTAINS(text, sub)                                                                      \
	do {                                                                                       \
		const char *_t = (text);                                                           \
		if (strstr(_t, (sub)) == NULL)                                                     \
			T_FAIL("\"%s\" does not contain \"%s\"", _t, (sub));                       \
	} while (0)

/* Joins the job the launcher's XP_* variables describe as rank @rank. */
static inline xp_context_t *t_start_rank(int rank)
{
	xp_context_t *ctx;
	int rc = xp_init(NULL, &ctx);
	if (rc < 0)
		T_FAIL("rank %d: xp_init: %s: %s", rank, xp_strerror(rc), xp_error_detail());
	T_EQ(xp_rank(ctx), rank);
	return ctx;
}

/*
 * COLL_TEST_HOSTS=h, for a rank a launcher started: the ranks say they are
 * on h hosts (blocks of consecutive ranks, through XP_HOST_ID), so
 * transports mix (shared memory within a "host", TCP across) and allreduce
 * may go hierarchical. Returns h (0: unset).
 */
static inline int t_hosts_from_env(void)
{
	const char *hosts = getenv("COLL_TEST_HOSTS");
	int h = hosts != NULL ? atoi(hosts) : 0;
	int size = atoi(getenv("XP_SIZE")), rank = atoi(getenv("XP_RANK"));
	if (h > 0) {
		char name[32];
		snprintf(name, sizeof(name), "test-host-%d", rank / ((size + h - 1) / h));
		setenv("XP_HOST_ID", name, 1);
	}
	return h;
}

#define T_RUN(fn)                                                                                  \
	do {                                                                                       \
		fprintf(stderr, "-- %s\n", #fn);                                                   \
		fn();                                                                              \
	} while (0)

/* Seconds on the monotonic clock, for a test's bounds on how long a thing
 * took (generous ones: this is no benchmark). */
static inline double t_now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * A token sent around the ring of @w's ranks (to the right, from the left)
 * on @tag, twice: once it returns, every rank has at least started its
 * first pass, so what each did before it is done everywhere (counting its
 * connections, say) before any rank goes past the second. Uses only the
 * pairs with the two neighbours.
 */
static inline void t_ring_token_twice(xp_comm_t *w, uint64_t tag)
{
	int n = xp_comm_size(w), me = xp_comm_rank(w);
	int right = (me + 1) % n, left = (me + n - 1) % n;
	for (int pass = 0; pass < 2; pass++) {
		uint8_t token = 0;
		if (me != 0)
			T_OK(xp_recv(w, &token, 1, left, tag, XP_TAG_EXACT, NULL));
		T_OK(xp_send(w, &token, 1, right, tag));
		if (me == 0)
			T_OK(xp_recv(w, &token, 1, left, tag, XP_TAG_EXACT, NULL));
	}
}

/* Open descriptors of this process, not counting the one that lists them. */
static inline int t_count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	T_CHECK(d != NULL);
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		n += e->d_name[0] != '.';
	closedir(d);
	return n - 1;
}

#endif
