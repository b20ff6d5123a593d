/* SPDX-License-Identifier: MIT */
/*
 * A connection to ourselves, made and used from one thread: NCCL makes
 * such loopback connections to probe registrations (GPU Direct support,
 * ncclCommRegister with regIsGlobal), calling connect and accept in turn
 * in one loop. From v11 on, each communicator has its own context from
 * init, and finalizing one leaves the others working.
 */
#include <string.h>

#include "../pattern.h"
#include "harness.h"

#define BOUND_S 15.0
#define SELF_BYTES ((size_t)1 << 20)

void h_run_self(struct h_net *n)
{
	void *other = NULL;
	if (n->version >= 11) {
		H_OK(h_net_init_ctx(n, &other, 0xabcdef));
		H_CHECK(other != NULL && other != n->ctx);
	}
	unsigned char handle[XNCCL_HANDLE_BYTES];
	void *lc = NULL, *sc, *rc;
	H_OK(h_net_listen(n, handle, &lc));
	H_CHECK(lc != NULL);
	h_net_connect_pair(n, lc, handle, &sc, &rc, BOUND_S);
	/* The other communicator goes; what the first made stays. */
	if (other != NULL)
		H_OK(h_net_finalize(n, other));

	unsigned char *src = malloc(SELF_BYTES), *dst = malloc(SELF_BYTES);
	H_CHECK(src != NULL && dst != NULL);
	void *smh = NULL, *rmh = NULL;
	/* Registered through one comm, used by the other: regIsGlobal. */
	H_OK(h_net_reg_mr(n, rc, src, SELF_BYTES, XNCCL_PTR_HOST, &smh));
	H_OK(h_net_reg_mr(n, sc, dst, SELF_BYTES, XNCCL_PTR_HOST, &rmh));
	fill(src, SELF_BYTES, 42);
	void *sreq = NULL, *rreq = NULL, *ptr = dst;
	size_t cap = SELF_BYTES;
	int tag = 1, size = -1;
	H_OK(h_net_isend(n, sc, src, SELF_BYTES, tag, smh, &sreq));
	H_OK(h_net_irecv(n, rc, 1, &ptr, &cap, &tag, &rmh, &rreq));
	h_net_wait(n, rreq, &size, BOUND_S);
	h_net_wait(n, sreq, NULL, BOUND_S);
	H_EQ(size, SELF_BYTES);
	if (check(dst, SELF_BYTES, 42) != 0)
		H_FAIL("a message to ourselves was damaged");

	/* As NCCL does with regIsGlobal: a buffer inside a registration is
	 * registered again for one transfer and deregistered right after;
	 * the outer registration stays good. */
	void *inner = NULL;
	H_OK(h_net_reg_mr(n, sc, src + 4096, 65536, XNCCL_PTR_HOST, &inner));
	H_CHECK(inner != NULL && inner != smh);
	fill(src + 4096, 65536, 43);
	sreq = rreq = NULL;
	tag = 2;
	H_OK(h_net_irecv(n, rc, 1, &ptr, &cap, &tag, &rmh, &rreq));
	H_OK(h_net_isend(n, sc, src + 4096, 65536, tag, inner, &sreq));
	h_net_wait(n, rreq, &size, BOUND_S);
	h_net_wait(n, sreq, NULL, BOUND_S);
	H_EQ(size, 65536);
	if (check(dst, 65536, 43) != 0)
		H_FAIL("a message from an inner registration was damaged");
	H_OK(h_net_dereg_mr(n, rc, inner));
	fill(src, SELF_BYTES, 44);
	sreq = rreq = NULL;
	tag = 3;
	H_OK(h_net_irecv(n, rc, 1, &ptr, &cap, &tag, &rmh, &rreq));
	H_OK(h_net_isend(n, sc, src, SELF_BYTES, tag, smh, &sreq));
	h_net_wait(n, rreq, &size, BOUND_S);
	h_net_wait(n, sreq, NULL, BOUND_S);
	H_EQ(size, SELF_BYTES);
	if (check(dst, SELF_BYTES, 44) != 0)
		H_FAIL("a message from the outer registration was damaged");

	H_OK(h_net_dereg_mr(n, sc, smh));
	H_OK(h_net_dereg_mr(n, rc, rmh));
	H_OK(h_net_close_send(n, sc));
	H_OK(h_net_close_recv(n, rc));
	H_OK(h_net_close_listen(n, lc));
	free(src);
	free(dst);
}
