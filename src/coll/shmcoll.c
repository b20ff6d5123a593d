/* SPDX-License-Identifier: MIT */
/*
 * Allreduce over shared memory, when every member of a communicator is
 * on this host and every pair of them maps each other's segment (src/shm):
 * each member writes into an area of its own segment (one channel per
 * communicator) and reads the others' areas, with no message at all.
 *
 * Small vectors (up to SMALL_MAX bytes): a member copies its vector into
 * its area and then stores the call's number in a flag word on the same
 * cache line as the vector's first bytes (a release store: whoever sees the
 * number sees the data), so a reader's first miss brings the flag and the
 * data together, as NCCL's LL protocol does. Every member then reduces
 * every member's vector, in member order, so all get the same bits. Two
 * halves used in turn: a member writes a half again only two calls later,
 * once every other has written the call between, which it does only after
 * it has read the half.
 *
 * Large vectors go in chunks of CHUNK bytes, two buffers in turn: each
 * member copies in the slices of its chunk that the others reduce, and
 * counts the chunk (in); member i then reduces slice i over every
 * member's buffer and its own vector, in its vector, copies the result to
 * its buffer's slice i and counts it (out); then every member copies the
 * others' slices out. A buffer is written again two chunks later, after
 * every member has counted the chunk between in, that is after it has
 * copied out of it.
 *
 * Each call's header (its number, bytes, type and operator) is in the
 * small vector's line, written for large vectors too: every member checks
 * every other's against its own before it reads any data, so members that
 * disagree on the count or the type fail naming the rank, whichever path
 * each took.
 *
 * A call is a schedule (sched.h) of steps that poll instead of sending:
 * the header (and a small vector), then each chunk; blocking and
 * nonblocking calls alike, so a program may have several under way. The
 * calls of a communicator run one after another, in the order they were
 * made (which every member shares), as the areas hold one at a time.
 *
 * Whether a communicator can is decided by every member alike from what
 * the job already agreed (the shm transport's matrix of which pairs map
 * each other) and the channel its creation agreed on. Its call numbers
 * start above every number in its members' areas (the creation takes the
 * highest of each), which only grow, so nothing a channel's previous
 * communicator left there looks new. When a communicator is freed its
 * channel goes back; the next to take it first waits until every member
 * of the old one has finished its last call (its area's done count),
 * since they may still read this rank's area.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/compiler.h"
#include "../core/log.h"
#include "coll.h"

#define SMALL_MAX (16u << 10)
#define CHUNK (1024u << 10)
/* Looks at a word before a poll gives the runner its turn back: several
 * while each rank has a CPU, one when they outnumber the CPUs (a spinner
 * would hold the CPU the rank it waits for needs). */
#define SPINS 64

/* One member's area on one channel; only that member writes it. */
struct area {
	_Alignas(64) _Atomic uint64_t done; /* the last call this member finished */
	_Alignas(64) _Atomic uint64_t in;   /* chunks copied in */
	_Alignas(64) _Atomic uint64_t out;  /* chunks whose slice this member reduced */
	/* Every call's header, on the line where a small vector starts: the
	 * call's number (stored last), and its bytes, type and operator,
	 * which the others check against their own. */
	struct {
		_Alignas(64) _Atomic uint64_t call;
		uint64_t what;
		uint8_t data[SMALL_MAX];
	} small[2];
	_Alignas(64) uint8_t chunk[2][CHUNK];
};

_Static_assert(sizeof(struct area) <= XPI_COLL_AREA, "XPI_COLL_AREA is too small");

static struct area *area_of(xp_context_t *ctx, int world_rank, int channel)
{
	if (ctx->host_area == NULL || channel < 0)
		return NULL;
	return ctx->host_area(ctx->host_area_tl, world_rank, (unsigned)channel);
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

void xpi_shmcoll_highest(xp_context_t *ctx, uint64_t *calls, uint64_t *chunks)
{
	for (int c = 0; c < (int)XPI_COLL_CHANNELS; c++) {
		struct area *a = area_of(ctx, ctx->rank, c);
		calls[c] = chunks[c] = 0;
		if (a == NULL)
			continue;
		calls[c] = max_u64(atomic_load(&a->done), max_u64(atomic_load(&a->small[0].call),
								  atomic_load(&a->small[1].call)));
		chunks[c] = max_u64(atomic_load(&a->in), atomic_load(&a->out));
	}
}

int xpi_shmcoll_join(xp_comm_t *comm, uint64_t calls, uint64_t chunks)
{
	xp_context_t *ctx = comm->ctx;
	comm->shm_calls = comm->shm_first_call = calls;
	atomic_store(&comm->shm_turn, calls);
	comm->shm_chunks = chunks;
	if (comm->shm_channel < 0)
		return 0;
	/* Nobody may still read this rank's area on the channel: every member
	 * of the communicator that had it last has finished that one's last
	 * call (which needs nothing more from this rank), or is lost. */
	struct xpi_chan_last *last = &ctx->shm_chan_last[comm->shm_channel];
	int64_t deadline = xpi_now_ns() + (int64_t)ctx->cfg.timeout_ms * 1000000;
	for (int i = 0; i < last->nreaders && last->last_call > 0; i++) {
		int w = last->readers[i];
		struct area *aw = area_of(ctx, w, comm->shm_channel);
		while (w != ctx->rank && aw != NULL && ctx->peers[w].failed == 0 &&
		       atomic_load_explicit(&aw->done, memory_order_acquire) < last->last_call) {
			if (xpi_now_ns() >= deadline)
				return xpi_fail(-ETIMEDOUT,
						"rank %d: communicator %u: rank %d (of the world) "
						"has not finished the last allreduce of the "
						"communicator that had its shared-memory channel "
						"before, after %d ms",
						ctx->rank, comm->id, w, ctx->cfg.timeout_ms);
			xp_progress(ctx);
			sched_yield();
		}
	}
	free(last->readers);
	*last = (struct xpi_chan_last){ 0 };
	return 0;
}

void xpi_shmcoll_release(xp_comm_t *comm)
{
	xp_context_t *ctx = comm->ctx;
	if (comm->shm_channel < 0)
		return;
	struct xpi_chan_last *last = &ctx->shm_chan_last[comm->shm_channel];
	bool used = comm->shm_calls > comm->shm_first_call;
	free(last->readers);
	*last = (struct xpi_chan_last){ 0 };
	if (used) {
		last->readers = malloc((size_t)comm->size * sizeof(int));
		if (last->readers != NULL) {
			for (int j = 0; j < comm->size; j++)
				last->readers[j] = xpi_comm_world_rank(comm, j);
			last->nreaders = comm->size;
			last->last_call = comm->shm_calls;
		}
	}
	pthread_mutex_lock(&ctx->comm_lock);
	/* Without the list of readers to wait for, the channel stays taken. */
	if (!used || last->readers != NULL)
		ctx->shm_channels_used &= (uint8_t) ~(1u << comm->shm_channel);
	pthread_mutex_unlock(&ctx->comm_lock);
}

/* Every pair of members maps each other's segment, as every member of
 * the job knows alike; and this rank has every member's area. */
static bool usable(xp_comm_t *comm)
{
	xp_context_t *ctx = comm->ctx;
	if (comm->shm_channel < 0 || comm->size < 2 || ctx->host_pair == NULL)
		return false;
	for (int i = 0; i < comm->size; i++)
		for (int j = i + 1; j < comm->size; j++)
			if (!ctx->host_pair(ctx->host_area_tl, xpi_comm_world_rank(comm, i),
					    xpi_comm_world_rank(comm, j)))
				return false;
	comm->shm_areas = calloc((size_t)comm->size, sizeof(void *));
	comm->shm_tmp = malloc(CHUNK > SMALL_MAX ? CHUNK : SMALL_MAX);
	if (comm->shm_areas == NULL || comm->shm_tmp == NULL)
		return false; /* the same everywhere but out of memory: fails the call */
	for (int j = 0; j < comm->size; j++) {
		comm->shm_areas[j] = area_of(ctx, xpi_comm_world_rank(comm, j), comm->shm_channel);
		if (comm->shm_areas[j] == NULL)
			return false;
	}
	return true;
}

bool xpi_shmcoll_possible(xp_comm_t *comm)
{
	if (comm->shm_ok == 0) {
		comm->shm_ok = usable(comm) ? 1 : -1;
		if (xpi_debug_on("coll"))
			xpi_log(XPI_LOG_DEBUG,
				"rank %d: communicator %u: allreduce over shared memory %s",
				comm->rank, comm->id,
				comm->shm_ok > 0 ? "on (every pair of members maps each other)" :
						   "off");
	}
	return comm->shm_ok > 0;
}

/* ---------------------------------------------------------------------- */
/* The steps                                                              */

/* Waits, a little, for member @j's word @w to reach @want. */
static bool reached(const struct xpi_sched *s, _Atomic uint64_t *w, uint64_t want)
{
	int spins = s->comm->ctx->spin_rounds >= 16 * SPINS ? SPINS : 1;
	for (int i = 0; i < spins; i++) {
		if (atomic_load_explicit(w, memory_order_acquire) >= want)
			return true;
		xpi_cpu_relax();
	}
	return false;
}

static struct area *area(const struct xpi_sched *s, int j)
{
	return s->comm->shm_areas[j];
}

/* Member @j's header of the call, once it is there: 1, 0 (not yet), or
 * -EINVAL if it differs from this rank's. */
static int header_of(struct xpi_sched *s, int j, char *why, size_t n)
{
	unsigned h = (unsigned)(s->shm.number & 1);
	struct area *aj = area(s, j);
	if (!reached(s, &aj->small[h].call, s->shm.number))
		return 0;
	uint64_t got = aj->small[h].what, want = s->shm.what;
	if (got == want)
		return 1;
	snprintf(why, n,
		 "rank %d gives %llu bytes of xp_dtype_t %u (xp_op_t %u) where this rank gives "
		 "%llu bytes of xp_dtype_t %u (xp_op_t %u): the members disagree on the count, "
		 "the type or the operator",
		 j, (unsigned long long)(got >> 16), (unsigned)(got >> 8 & 0xff),
		 (unsigned)(got & 0xff), (unsigned long long)(want >> 16),
		 (unsigned)(want >> 8 & 0xff), (unsigned)(want & 0xff));
	return -EINVAL;
}

/* The first step: this call's turn on the communicator, the header (and
 * a small vector) out, every member's header checked; for a small vector
 * the whole reduction. */
static int begin_poll(struct xpi_sched *s, char *why, size_t n)
{
	xp_comm_t *comm = s->comm;
	int members = comm->size, me = comm->rank;
	unsigned h = (unsigned)(s->shm.number & 1);
	size_t bytes = s->shm.count * s->how.elem;
	bool is_small = bytes <= SMALL_MAX;
	if (s->shm.phase == 0) {
		if (atomic_load_explicit(&comm->shm_turn, memory_order_acquire) !=
		    s->shm.number - 1)
			return 0; /* a call made before it is under way */
		struct area *mine = area(s, me);
		if (is_small)
			memcpy(mine->small[h].data, s->shm.in, bytes);
		mine->small[h].what = s->shm.what;
		atomic_store_explicit(&mine->small[h].call, s->shm.number, memory_order_release);
		s->shm.phase = 1;
		s->shm.j = 0;
	}
	/* Two members: acc (op) in is the same bits either way round (but for
	 * which operand a NaN's payload comes from). */
	uint8_t *acc = members == 2 || !is_small ? s->shm.buf : comm->shm_tmp;
	for (; s->shm.j < members; s->shm.j++) {
		int j = s->shm.j;
		if (j == me && (members == 2 || !is_small))
			continue;
		int rc = header_of(s, j, why, n);
		if (rc <= 0)
			return rc;
		if (!is_small || bytes == 0)
			continue;
		if (j == 0 && members > 2)
			memcpy(acc, area(s, 0)->small[h].data, bytes);
		else if (acc == s->shm.buf && s->shm.in != s->shm.buf)
			s->how.fn3(acc, s->shm.in, area(s, j)->small[h].data, s->shm.count,
				   &s->how); /* two members, the input apart */
		else
			s->how.fn(acc, area(s, j)->small[h].data, s->shm.count, &s->how);
	}
	if (acc != s->shm.buf)
		memcpy(s->shm.buf, acc, bytes);
	return 1;
}

/* Slice @j of @n of @count elements: first element and length. */
static void slice_of(size_t count, int n, int j, size_t *first, size_t *len)
{
	size_t base = count / (size_t)n, extra = count % (size_t)n, jj = (size_t)j;
	*first = jj * base + (jj < extra ? jj : extra);
	*len = base + (jj < extra ? 1 : 0);
}

/* A chunk: step k of the schedule is chunk k - 1 of the vector. */
static int chunk_poll(struct xpi_sched *s, char *why, size_t n)
{
	(void)why;
	(void)n;
	xp_comm_t *comm = s->comm;
	int members = comm->size, me = comm->rank;
	size_t elem = s->how.elem, per = CHUNK / elem, at = (size_t)(s->cur - 1) * per;
	size_t c = s->shm.count - at < per ? s->shm.count - at : per, first, len;
	/* The result's chunk, and the input's (the same, unless apart). */
	uint8_t *dst = s->shm.buf + at * elem;
	const uint8_t *src = s->shm.in + at * elem;
	slice_of(c, members, me, &first, &len);
	uint8_t *res = dst + first * elem;
	const uint8_t *own = src + first * elem;
	if (s->shm.phase < 2) { /* a chunk's first poll */
		s->shm.chunk = ++comm->shm_chunks;
		uint8_t *mine = area(s, me)->chunk[s->shm.chunk & 1];
		/* In: the others' slices only; this member reduces its own from
		 * the program's vector. */
		memcpy(mine, src, first * elem);
		memcpy(mine + (first + len) * elem, own + len * elem, (c - first - len) * elem);
		atomic_store_explicit(&area(s, me)->in, s->shm.chunk, memory_order_release);
		s->shm.phase = 2;
		s->shm.j = 0;
	}
	uint64_t g = s->shm.chunk;
	unsigned b = (unsigned)(g & 1);
	/* In member order, so that a slice is the same bits whoever reduces
	 * it (two members: acc (op) in either way round). */
	uint8_t *acc = members == 2 ? res : comm->shm_tmp;
	for (; s->shm.phase == 2 && s->shm.j < members; s->shm.j++) {
		int j = s->shm.j;
		const uint8_t *in = own;
		if (j == me && members == 2)
			continue;
		if (j != me) {
			if (!reached(s, &area(s, j)->in, g))
				return 0;
			in = area(s, j)->chunk[b] + first * elem;
		}
		if (len == 0)
			continue;
		if (j == 0 && members > 2)
			memcpy(acc, in, len * elem);
		else if (acc == res && own != res)
			s->how.fn3(acc, own, in, len, &s->how); /* two members, the input apart */
		else
			s->how.fn(acc, in, len, &s->how);
	}
	if (s->shm.phase == 2) {
		if (acc != res && len > 0)
			memcpy(res, acc, len * elem);
		/* Out: the reduced slice where the others copy it from. */
		memcpy(area(s, me)->chunk[b] + first * elem, res, len * elem);
		atomic_store_explicit(&area(s, me)->out, g, memory_order_release);
		s->shm.phase = 3;
		s->shm.j = 0;
	}
	for (; s->shm.j < members; s->shm.j++) {
		int j = s->shm.j;
		if (j == me)
			continue;
		if (!reached(s, &area(s, j)->out, g))
			return 0;
		slice_of(c, members, j, &first, &len);
		memcpy(dst + first * elem, area(s, j)->chunk[b] + first * elem, len * elem);
	}
	s->shm.phase = 1; /* the next chunk's first poll */
	return 1;
}

/* Whatever happened: the call is over here, the next may go. */
static void call_over(struct xpi_sched *s)
{
	xp_comm_t *comm = s->comm;
	atomic_store_explicit(&area(s, comm->rank)->done, s->shm.number, memory_order_release);
	uint64_t before = s->shm.number - 1;
	atomic_compare_exchange_strong_explicit(&comm->shm_turn, &before, s->shm.number,
						memory_order_release, memory_order_relaxed);
}

int xpi_shmcoll_build(struct xpi_sched *s, void *buf, const void *src, size_t count)
{
	xp_comm_t *comm = s->comm;
	size_t bytes = count * s->how.elem;
	s->shm.buf = buf;
	s->shm.in = src != NULL ? src : buf;
	s->shm.count = count;
	s->shm.number = ++comm->shm_calls;
	/* The program's type, not the working one: float16 and float32 of one
	 * count reduce alike in float32, but the members still disagree. */
	s->shm.what = (uint64_t)bytes << 16 | (uint64_t)(s->fin.dtype & 0xff) << 8 |
		      (uint64_t)(s->how.op & 0xff);
	s->cleanup = call_over;
	int rc = xpi_sched_poll_step(s, 0, begin_poll);
	if (bytes <= SMALL_MAX)
		return rc;
	size_t per = CHUNK / s->how.elem;
	for (size_t at = 0, k = 1; rc == 0 && at < count; at += per, k++)
		rc = xpi_sched_poll_step(s, (unsigned)k, chunk_poll);
	return rc;
}
