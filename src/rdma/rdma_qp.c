/* SPDX-License-Identifier: MIT */
/* Reliable-connected queue pairs: creation and the INIT -> RTR -> RTS
 * transitions, with the defaults rdma.h gives and why. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "../core/log.h"
#include "rdma.h"

/* Reads and atomics in flight per QP, each way: enough to keep a link busy
 * with 64 KiB reads, within what every device offers. */
#define XPI_RDMA_RD_ATOMIC 16
/* ACK timeout exponent: 4.096 us x 2^14 = 67 ms per try. */
#define XPI_RDMA_ACK_TIMEOUT 14
#define XPI_RDMA_RETRY_CNT 7
#define XPI_RDMA_RNR_RETRY_FOREVER 7
/* The delay a receiver asks of a sender after an RNR NAK: 12 is 0.64 ms. */
#define XPI_RDMA_MIN_RNR_TIMER 12

int xpi_rdma_qp_create(struct xpi_rdma_dev *d, struct ibv_cq *send_cq, struct ibv_cq *recv_cq,
		       struct ibv_srq *srq, const struct xpi_rdma_qp_caps *caps, struct ibv_qp **qp,
		       uint32_t *max_inline, char *why)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = send_cq,
		.recv_cq = recv_cq,
		.srq = srq,
		.qp_type = IBV_QPT_RC,
		/* Every send is signalled or not as the poster chooses. */
		.sq_sig_all = 0,
		.cap = {
			.max_send_wr = caps->max_send_wr,
			.max_send_sge = caps->max_send_sge,
			.max_recv_wr = srq != NULL ? 0 : caps->max_send_wr,
			.max_recv_sge = srq != NULL ? 0 : 1,
			.max_inline_data = caps->max_inline,
		},
	};
	struct ibv_qp *q = ibv_create_qp(d->pd, &ia);
	if (q == NULL && caps->max_inline != 0) {
		/* Some devices refuse inline sizes they cannot do rather than
		 * clamp them: then go without inline sends. */
		ia.cap.max_inline_data = 0;
		q = ibv_create_qp(d->pd, &ia);
	}
	if (q == NULL)
		return xpi_rdma_fail_errno("creating a queue pair", "ibv_create_qp", d->name, why);
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = d->port,
		.qp_access_flags =
			IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC,
	};
	int rc = ibv_modify_qp(
		q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (rc != 0) {
		rc = xpi_rdma_fail_pos(rc, "moving a queue pair to INIT", "ibv_modify_qp", d->name,
				       why);
		ibv_destroy_qp(q);
		return rc;
	}
	*qp = q;
	*max_inline = ia.cap.max_inline_data;
	return 0;
}

int xpi_rdma_qp_connect(struct xpi_rdma_dev *d, struct ibv_qp *qp, uint32_t local_psn,
			const struct xpi_rdma_addr *remote, char *why)
{
	if (remote->mtu < IBV_MTU_256 || remote->mtu > IBV_MTU_4096 || remote->qpn > 0xffffff ||
	    remote->psn > 0xffffff) {
		char text[XPI_RDMA_WHY_LEN];
		snprintf(text, sizeof(text),
			 "connecting a queue pair on %s: the peer's address is invalid "
			 "(mtu code %u, qpn %u, psn %u)",
			 d->name, remote->mtu, remote->qpn, remote->psn);
		if (why != NULL)
			memcpy(why, text, sizeof(text));
		return xpi_fail(-EINVAL, "%s", text);
	}
	int rd_atomic = d->attr.max_qp_rd_atom < XPI_RDMA_RD_ATOMIC ? d->attr.max_qp_rd_atom :
								      XPI_RDMA_RD_ATOMIC;
	int init_rd =
		d->attr.max_qp_init_rd_atom < rd_atomic ? d->attr.max_qp_init_rd_atom : rd_atomic;
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = remote->mtu < d->mtu ? (enum ibv_mtu)remote->mtu : d->mtu,
		.dest_qp_num = remote->qpn,
		.rq_psn = remote->psn,
		.max_dest_rd_atomic = (uint8_t)rd_atomic,
		.min_rnr_timer = XPI_RDMA_MIN_RNR_TIMER,
		.ah_attr = {
			.dlid = remote->lid,
			.sl = 0,
			.port_num = d->port,
		},
	};
	if (d->roce) {
		/* RoCE has no LIDs: the global route header carries the GIDs. */
		a.ah_attr.is_global = 1;
		memcpy(a.ah_attr.grh.dgid.raw, remote->gid, sizeof(remote->gid));
		a.ah_attr.grh.sgid_index = d->gid_index;
		a.ah_attr.grh.hop_limit = 64;
	}
	int rc = ibv_modify_qp(qp, &a,
			       IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				       IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				       IBV_QP_MIN_RNR_TIMER);
	if (rc != 0)
		return xpi_rdma_fail_pos(rc, "moving a queue pair to RTR", "ibv_modify_qp", d->name,
					 why);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = XPI_RDMA_ACK_TIMEOUT;
	a.retry_cnt = XPI_RDMA_RETRY_CNT;
	a.rnr_retry = XPI_RDMA_RNR_RETRY_FOREVER;
	a.sq_psn = local_psn & 0xffffff;
	a.max_rd_atomic = (uint8_t)init_rd;
	rc = ibv_modify_qp(qp, &a,
			   IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
				   IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
	if (rc != 0)
		return xpi_rdma_fail_pos(rc, "moving a queue pair to RTS", "ibv_modify_qp", d->name,
					 why);
	return 0;
}

uint32_t xpi_rdma_psn(void)
{
	uint32_t v = 0;
	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = (uint32_t)(uintptr_t)&v ^ 0x5a5a5a;
	return v & 0xffffff;
}
