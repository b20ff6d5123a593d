/* SPDX-License-Identifier: MIT */
/* Forming a job through the launcher's PMIx server; see pmix.h. */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <pmix.h>

#include "pmix.h"
#include "auth.h"
#include "sock.h"
#include "unique_id.h"
#include "../core/engine.h"
#include "../core/log.h"
#include "xport/xport.h"

/* What rank 0 puts: its unique id, then the nonce naming the job. */
#define ROOT_VALUE_LEN (sizeof(((struct xp_unique_id *)0)->bytes) + XPI_PMIX_NONCE_LEN)

static bool used;
/* This process in the job, while connected; and the job's generation
 * (pmix.h: the jobs this process formed through PMIx, counted in step on
 * every rank). */
static pmix_proc_t self;
static unsigned generation;

/* "xport.<generation>.<what>": ours alone in the job's key space. */
static void key_of(char *key, const char *what)
{
	snprintf(key, PMIX_MAX_KEYLEN + 1, "xport.%u.%s", generation, what);
}

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

/* A fence in flight: PMIx's progress thread reports its end here. */
struct fence_wait {
	pmix_info_t info[2];
	int efd;
	_Atomic pmix_status_t status;
};

static void fence_done(pmix_status_t status, void *arg)
{
	struct fence_wait *w = arg;
	atomic_store(&w->status, status);
	uint64_t one = 1;
	if (write(w->efd, &one, sizeof(one)) < 0)
		xpi_log(XPI_LOG_WARN, "PMIx: could not wake the rank after a fence");
}

/*
 * A fence over the job. Without @collect, a barrier, after which each rank
 * fetches only the values it wants (PMIx's direct modex); with it, every
 * value put before it reaches every rank's local copy. Waits as the
 * bootstrap's sockets do (xpi_sock_wait): the rank's idle work, if any
 * (sock.h: a transport whose peers need its acknowledgements), goes on.
 */
static pmix_status_t fence(bool collect, int timeout_ms)
{
	struct fence_wait *w = calloc(1, sizeof(*w));
	if (w == NULL)
		return PMIX_ERR_NOMEM;
	w->efd = eventfd(0, EFD_CLOEXEC);
	if (w->efd < 0) {
		free(w);
		return PMIX_ERR_NOMEM;
	}
	atomic_store(&w->status, PMIX_ERR_TIMEOUT);
	PMIX_INFO_LOAD(&w->info[0], PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
	timeout_info(&w->info[1], timeout_ms);
	pmix_status_t st = PMIx_Fence_nb(NULL, 0, w->info, 2, fence_done, w);
	if (st == PMIX_SUCCESS) {
		/* PMIx ends it by its own timeout first; ours, a little later,
		 * is for a server that never answers. Then the callback may
		 * still come: @w stays allocated (once, on a failing path). */
		int64_t deadline = xpi_deadline_in(timeout_ms + 2000);
		if (xpi_sock_wait(w->efd, POLLIN, deadline) < 0)
			return PMIX_ERR_TIMEOUT;
		st = atomic_load(&w->status);
	} else if (st == PMIX_OPERATION_SUCCEEDED) {
		st = PMIX_SUCCESS;
	}
	close(w->efd);
	PMIX_INFO_DESTRUCT(&w->info[0]);
	PMIX_INFO_DESTRUCT(&w->info[1]);
	free(w);
	return st;
}

static pmix_status_t put_bytes(const char *key, const void *p, size_t n)
{
	pmix_value_t v;
	memset(&v, 0, sizeof(v));
	v.type = PMIX_BYTE_OBJECT;
	v.data.bo.bytes = (char *)p;
	v.data.bo.size = n;
	pmix_status_t st = PMIx_Put(PMIX_GLOBAL, key, &v);
	return st == PMIX_SUCCESS ? PMIx_Commit() : st;
}

static pmix_status_t put_string(const char *key, const char *text)
{
	pmix_value_t v;
	memset(&v, 0, sizeof(v));
	v.type = PMIX_STRING;
	v.data.string = (char *)text;
	pmix_status_t st = PMIx_Put(PMIX_GLOBAL, key, &v);
	return st == PMIX_SUCCESS ? PMIx_Commit() : st;
}

/* Rank @rank's value under @key from this process's copy, after a fence
 * that collected it: PMIX_OPTIONAL, so a value that is not there is
 * PMIX_ERR_NOT_FOUND at once, not a request to the server. */
static pmix_status_t get_local(int rank, const char *key, pmix_value_t **v)
{
	pmix_proc_t p;
	pmix_info_t info;
	bool optional = true;
	PMIX_LOAD_PROCID(&p, self.nspace, (pmix_rank_t)rank);
	PMIX_INFO_LOAD(&info, PMIX_OPTIONAL, &optional, PMIX_BOOL);
	*v = NULL;
	pmix_status_t st = PMIx_Get(&p, key, &info, 1, v);
	PMIX_INFO_DESTRUCT(&info);
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

/* Rank 0: makes the id and the nonce and puts them for the others; or, if
 * it cannot, its error, so that every rank fails at once with it. The id's
 * listening socket is closed: the job forms through PMIx, and its address
 * serves the others only to find the interface that reaches rank 0. */
static int put_root(struct xp_unique_id *id, uint8_t *nonce, const char *key)
{
	int rc = xp_get_unique_id(id);
	if (rc == 0) {
		struct xpi_uid u;
		if (xpi_uid_parse(id->bytes, sizeof(id->bytes), &u, NULL) == 0) {
			int fd = xpi_uid_take_listener(&u);
			if (fd >= 0)
				close(fd);
		}
		rc = xpi_auth_random(nonce, XPI_PMIX_NONCE_LEN);
		if (rc < 0)
			xpi_log_detail(XPI_LOG_INFO, "rank 0: getrandom failed: %s",
				       xp_strerror(rc));
	}
	if (rc < 0) {
		char why[400];
		snprintf(why, sizeof(why), "%s", xp_error_detail());
		if (put_string(key, why) != PMIX_SUCCESS)
			xpi_log(XPI_LOG_WARN,
				"PMIx: rank 0 could not put its error for the others");
		xpi_set_thread_detail(why);
		return rc;
	}
	uint8_t value[ROOT_VALUE_LEN];
	memcpy(value, id->bytes, sizeof(id->bytes));
	memcpy(value + sizeof(id->bytes), nonce, XPI_PMIX_NONCE_LEN);
	pmix_status_t st = put_bytes(key, value, sizeof(value));
	return st == PMIX_SUCCESS ? 0 : fail(-EPROTO, "putting rank 0's id (PMIx_Put)", st);
}

/* The others: rank 0's id and nonce, or its error (-ECONNREFUSED). */
static int get_root(int timeout_ms, const char *key, struct xp_unique_id *id, uint8_t *nonce)
{
	pmix_proc_t root;
	pmix_info_t info;
	pmix_value_t *v = NULL;
	PMIX_LOAD_PROCID(&root, self.nspace, 0);
	timeout_info(&info, timeout_ms);
	pmix_status_t st = PMIx_Get(&root, key, &info, 1, &v);
	PMIX_INFO_DESTRUCT(&info);
	if (st != PMIX_SUCCESS)
		return fail(errno_of(st), "getting rank 0's id (PMIx_Get)", st);
	int rc = 0;
	if (v != NULL && v->type == PMIX_STRING) {
		xpi_log_detail(XPI_LOG_INFO, "PMIx: rank 0 could not start the job: %s",
			       v->data.string != NULL ? v->data.string : "");
		rc = -ECONNREFUSED;
	} else if (v == NULL || v->type != PMIX_BYTE_OBJECT || v->data.bo.size != ROOT_VALUE_LEN) {
		xpi_log_detail(XPI_LOG_INFO,
			       "PMIx: rank 0's value under %s is not an xport id "
			       "(another program's key?)",
			       key);
		rc = -EPROTO;
	} else {
		memcpy(id->bytes, v->data.bo.bytes, sizeof(id->bytes));
		memcpy(nonce, v->data.bo.bytes + sizeof(id->bytes), XPI_PMIX_NONCE_LEN);
	}
	if (v != NULL)
		PMIX_VALUE_RELEASE(v);
	return rc;
}

int xpi_pmix_job(int timeout_ms, struct xpi_pmix_job *job, struct xp_unique_id *id,
		 uint8_t nonce[XPI_PMIX_NONCE_LEN])
{
	pmix_proc_t wild;
	used = false;
	pmix_status_t st = PMIx_Init(&self, NULL, 0);
	if (st != PMIX_SUCCESS)
		return fail(-ECONNREFUSED, "connecting to the launcher (PMIx_Init)", st);
	PMIX_LOAD_PROCID(&wild, self.nspace, PMIX_RANK_WILDCARD);
	long size = get_number(&wild, PMIX_JOB_SIZE);
	int rc = 0;
	if (size < 1 || size > (1L << 24) || self.rank >= (uint32_t)size) {
		xpi_log_detail(XPI_LOG_INFO,
			       "PMIx: the job's size (PMIX_JOB_SIZE) is %ld and this rank %u: not "
			       "a job xport can form",
			       size, self.rank);
		rc = -EPROTO;
		goto out;
	}
	job->rank = (int)self.rank;
	job->size = (int)size;
	job->local_rank = (int)get_number(&self, PMIX_LOCAL_RANK);
	job->local_size = (int)get_number(&wild, PMIX_LOCAL_SIZE);
	get_host(&self, job->host, sizeof(job->host));
	if (size == 1) {
		rc = 1;
		goto out;
	}
	generation++;
	char key[PMIX_MAX_KEYLEN + 1];
	key_of(key, "root");
	if (job->rank == 0)
		rc = put_root(id, nonce, key);
	/* Every rank fences even if rank 0 failed: the others then fail in
	 * their get at once instead of waiting in the fence. */
	st = fence(false, timeout_ms);
	if (rc == 0 && st != PMIX_SUCCESS)
		rc = fail(errno_of(st), "the fence after rank 0 put its id (PMIx_Fence)", st);
	bool root_failed = job->rank == 0 ? rc < 0 : false;
	if (rc == 0 && job->rank != 0) {
		rc = get_root(timeout_ms, key, id, nonce);
		root_failed = rc == -ECONNREFUSED;
	}
	/* On success rank 0 stays connected while the job forms, so its
	 * value outlives every get. When it failed, it waits in a second
	 * fence for the others to read its error, which they join once they
	 * have. */
	if (root_failed)
		(void)fence(false, timeout_ms);
	used = rc == 0;
	if (rc == 0)
		return 0;
out:
	PMIx_Finalize(NULL, 0);
	return rc;
}

int xpi_pmix_allgather(uint32_t seq, int rank, int size, const void *mine, size_t len, void *all,
		       int timeout_ms)
{
	char key[PMIX_MAX_KEYLEN + 1], what[32];
	snprintf(what, sizeof(what), "op.%u", seq);
	key_of(key, what);
	/* A leading byte: PMIx is not asked to carry empty values. */
	uint8_t *part = malloc(len + 1);
	if (part == NULL)
		return -ENOMEM;
	part[0] = 1;
	if (len > 0)
		memcpy(part + 1, mine, len);
	pmix_status_t st = put_bytes(key, part, len + 1);
	free(part);
	if (st != PMIX_SUCCESS)
		return fail(-EPROTO, "putting this rank's part of a control operation (PMIx_Put)",
			    st);
	st = fence(true, timeout_ms);
	if (st != PMIX_SUCCESS) {
		xpi_log_detail(XPI_LOG_INFO,
			       "rank %d: control operation %u while the job formed: the fence "
			       "(PMIx_Fence) failed: %s (the launcher's PMIx server%s)",
			       rank, seq, PMIx_Error_string(st),
			       st == PMIX_ERR_TIMEOUT ? " did not answer in time: a rank is "
							"late or gone" :
							" refused it");
		return errno_of(st);
	}
	if (len > 0)
		memcpy((uint8_t *)all + (size_t)rank * len, mine, len);
	char end_key[PMIX_MAX_KEYLEN + 1];
	key_of(end_key, "end");
	for (int r = 0; r < size; r++) {
		if (r == rank)
			continue;
		pmix_value_t *v;
		st = get_local(r, key, &v);
		int rc = 0;
		if (st != PMIX_SUCCESS || v == NULL) {
			/* Its part is not there: it left instead (xpi_pmix_leave). */
			pmix_value_t *why = NULL;
			bool said = get_local(r, end_key, &why) == PMIX_SUCCESS && why != NULL &&
				    why->type == PMIX_STRING && why->data.string != NULL;
			xpi_log_detail(XPI_LOG_INFO,
				       "rank %d: control operation %u while the job formed: rank "
				       "%d left the job%s%s",
				       rank, seq, r, said ? ": " : " (PMIx has no part of it)",
				       said ? why->data.string : "");
			if (why != NULL)
				PMIX_VALUE_RELEASE(why);
			rc = -ECONNRESET;
		} else if (v->type != PMIX_BYTE_OBJECT || v->data.bo.size < 1) {
			xpi_log_detail(XPI_LOG_INFO,
				       "rank %d: control operation %u: rank %d's part is not an "
				       "xport value",
				       rank, seq, r);
			rc = -EPROTO;
		} else if (v->data.bo.size - 1 != len) {
			xpi_log_detail(XPI_LOG_INFO,
				       "rank %d: control operation %u: rank %d contributed %zu "
				       "bytes, this rank %zu",
				       rank, seq, r, v->data.bo.size - 1, len);
			rc = -EPROTO;
		} else if (len > 0) {
			memcpy((uint8_t *)all + (size_t)r * len, v->data.bo.bytes + 1, len);
		}
		if (v != NULL)
			PMIX_VALUE_RELEASE(v);
		if (rc < 0)
			return rc;
	}
	return 0;
}

void xpi_pmix_leave(bool fence_too, const char *why, int timeout_ms)
{
	if (fence_too) {
		char key[PMIX_MAX_KEYLEN + 1];
		key_of(key, "end");
		if (put_string(key, why) == PMIX_SUCCESS)
			(void)fence(true, timeout_ms);
	}
	PMIx_Finalize(NULL, 0);
}
