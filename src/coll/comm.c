/* SPDX-License-Identifier: MIT */
/*
 * Making communicators: xp_comm_dup, xp_comm_split, xp_comm_free.
 *
 * The id: every member contributes the set of id pairs free on it (a bit
 * each) and the members AND them together over the parent (a recursive
 * doubling allreduce), then all take the lowest pair free everywhere. No
 * central counter, and no id that some member still uses. The members of
 * one split share the id: their groups are disjoint, so their messages
 * never meet. A rank's threads must not make communicators concurrently
 * (as in MPI, the calls are collective and ordered); if one did, the id
 * would be taken here when this rank comes to claim it, and the call fails
 * with -EAGAIN rather than share it.
 *
 * The same AND gives the communicator a shared-memory channel free on
 * every member (shmcoll.c), if one is left: its members' segments' areas
 * for allreduce within a host.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/compiler.h"
#include "../core/log.h"
#include "coll.h"

#define ID_MASK_BYTES (XPI_COMM_IDS / 16)

static void and_bytes(void *acc, const void *in, size_t count, const struct xpi_combine *how)
{
	(void)how;
	uint8_t *a = acc;
	const uint8_t *b = in;
	for (size_t i = 0; i < count; i++)
		a[i] &= b[i];
}

/* Agrees with the members of @parent on an id free on all of them and
 * claims it here; and on a shared-memory channel free on all, or -1. */
static int agree_id(xp_comm_t *parent, const char *call, uint32_t *id, int *channel)
{
	xp_context_t *ctx = parent->ctx;
	uint8_t mask[ID_MASK_BYTES + 1];
	pthread_mutex_lock(&ctx->comm_lock);
	for (size_t i = 0; i < ID_MASK_BYTES; i++)
		mask[i] = (uint8_t)~ctx->comm_ids_used[i];
	mask[ID_MASK_BYTES] = (uint8_t)~ctx->shm_channels_used;
	pthread_mutex_unlock(&ctx->comm_lock);
	struct xpi_sched *s = xpi_sched_new(parent, XPI_COLL_COMM, call);
	if (s == NULL)
		return -ENOMEM;
	s->how = (struct xpi_combine){ and_bytes, 1, 0, 0 };
	int rc = xpi_coll_go(s, xpi_build_allreduce_rd(s, mask, sizeof(mask)), NULL);
	if (rc < 0)
		return rc;
	int pair = -1;
	for (int k = 1; k < XPI_COMM_IDS / 2 && pair < 0; k++)
		if (mask[k / 8] & (1u << (k % 8)))
			pair = k;
	if (pair < 0)
		return xpi_fail(-EAGAIN,
				"rank %d: %s on communicator %u: no communicator id is free on "
				"every member (%d in use at most): free some",
				ctx->rank, call, parent->id, XPI_COMM_IDS / 2);
	pthread_mutex_lock(&ctx->comm_lock);
	bool taken = ctx->comm_ids_used[pair / 8] & (1u << (pair % 8));
	if (!taken)
		ctx->comm_ids_used[pair / 8] |= (uint8_t)(1u << (pair % 8));
	pthread_mutex_unlock(&ctx->comm_lock);
	if (taken)
		return xpi_fail(-EAGAIN,
				"rank %d: %s: communicator id %d was taken on this rank while the "
				"members agreed on it (another thread made a communicator at the "
				"same time)",
				ctx->rank, call, 2 * pair);
	*id = 2u * (uint32_t)pair;
	*channel = -1;
	for (int k = 0; k < (int)XPI_COLL_CHANNELS && *channel < 0; k++)
		if (mask[ID_MASK_BYTES] & (1u << k))
			*channel = k;
	return 0;
}

static void release_id(xp_context_t *ctx, uint32_t id)
{
	uint32_t pair = id / 2;
	pthread_mutex_lock(&ctx->comm_lock);
	ctx->comm_ids_used[pair / 8] &= (uint8_t) ~(1u << (pair % 8));
	pthread_mutex_unlock(&ctx->comm_lock);
}

/* A communicator of the world ranks @members (@n of them, in their new
 * order), of which this rank is @rank. */
static int comm_make(xp_context_t *ctx, uint32_t id, int channel, const int *members, int n,
		     int rank, xp_comm_t **out)
{
	xp_comm_t *c = calloc(1, sizeof(*c));
	int *to = malloc((size_t)n * sizeof(int)), *from = malloc((size_t)ctx->size * sizeof(int));
	if (c == NULL || to == NULL || from == NULL) {
		free(c);
		free(to);
		free(from);
		return xpi_fail(-ENOMEM, "rank %d: no memory for a communicator of %d ranks",
				ctx->rank, n);
	}
	for (int w = 0; w < ctx->size; w++)
		from[w] = -1;
	for (int i = 0; i < n; i++) {
		to[i] = members[i];
		from[members[i]] = i;
	}
	/* The channel, unless another thread's communicator took it while the
	 * members agreed (then the first allreduce finds that not every member
	 * has it). */
	pthread_mutex_lock(&ctx->comm_lock);
	if (channel >= 0 && (ctx->shm_channels_used & (1u << channel)))
		channel = -1;
	if (channel >= 0)
		ctx->shm_channels_used |= (uint8_t)(1u << channel);
	pthread_mutex_unlock(&ctx->comm_lock);
	*c = (struct xp_comm){ .ctx = ctx,
			       .id = id,
			       .rank = rank,
			       .size = n,
			       .to_world = to,
			       .from_world = from,
			       .shm_channel = channel };
	*out = c;
	return 0;
}

XPI_EXPORT int xp_comm_dup(xp_comm_t *comm, xp_comm_t **out)
{
	if (comm == NULL || out == NULL)
		return xpi_fail(-EINVAL, "xp_comm_dup: %s is NULL",
				comm == NULL ? "the communicator" : "the result pointer");
	uint32_t id;
	int channel;
	int rc = agree_id(comm, "xp_comm_dup", &id, &channel);
	if (rc < 0)
		return rc;
	int *members = malloc((size_t)comm->size * sizeof(int));
	if (members == NULL) {
		release_id(comm->ctx, id);
		return xpi_fail(-ENOMEM, "rank %d: xp_comm_dup: no memory", comm->ctx->rank);
	}
	for (int i = 0; i < comm->size; i++)
		members[i] = xpi_comm_world_rank(comm, i);
	rc = comm_make(comm->ctx, id, channel, members, comm->size, comm->rank, out);
	free(members);
	if (rc < 0)
		release_id(comm->ctx, id);
	return rc;
}

struct split_entry {
	int32_t color, key, rank; /* rank in the parent */
};

static int by_key_then_rank(const void *a, const void *b)
{
	const struct split_entry *x = a, *y = b;
	if (x->key != y->key)
		return x->key < y->key ? -1 : 1;
	return x->rank < y->rank ? -1 : x->rank > y->rank;
}

XPI_EXPORT int xp_comm_split(xp_comm_t *comm, int color, int key, xp_comm_t **out)
{
	if (comm == NULL || out == NULL)
		return xpi_fail(-EINVAL, "xp_comm_split: %s is NULL",
				comm == NULL ? "the communicator" : "the result pointer");
	if (color < 0 && color != XP_UNDEFINED)
		return xpi_fail(-EINVAL,
				"rank %d: xp_comm_split: color %d is negative and not XP_UNDEFINED",
				comm->rank, color);
	int p = comm->size;
	struct split_entry mine = { color, key, comm->rank };
	struct split_entry *all = malloc((size_t)p * sizeof(*all));
	int *members = malloc((size_t)p * sizeof(int));
	if (all == NULL || members == NULL) {
		free(all);
		free(members);
		return xpi_fail(-ENOMEM, "rank %d: xp_comm_split: no memory", comm->rank);
	}
	/* Every member's (color, key), then the id: both over the parent, by
	 * every member, whatever its color. */
	int rc = xp_allgather(comm, &mine, all, sizeof(mine) / 4, XP_INT32);
	uint32_t id = 0;
	int channel = -1;
	if (rc == 0)
		rc = agree_id(comm, "xp_comm_split", &id, &channel);
	if (rc == 0 && color == XP_UNDEFINED) {
		release_id(comm->ctx, id); /* no communicator of ours uses it */
		*out = NULL;
	} else if (rc == 0) {
		int n = 0, me = -1;
		for (int i = 0; i < p; i++)
			if (all[i].color == color)
				all[n++] = all[i];
		qsort(all, (size_t)n, sizeof(*all), by_key_then_rank);
		for (int i = 0; i < n; i++) {
			members[i] = xpi_comm_world_rank(comm, all[i].rank);
			if (all[i].rank == comm->rank)
				me = i;
		}
		rc = comm_make(comm->ctx, id, channel, members, n, me, out);
		if (rc < 0)
			release_id(comm->ctx, id);
	}
	free(all);
	free(members);
	return rc;
}

XPI_EXPORT void xp_comm_free(xp_comm_t *comm)
{
	if (comm == NULL || comm == &comm->ctx->world)
		return;
	release_id(comm->ctx, comm->id);
	xpi_shmcoll_release(comm);
	free(comm->shm_areas);
	free(comm->shm_tmp);
	free(comm->to_world);
	free(comm->from_world);
	free(comm);
}
