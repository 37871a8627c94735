// OCP MX block scaling (OCP Microscaling Formats (MX) Specification v1.0, section 6.3): a vector
// cut into blocks of k elements (32 by default; the last block may be shorter), each block one
// shared e8m0 scale X = 2^s and k elements P_i of a narrow format, standing for X * P_i.
//
// The conversion, per block (docs/formats-and-rounding.md, "MX block scaling", says why each rule):
// - amax = max |v_i|; s = floor(log2(amax)) - emax_elem, where emax_elem is the exponent of the
//   element format's largest normal (e4m3 8, e5m2 15, e3m2fn 4, e2m3fn 2, e2m1fn 2), clamped to
//   e8m0's range [-127, 127]. An all-zero block takes s = -127 and a block holding an infinity
//   (and no NaN) s = 127, as gfloat's compute_scale_amax does (the spec's pseudocode leaves both
//   out). A block holding a NaN has the NaN scale (0xff): every value of it is NaN.
// - P_i = v_i / X rounded once (exactly: no double division first) to the element format in the
//   given mode, saturating: a finite magnitude beyond the largest element becomes +-max, and so
//   does an infinity (the spec's conversion is saturating; gfloat's sat=True does the same).
// - In a NaN-scaled block the elements are the element format's canonical NaN, or +0 in formats
//   without one (FP6/FP4): they carry nothing, since X is NaN.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "fp/format.hpp"
#include "fp/rounding.hpp"

namespace fplab::fp {

inline constexpr size_t kMxBlockSize = 32;      // OCP MX v1.0's k for every concrete MX format
inline constexpr int kMxScaleNan = 0x7fffffff;  // mx_scale_exponent's answer for a NaN scale

struct MxBlocks {
  Format element;
  size_t block = kMxBlockSize;
  std::vector<uint8_t> scale_bits;     // one e8m0 pattern per block: s + 127, or 0xff (NaN)
  std::vector<uint64_t> element_bits;  // one per value, in the element format
  std::vector<double> elements;        // the elements' values P_i
  std::vector<double> dequantized;     // X * P_i, exact as a double (NaN for a NaN scale)
};

// The shared scale's exponent s of one block (kMxScaleNan when the block holds a NaN).
int mx_scale_exponent(std::span<const double> block, const Format& element);

// Every value of `values` quantized, block by block. `mode` rounds the elements (sr draws from
// `stream`, in element order; required for sr). The element format is any signed one of at most 8
// exponent bits (the spec's five, and wider ones such as bf16 as a generalisation), so that every
// X * P_i is a double. Throws FormatError for a block size of 0 or another element format.
MxBlocks mx_quantize(std::span<const double> values, const Format& element, size_t block = kMxBlockSize,
                     Mode mode = Mode::rne, CounterRng* stream = nullptr);

}  // namespace fplab::fp
