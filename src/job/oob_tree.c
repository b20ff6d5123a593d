/* SPDX-License-Identifier: MIT */
/* The out-of-band barrier and allgather along a tree over the job's own
 * transports (oob_tree.h says how). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "oob_tree.h"
#include "../core/clock.h"
#include "../core/engine.h"
#include "../core/le.h"
#include "../core/log.h"

#define FANOUT XPI_OOB_TREE_FANOUT
#define HDR XPI_OOB_HDR_LEN
#define NO_RANK UINT32_MAX

/* The direction, in a tag's low byte. */
enum { DIR_UP = 1, DIR_DOWN = 2 };

void xpi_oob_hdr_write(const struct xpi_oob_hdr *h, uint8_t out[XPI_OOB_HDR_LEN])
{
	put16(out, h->op);
	put16(out + 2, h->code);
	put32(out + 4, h->seq);
	put32(out + 8, h->culprit);
	put32(out + 12, h->reporter);
	put64(out + 16, h->len);
	put64(out + 24, h->other_len);
}

int xpi_oob_hdr_parse(const uint8_t *buf, size_t len, struct xpi_oob_hdr *out, const char **why)
{
	const char *bad = NULL;
	struct xpi_oob_hdr h = { 0 };
	if (len < HDR) {
		bad = "a message shorter than its header";
	} else {
		h = (struct xpi_oob_hdr){ .op = get16(buf),
					  .code = get16(buf + 2),
					  .seq = get32(buf + 4),
					  .culprit = get32(buf + 8),
					  .reporter = get32(buf + 12),
					  .len = get64(buf + 16),
					  .other_len = get64(buf + 24) };
		if (h.op != XPI_OOB_OP_UP && h.op != XPI_OOB_OP_TABLE && h.op != XPI_OOB_OP_ABORT)
			bad = "an unknown kind of message";
		else if (h.op == XPI_OOB_OP_ABORT && (h.code == 0 || h.code > 4095))
			bad = "an abort without an errno";
		else if (h.op != XPI_OOB_OP_ABORT && h.code != 0)
			bad = "an error code on a message that is no abort";
	}
	if (bad != NULL) {
		if (why != NULL)
			*why = bad;
		return -EPROTO;
	}
	*out = h;
	return 0;
}

/* The children of the rank heading [lo, hi): the ranks after it, split in
 * up to FANOUT contiguous ranges, the larger ones first. */
static int split(int lo, int hi, int kid[FANOUT], int kid_hi[FANOUT])
{
	int rest = hi - lo - 1, k = rest < FANOUT ? rest : FANOUT, start = lo + 1;
	for (int i = 0; i < k; i++) {
		int n = rest / k + (i < rest % k);
		kid[i] = start;
		kid_hi[i] = start + n;
		start += n;
	}
	return k;
}

/* Levels beneath the rank heading [lo, hi): the first child's range is
 * the largest at every level. */
static int height_of(int lo, int hi)
{
	int h = 0, kid[FANOUT], kid_hi[FANOUT];
	while (split(lo, hi, kid, kid_hi) > 0) {
		lo = kid[0];
		hi = kid_hi[0];
		h++;
	}
	return h;
}

void xpi_oob_tree_node(int size, int rank, struct xpi_oob_node *out)
{
	int lo = 0, hi = size, parent = -1;
	while (lo != rank) {
		int kid[FANOUT], kid_hi[FANOUT], k = split(lo, hi, kid, kid_hi), i = k - 1;
		while (i > 0 && kid[i] > rank)
			i--;
		parent = lo;
		lo = kid[i];
		hi = kid_hi[i];
	}
	out->parent = parent;
	out->lo = lo;
	out->hi = hi;
	out->nkids = split(lo, hi, out->kid, out->kid_hi);
	out->height = height_of(lo, hi);
	out->tree_height = height_of(0, size);
}

/* One operation on this rank. Requests: [0, nkids) the children's
 * contributions, [nkids] the parent's table; sends: the same. */
struct op {
	xp_context_t *ctx;
	xp_comm_t *w;
	const char *name;
	bool leaving;
	int me;
	uint32_t seq;
	size_t len;
	struct xpi_oob_node nd;
	uint8_t *table; /* size * len bytes: the caller's; NULL when len is 0 */
	int64_t up_deadline, down_deadline;
	xp_request_t *rreq[FANOUT + 1];
	uint8_t *rbuf[FANOUT + 1];
	size_t rcap[FANOUT + 1];
	bool kid_done[FANOUT];
	xp_request_t *sreq[FANOUT + 1];
	uint8_t *up_msg, *down_msg; /* what this rank sends up and down */
	bool sent_up;
	/* The failure: its code (0: none yet), the rank at fault, the rank
	 * that found it, and that rank's text; @from, the neighbour whose
	 * abort brought it (-1: found here). */
	int code;
	uint32_t culprit, reporter;
	int from;
	char text[XPI_OOB_ABORT_TEXT_MAX + 1];
};

static uint64_t tag_of(const struct op *o, int dir)
{
	return (uint64_t)o->seq << 32 | (uint64_t)XPI_OOB_TREE_KIND << 24 | (uint64_t)dir;
}

static size_t sub_bytes(const struct op *o, int i)
{
	return (size_t)(o->nd.kid_hi[i] - o->nd.kid[i]) * o->len;
}

static int left_ms(int64_t deadline)
{
	int64_t left = deadline - xpi_now_ns();
	return left <= 0 ? 0 : (int)((left + 999999) / 1000000);
}

/* This rank found the failure: @code, @culprit at fault, and the text. */
static int found(struct op *o, int code, int culprit, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int found(struct op *o, int code, int culprit, const char *fmt, ...)
{
	o->code = code;
	o->culprit = culprit < 0 ? NO_RANK : (uint32_t)culprit;
	o->reporter = (uint32_t)o->me;
	o->from = -1;
	int n = snprintf(o->text, sizeof(o->text), "rank %d: %s (operation %u): ", o->me, o->name,
			 (unsigned)o->seq);
	if (n < 0 || (size_t)n >= sizeof(o->text))
		n = 0;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(o->text + n, sizeof(o->text) - (size_t)n, fmt, ap);
	va_end(ap);
	return code;
}

/* A neighbour's abort (@h, and its text of @tlen bytes at @text) brought
 * the failure. */
static int adopt(struct op *o, const struct xpi_oob_hdr *h, const uint8_t *text, size_t tlen,
		 int from)
{
	o->code = -(int)h->code;
	o->culprit = h->culprit < (uint32_t)o->ctx->size ? h->culprit : NO_RANK;
	o->reporter = h->reporter < (uint32_t)o->ctx->size ? h->reporter : (uint32_t)from;
	o->from = from;
	if (tlen > XPI_OOB_ABORT_TEXT_MAX)
		tlen = XPI_OOB_ABORT_TEXT_MAX;
	memcpy(o->text, text, tlen);
	o->text[tlen] = '\0';
	return o->code;
}

/* Parses what neighbour @peer sent (@st: the receive's status) for the
 * operation: 0 and *@h, or the failure found. */
static int take_hdr(struct op *o, int slot, int peer, const xp_status_t *st, struct xpi_oob_hdr *h)
{
	size_t got = st->length < o->rcap[slot] ? st->length : o->rcap[slot];
	const char *why = "";
	if (xpi_oob_hdr_parse(o->rbuf[slot], got, h, &why) < 0)
		return found(o, -EPROTO, peer, "rank %d sent %s", peer, why);
	if (h->seq != o->seq)
		return found(o, -EPROTO, peer,
			     "rank %d sent a message of operation %u: the ranks do not run the "
			     "same sequence of out-of-band operations",
			     peer, (unsigned)h->seq);
	if (h->op == XPI_OOB_OP_ABORT)
		return adopt(o, h, o->rbuf[slot] + HDR, got - HDR, peer);
	return 0;
}

/* Child @i's message has come (@rc, @st: its receive's outcome). */
static int on_up(struct op *o, int i, int rc, const xp_status_t *st)
{
	int kid = o->nd.kid[i];
	if (rc < 0 && rc != -EMSGSIZE)
		return found(o, rc, kid, "rank %d was lost: %s", kid, xp_error_detail());
	struct xpi_oob_hdr h;
	rc = take_hdr(o, i, kid, st, &h);
	if (rc < 0)
		return rc;
	if (h.op != XPI_OOB_OP_UP)
		return found(o, -EPROTO, kid, "rank %d sent kind %u where its contribution was due",
			     kid, (unsigned)h.op);
	if (h.len != o->len)
		return found(o, -EPROTO, kid,
			     "rank %d gave %llu bytes where rank %d gave %zu: every rank must give "
			     "the same length",
			     kid, (unsigned long long)h.len, o->me, o->len);
	if (st->length != HDR + sub_bytes(o, i))
		return found(o, -EPROTO, kid, "rank %d sent %zu bytes where %zu were due", kid,
			     st->length, HDR + sub_bytes(o, i));
	if (o->len > 0)
		memcpy(o->table + (size_t)kid * o->len, o->rbuf[i] + HDR, sub_bytes(o, i));
	o->kid_done[i] = true;
	return 0;
}

/* The parent's message has come (@rc, @st: its receive's outcome). */
static int on_down(struct op *o, int rc, const xp_status_t *st)
{
	int parent = o->nd.parent, slot = o->nd.nkids;
	if (rc == -ETIMEDOUT)
		return found(o, rc, parent,
			     "rank %d (its parent) sent no result within %d ms: a rank above "
			     "it is late or stuck",
			     parent, o->ctx->cfg.timeout_ms);
	if (rc < 0 && rc != -EMSGSIZE) {
		/* Its parent finalizes only after its own barrier has ended,
		 * and tells its children if that failed: its goodbye stands
		 * for the table its end may have overtaken. */
		if (o->leaving && o->len == 0 && o->sent_up && o->ctx->peers[parent].finalized)
			return 0;
		return found(o, rc, parent, "rank %d was lost: %s", parent, xp_error_detail());
	}
	struct xpi_oob_hdr h;
	rc = take_hdr(o, slot, parent, st, &h);
	if (rc < 0)
		return rc;
	size_t want = HDR + (size_t)o->ctx->size * o->len;
	if (h.op != XPI_OOB_OP_TABLE || !o->sent_up || h.len != o->len || st->length != want)
		return found(o, -EPROTO, parent,
			     "rank %d sent a malformed result (kind %u, %llu bytes a rank, %zu in "
			     "all, where %zu a rank and %zu in all were due)",
			     parent, (unsigned)h.op, (unsigned long long)h.len, st->length, o->len,
			     want);
	if (o->len > 0)
		memcpy(o->table, o->rbuf[slot] + HDR, want - HDR);
	return 0;
}

/* Waits for the children's contributions, and watches the parent's
 * receive meanwhile (an abort may come down before them). */
static int gather(struct op *o)
{
	int n = o->nd.nkids, pending = n;
	while (pending > 0) {
		size_t idx = 0;
		xp_status_t st = { 0 };
		int rc = xp_waitany((size_t)n + 1, o->rreq, left_ms(o->up_deadline), &idx, &st);
		if (idx >= (size_t)n + 1) {
			int i = 0;
			while (i < n - 1 && o->kid_done[i])
				i++;
			int kid = o->nd.kid[i], last = o->nd.kid_hi[i] - 1;
			if (last == kid)
				return found(o, -ETIMEDOUT, kid,
					     "rank %d did not enter it within %d ms", kid,
					     o->ctx->cfg.timeout_ms);
			return found(o, -ETIMEDOUT, kid,
				     "rank %d, or one of the ranks beneath it (%d to %d), did not "
				     "enter it within %d ms",
				     kid, kid + 1, last, o->ctx->cfg.timeout_ms);
		}
		if (idx == (size_t)n) {
			rc = on_down(o, rc, &st);
			/* Nothing but an abort may come before our contribution. */
			return rc < 0 ? rc :
					found(o, -EPROTO, o->nd.parent,
					      "rank %d sent the "
					      "result before this rank's contribution",
					      o->nd.parent);
		}
		rc = on_up(o, (int)idx, rc, &st);
		if (rc < 0)
			return rc;
		pending--;
	}
	return 0;
}

/* Sends @len bytes at @buf to @peer in direction @dir into send slot
 * @slot. A peer already lost fails at once: nothing to wait for. */
static void post_send(struct op *o, int slot, int peer, const uint8_t *buf, size_t len, int dir)
{
	if (xpi_coll_isend(o->w, buf, len, peer, tag_of(o, dir), &o->sreq[slot]) < 0)
		o->sreq[slot] = NULL;
}

/* The failure goes on to the neighbours that do not know it yet: up,
 * in place of this rank's contribution, and down to every child but the
 * one whose abort brought it. */
static void send_abort(struct op *o)
{
	size_t tlen = strlen(o->text);
	uint8_t *m = malloc(HDR + tlen);
	if (m == NULL)
		return; /* the others then time out */
	struct xpi_oob_hdr h = { .op = XPI_OOB_OP_ABORT,
				 .code = (uint16_t)-o->code,
				 .seq = o->seq,
				 .culprit = o->culprit,
				 .reporter = o->reporter,
				 .len = o->len };
	xpi_oob_hdr_write(&h, m);
	memcpy(m + HDR, o->text, tlen);
	o->down_msg = m;
	if (o->nd.parent >= 0 && !o->sent_up && o->from != o->nd.parent) {
		post_send(o, o->nd.nkids, o->nd.parent, m, HDR + tlen, DIR_UP);
		o->sent_up = true;
	}
	for (int i = 0; i < o->nd.nkids; i++)
		if (o->nd.kid[i] != o->from)
			post_send(o, i, o->nd.kid[i], m, HDR + tlen, DIR_DOWN);
}

/* Posts the receives of the operation and makes their buffers: a
 * child's (or the parent's) whole message, and room for an abort. */
static int start(struct op *o)
{
	for (int s = 0; s <= o->nd.nkids; s++) {
		int peer = s < o->nd.nkids ? o->nd.kid[s] : o->nd.parent;
		if (peer < 0)
			continue;
		size_t body = s < o->nd.nkids ? sub_bytes(o, s) : (size_t)o->ctx->size * o->len;
		o->rcap[s] = HDR + (body > XPI_OOB_ABORT_TEXT_MAX ? body : XPI_OOB_ABORT_TEXT_MAX);
		o->rbuf[s] = malloc(o->rcap[s]);
		if (o->rbuf[s] == NULL)
			return found(o, -ENOMEM, -1, "no memory for a message of %zu bytes",
				     o->rcap[s]);
		int rc =
			xpi_coll_irecv(o->w, o->rbuf[s], o->rcap[s], peer,
				       tag_of(o, s < o->nd.nkids ? DIR_UP : DIR_DOWN), &o->rreq[s]);
		if (rc < 0) {
			o->rreq[s] = NULL;
			return found(o, rc, peer, "rank %d is lost: %s", peer, xp_error_detail());
		}
	}
	return 0;
}

/* A message of @body bytes from the table's rank @first on, after a
 * header of @op. */
static uint8_t *make_msg(struct op *o, uint16_t op, int first, size_t body)
{
	uint8_t *m = malloc(HDR + body);
	if (m == NULL)
		return NULL;
	struct xpi_oob_hdr h = { .op = op, .seq = o->seq, .culprit = NO_RANK, .len = o->len };
	h.reporter = (uint32_t)o->me;
	xpi_oob_hdr_write(&h, m);
	if (body > 0)
		memcpy(m + HDR, o->table + (size_t)first * o->len, body);
	return m;
}

static int run(struct op *o)
{
	int rc = start(o);
	if (rc < 0)
		return rc;
	rc = gather(o);
	if (rc < 0)
		return rc;
	if (o->nd.parent >= 0) {
		size_t body = (size_t)(o->nd.hi - o->nd.lo) * o->len;
		o->up_msg = make_msg(o, XPI_OOB_OP_UP, o->me, body);
		if (o->up_msg == NULL)
			return found(o, -ENOMEM, -1, "no memory for a message of %zu bytes",
				     HDR + body);
		post_send(o, o->nd.nkids, o->nd.parent, o->up_msg, HDR + body, DIR_UP);
		o->sent_up = true;
		xp_status_t st = { 0 };
		rc = xp_wait(&o->rreq[o->nd.nkids], left_ms(o->down_deadline), &st);
		rc = on_down(o, rc, &st);
		if (rc < 0)
			return rc;
	}
	if (o->nd.nkids > 0) {
		size_t body = (size_t)o->ctx->size * o->len;
		o->down_msg = make_msg(o, XPI_OOB_OP_TABLE, 0, body);
		if (o->down_msg == NULL)
			return found(o, -ENOMEM, -1, "no memory for a message of %zu bytes",
				     HDR + body);
		for (int i = 0; i < o->nd.nkids; i++)
			post_send(o, i, o->nd.kid[i], o->down_msg, HDR + body, DIR_DOWN);
	}
	return 0;
}

/* Lets the sends leave (bounded: one to a rank stuck elsewhere is taken
 * back), out of this process too: a rank that returns and then stalls
 * outside xport must not hold its children's table, nor a message the
 * program sends next behind it. Then takes back the receives no message
 * came for. A receive whose message is still arriving keeps its buffer
 * (leaked, not freed under it). */
static void finish(struct op *o)
{
	int64_t until = o->down_deadline;
	int64_t soon = xpi_now_ns() + (int64_t)XPI_OOB_TREE_GRACE_MS * 1000000;
	if (until < soon)
		until = soon;
	for (int s = 0; s <= o->nd.nkids; s++)
		if (o->sreq[s] != NULL)
			(void)xp_wait(&o->sreq[s], left_ms(until), NULL);
	(void)xpi_engine_flush(o->ctx, left_ms(until));
	for (int s = 0; s <= o->nd.nkids; s++) {
		if (o->rreq[s] != NULL) {
			(void)xp_cancel(o->rreq[s]);
			if (xp_wait(&o->rreq[s], XPI_OOB_TREE_GRACE_MS, NULL) == -ETIMEDOUT)
				o->rbuf[s] = NULL;
		}
		free(o->rbuf[s]);
	}
	free(o->up_msg);
	free(o->down_msg);
}

static int oob_tree_op(xp_context_t *ctx, const char *name, bool leaving, const void *mine,
		       size_t len, void *all)
{
	int n = ctx->size;
	if (len > (XP_MSG_MAX - HDR) / (size_t)n)
		return xpi_fail(-EINVAL,
				"rank %d: %s: %zu bytes a rank make a table of more than %zu",
				ctx->rank, name, len, (size_t)XP_MSG_MAX);
	struct op *o = calloc(1, sizeof(*o));
	if (o == NULL)
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory", ctx->rank, name);
	o->ctx = ctx;
	o->w = xp_comm_world(ctx);
	o->name = name;
	o->leaving = leaving;
	o->me = ctx->rank;
	o->seq = ctx->oob_seq++;
	o->len = len;
	o->table = len > 0 ? all : NULL;
	xpi_oob_tree_node(n, o->me, &o->nd);
	/* Lower levels give up on a child first, so the rank that names a
	 * missing rank is its parent, and the abort has time to come down. */
	int64_t t = (int64_t)ctx->cfg.timeout_ms * 1000000, start = xpi_now_ns();
	int64_t grace = t / 20;
	if (grace > (int64_t)XPI_OOB_TREE_GRACE_MS * 1000000)
		grace = (int64_t)XPI_OOB_TREE_GRACE_MS * 1000000;
	o->up_deadline = start + t + (o->nd.height > 0 ? o->nd.height - 1 : 0) * grace;
	o->down_deadline = start + t + o->nd.tree_height * grace;
	if (len > 0)
		memmove(o->table + (size_t)o->me * len, mine, len);
	int rc = run(o);
	if (rc < 0)
		send_abort(o);
	finish(o);
	if (rc < 0) {
		if (o->reporter == (uint32_t)o->me)
			xpi_log_detail(XPI_LOG_INFO, "%s", o->text);
		else if (o->culprit != NO_RANK)
			xpi_log_detail(XPI_LOG_INFO,
				       "rank %d: %s (operation %u) failed at rank %u, as rank %u "
				       "found: %s",
				       o->me, name, (unsigned)o->seq, (unsigned)o->culprit,
				       (unsigned)o->reporter, o->text);
		else
			xpi_log_detail(XPI_LOG_INFO,
				       "rank %d: %s (operation %u) failed, as rank %u found: %s",
				       o->me, name, (unsigned)o->seq, (unsigned)o->reporter,
				       o->text);
	}
	free(o);
	return rc;
}

int xpi_oob_tree_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all)
{
	return oob_tree_op(ctx, "xp_oob_allgather", false, mine, len, all);
}

int xpi_oob_tree_barrier(xp_context_t *ctx)
{
	return oob_tree_op(ctx, "xp_oob_barrier", false, NULL, 0, NULL);
}

int xpi_oob_tree_barrier_leaving(xp_context_t *ctx)
{
	return oob_tree_op(ctx, "xp_finalize's barrier", true, NULL, 0, NULL);
}
