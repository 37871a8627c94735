// A skeleton revealed with --runs (reveal/probe_varying_sum.hpp) replayed against the function:
// on random inputs, each call's result must be the chain of its parts, each part replayed as its
// revealed tree, added in fp32 (an atomicAdd on a float) in some order. Every order of the parts
// is tried when there are at most 10 parts (10! = 3 628 800), a seeded sample of 200 000 orders
// beyond. Since many orders give the same bits, the report also counts how many distinct results
// the orders give: a match among few distinct results says more than one among many.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "reveal/probe_sum.hpp"
#include "reveal/probe_varying_sum.hpp"
#include "reveal/replay_sum.hpp"

namespace fplab::reveal {

struct VaryingVerification {
  size_t trials = 0;
  std::vector<ReplayScore> scores;  // trials where some order gave the function's bits, best first
  std::vector<std::string> inputs;  // what the trials drew, in words
  size_t orders = 0;                // orders tried per trial
  bool every_order = false;         // all P! orders (else a sample)
  size_t distinct_results = 0;      // median over trials and arithmetics of the orders' distinct results
};

// Only the arithmetics whose nodes are rounded to fp32 (sum: fp32; dot: products fused or rounded,
// tensor-core steps): the parts' values are then floats, added as floats.
VaryingVerification verify_varying_sum(const SumFunction& sum, const RevealedVaryingSum& revealed, size_t trials,
                                       uint64_t seed);
VaryingVerification verify_varying_dot(const DotFunction& dot, const RevealedVaryingSum& revealed, size_t trials,
                                       uint64_t seed);

// The subtree of `tree` under node `root`, whose terms are `terms` (ascending), with term terms[k]
// renamed k.
sim::AdditionTree subtree_of(const sim::AdditionTree& tree, size_t root, const std::vector<size_t>& terms);

}  // namespace fplab::reveal
