// fplab.dot: the products a[i] * b[i] reduced in a schedule's order. Where the engine's fast path
// applies (every value a float and a format whose values a float holds) it is sim::gemm with one
// output, whose result the engine guarantees equal to dot_reference with the same key
// (gemm_output_key of output (0, 0) is the key itself); otherwise the reference evaluator.
#include <algorithm>
#include <cmath>
#include <span>
#include <vector>

#include "python/src/bindings.hpp"
#include "sim/engine.hpp"
#include "sim/reference_evaluator.hpp"

namespace fplab::python {
namespace {

bool fits_float(const fp::Format& format) { return format.exp_bits <= 8 && format.man_bits <= 23; }

bool all_floats(std::span<const double> values) {
  return std::all_of(values.begin(), values.end(),
                     [](double v) { return std::isnan(v) || static_cast<float>(v) == v; });
}

double dot_arrays(py::handle a_in, py::handle b_in, const sim::Schedule& schedule, const sim::Arithmetic& arithmetic,
                  uint64_t impl_seed) {
  const DoubleArray a_array = double_array(a_in, "dot", "a", true), b_array = double_array(b_in, "dot", "b", true);
  if (a_array.size() != b_array.size())
    throw std::invalid_argument("dot: a and b differ in length (" + std::to_string(a_array.size()) + " and " +
                                std::to_string(b_array.size()) + ")");
  const auto n = static_cast<size_t>(a_array.size());
  const std::span<const double> a(a_array.data(), n), b(b_array.data(), n);
  const sim::NoiseKey key{impl_seed};
  py::gil_scoped_release unlocked;
  if (fits_float(arithmetic.format) && all_floats(a) && all_floats(b)) {
    const std::vector<float> a32(a.begin(), a.end()), b32(b.begin(), b.end());
    float result = 0;
    sim::gemm(schedule, a32.data(), b32.data(), &result, {1, 1, n}, arithmetic, key);
    return result;
  }
  return sim::dot_reference(schedule, a, b, arithmetic, key);
}

}  // namespace

void bind_dot(py::module_& m) {
  m.def("dot", &dot_arrays, py::arg("a"), py::arg("b"), py::arg("schedule"), py::arg("arithmetic"),
        py::arg("impl_seed") = 0,
        "The products a[i] * b[i] of two 1-D arrays reduced in the schedule's order (products enter per the "
        "arithmetic).");
}

}  // namespace fplab::python
