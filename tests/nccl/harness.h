/* SPDX-License-Identifier: MIT */
/*
 * The NCCL plugin harness: drives libnccl-net-xport.so as NCCL does,
 * without NCCL. It loads the plugin with dlopen, takes one version's table
 * (table.c), and runs it from two processes that trade handles and
 * barriers through pipes (peer.c). Exit codes: 0 pass, 1 fail, 77 skip.
 */
#ifndef XPN_HARNESS_H
#define XPN_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "../../src/nccl/nccl_net_abi.h"

#define H_SKIP 77

/* Which process says it, for messages from two at once. */
extern const char *h_who;

#define H_FAIL(...)                                                                                \
	do {                                                                                       \
		fprintf(stderr, "FAIL [%s] %s:%d: ", h_who, __FILE__, __LINE__);                   \
		fprintf(stderr, __VA_ARGS__);                                                      \
		fprintf(stderr, "\n");                                                             \
		fflush(stderr);                                                                    \
		_exit(1);                                                                          \
	} while (0)

#define H_CHECK(cond)                                                                              \
	do {                                                                                       \
		if (!(cond))                                                                       \
			H_FAIL("check failed: %s", #cond);                                         \
	} while (0)

#define H_EQ(a, b)                                                                                 \
	do {                                                                                       \
		long long _a = (long long)(a), _b = (long long)(b);                                \
		if (_a != _b)                                                                      \
			H_FAIL("%s == %lld, expected %s == %lld", #a, _a, #b, _b);                 \
	} while (0)

/* A plugin call that must succeed. */
#define H_OK(call)                                                                                 \
	do {                                                                                       \
		int _r = (call);                                                                   \
		if (_r != XNCCL_OK)                                                                \
			H_FAIL("%s returned %d (%s)", #call, _r, h_result_name(_r));               \
	} while (0)

/* A plugin call that must fail (any result but success). */
#define H_ERR(call)                                                                                \
	do {                                                                                       \
		int _r = (call);                                                                   \
		if (_r == XNCCL_OK)                                                                \
			H_FAIL("%s succeeded; it must fail", #call);                               \
	} while (0)

const char *h_result_name(int res);

/* Seconds since some fixed point (CLOCK_MONOTONIC). */
static inline double h_now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ------------------------------------------------------------------------- */
/* The logger we give init: it keeps the lines for the checks (logger.c)     */

struct h_line {
	int level;
	char file[64];
	int line;
	char text[512];
};
void h_logger(enum xnccl_log_level level, unsigned long flags, const char *file, int line,
	      const char *fmt, ...);
/* Lines logged so far. */
int h_log_count(void);
/* The first warning logged since line @from whose text holds @sub, or
 * NULL. */
const struct h_line *h_log_find(int from, const char *sub);
/* The same among lines of any level. */
const struct h_line *h_log_find_any(int from, const char *sub);
/* Every line, on stderr (when a check fails, or with XPN_HARNESS_VERBOSE). */
void h_log_dump(void);

/* ------------------------------------------------------------------------- */
/* One version's table, called as NCCL calls it (table.c)                    */

struct h_props {
	char *name, *pci_path;
	uint64_t guid;
	int ptr_support, reg_is_global, force_flush, speed, port, max_comms, max_recvs;
	float latency;
	int device_type, device_version;
	int vdev_ndevs, vdev0;
	size_t max_p2p_bytes, max_coll_bytes;
	int max_multi_request_size;
	int rail_id, plane_id;
};

struct h_net {
	int version;
	const char *name;
	const void *table;
	void *ctx; /* v11 on: what init gave */
};

/* Loads @path and takes ncclNetPlugin_v@version; exits 1 if either fails. */
void h_net_load(struct h_net *n, const char *path, int version);
/* init as NCCL calls it first: v11 on, the first communicator's context
 * goes to n->ctx. */
int h_net_init(struct h_net *n);
/* v11 on: another communicator's context (*ctx), as NCCL's init per
 * communicator; -1 before v11. */
int h_net_init_ctx(struct h_net *n, void **ctx, uint64_t comm_id);
int h_net_finalize(struct h_net *n, void *ctx);
int h_net_devices(struct h_net *n, int *ndev);
/* Fills @p from this version's layout; checks that the plugin wrote
 * nothing past it. */
int h_net_props(struct h_net *n, int dev, struct h_props *p);
int h_net_listen(struct h_net *n, void *handle, void **lc);
int h_net_connect(struct h_net *n, void *handle, void **sc);
int h_net_accept(struct h_net *n, void *lc, void **rc);
int h_net_reg_mr(struct h_net *n, void *comm, void *data, size_t size, int type, void **mh);
int h_net_reg_mr_dmabuf(struct h_net *n, void *comm, void *data, size_t size, int type,
			uint64_t offset, int fd, void **mh);
int h_net_dereg_mr(struct h_net *n, void *comm, void *mh);
int h_net_isend(struct h_net *n, void *sc, void *data, size_t size, int tag, void *mh, void **req);
int h_net_irecv(struct h_net *n, void *rc, int cnt, void **data, size_t *sizes, int *tags,
		void **mhs, void **req);
int h_net_iflush(struct h_net *n, void *rc, int cnt, void **data, int *sizes, void **mhs,
		 void **req);
int h_net_test(struct h_net *n, void *req, int *done, int *sizes);
int h_net_close_send(struct h_net *n, void *sc);
int h_net_close_recv(struct h_net *n, void *rc);
int h_net_close_listen(struct h_net *n, void *lc);
/* The entries a host plugin leaves empty, where the version has them:
 * 1 if all are NULL. */
int h_net_host_entries_empty(struct h_net *n);

/* Connects both ways with the peer whose handle is @peer_handle, after our
 * listen comm @lc was made: polls connect and accept, never blocking,
 * until both give a comm (at most @timeout_s). */
void h_net_connect_pair(struct h_net *n, void *lc, void *peer_handle, void **sc, void **rc,
			double timeout_s);
/* Tests @req until done (at most @timeout_s): the sizes, or exits. */
void h_net_wait(struct h_net *n, void *req, int *sizes, double timeout_s);

/* ------------------------------------------------------------------------- */
/* The other process (peer.c)                                                */

struct h_peer {
	int in, out; /* pipes */
	pid_t pid;   /* the child, in the parent; 0 in the child */
	int role;    /* 0: the parent, 1: the child */
};

/* Forks: runs @child(peer) in the child (its return is its exit code)
 * and returns in the parent. The child dies with the parent and after
 * @timeout_s. */
void h_peer_fork(struct h_peer *p, int (*child)(struct h_peer *), int timeout_s);
/* Sends @len bytes (at most 256) to the other process; receives exactly
 * @len (at most @timeout_s). */
void h_peer_send(struct h_peer *p, const void *buf, size_t len);
void h_peer_recv(struct h_peer *p, void *buf, size_t len, double timeout_s);
/* Both processes reach the same point. */
void h_peer_barrier(struct h_peer *p, double timeout_s);
/* In the parent: the child's exit code (128 + signal if killed). */
int h_peer_join(struct h_peer *p);

/* ------------------------------------------------------------------------- */
/* Scenarios (scenario_*.c), each run by both processes                      */

/* The buffers the scenarios below send from and receive into, each: the
 * largest message (64 MiB) and a page past it, where receives larger than
 * their sends must write nothing. */
#define H_XFER_BYTES (((size_t)64 << 20) + 4096)

/* A dmabuf the CPU has mapped whole at @map. */
struct h_xfer_dmabuf {
	int fd;
	unsigned char *map;
	size_t len;
};
/* Mode dmabuf: the scenarios below run on these two dmabufs (each of
 * H_XFER_BYTES) instead of host memory of their own: registered here with
 * regMrDmaBuf (NCCL_PTR_HOST, offset 0); the caller unmaps them after
 * h_xfer_teardown. Before any scenario. */
void h_xfer_use_dmabufs(struct h_net *n, void *sc, void *rc, const struct h_xfer_dmabuf *send,
			const struct h_xfer_dmabuf *recv);
/* Sizes 0 B to 64 MiB and the whole buffer both ways, receives larger
 * than sends. */
void h_run_sizes(struct h_net *n, struct h_peer *p, void *sc, void *rc);
/* Grouped receives, and NCCL's bound of requests in flight, tested out of
 * order. */
void h_run_groups(struct h_net *n, struct h_peer *p, void *sc, void *rc);
void h_run_window(struct h_net *n, struct h_peer *p, void *sc, void *rc);
/* A sender whose sends are done and that then calls nothing: its messages
 * still arrive. */
void h_run_quiet(struct h_net *n, struct h_peer *p, void *sc, void *rc);
/* Deregisters the buffers the scenarios above ran on, and frees them
 * unless they were the caller's (h_xfer_use_dmabufs). */
void h_xfer_teardown(struct h_net *n, void *sc, void *rc);
/* Misuse that must be refused, not crash: damaged handles, double closes,
 * stale requests, bad arguments. One process, its own connections. */
void h_run_misuse(struct h_net *n);
/* A connection within one process, made and used from one thread, as
 * NCCL's registration probes make theirs. */
void h_run_self(struct h_net *n);

#endif
