// fplab.nccl_all_reduce: the sums NCCL's all-reduce makes of several ranks' buffers, in its order
// (sim/nccl_all_reduce: ring chunks and channels, the one-node tree's chain), for a script that
// checks a data-parallel training step against it or replays one without GPUs.
#include <pybind11/stl.h>

#include <vector>

#include "fp/format.hpp"
#include "python/src/bindings.hpp"
#include "sim/nccl_all_reduce.hpp"

namespace fplab::python {
namespace {

DoubleArray nccl_all_reduce(py::handle buffers, const std::string& algorithm, const std::string& protocol,
                            int channels, std::string_view format_text, const std::vector<std::vector<int>>& rings) {
  const DoubleArray values = double_array(buffers, "nccl_all_reduce", "buffers", false);
  if (values.ndim() != 2)
    throw std::invalid_argument("nccl_all_reduce: buffers must be 2-D, one row per rank (got " +
                                std::to_string(values.ndim()) + (values.ndim() == 1 ? " dimension)" : " dimensions)"));
  const auto ranks = static_cast<size_t>(values.shape(0)), count = static_cast<size_t>(values.shape(1));
  DoubleArray out(static_cast<py::ssize_t>(count));
  double* result = out.mutable_data();
  const double* data = values.data();
  try {  // the emulation's one-line errors, named as this function's
    const fp::Format format = fp::parse_format(format_text);
    sim::NcclCall call;
    call.comm_channels = channels;
    call.protocol = sim::parse_nccl_protocol(protocol);
    call.rings = rings;
    const sim::NcclAlgorithm algo = sim::parse_nccl_algorithm(algorithm);
    if (algo == sim::NcclAlgorithm::tree && !rings.empty())
      throw std::invalid_argument("rings are the Ring algorithm's; Tree's order within a node is the chain 0 .. R - 1");
    py::gil_scoped_release unlocked;
    std::vector<std::vector<double>> in(ranks);
    for (size_t r = 0; r < ranks; ++r) in[r].assign(data + r * count, data + (r + 1) * count);
    const std::vector<double> sums = sim::emulate_nccl_all_reduce(in, algo, call, format);
    std::copy(sums.begin(), sums.end(), result);
  } catch (const std::exception& e) {
    throw std::invalid_argument(std::string("nccl_all_reduce: ") + e.what());
  }
  return out;
}

}  // namespace

void bind_nccl(py::module_& m) {
  m.def("nccl_all_reduce", &nccl_all_reduce, py::arg("buffers"), py::arg("algorithm") = "Ring",
        py::arg("protocol") = "Simple", py::arg("channels") = 1, py::arg("format") = "fp32",
        py::arg("rings") = std::vector<std::vector<int>>{},
        "NCCL's all-reduce (sum) of the rows of `buffers` (one per rank), each element added in NCCL's "
        "order for that algorithm, protocol and channel count (and rings: channel c takes rings[c % len], "
        "each a permutation of the ranks; none: 0 .. R - 1), rounded in `format` at every addition.");
}

}  // namespace fplab::python
