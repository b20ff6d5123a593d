// SPDX-License-Identifier: MIT
//
// The operations of the xport process group: each starts xport's
// nonblocking call on the tensors' own memory where the layout allows
// (contiguous CPU tensors), else on a contiguous copy that the Work copies
// back when it completes, and returns the Work.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cstring>

#include "xport_torch.hpp"

namespace xport_torch
{

namespace
{

// torch's "unset" means the group's timeout.
constexpr std::chrono::milliseconds kUnset = c10d::kUnsetTimeout;

void check_tensor(const char *call, const at::Tensor &t)
{
	TORCH_CHECK(t.device().is_cpu(), "xport: ", call, ": a tensor on ", t.device(),
		    ": only CPU tensors are supported for now (a device tensor must be "
		    "copied to host memory first; see the README, \"PyTorch\")");
	TORCH_CHECK(t.layout() == at::kStrided, "xport: ", call, ": a ", t.layout(),
		    " tensor: only dense (strided) tensors are supported");
}

void check_single(const char *call, const std::vector<at::Tensor> &tensors)
{
	TORCH_CHECK(tensors.size() == 1, "xport: ", call, ": expects one tensor per call, got ",
		    tensors.size(), " (CPU tensors: one per process)");
	check_tensor(call, tensors[0]);
}

size_t nbytes(const at::Tensor &t)
{
	return static_cast<size_t>(t.numel()) * t.element_size();
}

// The tensor forms of all_gather and reduce_scatter: @whole (@whole_name)
// holds @n blocks of @block's type and size.
void check_block_and_whole(const char *call, const at::Tensor &block, const at::Tensor &whole,
			   const char *whole_name, int n)
{
	check_tensor(call, block);
	check_tensor(call, whole);
	TORCH_CHECK(block.scalar_type() == whole.scalar_type(), "xport: ", call,
		    ": input and output types differ");
	TORCH_CHECK(whole.numel() == block.numel() * n, "xport: ", call, ": the ", whole_name,
		    " has ", whole.numel(), " elements, not ", n, " (the group's size) times ",
		    block.numel());
}

// xport's element type for a reduction of @t's type; complex types reduce
// as pairs of reals (sums only).
bool element_type(at::ScalarType s, xp_dtype_t *dt)
{
	static const struct {
		at::ScalarType torch;
		xp_dtype_t xport;
	} types[] = {
		{ at::kFloat, XP_FLOAT32 },  { at::kComplexFloat, XP_FLOAT32 },
		{ at::kDouble, XP_FLOAT64 }, { at::kComplexDouble, XP_FLOAT64 },
		{ at::kHalf, XP_FLOAT16 },   { at::kBFloat16, XP_BFLOAT16 },
		{ at::kChar, XP_INT8 },      { at::kByte, XP_UINT8 },
		{ at::kBool, XP_UINT8 },     { at::kInt, XP_INT32 },
		{ at::kLong, XP_INT64 },
	};
	for (const auto &t : types) {
		if (t.torch == s) {
			*dt = t.xport;
			return true;
		}
	}
	return false;
}

// How a torch reduction runs on xport.
struct Reduction {
	xp_dtype_t dtype;
	xp_op_t op;
	size_t count;      // elements of dtype per tensor
	bool bitwise;      // BAND, BOR, BXOR: gathered, then combined here
	bool divide_after; // AVG where xport has none (reduce): a sum, divided here
	c10d::ReduceOp::RedOpType torch_op;
};

Reduction plan_reduction(const char *call, const at::Tensor &t, const c10d::ReduceOp &rop,
			 bool xport_avg)
{
	Reduction r{};
	r.torch_op = rop.op_;
	at::ScalarType s = t.scalar_type();
	TORCH_CHECK(element_type(s, &r.dtype), "xport: ", call, ": tensors of type ", s,
		    " cannot be reduced (float32, float64, float16, bfloat16, int8, uint8, "
		    "int32, int64, bool and complex sums can)");
	r.count = static_cast<size_t>(t.numel()) * (t.is_complex() ? 2 : 1);
	bool integral = at::isIntegralType(s, /*includeBool=*/true);
	switch (rop.op_) {
	case c10d::ReduceOp::SUM:
		r.op = XP_SUM;
		break;
	case c10d::ReduceOp::AVG:
		r.op = xport_avg ? XP_AVG : XP_SUM;
		r.divide_after = !xport_avg;
		break;
	case c10d::ReduceOp::PRODUCT:
		r.op = XP_PROD;
		break;
	case c10d::ReduceOp::MIN:
		r.op = XP_MIN;
		break;
	case c10d::ReduceOp::MAX:
		r.op = XP_MAX;
		break;
	case c10d::ReduceOp::BAND:
	case c10d::ReduceOp::BOR:
	case c10d::ReduceOp::BXOR:
		TORCH_CHECK(integral, "xport: ", call,
			    ": bitwise reductions need an integer or "
			    "bool tensor, not ",
			    s);
		r.bitwise = true;
		break;
	default:
		TORCH_CHECK(false, "xport: ", call, ": reduction operator ",
			    static_cast<int>(rop.op_),
			    " is not supported (SUM, AVG, PRODUCT, MIN, MAX, BAND, BOR, BXOR are)");
	}
	TORCH_CHECK(!t.is_complex() || r.op == XP_SUM || r.op == XP_AVG, "xport: ", call,
		    ": complex tensors can only be summed or averaged");
	if (s == at::kBool && !r.bitwise) {
		// A bool sum is a logical or (as torch's other backends do it).
		TORCH_CHECK(rop.op_ != c10d::ReduceOp::AVG, "xport: ", call,
			    ": a bool tensor cannot be averaged");
		r.op = (r.op == XP_PROD || r.op == XP_MIN) ? XP_MIN : XP_MAX;
	}
	return r;
}

// Combines the @size gathered copies (rows of @all) into @out with a
// bitwise operator.
void combine_bitwise(at::Tensor &out, const at::Tensor &all, c10d::ReduceOp::RedOpType op)
{
	at::Tensor acc = all[0].clone();
	for (int64_t i = 1; i < all.size(0); i++) {
		if (op == c10d::ReduceOp::BAND)
			acc.bitwise_and_(all[i]);
		else if (op == c10d::ReduceOp::BOR)
			acc.bitwise_or_(all[i]);
		else
			acc.bitwise_xor_(all[i]);
	}
	out.copy_(acc.view_as(out));
}

// @t itself if xport can use its memory, else a contiguous copy (of its
// values: an input, or an in-place buffer).
at::Tensor contiguous_of(const at::Tensor &t)
{
	return t.is_contiguous() ? t : t.contiguous();
}

// A contiguous buffer for the output @t: @t itself, or a fresh one that
// @w copies into @t when it completes.
at::Tensor output_of(const c10::intrusive_ptr<WorkXport> &w, at::Tensor t, bool with_values)
{
	if (t.is_contiguous())
		return t;
	at::Tensor buf = with_values ?
				 t.contiguous() :
				 at::empty(t.sizes(),
					   t.options().memory_format(at::MemoryFormat::Contiguous));
	w->on_success([t, buf]() mutable { t.copy_(buf); });
	return buf;
}

// Copies block i (@each bytes) of the byte tensor @flat into @outs[i].
void copy_out_blocks(std::vector<at::Tensor> &outs, const at::Tensor &flat, size_t each)
{
	for (size_t i = 0; i < outs.size(); i++)
		outs[i].copy_(
			flat.narrow(0, static_cast<int64_t>(i * each), static_cast<int64_t>(each))
				.view(outs[i].scalar_type())
				.view(outs[i].sizes()));
}

void *data_of(const at::Tensor &t)
{
	return t.numel() == 0 ? nullptr : t.data_ptr();
}

void check_rc(const char *call, int rc)
{
	if (rc < 0) {
		std::string detail = xp_error_detail();
		TORCH_CHECK(false, "xport: ", call, ": ",
			    detail.empty() ? xp_strerror(rc) : detail);
	}
}

uint64_t fnv1a(const std::string &s)
{
	uint64_t h = 1469598103934665603ull;
	for (unsigned char c : s)
		h = (h ^ c) * 1099511628211ull;
	return h;
}

// Rows of a tensor split along dim 0: bytes of one row.
size_t row_bytes(const at::Tensor &t)
{
	return t.dim() == 0 || t.size(0) == 0 ? 0 : nbytes(t) / static_cast<size_t>(t.size(0));
}

} // namespace

ProcessGroupXport::ProcessGroupXport(const c10::intrusive_ptr<c10d::Store> &store, int rank,
				     int size, std::chrono::milliseconds timeout,
				     const std::string &group_id,
				     const std::vector<int64_t> &global_ranks)
    : XportBase(rank, size), timeout_(timeout)
{
	bool made = false;
	job_ = job_get_or_make(store, rank, size, global_ranks, timeout, &made);
	xp_comm_t *world = xp_comm_world(job_->ctx);
	if (made) {
		comm_ = world; // the group that formed the job is its world
	} else {
		// A later group: a communicator of its members, made by them
		// alone (torch calls the backend only in member processes).
		std::vector<int> ranks;
		for (int64_t g : global_ranks) {
			int x = job_->xp_rank_of(g);
			TORCH_CHECK(x >= 0, "xport: new_group: rank ", g,
				    " is not in the xport job, which the first xport group (of ",
				    job_->members.size(), " ranks) formed");
			ranks.push_back(x);
		}
		if (global_ranks.empty()) // a second default group: the whole job
			for (int r = 0; r < size; r++)
				ranks.push_back(r);
		check_rc("new_group", xp_comm_create_group(world, static_cast<int>(ranks.size()),
							   ranks.data(), fnv1a(group_id), &comm_));
	}
	int rc = xp_comm_dup(comm_, &side_);
	if (rc < 0) {
		if (comm_ != world)
			xp_comm_free(comm_);
		check_rc("new_group", rc);
	}
}

ProcessGroupXport::~ProcessGroupXport()
{
	if (job_ == nullptr || job_->ctx == nullptr)
		return; // the job was finalized: its communicators went with it
	xp_comm_free(side_);
	if (comm_ != xp_comm_world(job_->ctx))
		xp_comm_free(comm_);
}

std::chrono::milliseconds ProcessGroupXport::op_timeout(std::chrono::milliseconds t) const
{
	return t == kUnset ? timeout_ : t;
}

c10::intrusive_ptr<WorkXport> ProcessGroupXport::new_work(c10d::OpType type, const char *call,
							  std::chrono::milliseconds t,
							  std::vector<at::Tensor> outputs)
{
	TORCH_CHECK(job_->ctx != nullptr, "xport: ", call,
		    ": the xport job was shut down (xport.torch.shutdown or process exit)");
	return c10::make_intrusive<WorkXport>(type, getRank(), call, op_timeout(t),
					      std::move(outputs));
}

// ---------------------------------------------------------------------------
// Reductions

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::allreduce_one(std::vector<at::Tensor> &tensors,
								const c10d::ReduceOp &op,
								std::chrono::milliseconds t,
								c10d::OpType type, const char *call)
{
	for (auto &x : tensors)
		check_tensor(call, x);
	auto w = new_work(type, call, t, tensors);
	for (auto &x : tensors) {
		Reduction r = plan_reduction(call, x, op, true);
		at::Tensor buf = output_of(w, x, true);
		xp_request_t *req = nullptr;
		if (r.bitwise) {
			at::Tensor all = at::empty({ getSize(), x.numel() }, x.options());
			check_rc(call, xp_iallgather(comm_, data_of(buf), data_of(all), nbytes(x),
						     XP_UINT8, &req));
			// Before output_of's copy-back of buf, if there is one.
			w->on_success_first(
				[buf, all, r]() mutable { combine_bitwise(buf, all, r.torch_op); });
			w->keep(all);
		} else {
			check_rc(call, xp_iallreduce(comm_, XP_IN_PLACE, data_of(buf), r.count,
						     r.dtype, r.op, &req));
		}
		w->add_request(req);
		w->keep(buf);
	}
	return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::allreduce(std::vector<at::Tensor> &tensors,
							    const c10d::AllreduceOptions &opts)
{
	check_single("all_reduce", tensors);
	return allreduce_one(tensors, opts.reduceOp, opts.timeout, c10d::OpType::ALLREDUCE,
			     "all_reduce");
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupXport::allreduce_coalesced(std::vector<at::Tensor> &tensors,
				       const c10d::AllreduceCoalescedOptions &opts)
{
	TORCH_CHECK(!tensors.empty(), "xport: all_reduce_coalesced: no tensors");
	return allreduce_one(tensors, opts.reduceOp, opts.timeout,
			     c10d::OpType::ALLREDUCE_COALESCED, "all_reduce_coalesced");
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::reduce(std::vector<at::Tensor> &tensors,
							 const c10d::ReduceOptions &opts)
{
	const char *call = "reduce";
	check_single(call, tensors);
	TORCH_CHECK(opts.rootTensor == 0, "xport: reduce: rootTensor must be 0");
	TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "xport: reduce: root ",
		    opts.rootRank, " is not a rank of this group of ", getSize());
	at::Tensor &x = tensors[0];
	Reduction r = plan_reduction(call, x, opts.reduceOp, false);
	if (r.bitwise) // every rank gets it; torch leaves non-roots' undefined
		return allreduce_one(tensors, opts.reduceOp, opts.timeout, c10d::OpType::REDUCE,
				     call);
	auto w = new_work(c10d::OpType::REDUCE, call, opts.timeout, tensors);
	int root = static_cast<int>(opts.rootRank);
	bool at_root = getRank() == root;
	at::Tensor buf = at_root ? output_of(w, x, true) : contiguous_of(x);
	xp_request_t *req = nullptr;
	check_rc(call,
		 xp_ireduce(comm_, at_root ? XP_IN_PLACE : data_of(buf),
			    at_root ? data_of(buf) : nullptr, r.count, r.dtype, r.op, root, &req));
	w->add_request(req);
	w->keep(buf);
	if (at_root && r.divide_after) {
		int64_t n = getSize();
		bool fp = at::isFloatingType(x.scalar_type()) || x.is_complex();
		// Before output_of's copy-back of buf, if there is one.
		w->on_success_first([buf, n, fp]() mutable {
			if (fp)
				buf.div_(n);
			else
				buf.div_(n, "trunc");
		});
	}
	return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupXport::_reduce_scatter_base(at::Tensor &output, at::Tensor &input,
					const c10d::ReduceScatterOptions &opts)
{
	const char *call = "reduce_scatter_tensor";
	check_block_and_whole(call, output, input, "input", getSize());
	Reduction r = plan_reduction(call, output, opts.reduceOp, true);
	TORCH_CHECK(!r.bitwise, "xport: ", call, ": bitwise operators are not supported here");
	auto w = new_work(c10d::OpType::_REDUCE_SCATTER_BASE, call, opts.timeout, { output });
	at::Tensor in = contiguous_of(input), out = output_of(w, output, false);
	xp_request_t *req = nullptr;
	check_rc(call, xp_ireduce_scatter(comm_, data_of(in), data_of(out), r.count, r.dtype, r.op,
					  &req));
	w->add_request(req);
	w->keep(in);
	w->keep(out);
	return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupXport::reduce_scatter(std::vector<at::Tensor> &outputs,
				  std::vector<std::vector<at::Tensor>> &inputs,
				  const c10d::ReduceScatterOptions &opts)
{
	const char *call = "reduce_scatter";
	check_single(call, outputs);
	TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(getSize()),
		    "xport: ", call, ": expects one list of ", getSize(), " input tensors");
	for (auto &t : inputs[0]) {
		check_tensor(call, t);
		TORCH_CHECK(t.numel() == outputs[0].numel() &&
				    t.scalar_type() == outputs[0].scalar_type(),
			    "xport: ", call, ": every input must have the output's type and size");
	}
	// xport reduces one buffer of every block: the inputs, side by side.
	at::Tensor flat = at::cat(inputs[0]).reshape(-1);
	auto out = outputs[0];
	return _reduce_scatter_base(out, flat, opts);
}

// ---------------------------------------------------------------------------
// Data movement

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::broadcast(std::vector<at::Tensor> &tensors,
							    const c10d::BroadcastOptions &opts)
{
	const char *call = "broadcast";
	check_single(call, tensors);
	TORCH_CHECK(opts.rootTensor == 0, "xport: broadcast: rootTensor must be 0");
	TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "xport: broadcast: root ",
		    opts.rootRank, " is not a rank of this group of ", getSize());
	auto w = new_work(c10d::OpType::BROADCAST, call, opts.timeout, tensors);
	bool at_root = getRank() == opts.rootRank;
	at::Tensor buf = at_root ? contiguous_of(tensors[0]) : output_of(w, tensors[0], false);
	xp_request_t *req = nullptr;
	check_rc(call, xp_ibcast(comm_, data_of(buf), nbytes(buf), XP_UINT8,
				 static_cast<int>(opts.rootRank), &req));
	w->add_request(req);
	w->keep(buf);
	return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupXport::_allgather_base(at::Tensor &output, at::Tensor &input,
				   const c10d::AllgatherOptions &opts)
{
	const char *call = "all_gather_into_tensor";
	check_block_and_whole(call, input, output, "output", getSize());
	auto w = new_work(c10d::OpType::_ALLGATHER_BASE, call, opts.timeout, { output });
	at::Tensor in = contiguous_of(input), out = output_of(w, output, false);
	xp_request_t *req = nullptr;
	check_rc(call, xp_iallgather(comm_, data_of(in), data_of(out), nbytes(in), XP_UINT8, &req));
	w->add_request(req);
	w->keep(in);
	w->keep(out);
	return w;
}

// Where the @n outputs are consecutive blocks of one contiguous buffer
// (views of one flat tensor, as DDP and FSDP make them), that buffer;
// else an undefined tensor.
static at::Tensor adjacent_blocks(const std::vector<at::Tensor> &outs)
{
	if (outs.empty() || !outs[0].is_contiguous())
		return at::Tensor();
	const char *base = static_cast<const char *>(outs[0].data_ptr());
	size_t each = nbytes(outs[0]);
	for (size_t i = 1; i < outs.size(); i++)
		if (!outs[i].is_contiguous() || nbytes(outs[i]) != each ||
		    outs[i].scalar_type() != outs[0].scalar_type() ||
		    static_cast<const char *>(outs[i].data_ptr()) != base + i * each)
			return at::Tensor();
	return at::from_blob(const_cast<char *>(base), { static_cast<int64_t>(each * outs.size()) },
			     at::TensorOptions().dtype(at::kByte));
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupXport::allgather(std::vector<std::vector<at::Tensor>> &outputs,
			     std::vector<at::Tensor> &inputs, const c10d::AllgatherOptions &opts)
{
	const char *call = "all_gather";
	check_single(call, inputs);
	TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(getSize()),
		    "xport: ", call, ": expects one list of ", getSize(), " output tensors");
	const at::Tensor &in0 = inputs[0];
	for (auto &t : outputs[0]) {
		check_tensor(call, t);
		TORCH_CHECK(t.numel() == in0.numel() && t.scalar_type() == in0.scalar_type(),
			    "xport: ", call,
			    ": every output must have the input's type and number of elements");
	}
	auto w = new_work(c10d::OpType::ALLGATHER, call, opts.timeout, outputs[0]);
	at::Tensor in = contiguous_of(in0);
	at::Tensor flat = adjacent_blocks(outputs[0]);
	if (!flat.defined()) {
		flat = at::empty({ static_cast<int64_t>(nbytes(in) * getSize()) },
				 at::TensorOptions().dtype(at::kByte));
		auto outs = outputs[0];
		size_t each = nbytes(in);
		w->on_success([outs, flat, each]() mutable { copy_out_blocks(outs, flat, each); });
	}
	xp_request_t *req = nullptr;
	check_rc(call,
		 xp_iallgather(comm_, data_of(in), data_of(flat), nbytes(in), XP_UINT8, &req));
	w->add_request(req);
	w->keep(in);
	w->keep(flat);
	return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupXport::allgather_coalesced(std::vector<std::vector<at::Tensor>> &outputs,
				       std::vector<at::Tensor> &inputs,
				       const c10d::AllgatherOptions &opts)
{
	const char *call = "all_gather_coalesced";
	TORCH_CHECK(outputs.size() == static_cast<size_t>(getSize()), "xport: ", call, ": expects ",
		    getSize(), " output lists, one per rank");
	for (auto &l : outputs)
		TORCH_CHECK(l.size() == inputs.size(), "xport: ", call,
			    ": every output list needs one tensor per input");
	auto w = new_work(c10d::OpType::ALLGATHER_COALESCED, call, opts.timeout, {});
	for (size_t j = 0; j < inputs.size(); j++) {
		check_tensor(call, inputs[j]);
		at::Tensor in = contiguous_of(inputs[j]);
		size_t each = nbytes(in);
		at::Tensor flat = at::empty({ static_cast<int64_t>(each * getSize()) },
					    at::TensorOptions().dtype(at::kByte));
		std::vector<at::Tensor> outs;
		for (auto &l : outputs) {
			check_tensor(call, l[j]);
			TORCH_CHECK(l[j].numel() == in.numel() &&
					    l[j].scalar_type() == in.scalar_type(),
				    "xport: ", call, ": output ", j,
				    " must have its input's type and size");
			outs.push_back(l[j]);
		}
		w->on_success([outs, flat, each]() mutable { copy_out_blocks(outs, flat, each); });
		xp_request_t *req = nullptr;
		check_rc(call,
			 xp_iallgather(comm_, data_of(in), data_of(flat), each, XP_UINT8, &req));
		w->add_request(req);
		w->keep(in);
		w->keep(flat);
	}
	return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupXport::gather(std::vector<std::vector<at::Tensor>> &outputs,
			  std::vector<at::Tensor> &inputs, const c10d::GatherOptions &opts)
{
	const char *call = "gather";
	check_single(call, inputs);
	TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "xport: gather: root ",
		    opts.rootRank, " is not a rank of this group of ", getSize());
	int root = static_cast<int>(opts.rootRank);
	bool at_root = getRank() == root;
	if (at_root) {
		TORCH_CHECK(outputs.size() == 1 &&
				    outputs[0].size() == static_cast<size_t>(getSize()),
			    "xport: gather: the root expects one list of ", getSize(),
			    " output tensors");
		for (auto &t : outputs[0]) {
			check_tensor(call, t);
			TORCH_CHECK(
				t.numel() == inputs[0].numel() &&
					t.scalar_type() == inputs[0].scalar_type(),
				"xport: gather: every output must have the input's type and size");
		}
	} else {
		TORCH_CHECK(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()),
			    "xport: gather: only the root has output tensors");
	}
	auto w = new_work(c10d::OpType::GATHER, call, opts.timeout,
			  at_root ? outputs[0] : std::vector<at::Tensor>());
	at::Tensor in = contiguous_of(inputs[0]);
	size_t each = nbytes(in);
	at::Tensor flat;
	if (at_root) {
		flat = adjacent_blocks(outputs[0]);
		if (!flat.defined()) {
			flat = at::empty({ static_cast<int64_t>(each * getSize()) },
					 at::TensorOptions().dtype(at::kByte));
			auto outs = outputs[0];
			w->on_success([outs, flat, each]() mutable {
				copy_out_blocks(outs, flat, each);
			});
		}
		w->keep(flat);
	}
	xp_request_t *req = nullptr;
	check_rc(call, xp_igather(comm_, data_of(in), at_root ? data_of(flat) : nullptr, each,
				  XP_UINT8, root, &req));
	w->add_request(req);
	w->keep(in);
	return w;
}

c10::intrusive_ptr<c10d::Work>
ProcessGroupXport::scatter(std::vector<at::Tensor> &outputs,
			   std::vector<std::vector<at::Tensor>> &inputs,
			   const c10d::ScatterOptions &opts)
{
	const char *call = "scatter";
	check_single(call, outputs);
	TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "xport: scatter: root ",
		    opts.rootRank, " is not a rank of this group of ", getSize());
	int root = static_cast<int>(opts.rootRank);
	bool at_root = getRank() == root;
	auto w = new_work(c10d::OpType::SCATTER, call, opts.timeout, outputs);
	at::Tensor out = output_of(w, outputs[0], false);
	size_t each = nbytes(out);
	at::Tensor flat;
	if (at_root) {
		TORCH_CHECK(inputs.size() == 1 &&
				    inputs[0].size() == static_cast<size_t>(getSize()),
			    "xport: scatter: the root expects one list of ", getSize(),
			    " input tensors");
		for (auto &t : inputs[0]) {
			check_tensor(call, t);
			TORCH_CHECK(
				t.numel() == out.numel() && t.scalar_type() == out.scalar_type(),
				"xport: scatter: every input must have the output's type and size");
		}
		flat = at::cat(inputs[0]).reshape(-1);
		w->keep(flat);
	} else {
		TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
			    "xport: scatter: only the root has input tensors");
	}
	xp_request_t *req = nullptr;
	check_rc(call, xp_iscatter(comm_, at_root ? data_of(flat) : nullptr, data_of(out), each,
				   XP_UINT8, root, &req));
	w->add_request(req);
	w->keep(out);
	return w;
}

// Uneven all-to-all over the group's side communicator: a receive from and a
// send to every other member, each call in a tag of its own (every member
// makes the same calls in the same order, so the counter agrees).
void ProcessGroupXport::alltoallv(const c10::intrusive_ptr<WorkXport> &w, const char *send,
				  const char *recv, const std::vector<size_t> &send_off,
				  const std::vector<size_t> &send_len,
				  const std::vector<size_t> &recv_off,
				  const std::vector<size_t> &recv_len)
{
	int n = getSize(), me = getRank();
	uint64_t tag = side_seq_++;
	TORCH_CHECK(send_len[me] == recv_len[me], "xport: all_to_all: rank ", me, " sends ",
		    send_len[me], " bytes to itself but expects ", recv_len[me]);
	if (send_len[me] != 0)
		std::memmove(const_cast<char *>(recv) + recv_off[me], send + send_off[me],
			     send_len[me]);
	for (int k = 1; k < n; k++) {
		int from = (me - k + n) % n, to = (me + k) % n;
		xp_request_t *r = nullptr;
		check_rc("all_to_all", xp_irecv(side_, const_cast<char *>(recv) + recv_off[from],
						recv_len[from], from, tag, XP_TAG_EXACT, &r));
		w->add_request(r);
		check_rc("all_to_all",
			 xp_isend(side_, send + send_off[to], send_len[to], to, tag, &r));
		w->add_request(r);
	}
	// A message of another length than expected fails the receive
	// (longer) or is caught here (shorter).
	w->on_success([w = w.get(), recv_len]() {
		for (size_t i = 0; i < recv_len.size() - 1; i++) {
			const xp_status_t &st = w->status(2 * i);
			TORCH_CHECK(st.length == recv_len[st.source], "xport: all_to_all: rank ",
				    st.source, " sent ", st.length, " bytes where ",
				    recv_len[st.source], " were expected");
		}
	});
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::alltoall_base(at::Tensor &output,
								at::Tensor &input,
								std::vector<int64_t> &output_splits,
								std::vector<int64_t> &input_splits,
								const c10d::AllToAllOptions &opts)
{
	const char *call = "all_to_all_single";
	check_tensor(call, output);
	check_tensor(call, input);
	TORCH_CHECK(input.scalar_type() == output.scalar_type(), "xport: ", call,
		    ": input and output types differ");
	int n = getSize();
	auto w = new_work(c10d::OpType::ALLTOALL_BASE, call, opts.timeout, { output });
	at::Tensor in = contiguous_of(input), out = output_of(w, output, false);
	w->keep(in);
	w->keep(out);
	if (output_splits.empty() && input_splits.empty()) {
		TORCH_CHECK(in.numel() % n == 0 && out.numel() == in.numel(), "xport: ", call,
			    ": even splits need input and output of the same size, divisible by ",
			    n);
		xp_request_t *req = nullptr;
		check_rc(call, xp_ialltoall(comm_, data_of(in), data_of(out), nbytes(in) / n,
					    XP_UINT8, &req));
		w->add_request(req);
		return w;
	}
	// Splits count rows (dim 0); an empty list means even rows.
	auto offsets = [n, call](const at::Tensor &t, const std::vector<int64_t> &splits,
				 std::vector<size_t> &off, std::vector<size_t> &len) {
		size_t row = row_bytes(t);
		int64_t rows = t.dim() == 0 ? 0 : t.size(0), at = 0;
		TORCH_CHECK(splits.empty() || splits.size() == static_cast<size_t>(n),
			    "xport: ", call, ": ", splits.size(), " split sizes for a group of ",
			    n);
		for (int i = 0; i < n; i++) {
			int64_t s = splits.empty() ? rows / n : splits[i];
			TORCH_CHECK(s >= 0, "xport: ", call, ": a negative split size");
			off.push_back(static_cast<size_t>(at) * row);
			len.push_back(static_cast<size_t>(s) * row);
			at += s;
		}
		TORCH_CHECK(at == rows, "xport: ", call, ": split sizes add up to ", at,
			    " rows, the tensor has ", rows);
	};
	std::vector<size_t> soff, slen, roff, rlen;
	offsets(in, input_splits, soff, slen);
	offsets(out, output_splits, roff, rlen);
	alltoallv(w, static_cast<const char *>(data_of(in)),
		  static_cast<const char *>(data_of(out)), soff, slen, roff, rlen);
	return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::alltoall(std::vector<at::Tensor> &outputs,
							   std::vector<at::Tensor> &inputs,
							   const c10d::AllToAllOptions &opts)
{
	const char *call = "all_to_all";
	int n = getSize();
	TORCH_CHECK(outputs.size() == static_cast<size_t>(n) &&
			    inputs.size() == static_cast<size_t>(n),
		    "xport: ", call, ": expects ", n, " input and ", n, " output tensors");
	auto w = new_work(c10d::OpType::ALLTOALL, call, opts.timeout, outputs);
	// One flat buffer each way: the tensors side by side.
	std::vector<at::Tensor> ins;
	std::vector<size_t> soff, slen, roff, rlen;
	size_t s = 0, r = 0;
	for (int i = 0; i < n; i++) {
		check_tensor(call, inputs[i]);
		check_tensor(call, outputs[i]);
		TORCH_CHECK(inputs[i].scalar_type() == outputs[i].scalar_type(), "xport: ", call,
			    ": input and output types differ");
		ins.push_back(inputs[i].reshape(-1).view(at::kByte));
		soff.push_back(s);
		slen.push_back(nbytes(inputs[i]));
		s += slen.back();
		roff.push_back(r);
		rlen.push_back(nbytes(outputs[i]));
		r += rlen.back();
	}
	at::Tensor in = at::cat(ins);
	at::Tensor out =
		at::empty({ static_cast<int64_t>(r) }, at::TensorOptions().dtype(at::kByte));
	w->keep(in);
	w->keep(out);
	alltoallv(w, static_cast<const char *>(data_of(in)),
		  static_cast<const char *>(data_of(out)), soff, slen, roff, rlen);
	auto outs = outputs;
	w->on_success([outs, out, roff, rlen]() mutable {
		for (size_t i = 0; i < outs.size(); i++)
			outs[i].copy_(out.narrow(0, static_cast<int64_t>(roff[i]),
						 static_cast<int64_t>(rlen[i]))
					      .view(outs[i].scalar_type())
					      .view(outs[i].sizes()));
	});
	return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::barrier(const c10d::BarrierOptions &opts)
{
	auto w = new_work(c10d::OpType::BARRIER, "barrier", opts.timeout, {});
	xp_request_t *req = nullptr;
	check_rc("barrier", xp_ibarrier(comm_, &req));
	w->add_request(req);
	return w;
}

// ---------------------------------------------------------------------------
// Point-to-point: the program's tags on the group's communicator (the
// collectives' tag space is another, so they never meet).

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::send(std::vector<at::Tensor> &tensors, int dst,
						       int tag)
{
	const char *call = "send";
	check_single(call, tensors);
	TORCH_CHECK(dst >= 0 && dst < getSize(), "xport: send: rank ", dst,
		    " is not in this group of ", getSize());
	auto w = new_work(c10d::OpType::SEND, call, kUnset, {});
	at::Tensor buf = contiguous_of(tensors[0]);
	xp_request_t *req = nullptr;
	check_rc(call,
		 xp_isend(comm_, data_of(buf), nbytes(buf), dst, static_cast<uint32_t>(tag), &req));
	w->add_request(req);
	w->keep(buf);
	return w;
}

static c10::intrusive_ptr<c10d::Work>
post_recv(ProcessGroupXport *pg, c10::intrusive_ptr<WorkXport> w, at::Tensor &t, int src, int tag)
{
	at::Tensor buf = output_of(w, t, false);
	size_t want = nbytes(buf);
	xp_request_t *req = nullptr;
	check_rc(src == XP_ANY_SOURCE ? "recv (any source)" : "recv",
		 xp_irecv(pg->comm(), data_of(buf), want, src, static_cast<uint32_t>(tag),
			  XP_TAG_EXACT, &req));
	w->add_request(req);
	w->keep(buf);
	// A shorter message than the tensor is an error, as a longer one is
	// (which xport fails with -EMSGSIZE).
	w->on_success([w = w.get(), want]() {
		const xp_status_t &st = w->status(0);
		TORCH_CHECK(st.length == want, "xport: recv: rank ", st.source, " sent ", st.length,
			    " bytes into a tensor of ", want);
	});
	return w;
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::recv(std::vector<at::Tensor> &tensors, int src,
						       int tag)
{
	check_single("recv", tensors);
	TORCH_CHECK(src >= 0 && src < getSize(), "xport: recv: rank ", src,
		    " is not in this group of ", getSize());
	return post_recv(this, new_work(c10d::OpType::RECV, "recv", kUnset, tensors), tensors[0],
			 src, tag);
}

c10::intrusive_ptr<c10d::Work> ProcessGroupXport::recvAnysource(std::vector<at::Tensor> &tensors,
								int tag)
{
	check_single("recv", tensors);
	return post_recv(
		this, new_work(c10d::OpType::RECVANYSOURCE, "recv (any source)", kUnset, tensors),
		tensors[0], XP_ANY_SOURCE, tag);
}

} // namespace xport_torch
