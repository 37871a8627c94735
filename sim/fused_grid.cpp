// The grid form of a GEMM's fused chains (sim/fused_grid.hpp).
//
// Assumptions: IEEE binary32 and binary64 lanes; the conversions to int32 truncate toward zero;
// exponent codes fit int16 (every factor's is within [-149, 127]). Codes: a zero factor's is
// kZeroCode and an infinity's or NaN's kSpecialCode, so that a product's code (the sum of its
// factors') is at most kNoTermsAbove when a factor is zero (it takes no part in the alignment)
// and above every grid's F when one is infinite or NaN (the lane leaves the form).
#include "sim/fused_grid.hpp"

#include <algorithm>
#include <bit>
#include <climits>
#include <cmath>
#include <stdexcept>
#include <type_traits>

#include "sim/fused_factor_conversion.hpp"
#include "sim/spare_buffers.hpp"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512DQ__) && defined(__AVX512VL__)
#include <immintrin.h>
#define FPLAB_FUSED_GRID_AVX512 1
// GCC 12 warns about the undefined pass-through operand inside its own unmasked AVX-512
// intrinsics (GCC PR 105593); nothing of ours is uninitialised.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#elif defined(__AVX2__)
#include <immintrin.h>
#define FPLAB_FUSED_GRID_AVX2 1
#endif

namespace fplab::sim::detail {
namespace {

constexpr int16_t kZeroCode = -4096, kSpecialCode = 8192;
constexpr int32_t kNoTermsAbove = -3000;  // below every real product's code (>= -298), above 2 kZeroCode + 127
// A step's E may lie this far below F: 2^(E - F) is then a normal float, a product that reaches the
// grid is one too, and one that rounded up to the smallest normal still scales below one unit.
constexpr int kLowestGridBelowF = 125;
constexpr int kFloatFractionBits = 23;

// The vector operations of the form, for the host's widest registers. FloatLanes: `Values` of
// kLanes floats (products of inputs of at most 12 significant bits are exact), DoubleLanes: of
// kLanes doubles (products of any fp32 values are exact); `Exps` of their exponents and grid shifts
// (int32 or int64 lanes), `Sums` of int32 units, `Codes` of 2 kLanes int16 (the codes of two value
// vectors), `Lanes` a set of lanes. A block is kRows rows of 2 kLanes columns. Values are read and
// stored as floats.
#if defined(FPLAB_FUSED_GRID_AVX512)
// Sets of lanes in mask registers.
template <class Mask>
struct MaskLanes {
  using Lanes = Mask;
  static Lanes no_lanes() { return 0; }
  static Lanes either(Lanes a, Lanes b) { return a | b; }
  static bool any(Lanes a) { return a != 0; }
};

struct FloatLanes : MaskLanes<__mmask16> {
  static constexpr size_t kLanes = 16, kRows = 4;
  static constexpr int kFractionBits = 23;
  using Values = __m512;
  using Exps = __m512i;
  using Sums = __m512i;
  using Ints = __m512i;
  using Codes = __m512i;
  // Embedded rounding: nothing to set for the block.
  struct TowardZero {};

  static Codes load_codes(const int16_t* p) { return _mm512_loadu_si512(p); }
  static Codes code_pair(int32_t pair) { return _mm512_set1_epi32(pair); }
  static Codes lowest_codes() { return _mm512_set1_epi16(INT16_MIN); }
  static Codes max_code_sum(Codes top, Codes a, Codes b) { return _mm512_max_epi16(top, _mm512_add_epi16(a, b)); }
  static Ints widen(Codes c, int half) {
    return _mm512_cvtepi16_epi32(half == 0 ? _mm512_castsi512_si256(c) : _mm512_extracti64x4_epi64(c, 1));
  }
  static Ints splat(int32_t x) { return _mm512_set1_epi32(x); }
  static Ints max(Ints a, Ints b) { return _mm512_max_epi32(a, b); }
  static Ints sub(Ints a, Ints b) { return _mm512_sub_epi32(a, b); }
  static Ints add(Ints a, Ints b) { return _mm512_add_epi32(a, b); }
  static Sums no_units() { return _mm512_setzero_si512(); }
  static Ints shift_left(Ints a, int n) { return _mm512_slli_epi32(a, n); }
  // An accumulator's exponent (a normal float or zero in this form); INT_MIN for a zero.
  static Ints exponent_code(Values x) { return _mm512_cvttps_epi32(_mm512_getexp_ps(x)); }
  // Lanes with low <= e < high.
  static Lanes within(Ints e, int32_t low, int32_t high) {
    return _mm512_cmplt_epu32_mask(_mm512_sub_epi32(e, splat(low)), splat(high - low));
  }
  static bool any_above(Ints e, int32_t bound) { return _mm512_cmpgt_epi32_mask(e, splat(bound)) != 0; }

  static Values zero() { return _mm512_setzero_ps(); }
  static Values load(const float* p) { return _mm512_loadu_ps(p); }
  static Values broadcast(float x) { return _mm512_set1_ps(x); }
  static Values mul(Values a, Values b) { return _mm512_mul_ps(a, b); }
  // x * 2^(F - E) (shift: (F - E) << 23) cut toward zero to an integer.
  static Ints units(Values x, Ints shift) {
    return _mm512_cvttps_epi32(_mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(x), shift)));
  }
  // The sum of units, rounded toward zero to fp32 and scaled back to 2^(E - F) units (+0 for 0).
  static Values finish(Ints sum, Ints shift) {
    const __m512 rounded = _mm512_cvt_roundepi32_ps(sum, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    return scaled_back(_mm512_castps_si512(rounded), shift);
  }
  // The same for products' units plus an accumulator's, whose sum may not fit an int32.
  static Values finish_wide(Ints products, Ints accumulator, Ints shift) {
    auto half = [&](int h) {
      const auto low = [h](__m512i x) { return h == 0 ? _mm512_castsi512_si256(x) : _mm512_extracti64x4_epi64(x, 1); };
      const __m512d sum = _mm512_add_pd(_mm512_cvtepi32_pd(low(products)), _mm512_cvtepi32_pd(low(accumulator)));
      return _mm512_cvt_roundpd_ps(sum, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    };
    const __m512 rounded = _mm512_insertf32x8(_mm512_castps256_ps512(half(0)), half(1), 1);
    return scaled_back(_mm512_castps_si512(rounded), shift);
  }
  static void store(float* p, Values x) { _mm512_storeu_ps(p, x); }

 private:
  static Values scaled_back(Ints rounded, Ints shift) {
    return _mm512_castsi512_ps(_mm512_maskz_sub_epi32(_mm512_test_epi32_mask(rounded, rounded), rounded, shift));
  }
};
struct DoubleLanes : MaskLanes<__mmask8> {
  static constexpr size_t kLanes = 8, kRows = 4;
  static constexpr int kFractionBits = 52;
  using Values = __m512d;
  using Exps = __m512i;
  using Sums = __m256i;
  using Codes = __m256i;
  using TowardZero = FloatLanes::TowardZero;

  static Codes load_codes(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static Codes code_pair(int32_t pair) { return _mm256_set1_epi32(pair); }
  static Codes lowest_codes() { return _mm256_set1_epi16(INT16_MIN); }
  static Codes max_code_sum(Codes top, Codes a, Codes b) { return _mm256_max_epi16(top, _mm256_add_epi16(a, b)); }
  static Exps widen(Codes c, int half) {
    return _mm512_cvtepi16_epi64(half == 0 ? _mm256_castsi256_si128(c) : _mm256_extracti128_si256(c, 1));
  }
  static Exps splat(int64_t x) { return _mm512_set1_epi64(x); }
  static Exps max(Exps a, Exps b) { return _mm512_max_epi64(a, b); }
  static Exps sub(Exps a, Exps b) { return _mm512_sub_epi64(a, b); }
  static Exps shift_left(Exps a, int n) { return _mm512_slli_epi64(a, n); }
  static Exps exponent_code(Values x) { return _mm512_cvttpd_epi64(_mm512_getexp_pd(x)); }  // zero: INT64_MIN
  static Lanes within(Exps e, int64_t low, int64_t high) {
    return _mm512_cmplt_epu64_mask(_mm512_sub_epi64(e, splat(low)), splat(high - low));
  }
  static bool any_above(Exps e, int64_t bound) { return _mm512_cmpgt_epi64_mask(e, splat(bound)) != 0; }

  static Values zero() { return _mm512_setzero_pd(); }
  static Values load(const float* p) { return _mm512_cvtps_pd(_mm256_loadu_ps(p)); }
  static Values broadcast(float x) { return _mm512_set1_pd(x); }
  static Values mul(Values a, Values b) { return _mm512_mul_pd(a, b); }
  static Sums units(Values x, Exps shift) {
    return _mm512_cvttpd_epi32(_mm512_castsi512_pd(_mm512_add_epi64(_mm512_castpd_si512(x), shift)));
  }
  static Sums add(Sums a, Sums b) { return _mm256_add_epi32(a, b); }
  static Sums no_units() { return _mm256_setzero_si256(); }
  static Values finish(Sums sum, Exps shift) { return rounded_back(_mm512_cvtepi32_pd(sum), shift); }
  static Values finish_wide(Sums products, Sums accumulator, Exps shift) {
    return rounded_back(_mm512_add_pd(_mm512_cvtepi32_pd(products), _mm512_cvtepi32_pd(accumulator)), shift);
  }
  static void store(float* p, Values x) { _mm256_storeu_ps(p, _mm512_cvtpd_ps(x)); }

 private:
  // An exact integer of units rounded toward zero to fp32 and scaled back (+0 for 0).
  static Values rounded_back(__m512d units, Exps shift) {
    const __m512i rounded =
        _mm512_castpd_si512(_mm512_cvtps_pd(_mm512_cvt_roundpd_ps(units, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC)));
    return _mm512_castsi512_pd(_mm512_maskz_sub_epi64(_mm512_test_epi64_mask(rounded, rounded), rounded, shift));
  }
};
#elif defined(FPLAB_FUSED_GRID_AVX2)
// Sets of lanes as all-ones lanes of a vector; unsigned comparisons as signed ones of biased values.
struct VectorLanes {
  using Lanes = __m256i;
  static Lanes no_lanes() { return _mm256_setzero_si256(); }
  static Lanes either(Lanes a, Lanes b) { return _mm256_or_si256(a, b); }
  static bool any(Lanes a) { return !_mm256_testz_si256(a, a); }
  template <class Int>
  static Int biased(Int x) {  // x + 2^(bits - 1), wrapping: unsigned order becomes signed order
    using Unsigned = std::make_unsigned_t<Int>;
    return static_cast<Int>(static_cast<Unsigned>(x) ^ (Unsigned{1} << (8 * sizeof(Int) - 1)));
  }
};

struct FloatLanes : VectorLanes {
  static constexpr size_t kLanes = 8, kRows = 2;
  static constexpr int kFractionBits = 23;
  using Values = __m256;
  using Exps = __m256i;
  using Sums = __m256i;
  using Ints = __m256i;
  using Codes = __m256i;
  // The int32 and double to fp32 conversions round by MXCSR: toward zero for the block.
  class TowardZero {
   public:
    TowardZero() : saved_(_mm_getcsr()) { _mm_setcsr((saved_ & ~kRoundingBits) | kTowardZeroBits); }
    ~TowardZero() { _mm_setcsr(saved_); }
    TowardZero(const TowardZero&) = delete;
    TowardZero& operator=(const TowardZero&) = delete;

   private:
    static constexpr unsigned kRoundingBits = 0x6000, kTowardZeroBits = 0x6000;
    unsigned saved_;
  };

  static Codes load_codes(const int16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static Codes code_pair(int32_t pair) { return _mm256_set1_epi32(pair); }
  static Codes lowest_codes() { return _mm256_set1_epi16(INT16_MIN); }
  static Codes max_code_sum(Codes top, Codes a, Codes b) { return _mm256_max_epi16(top, _mm256_add_epi16(a, b)); }
  static Ints widen(Codes c, int half) {
    return _mm256_cvtepi16_epi32(half == 0 ? _mm256_castsi256_si128(c) : _mm256_extracti128_si256(c, 1));
  }
  static Ints splat(int32_t x) { return _mm256_set1_epi32(x); }
  static Ints max(Ints a, Ints b) { return _mm256_max_epi32(a, b); }
  static Ints sub(Ints a, Ints b) { return _mm256_sub_epi32(a, b); }
  static Ints add(Ints a, Ints b) { return _mm256_add_epi32(a, b); }
  static Sums no_units() { return _mm256_setzero_si256(); }
  static Ints shift_left(Ints a, int n) { return _mm256_slli_epi32(a, n); }
  static Ints exponent_code(Values x) {
    const __m256i magnitude = _mm256_slli_epi32(_mm256_castps_si256(x), 1);
    const __m256i code = _mm256_sub_epi32(_mm256_srli_epi32(magnitude, kFloatFractionBits + 1), splat(127));
    return _mm256_blendv_epi8(code, splat(INT_MIN), _mm256_cmpeq_epi32(magnitude, _mm256_setzero_si256()));
  }
  static Lanes within(Ints e, int32_t low, int32_t high) {  // unsigned e - low < high - low
    return _mm256_cmpgt_epi32(splat(biased(high - low)), _mm256_sub_epi32(e, splat(biased(low))));
  }
  static bool any_above(Ints e, int32_t bound) { return any(_mm256_cmpgt_epi32(e, splat(bound))); }

  static Values zero() { return _mm256_setzero_ps(); }
  static Values load(const float* p) { return _mm256_loadu_ps(p); }
  static Values broadcast(float x) { return _mm256_set1_ps(x); }
  static Values mul(Values a, Values b) { return _mm256_mul_ps(a, b); }
  static Ints units(Values x, Ints shift) {
    return _mm256_cvttps_epi32(_mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(x), shift)));
  }
  static Values finish(Ints sum, Ints shift) {
    return scaled_back(_mm256_castps_si256(_mm256_cvtepi32_ps(sum)), shift);
  }
  static Values finish_wide(Ints products, Ints accumulator, Ints shift) {
    auto half = [&](int h) {
      const auto low = [h](__m256i x) { return h == 0 ? _mm256_castsi256_si128(x) : _mm256_extracti128_si256(x, 1); };
      return _mm256_cvtpd_ps(_mm256_add_pd(_mm256_cvtepi32_pd(low(products)), _mm256_cvtepi32_pd(low(accumulator))));
    };
    return scaled_back(_mm256_castps_si256(_mm256_set_m128(half(1), half(0))), shift);
  }
  static void store(float* p, Values x) { _mm256_storeu_ps(p, x); }

 private:
  static Values scaled_back(Ints rounded, Ints shift) {
    const __m256i zero = _mm256_cmpeq_epi32(rounded, _mm256_setzero_si256());
    return _mm256_castsi256_ps(_mm256_andnot_si256(zero, _mm256_sub_epi32(rounded, shift)));
  }
};
struct DoubleLanes : VectorLanes {
  static constexpr size_t kLanes = 4, kRows = 2;
  static constexpr int kFractionBits = 52;
  using Values = __m256d;
  using Exps = __m256i;
  using Sums = __m128i;
  using Codes = __m128i;
  using TowardZero = FloatLanes::TowardZero;

  static Codes load_codes(const int16_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
  static Codes code_pair(int32_t pair) { return _mm_set1_epi32(pair); }
  static Codes lowest_codes() { return _mm_set1_epi16(INT16_MIN); }
  static Codes max_code_sum(Codes top, Codes a, Codes b) { return _mm_max_epi16(top, _mm_add_epi16(a, b)); }
  static Exps widen(Codes c, int half) { return _mm256_cvtepi16_epi64(half == 0 ? c : _mm_srli_si128(c, 8)); }
  static Exps splat(int64_t x) { return _mm256_set1_epi64x(x); }
  static Exps max(Exps a, Exps b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a)); }
  static Exps sub(Exps a, Exps b) { return _mm256_sub_epi64(a, b); }
  static Exps shift_left(Exps a, int n) { return _mm256_slli_epi64(a, n); }
  static Exps exponent_code(Values x) {
    const __m256i magnitude = _mm256_slli_epi64(_mm256_castpd_si256(x), 1);
    const __m256i code = _mm256_sub_epi64(_mm256_srli_epi64(magnitude, kFractionBits + 1), splat(1023));
    return _mm256_blendv_epi8(code, splat(INT64_MIN), _mm256_cmpeq_epi64(magnitude, _mm256_setzero_si256()));
  }
  static Lanes within(Exps e, int64_t low, int64_t high) {  // unsigned e - low < high - low
    return _mm256_cmpgt_epi64(splat(biased(high - low)), _mm256_sub_epi64(e, splat(biased(low))));
  }
  static bool any_above(Exps e, int64_t bound) { return any(_mm256_cmpgt_epi64(e, splat(bound))); }

  static Values zero() { return _mm256_setzero_pd(); }
  static Values load(const float* p) { return _mm256_cvtps_pd(_mm_loadu_ps(p)); }
  static Values broadcast(float x) { return _mm256_set1_pd(x); }
  static Values mul(Values a, Values b) { return _mm256_mul_pd(a, b); }
  static Sums units(Values x, Exps shift) {
    return _mm256_cvttpd_epi32(_mm256_castsi256_pd(_mm256_add_epi64(_mm256_castpd_si256(x), shift)));
  }
  static Sums add(Sums a, Sums b) { return _mm_add_epi32(a, b); }
  static Sums no_units() { return _mm_setzero_si128(); }
  static Values finish(Sums sum, Exps shift) { return rounded_back(_mm256_cvtepi32_pd(sum), shift); }
  static Values finish_wide(Sums products, Sums accumulator, Exps shift) {
    return rounded_back(_mm256_add_pd(_mm256_cvtepi32_pd(products), _mm256_cvtepi32_pd(accumulator)), shift);
  }
  static void store(float* p, Values x) { _mm_storeu_ps(p, _mm256_cvtpd_ps(x)); }  // fp32 values: exact

 private:
  static Values rounded_back(__m256d units, Exps shift) {  // the conversion to fp32 rounds by MXCSR: toward zero
    const __m256i rounded = _mm256_castpd_si256(_mm256_cvtps_pd(_mm256_cvtpd_ps(units)));
    const __m256i zero = _mm256_cmpeq_epi64(rounded, _mm256_setzero_si256());
    return _mm256_castsi256_pd(_mm256_andnot_si256(zero, _mm256_sub_epi64(rounded, shift)));
  }
};
#endif

// Units of the grid below 2^31 for N products (each below 2^(F + 2) units) and, unless wide, the
// accumulator (below 2^(F + 1)).
[[maybe_unused]] bool sum_fits_int32(const FusedAddSpec& spec, bool with_accumulator) {
  if (spec.fraction_bits > 28) return false;
  const int64_t unit_bound = int64_t{1} << (spec.fraction_bits + 2);
  return int64_t{spec.products} * unit_bound + (with_accumulator ? unit_bound / 2 : 0) <= (int64_t{1} << 31);
}

// Products of two values of the input are exact in a float (at most 24 significant bits).
[[maybe_unused]] bool float_products(const fp::Format& input) {
  return input != fp::fp64() && 2 * input.precision() <= 24;
}

#if defined(FPLAB_FUSED_GRID_AVX512) || defined(FPLAB_FUSED_GRID_AVX2)
// One block's chains in V's lanes: its accumulators, the lanes that left the form, the factors.
template <class V>
struct BlockChains {
  static constexpr size_t R = V::kRows, W = V::kLanes;
  typename V::Values acc[R][2];
  typename V::Lanes outside;  // lanes with a step's E in (kNoTermsAbove, F - 125)
  typename V::Exps top;       // the largest E of any step (above F: outside the form)
  const float* a_values[R];
  const int32_t* a_codes[R];
  const float* b_values;
  const int16_t* b_codes;
  size_t ldb;
  int32_t f, lowest_grid;

  // One fused step of terms step[0, len) on every output of the block.
  template <bool kWide>
  void step(const uint32_t* terms, size_t len) {
    // The largest product code of each output, two value vectors' worth per code vector.
    typename V::Codes product_top[R];
    for (auto& c : product_top) c = V::lowest_codes();
    for (size_t i = 0; i < len; ++i) {
      const typename V::Codes b = V::load_codes(b_codes + terms[i] * ldb);
      for (size_t r = 0; r < R; ++r)
        product_top[r] = V::max_code_sum(product_top[r], V::code_pair(a_codes[r][terms[i]]), b);
    }
    typename V::Exps shift[R][2];
    typename V::Sums sum[R][2];
    for (size_t r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h) {
        const typename V::Exps e = V::max(V::widen(product_top[r], h), V::exponent_code(acc[r][h]));
        outside = V::either(outside, V::within(e, kNoTermsAbove + 1, lowest_grid));
        top = V::max(top, e);
        // A lane without nonzero terms takes the lowest grid: its zeros stay zero there.
        shift[r][h] = V::shift_left(V::sub(V::splat(f), V::max(e, V::splat(lowest_grid))), V::kFractionBits);
        sum[r][h] = kWide ? V::no_units() : V::units(acc[r][h], shift[r][h]);
      }
    for (size_t i = 0; i < len; ++i) {
      const float* b_row = b_values + terms[i] * ldb;
      const typename V::Values b0 = V::load(b_row), b1 = V::load(b_row + W);
      for (size_t r = 0; r < R; ++r) {
        const typename V::Values a = V::broadcast(a_values[r][terms[i]]);
        sum[r][0] = V::add(V::units(V::mul(a, b0), shift[r][0]), sum[r][0]);
        sum[r][1] = V::add(V::units(V::mul(a, b1), shift[r][1]), sum[r][1]);
      }
    }
    for (size_t r = 0; r < R; ++r)
      for (int h = 0; h < 2; ++h)
        acc[r][h] = kWide ? V::finish_wide(sum[r][h], V::units(acc[r][h], shift[r][h]), shift[r][h])
                          : V::finish(sum[r][h], shift[r][h]);
  }
};
#endif

}  // namespace

bool FusedGrid::accepts(const FusedAddSpec& spec) {
#if defined(FPLAB_FUSED_GRID_AVX512) || defined(FPLAB_FUSED_GRID_AVX2)
  // The factors are fp32 values: converted to an input within fp32, or kept (fp64, fp32 inputs).
  const fp::Format& in = spec.input;
  const bool within_fp32 = in == fp::fp64() || (in.precision() <= fp::fp32().precision() &&
                                                in.emax() <= fp::fp32().emax() && in.emin() >= fp::fp32().emin());
  return within_fp32 && spec.truncation == AlignedTruncation::toward_zero && spec.accumulator_in_alignment &&
         spec.output == fp::fp32() && spec.output_mode == fp::Mode::rz && sum_fits_int32(spec, false);
#else
  (void)spec;
  return false;
#endif
}

bool FusedGrid::takes(const FusedAddSpec& spec) const {
  // The constructor accepted spec_; the same spec again (every call of a GEMM's tiles) needs no
  // second look, which builds formats (1% of an h100-tf32 small_cnn epoch, asked once a tile).
  const bool same = spec.products == spec_.products && spec.fraction_bits == spec_.fraction_bits &&
                    spec.output == spec_.output && spec.output_mode == spec_.output_mode &&
                    spec.truncation == spec_.truncation &&
                    spec.accumulator_in_alignment == spec_.accumulator_in_alignment;
  return spec.input == spec_.input && spec.input_mode == spec_.input_mode && (same || accepts(spec));
}

size_t FusedGrid::block_rows() const {
#if defined(FPLAB_FUSED_GRID_AVX512) || defined(FPLAB_FUSED_GRID_AVX2)
  return float_lanes_ ? FloatLanes::kRows : DoubleLanes::kRows;
#else
  return 1;
#endif
}

size_t FusedGrid::block_cols() const {
#if defined(FPLAB_FUSED_GRID_AVX512) || defined(FPLAB_FUSED_GRID_AVX2)
  return 2 * (float_lanes_ ? FloatLanes::kLanes : DoubleLanes::kLanes);
#else
  return 1;
#endif
}

FusedGrid::FusedGrid(const float* a, const float* b, size_t m, size_t n, size_t k, const FusedAddSpec& spec)
    : m_(m), n_(n), k_(k), spec_(spec), float_lanes_(float_products(spec.input)) {
  if (!accepts(spec)) throw std::invalid_argument("FusedGrid: a spec outside the grid form");
  ldb_ = (n + block_cols() - 1) / block_cols() * block_cols() + block_cols();
  const FusedFactorConversion convert(spec);
  a_values_ = take_spare_buffer<float>(m * k), a_codes_ = take_spare_buffer<int32_t>(m * k);
  // A piece at a time, so that its 16-bit codes are still in L1 when they are doubled.
  constexpr size_t kPiece = 4096;
  int16_t codes[kPiece];
  for (size_t first = 0; first < m * k; first += kPiece) {
    const size_t count = std::min(kPiece, m * k - first);
    convert.convert(a + first, count, &a_values_[first], codes, kZeroCode, kSpecialCode);
    for (size_t i = 0; i < count; ++i) {
      const auto c = static_cast<uint16_t>(codes[i]);
      a_codes_[first + i] = static_cast<int32_t>(uint32_t{c} | uint32_t{c} << 16);
    }
  }
  // Columns past n: zero factors, read by a block that ends past n and never stored.
  b_values_ = take_spare_buffer<float>(k * ldb_), b_codes_ = take_spare_buffer<int16_t>(k * ldb_);
  for (size_t t = 0; t < k; ++t) {
    convert.convert(b + t * n, n, &b_values_[t * ldb_], &b_codes_[t * ldb_], kZeroCode, kSpecialCode);
    std::fill(&b_values_[t * ldb_ + n], &b_values_[t * ldb_] + ldb_, 0.0f);
    std::fill(&b_codes_[t * ldb_ + n], &b_codes_[t * ldb_] + ldb_, kZeroCode);
  }
}

FusedGrid::~FusedGrid() {
  give_back_spare_buffer(a_values_), give_back_spare_buffer(b_values_), give_back_spare_buffer(a_codes_),
      give_back_spare_buffer(b_codes_);
}

bool FusedGrid::block(double* out, size_t ld, size_t row0, size_t rows, size_t col0, size_t cols,
                      std::span<const uint32_t> terms, const FusedAddSpec& spec) const {
  if (rows == 0 || cols == 0) return true;
  if (rows > block_rows() || cols > block_cols() || row0 + rows > m_ || col0 + cols > n_)
    throw std::invalid_argument("FusedGrid::block: not a block of the GEMM");
#if defined(FPLAB_FUSED_GRID_AVX512) || defined(FPLAB_FUSED_GRID_AVX2)
  float results[FloatLanes::kRows * 2 * FloatLanes::kLanes];  // the larger block
  const bool narrow = sum_fits_int32(spec, true);
  const bool in_form = float_lanes_ ? (narrow ? block_steps<FloatLanes, false>(results, row0, rows, col0, terms, spec)
                                              : block_steps<FloatLanes, true>(results, row0, rows, col0, terms, spec))
                                    : (narrow ? block_steps<DoubleLanes, false>(results, row0, rows, col0, terms, spec)
                                              : block_steps<DoubleLanes, true>(results, row0, rows, col0, terms, spec));
  if (!in_form) return false;
  for (size_t r = 0; r < rows; ++r)
    for (size_t c = 0; c < cols; ++c) out[r * ld + c] = results[r * block_cols() + c];
  return true;
#else
  (void)out, (void)ld, (void)terms, (void)spec;
  return false;
#endif
}

template <class V, bool kWide>
bool FusedGrid::block_steps(float* out, size_t row0, size_t rows, size_t col0, std::span<const uint32_t> terms,
                            const FusedAddSpec& spec) const {
#if defined(FPLAB_FUSED_GRID_AVX512) || defined(FPLAB_FUSED_GRID_AVX2)
  using Chains = BlockChains<V>;
  Chains block;
  block.f = spec.fraction_bits, block.lowest_grid = spec.fraction_bits - kLowestGridBelowF;
  // Rows past the block's last repeat it (their results are dropped).
  for (size_t r = 0; r < Chains::R; ++r) {
    const size_t row = row0 + std::min(r, rows - 1);
    block.a_values[r] = &a_values_[row * k_], block.a_codes[r] = &a_codes_[row * k_];
  }
  block.b_values = &b_values_[col0], block.b_codes = &b_codes_[col0], block.ldb = ldb_;
  for (auto& row : block.acc) row[0] = row[1] = V::zero();
  block.outside = V::no_lanes();
  block.top = V::splat(INT32_MIN);
  [[maybe_unused]] const typename V::TowardZero toward_zero;  // for the whole block
  const size_t n = static_cast<size_t>(spec.products);
  for (size_t first = 0; first < terms.size(); first += n)
    block.template step<kWide>(terms.data() + first, std::min(n, terms.size() - first));
  if (V::any(block.outside) || V::any_above(block.top, block.f)) return false;
  for (size_t r = 0; r < Chains::R; ++r) {
    V::store(out + r * 2 * Chains::W, block.acc[r][0]);
    V::store(out + r * 2 * Chains::W + Chains::W, block.acc[r][1]);
  }
  return true;
#else
  (void)out, (void)row0, (void)rows, (void)col0, (void)terms, (void)spec;
  return false;
#endif
}

}  // namespace fplab::sim::detail
