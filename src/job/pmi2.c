/* SPDX-License-Identifier: MIT */
/* Forming a job through Slurm's PMI-2 key-value space; see pmi2.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <slurm/pmi2.h>

#include "pmi2.h"
#include "launcher.h"
#include "../core/engine.h"
#include "../core/log.h"
#include "xport/xport.h"

/* The key rank 0 puts its value under: ours alone in the step's space. The
 * value is a tag and hex digits (PMI-2 values are text; ';' and '=' are
 * its separators): 'I' and the id's 128 bytes, or 'E' and rank 0's error,
 * cut to fit PMI2_MAX_VALLEN. */
#define UID_KEY "xport.uid"
#define ERR_BYTES ((PMI2_MAX_VALLEN - 2) / 2)

/* A PMI-2 call with errno cleared, so that fail() can tell a timed-out
 * read (EAGAIN) from the library's other errors. */
#define CALL(x) (errno = 0, (x))

static bool used;

bool xpi_pmi2_built(void)
{
	return true;
}

bool xpi_pmi2_used(void)
{
	return used;
}

/* A failed PMI-2 call: -ETIMEDOUT if the server did not answer within the
 * timeout (the read on PMI_FD timed out), else -EPROTO. */
static int fail(const char *what, int pmi_rc, int timeout_ms)
{
	bool timed_out = errno == EAGAIN || errno == EWOULDBLOCK;
	if (timed_out)
		xpi_log_detail(XPI_LOG_INFO,
			       "PMI-2: %s: the step's PMI-2 server (slurmstepd, PMI_FD=%s) did "
			       "not answer in %d ms (a task of the step that never came, or "
			       "died?)",
			       what, getenv("PMI_FD"), timeout_ms);
	else
		xpi_log_detail(XPI_LOG_INFO,
			       "PMI-2: %s failed (PMI-2 error %d) with the step's PMI-2 server "
			       "(slurmstepd, PMI_FD=%s)",
			       what, pmi_rc, getenv("PMI_FD"));
	return timed_out ? -ETIMEDOUT : -EPROTO;
}

/* Slurm's libpmi2 reads PMI_FD with blocking reads: a receive timeout on
 * it bounds every wait (the read fails with EAGAIN). Never restored: the
 * session ends with our PMI2_Finalize, which closes the descriptor, or
 * with a failure after which it is of no use. */
static void bound_waits(int timeout_ms)
{
	const char *s = getenv("PMI_FD");
	char *end;
	long fd = s != NULL ? strtol(s, &end, 10) : -1;
	if (s == NULL || *end != '\0' || fd < 0)
		return;
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = timeout_ms % 1000 * 1000 };
	(void)setsockopt((int)fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
}

static void hex_put(char *out, const unsigned char *in, size_t n)
{
	static const char digits[] = "0123456789abcdef";
	for (size_t i = 0; i < n; i++) {
		out[2 * i] = digits[in[i] >> 4];
		out[2 * i + 1] = digits[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static int hex_digit(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	return -1;
}

/* Decodes exactly @n bytes from @in (2n hex digits and nothing else). */
static int hex_get(unsigned char *out, size_t n, const char *in)
{
	if (strlen(in) != 2 * n)
		return -1;
	for (size_t i = 0; i < n; i++) {
		int hi = hex_digit(in[2 * i]), lo = hex_digit(in[2 * i + 1]);
		if (hi < 0 || lo < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

/* Rank 0: makes the id (listening already) and puts it for the others;
 * or, if it cannot, its error, so that every rank fails at once with it. */
static int put_uid(struct xp_unique_id *id, int timeout_ms)
{
	char val[PMI2_MAX_VALLEN];
	int rc = xp_get_unique_id(id);
	char why[ERR_BYTES + 1];
	if (rc < 0) {
		snprintf(why, sizeof(why), "%s", xp_error_detail());
		val[0] = 'E';
		hex_put(val + 1, (const unsigned char *)why, strlen(why));
	} else {
		val[0] = 'I';
		hex_put(val + 1, id->bytes, sizeof(id->bytes));
	}
	int prc = CALL(PMI2_KVS_Put(UID_KEY, val));
	if (rc < 0) {
		xpi_set_thread_detail(why);
		return rc;
	}
	return prc == PMI2_SUCCESS ? 0 :
				     fail("putting rank 0's id (PMI2_KVS_Put)", prc, timeout_ms);
}

static int get_uid(const char *jobid, int timeout_ms, struct xp_unique_id *id)
{
	char val[PMI2_MAX_VALLEN + 1], why[ERR_BYTES + 1];
	int len = 0;
	int prc = CALL(PMI2_KVS_Get(jobid, 0, UID_KEY, val, sizeof(val), &len));
	if (prc != PMI2_SUCCESS)
		return fail("getting rank 0's id (PMI2_KVS_Get)", prc, timeout_ms);
	size_t vn = strlen(val), n = vn > 0 ? (vn - 1) / 2 : 0;
	if (val[0] == 'E' && n < sizeof(why) && hex_get((unsigned char *)why, n, val + 1) == 0) {
		why[n] = '\0';
		xpi_log_detail(XPI_LOG_INFO, "PMI-2: rank 0 could not start the job: %s", why);
		return -ECONNREFUSED;
	}
	if (val[0] != 'I' || hex_get(id->bytes, sizeof(id->bytes), val + 1) < 0) {
		xpi_log_detail(XPI_LOG_INFO, "PMI-2: rank 0's value under " UID_KEY
					     " is not an xport id (another program's key?)");
		return -EPROTO;
	}
	return 0;
}

/* The exchange, once PMI-2 gave a job of more than one rank. Every rank
 * fences twice, even after a failure of its own: the fences are the
 * step's, and a rank that skipped one would leave the others waiting. */
static int exchange(const struct xpi_pmi2_job *job, int timeout_ms, struct xp_unique_id *id)
{
	int rc = job->rank == 0 ? put_uid(id, timeout_ms) : 0;
	int prc = CALL(PMI2_KVS_Fence());
	if (prc != PMI2_SUCCESS)
		return fail("the fence after rank 0 put its id (PMI2_KVS_Fence)", prc, timeout_ms);
	if (rc == 0 && job->rank != 0)
		rc = get_uid(job->jobid, timeout_ms, id);
	if (rc == -ETIMEDOUT)
		return rc; /* the server's answer to the get would come to the fence */
	/* Rank 0's value must outlive every rank's get. */
	prc = CALL(PMI2_KVS_Fence());
	if (prc != PMI2_SUCCESS && rc == 0)
		return fail("the fence after every rank got the id (PMI2_KVS_Fence)", prc,
			    timeout_ms);
	return rc;
}

int xpi_pmi2_job(int timeout_ms, struct xpi_pmi2_job *job, struct xp_unique_id *id)
{
	int spawned = 0, size = 0, rank = -1, appnum = 0;
	used = false;
	/* Slurm serves one session per task, and PMI2_Finalize ends it: a
	 * second xp_init in this process, or an MPI library that uses it. */
	if (PMI2_Initialized())
		return -EALREADY;
	bound_waits(timeout_ms);
	int prc = CALL(PMI2_Init(&spawned, &size, &rank, &appnum));
	if (prc != PMI2_SUCCESS)
		return fail("connecting to the step's server (PMI2_Init)", prc, timeout_ms);
	int rc = 0;
	if (size < 1 || size > XPI_LAUNCH_MAX_SIZE || rank < 0 || rank >= size) {
		xpi_log_detail(XPI_LOG_INFO,
			       "PMI-2: the job's size is %d and this rank %d: not a job xport can "
			       "form",
			       size, rank);
		rc = -EPROTO;
	}
	job->rank = rank;
	job->size = size;
	job->jobid[0] = '\0';
	if (rc == 0 &&
	    (prc = CALL(PMI2_Job_GetId(job->jobid, (int)sizeof(job->jobid)))) != PMI2_SUCCESS)
		rc = fail("reading the job's id (PMI2_Job_GetId)", prc, timeout_ms);
	if (rc == 0 && size == 1)
		rc = 1;
	else if (rc == 0)
		rc = exchange(job, timeout_ms, id);
	/* After a timeout the server's answers are out of step with our
	 * requests: finalizing would wait once more for nothing. */
	if (rc != -ETIMEDOUT)
		PMI2_Finalize();
	used = rc == 0;
	return rc;
}
