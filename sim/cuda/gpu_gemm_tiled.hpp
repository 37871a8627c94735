// The tiled GEMM kernels (gpu_gemm_tiled.cu), for gpu_gemm.cu: the same FMA chains as its 64 x 64
// kernel in other output tiles, loads as float4:
// - wide: 128 x 128 or 128 x 64 outputs a block, 8 x 8 a thread, K staged 8 at a time through two
//   shared-memory buffers (GEMMs with many outputs: each shared-memory load feeds many FMAs);
// - thin: 16 x 32 outputs a block, 2 x 2 a thread, K staged 64 at a time by cp.async into three
//   buffers (few outputs over a long K, a weight gradient in one chain: 16 times as many blocks
//   as 128 x 64 tiles make, and loads far ahead of the chains);
// - medium: 32 x 64 outputs a block, 4 x 4 a thread, K staged 32 at a time the thin tile's way
//   (a long K in split-K parts: enough blocks, and four times the FMAs a shared-memory load).
// They write chains out (one part: C; several: the parts' workspace, or atomicAdd into C); the
// ordered combines that fold parts in the kernel itself (serial, last folds) stay with the 64 x 64
// kernel. No CUDA types here.
#pragma once

#include <cstddef>
#include <cstdint>

#include "sim/cuda/k_parts.hpp"

namespace fplab::sim::gpu::detail {

enum class ChainTile { none, t128x128, t128x64, t16x32, t32x64 };

const char* chain_tile_name(ChainTile tile);

// Whether a tiled kernel can take these operands with this tile: float4 loads need n, k and every
// part's bounds (KParts::aligned4) multiples of 4 and a, b 16-byte aligned; a wide tile must
// not leave most of a 128-column tile empty; and the grid's rows of tiles must fit gridDim.y (65535).
bool chain_tile_fits(ChainTile tile, const float* a, const float* b, int64_t m, int64_t n, int64_t k,
                     const KParts& ks);
// The shape's half of chain_tile_fits (operands at 16-byte aligned addresses assumed).
bool chain_tile_shape(ChainTile tile, int64_t m, int64_t n, int64_t k, const KParts& ks);

// The tile a GEMM of m x n outputs in `parts` split-K parts runs in, by shape (gpu_gemm_tiled.cu
// says why); none: the 64 x 64 kernel (operands the tiled ones do not take).
ChainTile chain_tile_for(const float* a, const float* b, int64_t m, int64_t n, int64_t k, const KParts& ks,
                         int64_t parts);
// The same choice among the wide tiles and the thin one only: the choice the convolutions' passes
// that read their operand as they go start from (gpu_conv.cu's conv_tile; they come in the wide
// tiles and, the forward and col2im, in the medium one).
ChainTile wide_tile_for(const float* a, const float* b, int64_t m, int64_t n, int64_t k, const KParts& ks,
                        int64_t parts);

// Every part z < parts of every output: the chain over K in [ks.begin(z), ks.end(z, k)),
// from -0 (an FMA onto -0 is the rounded first product, as the 64 x 64 kernel starts its chains),
// into out[z * m * n + at] (atomic: atomicAdd-ed into out[at]); `rounded`: each product rounded to
// fp32, then added (chain_step). Enqueued on the default stream.
void launch_tiled_chains(ChainTile tile, bool atomic, bool rounded, const float* a, const float* b, float* out, int m,
                         int n, int64_t k, const KParts& ks, unsigned parts);

// `batches` GEMMs of one shape in one launch of the 16 x 32 kernel: GEMM z multiplies a + z * a_step
// by b + z * b_step into out + z * m * n, one chain an output over all of K from -0, as
// launch_tiled_chains with one part. Every entry's operands as chain_tile_fits(t16x32) takes them
// (the steps multiples of 4 floats), out 16-byte aligned (n, a multiple of 4, keeps every entry's so).
void launch_thin_batched(bool rounded, const float* a, const float* b, float* out, int m, int n, int64_t k,
                         unsigned batches, int64_t a_step, int64_t b_step);

// A convolution's square geometry (one group, no dilation) for the kernels below, which read A's
// rows from a tensor as they go (no columns in memory). Each writes rows C-contiguous (device
// floats); its right operand is 16-byte aligned; tile t128x64 or t128x128, or for the forward and
// the col2im pass t32x64 (the medium tile, its operand gathered by 4-byte cp.async copies; the
// col2im pass then needs output channels a multiple of 32).
struct ConvShape {
  int batch, channels, height, width;                      // the input's
  int out_channels, out_h, out_w, kernel, stride, padding;  // the output's, the square geometry
};
// Where such a kernel's rows (b, position) x n go: positions 0, as rows; else as the layer's
// tensor (batch, n, positions), bias[c] (device floats, where given) added as a float32 sum: the
// transpose that would follow, done by the stores. positions a multiple of 4, rows 16-byte aligned
// (else std::invalid_argument).
struct PlanarRows {
  int positions = 0;
  const float* bias = nullptr;
};
// The direct input gradient (conv_dgrad "direct") in one chain an output: rows[(b, y, x) *
// channels + c_in] = the FMA chain, from -0, over the columns (c, i, j) in that order of gy[b, c,
// oy, ox] * w_taps[(c, i, j) * channels + c_in], where y + padding - i = oy * stride and x +
// padding - j = ox * stride lie on the output, else +0 (the gathered taps' GEMM,
// models/conv_dgrad_taps.hpp). gy: (batch, out_channels, out_h, out_w).
void launch_direct_dgrad_chains(ChainTile tile, const ConvShape& shape, const float* gy, const float* w_taps,
                                float* rows, const PlanarRows& planar = {});
// The forward in one chain an output: rows[(b, oy, ox) * out_channels + o] = the FMA chain, from
// -0, over the im2col columns (c, i, j) in that order of x[b, c, oy * stride + i - padding, ox *
// stride + j - padding] (+0 in the padding) * w_t[(c, i, j) * out_channels + o]. x: (batch,
// channels, height, width).
void launch_forward_chains(ChainTile tile, const ConvShape& shape, const float* x, const float* w_t, float* rows,
                           const PlanarRows& planar = {});
// The input gradient as the columns' GEMM (`all:seq` over the output channels) and col2im compute
// it, in one pass: rows[(b, y, x) * channels + c] = +0 plus, for each kernel offset (i, j) from the
// last to the first (col2im's order: output positions ascending), the FMA chain from -0 over o of
// gy[b, o, oy, ox] * w_offsets[(t, o) * channels + c] (t: the offset's place in that order), for
// the offsets that meet an output position only (col2im adds nothing for the others; their chain
// of +0 terms would be NaN where a weight is infinite). out_channels a multiple of 8.
void launch_col2im_dgrad_chains(ChainTile tile, const ConvShape& shape, const float* gy, const float* w_offsets,
                                float* rows, const PlanarRows& planar = {});
// The same sums in two launches, for grids too short to fill the GPU: each kernel offset's chains
// as a part of their own (k·k times the blocks), into parts (k·k x rows x channels floats: part t,
// the offset's chain from -0 for every row, at parts + t·rows·channels), then folded in col2im's
// order, +0 plus the parts that meet each row (launch_col2im_fold): the bits of
// launch_col2im_dgrad_chains.
void launch_col2im_dgrad_parts(ChainTile tile, const ConvShape& shape, const float* gy, const float* w_offsets,
                               float* parts);
void launch_col2im_fold(const ConvShape& shape, const float* parts, float* rows, const PlanarRows& planar = {});

}  // namespace fplab::sim::gpu::detail
