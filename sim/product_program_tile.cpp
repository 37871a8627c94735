#include "sim/product_program_tile.hpp"

#include <algorithm>

#include "sim/engine.hpp"
#include "sim/float_lanes.hpp"

namespace fplab::sim::detail {
namespace {

using L = FloatLanes;
using V = L::V;

// Vectors of columns per pass over the program: with 4 rows, AVX-512's 32 registers hold 16
// running vectors (64 columns) beside a pair step's 8 vectors of B; AVX2's 16 hold 8 (16
// columns); the scalar form takes 4 columns.
constexpr size_t kVectors = L::kWidth == 8 ? 2 : 4;
constexpr size_t kRows = kGemmTileRows;
constexpr size_t kPassColumns = kVectors * L::kWidth;
constexpr size_t kEntryFloats = kRows * kPassColumns;  // one stacked running value
static_assert(kPassColumns <= kGemmTileCols && kGemmTileCols % kPassColumns == 0);

// round(x·y) + z·w (kFused: one FMA), or both products rounded and then added.
template <bool kFused>
inline V pair_step(V x, V y, V z, V w) {
  if constexpr (kFused) return L::fma(z, w, L::mul(x, y));
  return L::add(L::mul(x, y), L::mul(z, w));
}
template <bool kFused>
inline V fma_step(V x, V y, V c) {
  if constexpr (kFused) return L::fma(x, y, c);
  return L::add(c, L::mul(x, y));
}

// The program on kVectors vectors of columns of the tile's 4 rows (rows past mr repeat row 0 and
// are not stored). The running values are an array indexed only by constants once the loops
// are unrolled, so GCC keeps them in registers.
template <bool kFused>
void program_pass(const ProductProgram& program, const float* const rows[kRows], const float* b, size_t ldb,
                  const L::Mask (&masks)[kVectors], size_t mr, float* out, size_t ldo, size_t group_stride,
                  float* stack) {
  using K = ProductStep::Kind;
  V run[kRows][kVectors] = {};
  float* top = stack;  // the next free stack entry
  const auto load_b = [&](uint32_t t, V(&row)[kVectors]) {
#pragma GCC unroll 4
    for (size_t v = 0; v < kVectors; ++v) row[v] = L::load(b + t * ldb + v * L::kWidth, masks[v]);
  };
  const auto push = [&] {
#pragma GCC unroll 4
    for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
      for (size_t v = 0; v < kVectors; ++v) L::store(top + (r * kVectors + v) * L::kWidth, run[r][v]);
    top += kEntryFloats;
  };
  for (const ProductStep& step : program.steps) {
    switch (step.kind) {
      case K::pair: {
        if (step.push) push();
        V bs[kVectors], bt[kVectors];
        load_b(step.s, bs), load_b(step.t, bt);
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r) {
          const V xs = L::broadcast(rows[r][step.s]), xt = L::broadcast(rows[r][step.t]);
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v) run[r][v] = pair_step<kFused>(xs, bs[v], xt, bt[v]);
        }
        break;
      }
      case K::product: {
        if (step.push) push();
        V bs[kVectors];
        load_b(step.s, bs);
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r) {
          const V xs = L::broadcast(rows[r][step.s]);
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v) run[r][v] = L::mul(xs, bs[v]);
        }
        break;
      }
      case K::fma: {
        V bs[kVectors];
        load_b(step.s, bs);
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r) {
          const V xs = L::broadcast(rows[r][step.s]);
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v) run[r][v] = fma_step<kFused>(xs, bs[v], run[r][v]);
        }
        break;
      }
      case K::add_popped: {
        top -= kEntryFloats;
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v)
            run[r][v] = L::add(L::load(top + (r * kVectors + v) * L::kWidth), run[r][v]);
        break;
      }
      case K::store: {
        float* dest = out + step.s * group_stride;
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r)
          if (r < mr)
#pragma GCC unroll 4
            for (size_t v = 0; v < kVectors; ++v) L::store(dest + r * ldo + v * L::kWidth, run[r][v], masks[v]);
        break;
      }
    }
  }
}

}  // namespace

size_t product_program_stack_floats(const ProductProgram& program) { return program.depth * kEntryFloats; }

void product_program_tile(const ProductProgram& program, bool fused, const float* a, size_t lda, const float* b,
                          size_t ldb, size_t mr, size_t nr, float* out, size_t ldo, size_t group_stride, float* stack) {
  const float* rows[kRows];
  for (size_t r = 0; r < kRows; ++r) rows[r] = a + (r < mr ? r : 0) * lda;
  for (size_t c0 = 0; c0 < nr; c0 += kPassColumns) {
    L::Mask masks[kVectors];
    for (size_t v = 0; v < kVectors; ++v) {
      const size_t from = c0 + v * L::kWidth;
      masks[v] = L::mask(nr > from ? std::min(L::kWidth, nr - from) : 0);
    }
    if (fused)
      program_pass<true>(program, rows, b + c0, ldb, masks, mr, out + c0, ldo, group_stride, stack);
    else
      program_pass<false>(program, rows, b + c0, ldb, masks, mr, out + c0, ldo, group_stride, stack);
  }
}

}  // namespace fplab::sim::detail
