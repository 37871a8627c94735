// The fused-step GEMM on CUDA cores of gpu_fused_gemm.hpp. A block of 16 x 16 threads computes
// 16 x 16 outputs of one part; the factors pass through shared memory 32 K at a time, converted
// to the model's input format once as they are staged (32: a multiple of every N taken, so that a
// step never straddles two stages), and each thread chains fused_step over its row and column.
#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/fused_step.hpp"
#include "sim/cuda/gpu_fused_gemm.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/tensor_core_factors.cuh"

namespace fplab::sim::gpu::detail {
namespace {

constexpr int kTile = 16, kStage = 32;

template <Factors F, int N>
__global__ void __launch_bounds__(kTile * kTile)
    fused_chains(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, int64_t m,
                 int64_t n, int64_t k, int64_t chunk, int fraction_bits) {
  static_assert(kStage % N == 0, "a step within one stage");
  __shared__ float sa[kTile][kStage + 1];
  __shared__ float sb[kStage][kTile + 1];
  const int tx = threadIdx.x, ty = threadIdx.y, thread = ty * kTile + tx;
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTile, col0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t begin = static_cast<int64_t>(blockIdx.z) * chunk, end = k < begin + chunk ? k : begin + chunk;
  float acc = 0.0f;
  for (int64_t k0 = begin; k0 < end; k0 += kStage) {
    const int live = static_cast<int>(end - k0 < kStage ? end - k0 : kStage);
    for (int i = thread; i < kTile * kStage; i += kTile * kTile) {
      const int r = i / kStage, t = i % kStage;  // A's row r, term t: consecutive threads, consecutive terms
      sa[r][t] = row0 + r < m && t < live ? model_value<F>(a[(row0 + r) * k + k0 + t]) : 0.0f;
      const int s = i / kTile, c = i % kTile;  // B's term s, column c
      sb[s][c] = col0 + c < n && s < live ? model_value<F>(b[(k0 + s) * n + col0 + c]) : 0.0f;
    }
    __syncthreads();
    for (int t = 0; t < live; t += N) {
      float x[N], y[N];
#pragma unroll
      for (int j = 0; j < N; ++j) x[j] = sa[ty][t + j], y[j] = sb[t + j][tx];
      acc = fused_step<N>(acc, x, y, min(N, live - t), factor_emin<F>, fraction_bits);
    }
    __syncthreads();
  }
  if (row0 + ty < m && col0 + tx < n) out[blockIdx.z * m * n + (row0 + ty) * n + col0 + tx] = acc;
}

template <Factors F, int N>
void launch(dim3 grid, int fraction_bits, const float* a, const float* b, float* out, int64_t m, int64_t n, int64_t k,
            int64_t chunk) {
  fused_chains<F, N><<<grid, dim3(kTile, kTile)>>>(a, b, out, m, n, k, chunk, fraction_bits);
}

template <Factors F>
void launch_by_steps(int products, dim3 grid, int fraction_bits, const float* a, const float* b, float* out, int64_t m,
                     int64_t n, int64_t k, int64_t chunk) {
  switch (products) {
    case 1:
      return launch<F, 1>(grid, fraction_bits, a, b, out, m, n, k, chunk);
    case 2:
      return launch<F, 2>(grid, fraction_bits, a, b, out, m, n, k, chunk);
    case 4:
      return launch<F, 4>(grid, fraction_bits, a, b, out, m, n, k, chunk);
    case 8:
      return launch<F, 8>(grid, fraction_bits, a, b, out, m, n, k, chunk);
    default:
      return launch<F, 16>(grid, fraction_bits, a, b, out, m, n, k, chunk);
  }
}

}  // namespace

void launch_fused_chains(Reducer::Input factors, int products, int fraction_bits, const float* a, const float* b,
                         float* out, int64_t m, int64_t n, int64_t k, int64_t chunk, unsigned parts) {
  const std::string why = fused_steps_why_not(products, fraction_bits, factors);
  if (!why.empty()) throw std::invalid_argument(why);
  const int64_t row_tiles = (m + kTile - 1) / kTile, col_tiles = (n + kTile - 1) / kTile;
  if (row_tiles > INT_MAX || col_tiles > 65535 || parts > 65535)
    throw std::invalid_argument("fused steps on CUDA cores: " + std::to_string(m) + " x " + std::to_string(n) +
                                " outputs in " + std::to_string(parts) +
                                " parts exceed the kernel's grid (at most 1048560 columns and 65535 parts)");
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(col_tiles), parts);
  switch (factors) {
    case Factors::tf32:
      launch_by_steps<Factors::tf32>(products, grid, fraction_bits, a, b, out, m, n, k, chunk);
      break;
    case Factors::tf32rne:
      launch_by_steps<Factors::tf32rne>(products, grid, fraction_bits, a, b, out, m, n, k, chunk);
      break;
    case Factors::tf32rna:
      launch_by_steps<Factors::tf32rna>(products, grid, fraction_bits, a, b, out, m, n, k, chunk);
      break;
    case Factors::bf16:
      launch_by_steps<Factors::bf16>(products, grid, fraction_bits, a, b, out, m, n, k, chunk);
      break;
    case Factors::fp16:
      launch_by_steps<Factors::fp16>(products, grid, fraction_bits, a, b, out, m, n, k, chunk);
      break;
    default:  // none: fused_steps_why_not takes no other
      launch_by_steps<Factors::none>(products, grid, fraction_bits, a, b, out, m, n, k, chunk);
  }
  FPLAB_CUDA_LAUNCHED("fused-step GEMM on CUDA cores");
}

}  // namespace fplab::sim::gpu::detail
