// Batched fp32 reductions on the GPU in the emulation's own seeded orders: an `atomic` step's
// order is not the hardware's arrival order but the permutation the impl seed draws
// (sim/schedule_walk.hpp: Fisher-Yates from NoiseKey::stream(stage, group), Philox4x32-10 as
// fp/counter_rng), so the result equals sim::reduce_batch's bit for bit (fp32, round to nearest
// even) on any device. For the schedules gpu_plan's plan_seeded accepts (`GROUPS:{seq|atomic}
// [| all:{seq|atomic}]`), such as h100's atomic bias gradients. No CUDA types in this header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/cuda/device_buffer.hpp"
#include "sim/cuda/gpu_plan.hpp"
#include "sim/engine.hpp"
#include "sim/noise.hpp"

namespace fplab::sim::gpu {

// Where the terms of a batch lie in device memory: term t of output o at x[t * term_stride +
// o * output_stride] (columns of a row-major matrix: term_stride = columns, output_stride = 1;
// consecutive segments: term_stride = 1, output_stride = n).
struct BatchLayout {
  size_t n = 0, outputs = 0;
  size_t term_stride = 1, output_stride = 0;
};

class GpuSeededReduction {
 public:
  GpuSeededReduction() = default;
  GpuSeededReduction(const GpuSeededReduction&) = delete;
  GpuSeededReduction& operator=(const GpuSeededReduction&) = delete;

  // results[o] (device) = output o's reduction under `plan`, keyed as sim::reduce_batch keys it:
  // batch_output_key(key, o, tile_outputs) (outputs of a tile share every order). x and results
  // are device pointers; enqueued on the default stream, not waited for.
  void run(const SeededPlan& plan, const float* x, const BatchLayout& layout, const NoiseKey& key,
           size_t tile_outputs, float* results);
  // Two batches of sums in the launches of one: the outputs before `second_from` keyed by `key`, the
  // others by `second_key`, counted from second_from (its output o there is output o - second_from
  // of a run of its own): the bits of two runs (a BatchNorm's two bias-gradient sums).
  void run(const SeededPlan& plan, const float* x, const BatchLayout& layout, const NoiseKey& key, size_t second_from,
           const NoiseKey& second_key, size_t tile_outputs, float* results);

  // The `all:atomic` combine of a split-K GEMM's parts in the emulation's order: part p of output
  // (i, j) at parts[p * m * n + i * n + j], folded into c[i * n + j] (device pointers) in the
  // permutation of the `count` parts that the output's tile draws, keyed as sim::gemm keys it
  // (gemm_output_key: tiles of kGemmTileRows x kGemmTileCols outputs share the order), from the
  // first part in that order, each addition fp32 rounded to nearest even. `shape` may be a slab of
  // a larger GEMM's rows starting at row `first_row` (a multiple of kGemmTileRows; its n the whole
  // GEMM's): the tiles are then the whole GEMM's. Enqueued on the default stream, not waited for.
  void fold_gemm_parts(const float* parts, int64_t count, GemmShape shape, const NoiseKey& key, float* c,
                       size_t first_row = 0);

  // A first stage `GROUPING:seq` alone: partials[g * outputs + o] = group g of output o's terms
  // folded in order, for the group_count(grouping, n) groups (sim::detail::groups_of's). Enqueued
  // on the default stream.
  void chains(const Grouping& grouping, const float* x, const BatchLayout& layout, float* partials);
  static int64_t group_count(const Grouping& grouping, size_t n);

  size_t workspace_bytes() const;  // device memory held (permutations, partials)

 private:
  DeviceBuffer first_order_, second_order_, partials_;
};

// Plans (throws NotRealisable), uploads the host values x, runs and waits: the outputs' results
// (tests, tools).
std::vector<float> reduce_batch_seeded(const Schedule& schedule, std::span<const float> x, const BatchLayout& layout,
                                       const NoiseKey& key, size_t tile_outputs = kBatchTileOutputs);
// The same as two batches in one run (GpuSeededReduction::run's second_key).
std::vector<float> reduce_batch_seeded(const Schedule& schedule, std::span<const float> x, const BatchLayout& layout,
                                       const NoiseKey& key, size_t second_from, const NoiseKey& second_key,
                                       size_t tile_outputs = kBatchTileOutputs);

}  // namespace fplab::sim::gpu
