// Internal to sim/: a ProductProgram (product_program.hpp) run across a GEMM tile of native fp32
// outputs, the products computed where the steps need them, in registers across the tile's
// columns (sim/float_lanes.hpp: AVX-512, AVX2 or scalar).
#pragma once

#include <cstddef>

#include "sim/product_program.hpp"

namespace fplab::sim::detail {

// Floats of scratch product_program_tile needs for `program`.
size_t product_program_stack_floats(const ProductProgram& program);

// Group g's result for output (r, c) of the tile of mr <= 4 rows and nr <= 64 columns goes to
// out[g * group_stride + r * ldo + c]. The factors come packed, term-major, so that a step finds
// a term's at one offset: a[4 t + r] is A's row r (rows past mr: any values, their results are
// not stored), b[64 t + c] B's column c, of term t. fused: products as Products::fused has
// them (the program's own reading); otherwise Products::rounded: every product rounded first,
// each step then one addition of two values. Every addition is fp32 round-to-nearest-even
// (Arithmetic::native_float()).
void product_program_tile(const ProductProgram& program, bool fused, const float* a, const float* b, size_t mr,
                          size_t nr, float* out, size_t ldo, size_t group_stride, float* stack);

}  // namespace fplab::sim::detail
