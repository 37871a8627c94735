// The reducers that work on a whole group at once rather than as a tree of additions: kahan,
// neumaier, exact, binned and fused(N,F). Shared by the reference evaluator and the fast engine.
#pragma once

#include <span>

#include "fp/counter_rng.hpp"
#include "sim/arithmetic.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

// A term of a reduction: the value a, or (when product) the exact product a * b.
struct Term {
  double a = 0, b = 1;
  bool product = false;
};

// `stream` feeds stochastic rounding. Compensated and binned reducers work on values: a product
// term is rounded to the format first. exact keeps products exact; fused feeds them to the
// tensor-core model (values enter as value * 1).
double reduce_whole_group(const Reducer& reducer, std::span<const Term> group, const Arithmetic& arithmetic,
                          fp::CounterRng& stream);

}  // namespace fplab::sim
