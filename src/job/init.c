/* SPDX-License-Identifier: MIT */
/*
 * xp_init, xp_init_rank and xp_finalize: forming this process's rank of a
 * job from the launcher's environment (or from a rank, size and unique id)
 * and starting the transports that serve it. With
 * no launcher variables (or a job size of 1) the rank is a job of its own,
 * as MPI's singletons are.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../inproc/inproc.h"
#include "../inproc/job.h"
#include "backend.h"
#include "bootstrap.h"
#include "launcher.h"
#include "oob_tree.h"
#include "sock.h"
#include "../select/card.h"
#include "../select/select.h"
#include "../core/be.h"
#include "../core/compiler.h"
#include "../core/engine.h"
#include "../core/ep.h"
#include "../core/log.h"
#include "../core/self.h"

static int init_singleton(const struct xpi_config *cfg, xp_context_t **out)
{
	xp_local_job_t *job;
	int rc = xpi_local_job_create(1, cfg, &job);
	if (rc < 0)
		return rc;
	job->ctxs[0]->owned_by_job = false; /* xp_finalize destroys the job */
	*out = job->ctxs[0];
	return 0;
}

/* This rank's capability card: what each backend built in can do here and
 * how to reach it, and the rank's XP_TRANSPORTS preference. */
static int make_card(xp_context_t *ctx, struct xpi_boot *boot, struct xpi_card *c)
{
	memset(c, 0, sizeof(*c));
	c->rank = (uint32_t)ctx->rank;
	if (ctx->cfg.host_id[0] != '\0')
		xpi_card_host_id_named(ctx->cfg.host_id, c->host);
	else
		xpi_card_host_id(c->host);
	for (const struct xpi_backend *const *b = xpi_backends; *b != NULL; b++) {
		if (c->ntl == XPI_CARD_MAX_TL)
			break;
		struct xpi_card_tl *t = &c->tl[c->ntl];
		memset(t, 0, sizeof(*t));
		t->type = (*b)->type;
		const char *why = "";
		int rc = (*b)->card(ctx, boot, t, &why);
		if (rc < 0)
			return rc;
		if (rc == 1) {
			if (xpi_debug_on("transport"))
				xpi_log(XPI_LOG_INFO, "rank %d: %s not usable here: %s", ctx->rank,
					(*b)->name, why);
			continue;
		}
		c->ntl++;
	}
	/* XP_TRANSPORTS: checked against this build by xp_init already. */
	if (ctx->cfg.transports[0] != '\0') {
		const char *why = "";
		if (xpi_transports_parse(ctx->cfg.transports, c->allowed, &c->nallowed, &why) < 0) {
			xpi_log_detail(XPI_LOG_INFO, "rank %d: XP_TRANSPORTS=%s: %s", ctx->rank,
				       ctx->cfg.transports, why);
			return -EINVAL;
		}
	}
	return 0;
}

/* What the negotiation learnt: every rank's card and the lanes chosen for
 * each peer, with the transports that failed to set up with it. */
struct negotiation {
	struct xpi_card mine;
	struct xpi_card *theirs; /* by rank */
	struct xpi_lanes *lanes; /* by rank */
	uint32_t *failed;        /* by rank: 1 << type of what failed with it */
	uint8_t *on_need;        /* by rank: its lane's pair is made on first need */
};

static void negotiation_free(struct negotiation *ng)
{
	free(ng->theirs);
	free(ng->lanes);
	free(ng->failed);
	free(ng->on_need);
}

/* The longest of every rank's @mine bytes (at most XPI_CARD_WIRE_MAX), into
 * *@len: one allgather of two bytes a rank. */
static int wire_len_of_all(struct xpi_boot *boot, size_t mine, int n, size_t *len)
{
	uint8_t me[2] = { (uint8_t)(mine >> 8), (uint8_t)mine }, *all = malloc((size_t)n * 2);
	if (all == NULL)
		return -ENOMEM;
	int rc = xpi_boot_allgather(boot, me, 2, all);
	*len = 0;
	for (int p = 0; rc == 0 && p < n; p++) {
		size_t l = (size_t)all[2 * p] << 8 | all[2 * p + 1];
		if (l > *len)
			*len = l;
	}
	if (*len > XPI_CARD_WIRE_MAX)
		*len = XPI_CARD_WIRE_MAX; /* a malformed claim: parse then refuses its card */
	free(all);
	return rc;
}

/* Exchanges cards and picks each peer's lanes with the pure selection
 * both sides compute alike. */
static int negotiate(xp_context_t *ctx, struct xpi_boot *boot, struct negotiation *ng)
{
	int n = ctx->size;
	ng->theirs = calloc((size_t)n, sizeof(*ng->theirs));
	ng->lanes = calloc((size_t)n, sizeof(*ng->lanes));
	ng->failed = calloc((size_t)n, sizeof(*ng->failed));
	ng->on_need = calloc((size_t)n, 1);
	uint8_t *blob = malloc(XPI_CARD_WIRE_MAX), *all = malloc((size_t)n * XPI_CARD_WIRE_MAX);
	int rc = blob == NULL || all == NULL || ng->theirs == NULL || ng->lanes == NULL ||
				 ng->failed == NULL || ng->on_need == NULL ?
			 -ENOMEM :
			 make_card(ctx, boot, &ng->mine);
	if (rc == 0)
		rc = xpi_card_pack(&ng->mine, blob);
	/* Every rank gets every card through rank 0, whose sending grows as
	 * N squared: swap only the bytes the longest card fills (a few
	 * hundred), not the fixed size a card may reach. */
	size_t len = 0;
	if (rc == 0)
		rc = wire_len_of_all(boot, xpi_card_wire_len(&ng->mine), n, &len);
	if (rc == 0)
		rc = xpi_boot_allgather(boot, blob, len, all);
	for (int p = 0; rc == 0 && p < n; p++) {
		const char *why = "";
		if (p == ctx->rank)
			continue;
		if (xpi_card_parse(all + (size_t)p * len, len, &ng->theirs[p], &why) < 0 ||
		    ng->theirs[p].rank != (uint32_t)p) {
			xpi_log_detail(XPI_LOG_INFO,
				       "rank %d: rank %d sent a malformed capability card: %s",
				       ctx->rank, p, why);
			rc = -EPROTO;
			break;
		}
		if (xpi_select(&ng->mine, &ng->theirs[p], &ng->lanes[p], &why) < 0) {
			xpi_log_detail(XPI_LOG_INFO, "rank %d: no transport reaches rank %d: %s",
				       ctx->rank, p, why);
			rc = -EPROTONOSUPPORT;
			break;
		}
	}
	free(blob);
	free(all);
	return rc;
}

/* A transport's declared figures on this rank's card. */
static const struct xpi_card_tl *card_entry(const struct xpi_card *c, uint8_t type)
{
	for (unsigned i = 0; i < c->ntl; i++)
		if (c->tl[i].type == type)
			return &c->tl[i];
	return NULL;
}

/* Every peer's host index (first appearance order of the cards' host
 * ids) and the cost of its lanes, for the collectives. */
static void learn_hosts_and_costs(xp_context_t *ctx, const struct negotiation *ng)
{
	int n = ctx->size;
	for (int p = 0; p < n; p++) {
		const uint8_t *host = p == ctx->rank ? ng->mine.host : ng->theirs[p].host;
		ctx->peers[p].host = p;
		for (int q = 0; q < p; q++) {
			const uint8_t *other = q == ctx->rank ? ng->mine.host : ng->theirs[q].host;
			if (memcmp(host, other, sizeof(ng->mine.host)) == 0) {
				ctx->peers[p].host = ctx->peers[q].host;
				break;
			}
		}
		if (p == ctx->rank)
			continue;
		const struct xpi_card_tl *s = card_entry(&ng->mine, ng->lanes[p].small);
		const struct xpi_card_tl *b = card_entry(&ng->mine, ng->lanes[p].bulk);
		ctx->peers[p].lat_ns = s != NULL ? s->lat_ns : 5000;
		ctx->peers[p].bw_mbps = b != NULL ? b->bw_mbps : 1000;
	}
	int here = 0;
	for (int p = 0; p < n; p++)
		here += ctx->peers[p].host == ctx->peers[ctx->rank].host;
	xpi_context_set_ranks_here(ctx, here);
}

/*
 * Every rank's slowest links within its host and across, to every rank.
 * A rank knows only its own links' figures (its lanes, after any fall
 * back), and a cost model fed with those chooses per rank: with hosts of
 * uneven sizes a rank alone on its host saw no link within it and chose
 * the hierarchical allreduce while the others chose Rabenseifner's, and
 * every rank timed out (issue 24, 5.1). Four figures a rank, big-endian.
 */
#define WORST_BYTES 16

static int share_worst_links(xp_context_t *ctx)
{
	int n = ctx->size, me = ctx->rank;
	uint32_t w[4] = { 0, UINT32_MAX, 0, UINT32_MAX }; /* lat, bw within; lat, bw across */
	for (int p = 0; p < n; p++) {
		if (p == me)
			continue;
		uint32_t *f = ctx->peers[p].host == ctx->peers[me].host ? &w[0] : &w[2];
		if (ctx->peers[p].lat_ns > f[0])
			f[0] = ctx->peers[p].lat_ns;
		if (ctx->peers[p].bw_mbps < f[1])
			f[1] = ctx->peers[p].bw_mbps;
	}
	uint8_t mine[WORST_BYTES], *all = malloc((size_t)n * WORST_BYTES);
	if (all == NULL)
		return xpi_fail(-ENOMEM, "rank %d: no memory for the links' figures", me);
	for (int i = 0; i < 4; i++)
		put_be32(mine + 4 * i, w[i]);
	int rc = ctx->oob_allgather(ctx, mine, WORST_BYTES, all);
	for (int p = 0; rc == 0 && p < n; p++) {
		const uint8_t *f = all + (size_t)p * WORST_BYTES;
		ctx->peers[p].worst_lat_intra = get_be32(f);
		ctx->peers[p].worst_bw_intra = get_be32(f + 4);
		ctx->peers[p].worst_lat_inter = get_be32(f + 8);
		ctx->peers[p].worst_bw_inter = get_be32(f + 12);
	}
	free(all);
	return rc;
}

static void destroy_networked(xp_context_t *ctx)
{
	xpi_context_teardown(ctx);
	xpi_pool_drop_hooks(ctx->pool);
	ctx->tls_closing = true;
	for (int i = ctx->ntls - 1; i >= 0; i--)
		ctx->tls[i].ops->destroy(ctx->tls[i].tl);
	xpi_boot_destroy(ctx->boot);
	xpi_context_destroy(ctx);
}

/* The context's slot of backend @b, or -1 if it serves nobody. */
static int slot_of(const xp_context_t *ctx, const struct xpi_backend *b)
{
	for (int i = 0; i < ctx->ntls; i++)
		if (ctx->tls[i].ops == b->ops)
			return i;
	return -1;
}

/* Backend @b failed to set up with @peer: choose again without it (both
 * sides do, from the same cards and the same failures). The new lanes may
 * only use backends not attached yet, later in the table than @b. */
static int fall_back(xp_context_t *ctx, struct negotiation *ng, int peer,
		     const struct xpi_backend *const *b)
{
	const char *why = "";
	ng->failed[peer] |= 1u << (*b)->type;
	struct xpi_lanes *l = &ng->lanes[peer];
	if (xpi_select_without(&ng->mine, &ng->theirs[peer], ng->failed[peer], l, &why) < 0) {
		xpi_log_detail(XPI_LOG_INFO, "rank %d: %s with rank %d failed to set up, and %s",
			       ctx->rank, (*b)->name, peer, why);
		return -EPROTONOSUPPORT;
	}
	for (const struct xpi_backend *const *e = xpi_backends; e <= b; e++) {
		if (l->small == (*e)->type || l->bulk == (*e)->type) {
			xpi_log_detail(
				XPI_LOG_INFO,
				"rank %d: %s with rank %d failed to set up, and its fallback %s "
				"was set up before it",
				ctx->rank, (*b)->name, peer, (*e)->name);
			return -EPROTONOSUPPORT;
		}
	}
	xpi_log(XPI_LOG_WARN, "rank %d: %s with rank %d failed to set up; falling back to %s",
		ctx->rank, (*b)->name, peer, xpi_tl_type_name(l->small));
	return 0;
}

/* Whether a backend after @b in the table, which carries sideband
 * messages, serves @peer too (a lane of its, or its watcher). */
static bool carried_after(const struct xpi_lanes *l, const struct xpi_backend *const *b)
{
	for (const struct xpi_backend *const *e = b + 1; *e != NULL; e++)
		if ((*e)->carries_sideband &&
		    (l->small == (*e)->type || l->bulk == (*e)->type || l->watch == (*e)->type))
			return true;
	return false;
}

/* Starts every backend in table order for the peers whose lanes use it,
 * falling back where a pair fails, then points each peer's lanes at the
 * transports that serve it. */
static int attach_transports(xp_context_t *ctx, struct xpi_boot *boot, struct negotiation *ng)
{
	int n = ctx->size, me = ctx->rank;
	uint8_t *want = calloc((size_t)n, 1), *ok = calloc((size_t)n, 1);
	int slot_by_type[256];
	int rc = want == NULL || ok == NULL ? -ENOMEM : 0;
	for (int i = 0; i < 256; i++)
		slot_by_type[i] = -1;
	for (const struct xpi_backend *const *b = xpi_backends; rc == 0 && *b != NULL; b++) {
		for (int p = 0; p < n; p++) {
			bool lane =
				ng->lanes[p].small == (*b)->type || ng->lanes[p].bulk == (*b)->type;
			want[p] = p == me                          ? 0 :
				  lane                             ? XPI_WANT_LANE :
				  ng->lanes[p].watch == (*b)->type ? XPI_WANT_WATCH :
								     0;
			if (lane && carried_after(&ng->lanes[p], b))
				want[p] |= XPI_WANT_CARRIED;
			if (want[p] == XPI_WANT_WATCH && ng->on_need[p])
				want[p] |= XPI_WANT_ON_NEED;
			ok[p] = 0;
		}
		rc = (*b)->attach(ctx, boot, want, ok);
		slot_by_type[(*b)->type] = slot_of(ctx, *b);
		for (int p = 0; rc == 0 && p < n; p++) {
			if (ok[p] == XPI_OK_ON_NEED && (want[p] & XPI_WANT_CARRIED))
				ng->on_need[p] = 1;
			if (!want[p] || ok[p])
				continue;
			/* A watcher that failed is no lane: the peer goes on
			 * without one (its end then shows as a timeout). Both
			 * sides see the same failure (attach agrees on @ok). */
			if (ng->lanes[p].small != (*b)->type && ng->lanes[p].bulk != (*b)->type)
				ng->lanes[p].watch = 0;
			else
				rc = fall_back(ctx, ng, p, b);
		}
	}
	for (int p = 0; rc == 0 && p < n; p++) {
		if (p == me)
			continue;
		int small = slot_by_type[ng->lanes[p].small],
		    bulk = slot_by_type[ng->lanes[p].bulk];
		if (small < 0 || bulk < 0) {
			xpi_log_detail(XPI_LOG_INFO, "rank %d: no transport was set up for rank %d",
				       ctx->rank, p);
			rc = -EPROTONOSUPPORT;
			break;
		}
		xpi_context_set_peer_lanes(ctx, p, small, bulk);
		if (ng->lanes[p].watch != 0 && slot_by_type[ng->lanes[p].watch] >= 0)
			ctx->peers[p].tl_watch = (uint8_t)slot_by_type[ng->lanes[p].watch];
	}
	if (rc == 0 && xpi_debug_on("transport")) {
		for (int p = 0; p < n; p++) {
			xp_route_t r;
			if (xp_route_get(ctx, p, 0, &r) == 0)
				xpi_log(XPI_LOG_INFO,
					"rank %d -> rank %d: %s (rendezvous from %zu B, payloads "
					"over %s)",
					ctx->rank, p, r.transport, r.rndv_threshold,
					ctx->tls[ctx->peers[p].tl_bulk].ops->name);
		}
	}
	free(want);
	free(ok);
	return rc;
}

/* Out of band, for ranks of a networked job while it forms: through the
 * bootstrap's connections (xp_oob_barrier and xp_oob_allgather dispatch
 * here until xp_init returns, then to the tree of oob_tree.h). */
/* While a rank waits out of band, its transports keep answering: a peer
 * still sending to it over a transport that needs our acknowledgements
 * (dpdk) would otherwise wait for us while we wait for it. Only if no
 * other thread holds the engine. */
static void progress_while_waiting(void *arg)
{
	xp_context_t *ctx = arg;
	if (xpi_owner_try_acquire(ctx)) {
		xpi_engine_run(ctx);
		xpi_owner_release(ctx);
	}
}

static int oob_boot_barrier(xp_context_t *ctx)
{
	xpi_sock_set_idle(progress_while_waiting, ctx);
	int rc = xpi_boot_barrier(ctx->boot);
	xpi_sock_set_idle(NULL, NULL);
	return rc;
}

static int oob_boot_allgather(xp_context_t *ctx, const void *mine, size_t len, void *all)
{
	xpi_sock_set_idle(progress_while_waiting, ctx);
	int rc = xpi_boot_allgather(ctx->boot, mine, len, all);
	xpi_sock_set_idle(NULL, NULL);
	return rc;
}

/* A rank of a job has XP_EP_JOB_DEFAULT endpoint slots unless XP_EP_MAX
 * says otherwise: every rank pays for them, and most jobs use none. */
#define XP_EP_JOB_DEFAULT 64
static int ep_slots(const struct xpi_config *cfg)
{
	if (cfg->origin[xpi_setting_index("XP_EP_MAX")] != XPI_ORIGIN_DEFAULT)
		return cfg->ep_max;
	return cfg->ep_max < XP_EP_JOB_DEFAULT ? cfg->ep_max : XP_EP_JOB_DEFAULT;
}

static int init_networked(const struct xpi_config *cfg, struct xpi_boot *boot, xp_context_t **out)
{
	xp_context_t *ctx;
	int rc = xpi_context_create(xpi_boot_rank(boot), xpi_boot_size(boot), cfg, &ctx);
	if (rc == 0) {
		rc = xpi_ep_slots_init(ctx, ep_slots(cfg));
		ctx->ep_open = xpi_job_ep_open;
		if (rc < 0)
			xpi_context_destroy(ctx);
	}
	if (rc < 0) {
		xpi_boot_destroy(boot);
		return rc;
	}
	ctx->networked = true;
	ctx->boot = boot;
	ctx->oob_barrier = oob_boot_barrier;
	ctx->oob_allgather = oob_boot_allgather;
	struct negotiation ng = { 0 };
	rc = xpi_self_attach(ctx);
	if (rc == 0)
		rc = negotiate(ctx, boot, &ng);
	if (rc == 0)
		rc = attach_transports(ctx, boot, &ng);
	if (rc == 0)
		learn_hosts_and_costs(ctx, &ng);
	negotiation_free(&ng);
	if (rc == 0)
		rc = share_worst_links(ctx);
	if (rc < 0) {
		destroy_networked(ctx);
		return rc;
	}
	/* That was the bootstrap's last exchange: from here on the job's
	 * out-of-band operations go along a tree over its own transports, and
	 * the star closes, so that no rank holds a socket per rank for the
	 * job's life (issue 26, item 2). Every rank has read the last table
	 * from rank 0 or is reading it: rank 0 has nothing unread, and its
	 * close delivers what it sent before it. */
	ctx->oob_barrier = xpi_oob_tree_barrier;
	ctx->oob_allgather = xpi_oob_tree_allgather;
	if (!ctx->keep_boot) {
		xpi_boot_destroy(ctx->boot);
		ctx->boot = NULL;
	}
	*out = ctx;
	return 0;
}

/* What the bootstrap takes from a rank's settings besides the launcher's
 * variables (launcher.c reads those): the job key, the interface and the
 * boot timeout. The strings point into @cfg. */
static void boot_opts_from_config(struct xpi_boot_opts *o, const struct xpi_config *cfg)
{
	memset(o, 0, sizeof(*o));
	o->timeout_ms = cfg->timeout_ms;
	o->boot_timeout_ms = cfg->boot_timeout_ms;
	o->job_key = cfg->has_job_key ? cfg->job_key : NULL;
	o->require_key = cfg->job_key_required;
	o->socket_ifname = cfg->socket_ifname[0] != '\0' ? cfg->socket_ifname : NULL;
}

/* The same from the environment alone, for the tests that form jobs
 * without xp_init (bootstrap.h). Settings that are not accepted leave
 * their defaults (xp_init would refuse them). */
void xpi_boot_opts_from_env(struct xpi_boot_opts *o, int timeout_ms)
{
	/* The options point into it, so it outlives the call: one per thread,
	 * on the heap (kept for the thread's life; tests only). Not a
	 * thread-local struct: libxport's thread-locals live in the static TLS
	 * block (initial-exec), which a dlopen'ed library (the PyTorch
	 * module) gets only about 1.5 KiB of. */
	static _Thread_local struct xpi_config *cfg;
	if (cfg == NULL && (cfg = malloc(sizeof(*cfg))) == NULL) {
		memset(o, 0, sizeof(*o));
		o->timeout_ms = timeout_ms;
		return;
	}
	if (xpi_config_resolve(NULL, cfg) < 0) {
		memset(o, 0, sizeof(*o));
		o->timeout_ms = timeout_ms;
		return;
	}
	boot_opts_from_config(o, cfg);
	o->timeout_ms = timeout_ms;
	o->boot_timeout_ms = 0;
	const char *bt = getenv("XP_BOOT_TIMEOUT_MS");
	if (bt != NULL && *bt != '\0')
		o->boot_timeout_ms = cfg->boot_timeout_ms;
}

/*
 * This rank cannot run with its settings (@rc, the detail says why). If it
 * belongs to a job, it still joins and leaves at once: the others then
 * fail at their first exchange (rank 0 tells them who left) instead of
 * waiting out their timeout for a rank that will never come. @o: how it
 * would have joined (NULL: from the launcher's variables alone).
 */
static int refuse_settings(int rc, const struct xpi_boot_opts *o)
{
	char detail[512];
	snprintf(detail, sizeof(detail), "%s", xp_error_detail());
	struct xpi_boot_opts def;
	if (o == NULL) {
		memset(&def, 0, sizeof(def));
		def.timeout_ms = XPI_DEFAULT_TIMEOUT_MS;
		/* The settings were refused, but the key still lets this rank
		 * in to say it leaves (rank 0 would refuse it without). */
		const char *key = getenv("XP_JOB_KEY");
		def.job_key = key != NULL && *key != '\0' ? key : NULL;
		o = &def;
	}
	struct xpi_boot_opts leave = *o;
	leave.quiet = true; /* no warning about the key: the refusal is the news */
	leave.require_key = false;
	struct xpi_boot *boot = NULL;
	if (xpi_boot_create(&leave, &boot) == 0) {
		/* Through PMIx the reason goes with it (pmix.h). */
		xpi_set_thread_detail(detail);
		xpi_boot_destroy(boot);
	}
	xpi_set_thread_detail(detail);
	return rc;
}

/* XP_TRANSPORTS against this build; -EINVAL naming it (variable or field). */
static int check_transports(const struct xpi_config *icfg)
{
	char why[256];
	if (icfg->transports[0] == '\0' ||
	    xpi_backends_check_list(icfg->transports, why, sizeof(why)) == 0)
		return 0;
	if (icfg->origin[xpi_setting_index("XP_TRANSPORTS")] == XPI_ORIGIN_CONFIG)
		xpi_log_detail(
			XPI_LOG_INFO,
			"xp_config_t.transports (XP_TRANSPORTS) = \"%s\" is not accepted: %s",
			icfg->transports, why);
	else
		xpi_log_detail(XPI_LOG_INFO, "XP_TRANSPORTS=%s is not accepted: %s",
			       icfg->transports, why);
	return -EINVAL;
}

static int init_with(const xp_config_t *cfg, struct xpi_boot_opts *o, const char *call,
		     xp_context_t **ctx)
{
	struct xpi_config icfg;
	xpi_detail_clear();
	if (ctx == NULL)
		return xpi_fail(-EINVAL, "%s: the context pointer is NULL", call);
	int rc = xpi_config_resolve(cfg, &icfg);
	if (rc < 0)
		return refuse_settings(rc, o->explicit_job ? o : NULL);
	/* The strings the options take from the settings. */
	struct xpi_boot_opts from_cfg;
	boot_opts_from_config(&from_cfg, &icfg);
	o->timeout_ms = from_cfg.timeout_ms;
	o->boot_timeout_ms = from_cfg.boot_timeout_ms;
	o->socket_ifname = from_cfg.socket_ifname;
	o->require_key = from_cfg.require_key;
	if (!o->explicit_job)
		o->job_key = from_cfg.job_key; /* an id brings its own */
	rc = check_transports(&icfg);
	if (rc < 0)
		return refuse_settings(rc, o);
	struct xpi_boot *boot;
	rc = xpi_boot_create(o, &boot);
	if (rc == XPI_BOOT_SINGLETON)
		rc = init_singleton(&icfg, ctx);
	else if (rc == 0)
		rc = init_networked(&icfg, boot, ctx);
	if (rc == 0)
		xpi_xprun_note('I');
	return xpi_detail_ensure(rc, call);
}

XPI_EXPORT int xp_init(const xp_config_t *cfg, xp_context_t **ctx)
{
	struct xpi_boot_opts o = { .timeout_ms = XPI_DEFAULT_TIMEOUT_MS };
	return init_with(cfg, &o, "xp_init", ctx);
}

XPI_EXPORT int xp_init_rank(const xp_config_t *cfg, int rank, int size, const xp_unique_id_t *id,
			    xp_context_t **ctx)
{
	struct xpi_boot_opts o = {
		.timeout_ms = XPI_DEFAULT_TIMEOUT_MS,
		.explicit_job = true, /* launcher variables and XP_JOB_KEY are ignored */
		.rank = rank,
		.size = size,
		.id = id,
	};
	return init_with(cfg, &o, "xp_init_rank", ctx);
}

/* xp_finalize's survivors' barrier: a tag in the world's collective tag
 * space whose kind byte (bits 24-31) is above every kind src/coll uses, so
 * no collective's message can match it, nor it a collective's receive. */
#define SURVIVORS_TAG ((uint64_t)0xff << 24)

/*
 * The job's barrier failed (a rank died, or never came): waits, at most
 * @timeout_ms, until every rank not lost has come this far too, by a
 * zero-byte message to and from each; one lost meanwhile ends its part of
 * the wait at once. Until then this rank keeps its connections open, so a
 * survivor still in a collective sees the rank that died as the cause and
 * not this one leaving (issue 24, 5.2). 0, or -ETIMEDOUT if a survivor
 * never came, or -ENOMEM.
 */
static int survivors_barrier(xp_context_t *ctx, int timeout_ms)
{
	int n = ctx->size;
	xp_comm_t *w = xp_comm_world(ctx);
	xp_request_t **reqs = calloc(2 * (size_t)n, sizeof(*reqs));
	if (reqs == NULL)
		return -ENOMEM;
	/* Posting to a lost peer fails at once: its slot stays NULL. */
	for (int p = 0; p < n; p++) {
		if (p == ctx->rank)
			continue;
		(void)xpi_coll_isend(w, NULL, 0, p, SURVIVORS_TAG, &reqs[2 * p]);
		(void)xpi_coll_irecv(w, NULL, 0, p, SURVIVORS_TAG, &reqs[2 * p + 1]);
	}
	int64_t deadline = xpi_now_ns() + (int64_t)timeout_ms * 1000000;
	int rc = 0;
	for (int i = 0; i < 2 * n; i++) {
		if (reqs[i] == NULL)
			continue;
		int64_t left_ms = (deadline - xpi_now_ns()) / 1000000;
		/* Frees the request whatever happens (cancelled at the deadline). */
		if (xp_wait(&reqs[i], left_ms > 0 ? (int)left_ms : 0, NULL) == -ETIMEDOUT)
			rc = -ETIMEDOUT;
	}
	free(reqs);
	return rc;
}

XPI_EXPORT void xp_finalize(xp_context_t *ctx)
{
	if (ctx == NULL || ctx->owned_by_job)
		return;
	if (!ctx->networked) {
		xp_local_job_destroy(ctx->local_job);
		xpi_xprun_note('F');
		return;
	}
	if (ctx->ep_only) {
		/* No job to wait for: what is queued leaves, within the
		 * timeout, and the endpoints close with the transports. */
		(void)xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
		destroy_networked(ctx);
		return;
	}
	/* Everyone stops sending before anyone closes: a rank that finalizes
	 * early must not look like a dead peer to the others. Bounded by the
	 * context's timeout if some rank never gets here. The barrier goes
	 * along the tree (oob_tree.h), and the messages it sent down the tree
	 * leave before the transports close. */
	int rc = xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
	if (rc == 0) {
		rc = xpi_oob_tree_barrier_leaving(ctx);
		if (rc == 0)
			(void)xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
		if (rc < 0) {
			/* A rank is lost: the others that are left still wait
			 * for one another, and our last messages to them leave
			 * before we close. (Not after a flush that timed out:
			 * the others wait in the barrier we skip.) */
			(void)survivors_barrier(ctx, ctx->cfg.timeout_ms);
			(void)xpi_engine_flush(ctx, ctx->cfg.timeout_ms);
		}
	}
	if (rc < 0) {
		xpi_log(XPI_LOG_WARN, "rank %d: xp_finalize: not every rank reached it: %s",
			ctx->rank, xp_strerror(rc));
	}
	destroy_networked(ctx);
	xpi_xprun_note('F');
}
