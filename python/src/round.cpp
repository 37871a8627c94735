// fplab.round: every element of an array rounded to a format (fp/round.hpp), in one loop without
// the GIL. Stochastic rounding gives element i its own Philox sub-stream i of the key `seed`, so a
// result depends only on (seed, index, value): reproducible, and the same however the array is cut.
#include <optional>
#include <string>
#include <vector>

#include <pybind11/stl.h>

#include "fp/counter_rng.hpp"
#include "fp/format.hpp"
#include "fp/round.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {
namespace {

py::array_t<double> round_array(
    py::handle x, std::string_view format_text, std::string_view mode_text, bool saturate, bool flush_subnormals,
    uint64_t seed, bool saturate_infinities, int sr_bits,
    std::optional<py::array_t<uint64_t, py::array::c_style | py::array::forcecast>> random_bits) {
  const fp::Format format = fp::parse_format(format_text);
  const fp::Mode mode = fp::parse_mode(mode_text);
  if (sr_bits < 1 || sr_bits > 64)
    throw fp::FormatError("round: sr_bits must be 1..64, got " + std::to_string(sr_bits));
  if ((sr_bits != 64 || random_bits) && mode != fp::Mode::sr)
    throw fp::FormatError(std::string("round: ") + (random_bits ? "random_bits" : "sr_bits") + " needs mode='sr'");
  const DoubleArray in = double_array(x, "round", "x", false);
  if (random_bits && random_bits->size() != in.size())
    throw fp::FormatError("round: random_bits has " + std::to_string(random_bits->size()) + " elements, x has " +
                          std::to_string(in.size()));
  const uint64_t* given = random_bits ? random_bits->data() : nullptr;
  if (given && sr_bits < 64)
    for (py::ssize_t i = 0; i < in.size(); ++i)
      if (given[i] >> sr_bits)
        throw fp::FormatError("round: random_bits[" + std::to_string(i) + "] = " + std::to_string(given[i]) +
                              " does not fit in sr_bits = " + std::to_string(sr_bits) + " bits");
  py::array_t<double> out(std::vector<py::ssize_t>(in.shape(), in.shape() + in.ndim()));
  const double* from = in.data();
  double* to = out.mutable_data();
  const auto n = static_cast<size_t>(in.size());
  {
    py::gil_scoped_release unlocked;
    for (size_t i = 0; i < n; ++i) {
      fp::CounterRng stream(seed, i);
      fp::RoundingOptions options{mode, flush_subnormals, saturate, &stream};
      options.saturate_infinities = saturate_infinities;
      options.sr_bits = sr_bits;
      if (given) options.sr_random = given[i];
      to[i] = fp::round_double(from[i], format, options).value;
    }
  }
  return out;
}

}  // namespace

void bind_round(py::module_& m) {
  m.def("round", &round_array, py::arg("x"), py::arg("format"), py::arg("mode") = "rne", py::arg("saturate") = false,
        py::arg("flush_subnormals") = false, py::arg("seed") = 0, py::kw_only(), py::arg("saturate_infinities") = false,
        py::arg("sr_bits") = 64, py::arg("random_bits") = py::none(),
        "Every element of x rounded to the format (float64 values, x's shape).");
}

}  // namespace fplab::python
