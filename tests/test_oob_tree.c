/* SPDX-License-Identifier: MIT */
/*
 * The out-of-band barrier and allgather along the tree over the job's own
 * transports (src/job/oob_tree.h), between real processes:
 *   ops      (a rank under xprun) xp_oob_allgather of rank-specific data of
 *            0, 8 and 1000 bytes, every slot checked, and barriers in a
 *            loop; then, from xp_init on, no socket of the bootstrap is
 *            left: none whose local (rank 0) or peer (the others) port is
 *            the rendezvous port of XP_ADDR.
 *   mismatch (a rank under xprun) rank 3 gives 16 bytes where the others
 *            give 8: every rank fails with -EPROTO, and the text names
 *            both lengths; the next operations work again.
 *   exit     (forks 7 ranks itself) rank 4, a leaf under rank 3, exits
 *            without xp_finalize right after xp_init: every other rank's
 *            next barrier fails within a few seconds (XP_TIMEOUT_MS is 20
 *            s) with an error that names rank 4 and xp_oob_barrier.
 * Usage: test_oob_tree ops|mismatch|exit. XP_TRANSPORTS chooses the links.
 */
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "xport/xport.h"
#include "core/clock.h"
#include "mproc.h"
#include "testutil.h"

#define ROUNDS 20

static uint8_t byte_of(int rank, size_t i, int round)
{
	return (uint8_t)(rank * 31 + (int)i * 7 + round * 13 + 1);
}

static void allgather_checked(xp_context_t *ctx, size_t len, int round)
{
	int n = xp_size(ctx), me = xp_rank(ctx);
	uint8_t *mine = malloc(len + 1), *all = malloc((size_t)n * len + 1);
	T_CHECK(mine != NULL && all != NULL);
	for (size_t i = 0; i < len; i++)
		mine[i] = byte_of(me, i, round);
	memset(all, 0xee, (size_t)n * len + 1);
	T_OK(xp_oob_allgather(ctx, mine, len, all));
	for (int r = 0; r < n; r++)
		for (size_t i = 0; i < len; i++)
			if (all[(size_t)r * len + i] != byte_of(r, i, round))
				T_FAIL("rank %d: allgather of %zu bytes, round %d: rank %d's byte "
				       "%zu is %u, expected %u",
				       me, len, round, r, i, all[(size_t)r * len + i],
				       byte_of(r, i, round));
	T_EQ(all[(size_t)n * len], 0xee); /* nothing written beyond */
	free(mine);
	free(all);
}

/* The port of XP_ADDR ("host:port" or "[v6]:port"). */
static int boot_port(void)
{
	const char *a = getenv("XP_ADDR");
	T_CHECK(a != NULL);
	const char *colon = strrchr(a, ':');
	T_CHECK(colon != NULL);
	return atoi(colon + 1);
}

static int sock_port(int fd, bool peer)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if ((peer ? getpeername(fd, (struct sockaddr *)&ss, &len) :
		    getsockname(fd, (struct sockaddr *)&ss, &len)) < 0)
		return -1;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return -1;
}

/* This process's TCP sockets on the rendezvous port: rank 0's listener and
 * accepted connections (local port), the others' connection to rank 0
 * (peer port). Also counts the open descriptors into *@nfds. */
static int boot_sockets(int me, int *nfds)
{
	int port = boot_port(), n = 0;
	*nfds = 0;
	DIR *d = opendir("/proc/self/fd");
	T_CHECK(d != NULL);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		int fd = atoi(e->d_name);
		if (fd == dirfd(d))
			continue;
		(*nfds)++;
		if (sock_port(fd, me != 0) == port)
			n++;
	}
	closedir(d);
	return n;
}

static int run_ops(void)
{
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	int me = xp_rank(ctx), n = xp_size(ctx), nfds;
	int left = boot_sockets(me, &nfds);
	if (left != 0)
		T_FAIL("rank %d of %d: %d bootstrap sockets are open after xp_init", me, n, left);
	if (me == 0)
		fprintf(stderr,
			"   rank 0 of %d: %d descriptors after xp_init, none of the bootstrap\n", n,
			nfds);
	static const size_t lens[] = { 0, 8, 1000 };
	for (int round = 0; round < 3; round++)
		for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++)
			allgather_checked(ctx, lens[k], round);
	int64_t t0 = xpi_now_ns();
	for (int i = 0; i < ROUNDS; i++)
		T_OK(xp_oob_barrier(ctx));
	if (me == 0)
		fprintf(stderr, "   %d barriers of %d ranks: %.1f us each\n", ROUNDS, n,
			(double)(xpi_now_ns() - t0) / ROUNDS / 1e3);
	allgather_checked(ctx, 8, 99);
	T_EQ(boot_sockets(me, &nfds), 0);
	xp_finalize(ctx);
	return 0;
}

static int run_mismatch(void)
{
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	int me = xp_rank(ctx), n = xp_size(ctx);
	T_CHECK(n > 3);
	uint8_t mine[16] = { 0 }, *all = calloc((size_t)n, 16);
	T_CHECK(all != NULL);
	size_t len = me == 3 ? 16 : 8;
	int rc = xp_oob_allgather(ctx, mine, len, all);
	if (rc != -EPROTO)
		T_FAIL("rank %d: allgather of unequal lengths returned %d (%s), expected -EPROTO",
		       me, rc, xp_error_detail());
	const char *d = xp_error_detail();
	T_CONTAINS(d, "xp_oob_allgather");
	/* "rank 3 gave 16 bytes where rank 0 gave 8", or rank 3 found it:
	 * "rank 4 gave 8 bytes where rank 3 gave 16". */
	T_CONTAINS(d, "rank 3 gave 16");
	T_CONTAINS(d, "gave 8");
	if (me == 0)
		fprintf(stderr, "   %s\n", d);
	/* The failure spent one operation on every rank alike. */
	allgather_checked(ctx, 8, 5);
	T_OK(xp_oob_barrier(ctx));
	free(all);
	xp_finalize(ctx);
	return 0;
}

#define EXIT_RANKS 7
#define VICTIM 4

static int exit_body(int rank, void *arg)
{
	(void)arg;
	xp_context_t *ctx = t_start_rank(rank);
	if (rank == VICTIM)
		_exit(0); /* no xp_finalize, no barrier */
	int64_t t0 = xpi_now_ns();
	int rc = xp_oob_barrier(ctx);
	double took = (double)(xpi_now_ns() - t0) / 1e9;
	const char *d = xp_error_detail();
	fprintf(stderr, "   rank %d: %.3f s: %d %s\n", rank, took, rc, d);
	if (rc >= 0)
		T_FAIL("rank %d: the barrier passed without rank %d", rank, VICTIM);
	T_CHECK(took < 5.0); /* not the 20 s timeout */
	T_CONTAINS(d, "rank 4");
	T_CONTAINS(d, "xp_oob_barrier");
	xp_finalize(ctx);
	return 0;
}

static int run_exit(void)
{
	setenv("XP_TIMEOUT_MS", "20000", 1);
	T_EQ(mproc_run(EXIT_RANKS, exit_body, NULL, 60, NULL, NULL), 0);
	return 0;
}

int main(int argc, char **argv)
{
	const char *what = argc > 1 ? argv[1] : "ops";
	if (strcmp(what, "ops") == 0)
		return run_ops();
	if (strcmp(what, "mismatch") == 0)
		return run_mismatch();
	if (strcmp(what, "exit") == 0)
		return run_exit();
	fprintf(stderr, "usage: test_oob_tree ops|mismatch|exit\n");
	return 2;
}
