// Internal to sim/: the host's fp32 vector, as the GEMM tile kernels use it (product_program_tile,
// compensated_tile): AVX-512 (16 lanes), AVX2 with FMA (8 lanes) or one float (baseline x86-64),
// picked at compile time like the engine's other forms. Every operation is one IEEE binary32
// operation per lane with one rounding to nearest even (the host's default MXCSR), so a kernel
// written over FloatLanes computes what the reference evaluator does for native fp32.
//
// A vector of columns past the tile's edge is loaded under a mask (those lanes read as +0, the
// memory past the edge untouched) and stored under the same mask.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
#include <immintrin.h>
#endif

namespace fplab::sim::detail {

#if defined(__AVX512F__)
struct FloatLanes {
  using V = __m512;
  using Mask = __mmask16;
  static constexpr size_t kWidth = 16;
  static Mask mask(size_t lanes) { return static_cast<Mask>((uint32_t{1} << lanes) - 1); }
  static V load(const float* p, Mask m) { return _mm512_maskz_loadu_ps(m, p); }
  static void store(float* p, V x, Mask m) { _mm512_mask_storeu_ps(p, m, x); }
  static V load(const float* p) { return _mm512_loadu_ps(p); }
  static void store(float* p, V x) { _mm512_storeu_ps(p, x); }
  static V broadcast(float x) { return _mm512_set1_ps(x); }
  static float first(V x) { return _mm512_cvtss_f32(x); }
  static V add(V x, V y) { return _mm512_add_ps(x, y); }
  static V sub(V x, V y) { return _mm512_sub_ps(x, y); }
  static V mul(V x, V y) { return _mm512_mul_ps(x, y); }
  static V fma(V x, V y, V c) { return _mm512_fmadd_ps(x, y, c); }
  // c - x·y with one rounding: x - y as fnmadd(y, 1, x) runs on the FMA pipes, not the adder's.
  static V fnma(V x, V y, V c) { return _mm512_fnmadd_ps(x, y, c); }
  static V abs(V x) { return _mm512_abs_ps(x); }
  // `then` in the lanes where x >= y (false where either is NaN), `otherwise` in the others.
  static V select_ge(V x, V y, V then, V otherwise) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, y, _CMP_GE_OQ), otherwise, then);
  }
};
#elif defined(__AVX2__) && defined(__FMA__)
struct FloatLanes {
  using V = __m256;
  using Mask = __m256i;
  static constexpr size_t kWidth = 8;
  static Mask mask(size_t lanes) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(lanes)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static V load(const float* p, Mask m) { return _mm256_maskload_ps(p, m); }
  static void store(float* p, V x, Mask m) { _mm256_maskstore_ps(p, m, x); }
  static V load(const float* p) { return _mm256_loadu_ps(p); }
  static void store(float* p, V x) { _mm256_storeu_ps(p, x); }
  static V broadcast(float x) { return _mm256_set1_ps(x); }
  static float first(V x) { return _mm256_cvtss_f32(x); }
  static V add(V x, V y) { return _mm256_add_ps(x, y); }
  static V sub(V x, V y) { return _mm256_sub_ps(x, y); }
  static V mul(V x, V y) { return _mm256_mul_ps(x, y); }
  static V fma(V x, V y, V c) { return _mm256_fmadd_ps(x, y, c); }
  static V fnma(V x, V y, V c) { return _mm256_fnmadd_ps(x, y, c); }
  static V abs(V x) { return _mm256_andnot_ps(_mm256_set1_ps(-0.0f), x); }
  static V select_ge(V x, V y, V then, V otherwise) {
    return _mm256_blendv_ps(otherwise, then, _mm256_cmp_ps(x, y, _CMP_GE_OQ));
  }
};
#else
struct FloatLanes {
  using V = float;
  using Mask = bool;
  static constexpr size_t kWidth = 1;
  static Mask mask(size_t lanes) { return lanes > 0; }
  static V load(const float* p, Mask m) { return m ? *p : 0.0f; }
  static void store(float* p, V x, Mask m) {
    if (m) *p = x;
  }
  static V load(const float* p) { return *p; }
  static void store(float* p, V x) { *p = x; }
  static V broadcast(float x) { return x; }
  static float first(V x) { return x; }
  static V add(V x, V y) { return x + y; }
  static V sub(V x, V y) { return x - y; }
  static V mul(V x, V y) { return x * y; }
  static V fma(V x, V y, V c) { return std::fma(x, y, c); }
  static V fnma(V x, V y, V c) { return std::fma(-x, y, c); }
  static V abs(V x) { return std::fabs(x); }
  static V select_ge(V x, V y, V then, V otherwise) { return x >= y ? then : otherwise; }
};
#endif

// The loads and stores of a pass over kVectors vectors of a tile's columns from column `first`
// of nr: every column inside the tile (kFull: plain loads, which the compiler may fold into the
// arithmetic), or each vector under its mask.
template <size_t kVectors, bool kFull>
class ColumnVectors {
 public:
  using V = FloatLanes::V;
  ColumnVectors(size_t first, size_t nr) {
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t from = first + v * FloatLanes::kWidth;
      masks_[v] = FloatLanes::mask(nr > from ? std::min(FloatLanes::kWidth, nr - from) : 0);
    }
  }
  // Vector v of the pass's columns of `row`.
  V load(const float* row, size_t v) const {
    if constexpr (kFull) return FloatLanes::load(row + v * FloatLanes::kWidth);
    return FloatLanes::load(row + v * FloatLanes::kWidth, masks_[v]);
  }
  // The same, for a vector used by several operations: GCC folds a plain AVX-512 load into each
  // of them (one load per use, which the load ports then limit), and cannot fold a masked one.
  V load_held(const float* row, size_t v) const {
    if constexpr (kFull && FloatLanes::kWidth < 16) return FloatLanes::load(row + v * FloatLanes::kWidth);
    return FloatLanes::load(row + v * FloatLanes::kWidth, masks_[v]);
  }
  void store(float* row, size_t v, V x) const {
    if constexpr (kFull)
      FloatLanes::store(row + v * FloatLanes::kWidth, x);
    else
      FloatLanes::store(row + v * FloatLanes::kWidth, x, masks_[v]);
  }

 private:
  FloatLanes::Mask masks_[kVectors];
};

// pass(c0, columns) for every pass of kVectors vectors over a tile's nr columns, c0 its first
// column and `columns` its ColumnVectors: full ones (the inner tiles of a GEMM), or masked.
template <size_t kVectors, class Pass>
void for_each_column_pass(size_t nr, Pass&& pass) {
  constexpr size_t kColumns = kVectors * FloatLanes::kWidth;
  for (size_t c0 = 0; c0 < nr; c0 += kColumns) {
    if (nr - c0 >= kColumns)
      pass(c0, ColumnVectors<kVectors, true>(c0, nr));
    else
      pass(c0, ColumnVectors<kVectors, false>(c0, nr));
  }
}

}  // namespace fplab::sim::detail
