/* SPDX-License-Identifier: MIT */
/*
 * The io_uring TCP transport: internal structures shared by its files.
 *
 * One io_uring per rank, driven by the owner of the rank's engine. Two
 * connections per peer, made when the pair is first needed (tcp_wire.c):
 *  - the control channel carries framed messages (wire.h): eager messages,
 *    rendezvous announcements (RTS), clear-to-send (CTS), credit returns.
 *    It is read with one multishot recv into buffers the kernel picks from
 *    a provided-buffer ring filled from the rank's registered pool; a long
 *    eager payload that lies within one such buffer may reach the engine as
 *    a view of it, with no copy (XPI_TCP_VIEW_MIN below says when).
 *  - the bulk channel carries rendezvous payloads. The receiver asks for
 *    them (CTS) in the order it posts targeted recvs, so each payload is
 *    read straight into the receive buffer the user posted.
 * Sends on a channel are serialized (one in flight) and coalesced: frames
 * queued meanwhile go out together in the next send.
 */
#ifndef XPI_TCP_H
#define XPI_TCP_H

#include <liburing.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "../core/compiler.h"
#include "../core/dlist.h"
#include "../core/engine.h"
#include "../core/wire.h"
#include "../job/auth.h"

/* The largest eager payload a frame may carry (a receiver refuses more). */
#define XPI_TCP_MAX_EAGER (1u << 20)
#define XPI_TCP_TX_CAP (512u << 10)
/* The largest eager payload we send: its frame is queued whole in the
 * control queue, so it must fit there, and in half of it so that one can be
 * queued while the one before is still in the kernel's hands. Longer
 * messages go by rendezvous, whatever threshold the program set
 * (xpi_tcp_ops.eager_max tells the engine). */
#define XPI_TCP_EAGER_SEND_MAX (XPI_TCP_TX_CAP / 2 - XPI_FRAME_HDR_LEN)
#define XPI_TCP_BR_ENTRIES 128u
#define XPI_TCP_BGID 7
#define XPI_TCP_CHUNK 16384u
/*
 * Received chunks go back into the buffer ring as soon as they are parsed,
 * so the control channels never depend on the pool, nor on what the program
 * holds. An eager payload of XPI_TCP_VIEW_MIN bytes or more lying within one
 * chunk may instead reach the engine as a view of it (a pooled receive then
 * gets it with no copy), which keeps the chunk out of the ring until the
 * view is released: at most XPI_TCP_LENT_MAX chunks at a time, each
 * replaced in the ring by a spare taken from the pool first. Shorter
 * payloads, and any once that many chunks are lent, are copied by the
 * engine (XPI_MSG_INLINE), into the receive or, if none is posted yet, into
 * a descriptor charged to the sender's eager credit: so the unexpected bound
 * bounds what small messages pin, and the ring never dries up.
 */
#define XPI_TCP_VIEW_MIN 4096u
#define XPI_TCP_LENT_MAX 32u

enum tcp_op {
	TCP_OP_RECV_CTL = 1,
	TCP_OP_SEND_CTL,
	TCP_OP_RECV_BULK,
	TCP_OP_SEND_BULK,
	TCP_OP_CANCEL,
	TCP_OP_SEND_BULK_ZC, /* user_data carries a zero-copy slot, not the generation */
	TCP_OP_WIRE,         /* a connection being made (tcp_wire.c): its slot and tag */
	TCP_OP_LISTEN,       /* the listener has connections to accept */
};

/* The two connections of a pair (tcp_setup.c, tcp_wire.c). */
enum { CH_CTL = 0, CH_BULK = 1 };

/* Where a pair stands (tcp_wire.c): connections are made on first need. */
enum tcp_wire_state {
	TW_IDLE = 0, /* nothing yet */
	TW_OUT,      /* we are connecting (w_ctl once our control one was taken) */
	TW_IN,       /* we took the peer's control connection; its bulk one follows */
	TW_WAIT_IN,  /* the peer refused ours (it connects, as the lower rank) */
	TW_READY,    /* both connections made: fd_ctl and fd_bulk serve messages */
};

/* What a rank publishes about its TCP listener (tcp_setup.c). */
#define XPI_TCP_CARD_LEN 24

/* Kernel 6.2 uapi, newer than Debian 12's liburing 2.3 headers: ask the
 * notification to say whether the kernel had to copy after all. Older
 * kernels refuse the flag with -EINVAL; the probe in tcp_uring.c checks. */
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

/* Zero-copy bulk sends whose notification may be outstanding, per connection. */
#define XPI_TCP_ZC_SLOTS 16
/* Below this a zero-copy send costs more (page pinning, notification) than
 * the copy it saves, even on NICs where it pays for large payloads. */
#define XPI_TCP_ZC_MIN (64u << 10)
/* tl_deadline of a zero-copy send whose connection failed before all its
 * bytes went out (tcp_conn_fail): it fails when its notification comes. */
#define XPI_TCP_ZC_CUT_OFF INT64_MIN
/* Bulk sockets' buffer sizes where the host allows them (tcp_setup.c
 * says why the send buffer is the smaller). */
#define XPI_TCP_SNDBUF_AUTO (512u << 10)
#define XPI_TCP_RCVBUF_AUTO (1u << 20)

/* A rendezvous payload the receiver expects on the bulk channel. */
struct tcp_bulk_rx {
	struct xpi_dlink link;
	xp_request_t *rreq;
	uint8_t *dst;
	uint64_t cap; /* bytes that go to dst; the rest is read and dropped */
	uint64_t len;
	uint64_t id;
	bool cts_queued; /* its clear-to-send is in the control queue */
};

/* The part of a pair that is an endpoint's (tcp_ep.c): how it proves
 * itself, and how it ends. */
struct tcp_ep {
	/* The connecting side: the listener's address. */
	struct sockaddr_storage addr;
	socklen_t addrlen;
	/* The key both sides prove (from the listener's secret and the job
	 * key), and the handshake's arguments made of it. */
	uint8_t key[XPI_AUTH_KEY_LEN];
	struct xpi_auth_args auth;
	/* Names the pair's two connections, so the listener puts the bulk
	 * one with its control one. */
	uint8_t id[16];
	/* The accepting side: the listener it came through, until the pair
	 * is made and handed to it (-1 after, and on the connecting side). */
	int lsn;
	/* Why it could not be made (xp_ep_ready), 0 if it was or is being. */
	int err;
	/* xp_ep_close: its goodbye is on its way, then it is shut, then freed. */
	bool closing;
	int64_t close_deadline;
};

/* A listener of endpoints (tcp_ep.c): its own port and secret. */
struct tcp_ep_listener {
	int fd;
	struct xp_listener *pub;
	uint8_t key[XPI_AUTH_KEY_LEN];
	struct xpi_auth_args auth;
	bool armed;
};

struct tcp_conn {
	struct xpi_tcp *tcp;
	int peer;
	struct tcp_ep *ep;   /* NULL: a pair of the job's ranks */
	int fd_ctl, fd_bulk; /* -1 until the pair is made (TW_READY) */
	uint8_t wstate;      /* enum tcp_wire_state */
	int w_ctl, w_bulk;   /* connections made while the pair is being made */
	int64_t w_deadline;  /* of the pair being made (clock.h ns) */
	int64_t w_started;   /* when it was first needed, for the debug log */
	uint32_t gen;        /* tags this connection's completions */
	bool dead;
	bool bye;     /* the peer said goodbye: its EOF is no error */
	int inflight; /* operations the kernel still holds */

	/* Control channel, sending: bytes [tx_head, tx_tail) of tx_buf are
	 * queued; tx_busy bytes from tx_head are in the kernel's hands. */
	uint8_t *tx_buf;
	size_t tx_head, tx_tail, tx_busy;
	/* A send(2) of ours went out since the last progress call: frames
	 * queued meanwhile wait for that call (tcp_ctl_release_holds) and go
	 * together, as they would behind a send in flight. */
	bool tx_held;
	uint64_t credit_told;     /* what we last told the peer we consumed */
	uint64_t next_id;         /* rendezvous ids of our sends */
	struct xpi_dlink rts_out; /* our sends announced and not yet asked for */

	/* Control channel, receiving. */
	bool recv_armed;
	uint8_t hdr[XPI_FRAME_HDR_LEN];
	size_t hdr_have;
	struct xpi_frame frame; /* the frame whose payload is being read */
	bool in_payload;
	uint8_t *asm_buf; /* a payload that spans received chunks */
	size_t asm_have;

	/* Bulk channel, sending: sends whose payload the peer asked for. */
	struct xpi_dlink bulk_tx;
	bool bulk_tx_busy;
	/* IORING_OP_SENDMSG_ZC for payloads of XPI_TCP_ZC_MIN and more: the
	 * kernel sends from the user's pages and says when it is done with
	 * them (a notification); the send completes only then, but the next
	 * send starts without waiting for it. */
	bool zc;
	int bulk_zc_slot; /* the slot of the send in flight, or -1 */
	/* The payload being sent cannot be pinned (a VM_PFNMAP mapping, as
	 * a dmabuf's or a device's): plain sends, which copy, for the rest
	 * of it. */
	bool bulk_tx_nozc;
	xp_request_t *zc_slot[XPI_TCP_ZC_SLOTS];
	/* The frame header a zero-copy send in that slot carries: the kernel
	 * reads it from here, like the payload from the user's pages, until
	 * the notification (retransmits, a peer slow to read), so it must not
	 * be bulk_tx_hdr, which the next send rewrites. */
	uint8_t zc_hdr[XPI_TCP_ZC_SLOTS][XPI_FRAME_HDR_LEN];
	struct xpi_dlink zc_wait; /* fully sent, waiting for notifications */
	unsigned zc_copied_run;   /* notifications in a row that say "copied" */
	uint8_t bulk_tx_hdr[XPI_FRAME_HDR_LEN];
	uint64_t bulk_tx_off; /* bytes of header + payload sent */
	struct iovec bulk_iov[2];
	struct msghdr bulk_msg;

	/* Bulk channel, receiving: payloads asked for, in the order the peer
	 * sends them; those whose CTS found the control queue full have it
	 * queued as soon as there is room, still in order. */
	struct xpi_dlink bulk_rx;
	unsigned cts_waiting;
	/* Answers to the peer's withdrawals (WITHDRAW_ACK) that found the
	 * control queue full, queued as soon as there is room, in order. */
	struct tcp_ack {
		uint64_t id;
		uint16_t flags;
	} * acks;
	unsigned nacks, acks_cap;
	bool bulk_rx_busy;
	uint8_t bulk_rx_hdr[XPI_FRAME_HDR_LEN];
	uint64_t bulk_rx_off; /* bytes of header + payload read */
};

struct xpi_tcp {
	xp_context_t *ctx;
	int tl_index;
	struct io_uring ring;
	unsigned ring_flags;
	bool ring_ok;
	/* DEFER_TASKRUN (XP_THREAD_FUNNELED): the ring's fd does not wake a
	 * poll for completions the kernel defers, so a sleep waits on this
	 * eventfd, which the ring signals while the sleep allows it. -1: none. */
	int evfd;
	/* DEFER_TASKRUN: the only thread the ring serves, as the address of
	 * its tcp_thread_mark (a TLS address costs no call; pthread_self does) */
	const void *ring_thread;
	bool wrong_thread_said; /* another thread came anyway: said once */
	int nconn;
	int *held; /* peers whose control queue is held (tx_held), nheld of them */
	int nheld;
	uint8_t *want; /* by rank: this transport serves it */
	/* Pairs made (TW_READY), in the order they were: what the loops over
	 * connections visit, so an idle job's cost does not grow with its size. */
	int *linked;
	int nlinked;
	/* Making connections on demand (tcp_wire.c). */
	uint8_t *cards; /* every rank's listener card, XPI_TCP_CARD_LEN each */
	struct xpi_auth_args auth;
	uint8_t key[XPI_AUTH_KEY_LEN]; /* the job key, kept: the bootstrap may go */
	uint8_t auth_bind[1 + 32];     /* auth.bind's bytes: 'T' and the job's identity */
	struct tcp_wire *wires;        /* connections being made; slots freed have gen 0 */
	int nwires, wires_cap;
	uint32_t wire_gen;
	int nhalf_open, max_half_open; /* accepted connections still authenticating */
	int ntransient;                /* pairs being made (TW_OUT, TW_IN, TW_WAIT_IN) */
	unsigned long refused;
	bool listen_armed;
	struct xpi_timer wire_timer; /* the earliest deadline of what is being made */
	/* By rank: a pair's state, made when the pair is first needed
	 * (tcp_conn_get: a send, a receive naming the peer, a connection
	 * from it), NULL until then, so a rank's memory grows with the peers
	 * it talks to (1.6 KiB each), not with the job. */
	struct tcp_conn **conns;
	int listen_fd;                       /* open for the job's life: pairs are made on need */
	struct sockaddr_storage listen_addr; /* where it listened */
	uint64_t credit_per_peer;
	uint64_t credit_seen; /* ctx->eager_returned_total at the last credit check */
	uint32_t max_eager;
	bool zc_supported;            /* the kernel has IORING_OP_SENDMSG_ZC */
	uint64_t zc_sends, zc_copied; /* zero-copy sends; those the kernel copied anyway */

	/* Provided buffers for the control channels' multishot recvs. */
	struct io_uring_buf_ring *br;
	size_t br_len;
	struct xp_buf *br_bufs[XPI_TCP_BR_ENTRIES]; /* by buffer id; NULL: empty */
	unsigned br_empty;                          /* ids waiting for a buffer */
	bool need_arm;                              /* a control recv stopped for want of buffers */
	struct xp_buf *lent[XPI_TCP_LENT_MAX];      /* chunks views were made of: ours too */
	unsigned nlent;
	struct xp_buf *spare; /* takes the ring place of the next chunk lent */
	/* DEFER_TASKRUN rings: the control stream is read with recv(2) when the
	 * kernel has work pending for the ring (tcp_ctl_recv_direct), into this
	 * chunk, from the connection that last had control data. direct_tried:
	 * the pending work has been tried once; the next look enters the ring. */
	struct xp_buf *direct;
	int direct_peer; /* -1: none yet */
	bool direct_tried;
	uint64_t direct_reads, ring_reads; /* control data read each way */
	uint8_t *drop;                     /* bytes read to be dropped */
	/* Endpoints' listeners, by index (the listener poll's user_data);
	 * NULL once closed, never reused. */
	struct tcp_ep_listener **lsns;
	int nlsns;
	int nclosing; /* endpoints' pairs closing (tcp_ep_finish) */
	/* Withdrawals asked of receivers (tcp_send_cancel) that a silent
	 * receiver must not hold up past the wait's deadline for long: this
	 * timer, at the earliest ask's deadline, withdraws those unanswered. */
	struct xpi_timer ask_timer;
};

/* How long a withdrawal waits for the receiver's answer before the sender
 * takes the message back by itself (tcp_send_cancel). A receiver that
 * progresses answers within a round trip; one that does not, is not
 * matching either, so withdrawing then rarely changes what it matches. */
#define XPI_TCP_ASK_GRACE_NS (20 * 1000000)

/* tcp_uring.c */
/* One per thread: its address names the thread (tcp_progress's check). */
extern _Thread_local char tcp_thread_mark __attribute__((tls_model("initial-exec")));
int tcp_ring_init(struct xpi_tcp *t, unsigned entries);
void tcp_ring_fini(struct xpi_tcp *t);
struct io_uring_sqe *tcp_sqe(struct xpi_tcp *t);
uint64_t tcp_udata(enum tcp_op op, const struct tcp_conn *c);
int tcp_br_init(struct xpi_tcp *t);
void tcp_br_refill(struct xpi_tcp *t);
struct xp_buf *tcp_br_take(struct xpi_tcp *t, unsigned bid);
bool tcp_br_may_lend(struct xpi_tcp *t);
void tcp_br_give_back(struct xpi_tcp *t, unsigned bid, struct xp_buf *chunk);
bool tcp_chunk_keep_lent(struct xpi_tcp *t, struct xp_buf *chunk);
void tcp_br_fini(struct xpi_tcp *t);

/* tcp_tx.c */
int tcp_ctl_queue(struct tcp_conn *c, const struct xpi_frame *f, const void *payload);
void tcp_ctl_flush(struct tcp_conn *c);
void tcp_ctl_release_holds(struct xpi_tcp *t);
void tcp_ctl_sent(struct tcp_conn *c, int res);
void tcp_bulk_start(struct tcp_conn *c);
void tcp_bulk_sent(struct tcp_conn *c, int res);
void tcp_bulk_zc_cqe(struct tcp_conn *c, unsigned slot, int res, unsigned flags);
void tcp_cts_queue_waiting(struct tcp_conn *c);
/* Queues withdrawal answer @ack now or, if the control queue is full, as
 * soon as it has room (tcp_ctl_sent). 0 or -ENOMEM. */
int tcp_ack_queue(struct tcp_conn *c, struct tcp_ack ack);

/* tcp_rx.c */
void tcp_ctl_arm(struct tcp_conn *c);
void tcp_ctl_received(struct tcp_conn *c, int res, unsigned flags);
int tcp_ctl_recv_direct(struct tcp_conn *c);
void tcp_bulk_arm(struct tcp_conn *c);
void tcp_bulk_received(struct tcp_conn *c, int res);
/* True while the armed recv of @c's bulk channel reads into the receive
 * buffer of @x, its first payload asked for: the kernel may write there
 * until that recv's completion has been reaped. */
bool tcp_bulk_rx_in_user(const struct tcp_conn *c, const struct tcp_bulk_rx *x);
/* The completion of the bulk recv of @c, a dead connection: the receive
 * conn_lost left waiting for it fails now. */
void tcp_bulk_received_dead(struct tcp_conn *c);

/* tcp_setup.c */
/* @peer's pair state, made now if it is not; NULL: no memory. */
struct tcp_conn *tcp_conn_get(struct xpi_tcp *t, int peer);
/* @peer's pair state if it was ever made, else NULL. */
static inline struct tcp_conn *tcp_conn_at(const struct xpi_tcp *t, int peer)
{
	return t->conns[peer];
}
int tcp_card_parse(const uint8_t card[XPI_TCP_CARD_LEN], struct sockaddr_storage *ss,
		   socklen_t *len);
void tcp_card_pack(const struct sockaddr_storage *ss, uint8_t card[XPI_TCP_CARD_LEN]);
/* The pair of @c has both connections: tunes them and readies @c to serve
 * messages (buffers, the control channel's armed receive). 0 or -ENOMEM. */
int tcp_conn_ready(struct xpi_tcp *t, struct tcp_conn *c);

/* tcp_wire.c: pairs made on demand. */
struct tcp_wire;
/* The engine wants to send to @c's peer, whose pair is not made: starts
 * making it (or goes on). -EAGAIN (retry later), or the error that failed
 * the peer (-ECONNRESET if it is lost). */
int tcp_wire_need(struct xpi_tcp *t, struct tcp_conn *c);
void tcp_wire_arm_listener(struct xpi_tcp *t);
void tcp_wire_listen_cqe(struct xpi_tcp *t, int res, unsigned flags);
void tcp_wire_cqe(struct xpi_tcp *t, uint64_t user_data);
void tcp_wire_step(struct xpi_tcp *t, int i);
void tcp_wire_timer_fire(struct xp_context *ctx, struct xpi_timer *timer);
/* @c's peer is lost: what was being made with it is closed. */
void tcp_wire_peer_lost(struct xpi_tcp *t, struct tcp_conn *c);
void tcp_wire_fini(struct xpi_tcp *t);

/* tcp_ep.c: endpoints (src/core/ep.h). */
/* Registers the endpoint ops with the context. */
void tcp_ep_attach(struct xpi_tcp *t);
/* The listener of endpoints @lsn has connections to accept. */
void tcp_ep_listen_cqe(struct xpi_tcp *t, int lsn, int res, unsigned flags);
/* Closes what is left of endpoints being closed. */
void tcp_ep_progress(struct xpi_tcp *t);
/* Closes endpoint slot @slot from inside the transport's progress (a pair
 * made that nobody will take). */
void tcp_ep_close_inside(struct xpi_tcp *t, int slot);
void tcp_ep_fini(struct xpi_tcp *t);

/* tcp_wire.c, for tcp_ep.c */
/* Accepts what waits on listener fd @fd: the job's (@lsn -1) or an
 * endpoints' listener. */
void tcp_wire_accept(struct xpi_tcp *t, int fd, int lsn);
/* Closes the connections being made for listener @lsn, accepted and
 * still proving themselves. */
void tcp_wire_drop_listener(struct xpi_tcp *t, int lsn);

/* tcp.c */
void tcp_conn_fail(struct tcp_conn *c, int err, const char *why);
/* Shuts @c's connections and fails what it holds (its peer is lost or
 * closed). */
void tcp_conn_shut(struct xpi_tcp *t, struct tcp_conn *c);
/* Fires at the earliest deadline of a withdrawal asked of a receiver
 * (tcp_send_cancel): takes back those still unanswered. */
void tcp_ask_timer_fire(struct xp_context *ctx, struct xpi_timer *timer);

#endif
