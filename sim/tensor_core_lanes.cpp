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
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#if defined(__AVX512F__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include <immintrin.h>
#define FPLAB_FUSED_LANES_AVX512 1
// GCC 12 warns about the undefined pass-through operand inside its own unmasked AVX-512
// intrinsics (GCC PR 105593; as "maybe" or, depending on inlining, as certain); nothing of ours
// is uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#elif defined(__AVX2__)
#include <immintrin.h>
#define FPLAB_FUSED_LANES_AVX2 1
#endif

#include "fp/round.hpp"
#include "sim/fused_factor_conversion.hpp"
#include "sim/fused_grid.hpp"
#include "sim/tensor_core.hpp"
#include "fp/ieee_bits.hpp"

namespace fplab::sim {
namespace {

constexpr int kLaneExponentLimit = 480;
constexpr int kNoExponent = -(1 << 20);  // no nonzero term seen
constexpr size_t kLaneBlock = 16;
// Exponent codes of fp32 factors in the GEMM tile form: a term's code is the sum of its factors'.
// (Only the vector forms read some: [[maybe_unused]] for the baseline x86-64 build.)
[[maybe_unused]] constexpr int64_t kZeroCode = kNoExponent, kSpecialCode = int64_t{1} << 22;
[[maybe_unused]] constexpr int64_t kNoTermsBelow = kNoExponent / 2, kSpecialFrom = kSpecialCode / 2;

int raw_exponent(double x) { return fp::binary64::biased_exponent(std::bit_cast<uint64_t>(x)) - fp::binary64::kBias; }
using fp::binary64::power_of_two;  // |e| <= 1022
bool in_range(double x, int e) { return x == 0 || (e >= -kLaneExponentLimit && e <= kLaneExponentLimit); }

// One lane after alignment and summation: the largest reference exponent (kNoExponent: every
// term was zero), the sum of cut terms in units of 2^(top - F), which signs of zero came.
struct LaneSum {
  int top = kNoExponent;
  double units = 0;
  bool fast = true, positive_zero = false, negative_zero = false;
};

// fp32 results rounded toward zero or to nearest: the host's own conversion does the rounding.
bool host_fp32_output(const FusedAddSpec& spec) {
  return spec.output == fp::fp32() && (spec.output_mode == fp::Mode::rz || spec.output_mode == fp::Mode::rne);
}

// x rounded to fp32 (RNE: the host's conversion; RZ: its result, stepped toward zero where it
// rounded away), as fp::round_double rounds it with subnormals kept and overflow to infinity
// (RZ: to the largest finite value).
double host_fp32_round(double x, fp::Mode mode) {
  float f = static_cast<float>(x);
  if (mode == fp::Mode::rz && std::fabs(static_cast<double>(f)) > std::fabs(x)) f = std::nextafter(f, 0.0f);
  return f;
}

struct LaneForm {
  int fraction_bits, input_emin, output_emin;
  const FusedAddSpec* spec;
  bool fp32_output = false;  // host_fp32_output(*spec)

  // The rounded result of a fast lane, as the scalar step finishes it.
  double finish(const LaneSum& s) const {
    const fp::Mode mode = spec->output_mode;
    const bool no_terms = s.top == kNoExponent;
    if (no_terms || s.units == 0) {  // IEEE's sign of an exact zero
      const bool negative =
          no_terms ? s.negative_zero && (!s.positive_zero || mode == fp::Mode::rd) : mode == fp::Mode::rd;
      return fp::round_exact(fp::ExactValue::zero(negative), spec->output, {mode}).value;
    }
    const double exact = s.units * power_of_two(s.top - fraction_bits);
    return fp32_output ? host_fp32_round(exact, mode) : fp::round_double(exact, spec->output, {mode}).value;
  }

  // Alignment and summation for lanes [0, n) of a block starting at column l0, portably.
  void sum_block(const double* c, const double* a, const double* b, size_t count, size_t width, size_t n,
                 LaneSum* sums) const {
    for (size_t l = 0; l < n; ++l) {  // the accumulator: its own exponent, clamped at the output's emin
      const int e = raw_exponent(c[l]);
      sums[l] = LaneSum{};
      sums[l].fast = in_range(c[l], e);  // excludes inf and NaN (e = 1024)
      if (c[l] != 0)
        sums[l].top = std::max(e, output_emin);
      else
        (std::signbit(c[l]) ? sums[l].negative_zero : sums[l].positive_zero) = true;
    }
    for (size_t i = 0; i < count; ++i)  // the largest reference exponent ea + eb of nonzero products
      for (size_t l = 0; l < n; ++l) {
        const double x = a[i * width + l], y = b[i * width + l], p = x * y;
        const int ex = raw_exponent(x), ey = raw_exponent(y);
        LaneSum& s = sums[l];
        s.fast = s.fast && in_range(x, ex) && in_range(y, ey) && std::fma(x, y, -p) == 0;
        if (p != 0)
          s.top = std::max(s.top, std::max(ex, input_emin) + std::max(ey, input_emin));
        else
          (std::signbit(p) ? s.negative_zero : s.positive_zero) = true;
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
  // The same for V vectors of 8 lanes (live[v] says which lanes of vector v are in use) in
  // AVX-512 registers, for an fp32 output rounded toward zero or to nearest: the fast lanes are
  // finished and stored at c + 8 v; left[v] gets the others. load(i, v) gives term i's factors
  // (x, y) for vector v. kCoded: code(i, v) gives the term's reference exponent, or a code that
  // adds up to one below kNoTermsBelow (a zero factor) or at or above kSpecialFrom (inf or NaN),
  // and the factors are known to give exact products in range (fp32 values); lanes with a special
  // are then left to the caller. Otherwise every factor is checked here. Several vectors at once give
  // the core independent chains to overlap.
  template <size_t V, bool kCoded, class Load, class Code>
  void fp32_lanes(double* c, size_t count, const __mmask8* live, __mmask8* left, Load&& load, Code&& code) const {
    const __m512i exponent_mask = _mm512_set1_epi64(fp::binary64::kExponentMask),
                  bias = _mm512_set1_epi64(fp::binary64::kBias);
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

    __m512d acc[V], units[V], scale[V];
    __m512i top[V];
    __mmask8 fast[V], positive_zero[V], negative_zero[V];
    for (size_t v = 0; v < V; ++v) {
      acc[v] = _mm512_maskz_loadu_pd(live[v], c + 8 * v);
      const __m512i e = exponent(acc[v]);
      fast[v] = ok(acc[v], e);
      const __mmask8 acc_zero = _mm512_cmp_pd_mask(acc[v], zero, _CMP_EQ_OQ);
      top[v] = _mm512_mask_blend_epi64(acc_zero, _mm512_max_epi64(e, _mm512_set1_epi64(output_emin)), none);
      positive_zero[v] = acc_zero & ~negative(acc[v]);
      negative_zero[v] = acc_zero & negative(acc[v]);
    }
    for (size_t i = 0; i < count; ++i)
      for (size_t v = 0; v < V; ++v) {
        if constexpr (kCoded) {
          top[v] = _mm512_max_epi64(top[v], code(i, v));
        } else {
          const auto [x, y] = load(i, v);
          const __m512d p = _mm512_mul_pd(x, y);
          const __m512i ex = exponent(x), ey = exponent(y);
          fast[v] &= ok(x, ex) & ok(y, ey) & _mm512_cmp_pd_mask(_mm512_fmsub_pd(x, y, p), zero, _CMP_EQ_OQ);
          const __mmask8 p_zero = _mm512_cmp_pd_mask(p, zero, _CMP_EQ_OQ);
          const __m512i e = _mm512_add_epi64(_mm512_max_epi64(ex, input_min), _mm512_max_epi64(ey, input_min));
          top[v] = _mm512_mask_max_epi64(top[v], static_cast<__mmask8>(~p_zero), top[v], e);
          positive_zero[v] |= p_zero & ~negative(p);
          negative_zero[v] |= p_zero & negative(p);
        }
      }
    constexpr int kTruncate = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    __mmask8 no_terms[V];
    __m512i grid_top[V];
    for (size_t v = 0; v < V; ++v) {
      if constexpr (kCoded) {  // zero-only lanes stay: their sums of signed zeros are the result
        fast[v] &= _mm512_cmp_epi64_mask(top[v], _mm512_set1_epi64(kSpecialFrom), _MM_CMPINT_LT);
        no_terms[v] = _mm512_cmp_epi64_mask(top[v], _mm512_set1_epi64(kNoTermsBelow), _MM_CMPINT_LT);
      } else {
        no_terms[v] = _mm512_cmp_epi64_mask(top[v], none, _MM_CMPINT_EQ);
      }
      fast[v] &= live[v];
      grid_top[v] = _mm512_maskz_mov_epi64(fast[v] & ~no_terms[v], top[v]);
      scale[v] = _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(_mm512_sub_epi64(f, grid_top[v]), bias), 52));
      units[v] = _mm512_roundscale_pd(_mm512_mul_pd(acc[v], scale[v]), kTruncate);
    }
    for (size_t i = 0; i < count; ++i)
      for (size_t v = 0; v < V; ++v) {
        const auto [x, y] = load(i, v);
        units[v] =
            _mm512_add_pd(units[v], _mm512_roundscale_pd(_mm512_mul_pd(_mm512_mul_pd(x, y), scale[v]), kTruncate));
      }
    for (size_t v = 0; v < V; ++v) {
      const __m512d unit =
          _mm512_castsi512_pd(_mm512_slli_epi64(_mm512_add_epi64(_mm512_sub_epi64(grid_top[v], f), bias), 52));
      const __m512d value = _mm512_mul_pd(units[v], unit);
      const __m256 rounded = spec->output_mode == fp::Mode::rz
                                 ? _mm512_cvt_roundpd_ps(value, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)
                                 : _mm512_cvt_roundpd_ps(value, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      // Exact zeros (the mode is not rd): +0 when nonzero terms cancel; only zeros: -0 if all were.
      // Coded: the units already are those zeros (IEEE sums of the terms' signed zeros give -0
      // only when every term is -0, and a lane with a nonzero term cancels to +0), so keep them.
      const __mmask8 zero_result = kCoded ? 0 : no_terms[v] | _mm512_cmp_pd_mask(units[v], zero, _CMP_EQ_OQ);
      const __m512d signed_zero =
          _mm512_mask_blend_pd(no_terms[v] & negative_zero[v] & ~positive_zero[v], zero, _mm512_set1_pd(-0.0));
      _mm512_mask_storeu_pd(c + 8 * v, fast[v],
                            _mm512_mask_blend_pd(zero_result, _mm512_cvtps_pd(rounded), signed_zero));
      left[v] = live[v] & ~fast[v];
    }
  }
#endif

#ifdef FPLAB_FUSED_LANES_AVX2
  // fp32_lanes<4, true> for hosts with AVX2 but not AVX-512: 16 lanes of one tile row (the first
  // `lanes` in use) in 4 vectors of 4 doubles; term i's factors are a_values[i] (the row's) and
  // b_rows[i][c0 + lane], its exponent codes a_codes[i] + b_code_rows[i][c0 + lane] (int32: every
  // code sum fits; all 16 lanes of a row are read, used or not). The fast lanes are finished and stored at c; returns a
  // bit per lane left to the caller (an infinity or NaN among its factors or accumulator, or an accumulator out of
  // range). The same operations in the same order as the AVX-512 form, so the same values; the fp32 conversion is the
  // host's (round to nearest even), stepped toward zero for RZ where it rounded away, as host_fp32_round does.
  unsigned fp32_lanes_avx2(double* c, size_t count, size_t lanes, const double* a_values, const int32_t* a_codes,
                           const double* const* b_rows, const int32_t* const* b_code_rows, size_t c0) const {
    constexpr size_t V = 4;
    const __m256d zero = _mm256_setzero_pd();
    const __m256i bias = _mm256_set1_epi64x(fp::binary64::kBias), f = _mm256_set1_epi64x(fraction_bits);
    const __m256i lane_index = _mm256_setr_epi64x(0, 1, 2, 3);
    const __m256i low32 = _mm256_setr_epi32(0, 2, 4, 6, 0, 2, 4, 6);
    auto narrow = [&](__m256i x) { return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(x, low32)); };
    auto widen = [](__m128i x) { return _mm256_cvtepi32_epi64(x); };  // sign-extending: masks stay masks
    auto power = [&](__m256i e) { return _mm256_castsi256_pd(_mm256_slli_epi64(_mm256_add_epi64(e, bias), 52)); };

    __m256d acc[V], fast[V], live[V], units[V], scale[V];
    __m128i top[V];
    for (size_t v = 0; v < V; ++v) {
      live[v] = _mm256_castsi256_pd(_mm256_cmpgt_epi64(
          _mm256_set1_epi64x(static_cast<int64_t>(lanes) - static_cast<int64_t>(4 * v)), lane_index));
      acc[v] = _mm256_maskload_pd(c + 4 * v, _mm256_castpd_si256(live[v]));
      const __m256i bits = _mm256_castpd_si256(acc[v]);
      const __m128i e = _mm_sub_epi32(_mm_and_si128(narrow(_mm256_srli_epi64(bits, fp::binary64::kFractionBits)),
                                                    _mm_set1_epi32(fp::binary64::kExponentMask)),
                                      _mm_set1_epi32(fp::binary64::kBias));
      const __m256d acc_zero = _mm256_cmp_pd(acc[v], zero, _CMP_EQ_OQ);
      const __m128i in_range = _mm_and_si128(_mm_cmpgt_epi32(e, _mm_set1_epi32(-kLaneExponentLimit - 1)),
                                             _mm_cmplt_epi32(e, _mm_set1_epi32(kLaneExponentLimit + 1)));
      fast[v] = _mm256_or_pd(acc_zero, _mm256_castsi256_pd(widen(in_range)));
      top[v] = _mm_blendv_epi8(_mm_max_epi32(e, _mm_set1_epi32(output_emin)), _mm_set1_epi32(kNoExponent),
                               narrow(_mm256_castpd_si256(acc_zero)));
    }
    for (size_t i = 0; i < count; ++i) {
      const __m128i a_code = _mm_set1_epi32(a_codes[i]);
      const int32_t* b_code = b_code_rows[i] + c0;
      for (size_t v = 0; v < V; ++v)
        top[v] = _mm_max_epi32(
            top[v], _mm_add_epi32(a_code, _mm_loadu_si128(reinterpret_cast<const __m128i*>(b_code + 4 * v))));
    }
    constexpr int kTruncate = _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC;
    __m256i grid_top[V];
    for (size_t v = 0; v < V; ++v) {  // zero-only lanes stay: their sums of signed zeros are the result
      const __m128i ordinary = _mm_cmplt_epi32(top[v], _mm_set1_epi32(static_cast<int32_t>(kSpecialFrom)));
      const __m128i no_terms = _mm_cmplt_epi32(top[v], _mm_set1_epi32(static_cast<int32_t>(kNoTermsBelow)));
      fast[v] = _mm256_and_pd(_mm256_and_pd(fast[v], live[v]), _mm256_castsi256_pd(widen(ordinary)));
      const __m128i keep = _mm_andnot_si128(no_terms, narrow(_mm256_castpd_si256(fast[v])));
      grid_top[v] = widen(_mm_and_si128(top[v], keep));
      scale[v] = power(_mm256_sub_epi64(f, grid_top[v]));
      units[v] = _mm256_round_pd(_mm256_mul_pd(acc[v], scale[v]), kTruncate);
    }
    for (size_t i = 0; i < count; ++i) {
      const __m256d x = _mm256_broadcast_sd(a_values + i);
      const double* y = b_rows[i] + c0;
      for (size_t v = 0; v < V; ++v)
        units[v] = _mm256_add_pd(
            units[v],
            _mm256_round_pd(_mm256_mul_pd(_mm256_mul_pd(x, _mm256_loadu_pd(y + 4 * v)), scale[v]), kTruncate));
    }
    const bool toward_zero = spec->output_mode == fp::Mode::rz;
    const __m256d magnitude =
        _mm256_castsi256_pd(_mm256_set1_epi64x(static_cast<int64_t>(fp::binary64::kMagnitudeMask)));
    unsigned left = 0;
    for (size_t v = 0; v < V; ++v) {
      const __m256d value = _mm256_mul_pd(units[v], power(_mm256_sub_epi64(grid_top[v], f)));
      __m128 rounded = _mm256_cvtpd_ps(value);
      if (toward_zero) {  // one step toward zero where the conversion rounded away (inf -> the largest finite)
        const __m256d away = _mm256_cmp_pd(_mm256_and_pd(_mm256_cvtps_pd(rounded), magnitude),
                                           _mm256_and_pd(value, magnitude), _CMP_GT_OQ);
        rounded = _mm_castsi128_ps(_mm_add_epi32(_mm_castps_si128(rounded), narrow(_mm256_castpd_si256(away))));
      }
      _mm256_maskstore_pd(c + 4 * v, _mm256_castpd_si256(fast[v]), _mm256_cvtps_pd(rounded));
      left |= static_cast<unsigned>(_mm256_movemask_pd(_mm256_andnot_pd(fast[v], live[v]))) << (4 * v);
    }
    return left;
  }
#endif
};

bool lane_form(const FusedAddSpec& spec, size_t count) {
  return spec.truncation == AlignedTruncation::toward_zero && spec.accumulator_in_alignment &&
         spec.fraction_bits + 2 + std::bit_width(count + 1) <= 53;
}

// The scalar step's conversion of a factor to the input format (idempotent on its values).
double to_input(double x, const FusedAddSpec& spec) {
  return spec.input == fp::fp64() ? x : fp::round_double(x, spec.input, fp::RoundingOptions{spec.input_mode}).value;
}

// fused_multiply_add_lanes for factors already converted to the input format.
void lanes_of_input_values(double* acc, const double* a, const double* b, size_t count, size_t width,
                           const FusedAddSpec& spec) {
  auto scalar_lane = [&](size_t l) {
    std::vector<double> x(count), y(count);
    for (size_t i = 0; i < count; ++i) x[i] = a[i * width + l], y[i] = b[i * width + l];
    acc[l] = fused_multiply_add(acc[l], x, y, spec);
  };
  if (!lane_form(spec, count)) {
    for (size_t l = 0; l < width; ++l) scalar_lane(l);
    return;
  }
  const LaneForm form{spec.fraction_bits, spec.input.emin(), spec.output.emin(), &spec, host_fp32_output(spec)};
#ifdef FPLAB_FUSED_LANES_AVX512
  if (host_fp32_output(spec)) {
    for (size_t l0 = 0; l0 < width; l0 += 8) {
      const size_t n = std::min<size_t>(8, width - l0);
      const __mmask8 live = static_cast<__mmask8>((1u << n) - 1);
      __mmask8 left = 0;
      const auto load = [&](size_t i, size_t) {
        return std::pair{_mm512_maskz_loadu_pd(live, a + i * width + l0),
                         _mm512_maskz_loadu_pd(live, b + i * width + l0)};
      };
      form.fp32_lanes<1, false>(acc + l0, count, &live, &left, load,
                                [](size_t, size_t) { return _mm512_setzero_si512(); });
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
      if (sums[l].fast)
        acc[l0 + l] = form.finish(sums[l]);
      else
        scalar_lane(l0 + l);
    }
  }
}

#if defined(FPLAB_FUSED_LANES_AVX512) || defined(FPLAB_FUSED_LANES_AVX2)
// The GEMM tile form's factors: fp32 values converted to an input format within fp32 (or kept,
// for fp64 and fp32 inputs), each with an exponent code: kZeroCode for a zero, kSpecialCode for an
// infinity or NaN, else its exponent clamped at the input's emin. It applies to fp32 results
// rounded toward zero or to nearest, with truncation toward zero and the accumulator aligned.
bool tile_form(const FusedAddSpec& spec) {
  const bool as_is = spec.input == fp::fp64() || spec.input == fp::fp32();
  const bool within_fp32 = spec.input.precision() <= fp::fp32().precision() && spec.input.emax() <= fp::fp32().emax() &&
                           spec.input.emin() >= fp::fp32().emin();
  return (as_is || within_fp32) && host_fp32_output(spec) && spec.truncation == AlignedTruncation::toward_zero &&
         spec.accumulator_in_alignment;
}

struct TileFactor {
  double value;
  int64_t code;
};

// A factor's TileFactor under one spec (what depends on the spec alone worked out once).
class TileConversion {
 public:
  explicit TileConversion(const FusedAddSpec& spec) : convert_(spec) {}
  TileFactor operator()(float v) const {
    const detail::FusedFactor f = convert_(v);
    switch (f.kind) {
      case detail::FusedFactor::Kind::zero:
        return {f.value, kZeroCode};
      case detail::FusedFactor::Kind::special:
        return {f.value, kSpecialCode};
      case detail::FusedFactor::Kind::finite:
        break;
    }
    return {f.value, f.exponent};
  }

 private:
  detail::FusedFactorConversion convert_;
};

// One row of a prepared tile: `cols` accumulators at acc, the row's factors of A (a_values,
// a_codes: one per term) against B's prepared rows (b_rows[i], b_code_rows[i]: term i's values
// and codes from the tile's first column). The lanes the vector form leaves (an infinity or NaN,
// an accumulator out of range) go to scalar(column) one by one.
template <class Scalar>
void prepared_row(const LaneForm& form, double* acc, size_t cols, size_t count, const double* a_values,
                  const int32_t* a_codes, const double* const* b_rows, const int32_t* const* b_code_rows,
                  Scalar&& scalar) {
#if defined(FPLAB_FUSED_LANES_AVX512)
  constexpr size_t kVectors = 4;  // 32 columns at a time
  for (size_t c0 = 0; c0 < cols; c0 += 8 * kVectors) {
    __mmask8 live[kVectors], left[kVectors];
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t first = c0 + 8 * v, n = first < cols ? std::min<size_t>(8, cols - first) : 0;
      live[v] = static_cast<__mmask8>((1u << n) - 1);
    }
    const auto load = [&](size_t i, size_t v) {
      return std::pair{_mm512_set1_pd(a_values[i]), _mm512_loadu_pd(b_rows[i] + c0 + 8 * v)};
    };
    const auto term_code = [&](size_t i, size_t v) {
      const __m256i codes = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b_code_rows[i] + c0 + 8 * v));
      return _mm512_add_epi64(_mm512_set1_epi64(a_codes[i]), _mm512_cvtepi32_epi64(codes));
    };
    form.fp32_lanes<kVectors, true>(acc + c0, count, live, left, load, term_code);
    for (size_t v = 0; v < kVectors; ++v)
      for (size_t l = 0; l < 8; ++l)
        if ((left[v] >> l) & 1) scalar(c0 + 8 * v + l);
  }
#else
  for (size_t c0 = 0; c0 < cols; c0 += 16) {  // 16 columns at a time
    const size_t lanes = std::min<size_t>(16, cols - c0);
    const unsigned left = form.fp32_lanes_avx2(acc + c0, count, lanes, a_values, a_codes, b_rows, b_code_rows, c0);
    for (size_t l = 0; l < lanes; ++l)
      if ((left >> l) & 1) scalar(c0 + l);
  }
#endif
}

#endif

}  // namespace

void fused_multiply_add_lanes(double* acc, const double* a, const double* b, size_t count, size_t width,
                              const FusedAddSpec& spec) {
  check_fused_add_spec(spec);
  if (spec.input == fp::fp64()) return lanes_of_input_values(acc, a, b, count, width, spec);
  std::vector<double> converted(2 * count * width);
  for (size_t i = 0; i < count * width; ++i)
    converted[i] = to_input(a[i], spec), converted[count * width + i] = to_input(b[i], spec);
  lanes_of_input_values(acc, converted.data(), converted.data() + count * width, count, width, spec);
}

void fused_multiply_add_tile(double* acc, size_t rows, size_t cols, const float* a, size_t lda, const float* b,
                             size_t ldb, std::span<const uint32_t> terms, const FusedAddSpec& spec) {
  check_fused_add_spec(spec);
  const size_t count = terms.size();
#ifdef FPLAB_FUSED_LANES_AVX512
  // Each factor converted (tf32, bf16, fp16, fp8: every value of them is an fp32 value) and coded
  // once for the tile, as the scalar step converts it, instead of once per output (FusedFactors
  // does it once for a whole GEMM), then the rows through the prepared tile's form.
  if (tile_form(spec) && lane_form(spec, count)) {
    const LaneForm form{spec.fraction_bits, spec.input.emin(), spec.output.emin(), &spec, true};
    const TileConversion tile_factor(spec);
    // B's factors and codes once for the tile's rows, each row padded to whole blocks of 32 columns
    // (prepared_row reads them in blocks), then each row of A's against them.
    const size_t padded = (cols + 31) / 32 * 32;
    thread_local std::vector<double> b_values, a_values, x, y;  // reused: this runs once per chunk
    thread_local std::vector<int32_t> b_codes, a_codes;
    thread_local std::vector<const double*> b_rows;
    thread_local std::vector<const int32_t*> b_code_rows;
    b_values.assign(count * padded, 0.0);
    b_codes.assign(count * padded, static_cast<int32_t>(kZeroCode));
    a_values.resize(count), a_codes.resize(count), x.resize(count), y.resize(count);
    b_rows.resize(count), b_code_rows.resize(count);
    for (size_t i = 0; i < count; ++i) {
      for (size_t c = 0; c < cols; ++c) {
        const TileFactor f = tile_factor(b[terms[i] * ldb + c]);
        b_values[i * padded + c] = f.value, b_codes[i * padded + c] = static_cast<int32_t>(f.code);
      }
      b_rows[i] = &b_values[i * padded], b_code_rows[i] = &b_codes[i * padded];
    }
    for (size_t r = 0; r < rows; ++r) {
      for (size_t i = 0; i < count; ++i) {
        const TileFactor f = tile_factor(a[r * lda + terms[i]]);
        a_values[i] = f.value, a_codes[i] = static_cast<int32_t>(f.code);
      }
      double* row = acc + r * cols;
      prepared_row(form, row, cols, count, a_values.data(), a_codes.data(), b_rows.data(), b_code_rows.data(),
                   [&](size_t c) {
                     for (size_t i = 0; i < count; ++i) x[i] = a[r * lda + terms[i]], y[i] = b[terms[i] * ldb + c];
                     row[c] = fused_multiply_add(row[c], x, y, spec);
                   });
    }
    return;
  }
#endif
  // Lane by lane, through the lanes form; each factor converted to the input format once for the
  // tile (rows x count of A, count x cols of B), not once per output.
  const size_t width = rows * cols;
  thread_local std::vector<double> a_in, b_in, x, y;
  a_in.resize(rows * count), b_in.resize(count * cols), x.resize(count * width), y.resize(count * width);
  for (size_t i = 0; i < count; ++i) {
    for (size_t r = 0; r < rows; ++r) a_in[r * count + i] = to_input(a[r * lda + terms[i]], spec);
    for (size_t c = 0; c < cols; ++c) b_in[i * cols + c] = to_input(b[terms[i] * ldb + c], spec);
  }
  for (size_t i = 0; i < count; ++i)
    for (size_t r = 0; r < rows; ++r)
      for (size_t c = 0; c < cols; ++c)
        x[i * width + r * cols + c] = a_in[r * count + i], y[i * width + r * cols + c] = b_in[i * cols + c];
  lanes_of_input_values(acc, x.data(), y.data(), count, width, spec);
}

FusedFactors::FusedFactors(const float* a, const float* b, size_t m, size_t n, size_t k, const FusedAddSpec& spec)
    : a_(a), b_(b), m_(m), n_(n), k_(k), spec_(spec) {
  check_fused_add_spec(spec);
  if (detail::FusedGrid::accepts(spec)) {  // tile() then converts per tile: only blocks outside the grid form use it
    grid_ = std::make_shared<const detail::FusedGrid>(a, b, m, n, k, spec);
    return;
  }
#if defined(FPLAB_FUSED_LANES_AVX2) || defined(FPLAB_FUSED_LANES_AVX512)
  if (!tile_form(spec)) return;
  prepared_ = true;
  // A row of B's values and codes stays readable one vector block (AVX2: 16 columns, AVX-512: 32)
  // past any column.
#ifdef FPLAB_FUSED_LANES_AVX512
  ldb_ = n + 32;
#else
  ldb_ = n + 16;
#endif
  const TileConversion tile_factor(spec);
  a_values_.resize(m * k), a_codes_.resize(m * k);
  for (size_t i = 0; i < m * k; ++i) {
    const TileFactor f = tile_factor(a[i]);
    a_values_[i] = f.value, a_codes_[i] = static_cast<int32_t>(f.code);
  }
  b_values_.assign(k * ldb_, 0.0);
  b_codes_.assign(k * ldb_, static_cast<int32_t>(kZeroCode));
  for (size_t t = 0; t < k; ++t)
    for (size_t c = 0; c < n; ++c) {
      const TileFactor f = tile_factor(b[t * n + c]);
      b_values_[t * ldb_ + c] = f.value, b_codes_[t * ldb_ + c] = static_cast<int32_t>(f.code);
    }
#endif
}

void FusedFactors::tile(double* acc, size_t row0, size_t rows, size_t col0, size_t cols,
                        std::span<const uint32_t> terms, const FusedAddSpec& spec) const {
  if (!converted_for(spec)) throw std::invalid_argument("FusedFactors::tile: a spec with another input format or mode");
  if (row0 + rows > m_ || col0 + cols > n_) throw std::invalid_argument("FusedFactors::tile: a tile outside the GEMM");
#if defined(FPLAB_FUSED_LANES_AVX512) || defined(FPLAB_FUSED_LANES_AVX2)
  // The factors converted once for the whole GEMM (the constructor), not once per tile: converting
  // B's count x cols factors for every 4-row tile took two thirds of a tf32 GEMM's time (perf).
  check_fused_add_spec(spec);
  const size_t count = terms.size();
  if (prepared_ && tile_form(spec) && lane_form(spec, count)) {
    const LaneForm form{spec.fraction_bits, spec.input.emin(), spec.output.emin(), &spec, true};
    thread_local std::vector<const double*> b_rows;
    thread_local std::vector<const int32_t*> b_code_rows;
    thread_local std::vector<double> x, y, a_values;
    thread_local std::vector<int32_t> a_codes;
    b_rows.resize(count), b_code_rows.resize(count), x.resize(count), y.resize(count);
    a_values.resize(count), a_codes.resize(count);
    for (size_t i = 0; i < count; ++i) {
      if (terms[i] >= k_) throw std::invalid_argument("FusedFactors::tile: a term past K");
      b_rows[i] = &b_values_[terms[i] * ldb_ + col0], b_code_rows[i] = &b_codes_[terms[i] * ldb_ + col0];
    }
    for (size_t r = 0; r < rows; ++r) {
      for (size_t i = 0; i < count; ++i) {
        const size_t at = (row0 + r) * k_ + terms[i];
        a_values[i] = a_values_[at], a_codes[i] = a_codes_[at];
      }
      double* row = acc + r * cols;
      prepared_row(form, row, cols, count, a_values.data(), a_codes.data(), b_rows.data(), b_code_rows.data(),
                   [&](size_t c) {
                     for (size_t i = 0; i < count; ++i)
                       x[i] = a_[(row0 + r) * k_ + terms[i]], y[i] = b_[terms[i] * n_ + col0 + c];
                     row[c] = fused_multiply_add(row[c], x, y, spec);
                   });
    }
    return;
  }
#endif
  fused_multiply_add_tile(acc, rows, cols, a_ + row0 * k_, k_, b_ + col0, n_, terms, spec);
}

void FusedFactors::dot_tile(double* acc, size_t row0, size_t rows, size_t col0, size_t cols,
                            std::span<const uint32_t> terms, const FusedAddSpec& spec) const {
  if (!converted_for(spec))
    throw std::invalid_argument("FusedFactors::dot_tile: a spec with another input format or mode");
  if (row0 + rows > m_ || col0 + cols > n_)
    throw std::invalid_argument("FusedFactors::dot_tile: a tile outside the GEMM");
  for (uint32_t t : terms)
    if (t >= k_) throw std::invalid_argument("FusedFactors::dot_tile: a term past K");
  check_fused_add_spec(spec);
  const size_t n = static_cast<size_t>(spec.products);
  // The chain step by step through tile(), for rows x cols outputs at out (row stride ld).
  auto steps = [&](double* out, size_t ld, size_t r0, size_t nr, size_t c0, size_t nc) {
    thread_local std::vector<double> chain;
    chain.assign(nr * nc, 0.0);
    for (size_t first = 0; first < terms.size(); first += n)
      tile(chain.data(), r0, nr, c0, nc, terms.subspan(first, std::min(n, terms.size() - first)), spec);
    for (size_t r = 0; r < nr; ++r) std::copy_n(&chain[r * nc], nc, out + r * ld);
  };
  if (!grid_ || !grid_->takes(spec)) return steps(acc, cols, row0, rows, col0, cols);
  const size_t block_rows = grid_->block_rows(), block_cols = grid_->block_cols();
  for (size_t r = 0; r < rows; r += block_rows)
    for (size_t c = 0; c < cols; c += block_cols) {
      const size_t nr = std::min(block_rows, rows - r), nc = std::min(block_cols, cols - c);
      double* out = acc + r * cols + c;
      if (!grid_->block(out, cols, row0 + r, nr, col0 + c, nc, terms, spec))
        steps(out, cols, row0 + r, nr, col0 + c, nc);
    }
}

}  // namespace fplab::sim
