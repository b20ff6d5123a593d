/* SPDX-License-Identifier: MIT */
/*
 * scale-probe: what forming a job costs one rank, for perf/scale.py.
 *
 *   xprun -n N scale-probe ring|alltoall|alltoall64k   one rank of a job
 *   scale-probe inproc N                     N ranks as threads of this process
 *
 * ring / alltoall: each rank times xp_init (CLOCK_MONOTONIC_RAW), passes
 * 8 B to rank r+1 and from rank r-1 (ring) or to and from every other rank
 * (alltoall, the pattern that touches every pair; alltoall64k sends 64 KiB,
 * past the inline limit, so shared memory's bulk path is touched too),
 * then, with every rank still alive, counts its open descriptors by kind (/proc/self/fd), its
 * memory (/proc/self/status: VmRSS, VmHWM, RssShmem) and the shared-memory
 * segments it maps (/proc/self/smaps: their size and proportional share),
 * and the bytes its open TCP sockets carried (TCP_INFO).
 * Rank 0 also reads how much of /dev/shm is in use (statvfs: the segments
 * are unlinked once mapped, so no file is left to list, but tmpfs counts
 * their pages until the last mapping goes). The figures reach rank 0 out of
 * band (xp_oob_allgather), so the measured transports carry only the
 * pattern's messages, and rank 0 prints one JSON line per rank, then one
 * for the job:
 *   {"type":"rank","pattern":"ring","ranks":N,"rank":r,"transport":"tcp",
 *    "init_start_ns":..,"init_ns":..,"exchange_ns":..,"fds":..,
 *    "fds_socket":..,"fds_pipe":..,"fds_pidfd":..,"fds_anon":..,"fds_file":..,
 *    "rss_kB":..,"hwm_kB":..,"shmem_kB":..,"shm_map_kB":..,"shm_pss_kB":..,
 *    "tcp_sent":..,"tcp_received":..}
 *   {"type":"job","pattern":"ring","ranks":N,"devshm_used_bytes":..}
 * init_start_ns is CLOCK_MONOTONIC_RAW, one clock for every process of the
 * host, so the job's formation span is max(start + init) - min(start).
 *
 * inproc N: times xp_local_job_create of N ranks, then runs one thread per
 * rank doing an 8 B allreduce (float64 sum of the ranks, checked), and
 * prints {"type":"inproc","ranks":N,"create_ns":..,"allreduce_ns":..,
 * "fds":..,"rss_before_kB":..,"rss_kB":..,"hwm_kB":..}.
 *
 * Exit status 0, 1 on a failure (its reason on stderr), 2 on a usage error.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <netinet/in.h>
#include <linux/tcp.h>
#include <unistd.h>
#include <xport/xport.h>

#include "perf_util.h"

#define TAG 0x5ca1e

/* One rank's figures, gathered raw to rank 0: every rank is this same
 * program on this same host, so the layout is the same everywhere. */
struct rank_stats {
	int64_t init_start_ns, init_ns, exchange_ns;
	int64_t init_cpu_ns; /* the process's CPU time in xp_init (all its threads) */
	int64_t init_sys_ns; /* the part of it in the kernel (getrusage) */
	int64_t rss_kB, hwm_kB, shmem_kB, shm_map_kB, shm_pss_kB;
	int64_t tcp_sent, tcp_received; /* payload bytes over its open TCP sockets */
	int32_t rank, fds, fds_socket, fds_pipe, fds_pidfd, fds_anon, fds_file;
	char transport[12]; /* what carries this rank's messages to rank + 1 */
};

/* Counts this process's descriptors by what they point to; the directory
 * stream's own descriptor is not counted. */
static void count_fds(struct rank_stats *s)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	while (d != NULL && (e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d))
			continue;
		char path[300], target[256];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		target[n > 0 ? n : 0] = '\0';
		s->fds++;
		if (strncmp(target, "socket:", 7) == 0) {
			s->fds_socket++;
			/* What crossed it in its life (RFC 4898's counters): at
			 * rank 0, mostly the bootstrap's tables. Not TCP (a
			 * Unix socket): the call fails and adds nothing. */
			struct tcp_info ti;
			socklen_t len = sizeof(ti);
			memset(&ti, 0, sizeof(ti));
			if (getsockopt(atoi(e->d_name), IPPROTO_TCP, TCP_INFO, &ti, &len) == 0) {
				s->tcp_sent += (int64_t)ti.tcpi_bytes_acked;
				s->tcp_received += (int64_t)ti.tcpi_bytes_received;
			}
		}
		/* Pipes (xprun's stdio and status fd) and the shm doorbell
		 * FIFOs, which readlink names by their path. */
		else if (strncmp(target, "pipe:", 5) == 0 || strstr(target, ".bell") != NULL)
			s->fds_pipe++;
		else if (strcmp(target, "anon_inode:[pidfd]") == 0)
			s->fds_pidfd++;
		else if (strncmp(target, "anon_inode:", 11) == 0)
			s->fds_anon++; /* io_uring, eventfd, signalfd, timerfd */
		else
			s->fds_file++;
	}
	if (d != NULL)
		closedir(d);
}

/* A "Key:   123 kB" line's number if @line starts with @key, else -1. */
static int64_t kb_field(const char *line, const char *key)
{
	size_t k = strlen(key);
	return strncmp(line, key, k) == 0 ? strtoll(line + k, NULL, 10) : -1;
}

static void read_memory(struct rank_stats *s)
{
	char line[512];
	int64_t v;
	FILE *f = fopen("/proc/self/status", "r");
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		if ((v = kb_field(line, "VmRSS:")) >= 0)
			s->rss_kB = v;
		else if ((v = kb_field(line, "VmHWM:")) >= 0)
			s->hwm_kB = v;
		else if ((v = kb_field(line, "RssShmem:")) >= 0)
			s->shmem_kB = v;
	}
	if (f != NULL)
		fclose(f);
	/* The shm transport's segments (/dev/shm/xport-PID-RANK, "(deleted)"
	 * once unlinked): their mapped size grows with the peers of a rank
	 * even where untouched; the proportional set size (Pss) divides each
	 * resident page among the processes that map it, so the ranks' sums
	 * add up to the pages the segments really hold. */
	f = fopen("/proc/self/smaps", "r");
	bool ours = false;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		unsigned long lo, hi;
		if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2)
			ours = strstr(line, "/dev/shm/xport-") != NULL;
		else if (ours && (v = kb_field(line, "Size:")) >= 0)
			s->shm_map_kB += v;
		else if (ours && (v = kb_field(line, "Pss:")) >= 0)
			s->shm_pss_kB += v;
	}
	if (f != NULL)
		fclose(f);
}

static int fail(int rank, const char *what, int rc)
{
	fprintf(stderr, "scale-probe: rank %d: %s: %s: %s\n", rank, what, xp_strerror(rc),
		xp_error_detail());
	return 1;
}

/* The pattern's messages, each checked: @len bytes to every other rank
 * (@all) or to the ring neighbour; 8 B carry the sender's rank, a longer
 * payload has it in its first 8 bytes and the rank's low byte in the rest. */
static int exchange(xp_context_t *ctx, bool all, size_t len)
{
	xp_comm_t *world = xp_comm_world(ctx);
	int me = xp_rank(ctx), n = xp_size(ctx);
	int peers = all ? n - 1 : (n > 1 ? 1 : 0);
	uint8_t *mine = malloc(len), *got = calloc((size_t)peers + 1, len);
	xp_request_t **reqs = calloc(2 * (size_t)peers + 1, sizeof(*reqs));
	int *from = calloc((size_t)peers + 1, sizeof(*from));
	int rc = mine == NULL || got == NULL || reqs == NULL || from == NULL ? -ENOMEM : 0;
	if (rc == 0) {
		memset(mine, me & 0xff, len);
		uint64_t r = (uint64_t)me;
		memcpy(mine, &r, sizeof(r));
	}
	/* Peer k is rank me + k for sends and me - k for receives, so that
	 * not every rank starts with rank 0. */
	for (int k = 1; rc == 0 && k <= peers; k++) {
		from[k - 1] = (me - k + n) % n;
		rc = xp_irecv(world, got + (size_t)(k - 1) * len, len, from[k - 1], TAG, UINT64_MAX,
			      &reqs[k - 1]);
		if (rc == 0)
			rc = xp_isend(world, mine, len, (me + k) % n, TAG, &reqs[peers + k - 1]);
	}
	if (rc == 0)
		rc = xp_waitall(2 * (size_t)peers, reqs, XP_TIMEOUT_DEFAULT, NULL);
	for (int k = 0; rc == 0 && k < peers; k++) {
		const uint8_t *g = got + (size_t)k * len;
		uint64_t r;
		memcpy(&r, g, sizeof(r));
		bool ok = r == (uint64_t)from[k];
		for (size_t i = sizeof(r); ok && i < len; i++)
			ok = g[i] == (uint8_t)(from[k] & 0xff);
		if (!ok) {
			fprintf(stderr, "scale-probe: rank %d: wrong payload from rank %d\n", me,
				from[k]);
			rc = -EPROTO;
		}
	}
	free(mine);
	free(got);
	free(reqs);
	free(from);
	return rc;
}

/* The process's CPU time (CLOCK_PROCESS_CPUTIME_ID): on a host with more
 * ranks than CPUs, what forming costs, apart from waiting for the CPU. */
static int64_t cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* The process's CPU time in the kernel so far. */
static int64_t sys_ns(void)
{
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	return (int64_t)ru.ru_stime.tv_sec * 1000000000 + (int64_t)ru.ru_stime.tv_usec * 1000;
}

static void print_rank(const char *pattern, int n, const struct rank_stats *s)
{
	printf("{\"type\":\"rank\",\"pattern\":\"%s\",\"ranks\":%d,\"rank\":%d,"
	       "\"transport\":\"%s\",\"init_start_ns\":%" PRId64 ",\"init_ns\":%" PRId64
	       ",\"init_cpu_ns\":%" PRId64 ",\"init_sys_ns\":%" PRId64 ",\"exchange_ns\":%" PRId64
	       ",\"fds\":%d,\"fds_socket\":%d,\"fds_pipe\":%d,"
	       "\"fds_pidfd\":%d,\"fds_anon\":%d,\"fds_file\":%d,\"rss_kB\":%" PRId64
	       ",\"hwm_kB\":%" PRId64 ",\"shmem_kB\":%" PRId64 ",\"shm_map_kB\":%" PRId64
	       ",\"shm_pss_kB\":%" PRId64 ",\"tcp_sent\":%" PRId64 ",\"tcp_received\":%" PRId64
	       "}\n",
	       pattern, n, s->rank, s->transport, s->init_start_ns, s->init_ns, s->init_cpu_ns,
	       s->init_sys_ns, s->exchange_ns, s->fds, s->fds_socket, s->fds_pipe, s->fds_pidfd,
	       s->fds_anon, s->fds_file, s->rss_kB, s->hwm_kB, s->shmem_kB, s->shm_map_kB,
	       s->shm_pss_kB, s->tcp_sent, s->tcp_received);
}

static int run_job(const char *pattern)
{
	struct rank_stats s = { 0 };
	xp_context_t *ctx;
	s.init_start_ns = now_ns();
	int64_t cpu0 = cpu_ns(), sys0 = sys_ns();
	int rc = xp_init(NULL, &ctx);
	s.init_ns = now_ns() - s.init_start_ns;
	s.init_cpu_ns = cpu_ns() - cpu0;
	s.init_sys_ns = sys_ns() - sys0;
	if (rc < 0) /* no rank yet: the launcher's says which process this is */
		return fail(getenv("XP_RANK") != NULL ? atoi(getenv("XP_RANK")) : -1, "xp_init",
			    rc);
	int me = xp_rank(ctx), n = xp_size(ctx);
	s.rank = me;
	xp_route_t route;
	snprintf(s.transport, sizeof(s.transport), "%s",
		 xp_route_get(ctx, (me + 1) % n, 8, &route) == 0 ? route.transport : "?");
	/* Every rank receives the table (an allgather); rank 0 prints it. */
	struct rank_stats *all = calloc((size_t)n, sizeof(*all));
	if (all == NULL)
		rc = -ENOMEM;
	/* Out of band before and after, so the exchange is timed alone and
	 * every rank is measured with every peer still alive. */
	if (rc == 0 && (rc = xp_oob_barrier(ctx)) < 0)
		fail(me, "xp_oob_barrier", rc);
	int64_t t0 = now_ns();
	bool to_all = strncmp(pattern, "alltoall", 8) == 0;
	size_t len = strcmp(pattern, "alltoall64k") == 0 ? 64u << 10 : 8;
	if (rc == 0 && (rc = exchange(ctx, to_all, len)) < 0)
		fail(me, pattern, rc);
	s.exchange_ns = now_ns() - t0;
	if (rc == 0 && (rc = xp_oob_barrier(ctx)) < 0)
		fail(me, "xp_oob_barrier", rc);
	count_fds(&s);
	read_memory(&s);
	struct statvfs vfs;
	int64_t used = -1;
	if (me == 0 && statvfs("/dev/shm", &vfs) == 0)
		used = (int64_t)(vfs.f_blocks - vfs.f_bfree) * (int64_t)vfs.f_frsize;
	if (rc == 0 && (rc = xp_oob_allgather(ctx, &s, sizeof(s), all)) < 0)
		fail(me, "xp_oob_allgather", rc);
	if (rc == 0 && me == 0) {
		for (int r = 0; r < n; r++)
			print_rank(pattern, n, &all[r]);
		printf("{\"type\":\"job\",\"pattern\":\"%s\",\"ranks\":%d,"
		       "\"devshm_used_bytes\":%" PRId64 "}\n",
		       pattern, n, used);
		fflush(stdout);
	}
	free(all);
	xp_finalize(ctx);
	return rc < 0;
}

/* The in-process job: one thread per rank, started together. */
struct inproc {
	xp_local_job_t *job;
	int n;
	pthread_barrier_t go;
	int64_t *start, *end;
	int *rc;
};

struct rank_arg {
	struct inproc *ip;
	int rank;
};

static void *inproc_rank(void *p)
{
	struct rank_arg *a = p;
	struct inproc *ip = a->ip;
	xp_context_t *ctx;
	int rc = xp_local_job_context(ip->job, a->rank, &ctx);
	double x = a->rank, sum = 0;
	pthread_barrier_wait(&ip->go);
	ip->start[a->rank] = now_ns();
	if (rc == 0)
		rc = xp_allreduce(xp_comm_world(ctx), &x, &sum, 1, XP_FLOAT64, XP_SUM);
	ip->end[a->rank] = now_ns();
	/* The sum of 0 .. n-1 is exact in a double for any job size allowed. */
	if (rc == 0 && sum != (double)ip->n * (ip->n - 1) / 2) {
		fprintf(stderr, "scale-probe: inproc rank %d: allreduce gave %.0f\n", a->rank, sum);
		rc = -EPROTO;
	} else if (rc < 0) {
		fail(a->rank, "xp_allreduce", rc);
	}
	ip->rc[a->rank] = rc;
	return NULL;
}

static int run_inproc(int n)
{
	struct rank_stats before = { 0 }, after = { 0 };
	struct inproc ip = { .n = n };
	read_memory(&before);
	int64_t t0 = now_ns();
	int rc = xp_local_job_create(n, NULL, &ip.job);
	int64_t create_ns = now_ns() - t0;
	if (rc < 0)
		return fail(-1, "xp_local_job_create", rc);
	ip.start = calloc((size_t)n, sizeof(*ip.start));
	ip.end = calloc((size_t)n, sizeof(*ip.end));
	ip.rc = calloc((size_t)n, sizeof(*ip.rc));
	pthread_t *th = calloc((size_t)n, sizeof(*th));
	struct rank_arg *args = calloc((size_t)n, sizeof(*args));
	if (ip.start == NULL || ip.end == NULL || ip.rc == NULL || th == NULL || args == NULL ||
	    pthread_barrier_init(&ip.go, NULL, (unsigned)n) != 0) {
		fprintf(stderr, "scale-probe: out of memory\n");
		return 1;
	}
	int started = 0;
	for (; started < n; started++) {
		args[started] = (struct rank_arg){ &ip, started };
		if (pthread_create(&th[started], NULL, inproc_rank, &args[started]) != 0)
			break;
	}
	if (started < n) {
		/* The barrier waits for n threads: without them the started
		 * ones never return, so there is nothing to join. */
		fprintf(stderr, "scale-probe: inproc: only %d of %d threads started: %s\n", started,
			n, strerror(errno));
		return 1;
	}
	for (int r = 0; r < n; r++)
		pthread_join(th[r], NULL);
	int64_t lo = ip.start[0], hi = ip.end[0];
	for (int r = 0; r < n; r++) {
		lo = ip.start[r] < lo ? ip.start[r] : lo;
		hi = ip.end[r] > hi ? ip.end[r] : hi;
		rc = rc == 0 ? ip.rc[r] : rc;
	}
	/* Measured with the job still there: its threads are gone, their
	 * stacks unmapped, but VmHWM keeps the peak they made. */
	count_fds(&after);
	read_memory(&after);
	if (rc == 0)
		printf("{\"type\":\"inproc\",\"ranks\":%d,\"create_ns\":%" PRId64
		       ",\"allreduce_ns\":%" PRId64 ",\"fds\":%d,\"rss_before_kB\":%" PRId64
		       ",\"rss_kB\":%" PRId64 ",\"hwm_kB\":%" PRId64 "}\n",
		       n, create_ns, hi - lo, after.fds, before.rss_kB, after.rss_kB, after.hwm_kB);
	xp_local_job_destroy(ip.job);
	pthread_barrier_destroy(&ip.go);
	free(ip.start);
	free(ip.end);
	free(ip.rc);
	free(th);
	free(args);
	return rc < 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "ring") == 0 || strcmp(argv[1], "alltoall") == 0 ||
			  strcmp(argv[1], "alltoall64k") == 0))
		return run_job(argv[1]);
	if (argc == 3 && strcmp(argv[1], "inproc") == 0) {
		char *end;
		long n = strtol(argv[2], &end, 10);
		if (*end == '\0' && n >= 1 && n <= 4096)
			return run_inproc((int)n);
	}
	fprintf(stderr, "usage: xprun -n N scale-probe ring|alltoall|alltoall64k\n"
			"       scale-probe inproc N    (1 <= N <= 4096)\n");
	return 2;
}
