// Assumptions: IEEE binary64 with round-to-nearest-even and FMA on the host; no flush-to-zero.
//
// Fast path, per output, with no branch or carry per product (error-free extraction, after Rump
// and Demmel-Nguyen): let every |a[i][t]| < 2^ea(i) and |b[t][j]| < 2^eb(j), T = ea + eb, and
// anchor S1 at C1 = 1.5 * 2^s with s = T + ceil(log2(k + 1)) + 2. For each product p = a*b
// (exact in binary64):
//     t = fma(a, b, S1)      (= fl(S1 + p): S1 stays inside [2^s, 2^(s+1)) for all k terms)
//     q = t - S1             exact: p rounded to the grid 2^(s-52)
//     r = fma(a, b, -q)      exact: p - q, |r| <= 2^(s-53)
//     S1 = t;  S2 += r       S2 is exact when every r is a multiple of the smallest product ulp
//                            u and k * 2^(s-53) < 2^53 * u, i.e. when the dynamic range of row i
//                            and column j is small enough (checked per output before the loop).
// The exact dot product is then (S1 - C1) + S2 (the subtraction is exact), rounded once.
// Outputs that fail the range check, sum to exactly zero (whose sign IEEE ties to the products),
// or any non-finite input go through fp::exact_dot instead.
#include "sim/exact_gemm.hpp"

#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "fp/arithmetic.hpp"
#include "fp/exact_dot.hpp"
#include "fp/round.hpp"
#include "fp/ieee_bits.hpp"

namespace fplab::sim {
namespace {

constexpr size_t kRows = 4, kCols = 16;

// Exponent facts of a vector of floats: every nonzero |x| < 2^top, every nonzero x is a
// multiple of 2^ulp_low; `finite` false if any element is inf/NaN; `any_nonzero`.
struct Range {
  int top = -1000, ulp_low = 1000;
  bool finite = true, any_nonzero = false;
  void add(float x) {
    using namespace fp::binary32;
    const uint32_t bits = std::bit_cast<uint32_t>(x);
    const int biased = biased_exponent(bits);
    if (biased == static_cast<int>(kExponentMask)) {
      finite = false;
      return;
    }
    if ((bits & kMagnitudeMask) == 0) return;
    any_nonzero = true;
    top = std::max(top, std::ilogb(x) + 1);
    // The lowest set bit of the significand gives the finest grid x lies on.
    const uint32_t significand = biased ? ((bits & kFractionMask) | kHiddenBit) : (bits & kFractionMask);
    ulp_low =
        std::min(ulp_low, (biased ? biased - kBias - kFractionBits : kSubnormalScale) + std::countr_zero(significand));
  }
};

int ceil_log2(size_t x) { return static_cast<int>(std::bit_width(x - 1)); }

// Accumulates the tile rows [i0, i0+4) x columns [j0, j0+16) over all k into s1 (anchored) and s2.
void tile_kernel(const double* a_rows[kRows], const double* b, size_t ldb, size_t k, double s1[kRows][kCols],
                 double s2[kRows][kCols]) {
#if defined(__AVX512F__)
  __m512d S1[kRows][2], S2[kRows][2];
  for (size_t r = 0; r < kRows; ++r)
    for (int v = 0; v < 2; ++v) {
      S1[r][v] = _mm512_loadu_pd(&s1[r][8 * v]);
      S2[r][v] = _mm512_setzero_pd();
    }
  for (size_t t = 0; t < k; ++t) {
    const __m512d b0 = _mm512_loadu_pd(b + t * ldb), b1 = _mm512_loadu_pd(b + t * ldb + 8);
    for (size_t r = 0; r < kRows; ++r) {
      const __m512d av = _mm512_set1_pd(a_rows[r][t]);
      const __m512d t0 = _mm512_fmadd_pd(av, b0, S1[r][0]), t1 = _mm512_fmadd_pd(av, b1, S1[r][1]);
      const __m512d q0 = _mm512_sub_pd(t0, S1[r][0]), q1 = _mm512_sub_pd(t1, S1[r][1]);
      S2[r][0] = _mm512_add_pd(S2[r][0], _mm512_fmsub_pd(av, b0, q0));
      S2[r][1] = _mm512_add_pd(S2[r][1], _mm512_fmsub_pd(av, b1, q1));
      S1[r][0] = t0;
      S1[r][1] = t1;
    }
  }
  for (size_t r = 0; r < kRows; ++r)
    for (int v = 0; v < 2; ++v) {
      _mm512_storeu_pd(&s1[r][8 * v], S1[r][v]);
      _mm512_storeu_pd(&s2[r][8 * v], S2[r][v]);
    }
#elif defined(__AVX2__) && defined(__FMA__)
  // Four passes of 4 columns: 4 rows' S1 and S2 in 8 ymm registers (all 16 columns would need 32).
  for (size_t c0 = 0; c0 < kCols; c0 += 4) {
    __m256d S1[kRows], S2[kRows];
    for (size_t r = 0; r < kRows; ++r) S1[r] = _mm256_loadu_pd(&s1[r][c0]), S2[r] = _mm256_setzero_pd();
    for (size_t t = 0; t < k; ++t) {
      const __m256d bv = _mm256_loadu_pd(b + t * ldb + c0);
      for (size_t r = 0; r < kRows; ++r) {
        const __m256d av = _mm256_broadcast_sd(a_rows[r] + t);
        const __m256d tt = _mm256_fmadd_pd(av, bv, S1[r]);
        S2[r] = _mm256_add_pd(S2[r], _mm256_fmsub_pd(av, bv, _mm256_sub_pd(tt, S1[r])));
        S1[r] = tt;
      }
    }
    for (size_t r = 0; r < kRows; ++r) _mm256_storeu_pd(&s1[r][c0], S1[r]), _mm256_storeu_pd(&s2[r][c0], S2[r]);
  }
#else
  for (size_t r = 0; r < kRows; ++r)
    for (size_t c = 0; c < kCols; ++c) s2[r][c] = 0;
  for (size_t t = 0; t < k; ++t)
    for (size_t r = 0; r < kRows; ++r)
      for (size_t c = 0; c < kCols; ++c) {
        const double av = a_rows[r][t], bv = b[t * ldb + c];
        const double tt = std::fma(av, bv, s1[r][c]);
        const double q = tt - s1[r][c];
        s2[r][c] += std::fma(av, bv, -q);
        s1[r][c] = tt;
      }
#endif
}

// The walk of exact_gemm_values: slow(i, j, value) takes an output the exact dot product gives;
// fast(i, j, hi, lo) one whose exact value is hi + lo (two doubles, exact sum), and returns false
// to hand it to the exact dot instead (an exact zero, whose sign IEEE ties to the products').
template <class Slow, class Fast>
void exact_gemm_walk(const float* a, const float* b, size_t m, size_t n, size_t k, fp::Mode mode, Slow&& sink,
                     Fast&& fast_sink) {
  // Transposed B for the slow path; doubles for the fast one.
  std::vector<float> bt(n * k);
  for (size_t t = 0; t < k; ++t)
    for (size_t j = 0; j < n; ++j) bt[j * k + t] = b[t * n + j];
  auto slow = [&](size_t i, size_t j) { sink(i, j, fp::exact_dot(a + i * k, &bt[j * k], k, mode)); };
  std::vector<Range> rows(m), cols(n);
  bool finite = true;
  for (size_t i = 0; i < m; ++i)
    for (size_t t = 0; t < k; ++t) rows[i].add(a[i * k + t]);
  for (size_t t = 0; t < k; ++t)
    for (size_t j = 0; j < n; ++j) cols[j].add(b[t * n + j]);
  for (const auto& r : rows) finite = finite && r.finite;
  for (const auto& r : cols) finite = finite && r.finite;
  if (!finite || k == 0) {
    for (size_t i = 0; i < m; ++i)
      for (size_t j = 0; j < n; ++j) slow(i, j);
    return;
  }

  const int log_k = ceil_log2(k + 1);
  const size_t ldb = (n + kCols - 1) / kCols * kCols;
  std::vector<double> ad(m * k), bd(k * ldb, 0.0), zero_row(k, 0.0);
  for (size_t x = 0; x < m * k; ++x) ad[x] = a[x];
  for (size_t t = 0; t < k; ++t)
    for (size_t j = 0; j < n; ++j) bd[t * ldb + j] = b[t * n + j];

  double s1[kRows][kCols], s2[kRows][kCols];
  int anchor[kRows][kCols];
  for (size_t j0 = 0; j0 < n; j0 += kCols) {
    for (size_t i0 = 0; i0 < m; i0 += kRows) {
      const double* a_rows[kRows];
      for (size_t r = 0; r < kRows; ++r) {
        a_rows[r] = i0 + r < m ? &ad[(i0 + r) * k] : zero_row.data();
        for (size_t cc = 0; cc < kCols; ++cc) {
          const size_t i = i0 + r, j = j0 + cc;
          const bool live = i < m && j < n && rows[i].any_nonzero && cols[j].any_nonzero;
          anchor[r][cc] = live ? rows[i].top + cols[j].top + log_k + 2 : 0;
          s1[r][cc] = std::ldexp(1.5, anchor[r][cc]);
        }
      }
      tile_kernel(a_rows, &bd[j0], ldb, k, s1, s2);
      for (size_t r = 0; r < kRows && i0 + r < m; ++r)
        for (size_t cc = 0; cc < kCols && j0 + cc < n; ++cc) {
          const size_t i = i0 + r, j = j0 + cc;
          const int s = anchor[r][cc];
          // S2 exact: k * 2^(s-53) < 2^53 * 2^(ulp_low(a) + ulp_low(b)), with a bit to spare.
          const bool fast =
              rows[i].any_nonzero && cols[j].any_nonzero && s - 53 + log_k < 52 + rows[i].ulp_low + cols[j].ulp_low;
          if (!fast) {
            slow(i, j);
            continue;
          }
          if (!fast_sink(i, j, s1[r][cc] - std::ldexp(1.5, s), s2[r][cc])) slow(i, j);
        }
    }
  }
}

}  // namespace

void exact_gemm_values(const float* a, const float* b, size_t m, size_t n, size_t k, fp::Mode mode,
                       const std::function<void(size_t, size_t, const fp::ExactValue&)>& sink) {
  exact_gemm_walk(a, b, m, n, k, mode, sink, [&](size_t i, size_t j, double hi, double lo) {
    const fp::ExactValue exact = fp::exact_sum(hi, lo, mode);
    // The sign of an exact zero depends on the products' signs: the slow path knows them.
    if (exact.kind == fp::ExactValue::Kind::zero) return false;
    sink(i, j, exact);
    return true;
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
    // zero) goes to the exact dot for its sign.
    exact_gemm_walk(a, b, m, n, k, options.mode, round, [&](size_t i, size_t j, double hi, double lo) {
      if (hi + lo == 0) return false;
      c[i * n + j] = fp::sum_rounded_to_fp32(hi, lo);
      return true;
    });
    return;
  }
  exact_gemm_values(a, b, m, n, k, options.mode, round);
}

}  // namespace fplab::sim
