#include "sim/winograd_wgrad.hpp"

#include <cmath>

namespace fplab::sim {
namespace {

// fma in T: std::fma for float and double alike (one rounding).
template <class T>
T fused(T a, T b, T c) {
  return std::fma(a, b, c);
}

// cuDNN's one-dimensional transforms, each output in the order of roundings its kernels use (the
// fit of experiments/winograd_fit.py; a different association or a fused product where cuDNN
// rounds one changes bits in 5-60% of outputs).
template <class T>
struct CudnnTransforms {
  // D (6 x 6) x: the input tile's columns, then its rows. Products rounded (no fusion).
  static std::array<T, 6> data(const std::array<T, 6>& x) {
    const T quarter = T(0.25), half = T(0.5), five_quarters = T(1.25);
    return {(quarter * x[0] + -five_quarters * x[2]) + x[4],    (-quarter * x[1] + x[3]) + (-quarter * x[2] + x[4]),
            (quarter * x[1] - x[3]) + (-quarter * x[2] + x[4]), (-half * x[1] + half * x[3]) + (x[4] - x[2]),
            (half * x[1] - half * x[3]) + (x[4] - x[2]),        (quarter * x[1] + -five_quarters * x[3]) + x[5]};
  }
  // A' (6 x 4) d: the output gradient's. `fused_pairs` false rounds the 2/3-products of rows 1 and
  // 2 before adding them, as cuDNN does in the row pass of the tile's last row (a copy of dY's row 3,
  // which its code takes without a column transform).
  static std::array<T, 6> delta(const std::array<T, 4>& d, bool fused_pairs) {
    const T two_thirds = T(2) / T(3), four_thirds = T(4) / T(3), eight_thirds = T(8) / T(3), third = T(1) / T(3);
    const auto pairs = [&](T sign) {
      if (!fused_pairs)
        return (two_thirds * d[0] + two_thirds * d[2]) + (sign * two_thirds * d[1] + sign * two_thirds * d[3]);
      return fused(two_thirds, d[0], two_thirds * d[2]) + fused(sign * two_thirds, d[1], sign * two_thirds * d[3]);
    };
    const T even = fused(-eight_thirds, d[0], -two_thirds * d[2]);
    return {T(4) * d[0],
            pairs(T(1)),
            pairs(T(-1)),
            even + fused(-four_thirds, d[1], -third * d[3]),
            even + fused(four_thirds, d[1], third * d[3]),
            d[3]};
  }
  // O (3 x 6) m: the sums'. The middle row in double: cuDNN's code adds its halves as doubles (a
  // double constant promotes them), so that m3/2 - m4/2 is never rounded to T.
  static std::array<T, 3> output(const std::array<T, 6>& m) {
    const T sum12 = m[1] + m[2], sum34 = m[3] + m[4], difference12 = m[1] - m[2];
    const double middle =
        (static_cast<double>(difference12) + 0.5 * static_cast<double>(m[3])) - 0.5 * static_cast<double>(m[4]);
    return {(m[0] + sum12) + sum34, static_cast<T>(middle), (sum12 + m[5]) + T(0.25) * sum34};
  }
};

}  // namespace

template <class T>
WinogradTile<T, 6> winograd_data_tile(const WinogradTile<T, 6>& x) {
  WinogradTile<T, 6> columns{}, out{};
  for (size_t q = 0; q < 6; ++q) {
    const auto t = CudnnTransforms<T>::data({x[0][q], x[1][q], x[2][q], x[3][q], x[4][q], x[5][q]});
    for (size_t r = 0; r < 6; ++r) columns[r][q] = t[r];
  }
  for (size_t r = 0; r < 6; ++r) out[r] = CudnnTransforms<T>::data(columns[r]);
  return out;
}

template <class T>
WinogradTile<T, 6> winograd_delta_tile(const WinogradTile<T, 4>& dy) {
  std::array<std::array<T, 4>, 6> columns{};
  for (size_t q = 0; q < 4; ++q) {
    const auto t = CudnnTransforms<T>::delta({dy[0][q], dy[1][q], dy[2][q], dy[3][q]}, true);
    for (size_t r = 0; r < 6; ++r) columns[r][q] = t[r];
  }
  WinogradTile<T, 6> out{};
  for (size_t r = 0; r < 6; ++r) out[r] = CudnnTransforms<T>::delta(columns[r], r != 5);
  return out;
}

template <class T>
WinogradTile<T, 3> winograd_output_tile(const WinogradTile<T, 6>& m) {
  std::array<std::array<T, 6>, 3> columns{};
  for (size_t q = 0; q < 6; ++q) {
    const auto t = CudnnTransforms<T>::output({m[0][q], m[1][q], m[2][q], m[3][q], m[4][q], m[5][q]});
    for (size_t r = 0; r < 3; ++r) columns[r][q] = t[r];
  }
  WinogradTile<T, 3> out{};
  for (size_t r = 0; r < 3; ++r) out[r] = CudnnTransforms<T>::output(columns[r]);
  return out;
}

template <class T>
void winograd_data_transform(const T* x, const WinogradWgradShape& s, T* v) {
  const size_t terms = s.terms(), c_count = s.in_channels;
  const long h = static_cast<long>(s.height), w = static_cast<long>(s.width), pad = static_cast<long>(s.padding);
  size_t n = 0;
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t ty = 0; ty < s.tiles_y(); ++ty)
      for (size_t tx = 0; tx < s.tiles_x(); ++tx, ++n)
        for (size_t c = 0; c < c_count; ++c) {
          const T* plane = x + (b * c_count + c) * s.height * s.width;
          WinogradTile<T, 6> tile{};
          for (long r = 0; r < 6; ++r)
            for (long q = 0; q < 6; ++q) {
              const long y = static_cast<long>(4 * ty) + r - pad, xx = static_cast<long>(4 * tx) + q - pad;
              tile[r][q] = y >= 0 && y < h && xx >= 0 && xx < w ? plane[y * w + xx] : T(0);
            }
          const auto transformed = winograd_data_tile(tile);
          for (size_t r = 0; r < 6; ++r)
            for (size_t q = 0; q < 6; ++q) v[((r * 6 + q) * terms + n) * c_count + c] = transformed[r][q];
        }
}

template <class T>
void winograd_delta_transform(const T* dy, const WinogradWgradShape& s, T* u) {
  const size_t terms = s.terms(), k_count = s.out_channels, ho = s.out_h(), wo = s.out_w();
  size_t n = 0;
  for (size_t b = 0; b < s.batch; ++b)
    for (size_t ty = 0; ty < s.tiles_y(); ++ty)
      for (size_t tx = 0; tx < s.tiles_x(); ++tx, ++n)
        for (size_t k = 0; k < k_count; ++k) {
          const T* plane = dy + (b * k_count + k) * ho * wo;
          WinogradTile<T, 4> tile{};
          for (size_t r = 0; r < 4; ++r)
            for (size_t q = 0; q < 4; ++q) {
              const size_t y = 4 * ty + r, xx = 4 * tx + q;
              tile[r][q] = y < ho && xx < wo ? plane[y * wo + xx] : T(0);
            }
          const auto transformed = winograd_delta_tile(tile);
          for (size_t r = 0; r < 6; ++r)
            for (size_t q = 0; q < 6; ++q) u[((r * 6 + q) * k_count + k) * terms + n] = transformed[r][q];
        }
}

template <class T>
void winograd_output_transform(const T* m, size_t out_channels, size_t in_channels, T* dw) {
  const size_t kc = out_channels * in_channels;
  for (size_t k = 0; k < out_channels; ++k)
    for (size_t c = 0; c < in_channels; ++c) {
      WinogradTile<T, 6> tile{};
      for (size_t p = 0; p < kWinogradPositions; ++p) tile[p / 6][p % 6] = m[p * kc + k * in_channels + c];
      const auto transformed = winograd_output_tile(tile);
      for (size_t i = 0; i < 3; ++i)
        for (size_t j = 0; j < 3; ++j) dw[(c * 9 + i * 3 + j) * out_channels + k] = transformed[i][j];
    }
}

template WinogradTile<float, 6> winograd_data_tile(const WinogradTile<float, 6>&);
template WinogradTile<double, 6> winograd_data_tile(const WinogradTile<double, 6>&);
template WinogradTile<float, 6> winograd_delta_tile(const WinogradTile<float, 4>&);
template WinogradTile<double, 6> winograd_delta_tile(const WinogradTile<double, 4>&);
template WinogradTile<float, 3> winograd_output_tile(const WinogradTile<float, 6>&);
template WinogradTile<double, 3> winograd_output_tile(const WinogradTile<double, 6>&);
template void winograd_data_transform<float>(const float*, const WinogradWgradShape&, float*);
template void winograd_data_transform<double>(const double*, const WinogradWgradShape&, double*);
template void winograd_delta_transform<float>(const float*, const WinogradWgradShape&, float*);
template void winograd_delta_transform<double>(const double*, const WinogradWgradShape&, double*);
template void winograd_output_transform<float>(const float*, size_t, size_t, float*);
template void winograd_output_transform<double>(const double*, size_t, size_t, double*);

}  // namespace fplab::sim
