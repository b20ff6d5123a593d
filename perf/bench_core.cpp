// SPDX-License-Identifier: MIT
/*
 * bench_core: microbenchmarks of the engine's hot paths through the
 * internal C API (Google Benchmark).
 *
 *  - pool: take a pooled buffer and give it back, per size class, on one
 *    thread and on two at once (buffers are released on whatever thread the
 *    user releases them on, so the free lists are shared).
 *  - mpsc: the owner's command queue, push then pop.
 *  - free stack: the pool's free lists, on one and two threads.
 *  - match: the tag-matching engine with its queues already holding
 *    receives and unexpected messages, so what is measured is a lookup
 *    among many, not in an empty table. Each benchmark puts back what it
 *    took, so the state is the same at every iteration.
 *  - reduce: the collectives' reduction kernels and float16 conversions
 *    (src/coll/reduce.c) at 4 KiB, 64 KiB and 1 MiB, beside memcpy of the
 *    same size in the same run.
 *
 * The pool, queue and ring headers use C11 _Atomic, which C++ cannot parse:
 * those loops live in bench_core_shim.c. match.h has no atomics and is
 * used directly.
 */
#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <vector>

#include "xport/xport.h"
extern "C" {
#include "core/match.h"
}

// bench_core_shim.c; keep in step with it.
extern "C" {
struct xpi_pool;
struct bc_mpsc;
struct bc_stack;
struct xpi_pool *bc_pool_create(size_t max_bytes);
void bc_pool_destroy(struct xpi_pool *pool);
int bc_pool_get_put(struct xpi_pool *pool, size_t size, long n);
struct bc_mpsc *bc_mpsc_create(int nnodes);
void bc_mpsc_destroy(struct bc_mpsc *q);
long bc_mpsc_run(struct bc_mpsc *q, long n, int burst);
struct bc_stack *bc_stack_create(uint32_t capacity);
void bc_stack_destroy(struct bc_stack *r);
long bc_stack_run(struct bc_stack *r, long n, int burst, int thread);
struct bc_regs;
struct bc_regs *bc_regs_create(int n);
void bc_regs_destroy(struct bc_regs *r);
long bc_regs_find(struct bc_regs *r, long n);
long bc_regs_find_linear(struct bc_regs *r, long n);
void bc_reduce(void *acc, const void *in, size_t count, int work, int op);
void bc_f16_to_f32(float *out, const uint16_t *in, size_t n);
void bc_f32_to_f16(uint16_t *out, const float *in, size_t n);
}

namespace
{

// Operations per call into the shim; every burst below divides it.
constexpr long kBatch = 64;

struct bc_mpsc *g_mpsc;
struct bc_stack *g_stack;

/* ------------------------------------------------------------------------- */
/* Pool, MPSC queue, free stack                                              */

/*
 * Every run gets a fresh pool, so a pool that lost buffers in one run does
 * not fail the next. Runs leave theirs until exit: after SkipWithError a
 * thread leaves its loop without the closing barrier, and the other thread
 * may still be using the pool.
 */
struct xpi_pool *g_run_pool;
std::vector<struct xpi_pool *> g_old_pools;

void BM_pool_get_put(benchmark::State &state)
{
	const size_t size = static_cast<size_t>(state.range(0));
	// The first KeepRunningBatch() holds every thread until all arrive.
	if (state.thread_index() == 0) {
		g_run_pool = bc_pool_create(size_t(64) << 20);
		g_old_pools.push_back(g_run_pool);
	}
	while (state.KeepRunningBatch(kBatch)) {
		if (g_run_pool == nullptr) {
			state.SkipWithError("xpi_pool_create failed");
			break;
		}
		if (bc_pool_get_put(g_run_pool, size, kBatch) < 0) {
			// At most one buffer per thread is ever out.
			state.SkipWithError("xpi_pool_get: -ENOBUFS with at most one buffer per "
					    "thread taken: the pool has lost buffers");
			break;
		}
	}
	state.SetItemsProcessed(state.iterations());
}
// 64 B: smallest class; 4 KiB: a mid class; 1 MiB: largest class;
// 2 MiB: larger than any class, a dedicated mapping each time.
BENCHMARK(BM_pool_get_put)
	->ArgName("size")
	->Arg(64)
	->Arg(4096)
	->Arg(1 << 20)
	->Arg(2 << 20)
	->Threads(1)
	->Threads(2)
	->UseRealTime();

void BM_mpsc_push_pop(benchmark::State &state)
{
	const int burst = static_cast<int>(state.range(0));
	while (state.KeepRunningBatch(kBatch)) {
		if (bc_mpsc_run(g_mpsc, kBatch, burst) != kBatch) {
			state.SkipWithError("MPSC queue lost or reordered a node");
			break;
		}
	}
	state.SetItemsProcessed(state.iterations());
}
// burst 1: every pop empties the queue (the owner's usual case: one
// command waiting); burst 64: a backlog.
BENCHMARK(BM_mpsc_push_pop)->ArgName("burst")->Arg(1)->Arg(64);

void BM_free_stack_pop_push(benchmark::State &state)
{
	const int burst = static_cast<int>(state.range(0));
	while (state.KeepRunningBatch(kBatch)) {
		if (bc_stack_run(g_stack, kBatch, burst, state.thread_index()) != kBatch) {
			state.SkipWithError("free stack ran dry: an index was lost");
			break;
		}
	}
	state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_free_stack_pop_push)
	->ArgName("burst")
	->Arg(1)
	->Arg(64)
	->Threads(1)
	->Threads(2)
	->UseRealTime();

/* ------------------------------------------------------------------------- */
/* Matching                                                                  */

// Tag ranges that never overlap: what is posted never matches what is
// queued unexpected, and the wildcard receives match nothing.
constexpr uint32_t kComm = 0;
constexpr int32_t kSrc = 1;
constexpr uint64_t kRecvTag = uint64_t(1) << 20;
constexpr uint64_t kMsgTag = uint64_t(1) << 24;
constexpr uint64_t kWildTag = uint64_t(1) << 28;

// What the engine embeds the match entries in (requests, messages),
// reduced to the entry and an id.
struct bench_recv {
	struct xpi_posted posted;
	uint64_t id;
};

struct bench_msg {
	struct xpi_unexp u;
	uint64_t id;
};

/*
 * A matching engine holding @nwild wildcard receives (posted first, so
 * their sequence numbers are the lowest and an arrival must look through
 * all of them), then @nposted exact receives with tags kRecvTag + i from
 * kSrc, and @nunexp unexpected messages with tags kMsgTag + i from kSrc.
 * The vectors never grow after setup: the engine's lists point into them.
 */
class MatchEngine
{
      public:
	MatchEngine(int nposted, int nunexp, int nwild)
	    : recvs(static_cast<size_t>(nposted)), wild(static_cast<size_t>(nwild)),
	      msgs(static_cast<size_t>(nunexp))
	{
		if (xpi_match_init(&m) < 0)
			return;
		inited = true;
		for (size_t j = 0; j < wild.size(); j++) {
			wild[j].posted.key = { kComm, XP_ANY_SOURCE, kWildTag + j, XP_TAG_EXACT };
			if (xpi_match_post(&m, &wild[j].posted) != nullptr)
				return;
		}
		for (size_t i = 0; i < recvs.size(); i++) {
			recvs[i].id = i;
			recvs[i].posted.key = { kComm, kSrc, kRecvTag + i, XP_TAG_EXACT };
			if (xpi_match_post(&m, &recvs[i].posted) != nullptr)
				return;
		}
		for (size_t i = 0; i < msgs.size(); i++) {
			msgs[i].id = i;
			msgs[i].u.key = { kComm, kSrc, kMsgTag + i, 0 };
			// As the engine does: no receive takes it, so it is queued.
			if (xpi_match_arrive(&m, &msgs[i].u.key) != nullptr)
				return;
			xpi_match_add_unexpected(&m, &msgs[i].u);
		}
		ok = true;
	}
	~MatchEngine()
	{
		if (inited)
			xpi_match_fini(&m);
	}
	MatchEngine(const MatchEngine &) = delete;
	MatchEngine &operator=(const MatchEngine &) = delete;

	struct xpi_match m;
	std::vector<bench_recv> recvs, wild;
	std::vector<bench_msg> msgs;
	bool inited = false, ok = false;
};

/*
 * (a), (d) An exact receive is posted and finds its message in the
 * unexpected hash; the message is queued again (as a new arrival) so the
 * engine holds N receives and N messages throughout.
 */
void BM_match_post_exact(benchmark::State &state)
{
	const size_t n = static_cast<size_t>(state.range(0));
	MatchEngine e(static_cast<int>(n), static_cast<int>(n), 0);
	bench_recv probe{};
	size_t i = 0;

	if (!e.ok) {
		state.SkipWithError("setting up the matching engine failed");
		return;
	}
	for (auto _ : state) {
		bench_msg *target = &e.msgs[i];
		probe.posted.key = { kComm, kSrc, target->u.key.tag, XP_TAG_EXACT };
		struct xpi_unexp *u = xpi_match_post(&e.m, &probe.posted);
		if (u != &target->u) {
			state.SkipWithError("the posted receive did not find its message");
			break;
		}
		xpi_match_add_unexpected(&e.m, u);
		if (++i == n)
			i = 0;
	}
	state.SetItemsProcessed(state.iterations());
	state.counters["queued"] = static_cast<double>(n);
}
BENCHMARK(BM_match_post_exact)->ArgName("queued")->RangeMultiplier(10)->Range(10, 10000);

/*
 * (b), (c), (d) A message arrives and takes one of N posted exact receives,
 * with @wild non-matching wildcard receives posted before them; the receive
 * is put back at its old place (xpi_match_repost) so nothing changes
 * between iterations. N unexpected messages with other tags are queued too.
 */
void BM_match_arrive_exact(benchmark::State &state)
{
	const size_t n = static_cast<size_t>(state.range(0));
	const int nwild = static_cast<int>(state.range(1));
	MatchEngine e(static_cast<int>(n), static_cast<int>(n), nwild);
	size_t i = 0;

	if (!e.ok) {
		state.SkipWithError("setting up the matching engine failed");
		return;
	}
	for (auto _ : state) {
		struct xpi_match_key key = { kComm, kSrc, kRecvTag + i, 0 };
		struct xpi_posted *p = xpi_match_arrive(&e.m, &key);
		if (p != &e.recvs[i].posted) {
			state.SkipWithError("the message did not find its receive");
			break;
		}
		xpi_match_repost(&e.m, p);
		if (++i == n)
			i = 0;
	}
	state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_match_arrive_exact)
	->ArgNames({ "queued", "wild" })
	->Args({ 10, 0 })
	->Args({ 100, 0 })
	->Args({ 1000, 0 })
	->Args({ 10000, 0 })
	->Args({ 1000, 10 })
	->Args({ 1000, 100 });

/*
 * For contrast: a wildcard receive (any source) walks the unexpected
 * messages in arrival order (match.h), so its cost grows with N. The
 * message it takes is always the newest, then queued again as the newest.
 */
void BM_match_post_wildcard_walk(benchmark::State &state)
{
	const size_t n = static_cast<size_t>(state.range(0));
	MatchEngine e(static_cast<int>(n), static_cast<int>(n), 0);
	bench_recv probe{};

	if (!e.ok) {
		state.SkipWithError("setting up the matching engine failed");
		return;
	}
	bench_msg *target = &e.msgs[n - 1];
	for (auto _ : state) {
		probe.posted.key = { kComm, XP_ANY_SOURCE, target->u.key.tag, XP_TAG_EXACT };
		struct xpi_unexp *u = xpi_match_post(&e.m, &probe.posted);
		if (u != &target->u) {
			state.SkipWithError("the wildcard receive did not find its message");
			break;
		}
		xpi_match_add_unexpected(&e.m, u);
	}
	state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_match_post_wildcard_walk)->ArgName("queued")->RangeMultiplier(10)->Range(10, 10000);

/* ------------------------------------------------------------------------- */
/* Reduction kernels                                                         */

/*
 * Each benchmark's argument is the size in bytes of the array it works on:
 * one operand of a reduction (which reads it and the accumulator and writes
 * the accumulator: three times that in memory traffic), the float32 side of
 * a conversion (the float16 side is half of it), the copy of memcpy. The
 * bytes/s counter counts that size per iteration, so the rows compare what
 * a collective handles per second. Sizes: one collective chunk in L1, one
 * in L2, and one well past L2 (1 MiB of each of the two to three arrays).
 */
template <typename T> void reduce_sum(benchmark::State &state, xp_dtype_t work, T in_value)
{
	const size_t bytes = static_cast<size_t>(state.range(0));
	const size_t n = bytes / sizeof(T);
	// The accumulator grows by in_value each pass: small enough to stay
	// finite (and normal) for floats, and integer sums wrap by design.
	std::vector<T> acc(n, T(1)), in(n, in_value);
	for (auto _ : state) {
		bc_reduce(acc.data(), in.data(), n, work, XP_SUM);
		benchmark::ClobberMemory();
	}
	state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
	state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}

void BM_reduce_sum_f32(benchmark::State &state)
{
	reduce_sum<float>(state, XP_FLOAT32, 1e-3f);
}
void BM_reduce_sum_f64(benchmark::State &state)
{
	reduce_sum<double>(state, XP_FLOAT64, 1e-3);
}
void BM_reduce_sum_i32(benchmark::State &state)
{
	reduce_sum<int32_t>(state, XP_INT32, 12345);
}

// float16 1.5 (0x3e00) and the float32 values it widens to.
void BM_f16_to_f32(benchmark::State &state)
{
	const size_t bytes = static_cast<size_t>(state.range(0));
	const size_t n = bytes / sizeof(float);
	std::vector<uint16_t> in(n, 0x3e00);
	std::vector<float> out(n);
	for (auto _ : state) {
		bc_f16_to_f32(out.data(), in.data(), n);
		benchmark::ClobberMemory();
	}
	state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
	state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}

// Values that need rounding (1/3 and friends), none of them special.
void BM_f32_to_f16(benchmark::State &state)
{
	const size_t bytes = static_cast<size_t>(state.range(0));
	const size_t n = bytes / sizeof(float);
	std::vector<float> in(n);
	std::vector<uint16_t> out(n);
	for (size_t i = 0; i < n; i++)
		in[i] = static_cast<float>(i % 1000 + 1) / 3.0f;
	for (auto _ : state) {
		bc_f32_to_f16(out.data(), in.data(), n);
		benchmark::ClobberMemory();
	}
	state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
	state.SetItemsProcessed(static_cast<int64_t>(state.iterations() * n));
}

// The baseline: copying the same number of bytes.
void BM_memcpy(benchmark::State &state)
{
	const size_t bytes = static_cast<size_t>(state.range(0));
	std::vector<char> src(bytes, 1), dst(bytes);
	for (auto _ : state) {
		std::memcpy(dst.data(), src.data(), bytes);
		benchmark::ClobberMemory();
	}
	state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * bytes));
}

#define REDUCE_SIZES(bm) BENCHMARK(bm)->ArgName("bytes")->Arg(4 << 10)->Arg(64 << 10)->Arg(1 << 20)
REDUCE_SIZES(BM_memcpy);
REDUCE_SIZES(BM_reduce_sum_f32);
REDUCE_SIZES(BM_reduce_sum_f64);
REDUCE_SIZES(BM_reduce_sum_i32);
REDUCE_SIZES(BM_f16_to_f32);
REDUCE_SIZES(BM_f32_to_f16);

} // namespace

int main(int argc, char **argv)
{
	benchmark::Initialize(&argc, argv);
	if (benchmark::ReportUnrecognizedArguments(argc, argv))
		return 2;
	// MPSC nodes for the longest burst; a ring with room for two
	// threads' bursts. Pools (the library's default 64 MiB) are made per run.
	g_mpsc = bc_mpsc_create(static_cast<int>(kBatch));
	g_stack = bc_stack_create(1024);
	if (g_mpsc == nullptr || g_stack == nullptr) {
		std::fprintf(stderr, "bench_core: setting up the queue or ring failed\n");
		return 1;
	}
	benchmark::RunSpecifiedBenchmarks();
	benchmark::Shutdown();
	bc_stack_destroy(g_stack);
	bc_mpsc_destroy(g_mpsc);
	for (struct xpi_pool *pool : g_old_pools)
		bc_pool_destroy(pool);
	return 0;
}

/*
 * Finding the user registration that covers a buffer (every rendezvous send
 * and receive asks), against the number of registrations: a binary search
 * in src/core/reg.c, where it was a walk of a list.
 */
static void reg_find(benchmark::State &state, long (*find)(struct bc_regs *, long))
{
	const int n = static_cast<int>(state.range(0));
	struct bc_regs *r = bc_regs_create(n);
	if (r == nullptr) {
		state.SkipWithError("setting up the registrations failed");
		return;
	}
	const long batch = 1000;
	for (auto _ : state) {
		if (find(r, batch) != batch) {
			state.SkipWithError("a lookup missed its registration");
			break;
		}
	}
	state.SetItemsProcessed(state.iterations() * batch);
	bc_regs_destroy(r);
}
void BM_reg_find(benchmark::State &state)
{
	reg_find(state, bc_regs_find);
}
BENCHMARK(BM_reg_find)->ArgName("regs")->RangeMultiplier(10)->Range(10, 10000);

/* Beside it, the walk it replaced (in insertion order, as the list was). */
void BM_reg_find_linear(benchmark::State &state)
{
	reg_find(state, bc_regs_find_linear);
}
BENCHMARK(BM_reg_find_linear)->ArgName("regs")->RangeMultiplier(10)->Range(10, 1000);
