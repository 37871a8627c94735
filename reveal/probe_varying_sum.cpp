#include "reveal/probe_varying_sum.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <optional>
#include <string>

#include "reveal/pair_prober.hpp"

namespace fplab::reveal {
namespace {

// One pivot's probes: for every other term still outside a part, its answers in `runs` calls.
struct PivotProbes {
  size_t part = 0;  // the part the pivot founded
  std::map<size_t, std::vector<size_t>> answers;
};

bool all_equal(const std::vector<size_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](size_t s) { return s == v[0]; });
}

// The pivot's part: its ancestors, smallest first (by each term's first answer), as long as each
// gathers exactly its size of terms whose answers stay the same when asked `runs` times in all.
// Only the terms the walk reaches are asked again: one answer places the others outside.
std::vector<size_t> stable_part(size_t pivot, std::map<size_t, std::vector<size_t>>& answers, size_t runs,
                                detail::PairProber& prober) {
  std::map<size_t, std::vector<size_t>> by_size;  // the first answer -> terms
  for (const auto& [term, sizes] : answers) by_size[sizes[0]].push_back(term);
  std::vector<size_t> part{pivot};
  for (const auto& [size, group] : by_size) {
    if (part.size() + group.size() != size) break;
    const bool steady = std::all_of(group.begin(), group.end(), [&](size_t t) {
      std::vector<size_t>& asked = answers[t];
      while (asked.size() < runs) asked.push_back(prober.probe(pivot, t));
      return all_equal(asked);
    });
    if (!steady) break;
    part.insert(part.end(), group.begin(), group.end());
  }
  std::sort(part.begin(), part.end());
  return part;
}

// The cross-part statistics of a finished probe (RevealedVaryingSum's last three fields).
void count_cross_meets(RevealedVaryingSum& out, const std::vector<PivotProbes>& pivots,
                       const std::vector<size_t>& part_of) {
  const size_t p = out.parts.size();
  const size_t size = out.parts[0].size();
  const bool one_size =
      std::all_of(out.parts.begin(), out.parts.end(), [&](const auto& part) { return part.size() == size; });
  out.chain_of_parts = true;
  for (const PivotProbes& probes : pivots)
    for (const auto& [term, sizes] : probes.answers) {
      const size_t other = part_of[term];
      if (other == probes.part) continue;
      const size_t both = out.parts[probes.part].size() + out.parts[other].size();
      for (size_t s : sizes) {
        ++out.cross_meets[s];
        if (one_size) {
          const bool whole = s % size == 0 && s / size >= 2 && s / size <= p;
          out.chain_of_parts = out.chain_of_parts && whole;
          if (whole) ++out.parts_met[s / size];
        } else {
          out.chain_of_parts = out.chain_of_parts && s >= both && s <= out.skeleton.terms;
        }
      }
    }
  if (!one_size) return;
  size_t total = 0;
  for (const auto& [k, calls] : out.parts_met) total += calls;
  double distance = 0;
  for (size_t k = 2; k <= p; ++k) {
    const auto found = out.parts_met.find(k);
    const double seen = found == out.parts_met.end() ? 0.0 : static_cast<double>(found->second) / total;
    distance += std::abs(seen - 2.0 * static_cast<double>(k - 1) / static_cast<double>(p * (p - 1)));
  }
  out.uniform_order_distance = total ? distance / 2 : -1;
}

}  // namespace

RevealedVaryingSum reveal_varying_sum(const SumFunction& sum, size_t n, size_t runs) {
  if (n < 2) throw RevealError("n must be at least 2 (a sum of one term has no order)");
  if (n > (size_t{1} << 24)) throw RevealError("n must be at most 2^24 (the count of 1s must stay exact in fp32)");
  if (runs < 2 || runs > 1000) throw RevealError("runs must be from 2 to 1000 (calls per pair of terms)");
  std::optional<RevealedVaryingSum> result;
  detail::run_with_deep_stack(n, [&] {
    const auto started = std::chrono::steady_clock::now();
    detail::PairProber prober(sum, n);
    RevealedVaryingSum out;
    out.runs = runs;
    std::vector<size_t> remaining(n), part_of(n), part_nodes;
    std::iota(remaining.begin(), remaining.end(), 0);
    std::vector<PivotProbes> pivots;
    while (!remaining.empty()) {
      const size_t pivot = prober.random_member(remaining);
      PivotProbes probes{out.parts.size(), {}};
      for (size_t term : remaining)
        if (term != pivot) probes.answers[term].push_back(prober.probe(pivot, term));
      const std::vector<size_t> part = stable_part(pivot, probes.answers, runs, prober);
      for (size_t term : part)
        if (term != pivot) prober.remember(pivot, term, probes.answers[term][0]);
      part_nodes.push_back(prober.subtree(part, pivot));
      for (size_t term : part) part_of[term] = out.parts.size();
      out.parts.push_back(part);
      std::vector<size_t> rest;
      std::set_difference(remaining.begin(), remaining.end(), part.begin(), part.end(), std::back_inserter(rest));
      remaining = std::move(rest);
      pivots.push_back(std::move(probes));
    }
    // Parts by smallest term, and the root joining them.
    std::vector<size_t> order(out.parts.size());
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return out.parts[a][0] < out.parts[b][0]; });
    std::vector<std::vector<size_t>> parts;
    std::vector<size_t> children, renumber(order.size());
    for (size_t k = 0; k < order.size(); ++k) {
      parts.push_back(out.parts[order[k]]);
      children.push_back(part_nodes[order[k]]);
      renumber[order[k]] = k;
    }
    out.parts = std::move(parts);
    for (auto& p : part_of) p = renumber[p];
    for (auto& probes : pivots) probes.part = renumber[probes.part];
    out.skeleton = std::move(prober.tree());
    out.skeleton.root = children.size() == 1 ? children[0] : out.skeleton.add(children);
    out.varies = out.parts.size() > 1;
    if (out.varies) count_cross_meets(out, pivots, part_of);
    out.calls = prober.calls();
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    result = std::move(out);
  });
  return std::move(*result);
}

sim::AdditionTree chained_skeleton(const RevealedVaryingSum& revealed) {
  sim::AdditionTree tree = revealed.skeleton;
  if (!revealed.varies) return tree;
  const std::vector<size_t> parts = tree.nodes.back();  // the root: made last
  tree.nodes.pop_back();
  size_t acc = parts[0];
  for (size_t k = 1; k < parts.size(); ++k) acc = tree.add({acc, parts[k]});
  tree.root = acc;
  return tree;
}

}  // namespace fplab::reveal
