/* SPDX-License-Identifier: MIT */
/* Forming a job from the launcher's environment or a unique id; see bootstrap.h. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "acceptor.h"
#include "auth.h"
#include "bootstrap.h"
#include "launcher.h"
#include "pmi2.h"
#include "pmix.h"
#include "port_owner.h"
#include "unique_id.h"
#include "../core/compiler.h"
#include "../core/engine.h"
#include "../core/log.h"
#include "sock.h"

#define HDR_LEN XPI_BOOT_HDR_LEN
#define ABORT_TEXT_MAX XPI_BOOT_ABORT_TEXT_MAX
#define TEXT_MAX (ABORT_TEXT_MAX + 64)
/* A connection to rank 0 that does not finish the handshake in this time
 * after rank 0 accepted it is dropped. Handshakes run concurrently
 * (acceptor.h), so this bounds what one stranger's connection holds, not
 * what a rank waits: a real rank answers within a round trip. */
#define HANDSHAKE_MAX_MS 3000
/* Connections rank 0 lets authenticate at once beyond one per rank. */
#define PENDING_SLACK 64
/* How long rank 0 tries to tell the others that an operation failed. */
#define ABORT_SEND_MS 1000
#define CONNECT_BACKOFF_MAX_MS 250

enum { OP_GATHER = XPI_BOOT_OP_GATHER, OP_TABLE = XPI_BOOT_OP_TABLE, OP_ABORT = XPI_BOOT_OP_ABORT };

struct xpi_boot {
	int rank, size;
	int timeout_ms;
	uint8_t key[XPI_AUTH_KEY_LEN];
	/* What the job's handshakes with rank 0 bind (auth.h): its port and
	 * the launcher's name for the job (struct xpi_launch's job_name). */
	uint8_t bind[3 + XPI_LAUNCH_JOB_NAME_MAX];
	size_t bind_len;
	/* Rank 0 draws it; every other rank learns it, authenticated, in its
	 * handshake with rank 0. */
	uint8_t job_nonce[XPI_BOOT_JOB_ID_LEN];
	uint8_t job_id[XPI_BOOT_JOB_ID_LEN];
	char addr[300]; /* the rendezvous address as configured, for messages */
	int root_fd;    /* ranks != 0: the connection to rank 0 */
	/* Rank 0: the connection to each rank (fds[0] unused) and the state
	 * of the operation in progress. */
	int *fds;
	size_t *got;              /* bytes of header and payload received */
	uint8_t (*hdrs)[HDR_LEN]; /* their headers */
	struct pollfd *pfds;      /* size - 1 */
	int *pranks;              /* rank of each pfds entry */
	struct sockaddr_storage local;
	socklen_t local_len;
	uint32_t seq; /* control operations started */
	/* The job formed through PMIx (pmix.h): its control operations go
	 * through the launcher's servers, and there is no star. */
	bool via_pmix;
	int broken; /* 0, or the code every further operation returns */
	char broken_text[TEXT_MAX];
};

static int failv(int rc, const char *fmt, va_list ap)
{
	xpi_log_detailv(XPI_LOG_INFO, fmt, ap);
	return rc;
}

/* Logs a failure, makes it the thread's error detail, returns @rc. */
static int fail(int rc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	failv(rc, fmt, ap);
	va_end(ap);
	return rc;
}

static const char *errtext(int rc)
{
	const char *s = strerrordesc_np(rc < 0 ? -rc : rc);
	return s != NULL ? s : "unknown error";
}

/* ---------------------------------------------------------------------- */
/* Addresses                                                              */

/* An IPv4-mapped IPv6 address (a v4 peer of a v6 wildcard listener)
 * becomes the plain IPv4 one, which is what others can use. Port 0. */
static void store_local(struct xpi_boot *b, const struct sockaddr_storage *ss, socklen_t len)
{
	memset(&b->local, 0, sizeof(b->local));
	if (ss->ss_family == AF_INET6) {
		const struct sockaddr_in6 *a6 = (const struct sockaddr_in6 *)ss;
		if (IN6_IS_ADDR_V4MAPPED(&a6->sin6_addr)) {
			struct sockaddr_in *a4 = (struct sockaddr_in *)&b->local;
			a4->sin_family = AF_INET;
			memcpy(&a4->sin_addr, &a6->sin6_addr.s6_addr[12], 4);
			b->local_len = sizeof(*a4);
			return;
		}
	}
	memcpy(&b->local, ss, len);
	b->local_len = len;
	if (b->local.ss_family == AF_INET)
		((struct sockaddr_in *)&b->local)->sin_port = 0;
	else if (b->local.ss_family == AF_INET6)
		((struct sockaddr_in6 *)&b->local)->sin6_port = 0;
}

static int iface_addr(struct xpi_boot *b, const char *ifname)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char names[200];
	int rc = xpi_sock_iface_addr(ifname, &ss, &len, names, sizeof(names));
	if (rc == -ENODEV)
		return fail(rc,
			    "rank %d: XP_SOCKET_IFNAME=%s: no such interface with an IPv4 or IPv6 "
			    "address here (there are: %s)",
			    b->rank, ifname, names[0] ? names : "none");
	if (rc < 0)
		return fail(rc, "rank %d: getifaddrs failed: %s", b->rank, errtext(rc));
	store_local(b, &ss, len);
	return 0;
}

/* Without XP_SOCKET_IFNAME: the address this rank reaches rank 0 from (or,
 * for rank 0, where the first rank reached it). */
static int conn_local_addr(struct xpi_boot *b)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	int fd = b->rank == 0 ? b->fds[1] : b->root_fd;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return fail(-errno, "rank %d: getsockname failed: %s", b->rank, errtext(errno));
	store_local(b, &ss, len);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Forming the job                                                        */

/* Takes over the socket a launcher bound for rank 0 (XP_BOOT_LISTEN_FD),
 * or the one xp_get_unique_id left in this process; @what names it. */
static int inherited_listener(const struct xpi_launch *e, const char *what, int fd, int backlog,
			      int *lfd)
{
	int type = 0;
	socklen_t tlen = sizeof(type);
	struct sockaddr_storage ss = { 0 };
	socklen_t slen = sizeof(ss);
	if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tlen) < 0 || type != SOCK_STREAM ||
	    getsockname(fd, (struct sockaddr *)&ss, &slen) < 0)
		return fail(-EINVAL, "rank 0: %s is not a stream socket", what);
	if (xpi_sock_addr_port((struct sockaddr *)&ss) != atoi(e->port))
		return fail(-EINVAL, "rank 0: %s is bound to port %d, but %s says %s", what,
			    xpi_sock_addr_port((struct sockaddr *)&ss), e->addr_from, e->addr);
	int flags = fcntl(fd, F_GETFL);
	if (listen(fd, backlog) < 0 || flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0 ||
	    fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
		return fail(-errno, "rank 0: %s: %s", what, errtext(errno));
	*lfd = fd;
	return 0;
}

/* Rank 0's listening socket: the one handed over (@e->listen_fd), or one
 * bound to the rendezvous address. With @retry_busy (a job from a unique
 * id whose rank 0 is not the process that made it, which may still hold
 * the port for a moment) a port in use is tried again until @deadline. */
static int root_listen(struct xpi_boot *b, const struct xpi_launch *e, bool retry_busy,
		       int64_t deadline, int *lfd)
{
	int backlog = b->size < 128 ? 128 : (b->size > 65535 ? 65535 : b->size);
	if (e->listen_fd >= 0) {
		char what[64];
		if (retry_busy)
			snprintf(what, sizeof(what), "the socket xp_get_unique_id opened");
		else
			snprintf(what, sizeof(what), "XP_BOOT_LISTEN_FD=%d", e->listen_fd);
		return inherited_listener(e, what, e->listen_fd, backlog, lfd);
	}

	struct sockaddr_storage ss = { 0 };
	socklen_t len;
	int rc = xpi_sock_resolve(e->host, e->port, &ss, &len);
	if (rc < 0)
		return fail(rc == -EAGAIN ? -EAGAIN : -EINVAL,
			    "rank 0: cannot resolve %s (from %s): %s", e->host, e->addr_from,
			    rc == -EAGAIN ? "temporary resolver failure" : "unknown host");
	if (!xpi_sock_is_numeric_host(e->host)) {
		/* A name: listen on every address of its family. */
		int port = xpi_sock_addr_port((struct sockaddr *)&ss);
		sa_family_t fam = ss.ss_family;
		memset(&ss, 0, sizeof(ss));
		if (fam == AF_INET6) {
			struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
			a->sin6_family = AF_INET6;
			a->sin6_addr = in6addr_any;
			a->sin6_port = htons((uint16_t)port);
			len = sizeof(*a);
		} else {
			struct sockaddr_in *a = (struct sockaddr_in *)&ss;
			a->sin_family = AF_INET;
			a->sin_addr.s_addr = htonl(INADDR_ANY);
			a->sin_port = htons((uint16_t)port);
			len = sizeof(*a);
		}
	}
	int backoff_ms = 5;
	for (;;) {
		rc = xpi_sock_listen((struct sockaddr *)&ss, len, backlog, lfd);
		int left = xpi_deadline_left_ms(deadline);
		if (rc != -EADDRINUSE || !retry_busy || left == 0)
			break;
		poll(NULL, 0, backoff_ms < left ? backoff_ms : left);
		backoff_ms = backoff_ms * 2 > CONNECT_BACKOFF_MAX_MS ? CONNECT_BACKOFF_MAX_MS :
								       backoff_ms * 2;
	}
	if (rc == -EADDRINUSE) {
		/* The other ranks reach whoever holds it: another job's rank 0
		 * refuses them at once (boot_bind), so they fail now too. */
		char owner[128];
		xpi_port_owner(xpi_sock_addr_port((struct sockaddr *)&ss), owner, sizeof(owner));
		return fail(rc,
			    "rank 0: cannot listen on %s (from %s): port %d is in use%s%s (an "
			    "earlier job still running, or another program? export XP_ADDR to "
			    "choose another port)",
			    e->addr, e->addr_from, xpi_sock_addr_port((struct sockaddr *)&ss),
			    owner[0] != '\0' ? " by " : "", owner);
	}
	if (rc < 0)
		return fail(rc, "rank 0: cannot listen on %s (from %s): %s", e->addr, e->addr_from,
			    errtext(rc));
	return 0;
}

/* "1, 4, 7 and 12 more": the ranks whose entry in @done is false. */
static void missing_ranks(const struct xpi_boot *b, bool (*done)(const struct xpi_boot *, int),
			  char *buf, size_t n)
{
	size_t used = 0;
	int listed = 0, more = 0;
	buf[0] = '\0';
	for (int r = 1; r < b->size; r++) {
		if (done(b, r))
			continue;
		if (listed < 16 && used + 16 < n) {
			int k = snprintf(buf + used, n - used, "%s%d", listed ? ", " : "", r);
			used += k > 0 ? (size_t)k : 0;
			listed++;
		} else {
			more++;
		}
	}
	if (more > 0 && used + 24 < n)
		snprintf(buf + used, n - used, " and %d more", more);
}

static bool has_joined(const struct xpi_boot *b, int r)
{
	return b->fds[r] >= 0;
}

static int root_accept_ranks(struct xpi_boot *b, const struct xpi_launch *e, int lfd,
			     int64_t deadline)
{
	struct xpi_acceptor_opts ao = {
		.lfd = lfd,
		.auth = { .key = b->key,
			  .my_rank = 0,
			  .size = b->size,
			  .bind = { b->bind, b->bind_len },
			  .send = b->job_nonce,
			  .send_len = sizeof(b->job_nonce) },
		.handshake_ms = HANDSHAKE_MAX_MS,
		.max_pending = b->size - 1 + PENDING_SLACK,
		.who = "rank 0",
	};
	struct xpi_acceptor *acc;
	int rc = xpi_acceptor_create(&ao, &acc);
	if (rc < 0)
		return fail(rc, "rank 0: %s", errtext(rc));
	int joined = 0;
	while (joined < b->size - 1) {
		int fd, peer;
		rc = xpi_acceptor_next(acc, deadline, &fd, &peer, NULL);
		if (rc == -ETIMEDOUT) {
			char missing[160];
			missing_ranks(b, has_joined, missing, sizeof(missing));
			unsigned long refused = xpi_acceptor_refused(acc);
			char strangers[96] = "";
			if (refused > 0)
				snprintf(strangers, sizeof(strangers),
					 "; %lu other connections were refused", refused);
			rc = fail(rc,
				  "rank 0: timed out after %d ms at %s waiting for %d of %d ranks "
				  "to join: rank %s (not started, crashed, or pointed at another "
				  "address?)%s",
				  b->timeout_ms, e->addr, b->size - 1 - joined, b->size, missing,
				  strangers);
			break;
		}
		if (rc < 0) {
			rc = fail(rc, "rank 0: accept on %s failed: %s%s", e->addr, errtext(rc),
				  rc == -EMFILE ? " (raise the open-files limit, ulimit -n)" : "");
			break;
		}
		char who[XPI_SOCK_ADDRSTRLEN];
		xpi_sock_peer_str(fd, who, sizeof(who));
		if (b->fds[peer] >= 0) {
			char first[XPI_SOCK_ADDRSTRLEN];
			xpi_sock_peer_str(b->fds[peer], first, sizeof(first));
			xpi_log(XPI_LOG_ERROR,
				"rank 0: refused %s: it claims rank %d, which joined from %s "
				"(was the job started twice?)",
				who, peer, first);
			close(fd);
			continue;
		}
		if (xpi_debug_on("transport"))
			xpi_log(XPI_LOG_DEBUG, "rank 0: rank %d joined from %s", peer, who);
		b->fds[peer] = fd;
		joined++;
	}
	xpi_acceptor_destroy(acc);
	return rc;
}

static bool connect_retryable(int rc)
{
	switch (-rc) {
	case ECONNREFUSED: /* rank 0 is not listening yet */
	case ECONNRESET:
	case ECONNABORTED:
	case ENETUNREACH: /* the network may still be coming up */
	case EHOSTUNREACH:
	case EADDRNOTAVAIL:
	case EAGAIN:
		return true;
	default:
		return false;
	}
}

static int join_root_once(struct xpi_boot *b, const struct xpi_launch *e, int64_t deadline)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = 0;
	int fd = -1, rc, last = 0, backoff_ms = 5;
	for (;;) {
		if (len == 0) {
			rc = xpi_sock_resolve(e->host, e->port, &ss, &len);
			if (rc == -EINVAL || rc == -ENOMEM)
				return fail(rc, "rank %d: cannot resolve %s (from %s)", b->rank,
					    e->host, e->addr_from);
			if (rc == 0)
				continue; /* connect at once */
			len = 0;
		} else {
			rc = xpi_sock_connect((struct sockaddr *)&ss, len, deadline, &fd);
			if (rc == 0)
				break;
			if (rc != -ETIMEDOUT && !connect_retryable(rc))
				return fail(rc, "rank %d: cannot connect to rank 0 at %s: %s",
					    b->rank, e->addr, errtext(rc));
		}
		if (rc != -ETIMEDOUT)
			last = rc;
		int left = xpi_deadline_left_ms(deadline);
		if (left == 0)
			return fail(-ETIMEDOUT,
				    "rank %d: could not reach rank 0 at %s (from %s) within %d ms "
				    "(%s): is rank 0 running, and does the address name its host?",
				    b->rank, e->addr, e->addr_from, b->timeout_ms,
				    last != 0 ? errtext(last) : "no answer");
		/* Rank 0 may start later than this rank: back off and retry. */
		poll(NULL, 0, backoff_ms < left ? backoff_ms : left);
		backoff_ms = backoff_ms * 2 > CONNECT_BACKOFF_MAX_MS ? CONNECT_BACKOFF_MAX_MS :
								       backoff_ms * 2;
	}
	int peer = -1;
	struct xpi_auth_args aa = {
		.key = b->key,
		.my_rank = b->rank,
		.size = b->size,
		.bind = { b->bind, b->bind_len },
		.recv_len = sizeof(b->job_nonce),
	};
	rc = xpi_auth_handshake(fd, &aa, xpi_deadline_left_ms(deadline), &peer, b->job_nonce);
	if (rc == 0 && peer != 0)
		rc = fail(-EPROTO, "rank %d: the process at %s is rank %d of a job, not rank 0",
			  b->rank, e->addr, peer);
	if (rc < 0) {
		char why[400];
		snprintf(why, sizeof(why), "%s", xp_error_detail());
		close(fd);
		if (rc == -EACCES)
			return fail(
				rc,
				"rank %d: wrong job key, or not this job's rank 0: the process at "
				"%s (from %s) is either rank 0 with another XP_JOB_KEY (every "
				"rank needs the same), or rank 0 of another job with the same "
				"key%s that holds the port (this job's rank 0 then could not "
				"bind it: its error names the port and who holds it)",
				b->rank, e->addr, e->addr_from,
				e->job_name[0] != '\0' ? " (another Slurm step)" : "");
		if (rc == -ECONNRESET)
			return fail(
				rc,
				"rank %d: rank 0 at %s closed the connection while this rank "
				"joined: is this rank started twice, or does rank 0 have another "
				"job key? (%s)",
				b->rank, e->addr, why);
		return fail(rc, "rank %d: could not join the job at %s: %s", b->rank, e->addr, why);
	}
	b->root_fd = fd;
	return 0;
}

/* Joins rank 0. A connection reset before the handshake finished is tried
 * again until the deadline: rank 0 drops the oldest half-open connections
 * when strangers hold too many (acceptor.h), and in a job from a unique id
 * the process that made the id, if it is not rank 0, lets go of its
 * listening socket when it joins, which resets whatever connected to that
 * socket meanwhile; the real rank 0 binds the port afterwards. */
static int join_root(struct xpi_boot *b, const struct xpi_launch *e, int64_t deadline)
{
	for (int tries = 1;; tries++) {
		int rc = join_root_once(b, e, deadline);
		int left = xpi_deadline_left_ms(deadline);
		if (rc != -ECONNRESET || left == 0)
			return rc;
		xpi_log(tries == 1 ? XPI_LOG_WARN : XPI_LOG_DEBUG,
			"rank %d: the connection to %s (from %s) was reset before it was "
			"authenticated; rank 0 may not be listening yet, or busy with "
			"strangers: connecting again",
			b->rank, e->addr, e->addr_from);
		poll(NULL, 0, CONNECT_BACKOFF_MAX_MS < left ? CONNECT_BACKOFF_MAX_MS : left);
	}
}

static int boot_alloc(struct xpi_boot *b)
{
	if (b->rank != 0)
		return 0;
	size_t n = (size_t)b->size;
	b->fds = malloc(n * sizeof(*b->fds));
	if (b->fds == NULL)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		b->fds[i] = -1; /* before anything can fail: destroy closes them */
	b->got = calloc(n, sizeof(*b->got));
	b->hdrs = calloc(n, sizeof(*b->hdrs));
	b->pfds = calloc(n, sizeof(*b->pfds));
	b->pranks = calloc(n, sizeof(*b->pranks));
	if (b->got == NULL || b->hdrs == NULL || b->pfds == NULL || b->pranks == NULL)
		return -ENOMEM;
	return 0;
}

/* The launcher's environment says what the job is. */
static int launch_from_env(struct xpi_launch *e)
{
	int rc = xpi_launch_read(xpi_env_getenv, NULL, e);
	if (e->warning[0] != '\0')
		xpi_log(XPI_LOG_WARN, "rank %d: %s", e->rank, e->warning);
	if (rc < 0)
		return fail(rc, "bootstrap: %s", e->error);
	return rc;
}

/* xp_init_rank says what the job is: @o's rank and size, rank 0's address
 * from the id, which also gives the key. */
static int launch_from_id(const struct xpi_boot_opts *o, struct xpi_launch *e,
			  uint8_t key[XPI_AUTH_KEY_LEN])
{
	struct xpi_uid u;
	const char *why = "";
	memset(e, 0, sizeof(*e));
	e->listen_fd = -1;
	e->launcher = "xp_init_rank";
	if (o->size < 1 || o->size > XPI_LAUNCH_MAX_SIZE || o->rank < 0 || o->rank >= o->size)
		return fail(-EINVAL,
			    "xp_init_rank: rank %d of a job of %d ranks: the size must be 1 to %d "
			    "and the rank 0 to size - 1",
			    o->rank, o->size, XPI_LAUNCH_MAX_SIZE);
	if (o->id == NULL && o->size > 1)
		return fail(-EINVAL, "xp_init_rank: rank %d of %d: no unique id (NULL)", o->rank,
			    o->size);
	e->rank = o->rank;
	e->size = o->size;
	if (o->id == NULL)
		return XPI_BOOT_SINGLETON;
	if (xpi_uid_parse(o->id->bytes, sizeof(o->id->bytes), &u, &why) < 0)
		return fail(-EINVAL, "xp_init_rank: rank %d of %d: the unique id is %s", o->rank,
			    o->size, why);
	/* A socket this process holds for the id: rank 0 serves on it; any
	 * other rank lets go of it, so that rank 0 elsewhere can bind. */
	int held = xpi_uid_take_listener(&u);
	if (held >= 0 && (o->rank != 0 || o->size == 1)) {
		close(held);
		held = -1;
	}
	if (o->size == 1)
		return XPI_BOOT_SINGLETON;
	e->listen_fd = held;
	xpi_boot_key_from_uid(u.key, key);
	xpi_uid_host(&u, e->host, sizeof(e->host));
	snprintf(e->port, sizeof(e->port), "%u", (unsigned)u.port);
	snprintf(e->addr, sizeof(e->addr), u.family == AF_INET6 ? "[%s]:%s" : "%s:%s", e->host,
		 e->port);
	snprintf(e->addr_from, sizeof(e->addr_from), "the unique id");
	return 0;
}

void xpi_boot_key_from_uid(const uint8_t *uid_key, uint8_t *key)
{
	/* The key length is auth.h's: its first XPI_AUTH_KEY_LEN bytes of
	 * the id's 32 random ones, until the handshake takes all 32. */
	_Static_assert(XPI_AUTH_KEY_LEN <= XPI_UID_KEY_LEN, "the id holds the whole key");
	memcpy(key, uid_key, XPI_AUTH_KEY_LEN);
}

/* What the handshakes with rank 0 bind (auth.h): the rendezvous port, the
 * one part of rank 0's address every rank is told the same way (hosts may
 * be names on some ranks and addresses on others), and the launcher's name
 * for the job where it has one (Slurm's job and step), so that two jobs
 * that share a key and, by a collision, a port refuse each other at once
 * instead of one's ranks retrying the other's rank 0. Rank 0 also draws
 * the job's nonce here. */
static int boot_bind(struct xpi_boot *b, const struct xpi_launch *e)
{
	long port = strtol(e->port, NULL, 10);
	b->bind[0] = 'B';
	b->bind[1] = (uint8_t)(port >> 8);
	b->bind[2] = (uint8_t)port;
	size_t nl = strlen(e->job_name);
	memcpy(b->bind + 3, e->job_name, nl);
	b->bind_len = 3 + nl;
	if (b->rank != 0)
		return 0;
	int rc = xpi_auth_random(b->job_nonce, sizeof(b->job_nonce));
	if (rc < 0)
		return fail(rc, "rank 0: getrandom failed: %s", errtext(rc));
	return 0;
}

/* Without XP_JOB_KEY: one line, from rank 0, naming where it listens. */
static void warn_no_key(int lfd)
{
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	char where[XPI_SOCK_ADDRSTRLEN] = "its rendezvous port";
	if (getsockname(lfd, (struct sockaddr *)&ss, &len) == 0)
		xpi_sock_addr_str((struct sockaddr *)&ss, where, sizeof(where));
	xpi_log(XPI_LOG_WARN,
		"rank 0: XP_JOB_KEY is not set: this job is not protected, any process that "
		"reaches %s can join it (export a secret XP_JOB_KEY to every rank; "
		"XP_JOB_KEY_REQUIRED=on refuses to run without one)",
		where);
}

/* No launcher's key-value service is for this process: the launcher's
 * variables say what the job is. */
#define NO_SERVICE 2

/* What a launcher's key-value service (PMIx, Slurm's PMI-2) said. */
struct service_job {
	const char *name; /* the launcher, for the log line "job formed" */
	char from[200];   /* where the address came from */
	/* PMIx: the job's control operations go through it (pmix.h), with
	 * the nonce rank 0 drew to name the job. */
	bool pmix;
	uint8_t nonce[XPI_PMIX_NONCE_LEN];
};

/* PMIx (pmix.h): 0 with @po's rank and size, NO_SERVICE if not for this
 * process, XPI_BOOT_SINGLETON for a job of one, or a negative errno. */
static int job_from_pmix(int timeout, struct xpi_boot_opts *po, struct xp_unique_id *id,
			 struct service_job *sj)
{
	char why_not[200];
	if (!xpi_pmix_built() ||
	    !xpi_launch_pmix_wanted(xpi_env_getenv, NULL, why_not, sizeof(why_not))) {
		if (xpi_pmix_built() && getenv("PMIX_RANK") != NULL && xpi_debug_on("transport"))
			xpi_log(XPI_LOG_DEBUG, "not forming the job through PMIx: %s", why_not);
		return NO_SERVICE;
	}
	struct xpi_pmix_job pj = { 0 };
	int rc = xpi_pmix_job(timeout, &pj, id, sj->nonce);
	if (rc == 1)
		return XPI_BOOT_SINGLETON;
	if (rc < 0)
		return fail(rc, "bootstrap: forming the job through PMIx: %s", xp_error_detail());
	po->rank = pj.rank;
	po->size = pj.size;
	sj->name = "PMIx";
	sj->pmix = true;
	snprintf(sj->from, sizeof(sj->from),
		 "PMIx, which carries the job's control operations (host %.64s, local rank %d of "
		 "%d)",
		 pj.host[0] != '\0' ? pj.host : "?", pj.local_rank, pj.local_size);
	return 0;
}

/* Slurm's PMI-2 (pmi2.h), as job_from_pmix. A task whose session is used
 * already (-EALREADY) forms its job as without PMI-2: every task of the
 * step is in the same case, so they all derive the same port. */
static int job_from_pmi2(int timeout, struct xpi_boot_opts *po, struct xp_unique_id *id,
			 struct service_job *sj)
{
	char why_not[300];
	if (!xpi_pmi2_built() ||
	    !xpi_launch_pmi2_wanted(xpi_env_getenv, NULL, why_not, sizeof(why_not))) {
		if (getenv("PMI_FD") != NULL && xpi_debug_on("transport"))
			xpi_log(XPI_LOG_DEBUG, "not forming the job through PMI-2: %s",
				xpi_pmi2_built() ? why_not : "not built (meson option pmi2)");
		return NO_SERVICE;
	}
	struct xpi_pmi2_job qj = { 0 };
	int rc = xpi_pmi2_job(timeout, &qj, id);
	if (rc == -EALREADY) {
		xpi_log(XPI_LOG_INFO,
			"not forming the job through PMI-2: this process had its PMI-2 session "
			"already (Slurm serves one per task); the rendezvous is derived");
		return NO_SERVICE;
	}
	if (rc == 1)
		return XPI_BOOT_SINGLETON;
	if (rc < 0)
		return fail(rc, "bootstrap: forming the job through Slurm's PMI-2: %s",
			    xp_error_detail());
	po->rank = qj.rank;
	po->size = qj.size;
	sj->name = "Slurm (PMI-2)";
	snprintf(sj->from, sizeof(sj->from), "rank 0's id through Slurm's PMI-2 (PMI_JOBID=%.40s)",
		 qj.jobid);
	return 0;
}

/*
 * Under a launcher's key-value service (PMIx, else Slurm's PMI-2): it gives
 * rank, size and rank 0's unique id, and the job forms from the id as
 * xp_init_rank's does. 0 with @po describing that job, NO_SERVICE,
 * XPI_BOOT_SINGLETON, or a negative errno.
 */
static int launch_from_service(const struct xpi_boot_opts *o, struct xpi_boot_opts *po,
			       struct xp_unique_id *id, struct service_job *sj)
{
	int timeout = o->boot_timeout_ms > 0 ? o->boot_timeout_ms : o->timeout_ms;
	*po = *o;
	int rc = job_from_pmix(timeout, po, id, sj);
	if (rc == NO_SERVICE)
		rc = job_from_pmi2(timeout, po, id, sj);
	if (rc != 0)
		return rc;
	po->explicit_job = true; /* the id's key and address; no launcher variables */
	po->id = id;
	return 0;
}

/*
 * The address a rank of a job formed through PMIx publishes for its
 * listeners: XP_SOCKET_IFNAME's, else the one it would reach rank 0's id
 * address from (the kernel's route to it, asked by connecting a datagram
 * socket, which sends nothing), as on the star it is the local address of
 * its connection to rank 0. Rank 0 routes to itself: its own address.
 */
static int pmix_local_addr(struct xpi_boot *b, const struct xpi_launch *e, const char *ifname)
{
	if (ifname != NULL)
		return iface_addr(b, ifname);
	struct addrinfo hints = { .ai_socktype = SOCK_DGRAM,
				  .ai_flags = AI_NUMERICHOST | AI_NUMERICSERV };
	struct addrinfo *ai = NULL;
	int gai = getaddrinfo(e->host, e->port, &hints, &ai);
	if (gai != 0)
		return fail(-EINVAL, "rank %d: rank 0's address %s: %s", b->rank, e->addr,
			    gai_strerror(gai));
	int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	int rc = fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen) < 0 ? -errno : 0;
	freeaddrinfo(ai);
	struct sockaddr_storage ss = { 0 };
	socklen_t len = sizeof(ss);
	if (rc == 0 && getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		rc = -errno;
	if (fd >= 0)
		close(fd);
	if (rc < 0)
		return fail(rc, "rank %d: no route to rank 0's address %s: %s", b->rank, e->addr,
			    errtext(rc));
	store_local(b, &ss, len);
	return 0;
}

int xpi_boot_create(const struct xpi_boot_opts *o, struct xpi_boot **out)
{
	struct xpi_launch e;
	uint8_t key[XPI_AUTH_KEY_LEN] = { 0 };
	if (out == NULL || o == NULL || o->timeout_ms <= 0)
		return -EINVAL;
	struct xpi_boot_opts po;
	struct xp_unique_id service_id;
	struct service_job sj = { 0 };
	int rc = o->explicit_job ? NO_SERVICE : launch_from_service(o, &po, &service_id, &sj);
	if (rc == 0)
		o = &po;
	else if (rc != NO_SERVICE)
		return rc; /* XPI_BOOT_SINGLETON or an error */
	rc = o->explicit_job ? launch_from_id(o, &e, key) : launch_from_env(&e);
	if (rc != 0) {
		if (sj.pmix)
			xpi_pmix_leave(true, xp_error_detail(), o->timeout_ms);
		return rc; /* XPI_BOOT_SINGLETON or -EINVAL */
	}
	if (o == &po) {
		e.launcher = sj.name;
		snprintf(e.addr_from, sizeof(e.addr_from), "%s", sj.from);
	}

	struct xpi_boot *b = calloc(1, sizeof(*b));
	if (b == NULL) {
		rc = -ENOMEM;
		if (sj.pmix)
			xpi_pmix_leave(true, "out of memory", o->timeout_ms);
		goto fail_fd;
	}
	b->rank = e.rank;
	b->size = e.size;
	b->root_fd = -1;
	b->via_pmix = sj.pmix; /* from here its destroy leaves PMIx */
	b->timeout_ms = o->boot_timeout_ms > 0 ? o->boot_timeout_ms : o->timeout_ms;
	snprintf(b->addr, sizeof(b->addr), "%s", e.addr);
	rc = 0;
	if (o->explicit_job) {
		memcpy(b->key, key, sizeof(b->key));
	} else if (o->job_key == NULL && o->require_key) {
		rc = fail(-EACCES,
			  "rank %d: XP_JOB_KEY is not set and XP_JOB_KEY_REQUIRED=on: this rank "
			  "forms no job without a key (xprun sets one; with srun, mpirun or "
			  "torchrun export the same secret XP_JOB_KEY to every rank)",
			  b->rank);
	} else {
		rc = xpi_auth_key_from_string(o->job_key != NULL ? o->job_key : "", b->key);
	}
	if (rc == 0 && !b->via_pmix)
		rc = boot_alloc(b);
	if (rc == 0)
		rc = boot_bind(b, &e);
	if (rc < 0)
		goto fail;
	if (b->via_pmix) {
		memcpy(b->job_nonce, sj.nonce, sizeof(b->job_nonce));
		rc = pmix_local_addr(b, &e, o->socket_ifname);
		if (rc < 0)
			goto fail;
		goto formed;
	}

	/* A wrong interface name fails before anyone waits for this rank. */
	const char *ifname = o->socket_ifname;
	if (ifname != NULL) {
		rc = iface_addr(b, ifname);
		if (rc < 0)
			goto fail;
	}

	int64_t deadline = xpi_deadline_in(b->timeout_ms);
	if (b->rank == 0) {
		int lfd = -1;
		rc = root_listen(b, &e, o->explicit_job, deadline, &lfd);
		if (rc < 0)
			goto fail;
		e.listen_fd = -1; /* lfd now */
		if (o->job_key == NULL && !o->explicit_job && !o->quiet)
			warn_no_key(lfd);
		rc = root_accept_ranks(b, &e, lfd, deadline);
		/* Nobody else may join now: stop listening. */
		close(lfd);
	} else {
		rc = join_root(b, &e, deadline);
	}
	if (rc < 0)
		goto fail;
	if (ifname == NULL) {
		rc = conn_local_addr(b);
		if (rc < 0)
			goto fail;
	}
formed:
	xpi_auth_job_id((struct xpi_auth_bind){ b->bind, b->bind_len }, b->job_nonce, b->job_id);
	if (b->via_pmix)
		xpi_log(XPI_LOG_INFO,
			"rank %d of %d: job formed (launcher PMIx, no rendezvous socket: %s)",
			b->rank, b->size, e.addr_from);
	else
		xpi_log(XPI_LOG_INFO,
			"rank %d of %d: job formed (launcher %s, rendezvous %s from %s)", b->rank,
			b->size, e.launcher, e.addr, e.addr_from);
	*out = b;
	return 0;
fail:
	xpi_boot_destroy(b);
fail_fd:
	/* The id's socket is ours to close; XP_BOOT_LISTEN_FD stays the
	 * launcher's until the job forms, as before. */
	if (o->explicit_job && e.listen_fd >= 0)
		close(e.listen_fd);
	return rc;
}

int xpi_boot_rank(const struct xpi_boot *b)
{
	return b->rank;
}

int xpi_boot_size(const struct xpi_boot *b)
{
	return b->size;
}

int xpi_boot_timeout_ms(const struct xpi_boot *b)
{
	return b->timeout_ms;
}

const uint8_t *xpi_boot_key(const struct xpi_boot *b)
{
	return b->key;
}

const uint8_t *xpi_boot_job_id(const struct xpi_boot *b)
{
	return b->job_id;
}

int xpi_boot_local_addr(const struct xpi_boot *b, struct sockaddr_storage *out, socklen_t *len)
{
	*out = b->local;
	*len = b->local_len;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Control operations                                                     */

void xpi_boot_hdr_write(const struct xpi_boot_hdr *h, uint8_t out[XPI_BOOT_HDR_LEN])
{
	out[0] = (uint8_t)(h->op >> 8);
	out[1] = (uint8_t)h->op;
	out[2] = (uint8_t)(h->code >> 8);
	out[3] = (uint8_t)h->code;
	for (int i = 0; i < 4; i++)
		out[4 + i] = (uint8_t)(h->seq >> (24 - 8 * i));
	for (int i = 0; i < 8; i++)
		out[8 + i] = (uint8_t)(h->len >> (56 - 8 * i));
}

int xpi_boot_hdr_parse(const uint8_t *buf, size_t len, struct xpi_boot_hdr *out, const char **why)
{
	const char *dummy;
	if (why == NULL)
		why = &dummy;
	if (len < XPI_BOOT_HDR_LEN)
		return -EAGAIN;
	struct xpi_boot_hdr h = {
		.op = (uint16_t)((buf[0] << 8) | buf[1]),
		.code = (uint16_t)((buf[2] << 8) | buf[3]),
	};
	for (int i = 0; i < 4; i++)
		h.seq = (h.seq << 8) | buf[4 + i];
	for (int i = 0; i < 8; i++)
		h.len = (h.len << 8) | buf[8 + i];
	switch (h.op) {
	case XPI_BOOT_OP_GATHER:
	case XPI_BOOT_OP_TABLE:
		break;
	case XPI_BOOT_OP_ABORT:
		if (h.code == 0 || h.code > 4095) {
			*why = "an abort without an error code";
			return -EPROTO;
		}
		if (h.len > XPI_BOOT_ABORT_TEXT_MAX) {
			*why = "an abort text longer than 512 bytes";
			return -EPROTO;
		}
		break;
	default:
		*why = "an unknown kind of control message";
		return -EPROTO;
	}
	*out = h;
	return 0;
}

static void hdr_write(uint8_t *p, uint16_t op, uint16_t code, uint32_t seq, uint64_t len)
{
	struct xpi_boot_hdr h = { .op = op, .code = code, .seq = seq, .len = len };
	xpi_boot_hdr_write(&h, p);
}

/* Remembers the failure: every later operation returns it at once. */
static int set_broken(struct xpi_boot *b, int rc)
{
	b->broken = rc;
	snprintf(b->broken_text, sizeof(b->broken_text), "%s", xp_error_detail());
	return rc;
}

/* Rank 0: an operation failed: says so in the log and to every other rank, so they fail now rather than at their
 * deadline. */
static int root_abort(struct xpi_boot *b, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static int root_abort(struct xpi_boot *b, int rc, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	failv(rc, fmt, ap);
	va_end(ap);
	const char *text = xp_error_detail();
	size_t tlen = strlen(text);
	if (tlen > ABORT_TEXT_MAX)
		tlen = ABORT_TEXT_MAX;
	uint8_t hdr[HDR_LEN];
	hdr_write(hdr, OP_ABORT, (uint16_t)-rc, b->seq, tlen);
	int64_t deadline = xpi_deadline_in(ABORT_SEND_MS);
	for (int r = 1; r < b->size; r++) {
		/* Best effort: a rank that is gone or stuck misses it. The
		 * culprit gets it too: one that disagreed is still alive. */
		if (xpi_sock_send_all(b->fds[r], hdr, sizeof(hdr), deadline) == 0)
			(void)xpi_sock_send_all(b->fds[r], text, tlen, deadline);
	}
	return set_broken(b, rc);
}

static bool has_contributed(const struct xpi_boot *b, int r)
{
	/* During an operation, got[r] is set to SIZE_MAX once rank r's
	 * contribution is complete. */
	return b->got[r] == SIZE_MAX;
}

/* Reads what rank @r has sent of its contribution without blocking.
 * Returns 1 when it is complete, 0 if more is to come, or a negative code
 * (with @why written for -EPROTO). */
static int root_read(struct xpi_boot *b, int r, size_t len, uint8_t *dst, char *why, size_t n)
{
	size_t total = HDR_LEN + len;
	while (b->got[r] < total) {
		size_t g = b->got[r];
		uint8_t *to = g < HDR_LEN ? b->hdrs[r] + g : dst + (g - HDR_LEN);
		size_t want = g < HDR_LEN ? HDR_LEN - g : total - g;
		ssize_t k = recv(b->fds[r], to, want, MSG_DONTWAIT);
		if (k == 0)
			return -ECONNRESET;
		if (k < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return errno == ECONNRESET || errno == EPIPE ? -ECONNRESET : -errno;
		}
		b->got[r] += (size_t)k;
		if (g < HDR_LEN && b->got[r] >= HDR_LEN) {
			struct xpi_boot_hdr h;
			const char *bad = NULL;
			if (xpi_boot_hdr_parse(b->hdrs[r], HDR_LEN, &h, &bad) < 0) {
				snprintf(why, n, "sent %s where rank 0 is in operation %u", bad,
					 (unsigned)b->seq);
				return -EPROTO;
			}
			if (h.op != OP_GATHER || h.seq != b->seq) {
				snprintf(
					why, n,
					"sent operation %u (kind %u) where rank 0 is in operation %u",
					(unsigned)h.seq, (unsigned)h.op, (unsigned)b->seq);
				return -EPROTO;
			}
			if (h.len != len) {
				snprintf(
					why, n,
					"contributed %llu bytes to control operation %u where rank 0 "
					"gave %zu",
					(unsigned long long)h.len, (unsigned)b->seq, len);
				return -EPROTO;
			}
		}
	}
	return 1;
}

static int root_allgather(struct xpi_boot *b, const void *mine, size_t len, uint8_t *all,
			  int64_t deadline)
{
	if (len > 0)
		memcpy(all, mine, len);
	int pending = b->size - 1;
	for (int r = 1; r < b->size; r++)
		b->got[r] = 0;
	while (pending > 0) {
		int np = 0;
		for (int r = 1; r < b->size; r++) {
			if (has_contributed(b, r))
				continue;
			b->pfds[np] = (struct pollfd){ .fd = b->fds[r], .events = POLLIN };
			b->pranks[np++] = r;
		}
		int ms = xpi_deadline_left_ms(deadline);
		int k = ms == 0 ? 0 : xpi_sock_poll(b->pfds, (unsigned long)np, ms);
		if (k < 0 && errno != EINTR)
			return root_abort(b, -errno, "rank 0: poll failed: %s", errtext(errno));
		if (k == 0 && xpi_deadline_left_ms(deadline) == 0) {
			char missing[160];
			missing_ranks(b, has_contributed, missing, sizeof(missing));
			return root_abort(
				b, -ETIMEDOUT,
				"rank 0: control operation %u timed out after %d ms: rank %s "
				"did not enter it (stuck, or not running the same sequence "
				"of bootstrap operations?)",
				(unsigned)b->seq, b->timeout_ms, missing);
		}
		for (int i = 0; i < np && k > 0; i++) {
			if (b->pfds[i].revents == 0)
				continue;
			int r = b->pranks[i];
			char why[200] = "";
			uint8_t *dst = len > 0 ? all + (size_t)r * len : NULL;
			int rc = root_read(b, r, len, dst, why, sizeof(why));
			if (rc == 1) {
				b->got[r] = SIZE_MAX;
				pending--;
				continue;
			}
			char who[XPI_SOCK_ADDRSTRLEN];
			xpi_sock_peer_str(b->fds[r], who, sizeof(who));
			if (rc == -ECONNRESET)
				return root_abort(
					b, rc,
					"rank 0: rank %d (%s) closed its control connection "
					"in operation %u: it has probably died",
					r, who, (unsigned)b->seq);
			if (rc == -EPROTO)
				return root_abort(
					b, rc,
					"rank 0: rank %d (%s) %s: the ranks do not run the "
					"same sequence of bootstrap operations",
					r, who, why);
			if (rc < 0)
				return root_abort(b, rc, "rank 0: reading from rank %d (%s): %s", r,
						  who, errtext(rc));
		}
	}
	uint8_t hdr[HDR_LEN];
	size_t tlen = (size_t)b->size * len;
	hdr_write(hdr, OP_TABLE, 0, b->seq, tlen);
	for (int r = 1; r < b->size; r++) {
		int rc = xpi_sock_send_all(b->fds[r], hdr, sizeof(hdr), deadline);
		if (rc == 0 && tlen > 0)
			rc = xpi_sock_send_all(b->fds[r], all, tlen, deadline);
		if (rc < 0)
			return root_abort(b, rc,
					  "rank 0: sending operation %u's result to rank %d: %s",
					  (unsigned)b->seq, r,
					  rc == -ECONNRESET ? "it has died" : errtext(rc));
	}
	return 0;
}

static int leaf_failed(struct xpi_boot *b, int rc, const char *step)
{
	if (rc == -ECONNRESET)
		fail(rc,
		     "rank %d: lost the control connection to rank 0 (%s) %s operation %u: rank 0 "
		     "has probably died",
		     b->rank, b->addr, step, (unsigned)b->seq);
	else if (rc == -ETIMEDOUT)
		fail(rc,
		     "rank %d: rank 0 (%s) did not complete control operation %u within %d ms: "
		     "some rank is late or stuck (rank 0's log names it)",
		     b->rank, b->addr, (unsigned)b->seq, b->timeout_ms);
	else
		fail(rc, "rank %d: control connection to rank 0 (%s) %s operation %u: %s", b->rank,
		     b->addr, step, (unsigned)b->seq, errtext(rc));
	return set_broken(b, rc);
}

static int leaf_allgather(struct xpi_boot *b, const void *mine, size_t len, uint8_t *all,
			  int64_t deadline)
{
	uint8_t hdr[HDR_LEN];
	hdr_write(hdr, OP_GATHER, 0, b->seq, len);
	int rc = xpi_sock_send_all(b->root_fd, hdr, sizeof(hdr), deadline);
	if (rc == 0 && len > 0)
		rc = xpi_sock_send_all(b->root_fd, mine, len, deadline);
	/* A send to a dead rank 0 may still succeed (or fail with a reset):
	 * either way the receive below tells. */
	if (rc < 0 && rc != -ECONNRESET)
		return leaf_failed(b, rc, "sending to it in");
	rc = xpi_sock_recv_all(b->root_fd, hdr, sizeof(hdr), deadline);
	if (rc < 0)
		return leaf_failed(b, rc, "waiting for the result of");
	struct xpi_boot_hdr h;
	const char *bad = NULL;
	if (xpi_boot_hdr_parse(hdr, sizeof(hdr), &h, &bad) < 0) {
		char step[120];
		snprintf(step, sizeof(step), "got a malformed message (%s) in", bad);
		return leaf_failed(b, -EPROTO, step);
	}
	if (h.op == OP_ABORT) {
		char text[ABORT_TEXT_MAX + 1];
		rc = xpi_sock_recv_all(b->root_fd, text, (size_t)h.len, deadline);
		if (rc < 0)
			return leaf_failed(b, rc, "reading an abort in");
		text[h.len] = '\0';
		fail(-(int)h.code, "rank %d: rank 0 stopped the job in control operation %u: %s",
		     b->rank, (unsigned)b->seq, text);
		return set_broken(b, -(int)h.code);
	}
	if (h.op != OP_TABLE || h.seq != b->seq || h.len != (uint64_t)b->size * len)
		return leaf_failed(b, -EPROTO,
				   "got a malformed result (kind, sequence or length) in");
	if (h.len > 0) {
		rc = xpi_sock_recv_all(b->root_fd, all, (size_t)h.len, deadline);
		if (rc < 0)
			return leaf_failed(b, rc, "reading the result of");
	}
	return 0;
}

int xpi_boot_allgather(struct xpi_boot *b, const void *mine, size_t len, void *all)
{
	if (b == NULL || (len > 0 && (mine == NULL || all == NULL)) ||
	    len > SIZE_MAX / (size_t)b->size)
		return -EINVAL;
	if (b->broken != 0) {
		xpi_set_thread_detail(b->broken_text);
		return b->broken;
	}
	b->seq++;
	if (b->via_pmix) {
		int rc =
			xpi_pmix_allgather(b->seq, b->rank, b->size, mine, len, all, b->timeout_ms);
		if (rc < 0) {
			b->broken = rc;
			snprintf(b->broken_text, sizeof(b->broken_text), "%s", xp_error_detail());
		}
		return rc;
	}
	int64_t deadline = xpi_deadline_in(b->timeout_ms);
	if (b->rank == 0)
		return root_allgather(b, mine, len, all, deadline);
	return leaf_allgather(b, mine, len, all, deadline);
}

int xpi_boot_barrier(struct xpi_boot *b)
{
	return xpi_boot_allgather(b, NULL, 0, NULL);
}

int xpi_boot_any(struct xpi_boot *b, bool mine, bool *any)
{
	uint8_t me = mine, *all = malloc((size_t)b->size);
	if (all == NULL)
		return -ENOMEM;
	int rc = xpi_boot_allgather(b, &me, 1, all);
	*any = rc == 0 && memchr(all, 1, (size_t)b->size) != NULL;
	free(all);
	return rc;
}

/* Rank 0 after an abort: a rank whose contribution rank 0 never read would
 * get a reset when rank 0 closes, and a reset discards what it has not yet
 * read of the abort. So rank 0 ends its side, and reads what comes until
 * each rank closes (it does on the abort) or ABORT_SEND_MS pass. */
static void root_drain_after_abort(struct xpi_boot *b)
{
	int64_t deadline = xpi_deadline_in(ABORT_SEND_MS);
	int np = 0;
	for (int r = 1; r < b->size; r++)
		if (b->fds[r] >= 0 && shutdown(b->fds[r], SHUT_WR) == 0)
			b->pfds[np++] = (struct pollfd){ .fd = b->fds[r], .events = POLLIN };
	uint8_t sink[512];
	while (np > 0) {
		int ms = xpi_deadline_left_ms(deadline);
		if (ms == 0 || poll(b->pfds, (nfds_t)np, ms) <= 0)
			return;
		for (int i = 0; i < np;) {
			ssize_t k = b->pfds[i].revents == 0 ?
					    1 :
					    recv(b->pfds[i].fd, sink, sizeof(sink), MSG_DONTWAIT);
			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
				b->pfds[i] = b->pfds[--np]; /* that rank closed: done with it */
			else
				i++;
		}
	}
}

void xpi_boot_destroy(struct xpi_boot *b)
{
	if (b == NULL)
		return;
	/* Through PMIx a rank that leaves while others may still be forming
	 * the job says why in one last fence (pmix.h); the thread's detail
	 * is the failure that made it leave. A job that formed leaves with
	 * every rank at the same point, and nobody reads it. */
	if (b->via_pmix)
		xpi_pmix_leave(b->broken == 0, xp_error_detail(), b->timeout_ms);
	if (b->rank == 0 && b->broken != 0 && b->fds != NULL)
		root_drain_after_abort(b);
	if (b->root_fd >= 0)
		close(b->root_fd);
	if (b->fds != NULL)
		for (int r = 1; r < b->size; r++)
			if (b->fds[r] >= 0)
				close(b->fds[r]);
	free(b->fds);
	free(b->got);
	free(b->hdrs);
	free(b->pfds);
	free(b->pranks);
	free(b);
}
