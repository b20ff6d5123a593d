/* SPDX-License-Identifier: MIT */
/*
 * The collectives' cost model: which allreduce algorithm is fastest for a
 * vector of n bytes over p ranks on h hosts, from the latency (alpha) and
 * bandwidth (1/beta) of the links involved, as the capability cards
 * declare them (or the in-process transport's figures):
 *
 *   recursive doubling  (ceil(log2 p) + 2 if p is no power of two) (a + n b)
 *                       + ceil(log2 p) n g
 *   ring                2 (p - 1) (a + n b / p) + (p - 1) n g / p
 *   Rabenseifner        2 sum_{k=1..log2 q} (a + n b / 2^k) + (q - 1) n g / q
 *                       + 2 (a + n b) + n g if p is no power of two
 *                       (q the largest power of two <= p)
 *   hierarchical        2 ceil(log2 l) (a' + n b') + ceil(log2 l) n g   within a host of l
 *                       + the best of the three above over the h leaders, across hosts
 *   shared memory       2 a' + (p - 1) n g                  (n up to 16 KiB)
 *                       2 a' + 2 (p - 1) / p n s             (larger; s measured)
 *                       where every pair of members maps each other (shmcoll.c)
 *
 * with a and b the slowest link of the group (across hosts if it spans
 * them) plus a step's own cost, a' and b' the slowest within a host, and g
 * the time to reduce a byte. Every member computes these from the same
 * inputs (learn()), so every member makes the same choice, which the
 * algorithms need.
 *
 * The figures of our own were measured on the 2-CPU development machine
 * with 2 ranks over shm (loops of xp_allreduce, each rank pinned), where
 * both algorithms move the same bytes and the ring reduces half as much
 * in one step more: a step costs about 1 us beyond its message; reducing
 * costs about 0.03 ns a byte while the vectors stay in cache (bench_core:
 * 34 GB/s) and 0.09 ns beyond, with the memory traffic (ring against
 * recursive doubling at 1 MiB: 121 against 168 us). The model then picks
 * recursive doubling up to 64 KiB at 2 ranks and the ring from 256 KiB
 * (measured: doubling 12% and 4% faster at 16 and 64 KiB, the two equal
 * at 256 KiB, the ring 28% faster at 1 MiB and 21% at 4 MiB).
 *
 * Rabenseifner's moves the ring's bytes in 2 log2 q steps instead of 2 (p
 * - 1): at 2 ranks the two are the same exchange (equal estimates; the
 * ring, measured, stays), at 4 and 8 it is cheaper than the ring at every
 * size, and where p is no power of two its fold (two whole vectors more)
 * leaves large vectors to the ring. With these constants, for 1 KiB to 16
 * MiB over shm (150 ns, 12 GB/s; xp_allreduce_algo_get under xprun -n p):
 *   2 ranks  recursive doubling to 64 KiB, the ring from 128 KiB
 *   4 ranks  recursive doubling to 16 KiB, Rabenseifner from 32 KiB
 *   8 ranks  recursive doubling to 16 KiB, Rabenseifner from 32 KiB
 * (in-process ranks, 300 ns and 20 GB/s: the same at 2 ranks, Rabenseifner
 * from 64 KiB at 4 and from 32 KiB at 8; 5 and 6 ranks over shm: the ring
 * from 32 KiB). Rabenseifner's against the others is not measured yet.
 * Where shared memory serves a communicator (every member on one host,
 * processes or in-process ranks) its estimate is the lowest at every size
 * (2 ranks, XP_DEBUG=coll: 0.3 us at 8 B against 1.2 for doubling,
 * 74 us at 1 MiB against 137 for the ring), so it serves them all.
 */
#define STEP_NS 1000.0
/* Shared memory: vectors up to this go whole, larger in chunks copied in
 * and out at this cost a byte (shmcoll.c). */
#define SHM_SMALL_MAX (16.0 * 1024)

/* Large vectors over shared memory: what a byte of the vector costs at 2
 * ranks, copies and the half reduction together (measured here, xprun -n
 * 2 xport-perf allreduce: 73 us at 1 MiB, 400 us at 4 MiB, 4.2 ms at
 * 16 MiB, against the ring's 235 us, 800 us and 5.6 ms); a member
 * reduces 1/p and copies in and out (p-1)/p of the vector. */
#define SHM_BYTE_NS 0.07

static double reduce_ns(double bytes)
{
	return bytes * (bytes <= 512 * 1024.0 ? 0.03 : 0.09);
}
#include <math.h>

#include "coll.h"

static double link_ns(uint32_t lat_ns, uint32_t bw_mbps, double bytes)
{
	/* bw in 10^6 B/s: bytes / bw is microseconds. */
	return STEP_NS + (double)lat_ns + bytes * 1000.0 / (bw_mbps > 0 ? bw_mbps : 1);
}

static int ceil_log2(int p)
{
	int k = 0;
	while ((1 << k) < p)
		k++;
	return k;
}

/* The largest power of two <= @p, onto which recursive doubling and
 * Rabenseifner fold. */
static int floor_pof2(int p)
{
	int pof2 = 1;
	while (pof2 * 2 <= p)
		pof2 *= 2;
	return pof2;
}

static double t_rd(int p, uint32_t lat, uint32_t bw, double n)
{
	if (p <= 1)
		return 0;
	int pof2 = floor_pof2(p);
	return (ceil_log2(pof2) + (pof2 != p ? 2 : 0)) * link_ns(lat, bw, n) +
	       (ceil_log2(pof2) + (pof2 != p ? 1 : 0)) * reduce_ns(n);
}

static double t_ring(int p, uint32_t lat, uint32_t bw, double n)
{
	if (p <= 1)
		return 0;
	return 2.0 * (p - 1) * link_ns(lat, bw, n / p) + (p - 1) * reduce_ns(n) / p;
}

static double t_rab(int p, uint32_t lat, uint32_t bw, double n)
{
	if (p <= 1)
		return 0;
	int pof2 = floor_pof2(p);
	/* Halving and doubling: n/2, n/4, ... n/pof2 each way. */
	double t = 0;
	for (int part = 2; part <= pof2; part *= 2)
		t += 2.0 * link_ns(lat, bw, n / part);
	t += (pof2 - 1) * reduce_ns(n) / pof2;
	if (pof2 != p)
		t += 2.0 * link_ns(lat, bw, n) + reduce_ns(n);
	return t;
}

/*
 * The figures of @comm's members, found once: only from what every member
 * holds alike (the members, their hosts, and each one's slowest links
 * within its host and across as gathered at init), so that every member
 * computes the same figures and the same choice. A member's own view of
 * its links would differ from another's: one alone on its host sees no
 * link within a host, and chose differently (issue 24, 5.1). A member's
 * slowest links count those to ranks outside @comm too: the figures may
 * be pessimistic for a part of the world, never different across members.
 */
static void learn(xp_comm_t *comm)
{
	xp_context_t *ctx = comm->ctx;
	int p = comm->size;
	comm->lat_intra = comm->lat_inter = comm->lat_all = 0;
	comm->bw_intra = comm->bw_inter = comm->bw_all = UINT32_MAX;
	comm->nhosts = 0;
	comm->max_per_host = 0;
	for (int r = 0; r < p; r++) {
		const struct xpi_peer *peer = &ctx->peers[xpi_comm_world_rank(comm, r)];
		bool first = true;
		int on_host = 0;
		for (int q = 0; q < p; q++) {
			int h = ctx->peers[xpi_comm_world_rank(comm, q)].host;
			on_host += h == peer->host;
			if (q < r && h == peer->host)
				first = false;
		}
		comm->nhosts += first;
		if (on_host > comm->max_per_host)
			comm->max_per_host = on_host;
		if (on_host > 1) {
			if (peer->worst_lat_intra > comm->lat_intra)
				comm->lat_intra = peer->worst_lat_intra;
			if (peer->worst_bw_intra < comm->bw_intra)
				comm->bw_intra = peer->worst_bw_intra;
		}
	}
	for (int r = 0; comm->nhosts > 1 && r < p; r++) {
		const struct xpi_peer *peer = &ctx->peers[xpi_comm_world_rank(comm, r)];
		if (peer->worst_lat_inter > comm->lat_inter)
			comm->lat_inter = peer->worst_lat_inter;
		if (peer->worst_bw_inter < comm->bw_inter)
			comm->bw_inter = peer->worst_bw_inter;
	}
	comm->lat_all = comm->lat_intra > comm->lat_inter ? comm->lat_intra : comm->lat_inter;
	comm->bw_all = comm->bw_intra < comm->bw_inter ? comm->bw_intra : comm->bw_inter;
	comm->cost_known = true;
}

/*
 * A segment moves 16 times what a step's fixed cost (its own and the
 * link's latency) would move in the same time: about 220 KB over shm's
 * declared figures, 384 KB over TCP's, 640 KB over RDMA's; never below
 * 64 KiB nor above 1 MiB. Since a ring keeps a window of segments in
 * flight (coll.c), their fixed costs overlap and smaller segments pay:
 * between two ranks over TCP (busbw GB/s, medians of 4 interleaved runs,
 * 1/2/4/8/16 MiB vectors) 1 MiB segments gave 5.1 2.2 2.5 2.2 2.1,
 * 384 KiB ones 4.4 5.3 4.8 4.4 3.9, 64 KiB ones 2.6 2.6 2.5 2.2 2.1.
 * Some counts of segments still run at the slow pace (2.2-2.6 at 3, 6
 * and 12 MiB with 384 KiB segments; not understood yet). XP_COLL_SEGMENT,
 * if set, wins.
 */
size_t xpi_coll_segment_bytes(xp_comm_t *comm)
{
	if (comm->ctx->cfg.coll_segment != 0)
		return comm->ctx->cfg.coll_segment;
	if (!comm->cost_known)
		learn(comm);
	double fixed_ns = STEP_NS + (double)comm->lat_all;
	double bytes = 16.0 * fixed_ns * (double)comm->bw_all / 1000.0; /* bw: 10^6 B/s */
	if (bytes < 64.0 * 1024)
		return 64 * 1024;
	if (bytes > 1024.0 * 1024)
		return 1024 * 1024;
	return (size_t)bytes;
}

const char *xpi_allreduce_algo_name(int algo)
{
	switch (algo) {
	case XP_ALLREDUCE_RING:
		return "ring";
	case XP_ALLREDUCE_HIERARCHICAL:
		return "hierarchical";
	case XP_ALLREDUCE_RABENSEIFNER:
		return "rabenseifner";
	case XP_ALLREDUCE_SHARED_MEMORY:
		return "shared_memory";
	default:
		return "recursive_doubling";
	}
}

/* Over shared memory: two flag misses, then every member's vector
 * reduced here (small), or copied in, a slice reduced, copied out. */
static double t_shm(int p, uint32_t lat, double n)
{
	if (n <= SHM_SMALL_MAX)
		return 2.0 * lat + (p - 1) * reduce_ns(n);
	return 2.0 * lat + n * SHM_BYTE_NS * 2.0 * (p - 1) / p;
}

/* The algorithms that run over the whole group (not hierarchical) at @p
 * members: each one's time and, returned, the fastest (on a tie the
 * earlier of recursive doubling, ring, Rabenseifner: at 2 ranks the ring
 * and Rabenseifner are the same exchange). */
static int fastest_flat(int p, uint32_t lat, uint32_t bw, double n, size_t count, double *rd,
			double *ring, double *rab, double *best)
{
	*rd = t_rd(p, lat, bw, n);
	/* The ring needs a block per rank; Rabenseifner runs with fewer
	 * elements than blocks, but not as the model counts it. */
	*ring = count >= (size_t)p ? t_ring(p, lat, bw, n) : INFINITY;
	*rab = count >= (size_t)floor_pof2(p) ? t_rab(p, lat, bw, n) : INFINITY;
	int algo = XP_ALLREDUCE_RECURSIVE_DOUBLING;
	*best = *rd;
	if (*ring < *best) {
		*best = *ring;
		algo = XP_ALLREDUCE_RING;
	}
	if (*rab < *best) {
		*best = *rab;
		algo = XP_ALLREDUCE_RABENSEIFNER;
	}
	return algo;
}

void xpi_allreduce_choose(xp_comm_t *comm, size_t bytes, size_t count,
			  struct xpi_allreduce_plan *plan)
{
	if (!comm->cost_known)
		learn(comm);
	double n = (double)bytes, best;
	int p = comm->size;
	int flat = fastest_flat(p, comm->lat_all, comm->bw_all, n, count, &plan->t_rd_ns,
				&plan->t_ring_ns, &plan->t_rab_ns, &best);
	plan->t_hier_ns = INFINITY;
	plan->t_shm_ns = p > 1 && count > 0 && xpi_shmcoll_possible(comm) ?
				 t_shm(p, comm->lat_intra, n) :
				 INFINITY;
	plan->across = XP_ALLREDUCE_RECURSIVE_DOUBLING;
	/* Hierarchical: only when some host has several ranks and there are
	 * several hosts. */
	if (comm->nhosts > 1 && comm->max_per_host > 1) {
		double rd, ring, rab, across;
		plan->across = fastest_flat(comm->nhosts, comm->lat_inter, comm->bw_inter, n, count,
					    &rd, &ring, &rab, &across);
		int levels = ceil_log2(comm->max_per_host);
		plan->t_hier_ns = 2.0 * levels * link_ns(comm->lat_intra, comm->bw_intra, n) +
				  levels * reduce_ns(n) + across;
	}
	int forced = comm->ctx->cfg.allreduce_algo;
	plan->forced = forced != XP_ALLREDUCE_AUTO;
	if (plan->forced) {
		plan->algo = forced;
		/* What cannot run here runs as the nearest that can. */
		if (forced == XP_ALLREDUCE_RING && count < (size_t)p)
			plan->algo = XP_ALLREDUCE_RECURSIVE_DOUBLING;
		if (forced == XP_ALLREDUCE_SHARED_MEMORY && plan->t_shm_ns == INFINITY)
			plan->forced = false; /* the model's choice among the others */
		else
			return;
	}
	plan->algo = plan->t_hier_ns < best ? XP_ALLREDUCE_HIERARCHICAL : flat;
	if (plan->t_shm_ns < (plan->t_hier_ns < best ? plan->t_hier_ns : best))
		plan->algo = XP_ALLREDUCE_SHARED_MEMORY;
}
