/* SPDX-License-Identifier: MIT */
/* Forming a job through the launcher's PMIx server; see pmix.h. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <pmix.h>

#include "pmix.h"
#include "../core/engine.h"
#include "../core/log.h"
#include "xport/xport.h"

/* The key rank 0 puts its unique id under: ours alone in the job's space. */
#define UID_KEY "xport.uid"

static bool used;

bool xpi_pmix_built(void)
{
	return true;
}

bool xpi_pmix_used(void)
{
	return used;
}

static int fail(int rc, const char *what, pmix_status_t st)
{
	xpi_log_detail(XPI_LOG_INFO, "PMIx: %s failed: %s (the launcher's PMIx server%s)", what,
		       PMIx_Error_string(st),
		       rc == -ETIMEDOUT ? " did not answer in time" : " refused it");
	return rc;
}

static int errno_of(pmix_status_t st)
{
	return st == PMIX_ERR_TIMEOUT ? -ETIMEDOUT : -EPROTO;
}

/* The PMIX_TIMEOUT attribute, in whole seconds (at least 1). */
static void timeout_info(pmix_info_t *info, int timeout_ms)
{
	int s = timeout_ms < 1000 ? 1 : timeout_ms / 1000;
	PMIX_INFO_LOAD(info, PMIX_TIMEOUT, &s, PMIX_INT);
}

/* A fence that collects nothing: a barrier, after which each rank fetches
 * only the values it wants (PMIx's direct modex), not everyone's. */
static pmix_status_t fence(int timeout_ms)
{
	pmix_info_t info[2];
	bool collect = false;
	PMIX_INFO_LOAD(&info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	timeout_info(&info[1], timeout_ms);
	pmix_status_t st = PMIx_Fence(NULL, 0, info, 2);
	PMIX_INFO_DESTRUCT(&info[0]);
	PMIX_INFO_DESTRUCT(&info[1]);
	return st;
}

/* A number PMIx holds for @proc under @key, or -1 if it has none. */
static long get_number(const pmix_proc_t *proc, const char *key)
{
	pmix_value_t *v = NULL;
	long out = -1;
	if (PMIx_Get(proc, key, NULL, 0, &v) != PMIX_SUCCESS || v == NULL)
		return -1;
	if (v->type == PMIX_UINT32)
		out = (long)v->data.uint32;
	else if (v->type == PMIX_UINT16)
		out = (long)v->data.uint16;
	else if (v->type == PMIX_INT)
		out = (long)v->data.integer;
	PMIX_VALUE_RELEASE(v);
	return out;
}

static void get_host(const pmix_proc_t *proc, char *out, size_t n)
{
	pmix_value_t *v = NULL;
	out[0] = '\0';
	if (PMIx_Get(proc, PMIX_HOSTNAME, NULL, 0, &v) != PMIX_SUCCESS || v == NULL)
		return;
	if (v->type == PMIX_STRING && v->data.string != NULL)
		snprintf(out, n, "%s", v->data.string);
	PMIX_VALUE_RELEASE(v);
}

/* Rank 0: makes the id (listening already) and puts it for the others;
 * or, if it cannot, its error, so that every rank fails at once with it. */
static int put_uid(struct xp_unique_id *id)
{
	int rc = xp_get_unique_id(id);
	pmix_value_t v;
	memset(&v, 0, sizeof(v));
	char why[400];
	if (rc < 0) {
		snprintf(why, sizeof(why), "%s", xp_error_detail());
		v.type = PMIX_STRING;
		v.data.string = why;
	} else {
		v.type = PMIX_BYTE_OBJECT;
		v.data.bo.bytes = (char *)id->bytes;
		v.data.bo.size = sizeof(id->bytes);
	}
	pmix_status_t st = PMIx_Put(PMIX_GLOBAL, UID_KEY, &v);
	if (rc < 0) {
		if (st == PMIX_SUCCESS)
			PMIx_Commit();
		xpi_set_thread_detail(why);
		return rc;
	}
	if (st == PMIX_SUCCESS)
		st = PMIx_Commit();
	return st == PMIX_SUCCESS ? 0 : fail(-EPROTO, "putting rank 0's id (PMIx_Put)", st);
}

static int get_uid(const pmix_proc_t *me, int timeout_ms, struct xp_unique_id *id)
{
	pmix_proc_t root;
	pmix_info_t info;
	pmix_value_t *v = NULL;
	PMIX_LOAD_PROCID(&root, me->nspace, 0);
	timeout_info(&info, timeout_ms);
	pmix_status_t st = PMIx_Get(&root, UID_KEY, &info, 1, &v);
	PMIX_INFO_DESTRUCT(&info);
	if (st != PMIX_SUCCESS)
		return fail(errno_of(st), "getting rank 0's id (PMIx_Get)", st);
	int rc = 0;
	if (v != NULL && v->type == PMIX_STRING) {
		xpi_log_detail(XPI_LOG_INFO, "PMIx: rank 0 could not start the job: %s",
			       v->data.string != NULL ? v->data.string : "");
		rc = -ECONNREFUSED;
	} else if (v == NULL || v->type != PMIX_BYTE_OBJECT ||
		   v->data.bo.size != sizeof(id->bytes)) {
		xpi_log_detail(XPI_LOG_INFO, "PMIx: rank 0's value under " UID_KEY
					     " is not an xport id (another program's key?)");
		rc = -EPROTO;
	} else {
		memcpy(id->bytes, v->data.bo.bytes, sizeof(id->bytes));
	}
	if (v != NULL)
		PMIX_VALUE_RELEASE(v);
	return rc;
}

int xpi_pmix_job(int timeout_ms, struct xpi_pmix_job *job, struct xp_unique_id *id)
{
	pmix_proc_t me, wild;
	used = false;
	pmix_status_t st = PMIx_Init(&me, NULL, 0);
	if (st != PMIX_SUCCESS)
		return fail(-ECONNREFUSED, "connecting to the launcher (PMIx_Init)", st);
	PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
	long size = get_number(&wild, PMIX_JOB_SIZE);
	int rc = 0;
	if (size < 1 || size > (1L << 24) || me.rank >= (uint32_t)size) {
		xpi_log_detail(XPI_LOG_INFO,
			       "PMIx: the job's size (PMIX_JOB_SIZE) is %ld and this rank %u: not "
			       "a job xport can form",
			       size, me.rank);
		rc = -EPROTO;
		goto out;
	}
	job->rank = (int)me.rank;
	job->size = (int)size;
	job->local_rank = (int)get_number(&me, PMIX_LOCAL_RANK);
	job->local_size = (int)get_number(&wild, PMIX_LOCAL_SIZE);
	get_host(&me, job->host, sizeof(job->host));
	if (size == 1) {
		rc = 1;
		goto out;
	}
	if (job->rank == 0)
		rc = put_uid(id);
	/* Every rank fences even if rank 0 failed: the others then fail in
	 * their get at once instead of waiting in the fence. */
	st = fence(timeout_ms);
	if (rc == 0 && st != PMIX_SUCCESS)
		rc = fail(errno_of(st), "the fence after rank 0 put its id (PMIx_Fence)", st);
	if (rc == 0 && job->rank != 0)
		rc = get_uid(&me, timeout_ms, id);
	/* Rank 0's value must outlive every rank's get. */
	st = fence(timeout_ms);
	if (rc == 0 && st != PMIX_SUCCESS)
		rc = fail(errno_of(st), "the fence after every rank got the id (PMIx_Fence)", st);
	used = rc == 0;
out:
	PMIx_Finalize(NULL, 0);
	return rc;
}
