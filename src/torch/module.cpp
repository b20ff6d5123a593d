// SPDX-License-Identifier: MIT
//
// The Python module xport._xport_torch: the process group's type, whose
// Python base is torch's own ProcessGroup (so torch.distributed takes it
// as one of its own), and the job's shutdown. xport/torch.py registers it.
#include <pybind11/chrono.h>
#include <pybind11/stl.h>
#include <torch/python.h>

#include "xport_torch.hpp"

namespace py = pybind11;

PYBIND11_MODULE(_xport_torch, m)
{
	m.doc() = "xport as a torch.distributed backend (use: import xport.torch)";
	// torch's ProcessGroup and Store types must be known to pybind11
	// before ours names them.
	py::module::import("torch.distributed");

	py::class_<xport_torch::ProcessGroupXport, xport_torch::XportBase,
		   c10::intrusive_ptr<xport_torch::ProcessGroupXport>>(m, "ProcessGroupXport")
		.def(py::init([](const c10::intrusive_ptr<c10d::Store> &store, int rank, int size,
				 std::chrono::milliseconds timeout, const std::string &group_id,
				 const std::vector<int64_t> &global_ranks) {
			     return c10::make_intrusive<xport_torch::ProcessGroupXport>(
				     store, rank, size, timeout, group_id, global_ranks);
		     }),
		     py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout"),
		     py::arg("group_id") = "", py::arg("global_ranks") = std::vector<int64_t>(),
		     // Forming the job waits for the other ranks: without the GIL.
		     py::call_guard<py::gil_scoped_release>());

	m.def("shutdown", &xport_torch::job_shutdown, py::call_guard<py::gil_scoped_release>(),
	      "Finalizes this process's xport job (collective over its ranks); no xport "
	      "process group may be used afterwards.");
	m.def(
		"torch_version_major", [] { return TORCH_VERSION_MAJOR; },
		"The torch major version this module was built for.");
}
