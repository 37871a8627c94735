// fplab.Schedule: a reduction order as a value (sim/schedule.hpp, docs/schedules.md): parsed from
// text or a preset name, printed canonically, drawn as its tree of additions (Graphviz DOT).
#include <functional>
#include <string>

#include "python/src/bindings.hpp"
#include "sim/schedule.hpp"
#include "sim/schedule_tree.hpp"

namespace fplab::python {

void bind_schedule(py::module_& m) {
  py::class_<sim::Schedule>(m, "Schedule",
                            "A reduction order (docs/schedules.md): Schedule('contig(32):shfl_down | all:atomic') or a "
                            "preset, Schedule('numpy').")
      .def(py::init([](std::string_view text) { return sim::parse_schedule(text); }), py::arg("text"),
           "Parses schedule text or a preset name; fplab.Error names the bad token and its position.")
      .def_property_readonly(
          "text", [](const sim::Schedule& s) { return sim::to_string(s); },
          "The canonical text (presets expanded); Schedule(s.text) == s.")
      .def_property_readonly("nondeterministic", &sim::Schedule::nondeterministic,
                             "True if a step draws from the implementation-noise stream (atomic, shuffle).")
      .def_property_readonly("order_independent", &sim::Schedule::order_independent,
                             "True if the result cannot depend on the order (only exact or binned reductions).")
      .def(
          "dot",
          [](const sim::Schedule& s, size_t n, uint64_t impl_seed) {
            return sim::draw_schedule(s, n, {impl_seed}).dot;
          },
          py::arg("n"), py::kw_only(), py::arg("impl_seed") = 0,
          "The tree of additions for n terms as Graphviz DOT text (atomic and shuffle steps in the order "
          "impl_seed gives).")
      .def("__str__", [](const sim::Schedule& s) { return sim::to_string(s); })
      .def("__repr__",
           [](const sim::Schedule& s) { return "Schedule(" + std::string(py::repr(py::str(sim::to_string(s)))) + ")"; })
      .def("__eq__", [](const sim::Schedule& a, const sim::Schedule& b) { return a == b; })
      .def("__hash__", [](const sim::Schedule& s) { return std::hash<std::string>{}(sim::to_string(s)); })
      .def(py::pickle([](const sim::Schedule& s) { return sim::to_string(s); },
                      [](const std::string& text) { return sim::parse_schedule(text); }));
}

}  // namespace fplab::python
