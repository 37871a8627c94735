// Judging computed sums against the exact one: error, ulps, and the classical bound.
#pragma once

#include <span>

#include "fp/format.hpp"
#include "fp/rounding.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::app {

class Judge {
 public:
  // The exact sum of `terms`, and its value rounded once to `format` (nearest-even for sr).
  Judge(std::span<const double> terms, const fp::Format& format, fp::Mode mode);

  double exact_rounded() const { return exact_rounded_; }
  double sum_of_magnitudes() const { return sum_of_magnitudes_; }
  double error(double value) const;  // value - exact sum, rounded once to a double
  double ulps(double value) const { return error(value) / ulp_; }
  double ulp() const { return ulp_; }

 private:
  fp::SuperAccumulator exact_;
  double exact_rounded_ = 0, ulp_ = 0, sum_of_magnitudes_ = 0;
};

// Unit roundoff: half an ulp of 1 for nearest modes, a whole one otherwise.
double unit_roundoff(const fp::Format& format, fp::Mode mode);
// gamma(depth) * sum|x|: bounds the error of any summation in which no term passes through more
// than `depth` roundings (depth = n - 1 for recursive summation). inf when depth*u >= 1.
double error_bound(size_t depth, double unit_roundoff, double sum_of_magnitudes);

}  // namespace fplab::app
