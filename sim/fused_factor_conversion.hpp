// A GEMM's fp32 factor as a fused step sees it: converted to the step's input format and given its
// reference exponent (sim/tensor_core.hpp, step 2). The tile forms of the fused step
// (sim/tensor_core_lanes.cpp, sim/fused_grid.cpp) work this out once per factor, not per product.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
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

  // Many factors: values[i] and codes[i] (the exponent, or zero_code / special_code) of in[i], as
  // operator() gives them. Branch-free over the values the bit pattern rounds (GCC vectorises it),
  // then operator() for the few others.
  void convert(const float* in, size_t count, float* values, int16_t* codes, int16_t zero_code,
               int16_t special_code) const {
    const auto to_code = [&](const FusedFactor& f) -> int16_t {
      return static_cast<int16_t>(f.kind == FusedFactor::Kind::zero      ? zero_code
                                  : f.kind == FusedFactor::Kind::special ? special_code
                                                                         : f.exponent);
    };
    if (as_is_) {
      // operator()'s codes without its branches (GCC vectorises it): a subnormal's exponent is
      // ilogb's, from the position of its highest set bit.
      const int32_t emin = emin_, zero = zero_code, special = special_code;
      for (size_t i = 0; i < count; ++i) {
        const uint32_t magnitude = std::bit_cast<uint32_t>(in[i]) & 0x7FFFFFFFu;
        const auto biased = static_cast<int32_t>(magnitude >> kFloatFractionBits);
        const int32_t subnormal = 31 - std::countl_zero(magnitude | 1u) - (kFloatBias - 1 + kFloatFractionBits);
        const int32_t exponent = biased != 0 ? biased - kFloatBias : subnormal;
        values[i] = in[i];
        codes[i] = static_cast<int16_t>(magnitude == 0 ? zero : biased == 0xFF ? special : std::max(exponent, emin));
      }
      return;
    }
    const uint32_t unit = uint32_t{1} << dropped_, kept = ~(unit - 1);
    const uint32_t half = spec_.input_mode == fp::Mode::rz ? 0 : unit / 2;
    const uint32_t below_half = spec_.input_mode == fp::Mode::rne ? 1 : 0;  // ties to even: half - 1, + 1 if odd
    const uint32_t odd = spec_.input_mode == fp::Mode::rne ? 1 : 0;
    const bool bit_pattern_mode =
        spec_.input_mode == fp::Mode::rz || spec_.input_mode == fp::Mode::rne || spec_.input_mode == fp::Mode::rna;
    const uint32_t low = smallest_normal_, span = largest_finite_ - smallest_normal_, shift = dropped_;
    const int32_t emin = emin_, zero = zero_code;
    uint32_t others = bit_pattern_mode ? 0 : 1;
    for (size_t i = 0; i < count; ++i) {
      const uint32_t u = std::bit_cast<uint32_t>(in[i]), magnitude = u & 0x7FFFFFFFu;
      const uint32_t on_pattern = magnitude - low <= span;
      const uint32_t rounded = (u + half - below_half + ((u >> shift) & odd)) & kept;
      const int32_t exponent = static_cast<int32_t>(rounded >> kFloatFractionBits & 0xFF) - kFloatBias;
      values[i] = std::bit_cast<float>(on_pattern ? rounded : u);
      codes[i] = static_cast<int16_t>(magnitude == 0 ? zero : exponent > emin ? exponent : emin);
      others |= (on_pattern ^ 1u) & (magnitude != 0);
    }
    if (others == 0) return;
    for (size_t i = 0; i < count; ++i) {
      const uint32_t magnitude = std::bit_cast<uint32_t>(in[i]) & 0x7FFFFFFFu;
      if (bit_pattern_mode && (magnitude == 0 || magnitude - smallest_normal_ <= largest_finite_ - smallest_normal_))
        continue;
      const FusedFactor f = (*this)(in[i]);
      values[i] = f.value, codes[i] = to_code(f);
    }
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
