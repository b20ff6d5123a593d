/* SPDX-License-Identifier: MIT */
/*
 * xport — tagged messages between the ranks of a distributed job.
 *
 * This is the one public header. It includes no backend header, so a
 * program that uses xport needs no DPDK, verbs or liburing flags.
 *
 * Conventions (they hold for every function below unless it says otherwise):
 *  - A function returns 0 (or a count) on success and a negative errno-style
 *    code on failure; xp_strerror() turns a code into text and
 *    xp_error_detail() gives the last detailed message of the calling thread
 *    (which rank, peer, tag and communicator were involved).
 *  - Out-parameters are written only on success.
 *  - Destroy/release functions accept NULL and return void.
 *  - A buffer passed to a nonblocking call is lent to the library until its
 *    request completes. A pooled buffer handed to the user is the user's
 *    until xp_buf_release().
 *  - Thread safety: every function may be called from any thread. Each rank
 *    has one matching engine with one owner at a time; a thread that cannot
 *    become the owner at once hands its work over through a lock-free queue
 *    and never waits for a lock (docs/ARCHITECTURE.md). A program that
 *    calls into each rank from one thread at a time can say so
 *    (XP_THREAD_SERIALIZED) and save the handover's atomic operations.
 */
#ifndef XPORT_XPORT_H
#define XPORT_XPORT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define XP_VERSION_MAJOR 0
#define XP_VERSION_MINOR 1
#define XP_VERSION_PATCH 0

/** Receive from any source rank. */
#define XP_ANY_SOURCE (-1)
/** Tag mask that compares every bit: an exact tag match. */
#define XP_TAG_EXACT UINT64_MAX
/** Tag mask that compares no bit: any tag. */
#define XP_TAG_ANY ((uint64_t)0)

/** Wait with the context's default timeout (xp_config_t.timeout_ms). */
#define XP_TIMEOUT_DEFAULT (-2)
/** Wait without a deadline. Must be asked for explicitly. */
#define XP_TIMEOUT_INFINITE (-1)

typedef struct xp_context xp_context_t;     /* one rank of a job */
typedef struct xp_comm xp_comm_t;           /* a communicator: a group and a tag space */
typedef struct xp_request xp_request_t;     /* a nonblocking operation */
typedef struct xp_buf xp_buf_t;             /* a pooled, registered buffer */
typedef struct xp_mem xp_mem_t;             /* a memory registration */
typedef struct xp_local_job xp_local_job_t; /* N ranks as threads of one process */
typedef struct xp_ep xp_ep_t;               /* a connection made by address */
typedef struct xp_listener xp_listener_t;   /* where connections by address arrive */

enum xp_hugepages {
	XP_HUGEPAGES_AUTO = 0, /* hugetlb pages if the host has them, else ordinary pages */
	XP_HUGEPAGES_OFF = 1,  /* ordinary pages only */
	XP_HUGEPAGES_ON = 2,   /* hugetlb pages or fail with -ENOMEM */
};

enum xp_thread_mode {
	/* Any number of threads may call into a rank at once (the default). */
	XP_THREAD_MULTI = 0,
	/* The program promises that no two threads call into the same rank at
	 * the same time (MPI's MPI_THREAD_SERIALIZED, UCX's single-thread
	 * worker). The rank then skips the two atomic exchanges per call that
	 * hand its engine from thread to thread. */
	XP_THREAD_SERIALIZED = 1,
	/* The program promises that only the thread that called xp_init calls
	 * into the rank, xp_finalize included (MPI's MPI_THREAD_FUNNELED). As
	 * serialized, and the TCP transport ties its io_uring to that thread
	 * (IORING_SETUP_SINGLE_ISSUER | DEFER_TASKRUN): a received message then
	 * costs the kernel less (docs/ARCHITECTURE.md, "The TCP transport"). A
	 * call from another thread fails the rank's TCP connections. */
	XP_THREAD_FUNNELED = 2,
};

/**
 * The smallest pool_max_bytes (XP_POOL_MAX_BYTES) xp_init and
 * xp_local_run accept: 1 MiB. Below it the pool could not keep the TCP
 * transport's receive buffers and a few messages besides.
 */
#define XP_POOL_MIN_BYTES ((size_t)1 << 20)

enum xp_tcp_zc {
	XP_TCP_ZC_AUTO = 0, /* zero-copy sends of large payloads to peers on other hosts */
	XP_TCP_ZC_OFF = 1,  /* never */
	XP_TCP_ZC_ON = 2,   /* to every peer, this host's included */
};

/** Allreduce algorithms (XP_ALLREDUCE_ALGO, xp_config_t.allreduce_algo). */
enum xp_allreduce_algo {
	XP_ALLREDUCE_AUTO = 0,               /* chosen by size and ranks */
	XP_ALLREDUCE_RECURSIVE_DOUBLING = 1, /* log2(p) exchanges of the whole vector */
	XP_ALLREDUCE_RING = 2,               /* reduce-scatter and allgather around a ring */
	XP_ALLREDUCE_HIERARCHICAL = 3,       /* within each host, across hosts' leaders, back */
	/* Reduce-scatter by recursive halving, allgather by recursive doubling. */
	XP_ALLREDUCE_RABENSEIFNER = 4,
	/* Every member on one host: vectors exchanged through shared memory,
	 * no messages (where not, the cost model chooses among the others). */
	XP_ALLREDUCE_SHARED_MEMORY = 5,
	XP_ALLREDUCE_ALGO_COUNT /* one past the last: new values go above */
};

enum xp_log_level {
	XP_LOG_NONE = 0,
	XP_LOG_ERROR = 1, /* failures nobody is told of by a return code */
	XP_LOG_WARN = 2,  /* the default */
	XP_LOG_INFO = 3,  /* also failures the program received as a return code */
	XP_LOG_DEBUG = 4,
};

/**
 * Settings of a context. Initialise with xp_config_init(), which applies the
 * built-in defaults and then the XP_* environment variables named below, and
 * change fields afterwards if the program wants to override both.
 *
 * One policy for every setting (docs/SETTINGS.md): a value from the
 * environment or from a field that is not accepted makes xp_init (and
 * xp_init_rank, xp_local_job_create, xp_local_run) fail with -EINVAL, and
 * xp_error_detail() names the variable or field, the value and what is
 * accepted. Nothing bad is silently ignored, raised or replaced by a
 * default. A bad variable fails even when the program overrides its field:
 * the environment is the user's word and a typo in it should be seen.
 *
 * String fields are pointers the program keeps valid until the call that
 * consumes the config returns (xp_config_init points them into the
 * environment). A program built against an older, shorter xp_config_t
 * (struct_size) gets the defaults and environment for the fields it lacks.
 */
typedef struct xp_config {
	size_t struct_size; /* set by xp_config_init(); lets the struct grow */
	/* Default deadline of waits and blocking calls, 1 to 86400000 ms;
	 * XP_TIMEOUT_MS; 30000. */
	int timeout_ms;
	/* Hard bound on the memory of each rank's buffer pool; XP_POOL_MAX_BYTES;
	 * 64 MiB. Everything the pool maps counts: its size classes (hugetlb
	 * pages rounded up to 2 MiB included: a class whose rounding would not
	 * fit uses ordinary pages or fewer buffers) and the dedicated mappings
	 * of buffers larger than the largest class. Half goes to the classes,
	 * the rest to large buffers; xp_buf_get and pooled receives beyond it
	 * get -ENOBUFS. At least XP_POOL_MIN_BYTES. */
	size_t pool_max_bytes;
	size_t unexpected_max_bytes; /* bound on buffered unexpected payload; XP_UNEXPECTED_MAX_BYTES; 16 MiB */
	size_t rndv_threshold; /* messages this long or longer use rendezvous; XP_RNDV_THRESHOLD;
				      * 0 (default): each transport's own (in-process 4 KiB, TCP 32 KiB) */
	int hugepages;         /* enum xp_hugepages; XP_HUGEPAGES=auto|on|off */
	int thread_mode;       /* enum xp_thread_mode; XP_THREAD_MODE=multi|serialized */
	/* Bound on forming the job and on each out-of-band operation, ms;
	 * XP_BOOT_TIMEOUT_MS; 0 (default): timeout_ms. */
	int boot_timeout_ms;
	/* The secret every rank proves to join (the key never travels); XP_JOB_KEY;
	 * NULL: none, warned (xprun sets a random one). At most 255 bytes. */
	const char *job_key;
	/* Interface whose address a rank listens on (as NCCL_SOCKET_IFNAME);
	 * XP_SOCKET_IFNAME; NULL: the one that reaches rank 0. */
	const char *socket_ifname;
	/* Allowed transports in order of preference, e.g. "shm,tcp" (as
	 * UCX_TLS); XP_TRANSPORTS; NULL: every transport built. A name this
	 * build lacks is an error naming what it has. */
	const char *transports;
	/* Shared memory: rendezvous payloads this long or longer are copied by
	 * cross-memory attach (process_vm_readv by the receiver and
	 * process_vm_writev by the sender, each its part) instead of streamed
	 * through shared chunks; XP_SHM_CMA_MIN (a size or "off"); 8 KiB;
	 * SIZE_MAX: off. */
	size_t shm_cma_min;
	int tcp_zc; /* enum xp_tcp_zc; XP_TCP_ZC=auto|on|off */
	/* enum xp_log_level; XP_LOG_LEVEL=none|error|warn|info|debug. The log
	 * is the process's: the context created last sets it. */
	int log_level;
	/* Debug lines of these subsystems: "all" or a list of
	 * match,proto,pool,transport,coll; XP_DEBUG; NULL: none. Process-wide
	 * like log_level. */
	const char *debug;
	/* enum xp_allreduce_algo; XP_ALLREDUCE_ALGO=auto|recursive_doubling|
	 * ring|hierarchical|rabenseifner|shared_memory. */
	int allreduce_algo;
	/* The host this rank says it is on, instead of the one it finds
	 * (boot id and namespaces): ranks that give the same text count as
	 * one host (shared memory between them, one leader in hierarchical
	 * collectives), others as other hosts. For tests and for containers
	 * that share no /dev/shm; XP_HOST_ID; NULL: found. */
	const char *host_id;
	/* Bytes of each segment a collective's pipeline moves at a time (as
	 * NCCL's chunks): a ring's block goes in segments, each reduced while
	 * the next is on its way; XP_COLL_SEGMENT; 0 (default): chosen from the
	 * links' latency and bandwidth (16 times a step's fixed cost, 64 KiB to 1 MiB). */
	size_t coll_segment;
	/* The RDMA device to use (as UCX_NET_DEVICES names one), e.g. "mlx5_0"
	 * or "rxe0"; XP_RDMA_DEVICE; NULL: the first with an active port. */
	const char *rdma_device;
	/* Bound on the memory of the program's registrations that the RDMA
	 * registration cache keeps pinned (chunks no transfer uses are let go
	 * least recently used first); XP_RDMA_RCACHE_BYTES; 1 GiB. */
	size_t rdma_rcache_bytes;
	/* RDMA queue pairs connected through librdmacm (rdma_cm: addresses,
	 * routes and the CM handshake, as iWARP requires) instead of from the
	 * addresses the bootstrap trades; XP_RDMA_CM=off|on; off. */
	int rdma_cm;
	/* Send and receive buffer of each TCP bulk (rendezvous payload)
	 * socket; XP_TCP_SOCKBUF (a size for both, or "off": the kernel's
	 * autotuning); 0 (default): a 512 KiB send and 1 MiB receive buffer
	 * where net.core.wmem_max and rmem_max allow them, else autotuning.
	 * SIZE_MAX: off. */
	size_t tcp_sockbuf;
	/* DPDK EAL arguments, split at blanks, "{rank}" replaced by the rank
	 * (so one line serves every rank of a host), e.g. "-l {rank} --vdev
	 * net_tap{rank}"; or lines separated by ';' of which rank r takes the
	 * r-th (a memif server and its client); XP_DPDK_EAL; NULL: the
	 * application initialised the EAL, or DPDK is not used. The DPDK
	 * transport is offered only when this or dpdk_ip is set; unset
	 * dpdk_ip, rank r is 10.88.0.0 + r + 1. At most 1023 bytes. */
	const char *dpdk_eal;
	/* This rank's IPv4 address on the DPDK port, or a comma list of
	 * addresses of which rank r takes the r-th; XP_DPDK_IP; NULL: unset.
	 * At most 1023 bytes. */
	const char *dpdk_ip;
	/* The DPDK port (ethdev) id to use, 0 to 1023; XP_DPDK_PORT; 0. */
	size_t dpdk_port;
	/* The UDP port each rank receives DPDK datagrams on, 1 to 65535;
	 * XP_DPDK_UDP_PORT; 47100. */
	size_t dpdk_udp_port;
	/* Static neighbour table of the DPDK transport, "IPV4=MAC,...": those
	 * addresses are never asked for by ARP; XP_DPDK_NEIGHBOURS; NULL: ARP.
	 * At most 1023 bytes. */
	const char *dpdk_neighbours;
	/* For tests: the DPDK transport drops, reorders and duplicates this
	 * fraction of the datagrams it receives, "LOSS[,REORDER[,DUP]]", e.g.
	 * "0.05,0.01,0.01"; XP_DPDK_DROP; NULL: none. At most 63 bytes. */
	const char *dpdk_drop;
	/* A DPDK peer that acknowledges nothing this long is lost, and its
	 * operations fail naming it, ms (at least 1); XP_DPDK_PEER_TIMEOUT_MS;
	 * 10000. */
	int dpdk_peer_timeout_ms;
	/* Refuse to form a job without a job key (for sites where a job
	 * must never be open to strangers): with it on and no job_key, every
	 * rank's xp_init fails with -EACCES, naming the setting;
	 * XP_JOB_KEY_REQUIRED=off|on; off (then a missing key is warned once,
	 * by rank 0). Jobs from a unique id carry their own key. */
	int job_key_required;
	/* DPDK datagrams carry a MAC under per-pair keys derived from the job
	 * key, and nothing in one is used before it verifies
	 * (docs/DPDK-WIRE.md); XP_DPDK_AUTH=off|on; on. off, on both ends of
	 * a pair, sends and accepts them without, to measure what it costs. */
	int dpdk_auth;
	/* Endpoints (xp_connect, xp_accept) a context holds at once, 1 to
	 * 65536; XP_EP_MAX; 1024 in a context of xp_open, 64 in a rank of a
	 * job (every rank pays for them: about 256 bytes each, taken when
	 * the context is made). */
	size_t ep_max;
} xp_config_t;

/** Fills @cfg with defaults and then the XP_* environment. A variable whose
 * value is not accepted leaves the default in its field; xp_init then fails
 * naming it. */
void xp_config_init(xp_config_t *cfg);

/** What a completed operation reports. */
typedef struct xp_status {
	int source;    /* sender's rank in the communicator (receives) */
	uint64_t tag;  /* the message's tag (receives) */
	size_t length; /* the real message length, also when it was truncated */
	int error;     /* 0, or the negative code the operation failed with */
	xp_buf_t *buf; /* pooled receives: the buffer holding the message */
} xp_status_t;

/* ------------------------------------------------------------------------- */
/* Errors                                                                    */

/** Text for a code returned by any xp_ function (positive or negative). Never NULL. */
const char *xp_strerror(int code);

/**
 * The detailed message of the last failed operation completed on the calling
 * thread (it names rank, peer, tag, communicator), or "" if there is none.
 * Valid until the thread's next failing xp_ call.
 */
const char *xp_error_detail(void);

/* ------------------------------------------------------------------------- */
/* Contexts and communicators                                                */

/**
 * Creates the context of this process's rank of a job, from the launcher's
 * environment (xprun, Slurm, Open MPI, torchrun: docs/LAUNCHERS.md). @cfg
 * may be NULL: the defaults and the XP_* environment (xp_config_init)
 * apply. With no launcher variables (or a size of 1) it creates a job of
 * one rank. Collective: it returns once every rank has joined, exchanged
 * capability cards and connected the transports chosen for each peer
 * (shared memory on one host, TCP across hosts), or fails within the boot
 * timeout. A rank whose settings are refused still joins and leaves at
 * once, so the others fail without waiting out their timeout.
 * Returns 0, or (xp_error_detail() then says which rank, peer, variable):
 *   -EINVAL        a setting or launcher variable not accepted
 *   -EACCES        this rank and rank 0 have different job keys
 *   -EPROTO        rank 0's address is another job's (size, version)
 *   -ETIMEDOUT     ranks missing when the boot timeout passed
 *   -ECONNRESET    a rank left or died while the job formed
 *   -EADDRINUSE    rank 0 cannot listen on the rendezvous address
 *   -EPROTONOSUPPORT  no transport reaches some peer
 *   -ENOMEM
 */
int xp_init(const xp_config_t *cfg, xp_context_t **ctx);

/**
 * A job's unique id, for programs whose framework already has a way to pass
 * bytes to every process (as NCCL's ncclUniqueId serves PyTorch): rank 0's
 * rendezvous address and the job's key, in 128 opaque bytes that are safe to
 * copy, store and send anywhere (docs/LAUNCHERS.md). Anyone who has it can
 * join the job: pass it only to the job's processes.
 */
#define XP_UNIQUE_ID_BYTES 128
typedef struct xp_unique_id {
	unsigned char bytes[XP_UNIQUE_ID_BYTES];
} xp_unique_id_t;

/**
 * Makes the id of a new job, in the process that will be its rank 0: a
 * random job key (getrandom) and rank 0's address: the address of
 * XP_SOCKET_IFNAME if set, else the IPv4 address of the first interface
 * that is up and not a loopback, else a global IPv6 address, else
 * 127.0.0.1 (a job on this host only). It listens there on a port the
 * kernel picks and keeps that socket (one per id, for the life of the
 * process) for this process's xp_init_rank() as rank 0, so no other
 * program can take the port, and ranks that call xp_init_rank() before
 * rank 0 does wait for it. Never blocks.
 * Returns 0 and *@id, or -EINVAL (@id is NULL), -ENODEV (XP_SOCKET_IFNAME
 * names no interface with an address; xp_error_detail lists those there
 * are), -ENOMEM, or another negative errno of getrandom, socket, bind or
 * listen (xp_error_detail names the address).
 */
int xp_get_unique_id(xp_unique_id_t *id);

/**
 * Creates the context of rank @rank of a job of @size ranks whose id is
 * @id (from xp_get_unique_id() in one process, handed to every other one
 * by the program's own means). Launcher variables (XP_RANK, RANK,
 * SLURM_PROCID, ...) are ignored, and so is XP_JOB_KEY: the key is the
 * id's. Rank 0 uses the socket xp_get_unique_id() left in its process;
 * in another process it binds the id's address and port itself (retrying
 * while the port is still held). @size 1 (with @rank 0) gives a job of one
 * rank, as xp_init() without launcher variables, and @id may then be NULL.
 * Blocks until every rank has joined, at most XP_BOOT_TIMEOUT_MS (default:
 * the timeout). @cfg may be NULL, as for xp_init().
 * Returns 0, or the codes of xp_init():
 *   -EINVAL      @ctx or (with @size > 1) @id NULL, @rank not in
 *                [0, @size), @size < 1, a setting out of range, or an id
 *                that is not one (damaged, or of another version):
 *                xp_error_detail says what is wrong with it
 *   -EACCES      rank 0 has another key: an id of another job
 *   -EPROTO      the process at the id's address is not of this job
 *                (another size, or a duplicate rank)
 *   -ETIMEDOUT   rank 0 not reached, or ranks missing, in time; the
 *                message names the address and the missing ranks
 *   -ECONNRESET  rank 0 closed the connection while this rank joined
 *   -EADDRINUSE, -EADDRNOTAVAIL  rank 0 cannot listen on the id's address
 *   -ENODEV      XP_SOCKET_IFNAME names no interface with an address
 *   -ENOMEM, -EPROTONOSUPPORT (no transport reaches a peer)
 */
int xp_init_rank(const xp_config_t *cfg, int rank, int size, const xp_unique_id_t *id,
		 xp_context_t **ctx);

/**
 * Ends this rank's part in the job and destroys its context (from xp_init
 * or xp_init_rank). Collective: it first waits until this rank's sends
 * have left, then for every rank of the job to call it, so a rank that
 * finishes early does not look dead to the others; at most the boot
 * timeout (XP_BOOT_TIMEOUT_MS) if some rank never comes, after which it
 * warns and destroys the context anyway. If a rank of the job is lost
 * (died), it still waits, at most the context's timeout (XP_TIMEOUT_MS),
 * for every rank that is left to call it, so those still in an operation
 * that failed name the rank that died, not this one. A job of one rank returns at
 * once. Ignores NULL and contexts owned by a local job (destroy the job).
 * Every rank of a job must call it before its process ends: until then,
 * messages whose sends completed may still be queued in it (xp_isend).
 */
void xp_finalize(xp_context_t *ctx);

int xp_rank(const xp_context_t *ctx);
int xp_size(const xp_context_t *ctx);

/** The communicator of all ranks of the job. Never NULL for a valid context. */
xp_comm_t *xp_comm_world(xp_context_t *ctx);
int xp_comm_rank(const xp_comm_t *comm);
int xp_comm_size(const xp_comm_t *comm);

/**
 * Runs pending work of the calling rank: completions, matching, protocol
 * steps. Never blocks. Returns how many events it processed (>= 0).
 */
int xp_progress(xp_context_t *ctx);

/* ------------------------------------------------------------------------- */
/* Point-to-point                                                            */

/**
 * The longest message (and the largest receive capacity) a call accepts:
 * 1 TiB. Longer ones are refused with -EINVAL, and so is a length from the
 * wire beyond it, so no length plus a header can wrap.
 */
#define XP_MSG_MAX ((size_t)1 << 40)

/**
 * Starts sending @len bytes at @buf to rank @dest of @comm with @tag.
 * Messages from one rank to another on one communicator that could match the
 * same receive are matched in the order they were sent.
 *
 * A send completes (its request completes, or xp_send returns 0) once @buf
 * may be reused, not once the message has arrived or left the process: a
 * short message is copied into a queue of this rank, which drains while
 * the rank makes progress (any call that waits, xp_progress) and before
 * xp_finalize returns. A process that ends without xp_finalize may lose
 * messages whose sends completed, as in MPI; xprun reports a rank that
 * called xp_init and exited without xp_finalize as failed.
 * Returns 0 and a request, -EINVAL (bad rank, NULL buffer with len > 0,
 * @len > XP_MSG_MAX; xp_error_detail() says which), -ENOMEM.
 */
int xp_isend(xp_comm_t *comm, const void *buf, size_t len, int dest, uint64_t tag,
	     xp_request_t **req);

/**
 * Starts a receive into @buf (@cap bytes) of a message from @source
 * (or XP_ANY_SOURCE) whose tag t satisfies ((t ^ @tag) & @mask) == 0.
 * A message longer than @cap completes the request with -EMSGSIZE; the status
 * then holds the real length and the first @cap bytes are delivered.
 *
 * Lost peers: a receive from a rank that is lost (its process died, its
 * connection broke, it sent what could not be kept) completes with that
 * failure (-ECONNRESET, or -ENOMEM, -EPROTO) and a text naming it. An
 * XP_ANY_SOURCE receive stays posted while any other rank of the job
 * lives, since that rank may still send what it waits for (wait with a
 * deadline to bound that); once every other rank is lost it fails the
 * same way, naming them, at once and not at its deadline.
 *
 * Connections: over TCP a pair of ranks connects the first time one sends
 * to the other or posts a receive naming it, not in xp_init; over shared
 * memory a rank maps the peer's segment then (or at the first message it
 * reads from it); over RDMA the two ranks make their queue pairs then,
 * trading their numbers over the TCP pair that watches the peer (with
 * XP_RDMA_CM=on, or where no TCP pair can carry them, queue pairs are
 * still made in xp_init); over DPDK a pair's state (its keys and windows)
 * at its first datagram, either way, and the TCP pair that watches the
 * peer with it. A rank learns that a peer died from that pair: a peer
 * that died before the two ever talked fails the first send or named
 * receive at once where its host refuses the connection or its process is
 * gone (the same host), or by the deadline where nothing answers; a rank
 * it never talked to is not counted as lost for an XP_ANY_SOURCE receive
 * until then. Over TCP and RDMA the first message to a peer leaves once
 * both ranks make progress (any waiting call), as with UCX's wire-up.
 *
 * Returns 0 and a request, -EINVAL (bad rank, NULL buffer with cap > 0,
 * @cap > XP_MSG_MAX), -ENOMEM.
 */
int xp_irecv(xp_comm_t *comm, void *buf, size_t cap, int source, uint64_t tag, uint64_t mask,
	     xp_request_t **req);

/**
 * Like xp_irecv(), but the message is handed over in a pooled buffer
 * (status.buf) without a copy into user memory; release it with
 * xp_buf_release(). If no pooled buffer can hold the message the request
 * completes with -ENOBUFS and the message stays queued for a later receive.
 */
int xp_irecv_buf(xp_comm_t *comm, int source, uint64_t tag, uint64_t mask, xp_request_t **req);

/**
 * Tests a request without blocking. If the operation has completed, writes
 * @status (may be NULL), frees the request, sets *@req to NULL and returns 1
 * on success or the operation's negative code on failure. Returns 0 if it has
 * not completed. A NULL *@req returns 1 with an empty status.
 */
int xp_test(xp_request_t **req, xp_status_t *status);

/**
 * Waits for a request, at most @timeout_ms milliseconds (XP_TIMEOUT_DEFAULT:
 * the context's timeout; XP_TIMEOUT_INFINITE: no deadline). When the
 * deadline passes, the operation is cancelled unless it has already been
 * matched (a rendezvous send over TCP asks its receiver, which decides; an
 * answer that does not come within 20 ms is not waited for), or, for a
 * receive, unless its matched message's payload is already arriving into
 * the buffer (a payload its sender has not started to send is dropped when
 * it comes), and completes with -ETIMEDOUT and a message (xp_error_detail()
 * and the log) naming this rank, the peer, the tag and the communicator.
 * Either way the request is freed and *@req set to NULL; @status is written
 * whenever the operation completed. Returns 0 or the operation's code.
 *
 * The waiting thread drives the rank's progress: it spins a while, then
 * sleeps until any of the rank's transports has an event (one sleep over
 * all of them), the deadline passes, or another thread of the rank finishes
 * work. Other threads of the rank may post, test, cancel and call the
 * out-of-band functions meanwhile; they never wait for this wait to end.
 */
int xp_wait(xp_request_t **req, int timeout_ms, xp_status_t *status);

/**
 * Asks to cancel a pending operation. A receive not yet matched and a
 * rendezvous send not yet matched complete with -ECANCELED; anything further
 * along completes normally. The request must still be waited for or tested.
 */
int xp_cancel(xp_request_t *req);

/** Blocking send with the context's default timeout. */
int xp_send(xp_comm_t *comm, const void *buf, size_t len, int dest, uint64_t tag);

/** Blocking receive with the context's default timeout; @status may be NULL. */
int xp_recv(xp_comm_t *comm, void *buf, size_t cap, int source, uint64_t tag, uint64_t mask,
	    xp_status_t *status);

/** Blocking pooled receive: *@buf holds the message until xp_buf_release(). */
int xp_recv_buf(xp_comm_t *comm, int source, uint64_t tag, uint64_t mask, xp_buf_t **buf,
		xp_status_t *status);

/* ------------------------------------------------------------------------- */
/* Pooled buffers                                                            */

/**
 * Takes a buffer of at least @size bytes from the rank's registered pool,
 * for a program that wants to fill a buffer and send it with no further
 * registration. Returns 0, -ENOBUFS (pool exhausted or @size larger than
 * the pool allows: back-pressure, try again after releasing buffers).
 */
int xp_buf_get(xp_context_t *ctx, size_t size, xp_buf_t **buf);
void *xp_buf_data(const xp_buf_t *buf);
/** Bytes of message held (pooled receives) or the size asked for (xp_buf_get). */
size_t xp_buf_len(const xp_buf_t *buf);
/** Gives a pooled buffer back; it returns to its pool when the last reference goes. */
void xp_buf_release(xp_buf_t *buf);

/* ------------------------------------------------------------------------- */
/* Memory registration                                                       */

/**
 * Registers [@addr, @addr + @len) once with every backend of the context
 * that needs registrations (and with backends activated later). Sends and
 * receives whose buffer lies inside a registration use it instead of
 * registering on the fly. The memory must stay mapped until deregistered:
 * deregister before you free or unmap it (and before memory mapped later
 * at the same addresses is used), as xport watches no free or munmap. A
 * backend may pin a large registration lazily, in chunks as transfers use
 * them, within a bound of its own (RDMA: XP_RDMA_RCACHE_BYTES, least
 * recently used chunks let go); deregistering drops them all. Buffers not
 * inside a registration are registered for each transfer alone.
 * Returns 0, -EINVAL, -ENOMEM, or a backend's code.
 */
int xp_mem_register(xp_context_t *ctx, void *addr, size_t len, xp_mem_t **mem);

/**
 * Registers @len bytes of a dmabuf from @offset in it: @fd is the dmabuf's
 * file descriptor, from its exporter (a GPU driver, vgem, udmabuf). Sends
 * and receives then name this memory by the addresses [@addr, @addr +
 * @len): the device's address of the memory (as NCCL and libfabric's
 * FI_MR_DMABUF take it) or a mapping of it. Backends that reach memory
 * by DMA (RDMA: `ibv_reg_dmabuf_mr`) register the dmabuf itself, which
 * needs no CPU mapping and pins nothing through the page tables; the
 * others move data through the CPU at @addr, which must then be a mapping
 * the CPU can read and write (device-only memory is not yet supported on
 * them). @fd is duplicated: close yours when you like. Deregister before
 * the exporter frees the memory.
 * Returns 0, -EBADF, -EINVAL (a range past the dmabuf's end), -ENOMEM, or
 * a backend's code: -EOPNOTSUPP where a device cannot register dmabufs
 * (soft-RoCE cannot; the error names the device), and nothing is left
 * registered.
 */
int xp_mem_register_dmabuf(xp_context_t *ctx, int fd, uint64_t offset, size_t len, void *addr,
			   xp_mem_t **mem);
void xp_mem_deregister(xp_mem_t *mem);

/* ------------------------------------------------------------------------- */
/* Endpoints: connections made by address                                    */

/*
 * For programs whose peers are not the ranks of one job, or not known when
 * it starts (a network plugin of NCCL, a server and its clients), as UCX
 * gives ucp_ep_create from a worker's address: one side listens and
 * publishes an address of at most XP_EP_ADDR_BYTES; the other connects to
 * that address. Either side sends and receives tagged messages on the
 * connection it gets (an endpoint), matched in the order they were posted
 * on it, with the registrations, the zero-copy paths and the requests of
 * the job API (xp_test, xp_wait, xp_cancel and the rest). Nothing here
 * blocks: a connection is made while the context makes progress (any
 * xp_progress, xp_test or wait), and both sides poll until it is ready.
 *
 * Endpoints live in any context: one from xp_open (no job) or a rank's of
 * a job (not a job of threads, xp_local_job_create, nor a job of one rank
 * without a launcher: -ENOTSUP). A context holds at most XP_EP_MAX of them
 * at once (xp_config_t.ep_max).
 * They are made over TCP (io_uring), the transport every host has; once
 * made, both sides move an endpoint's messages to RDMA where both have a
 * device (xp_ep_route says which serves it). The address also names the
 * listener's host, for shared memory to come.
 *
 * Who may connect: the address holds a secret of 32 random bytes, drawn
 * by xp_listen; the connecting side proves it knows the secret, and the
 * job key too where the context has one (XP_JOB_KEY), by the handshake of
 * the job's own connections (both sides prove, nothing secret travels).
 * So only a process that was given the address (and the key) can connect:
 * pass the address as you would a unique id. A stranger that connects and
 * proves nothing holds a half-open connection for at most 3 s, however
 * many it opens, and never delays a connection that proves itself.
 */
#define XP_EP_ADDR_BYTES 128
typedef struct xp_ep_addr {
	unsigned char bytes[XP_EP_ADDR_BYTES];
} xp_ep_addr_t;

/**
 * Creates a context that is not a job: rank 0 of 1, for endpoints only
 * (xp_comm_world has no one to talk to). @cfg may be NULL, as for
 * xp_init(); launcher variables are ignored. The address it listens on is
 * that of XP_SOCKET_IFNAME if set, else the first interface that is up and
 * not a loopback (as xp_get_unique_id chooses), else 127.0.0.1. Destroy it
 * with xp_finalize(), which returns at once; close its endpoints and
 * listeners first (those still open are closed by it).
 * Returns 0, -EINVAL (a setting), -ENODEV (XP_SOCKET_IFNAME names no
 * interface with an address), -ENOMEM, or a transport's code
 * (xp_error_detail says which).
 */
int xp_open(const xp_config_t *cfg, xp_context_t **ctx);

/**
 * Listens for connections to @ctx: writes the address to give connecting
 * processes into @addr and the listener into *@l. Each listener has its
 * own port and secret. Returns 0, -EINVAL, -ENOTSUP (the context has no
 * TCP transport: a job whose ranks all share a host and XP_TRANSPORTS
 * without tcp), -EMFILE, -ENOMEM.
 */
int xp_listen(xp_context_t *ctx, xp_listener_t **l, xp_ep_addr_t *addr);

/**
 * Takes a connection that has arrived at @l and is ready: 0 and *@ep, or
 * -EAGAIN when none is (call again after progress). Connections are taken
 * in the order they became ready. -EINVAL for a NULL argument, -EBADF for
 * a closed listener.
 */
int xp_accept(xp_listener_t *l, xp_ep_t **ep);

/** Closes @l: connections not yet taken are closed, its port too. Endpoints
 * taken from it are not affected. Ignores NULL. */
void xp_listener_close(xp_listener_t *l);

/**
 * Starts connecting @ctx to the listener whose address is @addr: returns
 * at once with *@ep. Sends may be posted on it at once (they leave when it
 * is ready); xp_ep_ready says when it is.
 * Returns 0, -EINVAL (a NULL argument, or an address that is not one:
 * damaged or of another version; xp_error_detail says what), -ENOTSUP (no
 * TCP transport in @ctx), -EMFILE (XP_EP_MAX endpoints are open), -ENOMEM.
 */
int xp_connect(xp_context_t *ctx, const xp_ep_addr_t *addr, xp_ep_t **ep);

/**
 * Whether @ep is connected: 0 (ready: both sides' handshakes done and the
 * transport that serves it chosen, see xp_ep_route), -EAGAIN
 * (still being made: make progress and ask again), or why it failed, for
 * good: -ECONNREFUSED (nothing listens there any more), -EACCES (the
 * listener refused our proof: a wrong secret or job key), -ETIMEDOUT (not
 * made within the context's timeout), -ECONNRESET (the peer closed or
 * died). Runs the context's progress once. Never blocks.
 */
int xp_ep_ready(xp_ep_t *ep);

/**
 * Sends @len bytes at @buf with @tag on @ep, as xp_isend() to a rank.
 * Messages on one endpoint match receives posted on the other side's
 * endpoint in the order they were sent, among those whose tag fits.
 * Returns 0 and a request, -EINVAL, -ENOMEM.
 */
int xp_ep_isend(xp_ep_t *ep, const void *buf, size_t len, uint64_t tag, xp_request_t **req);

/**
 * Receives a message of @ep whose tag t satisfies ((t ^ @tag) & @mask) ==
 * 0 into @buf (@cap bytes), as xp_irecv(): a longer message completes it
 * with -EMSGSIZE and its first @cap bytes. The status's length is the
 * message's, its source 0. A receive on an endpoint whose peer closed it
 * or died fails with -ECONNRESET and a text naming the endpoint's address.
 * Returns 0 and a request, -EINVAL, -ENOMEM.
 */
int xp_ep_irecv(xp_ep_t *ep, void *buf, size_t cap, uint64_t tag, uint64_t mask,
		xp_request_t **req);

/** The context @ep belongs to. */
xp_context_t *xp_ep_context(const xp_ep_t *ep);

/**
 * Closes @ep: its peer's operations on it fail with -ECONNRESET once they
 * see the close (messages already sent still arrive first); this side's
 * operations still pending complete with -ECANCELED. Sends that
 * completed have left or leave before the connection closes. Requests of
 * @ep must still be tested or waited for. Ignores NULL.
 */
void xp_ep_close(xp_ep_t *ep);

/* ------------------------------------------------------------------------- */
/* Out-of-band control                                                       */

/**
 * A barrier of all ranks of the job, outside the program's messages and
 * the collectives: for processes, along a tree over the job's own
 * transports (rank 0 at its root, at most four children a rank: about
 * log4(size) steps each way, and no rank needs a connection to every
 * other); through memory for a local job. Its messages are in a tag space
 * of their own, so no receive of the program matches them, but they do
 * travel over the transports (and show in xp_stats_get() while they wait
 * to be received): a tool that measures a transport sees them between its
 * measurements. For setup, tests and tools, not for a program's hot path
 * (that is xp_barrier). It runs the rank's progress while it waits.
 * Every rank must call it, in the same order as the other xp_oob_ calls;
 * a local job's ranks each from their own thread.
 *
 * Blocks, bounded by the context's timeout (plus at most a second per
 * level of the tree, so that the rank that finds a missing rank is the one
 * that reports it). A failure fails the operation on every rank at once,
 * with a text naming the rank at fault and the rank that found it.
 * Returns 0, -ETIMEDOUT (a rank did not come in time), or the code with
 * which a rank the tree needs was lost (-ECONNRESET: it died or left; also
 * once any rank on the way is lost: the barrier cannot route around a
 * lost rank, so it fails for the rest of the job).
 */
int xp_oob_barrier(xp_context_t *ctx);

/**
 * Gathers @len bytes from every rank into @all (size x @len bytes, in rank
 * order), out of band like xp_oob_barrier() and with its returns; also
 * -EPROTO, on every rank, when ranks gave different @len (the text names
 * both lengths), and -EINVAL when size x @len exceeds XP_MSG_MAX.
 */
int xp_oob_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all);

/* ------------------------------------------------------------------------- */
/* What serves a peer                                                        */

typedef struct xp_route {
	const char *transport; /* of the messages: "inproc", "self", "shm", "tcp" (static) */
	const char *protocol;  /* "eager" or "rndv" for a message of that size */
	size_t rndv_threshold; /* messages this long or longer use rendezvous */
	/* of rendezvous payloads: the same as transport unless a faster one
	 * carries them ("rdma" beside "tcp", "shm" beside "tcp") (static) */
	const char *payloads;
} xp_route_t;

/** Says which transport and protocol serve a message of @size bytes to @peer. */
int xp_route_get(xp_context_t *ctx, int peer, size_t size, xp_route_t *route);

/**
 * Says which transport and protocol serve a message of @size bytes on
 * @ep, as xp_route_get() for a rank. An endpoint's connection is made over
 * TCP; once it is (xp_ep_ready), both sides move its messages to a faster
 * transport both have, the same way: "rdma" where both have an RDMA device
 * on the same kind of link (the connection stays, to watch the peer).
 * Returns 0 or -EINVAL.
 */
int xp_ep_route(xp_ep_t *ep, size_t size, xp_route_t *route);

/* ------------------------------------------------------------------------- */
/* Statistics                                                                */

typedef struct xp_stats {
	uint64_t sends, recvs;            /* operations completed */
	uint64_t eager_sends, rndv_sends; /* protocol used by completed sends */
	/* point-to-point messages (xp_isend, any communicator) waiting in the
	 * unexpected queue for a receive the program has not posted yet; not
	 * the messages of collectives or of xp_oob_*, which the library
	 * receives itself and which a faster peer may send at any time */
	uint64_t unexpected_now;
	/* payload bytes buffered for every early message, those of
	 * collectives and xp_oob_* too: this is the memory they hold */
	uint64_t unexpected_bytes_now;
	uint64_t unexpected_bytes_max; /* high-water mark of that */
	uint64_t
		pool_bytes; /* bytes the pool maps now: classes + large buffers, <= pool_max_bytes */
	uint64_t pool_bufs_in_use; /* pooled buffers taken, also those transports keep posted */
	int pool_hugepages;        /* 1 if the pool is backed by hugetlb pages */
} xp_stats_t;

/** Fills @stats with the rank's counters. */
int xp_stats_get(xp_context_t *ctx, xp_stats_t *stats);

/* ------------------------------------------------------------------------- */
/* In-process ranks                                                          */

/**
 * Creates a job of @nranks ranks that live in this process (@cfg may be
 * NULL, as for xp_init), each driven by
 * the thread(s) the program chooses. They exchange through the same engine
 * as networked ranks, over lock-free rings.
 * Returns 0, -EINVAL (nranks < 1 or > 4096, or a setting out of range as
 * for xp_init), -ENOMEM.
 */
int xp_local_job_create(int nranks, const xp_config_t *cfg, xp_local_job_t **job);

/** The context of @rank in @job. Returns 0 or -EINVAL. */
int xp_local_job_context(xp_local_job_t *job, int rank, xp_context_t **ctx);

/** Destroys the job and all its contexts. No thread may still use them. */
void xp_local_job_destroy(xp_local_job_t *job);

/**
 * Creates a local job, runs @fn(ctx, @arg) on one thread per rank, joins
 * them and destroys the job. Returns 0 if every rank returned 0, else the
 * first nonzero result in rank order, or a creation error.
 */
int xp_local_run(int nranks, const xp_config_t *cfg, int (*fn)(xp_context_t *ctx, void *arg),
		 void *arg);

/* ------------------------------------------------------------------------- */
/* Communicators                                                             */

/** A color that puts the calling rank in no communicator (xp_comm_split). */
#define XP_UNDEFINED (-32766)

/**
 * Creates a communicator of the same ranks as @comm, with its own tag space
 * (messages on one never match receives on the other). Collective over
 * @comm: every member calls it, in the same order as its other collective
 * calls on @comm. The new communicator's id is agreed among the members by
 * an exchange over @comm (no central counter). Returns 0 and *@out,
 * -EINVAL, -ENOMEM, -EAGAIN (no id free on every member: free some), or the
 * failure of that exchange (-ETIMEDOUT, -ECONNRESET naming the rank).
 */
int xp_comm_dup(xp_comm_t *comm, xp_comm_t **out);

/**
 * MPI_Comm_split: the ranks of @comm that give the same @color (>= 0) form
 * one new communicator, ordered by @key, then by their rank in @comm.
 * @color XP_UNDEFINED: this rank joins none and *@out is set to NULL.
 * Collective over @comm, as xp_comm_dup. Returns as xp_comm_dup; -EINVAL
 * for a negative color other than XP_UNDEFINED.
 */
int xp_comm_split(xp_comm_t *comm, int color, int key, xp_comm_t **out);

/**
 * MPI_Comm_create_group: the @n ranks of @comm listed in @ranks (distinct,
 * each 0 to size - 1) form a new communicator, ranked in the order of the
 * list. Collective over those @n ranks only: unlike xp_comm_dup and
 * xp_comm_split, the ranks of @comm not listed do not call it, and may do
 * anything meanwhile, on @comm too (its collectives and other creations
 * never match this one's messages). Every listed rank passes the same list
 * and the same @tag, and the calling rank must be listed. @tag tells apart
 * creations that may run at the same time over ranks in common, which
 * must give different tags (as MPI's); only its low 32 bits are used.
 * The new communicator's id is agreed among the listed ranks by an
 * exchange over @comm. Blocks until every listed rank has called it, at
 * most the context's timeout.
 * Returns 0 and *@out (free it with xp_comm_free); -EINVAL (@comm, @ranks
 * or @out NULL, @n < 1 or > size, a rank out of range or listed twice, the
 * caller not listed); -ENOMEM; -EAGAIN (no id free on every listed rank);
 * or the failure of that exchange: -ETIMEDOUT (a listed rank did not call
 * it in time), -EPIPE naming (as a rank of @comm) a listed rank that was
 * lost.
 */
int xp_comm_create_group(xp_comm_t *comm, int n, const int *ranks, uint64_t tag, xp_comm_t **out);

/**
 * Frees a communicator from xp_comm_dup, xp_comm_split or
 * xp_comm_create_group once the program has completed every operation on
 * it. Local (not collective). NULL and the world communicator are ignored.
 */
void xp_comm_free(xp_comm_t *comm);

/* ------------------------------------------------------------------------- */
/* Many requests                                                             */

/**
 * Waits for all @n requests (NULL entries count as done), at most
 * @timeout_ms in all (as xp_wait). Every request that completes is freed
 * and its entry set to NULL; @statuses (NULL, or @n entries) gets each
 * one's status. When the deadline passes, the requests still pending are
 * cancelled as xp_wait cancels one. Returns 0 if all succeeded, else the
 * code of the first (in array order) that failed; xp_error_detail()
 * describes that one.
 */
int xp_waitall(size_t n, xp_request_t **reqs, int timeout_ms, xp_status_t *statuses);

/**
 * Waits until one of the @n requests completes (at most @timeout_ms; the
 * others are left as they are), frees it, sets its entry to NULL and
 * writes its index to *@index and its status to @status (may be NULL).
 * Returns 0 or that request's code; -ETIMEDOUT with *@index = n when the
 * deadline passed first (nothing is cancelled); -EINVAL when every entry
 * is NULL.
 */
int xp_waitany(size_t n, xp_request_t **reqs, int timeout_ms, size_t *index, xp_status_t *status);

/**
 * Without blocking, completes every one of the @n requests that is done:
 * frees it, sets its entry to NULL, and appends its index to @indices and
 * its status to @statuses (either may be NULL; each @n entries). Returns
 * how many it completed (>= 0).
 */
int xp_testsome(size_t n, xp_request_t **reqs, size_t *indices, xp_status_t *statuses);

/* ------------------------------------------------------------------------- */
/* Collectives                                                               */

/** Element types of collective operations. */
typedef enum xp_dtype {
	XP_INT8 = 0,
	XP_UINT8,
	XP_INT32,
	XP_UINT32,
	XP_INT64,
	XP_UINT64,
	XP_FLOAT16,  /* IEEE 754 binary16 */
	XP_BFLOAT16, /* the upper half of a binary32 */
	XP_FLOAT32,
	XP_FLOAT64,
	XP_DTYPE_COUNT
} xp_dtype_t;

/**
 * Reduction operators. XP_AVG (allreduce and reduce_scatter only) is the
 * sum divided by the number of ranks (integers: truncated toward zero).
 * Integer sums and products wrap.
 *
 * float16 and bfloat16 are widened exactly to float32, reduced in float32
 * (partial results travel between ranks as float32: twice the bytes of the
 * 16-bit vector) and rounded to the 16-bit type once, to nearest even, at
 * the end; each float32 partial is rounded too, so from three ranks on a
 * result can be rounded twice. Exactly, over p ranks, with inputs x_i, RN
 * rounding to the 16-bit type, u = 2^-24 and g(k) = k*u / (1 - k*u):
 *  - XP_MIN, XP_MAX: exact.
 *  - XP_SUM: RN(s) for a float32 s with |s - S| <= d = g(p-1) * sum |x_i|,
 *    S the exact sum, on every algorithm. So the result is RN(S), the
 *    exact sum rounded once, unless a halfway point between two adjacent
 *    values of the type lies within d of S: then it is one of those two (in
 *    general, it lies between RN(S - d) and RN(S + d)). The largest finite
 *    value and infinity count as adjacent (halfway: 65520 for float16,
 *    2^128 - 2^119 for bfloat16). Example: float16 1 + 2^-11 + 2^-24 over
 *    three ranks gives 0x3c00, RN(S) being 0x3c01 (s = 1 + 2^-11 lies on
 *    the halfway point; S is 2^-24 from it, d about 2^-23).
 *  - XP_AVG: as XP_SUM with S / p and d = g(p) * sum |x_i| / p (the division
 *    is one more float32 rounding), plus 2^-150 for a bfloat16 average below
 *    2^-126.
 *  - XP_PROD: as XP_SUM with the exact product P and d = g(p-1) * |P|, while
 *    every partial product is zero or a normal float32 (magnitude 2^-126 to
 *    2^128), as float16 products always are for p <= 5; a partial product
 *    beyond that underflows or overflows as float32 does.
 *  - Overflow: float16 partial sums never overflow float32. A bfloat16
 *    partial sum cannot while sum |x_i| < 2^127; beyond, one may be +-inf:
 *    with inputs of one sign the result is then +-inf, as RN(S) is (p <
 *    2^15); with both signs it may be +-inf or NaN where S is finite.
 * These hold in the default floating-point environment (round to nearest,
 * no flush-to-zero of subnormals).
 */
typedef enum xp_op { XP_SUM = 0, XP_PROD, XP_MIN, XP_MAX, XP_AVG, XP_OP_COUNT } xp_op_t;

/** Size in bytes of one element of @dtype, or 0 if it is not one. */
size_t xp_dtype_size(xp_dtype_t dtype);

/** Pass as the send buffer of a collective to work in the receive buffer. */
#define XP_IN_PLACE ((void *)(uintptr_t)1)

/*
 * Collectives are collective over their communicator: every member calls
 * the same operations in the same order with matching arguments (counts,
 * types, operators, roots); arguments that differ are reported naming the
 * ranks where the protocol can see them. They use a tag space of their
 * own per communicator, so they never match the program's receives, even
 * XP_ANY_SOURCE with a zero mask, and may run while the program's own
 * messages flow on the same communicator. They wait at most the context's
 * timeout; a rank that dies fails the call on every other rank naming it.
 * Counts are in elements.
 */

/** Returns when every member has entered it. */
int xp_barrier(xp_comm_t *comm);

/** Root's @count elements of @buf to every member's @buf. */
int xp_bcast(xp_comm_t *comm, void *buf, size_t count, xp_dtype_t dtype, int root);

/** Every member's @recvbuf gets the reduction of every member's @sendbuf
 * (or @recvbuf, with XP_IN_PLACE). */
int xp_allreduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		 xp_dtype_t dtype, xp_op_t op);

/**
 * Which algorithm xp_allreduce would use for @count elements of @dtype on
 * @comm (the cost model's choice, or XP_ALLREDUCE_ALGO): returns the enum
 * xp_allreduce_algo value (> 0) and *@name ("recursive_doubling", "ring",
 * "hierarchical", "rabenseifner", "shared_memory"), or -EINVAL. Local: sends nothing.
 */
int xp_allreduce_algo_get(xp_comm_t *comm, size_t count, xp_dtype_t dtype, const char **name);

/**
 * xp_allreduce and xp_iallreduce with this call's algorithm (enum
 * xp_allreduce_algo) chosen by the program, over XP_ALLREDUCE_ALGO and
 * the cost model; XP_ALLREDUCE_AUTO: as without. Every member must pass
 * the same. The ring needs a block per rank: with fewer elements than
 * ranks it runs as recursive doubling (Rabenseifner's runs with any
 * count). -EINVAL for another value.
 */
int xp_allreduce_with(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		      xp_dtype_t dtype, xp_op_t op, int algo);
int xp_iallreduce_with(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		       xp_dtype_t dtype, xp_op_t op, int algo, xp_request_t **req);

/** As xp_allreduce, the result at @root only (others' @recvbuf may be NULL). */
int xp_reduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, xp_dtype_t dtype,
	      xp_op_t op, int root);

/** @recvbuf (size * @count elements) gets every member's @count elements in
 * rank order. XP_IN_PLACE: this rank's part is already at its place. */
int xp_allgather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		 xp_dtype_t dtype);

/**
 * Reduces size * @count elements of every member's @sendbuf and leaves
 * block r (elements r * @count to (r + 1) * @count - 1) of the result in
 * rank r's @recvbuf (@count elements): MPI_Reduce_scatter_block.
 * XP_IN_PLACE: the input is @recvbuf's size * @count elements and the
 * result its first @count. XP_AVG allowed.
 */
int xp_reduce_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		      xp_dtype_t dtype, xp_op_t op);

/** Block j (@count elements) of @sendbuf goes to rank j, whose block r of
 * @recvbuf it becomes. XP_IN_PLACE: @recvbuf holds the blocks to send. */
int xp_alltoall(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		xp_dtype_t dtype);

/** Every member's @count elements to @root's @recvbuf (size * @count, in
 * rank order; others' may be NULL). XP_IN_PLACE at the root: its part is
 * already at its place. */
int xp_gather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, xp_dtype_t dtype,
	      int root);

/** Block r of @root's @sendbuf (size * @count elements) to rank r's
 * @recvbuf. XP_IN_PLACE as @recvbuf at the root: its block stays. */
int xp_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, xp_dtype_t dtype,
	       int root);

/*
 * Nonblocking collectives: the same operations, started now and finished
 * by xp_test, xp_wait, xp_waitall, xp_waitany or xp_testsome on *@req,
 * like point-to-point requests, so a program overlaps several (on one
 * communicator or many) and its own computation. Buffers are lent until
 * the request completes. A collective runs its steps while the program
 * tests or waits for any of the rank's requests of a collective; it
 * cannot be cancelled (xp_cancel: -EINVAL). xp_wait's deadline, if
 * shorter than the context's timeout, fails it with -ETIMEDOUT (it cannot
 * be resumed: the other members then fail too).
 */
int xp_ibarrier(xp_comm_t *comm, xp_request_t **req);
int xp_ibcast(xp_comm_t *comm, void *buf, size_t count, xp_dtype_t dtype, int root,
	      xp_request_t **req);
int xp_iallreduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		  xp_dtype_t dtype, xp_op_t op, xp_request_t **req);
int xp_ireduce(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, xp_dtype_t dtype,
	       xp_op_t op, int root, xp_request_t **req);
int xp_iallgather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		  xp_dtype_t dtype, xp_request_t **req);
int xp_ireduce_scatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		       xp_dtype_t dtype, xp_op_t op, xp_request_t **req);
int xp_ialltoall(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count,
		 xp_dtype_t dtype, xp_request_t **req);
int xp_igather(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, xp_dtype_t dtype,
	       int root, xp_request_t **req);
int xp_iscatter(xp_comm_t *comm, const void *sendbuf, void *recvbuf, size_t count, xp_dtype_t dtype,
		int root, xp_request_t **req);

#ifdef __cplusplus
}
#endif

#endif /* XPORT_XPORT_H */
