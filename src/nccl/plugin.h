/* SPDX-License-Identifier: MIT */
/*
 * The NCCL network plugin over xport's endpoints: one implementation, with
 * the newest version's semantics, which the tables of every version
 * (versions.c) adapt to. Nothing here is exported: the library's only
 * symbols are the tables (nccl_net.map).
 *
 * Objects NCCL holds (listen, send and receive comms, registrations, the
 * per-communicator contexts of v11 on) all begin with struct xpn_obj: a
 * magic that says what the object is while it lives, and links into the
 * process's registry of live objects. Calls on the data path check the
 * magic; calls that free an object first find it in the registry, so a
 * double close or a stale pointer is refused without touching freed
 * memory.
 *
 * Threads: NCCL may call from several threads at once (a proxy thread per
 * communicator, the main thread for registrations), never on one comm
 * from two threads at a time; every xport call we make is thread-safe.
 */
#ifndef XPORT_NCCL_PLUGIN_H
#define XPORT_NCCL_PLUGIN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "xport/xport.h"

#include "nccl_net_abi.h"

/* Buffers one grouped receive may name (maxRecvs). */
#define XPN_MAX_RECVS 8
/* Requests in flight on a comm: NCCL's bound, times maxRecvs on the send
 * side, where each buffer of a grouped receive is a send of its own. */
#define XPN_RECV_SLOTS XNCCL_MAX_REQUESTS
#define XPN_SEND_SLOTS (XNCCL_MAX_REQUESTS * XPN_MAX_RECVS)
/* Connections we say we hold (maxComms) unless XP_EP_MAX says otherwise:
 * xport's default number of endpoints per context. */
#define XPN_DEFAULT_MAX_COMMS 1024

enum xpn_kind {
	XPN_LISTEN = 1,
	XPN_SEND,
	XPN_RECV,
	XPN_MR,
	XPN_NETCTX,
};

struct xpn_obj {
	uint32_t magic; /* xpn_magic(kind) while alive, 0 once closed */
	uint32_t kind;
	struct xpn_obj *prev, *next; /* the registry (context.c) */
};

static inline uint32_t xpn_magic(enum xpn_kind kind)
{
	return 0x78704e00u | (uint32_t)kind; /* "xpN" and the kind */
}

/* @p as an object of @kind, or NULL if it does not look like one (magic
 * only: for the data path, where NCCL passes what we gave it). */
static inline struct xpn_obj *xpn_obj_check(void *p, enum xpn_kind kind)
{
	struct xpn_obj *o = p;
	return o != NULL && o->magic == xpn_magic(kind) ? o : NULL;
}

/* A request slot of a comm: one send, or one grouped receive of up to
 * XPN_MAX_RECVS buffers, each an xport request. */
struct xpn_sub {
	xp_request_t *xr; /* NULL once completed */
	size_t len;       /* bytes moved (receives: the message's length) */
};
struct xpn_req {
	uint32_t magic; /* XPN_REQ_LIVE while NCCL may test it */
	uint8_t state;  /* enum xpn_req_state */
	uint8_t n;      /* buffers */
	uint16_t index; /* its place in the comm's slots */
	int err;        /* the first failure among its buffers (an xport code) */
	struct xpn_comm *comm;
	struct xpn_sub sub[]; /* comm->nsub entries */
};
#define XPN_REQ_LIVE 0x78705271u /* "xpRq" */
enum xpn_req_state {
	XPN_REQ_FREE = 0,
	XPN_REQ_ACTIVE, /* handed to NCCL, which tests it */
	XPN_REQ_ORPHAN, /* failed and reported; buffers still in xport's hands */
};

/* A send or receive comm: one endpoint and its request slots. */
struct xpn_comm {
	struct xpn_obj obj;
	xp_ep_t *ep;
	bool connected;    /* send comms: handed to NCCL (false while connecting) */
	uint64_t stage_id; /* send comms: what the connect handle names meanwhile */
	uint32_t nslots, nsub, stride;
	uint32_t nfree;       /* free slots, their indices in free_stack */
	uint32_t norphans;    /* slots waiting for xport to let go of buffers */
	uint16_t *free_stack; /* nslots entries */
	unsigned char *slots; /* nslots x stride bytes of struct xpn_req */
};

struct xpn_listen {
	struct xpn_obj obj;
	xp_listener_t *l;
};

struct xpn_mr {
	struct xpn_obj obj;
	xp_mem_t *mem; /* NULL for an empty range */
};

/* v11 on: what init gives each communicator. */
struct xpn_netctx {
	struct xpn_obj obj;
	uint64_t comm_id;
	int traffic_class;
};

/* ------------------------------------------------------------------------- */
/* The process's context (context.c)                                         */

/* Takes a reference on the process's xport context, opening it (and the
 * idle progress, idle.c) with the first. 0 or an xport code. */
int xpn_ctx_get(xp_context_t **ctx);
/* Drops a reference; the last closes the context. */
void xpn_ctx_put(void);
/* The context while any reference is held, else NULL. */
xp_context_t *xpn_ctx(void);
/* Pins the context for the life of the process (versions before 11 have
 * no finalize): once, however often it is called. 0 or an xport code. */
int xpn_ctx_pin(void);

/* The registry: adds @o as @kind (and sets its magic); removes it if it is
 * there as @kind, returning false (and touching nothing) if not. */
void xpn_obj_add(struct xpn_obj *o, enum xpn_kind kind);
bool xpn_obj_remove(void *p, enum xpn_kind kind);
/* The send comm connecting under @stage_id, or NULL. */
struct xpn_comm *xpn_stage_find(uint64_t stage_id);
/* A fresh, unguessable stage id. */
uint64_t xpn_stage_id_new(void);

/* ------------------------------------------------------------------------- */
/* Idle progress (idle.c)                                                    */

/*
 * xport moves data only while someone calls into it, and NCCL stops
 * calling once its requests are done, though a completed eager send may
 * still sit in a queue. A thread makes progress whenever no plugin call
 * has for a millisecond, so that data always leaves.
 */
int xpn_idle_start(xp_context_t *ctx);
void xpn_idle_stop(void);
/* A plugin call made progress: the thread need not. */
void xpn_idle_note(void);

/* ------------------------------------------------------------------------- */
/* Logging and results (log.c)                                               */

void xpn_log_set(xnccl_logger_t log);
/* A line through NCCL's logger (stderr before init gave one). */
__attribute__((format(printf, 4, 5))) void xpn_log(enum xnccl_log_level level, const char *file,
						   int line, const char *fmt, ...);
#define XPN_WARN(...) xpn_log(XNCCL_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define XPN_INFO(...) xpn_log(XNCCL_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)
/* NCCL's result for an xport code. */
xnccl_result_t xpn_result(int xp_code);
/* Logs that @what failed with @xp_code, with xport's detail for this
 * thread, and returns NCCL's result for it. */
xnccl_result_t xpn_fail_at(const char *file, int line, int xp_code, const char *what);
#define XPN_FAIL(code, what) xpn_fail_at(__FILE__, __LINE__, (code), (what))

/* ------------------------------------------------------------------------- */
/* The device (props.c)                                                      */

/* The interface NCCL_SOCKET_IFNAME selects, for xp_open when
 * XP_SOCKET_IFNAME is unset, or NULL. Static storage. */
const char *xpn_ifname_from_nccl(void);
/* Fills the properties (newest layout) of device 0. */
void xpn_props_fill(struct xnccl_props_v12 *props);

/* ------------------------------------------------------------------------- */
/* The operations, newest semantics (conn.c, mr.c, xfer.c, init.c)           */

/* v11 on: a communicator's context. Earlier versions pin the context. */
xnccl_result_t xpn_init(void **netctx, uint64_t comm_id, const struct xnccl_comm_config *config,
			xnccl_logger_t log);
xnccl_result_t xpn_init_process(xnccl_logger_t log);
xnccl_result_t xpn_finalize(void *netctx);
xnccl_result_t xpn_devices(int *ndev);
xnccl_result_t xpn_get_properties(int dev, struct xnccl_props_v12 *props);

xnccl_result_t xpn_listen(int dev, void *handle, void **listen_comm);
xnccl_result_t xpn_connect(int dev, void *handle, void **send_comm);
xnccl_result_t xpn_accept(void *listen_comm, void **recv_comm);
xnccl_result_t xpn_close_send(void *send_comm);
xnccl_result_t xpn_close_recv(void *recv_comm);
xnccl_result_t xpn_close_listen(void *listen_comm);

xnccl_result_t xpn_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle);
xnccl_result_t xpn_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				 int fd, void **mhandle);
xnccl_result_t xpn_dereg_mr(void *comm, void *mhandle);

xnccl_result_t xpn_isend(void *send_comm, void *data, size_t size, int tag, void **request);
xnccl_result_t xpn_irecv(void *recv_comm, int n, void **data, const size_t *sizes, const int *tags,
			 void **request);
xnccl_result_t xpn_iflush(void *recv_comm, int n, void **data, const int *sizes, void **request);
xnccl_result_t xpn_test(void *request, int *done, int *sizes);

/* A comm's request slots (xfer.c): made with the comm, and at close the
 * requests still in xport's hands are waited for (the endpoint closed
 * first, so they end at once). */
int xpn_slots_init(struct xpn_comm *c, uint32_t nslots, uint32_t nsub);
void xpn_slots_drain(struct xpn_comm *c);
void xpn_slots_fini(struct xpn_comm *c);

#endif
