// fp32 values narrowed to tf32 (truncated) or bf16 (to nearest even) on their bit patterns: the
// conversions a tensor-core GEMM applies to every factor (fused(N,F,tf32), fused(N,F,bf16)),
// equal to fp::round_double(x, tf32(), {rz}) / (x, bf16(), {rne}) for every fp32 x (subnormals,
// infinities and overflow to infinity included; NaN stays NaN), at a few instructions each.
// Held to fp::round_double over every fp32 exponent, sign and the critical fraction patterns in
// tests/test_tensor_core.cpp.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

namespace fplab::sim {

inline float fp32_to_tf32_rz(float x) {
  if (std::isnan(x)) return x;
  return std::bit_cast<float>(std::bit_cast<uint32_t>(x) & 0xFFFFE000u);  // the 13 low fraction bits dropped
}

inline float fp32_to_bf16_rne(float x) {
  if (std::isnan(x)) return x;
  const uint32_t u = std::bit_cast<uint32_t>(x);
  // Adding 0x7FFF (+1 when the kept part is odd) carries into bit 16 exactly when the dropped
  // half is above one half, or equal to it with an odd kept part; a carry out of the fraction
  // moves to the next binade or to infinity, as rounding does.
  return std::bit_cast<float>((u + 0x7FFFu + ((u >> 16) & 1u)) & 0xFFFF0000u);
}

}  // namespace fplab::sim
