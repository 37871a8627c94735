#include "fp/exact_dot.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>

#include "fp/superaccumulator.hpp"

namespace fplab::fp {
namespace {

// Products of finite fp32 values are normal doubles with biased exponents in [723, 1279]
// (2^-298 .. 2^256), or zeros; inf/NaN products have 0x7ff.
constexpr int kFirstExponent = 700, kLastExponent = 1300;
constexpr int kLanes = 4;  // independent bucket sets, so consecutive products never wait on each other
// Significands of fp32 products have at most 48 bits (the low 5 of 53 are zero); 2^14 of them
// per bucket stay below 2^62.
constexpr size_t kPerLaneBeforeFlush = size_t{1} << 14;

struct Buckets {
  std::array<std::array<int64_t, 2048>, kLanes> lane{};
};

ExactValue slow_dot(const float* a, const float* b, size_t n, Mode mode) {
  SuperAccumulator acc;
  for (size_t i = 0; i < n; ++i) acc.add_product(a[i], b[i]);
  return acc.value(mode);
}

}  // namespace

ExactValue exact_dot(const float* a, const float* b, size_t n, Mode mode) {
  thread_local Buckets buckets;  // zero between calls over [kFirstExponent, kLastExponent]
  SuperAccumulator acc;
  uint64_t special = 0, nonzero = 0;
  size_t i = 0;
  while (i < n) {
    const size_t end = std::min(n, i + kLanes * kPerLaneBeforeFlush);
    auto accumulate = [&](int lane, size_t k) {
      const double p = static_cast<double>(a[k]) * static_cast<double>(b[k]);
      const uint64_t bits = std::bit_cast<uint64_t>(p);
      const uint64_t exponent = (bits >> 52) & 0x7ff;
      const auto m = static_cast<int64_t>(((bits & 0xfffffffffffffull) | (uint64_t{exponent != 0} << 52)) >> 5);
      const int64_t sign = static_cast<int64_t>(bits) >> 63;  // 0 or -1
      buckets.lane[lane][exponent] += (m ^ sign) - sign;
      special |= (exponent + 1) >> 11;
      nonzero |= static_cast<uint64_t>(m);
    };
    for (; i + kLanes <= end; i += kLanes) {
      accumulate(0, i);
      accumulate(1, i + 1);
      accumulate(2, i + 2);
      accumulate(3, i + 3);
    }
    for (int lane = 0; i < end; ++i, ++lane) accumulate(lane, i);
    // Bucket e holds sum(m) with p = m * 2^(e - 1075 + 5).
    for (auto& lane : buckets.lane) {
      for (int e = kFirstExponent; e <= kLastExponent; ++e) {
        const int64_t v = lane[e];
        if (v == 0) continue;
        lane[e] = 0;
        const bool negative = v < 0;
        acc.add_scaled(negative, negative ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v), e - 1070);
      }
      lane[0] = lane[2047] = 0;
    }
  }
  // inf/NaN products, and the sign of a zero made only of zero products, follow IEEE rules
  // that the slow path states directly.
  if (special || nonzero == 0) return slow_dot(a, b, n, mode);
  ExactValue value = acc.value(mode);
  if (value.kind == ExactValue::Kind::zero) value.negative = mode == Mode::rd;
  return value;
}

}  // namespace fplab::fp
