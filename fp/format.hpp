// Binary floating-point formats: fp64 down to fp8, and any eXmY in between.
//
// Assumptions (stated once, relied on everywhere in fp/):
// - every format has 2..11 exponent bits and 1..52 stored mantissa bits, so each of its
//   values is exactly a host double and each bit pattern fits in 64 bits;
// - IEEE-like formats reserve the all-ones exponent for inf (mantissa 0) and NaN;
// - "finite-only" formats (OCP fp8 e4m3, "FN") use the all-ones exponent for normal numbers
//   except the all-ones mantissa, which is NaN; they have no infinities.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fplab::fp {

struct FormatError : std::invalid_argument {
  using std::invalid_argument::invalid_argument;
};

struct Format {
  std::string name;  // canonical name: "fp32", "bf16", "e4m3", or "eXmY" for a custom one
  int exp_bits = 8;
  int man_bits = 23;  // stored fraction bits (precision is man_bits + 1)
  bool finite_only = false;

  int precision() const { return man_bits + 1; }
  int width() const { return 1 + exp_bits + man_bits; }
  int bias() const { return (1 << (exp_bits - 1)) - 1; }
  int emin() const { return 1 - bias(); }
  // Largest unbiased exponent of a finite number.
  int emax() const { return finite_only ? (1 << exp_bits) - 1 - bias() : (1 << exp_bits) - 2 - bias(); }
  bool has_infinity() const { return !finite_only; }

  double max_finite() const;
  double min_normal() const;     // 2^emin
  double min_subnormal() const;  // 2^(emin - man_bits)
  // Spacing of the format's grid around |x| (the ulp of a number of that magnitude;
  // for |x| below min_normal the subnormal spacing). x must be finite.
  double ulp(double x) const;

  // Bit patterns. decode() accepts any pattern of width() bits; encode() requires a value of
  // the format (a NaN encodes to the canonical quiet NaN) and throws otherwise.
  double decode(uint64_t bits) const;
  uint64_t encode(double value) const;
  uint64_t quiet_nan_bits(bool negative) const;
  uint64_t infinity_bits(bool negative) const;  // formats with infinities only
  uint64_t max_finite_bits(bool negative) const;

  bool operator==(const Format& other) const {
    return exp_bits == other.exp_bits && man_bits == other.man_bits && finite_only == other.finite_only;
  }
};

// The named formats.
Format fp64();
Format fp32();
Format tf32();  // e8m10
Format bf16();  // e8m7
Format fp16();  // e5m10
Format e4m3();  // OCP fp8 E4M3FN: no infinities, max 448
Format e5m2();  // OCP fp8 E5M2: IEEE-like, max 57344

// Accepts the names above (plus "float", "double", "half", "fp8e4m3", "fp8e5m2") and any
// "eXmY" with 2 <= X <= 11, 1 <= Y <= 52. Note that "e4m3" names the OCP FN format and
// "e5m10" is fp16. Throws FormatError with a one-line message naming the problem.
Format parse_format(std::string_view text);

// Names accepted by parse_format() for the fixed formats, for help texts and tests.
std::vector<std::string> named_formats();

}  // namespace fplab::fp
