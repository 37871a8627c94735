#include "fp/exact_dot.hpp"

#include <bit>
#include <cstdint>
#include <cstring>

#include "fp/exponent_buckets.hpp"
#include "fp/ieee_bits.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::fp {
namespace {

bool all_finite(const float* x, size_t n) {
  uint32_t special = 0;
  for (size_t i = 0; i < n; ++i) {
    uint32_t bits;
    std::memcpy(&bits, &x[i], 4);
    special |= static_cast<uint32_t>((bits & binary32::kInfinityBits) == binary32::kInfinityBits);
  }
  return special == 0;
}

ExactValue slow_dot(const float* a, const float* b, size_t n, Mode mode) {
  SuperAccumulator acc;
  for (size_t i = 0; i < n; ++i) acc.add_product(a[i], b[i]);
  return acc.value(mode);
}

}  // namespace

ExactValue exact_dot(const float* a, const float* b, size_t n, Mode mode) {
  // inf/NaN inputs, and sums that cancel to exactly zero (whose sign depends on which products
  // were zeros), follow IEEE rules that the slow path states directly.
  if (!all_finite(a, n) || !all_finite(b, n)) return slow_dot(a, b, n, mode);

  SuperAccumulator acc;
  // Products of finite floats are exact doubles with at most 48 significand bits (24 x 24),
  // normal or zero.
  detail::ExponentBuckets<48, true>::add(acc, n, [a, b](size_t i) {  // finite: checked above
    return std::bit_cast<uint64_t>(static_cast<double>(a[i]) * static_cast<double>(b[i]));
  });
  ExactValue value = acc.value(mode);
  if (value.kind == ExactValue::Kind::zero) return slow_dot(a, b, n, mode);
  return value;
}

}  // namespace fplab::fp
