#include "sim/product_program_tile.hpp"

#include "sim/engine.hpp"
#include "sim/float_lanes.hpp"

namespace fplab::sim::detail {
namespace {

using L = FloatLanes;
using V = L::V;

// Vectors of columns per pass over the program: with 4 rows, AVX-512's 32 registers hold 16
// running vectors (64 columns) beside a step's broadcasts and vectors of B; AVX2's 16 hold 8
// (16 columns); the scalar form takes 4 columns.
constexpr size_t kVectors = L::kWidth == 8 ? 2 : 4;
constexpr size_t kRows = kGemmTileRows;
constexpr size_t kEntryFloats = kRows * kVectors * L::kWidth;  // one stacked running value

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

// The program on one pass of columns of the tile's 4 rows (rows past mr are not stored). The running values are an
// array indexed only by constants once the loops are unrolled, so GCC keeps them in registers. A quad's four vectors of
// B are read where they are used (folded into the arithmetic in full passes): held, they would not fit beside the rest.
template <bool kFused, class Columns>
void program_pass(const ProductProgram& program, const float* a, const float* b, const Columns& columns, size_t mr,
                  float* out, size_t ldo, size_t group_stride, float* stack) {
  using K = ProductStep::Kind;
  V run[kRows][kVectors] = {};
  float* top = stack;  // the next free stack entry
  for (const ProductStep& step : program.steps) {
    if (step.push) {
#pragma GCC unroll 4
      for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v) L::store(top + (r * kVectors + v) * L::kWidth, run[r][v]);
      top += kEntryFloats;
    }
    const float* b0 = b + step.p[0] * kGemmTileCols;
    const float* b1 = b + step.p[1] * kGemmTileCols;
    switch (step.kind) {
      case K::pair: {
        V y0[kVectors], y1[kVectors];
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v) y0[v] = columns.load_held(b0, v), y1[v] = columns.load_held(b1, v);
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r) {
          const V x0 = L::broadcast(a[step.p[0] * kRows + r]), x1 = L::broadcast(a[step.p[1] * kRows + r]);
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v) run[r][v] = pair_step<kFused>(x0, y0[v], x1, y1[v]);
        }
        break;
      }
      case K::quad: {
        const float* b2 = b + step.p[2] * kGemmTileCols;
        const float* b3 = b + step.p[3] * kGemmTileCols;
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r) {
          const V x0 = L::broadcast(a[step.p[0] * kRows + r]), x1 = L::broadcast(a[step.p[1] * kRows + r]);
          const V x2 = L::broadcast(a[step.p[2] * kRows + r]), x3 = L::broadcast(a[step.p[3] * kRows + r]);
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v)
            run[r][v] = L::add(pair_step<kFused>(x0, columns.load(b0, v), x1, columns.load(b1, v)),
                               pair_step<kFused>(x2, columns.load(b2, v), x3, columns.load(b3, v)));
        }
        break;
      }
      case K::product: {
        V y0[kVectors];
#pragma GCC unroll 4
        for (size_t v = 0; v < kVectors; ++v) y0[v] = columns.load_held(b0, v);
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r) {
          const V x0 = L::broadcast(a[step.p[0] * kRows + r]);
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v) run[r][v] = L::mul(x0, y0[v]);
        }
        break;
      }
      case K::fmas: {
        const ptrdiff_t delta = static_cast<int32_t>(step.p[2]);
        const float* ak = a + step.p[0] * kRows;
        const float* bk = b0;
        for (uint32_t i = 0; i < step.p[1];
             ++i, ak += delta * ptrdiff_t{kRows}, bk += delta * ptrdiff_t{kGemmTileCols}) {
          V y0[kVectors];
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v) y0[v] = columns.load_held(bk, v);
#pragma GCC unroll 4
          for (size_t r = 0; r < kRows; ++r) {
            const V x0 = L::broadcast(ak[r]);
#pragma GCC unroll 4
            for (size_t v = 0; v < kVectors; ++v) run[r][v] = fma_step<kFused>(x0, y0[v], run[r][v]);
          }
        }
        break;
      }
      case K::add_popped:
        top -= kEntryFloats;
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r)
#pragma GCC unroll 4
          for (size_t v = 0; v < kVectors; ++v)
            run[r][v] = L::add(L::load(top + (r * kVectors + v) * L::kWidth), run[r][v]);
        break;
      case K::store: {
        float* dest = out + step.p[0] * group_stride;
#pragma GCC unroll 4
        for (size_t r = 0; r < kRows; ++r)
          if (r < mr)
#pragma GCC unroll 4
            for (size_t v = 0; v < kVectors; ++v) columns.store(dest + r * ldo, v, run[r][v]);
        break;
      }
    }
  }
}

}  // namespace

size_t product_program_stack_floats(const ProductProgram& program) { return program.depth * kEntryFloats; }

void product_program_tile(const ProductProgram& program, bool fused, const float* a, const float* b, size_t mr,
                          size_t nr, float* out, size_t ldo, size_t group_stride, float* stack) {
  for_each_column_pass<kVectors>(nr, [&](size_t c0, const auto& columns) {
    if (fused)
      program_pass<true>(program, a, b + c0, columns, mr, out + c0, ldo, group_stride, stack);
    else
      program_pass<false>(program, a, b + c0, columns, mr, out + c0, ldo, group_stride, stack);
  });
}

}  // namespace fplab::sim::detail
