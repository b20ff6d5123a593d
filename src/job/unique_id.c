/* SPDX-License-Identifier: MIT */
/* Unique ids of jobs formed by xp_init_rank; see unique_id.h. */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "unique_id.h"
#include "sock.h"
#include "../core/compiler.h"
#include "../core/config.h"
#include "../core/engine.h"
#include "../core/log.h"

#define CRC_OFF (XPI_UID_LEN - 4)

/* CRC-32 with the IEEE polynomial, reflected (zlib's crc32()), bit by bit:
 * 124 bytes once per id need no table. */
static uint32_t crc32_ieee(const uint8_t *p, size_t n)
{
	uint32_t c = 0xffffffffu;
	for (size_t i = 0; i < n; i++) {
		c ^= p[i];
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
	}
	return ~c;
}

static void put16(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, v >> 16);
	put16(p + 2, v);
}

static uint32_t get16(const uint8_t *p)
{
	return (uint32_t)p[0] << 8 | p[1];
}

static uint32_t get32(const uint8_t *p)
{
	return get16(p) << 16 | get16(p + 2);
}

void xpi_uid_write(const struct xpi_uid *u, uint8_t out[XPI_UID_LEN])
{
	memset(out, 0, XPI_UID_LEN);
	memcpy(out, "XPID", 4);
	put16(out + 4, XPI_UID_VERSION);
	out[6] = u->family == AF_INET6 ? 6 : 4;
	put16(out + 8, u->port);
	put32(out + 12, u->family == AF_INET6 ? u->scope_id : 0);
	memcpy(out + 16, u->addr, u->family == AF_INET6 ? 16 : 4);
	memcpy(out + 32, u->key, XPI_UID_KEY_LEN);
	put32(out + CRC_OFF, crc32_ieee(out, CRC_OFF));
}

static bool all_zero(const uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != 0)
			return false;
	return true;
}

static int refuse(const char **why, const char *text)
{
	if (why != NULL)
		*why = text;
	return -EPROTO;
}

int xpi_uid_parse(const uint8_t *buf, size_t len, struct xpi_uid *out, const char **why)
{
	if (buf == NULL || len != XPI_UID_LEN)
		return refuse(why, "not 128 bytes long");
	if (memcmp(buf, "XPID", 4) != 0)
		return refuse(why, "not an xport unique id (no \"XPID\" magic at its start: not "
				   "from xp_get_unique_id, or overwritten)");
	if (get16(buf + 4) != XPI_UID_VERSION)
		return refuse(why, "an id of another version of xport (version field is not 1)");
	if (get32(buf + CRC_OFF) != crc32_ieee(buf, CRC_OFF))
		return refuse(why, "damaged: its checksum does not match its bytes (changed or "
				   "truncated on the way?)");
	struct xpi_uid u = { 0 };
	size_t alen;
	if (buf[6] == 4) {
		u.family = AF_INET;
		alen = 4;
	} else if (buf[6] == 6) {
		u.family = AF_INET6;
		alen = 16;
	} else {
		return refuse(why, "an unknown address family (neither 4 nor 6)");
	}
	if (buf[7] != 0 || buf[10] != 0 || buf[11] != 0 || !all_zero(buf + 16 + alen, 16 - alen) ||
	    !all_zero(buf + 64, CRC_OFF - 64))
		return refuse(why, "bytes that must be zero are not");
	u.port = (uint16_t)get16(buf + 8);
	u.scope_id = get32(buf + 12);
	if (u.port == 0)
		return refuse(why, "port 0 as rank 0's port");
	if (u.family == AF_INET && u.scope_id != 0)
		return refuse(why, "an IPv6 scope id on an IPv4 address");
	memcpy(u.addr, buf + 16, alen);
	if (all_zero(u.addr, alen))
		return refuse(why, "the unspecified address (0.0.0.0 or ::) as rank 0's address");
	memcpy(u.key, buf + 32, XPI_UID_KEY_LEN);
	*out = u;
	return 0;
}

void xpi_uid_sockaddr(const struct xpi_uid *u, struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (u->family == AF_INET6) {
		struct sockaddr_in6 *a = (struct sockaddr_in6 *)ss;
		a->sin6_family = AF_INET6;
		a->sin6_port = htons(u->port);
		a->sin6_scope_id = u->scope_id;
		memcpy(&a->sin6_addr, u->addr, 16);
		*len = sizeof(*a);
	} else {
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		a->sin_family = AF_INET;
		a->sin_port = htons(u->port);
		memcpy(&a->sin_addr, u->addr, 4);
		*len = sizeof(*a);
	}
}

void xpi_uid_host(const struct xpi_uid *u, char *host, size_t n)
{
	char ip[INET6_ADDRSTRLEN] = "?";
	inet_ntop(u->family, u->addr, ip, sizeof(ip));
	if (u->family == AF_INET6 && u->scope_id != 0)
		snprintf(host, n, "%s%%%u", ip, (unsigned)u->scope_id);
	else
		snprintf(host, n, "%s", ip);
}

/* ---------------------------------------------------------------------- */
/* The listeners xp_get_unique_id opened, by job key                      */

struct held {
	uint8_t key[XPI_UID_KEY_LEN];
	int fd;
	struct held *next;
};

/* Not the engine: touched twice per job, by whichever threads make ids. */
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static struct held *held_list;

int xpi_uid_take_listener(const struct xpi_uid *u)
{
	int fd = -1;
	pthread_mutex_lock(&held_lock);
	for (struct held **h = &held_list; *h != NULL; h = &(*h)->next) {
		if (memcmp((*h)->key, u->key, XPI_UID_KEY_LEN) == 0) {
			struct held *found = *h;
			*h = found->next;
			fd = found->fd;
			free(found);
			break;
		}
	}
	pthread_mutex_unlock(&held_lock);
	return fd;
}

/* Rank 0's address: see xp_get_unique_id in xport.h. */
int xpi_uid_pick_address(const char *ifname, struct sockaddr_storage *ss, socklen_t *len)
{
	char names[200];
	int rc = xpi_sock_iface_addr(ifname, ss, len, names, sizeof(names));
	if (rc == -ENODEV && ifname != NULL) {
		xpi_log_detail(
			XPI_LOG_INFO,
			"xp_get_unique_id: XP_SOCKET_IFNAME=%s: no such interface with an IPv4 "
			"or IPv6 address here (there are: %s)",
			ifname, names[0] ? names : "none");
		return rc;
	}
	if (rc == -ENODEV) {
		/* No network: a job of this host. */
		struct sockaddr_in *a = (struct sockaddr_in *)ss;
		memset(ss, 0, sizeof(*ss));
		a->sin_family = AF_INET;
		a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		*len = sizeof(*a);
		return 0;
	}
	if (rc < 0) {
		xpi_log_detail(XPI_LOG_INFO, "xp_get_unique_id: getifaddrs failed: %s",
			       xp_strerror(rc));
		return rc;
	}
	return 0;
}

XPI_EXPORT int xp_get_unique_id(xp_unique_id_t *id)
{
	_Static_assert(sizeof(xp_unique_id_t) == XPI_UID_LEN, "the public id is the wire id");
	xpi_detail_clear();
	if (id == NULL)
		return xpi_fail(-EINVAL, "xp_get_unique_id: the id pointer is NULL");
	/* The settings it uses (XP_SOCKET_IFNAME), checked as xp_init would. */
	struct xpi_config cfg;
	int rc = xpi_config_resolve(NULL, &cfg);
	if (rc < 0)
		return rc;
	struct xpi_uid u = { 0 };
	struct sockaddr_storage ss;
	socklen_t len;
	char where[XPI_SOCK_ADDRSTRLEN];
	for (size_t got = 0; got < sizeof(u.key);) {
		ssize_t k = getrandom(u.key + got, sizeof(u.key) - got, 0);
		if (k < 0 && errno != EINTR) {
			int err = errno;
			xpi_log_detail(XPI_LOG_INFO, "xp_get_unique_id: getrandom failed: %s",
				       xp_strerror(err));
			return -err;
		}
		got += k > 0 ? (size_t)k : 0;
	}
	rc = xpi_uid_pick_address(cfg.socket_ifname[0] != '\0' ? cfg.socket_ifname : NULL, &ss,
				  &len);
	if (rc < 0)
		return rc;
	xpi_sock_addr_str((struct sockaddr *)&ss, where, sizeof(where));
	struct held *h = malloc(sizeof(*h));
	if (h == NULL)
		return -ENOMEM;
	/* The backlog grows to the job's size when rank 0 forms the job. */
	rc = xpi_sock_listen((struct sockaddr *)&ss, len, 128, &h->fd);
	if (rc == 0) {
		len = sizeof(ss);
		if (getsockname(h->fd, (struct sockaddr *)&ss, &len) < 0) {
			rc = -errno;
			close(h->fd);
		}
	}
	if (rc < 0) {
		free(h);
		{
			xpi_log_detail(XPI_LOG_INFO, "xp_get_unique_id: cannot listen on %s: %s",
				       where, xp_strerror(rc));
			return rc;
		}
	}
	u.family = ss.ss_family;
	if (ss.ss_family == AF_INET6) {
		const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)&ss;
		memcpy(u.addr, &a->sin6_addr, 16);
		u.scope_id = a->sin6_scope_id;
	} else {
		memcpy(u.addr, &((const struct sockaddr_in *)&ss)->sin_addr, 4);
	}
	u.port = (uint16_t)xpi_sock_addr_port((struct sockaddr *)&ss);
	memcpy(h->key, u.key, sizeof(h->key));
	pthread_mutex_lock(&held_lock);
	h->next = held_list;
	held_list = h;
	pthread_mutex_unlock(&held_lock);
	xpi_uid_write(&u, id->bytes);
	xpi_sock_addr_str((struct sockaddr *)&ss, where, sizeof(where));
	xpi_log(XPI_LOG_INFO, "xp_get_unique_id: rank 0 will listen on %s", where);
	return 0;
}
