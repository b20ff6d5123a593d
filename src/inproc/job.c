/* SPDX-License-Identifier: MIT */
/* Local jobs: creating N in-process ranks, running a function on each. */
#include <errno.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../core/compiler.h"
#include "../core/log.h"
#include "inproc.h"
#include "job.h"
#include "ring.h"

#define MAX_LOCAL_RANKS 4096
/* Jobs of up to this many ranks get the collectives' areas. */
#define MAX_AREA_RANKS 256

static void *coll_area(void *tl, int rank, unsigned channel)
{
	struct xp_local_job *job = tl;
	if (job->coll_areas == NULL || rank < 0 || rank >= job->n || channel >= XPI_COLL_CHANNELS)
		return NULL;
	return job->coll_areas + ((size_t)rank * XPI_COLL_CHANNELS + channel) * XPI_COLL_AREA;
}

/* Every rank of the job sees every other's memory. */
static bool coll_pair(void *tl, int a, int b)
{
	struct xp_local_job *job = tl;
	return job->coll_areas != NULL && a != b && a >= 0 && b >= 0 && a < job->n && b < job->n;
}

static void job_free(struct xp_local_job *job)
{
	int n = job->n;
	/* Queued messages hold buffers of other ranks' pools and references to
	 * other ranks' requests: release all of them before any pool goes. */
	for (int i = 0; i < n; i++)
		if (job->ctxs[i] != NULL)
			xpi_context_teardown(job->ctxs[i]);
	if (job->rings != NULL) {
		for (size_t i = 0; i < (size_t)n * (size_t)n; i++) {
			if (job->rings[i] != NULL) {
				xpi_ring_drain(job->rings[i]);
				free(job->rings[i]);
			}
		}
	}
	for (int i = 0; i < n; i++) {
		xpi_context_destroy(job->ctxs[i]);
		if (job->tls != NULL) {
			free(job->tls[i].out);
			free(job->tls[i].in);
			free(job->tls[i].scratch);
		}
	}
	if (job->coll_areas != NULL)
		munmap(job->coll_areas, job->coll_areas_len);
	free(job->rings);
	free(job->pools);
	free((void *)job->oob_slots);
	free(job->tls);
	free(job->ctxs);
	free(job);
}

int xpi_local_job_create(int n, const struct xpi_config *cfg, xp_local_job_t **out)
{
	if (n < 1 || n > MAX_LOCAL_RANKS)
		return xpi_fail(-EINVAL, "local job: %d ranks is not 1 to %d", n, MAX_LOCAL_RANKS);
	struct xp_local_job *job = calloc(1, sizeof(*job));
	if (job == NULL)
		return -ENOMEM;
	job->n = n;
	job->asym_barrier =
		syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
	job->ctxs = calloc((size_t)n, sizeof(*job->ctxs));
	job->tls = calloc((size_t)n, sizeof(*job->tls));
	job->pools = calloc((size_t)n, sizeof(*job->pools));
	job->oob_slots = calloc((size_t)n, sizeof(*job->oob_slots));
	job->rings = calloc((size_t)n * (size_t)n, sizeof(*job->rings));
	int rc = -ENOMEM;
	if (job->ctxs == NULL || job->tls == NULL || job->rings == NULL || job->pools == NULL ||
	    job->oob_slots == NULL)
		goto fail;
	if (n > 1 && n <= MAX_AREA_RANKS) {
		job->coll_areas_len = (size_t)n * XPI_COLL_CHANNELS * XPI_COLL_AREA;
		void *p = mmap(NULL, job->coll_areas_len, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		job->coll_areas = p == MAP_FAILED ? NULL : p; /* without: messages */
	}
	for (int i = 0; i < n; i++) {
		struct xpi_inproc *ip = &job->tls[i];
		ip->job = job;
		ip->rank = i;
		ip->out = calloc((size_t)n, sizeof(*ip->out));
		ip->in = calloc((size_t)n, sizeof(*ip->in));
		ip->scratch = malloc(XPI_RING_INLINE_MAX);
		if (ip->out == NULL || ip->in == NULL || ip->scratch == NULL)
			goto fail;
		rc = xpi_context_create(i, n, cfg, &job->ctxs[i]);
		if (rc < 0)
			goto fail;
		ip->ctx = job->ctxs[i];
		job->pools[i] = job->ctxs[i]->pool;
		job->ctxs[i]->local_job = job;
		job->ctxs[i]->oob_barrier = xpi_local_oob_barrier;
		job->ctxs[i]->oob_allgather = xpi_local_oob_allgather;
		job->ctxs[i]->owned_by_job = true;
		job->ctxs[i]->sleepers_barrier = job->asym_barrier;
		xpi_context_set_ranks_here(job->ctxs[i], n);
		if (job->coll_areas != NULL) {
			job->ctxs[i]->host_area = coll_area;
			job->ctxs[i]->host_pair = coll_pair;
			job->ctxs[i]->host_area_tl = job;
		}
		rc = xpi_context_add_tl(job->ctxs[i], &xpi_inproc_ops, ip);
		if (rc < 0)
			goto fail;
		for (int p = 0; p < n; p++) {
			xpi_context_set_peer_tl(job->ctxs[i], p, 0);
			/* One host; the figures measured here (a 0.3 us round
			 * half, copies at memory speed). */
			job->ctxs[i]->peers[p].host = 0;
			job->ctxs[i]->peers[p].lat_ns = 300;
			job->ctxs[i]->peers[p].bw_mbps = 20000;
			job->ctxs[i]->peers[p].worst_lat_intra = 300;
			job->ctxs[i]->peers[p].worst_bw_intra = 20000;
			job->ctxs[i]->peers[p].worst_lat_inter = 0;
			job->ctxs[i]->peers[p].worst_bw_inter = UINT32_MAX;
		}
	}
	*out = job;
	return 0;
fail:
	job_free(job);
	return rc;
}

XPI_EXPORT int xp_local_job_create(int nranks, const xp_config_t *cfg, xp_local_job_t **job)
{
	struct xpi_config icfg;
	xpi_detail_clear();
	if (job == NULL)
		return xpi_fail(-EINVAL, "xp_local_job_create: the job pointer is NULL");
	int rc = xpi_config_resolve(cfg, &icfg);
	if (rc == 0)
		rc = xpi_local_job_create(nranks, &icfg, job);
	return xpi_detail_ensure(rc, "xp_local_job_create");
}

XPI_EXPORT int xp_local_job_context(xp_local_job_t *job, int rank, xp_context_t **ctx)
{
	if (job == NULL || ctx == NULL)
		return xpi_fail(-EINVAL, "xp_local_job_context: %s is NULL",
				job == NULL ? "the job" : "the context pointer");
	if (rank < 0 || rank >= job->n)
		return xpi_fail(-EINVAL, "xp_local_job_context: rank %d is not one of the job's %d",
				rank, job->n);
	*ctx = job->ctxs[rank];
	return 0;
}

XPI_EXPORT void xp_local_job_destroy(xp_local_job_t *job)
{
	if (job != NULL)
		job_free(job);
}

struct rank_thread {
	pthread_t thread;
	int (*fn)(xp_context_t *, void *);
	void *arg;
	xp_context_t *ctx;
	int result;
};

static void *rank_main(void *p)
{
	struct rank_thread *t = p;
	t->result = t->fn(t->ctx, t->arg);
	return NULL;
}

XPI_EXPORT int xp_local_run(int nranks, const xp_config_t *cfg,
			    int (*fn)(xp_context_t *ctx, void *arg), void *arg)
{
	if (fn == NULL)
		return xpi_fail(-EINVAL, "xp_local_run: the rank function is NULL");
	xp_local_job_t *job;
	int rc = xp_local_job_create(nranks, cfg, &job);
	if (rc < 0)
		return rc;
	struct rank_thread *t = calloc((size_t)nranks, sizeof(*t));
	if (t == NULL) {
		xp_local_job_destroy(job);
		return xpi_fail(-ENOMEM, "xp_local_run: no memory for %d rank threads", nranks);
	}
	int started = 1;
	for (int i = 0; i < nranks; i++) {
		t[i] = (struct rank_thread){ .fn = fn, .arg = arg, .ctx = job->ctxs[i] };
		/* Rank 0 runs on the calling thread. */
		if (i > 0 && pthread_create(&t[i].thread, NULL, rank_main, &t[i]) != 0) {
			t[i].result = -EAGAIN;
			break;
		}
		started = i + 1;
	}
	if (started == nranks)
		rank_main(&t[0]);
	else
		t[0].result = -EAGAIN;
	for (int i = 1; i < started; i++)
		pthread_join(t[i].thread, NULL);
	rc = 0;
	for (int i = 0; i < nranks && rc == 0; i++)
		rc = t[i].result;
	free(t);
	xp_local_job_destroy(job);
	return rc;
}
