/* SPDX-License-Identifier: MIT */
/*
 * One rank of a job a real launcher started (tests/launchers/run.sh):
 * xp_init from whatever the launcher set, then checks that the job is the
 * one the test asked for: a size of argv[1], and an allreduce of the ranks
 * that gives 0 + 1 + ... + (size - 1) on every rank (so every rank is in
 * one job, each rank once). Prints one line per rank,
 *   job_check: rank R of N ok
 * and exits 0, or says what is wrong and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include <xport/xport.h>

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: job_check EXPECTED_SIZE\n");
		return 2;
	}
	int want = atoi(argv[1]);
	xp_context_t *ctx;
	int rc = xp_init(NULL, &ctx);
	if (rc < 0) {
		fprintf(stderr, "job_check: xp_init: %s: %s\n", xp_strerror(rc), xp_error_detail());
		return 1;
	}
	int me = xp_rank(ctx), n = xp_size(ctx);
	int64_t mine = me, sum = -1, expect = (int64_t)n * (n - 1) / 2;
	rc = xp_allreduce(xp_comm_world(ctx), &mine, &sum, 1, XP_INT64, XP_SUM);
	int bad = 0;
	if (rc < 0) {
		fprintf(stderr, "job_check: rank %d: xp_allreduce: %s: %s\n", me, xp_strerror(rc),
			xp_error_detail());
		bad = 1;
	} else if (n != want || sum != expect) {
		fprintf(stderr,
			"job_check: rank %d: a job of %d ranks (expected %d), sum of ranks %lld "
			"(expected %lld)\n",
			me, n, want, (long long)sum, (long long)expect);
		bad = 1;
	} else {
		printf("job_check: rank %d of %d ok\n", me, n);
	}
	fflush(stdout);
	xp_finalize(ctx);
	return bad;
}
