/* SPDX-License-Identifier: MIT */
/*
 * Allreduce over shared memory, when every member of a communicator is
 * on this host and maps every other's segment (src/shm): each member
 * writes into an area of its own segment (one channel per communicator)
 * and reads the others' areas, with no message at all.
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
 * Only blocking calls use it (a nonblocking one may overlap another call
 * on the communicator, and the areas hold one at a time); the members
 * agree once, at the first, whether all of them can, and where their
 * numbering starts: above every number in their areas, which only ever
 * grow, so nothing a channel's previous communicator left there looks
 * new. At most XPI_COLL_CHANNELS communicators of a rank have one at a
 * time; when one is freed its channel goes back, and the next to take it
 * first waits until every member of the old one has finished its last
 * call (its area's done count), since they may still read this rank's.
 */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/clock.h"
#include "../core/compiler.h"
#include "../core/log.h"
#include "coll.h"

#define SMALL_MAX (16u << 10)
#define CHUNK (1024u << 10)

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

/* Idle waiting, as the schedules': spin, yield, then short naps. */
#define YIELD_NS (1 * 1000000)
#define NAP_NS (20 * 1000)
#ifndef SPINS_PER_LOOK
#define SPINS_PER_LOOK 16
#endif

/* What every member says at the agreement: whether it can, and the
 * highest numbers in its area (the communicator's start above them). */
struct agreement {
	uint64_t calls, chunks;
	uint64_t ok;
};

static void agree_combine(void *acc_, const void *in_, size_t count, const struct xpi_combine *how)
{
	(void)how;
	struct agreement *acc = acc_;
	const struct agreement *in = in_;
	for (size_t i = 0; i < count; i++) {
		acc[i].calls = acc[i].calls > in[i].calls ? acc[i].calls : in[i].calls;
		acc[i].chunks = acc[i].chunks > in[i].chunks ? acc[i].chunks : in[i].chunks;
		acc[i].ok &= in[i].ok;
	}
}

/* This rank's view: every member's area mapped, on the comm's channel. */
static bool areas_here(xp_comm_t *comm)
{
	if (comm->shm_channel < 0 || comm->size < 2)
		return false;
	if (comm->shm_areas == NULL) {
		comm->shm_areas = calloc((size_t)comm->size, sizeof(void *));
		comm->shm_tmp = malloc(CHUNK > SMALL_MAX ? CHUNK : SMALL_MAX);
		if (comm->shm_areas == NULL || comm->shm_tmp == NULL)
			return false;
	}
	for (int j = 0; j < comm->size; j++) {
		xp_context_t *ctx = comm->ctx;
		comm->shm_areas[j] =
			ctx->host_area == NULL ?
				NULL :
				ctx->host_area(ctx->host_area_tl, xpi_comm_world_rank(comm, j),
					       (unsigned)comm->shm_channel);
		if (comm->shm_areas[j] == NULL)
			return false;
	}
	return true;
}

void xpi_shmcoll_release(xp_comm_t *comm)
{
	xp_context_t *ctx = comm->ctx;
	if (comm->shm_channel < 0)
		return;
	struct xpi_chan_last *last = &ctx->shm_chan_last[comm->shm_channel];
	free(last->readers);
	*last = (struct xpi_chan_last){ 0 };
	if (comm->shm_ok > 0 && comm->shm_calls > comm->shm_first_call) {
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
	if (last->last_call > 0 || comm->shm_ok <= 0 || comm->shm_calls == comm->shm_first_call)
		ctx->shm_channels_used &= (uint8_t) ~(1u << comm->shm_channel);
	pthread_mutex_unlock(&ctx->comm_lock);
}

bool xpi_shmcoll_possible(xp_comm_t *comm)
{
	if (comm->shm_ok != 0)
		return comm->shm_ok > 0;
	return areas_here(comm);
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

/*
 * Before this rank writes its area on the channel again: every member of
 * the communicator that had it last has finished that one's last call
 * (or is lost), so none still reads it. Bounded by the timeout; false if
 * it passed.
 */
static bool old_readers_gone(xp_comm_t *comm)
{
	xp_context_t *ctx = comm->ctx;
	struct xpi_chan_last *last = &ctx->shm_chan_last[comm->shm_channel];
	int64_t deadline = xpi_now_ns() + (int64_t)ctx->cfg.timeout_ms * 1000000;
	for (int i = 0; i < last->nreaders && last->last_call > 0; i++) {
		int w = last->readers[i];
		struct area *aw =
			ctx->host_area == NULL ?
				NULL :
				ctx->host_area(ctx->host_area_tl, w, (unsigned)comm->shm_channel);
		while (w != ctx->rank && aw != NULL && ctx->peers[w].failed == 0 &&
		       atomic_load_explicit(&aw->done, memory_order_acquire) < last->last_call) {
			if (xpi_now_ns() >= deadline)
				return false;
			xp_progress(ctx);
			sched_yield();
		}
	}
	free(last->readers);
	*last = (struct xpi_chan_last){ 0 };
	return true;
}

int xpi_shmcoll_agree(xp_comm_t *comm)
{
	if (comm->shm_ok != 0)
		return 0;
	struct agreement ag = { .ok = areas_here(comm) && old_readers_gone(comm) };
	if (ag.ok) {
		struct area *mine = comm->shm_areas[comm->rank];
		ag.calls = max_u64(atomic_load(&mine->done),
				   max_u64(atomic_load(&mine->small[0].call),
					   atomic_load(&mine->small[1].call)));
		ag.chunks = max_u64(atomic_load(&mine->in), atomic_load(&mine->out));
	}
	struct xpi_sched *s = xpi_sched_new(comm, XPI_COLL_COMM, "xp_allreduce");
	if (s == NULL)
		return -ENOMEM;
	s->how = (struct xpi_combine){ agree_combine, sizeof(ag), 0, 0 };
	int rc = xpi_coll_go(s, xpi_build_allreduce_rd(s, &ag, 1), NULL);
	if (rc < 0)
		return rc;
	bool ok = ag.ok != 0;
	comm->shm_ok = ok ? 1 : -1;
	comm->shm_calls = comm->shm_first_call = ag.calls;
	comm->shm_chunks = ag.chunks;
	if (xpi_debug_on("coll"))
		xpi_log(XPI_LOG_DEBUG, "rank %d: communicator %u: allreduce over shared memory %s",
			comm->rank, comm->id,
			ok ? "on (every member maps every other's area)" : "off");
	return 0;
}

struct waiter {
	xp_comm_t *comm;
	const char *call;
	int64_t deadline, idle_since;
	unsigned spins;
};

/* Waits until member @j's word @w reaches @want. 0, or the failure
 * naming that member (lost, or the deadline passed). */
static int wait_for(struct waiter *wt, _Atomic uint64_t *w, uint64_t want, int j, const char *what)
{
	xp_context_t *ctx = wt->comm->ctx;
	while (atomic_load_explicit(w, memory_order_acquire) < want) {
		xpi_cpu_relax();
		if (++wt->spins < SPINS_PER_LOOK)
			continue;
		wt->spins = 0;
		xp_progress(ctx);
		xpi_sched_advance_all(ctx);
		const struct xpi_peer *peer = &ctx->peers[xpi_comm_world_rank(wt->comm, j)];
		if (peer->failed != 0)
			return xpi_fail(-EPIPE,
					"rank %d: %s on communicator %u: rank %d of it is lost "
					"(%s) while this rank waits for its %s; the collective "
					"cannot complete",
					wt->comm->rank, wt->call, wt->comm->id, j, peer->failed_why,
					what);
		int64_t now = xpi_now_ns();
		if (now >= wt->deadline)
			return xpi_fail(-ETIMEDOUT,
					"rank %d: %s on communicator %u: timed out after %d ms "
					"waiting for rank %d's %s over shared memory (a member not "
					"calling the same collective?)",
					wt->comm->rank, wt->call, wt->comm->id, ctx->cfg.timeout_ms,
					j, what);
		if (wt->idle_since == 0)
			wt->idle_since = now;
		if (now - wt->idle_since < (int64_t)ctx->spin_rounds * 50)
			continue;
		if (now - wt->idle_since < YIELD_NS) {
			sched_yield();
		} else {
			struct timespec nap = { 0, NAP_NS };
			nanosleep(&nap, NULL);
		}
	}
	wt->idle_since = 0;
	return 0;
}

static uint64_t what_of(size_t bytes, const struct xpi_combine *how)
{
	return (uint64_t)bytes << 16 | (uint64_t)(how->dtype & 0xff) << 8 |
	       (uint64_t)(how->op & 0xff);
}

/* Waits for member @j's header of call @call (half @h) and checks it. */
static int header_of(struct waiter *wt, int j, uint64_t call, unsigned h, uint64_t want)
{
	struct area *aj = wt->comm->shm_areas[j];
	int rc = wait_for(wt, &aj->small[h].call, call, j, "vector");
	if (rc < 0 || aj->small[h].what == want)
		return rc;
	uint64_t got = aj->small[h].what;
	return xpi_fail(-EINVAL,
			"rank %d: %s on communicator %u: rank %d gives %llu bytes of xp_dtype_t %u "
			"(xp_op_t %u) where this rank gives %llu bytes of xp_dtype_t %u (xp_op_t "
			"%u): the members disagree on the count, the type or the operator",
			wt->comm->rank, wt->call, wt->comm->id, j, (unsigned long long)(got >> 16),
			(unsigned)(got >> 8 & 0xff), (unsigned)(got & 0xff),
			(unsigned long long)(want >> 16), (unsigned)(want >> 8 & 0xff),
			(unsigned)(want & 0xff));
}

static int small(struct waiter *wt, void *buf, size_t bytes, size_t count,
		 const struct xpi_combine *how, uint64_t call)
{
	xp_comm_t *comm = wt->comm;
	struct area **a = (struct area **)comm->shm_areas;
	int n = comm->size, me = comm->rank;
	unsigned h = (unsigned)(call & 1);
	uint64_t what = what_of(bytes, how);
	memcpy(a[me]->small[h].data, buf, bytes);
	a[me]->small[h].what = what;
	atomic_store_explicit(&a[me]->small[h].call, call, memory_order_release);
	/* Two members: acc (op) in is the same bits either way round. */
	uint8_t *acc = n == 2 ? buf : comm->shm_tmp;
	for (int j = 0; j < n; j++) {
		if (j == me && n == 2)
			continue;
		int rc = header_of(wt, j, call, h, what);
		if (rc < 0)
			return rc;
		if (j == 0 && n > 2)
			memcpy(acc, a[0]->small[h].data, bytes);
		else
			how->fn(acc, a[j]->small[h].data, count, how);
	}
	if (acc != buf)
		memcpy(buf, acc, bytes);
	return 0;
}

/* Slice @j of @n of @count elements: first element and length. */
static void slice_of(size_t count, int n, int j, size_t *first, size_t *len)
{
	size_t base = count / (size_t)n, extra = count % (size_t)n, jj = (size_t)j;
	*first = jj * base + (jj < extra ? jj : extra);
	*len = base + (jj < extra ? 1 : 0);
}

static int large(struct waiter *wt, uint8_t *buf, size_t count, const struct xpi_combine *how,
		 uint64_t call)
{
	xp_comm_t *comm = wt->comm;
	struct area **a = (struct area **)comm->shm_areas;
	int n = comm->size, me = comm->rank;
	size_t elem = how->elem, per = CHUNK / elem;
	unsigned h = (unsigned)(call & 1);
	uint64_t what = what_of(count * elem, how);
	a[me]->small[h].what = what;
	atomic_store_explicit(&a[me]->small[h].call, call, memory_order_release);
	for (int j = 0; j < n; j++) {
		int rc = j == me ? 0 : header_of(wt, j, call, h, what);
		if (rc < 0)
			return rc;
	}
	for (size_t at = 0; at < count; at += per) {
		size_t c = count - at < per ? count - at : per, first, len;
		uint64_t g = ++comm->shm_chunks;
		unsigned b = (unsigned)(g & 1);
		uint8_t *mine = a[me]->chunk[b], *src = buf + at * elem;
		slice_of(c, n, me, &first, &len);
		uint8_t *res = src + first * elem;
		/* In: the others' slices only; this member reduces its own from
		 * the program's vector. */
		memcpy(mine, src, first * elem);
		memcpy(mine + (first + len) * elem, res + len * elem, (c - first - len) * elem);
		atomic_store_explicit(&a[me]->in, g, memory_order_release);
		/* In member order, so that a slice is the same bits whoever
		 * reduces it (two members: acc (op) in either way round). */
		uint8_t *acc = n == 2 ? res : comm->shm_tmp;
		for (int j = 0; j < n; j++) {
			const uint8_t *in = res;
			if (j == me && n == 2)
				continue;
			if (j != me) {
				int rc = wait_for(wt, &a[j]->in, g, j, "chunk");
				if (rc < 0)
					return rc;
				in = a[j]->chunk[b] + first * elem;
			}
			if (len == 0)
				continue;
			if (j == 0 && n > 2)
				memcpy(acc, in, len * elem);
			else
				how->fn(acc, in, len, how);
		}
		if (acc != res && len > 0)
			memcpy(res, acc, len * elem);
		/* Out: the reduced slice where the others copy it from. */
		memcpy(mine + first * elem, res, len * elem);
		atomic_store_explicit(&a[me]->out, g, memory_order_release);
		for (int j = 0; j < n; j++) {
			if (j == me)
				continue;
			int rc = wait_for(wt, &a[j]->out, g, j, "reduced slice");
			if (rc < 0)
				return rc;
			slice_of(c, n, j, &first, &len);
			memcpy(src + first * elem, a[j]->chunk[b] + first * elem, len * elem);
		}
	}
	return 0;
}

int xpi_shmcoll_allreduce(xp_comm_t *comm, void *buf, size_t count, const struct xpi_combine *how,
			  const char *call)
{
	struct waiter wt = {
		.comm = comm,
		.call = call,
		.deadline = xpi_now_ns() + (int64_t)comm->ctx->cfg.timeout_ms * 1000000,
	};
	size_t bytes = count * how->elem;
	uint64_t number = ++comm->shm_calls;
	int rc = bytes <= SMALL_MAX ? small(&wt, buf, bytes, count, how, number) :
				      large(&wt, buf, count, how, number);
	/* Done with the others' areas, whether or not the call worked: who
	 * takes the channel next may write over them. */
	struct area *mine = comm->shm_areas[comm->rank];
	atomic_store_explicit(&mine->done, number, memory_order_release);
	return rc;
}
