/* SPDX-License-Identifier: MIT */
/*
 * Setting up the DPDK transport in a job: its settings (the EAL's
 * arguments with the rank put in, this rank's address, the test knob that
 * loses datagrams), its capability card entry, the address exchange, and
 * its end, which lingers until what it sent is acknowledged.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "../core/clock.h"
#include "../core/log.h"
#include "../job/backend.h"
#include "../job/bootstrap.h"
#include "../select/card.h"
#include "dpdk_tl.h"

/* How long the end waits for its last datagrams to be acknowledged, and
 * for a quiet wire (a peer's retransmissions answered). */
#define LINGER_MAX_NS (2 * 1000000000LL)
#define LINGER_QUIET_NS (20 * 1000000LL)

static bool dpdk_wanted(const xp_context_t *ctx)
{
	return ctx->cfg.dpdk_eal[0] != '\0' || ctx->cfg.dpdk_ip[0] != '\0';
}

static int parse_ipv4(const char *s, size_t len, uint32_t *ip)
{
	char buf[16];
	unsigned a, b, c, d;
	char end;
	if (len >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, len);
	buf[len] = '\0';
	if (sscanf(buf, "%u.%u.%u.%u%c", &a, &b, &c, &d, &end) != 4 || a > 255 || b > 255 ||
	    c > 255 || d > 255)
		return -EINVAL;
	*ip = a << 24 | b << 16 | c << 8 | d;
	return 0;
}

/* XP_DPDK_IP: one address (this rank's) or a list, rank r taking the r-th;
 * unset: 10.88.0.0/16 numbered by rank from 10.88.0.1. */
static int rank_ip(const char *list, int rank, uint32_t *ip, char *why, size_t n)
{
	if (list[0] == '\0') {
		*ip = (10u << 24 | 88u << 16) + (uint32_t)rank + 1;
		return 0;
	}
	const char *p = list;
	bool one = strchr(list, ',') == NULL;
	for (int i = 0;; i++) {
		size_t len = strcspn(p, ",");
		if (one || i == rank) {
			if (parse_ipv4(p, len, ip) == 0)
				return 0;
			snprintf(why, n, "XP_DPDK_IP: \"%.*s\" is not an IPv4 address", (int)len,
				 p);
			return -EINVAL;
		}
		if (p[len] == '\0') {
			snprintf(why, n, "XP_DPDK_IP lists %d addresses, and rank %d needs its own",
				 i + 1, rank);
			return -EINVAL;
		}
		p += len + 1;
	}
}

/* XP_DPDK_EAL: one argument line for every rank, or lines separated by
 * ';' where rank r takes the r-th (a memif server and its client, one
 * interface each); then every "{rank}" replaced by the rank, so that one
 * line serves every rank of a host (file prefixes, memif ids, cores). */
static int eal_args(const char *tmpl, int rank, char *out, size_t n, char *why, size_t wn)
{
	const char *p = tmpl, *end;
	if (strchr(tmpl, ';') != NULL) {
		for (int i = 0; i < rank; i++) {
			p = strchr(p, ';');
			if (p == NULL) {
				snprintf(
					why, wn,
					"XP_DPDK_EAL has %d lines (';'), and rank %d needs its own",
					i + 1, rank);
				return -EINVAL;
			}
			p++;
		}
	}
	end = strchr(p, ';');
	if (end == NULL)
		end = p + strlen(p);
	size_t used = 0;
	while (p < end) {
		if (strncmp(p, "{rank}", 6) == 0) {
			int k = snprintf(out + used, n - used, "%d", rank);
			if (k < 0 || (size_t)k >= n - used)
				goto too_long;
			used += (size_t)k;
			p += 6;
			continue;
		}
		if (used + 1 >= n)
			goto too_long;
		out[used++] = *p++;
	}
	out[used] = '\0';
	return 0;
too_long:
	snprintf(why, wn, "XP_DPDK_EAL is too long once {rank} is replaced");
	return -EINVAL;
}

/* XP_DPDK_DROP: LOSS[,REORDER[,DUP]], fractions of received datagrams. */
static int parse_drop(const char *s, struct dpdk_drop *d, char *why, size_t n)
{
	double f[3] = { 0, 0, 0 }, sum = 0;
	const char *p = s;
	for (int i = 0; i < 3 && *p != '\0'; i++) {
		char *end;
		f[i] = strtod(p, &end);
		if (end == p || !(f[i] >= 0 && f[i] <= 1) || (*end != ',' && *end != '\0') ||
		    (*end == ',' && i == 2)) {
			snprintf(why, n,
				 "XP_DPDK_DROP=%s is not accepted: LOSS[,REORDER[,DUP]], fractions "
				 "from 0 to 1 (e.g. 0.05,0.01,0.01)",
				 s);
			return -EINVAL;
		}
		sum += f[i];
		p = *end == ',' ? end + 1 : end;
	}
	if (sum > 1) {
		snprintf(why, n, "XP_DPDK_DROP=%s is not accepted: the fractions add up past 1", s);
		return -EINVAL;
	}
	d->loss = (uint32_t)(f[0] * 4294967295.0);
	d->reorder = (uint32_t)(f[1] * 4294967295.0);
	d->dup = (uint32_t)(f[2] * 4294967295.0);
	d->rng = 0x9e3779b97f4a7c15ull;
	return 0;
}

/* This rank's settings, checked: the card refuses a job whose settings do
 * not parse rather than leave its peers to the next transport quietly. */
static int settings(const xp_context_t *ctx, uint32_t *ip, char *eal, size_t eal_len,
		    struct dpdk_drop *drop, char *why, size_t n)
{
	int rc = rank_ip(ctx->cfg.dpdk_ip, ctx->rank, ip, why, n);
	if (rc == 0)
		rc = eal_args(ctx->cfg.dpdk_eal, ctx->rank, eal, eal_len, why, n);
	if (rc == 0 && drop != NULL)
		rc = parse_drop(ctx->cfg.dpdk_drop, drop, why, n);
	return rc;
}

static int dpdk_card(xp_context_t *ctx, struct xpi_boot *boot, struct xpi_card_tl *entry,
		     const char **why)
{
	(void)boot;
	static _Thread_local char text[200];
	if (!dpdk_wanted(ctx)) {
		*why = "neither XP_DPDK_EAL nor XP_DPDK_IP is set";
		return 1;
	}
	uint32_t ip;
	char eal[1100];
	struct dpdk_drop drop;
	if (settings(ctx, &ip, eal, sizeof(eal), &drop, text, sizeof(text)) < 0) {
		xpi_log(XPI_LOG_ERROR, "rank %d: dpdk: %s", ctx->rank, text);
		return -EINVAL;
	}
	/* A DPDK port cannot tell that a peer's process ended: a stream
	 * transport watches (the port itself is opened by attach). */
	entry->caps = XPI_CAP_WATCHED;
	entry->mtu = XPI_DPDK_MSS;
	/* Declared, not measured: kernel bypass, above tcp, below shm. */
	entry->lat_ns = 3000;
	entry->bw_mbps = 5000;
	for (int i = 0; i < 4; i++)
		entry->reach[i] = (uint8_t)(ip >> (24 - 8 * i));
	entry->reach[4] = (uint8_t)(ctx->cfg.dpdk_udp_port >> 8);
	entry->reach[5] = (uint8_t)ctx->cfg.dpdk_udp_port;
	entry->reach_len = 6;
	return 0;
}

/* What each rank tells every other: whether its port is up, where it
 * listens, and its incarnation (which numbers its first datagram too). */
#define XCHG_AUTH 0x1u /* wants datagrams authenticated */
#define XCHG_GCM 0x2u  /* can run AES-256-GCM */
struct xchg {
	uint8_t ok;
	uint8_t auth; /* XCHG_* */
	uint16_t udp_port;
	uint32_t ip;
	uint32_t epoch;
};

static uint32_t fresh_epoch(void)
{
	uint32_t v = 0;
	while (v == 0)
		if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
			v = (uint32_t)xpi_now_ns() | 1;
	return v;
}

static int open_port(struct xpi_dpdk_tl *t, uint32_t *ip, char *why, size_t n)
{
	xp_context_t *ctx = t->ctx;
	char eal[1100];
	int rc = settings(ctx, ip, eal, sizeof(eal), &t->drop, why, n);
	if (rc < 0)
		return rc;
	struct xpi_dpdk_conf conf = {
		.eal = eal,
		.port_id = (uint16_t)ctx->cfg.dpdk_port,
		.ip = *ip,
		.udp_port = (uint16_t)ctx->cfg.dpdk_udp_port,
		.neighbours = ctx->cfg.dpdk_neighbours[0] != '\0' ? ctx->cfg.dpdk_neighbours : NULL,
		.arp_neighbours_only = true, /* the peers, once known (dpdk_attach) */
	};
	return xpi_dpdk_port_open(&conf, &t->port, why, n);
}

/* The key of the pair with @rank in one direction (dpdk_auth.h): what we
 * send (@tx) or what it sends us. */
static int pair_key(struct xpi_dpdk_tl *t, int rank, bool tx, struct xpi_dgram_key *k)
{
	const struct dpdk_addr *a = &t->addrs[rank];
	int mac = (t->my_auth & a->auth & XCHG_GCM) ? XPI_DGRAM_MAC_GCM : XPI_DGRAM_MAC_POLY1305;
	uint32_t me = (uint32_t)t->ctx->rank, them = (uint32_t)rank;
	const uint8_t *job_id = t->has_job_id ? t->job_id : NULL;
	return tx ? xpi_dgram_key_init(k, mac, t->job_key, job_id, me, them, t->epoch, a->epoch) :
		    xpi_dgram_key_init(k, mac, t->job_key, job_id, them, me, a->epoch, t->epoch);
}

bool dpdk_pair_auth(const struct xpi_dpdk_tl *t, int rank)
{
	return ((t->my_auth | t->addrs[rank].auth) & XCHG_AUTH) != 0;
}

int dpdk_pair_rx_key(struct xpi_dpdk_tl *t, int rank, struct xpi_dgram_key *k)
{
	return pair_key(t, rank, false, k);
}

/*
 * Made on first need, as UCX makes an endpoint's lanes: a job's ranks keep
 * only the address exchange's 16 bytes for each rank they never talk to,
 * and the loops of progress visit only pairs made. A datagram from a rank
 * whose pair is not made yet makes it only once its MAC verified with a
 * key derived for the check (dpdk_rx.c): a stranger makes nothing.
 */
struct dpdk_peer *dpdk_peer_get(struct xpi_dpdk_tl *t, int rank)
{
	if (rank < 0 || rank >= t->npeers)
		return NULL;
	if (t->peers[rank] != NULL)
		return t->peers[rank];
	const struct dpdk_addr *a = &t->addrs[rank];
	if (!a->ok)
		return NULL;
	struct dpdk_peer *pr = calloc(1, sizeof(*pr));
	if (pr == NULL)
		return NULL;
	pr->t = t;
	pr->rank = rank;
	xpi_dlist_init(&pr->txq);
	xpi_dlist_init(&pr->rts_out);
	xpi_dlist_init(&pr->bulk_rx);
	pr->auth = dpdk_pair_auth(t, rank);
	if (pr->auth && (pair_key(t, rank, true, &pr->tx_key) < 0 ||
			 pair_key(t, rank, false, &pr->rx_key) < 0)) {
		free(pr);
		return NULL;
	}
	pr->up = true;
	pr->ip = a->ip;
	pr->udp_port = a->udp_port;
	pr->epoch = a->epoch;
	/* Each direction's first psn is its sender's epoch. */
	xpi_rel_tx_init(&pr->tx, &t->rel, t->epoch, xpi_now_ns());
	xpi_rel_rx_init(&pr->rx, &t->rel, a->epoch);
	t->peers[rank] = pr;
	t->made[t->nmade++] = rank;
	return pr;
}

static struct xpi_dpdk_tl *tl_new(xp_context_t *ctx)
{
	struct xpi_dpdk_tl *t = calloc(1, sizeof(*t));
	if (t == NULL)
		return NULL;
	t->peers = calloc((size_t)ctx->size, sizeof(*t->peers));
	t->made = calloc((size_t)ctx->size, sizeof(*t->made));
	t->addrs = calloc((size_t)ctx->size, sizeof(*t->addrs));
	if (t->peers == NULL || t->made == NULL || t->addrs == NULL) {
		free(t->peers);
		free(t->made);
		free(t->addrs);
		free(t);
		return NULL;
	}
	t->ctx = ctx;
	t->npeers = ctx->size;
	t->epoch = fresh_epoch();
	t->timer.fire = dpdk_timer_fire;
	t->credit_per_peer = ctx->eager_credit_per_peer;
	xpi_rel_params_default(&t->rel);
	t->rel.give_up_ns = (int64_t)ctx->cfg.dpdk_peer_timeout_ms * 1000000;
	/* rel.c's defaults are a WAN-shy start; on a LAN a timeout that
	 * backs off past 2 ms only idles the link, and a window floor of 16
	 * datagrams (23 KB) keeps enough in flight that losses are found by
	 * what arrived after them rather than by timeouts: measured over
	 * memif at 20% loss, 0.8 MB/s with rel.c's defaults (20 ms, 4), 13.7
	 * MB/s with these. AIMD still halves the window down to the floor. */
	t->rel.rto_max_ns = 2 * 1000000;
	t->rel.cwnd_min = 16;
	return t;
}

/*
 * Collective (backend.h): every rank takes part in both exchanges, with
 * nothing to offer if it wants no peer of ours or its port failed to open.
 * A pair works if both opened their ports; the second exchange says
 * whether every rank serves some peer, which the end needs (destroy).
 */
static int dpdk_attach(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *want, uint8_t *ok)
{
	int size = ctx->size, me = ctx->rank, nwant = 0;
	for (int p = 0; p < size; p++)
		nwant += p != me && want[p];
	struct xchg mine = { 0 }, *all = calloc((size_t)size, sizeof(*all));
	uint8_t serving = 0, *servings = calloc((size_t)size, 1);
	struct xpi_dpdk_tl *t = nwant > 0 ? tl_new(ctx) : NULL;
	int rc = all != NULL && servings != NULL && (nwant == 0 || t != NULL) ? 0 : -ENOMEM;
	/* Rank 0 first, then the others: a memif client connects only to a
	 * server that listens, and restarting a client whose first try
	 * failed races with the server's handshake (its driver may crash).
	 * Rank 0 as the memif server, the order needs no restart at all. */
	char why[256];
	uint32_t ip = 0;
	bool opened = false;
	for (int wave = 0; rc == 0 && wave < 2; wave++) {
		if (t != NULL && (me == 0) == (wave == 0)) {
			opened = open_port(t, &ip, why, sizeof(why)) == 0;
			if (!opened)
				xpi_log(XPI_LOG_WARN,
					"rank %d: dpdk: %s; its peers go over the next transport",
					me, why);
		}
		rc = xpi_boot_barrier(boot);
	}
	if (rc == 0 && opened) {
		int wait_ms = ctx->cfg.boot_timeout_ms < 10000 ? ctx->cfg.boot_timeout_ms : 10000;
		if (xpi_dpdk_port_wait_link(t->port, wait_ms) == 0)
			mine = (struct xchg){
				.ok = 1,
				.auth = (uint8_t)((ctx->cfg.dpdk_auth ? XCHG_AUTH : 0) |
						  (xpi_dgram_gcm_ok() ? XCHG_GCM : 0)),
				.udp_port = (uint16_t)ctx->cfg.dpdk_udp_port,
				.ip = ip,
				.epoch = t->epoch
			};
		else
			xpi_log(XPI_LOG_WARN,
				"rank %d: dpdk: port %zu's link did not come up in %d ms; its peers "
				"go over the next transport",
				me, ctx->cfg.dpdk_port, wait_ms);
	}
	if (rc == 0)
		rc = xpi_boot_allgather(boot, &mine, sizeof(mine), all);
	int nok = 0;
	/* The job's identity, bound into the pair keys (dpdk_auth.h): two
	 * jobs that share a key never accept each other's datagrams. */
	_Static_assert(XPI_DPDK_JOB_ID_LEN == XPI_BOOT_JOB_ID_LEN, "the job id is the boot's");
	const uint8_t *job_id = xpi_boot_job_id(boot);
	if (t != NULL) {
		memcpy(t->job_key, xpi_boot_key(boot), sizeof(t->job_key));
		if (job_id != NULL)
			memcpy(t->job_id, job_id, sizeof(t->job_id));
		t->has_job_id = job_id != NULL;
		t->my_auth = mine.auth;
	}
	for (int p = 0; rc == 0 && p < size; p++) {
		ok[p] = p != me && want[p] && mine.ok == 1 && all[p].ok == 1;
		/* ARP speaks with peers only. The pair itself is made on first
		 * need (dpdk_peer_get): its MAC is one both CPUs run (GCM
		 * only if both said so), so its keys fail only for want of
		 * memory or of libsodium, which fails that pair then. */
		if (ok[p] && xpi_dpdk_port_allow(t->port, all[p].ip) < 0)
			ok[p] = 0;
		if (ok[p]) {
			/* Its TCP watcher is made with the pair, if TCP can
			 * serve it (both ranks know alike: the selection). */
			bool on_need = want[p] & XPI_WANT_CARRIED;
			t->addrs[p] = (struct dpdk_addr){ .ip = all[p].ip,
							  .epoch = all[p].epoch,
							  .udp_port = all[p].udp_port,
							  .auth = all[p].auth,
							  .ok = true,
							  .watched = on_need };
			if (on_need)
				ok[p] = XPI_OK_ON_NEED;
			nok++;
		}
	}
	serving = nok > 0;
	if (rc == 0)
		rc = xpi_boot_allgather(boot, &serving, 1, servings);
	if (t != NULL) {
		t->all_ranks = rc == 0 && memchr(servings, 0, (size_t)size) == NULL;
		if (rc == 0 && nok > 0) {
			t->tl_index = ctx->ntls;
			rc = xpi_context_add_tl(ctx, &xpi_dpdk_ops, t);
			t->added = rc == 0;
			if (rc == 0 && xpi_debug_on("transport")) {
				uint8_t mac[6];
				xpi_dpdk_port_mac(t->port, mac);
				xpi_log(XPI_LOG_INFO,
					"rank %d: dpdk on port %zu (%02x:%02x:%02x:%02x:%02x:%02x, "
					"%u.%u.%u.%u:%u) to %d peers",
					me, ctx->cfg.dpdk_port, mac[0], mac[1], mac[2], mac[3],
					mac[4], mac[5], mine.ip >> 24, mine.ip >> 16 & 255,
					mine.ip >> 8 & 255, mine.ip & 255, mine.udp_port, nok);
			}
			/* Its ranks close their ports in turn at the end, between
			 * two bootstrap barriers (linger, dpdk_destroy): the
			 * bootstrap must outlive xp_init (init.c closes it
			 * otherwise). */
			if (rc == 0 && t->all_ranks)
				ctx->keep_boot = true;
			if (rc == 0)
				t = NULL; /* the context owns it now */
		}
		if (t != NULL) {
			t->all_ranks = false; /* not every rank comes to its end */
			dpdk_destroy(t);
		}
	}
	free(all);
	free(servings);
	return rc;
}

static bool all_acknowledged(const struct xpi_dpdk_tl *t)
{
	for (int i = 0; i < t->nmade; i++) {
		const struct dpdk_peer *pr = t->peers[t->made[i]];
		if (pr->up && !pr->dead &&
		    (!xpi_dlist_empty(&pr->txq) || xpi_rel_tx_inflight(&pr->tx) != 0))
			return false;
	}
	return true;
}

/*
 * The end of a job: datagrams sent and not yet acknowledged (their first
 * copy or their acknowledgement lost while the peer waited in xp_finalize's
 * barrier) are sent again until acknowledged, and the peers' likewise
 * answered, until the wire has been quiet for a while. Then, if every rank
 * has a port, they all stop polling before any closes its port: memif's
 * driver may crash a poller whose peer disconnects (../shared/lab/DPDK.md).
 */
static void linger(struct xpi_dpdk_tl *t)
{
	t->closing = true;
	int64_t start = xpi_now_ns(), quiet = start;
	for (;;) {
		int64_t now = xpi_now_ns();
		t->in_rx = true;
		int n = xpi_dpdk_poll(t->port, (uint32_t)t->npeers, dpdk_rx_frame, t);
		t->in_rx = false;
		if (n > 0)
			quiet = now;
		dpdk_service(t, now); /* resends, acknowledgements */
		if ((all_acknowledged(t) && now - quiet >= LINGER_QUIET_NS) ||
		    now - start >= LINGER_MAX_NS)
			break;
	}
	xp_context_t *ctx = t->ctx;
	t->close_in_turn = t->all_ranks && ctx->boot != NULL && ctx->nfailed == 0 &&
			   xpi_boot_barrier(ctx->boot) == 0;
}

/* Which MAC the pairs use: "gcm", "poly1305", "off", or "mixed". */
static const char *auth_text(const struct xpi_dpdk_tl *t)
{
	const char *what = NULL;
	for (int i = 0; i < t->nmade; i++) {
		const struct dpdk_peer *pr = t->peers[t->made[i]];
		if (!pr->up)
			continue;
		const char *w = !pr->auth                           ? "off" :
				pr->tx_key.mac == XPI_DGRAM_MAC_GCM ? "gcm" :
								      "poly1305";
		if (what != NULL && strcmp(what, w) != 0)
			return "mixed";
		what = w;
	}
	return what != NULL ? what : "off";
}

/* What the port and each pair's reliability saw: for XP_DEBUG=transport,
 * and for the tests, which check that injected loss was really repaired. */
static void log_stats(const struct xpi_dpdk_tl *t)
{
	struct xpi_dpdk_stats st;
	xpi_dpdk_stats(t->port, &st);
	xpi_log(XPI_LOG_INFO,
		"rank %d: dpdk: frames in %llu (ours %llu, refused %llu%s%s), out %llu (ring full "
		"%llu, by reference %llu%s); checksums %s; arp answered %llu, asked %llu, learned "
		"%llu, refused %llu; XP_DPDK_DROP dropped %llu, reordered %llu, duplicated %llu; "
		"auth %s: bad MAC %llu, replayed %llu",
		t->ctx->rank, (unsigned long long)st.rx_frames, (unsigned long long)st.rx_dgrams,
		(unsigned long long)st.rx_bad, st.rx_bad_why != NULL ? ": " : "",
		st.rx_bad_why != NULL ? st.rx_bad_why : "", (unsigned long long)st.tx_frames,
		(unsigned long long)st.tx_full, (unsigned long long)st.tx_zc,
		st.tx_zc_ok ? "" : ": the port copies",
		st.tx_csum_offload ? "by the device" :
		strcmp(auth_text(t), "off") == 0 ?
				     "in software" :
				     "IPv4's in software, UDP's none (the MAC checks)",
		(unsigned long long)st.arp_answered, (unsigned long long)st.arp_asked,
		(unsigned long long)st.arp_learned, (unsigned long long)st.arp_refused,
		(unsigned long long)t->drop.dropped, (unsigned long long)t->drop.reordered,
		(unsigned long long)t->drop.duplicated, auth_text(t),
		(unsigned long long)t->auth_failed, (unsigned long long)t->auth_replayed);
	for (int i = 0; i < t->nmade; i++) {
		int p = t->made[i];
		const struct dpdk_peer *pr = t->peers[p];
		if (!pr->up)
			continue;
		xpi_log(XPI_LOG_INFO,
			"rank %d: dpdk to rank %d: sent %llu, resent %llu (fast %llu, timeouts %llu, "
			"probes %llu, spurious %llu); received %llu, duplicates %llu, held %llu",
			t->ctx->rank, p, (unsigned long long)pr->tx.st_sent,
			(unsigned long long)pr->tx.st_resent, (unsigned long long)pr->tx.st_fast,
			(unsigned long long)pr->tx.st_timeouts,
			(unsigned long long)pr->tx.st_probes,
			(unsigned long long)pr->tx.st_spurious,
			(unsigned long long)pr->rx.st_delivered, (unsigned long long)pr->rx.st_dups,
			(unsigned long long)pr->rx.st_held);
	}
}

void dpdk_destroy(void *tlp)
{
	struct xpi_dpdk_tl *t = tlp;
	if (t == NULL)
		return;
	if (t->added)
		linger(t);
	if (t->added && xpi_debug_on("transport"))
		log_stats(t);
	xp_context_t *ctx = t->ctx;
	if (t->timer.heap_pos != 0)
		xpi_timer_cancel(ctx, &t->timer);
	t->closing = true;
	for (int i = 0; i < t->nmade; i++) {
		struct dpdk_peer *pr = t->peers[t->made[i]];
		if (!pr->up)
			continue;
		pr->dead = true;
		dpdk_drop_queue(pr);
		struct xpi_dlink *l;
		while ((l = xpi_dlist_pop_head(&pr->rts_out)) != NULL) {
			struct dpdk_rndv_tx *w = xpi_container_of(l, struct dpdk_rndv_tx, link);
			xpi_engine_drop_request(ctx, w->sreq);
			xpi_request_put(w->sreq);
			free(w);
		}
		while ((l = xpi_dlist_pop_head(&pr->bulk_rx)) != NULL) {
			struct dpdk_rndv_rx *x = xpi_container_of(l, struct dpdk_rndv_rx, link);
			if (x->rreq != NULL)
				xpi_engine_drop_request(ctx, x->rreq);
			free(x);
		}
		xpi_rel_rx_drop_all(&pr->rx, &dpdk_rel_rx_ops, pr);
		dpdk_asm_reset(pr);
	}
	for (int i = 0; i < t->nmade; i++) {
		xpi_dgram_key_clear(&t->peers[t->made[i]]->tx_key);
		xpi_dgram_key_clear(&t->peers[t->made[i]]->rx_key);
	}
	explicit_bzero(t->job_key, sizeof(t->job_key));
	free(t->drop.held);
	/* Rank 0 closes first, while the others wait in a barrier touching
	 * nothing of their ports; then the others. A memif peer's driver
	 * handles the other end's disconnect in its interrupt thread, which
	 * crashed here when its own close ran at the same time. */
	if (t->close_in_turn && ctx->rank == 0)
		xpi_dpdk_port_close(t->port);
	if (t->close_in_turn)
		(void)xpi_boot_barrier(ctx->boot);
	if (!t->close_in_turn || ctx->rank != 0)
		xpi_dpdk_port_close(t->port);
	dpdk_txmsg_cache_free(t);
	while (t->free_pkts != NULL) {
		struct dpdk_pkt *k = t->free_pkts;
		t->free_pkts = (struct dpdk_pkt *)k->m;
		free(k);
	}
	for (int i = 0; i < t->nmade; i++)
		free(t->peers[t->made[i]]);
	free(t->peers);
	free(t->made);
	free(t->addrs);
	free(t);
}

/* The EAL cannot be started to look and then started again in the same
 * process (DPDK allows one rte_eal_init), so xport-info does not open a
 * port: usable means configured (a DPDK port is named by the EAL's
 * arguments, which nothing else can guess); xp_init says whether the port
 * then opens. */
static int dpdk_probe(char *note, size_t n)
{
	const char *eal = getenv("XP_DPDK_EAL"), *ip = getenv("XP_DPDK_IP");
	if ((eal == NULL || *eal == '\0') && (ip == NULL || *ip == '\0')) {
		snprintf(note, n,
			 "built with DPDK, not configured: set XP_DPDK_EAL to the EAL arguments "
			 "naming the port's device (and XP_DPDK_IP) to use it");
		return 1;
	}
	snprintf(note, n,
		 "configured (XP_DPDK_EAL%s): UDP/IPv4 on DPDK port %s, its own reliability; "
		 "eager up to %u B, rendezvous in %u KiB windows; whether the port opens, "
		 "xp_init says",
		 ip != NULL && *ip != '\0' ? ", XP_DPDK_IP" : "",
		 getenv("XP_DPDK_PORT") != NULL ? getenv("XP_DPDK_PORT") : "0", XPI_DPDK_EAGER_MAX,
		 XPI_DPDK_WINDOW >> 10);
	return 0;
}

const struct xpi_backend xpi_dpdk_backend = {
	.name = "dpdk",
	.type = XPI_TL_DPDK,
	.ops = &xpi_dpdk_ops,
	.card = dpdk_card,
	.attach = dpdk_attach,
	.probe = dpdk_probe,
};
