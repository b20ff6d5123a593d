/* SPDX-License-Identifier: MIT */
/* The shared-memory transport: segments, rings, rendezvous by cross-memory
 * attach, sleeping on a futex, and noticing dead peers (see shm.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "../core/bootstrap.h"
#include "../core/clock.h"
#include "../core/log.h"
#include "../core/self.h"
#include "../core/slot_ring.h"
#include "shm.h"

#define SEG_MAGIC 0x58534547u /* "XSEG" */
#define SEG_VERSION 1u
#define NRNDV 1024u
/* Eager payloads up to this go inside the ring (1 + 68 slots). */
#define SHM_INLINE_MAX 4096u

/* Rendezvous state words: a generation (so a stale announcement never
 * matches a reused word) and a state in the low two bits. */
enum { RNDV_FREE = 0, RNDV_PENDING = 1, RNDV_CLAIMED = 2, RNDV_DONE = 3 };
#define RNDV_WITHDRAWN RNDV_FREE

struct shm_rndv {
	_Atomic uint32_t state; /* gen << 2 | RNDV_* */
};

struct shm_seg {
	uint32_t magic, version;
	uint32_t nranks;
	int32_t pid;
	_Alignas(64) _Atomic uint32_t doorbell; /* rung by senders that find us asleep */
	_Atomic uint32_t sleeping;
	_Alignas(64) struct shm_rndv rndv[NRNDV];
	_Alignas(64) struct xpi_slot_ring rings[]; /* by sending rank */
};

struct shm_peer {
	struct shm_seg *seg; /* the peer's segment, mapped */
	size_t seg_len;
	pid_t pid;
	bool on;
	bool dead;
};

struct xpi_shm {
	xp_context_t *ctx;
	int tl_index;
	struct shm_seg *mine;
	size_t seg_len;
	struct shm_peer *peers;
	int *polled; /* ranks whose rings we read */
	int npolled;
	/* Our rendezvous sends, by state word. */
	xp_request_t *rndv_req[NRNDV];
	uint32_t rndv_gen[NRNDV];
	uint32_t rndv_free[NRNDV];
	uint32_t nfree;
	uint32_t outstanding;
	uint8_t *scratch;
	int64_t next_liveness_ns;
};

static size_t seg_size(int nranks)
{
	return sizeof(struct shm_seg) + (size_t)nranks * sizeof(struct xpi_slot_ring);
}

static void futex_wake(_Atomic uint32_t *addr)
{
	/* Not FUTEX_PRIVATE: the word is shared between processes. */
	syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void futex_wait(_Atomic uint32_t *addr, uint32_t val, int64_t timeout_ns)
{
	struct timespec ts = { .tv_sec = timeout_ns / 1000000000,
			       .tv_nsec = timeout_ns % 1000000000 };
	syscall(SYS_futex, addr, FUTEX_WAIT, val, &ts, NULL, 0);
}

/* Rings the receiver's doorbell if it sleeps. Read without a fence: a
 * wake-up missed in that race costs one sleep slice (1 ms), not a hang. */
static void notify(struct shm_peer *p)
{
	if (atomic_load_explicit(&p->seg->sleeping, memory_order_relaxed)) {
		atomic_fetch_add(&p->seg->doorbell, 1);
		futex_wake(&p->seg->doorbell);
	}
}

static struct xpi_slot_ring *ring_to(struct xpi_shm *s, int peer)
{
	return &s->peers[peer].seg->rings[s->ctx->rank];
}

static int shm_send_eager(void *tlp, int peer, const struct xpi_msg_hdr *h, const void *data)
{
	struct xpi_shm *s = tlp;
	struct shm_peer *p = &s->peers[peer];
	if (h->len > SHM_INLINE_MAX)
		return -ENOBUFS; /* rendezvous */
	if (p->dead)
		return -ECONNRESET;
	struct xpi_slot_ring *r = ring_to(s, peer);
	uint32_t nslots = xpi_slots_for(h->len);
	struct xpi_slot *slot = xpi_slot_ring_claim(r, nslots);
	if (slot == NULL)
		return -EAGAIN;
	if (!xpi_slot_ring_spend_credit(r, h->len, s->ctx->eager_credit_per_peer))
		return -ENOBUFS;
	xpi_slot_ring_write(r, slot, data, h->len);
	xpi_slot_ring_publish(r, slot, h, XPI_MSG_INLINE, nslots);
	notify(p);
	return 0;
}

static int shm_send_rts(void *tlp, int peer, const struct xpi_msg_hdr *h, xp_request_t *sreq,
			const struct xpi_reg *reg)
{
	(void)reg; /* cross-memory attach reads any mapped memory */
	struct xpi_shm *s = tlp;
	struct shm_peer *p = &s->peers[peer];
	if (p->dead)
		return -ECONNRESET;
	if (s->nfree == 0)
		return -EAGAIN; /* every state word is in use: wait for one */
	struct xpi_slot_ring *r = ring_to(s, peer);
	struct xpi_slot *slot = xpi_slot_ring_claim(r, 1);
	if (slot == NULL)
		return -EAGAIN;
	uint32_t idx = s->rndv_free[--s->nfree];
	uint32_t gen = ++s->rndv_gen[idx];
	atomic_store_explicit(&s->mine->rndv[idx].state, gen << 2 | RNDV_PENDING,
			      memory_order_relaxed);
	xpi_request_get(sreq); /* until the receiver is done or we withdraw */
	sreq->tl_id = idx;
	s->rndv_req[idx] = sreq;
	s->outstanding++;
	slot->u.w[0] = (uint64_t)gen << 32 | idx;
	slot->u.w[1] = (uint64_t)(uintptr_t)sreq->buf;
	xpi_slot_ring_publish(r, slot, h, XPI_MSG_RTS, 1);
	notify(p);
	return 0;
}

static void rndv_release(struct xpi_shm *s, uint32_t idx)
{
	s->rndv_req[idx] = NULL;
	s->rndv_free[s->nfree++] = idx;
	s->outstanding--;
}

static int shm_send_cancel(void *tlp, xp_request_t *sreq)
{
	struct xpi_shm *s = tlp;
	uint32_t idx = (uint32_t)sreq->tl_id;
	uint32_t expected = s->rndv_gen[idx] << 2 | RNDV_PENDING;
	if (!atomic_compare_exchange_strong(&s->mine->rndv[idx].state, &expected,
					    s->rndv_gen[idx] << 2 | RNDV_WITHDRAWN))
		return -EBUSY; /* the receiver is reading it: it completes */
	rndv_release(s, idx);
	xpi_request_put(sreq);
	return 0;
}

/* The message's rendezvous: which state word of the sender, which generation. */
static void rts_ids(const struct xpi_msg *m, uint32_t *idx, uint32_t *gen, uint64_t *addr)
{
	const uint64_t *w = m->rndv;
	*idx = (uint32_t)w[0];
	*gen = (uint32_t)(w[0] >> 32);
	*addr = w[1];
}

static int shm_rndv_fetch(void *tlp, struct xpi_msg *msg, void *dst, size_t cap, xp_request_t *rreq)
{
	(void)rreq;
	struct xpi_shm *s = tlp;
	int src = msg->u.key.src;
	struct shm_peer *p = &s->peers[src];
	uint32_t idx, gen;
	uint64_t addr;
	rts_ids(msg, &idx, &gen, &addr);
	free(msg->rndv);
	msg->rndv = NULL;
	if (p->dead)
		return -ECONNRESET;
	if (idx >= NRNDV)
		return -EPROTO;
	_Atomic uint32_t *state = &p->seg->rndv[idx].state;
	uint32_t expected = gen << 2 | RNDV_PENDING;
	if (!atomic_compare_exchange_strong(state, &expected, gen << 2 | RNDV_CLAIMED))
		return -ECANCELED; /* withdrawn by its sender */
	/* The one copy: straight from the sender's buffer into ours. */
	size_t done = 0;
	int rc = 0;
	while (done < cap) {
		struct iovec local = { (uint8_t *)dst + done, cap - done };
		struct iovec remote = { (void *)(uintptr_t)(addr + done), cap - done };
		ssize_t n = process_vm_readv(p->pid, &local, 1, &remote, 1, 0);
		if (n <= 0) {
			rc = n == 0 ? -EIO : -errno;
			break;
		}
		done += (size_t)n;
	}
	atomic_store_explicit(state, gen << 2 | RNDV_DONE, memory_order_release);
	notify(p);
	if (rc == -ESRCH) {
		p->dead = true;
		xpi_engine_peer_failed(s->ctx, src, -ECONNRESET, "exited or died");
		return -ECONNRESET;
	}
	return rc;
}

static void shm_msg_release(void *tlp, struct xpi_msg *msg)
{
	(void)tlp;
	free(msg->rndv); /* an announcement's ids, copied out of the ring */
	msg->rndv = NULL;
}

/* Our sends the receivers have finished reading. */
static int reap_rndv(struct xpi_shm *s)
{
	int n = 0;
	for (uint32_t idx = 0; idx < NRNDV && s->outstanding != 0; idx++) {
		xp_request_t *r = s->rndv_req[idx];
		if (r == NULL)
			continue;
		uint32_t st = atomic_load_explicit(&s->mine->rndv[idx].state, memory_order_acquire);
		if (st != (s->rndv_gen[idx] << 2 | RNDV_DONE))
			continue;
		rndv_release(s, idx);
		xpi_request_complete(r, 0);
		xpi_request_put(r);
		n++;
	}
	return n;
}

#define POLL_BATCH 64

static int poll_ring(struct xpi_shm *s, int src)
{
	struct xpi_slot_ring *r = &s->mine->rings[src];
	struct xpi_slot *slot;
	int n = 0;
	for (; n < POLL_BATCH && (slot = xpi_slot_ring_peek(r)) != NULL; n++) {
		struct xpi_msg m;
		m.u.key.comm = slot->comm;
		m.u.key.src = src;
		m.u.key.tag = slot->tag;
		m.u.key.mask = 0;
		m.kind = slot->kind == XPI_MSG_RTS ? XPI_MSG_RTS : XPI_MSG_INLINE;
		m.tl = (uint8_t)s->tl_index;
		m.sized = false;
		m.peer_seq = slot->peer_seq;
		m.len = slot->len;
		m.data = slot->u.data;
		m.buf = NULL;
		m.rndv = NULL;
		uint32_t nslots = 1;
		if (m.kind == XPI_MSG_INLINE) {
			nslots = xpi_slots_for(slot->len);
			if (slot->len > SHM_INLINE_MAX) {
				xpi_engine_peer_failed(
					s->ctx, src, -EPROTO,
					"wrote a malformed message to shared memory");
				s->peers[src].dead = true;
				return n;
			}
			if (nslots > 1) {
				xpi_slot_ring_read(r, slot, s->scratch);
				m.data = s->scratch;
			}
		} else {
			/* The ids leave the ring with the message, which may wait. */
			uint64_t *ids = malloc(2 * sizeof(uint64_t));
			if (ids == NULL)
				return n; /* retried on the next progress */
			ids[0] = slot->u.w[0];
			ids[1] = slot->u.w[1];
			m.rndv = ids;
		}
		xpi_engine_deliver(s->ctx, &m);
		r->cons_pos += nslots;
	}
	xpi_slot_ring_publish_head(r, n < POLL_BATCH, s->ctx->peers[src].eager_returned);
	return n;
}

static int shm_progress(void *tlp)
{
	struct xpi_shm *s = tlp;
	int n = 0;
	for (int i = 0; i < s->npolled; i++)
		if (!s->peers[s->polled[i]].dead)
			n += poll_ring(s, s->polled[i]);
	if (s->outstanding != 0)
		n += reap_rndv(s);
	return n;
}

/* A peer whose process is gone fails what involves it. */
static void check_liveness(struct xpi_shm *s)
{
	for (int i = 0; i < s->npolled; i++) {
		struct shm_peer *p = &s->peers[s->polled[i]];
		if (!p->dead && kill(p->pid, 0) < 0 && errno == ESRCH) {
			p->dead = true;
			xpi_engine_peer_failed(s->ctx, s->polled[i], -ECONNRESET,
					       "exited or died (its process is gone)");
		}
	}
}

static void shm_block(void *tlp, int64_t timeout_ns)
{
	struct xpi_shm *s = tlp;
	int64_t now = xpi_now_ns();
	if (now >= s->next_liveness_ns) {
		check_liveness(s);
		s->next_liveness_ns = now + 100000000; /* 100 ms */
	}
	atomic_store(&s->mine->sleeping, 1);
	uint32_t bell = atomic_load(&s->mine->doorbell);
	/* Look once more after saying we sleep, so a message that came in
	 * between is not slept on. */
	for (int i = 0; i < s->npolled; i++) {
		if (xpi_slot_ring_peek(&s->mine->rings[s->polled[i]]) != NULL) {
			atomic_store(&s->mine->sleeping, 0);
			return;
		}
	}
	if (s->outstanding != 0 && timeout_ns > 200000)
		timeout_ns = 200000; /* reads of our sends finish without a bell */
	futex_wait(&s->mine->doorbell, bell, timeout_ns);
	atomic_store(&s->mine->sleeping, 0);
}

static bool shm_tx_pending(void *tlp)
{
	(void)tlp;
	return false; /* a message is in the peer's ring once sent */
}

static void shm_destroy(void *tlp)
{
	struct xpi_shm *s = tlp;
	for (uint32_t idx = 0; idx < NRNDV; idx++)
		if (s->rndv_req[idx] != NULL)
			xpi_request_put(s->rndv_req[idx]);
	for (int p = 0; s->peers != NULL && p < s->ctx->size; p++)
		if (s->peers[p].seg != NULL && s->peers[p].seg != s->mine)
			munmap(s->peers[p].seg, s->peers[p].seg_len);
	if (s->mine != NULL)
		munmap(s->mine, s->seg_len);
	free(s->peers);
	free(s->polled);
	free(s->scratch);
	free(s);
}

const struct xpi_tl_ops xpi_shm_ops = {
	.name = "shm",
	/* Rendezvous is one copy by cross-memory attach; inside the ring an
	 * eager message is copied twice but needs no system call. */
	.rndv_threshold = SHM_INLINE_MAX + 1,
	.mem_reg = xpi_tl_mem_reg_none,
	.mem_dereg = xpi_tl_mem_dereg_none,
	.send_eager = shm_send_eager,
	.send_rts = shm_send_rts,
	.send_cancel = shm_send_cancel,
	.rndv_fetch = shm_rndv_fetch,
	.msg_release = shm_msg_release,
	.progress = shm_progress,
	.block = shm_block,
	.tx_pending = shm_tx_pending,
	.destroy = shm_destroy,
};

/* ------------------------------------------------------------------------- */
/* Setup                                                                     */

static void seg_name(char *out, size_t len, pid_t pid, int rank)
{
	snprintf(out, len, "/xport-%d-%d", (int)pid, rank);
}

/* Removes segments that processes now dead left behind (a job killed
 * while it formed): their names carry the creator's pid. */
static void sweep_stale(void)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		int pid, rank;
		if (sscanf(e->d_name, "xport-%d-%d", &pid, &rank) != 2 || pid <= 0)
			continue;
		if (kill(pid, 0) < 0 && errno == ESRCH) {
			char name[300];
			snprintf(name, sizeof(name), "/%s", e->d_name);
			shm_unlink(name);
		}
	}
	if (d != NULL)
		closedir(d);
}

static void *map_seg(const char *name, size_t len, bool create)
{
	int fd = shm_open(name, create ? O_RDWR | O_CREAT | O_EXCL : O_RDWR, 0600);
	if (fd < 0)
		return NULL;
	if (create && ftruncate(fd, (off_t)len) < 0) {
		close(fd);
		shm_unlink(name);
		return NULL;
	}
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	return p == MAP_FAILED ? NULL : p;
}

/* What each rank publishes for shared memory. */
struct shm_card {
	int32_t pid;
	int32_t ok;     /* its segment exists */
	uint64_t probe; /* an address in it that peers read to test cross-memory attach */
	uint64_t probe_val;
};

static volatile uint64_t probe_word; /* peers read it with process_vm_readv */

int xpi_shm_attach(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *want, uint8_t *ok)
{
	int n = ctx->size, me = ctx->rank;
	struct xpi_shm *s = calloc(1, sizeof(*s));
	struct shm_card *cards = calloc((size_t)n, sizeof(*cards));
	uint8_t *mine_ok = calloc((size_t)n, 1), *all_ok = calloc((size_t)n * (size_t)n, 1);
	int rc = -ENOMEM;
	bool any = false;
	for (int p = 0; p < n; p++)
		any |= p != me && want[p];
	if (s == NULL || cards == NULL || mine_ok == NULL || all_ok == NULL)
		goto out;
	s->ctx = ctx;
	s->seg_len = seg_size(n);
	s->peers = calloc((size_t)n, sizeof(*s->peers));
	s->polled = calloc((size_t)n, sizeof(*s->polled));
	s->scratch = malloc(SHM_INLINE_MAX);
	if (s->peers == NULL || s->polled == NULL || s->scratch == NULL)
		goto out;

	char name[64];
	struct shm_card mine = { .pid = getpid() };
	probe_word = 0x5850524f42450000ull ^ (uint64_t)getpid();
	mine.probe = (uint64_t)(uintptr_t)&probe_word;
	mine.probe_val = probe_word;
	if (any) {
		sweep_stale();
		seg_name(name, sizeof(name), getpid(), me);
		s->mine = map_seg(name, s->seg_len, true);
		if (s->mine != NULL) {
			s->mine->magic = SEG_MAGIC;
			s->mine->version = SEG_VERSION;
			s->mine->nranks = (uint32_t)n;
			s->mine->pid = getpid();
			mine.ok = 1;
		} else {
			xpi_log(XPI_LOG_WARN, "rank %d: cannot create shared memory %s: %s", me,
				name, strerror(errno));
		}
	}
	rc = xpi_boot_allgather(boot, &mine, sizeof(mine), cards);
	if (rc < 0)
		goto out;
	/* Map the segments of the peers both sides want; test that we may read
	 * their memory (cross-memory attach needs ptrace rights). */
	for (int p = 0; p < n; p++) {
		if (p == me || !want[p] || !mine.ok || !cards[p].ok)
			continue;
		seg_name(name, sizeof(name), cards[p].pid, p);
		struct shm_seg *seg = map_seg(name, s->seg_len, false);
		uint64_t v = 0;
		struct iovec l = { &v, sizeof(v) },
			     r = { (void *)(uintptr_t)cards[p].probe, sizeof(v) };
		bool cma = process_vm_readv(cards[p].pid, &l, 1, &r, 1, 0) == sizeof(v) &&
			   v == cards[p].probe_val;
		if (seg == NULL || seg->magic != SEG_MAGIC || seg->version != SEG_VERSION ||
		    seg->nranks != (uint32_t)n || !cma) {
			xpi_log(XPI_LOG_WARN, "rank %d: shared memory with rank %d unusable (%s)",
				me, p,
				seg == NULL ? "cannot map its segment" :
				!cma        ? "cannot read its memory (ptrace rights)" :
					      "its segment is not ours");
			if (seg != NULL)
				munmap(seg, s->seg_len);
			continue;
		}
		s->peers[p].seg = seg;
		s->peers[p].seg_len = s->seg_len;
		s->peers[p].pid = cards[p].pid;
		mine_ok[p] = 1;
	}
	/* Both sides must have mapped each other: agree through the bootstrap. */
	uint8_t *row = calloc((size_t)n, 1);
	rc = row == NULL ? -ENOMEM : 0;
	if (rc == 0) {
		memcpy(row, mine_ok, (size_t)n);
		rc = xpi_boot_allgather(boot, row, (size_t)n, all_ok);
		free(row);
	}
	if (any) {
		/* Everyone has mapped what it will: the name can go. */
		seg_name(name, sizeof(name), getpid(), me);
		shm_unlink(name);
	}
	if (rc < 0)
		goto out;
	for (int p = 0; p < n; p++) {
		ok[p] = p != me && mine_ok[p] && all_ok[(size_t)p * (size_t)n + (size_t)me];
		if (!ok[p] && s->peers[p].seg != NULL) {
			munmap(s->peers[p].seg, s->seg_len);
			s->peers[p].seg = NULL;
		}
		if (ok[p])
			s->polled[s->npolled++] = p;
	}
	for (uint32_t i = 0; i < NRNDV; i++)
		s->rndv_free[s->nfree++] = NRNDV - 1 - i;
	if (s->npolled == 0) {
		rc = 0;
		goto out; /* nothing to serve: no transport */
	}
	s->tl_index = ctx->ntls;
	rc = xpi_context_add_tl(ctx, &xpi_shm_ops, s);
	if (rc < 0)
		goto out;
	for (int p = 0; p < n; p++)
		if (ok[p])
			xpi_context_set_peer_tl(ctx, p, s->tl_index);
	s = NULL; /* the context owns it now */
	rc = 0;
out:
	if (s != NULL) {
		for (int p = 0; p < n; p++)
			ok[p] = 0;
		shm_destroy(s);
	}
	free(cards);
	free(mine_ok);
	free(all_ok);
	return rc;
}
