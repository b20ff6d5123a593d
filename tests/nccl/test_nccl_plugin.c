/* SPDX-License-Identifier: MIT */
/*
 * test_nccl_plugin PLUGIN VERSION MODE: drives ncclNetPlugin_vVERSION of
 * the plugin at PLUGIN as NCCL does, from two processes over loopback.
 *
 *   full  init, devices and properties; misuse refused (damaged handles,
 *         double closes...); a connection to ourselves; then both ways
 *         between the processes: sizes 0 B to 64 MiB, grouped receives,
 *         NCCL's bound of requests in flight tested out of order; closes
 *         and finalize.
 *   kill  data flowing both ways, then the child is killed (SIGKILL)
 *         while the parent tests its requests: each must end, in an
 *         error, within a bound.
 *   dmabuf full's transfers between the processes, on real dmabufs: each
 *         process sends from and receives into vgem dmabufs (../vgem.h)
 *         it maps, registered with regMrDmaBuf as host memory; the
 *         plugin's duplicates of their fds are open while registered and
 *         closed after deregMr (no fd left open). Skips (77) without vgem,
 *         which only the RDMA lab VM has (suite rdma).
 *
 * Both processes load the plugin after the fork, as two NCCL ranks would.
 */
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>

#include "../vgem.h"
#include "harness.h"

#define CONNECT_S 20.0
#define PIPE_S 120.0
#define CHILD_ALARM_S 300
#define KILL_BOUND_S 20.0

const char *h_who = "parent";

static const char *plugin_path;
static int plugin_version;

static void check_props(struct h_net *n)
{
	int ndev = 0;
	H_OK(h_net_devices(n, &ndev));
	H_EQ(ndev, 1);
	H_CHECK(n->name != NULL && strcmp(n->name, "xport") == 0);
	struct h_props p;
	H_OK(h_net_props(n, 0, &p));
	H_CHECK(p.name != NULL && strcmp(p.name, "xport") == 0);
	H_EQ(p.ptr_support, XNCCL_PTR_HOST);
	H_CHECK(p.speed > 0);
	H_EQ(p.port, 0);
	H_CHECK(p.latency >= 0.0f);
	const char *ep_max = getenv("XP_EP_MAX");
	H_EQ(p.max_comms, ep_max != NULL ? atoi(ep_max) : 1024);
	H_EQ(p.max_recvs, 8);
	const char *ifname = getenv("XP_SOCKET_IFNAME");
	if (ifname != NULL && strcmp(ifname, "lo") == 0) {
		/* Loopback: no PCI device, no speed of its own (the default). */
		H_CHECK(p.pci_path == NULL);
		H_EQ(p.speed, 10000);
	}
	if (n->version >= 7) {
		H_EQ(p.device_type, XNCCL_DEVICE_HOST);
		H_EQ(p.device_version, 0);
	}
	if (n->version >= 8)
		H_EQ(p.reg_is_global, 1);
	if (n->version >= 9) {
		H_EQ(p.force_flush, 0);
		H_EQ(p.vdev_ndevs, 1);
		H_EQ(p.vdev0, 0);
		H_CHECK(p.max_p2p_bytes == XNCCL_MAX_NET_SIZE);
		H_CHECK(p.max_coll_bytes == XNCCL_MAX_NET_SIZE);
	}
	H_EQ(p.max_multi_request_size, 1);
	H_EQ(p.rail_id, -1);
	H_EQ(p.plane_id, -1);
	/* A host plugin leaves the device-networking entries, makeVDevice
	 * and setNetAttr empty (and has finalize from v11). */
	H_CHECK(h_net_host_entries_empty(n));
}

/* init failed: a skip where the host lacks what xport's TCP transport
 * needs (io_uring refused, as seccomp does in some containers; no
 * loopback address), else a failure. The plugin's log says which. */
static void init_failed(int r)
{
	h_log_dump();
	static const char *const lacks[] = { "io_uring", "Function not implemented",
					     "Operation not permitted", "no interface" };
	for (size_t i = 0; i < sizeof(lacks) / sizeof(lacks[0]); i++)
		if (h_log_find(0, lacks[i]) != NULL) {
			fprintf(stderr,
				"SKIP [%s]: init failed (%s): the host lacks what xport's "
				"TCP transport needs (see the log above)\n",
				h_who, h_result_name(r));
			fflush(stderr);
			_exit(H_SKIP);
		}
	H_FAIL("init returned %d (%s)", r, h_result_name(r));
}

/* Loads, inits, checks properties; then listens and trades handles with
 * the other process, and connects both ways. */
static void start(struct h_net *n, struct h_peer *p, void **lc, void **sc, void **rc)
{
	h_net_load(n, plugin_path, plugin_version);
	int r = h_net_init(n);
	if (r != XNCCL_OK)
		init_failed(r);
	if (n->version >= 11)
		H_CHECK(n->ctx != NULL);
	check_props(n);
	unsigned char mine[XNCCL_HANDLE_BYTES], theirs[XNCCL_HANDLE_BYTES];
	H_OK(h_net_listen(n, mine, lc));
	H_CHECK(*lc != NULL);
	h_peer_send(p, mine, sizeof(mine));
	h_peer_recv(p, theirs, sizeof(theirs), PIPE_S);
	h_net_connect_pair(n, *lc, theirs, sc, rc, CONNECT_S);
	/* The transport both comms moved to: XP_TEST_EP_LANE's where the test
	 * asks for one (the suite rdma), else tcp on a host without an RDMA
	 * device (with one, either may: not checked). */
	const char *lane = getenv("XP_TEST_EP_LANE");
	if (lane == NULL && access("/sys/class/infiniband", F_OK) == 0)
		return;
	char want[64];
	snprintf(want, sizeof(want), "connected over %s (payloads %s)", lane ? lane : "tcp",
		 lane ? lane : "tcp");
	for (int k = 0; k < 2; k++) {
		const char *kind = k == 0 ? "send comm" : "receive comm";
		const struct h_line *l = h_log_find_any(0, kind);
		H_CHECK(l != NULL && strstr(l->text, want) != NULL);
	}
}

static void finish(struct h_net *n, void *lc, void *sc, void *rc)
{
	H_OK(h_net_close_send(n, sc));
	H_OK(h_net_close_recv(n, rc));
	H_OK(h_net_close_listen(n, lc));
	if (n->version >= 11)
		H_OK(h_net_finalize(n, n->ctx));
}

static int full(struct h_peer *p)
{
	struct h_net n;
	void *lc, *sc, *rc;
	start(&n, p, &lc, &sc, &rc);
	/* One process probes misuse while the other talks to itself, each
	 * on connections of its own. */
	if (p->role == 0)
		h_run_self(&n);
	else
		h_run_misuse(&n);
	h_peer_barrier(p, PIPE_S);
	h_run_sizes(&n, p, sc, rc);
	h_run_groups(&n, p, sc, rc);
	h_run_window(&n, p, sc, rc);
	h_run_quiet(&n, p, sc, rc);
	h_xfer_teardown(&n, sc, rc);
	h_peer_barrier(p, PIPE_S);
	finish(&n, lc, sc, rc);
	if (getenv("XPN_HARNESS_VERBOSE") != NULL)
		h_log_dump();
	fprintf(stderr, "[%s] v%d: all checks passed (%d log lines)\n", h_who, n.version,
		h_log_count());
	return 0;
}

/* ------------------------------------------------------------------------- */
/* Real dmabufs                                                              */

#define DEREG_BOUND_S 10.0

/* Open descriptors of this process, not counting the one that lists them. */
static int count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (d == NULL)
		H_FAIL("opendir /proc/self/fd: %s", strerror(errno));
	int count = 0;
	for (struct dirent *e; (e = readdir(d)) != NULL;)
		count += e->d_name[0] != '.';
	closedir(d);
	return count - 1;
}

static struct h_xfer_dmabuf dmabuf_new(void)
{
	struct vgem_dmabuf b = { .fd = -1 };
	const char *step;
	int r = vgem_dmabuf_new(H_XFER_BYTES, &b, &step);
	if (r < 0)
		H_FAIL("%s: %s", step, strerror(-r));
	return (struct h_xfer_dmabuf){ .fd = b.fd, .map = b.map, .len = b.len };
}

static int dmabuf(struct h_peer *p)
{
	struct h_net n;
	void *lc, *sc, *rc;
	start(&n, p, &lc, &sc, &rc);
	/* Counted with the connections made: what changes from here on is
	 * the dmabufs' doing. */
	int fds_before = count_fds();
	struct h_xfer_dmabuf send = dmabuf_new(), recv = dmabuf_new();
	H_EQ(count_fds(), fds_before + 2);
	h_xfer_use_dmabufs(&n, sc, rc, &send, &recv);
	/* Ours to close at once: each registration holds a duplicate. */
	close(send.fd);
	close(recv.fd);
	H_EQ(count_fds(), fds_before + 2);
	h_peer_barrier(p, PIPE_S);
	h_run_sizes(&n, p, sc, rc);
	h_run_groups(&n, p, sc, rc);
	h_run_window(&n, p, sc, rc);
	h_run_quiet(&n, p, sc, rc);
	h_xfer_teardown(&n, sc, rc);
	/* deregMr hands the deregistration to xport's engine thread, which
	 * closes the duplicates: they go within a bound, not at once. */
	double end = h_now() + DEREG_BOUND_S;
	int fds_after;
	while ((fds_after = count_fds()) != fds_before && h_now() < end)
		usleep(1000);
	if (fds_after != fds_before)
		H_FAIL("%d fds open before the dmabufs, %d %.0f s after deregistering them",
		       fds_before, fds_after, DEREG_BOUND_S);
	H_CHECK(munmap(send.map, send.len) == 0 && munmap(recv.map, recv.len) == 0);
	h_peer_barrier(p, PIPE_S);
	finish(&n, lc, sc, rc);
	if (getenv("XPN_HARNESS_VERBOSE") != NULL)
		h_log_dump();
	fprintf(stderr,
		"[%s] v%d: two vgem dmabufs of %zu bytes registered with regMrDmaBuf: all "
		"checks passed, no fd left open (%d log lines)\n",
		h_who, n.version, H_XFER_BYTES, h_log_count());
	return 0;
}

/* ------------------------------------------------------------------------- */
/* A peer killed mid-transfer                                                */

#define KILL_MSG ((size_t)4 << 20)
#define KILL_INFLIGHT 4                /* the child's sends, the parent's sends */
#define KILL_RECVS (2 * KILL_INFLIGHT) /* more than the child can fill */

/* The child streams to the parent until it is killed, and never receives. */
static int kill_child(struct h_peer *p)
{
	struct h_net n;
	void *lc, *sc, *rc;
	start(&n, p, &lc, &sc, &rc);
	unsigned char *buf = malloc(KILL_MSG);
	H_CHECK(buf != NULL);
	memset(buf, 0x33, KILL_MSG);
	void *mh, *req[KILL_INFLIGHT] = { NULL };
	H_OK(h_net_reg_mr(&n, sc, buf, KILL_MSG, XNCCL_PTR_HOST, &mh));
	for (int tag = 0;; tag++) {
		int k = tag % KILL_INFLIGHT, done = 0;
		while (req[k] != NULL && !done)
			H_OK(h_net_test(&n, req[k], &done, NULL));
		req[k] = NULL;
		while (req[k] == NULL)
			H_OK(h_net_isend(&n, sc, buf, KILL_MSG, tag, mh, &req[k]));
	}
}

static int is_failure_code(int r)
{
	return r == XNCCL_REMOTE_ERROR || r == XNCCL_SYSTEM_ERROR;
}

static int kill_parent(struct h_peer *p)
{
	struct h_net n;
	void *lc, *sc, *rc;
	start(&n, p, &lc, &sc, &rc);
	unsigned char *rbuf = malloc(KILL_MSG * KILL_RECVS), *sbuf = malloc(KILL_MSG);
	H_CHECK(rbuf != NULL && sbuf != NULL);
	memset(sbuf, 0x44, KILL_MSG);
	void *rmh, *smh;
	H_OK(h_net_reg_mr(&n, rc, rbuf, KILL_MSG * KILL_RECVS, XNCCL_PTR_HOST, &rmh));
	H_OK(h_net_reg_mr(&n, sc, sbuf, KILL_MSG, XNCCL_PTR_HOST, &smh));

	/* Sends the child never receives: they wait for it until it dies. */
	void *sreq[KILL_INFLIGHT];
	for (int k = 0; k < KILL_INFLIGHT; k++) {
		H_OK(h_net_isend(&n, sc, sbuf, KILL_MSG, 100000 + k, smh, &sreq[k]));
		H_CHECK(sreq[k] != NULL);
	}
	/* Receives of the child's stream, posted again as they complete; the
	 * child is killed once some have, so data is flowing, with more
	 * receives posted than the child has sends in flight: some of them
	 * can only fail. */
	void *rreq[KILL_RECVS] = { NULL };
	int next_tag = 0, received = 0;
	double end = h_now() + PIPE_S;
	for (;;) {
		for (int k = 0; k < KILL_RECVS; k++) {
			if (rreq[k] != NULL)
				continue;
			void *dst = rbuf + (size_t)k * KILL_MSG;
			size_t cap = KILL_MSG;
			int tag = next_tag++;
			H_OK(h_net_irecv(&n, rc, 1, &dst, &cap, &tag, &rmh, &rreq[k]));
			H_CHECK(rreq[k] != NULL);
		}
		if (received >= 3)
			break;
		for (int k = 0; k < KILL_RECVS; k++) {
			int done = 0, size = -1;
			H_OK(h_net_test(&n, rreq[k], &done, &size));
			if (done) {
				H_EQ(size, KILL_MSG);
				rreq[k] = NULL;
				received++;
			}
		}
		if (h_now() > end)
			H_FAIL("the child's stream did not flow");
	}
	int from = h_log_count();
	H_CHECK(kill(p->pid, SIGKILL) == 0);
	double killed = h_now();

	/* Every request in flight ends, within the bound: receives of data
	 * that had arrived may end well; the rest, and every send, fail. */
	int failed_recv = 0, failed_send = 0, left = 0;
	void **all[KILL_RECVS + KILL_INFLIGHT];
	for (int k = 0; k < KILL_RECVS; k++)
		all[k] = &rreq[k];
	for (int k = 0; k < KILL_INFLIGHT; k++)
		all[KILL_RECVS + k] = &sreq[k];
	do {
		left = 0;
		for (int i = 0; i < KILL_RECVS + KILL_INFLIGHT; i++) {
			if (*all[i] == NULL)
				continue;
			int done = 0, size = -1;
			int r = h_net_test(&n, *all[i], &done, &size);
			if (r != XNCCL_OK) {
				if (!is_failure_code(r))
					H_FAIL("a request to the dead peer failed with %d (%s), not a "
					       "system or remote error",
					       r, h_result_name(r));
				*(i < KILL_RECVS ? &failed_recv : &failed_send) += 1;
				*all[i] = NULL;
			} else if (done) {
				H_CHECK(i < KILL_RECVS); /* no send completes */
				H_EQ(size, KILL_MSG);
				*all[i] = NULL;
			} else {
				left++;
			}
		}
		if (left > 0 && h_now() - killed > KILL_BOUND_S)
			H_FAIL("%d requests still pending %.0f s after the peer was killed", left,
			       KILL_BOUND_S);
	} while (left > 0);
	double took = h_now() - killed;
	H_EQ(failed_send, KILL_INFLIGHT);
	H_CHECK(failed_recv > 0);
	H_CHECK(h_log_find(from, "NET/xport") != NULL);
	H_EQ(h_peer_join(p), 128 + SIGKILL);

	/* Closing after the failure is prompt and clean. */
	double t0 = h_now();
	H_OK(h_net_dereg_mr(&n, rc, rmh));
	H_OK(h_net_dereg_mr(&n, sc, smh));
	finish(&n, lc, sc, rc);
	H_CHECK(h_now() - t0 < KILL_BOUND_S);
	fprintf(stderr,
		"[%s] v%d: peer killed; %d receives and %d sends failed within %.3f s, as they "
		"must\n",
		h_who, n.version, failed_recv, failed_send, took);
	free(rbuf);
	free(sbuf);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[3], "full") != 0 && strcmp(argv[3], "kill") != 0 &&
			  strcmp(argv[3], "dmabuf") != 0)) {
		fprintf(stderr, "usage: %s PLUGIN VERSION full|kill|dmabuf\n", argv[0]);
		return 1;
	}
	plugin_path = argv[1];
	plugin_version = atoi(argv[2]);
	if (plugin_version < 6 || plugin_version > 12) {
		fprintf(stderr, "versions 6 to 12 only\n");
		return 1;
	}
	/* Over loopback: the one interface every host has. */
	setenv("XP_SOCKET_IFNAME", "lo", 0);
	signal(SIGPIPE, SIG_IGN);

	if (strcmp(argv[3], "dmabuf") == 0 && !vgem_present()) {
		printf("SKIP: no vgem here (the lab VM loads it)\n");
		return H_SKIP;
	}

	struct h_peer p;
	if (strcmp(argv[3], "full") == 0 || strcmp(argv[3], "dmabuf") == 0) {
		int (*mode)(struct h_peer *) = strcmp(argv[3], "full") == 0 ? full : dmabuf;
		h_peer_fork(&p, mode, CHILD_ALARM_S);
		alarm(CHILD_ALARM_S);
		mode(&p);
		int child = h_peer_join(&p);
		if (child == H_SKIP)
			return H_SKIP;
		if (child != 0)
			H_FAIL("the child process failed (exit %d)", child);
		return 0;
	}
	h_peer_fork(&p, kill_child, CHILD_ALARM_S);
	alarm(CHILD_ALARM_S);
	return kill_parent(&p);
}
