/* SPDX-License-Identifier: MIT */
/*
 * The one device we show NCCL: xport over the interface its context
 * listens on. Its speed, PCI path and guid come from that interface's
 * entries in /sys/class/net, read once.
 *
 * Which interface: XP_SOCKET_IFNAME; else the one NCCL_SOCKET_IFNAME
 * selects (NCCL's syntax: a comma list of name prefixes, "=" before exact
 * names, "^" before names to avoid), which we also hand to xp_open so that
 * NCCL's setting means the same to both; else the first interface that is
 * up and not a loopback, as xp_open chooses.
 */
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "plugin.h"

_Static_assert(XNCCL_MAX_NET_SIZE <= XP_MSG_MAX, "xport takes what we let NCCL send");

/* NCCL's default when a speed cannot be read (its socket transport's). */
#define DEFAULT_SPEED_MBPS 10000

static struct {
	char ifname[IF_NAMESIZE];
	char pci_path[PATH_MAX];
	bool has_pci;
	int speed;
	uint64_t guid;
	int max_comms;
} dev;
static pthread_once_t dev_once = PTHREAD_ONCE_INIT;

/* Whether @name is selected by the comma list @list (prefixes, or exact
 * names with @exact). */
static bool ifname_listed(const char *name, const char *list, bool exact)
{
	for (const char *p = list; *p != '\0';) {
		size_t n = strcspn(p, ",");
		if (n != 0 && (exact ? strlen(name) == n : strlen(name) >= n) &&
		    strncmp(name, p, n) == 0)
			return true;
		p += n + (p[n] == ',');
	}
	return false;
}

/* The first interface that is up and has an address, in the kernel's
 * order, that @pick accepts; false if none. */
static bool ifname_find(bool (*pick)(const struct ifaddrs *, const void *), const void *arg,
			char out[IF_NAMESIZE])
{
	struct ifaddrs *all;
	if (getifaddrs(&all) != 0)
		return false;
	bool found = false;
	for (struct ifaddrs *i = all; i != NULL && !found; i = i->ifa_next) {
		if (i->ifa_addr == NULL || !(i->ifa_flags & IFF_UP))
			continue;
		if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)
			continue;
		if (pick(i, arg)) {
			snprintf(out, IF_NAMESIZE, "%s", i->ifa_name);
			found = true;
		}
	}
	freeifaddrs(all);
	return found;
}

static bool pick_nccl(const struct ifaddrs *i, const void *arg)
{
	const char *spec = arg;
	if (spec[0] == '^')
		return !(i->ifa_flags & IFF_LOOPBACK) &&
		       !ifname_listed(i->ifa_name, spec + 1, false);
	if (spec[0] == '=')
		return ifname_listed(i->ifa_name, spec + 1, true);
	return ifname_listed(i->ifa_name, spec, false);
}

static bool pick_not_loopback(const struct ifaddrs *i, const void *arg)
{
	return !(i->ifa_flags & IFF_LOOPBACK);
}

const char *xpn_ifname_from_nccl(void)
{
	static char name[IF_NAMESIZE];
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	const char *spec = getenv("NCCL_SOCKET_IFNAME");
	if (spec == NULL || spec[0] == '\0')
		return NULL;
	pthread_mutex_lock(&lock);
	bool found = ifname_find(pick_nccl, spec, name);
	pthread_mutex_unlock(&lock);
	if (!found) {
		XPN_WARN("NET/xport : NCCL_SOCKET_IFNAME=%s selects no interface that is up; "
			 "xport chooses its own",
			 spec);
		return NULL;
	}
	return name;
}

/* The first line of /sys/class/net/@ifname/@file into @out; false if
 * there is none. */
static bool sys_read(const char *ifname, const char *file, char *out, size_t len)
{
	char path[128];
	snprintf(path, sizeof(path), "/sys/class/net/%s/%s", ifname, file);
	FILE *f = fopen(path, "re");
	if (f == NULL)
		return false;
	bool ok = fgets(out, (int)len, f) != NULL;
	fclose(f);
	return ok;
}

static void dev_probe(void)
{
	const char *name = getenv("XP_SOCKET_IFNAME");
	if (name == NULL || name[0] == '\0')
		name = xpn_ifname_from_nccl();
	if (name != NULL)
		snprintf(dev.ifname, sizeof(dev.ifname), "%s", name);
	else if (!ifname_find(pick_not_loopback, NULL, dev.ifname))
		snprintf(dev.ifname, sizeof(dev.ifname), "lo");

	char line[64];
	/* The link's speed in Mb/s; virtual links (loopback, veth) have none
	 * or say -1. */
	dev.speed = DEFAULT_SPEED_MBPS;
	if (sys_read(dev.ifname, "speed", line, sizeof(line)) && atoi(line) > 0)
		dev.speed = atoi(line);
	/* The PCI device behind the interface, for NCCL's topology: what its
	 * "device" link resolves to; virtual interfaces have none. */
	char link[128];
	snprintf(link, sizeof(link), "/sys/class/net/%s/device", dev.ifname);
	dev.has_pci = realpath(link, dev.pci_path) != NULL && strstr(dev.pci_path, "/pci") != NULL;
	/* The guid: the MAC address as a number, so that two ports of one
	 * card differ; 0 (the device number) where there is none. */
	unsigned m[6];
	if (sys_read(dev.ifname, "address", line, sizeof(line)) &&
	    sscanf(line, "%x:%x:%x:%x:%x:%x", &m[0], &m[1], &m[2], &m[3], &m[4], &m[5]) == 6)
		for (int k = 0; k < 6; k++)
			dev.guid = dev.guid << 8 | (m[k] & 0xff);
	/* maxComms: the endpoints a context holds (XP_EP_MAX, as xp_open
	 * reads it), which bound the connections we can make. */
	xp_config_t cfg;
	xp_config_init(&cfg);
	dev.max_comms =
		cfg.ep_max > 0 && cfg.ep_max <= INT_MAX ? (int)cfg.ep_max : XPN_DEFAULT_MAX_COMMS;
	XPN_INFO("NET/xport : device 0 is interface %s, %d Mb/s, PCI %s", dev.ifname, dev.speed,
		 dev.has_pci ? dev.pci_path : "none (virtual)");
}

void xpn_props_fill(struct xnccl_props_v12 *p)
{
	pthread_once(&dev_once, dev_probe);
	static char name[] = "xport";
	*p = (struct xnccl_props_v12){
		.name = name,
		.pci_path = dev.has_pci ? dev.pci_path : NULL,
		.guid = dev.guid,
		/* Host memory only: over TCP the CPU moves every byte, so
		 * device memory cannot be reached, and a dmabuf is worth
		 * saying only where it can be GPU memory (regMrDmaBuf still
		 * takes one the CPU maps, for callers other than NCCL). */
		.ptr_support = XNCCL_PTR_HOST,
		/* xport's registrations belong to the context, not a comm. */
		.reg_is_global = 1,
		.force_flush = 0,
		.speed = dev.speed,
		.port = 0,
		/* Added to NCCL's own latency model, which already counts a
		 * network hop: 0, as NCCL's host transports say. */
		.latency = 0.0f,
		.max_comms = dev.max_comms,
		.max_recvs = XPN_MAX_RECVS,
		.device_type = XNCCL_DEVICE_HOST,
		.device_version = XNCCL_DEVICE_VERSION_NONE,
		.vdev = { .ndevs = 1, .devs = { 0 } },
		/* xport takes any message up to XP_MSG_MAX (1 TiB): NCCL need
		 * not cut transfers for us. */
		.max_p2p_bytes = XNCCL_MAX_NET_SIZE,
		.max_coll_bytes = XNCCL_MAX_NET_SIZE,
		.max_multi_request_size = 1,
		.rail_id = XNCCL_ID_UNDEF,
		.plane_id = XNCCL_ID_UNDEF,
	};
}
