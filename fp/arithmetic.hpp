// Correctly rounded elementary operations in any format and mode: a op b computed exactly,
// then rounded once. Operands are values of the host double type (every format value is one).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

// The exact sum a + b (exact for all doubles, also past the host's range). The sign of an
// exact zero follows IEEE 754 and so depends on the rounding mode.
ExactValue exact_sum(double a, double b, Mode mode);
// The exact product a * b (the 106-bit product, so exact over the whole double range).
ExactValue exact_product(double a, double b);

// The exact sum p + q of two doubles rounded once to fp32, to nearest even: their sum is first
// rounded to odd in binary64 (TwoSum tells whether and in which direction it was inexact), then to
// nearest in binary32; 53 >= 24 + 2 bits make the double rounding innocuous. An infinite or NaN
// sum is the IEEE one (TwoSum's error term would be NaN there). The host's binary64 arithmetic
// must round to nearest even, its conversion to float too.
inline float sum_rounded_to_fp32(double p, double q) {
  double s = p + q;
  if (!std::isfinite(s))
    return static_cast<float>(s);  // inf + finite, inf - inf, NaN (no double overflows: |p|, |q| < 2^257)
  const double z = s - p, error = (p - (s - z)) + (q - z);
  const auto bits = std::bit_cast<uint64_t>(s);
  if (error != 0 && (bits & 1) == 0) s = std::bit_cast<double>((error > 0) == (s > 0) ? bits + 1 : bits - 1);
  return static_cast<float>(s);
}

double add(double a, double b, const Format& format, const RoundingOptions& options);
double mul(double a, double b, const Format& format, const RoundingOptions& options);
// a * b + c with a single rounding.
double fma(double a, double b, double c, const Format& format, const RoundingOptions& options);

}  // namespace fplab::fp
