// Fast exact dot products of fp32 vectors, rounded once to any format.
//
// Each product of two floats is exact as a double (24 x 24 significand bits fit in 53). The
// fast path sorts products into integer buckets by their exponent (one int64 add per product,
// the xsum "large accumulator" idea specialised to the 48-bit significands of fp32 products)
// and moves the buckets into a SuperAccumulator before any of them can overflow.
#pragma once

#include <cstddef>

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/round.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

// Exact sum of a[i] * b[i]; inf/NaN handled per IEEE (inf * 0 is NaN).
ExactValue exact_dot(const float* a, const float* b, size_t n, Mode mode = Mode::rne);

inline Rounded exact_dot(const float* a, const float* b, size_t n, const Format& format,
                         const RoundingOptions& options) {
  return round_exact(exact_dot(a, b, n, options.mode), format, options);
}

}  // namespace fplab::fp
