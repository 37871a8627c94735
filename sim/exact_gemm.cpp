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
// (S1 - C1) + (S2 - C2) + S3. Which form a block of a row's outputs runs is decided from the
// ranges of the row and of the block's columns.
//
// Outputs whose every product is zero, or whose sum cancels to exactly zero, are zeros signed
// by IEEE's rule for the products' signs (exact_zero below). Outputs out of both forms' range and
// any non-finite input go through fp::exact_dot instead.
#include "sim/exact_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "fp/arithmetic.hpp"
#include "fp/exact_dot.hpp"
#include "fp/ieee_bits.hpp"
#include "fp/round.hpp"
#include "fp/superaccumulator.hpp"

namespace fplab::sim {
namespace {

// A row of outputs is computed in blocks of 32 columns (16 where fewer are left).
constexpr size_t kMaxCols = 32, kMinCols = 16;

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
  // Nonzero products that cancel come in both signs, so one rule covers both cases: rounding
  // down, the first product of negative sign (zero or not) decides -0, otherwise the first of
  // positive sign decides +0; where none does, every product has the other sign.
  const bool down = mode == fp::Mode::rd;
  for (size_t t = 0; t < k; ++t) {
    const bool negative = ((std::bit_cast<uint32_t>(a[t]) ^ std::bit_cast<uint32_t>(b[t * ldb])) >> 31) != 0;
    if (negative == down) return fp::ExactValue::zero(down);
  }
  return fp::ExactValue::zero(!down);
}

// Accumulates one row of A against the W columns of a block of B (doubles, row stride ldb) into
// s[0..Levels): s[0] (and s[1] with three levels) hold the anchors on entry; the last level starts
// at zero. Only the row's nonzero elements are visited: value[p] = A[i][index[p]] (zeros add
// nothing, and ReLU and max-pool make most of a gradient's elements zero).
template <int Levels, size_t W>
void row_kernel(const double* value, const uint32_t* index, size_t nonzeros, const double* b, size_t ldb,
                double (&s)[3][kMaxCols]) {
  static_assert(Levels == 2 || Levels == 3);
#if defined(__AVX512F__)
  constexpr size_t V = W / 8;
  __m512d S[Levels][V];
  for (int l = 0; l < Levels; ++l)
    for (size_t v = 0; v < V; ++v) S[l][v] = l + 1 < Levels ? _mm512_loadu_pd(&s[l][8 * v]) : _mm512_setzero_pd();
  for (size_t p = 0; p < nonzeros; ++p) {
    const __m512d av = _mm512_set1_pd(value[p]);
    const double* row = b + index[p] * ldb;
    for (size_t v = 0; v < V; ++v) {
      const __m512d bv = _mm512_loadu_pd(row + 8 * v);
      const __m512d t1 = _mm512_fmadd_pd(av, bv, S[0][v]);
      const __m512d r1 = _mm512_fmsub_pd(av, bv, _mm512_sub_pd(t1, S[0][v]));
      S[0][v] = t1;
      if constexpr (Levels == 2) {
        S[1][v] = _mm512_add_pd(S[1][v], r1);
      } else {
        const __m512d t2 = _mm512_add_pd(S[1][v], r1);
        S[2][v] = _mm512_add_pd(S[2][v], _mm512_sub_pd(r1, _mm512_sub_pd(t2, S[1][v])));
        S[1][v] = t2;
      }
    }
  }
  for (int l = 0; l < Levels; ++l)
    for (size_t v = 0; v < V; ++v) _mm512_storeu_pd(&s[l][8 * v], S[l][v]);
#elif defined(__AVX2__) && defined(__FMA__)
  // Passes of 16 columns (8 with three levels): more would not fit in the 16 ymm registers.
  constexpr size_t kPass = Levels == 2 ? 16 : 8, V = kPass / 4;
  for (size_t c0 = 0; c0 < W; c0 += kPass) {
    __m256d S[Levels][V];
    for (int l = 0; l < Levels; ++l)
      for (size_t v = 0; v < V; ++v)
        S[l][v] = l + 1 < Levels ? _mm256_loadu_pd(&s[l][c0 + 4 * v]) : _mm256_setzero_pd();
    for (size_t p = 0; p < nonzeros; ++p) {
      const __m256d av = _mm256_broadcast_sd(value + p);
      const double* row = b + index[p] * ldb + c0;
      for (size_t v = 0; v < V; ++v) {
        const __m256d bv = _mm256_loadu_pd(row + 4 * v);
        const __m256d t1 = _mm256_fmadd_pd(av, bv, S[0][v]);
        const __m256d r1 = _mm256_fmsub_pd(av, bv, _mm256_sub_pd(t1, S[0][v]));
        S[0][v] = t1;
        if constexpr (Levels == 2) {
          S[1][v] = _mm256_add_pd(S[1][v], r1);
        } else {
          const __m256d t2 = _mm256_add_pd(S[1][v], r1);
          S[2][v] = _mm256_add_pd(S[2][v], _mm256_sub_pd(r1, _mm256_sub_pd(t2, S[1][v])));
          S[1][v] = t2;
        }
      }
    }
    for (int l = 0; l < Levels; ++l)
      for (size_t v = 0; v < V; ++v) _mm256_storeu_pd(&s[l][c0 + 4 * v], S[l][v]);
  }
#else
  for (size_t c = 0; c < W; ++c) s[Levels - 1][c] = 0;
  for (size_t p = 0; p < nonzeros; ++p) {
    const double* row = b + index[p] * ldb;
    for (size_t c = 0; c < W; ++c) {
      const double t1 = std::fma(value[p], row[c], s[0][c]);
      const double r1 = std::fma(value[p], row[c], -(t1 - s[0][c]));
      s[0][c] = t1;
      if constexpr (Levels == 2) {
        s[1][c] += r1;
      } else {
        const double t2 = s[1][c] + r1;
        s[2][c] += r1 - (t2 - s[1][c]);
        s[1][c] = t2;
      }
    }
  }
#endif
}

// Where the compaction below may write past the last nonzero element.
constexpr size_t kCompactSlack = 16;

// Writes the nonzero elements of x[0..k) as doubles to value[] and their indices to index[] (both
// k + kCompactSlack long), returns how many.
size_t compact_nonzeros(const float* x, size_t k, double* value, uint32_t* index) {
  size_t nonzeros = 0, t = 0;
#if defined(__AVX512F__) && defined(__AVX512VL__)
  // Compressed in registers and stored whole (a compressing store to memory is microcoded on some
  // CPUs): 16 elements a step, as two halves whose counts are made side by side (the next step's
  // addresses wait on one addition of the two, not on two in a row).
  __m256i at = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i eight = _mm256_set1_epi32(8);
  for (; t + 16 <= k; t += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + t), v1 = _mm256_loadu_ps(x + t + 8);
    const __mmask8 live0 = _mm256_cmp_ps_mask(v0, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    const __mmask8 live1 = _mm256_cmp_ps_mask(v1, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    const size_t count0 = static_cast<size_t>(std::popcount(static_cast<unsigned>(live0)));
    const size_t count1 = static_cast<size_t>(std::popcount(static_cast<unsigned>(live1)));
    const __m256i at1 = _mm256_add_epi32(at, eight);
    _mm512_storeu_pd(value + nonzeros, _mm512_maskz_compress_pd(live0, _mm512_maskz_cvtps_pd(0xff, v0)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(index + nonzeros), _mm256_maskz_compress_epi32(live0, at));
    _mm512_storeu_pd(value + nonzeros + count0, _mm512_maskz_compress_pd(live1, _mm512_maskz_cvtps_pd(0xff, v1)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(index + nonzeros + count0), _mm256_maskz_compress_epi32(live1, at1));
    nonzeros += count0 + count1;
    at = _mm256_add_epi32(at1, eight);
  }
  for (; t + 8 <= k; t += 8) {
    const __m256 v = _mm256_loadu_ps(x + t);
    const __mmask8 live = _mm256_cmp_ps_mask(v, _mm256_setzero_ps(), _CMP_NEQ_UQ);
    _mm512_storeu_pd(value + nonzeros, _mm512_maskz_compress_pd(live, _mm512_maskz_cvtps_pd(0xff, v)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(index + nonzeros), _mm256_maskz_compress_epi32(live, at));
    nonzeros += static_cast<size_t>(std::popcount(static_cast<unsigned>(live)));
    at = _mm256_add_epi32(at, eight);
  }
#endif
  for (; t < k; ++t) {  // without a branch per element
    value[nonzeros] = x[t];
    index[nonzeros] = static_cast<uint32_t>(t);
    nonzeros += x[t] != 0;
  }
  return nonzeros;
}

// One block's exact sums: output c is hi + mid + lo exactly (hi + lo for two levels: mid unset).
struct BlockSums {
  double hi[kMaxCols], mid[kMaxCols], lo[kMaxCols];
};

// Buffers reused from call to call (a training run makes thousands of calls, and fresh buffers
// of this size come from mmap: a page fault per 4 KiB).
struct Scratch {
  std::vector<double> b;        // B as doubles, its rows padded to a multiple of kMinCols
  std::vector<double> value;    // the nonzero elements of a row of A as doubles
  std::vector<uint32_t> index;  // and their indices
  std::vector<float> bt;        // B transposed, for the exact dot products
};

// out (cols x rows) = x (rows x cols) transposed, in blocks that stay in cache.
void transpose(const float* x, size_t rows, size_t cols, float* out) {
  constexpr size_t kBlock = 32;
  for (size_t i0 = 0; i0 < rows; i0 += kBlock)
    for (size_t j0 = 0; j0 < cols; j0 += kBlock)
      for (size_t i = i0; i < std::min(rows, i0 + kBlock); ++i)
        for (size_t j = j0; j < std::min(cols, j0 + kBlock); ++j) out[j * rows + i] = x[i * cols + j];
}

// The walk of exact_gemm_values: sink(i, j, value) takes an output's exact value (from the exact
// dot product or exact_zero); fast_block(i, j0, width, levels, sums, fast, zeros) the outputs
// (i, j0 + c) of a block of row i whose bit c of `fast` is set, each the exact hi + mid + lo, and
// returns those whose exact sum is zero in `zeros` (bit c), for the walk to sign them.
template <class Slow, class Fast>
void exact_gemm_walk(const float* a, const float* b, size_t m, size_t n, size_t k, fp::Mode mode, Slow&& sink,
                     Fast&& fast_block) {
  thread_local Scratch scratch;
  bool transposed = false;
  auto slow = [&](size_t i, size_t j) {
    if (!transposed) {  // B transposed for the exact dot product, once a call needs it
      scratch.bt.resize(n * k);
      transpose(b, k, n, scratch.bt.data());
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
  // span(a) + span(b) + 3L < 154 (each with a bit to spare). A column of zeros gets a span past
  // both (and Form::zero).
  const int log_k = ceil_log2(k + 1);
  const int two_level_limit = 103 - 2 * log_k, three_level_limit = 154 - 3 * log_k;
  constexpr int kZeroSpan = 1 << 20;
  const size_t padded_n = (n + kMinCols - 1) / kMinCols * kMinCols;
  std::vector<int> col_span(padded_n, 0);
  // Anchors as products of two powers of two (exact, and inside the normal range: tops lie in
  // [-148, 128]): C1 = 2^top(a) * 1.5 * 2^(top(b) + L + 2), C2 = 2^top(a) * 1.5 * 2^(top(b) + 2L - 49).
  // Padding columns (and those of zeros) take top 0.
  std::vector<double> col_anchor1(padded_n, 1.5), col_anchor2(padded_n, 1.5);
  for (size_t j = 0; j < n; ++j) {
    const bool live = cols[j].any_nonzero();
    col_span[j] = live ? cols[j].span() : kZeroSpan;
    const int top = live ? cols[j].top() : 0;
    col_anchor1[j] = 1.5 * fp::binary64::power_of_two(top + log_k + 2);
    col_anchor2[j] = 1.5 * fp::binary64::power_of_two(top + 2 * log_k - 49);
  }
  // The blocks of columns: 32 wide while 32 are left (padding included), then 16; each with the
  // span of its widest column.
  auto width_at = [&](size_t j0) { return j0 + kMaxCols <= padded_n ? kMaxCols : kMinCols; };
  std::vector<size_t> block_start;
  std::vector<int> block_span;
  for (size_t j0 = 0; j0 < n; j0 += width_at(j0)) {
    block_start.push_back(j0);
    const size_t end = std::min(n, j0 + width_at(j0));
    block_span.push_back(*std::max_element(col_span.begin() + static_cast<ptrdiff_t>(j0),
                                           col_span.begin() + static_cast<ptrdiff_t>(end)));
  }

  scratch.b.assign(k * padded_n, 0.0);
  for (size_t t = 0; t < k; ++t)
    std::copy(b + t * n, b + t * n + n, scratch.b.begin() + static_cast<ptrdiff_t>(t * padded_n));
  scratch.value.resize(k + kCompactSlack);
  scratch.index.resize(k + kCompactSlack);

  double s[3][kMaxCols];
  BlockSums sums;
  Form form[kMaxCols];
  for (size_t i = 0; i < m; ++i) {
    if (!rows[i].any_nonzero()) {  // every product is zero
      for (size_t j = 0; j < n; ++j) zero(i, j);
      continue;
    }
    const size_t nonzeros = compact_nonzeros(a + i * k, k, scratch.value.data(), scratch.index.data());
    const int row_span = rows[i].span();
    const double row_scale = fp::binary64::power_of_two(rows[i].top());
    for (size_t block = 0; block < block_start.size(); ++block) {
      const size_t j0 = block_start[block], width = width_at(j0), cols_here = std::min(width, n - j0);
      // The usual block: every output in the two-level form, decided from its widest column.
      const bool uniform = row_span + block_span[block] < two_level_limit;
      int levels = 2;
      uint32_t fast = 0;  // bit c: output (i, j0 + c) takes one of the fast forms
      if (uniform) {
        fast = static_cast<uint32_t>((uint64_t{1} << cols_here) - 1);
      } else {
        levels = 0;
        for (size_t c = 0; c < cols_here; ++c) {
          const int span = col_span[j0 + c] == kZeroSpan ? kZeroSpan : row_span + col_span[j0 + c];
          form[c] = span == kZeroSpan          ? Form::zero
                    : span < two_level_limit   ? Form::two_level
                    : span < three_level_limit ? Form::three_level
                                               : Form::slow;
          if (form[c] == Form::two_level) levels = std::max(levels, 2);
          if (form[c] == Form::three_level) levels = 3;
          if (form[c] == Form::two_level || form[c] == Form::three_level) fast |= uint32_t{1} << c;
        }
      }
      if (levels > 0) {
        for (size_t c = 0; c < width; ++c) {
          s[0][c] = row_scale * col_anchor1[j0 + c];
          s[1][c] = row_scale * col_anchor2[j0 + c];
        }
        const double* b_block = &scratch.b[j0];
        const double* value = scratch.value.data();
        const uint32_t* index = scratch.index.data();
        if (levels == 2 && width == kMaxCols)
          row_kernel<2, kMaxCols>(value, index, nonzeros, b_block, padded_n, s);
        else if (levels == 2)
          row_kernel<2, kMinCols>(value, index, nonzeros, b_block, padded_n, s);
        else if (width == kMaxCols)
          row_kernel<3, kMaxCols>(value, index, nonzeros, b_block, padded_n, s);
        else
          row_kernel<3, kMinCols>(value, index, nonzeros, b_block, padded_n, s);
        for (size_t c = 0; c < width; ++c) {
          sums.hi[c] = s[0][c] - row_scale * col_anchor1[j0 + c];
          sums.lo[c] = s[levels - 1][c];
        }
        if (levels == 3)
          for (size_t c = 0; c < width; ++c) sums.mid[c] = s[1][c] - row_scale * col_anchor2[j0 + c];
        uint32_t zeros = 0;
        fast_block(i, j0, width, levels, sums, fast, zeros);
        for (; zeros != 0; zeros &= zeros - 1) zero(i, j0 + static_cast<size_t>(std::countr_zero(zeros)));
      }
      if (uniform) continue;
      for (size_t c = 0; c < cols_here; ++c) {
        if (form[c] == Form::zero) zero(i, j0 + c);
        if (form[c] == Form::slow) slow(i, j0 + c);
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

// hi + mid + lo rounded once to fp32 (nearest even, as the fp32 path's options say); sets bit
// `bit` of `zeros` where it is an exact zero.
//
// Without an exact value where it can: with (h, e) = TwoSum(hi, mid) (exact) and w = e + lo
// rounded to odd, the sum is h + z with z = e + lo. Where |w| <= |h| / 4, |z| < |h| / 2: the
// sum's binade is at most one below h's, so every fp32 rounding boundary near it (a midpoint, a
// multiple of 2^(eh - 26), or of 2^-150 where subnormal) differs from h by a multiple of ulp(h) =
// 2^(eh - 52), a multiple of 2 ulp(w) (w is two binades below h); rounding to odd leaves z and w
// strictly between the same two even multiples of ulp(w) (or w = z), so no boundary lies between
// h + z and h + w: both round alike, and h + w through sum_rounded_to_fp32 rounds correctly.
float sum3_rounded_to_fp32(double hi, double mid, double lo, const fp::RoundingOptions& options, uint32_t& zeros,
                           size_t bit) {
  const double h = hi + mid, v = h - hi, e = (hi - (h - v)) + (mid - v);
  const double w = fp::sum_rounded_to_odd(e, lo);
  if (h != 0 && std::fabs(w) * 4 <= std::fabs(h)) return fp::sum_rounded_to_fp32(h, w);
  const fp::ExactValue exact = exact_sum3(hi, mid, lo, options.mode);
  zeros |= static_cast<uint32_t>(exact.kind == fp::ExactValue::Kind::zero) << bit;
  return static_cast<float>(fp::round_exact(exact, fp::fp32(), options).value);
}

// The first W outputs of a two-level block rounded to fp32 (nearest even); returns the exact
// zeros (bit c), whose sign the walk decides.
template <size_t W>
uint32_t round_two_level(const BlockSums& sums, float* out) {
  uint32_t zeros = 0;
  for (size_t c = 0; c < W; ++c) {
    out[c] = fp::sum_rounded_to_fp32(sums.hi[c], sums.lo[c]);
    zeros |= static_cast<uint32_t>(sums.hi[c] + sums.lo[c] == 0) << c;
  }
  return zeros;
}

}  // namespace

void exact_gemm_values(const float* a, const float* b, size_t m, size_t n, size_t k, fp::Mode mode,
                       const std::function<void(size_t, size_t, const fp::ExactValue&)>& sink) {
  exact_gemm_walk(a, b, m, n, k, mode, sink,
                  [&](size_t i, size_t j0, size_t, int levels, const BlockSums& sums, uint32_t fast, uint32_t& zeros) {
                    for (; fast != 0; fast &= fast - 1) {
                      const auto c = static_cast<size_t>(std::countr_zero(fast));
                      const fp::ExactValue exact = levels == 2 ? fp::exact_sum(sums.hi[c], sums.lo[c], mode)
                                                               : exact_sum3(sums.hi[c], sums.mid[c], sums.lo[c], mode);
                      // The sign of an exact zero depends on the products' signs: the walk signs it.
                      if (exact.kind == fp::ExactValue::Kind::zero)
                        zeros |= uint32_t{1} << c;
                      else
                        sink(i, j0 + c, exact);
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
        [&](size_t i, size_t j0, size_t width, int levels, const BlockSums& sums, uint32_t fast, uint32_t& zeros) {
          float out[kMaxCols];
          uint32_t sum_zeros = 0;
          if (levels == 2) {  // all at once (vectorised), those not fast left unread
            sum_zeros = width == kMaxCols ? round_two_level<kMaxCols>(sums, out) : round_two_level<kMinCols>(sums, out);
          } else {
            for (uint32_t todo = fast; todo != 0; todo &= todo - 1) {
              const auto cc = static_cast<size_t>(std::countr_zero(todo));
              out[cc] = sum3_rounded_to_fp32(sums.hi[cc], sums.mid[cc], sums.lo[cc], options, sum_zeros, cc);
            }
          }
          zeros = sum_zeros & fast;
          float* row = c + i * n + j0;
          if (fast == static_cast<uint32_t>((uint64_t{1} << width) - 1) && zeros == 0) {
            if (width == kMaxCols)
              std::copy_n(out, kMaxCols, row);
            else
              std::copy_n(out, kMinCols, row);
            return;
          }
          for (uint32_t todo = fast & ~zeros; todo != 0; todo &= todo - 1) {
            const auto cc = static_cast<size_t>(std::countr_zero(todo));
            row[cc] = out[cc];
          }
        });
    return;
  }
  exact_gemm_values(a, b, m, n, k, options.mode, round);
}

}  // namespace fplab::sim
