// Binary floating-point formats: fp64 down to fp4, and any eXmY in between.
//
// Assumptions (stated once, relied on everywhere in fp/):
// - every format has 2..11 exponent bits and 1..52 stored mantissa bits (e8m0: 8 and 0), so
//   each of its values is exactly a host double and each bit pattern fits in 64 bits;
// - what the patterns at the edges mean (infinities, NaN, the sign of zero) is the format's
//   Family, below: the narrow formats of ML hardware differ from IEEE 754 in exactly that, and
//   in their exponent bias.
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

// The families of special-value layouts (ml_dtypes' suffixes in brackets). Only `ieee`
// reserves the all-ones exponent; in the others it holds numbers, which is where their larger
// ranges come from.
enum class Family : uint8_t {
  ieee,      // all-ones exponent: infinity (fraction 0) and NaNs; +-0 (fp16, e5m2, any eXmY)
  fn,        // [fn] no infinity; S.1..1.1..1 is NaN, the rest numbers; +-0 (OCP fp8 E4M3)
  finite,    // [fn without NaN] every pattern a number: no infinity, no NaN; +-0 (OCP MX FP6/FP4)
  fnuz,      // [fnuz] no infinity, no -0: 1.0..0.0..0 is the one NaN, the rest numbers
  exponent,  // [fnu] OCP MX E8M0: unsigned, no fraction, no zero, no subnormals; all ones is NaN
};

struct Format {
  std::string name;  // canonical name: "fp32", "bf16", "e4m3", or "eXmY" for a custom one
  int exp_bits = 8;
  int man_bits = 23;  // stored fraction bits (precision is man_bits + 1)
  Family family = Family::ieee;
  // Added to IEEE's bias 2^(exp_bits-1) - 1: fnuz formats shift it by 1 (e4m3b11fnuz by 4, to
  // 11), so that their ranges sit where the hardware that made them wanted.
  int bias_shift = 0;

  int precision() const { return man_bits + 1; }
  bool is_signed() const { return family != Family::exponent; }
  int width() const { return (is_signed() ? 1 : 0) + exp_bits + man_bits; }
  int bias() const { return (1 << (exp_bits - 1)) - 1 + bias_shift; }
  bool has_subnormals() const { return family != Family::exponent; }
  // Smallest unbiased exponent of a normal number: the zero exponent field is the subnormal
  // binade, except in e8m0, where it is 2^-bias itself.
  int emin() const { return has_subnormals() ? 1 - bias() : -bias(); }
  // Largest unbiased exponent of a finite number: only IEEE-like formats (and e8m0, whose all-
  // ones pattern is NaN) give up the all-ones exponent field.
  int emax() const {
    const int top = (1 << exp_bits) - 1;
    return (family == Family::ieee || family == Family::exponent ? top - 1 : top) - bias();
  }
  bool has_infinity() const { return family == Family::ieee; }
  bool has_nan() const { return family != Family::finite; }
  bool has_zero() const { return family != Family::exponent; }
  bool has_negative_zero() const { return family == Family::ieee || family == Family::fn || family == Family::finite; }
  // Formats without infinities whose NaN is the one pattern 1.0..0.0..0 or all ones: a NaN's
  // sign cannot be kept. (IEEE and fn formats keep it.)
  bool nan_has_sign() const { return family == Family::ieee || family == Family::fn; }

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
  uint64_t quiet_nan_bits(bool negative) const { return nan_bits(negative, 0); }  // the canonical NaN
  // A quiet NaN (formats with a NaN only; fnuz/e8m0 ignore the sign) carrying, in IEEE-like
  // formats, the leading bits of `payload` (left-aligned: its bit 63 goes just below the quiet
  // bit) that fit; the other families have one NaN per sign and no payload.
  uint64_t nan_bits(bool negative, uint64_t payload) const;
  uint64_t infinity_bits(bool negative) const;  // formats with infinities only
  uint64_t max_finite_bits(bool negative) const;
  uint64_t zero_bits(bool negative) const;  // formats with a zero only; fnuz ignores the sign
  uint64_t min_value_bits() const;          // e8m0's least value 2^-127 (the pattern 0)

  bool operator==(const Format& other) const {
    return exp_bits == other.exp_bits && man_bits == other.man_bits && family == other.family &&
           bias_shift == other.bias_shift;
  }
};

// The named formats.
Format fp64();
Format fp32();
Format tf32();         // e8m10
Format bf16();         // e8m7
Format fp16();         // e5m10
Format e4m3();         // OCP fp8 E4M3FN: no infinities, max 448
Format e5m2();         // OCP fp8 E5M2: IEEE-like, max 57344
Format e4m3ieee();     // IEEE-style fp8 e4m3 (ml_dtypes float8_e4m3): infinities, max 240
Format e4m3fnuz();     // ml_dtypes float8_e4m3fnuz (AMD MI300, Graphcore): bias 8, max 240
Format e5m2fnuz();     // ml_dtypes float8_e5m2fnuz: bias 16, max 57344
Format e4m3b11fnuz();  // ml_dtypes float8_e4m3b11fnuz (TPU): bias 11, max 30
Format e3m2fn();       // OCP MX FP6 E3M2 (ml_dtypes float6_e3m2fn): no inf, no NaN, max 28
Format e2m3fn();       // OCP MX FP6 E2M3 (ml_dtypes float6_e2m3fn): no inf, no NaN, max 7.5
Format e2m1fn();       // OCP MX FP4 E2M1 (ml_dtypes float4_e2m1fn): no inf, no NaN, max 6
Format e8m0();         // OCP MX E8M0 scale (ml_dtypes float8_e8m0fnu): 2^-127..2^127, NaN 0xff

// Accepts the names above (plus "float", "double", "half", "fp8e4m3", "fp8e5m2", and the
// ml_dtypes spellings such as "float8_e4m3fnuz" or "float4_e2m1fn") and any "eXmY" with
// 2 <= X <= 11, 1 <= Y <= 52, which is IEEE-like, or "[floatN_]eXmY[bB][fn|fnuz]" for any layout
// of the other families (docs/formats-and-rounding.md). Note that "e4m3" names the OCP FN format
// (ml_dtypes' "float8_e4m3" is e4m3ieee), "e2m1" is IEEE-like (max 3; MX FP4 is "e2m1fn"), and
// "e5m10" is fp16. Throws FormatError with a one-line message naming the problem.
Format parse_format(std::string_view text);

// Names accepted by parse_format() for the fixed formats, for help texts and tests.
std::vector<std::string> named_formats();

}  // namespace fplab::fp
