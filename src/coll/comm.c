/* SPDX-License-Identifier: MIT */
/*
 * Making communicators: xp_comm_dup, xp_comm_split, xp_comm_create_group,
 * xp_comm_free.
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
 *
 * xp_comm_create_group runs the same agreement among the listed members
 * only, over the parent's collective tag space but as a kind of its own
 * (XPI_COLL_COMM_GROUP), numbered by the program's tag instead of the
 * parent's count of collectives (which the ranks not listed do not
 * advance, so it must not move here either). Its messages can then meet
 * neither the parent's collectives nor another creation with another
 * tag. Two creations that pick the same id have disjoint members, as a
 * split's groups: a member of both would have found the id taken.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/compiler.h"
#include "../core/log.h"
#include "coll.h"

#define ID_MASK_BYTES (XPI_COMM_IDS / 16)

/* What the members agree on over the parent: the ids and channels free
 * on all (AND), and each channel's highest numbers in their areas (MAX),
 * above which the new communicator's start. */
struct agreement {
	uint64_t calls[XPI_COLL_CHANNELS], chunks[XPI_COLL_CHANNELS];
	uint8_t free_ids[ID_MASK_BYTES];
	uint8_t free_channels;
};

static void agree_combine(void *acc_, const void *in_, size_t count, const struct xpi_combine *how)
{
	(void)how;
	struct agreement *a = acc_;
	const struct agreement *b = in_;
	for (size_t n = 0; n < count; n++, a++, b++) {
		for (size_t i = 0; i < ID_MASK_BYTES; i++)
			a->free_ids[i] &= b->free_ids[i];
		a->free_channels &= b->free_channels;
		for (unsigned c = 0; c < XPI_COLL_CHANNELS; c++) {
			a->calls[c] = a->calls[c] > b->calls[c] ? a->calls[c] : b->calls[c];
			a->chunks[c] = a->chunks[c] > b->chunks[c] ? a->chunks[c] : b->chunks[c];
		}
	}
}

struct choice {
	uint32_t id;
	int channel; /* -1: none free everywhere */
	uint64_t calls, chunks;
};

static void release_choice(xp_context_t *ctx, const struct choice *ch)
{
	uint32_t pair = ch->id / 2;
	pthread_mutex_lock(&ctx->comm_lock);
	ctx->comm_ids_used[pair / 8] &= (uint8_t) ~(1u << (pair % 8));
	if (ch->channel >= 0)
		ctx->shm_channels_used &= (uint8_t) ~(1u << ch->channel);
	pthread_mutex_unlock(&ctx->comm_lock);
}

/* Who agrees on a new communicator's id: every member of @parent (@group
 * NULL), or the @n ranks of it in @group, this rank being @group[@me],
 * by a collective numbered @seq. */
struct agreers {
	xp_comm_t *parent;
	const int *group;
	int n, me;
	uint32_t seq;
};

/* Agrees with @who on an id free on all of them, and a shared-memory
 * channel if one is, and claims them here. */
static int agree_id(const struct agreers *who, const char *call, struct choice *ch)
{
	xp_comm_t *parent = who->parent;
	xp_context_t *ctx = parent->ctx;
	struct agreement ag;
	memset(&ag, 0, sizeof(ag));
	xpi_shmcoll_highest(ctx, ag.calls, ag.chunks);
	pthread_mutex_lock(&ctx->comm_lock);
	for (size_t i = 0; i < ID_MASK_BYTES; i++)
		ag.free_ids[i] = (uint8_t)~ctx->comm_ids_used[i];
	ag.free_channels = (uint8_t)~ctx->shm_channels_used;
	pthread_mutex_unlock(&ctx->comm_lock);
	struct xpi_sched *s =
		who->group == NULL ? xpi_sched_new(parent, XPI_COLL_COMM, call) :
				     xpi_sched_new_seq(parent, XPI_COLL_COMM_GROUP, who->seq, call);
	if (s == NULL)
		return -ENOMEM;
	s->how = (struct xpi_combine){ .fn = agree_combine, .elem = sizeof(ag) };
	if (who->group != NULL) {
		/* The steps between the listed ranks only; the others' loss is
		 * none of this call's business. */
		xpi_sched_group(s, who->group, who->n, who->me, 0);
		s->members = who->group;
		s->nmembers = who->n;
	}
	int rc = xpi_build_allreduce_rd(s, &ag, 1);
	xpi_sched_group(s, NULL, parent->size, parent->rank, 0);
	rc = xpi_coll_go(s, rc, NULL);
	if (rc < 0)
		return rc;
	int pair = -1;
	for (int k = 1; k < XPI_COMM_IDS / 2 && pair < 0; k++)
		if (ag.free_ids[k / 8] & (1u << (k % 8)))
			pair = k;
	if (pair < 0)
		return xpi_fail(-EAGAIN,
				"rank %d: %s on communicator %u: no communicator id is free on "
				"every member (%d in use at most): free some",
				ctx->rank, call, parent->id, XPI_COMM_IDS / 2);
	*ch = (struct choice){ .id = 2u * (uint32_t)pair, .channel = -1 };
	for (int k = 0; k < (int)XPI_COLL_CHANNELS && ch->channel < 0; k++)
		if (ag.free_channels & (1u << k))
			ch->channel = k;
	if (ch->channel >= 0) {
		ch->calls = ag.calls[ch->channel];
		ch->chunks = ag.chunks[ch->channel];
	}
	pthread_mutex_lock(&ctx->comm_lock);
	bool taken = (ctx->comm_ids_used[pair / 8] & (1u << (pair % 8))) ||
		     (ch->channel >= 0 && (ctx->shm_channels_used & (1u << ch->channel)));
	if (!taken) {
		ctx->comm_ids_used[pair / 8] |= (uint8_t)(1u << (pair % 8));
		if (ch->channel >= 0)
			ctx->shm_channels_used |= (uint8_t)(1u << ch->channel);
	}
	pthread_mutex_unlock(&ctx->comm_lock);
	if (taken)
		return xpi_fail(-EAGAIN,
				"rank %d: %s: communicator id %d or shared-memory channel %d was "
				"taken on this rank while the members agreed on it (another thread "
				"made a communicator at the same time)",
				ctx->rank, call, 2 * pair, ch->channel);
	return 0;
}

/* A communicator of the world ranks @members (@n of them, in their new
 * order), of which this rank is @rank. */
static int comm_make(xp_context_t *ctx, const struct choice *ch, const int *members, int n,
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
	*c = (struct xp_comm){ .ctx = ctx,
			       .id = ch->id,
			       .rank = rank,
			       .size = n,
			       .to_world = to,
			       .from_world = from,
			       .shm_channel = ch->channel };
	int rc = xpi_shmcoll_join(c, ch->calls, ch->chunks);
	if (rc < 0) {
		free(to);
		free(from);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

XPI_EXPORT int xp_comm_dup(xp_comm_t *comm, xp_comm_t **out)
{
	if (comm == NULL || out == NULL)
		return xpi_fail(-EINVAL, "xp_comm_dup: %s is NULL",
				comm == NULL ? "the communicator" : "the result pointer");
	struct choice ch;
	const struct agreers all = { .parent = comm };
	int rc = agree_id(&all, "xp_comm_dup", &ch);
	if (rc < 0)
		return rc;
	int *members = malloc((size_t)comm->size * sizeof(int));
	if (members == NULL) {
		release_choice(comm->ctx, &ch);
		return xpi_fail(-ENOMEM, "rank %d: xp_comm_dup: no memory", comm->ctx->rank);
	}
	for (int i = 0; i < comm->size; i++)
		members[i] = xpi_comm_world_rank(comm, i);
	rc = comm_make(comm->ctx, &ch, members, comm->size, comm->rank, out);
	free(members);
	if (rc < 0)
		release_choice(comm->ctx, &ch);
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
	struct choice ch;
	const struct agreers everyone = { .parent = comm };
	if (rc == 0)
		rc = agree_id(&everyone, "xp_comm_split", &ch);
	if (rc == 0 && color == XP_UNDEFINED) {
		release_choice(comm->ctx, &ch); /* no communicator of ours uses them */
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
		rc = comm_make(comm->ctx, &ch, members, n, me, out);
		if (rc < 0)
			release_choice(comm->ctx, &ch);
	}
	free(all);
	free(members);
	return rc;
}

/* The checks of xp_comm_create_group's list, which every member makes
 * alike (but for the caller's place in it): 0 and this rank's index in
 * @ranks at *@me, or -EINVAL naming the fault. @seen: comm->size bytes. */
static int check_group(const xp_comm_t *comm, int n, const int *ranks, uint8_t *seen, int *me)
{
	static const char call[] = "xp_comm_create_group";
	char what[160];
	*me = -1;
	for (int i = 0; i < n; i++) {
		int r = ranks[i];
		if (r < 0 || r >= comm->size) {
			snprintf(what, sizeof(what), "ranks[%d] is %d, not one of its %d ranks", i,
				 r, comm->size);
			return xpi_coll_bad(call, comm, what);
		}
		if (seen[r] != 0) {
			int j = 0;
			while (ranks[j] != r)
				j++;
			snprintf(what, sizeof(what),
				 "rank %d is listed twice (ranks[%d] and ranks[%d])", r, j, i);
			return xpi_coll_bad(call, comm, what);
		}
		seen[r] = 1;
		if (r == comm->rank)
			*me = i;
	}
	if (*me < 0) {
		snprintf(what, sizeof(what),
			 "this rank (rank %d of it) is not among the %d listed (only the listed "
			 "ranks call it)",
			 comm->rank, n);
		return xpi_coll_bad(call, comm, what);
	}
	return 0;
}

XPI_EXPORT int xp_comm_create_group(xp_comm_t *comm, int n, const int *ranks, uint64_t tag,
				    xp_comm_t **out)
{
	static const char call[] = "xp_comm_create_group";
	if (comm == NULL || out == NULL)
		return xpi_fail(-EINVAL, "%s: %s is NULL", call,
				comm == NULL ? "the communicator" : "the result pointer");
	if (n < 1 || n > comm->size) {
		char what[128];
		snprintf(what, sizeof(what), "n is %d, not 1 to its %d ranks%s", n, comm->size,
			 n < 1 ? " (a communicator has one at least)" : " (one would repeat)");
		return xpi_coll_bad(call, comm, what);
	}
	if (ranks == NULL)
		return xpi_coll_bad(call, comm, "the list of ranks is NULL");
	uint8_t *seen = calloc((size_t)comm->size, 1);
	int *members = malloc((size_t)n * sizeof(int));
	if (seen == NULL || members == NULL) {
		free(seen);
		free(members);
		return xpi_fail(-ENOMEM, "rank %d: %s: no memory", comm->ctx->rank, call);
	}
	int me;
	int rc = check_group(comm, n, ranks, seen, &me);
	free(seen);
	/* The low 32 bits number the agreement: they are the tags' sequence
	 * field (sched.c), as a collective's count is elsewhere. */
	const struct agreers listed = {
		.parent = comm, .group = ranks, .n = n, .me = me, .seq = (uint32_t)tag
	};
	struct choice ch;
	if (rc == 0)
		rc = agree_id(&listed, call, &ch);
	if (rc == 0) {
		for (int i = 0; i < n; i++)
			members[i] = xpi_comm_world_rank(comm, ranks[i]);
		rc = comm_make(comm->ctx, &ch, members, n, me, out);
		if (rc < 0)
			release_choice(comm->ctx, &ch);
	}
	free(members);
	return rc;
}

XPI_EXPORT void xp_comm_free(xp_comm_t *comm)
{
	if (comm == NULL || comm == &comm->ctx->world)
		return;
	/* The id now; the channel as shmcoll says (it may wait for readers). */
	struct choice ch = { .id = comm->id, .channel = -1 };
	release_choice(comm->ctx, &ch);
	xpi_shmcoll_release(comm);
	free(comm->shm_areas);
	free(comm->shm_tmp);
	free(comm->to_world);
	free(comm->from_world);
	free(comm);
}
