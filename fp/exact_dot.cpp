#include "fp/exact_dot.hpp"

#include "fp/exponent_buckets.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::fp {
namespace {

ExactValue slow_dot(const float* a, const float* b, size_t n, Mode mode) {
  SuperAccumulator acc;
  for (size_t i = 0; i < n; ++i) acc.add_product(a[i], b[i]);
  return acc.value(mode);
}

}  // namespace

ExactValue exact_dot(const float* a, const float* b, size_t n, Mode mode) {
  // inf/NaN inputs, and sums that cancel to exactly zero (whose sign depends on which products
  // were zeros), follow IEEE rules that the slow path states directly.
  SuperAccumulator acc;
  // Products of finite floats are exact doubles with at most 48 significand bits (24 x 24),
  // normal or zero.
  if (!detail::ExponentBuckets<48>::add_products(acc, a, b, n)) return slow_dot(a, b, n, mode);
  ExactValue value = acc.value(mode);
  if (value.kind == ExactValue::Kind::zero) return slow_dot(a, b, n, mode);
  return value;
}

}  // namespace fplab::fp
