// The reducers that work on a whole group at once rather than as a tree of additions: kahan,
// neumaier, exact, binned and fused(N,F). Shared by the reference evaluator and the fast engine.
#pragma once

#include <span>

#include "fp/counter_rng.hpp"
#include "sim/arithmetic.hpp"
#include "sim/schedule.hpp"
#include "sim/tensor_core.hpp"

namespace fplab::sim {

// A term of a reduction: the value a, or (when product) the exact product a * b.
struct Term {
  double a = 0, b = 1;
  bool product = false;
};

// `stream` feeds stochastic rounding. Compensated and binned reducers work on values: a product
// term is rounded to the format first. exact keeps products exact; fused feeds them to the
// tensor-core model (values enter as value * 1).
// The tensor-core step of the fused(N,F[,INPUT]) reducer: without INPUT the data are taken as they
// are (fp64 input format: no conversion); with it every factor is converted first (tf32 toward zero,
// the others to nearest even). Note what is a "factor": a product term's two factors; a value (a
// partial sum from an earlier stage, or a product already rounded under Products::rounded) enters
// as value * 1 and is converted itself, where a real MMA would not convert its accumulator. The
// one rounding of each step is toward zero for an fp32 result, as the tensor cores do, else the
// arithmetic's mode. A group is fused_dot(0.0, ...) with this spec.
FusedAddSpec fused_reducer_spec(const Reducer& fused, const Arithmetic& arithmetic);

double reduce_whole_group(const Reducer& reducer, std::span<const Term> group, const Arithmetic& arithmetic,
                          fp::CounterRng& stream);

}  // namespace fplab::sim
