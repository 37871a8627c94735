// Internal to sim/: Kahan and Neumaier sums of a GEMM tile's products in native fp32, the
// products rounded first as every compensated reducer has them (whole_group.hpp), the sums
// running in registers across the tile's columns (sim/float_lanes.hpp: AVX-512, AVX2 or scalar).
#pragma once

#include <cstddef>

#include "sim/schedule.hpp"
#include "sim/schedule_walk.hpp"

namespace fplab::sim::detail {

// Output (r, c) of the tile of mr <= 4 rows and nr <= 64 columns, out[r * ldo + c], becomes
// reduce_whole_group(kind, ...) of the group's products a[r][t]·b[t][c] for t = group.first,
// group.first + group.stride, ... (group.count >= 1 of them), every operation fp32
// round-to-nearest-even (Arithmetic::native_float()). kind: Reducer::Kind::kahan or neumaier.
// a: the tile's first row of A (rows lda apart); b: B's first column of the tile (rows ldb apart).
void compensated_tile(Reducer::Kind kind, const float* a, size_t lda, const float* b, size_t ldb,
                      const GroupSpan& group, size_t mr, size_t nr, float* out, size_t ldo);

}  // namespace fplab::sim::detail
