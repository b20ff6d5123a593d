/* SPDX-License-Identifier: MIT */
/* Capability cards and their wire form; the layout is described in card.h. */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "card.h"
#include "../core/siphash.h"
#include "../core/le.h"

static bool tl_type_known(uint8_t type)
{
	return type >= XPI_TL_SHM && type <= XPI_TL_TCP;
}

/* A preference list is nonzero types without repeats; unknown types are
 * allowed (a newer peer may name one) and only ever fail to match. */
static bool allowed_ok(const uint8_t *allowed, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		if (allowed[i] == 0)
			return false;
		for (unsigned j = 0; j < i; j++)
			if (allowed[j] == allowed[i])
				return false;
	}
	return true;
}

int xpi_card_pack(const struct xpi_card *c, uint8_t out[XPI_CARD_WIRE_MAX])
{
	if (c->ntl > XPI_CARD_MAX_TL || c->nallowed > XPI_CARD_MAX_TL ||
	    !allowed_ok(c->allowed, c->nallowed))
		return -EINVAL;
	for (unsigned i = 0; i < c->ntl; i++) {
		const struct xpi_card_tl *t = &c->tl[i];
		if (!tl_type_known(t->type) || t->reach_len > XPI_CARD_REACH_MAX)
			return -EINVAL;
		for (unsigned j = 0; j < i; j++)
			if (c->tl[j].type == t->type)
				return -EINVAL;
	}
	/* At most 40 + 8 * (30 + 64) = 792 bytes: always fits. */
	_Static_assert(XPI_CARD_HDR_LEN + XPI_CARD_MAX_TL *
						  (XPI_CARD_ENTRY_LEN + XPI_CARD_REACH_MAX) <=
			       XPI_CARD_WIRE_MAX,
		       "a full card must fit its wire size");

	memset(out, 0, XPI_CARD_WIRE_MAX);
	put32(out + 0, XPI_CARD_MAGIC);
	put16(out + 4, XPI_CARD_VERSION);
	put16(out + 6, XPI_CARD_HDR_LEN);
	put16(out + 8, 0);
	out[10] = c->ntl;
	out[11] = c->nallowed;
	put32(out + 12, c->rank);
	memcpy(out + 16, c->host, 16);
	memcpy(out + 32, c->allowed, c->nallowed);
	uint8_t *p = out + XPI_CARD_HDR_LEN;
	for (unsigned i = 0; i < c->ntl; i++) {
		const struct xpi_card_tl *t = &c->tl[i];
		uint16_t len = (uint16_t)(XPI_CARD_ENTRY_LEN + t->reach_len);
		p[0] = t->type;
		p[1] = 0;
		put16(p + 2, len);
		put32(p + 4, t->caps);
		put64(p + 8, t->max_msg);
		put32(p + 16, t->mtu);
		put32(p + 20, t->lat_ns);
		put32(p + 24, t->bw_mbps);
		put16(p + 28, t->reach_len);
		memcpy(p + 30, t->reach, t->reach_len);
		p += len;
	}
	return 0;
}

size_t xpi_card_wire_len(const struct xpi_card *c)
{
	size_t len = XPI_CARD_HDR_LEN;
	for (unsigned i = 0; i < c->ntl && i < XPI_CARD_MAX_TL; i++)
		len += XPI_CARD_ENTRY_LEN + c->tl[i].reach_len;
	return len < XPI_CARD_WIRE_MAX ? len : XPI_CARD_WIRE_MAX;
}

static int refuse(const char **why, const char *reason)
{
	if (why != NULL)
		*why = reason;
	return -EPROTO;
}

int xpi_card_parse(const uint8_t *buf, size_t len, struct xpi_card *out, const char **why)
{
	/* Offsets and lengths are at most 16 bits wide; sums stay in size_t. */
	size_t end = len < XPI_CARD_WIRE_MAX ? len : XPI_CARD_WIRE_MAX;
	if (end < 8)
		return refuse(why, "card truncated: shorter than its magic, version and length");
	if (get32(buf) != XPI_CARD_MAGIC)
		return refuse(why, "bad magic: not an xport capability card");
	if (get16(buf + 4) == 0)
		return refuse(why, "card version 0 does not exist");
	size_t hdr_len = get16(buf + 6);
	if (hdr_len < XPI_CARD_HDR_LEN)
		return refuse(why, "card header length shorter than version 1's header");
	if (hdr_len > end)
		return refuse(why, "card header runs past the end of the card");

	struct xpi_card c;
	memset(&c, 0, sizeof(c));
	unsigned nwire = buf[10];
	c.nallowed = buf[11];
	c.rank = get32(buf + 12);
	memcpy(c.host, buf + 16, 16);
	if (c.nallowed > XPI_CARD_MAX_TL)
		return refuse(why, "transport preference list longer than 8");
	memcpy(c.allowed, buf + 32, c.nallowed);
	if (!allowed_ok(c.allowed, c.nallowed))
		return refuse(why, "transport preference list has a 0 or a repeated type");

	size_t off = hdr_len;
	for (unsigned i = 0; i < nwire; i++) {
		if (end - off < 4)
			return refuse(why, "transport entry runs past the end of the card");
		const uint8_t *p = buf + off;
		uint8_t type = p[0];
		size_t elen = get16(p + 2);
		if (elen < 4)
			return refuse(why,
				      "transport entry length shorter than its type and length");
		if (elen > end - off)
			return refuse(why, "transport entry runs past the end of the card");
		off += elen;
		if (!tl_type_known(type))
			continue; /* a newer peer's transport: skipped by its length */
		if (elen < XPI_CARD_ENTRY_LEN)
			return refuse(why, "transport entry shorter than version 1's fields");
		uint16_t reach_len = get16(p + 28);
		if (reach_len > XPI_CARD_REACH_MAX)
			return refuse(why, "transport reach longer than 64 bytes");
		if (reach_len > elen - XPI_CARD_ENTRY_LEN)
			return refuse(why, "transport reach runs past the end of its entry");
		for (unsigned j = 0; j < c.ntl; j++)
			if (c.tl[j].type == type)
				return refuse(why, "transport type appears twice in the card");
		if (c.ntl == XPI_CARD_MAX_TL)
			return refuse(why, "more than 8 known transports in the card");
		struct xpi_card_tl *t = &c.tl[c.ntl++];
		t->type = type;
		t->caps = get32(p + 4);
		t->max_msg = get64(p + 8);
		t->mtu = get32(p + 16);
		t->lat_ns = get32(p + 20);
		t->bw_mbps = get32(p + 24);
		t->reach_len = reach_len;
		memcpy(t->reach, p + 30, reach_len);
	}
	*out = c;
	return 0;
}

bool xpi_card_equal(const struct xpi_card *a, const struct xpi_card *b)
{
	if (a->rank != b->rank || memcmp(a->host, b->host, 16) != 0 || a->ntl != b->ntl ||
	    a->nallowed != b->nallowed || a->ntl > XPI_CARD_MAX_TL ||
	    a->nallowed > XPI_CARD_MAX_TL || memcmp(a->allowed, b->allowed, a->nallowed) != 0)
		return false;
	for (unsigned i = 0; i < a->ntl; i++) {
		const struct xpi_card_tl *x = &a->tl[i], *y = &b->tl[i];
		if (x->type != y->type || x->caps != y->caps || x->max_msg != y->max_msg ||
		    x->mtu != y->mtu || x->lat_ns != y->lat_ns || x->bw_mbps != y->bw_mbps ||
		    x->reach_len != y->reach_len || x->reach_len > XPI_CARD_REACH_MAX ||
		    memcmp(x->reach, y->reach, x->reach_len) != 0)
			return false;
	}
	return true;
}

/* Appends up to @max bytes of @path's contents at @p; returns the count, or
 * -1 if it cannot be read. */
static ssize_t read_small(const char *path, char *p, size_t max)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n;
	do
		n = read(fd, p, max);
	while (n < 0 && errno == EINTR);
	close(fd);
	return n;
}

void xpi_card_host_id(uint8_t out[16])
{
	static const uint8_t lo[XPI_SIPHASH_KEY_LEN] = "xport-host-id-lo";
	static const uint8_t hi[XPI_SIPHASH_KEY_LEN] = "xport-host-id-hi";
	/* boot_id is 36 characters and a newline; a namespace link reads
	 * "ipc:[4026531839]". Each part is followed by a NUL so that no two
	 * different triples give the same input. */
	char in[256];
	size_t used = 0;
	bool complete = true;
	ssize_t n = read_small("/proc/sys/kernel/random/boot_id", in, 64);
	if (n > 0)
		used += (size_t)n;
	else
		complete = false;
	in[used++] = '\0';
	static const char *const ns[] = { "/proc/self/ns/ipc", "/proc/self/ns/mnt" };
	for (unsigned i = 0; i < 2; i++) {
		n = readlink(ns[i], in + used, 64);
		if (n > 0)
			used += (size_t)n;
		else
			complete = false;
		in[used++] = '\0';
	}
	if (!complete) {
		/* Unknown where we are: an id that matches no one else. */
		uint8_t rnd[16] = { 0 };
		if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
			/* Not even randomness: the pid and a stack address at least
			 * differ between processes of one host. */
			pid_t pid = getpid();
			void *where = &pid;
			memcpy(rnd, &pid, sizeof(pid));
			memcpy(rnd + 8, &where, sizeof(where));
		}
		memcpy(in + used, rnd, sizeof(rnd));
		used += sizeof(rnd);
	}
	uint64_t a = xpi_siphash24(lo, in, used), b = xpi_siphash24(hi, in, used);
	for (int i = 0; i < 8; i++) {
		out[i] = (uint8_t)(a >> (8 * i));
		out[8 + i] = (uint8_t)(b >> (8 * i));
	}
}

void xpi_card_host_id_named(const char *name, uint8_t out[16])
{
	static const uint8_t lo[XPI_SIPHASH_KEY_LEN] = "xport-host-nm-lo";
	static const uint8_t hi[XPI_SIPHASH_KEY_LEN] = "xport-host-nm-hi";
	size_t n = strlen(name);
	uint64_t a = xpi_siphash24(lo, name, n), b = xpi_siphash24(hi, name, n);
	for (int i = 0; i < 8; i++) {
		out[i] = (uint8_t)(a >> (8 * i));
		out[8 + i] = (uint8_t)(b >> (8 * i));
	}
}

static const struct {
	const char *name;
	uint8_t type;
} tl_names[] = {
	{ "shm", XPI_TL_SHM },
	{ "rdma", XPI_TL_RDMA },
	{ "dpdk", XPI_TL_DPDK },
	{ "tcp", XPI_TL_TCP },
};

const char *xpi_tl_type_name(uint8_t type)
{
	for (size_t i = 0; i < sizeof(tl_names) / sizeof(tl_names[0]); i++)
		if (tl_names[i].type == type)
			return tl_names[i].name;
	return "unknown";
}

static int invalid(const char **why, const char *reason)
{
	if (why != NULL)
		*why = reason;
	return -EINVAL;
}

static bool is_blank(char ch)
{
	return ch == ' ' || ch == '\t';
}

int xpi_transports_parse(const char *s, uint8_t out[XPI_CARD_MAX_TL], uint8_t *n, const char **why)
{
	uint8_t list[XPI_CARD_MAX_TL];
	unsigned count = 0;
	const char *p = s != NULL ? s : "";
	while (is_blank(*p))
		p++;
	if (*p == '\0') {
		*n = 0;
		return 0;
	}
	for (;;) {
		while (is_blank(*p))
			p++;
		const char *name = p;
		while (*p != '\0' && *p != ',' && !is_blank(*p))
			p++;
		size_t len = (size_t)(p - name);
		while (is_blank(*p))
			p++;
		if (*p != '\0' && *p != ',')
			return invalid(why, "transport names are separated by commas");
		if (len == 0)
			return invalid(why, "empty transport name in the list");
		uint8_t type = 0;
		for (size_t i = 0; i < sizeof(tl_names) / sizeof(tl_names[0]); i++)
			if (strlen(tl_names[i].name) == len &&
			    strncasecmp(tl_names[i].name, name, len) == 0)
				type = tl_names[i].type;
		if (type == 0)
			return invalid(why, "unknown transport name");
		for (unsigned j = 0; j < count; j++)
			if (list[j] == type)
				return invalid(why, "transport named twice in the list");
		/* Four names without repeats: never more than XPI_CARD_MAX_TL. */
		list[count++] = type;
		if (*p == '\0')
			break;
		p++; /* the comma */
	}
	memcpy(out, list, count);
	*n = (uint8_t)count;
	return 0;
}
