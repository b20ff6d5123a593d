// SPDX-License-Identifier: MIT
//
// The one xport job of a process, formed from PyTorch's store as NCCL
// forms its communicator: the group's rank 0 makes an xp_unique_id (rank
// 0's address and a fresh job key) and publishes it in the store it was
// given; every member reads it and calls xp_init_rank. No launcher
// variable and no XP_JOB_KEY is needed: the key travels in the id, and the
// store is the job's own (torchrun's TCPStore, a tcp:// or file:// one).
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>

#include "xport_torch.hpp"

namespace xport_torch
{

namespace
{

std::mutex job_mu;
std::shared_ptr<Job> the_job;
std::atomic<bool> live{ false };

const char kIdKey[] = "xport/unique_id";

[[noreturn]] void fail(const std::string &what, int rc)
{
	std::string detail = xp_error_detail();
	throw std::runtime_error("xport: " + what + ": " + xp_strerror(rc) +
				 (detail.empty() ? "" : " (" + detail + ")"));
}

int clamp_ms(std::chrono::milliseconds t)
{
	// xport takes 1 ms to 24 h; torch's "no timeout" is a huge value.
	auto ms = t.count();
	if (ms < 1)
		return 1;
	return ms > 86400000 ? 86400000 : static_cast<int>(ms);
}

} // namespace

int Job::xp_rank_of(int64_t torch_rank) const
{
	for (size_t i = 0; i < members.size(); i++)
		if (members[i] == torch_rank)
			return static_cast<int>(i);
	return -1;
}

std::shared_ptr<Job> job_get_or_make(const c10::intrusive_ptr<c10d::Store> &store, int rank,
				     int size, const std::vector<int64_t> &global_ranks,
				     std::chrono::milliseconds timeout, bool *made)
{
	std::lock_guard<std::mutex> lock(job_mu);
	*made = false;
	if (the_job != nullptr && the_job->ctx != nullptr)
		return the_job;

	xp_unique_id_t id;
	if (size > 1) {
		if (rank == 0) {
			int rc = xp_get_unique_id(&id);
			if (rc < 0)
				fail("rank 0 could not make the job's unique id", rc);
			store->set(kIdKey,
				   std::vector<uint8_t>(id.bytes, id.bytes + sizeof(id.bytes)));
		} else {
			// Blocks until rank 0 has set it, at most the store's timeout.
			std::vector<uint8_t> v = store->get(kIdKey);
			if (v.size() != sizeof(id.bytes))
				throw std::runtime_error("xport: rank " + std::to_string(rank) +
							 ": the store's \"" + kIdKey + "\" holds " +
							 std::to_string(v.size()) +
							 " bytes, not an xp_unique_id (" +
							 std::to_string(sizeof(id.bytes)) + ")");
			std::memcpy(id.bytes, v.data(), sizeof(id.bytes));
		}
	}

	xp_config_t cfg;
	xp_config_init(&cfg);
	// The group's timeout bounds xport's waits, unless the user set
	// xport's own; forming the job is bounded by it as well.
	if (std::getenv("XP_TIMEOUT_MS") == nullptr)
		cfg.timeout_ms = clamp_ms(timeout);
	if (std::getenv("XP_BOOT_TIMEOUT_MS") == nullptr)
		cfg.boot_timeout_ms = clamp_ms(timeout);

	auto job = std::make_shared<Job>();
	int rc = xp_init_rank(&cfg, rank, size, size > 1 ? &id : nullptr, &job->ctx);
	if (rc < 0)
		fail("rank " + std::to_string(rank) + " of " + std::to_string(size) +
			     " could not join the job",
		     rc);
	if (global_ranks.empty()) {
		for (int r = 0; r < size; r++)
			job->members.push_back(r);
	} else {
		job->members = global_ranks;
	}
	the_job = job;
	live.store(true);
	*made = true;
	return job;
}

bool job_live()
{
	return live.load();
}

void job_shutdown()
{
	Completer::get().stop();
	std::lock_guard<std::mutex> lock(job_mu);
	if (the_job == nullptr || the_job->ctx == nullptr)
		return;
	// Groups still alive keep the Job; its null context tells them their
	// communicators went with it.
	live.store(false);
	xp_finalize(the_job->ctx);
	the_job->ctx = nullptr;
	the_job.reset();
}

} // namespace xport_torch
