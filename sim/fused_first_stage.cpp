// The GEMM path of sim/fused_first_stage.hpp.
//
// Assumptions: a group's members are the products of its terms in the order groups_of() (or
// deal_hands() for a first deal(P,B)[all:fused]) lists them, and the fused reducer reduces every group (one member
// included) as fused_dot from +0 (schedule_walk.hpp's reduce_group, whole_group.cpp), on exact products whatever
// Arithmetic::products says unless products are rounded first (Products::rounded: not taken here).
#include "sim/fused_first_stage.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/tensor_core.hpp"
#include "sim/tile_walker.hpp"
#include "sim/whole_group.hpp"

namespace fplab::sim::detail {

namespace {

// The first stage's fused reduction: the stage itself, or the one stage all:fused inside a first
// deal(P,B)[...] (every hand one chain); null for any other.
const Stage* fused_reduction(const Stage& first) {
  if (first.deal > 0)
    return first.inner.size() == 1 && first.inner[0].reduces() && first.inner[0].grouping.kind == Grouping::Kind::all
               ? fused_reduction(first.inner[0])
               : nullptr;
  return first.reduces() && first.reducer.kind == Reducer::Kind::fused ? &first : nullptr;
}

}  // namespace

bool fused_first_stage(const Schedule& schedule, const Arithmetic& arithmetic) {
  return !schedule.stages.empty() && fused_reduction(schedule.stages[0]) && arithmetic.native_float() &&
         arithmetic.products != Products::rounded && !schedule.has_stage_formats();
}

void gemm_with_fused_first_stage(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                                 const Arithmetic& arithmetic, const NoiseKey& key) {
  const auto [m, n, k] = shape;
  const Stage& first = schedule.stages[0];
  const FusedAddSpec spec = fused_reducer_spec(fused_reduction(first)->reducer, arithmetic);
  const FusedFactors factors(a, b, m, n, k, spec);
  std::vector<std::vector<uint32_t>> groups;  // each group's terms
  if (first.deal > 0) {  // a hand's terms, its blocks in order
    for (const std::vector<size_t>& hand : deal_hands(first.deal, first.deal_block, k))
      groups.emplace_back(hand.begin(), hand.end());
  } else {
    for (const GroupSpan& g : groups_of(first.grouping, k)) {
      groups.emplace_back();
      for (size_t t = 0; t < g.count; ++t) groups.back().push_back(static_cast<uint32_t>(g.first + t * g.stride));
    }
  }
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
        factors.dot_tile(chains.data(), i0, mr, j0, nr, groups[g], spec);
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
