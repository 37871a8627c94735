#include "reveal/replay_varying_sum.hpp"

#include <algorithm>
#include <bit>
#include <numeric>
#include <random>
#include <unordered_set>

namespace fplab::reveal {
namespace {

constexpr size_t kEveryOrderUpTo = 10;  // 10! = 3 628 800 orders
constexpr size_t kSampledOrders = 200000;

bool rounds_every_node_to_fp32(Arithmetic a) { return a != Arithmetic::fp64 && a != Arithmetic::fp64_rounded; }

// The parts' subtrees, once per skeleton.
std::vector<sim::AdditionTree> part_trees(const RevealedVaryingSum& revealed) {
  const sim::AdditionTree& skeleton = revealed.skeleton;
  const std::vector<size_t>& roots = skeleton.nodes.at(skeleton.root - skeleton.terms);
  std::vector<sim::AdditionTree> trees;
  for (size_t k = 0; k < revealed.parts.size(); ++k) trees.push_back(subtree_of(skeleton, roots[k], revealed.parts[k]));
  return trees;
}

// Whether some order of `values` added as floats gives `real`; counts the distinct results.
struct OrderSearch {
  size_t orders = 0;
  bool every_order = false;

  bool matches(const std::vector<float>& values, float real, std::mt19937_64& rng, size_t& distinct) {
    const size_t p = values.size();
    std::vector<size_t> order(p);
    std::iota(order.begin(), order.end(), 0);
    std::unordered_set<uint32_t> results;
    bool found = false;
    const auto chain = [&] {
      float acc = values[order[0]];
      for (size_t k = 1; k < p; ++k) acc += values[order[k]];
      const uint32_t bits = std::bit_cast<uint32_t>(acc);
      results.insert(bits);
      found = found || bits == std::bit_cast<uint32_t>(real);
    };
    every_order = p <= kEveryOrderUpTo;
    orders = 0;
    if (every_order) {
      do {
        chain();
        ++orders;
      } while (std::next_permutation(order.begin(), order.end()));
    } else {
      for (; orders < kSampledOrders; ++orders) {
        std::shuffle(order.begin(), order.end(), rng);
        chain();
      }
    }
    distinct = results.size();
    return found;
  }
};

template <class Call, class ReplayPart>
VaryingVerification verify_varying(const RevealedVaryingSum& revealed, std::vector<Arithmetic> candidates,
                                   size_t trials, uint64_t seed, Call call, ReplayPart replay_part) {
  if (!revealed.varies) throw RevealError("the order did not vary: verify its one tree instead");
  VaryingVerification v{trials, {}, trial_input_kinds()};
  std::erase_if(candidates, [](Arithmetic a) { return !rounds_every_node_to_fp32(a); });
  for (Arithmetic a : candidates) v.scores.push_back({a, 0});
  const auto trees = part_trees(revealed);
  std::mt19937_64 rng(seed), orders_rng(seed + 1);
  std::vector<size_t> distinct;
  OrderSearch search;
  for (size_t t = 0; t < trials; ++t) {
    const auto [real, a, b] = call(rng, t);
    for (auto& s : v.scores) {
      std::vector<float> values;
      for (size_t k = 0; k < trees.size(); ++k)
        values.push_back(replay_part(trees[k], revealed.parts[k], a, b, s.arithmetic));
      size_t d = 0;
      if (search.matches(values, real, orders_rng, d)) ++s.identical;
      distinct.push_back(d);
    }
  }
  v.orders = search.orders;
  v.every_order = search.every_order;
  if (!distinct.empty()) {
    std::nth_element(distinct.begin(), distinct.begin() + distinct.size() / 2, distinct.end());
    v.distinct_results = distinct[distinct.size() / 2];
  }
  std::stable_sort(v.scores.begin(), v.scores.end(),
                   [](const ReplayScore& x, const ReplayScore& y) { return x.identical > y.identical; });
  return v;
}

std::vector<float> gather(const std::vector<float>& x, const std::vector<size_t>& terms) {
  std::vector<float> out;
  out.reserve(terms.size());
  for (size_t i : terms) out.push_back(x[i]);
  return out;
}

}  // namespace

sim::AdditionTree subtree_of(const sim::AdditionTree& tree, size_t root, const std::vector<size_t>& terms) {
  sim::AdditionTree out;
  out.terms = terms.size();
  std::vector<size_t> renamed(tree.terms + tree.nodes.size(), SIZE_MAX);
  for (size_t k = 0; k < terms.size(); ++k) renamed[terms[k]] = k;
  // The nodes under root (an explicit stack: a chain is as deep as it is long), then copied in
  // id order, in which every child comes before its parent.
  std::vector<size_t> under, stack{root};
  std::vector<bool> seen(tree.terms + tree.nodes.size(), false);
  while (!stack.empty()) {
    const size_t id = stack.back();
    stack.pop_back();
    if (id < tree.terms) {
      if (renamed[id] == SIZE_MAX) throw RevealError("a part's tree reaches a term outside the part");
      continue;
    }
    if (seen[id]) continue;
    seen[id] = true;
    under.push_back(id);
    for (size_t c : tree.nodes[id - tree.terms]) stack.push_back(c);
  }
  std::sort(under.begin(), under.end());
  for (size_t id : under) {
    std::vector<size_t> children;
    for (size_t c : tree.nodes[id - tree.terms]) children.push_back(renamed[c]);
    renamed[id] = out.add(std::move(children));
  }
  out.root = renamed[root];
  return out;
}

VaryingVerification verify_varying_sum(const SumFunction& sum, const RevealedVaryingSum& revealed, size_t trials,
                                       uint64_t seed) {
  const size_t n = revealed.skeleton.terms;
  return verify_varying(
      revealed, sum_arithmetics(), trials, seed,
      [&](std::mt19937_64& rng, size_t t) {
        auto x = draw_trial_inputs(rng, n, t);
        const float real = sum(x);
        return std::tuple{real, std::move(x), std::vector<float>{}};
      },
      [](const sim::AdditionTree& part, const std::vector<size_t>& terms, const std::vector<float>& x,
         const std::vector<float>&, Arithmetic how) { return replay_sum(part, gather(x, terms), how); });
}

VaryingVerification verify_varying_dot(const DotFunction& dot, const RevealedVaryingSum& revealed, size_t trials,
                                       uint64_t seed) {
  const size_t n = revealed.skeleton.terms;
  return verify_varying(
      revealed, dot_arithmetics(), trials, seed,
      [&](std::mt19937_64& rng, size_t t) {
        auto a = draw_trial_inputs(rng, n, t);
        auto b = draw_trial_inputs(rng, n, t + 1);
        const float real = dot(a, b);
        return std::tuple{real, std::move(a), std::move(b)};
      },
      [](const sim::AdditionTree& part, const std::vector<size_t>& terms, const std::vector<float>& a,
         const std::vector<float>& b,
         Arithmetic how) { return replay_dot(part, gather(a, terms), gather(b, terms), how); });
}

}  // namespace fplab::reveal
