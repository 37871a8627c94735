// fplab.reveal_sum / fplab.reveal_dot: the addition order of any Python callable that sums a
// float32 array (NumPy's sum, torch.sum on the CPU or a GPU, a library's binding) or takes the dot
// product of two (a matmul's or a convolution's output element, F.linear), found by
// reveal/probe_sum.hpp's probe, the schedules whose tree it is, and the replay per candidate
// arithmetic (fplab reveal's, for code that is not a C symbol).
#include <numeric>

#include "python/src/bindings.hpp"
#include "reveal/match_schedule.hpp"
#include "reveal/probe_sum.hpp"
#include "reveal/replay_sum.hpp"

namespace fplab::python {
namespace {

py::array_t<float> float_array(std::span<const float> x) {
  py::array_t<float> array(static_cast<py::ssize_t>(x.size()));
  std::copy(x.begin(), x.end(), array.mutable_data());
  return array;
}

py::dict report(const reveal::RevealedSum& revealed, const std::optional<reveal::Verification>& verified) {
  const auto match = reveal::match_schedule(revealed.tree);
  py::list schedules;
  for (const auto& text : match.schedules) schedules.append(text);
  py::list replays;
  if (verified)
    for (const auto& s : verified->scores)
      replays.append(py::dict(py::arg("arithmetic") = reveal::arithmetic_name(s.arithmetic),
                              py::arg("identical") = s.identical, py::arg("trials") = verified->trials));
  // The tree as data: node j (id n + j) adds its children's ids (a term's id is its index).
  py::list nodes;
  for (const auto& children : revealed.tree.nodes) {
    py::list ids;
    for (size_t id : children) ids.append(id);
    nodes.append(ids);
  }
  const auto& tree = revealed.tree;
  return py::dict(py::arg("n") = tree.terms, py::arg("tree") = tree.text(), py::arg("dot") = tree.dot(),
                  py::arg("nodes") = nodes, py::arg("root") = tree.root, py::arg("additions") = tree.additions(),
                  py::arg("multi_term_nodes") = tree.multi_term_nodes(), py::arg("depth") = tree.depth(),
                  py::arg("calls") = revealed.calls, py::arg("seconds") = revealed.seconds,
                  py::arg("schedules") = schedules, py::arg("replays") = replays);
}

// Probes `probe` (fn as a sum) with the GIL released, on a thread of its own in reveal_sum (deep
// trees need a deep stack); `call` takes the GIL again for every call of fn. `verify` replays the
// tree against fn in its arithmetics.
template <class Verify>
py::dict reveal_and_verify(const reveal::SumFunction& probe, Verify verify_against, size_t n, size_t verify,
                           uint64_t seed) {
  reveal::RevealedSum revealed;
  std::optional<reveal::Verification> verified;
  {
    py::gil_scoped_release unlocked;
    revealed = reveal::reveal_sum(probe, n);
    if (verify > 0) verified = verify_against(revealed.tree, verify, seed);
  }
  return report(revealed, verified);
}

py::dict reveal_sum_of(py::function fn, size_t n, size_t verify, uint64_t seed) {
  const reveal::SumFunction sum = [&fn](std::span<const float> x) {
    py::gil_scoped_acquire locked;
    return fn(float_array(x)).cast<float>();
  };
  return reveal_and_verify(
      sum, [&](const sim::AdditionTree& tree, size_t trials, uint64_t s) { return reveal::verify_sum(sum, tree, trials, s); },
      n, verify, seed);
}

py::dict reveal_dot_of(py::function fn, size_t n, size_t verify, uint64_t seed) {
  const reveal::DotFunction dot = [&fn](std::span<const float> a, std::span<const float> b) {
    py::gil_scoped_acquire locked;
    return fn(float_array(a), float_array(b)).cast<float>();
  };
  return reveal_and_verify(
      reveal::dot_with_ones(dot),
      [&](const sim::AdditionTree& tree, size_t trials, uint64_t s) { return reveal::verify_dot(dot, tree, trials, s); },
      n, verify, seed);
}

}  // namespace

void bind_reveal(py::module_& m) {
  m.def("reveal_sum", &reveal_sum_of, py::arg("fn"), py::arg("n"), py::arg("verify") = 0, py::arg("seed") = 1,
        "The addition order of fn (a float32 array of n in, a float out), found by probing it: "
        "{'tree', 'dot', 'nodes', 'calls', 'seconds', 'schedules', 'replays', ...}.");
  m.def("reveal_dot", &reveal_dot_of, py::arg("fn"), py::arg("n"), py::arg("verify") = 0, py::arg("seed") = 1,
        "The addition order of fn (two float32 arrays of n in, their dot product out), found by probing "
        "it with b = 1: the same dict as reveal_sum's, the replays in the dot's arithmetics.");
}

}  // namespace fplab::python
