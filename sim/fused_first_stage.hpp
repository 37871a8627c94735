// Internal to sim/: the GEMM path for schedules whose first stage is a tensor-core fused(N,F)
// reducer on the products (all:fused, split(S):fused | ..., contig(G):fused | ...,
// deal(P,B)[all:fused] | ...), in native
// fp32 arithmetic with exact products. Each group's chain of fused steps runs for a tile of
// outputs at once through FusedFactors::dot_tile (the whole chain in vector registers where the
// grid form takes the spec: sim/fused_grid.hpp); later stages are the engine's TileWalker. Same
// results as the product-term path, which walks the products term by term to the same steps.
#pragma once

#include "sim/arithmetic.hpp"
#include "sim/engine.hpp"
#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim::detail {

// Whether gemm_with_fused_first_stage takes the schedule and arithmetic.
bool fused_first_stage(const Schedule& schedule, const Arithmetic& arithmetic);

// C = A B as sim::gemm computes it, for a schedule and arithmetic fused_first_stage() takes.
void gemm_with_fused_first_stage(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                                 const Arithmetic& arithmetic, const NoiseKey& key);

}  // namespace fplab::sim::detail
