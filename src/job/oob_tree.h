/* SPDX-License-Identifier: MIT */
/*
 * The job's out-of-band barrier and allgather once it has formed
 * (xp_oob_barrier, xp_oob_allgather, xp_finalize's barrier): over the
 * job's own transports, along a tree, so that no rank needs a connection
 * per rank for them (the bootstrap's star, bootstrap.h, is closed at the
 * end of xp_init; issue 26, item 2).
 *
 * The tree: rank 0 heads ranks [0, size); a rank heading [lo, hi) has as
 * children the first ranks of the ranges [lo + 1, hi) splits into, at
 * most XPI_OOB_TREE_FANOUT of sizes as even as can be. A subtree is
 * therefore a contiguous range of ranks, a rank talks to at most
 * XPI_OOB_TREE_FANOUT + 1 tree neighbours whatever the job's size, and the
 * tree is about log4(size) deep.
 *
 * An operation: every rank receives its children's subtrees'
 * contributions (a child's range in rank order), sends its own subtree's
 * to its parent, and the root, which then has the whole table, sends it
 * down the tree. Messages are point-to-point in the world's collective
 * tag space (xpi_coll_isend), so no receive of the program matches them,
 * with a tag of kind XPI_OOB_TREE_KIND (bits 24-31, above every kind
 * src/coll uses and below init.c's survivors' 0xff), the operation's
 * sequence number (bits 32-63, counted alike by every rank) and the
 * direction (bits 0-7), so consecutive operations never mix.
 *
 * Failures: a rank whose child or parent is lost (the receive from it
 * fails), that does not hear from a child in time, or whose child gave
 * another length, sends an abort, with the cause's code and rank and its
 * text, up and down the tree in place of the message it owed there, and
 * every rank then fails with that code, naming the rank at fault, the
 * rank that found it and the operation. Ranks lower in the tree give up
 * waiting for a child before those above them (XPI_OOB_TREE_GRACE_MS a
 * level), so the rank that reports a missing rank is its parent.
 *
 * Functions return 0 or a negative errno, and set the thread's error
 * detail (xp_error_detail) on failure. Called by one thread of the rank at
 * a time, by every rank in the same order.
 */
#ifndef XPI_OOB_TREE_H
#define XPI_OOB_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xport/xport.h"

/* Children per rank. */
#define XPI_OOB_TREE_FANOUT 4
/* The tag's kind byte (bits 24-31) of the tree's messages. */
#define XPI_OOB_TREE_KIND 0xfe
/* The most a level of the tree waits beyond the one beneath it. */
#define XPI_OOB_TREE_GRACE_MS 1000

/* --- the message header: a pure write/parse pair ---------------------- */

#define XPI_OOB_HDR_LEN 32
/* The longest text an abort carries after its header. */
#define XPI_OOB_ABORT_TEXT_MAX 400

enum xpi_oob_op {
	XPI_OOB_OP_UP = 1,    /* a subtree's contributions, to the parent */
	XPI_OOB_OP_TABLE = 2, /* the whole table, to the children */
	XPI_OOB_OP_ABORT = 3, /* the operation failed: code, culprit and text follow */
};

/*
 * On the wire, little-endian: op (2), code (2: the errno of an abort, else
 * 0), the operation's sequence number (4), the culprit (4: the rank that
 * failed or disagreed, UINT32_MAX for none), the reporter (4: the rank
 * that found the failure), the sender's length per rank (8), and, for an
 * abort of -EPROTO, the length the culprit gave (8); then, for an abort,
 * its text (the rest of the message).
 */
struct xpi_oob_hdr {
	uint16_t op;
	uint16_t code;
	uint32_t seq;
	uint32_t culprit;
	uint32_t reporter;
	uint64_t len;
	uint64_t other_len;
};

/* Writes @h as the XPI_OOB_HDR_LEN wire bytes. Pure. */
void xpi_oob_hdr_write(const struct xpi_oob_hdr *h, uint8_t out[XPI_OOB_HDR_LEN]);

/*
 * Parses a header from @len bytes at @buf into @out: the op must be
 * known, an abort must carry an errno (1 to 4095) and other ops none.
 * Whether its sequence number, ranks and length are the expected ones is
 * the caller's to check. Returns 0, or -EPROTO with *@why (if not NULL)
 * saying what was wrong (also when @len < XPI_OOB_HDR_LEN). Pure.
 */
int xpi_oob_hdr_parse(const uint8_t *buf, size_t len, struct xpi_oob_hdr *out, const char **why);

/* --- the tree ---------------------------------------------------------- */

struct xpi_oob_node {
	int parent;                      /* -1 for rank 0 */
	int lo, hi;                      /* the subtree: ranks [lo, hi), lo is this rank */
	int nkids;                       /* children, at most XPI_OOB_TREE_FANOUT */
	int kid[XPI_OOB_TREE_FANOUT];    /* each child, which heads ... */
	int kid_hi[XPI_OOB_TREE_FANOUT]; /* ... ranks [kid[i], kid_hi[i]) */
	int height;                      /* levels beneath this rank (0: a leaf) */
	int tree_height;                 /* levels beneath rank 0 */
};

/* Rank @rank's place in the tree of a job of @size ranks. Pure. */
void xpi_oob_tree_node(int size, int rank, struct xpi_oob_node *out);

/* --- the operations ----------------------------------------------------- */

/*
 * Gathers @len bytes from every rank into @all (size x @len bytes, in rank
 * order, the caller's) on every rank; @mine and @all may be NULL when @len
 * is 0. Blocks at most the context's timeout, plus XPI_OOB_TREE_GRACE_MS
 * (or a twentieth of the timeout, if less) per level of the tree. Returns
 * 0, -EINVAL (a table longer than XP_MSG_MAX), -ENOMEM, or the failure of
 * the operation, the same on every rank: -ETIMEDOUT (a rank did not come:
 * the text names it), -EPROTO (ranks gave different lengths: the text
 * names the rank and both lengths), or the code with which a rank was
 * lost (-ECONNRESET, ...: the text names it).
 */
int xpi_oob_tree_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all);

/* Returns once every rank has entered it: an allgather of nothing. */
int xpi_oob_tree_barrier(xp_context_t *ctx);

/*
 * xp_finalize's barrier: as xpi_oob_tree_barrier, but once this rank has
 * sent its part up, a parent lost after it said goodbye (it finalized:
 * xpi_peer.finalized) counts as its table. A parent finalizes only after
 * its own barrier ended, and a transport may see that end before the last
 * message it sent (shared memory looks at a peer's process before its
 * ring). Had the parent's barrier failed, its abort may be lost the same
 * way: this rank then leaves without the survivors' barrier.
 */
int xpi_oob_tree_barrier_leaving(xp_context_t *ctx);

#endif
