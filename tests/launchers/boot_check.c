/* SPDX-License-Identifier: MIT */
/*
 * The job's control channel under a real launcher (tests/launchers/run.sh,
 * case pmix-control): forms the job with the bootstrap alone (bootstrap.h,
 * from the launcher's environment, as xp_init does), then
 *   - allgathers of 0, 8 and 3000 bytes, each rank's part made from its
 *     rank and the operation, every slot checked on every rank;
 *   - a barrier;
 *   - with "mismatch": an allgather where rank 1 gives one byte more, which
 *     must fail on every rank with -EPROTO, naming a rank and both lengths.
 * Prints "boot_check: rank R of N ok" and exits 0, or says what is wrong
 * and exits 1.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "job/bootstrap.h"
#include "xport/xport.h"

static uint8_t byte_of(int rank, int op, size_t i)
{
	return (uint8_t)(rank * 31 + op * 7 + (int)i);
}

static int check_allgather(struct xpi_boot *b, int op, size_t len)
{
	int me = xpi_boot_rank(b), n = xpi_boot_size(b);
	uint8_t *mine = malloc(len + 1), *all = malloc(len * (size_t)n + 1);
	for (size_t i = 0; i < len; i++)
		mine[i] = byte_of(me, op, i);
	int rc = xpi_boot_allgather(b, mine, len, all);
	if (rc < 0) {
		fprintf(stderr, "boot_check: rank %d: allgather of %zu B: %s: %s\n", me, len,
			xp_strerror(rc), xp_error_detail());
	} else {
		for (int r = 0; r < n && rc == 0; r++)
			for (size_t i = 0; i < len; i++)
				if (all[(size_t)r * len + i] != byte_of(r, op, i)) {
					fprintf(stderr,
						"boot_check: rank %d: allgather of %zu B: byte %zu "
						"of rank %d's part is wrong\n",
						me, len, i, r);
					rc = -EPROTO;
					break;
				}
	}
	free(mine);
	free(all);
	return rc;
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		fprintf(stderr, "usage: boot_check EXPECTED_SIZE [mismatch]\n");
		return 2;
	}
	int want = atoi(argv[1]);
	bool mismatch = argc > 2 && strcmp(argv[2], "mismatch") == 0;
	struct xpi_boot_opts o;
	xpi_boot_opts_from_env(&o, 30000);
	struct xpi_boot *b;
	int rc = xpi_boot_create(&o, &b);
	if (rc != 0) {
		fprintf(stderr, "boot_check: xpi_boot_create: %d: %s\n", rc, xp_error_detail());
		return 1;
	}
	int me = xpi_boot_rank(b), n = xpi_boot_size(b);
	int bad = n != want;
	if (bad)
		fprintf(stderr, "boot_check: rank %d: a job of %d, expected %d\n", me, n, want);
	static const size_t lens[] = { 0, 8, 3000 };
	for (int k = 0; k < 3 && !bad; k++)
		bad = check_allgather(b, k, lens[k]) < 0;
	if (!bad && (rc = xpi_boot_barrier(b)) < 0) {
		fprintf(stderr, "boot_check: rank %d: barrier: %s: %s\n", me, xp_strerror(rc),
			xp_error_detail());
		bad = 1;
	}
	if (!bad && mismatch) {
		uint8_t part[9] = { 0 }, *all = malloc(9 * (size_t)n);
		rc = xpi_boot_allgather(b, part, me == 1 ? 9 : 8, all);
		free(all);
		if (rc != -EPROTO || strstr(xp_error_detail(), "contributed") == NULL) {
			fprintf(stderr,
				"boot_check: rank %d: lengths that differ: %d (%s), expected -EPROTO "
				"naming the lengths\n",
				me, rc, xp_error_detail());
			bad = 1;
		} else {
			printf("boot_check: rank %d: refused: %s\n", me, xp_error_detail());
		}
	}
	if (!bad)
		printf("boot_check: rank %d of %d ok\n", me, n);
	fflush(stdout);
	xpi_boot_destroy(b);
	return bad;
}
