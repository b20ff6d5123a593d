/* SPDX-License-Identifier: MIT */
/* Reading the launcher's environment; see launcher.h. Pure: no logging,
 * no process state, everything through the lookup callback. */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "launcher.h"
#include "../core/compiler.h"
#include "sock.h"

static const struct launcher_vars {
	const char *name, *rank_var, *size_var;
} launchers[] = {
	/* In precedence order: see launcher.h. */
	{ "xport", "XP_RANK", "XP_SIZE" },
	{ "Open MPI", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE" },
	{ "MPICH/Intel MPI (PMI)", "PMI_RANK", "PMI_SIZE" },
	{ "torchrun", "RANK", "WORLD_SIZE" },
	{ "Slurm", "SLURM_PROCID", "SLURM_NTASKS" },
};
enum { LAUNCHER_PMI = 2, LAUNCHER_SLURM = 4 };

const char *xpi_env_getenv(void *arg, const char *name)
{
	(void)arg;
	return getenv(name);
}

struct reader {
	xpi_env_get_fn get;
	void *arg;
	struct xpi_launch *e;
};

static const char *var(const struct reader *r, const char *name)
{
	const char *s = r->get(r->arg, name);
	return s != NULL && *s != '\0' ? s : NULL;
}

static int error(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int error(struct reader *r, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->e->error, sizeof(r->e->error), fmt, ap);
	va_end(ap);
	return -EINVAL;
}

/* A decimal integer in [lo, hi]; -EINVAL otherwise. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
	size_t n = strlen(s);
	if (n == 0 || n > 10 || strspn(s, "0123456789") != n)
		return -EINVAL;
	long v = strtol(s, NULL, 10);
	if (v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Slurm host lists                                                       */

static bool host_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '.' || c == '_';
}

/* Compares two digit strings as numbers. */
static int num_cmp(const char *a, size_t an, const char *b, size_t bn)
{
	while (an > 1 && *a == '0') {
		a++;
		an--;
	}
	while (bn > 1 && *b == '0') {
		b++;
		bn--;
	}
	if (an != bn)
		return an < bn ? -1 : 1;
	return memcmp(a, b, an);
}

struct hl {
	const char *list, *p;
	char *out;
	size_t n, used;
	bool copying; /* in the first entry */
	const char *why;
};

static int hl_fail(struct hl *h, const char *why)
{
	h->why = why;
	return -EINVAL;
}

static int hl_put(struct hl *h, const char *s, size_t len)
{
	if (!h->copying)
		return 0;
	if (h->used + len >= h->n)
		return hl_fail(h, "the first host name is too long");
	memcpy(h->out + h->used, s, len);
	h->used += len;
	return 0;
}

/* "[" seen: numbers and ranges up to the "]"; the first number is the
 * first host's. */
static int hl_bracket(struct hl *h)
{
	bool first = true;
	for (;;) {
		const char *lo = h->p;
		size_t lon = strspn(lo, "0123456789");
		if (lon == 0)
			return hl_fail(h, *lo == '\0' ? "a '[' is never closed" :
					  *lo == ']' || *lo == ',' ?
							"an empty range in brackets" :
							"brackets hold something other than "
							"numbers and ranges");
		h->p += lon;
		if (*h->p == '-') {
			const char *hi = ++h->p;
			size_t hin = strspn(hi, "0123456789");
			if (hin == 0)
				return hl_fail(h, "a range without an upper bound");
			if (num_cmp(lo, lon, hi, hin) > 0)
				return hl_fail(
					h, "a range whose lower bound is above its upper bound");
			h->p += hin;
		}
		if (first && hl_put(h, lo, lon) < 0)
			return -EINVAL;
		first = false;
		if (*h->p == ',') {
			h->p++;
		} else if (*h->p == ']') {
			h->p++;
			return 0;
		} else {
			return hl_fail(h,
				       *h->p == '\0' ? "a '[' is never closed" :
				       *h->p == '['  ? "brackets inside brackets" :
						       "brackets hold something other than numbers "
						       "and ranges");
		}
	}
}

int xpi_hostlist_first(const char *list, char *out, size_t n, const char **why, size_t *at)
{
	struct hl h = { .list = list, .p = list, .out = out, .n = n, .copying = true };
	int rc = 0;
	if (list == NULL || n == 0) {
		rc = hl_fail(&h, "no host list");
		goto done;
	}
	for (;;) {
		size_t parts = 0;
		while (rc == 0 && *h.p != '\0' && *h.p != ',') {
			if (*h.p == '[') {
				h.p++;
				rc = hl_bracket(&h);
			} else if (*h.p == ']') {
				rc = hl_fail(&h, "a ']' without a '['");
			} else if (host_char(*h.p)) {
				rc = hl_put(&h, h.p, 1);
				h.p += rc == 0;
			} else {
				rc = hl_fail(&h, "a character that is not allowed in a host name");
			}
			parts++;
		}
		if (rc < 0)
			break;
		if (parts == 0) {
			rc = hl_fail(&h,
				     *list == '\0' ?
					     "an empty host list" :
					     "an empty entry (a comma at an end, or two in a row)");
			break;
		}
		h.copying = false;
		if (*h.p == '\0')
			break;
		h.p++; /* the comma */
		if (*h.p == '\0') {
			rc = hl_fail(&h, "an empty entry (a comma at an end, or two in a row)");
			break;
		}
	}
done:
	if (rc < 0) {
		if (why != NULL)
			*why = h.why;
		if (at != NULL)
			*at = list != NULL ? (size_t)(h.p - list) : 0;
		return rc;
	}
	out[h.used] = '\0';
	return 0;
}

int xpi_slurm_port(unsigned long job_id, unsigned long step_id)
{
	unsigned long slot = job_id % XPI_SLURM_PORT_JOBS, step = step_id % XPI_SLURM_PORT_STEPS;
	return XPI_SLURM_PORT_BASE + (int)(slot * XPI_SLURM_PORT_STEPS + step);
}

int xpi_slurm_resv_port(const char *list)
{
	/* "12000-12003", "12000,12005" or "12000": the first number. */
	size_t n = strspn(list, "0123456789");
	long port;
	char first[8];
	if (n == 0 || n >= sizeof(first) || (list[n] != '\0' && list[n] != '-' && list[n] != ','))
		return -EINVAL;
	memcpy(first, list, n);
	first[n] = '\0';
	if (parse_long(first, 1, 65535, &port) < 0)
		return -EINVAL;
	return (int)port;
}

/* ---------------------------------------------------------------------- */
/* The rendezvous address                                                 */

/* Slurm step ids from here up are its batch, extern and interactive
 * steps (SLURM_BATCH_SCRIPT and neighbours in slurm.h), not srun's. */
#define SLURM_SPECIAL_STEP 0xfffffff0UL

static int slurm_address(struct reader *r)
{
	struct xpi_launch *e = r->e;
	static const char *const lists[] = { "SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST",
					     "SLURM_NODELIST" };
	const char *lv = NULL, *ls = NULL;
	for (size_t i = 0; i < XPI_ARRAY_SIZE(lists) && ls == NULL; i++) {
		lv = lists[i];
		ls = var(r, lv);
	}
	if (ls == NULL)
		return error(
			r,
			"Slurm sets up a job of %d ranks but gives no rendezvous: none of "
			"XP_ADDR, MASTER_ADDR/MASTER_PORT or SLURM_STEP_NODELIST "
			"(SLURM_JOB_NODELIST, SLURM_NODELIST) is set: export XP_ADDR=host:port "
			"naming rank 0's host and a free port",
			e->size);
	const char *why = "";
	size_t at = 0;
	if (xpi_hostlist_first(ls, e->host, sizeof(e->host), &why, &at) < 0)
		return error(r,
			     "%s=%s is not a Slurm host list: %s (at character %zu); export "
			     "XP_ADDR=host:port to name rank 0's address instead",
			     lv, ls, why, at + 1);
	const char *js = var(r, "SLURM_JOB_ID"), *sv = "SLURM_STEP_ID";
	const char *ss = var(r, sv);
	if (ss == NULL) {
		sv = "SLURM_STEPID"; /* the older name */
		ss = var(r, sv);
	}
	long job, step;
	if (js == NULL || ss == NULL)
		return error(
			r,
			"Slurm sets up a job of %d ranks and %s=%s, but %s is not set: the "
			"rendezvous port comes from SLURM_JOB_ID and SLURM_STEP_ID, which srun "
			"sets (run the program with srun, or export XP_ADDR=host:port)",
			e->size, lv, ls, js == NULL ? "SLURM_JOB_ID" : "SLURM_STEP_ID");
	if (parse_long(js, 0, 4294967295L, &job) < 0)
		return error(r, "SLURM_JOB_ID=%s is not a Slurm job id (0 to 4294967295)", js);
	if (parse_long(ss, 0, 4294967295L, &step) < 0)
		return error(r, "%s=%s is not a Slurm step id (0 to 4294967295)", sv, ss);
	if ((unsigned long)step >= SLURM_SPECIAL_STEP)
		return error(r,
			     "%s=%s is Slurm's batch, extern or interactive step, not one srun "
			     "started: run the program with srun, or export XP_ADDR=host:port",
			     sv, ss);
	/* Rank 0's handshakes name the step: a rank that reaches another
	 * step's rank 0 on this port is refused at once (bootstrap.c). */
	snprintf(e->job_name, sizeof(e->job_name), "slurm %ld.%ld", job, step);
	const char *rp = var(r, "SLURM_STEP_RESV_PORTS");
	if (rp != NULL) {
		/* Ports Slurm reserved for this step (MpiParams=ports=, or
		 * srun --resv-ports): no other step holds them. */
		int port = xpi_slurm_resv_port(rp);
		if (port < 0)
			return error(r,
				     "SLURM_STEP_RESV_PORTS=%s is not a port list (e.g. "
				     "12000-12003)",
				     rp);
		snprintf(e->port, sizeof(e->port), "%u", (unsigned)(uint16_t)port);
		snprintf(e->addr_from, sizeof(e->addr_from),
			 "the first host of %s, the first port of SLURM_STEP_RESV_PORTS=%s", lv,
			 rp);
		return 0;
	}
	snprintf(e->port, sizeof(e->port), "%d",
		 xpi_slurm_port((unsigned long)job, (unsigned long)step));
	snprintf(e->addr_from, sizeof(e->addr_from),
		 "the first host of %s, port from SLURM_JOB_ID=%s and %s=%s", lv, js, sv, ss);
	return 0;
}

/* MASTER_ADDR on port MASTER_PORT + 1: torchrun's agent serves its store on
 * MASTER_PORT. */
static int master_address(struct reader *r, const char *ma, const char *mp)
{
	struct xpi_launch *e = r->e;
	if (ma == NULL || mp == NULL)
		return error(r, "%s is set but %s is not",
			     ma != NULL ? "MASTER_ADDR" : "MASTER_PORT",
			     ma != NULL ? "MASTER_PORT" : "MASTER_ADDR");
	const char *h = ma;
	size_t hl = strlen(ma);
	if (h[0] == '[' && hl > 2 && h[hl - 1] == ']') { /* "[v6]" */
		h++;
		hl -= 2;
	}
	long port;
	if (hl >= sizeof(e->host) || strchr(ma, ' ') != NULL)
		return error(r, "MASTER_ADDR=%s is not a host name or address", ma);
	if (parse_long(mp, 1, 65535, &port) < 0)
		return error(r, "MASTER_PORT=%s is not a port (1 to 65535)", mp);
	if (port == 65535)
		return error(r,
			     "MASTER_PORT=%s: xport's rendezvous is on MASTER_PORT+1 (torchrun's "
			     "store holds MASTER_PORT), which is past 65535: choose a lower "
			     "MASTER_PORT or export XP_ADDR=host:port",
			     mp);
	memcpy(e->host, h, hl);
	e->host[hl] = '\0';
	snprintf(e->port, sizeof(e->port), "%u", (unsigned)(uint16_t)(port + 1));
	snprintf(e->addr_from, sizeof(e->addr_from),
		 "MASTER_ADDR=%s and MASTER_PORT=%s + 1 (torchrun's store holds MASTER_PORT)", ma,
		 mp);
	return 0;
}

static int read_address(struct reader *r)
{
	struct xpi_launch *e = r->e;
	const char *xa = var(r, "XP_ADDR");
	const char *ma = var(r, "MASTER_ADDR"), *mp = var(r, "MASTER_PORT");
	int rc;
	if (xa != NULL) {
		long port;
		snprintf(e->addr_from, sizeof(e->addr_from), "XP_ADDR");
		if (xpi_sock_split_hostport(xa, e->host, sizeof(e->host), e->port,
					    sizeof(e->port)) < 0)
			return error(r, "XP_ADDR=%s is not host:port or [ipv6]:port", xa);
		if (strspn(e->port, "0") == strlen(e->port))
			return error(r,
				     "XP_ADDR=%s gives port 0, but every rank must know rank 0's "
				     "port in advance",
				     xa);
		if (parse_long(e->port, 1, 65535, &port) < 0)
			return error(r, "XP_ADDR=%s: port %s is not 1 to 65535", xa, e->port);
		rc = 0;
	} else if (ma != NULL || mp != NULL) {
		rc = master_address(r, ma, mp);
	} else if (strcmp(e->launcher, "Slurm") == 0) {
		rc = slurm_address(r);
	} else {
		rc = error(r,
			   "%s sets up a job of %d ranks but no rendezvous address is set: "
			   "export XP_ADDR=host:port (or MASTER_ADDR and MASTER_PORT: xport then "
			   "uses MASTER_PORT+1) naming rank 0's host and a free port",
			   e->launcher, e->size);
	}
	if (rc < 0)
		return rc;
	if (strchr(e->host, ':') != NULL)
		snprintf(e->addr, sizeof(e->addr), "[%s]:%s", e->host, e->port);
	else
		snprintf(e->addr, sizeof(e->addr), "%s:%s", e->host, e->port);
	return 0;
}

/* ---------------------------------------------------------------------- */
/* Rank and size                                                          */

static void append(char *buf, size_t cap, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void append(char *buf, size_t cap, const char *fmt, ...)
{
	size_t used = strlen(buf);
	if (used + 1 >= cap)
		return;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf + used, cap - used, fmt, ap);
	va_end(ap);
}

/* "OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2", unset ones said so. */
static void describe(const struct reader *r, const struct launcher_vars *l, char *buf, size_t n)
{
	const char *rs = var(r, l->rank_var), *ss = var(r, l->size_var);
	snprintf(buf, n, "%s%s%s %s%s%s", l->rank_var, rs != NULL ? "=" : " unset",
		 rs != NULL ? rs : "", l->size_var, ss != NULL ? "=" : " unset",
		 ss != NULL ? ss : "");
}

/* Names, in the warning, every later launcher whose variables say another
 * rank or size than the winner's. Not Slurm: it is the outermost launcher
 * wherever it is there, and a launcher inside its allocation or step
 * (mpirun under salloc or sbatch, torchrun or xprun under srun) sees
 * Slurm's other count of tasks as a matter of course. */
static void check_others(struct reader *r, size_t winner)
{
	struct xpi_launch *e = r->e;
	for (size_t i = winner + 1; i < XPI_ARRAY_SIZE(launchers); i++) {
		const struct launcher_vars *l = &launchers[i];
		if (i == LAUNCHER_SLURM)
			continue;
		const char *rs = var(r, l->rank_var), *ss = var(r, l->size_var);
		long rank, size;
		if (ss == NULL)
			continue; /* not there: nothing to disagree with */
		if (rs != NULL && parse_long(rs, 0, 1L << 30, &rank) == 0 &&
		    parse_long(ss, 1, 1L << 30, &size) == 0 && rank == e->rank && size == e->size)
			continue;
		char mine[160], theirs[160];
		describe(r, &launchers[winner], mine, sizeof(mine));
		describe(r, l, theirs, sizeof(theirs));
		append(e->warning, sizeof(e->warning),
		       "%slaunchers disagree: %s says rank %d of %d (%s) but %s says %s; "
		       "using %s's, which takes precedence (xport, Open MPI, MPICH/Intel MPI, "
		       "torchrun, Slurm: the launcher that started this process)",
		       e->warning[0] != '\0' ? "; " : "", e->launcher, e->rank, e->size, mine,
		       l->name, theirs, e->launcher);
	}
}

/*
 * PMI_RANK and PMI_SIZE set by srun's pmi2 plugin (srun --mpi=pmi2, or any
 * srun on a cluster whose MpiDefault is pmi2), not by MPICH's Hydra: the
 * step's own variables are there and agree, and PMI_JOBID, if set, is
 * Slurm's "<job>.<step>". Hydra under Slurm starts its proxies with srun,
 * one task per node, so SLURM_PROCID and SLURM_NTASKS count nodes there
 * and do not match its ranks (but for one rank per node: then Slurm's
 * derived rendezvous is as good as any).
 */
static bool slurm_under_pmi(const struct reader *r)
{
	const char *pr = var(r, "PMI_RANK"), *ps = var(r, "PMI_SIZE");
	const char *sr = var(r, "SLURM_PROCID"), *sn = var(r, "SLURM_NTASKS");
	const char *job = var(r, "SLURM_JOB_ID"), *step = var(r, "SLURM_STEP_ID");
	if (step == NULL)
		step = var(r, "SLURM_STEPID");
	if (pr == NULL || ps == NULL || sr == NULL || sn == NULL || job == NULL || step == NULL ||
	    strcmp(pr, sr) != 0 || strcmp(ps, sn) != 0)
		return false;
	const char *pj = var(r, "PMI_JOBID");
	char want[48];
	snprintf(want, sizeof(want), "%s.%s", job, step);
	return pj == NULL || strcmp(pj, want) == 0;
}

int xpi_launch_read(xpi_env_get_fn get, void *arg, struct xpi_launch *out)
{
	struct reader r = { .get = get, .arg = arg, .e = out };
	memset(out, 0, sizeof(*out));
	out->listen_fd = -1;
	/* Our own variables are not set by accident: half a set is a mistake,
	 * not a job of one. */
	if (var(&r, "XP_SIZE") == NULL && var(&r, "XP_RANK") != NULL)
		return error(&r, "XP_RANK=%s is set but XP_SIZE is not", var(&r, "XP_RANK"));
	size_t w = 0;
	while (w < XPI_ARRAY_SIZE(launchers) && var(&r, launchers[w].size_var) == NULL)
		w++;
	if (w == XPI_ARRAY_SIZE(launchers))
		return XPI_LAUNCH_SINGLETON;
	/* Slurm's own PMI is Slurm: the next launcher set decides, torchrun's
	 * (torchrun under srun --mpi=pmi2) or else Slurm's, whose size
	 * slurm_under_pmi saw set. */
	if (w == LAUNCHER_PMI && slurm_under_pmi(&r))
		while (var(&r, launchers[++w].size_var) == NULL)
			;
	const struct launcher_vars *l = &launchers[w];
	const char *ss = var(&r, l->size_var), *rs = var(&r, l->rank_var);
	long size, rank;
	out->launcher = l->name;
	out->rank_var = l->rank_var;
	out->size_var = l->size_var;
	if (parse_long(ss, 1, XPI_LAUNCH_MAX_SIZE, &size) < 0)
		return error(&r, "%s=%s is not a job size (1 to %d)", l->size_var, ss,
			     XPI_LAUNCH_MAX_SIZE);
	if (rs == NULL)
		return error(&r, "%s=%s is set but %s is not", l->size_var, ss, l->rank_var);
	if (parse_long(rs, 0, size - 1, &rank) < 0)
		return error(&r, "%s=%s is not a rank of a job of %s=%s", l->rank_var, rs,
			     l->size_var, ss);
	out->rank = (int)rank;
	out->size = (int)size;
	check_others(&r, w);
	if (size == 1)
		return XPI_LAUNCH_SINGLETON;
	const char *fs = var(&r, "XP_BOOT_LISTEN_FD");
	long fd;
	if (fs != NULL && rank == 0) {
		if (parse_long(fs, 0, 1L << 30, &fd) < 0)
			return error(&r, "XP_BOOT_LISTEN_FD=%s is not a file descriptor", fs);
		out->listen_fd = (int)fd;
	}
	return read_address(&r);
}

/* Whether one of @names is set, which takes precedence over a launcher's
 * key-value service (@service): then @why_not says which. */
static bool overridden(const struct reader *r, const char *const *names, size_t count,
		       const char *service, char *why_not, size_t n)
{
	for (size_t i = 0; i < count; i++) {
		const char *v = var(r, names[i]);
		if (v != NULL) {
			snprintf(why_not, n, "%s=%s is set: it takes precedence over %s", names[i],
				 v, service);
			return true;
		}
	}
	return false;
}

bool xpi_launch_pmix_wanted(xpi_env_get_fn get, void *arg, char *why_not, size_t n)
{
	struct reader r = { .get = get, .arg = arg };
	const char *pr = var(&r, "PMIX_RANK");
	/* Set by hand, or by a launcher that started this process inside a
	 * PMIx job (torchrun under srun --mpi=pmix: PMIX_RANK is its agent's). */
	static const char *const over[] = { "XP_SIZE", "XP_ADDR", "WORLD_SIZE", "MASTER_ADDR" };
	snprintf(why_not, n, "%s", "");
	if (pr == NULL || var(&r, "PMIX_NAMESPACE") == NULL) {
		snprintf(why_not, n, "no PMIx server (PMIX_RANK, PMIX_NAMESPACE unset)");
		return false;
	}
	if (overridden(&r, over, XPI_ARRAY_SIZE(over), "PMIx", why_not, n))
		return false;
	/* The launcher's own rank must be PMIx's: not so in a process that a
	 * PMIx client started by itself (an inherited PMIX_RANK). */
	static const char *const ranks[] = { "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID" };
	for (size_t i = 0; i < XPI_ARRAY_SIZE(ranks); i++) {
		const char *v = var(&r, ranks[i]);
		if (v == NULL)
			continue;
		if (strcmp(v, pr) != 0) {
			snprintf(why_not, n, "%s=%s but PMIX_RANK=%s: PMIx is another process's",
				 ranks[i], v, pr);
			return false;
		}
		break; /* the innermost launcher agrees */
	}
	return true;
}

bool xpi_launch_pmi2_wanted(xpi_env_get_fn get, void *arg, char *why_not, size_t n)
{
	struct reader r = { .get = get, .arg = arg };
	/* Launchers that start their processes inside a Slurm task (mpirun,
	 * torchrun, xprun under srun --mpi=pmi2) leave PMI_FD to them. */
	static const char *const over[] = { "XP_SIZE", "XP_ADDR", "OMPI_COMM_WORLD_SIZE",
					    "WORLD_SIZE", "MASTER_ADDR" };
	snprintf(why_not, n, "%s", "");
	if (var(&r, "PMI_FD") == NULL) {
		snprintf(why_not, n, "no PMI-2 server (PMI_FD unset)");
		return false;
	}
	if (overridden(&r, over, XPI_ARRAY_SIZE(over), "PMI-2", why_not, n))
		return false;
	/* Slurm's pmi2 plugin, not MPICH's Hydra (which also passes PMI_RANK,
	 * PMI_SIZE and PMI_FD or PMI_PORT to its own PMI server, under Slurm
	 * from one proxy task per node): the plugin always sets PMI_JOBID to
	 * the step, and its ranks are the step's. */
	if (var(&r, "PMI_JOBID") == NULL || !slurm_under_pmi(&r)) {
		snprintf(why_not, n,
			 "PMI_FD is set, but PMI_RANK, PMI_SIZE and PMI_JOBID are not this Slurm "
			 "step's SLURM_PROCID, SLURM_NTASKS and SLURM_JOB_ID.SLURM_STEP_ID: not "
			 "Slurm's pmi2 plugin (MPICH's Hydra?)");
		return false;
	}
	return true;
}
