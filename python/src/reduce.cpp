// fplab.reduce and fplab.exact_sum: one reduction of an array in the order a schedule gives,
// through the fast engine (sim/engine.hpp), and the exact sum rounded once (fp/superaccumulator).
#include <span>
#include <vector>

#include "fp/format.hpp"
#include "fp/exact_sum.hpp"
#include "fp/round.hpp"
#include "python/src/bindings.hpp"
#include "sim/engine.hpp"

namespace fplab::python {
namespace {

double reduce_array(py::handle x, const sim::Schedule& schedule, const sim::Arithmetic& arithmetic,
                    uint64_t impl_seed) {
  const DoubleArray values = double_array(x, "reduce", "x", true);
  const std::span<const double> terms(values.data(), static_cast<size_t>(values.size()));
  py::gil_scoped_release unlocked;
  return sim::reduce(schedule, terms, arithmetic, {impl_seed});
}

double exact_sum_array(py::handle x, std::string_view format_text, bool round_terms) {
  const fp::Format format = fp::parse_format(format_text);
  const DoubleArray values = double_array(x, "exact_sum", "x", false);
  const double* terms = values.data();
  const auto n = static_cast<size_t>(values.size());
  py::gil_scoped_release unlocked;
  if (!round_terms) return fp::exact_sum_of(terms, n, 1, format, {}).value;
  std::vector<double> rounded(n);
  for (size_t i = 0; i < n; ++i) rounded[i] = fp::round_double(terms[i], format, {}).value;
  return fp::exact_sum_of(rounded.data(), n, 1, format, {}).value;
}

}  // namespace

void bind_reduce(py::module_& m) {
  m.def("reduce", &reduce_array, py::arg("x"), py::arg("schedule"), py::arg("arithmetic"), py::arg("impl_seed") = 0,
        "One reduction of the 1-D array x in the schedule's order (sim::reduce); values enter as they are.");
  m.def("exact_sum", &exact_sum_array, py::arg("x"), py::arg("format") = "fp64", py::kw_only(),
        py::arg("round_terms") = false,
        "The exact sum of every element of x (each first rounded to nearest in the format when round_terms), "
        "rounded once to nearest even in the format.");
}

}  // namespace fplab::python
