// fplab.reveal_sum: the addition order of any Python callable that sums a float32 array (NumPy's
// sum, torch.sum on the CPU, a library's binding), found by reveal/probe_sum.hpp's probe, the
// schedules whose tree it is, and the replay per candidate arithmetic (fplab reveal's, for code
// that is not a C symbol).
#include <numeric>

#include "python/src/bindings.hpp"
#include "reveal/match_schedule.hpp"
#include "reveal/probe_sum.hpp"
#include "reveal/replay_sum.hpp"

namespace fplab::python {
namespace {

py::dict reveal_callable(py::function fn, size_t n, size_t verify, uint64_t seed) {
  // The probing runs on a thread of its own (deep trees need a deep stack): the GIL is released
  // here and taken again for every call of fn.
  const reveal::SumFunction sum = [&fn](std::span<const float> x) {
    py::gil_scoped_acquire locked;
    py::array_t<float> array(static_cast<py::ssize_t>(x.size()));
    std::copy(x.begin(), x.end(), array.mutable_data());
    return fn(array).cast<float>();
  };
  reveal::RevealedSum revealed;
  std::optional<reveal::Verification> verified;
  {
    py::gil_scoped_release unlocked;
    revealed = reveal::reveal_sum(sum, n);
    if (verify > 0) verified = reveal::verify_sum(sum, revealed.tree, verify, seed);
  }
  const auto match = reveal::match_schedule(revealed.tree);
  py::list schedules;
  for (const auto& text : match.schedules) schedules.append(text);
  py::list replays;
  if (verified)
    for (const auto& s : verified->scores)
      replays.append(py::dict(py::arg("arithmetic") = reveal::arithmetic_name(s.arithmetic),
                              py::arg("identical") = s.identical, py::arg("trials") = verified->trials));
  return py::dict(py::arg("n") = n, py::arg("tree") = revealed.tree.text(), py::arg("dot") = revealed.tree.dot(),
                  py::arg("calls") = revealed.calls, py::arg("seconds") = revealed.seconds,
                  py::arg("schedules") = schedules, py::arg("replays") = replays);
}

}  // namespace

void bind_reveal(py::module_& m) {
  m.def("reveal_sum", &reveal_callable, py::arg("fn"), py::arg("n"), py::arg("verify") = 0, py::arg("seed") = 1,
        "The addition order of fn (a float32 array of n in, a float out), found by probing it: "
        "{'tree', 'dot', 'calls', 'seconds', 'schedules', 'replays'}.");
}

}  // namespace fplab::python
