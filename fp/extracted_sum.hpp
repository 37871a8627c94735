// The exact sum's path for terms of a narrow range of exponents (fp/exact_sum.cpp): error-free
// extraction, after Rump, Ogita and Oishi's ExtractVector ("Accurate floating-point summation",
// 2008). For a chunk of at most 2^M - 1 terms p with |p| < 2^top and sigma = 2^(top + M):
//   q = (sigma + p) - sigma  is exact (Sterbenz: sigma + p rounds into [sigma/2, 2 sigma]) and a
//                            multiple of 2^-53 sigma (or of 2^-1074), |q| <= |p| + 2^-53 sigma;
//   r = p - q                is exact (the rounding error of sigma + p), |r| <= 2^-53 sigma;
// and every partial sum of the q's, in any order, is such a multiple below sigma in magnitude:
// exact in a double. So a chunk's exact sum is one double per level plus the remainders r, which
// the next level takes (41 bits lower a level, down to the subnormals' grid) until they are all
// zero. Four floating-point operations a term and level, in vector lanes, where the exponent
// buckets (fp/exponent_buckets.hpp) scatter each term to memory: on a Zen 3 core about half the
// bucket pass's time for normally distributed terms, less than a plain loop of additions
// (bench/RESULTS.md). Chunks whose exponents span too much for a few levels (or that reach
// 2^1012) go to the buckets instead.
//
// An implementation detail of exact_sum, not an API of its own.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "fp/exponent_buckets.hpp"
#include "fp/ieee_bits.hpp"
#include "fp/superaccumulator.hpp"

#ifdef __FAST_MATH__
#error "fp/extracted_sum.hpp: (sigma + p) - sigma must be computed as written (no -ffast-math)"
#endif

namespace fplab::fp::detail {

// kSignificandBits: of the terms as doubles (53 for doubles, 24 for floats), for the buckets.
template <int kSignificandBits>
class ExtractedSum {
  static constexpr size_t kChunk = 1024;
  static constexpr int kHeadroomBits = 11;  // a chunk's 1024 terms below 2^-11 sigma each sum below sigma
  static_assert(kChunk < (size_t{1} << kHeadroomBits));
  static constexpr int kLevelBits = 52 - kHeadroomBits;  // how much lower each level's sigma is
  static constexpr int kMaxLevels = 3;
  // Lanes of a level's sums, as wide as the target's vectors (GCC's vector types below): each
  // lane adds its own terms, so that the adds do not wait on each other.
#if defined(__AVX512F__)
  static constexpr int kLanes = 8;
#elif defined(__AVX__)
  static constexpr int kLanes = 4;
#else
  static constexpr int kLanes = 2;
#endif
  // Vectors a loop keeps apart: a vector add's latency is 3-4 cycles, so one running sum (or
  // maximum) would make each iteration wait for the last.
  static constexpr int kChains = 4;
  static_assert(kChunk % (kChains * 8) == 0);
  // Terms left to the buckets: runs of this many contiguous terms go there directly, shorter ones
  // are copied together first (each bucket pass has a fixed cost of a flush over its exponents).
  static constexpr size_t kStaged = 16384;
  static constexpr int kStreak = 4, kRecheck = 32;

  using Buckets = ExponentBuckets<kSignificandBits>;

 public:
  // Adds x[0], ..., x[n - 1] (double or float) to acc, exactly, and returns true if they were all
  // finite. Otherwise acc holds garbage (the caller starts again term by term).
  template <class T>
  static bool add(SuperAccumulator& acc, const T* x, size_t n) {
    std::array<double, kStaged>& staged = staged_terms();
    size_t staged_count = 0;
    size_t run_begin = 0, run_end = 0;  // the pending run of terms for the buckets
    bool finite = true;
    const auto stage_flush = [&] {
      const double* s = staged.data();
      finite = Buckets::add(acc, staged_count, [s](size_t i) { return std::bit_cast<uint64_t>(s[i]); }) && finite;
      staged_count = 0;
    };
    const auto stage = [&](const auto* from, size_t len) {  // len <= kStaged
      if (staged_count + len > kStaged) stage_flush();
      std::copy(from, from + len, staged.begin() + static_cast<std::ptrdiff_t>(staged_count));
      staged_count += len;
    };
    const auto run_flush = [&] {
      const size_t len = run_end - run_begin;
      const T* r = x + run_begin;
      if (len >= kStaged)
        finite = Buckets::add(acc, len, [r](size_t i) { return std::bit_cast<uint64_t>(static_cast<double>(r[i])); }) &&
                 finite;
      else
        stage(r, len);
      run_begin = run_end;
    };
    const auto to_buckets = [&](size_t i, size_t len) {
      if (run_end != i) run_flush(), run_begin = i;
      run_end = i + len;
    };
    alignas(64) double rest[2][kChunk];  // a level's remainders, the next level's into the other
    int bucket_streak = 0;               // chunks in a row that went to the buckets
    for (size_t i = 0; i < n; i += kChunk) {
      const size_t len = std::min(kChunk, n - i);
      // After a streak of chunks for the buckets the next ones go there unread, but for one in
      // kRecheck: widely spread terms then cost the bucket pass alone, not a read more of memory.
      if (bucket_streak >= kStreak && i / kChunk % kRecheck != 0) {
        to_buckets(i, len);
        continue;
      }
      const Magnitudes m = magnitudes(x + i, len);
      if (m.largest >> kHighFractionBits == binary64::kExponentMask) return false;  // inf or NaN
      int top = top_of(m.largest);
      // The smallest term's least significant place, for significands of kSignificandBits bits
      const int lowest_bit =
          static_cast<int>(std::max<uint32_t>(m.smallest >> kHighFractionBits, 1)) - 1075 + (53 - kSignificandBits);
      // A level's parts lie on the grid 2^(top + kHeadroomBits - 52) (half that for negative
      // terms), and each level's top is kLevelBits below the last (down to kLeastTop, whose grid
      // is the subnormals'): as many levels as bring that grid down to the smallest term's place
      // leave no remainder.
      const int levels = 1 + (std::max(0, top - lowest_bit + kHeadroomBits - 52) + kLevelBits - 1) / kLevelBits;
      if (top + kHeadroomBits > 1023 || levels > kMaxLevels) {  // sigma would overflow, or too many levels
        to_buckets(i, len);
        ++bucket_streak;
        continue;
      }
      bucket_streak = 0;
      // The next chunk is fetched while this one's levels run from L1: its first pass (magnitudes)
      // otherwise waited on memory for a third of the time.
      bool rest_left = false;
      acc.add(level(x + i, rest[0], len, sigma_of(top), rest_left, i + 2 * kChunk <= n ? x + i + kChunk : nullptr));
      int l = 1;
      for (; l < kMaxLevels && rest_left; ++l) {
        top = std::max(top + kHeadroomBits - 52, kLeastTop);  // |r| <= 2^-53 sigma
        acc.add(level(rest[(l - 1) % 2], rest[l % 2], len, sigma_of(top), rest_left));
      }
      // Beyond the estimate (subnormals below 2^-1042, which the exponent pass does not see): the
      // remainders, exact, to the buckets
      if (rest_left) stage(rest[(l - 1) % 2], len);
    }
    if (run_end != run_begin) run_flush();
    if (staged_count) stage_flush();
    return finite;
  }

 private:
  // Terms for the buckets, gathered: one buffer a thread for both term types.
  static std::array<double, kStaged>& staged_terms() {
    thread_local std::array<double, kStaged> staged;
    return staged;
  }

  // The largest term's magnitude and the smallest nonzero one's, by their high 32 bits (sign
  // cleared: exponent and 20 fraction bits; the smallest counts only terms whose high word is
  // nonzero, all ones if none): enough for the exponents, in 32-bit lanes whose unsigned minimum
  // and maximum are one instruction on AVX2 (64-bit ones are a compare and a blend).
  struct Magnitudes {
    uint32_t largest, smallest;
  };
  static constexpr int kHighFractionBits = binary64::kFractionBits - 32;
  // sigma at least 2^-1022: the grid around it is then 2^-1074 at its finest, every subnormal's
  // place, and a level with that sigma leaves no remainder.
  static constexpr int kLeastTop = -1022 - kHeadroomBits;

  // kLanes doubles, their bits as words and as 32-bit halves, in GCC's vector types: one register
  // of the target, where GCC would not vectorise the same loops written on scalars (it judged the
  // lane-wise form of the level loop unprofitable), and wider types' selects became scalar code.
  typedef double Doubles __attribute__((vector_size(kLanes * sizeof(double))));
  typedef int64_t Words __attribute__((vector_size(kLanes * sizeof(double))));
  typedef uint32_t Halves __attribute__((vector_size(kLanes * sizeof(double))));

  template <class T>
  static Doubles load(const T* p) {
    if constexpr (std::is_same_v<T, double>) {
      Doubles v;
      std::memcpy(&v, p, sizeof v);
      return v;
    } else {
      typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
      Floats v;
      std::memcpy(&v, p, sizeof v);
      return __builtin_convertvector(v, Doubles);
    }
  }

  static uint32_t high_magnitude(double v) {
    return static_cast<uint32_t>(std::bit_cast<uint64_t>(v) >> 32) & 0x7fffffffu;
  }

  template <class T>
  static Magnitudes magnitudes(const T* x, size_t len) {
    Halves high;  // the high halves' magnitude bits (little-endian: the odd halves)
    for (int h = 0; h < 2 * kLanes; ++h) high[h] = h % 2 ? 0x7fffffffu : 0u;
    Halves largest[kChains] = {}, smallest[kChains];
    for (auto& v : smallest) v = Halves{} + 0xffffffffu;
    size_t k = 0;
    for (; k + kChains * kLanes <= len; k += kChains * kLanes) {
#pragma GCC unroll 4
      for (int c = 0; c < kChains; ++c) {
        const Halves bits = reinterpret_cast<Halves>(load(x + k + c * kLanes)) & high;  // low halves: 0
        largest[c] = bits > largest[c] ? bits : largest[c];
        const Halves nonzero = bits | reinterpret_cast<Halves>(bits == 0);
        smallest[c] = nonzero < smallest[c] ? nonzero : smallest[c];
      }
    }
    uint32_t most = 0, least = 0xffffffffu;
    for (; k < len; ++k) {
      const uint32_t bits = high_magnitude(static_cast<double>(x[k]));
      most = std::max(most, bits);
      least = std::min(least, bits == 0 ? 0xffffffffu : bits);
    }
    for (int c = 0; c < kChains; ++c)
      for (int h = 0; h < 2 * kLanes; ++h)
        most = std::max(most, largest[c][h]), least = std::min(least, smallest[c][h]);
    return {most, least};
  }

  // The least top with |v| < 2^top for the high magnitude bits of a finite double (a subnormal's
  // from the width of its fraction; below 2^-1042 the high word is zero), at least kLeastTop.
  static int top_of(uint32_t high) {
    const auto field = static_cast<int>(high >> kHighFractionBits);
    const int top = field ? field - 1022 : static_cast<int>(std::bit_width(high)) + 32 - 1074;
    return std::max(top, kLeastTop);
  }
  static double sigma_of(int top) { return std::ldexp(1.0, top + kHeadroomBits); }

  // One level over in[0..len) (every |in[k]| below 2^-kHeadroomBits sigma): the exact sum of the
  // extracted parts, the remainders into out, whether any is nonzero into rest_left; `ahead`
  // (unless null): as many terms to fetch into the cache meanwhile.
  template <class T>
  static double level(const T* __restrict in, double* __restrict out, size_t len, double sigma, bool& rest_left,
                      const T* ahead = nullptr) {
    const Doubles sigmas = Doubles{} + sigma;
    Doubles sums[kChains] = {};
    Words nonzero = {};
    size_t k = 0;
    for (; k + kChains * kLanes <= len; k += kChains * kLanes) {
#pragma GCC unroll 4
      for (int c = 0; c < kChains; ++c) {
        if (ahead && (c * kLanes * sizeof(T)) % 64 == 0) __builtin_prefetch(ahead + k + c * kLanes);
        const Doubles p = load(in + k + c * kLanes);
        const Doubles q = (sigmas + p) - sigmas;
        const Doubles r = p - q;
        std::memcpy(out + k + c * kLanes, &r, sizeof r);
        sums[c] += q;
        nonzero |= r != 0.0;  // -0 (from a -0 term) counts as zero
      }
    }
    double total = 0.0;
    bool any = false;
    for (; k < len; ++k) {
      const auto p = static_cast<double>(in[k]);
      const double q = (sigma + p) - sigma;
      out[k] = p - q;
      total += q;
      any = any || out[k] != 0.0;
    }
    for (int c = 0; c < kChains; ++c)
      for (int l = 0; l < kLanes; ++l) total += sums[c][l];
    for (int l = 0; l < kLanes; ++l) any = any || nonzero[l] != 0;
    rest_left = any;
    return total;
  }
};

}  // namespace fplab::fp::detail
