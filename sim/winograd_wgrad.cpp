#include "sim/winograd_wgrad.hpp"

#include "sim/winograd_transforms.hpp"

namespace fplab::sim {

namespace {

// The transforms of sim/winograd_transforms.hpp on std::array tiles: `transform` from an N x N
// tile to an M x M one, through plain arrays (the form the device code takes too).
template <size_t M, class T, size_t N, class Transform>
WinogradTile<T, M> on_tile(const WinogradTile<T, N>& in, Transform transform) {
  T plain_in[N][N], plain_out[M][M];
  for (size_t r = 0; r < N; ++r)
    for (size_t q = 0; q < N; ++q) plain_in[r][q] = in[r][q];
  transform(plain_in, plain_out);
  WinogradTile<T, M> out{};
  for (size_t r = 0; r < M; ++r)
    for (size_t q = 0; q < M; ++q) out[r][q] = plain_out[r][q];
  return out;
}

}  // namespace

template <class T>
WinogradTile<T, 6> winograd_data_tile(const WinogradTile<T, 6>& x) {
  return on_tile<6>(x, [](const T(&in)[6][6], T(&out)[6][6]) { winograd::data_tile(in, out); });
}

template <class T>
WinogradTile<T, 6> winograd_delta_tile(const WinogradTile<T, 4>& dy) {
  return on_tile<6>(dy, [](const T(&in)[4][4], T(&out)[6][6]) { winograd::delta_tile(in, out); });
}

template <class T>
WinogradTile<T, 3> winograd_output_tile(const WinogradTile<T, 6>& m) {
  return on_tile<3>(m, [](const T(&in)[6][6], T(&out)[3][3]) { winograd::output_tile(in, out); });
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
