#include "sim/cuda/gpu_winograd.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>

#include "sim/cuda/cuda_check.cuh"
#include "sim/winograd_transforms.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 256;
constexpr uint64_t kMaxBlocks = 65535;

unsigned blocks_for(uint64_t count) {
  return static_cast<unsigned>(std::min<uint64_t>((count + kThreads - 1) / kThreads, kMaxBlocks));
}

// What a kernel reads of WinogradWgradShape (whose functions are the host's): the planes it
// tiles, their channels, the tiles.
struct Tiling {
  uint64_t terms, per_image, tiles_x, channels;
  long height, width, padding;
};

Tiling data_tiling(const WinogradWgradShape& s) {
  return {s.terms(),
          s.tiles_y() * s.tiles_x(),
          s.tiles_x(),
          s.in_channels,
          static_cast<long>(s.height),
          static_cast<long>(s.width),
          static_cast<long>(s.padding)};
}

Tiling delta_tiling(const WinogradWgradShape& s) {
  return {s.terms(),
          s.tiles_y() * s.tiles_x(),
          s.tiles_x(),
          s.out_channels,
          static_cast<long>(s.out_h()),
          static_cast<long>(s.out_w()),
          0};
}

// A block of 32 terms x 8 channels, a thread a (term, channel), the terms fastest within a warp:
// neighbouring threads read neighbouring tiles of one plane (4 floats apart). The six results go
// through shared memory so that the stores run along the channels, 8 floats (a 32-byte sector) a
// term, where a thread's own stores would go C floats apart.
constexpr int kDataTerms = 32, kDataChannels = 8;

__global__ void __launch_bounds__(kDataTerms* kDataChannels)
    data_row_kernel(const float* __restrict__ x, Tiling s, int row, float* __restrict__ v) {
  __shared__ float staged[6][kDataTerms][kDataChannels + 1];  // +1: the warp's stores in 32 banks
  const long h = s.height, w = s.width, pad = s.padding;
  const int lane = static_cast<int>(threadIdx.x % kDataTerms), warp = static_cast<int>(threadIdx.x / kDataTerms);
  const uint64_t n0 = static_cast<uint64_t>(blockIdx.x) * kDataTerms,
                 c0 = static_cast<uint64_t>(blockIdx.y) * kDataChannels;
  const uint64_t n = n0 + lane, c = c0 + warp;
  if (n < s.terms && c < s.channels) {
    const uint64_t b = n / s.per_image, tile = n % s.per_image;
    const long y0 = static_cast<long>(4 * (tile / s.tiles_x)) - pad,
               x0 = static_cast<long>(4 * (tile % s.tiles_x)) - pad;
    const float* plane = x + (b * s.channels + c) * h * w;
    float t[6][6];
    for (int r = 0; r < 6; ++r)
      for (int q = 0; q < 6; ++q) {
        const long y = y0 + r, xx = x0 + q;
        t[r][q] = y >= 0 && y < h && xx >= 0 && xx < w ? plane[y * w + xx] : 0.0f;
      }
    float out[6];
    winograd::data_row(t, row, out);
    for (int j = 0; j < 6; ++j) staged[j][lane][warp] = out[j];
  }
  __syncthreads();
  const int term = static_cast<int>(threadIdx.x / kDataChannels),
            channel = static_cast<int>(threadIdx.x % kDataChannels);
  if (n0 + term < s.terms && c0 + channel < s.channels)
    for (int j = 0; j < 6; ++j) v[(j * s.terms + n0 + term) * s.channels + c0 + channel] = staged[j][term][channel];
}

// A thread a (K, term), the terms fastest: the reads 4 floats apart, the stores contiguous.
__global__ void delta_row_kernel(const float* __restrict__ dy, Tiling s, int row, float* __restrict__ u) {
  const uint64_t terms = s.terms, count = terms * s.channels, per_image = s.per_image;
  const uint64_t ho = static_cast<uint64_t>(s.height), wo = static_cast<uint64_t>(s.width);
  for (uint64_t e = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < count;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    const uint64_t n = e % terms, k = e / terms;
    const uint64_t b = n / per_image, tile = n % per_image;
    const uint64_t y0 = 4 * (tile / s.tiles_x), x0 = 4 * (tile % s.tiles_x);
    const float* plane = dy + (b * s.channels + k) * ho * wo;
    float t[4][4];
    for (int r = 0; r < 4; ++r)
      for (int q = 0; q < 4; ++q) {
        const uint64_t y = y0 + r, xx = x0 + q;
        t[r][q] = y < ho && xx < wo ? plane[y * wo + xx] : 0.0f;
      }
    float out[6];
    winograd::delta_row(t, row, out);
    for (int j = 0; j < 6; ++j) u[(j * s.channels + k) * terms + n] = out[j];
  }
}

// A thread a (k, c): its 36 sums read C floats apart from its neighbours', its 9 weights stored.
__global__ void output_kernel(const float* __restrict__ m, uint64_t out_channels, uint64_t in_channels,
                              float* __restrict__ dw) {
  const uint64_t kc = out_channels * in_channels;
  for (uint64_t e = static_cast<uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < kc;
       e += static_cast<uint64_t>(gridDim.x) * blockDim.x) {
    float t[6][6], weights[3][3];
    for (int p = 0; p < 36; ++p) t[p / 6][p % 6] = m[p * kc + e];
    winograd::output_tile(t, weights);
    for (int i = 0; i < 3; ++i)
      for (int j = 0; j < 3; ++j) dw[e * 9 + i * 3 + j] = weights[i][j];
  }
}

}  // namespace

void winograd_data_row(const float* x, const WinogradWgradShape& shape, int row, float* v) {
  const uint64_t terms_blocks = (shape.terms() + kDataTerms - 1) / kDataTerms;
  const uint64_t channel_blocks = (shape.in_channels + kDataChannels - 1) / kDataChannels;
  if (terms_blocks == 0 || channel_blocks == 0) return;
  if (terms_blocks > 0x7fffffffu || channel_blocks > 65535)
    throw std::invalid_argument("winograd_data_row: more tiles or channels than one launch's grid holds");
  const dim3 grid(static_cast<unsigned>(terms_blocks), static_cast<unsigned>(channel_blocks));
  data_row_kernel<<<grid, kDataTerms * kDataChannels>>>(x, data_tiling(shape), row, v);
  FPLAB_CUDA_LAUNCHED("winograd_data_row");
}

void winograd_delta_row(const float* dy, const WinogradWgradShape& shape, int row, float* u) {
  const uint64_t count = shape.terms() * shape.out_channels;
  if (count == 0) return;
  delta_row_kernel<<<blocks_for(count), kThreads>>>(dy, delta_tiling(shape), row, u);
  FPLAB_CUDA_LAUNCHED("winograd_delta_row");
}

void winograd_output(const float* m, size_t out_channels, size_t in_channels, float* dw) {
  const uint64_t count = uint64_t{out_channels} * in_channels;
  if (count == 0) return;
  output_kernel<<<blocks_for(count), kThreads>>>(m, out_channels, in_channels, dw);
  FPLAB_CUDA_LAUNCHED("winograd_output");
}

}  // namespace fplab::sim::gpu
