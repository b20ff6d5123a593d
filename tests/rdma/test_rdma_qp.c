/* SPDX-License-Identifier: MIT */
/*
 * The verbs layer of src/rdma on a real device (soft-RoCE in the lab VM,
 * tests/rdma/vmlab.sh): opening the device and choosing its RoCE v2 GID;
 * two reliable-connected QPs of this process brought up against each other
 * through INIT, RTR and RTS; then every operation the backend will build
 * on, checked byte for byte: inline and non-inline sends into a shared
 * receive queue (messages longer than the path MTU too), an RDMA write with
 * immediate data, an RDMA read and a compare-and-swap (the withdrawal's
 * claim). Then the failures: an invalid peer address, a QP the device
 * refuses, and a write the peer refuses, which must end in a work
 * completion in error and the QP in the error state, not a hang. Skips (77) where the host has no RDMA device.
 */
#include <errno.h>
#include <arpa/inet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rdma/rdma.h"
#include "testutil.h"

#define SLOT 8192
#define NSLOTS 16

struct side {
	struct ibv_cq *cq;
	struct ibv_qp *qp;
	uint32_t psn, max_inline;
};

static struct xpi_rdma_dev dev;
static struct ibv_srq *srq;
static uint8_t *mem;
static struct ibv_mr *mr;

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Waits (bounded) for one completion on @cq and returns it. */
static struct ibv_wc wait_wc(struct ibv_cq *cq, double limit_s)
{
	struct ibv_wc wc;
	double end = now_s() + limit_s;
	for (;;) {
		int n = ibv_poll_cq(cq, 1, &wc);
		T_CHECK(n >= 0);
		if (n == 1)
			return wc;
		if (now_s() > end)
			T_FAIL("no completion within %.0f s", limit_s);
	}
}

static void post_recv(unsigned slot)
{
	struct ibv_sge sge = { (uintptr_t)(mem + slot * SLOT), SLOT, mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = slot, .sg_list = &sge, .num_sge = 1 }, *bad;
	T_EQ(ibv_post_srq_recv(srq, &wr, &bad), 0);
}

static void make_side(struct side *s)
{
	char why[XPI_RDMA_WHY_LEN];
	s->cq = ibv_create_cq(dev.ctx, 64, NULL, NULL, 0);
	T_CHECK(s->cq != NULL);
	struct xpi_rdma_qp_caps caps = { .max_send_wr = 32, .max_send_sge = 2, .max_inline = 64 };
	int rc = xpi_rdma_qp_create(&dev, s->cq, s->cq, srq, &caps, &s->qp, &s->max_inline, why);
	if (rc != 0)
		T_FAIL("xpi_rdma_qp_create: %s", why);
	s->psn = xpi_rdma_psn();
	T_CHECK(s->psn <= 0xffffff);
}

static void connect_pair(struct side *a, struct side *b)
{
	char why[XPI_RDMA_WHY_LEN];
	struct xpi_rdma_addr aa, ba;
	xpi_rdma_dev_addr(&dev, &aa);
	xpi_rdma_dev_addr(&dev, &ba);
	aa.qpn = a->qp->qp_num, aa.psn = a->psn;
	ba.qpn = b->qp->qp_num, ba.psn = b->psn;
	if (xpi_rdma_qp_connect(&dev, a->qp, a->psn, &ba, why) != 0)
		T_FAIL("connect a: %s", why);
	if (xpi_rdma_qp_connect(&dev, b->qp, b->psn, &aa, why) != 0)
		T_FAIL("connect b: %s", why);
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	T_EQ(ibv_query_qp(a->qp, &qa, IBV_QP_STATE | IBV_QP_PATH_MTU, &qi), 0);
	T_EQ(qa.qp_state, IBV_QPS_RTS);
	T_EQ(qa.path_mtu, dev.mtu);
}

static void fill(uint8_t *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 31 + seed * 7 + (i >> 8));
}

/* A send of @len bytes from @src_off (inline if asked), received into the
 * shared queue's slot @slot on the other side; checked. */
static void send_and_check(struct side *from, struct side *to, size_t len, bool inl, unsigned slot,
			   unsigned seed)
{
	uint8_t *src = mem + (NSLOTS + 1) * SLOT;
	fill(src, len, seed);
	memset(mem + slot * SLOT, 0xee, SLOT);
	post_recv(slot);
	struct ibv_sge sge = { (uintptr_t)src, (uint32_t)len, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1000 + seed,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED | (inl ? IBV_SEND_INLINE : 0) },
			   *bad;
	T_EQ(ibv_post_send(from->qp, &wr, &bad), 0);
	if (inl)
		memset(src, 0, len); /* inline: the device took the bytes at post */
	/* Both completions, in whatever order they come (the receive on the
	 * receiver's CQ, the send on the sender's). */
	bool got_send = false, got_recv = false;
	double limit = now_s() + 10;
	while (!got_send || !got_recv) {
		struct ibv_cq *cqs[2] = { from->cq, to->cq };
		for (int c = 0; c < 2; c++) {
			struct ibv_wc wc;
			int n = ibv_poll_cq(cqs[c], 1, &wc);
			T_CHECK(n >= 0);
			if (n == 0)
				continue;
			if (wc.status != IBV_WC_SUCCESS)
				T_FAIL("completion %s for wr %llu", ibv_wc_status_str(wc.status),
				       (unsigned long long)wc.wr_id);
			if (wc.opcode == IBV_WC_SEND) {
				T_CHECK(cqs[c] == from->cq);
				T_EQ(wc.wr_id, 1000 + seed);
				got_send = true;
			} else {
				T_EQ(wc.opcode, IBV_WC_RECV);
				T_CHECK(cqs[c] == to->cq);
				T_EQ(wc.wr_id, slot);
				T_EQ(wc.byte_len, len);
				T_EQ(wc.qp_num, to->qp->qp_num);
				got_recv = true;
			}
		}
		if (now_s() > limit)
			T_FAIL("send of %zu bytes: no completion within 10 s", len);
	}
	uint8_t want[SLOT];
	fill(want, len, seed);
	T_CHECK(memcmp(mem + slot * SLOT, want, len) == 0);
	if (len < SLOT)
		T_EQ(mem[slot * SLOT + len], 0xee); /* nothing past the message */
}

static void one_sided(struct side *a, struct side *b)
{
	uint8_t *local = mem + (NSLOTS + 1) * SLOT, *remote = mem + (NSLOTS + 2) * SLOT;
	/* RDMA write with immediate: lands in @remote, consumes a receive. */
	fill(local, 3000, 9);
	memset(remote, 0, 3000);
	post_recv(3);
	struct ibv_sge sge = { (uintptr_t)local, 3000, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 7,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
				  .send_flags = IBV_SEND_SIGNALED,
				  .imm_data = htonl(0xabcdef) },
			   *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)remote;
	wr.wr.rdma.rkey = mr->rkey;
	T_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
	struct ibv_wc wc = wait_wc(a->cq, 10);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.opcode, IBV_WC_RDMA_WRITE);
	wc = wait_wc(b->cq, 10);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
	T_EQ(ntohl(wc.imm_data), 0xabcdef);
	T_CHECK(memcmp(local, remote, 3000) == 0);

	/* RDMA read of 20000 bytes (several MTUs) by b from a's memory. */
	fill(remote, 20000 > SLOT ? SLOT : 20000, 11);
	size_t n = SLOT;
	memset(local, 0, n);
	sge = (struct ibv_sge){ (uintptr_t)local, (uint32_t)n, mr->lkey };
	wr = (struct ibv_send_wr){ .wr_id = 8,
				   .sg_list = &sge,
				   .num_sge = 1,
				   .opcode = IBV_WR_RDMA_READ,
				   .send_flags = IBV_SEND_SIGNALED };
	wr.wr.rdma.remote_addr = (uintptr_t)remote;
	wr.wr.rdma.rkey = mr->rkey;
	T_EQ(ibv_post_send(b->qp, &wr, &bad), 0);
	wc = wait_wc(b->cq, 10);
	T_EQ(wc.status, IBV_WC_SUCCESS);
	T_EQ(wc.opcode, IBV_WC_RDMA_READ);
	T_CHECK(memcmp(local, remote, n) == 0);

	/* Compare-and-swap on an 8-byte state word: the first claim wins and
	 * sees the old value, the second sees the new one and changes nothing. */
	uint64_t *word = (uint64_t *)(mem + (NSLOTS + 3) * SLOT);
	uint64_t *old = word + 1;
	*word = 1;
	for (int round = 0; round < 2; round++) {
		sge = (struct ibv_sge){ (uintptr_t)old, 8, mr->lkey };
		wr = (struct ibv_send_wr){ .wr_id = 9,
					   .sg_list = &sge,
					   .num_sge = 1,
					   .opcode = IBV_WR_ATOMIC_CMP_AND_SWP,
					   .send_flags = IBV_SEND_SIGNALED };
		wr.wr.atomic.remote_addr = (uintptr_t)word;
		wr.wr.atomic.rkey = mr->rkey;
		wr.wr.atomic.compare_add = 1;
		wr.wr.atomic.swap = 2;
		T_EQ(ibv_post_send(a->qp, &wr, &bad), 0);
		wc = wait_wc(a->cq, 10);
		T_EQ(wc.status, IBV_WC_SUCCESS);
		T_EQ(wc.opcode, IBV_WC_COMP_SWAP);
		T_EQ(*old, round == 0 ? 1 : 2);
		T_EQ(*word, 2);
	}
}

static void failures(struct side *a)
{
	char why[XPI_RDMA_WHY_LEN] = "";
	struct xpi_rdma_addr bad_addr;
	xpi_rdma_dev_addr(&dev, &bad_addr);
	bad_addr.mtu = 9; /* no such MTU code */
	T_EQ(xpi_rdma_qp_connect(&dev, a->qp, 1, &bad_addr, why), -EINVAL);
	T_CONTAINS(why, "invalid");
	T_CONTAINS(why, dev.name);

	/* A queue pair the device refuses: NULL + errno, converted. */
	struct xpi_rdma_qp_caps huge = { .max_send_wr = 1u << 30, .max_send_sge = 1 };
	struct ibv_qp *q = NULL;
	uint32_t inl;
	int rc = xpi_rdma_qp_create(&dev, a->cq, a->cq, srq, &huge, &q, &inl, why);
	T_CHECK(rc < 0);
	T_CHECK(q == NULL);
	T_CONTAINS(why, "ibv_create_qp");
	T_CONTAINS(xp_error_detail(), "creating a queue pair");

	/* An RDMA write with a key the peer never gave: the peer refuses it,
	 * the write's completion is in error and the QP goes to the error
	 * state, which is how the backend learns of it. (A QP whose peer
	 * vanished is not a test here: rxe in Debian's 6.1 kernel kept such a
	 * send in flight, QP in RTS, for more than 10 s in the lab, so the
	 * backend cannot count on retry-exceeded and has its own liveness.) */
	struct side c, d;
	make_side(&c);
	make_side(&d);
	connect_pair(&c, &d);
	uint8_t *src = mem + (NSLOTS + 1) * SLOT;
	struct ibv_sge sge = { (uintptr_t)src, 64, mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 77,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;
	wr.wr.rdma.remote_addr = (uintptr_t)(mem + (NSLOTS + 2) * SLOT);
	wr.wr.rdma.rkey = mr->rkey ^ 0x5a5a00; /* not a key of this device */
	T_EQ(ibv_post_send(c.qp, &wr, &bad), 0);
	struct ibv_wc wc = wait_wc(c.cq, 60);
	T_EQ(wc.wr_id, 77);
	T_CHECK(wc.status != IBV_WC_SUCCESS);
	printf("write with a wrong key: %s\n", ibv_wc_status_str(wc.status));
	struct ibv_qp_attr qa;
	struct ibv_qp_init_attr qi;
	T_EQ(ibv_query_qp(c.qp, &qa, IBV_QP_STATE, &qi), 0);
	T_EQ(qa.qp_state, IBV_QPS_ERR);
	/* Posting on a QP in error: the send is flushed, never lost silently. */
	wr.wr_id = 78;
	int prc = ibv_post_send(c.qp, &wr, &bad);
	if (prc == 0) {
		wc = wait_wc(c.cq, 60);
		T_EQ(wc.wr_id, 78);
		T_EQ(wc.status, IBV_WC_WR_FLUSH_ERR);
	}
	ibv_destroy_qp(c.qp);
	ibv_destroy_qp(d.qp);
	ibv_destroy_cq(c.cq);
	ibv_destroy_cq(d.cq);
}

int main(void)
{
	char why[XPI_RDMA_WHY_LEN];
	int rc = xpi_rdma_dev_open(NULL, &dev, why);
	if (rc == -ENODEV) {
		printf("SKIP: %s (tests/rdma/vmlab.sh runs this in a VM with soft-RoCE)\n", why);
		return T_SKIP;
	}
	if (rc != 0)
		T_FAIL("xpi_rdma_dev_open: %s", why);
	printf("device %s port %u gid index %u mtu code %d roce %d\n", dev.name, dev.port,
	       dev.gid_index, dev.mtu, dev.roce);
	if (dev.roce) {
		/* The lab's address, 10.77.0.1, as an IPv4-mapped RoCE v2 GID. */
		T_EQ(dev.gid.raw[10], 0xff);
		T_EQ(dev.gid.raw[11], 0xff);
	}
	T_EQ(xpi_rdma_dev_open("no-such-device", &(struct xpi_rdma_dev){ 0 }, why), -ENODEV);
	T_CONTAINS(why, "no-such-device");

	size_t len = (NSLOTS + 4) * SLOT;
	mem = aligned_alloc(4096, len);
	T_CHECK(mem != NULL);
	mr = ibv_reg_mr(dev.pd, mem, len,
			IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE |
				IBV_ACCESS_REMOTE_ATOMIC);
	T_CHECK(mr != NULL);
	struct ibv_srq_init_attr si = { .attr = { .max_wr = 64, .max_sge = 1 } };
	srq = ibv_create_srq(dev.pd, &si);
	T_CHECK(srq != NULL);

	struct side a, b;
	make_side(&a);
	make_side(&b);
	printf("inline granted: %u bytes\n", a.max_inline);
	connect_pair(&a, &b);

	unsigned seed = 1;
	if (a.max_inline >= 16)
		send_and_check(&a, &b, 16, true, 0, seed++);
	size_t sizes[] = { 0, 1, 1023, 1024, 1025, 4096, SLOT };
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		send_and_check(&a, &b, sizes[i], false, (unsigned)(i + 1), seed++);
		send_and_check(&b, &a, sizes[i], false, (unsigned)(i + 1), seed++);
	}
	one_sided(&a, &b);
	failures(&a);

	ibv_destroy_qp(a.qp);
	ibv_destroy_qp(b.qp);
	ibv_destroy_cq(a.cq);
	ibv_destroy_cq(b.cq);
	ibv_destroy_srq(srq);
	ibv_dereg_mr(mr);
	free(mem);
	xpi_rdma_dev_close(&dev);
	printf("ok\n");
	return 0;
}
