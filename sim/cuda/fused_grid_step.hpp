// The fused step of a tensor-core model on the integer grid, one output at a time, for the fused
// steps on CUDA cores (gpu_fused_gemm.cu): the same arithmetic as fused_step.hpp where the step
// stays in an ordinary range, in a few instructions a product instead of fused_step's general
// case (64-bit shifts, a branch per kind of term).
//
// The step of fused_step.hpp with F = fraction_bits: E, the largest reference exponent of the
// nonzero products and the accumulator; every term cut toward zero to units of 2^(E - F); the
// units summed exactly; the sum rounded toward zero to fp32. Here each term is scaled by the
// power of two 2^(F - E) and converted to an integer toward zero, a single conversion instruction.
// That is exact while E lies in [F - 125, kHighestGridExponent] (the form): then 2^(F - E) and
// 2^(E - F) are normal floats, a product that reaches the grid (>= 2^(E - F) >= 2^-125) is normal
// and exact in the value type (V: float for factors of at most 12 significant bits, whose
// products have at most 24; double for fp32 factors), a product below the grid (zero, subnormal,
// or rounded there) scales to less than one unit, and the result, >= 2^(E - F) or zero, is a
// normal float or +0 that no rounding of the final scaling touches. A step with no nonzero term
// and a +0 accumulator gives +0 on both sides. Outside the form (infinities, NaNs, a -0
// accumulator without nonzero products, whose sign rule is fused_step's, results that could round
// past FLT_MAX or fall below 2^-125) a caller takes fused_step. Compiled for the device in
// gpu_fused_gemm.cu and for the host in tests/test_fused_step.cpp, which holds grid_step to
// fused_multiply_add.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "sim/cuda/fused_step.hpp"

namespace fplab::sim::gpu::fused_grid {

// Codes of factors and accumulators: reference exponents, or these. A product's code is the sum
// of its factors': at most kNoTermsAbove when a factor is zero, above every form's E when one is
// an infinity or a NaN.
constexpr int kZeroCode = -4096, kSpecialCode = 8192, kNoTermsAbove = -3000;
constexpr int kNoTerms = 2 * kZeroCode;  // a +0 accumulator's code: nothing to align to
// Results below (N + 1) 2^(E + 2) <= 2^(E + 7) stay below FLT_MAX rounded toward zero.
constexpr int kHighestGridExponent = 120;
constexpr int kLowestGridBelowF = 125;

// A factor's code: its reference exponent (its own, clamped at the input format's emin).
FPLAB_HOST_DEVICE inline int factor_code(float x, int emin) {
  if (x == 0) return kZeroCode;
  if (!std::isfinite(x)) return kSpecialCode;
  return fused_step_detail::reference_exponent(x, emin);
}

// An accumulator's code: kNoTerms for +0, else its biased exponent less 127 — its reference
// exponent for a normal float; above the form for infinities and NaNs; -127, below every form's
// E, for a -0 or a subnormal, which is right wherever a product sets E (their reference exponent,
// -126, is below it) and leaves the step outside the form otherwise (fused_step's sign rule for
// -0). Four integer operations: the kernel asks it of every output at every step.
FPLAB_HOST_DEVICE inline int accumulator_code(float acc) {
  const uint32_t bits = fused_step_detail::bits_of(acc);
  return bits == 0 ? kNoTerms : static_cast<int>((bits >> 23) & 0xffu) - 127;
}

FPLAB_HOST_DEVICE inline bool in_form(int e, int fraction_bits) {
  return e <= kNoTermsAbove || (e >= fraction_bits - kLowestGridBelowF && e <= kHighestGridExponent);
}

// The grid's exponent E - F, for a step in the form (without nonzero terms: the lowest grid,
// where zeros stay zero).
FPLAB_HOST_DEVICE inline int grid_exponent(int e, int fraction_bits) {
  const int lowest = fraction_bits - kLowestGridBelowF;
  return (e > lowest ? e : lowest) - fraction_bits;
}

// 2^p for p in [-126, 127] (float) or [-1022, 1023] (double).
template <class V>
FPLAB_HOST_DEVICE inline V power_of_two(int p) {
  if constexpr (sizeof(V) == 4) {
    return fused_step_detail::float_of(static_cast<uint32_t>(p + 127) << 23);
  } else {
#ifdef __CUDA_ARCH__
    return __longlong_as_double(static_cast<long long>(p + 1023) << 52);
#else
    return std::bit_cast<double>(static_cast<uint64_t>(p + 1023) << 52);
#endif
  }
}

// A term (a product, or the accumulator) already scaled to units of the grid, below 2^31 in
// magnitude, cut toward zero to an integer.
template <class V>
FPLAB_HOST_DEVICE inline int32_t units(V scaled) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(V) == 4)
    return __float2int_rz(scaled);
  else
    return __double2int_rz(scaled);
#else
  return static_cast<int32_t>(scaled);
#endif
}

// Whether N products and the accumulator sum below 2^31 units (each product below 2^(F + 2), the
// accumulator below 2^(F + 1)): an int32 sum; else an int64 one.
constexpr bool sum_fits_int32(int products, int fraction_bits) {
  return int64_t{products} * (int64_t{1} << (fraction_bits + 2)) + (int64_t{1} << (fraction_bits + 1)) <
         (int64_t{1} << 31);
}

// The sum of units (int32 or int64) rounded toward zero to fp32, in units of the grid (exact
// below 2^53).
template <class Sum>
FPLAB_HOST_DEVICE inline float rounded_sum(Sum sum) {
#ifdef __CUDA_ARCH__
  if constexpr (sizeof(Sum) == 4)
    return __int2float_rz(sum);
  else
    return __ll2float_rz(sum);
#else
  return fused_step_detail::toward_zero(static_cast<double>(sum));
#endif
}

// fused_step<N>(acc, x, y, count, emin, fraction_bits) where the step is in the form (true), with
// x and y the factors in V and their codes; false, acc untouched, where it is not. The kernel
// spells the same calls out over a tile of outputs.
template <class V, class Sum, int N>
FPLAB_HOST_DEVICE inline bool grid_step(float& acc, const V (&x)[N], const V (&y)[N], const int (&x_code)[N],
                                        const int (&y_code)[N], int fraction_bits) {
  int e = accumulator_code(acc);
  for (int i = 0; i < N; ++i) e = x_code[i] + y_code[i] > e ? x_code[i] + y_code[i] : e;
  if (!in_form(e, fraction_bits)) return false;
  const int grid = grid_exponent(e, fraction_bits);
  const V scale = power_of_two<V>(-grid);
  Sum sum = units(static_cast<V>(acc) * scale);
  for (int i = 0; i < N; ++i) sum += units(x[i] * y[i] * scale);
  acc = rounded_sum(sum) * power_of_two<float>(grid);
  return true;
}

}  // namespace fplab::sim::gpu::fused_grid
