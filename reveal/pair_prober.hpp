// Internal to reveal/: the probe of one pair of terms, and the recursion that turns the sizes of
// the subtrees where pairs meet into a tree (reveal/probe_sum.hpp explains the technique). Both
// the probe of a deterministic sum and that of a sum whose order varies run on it.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "reveal/probe_sum.hpp"
#include "sim/addition_tree.hpp"

namespace fplab::reveal::detail {

class PairProber {
 public:
  PairProber(const SumFunction& sum, size_t n);

  // One call with x[i] = +M, x[j] = -M, every other input 1: the size of the subtree where i and
  // j met in that call. Throws RevealError when the result is not a count of 1s.
  size_t probe(size_t i, size_t j);
  // The size where i and j meet, asked once and remembered (or as given to remember()).
  size_t meet_size(size_t i, size_t j);
  void remember(size_t i, size_t j, size_t size) { cache_[std::minmax(i, j)] = size; }

  // Builds the subtree whose terms are exactly `terms` (ascending), probed from term `pivot` of
  // them (a random one if none is given), into tree(); returns its node id.
  size_t subtree(const std::vector<size_t>& terms, std::optional<size_t> pivot = std::nullopt);

  // A random term of `terms`: a random pivot cuts a chain at a random place (about 2n calls for
  // a chain in either direction, where the smallest term would cost n^2 / 2 added last to
  // first). Seeded by n, so that a run is repeatable.
  size_t random_member(const std::vector<size_t>& terms);

  sim::AdditionTree& tree() { return tree_; }
  size_t calls() const { return calls_; }
  size_t terms() const { return n_; }

 private:
  std::vector<size_t> siblings(std::vector<size_t> group, size_t parent_size);
  [[noreturn]] void contradiction(size_t i, size_t j, size_t said, size_t expected) const;

  const SumFunction& sum_;
  size_t n_;
  std::vector<float> x_;
  float big_;
  std::map<std::pair<size_t, size_t>, size_t> cache_;
  std::mt19937_64 rng_;
  size_t calls_ = 0;
  sim::AdditionTree tree_;
};

// Runs `body` on a thread whose stack holds a recursion n levels deep (a sequential sum of n
// terms has n levels, a few hundred bytes each), rethrowing what it throws.
void run_with_deep_stack(size_t n, const std::function<void()>& body);

}  // namespace fplab::reveal::detail
