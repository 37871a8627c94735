// The bucket pass shared by the fast exact sums (exact_sum, exact_dot): the xsum "large
// accumulator" idea. Each finite term is sorted by its top 12 bits (sign and exponent) into an
// integer bucket that adds its significand with one integer add; the buckets move into a
// SuperAccumulator before any of them can overflow. Positive and negative terms never share a
// bucket, so no negation is needed, and no carry is propagated per term.
//
// An implementation detail of exact_sum and exact_dot, not an API of its own.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>

#include "fp/ieee_bits.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::fp::detail {

// Terms are doubles whose significands (with the hidden bit) fit in kSignificandBits: 53 for any
// double, 48 for a product of two floats (whose low 5 bits are zero, dropped here).
// kNormalOrZero: the caller promises no subnormal terms (true of products of floats), which
// allows a faster decoding pass.
template <int kSignificandBits, bool kNormalOrZero = false>
class ExponentBuckets {
  static_assert(kSignificandBits >= 1 && kSignificandBits <= 53);
  static constexpr int kDroppedBits = 53 - kSignificandBits;
  // Interleaved bucket sets: consecutive terms land in different words even when their
  // exponents agree, so the adds do not wait on each other through memory; the eight words of
  // one exponent share a cache line. (4 and 16 lanes measured no faster in bench_exact_sum.)
  static constexpr int kLanes = 8;
  // 2^(64 - bits) significands below 2^bits stay below 2^64 in one word.
  static constexpr size_t kPerLaneBeforeFlush = size_t{1} << (64 - kSignificandBits);
  static constexpr size_t kChunk = 512;  // terms decoded per vector pass

 public:
  // Adds the n doubles whose bit patterns term_bits(i) gives to acc, exactly, and returns true
  // if they were all finite. Otherwise acc holds garbage (the caller starts again term by term)
  // and the buckets are left clean.
  template <class TermBits>
  static bool add(SuperAccumulator& acc, size_t n, TermBits term_bits) {
    thread_local Storage storage;  // all zero between calls
    uint64_t* word = storage.word.data();
    // Without this GCC recomputes the thread-local address (a %fs load under -fPIC) on every
    // scatter; as an opaque register value it stays in one.
    asm("" : "+r"(word));
    alignas(64) uint32_t index[kChunk];
    alignas(64) uint64_t significand[kChunk];
    bool finite = true;
    size_t i = 0;
    while (i < n) {
      const size_t flush_at = std::min(n, i + kLanes * kPerLaneBeforeFlush);
      // Exponents seen since the last flush (32-bit for the kNormalOrZero pass).
      uint64_t low = binary64::kExponentMask, high = 0;
      uint32_t low32 = binary64::kExponentMask, high32 = 0;
      while (i < flush_at) {
        const size_t len = std::min(kChunk, flush_at - i);
        // Vector pass: bucket index and significand of every term. Two forms, each the fastest
        // measured for its terms with GCC 12 on AVX-512 (bench_exact_dot, bench_exact_sum):
        // forms mixing 32- and 64-bit lanes with a select for the hidden bit were not vectorised.
        if constexpr (kNormalOrZero) {
          // Zeros get a hidden bit too; their bucket (exponent 0) is cleared unread below.
          for (size_t k = 0; k < len; ++k) {
            const uint64_t bits = term_bits(i + k);
            const auto exponent = static_cast<uint32_t>(binary64::biased_exponent(bits));
            low32 = std::min(low32, exponent);
            high32 = std::max(high32, exponent);
            index[k] = static_cast<uint32_t>(bits >> binary64::kFractionBits) * kLanes + static_cast<uint32_t>(k % kLanes);
            significand[k] = ((bits & binary64::kFractionMask) | binary64::kHiddenBit) >> kDroppedBits;
          }
        } else {
          for (size_t k = 0; k < len; ++k) {
            const uint64_t bits = term_bits(i + k);
            const uint64_t top = bits >> binary64::kFractionBits;  // sign and exponent
            const uint64_t exponent = top & binary64::kExponentMask;
            low = exponent < low ? exponent : low;
            high = exponent > high ? exponent : high;
            index[k] = static_cast<uint32_t>(top * kLanes + (k % kLanes));
            // Subnormals and zeros (exponent 0) have no hidden bit: (e + 2047) >> 11 is 0 for
            // e = 0 and 1 for the others.
            const uint64_t hidden = ((exponent + binary64::kExponentMask) >> 11) << binary64::kFractionBits;
            significand[k] = ((bits & binary64::kFractionMask) | hidden) >> kDroppedBits;
          }
        }
        // Scatter pass.
        for (size_t k = 0; k < len; ++k) word[index[k]] += significand[k];
        i += len;
      }
      // Bucket (s, e) holds sum(m) with |x| = m * 2^(max(e, 1) - 1075 + dropped bits); only
      // the exponents seen since the last flush can be nonzero. The words of one exponent
      // (every lane, both signs) become one signed number and one accumulator update; summing their
      // 32-bit halves apart keeps every partial sum exact in 64 bits (and lets GCC vectorise).
      low = std::min<uint64_t>(low, low32);
      high = std::max<uint64_t>(high, high32);
      finite = finite && high != binary64::kExponentMask;
      for (uint64_t e = low; e <= high; ++e) {
        uint64_t* positive = &word[e * kLanes];
        uint64_t* negative = &word[(2048 + e) * kLanes];
        if (kNormalOrZero && e == 0) {  // zeros, counted with a hidden bit
          std::fill_n(positive, kLanes, 0);
          std::fill_n(negative, kLanes, 0);
          continue;
        }
        uint64_t positive_low = 0, positive_high = 0, negative_low = 0, negative_high = 0;
        for (int l = 0; l < kLanes; ++l) {
          positive_low += positive[l] & 0xffffffffu;
          positive_high += positive[l] >> 32;
          negative_low += negative[l] & 0xffffffffu;
          negative_high += negative[l] >> 32;
        }
        std::fill_n(positive, kLanes, 0);
        std::fill_n(negative, kLanes, 0);
        // Each half-sum is below 2^32 * kLanes, so their differences are exact in int64.
        const auto low_part = static_cast<int64_t>(positive_low - negative_low);
        const auto high_part = static_cast<int64_t>(positive_high - negative_high);
        const __int128 total = static_cast<__int128>(high_part) * (__int128{1} << 32) + low_part;
        if (total == 0) continue;
        const int scale = static_cast<int>(std::max<uint64_t>(e, 1)) - 1075 + kDroppedBits;
        const auto magnitude = static_cast<unsigned __int128>(total < 0 ? -total : total);
        acc.add_scaled(total < 0, magnitude, scale);
      }
    }
    return finite;
  }

 private:
  struct Storage {
    std::array<uint64_t, 4096 * kLanes> word{};  // [sign|exponent][lane]
  };
};

}  // namespace fplab::fp::detail
