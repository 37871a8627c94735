// The tensor-core GEMM of gpu_tensor_core_gemm.hpp. A block of 4 warps computes 64 x 64 outputs
// of one split-K part; each warp 32 x 32 of them as 2 x 4 tiles of 16 x 8, one accumulator
// fragment per tile held in registers for the whole part, so that every tile's instructions are
// issued in K order, each taking the last one's result as its C: the chain sim::fused_dot
// describes. The factors pass through shared memory 32 K at a time as the instruction's codes
// (converted once per block and stage).
//
// After each instruction the warp looks at its 16 x 8 results; where any is zero, infinite or
// NaN it computes the instruction again with fused_step (fused_step.hpp), the model of
// sim/tensor_core.cpp (fused_multiply_add with fp32 output toward zero, truncation toward zero,
// the accumulator in the alignment) on CUDA cores, from the accumulators it kept. Elsewhere the
// chip's result is the model's (docs/results/tensor-cores-h100.md: 720,896,000 outputs).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/fused_step.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_tensor_core_gemm.hpp"
#include "sim/cuda/mma_sync.cuh"

namespace fplab::sim::gpu {
namespace {

using Factors = Reducer::Input;  // of the five the plan takes

constexpr int kBlockRows = 64, kBlockCols = 64, kStageK = 32, kThreads = 128;
constexpr int kLd = kStageK + 1;  // a shared row padded by one word: the stores of B's columns hit 32 banks

template <Factors F>
struct Inputs {
  static constexpr MmaInput input = F == Factors::bf16 ? MmaInput::bf16 : F == Factors::fp16 ? MmaInput::fp16 : MmaInput::tf32;
  static constexpr int per_reg = detail::Traits<input>::per_reg;
  static constexpr int k = detail::Traits<input>::k;  // products one instruction adds
  static constexpr int emin = F == Factors::fp16 ? -14 : -126;  // the factors' format's
};

// A factor as the instruction reads it: tf32 the fp32 pattern (the tensor core ignores the 13 low
// bits), rounded to tf32 first for tf32rne and tf32rna; bf16 and fp16 their codes, rounded to
// nearest even (fp::round_double's conversions, overflow to infinity included).
template <Factors F>
__device__ uint32_t code_of(float x) {
  const uint32_t bits = __float_as_uint(x);
  if constexpr (F == Factors::tf32) {
    return bits;
  } else if constexpr (F == Factors::tf32rne) {
    return isnan(x) ? bits : (bits + 0xfffu + ((bits >> 13) & 1u)) & 0xffffe000u;
  } else if constexpr (F == Factors::tf32rna) {
    return isnan(x) ? bits : (bits + 0x1000u) & 0xffffe000u;
  } else if constexpr (F == Factors::bf16) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  } else {
    return __half_as_ushort(__float2half_rn(x));
  }
}

// The value of a code, as the model converts the factor (tf32: truncated; a NaN stays a NaN).
template <Factors F>
__device__ float value_of(uint32_t code) {
  if constexpr (F == Factors::bf16) {
    return __uint_as_float(code << 16);
  } else if constexpr (F == Factors::fp16) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(code)));
  } else {
    const float x = __uint_as_float(code);
    return isnan(x) ? x : __uint_as_float(code & 0xffffe000u);
  }
}

// An output fragment of one lane (the C fragment's layout), passed by value so that the
// accumulators stay in registers around the out-of-line call.
struct Fragment {
  float v[4];
};

// The instruction over products [kk, kk + count) of tile (r0, c0) again, in software, from
// `before`. Out of line: it runs rarely, and inlined eight times it would crowd the main loop.
template <Factors F>
__device__ __noinline__ Fragment redo(Fragment before, const uint32_t (*sa)[kLd], const uint32_t (*sb)[kLd], int r0,
                                      int c0, int kk, int count, int g, int t) {
  constexpr int N = Inputs<F>::k;
  Fragment d;
  for (int r = 0; r < 4; ++r) {
    const int row = r0 + g + 8 * (r >> 1), col = c0 + 2 * t + (r & 1);
    float x[N], y[N];
#pragma unroll
    for (int j = 0; j < N; ++j) {
      x[j] = j < count ? value_of<F>(sa[row][kk + j]) : 0.0f;
      y[j] = j < count ? value_of<F>(sb[col][kk + j]) : 0.0f;
    }
    d.v[r] = fused_step<N>(before.v[r], x, y, count, Inputs<F>::emin);
  }
  return d;
}

// Whether any of a lane's four results that will be stored (row < m, column < n) may differ from
// the model's. Outputs past the edge hold the chip's values unchecked: they are never stored, and
// counting their zeros would send every instruction of an edge tile to the software step.
__device__ bool unlike_the_model(const float (&d)[4], bool top_row, bool bottom_row, bool left_col, bool right_col) {
  const bool inside[4] = {top_row && left_col, top_row && right_col, bottom_row && left_col, bottom_row && right_col};
  bool odd = false;
#pragma unroll
  for (int r = 0; r < 4; ++r) odd |= inside[r] && (d[r] == 0 || !isfinite(d[r]));
  return odd;
}

template <Factors F>
__global__ void __launch_bounds__(kThreads)
    tensor_core_gemm_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m,
                            int n, int64_t k, int64_t chunk, size_t part_stride) {
  using In = Inputs<F>;
  __shared__ uint32_t sa[kBlockRows][kLd];  // A's codes, [row][K]
  __shared__ uint32_t sb[kBlockCols][kLd];  // B's codes, [column][K]
  const int row0 = blockIdx.x * kBlockRows, col0 = blockIdx.y * kBlockCols;
  const int64_t k0 = static_cast<int64_t>(blockIdx.z) * chunk, k1 = min(k, k0 + chunk);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wr = (warp / 2) * 32, wc = (warp % 2) * 32;  // the warp's outputs within the block
  float acc[2][4][4];
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;  // every chain starts from +0

  for (int64_t ks = k0; ks < k1; ks += kStageK) {
    __syncthreads();  // the last stage's reads are done
    for (int e = threadIdx.x; e < kBlockRows * kStageK; e += kThreads) {
      const int r = e / kStageK, kk = e % kStageK;
      const bool inside = row0 + r < m && ks + kk < k1;
      sa[r][kk] = code_of<F>(inside ? a[static_cast<size_t>(row0 + r) * k + ks + kk] : 0.0f);
    }
    for (int e = threadIdx.x; e < kBlockCols * kStageK; e += kThreads) {
      const int kk = e / kBlockCols, col = e % kBlockCols;
      const bool inside = col0 + col < n && ks + kk < k1;
      sb[col][kk] = code_of<F>(inside ? b[static_cast<size_t>(ks + kk) * n + col0 + col] : 0.0f);
    }
    __syncthreads();
    const int live = static_cast<int>(min(static_cast<int64_t>(kStageK), k1 - ks));  // this stage's products inside the part
    for (int kk = 0; kk < live; kk += In::k) {
      uint32_t fa[2][4], fb[4][2];
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int r = 0; r < 4; ++r)
          fa[mi][r] = detail::pack<In::input>(
              &sa[wr + mi * 16 + g + 8 * (r & 1)][kk + t * In::per_reg + (r >> 1) * (In::k / 2)], 1);
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
#pragma unroll
        for (int r = 0; r < 2; ++r)
          fb[ni][r] = detail::pack<In::input>(&sb[wc + ni * 8 + g][kk + t * In::per_reg + r * (In::k / 2)], 1);
#pragma unroll
      for (int mi = 0; mi < 2; ++mi)
#pragma unroll
        for (int ni = 0; ni < 4; ++ni) {
          const Fragment before{{acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]}};
          detail::mma_sync<In::input>(acc[mi][ni], fa[mi], fb[ni]);
          const int row = row0 + wr + mi * 16 + g, col = col0 + wc + ni * 8 + 2 * t;
          if (__any_sync(0xffffffffu,
                         unlike_the_model(acc[mi][ni], row < m, row + 8 < m, col < n, col + 1 < n))) {
            const Fragment d = redo<F>(before, sa, sb, wr + mi * 16, wc + ni * 8, kk, min(In::k, live - kk), g, t);
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mi][ni][r] = d.v[r];
          }
        }
    }
  }
  float* out = c + blockIdx.z * part_stride;
#pragma unroll
  for (int mi = 0; mi < 2; ++mi)
#pragma unroll
    for (int ni = 0; ni < 4; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const int row = row0 + wr + mi * 16 + g + 8 * (r >> 1), col = col0 + wc + ni * 8 + 2 * t + (r & 1);
        if (row < m && col < n) out[static_cast<size_t>(row) * n + col] = acc[mi][ni][r];
      }
}

// `all:seq` over the parts: ((p0 + p1) + p2) + ... in fp32, rounded to nearest even.
__global__ void fold_parts(const float* __restrict__ parts, size_t outputs, int64_t count, float* __restrict__ c) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float sum = parts[i];
    for (int64_t p = 1; p < count; ++p) sum = __fadd_rn(sum, parts[p * outputs + i]);
    c[i] = sum;
  }
}

template <Factors F>
void launch(dim3 grid, const float* a, const float* b, float* c, GemmShape s, int64_t chunk) {
  tensor_core_gemm_kernel<F><<<grid, kThreads>>>(a, b, c, static_cast<int>(s.m), static_cast<int>(s.n),
                                                 static_cast<int64_t>(s.k), chunk, s.m * s.n);
}

}  // namespace

std::string tensor_core_gemm_device_why_not() {
  std::string why;
  if (!device_available(&why)) return why;
  const DeviceInfo info = device_info();
  if (info.cc_major != 9)
    return "tensor-core GEMMs run on the GPU's own tensor cores only on a Hopper GPU (sm_90), the chip the "
           "tc-h100 models were measured on; this is " +
           info.name + ", sm_" + std::to_string(info.cc_major) + std::to_string(info.cc_minor);
  return {};
}

void GpuTensorCoreGemm::run_on_device(const TensorCoreGemmPlan& plan, const float* a, const float* b, float* c,
                                      GemmShape shape) {
  const size_t outputs = shape.m * shape.n;
  if (outputs == 0) return;
  if (shape.k == 0) {  // the empty sum: +0 everywhere
    FPLAB_CUDA(cudaMemsetAsync(c, 0, outputs * sizeof(float)));
    return;
  }
  const auto k = static_cast<int64_t>(shape.k);
  const int64_t chunk = plan.parts.chunk(k), count = plan.parts.part_count(k);
  const size_t row_tiles = (shape.m + kBlockRows - 1) / kBlockRows, col_tiles = (shape.n + kBlockCols - 1) / kBlockCols;
  // m and n below INT_MAX by a block: the kernel's row and column indices are ints.
  if (shape.m > INT_MAX - kBlockRows || shape.n > INT_MAX - kBlockCols || col_tiles > 65535 || count > 65535)
    throw std::invalid_argument("tensor-core GEMM: " + std::to_string(shape.m) + " x " + std::to_string(shape.n) +
                                " outputs in " + std::to_string(count) +
                                " parts exceed the kernel's grid (at most 65535 parts and 4194240 columns)");
  float* target = count > 1 ? parts_.reserve<float>(static_cast<size_t>(count) * outputs) : c;
  const dim3 grid(static_cast<unsigned>(row_tiles), static_cast<unsigned>(col_tiles), static_cast<unsigned>(count));
  switch (plan.factors) {
    case Factors::tf32rne:
      launch<Factors::tf32rne>(grid, a, b, target, shape, chunk);
      break;
    case Factors::tf32rna:
      launch<Factors::tf32rna>(grid, a, b, target, shape, chunk);
      break;
    case Factors::bf16:
      launch<Factors::bf16>(grid, a, b, target, shape, chunk);
      break;
    case Factors::fp16:
      launch<Factors::fp16>(grid, a, b, target, shape, chunk);
      break;
    default:  // tf32: plan_tensor_core_gemm takes no other
      launch<Factors::tf32>(grid, a, b, target, shape, chunk);
  }
  FPLAB_CUDA_LAUNCHED("tensor-core GEMM kernel");
  if (count > 1) {
    const auto blocks = static_cast<unsigned>(std::min<size_t>((outputs + 255) / 256, 65535));
    fold_parts<<<blocks, 256>>>(target, outputs, count, c);
    FPLAB_CUDA_LAUNCHED("tensor-core GEMM part fold");
  }
}

void GpuTensorCoreGemm::run_unified(const TensorCoreGemmPlan& plan, const float* a, const float* b, float* c,
                                     GemmShape shape) {
  float* const pa = a_.reserve<float>(shape.m * shape.k);
  float* const pb = b_.reserve<float>(shape.k * shape.n);
  float* const pc = c_.reserve<float>(shape.m * shape.n);
  FPLAB_CUDA(cudaMemcpy(pa, a, shape.m * shape.k * sizeof(float), cudaMemcpyDefault));
  FPLAB_CUDA(cudaMemcpy(pb, b, shape.k * shape.n * sizeof(float), cudaMemcpyDefault));
  // NaN bytes first: an output the kernel failed to write cannot pass for a result.
  FPLAB_CUDA(cudaMemsetAsync(pc, 0xff, shape.m * shape.n * sizeof(float)));
  run_on_device(plan, pa, pb, pc, shape);
  FPLAB_CUDA(cudaMemcpy(c, pc, shape.m * shape.n * sizeof(float), cudaMemcpyDefault));
}

std::vector<float> tensor_core_gemm(const Schedule& schedule, const float* a, const float* b, GemmShape shape) {
  const TensorCoreGemmPlan plan = plan_tensor_core_gemm(schedule);
  std::vector<float> c(shape.m * shape.n);
  GpuTensorCoreGemm gemm;
  gemm.run_unified(plan, a, b, c.data(), shape);
  return c;
}

}  // namespace fplab::sim::gpu
