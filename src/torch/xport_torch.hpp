// SPDX-License-Identifier: MIT
//
// xport as a PyTorch distributed backend (c10d): the process group of
// `torch.distributed.init_process_group("xport")` and of every
// `new_group(...)` made with it, its Work objects, and the one xport job
// they share.
//
// Written for torch 1.13's c10d::ProcessGroup (what Debian 12 ships). From
// torch 2.0 the same virtual operations live in c10d::Backend, which a
// ProcessGroup wraps; XportBase below switches on TORCH_VERSION_MAJOR, as
// torch-ccl does, and nothing else here depends on the difference.
#pragma once

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#endif

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <xport/xport.h>

namespace xport_torch
{

#if TORCH_VERSION_MAJOR >= 2
using XportBase = c10d::Backend;
#else
using XportBase = c10d::ProcessGroup;
#endif

// The process's one xport job: made by the first xport group from its
// store (rank 0 publishes an xp_unique_id, which carries the job key;
// every member takes it and calls xp_init_rank), then shared by every
// later group as a communicator of its own. torch ranks of the default
// group map to xport ranks through @members.
struct Job {
	xp_context_t *ctx = nullptr;
	std::vector<int64_t> members; // torch global rank of each xport rank
	int xp_rank_of(int64_t torch_rank) const;
};

// The job, made on first use from @store by @rank of @size (whose torch
// global ranks are @global_ranks, empty for the default group); *@made
// says whether this call made it.
std::shared_ptr<Job> job_get_or_make(const c10::intrusive_ptr<c10d::Store> &store, int rank,
				     int size, const std::vector<int64_t> &global_ranks,
				     std::chrono::milliseconds timeout, bool *made);
// Finalizes the job (collective over its ranks); groups and works left
// are unusable after it.
void job_shutdown();
// Whether the job is up: not yet shut down. Requests die with the job, so a
// Work finished after it must not touch its own.
bool job_live();

class WorkXport;

// Completes the Work objects whose future someone holds but nobody waits
// for (DDP waits on futures, not on Work): one thread per process, started
// at the first such future, testing those works' requests.
class Completer
{
      public:
	static Completer &get();
	void add(c10::intrusive_ptr<WorkXport> w);
	void stop();

      private:
	void run();
	std::mutex mu_;
	std::condition_variable cv_;
	std::vector<c10::intrusive_ptr<WorkXport>> works_;
	std::thread thread_;
	bool stopping_ = false;
};

// One operation's requests and what finishes it (copies out of staging
// buffers, a division for an average): completed by whichever thread gets
// there first, wait(), isCompleted() or the completer, under drive_mu_.
class WorkXport : public c10d::Work
{
      public:
	WorkXport(c10d::OpType type, int rank, const char *call, std::chrono::milliseconds timeout,
		  std::vector<at::Tensor> outputs);
	~WorkXport() override;

	void add_request(xp_request_t *r)
	{
		reqs_.push_back(r);
	}
	void on_success(std::function<void()> fn)
	{
		finish_fns_.push_back(std::move(fn));
	}
	// As on_success, before every function given so far (what must
	// happen to a buffer before it is copied back).
	void on_success_first(std::function<void()> fn)
	{
		finish_fns_.insert(finish_fns_.begin(), std::move(fn));
	}
	// Keeps a tensor xport reads or writes alive until the work is done.
	void keep(const at::Tensor &t)
	{
		keep_.push_back(t);
	}
	// What request @i completed with (for the functions of on_success).
	const xp_status_t &status(size_t i) const
	{
		return statuses_[i];
	}
	// Done with no request (nothing to exchange): completes at once.
	void complete_now();

	bool isCompleted() override;
	bool isSuccess() const override;
	std::exception_ptr exception() const override;
	int sourceRank() const override;
	std::vector<at::Tensor> result() override;
	bool wait(std::chrono::milliseconds timeout = kNoTimeout) override;
	void abort() override;
	c10::intrusive_ptr<c10::ivalue::Future> getFuture() override;

	// Without blocking: completes the work if its requests are done;
	// true once complete. For the completer.
	bool poll();

      private:
	void drive(int timeout_ms, bool block);
	void complete(std::exception_ptr e);
	std::exception_ptr failure(int rc, const char *what);

	const char *call_;
	std::chrono::milliseconds timeout_;
	std::vector<at::Tensor> outputs_;
	std::vector<at::Tensor> keep_;
	std::vector<xp_request_t *> reqs_;
	std::vector<xp_status_t> statuses_;
	std::vector<std::function<void()>> finish_fns_;
	std::mutex drive_mu_; // one thread drives the requests at a time
	std::atomic<bool> done_{ false };
	int source_ = -1;
	std::exception_ptr first_error_;
	c10::intrusive_ptr<c10::ivalue::Future> future_;
};

class ProcessGroupXport : public XportBase
{
      public:
	ProcessGroupXport(const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
			  std::chrono::milliseconds timeout, const std::string &group_id,
			  const std::vector<int64_t> &global_ranks);
	~ProcessGroupXport() override;

	const std::string getBackendName() const override
	{
		return "xport";
	}

	c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor> &tensors,
						 const c10d::BroadcastOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor> &tensors,
						 const c10d::AllreduceOptions &opts) override;
	c10::intrusive_ptr<c10d::Work>
	allreduce_coalesced(std::vector<at::Tensor> &tensors,
			    const c10d::AllreduceCoalescedOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor> &tensors,
					      const c10d::ReduceOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>> &outputs,
						 std::vector<at::Tensor> &inputs,
						 const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor &output, at::Tensor &input,
						       const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work>
	allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
			    std::vector<at::Tensor> &inputs,
			    const c10d::AllgatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>> &outputs,
					      std::vector<at::Tensor> &inputs,
					      const c10d::GatherOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor> &outputs,
					       std::vector<std::vector<at::Tensor>> &inputs,
					       const c10d::ScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work>
	reduce_scatter(std::vector<at::Tensor> &outputs,
		       std::vector<std::vector<at::Tensor>> &inputs,
		       const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work>
	_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
			     const c10d::ReduceScatterOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor &output, at::Tensor &input,
						     std::vector<int64_t> &output_splits,
						     std::vector<int64_t> &input_splits,
						     const c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor> &outputs,
						std::vector<at::Tensor> &inputs,
						const c10d::AllToAllOptions &opts) override;
	c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
					    int tag) override;
	c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
					    int tag) override;
	c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor> &tensors,
						     int tag) override;
	c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions &opts) override;

	xp_comm_t *comm() const
	{
		return comm_;
	}

      private:
	std::chrono::milliseconds op_timeout(std::chrono::milliseconds t) const;
	c10::intrusive_ptr<WorkXport> new_work(c10d::OpType type, const char *call,
					       std::chrono::milliseconds t,
					       std::vector<at::Tensor> outputs);
	c10::intrusive_ptr<c10d::Work> allreduce_one(std::vector<at::Tensor> &tensors,
						     const c10d::ReduceOp &op,
						     std::chrono::milliseconds t, c10d::OpType type,
						     const char *call);
	void alltoallv(const c10::intrusive_ptr<WorkXport> &w, const char *send, const char *recv,
		       const std::vector<size_t> &send_off, const std::vector<size_t> &send_len,
		       const std::vector<size_t> &recv_off, const std::vector<size_t> &recv_len);

	std::shared_ptr<Job> job_;
	xp_comm_t *comm_ = nullptr; // the group's collectives and the program's send/recv
	xp_comm_t *side_ = nullptr; // this backend's own point-to-point (uneven alltoall)
	std::chrono::milliseconds timeout_;
	uint64_t side_seq_ = 0; // calls that use side_, alike on every member
};

} // namespace xport_torch
