#include "sim/winograd_wgrad.hpp"

#include <array>

namespace fplab::sim {
namespace {

// One-dimensional transforms of a strided vector, each output a left-to-right sum of rounded
// products (no product where the coefficient is +-1).
template <class T>
struct Transforms {
  // B^T (6 x 6) x
  static std::array<T, 6> data(const std::array<T, 6>& x) {
    return {T(4) * x[0] + T(-5) * x[2] + x[4],
            T(-4) * x[1] + T(-4) * x[2] + x[3] + x[4],
            T(4) * x[1] + T(-4) * x[2] - x[3] + x[4],
            T(-2) * x[1] - x[2] + T(2) * x[3] + x[4],
            T(2) * x[1] - x[2] + T(-2) * x[3] + x[4],
            T(4) * x[1] + T(-5) * x[3] + x[5]};
  }
  // A (6 x 4) d, A^T being F(4x4, 3x3)'s output transform
  static std::array<T, 6> delta(const std::array<T, 4>& d) {
    return {d[0],
            d[0] + d[1] + d[2] + d[3],
            d[0] - d[1] + d[2] - d[3],
            d[0] + T(2) * d[1] + T(4) * d[2] + T(8) * d[3],
            d[0] + T(-2) * d[1] + T(4) * d[2] + T(-8) * d[3],
            d[3]};
  }
  // G^T (3 x 6) m, G being F(4x4, 3x3)'s filter transform
  static std::array<T, 3> output(const std::array<T, 6>& m) {
    const T quarter = T(1) / T(4), sixth = T(1) / T(6), twelfth = T(1) / T(12), twentyfourth = T(1) / T(24);
    return {quarter * m[0] + -sixth * m[1] + -sixth * m[2] + twentyfourth * m[3] + twentyfourth * m[4],
            -sixth * m[1] + sixth * m[2] + twelfth * m[3] + -twelfth * m[4],
            -sixth * m[1] + -sixth * m[2] + sixth * m[3] + sixth * m[4] + m[5]};
  }
};

// L X L^T for a tile X (In x In), `transform` being L (Out x In) on one vector: the columns
// first, then the rows (the order of roundings the header states).
template <size_t Out, size_t In, class T, class Transform>
std::array<std::array<T, Out>, Out> both_ways(const std::array<std::array<T, In>, In>& tile, Transform transform) {
  std::array<std::array<T, In>, Out> columns{};
  for (size_t q = 0; q < In; ++q) {
    std::array<T, In> column;
    for (size_t r = 0; r < In; ++r) column[r] = tile[r][q];
    const std::array<T, Out> out = transform(column);
    for (size_t r = 0; r < Out; ++r) columns[r][q] = out[r];
  }
  std::array<std::array<T, Out>, Out> result{};
  for (size_t r = 0; r < Out; ++r) result[r] = transform(columns[r]);
  return result;
}

}  // namespace

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
          std::array<std::array<T, 6>, 6> tile{};  // tile[row][col]
          for (long r = 0; r < 6; ++r)
            for (long q = 0; q < 6; ++q) {
              const long y = static_cast<long>(4 * ty) + r - pad, xx = static_cast<long>(4 * tx) + q - pad;
              tile[r][q] = y >= 0 && y < h && xx >= 0 && xx < w ? plane[y * w + xx] : T(0);
            }
          const auto transformed = both_ways<6>(tile, Transforms<T>::data);  // B^T X B
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
          std::array<std::array<T, 4>, 4> tile{};
          for (size_t r = 0; r < 4; ++r)
            for (size_t q = 0; q < 4; ++q) {
              const size_t y = 4 * ty + r, xx = 4 * tx + q;
              tile[r][q] = y < ho && xx < wo ? plane[y * wo + xx] : T(0);
            }
          const auto transformed = both_ways<6>(tile, Transforms<T>::delta);  // A D A^T
          for (size_t r = 0; r < 6; ++r)
            for (size_t q = 0; q < 6; ++q) u[((r * 6 + q) * k_count + k) * terms + n] = transformed[r][q];
        }
}

template <class T>
void winograd_output_transform(const T* m, size_t out_channels, size_t in_channels, T* dw) {
  const size_t kc = out_channels * in_channels;
  for (size_t k = 0; k < out_channels; ++k)
    for (size_t c = 0; c < in_channels; ++c) {
      std::array<std::array<T, 6>, 6> tile{};
      for (size_t p = 0; p < kWinogradPositions; ++p) tile[p / 6][p % 6] = m[p * kc + k * in_channels + c];
      const auto transformed = both_ways<3>(tile, Transforms<T>::output);  // G^T M G
      for (size_t i = 0; i < 3; ++i)
        for (size_t j = 0; j < 3; ++j) dw[(c * 9 + i * 3 + j) * out_channels + k] = transformed[i][j];
    }
}

template void winograd_data_transform<float>(const float*, const WinogradWgradShape&, float*);
template void winograd_data_transform<double>(const double*, const WinogradWgradShape&, double*);
template void winograd_delta_transform<float>(const float*, const WinogradWgradShape&, float*);
template void winograd_delta_transform<double>(const double*, const WinogradWgradShape&, double*);
template void winograd_output_transform<float>(const float*, size_t, size_t, float*);
template void winograd_output_transform<double>(const double*, size_t, size_t, double*);

}  // namespace fplab::sim
