// The fused-step GEMM on CUDA cores of gpu_fused_gemm.hpp. A block of 256 threads computes 64 x 64
// outputs of one part, each thread 4 x 4 of them (a row's factors serve four outputs, a column's
// four); the factors pass through shared memory 32 K at a time, converted to the model's input
// format and coded (fused_grid_step.hpp) once as they are staged (32: a multiple of every N taken,
// so that a step never straddles two stages). Each step is the grid form of fused_grid_step.hpp:
// the largest code sum, then per product a multiply, a scaling and one conversion to an integer;
// an output whose step leaves the form takes fused_step (fused_step.hpp) for that step.
#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/fused_grid_step.hpp"
#include "sim/cuda/fused_step.hpp"
#include "sim/cuda/gpu_fused_gemm.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/cuda/tensor_core_factors.cuh"

namespace fplab::sim::gpu::detail {
namespace {

using namespace fused_grid;

constexpr int kTile = 64, kStage = 32, kThreads = 256, kSide = 4;  // kSide x kSide outputs a thread
constexpr int kPitch = kTile + 4;                                  // a staged row: 16-byte aligned, rows 4 banks apart

// The value type of a model's products (fused_grid_step.hpp): exact in a float for factors of at
// most 12 significant bits, in a double for fp32 factors taken as they are.
template <Factors F>
using ValueOf = std::conditional_t<F == Factors::none, double, float>;

// Four consecutive staged values or codes (16-byte aligned for floats and doubles, 8 for codes).
__device__ inline void load_four(float (&to)[kSide], const float* from) {
  const float4 v = *reinterpret_cast<const float4*>(from);
  to[0] = v.x, to[1] = v.y, to[2] = v.z, to[3] = v.w;
}
__device__ inline void load_four(double (&to)[kSide], const double* from) {
  const double2 v = reinterpret_cast<const double2*>(from)[0], w = reinterpret_cast<const double2*>(from)[1];
  to[0] = v.x, to[1] = v.y, to[2] = w.x, to[3] = w.y;
}
__device__ inline void load_four(int (&to)[kSide], const int16_t* from) {
  const short4 v = *reinterpret_cast<const short4*>(from);
  to[0] = v.x, to[1] = v.y, to[2] = v.z, to[3] = v.w;
}

// One output's step outside the form: fused_step over the staged factors (rare; kept out of line
// so that the grid form's registers are its own).
template <class V, int N>
__device__ __noinline__ float step_outside_form(float acc, const V* x, const V* y, int count, int emin,
                                                int fraction_bits) {
  float xs[N], ys[N];
  for (int i = 0; i < N; ++i)
    xs[i] = static_cast<float>(x[i * kPitch]), ys[i] = static_cast<float>(y[i * kPitch]);  // fp32 values: exact
  return fused_step<N>(acc, xs, ys, count, emin, fraction_bits);
}

template <Factors F, int N, class Sum>
__global__ void __launch_bounds__(kThreads, 2)  // two blocks an SM: at most 128 registers
    fused_chains(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, int64_t m,
                 int64_t n, int64_t k, int64_t chunk, int fraction_bits) {
  static_assert(kStage % N == 0, "a step within one stage");
  using V = ValueOf<F>;
  __shared__ __align__(16) V sa[kStage][kPitch];                            // A's factors, term by term: sa[t][row]
  __shared__ __align__(16) V sb[kStage][kPitch];                            // B's: sb[t][column]
  __shared__ __align__(16) int16_t ca[kStage][kPitch], cb[kStage][kPitch];  // their codes
  const int thread = threadIdx.x, tx = thread % (kTile / kSide), ty = thread / (kTile / kSide);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTile, col0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t begin = static_cast<int64_t>(blockIdx.z) * chunk, end = k < begin + chunk ? k : begin + chunk;
  const int emin = factor_emin<F>;
  float acc[kSide][kSide];
#pragma unroll
  for (int r = 0; r < kSide; ++r)
#pragma unroll
    for (int c = 0; c < kSide; ++c) acc[r][c] = 0.0f;
  for (int64_t k0 = begin; k0 < end; k0 += kStage) {
    const int live = static_cast<int>(end - k0 < kStage ? end - k0 : kStage);
    for (int i = thread; i < kTile * kStage; i += kThreads) {
      const int r = i / kStage, t = i % kStage;  // A's row r, term t: consecutive threads, consecutive terms
      const float x = row0 + r < m && t < live ? model_value<F>(a[(row0 + r) * k + k0 + t]) : 0.0f;
      sa[t][r] = x, ca[t][r] = static_cast<int16_t>(factor_code(x, emin));
      const int s = i / kTile, c = i % kTile;  // B's term s, column c
      const float y = col0 + c < n && s < live ? model_value<F>(b[(k0 + s) * n + col0 + c]) : 0.0f;
      sb[s][c] = y, cb[s][c] = static_cast<int16_t>(factor_code(y, emin));
    }
    __syncthreads();
    for (int t = 0; t < live; t += N) {
      int e[kSide][kSide];  // the largest code, then the grid's exponent
#pragma unroll
      for (int r = 0; r < kSide; ++r)
#pragma unroll
        for (int c = 0; c < kSide; ++c) e[r][c] = accumulator_code(acc[r][c]);
#pragma unroll
      for (int j = 0; j < N; ++j) {
        int x[kSide], y[kSide];
        load_four(x, &ca[t + j][ty * kSide]);
        load_four(y, &cb[t + j][tx * kSide]);
#pragma unroll
        for (int r = 0; r < kSide; ++r)
#pragma unroll
          for (int c = 0; c < kSide; ++c) e[r][c] = max(e[r][c], x[r] + y[c]);
      }
      unsigned outside = 0;
      V scale[kSide][kSide];
      Sum sum[kSide][kSide];
#pragma unroll
      for (int r = 0; r < kSide; ++r)
#pragma unroll
        for (int c = 0; c < kSide; ++c) {
          if (!in_form(e[r][c], fraction_bits)) outside |= 1u << (r * kSide + c), e[r][c] = fraction_bits;
          e[r][c] = grid_exponent(e[r][c], fraction_bits);
          scale[r][c] = power_of_two<V>(-e[r][c]);
          sum[r][c] = units(static_cast<V>(acc[r][c]) * scale[r][c]);
        }
#pragma unroll
      for (int j = 0; j < N; ++j) {
        V x[kSide], y[kSide];
        load_four(x, &sa[t + j][ty * kSide]);
        load_four(y, &sb[t + j][tx * kSide]);
#pragma unroll
        for (int r = 0; r < kSide; ++r)
#pragma unroll
          for (int c = 0; c < kSide; ++c) sum[r][c] += units(x[r] * y[c] * scale[r][c]);
      }
#pragma unroll
      for (int r = 0; r < kSide; ++r)
#pragma unroll
        for (int c = 0; c < kSide; ++c)
          acc[r][c] = outside & (1u << (r * kSide + c))
                          ? step_outside_form<V, N>(acc[r][c], &sa[t][ty * kSide + r], &sb[t][tx * kSide + c],
                                                    min(N, live - t), emin, fraction_bits)
                          : rounded_sum(sum[r][c]) * power_of_two<float>(e[r][c]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < kSide; ++r)
#pragma unroll
    for (int c = 0; c < kSide; ++c) {
      const int64_t row = row0 + ty * kSide + r, col = col0 + tx * kSide + c;
      if (row < m && col < n) out[blockIdx.z * m * n + row * n + col] = acc[r][c];
    }
}

template <Factors F, int N>
void launch(dim3 grid, int fraction_bits, const float* a, const float* b, float* out, int64_t m, int64_t n, int64_t k,
            int64_t chunk) {
  if (sum_fits_int32(N, fraction_bits))
    fused_chains<F, N, int32_t><<<grid, kThreads>>>(a, b, out, m, n, k, chunk, fraction_bits);
  else
    fused_chains<F, N, int64_t><<<grid, kThreads>>>(a, b, out, m, n, k, chunk, fraction_bits);
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
                                " outputs in " + std::to_string(parts) + " parts exceed the kernel's grid (at most " +
                                std::to_string(65535 * kTile) + " columns and 65535 parts)");
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
