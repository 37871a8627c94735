// The shape of a summation: which terms and partial sums each addition combines, with no values.
// A schedule has one (schedule_addition_tree); so has a real library's sum, once fplab reveal
// has probed it (reveal/probe_sum.hpp). Comparing the two says whether the schedule is the
// library's order.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

struct AdditionTree {
  size_t terms = 0;                         // leaves 0 .. terms - 1
  std::vector<std::vector<size_t>> nodes;   // node j (id terms + j): its children's ids; 2 for an
                                            // addition, more for a fused step (one rounding)
  size_t root = 0;                          // a leaf's id when there is one term
  bool opaque = false;                      // a kahan/neumaier/exact/binned group: no addition order

  size_t add(std::vector<size_t> children);  // a new node; returns its id
  // Canonical text: a leaf is its index, a node "(a+b)" with its children ordered by their
  // smallest term (addition commutes, so two trees with the same text give the same bits).
  std::string text() const;
  // Graphviz DOT: terms t0 .. in a row, the additions above them, the result at the top.
  std::string dot() const;
  size_t additions() const;         // nodes of two children: one rounding each
  size_t multi_term_nodes() const;  // nodes of more (fused steps, or whole groups)
  size_t depth() const;             // most nodes on a path from a term to the root
};

// The tree of `schedule` for k terms (atomic and shuffle steps in the order `key` draws).
AdditionTree schedule_addition_tree(const Schedule& schedule, size_t k, const NoiseKey& key = {});

}  // namespace fplab::sim
