#include "apps/judge.hpp"

#include <cmath>

namespace fplab::app {

Judge::Judge(std::span<const double> terms, const fp::Format& format, fp::Mode mode) {
  for (double t : terms) {
    exact_.add(t);
    sum_of_magnitudes_ += std::fabs(t);
  }
  exact_rounded_ = exact_.round(format, {mode == fp::Mode::sr ? fp::Mode::rne : mode}).value;
  ulp_ = std::isfinite(exact_rounded_) ? format.ulp(exact_rounded_) : NAN;
}

double Judge::error(double value) const {
  fp::SuperAccumulator difference = exact_;
  difference.add(-value);
  return 0.0 - difference.round(fp::fp64(), {}).value;  // 0 - x: an exact result prints as +0
}

double unit_roundoff(const fp::Format& format, fp::Mode mode) {
  const bool nearest = mode == fp::Mode::rne || mode == fp::Mode::rna;
  return std::ldexp(1.0, nearest ? -format.man_bits - 1 : -format.man_bits);
}

double error_bound(size_t depth, double u, double sum_of_magnitudes) {
  const double ku = static_cast<double>(depth) * u;
  return ku < 1 ? ku / (1 - ku) * sum_of_magnitudes : INFINITY;
}

}  // namespace fplab::app
