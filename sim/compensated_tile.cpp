#include "sim/compensated_tile.hpp"

#include <algorithm>
#include <stdexcept>

#include "sim/engine.hpp"
#include "sim/float_lanes.hpp"

namespace fplab::sim::detail {
namespace {

using L = FloatLanes;
using V = L::V;

// Vectors of columns per pass: a sum and a compensation per vector and row, 4 rows of 2 vectors,
// 8 independent chains of 4 dependent additions each; fewer leave the adders waiting on their
// latency, which costs AVX2 more than the few registers it then spills.
constexpr size_t kVectors = 2;
constexpr size_t kRows = kGemmTileRows;

// reduce_whole_group's kahan and neumaier (whole_group.cpp) on kVectors vectors of columns of the
// tile's 4 rows (rows past mr repeat row 0 and are not stored). A group of one is its product
// rounded, without Neumaier's final addition of the compensation (which would turn -0 into +0):
// the reference's reduce_group returns a lone member as it is.
template <bool kKahan, class Columns>
void compensated_pass(const float* const rows[kRows], const float* b, size_t ldb, const GroupSpan& g,
                      const Columns& columns, size_t mr, float* out, size_t ldo) {
  V sum[kRows][kVectors], comp[kRows][kVectors];
  V bk[kVectors];
  const auto load_b = [&](size_t t) {
#pragma GCC unroll 4
    for (size_t v = 0; v < kVectors; ++v) bk[v] = columns.load_held(b + t * ldb, v);
  };
  load_b(g.first);
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r) {
    const V x = L::broadcast(rows[r][g.first]);
#pragma GCC unroll 4
    for (size_t v = 0; v < kVectors; ++v) sum[r][v] = L::mul(x, bk[v]), comp[r][v] = L::broadcast(0.0f);
  }
  const V one = L::broadcast(1.0f);
  size_t kk = g.first;
  for (size_t i = 1; i < g.count; ++i) {
    kk += g.stride;
    load_b(kk);
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r) {
      const V x = L::broadcast(rows[r][kk]);
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v) {
        const V p = L::mul(x, bk[v]);  // the product rounded first
        V& s = sum[r][v];
        V& c = comp[r][v];
        if constexpr (kKahan) {
          const V y = L::fnma(c, one, p);  // p - c; on the FMA pipes, beside the adders' three
          const V t = L::add(s, y);
          c = L::sub(L::sub(t, s), y);
          s = t;
        } else {
          const V t = L::add(s, p);
          const V big = L::select_ge(L::abs(s), L::abs(p), s, p), small = L::select_ge(L::abs(s), L::abs(p), p, s);
          c = L::add(c, L::add(L::sub(big, t), small));
          s = t;
        }
      }
    }
  }
#pragma GCC unroll 4
  for (size_t r = 0; r < kRows; ++r)
    if (r < mr)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v)
        columns.store(out + r * ldo, v, kKahan || g.count == 1 ? sum[r][v] : L::add(sum[r][v], comp[r][v]));
}

}  // namespace

void compensated_tile(Reducer::Kind kind, const float* a, size_t lda, const float* b, size_t ldb,
                      const GroupSpan& group, size_t mr, size_t nr, float* out, size_t ldo) {
  if (kind != Reducer::Kind::kahan && kind != Reducer::Kind::neumaier)
    throw std::logic_error("compensated_tile: not a compensated reducer");
  const float* rows[kRows];
  for (size_t r = 0; r < kRows; ++r) rows[r] = a + (r < mr ? r : 0) * lda;
  for_each_column_pass<kVectors>(nr, [&](size_t c0, const auto& columns) {
    if (kind == Reducer::Kind::kahan)
      compensated_pass<true>(rows, b + c0, ldb, group, columns, mr, out + c0, ldo);
    else
      compensated_pass<false>(rows, b + c0, ldb, group, columns, mr, out + c0, ldo);
  });
}

}  // namespace fplab::sim::detail
