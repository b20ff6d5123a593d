/* SPDX-License-Identifier: MIT */
/*
 * The in-process transport: ranks that are threads of one process exchange
 * through single-producer, single-consumer rings, one per ordered pair of
 * ranks, created on first use.
 *
 * A ring's producer is the owner of the sending rank's engine and its
 * consumer the owner of the receiving rank's, so each side of a ring has
 * one thread at a time and needs no atomic read-modify-write. Every slot
 * carries its own sequence number, so a message costs the receiver one
 * cache-line transfer (the slot); the consumer publishes how far it has
 * read only now and then, and the producer reads that only when the ring
 * looks full.
 *
 * Small payloads travel inside the slot; larger eager payloads are copied
 * by the sender into a buffer of the receiver's pool, which the receiver
 * can hand to the user without a copy; rendezvous payloads stay in the
 * sender's buffer and the receiver copies them once, straight into the
 * receive buffer, after claiming the send with a compare-and-swap (the
 * sender withdraws with the same CAS when it times out).
 */
#ifndef XPI_INPROC_H
#define XPI_INPROC_H

#include "../core/engine.h"

struct xpi_inproc;

extern const struct xpi_tl_ops xpi_inproc_ops;

/* Creates the contexts of a local job. */
int xpi_local_job_create(int nranks, const struct xpi_config *cfg, xp_local_job_t **job);

#endif
