/* SPDX-License-Identifier: MIT */
/*
 * Connecting the RDMA transport's queue pairs through librdmacm, the
 * option XP_RDMA_CM=on: rdma_cm resolves each peer's IPv4 address to a
 * route and runs the CM handshake, as iWARP devices require (they cannot
 * be connected from traded QP numbers at all) and as IB fabrics with a
 * subnet manager prefer. The bootstrap still trades what rdma_cm cannot
 * (each rank's address and port, its state words, its window).
 *
 * Failures are the library's (rdma.h): rdma_cm reports -1 with errno,
 * converted at this edge; a pair that cannot connect is logged once and
 * left out, and the attach's second exchange makes both sides agree.
 */
#ifndef XPI_RDMA_CM_H
#define XPI_RDMA_CM_H

#include <rdma/rdma_cma.h>
#include <stdint.h>

#include "rdma.h"

enum { XPI_CM_NONE = 0, XPI_CM_WAITING, XPI_CM_DONE, XPI_CM_FAILED };

struct xpi_rdma_cm {
	struct rdma_event_channel *ch;
	struct rdma_cm_id *listen;
	uint32_t ip;   /* network order */
	uint16_t port; /* network order */
	int size;
	struct rdma_cm_id **ids; /* [size]: each pair's, or NULL */
	uint8_t *state;          /* [size]: XPI_CM_* */
	int pending;
};

/* What a pair's QP is made of (the transport's). */
struct xpi_rdma_cm_qp_spec {
	struct ibv_pd *pd;
	struct ibv_cq *cq;
	struct ibv_srq *srq;
	uint32_t max_send_wr, max_inline;
	uint32_t *max_inline_got; /* lowered to what a QP was granted */
	const char *dev_name;
};

/*
 * Opens the device named @want (NULL: the first active), listens on its
 * RoCE IPv4 address, and sets up @d on rdma_cm's context of it (QPs made
 * by rdma_cm must live there, and so must the PD, CQ and SRQ they use).
 * 0, or a negative errno with @why saying which step.
 */
int xpi_rdma_cm_listen(struct xpi_rdma_cm *cm, const char *want, struct xpi_rdma_dev *d, char *why);

/*
 * Connects to every peer @p with @want[p] and a nonzero @ips[p] (ports[p]
 * its listener's): lower ranks connect to us, we to higher ones, all at
 * once, until each is connected or failed or @deadline_ns (xpi_now_ns)
 * passes. 0 (some pairs may have failed: xpi_rdma_cm_qp says which did
 * not) or a negative errno if the setup itself could not run.
 */
int xpi_rdma_cm_connect(struct xpi_rdma_cm *cm, const struct xpi_rdma_cm_qp_spec *spec, int me,
			int size, const uint32_t *ips, const uint16_t *ports, const uint8_t *want,
			int64_t deadline_ns);

/* The connected QP to @peer, or NULL. */
struct ibv_qp *xpi_rdma_cm_qp(const struct xpi_rdma_cm *cm, int peer);
/* Destroys @peer's QP and id (the pair is not used). */
void xpi_rdma_cm_drop(struct xpi_rdma_cm *cm, int peer);
/* Destroys every QP and id, the listener and the channel. */
void xpi_rdma_cm_close(struct xpi_rdma_cm *cm);

#endif
