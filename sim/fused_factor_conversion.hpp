// A GEMM's fp32 factor as a fused step sees it: converted to the step's input format and given its
// reference exponent (sim/tensor_core.hpp, step 2). The tile forms of the fused step
// (sim/tensor_core_lanes.cpp, sim/fused_grid.cpp) work this out once per factor, not per product.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "fp/round.hpp"
#include "sim/fp32_narrowing.hpp"
#include "sim/tensor_core.hpp"

namespace fplab::sim::detail {

struct FusedFactor {
  enum class Kind : uint8_t { zero, finite, special /* infinity or NaN */ };
  float value;
  Kind kind;
  int exponent;  // finite: the value's exponent clamped at the input format's emin
};

// Factors under one spec, whose input format lies within fp32 (every value of it is a float).
class FusedFactorConversion {
 public:
  explicit FusedFactorConversion(const FusedAddSpec& spec)
      : spec_(spec),
        as_is_(spec.input == fp::fp64() || spec.input == fp::fp32()),
        tf32_rz_(spec.input == fp::tf32() && spec.input_mode == fp::Mode::rz),
        bf16_rne_(spec.input == fp::bf16() && spec.input_mode == fp::Mode::rne),
        emin_(spec.input.emin()) {}

  FusedFactor operator()(float v) const {
    // The two conversions training's tensor-core profiles use, on the bit pattern; the others
    // through the scalar step's own conversion.
    const float x = as_is_      ? v
                    : tf32_rz_  ? fp32_to_tf32_rz(v)
                    : bf16_rne_ ? fp32_to_bf16_rne(v)
                                : static_cast<float>(fp::round_double(v, spec_.input, {spec_.input_mode}).value);
    if (x == 0) return {x, FusedFactor::Kind::zero, 0};
    if (!std::isfinite(x)) return {x, FusedFactor::Kind::special, 0};
    return {x, FusedFactor::Kind::finite, std::max(std::ilogb(x), emin_)};
  }

 private:
  const FusedAddSpec& spec_;
  bool as_is_, tf32_rz_, bf16_rne_;
  int emin_;
};

}  // namespace fplab::sim::detail
