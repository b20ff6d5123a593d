/* SPDX-License-Identifier: MIT */
/*
 * Setting up and tearing down the TCP transport: a listener on the address
 * the bootstrap chose, open for the job's life, and the listeners'
 * addresses exchanged through the bootstrap. The two authenticated
 * connections of a pair are made when the pair is first needed
 * (tcp_wire.c), not here.
 */
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../job/acceptor.h"
#include "../job/auth.h"
#include "../job/backend.h"
#include "../job/bootstrap.h"
#include "../select/card.h"
#include "../core/clock.h"
#include "../core/log.h"
#include "../job/sock.h"
#include "tcp.h"
#include "tcp_setup.h"

/* What a rank publishes about its TCP listener: version, family, port and
 * address, in fixed places (network byte order for port and address). */
#define CARD_LEN XPI_TCP_CARD_LEN
#define CARD_VERSION 1

void tcp_card_pack(const struct sockaddr_storage *ss, uint8_t card[CARD_LEN])
{
	memset(card, 0, CARD_LEN);
	card[0] = CARD_VERSION;
	card[1] = (uint8_t)ss->ss_family;
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss;
		memcpy(card + 2, &a->sin_port, 2);
		memcpy(card + 4, &a->sin_addr, 4);
	} else {
		const struct sockaddr_in6 *a = (const void *)ss;
		memcpy(card + 2, &a->sin6_port, 2);
		memcpy(card + 4, &a->sin6_addr, 16);
	}
}

int tcp_card_parse(const uint8_t card[CARD_LEN], struct sockaddr_storage *ss, socklen_t *len)
{
	memset(ss, 0, sizeof(*ss));
	if (card[0] != CARD_VERSION)
		return -EPROTO;
	if (card[1] == AF_INET) {
		struct sockaddr_in *a = (void *)ss;
		a->sin_family = AF_INET;
		memcpy(&a->sin_port, card + 2, 2);
		memcpy(&a->sin_addr, card + 4, 4);
		*len = sizeof(*a);
		return 0;
	}
	if (card[1] == AF_INET6) {
		struct sockaddr_in6 *a = (void *)ss;
		a->sin6_family = AF_INET6;
		memcpy(&a->sin6_port, card + 2, 2);
		memcpy(&a->sin6_addr, card + 4, 16);
		*len = sizeof(*a);
		return 0;
	}
	return -EPROTO;
}

/* A number from a /proc/sys file, or -1. */
static long long proc_sys_value(const char *path)
{
	long long v = -1;
	FILE *f = fopen(path, "re");
	if (f != NULL) {
		if (fscanf(f, "%lld", &v) != 1)
			v = -1;
		fclose(f);
	}
	return v;
}

/* Send and receive buffer sizes of a socket; 0 leaves one to the kernel. */
struct sockbufs {
	int snd, rcv;
};

/*
 * The send and receive buffers of bulk sockets, or zeros to leave both to
 * the kernel's autotuning. Autotuning grows a socket's buffers with the rate
 * it sees, so a rendezvous payload that finds them small goes out in pieces,
 * each waiting for the reader: between two ranks of this 2-core machine a
 * 1 MiB allreduce took 410-545 us with autotuning and 257-302 us with
 * fixed buffers (perf/ results in the commit).
 *
 * The send buffer is the smaller on purpose. Over loopback the sender's
 * system call also runs the receiving side's TCP input while it holds its
 * socket, and acknowledgements that arrive meanwhile wait for it too: with
 * room for several payloads it copies and processes everything while the
 * receiver idles (1 MiB messages, one receive buffer: 7.5-7.9 GB/s with
 * 4m/4m). A send buffer of one such payload (512k, doubled by the kernel)
 * makes it stop and release the socket, and the receiver's CPU then pushes
 * the queued data as it acknowledges: 10.2-10.7 GB/s with 512k/1m, and 4
 * MiB messages 5.8 -> 9.1-9.8 GB/s (perf/compare-p2p.py rows, same run as
 * UCX's 8.4-9.0). A smaller receive buffer than the send buffer's double
 * throttles the sender (9.7 with 512k/768k).
 *
 * A fixed size the host clamps (net.core.rmem_max is 208 KiB on a stock
 * kernel) would be worse than autotuning, so auto fixes them only where
 * the host allows the whole of both; XP_TCP_SOCKBUF=N sets both to N.
 */
static struct sockbufs bulk_sockbufs(const xp_context_t *ctx)
{
	size_t want = ctx->cfg.tcp_sockbuf;
	if (want == SIZE_MAX)
		return (struct sockbufs){ 0, 0 };
	if (want != 0)
		return (struct sockbufs){ (int)want, (int)want };
	if (proc_sys_value("/proc/sys/net/core/rmem_max") < (long long)XPI_TCP_RCVBUF_AUTO ||
	    proc_sys_value("/proc/sys/net/core/wmem_max") < (long long)XPI_TCP_SNDBUF_AUTO)
		return (struct sockbufs){ 0, 0 };
	return (struct sockbufs){ XPI_TCP_SNDBUF_AUTO, XPI_TCP_RCVBUF_AUTO };
}

/* Settings of a new connection of channel @ch (bulk sockets get their
 * buffers, control ones keep autotuning). */
static void tune(int fd, const xp_context_t *ctx, int ch)
{
	int timeout_ms = ctx->cfg.timeout_ms;
	struct sockbufs bufs = ch == CH_BULK ? bulk_sockbufs(ctx) : (struct sockbufs){ 0, 0 };
	int one = 1;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* A peer that stops answering (host gone, cable pulled) fails the
	 * connection within the job's timeout instead of TCP's 15 minutes. */
	unsigned int ms = (unsigned int)timeout_ms;
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ms, sizeof(ms));
	if (bufs.snd > 0)
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bufs.snd, sizeof(bufs.snd));
	if (bufs.rcv > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &bufs.rcv, sizeof(bufs.rcv));
}

/* What this rank's handshakes prove (auth.h): the job key, bound to the
 * job's identity, so that a rank of another job with the same key is
 * refused. The connecting side sends its channel, authenticated. */
static void handshake_args(struct xpi_tcp *t, struct xpi_boot *boot)
{
	t->auth_bind[0] = 'T';
	memcpy(t->auth_bind + 1, xpi_boot_job_id(boot), XPI_BOOT_JOB_ID_LEN);
	t->auth = (struct xpi_auth_args){ .key = t->key,
					  .my_rank = t->ctx->rank,
					  .size = t->ctx->size,
					  .bind = { t->auth_bind, 1 + XPI_BOOT_JOB_ID_LEN } };
}

/* True if @ss is this host: loopback, or the address we listen on. There a
 * zero-copy send loses (the data is copied on delivery anyway: measured on
 * the 2-core development machine over loopback, 1.0 against 3.4 GB/s at 64 KiB). */
static bool same_host(const struct sockaddr_storage *ss, const struct sockaddr_storage *mine)
{
	if (ss->ss_family == AF_INET) {
		const struct sockaddr_in *a = (const void *)ss, *b = (const void *)mine;
		if ((ntohl(a->sin_addr.s_addr) >> 24) == 127)
			return true;
		return mine->ss_family == AF_INET && a->sin_addr.s_addr == b->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *a = (const void *)ss, *b = (const void *)mine;
	if (IN6_IS_ADDR_LOOPBACK(&a->sin6_addr))
		return true;
	return mine->ss_family == AF_INET6 &&
	       memcmp(&a->sin6_addr, &b->sin6_addr, sizeof(a->sin6_addr)) == 0;
}

/* XP_TCP_ZC=on|off|auto (default): auto uses zero-copy sends for large
 * payloads to peers on other hosts, where real NICs make it pay. */
static bool want_zc(struct xpi_tcp *t, const struct sockaddr_storage *peer,
		    const struct sockaddr_storage *mine)
{
	if (!t->zc_supported)
		return false;
	if (t->ctx->cfg.tcp_zc == XP_TCP_ZC_ON)
		return true;
	if (t->ctx->cfg.tcp_zc == XP_TCP_ZC_OFF)
		return false;
	return !same_host(peer, mine);
}

/* Listens where the bootstrap says this rank is reached, and learns where
 * every other rank listens. The pairs are made later, on need. */
static int listen_and_publish(struct xpi_tcp *t, struct xpi_boot *boot)
{
	xp_context_t *ctx = t->ctx;
	memcpy(t->key, xpi_boot_key(boot), XPI_AUTH_KEY_LEN);
	handshake_args(t, boot);
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	int rc = xpi_boot_local_addr(boot, &ss, &sslen);
	if (rc < 0)
		return rc;
	/* The backlog bounds only connections not accepted yet: a rank that
	 * every other one needs at once (a root) holds them until its next
	 * progress. The kernel caps it at net.core.somaxconn. */
	rc = xpi_sock_listen((const struct sockaddr *)&ss, sslen, 2 * ctx->size + 8, &t->listen_fd);
	if (rc < 0)
		return rc;
	sslen = sizeof(ss);
	if (getsockname(t->listen_fd, (struct sockaddr *)&ss, &sslen) < 0)
		return -errno;
	t->listen_addr = ss;
	uint8_t mine[CARD_LEN];
	tcp_card_pack(&ss, mine);
	t->cards = malloc((size_t)ctx->size * CARD_LEN);
	if (t->cards == NULL)
		return -ENOMEM;
	return xpi_boot_allgather(boot, mine, CARD_LEN, t->cards);
}

int tcp_conn_ready(struct xpi_tcp *t, struct tcp_conn *c)
{
	tune(c->fd_ctl, t->ctx, CH_CTL);
	tune(c->fd_bulk, t->ctx, CH_BULK);
	struct sockaddr_storage ps;
	socklen_t pslen = sizeof(ps);
	/* Where the peer is: its card, or an endpoint's own connection. */
	if (c->ep != NULL ? getpeername(c->fd_ctl, (struct sockaddr *)&ps, &pslen) == 0 :
			    tcp_card_parse(t->cards + (size_t)c->peer * CARD_LEN, &ps, &pslen) == 0)
		c->zc = want_zc(t, &ps, &t->listen_addr);
	c->tx_buf = malloc(XPI_TCP_TX_CAP);
	c->asm_buf = malloc(t->max_eager);
	if (c->tx_buf == NULL || c->asm_buf == NULL)
		return -ENOMEM;
	tcp_ctl_arm(c);
	io_uring_submit(&t->ring);
	return 0;
}

/* The transport's state, for a context of @ctx->npeers peers (ranks and
 * endpoint slots), listening nowhere yet. */
static int tcp_create(xp_context_t *ctx, struct xpi_tcp **out)
{
	struct xpi_tcp *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return -ENOMEM;
	int n = ctx->npeers;
	t->ctx = ctx;
	t->ask_timer.fire = tcp_ask_timer_fire;
	t->listen_fd = -1;
	t->evfd = -1;
	t->direct_peer = -1;
	t->nconn = n;
	t->max_eager = XPI_TCP_MAX_EAGER;
	t->credit_per_peer = ctx->eager_credit_per_peer;
	t->want = calloc((size_t)n, 1);
	t->conns = calloc((size_t)n, sizeof(*t->conns));
	t->linked = calloc((size_t)n, sizeof(*t->linked));
	t->wire_timer.fire = tcp_wire_timer_fire;
	t->max_half_open = (n < 1024 ? n : 1024) + 64;
	t->held = calloc((size_t)n, sizeof(*t->held));
	t->drop = malloc(XPI_TCP_MAX_EAGER);
	int rc = -ENOMEM;
	if (t->want == NULL || t->conns == NULL || t->held == NULL || t->drop == NULL ||
	    t->linked == NULL)
		goto fail;
	/* Room for each pair's few operations in flight; endpoints beyond
	 * 256 share it (a full ring is retried from progress). */
	int slots = n - ctx->size < 256 ? n - ctx->size : 256;
	rc = tcp_ring_init(t, 64 + 4 * (unsigned)(ctx->size + slots));
	if (rc < 0)
		goto fail;
	rc = tcp_br_init(t);
	if (rc < 0)
		goto fail;
	*out = t;
	return 0;
fail:
	tcp_setup_destroy(t);
	return rc;
}

/* Adds @t to its context, and its endpoints' ops where it has slots. */
static int tcp_add(struct xpi_tcp *t)
{
	t->tl_index = t->ctx->ntls;
	int rc = xpi_context_add_tl(t->ctx, &xpi_tcp_ops, t);
	if (rc == 0)
		tcp_ep_attach(t);
	return rc;
}

int xpi_tcp_open(xp_context_t *ctx, const struct sockaddr_storage *where)
{
	if (ctx->ep_ops != NULL)
		return 0; /* the job's, which makes its endpoints too */
	struct xpi_tcp *t;
	int rc = tcp_create(ctx, &t);
	if (rc < 0)
		return rc;
	/* No job: no key from a bootstrap, only the program's, and no
	 * listener of the job's (endpoints' listeners have their own). */
	if (ctx->cfg.has_job_key)
		rc = xpi_auth_key_from_string(ctx->cfg.job_key, t->key);
	t->listen_addr = *where;
	if (rc == 0)
		rc = tcp_add(t);
	if (rc < 0)
		tcp_setup_destroy(t);
	return rc;
}

int xpi_tcp_attach(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *want)
{
	int nwant = 0;
	for (int p = 0; p < ctx->size; p++)
		nwant += p != ctx->rank && want[p];
	if (nwant == 0) {
		/* Nothing for us to serve, but the address exchange is
		 * collective: take part with an empty card. */
		uint8_t none[CARD_LEN] = { 0 };
		uint8_t *all = malloc((size_t)ctx->size * CARD_LEN);
		int rc = all == NULL ? -ENOMEM : xpi_boot_allgather(boot, none, CARD_LEN, all);
		free(all);
		return rc;
	}
	struct xpi_tcp *t;
	int rc = tcp_create(ctx, &t);
	if (rc < 0)
		return rc;
	for (int p = 0; p < ctx->size; p++)
		t->want[p] = p != ctx->rank && want[p];
	rc = listen_and_publish(t, boot);
	if (rc < 0)
		goto fail;
	tcp_wire_arm_listener(t);
	/* A pair that only watches the peer (its messages go over rdma or
	 * dpdk) carries nothing that would make it: the lower rank makes it
	 * now, and the higher waits for it; unless the lane's own pair is
	 * made on first need (XPI_WANT_ON_NEED), whose sideband messages make
	 * this one first. */
	for (int p = ctx->rank + 1; p < ctx->size; p++)
		if (want[p] == XPI_WANT_WATCH) {
			struct tcp_conn *c = tcp_conn_get(t, p);
			rc = c != NULL ? 0 : -ENOMEM;
			if (rc < 0)
				goto fail;
			(void)tcp_wire_need(t, c);
		}
	io_uring_submit(&t->ring);
	rc = tcp_add(t);
	if (rc < 0)
		goto fail;
	if (xpi_debug_on("transport"))
		xpi_log(XPI_LOG_INFO,
			"rank %d: tcp for %d peers, connected on first need; io_uring flags 0x%x "
			"(kernel %s SENDMSG_ZC)",
			ctx->rank, nwant, t->ring_flags, t->zc_supported ? "has" : "lacks");
	return 0;
fail:
	tcp_setup_destroy(t);
	return rc;
}

struct tcp_conn *tcp_conn_get(struct xpi_tcp *t, int peer)
{
	if (t->conns[peer] != NULL)
		return t->conns[peer];
	struct tcp_conn *c = calloc(1, sizeof(*c));
	if (c == NULL)
		return NULL;
	c->tcp = t;
	c->gen = 1;
	c->peer = peer;
	c->fd_ctl = c->fd_bulk = -1;
	c->w_ctl = c->w_bulk = -1;
	xpi_dlist_init(&c->rts_out);
	xpi_dlist_init(&c->bulk_tx);
	xpi_dlist_init(&c->zc_wait);
	c->bulk_zc_slot = -1;
	xpi_dlist_init(&c->bulk_rx);
	t->conns[peer] = c;
	return c;
}

void tcp_setup_destroy(struct xpi_tcp *t)
{
	if (t == NULL)
		return;
	xpi_timer_cancel(t->ctx, &t->ask_timer);
	if (t->zc_sends != 0 && xpi_debug_on("transport"))
		xpi_log(XPI_LOG_INFO,
			"rank %d: %llu zero-copy sends, %llu copied by the kernel anyway",
			t->ctx->rank, (unsigned long long)t->zc_sends,
			(unsigned long long)t->zc_copied);
	if (t->direct_reads != 0 && xpi_debug_on("transport"))
		xpi_log(XPI_LOG_INFO,
			"rank %d: control data read %llu times with recv(2), %llu through the ring",
			t->ctx->rank, (unsigned long long)t->direct_reads,
			(unsigned long long)t->ring_reads);
	/* Say goodbye, so peers take the coming end of stream as a close,
	 * after what waits behind a send of ours. */
	if (t->held != NULL)
		tcp_ctl_release_holds(t);
	for (int p = 0; t->conns != NULL && p < t->nconn; p++) {
		struct tcp_conn *c = t->conns[p];
		if (c != NULL && c->fd_ctl >= 0 && !c->dead && c->tx_buf != NULL) {
			/* An endpoint's peer waits for this many messages. */
			struct xpi_frame f = { .type = XPI_FRAME_BYE,
					       .id = t->ctx->peers[p].send_seq };
			if (tcp_ctl_queue(c, &f, NULL) == 0)
				tcp_ctl_flush(c);
		}
	}
	if (t->ring_ok) {
		/* Bounded: what is still queued after this is lost with the job. */
		int64_t until = xpi_now_ns() + 200000000;
		io_uring_submit(&t->ring);
		for (;;) {
			bool busy = false;
			if (t->held != NULL)
				tcp_ctl_release_holds(t);
			io_uring_submit(&t->ring);
			for (int p = 0; t->conns != NULL && p < t->nconn; p++) {
				const struct tcp_conn *c = t->conns[p];
				busy |= c != NULL && c->tx_tail != c->tx_head && !c->dead;
			}
			if (!busy || xpi_now_ns() > until)
				break;
			struct io_uring_cqe *cqe;
			struct __kernel_timespec ts = { .tv_nsec = 10000000 };
			if (io_uring_wait_cqe_timeout(&t->ring, &cqe, &ts) == 0) {
				uint64_t ud = cqe->user_data;
				int peer = (int)(uint32_t)(ud >> 32 & 0xffffff);
				if ((ud >> 56) == TCP_OP_SEND_CTL && peer < t->nconn &&
				    t->conns[peer] != NULL)
					tcp_ctl_sent(t->conns[peer], cqe->res);
				io_uring_cqe_seen(&t->ring, cqe);
			}
		}
	}
	for (int p = 0; t->conns != NULL && p < t->nconn; p++) {
		struct tcp_conn *c = t->conns[p];
		if (c == NULL)
			continue;
		c->dead = true; /* no failure reports from here on */
		if (c->fd_ctl >= 0)
			close(c->fd_ctl);
		if (c->fd_bulk >= 0)
			close(c->fd_bulk);
		struct xpi_dlink *l;
		while ((l = xpi_dlist_pop_head(&c->rts_out)) != NULL)
			xpi_request_put(xpi_container_of(l, xp_request_t, tl_link));
		while ((l = xpi_dlist_pop_head(&c->bulk_tx)) != NULL)
			xpi_request_put(xpi_container_of(l, xp_request_t, tl_link));
		while ((l = xpi_dlist_pop_head(&c->zc_wait)) != NULL)
			xpi_request_put(xpi_container_of(l, xp_request_t, tl_link));
		while ((l = xpi_dlist_pop_head(&c->bulk_rx)) != NULL)
			free(xpi_container_of(l, struct tcp_bulk_rx, link));
		free(c->tx_buf);
		free(c->asm_buf);
		free(c->acks);
		free(c->ep);
	}
	tcp_ep_fini(t);
	tcp_wire_fini(t);
	tcp_br_fini(t);
	tcp_ring_fini(t);
	if (t->listen_fd >= 0)
		close(t->listen_fd);
	free(t->cards);
	free(t->linked);
	for (int p = 0; t->conns != NULL && p < t->nconn; p++)
		free(t->conns[p]);
	free(t->conns);
	free(t->held);
	free(t->drop);
	free(t->want);
	free(t);
}

/* Reachable where this rank's listeners are: the address family a peer
 * needs (card.h's TCP reach). The figures are this machine's measurements
 * (perf/compare-p2p.py on the 2-core development machine). */
static int tcp_card(xp_context_t *ctx, struct xpi_boot *boot, struct xpi_card_tl *entry,
		    const char **why)
{
	(void)ctx;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	if (xpi_boot_local_addr(boot, &ss, &len) < 0) {
		*why = "this rank has no listening address";
		return 1;
	}
	entry->lat_ns = 5000;
	entry->bw_mbps = 4000;
	entry->reach[0] = (uint8_t)ss.ss_family;
	entry->reach_len = 1;
	return 0;
}

/* TCP either reaches every peer it was asked for or fails the job: it is
 * the transport of last resort, with nothing after it to fall back to. */
static int tcp_attach(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *want, uint8_t *ok)
{
	int rc = xpi_tcp_attach(ctx, boot, want);
	for (int p = 0; rc == 0 && p < ctx->size; p++)
		ok[p] = p != ctx->rank && want[p];
	return rc;
}

/* io_uring can be set up and has the operations the transport uses; TCP
 * sockets can be made. Zero-copy sends are optional: said in the note. */
static int tcp_probe(char *note, size_t n)
{
	struct io_uring ring;
	int rc = io_uring_queue_init(8, &ring, 0);
	if (rc < 0) {
		snprintf(note, n, "io_uring cannot be set up: %s%s", strerrordesc_np(-rc),
			 rc == -EPERM  ? " (kernel.io_uring_disabled, or a seccomp filter)" :
			 rc == -ENOSYS ? " (a kernel without io_uring)" :
					 "");
		return 1;
	}
	struct io_uring_probe *probe = io_uring_get_probe_ring(&ring);
	bool ops = probe != NULL && io_uring_opcode_supported(probe, IORING_OP_RECV) &&
		   io_uring_opcode_supported(probe, IORING_OP_SEND) &&
		   io_uring_opcode_supported(probe, IORING_OP_PROVIDE_BUFFERS);
	bool zc = probe != NULL && io_uring_opcode_supported(probe, IORING_OP_SENDMSG_ZC);
	io_uring_free_probe(probe);
	io_uring_queue_exit(&ring);
	if (!ops) {
		snprintf(note, n, "this kernel's io_uring lacks send, receive or provided buffers");
		return 1;
	}
	int fd = socket(AF_INET6, SOCK_STREAM, 0);
	if (fd < 0)
		fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0) {
		snprintf(note, n, "cannot create a TCP socket: %s", strerrordesc_np(errno));
		return 1;
	}
	close(fd);
	snprintf(note, n, "io_uring; zero-copy sends %s", zc ? "available" : "not available");
	return 0;
}

const struct xpi_backend xpi_tcp_backend = {
	.name = "tcp",
	.type = XPI_TL_TCP,
	.ops = &xpi_tcp_ops,
	.card = tcp_card,
	.attach = tcp_attach,
	.probe = tcp_probe,
	.carries_sideband = true,
	.open = xpi_tcp_open,
};
