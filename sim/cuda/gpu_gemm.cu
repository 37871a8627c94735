// The GEMM kernel: 64 x 64 output tiles, 256 threads of 4 x 4 outputs each, K staged through
// shared memory 16 at a time. Each output's chain runs over its part of K strictly in K order
// with __fmaf_rn (or, products rounded, __fmul_rn then __fadd_rn: chain_step); the first term is
// the rounded product __fmul_rn, as a one-term group's result is in the emulation. Nothing is ever added for a K index outside the part (an FMA with
// a zero product would turn an accumulator of -0 into +0). Chains written out (one part, parts to a
// workspace, an atomic combine) run in other tiles where the shape allows (gpu_gemm_tiled.cu):
// the same chains, faster; the ordered combines that fold parts in the kernel stay here.
#include <algorithm>
#include <vector>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gpu_gemm.hpp"
#include "sim/cuda/gpu_gemm_probe.hpp"
#include "sim/cuda/gpu_timing.cuh"

namespace fplab::sim::gpu {
namespace {

constexpr int kTileM = 64, kTileN = 64, kTileK = 16, kThreads = 256;

// Where a part's chains go:
// - parts: to the workspace (parts[z]; a tree kernel combines them; one part: straight to C);
// - atomic: atomicAdd-ed into C (set to -0 first): the hardware's arrival order;
// - last_folds: to the workspace; the last part of each output tile to finish (a ticket per tile)
//   folds the tile's parts in part order into C. For few tiles, where all parts run at once.
// - serial: into C itself, in part order: part p waits until part p - 1 of its tile has written
//   C (a flag per tile), then writes C + its chains (part 0: its chains). CUTLASS's "serial"
//   split-K: no workspace, C stays in L2. For many tiles. The part is blockIdx.z, the slowest
//   index of the grid, so part p - 1 of a tile is launched before part p and the wait ends. Like
//   CUTLASS's serial split-K and CUB's decoupled look-back, this relies on the hardware launching
//   a grid's blocks in index order, which CUDA does not promise; a dispatch counter would
//   promise it, but its atomic round trip before each block's first load costs more than the
//   whole ordered combine (docs/results/gpu.md, "The numbers behind sim/cuda's comments").
// last_folds, serial and the parts + combine_in_order pair all give ((p0 + p1) + p2) + ..., the
// emulation's all:seq of the parts; GpuGemm::ordered_form picks one by shape.
// serial_timed: the serial form, thread 0 of each block also recording when it started, finished
// its chains, ended its wait and released (GpuGemmProbe::serial_timeline; never used for results).
enum class Out { parts, atomic, last_folds, serial, serial_timed };
template <Out O>
constexpr bool kSerial = O == Out::serial || O == Out::serial_timed;

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// The timed form holds its clocks in 16 more registers: held to the serial form's 48 (5 blocks an
// SM; 16 bytes spilled) so that it runs at the same occupancy as what it measures.
template <Out O>
constexpr int kMinBlocksPerSm = O == Out::serial_timed ? 5 : 0;

template <Out O, bool Rounded = false>
__global__ void __launch_bounds__(kThreads, kMinBlocksPerSm<O>)
    gemm_fma_chains(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ out, int m, int n,
                    int64_t k, KParts ks, float* __restrict__ parts, unsigned* __restrict__ tickets) {
  __shared__ float as[kTileK][kTileM + 1];  // +1: the transposing store is free of bank conflicts
  __shared__ float bs[kTileK][kTileN];
  const unsigned bx = blockIdx.x, by = blockIdx.y, bz = blockIdx.z;
  [[maybe_unused]] unsigned long long start_ns = 0, start_clock = 0, chains_clock = 0, acquired_clock = 0;
  if constexpr (O == Out::serial_timed) start_ns = global_ns(), start_clock = clock64();
  const int tx = threadIdx.x & 15, ty = threadIdx.x >> 4;
  const int row0 = by * kTileM, col0 = bx * kTileN;
  const int64_t k0 = ks.begin(bz), k1 = ks.end(bz, k);

  float acc[4][4];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      acc[i][j] = r < m && c < n ? __fmul_rn(a[static_cast<int64_t>(r) * k + k0], b[k0 * n + c]) : 0.0f;
    }

  for (int64_t kt = k0 + 1; kt < k1; kt += kTileK) {
    const int len = k1 - kt < kTileK ? static_cast<int>(k1 - kt) : kTileK;
#pragma unroll
    for (int q = 0; q < kTileM * kTileK / kThreads; ++q) {
      const int idx = threadIdx.x + kThreads * q;
      const int am = idx >> 4, ak = idx & 15, r = row0 + am;
      as[ak][am] = r < m && ak < len ? a[static_cast<int64_t>(r) * k + kt + ak] : 0.0f;
      const int bk = idx >> 6, bn = idx & 63, c = col0 + bn;
      bs[bk][bn] = c < n && bk < len ? b[(kt + bk) * n + c] : 0.0f;
    }
    __syncthreads();
    auto step = [&](int kk) {
      float av[4], bv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) av[i] = as[kk][ty + 16 * i];
#pragma unroll
      for (int j = 0; j < 4; ++j) bv[j] = bs[kk][tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = chain_step<Rounded>(av[i], bv[j], acc[i][j]);
    };
    if (len == kTileK) {
#pragma unroll
      for (int kk = 0; kk < kTileK; ++kk) step(kk);
    } else {
      for (int kk = 0; kk < len; ++kk) step(kk);
    }
    __syncthreads();
  }

  // The loops over the thread's 4 x 4 outputs below are written out each time: a lambda taking
  // the action costs 8-14 registers a thread (and an occupancy step) in every variant.
  const int64_t mn = static_cast<int64_t>(m) * n;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
      if (r >= m || c >= n) continue;
      const int64_t at = static_cast<int64_t>(r) * n + c;
      if constexpr (O == Out::atomic)
        atomicAdd(out + at, acc[i][j]);
      else if constexpr (!kSerial<O>)
        parts[bz * mn + at] = acc[i][j];
    }
  if constexpr (kSerial<O>) {
    // One thread acquires the tile's flag and, after the block's stores and a barrier, releases
    // it (CUTLASS's semaphore): the barrier orders every thread's stores before the release.
    unsigned* const flag = tickets + by * gridDim.x + bx;
    if (threadIdx.x == 0) {
      if constexpr (O == Out::serial_timed) chains_clock = clock64();
      unsigned seen;
      do {
        asm volatile("ld.global.acquire.gpu.b32 %0, [%1];" : "=r"(seen) : "l"(flag) : "memory");
        if (seen != bz) __nanosleep(32);
      } while (seen != bz);
      if constexpr (O == Out::serial_timed) acquired_clock = clock64();
    }
    __syncthreads();
    // A whole tile (the usual case): the 16 reads of C first, then the adds and stores. Read, add
    // and store output by output, each read waits for the store before it (the compiler cannot
    // tell the addresses apart): 16 L2 round trips in a row, 4.4 us of a 16 us block on an H100
    // (gpu_gemm_bench --serial-waits). One base address and offsets: 16 live 64-bit pointers would
    // cost 26 registers a thread, two blocks an SM.
    if (row0 + kTileM <= m && col0 + kTileN <= n) {
      float* const base = out + static_cast<int64_t>(row0 + ty) * n + col0 + tx;
      const int64_t rows16 = 16 * static_cast<int64_t>(n);
      if (bz != 0) {
        float before[4][4];
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) before[i][j] = __ldcg(base + i * rows16 + 16 * j);
#pragma unroll
        for (int i = 0; i < 4; ++i)
#pragma unroll
          for (int j = 0; j < 4; ++j) acc[i][j] = __fadd_rn(before[i][j], acc[i][j]);
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) base[i * rows16 + 16 * j] = acc[i][j];
    } else {
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
          if (r >= m || c >= n) continue;
          const int64_t at = static_cast<int64_t>(r) * n + c;
          out[at] = bz == 0 ? acc[i][j] : __fadd_rn(__ldcg(out + at), acc[i][j]);
        }
    }
    __syncthreads();
    if (threadIdx.x == 0) {
      const unsigned next = bz + 1 == gridDim.z ? 0u : bz + 1;  // the last part: ready for the next launch
      if constexpr (O == Out::serial_timed) {  // the record of this block, at its linear index (launch order)
        // Taken before the release, so the next part's end is always later than this one's.
        const unsigned long long released_clock = clock64(), end_ns = global_ns();
        unsigned long long* record =
            reinterpret_cast<unsigned long long*>(parts) + 6ull * ((bz * gridDim.y + by) * gridDim.x + bx);
        record[0] = start_ns, record[1] = end_ns, record[2] = start_clock, record[3] = chains_clock;
        record[4] = acquired_clock, record[5] = released_clock;
      }
      asm volatile("st.global.release.gpu.b32 [%0], %1;" : : "l"(flag), "r"(next) : "memory");
    }
  }
  if constexpr (O == Out::last_folds) {
    // Each part's tile is fenced before its ticket, so the part that draws the last ticket sees
    // them all (read through L2: __ldcg, L1 is not coherent across blocks).
    __shared__ bool last;
    __syncthreads();
    unsigned* const ticket = tickets + by * gridDim.x + bx;
    if (threadIdx.x == 0) {
      __threadfence();  // after the barrier: every thread's part stores, then the ticket
      last = atomicAdd(ticket, 1u) == gridDim.z - 1;
      __threadfence();
    }
    __syncthreads();
    if (!last) return;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        const int r = row0 + ty + 16 * i, c = col0 + tx + 16 * j;
        if (r >= m || c >= n) continue;
        const int64_t at = static_cast<int64_t>(r) * n + c;
        float s = bz == 0 ? acc[i][j] : __ldcg(parts + at);
#pragma unroll 4
        for (unsigned p = 1; p < gridDim.z; ++p) s = __fadd_rn(s, p == bz ? acc[i][j] : __ldcg(parts + p * mn + at));
        out[at] = s;
      }
    if (threadIdx.x == 0) *ticket = 0;  // ready for the next launch
  }
}

// all:tree of the emulation: reduce [lo, lo + half) and [lo + half, lo + count), half = count / 2.
// Up to kFixedTree parts the tree is unrolled at compile time (registers only); beyond, recursion.
constexpr int kFixedTree = 32;

template <int N>
__device__ __forceinline__ float tree_fixed(const float* parts, int64_t mn, int64_t at, int lo) {
  if constexpr (N == 1) {
    return parts[lo * mn + at];
  } else {
    const float left = tree_fixed<N / 2>(parts, mn, at, lo);
    return __fadd_rn(left, tree_fixed<N - N / 2>(parts, mn, at, lo + N / 2));
  }
}

__device__ float tree_sum(const float* parts, int64_t mn, int64_t at, int lo, int count) {
  if (count == 1) return parts[lo * mn + at];
  const int half = count / 2;
  const float left = tree_sum(parts, mn, at, lo, half);
  return __fadd_rn(left, tree_sum(parts, mn, at, lo + half, count - half));
}

template <int N>
__global__ void combine_tree(const float* __restrict__ parts, float* __restrict__ c, int64_t mn, int count) {
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= mn) return;
  if constexpr (N > 0)
    c[at] = tree_fixed<N>(parts, mn, at, 0);
  else
    c[at] = tree_sum(parts, mn, at, 0, count);
}

__global__ void combine_in_order(const float* __restrict__ parts, float* __restrict__ c, int64_t mn, int count) {
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at >= mn) return;
  float s = parts[at];
  for (int p = 1; p < count; ++p) s = __fadd_rn(s, parts[p * mn + at]);
  c[at] = s;
}

unsigned blocks_for(int64_t count, int threads) { return static_cast<unsigned>((count + threads - 1) / threads); }

template <int N = 2>
void launch_tree(const float* parts, float* c, int64_t mn, int count) {
  if constexpr (N <= kFixedTree) {
    if (count != N) return launch_tree<N + 1>(parts, c, mn, count);
    combine_tree<N><<<blocks_for(mn, 256), 256>>>(parts, c, mn, count);
  } else {
    combine_tree<0><<<blocks_for(mn, 256), 256>>>(parts, c, mn, count);
  }
  FPLAB_CUDA_LAUNCHED("combine_tree");
}

__global__ void fill(float* c, int64_t count, float value) {
  const int64_t at = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (at < count) c[at] = value;
}

}  // namespace

namespace {
void grow(float*& p, size_t& capacity, size_t need) {
  need = std::max<size_t>(need, 1);
  if (need <= capacity) return;
  if (p) FPLAB_CUDA(cudaFree(p));
  p = nullptr;
  FPLAB_CUDA(cudaMalloc(&p, need * sizeof(float)));
  capacity = need;
}
}  // namespace

GpuGemm::GpuGemm(const float* a, const float* b, GemmShape shape) { load(a, b, shape); }

void GpuGemm::load(const float* a, const float* b, GemmShape shape) {
  shape_ = shape;
  const size_t mk = shape.m * shape.k, kn = shape.k * shape.n, mn = shape.m * shape.n;
  grow(a_, a_capacity_, mk);
  grow(b_, b_capacity_, kn);
  grow(c_, c_capacity_, mn);
  if (mk) FPLAB_CUDA(cudaMemcpy(a_, a, mk * sizeof(float), cudaMemcpyHostToDevice));
  if (kn) FPLAB_CUDA(cudaMemcpy(b_, b, kn * sizeof(float), cudaMemcpyHostToDevice));
}

GpuGemm::~GpuGemm() {
  for (float* p : {a_, b_, c_, parts_})
    if (p) cudaFree(p);
  if (tickets_) cudaFree(tickets_);
}

void GpuGemm::launch(const GemmPlan& plan, const float* a, const float* b, float* c, const SeededCombine* seeded) {
  const auto [m, n, k] = shape_;
  const int64_t mn = static_cast<int64_t>(m * n);
  if (mn == 0) return;
  if (k == 0) {  // the sum of no terms
    fill<<<blocks_for(mn, 256), 256>>>(c, mn, 0.0f);
    FPLAB_CUDA_LAUNCHED("fill");
    return;
  }
  const auto kk = static_cast<int64_t>(k);
  const KParts ks = plan.k_parts(kk);
  const int64_t count = ks.count(kk);
  if (count > 65535) throw NotRealisable("GEMM with " + std::to_string(count) + " split-K parts (at most 65535)");
  if (m > 65535u * kTileM) throw NotRealisable("GEMM with more than 65535 row tiles");
  if (const std::vector<size_t> order = plan.k_order(kk); !order.empty()) {
    // strided(P) parts: the operands gathered part by part, each part then a run of K (k_parts.hpp)
    const GpuKOrder::Operands gathered = k_order_.gather(order, a, b, shape_);
    a = gathered.a, b = gathered.b;
  }
  const dim3 grid(blocks_for(static_cast<int64_t>(n), kTileN), blocks_for(static_cast<int64_t>(m), kTileM),
                  static_cast<unsigned>(count));
  const int mi = static_cast<int>(m), ni = static_cast<int>(n);
  const detail::ChainTile tile = tile_for(plan, a, b);
  // Chains written out: to C (one part), atomicAdd-ed into C, or to the parts' workspace.
  const auto write_chains = [&](bool atomic, float* to) {
    // The tiled kernels store float4 (wide, medium) or float2 (thin) rows: a C at an address that is not
    // 16-byte aligned (a caller's view into a tensor) takes the 64 x 64 kernel's single stores.
    if (tile != detail::ChainTile::none && reinterpret_cast<uintptr_t>(to) % 16 == 0) {
      detail::launch_tiled_chains(tile, atomic, plan.rounded_products, a, b, to, mi, ni, kk, ks,
                                  static_cast<unsigned>(count));
    } else if (atomic && plan.rounded_products) {
      gemm_fma_chains<Out::atomic, true><<<grid, kThreads>>>(a, b, to, mi, ni, kk, ks, nullptr, nullptr);
      FPLAB_CUDA_LAUNCHED("gemm_fma_chains<atomic, rounded>");
    } else if (atomic) {
      gemm_fma_chains<Out::atomic><<<grid, kThreads>>>(a, b, to, mi, ni, kk, ks, nullptr, nullptr);
      FPLAB_CUDA_LAUNCHED("gemm_fma_chains<atomic>");
    } else if (plan.rounded_products) {
      gemm_fma_chains<Out::parts, true><<<grid, kThreads>>>(a, b, nullptr, mi, ni, kk, ks, to, nullptr);
      FPLAB_CUDA_LAUNCHED("gemm_fma_chains<parts, rounded>");
    } else {
      gemm_fma_chains<Out::parts><<<grid, kThreads>>>(a, b, nullptr, mi, ni, kk, ks, to, nullptr);
      FPLAB_CUDA_LAUNCHED("gemm_fma_chains<parts>");
    }
  };
  if (plan.combine == GemmPlan::Combine::atomic && !seeded) {
    fill<<<blocks_for(mn, 256), 256>>>(c, mn, -0.0f);  // -0: the identity of the additions
    FPLAB_CUDA_LAUNCHED("fill");
    write_chains(true, c);
    return;
  }
  if (count == 1) {  // one part: its chain is the sum, whatever the combine
    write_chains(false, c);
    return;
  }
  const auto reserve_parts = [&] {
    const size_t need = static_cast<size_t>(count * mn);
    if (need > parts_capacity_) {
      if (parts_) FPLAB_CUDA(cudaFree(parts_));
      parts_ = nullptr;
      parts_capacity_ = 0;
      FPLAB_CUDA(cudaMalloc(&parts_, need * sizeof(float)));
      parts_capacity_ = need;
    }
  };
  if (plan.combine == GemmPlan::Combine::atomic) {  // seeded: the parts, then the emulation's order
    reserve_parts();
    write_chains(false, parts_);
    seeded->fold->fold_gemm_parts(parts_, count, shape_, seeded->key, c, seeded->first_row);
    return;
  }
  const size_t tiles = static_cast<size_t>(grid.x) * grid.y;
  if (tiles > tickets_capacity_) {  // flags / tickets, one per output tile
    if (tickets_) FPLAB_CUDA(cudaFree(tickets_));
    tickets_ = nullptr;
    FPLAB_CUDA(cudaMalloc(&tickets_, tiles * sizeof(unsigned)));
    FPLAB_CUDA(cudaMemset(tickets_, 0, tiles * sizeof(unsigned)));  // each launch leaves them at 0
    tickets_capacity_ = tiles;
  }
  // Rounded products write their chains out (the forms that fold in the kernel are fused-only).
  const OrderedForm form = plan.combine != GemmPlan::Combine::seq ? OrderedForm::by_shape
                           : plan.rounded_products               ? OrderedForm::two_passes
                                                                 : ordered_form(plan, a, b);
  if (form == OrderedForm::serial) {
    gemm_fma_chains<Out::serial><<<grid, kThreads>>>(a, b, c, mi, ni, kk, ks, nullptr, tickets_);
    FPLAB_CUDA_LAUNCHED("gemm_fma_chains<serial>");
    return;
  }
  const bool two_passes = form == OrderedForm::two_passes;
  reserve_parts();
  if (plan.combine == GemmPlan::Combine::tree || two_passes) {
    write_chains(false, parts_);
    if (two_passes) {
      combine_in_order<<<blocks_for(mn, 256), 256>>>(parts_, c, mn, static_cast<int>(count));
      FPLAB_CUDA_LAUNCHED("combine_in_order");
    } else {
      launch_tree(parts_, c, mn, static_cast<int>(count));
    }
    return;
  }
  gemm_fma_chains<Out::last_folds><<<grid, kThreads>>>(a, b, c, mi, ni, kk, ks, parts_, tickets_);
  FPLAB_CUDA_LAUNCHED("gemm_fma_chains<last_folds>");
}

void GpuGemm::launch(const GemmPlan& plan) { launch(plan, a_, b_, c_); }

const char* GpuGemm::form_name(OrderedForm form) {
  switch (form) {
    case OrderedForm::by_shape:
      return "by shape";
    case OrderedForm::last_folds:
      return "last folds";
    case OrderedForm::two_passes:
      return "two passes";
    case OrderedForm::serial:
      return "serial";
  }
  return "?";
}

// The ordered combine, by shape (the bits are the same; times in docs/results/gpu.md, section 8,
// where gpu_gemm_bench times every form on every shape):
// - very few output tiles (<= 4), all blocks resident at once: the parts finish together and the
//   last part of a tile to finish folds the others' (last_folds), saving the second launch; with
//   more tiles that one-block-per-tile fold is slower than a second kernel spread over all outputs;
//   and parts of >= 128 of K that the thin tile takes go to two_passes even so (H200, 2026-11-29:
//   a ResNet-18's stem weight gradient, 27 x 64 x 131072 in 16 parts, 0.79 ms as last_folds in 16
//   blocks of 64 x 64 outputs on 16 of 132 SMs, 0.09 ms so);
// - parts of >= 128 of K: parts to a workspace and a second kernel folding them in order
//   (two_passes) cost a few percent at most, whether or not the grid fits on the chip;
// - shorter parts whose chains the wide-tile kernel runs (gpu_gemm_tiled.hpp): two_passes too, its
//   chains faster than the others' 64 x 64 ones by more than the second pass costs (H100,
//   2026-11-24: 4608x512x1024 in 16 parts 0.220 ms against serial's 0.255, 1024x1024x4096 in 64 parts
//   0.357 against 0.449);
// - shorter parts, all blocks resident: last_folds;
// - shorter parts, more blocks: the workspace would be as many bytes as the compute is flops; the
//   parts add themselves into C in turn (serial), C staying in L2. This is where determinism
//   costs most; the alternatives to serial that were timed and dropped, and why, are listed in
//   docs/results/gpu.md, "The numbers behind sim/cuda's comments".
GpuGemm::OrderedForm GpuGemm::ordered_form(const GemmPlan& plan) const { return ordered_form(plan, a_, b_); }

GpuGemm::OrderedForm GpuGemm::ordered_form(const GemmPlan& plan, const float* a, const float* b) const {
  if (forced_ != OrderedForm::by_shape) return forced_;
  const auto kk = static_cast<int64_t>(shape_.k);
  const KParts ks = plan.k_parts(kk);
  const int64_t count = ks.count(kk);
  const int64_t tiles = ((static_cast<int64_t>(shape_.n) + kTileN - 1) / kTileN) *
                        ((static_cast<int64_t>(shape_.m) + kTileM - 1) / kTileM);
  const bool fits = tiles * count <= resident_blocks();
  // Long parts of a few tiles: their chains, not the second launch, are the time; the thin tile's
  // two passes run them in 16 times the blocks.
  const detail::ChainTile tile = tile_for(plan, a, b);
  const bool long_thin = ks.chunk >= 128 && (tile == detail::ChainTile::t16x32 || tile == detail::ChainTile::t32x64);
  if (fits && tiles <= 4 && !long_thin) return OrderedForm::last_folds;
  if (ks.chunk >= 128 || detail::chain_tile_shape(detail::ChainTile::t128x64, static_cast<int64_t>(shape_.m),
                                                   static_cast<int64_t>(shape_.n), kk, ks))
    return OrderedForm::two_passes;
  return fits ? OrderedForm::last_folds : OrderedForm::serial;
}

// A batch's tile: the thin one wherever one entry's shape would take it among the wide and thin
// tiles (one launch of thin tiles for the batch beats a launch of medium tiles an entry).
detail::ChainTile GpuGemm::batched_tile(const GemmPlan& plan, const float* a, const float* b) const {
  if (forced_tile_) return tile_for(plan, a, b);
  const auto kk = static_cast<int64_t>(shape_.k);
  return detail::wide_tile_for(a, b, static_cast<int64_t>(shape_.m), static_cast<int64_t>(shape_.n), kk,
                               plan.k_parts(kk), 1);
}

detail::ChainTile GpuGemm::tile_for(const GemmPlan& plan, const float* a, const float* b) const {
  const auto [m, n, k] = shape_;
  const auto kk = static_cast<int64_t>(k), nn = static_cast<int64_t>(n);
  const KParts ks = plan.k_parts(kk);
  if (forced_tile_)
    return detail::chain_tile_fits(*forced_tile_, a, b, static_cast<int64_t>(m), nn, kk, ks) ? *forced_tile_
                                                                                            : detail::ChainTile::none;
  return detail::chain_tile_for(a, b, static_cast<int64_t>(m), nn, kk, ks, ks.count(kk));
}

int64_t GpuGemm::resident_blocks() {
  static const int64_t blocks = [] {
    int per_sm = 0;
    FPLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, gemm_fma_chains<Out::serial>, kThreads, 0));
    return static_cast<int64_t>(per_sm) * current_sm_count();
  }();
  return blocks;
}

void GpuGemm::run(const GemmPlan& plan, float* c) {
  launch(plan);
  const size_t mn = shape_.m * shape_.n;
  if (mn) FPLAB_CUDA(cudaMemcpy(c, c_, mn * sizeof(float), cudaMemcpyDeviceToHost));
}

double GpuGemmProbe::time_ms(GpuGemm& gemm, const GemmPlan& plan, int reps) {
  return detail::median_ms([&] { gemm.launch(plan); }, reps, 1);
}

void GpuGemmProbe::force_ordered_form(GpuGemm& gemm, GpuGemm::OrderedForm form) { gemm.forced_ = form; }

void GpuGemmProbe::force_tile(GpuGemm& gemm, std::optional<detail::ChainTile> tile) { gemm.forced_tile_ = tile; }

detail::ChainTile GpuGemmProbe::tile(const GpuGemm& gemm, const GemmPlan& plan) {
  // Only chains written out run in the tiled kernels; the ordered forms that fold parts in the
  // kernel (last folds, serial) are the 64 x 64 kernel's.
  const auto k = static_cast<int64_t>(gemm.shape_.k);
  const bool written_out = plan.part_count(k) <= 1 || plan.combine != GemmPlan::Combine::seq ||
                           gemm.ordered_form(plan) == GpuGemm::OrderedForm::two_passes;
  return written_out ? gemm.tile_for(plan, gemm.a_, gemm.b_) : detail::ChainTile::none;
}

std::vector<GpuGemmProbe::SerialBlock> GpuGemmProbe::serial_timeline(GpuGemm& g, const GemmPlan& plan) {
  const auto [m, n, k] = g.shape_;
  const auto kk = static_cast<int64_t>(k);
  const KParts ks = plan.k_parts(kk);
  const int64_t count = ks.count(kk);
  if (m * n == 0 || k == 0 || count < 2 || plan.combine != GemmPlan::Combine::seq)
    throw NotRealisable("serial_timeline: an ordered split-K of at least two parts");
  const GpuGemm::OrderedForm before = g.forced_;
  g.forced_ = GpuGemm::OrderedForm::serial;
  g.launch(plan);  // the flags allocated, and a warm-up
  g.forced_ = before;
  const dim3 grid(blocks_for(static_cast<int64_t>(n), kTileN), blocks_for(static_cast<int64_t>(m), kTileM),
                  static_cast<unsigned>(count));
  const size_t blocks = static_cast<size_t>(grid.x) * grid.y * grid.z;
  grow(g.parts_, g.parts_capacity_, 12 * blocks);  // 6 unsigned long long a block
  gemm_fma_chains<Out::serial_timed>
      <<<grid, kThreads>>>(g.a_, g.b_, g.c_, static_cast<int>(m), static_cast<int>(n), kk, ks, g.parts_, g.tickets_);
  FPLAB_CUDA_LAUNCHED("gemm_fma_chains<serial_timed>");
  std::vector<unsigned long long> raw(6 * blocks);
  FPLAB_CUDA(cudaMemcpy(raw.data(), g.parts_, raw.size() * sizeof(unsigned long long), cudaMemcpyDeviceToHost));
  std::vector<SerialBlock> out(blocks);
  const size_t tiles = static_cast<size_t>(grid.x) * grid.y;
  for (size_t b = 0; b < blocks; ++b) {
    const unsigned long long* r = &raw[6 * b];
    out[b] = {
        static_cast<int>(b / tiles), static_cast<int>(b % tiles), r[0], r[1], r[3] - r[2], r[4] - r[3], r[5] - r[4]};
  }
  return out;
}

void gemm(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape, bool rounded_products) {
  GemmPlan plan = plan_gemm(schedule);
  plan.rounded_products = rounded_products;
  GpuGemm gpu(a, b, shape);
  gpu.run(plan, c);
}

void gemm_batched(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape, size_t batches) {
  const GemmPlan plan = plan_gemm(schedule);
  const size_t a_floats = shape.m * shape.k, b_floats = shape.k * shape.n, c_floats = shape.m * shape.n;
  DeviceBuffer da, db, dc;
  float* a_on = da.reserve<float>(batches * a_floats);
  float* b_on = db.reserve<float>(batches * b_floats);
  float* c_on = dc.reserve<float>(batches * c_floats);
  FPLAB_CUDA(cudaMemcpy(a_on, a, batches * a_floats * sizeof(float), cudaMemcpyHostToDevice));
  FPLAB_CUDA(cudaMemcpy(b_on, b, batches * b_floats * sizeof(float), cudaMemcpyHostToDevice));
  GpuGemm gpu;
  gpu.run_batched_on_device(plan, a_on, b_on, c_on, shape, batches, static_cast<int64_t>(a_floats),
                            static_cast<int64_t>(b_floats));
  FPLAB_CUDA(cudaMemcpy(c, c_on, batches * c_floats * sizeof(float), cudaMemcpyDeviceToHost));
}

// The seeded combine's parts take count x rows x n floats (p100's input gradients of a ResNet-18
// at batch 128: 32 x 401408 x 576, 30 GB): a GEMM whose parts would pass this runs in slabs of
// whole output tiles' rows, each its own GEMM and fold; the tiles' keys stay the whole GEMM's.
constexpr size_t kSeededPartsBudget = size_t{64} << 20;  // floats: 256 MiB

void GpuGemm::launch_seeded(const GemmPlan& plan, GpuSeededReduction& fold, const NoiseKey& key, const float* a,
                            const float* b, float* c) {
  const GemmShape whole = shape_;
  const int64_t count = whole.k ? plan.part_count(static_cast<int64_t>(whole.k)) : 1;
  size_t slab = whole.m;
  if (count > 1 && whole.n > 0) {
    const size_t rows = kSeededPartsBudget / (static_cast<size_t>(count) * whole.n);
    slab = std::max<size_t>(kGemmTileRows, rows / kGemmTileRows * kGemmTileRows);
  }
  for (size_t row = 0; row < whole.m; row += slab) {
    shape_ = {std::min(slab, whole.m - row), whole.n, whole.k};
    const SeededCombine seeded{&fold, key, row};
    launch(plan, a + row * whole.k, b, c + row * whole.n, &seeded);
  }
  shape_ = whole;
}

void GpuGemm::run_seeded(const GemmPlan& plan, GpuSeededReduction& fold, const NoiseKey& key, float* c) {
  launch_seeded(plan, fold, key, a_, b_, c_);
  const size_t mn = shape_.m * shape_.n;
  if (mn) FPLAB_CUDA(cudaMemcpy(c, c_, mn * sizeof(float), cudaMemcpyDeviceToHost));
}

void gemm_seeded(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                 const NoiseKey& key, bool rounded_products) {
  GemmPlan plan = plan_gemm(schedule);
  plan.rounded_products = rounded_products;
  GpuGemm gpu(a, b, shape);
  GpuSeededReduction fold;
  gpu.run_seeded(plan, fold, key, c);
}

void GpuGemm::run_unified(const GemmPlan& plan, const float* a, const float* b, float* c, GemmShape shape) {
  auto copy = [](float* to, const float* from, size_t count) {
    if (count) FPLAB_CUDA(cudaMemcpy(to, from, count * sizeof(float), cudaMemcpyDefault));
  };
  shape_ = shape;
  const size_t mk = shape.m * shape.k, kn = shape.k * shape.n, mn = shape.m * shape.n;
  grow(a_, a_capacity_, mk);
  grow(b_, b_capacity_, kn);
  grow(c_, c_capacity_, mn);
  copy(a_, a, mk);
  copy(b_, b, kn);
  launch(plan);
  copy(c, c_, mn);
}

size_t GpuGemm::workspace_bytes() const {
  return (a_capacity_ + b_capacity_ + c_capacity_ + parts_capacity_) * sizeof(float) +
         tickets_capacity_ * sizeof(unsigned) + k_order_.workspace_bytes();
}

void GpuGemm::run_on_device(const GemmPlan& plan, const float* a, const float* b, float* c, GemmShape shape) {
  shape_ = shape;
  launch(plan, a, b, c);
}

void GpuGemm::run_batched_on_device(const GemmPlan& plan, const float* a, const float* b, float* c, GemmShape shape,
                                    size_t batches, int64_t a_step, int64_t b_step) {
  shape_ = shape;
  const auto kk = static_cast<int64_t>(shape.k);
  const KParts ks = plan.k_parts(kk);
  const bool one_chain = plan.deterministic() && ks.count(kk) == 1 && plan.k_order(kk).empty();
  const bool steps_aligned = a_step % 4 == 0 && b_step % 4 == 0;
  if (one_chain && steps_aligned && batches <= 65535 && shape.m * shape.n > 0 && kk > 0 &&
      reinterpret_cast<uintptr_t>(c) % 16 == 0 && batched_tile(plan, a, b) == detail::ChainTile::t16x32) {
    detail::launch_thin_batched(plan.rounded_products, a, b, c, static_cast<int>(shape.m), static_cast<int>(shape.n),
                                kk, static_cast<unsigned>(batches), a_step, b_step);
    return;
  }
  const size_t mn = shape.m * shape.n;
  for (size_t z = 0; z < batches; ++z) run_on_device(plan, a + z * a_step, b + z * b_step, c + z * mn, shape);
}

void GpuGemm::run_seeded_on_device(const GemmPlan& plan, GpuSeededReduction& fold, const NoiseKey& key,
                                   const float* a, const float* b, float* c, GemmShape shape) {
  shape_ = shape;
  launch_seeded(plan, fold, key, a, b, c);
}

}  // namespace fplab::sim::gpu
