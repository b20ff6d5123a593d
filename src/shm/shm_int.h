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

#define SEG_MAGIC 0x58534547u /* "XSEG" */
#define SEG_VERSION 5u
/* Rendezvous sends a rank may have announced and not yet handed over (all
 * peers together); the state words live in its segment, 16 B each. */
#define NRNDV 65536u
/* Eager payloads up to this go inside the ring (1 + 68 slots). */
#define SHM_INLINE_MAX 4096u
/* Rendezvous payloads stream through chunks of the receiver's segment:
 * the sender copies one in while the receiver copies the one before out,
 * each on its own core. */
#define NCHUNK 8u
#define CHUNK (64u << 10)
#define CHUNK_FULL 0x80000000u

/* Rendezvous state words: a generation (so a stale announcement never
 * matches a reused word) and a state in the low two bits. */
enum { RNDV_FREE = 0, RNDV_PENDING = 1, RNDV_CLAIMED = 2, RNDV_DONE = 3 };
/* From this size a rendezvous payload is read straight from the sender's
 * buffer with process_vm_readv (one copy, with a system call and page
 * pinning per message) instead of streamed through chunks (two copies, one
 * on each core, no system call). Measured here, xport-perf bw, window 64,
 * alternating runs: at 1 MiB chunks gave 9.3-12.3 GB/s and direct reads
 * 4.9-5.8; at 8 MiB 4.9-10.7 against 4.0-4.7; only once, with the two vCPUs
 * placed far apart, did direct reads win (3.8 against 1.2-1.9, which a bare
 * two-process memcpy pipeline also gave then). So chunks by default, as
 * Open MPI's vader and UCX's posix transport do; XP_SHM_CMA_MIN=<bytes>
 * turns direct reads on from that size. */
#define SHM_CMA_MIN_DEFAULT UINT64_MAX

struct shm_rndv {
	_Atomic uint32_t state; /* gen << 2 | RNDV_* */
	uint32_t pad;
	_Atomic uint64_t addr; /* the send's buffer, for direct reads */
};

/* The chunks one sender streams rendezvous payloads through to us. */
struct shm_bulk {
	struct {
		_Alignas(64) _Atomic uint32_t state; /* 0 free, else CHUNK_FULL | bytes */
	} chunk[NCHUNK];
	_Alignas(64) uint8_t data[NCHUNK][CHUNK];
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
	_Alignas(64) struct shm_rndv rndv[NRNDV];  /* our rendezvous sends */
	_Alignas(64) struct xpi_slot_ring rings[]; /* by sending rank; then the bulk areas */
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
};

struct shm_peer {
	struct shm_seg *seg; /* the peer's segment, mapped */
	size_t seg_len;
	pid_t pid;
	int pidfd;   /* readable once the peer's process has ended; -1 if none */
	int bell_fd; /* its doorbell FIFO, for writing; -1 if none */
	bool dead;
	bool cma;             /* we may read its memory with process_vm_readv */
	uint32_t events_seen; /* its direct reads of our sends we have looked at */
	/* Sending to it: our announced rendezvous sends (through their
	 * tl_link), and the one being streamed. */
	struct xpi_dlink tx_out;
	int tx_idx; /* -1: none */
	uint64_t tx_off;
	uint32_t tx_chunk;
	/* Receiving from it. */
	struct xpi_dlink rx; /* struct shm_rx, claim order */
	uint32_t rx_chunk;
};

struct xpi_shm {
	xp_context_t *ctx;
	int tl_index;
	struct shm_seg *mine;
	int bell_fd;           /* our doorbell FIFO, read and write (never EOF); -1 if none */
	struct pollfd *pidfds; /* scratch: the live peers' pidfds, for one poll */
	size_t seg_len;
	struct shm_peer *peers;
	int *polled; /* the peers we serve */
	int npolled;
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
struct shm_bulk *xpi_shm_bulk(struct shm_seg *seg, int nranks, int src);
void xpi_shm_destroy(void *tlp);
/* ctx->host_area: world rank @rank's collective area on @channel. */
void *xpi_shm_coll_area(void *tl, int rank, unsigned channel);
bool xpi_shm_coll_pair(void *tl, int a, int b);
/* The doorbell FIFO's path beside a segment, for its creator @pid, @rank. */
void xpi_shm_bell_path(char *out, size_t len, pid_t pid, int rank);

#endif
