// Internal to sim/: a GEMM's first stage of in-order chains (`seq`) accumulated in a narrow
// format (bf16, fp16, tf32, fp8, any eXmY of at most 23 significant bits inside fp32's range)
// rounded to nearest, in fp32 vector registers.
//
// Why fp32 arithmetic can stand in for the format's: every decision point of rounding to the
// format to nearest (the midpoints between its neighbours, the overflow threshold) is an fp32
// number. Rounding the exact result x to fp32 first, then cutting to the format, therefore gives
// the format's rounding of x unless the fp32 result lands exactly on a decision point (then x
// may lie on either side of it). Such lanes are detected (a midpoint leaves the bits below the
// format's last one at exactly half a unit) and recomputed one operation at a time by fp::mul
// and fp::add, as are results below the format's normal range where it is narrower than fp32's
// (scaled first, so that its subnormal grid becomes fp32's) or above its largest finite value.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>

#include "sim/arithmetic.hpp"
#include "sim/schedule_walk.hpp"

namespace fplab::sim::detail {

// What the tile kernel needs of an arithmetic it can take (narrow_chain_spec).
struct NarrowChainSpec {
  uint32_t unit_half = 0;        // half the format's last significand bit, in fp32's bits
  uint32_t keep = 0;             // mask of the bits the format keeps
  uint32_t threshold = 0;        // |x| from which rounding overflows (a midpoint), in fp32's bits
  bool check_range = false;      // overflow, saturation or flushing possible: check every result
  bool flush = false;            // results below the normal range are flushed: recompute those
  float scale = 1, unscale = 1;  // powers of two that move the format's least normal to 2^-126
  bool scaled() const { return scale != 1; }
};

// The spec when arithmetic's chains can run in fp32 vectors: format of ieee, fn or finite family
// with at most 22 stored mantissa bits, normal range inside fp32's; mode rne or rna; products
// fused or rounded. nullopt otherwise.
std::optional<NarrowChainSpec> narrow_chain_spec(const Arithmetic& arithmetic);

// Output (r, c) of the tile of mr <= 4 rows and nr <= 64 columns, out[r * ldo + c], becomes the
// chain the reference evaluates for a `seq` group of the products a[r][t]·b[t][c], t =
// group.first, group.first + group.stride, ... (group.count of them; none: +0): the first product
// rounded to the format (fp::mul), then each next one added: exactly (one rounding, products
// fused) or rounded first (products rounded). a: the tile's first row of A (rows lda apart); b: B's
// first column of the tile (rows ldb apart). A and B must be finite.
void narrow_chain_tile(const Arithmetic& arithmetic, const NarrowChainSpec& spec, const float* a, size_t lda,
                       const float* b, size_t ldb, const GroupSpan& group, size_t mr, size_t nr, float* out,
                       size_t ldo);

}  // namespace fplab::sim::detail
