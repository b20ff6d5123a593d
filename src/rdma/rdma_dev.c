/* SPDX-License-Identifier: MIT */
/* Opening an RDMA device and choosing its port and GID (rdma.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "../core/log.h"
#include "rdma.h"

static int no_device(char *why, const char *fmt, const char *arg)
{
	char text[XPI_RDMA_WHY_LEN];
	snprintf(text, sizeof(text), fmt, arg);
	if (why != NULL)
		memcpy(why, text, sizeof(text));
	return xpi_fail(-ENODEV, "%s", text);
}

/* An IPv4-mapped GID (::ffff:a.b.c.d): RoCE v2 routed over IPv4. */
static bool gid_is_ipv4(const union ibv_gid *g)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	return memcmp(g->raw, prefix, sizeof(prefix)) == 0;
}

/* The best GID of @port, by rdma.h's order; -ENODEV if none is usable. */
static int choose_gid(struct xpi_rdma_dev *d, const struct ibv_port_attr *pa, char *why)
{
	int best = -1, best_rank = 0;
	for (int i = 0; i < pa->gid_tbl_len; i++) {
		struct ibv_gid_entry e;
		/* Unused entries fail with ENODATA: not an error. */
		if (ibv_query_gid_ex(d->ctx, d->port, (uint32_t)i, &e, 0) != 0)
			continue;
		static const union ibv_gid zero;
		if (memcmp(e.gid.raw, zero.raw, sizeof(zero.raw)) == 0)
			continue;
		int rank;
		if (!d->roce)
			rank = 1; /* InfiniBand: the first valid GID */
		else if (e.gid_type == IBV_GID_TYPE_ROCE_V2)
			rank = gid_is_ipv4(&e.gid) ? 3 : 2;
		else
			rank = 1;
		if (rank > best_rank) {
			best = i;
			best_rank = rank;
			d->gid = e.gid;
		}
	}
	if (best < 0)
		return no_device(why,
				 "RDMA device %s has no usable GID (no IP address on its netdev?)",
				 d->name);
	d->gid_index = (uint8_t)best;
	return 0;
}

/* Sets @d up on its open context d->ctx: the first active port, its GID,
 * a protection domain. On failure the context is closed unless borrowed. */
static int set_up(struct xpi_rdma_dev *d, char *why)
{
	int rc = ibv_query_device(d->ctx, &d->attr);
	if (rc != 0) {
		rc = xpi_rdma_fail_pos(rc, "querying the RDMA device", "ibv_query_device", d->name,
				       why);
		goto fail;
	}
	rc = -ENODEV;
	for (uint8_t p = 1; p <= d->attr.phys_port_cnt; p++) {
		struct ibv_port_attr pa;
		int q = ibv_query_port(d->ctx, p, &pa);
		if (q != 0) {
			rc = xpi_rdma_fail_pos(q, "querying the RDMA port", "ibv_query_port",
					       d->name, why);
			goto fail;
		}
		if (pa.state != IBV_PORT_ACTIVE)
			continue;
		d->port = p;
		d->roce = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
		d->mtu = pa.active_mtu;
		d->lid = pa.lid;
		rc = choose_gid(d, &pa, why);
		if (rc < 0)
			goto fail;
		break;
	}
	if (d->port == 0) {
		rc = no_device(why, "RDMA device %s has no active port", d->name);
		goto fail;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (d->pd == NULL) {
		rc = xpi_rdma_fail_errno("setting up the RDMA device", "ibv_alloc_pd", d->name,
					 why);
		goto fail;
	}
	return 0;
fail:
	if (!d->borrowed)
		ibv_close_device(d->ctx);
	d->ctx = NULL;
	return rc;
}

/* Opens @dev and takes its first active port. 0, -ENODEV (no active port)
 * or another error; on failure nothing stays open. */
static int open_one(struct ibv_device *dev, struct xpi_rdma_dev *d, char *why)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(dev));
	d->ctx = ibv_open_device(dev);
	if (d->ctx == NULL)
		return xpi_rdma_fail_errno("opening the RDMA device", "ibv_open_device", d->name,
					   why);
	return set_up(d, why);
}

int xpi_rdma_dev_adopt(struct ibv_context *ctx, struct xpi_rdma_dev *d, char *why)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->name, sizeof(d->name), "%s", ibv_get_device_name(ctx->device));
	d->ctx = ctx;
	d->borrowed = true;
	return set_up(d, why);
}

int xpi_rdma_dev_open(const char *name, struct xpi_rdma_dev *d, char *why)
{
	int n = 0;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (list == NULL)
		return errno == ENOSYS || errno == 0 ?
			       no_device(why, "no RDMA devices (%s)", "ibv_get_device_list") :
			       xpi_rdma_fail_errno("listing RDMA devices", "ibv_get_device_list",
						   "this host", why);
	int rc = -ENODEV;
	bool seen = false;
	for (int i = 0; i < n; i++) {
		if (name != NULL && strcmp(ibv_get_device_name(list[i]), name) != 0)
			continue;
		seen = true;
		rc = open_one(list[i], d, why);
		if (rc == 0 || name != NULL)
			break;
	}
	ibv_free_device_list(list);
	if (!seen)
		rc = name != NULL ? no_device(why, "no RDMA device named %s", name) :
				    no_device(why, "no RDMA devices%s", "");
	return rc;
}

void xpi_rdma_dev_close(struct xpi_rdma_dev *d)
{
	if (d->pd != NULL)
		ibv_dealloc_pd(d->pd);
	if (d->ctx != NULL && !d->borrowed)
		ibv_close_device(d->ctx);
	d->pd = NULL;
	d->ctx = NULL;
}

void xpi_rdma_dev_addr(const struct xpi_rdma_dev *d, struct xpi_rdma_addr *a)
{
	memset(a, 0, sizeof(*a));
	memcpy(a->gid, d->gid.raw, sizeof(a->gid));
	a->lid = d->lid;
	a->mtu = (uint8_t)d->mtu;
	a->gid_index = d->gid_index;
}
