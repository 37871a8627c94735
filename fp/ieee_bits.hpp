// The one place that knows how IEEE 754 binary64 and binary32 lay out their bits (sign, biased
// exponent, fraction), and the split of a double into an integer significand and a scale that
// exact arithmetic builds on. Assumes the host's double and float are binary64 and binary32
// (checked below).
#pragma once

#include <bit>
#include <cstdint>
#include <limits>

namespace fplab::fp {

static_assert(std::numeric_limits<double>::is_iec559 && std::numeric_limits<float>::is_iec559,
              "fplab needs IEEE 754 binary64 doubles and binary32 floats");

namespace binary64 {
inline constexpr int kFractionBits = 52;
inline constexpr int kBias = 1023;
inline constexpr uint64_t kExponentMask = 0x7ff;  // after shifting right by kFractionBits
inline constexpr uint64_t kFractionMask = (uint64_t{1} << kFractionBits) - 1;
inline constexpr uint64_t kHiddenBit = uint64_t{1} << kFractionBits;
inline constexpr uint64_t kMagnitudeMask = ~(uint64_t{1} << 63);
inline constexpr uint64_t kInfinityBits = kExponentMask << kFractionBits;  // also the exponent field's mask in place
inline constexpr int kMinNormalExponent = 1 - kBias;                        // -1022
inline constexpr int kSubnormalScale = kMinNormalExponent - kFractionBits;  // -1074: 2^-1074 is the least subnormal

inline int biased_exponent(uint64_t bits) { return static_cast<int>((bits >> kFractionBits) & kExponentMask); }
inline uint64_t fraction(uint64_t bits) { return bits & kFractionMask; }
inline bool sign(uint64_t bits) { return (bits >> 63) != 0; }
// 2^e for a normal exponent e (kMinNormalExponent <= e <= kBias), built from its bits.
inline uint64_t power_of_two_bits(int e) { return static_cast<uint64_t>(e + kBias) << kFractionBits; }
inline double power_of_two(int e) { return std::bit_cast<double>(power_of_two_bits(e)); }
}  // namespace binary64

namespace binary32 {
inline constexpr int kFractionBits = 23;
inline constexpr int kBias = 127;
inline constexpr uint32_t kExponentMask = 0xff;  // after shifting right by kFractionBits
inline constexpr uint32_t kFractionMask = (uint32_t{1} << kFractionBits) - 1;
inline constexpr uint32_t kHiddenBit = uint32_t{1} << kFractionBits;
inline constexpr uint32_t kMagnitudeMask = 0x7fffffff;
inline constexpr uint32_t kInfinityBits = kExponentMask << kFractionBits;  // also the exponent field's mask in place
inline constexpr int kSubnormalScale = 1 - kBias - kFractionBits;          // -149

inline int biased_exponent(uint32_t bits) { return static_cast<int>((bits >> kFractionBits) & kExponentMask); }
}  // namespace binary32

// A double as sign, integer significand and scale: value = significand * 2^scale.
struct DoubleParts {
  bool negative;
  bool finite;
  uint64_t significand;  // integer, < 2^53; 0 for zeros
  int scale;
};

inline DoubleParts split_double(double x) {
  using namespace binary64;
  const uint64_t bits = std::bit_cast<uint64_t>(x);
  const int biased = biased_exponent(bits);
  if (biased == 0) return {sign(bits), true, fraction(bits), kSubnormalScale};
  return {sign(bits), biased != static_cast<int>(kExponentMask), fraction(bits) | kHiddenBit,
          biased - kBias - kFractionBits};
}

}  // namespace fplab::fp
