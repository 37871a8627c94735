// The reduction kernel: one template per (accumulators a thread, warp order, fold kind), the
// block and grid orders chosen at run time. Every addition is __fadd_rn (no contraction, no
// reassociation; the build adds -fmad=false -ftz=false as well).
//
// Assumption that makes a partly empty grid exact: -0 is the identity of round-to-nearest
// addition (x + -0 == x for every x an addition gives, +0 and -0 included; a NaN term already
// became the canonical NaN in the addition that took it in), so a thread, lane, warp or block with
// no terms holds -0 and changes no bit of what the terms that exist add up to. That is why the
// kernel may run the full warp shuffle where the schedule's last group has fewer than 32 members.
#include <algorithm>
#include <stdexcept>
#include <cstring>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/cuda/cuda_check.cuh"
#include "sim/cuda/gpu_device.hpp"
#include "sim/cuda/fast_divide.hpp"
#include "sim/cuda/gpu_reduce.hpp"

namespace fplab::sim::gpu {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;

enum class Mode : int {
  result,  // the block is the whole grid: write its result
  store,   // write the block partial (a second pass follows)
  seq,     // write the partial; the last block to finish folds all partials in block order
  atomic,  // atomicAdd the partial into the result
};

// Where a strided pass reads its terms from a tensor (batch, segments, P) rather than from
// segments laid out one after another (BatchNorm's planes, without the copy into segments): the
// segment's x (x + y·ld, ld = P) holds its first image's plane, term i lies at x[(i / P)·image
// + i % P]; `centred`: each term squared about the segment's mean, (x − sums[y] / count)², both
// roundings as batch_norm_segments' centred squares.
struct PlanesRead {
  bool on = false;
  FastDivide positions;         // P
  int64_t image = 0;            // floats from one image's plane of a segment to the next's: segments·P
  const float* sums = nullptr;  // centred: Σx per segment (result-indexed as the launch's segments)
  float count = 0;
};

// One pass over gridDim.y segments at once: segment y's terms are x[y * ld ...] (n of them), its
// block partials partials[y * gridDim.x ...], its ticket ticket[y], its result result[y].
struct PassArgs {
  const float* x;
  int64_t n;
  int64_t ld;     // floats from one segment's terms to the next's
  int64_t chunk;  // contiguous folds
  // Strided folds: the plan's grid of B blocks. Fewer blocks may run (launch_reduction: those past
  // the last term would only give -0 partials).
  int64_t grid_blocks;
  // Strided folds: P = T·B threads, which sets the stride V·P; threads past P (a one-warp pass of
  // fewer) hold -0.
  int64_t threads;
  int warps;
  BlockOrder block;
  Mode mode;
  float* partials;
  unsigned* ticket;
  float* result;
  int32_t* ticket_order;  // recorded when not null
  float* old_values;      // atomic: what each block's atomicAdd returned (recorded when not null)
  // A fused dot (reduce_pass<..., true> only): term i is x[i]·y[i], fused into the thread's chain
  // (fmaf), segment y's second operand at y + segment * ld.
  const float* y = nullptr;
  PlanesRead planes = {};  // strided vector folds only (GpuSegmentedReduction::run_planes_in_place)
};

template <WarpOrder O>
__device__ __forceinline__ float warp_reduce(float v) {
  if constexpr (O == WarpOrder::shfl_down) {
#pragma unroll
    for (int o = 16; o >= 1; o /= 2) v = __fadd_rn(v, __shfl_down_sync(kFullMask, v, o));
  } else if constexpr (O == WarpOrder::shfl_up) {
    // CUB's pairing: offsets 1, 2, 4, ...; lane i (a multiple of 2o) adds lane i + o.
#pragma unroll
    for (int o = 1; o <= 16; o *= 2) v = __fadd_rn(v, __shfl_down_sync(kFullMask, v, o));
  } else if constexpr (O == WarpOrder::shfl_xor) {
#pragma unroll
    for (int o = 16; o >= 1; o /= 2) v = __fadd_rn(v, __shfl_xor_sync(kFullMask, v, o));
  } else {
    // seq: lane 0 folds lanes 1 .. 31 into its own value in lane order (every lane runs the
    // loop so that the shuffles have all 32 lanes; only lane 0's sum is used).
    const float mine = v;
#pragma unroll
    for (int l = 1; l < 32; ++l) v = __fadd_rn(v, __shfl_sync(kFullMask, mine, l));
  }
  return v;  // lane 0 holds the schedule's value
}

// Warp 0 combines the block's warp results; lane 0's value is the block partial.
__device__ float combine_warps(BlockOrder order, const float* warp_sums, int warps, int lane) {
  if (order == BlockOrder::seq) {
    float s = warp_sums[0];
    for (int w = 1; w < warps; ++w) s = __fadd_rn(s, warp_sums[w]);
    return s;
  }
  const float v = lane < warps ? warp_sums[lane] : -0.0f;
  switch (order) {
    case BlockOrder::shfl_down:
      return warp_reduce<WarpOrder::shfl_down>(v);
    case BlockOrder::shfl_up:
      return warp_reduce<WarpOrder::shfl_up>(v);
    default:
      return warp_reduce<WarpOrder::shfl_xor>(v);
  }
}

template <int V>
struct Terms {
  float v[V];
};

// V consecutive terms from p (aligned to V floats, V*4 bytes up to 16): one 4-, 8- or 16-byte load.
template <int V>
__device__ __forceinline__ Terms<V> load(const float* p) {
  Terms<V> t;
  if constexpr (V == 1) {
    t.v[0] = __ldg(p);
  } else if constexpr (V == 2) {
    const float2 a = __ldg(reinterpret_cast<const float2*>(p));
    t.v[0] = a.x, t.v[1] = a.y;
  } else {
#pragma unroll
    for (int h = 0; h < V / 4; ++h) {
      const float4 a = __ldg(reinterpret_cast<const float4*>(p) + h);
      t.v[4 * h] = a.x, t.v[4 * h + 1] = a.y, t.v[4 * h + 2] = a.z, t.v[4 * h + 3] = a.w;
    }
  }
  return t;
}

// V consecutive terms from term i of a segment whose terms start at x (PlanesRead: x its first
// plane; V divides P, so that the V terms share one plane), squared about `mean` where centred.
template <int V>
__device__ __forceinline__ Terms<V> fetch(const PassArgs& a, const float* x, int64_t i, float mean) {
  if (!a.planes.on) return load<V>(x + i);
  const uint32_t image = a.planes.positions.quotient(static_cast<uint32_t>(i));
  Terms<V> t = load<V>(x + image * a.planes.image + (static_cast<uint32_t>(i) - image * a.planes.positions.divisor()));
  if (a.planes.sums) {
#pragma unroll
    for (int j = 0; j < V; ++j) {
      const float d = __fsub_rn(t.v[j], mean);
      t.v[j] = __fmul_rn(d, d);
    }
  }
  return t;
}

// How a thread takes its terms (BlockPass: contiguous, vector or interleaved accumulators).
enum class Fold : uint8_t { contiguous, vector, interleaved };

// A fused dot's thread fold (one accumulator, strided): thread t's chain takes the products of
// the terms t + k*P in order, each fused into the sum (fmaf: one rounding), as sim::gemm's chains
// with products = "fused" do.
__device__ __forceinline__ float thread_dot(const PassArgs& a, const float* x, const float* y) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (t >= a.threads) return -0.0f;
  float acc = -0.0f;
  for (int64_t i = t; i < a.n; i += a.threads) acc = __fmaf_rn(__ldg(x + i), __ldg(y + i), acc);
  return acc;
}

// A thread's fold. Strided: accumulator j of thread t folds the terms V*t + j + k*V*P in order
// (the residue classes of strided(V*P)), then the accumulators are added in order (contig(V):seq);
// interleaved, the terms t + j*P + k*V*P (strided(V*P):seq | strided(P):seq).
// Contiguous: the terms t*G .. t*G + G - 1 in order.
template <int V, Fold F>
__device__ __forceinline__ float thread_fold(const PassArgs& a, const float* x) {
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if constexpr (F == Fold::interleaved) {
    if (t >= a.threads) return -0.0f;
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = -0.0f;
    const int64_t p = a.threads, stride = static_cast<int64_t>(V) * p;
    int64_t base = t;
    for (; base + (V - 1) * p < a.n; base += stride) {  // scalar loads, coalesced across the threads
      float r[V];
#pragma unroll
      for (int j = 0; j < V; ++j) r[j] = __ldg(x + base + j * p);
#pragma unroll
      for (int j = 0; j < V; ++j) acc[j] = __fadd_rn(acc[j], r[j]);
    }
#pragma unroll
    for (int j = 0; j < V; ++j)
      if (base + j * p < a.n) acc[j] = __fadd_rn(acc[j], __ldg(x + base + j * p));
    float v = acc[0];
#pragma unroll
    for (int j = 1; j < V; ++j) v = __fadd_rn(v, acc[j]);
    return v;
  } else if constexpr (F == Fold::contiguous) {
    float acc = -0.0f;
    const int64_t begin = t * a.chunk, end = begin + a.chunk < a.n ? begin + a.chunk : a.n;
    for (int64_t i = begin; i < end; ++i) acc = __fadd_rn(acc, __ldg(x + i));
    return acc;
  } else {
    float acc[V];
#pragma unroll
    for (int j = 0; j < V; ++j) acc[j] = -0.0f;
    // U loads in flight before their additions (in order): enough bytes moving to fill HBM.
    constexpr int U = V == 1 ? 8 : V == 8 ? 2 : 4;
    if (t >= a.threads) return -0.0f;
    const float mean = a.planes.sums ? __fdiv_rn(a.planes.sums[blockIdx.y], a.planes.count) : 0.0f;
    const int64_t stride = static_cast<int64_t>(V) * a.threads;
    int64_t base = V * t;
    for (; base + (U - 1) * stride + V <= a.n; base += U * stride) {
      Terms<V> r[U];
#pragma unroll
      for (int u = 0; u < U; ++u) r[u] = fetch<V>(a, x, base + u * stride, mean);
#pragma unroll
      for (int u = 0; u < U; ++u)
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = __fadd_rn(acc[j], r[u].v[j]);
    }
    for (; base < a.n; base += stride) {
      if (base + V <= a.n) {
        const Terms<V> r = fetch<V>(a, x, base, mean);
#pragma unroll
        for (int j = 0; j < V; ++j) acc[j] = __fadd_rn(acc[j], r.v[j]);
      } else {
#pragma unroll
        for (int j = 0; j < V; ++j)
          if (base + j < a.n) acc[j] = __fadd_rn(acc[j], fetch<1>(a, x, base + j, mean).v[0]);
      }
    }
    float v = acc[0];
#pragma unroll
    for (int j = 1; j < V; ++j) v = __fadd_rn(v, acc[j]);
    return v;
  }
}

// `all:seq` (chunk >= n: thread 0 alone holds every term), one warp a segment. Its chain of
// additions cannot be shortened, but its terms can arrive faster than one thread loads them: the
// warp stages windows of the segment through shared memory (coalesced loads, the next window's in
// flight while lane 0 adds this one), and lane 0 adds each window in order, reading it as float4
// groups of 32 terms, the next group's loads issued before this group's additions so that no
// addition waits for shared memory. The window past the last term is filled with -0, the identity
// (above). A thread loading its own terms waits a memory round trip every few additions: a
// BatchNorm sum of 131072 terms took about 3.5 ms on an H100; staged, with lane 0 reading one term
// at a time, 0.41 ms on an H200, and with the groups 0.32 ms, where the chain of dependent
// additions alone is 0.29 ms (docs/results/torch_emulate.md). Its own kernel: under reduce_pass's
// bound of 1024 threads (64 registers) the same fold took 0.75 ms on the H100.
// The block's result is lane 0's sum whatever the plan's warp and block orders (every other lane
// and warp would add -0); it is the segment's result or its one block partial (mode result or
// store: a one-block grid).
constexpr int kSerialLoadsPerLane = 16;
constexpr int kSerialWindow = 32 * kSerialLoadsPerLane;
constexpr int kSerialGroup = 32;  // terms lane 0 holds in registers, as 8 float4

__global__ void __launch_bounds__(32) serial_pass(PassArgs a) {
  __shared__ __align__(16) float stage[2][kSerialWindow];  // two: lane 0 may still read one while the next is stored
  const int lane = threadIdx.x;
  const int64_t n = a.n;
  const float* __restrict__ x = a.x + static_cast<int64_t>(blockIdx.y) * a.ld;
  float next[kSerialLoadsPerLane];
  const auto fetch = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kSerialLoadsPerLane; ++u) {
      const int64_t i = base + u * 32 + lane;
      next[u] = i < n ? __ldg(x + i) : -0.0f;
    }
  };
  float acc = -0.0f;
  fetch(0);
  int w = 0;
  for (int64_t base = 0; base < n; base += kSerialWindow, w ^= 1) {
#pragma unroll
    for (int u = 0; u < kSerialLoadsPerLane; ++u) stage[w][u * 32 + lane] = next[u];
    __syncwarp();
    if (base + kSerialWindow < n) fetch(base + kSerialWindow);
    if (lane == 0) {
      constexpr int kQuads = kSerialGroup / 4, kGroups = kSerialWindow / kSerialGroup;
      const float4* const window = reinterpret_cast<const float4*>(stage[w]);
      float4 now[kQuads], ahead[kQuads];
#pragma unroll
      for (int q = 0; q < kQuads; ++q) now[q] = window[q];
#pragma unroll
      for (int g = 0; g < kGroups; ++g) {
        if (g + 1 < kGroups) {
#pragma unroll
          for (int q = 0; q < kQuads; ++q) ahead[q] = window[(g + 1) * kQuads + q];
        }
#pragma unroll
        for (int q = 0; q < kQuads; ++q) {
          acc = __fadd_rn(acc, now[q].x);
          acc = __fadd_rn(acc, now[q].y);
          acc = __fadd_rn(acc, now[q].z);
          acc = __fadd_rn(acc, now[q].w);
        }
#pragma unroll
        for (int q = 0; q < kQuads; ++q) now[q] = ahead[q];
      }
    }
  }
  if (lane != 0) return;
  if (a.mode == Mode::result)
    a.result[blockIdx.y] = acc;
  else
    a.partials[blockIdx.y] = acc;  // store: gridDim.x == 1 partial a segment
}

// A strided pass of at most 32 threads (one warp, one block a segment: PyTorch's sums over a
// strided dimension, `strided(16):seq | strided(4):seq | all:shfl_down` of 4 threads) over a long
// segment. Loading their own terms, those few threads wait a memory round trip every few
// additions: a BatchNorm gradient's 131072 terms under that schedule took about 1 ms on an H200
// (docs/results/torch_emulate.md). Here a block of kStagers threads stages windows of the segment
// through shared memory (coalesced, the next window's loads in flight while this one is folded),
// and the pass's P threads fold each window from there: thread t's accumulator j takes the same
// terms in the same order as thread_fold's. A window holds whole rounds of V·P terms, so that a
// term's place in it says its thread and accumulator; past the last term it holds -0, the identity.
// Then warp 0 finishes as reduce_pass does (one warp: its combine_warps is the plan's).
constexpr int kStagers = 256;
constexpr int kStagedWindow = 2048;  // terms a window holds at most (a multiple of V·P <= it)
constexpr int64_t kStagedMinTerms = 4096;  // shorter segments: reduce_pass's own loads are as quick

template <int V, WarpOrder O, Fold F>
__global__ void __launch_bounds__(kStagers) staged_pass(PassArgs a) {
  static_assert(F == Fold::interleaved || F == Fold::vector);
  __shared__ float stage[2][kStagedWindow];
  __shared__ float warp_sums[32];
  const int t = threadIdx.x;
  const int64_t p = a.threads, round = static_cast<int64_t>(V) * p, n = a.n;
  const int64_t window = kStagedWindow / round * round;
  const float* __restrict__ x = a.x + static_cast<int64_t>(blockIdx.y) * a.ld;
  constexpr int kLoads = kStagedWindow / kStagers;
  float next[kLoads];
  const auto fetch = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) {
      const int64_t i = u * kStagers + t;
      next[u] = i < window && base + i < n ? __ldg(x + base + i) : -0.0f;
    }
  };
  float acc[V];
#pragma unroll
  for (int j = 0; j < V; ++j) acc[j] = -0.0f;
  fetch(0);
  int w = 0;
  for (int64_t base = 0; base < n; base += window, w ^= 1) {
#pragma unroll
    for (int u = 0; u < kLoads; ++u) stage[w][u * kStagers + t] = next[u];
    __syncthreads();  // this window stored; the one before it (same buffer two rounds ago) folded
    if (base + window < n) fetch(base + window);
    if (t < p) {
      const float* const terms = stage[w];
      const int64_t rounds = window / round;
#pragma unroll 4
      for (int64_t k = 0; k < rounds; ++k)
#pragma unroll
        for (int j = 0; j < V; ++j) {
          // interleaved: t + j·P + k·V·P; vector: V·t + j + k·V·P (thread_fold's terms)
          const int64_t at = F == Fold::interleaved ? t + j * p + k * round : V * t + j + k * round;
          acc[j] = __fadd_rn(acc[j], terms[at]);
        }
    }
  }
  float v = acc[0];
#pragma unroll
  for (int j = 1; j < V; ++j) v = __fadd_rn(v, acc[j]);
  if (t >= 32) return;
  const float mine = warp_reduce<O>(t < p ? v : -0.0f);
  if (t == 0) warp_sums[0] = mine;
  __syncwarp();
  const float partial = combine_warps(a.block, warp_sums, a.warps, t);
  if (t != 0) return;
  if (a.mode == Mode::result)
    a.result[blockIdx.y] = partial;
  else
    a.partials[blockIdx.y] = partial;  // store: gridDim.x == 1 partial a segment
}

// The last block's fold of every block partial, in block order: the partials are staged through
// shared memory by all its threads (coalesced, all loads in flight at once), and thread 0 adds
// them from there. Reading them one by one from L2 instead costs an L2 round trip per handful
// of partials, a visible share of a whole sum (docs/results/gpu.md, "The numbers behind
// sim/cuda's comments").
constexpr int kStage = 2048;

__device__ float fold_partials_in_order(const float* partials, unsigned count, float* stage) {
  float s = -0.0f;
  for (unsigned base = 0; base < count; base += kStage) {
    const unsigned n = count - base < kStage ? count - base : kStage;
    for (unsigned i = threadIdx.x; i < n; i += blockDim.x) stage[i] = __ldcg(partials + base + i);
    __syncthreads();
    if (threadIdx.x == 0) {
#pragma unroll 16
      for (unsigned i = 0; i < n; ++i) s = __fadd_rn(s, stage[i]);
    }
    __syncthreads();
  }
  return s;  // thread 0's
}

template <int V, WarpOrder O, Fold F, bool Dot = false>
__global__ void __launch_bounds__(1024) reduce_pass(PassArgs a) {
  __shared__ float warp_sums[32];
  __shared__ float stage[kStage];
  __shared__ bool last;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const unsigned segment = blockIdx.y;
  float folded;
  if constexpr (Dot)
    folded = thread_dot(a, a.x + segment * a.ld, a.y + segment * a.ld);
  else
    folded = thread_fold<V, F>(a, a.x + segment * a.ld);
  const float mine = warp_reduce<O>(folded);
  float* const partials = a.partials + static_cast<int64_t>(segment) * gridDim.x;
  unsigned* const ticket_counter = a.ticket + segment;
  float* const result = a.result + segment;
  if (lane == 0) warp_sums[warp] = mine;
  __syncthreads();
  float partial = 0;
  if (warp == 0) partial = combine_warps(a.block, warp_sums, a.warps, lane);
  if (a.mode != Mode::seq) {
    if (threadIdx.x != 0) return;
    if (a.mode == Mode::result) {
      *result = partial;
    } else if (a.mode == Mode::store) {
      partials[blockIdx.x] = partial;
    } else if (a.ticket_order == nullptr) {
      atomicAdd(result, partial);
    } else {
      partials[blockIdx.x] = partial;
      const unsigned ticket = atomicAdd(ticket_counter, 1u);
      a.ticket_order[ticket] = static_cast<int32_t>(blockIdx.x);
      if (ticket == gridDim.x - 1) *ticket_counter = 0;  // every other block has its ticket: ready for the next launch
      a.old_values[blockIdx.x] = atomicAdd(result, partial);
    }
    return;
  }
  // Mode::seq: the classic "last block" pattern; each partial is fenced before its ticket, so the
  // block that draws the last ticket sees them all.
  if (threadIdx.x == 0) {
    partials[blockIdx.x] = partial;
    __threadfence();
    const unsigned ticket = atomicAdd(ticket_counter, 1u);
    if (a.ticket_order != nullptr) a.ticket_order[ticket] = static_cast<int32_t>(blockIdx.x);
    last = ticket == gridDim.x - 1;
  }
  __syncthreads();
  if (!last) return;
  __threadfence();
  const float sum = fold_partials_in_order(partials, gridDim.x, stage);
  if (threadIdx.x == 0) {
    *result = sum;
    *ticket_counter = 0;  // ready for the next launch
  }
}

__global__ void prepare_atomic(float* result, unsigned* ticket, unsigned segments) {
  for (unsigned y = threadIdx.x; y < segments; y += blockDim.x) {
    result[y] = -0.0f;
    ticket[y] = 0;
  }
}

using PassKernel = void (*)(PassArgs);

template <WarpOrder O>
PassKernel kernel_by_fold(const BlockPass& p) {
  if (p.contiguous) return reduce_pass<1, O, Fold::contiguous>;
  if (p.interleaved) {
    switch (p.vector) {
      case 2:
        return reduce_pass<2, O, Fold::interleaved>;
      case 4:
        return reduce_pass<4, O, Fold::interleaved>;
      case 8:
        return reduce_pass<8, O, Fold::interleaved>;
    }
  }
  switch (p.vector) {
    case 1:
      return reduce_pass<1, O, Fold::vector>;
    case 2:
      return reduce_pass<2, O, Fold::vector>;
    case 4:
      return reduce_pass<4, O, Fold::vector>;
    case 8:
      return reduce_pass<8, O, Fold::vector>;
  }
  throw NotRealisable("reduction pass with " + std::to_string(p.vector) + " accumulators a thread");
}

template <WarpOrder O>
PassKernel staged_kernel_by_fold(const BlockPass& p) {
  switch (p.vector * (p.interleaved ? -1 : 1)) {
    case 1:
    case -1:
      return staged_pass<1, O, Fold::vector>;
    case 2:
      return staged_pass<2, O, Fold::vector>;
    case 4:
      return staged_pass<4, O, Fold::vector>;
    case 8:
      return staged_pass<8, O, Fold::vector>;
    case -2:
      return staged_pass<2, O, Fold::interleaved>;
    case -4:
      return staged_pass<4, O, Fold::interleaved>;
    case -8:
      return staged_pass<8, O, Fold::interleaved>;
  }
  throw NotRealisable("reduction pass with " + std::to_string(p.vector) + " accumulators a thread");
}

PassKernel staged_kernel(const BlockPass& p) {
  switch (p.warp) {
    case WarpOrder::shfl_down:
      return staged_kernel_by_fold<WarpOrder::shfl_down>(p);
    case WarpOrder::shfl_up:
      return staged_kernel_by_fold<WarpOrder::shfl_up>(p);
    case WarpOrder::seq:
      return staged_kernel_by_fold<WarpOrder::seq>(p);
    case WarpOrder::shfl_xor:
      break;
  }
  return staged_kernel_by_fold<WarpOrder::shfl_xor>(p);
}

PassKernel pass_kernel(const BlockPass& p) {
  switch (p.warp) {
    case WarpOrder::shfl_down:
      return kernel_by_fold<WarpOrder::shfl_down>(p);
    case WarpOrder::shfl_up:
      return kernel_by_fold<WarpOrder::shfl_up>(p);
    case WarpOrder::seq:
      return kernel_by_fold<WarpOrder::seq>(p);
    case WarpOrder::shfl_xor:
      break;
  }
  return kernel_by_fold<WarpOrder::shfl_xor>(p);
}

// A fused dot's first pass (one accumulator a thread, strided: dot_pass_why_not).
PassKernel dot_kernel(const BlockPass& p) {
  switch (p.warp) {
    case WarpOrder::shfl_down:
      return reduce_pass<1, WarpOrder::shfl_down, Fold::vector, true>;
    case WarpOrder::shfl_up:
      return reduce_pass<1, WarpOrder::shfl_up, Fold::vector, true>;
    case WarpOrder::seq:
      return reduce_pass<1, WarpOrder::seq, Fold::vector, true>;
    case WarpOrder::shfl_xor:
      break;
  }
  return reduce_pass<1, WarpOrder::shfl_xor, Fold::vector, true>;
}

// The warps a pass launches a block: all of the plan's, but in a one-block grid only those whose
// threads hold a term. The others' warp results would be -0, which changes no combine of the warps
// (x + -0 == x; the block order folds or shuffles the launched warps' results alike), so short sums
// in many segments (global average pooling: 65536 channels of 16 terms) do not each run a block of
// idle threads: a.warps tells combine_warps how many there are.
PassArgs with_warps_holding_terms(const BlockPass& p, int64_t blocks, PassArgs a) {
  if (blocks != 1) return a;
  int64_t holding = 0;  // threads with a term: thread t's first term is t (interleaved, dots), V t or t G
  if (a.y != nullptr || (!p.contiguous && p.interleaved))
    holding = a.n;
  else if (p.contiguous)
    holding = (a.n + a.chunk - 1) / std::max<int64_t>(a.chunk, 1);
  else
    holding = (a.n + p.vector - 1) / p.vector;
  a.warps = static_cast<int>(std::clamp<int64_t>((holding + 31) / 32, 1, p.warps));
  return a;
}

void launch_pass(const BlockPass& p, int64_t blocks, unsigned segments, const PassArgs& all_warps) {
  const PassArgs a = with_warps_holding_terms(p, blocks, all_warps);
  const unsigned threads = 32u * static_cast<unsigned>(a.warps);
  if (a.y != nullptr) {
    dot_kernel(p)<<<dim3(static_cast<unsigned>(blocks), segments), threads>>>(a);
    FPLAB_CUDA_LAUNCHED("reduce_pass (dot)");
    return;
  }
  // (the serial and staged passes read segments only: planes go to reduce_pass's vector fold)
  if (!a.planes.on && p.contiguous && a.chunk >= a.n && blocks == 1 &&
      (a.mode == Mode::result || a.mode == Mode::store)) {
    serial_pass<<<dim3(1, segments), 32>>>(a);
    FPLAB_CUDA_LAUNCHED("serial_pass");
    return;
  }
  if (!a.planes.on && !p.contiguous && a.threads <= 32 && blocks == 1 && a.n >= kStagedMinTerms &&
      (a.mode == Mode::result || a.mode == Mode::store)) {
    staged_kernel(p)<<<dim3(1, segments), kStagers>>>(a);
    FPLAB_CUDA_LAUNCHED("staged_pass");
    return;
  }
  pass_kernel(p)<<<dim3(static_cast<unsigned>(blocks), segments), threads>>>(a);
  FPLAB_CUDA_LAUNCHED("reduce_pass");
}

// The chunk a contiguous pass's threads fold: G, or every term for `all:seq` (chunk 0).
int64_t chunk_of(const BlockPass& p, int64_t n) {
  return p.contiguous && p.chunk == 0 ? std::max<int64_t>(n, 1) : p.chunk;
}

// Every launch of a plan over `segments` segments of n terms (segment y at x + y * ld): the first
// pass, the atomic combine's preparation, the second pass. partials: segments * blocks floats;
// ticket and result: one per segment.
void launch_reduction(const ReductionPlan& plan, const float* x, int64_t n, int64_t ld, unsigned segments,
                      float* partials, unsigned* ticket, float* result, int32_t* ticket_order, float* old_values,
                      const float* y = nullptr, const PlanesRead& planes = {}) {
  const int64_t grid = plan.first.blocks(n);
  // A block whose threads hold no term gives the partial -0, which changes no sum it enters
  // (x + -0 == x for every x, zeros of either sign included), in order or in the second pass's
  // tree: a strided pass runs only the blocks up to the last that holds a term (a sum of 16 terms
  // under cub-sum(256,1056): 1 block, not 1056). A recorded run keeps the whole grid: its block
  // count is part of what it records.
  // The terms one block's threads start from: V consecutive each, or one each when interleaved.
  const int64_t per_block =
      static_cast<int64_t>(plan.first.interleaved ? 1 : plan.first.vector) * plan.first.threads_per_block();
  const int64_t blocks = plan.first.contiguous || ticket_order != nullptr
                             ? grid
                             : std::min(grid, std::max<int64_t>(1, (n + per_block - 1) / per_block));
  PassArgs a{x,
             n,
             ld,
             chunk_of(plan.first, n),
             grid,
             plan.first.grid_threads,
             plan.first.warps,
             plan.first.block,
             Mode::result,
             partials,
             ticket,
             result,
             ticket_order,
             old_values,
             y,
             planes};
  switch (plan.combine) {
    case GridCombine::single_block:
      a.mode = Mode::result;
      break;
    case GridCombine::seq:
      a.mode = Mode::seq;
      break;
    case GridCombine::atomic:
      a.mode = Mode::atomic;
      prepare_atomic<<<1, 256>>>(result, ticket, segments);
      FPLAB_CUDA_LAUNCHED("prepare_atomic");
      break;
    case GridCombine::second_pass:
      a.mode = Mode::store;
      break;
  }
  launch_pass(plan.first, blocks, segments, a);
  if (plan.combine == GridCombine::second_pass) {
    const PassArgs b{partials, blocks, blocks, 0, 1, plan.second.grid_threads, plan.second.warps, plan.second.block,
                     Mode::result, nullptr, ticket, result, nullptr, nullptr};
    launch_pass(plan.second, 1, segments, b);
  }
}

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

// Chain replay key: zeros of either sign are one value (the flushing atomic unit may return either).
uint32_t chain_key(float x) { return x == 0.0f ? 0u : bits(x); }

}  // namespace

GpuReduction::GpuReduction(std::span<const float> values) : n_(values.size()) {
  FPLAB_CUDA(cudaMalloc(&owned_, std::max<size_t>(n_, 1) * sizeof(float)));
  x_ = owned_;
  if (n_ > 0) FPLAB_CUDA(cudaMemcpy(owned_, values.data(), n_ * sizeof(float), cudaMemcpyHostToDevice));
  FPLAB_CUDA(cudaMalloc(&ticket_, sizeof(unsigned)));
  FPLAB_CUDA(cudaMemset(ticket_, 0, sizeof(unsigned)));
  FPLAB_CUDA(cudaMalloc(&result_, sizeof(float)));
}

GpuReduction::GpuReduction(const float* device_values, size_t n) : x_(device_values), n_(n) {
  FPLAB_CUDA(cudaMalloc(&ticket_, sizeof(unsigned)));
  FPLAB_CUDA(cudaMemset(ticket_, 0, sizeof(unsigned)));
  FPLAB_CUDA(cudaMalloc(&result_, sizeof(float)));
}

GpuReduction::~GpuReduction() {
  for (void* p : {static_cast<void*>(owned_), static_cast<void*>(partials_), static_cast<void*>(old_values_),
                  static_cast<void*>(ticket_order_), static_cast<void*>(ticket_), static_cast<void*>(result_)})
    if (p) cudaFree(p);
}

void GpuReduction::reserve(int64_t blocks) {
  if (blocks <= capacity_) return;
  for (void* p : {static_cast<void*>(partials_), static_cast<void*>(old_values_), static_cast<void*>(ticket_order_)})
    if (p) FPLAB_CUDA(cudaFree(p));
  FPLAB_CUDA(cudaMalloc(&partials_, blocks * sizeof(float)));
  FPLAB_CUDA(cudaMalloc(&old_values_, blocks * sizeof(float)));
  FPLAB_CUDA(cudaMalloc(&ticket_order_, blocks * sizeof(int32_t)));
  capacity_ = blocks;
}

void GpuReduction::launch(const ReductionPlan& plan) { launch(plan, false); }

void GpuReduction::launch(const ReductionPlan& plan, bool record) {
  const auto n = static_cast<int64_t>(n_);
  const int64_t blocks = plan.first.blocks(n);
  if (plan.first.vector > 1 && !plan.first.interleaved &&
      reinterpret_cast<uintptr_t>(x_) % (4 * std::min(plan.first.vector, 4)) != 0)
    throw CudaError("GpuReduction: the values are not aligned for " + std::to_string(plan.first.vector) +
                    "-wide loads");
  reserve(blocks);
  launch_reduction(plan, x_, n, 0, 1, partials_, ticket_, result_, record ? ticket_order_ : nullptr,
                   record ? old_values_ : nullptr);
}

float GpuReduction::result() const {
  float r = 0;
  FPLAB_CUDA(cudaMemcpy(&r, result_, sizeof r, cudaMemcpyDeviceToHost));
  return r;
}

float GpuReduction::run(const ReductionPlan& plan) {
  launch(plan, false);
  return result();
}

RecordedRun GpuReduction::run_recorded(const ReductionPlan& plan) {
  const bool recordable = plan.combine == GridCombine::seq || plan.combine == GridCombine::atomic;
  launch(plan, recordable);
  RecordedRun run;
  run.result = result();
  if (!recordable) return run;
  const auto blocks = static_cast<size_t>(plan.first.blocks(static_cast<int64_t>(n_)));
  run.partials.resize(blocks);
  run.ticket_order.resize(blocks);
  FPLAB_CUDA(cudaMemcpy(run.partials.data(), partials_, blocks * sizeof(float), cudaMemcpyDeviceToHost));
  FPLAB_CUDA(cudaMemcpy(run.ticket_order.data(), ticket_order_, blocks * sizeof(int32_t), cudaMemcpyDeviceToHost));
  if (plan.combine != GridCombine::atomic) return run;
  std::vector<float> old(blocks);
  FPLAB_CUDA(cudaMemcpy(old.data(), old_values_, blocks * sizeof(float), cudaMemcpyDeviceToHost));
  // Replay the chain: start from -0; the next block is one whose atomicAdd returned the running
  // sum. Among several, those whose partial leaves the sum unchanged (empty blocks) go first, or
  // the one that changes it would strand them; between such blocks the order is not observable,
  // so the chain is exact up to it (the earliest ticket is taken).
  std::vector<size_t> ticket_of(blocks);
  for (size_t k = 0; k < blocks; ++k) ticket_of[static_cast<size_t>(run.ticket_order[k])] = k;
  std::unordered_multimap<uint32_t, int32_t> by_old;
  for (size_t b = 0; b < blocks; ++b) by_old.emplace(chain_key(old[b]), static_cast<int32_t>(b));
  float sum = -0.0f;
  for (size_t step = 0; step < blocks; ++step) {
    auto [lo, hi] = by_old.equal_range(chain_key(sum));
    if (lo == hi) {
      run.fold_order.clear();
      return run;
    }
    auto keeps_sum = [&](int32_t b) { return chain_key(sum + run.partials[static_cast<size_t>(b)]) == chain_key(sum); };
    auto better = [&](int32_t x, int32_t y) {  // x goes before y
      if (keeps_sum(x) != keeps_sum(y)) return keeps_sum(x);
      return ticket_of[static_cast<size_t>(x)] < ticket_of[static_cast<size_t>(y)];
    };
    auto best = lo;
    for (auto it = lo; it != hi; ++it)
      if (better(it->second, best->second)) best = it;
    const int32_t b = best->second;
    by_old.erase(best);
    run.fold_order.push_back(b);
    sum = sum + run.partials[static_cast<size_t>(b)];
  }
  if (chain_key(sum) != chain_key(run.result)) run.fold_order.clear();
  return run;
}

int64_t GpuReduction::resident_blocks(const ReductionPlan& plan) {
  int per_sm = 0;
  FPLAB_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, pass_kernel(plan.first),
                                                           plan.first.threads_per_block(), 0));
  return static_cast<int64_t>(per_sm) * current_sm_count();
}

namespace {

// Device transpose of a rows x cols row-major matrix into cols segments of `rows` terms, `ld`
// floats apart (ld: rows rounded up to 4, so every segment is aligned for 16-byte loads).
__global__ void columns_to_segments(const float* __restrict__ x, float* __restrict__ out, int64_t rows, int64_t cols,
                                    int64_t ld) {
  __shared__ float tile[32][33];
  const int64_t c0 = static_cast<int64_t>(blockIdx.x) * 32, r0 = static_cast<int64_t>(blockIdx.y) * 32;
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t r = r0 + i, c = c0 + threadIdx.x;
    if (r < rows && c < cols) tile[i][threadIdx.x] = x[r * cols + c];
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += blockDim.y) {
    const int64_t c = c0 + i, r = r0 + threadIdx.x;
    if (r < rows && c < cols) out[c * ld + r] = tile[threadIdx.x][i];
  }
}

constexpr unsigned kMaxSegmentsALaunch = 65535;  // gridDim.y

template <class T>
void grow(T*& p, size_t& capacity, size_t need) {
  if (need <= capacity) return;
  if (p) FPLAB_CUDA(cudaFree(p));
  FPLAB_CUDA(cudaMalloc(&p, need * sizeof(T)));
  capacity = need;
}
}  // namespace

GpuSegmentedReduction::~GpuSegmentedReduction() {
  for (void* p : {static_cast<void*>(input_), static_cast<void*>(segments_), static_cast<void*>(partials_),
                  static_cast<void*>(ticket_), static_cast<void*>(results_), static_cast<void*>(second_)})
    if (p) cudaFree(p);
}

size_t GpuSegmentedReduction::workspace_bytes() const {
  return (input_capacity_ + segments_capacity_ + partials_capacity_ + results_capacity_ + second_capacity_) *
             sizeof(float) +
         ticket_capacity_ * sizeof(unsigned);
}

void GpuSegmentedReduction::reduce_segments(const ReductionPlan& plan, const float* device_segments, size_t n,
                                            size_t ld, size_t count, float* results, bool device_results,
                                            const float* device_second) {
  if (count == 0) return;
  const auto terms = static_cast<int64_t>(n);
  const int64_t blocks = plan.first.blocks(terms);
  grow(partials_, partials_capacity_, static_cast<size_t>(blocks) * std::min<size_t>(count, kMaxSegmentsALaunch));
  if (ticket_capacity_ < count) {
    grow(ticket_, ticket_capacity_, count);
    FPLAB_CUDA(cudaMemset(ticket_, 0, count * sizeof(unsigned)));  // each seq combine leaves its ticket at 0
  }
  if (!device_results) grow(results_, results_capacity_, count);
  float* const out = device_results ? results : results_;
  for (size_t first = 0; first < count; first += kMaxSegmentsALaunch) {
    const auto segments = static_cast<unsigned>(std::min<size_t>(count - first, kMaxSegmentsALaunch));
    launch_reduction(plan, device_segments + first * ld, terms, static_cast<int64_t>(ld), segments, partials_,
                     ticket_ + first, out + first, nullptr, nullptr,
                     device_second == nullptr ? nullptr : device_second + first * ld);
  }
  if (!device_results) FPLAB_CUDA(cudaMemcpy(results, results_, count * sizeof(float), cudaMemcpyDefault));
}

void GpuSegmentedReduction::run_in_place(const ReductionPlan& plan, const float* segments, size_t n, size_t ld,
                                         size_t count, float* results) {
  if (ld % 4 != 0 || ld < n || reinterpret_cast<uintptr_t>(segments) % 16 != 0)
    throw std::invalid_argument(
        "segmented reduction in place: the segments' stride must be a multiple of 4 floats "
        "at least n, their start 16-byte aligned");
  reduce_segments(plan, segments, n, ld, count, results, true);
}

bool GpuSegmentedReduction::run_planes_in_place(const ReductionPlan& plan, const float* x, size_t batch,
                                                size_t channels, size_t positions, const float* centre_sums,
                                                float* results) {
  const size_t n = batch * positions;
  const int vector = plan.first.vector;
  // (one warp's long sums: the staged pass, which reads segments, is the fast form there)
  const bool staged = plan.first.grid_threads <= 32 && plan.first.blocks(static_cast<int64_t>(n)) == 1 &&
                      static_cast<int64_t>(n) >= kStagedMinTerms;
  if (plan.first.contiguous || plan.first.interleaved || staged || n == 0 || n >= (size_t{1} << 32) ||
      positions % static_cast<size_t>(vector) != 0 ||
      reinterpret_cast<uintptr_t>(x) % (4 * static_cast<uintptr_t>(std::min(vector, 4))) != 0)
    return false;
  const auto terms = static_cast<int64_t>(n);
  const int64_t blocks = plan.first.blocks(terms);
  grow(partials_, partials_capacity_, static_cast<size_t>(blocks) * std::min<size_t>(channels, kMaxSegmentsALaunch));
  if (ticket_capacity_ < channels) {
    grow(ticket_, ticket_capacity_, channels);
    FPLAB_CUDA(cudaMemset(ticket_, 0, channels * sizeof(unsigned)));
  }
  for (size_t first = 0; first < channels; first += kMaxSegmentsALaunch) {
    const auto segments = static_cast<unsigned>(std::min<size_t>(channels - first, kMaxSegmentsALaunch));
    const PlanesRead planes{true, FastDivide(static_cast<uint32_t>(positions)),
                            static_cast<int64_t>(channels * positions), centre_sums ? centre_sums + first : nullptr,
                            static_cast<float>(n)};
    launch_reduction(plan, x + first * positions, terms, static_cast<int64_t>(positions), segments, partials_,
                     ticket_ + first, results + first, nullptr, nullptr, nullptr, planes);
  }
  return true;
}

void GpuSegmentedReduction::run_dots_in_place(const ReductionPlan& plan, const float* a, const float* b, size_t n,
                                              size_t ld, size_t count, float* results) {
  if (const std::string why = dot_why_not(plan); !why.empty()) throw NotRealisable(why);
  if (ld < n) throw std::invalid_argument("segmented dots: the segments' stride must be at least n");
  if (n == 0) {  // sim::gemm's empty dot is +0 (the kernel's idle lanes would give -0)
    if (count) FPLAB_CUDA(cudaMemset(results, 0, count * sizeof(float)));
    return;
  }
  reduce_segments(plan, a, n, ld, count, results, true, b);
}

void GpuSegmentedReduction::run_dots(const ReductionPlan& plan, const float* a, const float* b, size_t n,
                                     size_t count, float* results) {
  if (const std::string why = dot_why_not(plan); !why.empty()) throw NotRealisable(why);
  if (n == 0) {  // +0, as run_dots_in_place
    const std::vector<float> zeros(count, 0.0f);
    if (count) FPLAB_CUDA(cudaMemcpy(results, zeros.data(), count * sizeof(float), cudaMemcpyDefault));
    return;
  }
  const size_t ld = (n + 3) / 4 * 4;
  grow(segments_, segments_capacity_, std::max<size_t>(ld * count, 1));
  grow(second_, second_capacity_, std::max<size_t>(ld * count, 1));
  if (n > 0)
    for (auto [from, to] : {std::pair{a, segments_}, std::pair{b, second_}})
      FPLAB_CUDA(cudaMemcpy2D(to, ld * sizeof(float), from, n * sizeof(float), n * sizeof(float), count,
                              cudaMemcpyDefault));
  reduce_segments(plan, segments_, n, ld, count, results, false, second_);
}

std::string dot_why_not(const ReductionPlan& plan) {
  if (plan.first.contiguous || plan.first.vector != 1 || plan.first.interleaved)
    return "a fused dot's first stage must be strided(P):seq with one accumulator a thread";
  if (!plan.deterministic()) return "a fused dot's partials must not meet in atomics";
  return "";
}

void GpuSegmentedReduction::run(const ReductionPlan& plan, const float* values, size_t n, size_t count,
                                float* results) {
  const size_t ld = (n + 3) / 4 * 4;
  grow(segments_, segments_capacity_, std::max<size_t>(ld * count, 1));
  if (n > 0)
    FPLAB_CUDA(cudaMemcpy2D(segments_, ld * sizeof(float), values, n * sizeof(float), n * sizeof(float), count,
                            cudaMemcpyDefault));
  reduce_segments(plan, segments_, n, ld, count, results);
}

void GpuSegmentedReduction::run_columns(const ReductionPlan& plan, const float* x, size_t rows, size_t cols,
                                        float* results) {
  const size_t ld = (rows + 3) / 4 * 4;
  if ((rows + 31) / 32 > 65535) throw NotRealisable("a sum over more than 2^21 rows (the transpose's grid)");
  grow(input_, input_capacity_, std::max<size_t>(rows * cols, 1));
  grow(segments_, segments_capacity_, std::max<size_t>(ld * cols, 1));
  if (rows * cols > 0) {
    FPLAB_CUDA(cudaMemcpy(input_, x, rows * cols * sizeof(float), cudaMemcpyDefault));
    const dim3 grid(static_cast<unsigned>((cols + 31) / 32), static_cast<unsigned>((rows + 31) / 32));
    columns_to_segments<<<grid, dim3(32, 8)>>>(input_, segments_, static_cast<int64_t>(rows),
                                               static_cast<int64_t>(cols), static_cast<int64_t>(ld));
    FPLAB_CUDA_LAUNCHED("columns_to_segments");
  }
  reduce_segments(plan, segments_, rows, ld, cols, results);
}

float reduce(const Schedule& schedule, std::span<const float> values) {
  const ReductionPlan plan = plan_reduction(schedule);
  GpuReduction gpu(values);
  return gpu.run(plan);
}

}  // namespace fplab::sim::gpu
