/* SPDX-License-Identifier: MIT */
/*
 * Shared memory made on first need (src/shm/shm_setup.c, xpi_shm_connect),
 * between real processes of this host, XP_TRANSPORTS=shm:
 *  - ring: after xp_init no rank has mapped a peer's segment or opened a
 *          peer's doorbell; a ring exchange maps exactly the two
 *          neighbours' (one by the send, one by the receive that names
 *          it), seen from outside the library in /proc/self/maps and
 *          /proc/self/fd; an all-to-all then maps every peer, and every
 *          message is intact;
 *  - dead: rank 3 dies (SIGKILL) after xp_init, before anyone talked to
 *          it: rank 0's receive naming it fails at once (not at its
 *          deadline) naming it, a send to it fails too, the others go
 *          on, and no segment of the job is left in /dev/shm.
 * Usage: test_shm_on_demand ring|dead
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xport/xport.h"
#include "mproc.h"
#include "testutil.h"

#define RANKS 6
#define WAIT_MS 20000

/* Between the ranks, outside the library (whose own barrier would map
 * its tree's neighbours): how many are past a step, and their pids. */
static struct shared {
	_Atomic int ready, ring_seen;
	pid_t pids[RANKS];
} * shared;

/* Bit r set: this process maps rank r's segment (/dev/shm/xport-PID-r). */
static unsigned mapped_ranks(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned bits = 0;
	while (f != NULL && fgets(line, sizeof(line), f) != NULL) {
		const char *at = strstr(line, "/dev/shm/xport-");
		int pid, rank;
		if (at != NULL && sscanf(at, "/dev/shm/xport-%d-%d", &pid, &rank) == 2 &&
		    rank >= 0 && rank < 32)
			bits |= 1u << rank;
	}
	if (f != NULL)
		fclose(f);
	return bits;
}

/* Bit r set: this process holds rank r's doorbell open. */
static unsigned bell_ranks(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	unsigned bits = 0;
	while (d != NULL && (e = readdir(d)) != NULL) {
		char path[300], target[300];
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		ssize_t n = readlink(path, target, sizeof(target) - 1);
		if (n <= 0)
			continue;
		target[n] = '\0';
		int pid, rank;
		if (sscanf(target, "/dev/shm/xport-%d-%d.bell", &pid, &rank) == 2 && rank >= 0 &&
		    rank < 32 && strstr(target, ".bell") != NULL)
			bits |= 1u << rank;
	}
	if (d != NULL)
		closedir(d);
	return bits;
}

static uint64_t value_of(int from, int to, int round)
{
	return (uint64_t)from << 32 | (uint64_t)to << 16 | (uint64_t)round;
}

/* Round @round of a ring: 8 B to @right, 8 B from @left, checked. */
static void ring_step(xp_comm_t *w, int rank, int left, int right, int round)
{
	uint64_t out = value_of(rank, right, round), in = 0;
	xp_request_t *r;
	T_OK(xp_irecv(w, &in, sizeof(in), left, (uint64_t)round + 1, XP_TAG_EXACT, &r));
	T_OK(xp_send(w, &out, sizeof(out), right, (uint64_t)round + 1));
	T_OK(xp_wait(&r, WAIT_MS, NULL));
	T_EQ(in, value_of(left, rank, round));
}

static int ring_body(int rank, void *arg)
{
	(void)arg;
	setenv("XP_TRANSPORTS", "shm", 1);
	shared->pids[rank] = getpid();
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	const unsigned me = 1u << rank;
	/* Its own segment only, its own doorbell only. */
	T_EQ(mapped_ranks(), me);
	T_EQ(bell_ranks(), me);
	/* The same for the ring: no message before every rank has looked. */
	atomic_fetch_add(&shared->ready, 1);
	while (atomic_load(&shared->ready) < RANKS)
		usleep(1000);

	int right = (rank + 1) % RANKS, left = (rank + RANKS - 1) % RANKS;
	ring_step(w, rank, left, right, 0);
	const unsigned ring = me | 1u << left | 1u << right;
	T_EQ(mapped_ranks(), ring);
	T_EQ(bell_ranks(), ring);
	fprintf(stderr, "   rank %d: after the ring, segments mapped %#x, doorbells %#x\n", rank,
		mapped_ranks(), bell_ranks());
	/* A rank ahead would send its all-to-all here, and its first
	 * message maps it: nobody starts until every rank has looked. */
	atomic_fetch_add(&shared->ring_seen, 1);
	while (atomic_load(&shared->ring_seen) < RANKS)
		usleep(1000);

	/* Everyone to everyone: the rest are mapped on first need. */
	uint64_t got[RANKS] = { 0 }, sent[RANKS];
	xp_request_t *rr[RANKS] = { 0 };
	for (int p = 0; p < RANKS; p++)
		if (p != rank)
			T_OK(xp_irecv(w, &got[p], sizeof(got[p]), p, 2, XP_TAG_EXACT, &rr[p]));
	for (int p = 0; p < RANKS; p++) {
		sent[p] = value_of(rank, p, 1);
		if (p != rank)
			T_OK(xp_send(w, &sent[p], sizeof(sent[p]), p, 2));
	}
	for (int p = 0; p < RANKS; p++)
		if (p != rank) {
			T_OK(xp_wait(&rr[p], WAIT_MS, NULL));
			T_EQ(got[p], value_of(p, rank, 1));
		}
	T_EQ(mapped_ranks(), (1u << RANKS) - 1);
	T_EQ(bell_ranks(), (1u << RANKS) - 1);
	T_OK(xp_oob_barrier(ctx));
	xp_finalize(ctx);
	return 0;
}

#define DEAD_RANK 3

static int dead_body(int rank, void *arg)
{
	(void)arg;
	setenv("XP_TRANSPORTS", "shm", 1);
	setenv("XP_LOG_LEVEL", "none", 1); /* the expected loss */
	shared->pids[rank] = getpid();
	xp_context_t *ctx;
	T_OK(xp_init(NULL, &ctx));
	xp_comm_t *w = xp_comm_world(ctx);
	atomic_fetch_add(&shared->ready, 1);
	if (rank == DEAD_RANK) {
		while (atomic_load(&shared->ready) < RANKS)
			usleep(1000);
		raise(SIGKILL); /* nobody has talked to it */
	}
	while (atomic_load(&shared->ready) < RANKS)
		usleep(1000);
	if (rank == 0) {
		/* Rank 3 kills itself once the count is complete; give it
		 * the moment that takes. It stays a zombie until the test
		 * reaps it, after rank 0: its death must show all the same. */
		usleep(200000);
		uint64_t v;
		double t0 = t_now_s();
		int rc = xp_recv(w, &v, sizeof(v), DEAD_RANK, 1, XP_TAG_EXACT, NULL);
		double took = t_now_s() - t0;
		fprintf(stderr, "   rank 0: a receive naming rank %d ended in %.3f s: %s\n",
			DEAD_RANK, took, xp_error_detail());
		T_EQ(rc, -ECONNRESET);
		T_CHECK(strstr(xp_error_detail(), "rank 3") != NULL);
		T_CHECK(took < 2.0);
		T_EQ(xp_send(w, &v, sizeof(v), DEAD_RANK, 1), -ECONNRESET);
	}
	/* The others go on among themselves: a ring that skips rank 3. */
	int live[RANKS - 1], nlive = 0, at = 0;
	for (int p = 0; p < RANKS; p++)
		if (p != DEAD_RANK) {
			if (p == rank)
				at = nlive;
			live[nlive++] = p;
		}
	ring_step(w, rank, live[(at + nlive - 1) % nlive], live[(at + 1) % nlive], 2);
	xp_finalize(ctx);
	return 0;
}

/* Segments or doorbells in /dev/shm made by one of @pids. */
static int left_in_dev_shm(const pid_t *pids, int n)
{
	DIR *d = opendir("/dev/shm");
	struct dirent *e;
	int left = 0;
	while (d != NULL && (e = readdir(d)) != NULL) {
		int pid, rank;
		if (sscanf(e->d_name, "xport-%d-%d", &pid, &rank) != 2)
			continue;
		for (int i = 0; i < n; i++)
			if (pids[i] == pid) {
				fprintf(stderr, "   /dev/shm/%s is left\n", e->d_name);
				left++;
			}
	}
	if (d != NULL)
		closedir(d);
	return left;
}

static int run(int (*body)(int, void *), int dead)
{
	struct mproc_result res;
	mproc_clear_launcher_env();
	mproc_run(RANKS, body, NULL, 60, NULL, &res);
	int failed = 0;
	for (int r = 0; r < RANKS; r++) {
		int st = res.status[r];
		bool ok = r == dead ? WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL :
				      WIFEXITED(st) && WEXITSTATUS(st) == 0;
		if (!ok) {
			fprintf(stderr, "FAIL: rank %d ended with status %#x\n", r, st);
			failed++;
		}
	}
	if (left_in_dev_shm(shared->pids, RANKS) != 0) {
		fprintf(stderr, "FAIL: segments of the job left in /dev/shm\n");
		failed++;
	}
	return failed == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
	shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		      0);
	T_CHECK(shared != MAP_FAILED);
	if (argc == 2 && strcmp(argv[1], "ring") == 0)
		return run(ring_body, -1);
	if (argc == 2 && strcmp(argv[1], "dead") == 0)
		return run(dead_body, DEAD_RANK);
	fprintf(stderr, "usage: test_shm_on_demand ring|dead\n");
	return 2;
}
