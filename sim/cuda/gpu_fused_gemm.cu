// The fused-step GEMM on CUDA cores of gpu_fused_gemm.hpp. A block of 256 threads computes 64 x 64
// outputs of one part, each thread 4 x 4 of them (a row's factors serve four outputs, a column's
// four), or 32 x 32 in 2 x 2 (small tiles); the factors pass through shared memory 32 K at a time,
// converted to the model's input format and coded (fused_grid_step.hpp) once as they are staged
// (32: a multiple of every N taken, so that a step never straddles two stages). Each step is the
// grid form of fused_grid_step.hpp: the largest code sum, then per product a multiply, a scaling
// and one conversion to an integer; an output with a step outside the form has its whole chain
// computed again by fused_step (fused_step.hpp) at the end.
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

constexpr int kStage = 32, kThreads = 256;
// A block's outputs: 16 x 16 threads of Side x Side outputs each (4: 64 x 64, 2: 32 x 32, four
// times the blocks for GEMMs of few outputs); a staged row of the tile, 16-byte aligned.
template <int Side>
constexpr int kTileOf = 16 * Side;
template <int Side>
constexpr int kPitchOf = kTileOf<Side> + 4;

// The value type of a model's products (fused_grid_step.hpp): exact in a float for factors of at
// most 12 significant bits, in a double for fp32 factors taken as they are.
template <Factors F>
using ValueOf = std::conditional_t<F == Factors::none, double, float>;

// Side consecutive staged values or codes in one or two vector loads (every such run starts at a
// multiple of its size, or of 16 bytes, in the staged arrays).
template <class T, int Side>
struct alignas(Side * sizeof(T) < 16 ? Side * sizeof(T) : 16) Run {
  T x[Side];
};
template <int Side, class T, class From>
__device__ inline void load_side(T (&to)[Side], const From* from) {
  const Run<T, Side> run = *reinterpret_cast<const Run<T, Side>*>(from);
#pragma unroll
  for (int i = 0; i < Side; ++i) to[i] = run.x[i];
}

// Two int16 codes in one word (low: the first), as the 16-bit lanes of add.s16x2 / max.s16x2 take
// them; every code and code sum fits (|x| <= 2 kSpecialCode).
__device__ inline uint32_t code_pair(int low, int high) {
  return (static_cast<uint32_t>(low) & 0xffffu) | static_cast<uint32_t>(high) << 16;
}
__device__ inline int low_code(uint32_t pair) { return static_cast<int16_t>(pair & 0xffffu); }
__device__ inline int high_code(uint32_t pair) { return static_cast<int32_t>(pair) >> 16; }

// One output's whole chain by fused_step (fused_step.hpp), its factors read from A and B again:
// for the rare outputs with a step outside the grid form (kept out of line so that the grid
// form's registers are its own).
template <Factors F, int N>
__device__ __noinline__ float chain_outside_form(const float* a, const float* b, int64_t n, int64_t k, int64_t row,
                                                 int64_t col, int64_t begin, int64_t end, int fraction_bits) {
  float acc = 0.0f;
  for (int64_t t = begin; t < end; t += N) {
    const int count = static_cast<int>(end - t < N ? end - t : N);
    float x[N] = {}, y[N] = {};
    for (int j = 0; j < count; ++j)
      x[j] = model_value<F>(a[row * k + t + j]), y[j] = model_value<F>(b[(t + j) * n + col]);
    acc = fused_step<N>(acc, x, y, count, factor_emin<F>, fraction_bits);
  }
  return acc;
}

// x + y with the wrap-around of two's complement (a lane outside the form may sum garbage; its
// result is computed again).
template <class Sum>
__device__ inline Sum wrapping_add(Sum x, int32_t y) {
  using Unsigned = std::make_unsigned_t<Sum>;
  return static_cast<Sum>(static_cast<Unsigned>(x) + static_cast<Unsigned>(static_cast<Sum>(y)));
}

template <Factors F, int N, class Sum, int kSide>
__global__ void __launch_bounds__(kThreads, 2)  // two blocks an SM: at most 128 registers
    fused_chains(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, int64_t m,
                 int64_t n, int64_t k, int64_t chunk, int fraction_bits) {
  static_assert(kStage % N == 0, "a step within one stage");
  using V = ValueOf<F>;
  constexpr int kTile = kTileOf<kSide>, kPitch = kPitchOf<kSide>;
  __shared__ __align__(16) V sa[kStage][kPitch];                            // A's factors, term by term: sa[t][row]
  __shared__ __align__(16) V sb[kStage][kPitch];                            // B's: sb[t][column]
  // Their codes: A's twice in a word (one operand of a pair of B's columns), B's as int16.
  __shared__ __align__(16) uint32_t ca[kStage][kPitch];
  __shared__ __align__(16) int16_t cb[kStage][kPitch];
  const int thread = threadIdx.x, tx = thread % (kTile / kSide), ty = thread / (kTile / kSide);
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * kTile, col0 = static_cast<int64_t>(blockIdx.y) * kTile;
  const int64_t begin = static_cast<int64_t>(blockIdx.z) * chunk, end = k < begin + chunk ? k : begin + chunk;
  const int emin = factor_emin<F>;
  float acc[kSide][kSide];
#pragma unroll
  for (int r = 0; r < kSide; ++r)
#pragma unroll
    for (int c = 0; c < kSide; ++c) acc[r][c] = 0.0f;
  unsigned outside = 0;  // outputs with a step outside the form: their chains go to fused_step at the end
  for (int64_t k0 = begin; k0 < end; k0 += kStage) {
    const int live = static_cast<int>(end - k0 < kStage ? end - k0 : kStage);
    for (int i = thread; i < kTile * kStage; i += kThreads) {
      const int r = i / kStage, t = i % kStage;  // A's row r, term t: consecutive threads, consecutive terms
      const float x = row0 + r < m && t < live ? model_value<F>(a[(row0 + r) * k + k0 + t]) : 0.0f;
      const int x_code = factor_code(x, emin);
      sa[t][r] = x, ca[t][r] = code_pair(x_code, x_code);
      const int s = i / kTile, c = i % kTile;  // B's term s, column c
      const float y = col0 + c < n && s < live ? model_value<F>(b[(k0 + s) * n + col0 + c]) : 0.0f;
      sb[s][c] = y, cb[s][c] = static_cast<int16_t>(factor_code(y, emin));
    }
    __syncthreads();
    for (int t = 0; t < live; t += N) {
      // The largest code of each output, two columns in a word: max(x + y, e) on 16-bit lanes is one
      // DPX instruction on sm_90 (__viaddmax_s16x2), half the integer work of the step's products.
      uint32_t top[kSide][kSide / 2];
#pragma unroll
      for (int r = 0; r < kSide; ++r)
#pragma unroll
        for (int h = 0; h < kSide / 2; ++h)
          top[r][h] = code_pair(accumulator_code(acc[r][2 * h]), accumulator_code(acc[r][2 * h + 1]));
#pragma unroll
      for (int j = 0; j < N; ++j) {
        uint32_t x[kSide], y[kSide / 2];
        load_side<kSide>(x, &ca[t + j][ty * kSide]);
        load_side<kSide / 2>(y, &cb[t + j][tx * kSide]);
#pragma unroll
        for (int r = 0; r < kSide; ++r)
#pragma unroll
          for (int h = 0; h < kSide / 2; ++h) top[r][h] = __viaddmax_s16x2(x[r], y[h], top[r][h]);
      }
      int e[kSide][kSide];  // the largest code, then the grid's exponent
#pragma unroll
      for (int r = 0; r < kSide; ++r)
#pragma unroll
        for (int h = 0; h < kSide / 2; ++h) e[r][2 * h] = low_code(top[r][h]), e[r][2 * h + 1] = high_code(top[r][h]);
      V scale[kSide][kSide];
      Sum sum[kSide][kSide];
#pragma unroll
      for (int r = 0; r < kSide; ++r)
#pragma unroll
        for (int c = 0; c < kSide; ++c) {
          if (!in_form(e[r][c], fraction_bits)) outside |= 1u << (r * kSide + c);
          e[r][c] = grid_exponent(e[r][c], fraction_bits);
          scale[r][c] = power_of_two<V>(-e[r][c]);
          sum[r][c] = units(static_cast<V>(acc[r][c]) * scale[r][c]);
        }
#pragma unroll
      for (int j = 0; j < N; ++j) {
        V x[kSide], y[kSide];
        load_side<kSide>(x, &sa[t + j][ty * kSide]);
        load_side<kSide>(y, &sb[t + j][tx * kSide]);
#pragma unroll
        for (int r = 0; r < kSide; ++r)
#pragma unroll
          for (int c = 0; c < kSide; ++c) sum[r][c] = wrapping_add(sum[r][c], units(x[r] * y[c] * scale[r][c]));
      }
#pragma unroll
      for (int r = 0; r < kSide; ++r)
#pragma unroll
        for (int c = 0; c < kSide; ++c) acc[r][c] = rounded_sum(sum[r][c]) * power_of_two<float>(e[r][c]);
    }
    __syncthreads();
  }
#pragma unroll
  for (int r = 0; r < kSide; ++r)
#pragma unroll
    for (int c = 0; c < kSide; ++c) {
      const int64_t row = row0 + ty * kSide + r, col = col0 + tx * kSide + c;
      if (row >= m || col >= n) continue;
      const float result = outside & (1u << (r * kSide + c))
                               ? chain_outside_form<F, N>(a, b, n, k, row, col, begin, end, fraction_bits)
                               : acc[r][c];
      out[blockIdx.z * m * n + row * n + col] = result;
    }
}

template <Factors F, int N, int Side>
void launch_tiles(int fraction_bits, const float* a, const float* b, float* out, int64_t m, int64_t n, int64_t k,
                  int64_t chunk, unsigned parts) {
  constexpr int tile = kTileOf<Side>;
  const int64_t row_tiles = (m + tile - 1) / tile, col_tiles = (n + tile - 1) / tile;
  if (row_tiles > INT_MAX || col_tiles > 65535 || parts > 65535)
    throw std::invalid_argument("fused steps on CUDA cores: " + std::to_string(m) + " x " + std::to_string(n) +
                                " outputs in " + std::to_string(parts) + " parts exceed the kernel's grid (at most " +
                                std::to_string(65535 * tile) + " columns and 65535 parts)");
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(col_tiles), parts);
  if (sum_fits_int32(N, fraction_bits))
    fused_chains<F, N, int32_t, Side><<<grid, kThreads>>>(a, b, out, m, n, k, chunk, fraction_bits);
  else
    fused_chains<F, N, int64_t, Side><<<grid, kThreads>>>(a, b, out, m, n, k, chunk, fraction_bits);
}

template <Factors F, int N>
void launch(bool small_tiles, int fraction_bits, const float* a, const float* b, float* out, int64_t m, int64_t n,
            int64_t k, int64_t chunk, unsigned parts) {
  if (small_tiles)
    launch_tiles<F, N, 2>(fraction_bits, a, b, out, m, n, k, chunk, parts);
  else
    launch_tiles<F, N, 4>(fraction_bits, a, b, out, m, n, k, chunk, parts);
}

template <Factors F>
void launch_by_steps(int products, bool small_tiles, int fraction_bits, const float* a, const float* b, float* out,
                     int64_t m, int64_t n, int64_t k, int64_t chunk, unsigned parts) {
  switch (products) {
    case 1:
      return launch<F, 1>(small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
    case 2:
      return launch<F, 2>(small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
    case 4:
      return launch<F, 4>(small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
    case 8:
      return launch<F, 8>(small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
    default:
      return launch<F, 16>(small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
  }
}

}  // namespace

void launch_fused_chains(Reducer::Input factors, int products, int fraction_bits, const float* a, const float* b,
                         float* out, int64_t m, int64_t n, int64_t k, int64_t chunk, unsigned parts, bool small_tiles) {
  const std::string why = fused_steps_why_not(products, fraction_bits, factors);
  if (!why.empty()) throw std::invalid_argument(why);
  switch (factors) {
    case Factors::tf32:
      launch_by_steps<Factors::tf32>(products, small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
      break;
    case Factors::tf32rne:
      launch_by_steps<Factors::tf32rne>(products, small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
      break;
    case Factors::tf32rna:
      launch_by_steps<Factors::tf32rna>(products, small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
      break;
    case Factors::bf16:
      launch_by_steps<Factors::bf16>(products, small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
      break;
    case Factors::fp16:
      launch_by_steps<Factors::fp16>(products, small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
      break;
    default:  // none: fused_steps_why_not takes no other
      launch_by_steps<Factors::none>(products, small_tiles, fraction_bits, a, b, out, m, n, k, chunk, parts);
  }
  FPLAB_CUDA_LAUNCHED("fused-step GEMM on CUDA cores");
}

}  // namespace fplab::sim::gpu::detail
