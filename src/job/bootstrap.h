/* SPDX-License-Identifier: MIT */
/*
 * The job bootstrap: forms a job of processes from the launcher's
 * environment (or from a rank, size and unique id) and keeps a control
 * channel between them (a star around rank 0) for exchanging addresses and
 * for barriers. The control channel is for
 * setting up, never for data: transports build their own
 * connections from what xpi_boot_allgather() exchanged. It lives only
 * while the job forms: xp_init closes it once the transports are up (rank
 * 0 would otherwise hold a socket per rank for the job's life), and the
 * job's out-of-band operations then go along a tree over its transports
 * (oob_tree.h). A transport whose teardown needs it keeps it (the
 * context's keep_boot: DPDK's ranks close their ports in turn between two
 * bootstrap barriers).
 *
 * Under a launcher's PMIx server the channel is PMIx instead (pmix.h):
 * each control operation is a put, a fence that collects and local gets,
 * and there is no star and no rendezvous socket. The functions below
 * behave the same either way.
 *
 * What the job is (struct xpi_boot_opts) comes either from the launcher's
 * environment or from the program (xp_init_rank: a rank, a size and a
 * unique id, unique_id.h).
 *
 * From the environment: the launcher that started the process, and its
 * rank, size and rendezvous address, as launcher.h reads them (precedence
 * xport, Open MPI, MPICH/Intel MPI, torchrun, Slurm; a warning names
 * launchers that disagree; the address from XP_ADDR, else MASTER_ADDR on
 * MASTER_PORT + 1, else under Slurm derived from the step; see
 * docs/LAUNCHERS.md). The job key is XP_JOB_KEY (the options' job_key;
 * unset: a warning, and the key of the empty string, so jobs that set
 * different keys still refuse each other).
 *
 * XP_ADDR is "host:port" or "[ipv6]:port": where rank 0 listens and every
 * other rank connects. Rank 0 binds exactly that address when the host is
 * an address literal, and the wildcard address of its family on that port
 * when it is a name (a name may resolve to a loopback address on rank 0's
 * own host, as Debian's 127.0.1.1 does).
 *
 *   XP_BOOT_LISTEN_FD    rank 0 only: a socket the launcher already bound to
 *                        the rendezvous port (and may have set listening),
 *                        used instead of binding one. A launcher that holds
 *                        the port from before it starts the ranks has no
 *                        race for a free port and lets ranks connect before
 *                        rank 0 runs (xprun does this). The bootstrap takes
 *                        it over and closes it once the job has formed.
 *
 * From a unique id: rank 0's address and the key are the id's; launcher
 * variables and XP_JOB_KEY are not read. Rank 0 serves on the socket
 * xp_get_unique_id left in this process, as on XP_BOOT_LISTEN_FD, or
 * binds the id's address and port (retrying while the port is in use, as
 * the process that made the id may not have let go of it yet). A rank
 * other than 0 in the process that made the id closes that socket.
 *
 * The options' other fields (init.c fills them from XP_BOOT_TIMEOUT_MS and
 * XP_SOCKET_IFNAME):
 *   boot_timeout_ms      bound on forming the job and on each control
 *                        operation (0: timeout_ms)
 *   socket_ifname        the interface whose address a rank publishes for
 *                        its listeners (xpi_boot_local_addr); NULL: the
 *                        local address of its connection to rank 0
 *
 * Forming the job: rank 0 accepts connections and runs the job-key
 * handshake (auth.h, bound to rank 0's port) on all of them at once, each
 * with its own 3 s deadline, at most size - 1 + 64 half-open (the oldest
 * dropped beyond), until size - 1 ranks have joined (acceptor.h): no
 * number of idle or slow strangers holds up a real rank. A connection that
 * fails is logged and closed and takes no rank's place; a second
 * connection for a rank that has already joined is refused the same way.
 * In its handshake rank 0 sends each rank, authenticated, the random nonce
 * that names the job (xpi_boot_job_id). Every other rank connects to rank
 * 0, retrying while rank 0 is not listening yet or resets the connection
 * before it is authenticated, and runs the handshake. Everything is
 * bounded by the timeout. Without a job key rank 0 warns once, naming the
 * address it listens on; XP_JOB_KEY_REQUIRED=on makes a missing key an
 * error on every rank.
 *
 * Control messages (after the handshake), big-endian: a 16-byte header
 *   op (2: 1 contribution, 2 table, 3 abort), code (2: errno of an abort),
 *   sequence number of the operation (4), payload length (8)
 * and the payload. If an operation fails at rank 0 (a rank died, was late,
 * or disagreed on the length or sequence), rank 0 sends an abort naming the
 * cause to every other rank, so they fail at once instead of waiting out
 * the timeout.
 *
 * A boot object is used by one thread at a time. Functions return 0 or a
 * negative errno; every failure is logged and becomes the thread's error
 * detail (xp_error_detail), naming this rank, the peer rank and address.
 */
#ifndef XPI_BOOTSTRAP_H
#define XPI_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct xpi_boot;

/* Bytes of a job's identity (xpi_boot_job_id). */
#define XPI_BOOT_JOB_ID_LEN 32

/* xpi_boot_create() found no launcher variables, or a job of one rank. */
#define XPI_BOOT_SINGLETON 1

/* --- control messages: a pure pack/parse pair of the header ------------ */

#define XPI_BOOT_HDR_LEN 16
/* The longest text an abort carries. */
#define XPI_BOOT_ABORT_TEXT_MAX 512

enum xpi_boot_op {
	XPI_BOOT_OP_GATHER = 1, /* a rank's contribution, to rank 0 */
	XPI_BOOT_OP_TABLE = 2,  /* rank 0's result, to every rank */
	XPI_BOOT_OP_ABORT = 3,  /* rank 0 stopped the job: code and text */
};

struct xpi_boot_hdr {
	uint16_t op;   /* enum xpi_boot_op */
	uint16_t code; /* ABORT: the errno the job failed with */
	uint32_t seq;  /* the control operation's sequence number */
	uint64_t len;  /* payload bytes that follow */
};

/* Writes @h as the XPI_BOOT_HDR_LEN wire bytes. Pure. */
void xpi_boot_hdr_write(const struct xpi_boot_hdr *h, uint8_t out[XPI_BOOT_HDR_LEN]);

/*
 * Parses a control message header from @len bytes at @buf into @out: the
 * op must be known, and an abort must carry an errno (1 to 4095) and at
 * most XPI_BOOT_ABORT_TEXT_MAX bytes of text. Whether the sequence number
 * and length are the ones expected is the caller's to check. Returns 0,
 * -EAGAIN if @len < XPI_BOOT_HDR_LEN, or -EPROTO with *@why (if not NULL)
 * saying what was wrong. Pure.
 */
int xpi_boot_hdr_parse(const uint8_t *buf, size_t len, struct xpi_boot_hdr *out, const char **why);

struct xp_unique_id;

/* What xpi_boot_create needs to know; see the top of this file. */
struct xpi_boot_opts {
	int timeout_ms;            /* the context's timeout, > 0 */
	int boot_timeout_ms;       /* XP_BOOT_TIMEOUT_MS, or 0: timeout_ms */
	const char *job_key;       /* XP_JOB_KEY, or NULL (warned); not with an id */
	const char *socket_ifname; /* XP_SOCKET_IFNAME, or NULL */
	bool require_key;          /* XP_JOB_KEY_REQUIRED: no job_key fails (-EACCES) */
	bool quiet;                /* joining only to leave (settings refused): no key warning */
	/* A job the program describes (xp_init_rank) instead of a launcher: */
	bool explicit_job;
	int rank, size;
	const struct xp_unique_id *id; /* may be NULL only with size 1 */
};

/* Fills @o for a job from the environment: XP_JOB_KEY, XP_SOCKET_IFNAME,
 * XP_BOOT_TIMEOUT_MS (a malformed one is warned about and ignored), and
 * @timeout_ms. Defined in init.c. */
void xpi_boot_opts_from_env(struct xpi_boot_opts *o, int timeout_ms);

/*
 * Forms this process's job from the environment, or from @o's rank, size
 * and id when @o->explicit_job. Blocks until the job has formed (every rank
 * joined rank 0), at most the boot timeout.
 *
 * Returns 0 and *@out (the caller's; xpi_boot_destroy), or
 * XPI_BOOT_SINGLETON with *@out untouched: no launcher variables, or a size
 * of 1; the caller runs a job of one rank without networking. Or:
 *   -EINVAL      a malformed or missing variable (the log names it and its
 *                value), or a bad rank, size or unique id (the log says
 *                what is wrong with it)
 *   -EACCES      rank 0 and this rank have different job keys ("wrong job
 *                key"); rank 0 itself never fails for this, it refuses
 *                the connection and waits for the right process
 *   -EPROTO      rank 0 (or whoever listens there) is not of this job:
 *                another job size, protocol version, or a duplicate rank
 *   -ETIMEDOUT   rank 0 not reached, or (rank 0) ranks missing, in time;
 *                the message names the address and the missing ranks
 *   -ECONNRESET  rank 0 closed the connection while this rank joined
 *   -EADDRINUSE, -EADDRNOTAVAIL  rank 0 cannot listen on the address
 *   -EAGAIN      rank 0 could not resolve its host name for now (the other
 *                ranks retry that until the timeout)
 *   -ENODEV      XP_SOCKET_IFNAME names no interface with an address
 *   -EIO         libsodium could not be initialised (xpi_auth_init)
 *   -ENOMEM
 */
int xpi_boot_create(const struct xpi_boot_opts *o, struct xpi_boot **out);

/* The job key of a job from a unique id: from the id's 32 random key
 * bytes @uid_key, the XPI_AUTH_KEY_LEN bytes (auth.h) of @key. Pure. */
void xpi_boot_key_from_uid(const uint8_t *uid_key, uint8_t *key);

int xpi_boot_rank(const struct xpi_boot *b);
int xpi_boot_size(const struct xpi_boot *b);
/* The timeout the object applies to each operation, in ms. */
int xpi_boot_timeout_ms(const struct xpi_boot *b);
/* The job key (XPI_AUTH_KEY_LEN = 32 bytes), for the transports' own
 * handshakes. Owned by @b. */
const uint8_t *xpi_boot_key(const struct xpi_boot *b);

/* The job's identity (XPI_BOOT_JOB_ID_LEN bytes), the same on every rank
 * of the job and, with overwhelming probability, on no rank of another:
 * a hash of rank 0's rendezvous port and 32 random bytes rank 0 drew and
 * sent to each rank in its authenticated handshake (auth.h). Not secret.
 * Transports bind their own handshakes and keys to it, so two jobs that
 * share a key never accept each other's connections or datagrams. Owned
 * by @b. */
const uint8_t *xpi_boot_job_id(const struct xpi_boot *b);

/*
 * The address this rank should publish for its listeners, port 0: that of
 * XP_SOCKET_IFNAME (its first IPv4 address, else a global IPv6 address,
 * else a link-local one), or the local address of the connection to rank 0
 * (for rank 0, of its first accepted connection), which is an address the
 * other ranks can route to. Writes *@out and *@len. Returns 0. Never blocks.
 */
int xpi_boot_local_addr(const struct xpi_boot *b, struct sockaddr_storage *out, socklen_t *len);

/*
 * Gathers @len bytes from every rank into @all (size * @len bytes, in rank
 * order, the caller's) on every rank. Every rank must call it with the same
 * @len, in the same sequence of control operations. Blocks at most the
 * timeout. @mine and @all may be NULL when @len is 0.
 * Returns 0, -EINVAL, -ETIMEDOUT (names the late ranks), -ECONNRESET (rank
 * 0, or at rank 0 the named rank, died), -EPROTO (ranks disagree on @len or
 * on the sequence), or the code rank 0 aborted with. After a failure the
 * object is broken: every later operation returns the same code at once.
 */
int xpi_boot_allgather(struct xpi_boot *b, const void *mine, size_t len, void *all);

/* Returns when every rank has entered it: an allgather of nothing. */
int xpi_boot_barrier(struct xpi_boot *b);

/* Whether @mine is true on any rank, into *@any: an allgather of one byte
 * a rank, for a setup step to learn whether any rank needs the exchanges
 * that follow (which every rank must then make alike). As allgather. */
int xpi_boot_any(struct xpi_boot *b, bool mine, bool *any);

/* Closes the control connections and frees @b. NULL is ignored. Ranks still
 * in or entering an operation with this one fail with -ECONNRESET. */
void xpi_boot_destroy(struct xpi_boot *b);

#endif
