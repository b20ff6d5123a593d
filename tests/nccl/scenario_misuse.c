/* SPDX-License-Identifier: MIT */
/*
 * What NCCL should never do, or a damaged handle it could carry, must be
 * refused with an error and a logged reason, never a crash or a hang:
 * handles damaged on the way, a handle used again after its connection
 * was made, closes and deregistrations done twice, a request tested after
 * it was done, comms of the wrong kind, bad counts, device memory.
 * Checked only where NCCL's semantics leave the plugin able to tell (a
 * comm used after it is closed is freed memory: not checked).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"

#define BOUND_S 15.0

/* A damaged handle given to connect: an error, at once or after polls
 * (within BOUND_S), and never a comm; the listener hands out nothing. */
static void connect_must_fail(struct h_net *n, void *lc, const unsigned char *handle,
			      const char *what)
{
	unsigned char h[XNCCL_HANDLE_BYTES];
	memcpy(h, handle, sizeof(h));
	double end = h_now() + BOUND_S;
	for (;;) {
		void *sc = (void *)1, *rc = (void *)1;
		int r = h_net_connect(n, h, &sc);
		if (r != XNCCL_OK) {
			H_CHECK(sc == NULL || sc == (void *)1);
			break;
		}
		if (sc != NULL)
			H_FAIL("connect with a handle %s made a comm", what);
		H_OK(h_net_accept(n, lc, &rc));
		if (rc != NULL)
			H_FAIL("the listener accepted a connection from a handle %s", what);
		if (h_now() > end)
			H_FAIL("connect with a handle %s neither failed nor ended in %.0f s", what,
			       BOUND_S);
	}
}

static void damaged_handles(struct h_net *n)
{
	unsigned char good[XNCCL_HANDLE_BYTES], bad[XNCCL_HANDLE_BYTES];
	void *lc = NULL;
	H_OK(h_net_listen(n, good, &lc));
	H_CHECK(lc != NULL);
	int from = h_log_count();

	memcpy(bad, good, sizeof(bad));
	bad[0] ^= 0x40; /* the address's magic */
	connect_must_fail(n, lc, bad, "whose first byte is flipped");
	H_CHECK(h_log_find(from, "connect") != NULL);

	memcpy(bad, good, sizeof(bad));
	bad[XNCCL_HANDLE_BYTES - 1] ^= 1; /* reserved bytes, which must be 0 */
	connect_must_fail(n, lc, bad, "whose last byte is flipped");

	memset(bad, 0xff, sizeof(bad));
	connect_must_fail(n, lc, bad, "of all ones");

	/* Inside the listener's secret (bytes 32 to 63 of xport's address):
	 * the address parses, the listener refuses the proof. */
	memcpy(bad, good, sizeof(bad));
	bad[40] ^= 0x01;
	connect_must_fail(n, lc, bad, "with a wrong secret");

	/* The good handle still connects after all that, once: the copy
	 * that connected now names a connection made and handed over, and
	 * connecting with it again is refused. */
	memcpy(bad, good, sizeof(bad));
	void *sc, *rc;
	h_net_connect_pair(n, lc, bad, &sc, &rc, BOUND_S);
	connect_must_fail(n, lc, bad, "already used to connect");

	/* A comm of the wrong kind, bad counts: refused. */
	char buf[64] = { 0 };
	void *req = (void *)1, *ptr = buf;
	size_t cap = sizeof(buf);
	int tags[9] = { 0 }, done = 0;
	H_ERR(h_net_isend(n, rc, buf, 8, 0, NULL, &req));
	H_ERR(h_net_irecv(n, sc, 1, &ptr, &cap, tags, NULL, &req));
	void *ptrs[9] = { buf, buf, buf, buf, buf, buf, buf, buf, buf };
	size_t caps[9] = { 8, 8, 8, 8, 8, 8, 8, 8, 8 };
	H_ERR(h_net_irecv(n, rc, 0, ptrs, caps, tags, NULL, &req));
	H_ERR(h_net_irecv(n, rc, 9, ptrs, caps, tags, NULL, &req));
	H_ERR(h_net_accept(n, sc, &req));

	/* A request tested after it was done. */
	void *sreq = NULL, *rreq = NULL;
	H_OK(h_net_irecv(n, rc, 1, &ptr, &cap, tags, NULL, &rreq));
	H_OK(h_net_isend(n, sc, "hello", 6, 0, NULL, &sreq));
	int size = -1;
	h_net_wait(n, sreq, NULL, BOUND_S);
	h_net_wait(n, rreq, &size, BOUND_S);
	H_EQ(size, 6);
	H_CHECK(strcmp(buf, "hello") == 0);
	H_ERR(h_net_test(n, sreq, &done, NULL));

	/* iflush on host memory: nothing to wait for, no request. */
	int isz = 6;
	req = (void *)1;
	H_OK(h_net_iflush(n, rc, 1, &ptr, &isz, NULL, &req));
	H_CHECK(req == NULL);

	/* Closes and deregistrations twice; NULL is nothing to close. */
	void *mh = NULL;
	H_OK(h_net_reg_mr(n, sc, buf, sizeof(buf), XNCCL_PTR_HOST, &mh));
	H_OK(h_net_dereg_mr(n, sc, mh));
	H_ERR(h_net_dereg_mr(n, sc, mh));
	H_OK(h_net_close_send(n, sc));
	H_ERR(h_net_close_send(n, sc));
	H_ERR(h_net_close_recv(n, sc)); /* a send comm's pointer, never a receive comm */
	H_OK(h_net_close_recv(n, rc));
	H_ERR(h_net_close_recv(n, rc));
	H_OK(h_net_close_listen(n, lc));
	H_ERR(h_net_close_listen(n, lc));
	H_OK(h_net_close_send(n, NULL));
	H_OK(h_net_close_recv(n, NULL));
	H_OK(h_net_close_listen(n, NULL));
	H_CHECK(h_log_find(from, "closed twice") != NULL);
}

/*
 * Device memory is refused, with a reason in NCCL's log. regMrDmaBuf for
 * memory the CPU maps (NCCL_PTR_HOST) is taken: xport's TCP path moves it
 * through the mapping, whatever file backs it, so a memfd stands for a
 * dmabuf here (mode dmabuf moves data through real ones, vgem's, in the
 * lab VM); a range past the file's end and a negative descriptor are
 * refused.
 */
static void memory_types(struct h_net *n, void *sc, void *rc)
{
	static char buf[1 << 16];
	void *mh = (void *)1;
	int from = h_log_count();
	H_ERR(h_net_reg_mr(n, sc, buf, sizeof(buf), XNCCL_PTR_CUDA, &mh));
	const struct h_line *l = h_log_find(from, "GPU memory");
	H_CHECK(l != NULL);
	/* Logged with the plugin's place, as NCCL's WARN lines are. */
	H_CHECK(strstr(l->file, ".c") != NULL && l->line > 0);
	H_ERR(h_net_reg_mr_dmabuf(n, sc, buf, sizeof(buf), XNCCL_PTR_CUDA, 0, 0, &mh));

	const size_t len = 1 << 16;
	int fd = memfd_create("xport-nccl-harness", MFD_CLOEXEC);
	H_CHECK(fd >= 0 && ftruncate(fd, (off_t)len) == 0);
	char *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	H_CHECK(map != MAP_FAILED);
	H_ERR(h_net_reg_mr_dmabuf(n, sc, map, len, XNCCL_PTR_HOST, 4096, fd, &mh));
	H_ERR(h_net_reg_mr_dmabuf(n, sc, map, len, XNCCL_PTR_HOST, 0, -1, &mh));
	mh = NULL;
	H_OK(h_net_reg_mr_dmabuf(n, sc, map, len, XNCCL_PTR_HOST, 0, fd, &mh));
	H_CHECK(mh != NULL);
	close(fd); /* the plugin's registration keeps its own */
	for (size_t k = 0; k < len; k++)
		map[k] = (char)(k * 7 + 1);
	void *sreq = NULL, *rreq = NULL, *ptr = buf;
	size_t cap = sizeof(buf);
	int tag = 3, size = -1;
	H_OK(h_net_irecv(n, rc, 1, &ptr, &cap, &tag, NULL, &rreq));
	H_OK(h_net_isend(n, sc, map, len, tag, mh, &sreq));
	h_net_wait(n, sreq, NULL, BOUND_S);
	h_net_wait(n, rreq, &size, BOUND_S);
	H_EQ(size, len);
	H_CHECK(memcmp(buf, map, len) == 0);
	H_OK(h_net_dereg_mr(n, sc, mh));
	munmap(map, len);
}

void h_run_misuse(struct h_net *n)
{
	struct h_props p;
	H_ERR(h_net_props(n, 1, &p));
	H_ERR(h_net_props(n, -1, &p));
	damaged_handles(n);

	/* Memory types need a comm: one of a pair made for it. */
	unsigned char h[XNCCL_HANDLE_BYTES];
	void *lc, *sc, *rc;
	H_OK(h_net_listen(n, h, &lc));
	h_net_connect_pair(n, lc, h, &sc, &rc, BOUND_S);
	memory_types(n, sc, rc);
	H_OK(h_net_close_send(n, sc));
	H_OK(h_net_close_recv(n, rc));
	H_OK(h_net_close_listen(n, lc));

	if (n->version >= 11) {
		void *ctx = NULL;
		H_OK(h_net_init_ctx(n, &ctx, 99));
		H_OK(h_net_finalize(n, ctx));
		H_ERR(h_net_finalize(n, ctx));
	}
}
