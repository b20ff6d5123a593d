// SPDX-License-Identifier: MIT
//
// The C++17 twin of consumer.c: checks that <xport/xport.h> is usable from
// C++ (extern "C", no C-only constructs) and that the installed library links
// into a C++ program through `pkg-config --cflags --libs xport` alone.
// Prints "consumer-cpp: ok" and exits 0, or says what failed and exits 1.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <xport/xport.h>

namespace
{

bool check(bool ok, const char *what, int line)
{
	if (!ok)
		std::fprintf(stderr, "consumer-cpp: line %d: check failed: %s\n", line, what);
	return ok;
}

bool check_rc(int rc, const char *what, int line)
{
	if (rc < 0)
		std::fprintf(stderr, "consumer-cpp: line %d: %s returned %d (%s) %s\n", line, what,
			     rc, xp_strerror(rc), xp_error_detail());
	return rc >= 0;
}

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!check((cond), #cond, __LINE__))                                               \
			return 1;                                                                  \
	} while (0)
#define CHECK_OK(call)                                                                             \
	do {                                                                                       \
		if (!check_rc((call), #call, __LINE__))                                            \
			return 1;                                                                  \
	} while (0)

constexpr std::uint64_t tag_self = 0x5e1f;

int check_singleton()
{
	xp_context_t *ctx = nullptr;
	CHECK_OK(xp_init(nullptr, &ctx));
	CHECK(xp_size(ctx) == 1);
	xp_comm_t *world = xp_comm_world(ctx);

	const std::string msg = "hello from C++";
	std::vector<char> got(64, 0);
	xp_request_t *sreq = nullptr;
	xp_status_t st{};
	CHECK_OK(xp_isend(world, msg.data(), msg.size(), 0, tag_self, &sreq));
	CHECK_OK(xp_recv(world, got.data(), got.size(), 0, tag_self, XP_TAG_EXACT, &st));
	CHECK_OK(xp_wait(&sreq, XP_TIMEOUT_DEFAULT, nullptr));
	CHECK(st.length == msg.size() && st.tag == tag_self && st.source == 0);
	CHECK(std::string(got.data(), st.length) == msg);
	CHECK(std::strlen(xp_strerror(-ENOMEM)) > 0);
	xp_finalize(ctx);
	return 0;
}

// Two in-process ranks: rank 0 sends a 64-bit value, rank 1 checks it.
int exchange(xp_context_t *ctx, void *arg)
{
	xp_comm_t *world = xp_comm_world(ctx);
	const std::uint64_t value = 0x0123456789abcdefULL;
	if (xp_comm_rank(world) == 0) {
		CHECK_OK(xp_send(world, &value, sizeof(value), 1, 42));
	} else {
		std::uint64_t got = 0;
		xp_status_t st{};
		CHECK_OK(xp_recv(world, &got, sizeof(got), 0, 42, XP_TAG_EXACT, &st));
		CHECK(got == value && st.length == sizeof(got));
		*static_cast<int *>(arg) = 1;
	}
	return 0;
}

} // namespace

int main()
{
	if (check_singleton() != 0)
		return 1;

	int received = 0;
	int rc = xp_local_run(2, nullptr, exchange, &received);
	if (rc != 0 || received != 1) {
		std::fprintf(stderr, "consumer-cpp: xp_local_run returned %d (%s), received %d\n",
			     rc, xp_strerror(rc), received);
		return 1;
	}
	std::printf("consumer-cpp: ok\n");
	return 0;
}
