// The bucket pass shared by the fast exact sums (exact_sum, exact_dot): the xsum "large
// accumulator" idea. Each finite term is sorted by its top 12 bits (sign and exponent) into an
// integer bucket that adds its significand with one integer add; before any of them can overflow,
// the buckets move into a 128-bit total per exponent, and the totals into a SuperAccumulator once
// at the end. Positive and negative terms never share a bucket, so no negation is needed, and no
// carry is propagated per term.
//
// An implementation detail of exact_sum and exact_dot, not an API of its own.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <utility>

#include "fp/ieee_bits.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::fp::detail {

// Terms are doubles whose significands (with the hidden bit) fit in kSignificandBits: 53 for any
// double, 48 for a product of two floats (whose low 5 bits are zero, dropped here).
template <int kSignificandBits>
class ExponentBuckets {
  static_assert(kSignificandBits >= 1 && kSignificandBits <= 53);
  static constexpr int kDroppedBits = 53 - kSignificandBits;
  // Interleaved bucket sets: consecutive terms land in different words even when their
  // exponents agree, so the adds do not wait on each other through memory; the eight words of
  // one exponent share a cache line. (4 and 16 lanes measured no faster in bench_exact_sum.)
  static constexpr int kLanes = 8;
  // A period of 2^(63 - bits) significands per lane, each below 2^bits, adds less than 2^63 to
  // a word.
  static constexpr size_t kPerLanePerPeriod = size_t{1} << (63 - kSignificandBits);
  static constexpr size_t kChunk = 512;  // terms decoded per vector pass
  static_assert(kChunk % kLanes == 0);
  // Where a term's bucket index (sign and exponent times kLanes: 15 bits) and its significand fit
  // one 64-bit entry (index above bit kIndexShift), the scatter reads one entry a term instead of
  // two: a load fewer per term, on a loop bound by its loads.
  static constexpr int kIndexShift = 48;
  static constexpr uint64_t kSignificandMask = (uint64_t{1} << kIndexShift) - 1;

  // What a decoding pass saw since the last flush: the biased exponents [low, high] hold every
  // nonzero term, special is set if some term was inf or NaN, and zeros_counted if zeros were
  // counted with a hidden bit (in the buckets of exponent 0, to be cleared unread).
  struct Seen {
    uint64_t low = binary64::kExponentMask, high = 0;
    bool special = false;
    bool zeros_counted = false;
  };

 public:
  // Adds the n doubles whose bit patterns term_bits(i) gives to acc, exactly, and returns true
  // if they were all finite. Otherwise acc holds garbage (the caller starts again term by term)
  // and the buckets are left clean.
  template <class TermBits>
  static bool add(SuperAccumulator& acc, size_t n, TermBits term_bits) {
    return run(acc, n, [term_bits](size_t i, size_t len, uint64_t* index, uint64_t* significand, Seen& seen) {
      // Signed: AVX2 compares only signed 64-bit lanes, and an unsigned minimum's extra bias
      // lengthens the chain through the loop.
      auto low = static_cast<int64_t>(seen.low), high = static_cast<int64_t>(seen.high);
      for (size_t k = 0; k < len; ++k) {
        const uint64_t bits = term_bits(i + k);
        const uint64_t top = bits >> binary64::kFractionBits;  // sign and exponent
        const uint64_t exponent = top & binary64::kExponentMask;
        low = std::min(low, static_cast<int64_t>(exponent));
        high = std::max(high, static_cast<int64_t>(exponent));
        index[k] = top * kLanes;
        // Subnormals and zeros (exponent 0) have no hidden bit: (e + 2047) >> 11 is 0 for
        // e = 0 and 1 for the others.
        const uint64_t hidden = ((exponent + binary64::kExponentMask) >> 11) << binary64::kFractionBits;
        significand[k] = ((bits & binary64::kFractionMask) | hidden) >> kDroppedBits;
      }
      seen.low = low;
      seen.high = high;
      seen.special = high == binary64::kExponentMask;
    });
  }

  // Adds a[i] * b[i] for i < n (each product exact as a double) to acc, exactly, and returns
  // true if every a[i] and b[i] was finite; otherwise as add().
  static bool add_products(SuperAccumulator& acc, const float* a, const float* b,
                           size_t n) requires(kSignificandBits == 48) {
    return run<true>(acc, n, [a, b](size_t i, size_t len, uint64_t* entry, uint64_t*, Seen& seen) {
      // The products' exponents are bounded through the floats' exponent fields, 32-bit lanes
      // read as they are, which also show inf and NaN: bounding the products' own would take
      // 64-bit minima, which AVX2 forms only through compares and blends that share the vector
      // ports with the float-to-double conversions (as narrowing 64-bit lanes to 32 does, hence
      // 64-bit indices).
      uint32_t a_low = binary32::kExponentMask, a_high = 0, b_low = binary32::kExponentMask, b_high = 0;
      for (size_t k = 0; k < len; ++k) {
        const auto a_exponent = static_cast<uint32_t>(binary32::biased_exponent(std::bit_cast<uint32_t>(a[i + k])));
        const auto b_exponent = static_cast<uint32_t>(binary32::biased_exponent(std::bit_cast<uint32_t>(b[i + k])));
        a_low = std::min(a_low, a_exponent);
        a_high = std::max(a_high, a_exponent);
        b_low = std::min(b_low, b_exponent);
        b_high = std::max(b_high, b_exponent);
        const auto bits = std::bit_cast<uint64_t>(static_cast<double>(a[i + k]) * static_cast<double>(b[i + k]));
        // Zeros get a hidden bit too; their bucket (exponent 0) is cleared unread at the end of
        // every period. Specials land in the buckets of exponent 2047, which the flush clears.
        const uint64_t index = (bits >> binary64::kFractionBits) * kLanes;
        const uint64_t significand = ((bits & binary64::kFractionMask) | binary64::kHiddenBit) >> kDroppedBits;
        entry[k] = index << kIndexShift | significand;
      }
      seen.zeros_counted = true;
      seen.special = seen.special || a_high == binary32::kExponentMask || b_high == binary32::kExponentMask;
      // A float is m * 2^(max(e, 1) - 150) with 1 <= m < 2^24, so a nonzero product has the biased
      // double exponent max(ea, 1) + max(eb, 1) + 723 + floor(log2(ma * mb)), at least
      // ea + eb + 723 and at most ea + eb + 2 + 723 + 47; at least ea + eb + 769 if both are normal.
      const uint32_t slack = a_low == 0 || b_low == 0 ? 0 : 2 * (binary32::kFractionBits + 1) - 2;
      seen.low = std::min<uint64_t>(seen.low, a_low + b_low + 723 + slack);
      seen.high = seen.special ? binary64::kExponentMask : std::max<uint64_t>(seen.high, a_high + b_high + 772);
    });
  }

 private:
  // The chunked passes: decode(i, len, index, significand, seen) fills bucket indices (without
  // the lane) and significands of terms i .. i + len - 1 (kPacked: both in one entry, into
  // index) and widens seen; the scatter adds them.
  template <bool kPacked = false, class Decode>
  static bool run(SuperAccumulator& acc, size_t n, Decode decode) {
    static_assert(!kPacked || kSignificandBits <= kIndexShift, "a significand below the packed index");
    Storage& storage = thread_storage();
    uint64_t* word = storage.word.data();
    // Without this GCC recomputes the thread-local address (a %fs load under -fPIC) on every
    // scatter; as an opaque register value it stays in one.
    asm("" : "+r"(word));
    alignas(64) uint64_t index[kChunk];
    alignas(64) uint64_t significand[kChunk];
    Seen all;   // every exponent flushed into the totals
    Seen seen;  // since the last flush
    size_t i = 0;
    while (i < n) {
      const size_t period_end = std::min(n, i + kLanes * kPerLanePerPeriod);
      while (i < period_end) {
        const size_t len = std::min(kChunk, period_end - i);
        decode(i, len, index, significand, seen);
        // Term k goes to lane k % kLanes: unrolled, the lane is an address displacement.
        size_t k = 0;
        if constexpr (kPacked) {
          const auto add = [word](uint64_t entry, size_t lane) {
            word[(entry >> kIndexShift) + lane] += entry & kSignificandMask;
          };
          for (; k + kLanes <= len; k += kLanes) {
            for (int l = 0; l < kLanes; ++l) add(index[k + l], l);
          }
          for (; k < len; ++k) add(index[k], k % kLanes);
        } else {
          for (; k + kLanes <= len; k += kLanes) {
            for (int l = 0; l < kLanes; ++l) word[index[k + l] + l] += significand[k + l];
          }
          for (; k < len; ++k) word[index[k] + k % kLanes] += significand[k];
        }
        i += len;
      }
      if (seen.zeros_counted) clear(word, 0);
      // A period adds less than 2^63 to a word: the words take another one while all are below
      // 2^63. Checking that costs a vector OR per cache line; a flush, a few dozen instructions per
      // exponent, which made sums of widely spread exponents flush-bound when it came every period.
      if (i < n && all_below_half(word, seen)) continue;
      flush(word, storage.total.data(), seen);
      all.low = std::min(all.low, seen.low);
      all.high = std::max(all.high, seen.high);
      all.special = all.special || seen.special;
      seen = Seen{};
    }
    // Bucket (s, e) holds sum(m) with |x| = m * 2^(max(e, 1) - 1075 + dropped bits).
    for (uint64_t e = all.low; e <= all.high; ++e) {
      const __int128 total = std::exchange(storage.total[e], 0);
      if (total == 0) continue;
      const int scale = static_cast<int>(std::max<uint64_t>(e, 1)) - 1075 + kDroppedBits;
      acc.add_scaled(total < 0, static_cast<unsigned __int128>(total < 0 ? -total : total), scale);
    }
    return !all.special;
  }

  static void clear(uint64_t* word, uint64_t e) {
    std::fill_n(&word[e * kLanes], kLanes, 0);
    std::fill_n(&word[(2048 + e) * kLanes], kLanes, 0);
  }

  static bool all_below_half(const uint64_t* word, const Seen& seen) {
    uint64_t any = 0;
    for (uint64_t w = seen.low * kLanes; w < (seen.high + 1) * kLanes; ++w) any |= word[w] | word[2048 * kLanes + w];
    return any >> 63 == 0;
  }

  // Moves the words of every exponent seen (every lane, both signs) into that exponent's signed
  // total, whose sum at the end is one accumulator update per exponent instead of one per
  // exponent and flush, and clears them. Only the exponents seen can be nonzero, besides the
  // zeros of Seen::zeros_counted (cleared at every period's end).
  static void flush(uint64_t* word, __int128* total, const Seen& seen) {
    for (uint64_t e = std::max<uint64_t>(seen.low, seen.zeros_counted); e <= seen.high; ++e) {
      const uint64_t* positive = &word[e * kLanes];
      const uint64_t* negative = &word[(2048 + e) * kLanes];
      // Summing the words' 32-bit halves apart keeps every partial sum exact in 64 bits (and
      // lets GCC vectorise): each half-sum is below 2^32 * kLanes, so their differences are exact
      // in int64, and a flush adds less than 2^67 to a total, which 2^60 flushes cannot overflow.
      uint64_t positive_low = 0, positive_high = 0, negative_low = 0, negative_high = 0;
      for (int l = 0; l < kLanes; ++l) {
        positive_low += positive[l] & 0xffffffffu;
        positive_high += positive[l] >> 32;
        negative_low += negative[l] & 0xffffffffu;
        negative_high += negative[l] >> 32;
      }
      clear(word, e);
      const auto low_part = static_cast<int64_t>(positive_low - negative_low);
      const auto high_part = static_cast<int64_t>(positive_high - negative_high);
      total[e] += static_cast<__int128>(high_part) * (__int128{1} << 32) + low_part;
    }
  }

  struct Storage {
    std::array<uint64_t, 4096 * kLanes> word{};  // [sign|exponent][lane]
    std::array<__int128, 2048> total{};          // [exponent]: the flushed words' signed sum
  };
  // All zero between calls. One a thread for every pass of this width: declared in run(), a
  // template, each caller's decoding lambda had made another (288 KiB of every thread's storage).
  static Storage& thread_storage() {
    thread_local Storage storage;
    return storage;
  }
};

}  // namespace fplab::fp::detail
