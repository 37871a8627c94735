// A 3x3, stride-1 convolution's weight gradient the way cuDNN's winograd_nonfused kernels compute it
// on an H100/H200 (cuDNN 9.19), bit for bit: the output gradient in tiles of 4x4 and the input in
// the 6x6 tiles they read, each transformed, multiplied position by position and summed over images
// and tiles, and the sums transformed back:
//
//   dW[k][c] = O [ sum over (b, tile) of (A' dY_tile A'^T) (.) (D X_tile D^T) ] O^T   (3 x 3)
//
// The matrices, their fp32 constants and the order of every rounding are cuDNN's, read from the
// workspace its four kernels leave behind (experiments/winograd_workspace_torch.py, fitted by
// experiments/winograd_fit.py; docs/results/calibration_torch.md, "cuDNN's Winograd, bit for bit"):
// the points 0, +-1, +-1/2 and infinity; D (the input's: 1/4, 1/2, 5/4) with rounded products, A'
// (the output gradient's: 4, 2/3, 4/3, 8/3, 1/3) with fused multiply-adds, O (the sums': +-1, +-1/2,
// 1/4) with one of its rows evaluated in double. 2-D transforms run column by column first (along
// the tile's rows), then row by row, as cuDNN's do. The sums over (b, tile) are the caller's: 36 GEMMs whose K is batch
// x tiles, so that they follow a schedule like any other reduction (cuDNN's: one FMA chain each, from +0, over the
// terms in order; a cuBLAS gemv, `strided(32):seq | all:shfl_down`, where the input has one channel). In double every
// step is the same expression in double: the exact weight gradient to rounding.
#pragma once

#include <array>
#include <cstddef>

namespace fplab::sim {

struct WinogradWgradShape {
  size_t batch = 0, in_channels = 0, out_channels = 0, height = 0, width = 0, padding = 0;

  size_t out_h() const { return height + 2 * padding - 2; }
  size_t out_w() const { return width + 2 * padding - 2; }
  size_t tiles_y() const { return (out_h() + 3) / 4; }
  size_t tiles_x() const { return (out_w() + 3) / 4; }
  // The GEMMs' K: one term per (image, tile), in that order, tiles row by row.
  size_t terms() const { return batch * tiles_y() * tiles_x(); }
};

inline constexpr size_t kWinogradPositions = 36;  // the 6 x 6 transformed tile

template <class T, size_t N>
using WinogradTile = std::array<std::array<T, N>, N>;  // [row][column]

// One tile's transforms (the whole-tensor ones below apply them to every tile).
template <class T>
WinogradTile<T, 6> winograd_data_tile(const WinogradTile<T, 6>& x);  // D X D^T
template <class T>
WinogradTile<T, 6> winograd_delta_tile(const WinogradTile<T, 4>& dy);  // A' dY A'^T
template <class T>
WinogradTile<T, 3> winograd_output_tile(const WinogradTile<T, 6>& m);  // O M O^T

// x (batch, C, H, W) -> v (36, terms, C): D X D^T of every input tile (zeros outside the image).
template <class T>
void winograd_data_transform(const T* x, const WinogradWgradShape& shape, T* v);

// dy (batch, K, out_h, out_w) -> u (36, K, terms): A' dY A'^T of every 4x4 output-gradient tile
// (zeros past the output's edge).
template <class T>
void winograd_delta_transform(const T* dy, const WinogradWgradShape& shape, T* u);

// m (36, K, C), the 36 sums -> dw in fplab's weight layout: (C * 9) x K, row (c, i, j).
template <class T>
void winograd_output_transform(const T* m, size_t out_channels, size_t in_channels, T* dw);

}  // namespace fplab::sim
