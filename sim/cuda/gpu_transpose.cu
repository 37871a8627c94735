// Batched transposes (gpu_transpose.hpp): 32 x 32 tiles staged through shared memory, so that
// both the reads of x and the writes of y run along rows (coalesced); the tile's extra column keeps
// the column reads of shared memory off a single bank.
#include <algorithm>
#include <cstdint>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_transpose.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kTile = 32, kRowsPerPass = 8;  // a block: 32 x 8 threads, each moving 4 entries
constexpr int64_t kMaxGridY = 65535;

__global__ void transpose_tiles(const float* __restrict__ x, int64_t batches, int64_t rows, int64_t cols,
                                const float* __restrict__ add, float* __restrict__ y) {
  __shared__ float tile[kTile][kTile + 1];
  const int64_t tiles_across = (cols + kTile - 1) / kTile, tiles_down = (rows + kTile - 1) / kTile;
  const int64_t tiles = batches * tiles_down * tiles_across;
  for (int64_t t = blockIdx.x + static_cast<int64_t>(blockIdx.y) * gridDim.x; t < tiles;
       t += static_cast<int64_t>(gridDim.x) * gridDim.y) {
    const int64_t b = t / (tiles_down * tiles_across), in_batch = t % (tiles_down * tiles_across);
    const int64_t row0 = in_batch / tiles_across * kTile, col0 = in_batch % tiles_across * kTile;
    const float* xb = x + b * rows * cols;
    float* yb = y + b * rows * cols;
    for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {
      const int64_t i = row0 + r, j = col0 + threadIdx.x;
      if (i < rows && j < cols) tile[r][threadIdx.x] = xb[i * cols + j];
    }
    __syncthreads();
    for (int r = threadIdx.y; r < kTile; r += kRowsPerPass) {
      const int64_t j = col0 + r, i = row0 + threadIdx.x;  // y's row j, column i
      if (i < rows && j < cols) {
        const float v = tile[threadIdx.x][r];
        yb[j * rows + i] = add ? __fadd_rn(v, add[j]) : v;
      }
    }
    __syncthreads();
  }
}

}  // namespace

void transpose_batches_on_device(const float* x, size_t batches, size_t rows, size_t cols, const float* add, float* y) {
  const auto tiles = static_cast<int64_t>(batches * ((rows + kTile - 1) / kTile) * ((cols + kTile - 1) / kTile));
  if (tiles == 0) return;
  const auto across = static_cast<unsigned>(std::min<int64_t>(tiles, int64_t{1} << 16));
  const auto down = static_cast<unsigned>(std::min<int64_t>((tiles + across - 1) / across, kMaxGridY));
  transpose_tiles<<<dim3(across, down), dim3(kTile, kRowsPerPass)>>>(
      x, static_cast<int64_t>(batches), static_cast<int64_t>(rows), static_cast<int64_t>(cols), add, y);
  FPLAB_CUDA_LAUNCHED("transpose_tiles");
}

}  // namespace fplab::sim::gpu
