/* SPDX-License-Identifier: MIT */
/*
 * One policy for settings: every XP_* variable and xp_config_t field that
 * is not accepted fails xp_init and xp_local_job_create with -EINVAL and a
 * detail naming the variable or field, the value and what is accepted;
 * accepted values work; errors always leave a detail; errors the program
 * receives as a return code are not logged as ERROR.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"

extern char **environ;

/* Removes every XP_* variable and every launcher's, so each case starts
 * from the defaults and xp_init makes a job of one. */
static void clear_env(void)
{
	static const char *const launcher_vars[] = {
		"RANK",         "WORLD_SIZE",           "SLURM_PROCID",
		"SLURM_NTASKS", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"
	};
	for (;;) {
		char name[128] = "";
		for (char **e = environ; *e != NULL; e++) {
			if (strncmp(*e, "XP_", 3) == 0) {
				size_t n = strcspn(*e, "=");
				if (n < sizeof(name)) {
					memcpy(name, *e, n);
					name[n] = '\0';
				}
				break;
			}
		}
		if (name[0] == '\0')
			break;
		unsetenv(name);
	}
	for (size_t i = 0; i < sizeof(launcher_vars) / sizeof(launcher_vars[0]); i++)
		unsetenv(launcher_vars[i]);
}

/* xp_init and xp_local_job_create both refuse, and say @want... */
static void expect_refused(const xp_config_t *cfg, const char *const *want, const char *what)
{
	xp_context_t *ctx = NULL;
	int rc = xp_init(cfg, &ctx);
	if (rc != -EINVAL)
		T_FAIL("%s: xp_init returned %d (%s), expected -EINVAL", what, rc, xp_strerror(rc));
	fprintf(stderr, "   %s: %s\n", what, xp_error_detail());
	for (const char *const *w = want; *w != NULL; w++)
		T_CONTAINS(xp_error_detail(), *w);
	/* XP_TRANSPORTS is a networked job's; local jobs check the rest. */
	if (strstr(what, "XP_TRANSPORTS") != NULL || strstr(what, "transports") != NULL)
		return;
	xp_local_job_t *job = NULL;
	rc = xp_local_job_create(2, cfg, &job);
	if (rc != -EINVAL)
		T_FAIL("%s: xp_local_job_create returned %d, expected -EINVAL", what, rc);
	for (const char *const *w = want; *w != NULL; w++)
		T_CONTAINS(xp_error_detail(), *w);
}

struct env_case {
	const char *var, *value;
	const char *want[4]; /* besides the variable and the value */
};

static void test_bad_environment(void)
{
	static const struct env_case cases[] = {
		{ "XP_LOG_LEVEL", "verbose", { "none, error, warn, info, debug" } },
		{ "XP_TCP_ZC", "yes", { "auto, off, on" } },
		{ "XP_ALLREDUCE_ALGO",
		  "butterfly",
		  { "auto, recursive_doubling, ring, hierarchical, rabenseifner" } },
		{ "XP_DEBUG",
		  "everything",
		  { "'everything'", "all, match, proto, pool, transport" } },
		{ "XP_DEBUG", "pool,", { "empty name" } },
		{ "XP_TIMEOUT_MS", "abc", { "not a number of milliseconds", "1 to 86400000" } },
		{ "XP_TIMEOUT_MS", "0", { "out of range" } },
		{ "XP_TIMEOUT_MS", "99999999999", { "out of range" } },
		{ "XP_TIMEOUT_MS", "-5", { "not a number" } },
		{ "XP_BOOT_TIMEOUT_MS", "1.5", { "milliseconds" } },
		{ "XP_POOL_MAX_BYTES", "1", { "out of range", "from 1m" } },
		{ "XP_POOL_MAX_BYTES", "64x", { "not a size" } },
		{ "XP_POOL_MAX_BYTES", "99999999999999g", { "out of range" } },
		{ "XP_POOL_MAX_BYTES", "0x100000", { "not a size" } },
		{ "XP_UNEXPECTED_MAX_BYTES", "-1", { "not a size" } },
		{ "XP_RNDV_THRESHOLD", "4kb", { "not a size" } },
		{ "XP_SHM_CMA_MIN", "sometimes", { "or off" } },
		{ "XP_HUGEPAGES", "maybe", { "auto, off, on" } },
		{ "XP_THREAD_MODE", "single", { "multi, serialized, funneled" } },
		{ "XP_SOCKET_IFNAME", "a-name-longer-than-ifnamsiz", { "1 to 15 bytes" } },
#ifndef XPT_DPDK_BUILT /* a build without DPDK names what it has */
		{ "XP_TRANSPORTS", "dpdk", { "dpdk is not in this build", "built: shm" } },
		{ "XP_TRANSPORTS", "dpdk,tcp", { "dpdk is not in this build" } },
#endif
#ifndef XPT_DPDK_BUILT
		{ "XP_TRANSPORTS", "verbs", { "'verbs' is not a transport", "not built: " } },
#else /* everything is built: nothing to say is not */
		{ "XP_TRANSPORTS", "verbs", { "'verbs' is not a transport", "dpdk, tcp;" } },
#endif
		{ "XP_TRANSPORTS", "shm,,shm", { "empty transport name" } },
		{ "XP_TRANSPORTS", "shm,shm", { "named twice" } },
		{ "XP_DPDK_UDP_PORT", "65536", { "out of range", "from 1 to 65535" } },
		{ "XP_DPDK_UDP_PORT", "0", { "out of range", "from 1 to 65535" } },
		{ "XP_DPDK_UDP_PORT", "http", { "not a size" } },
		{ "XP_DPDK_PORT", "1024", { "out of range", "from 0 to 1023" } },
		{ "XP_DPDK_PEER_TIMEOUT_MS", "0", { "out of range", "1 to 86400000" } },
	};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct env_case *c = &cases[i];
		char what[128];
		const char *want[8] = { c->var, c->value };
		size_t n = 2;
		for (size_t j = 0; j < 4 && c->want[j] != NULL; j++)
			want[n++] = c->want[j];
		want[n] = NULL;
		clear_env();
		setenv(c->var, c->value, 1);
		snprintf(what, sizeof(what), "%s=%s", c->var, c->value);
		expect_refused(NULL, want, what);
		/* The environment is the user's word: a program that sets
		 * the field itself still fails on a typo there. */
		xp_config_t cfg;
		xp_config_init(&cfg);
		cfg.timeout_ms = 1234;
		expect_refused(&cfg, want, what);
	}
	clear_env();
}

static void test_long_job_key_refused(void)
{
	char key[300];
	memset(key, 'k', sizeof(key) - 1);
	key[sizeof(key) - 1] = '\0';
	clear_env();
	setenv("XP_JOB_KEY", key, 1);
	const char *want[] = { "XP_JOB_KEY (299 bytes)", "1 to 255 bytes", NULL };
	expect_refused(NULL, want, "XP_JOB_KEY of 299 bytes");
	T_CHECK(strstr(xp_error_detail(), "kkkk") == NULL); /* never echoed */
	clear_env();
}

static void test_accepted_environment(void)
{
	static const char *const good[][2] = {
		{ "XP_LOG_LEVEL", "NONE" },         { "XP_TCP_ZC", "on" },
		{ "XP_DEBUG", "pool,transport" },   { "XP_DEBUG", "all" },
		{ "XP_TIMEOUT_MS", "86400000" },    { "XP_BOOT_TIMEOUT_MS", "0" },
		{ "XP_POOL_MAX_BYTES", "1m" },      { "XP_POOL_MAX_BYTES", "1048576" },
		{ "XP_RNDV_THRESHOLD", "0" },       { "XP_SHM_CMA_MIN", "off" },
		{ "XP_SHM_CMA_MIN", "256k" },       { "XP_HUGEPAGES", "Off" },
		{ "XP_THREAD_MODE", "serialized" }, { "XP_TRANSPORTS", "shm" },
		{ "XP_TRANSPORTS", "tcp, shm" },    { "XP_SOCKET_IFNAME", "lo" },
		{ "XP_ALLREDUCE_ALGO", "ring" },    { "XP_ALLREDUCE_ALGO", "rabenseifner" },
		{ "XP_DPDK_UDP_PORT", "65535" },    { "XP_DPDK_PORT", "1023" },
		{ "XP_DPDK_PEER_TIMEOUT_MS", "1" },
	};
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		clear_env();
		setenv("XP_LOG_LEVEL", "none", 1); /* XP_DEBUG=all would be loud */
		setenv(good[i][0], good[i][1], 1);
		xp_context_t *ctx = NULL;
		int rc = xp_init(NULL, &ctx);
		if (rc != 0)
			T_FAIL("%s=%s refused: %s", good[i][0], good[i][1], xp_error_detail());
		T_EQ(xp_size(ctx), 1);
		xp_finalize(ctx);
	}
	clear_env();
}

/* xp_config_init applies the environment to the fields. */
static void test_config_init_reads_environment(void)
{
	clear_env();
	setenv("XP_TIMEOUT_MS", "777", 1);
	setenv("XP_POOL_MAX_BYTES", "3m", 1);
	setenv("XP_TCP_ZC", "off", 1);
	setenv("XP_LOG_LEVEL", "info", 1);
	setenv("XP_SHM_CMA_MIN", "off", 1);
	setenv("XP_TRANSPORTS", "tcp", 1);
	xp_config_t cfg;
	xp_config_init(&cfg);
	T_EQ(cfg.struct_size, sizeof(cfg));
	T_EQ(cfg.timeout_ms, 777);
	T_EQ(cfg.pool_max_bytes, 3u << 20);
	T_EQ(cfg.tcp_zc, XP_TCP_ZC_OFF);
	T_EQ(cfg.log_level, XP_LOG_INFO);
	T_CHECK(cfg.shm_cma_min == SIZE_MAX);
	T_CHECK(cfg.transports != NULL && strcmp(cfg.transports, "tcp") == 0);
	T_CHECK(cfg.job_key == NULL && cfg.debug == NULL);
	clear_env();
	xp_config_init(&cfg);
	T_EQ(cfg.timeout_ms, 30000);
	T_EQ(cfg.pool_max_bytes, 64u << 20);
	T_EQ(cfg.log_level, XP_LOG_WARN);
	T_CHECK(cfg.transports == NULL);
}

/* The DPDK transport's settings: defaults, the environment into the fields,
 * and into the context's resolved settings (what it logs at info). */
static int nothing_body(xp_context_t *ctx, void *arg)
{
	(void)ctx;
	(void)arg;
	return 0;
}

/* What a local job of one with @cfg writes to stderr. */
static void stderr_of_local_run(const xp_config_t *cfg, char *out, size_t n)
{
	char path[] = "/tmp/xport-settings-XXXXXX";
	int fd = mkstemp(path);
	T_CHECK(fd >= 0);
	unlink(path);
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	int rc = xp_local_run(1, cfg, nothing_body, NULL);
	fflush(stderr);
	dup2(saved, 2);
	close(saved);
	T_OK(rc);
	ssize_t got = pread(fd, out, n - 1, 0);
	close(fd);
	out[got > 0 ? got : 0] = '\0';
}

static void test_dpdk_settings(void)
{
	xp_config_t cfg;
	clear_env();
	xp_config_init(&cfg);
	T_EQ(cfg.dpdk_udp_port, 47100);
	T_EQ(cfg.dpdk_peer_timeout_ms, 10000);
	T_EQ(cfg.dpdk_port, 0);
	T_CHECK(cfg.dpdk_eal == NULL && cfg.dpdk_ip == NULL && cfg.dpdk_neighbours == NULL &&
		cfg.dpdk_drop == NULL);

	/* A field out of range is refused as any other. */
	xp_config_init(&cfg);
	cfg.dpdk_udp_port = 70000;
	const char *w1[] = { "xp_config_t.dpdk_udp_port (XP_DPDK_UDP_PORT) = 70000",
			     "from 1 to 65535", NULL };
	expect_refused(&cfg, w1, "dpdk_udp_port 70000");
	xp_config_init(&cfg);
	char long_drop[80];
	memset(long_drop, '1', sizeof(long_drop) - 1);
	long_drop[sizeof(long_drop) - 1] = '\0';
	cfg.dpdk_drop = long_drop;
	const char *w2[] = { "xp_config_t.dpdk_drop (XP_DPDK_DROP)", "longer than 63 bytes", NULL };
	expect_refused(&cfg, w2, "dpdk_drop of 79 bytes");

	static const char eal[] = "-l {rank} --no-pci --vdev net_null{rank}";
	setenv("XP_DPDK_EAL", eal, 1);
	setenv("XP_DPDK_IP", "10.0.0.1,10.0.0.2", 1);
	setenv("XP_DPDK_PORT", "3", 1);
	setenv("XP_DPDK_UDP_PORT", "47200", 1);
	setenv("XP_DPDK_NEIGHBOURS", "10.0.0.2=02:00:00:00:00:02", 1);
	setenv("XP_DPDK_DROP", "0.05,0.01,0.01", 1);
	setenv("XP_DPDK_PEER_TIMEOUT_MS", "2500", 1);
	xp_config_init(&cfg);
	T_CHECK(cfg.dpdk_eal != NULL && strcmp(cfg.dpdk_eal, eal) == 0);
	T_CHECK(cfg.dpdk_ip != NULL && strcmp(cfg.dpdk_ip, "10.0.0.1,10.0.0.2") == 0);
	T_EQ(cfg.dpdk_port, 3);
	T_EQ(cfg.dpdk_udp_port, 47200);
	T_CHECK(cfg.dpdk_neighbours != NULL &&
		strcmp(cfg.dpdk_neighbours, "10.0.0.2=02:00:00:00:00:02") == 0);
	T_CHECK(cfg.dpdk_drop != NULL && strcmp(cfg.dpdk_drop, "0.05,0.01,0.01") == 0);
	T_EQ(cfg.dpdk_peer_timeout_ms, 2500);

	/* The resolved settings carry them: a context logs, at info, each
	 * setting that is not its default from its resolved copy. */
	char text[8192];
	cfg.log_level = XP_LOG_INFO;
	stderr_of_local_run(&cfg, text, sizeof(text));
	T_CONTAINS(text, "XP_DPDK_EAL=-l {rank} --no-pci --vdev net_null{rank} (environment)");
	T_CONTAINS(text, "XP_DPDK_UDP_PORT=47200 (environment)");
	T_CONTAINS(text, "XP_DPDK_PEER_TIMEOUT_MS=2500 (environment)");

	/* A program's own string, with its origin; defaults are not logged. */
	clear_env();
	xp_config_init(&cfg);
	char mine[64];
	snprintf(mine, sizeof(mine), "%s", "--in-memory -l 0");
	cfg.dpdk_eal = mine;
	cfg.log_level = XP_LOG_INFO;
	stderr_of_local_run(&cfg, text, sizeof(text));
	T_CONTAINS(text, "XP_DPDK_EAL=--in-memory -l 0 (config)");
	T_CHECK(strstr(text, "XP_DPDK_UDP_PORT") == NULL);
	T_CHECK(strstr(text, "XP_DPDK_PEER_TIMEOUT_MS") == NULL);

	/* Back to the default log level: the process's is the last context's. */
	clear_env();
	T_OK(xp_local_run(1, NULL, nothing_body, NULL));
}

static void test_bad_fields(void)
{
	xp_config_t cfg;
	clear_env();

	xp_config_init(&cfg);
	cfg.log_level = 7;
	const char *w1[] = { "xp_config_t.log_level (XP_LOG_LEVEL) = 7", "none, error", NULL };
	expect_refused(&cfg, w1, "log_level 7");

	xp_config_init(&cfg);
	cfg.tcp_zc = -1;
	const char *w2[] = { "xp_config_t.tcp_zc (XP_TCP_ZC) = -1", "auto, off, on", NULL };
	expect_refused(&cfg, w2, "tcp_zc -1");

	xp_config_init(&cfg);
	cfg.timeout_ms = 0;
	const char *w3[] = { "xp_config_t.timeout_ms (XP_TIMEOUT_MS) = 0", "1 to 86400000", NULL };
	expect_refused(&cfg, w3, "timeout_ms 0");

	xp_config_init(&cfg);
	cfg.pool_max_bytes = 1;
	const char *w4[] = { "xp_config_t.pool_max_bytes (XP_POOL_MAX_BYTES) = 1", "from 1m",
			     NULL };
	expect_refused(&cfg, w4, "pool_max_bytes 1");

	xp_config_init(&cfg);
	cfg.debug = "match,nope";
	const char *w5[] = { "xp_config_t.debug (XP_DEBUG)", "'nope'", NULL };
	expect_refused(&cfg, w5, "debug nope");

	xp_config_init(&cfg);
#ifndef XPT_DPDK_BUILT
	cfg.transports = "dpdk";
	const char *w6[] = { "xp_config_t.transports (XP_TRANSPORTS) = \"dpdk\"",
			     "dpdk is not in this build", NULL };
#else
	cfg.transports = "tcp,dpdk,,";
	const char *w6[] = { "xp_config_t.transports (XP_TRANSPORTS) = \"tcp,dpdk,,\"",
			     "empty transport name", NULL };
#endif
	expect_refused(&cfg, w6, "transports dpdk");

	xp_config_init(&cfg);
	cfg.boot_timeout_ms = -3;
	const char *w7[] = { "xp_config_t.boot_timeout_ms (XP_BOOT_TIMEOUT_MS) = -3", NULL };
	expect_refused(&cfg, w7, "boot_timeout_ms -3");

	xp_config_init(&cfg);
	cfg.struct_size = 0;
	const char *w8[] = { "struct_size = 0", "xp_config_init", NULL };
	expect_refused(&cfg, w8, "struct_size 0");
}

/* A program built against the first, shorter xp_config_t: the fields it
 * does not have take the defaults, whatever lies beyond its struct. */
static void test_shorter_struct(void)
{
	clear_env();
	xp_config_t cfg;
	xp_config_init(&cfg);
	memset((char *)&cfg + offsetof(xp_config_t, boot_timeout_ms), 0xff,
	       sizeof(cfg) - offsetof(xp_config_t, boot_timeout_ms));
	cfg.struct_size = offsetof(xp_config_t, thread_mode) + sizeof(int);
	xp_context_t *ctx;
	T_OK(xp_init(&cfg, &ctx));
	xp_finalize(ctx);
}

/* Every failing call leaves a detail. */
static int detail_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	if (xp_rank(ctx) != 0)
		return 0;
	xp_comm_t *w = xp_comm_world(ctx);
	xp_request_t *r;
	int v = 0;
	T_EQ(xp_isend(w, &v, sizeof(v), 5, 1, &r), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_isend");
	T_CONTAINS(xp_error_detail(), "rank 5 is not one of its 2 ranks");
	T_EQ(xp_send(w, &v, sizeof(v), -1, 1), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_send");
	T_EQ(xp_recv(w, &v, sizeof(v), 9, 1, XP_TAG_EXACT, NULL), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_recv");
	T_EQ(xp_wait(NULL, 0, NULL), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_wait");
	T_EQ(xp_test(NULL, NULL), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_test");
	T_EQ(xp_cancel(NULL), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_cancel");
	xp_route_t route;
	T_EQ(xp_route_get(ctx, 3, 8, &route), -EINVAL);
	T_CONTAINS(xp_error_detail(), "rank 3 is not one of the job's 2");
	T_EQ(xp_buf_get(ctx, 8, NULL), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_buf_get");
	T_EQ(xp_mem_register(ctx, &v, 0, NULL), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_mem_register");
	T_EQ(xp_oob_allgather(ctx, NULL, 4, &v), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_oob_allgather");
	xp_context_t *other;
	T_EQ(xp_local_job_context(NULL, 0, &other), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_local_job_context");
	return 0;
}

static void test_errors_leave_detail(void)
{
	clear_env();
	T_OK(xp_local_run(2, NULL, detail_body, NULL));
	xp_local_job_t *job;
	T_EQ(xp_local_job_create(0, NULL, &job), -EINVAL);
	T_CONTAINS(xp_error_detail(), "0 ranks");
	T_EQ(xp_local_run(2, NULL, NULL, NULL), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_local_run");
	T_EQ(xp_init(NULL, NULL), -EINVAL);
	T_CONTAINS(xp_error_detail(), "xp_init");
}

/* What a timed-out receive writes to stderr at @level. */
static int timeout_body(xp_context_t *ctx, void *arg)
{
	(void)arg;
	if (xp_rank(ctx) != 0)
		return 0;
	int v;
	xp_request_t *r;
	T_OK(xp_irecv(xp_comm_world(ctx), &v, sizeof(v), 1, 0x51, XP_TAG_EXACT, &r));
	T_EQ(xp_wait(&r, 20, NULL), -ETIMEDOUT);
	T_CONTAINS(xp_error_detail(), "xp_wait on an xp_irecv from rank 1 tag 0x51 on");
	T_CHECK(strstr(xp_error_detail(), "mask") == NULL);
	return 0;
}

static void stderr_of_timeout(int level, char *out, size_t n)
{
	char path[] = "/tmp/xport-settings-XXXXXX";
	int fd = mkstemp(path);
	T_CHECK(fd >= 0);
	unlink(path);
	fflush(stderr);
	int saved = dup(2);
	dup2(fd, 2);
	xp_config_t cfg;
	xp_config_init(&cfg);
	cfg.log_level = level;
	int rc = xp_local_run(2, &cfg, timeout_body, NULL);
	dup2(saved, 2);
	close(saved);
	T_OK(rc);
	ssize_t got = pread(fd, out, n - 1, 0);
	close(fd);
	out[got > 0 ? got : 0] = '\0';
}

static void test_returned_errors_not_logged_as_errors(void)
{
	char text[4096];
	clear_env();
	stderr_of_timeout(XP_LOG_WARN, text, sizeof(text));
	if (text[0] != '\0')
		T_FAIL("at warn, a timeout the program was told of logged: %s", text);
	stderr_of_timeout(XP_LOG_INFO, text, sizeof(text));
	T_CONTAINS(text, "INFO: rank 0: xp_wait on an xp_irecv from rank 1 tag 0x51");
	/* The process's level follows the context created last. */
	stderr_of_timeout(XP_LOG_NONE, text, sizeof(text));
	T_CHECK(text[0] == '\0');
}

int main(void)
{
	test_bad_environment();
	test_long_job_key_refused();
	test_accepted_environment();
	test_config_init_reads_environment();
	test_dpdk_settings();
	test_bad_fields();
	test_shorter_struct();
	test_errors_leave_detail();
	test_returned_errors_not_logged_as_errors();
	printf("settings: ok\n");
	return 0;
}
