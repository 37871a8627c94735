// The tensor-core GEMM of gpu_tensor_core_gemm.hpp. A block of 4 warps computes 64 x 64 outputs
// of one split-K part; each warp 32 x 32 of them as 2 x 4 tiles of 16 x 8, one accumulator
// fragment per tile held in registers for the whole part, so that every tile's instructions are
// issued in K order, each taking the last one's result as its C: the chain sim::fused_dot
// describes. Where such blocks would leave most SMs idle (a weight gradient: few outputs, K the
// batch's pixels, up to 131072), blocks of 32 x 16 outputs, a tile a warp, spread the same chains
// over 8 times as many blocks: which warp runs a tile changes nothing in its chain. The factors
// pass through shared memory a stage of K at a time (32 products in wide blocks, 64 in narrow
// ones; asynchronous copies, the next stages' in flight while a stage is read) and are converted
// to the instruction's codes as the fragments are read.
//
// The chip departs from the model in two ways only (docs/results/tensor-cores-h100.md): an exact
// zero result is +0 where the model may give -0, and an overflow gives +-inf where the model
// saturates at +-FLT_MAX. Both leave a trace that lasts: a chip accumulator that was +-inf stays
// infinite or NaN, and a zero's sign changes nothing in the next instruction unless its result is
// zero again (a zero accumulator adds nothing to an exact sum, whatever its sign). So the warp
// looks at its results once a stage, after the stage's last instruction: where any is infinite or
// NaN, or zero where the model's zero could be -0 (needs_model), it computes the
// stage's instructions of that tile again with fused_step (fused_step.hpp, the model of
// sim/tensor_core.cpp) on CUDA cores, from the accumulators it kept at the stage's start. Elsewhere
// the chip's result is the model's (720,896,000 outputs measured).
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/fused_step.hpp"
#include "sim/cuda/gemm_round_trip.hpp"
#include "sim/cuda/gpu_fused_gemm.hpp"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/gpu_tensor_core_gemm.hpp"
#include "sim/cuda/mma_sync.cuh"
#include "sim/cuda/tensor_core_factors.cuh"

namespace fplab::sim::gpu {
namespace {


constexpr int kThreads = 128;
// Shared rows padded so that the fragment loads hit 32 banks: A as [row][K], lane (g, t) reading
// row g, word t (4 g + t with 4 words of padding); B as [K][column], lane (g, t) reading row t,
// word g (t (columns + 8) + g: 8 t + g for 64 columns, 24 t + g for 16).

// A block's 2 x 2 warps, each WM x WN tiles of 16 x 8 outputs, and the stages of the factors in
// shared memory (stage_k products each): the one read and stages - 1 whose copies are in flight.
// A narrow block's stage of 32 products is a few instructions a warp, far shorter than a copy's
// trip from memory and than the stage's own barriers and checks: stages of 64, two ahead (on an
// H200, 64 x 576 x 131072 GEMMs: 1.5 ms each with stages of 32, one ahead).
template <int WM, int WN>
struct BlockShape {
  static constexpr bool wide = WM * WN > 1;
  static constexpr int rows = 2 * 16 * WM, cols = 2 * 8 * WN, ld_b = cols + 8;
  static constexpr int stage_k = wide ? 32 : 64, ld_a = stage_k + 4, stages = wide ? 2 : 3;
};
using WideBlock = BlockShape<2, 4>;    // 64 x 64
using NarrowBlock = BlockShape<1, 1>;  // 32 x 16

template <Factors F>
struct Inputs {
  static constexpr MmaInput input = F == Factors::bf16 ? MmaInput::bf16 : F == Factors::fp16 ? MmaInput::fp16 : MmaInput::tf32;
  static constexpr int per_reg = detail::Traits<input>::per_reg;
  static constexpr int k = detail::Traits<input>::k;  // products one instruction adds
  static constexpr int emin = factor_emin<F>;
};

// A register of the instruction's operand from one factor (tf32) or two (bf16, fp16: `first` in
// the low half), converted as code_of does.
template <Factors F>
__device__ uint32_t operand(float first, float second) {
  if constexpr (F == Factors::bf16) {
    const __nv_bfloat162 pair = __floats2bfloat162_rn(first, second);
    return *reinterpret_cast<const uint32_t*>(&pair);
  } else if constexpr (F == Factors::fp16) {
    const __half2 pair = __floats2half2_rn(first, second);
    return *reinterpret_cast<const uint32_t*>(&pair);
  } else {
    (void)second;
    return code_of<F>(first);
  }
}

// One 4-byte asynchronous copy into shared memory; a zero where `inside` is false (no bytes read).
__device__ __forceinline__ void copy_async(float* to, const float* from, bool inside) {
  const auto address = static_cast<uint32_t>(__cvta_generic_to_shared(to));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(address), "l"(from), "r"(inside ? 4 : 0));
}

// An output fragment of one lane (the C fragment's layout), passed by value so that the
// accumulators stay in registers around the out-of-line call.
struct Fragment {
  float v[4];
};

// The stage's instructions of tile (r0, c0) over its `live` products again, in software, from
// `before`. Out of line: it runs rarely, and inlined eight times it would crowd the main loop.
template <Factors F, int LdA, int LdB>
__device__ __noinline__ Fragment redo_stage(Fragment before, const float (*sa)[LdA], const float (*sb)[LdB], int r0,
                                            int c0, int live, int g, int t) {
  constexpr int N = Inputs<F>::k;
  Fragment d;
  for (int r = 0; r < 4; ++r) {
    const int row = r0 + g + 8 * (r >> 1), col = c0 + 2 * t + (r & 1);
    float acc = before.v[r];
    for (int kk = 0; kk < live; kk += N) {
      const int count = min(N, live - kk);
      float x[N], y[N];
#pragma unroll
      for (int j = 0; j < N; ++j) {
        x[j] = j < count ? model_value<F>(sa[row][kk + j]) : 0.0f;
        y[j] = j < count ? model_value<F>(sb[kk + j][col]) : 0.0f;
      }
      acc = fused_step<N>(acc, x, y, count, Inputs<F>::emin);
    }
    d.v[r] = acc;
  }
  return d;
}

// ±0, ±inf and NaN map to kOdd and above, every other float below: (bits << 1) drops the sign, so
// that both zeros become 0 (and then, less one, the largest word) and the exponent field 0xff the
// top byte. One shift-and-subtract and one unsigned max a value, for the once-a-stage look.
constexpr uint32_t kOdd = 0xfeffffffu;
__device__ __forceinline__ uint32_t oddness(float x) { return (__float_as_uint(x) << 1) - 1u; }

// The largest oddness among a tile's four results of a lane that will be stored (row < m, column
// < n). Outputs past the edge hold the chip's values unchecked: they are never stored, and
// counting their zeros would send every stage of an edge tile to the software path.
__device__ uint32_t tile_oddness(const float (&d)[4], bool top_row, bool bottom_row, bool left_col, bool right_col) {
  const bool inside[4] = {top_row && left_col, top_row && right_col, bottom_row && left_col, bottom_row && right_col};
  uint32_t worst = 0;
#pragma unroll
  for (int r = 0; r < 4; ++r) worst = max(worst, inside[r] ? oddness(d[r]) : 0u);
  return worst;
}

// Most odd results are zeros (a convolution's padding, ReLU's zeros), and most zeros are the
// model's too. The chip's exact zero is +0; the model's is -0 only where the instruction's
// accumulator was -0 and every product a zero of negative sign (fused_step's rule). In a stage
// that started from anything but -0 an accumulator turns -0 only through an instruction whose
// exact sum is negative and below fp32's least subnormal: every term of it below 2^-124, so a
// product with a factor below 2^-60. So where a tile's odd results are zeros from stages that did
// not start at -0, and no nonzero factor of its rows and columns in the stage is below 2^-60,
// the chip's results are the model's, and the software path is not taken.

// True in every lane where the tile (r0, c0) of the block's outputs, whose results include a zero,
// infinity or NaN, needs the model's stage: an infinity or NaN, a zero from a stage that started at
// -0, or a nonzero factor of its 16 rows of A or 8 columns of B among the stage's `live` products
// below 2^-60 in magnitude (a product that small could underflow). Out of line, as redo_stage: the
// main loop keeps none of its values.
template <int StageK, int LdA, int LdB>
__device__ __noinline__ bool needs_model(Fragment d, Fragment before, const float (*sa)[LdA], const float (*sb)[LdB],
                                         int r0, int c0, int live, bool top_row, bool bottom_row, bool left_col,
                                         bool right_col) {
  const bool inside[4] = {top_row && left_col, top_row && right_col, bottom_row && left_col, bottom_row && right_col};
  bool needs = false;
#pragma unroll
  for (int r = 0; r < 4; ++r) {
    const uint32_t twice = __float_as_uint(d.v[r]) << 1;  // without the sign
    // a -0 from the chip (never seen: its exact zero is +0) goes to the model too, to be sure
    const bool negative_zero = __float_as_uint(d.v[r]) == 0x80000000u || __float_as_uint(before.v[r]) == 0x80000000u;
    needs |= inside[r] && (twice >= 0xff000000u || (twice == 0 && negative_zero));
  }
  if (__any_sync(0xffffffffu, needs)) return true;
  constexpr uint32_t kTiny = 0x21800000u;  // 2^-60's bits: |x| below it, x nonzero
  const int lane = static_cast<int>(threadIdx.x % 32);
  bool tiny = false;
  for (int e = lane; e < 16 * StageK; e += 32) {
    const int r = e / StageK, kk = e % StageK;
    const uint32_t bits = __float_as_uint(sa[r0 + r][kk]) & 0x7fffffffu;
    tiny |= kk < live && bits != 0 && bits < kTiny;
  }
  for (int e = lane; e < 8 * StageK; e += 32) {
    const int kk = e / 8, col = e % 8;
    const uint32_t bits = __float_as_uint(sb[kk][c0 + col]) & 0x7fffffffu;
    tiny |= kk < live && bits != 0 && bits < kTiny;
  }
  return __any_sync(0xffffffffu, tiny);
}

// The wide block: three an SM, 168 registers a thread, none spilled in the tf32 kernels (the
// compiler takes all 255 otherwise, and two blocks an SM leave the copies' latency bare). The
// narrow one: five (as many as its 44 KiB of stages let an SM hold), 96 registers.
template <int WM, int WN>
constexpr int kMinBlocks = WM * WN > 1 ? 3 : 5;

template <Factors F, int WM, int WN>
__global__ void __launch_bounds__(kThreads, kMinBlocks<WM, WN>)
    tensor_core_gemm_kernel(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int m,
                            int n, int64_t k, KParts parts, size_t part_stride) {
  using In = Inputs<F>;
  using Block = BlockShape<WM, WN>;
  constexpr int kBlockRows = Block::rows, kBlockCols = Block::cols, kLdB = Block::ld_b, kStages = Block::stages;
  constexpr int kStageK = Block::stage_k, kLdA = Block::ld_a;
  // Stages of the factors as they are in memory (converted when the fragments are read): one is
  // read while the next ones' copies are in flight.
  __shared__ float sa[kStages][kBlockRows][kLdA];  // A, [row][K]
  __shared__ float sb[kStages][kStageK][kLdB];     // B, [K][column]
  const int row0 = blockIdx.x * kBlockRows, col0 = blockIdx.y * kBlockCols;
  const int64_t k0 = parts.begin(blockIdx.z), k1 = parts.end(blockIdx.z, k);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wr = (warp / 2) * 16 * WM, wc = (warp % 2) * 8 * WN;  // the warp's outputs within the block
  const bool interior = row0 + kBlockRows <= m && col0 + kBlockCols <= n;  // every output stored
  static_assert(kBlockRows * kStageK % kThreads == 0 && kStageK * kBlockCols % kThreads == 0,
                "whole copies a thread");
  const auto load_stage = [&](int buffer, int64_t ks) {
#pragma unroll
    for (int i = 0; i < kBlockRows * kStageK / kThreads; ++i) {
      const int e = threadIdx.x + i * kThreads;
      const int r = e / kStageK, ka = e % kStageK;  // A: consecutive threads along a row's K
      const bool in_a = row0 + r < m && ks + ka < k1;
      copy_async(&sa[buffer][r][ka], in_a ? a + static_cast<size_t>(row0 + r) * k + ks + ka : a, in_a);
    }
#pragma unroll
    for (int i = 0; i < kStageK * kBlockCols / kThreads; ++i) {
      const int e = threadIdx.x + i * kThreads;
      const int kb = e / kBlockCols, col = e % kBlockCols;  // B: along a row of B (the columns)
      const bool in_b = col0 + col < n && ks + kb < k1;
      copy_async(&sb[buffer][kb][col], in_b ? b + static_cast<size_t>(ks + kb) * n + col0 + col : b, in_b);
    }
    asm volatile("cp.async.commit_group;\n" ::);
  };
  float acc[WM][WN][4];
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int ni = 0; ni < WN; ++ni)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[mi][ni][r] = 0.0f;  // every chain starts from +0

  // Stage i goes to buffer i % kStages; one commit group a stage, empty past the part's end, so
  // that "all but the newest kStages - 1 groups done" always means "this stage is in".
#pragma unroll
  for (int i = 0; i < kStages - 1; ++i) {
    if (k0 + i * kStageK < k1)
      load_stage(i, k0 + i * kStageK);
    else
      asm volatile("cp.async.commit_group;\n" ::);
  }
  int buffer = 0;
  for (int64_t ks = k0; ks < k1; ks += kStageK, buffer = buffer + 1 == kStages ? 0 : buffer + 1) {
    // the buffer read in the last iteration (the barrier at its end passed) takes stage + kStages - 1
    const int refill = buffer == 0 ? kStages - 1 : buffer - 1;
    if (ks + (kStages - 1) * kStageK < k1)
      load_stage(refill, ks + (kStages - 1) * kStageK);
    else
      asm volatile("cp.async.commit_group;\n" ::);
    asm volatile("cp.async.wait_group %0;\n" ::"n"(kStages - 1));  // this stage's copies done
    __syncthreads();  // every thread's copies of this stage are in
    const float (*const sta)[kLdA] = sa[buffer];
    const float (*const stb)[kLdB] = sb[buffer];
    const int live = static_cast<int>(min(static_cast<int64_t>(kStageK), k1 - ks));  // this stage's products inside the part
    Fragment before[WM][WN];  // the stage's starting accumulators, for the rare software path
#pragma unroll
    for (int mi = 0; mi < WM; ++mi)
#pragma unroll
      for (int ni = 0; ni < WN; ++ni)
        before[mi][ni] = Fragment{{acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]}};
    for (int kk = 0; kk < live; kk += In::k) {
      // The fragments of mma.sync (PTX ISA, "Matrix fragments"): A's register r holds row
      // g + 8 (r & 1), products t (and t + 1 for two a register) + k/2 (r >> 1); B's register r
      // column g, products t (t + 1) + k/2 r.
      constexpr int step = In::per_reg, half = In::k / 2;
      uint32_t fa[WM][4], fb[WN][2];
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const float* p = &sta[wr + mi * 16 + g + 8 * (r & 1)][kk + t * step + (r >> 1) * half];
          fa[mi][r] = operand<F>(p[0], step > 1 ? p[1] : 0.0f);
        }
#pragma unroll
      for (int ni = 0; ni < WN; ++ni)
#pragma unroll
        for (int r = 0; r < 2; ++r) {
          const int kb = kk + t * step + r * half, col = wc + ni * 8 + g;
          fb[ni][r] = operand<F>(stb[kb][col], step > 1 ? stb[kb + 1][col] : 0.0f);
        }
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
#pragma unroll
        for (int ni = 0; ni < WN; ++ni) detail::mma_sync<In::input>(acc[mi][ni], fa[mi], fb[ni]);
    }
    uint32_t worst = 0;
    if (interior) {
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
#pragma unroll
        for (int ni = 0; ni < WN; ++ni)
#pragma unroll
          for (int r = 0; r < 4; ++r) worst = max(worst, oddness(acc[mi][ni][r]));
    } else {
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
#pragma unroll
        for (int ni = 0; ni < WN; ++ni) {
          const int row = row0 + wr + mi * 16 + g, col = col0 + wc + ni * 8 + 2 * t;
          worst = max(worst, tile_oddness(acc[mi][ni], row < m, row + 8 < m, col < n, col + 1 < n));
        }
    }
    if (__any_sync(0xffffffffu, worst >= kOdd)) {  // rare: find the tiles, and redo their stage
#pragma unroll
      for (int mi = 0; mi < WM; ++mi)
#pragma unroll
        for (int ni = 0; ni < WN; ++ni) {
          const int row = row0 + wr + mi * 16 + g, col = col0 + wc + ni * 8 + 2 * t;
          const bool top = row < m, bottom = row + 8 < m, left = col < n, right = col + 1 < n;
          const Fragment now{{acc[mi][ni][0], acc[mi][ni][1], acc[mi][ni][2], acc[mi][ni][3]}};
          if (__any_sync(0xffffffffu, tile_oddness(acc[mi][ni], top, bottom, left, right) >= kOdd) &&
              needs_model<kStageK, kLdA, kLdB>(now, before[mi][ni], sta, stb, wr + mi * 16, wc + ni * 8, live, top,
                                               bottom, left, right)) {
            const Fragment d = redo_stage<F, kLdA, kLdB>(before[mi][ni], sta, stb, wr + mi * 16, wc + ni * 8, live, g, t);
#pragma unroll
            for (int r = 0; r < 4; ++r) acc[mi][ni][r] = d.v[r];
          }
        }
    }
    __syncthreads();  // this stage's buffer is read: the next iteration's copies may refill it
  }
  float* out = c + blockIdx.z * part_stride;
#pragma unroll
  for (int mi = 0; mi < WM; ++mi)
#pragma unroll
    for (int ni = 0; ni < WN; ++ni)
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

// The same with the parts added in `order` (order[0] first): deal(P,B)[...] | cols(R) | all:seq.
__global__ void fold_parts_in_order(const float* __restrict__ parts, size_t outputs, int64_t count,
                                    const uint32_t* __restrict__ order, float* __restrict__ c) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < outputs;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float sum = parts[order[0] * outputs + i];
    for (int64_t p = 1; p < count; ++p) sum = __fadd_rn(sum, parts[order[p] * outputs + i]);
    c[i] = sum;
  }
}

template <Factors F, int WM, int WN>
void launch_blocks(const float* a, const float* b, float* c, GemmShape s, const KParts& parts, int64_t count) {
  using Block = BlockShape<WM, WN>;
  const dim3 grid(static_cast<unsigned>((s.m + Block::rows - 1) / Block::rows),
                  static_cast<unsigned>((s.n + Block::cols - 1) / Block::cols), static_cast<unsigned>(count));
  tensor_core_gemm_kernel<F, WM, WN><<<grid, kThreads>>>(a, b, c, static_cast<int>(s.m), static_cast<int>(s.n),
                                                         static_cast<int64_t>(s.k), parts, s.m * s.n);
}

template <Factors F>
void launch(TensorCoreBlock block, const float* a, const float* b, float* c, GemmShape s, const KParts& parts,
            int64_t count) {
  if (block == TensorCoreBlock::narrow)
    launch_blocks<F, 1, 1>(a, b, c, s, parts, count);
  else
    launch_blocks<F, 2, 4>(a, b, c, s, parts, count);
}

// Wide blocks where they give every SM two at least; narrow ones otherwise (each holds a warp's
// chain of a 16 x 8 tile: a long K then runs on all SMs instead of a few).
TensorCoreBlock block_for(GemmShape s, int64_t count) {
  const auto wide = static_cast<int64_t>((s.m + WideBlock::rows - 1) / WideBlock::rows) *
                    static_cast<int64_t>((s.n + WideBlock::cols - 1) / WideBlock::cols) * count;
  return wide >= 2 * current_sm_count() ? TensorCoreBlock::wide : TensorCoreBlock::narrow;
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

void GpuTensorCoreGemm::write_parts(const TensorCoreGemmPlan& plan, const float* a, const float* b, float* target,
                                    GemmShape shape, const KParts& parts, int64_t count) {
  const auto k = static_cast<int64_t>(shape.k);
  const TensorCoreBlock block = forced_block_ ? *forced_block_ : block_for(shape, count);
  const size_t block_cols = block == TensorCoreBlock::wide ? WideBlock::cols : NarrowBlock::cols;
  // m and n below INT_MAX by a block: the kernel's row and column indices are ints.
  if (shape.m > INT_MAX - WideBlock::rows || shape.n > INT_MAX - WideBlock::cols ||
      (shape.n + block_cols - 1) / block_cols > 65535 || count > 65535)
    throw std::invalid_argument("tensor-core GEMM: " + std::to_string(shape.m) + " x " + std::to_string(shape.n) +
                                " outputs in " + std::to_string(count) +
                                " parts exceed the kernel's grid (at most 65535 parts, " +
                                std::to_string(65535 * block_cols) + " columns and 2147483583 rows)");
  if (plan.cuda_cores) {  // a model no mma instruction here computes: its steps in software
    detail::launch_fused_chains(plan.factors, plan.step_products, plan.fraction_bits, a, b, target,
                                static_cast<int64_t>(shape.m), static_cast<int64_t>(shape.n), k, parts.chunk,
                                static_cast<unsigned>(count), block == TensorCoreBlock::narrow);
  } else {
    switch (plan.factors) {
      case Factors::tf32rne:
        launch<Factors::tf32rne>(block, a, b, target, shape, parts, count);
        break;
      case Factors::tf32rna:
        launch<Factors::tf32rna>(block, a, b, target, shape, parts, count);
        break;
      case Factors::bf16:
        launch<Factors::bf16>(block, a, b, target, shape, parts, count);
        break;
      case Factors::fp16:
        launch<Factors::fp16>(block, a, b, target, shape, parts, count);
        break;
      default:  // tf32: plan_tensor_core_gemm takes no other for the tensor cores
        launch<Factors::tf32>(block, a, b, target, shape, parts, count);
    }
  }
  FPLAB_CUDA_LAUNCHED("tensor-core GEMM kernel");
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
  const KParts parts = plan.parts.k_parts(k);
  const int64_t count = parts.count(k);
  if (const std::vector<size_t> order = plan.parts.k_order(k); !order.empty()) {
    // dealt parts: the operands gathered hand by hand, each hand then a run of K (k_parts.hpp)
    const GpuKOrder::Operands gathered = k_order_.gather(order, a, b, shape);
    a = gathered.a, b = gathered.b;
  }
  float* target = count > 1 ? parts_.reserve<float>(static_cast<size_t>(count) * outputs) : c;
  write_parts(plan, a, b, target, shape, parts, count);
  if (count > 1) {
    const auto blocks = static_cast<unsigned>(std::min<size_t>((outputs + 255) / 256, 65535));
    const std::vector<size_t> fold = plan.fold_order(k);
    if (fold.empty()) {
      fold_parts<<<blocks, 256>>>(target, outputs, count, c);
    } else {
      // uploaded once per order and kept (GpuKOrder's cache), not copied on every call
      fold_parts_in_order<<<blocks, 256>>>(target, outputs, count, fold_orders_.on_device(fold), c);
    }
    FPLAB_CUDA_LAUNCHED("tensor-core GEMM part fold");
  }
}

// The parts of a seeded combine take count x rows x n floats: past this budget the GEMM runs in
// slabs of whole output tiles' rows, each written and folded in turn (keys stay the whole GEMM's),
// as GpuGemm's seeded combine does.
constexpr size_t kSeededPartsBudget = size_t{64} << 20;  // floats: 256 MiB

void GpuTensorCoreGemm::run_seeded_on_device(const TensorCoreGemmPlan& plan, GpuSeededReduction& fold,
                                             const NoiseKey& key, const float* a, const float* b, float* c,
                                             GemmShape shape) {
  const auto k = static_cast<int64_t>(shape.k);
  const int64_t count = k ? plan.parts.part_count(k) : 1;
  if (plan.parts.deterministic() || count <= 1 || shape.m * shape.n == 0) return run_on_device(plan, a, b, c, shape);
  const KParts parts = plan.parts.k_parts(k);
  const size_t rows = kSeededPartsBudget / (static_cast<size_t>(count) * shape.n);
  const size_t slab = std::max<size_t>(kGemmTileRows, rows / kGemmTileRows * kGemmTileRows);
  for (size_t row = 0; row < shape.m; row += slab) {
    const GemmShape part{std::min(slab, shape.m - row), shape.n, shape.k};
    float* const slab_parts = parts_.reserve<float>(static_cast<size_t>(count) * part.m * part.n);
    write_parts(plan, a + row * shape.k, b, slab_parts, part, parts, count);
    fold.fold_gemm_parts(slab_parts, count, part, key, c + row * shape.n, row);
  }
}

void GpuTensorCoreGemm::run_unified(const TensorCoreGemmPlan& plan, const float* a, const float* b, float* c,
                                     GemmShape shape) {
  if (shape.m * shape.n == 0) return;
  float* const pa = a_.reserve<float>(shape.m * shape.k);
  float* const pb = b_.reserve<float>(shape.k * shape.n);
  float* const pc = c_.reserve<float>(shape.m * shape.n);
  // K = 0: the factors are empty and may come as null pointers, which cudaMemcpy refuses even for
  // no bytes.
  if (shape.k) FPLAB_CUDA(cudaMemcpy(pa, a, shape.m * shape.k * sizeof(float), cudaMemcpyDefault));
  if (shape.k) FPLAB_CUDA(cudaMemcpy(pb, b, shape.k * shape.n * sizeof(float), cudaMemcpyDefault));
  // NaN bytes first: an output the kernel failed to write cannot pass for a result.
  FPLAB_CUDA(cudaMemsetAsync(pc, 0xff, shape.m * shape.n * sizeof(float)));
  run_on_device(plan, pa, pb, pc, shape);
  FPLAB_CUDA(cudaMemcpy(c, pc, shape.m * shape.n * sizeof(float), cudaMemcpyDefault));
}

std::vector<float> tensor_core_gemm(const Schedule& schedule, const float* a, const float* b, GemmShape shape,
                                    std::optional<TensorCoreBlock> block, const NoiseKey& key) {
  const TensorCoreGemmPlan plan = plan_tensor_core_gemm(schedule);
  std::vector<float> c(shape.m * shape.n);
  GpuTensorCoreGemm gemm;
  gemm.force_block(block);
  if (plan.parts.deterministic()) {
    gemm.run_unified(plan, a, b, c.data(), shape);
    return c;
  }
  GpuSeededReduction fold;
  return gemm_round_trip(a, b, shape, [&](const float* pa, const float* pb, float* pc) {
    gemm.run_seeded_on_device(plan, fold, key, pa, pb, pc, shape);
  });
}

}  // namespace fplab::sim::gpu
