// fplab.reveal_sum / fplab.reveal_dot: the addition order of any Python callable that sums a
// float32 array (NumPy's sum, torch.sum on the CPU or a GPU, a library's binding) or takes the dot
// product of two (a matmul's or a convolution's output element, F.linear), found by
// reveal/probe_sum.hpp's probe, the schedules whose tree it is, and the replay per candidate
// arithmetic (fplab reveal's, for code that is not a C symbol); fplab.name_tree names a stored tree.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <numeric>

#include <pybind11/stl.h>

#include "python/src/bindings.hpp"
#include "reveal/match_schedule.hpp"
#include "reveal/probe_sum.hpp"
#include "reveal/probe_varying_sum.hpp"
#include "reveal/replay_schedule.hpp"
#include "reveal/replay_sum.hpp"
#include "reveal/replay_varying_sum.hpp"

namespace fplab::python {
namespace {

py::array_t<float> float_array(std::span<const float> x) {
  py::array_t<float> array(static_cast<py::ssize_t>(x.size()));
  std::copy(x.begin(), x.end(), array.mutable_data());
  return array;
}

py::list node_lists(const sim::AdditionTree& tree) {
  py::list nodes;
  for (const auto& children : tree.nodes) {
    py::list ids;
    for (size_t id : children) ids.append(id);
    nodes.append(ids);
  }
  return nodes;
}

py::dict report(const reveal::RevealedSum& revealed, const reveal::ScheduleMatch& match,
                const std::optional<reveal::Verification>& verified,
                const std::vector<reveal::ScheduleReplay>& schedule_replays) {
  py::list schedules;
  for (const auto& text : match.schedules) schedules.append(text);
  py::list replays;
  if (verified)
    for (const auto& s : verified->scores)
      replays.append(py::dict(py::arg("arithmetic") = reveal::arithmetic_name(s.arithmetic),
                              py::arg("identical") = s.identical, py::arg("trials") = verified->trials));
  py::list by_schedule;
  for (const auto& r : schedule_replays)
    by_schedule.append(py::dict(py::arg("schedule") = r.schedule, py::arg("identical") = r.identical,
                                py::arg("trials") = verified ? verified->trials : 0));
  // The tree as data: node j (id n + j) adds its children's ids (a term's id is its index).
  const py::list nodes = node_lists(revealed.tree);
  const auto& tree = revealed.tree;
  return py::dict(py::arg("n") = tree.terms, py::arg("tree") = tree.text(), py::arg("dot") = tree.dot(),
                  py::arg("nodes") = nodes, py::arg("root") = tree.root, py::arg("additions") = tree.additions(),
                  py::arg("multi_term_nodes") = tree.multi_term_nodes(), py::arg("depth") = tree.depth(),
                  py::arg("calls") = revealed.calls, py::arg("seconds") = revealed.seconds,
                  py::arg("schedules") = schedules, py::arg("replays") = replays,
                  py::arg("schedule_replays") = by_schedule);
}

// A sum whose order varies (runs >= 2), probed (and replayed: `verify_against`) with the GIL
// released like reveal_and_verify.
template <class Verify>
py::dict reveal_varying(const reveal::SumFunction& probe, Verify verify_against, size_t n, size_t runs, size_t verify,
                        uint64_t seed) {
  reveal::RevealedVaryingSum revealed;
  std::optional<reveal::VaryingVerification> verified;
  {
    py::gil_scoped_release unlocked;
    revealed = reveal::reveal_varying_sum(probe, n, runs);
    if (verify > 0 && revealed.varies) verified = verify_against(revealed, verify, seed);
  }
  py::list replays;
  if (verified)
    for (const auto& s : verified->scores)
      replays.append(py::dict(
          py::arg("arithmetic") = reveal::arithmetic_name(s.arithmetic), py::arg("identical") = s.identical,
          py::arg("trials") = verified->trials, py::arg("orders_per_trial") = verified->orders,
          py::arg("every_order") = verified->every_order, py::arg("distinct_results") = verified->distinct_results));
  const auto match = reveal::match_varying_schedule(revealed);
  py::list schedules, parts;
  for (const auto& text : match.schedules) schedules.append(text);
  for (const auto& part : revealed.parts) {
    py::list terms;
    for (size_t term : part) terms.append(term);
    parts.append(terms);
  }
  py::dict cross, met;
  for (const auto& [size, calls] : revealed.cross_meets) cross[py::int_(size)] = calls;
  for (const auto& [k, calls] : revealed.parts_met) met[py::int_(k)] = calls;
  const auto& tree = revealed.skeleton;
  return py::dict(py::arg("n") = tree.terms, py::arg("varies") = revealed.varies, py::arg("parts") = parts,
                  py::arg("skeleton") = tree.text(), py::arg("dot") = tree.dot(), py::arg("nodes") = node_lists(tree),
                  py::arg("root") = tree.root, py::arg("schedules") = schedules, py::arg("cross_meets") = cross,
                  py::arg("chain_of_parts") = revealed.chain_of_parts, py::arg("parts_met") = met,
                  py::arg("uniform_order_distance") = revealed.uniform_order_distance, py::arg("runs") = revealed.runs,
                  py::arg("calls") = revealed.calls, py::arg("seconds") = revealed.seconds,
                  py::arg("replays") = replays);
}

// Probes `probe` (fn as a sum) with the GIL released, on a thread of its own in reveal_sum (deep
// trees need a deep stack); `call` takes the GIL again for every call of fn. `verify` replays the
// tree against fn in its arithmetics, and each schedule that names it (`replay_named`) through
// fplab's evaluator.
template <class Verify, class ReplayNamed>
py::dict reveal_and_verify(const reveal::SumFunction& probe, Verify verify_against, ReplayNamed replay_named, size_t n,
                           size_t verify, uint64_t seed) {
  reveal::RevealedSum revealed;
  reveal::ScheduleMatch match;
  std::optional<reveal::Verification> verified;
  std::vector<reveal::ScheduleReplay> schedule_replays;
  {
    py::gil_scoped_release unlocked;
    revealed = reveal::reveal_sum(probe, n);
    match = reveal::match_schedule(revealed.tree);
    if (verify > 0) {
      verified = verify_against(revealed.tree, verify, seed);
      schedule_replays = replay_named(match.schedules, n, verify, seed);
    }
  }
  return report(revealed, match, verified, schedule_replays);
}

// fn's calls, given up once `seconds` have passed since the probe began (0: never): a probe of tens of
// thousands of terms can outlast what its caller can wait (a GPU machine lent for minutes), and
// one that stops says so in one line instead of losing the caller's whole time.
class TimeLimit {
 public:
  explicit TimeLimit(double seconds) : seconds_(seconds), start_(std::chrono::steady_clock::now()) {
    if (!(seconds >= 0)) throw std::invalid_argument("seconds must be 0 (no limit) or more");
  }
  void check() {
    // Runs without the GIL (the probe's thread): no Python objects here.
    if (seconds_ > 0 && std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count() > seconds_) {
      char limit[32];
      std::snprintf(limit, sizeof limit, "%g", seconds_);
      throw reveal::RevealError("gave up after " + std::to_string(calls_) + " calls: the time limit of " + limit +
                                " s (seconds=) was reached");
    }
    ++calls_;
  }

 private:
  double seconds_;
  std::chrono::steady_clock::time_point start_;
  size_t calls_ = 0;
};

py::dict reveal_sum_of(py::function fn, size_t n, size_t verify, uint64_t seed, size_t runs, double seconds) {
  TimeLimit limit(seconds);
  const reveal::SumFunction sum = [&fn, &limit](std::span<const float> x) {
    limit.check();
    py::gil_scoped_acquire locked;
    return fn(float_array(x)).cast<float>();
  };
  if (runs > 0)
    return reveal_varying(
        sum,
        [&](const reveal::RevealedVaryingSum& r, size_t trials, uint64_t s) {
          return reveal::verify_varying_sum(sum, r, trials, s);
        },
        n, runs, verify, seed);
  return reveal_and_verify(
      sum,
      [&](const sim::AdditionTree& tree, size_t trials, uint64_t s) {
        return reveal::verify_sum(sum, tree, trials, s);
      },
      [&](const std::vector<std::string>& schedules, size_t terms, size_t trials, uint64_t s) {
        return reveal::replay_schedules_sum(sum, schedules, terms, trials, s);
      },
      n, verify, seed);
}

py::dict reveal_dot_of(py::function fn, size_t n, size_t verify, uint64_t seed, size_t runs, double seconds) {
  TimeLimit limit(seconds);
  const reveal::DotFunction dot = [&fn, &limit](std::span<const float> a, std::span<const float> b) {
    limit.check();
    py::gil_scoped_acquire locked;
    return fn(float_array(a), float_array(b)).cast<float>();
  };
  if (runs > 0)
    return reveal_varying(
        reveal::dot_with_ones(dot),
        [&](const reveal::RevealedVaryingSum& r, size_t trials, uint64_t s) {
          return reveal::verify_varying_dot(dot, r, trials, s);
        },
        n, runs, verify, seed);
  return reveal_and_verify(
      reveal::dot_with_ones(dot),
      [&](const sim::AdditionTree& tree, size_t trials, uint64_t s) {
        return reveal::verify_dot(dot, tree, trials, s);
      },
      [&](const std::vector<std::string>& schedules, size_t terms, size_t trials, uint64_t s) {
        return reveal::replay_schedules_dot(dot, schedules, terms, trials, s);
      },
      n, verify, seed);
}

// The schedules that name a stored tree (reveal's `nodes` of n terms): a tree revealed before the
// matcher knew its order is named again. Refuses, in one line, lists that are not one tree.
std::vector<std::string> name_tree(const std::vector<std::vector<size_t>>& nodes, size_t n) {
  // every node adds at least two results into one: a tree of n terms has at most n - 1
  if (n < 2 || n > (size_t{1} << 24) || nodes.empty() || nodes.size() > n - 1)
    throw std::invalid_argument("name_tree: " + std::to_string(nodes.size()) + " nodes over " + std::to_string(n) +
                                " terms are not one tree (n from 2 to 2^24, 1 to n - 1 nodes)");
  sim::AdditionTree tree;
  tree.terms = n;
  std::vector<bool> used(n + nodes.size(), false);
  for (size_t j = 0; j < nodes.size(); ++j) {
    if (nodes[j].size() < 2)
      throw std::invalid_argument("name_tree: node " + std::to_string(j) + " has fewer than two children");
    for (size_t child : nodes[j]) {
      if (child >= n + j)
        throw std::invalid_argument("name_tree: node " + std::to_string(j) + " names " + std::to_string(child) +
                                    ", not a term or an earlier node");
      if (used[child]) throw std::invalid_argument("name_tree: " + std::to_string(child) + " is a child twice");
      used[child] = true;
    }
    tree.root = tree.add(nodes[j]);
  }
  const auto unused = std::find(used.begin(), used.end() - 1, false);
  if (unused != used.end() - 1)
    throw std::invalid_argument("name_tree: not one tree of " + std::to_string(n) + " terms: " +
                                std::to_string(unused - used.begin()) + " is no node's child");
  if (used.back()) throw std::invalid_argument("name_tree: the last node is a child; it must be the root");
  py::gil_scoped_release unlocked;
  return reveal::match_schedule(tree).schedules;
}

}  // namespace

void bind_reveal(py::module_& m) {
  m.def("name_tree", &name_tree, py::arg("nodes"), py::arg("n"),
        "The schedules that give a tree of n terms (reveal's 'nodes': node j, id n + j, lists its children, "
        "the last node the root), as fplab reveal names a revealed one.");
  m.def("reveal_sum", &reveal_sum_of, py::arg("fn"), py::arg("n"), py::arg("verify") = 0, py::arg("seed") = 1,
        py::arg("runs") = 0, py::kw_only(), py::arg("seconds") = 0.0,
        "The addition order of fn (a float32 array of n in, a float out), found by probing it: "
        "{'tree', 'dot', 'nodes', 'calls', 'seconds', 'schedules', 'replays', 'schedule_replays', ...} (verify: "
        "the tree replayed in each candidate arithmetic, and each named schedule through fplab's evaluator); with "
        "runs >= 2, "
        "the pairs of a part asked runs times, an order that varies: {'varies', 'parts', 'skeleton', ...}. "
        "seconds > 0: give up (an fplab.Error) once that long has passed since the call began.");
  m.def("reveal_dot", &reveal_dot_of, py::arg("fn"), py::arg("n"), py::arg("verify") = 0, py::arg("seed") = 1,
        py::arg("runs") = 0, py::kw_only(), py::arg("seconds") = 0.0,
        "The addition order of fn (two float32 arrays of n in, their dot product out), found by probing "
        "it with b = 1: the same dict as reveal_sum's, the replays in the dot's arithmetics.");
}

}  // namespace fplab::python
