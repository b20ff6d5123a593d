/* SPDX-License-Identifier: MIT */
/*
 * The RDMA verbs backend's lower layer: a device, its port and GID, and
 * reliable-connected queue pairs brought up from a peer's address. The
 * backend proper (lanes, eager and rendezvous, the registration cache) is
 * built on these; nothing here knows about the engine.
 *
 * Errors. rdma-core reports failure three ways: NULL with errno
 * (ibv_open_device, ibv_create_qp, ibv_reg_mr), a positive errno returned
 * (ibv_modify_qp, ibv_query_port, ibv_post_send), and -1 with errno (a
 * few, ibv_query_gid_ex among them, and librdmacm). Every call here is
 * converted at this edge to the library's model: a negative errno returned,
 * and a detail text (xp_error_detail) naming the step, the verbs call and
 * the device, written to @why when the caller passes one.
 */
#ifndef XPI_RDMA_H
#define XPI_RDMA_H

#include <infiniband/verbs.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a peer needs to connect a reliable-connected QP to one of ours:
 * its port's part traded in xp_init (gid, lid, mtu), its QP's when the pair
 * is made (qpn, psn: rdma_wire.c, or the bootstrap for pairs made in
 * xp_init). */
struct xpi_rdma_addr {
	uint8_t gid[16];
	uint32_t qpn; /* 24 bits */
	uint32_t psn; /* 24 bits: the first packet sequence number it sends */
	uint16_t lid; /* InfiniBand only; 0 on RoCE */
	uint8_t mtu;  /* enum ibv_mtu of its port's active MTU */
	uint8_t gid_index;
};

struct xpi_rdma_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	char name[IBV_SYSFS_NAME_MAX];
	uint8_t port;
	uint8_t gid_index;
	bool roce; /* Ethernet link layer: addressed by GID, no LID */
	union ibv_gid gid;
	enum ibv_mtu mtu; /* the port's active MTU */
	uint16_t lid;
	struct ibv_device_attr attr;
	bool borrowed; /* ctx is librdmacm's: not ours to close */
};

/* Room for a failure's text: the step, the call, the device, the error. */
#define XPI_RDMA_WHY_LEN 192

/*
 * Converts one failed verbs call to a negative errno and writes, into @why
 * (if not NULL) and the thread's error detail, "@step: @call on @dev: error".
 * @rc is what the call returned in its own convention:
 *  - xpi_rdma_fail_pos: a positive errno (0 never reaches here);
 *  - xpi_rdma_fail_errno: NULL or -1 returned, the reason in errno (an
 *    errno of 0, which some providers leave, becomes -EIO).
 */
int xpi_rdma_fail_pos(int rc, const char *step, const char *call, const char *dev, char *why);
int xpi_rdma_fail_errno(const char *step, const char *call, const char *dev, char *why);

/*
 * Opens the device named @name (NULL: the first with an active port), its
 * protection domain, and chooses the port and GID: on RoCE the RoCE v2 GID
 * of an IPv4 address if there is one, else any RoCE v2 GID, else RoCE v1.
 * Returns 0, -ENODEV (no device, none active, or no usable GID: @why says
 * which) or another negative errno from the failed call.
 */
int xpi_rdma_dev_open(const char *name, struct xpi_rdma_dev *d, char *why);
/* The same on a context someone else opened (librdmacm's, whose QPs must
 * live on its own context), which close leaves open. */
int xpi_rdma_dev_adopt(struct ibv_context *ctx, struct xpi_rdma_dev *d, char *why);
void xpi_rdma_dev_close(struct xpi_rdma_dev *d);
/* This device's part of an address (gid, lid, mtu); qpn and psn are zero. */
void xpi_rdma_dev_addr(const struct xpi_rdma_dev *d, struct xpi_rdma_addr *a);

/* Sizes of a QP (its send queue; receives come from the shared queue). */
struct xpi_rdma_qp_caps {
	uint32_t max_send_wr;
	uint32_t max_send_sge;
	uint32_t max_inline; /* asked for; the device may give more or refuse */
};

/*
 * Creates a reliable-connected QP on @d with completions on @send_cq and
 * @recv_cq and receives from @srq (NULL: a receive queue of its own sized
 * as the send queue), moves it to INIT with remote read, write and atomics
 * allowed, and returns it in *qp with the inline size the device granted
 * in *max_inline. Returns 0 or a negative errno (@why says which step).
 */
int xpi_rdma_qp_create(struct xpi_rdma_dev *d, struct ibv_cq *send_cq, struct ibv_cq *recv_cq,
		       struct ibv_srq *srq, const struct xpi_rdma_qp_caps *caps, struct ibv_qp **qp,
		       uint32_t *max_inline, char *why);

/*
 * Brings @qp from INIT through RTR to RTS, connected to @remote, sending
 * from packet sequence number @local_psn. The path MTU is the smaller of
 * both ports' active MTUs. Defaults (transport.h's contract on errors): a
 * 4.3 ms x 2^(timeout 14 - 12) = 67 ms ACK timeout retried 7 times, so a
 * vanished peer fails the QP in about half a second; RNR retried without
 * end (7), because the shared receive queue is refilled before it runs dry
 * and a receiver that is slow to refill must not break the connection; 16
 * outstanding reads and atomics each way, or the device's limit.
 */
int xpi_rdma_qp_connect(struct xpi_rdma_dev *d, struct ibv_qp *qp, uint32_t local_psn,
			const struct xpi_rdma_addr *remote, char *why);

/* A random 24-bit packet sequence number (a new connection never starts
 * where a stale one to the same QP number left off). */
uint32_t xpi_rdma_psn(void);

#endif
