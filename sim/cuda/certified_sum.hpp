// The exact sum of fp32 values or products rounded once to fp32, to nearest even, the fast way
// where it can be certified: for the `exact` profile on the GPU (gpu_exact.cu), which takes
// long_accumulator.hpp's fixed-point sum only for the sums this cannot certify.
//
// Every term (a product of two fp32 values is exact in a double) goes into a cascade of error-free
// additions (TwoSum): s the running double sum, each addition's rounding error q exact. The exact
// sum is s + (the sum of the q); c sums the q in doubles, and Q their magnitudes. The error of c
// against the q's exact sum is below gamma_n Q_exact <= 2 n u Q (n the additions, u = 2^-53, for
// n u < 1/4: Q itself rounded), so the exact sum lies within that of s + c. Where every value of
// that interval (widened by the rounding of s + c and of its ends) rounds to the same fp32 value,
// with the same sign, that value is the exact sum's rounding. It is not certified (false) where the
// interval holds a rounding boundary (a sum on or within about n^2 2^-106 of its terms' magnitude
// from an fp32 midpoint, or an exact zero's neighbourhood without every addition exact) or the
// terms an infinity or a NaN. A sum whose every addition was exact is its exact value: a zero
// there takes the terms' sign rule (-0 where every term had a negative sign). Per term: one
// product, eight double additions. Compiled for the device in gpu_exact.cu and for the host in
// tests/test_long_accumulator.cpp, which holds every certified result to the long accumulator's
// and the error bound to MPFR's exact sum.
#pragma once

#include <cmath>
#include <cstdint>

#include "sim/cuda/fused_step.hpp"

namespace fplab::sim::gpu {

class CertifiedSum {
 public:
  // a b for fp32 values a and b, given as floats or already held in doubles (a tiled kernel stages
  // them so): the product is exact in a double.
  FPLAB_HOST_DEVICE void add_product(double a, double b) { add_term(a * b); }
  FPLAB_HOST_DEVICE void add_product(float a, float b) { add_product(static_cast<double>(a), static_cast<double>(b)); }
  FPLAB_HOST_DEVICE void add_value(float x) { add_term(static_cast<double>(x)); }

  // value += other's value (the parts of a sum taken in pieces of its terms).
  FPLAB_HOST_DEVICE void merge(const CertifiedSum& other) {
    add(other.sum_);
    add(other.errors_);
    errors_magnitude_ += other.errors_magnitude_;
    additions_ += other.additions_;
    positive_sign_ = positive_sign_ || other.positive_sign_;
  }

  // The exact sum rounded to fp32 (to nearest even) into *out, where certain (true).
  FPLAB_HOST_DEVICE bool rounded_to_fp32(float* out) const {
    if (errors_magnitude_ == 0) {  // every addition exact: the sum is sum_ itself
      // an exact zero: -0 where every term had a negative sign
      *out = sum_ != 0 ? static_cast<float>(sum_) : positive_sign_ || additions_ == 0 ? 0.0f : -0.0f;
      return true;
    }
    const double t = estimate(), bound = error_bound();
    if (!std::isfinite(t) || !std::isfinite(bound)) return false;
    // one step outward from each rounded end covers its rounding
    const double low = std::nextafter(t - bound, -HUGE_VAL), high = std::nextafter(t + bound, HUGE_VAL);
    const float low_rounded = static_cast<float>(low), high_rounded = static_cast<float>(high);
    if (fused_step_detail::bits_of(low_rounded) != fused_step_detail::bits_of(high_rounded)) return false;
    *out = low_rounded;
    return true;
  }

  // The sum in a double, and a bound on its distance from the exact sum (tests hold it to MPFR's).
  FPLAB_HOST_DEVICE double estimate() const { return sum_ + errors_; }
  FPLAB_HOST_DEVICE double error_bound() const {
    // 2 n u Q for the sum of the errors, twice for the roundings of this bound; the rounding of the
    // estimate.
    return 4.0 * static_cast<double>(additions_) * 0x1p-53 * errors_magnitude_ + 0x1p-52 * std::fabs(estimate());
  }

 private:
  FPLAB_HOST_DEVICE void add_term(double x) {
    positive_sign_ = positive_sign_ || !std::signbit(x);
    add(x);
  }

  FPLAB_HOST_DEVICE void add(double x) {
    const double s = sum_ + x, x_part = s - sum_;
    const double error = (sum_ - (s - x_part)) + (x - x_part);  // TwoSum: sum_ + x = s + error exactly
    sum_ = s;
    errors_ += error;
    errors_magnitude_ += std::fabs(error);
    ++additions_;
  }

  double sum_ = 0, errors_ = 0, errors_magnitude_ = 0;
  int64_t additions_ = 0;
  bool positive_sign_ = false;  // a term (zero or not) of positive sign
};

}  // namespace fplab::sim::gpu
