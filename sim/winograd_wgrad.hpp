// A 3x3, stride-1 convolution's weight gradient the way Winograd kernels compute it (cuDNN's
// winograd_nonfused on an H100: docs/results/calibration_torch.md), with F(4x4, 3x3)'s transforms
// (Lavin and Gray's points 0, +-1, +-2 and infinity): the output gradient in tiles of 4x4 and the
// input in the 6x6 tiles they read, each transformed, multiplied position by position and summed
// over images and tiles, and the sums transformed back:
//
//   dW[k][c] = G^T [ sum over (b, tile) of (A dY_tile A^T) (.) (B^T X_tile B) ] G   (3 x 3)
//
// Every transform is evaluated in the working type T, one rounding per product and per addition,
// terms left to right in the order the matrices list them (a coefficient of +-1 multiplies
// nothing; 1/6, 1/12 and 1/24 are T's nearest values), 2-D transforms column by column first, then
// row by row. The sums over (b, tile) are the caller's: 36 GEMMs whose K is batch x tiles, so that
// they follow a schedule like any other reduction. cuDNN's own transforms and orders are not known
// (no tree of additions reveals them): this is the textbook form, whose error has the same
// normwise shape; its bits are not the chip's.
#pragma once

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

// x (batch, C, H, W) -> v (36, terms, C): B^T X B of every input tile (zeros outside the image).
template <class T>
void winograd_data_transform(const T* x, const WinogradWgradShape& shape, T* v);

// dy (batch, K, out_h, out_w) -> u (36, K, terms): A dY A^T of every 4x4 output-gradient tile
// (zeros past the output's edge).
template <class T>
void winograd_delta_transform(const T* dy, const WinogradWgradShape& shape, T* u);

// m (36, K, C), the 36 sums -> dw in fplab's weight layout: (C * 9) x K, row (c, i, j).
template <class T>
void winograd_output_transform(const T* m, size_t out_channels, size_t in_channels, T* dw);

}  // namespace fplab::sim
