#include "fp/exact_dot.hpp"

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>

#include "fp/superaccumulator.hpp"
#include "fp/ieee_bits.hpp"

namespace fplab::fp {
namespace {

// Products of finite fp32 values are normal doubles with biased exponents in [723, 1279]
// (2^-298 .. 2^256), or zeros. Buckets are indexed by the product's top 12 bits (sign and
// exponent), so positive and negative products never share a bucket and no negation is needed.
constexpr int kFirstExponent = 700, kLastExponent = 1300;
// Eight interleaved bucket sets: consecutive products land in different words even when their
// exponents agree, so the adds do not wait on each other through memory; the eight words of one
// exponent share a cache line.
constexpr int kLanes = 8;
// Significands of fp32 products have at most 48 bits (the low 5 of 53 are zero); 2^14 of them
// per bucket stay below 2^62.
constexpr size_t kPerLaneBeforeFlush = size_t{1} << 14;
constexpr size_t kChunk = 512;  // products decoded per vector pass

struct Buckets {
  std::array<uint64_t, 4096 * kLanes> word{};  // [sign|exponent][lane]
};

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

  thread_local Buckets buckets;  // all zero between calls
  auto& word = buckets.word;
  SuperAccumulator acc;
  alignas(64) uint32_t index[kChunk];
  alignas(64) uint64_t significand[kChunk];
  uint32_t low = binary64::kExponentMask, high = 0;  // range of product exponents since the last flush
  size_t i = 0;
  while (i < n) {
    const size_t flush_at = std::min(n, i + kLanes * kPerLaneBeforeFlush);
    while (i < flush_at) {
      const size_t len = std::min(kChunk, flush_at - i);
      // Vector pass: exact products and their bucket index and (shifted) significand.
      for (size_t k = 0; k < len; ++k) {
        const double p = static_cast<double>(a[i + k]) * static_cast<double>(b[i + k]);
        const uint64_t bits = std::bit_cast<uint64_t>(p);
        const auto exponent = static_cast<uint32_t>(binary64::biased_exponent(bits));
        low = std::min(low, exponent);
        high = std::max(high, exponent);
        index[k] = static_cast<uint32_t>(bits >> binary64::kFractionBits) * kLanes + static_cast<uint32_t>(k % kLanes);
        // The implicit bit is set for zero products too; they land in buckets that are never read.
        significand[k] = ((bits & binary64::kFractionMask) | binary64::kHiddenBit) >> 5;
      }
      // Scatter pass.
      for (size_t k = 0; k < len; ++k) word[index[k]] += significand[k];
      i += len;
    }
    // Bucket (s, e) holds sum(m) with |p| = m * 2^(e - 1075 + 5). Only the exponents seen since
    // the last flush can be nonzero (zero products, exponent 0, are cleared below).
    const int first = std::max<int>(kFirstExponent, static_cast<int>(low));
    const int last = std::min<int>(kLastExponent, static_cast<int>(high));
    low = binary64::kExponentMask;
    high = 0;
    for (int sign = 0; sign < 2; ++sign) {
      for (int e = first; e <= last; ++e) {
        uint64_t* lane = &word[(sign * 2048 + e) * kLanes];
        for (int l = 0; l < kLanes; ++l) {
          if (lane[l] == 0) continue;
          acc.add_scaled(sign == 1, lane[l], e - 1070);
          lane[l] = 0;
        }
      }
    }
    // Zero products (buckets 0 and 2048) carry only the implicit bit; clear them.
    std::fill_n(&word[0], kLanes, 0);
    std::fill_n(&word[2048 * kLanes], kLanes, 0);
  }
  ExactValue value = acc.value(mode);
  if (value.kind == ExactValue::Kind::zero) return slow_dot(a, b, n, mode);
  return value;
}

}  // namespace fplab::fp
