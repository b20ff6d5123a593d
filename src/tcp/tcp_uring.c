/* SPDX-License-Identifier: MIT */
/* The TCP transport's io_uring: setup with the best flags the kernel takes,
 * submission entries, and the ring of provided receive buffers. */
#include <errno.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../core/log.h"
#include "tcp.h"

/*
 * Flags, best first. COOP_TASKRUN|TASKRUN_FLAG: completions are not pushed
 * at us by interrupting the task; the kernel raises a flag in the SQ ring
 * and a spinning waiter runs the pending work with one io_uring_enter when
 * it sees the flag, so an idle spin costs no system call. Any thread may
 * submit, which the owner-token scheme needs (threads take turns driving
 * a rank).
 *
 * SINGLE_ISSUER|DEFER_TASKRUN ties the ring to the thread that created it,
 * and runs completions' work only when that thread asks for events, not
 * through the generic task-work path: a received 8 B message costs about
 * 0.2 us less (a bare io_uring ping-pong here, multishot recv into a
 * buffer ring, spinning on the flag: 3.05-3.12 us one-way against
 * 3.24-3.33 with COOP_TASKRUN; a spinning recv(2) 2.59-2.79). Only a rank
 * that promises one thread (XP_THREAD_FUNNELED) may have it. TASKRUN_FLAG
 * still says when there is work, so idle spins make no system call.
 */
static const unsigned flag_choices[] = {
	IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_COOP_TASKRUN | IORING_SETUP_TASKRUN_FLAG,
	IORING_SETUP_COOP_TASKRUN,
	0,
};

_Thread_local char tcp_thread_mark __attribute__((tls_model("initial-exec")));

/* A deferring ring's fd stays quiet while its completions wait as deferred
 * work (seen on kernel 6.18): sleeps wait on an eventfd the ring signals,
 * signalling off while the owner spins (tcp_sleep_prepare turns it on). */
static int evfd_attach(struct xpi_tcp *t)
{
	t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (t->evfd < 0)
		return -errno;
	int rc = io_uring_register_eventfd(&t->ring, t->evfd);
	if (rc == 0)
		rc = io_uring_cq_eventfd_toggle(&t->ring, false);
	if (rc < 0) {
		close(t->evfd);
		t->evfd = -1;
	}
	return rc;
}

int tcp_ring_init(struct xpi_tcp *t, unsigned entries)
{
	int rc = -EINVAL;
	bool funneled = t->ctx->cfg.thread_mode == XP_THREAD_FUNNELED;
	t->evfd = -1;
	for (size_t i = funneled ? 0 : 1; i < sizeof(flag_choices) / sizeof(flag_choices[0]); i++) {
		struct io_uring_params p;
		memset(&p, 0, sizeof(p));
		p.flags = flag_choices[i];
		/* A completion queue four times the submission queue: multishot
		 * receives post many completions per submission. */
		p.flags |= IORING_SETUP_CQSIZE;
		p.cq_entries = entries * 4;
		rc = io_uring_queue_init_params(entries, &t->ring, &p);
		if (rc == 0 && (p.flags & IORING_SETUP_DEFER_TASKRUN) && evfd_attach(t) < 0) {
			io_uring_queue_exit(&t->ring);
			rc = -EINVAL; /* the next choice */
		}
		if (rc == 0) {
			t->ring_thread = &tcp_thread_mark;
			t->ring_flags = flag_choices[i];
			t->ring_ok = true;
			/* The kernel's features, probed now rather than assumed. */
			struct io_uring_probe *probe = io_uring_get_probe_ring(&t->ring);
			t->zc_supported = probe != NULL &&
					  io_uring_opcode_supported(probe, IORING_OP_SENDMSG_ZC);
			io_uring_free_probe(probe);
			return 0;
		}
		if (rc != -EINVAL)
			break;
	}
	xpi_log_detail(XPI_LOG_INFO, "io_uring_queue_init: %s", xp_strerror(rc));
	return rc;
}

void tcp_ring_fini(struct xpi_tcp *t)
{
	if (t->ring_ok)
		io_uring_queue_exit(&t->ring);
	t->ring_ok = false;
	if (t->evfd >= 0)
		close(t->evfd);
	t->evfd = -1;
}

/* A submission entry; submits what is queued first if the ring is full. */
struct io_uring_sqe *tcp_sqe(struct xpi_tcp *t)
{
	struct io_uring_sqe *sqe = io_uring_get_sqe(&t->ring);
	if (sqe == NULL) {
		io_uring_submit(&t->ring);
		sqe = io_uring_get_sqe(&t->ring);
	}
	return sqe;
}

/* user_data: the operation, the peer, and the connection's generation,
 * so completions of a connection already torn down are recognised. */
uint64_t tcp_udata(enum tcp_op op, const struct tcp_conn *c)
{
	return (uint64_t)op << 56 | (uint64_t)(uint32_t)c->peer << 32 | c->gen;
}

/*
 * liburing 2.3 has no io_uring_setup_buf_ring (2.4 added it): map the ring
 * memory and register it by hand.
 */
int tcp_br_init(struct xpi_tcp *t)
{
	t->br_len = XPI_TCP_BR_ENTRIES * sizeof(struct io_uring_buf);
	void *mem =
		mmap(NULL, t->br_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (mem == MAP_FAILED)
		return -ENOMEM;
	t->br = mem;
	io_uring_buf_ring_init(t->br);
	struct io_uring_buf_reg reg = {
		.ring_addr = (uint64_t)(uintptr_t)mem,
		.ring_entries = XPI_TCP_BR_ENTRIES,
		.bgid = XPI_TCP_BGID,
	};
	int rc = io_uring_register_buf_ring(&t->ring, &reg, 0);
	if (rc < 0) {
		munmap(mem, t->br_len);
		t->br = NULL;
		xpi_log_detail(XPI_LOG_INFO, "io_uring_register_buf_ring: %s", xp_strerror(rc));
		return rc;
	}
	t->br_empty = XPI_TCP_BR_ENTRIES;
	tcp_br_refill(t);
	/* The spare (tcp_br_may_lend) and, for a deferring ring's owner, who
	 * reads control data itself too, a chunk of its own for that
	 * (tcp_ctl_recv_direct): taken now, as the ring's are, so the pool's
	 * use is the same before traffic as after it. Without them now, they
	 * are taken when first needed. */
	if (xpi_pool_get(t->ctx->pool, XPI_TCP_CHUNK, &t->spare) < 0)
		t->spare = NULL;
	if (t->evfd >= 0 && xpi_pool_get(t->ctx->pool, XPI_TCP_CHUNK, &t->direct) < 0)
		t->direct = NULL;
	return 0;
}

/* Puts @b in the ring under @bid, the @added-th of a batch. */
static void br_put(struct xpi_tcp *t, unsigned bid, struct xp_buf *b, int added)
{
	t->br_bufs[bid] = b;
	io_uring_buf_ring_add(t->br, b->data, (unsigned)b->cap, (unsigned short)bid,
			      io_uring_buf_ring_mask(XPI_TCP_BR_ENTRIES), added);
	t->br_empty--;
}

/* True once every view of lent chunk @b has been released: then only our
 * reference is left, and none can be added but by us. Acquire: what the
 * program did with the view's bytes happened before it let go. */
static bool chunk_returned(struct xp_buf *b)
{
	return atomic_load_explicit(&b->refs, memory_order_acquire) == 1;
}

/* Takes back the lent chunks whose views are all released: one becomes the
 * spare, the others go back to the pool. */
static void br_reclaim(struct xpi_tcp *t)
{
	for (unsigned i = 0; i < t->nlent;) {
		struct xp_buf *b = t->lent[i];
		if (!chunk_returned(b)) {
			i++;
			continue;
		}
		t->lent[i] = t->lent[--t->nlent];
		if (t->spare == NULL)
			t->spare = b;
		else
			xpi_buf_put(b);
	}
}

/* Gives every empty buffer id a buffer from the pool, while it has some. */
void tcp_br_refill(struct xpi_tcp *t)
{
	if (t->nlent != 0)
		br_reclaim(t);
	if (t->br_empty == 0)
		return;
	int added = 0;
	for (unsigned bid = 0; bid < XPI_TCP_BR_ENTRIES && t->br_empty != 0; bid++) {
		if (t->br_bufs[bid] != NULL)
			continue;
		struct xp_buf *b = t->spare;
		t->spare = NULL;
		if (b == NULL && xpi_pool_get(t->ctx->pool, XPI_TCP_CHUNK, &b) < 0)
			break; /* the pool is lent out: retried on the next progress */
		br_put(t, bid, b, added++);
	}
	if (added != 0)
		io_uring_buf_ring_advance(t->br, added);
}

/* The chunk the kernel filled under @bid, now ours; its id is empty. */
struct xp_buf *tcp_br_take(struct xpi_tcp *t, unsigned bid)
{
	struct xp_buf *b = bid < XPI_TCP_BR_ENTRIES ? t->br_bufs[bid] : NULL;
	if (b != NULL) {
		t->br_bufs[bid] = NULL;
		t->br_empty++;
	}
	return b;
}

/* May the chunk being parsed be lent out as views? Only while few are, and
 * with a spare to take its place in the ring. */
bool tcp_br_may_lend(struct xpi_tcp *t)
{
	return t->nlent < XPI_TCP_LENT_MAX &&
	       (t->spare != NULL || xpi_pool_get(t->ctx->pool, XPI_TCP_CHUNK, &t->spare) == 0);
}

/* A parsed chunk (of the ring, or read outside it: tcp_ctl_recv_direct): if
 * views of it went to the engine, it joins the lent chunks and true is
 * returned; false: it is free to be read into again. */
bool tcp_chunk_keep_lent(struct xpi_tcp *t, struct xp_buf *chunk)
{
	if (chunk_returned(chunk))
		return false;
	if (t->nlent < XPI_TCP_LENT_MAX)
		t->lent[t->nlent++] = chunk;
	else
		xpi_buf_put(chunk); /* not reached: lent only with room */
	return true;
}

/* A chunk taken with tcp_br_take() has been parsed: straight back into the
 * ring under @bid, or, if views of it went to the engine, kept aside until
 * they are released and the spare goes in its place. */
void tcp_br_give_back(struct xpi_tcp *t, unsigned bid, struct xp_buf *chunk)
{
	if (tcp_chunk_keep_lent(t, chunk)) {
		chunk = t->spare;
		t->spare = NULL;
		if (chunk == NULL) {
			tcp_br_refill(t);
			return;
		}
	}
	br_put(t, bid, chunk, 0);
	io_uring_buf_ring_advance(t->br, 1);
}

void tcp_br_fini(struct xpi_tcp *t)
{
	if (t->br == NULL)
		return;
	if (t->ring_ok)
		io_uring_unregister_buf_ring(&t->ring, XPI_TCP_BGID);
	for (unsigned bid = 0; bid < XPI_TCP_BR_ENTRIES; bid++) {
		if (t->br_bufs[bid] != NULL)
			xpi_buf_put(t->br_bufs[bid]);
		t->br_bufs[bid] = NULL;
	}
	/* Views still held live on: the pool frees each chunk with its last. */
	while (t->nlent != 0)
		xpi_buf_put(t->lent[--t->nlent]);
	if (t->spare != NULL)
		xpi_buf_put(t->spare);
	t->spare = NULL;
	if (t->direct != NULL)
		xpi_buf_put(t->direct);
	t->direct = NULL;
	munmap(t->br, t->br_len);
	t->br = NULL;
}
