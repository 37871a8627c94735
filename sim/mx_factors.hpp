// The MX inputs of the fused tensor-core step (fused(N,F,mxe4m3) ..., docs/tensor-cores.md): a dot
// product's or GEMM's factors quantized in OCP MX blocks of 32 along K (fp/mx_block.hpp), each row
// of A and each column of B with its own e8m0 scales, before the schedule runs. The schedule then
// runs with the input `none` on the dequantized values X * P_i, which are exact doubles (and floats,
// for fp32 data, except where a block held an infinity): the fused steps add their exact products.
//
// Choices (the spec leaves them to the implementation; docs/tensor-cores.md repeats them):
// - the factors are quantized once, whatever the stages: a later fused stage with an MX input
//   adds the earlier stages' partial sums unconverted (a real MMA does not convert its
//   accumulator either), and one schedule names at most one MX input;
// - a product's reference exponent in the alignment is that of the dequantized factors (a
//   subnormal element's own, not the element format's emin plus the scale).
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

#include "fp/format.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

// The element format of an MX input (mxe3m2: fp::e3m2fn(), ...); nullopt for every other input.
std::optional<fp::Format> mx_element_format(Reducer::Input input);

// The element format of the MX input of the schedule's fused steps, at any depth (nullopt: none).
// Throws std::invalid_argument when two fused steps name different MX inputs.
std::optional<fp::Format> mx_input_of(const Schedule& schedule);

// The schedule with its MX inputs replaced by none: what runs on the dequantized factors.
Schedule without_mx_inputs(Schedule schedule);

// One factor vector of a dot product (K long) quantized in blocks of 32 and dequantized.
std::vector<double> mx_dequantized(std::span<const double> factor, const fp::Format& element);

// A GEMM's fp32 factors (A m x k, B k x n, row-major) with A's rows and B's columns quantized in
// blocks of 32 along k and dequantized into a_out and b_out (the same shapes). False when some
// dequantized value is not a float (a block that held an infinity: +-max * 2^127), which the
// caller then evaluates from doubles (sim::gemm: through gemm_reference).
bool mx_gemm_factors(const float* a, const float* b, size_t m, size_t n, size_t k, const fp::Format& element,
                     std::vector<float>& a_out, std::vector<float>& b_out);

}  // namespace fplab::sim
