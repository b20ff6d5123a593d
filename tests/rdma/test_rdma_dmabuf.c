/* SPDX-License-Identifier: MIT */
/*
 * Registering dmabuf memory (xp_mem_register_dmabuf), with real dmabufs:
 * each rank makes one with vgem (the kernel's virtual GEM driver, a real
 * exporter: the lab VM loads it; /dev/dri/card0) and maps it.
 *
 *   test_rdma_dmabuf tcp   XP_TRANSPORTS=tcp: no backend takes dmabufs,
 *                          so the registration stands for the mapping;
 *                          8 B, 64 KiB and 1 MiB go from one rank's dmabuf
 *                          to the other's, byte for byte, although zero-copy
 *                          sends cannot pin it (vgem maps with VM_PFNMAP):
 *                          tcp copies such payloads instead. Bad input: a
 *                          negative fd, a range past the dmabuf's end, a
 *                          pipe (no size) each fail clearly; the fd is ours
 *                          to close at once, and deregistering closes the
 *                          library's duplicate (no fd left open)
 *   test_rdma_dmabuf shm   the same over shared memory with cross-memory
 *                          attach for every rendezvous (XP_SHM_CMA_MIN=0),
 *                          which cannot pin the sender's dmabuf either: the
 *                          payload comes through the shared chunks instead
 *   test_rdma_dmabuf rdma  XP_TRANSPORTS=tcp,rdma: the rdma backend hands
 *                          the dmabuf to ibv_reg_dmabuf_mr. A device that
 *                          can (mlx5) registers it, and 1 MiB goes between
 *                          the dmabufs by RDMA read; one that cannot (rxe,
 *                          the lab's: its kernel driver lacks dmabufs)
 *                          makes the call fail with -EOPNOTSUPP naming the
 *                          rank, the device and ibv_reg_dmabuf_mr, nothing
 *                          left registered. A send straight from the
 *                          mapping (which the device cannot pin either:
 *                          vgem maps with VM_PFNMAP) then fails naming the
 *                          peer, and a resend from ordinary memory with the
 *                          same tag is the one message the receiver gets
 *
 * Skips (77) where there is no vgem (outside the lab VM) or, for rdma, no
 * RDMA device.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "xport/xport.h"
#include "pattern.h"
#include "testutil.h"
#include "tl_job.h"
#include "vgem.h"

#define LEN (1u << 20)

/* A 1 MiB vgem dmabuf, exported and mapped (vgem.h), or the test fails. */
static struct vgem_dmabuf dmabuf_new(void)
{
	struct vgem_dmabuf b = { .fd = -1 };
	const char *step;
	int rc = vgem_dmabuf_new(LEN, &b, &step);
	if (rc < 0)
		T_FAIL("%s: %s", step, strerror(-rc));
	return b;
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	for (struct dirent *e; d != NULL && (e = readdir(d)) != NULL;)
		n += e->d_name[0] != '.';
	if (d != NULL)
		closedir(d);
	return n - 1; /* the directory's own */
}

/* @len bytes from rank 0's @buf to rank 1's, then back, checked. */
static void exchange(xp_context_t *ctx, uint8_t *buf, size_t len, uint32_t seed)
{
	xp_comm_t *w = xp_comm_world(ctx);
	int me = xp_rank(ctx), peer = 1 - me;
	for (int from = 0; from < 2; from++) {
		if (me == from) {
			fill(buf, len, seed + (uint32_t)from);
			T_OK(xp_send(w, buf, len, peer, len));
		} else {
			memset(buf, 0, len);
			xp_status_t st;
			T_OK(xp_recv(w, buf, len, peer, len, ~0ull, &st));
			T_EQ(st.length, len);
			if (check(buf, len, seed + (uint32_t)from) != 0)
				T_FAIL("rank %d: %zu bytes from rank %d into the dmabuf corrupted",
				       me, len, from);
		}
	}
}

static int host_body(xp_context_t *ctx)
{
	int me = xp_rank(ctx);
	xp_mem_t *mem;
	int pfd[2];
	T_OK(pipe(pfd));
	/* TCP pairs are made on first need: made before the count. */
	uint8_t warm[8];
	exchange(ctx, warm, sizeof(warm), 0);
	int fds_before = open_fds();
	struct vgem_dmabuf b = dmabuf_new();

	T_EQ(xp_mem_register_dmabuf(ctx, -1, 0, LEN, b.map, &mem), -EBADF);
	T_EQ(xp_mem_register_dmabuf(ctx, b.fd, 4096, LEN, b.map, &mem), -EINVAL);
	T_CONTAINS(xp_error_detail(), "pass the end of the dmabuf");
	T_EQ(xp_mem_register_dmabuf(ctx, b.fd, 0, LEN, NULL, &mem), -EINVAL);
	T_CHECK(xp_mem_register_dmabuf(ctx, pfd[0], 0, LEN, b.map, &mem) < 0);
	T_CONTAINS(xp_error_detail(), "has no size");

	T_OK(xp_mem_register_dmabuf(ctx, b.fd, 0, LEN, b.map, &mem));
	close(b.fd); /* ours to close: the library holds its own */
	exchange(ctx, b.map, 8, 1);
	exchange(ctx, b.map, 64 << 10, 2);
	exchange(ctx, b.map, LEN, 3);
	xp_mem_deregister(mem);
	T_OK(xp_barrier(xp_comm_world(ctx))); /* the owner has run the deregistration */
	exchange(ctx, b.map + 8, 8, 4);
	munmap(b.map, LEN);
	int fds_after = open_fds();
	if (fds_after != fds_before)
		T_FAIL("rank %d: %d fds open before the dmabuf, %d after deregistering it", me,
		       fds_before, fds_after);
	close(pfd[0]);
	close(pfd[1]);
	return 0;
}

static int rdma_body(xp_context_t *ctx)
{
	int me = xp_rank(ctx), peer = 1 - me;
	xp_comm_t *w = xp_comm_world(ctx);
	xp_route_t route;
	T_OK(xp_route_get(ctx, peer, LEN, &route));
	T_CONTAINS(route.payloads, "rdma");
	struct vgem_dmabuf b = dmabuf_new();
	xp_mem_t *mem;
	int rc = xp_mem_register_dmabuf(ctx, b.fd, 0, LEN, b.map, &mem);
	char who[16];
	snprintf(who, sizeof(who), "rank %d", me);
	if (rc == 0) { /* a device with dmabuf support */
		fprintf(stderr, "   %s: the device registered the dmabuf\n", who);
		exchange(ctx, b.map, LEN, 5);
		xp_mem_deregister(mem);
		return 0;
	}
	fprintf(stderr, "   %s: %s\n", who, xp_error_detail());
	T_EQ(rc, -EOPNOTSUPP);
	T_CONTAINS(xp_error_detail(), who);
	T_CONTAINS(xp_error_detail(), "ibv_reg_dmabuf_mr");
	T_CONTAINS(xp_error_detail(), "rxe");

	/* Unregistered, the mapping goes to ibv_reg_mr for the one transfer. */
	uint8_t *plain = malloc(LEN);
	T_CHECK(plain != NULL);
	if (me == 0) {
		fill(b.map, LEN, 6);
		rc = xp_send(w, b.map, LEN, peer, 6);
		fprintf(stderr, "   rank 0: send from the unpinnable mapping: %d %s\n", rc,
			rc < 0 ? xp_error_detail() : "");
		if (rc < 0) {
			T_CONTAINS(xp_error_detail(), "rank 1");
			fill(plain, LEN, 6);
			T_OK(xp_send(w, plain, LEN, peer, 6));
		}
		T_OK(xp_send(w, plain, 8, peer, 7)); /* nothing else after it */
	} else {
		xp_status_t st;
		T_OK(xp_recv(w, plain, LEN, peer, 6, ~0ull, &st));
		T_EQ(st.length, LEN);
		T_CHECK(check(plain, LEN, 6) == 0);
		T_OK(xp_recv(w, plain, LEN, peer, 0, 0, &st));
		T_EQ(st.tag, 7); /* no second copy of tag 6 */
		T_EQ(st.length, 8);
	}
	free(plain);
	munmap(b.map, LEN);
	close(b.fd);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: %s tcp|shm|rdma\n", argv[0]);
		return 2;
	}
	if (!vgem_present()) {
		printf("SKIP: no vgem here (the module and /dev/dri/card0; the lab VM loads it)\n");
		return T_SKIP;
	}
	if (strcmp(argv[1], "tcp") == 0)
		return tl_job_run("tcp", 2, host_body, 200);
	if (strcmp(argv[1], "shm") == 0) {
		setenv("XP_SHM_CMA_MIN", "0", 1); /* every rendezvous tries to attach */
		return tl_job_run("shm", 2, host_body, 200);
	}
	if (strcmp(argv[1], "rdma") == 0) {
		if (access("/sys/class/infiniband", F_OK) != 0) {
			printf("SKIP: no RDMA device here\n");
			return T_SKIP;
		}
		return tl_job_run("tcp,rdma", 2, rdma_body, 200);
	}
	fprintf(stderr, "usage: %s tcp|shm|rdma\n", argv[0]);
	return 2;
}
