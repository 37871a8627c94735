// cuDNN's Winograd weight gradient (sim/winograd_wgrad.hpp) on the device: the transforms of the
// input and the output gradient, one row of the 6 x 6 domain at a time (six of the 36 GEMMs'
// operands, so that the transformed tensors never exist whole), and the 36 sums transformed back.
// The GEMMs between them are the caller's (fplab.torch's CUDA engine: GpuGemm in the wgrad
// schedule). Bit for bit the CPU's transforms (the same sim/winograd_transforms.hpp). Every
// pointer is device memory; enqueued on the default stream and not waited for. No CUDA types here.
#pragma once

#include <cstddef>

#include "sim/winograd_wgrad.hpp"

namespace fplab::sim::gpu {

// x (batch, C, H, W) -> v (6, terms, C): positions (row, 0..5) of D X D^T of every input tile
// (zeros outside the image), term (image, tile_y, tile_x); each position's block is one GEMM's
// B (terms x C, row-major).
void winograd_data_row(const float* x, const WinogradWgradShape& shape, int row, float* v);

// dy (batch, K, out_h, out_w) -> u (6, K, terms): positions (row, 0..5) of A' dY A'^T of every
// 4 x 4 tile (zeros past the output's edge); each position's block is one GEMM's A (K x terms).
void winograd_delta_row(const float* dy, const WinogradWgradShape& shape, int row, float* u);

// m (36, K, C), the 36 GEMMs' results -> dw (K, C, 3, 3), PyTorch's weight layout: O M O^T.
void winograd_output(const float* m, size_t out_channels, size_t in_channels, float* dw);

}  // namespace fplab::sim::gpu
