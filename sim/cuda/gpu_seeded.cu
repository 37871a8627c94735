// The seeded-order batched reduction (gpu_seeded.hpp). Three launches (for one batch of sums or
// two keyed apart):
//  1. the permutations: one warp per (tile, group) of every atomic step runs the emulation's
//     Fisher-Yates on an index array, drawing from the same stream as the CPU (fp::CounterRng,
//     compiled for the device), the lanes making the draws and one lane the swaps;
//  2. the first stage: one thread per (group, output) folds the group's terms in its order
//     (atomic: the permutation of its tile; seq: as they come), starting from the first term, with
//     __fadd_rn, as sim/schedule_walk.hpp's fold (strided groups over segments: the terms staged
//     through shared memory first, first_stage_staged);
//  3. the `all:` stage, if any: one thread per output folds the first stage's partials.
// Outputs are the fastest index of every thread grid, so that a warp shares one group (one
// permutation, read by all) and reads neighbouring terms when outputs are neighbours in memory.
#include "sim/cuda/gpu_seeded.hpp"

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp/counter_rng.hpp"
#include "sim/cuda/cuda_check.cuh"

namespace fplab::sim::gpu {
namespace {

constexpr int kThreads = 256;

// The first stage's groups over n terms, as sim::detail::groups_of makes them; offset: where a
// group's members start in a tile's permutation array (the counts of the groups before it).
struct Groups {
  int kind;  // Grouping::Kind
  int64_t size, n, count, chunk;
};

struct Group {
  int64_t first, stride, count, offset;
};

Groups groups_of(const Grouping& g, int64_t n) {
  Groups out{static_cast<int>(g.kind), g.size, n, 0, 0};
  switch (g.kind) {
    case Grouping::Kind::all:
      out.count = n > 0 ? 1 : 0;
      break;
    case Grouping::Kind::contig:
      out.count = (n + g.size - 1) / g.size;
      break;
    case Grouping::Kind::strided:
      out.count = std::min(g.size, n);
      break;
    case Grouping::Kind::split:
      out.chunk = (n + g.size - 1) / g.size;
      out.count = out.chunk > 0 ? (n + out.chunk - 1) / out.chunk : 0;
      break;
  }
  return out;
}

__device__ Group group(const Groups& gs, int64_t g) {
  switch (static_cast<Grouping::Kind>(gs.kind)) {
    case Grouping::Kind::all:
      return {0, 1, gs.n, 0};
    case Grouping::Kind::contig: {
      const int64_t first = g * gs.size;
      return {first, 1, min(gs.size, gs.n - first), first};
    }
    case Grouping::Kind::strided: {
      const int64_t q = gs.n / gs.size, rem = gs.n % gs.size;
      return {g, gs.size, q + (g < rem ? 1 : 0), g * q + min(g, rem)};
    }
    case Grouping::Kind::split: {
      const int64_t first = g * gs.chunk;
      return {first, 1, min(gs.chunk, gs.n - first), first};
    }
  }
  return {0, 1, 0, 0};
}

// Members of a strided grouping's first (largest) group.
__host__ __device__ int64_t strided_members(const Groups& gs) { return (gs.n + gs.size - 1) / gs.size; }

// sim::detail::permute on the index array 0 .. count - 1, by one warp. Fisher-Yates draws
// j = below(i) for i = count, count - 1, ..., 2, each from the next number of the stream. Lemire's
// draw takes one number unless it rejects (probability below i / 2^64), so the draws of a run of
// kDraws can be made at once, lane by lane, from the stream's numbers at known positions; then one
// lane does the run's swaps, in order, in `order` (shared memory where the caller put it there).
// Should any draw of a run reject, the lanes' draws from there on are not the emulation's: lane 0
// then finishes the whole permutation one draw at a time, as the CPU does.
constexpr int kDraws = 256;

__device__ void fisher_yates(int32_t* order, int64_t count, uint64_t key, uint64_t stream, int32_t* draws) {
  const unsigned lane = threadIdx.x % 32;
  for (int64_t k = lane; k < count; k += 32) order[k] = static_cast<int32_t>(k);
  __syncwarp();
  const fp::CounterRng rng(key, stream);
  uint64_t position = 0;
  int64_t i = count;
  bool rejected = false;
  while (i > 1) {
    const int run = static_cast<int>(i - 1 < kDraws ? i - 1 : kDraws);  // draws for i, i - 1, ..., i - run + 1
    bool lost = false;
    for (int t = static_cast<int>(lane); t < run; t += 32) {
      uint64_t draw;
      const uint64_t x = rng.at(position + static_cast<uint64_t>(t));
      if (!fp::CounterRng::lemire(x, static_cast<uint64_t>(i - t), draw)) lost = true;
      draws[t] = static_cast<int32_t>(draw);
    }
    if (__any_sync(0xffffffffu, lost)) {
      rejected = true;
      break;
    }
    __syncwarp();
    if (lane == 0)
      for (int t = 0; t < run; ++t) {
        const int64_t last = i - 1 - t, j = draws[t];
        const int32_t held = order[last];
        order[last] = order[j];
        order[j] = held;
      }
    __syncwarp();
    position += static_cast<uint64_t>(run);
    i -= run;
  }
  if (rejected && lane == 0) {
    fp::CounterRng sequential(key, stream);
    sequential.seek(position);
    for (; i > 1; --i) {
      const auto j = static_cast<int64_t>(sequential.below(static_cast<uint64_t>(i)));
      const int32_t held = order[i - 1];
      order[i - 1] = order[j];
      order[j] = held;
    }
  }
  __syncwarp();
}

// The keys of a launch's tiles: one batch of sums keyed by prefix[0] (split_tile and split_output
// past the last), or two run as one (GpuSeededReduction::run's second_key): tiles from split_tile
// on, the outputs from split_output on, keyed by prefix[1] and counted from there. A tile's key is
// mix_key({impl seed, op id, call, tile}) (batch_output_key), finished here from the prefix the host
// mixed: nothing is copied to the device for it (a copy from pageable host memory would wait for
// the stream, and so stall the host behind every kernel before it).
struct TileKeys {
  uint64_t prefix[2];
  int64_t split_tile, split_output;

  __device__ uint64_t key(int64_t tile) const {
    return tile < split_tile ? fp::mix_word(prefix[0], static_cast<uint64_t>(tile))
                             : fp::mix_word(prefix[1], static_cast<uint64_t>(tile - split_tile));
  }
  __device__ int64_t tile_of(int64_t output, int64_t tile_outputs) const {
    return output < split_output ? output / tile_outputs : split_tile + (output - split_output) / tile_outputs;
  }
};

TileKeys one_key(const NoiseKey& key) {
  const uint64_t prefix = fp::mix_key({key.impl_seed, key.op_id, key.call});
  return {{prefix, prefix}, INT64_MAX, INT64_MAX};
}

// One warp (block) per permutation: stage 0's, block (tile, group); stage 1's (`all:atomic`),
// block (tile) after those. NoiseKey::stream(stage, group) = (the tile's key, (stage << 40) ^
// group). With `in_shared`, the permutation is made in dynamic shared memory (every count fits)
// and copied out; else in place in global memory.
// tile_offset: the key's tile of the first `all:` permutation (a GEMM's slab of rows; else 0).
__global__ void permutations(Groups gs, TileKeys keys, int64_t tiles, int32_t* first_order, int32_t* second_order,
                             bool first_atomic, bool second_atomic, bool in_shared, int64_t tile_offset) {
  extern __shared__ int32_t shared_order[];
  __shared__ int32_t draws[kDraws];
  const int64_t e = blockIdx.x;
  const int64_t first_blocks = first_atomic ? tiles * gs.count : 0;
  int32_t* out;
  int64_t count;
  uint64_t tile, stream;
  if (e < first_blocks) {
    tile = static_cast<uint64_t>(e / gs.count);
    const int64_t g = e % gs.count;
    const Group grp = group(gs, g);
    out = first_order + static_cast<int64_t>(tile) * gs.n + grp.offset, count = grp.count;
    stream = static_cast<uint64_t>(g);
  } else {
    const int64_t local = e - first_blocks;
    tile = static_cast<uint64_t>(local + tile_offset);
    out = second_order + local * gs.count, count = gs.count, stream = uint64_t{1} << 40;
  }
  int32_t* const order = in_shared ? shared_order : out;
  fisher_yates(order, count, keys.key(static_cast<int64_t>(tile)), stream, draws);
  if (in_shared)
    for (int64_t k = threadIdx.x; k < count; k += 32) out[k] = order[k];
}

// The most members any one permutation of the plan has (its shared memory, when it fits).
int64_t largest_permutation(const Groups& gs, bool first_atomic, bool second_atomic) {
  int64_t largest = second_atomic ? gs.count : 0;
  if (first_atomic) {
    switch (static_cast<Grouping::Kind>(gs.kind)) {
      case Grouping::Kind::all:
        largest = std::max(largest, gs.n);
        break;
      case Grouping::Kind::contig:
        largest = std::max(largest, std::min(gs.size, gs.n));
        break;
      case Grouping::Kind::strided:
        largest = std::max(largest, strided_members(gs));
        break;
      case Grouping::Kind::split:
        largest = std::max(largest, gs.chunk);
        break;
    }
  }
  return largest;
}

constexpr int64_t kSharedOrder = 8192;  // members: 32 KiB of shared memory a block at most

// term(0) + term(1) + ... + term(count - 1), left to right, each addition fp32 rounded to nearest
// even (sim/schedule_walk.hpp's fold). The chain of additions is the order's and cannot be split;
// its loads can: a run of kAhead terms is loaded before it is added, so that their latencies overlap
// (the permuted gathers would otherwise stall every addition).
template <int kAhead, class Term>
__device__ float fold_terms(const Term& term, int64_t count) {
  float acc = term(0);
  int64_t k = 1;
  for (; k + kAhead <= count; k += kAhead) {
    float ahead[kAhead];
#pragma unroll
    for (int i = 0; i < kAhead; ++i) ahead[i] = term(k + i);
#pragma unroll
    for (int i = 0; i < kAhead; ++i) acc = __fadd_rn(acc, ahead[i]);
  }
  for (; k < count; ++k) acc = __fadd_rn(acc, term(k));
  return acc;
}

// Thread (group, output): the group's terms folded in their order; into partials[g * outputs + o],
// or the result when the first stage is the only one.
__global__ void first_stage(const float* __restrict__ x, BatchLayout layout, Groups gs, TileKeys keys,
                            int64_t tile_outputs, const int32_t* __restrict__ first_order, bool atomic,
                            float* __restrict__ out) {
  const int64_t outputs = static_cast<int64_t>(layout.outputs);
  const int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= gs.count * outputs) return;
  const int64_t g = e / outputs, o = e % outputs;
  const Group grp = group(gs, g);
  const int32_t* order = atomic ? first_order + keys.tile_of(o, tile_outputs) * gs.n + grp.offset : nullptr;
  const float* base = x + o * static_cast<int64_t>(layout.output_stride);
  const auto term = [&](int64_t k) {
    const int64_t member = atomic ? order[k] : k;
    return base[(grp.first + member * grp.stride) * static_cast<int64_t>(layout.term_stride)];
  };
  const float acc = fold_terms<32>(term, grp.count);
  out[e] = acc;
}

// The first stage of a strided grouping over segments (term_stride 1), its groups' terms and
// permutations staged through shared memory: block (output o, kStagedGroups groups g0 ..) copies
// member m of group g0 + j to terms[m * kStagedGroups + j] (a member's row is kStagedGroups
// consecutive terms, one sector or two shared with the neighbouring blocks) and the groups'
// permutations (side by side in the tile's array), then one thread a group folds them as
// first_stage does. first_stage's threads gather their terms from global memory one float at a
// time in a permuted order, each load a 32-byte sector of which they use 4 bytes: on a ResNet-18's
// 32 x 32 BatchNorms (8.4 M terms a sum, more than L2 holds) the loads moved 8 times the data.
constexpr int kStagedGroups = 8, kStagedThreads = 256, kStagedUnroll = 8;
// Members of a group at most: 48 KiB of terms a block, and as much again of permutations.
constexpr int64_t kStagedMembers = 1536;

// staged[i] = load(i) for i < count, by the block, kStagedUnroll loads in flight a thread.
template <class T, class Load>
__device__ void stage(T* staged, int64_t count, const Load& load) {
  for (int64_t i0 = threadIdx.x; i0 < count; i0 += kStagedThreads * kStagedUnroll) {
    T v[kStagedUnroll];
#pragma unroll
    for (int u = 0; u < kStagedUnroll; ++u) {
      const int64_t i = i0 + u * kStagedThreads;
      v[u] = i < count ? load(i) : T{};
    }
#pragma unroll
    for (int u = 0; u < kStagedUnroll; ++u)
      if (i0 + u * kStagedThreads < count) staged[i0 + u * kStagedThreads] = v[u];
  }
}

// At most 64 registers (four blocks an SM): with 80, three fit, and the 16 x 16 layers' sums took
// 56 us instead of 48 (H200, 2026-11-29).
__global__ void __launch_bounds__(kStagedThreads, 4)
    first_stage_staged(const float* __restrict__ x, BatchLayout layout, Groups gs, TileKeys keys,
                       int64_t tile_outputs, const int32_t* __restrict__ first_order, bool atomic,
                       float* __restrict__ out) {
  extern __shared__ float terms[];  // members x kStagedGroups terms, then (atomic) the permutations
  const int64_t group_blocks = (gs.count + kStagedGroups - 1) / kStagedGroups;
  const int64_t o = blockIdx.x / group_blocks, g0 = (blockIdx.x % group_blocks) * kStagedGroups;
  const int64_t last = min(g0 + kStagedGroups, gs.count) - 1;
  const int64_t entries = strided_members(gs) * kStagedGroups;
  const float* const base = x + o * static_cast<int64_t>(layout.output_stride);
  // Entry m * kStagedGroups + j: term g0 + j + m * size; +0 past the last term or group (no fold reads it).
  stage(terms, entries, [&](int64_t i) {
    const int64_t j = i % kStagedGroups, t = g0 + j + (i / kStagedGroups) * gs.size;
    return g0 + j < gs.count && t < gs.n ? base[t] : 0.0f;
  });
  int32_t* const orders = reinterpret_cast<int32_t*>(terms + entries);
  const int64_t from = group(gs, g0).offset;  // a group's offset: the counts of the groups before it
  if (atomic) {
    const Group end = group(gs, last);
    const int32_t* const tile_order = first_order + keys.tile_of(o, tile_outputs) * gs.n + from;
    stage(orders, end.offset + end.count - from, [&](int64_t i) { return tile_order[i]; });
  }
  __syncthreads();
  const int64_t g = g0 + threadIdx.x;
  if (threadIdx.x >= kStagedGroups || g > last) return;
  const Group grp = group(gs, g);
  const int32_t* const order = orders + (grp.offset - from);
  const auto term = [&](int64_t k) { return terms[(atomic ? order[k] : k) * kStagedGroups + threadIdx.x]; };
  out[g * static_cast<int64_t>(layout.outputs) + o] = fold_terms<32>(term, grp.count);
}

// The dynamic shared memory first_stage_staged takes for these groups (terms, and permutations
// where atomic), allowed to the kernel where above the default 48 KiB a block; 0 where it does not
// take them: unless they are strided groups over segments, more than one (one is the whole sum:
// first_stage's one thread an output is its form), of kStagedFrom to kStagedMembers members, and
// the device gives a block that much. On an H200 (a ResNet-18's BatchNorm bias gradients, batch
// 128, 132 groups a sum, 2 x C sums a launch, 2026-11-29) the staged form took 84 us instead of 230
// at 993 members a group and 48 instead of 67 at 248, but (without the permutations staged) 63
// instead of 30 at 62 and 86 instead of 20 at 16: a block of 256 threads staging what 8 of them fold.
constexpr int64_t kStagedFrom = 128;

size_t staged_shared_bytes(const Groups& gs, const BatchLayout& layout, bool atomic) {
  if (static_cast<Grouping::Kind>(gs.kind) != Grouping::Kind::strided || gs.count < 2 || layout.term_stride != 1)
    return 0;
  const int64_t members = strided_members(gs);
  if (members < kStagedFrom || members > kStagedMembers ||
      (gs.count + kStagedGroups - 1) / kStagedGroups * static_cast<int64_t>(layout.outputs) > INT32_MAX)
    return 0;
  const size_t bytes = static_cast<size_t>(members) * kStagedGroups * (sizeof(float) + (atomic ? sizeof(int32_t) : 0));
  if (bytes <= 48 * 1024) return bytes;
  int device = 0, most = 0;
  FPLAB_CUDA(cudaGetDevice(&device));
  FPLAB_CUDA(cudaDeviceGetAttribute(&most, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  if (bytes > static_cast<size_t>(most)) return 0;
  FPLAB_CUDA(
      cudaFuncSetAttribute(first_stage_staged, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
  return bytes;
}

// Thread (output): the partials folded in the `all:` stage's order.
__global__ void second_stage(const float* __restrict__ partials, int64_t groups, int64_t outputs, TileKeys keys,
                             int64_t tile_outputs, const int32_t* __restrict__ second_order, bool atomic,
                             float* __restrict__ results) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= outputs) return;
  const int32_t* order = atomic ? second_order + keys.tile_of(o, tile_outputs) * groups : nullptr;
  const auto partial = [&](int64_t k) { return partials[(atomic ? order[k] : k) * outputs + o]; };
  const float acc = fold_terms<16>(partial, groups);
  results[o] = acc;
}

// Thread (output (i, j) of a GEMM): its split-K parts folded in its tile's permutation
// (gemm_output_key's tile: (i / rows) * tiles_per_row + j / cols).
__global__ void gemm_parts_fold(const float* __restrict__ parts, int64_t count, int64_t m, int64_t n,
                                int64_t tiles_per_row, const int32_t* __restrict__ order_of_tile,
                                float* __restrict__ c) {
  const int64_t o = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= m * n) return;
  const int64_t i = o / n, j = o % n;
  const int64_t tile = (i / static_cast<int64_t>(kGemmTileRows)) * tiles_per_row + j / static_cast<int64_t>(kGemmTileCols);
  const int32_t* order = order_of_tile + tile * count;
  const int64_t outputs = m * n;
  const auto part = [&](int64_t k) { return parts[order[k] * outputs + o]; };
  const float acc = fold_terms<16>(part, count);
  c[o] = acc;
}

unsigned blocks_for(int64_t threads, int per_block = kThreads) {
  return static_cast<unsigned>((threads + per_block - 1) / per_block);
}

// The folds have few threads (a BatchNorm's bias gradient: 64 channels x 132 groups), each a long
// chain of gathered loads: blocks of 64 spread them over every SM instead of a quarter of them.
constexpr int kFoldThreads = 64;

}  // namespace

size_t GpuSeededReduction::workspace_bytes() const {
  return first_order_.bytes() + second_order_.bytes() + partials_.bytes();
}

void GpuSeededReduction::run(const SeededPlan& plan, const float* x, const BatchLayout& layout, const NoiseKey& key,
                             size_t tile_outputs, float* results) {
  run(plan, x, layout, key, layout.outputs, key, tile_outputs, results);
}

void GpuSeededReduction::run(const SeededPlan& plan, const float* x, const BatchLayout& layout, const NoiseKey& key,
                             size_t second_from, const NoiseKey& second_key, size_t tile_outputs, float* results) {
  const auto n = static_cast<int64_t>(layout.n), outputs = static_cast<int64_t>(layout.outputs);
  if (second_from > layout.outputs)
    throw std::invalid_argument("GpuSeededReduction::run: second_from past the outputs");
  if (outputs == 0) return;
  if (n == 0) {  // the sum of no terms: +0
    FPLAB_CUDA(cudaMemsetAsync(results, 0, layout.outputs * sizeof(float)));
    return;
  }
  if (n > INT32_MAX) throw NotRealisable("a seeded-order sum of more than 2^31 - 1 terms");
  tile_outputs = std::max<size_t>(tile_outputs, 1);
  const auto per = static_cast<int64_t>(tile_outputs), split = static_cast<int64_t>(second_from);
  const int64_t first_tiles = (split + per - 1) / per, tiles = first_tiles + (outputs - split + per - 1) / per;
  const Groups gs = groups_of(plan.first, n);
  TileKeys keys = one_key(key);  // the tile is mixed in on the device
  if (split < outputs) {
    keys.prefix[1] = one_key(second_key).prefix[0];
    keys.split_tile = first_tiles, keys.split_output = split;
  }
  auto* first_order = plan.first_atomic ? first_order_.reserve<int32_t>(static_cast<size_t>(tiles * n)) : nullptr;
  const bool second_atomic = plan.two_stages && plan.second_atomic;
  auto* second_order = second_atomic ? second_order_.reserve<int32_t>(static_cast<size_t>(tiles * gs.count)) : nullptr;
  const int64_t permuting = (plan.first_atomic ? tiles * gs.count : 0) + (second_atomic ? tiles : 0);
  if (permuting > 0) {
    const int64_t largest = largest_permutation(gs, plan.first_atomic, second_atomic);
    const bool in_shared = largest <= kSharedOrder;
    const size_t shared = in_shared ? static_cast<size_t>(largest) * sizeof(int32_t) : 0;
    if (permuting > INT32_MAX) throw NotRealisable("a seeded-order sum with more than 2^31 - 1 permutations");
    permutations<<<static_cast<unsigned>(permuting), 32, shared>>>(gs, keys, tiles, first_order, second_order,
                                                                   plan.first_atomic, second_atomic, in_shared, 0);
    FPLAB_CUDA_LAUNCHED("seeded permutations");
  }
  const auto per_tile = static_cast<int64_t>(tile_outputs);
  if (!plan.two_stages) {  // one `all:` stage: its one group's fold is the result
    first_stage<<<blocks_for(outputs, kFoldThreads), kFoldThreads>>>(x, layout, gs, keys, per_tile, first_order,
                                                                     plan.first_atomic, results);
    FPLAB_CUDA_LAUNCHED("seeded first stage");
    return;
  }
  auto* partials = partials_.reserve<float>(static_cast<size_t>(gs.count * outputs));
  if (const size_t shared = staged_shared_bytes(gs, layout, plan.first_atomic); shared > 0) {
    const auto blocks = static_cast<unsigned>((gs.count + kStagedGroups - 1) / kStagedGroups * outputs);
    first_stage_staged<<<blocks, kStagedThreads, shared>>>(x, layout, gs, keys, per_tile, first_order,
                                                           plan.first_atomic, partials);
  } else {
    first_stage<<<blocks_for(gs.count * outputs, kFoldThreads), kFoldThreads>>>(
        x, layout, gs, keys, per_tile, first_order, plan.first_atomic, partials);
  }
  FPLAB_CUDA_LAUNCHED("seeded first stage");
  second_stage<<<blocks_for(outputs, kFoldThreads), kFoldThreads>>>(partials, gs.count, outputs, keys, per_tile,
                                                                    second_order, second_atomic, results);
  FPLAB_CUDA_LAUNCHED("seeded second stage");
}

int64_t GpuSeededReduction::group_count(const Grouping& grouping, size_t n) {
  return groups_of(grouping, static_cast<int64_t>(n)).count;
}

void GpuSeededReduction::chains(const Grouping& grouping, const float* x, const BatchLayout& layout, float* partials) {
  const auto n = static_cast<int64_t>(layout.n), outputs = static_cast<int64_t>(layout.outputs);
  if (outputs == 0 || n == 0) return;
  const Groups gs = groups_of(grouping, n);
  first_stage<<<blocks_for(gs.count * outputs, kFoldThreads), kFoldThreads>>>(x, layout, gs, TileKeys{}, 1, nullptr,
                                                                              false, partials);
  FPLAB_CUDA_LAUNCHED("chains of a first stage");
}

void GpuSeededReduction::fold_gemm_parts(const float* parts, int64_t count, GemmShape shape, const NoiseKey& key,
                                         float* c, size_t first_row) {
  const auto m = static_cast<int64_t>(shape.m), n = static_cast<int64_t>(shape.n);
  if (m * n == 0) return;
  if (count < 1 || count > INT32_MAX) throw NotRealisable("a seeded combine of " + std::to_string(count) + " GEMM parts");
  if (first_row % kGemmTileRows != 0)
    throw std::invalid_argument("fold_gemm_parts: a slab must start on a tile's first row");
  const int64_t tiles_per_row = (n + static_cast<int64_t>(kGemmTileCols) - 1) / static_cast<int64_t>(kGemmTileCols);
  const int64_t tiles = (m + static_cast<int64_t>(kGemmTileRows) - 1) / static_cast<int64_t>(kGemmTileRows) * tiles_per_row;
  if (tiles > INT32_MAX) throw NotRealisable("a seeded GEMM combine with more than 2^31 - 1 output tiles");
  // The parts are the groups of the schedule's first stage: only their count enters the draws.
  Groups gs{static_cast<int>(Grouping::Kind::split), count, count, count, 1};
  auto* order = second_order_.reserve<int32_t>(static_cast<size_t>(tiles * count));
  const bool in_shared = count <= kSharedOrder;
  const size_t shared = in_shared ? static_cast<size_t>(count) * sizeof(int32_t) : 0;
  const auto tile_offset = static_cast<int64_t>(first_row / kGemmTileRows) * tiles_per_row;
  permutations<<<static_cast<unsigned>(tiles), 32, shared>>>(gs, one_key(key), tiles, nullptr, order, false, true,
                                                             in_shared, tile_offset);
  FPLAB_CUDA_LAUNCHED("seeded GEMM permutations");
  gemm_parts_fold<<<blocks_for(m * n, kFoldThreads), kFoldThreads>>>(parts, count, m, n, tiles_per_row, order, c);
  FPLAB_CUDA_LAUNCHED("seeded GEMM fold");
}

std::vector<float> reduce_batch_seeded(const Schedule& schedule, std::span<const float> x, const BatchLayout& layout,
                                       const NoiseKey& key, size_t tile_outputs) {
  return reduce_batch_seeded(schedule, x, layout, key, layout.outputs, key, tile_outputs);
}

std::vector<float> reduce_batch_seeded(const Schedule& schedule, std::span<const float> x, const BatchLayout& layout,
                                       const NoiseKey& key, size_t second_from, const NoiseKey& second_key,
                                       size_t tile_outputs) {
  const SeededPlan plan = plan_seeded(schedule);
  float *device_x = nullptr, *device_results = nullptr;
  std::vector<float> results(layout.outputs);
  FPLAB_CUDA(cudaMalloc(&device_x, std::max<size_t>(x.size(), 1) * sizeof(float)));
  FPLAB_CUDA(cudaMalloc(&device_results, std::max<size_t>(layout.outputs, 1) * sizeof(float)));
  try {
    if (!x.empty()) FPLAB_CUDA(cudaMemcpy(device_x, x.data(), x.size() * sizeof(float), cudaMemcpyHostToDevice));
    GpuSeededReduction gpu;
    gpu.run(plan, device_x, layout, key, second_from, second_key, tile_outputs, device_results);
    if (!results.empty())
      FPLAB_CUDA(cudaMemcpy(results.data(), device_results, results.size() * sizeof(float), cudaMemcpyDeviceToHost));
  } catch (...) {
    cudaFree(device_x);
    cudaFree(device_results);
    throw;
  }
  cudaFree(device_x);
  cudaFree(device_results);
  return results;
}

}  // namespace fplab::sim::gpu
