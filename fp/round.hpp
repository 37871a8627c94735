// Rounding an exact value to a format: the one place where fplab rounds.
#pragma once

#include <cstdint>

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

struct Rounded {
  double value = 0;   // the result as a host double (exact: every format value is one)
  uint64_t bits = 0;  // its bit pattern in the format
  bool inexact = false;
  bool overflow = false;   // the rounded magnitude exceeded the largest finite value
  bool underflow = false;  // inexact and below the smallest normal (after rounding), or flushed
};

// Rounds per IEEE 754 to the format's precision and exponent range, then applies the options:
// overflow is decided after rounding to an unbounded exponent range; overflow results depend on
// the direction of rounding (away from zero: inf, or NaN without infinities, or max with
// saturate; toward zero: max finite); round-to-odd overflows toward zero; subnormal results are
// flushed to zero when asked. NaN inputs give the canonical quiet NaN with the input's sign.
Rounded round_exact(const ExactValue& x, const Format& format, const RoundingOptions& options);

inline Rounded round_double(double x, const Format& format, const RoundingOptions& options) {
  return round_exact(ExactValue::from_double(x), format, options);
}

}  // namespace fplab::fp
