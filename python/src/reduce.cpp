// fplab.reduce and fplab.exact_sum: one reduction of an array in the order a schedule gives,
// through the fast engine (sim/engine.hpp), and the exact sum rounded once (fp/superaccumulator).
#include <span>

#include "fp/format.hpp"
#include "fp/exact_sum.hpp"
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

double exact_sum_array(py::handle x, std::string_view format_text) {
  const fp::Format format = fp::parse_format(format_text);
  const DoubleArray values = double_array(x, "exact_sum", "x", false);
  const double* terms = values.data();
  const auto n = static_cast<size_t>(values.size());
  py::gil_scoped_release unlocked;
  return fp::exact_sum_of(terms, n, 1, format, {}).value;
}

}  // namespace

void bind_reduce(py::module_& m) {
  m.def("reduce", &reduce_array, py::arg("x"), py::arg("schedule"), py::arg("arithmetic"), py::arg("impl_seed") = 0,
        "One reduction of the 1-D array x in the schedule's order (sim::reduce); values enter as they are.");
  m.def("exact_sum", &exact_sum_array, py::arg("x"), py::arg("format") = "fp64",
        "The exact sum of every element of x, rounded once to nearest even in the format.");
}

}  // namespace fplab::python
