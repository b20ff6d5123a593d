/* SPDX-License-Identifier: MIT */
/*
 * The shared-memory transport's copies by cross-memory attach
 * (process_vm_readv/writev): one copy per byte, from the sender's buffer
 * straight into the receiver's, instead of two through the chunks.
 *
 * A large payload is split (shm_int.h says why and from when):
 * the receiver asks the sender to write the second part into the receive
 * buffer (a push request in the sender's lane, named in the mailbox) and reads
 * the first part itself meanwhile, so both cores copy at once. When both
 * parts are in, the receiver marks the send done, as a whole read would.
 * A sender that has not taken the request by the time the receiver's part
 * is in (busy elsewhere, or not calling into the library) has it taken
 * back, and the receiver reads the rest too: a receive never waits for its
 * sender to progress, as with a whole read.
 * Whatever one side cannot do (no rights to the other process, memory that
 * cannot be pinned), the other does, or the chunks carry all of it.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "shm_int.h"

/* Copies @len bytes between @local and @remote in process @pid, in as many
 * calls as it takes (a call may stop at a page it cannot pin). 0 or -errno. */
static int cma_copy(bool to_remote, pid_t pid, uint8_t *local, uint64_t remote, uint64_t len)
{
	uint64_t done = 0;
	while (done < len) {
		struct iovec l = { local + done, len - done };
		struct iovec r = { (void *)(uintptr_t)(remote + done), len - done };
		ssize_t n = to_remote ? process_vm_writev(pid, &l, 1, &r, 1, 0) :
					process_vm_readv(pid, &l, 1, &r, 1, 0);
		if (n <= 0)
			return n == 0 ? -EIO : -errno;
		done += (uint64_t)n;
	}
	return 0;
}

void xpi_shm_finish_send(struct xpi_shm *s, int src, uint32_t idx, uint32_t gen)
{
	struct shm_peer *p = &s->peers[src];
	atomic_store_explicit(&p->seg->rndv[idx].state, gen << 2 | RNDV_DONE, memory_order_release);
	atomic_fetch_add_explicit(&s->mine->lanes[src].events, 1, memory_order_release);
	xpi_shm_notify(p);
}

int xpi_shm_fetch_direct(struct xpi_shm *s, int src, uint32_t idx, uint32_t gen, void *dst,
			 size_t cap)
{
	struct shm_peer *p = &s->peers[src];
	if (idx >= NRNDV)
		return -EPROTO;
	_Atomic uint32_t *state = &p->seg->rndv[idx].state;
	uint32_t expected = gen << 2 | RNDV_PENDING;
	if (!atomic_compare_exchange_strong(state, &expected, gen << 2 | RNDV_CLAIMED))
		return -ECANCELED; /* withdrawn by its sender */
	uint64_t addr = atomic_load_explicit(&p->seg->rndv[idx].addr, memory_order_relaxed);
	int rc = cma_copy(false, p->pid, dst, addr, cap);
	if (rc == -EFAULT)
		return rc; /* still claimed: the caller has it streamed instead */
	xpi_shm_finish_send(s, src, idx, gen);
	if (rc == -ESRCH) {
		xpi_shm_peer_died(s, src, "exited or died (its process is gone)");
		return -ECONNRESET;
	}
	return rc;
}

void xpi_shm_push_request(struct xpi_shm *s, int src, struct shm_rx *x)
{
	struct shm_peer *p = &s->peers[src];
	struct shm_push *q = &s->mine->lanes[src].push;
	/* Sequence numbers stay clear of the PUSH_FAILED bit and of 0, the
	 * answer slot's first value. */
	p->push_seq = (p->push_seq + 1) & ~PUSH_FAILED;
	if (p->push_seq == 0)
		p->push_seq = 1;
	x->push_seq = p->push_seq;
	atomic_store_explicit(&q->addr, (uint64_t)(uintptr_t)(x->dst + x->half),
			      memory_order_relaxed);
	atomic_store_explicit(&q->off, x->half, memory_order_relaxed);
	atomic_store_explicit(&q->len, x->len - x->half, memory_order_relaxed);
	atomic_store_explicit(&q->seq, x->push_seq, memory_order_relaxed);
	x->claimed = true;
	s->streams++;
	/* The release orders the request before the mailbox naming it. */
	atomic_store_explicit(&s->mine->lanes[src].mailbox, (x->idx + 1) | MAILBOX_PUSH,
			      memory_order_release);
	xpi_shm_notify(p);
}

bool xpi_shm_push_revoke(struct xpi_shm *s, int src, const struct shm_rx *x)
{
	uint32_t named = (x->idx + 1) | MAILBOX_PUSH;
	return atomic_compare_exchange_strong(&s->mine->lanes[src].mailbox, &named, 0);
}

void xpi_shm_push_serve(struct xpi_shm *s, int peer, uint32_t idx)
{
	struct shm_peer *p = &s->peers[peer];
	struct shm_push *q = &p->seg->lanes[s->ctx->rank].push;
	xp_request_t *r = s->rndv_req[idx];
	uint32_t seq = atomic_load_explicit(&q->seq, memory_order_relaxed) & ~PUSH_FAILED;
	uint64_t addr = atomic_load_explicit(&q->addr, memory_order_relaxed);
	uint64_t off = atomic_load_explicit(&q->off, memory_order_relaxed);
	uint64_t len = atomic_load_explicit(&q->len, memory_order_relaxed);
	/* The peer writes the request: only a send of ours to it that it
	 * claimed is pushed, and only from within its buffer. */
	uint32_t claimed = s->rndv_gen[idx] << 2 | RNDV_CLAIMED;
	int rc = -EPROTO;
	if (r != NULL && s->rndv_peer[idx] == peer &&
	    atomic_load_explicit(&s->mine->rndv[idx].state, memory_order_acquire) == claimed &&
	    off <= r->len && len <= r->len - off)
		rc = cma_copy(true, p->pid, (uint8_t *)r->buf + off, addr, len);
	/* The send completes when the receiver says the whole is in
	 * (reap_direct): it may still be reading its part from our buffer. */
	atomic_store_explicit(&q->done, seq | (rc != 0 ? PUSH_FAILED : 0), memory_order_release);
	xpi_shm_notify(p);
}

int xpi_shm_split_progress(struct xpi_shm *s, int src, struct shm_rx *x)
{
	struct shm_peer *p = &s->peers[src];
	const struct shm_push *q = &s->mine->lanes[src].push;
	uint64_t addr = atomic_load_explicit(&p->seg->rndv[x->idx].addr, memory_order_relaxed);
	bool revoked = false;
	if (!x->read_done) {
		/* Our part, while the sender writes its own. */
		x->read_rc = cma_copy(false, p->pid, x->dst, addr, x->half);
		x->read_done = true;
		revoked = xpi_shm_push_revoke(s, src, x);
	}
	int rc = x->read_rc;
	if (!revoked) {
		uint32_t done = atomic_load_explicit(&q->done, memory_order_acquire);
		if ((done & ~PUSH_FAILED) != x->push_seq)
			return 0; /* the sender has not answered yet */
		revoked = done & PUSH_FAILED;
	}
	if (revoked && rc == 0) /* the rest is ours to read too */
		rc = cma_copy(false, p->pid, x->dst + x->half, addr + x->half, x->len - x->half);
	if (rc != 0) {
		/* Neither side could copy some part (memory that cannot be
		 * pinned, a process gone: its death is noticed and reported
		 * by the liveness check). The send is still claimed: the
		 * chunks carry the whole of it. */
		x->split = false;
		return -1;
	}
	xpi_shm_finish_send(s, src, x->idx, x->gen);
	return 1;
}
