#include "sim/narrow_chain_tile.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "fp/arithmetic.hpp"
#include "sim/engine.hpp"
#include "sim/float_lanes.hpp"
#include "sim/spare_buffers.hpp"
#include "sim/tile_walker.hpp"

namespace fplab::sim::detail {

std::optional<fp::Fp32Cut> narrow_chain_cut(const Arithmetic& ar) {
  if (ar.products == Products::exact) return std::nullopt;
  return fp::Fp32Cut::of(ar.format, ar.rounding(nullptr));
}

namespace {
std::atomic<NarrowChainGrid> chain_grid{NarrowChainGrid::host};
}

void set_narrow_chain_grid(NarrowChainGrid grid) { chain_grid.store(grid); }

// The host's choice: Intel cores take a microcode assist on every FMA or product with a subnormal
// operand or result (tens of times a normal step: bench/RESULTS.md, "subnormal assists"), which
// the scaled grid makes of every value below the format's least normal; AMD's Zen cores do not,
// and there the subnormal grid's extra operations make a step up to 2.5 times slower.
bool narrow_chains_take_subnormal_grid() {
  switch (chain_grid.load()) {
    case NarrowChainGrid::scaled:
      return false;
    case NarrowChainGrid::subnormal:
      return true;
    case NarrowChainGrid::host:
      break;
  }
#if defined(__x86_64__)
  static const bool intel = __builtin_cpu_is("intel");
  return intel;
#else
  return false;
#endif
}

namespace {

using L = FloatLanes;
using V = L::V;

constexpr size_t kRows = kGemmTileRows;
// Vectors of columns per pass: 4 rows of them are the independent chains in registers.
constexpr size_t kVectors = L::kWidth == 16 ? 4 : 2;

constexpr uint32_t kMagnitude = 0x7fffffffu, kLeastNormal = 0x00800000u, kOneHalf = 0x3f000000u;

// A format the cut scales (fp::Fp32Cut::scale) held in fp32's own scale instead
// (Scaling::subnormal_grid): its values from the least normal up are cut on their bits as in the
// scaled form (the same bits of the significand), those below rounded on the format's absolute
// grid, multiples of its least subnormal, as s / grid rounded to an integer. Its decision points
// there, odd multiples of half the grid, are fp32 numbers, so that fp32's rounding first loses
// nothing as before (fp/fp32_cut.hpp). Why: scaled, every value below the format's least normal
// is an fp32 subnormal, and Intel cores take a microcode assist on each FMA and product with one
// (bench/RESULTS.md, "subnormal assists"). `threshold` is the cut's in the scale the chains run
// in.
struct SubnormalGrid {
  uint32_t least_normal = 0, threshold = 0;  // bits
  float grid = 1, per_grid = 1;
  // Unscaled: a format the cut scales, without flushing, whose least subnormal is an fp32 normal
  // (every scaled one shipped or tested: fp16 2^-24, e4m3 2^-9, e5m2 2^-16, e6m9, e3m2fn,
  // e2m1fn), so that its reciprocal is finite.
  static bool applies(const fp::Fp32Cut& s) { return s.scaled() && !s.flush && 2 * s.half_grid >= 0x1p-126f; }
  // The cut's own-scale fields (Fp32Cut::own_*, half_grid), as the chains' Cut takes them.
  static SubnormalGrid of(const fp::Fp32Cut& s, bool unscaled) {
    SubnormalGrid g;
    g.threshold = unscaled ? s.own_threshold : s.threshold;
    if (!unscaled) return g;
    g.least_normal = s.own_least_normal;
    g.grid = 2 * s.half_grid;
    g.per_grid = 1.0f / g.grid;
    return g;
  }
};

// A result cut to the format, and what tells afterwards which lanes' cuts cannot be trusted: a
// Track per vector of columns, kept across a block's steps in vector registers (mask registers
// ORed every step made a serial chain of mask operations), read out as Flags at the block's end.
// Track: the least cut-off part seen (0 at a midpoint), the largest magnitude (past the
// threshold: overflow), the least magnitude less one (below the least normal: flushed, or on the
// subnormal grid a block whose trial on the bits alone failed; zero wraps around, so it never
// counts).
#if defined(__AVX512F__)
using Flags = __mmask16;
struct Track {
  __m512i low_min, magnitude_max, magnitude_min;
};
struct Cut {
  __m512i half, keep, magnitude, one, drop, last, least_normal, one_half;
  __m512 grid, per_grid;
  uint32_t threshold;
  bool ties_to_even;
  Cut(const fp::Fp32Cut& s, const SubnormalGrid& g)
      : half(_mm512_set1_epi32(static_cast<int>(s.unit_half))),
        keep(_mm512_set1_epi32(static_cast<int>(s.keep))),
        magnitude(_mm512_set1_epi32(static_cast<int>(kMagnitude))),
        one(_mm512_set1_epi32(1)),
        drop(_mm512_set1_epi32(static_cast<int>(~s.keep))),
        last(_mm512_set1_epi32(static_cast<int>(s.unit_half << 1))),
        least_normal(_mm512_set1_epi32(static_cast<int>(g.least_normal))),
        one_half(_mm512_set1_epi32(static_cast<int>(kOneHalf))),
        grid(_mm512_set1_ps(g.grid)),
        per_grid(_mm512_set1_ps(g.per_grid)),
        threshold(g.threshold),
        ties_to_even(s.ties_to_even != 0) {}
  static Track start() { return {_mm512_set1_epi32(-1), _mm512_setzero_si512(), _mm512_set1_epi32(-1)}; }
  Flags flags(const Track& t) const {
    return _kor_mask16(
        _kor_mask16(_mm512_cmpeq_epi32_mask(t.low_min, _mm512_setzero_si512()),
                    _mm512_cmpge_epu32_mask(t.magnitude_max, _mm512_set1_epi32(static_cast<int>(threshold)))),
        _mm512_cmplt_epu32_mask(t.magnitude_min, _mm512_set1_epi32(static_cast<int>(kLeastNormal - 1))));
  }
  static bool lane(Flags f, size_t l) { return (f >> l) & 1u; }
  static bool any(Flags f) { return f != 0; }
  // Whether a lane's track (Scaling::normal_part) saw a nonzero magnitude below the format's
  // least normal (on the subnormal grid's scale).
  bool below_least_normal(const Track& t) const {
    return _mm512_cmplt_epu32_mask(t.magnitude_min, _mm512_sub_epi32(least_normal, one)) != 0;
  }
  // Round half away from zero on the bits (a tie, the one case where rne differs, is flagged).
  template <bool kRange, bool kFlush>
  V operator()(V s, Track& track) const {
    const __m512i bits = _mm512_castps_si512(s), t = _mm512_add_epi32(bits, half);
    track.low_min = _mm512_min_epu32(track.low_min, _mm512_andnot_si512(keep, t));
    const __m512i mag = _mm512_and_si512(bits, magnitude);
    if constexpr (kRange) track.magnitude_max = _mm512_max_epu32(track.magnitude_max, mag);
    if constexpr (kFlush) track.magnitude_min = _mm512_min_epu32(track.magnitude_min, _mm512_sub_epi32(mag, one));
    return _mm512_castsi512_ps(_mm512_and_si512(t, keep));
  }
  // The same in fp32's own scale (Scaling::subnormal_grid): below the format's least normal,
  // s / grid rounded to an integer (to nearest even; a midpoint, flagged, is redone as any).
  template <bool kRange>
  V on_grids(V s, Track& track) const {
    const __m512i bits = _mm512_castps_si512(s), t = _mm512_add_epi32(bits, half);
    const __m512i mag = _mm512_and_si512(bits, magnitude);
    const __mmask16 below = _mm512_cmplt_epu32_mask(mag, least_normal);
    const __m512 y = _mm512_mul_ps(s, per_grid), r = _mm512_roundscale_ps(y, _MM_FROUND_TO_NEAREST_INT);
    // |y - r| ^ one_half as ternary logic 0x6A, (A & B) ^ C: zero at a midpoint
    const __m512i fraction =
        _mm512_ternarylogic_epi32(_mm512_castps_si512(_mm512_sub_ps(y, r)), magnitude, one_half, 0x6A);
    track.low_min =
        _mm512_min_epu32(track.low_min, _mm512_mask_blend_epi32(below, _mm512_andnot_si512(keep, t), fraction));
    if constexpr (kRange) track.magnitude_max = _mm512_max_epu32(track.magnitude_max, mag);
    return _mm512_mask_blend_ps(below, _mm512_castsi512_ps(_mm512_and_si512(t, keep)), _mm512_mul_ps(r, grid));
  }
  // The cut of an exact result (a sum of two values of the format): a midpoint is a tie, which
  // rna rounds away from zero as every other cut, rne toward zero where that neighbour is even.
  V at_ties(V s) const {
    const __m512i bits = _mm512_castps_si512(s), t = _mm512_add_epi32(bits, half);
    const __m512i away = _mm512_and_si512(t, keep);
    if (!ties_to_even) return _mm512_castsi512_ps(away);
    const __m512i down = _mm512_and_si512(bits, keep);
    const __mmask16 toward_zero = _kand_mask16(_mm512_testn_epi32_mask(t, drop), _mm512_testn_epi32_mask(down, last));
    return _mm512_castsi512_ps(_mm512_mask_blend_epi32(toward_zero, away, down));
  }
};
#elif defined(__AVX2__) && defined(__FMA__)
using Flags = __m256i;
struct Track {
  __m256i low_min, magnitude_max, magnitude_min;
};
struct Cut {
  __m256i half, keep, magnitude, one, last, least_normal, one_half;
  __m256 grid, per_grid;
  uint32_t threshold;
  bool ties_to_even;
  Cut(const fp::Fp32Cut& s, const SubnormalGrid& g)
      : half(_mm256_set1_epi32(static_cast<int>(s.unit_half))),
        keep(_mm256_set1_epi32(static_cast<int>(s.keep))),
        magnitude(_mm256_set1_epi32(static_cast<int>(kMagnitude))),
        one(_mm256_set1_epi32(1)),
        last(_mm256_set1_epi32(static_cast<int>(s.unit_half << 1))),
        least_normal(_mm256_set1_epi32(static_cast<int>(g.least_normal))),
        one_half(_mm256_set1_epi32(static_cast<int>(kOneHalf))),
        grid(_mm256_set1_ps(g.grid)),
        per_grid(_mm256_set1_ps(g.per_grid)),
        threshold(g.threshold),
        ties_to_even(s.ties_to_even != 0) {}
  static Track start() { return {_mm256_set1_epi32(-1), _mm256_setzero_si256(), _mm256_set1_epi32(-1)}; }
  // Unsigned x >= y as max(x, y) == x.
  static __m256i at_least(__m256i x, __m256i y) { return _mm256_cmpeq_epi32(_mm256_max_epu32(x, y), x); }
  Flags flags(const Track& t) const {
    const __m256i midpoint = _mm256_cmpeq_epi32(t.low_min, _mm256_setzero_si256());
    const __m256i overflow = at_least(t.magnitude_max, _mm256_set1_epi32(static_cast<int>(threshold)));
    const __m256i flushed = _mm256_xor_si256(
        at_least(t.magnitude_min, _mm256_set1_epi32(static_cast<int>(kLeastNormal - 1))), _mm256_set1_epi32(-1));
    return _mm256_or_si256(_mm256_or_si256(midpoint, overflow), flushed);
  }
  static bool lane(Flags f, size_t l) { return (_mm256_movemask_ps(_mm256_castsi256_ps(f)) >> l) & 1; }
  static bool any(Flags f) { return !_mm256_testz_si256(f, f); }
  bool below_least_normal(const Track& t) const {
    const __m256i floor = _mm256_sub_epi32(least_normal, one);
    return _mm256_movemask_ps(_mm256_castsi256_ps(at_least(t.magnitude_min, floor))) != 0xff;
  }
  template <bool kRange, bool kFlush>
  V operator()(V s, Track& track) const {
    const __m256i bits = _mm256_castps_si256(s), t = _mm256_add_epi32(bits, half);
    track.low_min = _mm256_min_epu32(track.low_min, _mm256_andnot_si256(keep, t));
    const __m256i mag = _mm256_and_si256(bits, magnitude);
    if constexpr (kRange) track.magnitude_max = _mm256_max_epu32(track.magnitude_max, mag);
    if constexpr (kFlush) track.magnitude_min = _mm256_min_epu32(track.magnitude_min, _mm256_sub_epi32(mag, one));
    return _mm256_castsi256_ps(_mm256_and_si256(t, keep));
  }
  template <bool kRange>
  V on_grids(V s, Track& track) const {
    const __m256i bits = _mm256_castps_si256(s), t = _mm256_add_epi32(bits, half);
    const __m256i mag = _mm256_and_si256(bits, magnitude);
    const __m256i below = _mm256_cmpgt_epi32(least_normal, mag);  // both below 2^31
    const __m256 y = _mm256_mul_ps(s, per_grid), r = _mm256_round_ps(y, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __m256i fraction =
        _mm256_xor_si256(_mm256_and_si256(_mm256_castps_si256(_mm256_sub_ps(y, r)), magnitude), one_half);
    track.low_min = _mm256_min_epu32(track.low_min, _mm256_blendv_epi8(_mm256_andnot_si256(keep, t), fraction, below));
    if constexpr (kRange) track.magnitude_max = _mm256_max_epu32(track.magnitude_max, mag);
    return _mm256_blendv_ps(_mm256_castsi256_ps(_mm256_and_si256(t, keep)), _mm256_mul_ps(r, grid),
                            _mm256_castsi256_ps(below));
  }
  V at_ties(V s) const {
    const __m256i bits = _mm256_castps_si256(s), t = _mm256_add_epi32(bits, half), zero = _mm256_setzero_si256();
    const __m256i away = _mm256_and_si256(t, keep);
    if (!ties_to_even) return _mm256_castsi256_ps(away);
    const __m256i down = _mm256_and_si256(bits, keep);
    const __m256i toward_zero = _mm256_and_si256(_mm256_cmpeq_epi32(_mm256_andnot_si256(keep, t), zero),
                                                 _mm256_cmpeq_epi32(_mm256_and_si256(down, last), zero));
    return _mm256_castsi256_ps(_mm256_blendv_epi8(away, down, toward_zero));
  }
};
#else
using Flags = bool;
struct Track {
  uint32_t low_min, magnitude_max, magnitude_min;
};
struct Cut {
  uint32_t half, keep, threshold, ties_to_even, least_normal;
  float grid, per_grid;
  Cut(const fp::Fp32Cut& s, const SubnormalGrid& g)
      : half(s.unit_half),
        keep(s.keep),
        threshold(g.threshold),
        ties_to_even(s.ties_to_even),
        least_normal(g.least_normal),
        grid(g.grid),
        per_grid(g.per_grid) {}
  static Track start() { return {~0u, 0, ~0u}; }
  Flags flags(const Track& t) const {
    return t.low_min == 0 || t.magnitude_max >= threshold || t.magnitude_min < kLeastNormal - 1;
  }
  static bool lane(Flags f, size_t) { return f; }
  static bool any(Flags f) { return f; }
  bool below_least_normal(const Track& t) const { return t.magnitude_min < least_normal - 1; }
  template <bool kRange, bool kFlush>
  V operator()(V s, Track& track) const {
    const uint32_t bits = std::bit_cast<uint32_t>(s), t = bits + half, mag = bits & kMagnitude;
    track.low_min = std::min(track.low_min, t & ~keep);
    if constexpr (kRange) track.magnitude_max = std::max(track.magnitude_max, mag);
    if constexpr (kFlush) track.magnitude_min = std::min(track.magnitude_min, mag - 1);
    return std::bit_cast<float>(t & keep);
  }
  template <bool kRange>
  V on_grids(V s, Track& track) const {
    const uint32_t bits = std::bit_cast<uint32_t>(s), t = bits + half, mag = bits & kMagnitude;
    if constexpr (kRange) track.magnitude_max = std::max(track.magnitude_max, mag);
    if (mag >= least_normal) {
      track.low_min = std::min(track.low_min, t & ~keep);
      return std::bit_cast<float>(t & keep);
    }
    const float y = s * per_grid, r = std::nearbyint(y);  // to nearest even: the host's default mode
    track.low_min = std::min(track.low_min, std::bit_cast<uint32_t>(std::fabs(y - r)) ^ kOneHalf);
    return r * grid;
  }
  V at_ties(V s) const {
    const uint32_t bits = std::bit_cast<uint32_t>(s), t = bits + half, down = bits & keep;
    const bool toward_zero = ties_to_even && (t & ~keep) == 0 && (down & (half << 1)) == 0;
    return std::bit_cast<float>(toward_zero ? down : t & keep);
  }
};
#endif

// Where a format narrower than fp32's range is moved to the scaled grid (fp::Fp32Cut::scale):
// none (fp32's own range), each result there and back (two multiplications a step), or the
// factors once for the GEMM, where that is exact (B's by the whole scale, or A's and B's by half
// of it each): the chains then run scaled, and only the outputs are scaled back. subnormal_grid:
// not moved, the values below the least normal rounded on the format's own grid (SubnormalGrid);
// normal_part: subnormal_grid's blocks tried as if no value fell below the least normal (the cut
// on the bits alone, half the operations), each value's magnitude tracked to tell afterwards.
enum class Scaling { none, results, factors, subnormal_grid, normal_part };

// The format's rounding of s, an fp32 result of the exact one (scaled where kScaling says; with
// normal_part, only where no value of the block falls below the least normal, which the Track
// tells).
template <Scaling kScaling, bool kRange, bool kFlush>
inline V round_to_format(V s, const Cut& cut, V scale, V unscale, Track& track) {
  if constexpr (kScaling == Scaling::results)
    return L::mul(cut.template operator()<kRange, kFlush>(L::mul(s, scale), track), unscale);
  if constexpr (kScaling == Scaling::subnormal_grid) return cut.template on_grids<kRange>(s, track);
  if constexpr (kScaling == Scaling::normal_part) return cut.template operator()<kRange, true>(s, track);
  return cut.template operator()<kRange, kFlush>(s, track);
}

// Steps per block: a block whose cuts some lane could not decide is redone for those lanes, an
// operation at a time, from the values saved at its start.
constexpr size_t kBlockSteps = 8;

// What a step of a chain does: the product added exactly (one rounding: products fused), or
// rounded first and added (rounded); `fold`: rounded first and added, both operands values of the
// format, where a sum on a midpoint is a tie (Fp32Cut::sum_of_values).
enum class Step { fused, rounded, fold };

// The K indices of a chain's steps: a group's, first + i·stride (GroupSpan), or a fold's list.
struct StridedTerms {
  GroupSpan g;
  size_t size() const { return g.count; }
  size_t operator[](size_t i) const { return g.first + i * g.stride; }
};
struct ListedTerms {
  const std::vector<size_t>& list;
  size_t size() const { return list.size(); }
  size_t operator[](size_t i) const { return list[i]; }
};

// Steps [from, to) of one output's chain as the reference has it (from == 0: starting with the
// first product rounded), from `acc`; `a` the output's row of A, `b` its column of B.
template <class Terms>
double chain_steps(const Arithmetic& ar, bool fused, const float* a, const float* b, size_t ldb, const Terms& terms,
                   size_t from, size_t to, double acc) {
  const fp::RoundingOptions options = ar.rounding(nullptr);
  for (size_t i = from; i < to; ++i) {
    const size_t kk = terms[i];
    if (i == 0) {
      acc = fp::mul(a[kk], b[kk * ldb], ar.format, options);
      continue;
    }
    const double term = fused ? double(a[kk]) * double(b[kk * ldb]) : fp::mul(a[kk], b[kk * ldb], ar.format, options);
    acc = fp::add(acc, term, ar.format, options);
  }
  return acc;
}

// The chains of a pass over kVectors vectors of columns of the tile's 4 rows (rows past mr repeat
// row 0 and are not stored). rows and b: the factors the vectors read (with Scaling::factors,
// their product scaled by the cut's scale); rows_redo and b_redo: A and B as given, for the
// redone steps.
template <Step kStep, Scaling kScaling, bool kRange, bool kFlush, class Terms, class Columns>
void chain_pass(const Arithmetic& ar, const Cut& cut, V scale, V unscale, const float* const rows[kRows],
                const float* const rows_redo[kRows], const float* b, const float* b_redo, size_t ldb,
                const Terms& terms, const Columns& columns, size_t mr, float* out, size_t ldo) {
  // Held values in the chains' own scale; the redone steps work on the values as given.
  constexpr bool kHeldScaled = kScaling == Scaling::factors;
  constexpr size_t kWidth = L::kWidth;
  const float cut_scale = L::first(scale), cut_unscale = L::first(unscale);
  V acc[kRows][kVectors]{};  // set by the first block (zeroed for the compiler, which cannot see that)
  V bk[kVectors];
  Track track[kVectors];
  alignas(64) float saved[kRows][kVectors][kWidth], now[kRows][kVectors][kWidth];
  const auto load_b = [&](size_t t) {
#pragma GCC unroll 4
    for (size_t v = 0; v < kVectors; ++v) bk[v] = columns.load_held(b + t * ldb, v);
  };
  const size_t count = terms.size();
  // The block's steps from the values held at its start (the first block: from its first
  // product, rounded), each result rounded as kHow says.
  const auto steps = [&]<Scaling kHow>(size_t block, size_t end) {
#pragma GCC unroll 4
    for (size_t v = 0; v < kVectors; ++v) track[v] = Cut::start();
    size_t i = block;
    if (block == 0) {  // the first product, rounded
      load_b(terms[0]);
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r) {
        const V x = L::broadcast(rows[r][terms[0]]);
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v)
          acc[r][v] = round_to_format<kHow, kRange, kFlush>(L::mul(x, bk[v]), cut, scale, unscale, track[v]);
      }
      ++i;
    }
    for (; i < end; ++i) {
      const size_t kk = terms[i];
      load_b(kk);
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r) {
        const V x = L::broadcast(rows[r][kk]);
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v) {
          if constexpr (kStep == Step::fused) {
            acc[r][v] =
                round_to_format<kHow, kRange, kFlush>(L::fma(x, bk[v], acc[r][v]), cut, scale, unscale, track[v]);
          } else {
            const V p = round_to_format<kHow, kRange, kFlush>(L::mul(x, bk[v]), cut, scale, unscale, track[v]);
            if constexpr (kStep == Step::fold)
              acc[r][v] = cut.at_ties(L::add(acc[r][v], p));  // in any scale (Fp32Cut::sum_of_values)
            else
              acc[r][v] = round_to_format<kHow, kRange, kFlush>(L::add(acc[r][v], p), cut, scale, unscale, track[v]);
          }
        }
      }
    }
  };
  // On the subnormal grid a block is first tried as Scaling::normal_part; where some value fell
  // below the format's least normal it is run again in full, and the next `wait` blocks go
  // straight to the full form (doubling after each miss, up to 16; reset by a hit).
  size_t wait = 0, backoff = 1;
  for (size_t block = 0; block < count; block += kBlockSteps) {
    const size_t end = std::min(count, block + kBlockSteps);
    if (block > 0)
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v) L::store(saved[r][v], acc[r][v]);
    if constexpr (kScaling == Scaling::subnormal_grid) {
      bool done = false;
      if (wait == 0) {
        steps.template operator()<Scaling::normal_part>(block, end);
        bool below = false;
        for (size_t v = 0; v < kVectors; ++v) below |= cut.below_least_normal(track[v]);
        done = !below;
        if (below) {
          if (block > 0)
#pragma GCC unroll 4
            for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
              for (size_t v = 0; v < kVectors; ++v) acc[r][v] = L::load(saved[r][v]);
          wait = backoff, backoff = std::min<size_t>(2 * backoff, 16);
        } else {
          backoff = 1;
        }
      } else {
        --wait;
      }
      if (!done) steps.template operator()<Scaling::subnormal_grid>(block, end);
    } else {
      steps.template operator()<kScaling>(block, end);
    }
    Flags flags[kVectors];
    bool any = false;
    for (size_t v = 0; v < kVectors; ++v) any |= Cut::any(flags[v] = cut.flags(track[v]));
    if (!any) continue;
      // Rare: redo the block for the lanes it flagged (every row), then carry on from there.
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v) L::store(now[r][v], acc[r][v]);
    for (size_t v = 0; v < kVectors; ++v)
      for (size_t l = 0; l < kWidth; ++l)
        if (Cut::lane(flags[v], l))
          for (size_t r = 0; r < mr; ++r) {
            const double from = block == 0 ? 0.0 : kHeldScaled ? saved[r][v][l] * cut_unscale : saved[r][v][l];
            const auto value = static_cast<float>(chain_steps(ar, kStep == Step::fused, rows_redo[r],
                                                              b_redo + v * kWidth + l, ldb, terms, block, end, from));
            now[r][v][l] = kHeldScaled ? value * cut_scale : value;  // exact: a value of the format
          }
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v) acc[r][v] = L::load(now[r][v]);
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r)
    if (r < mr)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v)
        columns.store(out + r * ldo, v, kHeldScaled ? L::mul(acc[r][v], unscale) : acc[r][v]);
}

// The scaled factors of Scaling::factors: B's (and A's where the scale is split between them);
// or, with subnormal_grid, none (Scaling::subnormal_grid).
struct ScaledFactors {
  const float* a = nullptr;
  const float* b = nullptr;
  bool subnormal_grid = false;
};

template <Step kStep, Scaling kScaling, bool kRange, bool kFlush, class Terms>
void chain_tile(const Arithmetic& ar, const fp::Fp32Cut& spec, const float* a, size_t lda, const float* b,
                ScaledFactors scaled, size_t ldb, const Terms& terms, size_t mr, size_t nr, float* out, size_t ldo) {
  const Cut cut(spec, SubnormalGrid::of(spec, kScaling == Scaling::subnormal_grid));
  const V scale = L::broadcast(spec.scale), unscale = L::broadcast(spec.unscale);
  const float* a_vectors = kScaling == Scaling::factors && scaled.a ? scaled.a : a;
  const float *rows[kRows], *rows_redo[kRows];
  for (size_t r = 0; r < kRows; ++r) {
    rows[r] = a_vectors + (r < mr ? r : 0) * lda;
    rows_redo[r] = a + (r < mr ? r : 0) * lda;
  }
  const float* b_vectors = kScaling == Scaling::factors ? scaled.b : b;
  for_each_column_pass<kVectors>(nr, [&](size_t c0, const auto& columns) {
    chain_pass<kStep, kScaling, kRange, kFlush>(ar, cut, scale, unscale, rows, rows_redo, b_vectors + c0, b + c0, ldb,
                                                terms, columns, mr, out + c0, ldo);
  });
}

// Step::fold: neither its products nor its sums are range-checked (the caller's bound holds them
// below the format's largest value), and its sums decide their ties.
template <Step kStep, Scaling kScaling, class Terms>
void chain_tile_range(const Arithmetic& ar, const fp::Fp32Cut& spec, const float* a, size_t lda, const float* b,
                      ScaledFactors scaled, size_t ldb, const Terms& terms, size_t mr, size_t nr, float* out,
                      size_t ldo) {
  if constexpr (kStep == Step::fold)
    chain_tile<kStep, kScaling, false, false>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
  else if (!spec.check_range)
    chain_tile<kStep, kScaling, false, false>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
  else if constexpr (kScaling == Scaling::subnormal_grid)  // never flushing (SubnormalGrid::applies)
    chain_tile<kStep, kScaling, true, false>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
  else if (spec.flush)
    chain_tile<kStep, kScaling, true, true>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
  else
    chain_tile<kStep, kScaling, true, false>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
}

template <Step kStep, class Terms>
void chain_tile_forms(const Arithmetic& ar, const fp::Fp32Cut& spec, const float* a, size_t lda, const float* b,
                      ScaledFactors scaled, size_t ldb, const Terms& terms, size_t mr, size_t nr, float* out,
                      size_t ldo) {
  if (scaled.subnormal_grid && SubnormalGrid::applies(spec))
    chain_tile_range<kStep, Scaling::subnormal_grid>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
  else if (spec.scaled() && scaled.b)
    chain_tile_range<kStep, Scaling::factors>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
  else if (spec.scaled())
    chain_tile_range<kStep, Scaling::results>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
  else
    chain_tile_range<kStep, Scaling::none>(ar, spec, a, lda, b, scaled, ldb, terms, mr, nr, out, ldo);
}

// Where every group of the first stage holds one product and one later stage adds the groups'
// rows in sequence (v100's weight gradients at batch 64: split(80):seq | all:atomic), each output
// is one chain over the products in that stage's order (Step::fold): the first product rounded,
// each next one rounded and added, a sum of two values of the format. It runs in registers as the
// chains do, without the rows of products in memory between the stages. `spec` with sums that
// cannot leave the range (nothing flushed) and land on ties (Fp32Cut::sums_of_values_land_on_ties);
// `terms` the products' indices in the fold's order, at least one.
void product_fold_tile(const Arithmetic& ar, const fp::Fp32Cut& spec, const float* a, size_t lda, const float* b,
                       size_t ldb, const std::vector<size_t>& terms, size_t mr, size_t nr, float* out, size_t ldo,
                       const float* b_scaled, const float* a_scaled, bool subnormal_grid) {
  const ScaledFactors scaled{b_scaled ? a_scaled : nullptr, b_scaled, subnormal_grid};
  chain_tile_forms<Step::fold>(ar, spec, a, lda, b, scaled, ldb, ListedTerms{terms}, mr, nr, out, ldo);
}

// Whether the schedule's later stages are one sequential fold of every group's row, and every
// group of the first stage holds one product (groups_of makes no empty group): product_fold_tile's
// case.
bool folds_single_products(const Schedule& schedule, const std::vector<GroupSpan>& groups) {
  using K = Reducer::Kind;
  if (schedule.stages.size() != 2) return false;
  if (groups.empty() || std::any_of(groups.begin(), groups.end(), [](const GroupSpan& g) { return g.count != 1; }))
    return false;
  const Stage& fold = schedule.stages[1];
  if (!fold.reduces() || fold.hold) return false;
  const K kind = fold.reducer.kind;
  if (kind != K::seq && kind != K::rev && kind != K::atomic && kind != K::ring) return false;
  const std::vector<GroupSpan> spans = groups_of(fold.grouping, groups.size());
  return spans.size() == 1 && spans[0].first == 0 && spans[0].stride == 1 && spans[0].count == groups.size();
}

// Whether every value is finite: one pass of integer operations without an early exit, which
// the compiler vectorises (std::isfinite it did not).
bool all_finite(const float* x, size_t count) {
  constexpr uint32_t kExponent = 0x7f800000u;
  uint32_t special = 0;
  for (size_t i = 0; i < count; ++i)
    special |= static_cast<uint32_t>((std::bit_cast<uint32_t>(x[i]) & kExponent) == kExponent);
  return special == 0;
}

// What one pass over A and one over B tell the chains of C = A B: whether A and B are finite,
// and a bound on every value a chain holds or computes (below).
struct ChainBounds {
  bool finite = false;
  float bound = 0;
};

// Rounded to nearest, a held value moves by at most twice what is added to it (a value of the
// format, the one held, lies that close to the sum), and a product rounded first is at most twice
// the exact one: every value of a chain over any of the terms t of output (i, j) stays below
// 2 sum_t |a[i][t]| max_j' |b[t][j']| (products fused) or 4 times it (rounded first), `bound` the
// largest of the sums. In float lanes the compiler vectorises; a non-finite factor of A makes its
// row's sum non-finite (B's maxima are finite), so A is looked at again only where a sum is not
// finite (a factor, or an overflowing sum).
ChainBounds chain_bounds(const float* a, const float* b, GemmShape shape) {
  const auto [m, n, k] = shape;
  constexpr size_t kLanes = 16;
  constexpr uint32_t kMagnitude = 0x7fffffffu, kInfinity = 0x7f800000u;
  // B's largest magnitude per row, as bits (their order is the magnitudes'; NaN's are above all)
  std::vector<float> b_max(k);
  uint32_t b_top = 0;
  for (size_t t = 0; t < k; ++t) {
    const float* row = b + t * n;
    uint32_t lanes[kLanes] = {};
    size_t j = 0;
    for (; j + kLanes <= n; j += kLanes)
      for (size_t l = 0; l < kLanes; ++l)
        lanes[l] = std::max(lanes[l], std::bit_cast<uint32_t>(row[j + l]) & kMagnitude);
    uint32_t top = 0;
    for (; j < n; ++j) top = std::max(top, std::bit_cast<uint32_t>(row[j]) & kMagnitude);
    for (const uint32_t x : lanes) top = std::max(top, x);
    b_max[t] = std::bit_cast<float>(top);
    b_top = std::max(b_top, top);
  }
  if (b_top >= kInfinity) return {};
  float bound = 0;
  uint32_t special = 0;
  for (size_t i = 0; i < m; ++i) {
    const float* row = a + i * k;
    float lanes[kLanes] = {};
    size_t t = 0;
    for (; t + kLanes <= k; t += kLanes)
      for (size_t l = 0; l < kLanes; ++l) lanes[l] += std::fabs(row[t + l]) * b_max[t + l];
    float sum = 0;
    for (; t < k; ++t) sum += std::fabs(row[t]) * b_max[t];
    for (const float x : lanes) sum += x;
    special |= static_cast<uint32_t>((std::bit_cast<uint32_t>(sum) & kInfinity) == kInfinity);
    bound = std::max(bound, sum);
  }
  if (special) return {all_finite(a, m * k), std::numeric_limits<float>::infinity()};
  return {true, bound};
}

// Whether `factor` times the bound stays below the format's largest finite value. The float sums
// of `bound` lie within a relative k 2^-24 <= 2^-8 of the exact ones (k < 2^16): the margin covers
// them. The chains' own factor is 2 (products fused) or 4 (rounded first).
bool stays_in_range(const ChainBounds& bounds, size_t k, double factor, double max_finite) {
  return k < (size_t{1} << 16) && factor * double(bounds.bound) * (1 + 0x1p-6) < max_finite;
}

// What the later stages multiply the chains' bound by: each later stage a reordering or a
// sequential fold (seq, rev, atomic, ring) of values of the format, whose held value moves by at
// most twice each term it adds, so that a fold's values stay below twice its terms' bounds summed;
// the first stage's groups share out K's terms, so after F folds every value stays below 2^F times
// the chains' bound. nullopt where some later stage is another reducer.
std::optional<double> later_stages_factor(const Schedule& schedule) {
  double factor = 1;
  for (size_t s = 1; s < schedule.stages.size(); ++s) {
    const Stage& st = schedule.stages[s];
    if (st.shuffle || st.reorders()) continue;
    if (!st.reduces()) return std::nullopt;  // body(M) or each(S)
    const Reducer::Kind kind = st.reducer.kind;
    if (kind != Reducer::Kind::seq && kind != Reducer::Kind::rev && kind != Reducer::Kind::atomic &&
        kind != Reducer::Kind::ring)
      return std::nullopt;
    factor *= 2;
  }
  return factor;
}

// scaled[i] = x[i] times scale (a power of two): whether every product is exact (undone by the
// reciprocal bit for bit). One pass: most data scale exactly. Not inlined: inlined, one of its
// calls lost the vector loop.
[[gnu::noinline]] bool scale_exactly(const float* __restrict x, size_t count, float scale, float* __restrict scaled) {
  const float unscale = 1.0f / scale;
  uint32_t inexact = 0;  // no early exit: the loop vectorises
  for (size_t i = 0; i < count; ++i) {
    scaled[i] = x[i] * scale;
    inexact |= std::bit_cast<uint32_t>(scaled[i] * unscale) ^ std::bit_cast<uint32_t>(x[i]);
  }
  return inexact == 0;
}

}  // namespace

void narrow_chain_tile(const Arithmetic& ar, const fp::Fp32Cut& spec, const float* a, size_t lda, const float* b,
                       size_t ldb, const GroupSpan& group, size_t mr, size_t nr, float* out, size_t ldo,
                       const float* b_scaled, const float* a_scaled, bool subnormal_grid) {
  if (group.count == 0) {  // the empty sum
    for (size_t r = 0; r < mr; ++r) std::fill_n(out + r * ldo, nr, 0.0f);
    return;
  }
  const ScaledFactors scaled{b_scaled ? a_scaled : nullptr, b_scaled, subnormal_grid};
  if (ar.products == Products::fused)
    chain_tile_forms<Step::fused>(ar, spec, a, lda, b, scaled, ldb, StridedTerms{group}, mr, nr, out, ldo);
  else
    chain_tile_forms<Step::rounded>(ar, spec, a, lda, b, scaled, ldb, StridedTerms{group}, mr, nr, out, ldo);
}

bool gemm_with_narrow_chains(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                             const Arithmetic& ar, const NoiseKey& key) {
  const auto& stages = schedule.stages;
  if (stages.empty() || !stages[0].reduces() || stages[0].reducer.kind != Reducer::Kind::seq ||
      schedule.has_stage_formats())
    return false;
  const std::optional<fp::Fp32Cut> cut = narrow_chain_cut(ar);
  if (!cut) return false;
  const auto [m, n, k] = shape;
  const ChainBounds bounds = chain_bounds(a, b, shape);
  if (!bounds.finite) return false;
  const double chains_factor = ar.products == Products::fused ? 2 : 4, max_finite = ar.format.max_finite();
  fp::Fp32Cut chains_cut = *cut;  // the chains' own: no range check where their values cannot reach it
  if (chains_cut.check_range && !chains_cut.flush && stays_in_range(bounds, k, chains_factor, max_finite))
    chains_cut.check_range = false;
  // The factors scaled once, where every one of them scales exactly: B's by the whole scale
  // (values of the format do: their grid is at least as coarse as fp32's subnormal one once
  // scaled), else A's and B's by half of it each (fp32 data: the whole scale, 2^-120 for e4m3,
  // would leave most of B subnormal, half of it only values below about 2^-66). Else the chains
  // scale every result there and back.
  std::optional<ScopedSpareBuffer<float>> a_scaled, b_scaled;
  const float *as = nullptr, *bs = nullptr;
  const bool subnormal_grid = SubnormalGrid::applies(*cut) && narrow_chains_take_subnormal_grid();
  if (cut->scaled() && !subnormal_grid) {
    const int whole = std::ilogb(cut->scale), half = whole / 2;
    b_scaled.emplace(k * n);
    if (scale_exactly(b, k * n, cut->scale, b_scaled->data())) {
      bs = b_scaled->data();
    } else {
      a_scaled.emplace(m * k);
      if (scale_exactly(a, m * k, std::ldexp(1.0f, half), a_scaled->data()) &&
          scale_exactly(b, k * n, std::ldexp(1.0f, whole - half), b_scaled->data()))
        as = a_scaled->data(), bs = b_scaled->data();
    }
  }
  const std::vector<GroupSpan> groups = groups_of(stages[0].grouping, k);
  const bool chains_are_outputs = groups.size() == 1 && stages.size() == 1;  // all:seq
  // Later stages on rows of floats; a rne/rna arithmetic draws no rounding randomness.
  std::vector<fp::CounterRng> streams(kGemmTileRows * kGemmTileCols, fp::CounterRng(0));
  const std::optional<double> later_factor = later_stages_factor(schedule);
  const bool sums_in_range =
      !cut->flush && later_factor && stays_in_range(bounds, k, chains_factor * *later_factor, max_finite);
  const bool fold_products =
      sums_in_range && cut->sums_of_values_land_on_ties() && folds_single_products(schedule, groups);
  TileWalker<float, Fp32CutAdd> walker(1, Fp32CutAdd{1, &ar, *cut, true, sums_in_range}, ar, streams.data(), key);
  std::vector<float> rows, result;
  std::vector<size_t> terms;
  for (size_t j0 = 0; j0 < n; j0 += kGemmTileCols) {
    for (size_t i0 = 0; i0 < m; i0 += kGemmTileRows) {
      const size_t mr = std::min(kGemmTileRows, m - i0), nr = std::min(kGemmTileCols, n - j0), w = mr * nr;
      if (chains_are_outputs) {
        narrow_chain_tile(ar, chains_cut, a + i0 * k, k, b + j0, n, groups[0], mr, nr, c + i0 * n + j0, n,
                          bs ? bs + j0 : nullptr, as ? as + i0 * k : nullptr, subnormal_grid);
        continue;
      }
      if (fold_products) {  // the groups' products in the fold's order
        const std::vector<size_t> order = sequential_order(
            stages[1].reducer, groups.size(), gemm_output_key(key, i0, j0, n), stage_id(std::nullopt, 1), 0);
        terms.resize(order.size());
        for (size_t i = 0; i < order.size(); ++i) terms[i] = groups[order[i]].first;
        product_fold_tile(ar, *cut, a + i0 * k, k, b + j0, n, terms, mr, nr, c + i0 * n + j0, n, bs ? bs + j0 : nullptr,
                          as ? as + i0 * k : nullptr, subnormal_grid);
        continue;
      }
      rows.resize(groups.size() * w);
      for (size_t g = 0; g < groups.size(); ++g)
        narrow_chain_tile(ar, chains_cut, a + i0 * k, k, b + j0, n, groups[g], mr, nr, &rows[g * w], nr,
                          bs ? bs + j0 : nullptr, as ? as + i0 * k : nullptr, subnormal_grid);
      result.resize(w);
      walker.reshape(w, Fp32CutAdd{w, &ar, *cut, true, sums_in_range});
      walker.set_tile(gemm_output_key(key, i0, j0, n));
      walker.run(schedule, 1, rows.data(), w, groups.size(), result.data());
      for (size_t r = 0; r < mr; ++r) std::copy_n(&result[r * nr], nr, c + (i0 + r) * n + j0);
    }
  }
  return true;
}

}  // namespace fplab::sim::detail
