// A convolution's lowering on the device: im2col (the input to the GEMM's columns) and col2im
// (the columns' gradient back to the input's), bit for bit what models/conv2d.cpp computes on the
// CPU. The GEMM between them is GpuGemm's. No CUDA types in this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "sim/conv_geometry.hpp"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gpu_gemm_tiled.hpp"

namespace fplab::sim::gpu {

// Where a pass that makes rows (b, position) x channels puts them: as those rows (planar false),
// or as the layer's tensor (batch, channels, positions), bias[c] (device floats, where given)
// added as a float32 sum: the transpose that would follow, done by the chains' stores. Planar
// takes positions that are a multiple of 4 and a 16-byte aligned destination
// (GpuConv::planar_fits; else std::invalid_argument).
struct RowsOut {
  bool planar = false;
  const float* bias = nullptr;
};
// Where col2im_dgrad_on_device may keep each kernel offset's chains apart (k·k x rows x channels
// floats) when its grid alone would leave the GPU short of blocks: `floats` of device memory at
// `workspace` (none: never); `always` takes that form whatever the grid (the tests).
struct Col2imParts {
  float* workspace = nullptr;
  size_t floats = 0;
  bool always = false;
};

class GpuConv {
 public:
  // Whether rows of images of `positions` rows each can go to `to` planar (RowsOut).
  static bool planar_fits(size_t positions, const float* to);
  // For the tests and benchmarks: the output tile of the passes below that read their operand as
  // they go (forward_on_device, col2im_dgrad_on_device, direct_dgrad_on_device), forced where the
  // pass and the shape take it (t128x64 and t128x128 where chain_tile_fits; t32x64: the forward,
  // and the input gradient with output channels a multiple of 32 where the offsets' chains do not
  // go apart), else chosen by shape as without (other tiles too); std::nullopt: by shape again.
  // A pass the shape gives no tile still returns false.
  static void force_tile(std::optional<detail::ChainTile> tile);

  GpuConv() = default;
  GpuConv(const GpuConv&) = delete;
  GpuConv& operator=(const GpuConv&) = delete;

  // Copies x (batch, channels, height, width) to the device and lowers it there to the columns:
  // rows() x taps(), row (b, oy, ox), column (c, i, j) = x[b, c, oy·stride + i − padding,
  // ox·stride + j − padding], +0 where that lies in the padding (Conv2d::im2col's layout). Copies
  // them to `cols` on the host too unless it is null. Returns the device columns, valid until the
  // next im2col.
  const float* im2col(const ConvGeometry& geometry, const float* x, float* cols = nullptr);
  // A device buffer of rows() x taps() floats for the columns' gradient (a GEMM writes it, col2im
  // reads it), valid until the next call.
  float* dcols_buffer(const ConvGeometry& geometry);
  // dx (host, batch x channels x height x width) = col2im(dcols): each input element the sum of
  // the column entries that were copied from it, starting from +0 and added in the CPU loop's
  // order (by output position (oy, ox); gpu_conv.cu says why). dcols: rows() x taps(), on the
  // host or dcols_buffer(geometry).
  void col2im(const ConvGeometry& geometry, const float* dcols, float* dx);

  // The same two on the caller's device memory (fplab.torch's CUDA tensors), enqueued on the
  // default stream and not waited for: x (batch, channels, height, width) to cols, rows() x taps()
  // or, `transposed`, taps() x rows() (the weight gradient's left operand), the taps in the order
  // tap_order gives where it is not null (device memory, taps() entries: column t is tap
  // tap_order[t], a GEMM's K gathered as gpu_k_order.hpp does); dcols (rows() x taps()) to dx.
  static void im2col_on_device(const ConvGeometry& geometry, const float* x, float* cols, bool transposed,
                               const uint32_t* tap_order = nullptr);
  static void col2im_on_device(const ConvGeometry& geometry, const float* dcols, float* dx);
  // conv_dgrad "direct"'s terms for `images` images of the output gradient gy (images, out_channels,
  // out_h, out_w; the geometry's input height and width): (images·H·W) x (out_channels·k·k), row (b,
  // y, x), column (c, i, j) the gradient at the output position tap (i, j) of pixel (y, x) meets,
  // +0 where it meets none (fplab.torch's Engine.dgrad_taps). Device memory, default stream.
  static void dgrad_taps_on_device(const ConvGeometry& geometry, size_t out_channels, const float* gy, size_t images,
                                   float* taps);
  // The same taps' GEMM with the weight as (c, i, j) x channels (w_taps, 16-byte aligned) in one FMA
  // chain an output over all of K (the dgrad schedule `all:seq`), the taps read from gy as the
  // chains need them, none in memory: rows, (batch·H·W) x channels, the GEMM's product. False
  // (nothing run) where the wide tiles do not take the shape (the caller gathers the taps instead).
  static bool direct_dgrad_on_device(const ConvGeometry& geometry, size_t out_channels, const float* gy,
                                     const float* w_taps, float* rows, const RowsOut& out = {});
  // The same on host memory, for the tests: gy and w_taps uploaded, the chains run, rows
  // downloaded (nothing written where the function above would return false); `planar`: rows as
  // RowsOut's planar layout (bias: host floats, uploaded, where given).
  static bool direct_dgrad(const ConvGeometry& geometry, size_t out_channels, const float* gy, const float* w_taps,
                           float* rows, bool planar = false);
  // The forward's GEMM, columns times w_t (taps x out_channels, 16-byte aligned), in one FMA chain
  // an output over the taps in im2col's order (the fwd schedule `all:seq`), the columns read from x
  // as the chains need them: rows, rows() x out_channels. False (nothing run) where the wide tiles
  // do not take the shape or the kernel is larger than 5 x 5 (the caller makes the columns instead).
  static bool forward_on_device(const ConvGeometry& geometry, size_t out_channels, const float* x, const float* w_t,
                                float* rows, const RowsOut& out = {});
  // On host memory, as direct_dgrad; bias (host floats, out_channels of them) only with planar.
  static bool forward(const ConvGeometry& geometry, size_t out_channels, const float* x, const float* w_t,
                      float* rows, bool planar = false, const float* bias = nullptr);
  // The input gradient as the columns' gradient (gy's rows times the weight, one FMA chain over the
  // output channels: the dgrad schedule `all:seq`) and col2im make it, in one pass with neither in
  // memory: rows, (batch·H·W) x channels (dx's elements, each the sum from +0 of its columns'
  // entries in col2im's order). weight: (out_channels, channels, k, k) as the layer holds it;
  // w_scratch: taps() x out_channels device floats for its copy in the order the pass reads.
  // False (nothing run) where the tiles do not take the shape or out_channels is not a multiple
  // of 8. Output channels a multiple of 32 may take the medium 32 x 64 tile (its segments end
  // with its stages of K).
  static bool col2im_dgrad_on_device(const ConvGeometry& geometry, size_t out_channels, const float* gy,
                                     const float* weight, float* w_scratch, float* rows, const RowsOut& out = {},
                                     const Col2imParts& parts = {});
  // On host memory, as direct_dgrad; `parts`: the offsets' chains apart (Col2imParts::always).
  static bool col2im_dgrad(const ConvGeometry& geometry, size_t out_channels, const float* gy, const float* weight,
                           float* rows, bool planar = false, bool parts = false);

 private:
  DeviceBuffer x_, cols_, dcols_, dx_;
};

}  // namespace fplab::sim::gpu
