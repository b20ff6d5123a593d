/* SPDX-License-Identifier: MIT */
/*
 * The DPDK port layer (src/dpdk/dpdk_port.c) on real virtual devices.
 *
 *   test_dpdk_port ring       one process, net_ring0 (transmit loops back to
 *                             receive): ARP for our own address is asked,
 *                             answered and learnt, then DATA datagrams of 0
 *                             to 1400 bytes go out and come back, parsed
 *                             field for field; after the port closes the
 *                             EAL's runtime directory is gone
 *   test_dpdk_port app-eal    the application starts the EAL itself: the
 *                             port uses it (no second rte_eal_init), and
 *                             closing the port leaves it up and its runtime
 *                             directory in place
 *   test_dpdk_port bad-conf   a neighbour table that does not parse, a port
 *                             that does not exist: clear errors
 *   test_dpdk_port memif      two processes over net_memif (a server and a
 *                             client on a socket in a fresh directory): ARP
 *                             both ways, then 2000 ping-pongs of 64 bytes,
 *                             each checked, and the median round trip said;
 *                             the responder stops polling before the other
 *                             exits (memif may crash a poller whose peer
 *                             goes: ../shared/lab/DPDK.md)
 *   test_dpdk_port echo EAL IP PORT PEER_IP PEER_PORT COUNT
 *                             (tests/dpdk/netns.sh runs it in a network
 *                             namespace over net_af_packet on a veth):
 *                             sends a first datagram to the kernel socket at
 *                             PEER (resolving it by ARP), then echoes COUNT
 *                             datagrams back, each checked
 *   test_dpdk_port kernel IP PORT PEER_IP PEER_PORT COUNT
 *                             the kernel side: a UDP socket that waits for
 *                             the first datagram, sends COUNT of its own
 *                             with xport's header and checks each echo
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <rte_eal.h>
#include <rte_errno.h>

#include "dpdk/dpdk_auth.h"
#include "dpdk/dpdk_port.h"
#include "testutil.h"

#define IP_A 0x0a4f0001u /* 10.79.0.1 */

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static bool dir_exists(const char *path)
{
	struct stat st;
	return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

struct got {
	int n;
	struct xpi_dgram_hdr hdr;
	uint8_t payload[2048];
	size_t len;
	uint32_t from_ip;
	uint16_t from_port;
};

static void keep(void *arg, const struct xpi_rx_frame *f)
{
	struct got *g = arg;
	g->n++;
	g->hdr = f->hdr;
	g->len = f->payload_len < sizeof(g->payload) ? f->payload_len : sizeof(g->payload);
	memcpy(g->payload, f->payload, g->len);
	g->from_ip = f->from.ip;
	g->from_port = f->from.port;
}

/* Polls until @g has @want datagrams, at most @secs. */
static void poll_for(struct xpi_dpdk_port *p, struct got *g, int want, double secs)
{
	double end = now_s() + secs;
	while (g->n < want && now_s() < end)
		xpi_dpdk_poll(p, 4, keep, g);
	if (g->n < want) {
		struct xpi_dpdk_stats st;
		xpi_dpdk_stats(p, &st);
		T_FAIL("%d of %d datagrams in %.0f s (rx %llu frames, %llu bad: %s)", g->n, want,
		       secs, (unsigned long long)st.rx_frames, (unsigned long long)st.rx_bad,
		       st.rx_bad_why != NULL ? st.rx_bad_why : "-");
	}
}

/* Sends, sealed with @key unless NULL, retrying while the neighbour is
 * being resolved. */
static void send_sealed(struct xpi_dpdk_port *p, uint32_t ip, uint16_t port,
			const struct xpi_dgram_hdr *h, const void *data, size_t len, struct got *g,
			const struct xpi_dgram_key *key)
{
	double end = now_s() + 5;
	int rc;
	while ((rc = xpi_dpdk_send(p, ip, port, h, data, len, key)) == -EAGAIN && now_s() < end)
		xpi_dpdk_poll(p, 4, keep, g); /* ARP answers come in here */
	if (rc < 0)
		T_FAIL("xpi_dpdk_send to %08x:%u: %d (%s)", ip, port, rc, strerror(-rc));
}

static void send_retry(struct xpi_dpdk_port *p, uint32_t ip, uint16_t port,
		       const struct xpi_dgram_hdr *h, const void *data, size_t len, struct got *g)
{
	send_sealed(p, ip, port, h, data, len, g, NULL);
}

/* The key the echo's sealed datagrams go under, the same on both sides. */
static void echo_key(struct xpi_dgram_key *k)
{
	static const uint8_t job_key[32] = { 1, 2, 3 };
	int mac = xpi_dgram_gcm_ok() ? XPI_DGRAM_MAC_GCM : XPI_DGRAM_MAC_POLY1305;
	if (xpi_dgram_key_init(k, mac, job_key, NULL, 0, 1, 7, 9) < 0)
		T_FAIL("xpi_dgram_key_init");
}

static int ring_body(void)
{
	char eal[256], why[256];
	snprintf(eal, sizeof(eal),
		 "-l 0 --no-pci --no-huge -m 64 --file-prefix=xptest-ring-%d --vdev=net_ring0 "
		 "--no-telemetry --log-level=lib.eal:error",
		 (int)getpid());
	struct xpi_dpdk_conf c = { .eal = eal, .port_id = 0, .ip = IP_A, .udp_port = 4791 };
	struct xpi_dpdk_port *p;
	int rc = xpi_dpdk_port_open(&c, &p, why, sizeof(why));
	if (rc < 0)
		T_FAIL("opening net_ring0: %s", why);
	char rundir[512];
	snprintf(rundir, sizeof(rundir), "%s", xpi_dpdk_runtime_dir());
	T_CHECK(dir_exists(rundir));
	struct got g = { 0 };
	uint8_t data[1400];
	for (size_t len = 0; len <= sizeof(data); len += len < 8 ? 1 : 233) {
		for (size_t i = 0; i < len; i++)
			data[i] = (uint8_t)(len + i * 13);
		struct xpi_dgram_hdr h = { .type = XPI_DGRAM_DATA,
					   .src_rank = 1,
					   .dst_rank = 2,
					   .epoch = 5,
					   .psn = (uint32_t)len,
					   .ack = 3,
					   .sack = len * 3,
					   .credit = 16,
					   .msg_len = len != 0 ? (uint32_t)len + 10 : 0,
					   .frag_off = len != 0 ? 10 : 0 };
		int before = g.n;
		send_retry(p, IP_A, 4791, &h, data, len, &g);
		poll_for(p, &g, before + 1, 5);
		T_CHECK(xpi_dgram_hdr_same(&g.hdr, &h));
		T_EQ(g.len, len);
		T_CHECK(memcmp(g.payload, data, len) == 0);
		T_EQ(g.from_ip, IP_A);
	}
	struct xpi_dpdk_stats st;
	xpi_dpdk_stats(p, &st);
	fprintf(stderr,
		"   %llu frames, %llu datagrams, ARP: %llu asked, %llu answered, %llu learnt\n",
		(unsigned long long)st.rx_frames, (unsigned long long)st.rx_dgrams,
		(unsigned long long)st.arp_asked, (unsigned long long)st.arp_answered,
		(unsigned long long)st.arp_learned);
	T_CHECK(st.arp_asked >= 1 && st.arp_answered >= 1 && st.arp_learned == 1);
	T_EQ(st.rx_bad, 0);
	xpi_dpdk_port_close(p);
	if (dir_exists(rundir))
		T_FAIL("the EAL's runtime directory %s is still there", rundir);
	return 0;
}

static int app_eal_body(void)
{
	char prefix[64], why[256];
	snprintf(prefix, sizeof(prefix), "--file-prefix=xptest-app-%d", (int)getpid());
	char *argv[] = { "app",
			 "-l",
			 "0",
			 "--no-pci",
			 "--no-huge",
			 "-m",
			 "64",
			 prefix,
			 "--vdev=net_ring0",
			 "--no-telemetry",
			 "--log-level=lib.eal:error",
			 NULL };
	if (rte_eal_init(11, argv) < 0)
		T_FAIL("the application's rte_eal_init: %s", rte_strerror(rte_errno));
	char rundir[512];
	snprintf(rundir, sizeof(rundir), "%s", rte_eal_get_runtime_dir());
	/* EAL arguments we would refuse to start with: unused, since the
	 * EAL is up. */
	struct xpi_dpdk_conf c = {
		.eal = "--no-such-option", .port_id = 0, .ip = IP_A, .udp_port = 4791
	};
	struct xpi_dpdk_port *p;
	if (xpi_dpdk_port_open(&c, &p, why, sizeof(why)) < 0)
		T_FAIL("opening a port on the application's EAL: %s", why);
	struct got g = { 0 };
	struct xpi_dgram_hdr h = { .type = XPI_DGRAM_DATA, .msg_len = 3 };
	send_retry(p, IP_A, 4791, &h, "abc", 3, &g);
	poll_for(p, &g, 1, 5);
	xpi_dpdk_port_close(p);
	T_CHECK(dir_exists(rundir)); /* the application's, still */
	T_EQ(rte_eal_cleanup(), 0);
	/* The application cleans up what it made. */
	char cmd[600];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", rundir);
	T_EQ(system(cmd), 0);
	return 0;
}

static int bad_conf_body(void)
{
	char eal[256], why[256];
	snprintf(eal, sizeof(eal),
		 "-l 0 --no-pci --no-huge -m 64 --file-prefix=xptest-bad-%d --vdev=net_ring0 "
		 "--no-telemetry --log-level=lib.eal:error",
		 (int)getpid());
	struct xpi_dpdk_conf c = { .eal = eal,
				   .port_id = 0,
				   .ip = IP_A,
				   .udp_port = 4791,
				   .neighbours = "10.79.0.2=02:00:00:00:00" };
	struct xpi_dpdk_port *p;
	T_EQ(xpi_dpdk_port_open(&c, &p, why, sizeof(why)), -EINVAL);
	T_CONTAINS(why, "is not IPV4=MAC");
	c.neighbours = "10.79.0.2=02:00:00:00:00:02";
	c.port_id = 7;
	T_EQ(xpi_dpdk_port_open(&c, &p, why, sizeof(why)), -ENODEV);
	T_CONTAINS(why, "no DPDK port 7");
	/* That failure cleaned the EAL up (no port left), and it cannot start
	 * again in this process: said so. */
	c.port_id = 0;
	T_EQ(xpi_dpdk_port_open(&c, &p, why, sizeof(why)), -EALREADY);
	T_CONTAINS(why, "cannot start one again");
	return 0;
}

#define MEMIF_ROUNDS 2000
#define IP_B 0x0a4f0002u

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* One side of the memif test: the server (@server) answers, the client
 * asks and times. */
static int memif_side(bool server, const char *dir)
{
	char eal[512], why[256];
	snprintf(eal, sizeof(eal),
		 "-l %d --no-pci --no-huge -m 64 --file-prefix=xptest-memif%c-%d "
		 "--vdev=net_memif0,role=%s,socket=%s/memif.sock,socket-abstract=no,id=0 "
		 "--no-telemetry --log-level=lib.eal:error --log-level=pmd.net.memif:error",
		 server ? 1 : 0, server ? 's' : 'c', (int)getpid(), server ? "server" : "client",
		 dir);
	struct xpi_dpdk_conf c = {
		.eal = eal, .port_id = 0, .ip = server ? IP_B : IP_A, .udp_port = 4791
	};
	struct xpi_dpdk_port *p;
	if (xpi_dpdk_port_open(&c, &p, why, sizeof(why)) < 0)
		T_FAIL("%s: opening memif: %s", server ? "server" : "client", why);
	uint32_t peer = server ? IP_A : IP_B;
	struct got g = { 0 };
	uint8_t data[64];
	static double rtt[MEMIF_ROUNDS];
	for (int i = 0; i <= MEMIF_ROUNDS; i++) { /* the last: goodbye */
		struct xpi_dgram_hdr h = { .type = XPI_DGRAM_DATA,
					   .src_rank = server,
					   .dst_rank = !server,
					   .psn = (uint32_t)i,
					   .msg_len = sizeof(data) };
		memset(data, i, sizeof(data));
		if (server) {
			poll_for(p, &g, i + 1, 30);
			if (g.hdr.psn != (uint32_t)i || g.len != sizeof(data) ||
			    memcmp(g.payload, data, sizeof(data)) != 0)
				T_FAIL("server: datagram %d is not what was sent", i);
			send_retry(p, peer, 4791, &h, data, sizeof(data), &g);
		} else {
			double t0 = now_s();
			/* The server cannot send before we poll once: the first
			 * sends retry while its ARP answer is on the way. */
			send_retry(p, peer, 4791, &h, data, sizeof(data), &g);
			poll_for(p, &g, i + 1, 30);
			if (i < MEMIF_ROUNDS)
				rtt[i] = now_s() - t0;
			if (g.hdr.psn != (uint32_t)i || memcmp(g.payload, data, sizeof(data)) != 0)
				T_FAIL("client: answer %d is not what was sent", i);
		}
	}
	/* The server's last answer is in the shared ring until the client
	 * reads it: the server closes (which tears the ring down) only once
	 * the client says it has it, and waits without polling (memif may
	 * crash a poller whose peer disconnects). */
	char done[600];
	snprintf(done, sizeof(done), "%s/client-done", dir);
	if (!server) {
		qsort(rtt, MEMIF_ROUNDS, sizeof(rtt[0]), cmp_double);
		fprintf(stderr,
			"   memif: %d round trips of 64 bytes, median %.2f us, p99 %.2f us\n",
			MEMIF_ROUNDS, rtt[MEMIF_ROUNDS / 2] * 1e6,
			rtt[MEMIF_ROUNDS * 99 / 100] * 1e6);
		FILE *f = fopen(done, "w");
		if (f != NULL)
			fclose(f);
	} else {
		double end = now_s() + 30;
		struct stat st;
		while (stat(done, &st) != 0 && now_s() < end)
			usleep(1000);
	}
	xpi_dpdk_port_close(p);
	return 0;
}

static pid_t memif_server;
static char memif_dir[] = "/tmp/xptest-memif-XXXXXX";

/* Whatever happened: the server stopped, and its directories gone. */
static void memif_cleanup(void)
{
	if (memif_server <= 0)
		return;
	kill(memif_server, SIGKILL);
	waitpid(memif_server, NULL, 0);
	char cmd[160];
	snprintf(cmd, sizeof(cmd), "rm -rf %s /var/run/dpdk/xptest-memifs-%d", memif_dir,
		 (int)memif_server);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", memif_dir);
}

static int memif_body(void)
{
	if (mkdtemp(memif_dir) == NULL)
		T_FAIL("mkdtemp: %s", strerror(errno));
	fflush(NULL);
	pid_t pid = fork();
	if (pid == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		alarm(60);
		_exit(memif_side(true, memif_dir));
	}
	memif_server = pid;
	atexit(memif_cleanup);
	alarm(60);
	/* The client connects once: only when the server listens. */
	char sock[128];
	snprintf(sock, sizeof(sock), "%s/memif.sock", memif_dir);
	double end = now_s() + 20;
	while (access(sock, F_OK) != 0 && now_s() < end)
		usleep(1000);
	int rc = memif_side(false, memif_dir);
	int st = 0;
	waitpid(pid, &st, 0);
	memif_server = 0;
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", memif_dir);
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove %s\n", memif_dir);
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		T_FAIL("the server exited with status %#x", st);
	return rc;
}

static uint32_t ip_of(const char *s)
{
	struct in_addr a;
	if (inet_pton(AF_INET, s, &a) != 1)
		T_FAIL("not an IPv4 address: %s", s);
	return ntohl(a.s_addr);
}

/* The DPDK side over af_packet: a first datagram to the kernel peer, then
 * each datagram it sends comes back with its psn + 1000 and the payload. */
static int echo_body(char **a)
{
	char why[256];
	uint32_t peer = ip_of(a[3]);
	uint16_t peer_port = (uint16_t)atoi(a[4]);
	int count = atoi(a[5]);
	struct xpi_dpdk_conf c = {
		.eal = a[0], .port_id = 0, .ip = ip_of(a[1]), .udp_port = (uint16_t)atoi(a[2])
	};
	struct xpi_dpdk_port *p;
	if (xpi_dpdk_port_open(&c, &p, why, sizeof(why)) < 0)
		T_FAIL("opening the port: %s", why);
	char rundir[512];
	snprintf(rundir, sizeof(rundir), "%s", xpi_dpdk_runtime_dir());
	struct got g = { 0 };
	struct xpi_dgram_hdr hello = {
		.type = XPI_DGRAM_DATA, .src_rank = 0, .dst_rank = 1, .psn = 1, .msg_len = 5
	};
	send_retry(p, peer, peer_port, &hello, "hello", 5, &g);
	/* Echoes are sealed (dpdk_auth.h): the kernel's socket takes them only
	 * if their UDP checksum is right, the device's over the sealed frame
	 * or none (0) where we compute it, and then checks the MAC. */
	static struct xpi_dgram_key key;
	echo_key(&key);
	for (int i = 0; i < count; i++) {
		poll_for(p, &g, i + 1, 20);
		if (g.from_ip != peer || g.from_port != peer_port)
			T_FAIL("datagram %d from %08x:%u", i, g.from_ip, g.from_port);
		struct xpi_dgram_hdr h = g.hdr;
		h.src_rank = 0;
		h.dst_rank = 1;
		h.psn += 1000;
		h.seq = (uint64_t)i + 1;
		send_sealed(p, peer, peer_port, &h, g.payload, g.len, &g, &key);
	}
	struct xpi_dpdk_stats st;
	xpi_dpdk_stats(p, &st);
	fprintf(stderr,
		"   dpdk: %llu frames in, %llu ours, %llu bad, %llu others; ARP %llu asked, "
		"%llu answered; checksums: sent %s, received %s (%llu verified by the device)\n",
		(unsigned long long)st.rx_frames, (unsigned long long)st.rx_dgrams,
		(unsigned long long)st.rx_bad, (unsigned long long)st.rx_other,
		(unsigned long long)st.arp_asked, (unsigned long long)st.arp_answered,
		st.tx_csum_offload ? "by the device" : "in software",
		st.rx_csum_offload ? "by the device" : "in software",
		(unsigned long long)st.rx_csum_offloaded);
	T_EQ(st.rx_bad, 0); /* the kernel's checksums pass ours */
	/* ECHO_WANT_OFFLOAD=1 (netns.sh over net_tap): the offload path was
	 * the one taken, so the kernel's verdict is on the device's sums. */
	if (getenv("ECHO_WANT_OFFLOAD") != NULL)
		T_CHECK(st.tx_csum_offload && st.rx_csum_offload);
	xpi_dpdk_port_close(p);
	if (dir_exists(rundir))
		T_FAIL("the EAL's runtime directory %s is still there", rundir);
	return 0;
}

/* The kernel side. */
static int kernel_body(char **a)
{
	int fd = socket(AF_INET, SOCK_DGRAM, 0);
	struct sockaddr_in me = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)atoi(a[1])),
				  .sin_addr.s_addr = htonl(ip_of(a[0])) };
	struct sockaddr_in peer = { .sin_family = AF_INET,
				    .sin_port = htons((uint16_t)atoi(a[3])),
				    .sin_addr.s_addr = htonl(ip_of(a[2])) };
	int count = atoi(a[4]);
	if (fd < 0 || bind(fd, (struct sockaddr *)&me, sizeof(me)) < 0)
		T_FAIL("kernel socket: %s", strerror(errno));
	printf("ready\n"); /* to netns.sh, which starts the DPDK side now */
	fflush(stdout);
	struct timeval tv = { .tv_sec = 20 };
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	uint8_t buf[2048];
	struct xpi_dgram_hdr h;
	const char *why = "";
	ssize_t n = recv(fd, buf, sizeof(buf), 0);
	if (n < 0)
		T_FAIL("kernel: no first datagram from DPDK: %s", strerror(errno));
	if (xpi_dgram_hdr_parse(buf, (size_t)n, 2, &h, &why) < 0 || h.psn != 1 ||
	    n != XPI_DGRAM_HDR_LEN + 5 || memcmp(buf + XPI_DGRAM_HDR_LEN, "hello", 5) != 0)
		T_FAIL("kernel: the first datagram is not what DPDK sent (%s)", why);
	static struct xpi_dgram_key key;
	echo_key(&key);
	for (int i = 0; i < count; i++) {
		size_t len = (size_t)(i * 97) % 1400;
		struct xpi_dgram_hdr out = { .type = XPI_DGRAM_DATA,
					     .src_rank = 1,
					     .dst_rank = 0,
					     .psn = (uint32_t)i + 2,
					     .ack = (uint32_t)i,
					     .msg_len = (uint32_t)len };
		xpi_dgram_hdr_pack(&out, buf);
		for (size_t k = 0; k < len; k++)
			buf[XPI_DGRAM_HDR_LEN + k] = (uint8_t)(i + k);
		if (sendto(fd, buf, XPI_DGRAM_HDR_LEN + len, 0, (struct sockaddr *)&peer,
			   sizeof(peer)) < 0)
			T_FAIL("kernel: sendto: %s", strerror(errno));
		n = recv(fd, buf, sizeof(buf), 0);
		if (n < 0)
			T_FAIL("kernel: no echo of datagram %d: %s", i, strerror(errno));
		if (xpi_dgram_hdr_parse(buf, (size_t)n, 2, &h, &why) < 0)
			T_FAIL("kernel: echo %d: %s", i, why);
		T_EQ(h.psn, (uint32_t)i + 2 + 1000);
		T_EQ(h.seq, (uint64_t)i + 1);
		if (xpi_dgram_verify(&key, buf, (size_t)n) != 0)
			T_FAIL("kernel: echo %d's MAC does not verify", i);
		T_EQ(h.ack, (uint32_t)i);
		T_EQ((size_t)n, XPI_DGRAM_HDR_LEN + len);
		for (size_t k = 0; k < len; k++)
			if (buf[XPI_DGRAM_HDR_LEN + k] != (uint8_t)(i + k))
				T_FAIL("kernel: echo %d corrupted at byte %zu", i, k);
	}
	close(fd);
	return 0;
}

/* A failing check exits at once: the runtime directories this process's
 * EAL made go with it all the same (--file-prefix=xptest-<mode>-<pid>). */
static void remove_our_rundirs(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf /var/run/dpdk/xptest-*-%d", (int)getpid());
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove /var/run/dpdk/xptest-*-%d\n", (int)getpid());
}

int main(int argc, char **argv)
{
	atexit(remove_our_rundirs);
	if (argc == 2 && strcmp(argv[1], "ring") == 0)
		return ring_body();
	if (argc == 2 && strcmp(argv[1], "app-eal") == 0)
		return app_eal_body();
	if (argc == 2 && strcmp(argv[1], "bad-conf") == 0)
		return bad_conf_body();
	if (argc == 2 && strcmp(argv[1], "memif") == 0)
		return memif_body();
	if (argc == 8 && strcmp(argv[1], "echo") == 0)
		return echo_body(argv + 2);
	if (argc == 7 && strcmp(argv[1], "kernel") == 0)
		return kernel_body(argv + 2);
	fprintf(stderr,
		"usage: %s ring | app-eal | bad-conf | memif | echo EAL IP PORT PEER_IP "
		"PEER_PORT COUNT | kernel IP PORT PEER_IP PEER_PORT COUNT\n",
		argv[0]);
	return 2;
}
