// A GEMM's fp32 factor as a fused step sees it: converted to the step's input format and given its
// reference exponent (sim/tensor_core.hpp, step 2). The tile forms of the fused step
// (sim/tensor_core_lanes.cpp, sim/fused_grid.cpp) work this out once per factor, not per product.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "fp/round.hpp"
#include "sim/tensor_core.hpp"

namespace fplab::sim::detail {

struct FusedFactor {
  enum class Kind : uint8_t { zero, finite, special /* infinity or NaN */ };
  float value;
  Kind kind;
  int exponent;  // finite: the value's exponent clamped at the input format's emin
};

// Factors under one spec, whose input format lies within fp32 (every value of it is a float).
// A value that rounds to a normal value of the input format (nearly all data) is rounded on its bit
// pattern, as fp::round_double rounds it; the rest (the input's subnormals, overflow, infinities,
// NaN) through fp::round_double itself.
class FusedFactorConversion {
 public:
  explicit FusedFactorConversion(const FusedAddSpec& spec)
      : spec_(spec),
        as_is_(spec.input == fp::fp64() || spec.input.precision() >= kFloatPrecision),
        dropped_(kFloatPrecision - spec.input.precision()),
        emin_(spec.input.emin()) {
    if (as_is_) return;
    smallest_normal_ = std::bit_cast<uint32_t>(static_cast<float>(spec.input.min_normal()));
    largest_finite_ = std::min(std::bit_cast<uint32_t>(static_cast<float>(spec.input.max_finite())), 0x7F7FFFFFu);
  }

  FusedFactor operator()(float v) const {
    const float x = as_is_ ? v : converted(v);
    if (x == 0) return {x, FusedFactor::Kind::zero, 0};
    if (!std::isfinite(x)) return {x, FusedFactor::Kind::special, 0};
    const int biased = static_cast<int>(std::bit_cast<uint32_t>(x) >> kFloatFractionBits & 0xFF);
    return {x, FusedFactor::Kind::finite, std::max(biased != 0 ? biased - kFloatBias : std::ilogb(x), emin_)};
  }

 private:
  static constexpr int kFloatPrecision = 24, kFloatFractionBits = 23, kFloatBias = 127;

  float converted(float v) const {
    const uint32_t u = std::bit_cast<uint32_t>(v), magnitude = u & 0x7FFFFFFFu;
    // Normal values no larger than the input's largest finite one round within its normal range.
    if (magnitude < smallest_normal_ || magnitude > largest_finite_)
      return static_cast<float>(fp::round_double(v, spec_.input, {spec_.input_mode}).value);
    const uint32_t unit = uint32_t{1} << dropped_, kept = ~(unit - 1);
    switch (spec_.input_mode) {
      case fp::Mode::rz:
        return std::bit_cast<float>(u & kept);
      case fp::Mode::rna:
        return std::bit_cast<float>((u + unit / 2) & kept);
      case fp::Mode::rne:  // a carry out of the fraction moves to the next binade, as rounding does
        return std::bit_cast<float>((u + unit / 2 - 1 + ((u >> dropped_) & 1)) & kept);
      default:
        return static_cast<float>(fp::round_double(v, spec_.input, {spec_.input_mode}).value);
    }
  }

  const FusedAddSpec& spec_;
  bool as_is_;
  int dropped_, emin_;
  uint32_t smallest_normal_ = 0, largest_finite_ = 0;
};

}  // namespace fplab::sim::detail
