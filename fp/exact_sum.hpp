// Fast exact sums of many doubles or floats, rounded once to any format.
//
// The terms are sorted into integer buckets by sign and exponent (fp/exponent_buckets.hpp), one
// integer add per term, so a long sum costs about as much as the plain ordered loop instead of
// a superaccumulator update per term. Values, zero signs and specials are exactly those of
// SuperAccumulator::add term by term.
#pragma once

#include <cstddef>
#include <span>

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/round.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

// Exact sum of x[0], x[step], ..., x[(n - 1) * step].
ExactValue exact_sum_of(const double* x, size_t n, size_t step, Mode mode = Mode::rne);
ExactValue exact_sum_of(const float* x, size_t n, size_t step, Mode mode = Mode::rne);

inline ExactValue exact_sum_of(std::span<const double> x, Mode mode = Mode::rne) {
  return exact_sum_of(x.data(), x.size(), 1, mode);
}

template <class T>
Rounded exact_sum_of(const T* x, size_t n, size_t step, const Format& format, const RoundingOptions& options) {
  return round_exact(exact_sum_of(x, n, step, options.mode), format, options);
}

inline Rounded exact_sum_of(std::span<const double> x, const Format& format, const RoundingOptions& options) {
  return exact_sum_of(x.data(), x.size(), 1, format, options);
}

}  // namespace fplab::fp
