// The wide-tile GEMM kernel (gpu_gemm_tiled.cu), for gpu_gemm.cu: the same FMA chains as its
// 64 x 64 kernel, in 128 x 128 or 128 x 64 output tiles with 8 x 8 outputs a thread and K staged
// 8 at a time through two shared-memory buffers, loads as float4. It writes chains out (one part:
// C; several: the parts' workspace, or atomicAdd into C); the ordered combines that fold parts in
// the kernel itself (serial, last folds) stay with the 64 x 64 kernel. No CUDA types here.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fplab::sim::gpu::detail {

enum class WideTile { none, t128x128, t128x64 };

const char* wide_tile_name(WideTile tile);

// Whether the wide kernel can take these operands with this tile: float4 loads need n, k and the
// part length (chunk) multiples of 4 and a, b 16-byte aligned; and the tile must not leave most
// of a 128-column tile empty.
bool wide_tile_fits(WideTile tile, const float* a, const float* b, int64_t n, int64_t k, int64_t chunk);
// The shape's half of wide_tile_fits (operands at 16-byte aligned addresses assumed).
bool wide_tile_shape(WideTile tile, int64_t n, int64_t k, int64_t chunk);

// The tile the wide kernel runs a GEMM of m x n outputs in `parts` split-K parts with, by shape
// (gpu_gemm_tiled.cu says why); none: the 64 x 64 kernel (operands the wide ones do not take).
WideTile wide_tile_for(const float* a, const float* b, int64_t m, int64_t n, int64_t k, int64_t chunk, int64_t parts);

// Every part z < parts of every output: the chain over K in [z * chunk, min(k, (z + 1) * chunk)),
// from -0 (an FMA onto -0 is the rounded first product, as the 64 x 64 kernel starts its chains),
// into out[z * m * n + at] (atomic: atomicAdd-ed into out[at]). Enqueued on the default stream.
void launch_wide_chains(WideTile tile, bool atomic, const float* a, const float* b, float* out, int m, int n,
                        int64_t k, int64_t chunk, unsigned parts);

}  // namespace fplab::sim::gpu::detail
