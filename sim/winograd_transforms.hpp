// cuDNN's one-dimensional F(4x4, 3x3) transforms of its winograd_nonfused weight gradient, each
// output in the order of roundings its kernels use, and the 2-D transforms of one tile built from
// them (columns first, then rows): the arithmetic of sim/winograd_wgrad.hpp, in one place for the
// CPU (winograd_wgrad.cpp) and the GPU (cuda/gpu_winograd.cu), so that both give the same bits.
//
// The fit of experiments/winograd_fit.py (docs/results/calibration_torch.md, "cuDNN's Winograd,
// bit for bit"): a different association, or a fused product where cuDNN rounds one, changes bits
// in 5-60% of outputs. Compiled by nvcc for the device too (then with -fmad=false, as every kernel
// of sim/cuda/ is: no product is fused that is not written as one here).
#pragma once

#include <cmath>

#if defined(__CUDACC__)
#define FPLAB_WINOGRAD_HD __host__ __device__
#else
#define FPLAB_WINOGRAD_HD
#endif

namespace fplab::sim::winograd {

// fma in T (float or double), one rounding, on either side.
template <class T>
FPLAB_WINOGRAD_HD inline T fused(T a, T b, T c) {
#if defined(__CUDA_ARCH__)
  if constexpr (sizeof(T) == sizeof(float))
    return __fmaf_rn(a, b, c);
  else
    return __fma_rn(a, b, c);
#else
  return std::fma(a, b, c);
#endif
}

// out = D x (6 x 6): the input tile's. Products rounded (no fusion).
template <class T>
FPLAB_WINOGRAD_HD inline void data_1d(const T (&x)[6], T (&out)[6]) {
  const T quarter = T(0.25), half = T(0.5), five_quarters = T(1.25);
  out[0] = (quarter * x[0] + -five_quarters * x[2]) + x[4];
  out[1] = (-quarter * x[1] + x[3]) + (-quarter * x[2] + x[4]);
  out[2] = (quarter * x[1] - x[3]) + (-quarter * x[2] + x[4]);
  out[3] = (-half * x[1] + half * x[3]) + (x[4] - x[2]);
  out[4] = (half * x[1] - half * x[3]) + (x[4] - x[2]);
  out[5] = (quarter * x[1] + -five_quarters * x[3]) + x[5];
}

// out = A' d (6 x 4): the output gradient's. `fused_pairs` false rounds the 2/3-products of rows 1
// and 2 before adding them, as cuDNN does in the row pass of the tile's last row (a copy of dY's
// row 3, which its code takes without a column transform).
template <class T>
FPLAB_WINOGRAD_HD inline void delta_1d(const T (&d)[4], bool fused_pairs, T (&out)[6]) {
  const T two_thirds = T(2) / T(3), four_thirds = T(4) / T(3), eight_thirds = T(8) / T(3), third = T(1) / T(3);
  for (int sign_index = 0; sign_index < 2; ++sign_index) {
    const T sign = sign_index == 0 ? T(1) : T(-1);
    out[1 + sign_index] =
        fused_pairs
            ? fused(two_thirds, d[0], two_thirds * d[2]) + fused(sign * two_thirds, d[1], sign * two_thirds * d[3])
            : (two_thirds * d[0] + two_thirds * d[2]) + (sign * two_thirds * d[1] + sign * two_thirds * d[3]);
  }
  const T even = fused(-eight_thirds, d[0], -two_thirds * d[2]);
  out[0] = T(4) * d[0];
  out[3] = even + fused(-four_thirds, d[1], -third * d[3]);
  out[4] = even + fused(four_thirds, d[1], third * d[3]);
  out[5] = d[3];
}

// out = O m (3 x 6): the sums'. The middle row in double: cuDNN's code adds its halves as doubles
// (a double constant promotes them), so that m3/2 - m4/2 is never rounded to T.
template <class T>
FPLAB_WINOGRAD_HD inline void output_1d(const T (&m)[6], T (&out)[3]) {
  const T sum12 = m[1] + m[2], sum34 = m[3] + m[4], difference12 = m[1] - m[2];
  const double middle =
      (static_cast<double>(difference12) + 0.5 * static_cast<double>(m[3])) - 0.5 * static_cast<double>(m[4]);
  out[0] = (m[0] + sum12) + sum34;
  out[1] = static_cast<T>(middle);
  out[2] = (sum12 + m[5]) + T(0.25) * sum34;
}

// D X D^T of a 6 x 6 tile (x[r][q]) into out[i][j]: the column pass, then each row's.
template <class T>
FPLAB_WINOGRAD_HD inline void data_tile(const T (&x)[6][6], T (&out)[6][6]) {
  T columns[6][6];  // columns[r][q]: row r of D times the tile's column q
  for (int q = 0; q < 6; ++q) {
    const T column[6] = {x[0][q], x[1][q], x[2][q], x[3][q], x[4][q], x[5][q]};
    T transformed[6];
    data_1d(column, transformed);
    for (int r = 0; r < 6; ++r) columns[r][q] = transformed[r];
  }
  for (int i = 0; i < 6; ++i) data_1d(columns[i], out[i]);
}

// Row i of D X D^T alone (out[j]: position (i, j)), the same values as data_tile's row i: the
// device computes one row of positions at a time.
template <class T>
FPLAB_WINOGRAD_HD inline void data_row(const T (&x)[6][6], int i, T (&out)[6]) {
  T row[6];
  for (int q = 0; q < 6; ++q) {
    const T column[6] = {x[0][q], x[1][q], x[2][q], x[3][q], x[4][q], x[5][q]};
    T transformed[6];
    data_1d(column, transformed);
    row[q] = transformed[i];
  }
  data_1d(row, out);
}

// A' dY A'^T of a 4 x 4 tile (dy[r][q]) into out[i][j]; row 5 (dY's last row as it is) with the
// 2/3-products of its row pass rounded, as cuDNN's kernel computes it.
template <class T>
FPLAB_WINOGRAD_HD inline void delta_tile(const T (&dy)[4][4], T (&out)[6][6]) {
  T columns[6][4];
  for (int q = 0; q < 4; ++q) {
    const T column[4] = {dy[0][q], dy[1][q], dy[2][q], dy[3][q]};
    T transformed[6];
    delta_1d(column, true, transformed);
    for (int r = 0; r < 6; ++r) columns[r][q] = transformed[r];
  }
  for (int i = 0; i < 6; ++i) delta_1d(columns[i], i != 5, out[i]);
}

// Row i of A' dY A'^T alone, the same values as delta_tile's row i.
template <class T>
FPLAB_WINOGRAD_HD inline void delta_row(const T (&dy)[4][4], int i, T (&out)[6]) {
  T row[4];
  for (int q = 0; q < 4; ++q) {
    const T column[4] = {dy[0][q], dy[1][q], dy[2][q], dy[3][q]};
    T transformed[6];
    delta_1d(column, true, transformed);
    row[q] = transformed[i];
  }
  delta_1d(row, i != 5, out);
}

// O M O^T of the 36 sums (m[r][q]), columns first, then rows: out[i][j] of the 3 x 3 weights.
template <class T>
FPLAB_WINOGRAD_HD inline void output_tile(const T (&m)[6][6], T (&out)[3][3]) {
  T columns[3][6];
  for (int q = 0; q < 6; ++q) {
    const T column[6] = {m[0][q], m[1][q], m[2][q], m[3][q], m[4][q], m[5][q]};
    T transformed[3];
    output_1d(column, transformed);
    for (int r = 0; r < 3; ++r) columns[r][q] = transformed[r];
  }
  for (int r = 0; r < 3; ++r) output_1d(columns[r], out[r]);
}

}  // namespace fplab::sim::winograd
