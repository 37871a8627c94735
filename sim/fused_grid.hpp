// Internal to sim/: a GEMM's chains of tensor-core fused steps, each output's whole chain at once,
// on the integer grid in vector registers (the fast form behind FusedFactors::dot_tile).
//
// Every product of two fp32 factors is exact in a double, and with factors converted to an input
// format of at most 12 significant bits (tf32, bf16, fp16, e4m3, e5m2) exact in a float: those
// run in float lanes, the others (fp32 inputs, or none) in double lanes. One step of an output is
// then: the largest reference exponent E of its nonzero terms (int16 exponent codes, A's and B's
// added), each term scaled to units of the grid 2^(E - F) by adding F - E to its exponent field
// and cut toward zero by the truncating conversion to int32, the units summed exactly in int32
// (or, when N products and the accumulator could pass 2^31, the accumulator's units added in a
// double), and the sum converted to fp32 toward zero and scaled back. A lane stays in this form
// while every step's E lies in [F - 125, F] (or the step has no nonzero term): then every product
// that reaches the grid is exact and normal, a product below it (zero, subnormal or rounded)
// scales to less than one unit, each result is 0 or a normal fp32 value, and zero factors and
// accumulators need no case of their own. A block of outputs with any lane outside it (an
// infinity, NaN, huge or tiny values) reports so and is left to the caller, which takes the
// step-by-step forms.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "sim/tensor_core.hpp"

namespace fplab::sim::detail {

class FusedGrid {
 public:
  // Whether spec's steps take this form on this host (AVX2 or AVX-512 with BW): truncation toward
  // zero, the accumulator in the alignment, fp32 results toward zero, an input format within fp32
  // (or none: fp64), and N products below 2^31 units of the grid.
  static bool accepts(const FusedAddSpec& spec);
  // Outputs per block: block_rows() x block_cols().
  size_t block_rows() const;
  size_t block_cols() const;

  // A (m x k) and B (k x n), row-major fp32, converted to spec's input and coded once here.
  // Memory: 8 bytes per factor of A, 6 per factor of B (padded by two blocks of columns), for the
  // GEMM's duration. spec must be accepted.
  FusedGrid(const float* a, const float* b, size_t m, size_t n, size_t k, const FusedAddSpec& spec);
  ~FusedGrid();  // the buffers go to the thread's spares for the next GEMM
  FusedGrid(const FusedGrid&) = delete;
  FusedGrid& operator=(const FusedGrid&) = delete;

  // Whether block() takes spec: accepts(spec), with the constructor's input format and mode.
  bool takes(const FusedAddSpec& spec) const;

  // For rows [row0, row0 + rows) and columns [col0, col0 + cols) (at most one block):
  // out[r * ld + c] = fused_dot(+0, {A[row0 + r][t]}, {B[t][col0 + c]}, spec) over t in terms, bit
  // for bit; false, with nothing written, where a lane left the form. Preconditions, which the
  // caller checks once for all its blocks (each block is a few microseconds): takes(spec), every
  // term below k.
  bool block(double* out, size_t ld, size_t row0, size_t rows, size_t col0, size_t cols,
             std::span<const uint32_t> terms, const FusedAddSpec& spec) const;

 private:
  // kWide: the accumulator's units are added to the products' outside the int32 sum.
  template <class Lanes, bool kWide>
  bool block_steps(float* out, size_t row0, size_t rows, size_t col0, std::span<const uint32_t> terms,
                   const FusedAddSpec& spec) const;

  size_t m_, n_, k_;
  FusedAddSpec spec_;
  bool float_lanes_;  // products exact in floats (inputs of at most 12 significant bits), else in doubles
  size_t ldb_;
  std::vector<float> a_values_, b_values_;
  std::vector<int32_t> a_codes_;  // each code twice, in both 16-bit halves (one broadcast fills a vector)
  std::vector<int16_t> b_codes_;
};

}  // namespace fplab::sim::detail
