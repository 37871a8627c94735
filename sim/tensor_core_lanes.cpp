// fused_multiply_add_lanes (sim/tensor_core.hpp): the fused step on many lanes at once.
//
// Assumptions: host doubles are IEEE binary64 with round-to-nearest-even. A lane takes the
// lane form when its accumulator and factors are finite with exponents in [-480, 480] and its
// products are exact in a double (checked per product by an FMA residual). Then every reference
// exponent lies within [-960, 962], the grid 2^(top - F) and its inverse are normal doubles, each
// term scaled to grid units is exact (or below one unit, where truncation gives zero either
// way), and the cut terms are integers below 2^(F + 2) whose sum, with F + 2 + bit_width(count +
// 1) <= 53, is exact in a double; sum * 2^(top - F) is then the exact value the scalar step
// rounds. Everything else (NaN, inf, huge or tiny exponents, inexact products, other truncation
// or alignment variants, wide F) is the scalar step itself, lane by lane.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512DQ__)
#include <immintrin.h>
#define FPLAB_FUSED_LANES_AVX512 1
// GCC 12 warns about the undefined pass-through operand inside its own unmasked AVX-512
// intrinsics (GCC PR 105593); nothing of ours is uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "fp/round.hpp"
#include "sim/tensor_core.hpp"

namespace fplab::sim {
namespace {

constexpr int kLaneExponentLimit = 480;
constexpr int kNoExponent = -(1 << 20);  // no nonzero term seen
constexpr size_t kLaneBlock = 16;

int raw_exponent(double x) { return static_cast<int>((std::bit_cast<uint64_t>(x) >> 52) & 0x7ff) - 1023; }
double power_of_two(int e) { return std::bit_cast<double>(static_cast<uint64_t>(e + 1023) << 52); }  // |e| <= 1022
bool in_range(double x, int e) { return x == 0 || (e >= -kLaneExponentLimit && e <= kLaneExponentLimit); }

// One lane after alignment and summation: the largest reference exponent (kNoExponent: every
// term was zero), the sum of cut terms in units of 2^(top - F), which signs of zero came.
struct LaneSum {
  int top = kNoExponent;
  double units = 0;
  bool fast = true, positive_zero = false, negative_zero = false;
};

struct LaneForm {
  int fraction_bits, input_emin, output_emin;
  const FusedAddSpec* spec;

  // The rounded result of a fast lane, as the scalar step finishes it.
  double finish(const LaneSum& s) const {
    const fp::Mode mode = spec->output_mode;
    const bool no_terms = s.top == kNoExponent;
    if (no_terms || s.units == 0) {  // IEEE's sign of an exact zero
      const bool negative = no_terms ? s.negative_zero && (!s.positive_zero || mode == fp::Mode::rd) : mode == fp::Mode::rd;
      return fp::round_exact(fp::ExactValue::zero(negative), spec->output, {mode}).value;
    }
    return fp::round_double(s.units * power_of_two(s.top - fraction_bits), spec->output, {mode}).value;
  }

  // Alignment and summation for lanes [0, n) of a block starting at column l0, portably.
  void sum_block(const double* c, const double* a, const double* b, size_t count, size_t width, size_t n,
                 LaneSum* sums) const {
    for (size_t l = 0; l < n; ++l) {  // the accumulator: its own exponent, clamped at the output's emin
      const int e = raw_exponent(c[l]);
      sums[l] = LaneSum{};
      sums[l].fast = in_range(c[l], e);  // excludes inf and NaN (e = 1024)
      if (c[l] != 0) sums[l].top = std::max(e, output_emin);
      else (std::signbit(c[l]) ? sums[l].negative_zero : sums[l].positive_zero) = true;
    }
    for (size_t i = 0; i < count; ++i)  // the largest reference exponent ea + eb of nonzero products
      for (size_t l = 0; l < n; ++l) {
        const double x = a[i * width + l], y = b[i * width + l], p = x * y;
        const int ex = raw_exponent(x), ey = raw_exponent(y);
        LaneSum& s = sums[l];
        s.fast = s.fast && in_range(x, ex) && in_range(y, ey) && std::fma(x, y, -p) == 0;
        if (p != 0) s.top = std::max(s.top, std::max(ex, input_emin) + std::max(ey, input_emin));
        else (std::signbit(p) ? s.negative_zero : s.positive_zero) = true;
      }
    for (size_t l = 0; l < n; ++l) {  // cut every term to the grid 2^(top - F) and add exactly
      LaneSum& s = sums[l];
      if (!s.fast) continue;
      const double scale = power_of_two(fraction_bits - (s.top == kNoExponent ? 0 : s.top));
      s.units = std::trunc(c[l] * scale);
      for (size_t i = 0; i < count; ++i) s.units += std::trunc(a[i * width + l] * b[i * width + l] * scale);
    }
  }

#ifdef FPLAB_FUSED_LANES_AVX512
  // The same for the 8 lanes in `live`, in AVX-512 registers, for an fp32 output rounded toward
  // zero or to nearest: the fast lanes are finished and stored; returns the others.
  __mmask8 fp32_8_lanes(double* c, const double* a, const double* b, size_t count, size_t width, __mmask8 live) const {
    const __m512i exponent_mask = _mm512_set1_epi64(0x7ff), bias = _mm512_set1_epi64(1023);
    const __m512i low = _mm512_set1_epi64(-kLaneExponentLimit), high = _mm512_set1_epi64(kLaneExponentLimit);
    const __m512i input_min = _mm512_set1_epi64(input_emin), none = _mm512_set1_epi64(kNoExponent);
    const __m512i f = _mm512_set1_epi64(fraction_bits);
    const __m512d zero = _mm512_setzero_pd();
    auto exponent = [&](__m512d x) {
      return _mm512_sub_epi64(_mm512_and_si512(_mm512_srli_epi64(_mm512_castpd_si512(x), 52), exponent_mask), bias);
    };
    auto ok = [&](__m512d x, __m512i e) -> __mmask8 {
      return _mm512_cmp_pd_mask(x, zero, _CMP_EQ_OQ) |
             (_mm512_cmp_epi64_mask(e, low, _MM_CMPINT_NLT) & _mm512_cmp_epi64_mask(e, high, _MM_CMPINT_LE));
    };
    auto negative = [](__m512d x) { return _mm512_movepi64_mask(_mm512_castpd_si512(x)); };

    const __m512d acc = _mm512_maskz_loadu_pd(live, c);
    const __m512i acc_exponent = exponent(acc);
    __mmask8 fast = ok(acc, acc_exponent);
    const __mmask8 acc_zero = _mm512_cmp_pd_mask(acc, zero, _CMP_EQ_OQ);
    __m512i top = _mm512_mask_blend_epi64(acc_zero, _mm512_max_epi64(acc_exponent, _mm512_set1_epi64(output_emin)), none);
    __mmask8 positive_zero = acc_zero & ~negative(acc), negative_zero = acc_zero & negative(acc);
    for (size_t i = 0; i < count; ++i) {
      const __m512d x = _mm512_maskz_loadu_pd(live, a + i * width), y = _mm512_maskz_loadu_pd(live, b + i * width);
      const __m512d p = _mm512_mul_pd(x, y);
      const __m512i ex = exponent(x), ey = exponent(y);
      fast &= ok(x, ex) & ok(y, ey) & _mm512_cmp_pd_mask(_mm512_fmsub_pd(x, y, p), zero, _CMP_EQ_OQ);
      const __mmask8 p_zero = _mm512_cmp_pd_mask(p, zero, _CMP_EQ_OQ);
      const __m512i e = _mm512_add_epi64(_mm512_max_epi64(ex, input_min), _mm512_max_epi64(ey, input_min));
      top = _mm512_mask_max_epi64(top, static_cast<__mmask8>(~p_zero), top, e);
      positive_zero |= p_zero & ~negative(p);
      negative_zero |= p_zero & negative(p);
    }
    fast &= live;
    const __mmask8 no_terms = _mm512_cmp_epi64_mask(top, none, _MM_CMPINT_EQ);
    const __m512i grid_top = _mm512_maskz_mov_epi64(fast & ~no_terms, top);
    const __m512d scale = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(_mm512_sub_epi64(f, grid_top), bias), 52));
    constexpr int kTruncate = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    __m512d units = _mm512_roundscale_pd(_mm512_mul_pd(acc, scale), kTruncate);
    for (size_t i = 0; i < count; ++i) {
      const __m512d x = _mm512_maskz_loadu_pd(live, a + i * width), y = _mm512_maskz_loadu_pd(live, b + i * width);
      units = _mm512_add_pd(units, _mm512_roundscale_pd(_mm512_mul_pd(_mm512_mul_pd(x, y), scale), kTruncate));
    }
    const __m512d unit = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(_mm512_sub_epi64(grid_top, f), bias), 52));
    const __m512d v = _mm512_mul_pd(units, unit);
    const __m256 rounded = spec->output_mode == fp::Mode::rz
                               ? _mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
                               : _mm512_cvt_roundpd_ps(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    // Exact zeros (the mode is not rd): +0 when nonzero terms cancel; only zeros: -0 if all were.
    const __mmask8 zero_result = no_terms | _mm512_cmp_pd_mask(units, zero, _CMP_EQ_OQ);
    const __m512d signed_zero = _mm512_mask_blend_pd(no_terms & negative_zero & ~positive_zero, zero, _mm512_set1_pd(-0.0));
    _mm512_mask_storeu_pd(c, fast, _mm512_mask_blend_pd(zero_result, _mm512_cvtps_pd(rounded), signed_zero));
    return live & ~fast;
  }
#endif
};

}  // namespace

void fused_multiply_add_lanes(double* acc, const double* a, const double* b, size_t count, size_t width,
                              const FusedAddSpec& spec) {
  check_fused_add_spec(spec);
  std::vector<double> converted;
  if (spec.input != fp::fp64()) {  // the scalar step's conversion, once (idempotent on format values)
    const fp::RoundingOptions to_input{spec.input_mode};
    converted.resize(2 * count * width);
    for (size_t i = 0; i < count * width; ++i) {
      converted[i] = fp::round_double(a[i], spec.input, to_input).value;
      converted[count * width + i] = fp::round_double(b[i], spec.input, to_input).value;
    }
    a = converted.data();
    b = a + count * width;
  }
  auto scalar_lane = [&](size_t l) {
    std::vector<double> x(count), y(count);
    for (size_t i = 0; i < count; ++i) x[i] = a[i * width + l], y[i] = b[i * width + l];
    acc[l] = fused_multiply_add(acc[l], x, y, spec);
  };
  if (spec.truncation != AlignedTruncation::toward_zero || !spec.accumulator_in_alignment ||
      spec.fraction_bits + 2 + std::bit_width(count + 1) > 53) {
    for (size_t l = 0; l < width; ++l) scalar_lane(l);
    return;
  }
  const LaneForm form{spec.fraction_bits, spec.input.emin(), spec.output.emin(), &spec};
#ifdef FPLAB_FUSED_LANES_AVX512
  if (spec.output == fp::fp32() && (spec.output_mode == fp::Mode::rz || spec.output_mode == fp::Mode::rne)) {
    for (size_t l0 = 0; l0 < width; l0 += 8) {
      const size_t n = std::min<size_t>(8, width - l0);
      const __mmask8 left = form.fp32_8_lanes(acc + l0, a + l0, b + l0, count, width, static_cast<__mmask8>((1u << n) - 1));
      for (size_t l = 0; l < n; ++l)
        if ((left >> l) & 1) scalar_lane(l0 + l);
    }
    return;
  }
#endif
  LaneSum sums[kLaneBlock];
  for (size_t l0 = 0; l0 < width; l0 += kLaneBlock) {
    const size_t n = std::min(kLaneBlock, width - l0);
    form.sum_block(acc + l0, a + l0, b + l0, count, width, n, sums);
    for (size_t l = 0; l < n; ++l) {
      if (sums[l].fast) acc[l0 + l] = form.finish(sums[l]);
      else scalar_lane(l0 + l);
    }
  }
}

}  // namespace fplab::sim
