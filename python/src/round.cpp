// fplab.round: every element of an array rounded to a format (fp/round.hpp), in one loop without
// the GIL. Stochastic rounding gives element i its own Philox sub-stream i of the key `seed`, so a
// result depends only on (seed, index, value): reproducible, and the same however the array is cut.
#include <vector>

#include "fp/counter_rng.hpp"
#include "fp/format.hpp"
#include "fp/round.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

py::array_t<double> round_array(py::handle x, std::string_view format_text, std::string_view mode_text, bool saturate,
                                bool flush_subnormals, uint64_t seed) {
  const fp::Format format = fp::parse_format(format_text);
  const fp::Mode mode = fp::parse_mode(mode_text);
  const DoubleArray in = double_array(x, "round", "x", false);
  py::array_t<double> out(std::vector<py::ssize_t>(in.shape(), in.shape() + in.ndim()));
  const double* from = in.data();
  double* to = out.mutable_data();
  const auto n = static_cast<size_t>(in.size());
  {
    py::gil_scoped_release unlocked;
    for (size_t i = 0; i < n; ++i) {
      fp::CounterRng stream(seed, i);
      to[i] = fp::round_double(from[i], format, {mode, flush_subnormals, saturate, &stream}).value;
    }
  }
  return out;
}

}  // namespace

void bind_round(py::module_& m) {
  m.def("round", &round_array, py::arg("x"), py::arg("format"), py::arg("mode") = "rne", py::arg("saturate") = false,
        py::arg("flush_subnormals") = false, py::arg("seed") = 0,
        "Every element of x rounded to the format (float64 values, x's shape).");
}

}  // namespace fplab::python
