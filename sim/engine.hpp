// The fast evaluator of schedules. Every output of a batch (the rows of a GEMM) shares one
// reduction order, so the engine walks the schedule once per tile of outputs and runs each step
// as a loop across the tile's outputs; a stage of FMA chains over K is a register-blocked GEMM
// microkernel, and so are fp32 trees, rev, warp shuffles (product_program_tile.hpp) and Kahan or
// Neumaier sums (compensated_tile.hpp); any other first stage of a GEMM runs over the tile's
// product terms (gemm_product_terms.hpp), tensor-core steps vectorised across the tile. Random steps (atomic,
// shuffle) draw once per tile. Tested bit for bit against reference_evaluator.hpp.
#pragma once

#include <cstddef>
#include <span>

#include "sim/arithmetic.hpp"
#include "sim/noise.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {

// One reduction of `values` (the same result as reduce_reference).
double reduce(const Schedule& schedule, std::span<const double> values, const Arithmetic& arithmetic,
              const NoiseKey& key = {});

// Outputs of a batch of sums that share every atomic/shuffle order (one noise-key tile).
inline constexpr size_t kBatchTileOutputs = 64;

// `outputs` independent reductions of k terms each: term t of output m is terms[t * outputs + m].
// Outputs are tiled `tile_outputs` at a time; output m reduces like reduce_reference with
// batch_output_key(key, m, tile_outputs).
void reduce_batch(const Schedule& schedule, const double* terms, size_t k, size_t outputs, const Arithmetic& arithmetic,
                  const NoiseKey& key, double* out, size_t tile_outputs = kBatchTileOutputs);
NoiseKey batch_output_key(const NoiseKey& key, size_t output, size_t tile_outputs);

// C = A B with A (m x k), B (k x n), C (m x n), row-major fp32; the reduction over k of every
// output follows the schedule and arithmetic (a product term is a[i,t] * b[t,j]). Output (i, j)
// equals dot_reference of row i and column j with gemm_output_key(key, i, j, n), stored as a float
// (formats wider than fp32 are rounded to nearest there). K = 0 gives +0 everywhere (the empty
// sum); A and B are then not read and may be null.
struct GemmShape {
  size_t m, n, k;
};
inline constexpr size_t kGemmTileRows = 4, kGemmTileCols = 64;  // outputs sharing atomic/shuffle orders
void gemm(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
          const Arithmetic& arithmetic, const NoiseKey& key = {});
NoiseKey gemm_output_key(const NoiseKey& key, size_t i, size_t j, size_t n);

}  // namespace fplab::sim
