/* SPDX-License-Identifier: MIT */
/*
 * Connection setup through librdmacm (XP_RDMA_CM=on), rdma_cm.h says how.
 *
 * Every rank listens on its device's IPv4 address; the lower rank of each
 * pair connects (resolve address, resolve route, connect with its rank as
 * private data), the higher accepts. One event loop serves both roles, so
 * no pair waits on another. The QPs are rdma_cm's (rdma_create_qp on the
 * pair's id) and take the transport's CQ and SRQ: they live on rdma_cm's
 * own context of the device, which the transport adopted for everything.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/clock.h"
#include "../core/log.h"
#include "rdma_cm.h"

/* What rdma_cm waits for an address or a route, ms. */
#define CM_RESOLVE_MS 5000

/* The IPv4 address of a RoCE v2 GID of one (::ffff:a.b.c.d), or 0. */
static uint32_t gid_ipv4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	uint32_t ip;
	if (memcmp(g->raw, prefix, sizeof(prefix)) != 0)
		return 0;
	memcpy(&ip, g->raw + 12, 4);
	return ip;
}

int xpi_rdma_cm_listen(struct xpi_rdma_cm *cm, const char *want, struct xpi_rdma_dev *d, char *why)
{
	memset(cm, 0, sizeof(*cm));
	/* The device as plain verbs see it tells the address to bind to. */
	struct xpi_rdma_dev probe;
	int rc = xpi_rdma_dev_open(want, &probe, why);
	if (rc < 0)
		return rc;
	uint32_t ip = gid_ipv4(&probe.gid);
	char name[IBV_SYSFS_NAME_MAX];
	snprintf(name, sizeof(name), "%s", probe.name);
	xpi_rdma_dev_close(&probe);
	if (ip == 0) {
		snprintf(why, XPI_RDMA_WHY_LEN,
			 "rdma_cm: device %s has no IPv4 RoCE address to listen on", name);
		return -EADDRNOTAVAIL;
	}
	cm->ch = rdma_create_event_channel();
	if (cm->ch == NULL)
		return xpi_rdma_fail_errno("setting up rdma_cm", "rdma_create_event_channel", name,
					   why);
	/* The setup waits with poll() and a deadline, never in the library. */
	fcntl(cm->ch->fd, F_SETFL, fcntl(cm->ch->fd, F_GETFL) | O_NONBLOCK);
	if (rdma_create_id(cm->ch, &cm->listen, NULL, RDMA_PS_TCP) != 0)
		return xpi_rdma_fail_errno("setting up rdma_cm", "rdma_create_id", name, why);
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = ip };
	if (rdma_bind_addr(cm->listen, (struct sockaddr *)&sa) != 0)
		return xpi_rdma_fail_errno("binding rdma_cm to the device's address",
					   "rdma_bind_addr", name, why);
	if (rdma_listen(cm->listen, 64) != 0)
		return xpi_rdma_fail_errno("listening with rdma_cm", "rdma_listen", name, why);
	if (cm->listen->verbs == NULL ||
	    strcmp(ibv_get_device_name(cm->listen->verbs->device), name) != 0) {
		snprintf(why, XPI_RDMA_WHY_LEN,
			 "rdma_cm: the address of %s belongs to another device", name);
		return -ENODEV;
	}
	cm->ip = ip;
	cm->port = rdma_get_src_port(cm->listen);
	return xpi_rdma_dev_adopt(cm->listen->verbs, d, why);
}

/* The QP of a pair's id, on the transport's CQ and SRQ. */
static int make_qp(const struct xpi_rdma_cm_qp_spec *spec, struct rdma_cm_id *id, char *why)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = spec->cq,
		.recv_cq = spec->cq,
		.srq = spec->srq,
		.qp_type = IBV_QPT_RC,
		.cap = { .max_send_wr = spec->max_send_wr,
			 .max_send_sge = 2,
			 .max_inline_data = spec->max_inline },
	};
	if (rdma_create_qp(id, spec->pd, &ia) != 0) {
		ia.cap.max_inline_data = 0; /* as in rdma_qp.c: some refuse the size */
		if (rdma_create_qp(id, spec->pd, &ia) != 0)
			return xpi_rdma_fail_errno("creating a queue pair", "rdma_create_qp",
						   spec->dev_name, why);
	}
	if (ia.cap.max_inline_data < *spec->max_inline_got)
		*spec->max_inline_got = ia.cap.max_inline_data;
	return 0;
}

static struct rdma_conn_param conn_param(const uint32_t *rank)
{
	/* The defaults of rdma_qp.c: 7 retries, RNR retried without end, 16
	 * reads and atomics outstanding each way. */
	return (struct rdma_conn_param){ .private_data = rank,
					 .private_data_len = sizeof(*rank),
					 .responder_resources = 16,
					 .initiator_depth = 16,
					 .retry_count = 7,
					 .rnr_retry_count = 7 };
}

/* The peer an id serves: its context holds peer + 1 (0: none yet). */
static int peer_of(const struct rdma_cm_id *id)
{
	return (int)(intptr_t)id->context - 1;
}

static void fail_peer(struct xpi_rdma_cm *cm, int peer, const char *what, int me)
{
	if (peer < 0 || cm->state[peer] == XPI_CM_DONE || cm->state[peer] == XPI_CM_FAILED)
		return;
	xpi_log(XPI_LOG_WARN, "rank %d: rdma_cm to rank %d: %s", me, peer, what);
	cm->state[peer] = XPI_CM_FAILED;
	cm->pending--;
}

/* One event of the setup. */
static void on_event(struct xpi_rdma_cm *cm, const struct xpi_rdma_cm_qp_spec *spec,
		     struct rdma_cm_event *ev, int me, int size)
{
	char why[XPI_RDMA_WHY_LEN];
	struct rdma_cm_id *id = ev->id;
	int peer = peer_of(id);
	uint32_t rank = (uint32_t)me;
	struct rdma_conn_param cp = conn_param(&rank);
	switch (ev->event) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(id, CM_RESOLVE_MS) != 0)
			fail_peer(cm, peer, "rdma_resolve_route failed", me);
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED: {
		/* Our ACK timeout, as rdma_qp.c's (14: about 67 ms). */
		uint8_t timeout = 14;
		rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &timeout,
				sizeof(timeout));
		if (make_qp(spec, id, why) < 0)
			fail_peer(cm, peer, why, me);
		else if (rdma_connect(id, &cp) != 0)
			fail_peer(cm, peer, "rdma_connect failed", me);
		return;
	}
	case RDMA_CM_EVENT_CONNECT_REQUEST: {
		/* A lower rank: its rank in the private data, checked. */
		uint32_t from = UINT32_MAX;
		if (ev->param.conn.private_data_len >= sizeof(from))
			memcpy(&from, ev->param.conn.private_data, sizeof(from));
		if (from >= (uint32_t)me || from >= (uint32_t)size ||
		    cm->state[from] != XPI_CM_WAITING) {
			rdma_reject(id, NULL, 0);
			rdma_destroy_id(id);
			return;
		}
		id->context = (void *)(intptr_t)(from + 1);
		cm->ids[from] = id;
		if (make_qp(spec, id, why) < 0)
			fail_peer(cm, (int)from, why, me);
		else if (rdma_accept(id, &cp) != 0)
			fail_peer(cm, (int)from, "rdma_accept failed", me);
		return;
	}
	case RDMA_CM_EVENT_ESTABLISHED:
		if (peer >= 0 && cm->state[peer] == XPI_CM_WAITING) {
			cm->state[peer] = XPI_CM_DONE;
			cm->pending--;
		}
		return;
	case RDMA_CM_EVENT_ADDR_ERROR:
	case RDMA_CM_EVENT_ROUTE_ERROR:
	case RDMA_CM_EVENT_CONNECT_ERROR:
	case RDMA_CM_EVENT_UNREACHABLE:
	case RDMA_CM_EVENT_REJECTED:
		snprintf(why, sizeof(why), "%s (status %d)", rdma_event_str(ev->event), ev->status);
		fail_peer(cm, peer, why, me);
		return;
	default:
		return;
	}
}

int xpi_rdma_cm_connect(struct xpi_rdma_cm *cm, const struct xpi_rdma_cm_qp_spec *spec, int me,
			int size, const uint32_t *ips, const uint16_t *ports, const uint8_t *want,
			int64_t deadline_ns)
{
	cm->ids = calloc((size_t)size, sizeof(*cm->ids));
	cm->state = calloc((size_t)size, sizeof(*cm->state));
	if (cm->ids == NULL || cm->state == NULL)
		return -ENOMEM;
	cm->size = size;
	for (int p = 0; p < size; p++) {
		if (p == me || !want[p] || ips[p] == 0)
			continue;
		cm->state[p] = XPI_CM_WAITING;
		cm->pending++;
		if (p < me)
			continue; /* it connects to us */
		struct sockaddr_in dst = { .sin_family = AF_INET,
					   .sin_addr.s_addr = ips[p],
					   .sin_port = ports[p] };
		struct sockaddr_in src = { .sin_family = AF_INET, .sin_addr.s_addr = cm->ip };
		if (rdma_create_id(cm->ch, &cm->ids[p], (void *)(intptr_t)(p + 1), RDMA_PS_TCP) !=
			    0 ||
		    rdma_resolve_addr(cm->ids[p], (struct sockaddr *)&src, (struct sockaddr *)&dst,
				      CM_RESOLVE_MS) != 0)
			fail_peer(cm, p, "rdma_resolve_addr failed", me);
	}
	while (cm->pending > 0) {
		int64_t left = deadline_ns - xpi_now_ns();
		if (left <= 0)
			break;
		struct pollfd pfd = { .fd = cm->ch->fd, .events = POLLIN };
		int n = poll(&pfd, 1, (int)(left / 1000000 + 1));
		if (n < 0 && errno != EINTR)
			return -errno;
		struct rdma_cm_event *ev;
		while (rdma_get_cm_event(cm->ch, &ev) == 0) {
			on_event(cm, spec, ev, me, size);
			rdma_ack_cm_event(ev);
		}
	}
	for (int p = 0; p < size; p++)
		if (cm->state[p] == XPI_CM_WAITING)
			fail_peer(cm, p, "no connection before the boot deadline", me);
	return 0;
}

struct ibv_qp *xpi_rdma_cm_qp(const struct xpi_rdma_cm *cm, int peer)
{
	if (cm->state == NULL || cm->state[peer] != XPI_CM_DONE)
		return NULL;
	return cm->ids[peer]->qp;
}

void xpi_rdma_cm_drop(struct xpi_rdma_cm *cm, int peer)
{
	if (cm->ids == NULL || cm->ids[peer] == NULL)
		return;
	if (cm->ids[peer]->qp != NULL)
		rdma_destroy_qp(cm->ids[peer]);
	rdma_destroy_id(cm->ids[peer]);
	cm->ids[peer] = NULL;
	cm->state[peer] = XPI_CM_FAILED;
}

void xpi_rdma_cm_close(struct xpi_rdma_cm *cm)
{
	for (int p = 0; cm->ids != NULL && p < cm->size; p++)
		xpi_rdma_cm_drop(cm, p);
	if (cm->listen != NULL)
		rdma_destroy_id(cm->listen);
	if (cm->ch != NULL)
		rdma_destroy_event_channel(cm->ch);
	free(cm->ids);
	free(cm->state);
	memset(cm, 0, sizeof(*cm));
}
