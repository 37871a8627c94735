// Tensor-core fused multi-term addition: how NVIDIA matrix units add N exact products and the
// accumulator in one step, and a K-long dot product as a chain of such steps.
//
// One fused step computes acc + sum_{i<N} a[i]*b[i] as follows (docs/tensor-cores.md has the
// sources and what is uncertain):
//  1. a[i], b[i] are converted to the input format (tf32: truncated; a no-op for values that
//     are already in the format); each product is exact.
//  2. Every nonzero term gets a reference exponent: a product's is ea + eb, the exponents of its
//     factors (so its significand lies in [1, 4)); the accumulator's is its own exponent.
//     Exponents of subnormals are clamped at the format's emin (input format for the factors,
//     output format for the accumulator). Zero terms take no part in the alignment.
//  3. Each term is aligned to the largest reference exponent E and cut to the grid 2^(E - F):
//     the bits shifted out are dropped (toward zero of the magnitude, or toward -inf as in
//     two's complement), with no guard, round or sticky bits.
//  4. The cut terms are summed exactly (unbounded carry-out, normalised only at the end) and the
//     sum is rounded once to the output format (fp32: toward zero).
// Sources: Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of NVIDIA tensor cores", PeerJ
// Comput. Sci. 7:e330 (2021); Li et al., "FTTN: Feature-Targeted Testing for Numerical
// Properties of NVIDIA & AMD Matrix Accelerators", CCGrid 2024 (arXiv:2403.00232); Xie et al.,
// "MMA-Sim: Bit-Accurate Reference Model of Tensor Cores and Matrix Cores" (arXiv:2511.10909).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp/format.hpp"
#include "fp/rounding.hpp"
#include "sim/schedule.hpp"

namespace fplab::sim {
namespace detail {
class FusedGrid;
}

// What happens to the bits of an aligned term that fall below the grid 2^(E - F).
enum class AlignedTruncation {
  toward_zero,            // sign-magnitude: the magnitude is cut (what Fasi et al. measured on V100/A100)
  toward_minus_infinity,  // two's complement: the signed value is floored
};

struct FusedAddSpec {
  int products = 4;                     // N products per fused step (the chunk length of fused_dot)
  int fraction_bits = 23;               // F; 4300 or more makes every step exact (grid below any term)
  fp::Format input = fp::fp16();        // format of a[i], b[i]
  fp::Mode input_mode = fp::Mode::rne;  // their conversion to it (tf32 hardware truncates: rz)
  fp::Format output = fp::fp32();       // format of acc and of the result
  fp::Mode output_mode = fp::Mode::rz;  // the one final rounding (fp16 output: rne)
  AlignedTruncation truncation = AlignedTruncation::toward_zero;
  // False: the exponent of the largest product alone sets the grid and acc is added uncut.
  bool accumulator_in_alignment = true;
};

// One fused step: acc + sum_i a[i]*b[i] (a and b of equal length, any length) as described at
// the top of this file. NaN in, inf - inf or inf * 0 gives NaN; an infinite term gives inf.
// Throws std::invalid_argument for mismatched lengths or an invalid spec (products < 1,
// fraction_bits < 0, stochastic rounding).
double fused_multiply_add(double acc, std::span<const double> a, std::span<const double> b, const FusedAddSpec& spec);

// A K-long dot product as the MMA chains it along K: fused steps over a[0..N), a[N..2N), ...,
// each starting from the previous step's rounded result; the last chunk may be shorter.
// K == 0 returns acc unchanged.
double fused_dot(double acc, std::span<const double> a, std::span<const double> b, const FusedAddSpec& spec);

// Throws std::invalid_argument for an invalid spec (products < 1, fraction_bits < 0, stochastic
// rounding), as every function here does before it computes anything.
void check_fused_add_spec(const FusedAddSpec& spec);

// fused_multiply_add on `width` independent lanes at once (the engine's form): for every lane l,
// acc[l] = fused_multiply_add(acc[l], {a[l], a[width + l], ...}, {b[l], b[width + l], ...}, spec)
// with `count` products per lane, bit for bit (tests/test_tensor_core.cpp holds it to the scalar
// step). Vectorised where the cut terms sum exactly in a double: truncation toward zero, the
// accumulator in the alignment, F + 2 + bit_width(count + 1) <= 53, and per lane finite values
// with exponents in [-480, 480] whose products are exact doubles (e.g. fp32 and narrower data);
// every other lane takes the scalar step.
void fused_multiply_add_lanes(double* acc, const double* a, const double* b, size_t count, size_t width,
                              const FusedAddSpec& spec);

// The same step for a tile of GEMM outputs with fp32 factors: for r < rows, c < cols,
// acc[r * cols + c] = fused_multiply_add(acc[r * cols + c], {a[r * lda + t] : t in terms},
// {b[t * ldb + c] : t in terms}, spec). Each factor is converted to the input format once for the
// tile. In AVX-512 registers (a row's factor of A broadcast along the row; 32 columns at a time) for
// input formats within fp32 (fp64, fp32, tf32, bf16, fp16, fp8) and fp32 results rounded toward zero
// or to nearest, lanes with an infinity or NaN taking the scalar step; otherwise (and on hosts
// without AVX-512, whose vector form is FusedFactors') through the lanes form.
void fused_multiply_add_tile(double* acc, size_t rows, size_t cols, const float* a, size_t lda, const float* b,
                             size_t ldb, std::span<const uint32_t> terms, const FusedAddSpec& spec);

// A GEMM's fp32 factors (A: m x k, B: k x n, row-major, kept by pointer) for fused steps on many
// tiles of it. On hosts with AVX2 or AVX-512, every factor is converted to the input format and
// given its exponent code once here (not for every tile and chunk of terms: B's k x n again for
// every 4 rows): for dot_tile()'s grid form where it takes the spec (FusedGrid), otherwise for
// tile(), which then runs 16 (AVX2) or 32 (AVX-512) columns at a time in vector registers under
// the conditions of fused_multiply_add_tile's vector form; elsewhere, and for specs outside them,
// tile() is fused_multiply_add_tile.
// Memory: 12 bytes per factor of A and B (a double and an int32 code), or 6-8 for the grid form,
// for the GEMM's duration.
class FusedFactors {
 public:
  FusedFactors(const float* a, const float* b, size_t m, size_t n, size_t k, const FusedAddSpec& spec);
  // fused_multiply_add_tile on the tile of rows [row0, row0 + rows) and columns [col0, col0 + cols):
  // acc[r * cols + c] = fused_multiply_add(acc[r * cols + c], {A[row0 + r][t]}, {B[t][col0 + c]}, spec)
  // over t in terms, bit for bit. spec: the constructor's, or one with its input format and mode.
  void tile(double* acc, size_t row0, size_t rows, size_t col0, size_t cols, std::span<const uint32_t> terms,
            const FusedAddSpec& spec) const;
  // A GEMM's fused chains: for r < rows, c < cols, acc[r * cols + c] = fused_dot(+0, {A[row0 + r][t]},
  // {B[t][col0 + c]}, spec) over t in terms, bit for bit (in steps of N, the last one shorter).
  // Where FusedGrid takes spec (fp32 results toward zero, inputs within fp32 or unconverted),
  // each output's whole chain runs in its vector registers on the integer
  // grid (sim/fused_grid.hpp); blocks it leaves, and other specs, take tile() step by step.
  void dot_tile(double* acc, size_t row0, size_t rows, size_t col0, size_t cols, std::span<const uint32_t> terms,
                const FusedAddSpec& spec) const;
  // Whether the factors were converted for spec's input (tile() accepts spec).
  bool converted_for(const FusedAddSpec& spec) const {
    return spec.input == spec_.input && spec.input_mode == spec_.input_mode;
  }

 private:
  const float *a_, *b_;
  size_t m_, n_, k_;
  FusedAddSpec spec_;
  // Only the AVX2 and AVX-512 forms prepare converted factors: unused in other builds (clang would warn).
  [[maybe_unused]] bool prepared_ = false;
  [[maybe_unused]] size_t ldb_ = 0;  // n + 16 (AVX2) or n + 32: rows readable one vector block past any column
  std::vector<double> a_values_, b_values_;
  std::vector<int32_t> a_codes_, b_codes_;
  std::shared_ptr<const detail::FusedGrid> grid_;  // the grid form's factors, where it takes spec
};

// The fused step of a model of the registry (sim/tensor_core_models.hpp, docs/tensor-cores.md),
// e.g. "tc-h100-tf32"; its result rounded toward zero to the model's accumulator format. Throws
// fp::FormatError naming the unknown model.
FusedAddSpec tensor_core_model(std::string_view name);

// The format a fused step converts its factors to, and how: tf32 by truncation (the H100 ignores
// an fp32 operand's 13 low bits), the others to nearest even (a framework's cast); none: fp64,
// i.e. the values as they are. The MX inputs convert no single value: std::invalid_argument.
std::pair<fp::Format, fp::Mode> fused_input_conversion(Reducer::Input input);
std::vector<std::string> tensor_core_model_names();

}  // namespace fplab::sim
