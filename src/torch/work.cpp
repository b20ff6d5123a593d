// SPDX-License-Identifier: MIT
//
// Work objects over xport requests, and the completer thread.
//
// An operation starts its xport requests in the calling thread (no hand-off
// to a worker, which is what makes a small allreduce cost a thread wake-up
// in Gloo) and returns a WorkXport. Whoever asks first drives the requests
// to completion: wait() in the caller's thread (xp_waitall: it spins on the
// rank's progress, then sleeps on its events), isCompleted() without
// blocking, or, for a future nobody waits on through the Work (DDP's
// buckets), the completer thread.
#include <sched.h>
#include <time.h>

#include <algorithm>
#include <cerrno>

#include <ATen/core/ivalue.h>

#include "xport_torch.hpp"

namespace xport_torch
{

WorkXport::WorkXport(c10d::OpType type, int rank, const char *call,
		     std::chrono::milliseconds timeout, std::vector<at::Tensor> outputs)
    : c10d::Work(rank, type), call_(call), timeout_(timeout), outputs_(std::move(outputs))
{
}

WorkXport::~WorkXport()
{
	// A Work dropped unfinished (an isend the program never waits on):
	// xport may still read or write the tensors it holds, which go with
	// it. Receives and sends not yet matched are cancelled; what is
	// further along (a collective) finishes, within its timeout.
	if (!done_.load(std::memory_order_acquire) && job_live()) {
		abort();
		try {
			drive(static_cast<int>(std::min<int64_t>(timeout_.count(), INT32_MAX)),
			      true);
		} catch (...) {
		}
	}
}

std::exception_ptr WorkXport::failure(int rc, const char *what)
{
	std::string detail = xp_error_detail();
	// A timeout says so as torch's own backends do ("Timed out"), which
	// is what programs and torch's tests look for; xport's text follows.
	std::string msg = std::string("xport: ") + call_ + " failed on rank " +
			  std::to_string(rank_) + ": " +
			  (rc == -ETIMEDOUT ? "Timed out waiting for it: " : "") +
			  (detail.empty() ? xp_strerror(rc) : detail);
	if (what != nullptr)
		msg += std::string(" (") + what + ")";
	return std::make_exception_ptr(std::runtime_error(msg));
}

void WorkXport::complete(std::exception_ptr e)
{
	if (e == nullptr) {
		try {
			for (auto &fn : finish_fns_)
				fn();
		} catch (...) {
			e = std::current_exception();
		}
	}
	finish_fns_.clear();
	c10::intrusive_ptr<c10::ivalue::Future> fut;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		completed_ = true;
		exception_ = e;
		done_.store(true, std::memory_order_release);
		fut = future_;
	}
	cv_.notify_all();
	// Outside the lock: a future's callbacks run inline.
	if (fut != nullptr) {
		if (e != nullptr)
			fut->setError(e);
		else
			fut->markCompleted(c10::IValue(outputs_));
	}
}

void WorkXport::complete_now()
{
	std::lock_guard<std::mutex> lock(drive_mu_);
	complete(nullptr);
}

// @timeout_ms < 0: no deadline. With @block false, only what is done now.
// The first failure's text is taken when it is seen: xp_error_detail() is
// the calling thread's, and only until its next failing call.
void WorkXport::drive(int timeout_ms, bool block)
{
	std::unique_lock<std::mutex> lock(drive_mu_, std::defer_lock);
	if (block)
		lock.lock();
	else if (!lock.try_lock())
		return;
	if (done_.load(std::memory_order_acquire))
		return;
	if (!job_live()) {
		// Its requests went with the job.
		complete(std::make_exception_ptr(std::runtime_error(
			std::string("xport: ") + call_ + " on rank " + std::to_string(rank_) +
			": the xport job was shut down before it completed")));
		return;
	}
	statuses_.resize(reqs_.size());
	if (block) {
		// xp_waitall writes an empty status for the requests done in an
		// earlier round (NULL entries): keep theirs.
		std::vector<xp_status_t> st(reqs_.size());
		std::vector<bool> pending(reqs_.size());
		for (size_t i = 0; i < reqs_.size(); i++)
			pending[i] = reqs_[i] != nullptr;
		int rc = xp_waitall(reqs_.size(), reqs_.data(),
				    timeout_ms < 0 ? XP_TIMEOUT_INFINITE : timeout_ms, st.data());
		for (size_t i = 0; i < reqs_.size(); i++)
			if (pending[i])
				statuses_[i] = st[i];
		if (rc < 0 && first_error_ == nullptr)
			first_error_ = failure(rc, nullptr);
	} else {
		bool pending = false;
		for (size_t i = 0; i < reqs_.size(); i++) {
			if (reqs_[i] == nullptr)
				continue; // completed in an earlier round
			int t = xp_test(&reqs_[i], &statuses_[i]);
			if (t == 0) {
				pending = true;
			} else if (t < 0 && first_error_ == nullptr) {
				first_error_ = failure(t, nullptr);
				abort(); // the rest cannot make the operation whole
			}
		}
		if (pending)
			return;
	}
	if (reqs_.size() == 1)
		source_ = statuses_[0].source;
	complete(first_error_);
}

bool WorkXport::poll()
{
	drive(0, false);
	return done_.load(std::memory_order_acquire);
}

bool WorkXport::isCompleted()
{
	return poll();
}

bool WorkXport::isSuccess() const
{
	std::lock_guard<std::mutex> lock(mutex_);
	return completed_ && exception_ == nullptr;
}

std::exception_ptr WorkXport::exception() const
{
	std::lock_guard<std::mutex> lock(mutex_);
	return exception_;
}

int WorkXport::sourceRank() const
{
	return source_;
}

std::vector<at::Tensor> WorkXport::result()
{
	return outputs_;
}

bool WorkXport::wait(std::chrono::milliseconds timeout)
{
	// torch's "no timeout" means the operation's own (the group's).
	auto t = timeout == kNoTimeout ? timeout_ : timeout;
	drive(t.count() > INT32_MAX ? -1 : static_cast<int>(t.count()), true);
	std::lock_guard<std::mutex> lock(mutex_);
	if (exception_ != nullptr)
		std::rethrow_exception(exception_);
	return true;
}

void WorkXport::abort()
{
	for (auto r : reqs_)
		if (r != nullptr)
			(void)xp_cancel(r);
}

c10::intrusive_ptr<c10::ivalue::Future> WorkXport::getFuture()
{
	bool register_it = false;
	c10::intrusive_ptr<c10::ivalue::Future> fut;
	std::exception_ptr e;
	{
		std::lock_guard<std::mutex> lock(mutex_);
		if (future_ == nullptr) {
			future_ = c10::make_intrusive<c10::ivalue::Future>(
				c10::ListType::create(c10::TensorType::get()));
			if (completed_) {
				e = exception_;
			} else {
				register_it = true;
			}
		}
		fut = future_;
	}
	if (!register_it && !fut->completed()) {
		// Completed before anyone asked: the future is made complete here.
		if (e != nullptr)
			fut->setError(e);
		else
			fut->markCompleted(c10::IValue(outputs_));
	}
	if (register_it)
		Completer::get().add(c10::intrusive_ptr<WorkXport>::reclaim_copy(this));
	return fut;
}

Completer &Completer::get()
{
	// Never destroyed: at exit its thread may still run (a process that
	// leaves on an error does not shut the job down), and destroying a
	// running std::thread terminates the process.
	static Completer *c = new Completer;
	return *c;
}

void Completer::add(c10::intrusive_ptr<WorkXport> w)
{
	std::lock_guard<std::mutex> lock(mu_);
	if (stopping_) {
		w->wait(); // after shutdown: nobody else would
		return;
	}
	works_.push_back(std::move(w));
	if (!thread_.joinable())
		thread_ = std::thread([this] { run(); });
	cv_.notify_one();
}

void Completer::stop()
{
	{
		std::lock_guard<std::mutex> lock(mu_);
		stopping_ = true;
	}
	cv_.notify_one();
	if (thread_.joinable())
		thread_.join();
}

void Completer::run()
{
	// Tests its works round after round while they last: spins a while
	// (a bucket's allreduce is often done within microseconds), then
	// yields, then naps 50 us between rounds so that a long operation
	// does not take a core from the training's own threads.
	unsigned idle = 0;
	std::vector<c10::intrusive_ptr<WorkXport>> mine;
	for (;;) {
		{
			std::unique_lock<std::mutex> lock(mu_);
			cv_.wait(lock, [this, &mine] {
				return stopping_ || !works_.empty() || !mine.empty();
			});
			for (auto &w : works_)
				mine.push_back(std::move(w));
			works_.clear();
			if (stopping_ && mine.empty())
				return;
		}
		size_t before = mine.size();
		for (size_t i = 0; i < mine.size();) {
			if (mine[i]->poll()) {
				mine[i] = std::move(mine.back());
				mine.pop_back();
			} else {
				i++;
			}
		}
		if (mine.size() < before) {
			idle = 0;
		} else if (++idle > 2000) {
			struct timespec ts = { 0, 50 * 1000 };
			nanosleep(&ts, nullptr);
		} else if (idle > 200) {
			sched_yield();
		}
		if (stopping_) {
			// Shutting down: whatever is left completes (or fails) now.
			for (auto &w : mine)
				(void)w->poll();
			std::lock_guard<std::mutex> lock(mu_);
			mine.clear();
			return;
		}
	}
}

} // namespace xport_torch
