/* SPDX-License-Identifier: MIT */
/*
 * Every member of a communicator makes the same automatic allreduce
 * choice when its hosts hold different numbers of ranks (issue 24, 5.1:
 * with hosts {0,3} {1} {2}, ranks 0 and 3 chose Rabenseifner's and 1 and
 * 2 the hierarchical allreduce, and every rank timed out).
 *
 * Run under xprun; COLL_AGREE_HOSTS lists each rank's host ("0,1,2,0":
 * ranks 0 and 3 share a host; cycled if shorter than the job). The world
 * and every part of it of 3 ranks or more (xp_comm_split) is checked, so
 * one job covers many uneven layouts; with COLL_AGREE_SHAPES set, instead,
 * one part for every uneven shape of 3 to 8 ranks (the hosts' sizes: 46
 * of them, from 2+1 to 2+1+1+1+1+1+1), from a job whose hosts have room
 * for all. For each, at counts around every point where the choice
 * changes (found by rank 0 of the part, sent to all), every member's
 * xp_allreduce_algo_get must agree, and then the allreduce must finish
 * with the right sum.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "testutil.h"

#define MAX_COUNTS 64
/* The choice is checked up to this many elements, allreduces run up to
 * RUN_MAX (the 2 shared cores of the test machine). */
#define SCAN_MAX (1u << 22)
#define RUN_MAX (1u << 17)

static const xp_dtype_t types[] = { XP_INT32, XP_FLOAT64 };

struct counts {
	uint32_t n;
	uint32_t c[MAX_COUNTS];
};

static void add(struct counts *cs, uint64_t c)
{
	if (c == 0 || c > SCAN_MAX || cs->n == MAX_COUNTS)
		return;
	for (uint32_t i = 0; i < cs->n; i++)
		if (cs->c[i] == c)
			return;
	cs->c[cs->n++] = (uint32_t)c;
}

static int algo_of(xp_comm_t *comm, size_t count, xp_dtype_t dt)
{
	const char *name;
	int a = xp_allreduce_algo_get(comm, count, dt, &name);
	T_CHECK(a > 0);
	return a;
}

/* Counts on both sides of every change of this rank's choice, and the
 * few every layout should see (the among them). */
static void find_counts(xp_comm_t *comm, xp_dtype_t dt, struct counts *cs)
{
	int p = xp_comm_size(comm);
	cs->n = 0;
	add(cs, 1);
	add(cs, (uint64_t)p - 1);
	add(cs, (uint64_t)p);
	add(cs, (uint64_t)p + 1);
	add(cs, 65537);
	add(cs, 131072);
	uint32_t lo = 1;
	int alo = algo_of(comm, lo, dt);
	for (uint32_t hi = 2; hi <= SCAN_MAX; lo = hi, hi *= 2) {
		int ahi = algo_of(comm, hi, dt);
		if (ahi == alo)
			continue;
		/* Bisect for the first count that chooses differently. */
		uint32_t a = lo, b = hi;
		while (b - a > 1) {
			uint32_t m = a + (b - a) / 2;
			if (algo_of(comm, m, dt) == alo)
				a = m;
			else
				b = m;
		}
		add(cs, a);
		add(cs, b);
		add(cs, (uint64_t)b + 1);
		alo = ahi;
	}
}

static const char *name_of(int algo)
{
	static const char *const names[] = {
		"auto",         "recursive_doubling", "ring",
		"hierarchical", "rabenseifner",       "shared_memory"
	};
	return algo > 0 && algo < (int)(sizeof(names) / sizeof(names[0])) ? names[algo] : "?";
}

static void check_comm(xp_comm_t *comm, int32_t wr, int world_size, const char *layout)
{
	int p = xp_comm_size(comm), me = xp_comm_rank(comm);
	int *algos = malloc(sizeof(int) * MAX_COUNTS), *all = malloc(sizeof(int) * MAX_COUNTS * p);
	int32_t *who = malloc(sizeof(int32_t) * (size_t)p);
	T_CHECK(algos != NULL && all != NULL && who != NULL);
	T_OK(xp_allgather(comm, &wr, who, 1, XP_INT32));
	long long members = 0;
	for (int r = 0; r < p; r++)
		members += who[r] + 1;
	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		xp_dtype_t dt = types[t];
		struct counts cs;
		if (me == 0)
			find_counts(comm, dt, &cs);
		T_OK(xp_bcast(comm, &cs, sizeof(cs) / 4, XP_INT32, 0));
		for (uint32_t i = 0; i < cs.n; i++)
			algos[i] = algo_of(comm, cs.c[i], dt);
		T_OK(xp_allgather(comm, algos, all, cs.n, XP_INT32));
		for (int r = 0; r < p; r++)
			for (uint32_t i = 0; i < cs.n; i++)
				if (all[r * cs.n + i] != all[i])
					T_FAIL("hosts %s, %d members (world rank %d first): %u "
					       "elements of type %d: member %d chooses %d, member 0 "
					       "%d",
					       layout, p, who[0], cs.c[i], (int)dt, r,
					       all[r * cs.n + i], all[i]);
		if (me == 0 && p == world_size)
			for (uint32_t i = 0; i < cs.n; i++)
				fprintf(stderr, "   world, type %d, %u elements: %s\n", (int)dt,
					cs.c[i], name_of(all[i]));
		for (uint32_t i = 0; i < cs.n; i++) {
			size_t n = cs.c[i], sz = xp_dtype_size(dt);
			if (n > RUN_MAX)
				continue;
			uint8_t *buf = malloc(n * sz);
			T_CHECK(buf != NULL);
			for (size_t k = 0; k < n; k++) {
				long long v = (long long)(wr + 1) * (long long)(k % 7 + 1);
				if (dt == XP_INT32)
					((int32_t *)buf)[k] = (int32_t)v;
				else
					((double *)buf)[k] = (double)v;
			}
			T_OK(xp_allreduce(comm, XP_IN_PLACE, buf, n, dt, XP_SUM));
			for (size_t k = 0; k < n; k++) {
				long long want = members * (long long)(k % 7 + 1);
				long long got = dt == XP_INT32 ? ((int32_t *)buf)[k] :
								 (long long)((double *)buf)[k];
				if (got != want)
					T_FAIL("hosts %s, %d members: %zu elements of type %d: "
					       "element %zu is %lld, not %lld",
					       layout, p, n, (int)dt, k, got, want);
			}
			free(buf);
		}
	}
	free(algos);
	free(all);
	free(who);
}

/* Rank @r's host in @layout (cycled). */
static int host_of(const char *layout, int r)
{
	int nlist = 1;
	for (const char *c = layout; *c != '\0'; c++)
		nlist += *c == ',';
	const char *e = layout;
	for (int i = 0; i < r % nlist; i++)
		e = strchr(e, ',') + 1;
	return atoi(e);
}

/* The job's parts to check: every part of 3 ranks or more, or (@shapes)
 * one part for every uneven shape of 3 to 8 ranks on 2 or more hosts (the
 * hosts' sizes, largest first), taken from the job's largest hosts.
 * Returns how many (at most @cap) into @masks. */
#define MAX_PARTS 512

static int shapes_from(const int *size, const unsigned *ranks_on, int nh, int left, int at,
		       int most, int *part, int nparts, unsigned *masks, int n, int cap)
{
	if (left == 0) {
		bool uneven = false;
		for (int i = 1; i < nparts; i++)
			uneven |= part[i] != part[0];
		if (nparts < 2 || !uneven)
			return n;
		unsigned m = 0;
		for (int i = 0; i < nparts; i++) {
			if (size[i] < part[i])
				T_FAIL("the layout has no room for a part of %d on its host %d",
				       part[i], i);
			/* The first part[i] ranks of the i-th largest host. */
			unsigned on = ranks_on[i];
			for (int k = 0; k < part[i]; k++) {
				m |= on & -on;
				on &= on - 1;
			}
		}
		T_CHECK(n < cap);
		masks[n++] = m;
		return n;
	}
	if (at == nh)
		return n;
	for (int k = left < most ? left : most; k >= 1; k--) {
		part[nparts] = k;
		n = shapes_from(size, ranks_on, nh, left - k, at + 1, k, part, nparts + 1, masks, n,
				cap);
	}
	return n;
}

static int parts_of(const char *layout, int n, bool shapes, unsigned *masks)
{
	int count = 0;
	if (!shapes) {
		for (unsigned mask = 1; mask < (1u << n); mask++)
			if (__builtin_popcount(mask) >= 3)
				masks[count++] = mask;
		return count;
	}
	/* The hosts, largest first (then by number). */
	int size[16] = { 0 }, id[16], nh = 0;
	unsigned ranks_on[16] = { 0 };
	for (int r = 0; r < n; r++) {
		int h = host_of(layout, r), i = 0;
		while (i < nh && id[i] != h)
			i++;
		if (i == nh)
			id[nh++] = h;
		size[i]++;
		ranks_on[i] |= 1u << r;
	}
	for (int i = 0; i < nh; i++)
		for (int j = i + 1; j < nh; j++)
			if (size[j] > size[i]) {
				int t = size[i];
				size[i] = size[j];
				size[j] = t;
				unsigned u = ranks_on[i];
				ranks_on[i] = ranks_on[j];
				ranks_on[j] = u;
			}
	int part[8];
	for (int k = 3; k <= 8; k++)
		count = shapes_from(size, ranks_on, nh, k, 0, k, part, 0, masks, count, MAX_PARTS);
	return count;
}

int main(void)
{
	if (getenv("XP_RANK") == NULL) {
		fprintf(stderr, "SKIP: run under xprun with COLL_AGREE_HOSTS\n");
		return T_SKIP;
	}
	const char *layout = getenv("COLL_AGREE_HOSTS");
	if (layout == NULL || *layout == '\0')
		layout = "0";
	bool shapes = getenv("COLL_AGREE_SHAPES") != NULL;
	int rank = atoi(getenv("XP_RANK"));
	char host[32];
	snprintf(host, sizeof(host), "agree-host-%d", host_of(layout, rank));
	setenv("XP_HOST_ID", host, 1);

	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *world = xp_comm_world(ctx);
	int n = xp_size(ctx);
	T_CHECK(n <= 16 && (shapes || n <= 8));
	static unsigned masks[MAX_PARTS > 256 ? MAX_PARTS : 256];
	int parts = parts_of(layout, n, shapes, masks);
	for (int i = 0; i < parts; i++) {
		bool in = masks[i] & (1u << rank);
		xp_comm_t *sub = NULL;
		T_OK(xp_comm_split(world, in ? 0 : XP_UNDEFINED, rank, &sub));
		if (in)
			check_comm(sub, rank, n, layout);
		xp_comm_free(sub);
	}
	T_OK(xp_barrier(world));
	if (rank == 0)
		printf("coll_agree: hosts %s, %d ranks: %d communicators agree\n", layout, n,
		       parts);
	xp_finalize(ctx);
	return 0;
}
