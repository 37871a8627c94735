// Correctly rounded elementary operations in any format and mode: a op b computed exactly,
// then rounded once. Operands are values of the host double type (every format value is one).
#pragma once

#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/ieee_bits.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

// The exact sum a + b (exact for all doubles, also past the host's range). The sign of an
// exact zero follows IEEE 754 and so depends on the rounding mode.
ExactValue exact_sum(double a, double b, Mode mode);
// The exact product a * b (the 106-bit product, so exact over the whole double range).
ExactValue exact_product(double a, double b);

// The exact sum p + q rounded to odd in binary64 (inexact results take the neighbour whose last
// bit is 1): TwoSum tells whether and in which direction the host's sum was inexact. Rounding that
// once more to a format of at most 51 bits, in any direction, rounds p + q correctly (53 >= p + 2).
// An infinite or NaN sum is the IEEE one (TwoSum's error term would be NaN there). The host's
// binary64 arithmetic must round to nearest even.
inline double sum_rounded_to_odd(double p, double q) {
  const double s = p + q, z = s - p, error = (p - (s - z)) + (q - z);
  // Without branches (add_each's loop vectorises): where the sum is finite, the error nonzero and
  // the last bit even, one unit toward the error (down in magnitude if their signs differ).
  const auto bits = std::bit_cast<uint64_t>(s), error_bits = std::bit_cast<uint64_t>(error);
  const uint64_t step = static_cast<uint64_t>((bits & binary64::kMagnitudeMask) < binary64::kInfinityBits) &
                        static_cast<uint64_t>((error_bits & binary64::kMagnitudeMask) != 0) & ~bits & 1;
  const uint64_t toward_zero = (error_bits ^ bits) >> 63;
  return std::bit_cast<double>(bits + step - 2 * (step & toward_zero));
}

// The exact sum p + q of two doubles rounded once to fp32, to nearest even, through
// sum_rounded_to_odd (no double overflows when |p|, |q| < 2^257).
inline float sum_rounded_to_fp32(double p, double q) { return static_cast<float>(sum_rounded_to_odd(p, q)); }

double add(double a, double b, const Format& format, const RoundingOptions& options);
// acc[i] = add(acc[i], x[i]) for i < n: the same results, many at a time (the fast path of
// narrow formats runs vectorised; the rest goes one by one). Stochastic rounding draws from
// streams[i] (which may be null in the other modes); options.stream is not used.
void add_each(double* acc, const double* x, size_t n, const Format& format, const RoundingOptions& options,
              CounterRng* streams);
double mul(double a, double b, const Format& format, const RoundingOptions& options);
// a * b + c with a single rounding.
double fma(double a, double b, double c, const Format& format, const RoundingOptions& options);

}  // namespace fplab::fp
