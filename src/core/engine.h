/* SPDX-License-Identifier: MIT */
/*
 * The engine of one rank: its context, requests, per-peer state, and the
 * functions backends call. Library-internal (prefix xpi_).
 *
 * Ownership. Everything marked "owner" is touched only by the thread that
 * currently holds the rank's owner token (ctx->owner). Taking the token is
 * one atomic exchange that never waits: a thread that finds it taken pushes
 * its work onto ctx->cmdq and leaves; the holder drains cmdq before it lets
 * go, and looks again after letting go, so work is never stranded.
 */
#ifndef XPI_ENGINE_H
#define XPI_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>

#include "xport/xport.h"
#include "clock.h"
#include "compiler.h"
#include "config.h"
#include "dlist.h"
#include "match.h"
#include "mpsc.h"
#include "pool.h"
#include "transport.h"

/* Inline payload a descriptor stores in itself; longer inline payloads
 * get a descriptor sized for them. */
#define XPI_INLINE_MAX 32
_Static_assert(XPI_INLINE_MAX >= XPI_RNDV_DESC_MAX, "an RTS keeps its descriptor in the store");
/* Transports one rank can have: self, shm, tcp, rdma, dpdk, and room for
 * tests' shims. */
#define XPI_MAX_TL 8
/* Transport types (enum xpi_tl_type, src/select/card.h) a sideband
 * message may name, 0 unused; the last is the core's own, for the lanes
 * of endpoints (ep.c). */
#define XPI_SIDEBAND_TYPES 8
#define XPI_SIDEBAND_EP (XPI_SIDEBAND_TYPES - 1)
/* What one buffered unexpected message costs beyond its payload. */
#define XPI_UNEXP_OVERHEAD 64

enum xpi_op { XPI_OP_SEND = 1, XPI_OP_RECV, XPI_OP_RECV_BUF, XPI_OP_COLL };

/*
 * A collective's request (XPI_OP_COLL) is never given to the engine: the
 * collectives layer (src/coll) runs its schedule of point-to-point steps
 * when the program tests or waits, through these hooks.
 */
struct xpi_coll_hooks {
	/* Runs what can run without blocking; true once the request is done. */
	bool (*advance)(xp_request_t *r);
	/* Runs until done or @timeout_ms (as xp_wait's) passes; then it is
	 * done, failed with -ETIMEDOUT if the deadline came first. */
	void (*wait)(xp_request_t *r, int timeout_ms);
	/* Frees the schedule when the request is freed. */
	void (*destroy)(xp_request_t *r);
};
enum xpi_cmd_type {
	XPI_CMD_POST = 1,
	XPI_CMD_CANCEL,
	XPI_CMD_MEM_ADD,
	XPI_CMD_MEM_DEL,
	XPI_CMD_TL
};
enum xpi_proto { XPI_PROTO_NONE = 0, XPI_PROTO_EAGER, XPI_PROTO_RNDV };
enum xpi_msg_kind { XPI_MSG_INLINE = 1, XPI_MSG_BUF, XPI_MSG_RTS };
/* Rendezvous send states, for transports that withdraw by compare-and-swap,
 * and ASKED for those whose receiver decides (the withdrawal is asked for). */
enum xpi_rndv_state { XPI_RNDV_PENDING = 0, XPI_RNDV_CLAIMED, XPI_RNDV_WITHDRAWN, XPI_RNDV_ASKED };

struct xp_context;
struct xpi_ep_slot;
struct xpi_ep_lane_ops;
struct xpi_cmd {
	struct xpi_qnode node;
	uint8_t type;
	/* XPI_CMD_TL only: what the owner runs for a transport's command. */
	void (*run)(struct xp_context *ctx, struct xpi_cmd *cmd);
};

struct xp_request {
	struct xpi_cmd post_cmd;
	struct xpi_cmd cancel_cmd;
	struct xpi_posted posted;      /* receives: owner */
	struct xpi_dlink pending_link; /* sends waiting for room, receives to repost: owner */
	struct xpi_dlink tl_link;      /* the transport's own lists (rendezvous) */
	uint64_t tl_id;                /* the transport's id for it */
	uint8_t tl;                    /* the transport that holds it: a send (cancel), or a
					* receive's fetch (proto RNDV while under way) */
	uint32_t tl_pending;           /* the transport's count (zero-copy notifications) */
	uint32_t tl_pending_seq;       /* the transport's copy of the send's peer_seq */
	int64_t tl_deadline;           /* the transport's deadline for it (xpi_now_ns) */
	xp_context_t *ctx;
	uint32_t comm;
	int peer; /* destination, or source / XP_ANY_SOURCE */
	uint64_t tag, mask;
	void *buf;
	size_t len; /* send length or receive capacity */
	uint8_t op;
	uint8_t proto;
	bool blocking;             /* posted by xp_send/xp_recv/xp_recv_buf: texts name that call */
	const xp_comm_t *comm_obj; /* its communicator, for the status's source rank */
	const struct xpi_coll_hooks *coll_hooks; /* XPI_OP_COLL: how it runs */
	void *coll;                              /* XPI_OP_COLL: its schedule */
	_Atomic int cancel_reason;               /* 0, -ETIMEDOUT or -ECANCELED: asked for */
	_Atomic int rndv_state;                  /* enum xpi_rndv_state */
	_Atomic int refs;
	_Atomic int complete;
	int waited_ms; /* the wait that timed out, for its message */
	xp_status_t status;
	char *detail; /* error text, owned */
};

/* A message as the engine sees it: transient when a transport delivers it,
 * owned (copied out of transport memory) while it waits unexpected or out
 * of order. */
struct xpi_msg {
	struct xpi_unexp u; /* match key; links while unexpected */
	struct xpi_dlink held_link;
	uint8_t kind;   /* enum xpi_msg_kind */
	uint8_t tl;     /* transport that delivered it */
	bool sized;     /* owned copy allocated for a long inline payload */
	bool withdrawn; /* held early, then taken back by its sender: dropped in turn */
	/* XPI_MSG_RTS from a peer whose bulk lane is another transport: the
	 * bulk transport's descriptor (data, desc_len bytes), which it gets
	 * back in rndv_fetch. 0: the delivering transport serves it (rndv). */
	uint8_t desc_len;
	uint32_t peer_seq;
	uint64_t len;
	const void *data;              /* XPI_MSG_INLINE: the payload (len bytes); RTS: desc */
	struct xp_buf *buf;            /* XPI_MSG_BUF: pooled buffer holding the payload */
	void *rndv;                    /* XPI_MSG_RTS: transport's remote descriptor */
	uint8_t store[XPI_INLINE_MAX]; /* last: a sized copy extends it */
};

struct xpi_peer {
	uint32_t send_seq;        /* next sequence number to this peer */
	uint32_t recv_seq;        /* next expected from this peer */
	struct xpi_dlink held;    /* early arrivals, by sequence number */
	struct xpi_dlink pending; /* sends waiting for transport room */
	/* The peer's two lanes (xpi_select): eager messages and rendezvous
	 * announcements go on the small one; rendezvous payloads move on the
	 * bulk one, which is the same transport unless a faster one exists. */
	uint8_t tl_small, tl_bulk;
	size_t rndv_threshold; /* the program's, or that transport's */
	/* Eager credit given back: the cost of every eager message from this
	 * peer that has been consumed. The transport carries it to the peer. */
	uint64_t eager_returned;
	/* Diagnostics for timeout messages. */
	uint64_t nsent, nrecvd;
	uint64_t last_sent_tag, last_recvd_tag;
	uint32_t unexp_count;
	/* Set when the peer's transport lost it: the error, and why. */
	int failed;
	char failed_why[96];
	/* Where the peer is and what reaching it costs, for the collectives'
	 * cost model: its host's index in the job (ranks that share a host
	 * share it), and the latency of the small lane and the bandwidth of
	 * the bulk one as their capability cards declare them. */
	int host;
	uint32_t lat_ns, bw_mbps;
	/* What the peer itself sees, which every rank holds alike (gathered
	 * at init): the slowest figures of its links within its host and
	 * across hosts (lat 0 and bw UINT32_MAX where it has none). The
	 * cost model reads only these, so that every member of a
	 * communicator makes the same choice (issue 24, 5.1). */
	uint32_t worst_lat_intra, worst_bw_intra, worst_lat_inter, worst_bw_inter;
	/* The peer said goodbye (xp_finalize) before its connection closed:
	 * lost, but not the cause of a failure (the collectives name a rank
	 * that died rather than one that finished after it). */
	bool finalized;
	/* A receive named it, and its transports were told (peer_wanted). */
	bool wanted;
	/* An endpoint whose peer closed it while messages it sent before its
	 * goodbye were still on another lane: its loss waits for them (ep.c,
	 * xpi_ep_loss_deferred). */
	bool bye_wait;
	/* Eager credit with the peer (xpi_eager_cost): what the eager
	 * messages sent to it cost, and what it last said it consumed. Kept
	 * here, not by a transport, so that an endpoint whose small lane
	 * moves (tcp to rdma) keeps one account. Used by tcp and rdma. */
	uint64_t eager_sent, eager_granted;
	/* The transport that only watches it (xpi_select's watch lane), or
	 * XPI_NO_TL: one a transport of its lanes may ask to carry its
	 * sideband messages (xpi_engine_sideband_send). */
	uint8_t tl_watch;
};
#define XPI_NO_TL 0xffu

struct xpi_reg {
	struct xpi_cmd cmd;     /* adds it to the owner's list */
	struct xpi_cmd del_cmd; /* removes and frees it */
	bool indexed;           /* in the owner's index (reg.c) */
	int nregistered;        /* handles[0 .. nregistered) hold registrations */
	xp_context_t *ctx;
	uint8_t *addr;
	size_t len;
	/* A dmabuf's registration (xp_mem_register_dmabuf): our duplicate of
	 * the program's fd, kept for transports added later, and the offset
	 * of the range in it. -1 for ordinary memory. */
	int dmabuf_fd;
	uint64_t dmabuf_offset;
	void *handles[XPI_MAX_TL];
};

struct xp_mem {
	struct xpi_reg reg;
};

/*
 * A communicator: a group of the job's ranks and two tag spaces, its
 * program's (id, even) and its collectives' (id + 1). Ids come in pairs
 * from 0 (the world) to XPI_COMM_IDS - 2, agreed by the members when the
 * communicator is made (src/coll/comm.c). Ranks in it are numbered 0 to
 * size - 1; the engine and the transports know only the job's (world)
 * ranks, so p2p.c translates on the way in and out.
 */
#define XPI_COMM_IDS 4096 /* ids 0 to 4095: 2048 communicators at once */
#define XPI_COLL_CHANNELS 8u
#define XPI_COLL_AREA (2176u << 10)

struct xp_comm {
	xp_context_t *ctx;
	uint32_t id;
	int rank, size;
	int *to_world;   /* [size]: a member's world rank; NULL for the world */
	int *from_world; /* [ctx->size]: a world rank's rank here, or -1; NULL for the world */
	/* Collective calls started on it by this rank, which every member
	 * counts alike: part of each collective message's tag. */
	uint32_t coll_seq;
	/* Children made from it (dup, split): their ids' agreement runs on it. */
	uint32_t child_seq;
	/* The collectives' cost model's figures (src/coll/cost.c), found at
	 * the first collective that needs them. */
	bool cost_known;
	int nhosts, max_per_host;
	uint32_t lat_intra, bw_intra, lat_inter, bw_inter, lat_all, bw_all;
	/* Allreduce over shared memory (src/coll/shmcoll.c): the channel of
	 * the members' segments it has (-1: none), whether every member can
	 * use it (0: not asked yet, 1, -1), the members' areas, scratch, and
	 * the calls and chunks so far, which every member counts alike. */
	int shm_channel;
	int shm_ok;
	void **shm_areas;
	void *shm_tmp;
	uint64_t shm_calls, shm_chunks;
	uint64_t shm_first_call; /* shm_calls when it began */
	/* The last call finished: calls run in order, and whichever thread
	 * runs the next one sees what the last one wrote (release, acquire). */
	_Atomic uint64_t shm_turn;
};

/* Point-to-point in a communicator's collective tag space (p2p.c), for
 * src/coll: as xp_isend and xp_irecv (exact tag), @dest and @source ranks
 * of @comm. */
/* This rank shares its host with @ranks_here ranks (itself included):
 * waiters spin less when they outnumber the CPUs it may use. */
void xpi_context_set_ranks_here(xp_context_t *ctx, int ranks_here);

int xpi_coll_isend(xp_comm_t *comm, const void *buf, size_t len, int dest, uint64_t tag,
		   xp_request_t **req);
int xpi_coll_irecv(xp_comm_t *comm, void *buf, size_t cap, int source, uint64_t tag,
		   xp_request_t **req);

static inline int xpi_comm_world_rank(const xp_comm_t *c, int rank)
{
	return c->to_world != NULL ? c->to_world[rank] : rank;
}

static inline int xpi_comm_local_rank(const xp_comm_t *c, int world_rank)
{
	return c->from_world != NULL ? c->from_world[world_rank] : world_rank;
}

/* The tag space of a communicator's collectives. */
static inline uint32_t xpi_comm_coll_id(const xp_comm_t *c)
{
	return c->id + 1;
}

/* Whether a message's communicator id is a collective tag space: the
 * program's ids are even, each one's collectives use the odd one above. */
static inline bool xpi_comm_id_is_coll(uint32_t id)
{
	return (id & 1) != 0;
}

struct xpi_tl_slot {
	const struct xpi_tl_ops *ops;
	void *tl;
	/* Its per-peer arrays hold the endpoint slots too (ep.h): it is told
	 * of their loss. */
	bool slots;
};

/* A deadline the engine keeps for its backends (retransmission,
 * keepalive): fire() runs on the owner from progress once the clock has
 * passed deadline_ns, and a waiter's sleep ends by then. Owner only. */
struct xpi_timer {
	int64_t deadline_ns;
	uint32_t heap_pos; /* 0: not armed; else its place in the heap, plus 1 */
	void (*fire)(struct xp_context *ctx, struct xpi_timer *t);
};

struct xp_context {
	_Alignas(64) _Atomic int owner;
	bool serialized; /* XP_THREAD_SERIALIZED: the token is implicit */
	/* Threads asleep in xpi_engine_sleep(), and whether one of them was
	 * already woken (one write to wake_fd per sleep, however many
	 * releases see them): read by every release of the token, and by
	 * other ranks' threads that finish this rank's work (in-process
	 * rendezvous). On a line of their own, written only around sleeps:
	 * beside the token, which every acquire writes, each such read from
	 * another core would pull the token's line away from its owner. */
	_Alignas(64) _Atomic int sleepers;
	_Atomic int wake_sent;
	/* Its sleepers pass a process-wide barrier after counting themselves
	 * (in-process ranks with membarrier): a thread of this process that
	 * finishes their work then needs only a compiler barrier before it
	 * reads the count, not a fence. */
	bool sleepers_barrier;
	/* Set by a thread that needs the token while a waiter holds it
	 * across its spin (xpi_engine_flush): the waiter lets go. */
	_Atomic int token_wanted;
	int wake_fd; /* eventfd in every sleep's set; -1 if none could be made */
	_Alignas(64) struct xpi_mpsc cmdq;
	_Alignas(64) int rank, size;
	struct xpi_config cfg;
	/* Eager credit each sender has with this rank (unexpected_max_bytes
	 * shared out evenly): see xpi_eager_cost(). */
	uint64_t eager_credit_per_peer;
	struct xpi_pool *pool;
	struct xpi_match match; /* owner */
	struct xpi_peer *peers; /* owner */
	uint32_t npending;      /* owner: sends in peers' pending lists */
	int pend_lo, pend_hi;   /* owner: while npending != 0, their peers are in [lo, hi] */
	int nfailed;            /* owner: peers lost (xpi_engine_peer_failed) */
	uint64_t nlost_ops;     /* owner: operations failed by a lost peer, so far */
	/* owner: receives whose message was withdrawn after they took it,
	 * put back at the end of the engine's step (xpi_engine_rndv_done) */
	struct xpi_dlink reposts;
	uint64_t eager_returned_total; /* owner: sum of the peers' eager_returned */
	struct xpi_tl_slot tls[XPI_MAX_TL];
	int ntls;
	/* The transports are being destroyed (last to first): a lost peer is
	 * no longer reported to them, some may be gone already. */
	bool tls_closing;
	/* owner: armed timers, a binary min-heap by deadline */
	struct xpi_timer **timers;
	uint32_t ntimers, timers_cap;
	/* owner: the clock of the engine round running (xpi_engine_now) */
	bool in_round;
	int64_t round_now; /* 0: not read in this round yet */
	/* owner: user registrations by address (reg.c) */
	struct xpi_reg **regs;
	uint64_t *reg_max_end;
	uint32_t nregs, regs_cap;
	struct xp_comm world;
	/* Communicator ids in use here, a bit per pair (src/coll/comm.c);
	 * the lock is for the program's threads making communicators, never
	 * the engine's. */
	pthread_mutex_t comm_lock;
	uint8_t comm_ids_used[XPI_COMM_IDS / 16];
	/* Shared-memory channels (src/coll/shmcoll.c) a live communicator has
	 * here, a bit each (under comm_lock); and of each, who may still read
	 * this rank's area from the communicator that had it last (its
	 * members' world ranks) until they have finished its last call, which
	 * the next one to take the channel waits for. */
	uint8_t shm_channels_used;
	struct xpi_chan_last {
		int *readers;
		int nreaders;
		uint64_t last_call; /* 0: nobody to wait for */
	} shm_chan_last[XPI_COLL_CHANNELS];
	/* Memory of this host's ranks that each maps of every other, for the
	 * collectives over shared memory (src/coll/shmcoll.c): world rank
	 * @rank's area on @channel (XPI_COLL_CHANNELS of XPI_COLL_AREA bytes
	 * each), which only that rank writes; NULL if this rank cannot see
	 * it. Set by the backend that has such memory (src/shm); NULL: none. */
	void *(*host_area)(void *tl, int rank, unsigned channel);
	/* Whether world ranks @a and @b map each other's areas, as every rank
	 * of the job knows alike (the backend's setup agreed on it). */
	bool (*host_pair)(void *tl, int a, int b);
	void *host_area_tl;
	/* The collectives in progress on this rank (src/coll/sched.c), under
	 * comm_lock: whoever waits for one runs them all, so two ranks waiting
	 * for different ones in different orders never wait for each other. */
	struct xpi_dlink coll_active;
	_Atomic int coll_nactive; /* their number, read without the lock */
	/* Idle rounds a waiter spins before it yields the CPU: many while
	 * each rank of this host has a CPU of its own, few when they
	 * outnumber the CPUs (a spinner would then hold the CPU its peer
	 * needs to answer; Open MPI's yield_when_idle). */
	unsigned spin_rounds;
#define XPI_SPIN_ROUNDS 2000
#define XPI_SPIN_ROUNDS_SHARED 20
	struct xpi_msg *free_msgs; /* owner: descriptor cache */
	void *local_job;           /* set if a local job owns this context */
	/* A rank of a job of processes (not of a local job, not a singleton). */
	bool networked;
	/* The bootstrap (src/job/bootstrap.h) of a networked rank: set while
	 * xp_init forms the job, then closed (its star would hold a socket
	 * per rank at rank 0 for the job's life), unless a transport's attach
	 * set keep_boot because its teardown needs it (dpdk: its ranks close
	 * their ports in turn, between bootstrap barriers). */
	struct xpi_boot *boot;
	bool keep_boot;
	/* Out-of-band barrier and allgather of the job (xp_oob_*): set by
	 * whoever formed the job (bootstrap, then the tree of src/job/oob_tree.h;
	 * or a local job), and the operations of the tree so far, which every
	 * rank counts alike. */
	int (*oob_barrier)(xp_context_t *ctx);
	int (*oob_allgather)(xp_context_t *ctx, const void *mine, size_t len, void *all);
	uint32_t oob_seq;
	bool owned_by_job;
	/* Statistics: written by the owner, read by anyone. */
	_Atomic uint64_t st_sends, st_recvs, st_eager, st_rndv;
	_Atomic uint64_t st_unexp_now, st_unexp_bytes_now, st_unexp_bytes_max;
	/* Sleeps (xpi_engine_sleep), and those an event ended before their
	 * bound: for tests of who wakes a sleeper. */
	_Atomic uint64_t st_sleeps, st_sleep_events;
	/* Who takes the sideband messages (transport.h, sideband_send) that
	 * arrive for a transport type: set by that transport when it attaches.
	 * Last: off the lines the hot path reads. */
	struct xpi_sideband {
		void (*take)(void *tl, int peer, const uint8_t *data, size_t len);
		void *tl;
		bool slots; /* it takes them from endpoint slots too */
	} sideband[XPI_SIDEBAND_TYPES];
	/* Endpoints (ep.h): every per-peer array holds npeers entries, the
	 * job's ranks and then the endpoint slots; the slots' states and
	 * names, and the transport that makes them (NULL ops: none). Owner,
	 * but for ep_only, set once. */
	int npeers;
	uint8_t *ep_state;
	char (*ep_label)[48];
	int ep_used;
	const struct xpi_ep_ops *ep_ops;
	void *ep_tl;
	int ep_tl_index;
	/* Makes the transport of endpoints on first need, in a rank of a
	 * job whose own peers need none (open.c); NULL: none can be made. */
	int (*ep_open)(xp_context_t *ctx);
	bool ep_only;   /* made by xp_open: no job */
	bool ep_opened; /* ep_open was called (once: at the first listen or connect) */
	/* Per slot: how its lanes are chosen and how it ends (ep.c). */
	struct xpi_ep_slot *ep_slots;
	/* The transports that may serve an endpoint beside the one that
	 * makes it (ep.h, xpi_ep_lane_register). */
	struct xpi_ep_lane {
		uint8_t type; /* enum xpi_tl_type */
		int tl_index;
		const struct xpi_ep_lane_ops *ops;
		void *tl;
	} ep_lanes[4];
	int nep_lanes;
};

/* What serves a message of @size bytes to @peer (a rank or an endpoint
 * slot): xp_route_get's and xp_ep_route's answer (oob.c). */
void xpi_route_of(const xp_context_t *ctx, int peer, size_t size, xp_route_t *route);

/* --- context --- */
int xpi_context_create(int rank, int size, const struct xpi_config *cfg, xp_context_t **out);
/* Drops what is still queued (before the transports go). */
void xpi_context_teardown(xp_context_t *ctx);
void xpi_context_destroy(xp_context_t *ctx);
int xpi_context_add_tl(xp_context_t *ctx, const struct xpi_tl_ops *ops, void *tl);
/* Makes transport number @tl serve @peer on both lanes. */
void xpi_context_set_peer_tl(xp_context_t *ctx, int peer, int tl);
/* Makes transport @small carry @peer's messages and @bulk its rendezvous
 * payloads (they may be the same). */
void xpi_context_set_peer_lanes(xp_context_t *ctx, int peer, int small, int bulk);

static inline bool xpi_owner_try_acquire(xp_context_t *ctx)
{
	if (ctx->serialized)
		return true; /* the program calls in from one thread at a time */
	return atomic_load_explicit(&ctx->owner, memory_order_relaxed) == 0 &&
	       atomic_exchange_explicit(&ctx->owner, 1, memory_order_acquire) == 0;
}

/* Runs owned work (drains cmdq, retries pending sends, polls transports,
 * fires the timers due). Caller holds the token. Returns events. */
int xpi_engine_run(xp_context_t *ctx);

/* The clock (xpi_now_ns) of the engine round running, read at most once
 * per round however many parts of it ask: a read costs as much as an idle
 * round of polling. Outside a round (a send the program makes), read now. */
static inline int64_t xpi_engine_now(xp_context_t *ctx)
{
	if (!ctx->in_round)
		return xpi_now_ns();
	if (ctx->round_now == 0)
		ctx->round_now = xpi_now_ns();
	return ctx->round_now;
}

/* Lets go of the token; takes it back and runs again while work was handed
 * over meanwhile. Returns the events run after the first release. Wakes a
 * thread of the rank that sleeps (xpi_engine_sleep). */
int xpi_owner_release(xp_context_t *ctx);
/* The same without waking sleepers: for a thread about to sleep itself. */
int xpi_owner_release_quiet(xp_context_t *ctx);

/* Runs the engine until no transport holds output back and no send waits
 * for room, or @timeout_ms passes (-ETIMEDOUT). For calls that then block
 * outside the transports. */
int xpi_engine_flush(xp_context_t *ctx, int timeout_ms);

/* Hands a command to the owner, running it at once if the token is free. */
void xpi_engine_submit(xp_context_t *ctx, struct xpi_cmd *cmd);

/*
 * Sleeps until any transport of the rank has an event, another thread hands
 * work over or finishes some, a timer is due, or @until_ns (xpi_now_ns)
 * passes: one ppoll over every transport's descriptors and the wake fd.
 * Does not sleep if @r (the request waited for, or NULL) is complete once
 * this thread counts as a sleeper.
 * The caller holds the token; it is given back for the sleep (other
 * threads of the rank run meanwhile) and not held on return. Returns true
 * if it slept (or yielded), false if an event was already waiting.
 */
bool xpi_engine_sleep(xp_context_t *ctx, int64_t until_ns, const xp_request_t *r);
/* Wakes the sleepers of the rank, once per sleep (any thread). */
void xpi_engine_wake(xp_context_t *ctx);
/* The wake fd, made with the context and closed with it. 0 or <0. */
int xpi_engine_sleep_init(xp_context_t *ctx);
void xpi_engine_sleep_fini(xp_context_t *ctx);

/* --- timers (owner) --- */
/* Arms @t for @deadline_ns, or moves it there. 0 or -ENOMEM. */
int xpi_timer_arm(xp_context_t *ctx, struct xpi_timer *t, int64_t deadline_ns);
/* Disarms @t if armed. */
void xpi_timer_cancel(xp_context_t *ctx, struct xpi_timer *t);
/* The earliest armed deadline, INT64_MAX if none. */
static inline int64_t xpi_timer_next(const xp_context_t *ctx)
{
	return ctx->ntimers != 0 ? ctx->timers[0]->deadline_ns : INT64_MAX;
}
/* Fires every timer due at @now_ns; returns how many. */
int xpi_timers_run(xp_context_t *ctx, int64_t now_ns);

/* --- requests --- */
/*
 * Requests come from a small per-thread cache (request.c): an operation is
 * allocated and freed on the program's thread, often the same one. The
 * cache's common cases are inline here, because a small message's whole
 * path costs a few hundred instructions and two calls per request were a
 * noticeable part of them.
 */
struct xpi_request_cache {
	xp_request_t *head;
	int count;
	bool registered; /* for release at thread exit */
};
#define XPI_REQUEST_CACHE_MAX 64
/* initial-exec: a shared library's TLS otherwise costs a call to
 * __tls_get_addr on every access. */
extern _Thread_local struct xpi_request_cache xpi_request_cache
	__attribute__((tls_model("initial-exec")));
xp_request_t *xpi_request_alloc_slow(void);
void xpi_request_free_slow(xp_request_t *r);

static inline xp_request_t *xpi_request_new(xp_context_t *ctx, uint8_t op)
{
	struct xpi_request_cache *c = &xpi_request_cache;
	xp_request_t *r = c->head;
	if (xpi_likely(r != NULL)) {
		c->head = *(xp_request_t **)r;
		c->count--;
	} else if ((r = xpi_request_alloc_slow()) == NULL) {
		return NULL;
	}
	/* Field by field rather than a memset of the whole request: the
	 * callers set the operation's own fields, and posted.key, posted.seq
	 * and the command links are written before they are read. */
	r->ctx = ctx;
	r->op = op;
	r->proto = XPI_PROTO_NONE;
	r->post_cmd.type = XPI_CMD_POST;
	r->cancel_cmd.type = XPI_CMD_CANCEL;
	xpi_dlist_init(&r->posted.link);
	xpi_dlist_init(&r->pending_link);
	xpi_dlist_init(&r->tl_link);
	r->tl_pending = 0;
	atomic_init(&r->cancel_reason, 0);
	atomic_init(&r->rndv_state, XPI_RNDV_PENDING);
	atomic_init(&r->refs, 1);
	atomic_init(&r->complete, 0);
	r->waited_ms = 0;
	r->status = (xp_status_t){ .source = XP_ANY_SOURCE };
	r->detail = NULL;
	r->blocking = false;
	r->comm_obj = NULL;
	r->coll_hooks = NULL;
	r->coll = NULL;
	return r;
}

/* What a point-to-point request moves and matches: @peer is a world
 * rank or an endpoint's slot (ep.h), @space its tag space. Inline: it is
 * on every send's and receive's path. */
static inline void xpi_request_target(xp_request_t *r, uint32_t space, int peer, void *buf,
				      size_t len, uint64_t tag, uint64_t mask)
{
	r->comm = space;
	r->peer = peer;
	r->tag = tag;
	r->mask = mask;
	r->buf = buf;
	r->len = len;
}

static inline void xpi_request_get(xp_request_t *r)
{
	atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
}
static inline void xpi_request_put(xp_request_t *r)
{
	/* Holding the last reference, nobody else can take one: skip the
	 * atomic read-modify-write (the usual case, a completed request given
	 * back by its waiter). The acquire load orders the request's last
	 * writes by other threads before its reuse here. */
	if (atomic_load_explicit(&r->refs, memory_order_acquire) != 1 &&
	    atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) != 1)
		return;
	struct xpi_request_cache *c = &xpi_request_cache;
	if (xpi_likely(r->coll_hooks == NULL && r->detail == NULL && c->registered &&
		       c->count < XPI_REQUEST_CACHE_MAX)) {
		*(xp_request_t **)r = c->head;
		c->head = r;
		c->count++;
		return;
	}
	xpi_request_free_slow(r);
}
/* Completes once; any thread. @err is 0 or a negative code. */
void xpi_request_complete(xp_request_t *r, int err);
static inline bool xpi_request_done(const xp_request_t *r)
{
	return atomic_load_explicit(&r->complete, memory_order_acquire) != 0;
}
/* Sets r->detail from a printf format. */
void xpi_request_set_detail(xp_request_t *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/* --- called by the owner's p2p code --- */
void xpi_engine_exec_post(xp_context_t *ctx, xp_request_t *r);
void xpi_engine_exec_cancel(xp_context_t *ctx, xp_request_t *r);
int xpi_engine_retry_pending(xp_context_t *ctx);

/* --- called by transports (owner) --- */

/* A message arrived from msg->u.key.src. The engine copies what it keeps. */
void xpi_engine_deliver(xp_context_t *ctx, struct xpi_msg *msg);

/* A rendezvous fetch that returned 1 has ended with @err (0 or <0;
 * -ECANCELED: the sender withdrew the message, the receive is reposted). */
void xpi_engine_rndv_done(xp_context_t *ctx, xp_request_t *rreq, int err);

/*
 * The transport lost @peer (@err, e.g. -ECONNRESET; @why completes "rank N
 * ..." for messages, e.g. "closed its connection"). The one routine for
 * every way a peer is lost (malformed data, a process gone, a connection
 * broken, the engine's own limits): marks it failed once, fails the sends
 * waiting for it and the receives that name it, now and later (wildcard
 * receives stay posted while another rank is left), then asks every
 * transport to fail what it holds for it (their peer_lost op). Idempotent:
 * later calls, from any transport, do nothing.
 */
void xpi_engine_peer_failed(xp_context_t *ctx, int peer, int err, const char *why);
/* The program closed endpoint slot @peer (ep.h): fails with -ECANCELED the
 * sends waiting for room and the receives that name it, and refuses what
 * comes from it; what the transports hold ends with their close. */
void xpi_engine_peer_closed(xp_context_t *ctx, int peer);
/* Endpoint slot @peer is given back: drops its held and unexpected
 * messages, before its state is made anew for its next connection. */
void xpi_engine_peer_reset(xp_context_t *ctx, int peer);
/*
 * A transport received a sideband message from @peer for the transport of
 * type @type (transport.h, sideband_send): hands it to the one that set
 * ctx->sideband[type]. The taker runs inside the carrier's progress, as
 * the carrier's own frames are handled: it may send sideband messages back
 * and report the peer lost (xpi_engine_peer_failed), nothing else of the
 * engine. 0, or -ENOENT if no transport of this rank takes them (the peer
 * is broken).
 */
int xpi_engine_sideband(xp_context_t *ctx, int peer, uint8_t type, const uint8_t *data, size_t len);
/*
 * Sends a sideband message to @peer's transport of type @type, on the
 * peer's small lane if that is not @from (the caller's own index), else
 * on its watch lane; returns what sideband_send returned, or -ENOTCONN if
 * neither can carry it.
 */
int xpi_engine_sideband_send(xp_context_t *ctx, int peer, int from, uint8_t type, const void *data,
			     size_t len);
/*
 * A transport whose pair with @peer was made on first need asks the peer's
 * watcher (peers[peer].tl_watch) to make its pair too (its peer_wanted),
 * which then sees the peer's process end. Owner, from progress (the
 * watcher may report the peer lost before this returns); nothing if the
 * peer has no watcher.
 */
void xpi_engine_watch_peer(xp_context_t *ctx, int peer);
/*
 * Receiver side of a withdrawal the receiver decides (a transport whose
 * sender cannot claim the message itself, as TCP): the sender of message
 * @peer_seq (comm @comm, tag @tag) from @src asks to take it back. Returns
 * 0 if no receive has taken it (it is gone, as if never sent) or -EBUSY if
 * one has (the send goes on and completes normally).
 */
int xpi_engine_withdraw(xp_context_t *ctx, int src, uint32_t comm, uint64_t tag, uint32_t peer_seq);
/* Sender side: the receiver agreed to the withdrawal of rendezvous send @r
 * (its transport's send_cancel returned 1): completes it with the reason
 * the cancel was asked for, and its text. */
void xpi_engine_send_withdrawn(xp_context_t *ctx, xp_request_t *r);
/* Completes @r, if it is not complete, with -ECANCELED and a text saying
 * the rank went away under it (teardown). */
void xpi_engine_drop_request(xp_context_t *ctx, xp_request_t *r);
/* Completes @r with @peer's failure and a message naming both ranks. */
void xpi_engine_fail_request(xp_context_t *ctx, xp_request_t *r, int peer);

/* True if @comm names a communicator of this rank (frames from the wire
 * name one; only the world exists so far). */
/* A message may name any communicator id in range: its communicator may
 * not exist here yet (its members finish making it at different times),
 * and its messages wait as unexpected ones until it does. */
static inline bool xpi_engine_comm_valid(const xp_context_t *ctx, uint32_t comm)
{
	(void)ctx;
	return comm < XPI_COMM_IDS;
}

/*
 * --- eager credit: the receiver's unexpected-buffer bound ---
 * A sender may have at most eager_credit_per_peer bytes of eager cost in
 * flight to a receiver: sent, and not yet consumed by a receive there. The
 * receiver's engine counts what it consumed (peers[src].eager_returned) and
 * the transport carries that count back; a sender without credit uses
 * rendezvous, so the receiver never buffers more than its bound.
 */
static inline uint64_t xpi_eager_cost(uint64_t len)
{
	return len + XPI_UNEXP_OVERHEAD;
}

/* --- user registrations (reg.c; owner) --- */
int xpi_reg_insert(xp_context_t *ctx, struct xpi_reg *g);
void xpi_reg_remove(xp_context_t *ctx, struct xpi_reg *g);
/* Registers @g with transport slot @i: by its dmabuf fd where @g is a
 * dmabuf and the transport takes them, else by its address range. */
int xpi_reg_with_tl(xp_context_t *ctx, int i, struct xpi_reg *g);
/* Registers with the transports @g has not seen yet. 0 or <0. */
int xpi_reg_catch_up(xp_context_t *ctx, struct xpi_reg *g);
/* Takes @g out of the index and deregisters it from every transport. */
void xpi_reg_release(xp_context_t *ctx, struct xpi_reg *g);
/* The registration that covers [buf, buf + len), or NULL. */
const struct xpi_reg *xpi_reg_find(const xp_context_t *ctx, const void *buf, size_t len);

/* --- descriptors --- */
struct xpi_msg *xpi_msg_alloc(xp_context_t *ctx);
void xpi_msg_free(xp_context_t *ctx, struct xpi_msg *m);

/* --- logging of failures --- */
void xpi_set_thread_detail(const char *text);

#endif
