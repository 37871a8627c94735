// The GEMM path of sim/fused_first_stage.hpp.
//
// Assumptions: a group's members are the products of its terms in the order groups_of() lists
// them, and the fused reducer reduces every group (one member included) as fused_dot from +0
// (schedule_walk.hpp's reduce_group, whole_group.cpp), on exact products whatever
// Arithmetic::products says unless products are rounded first (Products::rounded: not taken here).
#include "sim/fused_first_stage.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/tensor_core.hpp"
#include "sim/tile_walker.hpp"
#include "sim/whole_group.hpp"

namespace fplab::sim::detail {

bool fused_first_stage(const Schedule& schedule, const Arithmetic& arithmetic) {
  return !schedule.stages.empty() && schedule.stages[0].reduces() &&
         schedule.stages[0].reducer.kind == Reducer::Kind::fused && arithmetic.native_float() &&
         arithmetic.products != Products::rounded && !schedule.has_stage_formats();
}

void gemm_with_fused_first_stage(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                                 const Arithmetic& arithmetic, const NoiseKey& key) {
  const auto [m, n, k] = shape;
  const Stage& first = schedule.stages[0];
  const FusedAddSpec spec = fused_reducer_spec(first.reducer, arithmetic);
  const FusedFactors factors(a, b, m, n, k, spec);
  const auto groups = groups_of(first.grouping, k);
  std::vector<std::vector<uint32_t>> group_terms(groups.size());
  for (size_t g = 0; g < groups.size(); ++g)
    for (size_t t = 0; t < groups[g].count; ++t)
      group_terms[g].push_back(static_cast<uint32_t>(groups[g].first + t * groups[g].stride));
  // One group and nothing after it (all:fused): its chains are the outputs.
  const bool chains_are_outputs = groups.size() == 1 && schedule.stages.size() == 1;
  constexpr size_t kTile = kGemmTileRows * kGemmTileCols;
  std::vector<fp::CounterRng> streams(kTile, fp::CounterRng(0));  // native arithmetic draws none
  TileWalker<float, NativeAdd<float>> walker(kTile, {kTile}, arithmetic, streams.data(), key);
  std::vector<double> chains(kTile);
  std::vector<float> rows(groups.size() * kTile), result(kTile);
  for (size_t j0 = 0; j0 < n; j0 += kGemmTileCols)
    for (size_t i0 = 0; i0 < m; i0 += kGemmTileRows) {
      const size_t mr = std::min(kGemmTileRows, m - i0), nr = std::min(kGemmTileCols, n - j0), w = mr * nr;
      for (size_t g = 0; g < groups.size(); ++g) {
        factors.dot_tile(chains.data(), i0, mr, j0, nr, group_terms[g], spec);
        std::copy_n(chains.data(), w, &rows[g * w]);  // fp32 values
      }
      const float* outputs = rows.data();
      if (!chains_are_outputs) {
        walker.reshape(w, {w});
        walker.set_tile(gemm_output_key(key, i0, j0, n));
        walker.run(schedule, 1, rows.data(), w, groups.size(), result.data());
        outputs = result.data();
      }
      for (size_t r = 0; r < mr; ++r) std::copy_n(outputs + r * nr, nr, c + (i0 + r) * n + j0);
    }
}

}  // namespace fplab::sim::detail
