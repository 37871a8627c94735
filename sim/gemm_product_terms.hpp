// Internal to sim/: the GEMM path for schedules whose leading reduction stage no register tile
// kernel takes (fused(N,F) tensor-core steps, atomic, ring, exact, shuffles or perms first, seq,
// tree, rev, shfl_* or numpy_pairwise with exact products) and for arithmetics other than fp32
// round-to-nearest (a first stage of `seq` chains in a narrow format rounded to nearest runs in
// sim/narrow_chain_tile.cpp's fp32 vectors). The leading stages
// run over the tile's product terms through the reference's own walk (schedule_walk.hpp), with
// a partial being a product not yet rounded or a row of the tile's values, so that products enter
// additions exactly as the reference has them; later stages are the engine's TileWalker.
#pragma once

#include "sim/arithmetic.hpp"
#include "sim/engine.hpp"
#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim::detail {

// C = A B as sim::gemm computes it (same shapes, keys and results), for any schedule and arithmetic.
void gemm_through_product_terms(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                                const Arithmetic& arithmetic, const NoiseKey& key);

}  // namespace fplab::sim::detail
