#include "sim/narrow_chain_tile.hpp"

#include <algorithm>
#include <bit>
#include <cmath>

#include "fp/arithmetic.hpp"
#include "sim/engine.hpp"
#include "sim/float_lanes.hpp"

namespace fplab::sim::detail {

std::optional<NarrowChainSpec> narrow_chain_spec(const Arithmetic& ar) {
  const fp::Format& f = ar.format;
  const bool family = f.family == fp::Family::ieee || f.family == fp::Family::fn || f.family == fp::Family::finite;
  // A midpoint needs one bit more than the format's precision: at most fp32's 24.
  if (!family || f.man_bits > 22 || f.emin() < -126 || f.emax() > 127) return std::nullopt;
  if (ar.mode != fp::Mode::rne && ar.mode != fp::Mode::rna) return std::nullopt;
  if (ar.products == Products::exact) return std::nullopt;
  NarrowChainSpec spec;
  const uint32_t unit = uint32_t{1} << (23 - f.man_bits);
  spec.unit_half = unit >> 1;
  spec.keep = ~(unit - 1);
  spec.scale = std::ldexp(1.0f, -126 - f.emin());
  spec.unscale = std::ldexp(1.0f, 126 + f.emin());
  spec.threshold = std::bit_cast<uint32_t>(static_cast<float>(f.max_finite()) * spec.scale) + spec.unit_half;
  spec.flush = ar.flush_subnormals;
  // An IEEE format with fp32's exponent range overflows where fp32 does, to the infinity the cut
  // keeps (its bits carry into the exponent); anything else is checked.
  spec.check_range = !(f.family == fp::Family::ieee && f.emax() == 127 && !ar.saturate) || spec.flush;
  return spec;
}

namespace {

using L = FloatLanes;
using V = L::V;

constexpr size_t kRows = kGemmTileRows;
// Vectors of columns per pass: 4 rows of them are the independent chains in registers.
constexpr size_t kVectors = L::kWidth == 16 ? 4 : 2;

constexpr uint32_t kMagnitude = 0x7fffffffu, kLeastNormal = 0x00800000u;

// A result cut to the format, and the lanes whose cut cannot be trusted (`Flags`).
#if defined(__AVX512F__)
using Flags = __mmask16;
struct Cut {
  __m512i half, keep, low, threshold, magnitude, least_normal;
  explicit Cut(const NarrowChainSpec& s)
      : half(_mm512_set1_epi32(static_cast<int>(s.unit_half))),
        keep(_mm512_set1_epi32(static_cast<int>(s.keep))),
        low(_mm512_set1_epi32(static_cast<int>(~s.keep))),
        threshold(_mm512_set1_epi32(static_cast<int>(s.threshold))),
        magnitude(_mm512_set1_epi32(static_cast<int>(kMagnitude))),
        least_normal(_mm512_set1_epi32(static_cast<int>(kLeastNormal))) {}
  static Flags none() { return 0; }
  static bool lane(Flags f, size_t l) { return (f >> l) & 1u; }
  static bool any(Flags f) { return f != 0; }
  // Round half away from zero on the bits (a tie, the one case where rne differs, is flagged).
  template <bool kRange, bool kFlush>
  V operator()(V s, Flags& flags) const {
    const __m512i bits = _mm512_castps_si512(s), t = _mm512_add_epi32(bits, half);
    Flags f = _mm512_testn_epi32_mask(t, low);  // s a midpoint: its cut-off bits were exactly half
    if constexpr (kRange) {
      const __m512i mag = _mm512_and_si512(bits, magnitude);
      f = _kor_mask16(f, _mm512_cmpge_epu32_mask(mag, threshold));
      if constexpr (kFlush)
        f = _kor_mask16(f, _mm512_mask_cmplt_epu32_mask(_mm512_test_epi32_mask(mag, mag), mag, least_normal));
    }
    flags = _kor_mask16(flags, f);
    return _mm512_castsi512_ps(_mm512_and_si512(t, keep));
  }
};
#elif defined(__AVX2__) && defined(__FMA__)
using Flags = __m256i;
struct Cut {
  __m256i half, keep, low, threshold_less_one, magnitude, least_normal, zero;
  explicit Cut(const NarrowChainSpec& s)
      : half(_mm256_set1_epi32(static_cast<int>(s.unit_half))),
        keep(_mm256_set1_epi32(static_cast<int>(s.keep))),
        low(_mm256_set1_epi32(static_cast<int>(~s.keep))),
        threshold_less_one(_mm256_set1_epi32(static_cast<int>(s.threshold - 1))),
        magnitude(_mm256_set1_epi32(static_cast<int>(kMagnitude))),
        least_normal(_mm256_set1_epi32(static_cast<int>(kLeastNormal))),
        zero(_mm256_setzero_si256()) {}
  static Flags none() { return _mm256_setzero_si256(); }
  static bool lane(Flags f, size_t l) { return (_mm256_movemask_ps(_mm256_castsi256_ps(f)) >> l) & 1; }
  static bool any(Flags f) { return !_mm256_testz_si256(f, f); }
  template <bool kRange, bool kFlush>
  V operator()(V s, Flags& flags) const {
    const __m256i bits = _mm256_castps_si256(s), t = _mm256_add_epi32(bits, half);
    __m256i f = _mm256_cmpeq_epi32(_mm256_and_si256(t, low), zero);
    if constexpr (kRange) {
      // Magnitudes are below 2^31: signed comparisons order them.
      const __m256i mag = _mm256_and_si256(bits, magnitude);
      f = _mm256_or_si256(f, _mm256_cmpgt_epi32(mag, threshold_less_one));
      if constexpr (kFlush)
        f = _mm256_or_si256(f, _mm256_and_si256(_mm256_cmpgt_epi32(mag, zero), _mm256_cmpgt_epi32(least_normal, mag)));
    }
    flags = _mm256_or_si256(flags, f);
    return _mm256_castsi256_ps(_mm256_and_si256(t, keep));
  }
};
#else
using Flags = bool;
struct Cut {
  uint32_t half, keep, threshold;
  explicit Cut(const NarrowChainSpec& s) : half(s.unit_half), keep(s.keep), threshold(s.threshold) {}
  static Flags none() { return false; }
  static bool lane(Flags f, size_t) { return f; }
  static bool any(Flags f) { return f; }
  template <bool kRange, bool kFlush>
  V operator()(V s, Flags& flags) const {
    const uint32_t bits = std::bit_cast<uint32_t>(s), t = bits + half, mag = bits & kMagnitude;
    flags |= (t & ~keep) == 0;
    if constexpr (kRange) flags |= mag >= threshold || (kFlush && mag != 0 && mag < kLeastNormal);
    return std::bit_cast<float>(t & keep);
  }
};
#endif

// The format's rounding of s, an fp32 result of the exact one, moved to the scaled grid and back.
template <bool kScaled, bool kRange, bool kFlush>
inline V round_to_format(V s, const Cut& cut, V scale, V unscale, Flags& flags) {
  if constexpr (kScaled) return L::mul(cut.template operator()<kRange, kFlush>(L::mul(s, scale), flags), unscale);
  return cut.template operator()<kRange, kFlush>(s, flags);
}

// Steps per block: a block whose cuts some lane could not decide is redone for those lanes, an
// operation at a time, from the values saved at its start.
constexpr size_t kBlockSteps = 32;

// Steps [from, to) of one output's chain as the reference has it (from == 0: starting with the
// first product rounded), from `acc`; `a` the output's row of A, `b` its column of B.
double chain_steps(const Arithmetic& ar, const float* a, const float* b, size_t ldb, const GroupSpan& g, size_t from,
                   size_t to, double acc) {
  const fp::RoundingOptions options = ar.rounding(nullptr);
  for (size_t i = from; i < to; ++i) {
    const size_t kk = g.first + i * g.stride;
    if (i == 0) {
      acc = fp::mul(a[kk], b[kk * ldb], ar.format, options);
      continue;
    }
    const double term = ar.products == Products::fused ? double(a[kk]) * double(b[kk * ldb])
                                                       : fp::mul(a[kk], b[kk * ldb], ar.format, options);
    acc = fp::add(acc, term, ar.format, options);
  }
  return acc;
}

// The chains of a pass over kVectors vectors of columns of the tile's 4 rows (rows past mr repeat
// row 0 and are not stored).
template <bool kFused, bool kScaled, bool kRange, bool kFlush, class Columns>
void chain_pass(const Arithmetic& ar, const Cut& cut, V scale, V unscale, const float* const rows[kRows],
                const float* b, size_t ldb, const GroupSpan& g, const Columns& columns, size_t mr, float* out,
                size_t ldo) {
  constexpr size_t kWidth = L::kWidth;
  V acc[kRows][kVectors];
  V bk[kVectors];
  Flags flags[kVectors];
  alignas(64) float saved[kRows][kVectors][kWidth], now[kRows][kVectors][kWidth];
  const auto load_b = [&](size_t t) {
#pragma GCC unroll 4
    for (size_t v = 0; v < kVectors; ++v) bk[v] = columns.load_held(b + t * ldb, v);
  };
  for (size_t block = 0; block < g.count; block += kBlockSteps) {
    const size_t end = std::min(g.count, block + kBlockSteps);
#pragma GCC unroll 4
    for (size_t v = 0; v < kVectors; ++v) flags[v] = Cut::none();
    size_t i = block;
    if (block == 0) {  // the first product, rounded
      load_b(g.first);
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r) {
        const V x = L::broadcast(rows[r][g.first]);
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v)
          acc[r][v] = round_to_format<kScaled, kRange, kFlush>(L::mul(x, bk[v]), cut, scale, unscale, flags[v]);
      }
      ++i;
    } else {
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v) L::store(saved[r][v], acc[r][v]);
    }
    for (; i < end; ++i) {
      const size_t kk = g.first + i * g.stride;
      load_b(kk);
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r) {
        const V x = L::broadcast(rows[r][kk]);
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v) {
          V s;
          if constexpr (kFused) {
            s = L::fma(x, bk[v], acc[r][v]);
          } else {
            const V p = round_to_format<kScaled, kRange, kFlush>(L::mul(x, bk[v]), cut, scale, unscale, flags[v]);
            s = L::add(acc[r][v], p);
          }
          acc[r][v] = round_to_format<kScaled, kRange, kFlush>(s, cut, scale, unscale, flags[v]);
        }
      }
    }
    bool any = false;
    for (size_t v = 0; v < kVectors; ++v) any |= Cut::any(flags[v]);
    if (!any) continue;
      // Rare: redo the block for the lanes it flagged (every row), then carry on from there.
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v) L::store(now[r][v], acc[r][v]);
    for (size_t v = 0; v < kVectors; ++v)
      for (size_t l = 0; l < kWidth; ++l)
        if (Cut::lane(flags[v], l))
          for (size_t r = 0; r < mr; ++r)
            now[r][v][l] = static_cast<float>(
                chain_steps(ar, rows[r], b + v * kWidth + l, ldb, g, block, end, block == 0 ? 0.0 : saved[r][v][l]));
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v) acc[r][v] = L::load(now[r][v]);
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r)
    if (r < mr)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v) columns.store(out + r * ldo, v, acc[r][v]);
}

template <bool kFused, bool kScaled, bool kRange, bool kFlush>
void chain_tile(const Arithmetic& ar, const NarrowChainSpec& spec, const float* a, size_t lda, const float* b,
                size_t ldb, const GroupSpan& g, size_t mr, size_t nr, float* out, size_t ldo) {
  const Cut cut(spec);
  const V scale = L::broadcast(spec.scale), unscale = L::broadcast(spec.unscale);
  const float* rows[kRows];
  for (size_t r = 0; r < kRows; ++r) rows[r] = a + (r < mr ? r : 0) * lda;
  for_each_column_pass<kVectors>(nr, [&](size_t c0, const auto& columns) {
    chain_pass<kFused, kScaled, kRange, kFlush>(ar, cut, scale, unscale, rows, b + c0, ldb, g, columns, mr, out + c0,
                                                ldo);
  });
}

template <bool kFused, bool kScaled, bool kRange>
void chain_tile_flush(bool flush, const Arithmetic& ar, const NarrowChainSpec& spec, const float* a, size_t lda,
                      const float* b, size_t ldb, const GroupSpan& g, size_t mr, size_t nr, float* out, size_t ldo) {
  if (flush)
    chain_tile<kFused, kScaled, kRange, kRange>(ar, spec, a, lda, b, ldb, g, mr, nr, out, ldo);
  else
    chain_tile<kFused, kScaled, kRange, false>(ar, spec, a, lda, b, ldb, g, mr, nr, out, ldo);
}

template <bool kFused>
void chain_tile_forms(const Arithmetic& ar, const NarrowChainSpec& spec, const float* a, size_t lda, const float* b,
                      size_t ldb, const GroupSpan& g, size_t mr, size_t nr, float* out, size_t ldo) {
  if (spec.scaled())  // a format narrower than fp32's range has its range checked
    chain_tile_flush<kFused, true, true>(spec.flush, ar, spec, a, lda, b, ldb, g, mr, nr, out, ldo);
  else if (spec.check_range)
    chain_tile_flush<kFused, false, true>(spec.flush, ar, spec, a, lda, b, ldb, g, mr, nr, out, ldo);
  else
    chain_tile<kFused, false, false, false>(ar, spec, a, lda, b, ldb, g, mr, nr, out, ldo);
}

}  // namespace

void narrow_chain_tile(const Arithmetic& ar, const NarrowChainSpec& spec, const float* a, size_t lda, const float* b,
                       size_t ldb, const GroupSpan& group, size_t mr, size_t nr, float* out, size_t ldo) {
  if (group.count == 0) {  // the empty sum
    for (size_t r = 0; r < mr; ++r) std::fill_n(out + r * ldo, nr, 0.0f);
    return;
  }
  if (ar.products == Products::fused)
    chain_tile_forms<true>(ar, spec, a, lda, b, ldb, group, mr, nr, out, ldo);
  else
    chain_tile_forms<false>(ar, spec, a, lda, b, ldb, group, mr, nr, out, ldo);
}

}  // namespace fplab::sim::detail
