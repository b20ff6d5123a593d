/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory transport between ranks of one host.
 *
 * Each rank creates one segment (/dev/shm/xport-<pid>-<rank>) holding its
 * receive FIFO, which every peer on the host writes its messages to
 * (shm_fifo.h), the chunk sets it lends to peers streaming payloads to it,
 * one small lane per peer (credit, claims, counters) and the state words of
 * its own rendezvous sends: its size grows with the job by 256 B a rank.
 * Peers map it, then its name is removed at once, so nothing is left
 * behind when the job ends, however it ends.
 *
 * Eager messages up to 4 KiB travel inside the FIFO. Longer ones go by
 * rendezvous: the receiver claims the send with a compare-and-swap on its
 * state word in the sender's segment (a sender that times out withdraws
 * with the same CAS) and the sender streams the payload through a chunk
 * set the receiver lends it while the receiver copies the previous chunk
 * out; where the receiver may read the sender's memory, payloads from
 * XP_SHM_CMA_MIN are copied by cross-memory attach instead (shm_cma.c).
 *
 * A waiting rank spins, then sleeps in the engine's one ppoll over every
 * transport: for shared memory, a doorbell FIFO beside its segment that
 * senders write a byte to when they see it asleep, and its peers' pidfds
 * (readable once the process is gone, an unreaped zombie too), so more
 * ranks than cores still progress and a death wakes a sleeper. While it
 * polls it also checks every 100 ms that its peers' processes still exist.
 *
 * Each segment ends with the areas of the collectives over shared memory
 * (ctx->host_area, src/coll/shmcoll.c), which only its rank writes and its
 * peers read; the transport itself never touches them.
 */
#ifndef XPI_SHM_H
#define XPI_SHM_H

#include <stdint.h>

#include "../core/engine.h"

struct xpi_boot;

extern const struct xpi_tl_ops xpi_shm_ops;

/*
 * Collective over the job: every rank calls it. Sets up shared memory with
 * the peers for which @want[peer] is set (they must want it back: the
 * selection is symmetric) and writes @ok[peer] = 1 where it worked, after
 * both sides agreed; there the transport serves the peer. Returns 0 (also
 * when some peers failed: the caller falls back for them) or a negative
 * code when the collective itself failed.
 */
int xpi_shm_attach(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *want, uint8_t *ok);

#endif
