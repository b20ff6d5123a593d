/* SPDX-License-Identifier: MIT */
/*
 * Capability cards (src/select/card.c) and lane selection (src/select/select.c)
 * as pure functions: hand-written pairs with known answers; the wire form's
 * compatibility rules (unknown entries, longer entries, longer headers) and
 * its refusals; then thousands of random card pairs checked against the
 * rules of select.h written out naively here, for symmetry, determinism and
 * a pack/parse round trip. The seed is printed; XP_TEST_SEED=<seed> replays.
 */
#include <errno.h>
#include <sched.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "select/card.h"
#include "select/select.h"
#include "testutil.h"

#define PAIRS 20000

static const uint8_t host_a[16] = "host-a-boot-0001";
static const uint8_t host_b[16] = "host-b-boot-0002";

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void card_init(struct xpi_card *c, uint32_t rank, const uint8_t host[16])
{
	memset(c, 0, sizeof(*c));
	c->rank = rank;
	memcpy(c->host, host, 16);
}

/* Adds a transport with a plausible reach: TCP an IPv4 (or, with @family
 * AF_INET6, IPv6) listener, the others some bytes. */
static struct xpi_card_tl *add_tl(struct xpi_card *c, uint8_t type, uint32_t bw_mbps, int family)
{
	T_CHECK(c->ntl < XPI_CARD_MAX_TL);
	struct xpi_card_tl *t = &c->tl[c->ntl++];
	memset(t, 0, sizeof(*t));
	t->type = type;
	t->bw_mbps = bw_mbps;
	t->lat_ns = type == XPI_TL_SHM ? 300 : type == XPI_TL_TCP ? 15000 : 1500;
	t->caps = type == XPI_TL_RDMA ? XPI_CAP_ZCOPY | XPI_CAP_RDMA_READ | XPI_CAP_RDMA_WRITE : 0;
	if (type == XPI_TL_TCP) {
		t->reach[0] = (uint8_t)family;
		t->reach[1] = 0x30;
		t->reach[2] = 0x39; /* port 12345 */
		t->reach_len = family == AF_INET6 ? 19 : 7;
		for (unsigned i = 3; i < t->reach_len; i++)
			t->reach[i] = (uint8_t)(c->rank + i);
	} else {
		t->reach_len = 16;
		for (unsigned i = 0; i < t->reach_len; i++)
			t->reach[i] = (uint8_t)(type * 16 + c->rank + i);
	}
	return t;
}

static void set_allowed(struct xpi_card *c, const char *list)
{
	const char *why = NULL;
	int rc = xpi_transports_parse(list, c->allowed, &c->nallowed, &why);
	if (rc != 0)
		T_FAIL("xpi_transports_parse(\"%s\") = %d: %s", list, rc, why);
}

/* Both argument orders must give @small and @bulk. */
static void expect_lanes(const struct xpi_card *a, const struct xpi_card *b, uint8_t small,
			 uint8_t bulk)
{
	for (int swap = 0; swap < 2; swap++) {
		struct xpi_lanes l = { 0, 0, 0 };
		const char *why = NULL;
		int rc = swap ? xpi_select(b, a, &l, &why) : xpi_select(a, b, &l, &why);
		if (rc != 0)
			T_FAIL("select (swap %d) = %d: %s", swap, rc, why ? why : "(no reason)");
		if (l.small != small || l.bulk != bulk)
			T_FAIL("select (swap %d): small %s bulk %s, expected small %s bulk %s",
			       swap, xpi_tl_type_name(l.small), xpi_tl_type_name(l.bulk),
			       xpi_tl_type_name(small), xpi_tl_type_name(bulk));
	}
}

static void expect_none(const struct xpi_card *a, const struct xpi_card *b, const char *word)
{
	for (int swap = 0; swap < 2; swap++) {
		struct xpi_lanes l = { 0xee, 0xee, 0xee };
		const char *why = NULL;
		int rc = swap ? xpi_select(b, a, &l, &why) : xpi_select(a, b, &l, &why);
		T_EQ(rc, -ENOENT);
		T_CHECK(why != NULL);
		if (strstr(why, word) == NULL)
			T_FAIL("reason \"%s\" does not mention \"%s\"", why, word);
		T_CHECK(l.small == 0xee && l.bulk == 0xee); /* written only on success */
	}
}

static void test_same_host_shm(void)
{
	struct xpi_card a, b;
	card_init(&a, 0, host_a);
	card_init(&b, 1, host_a);
	add_tl(&a, XPI_TL_TCP, 3000, AF_INET);
	add_tl(&a, XPI_TL_SHM, 20000, 0);
	add_tl(&b, XPI_TL_SHM, 18000, 0);
	add_tl(&b, XPI_TL_TCP, 3000, AF_INET);
	expect_lanes(&a, &b, XPI_TL_SHM, XPI_TL_SHM);
}

static void test_other_host_tcp(void)
{
	struct xpi_card a, b;
	card_init(&a, 0, host_a);
	card_init(&b, 1, host_b);
	add_tl(&a, XPI_TL_SHM, 20000, 0);
	add_tl(&a, XPI_TL_TCP, 3000, AF_INET);
	add_tl(&b, XPI_TL_SHM, 20000, 0);
	add_tl(&b, XPI_TL_TCP, 3000, AF_INET);
	expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_TCP);
	/* IPv6 on both sides reaches too; mixed families do not. */
	a.tl[1].reach[0] = AF_INET6;
	b.tl[1].reach[0] = AF_INET6;
	expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_TCP);
	b.tl[1].reach[0] = AF_INET;
	expect_none(&a, &b, "reach");
	b.tl[1].reach_len = 0; /* no address at all */
	expect_none(&a, &b, "reach");
}

/* XP_TRANSPORTS=tcp on one rank only, the lower or the higher. */
static void test_one_side_override(void)
{
	for (int side = 0; side < 2; side++) {
		struct xpi_card a, b;
		card_init(&a, 0, host_a);
		card_init(&b, 1, host_a);
		add_tl(&a, XPI_TL_SHM, 20000, 0);
		add_tl(&a, XPI_TL_TCP, 3000, AF_INET);
		add_tl(&b, XPI_TL_SHM, 20000, 0);
		add_tl(&b, XPI_TL_TCP, 3000, AF_INET);
		set_allowed(side ? &b : &a, "tcp");
		expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_TCP);
	}
}

/* Different orders: the lower rank's wins, whoever passes which card. */
static void test_orders_differ(void)
{
	struct xpi_card a, b;
	card_init(&a, 0, host_a);
	card_init(&b, 1, host_a);
	add_tl(&a, XPI_TL_SHM, 20000, 0);
	add_tl(&a, XPI_TL_TCP, 3000, AF_INET);
	add_tl(&b, XPI_TL_SHM, 20000, 0);
	add_tl(&b, XPI_TL_TCP, 3000, AF_INET);
	set_allowed(&a, "tcp,shm");
	set_allowed(&b, "shm,tcp");
	/* rank 0 prefers tcp for small; shm is faster so it carries bulk */
	expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_SHM);
	a.rank = 7;
	expect_lanes(&a, &b, XPI_TL_SHM, XPI_TL_SHM);
	/* the lower rank without a list: the other's list orders */
	a.rank = 0;
	a.nallowed = 0;
	b.nallowed = 0;
	set_allowed(&b, "tcp , SHM");
	expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_SHM);
	/* equal ranks (a card against a copy of itself with another list):
	 * still symmetric, the smaller list orders */
	a.rank = b.rank = 3;
	set_allowed(&a, "shm,tcp");
	expect_lanes(&a, &b, XPI_TL_SHM, XPI_TL_SHM);
}

static void test_rdma_bulk(void)
{
	struct xpi_card a, b;
	/* same host: shm for small, the faster RDMA for bulk */
	card_init(&a, 0, host_a);
	card_init(&b, 1, host_a);
	add_tl(&a, XPI_TL_SHM, 10000, 0);
	add_tl(&a, XPI_TL_RDMA, 25000, 0);
	add_tl(&a, XPI_TL_TCP, 3000, AF_INET);
	add_tl(&b, XPI_TL_TCP, 3000, AF_INET);
	add_tl(&b, XPI_TL_RDMA, 25000, 0);
	add_tl(&b, XPI_TL_SHM, 10000, 0);
	expect_lanes(&a, &b, XPI_TL_SHM, XPI_TL_RDMA);
	/* the slower side's figure counts: 8000 < shm's 10000 */
	b.tl[1].bw_mbps = 8000;
	expect_lanes(&a, &b, XPI_TL_SHM, XPI_TL_SHM);
	/* a tie is no improvement: bulk stays small */
	b.tl[1].bw_mbps = 10000;
	expect_lanes(&a, &b, XPI_TL_SHM, XPI_TL_SHM);
	/* other hosts, lower rank prefers tcp for small: tcp small, rdma bulk */
	b.tl[1].bw_mbps = 25000;
	memcpy(b.host, host_b, 16);
	set_allowed(&a, "tcp,rdma");
	expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_RDMA);
	/* without a list, RDMA comes before TCP and serves both */
	a.nallowed = 0;
	expect_lanes(&a, &b, XPI_TL_RDMA, XPI_TL_RDMA);
	/* rule 5: an RDMA small lane that cannot see its peer end (either
	 * side says XPI_CAP_WATCHED) gets TCP beside it to watch; without TCP
	 * among the candidates, or with TCP small, nothing watches */
	struct xpi_lanes w;
	T_EQ(xpi_select(&a, &b, &w, NULL), 0);
	T_EQ(w.watch, 0);
	b.tl[1].caps |= XPI_CAP_WATCHED;
	T_EQ(xpi_select(&a, &b, &w, NULL), 0);
	T_EQ(w.small, XPI_TL_RDMA);
	T_EQ(w.watch, XPI_TL_TCP);
	T_EQ(xpi_select(&b, &a, &w, NULL), 0);
	T_EQ(w.watch, XPI_TL_TCP);
	set_allowed(&a, "rdma");
	T_EQ(xpi_select(&a, &b, &w, NULL), 0);
	T_EQ(w.watch, 0);
	set_allowed(&a, "tcp,rdma");
	T_EQ(xpi_select(&a, &b, &w, NULL), 0);
	T_EQ(w.small, XPI_TL_TCP);
	T_EQ(w.watch, 0);
	a.nallowed = 0;
	b.tl[1].caps &= ~XPI_CAP_WATCHED;
	/* RDMA that carries payloads only (XPI_CAP_BULK_ONLY on either side)
	 * is never small, even first in the order: tcp small, rdma bulk */
	b.tl[1].caps |= XPI_CAP_BULK_ONLY;
	expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_RDMA);
	set_allowed(&a, "rdma,tcp");
	expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_RDMA);
	/* and not bulk either unless strictly faster than small */
	a.tl[1].bw_mbps = 3000;
	expect_lanes(&a, &b, XPI_TL_TCP, XPI_TL_TCP);
	/* alone it reaches nobody, and says why */
	set_allowed(&a, "rdma");
	struct xpi_lanes l;
	const char *why = NULL;
	T_EQ(xpi_select(&a, &b, &l, &why), -ENOENT);
	T_CONTAINS(why, "payloads only");
	a.nallowed = 0;
	/* DPDK is taken at its word too */
	struct xpi_card c, d;
	card_init(&c, 4, host_a);
	card_init(&d, 2, host_b);
	add_tl(&c, XPI_TL_DPDK, 9000, 0);
	add_tl(&c, XPI_TL_TCP, 3000, AF_INET);
	add_tl(&d, XPI_TL_TCP, 3000, AF_INET);
	add_tl(&d, XPI_TL_DPDK, 9000, 0);
	expect_lanes(&c, &d, XPI_TL_DPDK, XPI_TL_DPDK);
}

static void test_nothing_in_common(void)
{
	struct xpi_card a, b;
	card_init(&a, 0, host_a);
	card_init(&b, 1, host_a);
	add_tl(&a, XPI_TL_SHM, 20000, 0);
	add_tl(&b, XPI_TL_TCP, 3000, AF_INET);
	expect_none(&a, &b, "in common");
	struct xpi_card e1, e2; /* no transports at all */
	card_init(&e1, 0, host_a);
	card_init(&e2, 1, host_a);
	expect_none(&e1, &e2, "in common");
	/* shm only, but on two hosts */
	add_tl(&b, XPI_TL_SHM, 20000, 0);
	memcpy(b.host, host_b, 16);
	expect_none(&a, &b, "same host");
	/* both have shm and tcp on one host, but the lists exclude each other */
	memcpy(b.host, host_a, 16);
	add_tl(&a, XPI_TL_TCP, 3000, AF_INET);
	set_allowed(&a, "shm");
	set_allowed(&b, "tcp");
	expect_none(&a, &b, "XP_TRANSPORTS");
	/* a list naming only a transport this version does not know */
	b.nallowed = 1;
	b.allowed[0] = 9;
	expect_none(&a, &b, "XP_TRANSPORTS");
}

static void test_transports_parse(void)
{
	uint8_t l[XPI_CARD_MAX_TL], n = 99;
	const char *why = NULL;
	T_EQ(xpi_transports_parse("shm,tcp", l, &n, &why), 0);
	T_EQ(n, 2);
	T_EQ(l[0], XPI_TL_SHM);
	T_EQ(l[1], XPI_TL_TCP);
	T_EQ(xpi_transports_parse(" TCP ,\tRdma, dpdk ,shm", l, &n, &why), 0);
	T_EQ(n, 4);
	T_EQ(l[0], XPI_TL_TCP);
	T_EQ(l[1], XPI_TL_RDMA);
	T_EQ(l[2], XPI_TL_DPDK);
	T_EQ(l[3], XPI_TL_SHM);
	T_EQ(xpi_transports_parse("", l, &n, &why), 0);
	T_EQ(n, 0);
	n = 99;
	T_EQ(xpi_transports_parse(NULL, l, &n, NULL), 0);
	T_EQ(n, 0);
	static const char *const bad[] = { "shm,shm",  "tcp,SHM,tcp", "ib",   "shm,", ",tcp",
					   "shm,,tcp", "shm tcp",     "tcpx", "sh",   "shm;tcp" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		n = 99;
		why = NULL;
		int rc = xpi_transports_parse(bad[i], l, &n, &why);
		if (rc != -EINVAL || why == NULL || n != 99)
			T_FAIL("\"%s\": rc %d n %u", bad[i], rc, n);
	}
	T_CHECK(strcmp(xpi_tl_type_name(XPI_TL_SHM), "shm") == 0);
	T_CHECK(strcmp(xpi_tl_type_name(XPI_TL_RDMA), "rdma") == 0);
	T_CHECK(strcmp(xpi_tl_type_name(XPI_TL_DPDK), "dpdk") == 0);
	T_CHECK(strcmp(xpi_tl_type_name(XPI_TL_TCP), "tcp") == 0);
	T_CHECK(strcmp(xpi_tl_type_name(0), "unknown") == 0);
	T_CHECK(strcmp(xpi_tl_type_name(200), "unknown") == 0);
}

/* ---- the wire form ---- */

static struct xpi_card sample_card(void)
{
	struct xpi_card c;
	card_init(&c, 5, host_a);
	add_tl(&c, XPI_TL_SHM, 20000, 0)->max_msg = 1u << 20;
	add_tl(&c, XPI_TL_RDMA, 25000, 0)->mtu = 4096;
	add_tl(&c, XPI_TL_TCP, 3000, AF_INET6)->caps = XPI_CAP_ZCOPY | 0x80000000u;
	set_allowed(&c, "rdma,shm,tcp");
	return c;
}

static size_t entry_off(const uint8_t *w, unsigned i)
{
	size_t off = get16(w + 6);
	for (unsigned k = 0; k < i; k++)
		off += get16(w + off + 2);
	return off;
}

/* Opens @k bytes of @fill at @off, shifting the rest (only padding falls off). */
static void insert_gap(uint8_t *w, size_t off, size_t k, uint8_t fill)
{
	T_CHECK(entry_off(w, w[10]) + k <= XPI_CARD_WIRE_MAX);
	memmove(w + off + k, w + off, XPI_CARD_WIRE_MAX - off - k);
	memset(w + off, fill, k);
}

static void expect_card(const uint8_t *w, size_t len, const struct xpi_card *want)
{
	struct xpi_card got;
	const char *why = NULL;
	int rc = xpi_card_parse(w, len, &got, &why);
	if (rc != 0)
		T_FAIL("parse = %d: %s", rc, why ? why : "(no reason)");
	T_CHECK(xpi_card_equal(&got, want));
}

static void test_card_round_trip(void)
{
	struct xpi_card c = sample_card();
	uint8_t w[XPI_CARD_WIRE_MAX];
	T_EQ(xpi_card_pack(&c, w), 0);
	T_EQ(get16(w + 6), XPI_CARD_HDR_LEN);
	T_EQ(w[0], 'X');
	T_EQ(w[3], 'D');
	expect_card(w, sizeof(w), &c);
	/* only the used bytes are needed, and padding is ignored */
	size_t used = entry_off(w, w[10]);
	expect_card(w, used, &c);
	memset(w + used, 0xa5, sizeof(w) - used);
	expect_card(w, sizeof(w), &c);
	/* a longer buffer is read only up to XPI_CARD_WIRE_MAX */
	uint8_t big[2 * XPI_CARD_WIRE_MAX];
	memset(big, 0xff, sizeof(big));
	memcpy(big, w, sizeof(w));
	expect_card(big, sizeof(big), &c);
	/* an empty card */
	struct xpi_card e;
	card_init(&e, 0xffffffffu, host_b);
	T_EQ(xpi_card_pack(&e, w), 0);
	expect_card(w, XPI_CARD_HDR_LEN, &e);
	/* the largest card fits */
	struct xpi_card full;
	card_init(&full, 1, host_b);
	for (uint8_t t = XPI_TL_SHM; t <= XPI_TL_TCP; t++)
		add_tl(&full, t, 1, AF_INET)->reach_len = XPI_CARD_REACH_MAX;
	set_allowed(&full, "tcp,dpdk,rdma,shm");
	full.nallowed = XPI_CARD_MAX_TL;
	for (int i = 4; i < XPI_CARD_MAX_TL; i++)
		full.allowed[i] = (uint8_t)(100 + i); /* types of a newer version */
	T_EQ(xpi_card_pack(&full, w), 0);
	expect_card(w, sizeof(w), &full);
}

static void test_card_newer_peer(void)
{
	struct xpi_card c = sample_card();
	uint8_t w[XPI_CARD_WIRE_MAX];

	/* an entry of an unknown type, first, in the middle and last */
	for (unsigned at = 0; at <= c.ntl; at++) {
		T_EQ(xpi_card_pack(&c, w), 0);
		size_t off = entry_off(w, at);
		insert_gap(w, off, 23, 0x5c);
		w[off] = 0x42;
		w[off + 1] = 0xff;
		put16(w + off + 2, 23);
		w[10]++;
		expect_card(w, sizeof(w), &c);
	}
	/* an unknown entry of only its type and length */
	T_EQ(xpi_card_pack(&c, w), 0);
	insert_gap(w, XPI_CARD_HDR_LEN, 4, 0);
	w[XPI_CARD_HDR_LEN] = 0x99;
	put16(w + XPI_CARD_HDR_LEN + 2, 4);
	w[10]++;
	expect_card(w, sizeof(w), &c);

	/* longer entries: fields appended after the reach */
	for (unsigned i = 0; i < c.ntl; i++) {
		T_EQ(xpi_card_pack(&c, w), 0);
		size_t off = entry_off(w, i), len = get16(w + off + 2);
		insert_gap(w, off + len, 17, 0xc3);
		put16(w + off + 2, (uint16_t)(len + 17));
		w[off + 1] = 0x3; /* flags of a newer version */
		expect_card(w, sizeof(w), &c);
	}

	/* a newer version with a longer header and header flags */
	T_EQ(xpi_card_pack(&c, w), 0);
	insert_gap(w, XPI_CARD_HDR_LEN, 24, 0x77);
	put16(w + 4, 2);
	put16(w + 6, XPI_CARD_HDR_LEN + 24);
	put16(w + 8, 0xffff);
	expect_card(w, sizeof(w), &c);

	/* all at once, version 300 */
	put16(w + 4, 300);
	size_t off = entry_off(w, 1), len = get16(w + off + 2);
	insert_gap(w, off + len, 40, 0x11);
	put16(w + off + 2, (uint16_t)(len + 40));
	off = entry_off(w, 2);
	insert_gap(w, off, 9, 0x22);
	w[off] = 0xfe;
	put16(w + off + 2, 9);
	w[10]++;
	expect_card(w, sizeof(w), &c);
}

static void expect_refused(const uint8_t *w, size_t len, const char *what)
{
	struct xpi_card got;
	memset(&got, 0x6b, sizeof(got));
	const char *why = NULL;
	int rc = xpi_card_parse(w, len, &got, &why);
	if (rc != -EPROTO || why == NULL)
		T_FAIL("%s: parse = %d, expected -EPROTO with a reason", what, rc);
	const uint8_t *p = (const uint8_t *)&got;
	for (size_t i = 0; i < sizeof(got); i++)
		if (p[i] != 0x6b)
			T_FAIL("%s: output written on failure", what);
	fprintf(stderr, "   refused %-28s %s\n", what, why);
}

static void test_card_malformed(void)
{
	struct xpi_card c = sample_card();
	uint8_t good[XPI_CARD_WIRE_MAX], w[XPI_CARD_WIRE_MAX];
	T_EQ(xpi_card_pack(&c, good), 0);
	size_t used = entry_off(good, good[10]);

	expect_refused(good, 0, "empty");
	expect_refused(good, 7, "truncated header");
	expect_refused(good, XPI_CARD_HDR_LEN - 1, "truncated header");
	expect_refused(good, entry_off(good, 1) + 2, "truncated in an entry's length");
	expect_refused(good, used - 1, "truncated entry");
	memcpy(w, good, sizeof(w));
	w[1] ^= 0x20;
	expect_refused(w, sizeof(w), "bad magic");
	memcpy(w, good, sizeof(w));
	put16(w + 4, 0);
	expect_refused(w, sizeof(w), "version 0");
	memcpy(w, good, sizeof(w));
	put16(w + 6, XPI_CARD_HDR_LEN - 1);
	expect_refused(w, sizeof(w), "header too short");
	put16(w + 6, XPI_CARD_WIRE_MAX + 1);
	expect_refused(w, sizeof(w), "header past the end");
	memcpy(w, good, sizeof(w));
	put16(w + 6, 200);
	expect_refused(w, 150, "header past the buffer");
	memcpy(w, good, sizeof(w));
	size_t e1 = entry_off(w, 1);
	put16(w + e1 + 2, XPI_CARD_WIRE_MAX);
	expect_refused(w, sizeof(w), "entry past the end");
	put16(w + e1 + 2, 0);
	expect_refused(w, sizeof(w), "entry length 0");
	put16(w + e1 + 2, 3);
	expect_refused(w, sizeof(w), "entry length 3");
	put16(w + e1 + 2, XPI_CARD_ENTRY_LEN - 1);
	expect_refused(w, sizeof(w), "known entry too short");
	memcpy(w, good, sizeof(w));
	w[10] = 255;
	expect_refused(w, sizeof(w), "255 entries declared");
	w[10] = 4;
	expect_refused(w, sizeof(w), "one more entry declared");
	memcpy(w, good, sizeof(w));
	put16(w + e1 + 28, XPI_CARD_REACH_MAX + 1);
	put16(w + e1 + 2, XPI_CARD_ENTRY_LEN + XPI_CARD_REACH_MAX + 1);
	expect_refused(w, sizeof(w), "reach too long");
	memcpy(w, good, sizeof(w));
	put16(w + e1 + 28, get16(w + e1 + 2) - XPI_CARD_ENTRY_LEN + 1);
	expect_refused(w, sizeof(w), "reach past its entry");
	memcpy(w, good, sizeof(w));
	w[e1] = w[entry_off(w, 0)];
	expect_refused(w, sizeof(w), "duplicate type");
	memcpy(w, good, sizeof(w));
	w[11] = XPI_CARD_MAX_TL + 1;
	expect_refused(w, sizeof(w), "preference list too long");
	memcpy(w, good, sizeof(w));
	w[33] = w[32];
	expect_refused(w, sizeof(w), "preference repeated");
	w[33] = 0;
	expect_refused(w, sizeof(w), "preference 0");

	/* Nine known entries: with four known types one must repeat. */
	struct xpi_card one;
	card_init(&one, 1, host_a);
	add_tl(&one, XPI_TL_TCP, 1, AF_INET);
	T_EQ(xpi_card_pack(&one, w), 0);
	size_t elen = get16(w + XPI_CARD_HDR_LEN + 2);
	for (int i = 1; i < 9; i++) {
		memcpy(w + XPI_CARD_HDR_LEN + i * elen, w + XPI_CARD_HDR_LEN, elen);
		w[XPI_CARD_HDR_LEN + i * elen] = (uint8_t)(1 + i % 4);
	}
	w[10] = 9;
	expect_refused(w, sizeof(w), "nine known entries");

	/* An entry that would end past XPI_CARD_WIRE_MAX in a longer buffer. */
	uint8_t big[XPI_CARD_WIRE_MAX + 64];
	memset(big, 0, sizeof(big));
	memcpy(big, good, used);
	put16(big + used, 0x42);
	put16(big + used + 2, (uint16_t)(XPI_CARD_WIRE_MAX - used + 8));
	big[10]++;
	expect_refused(big, sizeof(big), "entry past XPI_CARD_WIRE_MAX");
	/* ...and one that ends exactly there is fine. */
	put16(big + used + 2, (uint16_t)(XPI_CARD_WIRE_MAX - used));
	expect_card(big, sizeof(big), &c);
}

static void expect_pack_refused(const struct xpi_card *c, const char *what)
{
	uint8_t w[XPI_CARD_WIRE_MAX];
	memset(w, 0x6b, sizeof(w));
	if (xpi_card_pack(c, w) != -EINVAL)
		T_FAIL("pack of %s did not fail with -EINVAL", what);
	for (size_t i = 0; i < sizeof(w); i++)
		if (w[i] != 0x6b)
			T_FAIL("pack of %s wrote its output", what);
}

static void test_card_pack_refuses(void)
{
	struct xpi_card c = sample_card();
	c.tl[1].reach_len = XPI_CARD_REACH_MAX + 1;
	expect_pack_refused(&c, "a reach too long");
	c = sample_card();
	c.ntl = XPI_CARD_MAX_TL + 1;
	expect_pack_refused(&c, "too many entries");
	c = sample_card();
	c.tl[2].type = c.tl[0].type;
	expect_pack_refused(&c, "a repeated type");
	c.tl[2].type = 0;
	expect_pack_refused(&c, "type 0");
	c.tl[2].type = 5;
	expect_pack_refused(&c, "an unknown type");
	c = sample_card();
	c.nallowed = XPI_CARD_MAX_TL + 1;
	expect_pack_refused(&c, "a long preference list");
	c = sample_card();
	c.allowed[1] = c.allowed[0];
	expect_pack_refused(&c, "a repeated preference");
	c.allowed[1] = 0;
	expect_pack_refused(&c, "a preference 0");
}

static void test_host_id(void)
{
	uint8_t a[16], b[16], zero[16] = { 0 };
	xpi_card_host_id(a);
	xpi_card_host_id(b);
	T_CHECK(memcmp(a, b, 16) == 0);
	T_CHECK(memcmp(a, zero, 16) != 0);
	/* Another process of this host, and one in a new IPC namespace (if we
	 * may make one): the same id, and another. */
	for (int newns = 0; newns < 2; newns++) {
		int fd[2];
		T_CHECK(pipe(fd) == 0);
		pid_t pid = fork();
		T_CHECK(pid >= 0);
		if (pid == 0) {
			uint8_t id[17] = { 0 };
			id[16] = 1;
			if (newns && unshare(CLONE_NEWIPC) != 0)
				id[16] = 0; /* not allowed here: say so */
			xpi_card_host_id(id);
			_exit(write(fd[1], id, sizeof(id)) == (ssize_t)sizeof(id) ? 0 : 1);
		}
		close(fd[1]);
		uint8_t got[17];
		T_EQ(read(fd[0], got, sizeof(got)), (long)sizeof(got));
		close(fd[0]);
		int st;
		T_CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
		if (!newns)
			T_CHECK(memcmp(got, a, 16) == 0);
		else if (got[16])
			T_CHECK(memcmp(got, a, 16) != 0);
		else
			fprintf(stderr, "   (no new IPC namespace here: that check skipped)\n");
	}
}

/* ---- random pairs against the rules written out naively ---- */

static uint64_t rng_state;
static uint32_t rnd(void)
{
	/* xorshift64*: a fixed, portable sequence per seed */
	rng_state ^= rng_state >> 12;
	rng_state ^= rng_state << 25;
	rng_state ^= rng_state >> 27;
	return (uint32_t)((rng_state * 0x2545f4914f6cdd1dull) >> 32);
}

static void shuffle(uint8_t *v, unsigned n)
{
	for (unsigned i = n; i > 1; i--) {
		unsigned j = rnd() % i;
		uint8_t t = v[i - 1];
		v[i - 1] = v[j];
		v[j] = t;
	}
}

static void random_card(struct xpi_card *c)
{
	static const uint32_t bws[] = { 0, 1000, 3000, 10000, 12000, 25000 };
	memset(c, 0, sizeof(*c));
	c->rank = rnd() % 4;
	memcpy(c->host, rnd() % 2 ? host_a : host_b, 16);
	if (rnd() % 16 == 0)
		c->host[rnd() % 16] ^= (uint8_t)(1 + rnd() % 255);
	uint8_t types[4] = { XPI_TL_SHM, XPI_TL_RDMA, XPI_TL_DPDK, XPI_TL_TCP };
	shuffle(types, 4);
	c->ntl = (uint8_t)(rnd() % 5);
	for (unsigned i = 0; i < c->ntl; i++) {
		struct xpi_card_tl *t = &c->tl[i];
		t->type = types[i];
		t->caps = rnd() % 8 == 0 ? rnd() : rnd() % 8;
		t->max_msg = rnd() % 2 ? 0 : (uint64_t)rnd() << (rnd() % 33);
		t->mtu = rnd() % 2 ? 0 : rnd() % 9000;
		t->lat_ns = rnd();
		t->bw_mbps = rnd() % 8 == 0 ? rnd() : bws[rnd() % 6];
		t->reach_len = (uint16_t)(rnd() % (XPI_CARD_REACH_MAX + 1));
		for (unsigned k = 0; k < t->reach_len; k++)
			t->reach[k] = (uint8_t)rnd();
		if (t->type == XPI_TL_TCP && rnd() % 8 != 0) {
			t->reach_len = rnd() % 2 ? 7 : 19;
			t->reach[0] = rnd() % 2 ? AF_INET : AF_INET6;
		}
	}
	if (rnd() % 2) {
		uint8_t list[5] = { XPI_TL_SHM, XPI_TL_RDMA, XPI_TL_DPDK, XPI_TL_TCP, 9 };
		shuffle(list, 5);
		c->nallowed = (uint8_t)(1 + rnd() % 5);
		memcpy(c->allowed, list, c->nallowed);
	}
}

static const struct xpi_card_tl *model_find(const struct xpi_card *c, uint8_t type)
{
	for (unsigned i = 0; i < c->ntl; i++)
		if (c->tl[i].type == type)
			return &c->tl[i];
	return NULL;
}

static bool model_in_list(const struct xpi_card *c, uint8_t type)
{
	if (c->nallowed == 0)
		return true;
	for (unsigned i = 0; i < c->nallowed; i++)
		if (c->allowed[i] == type)
			return true;
	return false;
}

static bool model_candidate(const struct xpi_card *a, const struct xpi_card *b, uint8_t type)
{
	const struct xpi_card_tl *ta = model_find(a, type), *tb = model_find(b, type);
	if (ta == NULL || tb == NULL || !model_in_list(a, type) || !model_in_list(b, type))
		return false;
	if (type == XPI_TL_SHM)
		return memcmp(a->host, b->host, 16) == 0;
	if (type == XPI_TL_TCP)
		return ta->reach_len > 0 && tb->reach_len > 0 && ta->reach[0] == tb->reach[0] &&
		       (ta->reach[0] == AF_INET || ta->reach[0] == AF_INET6);
	return type == XPI_TL_RDMA || type == XPI_TL_DPDK;
}

static uint32_t model_bw(const struct xpi_card *a, const struct xpi_card *b, uint8_t type)
{
	uint32_t x = model_find(a, type)->bw_mbps, y = model_find(b, type)->bw_mbps;
	return x < y ? x : y;
}

/* Position of @type in the order of rule 2 (smaller is earlier). */
static unsigned model_rank_of(const struct xpi_card *a, const struct xpi_card *b, uint8_t type)
{
	const struct xpi_card *lo = a->rank <= b->rank ? a : b, *hi = lo == a ? b : a;
	if (a->rank == b->rank && a->nallowed && b->nallowed) {
		/* lexicographic, a list before its extensions */
		lo = a;
		for (unsigned i = 0;; i++) {
			if (i == b->nallowed) {
				lo = b;
				break;
			}
			if (i == a->nallowed)
				break;
			if (a->allowed[i] != b->allowed[i]) {
				lo = a->allowed[i] < b->allowed[i] ? a : b;
				break;
			}
		}
		hi = lo == a ? b : a;
	}
	const struct xpi_card *src = lo->nallowed ? lo : hi->nallowed ? hi : NULL;
	if (src == NULL)
		return type; /* the default order is the wire values' order */
	for (unsigned i = 0; i < src->nallowed; i++)
		if (src->allowed[i] == type)
			return i;
	return 1000;
}

static void check_pair(const struct xpi_card *a, const struct xpi_card *b, uint64_t seed, int pair)
{
	struct xpi_lanes l1 = { 0, 0, 0 }, l2 = { 0, 0, 0 }, l3 = { 0, 0, 0 };
	const char *why1 = NULL, *why2 = NULL;
	int rc1 = xpi_select(a, b, &l1, &why1);
	int rc2 = xpi_select(b, a, &l2, &why2);
	int rc3 = xpi_select(a, b, &l3, NULL);
#define P_FAIL(...)                                                                                \
	do {                                                                                       \
		fprintf(stderr, "seed %llu pair %d: ", (unsigned long long)seed, pair);            \
		T_FAIL(__VA_ARGS__);                                                               \
	} while (0)
	if (rc1 != rc2 || l1.small != l2.small || l1.bulk != l2.bulk || l1.watch != l2.watch)
		P_FAIL("not symmetric: %d %s/%s vs %d %s/%s", rc1, xpi_tl_type_name(l1.small),
		       xpi_tl_type_name(l1.bulk), rc2, xpi_tl_type_name(l2.small),
		       xpi_tl_type_name(l2.bulk));
	if (rc1 != rc3 || l1.small != l3.small || l1.bulk != l3.bulk)
		P_FAIL("not deterministic");

	/* The model: candidates, then small and bulk by the rules. */
	uint8_t small = 0, bulk = 0;
	for (uint8_t t = XPI_TL_SHM; t <= XPI_TL_TCP; t++) {
		if (!model_candidate(a, b, t))
			continue;
		/* A payload-only transport is never the small lane. */
		if (((model_find(a, t)->caps | model_find(b, t)->caps) & XPI_CAP_BULK_ONLY) != 0)
			continue;
		if (small == 0 || model_rank_of(a, b, t) < model_rank_of(a, b, small))
			small = t;
	}
	for (uint8_t t = XPI_TL_SHM; t <= XPI_TL_TCP; t++) {
		if (!model_candidate(a, b, t))
			continue;
		if (bulk == 0 || model_bw(a, b, t) > model_bw(a, b, bulk) ||
		    (model_bw(a, b, t) == model_bw(a, b, bulk) &&
		     model_rank_of(a, b, t) < model_rank_of(a, b, bulk)))
			bulk = t;
	}
	if (small != 0 && model_bw(a, b, bulk) <= model_bw(a, b, small))
		bulk = small;

	if (small == 0) {
		if (rc1 != -ENOENT || why1 == NULL || why2 == NULL)
			P_FAIL("no candidate, yet select = %d", rc1);
		return;
	}
	if (rc1 != 0)
		P_FAIL("select = %d (%s), the model picks %s/%s", rc1, why1,
		       xpi_tl_type_name(small), xpi_tl_type_name(bulk));
	/* Stated directly as well as through the model: both are candidates. */
	if (!model_candidate(a, b, l1.small) || !model_candidate(a, b, l1.bulk))
		P_FAIL("picked a non-candidate %s/%s", xpi_tl_type_name(l1.small),
		       xpi_tl_type_name(l1.bulk));
	if (model_bw(a, b, l1.bulk) < model_bw(a, b, l1.small))
		P_FAIL("bulk slower than small");
	if (l1.small != small || l1.bulk != bulk)
		P_FAIL("select %s/%s, model %s/%s", xpi_tl_type_name(l1.small),
		       xpi_tl_type_name(l1.bulk), xpi_tl_type_name(small), xpi_tl_type_name(bulk));
#undef P_FAIL
}

static void round_trip(const struct xpi_card *c, uint64_t seed, int pair)
{
	uint8_t w[XPI_CARD_WIRE_MAX];
	struct xpi_card back;
	const char *why = NULL;
	if (xpi_card_pack(c, w) != 0)
		T_FAIL("seed %llu pair %d: pack refused a valid card", (unsigned long long)seed,
		       pair);
	int rc = xpi_card_parse(w, sizeof(w), &back, &why);
	if (rc != 0 || !xpi_card_equal(c, &back))
		T_FAIL("seed %llu pair %d: round trip: parse = %d %s", (unsigned long long)seed,
		       pair, rc, why ? why : "");
}

static void test_random_pairs(void)
{
	uint64_t seed;
	const char *env = getenv("XP_TEST_SEED");
	if (env != NULL && *env != '\0')
		seed = strtoull(env, NULL, 0);
	else
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	fprintf(stderr, "   seed %llu (replay with XP_TEST_SEED=%llu)\n", (unsigned long long)seed,
		(unsigned long long)seed);
	rng_state = seed * 0x9e3779b97f4a7c15ull + 1;
	int picked = 0, none = 0, split = 0;
	for (int pair = 0; pair < PAIRS; pair++) {
		struct xpi_card a, b;
		random_card(&a);
		random_card(&b);
		if (pair % 7 == 0)
			b.rank = a.rank;
		check_pair(&a, &b, seed, pair);
		round_trip(&a, seed, pair);
		round_trip(&b, seed, pair);
		struct xpi_lanes l;
		if (xpi_select(&a, &b, &l, NULL) == 0) {
			picked++;
			split += l.small != l.bulk;
		} else {
			none++;
		}
	}
	fprintf(stderr, "   %d pairs: %d with lanes (%d with a separate bulk lane), %d without\n",
		PAIRS, picked, split, none);
	/* the generator must exercise every outcome */
	T_CHECK(picked > PAIRS / 10 && none > PAIRS / 20 && split > PAIRS / 50);
}

int main(void)
{
	T_RUN(test_same_host_shm);
	T_RUN(test_other_host_tcp);
	T_RUN(test_one_side_override);
	T_RUN(test_orders_differ);
	T_RUN(test_rdma_bulk);
	T_RUN(test_nothing_in_common);
	T_RUN(test_transports_parse);
	T_RUN(test_card_round_trip);
	T_RUN(test_card_newer_peer);
	T_RUN(test_card_malformed);
	T_RUN(test_card_pack_refuses);
	T_RUN(test_host_id);
	T_RUN(test_random_pairs);
	return 0;
}
