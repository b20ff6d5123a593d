/* SPDX-License-Identifier: MIT */
/* The shared-memory transport's structures, shared by its files (shm.h). */
#ifndef XPI_SHM_INT_H
#define XPI_SHM_INT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../core/compiler.h"
#include "../core/dlist.h"
#include "../core/engine.h"
#include "../core/slot_ring.h"
#include "shm_fifo.h"

#define SEG_MAGIC 0x58534547u /* "XSEG" */
#define SEG_VERSION 7u
/* Rendezvous sends a rank may have announced and not yet handed over (all
 * peers together); the state words live in its segment, 16 B each. */
#define NRNDV 65536u
/* Eager payloads up to this go inside the FIFO (1 + 68 slots). */
#define SHM_INLINE_MAX 4096u
/* Rendezvous payloads stream through chunks of the receiver's segment:
 * the sender copies one in while the receiver copies the one before out,
 * each on its own core. The chunks come in sets, one per stream, that the
 * receiver lends to one sender at a time: NSET streams run at once, from
 * as many senders, and the rest wait for a set (2 MiB a rank, whatever the
 * job's size). */
#define NCHUNK 8u
#define CHUNK (64u << 10)
#define NSET 4u
#define CHUNK_FULL 0x80000000u

/* Rendezvous state words: a generation (so a stale announcement never
 * matches a reused word) and a state in the low two bits. */
enum { RNDV_FREE = 0, RNDV_PENDING = 1, RNDV_CLAIMED = 2, RNDV_DONE = 3 };
/*
 * From this size a rendezvous payload is copied by cross-memory attach,
 * split between the two processes (shm_cma.c): the receiver reads the first
 * part from the sender's buffer with process_vm_readv while the sender
 * writes the rest into the receive buffer with process_vm_writev. One copy
 * per byte instead of two, done by both cores at once; each call pins the
 * other's pages and is a system call.
 *
 * Measured here (xprun -n 2 xport-perf bw and lat --transport shm, pinned,
 * two runs each, XP_SHM_CMA_MIN=1 against off):
 *  - bw, window 64 into distinct buffers, GB/s: 8 KiB 3.2-3.6 against
 *    3.4; 32 KiB 8.3-9.6 / 5.3-5.4; 256 KiB 17.7-18.8 / 10.4-10.8; 1 MiB
 *    20.8-21.7 / 11.7-12.0;
 *  - bw, all into one buffer: 32 KiB 18.4-18.5 / 7.2; 1 MiB 55.8-56.4 /
 *    14.5-15.0;
 *  - lat, one-way p50, us: 8 KiB 1.55 / 1.78-1.84; 64 KiB 2.6-2.7 /
 *    7.9-8.2; 1 MiB 26.1 / 76.9-78.2.
 * The receiver reading all of it alone (the direct mode before this) gave
 * 9.4-9.8 and 19.6-20.3 GB/s at 1 MiB. So from 8 KiB, every payload the
 * FIFO does not carry inline; XP_SHM_CMA_MIN moves the threshold, "off"
 * keeps every payload in the chunks.
 */
/* The mailbox word with this bit names a claimed send the receiver wants
 * pushed (struct shm_push), not streamed through the chunks. */
#define MAILBOX_PUSH 0x80000000u
/* shm_push.done: the sender could not write into the receive buffer
 * (no ptrace rights to the receiver, a buffer it cannot pin): the receiver
 * reads that part itself. */
#define PUSH_FAILED 0x80000000u

struct shm_rndv {
	_Atomic uint32_t state; /* gen << 2 | RNDV_* */
	uint32_t pad;
	_Atomic uint64_t addr; /* the send's buffer, for direct reads */
};

/* A split copy's request: the receiver asks the sender of the claimed send
 * its mailbox names to write bytes [off, off + len) of the payload to addr
 * in the receiver's memory. The sender answers in done with the request's
 * seq, or seq | PUSH_FAILED. One at a time per pair, in claim order. */
struct shm_push {
	_Alignas(64) _Atomic uint64_t addr;
	_Atomic uint64_t off, len;
	_Atomic uint32_t seq;
	_Alignas(64) _Atomic uint32_t done;
};

/* A set of chunks one sender streams a rendezvous payload through to us. */
struct shm_set {
	struct {
		_Alignas(64) _Atomic uint32_t state; /* 0 free, else CHUNK_FULL | bytes */
	} chunk[NCHUNK];
	_Alignas(64) uint8_t data[NCHUNK][CHUNK];
};

/* What passes between this rank (the receiver) and one sender, other than
 * messages: in the receiver's segment, one per sending rank, 256 bytes. */
struct shm_lane {
	/* The receiver writes, the sender reads. */
	_Alignas(64) _Atomic uint64_t credit_pub; /* the receiver's peers[src].eager_returned */
	_Atomic uint32_t mailbox;                 /* the send claimed (the sender clears it) */
	_Atomic uint32_t events;                  /* its direct reads of the sender's sends */
	_Atomic uint32_t set; /* the chunk set the claimed one streams through */
	/* The sender writes: what it is about to claim of the FIFO (shm_fifo.h). */
	_Alignas(64) _Atomic uint64_t note;
	struct shm_push push;
};

struct shm_seg {
	uint32_t magic, version;
	uint32_t nranks;
	int32_t pid;
	/* Set as this rank's transport is torn down (xp_finalize): a peer that
	 * then sees the process gone knows it left rather than died. */
	_Atomic uint32_t finalized;
	/* How many of our threads are asleep (or about to be) in ppoll over our
	 * doorbell, a FIFO beside the segment: a peer that writes us
	 * something and sees this non-zero writes a byte to it. */
	_Alignas(64) _Atomic uint32_t sleeping;
	_Alignas(64) struct shm_rndv rndv[NRNDV]; /* our rendezvous sends */
	struct shm_fifo fifo;                     /* every sender's messages to us */
	struct shm_set sets[NSET];
	struct shm_lane lanes[]; /* by sending rank; then the collectives' areas */
};

/* A rendezvous payload this rank expects from a peer, in claim order. */
struct shm_rx {
	struct xpi_dlink link;
	xp_request_t *rreq;
	uint8_t *dst;
	uint64_t cap, len;
	uint32_t idx, gen;
	bool claimed; /* the sender was asked to stream it (start_stream) */
	uint64_t got; /* bytes taken from chunks */
	/* Split copy (shm_cma.c): we read [0, half), the sender writes the
	 * rest. split is cleared if it falls back to the chunks. */
	bool split;
	bool read_done; /* our part is in */
	int read_rc;    /* how reading it went: 0 or -errno */
	uint64_t half;
	uint32_t push_seq; /* the request's, once made */
};

struct shm_peer {
	/* Both sides could map each other's segment when the job formed
	 * (xpi_shm_attach): the pair uses shared memory. The mapping, the
	 * doorbell and the pidfd are made on the pair's first need
	 * (xpi_shm_connect): a message either way, a collective's area. */
	bool agreed;
	/* Mapping it on first need failed (its process gone, its segment
	 * removed): the engine hears of it from progress (shm.c), since a
	 * send may not re-enter the engine. */
	bool unreachable;
	char lost_why[160];  /* why, for the engine */
	struct shm_seg *seg; /* the peer's segment, mapped; NULL until connected */
	size_t seg_len;
	pid_t pid;
	uint64_t probe, probe_val; /* its card's word for the cross-memory test */
	int pidfd;                 /* readable once the peer's process has ended; -1 if none */
	int bell_fd;               /* its doorbell FIFO, for writing; -1 if none */
	bool dead;
	bool cma;             /* we may read its memory with process_vm_readv */
	bool active;          /* in xpi_shm.active: a rendezvous with it under way */
	uint32_t events_seen; /* its direct reads of our sends we have looked at */
	/* Sending to it: its FIFO's head as we last saw it, our eager cost
	 * sent and the credit it last gave back (engine.h). */
	uint32_t fifo_head;
	uint64_t eager_sent, credit_seen;
	/* Our announced rendezvous sends (through their tl_link), and the
	 * one being streamed, through its chunk set tx_set. */
	struct xpi_dlink tx_out;
	int tx_idx; /* -1: none */
	uint64_t tx_off;
	uint32_t tx_chunk, tx_set;
	/* Receiving from it. */
	struct xpi_dlink rx; /* struct shm_rx, claim order */
	int rx_set;          /* the set of ours its stream has, -1: none */
	bool set_wanted;     /* in xpi_shm.set_queue */
	uint32_t rx_chunk;
	uint32_t push_seq;         /* split copies asked of it so far */
	uint64_t credit_published; /* the eager credit we last gave it back */
};

struct xpi_shm {
	xp_context_t *ctx;
	int tl_index;
	struct shm_seg *mine;
	int bell_fd;           /* our doorbell FIFO, read and write (never EOF); -1 if none */
	struct pollfd *pidfds; /* scratch: the live peers' pidfds, for one poll */
	size_t seg_len;
	struct shm_peer *peers;
	int *polled; /* the peers connected (seg mapped), which we serve */
	int npolled;
	bool unreachable_news; /* some peer's unreachable not yet told the engine */
	int *active;           /* the peers with a rendezvous under way, either way */
	int nactive;
	/* Reading our FIFO: how far, and how far we told the senders. */
	uint32_t cons_pos, cons_published;
	uint64_t credit_seen; /* ctx->eager_returned_total when we last gave credit */
	/* Our chunk sets not lent (a bit each), and the peers whose stream
	 * waits for one, in the order they asked. */
	uint32_t sets_free;
	int *set_queue;
	int set_head, set_count;
	/* Since when our FIFO's next message, at stuck_pos, has been claimed
	 * and not published; 0: it is not. */
	int64_t stuck_since_ns;
	uint32_t stuck_pos;
	/* Our rendezvous sends, by state word. */
	xp_request_t *rndv_req[NRNDV];
	int rndv_peer[NRNDV];
	uint32_t rndv_gen[NRNDV];
	uint32_t rndv_free[NRNDV];
	uint32_t nfree;
	uint32_t outstanding;
	unsigned streams; /* bulk streams under way, either way */
	uint64_t cma_min; /* rendezvous from this size read by cross-memory attach */
	uint8_t *scratch;
	/* Which ranks mapped whose segment (row a: rank a's), as the setup's
	 * allgather gave every rank alike: ctx->host_pair. */
	uint8_t *mapped;
	int64_t next_liveness_ns;
	uint32_t polls; /* progress calls, to look at the clock now and then */
};

size_t xpi_shm_seg_size(int nranks);
/* Whether @pid's process has ended, also if it is a zombie not yet reaped
 * (kill(pid, 0) still succeeds then; its pidfd is readable). */
bool xpi_shm_pid_gone(pid_t pid);
/*
 * Maps agreed peer @peer's segment, opens its doorbell and a pidfd, and
 * starts serving it (shm_setup.c). 0 (also if connected already),
 * -ENOTCONN if the pair does not use shared memory, or another negative
 * errno with the reason logged; then the peer is marked unreachable.
 */
int xpi_shm_connect(struct xpi_shm *s, int peer);
/* xpi_shm_connect for a peer not yet connected; inline for the hot paths. */
static inline int xpi_shm_ensure(struct xpi_shm *s, int peer)
{
	return s->peers[peer].seg != NULL ? 0 : xpi_shm_connect(s, peer);
}
/* Rings @p's doorbell if it sleeps (shm.c). */
void xpi_shm_notify(struct shm_peer *p);
void xpi_shm_peer_died(struct xpi_shm *s, int peer, const char *why);

/* shm_cma.c: copies by cross-memory attach. */
/* Reads up to @cap bytes of claimable send @idx/@gen of @src into @dst,
 * all of it by ourselves: 0, -ECANCELED (withdrawn), -EFAULT (claimed, but
 * to be streamed), or another error. */
int xpi_shm_fetch_direct(struct xpi_shm *s, int src, uint32_t idx, uint32_t gen, void *dst,
			 size_t cap);
/* Receiver: the sender's send @idx/@gen is ours in full; it learns it
 * from the count we raise in its lane. */
void xpi_shm_finish_send(struct xpi_shm *s, int src, uint32_t idx, uint32_t gen);
/* Receiver: asks @src to push its part of split copy @x, first in line. */
void xpi_shm_push_request(struct xpi_shm *s, int src, struct shm_rx *x);
/* Receiver: takes back the push request of @x if the sender has not taken
 * it yet. True if taken back: the sender will not write. */
bool xpi_shm_push_revoke(struct xpi_shm *s, int src, const struct shm_rx *x);
/* Sender: serves a push request for our send @idx to @peer. */
void xpi_shm_push_serve(struct xpi_shm *s, int peer, uint32_t idx);
/* Receiver: moves split copy @x from @src on. 1 when it is complete (its
 * sender told), 0 while it waits for the sender, -1 if it fell back to
 * the chunks (streamed from now on, x->split cleared). */
int xpi_shm_split_progress(struct xpi_shm *s, int src, struct shm_rx *x);
void xpi_shm_destroy(void *tlp);
/* ctx->host_area: world rank @rank's collective area on @channel. */
void *xpi_shm_coll_area(void *tl, int rank, unsigned channel);
bool xpi_shm_coll_pair(void *tl, int a, int b);
/* The doorbell FIFO's path beside a segment, for its creator @pid, @rank. */
void xpi_shm_bell_path(char *out, size_t len, pid_t pid, int rank);

#endif
