/* SPDX-License-Identifier: MIT */
/* Creating and destroying a rank's context; accessors; statistics. */
#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "engine.h"
#include "log.h"

static int pool_hook_reg(void *arg, void *addr, size_t len, void **handle)
{
	const struct xpi_tl_slot *t = arg;
	return t->ops->mem_reg(t->tl, addr, len, handle);
}

static void pool_hook_dereg(void *arg, void *handle)
{
	const struct xpi_tl_slot *t = arg;
	t->ops->mem_dereg(t->tl, handle);
}

int xpi_context_create(int rank, int size, const struct xpi_config *cfg, xp_context_t **out)
{
	xp_context_t *ctx = aligned_alloc(64, xpi_align_up(sizeof(*ctx), 64));
	if (ctx == NULL)
		return -ENOMEM;
	memset(ctx, 0, sizeof(*ctx));
	ctx->rank = rank;
	ctx->size = size;
	ctx->npeers = size; /* endpoint slots: xpi_ep_slots_init */
	ctx->ep_tl_index = -1;
	ctx->cfg = *cfg;
	/* Funneled is serialized too: one thread at a time, always the same. */
	ctx->serialized = cfg->thread_mode != XP_THREAD_MULTI;
	ctx->eager_credit_per_peer = cfg->unexpected_max_bytes / (uint64_t)size;
	ctx->spin_rounds = XPI_SPIN_ROUNDS;
	xpi_mpsc_init(&ctx->cmdq);
	xpi_dlist_init(&ctx->reposts);
	ctx->world = (struct xp_comm){
		.ctx = ctx, .id = 0, .rank = rank, .size = size, .shm_channel = 0
	};
	ctx->shm_channels_used = 1; /* the world's */
	pthread_mutex_init(&ctx->comm_lock, NULL);
	xpi_dlist_init(&ctx->coll_active);
	ctx->comm_ids_used[0] = 1; /* the world's pair */
	/* The endpoints' pair (ep.h), which no communicator may take. */
	ctx->comm_ids_used[(XPI_COMM_IDS / 2 - 1) / 8] |=
		(uint8_t)(1u << ((XPI_COMM_IDS / 2 - 1) % 8));

	int rc = -ENOMEM;
	ctx->peers = calloc((size_t)size, sizeof(*ctx->peers));
	if (ctx->peers == NULL)
		goto err_free_ctx;
	for (int i = 0; i < size; i++) {
		xpi_dlist_init(&ctx->peers[i].held);
		xpi_dlist_init(&ctx->peers[i].pending);
		ctx->peers[i].tl_watch = XPI_NO_TL;
	}
	ctx->wake_fd = -1;
	rc = xpi_match_init(&ctx->match);
	if (rc < 0)
		goto err_free_peers;
	/* Without a wake fd a sleeper only yields (xpi_engine_sleep): slower
	 * to wake, still correct. */
	(void)xpi_engine_sleep_init(ctx);
	rc = xpi_pool_create(cfg->pool_max_bytes, cfg->hugepages, &ctx->pool);
	if (rc < 0)
		goto err_fini_match;
	if (xpi_debug_on("pool"))
		xpi_log(XPI_LOG_INFO, "rank %d: pool of %zu bytes, %s pages", rank,
			ctx->pool->reserved_bytes, ctx->pool->huge ? "hugetlb" : "ordinary");
	*out = ctx;
	return 0;

err_fini_match:
	xpi_engine_sleep_fini(ctx);
	xpi_match_fini(&ctx->match);
err_free_peers:
	free(ctx->peers);
err_free_ctx:
	free(ctx);
	return rc;
}

int xpi_context_add_tl(xp_context_t *ctx, const struct xpi_tl_ops *ops, void *tl)
{
	if (ctx->ntls >= XPI_MAX_TL)
		return -ENOSPC;
	if (ops->eager_max == 0)
		return -EINVAL; /* a backend that forgot it would send nothing eagerly */
	struct xpi_tl_slot *t = &ctx->tls[ctx->ntls];
	t->ops = ops;
	t->tl = tl;
	/* The pool is registered once with every backend, through its hook. */
	struct xpi_reg_hook hook = { .reg = pool_hook_reg, .dereg = pool_hook_dereg, .arg = t };
	int rc = xpi_pool_add_hook(ctx->pool, &hook);
	if (rc < 0)
		return rc;
	/* So are the user's registrations made before it came (the header
	 * promises they cover every transport). The slot counts from now. */
	ctx->ntls++;
	for (uint32_t i = 0; i < ctx->nregs && rc == 0; i++)
		rc = xpi_reg_catch_up(ctx, ctx->regs[i]);
	ctx->ntls--;
	if (rc < 0)
		return rc;
	ctx->ntls++;
	return 0;
}

void xpi_context_set_peer_tl(xp_context_t *ctx, int peer, int tl)
{
	xpi_context_set_peer_lanes(ctx, peer, tl, tl);
}

void xpi_context_set_peer_lanes(xp_context_t *ctx, int peer, int small, int bulk)
{
	struct xpi_peer *p = &ctx->peers[peer];
	p->tl_small = (uint8_t)small;
	p->tl_bulk = (uint8_t)bulk;
	const struct xpi_tl_ops *ops = ctx->tls[small].ops;
	size_t thr = ctx->cfg.rndv_threshold != 0 ? ctx->cfg.rndv_threshold : ops->rndv_threshold;
	/* What the transport cannot carry eagerly goes by rendezvous, and the
	 * route (xp_route_get) reads this same number. */
	if (ops->eager_max != SIZE_MAX && thr > ops->eager_max + 1)
		thr = ops->eager_max + 1;
	p->rndv_threshold = thr;
}

/* Drops everything still queued. The owner token is not needed: no other
 * thread may use the context any more. */
void xpi_context_teardown(xp_context_t *ctx)
{
	/* Operations still queued or posted end cancelled, each with a text
	 * that says why, so a thread that waits for one does not wait for
	 * ever (and touches nothing of this context). */
	struct xpi_qnode *node;
	while ((node = xpi_mpsc_pop(&ctx->cmdq)) != NULL) {
		struct xpi_cmd *cmd = xpi_container_of(node, struct xpi_cmd, node);
		if (cmd->type == XPI_CMD_CANCEL)
			xpi_request_put(xpi_container_of(cmd, xp_request_t, cancel_cmd));
		else if (cmd->type == XPI_CMD_POST)
			xpi_engine_drop_request(ctx, xpi_container_of(cmd, xp_request_t, post_cmd));
	}
	struct xpi_dlink *l;
	while ((l = xpi_dlist_pop_head(&ctx->reposts)) != NULL)
		xpi_engine_drop_request(ctx, xpi_container_of(l, xp_request_t, pending_link));
	while ((l = xpi_dlist_pop_head(&ctx->match.posted_wild)) != NULL)
		xpi_engine_drop_request(ctx, xpi_container_of(l, xp_request_t, posted.link));
	for (uint32_t b = 0; b < ctx->match.posted_exact.nbuckets; b++) {
		while ((l = xpi_dlist_pop_head(&ctx->match.posted_exact.buckets[b])) != NULL)
			xpi_engine_drop_request(ctx,
						xpi_container_of(l, xp_request_t, posted.link));
	}
	ctx->match.posted_exact.count = 0;
	ctx->match.posted_wild_count = 0;
	while ((l = xpi_dlist_pop_head(&ctx->match.unexp_all)) != NULL) {
		struct xpi_msg *m = xpi_container_of(l, struct xpi_msg, u.all_link);
		xpi_dlist_remove(&m->u.hash_link);
		if (m->kind == XPI_MSG_BUF)
			xpi_buf_put(m->buf);
		else if (m->kind == XPI_MSG_RTS)
			ctx->tls[m->tl].ops->msg_release(ctx->tls[m->tl].tl, m);
		free(m);
	}
	ctx->match.unexp_count = 0;
	for (int i = 0; i < ctx->npeers; i++) {
		while ((l = xpi_dlist_pop_head(&ctx->peers[i].held)) != NULL) {
			struct xpi_msg *m = xpi_container_of(l, struct xpi_msg, held_link);
			if (m->kind == XPI_MSG_BUF)
				xpi_buf_put(m->buf);
			else if (m->kind == XPI_MSG_RTS)
				ctx->tls[m->tl].ops->msg_release(ctx->tls[m->tl].tl, m);
			free(m);
		}
		while ((l = xpi_dlist_pop_head(&ctx->peers[i].pending)) != NULL)
			xpi_engine_drop_request(ctx,
						xpi_container_of(l, xp_request_t, pending_link));
	}
	while (ctx->nregs != 0) /* the user still owns and frees each */
		xpi_reg_release(ctx, ctx->regs[ctx->nregs - 1]);
	while (ctx->free_msgs != NULL) {
		struct xpi_msg *m = ctx->free_msgs;
		ctx->free_msgs = *(struct xpi_msg **)m;
		free(m);
	}
}

void xpi_context_destroy(xp_context_t *ctx)
{
	if (ctx == NULL)
		return;
	xpi_pool_destroy(ctx->pool);
	xpi_engine_sleep_fini(ctx);
	free(ctx->timers);
	free(ctx->regs);
	free(ctx->reg_max_end);
	xpi_match_fini(&ctx->match);
	pthread_mutex_destroy(&ctx->comm_lock);
	for (int c = 0; c < (int)XPI_COLL_CHANNELS; c++)
		free(ctx->shm_chan_last[c].readers);
	free(ctx->world.shm_areas);
	free(ctx->world.shm_tmp);
	free(ctx->peers);
	free(ctx->ep_state);
	free(ctx->ep_label);
	free(ctx->ep_slots);
	free(ctx);
}

void xpi_context_set_ranks_here(xp_context_t *ctx, int ranks_here)
{
	cpu_set_t set;
	int ncpus = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : 1;
	ctx->spin_rounds = ranks_here > ncpus ? XPI_SPIN_ROUNDS_SHARED : XPI_SPIN_ROUNDS;
}

XPI_EXPORT int xp_rank(const xp_context_t *ctx)
{
	return ctx != NULL ? ctx->rank : -EINVAL;
}

XPI_EXPORT int xp_size(const xp_context_t *ctx)
{
	return ctx != NULL ? ctx->size : -EINVAL;
}

XPI_EXPORT xp_comm_t *xp_comm_world(xp_context_t *ctx)
{
	return ctx != NULL ? &ctx->world : NULL;
}

XPI_EXPORT int xp_comm_rank(const xp_comm_t *comm)
{
	return comm != NULL ? comm->rank : -EINVAL;
}

XPI_EXPORT int xp_comm_size(const xp_comm_t *comm)
{
	return comm != NULL ? comm->size : -EINVAL;
}

XPI_EXPORT int xp_progress(xp_context_t *ctx)
{
	if (ctx == NULL)
		return xpi_fail(-EINVAL, "xp_progress: the context is NULL");
	if (!xpi_owner_try_acquire(ctx))
		return 0; /* another thread is running this rank's engine */
	int n = xpi_engine_run(ctx);
	return n + xpi_owner_release(ctx);
}

XPI_EXPORT int xp_stats_get(xp_context_t *ctx, xp_stats_t *st)
{
	if (ctx == NULL || st == NULL)
		return xpi_fail(-EINVAL, "xp_stats_get: %s is NULL",
				ctx == NULL ? "the context" : "the stats pointer");
	xp_stats_t s = {
		.sends = atomic_load_explicit(&ctx->st_sends, memory_order_relaxed),
		.recvs = atomic_load_explicit(&ctx->st_recvs, memory_order_relaxed),
		.eager_sends = atomic_load_explicit(&ctx->st_eager, memory_order_relaxed),
		.rndv_sends = atomic_load_explicit(&ctx->st_rndv, memory_order_relaxed),
		.unexpected_now = atomic_load_explicit(&ctx->st_unexp_now, memory_order_relaxed),
		.unexpected_bytes_now =
			atomic_load_explicit(&ctx->st_unexp_bytes_now, memory_order_relaxed),
		.unexpected_bytes_max =
			atomic_load_explicit(&ctx->st_unexp_bytes_max, memory_order_relaxed),
		.pool_bytes = ctx->pool->reserved_bytes + atomic_load(&ctx->pool->large_bytes),
		.pool_bufs_in_use = xpi_pool_in_use(ctx->pool),
		.pool_hugepages = ctx->pool->huge,
	};
	*st = s;
	return 0;
}
