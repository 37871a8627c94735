// Correctly rounded elementary operations in any format and mode: a op b computed exactly,
// then rounded once. Operands are values of the host double type (every format value is one).
#pragma once

#include "fp/exact_value.hpp"
#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

// The exact sum a + b (exact for all doubles, also past the host's range). The sign of an
// exact zero follows IEEE 754 and so depends on the rounding mode.
ExactValue exact_sum(double a, double b, Mode mode);
// The exact product a * b (the 106-bit product, so exact over the whole double range).
ExactValue exact_product(double a, double b);

double add(double a, double b, const Format& format, const RoundingOptions& options);
double mul(double a, double b, const Format& format, const RoundingOptions& options);
// a * b + c with a single rounding.
double fma(double a, double b, double c, const Format& format, const RoundingOptions& options);

}  // namespace fplab::fp
