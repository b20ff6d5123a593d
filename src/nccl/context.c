/* SPDX-License-Identifier: MIT */
/*
 * The process's one xport context, shared by every NCCL communicator (v11
 * on, each init is a communicator's) and every object made in it, and the
 * registry of the objects NCCL holds.
 *
 * The context is counted: each per-communicator init, each listen, send
 * and receive comm and each registration holds a reference, so it is
 * closed only once nothing of it is left, whatever order NCCL closes
 * things in. Versions before 11 have no finalize: their init pins the
 * context for the life of the process.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/random.h>

#include "plugin.h"

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static xp_context_t *ctx_open; /* written under ctx_lock, read atomically */
static int ctx_refs;
static bool ctx_pinned;
static struct xpn_obj live = { .prev = &live, .next = &live };
static uint64_t stage_key, stage_count;

/* Opens the context: the defaults and the XP_* environment, the
 * interface NCCL_SOCKET_IFNAME names where XP_SOCKET_IFNAME does not say,
 * and any thread may call (NCCL calls from several, and so does the idle
 * progress). Under ctx_lock. */
static int ctx_open_locked(void)
{
	xp_config_t cfg;
	xp_config_init(&cfg);
	if (cfg.socket_ifname == NULL)
		cfg.socket_ifname = xpn_ifname_from_nccl();
	if (cfg.thread_mode != XP_THREAD_MULTI) {
		XPN_INFO("NET/xport : XP_THREAD_MODE ignored: NCCL calls the plugin from "
			 "several threads");
		cfg.thread_mode = XP_THREAD_MULTI;
	}
	xp_context_t *ctx;
	int rc = xp_open(&cfg, &ctx);
	if (rc < 0)
		return rc;
	rc = xpn_idle_start(ctx);
	if (rc < 0) {
		xp_finalize(ctx);
		return rc;
	}
	__atomic_store_n(&ctx_open, ctx, __ATOMIC_RELEASE);
	return 0;
}

int xpn_ctx_get(xp_context_t **ctx)
{
	int rc = 0;
	pthread_mutex_lock(&ctx_lock);
	if (ctx_refs == 0)
		rc = ctx_open_locked();
	if (rc == 0) {
		ctx_refs++;
		*ctx = ctx_open;
	}
	pthread_mutex_unlock(&ctx_lock);
	return rc;
}

void xpn_ctx_put(void)
{
	pthread_mutex_lock(&ctx_lock);
	if (ctx_refs > 0 && --ctx_refs == 0) {
		/* Under the lock, so that an init racing with this close opens a
		 * new context only once this one (and its thread) is gone. */
		xp_context_t *ctx = ctx_open;
		__atomic_store_n(&ctx_open, NULL, __ATOMIC_RELEASE);
		xpn_idle_stop();
		xp_finalize(ctx);
	}
	pthread_mutex_unlock(&ctx_lock);
}

xp_context_t *xpn_ctx(void)
{
	return __atomic_load_n(&ctx_open, __ATOMIC_ACQUIRE);
}

int xpn_ctx_pin(void)
{
	int rc = 0;
	pthread_mutex_lock(&ctx_lock);
	if (!ctx_pinned) {
		if (ctx_refs == 0)
			rc = ctx_open_locked();
		if (rc == 0) {
			ctx_refs++;
			ctx_pinned = true;
		}
	}
	pthread_mutex_unlock(&ctx_lock);
	return rc;
}

void xpn_obj_add(struct xpn_obj *o, enum xpn_kind kind)
{
	o->kind = kind;
	o->magic = xpn_magic(kind);
	pthread_mutex_lock(&ctx_lock);
	o->next = &live;
	o->prev = live.prev;
	live.prev->next = o;
	live.prev = o;
	pthread_mutex_unlock(&ctx_lock);
}

bool xpn_obj_remove(void *p, enum xpn_kind kind)
{
	bool found = false;
	pthread_mutex_lock(&ctx_lock);
	/* Compare addresses first: @p is dereferenced only once it is known
	 * to be a live object, so a freed or foreign pointer costs nothing. */
	for (struct xpn_obj *o = live.next; o != &live; o = o->next) {
		if ((void *)o != p)
			continue;
		if (o->kind == (uint32_t)kind) {
			o->prev->next = o->next;
			o->next->prev = o->prev;
			o->prev = o->next = NULL;
			o->magic = 0;
			found = true;
		}
		break;
	}
	pthread_mutex_unlock(&ctx_lock);
	return found;
}

struct xpn_comm *xpn_stage_find(uint64_t stage_id)
{
	struct xpn_comm *found = NULL;
	pthread_mutex_lock(&ctx_lock);
	for (struct xpn_obj *o = live.next; o != &live; o = o->next) {
		if (o->kind != XPN_SEND)
			continue;
		struct xpn_comm *c = (struct xpn_comm *)o;
		if (!c->connected && c->stage_id == stage_id) {
			found = c;
			break;
		}
	}
	pthread_mutex_unlock(&ctx_lock);
	return found;
}

/* splitmix64's finaliser: distinct inputs give distinct, scattered ids. */
static uint64_t mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

uint64_t xpn_stage_id_new(void)
{
	pthread_mutex_lock(&ctx_lock);
	/* A random key, so that the ids a damaged or forged handle could
	 * name are not the small numbers of a counter. */
	while (stage_key == 0)
		if (getrandom(&stage_key, sizeof(stage_key), 0) != sizeof(stage_key))
			stage_key = (uint64_t)(uintptr_t)&stage_key ^ 0x9e3779b97f4a7c15ull;
	uint64_t id = mix64(stage_key + ++stage_count);
	pthread_mutex_unlock(&ctx_lock);
	return id;
}
