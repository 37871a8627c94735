// What benchmarks and tests ask of a GpuGemm beyond its results: kernel times, a forced ordered
// split-K form, and the serial form's per-block timeline. Kept out of GpuGemm, whose users want
// results only; a friend of it, so that it drives the very same launches (gpu_gemm.cu defines
// it next to the kernels, which it does not change). No CUDA types in this header.
#pragma once

#include <optional>
#include <vector>

#include "sim/cuda/gpu_gemm.hpp"

namespace fplab::sim::gpu {

struct GpuGemmProbe {
  // Median milliseconds of `reps` runs (after one warm-up), kernels only.
  static double time_ms(GpuGemm& gemm, const GemmPlan& plan, int reps);
  // Force an ordered split-K form (by_shape: back to the rule); every form gives the same bits.
  static void force_ordered_form(GpuGemm& gemm, GpuGemm::OrderedForm form);
  // Force the output tile of chains written out (nullopt: back to the rule), where the operands
  // allow it (detail::chain_tile_fits; else the 64 x 64 kernel runs); every tile gives the same bits.
  static void force_tile(GpuGemm& gemm, std::optional<detail::ChainTile> tile);
  // The tile the loaded operands' chains run in under `plan` (forced, else by shape).
  static detail::ChainTile tile(const GpuGemm& gemm, const GemmPlan& plan);
  // Where the serial form's time goes (docs/results/gpu.md, section 8): one run of it on the loaded
  // shape under `plan` (an ordered split-K), with a record per block, by linear block index (the
  // launch order): its part and tile, its start and end (ns, %globaltimer; the end taken just
  // before its release) and, in SM clock cycles (clock64), its chains up to the wait, the wait for
  // the part before, and the tail (read C, add, write, up to the release). Throws NotRealisable
  // for other plans.
  struct SerialBlock {
    int part = 0, tile = 0;
    unsigned long long start_ns = 0, end_ns = 0, chains_cycles = 0, wait_cycles = 0, tail_cycles = 0;
  };
  static std::vector<SerialBlock> serial_timeline(GpuGemm& gemm, const GemmPlan& plan);
};

}  // namespace fplab::sim::gpu
