// A revealed tree replayed with a candidate arithmetic, against the function it was revealed
// from, on random inputs: `fplab reveal --verify`. The arithmetic the tree alone does not tell
// (each node rounded to fp32, or a wider accumulator; products rounded or fused) is the one whose
// replay gives the function's bits every time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "reveal/probe_sum.hpp"
#include "sim/addition_tree.hpp"

namespace fplab::reveal {

enum class Arithmetic {
  fp32,          // every addition rounded to fp32 (a node of more terms: summed exactly, rounded once)
  fp64,          // every addition in fp64, the result rounded to fp32 once
  fp32_fused,    // dot: a node adding one product to a partial sum is an FMA; others as fp32
  fp32_rounded,  // dot: every product rounded to fp32 first, then fp32 additions
  fp64_rounded,  // dot: every product rounded to fp32, added in fp64, the sum rounded to fp32 once
                 // (OpenBLAS's sdot below 32 terms: float products into a double)
  // dot, tensor cores: every node that adds products is one fused step of a tensor-core model
  // (N products and at most one partial sum, aligned and cut to F = 25 bits, rounded toward
  // zero); nodes of two partial sums are fp32 additions. The factors are first converted to tf32
  // in one of the three ways an H100's kernels do (docs/reveal.md): their 13 low bits ignored (the
  // MMA instruction itself: tc-h100-tf32), or rounded to nearest by the kernel, ties to even
  // (tc-h100-tf32-rne) or away from zero (cvt.rna.tf32.f32: tc-h100-tf32-rna).
  tf32_truncated_fused,
  tf32_nearest_even_fused,
  tf32_nearest_away_fused,
};
std::string arithmetic_name(Arithmetic a);
// The candidates for a sum, and for a dot product.
std::vector<Arithmetic> sum_arithmetics();
std::vector<Arithmetic> dot_arithmetics();

// The tree evaluated on x (sum) or on a, b (dot) in arithmetic `a`.
float replay_sum(const sim::AdditionTree& tree, std::span<const float> x, Arithmetic a);
float replay_dot(const sim::AdditionTree& tree, std::span<const float> a, std::span<const float> b, Arithmetic how);

struct ReplayScore {
  Arithmetic arithmetic;
  size_t identical = 0;  // trials where the replay had the function's bits
};
struct Verification {
  size_t trials = 0;
  std::vector<ReplayScore> scores;  // one per candidate arithmetic, best first
  std::vector<std::string> inputs;  // what the trials drew, in words
};

// Trial `kind`'s n inputs, drawn from `rng`: the distributions of trial_input_kinds(), in turn.
std::vector<float> draw_trial_inputs(std::mt19937_64& rng, size_t n, size_t kind);
std::vector<std::string> trial_input_kinds();

// `trials` inputs (seeded), a quarter each: normal, uniform [0, 1), a wide range of exponents
// with random signs, and sums that cancel (pairs of near-opposite values).
Verification verify_sum(const SumFunction& sum, const sim::AdditionTree& tree, size_t trials, uint64_t seed);
Verification verify_dot(const DotFunction& dot, const sim::AdditionTree& tree, size_t trials, uint64_t seed);

}  // namespace fplab::reveal
