/* SPDX-License-Identifier: MIT */
/*
 * The backend registry: how xp_init finds, describes and starts the
 * transports of a networked job, without knowing any of them. Each backend
 * defines one `const struct xpi_backend` in its own directory; the one table
 * that lists them (src/job/backends.c, one line each, in meson one block
 * each) is the only place that names them. Adding a backend touches its
 * directory, that line and that block.
 *
 * The in-process transport (local jobs) and the self transport (a rank to
 * itself) are not in it: the first forms its own kind of job, the second
 * every networked rank has.
 */
#ifndef XPI_BACKEND_H
#define XPI_BACKEND_H

#include <stdint.h>

#include "../core/engine.h"

struct sockaddr_storage;
struct xpi_boot;
struct xpi_card_tl;
struct xpi_config;

/* What a peer wants of a backend (attach's @want). */
enum { XPI_WANT_LANE = 1, XPI_WANT_WATCH = 2, XPI_WANT_CARRIED = 4, XPI_WANT_ON_NEED = 8 };
enum { XPI_OK_ON_NEED = 2 };

struct xpi_backend {
	const char *name; /* as XP_TRANSPORTS names it */
	uint8_t type;     /* enum xpi_tl_type: its card entry, and the lanes' value */
	const struct xpi_tl_ops *ops;

	/*
	 * Describes the backend on this rank for its capability card:
	 * capabilities, cost figures, and what a peer needs to reach it. Called
	 * once per xp_init on the initialising thread, before the cards are
	 * exchanged; may block briefly (probing a device). Returns 0 with
	 * @entry written (type already set), 1 if it cannot be used on this
	 * host (*@why says why, for the log), or a negative code, which fails
	 * xp_init.
	 */
	int (*card)(xp_context_t *ctx, struct xpi_boot *boot, struct xpi_card_tl *entry,
		    const char **why);

	/*
	 * Collective over the job: every rank calls every backend's attach, in
	 * table order, also when it wants no peer of it (the setup's exchanges
	 * need everyone). Sets up what the peers with @want[peer] set need
	 * (the selection is symmetric, so they want us too), agrees with each
	 * through @boot whether the pair works, and writes @ok[peer] = 1 for
	 * those that do; a backend that serves any peer adds itself to @ctx
	 * (xpi_context_add_tl). The core then points those peers' lanes at it.
	 * A pair that fails is not an error: 0 with ok[peer] = 0, and the core
	 * falls back for that peer to the next transport the selection allows
	 * (both sides agree: they computed the same ok). Blocks until done or
	 * the context's timeout. A negative code fails xp_init, having logged
	 * which peer failed and why.
	 */
	int (*attach)(xp_context_t *ctx, struct xpi_boot *boot, const uint8_t *want, uint8_t *ok);
	/* @want[peer]: 0, XPI_WANT_LANE (it carries messages or payloads), or
	 * XPI_WANT_WATCH (it only watches the peer's process end); with
	 * XPI_WANT_CARRIED too, a backend attached after this one carries
	 * sideband messages to the peer (transport.h, sideband_send), so a
	 * pair may be made on first need through them: attach then writes
	 * @ok[peer] = XPI_OK_ON_NEED instead of 1. With XPI_WANT_ON_NEED, a
	 * watcher need not make its pair now: the lane's pair will ask it to
	 * carry what makes it, which makes it (the pair is watched from
	 * then). */

	/*
	 * Whether this host can run the backend at all, without a job: the
	 * device or kernel feature it needs exists and this process may use
	 * it. Returns 0 (usable; @note may tell what it found, e.g. optional
	 * features) or 1 (not usable: @note says why, e.g. "io_uring is
	 * disabled by kernel.io_uring_disabled"). @note is @n bytes, always
	 * written. May block briefly; leaves nothing behind. For xport-info:
	 * xp_init does not call it, so that a backend that fails to set up
	 * with some peer falls back with a warning (attach) rather than
	 * quietly never being offered.
	 */
	int (*probe)(char *note, size_t n);

	/* Its transport carries sideband messages for others (its ops have
	 * sideband_send). */
	bool carries_sideband;

	/*
	 * For a context that is not a job (xp_open): makes the transport,
	 * with no peers but the context's endpoint slots, reached at
	 * @where's address, and adds it to @ctx. NULL: the backend serves
	 * only jobs. 0 or a negative code.
	 */
	int (*open)(xp_context_t *ctx, const struct sockaddr_storage *where);
};

/* Makes the transport of endpoints in @ctx, a rank of a job whose own
 * peers did not need it (open.c; ctx->ep_open). 0 or a negative code. */
int xpi_job_ep_open(xp_context_t *ctx);

/* The backends built in, in attach order, which is also the fallback order:
 * a peer whose pair failed in one is served by a later one. NULL-ended. */
extern const struct xpi_backend *const xpi_backends[];

/* The backend named @name (case-insensitive, @len bytes), or NULL. */
const struct xpi_backend *xpi_backend_find(const char *name, size_t len);

/* Whether XP_TRANSPORTS (@cfg) allows @b: unset allows every one. */
bool xpi_backend_allowed(const struct xpi_config *cfg, const struct xpi_backend *b);

/* The names of the backends built in ("shm, tcp"), and of the transports
 * the capability cards know that this build lacks ("rdma, dpdk"; "" if
 * none). */
void xpi_backends_built(char *out, size_t n);
void xpi_backends_not_built(char *out, size_t n);

/*
 * Checks an XP_TRANSPORTS list against this build: every name must be a
 * backend built in. Returns 0, or -EINVAL with @why naming the first
 * name that is not and what this build has ("rdma is not in this build
 * (built: shm, tcp)").
 */
int xpi_backends_check_list(const char *list, char *why, size_t n);

#endif
