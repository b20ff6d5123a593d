/* SPDX-License-Identifier: MIT */
/*
 * One DPDK port speaking UDP/IPv4 for xport: the EAL (once per process),
 * the port's queues and buffers, ARP (answered, and resolved with a table
 * of neighbours, optionally static), and datagrams in and out through the
 * pure frame functions of udp_wire.h. The reliable transport is built on
 * it. This header includes no DPDK header: only dpdk_port.c is compiled
 * with DPDK's flags.
 *
 * Threads: a port is used by one thread at a time (the rank's owner).
 */
#ifndef XPI_DPDK_PORT_H
#define XPI_DPDK_PORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "udp_wire.h"

struct xpi_dpdk_port;
struct xpi_dgram_key; /* dpdk_auth.h */

struct xpi_dpdk_conf {
	/* EAL arguments, as XP_DPDK_EAL gives them ("-l 0 --no-pci
	 * --vdev=net_memif0,..."), split at spaces; NULL or "": none (the
	 * application initialised the EAL, or the defaults). If the EAL is
	 * already up (the application's, or an earlier port's) it is used as
	 * it is and these are ignored. */
	const char *eal;
	uint16_t port_id; /* the DPDK port */
	uint32_t ip;      /* our IPv4 address, host order */
	uint16_t udp_port;
	/* Static neighbours, "10.0.0.2=02:00:00:00:00:02,..." (NULL: none):
	 * never asked for by ARP. */
	const char *neighbours;
	/* ARP only with neighbours (static, or added by xpi_dpdk_port_allow):
	 * requests from anyone else are neither answered nor learned from,
	 * replies from anyone else not learned. false: with anyone asking for
	 * our address (a port serving kernel sockets, as the tests' do). */
	bool arp_neighbours_only;
};

struct xpi_dpdk_stats {
	uint64_t rx_frames, rx_dgrams, rx_bad, rx_other, tx_frames, tx_full;
	uint64_t arp_answered, arp_asked, arp_learned;
	uint64_t arp_refused;   /* from addresses not our neighbours' (arp_neighbours_only) */
	const char *rx_bad_why; /* the last refusal */
	/* The device computes our checksums / verifies theirs; frames it
	 * said were good (not summed again in software). */
	bool tx_csum_offload, rx_csum_offload;
	uint64_t rx_csum_offloaded;
	bool tx_zc_ok;  /* zero-copy sends possible (xpi_dpdk_zc_ok) */
	uint64_t tx_zc; /* frames sent with their payload by reference */
};

/*
 * Opens the port: the EAL first if nobody has (rte_eal_init with @c->eal),
 * then one receive and one transmit queue, a pool of packet buffers, and
 * starts it. 0, or a negative errno with @why (@n bytes) saying which step
 * failed: -EINVAL (arguments, a neighbour table that does not parse),
 * -ENODEV (no such port: a vdev that did not probe), -ENOMEM, or the
 * EAL's or the driver's code.
 */
int xpi_dpdk_port_open(const struct xpi_dpdk_conf *c, struct xpi_dpdk_port **out, char *why,
		       size_t n);
/*
 * Stops and closes the port. The last port closed of an EAL this layer
 * initialised cleans the EAL up and removes its runtime directory
 * (/var/run/dpdk/<file-prefix>), so nothing of ours stays behind; an
 * application's EAL is left as it was. NULL is harmless.
 */
void xpi_dpdk_port_close(struct xpi_dpdk_port *p);

/* Waits up to @timeout_ms for the port's link to come up, restarting the
 * port now and then (a memif client whose server was not listening yet
 * connects only when started again). 0, or -ETIMEDOUT. */
int xpi_dpdk_port_wait_link(struct xpi_dpdk_port *p, int timeout_ms);

void xpi_dpdk_port_mac(const struct xpi_dpdk_port *p, uint8_t mac[6]);

/* Makes @ip a neighbour (its hardware address to be learned by ARP):
 * one ARP speaks with under arp_neighbours_only. 0, or -ENOSPC if the
 * table is full. */
int xpi_dpdk_port_allow(struct xpi_dpdk_port *p, uint32_t ip);

/*
 * Sends @h and @len bytes of @payload to @ip:@port, sealed with @key
 * (dpdk_auth.h; NULL: no MAC, the tag left zero). Sealed datagrams carry
 * no UDP checksum unless the device computes it (the MAC is checked
 * instead). 0; -EAGAIN if the neighbour's address is not known yet (an ARP
 * request went out, at most one per 100 ms per address) or the transmit
 * ring is full; -EMSGSIZE.
 */
int xpi_dpdk_send(struct xpi_dpdk_port *p, uint32_t ip, uint16_t port,
		  const struct xpi_dgram_hdr *h, const void *payload, size_t len,
		  const struct xpi_dgram_key *key);

/*
 * Zero-copy sends: the payload stays in the caller's memory and the port
 * hands the device a reference to it (rte_pktmbuf_attach_extbuf), the
 * frame's headers in a buffer of their own, chained in front. Only where
 * the device takes frames in more than one buffer and addresses memory by
 * its virtual address (IOVA as VA: virtual devices, and NICs bound to
 * vfio with an IOMMU); elsewhere xpi_dpdk_zc_ok() says no and sends copy.
 *
 * One struct xpi_dpdk_zc tracks one region of the caller's memory (a
 * rendezvous window): xpi_dpdk_zc_init() holds the caller's reference,
 * each send of a piece of it adds the device's, and @done runs (once, on
 * the owner's thread) when the caller has dropped its own (xpi_dpdk_zc_put)
 * and the device has let go of every piece: only then may the memory be
 * reused. The storage is the caller's and must stay put until @done.
 */
struct xpi_dpdk_zc {
	uint64_t opaque[6];
};
bool xpi_dpdk_zc_ok(const struct xpi_dpdk_port *p);
void xpi_dpdk_zc_init(struct xpi_dpdk_zc *z, void (*done)(void *arg), void *arg);
void xpi_dpdk_zc_put(struct xpi_dpdk_zc *z);
/* As xpi_dpdk_send with no MAC, @payload (inside @z's region) sent
 * without a copy. Sealed datagrams go by xpi_dpdk_send (copied): GMAC
 * takes the datagram in one piece (dpdk_auth.h), and it reads the payload
 * anyway, which the copy has just brought into the cache. */
int xpi_dpdk_send_zc(struct xpi_dpdk_port *p, uint32_t ip, uint16_t port,
		     const struct xpi_dgram_hdr *h, const void *payload, size_t len,
		     struct xpi_dpdk_zc *z);

/*
 * Receives what has arrived: answers ARP requests for our address, learns
 * neighbours from ARP, counts and drops what does not parse (the reason in
 * the stats), and hands each of our datagrams to @fn, whose frame (and
 * payload) is valid only during the call. Returns how many went to @fn.
 */
int xpi_dpdk_poll(struct xpi_dpdk_port *p, uint32_t nranks,
		  void (*fn)(void *arg, const struct xpi_rx_frame *f), void *arg);

void xpi_dpdk_stats(const struct xpi_dpdk_port *p, struct xpi_dpdk_stats *st);

/* The EAL's runtime directory (/var/run/dpdk/<prefix>), "" if no EAL. */
const char *xpi_dpdk_runtime_dir(void);

#endif
