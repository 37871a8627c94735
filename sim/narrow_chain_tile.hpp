// Internal to sim/: a GEMM's first stage of in-order chains (`seq`) accumulated in a narrow
// format (bf16, fp16, tf32, fp8, any eXmY of at most 23 significant bits inside fp32's range)
// rounded to nearest, in fp32 vector registers: each step one fp32 FMA (or product and sum) whose
// result is cut to the format on its bits (fp/fp32_cut.hpp says why that is exact). Lanes whose
// cut is undecided have their block of steps redone one operation at a time by fp::mul and
// fp::add.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "fp/fp32_cut.hpp"
#include "sim/arithmetic.hpp"
#include "sim/engine.hpp"
#include "sim/noise.hpp"
#include "sim/schedule.hpp"
#include "sim/schedule_walk.hpp"

namespace fplab::sim::detail {

// The cut when arithmetic's chains can run in fp32 vectors (fp::Fp32Cut::of, products fused or
// rounded); nullopt otherwise.
std::optional<fp::Fp32Cut> narrow_chain_cut(const Arithmetic& arithmetic);

// How chains in a format that the cut scales (fp::Fp32Cut::scaled) hold their values: on the
// scaled grid, where the format's values below its least normal are fp32 subnormals, or in fp32's
// own scale with those values rounded on the format's absolute grid (the subnormal grid). The
// bits are the same; the speed is not: `host` (the default) takes the subnormal grid on Intel
// CPUs, which slow down on subnormals, and the scaled one elsewhere. The tests set both.
enum class NarrowChainGrid { host, scaled, subnormal };
void set_narrow_chain_grid(NarrowChainGrid grid);
bool narrow_chains_take_subnormal_grid();

// Output (r, c) of the tile of mr <= 4 rows and nr <= 64 columns, out[r * ldo + c], becomes the
// chain the reference evaluates for a `seq` group of the products a[r][t]·b[t][c], t =
// group.first, group.first + group.stride, ... (group.count of them; none: +0): the first product
// rounded to the format (fp::mul), then each next one added: exactly (one rounding, products
// fused) or rounded first (products rounded). a: the tile's first row of A (rows lda apart); b: B's
// first column of the tile (rows ldb apart). A and B must be finite. b_scaled (optional, same
// layout): B times spec.scale, exactly, for formats the cut scales (spec.scaled()): the chains
// then need no scaling of their own; or, with a_scaled (A's layout), B and A each times a power of
// two, exactly, whose product is spec.scale.
void narrow_chain_tile(const Arithmetic& arithmetic, const fp::Fp32Cut& spec, const float* a, size_t lda,
                       const float* b, size_t ldb, const GroupSpan& group, size_t mr, size_t nr, float* out, size_t ldo,
                       const float* b_scaled = nullptr, const float* a_scaled = nullptr, bool subnormal_grid = false);
// subnormal_grid: the chains of a format spec scales run in fp32's own scale instead (see
// NarrowChainGrid), where the format allows it (no flushing, a least subnormal that is an fp32
// normal); ignored otherwise. b_scaled and a_scaled are then not read.

// C = A B as sim::gemm computes it, where the schedule's first stage is `seq` chains that
// narrow_chain_tile takes (narrow_chain_cut, finite A and B, no stage formats): the chains, then
// the later stages on rows of floats (TileWalker with Fp32CutAdd). False, C untouched, otherwise.
bool gemm_with_narrow_chains(const Schedule& schedule, const float* a, const float* b, float* c, GemmShape shape,
                             const Arithmetic& arithmetic, const NoiseKey& key);

}  // namespace fplab::sim::detail
