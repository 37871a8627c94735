// Assumptions: IEEE binary64 with round-to-nearest-even and FMA on the host; no flush-to-zero.
//
// Fast path, per output, with no branch or carry per product (error-free extraction, after Rump
// and Demmel-Nguyen): let every nonzero |a[i][t]| < 2^ta and |b[t][j]| < 2^tb, every nonzero
// product a multiple of u = 2^(ua + ub) (the finest grids of row i and column j), L =
// ceil(log2(k + 1)), and anchor S1 at C1 = 1.5 * 2^s with s = ta + tb + L + 2. For each product
// p = a*b (exact in binary64):
//     t = fma(a, b, S1)      (= fl(S1 + p): S1 stays inside [2^s, 2^(s+1)) for all k terms)
//     q = t - S1             exact: p rounded to the grid 2^(s-52)
//     r = fma(a, b, -q)      exact: p - q, |r| <= 2^(s-53), a multiple of u
//     S1 = t;  S2 += r       S2 is exact while k * 2^(s-53) < 2^53 * u.
// The exact dot product is then (S1 - C1) + S2 (the subtraction is exact), rounded once.
//
// Where the row's and column's dynamic range is too wide for that (long K, as in weight
// gradients, or data that spans many binades), a third level extends it by 51 - L bits: S2 is
// anchored too, at C2 = 1.5 * 2^s2 with s2 = s - 51 + L (so that it stays inside its binade), each
// r is split by the same extraction (t2 = S2 + r, q2 = t2 - S2, r2 = r - q2, all exact: Fast2Sum),
// and S3 += r2 is exact while k * 2^(s2-53) < 2^53 * u. The exact value is then
// (S1 - C1) + (S2 - C2) + S3. Which form a tile runs is decided from its rows' and columns' ranges.
//
// Outputs whose every product is zero, or whose sum cancels to exactly zero, are zeros signed
// by IEEE's rule for the products' signs (exact_zero below). Outputs out of both forms' range and
// any non-finite input go through fp::exact_dot instead.
#include "sim/exact_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <vector>

#include "fp/arithmetic.hpp"
#include "fp/exact_dot.hpp"
#include "fp/ieee_bits.hpp"
#include "fp/round.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::sim {
namespace {

constexpr size_t kRows = 4, kCols = 16;

// Exponent facts of a vector of floats, combined by max and min alone so that the loops over a
// row of A and across the columns of B vectorise: the largest magnitude's bits (which give
// whether any element is nonzero or non-finite, and the top binade), and the finest grid a nonzero
// element lies on.
constexpr int32_t kNoGrid = 4096;  // the grid of zeros: above any float's

int32_t grid_of(uint32_t magnitude) {
  using namespace fp::binary32;
  const uint32_t biased = magnitude >> kFractionBits;
  // x = significand * 2^scale, the hidden bit only where x is normal ((e + 255) >> 8 is 0 for e = 0).
  const uint32_t significand = (magnitude & kFractionMask) | (((biased + kExponentMask) >> 8) << kFractionBits);
  const int32_t scale = static_cast<int32_t>(std::max(biased, 1u)) - kBias - kFractionBits;
  // The lowest set bit of the significand gives the finest grid x lies on; its index is read
  // from its conversion to float (exact: a power of two), as std::countr_zero does not vectorise.
  const auto lowest = static_cast<float>(static_cast<int32_t>(significand & (0u - significand)));
  const int32_t index = static_cast<int32_t>(std::bit_cast<uint32_t>(lowest) >> kFractionBits) - kBias;
  return scale + index + static_cast<int32_t>(magnitude == 0) * kNoGrid;
}

struct Range {
  uint32_t max_magnitude = 0;
  int32_t grid = kNoGrid;
  void add(float x) {
    const uint32_t magnitude = std::bit_cast<uint32_t>(x) & fp::binary32::kMagnitudeMask;
    max_magnitude = std::max(max_magnitude, magnitude);
    grid = std::min(grid, grid_of(magnitude));
  }
  bool finite() const { return max_magnitude < fp::binary32::kInfinityBits; }
  bool any_nonzero() const { return max_magnitude != 0; }
  // Every element |x| < 2^top (an element's top is monotone in its magnitude's bits).
  int top() const {
    using namespace fp::binary32;
    const int biased = biased_exponent(max_magnitude);
    return biased ? biased - kBias + 1 : kSubnormalScale + static_cast<int>(std::bit_width(max_magnitude));
  }
  // Binades from the finest grid to the top: what the fast forms' conditions limit.
  int span() const { return top() - grid; }
};

int ceil_log2(size_t x) { return static_cast<int>(std::bit_width(x - 1)); }

// How an output is computed: its row or column holds only zeros (so does the sum), one of the
// anchored forms (two or three levels), or the exact dot product.
enum class Form : uint8_t { zero, two_level, three_level, slow };

// The exact zero a sum of products cancels to, signed as SuperAccumulator::value signs it (and
// IEEE 754 and mpfr_sum do): +0 (-0 rounding down) where some product is nonzero, otherwise -0 if
// every product is -0, else +0 (-0 rounding down where some product is -0). Finite inputs, k >= 1.
fp::ExactValue exact_zero(const float* a, const float* b, size_t ldb, size_t k, fp::Mode mode) {
  // Rounding down, one nonzero or negative-zero product decides -0; otherwise one nonzero or
  // positive-zero product decides +0: the loop stops at the first such product.
  const bool down = mode == fp::Mode::rd;
  for (size_t t = 0; t < k; ++t) {
    const uint32_t x = std::bit_cast<uint32_t>(a[t]), y = std::bit_cast<uint32_t>(b[t * ldb]);
    const bool nonzero = (x & fp::binary32::kMagnitudeMask) != 0 && (y & fp::binary32::kMagnitudeMask) != 0;
    const bool negative = ((x ^ y) >> 31) != 0;
    if (nonzero || negative == down) return fp::ExactValue::zero(down);
  }
  return fp::ExactValue::zero(!down);
}

// Accumulates the rows [r0, r0 + R) x columns [0, 16) of a tile over all k into s[0..Levels):
// s[0] (and s[1] with three levels) hold the anchors on entry; the last level starts at zero.
template <int Levels, size_t R>
void tile_kernel(const double* const* a_rows, const float* b, size_t ldb, size_t k, double (&s)[3][kRows][kCols],
                 size_t r0) {
  static_assert(Levels == 2 || Levels == 3);
#if defined(__AVX512F__)
  __m512d S[Levels][R][2];
  for (int l = 0; l < Levels; ++l)
    for (size_t r = 0; r < R; ++r)
      for (int v = 0; v < 2; ++v)
        S[l][r][v] = l + 1 < Levels ? _mm512_loadu_pd(&s[l][r0 + r][8 * v]) : _mm512_setzero_pd();
  for (size_t t = 0; t < k; ++t) {
    const __m512d bv[2] = {_mm512_maskz_cvtps_pd(0xff, _mm256_loadu_ps(b + t * ldb)),
                           _mm512_maskz_cvtps_pd(0xff, _mm256_loadu_ps(b + t * ldb + 8))};
    for (size_t r = 0; r < R; ++r) {
      const __m512d av = _mm512_set1_pd(a_rows[r0 + r][t]);
      for (int v = 0; v < 2; ++v) {
        const __m512d t1 = _mm512_fmadd_pd(av, bv[v], S[0][r][v]);
        const __m512d r1 = _mm512_fmsub_pd(av, bv[v], _mm512_sub_pd(t1, S[0][r][v]));
        S[0][r][v] = t1;
        if constexpr (Levels == 2) {
          S[1][r][v] = _mm512_add_pd(S[1][r][v], r1);
        } else {
          const __m512d t2 = _mm512_add_pd(S[1][r][v], r1);
          S[2][r][v] = _mm512_add_pd(S[2][r][v], _mm512_sub_pd(r1, _mm512_sub_pd(t2, S[1][r][v])));
          S[1][r][v] = t2;
        }
      }
    }
  }
  for (int l = 0; l < Levels; ++l)
    for (size_t r = 0; r < R; ++r)
      for (int v = 0; v < 2; ++v) _mm512_storeu_pd(&s[l][r0 + r][8 * v], S[l][r][v]);
#elif defined(__AVX2__) && defined(__FMA__)
  // Passes of 4 columns: all 16 columns' sums would need more than the 16 ymm registers.
  for (size_t c0 = 0; c0 < kCols; c0 += 4) {
    __m256d S[Levels][R];
    for (int l = 0; l < Levels; ++l)
      for (size_t r = 0; r < R; ++r)
        S[l][r] = l + 1 < Levels ? _mm256_loadu_pd(&s[l][r0 + r][c0]) : _mm256_setzero_pd();
    for (size_t t = 0; t < k; ++t) {
      const __m256d bv = _mm256_cvtps_pd(_mm_loadu_ps(b + t * ldb + c0));
      for (size_t r = 0; r < R; ++r) {
        const __m256d av = _mm256_broadcast_sd(a_rows[r0 + r] + t);
        const __m256d t1 = _mm256_fmadd_pd(av, bv, S[0][r]);
        const __m256d r1 = _mm256_fmsub_pd(av, bv, _mm256_sub_pd(t1, S[0][r]));
        S[0][r] = t1;
        if constexpr (Levels == 2) {
          S[1][r] = _mm256_add_pd(S[1][r], r1);
        } else {
          const __m256d t2 = _mm256_add_pd(S[1][r], r1);
          S[2][r] = _mm256_add_pd(S[2][r], _mm256_sub_pd(r1, _mm256_sub_pd(t2, S[1][r])));
          S[1][r] = t2;
        }
      }
    }
    for (int l = 0; l < Levels; ++l)
      for (size_t r = 0; r < R; ++r) _mm256_storeu_pd(&s[l][r0 + r][c0], S[l][r]);
  }
#else
  for (size_t r = 0; r < R; ++r)
    for (size_t c = 0; c < kCols; ++c) s[Levels - 1][r0 + r][c] = 0;
  for (size_t t = 0; t < k; ++t)
    for (size_t r = 0; r < R; ++r)
      for (size_t c = 0; c < kCols; ++c) {
        const double av = a_rows[r0 + r][t], bv = b[t * ldb + c];
        double* sums[3] = {&s[0][r0 + r][c], &s[1][r0 + r][c], &s[2][r0 + r][c]};
        const double t1 = std::fma(av, bv, *sums[0]);
        const double r1 = std::fma(av, bv, -(t1 - *sums[0]));
        *sums[0] = t1;
        if constexpr (Levels == 2) {
          *sums[1] += r1;
        } else {
          const double t2 = *sums[1] + r1;
          *sums[2] += r1 - (t2 - *sums[1]);
          *sums[1] = t2;
        }
      }
#endif
}

// One tile's exact sums: output (r, c) is hi + mid + lo exactly (mid is 0 for two levels).
struct TileSums {
  double hi[kRows][kCols], mid[kRows][kCols], lo[kRows][kCols];
};

// Buffers reused from call to call (a training run makes thousands of calls, and fresh buffers
// of this size come from mmap: a page fault per 4 KiB).
struct Scratch {
  std::vector<double> a_rows;  // kRows rows of A as doubles
  std::vector<float> b_tail;   // the last, partial block of columns of B, padded to kCols
  std::vector<float> bt;       // B transposed, for the exact dot products
};

// The walk of exact_gemm_values: slow(i, j, value) takes an output's exact value (from the exact
// dot product or exact_zero); fast(i0, j0, rows, cols, levels, sums, form) the outputs of a tile
// whose form[r][c] is Form::two_level or three_level, each the exact hi + mid + lo, and returns
// the outputs whose exact sum is zero in `zeros` (bit r * kCols + c), for the walk to sign them.
template <class Slow, class Fast>
void exact_gemm_walk(const float* a, const float* b, size_t m, size_t n, size_t k, fp::Mode mode, Slow&& sink,
                     Fast&& fast_tile) {
  thread_local Scratch scratch;
  bool transposed = false;
  auto slow = [&](size_t i, size_t j) {
    if (!transposed) {  // B transposed for the exact dot product, once a call needs it
      scratch.bt.resize(n * k);
      for (size_t t = 0; t < k; ++t)
        for (size_t j2 = 0; j2 < n; ++j2) scratch.bt[j2 * k + t] = b[t * n + j2];
      transposed = true;
    }
    sink(i, j, fp::exact_dot(a + i * k, &scratch.bt[j * k], k, mode));
  };
  auto zero = [&](size_t i, size_t j) { sink(i, j, exact_zero(a + i * k, b + j, n, k, mode)); };
  std::vector<Range> rows(m), cols(n);
  for (size_t i = 0; i < m; ++i) {
    Range row;  // a local: rows[i] in the loop would be stored at every element
    for (size_t t = 0; t < k; ++t) row.add(a[i * k + t]);
    rows[i] = row;
  }
  {
    std::vector<uint32_t> max_magnitude(n, 0);
    std::vector<int32_t> grid(n, kNoGrid);
    for (size_t t = 0; t < k; ++t)
      for (size_t j = 0; j < n; ++j) {
        const uint32_t magnitude = std::bit_cast<uint32_t>(b[t * n + j]) & fp::binary32::kMagnitudeMask;
        max_magnitude[j] = std::max(max_magnitude[j], magnitude);
        grid[j] = std::min(grid[j], grid_of(magnitude));
      }
    for (size_t j = 0; j < n; ++j) cols[j] = {max_magnitude[j], grid[j]};
  }
  const bool finite = std::all_of(rows.begin(), rows.end(), [](const Range& r) { return r.finite(); }) &&
                      std::all_of(cols.begin(), cols.end(), [](const Range& r) { return r.finite(); });
  if (!finite || k == 0) {
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) slow(i, j);
    return;
  }

  // The conditions of the header, in spans: two levels need span(a) + span(b) + 2L < 103, three
  // span(a) + span(b) + 3L < 154 (each with a bit to spare). A row or column of zeros gets a span
  // past both (and Form::zero).
  const int log_k = ceil_log2(k + 1);
  const int two_level_limit = 103 - 2 * log_k, three_level_limit = 154 - 3 * log_k;
  constexpr int kZeroSpan = 1 << 20;
  const size_t padded_m = (m + kRows - 1) / kRows * kRows, padded_n = (n + kCols - 1) / kCols * kCols;
  std::vector<int> row_span(padded_m, 0), col_span(padded_n, 0);
  // Anchors as products of two powers of two (exact, and inside the normal range: tops lie in
  // [-148, 128]): C1 = 2^top(a) * 1.5 * 2^(top(b) + L + 2), C2 = 2^top(a) * 1.5 * 2^(top(b) + 2L - 49).
  // Padding rows and columns (and those of zeros) take top 0.
  std::vector<double> row_scale(padded_m, 1.0), col_anchor1(padded_n, 1.5), col_anchor2(padded_n, 1.5);
  for (size_t i = 0; i < m; ++i) {
    const bool live = rows[i].any_nonzero();
    row_span[i] = live ? rows[i].span() : kZeroSpan;
    row_scale[i] = fp::binary64::power_of_two(live ? rows[i].top() : 0);
  }
  for (size_t j = 0; j < n; ++j) {
    const bool live = cols[j].any_nonzero();
    col_span[j] = live ? cols[j].span() : kZeroSpan;
    const int top = live ? cols[j].top() : 0;
    col_anchor1[j] = 1.5 * fp::binary64::power_of_two(top + log_k + 2);
    col_anchor2[j] = 1.5 * fp::binary64::power_of_two(top + 2 * log_k - 49);
  }
  auto form_of = [&](size_t i, size_t j) {
    if (row_span[i] == kZeroSpan || col_span[j] == kZeroSpan) return Form::zero;
    const int span = row_span[i] + col_span[j];
    return span < two_level_limit ? Form::two_level : span < three_level_limit ? Form::three_level : Form::slow;
  };

  scratch.a_rows.assign(kRows * k, 0.0);
  const size_t full_cols = n / kCols * kCols;
  if (full_cols < n) {
    scratch.b_tail.assign(k * kCols, 0.0f);
    for (size_t t = 0; t < k; ++t)
      std::copy(b + t * n + full_cols, b + t * n + n, scratch.b_tail.begin() + static_cast<ptrdiff_t>(t * kCols));
  }

  double s[3][kRows][kCols];
  TileSums sums;
  Form form[kRows][kCols];
  for (size_t i0 = 0; i0 < m; i0 += kRows) {
    const size_t tile_rows = std::min(kRows, m - i0);
    const double* a_rows[kRows];
    for (size_t r = 0; r < kRows; ++r) {
      a_rows[r] = &scratch.a_rows[r * k];
      if (r < tile_rows)
        std::copy(a + (i0 + r) * k, a + (i0 + r + 1) * k, scratch.a_rows.begin() + static_cast<ptrdiff_t>(r * k));
      else
        std::fill_n(scratch.a_rows.begin() + static_cast<ptrdiff_t>(r * k), k, 0.0);
    }
    const int rows_span = *std::max_element(&row_span[i0], &row_span[i0] + tile_rows);
    for (size_t j0 = 0; j0 < n; j0 += kCols) {
      const size_t tile_cols = std::min(kCols, n - j0);
      const bool tail = j0 >= full_cols;
      const float* b_block = tail ? scratch.b_tail.data() : b + j0;
      const size_t ldb = tail ? kCols : n;
      // The usual tile: every output in the two-level form, decided from the widest row and column.
      int levels = 2;
      uint64_t fast = 0;  // bit r * kCols + c: output (r, c) takes one of the fast forms
      const bool uniform = rows_span + *std::max_element(&col_span[j0], &col_span[j0] + tile_cols) < two_level_limit;
      if (uniform) {
        for (size_t r = 0; r < tile_rows; ++r) fast |= ((uint64_t{1} << tile_cols) - 1) << (r * kCols);
      } else {
        levels = 0;
        for (size_t r = 0; r < tile_rows; ++r)
          for (size_t c = 0; c < tile_cols; ++c) {
            form[r][c] = form_of(i0 + r, j0 + c);
            if (form[r][c] == Form::two_level) levels = std::max(levels, 2);
            if (form[r][c] == Form::three_level) levels = 3;
            if (form[r][c] == Form::two_level || form[r][c] == Form::three_level)
              fast |= uint64_t{1} << (r * kCols + c);
          }
      }
      if (levels > 0) {
        for (size_t r = 0; r < kRows; ++r)
          for (size_t c = 0; c < kCols; ++c) {
            s[0][r][c] = row_scale[i0 + r] * col_anchor1[j0 + c];
            s[1][r][c] = row_scale[i0 + r] * col_anchor2[j0 + c];
          }
        if (levels == 2) {
          tile_kernel<2, kRows>(a_rows, b_block, ldb, k, s, 0);
        } else {  // two rows at a time: the three levels of four rows would not fit in registers
          tile_kernel<3, 2>(a_rows, b_block, ldb, k, s, 0);
          tile_kernel<3, 2>(a_rows, b_block, ldb, k, s, 2);
        }
        for (size_t r = 0; r < kRows; ++r)
          for (size_t c = 0; c < kCols; ++c) {
            sums.hi[r][c] = s[0][r][c] - row_scale[i0 + r] * col_anchor1[j0 + c];
            sums.mid[r][c] = levels == 2 ? 0 : s[1][r][c] - row_scale[i0 + r] * col_anchor2[j0 + c];
            sums.lo[r][c] = s[levels - 1][r][c];
          }
        uint64_t zeros = 0;
        fast_tile(i0, j0, tile_rows, levels, sums, fast, zeros);
        for (; zeros != 0; zeros &= zeros - 1) {
          const auto bit = static_cast<size_t>(std::countr_zero(zeros));
          zero(i0 + bit / kCols, j0 + bit % kCols);
        }
      }
      if (uniform) continue;
      for (size_t r = 0; r < tile_rows; ++r)
        for (size_t c = 0; c < tile_cols; ++c) {
          if (form[r][c] == Form::zero) zero(i0 + r, j0 + c);
          if (form[r][c] == Form::slow) slow(i0 + r, j0 + c);
        }
    }
  }
}

// The exact hi + mid + lo of a three-level output.
fp::ExactValue exact_sum3(double hi, double mid, double lo, fp::Mode mode) {
  fp::SuperAccumulator acc;
  acc.add(hi);
  acc.add(mid);
  acc.add(lo);
  return acc.value(mode);
}

// hi + mid + lo rounded once to fp32; sets bit `bit` of `zeros` where it is an exact zero.
float sum3_rounded_to_fp32(double hi, double mid, double lo, const fp::RoundingOptions& options, uint32_t& zeros,
                           size_t bit) {
  const fp::ExactValue exact = exact_sum3(hi, mid, lo, options.mode);
  zeros |= static_cast<uint32_t>(exact.kind == fp::ExactValue::Kind::zero) << bit;
  return static_cast<float>(fp::round_exact(exact, fp::fp32(), options).value);
}

}  // namespace

void exact_gemm_values(const float* a, const float* b, size_t m, size_t n, size_t k, fp::Mode mode,
                       const std::function<void(size_t, size_t, const fp::ExactValue&)>& sink) {
  exact_gemm_walk(a, b, m, n, k, mode, sink,
                  [&](size_t i0, size_t j0, size_t, int levels, const TileSums& sums, uint64_t fast, uint64_t& zeros) {
                    for (; fast != 0; fast &= fast - 1) {
                      const auto bit = static_cast<size_t>(std::countr_zero(fast));
                      const size_t r = bit / kCols, c = bit % kCols;
                      const fp::ExactValue exact = levels == 2
                                                       ? fp::exact_sum(sums.hi[r][c], sums.lo[r][c], mode)
                                                       : exact_sum3(sums.hi[r][c], sums.mid[r][c], sums.lo[r][c], mode);
                      // The sign of an exact zero depends on the products' signs: the walk signs it.
                      if (exact.kind == fp::ExactValue::Kind::zero)
                        zeros |= uint64_t{1} << bit;
                      else
                        sink(i0 + r, j0 + c, exact);
                    }
                  });
}

void exact_gemm(const float* a, const float* b, float* c, size_t m, size_t n, size_t k, const fp::Format& format,
                const fp::RoundingOptions& options, const std::function<fp::CounterRng(size_t, size_t)>& stream_for) {
  // Only stochastic rounding reads the output's stream: keying one per output cost a quarter of an
  // `exact`-profile training run in the hash alone.
  const bool draws = options.mode == fp::Mode::sr;
  auto round = [&](size_t i, size_t j, const fp::ExactValue& exact) {
    fp::RoundingOptions o = options;
    fp::CounterRng stream(0);
    if (draws) stream = stream_for(i, j), o.stream = &stream;
    c[i * n + j] = static_cast<float>(fp::round_exact(exact, format, o).value);
  };
  if (format == fp::fp32() && options.mode == fp::Mode::rne && !options.flush_subnormals && !options.saturate) {
    // fp32 to nearest (the usual case): hi + lo rounded to odd in a double, then to fp32 by the
    // host, no exact value built; a sum of zero (exactly: two doubles cannot cancel to an inexact
    // zero) goes back to the walk for its sign.
    exact_gemm_walk(
        a, b, m, n, k, options.mode, round,
        [&](size_t i0, size_t j0, size_t rows, int levels, const TileSums& sums, uint64_t fast, uint64_t& zeros) {
          for (size_t r = 0; r < rows; ++r) {
            const auto row_fast = static_cast<uint32_t>(fast >> (r * kCols) & 0xffff);
            float out[kCols];
            uint32_t row_zeros = 0;
            if (levels == 2) {  // all 16 at once (vectorised), the few not fast left unread
              for (size_t cc = 0; cc < kCols; ++cc) {
                out[cc] = fp::sum_rounded_to_fp32(sums.hi[r][cc], sums.lo[r][cc]);
                row_zeros |= static_cast<uint32_t>(sums.hi[r][cc] + sums.lo[r][cc] == 0) << cc;
              }
            } else {
              for (uint32_t todo = row_fast; todo != 0; todo &= todo - 1) {
                const auto cc = static_cast<size_t>(std::countr_zero(todo));
                out[cc] = sum3_rounded_to_fp32(sums.hi[r][cc], sums.mid[r][cc], sums.lo[r][cc], options, row_zeros, cc);
              }
            }
            row_zeros &= row_fast;
            zeros |= uint64_t{row_zeros} << (r * kCols);
            float* row = c + (i0 + r) * n + j0;
            if (row_fast == 0xffff && row_zeros == 0) {
              std::copy_n(out, kCols, row);
              continue;
            }
            for (uint32_t todo = row_fast & ~row_zeros; todo != 0; todo &= todo - 1) {
              const auto cc = static_cast<size_t>(std::countr_zero(todo));
              row[cc] = out[cc];
            }
          }
        });
    return;
  }
  exact_gemm_values(a, b, m, n, k, options.mode, round);
}

}  // namespace fplab::sim
