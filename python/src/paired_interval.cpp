// fplab._core.paired_t_interval: the mean of paired differences with a Student-t interval
// (experiments/paired_interval.hpp), for the comparisons over algo seeds of experiments/*.py.
#include <pybind11/stl.h>

#include <vector>

#include "experiments/paired_interval.hpp"
#include "python/src/bindings.hpp"

namespace fplab::python {

void bind_paired_interval(py::module_& m) {
  m.def(
      "paired_t_interval",
      [](const std::vector<double>& differences, double level) {
        const auto i = experiments::paired_t_interval(differences, level);
        return py::make_tuple(i.mean, i.low, i.high);
      },
      py::arg("differences"), py::arg("level") = 0.95,
      "(mean, low, high): the mean of paired differences (one per unit, e.g. per algo seed) and its Student-t "
      "interval at `level` (the units the sample, their differences roughly normal); fplab.Error with fewer than two "
      "or a non-finite one.");
}

}  // namespace fplab::python
